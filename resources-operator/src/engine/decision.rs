//! The sync decision for one object (design "The sync contract"): given what is observed about
//! it - its CR, the server's current object, what was last synced - the cluster's sync mode and
//! conflict winner, and what its kind can do, [`decide`] says what must happen next. Pure: no
//! I/O, no clock, nothing kind-specific (the kind adapter turns its CR and server object into an
//! [`Observation`]).
//!
//! The engine calls [`decide`] on every reconcile, executes the one [`Action`], writes the
//! [`Status`] and the [`Event`] once the action succeeded, and reconciles again: every decision is
//! one step, and a settled object decides [`Action::Nothing`] (design L1: an idle object costs no
//! write). Each content write ([`Action::CreateOnServer`], [`Action::UpdateServer`],
//! [`Action::RecreateOnServer`], [`Action::CreateMirrorCr`], [`Action::UpdateCrSpecFromServer`])
//! is followed by the status write that records the new last-synced state; a crash between the two
//! is harmless because of step 7 below.
//!
//! The steps of [`decide`], in order; the first that applies decides:
//! 1. **No CR**: the server-only path: a server object gets a mirror CR (S1) in Bidirectional and
//!    FromServer, is ignored in ToServer and when internal (E4).
//! 2. **Unmanaged** (E1): never synced, status `Unmanaged`; when deleted, the finalizer is released
//!    without a server call (also the escape for a CR stuck in deletion).
//! 3. **Paused** (E2): nothing written to either side, `ReconciliationPaused=True`; when the
//!    annotation goes, the following steps decide from what changed meanwhile.
//! 4. **Internal object** (E4): never pushed nor deleted on the server, status `Unsupported`.
//! 5. **Claims** (N2): a CR that loses the claim on its server name reports `Conflict` and never
//!    touches the server; a mirror CR superseded by a user CR is deleted without a server call.
//! 6. **Deletion** (K3): a deleted CR deletes its server object unless `deletionPolicy: Retain` or
//!    FromServer mode; an object already gone counts as deleted; while the server is unreachable,
//!    the deletion waits (`ServerUnavailable`).
//! 7. **Equality** (crash safety; L2, one change, one write): when the CR and the server object are
//!    semantically equal, the decision is at most recording the last-synced state, whatever
//!    generation and digest say: a crash between a write and its last-synced record, or the echo of
//!    our own write, is never taken for a change.
//! 8. **Existence matrix** (the outcome table): never synced (K1, a new CR creates the object; S1,
//!    server objects appear as CRs; adopt; winner), else what changed since last synced on each
//!    side: the CR (generation), the server (digest), the server's state (epoch: R3; volatile
//!    losses: R2), directed by the mode (E3, sync mode) and, for conflicts in Bidirectional mode,
//!    the conflict winner (C1).
//! 9. **Finalizer**: a CR that needs the finalizer (a mode that deletes on the server, policy
//!    `Delete`) and lacks it gets it first (L2 allows that one write), unless it is being deleted.
//!
//! Where the design is silent, the choices are written on the function of the step that makes
//! them (see [`decide`]).

use std::fmt;

use common_crds::common::{DeletionPolicy, LastSynced, UpdateStrategy};
use common_crds::conditions::Reason;
use common_crds::infinispan::{ConflictWinner, SyncMode};
use common_crds::labels::{MANAGED_ANNOTATION, PAUSE_RECONCILIATION_ANNOTATION};
pub use kube::runtime::events::EventType;

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod table_tests;
#[cfg(test)]
mod totality_tests;

/// Everything the decision needs about one object, gathered by the engine and the kind adapter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// The CR, when one exists (including one being deleted).
    pub cr: Option<CrView>,
    /// The server's current object.
    pub server: ServerView,
    /// The server's current epoch, `<state>/<session>` (the identity of its state and of its
    /// current run, kept in the operator's markers on the server, design R2, removals only when
    /// proven; see `engine::epoch`). Only the state part tells a lost or replaced state (R3); the
    /// whole epoch is recorded at each sync. Ignored while the server is
    /// [`ServerView::Unreachable`].
    pub server_epoch: String,
    /// The CR's desired object compared with the server's current one, semantically (server
    /// defaults and document format do not count, design L3). Ignored unless both exist.
    pub comparison: Comparison,
    /// The object is internal to the server (design E4: `___*` caches, `org.infinispan.*`
    /// templates, connector caches, the operator's epoch marker): never mirrored, pushed or
    /// deleted.
    pub internal: bool,
    /// Dependencies between objects (design D1).
    pub dependencies: Dependencies,
    /// The cluster's sync direction (design E3).
    pub mode: SyncMode,
    /// Which side wins a conflict in Bidirectional mode (design C1).
    pub winner: ConflictWinner,
    /// What the server can do with this kind.
    pub caps: KindCapabilities,
}

/// The state part of an epoch `<state>/<session>` (design R2, removals only when proven; see
/// `engine::epoch`): the identity of the server's state, kept across restarts that keep it. An
/// epoch without a session part is all state.
pub fn epoch_state(epoch: &str) -> &str {
    epoch.split_once('/').map_or(epoch, |(state, _)| state)
}

/// What the decision needs of a CR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrView {
    /// `metadata.generation`: bumped by Kubernetes on every spec change.
    pub generation: i64,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// The resources operator's finalizer is on the CR.
    pub has_finalizer: bool,
    /// The `infinispan.org/managed` annotation is not `"false"` (design E1).
    pub managed: bool,
    /// The `infinispan.org/pause-reconciliation` annotation is `"true"` (design E2).
    pub paused: bool,
    /// Who created the CR (label `infinispan.org/origin`).
    pub origin: Origin,
    /// `spec.deletionPolicy`.
    pub deletion_policy: DeletionPolicy,
    /// `spec.updates.strategy` ([`UpdateStrategy::Retain`] for kinds without it).
    pub update_strategy: UpdateStrategy,
    /// `status.lastSynced`: what both sides agreed on at the last sync.
    pub last_synced: Option<LastSynced>,
    /// How the claim on the server name was resolved (design N2).
    pub claim: Claim,
}

/// Who created a CR: label `infinispan.org/origin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A user (or any client but the operator): `kubernetes`.
    Kubernetes,
    /// The operator, mirroring a server object (design S1): `server`.
    Server,
}

/// The result of the claim index on (cluster, kind, server name) for this CR (design N2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This CR stands for the server object.
    Owner,
    /// An older user CR claims the same server object: this one never touches the server.
    LosesTo {
        /// Name of the winning CR, for the status message.
        winner: String,
    },
    /// This is a mirror CR and a user CR now claims the same server object: the mirror goes,
    /// without touching the server.
    SupersededMirror {
        /// Name of the user CR, for the Event.
        by: String,
    },
}

/// The server's current object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerView {
    /// The server has the object.
    Present(ServerObject),
    /// The server does not have the object; how we know what happened to it.
    Absent(Absence),
    /// The server cannot be reached: nothing is known about the object.
    Unreachable,
}

/// What the decision needs of an object the server has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerObject {
    /// Digest of the normalised server object, as recorded in [`LastSynced::digest`].
    pub digest: String,
    /// Defined in the server's own configuration rather than through the admin API: it is
    /// reported, never deleted (design K3).
    pub defined_statically: bool,
}

/// What is known about an object the server does not have. Whether the server's state was lost
/// or replaced since the last sync (design R3) is not part of it: [`decide`] tells that from
/// [`LastSynced::epoch`] and [`Observation::server_epoch`], and a changed epoch outweighs any
/// absence (no CR is ever deleted because of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Absence {
    /// Proven removed within the current epoch: a remove event, or a list of a continuous epoch
    /// lacking a persistent object (design S3, server removals delete the CR; R2, removals only
    /// when proven).
    Removed,
    /// Not there, without proof that anyone removed it: never created, or a volatile object the
    /// server lost in a restart (design R2, removals only when proven), or anything whose removal
    /// cannot be proven. Never taken as a deletion.
    Missing,
}

/// The CR's desired object compared with the server's current one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Comparison {
    /// Semantically equal.
    Equal,
    /// Different.
    Different {
        /// The server can take the CR's object as an in-place update (for caches: only mutable
        /// attributes differ). Combined with [`KindCapabilities::update_in_place`].
        in_place: bool,
    },
}

/// Dependencies between objects (design D1), found by the adapter in the engine's stores.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Dependencies {
    /// What the CR's object needs that is missing or not Ready (a Cache's Template or Schemas),
    /// for the status message: writing it to the server waits for them.
    pub missing: Vec<String>,
    /// What uses this object (the Caches of a Template), for the status message: it may not be
    /// recreated meanwhile.
    pub used_by: Vec<String>,
}

/// What the server can do with a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KindCapabilities {
    /// Objects can be updated in place (false for templates and counters: immutable).
    pub update_in_place: bool,
    /// Objects can be created through the API.
    pub create: bool,
    /// Objects can be deleted through the API.
    pub delete: bool,
}

/// What must happen: one action, the status to write once it succeeded, and an Event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The one next step.
    pub action: Action,
    /// The status to write once the action succeeded; `None`: leave the status as it is (no CR,
    /// a CR about to go, or nothing new to say). The engine writes it only on a real change
    /// (design L1, idle: no writes), and reports a failed action with its own reason (`Rejected`,
    /// `ServerUnavailable`...) instead.
    pub status: Option<Status>,
    /// An Event to emit once the action succeeded. Only actions that write carry one, so an idle
    /// object emits none (design L1).
    pub event: Option<Event>,
}

/// One step of the sync of one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Nothing to do until something changes.
    Nothing,
    /// Something must happen that cannot yet: retry with backoff (and on the trigger).
    Wait(WaitFor),
    /// Put the operator's finalizer on the CR (before anything else, design L2).
    AddFinalizer,
    /// Only record the last-synced state (the two sides agree: adopt, or finish a sync a crash
    /// interrupted).
    RecordSynced,
    /// Create the CR's object on the server.
    CreateOnServer,
    /// Update the server object to the CR's, in place.
    UpdateServer,
    /// Delete the server object and create it again with the CR's (its data is lost).
    RecreateOnServer,
    /// Delete the server object, then release the CR's finalizer.
    DeleteOnServer,
    /// Create a mirror CR for the server object (origin `server`), in one call with its labels,
    /// annotations and owner reference (design S1, server objects appear as CRs).
    CreateMirrorCr {
        /// Create it with the operator's finalizer (not in FromServer mode: no finalizers).
        with_finalizer: bool,
    },
    /// Rewrite the CR's spec from the server object (design S2).
    UpdateCrSpecFromServer,
    /// Delete the CR without any server call: first release the operator's finalizer (if
    /// present), then delete it, so that a crash in between cannot end in a server call.
    DeleteCr,
    /// Release the operator's finalizer of a CR being deleted, without any server call.
    ReleaseFinalizer,
}

impl Action {
    /// Whether the action writes to the server.
    pub const fn writes_server(self) -> bool {
        match self {
            Self::CreateOnServer
            | Self::UpdateServer
            | Self::RecreateOnServer
            | Self::DeleteOnServer => true,
            Self::Nothing
            | Self::Wait(_)
            | Self::AddFinalizer
            | Self::RecordSynced
            | Self::CreateMirrorCr { .. }
            | Self::UpdateCrSpecFromServer
            | Self::DeleteCr
            | Self::ReleaseFinalizer => false,
        }
    }

    /// Whether the action writes the CR: its existence, spec, metadata or last-synced record.
    pub const fn writes_cr(self) -> bool {
        match self {
            Self::Nothing | Self::Wait(_) => false,
            Self::AddFinalizer
            | Self::RecordSynced
            | Self::CreateOnServer
            | Self::UpdateServer
            | Self::RecreateOnServer
            | Self::DeleteOnServer
            | Self::CreateMirrorCr { .. }
            | Self::UpdateCrSpecFromServer
            | Self::DeleteCr
            | Self::ReleaseFinalizer => true,
        }
    }

    /// Whether the action writes anything.
    pub const fn writes(self) -> bool {
        self.writes_server() || self.writes_cr()
    }
}

/// What an [`Action::Wait`] waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitFor {
    /// The server to become reachable.
    Server,
    /// The dependencies of [`Dependencies::missing`].
    Dependencies,
    /// The users of [`Dependencies::used_by`] to go.
    Dependents,
}

/// The status conditions to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Set `Ready` (`True` exactly when the reason is `Synced`) and remove
    /// `ReconciliationPaused`.
    Ready {
        /// Why.
        reason: Reason,
        /// For the user; empty when the reason says it all.
        message: String,
    },
    /// Set `ReconciliationPaused=True`; `Ready` stays as it is.
    Paused {
        /// For the user.
        message: String,
    },
}

/// A Kubernetes Event about the CR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Normal or Warning.
    pub type_: EventType,
    /// Short CamelCase reason.
    pub reason: EventReason,
    /// For the user.
    pub message: String,
}

/// The reasons of the Events of the sync: conflicts, deletions and recreations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventReason {
    /// Both sides differ and one side's version replaced the other's (design C1, the conflict
    /// winner; also a CR applied for an existing, different server object).
    ConflictResolved,
    /// ToServer mode: a change made on the server was reverted from the CR (design E3, sync mode).
    ServerChangeReverted,
    /// The server object was deleted with its CR (design K3).
    DeletedOnServer,
    /// The CR was deleted but its server object stays: the server cannot delete it.
    NotDeletedOnServer,
    /// The CR was deleted because its server object was removed (design S3).
    DeletedFromServer,
    /// The server object was created again: after a removal, a restart that lost it or a loss of
    /// the server's state (R2, removals only when proven; R3, a server that lost its state), or to
    /// apply a change it cannot take in place.
    RecreatedOnServer,
    /// A mirror CR was deleted because a user CR now stands for its server object (design N2,
    /// claims on a server name).
    Superseded,
}

impl EventReason {
    /// The Event's `reason`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ConflictResolved => "ConflictResolved",
            Self::ServerChangeReverted => "ServerChangeReverted",
            Self::DeletedOnServer => "DeletedOnServer",
            Self::NotDeletedOnServer => "NotDeletedOnServer",
            Self::DeletedFromServer => "DeletedFromServer",
            Self::RecreatedOnServer => "RecreatedOnServer",
            Self::Superseded => "Superseded",
        }
    }
}

impl fmt::Display for EventReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The generation of a CR the operator just created (Kubernetes starts at 1).
const CREATED_GENERATION: i64 = 1;

/// What must happen to one object; see the module documentation for the steps.
///
/// Choices where the design is silent:
/// - `conflictWinner` only matters in Bidirectional mode: ToServer always keeps the CR's
///   version, FromServer always takes the server's (a CR edit is never pushed there, so it
///   cannot win). This holds for a CR applied for an existing, different server object too:
///   in FromServer its spec is rewritten from the server.
/// - Server object present after a server restore (epoch changed): judged like any present
///   object against last synced (digest): equal is adopted, a differing restored version counts
///   as a server change.
/// - FromServer mode never writes to the server: a CR whose object the server lost (restart,
///   wipe, or a CR created by a user) is kept, reported `ReadOnlyMode`, and not recreated.
/// - Both sides unchanged since the last sync yet different (the comparison changed, e.g. after
///   an operator upgrade): resolved like a conflict.
/// - A mirror CR whose first status write was lost (a crash right after its creation) counts as
///   synced at its creation: generation 1, in the current epoch, with an unknown digest: when it
///   differs from the server object, the server counts as changed (so a CR edited meanwhile is
///   in conflict).
/// - A CR deleted before it got the finalizer is gone without the operator: nothing is done on
///   the server.
/// - Unreachable server: only pending pushes (a CR never synced, or edited since last synced)
///   and deletions wait with `ServerUnavailable`; an object in sync keeps its status (no write
///   for every CR when the server blinks).
/// - Unmanaged outweighs pause, internal objects and claims: an unmanaged CR is never touched
///   beyond releasing its finalizer when deleted. Pause outweighs claims and deletion: a paused
///   CR (even a superseded mirror, even one being deleted) waits for the annotation to go.
/// - A change needing recreation (`updates.strategy: recreate`) waits while others use the
///   object (D1, dependencies between kinds; reason `Pending`); a kind the server cannot create or
///   delete reports `Unsupported` instead of recreating.
/// - Events accompany conflicts, reverts, deletions and recreations, never an idle decision.
pub fn decide(observation: &Observation) -> Decision {
    let Some(cr) = &observation.cr else {
        return server_only(observation);
    };
    if !cr.managed {
        return unmanaged(cr);
    }
    if cr.paused {
        return paused();
    }
    if observation.internal {
        return internal(cr);
    }
    match &cr.claim {
        Claim::Owner => {}
        Claim::LosesTo { winner } => return losing_claim(cr, winner),
        Claim::SupersededMirror { by } => return superseded_mirror(cr, by),
    }
    if cr.deleting {
        return deletion(observation, cr);
    }
    finalizer_first(observation, cr, live(observation, cr))
}

// ---- Steps 1 to 5: no CR, unmanaged, paused, internal, claims --------------------------------

/// Step 1: a server object without CR is mirrored (S1) in Bidirectional and FromServer mode
/// (without finalizer in FromServer), ignored in ToServer (E3, sync mode) and when internal (E4).
fn server_only(observation: &Observation) -> Decision {
    match &observation.server {
        ServerView::Present(_) if !observation.internal => match observation.mode {
            SyncMode::Bidirectional => mirror(true),
            SyncMode::FromServer => mirror(false),
            SyncMode::ToServer => Decision::nothing(None),
        },
        ServerView::Present(_) | ServerView::Absent(_) | ServerView::Unreachable => {
            Decision::nothing(None)
        }
    }
}

fn mirror(with_finalizer: bool) -> Decision {
    Decision::act(Action::CreateMirrorCr { with_finalizer }, synced())
}

/// Step 2 (E1, unmanaged CRs).
fn unmanaged(cr: &CrView) -> Decision {
    if cr.deleting {
        return release_if_held(cr, None);
    }
    Decision::nothing(Some(ready(
        Reason::Unmanaged,
        format!("annotation {MANAGED_ANNOTATION} is \"false\": not synced with the server"),
    )))
}

/// Step 3 (E2, paused CRs).
fn paused() -> Decision {
    Decision::nothing(Some(Status::Paused {
        message: format!(
            "annotation {PAUSE_RECONCILIATION_ANNOTATION} is \"true\": nothing is written to the \
             CR or the server until it goes"
        ),
    }))
}

/// Step 4 (E4, internal objects).
fn internal(cr: &CrView) -> Decision {
    if cr.deleting {
        return release_if_held(cr, None);
    }
    Decision::nothing(Some(ready(
        Reason::Unsupported,
        "an internal server object: never synced".to_string(),
    )))
}

/// Step 5 (N2, claims on a server name): the loser of a claim never touches the server, also when
/// deleted.
fn losing_claim(cr: &CrView, winner: &str) -> Decision {
    if cr.deleting {
        return release_if_held(cr, None);
    }
    Decision::nothing(Some(ready(
        Reason::Conflict,
        format!("the server object is claimed by the older CR {winner}"),
    )))
}

/// Step 5 (N2, claims on a server name): a mirror superseded by a user CR is deleted without
/// touching the server.
fn superseded_mirror(cr: &CrView, by: &str) -> Decision {
    if cr.deleting {
        return release_if_held(cr, None);
    }
    Decision::act(Action::DeleteCr, None).with_event(
        EventType::Normal,
        EventReason::Superseded,
        format!("the user CR {by} now stands for the server object"),
    )
}

/// Releases the finalizer of a CR being deleted, when it has it; otherwise Kubernetes removes
/// the CR without us.
fn release_if_held(cr: &CrView, event: Option<Event>) -> Decision {
    if cr.has_finalizer {
        Decision {
            action: Action::ReleaseFinalizer,
            status: None,
            event,
        }
    } else {
        Decision::nothing(None)
    }
}

// ---- Step 6: deletion ------------------------------------------------------------------------

/// Step 6 (K3, and the "deleted" row of the outcome table): the server object is deleted with
/// the CR, in Bidirectional and ToServer mode with `deletionPolicy: Delete`; already gone counts
/// as deleted (removed, lost or wiped: release the finalizer). A server change since the last
/// sync is discarded by the deletion, with a Warning Event.
fn deletion(observation: &Observation, cr: &CrView) -> Decision {
    if !cr.has_finalizer {
        return Decision::nothing(None);
    }
    let deletes_on_server = match (observation.mode, cr.deletion_policy) {
        (SyncMode::FromServer, _) | (_, DeletionPolicy::Retain) => false,
        (SyncMode::Bidirectional | SyncMode::ToServer, DeletionPolicy::Delete) => true,
    };
    if !deletes_on_server {
        return release_if_held(cr, None);
    }
    match &observation.server {
        ServerView::Unreachable => Decision {
            action: Action::Wait(WaitFor::Server),
            status: Some(ready(
                Reason::ServerUnavailable,
                "the server cannot be reached: the deletion of the server object waits for it"
                    .to_string(),
            )),
            event: None,
        },
        ServerView::Absent(Absence::Removed | Absence::Missing) => release_if_held(cr, None),
        ServerView::Present(object) => {
            let refusal = if object.defined_statically {
                Some("it is defined in the server's own configuration")
            } else if !observation.caps.delete {
                Some("the server cannot delete this kind of object")
            } else {
                None
            };
            if let Some(why) = refusal {
                let event = Event {
                    type_: EventType::Warning,
                    reason: EventReason::NotDeletedOnServer,
                    message: format!("the server object was kept: {why}"),
                };
                return release_if_held(cr, Some(event));
            }
            let server_changed = observation.comparison != Comparison::Equal
                && Base::of(cr).is_some_and(|base| base.server_edited(object));
            let decision = Decision::act(Action::DeleteOnServer, None);
            if server_changed {
                decision.with_event(
                    EventType::Warning,
                    EventReason::DeletedOnServer,
                    "the server object was deleted with the CR, discarding the changes made \
                     on the server since the last sync"
                        .to_string(),
                )
            } else {
                decision.with_event(
                    EventType::Normal,
                    EventReason::DeletedOnServer,
                    "the server object was deleted with the CR".to_string(),
                )
            }
        }
    }
}

// ---- Steps 7 and 8: equality and the existence matrix ----------------------------------------

/// What the decision takes as "last synced" (L).
#[derive(Clone, Copy, Debug)]
enum Base<'a> {
    /// Recorded in the CR's status.
    Recorded(&'a LastSynced),
    /// A mirror CR without a record (its first status write was lost): synced at its creation,
    /// as generation 1, in the current epoch, with a digest nobody knows.
    MirrorCreation,
}

impl<'a> Base<'a> {
    /// `None`: never synced.
    fn of(cr: &'a CrView) -> Option<Self> {
        match (&cr.last_synced, cr.origin) {
            (Some(recorded), Origin::Kubernetes | Origin::Server) => Some(Self::Recorded(recorded)),
            (None, Origin::Server) => Some(Self::MirrorCreation),
            (None, Origin::Kubernetes) => None,
        }
    }

    /// The CR's spec changed since (its generation moved).
    fn cr_edited(self, cr: &CrView) -> bool {
        match self {
            Self::Recorded(recorded) => cr.generation != recorded.generation,
            Self::MirrorCreation => cr.generation != CREATED_GENERATION,
        }
    }

    /// The server object changed since (its digest moved). Without a recorded digest (a mirror
    /// that lost its record) nobody knows: taken as changed, so that a difference with an edited
    /// CR is a conflict.
    fn server_edited(self, object: &ServerObject) -> bool {
        match self {
            Self::Recorded(recorded) => object.digest != recorded.digest,
            Self::MirrorCreation => true,
        }
    }

    /// The server's state was lost or replaced since (R3). A restart that kept the state (a
    /// new session) is not a change of state.
    fn epoch_changed(self, server_epoch: &str) -> bool {
        match self {
            Self::Recorded(recorded) => epoch_state(&recorded.epoch) != epoch_state(server_epoch),
            Self::MirrorCreation => false,
        }
    }
}

/// Steps 7 and 8 for a live CR that stands for its server object.
fn live(observation: &Observation, cr: &CrView) -> Decision {
    let base = Base::of(cr);
    match &observation.server {
        ServerView::Unreachable => server_unreachable(observation, cr, base),
        ServerView::Present(object) => match observation.comparison {
            Comparison::Equal => in_sync(observation, cr, object),
            Comparison::Different { in_place } => {
                both_differ(observation, cr, object, base, in_place)
            }
        },
        ServerView::Absent(absence) => cr_only(observation, cr, *absence, base),
    }
}

/// While the server is unreachable, a pending push waits with `ServerUnavailable`; anything
/// else keeps its status.
fn server_unreachable(observation: &Observation, cr: &CrView, base: Option<Base<'_>>) -> Decision {
    let pending = match observation.mode {
        SyncMode::FromServer => false,
        SyncMode::Bidirectional | SyncMode::ToServer => base.is_none_or(|base| base.cr_edited(cr)),
    };
    if !pending {
        return Decision::nothing(None);
    }
    Decision {
        action: Action::Wait(WaitFor::Server),
        status: Some(ready(
            Reason::ServerUnavailable,
            "the server cannot be reached: the CR's changes wait for it".to_string(),
        )),
        event: None,
    }
}

/// Step 7: the two sides agree; record it unless the record already says so (generation,
/// digest and epoch). Adopts an existing object, finishes a sync a crash interrupted, and makes
/// the echo of our own write a no-op.
fn in_sync(observation: &Observation, cr: &CrView, object: &ServerObject) -> Decision {
    let recorded = cr.last_synced.as_ref().is_some_and(|recorded| {
        recorded.generation == cr.generation
            && recorded.digest == object.digest
            && recorded.epoch == observation.server_epoch
    });
    if recorded {
        Decision::nothing(synced())
    } else {
        Decision::act(Action::RecordSynced, synced())
    }
}

/// Both exist and differ: never synced (the winner decides), else by what changed since the
/// last sync.
fn both_differ(
    observation: &Observation,
    cr: &CrView,
    object: &ServerObject,
    base: Option<Base<'_>>,
    in_place: bool,
) -> Decision {
    let Some(base) = base else {
        return resolve_conflict(
            observation,
            cr,
            in_place,
            "a CR was applied for an existing server object that differs",
        );
    };
    let cr_edited = base.cr_edited(cr);
    let server_edited = base.server_edited(object);
    match (cr_edited, server_edited) {
        // K2: a CR change updates the server.
        (true, false) => match observation.mode {
            SyncMode::Bidirectional | SyncMode::ToServer => {
                push(observation, cr, Push::Update { in_place }, None)
            }
            SyncMode::FromServer => read_only(
                "the CR was edited; FromServer mode does not push it to the server".to_string(),
            ),
        },
        // S2: server changes update the CR.
        (false, true) => match observation.mode {
            SyncMode::Bidirectional | SyncMode::FromServer => pull(None),
            SyncMode::ToServer => push(
                observation,
                cr,
                Push::Update { in_place },
                Some(Event {
                    type_: EventType::Warning,
                    reason: EventReason::ServerChangeReverted,
                    message: "the server object was changed on the server; ToServer mode \
                              restored it from the CR"
                        .to_string(),
                }),
            ),
        },
        // C1: the conflict winner decides.
        (true, true) => resolve_conflict(
            observation,
            cr,
            in_place,
            "both the CR and the server object changed since the last sync",
        ),
        (false, false) => resolve_conflict(
            observation,
            cr,
            in_place,
            "the CR and the server object differ although neither changed since the last sync",
        ),
    }
}

/// The side whose version prevails when both differ: the conflict winner in Bidirectional mode,
/// the direction of the mode otherwise.
fn prevailing(mode: SyncMode, winner: ConflictWinner) -> ConflictWinner {
    match mode {
        SyncMode::Bidirectional => winner,
        SyncMode::ToServer => ConflictWinner::Kubernetes,
        SyncMode::FromServer => ConflictWinner::Server,
    }
}

fn resolve_conflict(
    observation: &Observation,
    cr: &CrView,
    in_place: bool,
    what: &str,
) -> Decision {
    match prevailing(observation.mode, observation.winner) {
        ConflictWinner::Kubernetes => push(
            observation,
            cr,
            Push::Update { in_place },
            Some(Event {
                type_: EventType::Warning,
                reason: EventReason::ConflictResolved,
                message: format!("{what}: the CR's version was written to the server"),
            }),
        ),
        ConflictWinner::Server => pull(Some(Event {
            type_: EventType::Warning,
            reason: EventReason::ConflictResolved,
            message: format!("{what}: the server's version was written to the CR"),
        })),
    }
}

/// The CR exists, the server object does not.
fn cr_only(
    observation: &Observation,
    cr: &CrView,
    absence: Absence,
    base: Option<Base<'_>>,
) -> Decision {
    let Some(base) = base else {
        // K1, a new CR creates the object (a removal of an object this CR never synced does
        // not concern it).
        return match observation.mode {
            SyncMode::Bidirectional | SyncMode::ToServer => {
                push(observation, cr, Push::Create, None)
            }
            SyncMode::FromServer => read_only(
                "the server has no such object; FromServer mode does not create it".to_string(),
            ),
        };
    };
    if base.epoch_changed(&observation.server_epoch) {
        // R3, a server that lost its state.
        return restore(
            observation,
            cr,
            "the server lost its state since the last sync",
        );
    }
    match absence {
        // R2 (removals only when proven) and anything not proven removed.
        Absence::Missing => restore(observation, cr, "the server lost the object"),
        // S3 (server removals delete the CR), or the unsynced edit wins.
        Absence::Removed => match observation.mode {
            SyncMode::Bidirectional if base.cr_edited(cr) => push(
                observation,
                cr,
                Push::Create,
                Some(Event {
                    type_: EventType::Warning,
                    reason: EventReason::RecreatedOnServer,
                    message: "the server object was removed on the server while the CR had \
                              changes not yet synced: it was created again from the CR"
                        .to_string(),
                }),
            ),
            SyncMode::Bidirectional | SyncMode::FromServer => Decision::act(Action::DeleteCr, None)
                .with_event(
                    EventType::Normal,
                    EventReason::DeletedFromServer,
                    "the server object was removed on the server".to_string(),
                ),
            SyncMode::ToServer => push(
                observation,
                cr,
                Push::Create,
                Some(Event {
                    type_: EventType::Warning,
                    reason: EventReason::RecreatedOnServer,
                    message: "the server object was removed on the server; ToServer mode \
                              created it again from the CR"
                        .to_string(),
                }),
            ),
        },
    }
}

/// R2, R3: recreate what the server lost, in the modes that push; never delete the CR.
fn restore(observation: &Observation, cr: &CrView, what: &str) -> Decision {
    match observation.mode {
        SyncMode::Bidirectional | SyncMode::ToServer => push(
            observation,
            cr,
            Push::Create,
            Some(Event {
                type_: EventType::Normal,
                reason: EventReason::RecreatedOnServer,
                message: format!("{what}: it was created again from the CR"),
            }),
        ),
        SyncMode::FromServer => read_only(format!(
            "{what}; FromServer mode does not create it again (the CR is kept)"
        )),
    }
}

/// How the CR's object goes to the server.
#[derive(Clone, Copy, Debug)]
enum Push {
    /// The server has no such object.
    Create,
    /// The server has a different one.
    Update {
        /// It can take the change in place (before [`KindCapabilities::update_in_place`]).
        in_place: bool,
    },
}

/// Writes the CR's object to the server, if it can be: a change that cannot be made in place
/// needs `updates.strategy: recreate` (else `Immutable`), a kind the server cannot create (or
/// delete, to recreate) is `Unsupported`, a recreation waits for the object's users to go, and
/// every write waits for missing dependencies (D1). The event goes only with a write.
fn push(observation: &Observation, cr: &CrView, how: Push, event: Option<Event>) -> Decision {
    let caps = observation.caps;
    let dependencies = &observation.dependencies;
    let (action, event) = match how {
        Push::Create if !caps.create => {
            return unsupported("the server cannot create this kind of object");
        }
        Push::Create => (Action::CreateOnServer, event),
        Push::Update { in_place } if in_place && caps.update_in_place => {
            (Action::UpdateServer, event)
        }
        Push::Update { .. } => match cr.update_strategy {
            UpdateStrategy::Retain => {
                return Decision::nothing(Some(ready(
                    Reason::Immutable,
                    "the server object can only take this change by being recreated (its data \
                     is lost); set spec.updates.strategy to recreate to allow it"
                        .to_string(),
                )));
            }
            UpdateStrategy::Recreate if !(caps.create && caps.delete) => {
                return unsupported("the server cannot recreate this kind of object");
            }
            UpdateStrategy::Recreate if !dependencies.used_by.is_empty() => {
                return Decision {
                    action: Action::Wait(WaitFor::Dependents),
                    status: Some(ready(
                        Reason::Pending,
                        format!(
                            "the server object must be recreated, which waits while it is used by: {}",
                            dependencies.used_by.join(", ")
                        ),
                    )),
                    event: None,
                };
            }
            UpdateStrategy::Recreate => (
                Action::RecreateOnServer,
                Some(Event {
                    type_: EventType::Warning,
                    reason: EventReason::RecreatedOnServer,
                    message: "the server object was deleted and created again to take a change \
                              it cannot take in place: its data was lost"
                        .to_string(),
                }),
            ),
        },
    };
    if !dependencies.missing.is_empty() {
        return Decision {
            action: Action::Wait(WaitFor::Dependencies),
            status: Some(ready(
                Reason::DependencyMissing,
                format!("waiting for: {}", dependencies.missing.join(", ")),
            )),
            event: None,
        };
    }
    Decision {
        action,
        status: synced(),
        event,
    }
}

/// Rewrites the CR's spec from the server object.
fn pull(event: Option<Event>) -> Decision {
    Decision {
        action: Action::UpdateCrSpecFromServer,
        status: synced(),
        event,
    }
}

fn read_only(message: String) -> Decision {
    Decision::nothing(Some(ready(Reason::ReadOnlyMode, message)))
}

fn unsupported(message: &str) -> Decision {
    Decision::nothing(Some(ready(Reason::Unsupported, message.to_string())))
}

// ---- Step 9: the finalizer -------------------------------------------------------------------

/// Step 9: a live CR whose deletion must reach the server (a mode that deletes on the server,
/// `deletionPolicy: Delete`) gets the finalizer before anything else, unless it is about to be
/// deleted anyway.
fn finalizer_first(observation: &Observation, cr: &CrView, decision: Decision) -> Decision {
    let needs_finalizer = match (observation.mode, cr.deletion_policy) {
        (SyncMode::FromServer, _) | (_, DeletionPolicy::Retain) => false,
        (SyncMode::Bidirectional | SyncMode::ToServer, DeletionPolicy::Delete) => true,
    };
    if cr.has_finalizer || !needs_finalizer || decision.action == Action::DeleteCr {
        return decision;
    }
    Decision::act(Action::AddFinalizer, None)
}

// ---- Building decisions ----------------------------------------------------------------------

impl Decision {
    fn nothing(status: Option<Status>) -> Self {
        Self {
            action: Action::Nothing,
            status,
            event: None,
        }
    }

    fn act(action: Action, status: Option<Status>) -> Self {
        Self {
            action,
            status,
            event: None,
        }
    }

    fn with_event(self, type_: EventType, reason: EventReason, message: String) -> Self {
        Self {
            event: Some(Event {
                type_,
                reason,
                message,
            }),
            ..self
        }
    }
}

fn ready(reason: Reason, message: String) -> Status {
    Status::Ready { reason, message }
}

fn synced() -> Option<Status> {
    Some(ready(Reason::Synced, String::new()))
}
