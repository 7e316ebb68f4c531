//! The chaos run: a private server node behind a fault proxy, the real resources operator
//! (one or two replicas, as its own ServiceAccount) talking to it through the proxy, the
//! driver talking to both sides directly; seeded operations and faults (the testbed's
//! kube-apiserver restarted among them); then convergence and the oracle's check.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use serde_json::json;

use super::apiserver::ControlPlane;
use super::check::{Mismatch, check};
use super::model::Slot;
use super::oracle::{Entry, Expect, LoggedReset, Outcome, Reset, expected, history};
use super::plan::{
    Fault, Mode, Profile, Reach, Scheduled, SlotView, Winner, choose_within, schedule,
};
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
/// What the operator logs for each Lease read that failed (`operator_runtime::leadership`).
const LEASE_READ_FAILED: &str = "cannot read the Lease";
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
    /// Convergence waits before server and kube-apiserver restarts: (what, time).
    pub checkpoints: Vec<(String, Duration)>,
    /// Each kube-apiserver restart: how long it was down, what went on meanwhile.
    pub apiserver_restarts: Vec<String>,
    /// Replicas that exited by themselves (a leader that lost its Lease), each restarted.
    pub replica_exits: Vec<String>,
    /// What went wrong besides the objects: a replica that exited without losing its Lease,
    /// no leader after a kube-apiserver restart.
    pub failures: Vec<String>,
    pub mismatches: Vec<String>,
    /// The oracle's final states, by kind (`present`, `absent`, `unmirrored`, `read-only`):
    /// which cells of the mode the run ended in.
    pub expected_states: BTreeMap<&'static str, usize>,
    /// The same for every applied operation: the state it left its object in, by kind.
    pub states_reached: BTreeMap<&'static str, usize>,
    pub wall: Duration,
    pub logs: Vec<String>,
}

impl Report {
    /// Converged, every object as the oracle says, and the operator recovered by itself.
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty() && self.failures.is_empty() && self.convergence.is_some()
    }
}

/// What a run notes besides operations, faults and checkpoints (see [`Report`]).
#[derive(Debug, Default)]
struct Notes {
    apiserver_restarts: Vec<String>,
    replica_exits: Vec<String>,
    failures: Vec<String>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = &self.profile;
        writeln!(
            f,
            "chaos {} seed={} mode={} winner={} replicas={} slots={}x5",
            p.name,
            p.seed,
            p.mode.as_str(),
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
        writeln!(f, "ops by type: {}", counts(&self.ops_by_kind))?;
        writeln!(f, "faults injected: {}", counts(&self.faults))?;
        for (what, took) in &self.checkpoints {
            writeln!(
                f,
                "checkpoint: {what}: converged in {:.1} s",
                took.as_secs_f64()
            )?;
        }
        for line in &self.apiserver_restarts {
            writeln!(f, "kube-apiserver restart: {line}")?;
        }
        for line in &self.replica_exits {
            writeln!(f, "replica exit: {line}")?;
        }
        writeln!(
            f,
            "expected final states: {}",
            counts(&self.expected_states)
        )?;
        writeln!(
            f,
            "states applied operations left their object in: {}",
            counts(&self.states_reached)
        )?;
        match self.convergence {
            Some(t) => writeln!(f, "final convergence: {:.1} s", t.as_secs_f64())?,
            None => writeln!(f, "final convergence: not reached")?,
        }
        writeln!(f, "mismatches: {}", self.mismatches.len())?;
        for m in &self.mismatches {
            writeln!(f, "  {m}")?;
        }
        if !self.failures.is_empty() {
            writeln!(f, "failures: {}", self.failures.len())?;
            for m in &self.failures {
                writeln!(f, "  {m}")?;
            }
        }
        writeln!(f, "wall time: {:.1} s", self.wall.as_secs_f64())?;
        if !self.passed() {
            writeln!(f, "operator logs: {}", self.logs.join(", "))?;
            writeln!(
                f,
                "reproduce: make chaos CHAOS_PROFILE={} CHAOS_SEED={} CHAOS_MODE={} \
                 CHAOS_WINNER={}",
                p.name,
                p.seed,
                p.mode.as_str(),
                p.winner.as_str()
            )?;
        }
        Ok(())
    }
}

/// `key count` pairs of a tally, comma-separated (the report's lines).
fn counts<K: std::fmt::Display>(tally: &BTreeMap<K, usize>) -> String {
    tally
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
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

    /// The replica holding the Lease, if any and running (not one the driver killed and has
    /// not restarted yet, in `down`: the Lease names it until a standby takes over).
    async fn leader(&self, f: &Fixture, down: &[(u64, usize)]) -> anyhow::Result<Option<usize>> {
        let leases: Api<Lease> = Api::namespaced(f.client.clone(), &f.ns.name);
        let holder = leases
            .get_opt(&common_crds::rbac::leader_lease_name(CLUSTER))
            .await?
            .and_then(|l| l.spec?.holder_identity);
        Ok(holder.and_then(|holder| {
            self.pods
                .iter()
                .position(|pod| *pod == holder)
                .filter(|i| self.alive(*i) && !down.iter().any(|(_, d)| d == i))
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

    /// The replicas that ended by themselves, the ones the driver killed (`down`) aside.
    fn exited(&mut self, f: &mut Fixture, down: &[(u64, usize)]) -> anyhow::Result<Vec<Exit>> {
        let mut out = Vec::new();
        for index in 0..self.pods.len() {
            if down.iter().any(|(_, i)| *i == index) {
                continue;
            }
            let operator = if index == 0 {
                Some(&mut f.operator)
            } else {
                self.extra[index - 1].as_mut()
            };
            let Some(operator) = operator else { continue };
            if let Some(status) = operator.child.try_wait()? {
                let lost_lease = std::fs::read_to_string(&operator.log)
                    .unwrap_or_default()
                    .lines()
                    .rev()
                    .find(|line| line.contains("lost the leadership"))
                    .map(|line| line.trim_start_matches("error: ").to_string());
                out.push(Exit {
                    index,
                    pod: self.pods[index].clone(),
                    status,
                    lost_lease,
                    log: operator.log.clone(),
                });
            }
        }
        Ok(out)
    }

    /// Lines of every replica's log, past and present, that say a Lease read failed.
    fn failed_lease_reads(&self) -> usize {
        self.logs
            .iter()
            .map(|log| crate::process::count_log_lines(log.as_ref(), &[LEASE_READ_FAILED]))
            .sum()
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

/// A replica that ended by itself.
struct Exit {
    index: usize,
    pod: String,
    status: std::process::ExitStatus,
    /// Its log's line saying that it lost the leadership (and why), if any.
    lost_lease: Option<String>,
    log: PathBuf,
}

/// Restarts the replicas that exited by themselves, as Kubernetes restarts a pod's container
/// (here: a new process, under a new pod name), and notes each exit. A leader that lost its
/// Lease exits non-zero by design; any other exit is a failure.
async fn restart_exited(
    f: &mut Fixture,
    replicas: &mut Replicas,
    down: &[(u64, usize)],
    notes: &mut Notes,
    when: &str,
) -> anyhow::Result<usize> {
    let exits = replicas.exited(f, down)?;
    for exit in &exits {
        replicas.start(f, exit.index).await?;
        let Exit {
            index,
            pod,
            status,
            lost_lease,
            log,
        } = exit;
        let new_pod = &replicas.pods[*index];
        let line = match lost_lease {
            Some(why) if !status.success() => format!(
                "{when}: replica {index} ({pod}) exited ({status}) having lost the Lease \
                 [{why}]; restarted as {new_pod}"
            ),
            _ => {
                let line = format!(
                    "{when}: replica {index} ({pod}) exited ({status}) without losing the \
                     Lease (log: {}); restarted as {new_pod}",
                    log.display()
                );
                notes.failures.push(line.clone());
                line
            }
        };
        println!("{line}");
        notes.replica_exits.push(line);
    }
    Ok(exits.len())
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
        spec: json!({
            "resourcesOperator": {
                "syncMode": profile.mode.as_str(),
                "conflictWinner": profile.winner.as_str(),
            }
        }),
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
        "chaos {}: seed {}, mode {}, winner {}, {} ops, {} faults scheduled",
        profile.name,
        profile.seed,
        profile.mode.as_str(),
        profile.winner.as_str(),
        profile.ops,
        plan.len()
    );
    let mut sides = Sides {
        client: f.client.clone(),
        namespace: f.ns.name.clone(),
        cluster: CLUSTER.to_string(),
        rest: f.rest.clone(),
        past_runs: Default::default(),
    };
    let slots = Slot::all(profile.slots_per_kind);
    let mut log: Vec<Entry> = Vec::new();
    // Server restarts and wipes, where they came in the log (what the server lost).
    let mut resets: Vec<LoggedReset> = Vec::new();
    let mut faults: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut checkpoints = Vec::new();
    let mut notes = Notes::default();
    // Replicas to restart after the paced op of this number.
    let mut down: Vec<(u64, usize)> = Vec::new();
    let mut next_fault = 0usize;
    let mut mismatches: Vec<String> = Vec::new();
    // Every operation's number (and content version), paced or extra.
    let mut seq = 0u64;
    // The CRs as last seen before the kube-apiserver stopped (only while it is down).
    let mut frozen: BTreeMap<Slot, SlotView> = BTreeMap::new();

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
                            leader = replicas.leader(f, &down).await?;
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
                            &sides,
                            profile,
                            &mut rng,
                            &slots,
                            seq,
                            Reach::Both,
                            &frozen,
                            &mut log,
                            started,
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
                    let found = checkpoint(
                        &sides,
                        profile,
                        &slots,
                        (&log, &resets),
                        &what,
                        &mut checkpoints,
                    )
                    .await?;
                    if !found.is_empty() {
                        mismatches.extend(found);
                        return Ok(report(
                            profile,
                            plan,
                            (&log, &resets),
                            faults,
                            None,
                            checkpoints,
                            notes,
                            mismatches,
                        ));
                    }
                    let wipe = s.fault == Fault::ServerWipe;
                    // The records made so far name a server run that ends here: a server
                    // delete of a possibly volatile object waits until its CR is recorded in
                    // the next run (see `CrView::recorded_in_run`; finding 10).
                    let ended = sides.server_run_ends().await?;
                    println!(
                        "before #{}: {ended} epoch(s) recorded before the {} are past",
                        seq + 1,
                        s.fault.name()
                    );
                    // Whatever the server loses, it loses before the operations issued while
                    // it is down.
                    resets.push((log.len(), if wipe { Reset::Wipe } else { Reset::Restart }));
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
                                step(&sides, profile, &mut rng, &slots, seq,
                                    Reach::KubeOnly, &frozen, &mut log, started).await?;
                            }
                        }
                    }
                }
                Fault::ApiServerRestart { down_secs } => {
                    // Settled first, like a server restart: the CRs seen right before the stop
                    // are then what they stay until the kube-apiserver is back (the operator
                    // has nothing left to write), which gates the server operations meanwhile.
                    for (_, index) in std::mem::take(&mut down) {
                        replicas.start(f, index).await?;
                    }
                    let at = seq + 1;
                    let what = format!("before the {} at #{at}", s.fault.name());
                    let found = checkpoint(
                        &sides,
                        profile,
                        &slots,
                        (&log, &resets),
                        &what,
                        &mut checkpoints,
                    )
                    .await?;
                    if !found.is_empty() {
                        mismatches.extend(found);
                        return Ok(report(
                            profile,
                            plan,
                            (&log, &resets),
                            faults,
                            None,
                            checkpoints,
                            notes,
                            mismatches,
                        ));
                    }
                    let control = ControlPlane::discover(&f.testbed)?;
                    frozen.clear();
                    for slot in &slots {
                        let view =
                            read_view(&sides, *slot, Reach::KubeOnly, &BTreeMap::new()).await?;
                        frozen.insert(*slot, view);
                    }
                    let leader_before = replicas.leader(f, &down).await?;
                    let lease_reads_before = replicas.failed_lease_reads();
                    let ops_before = log.len();
                    let killed = Instant::now();
                    control.kill().await?;
                    *faults.entry(s.fault.name()).or_default() += 1;
                    println!(
                        "before #{at}: kube-apiserver killed (kill -9 of pid {}), started again \
                         in {down_secs} s",
                        control.pid()
                    );
                    // up.sh starts it again after `down_secs`, as the testbed starts it; server
                    // operations go on until it is done.
                    let mut up = tokio::spawn({
                        let control = control.clone();
                        async move {
                            tokio::time::sleep(Duration::from_secs(down_secs)).await;
                            control.start_again(UP_TIMEOUT).await
                        }
                    });
                    let outage = loop {
                        tokio::select! {
                            done = &mut up => break Ok(done),
                            _ = tokio::time::sleep(Duration::from_millis(700)) => {
                                seq += 1;
                                if let Err(error) = step(&sides, profile, &mut rng, &slots, seq,
                                    Reach::ServerOnly, &frozen, &mut log, started).await
                                {
                                    break Err(error);
                                }
                            }
                        }
                    };
                    let restarted = match outage {
                        Ok(done) => done?.with_context(|| {
                            format!(
                                "starting the kube-apiserver again (its log: {})",
                                control.log().display()
                            )
                        })?,
                        Err(error) => {
                            // Never leave the testbed without its API server.
                            let _ = up.await;
                            return Err(error.context("while the kube-apiserver was down"));
                        }
                    };
                    wait_ready(&f.client, &f.ns.name).await?;
                    let down_for = killed.elapsed();
                    frozen.clear();
                    println!(
                        "after #{seq}: kube-apiserver ready again (pid {}), {:.1} s after the \
                         kill",
                        restarted.pid,
                        down_for.as_secs_f64()
                    );
                    // The replicas survive or recover by themselves; a leader that could not
                    // renew its Lease meanwhile exits, and is restarted as its pod would be.
                    let when = format!("after the {} at #{at}", s.fault.name());
                    let exits_before = notes.replica_exits.len();
                    let leader_after =
                        settle_leadership(f, replicas, &down, &mut notes, &when).await?;
                    let name = |leader: Option<usize>| match leader {
                        Some(i) => format!("replica {i}"),
                        None => "none".to_string(),
                    };
                    let others = if restarted.also_started.is_empty() {
                        "it started nothing else".to_string()
                    } else {
                        format!("it also started {}", restarted.also_started.join(", "))
                    };
                    // Every replica retries its Lease each retry period (1 s): a count far
                    // above two a second of outage is a retry loop without a pause.
                    let lease_reads = replicas.failed_lease_reads() - lease_reads_before;
                    // At most a read per retry period and replica, with room for the log's
                    // other lines about the same failure.
                    let bound = 4 * profile.replicas.max(1) * (down_for.as_secs() as usize + 2);
                    if lease_reads > bound {
                        mismatches.push(format!(
                            "{when}: {lease_reads} failed Lease reads logged in {:.1} s of \
                             outage (at most {bound}): leader election retries without a pause",
                            down_for.as_secs_f64()
                        ));
                    }
                    notes.apiserver_restarts.push(format!(
                        "before #{at}: down {:.1} s (kill -9, {down_secs} s, then up.sh {:.1} s: \
                         {others}), {} server ops meanwhile; leader {} before, {} after; {} \
                         replica exit(s); {lease_reads} failed Lease reads logged",
                        down_for.as_secs_f64(),
                        restarted.took.as_secs_f64(),
                        log.len() - ops_before,
                        name(leader_before),
                        name(leader_after),
                        notes.replica_exits.len() - exits_before,
                    ));
                }
            }
        }
        seq += 1;
        step(
            &sides,
            profile,
            &mut rng,
            &slots,
            seq,
            Reach::Both,
            &frozen,
            &mut log,
            started,
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
        // Replicas that ended by themselves, as Kubernetes would restart them.
        restart_exited(f, replicas, &down, &mut notes, &format!("after #{seq}")).await?;
        let pause = rng.below(profile.max_pause_ms + 1);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    for (_, index) in std::mem::take(&mut down) {
        replicas.start(f, index).await?;
    }
    restart_exited(f, replicas, &down, &mut notes, "after the last operation").await?;
    let expect = expected(&slots, &log, &resets, profile.rules());
    let (took, found) = converge(&sides, profile, &expect, (&log, &resets), CONVERGE).await?;
    let convergence = found.is_empty().then_some(took);
    mismatches.extend(found.iter().map(ToString::to_string));
    // An exit during the final convergence counts too.
    restart_exited(
        f,
        replicas,
        &down,
        &mut notes,
        "after the final convergence",
    )
    .await?;
    Ok(report(
        profile,
        plan,
        (&log, &resets),
        faults,
        convergence,
        checkpoints,
        notes,
        mismatches,
    ))
}

/// Waits for convergence before a fault that needs a settled run (server and kube-apiserver
/// restarts); returns the mismatches left, if it did not converge.
async fn checkpoint(
    sides: &Sides,
    profile: &Profile,
    slots: &[Slot],
    log: (&[Entry], &[LoggedReset]),
    what: &str,
    checkpoints: &mut Vec<(String, Duration)>,
) -> anyhow::Result<Vec<String>> {
    let expect = expected(slots, log.0, log.1, profile.rules());
    let (took, found) = converge(sides, profile, &expect, log, CONVERGE).await?;
    checkpoints.push((what.to_string(), took));
    Ok(found.iter().map(|m| format!("{what}: {m}")).collect())
}

/// Bound on up.sh starting the kube-apiserver again (its own wait for `/readyz` is 120 s).
const UP_TIMEOUT: Duration = Duration::from_secs(240);
/// Bound on the driver's own client reading again once up.sh is done.
const READY: Duration = Duration::from_secs(60);
/// Bound on a replica renewing the Lease once the kube-apiserver is back (a lease duration, a
/// restart of an exited replica and its start, with room for a loaded machine).
const LEADERSHIP: Duration = Duration::from_secs(90);

/// Waits (at most [`READY`]) until the driver's own client reads from the kube-apiserver.
async fn wait_ready(client: &kube::Client, namespace: &str) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let deadline = Instant::now() + READY;
    loop {
        match namespaces.get(namespace).await {
            Ok(_) => return Ok(()),
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => {
                bail!("the kube-apiserver does not answer {READY:?} after up.sh: {error}")
            }
        }
    }
}

/// After a kube-apiserver restart: restarts the replicas that exit (a leader that could not
/// renew in time loses the Lease and exits) until a live replica renews the Lease, at most
/// [`LEADERSHIP`]; returns that leader. None in time is a failure of the operator, noted.
async fn settle_leadership(
    f: &mut Fixture,
    replicas: &mut Replicas,
    down: &[(u64, usize)],
    notes: &mut Notes,
    when: &str,
) -> anyhow::Result<Option<usize>> {
    let leases: Api<Lease> = Api::namespaced(f.client.clone(), &f.ns.name);
    let name = common_crds::rbac::leader_lease_name(CLUSTER);
    let version = |lease: Option<Lease>| lease.and_then(|l| l.metadata.resource_version);
    let first = version(leases.get_opt(&name).await?);
    let deadline = Instant::now() + LEADERSHIP;
    while Instant::now() < deadline {
        restart_exited(f, replicas, down, notes, when).await?;
        let renewed = version(leases.get_opt(&name).await?) != first;
        if renewed && let Some(leader) = replicas.leader(f, down).await? {
            // Still running a moment later: it holds.
            tokio::time::sleep(Duration::from_secs(1)).await;
            if restart_exited(f, replicas, down, notes, when).await? == 0 {
                return Ok(Some(leader));
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    notes.failures.push(format!(
        "{when}: no live replica renewed the Lease within {LEADERSHIP:?} of the kube-apiserver \
         being ready"
    ));
    Ok(None)
}

/// Bound on one convergence (a stalled connection is given up after the stream's probe,
/// 15 s + 5 s, and a pooled one after a request timeout; reconnect backoff up to 30 s; a
/// leader's lease 6 s).
const CONVERGE: Duration = Duration::from_secs(240);

/// Draws and issues operation `seq` (up to 12 slots tried for one that allows any), on the
/// sides `reach` allows: only CR operations while the server restarts, only server ones while
/// the kube-apiserver does (gated on `frozen`, the CRs as they were when it stopped).
#[allow(clippy::too_many_arguments)]
async fn step(
    sides: &Sides,
    profile: &Profile,
    rng: &mut Rng,
    slots: &[Slot],
    seq: u64,
    reach: Reach,
    frozen: &BTreeMap<Slot, SlotView>,
    log: &mut Vec<Entry>,
    started: Instant,
) -> anyhow::Result<()> {
    for _ in 0..12 {
        let slot = slots[rng.below(slots.len() as u64) as usize];
        let view = read_view(sides, slot, reach, frozen).await?;
        let Some(op) = choose_within(rng, seq, slot, &view, profile.rules(), reach) else {
            continue;
        };
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
/// `list caches`, while objects come and go) besides the driver's own restarts of it. With
/// [`Reach::ServerOnly`] the CRs are the ones of `frozen`.
async fn read_view(
    sides: &Sides,
    slot: Slot,
    reach: Reach,
    frozen: &BTreeMap<Slot, SlotView>,
) -> anyhow::Result<SlotView> {
    let mut tries = 0;
    let mut view = loop {
        match sides.view(slot, reach).await {
            Ok(view) => break view,
            Err(error) if tries < 10 => {
                tries += 1;
                println!("reading {slot} failed ({error:#}), trying again");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => return Err(error.context(format!("reading {slot}"))),
        }
    };
    if reach == Reach::ServerOnly {
        let seen = frozen
            .get(&slot)
            .with_context(|| format!("{slot}: not seen before the kube-apiserver stopped"))?;
        view.user = seen.user.clone();
        view.mirror = seen.mirror.clone();
    }
    Ok(view)
}

/// Waits until the world matches the oracle (and still does [`SETTLE`] later); returns the
/// time it took and the mismatches left when `timeout` ran out (empty: converged).
async fn converge(
    sides: &Sides,
    profile: &Profile,
    expect: &BTreeMap<Slot, Expect>,
    (log, resets): (&[Entry], &[LoggedReset]),
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
            Ok(world) => check(profile.slots_per_kind, expect, &ever, &world, profile.mode),
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
                Some(slot) => format!(
                    "{} [ops: {}]",
                    m.what,
                    history(log, resets, slot).join("; ")
                ),
                None => m.what,
            };
            Mismatch { slot: m.slot, what }
        })
        .collect();
    Ok((start.elapsed(), detailed))
}

#[allow(clippy::too_many_arguments)]
fn report(
    profile: &Profile,
    schedule: Vec<Scheduled>,
    (log, resets): (&[Entry], &[LoggedReset]),
    faults: BTreeMap<&'static str, usize>,
    convergence: Option<Duration>,
    checkpoints: Vec<(String, Duration)>,
    notes: Notes,
    mismatches: Vec<String>,
) -> Report {
    let count = |f: &dyn Fn(&Outcome) -> bool| log.iter().filter(|e| f(&e.outcome)).count();
    let mut ops_by_kind = BTreeMap::new();
    for e in log {
        let text = e.op.to_string();
        let words: Vec<&str> = text.split(' ').skip(1).take(2).collect();
        *ops_by_kind.entry(words.join(" ")).or_default() += 1;
    }
    let state = |expect: &Expect| match expect {
        Expect::Absent => "absent",
        Expect::Present(_) => "present",
        Expect::Unmirrored(_) => "unmirrored",
        Expect::ReadOnly { .. } => "read-only",
    };
    let mut expected_states = BTreeMap::new();
    let slots = Slot::all(profile.slots_per_kind);
    for expect in expected(&slots, log, resets, profile.rules()).values() {
        *expected_states.entry(state(expect)).or_default() += 1;
    }
    let mut states_reached = BTreeMap::new();
    for end in 1..=log.len() {
        let entry = &log[end - 1];
        if entry.outcome != Outcome::Applied {
            continue;
        }
        let before: Vec<LoggedReset> = resets.iter().filter(|r| r.0 < end).copied().collect();
        let now = expected(&[entry.op.slot], &log[..end], &before, profile.rules());
        *states_reached
            .entry(state(&now[&entry.op.slot]))
            .or_default() += 1;
    }
    let Notes {
        apiserver_restarts,
        replica_exits,
        failures,
    } = notes;
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
        apiserver_restarts,
        replica_exits,
        failures,
        mismatches,
        expected_states,
        states_reached,
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

/// The sync mode of `CHAOS_MODE` (`Bidirectional`, the default, `ToServer` or `FromServer`).
pub fn mode_from_env() -> anyhow::Result<Mode> {
    match std::env::var("CHAOS_MODE").as_deref() {
        Err(_) | Ok("") | Ok("Bidirectional") => Ok(Mode::Bidirectional),
        Ok("ToServer") => Ok(Mode::ToServer),
        Ok("FromServer") => Ok(Mode::FromServer),
        Ok(other) => anyhow::bail!("CHAOS_MODE={other:?}: Bidirectional, ToServer or FromServer"),
    }
}
