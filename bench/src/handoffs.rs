//! Where each change of a steady flow spent its time, from the operators' own logs. With
//! `resources_operator::latency=debug` (the bench's default log filter for the operators) an
//! operator logs one line per server event that took a CR write: its timestamp is when the write
//! was answered, and `event_to_cr_ms` how long after the operator read the event. Beside the
//! bench's own moments (its listener seeing the event, its watch seeing the CR), a change's
//! event-to-CR splits into three hand-offs:
//!
//! - the server to the operator: the same event read by the operator's stream later than by the
//!   bench's listener (negative when earlier): the server writing the event to each listener in
//!   turn, and the operator's stream being scheduled;
//! - the operator: from reading the event to its CR write answered, the write included;
//! - the API server to the bench's watch: from the write's answer to the watch event.
//!
//! The bench's `Instant`s and the log's UTC timestamps are the same machine's clocks, tied by
//! one reading of both at the flow's start.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::stats::Percentiles;

/// The operator's log target (`resources_operator::metrics::LATENCY_LOG`).
pub const TARGET: &str = "resources_operator::latency";

/// The operators' log filter in the bench: the Deployment's level, and the latency lines.
pub const OPERATOR_LOG_FILTER: &str = "info,resources_operator::latency=debug";

/// One latency line of an operator's log.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// When the CR write was answered, seconds since the Unix epoch.
    pub unix_s: f64,
    pub server_name: String,
    /// From the operator reading the event to the write answered.
    pub ms: f64,
}

/// The value of `key=` in a tracing line (quotes removed).
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[start..];
    match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next(),
        None => rest.split_whitespace().next(),
    }
}

/// A latency line (`2026-12-07T22:29:31.016626Z DEBUG ...: resources_operator::latency: a
/// server event reached its CR kind="Cache" server_name="c00-0000" event_to_cr_ms=12.5`).
pub fn parse(line: &str) -> Option<Record> {
    if !line.contains(&format!(" {TARGET}: ")) {
        return None;
    }
    let stamp: k8s_openapi::jiff::Timestamp = line.split_whitespace().next()?.parse().ok()?;
    Some(Record {
        unix_s: stamp.as_nanosecond() as f64 / 1e9,
        server_name: field(line, "server_name")?.to_string(),
        ms: field(line, "event_to_cr_ms")?.parse().ok()?,
    })
}

/// The latency lines of the logs, by server name, in the order written.
pub fn read(logs: &[&Path]) -> HashMap<String, Vec<Record>> {
    let mut by_name: HashMap<String, Vec<Record>> = HashMap::new();
    for log in logs {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        for record in text.lines().filter_map(parse) {
            by_name
                .entry(record.server_name.clone())
                .or_default()
                .push(record);
        }
    }
    by_name
}

/// One reading of both clocks, to place an `Instant` in Unix time.
#[derive(Clone, Copy, Debug)]
pub struct Anchor {
    instant: Instant,
    unix_s: f64,
}

impl Anchor {
    pub fn now() -> Self {
        Self {
            instant: Instant::now(),
            unix_s: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        }
    }

    pub fn unix_s(&self, at: Instant) -> f64 {
        if at >= self.instant {
            self.unix_s + (at - self.instant).as_secs_f64()
        } else {
            self.unix_s - (self.instant - at).as_secs_f64()
        }
    }
}

/// A change's event-to-CR in its three hand-offs, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Split {
    pub to_operator_ms: f64,
    pub operator_ms: f64,
    pub to_watch_ms: f64,
}

/// How far before the bench's listener saw the event the operator's write may have been
/// answered and still be this change's (the operator reads the same event first at times).
const EARLY_S: f64 = 1.0;
/// How far after the bench's watch saw the CR the write's answer may come (the watch event can
/// overtake the answer).
const LATE_S: f64 = 0.5;

/// The split of one change: its cache, the bench's listener seeing its event and its watch seeing
/// the CR (Unix seconds), and the operator's line of that cache written nearest before the CR
/// was seen, within `EARLY_S` and `LATE_S`. `None` when no line fits.
pub fn split(
    records: &HashMap<String, Vec<Record>>,
    cache: &str,
    event_s: f64,
    seen_s: f64,
) -> Option<Split> {
    let record = records
        .get(cache)?
        .iter()
        .filter(|r| r.unix_s >= event_s - EARLY_S && r.unix_s <= seen_s + LATE_S)
        .min_by(|a, b| {
            (a.unix_s - seen_s)
                .abs()
                .total_cmp(&(b.unix_s - seen_s).abs())
        })?;
    let read_s = record.unix_s - record.ms / 1000.0;
    Some(Split {
        to_operator_ms: (read_s - event_s) * 1000.0,
        operator_ms: record.ms,
        to_watch_ms: (seen_s - record.unix_s) * 1000.0,
    })
}

/// The three hand-offs over the changes of a flow.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Handoffs {
    /// Changes with an operator line (of those with an event and a CR seen).
    pub matched: usize,
    pub of: usize,
    pub to_operator: Percentiles,
    /// The smallest 1 % of `to_operator` (the operator read the event that much before the
    /// bench's listener, when negative): whether the server's hand-off delays one side only.
    #[serde(default)]
    pub to_operator_p1_ms: f64,
    pub operator: Percentiles,
    pub to_watch: Percentiles,
    /// The operator and the watch together, per change: event-to-CR without the server's
    /// hand-off, from the operator reading the event to the bench's watch seeing the CR.
    #[serde(default)]
    pub from_operator: Percentiles,
}

impl Handoffs {
    pub fn of(splits: &[Option<Split>]) -> Self {
        let found: Vec<&Split> = splits.iter().flatten().collect();
        let each =
            |f: fn(&Split) -> f64| Percentiles::of(&found.iter().map(|s| f(s)).collect::<Vec<_>>());
        let mut to_operator: Vec<f64> = found.iter().map(|s| s.to_operator_ms).collect();
        to_operator.sort_by(f64::total_cmp);
        Self {
            matched: found.len(),
            of: splits.len(),
            to_operator: Percentiles::of(&to_operator),
            to_operator_p1_ms: crate::stats::nearest_rank(&to_operator, 1.0).unwrap_or_default(),
            operator: each(|s| s.operator_ms),
            to_watch: each(|s| s.to_watch_ms),
            from_operator: each(|s| s.operator_ms + s.to_watch_ms),
        }
    }

    /// What [`Self::cells`] shows, in its order.
    pub const LABELS: [&str; 5] = [
        "the server to the operator (its p1)",
        "the operator, its CR write included",
        "the API server to the bench's watch",
        "the operator's read to the watch",
        "changes found in the operators' logs",
    ];

    /// Each hand-off's `p50 / p99` in ms (the server's with its p1), and the changes found.
    pub fn cells(&self) -> [String; 5] {
        let pair = |p: &Percentiles| format!("{:.0} / {:.0}", p.p50_ms, p.p99_ms);
        [
            format!(
                "{} ({:.0})",
                pair(&self.to_operator),
                self.to_operator_p1_ms
            ),
            pair(&self.operator),
            pair(&self.to_watch),
            pair(&self.from_operator),
            format!("{} of {}", self.matched, self.of),
        ]
    }

    /// The figures with their labels, for a log line.
    pub fn line(&self) -> String {
        let labelled: Vec<String> = Self::LABELS
            .iter()
            .zip(self.cells())
            .map(|(label, cell)| format!("{label} {cell}"))
            .collect();
        format!("(ms, p50 / p99) {}", labelled.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "2026-12-07T22:29:31.016626Z DEBUG member{cluster=c00}:reconciling object{object.ref=Cache.v2alpha1.infinispan.org/c00-0000-d72c464c.bench object.reason=unknown}: resources_operator::latency: a server event reached its CR kind=\"Cache\" server_name=\"c00-0000\" event_to_cr_ms=12.5";

    #[test]
    fn reads_the_latency_lines_only() {
        let record = parse(LINE).expect("a latency line");
        assert_eq!(record.server_name, "c00-0000");
        assert_eq!(record.ms, 12.5);
        // 2026-12-07T22:29:31Z
        assert!(
            (record.unix_s - 1_796_682_571.016_626).abs() < 1e-5,
            "{}",
            record.unix_s
        );
        let info = LINE.replace(
            "resources_operator::latency",
            "resources_operator::engine::controller::execute",
        );
        assert_eq!(parse(&info), None);
        assert_eq!(parse("garbage resources_operator::latency: x"), None);
    }

    fn record(unix_s: f64, ms: f64) -> Record {
        Record {
            unix_s,
            server_name: "c01-0007".into(),
            ms,
        }
    }

    #[test]
    fn a_change_splits_at_the_operators_line_nearest_its_cr() {
        let records = HashMap::from([(
            "c01-0007".to_string(),
            vec![
                record(100.0, 20.0),
                record(200.050, 30.0),
                record(300.0, 5.0),
            ],
        )]);
        // The bench saw the event at 200.000 and the CR at 200.070: the operator read the
        // event at 200.020 and its write was answered at 200.050.
        let s = split(&records, "c01-0007", 200.0, 200.070).expect("found");
        assert!((s.to_operator_ms - 20.0).abs() < 1e-6, "{s:?}");
        assert!((s.operator_ms - 30.0).abs() < 1e-6);
        assert!((s.to_watch_ms - 20.0).abs() < 1e-6);
        // No line of the cache near that change, or no line of the cache at all.
        assert_eq!(split(&records, "c01-0007", 250.0, 250.1), None);
        assert_eq!(split(&records, "c02-0000", 200.0, 200.07), None);
    }

    #[test]
    fn the_hand_offs_of_a_flow() {
        let splits = vec![
            Some(Split {
                to_operator_ms: -1.0,
                operator_ms: 10.0,
                to_watch_ms: 2.0,
            }),
            None,
            Some(Split {
                to_operator_ms: 40.0,
                operator_ms: 90.0,
                to_watch_ms: 4.0,
            }),
        ];
        let h = Handoffs::of(&splits);
        assert_eq!((h.matched, h.of), (2, 3));
        assert_eq!(h.to_operator.p99_ms, 40.0);
        assert_eq!(h.to_operator_p1_ms, -1.0);
        assert_eq!(h.operator.p50_ms, 10.0);
        assert_eq!(h.from_operator.p99_ms, 94.0);
        assert_eq!(h.from_operator.p50_ms, 12.0);
        assert!(
            h.line()
                .contains("changes found in the operators' logs 2 of 3"),
            "{}",
            h.line()
        );
        assert!(
            h.line()
                .contains("the server to the operator (its p1) -1 / 40 (-1)")
        );
    }

    #[test]
    fn the_anchor_places_instants_in_unix_time() {
        let anchor = Anchor::now();
        let later = anchor.instant + std::time::Duration::from_millis(1500);
        assert!((anchor.unix_s(later) - anchor.unix_s - 1.5).abs() < 1e-9);
        if let Some(earlier) = anchor
            .instant
            .checked_sub(std::time::Duration::from_millis(250))
        {
            assert!((anchor.unix_s - anchor.unix_s(earlier) - 0.25).abs() < 1e-9);
        }
    }
}
