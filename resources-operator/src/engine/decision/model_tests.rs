//! Property tests of [`decide`] driving a small model of the world: one object, a CR side
//! (generation, spec value, deleting, finalizer, paused, last synced) and a server side (value,
//! epoch, what the event stream told about an absence). Random operations happen on both sides
//! (user edits, creates and deletes the CR; another client creates, edits and removes the server
//! object; the server restarts, losing volatile objects, or is wiped to a new epoch; the CR is
//! paused and unpaused); the engine is the loop "observe, [`decide`], execute the action",
//! where an execution may crash between its two writes, the server may be unreachable for a
//! while, and echoes (reconciles without news) come at any time.
//!
//! Two tests:
//! - [`rounds_settle_to_what_the_table_prescribes`]: operations come in rounds, each followed by
//!   the engine running to quiescence (with crashes and outages). The oracle, written from the
//!   design's rules (the outcome table, E2, E3, R2, R3, K3) in terms of what the operations did,
//!   not from [`decide`], says how each round must end; the test also checks the writes allowed
//!   (L1, L2), the finalizer, the last-synced record and the fixed point.
//! - [`any_interleaving_converges_without_resurrection`]: operations, reconciles, crashes and
//!   outages interleave freely; after quiescence both sides agree (or a documented exception
//!   holds), the last operation had the effect the table gives it when it hit a synced object,
//!   and nothing positively removed came back.

use proptest::prelude::*;

use super::*;

/// A spec value (the whole content of the object, on either side).
type Value = u8;

/// Most decisions one settling may take before it counts as a loop.
const MAX_STEPS: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Settings {
    mode: SyncMode,
    winner: ConflictWinner,
    /// The object is volatile: a server restart loses it (R2).
    volatile: bool,
    /// The kind cannot be updated in place; CRs use `updates.strategy: recreate`.
    immutable: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct ModelCr {
    generation: i64,
    value: Value,
    deleting: bool,
    has_finalizer: bool,
    paused: bool,
    origin: Origin,
    last_synced: Option<LastSynced>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct World {
    settings: Settings,
    cr: Option<ModelCr>,
    server: Option<Value>,
    epoch: u32,
    /// What the engine knows of an absent server object: a remove event (a client's or the
    /// echo of ours) proves a removal; a restart or a wipe does not.
    absence: Absence,
    reachable: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    UserCreate(Value),
    UserEdit(Value),
    UserDelete,
    ClientCreate(Value),
    ClientEdit(Value),
    ClientRemove,
    ServerRestart,
    ServerWipe,
    Pause,
    Unpause,
}

fn digest(value: Value) -> String {
    format!("digest-{value}")
}

fn epoch_name(epoch: u32) -> String {
    format!("epoch-{epoch}")
}

fn fail<T>(message: String) -> Result<T, TestCaseError> {
    Err(TestCaseError::fail(message))
}

impl World {
    fn new(settings: Settings) -> Self {
        Self {
            settings,
            cr: None,
            server: None,
            epoch: 0,
            absence: Absence::Missing,
            reachable: true,
        }
    }

    /// What users, other clients and the server do.
    fn apply(&mut self, op: Op) {
        match op {
            Op::UserCreate(value) => {
                if self.cr.is_none() {
                    self.cr = Some(ModelCr {
                        generation: 1,
                        value,
                        deleting: false,
                        has_finalizer: false,
                        paused: false,
                        origin: Origin::Kubernetes,
                        last_synced: None,
                    });
                }
            }
            Op::UserEdit(value) => {
                if let Some(cr) = &mut self.cr
                    && cr.value != value
                {
                    cr.value = value;
                    cr.generation += 1;
                }
            }
            Op::UserDelete => match &mut self.cr {
                Some(cr) if cr.has_finalizer => cr.deleting = true,
                Some(_) => self.cr = None,
                None => {}
            },
            Op::ClientCreate(value) => {
                if self.server.is_none() {
                    self.server = Some(value);
                }
            }
            Op::ClientEdit(value) => {
                if self.server.is_some() {
                    self.server = Some(value);
                }
            }
            Op::ClientRemove => {
                if self.server.take().is_some() {
                    self.absence = Absence::Removed;
                }
            }
            Op::ServerRestart => {
                if self.settings.volatile && self.server.take().is_some() {
                    self.absence = Absence::Missing;
                }
            }
            Op::ServerWipe => {
                self.server = None;
                self.absence = Absence::Missing;
                self.epoch += 1;
            }
            Op::Pause | Op::Unpause => {
                if let Some(cr) = &mut self.cr {
                    cr.paused = op == Op::Pause;
                }
            }
        }
    }

    /// What the engine and the kind adapter observe.
    fn observe(&self) -> Observation {
        let Settings {
            mode,
            winner,
            volatile: _,
            immutable,
        } = self.settings;
        let server = match (self.reachable, self.server) {
            (false, _) => ServerView::Unreachable,
            (true, Some(value)) => ServerView::Present(ServerObject {
                digest: digest(value),
                defined_statically: false,
            }),
            (true, None) => ServerView::Absent(self.absence),
        };
        let comparison = match (&self.cr, self.server) {
            (Some(cr), Some(value)) if cr.value == value => Comparison::Equal,
            _ => Comparison::Different {
                in_place: !immutable,
            },
        };
        Observation {
            cr: self.cr.as_ref().map(|cr| CrView {
                generation: cr.generation,
                deleting: cr.deleting,
                has_finalizer: cr.has_finalizer,
                managed: true,
                paused: cr.paused,
                origin: cr.origin,
                deletion_policy: DeletionPolicy::Delete,
                update_strategy: if immutable {
                    UpdateStrategy::Recreate
                } else {
                    UpdateStrategy::Retain
                },
                last_synced: cr.last_synced.clone(),
                claim: Claim::Owner,
            }),
            server,
            server_epoch: epoch_name(self.epoch),
            comparison,
            internal: false,
            dependencies: Dependencies::default(),
            mode,
            winner,
            caps: KindCapabilities {
                update_in_place: !immutable,
                create: true,
                delete: true,
            },
        }
    }

    /// Executes an action as the engine would; a crash stops it after its first write.
    fn execute(&mut self, action: Action, crash: bool) -> Result<(), TestCaseError> {
        if action.writes_server() && !self.reachable {
            return fail(format!("{action:?} while the server is unreachable"));
        }
        match action {
            Action::Nothing | Action::Wait(_) => {}
            Action::AddFinalizer => self.cr_mut(action)?.has_finalizer = true,
            Action::RecordSynced => self.record(action)?,
            Action::CreateOnServer | Action::UpdateServer => {
                let value = self.cr_mut(action)?.value;
                if (action == Action::CreateOnServer) != self.server.is_none() {
                    return fail(format!("{action:?} with server {:?}", self.server));
                }
                self.server = Some(value);
                if !crash {
                    self.record(action)?;
                }
            }
            Action::RecreateOnServer => {
                let value = self.cr_mut(action)?.value;
                self.server_value(action)?;
                self.server = None;
                self.absence = Absence::Removed;
                if !crash {
                    self.server = Some(value);
                    self.record(action)?;
                }
            }
            Action::DeleteOnServer => {
                self.server_value(action)?;
                self.server = None;
                self.absence = Absence::Removed;
                if !crash {
                    self.release(action)?;
                }
            }
            Action::CreateMirrorCr { with_finalizer } => {
                let value = self.server_value(action)?;
                if self.cr.is_some() {
                    return fail("mirroring an object that has a CR".to_string());
                }
                self.cr = Some(ModelCr {
                    generation: 1,
                    value,
                    deleting: false,
                    has_finalizer: with_finalizer,
                    paused: false,
                    origin: Origin::Server,
                    last_synced: None,
                });
                if !crash {
                    self.record(action)?;
                }
            }
            Action::UpdateCrSpecFromServer => {
                let value = self.server_value(action)?;
                let cr = self.cr_mut(action)?;
                cr.value = value;
                cr.generation += 1;
                if !crash {
                    self.record(action)?;
                }
            }
            Action::DeleteCr => {
                self.cr_mut(action)?.has_finalizer = false;
                if !crash {
                    self.cr = None;
                }
            }
            Action::ReleaseFinalizer => self.release(action)?,
        }
        Ok(())
    }

    fn cr_mut(&mut self, action: Action) -> Result<&mut ModelCr, TestCaseError> {
        match &mut self.cr {
            Some(cr) => Ok(cr),
            None => fail(format!("{action:?} without a CR")),
        }
    }

    fn server_value(&self, action: Action) -> Result<Value, TestCaseError> {
        match self.server {
            Some(value) => Ok(value),
            None => fail(format!("{action:?} without a server object")),
        }
    }

    /// The status write that records what both sides agree on.
    fn record(&mut self, action: Action) -> Result<(), TestCaseError> {
        let value = self.server_value(action)?;
        let epoch = epoch_name(self.epoch);
        let cr = self.cr_mut(action)?;
        if cr.value != value {
            return fail(format!("{action:?} records a sync of different sides"));
        }
        cr.last_synced = Some(LastSynced {
            digest: digest(value),
            generation: cr.generation,
            epoch,
        });
        Ok(())
    }

    fn release(&mut self, action: Action) -> Result<(), TestCaseError> {
        let cr = self.cr_mut(action)?;
        if !cr.deleting {
            return fail(format!("{action:?} on a CR not being deleted"));
        }
        self.cr = None;
        Ok(())
    }

    /// Both sides agree and the CR's record says so.
    fn agreed(&self) -> bool {
        match (&self.cr, self.server) {
            (Some(cr), Some(value)) => {
                cr.value == value
                    && cr.last_synced
                        == Some(LastSynced {
                            digest: digest(value),
                            generation: cr.generation,
                            epoch: epoch_name(self.epoch),
                        })
            }
            _ => false,
        }
    }

    /// The finalizer is where the design wants it: on every live CR in the modes that delete
    /// on the server, on none in FromServer.
    fn check_finalizer(&self) -> Result<(), TestCaseError> {
        if let Some(cr) = &self.cr
            && !cr.paused
        {
            prop_assert!(!cr.deleting, "a CR left in deletion: {:?}", self);
            let wanted = self.settings.mode != SyncMode::FromServer;
            prop_assert_eq!(cr.has_finalizer, wanted, "finalizer of {:?}", self);
        }
        Ok(())
    }
}

/// What one settling did.
#[derive(Debug, Default)]
struct Settling {
    /// The actions executed (all write).
    actions: Vec<Action>,
    /// How many of them crashed.
    crashes: usize,
    /// The decision at quiescence.
    last: Option<Decision>,
}

/// Runs the engine until it decides nothing more: the server is unreachable for the first
/// `outage` reconciles, executions crash as `crashes` says. At quiescence, an echo (one more
/// reconcile, as for the event of our own last write) must decide the same: nothing.
fn settle(world: &mut World, crashes: &[bool], outage: usize) -> Result<Settling, TestCaseError> {
    let mut crashes = crashes.iter().copied();
    let mut outage_left = outage;
    let mut settling = Settling::default();
    for _ in 0..MAX_STEPS {
        world.reachable = outage_left == 0;
        outage_left = outage_left.saturating_sub(1);
        let decision = decide(&world.observe());
        if !decision.action.writes() {
            if !world.reachable {
                continue;
            }
            prop_assert_eq!(
                decision.action,
                Action::Nothing,
                "waits for ever: {:?}",
                world
            );
            let echo = decide(&world.observe());
            prop_assert_eq!(&echo, &decision, "the echo decided otherwise");
            settling.last = Some(decision);
            return Ok(settling);
        }
        let crash = crashes.next().unwrap_or(false);
        world.execute(decision.action, crash)?;
        settling.actions.push(decision.action);
        settling.crashes += usize::from(crash);
    }
    fail(format!(
        "no fixed point after {MAX_STEPS} decisions: {world:?}"
    ))
}

// ---- The oracle ------------------------------------------------------------------------------

/// The sync history of the current CR, as the design defines "last synced", kept by the oracle
/// from the operations and the prescribed outcomes (never read from the world's record).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct History {
    /// The value both sides last agreed on, and the epoch then; `None`: never synced.
    agreed: Option<(Value, u32)>,
    /// A user changed the CR's spec since (its generation moved).
    cr_edited: bool,
}

impl History {
    fn on_op(&mut self, op: Op, before: &World, after: &World) {
        let generation = |world: &World| world.cr.as_ref().map(|cr| cr.generation);
        match op {
            Op::UserCreate(_) | Op::UserDelete => {
                if before.cr.is_some() != after.cr.is_some() {
                    *self = Self::default();
                }
            }
            Op::UserEdit(_) => {
                if generation(before) != generation(after) {
                    self.cr_edited = true;
                }
            }
            Op::ClientCreate(_)
            | Op::ClientEdit(_)
            | Op::ClientRemove
            | Op::ServerRestart
            | Op::ServerWipe
            | Op::Pause
            | Op::Unpause => {}
        }
    }
}

/// How a round must end.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Prescribed {
    /// The CR's value and origin.
    cr: Option<(Value, Origin)>,
    /// The server's value.
    server: Option<Value>,
    /// Both sides agree (and the record says so).
    agreed: bool,
    /// The CR is paused: nothing may be written.
    frozen: bool,
}

/// The side whose version prevails when both changed or never agreed (design C1, E3):
/// `true` for the CR.
fn cr_prevails(settings: Settings) -> bool {
    match settings.mode {
        SyncMode::Bidirectional => settings.winner == ConflictWinner::Kubernetes,
        SyncMode::ToServer => true,
        SyncMode::FromServer => false,
    }
}

/// How the world must settle from `world` (just after a round's operations), by the design.
fn prescribe(world: &World, history: &History) -> Result<Prescribed, TestCaseError> {
    let settings = world.settings;
    let pushes = settings.mode != SyncMode::FromServer;
    let agreed = |value: Value, origin: Origin| Prescribed {
        cr: Some((value, origin)),
        server: Some(value),
        agreed: true,
        frozen: false,
    };
    let unchanged = |frozen: bool| Prescribed {
        cr: world.cr.as_ref().map(|cr| (cr.value, cr.origin)),
        server: world.server,
        // Frozen: as it was; otherwise the exceptions where the sides stay apart.
        agreed: frozen && world.agreed(),
        frozen,
    };
    let gone = Prescribed {
        cr: None,
        server: None,
        agreed: false,
        frozen: false,
    };
    let Some(cr) = &world.cr else {
        return Ok(match world.server {
            None => gone,
            // E3: ignored in ToServer; S1 otherwise.
            Some(_) if settings.mode == SyncMode::ToServer => unchanged(false),
            Some(value) => agreed(value, Origin::Server),
        });
    };
    if cr.paused {
        // E2.
        return Ok(unchanged(true));
    }
    let (v, origin) = (cr.value, cr.origin);
    if cr.deleting {
        // K3 (a CR being deleted has the finalizer, which FromServer never adds).
        prop_assert!(pushes, "a CR in deletion in FromServer: {:?}", world);
        return Ok(gone);
    }
    Ok(match (world.server, history.agreed) {
        (Some(w), _) if v == w => agreed(v, origin),
        // Never synced, both exist and differ.
        (Some(w), None) => {
            if cr_prevails(settings) {
                agreed(v, origin)
            } else {
                agreed(w, origin)
            }
        }
        (Some(w), Some((base, _))) => match (history.cr_edited, w != base) {
            (true, false) if pushes => agreed(v, origin),
            (true, false) => unchanged(false), // FromServer: ReadOnlyMode.
            (false, true) if settings.mode == SyncMode::ToServer => agreed(v, origin),
            (false, true) => agreed(w, origin),
            (true, true) if cr_prevails(settings) => agreed(v, origin),
            (true, true) => agreed(w, origin),
            (false, false) => return fail(format!("{v} != {w} though neither changed")),
        },
        // K1; FromServer does not create.
        (None, None) if pushes => agreed(v, origin),
        (None, None) => unchanged(false),
        (None, Some((_, epoch))) => {
            let lost = epoch != world.epoch || world.absence == Absence::Missing;
            match settings.mode {
                // R2, R3: recreated, never taken as deleted.
                SyncMode::Bidirectional | SyncMode::ToServer if lost => agreed(v, origin),
                SyncMode::FromServer if lost => unchanged(false),
                // S3, unless the CR has an unsynced edit.
                SyncMode::Bidirectional if history.cr_edited => agreed(v, origin),
                SyncMode::Bidirectional | SyncMode::FromServer => gone,
                SyncMode::ToServer => agreed(v, origin),
            }
        }
    })
}

// ---- Strategies ------------------------------------------------------------------------------

fn value() -> impl Strategy<Value = Value> {
    0u8..3
}

fn settings() -> impl Strategy<Value = Settings> {
    (
        prop_oneof![
            Just(SyncMode::Bidirectional),
            Just(SyncMode::ToServer),
            Just(SyncMode::FromServer),
        ],
        prop_oneof![
            Just(ConflictWinner::Kubernetes),
            Just(ConflictWinner::Server)
        ],
        any::<bool>(),
        prop::bool::weighted(0.25),
    )
        .prop_map(|(mode, winner, volatile, immutable)| Settings {
            mode,
            winner,
            volatile,
            immutable,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => value().prop_map(Op::UserCreate),
        4 => value().prop_map(Op::UserEdit),
        1 => Just(Op::UserDelete),
        5 => value().prop_map(Op::ClientCreate),
        4 => value().prop_map(Op::ClientEdit),
        2 => Just(Op::ClientRemove),
        1 => Just(Op::ServerRestart),
        1 => Just(Op::ServerWipe),
        1 => Just(Op::Pause),
        2 => Just(Op::Unpause),
    ]
}

#[derive(Clone, Debug)]
struct Round {
    ops: Vec<Op>,
    crashes: Vec<bool>,
    outage: usize,
}

fn round() -> impl Strategy<Value = Round> {
    (
        prop::collection::vec(op(), 0..4),
        prop::collection::vec(prop::bool::weighted(0.3), 0..4),
        prop_oneof![3 => Just(0usize), 1 => 1usize..3],
    )
        .prop_map(|(ops, crashes, outage)| Round {
            ops,
            crashes,
            outage,
        })
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Op(Op),
    /// One reconcile; the execution of its action may crash after its first write.
    Reconcile {
        crash: bool,
    },
    /// The server becomes unreachable (`true`) or reachable again.
    Outage(bool),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => op().prop_map(Step::Op),
        6 => prop::bool::weighted(0.25).prop_map(|crash| Step::Reconcile { crash }),
        1 => any::<bool>().prop_map(Step::Outage),
    ]
}

// ---- The tests -------------------------------------------------------------------------------

fn run_rounds(settings: Settings, rounds: &[Round]) -> Result<(), TestCaseError> {
    let mut world = World::new(settings);
    let mut history = History::default();
    for round in rounds {
        for &op in &round.ops {
            let before = world.clone();
            world.apply(op);
            history.on_op(op, &before, &world);
        }
        let prescribed = prescribe(&world, &history)?;
        let before = world.clone();
        let settling = settle(&mut world, &round.crashes, round.outage)?;

        let actual = Prescribed {
            cr: world.cr.as_ref().map(|cr| (cr.value, cr.origin)),
            server: world.server,
            agreed: world.agreed(),
            frozen: prescribed.frozen,
        };
        prop_assert_eq!(&actual, &prescribed, "round {:?} from {:?}", round, before);
        if prescribed.frozen {
            // E2: nothing written to either side.
            prop_assert!(
                settling.actions.is_empty(),
                "paused, yet {:?}",
                settling.actions
            );
            world.reachable = before.reachable;
            prop_assert_eq!(&world, &before);
            continue;
        }
        world.check_finalizer()?;
        let reason = match settling.last.as_ref().and_then(|d| d.status.clone()) {
            Some(Status::Ready { reason, .. }) => Some(reason),
            Some(Status::Paused { .. }) | None => None,
        };
        if prescribed.agreed {
            prop_assert_eq!(reason, Some(Reason::Synced));
        } else if world.cr.is_some() {
            prop_assert_eq!(reason, Some(Reason::ReadOnlyMode));
        }
        // L1, L2: one change on a side costs one write on the other (plus the finalizer of a
        // new CR); a crash costs at most one more (finishing the interrupted write); a round
        // without operations costs nothing.
        let finalizers = settling
            .actions
            .iter()
            .filter(|a| **a == Action::AddFinalizer)
            .count();
        prop_assert!(finalizers <= 1, "{:?}", settling.actions);
        prop_assert!(
            settling.actions.len() - finalizers <= 1 + settling.crashes,
            "too many writes: {:?}",
            settling.actions
        );
        if round.ops.is_empty() {
            prop_assert!(settling.actions.is_empty(), "writes while idle");
        }
        history = match (&prescribed.cr, prescribed.agreed) {
            (None, _) => History::default(),
            (Some((value, _)), true) => History {
                agreed: Some((*value, world.epoch)),
                cr_edited: false,
            },
            (Some(_), false) => history,
        };
    }
    Ok(())
}

/// What the table says the last operation must lead to, when it hit an object in sync (both
/// sides equal and recorded): `Some((cr, server))`. Also: a positive removal of an object whose
/// CR holds no user change - a mirror never edited, even one whose first record a crash lost -
/// must not bring the object back (S3, R1) where server removals delete CRs.
fn effect_on_synced(world: &World, op: Op) -> Option<(Option<Value>, Option<Value>)> {
    let pure_mirror = world.cr.as_ref().is_some_and(|cr| {
        cr.origin == Origin::Server
            && cr.generation == 1
            && cr.last_synced.is_none()
            && !cr.paused
            && !cr.deleting
    });
    if pure_mirror && op == Op::ClientRemove && world.server.is_some() {
        return Some((None, None));
    }
    if !world.agreed() {
        return None;
    }
    let cr = world.cr.as_ref()?;
    if cr.paused || cr.deleting {
        return None;
    }
    let v = cr.value;
    let mode = world.settings.mode;
    let pushes = mode != SyncMode::FromServer;
    Some(match op {
        Op::UserEdit(value) if pushes => (Some(value), Some(value)),
        Op::UserEdit(value) => (Some(value), Some(v)),
        // K3; in FromServer the CR goes alone and the object is mirrored again.
        Op::UserDelete if pushes => (None, None),
        Op::UserDelete => (Some(v), Some(v)),
        Op::ClientEdit(_) if mode == SyncMode::ToServer => (Some(v), Some(v)),
        Op::ClientEdit(value) => (Some(value), Some(value)),
        // S3: no resurrection; ToServer recreates.
        Op::ClientRemove if mode == SyncMode::ToServer => (Some(v), Some(v)),
        Op::ClientRemove => (None, None),
        Op::ServerRestart if !world.settings.volatile => (Some(v), Some(v)),
        // R2, R3.
        Op::ServerRestart | Op::ServerWipe if pushes => (Some(v), Some(v)),
        Op::ServerRestart | Op::ServerWipe => (Some(v), None),
        Op::UserCreate(_) | Op::ClientCreate(_) | Op::Pause | Op::Unpause => (Some(v), Some(v)),
    })
}

fn run_interleaving(settings: Settings, steps: &[Step]) -> Result<(), TestCaseError> {
    let mut world = World::new(settings);
    let mut expected_last = None;
    for &step in steps {
        match step {
            Step::Op(op) => {
                expected_last = effect_on_synced(&world, op);
                world.apply(op);
            }
            Step::Reconcile { crash } => {
                let decision = decide(&world.observe());
                world.execute(decision.action, crash)?;
            }
            Step::Outage(down) => world.reachable = !down,
        }
    }
    world.apply(Op::Unpause);
    settle(&mut world, &[], 0)?;
    world.check_finalizer()?;

    // Both sides agree, or a documented exception holds.
    let mode = settings.mode;
    match (&world.cr, world.server) {
        (None, None) => {}
        (None, Some(_)) => prop_assert_eq!(mode, SyncMode::ToServer, "not mirrored: {:?}", world),
        (Some(_), None) => {
            prop_assert_eq!(mode, SyncMode::FromServer, "not created: {:?}", world)
        }
        (Some(cr), Some(value)) => {
            if !world.agreed() {
                // FromServer: an edit of the CR, not pushed (ReadOnlyMode).
                prop_assert_eq!(mode, SyncMode::FromServer, "disagree: {:?}", world);
                let recorded = cr.last_synced.clone();
                prop_assert!(
                    recorded.is_some_and(|r| r.generation != cr.generation && r.digest == digest(value)),
                    "disagree: {:?}",
                    world
                );
            }
        }
    }
    if let Some((cr, server)) = expected_last {
        let actual = (world.cr.as_ref().map(|cr| cr.value), world.server);
        prop_assert_eq!(
            actual,
            (cr, server),
            "the last operation's effect: {:?}",
            world
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn rounds_settle_to_what_the_table_prescribes(
        settings in settings(),
        rounds in prop::collection::vec(round(), 1..10),
    ) {
        run_rounds(settings, &rounds)?;
    }

    #[test]
    fn any_interleaving_converges_without_resurrection(
        settings in settings(),
        steps in prop::collection::vec(step(), 0..40),
    ) {
        run_interleaving(settings, &steps)?;
    }
}

/// A few histories spelled out, as documentation of the model and a check of the oracle.
#[test]
fn spelled_out_histories() {
    let bidirectional = Settings {
        mode: SyncMode::Bidirectional,
        winner: ConflictWinner::Kubernetes,
        volatile: true,
        immutable: false,
    };
    let round = |ops: Vec<Op>, crashes: Vec<bool>| Round {
        ops,
        crashes,
        outage: 0,
    };
    let cases = [
        // K1, crash before the record, then a server edit (S2) and a crash again.
        vec![
            round(vec![Op::UserCreate(1)], vec![false, true]),
            round(vec![Op::ClientEdit(2)], vec![true]),
        ],
        // S1, then a conflict (C1) won by the CR, then S3.
        vec![
            round(vec![Op::ClientCreate(1)], vec![true]),
            round(vec![Op::UserEdit(2), Op::ClientEdit(0)], vec![]),
            round(vec![Op::ClientRemove], vec![]),
        ],
        // R2: a restart loses the volatile object; R3: a wipe loses it again.
        vec![
            round(vec![Op::UserCreate(1)], vec![]),
            round(vec![Op::ServerRestart], vec![true]),
            round(vec![Op::ServerWipe], vec![]),
        ],
        // E2: changes while paused are settled by the table on unpause.
        vec![
            round(vec![Op::UserCreate(1)], vec![]),
            round(vec![Op::Pause, Op::UserEdit(2), Op::ClientEdit(0)], vec![]),
            round(vec![Op::Unpause], vec![]),
        ],
    ];
    for rounds in cases {
        for mode in [
            SyncMode::Bidirectional,
            SyncMode::ToServer,
            SyncMode::FromServer,
        ] {
            for winner in [ConflictWinner::Kubernetes, ConflictWinner::Server] {
                let settings = Settings {
                    mode,
                    winner,
                    ..bidirectional
                };
                if let Err(error) = run_rounds(settings, &rounds) {
                    panic!("{settings:?} {rounds:?}: {error}");
                }
            }
        }
    }
}
