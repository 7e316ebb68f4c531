//! Status conditions: their types, the reasons of resource kinds (design "Conditions on resource
//! kinds"), the reasons of an `Infinispan` CR's problems ([`ProblemReason`]), and
//! [`set_condition`], which moves `lastTransitionTime` only on a real change so that
//! an idle operator writes nothing (design L1).

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The condition types of every kind of the project.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionType {
    /// Infinispan: the cluster serves; resource kinds: the CR and the server agree.
    Ready,
    /// Infinispan: a rollout or scaling is under way.
    Progressing,
    /// Infinispan: the cluster runs with fewer ready pods than asked for, or a part failed.
    Degraded,
    /// Infinispan: the cluster's resources operator is deployed and ready.
    ResourcesOperatorReady,
    /// Infinispan: a copy of `Ready` (status, reason, message, time) under the name
    /// infinispan-operator gives it, so that scripts waiting with `kubectl wait
    /// --for=condition=wellFormed` work unchanged.
    WellFormed,
    /// Resource kinds: the `infinispan.org/pause-reconciliation` annotation is set (design E2).
    ReconciliationPaused,
    /// Backup and Restore: finished successfully.
    Complete,
    /// Backup and Restore: finished unsuccessfully.
    Failed,
    /// Infinispan with `spec.service.sites`: every site it names is in its servers' view of
    /// the sites (infinispan-operator's condition).
    CrossSiteViewFormed,
}

impl ConditionType {
    /// Every condition type.
    pub const ALL: [ConditionType; 9] = [
        Self::Ready,
        Self::Progressing,
        Self::Degraded,
        Self::ResourcesOperatorReady,
        Self::WellFormed,
        Self::CrossSiteViewFormed,
        Self::ReconciliationPaused,
        Self::Complete,
        Self::Failed,
    ];

    /// The `type` of the condition.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "Ready",
            Self::Progressing => "Progressing",
            Self::Degraded => "Degraded",
            Self::ResourcesOperatorReady => "ResourcesOperatorReady",
            Self::WellFormed => "WellFormed",
            Self::ReconciliationPaused => "ReconciliationPaused",
            Self::Complete => "Complete",
            Self::Failed => "Failed",
            Self::CrossSiteViewFormed => "CrossSiteViewFormed",
        }
    }
}

impl fmt::Display for ConditionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `status` of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    /// `"True"`, `"False"` or `"Unknown"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the `Ready` condition of a resource CR (Cache, Template, Counter, Schema, Task) is what it
/// is: exactly one of these, always.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The CR and the server object agree (`Ready=True`).
    Synced,
    /// Not synced yet: first sync or a retry is under way.
    Pending,
    /// The server refused the change; the message is the server's own.
    Rejected,
    /// The change needs a recreation the server cannot do in place and `updates.strategy` is
    /// `retain`.
    Immutable,
    /// A Template or Schema this object needs is missing or not ready (design D1).
    DependencyMissing,
    /// Another CR claims the same server object and wins (design N2).
    Conflict,
    /// No `Infinispan` CR of the name in the `infinispan.org/cluster` label in this namespace.
    ClusterNotFound,
    /// The server cannot be reached; pending work waits for it.
    ServerUnavailable,
    /// The server cannot do what the CR asks for (e.g. this kind or operation on this version).
    Unsupported,
    /// A schema the server holds has errors.
    SchemaError,
    /// The cluster syncs `FromServer`: CR changes are not pushed (design E3).
    ReadOnlyMode,
    /// The CR has `infinispan.org/managed: "false"` (design E1).
    Unmanaged,
    /// Another writer keeps changing the object against the operator: its writes for it are
    /// held for a while instead of fighting forever.
    WriteLoop,
}

impl Reason {
    /// Every reason.
    pub const ALL: [Reason; 13] = [
        Self::Synced,
        Self::Pending,
        Self::Rejected,
        Self::Immutable,
        Self::DependencyMissing,
        Self::Conflict,
        Self::ClusterNotFound,
        Self::ServerUnavailable,
        Self::Unsupported,
        Self::SchemaError,
        Self::ReadOnlyMode,
        Self::Unmanaged,
        Self::WriteLoop,
    ];

    /// The `reason` of the condition.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Synced => "Synced",
            Self::Pending => "Pending",
            Self::Rejected => "Rejected",
            Self::Immutable => "Immutable",
            Self::DependencyMissing => "DependencyMissing",
            Self::Conflict => "Conflict",
            Self::ClusterNotFound => "ClusterNotFound",
            Self::ServerUnavailable => "ServerUnavailable",
            Self::Unsupported => "Unsupported",
            Self::SchemaError => "SchemaError",
            Self::ReadOnlyMode => "ReadOnlyMode",
            Self::Unmanaged => "Unmanaged",
            Self::WriteLoop => "WriteLoop",
        }
    }

    /// The reason of that name, if it is one.
    pub fn parse(reason: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == reason)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a condition of an `Infinispan` CR reports a problem: `Degraded=True` (the cluster
/// operator cannot apply the CR as it is), or `Ready` / `ResourcesOperatorReady` `False` because
/// a pod cannot run. Exactly the reasons users see in the status and in Warning Events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProblemReason {
    /// A Secret the CR names does not exist.
    MissingSecret,
    /// The ConfigMap of `spec.configMapName` does not exist.
    MissingConfigMap,
    /// The CR's name, namespace or uid cannot name the cluster's objects.
    InvalidCluster,
    /// The operator's own settings (cluster domain, image) cannot give the server's objects.
    InvalidSettings,
    /// `spec.version` has no image, is malformed or is too old.
    UnsupportedVersion,
    /// The identities Secret (or the operators' credentials) cannot be read as users.
    InvalidIdentities,
    /// The overlay ConfigMap cannot be used.
    InvalidConfigOverlay,
    /// The TLS Secret is not named, or cannot be used.
    InvalidTlsSecret,
    /// A log category of `spec.logging` cannot be used.
    InvalidLogging,
    /// The Secret of `spec.security.credentialStoreSecretName` has a key or value the server's
    /// credential store cannot take.
    InvalidCredentialStore,
    /// A label or annotation the CR asks for on its objects (through infinispan-operator's
    /// `infinispan.org/targetLabels`... annotations) is one of the operator's own keys.
    InvalidMetadata,
    /// The CR or the settings cannot give the resources operator's objects.
    InvalidResourcesOperator,
    /// The API server refused an object (invalid, or its change forbidden).
    Refused,
    /// The CR asks for more than the operator's policy allows (an image from elsewhere, a
    /// Secret read into the environment, a JVM agent, an annotation outside the allowed ones).
    PolicyRefused,
    /// Pods: an image cannot be pulled.
    ImagePullFailed,
    /// Pods: a server container keeps ending.
    ServerCrashLooping,
    /// Pods: a server container ended, or cannot be created or run.
    ServerFailing,
    /// Pods: a resources operator container keeps ending.
    CrashLooping,
    /// Pods: a resources operator container ended, or cannot be created or run.
    Failing,
    /// Pods: no node can take a pod.
    Unschedulable,
    /// The cluster's CA Secret is gone while certificates it signed remain: nothing is issued
    /// until it is restored or they are deleted.
    CertificateAuthorityMissing,
    /// `spec.security.transportEncryption` changed while pods run: pods with and without
    /// transport TLS cannot form one cluster, so it waits for the cluster to be scaled to 0.
    TransportEncryptionChange,
    /// An object of a name the cluster's objects take exists and is not the cluster's: it is
    /// not taken over.
    ObjectNotOwned,
    /// A Secret or ConfigMap the CR names does not allow the cluster to use it (annotation
    /// `infinispan.org/allow-clusters`): nothing is applied until it does.
    ReferenceNotAllowed,
    /// `spec.version` is below the version the cluster runs, without
    /// `spec.upgrades.allowDowngrade`.
    VersionDowngrade,
    /// `spec.service.sites` cannot give the cross-site configuration (a location's URL, no
    /// gossip router to join).
    InvalidSites,
}

impl ProblemReason {
    /// Every reason.
    pub const ALL: [ProblemReason; 26] = [
        Self::MissingSecret,
        Self::MissingConfigMap,
        Self::InvalidCluster,
        Self::InvalidSettings,
        Self::UnsupportedVersion,
        Self::InvalidIdentities,
        Self::InvalidConfigOverlay,
        Self::InvalidTlsSecret,
        Self::InvalidLogging,
        Self::InvalidCredentialStore,
        Self::InvalidMetadata,
        Self::InvalidResourcesOperator,
        Self::Refused,
        Self::PolicyRefused,
        Self::ImagePullFailed,
        Self::ServerCrashLooping,
        Self::ServerFailing,
        Self::CrashLooping,
        Self::Failing,
        Self::Unschedulable,
        Self::CertificateAuthorityMissing,
        Self::TransportEncryptionChange,
        Self::ObjectNotOwned,
        Self::ReferenceNotAllowed,
        Self::VersionDowngrade,
        Self::InvalidSites,
    ];

    /// The `reason` of the condition (and of the Warning Event).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::MissingSecret => "MissingSecret",
            Self::MissingConfigMap => "MissingConfigMap",
            Self::InvalidCluster => "InvalidCluster",
            Self::InvalidSettings => "InvalidSettings",
            Self::UnsupportedVersion => "UnsupportedVersion",
            Self::InvalidIdentities => "InvalidIdentities",
            Self::InvalidConfigOverlay => "InvalidConfigOverlay",
            Self::InvalidTlsSecret => "InvalidTlsSecret",
            Self::InvalidLogging => "InvalidLogging",
            Self::InvalidCredentialStore => "InvalidCredentialStore",
            Self::InvalidMetadata => "InvalidMetadata",
            Self::InvalidResourcesOperator => "InvalidResourcesOperator",
            Self::Refused => "Refused",
            Self::PolicyRefused => "PolicyRefused",
            Self::ImagePullFailed => "ImagePullFailed",
            Self::ServerCrashLooping => "ServerCrashLooping",
            Self::ServerFailing => "ServerFailing",
            Self::CrashLooping => "CrashLooping",
            Self::Failing => "Failing",
            Self::Unschedulable => "Unschedulable",
            Self::CertificateAuthorityMissing => "CertificateAuthorityMissing",
            Self::TransportEncryptionChange => "TransportEncryptionChange",
            Self::ObjectNotOwned => "ObjectNotOwned",
            Self::ReferenceNotAllowed => "ReferenceNotAllowed",
            Self::VersionDowngrade => "VersionDowngrade",
            Self::InvalidSites => "InvalidSites",
        }
    }

    /// The reason of that name, if it is one.
    pub fn parse(reason: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == reason)
    }

    /// Whether the pods say it (`Ready` or `ResourcesOperatorReady`), not the cluster operator
    /// (`Degraded`).
    pub const fn is_pod_problem(self) -> bool {
        matches!(
            self,
            Self::ImagePullFailed
                | Self::ServerCrashLooping
                | Self::ServerFailing
                | Self::CrashLooping
                | Self::Failing
                | Self::Unschedulable
        )
    }

    /// Whether the problem can go away without a change of the CR: something it references (a
    /// Secret, a ConfigMap) or something outside it (an admission policy that refused an
    /// object) may change. The others need a new spec (or new operator settings, which
    /// restart the operator).
    pub const fn may_clear_by_itself(self) -> bool {
        matches!(
            self,
            Self::MissingSecret
                | Self::MissingConfigMap
                | Self::InvalidIdentities
                | Self::InvalidConfigOverlay
                | Self::InvalidTlsSecret
                | Self::InvalidCredentialStore
                | Self::Refused
                | Self::CertificateAuthorityMissing
                | Self::ObjectNotOwned
                | Self::ReferenceNotAllowed
        ) || self.is_pod_problem()
    }
}

impl fmt::Display for ProblemReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for ProblemReason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A condition, stamped with `now` as its `lastTransitionTime` (which [`set_condition`] keeps
/// from the existing condition when the status did not change).
pub fn new_condition(
    type_: ConditionType,
    status: ConditionStatus,
    reason: &str,
    message: impl Into<String>,
    observed_generation: Option<i64>,
    now: Time,
) -> Condition {
    Condition {
        type_: type_.as_str().to_string(),
        status: status.as_str().to_string(),
        reason: reason.to_string(),
        message: message.into(),
        observed_generation,
        last_transition_time: now,
    }
}

/// Puts `new` into `conditions`, replacing the condition of the same type. `lastTransitionTime`
/// moves only when the status changes: when it stays, the existing time is kept and only reason,
/// message and observedGeneration are updated. Returns whether anything changed, so that callers
/// write status only on a real change.
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == new.type_) else {
        conditions.push(new);
        return true;
    };
    if existing.status != new.status {
        *existing = new;
        return true;
    }
    let Condition {
        type_: _,
        status: _,
        last_transition_time: _,
        reason,
        message,
        observed_generation,
    } = new;
    let changed = existing.reason != reason
        || existing.message != message
        || existing.observed_generation != observed_generation;
    if changed {
        existing.reason = reason;
        existing.message = message;
        existing.observed_generation = observed_generation;
    }
    changed
}

/// Removes the condition of that type; returns whether there was one.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: ConditionType) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_.as_str());
    conditions.len() != before
}

/// The condition of that type, if present.
pub fn find_condition(conditions: &[Condition], type_: ConditionType) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == type_.as_str())
}

/// Whether the condition of that type is present with status `True`.
pub fn is_condition_true(conditions: &[Condition], type_: ConditionType) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == ConditionStatus::True.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_reasons_read_back_and_split_pods_from_the_operator() {
        for reason in ProblemReason::ALL {
            assert_eq!(ProblemReason::parse(reason.as_str()), Some(reason));
            assert_eq!(reason.to_string(), reason.as_str());
        }
        assert_eq!(ProblemReason::parse("AllReplicasReady"), None);
        let pods: Vec<_> = ProblemReason::ALL
            .into_iter()
            .filter(|r| r.is_pod_problem())
            .map(ProblemReason::as_str)
            .collect();
        assert_eq!(
            pods,
            [
                "ImagePullFailed",
                "ServerCrashLooping",
                "ServerFailing",
                "CrashLooping",
                "Failing",
                "Unschedulable"
            ]
        );
        assert!(ProblemReason::MissingSecret.may_clear_by_itself());
        // Fixed in the Secret, which the operator does not watch: retried.
        assert!(ProblemReason::InvalidCredentialStore.may_clear_by_itself());
        assert!(!ProblemReason::UnsupportedVersion.may_clear_by_itself());
    }
    use k8s_openapi::jiff::Timestamp;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).expect("valid timestamp"))
    }

    fn ready(status: bool, reason: Reason, message: &str, generation: i64, time: i64) -> Condition {
        new_condition(
            ConditionType::Ready,
            status.into(),
            reason.as_str(),
            message,
            Some(generation),
            at(time),
        )
    }

    #[test]
    fn adds_a_missing_condition() {
        let mut conditions = Vec::new();
        assert!(set_condition(
            &mut conditions,
            ready(true, Reason::Synced, "", 1, 10)
        ));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, at(10));
    }

    #[test]
    fn same_condition_again_changes_nothing() {
        let mut conditions = vec![ready(true, Reason::Synced, "ok", 1, 10)];
        assert!(!set_condition(
            &mut conditions,
            ready(true, Reason::Synced, "ok", 1, 20)
        ));
        assert_eq!(conditions, vec![ready(true, Reason::Synced, "ok", 1, 10)]);
    }

    #[test]
    fn status_change_moves_the_transition_time() {
        let mut conditions = vec![ready(true, Reason::Synced, "", 1, 10)];
        assert!(set_condition(
            &mut conditions,
            ready(false, Reason::Rejected, "no", 2, 20)
        ));
        assert_eq!(
            conditions,
            vec![ready(false, Reason::Rejected, "no", 2, 20)]
        );
    }

    #[test]
    fn reason_message_or_generation_change_keeps_the_transition_time() {
        let mut conditions = vec![ready(false, Reason::Pending, "", 1, 10)];
        assert!(set_condition(
            &mut conditions,
            ready(false, Reason::DependencyMissing, "t", 1, 20)
        ));
        assert_eq!(
            conditions,
            vec![ready(false, Reason::DependencyMissing, "t", 1, 10)]
        );
        assert!(set_condition(
            &mut conditions,
            ready(false, Reason::DependencyMissing, "t", 2, 30)
        ));
        assert_eq!(
            conditions,
            vec![ready(false, Reason::DependencyMissing, "t", 2, 10)]
        );
    }

    #[test]
    fn other_types_are_left_alone() {
        let paused = new_condition(
            ConditionType::ReconciliationPaused,
            ConditionStatus::True,
            "Paused",
            "",
            Some(1),
            at(5),
        );
        let mut conditions = vec![paused.clone(), ready(true, Reason::Synced, "", 1, 10)];
        assert!(set_condition(
            &mut conditions,
            ready(false, Reason::Conflict, "", 1, 20)
        ));
        assert_eq!(conditions[0], paused);
        assert!(!is_condition_true(&conditions, ConditionType::Ready));
        assert!(is_condition_true(
            &conditions,
            ConditionType::ReconciliationPaused
        ));
        assert!(remove_condition(
            &mut conditions,
            ConditionType::ReconciliationPaused
        ));
        assert!(!remove_condition(
            &mut conditions,
            ConditionType::ReconciliationPaused
        ));
        assert_eq!(conditions.len(), 1);
    }

    #[test]
    fn reasons_round_trip() {
        for reason in Reason::ALL {
            assert_eq!(Reason::parse(reason.as_str()), Some(reason));
        }
        assert_eq!(Reason::parse("Paused"), None);
        assert_eq!(ConditionType::ALL.len(), 9);
    }
}
