//! Steady flow: which CR update delivered which server change. Each change sets a cache's
//! `expiration.lifespan` to a value of its own (`BASE + sequence`); a CR seen with value `v`
//! delivers every change of that cache up to `v` not delivered yet (the operator may merge
//! changes that come faster than it writes, and a later value covers an earlier one).

use std::collections::HashMap;
use std::time::Instant;

/// Lifespans of the changes are `BASE + sequence`: far from any default, one per change.
pub const BASE: u64 = 70_000_000;

/// One change made on the server.
#[derive(Clone, Debug)]
pub struct Change {
    pub cache: String,
    pub sequence: u64,
    /// Just before the REST request was sent.
    pub sent: Instant,
}

/// One CR update seen by the watch: the CR's server name and the lifespan in its spec.
#[derive(Clone, Debug)]
pub struct Sighting {
    pub cache: String,
    pub lifespan: u64,
    pub seen: Instant,
}

/// The first run of digits after `lifespan` in a configuration document (JSON, YAML or XML:
/// `"lifespan":"70000012"`, `lifespan: 70000012`, `lifespan="70000012"`).
pub fn lifespan_in(document: &str) -> Option<u64> {
    let at = document.find("lifespan")? + "lifespan".len();
    let rest = &document[at..];
    let start = rest.find(|c: char| c.is_ascii_digit())?;
    let digits: String = rest[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    // Only what is right after the key (quotes, colons, blanks, `=`) counts.
    if rest[..start]
        .chars()
        .any(|c| !matches!(c, '"' | '\'' | ':' | '=' | ' ' | '\t' | '\n' | '\\'))
    {
        return None;
    }
    digits.parse().ok()
}

/// When each change reached its CR (`None`: never seen), in the order of `changes`.
pub fn delivered_at(changes: &[Change], sightings: &[Sighting]) -> Vec<Option<Instant>> {
    let mut pending: HashMap<&str, Vec<usize>> = HashMap::new();
    for (index, change) in changes.iter().enumerate() {
        pending.entry(&change.cache).or_default().push(index);
    }
    for list in pending.values_mut() {
        list.sort_by_key(|i| changes[*i].sequence);
    }
    let mut sorted: Vec<&Sighting> = sightings.iter().collect();
    sorted.sort_by_key(|s| s.seen);
    let mut delivered = vec![None; changes.len()];
    for sighting in sorted {
        let Some(sequence) = sighting.lifespan.checked_sub(BASE) else {
            continue;
        };
        let Some(list) = pending.get_mut(sighting.cache.as_str()) else {
            continue;
        };
        let covered = list.partition_point(|i| changes[*i].sequence <= sequence);
        for index in list.drain(..covered) {
            delivered[index] = Some(sighting.seen);
        }
    }
    delivered
}

/// Latencies in ms from each change's `origin` (e.g. when it was sent, or when its event was
/// seen; `None`: unknown, skipped) to its delivery, and how many changes were never delivered.
pub fn latencies(origins: &[Option<Instant>], delivered: &[Option<Instant>]) -> (Vec<f64>, u64) {
    let missed = delivered.iter().filter(|d| d.is_none()).count() as u64;
    let latencies = origins
        .iter()
        .zip(delivered)
        .filter_map(|(origin, delivered)| {
            Some(
                delivered
                    .as_ref()?
                    .saturating_duration_since(*origin.as_ref()?)
                    .as_secs_f64()
                    * 1000.0,
            )
        })
        .collect();
    (latencies, missed)
}

/// The `count` slowest changes from their origin to their delivery (`None`: not known), slowest
/// first: the change's cache, when its origin was (seconds after `start`) and its latency. A
/// diagnosis of the tail: slow changes bunched in time point at a stall of the whole machine
/// or process, spread ones at a cost per change, bunched in one cluster at that cluster.
pub fn slowest(
    changes: &[Change],
    origins: &[Option<Instant>],
    delivered: &[Option<Instant>],
    start: Instant,
    count: usize,
) -> Vec<crate::figures::SlowChange> {
    let mut all: Vec<crate::figures::SlowChange> = changes
        .iter()
        .zip(origins)
        .zip(delivered)
        .filter_map(|((change, origin), delivered)| {
            let origin = origin.as_ref()?;
            Some(crate::figures::SlowChange {
                cache: change.cache.clone(),
                at_s: origin.saturating_duration_since(start).as_secs_f64(),
                ms: delivered
                    .as_ref()?
                    .saturating_duration_since(*origin)
                    .as_secs_f64()
                    * 1000.0,
                split: None,
            })
        })
        .collect();
    all.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    all.truncate(count);
    all
}

/// The first time each lifespan value was seen (the bench's own listener on the server's
/// event stream: when the change's event was out).
pub fn first_seen(sightings: &[Sighting]) -> HashMap<u64, Instant> {
    let mut first: HashMap<u64, Instant> = HashMap::new();
    for s in sightings {
        first
            .entry(s.lifespan)
            .and_modify(|t| *t = (*t).min(s.seen))
            .or_insert(s.seen);
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_slowest_changes_come_first_with_their_cache_and_moment() {
        let start = Instant::now();
        let at = |ms: u64| Some(start + Duration::from_millis(ms));
        let change = |cache: &str, sequence| Change {
            cache: cache.to_string(),
            sequence,
            sent: start,
        };
        let changes = [
            change("c00-1", 1),
            change("c01-1", 2),
            change("c02-1", 3),
            change("c03-1", 4),
        ];
        let slow = slowest(
            &changes,
            &[at(1000), at(2500), None, at(3000)],
            &[at(1020), at(2680), at(9000), None],
            start,
            2,
        );
        assert_eq!(
            slow.iter()
                .map(|s| (s.cache.as_str(), s.at_s, s.ms))
                .collect::<Vec<_>>(),
            [("c01-1", 2.5, 180.0), ("c00-1", 1.0, 20.0)]
        );
    }

    #[test]
    fn finds_the_lifespan_in_any_format() {
        assert_eq!(
            lifespan_in(r#"{"distributed-cache":{"expiration":{"lifespan":"70000012"}}}"#),
            Some(70_000_012)
        );
        assert_eq!(
            lifespan_in(r#"{"expiration":{"lifespan":70000013}}"#),
            Some(70_000_013)
        );
        assert_eq!(
            lifespan_in("expiration:\n  lifespan: 70000014\n"),
            Some(70_000_014)
        );
        assert_eq!(
            lifespan_in(r#"<expiration lifespan="70000015"/>"#),
            Some(70_000_015)
        );
        assert_eq!(
            lifespan_in(r#"{\"lifespan\":\"70000016\"}"#),
            Some(70_000_016)
        );
        assert_eq!(lifespan_in(r#"{"lifespan-other":{"x":1}}"#), None);
        assert_eq!(lifespan_in("no such key 12"), None);
    }

    #[test]
    fn a_later_value_delivers_the_earlier_changes_of_its_cache_only() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let change = |cache: &str, sequence: u64, ms: u64| Change {
            cache: cache.into(),
            sequence,
            sent: at(ms),
        };
        let changes = vec![
            change("a", 0, 0),
            change("b", 1, 10),
            change("a", 2, 20),
            change("a", 3, 30),
            change("b", 4, 40),
        ];
        let seen = |cache: &str, sequence: u64, ms: u64| Sighting {
            cache: cache.into(),
            lifespan: BASE + sequence,
            seen: at(ms),
        };
        let sightings = vec![
            seen("a", 2, 50), // delivers a0 (50 ms) and a2 (30 ms)
            seen("b", 1, 15), // delivers b1 (5 ms)
            seen("a", 2, 60), // again: nothing new
            seen("c", 3, 70), // another cache: nothing
            seen("a", 3, 90), // a3 (60 ms)
        ];
        let delivered = delivered_at(&changes, &sightings);
        let sent: Vec<Option<Instant>> = changes.iter().map(|c| Some(c.sent)).collect();
        let (mut latencies, missed) = latencies(&sent, &delivered);
        latencies.sort_by(f64::total_cmp);
        assert_eq!(latencies, vec![5.0, 30.0, 50.0, 60.0]);
        assert_eq!(missed, 1); // b4
        // From other origins (one unknown): a0 seen as an event at 40 ms.
        let mut origins = vec![None; changes.len()];
        origins[0] = Some(at(40));
        assert_eq!(latencies_from(&origins, &delivered), vec![10.0]);
        let first = first_seen(&[seen("a", 7, 9), seen("a", 7, 3)]);
        assert_eq!(first.get(&(BASE + 7)), Some(&at(3)));
    }

    fn latencies_from(origins: &[Option<Instant>], delivered: &[Option<Instant>]) -> Vec<f64> {
        latencies(origins, delivered).0
    }
}
