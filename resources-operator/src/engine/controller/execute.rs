//! Executing a decision: the one write to the server or to the CR it asks for, the status
//! write that records the last-synced state, the Event, and the write counters.

use std::time::Instant;

use common_crds::ServerResource;
use common_crds::common::LastSynced;
use common_crds::conditions::Reason;
use common_crds::labels::RESOURCES_FINALIZER;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Resource, ResourceExt};
use operator_runtime::events::Event as KubeEvent;
use serde_json::json;

use super::{EPOCH_UNTRACKED, Engine, EngineError};
use crate::engine::decision::{Action, Decision};
use crate::engine::kind::KindAdapter;
use crate::engine::order;
use crate::engine::snapshot::Known;
use crate::engine::status::{StatusUpdate, next_status};

/// What an executed action leaves behind.
pub(super) struct Executed<K> {
    /// The last-synced record the action made true.
    pub(super) last_synced: Option<LastSynced>,
    /// The CR as the API server returned it after a spec write.
    pub(super) cr_after: Option<K>,
    /// The CR is gone (or going): no status to write.
    pub(super) cr_gone: bool,
}

impl<A: KindAdapter> Engine<A> {
    /// Whether the store's copy of the CR predates our own last write to it.
    pub(super) fn is_stale(&self, cr: &A::Cr) -> bool {
        let uid = cr.uid().unwrap_or_default();
        let version = cr.resource_version();
        self.replaced
            .is_stale(&uid, version.as_deref(), Instant::now())
    }

    /// Records that we wrote the CR (replacing its current resourceVersion).
    pub(super) fn wrote(&self, cr: &A::Cr) {
        if let (Some(uid), Some(version)) = (cr.uid(), cr.resource_version()) {
            self.replaced.wrote(uid, version, Instant::now());
        }
    }

    /// The record of a sync: the server's current epoch, else (the event stream is
    /// reconnecting, its epoch not known yet) the epoch the decision was made in. Recording
    /// "untracked" there made a removal on the server right after our write unprovable (design
    /// R2, removals only when proven): the object was recreated (chaos, seed 3).
    pub(super) fn last_synced(
        &self,
        generation: i64,
        digest: String,
        decided_in: Option<&str>,
    ) -> LastSynced {
        LastSynced {
            digest,
            generation,
            epoch: record_epoch(self.epoch.current(), decided_in),
        }
    }

    /// Reads the server object back after our own write, so that the snapshot knows it before
    /// the echo event arrives (which then changes nothing: design L2, one
    /// change, one write).
    pub(super) async fn read_back(&self, server_name: &str) -> Result<Option<String>, EngineError> {
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

    /// Executes the one action of `decision` (the server object `known` is the one it was
    /// decided on, in the epoch `decided_in`).
    pub(super) async fn execute(
        &self,
        cr: &A::Cr,
        server_name: &str,
        decision: &Decision,
        known: Option<&Known<A::Object>>,
        decided_in: Option<&str>,
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
                // The server has no object: the next reconcile creates it, and the kinds after
                // this one wait for it (bulk order), not only for reconciles running now.
                if known.is_none() {
                    self.order
                        .expect_creation(A::KIND, cr.uid().as_deref().unwrap_or_default());
                }
            }
            Action::RecordSynced => {
                if let Some(known) = known {
                    executed.last_synced =
                        Some(self.last_synced(generation, known.digest.clone(), decided_in));
                }
            }
            Action::CreateOnServer | Action::UpdateServer | Action::RecreateOnServer => {
                if let Some(digest) = self.write_server(cr, server_name, decision.action).await? {
                    executed.last_synced = Some(self.last_synced(generation, digest, decided_in));
                }
            }
            Action::DeleteOnServer => {
                self.delete_on_server(cr, server_name).await?;
                executed.cr_gone = true;
            }
            Action::ReleaseFinalizer => {
                self.release_finalizer(cr).await?;
                executed.cr_gone = true;
            }
            Action::DeleteCr => {
                self.delete_cr(cr, server_name).await?;
                executed.cr_gone = true;
            }
            Action::UpdateCrSpecFromServer => {
                if let Some(known) = known {
                    let after = self.update_spec(cr, server_name, known).await?;
                    let generation = after.meta().generation.unwrap_or_default();
                    executed.last_synced =
                        Some(self.last_synced(generation, known.digest.clone(), decided_in));
                    executed.cr_after = Some(after);
                }
            }
        }
        Ok(executed)
    }

    /// Creates, updates or recreates the server object from the CR (creations in bulk order,
    /// design D1); returns its digest read back, `None` when it is gone already.
    async fn write_server(
        &self,
        cr: &A::Cr,
        server_name: &str,
        action: Action,
    ) -> Result<Option<String>, EngineError> {
        if action != Action::UpdateServer && !self.order.wait_turn(A::KIND, order::BOUND).await {
            tracing::debug!(
                kind = self.kind(),
                server_name,
                "created without waiting longer for the kinds before it (bulk order)"
            );
        }
        // Each write takes a place in the window of server writes (after its turn in the bulk
        // order: a place is never held waiting for another kind).
        let writes = &self.writes;
        match action {
            Action::CreateOnServer => writes.write(self.adapter.create(server_name, cr)).await?,
            Action::UpdateServer => writes.write(self.adapter.update(server_name, cr)).await?,
            _ => {
                writes.write(self.adapter.delete(server_name)).await?;
                self.count_write("server", "delete");
                writes.write(self.adapter.create(server_name, cr)).await?;
            }
        }
        self.count_write("server", action_label(action));
        tracing::info!(kind = self.kind(), cr = cr.name_any(), server_name, action = ?action, "server written");
        self.read_back(server_name).await
    }

    /// Deletes the server object, then releases the CR's finalizer.
    async fn delete_on_server(&self, cr: &A::Cr, server_name: &str) -> Result<(), EngineError> {
        self.writes.write(self.adapter.delete(server_name)).await?;
        self.count_write("server", "delete");
        self.snapshot.removed(server_name);
        tracing::info!(
            kind = self.kind(),
            cr = cr.name_any(),
            server_name,
            "server object deleted"
        );
        self.release_finalizer(cr).await?;
        Ok(())
    }

    /// Deletes the CR without a server call: its finalizer first, then the CR.
    async fn delete_cr(&self, cr: &A::Cr, server_name: &str) -> Result<(), EngineError> {
        // Guarded like every other write: a CR edited since it was decided on (a user's
        // change racing the server's removal) is not deleted; the conflict requeues it
        // and the next decision sees the edit.
        let Some(resource_version) = self.release_finalizer(cr).await? else {
            return Ok(());
        };
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(resource_version),
                uid: cr.uid(),
            }),
            ..DeleteParams::default()
        };
        match self
            .timed_write(self.api.delete(&cr.name_any(), &params))
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
        Ok(())
    }

    /// Rewrites the CR's spec from the server object `known` (design S2); returns the CR as
    /// the API server returned it.
    async fn update_spec(
        &self,
        cr: &A::Cr,
        server_name: &str,
        known: &Known<A::Object>,
    ) -> Result<A::Cr, EngineError> {
        let spec = self
            .adapter
            .spec_patch_from_server(cr, &known.object)
            .await?;
        let patch = json!({
            "metadata": { "resourceVersion": cr.resource_version() },
            "spec": spec,
        });
        let after = self.patch_cr(cr, &patch, "update_spec").await?;
        tracing::info!(
            kind = self.kind(),
            cr = cr.name_any(),
            server_name,
            "CR spec updated from the server"
        );
        Ok(after)
    }

    /// Sets the CR's finalizers, guarded by its resourceVersion; returns the new one.
    pub(super) async fn patch_finalizers(
        &self,
        cr: &A::Cr,
        finalizers: Vec<String>,
    ) -> Result<Option<String>, EngineError> {
        let patch = json!({
            "metadata": {
                "resourceVersion": cr.resource_version(),
                "finalizers": finalizers,
            }
        });
        let patched = self.patch_cr(cr, &patch, "finalizer").await?;
        Ok(patched.resource_version())
    }

    /// Merge-patches the CR (guarded by the resourceVersion the patch names) and records the
    /// write (`operation`: its label in the writes metric).
    async fn patch_cr(
        &self,
        cr: &A::Cr,
        patch: &serde_json::Value,
        operation: &str,
    ) -> Result<A::Cr, EngineError> {
        let patched = self
            .timed_write(self.api.patch(
                &cr.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            ))
            .await?;
        self.wrote(cr);
        self.count_write("kubernetes", operation);
        Ok(patched)
    }

    /// Removes the operator's finalizer; returns the CR's resourceVersion after it (the same
    /// when it had none; `None`: the CR is gone).
    pub(super) async fn release_finalizer(
        &self,
        cr: &A::Cr,
    ) -> Result<Option<String>, EngineError> {
        if !cr.finalizers().iter().any(|f| f == RESOURCES_FINALIZER) {
            return Ok(cr.resource_version());
        }
        let finalizers: Vec<String> = cr
            .finalizers()
            .iter()
            .filter(|f| *f != RESOURCES_FINALIZER)
            .cloned()
            .collect();
        match self.patch_finalizers(cr, finalizers).await {
            Err(EngineError::Kube(kube::Error::Api(status))) if status.code == 404 => Ok(None),
            other => other,
        }
    }

    /// Writes the status when it differs from the CR's; returns whether it wrote.
    pub(super) async fn write_status(
        &self,
        cr: &A::Cr,
        update: StatusUpdate,
    ) -> Result<bool, EngineError> {
        let old = cr.resource_status();
        let mut new = next_status(old, update, Time(Timestamp::now()));
        // The Origin column of `kubectl get`, for user CRs too (they carry no origin label).
        new.origin = Some(common_crds::labels::origin(cr.labels()).to_string());
        if old == Some(&new) {
            return Ok(false);
        }
        let patch = json!({ "status": new });
        match self
            .timed_write(self.api.patch_status(
                &cr.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            ))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(false),
            Err(error) => return Err(error.into()),
        }
        self.wrote(cr);
        self.count_write("kubernetes", "status");
        if let Some(ready) = needs_the_user(old, &new) {
            self.warn(cr, &ready.reason, &ready.message).await;
        }
        Ok(true)
    }

    /// A Warning Event about the CR, outside any decision (a refusal found while executing).
    pub(super) async fn warn(&self, cr: &A::Cr, reason: &str, message: &str) {
        let event = KubeEvent {
            type_: kube::runtime::events::EventType::Warning,
            reason: reason.to_string(),
            note: Some(event_note(message)),
            action: "Sync".to_string(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &cr.object_ref(&())).await {
            tracing::warn!(%error, "cannot publish an Event");
        }
    }

    pub(super) async fn publish(&self, cr: &A::Cr, decision: &Decision) {
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

    pub(super) fn count_write(&self, side: &str, operation: &str) {
        self.metrics
            .writes
            .with_label_values(&[self.kind(), side, operation])
            .inc();
    }
}

/// Reasons of a `Ready=False` that wait for the user to change the CR: the server refused its
/// document, the change needs a recreation the CR does not allow, or the server stored the
/// object with errors (a schema).
const NEEDS_THE_USER: [Reason; 3] = [Reason::Rejected, Reason::Immutable, Reason::SchemaError];

/// The `Ready` condition of `new` when it newly says the CR needs the user (reason, message or
/// generation differ from `old`'s): such a status change is also a Warning Event, so a refusal
/// shows in `kubectl describe`, `kubectl events` and Event-based alerting, once per change and
/// never while idle (design L1).
fn needs_the_user(
    old: Option<&common_crds::ResourceStatus>,
    new: &common_crds::ResourceStatus,
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    let ready = |status: &common_crds::ResourceStatus| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == common_crds::conditions::ConditionType::Ready.as_str())
            .cloned()
    };
    let now = ready(new)?;
    if now.status != "False" || !NEEDS_THE_USER.iter().any(|r| r.as_str() == now.reason) {
        return None;
    }
    let before = old.and_then(ready);
    let same = before.is_some_and(|before| {
        before.reason == now.reason
            && before.message == now.message
            && before.observed_generation == now.observed_generation
    });
    (!same).then_some(now)
}

/// The Events API takes notes of at most 1 KiB; a server's message can be longer (one line per
/// incompatible attribute): cut at a character boundary, marked.
fn event_note(message: &str) -> String {
    const LIMIT: usize = 1024;
    const MARK: &str = " [...]";
    if message.len() <= LIMIT {
        return message.to_string();
    }
    let mut end = LIMIT - MARK.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MARK}", &message[..end])
}

fn action_label(action: Action) -> &'static str {
    match action {
        Action::CreateOnServer => "create",
        Action::UpdateServer => "update",
        Action::RecreateOnServer => "recreate",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common_crds::ResourceStatus;
    use common_crds::conditions::{ConditionStatus, ConditionType, new_condition};

    fn status(reason: Reason, message: &str, generation: i64) -> ResourceStatus {
        ResourceStatus {
            conditions: vec![new_condition(
                ConditionType::Ready,
                ConditionStatus::from(reason == Reason::Synced),
                reason.as_str(),
                message.to_string(),
                Some(generation),
                Time(Timestamp::UNIX_EPOCH),
            )],
            ..ResourceStatus::default()
        }
    }

    #[test]
    fn a_new_refusal_is_an_event_once() {
        let rejected = status(Reason::Rejected, "ISPN000686: bad", 2);
        let synced = status(Reason::Synced, "", 1);
        assert!(needs_the_user(None, &rejected).is_some());
        assert!(needs_the_user(Some(&synced), &rejected).is_some());
        // The same refusal again (e.g. a status rewrite for another field): no second Event.
        assert!(needs_the_user(Some(&rejected), &rejected).is_none());
        // Another message, or the same one for a new generation: a new Event.
        let other = status(Reason::Rejected, "ISPN000687: worse", 2);
        assert!(needs_the_user(Some(&rejected), &other).is_some());
        let next = status(Reason::Rejected, "ISPN000686: bad", 3);
        assert!(needs_the_user(Some(&rejected), &next).is_some());
        let immutable = status(Reason::Immutable, "ISPN000961", 4);
        assert!(needs_the_user(Some(&synced), &immutable).is_some());
    }

    #[test]
    fn other_reasons_are_no_event() {
        let synced = status(Reason::Synced, "", 1);
        for reason in [
            Reason::Synced,
            Reason::Pending,
            Reason::ServerUnavailable,
            Reason::Conflict,
        ] {
            assert!(
                needs_the_user(Some(&synced), &status(reason, "x", 2)).is_none(),
                "{reason:?}"
            );
        }
        assert!(needs_the_user(None, &ResourceStatus::default()).is_none());
    }

    #[test]
    fn notes_fit_the_events_api() {
        assert_eq!(event_note("short"), "short");
        let long = "é".repeat(2000);
        let note = event_note(&long);
        assert!(note.len() <= 1024, "{}", note.len());
        assert!(note.ends_with(" [...]"));
    }
}

/// The epoch to record with a sync: the current one, else the one the decision was made in,
/// else "untracked".
fn record_epoch(current: Option<String>, decided_in: Option<&str>) -> String {
    current
        .or_else(|| decided_in.map(str::to_string))
        .unwrap_or_else(|| EPOCH_UNTRACKED.to_string())
}

#[cfg(test)]
mod epoch_tests {
    use super::*;

    #[test]
    fn a_sync_during_a_reconnect_keeps_the_epoch_it_was_decided_in() {
        assert_eq!(record_epoch(Some("a/2".into()), Some("a/1")), "a/2");
        assert_eq!(record_epoch(None, Some("a/1")), "a/1");
        assert_eq!(record_epoch(None, None), EPOCH_UNTRACKED);
    }
}
