//! The wiring of one kind's engine: the CR watch (a reflector store without managedFields)
//! feeding kube-runtime's `Controller`, and the trigger channel through which server events
//! reach it.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc;
use kube::api::Api;
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use operator_runtime::endpoint::Readiness;
use operator_runtime::events::Recorder;
use tokio::sync::watch;
use tracing::Instrument;

use super::{Engine, EngineError, Settings, cluster_selector};
use crate::engine::claims::ClaimIndex;
use crate::engine::kind::KindAdapter;
use crate::engine::requests::RequestQueue;
use crate::engine::snapshot::Snapshot;
use crate::metrics::Metrics;

/// Requeue after a failed reconcile.
const ERROR_REQUEUE: Duration = Duration::from_secs(5);

/// How often the retry loop looks for server objects due to be tried again.
const RETRY_TICK: Duration = Duration::from_secs(1);

/// Builds the engine of one kind and runs its controller until `shutdown` resolves. The
/// returned engine is also fed by the config stream (see [`crate::engine::stream`]).
pub struct Wiring<A: KindAdapter> {
    pub engine: Arc<Engine<A>>,
    /// The CR API read through `DeserializeGuard` (see `screen`).
    guarded: Api<kube::core::DeserializeGuard<A::Cr>>,
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
        server: crate::engine::ServerState,
        metrics: Metrics,
        readiness: Readiness,
        recorder: Recorder,
    ) -> Self {
        let guarded = Api::namespaced(client.clone(), &settings.namespace);
        let api = Api::<A::Cr>::namespaced(client, &settings.namespace);
        let (store, writer) = reflector::store();
        let (trigger, trigger_rx) = mpsc::unbounded();
        let (ready, _) = watch::channel(false);
        let kind = <A::Cr as common_crds::ServerResource>::KIND.as_str();
        let requests = RequestQueue::new(trigger, metrics.queue_depth.clone(), kind);
        let engine = Arc::new(Engine {
            adapter,
            settings,
            api,
            store,
            snapshot: Snapshot::default(),
            epoch: server.epoch,
            catalog: server.catalog,
            order: server.order,
            writes: server.writes,
            metrics,
            readiness,
            recorder,
            ready,
            store_listed: watch::channel(false).0,
            stopping: watch::channel(false).0,
            drained: Default::default(),
            requests,
            claims: ClaimIndex::default(),
            waits: Default::default(),
            comparisons: Default::default(),
            refusals: Default::default(),
            unmirrorable: Default::default(),
            retries: Default::default(),
            replaced: Default::default(),
            pending_events: Default::default(),
            loop_guard: Default::default(),
        });
        Self {
            engine,
            guarded,
            trigger_rx,
            writer,
        }
    }

    /// Runs the controller until `shutdown` resolves (graceful: reconciles in flight finish;
    /// those still waiting for the first server snapshot end without doing anything).
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
        concurrency: u16,
    ) {
        let Self {
            engine,
            guarded,
            trigger_rx,
            writer,
        } = self;
        let shutdown = {
            let engine = Arc::clone(&engine);
            async move {
                shutdown.await;
                engine.stopping.send_replace(true);
            }
        };
        let config = watcher::Config::default().labels(&cluster_selector(&engine.settings.cluster));
        let crs = watcher(guarded, config)
            .default_backoff()
            .filter_map({
                let engine = Arc::clone(&engine);
                move |event| {
                    let engine = Arc::clone(&engine);
                    async move {
                        match event {
                            Ok(event) => {
                                let (event, invalid) = super::screen::screen(event);
                                for object in invalid {
                                    engine.report_invalid(object).await;
                                }
                                event.map(Ok)
                            }
                            Err(error) => Some(Err(error)),
                        }
                    }
                }
            })
            .modify(|cr: &mut A::Cr| slim(cr))
            .reflect(writer)
            .inspect({
                let engine = Arc::clone(&engine);
                move |event| {
                    if let Ok(event) = event {
                        // A CR that went hands its server name over: the other claimants, or
                        // the server-only path, decide again (after the store has it gone).
                        for name in engine.index(event) {
                            let engine = Arc::clone(&engine);
                            tokio::spawn(
                                async move {
                                    // A failure is logged and tried again on its own clock.
                                    let _ = engine.server_object_changed(&name).await;
                                }
                                .in_current_span(),
                            );
                        }
                    }
                }
            })
            .applied_objects();
        // Server objects whose sync failed or whose mirror CR was refused, tried again when
        // due, until the controller stops.
        let retry_loop = {
            let engine = Arc::clone(&engine);
            async move {
                let mut tick = tokio::time::interval(RETRY_TICK);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    if *engine.ready.borrow() {
                        engine.retry_due().await;
                    }
                }
            }
            .in_current_span()
        };
        let controller = Controller::for_stream(crs, engine.store.clone())
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
            });
        tokio::select! {
            () = controller => {}
            () = retry_loop => {}
        }
    }
}

/// What the CR store keeps of a CR: what the engine never reads stays out of it (it writes CRs
/// with merge patches only, never a whole object from the store). `None`, not an emptied Vec:
/// a cleared Vec keeps its buffer, room for a few entries of about 170 bytes in every CR. (At
/// 10,000 CRs the settled RSS did not move, 50.2 and 50.3 MiB; the peak was 59.2 MiB against
/// 72.4, one run each: docs/benchmark.md.)
fn slim(cr: &mut impl Resource) {
    let meta = cr.meta_mut();
    meta.managed_fields = None;
    meta.owner_references = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, OwnerReference};

    #[test]
    fn the_store_keeps_no_managed_fields_nor_owners() {
        let mut cr = common_crds::cache::Cache::new("c", Default::default());
        cr.meta_mut().managed_fields = Some(vec![ManagedFieldsEntry::default(); 3]);
        cr.meta_mut().owner_references = Some(vec![OwnerReference::default()]);
        cr.meta_mut().labels =
            Some([("infinispan.org/cluster".to_string(), "a".to_string())].into());
        slim(&mut cr);
        assert_eq!(cr.meta().managed_fields, None);
        assert_eq!(cr.meta().owner_references, None);
        assert_eq!(
            cr.labels()
                .get("infinispan.org/cluster")
                .map(String::as_str),
            Some("a")
        );
    }
}
