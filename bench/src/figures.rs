//! What a run measures, and the checks that decide its exit status. Every check compares
//! figures of the same run (a time with its floor, a count per change, a memory size): absolute
//! times are never compared across runs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::stats::{Percentiles, median, per, ratio};

/// Largest accepted `operator / floor` for the startup sync and CR-to-server times, and for the
/// CR-to-server time over the floor of [`FLOOR_CLIENTS`] concurrent clients.
pub const MAX_RATIO: f64 = 1.2;
/// From this N on, the CR-to-server time must beat the sequential floor: the operator pushes
/// independent objects concurrently, as several clients would (issue 28).
pub const CONCURRENT_FROM_N: usize = 1000;
/// Largest accepted CR-to-server `operator / sequential floor` from [`CONCURRENT_FROM_N`] on.
pub const MAX_RATIO_CONCURRENT: f64 = 0.6;
/// Concurrent clients of the second CR-to-server floor, which the CR-to-server time must stay
/// within [`MAX_RATIO`] of from [`CONCURRENT_FROM_N`] on.
pub const FLOOR_CLIENTS: usize = 4;
/// The event-to-CR p99 may exceed the API server's own write p99 by this much.
pub const P99_SLACK_MS: f64 = 50.0;
/// API requests per server-side change: the spec patch and the status patch, and room for one
/// more (an Event); anything that grows with the number of objects fails the other checks.
pub const MAX_API_PER_CHANGE: f64 = 3.0;
/// Lists per change: none is expected; this allows a watch re-list now and then.
pub const MAX_LISTS_PER_CHANGE: f64 = 0.01;
/// Server requests per server-side change of a cache a mirror CR follows: the event carries
/// the configuration, and a CR that holds the object it was last synced with takes the new one
/// without asking the server (`resources-operator/src/engine/comparing.rs`). Measured 0.00 to
/// 0.02 (the operator's periodic health checks, more per change when the server takes few
/// changes); a server compare per change would be 1 or more.
pub const MAX_SERVER_PER_CHANGE: f64 = 0.5;
/// API requests per object when N objects are synced at once (startup or CR to server).
pub const MAX_API_PER_OBJECT: f64 = 4.0;
/// Server requests per object created from a CR, a constant bound (O(1)): the create, the
/// read-back (design L2), a compare when the documents differ in text, and DIGEST challenges.
pub const MAX_SERVER_PER_OBJECT: f64 = 6.0;
/// Lists in a whole phase, whatever N (the watches' initial lists, a few re-lists).
pub const MAX_LISTS_PER_PHASE: u64 = 30;
/// Resident memory of the operator at 5,000 caches (large profile).
pub const MAX_RSS_KIB_AT_5000: u64 = 32 * 1024;
/// Resident memory of the operator at 10,000 caches (large profile).
pub const MAX_RSS_KIB_AT_10000: u64 = 48 * 1024;
/// From this N on, the startup sync at most [`MAX_STARTUP_RATIO_LARGE`] of its floor: at that
/// size the operator's fixed start costs are nothing beside N writes, and it creates mirror CRs
/// two at a time where the floor writes one after the other.
pub const STRICT_STARTUP_FROM_N: usize = 10_000;
/// Largest accepted startup sync `operator / floor` from [`STRICT_STARTUP_FROM_N`] on.
pub const MAX_STARTUP_RATIO_LARGE: f64 = 1.0;
/// A restart with N CRs in sync reaches "in sync" (every Cache CR reconciled, nothing queued)
/// within this many seconds of its start, whatever N, and writes nothing.
pub const MAX_RESTART_S: f64 = 5.0;
/// The name of that check: the chart draws the target only in runs that had it.
pub const RSS_CHECK: &str = "operator RSS at N";

/// The RSS target at `n` in the large profile, KiB (none below 5,000).
pub fn rss_target_kib(n: usize) -> Option<u64> {
    match n {
        0..5000 => None,
        5000..10_000 => Some(MAX_RSS_KIB_AT_5000),
        _ => Some(MAX_RSS_KIB_AT_10000),
    }
}

/// A time of the operator beside its floor, in seconds: each measured several times in the
/// same run (a single sample of a phase under a second is mostly noise), compared by their
/// medians.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timed {
    /// The median of `operator_runs_s`.
    pub operator_s: f64,
    /// The median of `floor_runs_s`.
    pub floor_s: f64,
    /// Every measurement of the operator, in the order taken (not in the results of runs
    /// before the repetitions).
    #[serde(default)]
    pub operator_runs_s: Vec<f64>,
    /// Every measurement of the floor, in the order taken.
    #[serde(default)]
    pub floor_runs_s: Vec<f64>,
}

impl Timed {
    pub fn of(operator_runs_s: Vec<f64>, floor_runs_s: Vec<f64>) -> Self {
        Self {
            operator_s: median(&operator_runs_s),
            floor_s: median(&floor_runs_s),
            operator_runs_s,
            floor_runs_s,
        }
    }

    /// Whether the phase ran (the CR-to-server phase does not above `--cr-to-server-up-to`).
    pub fn measured(&self) -> bool {
        self.operator_s > 0.0 || !self.operator_runs_s.is_empty()
    }

    /// The median operator time over the median floor.
    pub fn ratio(&self) -> f64 {
        ratio(self.operator_s, self.floor_s)
    }
}

/// Requests one phase cost, counted outside the operator.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseCost {
    /// Objects (or changes) the phase handled.
    pub objects: u64,
    /// API requests of the operator's ServiceAccount by group of verbs, as the API server's
    /// priority-and-fairness counters say (`lease`, `list`, `watch`, `get`, `write`, `other`).
    pub api_requests: BTreeMap<String, u64>,
    /// Its writes by verb and resource, from the API server's audit log.
    pub api_writes: BTreeMap<String, u64>,
    /// Its requests to the Infinispan server by method and path, from the counting proxy.
    pub server_requests: BTreeMap<String, u64>,
    /// The server's responses to them by status (`401`: an authentication challenge the
    /// client answered with a second request).
    pub server_responses: BTreeMap<String, u64>,
    /// The most requests to the server waiting for their response at once in the phase (the
    /// operator's concurrency as the server sees it; not in the results of runs before it).
    #[serde(default)]
    pub server_peak_in_flight: u64,
    /// CPU seconds of the operator in the phase.
    pub cpu_s: f64,
    /// Wall time of the phase, seconds.
    pub wall_s: f64,
}

impl PhaseCost {
    /// API requests without the Lease's (leader election runs on its own clock).
    pub fn api_total(&self) -> u64 {
        self.api_requests
            .iter()
            .filter(|(group, _)| group.as_str() != "lease")
            .map(|(_, n)| n)
            .sum()
    }
    pub fn api_group(&self, group: &str) -> u64 {
        self.api_requests.get(group).copied().unwrap_or_default()
    }
    pub fn server_total(&self) -> u64 {
        self.server_requests.values().sum()
    }
    /// Writes to the API server (audit log) and to the server (every request but a GET).
    pub fn writes(&self) -> (u64, u64) {
        let server = self
            .server_requests
            .iter()
            .filter(|(request, _)| !request.starts_with("GET "))
            .map(|(_, n)| n)
            .sum();
        (self.api_writes.values().sum(), server)
    }
    pub fn api_per_object(&self) -> f64 {
        per(self.api_total(), self.objects)
    }
    pub fn server_per_object(&self) -> f64 {
        per(self.server_total(), self.objects)
    }
    pub fn lists_per_object(&self) -> f64 {
        per(self.api_group("list"), self.objects)
    }
    /// The server's error responses: 5xx, and 429 (too many requests).
    pub fn server_errors(&self) -> u64 {
        self.server_responses
            .iter()
            .filter(|(status, _)| status.starts_with('5') || status.as_str() == "429")
            .map(|(_, n)| n)
            .sum()
    }
}

/// The steady flow of server-side changes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Steady {
    pub rate_per_s: f64,
    pub seconds: f64,
    /// Ticks of the schedule (`rate x seconds`): each sends a ConfigMap patch, and a change
    /// unless the server has its maximum of changes in hand.
    pub ticks: u64,
    /// Ticks that sent no change because the server had not answered the changes in flight.
    pub skipped: u64,
    /// Changes sent.
    pub changes: u64,
    /// Changes the server refused (e.g. a lock timeout of an overloaded server): not counted
    /// in `delivered` nor in the latencies.
    pub refused: u64,
    /// Changes the server made whose CR was seen updated (to that value or a later one).
    pub delivered: u64,
    /// From the change's event (seen by the bench's own listener on the server's event stream,
    /// as the operator's listener sees it) to the watch seeing the CR updated.
    pub event_to_cr: Percentiles,
    /// From the client's timestamp of the REST change (just before the request) to the watch
    /// seeing the CR updated: includes the server's own time to make the change.
    pub request_to_cr: Percentiles,
    /// The API server's own write latency in the same run: a ConfigMap merge patch, request to
    /// response, at the same rate.
    pub api_write: Percentiles,
    /// ConfigMap patches that failed or took longer than 30 s (not in `api_write`).
    pub api_write_failures: u64,
    /// The same ConfigMap patches, request to the watch seeing them.
    pub api_write_to_watch: Percentiles,
    /// The REST change itself (request to response).
    pub rest_change: Percentiles,
    pub cost: PhaseCost,
    /// The operator's own histograms over the phase (a diagnosis, not checked; not in the
    /// results of the first runs).
    #[serde(default)]
    pub operator_histograms: OperatorHistograms,
    /// The slowest 1 % of event-to-CR, slowest first (a diagnosis of the tail, not checked;
    /// not in the results of the first runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slowest_event_to_cr: Vec<SlowChange>,
    /// What the machine did during the flow and at the moments of the slowest changes (a
    /// diagnosis, not checked; not in the results of runs before session 27).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<crate::stalls::FlowMachine>,
    /// Each change's event-to-CR split between the server, the operator and the API server,
    /// from the operators' logs (a diagnosis, not checked; not in the results of runs before
    /// session 27).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoffs: Option<crate::handoffs::Handoffs>,
}

/// One slow change of the steady flow.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlowChange {
    pub cache: String,
    /// When its event was seen, seconds after the flow started.
    pub at_s: f64,
    pub ms: f64,
    /// Its hand-offs, when the operator's log had its line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<crate::handoffs::Split>,
}

/// Bucket bounds (seconds) of p50 and p99 of the operator's own histograms in a phase: from a
/// server event to the CR write it caused, and whole reconciles. `None`: no observation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OperatorHistograms {
    pub event_to_cr_p50_s: Option<f64>,
    pub event_to_cr_p99_s: Option<f64>,
    pub reconcile_p50_s: Option<f64>,
    pub reconcile_p99_s: Option<f64>,
    /// The operator's CR writes, request to answer (`cr_write_seconds`: the API server's part
    /// of event-to-CR). Not in the results of runs before it was measured.
    #[serde(default)]
    pub cr_write_p99_s: Option<f64>,
}

impl OperatorHistograms {
    /// From the operator's `/metrics` text before and after the phase.
    pub fn between(before: &str, after: &str) -> Self {
        use crate::promtext::quantile_bound;
        const EVENT: &str = "infinispan_resources_operator_event_to_cr_seconds";
        const RECONCILE: &str = "infinispan_resources_operator_reconcile_duration_seconds";
        const CR_WRITE: &str = "infinispan_resources_operator_cr_write_seconds";
        Self {
            event_to_cr_p50_s: quantile_bound(before, after, EVENT, 0.5),
            event_to_cr_p99_s: quantile_bound(before, after, EVENT, 0.99),
            reconcile_p50_s: quantile_bound(before, after, RECONCILE, 0.5),
            reconcile_p99_s: quantile_bound(before, after, RECONCILE, 0.99),
            cr_write_p99_s: quantile_bound(before, after, CR_WRITE, 0.99),
        }
    }
}

/// Memory of the operator process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// RSS with no object at all, settled.
    pub idle_kib: u64,
    /// RSS after the startup sync of N caches, settled.
    pub at_n_kib: u64,
    /// RSS with 2N caches (after CR to server), settled.
    pub at_2n_kib: u64,
    /// Peak RSS of the last process (VmHWM).
    pub peak_kib: u64,
}

/// Everything measured for one N.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SizeResult {
    pub n: usize,
    pub startup: Timed,
    pub startup_cost: PhaseCost,
    pub cr_to_server: Timed,
    /// The same CR-to-server runs beside the floor of `floor_clients` concurrent clients (N
    /// REST creates shared among them, same proxy, same run). Not in the results of runs
    /// before it was measured.
    #[serde(default)]
    pub cr_to_server_concurrent: Timed,
    /// Clients of that floor.
    #[serde(default)]
    pub floor_clients: usize,
    pub cr_to_server_cost: PhaseCost,
    /// How long the bench took to create the N CRs (on the CR-to-server clock).
    pub cr_apply_s: f64,
    /// The operator restarted with N caches already in sync: time to settle and its cost.
    pub restart: PhaseCost,
    /// That restart from the process's start until it had reconciled the N Cache CRs and its
    /// counters stopped moving, seconds. Not in the results of runs before it was measured.
    #[serde(default)]
    pub restart_s: f64,
    pub steady: Option<Steady>,
    pub memory: Memory,
    /// The drift check's list of every cache and template definition, with the 2N caches on
    /// the server (the operator sends it every `--drift-check-interval`, 60 s by default). Not
    /// in the results of runs before it was measured.
    #[serde(default)]
    pub drift_list: DriftList,
}

/// One request of the drift check, as the operator sends it, timed by the bench.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DriftList {
    /// Definitions listed (caches and templates).
    pub objects: usize,
    /// Size of the response body (the listing re-serialised as compact JSON, as the server
    /// sends it).
    pub bytes: u64,
    /// Median of the runs.
    pub median_s: f64,
    pub runs_s: Vec<f64>,
}

/// One check of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub n: Option<usize>,
    pub what: String,
    pub value: String,
    pub target: String,
    pub met: bool,
}

pub(crate) fn check(
    n: Option<usize>,
    what: &str,
    value: String,
    target: String,
    met: bool,
) -> Check {
    Check {
        n,
        what: what.to_string(),
        value,
        target,
        met,
    }
}

/// The checks of a run; `large` adds the memory target at 5,000 caches.
pub fn checks(sizes: &[SizeResult], large: bool) -> Vec<Check> {
    let mut out = Vec::new();
    for size in sizes {
        let n = Some(size.n);
        let cr_max = if size.n >= CONCURRENT_FROM_N {
            MAX_RATIO_CONCURRENT
        } else {
            MAX_RATIO
        };
        let startup_max = if size.n >= STRICT_STARTUP_FROM_N {
            MAX_STARTUP_RATIO_LARGE
        } else {
            MAX_RATIO
        };
        let cr_to_server = size.cr_to_server.measured();
        let timed_phases = [
            Some(("startup sync time / floor", &size.startup, startup_max)),
            cr_to_server.then_some(("CR-to-server time / floor", &size.cr_to_server, cr_max)),
        ];
        for (what, timed, max) in timed_phases.into_iter().flatten() {
            out.push(check(
                n,
                what,
                format!("{:.2}", timed.ratio()),
                format!("<= {max}"),
                timed.ratio() <= max,
            ));
        }
        // Below CONCURRENT_FROM_N the API writes of every CR (the bench's own creations on the
        // clock, the finalizer, the status) weigh as much as the server's creates: at N=100 the
        // CRs alone took 0.84 s of a 1.57 s 4-client floor. The sequential floor is the bound
        // there.
        if cr_to_server && size.floor_clients > 0 && size.n >= CONCURRENT_FROM_N {
            let timed = &size.cr_to_server_concurrent;
            out.push(check(
                n,
                &format!(
                    "CR-to-server time / floor of {} concurrent clients",
                    size.floor_clients
                ),
                format!("{:.2}", timed.ratio()),
                format!("<= {MAX_RATIO}"),
                timed.ratio() <= MAX_RATIO,
            ));
        }
        let errors = size.cr_to_server_cost.server_errors();
        if cr_to_server {
            out.push(check(
                n,
                "CR to server: server errors (5xx, 429) answering the operator",
                errors.to_string(),
                "0".to_string(),
                errors == 0,
            ));
        }
        let costs = [
            Some(("startup sync", &size.startup_cost, f64::INFINITY)),
            cr_to_server.then_some((
                "CR to server",
                &size.cr_to_server_cost,
                MAX_SERVER_PER_OBJECT,
            )),
        ];
        for (what, cost, max_server) in costs.into_iter().flatten() {
            out.push(check(
                n,
                &format!("{what}: API requests per object"),
                format!("{:.2}", cost.api_per_object()),
                format!("<= {MAX_API_PER_OBJECT}"),
                cost.api_per_object() <= MAX_API_PER_OBJECT,
            ));
            out.push(check(
                n,
                &format!("{what}: lists in the phase"),
                cost.api_group("list").to_string(),
                format!("<= {MAX_LISTS_PER_PHASE}, whatever N"),
                cost.api_group("list") <= MAX_LISTS_PER_PHASE,
            ));
            if max_server.is_finite() {
                out.push(check(
                    n,
                    &format!("{what}: server requests per object"),
                    format!("{:.2}", cost.server_per_object()),
                    format!("<= {max_server}"),
                    cost.server_per_object() <= max_server,
                ));
            }
        }
        if let Some(steady) = &size.steady {
            out.push(check(
                n,
                "steady flow: changes that reached their CR",
                format!("{} / {}", steady.delivered, steady.changes - steady.refused),
                "all the server made".to_string(),
                steady.changes > steady.refused
                    && steady.delivered == steady.changes - steady.refused,
            ));
            let bound = steady.api_write.p99_ms + P99_SLACK_MS;
            out.push(check(
                n,
                "steady flow: event-to-CR p99",
                format!("{:.0} ms", steady.event_to_cr.p99_ms),
                format!(
                    "<= API write p99 {:.0} ms + {P99_SLACK_MS:.0} ms",
                    steady.api_write.p99_ms
                ),
                steady.event_to_cr.count > 0 && steady.event_to_cr.p99_ms <= bound,
            ));
            out.push(check(
                n,
                "steady flow: API requests per change",
                format!("{:.2}", steady.cost.api_per_object()),
                format!("<= {MAX_API_PER_CHANGE}"),
                steady.cost.api_per_object() <= MAX_API_PER_CHANGE,
            ));
            out.push(check(
                n,
                "steady flow: lists per change",
                format!("{:.3}", steady.cost.lists_per_object()),
                format!("<= {MAX_LISTS_PER_CHANGE}"),
                steady.cost.lists_per_object() <= MAX_LISTS_PER_CHANGE,
            ));
            out.push(check(
                n,
                "steady flow: server requests per change",
                format!("{:.2}", steady.cost.server_per_object()),
                format!("<= {MAX_SERVER_PER_CHANGE}"),
                steady.cost.server_per_object() <= MAX_SERVER_PER_CHANGE,
            ));
        }
        if let Some(max) = rss_target_kib(size.n).filter(|_| large) {
            out.push(check(
                n,
                RSS_CHECK,
                format!("{:.1} MiB", size.memory.at_n_kib as f64 / 1024.0),
                format!("< {} MiB", max / 1024),
                size.memory.at_n_kib > 0 && size.memory.at_n_kib < max,
            ));
        }
        out.push(check(
            n,
            "restart with N in sync: time to in sync",
            format!("{:.2} s", size.restart_s),
            format!("< {MAX_RESTART_S} s"),
            size.restart_s > 0.0 && size.restart_s < MAX_RESTART_S,
        ));
        let (api_writes, server_writes) = size.restart.writes();
        out.push(check(
            n,
            "restart with N in sync: writes (API / server)",
            format!("{api_writes} / {server_writes}"),
            "0 / 0".to_string(),
            api_writes == 0 && server_writes == 0,
        ));
    }
    // O(1): the cost of a change does not grow with N.
    for (what, per_change) in [
        (
            "API requests per change do not grow with N",
            PhaseCost::api_per_object as fn(&PhaseCost) -> f64,
        ),
        (
            "server requests per change do not grow with N",
            PhaseCost::server_per_object,
        ),
    ] {
        let steady: Vec<(usize, f64)> = sizes
            .iter()
            .filter_map(|s| Some((s.n, per_change(&s.steady.as_ref()?.cost))))
            .collect();
        if let (Some(first), Some(last)) = (steady.first(), steady.last())
            && last.0 > first.0
        {
            out.push(check(
                None,
                what,
                format!(
                    "{:.2} at N={} vs {:.2} at N={}",
                    last.1, last.0, first.1, first.0
                ),
                "at most +0.5".to_string(),
                last.1 <= first.1 + 0.5,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(objects: u64, writes: u64, lists: u64, server: u64) -> PhaseCost {
        PhaseCost {
            objects,
            api_requests: BTreeMap::from([
                ("write".to_string(), writes),
                ("list".to_string(), lists),
                ("lease".to_string(), 1000),
            ]),
            server_requests: BTreeMap::from([("POST /rest/v2/caches/{}".to_string(), server)]),
            ..PhaseCost::default()
        }
    }

    fn good(n: usize) -> SizeResult {
        SizeResult {
            n,
            startup: Timed::of(vec![1.1, 1.3, 1.0], vec![1.0, 0.9, 1.1]),
            startup_cost: cost(n as u64, 2 * n as u64, 3, 0),
            cr_to_server: Timed::of(vec![2.0], vec![4.0]),
            cr_to_server_concurrent: Timed::of(vec![2.0], vec![2.0]),
            floor_clients: FLOOR_CLIENTS,
            cr_to_server_cost: cost(n as u64, 3 * n as u64, 3, n as u64),
            steady: Some(Steady {
                changes: 100,
                delivered: 100,
                event_to_cr: Percentiles {
                    count: 100,
                    p50_ms: 20.0,
                    p99_ms: 60.0,
                    max_ms: 70.0,
                },
                api_write: Percentiles {
                    count: 100,
                    p50_ms: 5.0,
                    p99_ms: 20.0,
                    max_ms: 30.0,
                },
                cost: cost(100, 200, 0, 0),
                ..Steady::default()
            }),
            memory: Memory {
                at_n_kib: 20_000,
                ..Memory::default()
            },
            restart: PhaseCost {
                objects: n as u64,
                server_requests: BTreeMap::from([(
                    "GET /rest/v2/container/config?action=listen".to_string(),
                    2,
                )]),
                ..PhaseCost::default()
            },
            restart_s: 1.5,
            ..SizeResult::default()
        }
    }

    #[test]
    fn ten_thousand_objects_hold_the_stricter_targets() {
        let failed = |size: SizeResult, large: bool| -> Vec<String> {
            checks(&[size], large)
                .into_iter()
                .filter(|c| !c.met)
                .map(|c| format!("{} {}", c.what, c.target))
                .collect()
        };
        let mut big = good(10_000);
        big.startup = Timed::of(vec![0.9], vec![1.0]);
        assert!(failed(big.clone(), true).is_empty());
        // Startup within 1.2 of its floor is enough below 10,000, not from there.
        big.startup = Timed::of(vec![1.1], vec![1.0]);
        assert!(
            failed(
                SizeResult {
                    n: 5000,
                    ..big.clone()
                },
                true
            )
            .is_empty()
        );
        assert_eq!(
            failed(big.clone(), true),
            vec!["startup sync time / floor <= 1"]
        );
        // 40 MiB: over the 32 MiB of 5,000, under the 48 MiB of 10,000.
        let mut memory = big.clone();
        memory.startup = Timed::of(vec![0.9], vec![1.0]);
        memory.memory.at_n_kib = 40 * 1024;
        assert!(failed(memory.clone(), true).is_empty());
        assert!(failed(memory.clone(), false).is_empty());
        memory.n = 5000;
        assert_eq!(failed(memory, true), vec!["operator RSS at N < 32 MiB"]);
        // A restart: slow, writing to the API server or to the server, or never measured.
        let mut restart = good(100);
        restart.restart_s = 5.2;
        restart.restart.api_writes = BTreeMap::from([("patch caches/status".to_string(), 1)]);
        restart
            .restart
            .server_requests
            .insert("POST /rest/v2/caches/{}".to_string(), 1);
        assert_eq!(
            failed(restart, false),
            vec![
                "restart with N in sync: time to in sync < 5 s",
                "restart with N in sync: writes (API / server) 0 / 0",
            ]
        );
        let unmeasured = SizeResult {
            restart_s: 0.0,
            ..good(100)
        };
        assert_eq!(
            failed(unmeasured, false),
            vec!["restart with N in sync: time to in sync < 5 s"]
        );
    }

    #[test]
    fn a_good_run_meets_every_check_and_leases_do_not_count() {
        let results = checks(&[good(100), good(5000)], true);
        assert!(results.iter().all(|c| c.met), "{results:#?}");
        assert!(results.iter().any(|c| c.what == "operator RSS at N"));
        assert!(results.iter().any(|c| c.n.is_none()));
        assert_eq!(good(100).startup_cost.api_total(), 203);
    }

    #[test]
    fn each_miss_is_reported() {
        let mut slow = good(100);
        // The median decides: one slow run of three does not fail the check, two do.
        slow.startup = Timed::of(vec![1.1, 1.9, 1.0], vec![1.0, 1.0, 1.0]);
        assert!(
            checks(std::slice::from_ref(&slow), false)
                .iter()
                .all(|c| c.met)
        );
        slow.startup = Timed::of(vec![1.3, 1.9, 1.0], vec![1.0, 1.0, 1.0]);
        if let Some(s) = slow.steady.as_mut() {
            s.event_to_cr.p99_ms = 71.0;
        }
        let failed: Vec<String> = checks(&[slow], false)
            .into_iter()
            .filter(|c| !c.met)
            .map(|c| c.what)
            .collect();
        assert_eq!(
            failed,
            vec!["startup sync time / floor", "steady flow: event-to-CR p99"]
        );

        let mut listing = good(1000);
        if let Some(s) = listing.steady.as_mut() {
            s.cost = cost(100, 200, 100, 0);
        }
        let failed = checks(&[good(100), listing], false);
        assert!(
            failed
                .iter()
                .any(|c| !c.met && c.what == "steady flow: lists per change")
        );
        assert!(failed.iter().any(|c| !c.met && c.n.is_none()));

        let mut lost = good(100);
        if let Some(s) = lost.steady.as_mut() {
            s.delivered = 99;
        }
        lost.memory.at_n_kib = 40_000;
        let failed: Vec<String> = checks(&[lost], false)
            .into_iter()
            .filter(|c| !c.met)
            .map(|c| c.what)
            .collect();
        // Memory counts only in the large profile, at 5,000.
        assert_eq!(failed, vec!["steady flow: changes that reached their CR"]);
    }

    #[test]
    fn cr_to_server_beats_the_sequential_floor_at_scale_and_matches_concurrent_clients() {
        let failed = |size: SizeResult| -> Vec<String> {
            checks(&[size], false)
                .into_iter()
                .filter(|c| !c.met)
                .map(|c| c.what)
                .collect()
        };
        // As fast as one client creating caches one by one: enough below 1,000, not from there.
        let mut sequential = good(100);
        sequential.cr_to_server = Timed::of(vec![4.0], vec![4.0]);
        assert!(failed(sequential.clone()).is_empty());
        sequential.n = CONCURRENT_FROM_N;
        assert_eq!(failed(sequential), vec!["CR-to-server time / floor"]);
        // Slower than four clients by more than the slack.
        let mut slow = good(1000);
        slow.cr_to_server_concurrent = Timed::of(vec![2.0], vec![1.6]);
        assert_eq!(
            failed(slow),
            vec!["CR-to-server time / floor of 4 concurrent clients"]
        );
        // A lock timeout (500) or a 429 answering the operator fails the run; a 401 does not.
        let mut errors = good(1000);
        errors.cr_to_server_cost.server_responses =
            BTreeMap::from([("200".into(), 2000), ("401".into(), 4), ("500".into(), 1)]);
        assert_eq!(errors.cr_to_server_cost.server_errors(), 1);
        assert_eq!(
            failed(errors.clone()),
            vec!["CR to server: server errors (5xx, 429) answering the operator"]
        );
        errors.cr_to_server_cost.server_responses = BTreeMap::from([("429".into(), 1)]);
        assert_eq!(errors.cr_to_server_cost.server_errors(), 1);
        // Below CONCURRENT_FROM_N the sequential floor is the bound.
        let mut small = good(100);
        small.cr_to_server_concurrent = Timed::of(vec![2.0], vec![1.0]);
        assert!(failed(small).is_empty());
        // Runs from before the concurrent floor have no such check.
        let mut old = good(100);
        old.floor_clients = 0;
        assert!(
            !checks(&[old], false)
                .iter()
                .any(|c| c.what.contains("concurrent clients"))
        );
    }

    #[test]
    fn a_size_without_its_cr_to_server_phase_has_no_such_check_and_keeps_the_others() {
        let mut big = good(10_000);
        big.cr_to_server = Timed::default();
        big.cr_to_server_concurrent = Timed::default();
        big.cr_to_server_cost = PhaseCost::default();
        big.floor_clients = 0;
        assert!(!big.cr_to_server.measured() && good(100).cr_to_server.measured());
        let all = checks(&[big.clone()], true);
        assert!(!all.iter().any(|c| c.what.starts_with("CR")), "{all:?}");
        for what in [
            "startup sync time / floor",
            "steady flow: event-to-CR p99",
            RSS_CHECK,
        ] {
            assert!(all.iter().any(|c| c.what == what), "{what} missing");
        }
        // Its other checks still fail the run.
        big.startup = Timed::of(vec![3.0], vec![2.0]);
        assert!(
            checks(&[big], true)
                .iter()
                .any(|c| !c.met && c.what == "startup sync time / floor")
        );
    }
}
