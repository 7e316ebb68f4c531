//! `Backup` and `Restore` CRs, carried out through the server's REST backup API.
//!
//! One entry point, [`run`]: two kube-runtime controllers (Backups, Restores) that run until
//! the shutdown future completes. Each reconcile is a small pipeline: read what the CR refers
//! to (its cluster, the Restore's Backup), reach the server ([`crate::servers`]), do at most one
//! step of the job (start it, or look at it), then [`phase::decide`] (pure) gives the status,
//! the requeue and the Event; the status is written (server-side apply, field manager
//! [`CLUSTER_OPERATOR_FIELD_MANAGER`]) only when it changed.
//!
//! - [`backups`]: Backup: `Pending` -> `Running` (server job started, `startTime`) ->
//!   `Succeeded` (`Complete=True`, `archive` = `<cluster>:<server job>`) or `Failed`
//!   (`Failed=True` with the server's message). The finalizer
//!   [`BACKUP_FINALIZER`] deletes the server-side archive when the CR is deleted.
//! - [`restores`]: Restore: waits for its Backup to succeed, streams the archive from the
//!   source cluster's server into a local file ([`archive`]) and from there to the target's
//!   server as a multipart upload (no shared filesystem; the archive is never whole in
//!   memory), then follows the restore job the same way. Proto schemas selected with anything
//!   else are restored first, in a job of their own that is waited for: the server restores
//!   the kinds of one job concurrently, and an indexed cache restored before its schema fails
//!   the job (ISPN028022).
//! - [`volume`] (pure) and [`archive_job`]: `storage: Volume` (the default): the archive copied
//!   by a Job onto a claim of the Backup's own, and a Restore of it (or of `spec.source`, an
//!   archive infinispan-operator left on its claim) uploaded by a Job from there; the Jobs run
//!   the operator's own image (`cluster-operator archive`) and report in their termination
//!   message, read back by `copy_job`.
//! - [`selection`]: what `spec.resources` means to the server, without the resources operator's
//!   epoch markers.
//! - [`names`]: server-side job names. [`slots`]: one job per cluster.
//!
//! Decisions (the measurements behind them: docs/backup-restore.md):
//!
//! - **Never failed for access**: a Backup or Restore that cannot start (no cluster yet, no
//!   credentials yet, the server unreachable or refusing the credentials, its Backup not
//!   there or not done, its cluster busy with another job) stays `Pending` with
//!   `Complete=False` and a reason saying why, retried with capped backoff (2 s doubling to 5
//!   min) and woken earlier by changes of its cluster or Backup. Applying a Backup before its
//!   cluster (GitOps ordering) just works; one that was a mistake is deleted. Only the server
//!   (a failed or refused job, a job it lost) or a request that can never succeed (a Restore
//!   of a failed Backup, names not in the archive, nothing selected) makes it `Failed`, which is
//!   final: create another CR to retry.
//! - **Where jobs run**: on pod 0 of the cluster ([`crate::servers::Target::FirstPod`]), since
//!   jobs and archives exist only on the node that took them. With `storage: ServerNode` the
//!   archive stays there until the Backup is deleted; with `Volume` it is copied onto the
//!   Backup's claim and deleted on the server. Infinispan 16.0.7 forgets its jobs when the node restarts (the zip file
//!   stays on its volume, unreachable over REST): a Backup `Running` across a restart fails
//!   (`JobLost`), a Restore of a Backup whose node restarted since fails (`ArchiveUnavailable`).
//! - **Server job names** derive from namespace, name and uid ([`names`]): never shared, and
//!   found again after an operator restart (a job started just before a crash is adopted, not
//!   started twice).
//! - **One job per cluster** ([`slots`]): the server runs one backup and one restore at a time
//!   and fails the second silently, so the operator starts a job on a cluster only when none
//!   of its own runs there.
//! - **Epoch markers never travel**: a backup lists its caches explicitly, without the
//!   resources operator's `___infinispan-operator.*` markers (the server's "all caches"
//!   includes them), and a restore lists the archive's caches the same way, so even an archive
//!   that carries markers restores none ([`selection`]).
//! - **Failures carry the server's message**: a failed backup's `GET` text (16.0.7 always says
//!   `ISPN012042: Backup failed`, the cause is only in its log); a failed restore has no text
//!   over REST, the condition says where to look. Checks the operator can make itself (names
//!   in the archive) are made before the job, with a precise message.
//! - **`ServerNode` restores stream through the operator**: download to
//!   `<archive dir>/infinispan-restore-<job>.zip` ([`Settings::archive_dir`]; in a pod an
//!   `emptyDir` as large as the largest archive), upload from it, delete it; left-overs of a
//!   killed operator are deleted at start. A Restore has no finalizer: the server keeps nothing
//!   of a finished restore worth deleting (its record goes with the node's restart).
//! - **Events** (`BackupStarted`, `BackupSucceeded`, `BackupFailed` (Warning), `BackupWaiting`
//!   once per new waiting reason, and the same for `Restore`): transitions only, nothing while
//!   idle or while polling.
//! - **RBAC** (in [`crate::rbac`]): backups and restores get/list/watch/patch, their status
//!   get/patch, `backups/finalizers` update; infinispans get/list/watch; secrets get; events.

pub mod archive;
pub mod archive_job;
pub mod backups;
mod copy_job;
pub mod names;
pub mod phase;
pub mod restores;
pub mod schemas_step;
pub mod selection;
pub mod slots;
pub mod volume;

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common_crds::backup::Phase;
use common_crds::labels::CLUSTER_OPERATOR_FIELD_MANAGER;
use common_crds::{Backup, Infinispan, Restore};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use operator_runtime::events::{Event, EventType, Recorder, Reporter};

pub use common_crds::labels::BACKUP_FINALIZER;

use crate::servers::{ServerAccessError, Servers};
use phase::{Decision, Failure, JobKind, Observation, Progress, Waiting};
use slots::{Holder, JobSlots};

/// Counters of what the controllers did, for metrics and tests.
#[derive(Debug, Default)]
pub struct Stats {
    backup_reconciles: AtomicU64,
    restore_reconciles: AtomicU64,
    status_writes: AtomicU64,
    jobs_started: AtomicU64,
}

impl Stats {
    /// Reconciles of Backups so far.
    pub fn backup_reconciles(&self) -> u64 {
        self.backup_reconciles.load(Ordering::Relaxed)
    }

    /// Reconciles of Restores so far.
    pub fn restore_reconciles(&self) -> u64 {
        self.restore_reconciles.load(Ordering::Relaxed)
    }

    /// Status writes of Backups and Restores so far.
    pub fn status_writes(&self) -> u64 {
        self.status_writes.load(Ordering::Relaxed)
    }

    /// Server jobs (backups and restores) started so far.
    pub fn jobs_started(&self) -> u64 {
        self.jobs_started.load(Ordering::Relaxed)
    }
}

/// Default of [`Settings::archive_max_bytes`]: under the Helm chart's default /tmp size limit
/// (2Gi), with room for the operator's own files.
pub const DEFAULT_ARCHIVE_MAX_BYTES: u64 = 1_900 * 1024 * 1024;

/// What [`run`] needs beyond the clients.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where restores keep an archive between download and upload (default: the system
    /// temporary directory).
    pub archive_dir: PathBuf,
    /// The largest archive a Restore downloads ([`DEFAULT_ARCHIVE_MAX_BYTES`]): a larger one
    /// fails the Restore (`ArchiveTooLarge`) before it fills the archive directory (in a pod,
    /// an emptyDir whose size limit would evict the operator).
    pub archive_max_bytes: u64,
    /// Who publishes the Events.
    pub reporter: Reporter,
    /// Reconciles running at once, per controller.
    pub concurrency: u16,
    /// Image of the copy Jobs (`storage: Volume`): the operator's own.
    pub archive_image: String,
    /// Pull Secrets of the copy Jobs' pods.
    pub image_pull_secrets: Vec<String>,
    /// Shared counters (pass a clone of yours to read them).
    pub stats: Arc<Stats>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            archive_dir: std::env::temp_dir(),
            archive_max_bytes: DEFAULT_ARCHIVE_MAX_BYTES,
            reporter: Reporter {
                controller: CLUSTER_OPERATOR_FIELD_MANAGER.to_string(),
                instance: std::env::var("POD_NAME").ok(),
            },
            concurrency: 4,
            archive_image: crate::cli::DEFAULT_CLUSTER_OPERATOR_IMAGE.to_string(),
            image_pull_secrets: Vec::new(),
            stats: Arc::default(),
        }
    }
}

/// A reconcile failed (the object is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("the {kind} has no metadata.{field}")]
    MissingMetadata {
        kind: &'static str,
        field: &'static str,
    },
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting backup job {job} on cluster {cluster}: {source}")]
    Cleanup {
        job: String,
        cluster: String,
        #[source]
        source: Box<CleanupError>,
    },
    #[error(transparent)]
    Finalizer(Box<kube::runtime::finalizer::Error<ReconcileError>>),
}

/// Why the archive of a deleted Backup could not be deleted yet.
#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    #[error(transparent)]
    Access(#[from] ServerAccessError),
    #[error(transparent)]
    Server(#[from] infinispan_rest::Error),
}

impl ReconcileError {
    /// A stable, low-cardinality label (metrics, logs).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingMetadata { .. } => "MissingMetadata",
            Self::Kube { .. } => "KubernetesError",
            Self::Cleanup { .. } => "CleanupFailed",
            Self::Finalizer(_) => "FinalizerError",
        }
    }

    fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let what = what.into();
        move |source| Self::Kube { what, source }
    }
}

/// What both controllers share.
pub(crate) struct Context {
    client: kube::Client,
    servers: Arc<Servers>,
    archive_dir: PathBuf,
    archive_max_bytes: u64,
    archive_image: String,
    image_pull_secrets: Vec<String>,
    recorder: Recorder,
    slots: JobSlots,
    /// Retries so far per object uid (reset on progress).
    retries: Mutex<HashMap<String, u32>>,
    backups: Store<Backup>,
    restores: Store<Restore>,
    stats: Arc<Stats>,
}

impl Context {
    fn retries<T>(&self, f: impl FnOnce(&mut HashMap<String, u32>) -> T) -> T {
        match self.retries.lock() {
            Ok(mut r) => f(&mut r),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    fn attempt(&self, uid: &str) -> u32 {
        self.retries(|r| r.get(uid).copied().unwrap_or(0))
    }

    /// Counts one more retry, or forgets them.
    fn record_retry(&self, uid: &str, retrying: bool) {
        self.retries(|r| {
            if retrying {
                *r.entry(uid.to_string()).or_default() += 1;
            } else {
                r.remove(uid);
            }
        });
    }

    /// Forgets everything about the object `uid` (final, or deleted).
    fn forget(&self, uid: &str) {
        self.slots.release(uid);
        self.retries(|r| r.remove(uid));
    }

    /// Takes the job slot of `namespace/cluster` for `holder`; `Some`: why it waits instead,
    /// another Backup or Restore runs there (one job per cluster, [`slots`]).
    fn take_slot(&self, namespace: &str, cluster: &str, holder: Holder) -> Option<Observation> {
        let running = self.running_on(namespace, cluster, &holder.uid);
        let other = self
            .slots
            .try_acquire(namespace, cluster, holder, running)
            .err()?;
        Some(Observation::Waiting {
            why: Waiting::ClusterBusy,
            message: format!(
                "{other} runs on cluster {cluster}: one backup or restore runs at a time per cluster"
            ),
        })
    }

    /// Backups and Restores other than `uid` that their status shows running on
    /// `namespace/cluster`.
    fn running_on(&self, namespace: &str, cluster: &str, uid: &str) -> Vec<Holder> {
        let running = |phase: Option<Phase>| phase == Some(Phase::Running);
        let backups = self.backups.state().into_iter().filter_map(|b| {
            (b.namespace().as_deref() == Some(namespace)
                && b.spec.cluster == cluster
                && running(b.status.as_ref().and_then(|s| s.phase)))
            .then(|| Holder {
                kind: JobKind::Backup,
                name: b.name_any(),
                uid: b.uid().unwrap_or_default(),
            })
        });
        let restores = self.restores.state().into_iter().filter_map(|r| {
            (r.namespace().as_deref() == Some(namespace)
                && r.spec.cluster == cluster
                && running(r.status.as_ref().and_then(|s| s.phase)))
            .then(|| Holder {
                kind: JobKind::Restore,
                name: r.name_any(),
                uid: r.uid().unwrap_or_default(),
            })
        });
        backups.chain(restores).filter(|h| h.uid != uid).collect()
    }

    async fn publish(&self, object: &impl Resource<DynamicType = ()>, event: phase::EventSpec) {
        let phase::EventSpec {
            warning,
            reason,
            note,
        } = event;
        let note: String = note.chars().take(1000).collect();
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            action: reason.clone(),
            reason,
            note: Some(note),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &object.object_ref(&())).await {
            tracing::warn!(%error, reason = %event.reason, "cannot publish an Event");
        }
    }
}

/// The CR's namespace, name and uid.
fn identity<K: Resource>(
    object: &K,
    kind: &'static str,
) -> Result<(String, String, String), ReconcileError> {
    let missing = |field| ReconcileError::MissingMetadata { kind, field };
    let meta = object.meta();
    Ok((
        meta.namespace.clone().ok_or_else(|| missing("namespace"))?,
        meta.name.clone().ok_or_else(|| missing("name"))?,
        meta.uid.clone().ok_or_else(|| missing("uid"))?,
    ))
}

/// The `Infinispan` CR `name` in `namespace`, if there is one.
async fn cluster(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<Option<Infinispan>, ReconcileError> {
    Api::<Infinispan>::namespaced(ctx.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(ReconcileError::kube(format!(
            "reading the Infinispan CR {namespace}/{name}"
        )))
}

/// The node running `job` of `holder` on the cluster `cluster_name`, with the cluster's job slot
/// held for it; or, instead, what to observe: the job is lost when the cluster is gone, and
/// unreachable when its node cannot be reached.
async fn job_server(
    ctx: &Context,
    namespace: &str,
    cluster_name: &str,
    job: &str,
    holder: Holder,
) -> Result<Result<infinispan_rest::Client, Observation>, ReconcileError> {
    let what = holder.kind.lower();
    let Some(cluster) = cluster(ctx, namespace, cluster_name).await? else {
        return Ok(Err(Observation::Failed {
            why: Failure::JobLost,
            message: format!(
                "the Infinispan cluster {cluster_name} was deleted while {what} job {job} ran"
            ),
        }));
    };
    let server = match ctx.servers.node_client_for(&ctx.client, &cluster).await {
        Ok(server) => server,
        Err(error) => {
            return Ok(Err(Observation::Unreachable {
                message: error.to_string(),
            }));
        }
    };
    ctx.slots.hold(namespace, cluster_name, holder);
    Ok(Ok(server))
}

/// Waiting because the server cannot be reached yet.
fn access_waiting(context: &str, error: &ServerAccessError) -> Observation {
    let why = match error {
        ServerAccessError::CredentialsNotReady { .. } => Waiting::CredentialsNotReady,
        ServerAccessError::CredentialsSecretNotFound { .. }
        | ServerAccessError::CredentialsSecretNotTheOperators { .. }
        | ServerAccessError::CredentialsKeyMissing { .. }
        | ServerAccessError::CredentialsNotUtf8 { .. }
        | ServerAccessError::Kube { .. } => Waiting::CredentialsInvalid,
        ServerAccessError::CertificateSecretNotFound { .. }
        | ServerAccessError::ClientCertificateNotReady { .. } => Waiting::CertificateNotFound,
        ServerAccessError::MissingMetadata
        | ServerAccessError::Url(_)
        | ServerAccessError::Client { .. } => Waiting::InvalidConfiguration,
    };
    Observation::Waiting {
        why,
        message: format!("{context}{error}"),
    }
}

/// Waiting because the server answered with an error worth retrying.
fn rest_waiting(context: &str, error: &infinispan_rest::Error) -> Observation {
    use infinispan_rest::Error as E;
    let why = match error {
        E::Unauthorized { .. } | E::Forbidden { .. } => Waiting::AccessDenied,
        E::Local { .. } => Waiting::LocalStorage,
        E::Config(_) => Waiting::InvalidConfiguration,
        _ => Waiting::ServerUnavailable,
    };
    Observation::Waiting {
        why,
        message: format!("{context}{error}"),
    }
}

/// The status of `object` after `decision`, written when it changed (server-side apply of
/// the whole status), the Event published, the retry counter kept; the requeue.
async fn conclude<K>(
    ctx: &Context,
    api: &Api<K>,
    object: &K,
    current: &Progress,
    decision: Decision,
    status: impl FnOnce(Progress) -> serde_json::Value,
) -> Result<Action, ReconcileError>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let Decision {
        progress,
        requeue,
        event,
        retrying,
    } = decision;
    let uid = object.meta().uid.clone().unwrap_or_default();
    let name = object.meta().name.clone().unwrap_or_default();
    let is_final = progress.is_final();
    if progress != *current {
        let patch = serde_json::json!({
            "apiVersion": K::api_version(&()),
            "kind": K::kind(&()),
            "status": status(progress),
        });
        api.patch_status(
            &name,
            &PatchParams::apply(CLUSTER_OPERATOR_FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(ReconcileError::kube(format!(
            "writing the status of {} {name}",
            K::kind(&())
        )))?;
        ctx.stats.status_writes.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(event) = event {
        ctx.publish(object, event).await;
    }
    if is_final {
        ctx.forget(&uid);
    } else {
        ctx.record_retry(&uid, retrying);
    }
    Ok(match requeue {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}

/// A reconcile error: logged, retried with the object's backoff.
fn error_policy<K: Resource>(object: Arc<K>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    let uid = object.meta().uid.clone().unwrap_or_default();
    let attempt = ctx.attempt(&uid);
    ctx.record_retry(&uid, true);
    let after = phase::retry_delay(attempt);
    tracing::warn!(
        name = %object.meta().name.clone().unwrap_or_default(),
        namespace = %object.meta().namespace.clone().unwrap_or_default(),
        reason = error.reason(),
        %error,
        retry_in = ?after,
        "reconcile failed"
    );
    Action::requeue(after)
}

/// Backups and Restores not finished yet.
fn unfinished(phase: Option<Phase>) -> bool {
    !matches!(phase, Some(Phase::Succeeded | Phase::Failed))
}

/// Logs what a controller's stream yields (reconcile errors are logged by [`error_policy`]).
fn log_result<K: Resource>(
    kind: &'static str,
    result: Result<(ObjectRef<K>, Action), controller::Error<ReconcileError, watcher::Error>>,
) -> futures::future::Ready<()> {
    match result {
        Ok(_) | Err(controller::Error::ReconcilerFailed(..)) => {}
        Err(error) => tracing::debug!(kind, %error, "controller"),
    }
    futures::future::ready(())
}

/// What the controllers watch, all of the same scope (one namespace, or all namespaces).
#[derive(Clone, Debug)]
pub struct Apis {
    pub backups: Api<Backup>,
    pub restores: Api<Restore>,
    pub infinispans: Api<Infinispan>,
    /// The copy Jobs ([`volume`]).
    pub jobs: Api<Job>,
}

impl Apis {
    /// The APIs of `namespace`, or of all namespaces.
    pub fn new(client: &kube::Client, namespace: Option<&str>) -> Self {
        fn api<K>(client: &kube::Client, namespace: Option<&str>) -> Api<K>
        where
            K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
        {
            match namespace {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            }
        }
        Apis {
            backups: api(client, namespace),
            restores: api(client, namespace),
            infinispans: api(client, namespace),
            jobs: api(client, namespace),
        }
    }
}

/// Runs the Backup and Restore controllers until `shutdown` completes.
///
/// - `apis`: what to watch; a change of an `Infinispan` CR wakes the unfinished
///   Backups and Restores that use it, a change of a Backup the Restores waiting for it, a
///   change of a copy Job ([`volume`]) its Backup or Restore.
/// - `servers`: how the clusters' servers are reached.
/// - `settings`: archive directory, Event reporter, concurrency, counters.
///
/// Returns when both controllers have stopped (after `shutdown`, in-flight reconciles are
/// finished first). Watch errors (e.g. the CRDs not installed yet) are logged and retried.
pub async fn run(
    client: kube::Client,
    apis: Apis,
    servers: Arc<Servers>,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let Apis {
        backups,
        restores,
        infinispans,
        jobs,
    } = apis;
    let Settings {
        archive_dir,
        archive_max_bytes,
        reporter,
        concurrency,
        archive_image,
        image_pull_secrets,
        stats,
    } = settings;
    let removed = archive::remove_leftovers(&archive_dir);
    if removed > 0 {
        tracing::info!(removed, dir = %archive_dir.display(), "deleted archive files left by an earlier run");
    }
    let shutdown = shutdown.boxed().shared();
    let config = controller::Config::default().concurrency(concurrency);
    let wc = watcher::Config::default();

    let backup_controller =
        Controller::new(backups.clone(), wc.clone()).with_config(config.clone());
    let backup_store = backup_controller.store();
    let restore_controller = Controller::new(restores, wc.clone()).with_config(config);
    let restore_store = restore_controller.store();

    let copy_jobs = wc
        .clone()
        .labels(&format!("app.kubernetes.io/name={}", volume::JOB_APP_NAME));
    let backup_controller = backup_controller
        .owns(jobs.clone(), copy_jobs.clone())
        .watches(infinispans.clone(), wc.clone(), {
            let store = backup_store.clone();
            move |cluster: Infinispan| {
                let (namespace, name) = (cluster.namespace(), cluster.name_any());
                store
                    .state()
                    .into_iter()
                    .filter(|b| {
                        b.namespace() == namespace
                            && b.spec.cluster == name
                            && unfinished(b.status.as_ref().and_then(|s| s.phase))
                    })
                    .map(|b| ObjectRef::from_obj(&*b))
                    .collect::<Vec<_>>()
            }
        });
    let restore_controller = restore_controller
        .owns(jobs, copy_jobs)
        .watches(infinispans, wc.clone(), {
            let store = restore_store.clone();
            let backups = backup_store.clone();
            move |cluster: Infinispan| {
                let (namespace, name) = (cluster.namespace(), cluster.name_any());
                store
                    .state()
                    .into_iter()
                    .filter(|r| {
                        r.namespace() == namespace
                            && unfinished(r.status.as_ref().and_then(|s| s.phase))
                            && (r.spec.cluster == name
                                || r.spec.backup.as_deref().is_some_and(|backup| {
                                    let backup = ObjectRef::<Backup>::new(backup)
                                        .within(namespace.as_deref().unwrap_or_default());
                                    backups.get(&backup).is_some_and(|b| b.spec.cluster == name)
                                }))
                    })
                    .map(|r| ObjectRef::from_obj(&*r))
                    .collect::<Vec<_>>()
            }
        })
        .watches(backups, wc, {
            let store = restore_store.clone();
            move |backup: Backup| {
                let (namespace, name) = (backup.namespace(), backup.name_any());
                store
                    .state()
                    .into_iter()
                    .filter(|r| {
                        r.namespace() == namespace
                            && r.spec.backup.as_deref() == Some(name.as_str())
                            && unfinished(r.status.as_ref().and_then(|s| s.phase))
                    })
                    .map(|r| ObjectRef::from_obj(&*r))
                    .collect::<Vec<_>>()
            }
        });

    let ctx = Arc::new(Context {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        servers,
        archive_dir,
        archive_max_bytes,
        archive_image,
        image_pull_secrets,
        slots: JobSlots::default(),
        retries: Mutex::default(),
        backups: backup_store,
        restores: restore_store,
        stats,
    });
    let backups = backup_controller
        .graceful_shutdown_on(shutdown.clone())
        .run(backups::reconcile, error_policy, ctx.clone())
        .for_each(|result| log_result("Backup", result));
    let restores = restore_controller
        .graceful_shutdown_on(shutdown)
        .run(restores::reconcile, error_policy, ctx)
        .for_each(|result| log_result("Restore", result));
    futures::join!(backups, restores);
}
