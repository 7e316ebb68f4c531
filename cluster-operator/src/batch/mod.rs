//! The `Batch` controller (infinispan-operator's kind): a CLI script run once against a cluster
//! by a Job ([`job`]). A Batch waits (`Initializing`, the reason says for what) until its
//! cluster is Ready and its script is there; then its Job is created (`Initialized`), runs
//! (`Running`) and ends `Succeeded` or `Failed` with the CLI's error lines. The script of
//! `spec.config` goes into a ConfigMap `<batch>-batch` owned by the Batch; a `spec.configMap`
//! is used only when it allows the cluster (the CR policy's annotation, like every object a CR
//! names). The Job and its pod stay, with the CLI's output in the pod's log, until the Batch is
//! deleted.
//!
//! Not run: against a cluster that asks clients for a certificate (`clientCert: Validate` or
//! `Authenticate`):
//! the CLI would need the operators' client certificate as a PKCS#12 keystore, which is not
//! issued yet; the Batch fails saying so.

pub mod job;

use std::sync::Arc;
use std::time::Duration;

use common_crds::batch::BatchPhase;
use common_crds::{Batch, BatchStatus, Infinispan};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};

use crate::build::security;
use crate::build::server::ServerImages;
use crate::cr_policy::{self, CrPolicy};
use job::{BatchJob, Outcome};

/// `app.kubernetes.io/name` of the Batch Jobs and their pods.
pub const JOB_APP_NAME: &str = "infinispan-batch";
/// Label of a Batch Job's pod naming its cluster: the cluster's NetworkPolicy admits it.
pub const BATCH_OF_LABEL: &str = "infinispan.org/batch-of";
/// The key of the script in the Batch's ConfigMap (infinispan-operator's).
pub const SCRIPT_KEY: &str = "batch";
/// How often a waiting Batch looks again (its cluster and ConfigMap are not all watched).
const WAIT: Duration = Duration::from_secs(10);

/// What the controller needs.
#[derive(Clone)]
pub struct Context {
    pub client: kube::Client,
    /// The server images (the CLI is in the cluster's).
    pub images: ServerImages,
    pub cluster_domain: String,
    pub image_pull_secrets: Vec<String>,
    pub policy: CrPolicy,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("cluster_domain", &self.cluster_domain)
            .field("image_pull_secrets", &self.image_pull_secrets)
            .finish_non_exhaustive()
    }
}

/// A reconcile failed on the API server (retried with backoff).
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct BatchError {
    what: String,
    #[source]
    source: kube::Error,
}

fn kube_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> BatchError {
    let what = what.into();
    move |source| BatchError { what, source }
}

/// Runs the Batch controller of `batches` (a namespace's or all) until `shutdown`.
pub async fn run(
    batches: Api<Batch>,
    infinispans: Api<Infinispan>,
    jobs: Api<Job>,
    ctx: Context,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let wc = watcher::Config::default();
    let controller = Controller::new(batches, wc.clone());
    let store = controller.store();
    controller
        .owns(
            jobs,
            wc.clone()
                .labels(&format!("app.kubernetes.io/name={JOB_APP_NAME}")),
        )
        .watches(infinispans, wc, move |cluster: Infinispan| {
            let (namespace, name) = (cluster.namespace(), cluster.name_any());
            store
                .state()
                .into_iter()
                .filter(|b| {
                    b.namespace() == namespace
                        && b.spec.cluster == name
                        && !b
                            .status
                            .as_ref()
                            .and_then(|s| s.phase)
                            .is_some_and(BatchPhase::finished)
                })
                .map(|b| ObjectRef::from_obj(&*b))
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, Arc::new(ctx))
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::warn!(%error, "Batch reconcile failed");
            }
        })
        .await;
}

fn error_policy(_: Arc<Batch>, error: &BatchError, _: Arc<Context>) -> Action {
    tracing::warn!(%error, "Batch: retrying");
    Action::requeue(WAIT)
}

/// What one look at a Batch decides.
enum Step {
    Wait(String),
    Fail(String),
    Run {
        /// The cluster, its TLS types written in (`security::resolved`).
        cluster: Box<Infinispan>,
        script: String,
    },
}

async fn reconcile(batch: Arc<Batch>, ctx: Arc<Context>) -> Result<Action, BatchError> {
    let phase = batch.status.as_ref().and_then(|s| s.phase);
    if phase.is_some_and(BatchPhase::finished) {
        return Ok(Action::await_change());
    }
    let namespace = batch.namespace().unwrap_or_default();
    let name = batch.name_any();
    let jobs = Api::<Job>::namespaced(ctx.client.clone(), &namespace);
    if let Some(found) = jobs
        .get_opt(&name)
        .await
        .map_err(kube_error(format!("reading the Job {namespace}/{name}")))?
    {
        return follow(&batch, &ctx, &found).await;
    }
    match step(&batch, &ctx).await? {
        Step::Wait(reason) => {
            set_status(&batch, &ctx, BatchPhase::Initializing, Some(reason), None).await?;
            Ok(Action::requeue(WAIT))
        }
        Step::Fail(reason) => {
            set_status(&batch, &ctx, BatchPhase::Failed, Some(reason), None).await?;
            Ok(Action::await_change())
        }
        Step::Run { cluster, script } => {
            let job = build_job(&batch, &ctx, &cluster, &script);
            match job {
                Ok(job) => {
                    match jobs.create(&PostParams::default(), &job).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(status)) if status.code == 409 => {}
                        Err(error) => {
                            return Err(
                                kube_error(format!("creating the Job {namespace}/{name}"))(error),
                            );
                        }
                    }
                    tracing::info!(batch = %format!("{namespace}/{name}"), cluster = %cluster.name_any(), "Batch Job created");
                    set_status(&batch, &ctx, BatchPhase::Initialized, None, Some(&cluster)).await?;
                    Ok(Action::requeue(WAIT))
                }
                Err(reason) => {
                    set_status(&batch, &ctx, BatchPhase::Failed, Some(reason), None).await?;
                    Ok(Action::await_change())
                }
            }
        }
    }
}

/// Whether the Batch can run now: its cluster Ready and reachable by the CLI, its script there.
async fn step(batch: &Batch, ctx: &Context) -> Result<Step, BatchError> {
    let namespace = batch.namespace().unwrap_or_default();
    let cluster_name = &batch.spec.cluster;
    let clusters = Api::<Infinispan>::namespaced(ctx.client.clone(), &namespace);
    let Some(cluster) = clusters
        .get_opt(cluster_name)
        .await
        .map_err(kube_error(format!(
            "reading the Infinispan {namespace}/{cluster_name}"
        )))?
    else {
        return Ok(Step::Wait(format!(
            "the Infinispan cluster {cluster_name} does not exist"
        )));
    };
    let ready = cluster
        .status
        .as_ref()
        .map(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
        .unwrap_or(false);
    if !ready {
        return Ok(Step::Wait(format!(
            "waiting for the Infinispan cluster {cluster_name} to be Ready"
        )));
    }
    let resolved = security::resolved(&cluster, &security::recorded(&cluster));
    if security::client_certificates_required(&resolved) {
        return Ok(Step::Fail(format!(
            "the cluster {cluster_name} asks clients for a certificate (clientCert: {:?}), which a Batch's CLI does not present yet: run the script with the Infinispan CLI from a client that has one",
            resolved
                .spec
                .security
                .endpoint_encryption
                .client_cert
                .unwrap_or_default()
        )));
    }
    let script = match (&batch.spec.config, &batch.spec.config_map) {
        (Some(config), _) => {
            let config_map = script_config_map_name(&batch.name_any());
            ensure_script(batch, ctx, &config_map, config).await?;
            config_map
        }
        (None, Some(config_map)) => {
            let found = Api::<ConfigMap>::namespaced(ctx.client.clone(), &namespace)
                .get_opt(config_map)
                .await
                .map_err(kube_error(format!(
                    "reading the ConfigMap {namespace}/{config_map}"
                )))?;
            let Some(found) = found else {
                return Ok(Step::Wait(format!(
                    "the ConfigMap {config_map} of spec.configMap does not exist"
                )));
            };
            if !cr_policy::reference_allowed(
                found.metadata.annotations.as_ref(),
                cluster_name,
                &ctx.policy,
            ) {
                return Ok(Step::Wait(format!(
                    "the ConfigMap {config_map} does not allow the cluster {cluster_name}: kubectl annotate configmap {config_map} {}={cluster_name}",
                    common_crds::labels::ALLOW_CLUSTERS_ANNOTATION
                )));
            }
            let script = found.data.as_ref().and_then(|d| d.get(SCRIPT_KEY));
            if script.is_none_or(|s| s.trim().is_empty()) {
                return Ok(Step::Fail(format!(
                    "the ConfigMap {config_map} has no script in its key {SCRIPT_KEY}"
                )));
            }
            config_map.clone()
        }
        (None, None) => {
            return Ok(Step::Fail(
                "neither spec.config nor spec.configMap gives a script".to_string(),
            ));
        }
    };
    Ok(Step::Run {
        cluster: Box::new(resolved),
        script,
    })
}

/// The ConfigMap holding the script of `spec.config`.
pub fn script_config_map_name(batch: &str) -> String {
    format!("{batch}-batch")
}

/// Creates the ConfigMap of `spec.config` (owned by the Batch), unless it exists.
async fn ensure_script(
    batch: &Batch,
    ctx: &Context,
    name: &str,
    script: &str,
) -> Result<(), BatchError> {
    let namespace = batch.namespace().unwrap_or_default();
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.clone()),
            owner_references: batch.controller_owner_ref(&()).map(|o| vec![o]),
            labels: Some(
                [(
                    "app.kubernetes.io/name".to_string(),
                    JOB_APP_NAME.to_string(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        data: Some([(SCRIPT_KEY.to_string(), script.to_string())].into()),
        ..ConfigMap::default()
    };
    match Api::<ConfigMap>::namespaced(ctx.client.clone(), &namespace)
        .create(&PostParams::default(), &config_map)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(kube_error(format!(
            "creating the ConfigMap {namespace}/{name}"
        ))(error)),
    }
}

/// The Job of `batch` against `cluster` (resolved) running the script of the ConfigMap `script`.
fn build_job(
    batch: &Batch,
    ctx: &Context,
    cluster: &Infinispan,
    script: &str,
) -> Result<Job, String> {
    let namespace = batch.namespace().unwrap_or_default();
    let name = batch.name_any();
    let owner = batch
        .controller_owner_ref(&())
        .ok_or_else(|| "the Batch has no uid yet".to_string())?;
    let image = ctx
        .images
        .resolve(cluster)
        .map_err(|error| format!("the cluster's server image: {error}"))?;
    let host = crate::build::resources_operator::client_service_host(cluster, &ctx.cluster_domain)
        .map_err(|error| error.to_string())?;
    let url = format!(
        "{}://{host}:{}",
        crate::build::resources_operator::endpoint_scheme(cluster),
        crate::build::server::SERVER_PORT
    );
    let credentials =
        crate::controller::credentials::operator_credentials_name(&cluster.name_any());
    let ca_secret = security::endpoint_certificate_secret(cluster);
    Ok(BatchJob {
        name: &name,
        namespace: &namespace,
        owner,
        cluster: &cluster.name_any(),
        image: &image.image,
        image_pull_secrets: &ctx.image_pull_secrets,
        url: &url,
        credentials_secret: &credentials,
        ca_secret: ca_secret.as_deref(),
        script_config_map: script,
    }
    .build())
}

/// Follows the Batch's Job to its end.
async fn follow(batch: &Batch, ctx: &Context, found: &Job) -> Result<Action, BatchError> {
    let namespace = batch.namespace().unwrap_or_default();
    let name = batch.name_any();
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), &namespace)
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={name}")))
        .await
        .map_err(kube_error(format!(
            "listing the pods of the Job {namespace}/{name}"
        )))?;
    match job::outcome(found, &pods.items) {
        Outcome::Running(running) => {
            let phase = if running {
                BatchPhase::Running
            } else {
                BatchPhase::Initialized
            };
            set_status(batch, ctx, phase, None, None).await?;
            Ok(Action::requeue(WAIT))
        }
        Outcome::Succeeded => {
            tracing::info!(batch = %format!("{namespace}/{name}"), "Batch succeeded");
            set_status(batch, ctx, BatchPhase::Succeeded, None, None).await?;
            Ok(Action::await_change())
        }
        Outcome::Failed(reason) => {
            tracing::info!(batch = %format!("{namespace}/{name}"), %reason, "Batch failed");
            set_status(batch, ctx, BatchPhase::Failed, Some(reason), None).await?;
            Ok(Action::await_change())
        }
    }
}

/// Writes the phase (and reason, cluster uid, Job, completion time) when they change.
async fn set_status(
    batch: &Batch,
    ctx: &Context,
    phase: BatchPhase,
    reason: Option<String>,
    cluster: Option<&Infinispan>,
) -> Result<(), BatchError> {
    let current = batch.status.clone().unwrap_or_default();
    let mut wanted = BatchStatus {
        phase: Some(phase),
        reason,
        cluster_uid: cluster
            .and_then(|c| c.meta().uid.clone())
            .or(current.cluster_uid.clone()),
        job: matches!(
            phase,
            BatchPhase::Initialized | BatchPhase::Running | BatchPhase::Succeeded
        )
        .then(|| batch.name_any())
        .or(current.job.clone()),
        completion_time: current.completion_time.clone(),
    };
    if phase.finished() && wanted.completion_time.is_none() {
        wanted.completion_time = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    }
    if wanted == current {
        return Ok(());
    }
    let namespace = batch.namespace().unwrap_or_default();
    let name = batch.name_any();
    Api::<Batch>::namespaced(ctx.client.clone(), &namespace)
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": {
                "phase": wanted.phase,
                // null removes a reason that no longer holds.
                "reason": wanted.reason,
                "clusterUid": wanted.cluster_uid,
                "job": wanted.job,
                "completionTime": wanted.completion_time,
            }})),
        )
        .await
        .map_err(kube_error(format!(
            "writing the status of the Batch {namespace}/{name}"
        )))?;
    Ok(())
}
