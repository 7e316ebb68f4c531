//! What the machine did during a steady flow, to tell a stall of the whole machine from a cost
//! of the operator: a thread of the bench's own (not a task of its runtime) wakes every 10 ms
//! and notes how late it woke, and every 100 ms reads where the CPU time went (`/proc/stat`:
//! busy, idle, waiting for I/O, stolen by the hypervisor), the kernel's pressure stall counters
//! (`/proc/pressure/{cpu,io}`) and the CPU time of the processes that share the machine in a
//! run, grouped by name (the API server, etcd, the Infinispan nodes, the operators, the bench).
//! The moments of the slowest changes are then described by those windows.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::figures::SlowChange;
use crate::procfs::stat_cpu_ticks;

/// How often the thread wakes.
const TICK: Duration = Duration::from_millis(10);
/// Ticks per window of readings (100 ms).
const WINDOW_TICKS: u32 = 10;
/// How often the processes are looked up again by name (a node or an operator may start).
const RESCAN: Duration = Duration::from_secs(1);
/// Slow changes whose waits are this close form one moment.
const BUNCH_S: f64 = 0.25;
/// A moment is described from this long before its first slow change's event: a stall that
/// delays an event's delivery starts before the event is seen.
const LEAD_S: f64 = 0.5;

/// The groups of processes, by their `/proc/<pid>/comm` (at most 15 characters).
pub const GROUPS: [(&str, &[&str]); 6] = [
    ("api server", &["kube-apiserver"]),
    ("etcd", &["etcd"]),
    ("controller manager", &["kube-controller"]),
    ("nodes", &["java"]),
    ("operators", &["resources-opera"]),
    ("bench", &["bench"]),
];

/// The group of a process's command name, an index into [`GROUPS`].
pub fn group_of(comm: &str) -> Option<usize> {
    let comm = comm.trim();
    GROUPS.iter().position(|(_, names)| names.contains(&comm))
}

/// The machine's CPU time so far, in clock ticks: the `cpu` line of `/proc/stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTimes {
    pub busy: u64,
    pub idle: u64,
    pub iowait: u64,
    pub steal: u64,
}

/// The `cpu` line of a `/proc/stat` text: user nice system idle iowait irq softirq steal ...
/// (busy is user, nice, system, irq and softirq; guest time is inside user already).
pub fn cpu_times(stat: &str) -> Option<CpuTimes> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    let at = |i: usize| f.get(i).copied();
    Some(CpuTimes {
        busy: at(0)? + at(1)? + at(2)? + at(5)? + at(6)?,
        idle: at(3)?,
        iowait: at(4)?,
        steal: at(7).unwrap_or(0),
    })
}

/// The `total=` of the `some` line of a `/proc/pressure/*` text: microseconds during which at
/// least one task waited for the resource.
pub fn pressure_some_us(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

/// One reading of everything a window is the difference of.
#[derive(Clone, Debug, Default)]
struct Reading {
    cpu: CpuTimes,
    cpu_some_us: u64,
    io_some_us: u64,
    /// CPU ticks of each process, by pid, with its group.
    processes: HashMap<u32, (usize, u64)>,
}

/// One tenth of a second of the flow. Times are milliseconds of CPU (of all the cores) or of
/// stall within the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// The window's start, seconds after the flow started.
    pub at_s: f64,
    /// Its length (a tenth of a second and what the thread woke late).
    pub seconds: f64,
    /// The most the thread woke late in it.
    pub late_ms: f64,
    pub busy_ms: f64,
    pub idle_ms: f64,
    pub iowait_ms: f64,
    pub steal_ms: f64,
    /// Some task waited for a CPU (pressure stall).
    pub cpu_some_ms: f64,
    /// Some task waited for I/O.
    pub io_some_ms: f64,
    /// CPU of each group of [`GROUPS`], in their order.
    pub groups_ms: Vec<f64>,
}

fn window_between(
    at_s: f64,
    seconds: f64,
    late_ms: f64,
    a: &Reading,
    b: &Reading,
    ms_per_tick: f64,
) -> Window {
    let ticks = |x: u64, y: u64| y.saturating_sub(x) as f64 * ms_per_tick;
    let mut groups_ms = vec![0.0; GROUPS.len()];
    for (pid, (group, after)) in &b.processes {
        // A process started within the window counts from its first reading.
        if let Some((_, before)) = a.processes.get(pid) {
            groups_ms[*group] += ticks(*before, *after);
        }
    }
    Window {
        at_s,
        seconds,
        late_ms,
        busy_ms: ticks(a.cpu.busy, b.cpu.busy),
        idle_ms: ticks(a.cpu.idle, b.cpu.idle),
        iowait_ms: ticks(a.cpu.iowait, b.cpu.iowait),
        steal_ms: ticks(a.cpu.steal, b.cpu.steal),
        cpu_some_ms: b.cpu_some_us.saturating_sub(a.cpu_some_us) as f64 / 1000.0,
        io_some_ms: b.io_some_us.saturating_sub(a.io_some_us) as f64 / 1000.0,
        groups_ms,
    }
}

/// The processes of [`GROUPS`] now: pid and group.
fn scan() -> Vec<(u32, usize)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| {
            let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            Some((pid, group_of(&comm)?))
        })
        .collect()
}

fn read(pids: &[(u32, usize)]) -> Reading {
    let text = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    Reading {
        cpu: cpu_times(&text("/proc/stat")).unwrap_or_default(),
        cpu_some_us: pressure_some_us(&text("/proc/pressure/cpu")).unwrap_or(0),
        io_some_us: pressure_some_us(&text("/proc/pressure/io")).unwrap_or(0),
        processes: pids
            .iter()
            .filter_map(|(pid, group)| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                Some((*pid, (*group, stat_cpu_ticks(&stat)?)))
            })
            .collect(),
    }
}

/// The thread taking the readings, from its start until [`Monitor::stop`].
#[derive(Debug)]
pub struct Monitor {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Window>>>,
}

impl Monitor {
    /// Starts the readings; window times count from `start` (the flow's start).
    pub fn start(start: Instant) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let ms_per_tick = 1000.0 / crate::procfs::clock_ticks() as f64;
        let thread = std::thread::Builder::new()
            .name("bench-stalls".into())
            .spawn(move || {
                let mut windows = Vec::new();
                let mut pids = scan();
                let mut scanned = Instant::now();
                let mut last = read(&pids);
                let mut window_start = Instant::now();
                let (mut late_ms, mut ticks) = (0.0f64, 0u32);
                let mut due = Instant::now() + TICK;
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(due.saturating_duration_since(Instant::now()));
                    let woke = Instant::now();
                    late_ms = late_ms.max(woke.saturating_duration_since(due).as_secs_f64() * 1e3);
                    // The next tick from now: one stall counts once, not once per tick missed.
                    due = woke + TICK;
                    ticks += 1;
                    if ticks < WINDOW_TICKS {
                        continue;
                    }
                    if scanned.elapsed() >= RESCAN {
                        pids = scan();
                        scanned = Instant::now();
                    }
                    let now = read(&pids);
                    let at_s = window_start.saturating_duration_since(start).as_secs_f64();
                    let seconds = woke.saturating_duration_since(window_start).as_secs_f64();
                    windows.push(window_between(
                        at_s,
                        seconds,
                        late_ms,
                        &last,
                        &now,
                        ms_per_tick,
                    ));
                    (last, window_start, late_ms, ticks) = (now, woke, 0.0, 0);
                }
                windows
            })
            .ok();
        Self { stop, thread }
    }

    /// Ends the readings and returns the windows (none if the thread could not start).
    pub fn stop(mut self) -> Vec<Window> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The machine over a span of the flow: each figure in cores (CPU seconds a second) or, for
/// stalls, in seconds a second (the share of the span during which some task waited).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Span {
    pub from_s: f64,
    pub to_s: f64,
    /// The slow changes whose wait is in it (none for the whole flow).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slow_changes: usize,
    /// The most the bench's thread woke late in the span, ms.
    pub late_max_ms: f64,
    pub busy: f64,
    pub idle: f64,
    pub iowait: f64,
    pub steal: f64,
    pub cpu_some: f64,
    pub io_some: f64,
    /// Each group's cores, by name.
    pub groups: Vec<(String, f64)>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What the machine did during the flow, and at the moments of its slowest changes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowMachine {
    /// The bench's thread woke late by more than 100 ms this many times (windows).
    pub late_windows: usize,
    pub whole_flow: Span,
    pub moments: Vec<Span>,
}

/// The windows from `from_s` to `to_s` (a window counts when it overlaps the span) summed.
pub fn span(windows: &[Window], from_s: f64, to_s: f64) -> Span {
    let inside: Vec<&Window> = windows
        .iter()
        .filter(|w| w.at_s + w.seconds > from_s && w.at_s <= to_s)
        .collect();
    let seconds: f64 = inside.iter().map(|w| w.seconds).sum();
    let rate = |ms: f64| {
        if seconds > 0.0 {
            ms / 1000.0 / seconds
        } else {
            0.0
        }
    };
    let sum = |f: fn(&Window) -> f64| rate(inside.iter().map(|w| f(w)).sum());
    Span {
        from_s,
        to_s,
        slow_changes: 0,
        late_max_ms: inside.iter().map(|w| w.late_ms).fold(0.0, f64::max),
        busy: sum(|w| w.busy_ms),
        idle: sum(|w| w.idle_ms),
        iowait: sum(|w| w.iowait_ms),
        steal: sum(|w| w.steal_ms),
        cpu_some: sum(|w| w.cpu_some_ms),
        io_some: sum(|w| w.io_some_ms),
        groups: GROUPS
            .iter()
            .enumerate()
            .map(|(g, (name, _))| {
                let ms: f64 = inside
                    .iter()
                    .map(|w| w.groups_ms.get(g).copied().unwrap_or(0.0))
                    .sum();
                (name.to_string(), rate(ms))
            })
            .collect(),
    }
}

/// The moments of the slow changes: each change waits from its event (`at_s`) to its CR
/// (`at_s + ms`); waits that overlap or fall within `BUNCH_S` of each other form one moment,
/// which starts `LEAD_S` before its first event. Earliest first.
pub fn moments(slow: &[SlowChange]) -> Vec<(f64, f64, usize)> {
    let mut waits: Vec<(f64, f64)> = slow
        .iter()
        .map(|s| (s.at_s, s.at_s + s.ms / 1000.0))
        .collect();
    waits.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64, usize)> = Vec::new();
    for (from, to) in waits {
        match out.last_mut() {
            Some(last) if from <= last.1 + BUNCH_S => {
                last.1 = last.1.max(to);
                last.2 += 1;
            }
            _ => out.push((from, to, 1)),
        }
    }
    out.into_iter()
        .map(|(from, to, n)| ((from - LEAD_S).max(0.0), to, n))
        .collect()
}

/// The flow and its slow moments described by the windows.
pub fn describe(windows: &[Window], slow: &[SlowChange]) -> FlowMachine {
    let end = windows.last().map_or(0.0, |w| w.at_s);
    FlowMachine {
        late_windows: windows.iter().filter(|w| w.late_ms > 100.0).count(),
        whole_flow: span(windows, 0.0, end),
        moments: moments(slow)
            .into_iter()
            .map(|(from, to, n)| Span {
                slow_changes: n,
                ..span(windows, from, to)
            })
            .collect(),
    }
}

/// One line of a span: `+47.1-47.6 s (12 slow): late 412 ms, busy 1.9, idle 0.1, ...`.
pub fn line(span: &Span) -> String {
    let groups: Vec<String> = span
        .groups
        .iter()
        .map(|(name, cores)| format!("{name} {cores:.2}"))
        .collect();
    let slow = if span.slow_changes > 0 {
        format!(" ({} slow)", span.slow_changes)
    } else {
        String::new()
    };
    format!(
        "+{:.1}-{:.1} s{slow}: the bench's thread late up to {:.0} ms; cores busy {:.2}, idle {:.2}, iowait {:.2}, stolen {:.2}; pressure cpu {:.2}, io {:.2}; {}",
        span.from_s,
        span.to_s,
        span.late_max_ms,
        span.busy,
        span.idle,
        span.iowait,
        span.steal,
        span.cpu_some,
        span.io_some,
        groups.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_cpu_line_and_the_pressure_totals() {
        let stat = "cpu  100 20 30 400 5 6 7 8 0 0\ncpu0 50 10 15 200 2 3 3 4 0 0\n";
        assert_eq!(
            cpu_times(stat),
            Some(CpuTimes {
                busy: 100 + 20 + 30 + 6 + 7,
                idle: 400,
                iowait: 5,
                steal: 8,
            })
        );
        assert_eq!(cpu_times("cpu0 1 2 3\n"), None);
        let pressure = "some avg10=0.02 avg60=6.49 avg300=18.02 total=5010807554\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(pressure_some_us(pressure), Some(5_010_807_554));
        assert_eq!(pressure_some_us(""), None);
    }

    #[test]
    fn processes_are_grouped_by_their_command_name() {
        assert_eq!(group_of("kube-apiserver\n"), Some(0));
        assert_eq!(group_of("java"), Some(3));
        assert_eq!(group_of("resources-opera"), Some(4));
        assert_eq!(group_of("bash"), None);
    }

    #[test]
    fn a_window_counts_only_the_processes_read_at_both_ends() {
        let a = Reading {
            cpu: CpuTimes {
                busy: 100,
                idle: 50,
                iowait: 0,
                steal: 0,
            },
            cpu_some_us: 1_000,
            io_some_us: 0,
            processes: HashMap::from([(1, (0, 10)), (2, (3, 5))]),
        };
        let b = Reading {
            cpu: CpuTimes {
                busy: 115,
                idle: 53,
                iowait: 1,
                steal: 1,
            },
            cpu_some_us: 61_000,
            io_some_us: 2_500,
            processes: HashMap::from([(1, (0, 14)), (3, (3, 90))]),
        };
        let w = window_between(1.5, 0.1, 40.0, &a, &b, 10.0);
        assert_eq!(w.busy_ms, 150.0);
        assert_eq!(w.idle_ms, 30.0);
        assert_eq!((w.iowait_ms, w.steal_ms), (10.0, 10.0));
        assert_eq!((w.cpu_some_ms, w.io_some_ms), (60.0, 2.5));
        // pid 2 ended and pid 3 started within the window: neither counts.
        assert_eq!(w.groups_ms, vec![40.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    }

    fn slow(at_s: f64, ms: f64) -> SlowChange {
        SlowChange {
            cache: "c".into(),
            at_s,
            ms,
            split: None,
        }
    }

    #[test]
    fn slow_changes_that_wait_together_form_one_moment() {
        let found = moments(&[
            slow(47.3, 300.0),
            slow(10.0, 200.0),
            slow(47.1, 400.0),
            slow(47.7, 100.0),
            slow(80.0, 1000.0),
        ]);
        // 47.1-47.5, 47.3-47.6 and 47.7-47.8 bunch (0.1 s apart); the others stand alone.
        assert_eq!(found.len(), 3);
        assert_eq!(found[0].2, 1);
        assert_eq!(found[1].2, 3);
        assert!((found[1].0 - 46.6).abs() < 1e-9 && (found[1].1 - 47.8).abs() < 1e-9);
        assert!((found[2].0 - 79.5).abs() < 1e-9 && (found[2].1 - 81.0).abs() < 1e-9);
        assert_eq!(found[0].0, 9.5);
    }

    fn window(at_s: f64, late_ms: f64, busy_ms: f64, nodes_ms: f64) -> Window {
        let mut groups_ms = vec![0.0; GROUPS.len()];
        groups_ms[3] = nodes_ms;
        Window {
            at_s,
            seconds: 0.1,
            late_ms,
            busy_ms,
            idle_ms: 200.0 - busy_ms,
            groups_ms,
            ..Window::default()
        }
    }

    #[test]
    fn a_span_gives_cores_over_its_windows() {
        let windows = vec![
            window(0.0, 1.0, 100.0, 50.0),
            window(0.1, 350.0, 200.0, 180.0),
            window(0.2, 2.0, 100.0, 50.0),
            window(0.3, 1.0, 100.0, 50.0),
        ];
        let s = span(&windows, 0.15, 0.25);
        // The windows at 0.1 and 0.2 overlap 0.15-0.25.
        assert_eq!(s.late_max_ms, 350.0);
        assert!((s.busy - 1.5).abs() < 1e-9, "{}", s.busy);
        assert!((s.idle - 0.5).abs() < 1e-9);
        assert_eq!(s.groups[3].0, "nodes");
        assert!((s.groups[3].1 - 1.15).abs() < 1e-9);
        let flow = describe(&windows, &[slow(0.6, 50.0)]);
        assert_eq!(flow.late_windows, 1);
        assert!((flow.whole_flow.busy - 1.25).abs() < 1e-9);
        assert_eq!(flow.moments.len(), 1);
        assert_eq!(flow.moments[0].slow_changes, 1);
        assert!(line(&flow.moments[0]).contains("(1 slow)"));
    }

    #[test]
    fn the_monitor_notes_windows_until_stopped() {
        let monitor = Monitor::start(Instant::now());
        std::thread::sleep(Duration::from_millis(350));
        let windows = monitor.stop();
        assert!((1..=4).contains(&windows.len()), "{windows:?}");
        assert!(
            windows
                .iter()
                .all(|w| w.groups_ms.len() == GROUPS.len() && w.seconds >= 0.09)
        );
        // This test runs inside a process named after its crate's test binary, not "bench":
        // only the machine's figures are sure to move.
        assert!(windows.iter().any(|w| w.busy_ms + w.idle_ms > 0.0));
    }
}
