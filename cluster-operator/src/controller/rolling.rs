//! `spec.upgrades.type: Rolling` with a health gate (issue 24): a new pod template (a new server
//! image, configuration, certificate...) reaches the pods one at a time, and the next pod is
//! restarted only once the cluster is whole and healthy again: every pod Ready, every member
//! back in the cluster view, and the server's health `HEALTHY` (not `HEALTHY_REBALANCING`: the
//! caches have finished moving their segments back). A Ready pod alone, which is all a
//! StatefulSet waits for, only says the server started; restarting the next one while the
//! caches still rebalance can leave segments with no owner.
//!
//! The operator steps the StatefulSet's rolling-update partition (only ordinals at or above it
//! are updated, highest first). [`TEMPLATE_ANNOTATION`] on the StatefulSet records a digest of
//! the pod template applied, so a reconcile knows when it applies a new one. [`partition`] is
//! the decision (pure):
//!
//! - a new template on a cluster whose pods are all Ready: the partition holds every pod
//!   until the cluster is healthy, then lets the highest one go (`replicas - 1`);
//! - while a rollout runs: one step down each time the pods above the partition are updated
//!   and Ready and the cluster is healthy, until 0;
//! - otherwise (no rollout, or a cluster whose pods are not all Ready when the template
//!   changes: a fix for a broken cluster must not wait for a health it cannot reach) 0, the
//!   StatefulSet's own rolling update.

use k8s_openapi::api::apps::v1::StatefulSet;
use sha2::{Digest, Sha256};

/// Annotation of the StatefulSet: a digest of the pod template the operator applied.
pub const TEMPLATE_ANNOTATION: &str = "infinispan.org/template-digest";

/// How often a rollout in progress is looked at (the server's health has no watch).
pub const STEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// The digest of `sts`'s pod template (what [`TEMPLATE_ANNOTATION`] records).
pub fn template_digest(sts: &StatefulSet) -> String {
    let template = serde_json::to_vec(&sts.spec.template).unwrap_or_default();
    Sha256::digest(&template)[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What the existing StatefulSet says about a rollout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// `spec.replicas`.
    pub replicas: i32,
    /// The partition applied before (0 when none).
    pub partition: i32,
    /// `status.readyReplicas == replicas`, for the current generation.
    pub all_ready: bool,
    /// Pods on the update revision (`status.updatedReplicas`), for the current generation.
    pub updated: i32,
    /// `status.updateRevision != status.currentRevision`: pods remain on an older template.
    pub in_progress: bool,
}

impl State {
    /// From the existing StatefulSet.
    pub fn of(sts: &StatefulSet) -> Self {
        let status = sts.status.clone().unwrap_or_default();
        let current = sts.metadata.generation.is_some()
            && status.observed_generation == sts.metadata.generation;
        let replicas = sts.spec.replicas.unwrap_or(1);
        let partition = sts
            .spec
            .update_strategy
            .as_ref()
            .and_then(|u| u.rolling_update.as_ref())
            .and_then(|r| r.partition)
            .unwrap_or(0);
        State {
            replicas,
            partition,
            all_ready: current && status.ready_replicas.unwrap_or(0) >= replicas,
            updated: if current {
                status.updated_replicas.unwrap_or(0)
            } else {
                0
            },
            in_progress: status.update_revision.is_some()
                && status.update_revision != status.current_revision,
        }
    }
}

/// Whether the cluster may lose one more pod for a while: what the server says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// Every member in the view and the health `HEALTHY`.
    Whole,
    /// Rebalancing, degraded, a member missing, or the server cannot be asked.
    NotYet,
}

/// The partition to apply: `existing` is the StatefulSet's state (`None`: none yet),
/// `template_changes` whether this apply brings a new pod template, `replicas` the replicas
/// applied, `health` the cluster's (asked only when it matters: see [`needs_health`]).
pub fn partition(
    existing: Option<State>,
    template_changes: bool,
    replicas: i32,
    health: Health,
) -> i32 {
    let Some(state) = existing else {
        return 0;
    };
    let whole = health == Health::Whole;
    if template_changes {
        if !state.all_ready || replicas <= 1 {
            return 0;
        }
        return if whole { replicas - 1 } else { replicas };
    }
    if !state.in_progress || state.partition <= 0 {
        return 0;
    }
    let above_done = state.all_ready && state.updated >= state.replicas - state.partition;
    if above_done && whole {
        (state.partition - 1).min(replicas)
    } else {
        state.partition.min(replicas.max(0))
    }
}

/// Whether [`partition`] depends on the cluster's health, so the server needs asking.
pub fn needs_health(existing: Option<State>, template_changes: bool, replicas: i32) -> bool {
    existing.is_some_and(|s| {
        if template_changes {
            s.all_ready && replicas > 1
        } else {
            s.in_progress && s.partition > 0
        }
    })
}

/// Whether a rollout is under way after applying `partition` (look again soon).
pub fn rolling(existing: Option<State>, template_changes: bool, partition: i32) -> bool {
    partition > 0 && (template_changes || existing.is_some_and(|s| s.in_progress))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(partition: i32, updated: i32, all_ready: bool, in_progress: bool) -> Option<State> {
        Some(State {
            replicas: 3,
            partition,
            all_ready,
            updated,
            in_progress,
        })
    }

    #[test]
    fn a_new_template_waits_for_a_healthy_cluster_then_lets_the_highest_pod_go() {
        let ready = state(0, 3, true, false);
        assert_eq!(partition(ready, true, 3, Health::NotYet), 3);
        assert_eq!(partition(ready, true, 3, Health::Whole), 2);
        assert!(needs_health(ready, true, 3));
        // A single pod has no one to wait for; a broken cluster gets its fix at once.
        assert_eq!(
            partition(state(0, 1, true, false), true, 1, Health::NotYet),
            0
        );
        let broken = state(0, 3, false, false);
        assert_eq!(partition(broken, true, 3, Health::NotYet), 0);
        assert!(!needs_health(broken, true, 3));
        // A new cluster: nothing to roll.
        assert_eq!(partition(None, true, 3, Health::NotYet), 0);
    }

    #[test]
    fn a_rollout_steps_down_once_the_pods_above_are_back_and_the_cluster_is_healthy() {
        // Pod 2 not updated yet, or not Ready: hold.
        assert_eq!(
            partition(state(2, 0, true, true), false, 3, Health::Whole),
            2
        );
        assert_eq!(
            partition(state(2, 1, false, true), false, 3, Health::Whole),
            2
        );
        // Updated and Ready, but the caches still rebalance: hold.
        assert_eq!(
            partition(state(2, 1, true, true), false, 3, Health::NotYet),
            2
        );
        // Healthy: the next pod.
        assert_eq!(
            partition(state(2, 1, true, true), false, 3, Health::Whole),
            1
        );
        assert_eq!(
            partition(state(1, 2, true, true), false, 3, Health::Whole),
            0
        );
        assert!(rolling(state(2, 1, true, true), false, 1));
        assert!(!rolling(state(1, 2, true, true), false, 0));
    }

    #[test]
    fn without_a_rollout_the_partition_is_zero() {
        assert_eq!(
            partition(state(0, 3, true, false), false, 3, Health::Whole),
            0
        );
        // A rollout finished: the left-over partition goes.
        assert_eq!(
            partition(state(2, 3, true, false), false, 3, Health::NotYet),
            0
        );
        assert!(!needs_health(state(0, 3, true, false), false, 3));
        // Scaled down under a partition: never above the replicas.
        assert_eq!(
            partition(state(2, 0, false, true), false, 1, Health::NotYet),
            1
        );
    }
}
