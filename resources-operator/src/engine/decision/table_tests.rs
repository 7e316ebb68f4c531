//! Table-driven tests of [`decide`]: every cell of the outcome table and the never-synced cases,
//! in every mode with both winners; then pause, unmanaged, Retain, immutable kinds, claims,
//! internal objects, dependencies, capabilities, the unreachable server and the Events.

use super::*;

const EPOCH: &str = "epoch-1";
const OTHER_EPOCH: &str = "epoch-2";
const SYNCED_GENERATION: i64 = 3;
const SYNCED_DIGEST: &str = "digest-synced";

const MODES: [SyncMode; 3] = [
    SyncMode::Bidirectional,
    SyncMode::ToServer,
    SyncMode::FromServer,
];
const WINNERS: [ConflictWinner; 2] = [ConflictWinner::Kubernetes, ConflictWinner::Server];

/// The CR side of a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cr {
    /// No CR.
    None,
    /// Synced, not edited since ("same as L").
    SameAsL,
    /// Synced, edited since.
    Edited,
    /// Synced, not edited, being deleted.
    Deleted,
    /// A user CR never synced.
    NeverSynced,
    /// A user CR never synced, being deleted.
    DeletedNeverSynced,
    /// A mirror CR whose first status write was lost.
    MirrorUnrecorded,
    /// The same, edited by a user since.
    MirrorUnrecordedEdited,
}

/// The server side of a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Srv {
    /// Present, as last synced.
    SameAsL,
    /// Present, changed since the last sync.
    Edited,
    /// Present, with the digest of the last sync, yet different from the CR (the comparison
    /// changed).
    SameDigestButDifferent,
    /// Present, as last synced, in a new epoch (restored from a backup).
    SameAsLNewEpoch,
    /// Present and semantically equal to the CR (not to L).
    EqualToCr,
    /// Present and different from the CR (for CRs without L).
    DifferentFromCr,
    /// Positively removed in the current epoch.
    Removed,
    /// Absent, the epoch changed since the last sync.
    Wiped,
    /// Absent without proof of removal (volatile object lost in a restart, never existed).
    Missing,
    /// Unreachable.
    Unreachable,
}

fn recorded() -> LastSynced {
    LastSynced {
        digest: SYNCED_DIGEST.to_string(),
        generation: SYNCED_GENERATION,
        epoch: EPOCH.to_string(),
    }
}

fn cr_view(cr: Cr) -> Option<CrView> {
    let view = |generation, deleting, origin, last_synced| CrView {
        generation,
        deleting,
        has_finalizer: true,
        managed: true,
        paused: false,
        origin,
        deletion_policy: DeletionPolicy::Delete,
        update_strategy: UpdateStrategy::Retain,
        last_synced,
        claim: Claim::Owner,
    };
    let synced = Some(recorded());
    match cr {
        Cr::None => None,
        Cr::SameAsL => Some(view(SYNCED_GENERATION, false, Origin::Kubernetes, synced)),
        Cr::Edited => Some(view(
            SYNCED_GENERATION + 1,
            false,
            Origin::Kubernetes,
            synced,
        )),
        Cr::Deleted => Some(view(SYNCED_GENERATION, true, Origin::Kubernetes, synced)),
        Cr::NeverSynced => Some(view(1, false, Origin::Kubernetes, None)),
        Cr::DeletedNeverSynced => Some(view(1, true, Origin::Kubernetes, None)),
        Cr::MirrorUnrecorded => Some(view(1, false, Origin::Server, None)),
        Cr::MirrorUnrecordedEdited => Some(view(2, false, Origin::Server, None)),
    }
}

fn present(digest: &str) -> ServerView {
    ServerView::Present(ServerObject {
        digest: digest.to_string(),
        defined_statically: false,
    })
}

/// The observation of a cell, in a mode with a winner.
fn observe(cr: Cr, srv: Srv, mode: SyncMode, winner: ConflictWinner) -> Observation {
    let (server, epoch) = match srv {
        Srv::SameAsL | Srv::SameDigestButDifferent => (present(SYNCED_DIGEST), EPOCH),
        Srv::SameAsLNewEpoch => (present(SYNCED_DIGEST), OTHER_EPOCH),
        Srv::Edited => (present("digest-server-edit"), EPOCH),
        Srv::EqualToCr => (present("digest-equal-to-cr"), EPOCH),
        Srv::DifferentFromCr => (present("digest-other"), EPOCH),
        Srv::Removed => (ServerView::Absent(Absence::Removed), EPOCH),
        Srv::Wiped => (ServerView::Absent(Absence::Missing), OTHER_EPOCH),
        Srv::Missing => (ServerView::Absent(Absence::Missing), EPOCH),
        Srv::Unreachable => (ServerView::Unreachable, EPOCH),
    };
    let cr_same_as_l = matches!(cr, Cr::SameAsL | Cr::Deleted);
    let equal = match srv {
        Srv::EqualToCr => true,
        Srv::SameAsL | Srv::SameAsLNewEpoch => cr_same_as_l,
        Srv::Edited
        | Srv::SameDigestButDifferent
        | Srv::DifferentFromCr
        | Srv::Removed
        | Srv::Wiped
        | Srv::Missing
        | Srv::Unreachable => false,
    };
    Observation {
        cr: cr_view(cr),
        server,
        server_epoch: epoch.to_string(),
        comparison: if equal {
            Comparison::Equal
        } else {
            Comparison::Different { in_place: true }
        },
        internal: false,
        dependencies: Dependencies::default(),
        mode,
        winner,
        caps: KindCapabilities {
            update_in_place: true,
            create: true,
            delete: true,
        },
    }
}

/// An expected action and `Ready` reason (`None`: no status write).
type Expect = (Action, Option<Reason>);

struct Row {
    cr: Cr,
    srv: Srv,
    bidirectional_kubernetes: Expect,
    bidirectional_server: Expect,
    to_server: Expect,
    from_server: Expect,
}

impl Row {
    fn expect(&self, mode: SyncMode, winner: ConflictWinner) -> Expect {
        match (mode, winner) {
            (SyncMode::Bidirectional, ConflictWinner::Kubernetes) => self.bidirectional_kubernetes,
            (SyncMode::Bidirectional, ConflictWinner::Server) => self.bidirectional_server,
            (SyncMode::ToServer, _) => self.to_server,
            (SyncMode::FromServer, _) => self.from_server,
        }
    }
}

/// A row whose Bidirectional outcome does not depend on the winner.
fn row(cr: Cr, srv: Srv, bidirectional: Expect, to_server: Expect, from_server: Expect) -> Row {
    Row {
        cr,
        srv,
        bidirectional_kubernetes: bidirectional,
        bidirectional_server: bidirectional,
        to_server,
        from_server,
    }
}

/// A row whose Bidirectional outcome is the winner's.
fn conflict_row(cr: Cr, srv: Srv, kubernetes: Expect, server: Expect) -> Row {
    Row {
        cr,
        srv,
        bidirectional_kubernetes: kubernetes,
        bidirectional_server: server,
        to_server: kubernetes,
        from_server: server,
    }
}

const SYNCED: Option<Reason> = Some(Reason::Synced);
const READ_ONLY: Option<Reason> = Some(Reason::ReadOnlyMode);
const UNAVAILABLE: Option<Reason> = Some(Reason::ServerUnavailable);
const NOTHING_SYNCED: Expect = (Action::Nothing, SYNCED);
const NOTHING: Expect = (Action::Nothing, None);
const PUSH: Expect = (Action::UpdateServer, SYNCED);
const PULL: Expect = (Action::UpdateCrSpecFromServer, SYNCED);
const CREATE: Expect = (Action::CreateOnServer, SYNCED);
const RECORD: Expect = (Action::RecordSynced, SYNCED);
const DELETE_CR: Expect = (Action::DeleteCr, None);
const DELETE_ON_SERVER: Expect = (Action::DeleteOnServer, None);
const RELEASE: Expect = (Action::ReleaseFinalizer, None);
const READ_ONLY_NOTHING: Expect = (Action::Nothing, READ_ONLY);
const WAIT_FOR_SERVER: Expect = (Action::Wait(WaitFor::Server), UNAVAILABLE);

/// The outcome table of design.md, its never-synced cases, R2, the unreachable server and the
/// crash-safety cases, with the outcome in each mode.
fn outcome_table() -> Vec<Row> {
    use Cr as C;
    use Srv as S;
    vec![
        // Row "CR same as L".
        row(
            C::SameAsL,
            S::SameAsL,
            NOTHING_SYNCED,
            NOTHING_SYNCED,
            NOTHING_SYNCED,
        ),
        row(C::SameAsL, S::Edited, PULL, PUSH, PULL), // S2; ToServer reverts.
        row(C::SameAsL, S::Removed, DELETE_CR, CREATE, DELETE_CR), // S3; ToServer recreates.
        row(C::SameAsL, S::Wiped, CREATE, CREATE, READ_ONLY_NOTHING), // R3.
        row(C::SameAsL, S::Missing, CREATE, CREATE, READ_ONLY_NOTHING), // R2 (volatile).
        // Row "CR edited".
        row(C::Edited, S::SameAsL, PUSH, PUSH, READ_ONLY_NOTHING), // K2.
        conflict_row(C::Edited, S::Edited, PUSH, PULL),            // C1.
        row(C::Edited, S::Removed, CREATE, CREATE, DELETE_CR),     // Unsynced edit wins.
        row(C::Edited, S::Wiped, CREATE, CREATE, READ_ONLY_NOTHING),
        row(C::Edited, S::Missing, CREATE, CREATE, READ_ONLY_NOTHING),
        // Row "CR deleted".
        row(
            C::Deleted,
            S::SameAsL,
            DELETE_ON_SERVER,
            DELETE_ON_SERVER,
            RELEASE,
        ), // K3.
        row(
            C::Deleted,
            S::Edited,
            DELETE_ON_SERVER,
            DELETE_ON_SERVER,
            RELEASE,
        ), // Deletion wins.
        row(C::Deleted, S::Removed, RELEASE, RELEASE, RELEASE),
        row(C::Deleted, S::Wiped, RELEASE, RELEASE, RELEASE),
        row(C::Deleted, S::Missing, RELEASE, RELEASE, RELEASE),
        // Never synced.
        row(
            C::NeverSynced,
            S::Missing,
            CREATE,
            CREATE,
            READ_ONLY_NOTHING,
        ), // K1.
        row(
            C::NeverSynced,
            S::Removed,
            CREATE,
            CREATE,
            READ_ONLY_NOTHING,
        ),
        row(
            C::None,
            S::SameAsL,
            (
                Action::CreateMirrorCr {
                    with_finalizer: true,
                },
                SYNCED,
            ), // S1.
            NOTHING,
            (
                Action::CreateMirrorCr {
                    with_finalizer: false,
                },
                SYNCED,
            ),
        ),
        row(C::NeverSynced, S::EqualToCr, RECORD, RECORD, RECORD), // Adopt.
        conflict_row(C::NeverSynced, S::DifferentFromCr, PUSH, PULL),
        row(
            C::DeletedNeverSynced,
            S::DifferentFromCr,
            DELETE_ON_SERVER,
            DELETE_ON_SERVER,
            RELEASE,
        ),
        row(C::DeletedNeverSynced, S::Missing, RELEASE, RELEASE, RELEASE),
        row(C::None, S::Missing, NOTHING, NOTHING, NOTHING),
        row(C::None, S::Removed, NOTHING, NOTHING, NOTHING),
        row(C::None, S::Wiped, NOTHING, NOTHING, NOTHING),
        // Crash safety: a write done, its record not.
        row(C::Edited, S::EqualToCr, RECORD, RECORD, RECORD),
        row(C::SameAsL, S::SameAsLNewEpoch, RECORD, RECORD, RECORD),
        row(C::Edited, S::SameAsLNewEpoch, PUSH, PUSH, READ_ONLY_NOTHING),
        row(C::MirrorUnrecorded, S::EqualToCr, RECORD, RECORD, RECORD),
        row(C::MirrorUnrecorded, S::DifferentFromCr, PULL, PUSH, PULL),
        conflict_row(C::MirrorUnrecordedEdited, S::DifferentFromCr, PUSH, PULL),
        row(
            C::MirrorUnrecorded,
            S::Removed,
            DELETE_CR,
            CREATE,
            DELETE_CR,
        ),
        row(
            C::MirrorUnrecorded,
            S::Missing,
            CREATE,
            CREATE,
            READ_ONLY_NOTHING,
        ),
        // Neither side changed, yet they differ: a conflict.
        conflict_row(C::SameAsL, S::SameDigestButDifferent, PUSH, PULL),
        // Unreachable server.
        row(C::SameAsL, S::Unreachable, NOTHING, NOTHING, NOTHING),
        row(
            C::Edited,
            S::Unreachable,
            WAIT_FOR_SERVER,
            WAIT_FOR_SERVER,
            NOTHING,
        ),
        row(
            C::NeverSynced,
            S::Unreachable,
            WAIT_FOR_SERVER,
            WAIT_FOR_SERVER,
            NOTHING,
        ),
        row(
            C::Deleted,
            S::Unreachable,
            WAIT_FOR_SERVER,
            WAIT_FOR_SERVER,
            RELEASE,
        ),
        row(C::None, S::Unreachable, NOTHING, NOTHING, NOTHING),
    ]
}

fn ready_reason(decision: &Decision) -> Option<Reason> {
    match &decision.status {
        Some(Status::Ready { reason, .. }) => Some(*reason),
        Some(Status::Paused { .. }) => panic!("unexpected pause status in {decision:?}"),
        None => None,
    }
}

#[test]
fn every_cell_of_the_outcome_table_in_every_mode_with_both_winners() {
    let table = outcome_table();
    let mut checked = 0;
    for row in &table {
        for mode in MODES {
            for winner in WINNERS {
                let observation = observe(row.cr, row.srv, mode, winner);
                let decision = decide(&observation);
                let (action, reason) = row.expect(mode, winner);
                assert_eq!(
                    (decision.action, ready_reason(&decision)),
                    (action, reason),
                    "CR {:?} x server {:?} in {mode:?} with winner {winner:?}: {decision:?}",
                    row.cr,
                    row.srv,
                );
                assert!(
                    decision.event.is_none() || decision.action.writes(),
                    "an event without a write: {decision:?}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, table.len() * 6);
}

/// Every CR side and server side, for the tests that go over all of them.
const ALL_CRS: [Cr; 8] = [
    Cr::None,
    Cr::SameAsL,
    Cr::Edited,
    Cr::Deleted,
    Cr::NeverSynced,
    Cr::DeletedNeverSynced,
    Cr::MirrorUnrecorded,
    Cr::MirrorUnrecordedEdited,
];
const ALL_SRVS: [Srv; 10] = [
    Srv::SameAsL,
    Srv::Edited,
    Srv::SameDigestButDifferent,
    Srv::SameAsLNewEpoch,
    Srv::EqualToCr,
    Srv::DifferentFromCr,
    Srv::Removed,
    Srv::Wiped,
    Srv::Missing,
    Srv::Unreachable,
];

/// Calls `check` with every cell with a CR, in every mode with both winners, after `adjust`.
fn for_every_cr_cell(adjust: impl Fn(&mut Observation), check: impl Fn(&Observation, Decision)) {
    for cr in ALL_CRS.into_iter().filter(|cr| *cr != Cr::None) {
        for srv in ALL_SRVS {
            for mode in MODES {
                for winner in WINNERS {
                    let mut observation = observe(cr, srv, mode, winner);
                    adjust(&mut observation);
                    let decision = decide(&observation);
                    check(&observation, decision);
                }
            }
        }
    }
}

fn cr_mut(observation: &mut Observation) -> &mut CrView {
    observation.cr.as_mut().expect("a cell with a CR")
}

fn cr_of(observation: &Observation) -> &CrView {
    observation.cr.as_ref().expect("a cell with a CR")
}

#[test]
fn paused_writes_nothing_anywhere_and_says_so() {
    for_every_cr_cell(
        |observation| cr_mut(observation).paused = true,
        |observation, decision| {
            assert_eq!(decision.action, Action::Nothing, "{observation:?}");
            assert!(matches!(decision.status, Some(Status::Paused { .. })));
            assert_eq!(decision.event, None);
        },
    );
}

#[test]
fn unpausing_lets_the_table_decide() {
    let mut observation = observe(
        Cr::Edited,
        Srv::SameAsL,
        SyncMode::Bidirectional,
        ConflictWinner::Server,
    );
    cr_mut(&mut observation).paused = true;
    assert_eq!(decide(&observation).action, Action::Nothing);
    cr_mut(&mut observation).paused = false;
    let decision = decide(&observation);
    assert_eq!(decision.action, Action::UpdateServer);
    assert!(matches!(
        decision.status,
        Some(Status::Ready {
            reason: Reason::Synced,
            ..
        })
    ));
}

#[test]
fn unmanaged_is_never_synced_and_its_deletion_only_releases_the_finalizer() {
    for_every_cr_cell(
        |observation| cr_mut(observation).managed = false,
        |observation, decision| {
            let cr = cr_of(observation);
            let expected = if cr.deleting {
                (Action::ReleaseFinalizer, None)
            } else {
                (Action::Nothing, Some(Reason::Unmanaged))
            };
            assert_eq!(
                (decision.action, ready_reason(&decision)),
                expected,
                "{observation:?}"
            );
        },
    );
    // The escape for a CR stuck in deletion works even when it is paused too.
    let mut observation = observe(
        Cr::Deleted,
        Srv::Unreachable,
        SyncMode::Bidirectional,
        ConflictWinner::Kubernetes,
    );
    cr_mut(&mut observation).paused = true;
    assert_eq!(decide(&observation).action, Action::Nothing);
    cr_mut(&mut observation).managed = false;
    assert_eq!(decide(&observation).action, Action::ReleaseFinalizer);
    // Without the finalizer, nothing holds it.
    cr_mut(&mut observation).has_finalizer = false;
    assert_eq!(decide(&observation).action, Action::Nothing);
}

#[test]
fn retain_never_deletes_on_the_server_and_needs_no_finalizer() {
    for_every_cr_cell(
        |observation| cr_mut(observation).deletion_policy = DeletionPolicy::Retain,
        |observation, decision| {
            if cr_of(observation).deleting {
                assert_eq!(decision.action, Action::ReleaseFinalizer, "{observation:?}");
            }
            assert_ne!(decision.action, Action::DeleteOnServer);
        },
    );
    for mode in MODES {
        let mut observation = observe(
            Cr::NeverSynced,
            Srv::Missing,
            mode,
            ConflictWinner::Kubernetes,
        );
        let cr = cr_mut(&mut observation);
        cr.deletion_policy = DeletionPolicy::Retain;
        cr.has_finalizer = false;
        assert_ne!(
            decide(&observation).action,
            Action::AddFinalizer,
            "{mode:?}"
        );
    }
}

#[test]
fn a_new_user_cr_gets_the_finalizer_first_where_its_deletion_reaches_the_server() {
    for mode in MODES {
        for srv in ALL_SRVS {
            let mut observation = observe(Cr::NeverSynced, srv, mode, ConflictWinner::Kubernetes);
            cr_mut(&mut observation).has_finalizer = false;
            let decision = decide(&observation);
            match mode {
                SyncMode::Bidirectional | SyncMode::ToServer => {
                    assert_eq!(decision.action, Action::AddFinalizer, "{srv:?}");
                    assert_eq!((decision.status, decision.event), (None, None));
                }
                SyncMode::FromServer => assert_ne!(decision.action, Action::AddFinalizer),
            }
        }
    }
    // A CR about to be deleted does not get it first.
    let mut observation = observe(
        Cr::SameAsL,
        Srv::Removed,
        SyncMode::Bidirectional,
        ConflictWinner::Kubernetes,
    );
    cr_mut(&mut observation).has_finalizer = false;
    assert_eq!(decide(&observation).action, Action::DeleteCr);
    // Nor one being deleted: Kubernetes removes it without us.
    let mut observation = observe(
        Cr::Deleted,
        Srv::SameAsL,
        SyncMode::Bidirectional,
        ConflictWinner::Kubernetes,
    );
    cr_mut(&mut observation).has_finalizer = false;
    assert_eq!(decide(&observation), Decision::nothing(None));
}

fn immutable(observation: &mut Observation) {
    observation.caps.update_in_place = false;
}

#[test]
fn immutable_kinds_report_immutable_unless_the_strategy_is_recreate() {
    // K2, the ToServer revert and C1 won by the CR: each needs a write of the CR's version.
    let both: &[SyncMode] = &[SyncMode::Bidirectional, SyncMode::ToServer];
    let pushes = [
        (Cr::Edited, Srv::SameAsL, both),
        (Cr::SameAsL, Srv::Edited, &[SyncMode::ToServer]),
        (Cr::Edited, Srv::Edited, both),
        (Cr::NeverSynced, Srv::DifferentFromCr, both),
        (Cr::SameAsL, Srv::SameDigestButDifferent, both),
    ];
    for (cr, srv, modes) in pushes {
        for &mode in modes {
            let mut observation = observe(cr, srv, mode, ConflictWinner::Kubernetes);
            immutable(&mut observation);
            let decision = decide(&observation);
            assert_eq!(
                (decision.action, ready_reason(&decision)),
                (Action::Nothing, Some(Reason::Immutable))
            );
            assert_eq!(decision.event, None);

            cr_mut(&mut observation).update_strategy = UpdateStrategy::Recreate;
            let decision = decide(&observation);
            assert_eq!(
                (decision.action, ready_reason(&decision)),
                (Action::RecreateOnServer, SYNCED)
            );
            let event = decision.event.expect("recreation is announced");
            assert_eq!(
                (event.type_, event.reason),
                (EventType::Warning, EventReason::RecreatedOnServer)
            );

            // A change the server of a mutable kind cannot take in place is the same.
            let mut observation = observe(cr, srv, mode, ConflictWinner::Kubernetes);
            observation.comparison = Comparison::Different { in_place: false };
            assert_eq!(decide(&observation).action, Action::Nothing);
            cr_mut(&mut observation).update_strategy = UpdateStrategy::Recreate;
            assert_eq!(decide(&observation).action, Action::RecreateOnServer);
        }
    }
    // Creating is no update: immutable kinds are created (K1, R2, R3) as any other.
    let mut observation = observe(
        Cr::SameAsL,
        Srv::Wiped,
        SyncMode::Bidirectional,
        ConflictWinner::Kubernetes,
    );
    immutable(&mut observation);
    assert_eq!(decide(&observation).action, Action::CreateOnServer);
    // Pulls are not affected either.
    let mut observation = observe(
        Cr::SameAsL,
        Srv::Edited,
        SyncMode::Bidirectional,
        ConflictWinner::Kubernetes,
    );
    immutable(&mut observation);
    assert_eq!(decide(&observation).action, Action::UpdateCrSpecFromServer);
}

#[test]
fn a_recreation_waits_for_users_and_needs_create_and_delete() {
    let recreate = || {
        let mut observation = observe(
            Cr::Edited,
            Srv::SameAsL,
            SyncMode::Bidirectional,
            ConflictWinner::Kubernetes,
        );
        immutable(&mut observation);
        cr_mut(&mut observation).update_strategy = UpdateStrategy::Recreate;
        observation
    };
    let mut observation = recreate();
    observation.dependencies.used_by = vec!["Cache a".to_string()];
    let decision = decide(&observation);
    assert_eq!(
        (decision.action, ready_reason(&decision)),
        (Action::Wait(WaitFor::Dependents), Some(Reason::Pending))
    );

    let mut observation = recreate();
    observation.caps.delete = false;
    let decision = decide(&observation);
    assert_eq!(
        (decision.action, ready_reason(&decision)),
        (Action::Nothing, Some(Reason::Unsupported))
    );
}

#[test]
fn writes_to_the_server_wait_for_missing_dependencies() {
    for (cr, srv) in [
        (Cr::NeverSynced, Srv::Missing),
        (Cr::Edited, Srv::SameAsL),
        (Cr::SameAsL, Srv::Wiped),
    ] {
        let mut observation = observe(cr, srv, SyncMode::Bidirectional, ConflictWinner::Kubernetes);
        observation.dependencies.missing = vec!["Template t".to_string()];
        let decision = decide(&observation);
        assert_eq!(
            (decision.action, ready_reason(&decision)),
            (
                Action::Wait(WaitFor::Dependencies),
                Some(Reason::DependencyMissing)
            )
        );
        assert_eq!(decision.event, None);
    }
    // A change that cannot be made anyway says so rather than waiting.
    let mut observation = observe(
        Cr::Edited,
        Srv::SameAsL,
        SyncMode::Bidirectional,
        ConflictWinner::Kubernetes,
    );
    observation.dependencies.missing = vec!["Template t".to_string()];
    immutable(&mut observation);
    assert_eq!(ready_reason(&decide(&observation)), Some(Reason::Immutable));
    // Pulls and deletions do not wait.
    let mut observation = observe(
        Cr::SameAsL,
        Srv::Edited,
        SyncMode::Bidirectional,
        ConflictWinner::Kubernetes,
    );
    observation.dependencies.missing = vec!["Template t".to_string()];
    assert_eq!(decide(&observation).action, Action::UpdateCrSpecFromServer);
    observation.cr = cr_view(Cr::Deleted);
    assert_eq!(decide(&observation).action, Action::DeleteOnServer);
}

#[test]
fn a_losing_claim_never_touches_the_server() {
    for_every_cr_cell(
        |observation| {
            cr_mut(observation).claim = Claim::LosesTo {
                winner: "older".to_string(),
            }
        },
        |observation, decision| {
            let expected = if cr_of(observation).deleting {
                (Action::ReleaseFinalizer, None)
            } else {
                (Action::Nothing, Some(Reason::Conflict))
            };
            assert_eq!(
                (decision.action, ready_reason(&decision)),
                expected,
                "{observation:?}"
            );
        },
    );
}

#[test]
fn a_superseded_mirror_is_deleted_without_touching_the_server() {
    for_every_cr_cell(
        |observation| {
            let cr = cr_mut(observation);
            cr.origin = Origin::Server;
            cr.claim = Claim::SupersededMirror {
                by: "mine".to_string(),
            };
        },
        |observation, decision| {
            if cr_of(observation).deleting {
                assert_eq!(decision.action, Action::ReleaseFinalizer);
            } else {
                assert_eq!(decision.action, Action::DeleteCr);
                let event = decision.event.expect("announced");
                assert_eq!(
                    (event.type_, event.reason),
                    (EventType::Normal, EventReason::Superseded)
                );
            }
        },
    );
}

#[test]
fn internal_objects_are_never_mirrored_pushed_or_deleted() {
    for_every_cr_cell(
        |observation| observation.internal = true,
        |observation, decision| {
            let expected = if cr_of(observation).deleting {
                (Action::ReleaseFinalizer, None)
            } else {
                (Action::Nothing, Some(Reason::Unsupported))
            };
            assert_eq!(
                (decision.action, ready_reason(&decision)),
                expected,
                "{observation:?}"
            );
        },
    );
    for mode in MODES {
        let mut observation = observe(Cr::None, Srv::SameAsL, mode, ConflictWinner::Kubernetes);
        observation.internal = true;
        assert_eq!(decide(&observation), Decision::nothing(None));
    }
}

#[test]
fn what_the_server_cannot_do_is_reported() {
    let mut observation = observe(
        Cr::NeverSynced,
        Srv::Missing,
        SyncMode::Bidirectional,
        ConflictWinner::Kubernetes,
    );
    observation.caps.create = false;
    assert_eq!(
        (
            decide(&observation).action,
            ready_reason(&decide(&observation))
        ),
        (Action::Nothing, Some(Reason::Unsupported))
    );

    let mut observation = observe(
        Cr::Deleted,
        Srv::SameAsL,
        SyncMode::ToServer,
        ConflictWinner::Kubernetes,
    );
    observation.caps.delete = false;
    let decision = decide(&observation);
    assert_eq!(decision.action, Action::ReleaseFinalizer);
    let event = decision.event.expect("announced");
    assert_eq!(
        (event.type_, event.reason),
        (EventType::Warning, EventReason::NotDeletedOnServer)
    );

    let mut observation = observe(
        Cr::Deleted,
        Srv::SameAsL,
        SyncMode::Bidirectional,
        ConflictWinner::Kubernetes,
    );
    observation.server = ServerView::Present(ServerObject {
        digest: SYNCED_DIGEST.to_string(),
        defined_statically: true,
    });
    let decision = decide(&observation);
    assert_eq!(decision.action, Action::ReleaseFinalizer);
    assert_eq!(
        decision.event.map(|e| e.reason),
        Some(EventReason::NotDeletedOnServer)
    );
}

fn event_of(
    cr: Cr,
    srv: Srv,
    mode: SyncMode,
    winner: ConflictWinner,
) -> Option<(EventType, EventReason)> {
    decide(&observe(cr, srv, mode, winner))
        .event
        .map(|event| (event.type_, event.reason))
}

#[test]
fn conflicts_deletions_and_recreations_come_with_an_event_and_nothing_else_does() {
    use ConflictWinner::{Kubernetes, Server};
    use EventReason as R;
    use EventType::{Normal, Warning};
    use SyncMode::{Bidirectional, FromServer, ToServer};
    let expected = [
        (
            Cr::Edited,
            Srv::Edited,
            Bidirectional,
            Kubernetes,
            Some((Warning, R::ConflictResolved)),
        ),
        (
            Cr::Edited,
            Srv::Edited,
            Bidirectional,
            Server,
            Some((Warning, R::ConflictResolved)),
        ),
        (
            Cr::NeverSynced,
            Srv::DifferentFromCr,
            Bidirectional,
            Server,
            Some((Warning, R::ConflictResolved)),
        ),
        (
            Cr::SameAsL,
            Srv::Edited,
            ToServer,
            Kubernetes,
            Some((Warning, R::ServerChangeReverted)),
        ),
        (
            Cr::Deleted,
            Srv::SameAsL,
            Bidirectional,
            Kubernetes,
            Some((Normal, R::DeletedOnServer)),
        ),
        (
            Cr::Deleted,
            Srv::Edited,
            Bidirectional,
            Kubernetes,
            Some((Warning, R::DeletedOnServer)),
        ),
        (
            Cr::SameAsL,
            Srv::Removed,
            Bidirectional,
            Kubernetes,
            Some((Normal, R::DeletedFromServer)),
        ),
        (
            Cr::SameAsL,
            Srv::Removed,
            FromServer,
            Kubernetes,
            Some((Normal, R::DeletedFromServer)),
        ),
        (
            Cr::Edited,
            Srv::Removed,
            Bidirectional,
            Kubernetes,
            Some((Warning, R::RecreatedOnServer)),
        ),
        (
            Cr::SameAsL,
            Srv::Removed,
            ToServer,
            Kubernetes,
            Some((Warning, R::RecreatedOnServer)),
        ),
        (
            Cr::SameAsL,
            Srv::Wiped,
            Bidirectional,
            Kubernetes,
            Some((Normal, R::RecreatedOnServer)),
        ),
        (
            Cr::SameAsL,
            Srv::Missing,
            ToServer,
            Kubernetes,
            Some((Normal, R::RecreatedOnServer)),
        ),
        // K1, K2, S1, S2, adoption, releases: no event (design L2 counts writes).
        (
            Cr::NeverSynced,
            Srv::Missing,
            Bidirectional,
            Kubernetes,
            None,
        ),
        (Cr::Edited, Srv::SameAsL, Bidirectional, Kubernetes, None),
        (Cr::None, Srv::SameAsL, Bidirectional, Kubernetes, None),
        (Cr::SameAsL, Srv::Edited, Bidirectional, Kubernetes, None),
        (
            Cr::NeverSynced,
            Srv::EqualToCr,
            Bidirectional,
            Kubernetes,
            None,
        ),
        (Cr::Deleted, Srv::Removed, Bidirectional, Kubernetes, None),
        (Cr::Deleted, Srv::SameAsL, FromServer, Kubernetes, None),
        (Cr::Edited, Srv::SameAsL, FromServer, Kubernetes, None),
    ];
    for (cr, srv, mode, winner, event) in expected {
        assert_eq!(
            event_of(cr, srv, mode, winner),
            event,
            "{cr:?} x {srv:?} in {mode:?}, {winner:?}"
        );
    }
}

#[test]
fn equal_sides_never_give_more_than_recording_the_sync() {
    for cr in [
        Cr::SameAsL,
        Cr::Edited,
        Cr::NeverSynced,
        Cr::MirrorUnrecorded,
        Cr::MirrorUnrecordedEdited,
    ] {
        for mode in MODES {
            for winner in WINNERS {
                for epoch in [EPOCH, OTHER_EPOCH] {
                    for digest in [SYNCED_DIGEST, "digest-other"] {
                        let mut observation = observe(cr, Srv::EqualToCr, mode, winner);
                        observation.server = present(digest);
                        observation.server_epoch = epoch.to_string();
                        let decision = decide(&observation);
                        assert!(
                            matches!(decision.action, Action::Nothing | Action::RecordSynced),
                            "{observation:?}: {decision:?}"
                        );
                        assert_eq!(decision.event, None);
                    }
                }
            }
        }
    }
}
