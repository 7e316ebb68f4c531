//! One backup or restore at a time per cluster.
//!
//! Infinispan 16.0.7 runs one backup and one restore at a time per server: a second one is
//! accepted (202) and then fails (`ISPN005041: Cannot perform backup, backup currently in
//! progress`, `ISPN005042: ... restore currently in progress`), with no other sign than a 500
//! on `HEAD`. So the operator starts a job on a cluster only when none of its own runs there:
//! a [`JobSlots`] entry is taken before the server job is started and given back when the CR
//! reaches a final phase or goes away; after a restart, the CRs whose status says `Running`
//! hold their cluster (the caller passes them as `running`). Jobs other clients start on the
//! server are not seen: a collision with one fails the CR with the server's message.

use std::collections::HashMap;
use std::sync::Mutex;

use super::phase::JobKind;

/// Who holds a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub kind: JobKind,
    pub name: String,
    pub uid: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind.as_str(), self.name)
    }
}

/// The clusters (namespace, name) with a job of this operator running.
#[derive(Debug, Default)]
pub struct JobSlots {
    held: Mutex<HashMap<(String, String), Holder>>,
}

impl JobSlots {
    fn held<T>(&self, f: impl FnOnce(&mut HashMap<(String, String), Holder>) -> T) -> T {
        match self.held.lock() {
            Ok(mut held) => f(&mut held),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Takes the cluster `namespace/cluster` for `holder`, unless another holder has it or
    /// another CR of `running` (those the stores show `Running` on that cluster) does: then
    /// that one is returned. Taking a cluster one already holds succeeds.
    pub fn try_acquire(
        &self,
        namespace: &str,
        cluster: &str,
        holder: Holder,
        running: impl IntoIterator<Item = Holder>,
    ) -> Result<(), Holder> {
        if let Some(other) = running.into_iter().find(|r| r.uid != holder.uid) {
            return Err(other);
        }
        self.held(|held| {
            let key = (namespace.to_string(), cluster.to_string());
            match held.get(&key) {
                Some(other) if other.uid != holder.uid => Err(other.clone()),
                _ => {
                    held.insert(key, holder);
                    Ok(())
                }
            }
        })
    }

    /// Marks the cluster as held by `holder` whatever else holds it (a job found running).
    pub fn hold(&self, namespace: &str, cluster: &str, holder: Holder) {
        self.held(|held| {
            held.insert((namespace.to_string(), cluster.to_string()), holder);
        });
    }

    /// Gives back every cluster `uid` holds.
    pub fn release(&self, uid: &str) {
        self.held(|held| held.retain(|_, h| h.uid != uid));
    }

    /// Who holds the cluster.
    pub fn holder(&self, namespace: &str, cluster: &str) -> Option<Holder> {
        self.held(|held| {
            held.get(&(namespace.to_string(), cluster.to_string()))
                .cloned()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(kind: JobKind, name: &str) -> Holder {
        Holder {
            kind,
            name: name.into(),
            uid: format!("uid-{name}"),
        }
    }

    #[test]
    fn one_job_per_cluster() {
        let slots = JobSlots::default();
        let a = holder(JobKind::Backup, "a");
        let b = holder(JobKind::Restore, "b");
        assert_eq!(slots.try_acquire("ns", "c", a.clone(), []), Ok(()));
        assert_eq!(slots.try_acquire("ns", "c", a.clone(), []), Ok(()), "again");
        assert_eq!(slots.try_acquire("ns", "c", b.clone(), []), Err(a.clone()));
        // other clusters, other namespaces are free
        assert_eq!(slots.try_acquire("ns", "d", b.clone(), []), Ok(()));
        assert_eq!(slots.try_acquire("other", "c", b.clone(), []), Ok(()));
        slots.release(&a.uid);
        assert_eq!(slots.holder("ns", "c"), None);
        assert_eq!(slots.try_acquire("ns", "c", b.clone(), []), Ok(()));
        assert_eq!(b.to_string(), "Restore b");
    }

    #[test]
    fn a_running_cr_holds_its_cluster_after_a_restart() {
        let slots = JobSlots::default();
        let a = holder(JobKind::Backup, "a");
        let b = holder(JobKind::Backup, "b");
        assert_eq!(
            slots.try_acquire("ns", "c", b.clone(), [a.clone()]),
            Err(a.clone())
        );
        // its own running status is no obstacle
        assert_eq!(slots.try_acquire("ns", "c", a.clone(), [a.clone()]), Ok(()));
        slots.hold("ns", "c", b.clone());
        assert_eq!(slots.holder("ns", "c"), Some(b));
    }
}
