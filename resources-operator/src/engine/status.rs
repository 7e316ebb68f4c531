//! The status of a resource CR, computed from the old one and what the reconcile found: the
//! `Ready` condition (reasons of design.md), `ReconciliationPaused`, `observedGeneration`,
//! `serverName` and `lastSynced`. Pure; the engine writes the result only when it differs from
//! the old status (design L1, idle: no writes), and `lastTransitionTime` moves only on a real
//! change.

use common_crds::ResourceStatus;
use common_crds::common::LastSynced;
use common_crds::conditions::{
    ConditionStatus, ConditionType, Reason, new_condition, remove_condition, set_condition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::decision::Status;

/// What to put into the status.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusUpdate {
    /// The conditions, when there is something to say.
    pub conditions: Option<Status>,
    /// The new last-synced record, when the sync was just made true.
    pub last_synced: Option<LastSynced>,
    pub generation: Option<i64>,
    pub server_name: String,
}

/// The new status; equal to `old` when nothing changed.
pub fn next_status(
    old: Option<&ResourceStatus>,
    update: StatusUpdate,
    now: Time,
) -> ResourceStatus {
    let StatusUpdate {
        conditions,
        last_synced,
        generation,
        server_name,
    } = update;
    let mut status = old.cloned().unwrap_or_default();
    match conditions {
        Some(Status::Ready { reason, message }) => {
            let ready = ConditionStatus::from(reason == Reason::Synced);
            set_condition(
                &mut status.conditions,
                new_condition(
                    ConditionType::Ready,
                    ready,
                    reason.as_str(),
                    message,
                    generation,
                    now,
                ),
            );
            remove_condition(&mut status.conditions, ConditionType::ReconciliationPaused);
            status.observed_generation = generation;
        }
        Some(Status::Paused { message }) => {
            set_condition(
                &mut status.conditions,
                new_condition(
                    ConditionType::ReconciliationPaused,
                    ConditionStatus::True,
                    "Paused",
                    message,
                    generation,
                    now,
                ),
            );
        }
        None => {}
    }
    status.server_name = Some(server_name);
    if let Some(last_synced) = last_synced {
        status.last_synced = Some(last_synced);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH))
    }

    fn synced(generation: i64) -> StatusUpdate {
        StatusUpdate {
            conditions: Some(Status::Ready {
                reason: Reason::Synced,
                message: String::new(),
            }),
            last_synced: Some(LastSynced {
                digest: "d".to_string(),
                generation,
                epoch: String::new(),
            }),
            generation: Some(generation),
            server_name: "c".to_string(),
        }
    }

    #[test]
    fn the_same_outcome_twice_is_no_change() {
        let first = next_status(None, synced(1), at(10));
        let second = next_status(Some(&first), synced(1), at(20));
        assert_eq!(first, second);
        assert_eq!(first.observed_generation, Some(1));
        assert_eq!(first.server_name.as_deref(), Some("c"));
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let first = next_status(None, synced(1), at(10));
        let same_status = next_status(Some(&first), synced(2), at(20));
        assert_eq!(
            same_status.conditions[0].last_transition_time,
            first.conditions[0].last_transition_time
        );
        let rejected = StatusUpdate {
            conditions: Some(Status::Ready {
                reason: Reason::Rejected,
                message: "no".to_string(),
            }),
            last_synced: None,
            ..synced(3)
        };
        let third = next_status(Some(&same_status), rejected, at(30));
        assert_eq!(third.conditions[0].status, "False");
        assert_eq!(third.conditions[0].reason, "Rejected");
        assert_eq!(third.conditions[0].last_transition_time, at(30));
        assert_eq!(third.last_synced, same_status.last_synced);
    }
}
