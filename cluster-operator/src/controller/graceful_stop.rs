//! Stopping a cluster the way the server wants (issue 24), and bringing it back.
//!
//! `spec.replicas: 0` on a running cluster does not just scale the StatefulSet to 0, which
//! would stop the pods at once while every cache rebalances onto whoever is left. The operator
//! first asks the server for the **cluster-wide shutdown of its cache container**
//! (`POST /rest/v2/container?action=shutdown`, [`infinispan_rest::Client::shutdown_container`]):
//! every node stops its caches and persists their state and topology on its data volume. Then
//! it scales the StatefulSet to 0. The StatefulSet records the stop in two annotations,
//! [`REPLICAS_ANNOTATION`] (how many pods the cluster was stopped with) and
//! [`SINCE_ANNOTATION`] (when the stop began), written before the shutdown is asked for, so a
//! cluster operator restarted half-way finds where it was and carries on: asked again, the
//! server says the container is down already.
//!
//! The persisted topology comes back only when every node it names is back. Scaling up a
//! gracefully stopped cluster therefore first restarts the pods it was stopped with, and only
//! once they are all ready goes to `spec.replicas` (the annotations are then removed). A
//! cluster on ephemeral storage keeps nothing, so it starts at `spec.replicas` at once.
//!
//! When the shutdown cannot be asked (no pod is ready and no stop was begun: nothing serves
//! to shut down) the StatefulSet is scaled to 0 at once. When it keeps failing, the operator
//! retries until [`Plan`]'s deadline (`--graceful-stop-timeout`), then stops the pods without
//! it (a Warning Event says so).
//!
//! [`plan`] is the decision (pure); the controller applies it and makes the call.

use std::collections::BTreeMap;
use std::time::Duration;

use common_crds::Infinispan;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

/// Annotation of the StatefulSet: the number of pods the cluster was stopped gracefully with.
pub const REPLICAS_ANNOTATION: &str = "infinispan.org/graceful-stop-replicas";
/// Annotation of the StatefulSet: when the graceful stop began (RFC 3339).
pub const SINCE_ANNOTATION: &str = "infinispan.org/graceful-stop-since";
/// Annotation of the StatefulSet, `"true"`: the graceful stop is a Shutdown upgrade (the new
/// pod template waits behind the update partition until the pods are down).
pub const UPGRADE_ANNOTATION: &str = "infinispan.org/graceful-stop-upgrade";

/// How soon a failed shutdown request is tried again.
pub const RETRY: Duration = Duration::from_secs(10);

/// The default of `--graceful-stop-timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// What the StatefulSet says, as far as stopping goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Existing {
    /// `spec.replicas`.
    pub replicas: i32,
    /// `status.replicas`: pods that exist (terminating ones included).
    pub pods: i32,
    /// `status.readyReplicas`.
    pub ready: i32,
    /// [`REPLICAS_ANNOTATION`], when a graceful stop began.
    pub stopped_with: Option<i32>,
    /// [`SINCE_ANNOTATION`].
    pub since: Option<Timestamp>,
    /// [`UPGRADE_ANNOTATION`].
    pub upgrading: bool,
}

impl Existing {
    /// From the StatefulSet, if there is one.
    pub fn of(stateful_set: Option<&StatefulSet>) -> Option<Self> {
        let sts = stateful_set?;
        let status = sts.status.clone().unwrap_or_default();
        let annotations = sts.metadata.annotations.as_ref();
        let annotation = |key: &str| annotations.and_then(|a| a.get(key));
        Some(Self {
            replicas: sts.spec.replicas.unwrap_or(1),
            pods: status.replicas,
            ready: status.ready_replicas.unwrap_or(0),
            stopped_with: annotation(REPLICAS_ANNOTATION)
                .and_then(|v| v.parse().ok())
                .filter(|n: &i32| *n > 0),
            since: annotation(SINCE_ANNOTATION).and_then(|v| v.parse().ok()),
            upgrading: annotation(UPGRADE_ANNOTATION).is_some_and(|v| v == "true"),
        })
    }
}

/// Where the cluster is, for its `Ready` condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Running at `spec.replicas` (or scaling there).
    Running,
    /// Asking the server to shut its container down before the `with` pods stop; `failed`:
    /// why the last request failed, `until`: when the operator gives up and stops them anyway;
    /// `upgrade`: a Shutdown upgrade (they start again on the new image).
    ShuttingDown {
        with: i32,
        failed: Option<String>,
        until: Timestamp,
        upgrade: bool,
    },
    /// Scaled to 0, pods still terminating.
    Stopping { pods: i32 },
    /// Stopped; `with`: the pods it was gracefully stopped with, `None` when it was not
    /// (nothing was running, or the shutdown failed until the deadline).
    Stopped { with: Option<i32> },
    /// Bringing back the `with` pods it was stopped with before scaling to `then`.
    Restarting { with: i32, ready: i32, then: i32 },
}

/// What to apply: the StatefulSet's replicas and stop annotations, whether to ask for the
/// container shutdown first, and the phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub replicas: i32,
    /// The stop annotations' values (`None`: none, a left-over one is removed).
    pub stopped_with: Option<i32>,
    pub since: Option<Timestamp>,
    /// A Shutdown upgrade: the pods keep their template (the StatefulSet's update partition at
    /// this many pods) until they are down.
    pub hold: Option<i32>,
    /// Ask the server for the container shutdown, then re-plan with [`Plan::shut_down`].
    pub shutdown: bool,
    pub phase: Phase,
}

impl Plan {
    fn at(replicas: i32, phase: Phase) -> Self {
        Self {
            replicas,
            stopped_with: None,
            since: None,
            hold: None,
            shutdown: false,
            phase,
        }
    }

    /// The plan once the server's container is down (the request succeeded, or it was down
    /// already) or the operator gave up asking (`graceful` false): the pods stop.
    pub fn shut_down(self, pods: i32, graceful: bool) -> Self {
        let stopped_with = self.stopped_with.filter(|_| graceful);
        Self {
            replicas: 0,
            since: self.since.filter(|_| graceful),
            stopped_with,
            hold: None,
            shutdown: false,
            phase: if pods > 0 {
                Phase::Stopping { pods }
            } else {
                Phase::Stopped { with: stopped_with }
            },
        }
    }

    /// The plan after a failed shutdown request that will be tried again: the pods keep
    /// running, the phase says why.
    pub fn failed(mut self, error: String) -> Self {
        if let Phase::ShuttingDown { failed, .. } = &mut self.phase {
            *failed = Some(error);
        }
        self.shutdown = false;
        self
    }

    /// Whether the deadline of a shutdown that keeps failing has passed.
    pub fn gave_up(&self, now: Timestamp) -> bool {
        matches!(self.phase, Phase::ShuttingDown { until, .. } if now >= until)
    }

    /// The stop annotations to write on the StatefulSet.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        let mut annotations = BTreeMap::new();
        if let Some(with) = self.stopped_with {
            annotations.insert(REPLICAS_ANNOTATION.to_string(), with.to_string());
        }
        if let Some(since) = self.since {
            annotations.insert(SINCE_ANNOTATION.to_string(), since.to_string());
        }
        if self.hold.is_some() {
            annotations.insert(UPGRADE_ANNOTATION.to_string(), "true".to_string());
        }
        annotations
    }
}

/// Removes the stop record from `cluster`'s StatefulSet.
pub async fn forget(client: &kube::Client, cluster: &Infinispan) -> Result<(), kube::Error> {
    let patch = serde_json::json!({"metadata": {"annotations": {
        REPLICAS_ANNOTATION: null,
        SINCE_ANNOTATION: null,
    }}});
    let name = crate::build::server::stateful_set_name(&cluster.name_any());
    Api::<StatefulSet>::namespaced(client.clone(), &cluster.namespace().unwrap_or_default())
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// The plan for a cluster that asks for `wanted` pods (pure). `persistent`: its data lives on
/// volumes that outlive the pods (`ephemeralStorage` off). `upgrade`: its pods are to move to a
/// new server image by a Shutdown upgrade ([`super::upgrade::shutdown_upgrade`]).
pub fn plan(
    wanted: i32,
    existing: Option<Existing>,
    persistent: bool,
    upgrade: bool,
    now: Timestamp,
    timeout: Duration,
) -> Plan {
    let Some(existing) = existing else {
        return Plan::at(wanted, initial_phase(wanted));
    };
    let stopped_with = existing.stopped_with;
    let upgrading = (upgrade || existing.upgrading) && existing.replicas > 0;
    if upgrading && (existing.ready > 0 || stopped_with.is_some()) {
        return stopping(existing, true, now, timeout);
    }
    if wanted == 0 {
        if existing.replicas == 0 {
            // Stopped, or its pods on their way out.
            let phase = if existing.pods > 0 {
                Phase::Stopping {
                    pods: existing.pods,
                }
            } else {
                Phase::Stopped { with: stopped_with }
            };
            return Plan {
                stopped_with,
                since: existing.since,
                ..Plan::at(0, phase)
            };
        }
        if stopped_with.is_none() && existing.ready == 0 {
            // Nothing serves: nothing to shut down.
            return Plan::at(0, Phase::Stopped { with: None }).shut_down(existing.pods, false);
        }
        return stopping(existing, false, now, timeout);
    }
    match stopped_with {
        // Stopped gracefully and its pods still on their way out: they go first (a new server
        // must not meet one whose container is shut down).
        Some(with) if existing.replicas == 0 && existing.pods > 0 => Plan {
            stopped_with: Some(with),
            since: existing.since,
            ..Plan::at(
                0,
                Phase::Stopping {
                    pods: existing.pods,
                },
            )
        },
        // The pods it was stopped with are all back: from now on, what the CR asks for.
        Some(with) if persistent && !(existing.replicas == with && existing.ready >= with) => {
            Plan {
                stopped_with: Some(with),
                since: existing.since,
                ..Plan::at(
                    with,
                    Phase::Restarting {
                        with,
                        ready: existing.ready,
                        then: wanted,
                    },
                )
            }
        }
        _ => Plan::at(wanted, Phase::Running),
    }
}

/// Begins (or carries on with) the graceful stop of the pods `existing` runs; `upgrade`: a
/// Shutdown upgrade, the pods held on their template meanwhile.
fn stopping(existing: Existing, upgrade: bool, now: Timestamp, timeout: Duration) -> Plan {
    let with = existing.stopped_with.unwrap_or(existing.replicas);
    let since = existing.since.unwrap_or(now);
    let until = since.checked_add(timeout).unwrap_or(Timestamp::MAX);
    Plan {
        replicas: existing.replicas,
        stopped_with: Some(with),
        since: Some(since),
        hold: upgrade.then_some(existing.replicas),
        shutdown: true,
        phase: Phase::ShuttingDown {
            with,
            failed: None,
            until,
            upgrade,
        },
    }
}

fn initial_phase(wanted: i32) -> Phase {
    if wanted == 0 {
        Phase::Stopped { with: None }
    } else {
        Phase::Running
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(120);

    fn now() -> Timestamp {
        "2026-12-02T10:00:00Z".parse().expect("a timestamp")
    }

    fn running(replicas: i32, ready: i32) -> Existing {
        Existing {
            replicas,
            pods: replicas,
            ready,
            ..Existing::default()
        }
    }

    #[test]
    fn a_new_cluster_or_a_running_one_gets_what_it_asks_for() {
        assert_eq!(
            plan(3, None, true, false, now(), TIMEOUT),
            Plan::at(3, Phase::Running)
        );
        assert_eq!(
            plan(0, None, true, false, now(), TIMEOUT),
            Plan::at(0, Phase::Stopped { with: None })
        );
        let scaled = plan(5, Some(running(3, 3)), true, false, now(), TIMEOUT);
        assert_eq!(scaled, Plan::at(5, Phase::Running));
        assert!(scaled.annotations().is_empty());
    }

    #[test]
    fn stopping_a_running_cluster_shuts_its_container_down_before_the_pods() {
        let stop = plan(0, Some(running(3, 3)), true, false, now(), TIMEOUT);
        // The pods keep running until the server has shut its caches down.
        assert_eq!(stop.replicas, 3);
        assert!(stop.shutdown);
        assert_eq!((stop.stopped_with, stop.since), (Some(3), Some(now())));
        assert_eq!(
            stop.annotations(),
            BTreeMap::from([
                (REPLICAS_ANNOTATION.to_string(), "3".to_string()),
                (
                    SINCE_ANNOTATION.to_string(),
                    "2026-12-02T10:00:00Z".to_string()
                ),
            ])
        );
        let until = "2026-12-02T10:02:00Z".parse().expect("a timestamp");
        assert_eq!(
            stop.phase,
            Phase::ShuttingDown {
                with: 3,
                failed: None,
                until,
                upgrade: false,
            }
        );
        // Done: scaled to 0, the record kept for the restart.
        let down = stop.clone().shut_down(3, true);
        assert_eq!((down.replicas, down.stopped_with), (0, Some(3)));
        assert!(!down.shutdown);
        assert_eq!(down.phase, Phase::Stopping { pods: 3 });
        // A failure keeps the pods, says why; past the deadline the operator gives up.
        let failed = stop.clone().failed("connection refused".into());
        assert_eq!(failed.replicas, 3);
        assert!(!failed.gave_up(now()));
        assert!(failed.gave_up(until));
        let forced = failed.shut_down(3, false);
        assert_eq!(
            (forced.replicas, forced.stopped_with, forced.since),
            (0, None, None)
        );
    }

    #[test]
    fn a_restarted_operator_carries_on_where_the_stop_was() {
        let since: Timestamp = "2026-12-02T09:59:00Z".parse().expect("a timestamp");
        // Annotated, still running (the operator died before or after asking): ask again,
        // with the original start and count (even if the pods are no longer ready).
        let begun = Existing {
            stopped_with: Some(3),
            since: Some(since),
            ..running(3, 0)
        };
        let again = plan(0, Some(begun), true, false, now(), TIMEOUT);
        assert!(again.shutdown);
        assert_eq!((again.stopped_with, again.since), (Some(3), Some(since)));
        // Scaled to 0 already: pods leaving, then stopped; nothing asked again.
        let leaving = Existing {
            replicas: 0,
            pods: 2,
            ready: 0,
            ..begun
        };
        let plan_leaving = plan(0, Some(leaving), true, false, now(), TIMEOUT);
        assert!(!plan_leaving.shutdown);
        assert_eq!(plan_leaving.phase, Phase::Stopping { pods: 2 });
        assert_eq!(plan_leaving.stopped_with, Some(3));
        let gone = Existing { pods: 0, ..leaving };
        assert_eq!(
            plan(0, Some(gone), true, false, now(), TIMEOUT).phase,
            Phase::Stopped { with: Some(3) }
        );
    }

    #[test]
    fn a_cluster_with_nothing_ready_stops_at_once() {
        let stop = plan(0, Some(running(2, 0)), true, false, now(), TIMEOUT);
        assert_eq!((stop.replicas, stop.shutdown), (0, false));
        assert_eq!(stop.phase, Phase::Stopping { pods: 2 });
        assert!(stop.annotations().is_empty());
    }

    #[test]
    fn a_gracefully_stopped_cluster_comes_back_with_its_pods_then_scales() {
        let stopped = Existing {
            replicas: 0,
            pods: 0,
            ready: 0,
            stopped_with: Some(3),
            since: Some(now()),
            upgrading: false,
        };
        // Its pods still terminating: they go first.
        let leaving = Existing { pods: 2, ..stopped };
        let wait = plan(1, Some(leaving), true, false, now(), TIMEOUT);
        assert_eq!((wait.replicas, wait.stopped_with), (0, Some(3)));
        assert_eq!(wait.phase, Phase::Stopping { pods: 2 });
        // Asked for 1: the 3 pods first, the record kept.
        let restart = plan(1, Some(stopped), true, false, now(), TIMEOUT);
        assert_eq!((restart.replicas, restart.stopped_with), (3, Some(3)));
        assert_eq!(
            restart.phase,
            Phase::Restarting {
                with: 3,
                ready: 0,
                then: 1
            }
        );
        let starting = Existing {
            replicas: 3,
            pods: 3,
            ready: 2,
            ..stopped
        };
        assert_eq!(
            plan(1, Some(starting), true, false, now(), TIMEOUT).replicas,
            3
        );
        // All 3 ready: what the CR asks for, the record removed.
        let back = Existing {
            ready: 3,
            ..starting
        };
        let done = plan(1, Some(back), true, false, now(), TIMEOUT);
        assert_eq!(done, Plan::at(1, Phase::Running));
        // Ephemeral storage keeps nothing: what the CR asks for at once.
        assert_eq!(
            plan(1, Some(stopped), false, false, now(), TIMEOUT),
            Plan::at(1, Phase::Running)
        );
    }

    #[test]
    fn the_record_is_read_from_the_stateful_set() {
        let sts: StatefulSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "demo", "annotations": {
                REPLICAS_ANNOTATION: "3", SINCE_ANNOTATION: "2026-12-02T10:00:00Z"}},
            "spec": {"replicas": 0, "selector": {}, "template": {}},
            "status": {"replicas": 1, "readyReplicas": 0},
        }))
        .expect("a StatefulSet");
        assert_eq!(
            Existing::of(Some(&sts)),
            Some(Existing {
                replicas: 0,
                pods: 1,
                ready: 0,
                stopped_with: Some(3),
                since: Some(now()),
                upgrading: false,
            })
        );
        assert_eq!(Existing::of(None), None);
    }

    #[test]
    fn a_shutdown_upgrade_stops_the_pods_on_their_template_then_starts_them_on_the_new_one() {
        // The new image is applied with every pod held on the old template, then the stop.
        let upgrade = plan(3, Some(running(3, 3)), true, true, now(), TIMEOUT);
        assert_eq!((upgrade.replicas, upgrade.hold), (3, Some(3)));
        assert!(upgrade.shutdown);
        assert_eq!(
            upgrade
                .annotations()
                .get(UPGRADE_ANNOTATION)
                .map(String::as_str),
            Some("true")
        );
        assert!(matches!(
            upgrade.phase,
            Phase::ShuttingDown {
                upgrade: true,
                with: 3,
                ..
            }
        ));
        // The template is the new one now: the record carries the upgrade on.
        let recorded = Existing {
            stopped_with: Some(3),
            since: Some(now()),
            upgrading: true,
            ..running(3, 1)
        };
        let again = plan(3, Some(recorded), true, false, now(), TIMEOUT);
        assert!(again.shutdown && again.hold == Some(3));
        // Down: 0 pods, the record kept without the upgrade mark; then the restart at 3.
        let down = again.shut_down(3, true);
        assert_eq!((down.replicas, down.hold), (0, None));
        assert!(!down.annotations().contains_key(UPGRADE_ANNOTATION));
        let stopped = Existing {
            replicas: 0,
            pods: 0,
            ready: 0,
            stopped_with: Some(3),
            since: Some(now()),
            upgrading: false,
        };
        let restart = plan(3, Some(stopped), true, false, now(), TIMEOUT);
        assert_eq!((restart.replicas, restart.hold), (3, None));
        assert!(matches!(restart.phase, Phase::Restarting { with: 3, .. }));
        // Nothing ready: nothing to shut down, the StatefulSet rolls as usual.
        let idle = plan(3, Some(running(3, 0)), true, true, now(), TIMEOUT);
        assert_eq!(idle, Plan::at(3, Phase::Running));
    }
}
