//! The server-only path (design S1, server objects appear as CRs): a server object no CR stands for
//! gets a mirror CR in the modes that mirror, created in one call with its labels, finalizer and
//! owner reference; and the events of the config stream entering the snapshot.

use std::collections::HashSet;
use std::time::Instant;

use common_crds::ServerResource;
use common_crds::labels::{CLUSTER_LABEL, ORIGIN_LABEL, ORIGIN_SERVER, RESOURCES_FINALIZER};
use futures::StreamExt;
use kube::Resource;
use kube::api::PostParams;
use serde_json::json;

use super::{Engine, EngineError};
use crate::engine::decision::{Action, Comparison, Observation, decide};
use crate::engine::kind::{KindAdapter, ServerChange};
use crate::engine::snapshot::Known;

/// Mirror CRs created at once by a resync.
const MIRRORS_AT_ONCE: usize = 2;

impl<A: KindAdapter> Engine<A> {
    /// A server object changed or appeared: reconcile the CRs that stand for it, or, when none
    /// does, decide for the object alone (a mirror CR in the modes that mirror).
    pub async fn server_object_changed(&self, server_name: &str) -> Result<(), EngineError> {
        if self.trigger_claimants(server_name) {
            // A CR stands for it: the CR's reconciles retry on their own.
            self.retries.forget(server_name);
            if self.unmirrorable.forget(server_name) {
                self.set_not_mirrored();
            }
            return Ok(());
        }
        self.sync_unclaimed_retried(server_name).await
    }

    /// [`Self::sync_unclaimed`], tried again on its own clock when it fails (logged here).
    async fn sync_unclaimed_retried(&self, server_name: &str) -> Result<(), EngineError> {
        let result = self.sync_unclaimed(server_name).await;
        match &result {
            Ok(()) => self.retries.forget(server_name),
            Err(error) => {
                let delay = self.retries.failed(server_name, Instant::now());
                tracing::warn!(
                    kind = self.kind(),
                    server_name,
                    %error,
                    retry_in = ?delay,
                    "cannot sync a server object without CR; tried again later"
                );
            }
        }
        result
    }

    /// Server objects whose sync failed or whose mirror CR was refused, due to be tried again
    /// now: decided again one after the other (the retry loop beside the controller calls it
    /// every second).
    pub async fn retry_due(&self) {
        let now = Instant::now();
        let mut names = self.retries.due(now);
        for name in self.unmirrorable.due(now) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        for name in names {
            // Failures are logged and scheduled by `server_object_changed`.
            let _ = self.server_object_changed(&name).await;
        }
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

    /// Every CR is reconciled against the snapshot; every object no CR stands for takes the
    /// server-only path. One pass over the store, not one per object. After every replay and
    /// when the sync policy changes.
    ///
    /// `MIRRORS_AT_ONCE` mirror CRs at a time, not more, on purpose: `bench --profile large
    /// --sizes 5000 --steady-seconds 0 --dry-run`, 2026-12-01, startup sync of 5,000 caches /
    /// RSS after it: one at a time 22.3 s (0.84 of its floor) / 30.1 MiB; two 16.6 s (0.81) /
    /// 30.8 MiB; eight 14.4 s (0.42) / 33.6 MiB, over the 32 MiB budget. Two is what keeps the
    /// startup sync of 100 caches under 1.2 times its floor (the operator's own start, about
    /// 60 ms, weighs there: one at a time its median was 1.07 to 1.42 of the floor in two
    /// runs, two at a time 0.75).
    pub async fn resync(&self) {
        let claimed = self.claimed_names();
        let unclaimed: Vec<String> = self
            .snapshot
            .objects()
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| !claimed.contains(name))
            .collect();
        drop(claimed);
        futures::stream::iter(unclaimed)
            .for_each_concurrent(MIRRORS_AT_ONCE, |name| async move {
                // A failure is logged and tried again on its own clock.
                let _ = self.sync_unclaimed_retried(&name).await;
            })
            .await;
        self.trigger_all();
    }

    /// The server-only path for an object no CR stands for (decision step 1).
    pub async fn sync_unclaimed(&self, server_name: &str) -> Result<(), EngineError> {
        let Some(known) = self.snapshot.get(server_name) else {
            return Ok(());
        };
        if self.unmirrorable.refused(server_name, &known.digest) {
            // Reported already; tried again when its content changes or its retry is due.
            return Ok(());
        }
        let Some(policy) = self.policy() else {
            // Draining (design E5): no new mirror CRs.
            return Ok(());
        };
        let Some(server_epoch) = self.epoch.current() else {
            // Decided again once the epoch is known (every object is, after a replay).
            return Ok(());
        };
        let observation = Observation {
            cr: None,
            server: self.snapshot.view(server_name),
            server_epoch,
            comparison: Comparison::Equal,
            internal: self.adapter.is_internal(server_name),
            dependencies: Default::default(),
            mode: policy.mode,
            winner: policy.winner,
            caps: self.adapter.capabilities(),
        };
        if let Action::CreateMirrorCr { with_finalizer } = decide(&observation).action {
            self.create_mirror(server_name, &known, with_finalizer)
                .await?;
            self.event_handled(server_name, true);
        } else {
            self.event_handled(server_name, false);
        }
        Ok(())
    }

    /// Creates the mirror CR in one call: labels, finalizer, owner reference, spec.
    pub(super) async fn create_mirror(
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
        match self
            .timed_write(self.api.create(&PostParams::default(), &cr))
            .await
        {
            Ok(_) => {
                self.unmirrorable.forget(server_name);
                self.set_not_mirrored();
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
            Err(kube::Error::Api(status)) if status.code == 422 => {
                self.mirror_refused(server_name, &known.digest, &status.message)
                    .await;
                Ok(())
            }
            Err(error) => Err(error.into()),
        }
    }

    /// The API server refused the mirror CR of `server_name` (its content does not fit the
    /// CRD, or its admission failed): said once per content where users look (a Warning Event
    /// on the `Infinispan` CR, the `objects_not_mirrored` gauge, a log line), tried again on
    /// [`crate::engine::unmirrorable::REFUSED`]'s clock (10 s doubling to 10 minutes) and
    /// whenever the content changes.
    async fn mirror_refused(&self, server_name: &str, digest: &str, message: &str) {
        let new = self
            .unmirrorable
            .record(server_name, digest, Instant::now());
        self.set_not_mirrored();
        if !new {
            return;
        }
        tracing::warn!(
            kind = self.kind(),
            server_name,
            message,
            "the server's object cannot become a CR: the API server refused its mirror CR"
        );
        let note = format!(
            "the server's {} '{server_name}' has no CR: the API server refused it ({message})",
            self.kind()
        );
        self.warn_cluster("NotMirrored", note, "Mirror").await;
    }

    /// A Warning Event on the cluster's `Infinispan` CR (about a server object, whether or not
    /// a CR stands for it).
    pub async fn warn_cluster(&self, reason: &str, note: String, action: &str) {
        let owner = &self.settings.owner;
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(owner.api_version.clone()),
            kind: Some(owner.kind.clone()),
            name: Some(owner.name.clone()),
            namespace: Some(self.settings.namespace.clone()),
            uid: Some(owner.uid.clone()),
            ..Default::default()
        };
        let event = operator_runtime::events::Event {
            type_: kube::runtime::events::EventType::Warning,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(%error, "cannot publish an Event");
        }
    }

    /// The server name when a listed current document of the server is of this kind and
    /// differs from the snapshot's object (see [`crate::engine::drift`]); objects the snapshot
    /// lacks are not drift (the freshness check and the replay handle names).
    pub fn drifted(&self, document: &infinispan_rest::ConfigEvent) -> Option<String> {
        let (name, ServerChange::Present(object)) = self.adapter.change_of(document)? else {
            return None;
        };
        let known = self.snapshot.get(&name)?;
        (known.digest != self.adapter.digest(&object)).then_some(name)
    }

    /// A drifted object was taken into the snapshot (and its CR reconciled): said where users
    /// look (the `drift_detected_total` counter, a Warning Event on the `Infinispan` CR, a log
    /// line).
    pub async fn drift_found(&self, server_name: &str) {
        self.metrics
            .drift_detected
            .with_label_values(&[self.kind()])
            .inc();
        tracing::warn!(
            kind = self.kind(),
            server_name,
            "drift: the server's object changed without an event; synced from its current document"
        );
        let note = format!(
            "the server's {} '{server_name}' changed without an event (found by the periodic \
             drift check); its current definition is synced now",
            self.kind()
        );
        self.warn_cluster("DriftDetected", note, "Sync").await;
    }

    fn set_not_mirrored(&self) {
        self.metrics
            .objects_not_mirrored
            .with_label_values(&[self.kind()])
            .set(i64::try_from(self.unmirrorable.len()).unwrap_or(i64::MAX));
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
            ServerChange::Removed => {
                self.unmirrorable.forget(&name);
                self.set_not_mirrored();
                self.snapshot.removed(&name)
            }
        };
        self.metrics
            .server_objects
            .with_label_values(&[self.kind()])
            .set(i64::try_from(self.snapshot.len()).unwrap_or(i64::MAX));
        if changed {
            self.event_arrived(&name);
        }
        changed.then_some(name)
    }
}
