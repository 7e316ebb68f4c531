//! Dependency waits (design D1): a CR that needs a server object the server does not have yet
//! (a Cache's Template, a schema's message type) waits for it, and is reconciled again as soon
//! as the object appears, rather than only by its retry backoff.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

use super::catalog::Needed;
use super::compact;
use super::locked::Locked;

/// The CRs (by key) waiting for each server object they need.
#[derive(Debug)]
pub struct DependencyWaits<K> {
    by_needed: Locked<HashMap<Needed, HashSet<K>>>,
}

impl<K> Default for DependencyWaits<K> {
    fn default() -> Self {
        Self {
            by_needed: Locked::default(),
        }
    }
}

impl<K: Clone + Eq + Hash> DependencyWaits<K> {
    /// The CR `key` now waits for `missing`, and for nothing else.
    pub fn wait_for(&self, key: &K, missing: &[Needed]) {
        self.by_needed.with(|waiting| {
            compact::retain(waiting, |_, crs| {
                crs.remove(key);
                !crs.is_empty()
            });
            for needed in missing {
                waiting
                    .entry(needed.clone())
                    .or_default()
                    .insert(key.clone());
            }
        });
    }

    /// Forgets the CRs `keep` refuses (they are gone).
    pub fn retain(&self, keep: impl Fn(&K) -> bool) {
        self.by_needed.with(|waiting| {
            compact::retain(waiting, |_, crs| {
                crs.retain(|key| keep(key));
                !crs.is_empty()
            });
        });
    }

    /// `needed` appeared on the server: the CRs that waited for it, no longer waiting for it.
    pub fn appeared(&self, needed: &Needed) -> HashSet<K> {
        self.by_needed.with(|waiting| {
            let crs = waiting.remove(needed);
            compact::after_removal(waiting);
            crs.unwrap_or_default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infinispan_rest::EventKind;

    fn template(name: &str) -> Needed {
        Needed::new(EventKind::Template, name)
    }

    #[test]
    fn a_cr_waits_for_what_it_misses_now_and_is_released_when_it_appears() {
        let waits = DependencyWaits::<&str>::default();
        waits.wait_for(&"a", &[template("t1"), template("t2")]);
        waits.wait_for(&"b", &[template("t1")]);
        // `a` no longer misses t2 (its spec changed): it waits for t1 only.
        waits.wait_for(&"a", &[template("t1")]);
        assert!(waits.appeared(&template("t2")).is_empty());
        assert_eq!(waits.appeared(&template("t1")), HashSet::from(["a", "b"]));
        assert!(waits.appeared(&template("t1")).is_empty(), "released once");
    }

    #[test]
    fn crs_that_went_wait_no_more() {
        let waits = DependencyWaits::<&str>::default();
        waits.wait_for(&"a", &[template("t")]);
        waits.wait_for(&"b", &[template("t")]);
        waits.retain(|key| *key != "a");
        assert_eq!(waits.appeared(&template("t")), HashSet::from(["b"]));
    }
}
