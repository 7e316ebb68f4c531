//! Server objects no CR stands for whose sync did not go through (the API server did not
//! answer, or answered an error that can pass: a 5xx, a 429, an admission webhook that timed
//! out): tried again on a clock of their own, instead of waiting for their next server event or
//! the next reconnect, which may never come for an object nobody changes (design S1: a server
//! object gets its mirror CR). The engine's retry loop asks for the names that are due.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::locked::Locked;

/// Delays between attempts: `first`, doubling with each attempt, at most `max`.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Backoff {
    /// The delay after `attempts` attempts (1: the first failed).
    pub fn after(&self, attempts: u32) -> Duration {
        let doublings = attempts.saturating_sub(1).min(16);
        self.first.saturating_mul(1 << doublings).min(self.max)
    }
}

/// After a failed sync: 1 s doubling to 60 s, as the server streams reconnect.
pub const FAILED: Backoff = Backoff {
    first: Duration::from_secs(1),
    max: Duration::from_secs(60),
};

#[derive(Debug)]
struct Retry {
    attempts: u32,
    at: Instant,
}

/// The server names whose last unclaimed sync failed, with when to try again.
#[derive(Debug, Default)]
pub struct Retries {
    by_name: Locked<HashMap<String, Retry>>,
}

impl Retries {
    /// The sync of `name` failed at `now`: tried again after the backoff of its attempts so
    /// far, returned.
    pub fn failed(&self, name: &str, now: Instant) -> Duration {
        self.by_name.with(|retries| {
            let retry = retries.entry(name.to_string()).or_insert(Retry {
                attempts: 0,
                at: now,
            });
            retry.attempts += 1;
            let delay = FAILED.after(retry.attempts);
            retry.at = now + delay;
            delay
        })
    }

    /// The sync went through, or the object went away or has a CR now.
    pub fn forget(&self, name: &str) {
        self.by_name.with(|retries| retries.remove(name));
    }

    /// The names due at `now`. Each is given its next slot at once (as if this attempt
    /// failed), so that an attempt that decides nothing (the engine draining, the server's
    /// epoch not known yet) is not repeated at every tick; [`Self::failed`] or
    /// [`Self::forget`] then says how it went.
    pub fn due(&self, now: Instant) -> Vec<String> {
        self.by_name.with(|retries| {
            retries
                .iter_mut()
                .filter(|(_, retry)| retry.at <= now)
                .map(|(name, retry)| {
                    retry.at = now + FAILED.after(retry.attempts + 1);
                    name.clone()
                })
                .collect()
        })
    }

    pub fn len(&self) -> usize {
        self.by_name.with(|retries| retries.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_its_first_delay_to_its_max() {
        let delays: Vec<u64> = (1..=8).map(|a| FAILED.after(a).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(FAILED.after(0), Duration::from_secs(1));
        assert_eq!(FAILED.after(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn a_failed_sync_is_due_after_its_backoff_once_and_forgotten_when_it_goes_through() {
        let retries = Retries::default();
        let t0 = Instant::now();
        assert_eq!(retries.failed("a", t0), Duration::from_secs(1));
        assert!(retries.due(t0).is_empty());
        assert_eq!(retries.due(t0 + Duration::from_secs(1)), ["a"]);
        // Given its next slot by `due`: not due again at the next tick.
        assert!(retries.due(t0 + Duration::from_secs(2)).is_empty());
        // Failed again: twice the delay.
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(retries.failed("a", t1), Duration::from_secs(2));
        assert!(retries.due(t1 + Duration::from_millis(1999)).is_empty());
        assert_eq!(retries.due(t1 + Duration::from_secs(2)), ["a"]);
        retries.forget("a");
        assert!(retries.is_empty());
        assert!(retries.due(t1 + Duration::from_secs(600)).is_empty());
    }
}
