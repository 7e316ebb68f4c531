//! The server side of the engine: consumes the config event stream (opened with
//! `includeCurrentState`, so the replay on every connect is the snapshot, design R4), keeps the
//! snapshot, triggers reconciles of the CRs a change concerns and, for server objects no CR
//! stands for, runs the server-only path (mirror CRs, design S1).
//!
//! Events are never handled inside a callback that could drop them: the snapshot records every
//! event first, and a failed mirror creation is retried on the next event or reconnect.

use std::sync::Arc;

use futures::StreamExt;
use infinispan_rest::{ConfigEventStream, StreamItem};

use super::controller::Engine;
use super::epoch::MarkerWriter;
use super::kind::KindAdapter;

/// Runs until the stream ends (never, unless dropped). `markers` creates the epoch markers
/// (design R2) the server lacks.
pub async fn run<A: KindAdapter>(
    engine: Arc<Engine<A>>,
    mut stream: ConfigEventStream,
    markers: impl MarkerWriter,
) {
    let mut first_snapshot = true;
    while let Some(item) = stream.next().await {
        match item {
            StreamItem::Connected { connection, .. } => {
                engine.metrics.stream_connections.inc();
                tracing::info!(
                    connection,
                    "config event stream connected; replay under way"
                );
                engine.epoch.connecting();
                engine.catalog.connecting();
                engine.snapshot.connecting();
            }
            StreamItem::Event(event) => {
                if let Some(appeared) = engine.catalog.apply(&event) {
                    engine.dependency_appeared(&appeared);
                }
                if engine.epoch.apply(&event) {
                    // A marker was removed while connected: replace it; every CR is judged
                    // again in the new epoch. (Markers are not objects of any kind.)
                    if engine.snapshot.is_connected() && engine.epoch.current().is_none() {
                        engine.epoch.ensure(&markers).await;
                        engine.trigger_all();
                    }
                    continue;
                }
                let changed = engine.apply_event(&event);
                if let Some(name) = changed
                    && engine.snapshot.is_connected()
                {
                    server_object_changed(&engine, &name).await;
                }
            }
            StreamItem::ReplayComplete { connection } => {
                // The epoch first: the snapshot counts as reachable as soon as it is complete.
                engine.epoch.complete_replay(&markers).await;
                engine.catalog.replay_complete();
                let gone = engine.snapshot.replay_complete();
                tracing::info!(
                    connection,
                    objects = engine.snapshot.len(),
                    gone = gone.len(),
                    epoch = engine.epoch.current(),
                    "server snapshot complete"
                );
                if first_snapshot {
                    first_snapshot = false;
                    // Mirrors are decided against a filled CR store, never an empty one.
                    tracing::info!("waiting for the CR store's initial list");
                    if wait_for_store(&engine.store).await.is_err() {
                        tracing::error!("the CR store is gone; stopping the stream");
                        return;
                    }
                    engine.set_ready();
                    tracing::info!(
                        crs = engine.store.state().len(),
                        "ready: CR store and server snapshot complete"
                    );
                }
                engine.resync().await;
            }
            StreamItem::Disconnected {
                error,
                retry_in,
                failures,
            } => {
                engine.metrics.stream_disconnects.inc();
                engine.epoch.disconnected();
                engine.snapshot.disconnected();
                tracing::warn!(%error, ?retry_in, failures, "config event stream disconnected");
            }
        }
    }
}

async fn server_object_changed<A: KindAdapter>(engine: &Engine<A>, name: &str) {
    if let Err(error) = engine.server_object_changed(name).await {
        tracing::warn!(server_name = name, %error, "cannot sync a server object without CR; retried on its next event or reconnect");
    }
}

/// Waits until the CR store has its initial list.
///
/// Not a plain `store.wait_until_ready().await`: kube-runtime 5's readiness signal keeps only the
/// waker of the last task that polled it, and the controller waits on the same store. When both
/// wait at once (a slow first list, e.g. right after the CRD was installed), only the
/// controller is woken and this task would wait forever (seen in CI: the operator never became
/// ready). Polling again every 200 ms re-registers this task; once the store is ready the next
/// poll returns at once.
async fn wait_for_store<K>(
    store: &kube::runtime::reflector::Store<K>,
) -> Result<(), kube::runtime::reflector::store::WriterDropped>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match tokio::time::timeout(
            std::time::Duration::from_millis(200),
            store.wait_until_ready(),
        )
        .await
        {
            Ok(result) => return result,
            Err(_) => continue,
        }
    }
}
