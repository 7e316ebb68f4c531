//! The engine of one kind: the CR watch (a reflector store without managedFields) feeding
//! kube-runtime's `Controller` (a per-key deduplicating queue, one reconcile in flight per key),
//! server events entering through `reconcile_on`, and the reconcile of one CR.
//!
//! Reconcile of one CR, in steps (`reconcile`, one method per step):
//! 1. wait until the first server snapshot is complete (the event stream's replay);
//! 2. observe: the CR's view (claims over the store), the server's view (the snapshot), their
//!    semantic comparison (the adapter; memoised per generation and server digest);
//! 3. decide (the pure [`decide`](super::decision::decide));
//! 4. execute the one action (server writes are read back into the snapshot);
//! 5. write the status, only when it changed, and the decision's Event.
//!
//! Submodules: `wiring` (watch, queue, controller), `reconcile` (the steps above), `mirror`
//! (the server-only path and the events entering the snapshot), `execute` (the writes a
//! decision asks for), `drain` (design E5), `screen` (unreadable CRs). What the engine keeps
//! between reconciles is in collaborators of its own: [`RequestQueue`], [`ClaimIndex`],
//! [`DependencyWaits`], [`ComparisonMemo`], [`Refusals`], [`ReplacedVersions`],
//! [`PendingEvents`] and [`LoopGuard`].

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use common_crds::ServerResource;
use common_crds::labels::CLUSTER_LABEL;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use operator_runtime::endpoint::Readiness;
use operator_runtime::events::Recorder;
use tokio::sync::watch;

use super::catalog::{Needed, ServerCatalog};
use super::claims::ClaimIndex;
use super::comparisons::ComparisonMemo;
use super::decision::Dependencies;
use super::epoch::ServerEpoch;
use super::kind::{KindAdapter, KindError};
use super::loop_guard::LoopGuard;
use super::order::BulkOrder;
use super::refusals::Refusals;
use super::requests::RequestQueue;
use super::server_writes::ServerWrites;
use super::snapshot::Snapshot;
use super::waits::DependencyWaits;
use super::writes::{PendingEvents, ReplacedVersions};
use crate::cluster::{ClusterState, Policy};
use crate::metrics::Metrics;

mod drain;
mod execute;
mod mirror;
mod reconcile;
mod screen;
mod wiring;

pub use wiring::Wiring;

/// The server epoch recorded in `lastSynced` by versions without epoch markers (design R2, removals
/// only when proven); an epoch that never matches a real one.
pub const EPOCH_UNTRACKED: &str = "untracked";

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
    pub order: BulkOrder,
    /// The window of server writes in flight (shared by every kind's engine).
    pub writes: ServerWrites,
    pub metrics: Metrics,
    pub readiness: Readiness,
    recorder: Recorder,
    ready: watch::Sender<bool>,
    /// The CR store has its first complete list (set from the watch, after the store took it).
    store_listed: watch::Sender<bool>,
    /// The controller is shutting down: reconciles still waiting for the first snapshot give
    /// up (they have done nothing yet), so that shutdown never waits for an unreachable server.
    stopping: watch::Sender<bool>,
    /// Draining is complete (design E5), logged once.
    drained: AtomicBool,
    /// Reconcile requests sent and not started yet (the `queue_depth` metric).
    requests: RequestQueue<ObjectRef<A::Cr>>,
    /// Who claims which server name (design N2, claims on a server name; P1, O(1) per change), kept
    /// from the watch.
    claims: ClaimIndex<A::Cr>,
    /// CRs waiting for a server object they need (design D1, dependencies between kinds).
    waits: DependencyWaits<ObjectRef<A::Cr>>,
    /// Per CR, the last comparison the server made.
    comparisons: ComparisonMemo,
    /// Per CR, what the server refused last.
    refusals: Refusals,
    /// Server objects whose mirror CR the API server refused.
    unmirrorable: crate::engine::unmirrorable::Unmirrorable,
    /// Server objects whose unclaimed sync failed, tried again on their own clock.
    retries: crate::engine::retries::Retries,
    /// Per CR, the resourceVersion our last write to it replaced (stale store copies).
    replaced: ReplacedVersions,
    /// Server events whose CR write is still to come (the `event_to_cr_seconds` metric).
    pending_events: PendingEvents,
    /// Content writes per object, against write loops.
    loop_guard: LoopGuard,
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
    /// The CR's dependencies: the adapter's, plus the server objects it needs that the server
    /// does not have; the CR is recorded as waiting for those (design D1).
    fn dependencies(&self, cr: &A::Cr) -> Dependencies {
        let mut dependencies = self.adapter.dependencies(cr);
        let missing: Vec<Needed> = self
            .adapter
            .needs(cr)
            .into_iter()
            .filter(|needed| !self.catalog.contains(needed))
            .collect();
        self.waits.wait_for(&ObjectRef::from_obj(cr), &missing);
        dependencies
            .missing
            .extend(missing.iter().map(Needed::describe));
        dependencies
    }

    /// A server object appeared: the CRs waiting for it are reconciled (design D1, dependencies
    /// between kinds).
    pub fn dependency_appeared(&self, needed: &Needed) {
        for key in self.waits.appeared(needed) {
            self.requests.send(key);
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

    /// Follows one event of the CR watch (the claims index); returns the server names that
    /// lost a claimant.
    pub(super) fn index(&self, event: &watcher::Event<A::Cr>) -> Vec<String> {
        match event {
            watcher::Event::Delete(cr) => {
                self.forget(|uid| Some(uid) != cr.uid().as_deref());
                let key = ObjectRef::from_obj(cr);
                self.requests.remove(&key);
                self.waits.retain(|waiting| *waiting != key);
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
                self.requests.retain(|key| self.store.get(key).is_some());
                self.waits
                    .retain(|waiting| self.store.get(waiting).is_some());
            }
            _ => {}
        }
        self.claims.apply(event)
    }

    /// Drops what is remembered per CR uid (comparisons, refusals, versions our writes
    /// replaced) of the CRs that are gone: those whose uid `keep` refuses.
    fn forget(&self, keep: impl Fn(&str) -> bool) {
        self.comparisons.retain(&keep);
        self.refusals.retain(&keep);
        self.replaced.retain(&keep);
    }

    /// The CRs of the store that claim `server_name`, from the index.
    fn claimants(&self, server_name: &str) -> Vec<Arc<A::Cr>> {
        self.claims
            .claimants(server_name)
            .iter()
            .filter_map(|key| self.store.get(key))
            .collect()
    }

    /// Sends a reconcile request for every CR of the store that stands for `server_name`;
    /// returns whether there was one.
    pub fn trigger_claimants(&self, server_name: &str) -> bool {
        let claimants = self.claimants(server_name);
        for cr in &claimants {
            self.requests.send(ObjectRef::from_obj(cr.as_ref()));
        }
        !claimants.is_empty()
    }

    /// Sends a reconcile request for the other CRs of the store that claim `server_name`.
    pub(super) fn trigger_rivals(&self, cr: &A::Cr, server_name: &str) {
        let uid = cr.uid();
        for rival in self.claimants(server_name) {
            if rival.uid() != uid {
                self.requests.send(ObjectRef::from_obj(rival.as_ref()));
            }
        }
    }

    /// Sends a reconcile request for every CR of the store.
    pub fn trigger_all(&self) {
        for cr in self.store.state() {
            self.requests.send(ObjectRef::from_obj(cr.as_ref()));
        }
    }

    /// A server event changed `server_name` (for the `event_to_cr_seconds` metric).
    pub(super) fn event_arrived(&self, server_name: &str) {
        self.pending_events.arrived(server_name, Instant::now());
    }

    /// The object's events are handled: observed in `event_to_cr_seconds` when it took a CR
    /// write; forgotten otherwise (an echo, a mode that does not mirror).
    pub(super) fn event_handled(&self, server_name: &str, wrote_cr: bool) {
        if let (Some(since), true) = (self.pending_events.handled(server_name), wrote_cr) {
            let seconds = since.elapsed().as_secs_f64();
            self.metrics
                .event_to_cr_seconds
                .with_label_values(&[self.kind()])
                .observe(seconds);
            tracing::debug!(
                target: crate::metrics::LATENCY_LOG,
                kind = self.kind(),
                server_name,
                event_to_cr_ms = seconds * 1e3,
                "a server event reached its CR"
            );
        }
    }

    /// `write` (an API write of a CR), timed in `cr_write_seconds`.
    pub(super) async fn timed_write<T>(&self, write: impl std::future::Future<Output = T>) -> T {
        let started = Instant::now();
        let written = write.await;
        self.metrics
            .cr_write_seconds
            .with_label_values(&[self.kind()])
            .observe(started.elapsed().as_secs_f64());
        written
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
        self.order.set_ready(A::KIND);
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
}

/// The label selector of the CRs of one cluster.
pub fn cluster_selector(cluster: &str) -> String {
    format!("{CLUSTER_LABEL}={cluster}")
}
