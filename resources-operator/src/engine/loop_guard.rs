//! A guard against write loops: the decision never writes twice for one change (design L2), but
//! another writer can fight the operator over one object (a second operator pointed at the same
//! server in `ToServer` mode, a script that keeps rewriting a cache). Each would revert the
//! other forever. The guard counts the operator's content writes per object that can undo
//! another writer's (every server write; a CR spec write only when it overwrites an edit of the
//! CR, see [`counts`]; never status) over a sliding window; past the limit the object is held: no
//! content write for it until the hold ends, `Ready=False, reason=WriteLoop` and one Warning
//! Event say why. A loop then costs at most `LIMIT` writes per window plus hold.
//!
//! Pure bookkeeping with the clock passed in; the engine keeps one [`LoopGuard`] per kind. The
//! engine's other bookkeeping of its own writes is in [`super::writes`].

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::decision::Action;
use super::locked::Locked;

/// Content writes for one object allowed within [`WINDOW`].
pub const LIMIT: usize = 8;
/// The sliding window.
pub const WINDOW: Duration = Duration::from_secs(60);
/// How long a looping object is held.
pub const HOLD: Duration = Duration::from_secs(300);

/// Whether a content write counts toward a loop. Every write to the server does (reverting the
/// server is how the operator fights another server writer, e.g. in `ToServer` mode). A CR spec
/// rewritten from the server counts only when the CR was edited since the last sync, i.e. the
/// write overwrites someone's edit (`FromServer` mode against a GitOps tool that keeps
/// reverting the CR); a CR that only follows the server's changes fights nobody, however often
/// another client changes the object (found by the benchmark's steady flow: 30 changes a minute
/// per cache held every cache after 8).
pub fn counts(to_server: bool, cr_edited_since_sync: bool) -> bool {
    to_server || cr_edited_since_sync
}

/// Whether the guard watches `action`: a content write (not a finalizer, status or deletion)
/// that [`counts`]; `cr_edited_since_sync`: the CR's generation is not the last synced one.
pub fn guards(action: Action, cr_edited_since_sync: bool) -> bool {
    let content_write = matches!(
        action,
        Action::CreateOnServer
            | Action::UpdateServer
            | Action::RecreateOnServer
            | Action::UpdateCrSpecFromServer
    );
    content_write
        && counts(
            !matches!(action, Action::UpdateCrSpecFromServer),
            cr_edited_since_sync,
        )
}

/// What the guard says about a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Go ahead.
    Allowed,
    /// Held (until the instant): this write would continue a loop.
    Held { until: Instant, writes: usize },
}

#[derive(Debug, Default)]
struct Object {
    writes: VecDeque<Instant>,
    held_until: Option<Instant>,
}

/// Write counts per object key (the CR's uid).
#[derive(Debug, Default)]
pub struct LoopGuard {
    objects: Locked<HashMap<String, Object>>,
}

impl LoopGuard {
    /// Whether a content write for `key` may happen at `now`.
    pub fn check(&self, key: &str, now: Instant) -> Verdict {
        self.objects.with(|objects| match objects.get_mut(key) {
            Some(object) => object.check(now),
            None => Verdict::Allowed,
        })
    }

    /// Records a content write for `key` at `now`, and forgets objects without writes in the
    /// window and not held (bounded memory).
    pub fn wrote(&self, key: &str, now: Instant) {
        self.objects.with(|objects| {
            objects
                .entry(key.to_string())
                .or_default()
                .writes
                .push_back(now);
            objects.retain(|_, object| object.active(now));
        });
    }
}

impl Object {
    fn check(&mut self, now: Instant) -> Verdict {
        let object = self;
        while object
            .writes
            .front()
            .is_some_and(|at| now.duration_since(*at) > WINDOW)
        {
            object.writes.pop_front();
        }
        match object.held_until {
            Some(until) if now < until => Verdict::Held {
                until,
                writes: object.writes.len(),
            },
            Some(_) => {
                // The hold is over: a fresh start.
                object.held_until = None;
                object.writes.clear();
                Verdict::Allowed
            }
            None if object.writes.len() >= LIMIT => {
                let until = now + HOLD;
                object.held_until = Some(until);
                Verdict::Held {
                    until,
                    writes: object.writes.len(),
                }
            }
            None => Verdict::Allowed,
        }
    }

    /// Held, or written to within the window.
    fn active(&self, now: Instant) -> bool {
        self.held_until.is_some_and(|until| now < until)
            || self
                .writes
                .back()
                .is_some_and(|at| now.duration_since(*at) <= WINDOW)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_is_held_and_released_after_the_hold() {
        let guard = LoopGuard::default();
        let t0 = Instant::now();
        for i in 0..LIMIT {
            let now = t0 + Duration::from_secs(i as u64);
            assert_eq!(guard.check("a", now), Verdict::Allowed, "write {i}");
            guard.wrote("a", now);
        }
        let now = t0 + Duration::from_secs(LIMIT as u64);
        let Verdict::Held { until, writes } = guard.check("a", now) else {
            panic!("not held after {LIMIT} writes in a minute");
        };
        assert_eq!(writes, LIMIT);
        assert_eq!(until, now + HOLD);
        // Other objects are not concerned.
        assert_eq!(guard.check("b", now), Verdict::Allowed);
        // Still held just before the end, free after it.
        assert!(matches!(
            guard.check("a", until - Duration::from_secs(1)),
            Verdict::Held { .. }
        ));
        assert_eq!(guard.check("a", until), Verdict::Allowed);
    }

    #[test]
    fn writes_spread_over_time_never_trip_it() {
        let guard = LoopGuard::default();
        let t0 = Instant::now();
        for i in 0..100u64 {
            let now = t0 + Duration::from_secs(i * 10);
            assert_eq!(guard.check("a", now), Verdict::Allowed, "write {i}");
            guard.wrote("a", now);
        }
    }

    #[test]
    fn only_writes_that_undo_another_writer_count() {
        // Server writes, whatever the CR did.
        assert!(counts(true, false));
        assert!(counts(true, true));
        // A CR spec rewritten from the server: only over an edit of the CR.
        assert!(counts(false, true));
        assert!(!counts(false, false));
    }

    #[test]
    fn only_content_writes_are_guarded() {
        for action in [
            Action::CreateOnServer,
            Action::UpdateServer,
            Action::RecreateOnServer,
        ] {
            assert!(guards(action, false), "{action:?}");
        }
        assert!(guards(Action::UpdateCrSpecFromServer, true));
        assert!(!guards(Action::UpdateCrSpecFromServer, false));
        for action in [
            Action::Nothing,
            Action::AddFinalizer,
            Action::RecordSynced,
            Action::DeleteOnServer,
            Action::DeleteCr,
            Action::ReleaseFinalizer,
        ] {
            assert!(!guards(action, true), "{action:?}");
        }
    }

    #[test]
    fn a_write_forgets_quiet_objects() {
        let guard = LoopGuard::default();
        let t0 = Instant::now();
        guard.wrote("a", t0);
        guard.wrote("b", t0 + WINDOW + Duration::from_secs(1));
        let keys: Vec<String> = guard
            .objects
            .with(|objects| objects.keys().cloned().collect());
        assert_eq!(keys, ["b"]);
    }
}
