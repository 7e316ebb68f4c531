//! When a CR is looked at again (pure, but for the per-object failure counts):
//!
//! - the API server failed (an [`super::Error`]): exponential backoff per CR, [`FIRST_RETRY`]
//!   doubling up to [`MAX_RETRY`], forgotten after a reconcile that succeeds ([`Backoff`]);
//! - the input is invalid (a [`ProblemReason`] in `Degraded`): the CR's next change when only a
//!   change of the CR can fix it; else (a referenced Secret or ConfigMap, or an admission policy
//!   that refused an object, may change) after [`PROBLEM_RETRY`], because the operator does
//!   not watch Secrets and ConfigMaps (it would need to cache every Secret of the namespaces
//!   it watches);
//! - a drain in progress: after [`DRAIN_POLL`];
//! - else after [`RESYNC`] (drift of the objects the controller does not watch).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use common_crds::conditions::ProblemReason;
use kube::runtime::controller::Action;

/// How soon a CR with a problem that may clear without a change of the CR is looked at again.
pub const PROBLEM_RETRY: Duration = Duration::from_secs(30);
/// How often a settled CR is looked at again without any event (drift of objects the
/// controller does not watch).
pub const RESYNC: Duration = Duration::from_secs(600);
/// How often a drain in progress is looked at.
pub const DRAIN_POLL: Duration = Duration::from_secs(2);
/// The retry after a first failure of the API server.
pub const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest retry after failures of the API server.
pub const MAX_RETRY: Duration = Duration::from_secs(300);

/// What follows a reconcile that applied what it could: `problem`, the reason of the problem
/// that stopped it, if any; `draining`, whether the resources operator is being drained.
/// `renew_in`, how soon something is due (a certificate the operator issued, for renewal; the
/// sites view, to be read again), if ever: never later than that.
pub fn after_apply(
    problem: Option<ProblemReason>,
    draining: bool,
    renew_in: Option<Duration>,
) -> Action {
    let after = match problem {
        _ if draining => Some(DRAIN_POLL),
        Some(reason) if reason.may_clear_by_itself() => Some(PROBLEM_RETRY),
        Some(_) => None,
        None => Some(RESYNC),
    };
    let renew_in = renew_in.map(|r| r.max(FIRST_RETRY));
    match (after, renew_in) {
        (Some(after), Some(renew_in)) => Action::requeue(after.min(renew_in)),
        (None, Some(renew_in)) => Action::requeue(renew_in),
        (Some(after), None) => Action::requeue(after),
        (None, None) => Action::await_change(),
    }
}

/// The retry after `failures` failures in a row (the first is 1): [`FIRST_RETRY`] doubled
/// each time, at most [`MAX_RETRY`].
pub fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(31);
    FIRST_RETRY.saturating_mul(1u32 << doublings).min(MAX_RETRY)
}

/// The failures in a row of each object whose last reconcile failed.
#[derive(Debug)]
pub struct Backoff<K> {
    failures: Mutex<HashMap<K, u32>>,
}

impl<K> Default for Backoff<K> {
    fn default() -> Self {
        Self {
            failures: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq> Backoff<K> {
    /// Counts a failure of `key`'s reconcile; returns when to retry.
    pub fn failed(&self, key: K) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let count = failures.entry(key).or_insert(0);
        *count = count.saturating_add(1);
        backoff(*count)
    }

    /// Forgets `key`'s failures: its reconcile succeeded.
    pub fn succeeded(&self, key: &K) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_one_second_to_five_minutes() {
        let delays: Vec<u64> = (1..=11).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(backoff(0), FIRST_RETRY);
        assert_eq!(backoff(u32::MAX), MAX_RETRY);
    }

    #[test]
    fn backoff_is_per_object_and_reset_by_a_success() {
        let backoff = Backoff::default();
        assert_eq!(backoff.failed("a"), Duration::from_secs(1));
        assert_eq!(backoff.failed("a"), Duration::from_secs(2));
        assert_eq!(backoff.failed("a"), Duration::from_secs(4));
        assert_eq!(backoff.failed("b"), Duration::from_secs(1));
        backoff.succeeded(&"a");
        assert_eq!(backoff.failed("a"), Duration::from_secs(1));
        assert_eq!(backoff.failed("b"), Duration::from_secs(2));
    }

    #[test]
    fn invalid_input_waits_for_a_change_or_rechecks_what_is_not_watched() {
        assert_eq!(after_apply(None, false, None), Action::requeue(RESYNC));
        assert_eq!(
            after_apply(Some(ProblemReason::UnsupportedVersion), false, None),
            Action::await_change()
        );
        for unwatched in [
            ProblemReason::MissingSecret,
            ProblemReason::InvalidTlsSecret,
            ProblemReason::MissingConfigMap,
            ProblemReason::Refused,
        ] {
            assert_eq!(
                after_apply(Some(unwatched), false, None),
                Action::requeue(PROBLEM_RETRY)
            );
        }
        assert_eq!(
            after_apply(Some(ProblemReason::InvalidCluster), true, None),
            Action::requeue(DRAIN_POLL)
        );
        assert_eq!(after_apply(None, true, None), Action::requeue(DRAIN_POLL));
    }

    #[test]
    fn a_certificate_due_for_renewal_brings_the_cr_back_in_time() {
        let soon = Duration::from_secs(42);
        assert_eq!(after_apply(None, false, Some(soon)), Action::requeue(soon));
        assert_eq!(
            after_apply(None, false, Some(Duration::from_secs(1_000_000))),
            Action::requeue(RESYNC)
        );
        assert_eq!(
            after_apply(Some(ProblemReason::UnsupportedVersion), false, Some(soon)),
            Action::requeue(soon)
        );
        // Already due: soon, never in a hot loop.
        assert_eq!(
            after_apply(None, false, Some(Duration::ZERO)),
            Action::requeue(FIRST_RETRY)
        );
    }
}
