//! The `Infinispan` controller: turns each CR into its server objects and its resources
//! operator, applied with server-side apply under one field manager
//! ([`CLUSTER_OPERATOR_FIELD_MANAGER`]), and reports what it sees in the CR's status.
//!
//! One reconcile of a live CR:
//!
//! 1. puts the cluster operator's finalizer ([`CLUSTER_FINALIZER`]) on the CR (its own write);
//! 2. reads what the CR references ([`referenced`]; generates the operators' credentials and,
//!    unless the user names one, the application identities Secret);
//! 3. builds the server objects ([`crate::build::server`]) and applies them in order
//!    (ConfigMap, identities Secret, Services: headless, client and the operators', the
//!    `spec.expose` Service or Ingress, StatefulSet, PodDisruptionBudget), deleting a left-over
//!    identities Secret, external Service, Ingress or budget the CR no longer asks for;
//! 4. applies the resources operator's ServiceAccount, Role, RoleBinding and Deployment
//!    ([`crate::build::resources_operator`]), or drains and removes them when
//!    `spec.resourcesOperator.enabled` is false ([`teardown`]);
//! 5. computes the status ([`status::compute`]) from the objects the API server returned and,
//!    while a server or the resources operator is not ready, from what their pods say
//!    ([`pods::problem`]: an image that cannot be pulled, a container that keeps ending...), and
//!    writes it only when it changed; a new pod problem also gets a Warning Event on the CR.
//!
//! Triggers: the CR, the StatefulSets and Deployments it owns, and the pods of its clusters
//! (label `app.kubernetes.io/managed-by`, mapped to their CR by `infinispan.org/cluster`): a
//! pod's status is where the kubelet says why it cannot run. The pods are listed (one label
//! selected request) only by a reconcile that finds a workload not ready.
//!
//! A problem with the CR or what it references (a missing Secret, an unknown version, an object
//! the API server refuses) stops the apply where it is: what was applied before keeps running,
//! the status says `Degraded=True` with the reason, a Warning Event is published once per new
//! problem, and the CR is looked at again after [`PROBLEM_RETRY`] (user Secrets and ConfigMaps
//! are not watched: the operator would need to cache every Secret of the namespaces it
//! watches). The API server failing is an error: retried with kube-runtime's backoff.
//!
//! Deletion: the resources operator drains ([`teardown`]), then the finalizer is removed and the
//! garbage collector deletes every object the CR controls (server, data volumes, Secrets the
//! operator generated, mirror CRs).

pub mod apply;
pub mod credentials;
pub mod pods;
pub mod referenced;
pub mod status;
pub mod teardown;

use std::sync::Arc;
use std::time::Duration;

use common_crds::Infinispan;
use common_crds::infinispan::InfinispanStatus;
use common_crds::labels::{CLUSTER_FINALIZER, CLUSTER_LABEL, CLUSTER_OPERATOR_FIELD_MANAGER};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::Controller;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use operator_runtime::events::{Event, EventType, Recorder};
use serde::de::DeserializeOwned;

use crate::build::{expose, resources_operator, server};
use apply::{ApplyError, apply, apply_or_remove};
use status::{Observed, Pods, Problem, ResourcesOperator};
use teardown::Drain;

/// How soon a CR with a problem the user must fix is looked at again.
pub const PROBLEM_RETRY: Duration = Duration::from_secs(30);
/// How often a settled CR is looked at again without any event (drift of objects the
/// controller does not watch).
pub const RESYNC: Duration = Duration::from_secs(600);
/// How often a drain in progress is looked at.
pub const DRAIN_POLL: Duration = Duration::from_secs(2);

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
}

/// What every reconcile shares.
#[derive(Clone)]
pub struct Context {
    pub client: kube::Client,
    pub settings: Settings,
    /// One for the process: a repeated Event counts into the first one's series.
    pub recorder: Recorder,
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

/// The owner reference every object of `cluster` carries.
pub fn owner_reference(cluster: &Infinispan) -> OwnerReference {
    let mut owner = cluster
        .controller_owner_ref(&())
        .unwrap_or_else(|| OwnerReference {
            api_version: Infinispan::api_version(&()).into_owned(),
            kind: Infinispan::kind(&()).into_owned(),
            name: cluster.name_any(),
            uid: cluster.uid().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: None,
        });
    owner.block_owner_deletion = Some(true);
    owner
}

/// Writes `finalizers` on the object `name`, only if it is still at `resource_version`.
pub(crate) async fn patch_finalizers<K>(
    api: &Api<K>,
    name: &str,
    resource_version: &str,
    finalizers: Vec<String>,
) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = serde_json::json!({
        "metadata": { "resourceVersion": resource_version, "finalizers": finalizers }
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
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

fn error_policy(cluster: Arc<Infinispan>, error: &Error, _: Arc<Context>) -> Action {
    tracing::warn!(
        cluster = %cluster.name_any(),
        namespace = %cluster.namespace().unwrap_or_default(),
        %error,
        "reconcile failed; retrying"
    );
    Action::requeue(Duration::from_secs(5))
}

async fn reconcile(cluster: Arc<Infinispan>, context: Arc<Context>) -> Result<Action, Error> {
    let namespace = cluster.namespace().unwrap_or_default();
    let api: Api<Infinispan> = Api::namespaced(context.client.clone(), &namespace);
    let has_finalizer = cluster.finalizers().iter().any(|f| f == CLUSTER_FINALIZER);
    if cluster.meta().deletion_timestamp.is_some() {
        if !has_finalizer {
            return Ok(Action::await_change());
        }
        return finalize(&api, &cluster, &context).await;
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
    apply_cluster(&api, &cluster, &context).await
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
    let step = teardown::drain(&context.client, cluster, elapsed_since(since), timeout).await?;
    if let Drain::Done { released } = step
        && released > 0
    {
        let note = format!(
            "the resources operator did not release {released} CRs within {timeout:?}: their finalizers were removed by the cluster operator"
        );
        publish(context, cluster, EventType::Warning, "DrainTimeout", note).await;
    }
    Ok(step)
}

fn elapsed_since(since: Timestamp) -> Duration {
    let seconds = Timestamp::now()
        .as_second()
        .saturating_sub(since.as_second());
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
}

/// A live CR: apply, then report.
async fn apply_cluster(
    api: &Api<Infinispan>,
    cluster: &Infinispan,
    context: &Context,
) -> Result<Action, Error> {
    let name = cluster.name_any();
    let namespace = cluster.namespace().unwrap_or_default();
    let client = &context.client;
    let mut problem: Option<Problem> = None;
    let mut version = None;
    let mut stateful_set: Option<StatefulSet> = None;

    // The referenced objects, then the server.
    let read = match referenced::read(client, cluster).await {
        Ok(read) => Some(read),
        Err(error) if error.is_transient() => return Err(error.into()),
        Err(error) => {
            problem = Some(Problem {
                reason: error.reason().to_string(),
                message: error.to_string(),
            });
            None
        }
    };
    if let Some(read) = &read {
        match apply_server(client, cluster, &context.settings.server, &read.referenced).await {
            Ok((applied, image_version)) => {
                stateful_set = Some(applied);
                version = Some(image_version);
            }
            Err(ServerApplyError::Problem(found)) => problem = Some(found),
            Err(ServerApplyError::Api(error)) => return Err(error.into()),
        }
    }
    if stateful_set.is_none() {
        stateful_set = Api::<StatefulSet>::namespaced(client.clone(), &namespace)
            .get_opt(&server::stateful_set_name(&name))
            .await?;
    }

    // The resources operator.
    let mut requeue = if problem.is_some() {
        PROBLEM_RETRY
    } else {
        RESYNC
    };
    let resources_operator = if cluster.spec.resources_operator.enabled {
        match &read {
            Some(read) => {
                let mut settings = context.settings.resources_operator.clone();
                settings.credentials_secret = read.operator_credentials.name_any();
                settings.credentials_revision = Some(read.credentials_revision.clone());
                settings.server_ca = read.server_ca;
                match resources_operator::build(cluster, &settings) {
                    Ok(objects) => match apply_resources_operator(client, objects).await {
                        Ok(deployment) => ResourcesOperator::deployed(Some(&deployment)),
                        Err(ApplyError::Refused(refused)) => {
                            problem.get_or_insert(Problem {
                                reason: "Refused".into(),
                                message: refused.to_string(),
                            });
                            ResourcesOperator::deployed(None)
                        }
                        Err(error) => return Err(error.into()),
                    },
                    Err(error) => {
                        problem.get_or_insert(Problem {
                            reason: "InvalidResourcesOperator".into(),
                            message: error.to_string(),
                        });
                        ResourcesOperator::deployed(None)
                    }
                }
            }
            None => ResourcesOperator::deployed(
                Api::<Deployment>::namespaced(client.clone(), &namespace)
                    .get_opt(&common_crds::rbac::resources_operator_name(&name))
                    .await?
                    .as_ref(),
            ),
        }
    } else {
        let since = draining_since(cluster.status.as_ref()).unwrap_or_else(Timestamp::now);
        match drain_step(context, cluster, since).await? {
            Drain::Waiting { .. } => {
                requeue = DRAIN_POLL;
                ResourcesOperator::Draining
            }
            Drain::Done { .. } => ResourcesOperator::Disabled,
        }
    };

    let server_pods = Pods::of(stateful_set.as_ref(), cluster.spec.replicas);
    let (pods_problem, resources_operator_problem) =
        pod_problems(client, &namespace, &name, server_pods, resources_operator).await?;
    let observed = Observed {
        generation: cluster.meta().generation,
        problem: problem.clone(),
        pods: server_pods,
        pods_problem,
        resources_operator,
        resources_operator_problem,
        version,
        selector: server::selector(&name),
        operator_credentials_secret: read.as_ref().map(|r| r.operator_credentials.name_any()),
    };
    let previous = degraded_of(cluster.status.as_ref());
    let previous_pods = [
        reason_of(cluster.status.as_ref(), "Ready"),
        reason_of(cluster.status.as_ref(), "ResourcesOperatorReady"),
    ];
    let written = write_status(api, cluster, |current| {
        status::compute(current, &observed, Time(Timestamp::now()))
    })
    .await?;
    if let Some(problem) = &problem
        && degraded_of(Some(&written)) != previous
    {
        publish(
            context,
            cluster,
            EventType::Warning,
            &problem.reason,
            problem.message.clone(),
        )
        .await;
    }
    // A new reason why pods cannot run, once (the kubelet's own Events are on the pods).
    for (type_, previous) in ["Ready", "ResourcesOperatorReady"]
        .into_iter()
        .zip(previous_pods)
    {
        if let Some((reason, message)) = condition_of(Some(&written), type_)
            && pods::REASONS.contains(&reason.as_str())
            && previous.as_deref() != Some(reason.as_str())
        {
            publish(context, cluster, EventType::Warning, &reason, message).await;
        }
    }
    Ok(Action::requeue(requeue))
}

/// What keeps the server pods and the resources operator's pod from running, looked for only
/// when they are not all ready. Without the right to list pods (RBAC of an older release) the
/// conditions say what they said before this was looked for, with a warning in the log.
async fn pod_problems(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    servers: Pods,
    resources_operator: ResourcesOperator,
) -> Result<(Option<Problem>, Option<Problem>), kube::Error> {
    let servers_ready =
        servers.desired == 0 || (servers.ready >= servers.desired && servers.settled);
    let resources_operator_ready = !matches!(
        resources_operator,
        ResourcesOperator::Deployed { available: false }
    );
    if servers_ready && resources_operator_ready {
        return Ok((None, None));
    }
    let selector = format!(
        "app.kubernetes.io/instance={name},app.kubernetes.io/managed-by={CLUSTER_OPERATOR_FIELD_MANAGER}"
    );
    let listed = match Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&selector))
        .await
    {
        Ok(list) => list.items,
        Err(kube::Error::Api(status)) if status.code == 403 => {
            tracing::warn!(%namespace, cluster = %name, message = %status.message, "cannot list the cluster's pods: their problems are not reported (the operator's RBAC lacks pods list)");
            return Ok((None, None));
        }
        Err(error) => return Err(error),
    };
    let of = |selector: std::collections::BTreeMap<String, String>| -> Vec<Pod> {
        listed
            .iter()
            .filter(|pod| {
                let labels = pod.labels();
                selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
            .cloned()
            .collect()
    };
    let server_problem = if servers_ready {
        None
    } else {
        pods::problem(pods::Workload::Server, &of(server::selector_labels(name)))
    };
    let resources_operator_problem = if resources_operator_ready {
        None
    } else {
        pods::problem(
            pods::Workload::ResourcesOperator,
            &of(resources_operator::selector_labels(name)),
        )
    };
    Ok((server_problem, resources_operator_problem))
}

/// When the current drain began: the `lastTransitionTime` of `ResourcesOperatorReady` with
/// reason `Draining`.
fn draining_since(status: Option<&InfinispanStatus>) -> Option<Timestamp> {
    status?
        .conditions
        .iter()
        .find(|c| c.type_ == "ResourcesOperatorReady" && c.reason == "Draining")
        .map(|c| c.last_transition_time.0)
}

/// The reason and message of the condition `type_`.
fn condition_of(status: Option<&InfinispanStatus>, type_: &str) -> Option<(String, String)> {
    status?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.reason.clone(), c.message.clone()))
}

/// The reason of the condition `type_`.
fn reason_of(status: Option<&InfinispanStatus>, type_: &str) -> Option<String> {
    condition_of(status, type_).map(|(reason, _)| reason)
}

/// The reason and message of a `Degraded=True` condition.
fn degraded_of(status: Option<&InfinispanStatus>) -> Option<(String, String)> {
    status?
        .conditions
        .iter()
        .find(|c| c.type_ == "Degraded" && c.status == "True")
        .map(|c| (c.reason.clone(), c.message.clone()))
}

enum ServerApplyError {
    Problem(Problem),
    Api(ApplyError),
}

impl From<ApplyError> for ServerApplyError {
    fn from(error: ApplyError) -> Self {
        match error {
            ApplyError::Refused(refused) => Self::Problem(Problem {
                reason: "Refused".into(),
                message: refused.to_string(),
            }),
            error => Self::Api(error),
        }
    }
}

/// Builds and applies the server objects; returns the StatefulSet as applied and the version it
/// runs.
async fn apply_server(
    client: &kube::Client,
    cluster: &Infinispan,
    settings: &server::Settings,
    referenced: &server::Referenced,
) -> Result<(StatefulSet, String), ServerApplyError> {
    let image = settings.images.resolve(cluster).map_err(|error| {
        ServerApplyError::Problem(Problem {
            reason: error.reason().to_string(),
            message: error.to_string(),
        })
    })?;
    let objects = server::build(cluster, settings, referenced).map_err(|error| {
        ServerApplyError::Problem(Problem {
            reason: error.reason().to_string(),
            message: error.to_string(),
        })
    })?;
    let namespace = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let uid = cluster.uid().unwrap_or_default();
    apply(client, &objects.config_map).await?;
    apply_or_remove(
        client,
        objects.identities_secret.as_ref(),
        &namespace,
        &server::identities_secret_name(&name),
        &uid,
    )
    .await?;
    apply(client, &objects.ping_service).await?;
    apply(client, &objects.client_service).await?;
    apply(client, &objects.operator_service).await?;
    let exposed = expose::build(cluster);
    apply_or_remove(
        client,
        exposed.service.as_ref(),
        &namespace,
        &expose::external_service_name(&name),
        &uid,
    )
    .await?;
    apply_or_remove(
        client,
        exposed.ingress.as_ref(),
        &namespace,
        &expose::ingress_name(&name),
        &uid,
    )
    .await?;
    let stateful_set = apply(client, &objects.stateful_set).await?;
    apply_or_remove(
        client,
        objects.pod_disruption_budget.as_ref(),
        &namespace,
        &server::stateful_set_name(&name),
        &uid,
    )
    .await?;
    Ok((stateful_set, image.version))
}

/// Applies the resources operator's objects; returns its Deployment as applied.
async fn apply_resources_operator(
    client: &kube::Client,
    objects: resources_operator::Objects,
) -> Result<Deployment, ApplyError> {
    apply(client, &objects.service_account).await?;
    apply(client, &objects.role).await?;
    apply(client, &objects.role_binding).await?;
    apply(client, &objects.deployment).await
}

/// Writes the status `next(current)` when it differs from the CR's.
async fn write_status(
    api: &Api<Infinispan>,
    cluster: &Infinispan,
    next: impl FnOnce(Option<&InfinispanStatus>) -> InfinispanStatus,
) -> Result<InfinispanStatus, kube::Error> {
    let current = cluster.status.as_ref();
    let new = next(current);
    if current == Some(&new) {
        return Ok(new);
    }
    let patch = serde_json::json!({ "status": new });
    match api
        .patch_status(
            &cluster.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(new),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(new),
        Err(error) => Err(error),
    }
}

/// Publishes an Event on the CR (failures are logged: an Event is never worth a retry).
async fn publish(
    context: &Context,
    cluster: &Infinispan,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: Some(note),
        action: "Reconcile".to_string(),
        secondary: None,
    };
    if let Err(error) = context
        .recorder
        .publish(&event, &cluster.object_ref(&()))
        .await
    {
        tracing::warn!(%error, "publishing an Event failed");
    }
}
