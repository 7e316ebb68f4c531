//! The `Infinispan` CR this operator serves, watched for what it tells the sync: the policy
//! (sync mode and conflict winner, design E3 and C1; command-line overrides win) and whether the
//! operator must drain (design E5: the CR is being deleted or has
//! `spec.resourcesOperator.enabled: false`).
//!
//! [`state_of`] is the pure decision; [`watch()`] feeds a `tokio::sync::watch` channel that the
//! engines read on every reconcile, so a policy change applies to the next decision without a
//! restart.

use common_crds::Infinispan;
use common_crds::infinispan::{ConflictWinner, SyncMode};
use futures::StreamExt;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

/// How the sync runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub mode: SyncMode,
    pub winner: ConflictWinner,
}

/// Why the operator drains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainCause {
    /// The Infinispan CR is being deleted.
    Deleting,
    /// `spec.resourcesOperator.enabled: false`.
    Disabled,
    /// The Infinispan CR does not exist (any more).
    Gone,
}

impl DrainCause {
    /// For status messages and logs.
    pub fn describe(self, namespace: &str, cluster: &str) -> String {
        match self {
            Self::Deleting => format!("the Infinispan CR {namespace}/{cluster} is being deleted"),
            Self::Disabled => format!(
                "the Infinispan CR {namespace}/{cluster} has spec.resourcesOperator.enabled: false"
            ),
            Self::Gone => format!("there is no Infinispan CR {namespace}/{cluster}"),
        }
    }
}

/// What the Infinispan CR says to the sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterState {
    Active(Policy),
    Draining(DrainCause),
}

/// Command-line overrides of the CR's policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    pub mode: Option<SyncMode>,
    pub winner: Option<ConflictWinner>,
}

/// The state an Infinispan CR (or its absence) gives.
pub fn state_of(cr: Option<&Infinispan>, overrides: Overrides) -> ClusterState {
    let Some(cr) = cr else {
        return ClusterState::Draining(DrainCause::Gone);
    };
    if cr.metadata.deletion_timestamp.is_some() {
        return ClusterState::Draining(DrainCause::Deleting);
    }
    let spec = &cr.spec.resources_operator;
    if !spec.enabled {
        return ClusterState::Draining(DrainCause::Disabled);
    }
    ClusterState::Active(Policy {
        mode: overrides.mode.unwrap_or(spec.sync_mode),
        winner: overrides.winner.unwrap_or(spec.conflict_winner),
    })
}

/// Watches the Infinispan CR `name` and publishes its state until the sender's receivers are
/// all gone. Watch errors are retried with backoff (the last state stays meanwhile).
pub async fn watch(
    api: Api<Infinispan>,
    name: String,
    overrides: Overrides,
    tx: watch::Sender<ClusterState>,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(api, config).default_backoff().boxed();
    let mut current: Option<Infinispan>;
    let mut listing: Option<Infinispan> = None;
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(cr)) => current = Some(cr),
            Ok(watcher::Event::Delete(_)) => current = None,
            // A (re)list: the state changes only once it is complete.
            Ok(watcher::Event::Init) => {
                listing = None;
                continue;
            }
            Ok(watcher::Event::InitApply(cr)) => {
                listing = Some(cr);
                continue;
            }
            Ok(watcher::Event::InitDone) => current = listing.take(),
            Err(error) => {
                tracing::warn!(%error, "watch of the Infinispan CR failed; retried with backoff");
                continue;
            }
        }
        let state = state_of(current.as_ref(), overrides);
        tx.send_if_modified(|old| {
            let changed = *old != state;
            *old = state;
            changed
        });
        if tx.is_closed() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cr(spec: serde_json::Value, deleting: bool) -> Infinispan {
        let mut metadata = json!({ "name": "demo", "namespace": "ns" });
        if deleting {
            metadata["deletionTimestamp"] = json!("2026-11-30T00:00:00Z");
        }
        serde_json::from_value(json!({
            "apiVersion": "infinispan.org/v1",
            "kind": "Infinispan",
            "metadata": metadata,
            "spec": spec,
        }))
        .expect("a valid Infinispan CR")
    }

    #[test]
    fn the_cr_gives_the_policy_and_overrides_win() {
        let spec =
            json!({ "resourcesOperator": { "syncMode": "ToServer", "conflictWinner": "Server" } });
        let active = state_of(Some(&cr(spec.clone(), false)), Overrides::default());
        assert_eq!(
            active,
            ClusterState::Active(Policy {
                mode: SyncMode::ToServer,
                winner: ConflictWinner::Server
            })
        );
        let overridden = state_of(
            Some(&cr(spec, false)),
            Overrides {
                mode: Some(SyncMode::FromServer),
                winner: None,
            },
        );
        assert_eq!(
            overridden,
            ClusterState::Active(Policy {
                mode: SyncMode::FromServer,
                winner: ConflictWinner::Server
            })
        );
    }

    #[test]
    fn deleting_disabled_or_gone_drains() {
        assert_eq!(
            state_of(Some(&cr(json!({}), true)), Overrides::default()),
            ClusterState::Draining(DrainCause::Deleting)
        );
        assert_eq!(
            state_of(
                Some(&cr(
                    json!({ "resourcesOperator": { "enabled": false } }),
                    false
                )),
                Overrides::default()
            ),
            ClusterState::Draining(DrainCause::Disabled)
        );
        assert_eq!(
            state_of(None, Overrides::default()),
            ClusterState::Draining(DrainCause::Gone)
        );
        assert_eq!(
            state_of(Some(&cr(json!({}), false)), Overrides::default()),
            ClusterState::Active(Policy {
                mode: SyncMode::Bidirectional,
                winner: ConflictWinner::Kubernetes
            })
        );
    }
}
