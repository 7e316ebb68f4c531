//! The chaos run: a private server node behind a fault proxy, the real resources operator
//! (one or two replicas, as its own ServiceAccount) talking to it through the proxy, the
//! driver talking to both sides directly; seeded operations and faults; then convergence and
//! the oracle's check.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::json;

use super::check::{Mismatch, check};
use super::model::Slot;
use super::oracle::{Entry, Expect, Outcome, expected, history};
use super::plan::{Fault, Profile, Scheduled, Winner, choose, schedule};
use super::rng::Rng;
use super::world::Sides;
use crate::node::{Node, NodeGuard};
use crate::operator::{CLUSTER, Fixture, Operator, Options, SERIAL};
use crate::proxy::FaultProxy;

/// Operator flags of a run: counters listed every second (default 10 s), short leases.
const OPERATOR_ARGS: [&str; 7] = [
    "--counter-list-interval=1s",
    "--lease-duration",
    "6s",
    "--lease-renew-deadline",
    "4s",
    "--lease-retry-period",
    "1s",
];
/// Convergence must still hold this long after it was first seen.
const SETTLE: Duration = Duration::from_secs(3);

/// What a run did and found.
#[derive(Debug)]
pub struct Report {
    pub profile: Profile,
    pub schedule: Vec<Scheduled>,
    pub ops_applied: usize,
    pub ops_refused: usize,
    pub ops_on_terminating: usize,
    /// Operations by side and action (`cr create`, `server delete`...).
    pub ops_by_kind: BTreeMap<String, usize>,
    pub faults: BTreeMap<&'static str, usize>,
    /// Time from the last operation (and the end of the last fault) to convergence.
    pub convergence: Option<Duration>,
    /// Convergence waits before server restarts: (what, time).
    pub checkpoints: Vec<(String, Duration)>,
    pub mismatches: Vec<String>,
    pub wall: Duration,
    pub logs: Vec<String>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = &self.profile;
        writeln!(
            f,
            "chaos {} seed={} winner={} replicas={} slots={}x5",
            p.name,
            p.seed,
            p.winner.as_str(),
            p.replicas,
            p.slots_per_kind
        )?;
        writeln!(f, "fault schedule:")?;
        for s in &self.schedule {
            writeln!(f, "  {s}")?;
        }
        writeln!(
            f,
            "ops: {} issued, {} applied, {} refused, {} on a CR being deleted",
            self.ops_applied + self.ops_refused + self.ops_on_terminating,
            self.ops_applied,
            self.ops_refused,
            self.ops_on_terminating
        )?;
        let kinds: Vec<String> = self
            .ops_by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        writeln!(f, "ops by type: {}", kinds.join(", "))?;
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        writeln!(f, "faults injected: {}", faults.join(", "))?;
        for (what, took) in &self.checkpoints {
            writeln!(
                f,
                "checkpoint: {what}: converged in {:.1} s",
                took.as_secs_f64()
            )?;
        }
        match self.convergence {
            Some(t) => writeln!(f, "final convergence: {:.1} s", t.as_secs_f64())?,
            None => writeln!(f, "final convergence: not reached")?,
        }
        writeln!(f, "mismatches: {}", self.mismatches.len())?;
        for m in &self.mismatches {
            writeln!(f, "  {m}")?;
        }
        writeln!(f, "wall time: {:.1} s", self.wall.as_secs_f64())?;
        if !self.mismatches.is_empty() {
            writeln!(f, "operator logs: {}", self.logs.join(", "))?;
            writeln!(
                f,
                "reproduce: make chaos CHAOS_SEED={} (CHAOS_PROFILE={})",
                p.seed, p.name
            )?;
        }
        Ok(())
    }
}

/// The operator replicas of a run. Replica 0 is the fixture's own process; each restart gets
/// a new pod name (as a Deployment's pods do), which also keeps every process's log.
struct Replicas {
    extra: Vec<Option<Operator>>,
    /// The current pod name (`POD_NAME`, the Lease identity) of each replica.
    pods: Vec<String>,
    restarts: usize,
    logs: Vec<String>,
}

impl Replicas {
    fn pod_prefix(index: usize) -> String {
        format!("r{index}")
    }

    /// The replica holding the Lease, if any.
    async fn leader(&self, f: &Fixture) -> anyhow::Result<Option<usize>> {
        let leases: Api<Lease> = Api::namespaced(f.client.clone(), &f.ns.name);
        let holder = leases
            .get_opt(&common_crds::rbac::leader_lease_name(CLUSTER))
            .await?
            .and_then(|l| l.spec?.holder_identity);
        Ok(holder.and_then(|holder| {
            self.pods
                .iter()
                .position(|pod| *pod == holder)
                .filter(|i| self.alive(*i))
        }))
    }

    fn alive(&self, index: usize) -> bool {
        index == 0 || self.extra.get(index - 1).is_some_and(Option::is_some)
    }

    async fn kill(&mut self, f: &mut Fixture, index: usize) -> anyhow::Result<()> {
        if index == 0 {
            f.kill_operator().await
        } else if let Some(mut op) = self.extra[index - 1].take() {
            op.child.kill().await?;
            Ok(())
        } else {
            Ok(())
        }
    }

    async fn start(&mut self, f: &mut Fixture, index: usize) -> anyhow::Result<()> {
        self.restarts += 1;
        let mut launch = f.launch.clone();
        launch.instance = format!("{}-{}", Self::pod_prefix(index), self.restarts);
        let operator = Operator::start(&launch).await?;
        self.pods[index] = launch.pod_name();
        self.logs.push(operator.log.display().to_string());
        if index == 0 {
            f.launch = launch;
            f.operator = operator;
        } else {
            self.extra[index - 1] = Some(operator);
        }
        Ok(())
    }
}

/// Runs `profile` on a private node at `offset` (of the resources-operator range) and returns
/// the report; an `Err` is a failure of the harness, not a mismatch.
pub async fn run(profile: Profile, offset: u16) -> anyhow::Result<Report> {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let node = Node::new(&format!("chaos-{}", profile.name), offset);
    let guard = {
        let node = node.clone();
        tokio::task::spawn_blocking(move || -> anyhow::Result<NodeGuard> {
            node.stop_and_wipe()?;
            node.start()?;
            Ok(NodeGuard(node))
        })
        .await??
    };
    let proxy = FaultProxy::for_url(&node.url()).await?;
    let options = Options {
        spec: json!({ "resourcesOperator": { "conflictWinner": profile.winner.as_str() } }),
        args: OPERATOR_ARGS.iter().map(|a| a.to_string()).collect(),
        infinispan_url: Some(proxy.url()),
        test_url: Some(node.url()),
        ..Options::default()
    };
    let mut f = Fixture::with_options(&format!("chaos-{}", profile.name), options).await?;
    let mut replicas = Replicas {
        extra: (1..profile.replicas).map(|_| None).collect(),
        pods: (0..profile.replicas.max(1))
            .map(|_| f.launch.pod_name())
            .collect(),
        restarts: 0,
        logs: vec![f.operator.log.display().to_string()],
    };
    let result = async {
        for index in 1..profile.replicas {
            replicas.start(&mut f, index).await?;
        }
        drive(&profile, &mut f, &mut replicas, &proxy, &node, started).await
    }
    .await;
    // Teardown: every replica stopped (the fixture's one by its teardown), node stopped.
    for op in replicas.extra.iter_mut().filter_map(Option::take) {
        let _ = op.stop().await;
    }
    let teardown = f.teardown().await;
    drop(proxy);
    tokio::task::spawn_blocking(move || drop(guard)).await?;
    let mut report = result?;
    teardown?;
    report.logs = replicas.logs;
    report.wall = started.elapsed();
    Ok(report)
}

/// The part of a run between setup and teardown.
async fn drive(
    profile: &Profile,
    f: &mut Fixture,
    replicas: &mut Replicas,
    proxy: &FaultProxy,
    node: &Node,
    started: Instant,
) -> anyhow::Result<Report> {
    let mut rng = Rng::new(profile.seed);
    let plan = schedule(&mut rng, profile);
    println!(
        "chaos {}: seed {}, {} ops, {} faults scheduled",
        profile.name,
        profile.seed,
        profile.ops,
        plan.len()
    );
    let sides = Sides {
        client: f.client.clone(),
        namespace: f.ns.name.clone(),
        cluster: CLUSTER.to_string(),
        rest: f.rest.clone(),
    };
    let slots = Slot::all(profile.slots_per_kind);
    let mut log: Vec<Entry> = Vec::new();
    let mut faults: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut checkpoints = Vec::new();
    // Replicas to restart after the paced op of this number.
    let mut down: Vec<(u64, usize)> = Vec::new();
    let mut next_fault = 0usize;
    let mut mismatches: Vec<String> = Vec::new();
    // Every operation's number (and content version), paced or extra.
    let mut seq = 0u64;

    for paced in 1..=profile.ops as u64 {
        // Faults due before this operation.
        while let Some(s) = plan.get(next_fault).filter(|s| s.before_op <= paced) {
            next_fault += 1;
            match s.fault {
                Fault::Kill { down_ops } => {
                    let target = if profile.replicas > 1 {
                        // Leadership may be changing hands (the Lease still names a killed
                        // pod): wait for a live leader, at most a lease duration and a bit.
                        let mut leader = None;
                        for _ in 0..20 {
                            leader = replicas.leader(f).await?;
                            if leader.is_some() {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        }
                        leader
                    } else {
                        Some(0)
                    };
                    let target =
                        target.filter(|i| replicas.alive(*i) && !down.iter().any(|d| d.1 == *i));
                    if let Some(index) = target {
                        replicas.kill(f, index).await?;
                        down.push((paced + down_ops as u64, index));
                        *faults.entry("kill").or_default() += 1;
                        println!("before #{}: killed replica {index} (kill -9)", seq + 1);
                    } else {
                        *faults.entry("kill skipped (no live leader)").or_default() += 1;
                    }
                }
                Fault::Cut => {
                    proxy.cut();
                    *faults.entry("cut").or_default() += 1;
                }
                Fault::Stall { secs } => {
                    proxy.stall(true);
                    *faults.entry("stall").or_default() += 1;
                    println!(
                        "before #{}: every operator connection stalled for {secs} s",
                        seq + 1
                    );
                    let end = Instant::now() + Duration::from_secs(secs);
                    while Instant::now() < end {
                        seq += 1;
                        step(
                            &sides, profile, &mut rng, &slots, seq, false, &mut log, started,
                        )
                        .await?;
                        tokio::time::sleep(Duration::from_millis(900)).await;
                    }
                    proxy.stall(false);
                }
                Fault::ServerRestart | Fault::ServerWipe => {
                    // Settle first (see the oracle): restart the killed replicas.
                    for (_, index) in std::mem::take(&mut down) {
                        replicas.start(f, index).await?;
                    }
                    let what = format!("before the {} at #{}", s.fault.name(), seq + 1);
                    let expect = expected(&slots, &log, profile.winner);
                    let (took, found) = converge(&sides, profile, &expect, &log, CONVERGE).await?;
                    checkpoints.push((what.clone(), took));
                    if !found.is_empty() {
                        mismatches.extend(found.iter().map(|m| format!("{what}: {m}")));
                        return Ok(report(
                            profile,
                            plan,
                            &log,
                            faults,
                            None,
                            checkpoints,
                            mismatches,
                        ));
                    }
                    let wipe = s.fault == Fault::ServerWipe;
                    let n = node.clone();
                    let mut restart = tokio::task::spawn_blocking(move || {
                        if wipe {
                            n.stop_and_wipe()?
                        } else {
                            n.stop()?
                        }
                        n.start()
                    });
                    *faults.entry(s.fault.name()).or_default() += 1;
                    println!("before #{}: {}", seq + 1, s.fault.name());
                    // CR operations go on while the server is down and starting.
                    loop {
                        tokio::select! {
                            done = &mut restart => { done??; break; }
                            _ = tokio::time::sleep(Duration::from_millis(700)) => {
                                seq += 1;
                                step(&sides, profile, &mut rng, &slots, seq, true, &mut log, started).await?;
                            }
                        }
                    }
                }
            }
        }
        seq += 1;
        step(
            &sides, profile, &mut rng, &slots, seq, false, &mut log, started,
        )
        .await?;
        // Kills ending after this operation.
        let (due, later): (Vec<_>, Vec<_>) =
            down.into_iter().partition(|(until, _)| *until <= paced);
        down = later;
        for (_, index) in due {
            replicas.start(f, index).await?;
            println!("after #{seq}: replica {index} restarted");
        }
        let pause = rng.below(profile.max_pause_ms + 1);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    for (_, index) in std::mem::take(&mut down) {
        replicas.start(f, index).await?;
    }
    let expect = expected(&slots, &log, profile.winner);
    let (took, found) = converge(&sides, profile, &expect, &log, CONVERGE).await?;
    let convergence = found.is_empty().then_some(took);
    mismatches.extend(found.iter().map(ToString::to_string));
    Ok(report(
        profile,
        plan,
        &log,
        faults,
        convergence,
        checkpoints,
        mismatches,
    ))
}

/// Bound on one convergence (a stalled connection is given up after the stream's probe,
/// 15 s + 5 s, and a pooled one after a request timeout; reconnect backoff up to 30 s; a
/// leader's lease 6 s).
const CONVERGE: Duration = Duration::from_secs(240);

/// Draws and issues operation `seq` (up to 12 slots tried for one that allows any); with
/// `kube_only` (the server is restarting) only CR operations.
#[allow(clippy::too_many_arguments)]
async fn step(
    sides: &Sides,
    profile: &Profile,
    rng: &mut Rng,
    slots: &[Slot],
    seq: u64,
    kube_only: bool,
    log: &mut Vec<Entry>,
    started: Instant,
) -> anyhow::Result<()> {
    for _ in 0..12 {
        let slot = slots[rng.below(slots.len() as u64) as usize];
        let view = read_view(sides, slot, kube_only).await?;
        let op = if kube_only {
            let mut kube_view = view.clone();
            // Server unknown: only the CR side's gates apply.
            kube_view.server = None;
            choose(rng, seq, slot, &kube_view, profile.winner)
                .filter(|op| op.side == super::plan::Side::Kube)
        } else {
            choose(rng, seq, slot, &view, profile.winner)
        };
        let Some(op) = op else { continue };
        let outcome = sides.execute(&op, &view).await?;
        log.push(Entry {
            op,
            outcome,
            at_ms: started.elapsed().as_millis() as u64,
        });
        return Ok(());
    }
    Ok(())
}

/// [`Sides::view`], tried again on a failure for a few seconds: reads have no side effect, and
/// the server has read races of its own (a 500 from `list templates`, `ISPN000436` from
/// `list caches`, while objects come and go) besides the driver's own restarts of it.
async fn read_view(
    sides: &Sides,
    slot: Slot,
    kube_only: bool,
) -> anyhow::Result<super::plan::SlotView> {
    let mut tries = 0;
    loop {
        match sides.view(slot, kube_only).await {
            Ok(view) => return Ok(view),
            Err(error) if tries < 10 => {
                tries += 1;
                println!("reading {slot} failed ({error:#}), trying again");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => return Err(error.context(format!("reading {slot}"))),
        }
    }
}

/// Waits until the world matches the oracle (and still does [`SETTLE`] later); returns the
/// time it took and the mismatches left when `timeout` ran out (empty: converged).
async fn converge(
    sides: &Sides,
    profile: &Profile,
    expect: &BTreeMap<Slot, Expect>,
    log: &[Entry],
    timeout: Duration,
) -> anyhow::Result<(Duration, Vec<Mismatch>)> {
    let start = Instant::now();
    let ever: BTreeSet<Slot> = log
        .iter()
        .filter(|e| e.outcome == Outcome::Applied && e.op.version().is_some())
        .map(|e| e.op.slot)
        .collect();
    let mut last = Vec::new();
    let mut agreed_at: Option<Instant> = None;
    while start.elapsed() < timeout {
        let found = match sides.world().await {
            Ok(world) => check(profile.slots_per_kind, expect, &ever, &world),
            // The server may still be starting: not converged.
            Err(error) => vec![Mismatch {
                slot: None,
                what: format!("cannot observe: {error:#}"),
            }],
        };
        if found.is_empty() {
            match agreed_at {
                Some(at) if at.elapsed() >= SETTLE => return Ok((at - start, Vec::new())),
                Some(_) => {}
                None => agreed_at = Some(Instant::now()),
            }
        } else {
            agreed_at = None;
            last = found;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Each mismatch with its object's history.
    let detailed = last
        .into_iter()
        .map(|m| {
            let what = match m.slot {
                Some(slot) => format!("{} [ops: {}]", m.what, history(log, slot).join("; ")),
                None => m.what,
            };
            Mismatch { slot: m.slot, what }
        })
        .collect();
    Ok((start.elapsed(), detailed))
}

fn report(
    profile: &Profile,
    schedule: Vec<Scheduled>,
    log: &[Entry],
    faults: BTreeMap<&'static str, usize>,
    convergence: Option<Duration>,
    checkpoints: Vec<(String, Duration)>,
    mismatches: Vec<String>,
) -> Report {
    let count = |f: &dyn Fn(&Outcome) -> bool| log.iter().filter(|e| f(&e.outcome)).count();
    let mut ops_by_kind = BTreeMap::new();
    for e in log {
        let text = e.op.to_string();
        let words: Vec<&str> = text.split(' ').skip(1).take(2).collect();
        *ops_by_kind.entry(words.join(" ")).or_default() += 1;
    }
    Report {
        profile: profile.clone(),
        schedule,
        ops_applied: count(&|o| *o == Outcome::Applied),
        ops_refused: count(&|o| matches!(o, Outcome::Refused(_))),
        ops_on_terminating: count(&|o| *o == Outcome::OnTerminating),
        ops_by_kind,
        faults,
        convergence,
        checkpoints,
        mismatches,
        wall: Duration::ZERO,
        logs: Vec::new(),
    }
}

/// The seed of `CHAOS_SEED`, else `default`.
pub fn seed_from_env(default: u64) -> anyhow::Result<u64> {
    match std::env::var("CHAOS_SEED") {
        Ok(text) if !text.trim().is_empty() => text
            .trim()
            .parse()
            .with_context(|| format!("CHAOS_SEED={text:?} is not a number")),
        _ => Ok(default),
    }
}

/// The conflict winner of `CHAOS_WINNER` (`Kubernetes`, the default, or `Server`).
pub fn winner_from_env() -> anyhow::Result<Winner> {
    match std::env::var("CHAOS_WINNER").as_deref() {
        Err(_) | Ok("") | Ok("Kubernetes") => Ok(Winner::Kubernetes),
        Ok("Server") => Ok(Winner::Server),
        Ok(other) => anyhow::bail!("CHAOS_WINNER={other:?}: Kubernetes or Server"),
    }
}
