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

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common_crds::ResourceKind;

/// How long a creation waits for the kinds before it at most.
pub const BOUND: Duration = Duration::from_secs(10);

const POLL: Duration = Duration::from_millis(50);

#[derive(Debug, Default)]
struct Inner {
    ready: [AtomicBool; ResourceKind::COUNT],
    busy: [AtomicUsize; ResourceKind::COUNT],
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

    /// Every kind before `kind` is ready and idle.
    pub fn is_turn_of(&self, kind: ResourceKind) -> bool {
        (0..kind.creation_rank().min(ResourceKind::COUNT)).all(|earlier| {
            self.inner.ready[earlier].load(Ordering::Relaxed)
                && self.inner.busy[earlier].load(Ordering::Relaxed) == 0
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
