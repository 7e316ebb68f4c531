//! Whether an established event stream still delivers (chaos finding 1).
//!
//! The server sends no keep-alives, so a silent stream is normal, and a path that delivers new
//! connections while one established stream is frozen (a middlebox that lost that flow but
//! still answers its own side) passes every health probe. What tells it: the names the stream
//! has told (the replay and the events since) against a names-only list of the server, taken
//! at each probe after silence instead of a bare health check (one request: the container's
//! names for the config stream, the internal cache's keys for the schema and task feeds).
//!
//! A difference at one probe may be an event still on its way; a name that differs at two
//! probes in a row with no event in between (each probe follows `probe_interval` of silence)
//! was missed: the connection ends and the reconnect's replay brings the truth. A difference a
//! fresh replay does not resolve is the server's own (a name it lists but never reports as an
//! event): it is tolerated from then on instead of reconnecting again, so a server that never
//! agrees costs one reconnect per such name, not one per probe.
//!
//! Names are kept as 64-bit hashes (one `u64` per cache or template, not a copy of the name):
//! a collision could only hide a difference.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

use super::ConfigEvent;
use crate::kind::EventKind;

/// What a probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The stream agrees with the list, or a difference may still be on its way.
    Fresh,
    /// This many names differ at two probes in a row: the stream missed changes.
    Stale(usize),
    /// This many names still differ after a fresh replay: the server's own, tolerated.
    Tolerated(usize),
}

/// The state of the check, across the connections of one stream.
#[derive(Debug)]
pub(crate) struct Freshness {
    /// The kinds the stream's list names (other kinds' events are not compared).
    kinds: &'static [EventKind],
    hasher: RandomState,
    /// The names the current connection has told (present now).
    told: HashSet<u64>,
    /// The differences of the last probe (cleared by any event).
    suspect: HashSet<u64>,
    /// The names that ended an earlier connection.
    ended_for: HashSet<u64>,
    /// Differences the server keeps whatever the replay: never acted on again.
    tolerated: HashSet<u64>,
}

impl Freshness {
    pub(crate) fn new(kinds: &'static [EventKind]) -> Self {
        Self {
            kinds,
            hasher: RandomState::new(),
            told: HashSet::new(),
            suspect: HashSet::new(),
            ended_for: HashSet::new(),
            tolerated: HashSet::new(),
        }
    }

    fn key(&self, kind: EventKind, name: &str) -> u64 {
        self.hasher.hash_one((kind, name))
    }

    /// A connection is made: its replay starts from nothing.
    pub(crate) fn connected(&mut self) {
        self.told.clear();
        self.suspect.clear();
    }

    /// The current connection delivered something: a difference seen so far may have been
    /// on its way.
    pub(crate) fn delivered(&mut self) {
        self.suspect.clear();
    }

    /// An event of the current connection.
    pub(crate) fn event(&mut self, event: &ConfigEvent) {
        self.delivered();
        let Some((kind, name)) = event.object() else {
            return;
        };
        if !self.kinds.contains(&kind) {
            return;
        }
        let key = self.key(kind, name);
        if event.is_removal() {
            self.told.remove(&key);
        } else {
            self.told.insert(key);
        }
    }

    /// A probe after silence listed the objects `listed`.
    pub(crate) fn probe<'a>(
        &mut self,
        listed: impl IntoIterator<Item = (EventKind, &'a str)>,
    ) -> Verdict {
        let listed: HashSet<u64> = listed
            .into_iter()
            .map(|(kind, name)| self.key(kind, name))
            .collect();
        let now: HashSet<u64> = listed
            .symmetric_difference(&self.told)
            .filter(|k| !self.tolerated.contains(k))
            .copied()
            .collect();
        let persistent: HashSet<u64> = now.intersection(&self.suspect).copied().collect();
        self.suspect = now;
        if persistent.is_empty() {
            Verdict::Fresh
        } else if persistent.is_subset(&self.ended_for) {
            for key in &persistent {
                self.suspect.remove(key);
            }
            let n = persistent.len();
            self.tolerated.extend(persistent);
            Verdict::Tolerated(n)
        } else {
            let n = persistent.len();
            self.ended_for = persistent;
            Verdict::Stale(n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CONFIG: &[EventKind] = &[EventKind::Cache, EventKind::Template];

    fn names<'a>(
        caches: &'a [&'a str],
        templates: &'a [&'a str],
    ) -> impl Iterator<Item = (EventKind, &'a str)> {
        caches
            .iter()
            .map(|n| (EventKind::Cache, *n))
            .chain(templates.iter().map(|n| (EventKind::Template, *n)))
    }

    fn created(name: &str) -> ConfigEvent {
        ConfigEvent::CacheCreated {
            name: name.into(),
            config: json!({}),
        }
    }

    fn removed(name: &str) -> ConfigEvent {
        ConfigEvent::CacheRemoved { name: name.into() }
    }

    fn replayed(f: &mut Freshness, caches: &[&str]) {
        f.connected();
        for c in caches {
            f.event(&created(c));
        }
    }

    #[test]
    fn a_stream_that_told_every_name_is_fresh() {
        let mut f = Freshness::new(CONFIG);
        replayed(&mut f, &["a", "b"]);
        f.event(&ConfigEvent::TemplateCreated {
            name: "t".into(),
            config: json!({}),
        });
        f.event(&removed("b"));
        for _ in 0..3 {
            assert_eq!(f.probe(names(&["a"], &["t"])), Verdict::Fresh);
        }
    }

    #[test]
    fn a_missed_create_or_remove_is_stale_at_the_second_probe() {
        // Created on the server, never told.
        let mut f = Freshness::new(CONFIG);
        replayed(&mut f, &["a"]);
        assert_eq!(f.probe(names(&["a", "new"], &[])), Verdict::Fresh);
        assert_eq!(f.probe(names(&["a", "new"], &[])), Verdict::Stale(1));
        // Removed on the server, never told.
        let mut f = Freshness::new(CONFIG);
        replayed(&mut f, &["a", "gone"]);
        assert_eq!(f.probe(names(&["a"], &[])), Verdict::Fresh);
        assert_eq!(f.probe(names(&["a"], &[])), Verdict::Stale(1));
    }

    #[test]
    fn an_event_between_two_probes_clears_the_suspicion() {
        let mut f = Freshness::new(CONFIG);
        replayed(&mut f, &["a"]);
        assert_eq!(f.probe(names(&["a", "new"], &[])), Verdict::Fresh);
        // The event was on its way.
        f.event(&created("new"));
        assert_eq!(f.probe(names(&["a", "new"], &[])), Verdict::Fresh);
        // Any event clears it: the stream delivers.
        assert_eq!(f.probe(names(&["a", "new", "x"], &[])), Verdict::Fresh);
        f.event(&created("y"));
        assert_eq!(f.probe(names(&["a", "new", "x", "y"], &[])), Verdict::Fresh);
    }

    #[test]
    fn churn_of_other_names_does_not_hide_a_missed_one() {
        let mut f = Freshness::new(CONFIG);
        replayed(&mut f, &["a"]);
        assert_eq!(f.probe(names(&["a", "missed", "1"], &[])), Verdict::Fresh);
        assert_eq!(
            f.probe(names(&["a", "missed", "2"], &[])),
            Verdict::Stale(1)
        );
    }

    #[test]
    fn a_cache_and_a_template_of_one_name_are_two_names() {
        let mut f = Freshness::new(CONFIG);
        replayed(&mut f, &["n"]);
        assert_eq!(f.probe(names(&[], &["n"])), Verdict::Fresh);
        assert_eq!(f.probe(names(&[], &["n"])), Verdict::Stale(2));
    }

    #[test]
    fn events_of_kinds_the_list_does_not_name_are_not_compared() {
        // 16.1+ config streams also carry schema events; the container's names have none.
        let mut f = Freshness::new(CONFIG);
        replayed(&mut f, &["a"]);
        f.event(&ConfigEvent::SchemaCreated {
            name: "s.proto".into(),
            proto: String::new(),
            errors: None,
        });
        assert_eq!(f.probe(names(&["a"], &[])), Verdict::Fresh);
        assert_eq!(f.probe(names(&["a"], &[])), Verdict::Fresh);
    }

    #[test]
    fn a_difference_a_fresh_replay_keeps_is_tolerated_once_and_for_all() {
        let mut f = Freshness::new(CONFIG);
        replayed(&mut f, &["a"]);
        let listed = names(&["a", "never-told"], &[]).collect::<Vec<_>>();
        assert_eq!(f.probe(listed.clone()), Verdict::Fresh);
        assert_eq!(f.probe(listed.clone()), Verdict::Stale(1));
        // Reconnected: the replay does not tell it either.
        replayed(&mut f, &["a"]);
        assert_eq!(f.probe(listed.clone()), Verdict::Fresh);
        assert_eq!(f.probe(listed.clone()), Verdict::Tolerated(1));
        for _ in 0..3 {
            assert_eq!(f.probe(listed.clone()), Verdict::Fresh);
        }
        // A new miss is still seen.
        let more = names(&["a", "never-told", "missed"], &[]).collect::<Vec<_>>();
        assert_eq!(f.probe(more.clone()), Verdict::Fresh);
        assert_eq!(f.probe(more.clone()), Verdict::Stale(1));
        // Tolerated names survive later connections.
        replayed(&mut f, &["a", "missed"]);
        assert_eq!(f.probe(more.clone()), Verdict::Fresh);
        assert_eq!(f.probe(more.clone()), Verdict::Fresh);
    }
}
