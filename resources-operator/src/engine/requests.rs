//! The engine's reconcile requests: those it sends itself (server events, dependencies that
//! appeared, resyncs) into kube-runtime's `Controller` through `reconcile_on`, and how many of
//! them have not started yet (the `queue_depth` metric). The controller's own queue deduplicates
//! and runs one reconcile per key at a time; this keeps only what the metric needs.

use std::collections::HashSet;
use std::hash::Hash;

use futures::channel::mpsc;
use prometheus::IntGaugeVec;

use super::compact;
use super::locked::Locked;

/// The requests of one kind's engine, sent and not started yet.
#[derive(Debug)]
pub struct RequestQueue<K> {
    queued: Locked<HashSet<K>>,
    trigger: mpsc::UnboundedSender<K>,
    /// The `queue_depth` metric, and the kind's label in it.
    depth: IntGaugeVec,
    kind: &'static str,
}

impl<K: Clone + Eq + Hash> RequestQueue<K> {
    /// Requests go to `trigger` (the controller's `reconcile_on` side); their number to the
    /// `depth` gauge labelled `kind`.
    pub fn new(trigger: mpsc::UnboundedSender<K>, depth: IntGaugeVec, kind: &'static str) -> Self {
        Self {
            queued: Locked::default(),
            trigger,
            depth,
            kind,
        }
    }

    /// Requests a reconcile of `key`.
    pub fn send(&self, key: K) {
        self.queued.with(|queued| {
            queued.insert(key.clone());
            self.report(queued.len());
        });
        let _ = self.trigger.unbounded_send(key);
    }

    /// The request for `key` leaves the queue: its reconcile starts, or its CR is gone.
    pub fn remove(&self, key: &K) {
        self.unqueue(|queued| {
            queued.remove(key);
        });
    }

    /// Takes out the requests `keep` refuses. A request for a CR deleted before it ran is never
    /// run (the controller finds no object), so the CR's deletion has to take it out.
    pub fn retain(&self, keep: impl Fn(&K) -> bool) {
        self.unqueue(|queued| queued.retain(|key| keep(key)));
    }

    fn unqueue(&self, remove: impl FnOnce(&mut HashSet<K>)) {
        self.queued.with(|queued| {
            remove(queued);
            compact::after_removal(queued);
            self.report(queued.len());
        });
    }

    /// Sets the gauge to `depth`, under the queue's lock: the gauge's writes then come in the
    /// order of the changes they describe. (Set after the lock was released, a depth taken
    /// before another thread's change could be written after it: `bench shared` once saw 201
    /// requests that had all run, until the next request set it right.)
    fn report(&self, depth: usize) {
        self.depth
            .with_label_values(&[self.kind])
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::Opts;

    fn queue() -> (RequestQueue<String>, mpsc::UnboundedReceiver<String>) {
        let (trigger, requests) = mpsc::unbounded();
        let depth =
            IntGaugeVec::new(Opts::new("queue_depth", "depth"), &["kind"]).expect("a valid gauge");
        (RequestQueue::new(trigger, depth, "Cache"), requests)
    }

    fn depth(queue: &RequestQueue<String>) -> i64 {
        queue.depth.with_label_values(&["Cache"]).get()
    }

    #[test]
    fn every_request_is_sent_and_counted_once_per_key_until_it_starts() {
        let (queue, mut requests) = queue();
        queue.send("a".to_string());
        queue.send("a".to_string());
        queue.send("b".to_string());
        assert_eq!(depth(&queue), 2);
        let sent: Vec<String> = std::iter::from_fn(|| requests.try_recv().ok()).collect();
        assert_eq!(
            sent,
            ["a", "a", "b"],
            "the controller deduplicates, not this"
        );
        queue.remove(&"a".to_string());
        assert_eq!(depth(&queue), 1);
        queue.remove(&"a".to_string());
        assert_eq!(depth(&queue), 1);
    }

    #[test]
    fn requests_of_deleted_crs_are_taken_out() {
        let (queue, _requests) = queue();
        for key in ["a", "b", "c"] {
            queue.send(key.to_string());
        }
        queue.retain(|key| key != "b");
        assert_eq!(depth(&queue), 2);
        queue.remove(&"b".to_string());
        assert_eq!(depth(&queue), 2);
    }
}
