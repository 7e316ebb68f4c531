//! Server objects that cannot become a CR (design S1, a server object no CR stands for gets a
//! mirror CR): the API server refused the mirror CR, because a CRD's schema is stricter than
//! the server (a task with an empty script, for one), or because something in its admission
//! failed (a policy's parameter that could not be read in time). Each is reported once per
//! content (a Warning Event on the `Infinispan` CR, the `objects_not_mirrored` gauge, a log
//! line) and tried again on [`REFUSED`]'s clock until it is mirrored, its content changes or it
//! goes away from the server.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::locked::Locked;
use super::retries::Backoff;

/// A refused mirror CR is tried again, with the same content, 10 s after the refusal, then
/// after twice as long each time, at most every 10 minutes: a refusal that was not about the
/// content (an admission webhook or a policy that failed, a policy fixed since) heals on its
/// own, and one that was costs a create every 10 minutes.
pub const REFUSED: Backoff = Backoff {
    first: Duration::from_secs(10),
    max: Duration::from_secs(600),
};

#[derive(Debug)]
struct Refusal {
    /// The content refused.
    digest: String,
    /// Refusals of that content in a row.
    attempts: u32,
    /// When to try it again.
    at: Instant,
    /// Handed to the retry loop: the next attempt is not held back.
    retrying: bool,
}

/// The server names whose mirror CR the API server refused, with the digest of the content it
/// refused.
#[derive(Debug, Default)]
pub struct Unmirrorable {
    by_name: Locked<HashMap<String, Refusal>>,
}

impl Unmirrorable {
    /// Whether the mirror CR of `name` with the content of `digest` was refused already and is
    /// not to be tried again yet.
    pub fn refused(&self, name: &str, digest: &str) -> bool {
        self.by_name.with(|refused| {
            refused
                .get(name)
                .is_some_and(|r| r.digest == digest && !r.retrying)
        })
    }

    /// Records a refusal at `now`; whether it is new (to report) rather than a repeat of the
    /// same content.
    pub fn record(&self, name: &str, digest: &str, now: Instant) -> bool {
        self.by_name.with(|refused| {
            let refusal = refused.entry(name.to_string()).or_insert(Refusal {
                digest: String::new(),
                attempts: 0,
                at: now,
                retrying: false,
            });
            let new = refusal.digest != digest;
            if new {
                refusal.digest = digest.to_string();
                refusal.attempts = 0;
            }
            refusal.attempts += 1;
            refusal.at = now + REFUSED.after(refusal.attempts);
            refusal.retrying = false;
            new
        })
    }

    /// The names whose next attempt is due at `now`, handed to the retry loop: each is given
    /// its next slot at once (an attempt that decides nothing is not repeated at every tick).
    pub fn due(&self, now: Instant) -> Vec<String> {
        self.by_name.with(|refused| {
            refused
                .iter_mut()
                .filter(|(_, r)| !r.retrying && r.at <= now)
                .map(|(name, r)| {
                    r.retrying = true;
                    r.at = now + REFUSED.after(r.attempts + 1);
                    name.clone()
                })
                .collect()
        })
    }

    /// The object was mirrored, went away, or a CR stands for it now: nothing to report about
    /// it any more.
    /// Whether it was there.
    pub fn forget(&self, name: &str) -> bool {
        self.by_name.with(|refused| refused.remove(name).is_some())
    }

    /// How many server objects are not mirrored now.
    pub fn len(&self) -> usize {
        self.by_name.with(|refused| refused.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_new_once_per_content_and_forgotten_when_the_object_goes() {
        let t0 = Instant::now();
        let unmirrorable = Unmirrorable::default();
        assert!(!unmirrorable.refused("t", "d1"));
        assert!(unmirrorable.record("t", "d1", t0));
        assert!(unmirrorable.refused("t", "d1"));
        // The same content again: not new.
        assert!(!unmirrorable.record("t", "d1", t0));
        // Other content: tried, and new when refused.
        assert!(!unmirrorable.refused("t", "d2"));
        assert!(unmirrorable.record("t", "d2", t0));
        assert_eq!(unmirrorable.len(), 1);
        unmirrorable.forget("t");
        assert!(unmirrorable.is_empty());
        assert!(!unmirrorable.refused("t", "d2"));
    }

    #[test]
    fn the_same_content_is_tried_again_after_a_growing_delay_and_reported_once() {
        let t0 = Instant::now();
        let unmirrorable = Unmirrorable::default();
        assert!(unmirrorable.record("t", "d", t0));
        assert!(unmirrorable.due(t0 + Duration::from_secs(9)).is_empty());
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(unmirrorable.due(t1), ["t"]);
        // Handed over: the attempt is not held back, and not handed over twice.
        assert!(!unmirrorable.refused("t", "d"));
        assert!(unmirrorable.due(t1 + Duration::from_secs(60)).is_empty());
        // Refused again: a repeat, held back for twice as long.
        assert!(!unmirrorable.record("t", "d", t1));
        assert!(unmirrorable.refused("t", "d"));
        assert!(unmirrorable.due(t1 + Duration::from_secs(19)).is_empty());
        assert_eq!(unmirrorable.due(t1 + Duration::from_secs(20)), ["t"]);
        // Never more than 10 minutes apart.
        let mut t = t1 + Duration::from_secs(20);
        for _ in 0..20 {
            assert!(!unmirrorable.record("t", "d", t));
            t += REFUSED.max;
            assert_eq!(unmirrorable.due(t), ["t"]);
        }
    }
}
