//! [`decide`] is total and keeps the contract's promises for every observation, however
//! unlikely: a property test over arbitrary observations (no panic, and the invariants of
//! design E1-E4, K3, N2, R2, R3 and L1/L2 hold for each decision).

use proptest::prelude::*;

use super::*;

/// Few values, so that digests, epochs and generations often coincide.
fn token() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "c"]).prop_map(str::to_string)
}

/// Epochs `<state>/<session>` that share states and sessions often, and old records without a
/// session.
fn epoch() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a/x", "a/y", "b/x", "a", "untracked"]).prop_map(str::to_string)
}

fn mode() -> impl Strategy<Value = SyncMode> {
    prop_oneof![
        Just(SyncMode::Bidirectional),
        Just(SyncMode::ToServer),
        Just(SyncMode::FromServer),
    ]
}

fn winner() -> impl Strategy<Value = ConflictWinner> {
    prop_oneof![
        Just(ConflictWinner::Kubernetes),
        Just(ConflictWinner::Server)
    ]
}

fn claim() -> impl Strategy<Value = Claim> {
    prop_oneof![
        3 => Just(Claim::Owner),
        1 => Just(Claim::LosesTo { winner: "w".to_string() }),
        1 => Just(Claim::SupersededMirror { by: "u".to_string() }),
    ]
}

fn last_synced() -> impl Strategy<Value = LastSynced> {
    (token(), 0i64..4, epoch()).prop_map(|(digest, generation, epoch)| LastSynced {
        digest,
        generation,
        epoch,
    })
}

fn cr_view() -> impl Strategy<Value = CrView> {
    (
        0i64..4,
        any::<bool>(),
        any::<bool>(),
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.2),
        prop_oneof![Just(Origin::Kubernetes), Just(Origin::Server)],
        prop_oneof![Just(DeletionPolicy::Delete), Just(DeletionPolicy::Retain)],
        prop_oneof![Just(UpdateStrategy::Retain), Just(UpdateStrategy::Recreate)],
        prop::option::of(last_synced()),
        claim(),
    )
        .prop_map(
            |(
                generation,
                deleting,
                has_finalizer,
                managed,
                paused,
                origin,
                deletion_policy,
                update_strategy,
                last_synced,
                claim,
            )| CrView {
                generation,
                deleting,
                has_finalizer,
                managed,
                paused,
                origin,
                deletion_policy,
                update_strategy,
                last_synced,
                claim,
            },
        )
}

fn server_view() -> impl Strategy<Value = ServerView> {
    prop_oneof![
        3 => (token(), prop::bool::weighted(0.1)).prop_map(|(digest, defined_statically)| {
            ServerView::Present(ServerObject { digest, defined_statically })
        }),
        1 => Just(ServerView::Absent(Absence::Removed)),
        1 => Just(ServerView::Absent(Absence::Missing)),
        1 => Just(ServerView::Unreachable),
    ]
}

fn comparison() -> impl Strategy<Value = Comparison> {
    prop_oneof![
        Just(Comparison::Equal),
        any::<bool>().prop_map(|in_place| Comparison::Different { in_place }),
    ]
}

fn names() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(token(), 0..2)
}

fn observation() -> impl Strategy<Value = Observation> {
    (
        prop::option::weighted(0.85, cr_view()),
        server_view(),
        epoch(),
        comparison(),
        prop::bool::weighted(0.1),
        (names(), names()).prop_map(|(missing, used_by)| Dependencies { missing, used_by }),
        mode(),
        winner(),
        (
            any::<bool>(),
            prop::bool::weighted(0.9),
            prop::bool::weighted(0.9),
        )
            .prop_map(|(update_in_place, create, delete)| KindCapabilities {
                update_in_place,
                create,
                delete,
            }),
    )
        .prop_map(
            |(cr, server, server_epoch, comparison, internal, dependencies, mode, winner, caps)| {
                Observation {
                    cr,
                    server,
                    server_epoch,
                    comparison,
                    internal,
                    dependencies,
                    mode,
                    winner,
                    caps,
                }
            },
        )
}

fn reason(decision: &Decision) -> Option<Reason> {
    match &decision.status {
        Some(Status::Ready { reason, .. }) => Some(*reason),
        Some(Status::Paused { .. }) | None => None,
    }
}

/// The invariants every decision keeps.
fn check(o: &Observation, d: &Decision) -> Result<(), TestCaseError> {
    let action = d.action;
    prop_assert!(
        d.event.is_none() || action.writes(),
        "an event without a write"
    );
    if matches!(o.server, ServerView::Unreachable) {
        prop_assert!(!action.writes_server(), "a server write while unreachable");
    }
    if o.mode == SyncMode::FromServer {
        prop_assert!(!action.writes_server(), "FromServer writes to the server");
        prop_assert!(action != Action::AddFinalizer, "FromServer adds finalizers");
        prop_assert!(
            action
                != Action::CreateMirrorCr {
                    with_finalizer: true
                },
            "FromServer mirrors with a finalizer"
        );
    }
    if reason(d) == Some(Reason::ReadOnlyMode) {
        prop_assert_eq!(o.mode, SyncMode::FromServer);
    }
    match action {
        Action::Wait(WaitFor::Server) => {
            prop_assert!(matches!(o.server, ServerView::Unreachable))
        }
        Action::Wait(WaitFor::Dependencies) => prop_assert!(!o.dependencies.missing.is_empty()),
        Action::Wait(WaitFor::Dependents) => prop_assert!(!o.dependencies.used_by.is_empty()),
        Action::CreateOnServer => prop_assert!(matches!(o.server, ServerView::Absent(_))),
        Action::UpdateServer | Action::RecreateOnServer | Action::UpdateCrSpecFromServer => {
            prop_assert!(matches!(o.server, ServerView::Present(_)));
            prop_assert!(o.comparison != Comparison::Equal);
        }
        Action::RecordSynced => {
            prop_assert!(matches!(o.server, ServerView::Present(_)));
            prop_assert_eq!(o.comparison, Comparison::Equal);
        }
        Action::Nothing
        | Action::AddFinalizer
        | Action::DeleteOnServer
        | Action::CreateMirrorCr { .. }
        | Action::DeleteCr
        | Action::ReleaseFinalizer => {}
    }
    if action == Action::UpdateServer {
        prop_assert!(o.caps.update_in_place);
    }

    let Some(cr) = &o.cr else {
        // The status of a new mirror CR is its first status write.
        let status_expected = matches!(action, Action::CreateMirrorCr { .. });
        prop_assert_eq!(reason(d).is_some(), status_expected);
        let mirrors = matches!(o.server, ServerView::Present(_))
            && !o.internal
            && o.mode != SyncMode::ToServer;
        let expected = if mirrors {
            Action::CreateMirrorCr {
                with_finalizer: o.mode == SyncMode::Bidirectional,
            }
        } else {
            Action::Nothing
        };
        prop_assert_eq!(action, expected);
        return Ok(());
    };
    prop_assert!(
        !matches!(action, Action::CreateMirrorCr { .. }),
        "mirroring an object that has a CR"
    );

    // E1, E2, E4, N2: no server write for these.
    let owner = cr.claim == Claim::Owner;
    if action.writes_server() {
        prop_assert!(cr.managed && !cr.paused && !o.internal && owner);
    }
    if !cr.managed {
        let expected = if cr.deleting && cr.has_finalizer {
            Action::ReleaseFinalizer
        } else {
            Action::Nothing
        };
        prop_assert_eq!(action, expected);
        return Ok(());
    }
    if cr.paused {
        prop_assert_eq!(action, Action::Nothing);
        prop_assert!(
            matches!(d.status, Some(Status::Paused { .. })),
            "paused without saying so"
        );
        return Ok(());
    }
    prop_assert!(
        !matches!(d.status, Some(Status::Paused { .. })),
        "says paused when not"
    );

    // Deletion (K3): only the finalizer, or the server deletion where it is due.
    if cr.deleting {
        prop_assert!(matches!(
            action,
            Action::Nothing
                | Action::Wait(WaitFor::Server)
                | Action::ReleaseFinalizer
                | Action::DeleteOnServer
        ));
    }
    if matches!(action, Action::ReleaseFinalizer | Action::DeleteOnServer) {
        prop_assert!(cr.deleting && cr.has_finalizer);
    }
    if action == Action::DeleteOnServer {
        let ServerView::Present(object) = &o.server else {
            return Err(TestCaseError::fail("deleting an absent object"));
        };
        prop_assert!(!object.defined_statically && o.caps.delete);
        prop_assert_eq!(cr.deletion_policy, DeletionPolicy::Delete);
        prop_assert!(owner && !o.internal);
    }
    if action == Action::AddFinalizer {
        prop_assert!(!cr.has_finalizer && !cr.deleting);
        prop_assert_eq!(cr.deletion_policy, DeletionPolicy::Delete);
        prop_assert!(d.status.is_none());
    }

    // R2, R3: a CR is only deleted for a proven removal in the same epoch (or when superseded).
    if action == Action::DeleteCr {
        prop_assert!(!cr.deleting);
        let superseded = matches!(cr.claim, Claim::SupersededMirror { .. });
        if !superseded {
            prop_assert_eq!(&o.server, &ServerView::Absent(Absence::Removed));
            prop_assert!(o.mode != SyncMode::ToServer);
            match &cr.last_synced {
                Some(recorded) => {
                    prop_assert_eq!(epoch_state(&recorded.epoch), epoch_state(&o.server_epoch))
                }
                None => prop_assert_eq!(cr.origin, Origin::Server),
            }
        }
    }

    // Crash safety and echoes (L2): equal sides give at most the record of the sync.
    let live_owner = owner && !o.internal && !cr.deleting;
    if live_owner && matches!(o.server, ServerView::Present(_)) && o.comparison == Comparison::Equal
    {
        prop_assert!(matches!(
            action,
            Action::Nothing | Action::RecordSynced | Action::AddFinalizer
        ));
    }
    // L1: a settled object costs no write: `Synced` without a write means the record says so.
    if action == Action::Nothing && reason(d) == Some(Reason::Synced) {
        let ServerView::Present(object) = &o.server else {
            return Err(TestCaseError::fail("synced without a server object"));
        };
        prop_assert_eq!(
            cr.last_synced.clone(),
            Some(LastSynced {
                digest: object.digest.clone(),
                generation: cr.generation,
                epoch: o.server_epoch.clone(),
            })
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn every_observation_gets_a_decision_that_keeps_the_contract(o in observation()) {
        let decision = decide(&o);
        prop_assert_eq!(&decide(&o.clone()), &decision, "not deterministic");
        check(&o, &decision)?;
    }
}
