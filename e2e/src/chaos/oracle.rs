//! The oracle: from the ordered log of the operations the driver issued (and what each one
//! did), the state every object must end in once the operator has converged.
//!
//! The operations were gated ([`super::plan::allowed`]) so that each one's effect does not
//! depend on when the operator syncs; each rule below is a cell of design.md's outcome table
//! (Bidirectional mode) or of its table of sync modes (E3) under that gating. The oracle
//! follows, per slot, what the claiming CR holds and what the server holds; the two agree
//! except for a server object without CR (ToServer) and a CR that is not pushed (FromServer).
//!
//! ## Bidirectional
//!
//! | operation (applied) | expected afterwards | table cell |
//! |---|---|---|
//! | CR create `v` | `v`; with winner Server over a server object `w`: `w` | K1; never synced, both exist: adopt / `conflictWinner`; N2 user CR beats mirror |
//! | CR edit `v` | `v` (also when the object was removed on the server: recreated) | K2; C1 (winner Kubernetes); "edited / removed: unsynced edit wins" |
//! | CR edit that landed on a CR being deleted | unchanged (the deletion is in the log) | "deleted / *": the deletion wins |
//! | CR delete | absent | K3; "deleted / edited: deletion wins" |
//! | server create `v` | `v` | S1 |
//! | server edit `v` | `v` | S2; C1 (winner Server) |
//! | server delete | absent | S3 |
//! | refused (already exists, not found) | unchanged | |
//! | server restart, wipe | unchanged: lost objects are recreated from their CRs | R2, R3 |
//!
//! ## ToServer (GitOps: the CR prevails, `conflictWinner` plays no part)
//!
//! | operation (applied) | expected afterwards | table cell |
//! |---|---|---|
//! | CR create `v` | `v` (over a server object without CR too) | E3 "user CR created: pushed"; K1; never synced, both exist: the CR's content (reading, below) |
//! | CR edit `v` | `v` (also over a server change, or a removal not yet undone) | E3 "user CR edited: pushed"; K2; C1 and "edited / removed" with the CR prevailing |
//! | CR delete | absent | E3 "CR deleted: deleted on server"; K3; "deleted / *" |
//! | server create or edit `v`, no CR | the server has `v`, no CR claims it | E3 "server object without CR: ignored (not mirrored, never deleted)" |
//! | server create or edit, a CR claims it | unchanged (reverted from the CR) | E3 "server edit of a synced object: reverted from the CR" |
//! | server delete, no CR | absent | E3 "ignored" (nothing was mirrored) |
//! | server delete, a CR claims it | unchanged (recreated from the CR) | E3 "server removal of a synced object: recreated from the CR" |
//! | server restart | counters without CR gone; with a CR recreated | R2 |
//! | server wipe | everything without CR gone; with a CR recreated | R3 |
//!
//! ## FromServer (mirror: the server prevails, CRs get no finalizer, `conflictWinner` plays no part)
//!
//! | operation (applied) | expected afterwards | table cell |
//! |---|---|---|
//! | CR create `v`, the server has `w` | `w` (a mirror is replaced, N2, and the user CR takes the server's content) | never synced, both exist: the server's content (reading, below); N2 |
//! | CR create `v`, nothing on the server | the CR at `v`, `Ready=False, ReadOnlyMode`; nothing on the server | E3 "user CR created: not pushed: `ReadOnlyMode`" |
//! | CR edit `v` | the CR at `v`, `ReadOnlyMode`; the server unchanged | E3 "user CR edited: not pushed"; K2 not applied |
//! | CR edit of a CR whose server object was removed | absent | E3 "server removal: CR deleted"; "edited / removed": the removal wins (reading, below) |
//! | CR delete | nothing on the server changes: an object there gets its mirror CR again (its content), else absent | E3 "CR deleted: nothing on server (no finalizers added)" then "server object without CR: mirror CR created" (S1) |
//! | server create or edit `v` | `v` (also over a CR with an unpushed change, or one `ReadOnlyMode` without server object) | E3 "server object without CR: mirror CR created", "server edit: CR updated"; S1, S2; C1 with the server prevailing |
//! | server delete | absent | E3 "server removal of a synced object: CR deleted"; S3 |
//! | server restart | counters gone from the server; their CRs kept at their content, `ReadOnlyMode` | R2 ("never taken as deleted") with E3 (nothing pushed) |
//! | server wipe | everything gone from the server; every CR kept, `ReadOnlyMode` | R3 ("no CR is deleted") with E3 (nothing pushed) |
//!
//! Readings where design.md is not explicit (the operator's `decision.rs` makes the same
//! choices; the oracle takes them from design.md, not from the operator):
//!
//! - The outcome table is headed "Bidirectional mode" and `conflictWinner` is its C1 cell: in
//!   the other modes the mode's direction decides every conflict, including "never synced,
//!   both exist" (a user CR applied for an existing, different server object). ToServer: the
//!   CR is the truth ("pushed", "reverted from the CR"); FromServer: the server is, its CRs
//!   are "mirror"s and a user change is "not pushed".
//! - FromServer, "edited / removed": the cell's "unsynced edit wins: recreate" would push, which
//!   the mode never does: E3's "server removal of a synced object: CR deleted" applies (the
//!   CR was synced, then edited).
//! - FromServer, a CR deleted while the server keeps the object: "nothing on server", so the
//!   object is a server object without CR, which is mirrored: a new mirror CR appears with the
//!   server's content.
//! - FromServer, R2 and R3 ("recreated", "CRs recreate what is missing") would write to the
//!   server: the CR is kept (never taken as deleted, "no CR is deleted"), the object is not
//!   recreated, and the CR says `ReadOnlyMode` like any CR the mode does not push.
//!
//! Server restarts (state kept) and wipes come after the run settled (the driver checks it),
//! and are in `resets`. A restart loses the VOLATILE counters (all counters of the run are
//! volatile); a wipe loses everything.

use std::collections::BTreeMap;

use super::model::{Slot, Version};
use super::plan::{Action, Mode, Op, Rules, Side, Winner};

/// What an operation did, as the driver saw the answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Applied,
    /// A CR edit accepted by the API server on a CR that already had a deletion timestamp.
    OnTerminating,
    /// Refused, nothing changed (the reason: already exists, not found...).
    Refused(String),
}

/// One line of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub op: Op,
    pub outcome: Outcome,
    /// Milliseconds since the start of the run.
    pub at_ms: u64,
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {} ms", self.op, self.at_ms)?;
        match &self.outcome {
            Outcome::Applied => Ok(()),
            Outcome::OnTerminating => write!(f, " (on a CR being deleted)"),
            Outcome::Refused(why) => write!(f, " (refused: {why})"),
        }
    }
}

/// What the server loses when the driver restarts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reset {
    /// Stopped and started, state kept: the volatile objects (the run's counters) are gone.
    Restart,
    /// Stopped, state deleted, started: everything is gone.
    Wipe,
}

impl Reset {
    fn loses(self, slot: Slot) -> bool {
        match self {
            Reset::Restart => slot.kind == common_crds::ResourceKind::Counter,
            Reset::Wipe => true,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Reset::Restart => "server restart",
            Reset::Wipe => "server wipe",
        }
    }
}

/// A reset and where it happened: after the first `after` entries of the log.
pub type LoggedReset = (usize, Reset);

/// The final state an object must reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    Absent,
    /// One CR claims it, Synced, with this version, and the server has it with this version.
    Present(Version),
    /// ToServer: the server has it with this version, no CR claims it.
    Unmirrored(Version),
    /// FromServer: one CR claims it with version `cr`, `Ready=False, ReadOnlyMode`; the server
    /// has `server` (nothing when `None`).
    ReadOnly {
        cr: Version,
        server: Option<Version>,
    },
}

/// What the claiming CR and the server hold (`None`: no CR, no server object).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct State {
    cr: Option<Version>,
    server: Option<Version>,
}

impl State {
    fn both(v: Version) -> Self {
        Self {
            cr: Some(v),
            server: Some(v),
        }
    }

    fn expect(self) -> Expect {
        match (self.cr, self.server) {
            (None, None) => Expect::Absent,
            (Some(c), Some(s)) if c == s => Expect::Present(c),
            (None, Some(s)) => Expect::Unmirrored(s),
            (Some(cr), server) => Expect::ReadOnly { cr, server },
        }
    }
}

/// The expected final state of every slot of `slots`, from `log` (in issue order) and the
/// server's `resets`, under `rules` (a [`Winner`] alone: Bidirectional mode).
pub fn expected(
    slots: &[Slot],
    log: &[Entry],
    resets: &[LoggedReset],
    rules: impl Into<Rules>,
) -> BTreeMap<Slot, Expect> {
    let rules = rules.into();
    let mut state: BTreeMap<Slot, State> = slots.iter().map(|s| (*s, State::default())).collect();
    let reset_all = |state: &mut BTreeMap<Slot, State>, reset: Reset| {
        for (slot, now) in state.iter_mut() {
            if reset.loses(*slot) {
                *now = after_reset(*now, rules.mode);
            }
        }
    };
    for (at, entry) in log.iter().enumerate() {
        for (_, reset) in resets.iter().filter(|(after, _)| *after == at) {
            reset_all(&mut state, *reset);
        }
        let op = entry.op;
        let now = state.entry(op.slot).or_default();
        if entry.outcome == Outcome::Applied {
            *now = next(*now, &op, rules);
        }
    }
    for (_, reset) in resets.iter().filter(|(after, _)| *after >= log.len()) {
        reset_all(&mut state, *reset);
    }
    state.into_iter().map(|(s, st)| (s, st.expect())).collect()
}

/// An applied operation's effect.
fn next(now: State, op: &Op, rules: Rules) -> State {
    let v = op.version();
    match rules.mode {
        Mode::Bidirectional => match (op.side, op.action, v) {
            (_, Action::Delete, _) => State::default(),
            (Side::Kube, Action::Create, Some(v)) => match (rules.winner, now.server) {
                (Winner::Server, Some(w)) => State::both(w),
                _ => State::both(v),
            },
            (_, Action::Create | Action::Edit, Some(v)) => State::both(v),
            (_, Action::Create | Action::Edit, None) => now,
        },
        Mode::ToServer => match (op.side, op.action, v) {
            (Side::Kube, Action::Delete, _) => State::default(),
            (Side::Kube, Action::Create | Action::Edit, Some(v)) => State::both(v),
            // A CR claims it: reverted, or recreated, from the CR.
            (Side::Server, _, _) if now.cr.is_some() => now,
            (Side::Server, Action::Delete, _) => State::default(),
            (Side::Server, Action::Create | Action::Edit, Some(v)) => State {
                cr: None,
                server: Some(v),
            },
            (_, Action::Create | Action::Edit, None) => now,
        },
        Mode::FromServer => match (op.side, op.action, v) {
            (Side::Kube, Action::Create, Some(v)) => match now.server {
                Some(w) => State::both(w),
                None => State {
                    cr: Some(v),
                    server: None,
                },
            },
            // The CR was on its way out (its server object removed): it goes all the same.
            (Side::Kube, Action::Edit, Some(_)) if now.cr.is_none() => now,
            (Side::Kube, Action::Edit, Some(v)) => State {
                cr: Some(v),
                server: now.server,
            },
            // Nothing on the server; what it has is mirrored again.
            (Side::Kube, Action::Delete, _) => State {
                cr: now.server,
                server: now.server,
            },
            (Side::Server, Action::Create | Action::Edit, Some(v)) => State::both(v),
            (Side::Server, Action::Delete, _) => State::default(),
            (_, Action::Create | Action::Edit, None) => now,
        },
    }
}

/// A slot whose server object a reset lost: recreated from its CR where the mode pushes (none:
/// nothing), the CR kept where it does not.
fn after_reset(now: State, mode: Mode) -> State {
    match mode {
        Mode::Bidirectional | Mode::ToServer => State {
            cr: now.cr,
            server: now.cr,
        },
        Mode::FromServer => State {
            cr: now.cr,
            server: None,
        },
    }
}

/// The log lines of one slot, with the resets that lost its object, for reports.
pub fn history(log: &[Entry], resets: &[LoggedReset], slot: Slot) -> Vec<String> {
    let reset_lines = |at: usize| {
        resets
            .iter()
            .filter(move |(after, reset)| *after == at && reset.loses(slot))
            .map(|(_, reset)| reset.name().to_string())
    };
    let mut out: Vec<String> = Vec::new();
    for (at, entry) in log.iter().enumerate() {
        out.extend(reset_lines(at));
        if entry.op.slot == slot {
            out.push(entry.to_string());
        }
    }
    for at in log.len()..=resets.iter().map(|r| r.0).max().unwrap_or(0) {
        out.extend(reset_lines(at));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use common_crds::ResourceKind as Kind;

    const SLOT: Slot = Slot {
        kind: Kind::Cache,
        index: 0,
    };
    const COUNTER: Slot = Slot {
        kind: Kind::Counter,
        index: 0,
    };

    fn entry_on(slot: Slot, seq: u64, side: Side, action: Action, outcome: Outcome) -> Entry {
        Entry {
            op: Op {
                seq,
                slot,
                side,
                action,
            },
            outcome,
            at_ms: seq * 10,
        }
    }

    fn entry(seq: u64, side: Side, action: Action, outcome: Outcome) -> Entry {
        entry_on(SLOT, seq, side, action, outcome)
    }

    fn applied(seq: u64, side: Side, action: Action) -> Entry {
        entry(seq, side, action, Outcome::Applied)
    }

    fn run(log: &[Entry], rules: impl Into<Rules>) -> Expect {
        expected(&[SLOT], log, &[], rules)[&SLOT]
    }

    fn in_mode(mode: Mode, log: &[Entry]) -> Expect {
        // The winner plays no part outside Bidirectional mode: both must agree.
        let k = run(log, Rules::new(mode, Winner::Kubernetes));
        let s = run(log, Rules::new(mode, Winner::Server));
        assert_eq!(k, s, "{mode:?}: the winner changed the outcome");
        k
    }

    const TO: Mode = Mode::ToServer;
    const FROM: Mode = Mode::FromServer;

    use Action::*;
    use Side::*;

    #[test]
    fn untouched_slots_are_absent() {
        assert_eq!(run(&[], Winner::Kubernetes), Expect::Absent);
        assert_eq!(in_mode(TO, &[]), Expect::Absent);
        assert_eq!(in_mode(FROM, &[]), Expect::Absent);
    }

    #[test]
    fn the_last_applied_write_wins_under_the_gating() {
        let log = [
            applied(1, Kube, Create),
            applied(2, Server, Edit),
            applied(3, Kube, Edit),
        ];
        assert_eq!(run(&log, Winner::Kubernetes), Expect::Present(3));
        let log = [applied(1, Server, Create), applied(2, Server, Edit)];
        assert_eq!(run(&log, Winner::Kubernetes), Expect::Present(2));
    }

    #[test]
    fn deletions_on_either_side_leave_nothing() {
        for side in [Kube, Server] {
            let log = [applied(1, Kube, Create), applied(2, side, Delete)];
            assert_eq!(run(&log, Winner::Kubernetes), Expect::Absent);
        }
    }

    #[test]
    fn an_edit_after_a_removal_on_the_server_recreates() {
        // "edited / removed (positive): unsynced edit wins: recreate".
        let log = [
            applied(1, Server, Create),
            applied(2, Server, Delete),
            applied(3, Kube, Edit),
        ];
        assert_eq!(run(&log, Winner::Kubernetes), Expect::Present(3));
    }

    #[test]
    fn an_edit_of_a_cr_being_deleted_changes_nothing() {
        let log = [
            applied(1, Kube, Create),
            applied(2, Kube, Delete),
            entry(3, Kube, Edit, Outcome::OnTerminating),
        ];
        assert_eq!(run(&log, Winner::Kubernetes), Expect::Absent);
        assert_eq!(in_mode(TO, &log), Expect::Absent);
    }

    #[test]
    fn refused_operations_change_nothing() {
        let log = [
            applied(1, Kube, Create),
            entry(2, Server, Create, Outcome::Refused("already exists".into())),
            entry(3, Server, Delete, Outcome::Refused("not found".into())),
        ];
        assert_eq!(run(&log, Winner::Kubernetes), Expect::Present(1));
        assert_eq!(in_mode(TO, &log), Expect::Present(1));
        assert_eq!(
            in_mode(FROM, &log),
            Expect::ReadOnly {
                cr: 1,
                server: None
            }
        );
    }

    #[test]
    fn adoption_follows_the_winner() {
        let log = [applied(1, Server, Create), applied(2, Kube, Create)];
        assert_eq!(run(&log, Winner::Kubernetes), Expect::Present(2));
        assert_eq!(run(&log, Winner::Server), Expect::Present(1));
        // Nothing on the server: the CR's content, whoever wins.
        let log = [applied(1, Kube, Create)];
        assert_eq!(run(&log, Winner::Server), Expect::Present(1));
    }

    #[test]
    fn bidirectional_resets_change_nothing() {
        // R2, R3: what the server lost is recreated from the CRs.
        let log = [
            entry_on(COUNTER, 1, Kube, Create, Outcome::Applied),
            applied(2, Server, Create),
        ];
        for reset in [Reset::Restart, Reset::Wipe] {
            let got = expected(&[SLOT, COUNTER], &log, &[(2, reset)], Winner::Kubernetes);
            assert_eq!(got[&COUNTER], Expect::Present(1), "{reset:?}");
            assert_eq!(got[&SLOT], Expect::Present(2), "{reset:?}");
        }
    }

    // ---- ToServer ----------------------------------------------------------------------------

    #[test]
    fn to_server_cr_creates_and_edits_are_pushed_over_anything() {
        // E3 "user CR created/edited: pushed"; never synced, both exist: the CR, even with
        // conflictWinner Server (in_mode checks both winners).
        let log = [applied(1, Server, Create), applied(2, Kube, Create)];
        assert_eq!(in_mode(TO, &log), Expect::Present(2));
        let log = [
            applied(1, Kube, Create),
            applied(2, Server, Edit),
            applied(3, Kube, Edit),
        ];
        assert_eq!(in_mode(TO, &log), Expect::Present(3));
        // "edited / removed": recreated from the CR.
        let log = [
            applied(1, Kube, Create),
            applied(2, Server, Delete),
            applied(3, Kube, Edit),
        ];
        assert_eq!(in_mode(TO, &log), Expect::Present(3));
    }

    #[test]
    fn to_server_ignores_server_objects_without_cr() {
        // E3 "server object without CR: ignored (not mirrored, never deleted)".
        let log = [applied(1, Server, Create)];
        assert_eq!(in_mode(TO, &log), Expect::Unmirrored(1));
        let log = [applied(1, Server, Create), applied(2, Server, Edit)];
        assert_eq!(in_mode(TO, &log), Expect::Unmirrored(2));
        let log = [applied(1, Server, Create), applied(2, Server, Delete)];
        assert_eq!(in_mode(TO, &log), Expect::Absent);
    }

    #[test]
    fn to_server_reverts_server_edits_of_an_object_with_a_cr() {
        // E3 "server edit of a synced object: reverted from the CR".
        let log = [applied(1, Kube, Create), applied(2, Server, Edit)];
        assert_eq!(in_mode(TO, &log), Expect::Present(1));
        // A server create over a CR whose object is gone: the CR's content too.
        let log = [
            applied(1, Kube, Create),
            applied(2, Server, Delete),
            applied(3, Server, Create),
        ];
        assert_eq!(in_mode(TO, &log), Expect::Present(1));
    }

    #[test]
    fn to_server_recreates_objects_removed_on_the_server() {
        // E3 "server removal of a synced object: recreated from the CR".
        let log = [applied(1, Kube, Create), applied(2, Server, Delete)];
        assert_eq!(in_mode(TO, &log), Expect::Present(1));
    }

    #[test]
    fn to_server_cr_deletes_delete_on_the_server() {
        // E3 "CR deleted: deleted on server", also for an object the CR adopted.
        let log = [applied(1, Kube, Create), applied(2, Kube, Delete)];
        assert_eq!(in_mode(TO, &log), Expect::Absent);
        let log = [
            applied(1, Server, Create),
            applied(2, Kube, Create),
            applied(3, Kube, Delete),
        ];
        assert_eq!(in_mode(TO, &log), Expect::Absent);
    }

    #[test]
    fn to_server_resets_lose_only_objects_without_cr() {
        // R2, R3 for objects with a CR; an object without CR is not the operator's.
        let log = [
            entry_on(COUNTER, 1, Server, Create, Outcome::Applied),
            applied(2, Server, Create),
        ];
        let rules = Rules::new(TO, Winner::Kubernetes);
        let got = expected(&[SLOT, COUNTER], &log, &[(2, Reset::Restart)], rules);
        assert_eq!(got[&COUNTER], Expect::Absent, "a volatile counter");
        assert_eq!(got[&SLOT], Expect::Unmirrored(2), "a persistent cache");
        let got = expected(&[SLOT, COUNTER], &log, &[(2, Reset::Wipe)], rules);
        assert_eq!(got[&SLOT], Expect::Absent);
        let log = [
            entry_on(COUNTER, 1, Kube, Create, Outcome::Applied),
            applied(2, Kube, Create),
        ];
        for reset in [Reset::Restart, Reset::Wipe] {
            let got = expected(&[SLOT, COUNTER], &log, &[(2, reset)], rules);
            assert_eq!(got[&COUNTER], Expect::Present(1), "{reset:?}");
            assert_eq!(got[&SLOT], Expect::Present(2), "{reset:?}");
        }
    }

    // ---- FromServer --------------------------------------------------------------------------

    #[test]
    fn from_server_a_cr_without_server_object_is_read_only() {
        // E3 "user CR created: not pushed: ReadOnlyMode".
        let log = [applied(1, Kube, Create)];
        let ro = Expect::ReadOnly {
            cr: 1,
            server: None,
        };
        assert_eq!(in_mode(FROM, &log), ro);
    }

    #[test]
    fn from_server_a_cr_created_over_a_server_object_takes_its_content() {
        // Never synced, both exist: the server's content (whatever conflictWinner says).
        let log = [applied(1, Server, Create), applied(2, Kube, Create)];
        assert_eq!(in_mode(FROM, &log), Expect::Present(1));
    }

    #[test]
    fn from_server_cr_edits_are_not_pushed() {
        // E3 "user CR edited: not pushed: ReadOnlyMode".
        let log = [applied(1, Server, Create), applied(2, Kube, Edit)];
        let ro = Expect::ReadOnly {
            cr: 2,
            server: Some(1),
        };
        assert_eq!(in_mode(FROM, &log), ro);
        let log = [applied(1, Kube, Create), applied(2, Kube, Edit)];
        let ro = Expect::ReadOnly {
            cr: 2,
            server: None,
        };
        assert_eq!(in_mode(FROM, &log), ro);
    }

    #[test]
    fn from_server_an_edit_does_not_save_a_cr_whose_object_was_removed() {
        // "edited / removed": no recreation in FromServer; the removal deletes the CR.
        let log = [
            applied(1, Server, Create),
            applied(2, Server, Delete),
            applied(3, Kube, Edit),
        ];
        assert_eq!(in_mode(FROM, &log), Expect::Absent);
    }

    #[test]
    fn from_server_cr_deletes_leave_the_server_object_which_is_mirrored_again() {
        // E3 "CR deleted: nothing on server", then "server object without CR: mirror CR".
        let log = [
            applied(1, Server, Create),
            applied(2, Kube, Edit),
            applied(3, Kube, Delete),
        ];
        assert_eq!(in_mode(FROM, &log), Expect::Present(1));
        let log = [applied(1, Kube, Create), applied(2, Kube, Delete)];
        assert_eq!(in_mode(FROM, &log), Expect::Absent);
    }

    #[test]
    fn from_server_server_writes_reach_the_cr() {
        // E3 "server object without CR: mirror CR created", "server edit: CR updated", also
        // over an unpushed CR edit (the server prevails) or a read-only CR.
        let log = [applied(1, Server, Create)];
        assert_eq!(in_mode(FROM, &log), Expect::Present(1));
        let log = [
            applied(1, Server, Create),
            applied(2, Kube, Edit),
            applied(3, Server, Edit),
        ];
        assert_eq!(in_mode(FROM, &log), Expect::Present(3));
        let log = [applied(1, Kube, Create), applied(2, Server, Create)];
        assert_eq!(in_mode(FROM, &log), Expect::Present(2));
    }

    #[test]
    fn from_server_server_removals_delete_the_cr() {
        // E3 "server removal of a synced object: CR deleted", an unpushed edit or not.
        let log = [applied(1, Server, Create), applied(2, Server, Delete)];
        assert_eq!(in_mode(FROM, &log), Expect::Absent);
        let log = [
            applied(1, Server, Create),
            applied(2, Kube, Edit),
            applied(3, Server, Delete),
        ];
        assert_eq!(in_mode(FROM, &log), Expect::Absent);
    }

    #[test]
    fn from_server_resets_keep_the_crs_without_recreating() {
        // R2/R3 ("never taken as deleted", "no CR is deleted") without a push.
        let log = [
            entry_on(COUNTER, 1, Server, Create, Outcome::Applied),
            applied(2, Server, Create),
        ];
        let rules = Rules::new(FROM, Winner::Kubernetes);
        let got = expected(&[SLOT, COUNTER], &log, &[(2, Reset::Restart)], rules);
        let lost = |v| Expect::ReadOnly {
            cr: v,
            server: None,
        };
        assert_eq!(got[&COUNTER], lost(1));
        assert_eq!(
            got[&SLOT],
            Expect::Present(2),
            "a persistent cache survives"
        );
        let got = expected(&[SLOT, COUNTER], &log, &[(2, Reset::Wipe)], rules);
        assert_eq!(got[&COUNTER], lost(1));
        assert_eq!(got[&SLOT], lost(2));
        // The reset comes where it happened: a later server create is mirrored.
        let mut later = log.to_vec();
        later.push(entry_on(COUNTER, 3, Server, Create, Outcome::Applied));
        let got = expected(&[SLOT, COUNTER], &later, &[(2, Reset::Restart)], rules);
        assert_eq!(got[&COUNTER], Expect::Present(3));
        let got = expected(&[SLOT, COUNTER], &later, &[(3, Reset::Restart)], rules);
        assert_eq!(got[&COUNTER], lost(3));
    }

    #[test]
    fn history_lists_one_slot() {
        let other = Slot {
            kind: Kind::Task,
            index: 0,
        };
        let mut log = vec![applied(1, Kube, Create)];
        log.push(Entry {
            op: Op {
                seq: 2,
                slot: other,
                side: Server,
                action: Create,
            },
            outcome: Outcome::Applied,
            at_ms: 5,
        });
        assert_eq!(history(&log, &[], SLOT), vec!["#1 cr create v1 at 10 ms"]);
        // With the resets that lost its object (a restart loses only counters).
        let resets = [(1, Reset::Restart), (2, Reset::Wipe)];
        assert_eq!(
            history(&log, &resets, SLOT),
            vec!["#1 cr create v1 at 10 ms", "server wipe"]
        );
        let counter_log = [entry_on(COUNTER, 1, Kube, Create, Outcome::Applied)];
        assert_eq!(
            history(&counter_log, &[(0, Reset::Restart)], COUNTER),
            vec!["server restart", "#1 cr create v1 at 10 ms"]
        );
    }
}
