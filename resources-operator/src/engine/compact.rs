//! Tables of the engine that hold an entry per CR for a while (the reconcile queue, pending
//! events, versions our writes replaced) give their memory back once they empty again: a
//! hash table keeps its largest capacity otherwise, and the startup sync of 5,000 CRs left
//! each of them sized for 5,000 (docs/benchmark.md, RSS at 5,000 caches).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash};

/// Below this capacity a table is never shrunk (nothing worth giving back).
const MIN_CAPACITY: usize = 64;

/// Whether a table of `len` entries and `capacity` should shrink: when it is at most a
/// quarter full, so that a table that grows and shrinks around one size is not reallocated
/// at every step.
pub fn should_shrink(len: usize, capacity: usize) -> bool {
    capacity > MIN_CAPACITY && len.saturating_mul(4) <= capacity
}

/// A hash table that can shrink.
pub trait Table {
    fn entries(&self) -> usize;
    fn capacity(&self) -> usize;
    fn shrink_to_fit(&mut self);
}

impl<K: Eq + Hash, V, S: BuildHasher> Table for HashMap<K, V, S> {
    fn entries(&self) -> usize {
        HashMap::len(self)
    }
    fn capacity(&self) -> usize {
        HashMap::capacity(self)
    }
    fn shrink_to_fit(&mut self) {
        HashMap::shrink_to_fit(self);
    }
}

impl<T: Eq + Hash, S: BuildHasher> Table for HashSet<T, S> {
    fn entries(&self) -> usize {
        HashSet::len(self)
    }
    fn capacity(&self) -> usize {
        HashSet::capacity(self)
    }
    fn shrink_to_fit(&mut self) {
        HashSet::shrink_to_fit(self);
    }
}

/// To call after removing entries from `table`.
pub fn after_removal(table: &mut impl Table) {
    if should_shrink(table.entries(), table.capacity()) {
        table.shrink_to_fit();
    }
}

/// Keeps the entries of `table` that `keep` accepts, then gives memory back if worth it.
pub fn retain<K: Eq + Hash, V>(table: &mut HashMap<K, V>, keep: impl FnMut(&K, &mut V) -> bool) {
    table.retain(keep);
    after_removal(table);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_or_busy_tables_keep_their_capacity() {
        assert!(!should_shrink(0, 64), "small");
        assert!(!should_shrink(40, 128), "more than a quarter full");
        assert!(should_shrink(32, 128));
        assert!(should_shrink(0, 8192));
    }

    #[test]
    fn a_table_emptied_after_a_burst_gives_its_memory_back() {
        let mut queued: HashSet<String> = (0..5_000).map(|i| i.to_string()).collect();
        assert!(queued.capacity() >= 5_000);
        for i in 0..4_990 {
            queued.remove(&i.to_string());
            after_removal(&mut queued);
        }
        assert_eq!(queued.len(), 10);
        assert!(queued.capacity() < 64, "capacity {}", queued.capacity());
    }
}
