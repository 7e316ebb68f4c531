//! The engine of one kind: the CR watch (a reflector store without managedFields) feeding
//! kube-runtime's `Controller` (a per-key deduplicating queue, one reconcile in flight per key),
//! server events entering through `reconcile_on`, and the reconcile of one CR.
//!
//! Reconcile of one CR, in steps:
//! 1. wait until the first server snapshot is complete (the event stream's replay);
//! 2. observe: the CR's view (claims over the store), the server's view (the snapshot), their
//!    semantic comparison (the adapter; memoised per generation and server digest);
//! 3. decide (the pure [`decide`]);
//! 4. execute the one action (server writes are read back into the snapshot);
//! 5. write the status, only when it changed, and the decision's Event.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common_crds::ServerResource;
use common_crds::common::LastSynced;
use common_crds::conditions::Reason;
use common_crds::infinispan::{ConflictWinner, SyncMode};
use common_crds::labels::{
    CLUSTER_LABEL, MANAGED_ANNOTATION, MANAGED_FALSE, ORIGIN_LABEL, ORIGIN_SERVER,
    PAUSE_RECONCILIATION_ANNOTATION, PAUSE_RECONCILIATION_TRUE, RESOURCES_FINALIZER,
};
use futures::StreamExt;
use futures::channel::mpsc;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::events::{Event as KubeEvent, Recorder};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Resource, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use super::claims;
use super::decision::{
    Action, Comparison, CrView, Decision, Observation, ServerView, Status, decide,
};
use super::kind::{Compared, KindAdapter, KindError, ServerChange};
use super::snapshot::{Known, Snapshot};
use super::status::{StatusUpdate, next_status};
use crate::metrics::{Metrics, Readiness};

/// The server epoch recorded in `lastSynced` until the epoch marker (design R2) exists.
pub const EPOCH_UNTRACKED: &str = "untracked";

/// Requeue of an object waiting for something (the server, a dependency).
const WAIT_REQUEUE: Duration = Duration::from_secs(10);
/// Requeue after a failed reconcile.
const ERROR_REQUEUE: Duration = Duration::from_secs(5);
/// Requeue after a write, to check the outcome even if no watch event comes.
const AFTER_WRITE_REQUEUE: Duration = Duration::from_millis(500);
/// How long a store copy at the version our write replaced counts as stale.
const STALE_LIMIT: Duration = Duration::from_secs(10);
/// Requeue of a CR whose store copy predates our own last write to it.
const STALE_REQUEUE: Duration = Duration::from_millis(200);

/// The cluster-wide settings of the sync.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Name of the Infinispan CR (the value of the cluster label).
    pub cluster: String,
    pub namespace: String,
    pub mode: SyncMode,
    pub winner: ConflictWinner,
    /// Owner reference to the Infinispan CR, put on mirror CRs (design E6).
    pub owner: OwnerReference,
}

/// Errors of a reconcile; all are retried with backoff by the error policy.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Kind(#[from] KindError),
    #[error("the CR has no name")]
    NoName,
    #[error("cannot build the mirror CR: {0}")]
    MirrorCr(#[from] serde_json::Error),
}

impl EngineError {
    /// Stable label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Kube(_) => "Kubernetes",
            Self::Kind(error) => error.reason(),
            Self::NoName => "NoName",
            Self::MirrorCr(_) => "MirrorCr",
        }
    }
}

/// A recorded server refusal: not retried until the CR or the server object changes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Refusal {
    generation: i64,
    digest: Option<String>,
}

/// The engine of one kind.
pub struct Engine<A: KindAdapter> {
    pub adapter: A,
    pub settings: Settings,
    pub api: Api<A::Cr>,
    pub store: Store<A::Cr>,
    pub snapshot: Snapshot<A::Object>,
    pub metrics: Metrics,
    pub readiness: Readiness,
    recorder: Recorder,
    trigger: mpsc::UnboundedSender<ObjectRef<A::Cr>>,
    ready: watch::Sender<bool>,
    comparisons: Mutex<HashMap<String, (i64, String, Compared)>>,
    refusals: Mutex<HashMap<String, Refusal>>,
    /// Per CR uid, the resourceVersion our last write to it replaced: a store copy still at
    /// that version is stale (the watch has not brought our write yet), and deciding on it
    /// would repeat the write.
    /// Bounded in time: a write the API server took as a no-op never brings a new version.
    replaced_versions: Mutex<HashMap<String, (String, Instant)>>,
}

impl<A: KindAdapter> std::fmt::Debug for Engine<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("kind", &A::Cr::KIND)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// What an executed action leaves behind.
struct Executed<K> {
    /// The last-synced record the action made true.
    last_synced: Option<LastSynced>,
    /// The CR as the API server returned it after a spec write.
    cr_after: Option<K>,
    /// The CR is gone (or going): no status to write.
    cr_gone: bool,
}

impl<A: KindAdapter> Engine<A> {
    fn lock<T, R>(mutex: &Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R {
        match mutex.lock() {
            Ok(mut guard) => f(&mut guard),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    fn kind(&self) -> &'static str {
        A::Cr::KIND.as_str()
    }

    /// Sends a reconcile request for every CR of the store that stands for `server_name`;
    /// returns whether there was one.
    pub fn trigger_claimants(&self, server_name: &str) -> bool {
        let claimants = self
            .store
            .state_filter(|cr| cr.server_name().as_deref() == Some(server_name));
        for cr in &claimants {
            let _ = self
                .trigger
                .unbounded_send(ObjectRef::from_obj(cr.as_ref()));
        }
        !claimants.is_empty()
    }

    /// Sends a reconcile request for the other CRs of the store that claim `server_name`.
    fn trigger_rivals(&self, cr: &A::Cr, server_name: &str) {
        let uid = cr.uid();
        for rival in self.store.state_filter(|other| {
            other.uid() != uid && other.server_name().as_deref() == Some(server_name)
        }) {
            let _ = self
                .trigger
                .unbounded_send(ObjectRef::from_obj(rival.as_ref()));
        }
    }

    /// Sends a reconcile request for every CR of the store.
    pub fn trigger_all(&self) {
        for cr in self.store.state() {
            let _ = self
                .trigger
                .unbounded_send(ObjectRef::from_obj(cr.as_ref()));
        }
    }

    /// The first snapshot is complete: reconciles may decide.
    pub fn set_ready(&self) {
        self.ready.send_replace(true);
        self.readiness.set_ready();
    }

    async fn wait_ready(&self) {
        let mut ready = self.ready.subscribe();
        let _ = ready.wait_for(|ready| *ready).await;
    }

    // ---- The server-only path (design S1) -------------------------------------------------

    /// A server object changed or appeared: reconcile the CRs that stand for it, or, when none
    /// does, decide for the object alone (a mirror CR in the modes that mirror).
    pub async fn server_object_changed(&self, server_name: &str) -> Result<(), EngineError> {
        if self.trigger_claimants(server_name) {
            return Ok(());
        }
        self.sync_unclaimed(server_name).await
    }

    /// Server names some CR of the store stands for (one pass over the store, for the
    /// snapshot after a replay).
    pub fn claimed_names(&self) -> HashSet<String> {
        self.store
            .state()
            .iter()
            .filter_map(|cr| cr.server_name())
            .collect()
    }

    /// The server-only path for an object no CR stands for (decision step 1).
    pub async fn sync_unclaimed(&self, server_name: &str) -> Result<(), EngineError> {
        let Some(known) = self.snapshot.get(server_name) else {
            return Ok(());
        };
        let observation = Observation {
            cr: None,
            server: self.snapshot.view(server_name),
            server_epoch: EPOCH_UNTRACKED.to_string(),
            comparison: Comparison::Equal,
            internal: self.adapter.is_internal(server_name),
            dependencies: Default::default(),
            mode: self.settings.mode,
            winner: self.settings.winner,
            caps: self.adapter.capabilities(),
        };
        if let Action::CreateMirrorCr { with_finalizer } = decide(&observation).action {
            self.create_mirror(server_name, &known, with_finalizer)
                .await?;
        }
        Ok(())
    }

    /// Creates the mirror CR in one call: labels, finalizer, owner reference, spec.
    async fn create_mirror(
        &self,
        server_name: &str,
        known: &Known<A::Object>,
        with_finalizer: bool,
    ) -> Result<(), EngineError> {
        let name = common_crds::naming::mirror_name(&self.settings.cluster, server_name);
        let spec = self.adapter.mirror_spec(server_name, &known.object).await?;
        let finalizers: Vec<&str> = if with_finalizer {
            vec![RESOURCES_FINALIZER]
        } else {
            Vec::new()
        };
        let cr: A::Cr = serde_json::from_value(json!({
            "apiVersion": A::Cr::api_version(&()),
            "kind": A::Cr::kind(&()),
            "metadata": {
                "name": name,
                "namespace": self.settings.namespace,
                "labels": {
                    CLUSTER_LABEL: self.settings.cluster,
                    ORIGIN_LABEL: ORIGIN_SERVER,
                },
                "finalizers": finalizers,
                "ownerReferences": [self.settings.owner],
            },
            "spec": spec,
        }))?;
        match self.api.create(&PostParams::default(), &cr).await {
            Ok(_) => {
                self.count_write("kubernetes", "create_mirror");
                tracing::info!(
                    kind = self.kind(),
                    server_name,
                    cr = name,
                    "mirror CR created"
                );
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    // ---- Reconcile of one CR ---------------------------------------------------------------

    async fn reconcile(&self, cr: Arc<A::Cr>) -> Result<Requeue, EngineError> {
        self.wait_ready().await;
        let started = Instant::now();
        let result = self.sync(&cr).await;
        self.metrics
            .reconcile_duration
            .with_label_values(&[self.kind()])
            .observe(started.elapsed().as_secs_f64());
        let label = match &result {
            Ok((label, _)) => *label,
            Err(_) => "error",
        };
        self.metrics
            .reconciles
            .with_label_values(&[self.kind(), label])
            .inc();
        result.map(|(_, requeue)| requeue)
    }

    fn cr_view(&self, cr: &A::Cr, server_name: &str) -> CrView {
        let annotations = cr.annotations();
        let all = self.store.state();
        CrView {
            generation: cr.meta().generation.unwrap_or_default(),
            deleting: cr.meta().deletion_timestamp.is_some(),
            has_finalizer: cr.finalizers().iter().any(|f| f == RESOURCES_FINALIZER),
            managed: annotations.get(MANAGED_ANNOTATION).map(String::as_str) != Some(MANAGED_FALSE),
            paused: annotations
                .get(PAUSE_RECONCILIATION_ANNOTATION)
                .map(String::as_str)
                == Some(PAUSE_RECONCILIATION_TRUE),
            origin: claims::origin(cr),
            deletion_policy: cr.spec_common().deletion_policy,
            update_strategy: self.adapter.update_strategy(cr),
            last_synced: cr.resource_status().and_then(|s| s.last_synced.clone()),
            claim: claims::resolve(cr, server_name, all.iter().map(Arc::as_ref)),
        }
    }

    /// The comparison of the CR with the server object, memoised per (generation, digest).
    async fn compare(
        &self,
        cr: &A::Cr,
        generation: i64,
        known: &Known<A::Object>,
    ) -> Result<Compared, KindError> {
        let uid = cr.uid().unwrap_or_default();
        let memo = Self::lock(&self.comparisons, |memo| {
            memo.get(&uid)
                .filter(|(g, d, _)| *g == generation && *d == known.digest)
                .map(|(_, _, compared)| compared.clone())
        });
        if let Some(compared) = memo {
            return Ok(compared);
        }
        let compared = self.adapter.compare(cr, &known.object).await?;
        Self::lock(&self.comparisons, |memo| {
            memo.insert(uid, (generation, known.digest.clone(), compared.clone()))
        });
        Ok(compared)
    }

    /// One reconcile: observe, decide, execute, write status. Returns the metrics label of the
    /// outcome and the requeue.
    async fn sync(&self, cr: &A::Cr) -> Result<(&'static str, Requeue), EngineError> {
        if self.is_stale(cr) {
            return Ok(("stale", Requeue::requeue(STALE_REQUEUE)));
        }
        let server_name = cr.server_name().ok_or(EngineError::NoName)?;
        let cr_view = self.cr_view(cr, &server_name);
        let generation = cr_view.generation;
        let server = self.snapshot.view(&server_name);
        let known = self.snapshot.get(&server_name);
        // A CR being deleted is not compared: its document may be one the server refuses, which
        // must not keep the deletion from happening.
        let needs_comparison = cr_view.managed
            && !cr_view.deleting
            && !cr_view.paused
            && !self.adapter.is_internal(&server_name)
            && cr_view.claim == super::decision::Claim::Owner
            && matches!(server, ServerView::Present(_));
        let compared = match (&known, needs_comparison) {
            (Some(known), true) => match self.compare(cr, generation, known).await {
                Ok(compared) => Some(compared),
                Err(error) => {
                    return self
                        .refused(
                            cr,
                            &server_name,
                            generation,
                            &known.digest.clone().into(),
                            error,
                        )
                        .await;
                }
            },
            _ => None,
        };
        let observation = Observation {
            cr: Some(cr_view.clone()),
            server,
            server_epoch: EPOCH_UNTRACKED.to_string(),
            comparison: compared
                .as_ref()
                .map(|c| c.comparison)
                .unwrap_or(Comparison::Equal),
            internal: self.adapter.is_internal(&server_name),
            dependencies: self.adapter.dependencies(cr),
            mode: self.settings.mode,
            winner: self.settings.winner,
            caps: self.adapter.capabilities(),
        };
        let mut decision = decide(&observation);
        tracing::debug!(
            kind = self.kind(),
            cr = cr.name_any(),
            resource_version = cr.resource_version(),
            server_name,
            ?observation.server,
            last_synced = ?cr_view.last_synced,
            ?decision.action,
            "decided"
        );
        if decision.action.writes() || cr_view.deleting {
            // The claim of the other CRs on this server name may change with this one's.
            self.trigger_rivals(cr, &server_name);
        }

        // Immutable: say which attributes, in the server's words.
        if let (
            Some(Status::Ready {
                reason: Reason::Immutable,
                message,
            }),
            Some(compared),
        ) = (decision.status.as_mut(), compared.as_ref())
            && !compared.reasons.is_empty()
        {
            message.push_str(": ");
            message.push_str(&compared.reasons.join("\n"));
        }

        let digest = known.as_ref().map(|k| k.digest.clone());
        if decision.action.writes_server() {
            let refusal = Refusal {
                generation,
                digest: digest.clone(),
            };
            let uid = cr.uid().unwrap_or_default();
            if Self::lock(&self.refusals, |r| r.get(&uid) == Some(&refusal)) {
                return Ok(("rejected", Requeue::await_change()));
            }
        }

        let executed = match self
            .execute(cr, &server_name, &decision, known.as_ref())
            .await
        {
            Ok(executed) => executed,
            Err(EngineError::Kind(error)) => {
                return self
                    .refused(cr, &server_name, generation, &digest, error)
                    .await;
            }
            Err(error) => return Err(error),
        };
        if executed.cr_gone {
            self.publish(cr, &decision).await;
            return Ok(("wrote", Requeue::await_change()));
        }
        let current = executed.cr_after.as_ref().unwrap_or(cr);
        let update = StatusUpdate {
            conditions: decision.status.clone(),
            last_synced: executed.last_synced,
            generation: current.meta().generation,
            server_name: server_name.clone(),
        };
        let status_written = self.write_status(current, update).await?;
        self.publish(cr, &decision).await;
        if decision.action.writes_server() {
            Self::lock(&self.refusals, |r| r.remove(&cr.uid().unwrap_or_default()));
        }
        Ok(match decision.action {
            Action::Nothing if status_written => ("status", Requeue::await_change()),
            Action::Nothing => ("nothing", Requeue::await_change()),
            Action::Wait(_) => ("wait", Requeue::requeue(WAIT_REQUEUE)),
            _ => ("wrote", Requeue::requeue(AFTER_WRITE_REQUEUE)),
        })
    }

    /// A server call failed: a refusal is reported (`Rejected`, the server's message) and not
    /// retried until something changes; a transient failure reports `ServerUnavailable` and is
    /// retried with backoff.
    async fn refused(
        &self,
        cr: &A::Cr,
        server_name: &str,
        generation: i64,
        digest: &Option<String>,
        error: KindError,
    ) -> Result<(&'static str, Requeue), EngineError> {
        let (reason, retry) = if error.is_retryable() {
            (Reason::ServerUnavailable, true)
        } else {
            (Reason::Rejected, false)
        };
        tracing::warn!(kind = self.kind(), cr = cr.name_any(), server_name, %error, "server call failed");
        let update = StatusUpdate {
            conditions: Some(Status::Ready {
                reason,
                message: error.user_message(),
            }),
            last_synced: None,
            generation: Some(generation),
            server_name: server_name.to_string(),
        };
        self.write_status(cr, update).await?;
        if retry {
            return Err(error.into());
        }
        let refusal = Refusal {
            generation,
            digest: digest.clone(),
        };
        Self::lock(&self.refusals, |r| {
            r.insert(cr.uid().unwrap_or_default(), refusal)
        });
        Ok(("rejected", Requeue::await_change()))
    }

    /// Whether the store's copy of the CR predates our own last write to it.
    fn is_stale(&self, cr: &A::Cr) -> bool {
        let uid = cr.uid().unwrap_or_default();
        let version = cr.resource_version();
        Self::lock(&self.replaced_versions, |replaced| {
            match replaced.get(&uid) {
                Some((old, at)) if Some(old) == version.as_ref() && at.elapsed() < STALE_LIMIT => {
                    true
                }
                Some(_) => {
                    replaced.remove(&uid);
                    false
                }
                None => false,
            }
        })
    }

    /// Records that we wrote the CR (replacing its current resourceVersion).
    fn wrote(&self, cr: &A::Cr) {
        if let (Some(uid), Some(version)) = (cr.uid(), cr.resource_version()) {
            Self::lock(&self.replaced_versions, |replaced| {
                replaced.insert(uid, (version, Instant::now()))
            });
        }
    }

    fn last_synced(&self, generation: i64, digest: String) -> LastSynced {
        LastSynced {
            digest,
            generation,
            epoch: EPOCH_UNTRACKED.to_string(),
        }
    }

    /// Reads the server object back after our own write, so that the snapshot knows it before
    /// the echo event arrives (which then changes nothing, design L2).
    async fn read_back(&self, server_name: &str) -> Result<Option<String>, EngineError> {
        match self.adapter.read(server_name).await? {
            Some(object) => {
                let digest = self.adapter.digest(&object);
                self.snapshot.present(
                    server_name,
                    Known {
                        object,
                        digest: digest.clone(),
                    },
                );
                Ok(Some(digest))
            }
            None => {
                self.snapshot.removed(server_name);
                Ok(None)
            }
        }
    }

    async fn execute(
        &self,
        cr: &A::Cr,
        server_name: &str,
        decision: &Decision,
        known: Option<&Known<A::Object>>,
    ) -> Result<Executed<A::Cr>, EngineError> {
        let generation = cr.meta().generation.unwrap_or_default();
        let mut executed = Executed {
            last_synced: None,
            cr_after: None,
            cr_gone: false,
        };
        match decision.action {
            Action::Nothing | Action::Wait(_) | Action::CreateMirrorCr { .. } => {}
            Action::AddFinalizer => {
                let mut finalizers = cr.finalizers().to_vec();
                finalizers.push(RESOURCES_FINALIZER.to_string());
                self.patch_finalizers(cr, finalizers).await?;
            }
            Action::RecordSynced => {
                if let Some(known) = known {
                    executed.last_synced = Some(self.last_synced(generation, known.digest.clone()));
                }
            }
            Action::CreateOnServer | Action::UpdateServer | Action::RecreateOnServer => {
                match decision.action {
                    Action::CreateOnServer => self.adapter.create(server_name, cr).await?,
                    Action::UpdateServer => self.adapter.update(server_name, cr).await?,
                    _ => {
                        self.adapter.delete(server_name).await?;
                        self.count_write("server", "delete");
                        self.adapter.create(server_name, cr).await?;
                    }
                }
                self.count_write("server", action_label(decision.action));
                tracing::info!(kind = self.kind(), cr = cr.name_any(), server_name, action = ?decision.action, "server written");
                if let Some(digest) = self.read_back(server_name).await? {
                    executed.last_synced = Some(self.last_synced(generation, digest));
                }
            }
            Action::DeleteOnServer => {
                self.adapter.delete(server_name).await?;
                self.count_write("server", "delete");
                self.snapshot.removed(server_name);
                tracing::info!(
                    kind = self.kind(),
                    cr = cr.name_any(),
                    server_name,
                    "server object deleted"
                );
                self.release_finalizer(cr).await?;
                executed.cr_gone = true;
            }
            Action::ReleaseFinalizer => {
                self.release_finalizer(cr).await?;
                executed.cr_gone = true;
            }
            Action::DeleteCr => {
                self.release_finalizer(cr).await?;
                match self
                    .api
                    .delete(&cr.name_any(), &DeleteParams::default())
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(error) => return Err(error.into()),
                }
                self.count_write("kubernetes", "delete");
                tracing::info!(
                    kind = self.kind(),
                    cr = cr.name_any(),
                    server_name,
                    "CR deleted"
                );
                executed.cr_gone = true;
            }
            Action::UpdateCrSpecFromServer => {
                let Some(known) = known else {
                    return Ok(executed);
                };
                let spec = self
                    .adapter
                    .spec_patch_from_server(cr, &known.object)
                    .await?;
                let patch = json!({
                    "metadata": { "resourceVersion": cr.resource_version() },
                    "spec": spec,
                });
                let after = self
                    .api
                    .patch(
                        &cr.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await?;
                self.wrote(cr);
                self.count_write("kubernetes", "update_spec");
                tracing::info!(
                    kind = self.kind(),
                    cr = cr.name_any(),
                    server_name,
                    "CR spec updated from the server"
                );
                let generation = after.meta().generation.unwrap_or_default();
                executed.last_synced = Some(self.last_synced(generation, known.digest.clone()));
                executed.cr_after = Some(after);
            }
        }
        Ok(executed)
    }

    async fn patch_finalizers(
        &self,
        cr: &A::Cr,
        finalizers: Vec<String>,
    ) -> Result<(), EngineError> {
        let patch = json!({
            "metadata": {
                "resourceVersion": cr.resource_version(),
                "finalizers": finalizers,
            }
        });
        self.api
            .patch(
                &cr.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        self.wrote(cr);
        self.count_write("kubernetes", "finalizer");
        Ok(())
    }

    async fn release_finalizer(&self, cr: &A::Cr) -> Result<(), EngineError> {
        if !cr.finalizers().iter().any(|f| f == RESOURCES_FINALIZER) {
            return Ok(());
        }
        let finalizers: Vec<String> = cr
            .finalizers()
            .iter()
            .filter(|f| *f != RESOURCES_FINALIZER)
            .cloned()
            .collect();
        match self.patch_finalizers(cr, finalizers).await {
            Err(EngineError::Kube(kube::Error::Api(status))) if status.code == 404 => Ok(()),
            other => other,
        }
    }

    /// Writes the status when it differs from the CR's; returns whether it wrote.
    async fn write_status(&self, cr: &A::Cr, update: StatusUpdate) -> Result<bool, EngineError> {
        let old = cr.resource_status();
        let new = next_status(old, update, Time(Timestamp::now()));
        if old == Some(&new) {
            return Ok(false);
        }
        let patch = json!({ "status": new });
        match self
            .api
            .patch_status(
                &cr.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(false),
            Err(error) => return Err(error.into()),
        }
        self.wrote(cr);
        self.count_write("kubernetes", "status");
        Ok(true)
    }

    async fn publish(&self, cr: &A::Cr, decision: &Decision) {
        let Some(event) = &decision.event else {
            return;
        };
        let reference = cr.object_ref(&());
        let event = KubeEvent {
            type_: event.type_,
            reason: event.reason.as_str().to_string(),
            note: Some(event.message.clone()),
            action: format!("{:?}", decision.action)
                .split(|c: char| !c.is_alphanumeric())
                .next()
                .unwrap_or("Sync")
                .to_string(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(%error, "cannot publish an Event");
        }
    }

    fn count_write(&self, side: &str, operation: &str) {
        self.metrics
            .writes
            .with_label_values(&[self.kind(), side, operation])
            .inc();
    }

    /// Applies one event of the config stream to the snapshot; returns the server name when what
    /// is known changed.
    pub fn apply_event(&self, event: &infinispan_rest::ConfigEvent) -> Option<String> {
        let (name, change) = self.adapter.change_of(event)?;
        self.metrics
            .stream_events
            .with_label_values(&[self.kind()])
            .inc();
        let changed = match change {
            ServerChange::Present(object) => {
                let digest = self.adapter.digest(&object);
                self.snapshot.present(&name, Known { object, digest })
            }
            ServerChange::Removed => self.snapshot.removed(&name),
        };
        self.metrics
            .server_objects
            .with_label_values(&[self.kind()])
            .set(i64::try_from(self.snapshot.len()).unwrap_or(i64::MAX));
        changed.then_some(name)
    }
}

fn action_label(action: Action) -> &'static str {
    match action {
        Action::CreateOnServer => "create",
        Action::UpdateServer => "update",
        Action::RecreateOnServer => "recreate",
        _ => "other",
    }
}

/// The label selector of the CRs of one cluster.
pub fn cluster_selector(cluster: &str) -> String {
    format!("{CLUSTER_LABEL}={cluster}")
}

/// Builds the engine of one kind and runs its controller until `shutdown` resolves. The
/// returned engine is also fed by the config stream (see [`super::stream`]).
pub struct Wiring<A: KindAdapter> {
    pub engine: Arc<Engine<A>>,
    trigger_rx: mpsc::UnboundedReceiver<ObjectRef<A::Cr>>,
    writer: reflector::store::Writer<A::Cr>,
}

impl<A: KindAdapter> std::fmt::Debug for Wiring<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wiring")
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

impl<A: KindAdapter> Wiring<A> {
    pub fn new(
        client: kube::Client,
        adapter: A,
        settings: Settings,
        metrics: Metrics,
        readiness: Readiness,
        recorder: Recorder,
    ) -> Self {
        let api = Api::<A::Cr>::namespaced(client, &settings.namespace);
        let (store, writer) = reflector::store();
        let (trigger, trigger_rx) = mpsc::unbounded();
        let (ready, _) = watch::channel(false);
        let engine = Arc::new(Engine {
            adapter,
            settings,
            api,
            store,
            snapshot: Snapshot::default(),
            metrics,
            readiness,
            recorder,
            trigger,
            ready,
            comparisons: Mutex::new(HashMap::new()),
            refusals: Mutex::new(HashMap::new()),
            replaced_versions: Mutex::new(HashMap::new()),
        });
        Self {
            engine,
            trigger_rx,
            writer,
        }
    }

    /// Runs the controller until `shutdown` resolves (graceful: reconciles in flight finish).
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
        concurrency: u16,
    ) {
        let Self {
            engine,
            trigger_rx,
            writer,
        } = self;
        let config = watcher::Config::default().labels(&cluster_selector(&engine.settings.cluster));
        let crs = watcher(engine.api.clone(), config)
            .default_backoff()
            .modify(|cr: &mut A::Cr| cr.managed_fields_mut().clear())
            .reflect(writer)
            .applied_objects();
        Controller::for_stream(crs, engine.store.clone())
            .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
            .reconcile_on(trigger_rx)
            .graceful_shutdown_on(shutdown)
            .run(
                |cr, engine: Arc<Engine<A>>| async move { engine.reconcile(cr).await },
                |cr, error: &EngineError, engine: Arc<Engine<A>>| {
                    tracing::warn!(kind = engine.kind(), cr = cr.name_any(), reason = error.reason(), %error, "reconcile failed");
                    Requeue::requeue(ERROR_REQUEUE)
                },
                engine.clone(),
            )
            .for_each(|result| async move {
                match result {
                    // Reported by the error policy already, or harmless (an object gone).
                    Err(
                        error @ (kube::runtime::controller::Error::ReconcilerFailed(..)
                        | kube::runtime::controller::Error::ObjectNotFound(_)),
                    ) => tracing::debug!(%error, "controller"),
                    Err(error) => tracing::warn!(%error, "CR watch or queue failed; retried with backoff"),
                    Ok(_) => {}
                }
            })
            .await;
    }
}
