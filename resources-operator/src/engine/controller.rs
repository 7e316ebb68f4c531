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
//!
//! Submodules: [`wiring`] (watch, queue, controller), `mirror` (the server-only path and the
//! events entering the snapshot), `execute` (the writes a decision asks for).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common_crds::ServerResource;
use common_crds::common::LastSynced;
use common_crds::conditions::Reason;
use common_crds::labels::{
    CLUSTER_LABEL, MANAGED_ANNOTATION, MANAGED_FALSE, ORIGIN_LABEL, ORIGIN_SERVER,
    PAUSE_RECONCILIATION_ANNOTATION, PAUSE_RECONCILIATION_TRUE, RESOURCES_FINALIZER,
};
use futures::StreamExt;
use futures::channel::mpsc;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Resource, ResourceExt};
use operator_runtime::endpoint::Readiness;
use operator_runtime::events::{Event as KubeEvent, Recorder};
use serde_json::json;
use tokio::sync::watch;

use super::catalog::{Needed, ServerCatalog};
use super::claims;
use super::compact;
use super::comparing;
use super::decision::{
    Action, Comparison, CrView, Decision, Observation, ServerView, Status, decide,
};
use super::epoch::{ServerEpoch, proven_absence};
use super::kind::{Compared, KindAdapter, KindError, ServerChange};
use super::loop_guard::{self, Verdict};
use super::snapshot::{Known, Snapshot};
use super::status::{StatusUpdate, next_status};
use crate::cluster::{ClusterState, Policy};
use crate::metrics::Metrics;

mod drain;
mod execute;
mod mirror;
mod screen;
mod wiring;

pub use wiring::Wiring;

/// The server epoch recorded in `lastSynced` by versions without epoch markers (design R2); an
/// epoch that never matches a real one.
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
    /// What the Infinispan CR says: the policy (mode, winner), or drain (design E5). Read on
    /// every decision.
    pub state: watch::Receiver<ClusterState>,
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
    /// The server's epoch (shared by every kind's engine).
    pub epoch: ServerEpoch,
    /// The names of the server's objects (shared by every kind's engine).
    pub catalog: ServerCatalog,
    /// Bulk creation in order (shared by every kind's engine).
    pub order: super::order::BulkOrder,
    pub metrics: Metrics,
    pub readiness: Readiness,
    recorder: Recorder,
    trigger: mpsc::UnboundedSender<ObjectRef<A::Cr>>,
    ready: watch::Sender<bool>,
    /// The CR store has its first complete list (set from the watch, after the store took it).
    store_listed: watch::Sender<bool>,
    /// The controller is shutting down: reconciles still waiting for the first snapshot give
    /// up (they have done nothing yet), so that shutdown never waits for an unreachable server.
    stopping: watch::Sender<bool>,
    /// Per CR uid, the last comparison: (generation, server digest, result, whether a
    /// difference was classified).
    comparisons: Mutex<HashMap<String, (i64, String, Compared, bool)>>,
    refusals: Mutex<HashMap<String, Refusal>>,
    /// Per CR uid, the resourceVersion our last write to it replaced: a store copy still at
    /// that version is stale (the watch has not brought our write yet), and deciding on it
    /// would repeat the write.
    /// Bounded in time: a write the API server took as a no-op never brings a new version.
    replaced_versions: Mutex<HashMap<String, (String, Instant)>>,
    /// Draining is complete (design E5), logged once.
    drained: std::sync::atomic::AtomicBool,
    /// CRs waiting for a server object they need (design D1), by that object.
    waiting: Mutex<HashMap<Needed, HashSet<ObjectRef<A::Cr>>>>,
    /// Who claims which server name (design N2, P1), kept from the watch.
    claims: Mutex<claims::ClaimIndex<A::Cr>>,
    /// Reconcile requests sent and not started yet (the `queue_depth` metric).
    queued: Mutex<HashSet<ObjectRef<A::Cr>>>,
    /// Content writes per object, against write loops.
    loop_guard: Mutex<loop_guard::LoopGuard>,
    /// When a server event last changed an object whose CR write is still to come (the
    /// `event_to_cr_seconds` metric).
    events_pending: Mutex<HashMap<String, Instant>>,
}

impl<A: KindAdapter> std::fmt::Debug for Engine<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("kind", &A::Cr::KIND)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl<A: KindAdapter> Engine<A> {
    pub(super) fn lock<T, R>(mutex: &Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R {
        match mutex.lock() {
            Ok(mut guard) => f(&mut guard),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// The CR's dependencies: the adapter's, plus the server objects it needs that the server
    /// does not have; the CR is recorded as waiting for those (design D1).
    fn dependencies(&self, cr: &A::Cr) -> super::decision::Dependencies {
        let mut dependencies = self.adapter.dependencies(cr);
        let missing: Vec<Needed> = self
            .adapter
            .needs(cr)
            .into_iter()
            .filter(|needed| !self.catalog.contains(needed))
            .collect();
        let key = ObjectRef::from_obj(cr);
        Self::lock(&self.waiting, |waiting| {
            waiting.retain(|_, crs| {
                crs.remove(&key);
                !crs.is_empty()
            });
            compact::after_removal(waiting);
            for needed in &missing {
                waiting
                    .entry(needed.clone())
                    .or_default()
                    .insert(key.clone());
            }
        });
        dependencies
            .missing
            .extend(missing.iter().map(Needed::describe));
        dependencies
    }

    /// Forgets the CRs `keep` refuses as waiting for a server object (they are gone).
    fn stop_waiting(&self, keep: impl Fn(&ObjectRef<A::Cr>) -> bool) {
        Self::lock(&self.waiting, |waiting| {
            waiting.retain(|_, crs| {
                crs.retain(|key| keep(key));
                !crs.is_empty()
            });
            compact::after_removal(waiting);
        });
    }

    /// A server object appeared: the CRs waiting for it are reconciled (design D1).
    pub fn dependency_appeared(&self, needed: &Needed) {
        let waiting = Self::lock(&self.waiting, |waiting| {
            let crs = waiting.remove(needed);
            compact::after_removal(waiting);
            crs
        });
        for key in waiting.into_iter().flatten() {
            self.send(key);
        }
    }

    /// What the Infinispan CR says now.
    pub fn cluster_state(&self) -> ClusterState {
        *self.settings.state.borrow()
    }

    /// The sync policy, `None` while draining.
    pub fn policy(&self) -> Option<Policy> {
        match self.cluster_state() {
            ClusterState::Active(policy) => Some(policy),
            ClusterState::Draining(_) => None,
        }
    }

    pub(super) fn kind(&self) -> &'static str {
        A::Cr::KIND.as_str()
    }

    /// Queues a reconcile of one CR.
    pub(super) fn send(&self, key: ObjectRef<A::Cr>) {
        let depth = Self::lock(&self.queued, |queued| {
            queued.insert(key.clone());
            queued.len()
        });
        self.metrics
            .queue_depth
            .with_label_values(&[self.kind()])
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
        let _ = self.trigger.unbounded_send(key);
    }

    /// A reconcile of `cr` starts: it leaves the engine's queue.
    fn started(&self, cr: &A::Cr) {
        self.unqueue(|queued| {
            queued.remove(&ObjectRef::from_obj(cr));
        });
    }

    /// Takes requests out of the queue. A request for a CR deleted before it ran is never run
    /// (the controller finds no object), so the CR's deletion has to take it out.
    fn unqueue(&self, remove: impl FnOnce(&mut HashSet<ObjectRef<A::Cr>>)) {
        let depth = Self::lock(&self.queued, |queued| {
            remove(queued);
            compact::after_removal(queued);
            queued.len()
        });
        self.metrics
            .queue_depth
            .with_label_values(&[self.kind()])
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// Follows one event of the CR watch (the claims index); returns the server names that
    /// lost a claimant.
    pub(super) fn index(&self, event: &watcher::Event<A::Cr>) -> Vec<String> {
        match event {
            watcher::Event::Delete(cr) => {
                self.forget(|uid| Some(uid) != cr.uid().as_deref());
                let key = ObjectRef::from_obj(cr);
                self.unqueue(|queued| {
                    queued.remove(&key);
                });
                self.stop_waiting(|waiting| *waiting != key);
            }
            watcher::Event::InitDone => {
                self.store_listed.send_replace(true);
                let present: HashSet<String> = self
                    .store
                    .state()
                    .iter()
                    .filter_map(|cr| cr.uid())
                    .collect();
                self.forget(|uid| present.contains(uid));
                self.unqueue(|queued| queued.retain(|key| self.store.get(key).is_some()));
                self.stop_waiting(|waiting| self.store.get(waiting).is_some());
            }
            _ => {}
        }
        Self::lock(&self.claims, |claims| claims.apply(event))
    }

    /// Drops what is remembered per CR uid (comparisons, refusals, versions our writes
    /// replaced) of the CRs that are gone: those whose uid `keep` refuses.
    fn forget(&self, keep: impl Fn(&str) -> bool) {
        Self::lock(&self.comparisons, |memo| {
            memo.retain(|uid, _| keep(uid));
            compact::after_removal(memo);
        });
        Self::lock(&self.refusals, |refusals| {
            refusals.retain(|uid, _| keep(uid));
            compact::after_removal(refusals);
        });
        Self::lock(&self.replaced_versions, |replaced| {
            replaced.retain(|uid, _| keep(uid));
            compact::after_removal(replaced);
        });
    }

    /// The CRs of the store that claim `server_name`, from the index.
    fn claimants(&self, server_name: &str) -> Vec<Arc<A::Cr>> {
        Self::lock(&self.claims, |claims| claims.claimants(server_name))
            .iter()
            .filter_map(|key| self.store.get(key))
            .collect()
    }

    /// Sends a reconcile request for every CR of the store that stands for `server_name`;
    /// returns whether there was one.
    pub fn trigger_claimants(&self, server_name: &str) -> bool {
        let claimants = self.claimants(server_name);
        for cr in &claimants {
            self.send(ObjectRef::from_obj(cr.as_ref()));
        }
        !claimants.is_empty()
    }

    /// Sends a reconcile request for the other CRs of the store that claim `server_name`.
    pub(super) fn trigger_rivals(&self, cr: &A::Cr, server_name: &str) {
        let uid = cr.uid();
        for rival in self.claimants(server_name) {
            if rival.uid() != uid {
                self.send(ObjectRef::from_obj(rival.as_ref()));
            }
        }
    }

    /// Sends a reconcile request for every CR of the store.
    pub fn trigger_all(&self) {
        for cr in self.store.state() {
            self.send(ObjectRef::from_obj(cr.as_ref()));
        }
    }

    /// A server event changed `server_name` (for the `event_to_cr_seconds` metric).
    pub(super) fn event_arrived(&self, server_name: &str) {
        Self::lock(&self.events_pending, |pending| {
            pending
                .entry(server_name.to_string())
                .or_insert_with(Instant::now);
        });
    }

    /// The object's events are handled: observed in `event_to_cr_seconds` when it took a CR
    /// write; forgotten otherwise (an echo, a mode that does not mirror).
    pub(super) fn event_handled(&self, server_name: &str, wrote_cr: bool) {
        let since = Self::lock(&self.events_pending, |pending| {
            let since = pending.remove(server_name);
            compact::after_removal(pending);
            since
        });
        if let (Some(since), true) = (since, wrote_cr) {
            self.metrics
                .event_to_cr_seconds
                .with_label_values(&[self.kind()])
                .observe(since.elapsed().as_secs_f64());
        }
    }

    /// Waits until the CR store has its first complete list; false if the watch ended first.
    ///
    /// Not kube-runtime's `Store::wait_until_ready` alone: its readiness signal keeps only the
    /// waker of the last task that polled it, and the controller waits on the same store, so
    /// this task could be left asleep (seen in CI: the operator never became ready). Re-polling
    /// it every 200 ms cost a startup up to 200 ms (a third of the 100-cache startup sync, in
    /// two runs of five of `make bench`): the watch's own `InitDone` wakes this task now.
    pub async fn wait_for_store(&self) -> bool {
        let mut listed = self.store_listed.subscribe();
        loop {
            tokio::select! {
                listed = listed.wait_for(|listed| *listed) => return listed.is_ok(),
                // The store's own signal, polled again every second: the end of the watch (the
                // writer dropped, an error) wakes only one of its waiters too.
                ready = tokio::time::timeout(
                    std::time::Duration::from_secs(1),
                    self.store.wait_until_ready(),
                ) => {
                    if let Ok(ready) = ready {
                        return ready.is_ok();
                    }
                }
            }
        }
    }

    /// The first snapshot is complete: reconciles may decide.
    pub fn set_ready(&self) {
        if !self.ready.send_replace(true) {
            self.readiness.part_ready();
        }
        self.order.set_ready(A::EVENT_KIND);
    }

    /// Waits for the first complete server snapshot, unless draining: a drain needs no server
    /// (the cluster may be gone already). False when the controller stops first (a server
    /// never reached, e.g. refusing TLS): the reconcile must do nothing.
    pub(super) async fn wait_ready(&self) -> bool {
        let mut ready = self.ready.subscribe();
        let mut state = self.settings.state.clone();
        let mut stopping = self.stopping.subscribe();
        tokio::select! {
            _ = ready.wait_for(|ready| *ready) => true,
            _ = state.wait_for(|s| matches!(s, ClusterState::Draining(_))) => true,
            _ = stopping.wait_for(|stopping| *stopping) => false,
        }
    }

    // ---- Reconcile of one CR ---------------------------------------------------------------

    pub(super) async fn reconcile(&self, cr: Arc<A::Cr>) -> Result<Requeue, EngineError> {
        if !self.wait_ready().await {
            return Ok(Requeue::await_change());
        }
        self.started(&cr);
        let _busy = self.order.begin(A::EVENT_KIND);
        let started = Instant::now();
        let in_flight = self
            .metrics
            .reconciles_in_flight
            .with_label_values(&[self.kind()]);
        in_flight.inc();
        let result = self.sync(&cr).await;
        in_flight.dec();
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

    pub(super) fn cr_view(&self, cr: &A::Cr, server_name: &str) -> CrView {
        let annotations = cr.annotations();
        let rivals = self.claimants(server_name);
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
            claim: claims::resolve(cr, server_name, rivals.iter().map(Arc::as_ref)),
        }
    }

    /// The comparison of the CR with the server object (memoised per generation and digest
    /// when the server was asked), and whether a difference is classified (in place or not):
    /// without `classify`, the kind's cheaper unclassified comparison when it has one (see
    /// [`super::comparing`]).
    pub(super) async fn compare(
        &self,
        cr: &A::Cr,
        generation: i64,
        known: &Known<A::Object>,
        classify: bool,
    ) -> Result<(Compared, bool), KindError> {
        let uid = cr.uid().unwrap_or_default();
        let memo = Self::lock(&self.comparisons, |memo| {
            memo.get(&uid)
                .filter(|(g, d, _, classified)| {
                    *g == generation && *d == known.digest && (*classified || !classify)
                })
                .map(|(_, _, compared, classified)| (compared.clone(), *classified))
        });
        if let Some(memo) = memo {
            return Ok(memo);
        }
        let unclassified = if classify {
            None
        } else {
            self.adapter.compare_unclassified(cr, &known.object).await?
        };
        let (compared, classified) = match unclassified {
            Some(compared) => {
                let classified = compared.comparison == Comparison::Equal;
                (compared, classified)
            }
            None => (self.adapter.compare(cr, &known.object).await?, true),
        };
        if compared.asked_server {
            Self::lock(&self.comparisons, |memo| {
                memo.insert(
                    uid,
                    (
                        generation,
                        known.digest.clone(),
                        compared.clone(),
                        classified,
                    ),
                )
            });
        }
        Ok((compared, classified))
    }

    /// One reconcile: observe, decide, execute, write status. Returns the metrics label of the
    /// outcome and the requeue.
    pub(super) async fn sync(&self, cr: &A::Cr) -> Result<(&'static str, Requeue), EngineError> {
        if self.is_stale(cr) {
            return Ok(("stale", Requeue::requeue(STALE_REQUEUE)));
        }
        let policy = match self.cluster_state() {
            ClusterState::Active(policy) => policy,
            ClusterState::Draining(cause) => return self.drain_one(cr, cause).await,
        };
        let server_name = cr.server_name().ok_or(EngineError::NoName)?;
        let cr_view = self.cr_view(cr, &server_name);
        let generation = cr_view.generation;
        // Without a known epoch nothing about the server can be judged: as unreachable.
        let epoch = self.epoch.current();
        let server = match (&epoch, self.snapshot.view(&server_name)) {
            (None, _) => ServerView::Unreachable,
            (Some(current), ServerView::Absent(seen)) => ServerView::Absent(proven_absence(
                seen,
                cr_view.last_synced.as_ref().map(|l| l.epoch.as_str()),
                current,
                self.adapter.persistent(cr),
            )),
            (Some(_), view) => view,
        };
        let known = self.snapshot.get(&server_name);
        let digest = known.as_ref().map(|k| k.digest.clone());
        // A CR being deleted is not compared: its document may be one the server refuses, which
        // must not keep the deletion from happening.
        let needs_comparison = cr_view.managed
            && !cr_view.deleting
            && !cr_view.paused
            && !self.adapter.is_internal(&server_name)
            && cr_view.claim == super::decision::Claim::Owner
            && matches!(server, ServerView::Present(_));
        // A comparison the server refused for this very generation and server object is not
        // asked again (a resync, a relist or our own status write must not call the server).
        if needs_comparison && let Some(known) = &known {
            let refusal = Refusal {
                generation,
                digest: Some(known.digest.clone()),
            };
            let uid = cr.uid().unwrap_or_default();
            if Self::lock(&self.refusals, |r| r.get(&uid) == Some(&refusal)) {
                return Ok(("rejected", Requeue::await_change()));
            }
        }
        let mut compared = match (&known, needs_comparison) {
            (Some(known), true)
                if comparing::differs_without_asking(
                    cr_view.last_synced.as_ref(),
                    generation,
                    self.adapter.held_digest(cr).as_deref(),
                    &known.digest,
                    policy.mode,
                ) =>
            {
                Some((
                    Compared::local(Comparison::Different { in_place: false }, Vec::new()),
                    false,
                ))
            }
            (Some(known), true) => match self.compare(cr, generation, known, false).await {
                Ok(compared) => Some(compared),
                Err(error) => {
                    return self
                        .refused(cr, &server_name, generation, &digest, error)
                        .await;
                }
            },
            _ => None,
        };
        let mut observation = Observation {
            cr: Some(cr_view.clone()),
            server,
            server_epoch: epoch.unwrap_or_else(|| EPOCH_UNTRACKED.to_string()),
            comparison: compared
                .as_ref()
                .map(|(c, _)| c.comparison)
                .unwrap_or(Comparison::Equal),
            internal: self.adapter.is_internal(&server_name),
            dependencies: self.dependencies(cr),
            mode: policy.mode,
            winner: policy.winner,
            caps: self.adapter.capabilities(),
        };
        // A difference not classified yet, where the decision depends on it: asked now.
        if let (Some((_, false)), Some(known)) = (&compared, &known)
            && comparing::classification_matters(&observation)
        {
            match self.compare(cr, generation, known, true).await {
                Ok(full) => {
                    observation.comparison = full.0.comparison;
                    compared = Some(full);
                }
                Err(error) => {
                    return self
                        .refused(cr, &server_name, generation, &digest, error)
                        .await;
                }
            }
        }
        let compared = compared.map(|(compared, _)| compared);
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

        // In sync, yet not usable (a schema stored with errors): say so, in the server's words.
        if decision.action == Action::Nothing
            && let (Some(Status::Ready { reason, message }), Some(known)) =
                (decision.status.as_mut(), known.as_ref())
            && *reason == Reason::Synced
            && let Some((problem, text)) = self.adapter.problem(&known.object)
        {
            *reason = problem;
            *message = text;
        }

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

        // A content write that would continue a write loop is held (see `loop_guard`).
        let content_write = matches!(
            decision.action,
            Action::CreateOnServer
                | Action::UpdateServer
                | Action::RecreateOnServer
                | Action::UpdateCrSpecFromServer
        );
        // Only writes that undo another writer count (see `loop_guard::counts`).
        let content_write = content_write
            && loop_guard::counts(
                !matches!(decision.action, Action::UpdateCrSpecFromServer),
                cr_view.last_synced.as_ref().map(|l| l.generation) != Some(generation),
            );
        let uid = cr.uid().unwrap_or_default();
        let now = Instant::now();
        if content_write
            && let Verdict::Held { until, writes } =
                Self::lock(&self.loop_guard, |guard| guard.check(&uid, now))
        {
            return self.held(cr, &server_name, generation, until, writes).await;
        }

        let executed = match self
            .execute(
                cr,
                &server_name,
                &decision,
                known.as_ref(),
                Some(observation.server_epoch.as_str()).filter(|e| *e != EPOCH_UNTRACKED),
            )
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
        if content_write {
            Self::lock(&self.loop_guard, |guard| {
                guard.wrote(&uid, now);
                guard.prune(now);
            });
        }
        self.event_handled(
            &server_name,
            matches!(
                decision.action,
                Action::UpdateCrSpecFromServer | Action::DeleteCr
            ),
        );
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
        // Adding the finalizer says nothing new: the next step writes the status (design L2: a
        // new CR costs one finalizer write and one status write).
        let status_written = if decision.action == Action::AddFinalizer {
            false
        } else {
            self.write_status(current, update).await?
        };
        self.publish(cr, &decision).await;
        if decision.action.writes_server() {
            Self::lock(&self.refusals, |r| {
                r.remove(&cr.uid().unwrap_or_default());
                compact::after_removal(r);
            });
        }
        Ok(match decision.action {
            Action::Nothing if status_written => ("status", Requeue::await_change()),
            Action::Nothing => ("nothing", Requeue::await_change()),
            Action::Wait(_) => ("wait", Requeue::requeue(WAIT_REQUEUE)),
            _ => ("wrote", Requeue::requeue(AFTER_WRITE_REQUEUE)),
        })
    }

    /// The object is held by the loop guard: say so (status, and one Warning Event when the
    /// status changes) and come back when the hold ends.
    async fn held(
        &self,
        cr: &A::Cr,
        server_name: &str,
        generation: i64,
        until: Instant,
        writes: usize,
    ) -> Result<(&'static str, Requeue), EngineError> {
        let wait = until.saturating_duration_since(Instant::now());
        let message = format!(
            "{writes} writes to this object within {} s: another writer keeps changing it against \
             this operator (a second operator or a client pointed at the same server?). Its \
             writes for this object are held for {} s; fix the other writer or pause this CR",
            loop_guard::WINDOW.as_secs(),
            wait.as_secs()
        );
        tracing::warn!(
            kind = self.kind(),
            cr = cr.name_any(),
            server_name,
            writes,
            "write loop: held"
        );
        let update = StatusUpdate {
            conditions: Some(Status::Ready {
                reason: Reason::WriteLoop,
                message: message.clone(),
            }),
            last_synced: None,
            generation: Some(generation),
            server_name: server_name.to_string(),
        };
        if self.write_status(cr, update).await? {
            let event = KubeEvent {
                type_: kube::runtime::events::EventType::Warning,
                reason: Reason::WriteLoop.as_str().to_string(),
                note: Some(message),
                action: "Hold".to_string(),
                secondary: None,
            };
            if let Err(error) = self.recorder.publish(&event, &cr.object_ref(&())).await {
                tracing::warn!(%error, "cannot publish an Event");
            }
        }
        Ok(("held", Requeue::requeue(wait.max(Duration::from_secs(1)))))
    }

    /// A server call failed: a refusal is reported (`Rejected`, the server's message) and not
    /// retried until something changes; a transient failure reports `ServerUnavailable` and is
    /// retried with backoff.
    pub(super) async fn refused(
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
        // A transient failure while the CR is in sync changes nothing the user should see: it is
        // retried, and the status keeps saying Synced (the server only blinked).
        let in_sync = cr
            .resource_status()
            .and_then(|s| s.last_synced.as_ref())
            .is_some_and(|l| l.generation == generation && Some(&l.digest) == digest.as_ref());
        if retry && in_sync {
            return Err(error.into());
        }
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
}

/// The label selector of the CRs of one cluster.
pub fn cluster_selector(cluster: &str) -> String {
    format!("{CLUSTER_LABEL}={cluster}")
}
