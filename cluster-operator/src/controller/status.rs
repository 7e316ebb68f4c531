//! The status of an `Infinispan` CR, computed from what the controller observed (pure).
//!
//! Conditions (design "The API"):
//!
//! | type | True | False |
//! |---|---|---|
//! | `Ready` | `AllReplicasReady`: every server pod asked for is ready | `Stopped` (replicas 0); `ShuttingDown`, `Stopping`, `Restarting` (a graceful stop and the restart after it, [`super::graceful_stop`]); what keeps a server pod from running, read from the pods ([`super::pods`]): `ImagePullFailed`, `ServerCrashLooping`, `ServerFailing`, `Unschedulable` (k of n ready, then the pod, its container and image, the kubelet's or the scheduler's message or the end of the container's termination message, and what to do); else `ReplicasNotReady` (k of n ready: pods being created or starting) |
//! | `Progressing` | `RollingOut`: the StatefulSet has not caught up with its spec (new pods, a roll, a scale) | `Stable` |
//! | `Degraded` | the reason of the problem that keeps the operator from applying the CR (a missing or invalid Secret or ConfigMap, an unknown version, a refused apply): the last applied objects keep running | `AsExpected` |
//! | `ResourcesOperatorReady` | `Available` | `Disabled`, `Draining`; what keeps its pod from running ([`super::pods`]: `ImagePullFailed`, `CrashLooping`, `Failing`, `Unschedulable`); else `Deploying` |
//! | `WellFormed` | as `Ready` | as `Ready`: a copy of it ([`well_formed`]) under infinispan-operator's name, so that `kubectl wait --for=condition=wellFormed` (kubectl matches condition types ignoring case) works unchanged |
//! | `CrossSiteViewFormed` (only with `spec.service.sites`) | `CrossSiteViewFormed`: every site the CR names is in the servers' sites view | `SitesMissing` (which, with each missing site's gossip router and whether the operator reaches it), `SitesViewUnknown` (no server ready or reachable); [`super::sites`] |
//!
//! `Degraded` is about the operator's side (it cannot apply the CR); a pod that cannot run is
//! the cluster's side: the objects are applied and Kubernetes cannot run them, which `Ready`
//! (or `ResourcesOperatorReady`) says with the reason, so that `kubectl get infinispan` shows it
//! in its `Reason` column. A Warning Event on the CR goes with each new such reason.
//!
//! Every condition carries the CR's `metadata.generation`; `lastTransitionTime` moves only on a
//! change of status ([`set_condition`]), and the controller writes the status only when
//! [`compute`] returns something other than what the CR holds.

use common_crds::ResourceKind;
use common_crds::conditions::{
    ConditionStatus, ConditionType, ProblemReason, find_condition, new_condition, remove_condition,
    set_condition,
};
use common_crds::infinispan::InfinispanStatus;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::graceful_stop::Phase;

/// The reason of `ResourcesOperatorReady=False` while the resources operator drains.
pub const DRAINING: &str = "Draining";

/// Why the CR cannot be applied as it is (shown as `Degraded=True`), or why its pods cannot run
/// (shown by `Ready` or `ResourcesOperatorReady`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// A stable reason (`MissingSecret`, `InvalidTlsSecret`, `UnsupportedVersion`...).
    pub reason: ProblemReason,
    /// What is wrong and what to do, never a secret value.
    pub message: String,
}

impl Problem {
    /// `reason` with the message `message`.
    pub fn new(reason: ProblemReason, message: impl ToString) -> Self {
        Self {
            reason,
            message: message.to_string(),
        }
    }
}

/// The server pods, as the StatefulSet reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pods {
    /// Pods asked for (`spec.replicas` of the CR).
    pub desired: i32,
    /// Pods that exist.
    pub current: i32,
    /// Pods ready.
    pub ready: i32,
    /// Whether the StatefulSet controller has caught up with the StatefulSet's spec (observed
    /// its generation, every pod at the update revision, as many pods as asked for).
    pub settled: bool,
}

impl Pods {
    /// From the StatefulSet (absent: nothing exists yet) and the CR's `spec.replicas`.
    pub fn of(stateful_set: Option<&StatefulSet>, desired: i32) -> Self {
        let Some(sts) = stateful_set else {
            return Self {
                desired,
                ..Self::default()
            };
        };
        let status = sts.status.clone().unwrap_or_default();
        let spec_replicas = sts.spec.replicas.unwrap_or(1);
        let observed = status.observed_generation >= sts.metadata.generation;
        let same_revision =
            status.update_revision.is_none() || status.current_revision == status.update_revision;
        let updated = status.updated_replicas.unwrap_or(0);
        Self {
            desired,
            current: status.replicas,
            ready: status.ready_replicas.unwrap_or(0),
            settled: observed
                && spec_replicas == desired
                && status.replicas == desired
                && (desired == 0 || (same_revision && updated == desired)),
        }
    }
}

/// The cluster's resources operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourcesOperator {
    /// `spec.resourcesOperator.enabled: false`, drained and removed.
    Disabled,
    /// Being drained (disabled, or the CR is being deleted).
    Draining,
    /// Deployed; `available`: its Deployment has caught up and has an available pod; `shared`:
    /// that Deployment is the namespace's shared resources operator.
    Deployed { available: bool, shared: bool },
}

impl ResourcesOperator {
    /// From its Deployment.
    pub fn deployed(deployment: Option<&Deployment>) -> Self {
        let available = deployment.is_some_and(|d| {
            let status = d.status.clone().unwrap_or_default();
            status.observed_generation >= d.metadata.generation
                && status.available_replicas.unwrap_or(0) > 0
                && status.updated_replicas == Some(d.spec.replicas.unwrap_or(1))
        });
        Self::Deployed {
            available,
            shared: false,
        }
    }

    /// From the namespace's shared Deployment.
    pub fn deployed_shared(deployment: Option<&Deployment>) -> Self {
        match Self::deployed(deployment) {
            Self::Deployed { available, .. } => Self::Deployed {
                available,
                shared: true,
            },
            other => other,
        }
    }

    /// What runs it, for messages.
    fn what(self) -> &'static str {
        match self {
            Self::Deployed { shared: true, .. } => {
                "the namespace's shared resources operator (Deployment infinispan-resources-operator-shared)"
            }
            _ => "the resources operator's Deployment",
        }
    }
}

/// Everything the status is computed from.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    pub generation: Option<i64>,
    pub problem: Option<Problem>,
    pub pods: Pods,
    /// What keeps a server pod from running ([`super::pods::problem`]).
    pub pods_problem: Option<Problem>,
    pub resources_operator: ResourcesOperator,
    /// What keeps the resources operator's pod from running.
    pub resources_operator_problem: Option<Problem>,
    /// The server version the pods run (from the image applied), once known.
    pub version: Option<String>,
    /// Label selector of the server pods (the scale subresource's).
    pub selector: String,
    pub operator_credentials_secret: Option<String>,
    /// The TLS in effect, once decided.
    pub security: Option<common_crds::infinispan::SecurityStatus>,
    /// Where a graceful stop or restart is ([`super::graceful_stop`]).
    pub stop: Option<Phase>,
    /// The version each Ready server pod reports; `None`: not known (kept as it was).
    pub server_versions: Option<Vec<common_crds::infinispan::ServerVersion>>,
    /// The sites view of a cluster with `spec.service.sites`; `None`: no sites (the
    /// `CrossSiteViewFormed` condition goes).
    pub sites: Option<super::sites::SitesView>,
}

/// The status `current` must become; equal to `current` when nothing changed.
pub fn compute(
    current: Option<&InfinispanStatus>,
    observed: &Observed,
    now: Time,
) -> InfinispanStatus {
    let mut status = current.cloned().unwrap_or_default();
    let generation = observed.generation;
    let condition = |type_, status: ConditionStatus, reason: &str, message: String| {
        new_condition(type_, status, reason, message, generation, now.clone())
    };
    let pods = observed.pods;
    let mut conditions = status.conditions.clone();
    set_condition(&mut conditions, ready_condition(observed, condition));
    set_condition(&mut conditions, progressing_condition(pods, condition));
    set_condition(&mut conditions, degraded_condition(observed, condition));
    set_condition(
        &mut conditions,
        resources_operator_ready(observed, condition),
    );
    if let Some(ready) = find_condition(&conditions, ConditionType::Ready) {
        let mirror = well_formed(ready);
        set_condition(&mut conditions, mirror);
    }
    match &observed.sites {
        Some(view) => {
            let (status, reason, message) = super::sites::condition(view);
            let sites = condition(ConditionType::CrossSiteViewFormed, status, reason, message);
            set_condition(&mut conditions, sites);
        }
        None => {
            remove_condition(&mut conditions, ConditionType::CrossSiteViewFormed);
        }
    }

    // Keep the documented order whatever order an older status had.
    let order = |c: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition| {
        ConditionType::ALL
            .iter()
            .position(|t| t.as_str() == c.type_)
            .unwrap_or(usize::MAX)
    };
    conditions.sort_by_key(order);
    status.conditions = conditions;
    status.observed_generation = generation;
    status.replicas = Some(pods.current);
    status.ready_replicas = Some(pods.ready);
    status.selector = Some(observed.selector.clone());
    if observed.version.is_some() {
        status.version = observed.version.clone();
    }
    if let Some(versions) = &observed.server_versions {
        status.server_versions = versions.clone();
    }
    if observed.operator_credentials_secret.is_some() {
        status.operator_credentials_secret = observed.operator_credentials_secret.clone();
    }
    if observed.security.is_some() {
        status.security = observed.security.clone();
    }
    status
}

/// `Ready`: the server pods, or what keeps one from running.
fn ready_condition(
    observed: &Observed,
    condition: impl Fn(ConditionType, ConditionStatus, &str, String) -> Condition,
) -> Condition {
    let pods = observed.pods;
    if let Some((reason, message)) = observed.stop.as_ref().and_then(stop_condition) {
        condition(
            ConditionType::Ready,
            ConditionStatus::False,
            reason,
            message,
        )
    } else if pods.desired == 0 {
        condition(
            ConditionType::Ready,
            ConditionStatus::False,
            "Stopped",
            "spec.replicas is 0: the cluster is stopped; its data volumes are kept".into(),
        )
    } else if pods.ready >= pods.desired && pods.settled {
        condition(
            ConditionType::Ready,
            ConditionStatus::True,
            "AllReplicasReady",
            format!("{} of {} server pods ready", pods.ready, pods.desired),
        )
    } else if let Some(problem) = &observed.pods_problem {
        condition(
            ConditionType::Ready,
            ConditionStatus::False,
            problem.reason.as_str(),
            format!(
                "{} of {} server pods ready: {}",
                pods.ready, pods.desired, problem.message
            ),
        )
    } else {
        condition(
            ConditionType::Ready,
            ConditionStatus::False,
            "ReplicasNotReady",
            format!("{} of {} server pods ready", pods.ready, pods.desired),
        )
    }
}

/// `Ready=False`'s reason and message while a graceful stop or restart goes on (`None`:
/// running, or stopped without one).
fn stop_condition(phase: &Phase) -> Option<(&'static str, String)> {
    Some(match phase {
        Phase::Running | Phase::Stopped { with: None } => return None,
        Phase::ShuttingDown {
            with,
            failed,
            until,
            upgrade,
        } => {
            let why = if *upgrade {
                "a new server image with spec.upgrades.type Shutdown"
            } else {
                "spec.replicas is 0"
            };
            let then = if *upgrade {
                "stop, then start again on the new image"
            } else {
                "stop"
            };
            (
                "ShuttingDown",
                match failed {
                    None => format!(
                        "{why}: the server is shutting its caches down cluster-wide (each of the {with} pods persists their state), then the pods {then}"
                    ),
                    Some(error) => format!(
                        "{why}: asking the server to shut its caches down failed ({error}); retried until {until}, then the {with} pods {then} without it"
                    ),
                },
            )
        }
        Phase::Stopping { pods } => (
            "Stopping",
            format!("spec.replicas is 0: the caches are shut down; {pods} pods are stopping"),
        ),
        Phase::Stopped { with: Some(with) } => (
            "Stopped",
            format!(
                "spec.replicas is 0: the cluster was stopped gracefully with {with} pods, its caches' state kept on their data volumes; scaling up starts those {with} pods first"
            ),
        ),
        Phase::Restarting { with, ready, then } => (
            "Restarting",
            format!(
                "{ready} of {with} server pods ready: the cluster was stopped gracefully with {with} pods and its persisted state comes back only when all of them are; then it scales to spec.replicas ({then})"
            ),
        ),
    })
}

/// `WellFormed`: `ready` under infinispan-operator's name, the same in every field (status,
/// reason, message, observedGeneration, lastTransitionTime).
pub fn well_formed(ready: &Condition) -> Condition {
    Condition {
        type_: ConditionType::WellFormed.as_str().to_string(),
        ..ready.clone()
    }
}

/// `Progressing`: whether the StatefulSet has caught up.
fn progressing_condition(
    pods: Pods,
    condition: impl Fn(ConditionType, ConditionStatus, &str, String) -> Condition,
) -> Condition {
    if pods.settled {
        condition(
            ConditionType::Progressing,
            ConditionStatus::False,
            "Stable",
            format!("{} server pods at the current configuration", pods.current),
        )
    } else {
        condition(
            ConditionType::Progressing,
            ConditionStatus::True,
            "RollingOut",
            format!(
                "the StatefulSet is moving to {} pods at the current configuration ({} exist)",
                pods.desired, pods.current
            ),
        )
    }
}

/// `Degraded`: the problem that keeps the operator from applying the CR.
fn degraded_condition(
    observed: &Observed,
    condition: impl Fn(ConditionType, ConditionStatus, &str, String) -> Condition,
) -> Condition {
    match &observed.problem {
        Some(problem) => condition(
            ConditionType::Degraded,
            ConditionStatus::True,
            problem.reason.as_str(),
            format!(
                "{}; the objects applied before keep running until this is fixed",
                problem.message
            ),
        ),
        None => condition(
            ConditionType::Degraded,
            ConditionStatus::False,
            "AsExpected",
            "every object of the CR is applied".into(),
        ),
    }
}

/// `ResourcesOperatorReady`: its state, or what keeps its pod from running.
fn resources_operator_ready(
    observed: &Observed,
    condition: impl Fn(ConditionType, ConditionStatus, &str, String) -> Condition,
) -> Condition {
    match (
        observed.resources_operator,
        &observed.resources_operator_problem,
    ) {
        (
            state @ ResourcesOperator::Deployed {
                available: false, ..
            },
            Some(problem),
        ) => condition(
            ConditionType::ResourcesOperatorReady,
            ConditionStatus::False,
            problem.reason.as_str(),
            format!(
                "{} has no available pod at its current version: {}",
                state.what(),
                problem.message
            ),
        ),
        (state, _) => resources_operator_condition(state, condition),
    }
}

/// `ResourcesOperatorReady` from the state of the resources operator alone.
fn resources_operator_condition(
    state: ResourcesOperator,
    condition: impl Fn(ConditionType, ConditionStatus, &str, String) -> Condition,
) -> Condition {
    match state {
        ResourcesOperator::Disabled => condition(
            ConditionType::ResourcesOperatorReady,
            ConditionStatus::False,
            "Disabled",
            format!(
                "spec.resourcesOperator.enabled is false: {} CRs are not synced",
                ResourceKind::phrase(|kind| kind.to_string())
            ),
        ),
        ResourcesOperator::Draining => condition(
            ConditionType::ResourcesOperatorReady,
            ConditionStatus::False,
            DRAINING,
            "the resources operator is releasing its finalizers before it is removed".into(),
        ),
        ResourcesOperator::Deployed {
            available: true, ..
        } => condition(
            ConditionType::ResourcesOperatorReady,
            ConditionStatus::True,
            "Available",
            format!("{} is available", state.what()),
        ),
        ResourcesOperator::Deployed {
            available: false, ..
        } => condition(
            ConditionType::ResourcesOperatorReady,
            ConditionStatus::False,
            "Deploying",
            format!(
                "{} has no available pod at its current version yet",
                state.what()
            ),
        ),
    }
}

/// The status of a CR being deleted while its resources operator drains: `current` with
/// `ResourcesOperatorReady=False, reason=Draining` (how many CRs still hold the finalizer) and
/// the new `observedGeneration` (marking a custom resource deleted moves its generation).
pub fn deleting(
    current: Option<&InfinispanStatus>,
    generation: Option<i64>,
    holding: usize,
    now: Time,
) -> InfinispanStatus {
    let mut next = current.cloned().unwrap_or_default();
    set_condition(
        &mut next.conditions,
        new_condition(
            ConditionType::ResourcesOperatorReady,
            ConditionStatus::False,
            DRAINING,
            format!(
                "the cluster is being deleted: {holding} CRs still hold the resources operator's finalizer"
            ),
            generation,
            now,
        ),
    );
    next.observed_generation = generation;
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{StatefulSetSpec, StatefulSetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::jiff::Timestamp;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).expect("time"))
    }

    fn observed(pods: Pods) -> Observed {
        Observed {
            generation: Some(3),
            problem: None,
            pods,
            pods_problem: None,
            resources_operator: ResourcesOperator::Deployed {
                available: true,
                shared: false,
            },
            resources_operator_problem: None,
            version: Some("16.0.7".into()),
            selector: "app.kubernetes.io/instance=demo,app.kubernetes.io/name=infinispan".into(),
            operator_credentials_secret: Some("demo-operator-credentials".into()),
            security: None,
            stop: None,
            server_versions: None,
            sites: None,
        }
    }

    fn get<'a>(
        status: &'a InfinispanStatus,
        type_: &str,
    ) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap_or_else(|| panic!("no {type_} in {status:?}"))
    }

    fn sts(generation: i64, spec: i32, status: StatefulSetStatus) -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                generation: Some(generation),
                ..ObjectMeta::default()
            },
            spec: StatefulSetSpec {
                replicas: Some(spec),
                ..StatefulSetSpec::default()
            },
            status: Some(status),
        }
    }

    #[test]
    fn pods_settle_only_when_the_stateful_set_caught_up() {
        let caught_up = StatefulSetStatus {
            observed_generation: Some(2),
            replicas: 3,
            ready_replicas: Some(3),
            updated_replicas: Some(3),
            current_revision: Some("r2".into()),
            update_revision: Some("r2".into()),
            ..StatefulSetStatus::default()
        };
        assert!(Pods::of(Some(&sts(2, 3, caught_up.clone())), 3).settled);
        // Not yet observed the new generation.
        assert!(!Pods::of(Some(&sts(3, 3, caught_up.clone())), 3).settled);
        // A roll under way.
        let rolling = StatefulSetStatus {
            update_revision: Some("r3".into()),
            updated_replicas: Some(1),
            ..caught_up.clone()
        };
        assert!(!Pods::of(Some(&sts(2, 3, rolling)), 3).settled);
        // The CR asks for more than the StatefulSet has.
        assert!(!Pods::of(Some(&sts(2, 3, caught_up)), 4).settled);
        // Nothing yet.
        assert_eq!(
            Pods::of(None, 2),
            Pods {
                desired: 2,
                current: 0,
                ready: 0,
                settled: false
            }
        );
    }

    #[test]
    fn ready_follows_the_pods() {
        let all = Pods {
            desired: 2,
            current: 2,
            ready: 2,
            settled: true,
        };
        let status = compute(None, &observed(all), at(10));
        assert_eq!(get(&status, "Ready").status, "True");
        assert_eq!(get(&status, "Ready").reason, "AllReplicasReady");
        assert_eq!(get(&status, "Progressing").status, "False");
        assert_eq!(get(&status, "Degraded").status, "False");
        assert_eq!(get(&status, "ResourcesOperatorReady").status, "True");
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!((status.replicas, status.ready_replicas), (Some(2), Some(2)));
        assert_eq!(status.version.as_deref(), Some("16.0.7"));
        assert!(get(&status, "Ready").observed_generation == Some(3));

        let some = Pods {
            desired: 3,
            current: 3,
            ready: 1,
            settled: false,
        };
        let status = compute(None, &observed(some), at(10));
        assert_eq!(get(&status, "Ready").reason, "ReplicasNotReady");
        assert_eq!(get(&status, "Ready").message, "1 of 3 server pods ready");
        assert_eq!(get(&status, "Progressing").reason, "RollingOut");

        let stopped = Pods {
            desired: 0,
            current: 0,
            ready: 0,
            settled: true,
        };
        let status = compute(None, &observed(stopped), at(10));
        assert_eq!(get(&status, "Ready").reason, "Stopped");
        assert_eq!(get(&status, "Progressing").status, "False");
    }

    #[test]
    fn a_problem_is_degraded_with_its_reason() {
        let mut input = observed(Pods {
            desired: 1,
            current: 1,
            ready: 1,
            settled: true,
        });
        input.problem = Some(Problem {
            reason: ProblemReason::MissingSecret,
            message:
                "Secret ns/tls (spec.security.endpointEncryption.certSecretName) does not exist"
                    .into(),
        });
        let status = compute(None, &input, at(10));
        let degraded = get(&status, "Degraded");
        assert_eq!(
            (degraded.status.as_str(), degraded.reason.as_str()),
            ("True", "MissingSecret")
        );
        assert!(
            degraded.message.contains("does not exist"),
            "{}",
            degraded.message
        );
        // The pods that run keep serving.
        assert_eq!(get(&status, "Ready").status, "True");
    }

    #[test]
    fn unchanged_input_gives_the_same_status_and_time_moves_only_on_change() {
        let pods = Pods {
            desired: 1,
            current: 1,
            ready: 0,
            settled: false,
        };
        let first = compute(None, &observed(pods), at(10));
        let again = compute(Some(&first), &observed(pods), at(20));
        assert_eq!(first, again, "nothing changed: nothing to write");
        let ready = Pods {
            ready: 1,
            settled: true,
            ..pods
        };
        let later = compute(Some(&first), &observed(ready), at(30));
        assert_eq!(get(&later, "Ready").last_transition_time, at(30));
        assert_eq!(get(&later, "Degraded").last_transition_time, at(10));
        let order: Vec<_> = later.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(
            order,
            [
                "Ready",
                "Progressing",
                "Degraded",
                "ResourcesOperatorReady",
                "WellFormed"
            ]
        );
    }

    /// `WellFormed` is `Ready` under another type, in every case `Ready` has, and across
    /// transitions (its time moves with `Ready`'s, never on its own).
    #[test]
    fn well_formed_mirrors_ready_in_every_case() {
        let pods = |desired, ready, settled| Pods {
            desired,
            current: desired,
            ready,
            settled,
        };
        let pod_problem = Problem::new(ProblemReason::ImagePullFailed, "pod demo-0: no image");
        let cases = [
            ("Stopped", observed(pods(0, 0, true))),
            ("AllReplicasReady", observed(pods(3, 3, true))),
            ("ReplicasNotReady", observed(pods(3, 1, false))),
            (
                "ImagePullFailed",
                Observed {
                    pods_problem: Some(pod_problem),
                    ..observed(pods(2, 0, false))
                },
            ),
            (
                // A Degraded CR whose pods run: Ready (and so WellFormed) stays True.
                "AllReplicasReady",
                Observed {
                    problem: Some(Problem::new(ProblemReason::MissingSecret, "gone")),
                    ..observed(pods(1, 1, true))
                },
            ),
        ];
        let mut previous: Option<InfinispanStatus> = None;
        for (second, (reason, observed)) in (10..).step_by(10).zip(cases) {
            let status = compute(previous.as_ref(), &observed, at(second));
            let ready = get(&status, "Ready");
            let mirror = get(&status, "WellFormed");
            assert_eq!(ready.reason, reason);
            assert_eq!(mirror, &well_formed(ready), "{reason}");
            assert_eq!(
                (&mirror.status, &mirror.reason, &mirror.message),
                (&ready.status, &ready.reason, &ready.message)
            );
            assert_eq!(mirror.last_transition_time, ready.last_transition_time);
            assert_eq!(mirror.observed_generation, ready.observed_generation);
            previous = Some(status);
        }

        // A status written by an operator without WellFormed gets it with Ready's time.
        let mut old = compute(None, &observed(pods(1, 1, true)), at(5));
        old.conditions.retain(|c| c.type_ != "WellFormed");
        let upgraded = compute(Some(&old), &observed(pods(1, 1, true)), at(50));
        assert_eq!(get(&upgraded, "WellFormed").last_transition_time, at(5));
        assert_eq!(get(&upgraded, "WellFormed").status, "True");
    }

    #[test]
    fn deleting_reports_the_drain_for_the_new_generation() {
        let pods = Pods {
            desired: 1,
            current: 1,
            ready: 1,
            settled: true,
        };
        let live = compute(None, &observed(pods), at(10));
        let draining = deleting(Some(&live), Some(4), 2, at(20));
        let condition = get(&draining, "ResourcesOperatorReady");
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", "Draining")
        );
        assert!(condition.message.contains("2 CRs"), "{}", condition.message);
        assert_eq!(draining.observed_generation, Some(4));
        assert_eq!(get(&draining, "Ready"), get(&live, "Ready"));
        assert_eq!(deleting(Some(&draining), Some(4), 2, at(30)), draining);
    }

    #[test]
    fn resources_operator_states() {
        for (state, status, reason) in [
            (ResourcesOperator::Disabled, "False", "Disabled"),
            (ResourcesOperator::Draining, "False", "Draining"),
            (
                ResourcesOperator::Deployed {
                    available: false,
                    shared: false,
                },
                "False",
                "Deploying",
            ),
            (
                ResourcesOperator::Deployed {
                    available: true,
                    shared: false,
                },
                "True",
                "Available",
            ),
        ] {
            let mut input = observed(Pods::default());
            input.resources_operator = state;
            let computed = compute(None, &input, at(1));
            let condition = get(&computed, "ResourcesOperatorReady");
            assert_eq!(
                (condition.status.as_str(), condition.reason.as_str()),
                (status, reason)
            );
        }
    }

    #[test]
    fn a_pod_problem_is_the_reason_ready_is_false() {
        let pull = Problem {
            reason: ProblemReason::ImagePullFailed,
            message: "pod demo-0: container infinispan (image x:1): the image cannot be pulled: not found; check spec.image".into(),
        };
        let stuck = Pods {
            desired: 2,
            current: 2,
            ready: 1,
            settled: false,
        };
        let mut input = observed(stuck);
        input.pods_problem = Some(pull.clone());
        let status = compute(None, &input, at(10));
        let ready = get(&status, "Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "ImagePullFailed")
        );
        assert_eq!(
            ready.message,
            format!("1 of 2 server pods ready: {}", pull.message)
        );
        // The operator applied everything: not Degraded, and no other condition moves.
        assert_eq!(get(&status, "Degraded").reason, "AsExpected");
        assert_eq!(get(&status, "Progressing").reason, "RollingOut");
        // Unchanged: nothing to write.
        assert_eq!(compute(Some(&status), &input, at(20)), status);
        // Fixed: back to the pods' count, then ready.
        input.pods_problem = None;
        let starting = compute(Some(&status), &input, at(30));
        assert_eq!(get(&starting, "Ready").reason, "ReplicasNotReady");
        assert_eq!(get(&starting, "Ready").last_transition_time, at(10));
        // A problem left over while every pod is ready (a stale list) does not hide it.
        let mut all = observed(Pods {
            desired: 2,
            current: 2,
            ready: 2,
            settled: true,
        });
        all.pods_problem = Some(pull);
        assert_eq!(
            get(&compute(None, &all, at(40)), "Ready").reason,
            "AllReplicasReady"
        );
        // A stopped cluster has no pods to complain about.
        let mut stopped = observed(Pods {
            settled: true,
            ..Pods::default()
        });
        stopped.pods_problem = input.pods_problem.clone();
        assert_eq!(
            get(&compute(None, &stopped, at(40)), "Ready").reason,
            "Stopped"
        );
    }

    #[test]
    fn a_resources_operator_pod_problem_is_the_reason_it_is_not_ready() {
        let crash = Problem {
            reason: ProblemReason::CrashLooping,
            message: "pod resources-operator-demo-abc: container resources-operator keeps ending"
                .into(),
        };
        for (state, reason) in [
            (
                ResourcesOperator::Deployed {
                    available: false,
                    shared: false,
                },
                "CrashLooping",
            ),
            // An available Deployment serves; the roll of a bad pod shows while it is not.
            (
                ResourcesOperator::Deployed {
                    available: true,
                    shared: false,
                },
                "Available",
            ),
            (ResourcesOperator::Draining, "Draining"),
            (ResourcesOperator::Disabled, "Disabled"),
        ] {
            let mut input = observed(Pods::default());
            input.resources_operator = state;
            input.resources_operator_problem = Some(crash.clone());
            let status = compute(None, &input, at(1));
            let condition = get(&status, "ResourcesOperatorReady");
            assert_eq!(condition.reason, reason, "{state:?}");
            if reason == "CrashLooping" {
                assert_eq!(condition.status, "False");
                assert!(
                    condition.message.ends_with(&crash.message),
                    "{}",
                    condition.message
                );
            }
        }
    }

    #[test]
    fn a_shared_member_says_the_shared_operator_serves_it() {
        for (available, status, says) in [
            (true, "True", "is available"),
            (false, "False", "has no available pod"),
        ] {
            let mut input = observed(Pods::default());
            input.resources_operator = ResourcesOperator::Deployed {
                available,
                shared: true,
            };
            let computed = compute(None, &input, at(1));
            let condition = get(&computed, "ResourcesOperatorReady");
            assert_eq!(condition.status, status);
            assert!(
                condition
                    .message
                    .starts_with("the namespace's shared resources operator (Deployment infinispan-resources-operator-shared)")
                    && condition.message.contains(says),
                "{}",
                condition.message
            );
        }
    }
}
