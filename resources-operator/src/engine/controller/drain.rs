//! Draining (design E5, the resources operator's side): while the Infinispan CR is being
//! deleted or has `spec.resourcesOperator.enabled: false`, every reconcile of a CR releases the
//! operator's finalizer (so nothing stays stuck in Terminating) and marks user CRs
//! `Ready=False, reason=ClusterNotFound`; no finalizer is added and no mirror CR is created.
//! Mirror CRs are owned by the Infinispan CR and go with it (E6); user CRs stay.
//!
//! Draining goes through the ordinary queue (retries with backoff included); the engine logs
//! and counts once when no CR holds its finalizer any more.

use std::sync::atomic::Ordering;

use common_crds::ServerResource;
use common_crds::conditions::Reason;
use common_crds::labels::RESOURCES_FINALIZER;
use kube::runtime::controller::Action as Requeue;
use kube::{Resource, ResourceExt};

use super::reconcile::Outcome;
use super::{Engine, EngineError};
use crate::cluster::DrainCause;
use crate::engine::claims;
use crate::engine::decision::{Origin, Status};
use crate::engine::kind::KindAdapter;
use crate::engine::status::StatusUpdate;

impl<A: KindAdapter> Engine<A> {
    /// Drains one CR.
    pub(super) async fn drain_one(
        &self,
        cr: &A::Cr,
        cause: DrainCause,
    ) -> Result<Outcome, EngineError> {
        // The finalizer first: a status write would move the resourceVersion it is patched at.
        self.release_finalizer(cr).await?;
        if claims::origin(cr) == Origin::Kubernetes && cr.meta().deletion_timestamp.is_none() {
            let message = format!(
                "{}: this CR is not synced until the cluster's resources operator runs again",
                cause.describe(&self.settings.namespace, &self.settings.cluster)
            );
            let update = StatusUpdate {
                conditions: Some(Status::Ready {
                    reason: Reason::ClusterNotFound,
                    message,
                }),
                last_synced: None,
                generation: cr.meta().generation,
                server_name: cr.server_name().unwrap_or_default(),
            };
            self.write_status(cr, update).await?;
        }
        self.report_drained(cause);
        Ok(("drained", Requeue::await_change()))
    }

    /// Logs and counts once when no CR of this kind holds the finalizer any more.
    fn report_drained(&self, cause: DrainCause) {
        let holding = self
            .store
            .state()
            .iter()
            .filter(|cr| cr.finalizers().iter().any(|f| f == RESOURCES_FINALIZER))
            .count();
        // The store may still show a finalizer we just released: the next reconcile (the
        // watch event of our own write) counts again.
        if holding == 0 && !self.drained.swap(true, Ordering::SeqCst) {
            self.metrics
                .drained
                .with_label_values(&[self.kind()])
                .set(1);
            tracing::info!(
                kind = self.kind(),
                cause = ?cause,
                crs = self.store.state().len(),
                "drained: no CR holds the resources operator's finalizer any more"
            );
        }
    }

    /// Starts draining: every CR is reconciled (and drained) again.
    pub fn start_draining(&self, cause: DrainCause) {
        tracing::warn!(
            kind = self.kind(),
            cause = ?cause,
            "draining: {}; releasing finalizers, user CRs report ClusterNotFound",
            cause.describe(&self.settings.namespace, &self.settings.cluster)
        );
        self.drained.store(false, Ordering::SeqCst);
        self.metrics
            .draining
            .with_label_values(&[self.kind()])
            .set(1);
        self.trigger_all();
    }
}
