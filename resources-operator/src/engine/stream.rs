//! The server side of the engine: consumes a server stream (the config event stream, opened
//! with `includeCurrentState` so that the replay on every connect is the snapshot, design R4;
//! or a feed of schemas, counters or tasks, which behaves alike), keeps the snapshot, triggers reconciles of the CRs a change concerns and, for server objects no CR
//! stands for, runs the server-only path (mirror CRs, design S1).
//!
//! Events are never handled inside a callback that could drop them: the snapshot records every
//! event first, and a failed mirror creation is retried on the next event or reconnect.

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use futures::StreamExt;
use futures::future::BoxFuture;
use infinispan_rest::{ConfigEvent, EventKind, StreamItem};

use super::ServerState;
use super::catalog::Needed;
use super::controller::Engine;
use super::drift::{Step, Watch};
use super::epoch::MarkerStore;
use super::kind::KindAdapter;
use crate::metrics::Metrics;

/// What the stream needs of one kind's engine (object-safe, so that one stream feeds the
/// engines of every kind).
pub trait KindSink: Send + Sync {
    fn kind(&self) -> &'static str;
    /// The server objects of this kind (the catalog's key).
    fn event_kind(&self) -> EventKind;
    /// A connection is made; its replay starts.
    fn connecting(&self);
    /// The connection ended.
    fn disconnected(&self);
    /// Takes one event; the server name when it concerned this kind and changed what is known.
    fn apply_event(&self, event: &ConfigEvent) -> Option<String>;
    /// The replay is complete; returns how many objects were not replayed. `same_run`: the
    /// server's epoch is the one of the previous replay (see [`super::snapshot::Snapshot`]).
    fn replay_complete(&self, same_run: bool) -> usize;
    /// Objects known now.
    fn objects(&self) -> usize;
    /// The server name when `document` (a listed current document) is of this kind and differs
    /// from what the snapshot has of it (see [`super::drift`]).
    fn drifted(&self, document: &ConfigEvent) -> Option<String>;
    /// A drifted object was applied to the snapshot: report it.
    fn drift_found<'a>(&'a self, name: &'a str) -> BoxFuture<'a, ()>;
    /// A Warning Event on the cluster's `Infinispan` CR about the server.
    fn warn_cluster<'a>(&'a self, reason: &'a str, note: String) -> BoxFuture<'a, ()>;
    /// A server object of this kind changed while connected.
    fn object_changed<'a>(&'a self, name: &'a str) -> BoxFuture<'a, ()>;
    /// Waits for the CR store's initial list; false when the store is gone.
    fn wait_for_store(&self) -> BoxFuture<'_, bool>;
    /// The first snapshot is complete and the store filled: reconciles may decide.
    fn set_ready(&self);
    /// Every CR and every unclaimed server object decided again (after a replay).
    fn resync(&self) -> BoxFuture<'_, ()>;
    /// Every CR reconciled again (a new epoch).
    fn trigger_all(&self);
    /// A server object some CRs may wait for appeared (design D1, dependencies between kinds).
    fn dependency_appeared(&self, needed: &Needed);
    /// The Infinispan CR asks to drain (design E5).
    fn start_draining(&self, cause: crate::cluster::DrainCause);
}

impl<A: KindAdapter> KindSink for Engine<A> {
    fn kind(&self) -> &'static str {
        <A::Cr as common_crds::ServerResource>::KIND.as_str()
    }

    fn event_kind(&self) -> EventKind {
        A::EVENT_KIND
    }

    fn connecting(&self) {
        self.snapshot.connecting();
    }

    fn disconnected(&self) {
        self.snapshot.disconnected();
    }

    fn apply_event(&self, event: &ConfigEvent) -> Option<String> {
        Engine::apply_event(self, event)
    }

    fn replay_complete(&self, same_run: bool) -> usize {
        self.snapshot.replay_complete(same_run).len()
    }

    fn objects(&self) -> usize {
        self.snapshot.len()
    }

    fn drifted(&self, document: &ConfigEvent) -> Option<String> {
        Engine::drifted(self, document)
    }

    fn drift_found<'a>(&'a self, name: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(Engine::drift_found(self, name))
    }

    fn warn_cluster<'a>(&'a self, reason: &'a str, note: String) -> BoxFuture<'a, ()> {
        Box::pin(Engine::warn_cluster(self, reason, note, "Sync"))
    }

    fn object_changed<'a>(&'a self, name: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // A failure is logged and tried again on its own clock.
            let _ = self.server_object_changed(name).await;
        })
    }

    fn wait_for_store(&self) -> BoxFuture<'_, bool> {
        Box::pin(Engine::wait_for_store(self))
    }

    fn set_ready(&self) {
        Engine::set_ready(self);
    }

    fn resync(&self) -> BoxFuture<'_, ()> {
        Box::pin(Engine::resync(self))
    }

    fn trigger_all(&self) {
        Engine::trigger_all(self);
    }

    fn dependency_appeared(&self, needed: &Needed) {
        Engine::dependency_appeared(self, needed);
    }

    fn start_draining(&self, cause: crate::cluster::DrainCause) {
        Engine::start_draining(self, cause);
    }
}

/// Runs until the stream ends (never, unless dropped): one stream (`name`, for logs and
/// metrics) for the engines of `sinks` and the server state every engine shares; `others` are
/// the engines fed by other streams, told when an object they may need appears and when the
/// epoch changes. The config event stream (caches, templates) owns the server's epoch:
/// `markers` creates the epoch markers (design R2, removals only when proven) the server lacks. The
/// feeds of the other kinds (schemas, counters, tasks) run the same loop without markers and leave
/// the epoch alone. `drift` checks the server's documents against the snapshot while connected
/// ([`super::drift`]).
#[allow(clippy::too_many_arguments)]
pub async fn run<S, M>(
    name: &'static str,
    sinks: Vec<Arc<dyn KindSink>>,
    others: Vec<Arc<dyn KindSink>>,
    server: ServerState,
    metrics: Metrics,
    mut stream: S,
    markers: Option<M>,
    mut drift: Watch,
) where
    S: Stream<Item = StreamItem> + Unpin,
    M: MarkerStore,
{
    let mut feed = Feed {
        name,
        kinds: sinks.iter().map(|sink| sink.event_kind()).collect(),
        sinks,
        others,
        server,
        metrics,
        markers,
        first_snapshot: true,
        connected: false,
        replayed_in: None,
    };
    loop {
        tokio::select! {
            item = stream.next() => {
                let Some(item) = item else { return };
                match item {
                    StreamItem::Connected { connection, .. } => {
                        drift.disconnected();
                        feed.connected(connection);
                    }
                    StreamItem::Event(event) => {
                        drift.saw(&event);
                        feed.event(&event).await;
                    }
                    StreamItem::ReplayComplete { connection } => {
                        if !feed.replay_complete(connection).await {
                            return;
                        }
                        drift.connected();
                    }
                    StreamItem::Disconnected {
                        error,
                        retry_in,
                        failures,
                    } => {
                        drift.disconnected();
                        feed.disconnected(&error, retry_in, failures).await;
                    }
                }
            }
            step = drift.next() => feed.drift(&mut drift, step).await,
        }
    }
}

/// One server stream feeding its engines (see [`run`]), and what it knows of its connection.
struct Feed<M> {
    name: &'static str,
    sinks: Vec<Arc<dyn KindSink>>,
    others: Vec<Arc<dyn KindSink>>,
    /// The server objects of `sinks` (the catalog's keys).
    kinds: Vec<EventKind>,
    server: ServerState,
    metrics: Metrics,
    markers: Option<M>,
    first_snapshot: bool,
    /// Connected, and the replay of this connection complete.
    connected: bool,
    /// The server's epoch at the last complete replay of this stream.
    replayed_in: Option<String>,
}

impl<M: MarkerStore> Feed<M> {
    /// A connection is made: its replay starts.
    fn connected(&mut self, connection: u64) {
        self.metrics
            .stream_connections
            .with_label_values(&[self.name])
            .inc();
        tracing::info!(
            connection,
            stream = self.name,
            "server stream connected; snapshot under way"
        );
        self.connected = false;
        if self.markers.is_some() {
            self.server.epoch.connecting();
        }
        self.server.catalog.connecting(&self.kinds);
        for sink in &self.sinks {
            sink.connecting();
        }
    }

    /// One event: into the catalog, the epoch (a marker) or the snapshot of its kind; once the
    /// replay is complete, the CRs it concerns are reconciled.
    async fn event(&self, event: &ConfigEvent) {
        let Self {
            server,
            sinks,
            others,
            ..
        } = self;
        for appeared in server.catalog.apply(event) {
            for sink in sinks.iter().chain(others) {
                sink.dependency_appeared(&appeared);
            }
        }
        if let Some(markers) = &self.markers
            && server.epoch.apply(event)
        {
            // A marker was removed while connected: replace it; every CR is judged
            // again in the new epoch. (Markers are not objects of any kind.)
            if self.connected && server.epoch.current().is_none() {
                server.epoch.ensure(markers).await;
                for sink in sinks.iter().chain(others) {
                    sink.trigger_all();
                }
            }
            return;
        }
        for sink in sinks {
            if let Some(name) = sink.apply_event(event)
                && self.connected
            {
                sink.object_changed(&name).await;
            }
        }
    }

    /// Whether some engine's snapshot differs from a listed current document.
    fn differs(&self, document: &ConfigEvent) -> bool {
        self.sinks
            .iter()
            .any(|sink| sink.drifted(document).is_some())
    }

    /// One step of the drift check ([`super::drift`]): candidates kept after a list; after
    /// their grace, the drift applied as the events the server never sent, and reported.
    async fn drift(&self, watch: &mut Watch, step: Step) {
        let stream = self.name;
        match step {
            Step::Listed(listed) => {
                self.count_drift_check("ok");
                let documents = listed.len();
                let candidates = watch.candidates(listed, |d| self.differs(d));
                if candidates > 0 {
                    tracing::debug!(
                        stream,
                        documents,
                        candidates,
                        "drift check: documents differ from the snapshot; confirming"
                    );
                } else {
                    tracing::trace!(stream, documents, "drift check: no difference");
                }
            }
            Step::Failed(error) => {
                self.count_drift_check("error");
                tracing::warn!(stream, %error, "drift check: cannot list the server's documents; tried again at the next interval");
            }
            Step::Confirm(candidates) => {
                for document in watch.confirmed(candidates, |d| self.differs(d)) {
                    let drifted: Vec<(&Arc<dyn KindSink>, String)> = self
                        .sinks
                        .iter()
                        .filter_map(|sink| Some((sink, sink.drifted(&document)?)))
                        .collect();
                    self.event(&document).await;
                    for (sink, name) in drifted {
                        sink.drift_found(&name).await;
                    }
                }
            }
        }
    }

    fn count_drift_check(&self, result: &str) {
        self.metrics
            .drift_checks
            .with_label_values(&[self.name, result])
            .inc();
    }

    /// The replay is complete: the snapshot is, and everything is decided again in it. False
    /// when a CR store is gone (the stream stops).
    async fn replay_complete(&mut self, connection: u64) -> bool {
        let epoch = &self.server.epoch;
        // The epoch first: the snapshot counts as reachable as soon as it is complete.
        if let Some(markers) = &self.markers {
            epoch.complete_replay(markers).await;
        }
        self.server.catalog.replay_complete(&self.kinds);
        let current = epoch.current();
        let same_run = current.is_some() && current == self.replayed_in;
        for sink in &self.sinks {
            let gone = sink.replay_complete(same_run);
            tracing::info!(
                connection,
                kind = sink.kind(),
                objects = sink.objects(),
                gone,
                epoch = epoch.current(),
                "server snapshot complete"
            );
        }
        self.replayed_in = current;
        self.connected = true;
        if self.first_snapshot {
            self.first_snapshot = false;
            if !self.become_ready().await {
                return false;
            }
        }
        for sink in &self.sinks {
            sink.resync().await;
        }
        // The epoch is known again: the other feeds' objects are decided in it too
        // (their unclaimed objects wait for a known epoch).
        if self.markers.is_some() {
            for sink in &self.others {
                sink.resync().await;
            }
        }
        true
    }

    /// The first snapshot is complete: once the CR stores have their initial lists, the
    /// engines are ready. Mirrors are decided against a filled CR store, never an empty one.
    /// False when a CR store is gone.
    async fn become_ready(&self) -> bool {
        let name = self.name;
        tracing::info!(stream = name, "waiting for the CR stores' initial lists");
        for sink in &self.sinks {
            if !sink.wait_for_store().await {
                tracing::error!(
                    kind = sink.kind(),
                    "a CR store is gone; stopping the stream"
                );
                return false;
            }
        }
        for sink in &self.sinks {
            sink.set_ready();
        }
        tracing::info!(
            stream = name,
            "ready: CR stores and server snapshot complete"
        );
        true
    }

    /// The connection ended; the stream reconnects after `retry_in`.
    async fn disconnected(
        &mut self,
        error: &infinispan_rest::Error,
        retry_in: Duration,
        failures: u32,
    ) {
        let name = self.name;
        self.metrics
            .stream_disconnects
            .with_label_values(&[name])
            .inc();
        self.connected = false;
        if self.markers.is_some() {
            self.server.epoch.disconnected();
        }
        for sink in &self.sinks {
            sink.disconnected();
        }
        if let infinispan_rest::Error::ResponseTooLarge { .. } = error {
            // Retried like any failure (with backoff); said where users look.
            tracing::warn!(%error, ?retry_in, failures, stream = name, "the server sent more than the operator reads: connection dropped");
            if let Some(sink) = self.sinks.first() {
                let note = format!(
                    "stream {name}: {error}; the operator reconnects with backoff (next in {retry_in:?})"
                );
                sink.warn_cluster("ServerAnswerTooLarge", note).await;
            }
        } else if let infinispan_rest::Error::Tls { .. } = error {
            // Retried like any failure, but a retry cannot fix it: say what must change.
            tracing::error!(
                %error,
                ?retry_in,
                failures,
                stream = name,
                "cannot connect to the server over TLS: nothing is synced until this is \
                 fixed. A server certificate signed by a private CA needs that CA given \
                 with --ca-bundle; otherwise check the server's certificate and \
                 --infinispan-url"
            );
        } else {
            tracing::warn!(%error, ?retry_in, failures, stream = name, "server stream disconnected");
        }
    }
}
