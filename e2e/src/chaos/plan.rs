//! What a run does: its profile, the operations (and the rules that say which may be issued
//! when), and the fault schedule. Pure: the driver gives it what it observed.
//!
//! ## Why operations are gated
//!
//! The outcome table decides from what changed *since the last sync*, so the same two writes
//! can end differently depending on whether the operator synced between them: a CR edit `a`
//! followed by a server edit `b` ends as `b` when the operator pushed `a` first (S2), and as
//! `a` when it did not (C1, `conflictWinner: Kubernetes`). An oracle that only knows the order
//! of the driver's operations cannot tell the two apart, so the driver issues an operation only
//! when its outcome does not depend on the operator's timing (see [`allowed`]). What remains is
//! still every cell of the table: conflicts whose winner is the side that wrote last, deletion
//! against an unsynced edit, an unsynced edit against a removal (the CR was edited while the
//! operator had not yet deleted it), adoption of a server object by a new user CR, a user CR
//! replacing a mirror, all of it across operator kills, cut and stalled streams, server
//! restarts and wipes.

use common_crds::ResourceKind as Kind;

use super::model::{Slot, Version};
use super::rng::Rng;

/// Which side wins a conflict (`spec.resourcesOperator.conflictWinner`, Bidirectional mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Winner {
    Kubernetes,
    Server,
}

impl Winner {
    pub fn as_str(self) -> &'static str {
        match self {
            Winner::Kubernetes => "Kubernetes",
            Winner::Server => "Server",
        }
    }
}

/// The direction of sync (`spec.resourcesOperator.syncMode`, design.md E3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    #[default]
    Bidirectional,
    /// CRs are the truth (GitOps): server objects without CR are ignored, server changes of
    /// objects with a CR are reverted.
    ToServer,
    /// The server is the truth (mirror): CR changes are never pushed.
    FromServer,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Bidirectional => "Bidirectional",
            Mode::ToServer => "ToServer",
            Mode::FromServer => "FromServer",
        }
    }
}

/// Every mode and winner that means something (one direction's winner decides nothing: ToServer
/// keeps the CR's content, FromServer the server's).
pub const COMBINATIONS: [(Mode, Winner); 4] = [
    (Mode::Bidirectional, Winner::Kubernetes),
    (Mode::Bidirectional, Winner::Server),
    (Mode::ToServer, Winner::Kubernetes),
    (Mode::FromServer, Winner::Kubernetes),
];

/// The combination `make test`'s short profile runs for `key` (taken from the commit): over
/// successive commits every combination keeps being exercised, CI no longer for it.
pub fn rotation(key: u64) -> (Mode, Winner) {
    COMBINATIONS[usize::try_from(key % COMBINATIONS.len() as u64).unwrap_or(0)]
}

/// The sync settings the gates and the oracle follow: the mode, and the conflict winner (which
/// only matters in Bidirectional mode: ToServer always keeps the CR's content, FromServer the
/// server's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    pub mode: Mode,
    pub winner: Winner,
}

impl Rules {
    pub fn new(mode: Mode, winner: Winner) -> Self {
        Self { mode, winner }
    }
}

/// Bidirectional mode with this winner.
impl From<Winner> for Rules {
    fn from(winner: Winner) -> Self {
        Self::new(Mode::Bidirectional, winner)
    }
}

/// The size of a run.
#[derive(Clone, Debug)]
pub struct Profile {
    pub name: &'static str,
    pub seed: u64,
    pub ops: usize,
    pub slots_per_kind: usize,
    pub mode: Mode,
    pub winner: Winner,
    /// Operator processes (2: leader election, kills hit the leader).
    pub replicas: usize,
    pub kills: usize,
    pub cuts: usize,
    pub stalls: usize,
    pub server_restarts: usize,
    pub server_wipes: usize,
    /// kill -9 of the testbed's kube-apiserver, started again by `e2e/testbed/up.sh`. Never in
    /// a profile that runs beside other suites on a shared testbed (the short one).
    pub apiserver_restarts: usize,
    /// Largest pause between two operations, in milliseconds.
    pub max_pause_ms: u64,
}

impl Profile {
    /// The mode and conflict winner of the run.
    pub fn rules(&self) -> Rules {
        Rules::new(self.mode, self.winner)
    }

    /// The short profile of `make test`.
    pub fn short(seed: u64) -> Self {
        Self {
            name: "short",
            seed,
            ops: 60,
            slots_per_kind: 3,
            mode: Mode::Bidirectional,
            winner: Winner::Kubernetes,
            replicas: 2,
            kills: 2,
            cuts: 3,
            stalls: 1,
            server_restarts: 1,
            server_wipes: 0,
            // `make test` runs this profile beside other suites on the same API server.
            apiserver_restarts: 0,
            max_pause_ms: 150,
        }
    }

    /// The full profile of `make chaos`.
    pub fn full(seed: u64) -> Self {
        Self {
            name: "full",
            seed,
            ops: 500,
            slots_per_kind: 6,
            mode: Mode::Bidirectional,
            winner: Winner::Kubernetes,
            replicas: 2,
            kills: 10,
            cuts: 20,
            stalls: 5,
            server_restarts: 2,
            server_wipes: 2,
            apiserver_restarts: 2,
            max_pause_ms: 200,
        }
    }
}

/// The side an operation acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The CR, through the Kubernetes API (as `kubectl` would).
    Kube,
    /// The server object, over REST (as any other client would).
    Server,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Create,
    Edit,
    Delete,
}

/// One operation of the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    /// Its number in the run, from 1; also the version of the content it writes.
    pub seq: u64,
    pub slot: Slot,
    pub side: Side,
    pub action: Action,
}

impl Op {
    /// The content version a create or an edit writes.
    pub fn version(&self) -> Option<Version> {
        (self.action != Action::Delete).then_some(self.seq)
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let side = match self.side {
            Side::Kube => "cr",
            Side::Server => "server",
        };
        let action = match self.action {
            Action::Create => "create",
            Action::Edit => "edit",
            Action::Delete => "delete",
        };
        write!(f, "#{} {side} {action}", self.seq)?;
        if let Some(v) = self.version() {
            write!(f, " v{v}")?;
        }
        Ok(())
    }
}

/// A CR as the gates see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrView {
    pub deleting: bool,
    /// Carries the resources operator's finalizer.
    pub finalizer: bool,
    /// `status.lastSynced` is there.
    pub ever_synced: bool,
    /// `status.lastSynced.generation` is the CR's generation: no change of the CR is waiting.
    pub synced_current: bool,
    /// `status.lastSynced.epoch` names the server's current run: not an epoch the CRs held
    /// when the driver restarted the server. Only such a record lets the operator take an
    /// absence for a removal whatever the object's storage (design R2: a mirrored object may
    /// be volatile, so its absence after a restart nobody saw it survive proves nothing).
    pub recorded_in_run: bool,
    pub version: Option<Version>,
}

/// One slot as observed right before an operation is chosen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlotView {
    pub user: Option<CrView>,
    pub mirror: Option<CrView>,
    /// The server has the object (with this version, when readable).
    pub server: Option<Option<Version>>,
}

impl SlotView {
    /// The CR the driver acts on: the user CR when there is one (it beats a mirror, N2).
    pub fn claimant(&self) -> Option<&CrView> {
        self.user.as_ref().or(self.mirror.as_ref())
    }

    /// No change of the CR side is waiting to be pushed: no CR, or exactly one, not being
    /// deleted, whose generation the operator synced.
    pub fn kube_settled(&self) -> bool {
        match (&self.user, &self.mirror) {
            (None, None) => true,
            (Some(cr), None) | (None, Some(cr)) => !cr.deleting && cr.synced_current,
            (Some(_), Some(_)) => false,
        }
    }

    /// How many CRs claim the object (a user CR and a mirror at once: N2 is resolving).
    pub fn claimants(&self) -> usize {
        usize::from(self.user.is_some()) + usize::from(self.mirror.is_some())
    }

    /// One CR claims the object, not being deleted, with the operator's finalizer and a
    /// `lastSynced`: its deletion goes through the operator (K3).
    pub fn deletable_with_finalizer(&self) -> bool {
        self.claimants() == 1
            && self
                .claimant()
                .is_some_and(|cr| !cr.deleting && cr.finalizer && cr.ever_synced)
    }

    /// The server's content has reached the CR: settled on the CR side, and both agree.
    pub fn server_settled(&self) -> bool {
        let Some(cr) = self.claimant() else {
            return false;
        };
        self.kube_settled() && matches!(self.server, Some(Some(v)) if cr.version == Some(v))
    }
}

/// Whether the server can change `kind` in place (templates and counters are immutable: an
/// edit on the server side would be a remove and a create, which the driver issues as such).
pub fn server_editable(kind: Kind) -> bool {
    matches!(kind, Kind::Cache | Kind::Schema | Kind::Task)
}

/// The operations whose outcome does not depend on the operator's timing, given `view`, in
/// the mode and with the winner of `rules` (per mode: [`allowed_bidirectional`],
/// [`allowed_to_server`], [`allowed_from_server`]).
pub fn allowed(kind: Kind, view: &SlotView, rules: impl Into<Rules>) -> Vec<(Side, Action)> {
    let rules = rules.into();
    match rules.mode {
        Mode::Bidirectional => allowed_bidirectional(kind, view, rules.winner),
        Mode::ToServer => allowed_to_server(kind, view),
        Mode::FromServer => allowed_from_server(kind, view),
    }
}

/// Bidirectional mode, `winner`:
///
/// - CR create: no user CR (else AlreadyExists). Over a server object or a mirror CR it is an
///   adoption (N2: the user CR beats the mirror; equal or `conflictWinner` decides). With
///   winner Server only when no CR claims the name: a mirror being deleted (K3 pending) and a
///   new user CR can end either way there.
/// - CR edit: some CR claims the object. With winner Kubernetes always (a conflict goes to the
///   CR, and so does a sync in between, the CR being written last). With winner Server only
///   once the server's content reached the CR ([`SlotView::server_settled`]).
/// - CR delete: one CR claims the object, with the operator's finalizer and a `lastSynced`
///   (a CR the operator never saw goes without touching the server; one deleted before its
///   first sync against a server object can end either way).
/// - Server create: no server object and no CR (a CR waiting for K1, or a deletion waiting
///   for its finalizer, would meet the new object in a race).
/// - Server edit (caches, schemas, tasks): with winner Kubernetes only when no CR change is
///   waiting ([`SlotView::kube_settled`]); with winner Server whenever no CR deletion is
///   waiting. A CR deletion wins over a server change made before it is carried out (design:
///   "CR deleted x server changed: the deletion wins", whatever `conflictWinner` says), but once
///   the operator has deleted the object, and while it has not released the finalizer yet, a
///   `PUT` of a schema or a task creates a new object, which is mirrored: the end depends on the
///   operator's timing (issue #20, seed 202: the oracle expected the mirror, the deletion won).
/// - Server delete: only when no CR change is waiting (an unsynced CR edit wins over a
///   removal and recreates the object; a synced one lets the CR go), and the CR's record names
///   the server's current run ([`CrView::recorded_in_run`]): after a server restart, until the
///   operator has seen the object survive it, its absence proves no removal when it may be
///   volatile (R2: recreated, never taken as deleted), so a delete could end either way.
pub fn allowed_bidirectional(kind: Kind, view: &SlotView, winner: Winner) -> Vec<(Side, Action)> {
    let mut out = Vec::new();
    let claimants = view.claimants();
    let on_server = view.server.is_some();
    if view.user.is_none() && (winner == Winner::Kubernetes || claimants == 0) {
        out.push((Side::Kube, Action::Create));
    }
    if let Some(cr) = view.claimant()
        && !cr.deleting
        && (winner == Winner::Kubernetes || view.server_settled())
    {
        out.push((Side::Kube, Action::Edit));
    }
    if view.deletable_with_finalizer() {
        out.push((Side::Kube, Action::Delete));
    }
    if !on_server && claimants == 0 {
        out.push((Side::Server, Action::Create));
    }
    let none_deleting = !view.user.iter().chain(&view.mirror).any(|cr| cr.deleting);
    if on_server
        && server_editable(kind)
        && none_deleting
        && (winner == Winner::Server || view.kube_settled())
    {
        out.push((Side::Server, Action::Edit));
    }
    if on_server && view.kube_settled() && view.claimant().is_none_or(|cr| cr.recorded_in_run) {
        out.push((Side::Server, Action::Delete));
    }
    out
}

/// ToServer mode (the CR always prevails; `conflictWinner` plays no part):
///
/// - CR create: no user CR. Over a server object without CR (never mirrored) it is an adoption
///   the CR wins, whenever the operator syncs.
/// - CR edit: some CR claims the object, not being deleted: it is pushed, and a server change
///   before or after it is reverted, whichever the operator sees first.
/// - CR delete: as in Bidirectional mode (the finalizer and a `lastSynced`: a CR the operator
///   never saw goes without touching the server, whose object would stay unmirrored or not).
/// - Server create, edit, delete: no CR being deleted (a deletion waiting for its finalizer
///   deletes the object on the server, or not when its finalizer went first: the server write
///   would be undone or stay). With a CR they are reverted (the object recreated, its content
///   restored) whether or not the CR's own change was pushed yet; without one they stay.
pub fn allowed_to_server(kind: Kind, view: &SlotView) -> Vec<(Side, Action)> {
    let mut out = Vec::new();
    let on_server = view.server.is_some();
    let none_deleting = !view.user.iter().chain(&view.mirror).any(|cr| cr.deleting);
    if view.user.is_none() {
        out.push((Side::Kube, Action::Create));
    }
    if let Some(cr) = view.claimant()
        && !cr.deleting
    {
        out.push((Side::Kube, Action::Edit));
    }
    if view.deletable_with_finalizer() {
        out.push((Side::Kube, Action::Delete));
    }
    if !on_server && none_deleting {
        out.push((Side::Server, Action::Create));
    }
    if on_server && server_editable(kind) && none_deleting {
        out.push((Side::Server, Action::Edit));
    }
    if on_server && none_deleting {
        out.push((Side::Server, Action::Delete));
    }
    out
}

/// FromServer mode (the server always prevails; CRs get no finalizer, `conflictWinner` plays no
/// part). Versions grow with the run, which the gates use: a CR whose version is above the
/// server's was edited after the server's last change, so no server change waits to be pulled
/// into it (CR edits are only issued when none waits).
///
/// - CR create: no user CR, and either no CR at all or the server has the object (a mirror
///   whose server object is gone waits for S3; a new user CR beside it could be synced from the
///   stale object and then deleted with it, or not).
/// - CR edit: one CR claims the object, and no server change waits to be pulled into it: the
///   server has nothing (the CR's content stays, or the CR goes when the server object was
///   removed, whenever it is edited), or has its content ([`SlotView::server_settled`]), or an
///   older version and the CR was synced before (a user CR created over a server object and
///   not yet synced would have its edit overwritten by the adoption, or not).
/// - CR delete: one CR claims the object, not being deleted (it goes at once, without the
///   server; a server object gets its mirror again).
/// - Server create: no server object. Over a CR (nothing else writes the server) the CR takes
///   the server's content, whether or not the operator saw the CR's last change.
/// - Server edit (caches, schemas, tasks): always: the CR takes it.
/// - Server delete: no CR, or one, synced before, with no server change waiting to be pulled
///   into it (a CR never synced whose server object went stays `ReadOnlyMode`, one synced is
///   deleted), recorded in the server's current run (as in Bidirectional mode: else R2 may
///   keep the CR).
pub fn allowed_from_server(kind: Kind, view: &SlotView) -> Vec<(Side, Action)> {
    let mut out = Vec::new();
    let claimants = view.claimants();
    let server = view.server;
    // No server change waits to be pulled into the single claiming CR.
    let nothing_to_pull = claimants == 1
        && view.claimant().is_some_and(|cr| {
            !cr.deleting
                && (view.server_settled()
                    || (cr.ever_synced
                        && matches!((server, cr.version), (Some(Some(s)), Some(c)) if s < c)))
        });
    if view.user.is_none() && (claimants == 0 || server.is_some()) {
        out.push((Side::Kube, Action::Create));
    }
    if claimants == 1
        && view.claimant().is_some_and(|cr| !cr.deleting)
        && (server.is_none() || nothing_to_pull)
    {
        out.push((Side::Kube, Action::Edit));
    }
    if claimants == 1 && view.claimant().is_some_and(|cr| !cr.deleting) {
        out.push((Side::Kube, Action::Delete));
    }
    if server.is_none() {
        out.push((Side::Server, Action::Create));
    }
    if server.is_some() && server_editable(kind) {
        out.push((Side::Server, Action::Edit));
    }
    if server.is_some()
        && (claimants == 0
            || (nothing_to_pull && view.claimant().is_some_and(|cr| cr.recorded_in_run)))
    {
        out.push((Side::Server, Action::Delete));
    }
    out
}

/// How often each operation is drawn among the allowed ones.
fn weight(side: Side, action: Action) -> u64 {
    // Server writes are allowed less often (they wait for the CR side to settle): drawn more
    // often when they are.
    match (side, action) {
        (Side::Kube, Action::Create) => 3,
        (Side::Kube, Action::Edit) => 4,
        (Side::Kube, Action::Delete) => 2,
        (Side::Server, Action::Create) => 4,
        (Side::Server, Action::Edit) => 8,
        (Side::Server, Action::Delete) => 4,
    }
}

/// Draws the operation `seq` on `slot` among those [`allowed`]; `None` when none is.
pub fn choose(
    rng: &mut Rng,
    seq: u64,
    slot: Slot,
    view: &SlotView,
    rules: impl Into<Rules>,
) -> Option<Op> {
    let options = allowed(slot.kind, view, rules);
    // Always exactly one draw, so that a seed's later draws do not depend on what was allowed.
    let draw = rng.next_u64();
    let total: u64 = options.iter().map(|(s, a)| weight(*s, *a)).sum();
    if total == 0 {
        return None;
    }
    let mut x = draw % total;
    let (side, action) = *options.iter().find(|(s, a)| {
        let w = weight(*s, *a);
        let hit = x < w;
        if !hit {
            x -= w;
        }
        hit
    })?;
    Some(Op {
        seq,
        slot,
        side,
        action,
    })
}

/// The sides the driver can act on while a fault lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Both: no fault, or one that hits only the operator or its connections.
    Both,
    /// Only the Kubernetes API: the server is restarting.
    KubeOnly,
    /// Only the server: the kube-apiserver is restarting.
    ServerOnly,
}

impl Reach {
    pub fn allows(self, side: Side) -> bool {
        match self {
            Reach::Both => true,
            Reach::KubeOnly => side == Side::Kube,
            Reach::ServerOnly => side == Side::Server,
        }
    }
}

/// [`choose`] limited to the sides `reach` allows. The draw is among every allowed operation
/// (then dropped when it is on the other side), so that with [`Reach::Both`] and
/// [`Reach::KubeOnly`] a seed draws as it did before API-server restarts existed.
///
/// - [`Reach::KubeOnly`]: the server is unknown, so only the CR side's gates apply, as if the
///   server had nothing (the driver lets the run settle before it restarts the server, and
///   nothing writes the server meanwhile: in FromServer mode no server change waits to be
///   pulled into any CR).
/// - [`Reach::ServerOnly`]: `view`'s CRs must be the ones observed last before the
///   kube-apiserver stopped: nobody can change a CR while it is down, the operator neither, so
///   they are still exact (the driver lets the run settle before it stops it, so that the
///   operator has nothing left to write between that observation and the stop).
pub fn choose_within(
    rng: &mut Rng,
    seq: u64,
    slot: Slot,
    view: &SlotView,
    rules: impl Into<Rules>,
    reach: Reach,
) -> Option<Op> {
    let rules = rules.into();
    let op = if reach == Reach::KubeOnly {
        let kube_view = SlotView {
            server: None,
            ..view.clone()
        };
        choose(rng, seq, slot, &kube_view, rules)
    } else {
        choose(rng, seq, slot, view, rules)
    };
    op.filter(|op| reach.allows(op.side))
}

/// A fault the driver injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// kill -9 of the operator (the leader, with replicas), restarted after `down_ops`
    /// operations.
    Kill { down_ops: usize },
    /// Every connection between operator and server reset at once.
    Cut,
    /// Every connection between operator and server silently frozen, new ones too, for
    /// `secs` seconds (operations go on meanwhile, about one a second). Longer than the
    /// stream's probe interval and timeout (15 s + 5 s): a stall that ends sooner leaves an
    /// established event stream frozen while new connections flow, which the operator cannot
    /// tell from an idle server (docs/server-api.md, "Limitation"; docs/chaos.md).
    Stall { secs: u64 },
    /// The server stopped and started again, state kept (after the run settled).
    ServerRestart,
    /// The server stopped, its state deleted, started again (after the run settled).
    ServerWipe,
    /// The testbed's kube-apiserver killed (kill -9), started again after `down_secs` seconds
    /// by `e2e/testbed/up.sh` (after the run settled); server operations go on meanwhile. The
    /// leader cannot renew its Lease: it stops, and is restarted as a pod would be.
    ApiServerRestart { down_secs: u64 },
}

impl Fault {
    pub fn name(&self) -> &'static str {
        match self {
            Fault::Kill { .. } => "kill",
            Fault::Cut => "cut",
            Fault::Stall { .. } => "stall",
            Fault::ServerRestart => "server-restart",
            Fault::ServerWipe => "server-wipe",
            Fault::ApiServerRestart { .. } => "apiserver-restart",
        }
    }
}

/// A fault and the operation it comes before (counting the paced operations of the profile,
/// not the extra ones issued during stalls and server restarts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheduled {
    pub before_op: u64,
    pub fault: Fault,
}

impl std::fmt::Display for Scheduled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.fault {
            Fault::Kill { down_ops } => {
                write!(
                    f,
                    "before #{}: kill -9, down for {down_ops} ops",
                    self.before_op
                )
            }
            Fault::Stall { secs } => write!(f, "before #{}: stall for {secs} s", self.before_op),
            Fault::ApiServerRestart { down_secs } => write!(
                f,
                "before #{}: kube-apiserver kill -9, started again after {down_secs} s",
                self.before_op
            ),
            other => write!(f, "before #{}: {}", self.before_op, other.name()),
        }
    }
}

/// The fault schedule of `profile`: every fault at a random operation (never before the
/// first tenth of the run, so that objects exist), sorted. Each kind is drawn after the ones
/// that existed before it, so that a profile without the newer kinds (the short one, without
/// API-server restarts) keeps its schedule.
pub fn schedule(rng: &mut Rng, profile: &Profile) -> Vec<Scheduled> {
    let ops = profile.ops as u64;
    let first = (ops / 10).max(1);
    let mut faults = Vec::new();
    let at = |rng: &mut Rng| rng.between(first, ops.max(first));
    for _ in 0..profile.kills {
        let down_ops = rng.between(0, 4) as usize;
        faults.push(Scheduled {
            before_op: at(rng),
            fault: Fault::Kill { down_ops },
        });
    }
    for _ in 0..profile.cuts {
        faults.push(Scheduled {
            before_op: at(rng),
            fault: Fault::Cut,
        });
    }
    for _ in 0..profile.stalls {
        let secs = rng.between(22, 28);
        faults.push(Scheduled {
            before_op: at(rng),
            fault: Fault::Stall { secs },
        });
    }
    for _ in 0..profile.server_restarts {
        faults.push(Scheduled {
            before_op: at(rng),
            fault: Fault::ServerRestart,
        });
    }
    for _ in 0..profile.server_wipes {
        faults.push(Scheduled {
            before_op: at(rng),
            fault: Fault::ServerWipe,
        });
    }
    for _ in 0..profile.apiserver_restarts {
        let down_secs = rng.between(0, 10);
        faults.push(Scheduled {
            before_op: at(rng),
            fault: Fault::ApiServerRestart { down_secs },
        });
    }
    faults.sort_by_key(|s| s.before_op);
    faults
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rotation_reaches_every_combination_in_four_consecutive_keys() {
        for start in [0u64, 7, 0xdead_beef] {
            let seen: std::collections::BTreeSet<(&str, &str)> = (start..start + 4)
                .map(rotation)
                .map(|(m, w)| (m.as_str(), w.as_str()))
                .collect();
            assert_eq!(seen.len(), COMBINATIONS.len(), "from {start}");
        }
    }

    fn synced(v: Version) -> CrView {
        CrView {
            deleting: false,
            finalizer: true,
            ever_synced: true,
            synced_current: true,
            recorded_in_run: true,
            version: Some(v),
        }
    }

    fn kinds_of(view: &SlotView, winner: Winner) -> Vec<(Side, Action)> {
        allowed(Kind::Cache, view, winner)
    }

    #[test]
    fn nothing_anywhere_allows_only_creates() {
        let view = SlotView::default();
        for winner in [Winner::Kubernetes, Winner::Server] {
            assert_eq!(
                kinds_of(&view, winner),
                vec![(Side::Kube, Action::Create), (Side::Server, Action::Create)]
            );
        }
    }

    #[test]
    fn a_synced_object_allows_every_edit_and_delete() {
        let view = SlotView {
            user: Some(synced(3)),
            mirror: None,
            server: Some(Some(3)),
        };
        let all = kinds_of(&view, Winner::Kubernetes);
        assert_eq!(
            all,
            vec![
                (Side::Kube, Action::Edit),
                (Side::Kube, Action::Delete),
                (Side::Server, Action::Edit),
                (Side::Server, Action::Delete),
            ]
        );
        assert_eq!(kinds_of(&view, Winner::Server), all);
    }

    #[test]
    fn a_server_delete_waits_until_the_cr_is_recorded_in_the_servers_current_run() {
        // Finding 10: a mirror last recorded before a server restart; deleted on the server
        // before any operator saw it survive the restart, it may come back (R2).
        let before_restart = CrView {
            recorded_in_run: false,
            ..synced(3)
        };
        let view = SlotView {
            user: None,
            mirror: Some(before_restart.clone()),
            server: Some(Some(3)),
        };
        for winner in [Winner::Kubernetes, Winner::Server] {
            let got = kinds_of(&view, winner);
            assert!(!got.contains(&(Side::Server, Action::Delete)), "{winner:?}");
            // Edits are no removals: they go on.
            assert!(got.contains(&(Side::Server, Action::Edit)), "{winner:?}");
        }
        let from_server = SlotView {
            mirror: Some(CrView {
                finalizer: false,
                ..before_restart
            }),
            ..view.clone()
        };
        assert!(!in_mode(Mode::FromServer, &from_server).contains(&(Side::Server, Action::Delete)));
        // ToServer recreates a claimed object whatever the record: nothing to wait for.
        assert!(in_mode(Mode::ToServer, &view).contains(&(Side::Server, Action::Delete)));
        // Recorded again in the new run: allowed.
        let recorded = SlotView {
            mirror: Some(synced(3)),
            ..view
        };
        assert!(kinds_of(&recorded, Winner::Kubernetes).contains(&(Side::Server, Action::Delete)));
    }

    #[test]
    fn an_unsynced_cr_edit_blocks_server_writes_with_winner_kubernetes() {
        let view = SlotView {
            user: Some(CrView {
                synced_current: false,
                ..synced(3)
            }),
            mirror: None,
            server: Some(Some(2)),
        };
        let got = kinds_of(&view, Winner::Kubernetes);
        assert!(got.contains(&(Side::Kube, Action::Edit)));
        assert!(!got.contains(&(Side::Server, Action::Edit)));
        assert!(!got.contains(&(Side::Server, Action::Delete)));
        // With winner Server, a server edit wins whenever it lands; a removal still waits.
        let got = kinds_of(&view, Winner::Server);
        assert!(got.contains(&(Side::Server, Action::Edit)));
        assert!(!got.contains(&(Side::Server, Action::Delete)));
        assert!(!got.contains(&(Side::Kube, Action::Edit)));
    }

    #[test]
    fn no_server_edit_while_a_cr_deletion_waits_whatever_the_winner() {
        // Issue #20 (seed 202, winner Server): #133 cr delete, #147 server edit while every
        // operator connection was stalled; the deletion won, as the design says, and the oracle
        // had expected the server's edit with a mirror CR.
        for kind in [Kind::Cache, Kind::Schema, Kind::Task] {
            let view = SlotView {
                user: Some(CrView {
                    deleting: true,
                    ..synced(3)
                }),
                mirror: None,
                server: Some(Some(3)),
            };
            for winner in [Winner::Kubernetes, Winner::Server] {
                let got = allowed(kind, &view, winner);
                assert!(
                    !got.contains(&(Side::Server, Action::Edit)),
                    "{kind:?} {winner:?}: {got:?}"
                );
            }
            // Once the CR is gone, the server may change it again (a create, the object being
            // removed).
            let gone = SlotView { user: None, ..view };
            assert!(allowed(kind, &gone, Winner::Server).contains(&(Side::Server, Action::Edit)));
        }
    }

    #[test]
    fn deletes_of_crs_the_operator_never_synced_are_not_issued() {
        let fresh = CrView {
            finalizer: false,
            ever_synced: false,
            synced_current: false,
            ..synced(1)
        };
        let view = SlotView {
            user: Some(fresh.clone()),
            mirror: None,
            server: None,
        };
        assert!(!kinds_of(&view, Winner::Kubernetes).contains(&(Side::Kube, Action::Delete)));
        let with_finalizer = SlotView {
            user: Some(CrView {
                finalizer: true,
                ..fresh
            }),
            ..view
        };
        assert!(
            !kinds_of(&with_finalizer, Winner::Kubernetes).contains(&(Side::Kube, Action::Delete))
        );
    }

    #[test]
    fn a_user_cr_and_a_mirror_at_once_allow_no_delete_and_no_server_write() {
        let view = SlotView {
            user: Some(synced(1)),
            mirror: Some(synced(2)),
            server: Some(Some(2)),
        };
        assert_eq!(
            kinds_of(&view, Winner::Kubernetes),
            vec![(Side::Kube, Action::Edit)]
        );
    }

    #[test]
    fn a_mirror_may_be_replaced_by_a_user_cr_only_with_winner_kubernetes() {
        let view = SlotView {
            user: None,
            mirror: Some(synced(4)),
            server: Some(Some(4)),
        };
        assert!(kinds_of(&view, Winner::Kubernetes).contains(&(Side::Kube, Action::Create)));
        assert!(!kinds_of(&view, Winner::Server).contains(&(Side::Kube, Action::Create)));
    }

    #[test]
    fn immutable_kinds_get_no_server_edit() {
        let view = SlotView {
            user: Some(synced(3)),
            mirror: None,
            server: Some(Some(3)),
        };
        for kind in [Kind::Template, Kind::Counter] {
            assert!(
                !allowed(kind, &view, Winner::Kubernetes).contains(&(Side::Server, Action::Edit))
            );
        }
    }

    fn in_mode(mode: Mode, view: &SlotView) -> Vec<(Side, Action)> {
        // The winner plays no part outside Bidirectional mode.
        let got = allowed(Kind::Cache, view, Rules::new(mode, Winner::Kubernetes));
        assert_eq!(
            got,
            allowed(Kind::Cache, view, Rules::new(mode, Winner::Server)),
            "{mode:?}"
        );
        got
    }

    const EVERY: [(Side, Action); 6] = [
        (Side::Kube, Action::Create),
        (Side::Kube, Action::Edit),
        (Side::Kube, Action::Delete),
        (Side::Server, Action::Create),
        (Side::Server, Action::Edit),
        (Side::Server, Action::Delete),
    ];

    #[test]
    fn to_server_server_writes_wait_only_for_cr_deletions() {
        // An unpushed CR edit: the CR prevails over a server write, pushed first or not.
        let pending = SlotView {
            user: Some(CrView {
                synced_current: false,
                ..synced(3)
            }),
            mirror: None,
            server: Some(Some(2)),
        };
        let got = in_mode(Mode::ToServer, &pending);
        assert!(got.contains(&(Side::Server, Action::Edit)), "{got:?}");
        assert!(got.contains(&(Side::Server, Action::Delete)), "{got:?}");
        // A CR being deleted: the server object goes with it, or stays unmirrored.
        let deleting = SlotView {
            user: Some(CrView {
                deleting: true,
                ..synced(3)
            }),
            mirror: None,
            server: Some(Some(3)),
        };
        assert_eq!(in_mode(Mode::ToServer, &deleting), vec![]);
        let gone = SlotView {
            server: None,
            ..deleting
        };
        assert_eq!(in_mode(Mode::ToServer, &gone), vec![]);
        // A CR whose object was removed (recreation pending): a server create is reverted.
        let removed = SlotView {
            user: Some(synced(3)),
            mirror: None,
            server: None,
        };
        assert!(in_mode(Mode::ToServer, &removed).contains(&(Side::Server, Action::Create)));
    }

    #[test]
    fn to_server_reaches_every_operation() {
        // A synced object: every operation; a server object without CR: a CR adopts it, the
        // server edits and deletes it.
        let view = SlotView {
            user: Some(synced(3)),
            mirror: None,
            server: Some(Some(3)),
        };
        assert_eq!(
            in_mode(Mode::ToServer, &view),
            EVERY
                .into_iter()
                .filter(
                    |o| *o != (Side::Kube, Action::Create) && *o != (Side::Server, Action::Create)
                )
                .collect::<Vec<_>>()
        );
        let unmirrored = SlotView {
            user: None,
            mirror: None,
            server: Some(Some(3)),
        };
        assert_eq!(
            in_mode(Mode::ToServer, &unmirrored),
            vec![
                (Side::Kube, Action::Create),
                (Side::Server, Action::Edit),
                (Side::Server, Action::Delete)
            ]
        );
        assert_eq!(
            in_mode(Mode::ToServer, &SlotView::default()),
            vec![(Side::Kube, Action::Create), (Side::Server, Action::Create)]
        );
    }

    #[test]
    fn to_server_cr_deletes_need_the_finalizer_and_a_sync() {
        let fresh = SlotView {
            user: Some(CrView {
                finalizer: false,
                ever_synced: false,
                synced_current: false,
                ..synced(1)
            }),
            mirror: None,
            server: Some(Some(0)),
        };
        assert!(!in_mode(Mode::ToServer, &fresh).contains(&(Side::Kube, Action::Delete)));
    }

    fn mirror_from_server(v: Version) -> CrView {
        CrView {
            finalizer: false,
            ..synced(v)
        }
    }

    #[test]
    fn from_server_a_synced_mirror_allows_every_write_and_cr_deletes_need_no_finalizer() {
        let view = SlotView {
            user: None,
            mirror: Some(mirror_from_server(3)),
            server: Some(Some(3)),
        };
        assert_eq!(
            in_mode(Mode::FromServer, &view),
            EVERY
                .into_iter()
                .filter(|o| *o != (Side::Server, Action::Create))
                .collect::<Vec<_>>()
        );
        // Bidirectional mode would not delete a CR without the finalizer.
        assert!(!kinds_of(&view, Winner::Kubernetes).contains(&(Side::Kube, Action::Delete)));
    }

    #[test]
    fn from_server_waits_for_server_changes_to_reach_the_cr() {
        // The server changed after the CR's last sync (4 > 3): an edit of the CR, or the
        // object's removal, could land before or after the pull.
        let view = SlotView {
            user: Some(mirror_from_server(3)),
            mirror: None,
            server: Some(Some(4)),
        };
        let got = in_mode(Mode::FromServer, &view);
        assert!(!got.contains(&(Side::Kube, Action::Edit)), "{got:?}");
        assert!(!got.contains(&(Side::Server, Action::Delete)), "{got:?}");
        assert!(got.contains(&(Side::Server, Action::Edit)), "{got:?}");
        assert!(got.contains(&(Side::Kube, Action::Delete)), "{got:?}");
        // The CR was edited after the server's last change (5 > 4): read-only, nothing to
        // pull: edited again, and removed on the server.
        let read_only = SlotView {
            user: Some(CrView {
                synced_current: false,
                ..mirror_from_server(5)
            }),
            mirror: None,
            server: Some(Some(4)),
        };
        let got = in_mode(Mode::FromServer, &read_only);
        assert!(got.contains(&(Side::Kube, Action::Edit)), "{got:?}");
        assert!(got.contains(&(Side::Server, Action::Delete)), "{got:?}");
        // A user CR created over a server object, not yet synced: its adoption is pending.
        let adopting = SlotView {
            user: Some(CrView {
                ever_synced: false,
                synced_current: false,
                ..mirror_from_server(5)
            }),
            mirror: None,
            server: Some(Some(4)),
        };
        let got = in_mode(Mode::FromServer, &adopting);
        assert!(!got.contains(&(Side::Kube, Action::Edit)), "{got:?}");
        assert!(!got.contains(&(Side::Server, Action::Delete)), "{got:?}");
    }

    #[test]
    fn from_server_a_cr_without_server_object_allows_a_server_create() {
        // A read-only CR (or a mirror whose object was lost): edited, deleted, or given a
        // server object whose content it takes. No second user CR beside a mirror whose object
        // is gone (S3 pending).
        for (user, mirror) in [
            (Some(mirror_from_server(3)), None),
            (None, Some(mirror_from_server(3))),
        ] {
            let view = SlotView {
                user,
                mirror,
                server: None,
            };
            assert_eq!(
                in_mode(Mode::FromServer, &view),
                vec![
                    (Side::Kube, Action::Edit),
                    (Side::Kube, Action::Delete),
                    (Side::Server, Action::Create)
                ]
            );
        }
        assert_eq!(
            in_mode(Mode::FromServer, &SlotView::default()),
            vec![(Side::Kube, Action::Create), (Side::Server, Action::Create)]
        );
    }

    #[test]
    fn the_short_profile_runs_bidirectional_by_default() {
        assert_eq!(Profile::short(6).rules(), Rules::from(Winner::Kubernetes));
        assert_eq!(Profile::full(1).mode, Mode::Bidirectional);
    }

    #[test]
    fn the_schedule_has_every_fault_of_the_profile_in_order_and_in_range() {
        let profile = Profile::full(5);
        let mut rng = Rng::new(profile.seed);
        let plan = schedule(&mut rng, &profile);
        let count = |name: &str| plan.iter().filter(|s| s.fault.name() == name).count();
        assert_eq!(count("kill"), profile.kills);
        assert_eq!(count("cut"), profile.cuts);
        assert_eq!(count("stall"), profile.stalls);
        assert_eq!(count("server-restart"), profile.server_restarts);
        assert_eq!(count("server-wipe"), profile.server_wipes);
        assert_eq!(count("apiserver-restart"), profile.apiserver_restarts);
        assert!(plan.windows(2).all(|w| w[0].before_op <= w[1].before_op));
        assert!(plan.iter().all(|s| (50..=500).contains(&s.before_op)));
        // The same seed, the same schedule.
        assert_eq!(plan, schedule(&mut Rng::new(profile.seed), &profile));
    }

    #[test]
    fn only_the_full_profile_restarts_the_apiserver() {
        assert_eq!(Profile::short(6).apiserver_restarts, 0);
        assert_eq!(Profile::full(1).apiserver_restarts, 2);
        let profile = Profile::short(6);
        let plan = schedule(&mut Rng::new(profile.seed), &profile);
        assert!(
            plan.iter()
                .all(|s| !matches!(s.fault, Fault::ApiServerRestart { .. }))
        );
    }

    #[test]
    fn apiserver_restarts_are_drawn_after_every_other_fault() {
        // Adding API-server restarts to a profile leaves its other faults where they were:
        // the short profile's schedule is the one it had before they existed.
        for seed in 1..50 {
            let without = Profile {
                apiserver_restarts: 0,
                ..Profile::full(seed)
            };
            let with = Profile {
                apiserver_restarts: 3,
                ..Profile::full(seed)
            };
            let plan = schedule(&mut Rng::new(seed), &with);
            let others: Vec<Scheduled> = plan
                .iter()
                .filter(|s| !matches!(s.fault, Fault::ApiServerRestart { .. }))
                .copied()
                .collect();
            assert_eq!(
                others,
                schedule(&mut Rng::new(seed), &without),
                "seed {seed}"
            );
            let restarts: Vec<&Scheduled> = plan
                .iter()
                .filter(|s| matches!(s.fault, Fault::ApiServerRestart { .. }))
                .collect();
            assert_eq!(restarts.len(), 3);
            for s in restarts {
                let Fault::ApiServerRestart { down_secs } = s.fault else {
                    unreachable!()
                };
                assert!(down_secs <= 10, "down {down_secs} s");
                assert!((50..=500).contains(&s.before_op));
            }
        }
    }

    #[test]
    fn the_short_profile_keeps_its_schedule() {
        // Seed 6 of the short profile, as drawn before API-server restarts were added.
        let profile = Profile::short(6);
        let plan: Vec<String> = schedule(&mut Rng::new(6), &profile)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(plan, SHORT_SEED_6);
    }

    const SHORT_SEED_6: [&str; 7] = [
        "before #6: cut",
        "before #13: stall for 28 s",
        "before #18: server-restart",
        "before #23: cut",
        "before #26: cut",
        "before #39: kill -9, down for 1 ops",
        "before #49: kill -9, down for 2 ops",
    ];

    #[test]
    fn choose_within_keeps_to_the_reachable_side() {
        let slot = Slot {
            kind: Kind::Cache,
            index: 0,
        };
        let view = SlotView {
            user: Some(synced(3)),
            mirror: None,
            server: Some(Some(3)),
        };
        for (reach, side) in [
            (Reach::KubeOnly, Side::Kube),
            (Reach::ServerOnly, Side::Server),
        ] {
            let mut rng = Rng::new(7);
            let mut drawn = 0;
            for seq in 1..300 {
                if let Some(op) =
                    choose_within(&mut rng, seq, slot, &view, Winner::Kubernetes, reach)
                {
                    assert_eq!(op.side, side, "{reach:?}: {op}");
                    drawn += 1;
                }
            }
            assert!(drawn > 50, "{reach:?}: only {drawn} operations drawn");
        }
        // Both sides: exactly what `choose` draws.
        let (mut a, mut b) = (Rng::new(9), Rng::new(9));
        for seq in 1..100 {
            assert_eq!(
                choose_within(&mut a, seq, slot, &view, Winner::Kubernetes, Reach::Both),
                choose(&mut b, seq, slot, &view, Winner::Kubernetes)
            );
        }
    }

    #[test]
    fn kube_only_ignores_the_server() {
        // Nothing observed on the server side while it restarts: no CR, so a CR create.
        let view = SlotView {
            user: None,
            mirror: None,
            server: Some(Some(4)),
        };
        let slot = Slot {
            kind: Kind::Task,
            index: 1,
        };
        let mut rng = Rng::new(3);
        for seq in 1..100 {
            if let Some(op) =
                choose_within(&mut rng, seq, slot, &view, Winner::Server, Reach::KubeOnly)
            {
                assert_eq!((op.side, op.action), (Side::Kube, Action::Create));
            }
        }
    }

    #[test]
    fn server_only_gates_server_writes_on_the_crs_seen_last() {
        // An unsynced CR edit when the API server stopped: no server edit or delete (winner
        // Kubernetes), so nothing at all while it is down.
        let view = SlotView {
            user: Some(CrView {
                synced_current: false,
                ..synced(5)
            }),
            mirror: None,
            server: Some(Some(4)),
        };
        let slot = Slot {
            kind: Kind::Cache,
            index: 2,
        };
        let mut rng = Rng::new(11);
        for seq in 1..100 {
            assert_eq!(
                choose_within(
                    &mut rng,
                    seq,
                    slot,
                    &view,
                    Winner::Kubernetes,
                    Reach::ServerOnly
                ),
                None
            );
        }
    }

    #[test]
    fn choose_draws_only_allowed_operations() {
        let mut rng = Rng::new(1);
        let slot = Slot {
            kind: Kind::Counter,
            index: 0,
        };
        let view = SlotView {
            user: Some(synced(3)),
            mirror: None,
            server: Some(Some(3)),
        };
        for seq in 1..200 {
            let op = choose(&mut rng, seq, slot, &view, Winner::Kubernetes)
                .expect("an operation is allowed");
            assert_eq!(op.seq, seq);
            assert!(allowed(slot.kind, &view, Winner::Kubernetes).contains(&(op.side, op.action)));
        }
    }
}
