//! The order of bulk creation (design D1): wherever many objects are created at once (startup,
//! a server that lost its state), Schemas first, then Templates, Counters, Caches, Tasks: the
//! order of [`ResourceKind::ALL`].
//!
//! Each kind's engine says when it has its first snapshot and while reconciles of it run; a
//! creation on the server waits for its turn: until every earlier kind is ready and has no
//! reconcile running. The wait is bounded (never parked forever: a kind whose server stream is
//! down must not stop the others) and costs nothing when nothing earlier is busy. Real
//! dependencies (a Cache's Template and Schemas) are waited for exactly, by D1's
//! `DependencyMissing`; this only orders the rest.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common_crds::ResourceKind;

/// How long a creation waits for the kinds before it at most.
pub const BOUND: Duration = Duration::from_secs(10);

const POLL: Duration = Duration::from_millis(50);

#[derive(Debug, Default)]
struct Inner {
    ready: [AtomicBool; ResourceKind::COUNT],
    busy: [AtomicUsize; ResourceKind::COUNT],
    /// CRs (by rank and uid) whose creation on the server follows the finalizer their last
    /// reconcile added: between that reconcile and the next one (brought by the finalizer's
    /// own watch event) no reconcile of their kind may run, yet a creation is on its way. Their
    /// kind counts as busy until their next reconcile begins, at most [`BOUND`].
    expected: Mutex<HashMap<(usize, String), tokio::time::Instant>>,
}

impl Inner {
    fn expected<T>(
        &self,
        f: impl FnOnce(&mut HashMap<(usize, String), tokio::time::Instant>) -> T,
    ) -> T {
        match self.expected.lock() {
            Ok(mut map) => f(&mut map),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }
}

/// The shared state of the order (cheap to clone).
#[derive(Debug, Clone, Default)]
pub struct BulkOrder {
    inner: Arc<Inner>,
}

/// A reconcile of one kind runs while this lives.
#[derive(Debug)]
pub struct Busy {
    inner: Arc<Inner>,
    rank: usize,
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(busy) = self.inner.busy.get(self.rank) {
            busy.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl BulkOrder {
    /// The kind's engine has its first snapshot.
    pub fn set_ready(&self, kind: ResourceKind) {
        if let Some(ready) = self.inner.ready.get(kind.creation_rank()) {
            ready.store(true, Ordering::Relaxed);
        }
    }

    /// The CR `uid` of `kind` added its finalizer and is to be created on the server by its
    /// next reconcile: its kind stays busy until then ([`Self::begin_for`]), at most [`BOUND`].
    pub fn expect_creation(&self, kind: ResourceKind, uid: &str) {
        let key = (kind.creation_rank(), uid.to_string());
        self.inner
            .expected(|map| map.insert(key, tokio::time::Instant::now()));
    }

    /// A reconcile of the CR `uid` of `kind` starts (what it was expected to do, it does now);
    /// it ends when the guard is dropped.
    pub fn begin_for(&self, kind: ResourceKind, uid: &str) -> Busy {
        let key = (kind.creation_rank(), uid.to_string());
        let busy = self.begin(kind);
        self.inner.expected(|map| map.remove(&key));
        busy
    }

    /// A reconcile of `kind` starts; it ends when the guard is dropped.
    pub fn begin(&self, kind: ResourceKind) -> Busy {
        let rank = kind.creation_rank();
        if let Some(busy) = self.inner.busy.get(rank) {
            busy.fetch_add(1, Ordering::Relaxed);
        }
        Busy {
            inner: self.inner.clone(),
            rank,
        }
    }

    /// Every kind before `kind` is ready and idle: no reconcile runs and no creation is
    /// expected ([`Self::expect_creation`]).
    pub fn is_turn_of(&self, kind: ResourceKind) -> bool {
        let rank = kind.creation_rank().min(ResourceKind::COUNT);
        let idle = (0..rank).all(|earlier| {
            self.inner.ready[earlier].load(Ordering::Relaxed)
                && self.inner.busy[earlier].load(Ordering::Relaxed) == 0
        });
        idle && self.inner.expected(|map| {
            let now = tokio::time::Instant::now();
            map.retain(|_, at| now.duration_since(*at) < BOUND);
            !map.keys().any(|(earlier, _)| *earlier < rank)
        })
    }

    /// Waits for the turn of `kind`, at most `bound`; false when the bound ended the wait.
    pub async fn wait_turn(&self, kind: ResourceKind, bound: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            if self.is_turn_of(kind) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_waits_for_the_earlier_ones_only() {
        let order = BulkOrder::default();
        assert!(order.is_turn_of(ResourceKind::Schema), "first: never waits");
        assert!(
            !order.is_turn_of(ResourceKind::Template),
            "schemas not ready yet"
        );
        for kind in ResourceKind::ALL {
            order.set_ready(kind);
        }
        assert!(order.is_turn_of(ResourceKind::Task));
        let busy = order.begin(ResourceKind::Template);
        assert!(
            order.is_turn_of(ResourceKind::Template),
            "its own kind does not count"
        );
        assert!(!order.is_turn_of(ResourceKind::Cache));
        assert!(!order.is_turn_of(ResourceKind::Task));
        assert!(order.is_turn_of(ResourceKind::Schema));
        drop(busy);
        assert!(order.is_turn_of(ResourceKind::Task));
    }

    #[tokio::test(start_paused = true)]
    async fn an_expected_creation_keeps_its_kind_busy_until_its_reconcile_or_the_bound() {
        let order = BulkOrder::default();
        for kind in ResourceKind::ALL {
            order.set_ready(kind);
        }
        // A Schema added its finalizer: its creation follows, Templates wait for it.
        order.expect_creation(ResourceKind::Schema, "s-1");
        assert!(!order.is_turn_of(ResourceKind::Template));
        assert!(order.is_turn_of(ResourceKind::Schema));
        let busy = order.begin_for(ResourceKind::Schema, "s-1");
        assert!(
            !order.is_turn_of(ResourceKind::Template),
            "its reconcile runs"
        );
        drop(busy);
        assert!(order.is_turn_of(ResourceKind::Template));
        // An expectation no reconcile fulfils ends with the bound.
        order.expect_creation(ResourceKind::Counter, "c-1");
        assert!(!order.is_turn_of(ResourceKind::Cache));
        tokio::time::advance(BOUND).await;
        assert!(order.is_turn_of(ResourceKind::Cache));
    }

    #[tokio::test]
    async fn the_wait_is_bounded() {
        let order = BulkOrder::default();
        assert!(
            !order
                .wait_turn(ResourceKind::Cache, Duration::from_millis(120))
                .await
        );
        for kind in ResourceKind::ALL {
            order.set_ready(kind);
        }
        assert!(order.wait_turn(ResourceKind::Cache, Duration::ZERO).await);
    }
}
