//! The oracle: from the ordered log of the operations the driver issued (and what each one
//! did), the state every object must end in once the operator has converged.
//!
//! The operations were gated ([`super::plan::allowed`]) so that each one's effect does not
//! depend on when the operator syncs; each rule below is a cell of design.md's outcome table
//! (Bidirectional mode) under that gating:
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
//!
//! Server restarts (state kept) and wipes are not in the log: the driver lets the run settle
//! first, then the rules say nothing changes. A restart loses the VOLATILE counters (all
//! counters of the run are volatile) and the operator recreates them from their CRs (R2); a
//! wipe loses everything and the CRs recreate it (R3); no CR is deleted in either case.

use std::collections::BTreeMap;

use super::model::{Slot, Version};
use super::plan::{Action, Op, Side, Winner};

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

/// The final state an object must reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    Absent,
    /// One CR claims it, Synced, with this version, and the server has it with this version.
    Present(Version),
}

/// The expected final state of every slot of `slots`, from `log` (in issue order).
pub fn expected(slots: &[Slot], log: &[Entry], winner: Winner) -> BTreeMap<Slot, Expect> {
    let mut state: BTreeMap<Slot, Expect> = slots.iter().map(|s| (*s, Expect::Absent)).collect();
    for entry in log {
        let op = entry.op;
        let now = state.entry(op.slot).or_insert(Expect::Absent);
        *now = next(*now, &op, &entry.outcome, winner);
    }
    state
}

fn next(now: Expect, op: &Op, outcome: &Outcome, winner: Winner) -> Expect {
    if *outcome != Outcome::Applied {
        return now;
    }
    match (op.side, op.action, op.version()) {
        (_, Action::Delete, _) => Expect::Absent,
        (Side::Kube, Action::Create, Some(v)) => match (winner, now) {
            (Winner::Server, Expect::Present(w)) => Expect::Present(w),
            _ => Expect::Present(v),
        },
        (_, Action::Create | Action::Edit, Some(v)) => Expect::Present(v),
        (_, Action::Create | Action::Edit, None) => now,
    }
}

/// The log lines of one slot, for reports.
pub fn history(log: &[Entry], slot: Slot) -> Vec<String> {
    log.iter()
        .filter(|e| e.op.slot == slot)
        .map(ToString::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use common_crds::ResourceKind as Kind;

    const SLOT: Slot = Slot {
        kind: Kind::Cache,
        index: 0,
    };

    fn entry(seq: u64, side: Side, action: Action, outcome: Outcome) -> Entry {
        Entry {
            op: Op {
                seq,
                slot: SLOT,
                side,
                action,
            },
            outcome,
            at_ms: seq * 10,
        }
    }

    fn applied(seq: u64, side: Side, action: Action) -> Entry {
        entry(seq, side, action, Outcome::Applied)
    }

    fn run(log: &[Entry], winner: Winner) -> Expect {
        expected(&[SLOT], log, winner)[&SLOT]
    }

    use Action::*;
    use Side::*;

    #[test]
    fn untouched_slots_are_absent() {
        assert_eq!(run(&[], Winner::Kubernetes), Expect::Absent);
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
    }

    #[test]
    fn refused_operations_change_nothing() {
        let log = [
            applied(1, Kube, Create),
            entry(2, Server, Create, Outcome::Refused("already exists".into())),
            entry(3, Server, Delete, Outcome::Refused("not found".into())),
        ];
        assert_eq!(run(&log, Winner::Kubernetes), Expect::Present(1));
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
        assert_eq!(history(&log, SLOT), vec!["#1 cr create v1 at 10 ms"]);
    }
}
