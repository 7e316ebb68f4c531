//! The reconcile of one CR, one method per step (see [`super`]): [`Engine::sync`] reads as
//! those steps, each returning early with its [`Outcome`] when it ends the reconcile (a stale
//! store copy, a refusal, a hold, a failed server call).

use std::sync::Arc;
use std::time::{Duration, Instant};

use common_crds::ServerResource;
use common_crds::conditions::Reason;
use common_crds::infinispan::SyncMode;
use common_crds::labels::{
    MANAGED_ANNOTATION, MANAGED_FALSE, PAUSE_RECONCILIATION_ANNOTATION, PAUSE_RECONCILIATION_TRUE,
    RESOURCES_FINALIZER,
};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use operator_runtime::events::Event as KubeEvent;

use super::execute::Executed;
use super::{EPOCH_UNTRACKED, Engine, EngineError};
use crate::cluster::{ClusterState, Policy};
use crate::engine::claims;
use crate::engine::comparing;
use crate::engine::decision::{
    Action, Claim, Comparison, CrView, Decision, Observation, ServerView, Status, decide,
};
use crate::engine::epoch::proven_absence;
use crate::engine::kind::{Compared, KindAdapter, KindError};
use crate::engine::loop_guard::{self, Verdict};
use crate::engine::snapshot::Known;
use crate::engine::status::StatusUpdate;

/// Requeue of an object waiting for something (the server, a dependency).
const WAIT_REQUEUE: Duration = Duration::from_secs(10);
/// Requeue after a write, to check the outcome even if no watch event comes.
const AFTER_WRITE_REQUEUE: Duration = Duration::from_millis(500);
/// Requeue of a CR whose store copy predates our own last write to it.
const STALE_REQUEUE: Duration = Duration::from_millis(200);

/// How a reconcile ended: the metrics label of the outcome, and the requeue.
pub(super) type Outcome = (&'static str, Requeue);

/// Why a reconcile ends before its last step.
enum Ended {
    /// With this outcome (a refusal known already, a write held by the loop guard).
    Early(Outcome),
    /// A server call failed: said in the status by [`Engine::refused`].
    ServerCall(FailedCall),
    /// Anything else: retried with backoff.
    Failed(EngineError),
}

impl From<EngineError> for Ended {
    fn from(error: EngineError) -> Self {
        Self::Failed(error)
    }
}

/// A server call that failed, and what it was about: the CR's generation and the server
/// object's digest (refusals are kept per both).
struct FailedCall {
    server_name: String,
    generation: i64,
    digest: Option<String>,
    error: KindError,
}

impl Ended {
    fn server_call(
        server_name: &str,
        generation: i64,
        digest: &Option<String>,
        error: KindError,
    ) -> Self {
        Self::ServerCall(FailedCall {
            server_name: server_name.to_string(),
            generation,
            digest: digest.clone(),
            error,
        })
    }
}

/// What observing one CR gives (step 2): what the decision is made of, and what the steps after
/// it need.
struct Observed<O> {
    server_name: String,
    cr_view: CrView,
    /// The server object as the snapshot knows it.
    known: Option<Known<O>>,
    observation: Observation,
    /// The comparison of the CR with the server object, when one was made.
    compared: Option<Compared>,
}

impl<O> Observed<O> {
    fn generation(&self) -> i64 {
        self.cr_view.generation
    }

    /// The digest of the server object, when the server has one.
    fn digest(&self) -> Option<String> {
        self.known.as_ref().map(|known| known.digest.clone())
    }
}

impl<A: KindAdapter> Engine<A> {
    /// The reconcile of one CR: step 1 (the first server snapshot), then [`Self::sync`],
    /// counted in the reconcile metrics; a failed server call is said in the status
    /// ([`Self::refused`]).
    pub(super) async fn reconcile(&self, cr: Arc<A::Cr>) -> Result<Requeue, EngineError> {
        if !self.wait_ready().await {
            return Ok(Requeue::await_change());
        }
        // The reconcile starts: its request leaves the engine's queue.
        self.requests.remove(&ObjectRef::from_obj(cr.as_ref()));
        let _busy = self
            .order
            .begin_for(A::KIND, cr.uid().as_deref().unwrap_or_default());
        let started = Instant::now();
        let in_flight = self
            .metrics
            .reconciles_in_flight
            .with_label_values(&[self.kind()]);
        in_flight.inc();
        let result = match self.sync(&cr).await {
            Ok(outcome) | Err(Ended::Early(outcome)) => Ok(outcome),
            Err(Ended::ServerCall(call)) => self.refused(&cr, call).await,
            Err(Ended::Failed(error)) => Err(error),
        };
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

    /// One reconcile: observe, decide, execute, write status (steps 2 to 5). Returns the
    /// metrics label of the outcome and the requeue. A store copy that predates our own last
    /// write is not decided on; a draining cluster only drains.
    async fn sync(&self, cr: &A::Cr) -> Result<Outcome, Ended> {
        if self.is_stale(cr) {
            return Ok(("stale", Requeue::requeue(STALE_REQUEUE)));
        }
        let policy = match self.cluster_state() {
            ClusterState::Active(policy) => policy,
            ClusterState::Draining(cause) => return Ok(self.drain_one(cr, cause).await?),
        };
        let observed = self.observe(cr, policy).await?;
        let decision = self.decide_on(cr, &observed);
        let executed = self.carry_out(cr, &observed, &decision).await?;
        Ok(self.report(cr, &observed, &decision, executed).await?)
    }

    /// Step 2: what is known of the CR and of its server object, compared as far as the
    /// decision needs. Ends the reconcile when the server refused this very comparison before
    /// or refuses it now.
    async fn observe(&self, cr: &A::Cr, policy: Policy) -> Result<Observed<A::Object>, Ended> {
        let server_name = cr.server_name().ok_or(EngineError::NoName)?;
        let cr_view = self.cr_view(cr, &server_name);
        let generation = cr_view.generation;
        // Without a known epoch nothing about the server can be judged: as unreachable.
        let epoch = self.epoch.current();
        let server = self.server_view(cr, &server_name, &cr_view, epoch.as_deref());
        let known = self.snapshot.get(&server_name);
        let digest = known.as_ref().map(|k| k.digest.clone());
        let needs_comparison = self.needs_comparison(&cr_view, &server_name, &server);
        // A comparison the server refused for this very generation and server object is not
        // asked again (a resync, a relist or our own status write must not call the server).
        if needs_comparison
            && let Some(known) = &known
            && self.refusals.refused(
                &cr.uid().unwrap_or_default(),
                generation,
                Some(&known.digest),
            )
        {
            return Err(Ended::Early(("rejected", Requeue::await_change())));
        }
        let refused = |error| Ended::server_call(&server_name, generation, &digest, error);
        let compared = self
            .first_comparison(cr, &cr_view, known.as_ref(), needs_comparison, policy.mode)
            .await
            .map_err(refused)?;
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
        let compared = self
            .classify(cr, generation, known.as_ref(), compared, &mut observation)
            .await
            .map_err(refused)?;
        Ok(Observed {
            server_name,
            cr_view,
            known,
            observation,
            compared,
        })
    }

    fn cr_view(&self, cr: &A::Cr, server_name: &str) -> CrView {
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

    /// The server's view of the object, in the current `epoch` (unreachable when not known): an
    /// absence is proven or not (design R2).
    fn server_view(
        &self,
        cr: &A::Cr,
        server_name: &str,
        cr_view: &CrView,
        epoch: Option<&str>,
    ) -> ServerView {
        match (epoch, self.snapshot.view(server_name)) {
            (None, _) => ServerView::Unreachable,
            (Some(current), ServerView::Absent(seen)) => ServerView::Absent(proven_absence(
                seen,
                cr_view.last_synced.as_ref().map(|l| l.epoch.as_str()),
                current,
                self.adapter.persistent(cr),
            )),
            (Some(_), view) => view,
        }
    }

    /// Whether the decision needs the CR compared with the server object. A CR being deleted is
    /// not compared: its document may be one the server refuses, which must not keep the
    /// deletion from happening.
    fn needs_comparison(&self, cr_view: &CrView, server_name: &str, server: &ServerView) -> bool {
        cr_view.managed
            && !cr_view.deleting
            && !cr_view.paused
            && !self.adapter.is_internal(server_name)
            && cr_view.claim == Claim::Owner
            && matches!(server, ServerView::Present(_))
    }

    /// The comparison, when `needed`, without classifying a difference: made locally when the
    /// CR is known to differ without asking the server (see [`comparing`]).
    async fn first_comparison(
        &self,
        cr: &A::Cr,
        cr_view: &CrView,
        known: Option<&Known<A::Object>>,
        needed: bool,
        mode: SyncMode,
    ) -> Result<Option<(Compared, bool)>, KindError> {
        let Some(known) = known.filter(|_| needed) else {
            return Ok(None);
        };
        if comparing::differs_without_asking(
            cr_view.last_synced.as_ref(),
            cr_view.generation,
            self.adapter.held_digest(cr).as_deref(),
            &known.digest,
            mode,
        ) {
            let local = Compared::local(Comparison::Different { in_place: false }, Vec::new());
            return Ok(Some((local, false)));
        }
        self.compare(cr, cr_view.generation, known, false)
            .await
            .map(Some)
    }

    /// A difference not classified yet, where the decision depends on it: asked now, and put
    /// into `observation`.
    async fn classify(
        &self,
        cr: &A::Cr,
        generation: i64,
        known: Option<&Known<A::Object>>,
        compared: Option<(Compared, bool)>,
        observation: &mut Observation,
    ) -> Result<Option<Compared>, KindError> {
        if let (Some((_, false)), Some(known)) = (&compared, known)
            && comparing::classification_matters(observation)
        {
            let (full, _) = self.compare(cr, generation, known, true).await?;
            observation.comparison = full.comparison;
            return Ok(Some(full));
        }
        Ok(compared.map(|(compared, _)| compared))
    }

    /// The comparison of the CR with the server object (memoised per generation and digest
    /// when the server was asked), and whether a difference is classified (in place or not):
    /// without `classify`, the kind's cheaper unclassified comparison when it has one (see
    /// [`comparing`]).
    async fn compare(
        &self,
        cr: &A::Cr,
        generation: i64,
        known: &Known<A::Object>,
        classify: bool,
    ) -> Result<(Compared, bool), KindError> {
        let uid = cr.uid().unwrap_or_default();
        if let Some(memo) = self
            .comparisons
            .get(&uid, generation, &known.digest, classify)
        {
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
        self.comparisons
            .record(uid, generation, known.digest.clone(), &compared, classified);
        Ok((compared, classified))
    }

    /// Step 3: the decision, its status told in the server's words; the other claimants of the
    /// server name decide again when this CR's claim may change.
    fn decide_on(&self, cr: &A::Cr, observed: &Observed<A::Object>) -> Decision {
        let Observed {
            server_name,
            cr_view,
            observation,
            ..
        } = observed;
        let mut decision = decide(observation);
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
            self.trigger_rivals(cr, server_name);
        }
        self.explain(&mut decision, observed);
        decision
    }

    /// Says in the server's words what the decision's status means.
    fn explain(&self, decision: &mut Decision, observed: &Observed<A::Object>) {
        // Immutable: say which attributes, in the server's words.
        if let (
            Some(Status::Ready {
                reason: Reason::Immutable,
                message,
            }),
            Some(compared),
        ) = (decision.status.as_mut(), observed.compared.as_ref())
            && !compared.reasons.is_empty()
        {
            message.push_str(": ");
            message.push_str(&compared.reasons.join("\n"));
        }

        // In sync, yet not usable (a schema stored with errors): say so, in the server's words.
        if decision.action == Action::Nothing
            && let (Some(Status::Ready { reason, message }), Some(known)) =
                (decision.status.as_mut(), observed.known.as_ref())
            && *reason == Reason::Synced
            && let Some((problem, text)) = self.adapter.problem(&known.object)
        {
            *reason = problem;
            *message = text;
        }
    }

    /// Step 4: executes the decision, unless the server refused this very write before or it
    /// would continue a write loop (see [`loop_guard`]).
    async fn carry_out(
        &self,
        cr: &A::Cr,
        observed: &Observed<A::Object>,
        decision: &Decision,
    ) -> Result<Executed<A::Cr>, Ended> {
        let server_name = observed.server_name.as_str();
        let generation = observed.generation();
        let digest = observed.digest();
        let uid = cr.uid().unwrap_or_default();
        if decision.action.writes_server()
            && self.refusals.refused(&uid, generation, digest.as_deref())
        {
            return Err(Ended::Early(("rejected", Requeue::await_change())));
        }
        // A content write that would continue a write loop is held (see `loop_guard`); only
        // writes that undo another writer count (see `loop_guard::guards`).
        let guarded = loop_guard::guards(
            decision.action,
            observed.cr_view.last_synced.as_ref().map(|l| l.generation) != Some(generation),
        );
        let now = Instant::now();
        if guarded && let Verdict::Held { until, writes } = self.loop_guard.check(&uid, now) {
            let held = self.held(cr, server_name, generation, until, writes);
            return Err(Ended::Early(held.await?));
        }
        let decided_in =
            Some(observed.observation.server_epoch.as_str()).filter(|e| *e != EPOCH_UNTRACKED);
        let known = observed.known.as_ref();
        let executed = match self
            .execute(cr, server_name, decision, known, decided_in)
            .await
        {
            Ok(executed) => executed,
            Err(EngineError::Kind(error)) => {
                return Err(Ended::server_call(server_name, generation, &digest, error));
            }
            Err(error) => return Err(error.into()),
        };
        if guarded {
            self.loop_guard.wrote(&uid, now);
        }
        self.event_handled(
            server_name,
            matches!(
                decision.action,
                Action::UpdateCrSpecFromServer | Action::DeleteCr
            ),
        );
        Ok(executed)
    }

    /// Step 5: the status, written only when it changed, and the decision's Event.
    async fn report(
        &self,
        cr: &A::Cr,
        observed: &Observed<A::Object>,
        decision: &Decision,
        executed: Executed<A::Cr>,
    ) -> Result<Outcome, EngineError> {
        if executed.cr_gone {
            self.publish(cr, decision).await;
            return Ok(("wrote", Requeue::await_change()));
        }
        let current = executed.cr_after.as_ref().unwrap_or(cr);
        let update = StatusUpdate {
            conditions: decision.status.clone(),
            last_synced: executed.last_synced,
            generation: current.meta().generation,
            server_name: observed.server_name.clone(),
        };
        // Adding the finalizer says nothing new: the next step writes the status (design L2: a
        // new CR costs one finalizer write and one status write).
        let status_written = if decision.action == Action::AddFinalizer {
            false
        } else {
            self.write_status(current, update).await?
        };
        self.publish(cr, decision).await;
        if decision.action.writes_server() {
            self.refusals.clear(&cr.uid().unwrap_or_default());
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
    ) -> Result<Outcome, EngineError> {
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
    async fn refused(&self, cr: &A::Cr, call: FailedCall) -> Result<Outcome, EngineError> {
        let FailedCall {
            server_name,
            generation,
            digest,
            error,
        } = call;
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
            server_name,
        };
        self.write_status(cr, update).await?;
        if retry {
            return Err(error.into());
        }
        self.refusals
            .record(cr.uid().unwrap_or_default(), generation, digest);
        Ok(("rejected", Requeue::await_change()))
    }
}
