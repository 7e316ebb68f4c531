//! The bookkeeping of the engine's own writes to CRs: which store copies predate them
//! ([`ReplacedVersions`]), and how long a server event waited for the CR write it caused
//! ([`PendingEvents`], the `event_to_cr_seconds` metric). The guard against write loops,
//! which counts content writes, is [`super::loop_guard`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::compact;
use super::locked::Locked;

/// How long a store copy at the version our write replaced counts as stale.
pub const STALE_LIMIT: Duration = Duration::from_secs(10);

/// Per CR uid, the resourceVersion our last write to it replaced: a store copy still at that
/// version is stale (the watch has not brought our write yet), and deciding on it would repeat
/// the write. Bounded in time ([`STALE_LIMIT`]): a write the API server took as a no-op never
/// brings a new version.
#[derive(Debug, Default)]
pub struct ReplacedVersions {
    by_uid: Locked<HashMap<String, (String, Instant)>>,
}

impl ReplacedVersions {
    /// Records that we wrote the CR `uid` at `now`, replacing its `version`.
    pub fn wrote(&self, uid: String, version: String, now: Instant) {
        self.by_uid
            .with(|replaced| replaced.insert(uid, (version, now)));
    }

    /// Whether a copy of the CR `uid` at `version` predates our own last write to it, at
    /// `now`. A copy past it (or a write too old to wait for) ends the record.
    pub fn is_stale(&self, uid: &str, version: Option<&str>, now: Instant) -> bool {
        self.by_uid.with(|replaced| match replaced.get(uid) {
            Some((old, at))
                if Some(old.as_str()) == version && now.duration_since(*at) < STALE_LIMIT =>
            {
                true
            }
            Some(_) => {
                replaced.remove(uid);
                compact::after_removal(replaced);
                false
            }
            None => false,
        })
    }

    /// Forgets the CRs whose uid `keep` refuses (they are gone).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.by_uid
            .with(|by_uid| compact::retain(by_uid, |uid, _| keep(uid)));
    }
}

/// Per server name, when a server event first changed the object since its events were last
/// handled: the start of the `event_to_cr_seconds` measure.
#[derive(Debug, Default)]
pub struct PendingEvents {
    since: Locked<HashMap<String, Instant>>,
}

impl PendingEvents {
    /// A server event changed `server_name` at `now`; an earlier one still pending counts.
    pub fn arrived(&self, server_name: &str, now: Instant) {
        self.since.with(|pending| {
            pending.entry(server_name.to_string()).or_insert(now);
        });
    }

    /// The events of `server_name` are handled: when the first of them arrived, if any.
    pub fn handled(&self, server_name: &str) -> Option<Instant> {
        self.since.with(|pending| {
            let since = pending.remove(server_name);
            compact::after_removal(pending);
            since
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_at_the_replaced_version_is_stale_until_the_watch_brings_ours() {
        let replaced = ReplacedVersions::default();
        let t0 = Instant::now();
        replaced.wrote("u".into(), "41".into(), t0);
        assert!(replaced.is_stale("u", Some("41"), t0 + Duration::from_secs(1)));
        assert!(!replaced.is_stale("v", Some("41"), t0), "another CR");
        // Our write arrived: the record ends, even for a later copy at the old version.
        assert!(!replaced.is_stale("u", Some("42"), t0 + Duration::from_secs(1)));
        assert!(!replaced.is_stale("u", Some("41"), t0 + Duration::from_secs(1)));
    }

    #[test]
    fn a_write_that_brings_no_new_version_is_waited_for_a_while_only() {
        let replaced = ReplacedVersions::default();
        let t0 = Instant::now();
        replaced.wrote("u".into(), "41".into(), t0);
        assert!(replaced.is_stale("u", Some("41"), t0 + STALE_LIMIT - Duration::from_millis(1)));
        assert!(!replaced.is_stale("u", Some("41"), t0 + STALE_LIMIT));
        replaced.wrote("v".into(), "7".into(), t0);
        replaced.retain(|uid| uid != "v");
        assert!(!replaced.is_stale("v", Some("7"), t0));
    }

    #[test]
    fn an_event_is_timed_from_the_first_one_pending() {
        let pending = PendingEvents::default();
        let t0 = Instant::now();
        pending.arrived("c", t0);
        pending.arrived("c", t0 + Duration::from_secs(1));
        assert_eq!(pending.handled("c"), Some(t0));
        assert_eq!(pending.handled("c"), None, "handled once");
        assert_eq!(pending.handled("other"), None);
    }
}
