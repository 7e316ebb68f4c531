//! The `Infinispan` controller: turns each CR into its server objects and its resources
//! operator, applied with server-side apply under one field manager
//! ([`CLUSTER_OPERATOR_FIELD_MANAGER`]), and reports what it sees in the CR's status.
//!
//! One reconcile of a live CR (`apply_cluster`, in this order):
//!
//! 1. puts the cluster operator's finalizer ([`CLUSTER_FINALIZER`]) on the CR (its own write);
//! 2. checks the CR against the operator's policy ([`crate::cr_policy`], [`desired::refusal`]):
//!    a CR asking for more than it may gets `Degraded=True, reason=PolicyRefused` and nothing
//!    applied, not even its credentials; then decides the TLS in effect
//!    ([`crate::build::security`]: the CR's types, else what the cluster was created with; a
//!    transport change while pods run is refused, `TransportEncryptionChange`), reads what the
//!    CR references ([`referenced`]; generates the operators' credentials and, unless the user
//!    names one, the application identities Secret) and keeps the cluster's CA and the
//!    certificates issued from it ([`certificates`]);
//! 3. validates and builds, without a call to the API server ([`desired`]): the server objects
//!    ([`crate::build::server`]) and the resources operator's ServiceAccount, Role, RoleBinding
//!    and Deployment ([`crate::build::resources_operator`]);
//! 4. applies them ([`apply`]): the server objects in order (ConfigMap, identities Secret,
//!    Services: headless, client and the operators', the `spec.expose` Service or Ingress,
//!    StatefulSet, PodDisruptionBudget), deleting a left-over identities Secret, external
//!    Service, Ingress or budget the CR no longer asks for; then the resources operator's, or,
//!    when `spec.resourcesOperator.enabled` is false, drains and removes them ([`teardown`]);
//!    the result is what was applied ([`report::Applied`]);
//! 5. computes the status ([`status::compute`]) from what was applied and, while a server or
//!    the resources operator is not ready, from what their pods say ([`pods::problem`]: an image
//!    that cannot be pulled, a container that keeps ending...), and writes it only when it
//!    changed; a new problem gets a Warning Event on the CR ([`report`]);
//! 6. says when to look again ([`retry`]; never later than the next certificate renewal).
//!
//! Triggers: the CR, the StatefulSets and Deployments it owns, and the pods of its clusters
//! (label `app.kubernetes.io/managed-by`, mapped to their CR by `infinispan.org/cluster`): a
//! pod's status is where the kubelet says why it cannot run. The pods are listed (one label
//! selected request) only by a reconcile that finds a workload not ready.
//!
//! A problem with the CR or what it references (a missing Secret, an unknown version, an object
//! the API server refuses; a
//! [`ProblemReason`]) stops the apply where it is: what was applied
//! before keeps running, the status says `Degraded=True` with the reason, and a Warning Event
//! is published once per new problem. The CR is looked at again on its next change, or, when
//! the problem may clear without one (a referenced Secret or ConfigMap, an admission policy),
//! after [`PROBLEM_RETRY`]: user Secrets and ConfigMaps are not watched (the operator would
//! need to cache every Secret of the namespaces it watches). The API server failing is an
//! error: retried with an exponential backoff per CR ([`retry::Backoff`]).
//!
//! Deletion: the resources operator drains ([`teardown`]), then the finalizer is removed and the
//! garbage collector deletes every object the CR controls (server, data volumes, Secrets the
//! operator generated, mirror CRs).

pub mod apply;
pub mod certificates;
pub mod credentials;
pub mod desired;
pub mod graceful_stop;
pub mod monitoring;
pub mod pods;
pub mod referenced;
pub mod report;
pub mod retry;
pub mod rolling;
pub mod shared_operator;
pub mod sites;
pub mod status;
pub mod teardown;
pub mod upgrade;
pub mod versions;

use std::sync::Arc;
use std::time::Duration;

use common_crds::Infinispan;
use common_crds::conditions::{ConditionType, ProblemReason};
use common_crds::infinispan::{InfinispanStatus, ResourcesOperatorDeployment};
use common_crds::labels::{CLUSTER_FINALIZER, CLUSTER_LABEL, CLUSTER_OPERATOR_FIELD_MANAGER};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::Controller;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use operator_runtime::events::{EventType, Recorder};

use crate::build::{resources_operator, security, server};
pub use apply::owner_reference;
use apply::{ApplyError, patch_finalizers};
use desired::Desired;
use report::{Applied, publish, write_status};
pub use retry::{DRAIN_POLL, PROBLEM_RETRY, RESYNC};
use status::{Problem, ResourcesOperator};
use teardown::Drain;

/// Operator-wide settings of the controller.
#[derive(Clone, Debug)]
pub struct Settings {
    pub server: server::Settings,
    /// The resources operator's image, cluster domain and pull Secrets (its credentials Secret
    /// and revision are set per cluster).
    pub resources_operator: resources_operator::Settings,
    /// How long the resources operator may take to release its finalizers before the cluster
    /// operator removes them itself.
    pub drain_timeout: Duration,
    /// What a CR may ask for ([`crate::cr_policy`]).
    pub policy: crate::cr_policy::CrPolicy,
    /// The lifetimes of what the operator issues, and the Services' domain.
    pub certificates: referenced::CertificateSettings,
    /// How long the operator asks a stopping cluster's server to shut its container down
    /// before it stops the pods without ([`graceful_stop`]).
    pub graceful_stop_timeout: Duration,
}

/// What every reconcile shares.
#[derive(Clone)]
pub struct Context {
    pub client: kube::Client,
    pub settings: Settings,
    /// One for the process: a repeated Event counts into the first one's series.
    pub recorder: Recorder,
    /// The failures in a row of each CR whose last reconcile failed.
    pub backoff: Arc<retry::Backoff<ObjectRef<Infinispan>>>,
    /// How the operator reaches the clusters' servers (the graceful stop).
    pub servers: Arc<crate::servers::Servers>,
    /// What each server pod said its version is ([`versions`]).
    pub versions: Arc<versions::Versions>,
    /// The namespaces the shared label policy's binding matches.
    pub policy_scope: crate::policy_scope::PolicyScope,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("settings", &self.settings)
            .field("recorder", &self.recorder)
            .finish_non_exhaustive()
    }
}

/// A reconcile failed in a way worth a retry with backoff (the API server failed).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("reading the cluster's objects failed: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Reference(#[from] referenced::ReferenceError),
}

/// Runs the controller over `api` (one namespace, or all) until `shutdown` completes; `owned`
/// gives the StatefulSets, Deployments and pods of the same scope.
pub async fn run(
    api: Api<Infinispan>,
    owned: impl Fn() -> (Api<StatefulSet>, Api<Deployment>, Api<Pod>),
    context: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (stateful_sets, deployments, pods) = owned();
    let managed = format!("app.kubernetes.io/managed-by={CLUSTER_OPERATOR_FIELD_MANAGER}");
    let owned_config = watcher::Config::default().labels(&managed);
    Controller::new(api, watcher::Config::default())
        .owns(stateful_sets, owned_config.clone())
        .owns(deployments, owned_config.clone())
        // A pod is owned by its StatefulSet or ReplicaSet, not by the CR: mapped by its label.
        .watches(pods, owned_config, |pod: Pod| {
            let cluster = pod.labels().get(CLUSTER_LABEL)?;
            Some(ObjectRef::new(cluster).within(&pod.namespace()?))
        })
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile");
            }
        })
        .await;
}

/// The API server failed: retried after a backoff that grows with the CR's failures in a row.
fn error_policy(cluster: Arc<Infinispan>, error: &Error, context: Arc<Context>) -> Action {
    tracing::warn!(
        cluster = %cluster.name_any(),
        namespace = %cluster.namespace().unwrap_or_default(),
        %error,
        "reconcile failed; retrying"
    );
    Action::requeue(context.backoff.failed(ObjectRef::from_obj(&*cluster)))
}

/// One reconcile; a success forgets the CR's failures.
async fn reconcile(cluster: Arc<Infinispan>, context: Arc<Context>) -> Result<Action, Error> {
    let action = reconcile_cluster(&cluster, &context).await?;
    context.backoff.succeeded(&ObjectRef::from_obj(&*cluster));
    Ok(action)
}

async fn reconcile_cluster(cluster: &Infinispan, context: &Context) -> Result<Action, Error> {
    let namespace = cluster.namespace().unwrap_or_default();
    let api: Api<Infinispan> = Api::namespaced(context.client.clone(), &namespace);
    let has_finalizer = cluster.finalizers().iter().any(|f| f == CLUSTER_FINALIZER);
    if cluster.meta().deletion_timestamp.is_some() {
        context.versions.forget(cluster);
        if !has_finalizer {
            return Ok(Action::await_change());
        }
        return finalize(&api, cluster, context).await;
    }
    if !has_finalizer {
        let mut finalizers = cluster.finalizers().to_vec();
        finalizers.push(CLUSTER_FINALIZER.to_string());
        patch_finalizers(
            &api,
            &cluster.name_any(),
            &cluster.resource_version().unwrap_or_default(),
            finalizers,
        )
        .await?;
        // The write's watch event brings the CR back.
        return Ok(Action::await_change());
    }
    apply_cluster(&api, cluster, context).await
}

/// Deletion: drain, then release the CR.
async fn finalize(
    api: &Api<Infinispan>,
    cluster: &Infinispan,
    context: &Context,
) -> Result<Action, Error> {
    let since = cluster
        .meta()
        .deletion_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or_else(Timestamp::now);
    match drain_step(context, cluster, since).await? {
        Drain::Waiting { holding } => {
            tracing::info!(cluster = %cluster.name_any(), holding, "deleting: waiting for the resources operator to release its finalizers");
            write_status(api, cluster, |current| {
                status::deleting(
                    current,
                    cluster.meta().generation,
                    holding,
                    Time(Timestamp::now()),
                )
            })
            .await?;
            Ok(Action::requeue(DRAIN_POLL))
        }
        Drain::Done { released } => {
            let finalizers: Vec<String> = cluster
                .finalizers()
                .iter()
                .filter(|f| *f != CLUSTER_FINALIZER)
                .cloned()
                .collect();
            match patch_finalizers(
                api,
                &cluster.name_any(),
                &cluster.resource_version().unwrap_or_default(),
                finalizers,
            )
            .await
            {
                Ok(()) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error.into()),
            }
            tracing::info!(cluster = %cluster.name_any(), released, "deleted: the garbage collector removes the cluster's objects");
            Ok(Action::await_change())
        }
    }
}

/// One step of the drain of `cluster`'s resources operator, begun at `since`; publishes
/// `DrainTimeout` when the cluster operator had to release finalizers itself.
async fn drain_step(
    context: &Context,
    cluster: &Infinispan,
    since: Timestamp,
) -> Result<Drain, Error> {
    let timeout = context.settings.drain_timeout;
    let step = teardown::drain(
        &context.client,
        cluster,
        elapsed_since(since),
        timeout,
        &context.settings.resources_operator,
        &context.policy_scope,
    )
    .await?;
    if let Drain::Done { released } = step
        && released > 0
    {
        let note = format!(
            "the resources operator did not release {released} CRs within {timeout:?}: their finalizers were removed by the cluster operator"
        );
        let recorder = &context.recorder;
        publish(recorder, cluster, EventType::Warning, "DrainTimeout", note).await;
    }
    Ok(step)
}

fn elapsed_since(since: Timestamp) -> Duration {
    let seconds = Timestamp::now()
        .as_second()
        .saturating_sub(since.as_second());
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
}

/// A live CR, step by step (the module's list from step 2).
async fn apply_cluster(
    api: &Api<Infinispan>,
    cluster: &Infinispan,
    context: &Context,
) -> Result<Action, Error> {
    let client = &context.client;
    let settings = &context.settings;
    // 2. The operator's policy: a CR asking for more than it may gets nothing applied, not even
    // its credentials (what ran before keeps running).
    let refusal = desired::refusal(
        cluster,
        &settings.server,
        &settings.resources_operator,
        &settings.policy,
    );
    // 3. The TLS in effect: the CR's, else what the cluster was created with
    // (`build::security`); the version: the CR's, else the one it runs (`upgrade`); the
    // builders get the CR with them written in, and with the replicas a graceful stop or
    // restart allows (`graceful_stop`).
    let existing =
        Api::<StatefulSet>::namespaced(client.clone(), &cluster.namespace().unwrap_or_default())
            .get_opt(&server::stateful_set_name(&cluster.name_any()))
            .await?;
    let tls = security::in_effect(cluster, security::created_with(existing.as_ref()));
    let mut resolved = security::resolved(cluster, &tls);
    let versions = upgrade::decide(cluster, existing.as_ref(), &settings.server.images);
    resolved.spec.version = versions.version;
    let downgrade = versions
        .downgrade
        .map(|message| Problem::new(ProblemReason::VersionDowngrade, message));
    let running = graceful_stop::Existing::of(existing.as_ref());
    let mut stop = graceful_stop::plan(
        cluster.spec.replicas,
        running,
        !cluster.spec.service.container.ephemeral_storage,
        versions.shutdown_upgrade,
        Timestamp::now(),
        settings.graceful_stop_timeout,
    );
    resolved.spec.replicas = stop.replicas;
    let transport_change = security::transport_change_refused(
        existing.as_ref(),
        tls.transport_encryption,
        cluster.spec.replicas,
    )
    .map(|(running, wanted)| {
        Problem::new(
            ProblemReason::TransportEncryptionChange,
            format!(
                "spec.security.transportEncryption is {} but the running pods use {}: pods with and without transport TLS cannot form one cluster. Scale the cluster to 0 (spec.replicas: 0), change it, then scale it up again; or set it back to {}",
                security::transport_type_name(wanted),
                security::transport_type_name(running),
                security::transport_type_name(running),
            ),
        )
    });
    let mut renew_at = None;
    let service_monitors_served = monitoring::service_monitors_served(client).await?;
    let read = match refusal.or(transport_change).or(downgrade) {
        Some(refused) => Err(refused),
        // 4. What the CR references and what the operator issues (a missing or unusable object
        // is a problem), then validate and build.
        None => match referenced::read(
            client,
            &resolved,
            &tls,
            &settings.certificates,
            &settings.policy,
            service_monitors_served,
        )
        .await
        {
            Ok(mut read) => {
                renew_at = read.renew_at;
                // Asked at every reconcile, like ServiceMonitors: a Route left by an earlier
                // `spec.expose` is deleted wherever Routes are served.
                read.routes_served = monitoring::routes_served(client).await?;
                Ok(read)
            }
            Err(error) => Err(error.into_problem()?),
        },
    };
    let build = |resolved: &Infinispan, stop: &graceful_stop::Plan| {
        read.as_ref().map_err(Clone::clone).map(|read| {
            let mut desired = desired::build(
                resolved,
                &settings.server,
                &settings.resources_operator,
                read,
            );
            if let Ok(server) = &mut desired.server {
                record(server, stop);
            }
            desired
        })
    };
    // 5. Apply, a new pod template gated (`rolling`).
    let rollout = existing.as_ref().map(rolling::State::of);
    let applied_digest = existing.as_ref().and_then(|sts| {
        sts.metadata
            .annotations
            .as_ref()?
            .get(rolling::TEMPLATE_ANNOTATION)
            .cloned()
    });
    let mut desired = build(&resolved, &stop);
    let mut rolling_on = false;
    if let Ok(Desired {
        server: Ok(server), ..
    }) = &mut desired
    {
        rolling_on = gate(
            context,
            cluster,
            server,
            rollout,
            applied_digest.as_deref(),
            stop.hold.is_some(),
        )
        .await;
    }
    let mut applied = apply_desired(context, &resolved, desired).await?;
    // 5b. Stopping: the server's container shut down cluster-wide, then the pods.
    if stop.shutdown && applied.problem.is_none() {
        let pods = running.map_or(0, |r| r.pods);
        stop = shut_down_step(context, cluster, stop, pods).await;
        if stop.replicas == 0 {
            resolved.spec.replicas = 0;
            applied = apply_desired(context, &resolved, build(&resolved, &stop)).await?;
        }
    }
    // A record the plan no longer has (the restart is done) goes, even if another field
    // manager wrote it (server-side apply removes only what the operator applied).
    let recorded = running.is_some_and(|r| r.stopped_with.is_some() || r.since.is_some());
    if recorded && stop.stopped_with.is_none() && applied.problem.is_none() {
        graceful_stop::forget(client, cluster).await?;
    }
    applied.security = Some(tls);
    applied.replicas = stop.replicas;
    let shutdown_failing = matches!(
        stop.phase,
        graceful_stop::Phase::ShuttingDown {
            failed: Some(_),
            ..
        }
    );
    applied.stop = Some(stop.phase);
    applied.server_versions =
        versions::server_versions(context, cluster, applied.stateful_set.as_ref()).await;
    let ready_replicas = applied
        .stateful_set
        .as_ref()
        .and_then(|s| s.status.as_ref())
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    applied.sites = sites::observe(context, cluster, ready_replicas).await;
    // 6. Report.
    report::report(api, client, &context.recorder, cluster, &applied).await?;
    // 7. When to look again.
    if shutdown_failing {
        return Ok(Action::requeue(graceful_stop::RETRY));
    }
    if rolling_on && applied.problem.is_none() {
        return Ok(Action::requeue(rolling::STEP_INTERVAL));
    }
    let draining = applied.resources_operator == ResourcesOperator::Draining;
    let renew_in = renew_at.map(|at: Timestamp| {
        Duration::from_secs(
            u64::try_from(at.as_second() - Timestamp::now().as_second()).unwrap_or(0),
        )
    });
    // The sites view is looked at again while the CR has sites.
    let sites_due = applied.sites.is_some().then_some(sites::SITES_POLL);
    // A hand-over between a per-cluster and the shared resources operator: the side leaving
    // keeps its binding until it released the Lease.
    let handover_due = applied.handover.then_some(shared_operator::HANDOVER_CHECK);
    let due_in = renew_in
        .into_iter()
        .chain(sites_due)
        .chain(handover_due)
        .min();
    Ok(retry::after_apply(
        applied.problem.map(|problem| problem.reason),
        draining,
        due_in,
    ))
}

/// What the StatefulSet records beside what the builders give it: the version applied, a
/// graceful stop in progress, and, in a Shutdown upgrade, the pods held on their template.
fn record(server: &mut desired::Server, stop: &graceful_stop::Plan) {
    let sts = &mut server.objects.stateful_set;
    let annotations = sts
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    annotations.extend(stop.annotations());
    annotations.insert(
        upgrade::VERSION_ANNOTATION.to_string(),
        server.version.clone(),
    );
    if let Some(pods) = stop.hold {
        upgrade::hold_template(sts, pods);
    }
}

/// Step 5, the rolling gate: records the digest of the pod template applied and sets the
/// update partition [`rolling::partition`] decides (the cluster's health asked only when it
/// matters); `true` while a rollout is under way. A Shutdown upgrade (`held`) holds the pods
/// itself.
async fn gate(
    context: &Context,
    cluster: &Infinispan,
    server: &mut desired::Server,
    existing: Option<rolling::State>,
    applied_digest: Option<&str>,
    held: bool,
) -> bool {
    let sts = &mut server.objects.stateful_set;
    let digest = rolling::template_digest(sts);
    let changes = applied_digest != Some(digest.as_str());
    sts.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(rolling::TEMPLATE_ANNOTATION.to_string(), digest);
    if held {
        return false;
    }
    let replicas = sts.spec.replicas.unwrap_or(1);
    let health = if rolling::needs_health(existing, changes, replicas) {
        cluster_health(context, cluster, replicas).await
    } else {
        rolling::Health::NotYet
    };
    let partition = rolling::partition(existing, changes, replicas, health);
    if partition > 0 {
        upgrade::hold_template(sts, partition);
    }
    rolling::rolling(existing, changes, partition)
}

/// Whether every one of `replicas` members is in the cluster's view and the server says
/// `HEALTHY` (asked through the operators' Service: any member sees the whole cluster).
async fn cluster_health(context: &Context, cluster: &Infinispan, replicas: i32) -> rolling::Health {
    let Ok(server) = context.servers.client_for(&context.client, cluster).await else {
        return rolling::Health::NotYet;
    };
    let healthy = matches!(
        server.health().await,
        Ok(infinispan_rest::HealthStatus::Healthy)
    );
    let members = server
        .container_info()
        .await
        .map(|info| info.cluster_members.len())
        .unwrap_or(0);
    if healthy && i32::try_from(members).unwrap_or(0) >= replicas {
        rolling::Health::Whole
    } else {
        tracing::debug!(cluster = %cluster.name_any(), healthy, members, replicas, "the rollout waits for the cluster");
        rolling::Health::NotYet
    }
}

/// Step 5b: the container shutdown `stop` asks for, and its outcome (an Event either way it
/// ends): the pods stop, gracefully or after the deadline without, or the failure is kept for
/// the status and the request is tried again.
async fn shut_down_step(
    context: &Context,
    cluster: &Infinispan,
    stop: graceful_stop::Plan,
    pods: i32,
) -> graceful_stop::Plan {
    let recorder = &context.recorder;
    match shut_down_container(context, cluster).await {
        Ok(()) => {
            let note = format!(
                "the server shut its cache container down cluster-wide, each pod persisting its caches' state: stopping the {} pods",
                stop.stopped_with.unwrap_or(pods)
            );
            publish(recorder, cluster, EventType::Normal, "GracefulStop", note).await;
            stop.shut_down(pods, true)
        }
        Err(error) if stop.gave_up(Timestamp::now()) => {
            let note = format!(
                "the server's cache container could not be shut down gracefully within {:?} ({error}): its pods are stopped without it; persistent caches may recover from their stores only",
                context.settings.graceful_stop_timeout
            );
            publish(
                recorder,
                cluster,
                EventType::Warning,
                "GracefulStopFailed",
                note,
            )
            .await;
            stop.shut_down(pods, false)
        }
        Err(error) => stop.failed(error),
    }
}

/// Asks `cluster`'s server (pod 0, through the headless Service: it answers while unready)
/// for the cluster-wide shutdown of its cache container; down already counts as done. The
/// error, for the status, when the request fails.
async fn shut_down_container(context: &Context, cluster: &Infinispan) -> Result<(), String> {
    let server = context
        .servers
        .node_client_for(&context.client, cluster)
        .await
        .map_err(|error| error.to_string())?;
    match server.shutdown_container().await {
        Ok(outcome) => {
            tracing::info!(
                cluster = %cluster.name_any(),
                namespace = %cluster.namespace().unwrap_or_default(),
                ?outcome,
                "the server's cache container is shut down; stopping the pods"
            );
            Ok(())
        }
        Err(error) => Err(error.to_string()),
    }
}

/// Step 4: the server, then the resources operator; where nothing was applied, what runs.
async fn apply_desired(
    context: &Context,
    cluster: &Infinispan,
    desired: Result<Desired, Problem>,
) -> Result<Applied, Error> {
    let client = &context.client;
    let (server, resources_operator, operator_credentials_secret) = match desired {
        Ok(desired) => (
            desired.server,
            desired.resources_operator,
            Some(desired.operator_credentials_secret),
        ),
        Err(problem) => (Err(problem), None, None),
    };
    let mut problem = None;
    let (mut stateful_set, mut version) = (None, None);
    match server {
        Ok(server) => match refused(
            apply::apply_server(
                client,
                cluster,
                &server.objects,
                &server.exposed,
                apply::Served {
                    service_monitors: server.service_monitors_served,
                    routes: server.routes_served,
                },
            )
            .await,
        )? {
            Ok(applied) => (stateful_set, version) = (Some(applied), Some(server.version)),
            Err(refused) => problem = Some(refused),
        },
        Err(invalid) => problem = Some(invalid),
    }
    if stateful_set.is_none() {
        let namespace = cluster.namespace().unwrap_or_default();
        stateful_set = Api::<StatefulSet>::namespaced(client.clone(), &namespace)
            .get_opt(&server::stateful_set_name(&cluster.name_any()))
            .await?;
    }
    let (resources_operator, resources_operator_problem, handover) =
        apply_resources_operator(context, cluster, resources_operator).await?;
    Ok(Applied {
        stateful_set,
        version,
        resources_operator,
        // The server's problem comes first.
        problem: problem.or(resources_operator_problem),
        operator_credentials_secret,
        security: None,
        replicas: cluster.spec.replicas,
        stop: None,
        server_versions: None,
        sites: None,
        handover,
    })
}

/// The resources operator: drained when disabled; else applied when built (its own Deployment,
/// after leaving the shared operator; or a member of the shared one, see
/// [`shared_operator`]), or read when nothing was (`desired` is `None` when what the CR
/// references could not be read). The last value: a hand-over between the two is in progress.
async fn apply_resources_operator(
    context: &Context,
    cluster: &Infinispan,
    desired: Option<Result<resources_operator::Built, Problem>>,
) -> Result<(ResourcesOperator, Option<Problem>, bool), Error> {
    let client = &context.client;
    if !cluster.spec.resources_operator.enabled {
        let since = draining_since(cluster.status.as_ref()).unwrap_or_else(Timestamp::now);
        let state = match drain_step(context, cluster, since).await? {
            Drain::Waiting { .. } => ResourcesOperator::Draining,
            Drain::Done { .. } => ResourcesOperator::Disabled,
        };
        return Ok((state, None, false));
    }
    let built = match desired {
        Some(Ok(built)) => built,
        Some(Err(invalid)) => {
            return Ok((ResourcesOperator::deployed(None), Some(invalid), false));
        }
        None => {
            let namespace = cluster.namespace().unwrap_or_default();
            let name = match cluster.spec.resources_operator.deployment {
                ResourcesOperatorDeployment::PerCluster => {
                    common_crds::rbac::resources_operator_name(&cluster.name_any())
                }
                ResourcesOperatorDeployment::SharedInNamespace => {
                    common_crds::shared::SHARED_NAME.to_string()
                }
            };
            let found = Api::<Deployment>::namespaced(client.clone(), &namespace)
                .get_opt(&name)
                .await?;
            let state = match cluster.spec.resources_operator.deployment {
                ResourcesOperatorDeployment::PerCluster => ResourcesOperator::deployed,
                ResourcesOperatorDeployment::SharedInNamespace => {
                    ResourcesOperator::deployed_shared
                }
            };
            return Ok((state(found.as_ref()), None, false));
        }
    };
    let shared = matches!(built, resources_operator::Built::Shared(_));
    let applied = match built {
        resources_operator::Built::PerCluster(mut objects) => {
            let settings = &context.settings.resources_operator;
            let left = refused(
                shared_operator::leave(client, cluster, settings, &context.policy_scope).await,
            )?;
            let holder = refused(shared_operator::lease_holder(client, cluster).await)?;
            match (left, holder) {
                (Ok(_), Ok(holder)) => {
                    let mode = ResourcesOperatorDeployment::PerCluster;
                    shared_operator::with_subjects(
                        &mut objects.role_binding,
                        &shared_operator::subjects(mode, holder, &cluster.name_any()),
                    );
                    refused(apply::apply_resources_operator(client, &objects).await)?
                        .map(|deployment| (deployment, shared_operator::handing_over(mode, holder)))
                }
                (Err(refused), _) | (_, Err(refused)) => Err(refused),
            }
        }
        resources_operator::Built::Shared(member) => {
            refused(shared_operator::join(client, cluster, &member, &context.policy_scope).await)?
        }
    };
    let state = if shared {
        ResourcesOperator::deployed_shared
    } else {
        ResourcesOperator::deployed
    };
    Ok(match applied {
        Ok((deployment, handover)) => (state(Some(&deployment)), None, handover),
        Err(refused) => (state(None), Some(refused), false),
    })
}

/// An apply the API server refused is a problem of the input; its failure is an error.
fn refused<T>(result: Result<T, ApplyError>) -> Result<Result<T, Problem>, Error> {
    match result {
        Ok(applied) => Ok(Ok(applied)),
        Err(error) => Ok(Err(error.into_problem()?)),
    }
}

/// When the current drain began: the `lastTransitionTime` of `ResourcesOperatorReady` with
/// reason `Draining`.
fn draining_since(status: Option<&InfinispanStatus>) -> Option<Timestamp> {
    report::condition_of(status, ConditionType::ResourcesOperatorReady)
        .filter(|c| c.reason == status::DRAINING)
        .map(|c| c.last_transition_time.0)
}
