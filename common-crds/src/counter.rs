//! `Counter` (v2alpha1): a clustered counter on the server.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    ResourceSpecCommon, ResourceStatus, UpdateStrategy, Updates, impl_server_resource,
};
use crate::kind::ResourceKind;

/// A clustered counter on an Infinispan server. Bounds are for strong counters only,
/// concurrencyLevel for weak ones only; lowerBound must be less than upperBound and the initial
/// value within the bounds, inclusive.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "infinispan.org",
    version = "v2alpha1",
    kind = "Counter",
    namespaced,
    shortname = "ispncounter",
    category = "infinispan-all",
    status = "ResourceStatus",
    derive = "PartialEq",
    doc = "A clustered counter on the Infinispan server of the cluster named by the label infinispan.org/cluster (required). Counters are immutable on the server: a change needs updates.strategy recreate, which resets the value. The spec is the counter's definition, never its current value.",
    validation = crate::common::spec_name_immutable_rule(ResourceKind::Counter),
    printcolumn(name = "Cluster", type_ = "string", json_path = ".metadata.labels.infinispan\\.org/cluster", description = "Infinispan cluster (label infinispan.org/cluster)"),
    printcolumn(name = "Server-Name", type_ = "string", json_path = ".status.serverName", description = "Name on the server"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status", description = "Whether the CR and the server agree"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].reason", description = "Why the CR is (not) ready"),
    printcolumn(name = "Origin", type_ = "string", json_path = ".status.origin", description = "kubernetes: created as a CR; server: mirrored from the server"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
// The rules refuse at admission what the server would refuse later: equal bounds (ISPN029524)
// and an initial value outside the bounds (ISPN029508). `type` and `initialValue` are defaulted
// before validation; the rules still read them with `has` so that they hold on raw objects.
#[x_kube(
    validation = Rule::new("(!has(self.lowerBound) && !has(self.upperBound)) || !has(self.type) || self.type == 'strong'")
        .message("lowerBound and upperBound are only allowed when type is strong (weak counters are unbounded)"),
    validation = Rule::new("!has(self.lifespan) || !has(self.type) || self.type == 'strong'")
        .message("lifespan is only allowed when type is strong"),
    validation = Rule::new("!has(self.concurrencyLevel) || (has(self.type) && self.type == 'weak')")
        .message("concurrencyLevel is only allowed when type is weak"),
    validation = Rule::new("!has(self.lowerBound) || !has(self.upperBound) || self.lowerBound < self.upperBound")
        .message("lowerBound must be less than upperBound (the server refuses equal bounds)"),
    validation = Rule::new("!has(self.lowerBound) || (has(self.initialValue) ? self.initialValue : 0) >= self.lowerBound")
        .message("initialValue must not be less than lowerBound (initialValue defaults to 0)"),
    validation = Rule::new("!has(self.upperBound) || (has(self.initialValue) ? self.initialValue : 0) <= self.upperBound")
        .message("initialValue must not be greater than upperBound (initialValue defaults to 0)")
)]
pub struct CounterSpec {
    #[serde(flatten)]
    pub common: ResourceSpecCommon,

    /// strong (default): one value for the whole cluster, optionally bounded; weak: faster
    /// updates, the value is eventually consistent and unbounded.
    #[serde(default, rename = "type")]
    pub type_: CounterType,

    /// Value of the counter when created (and when reset); default 0. Within the bounds when
    /// they are set.
    #[serde(default)]
    pub initial_value: i64,

    /// Volatile (default): the value is lost when the cluster stops; Persistent: it is kept.
    #[serde(default)]
    pub storage: CounterStorage,

    /// Smallest value of a strong counter (inclusive); strong counters only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<i64>,

    /// Largest value of a strong counter (inclusive); strong counters only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_bound: Option<i64>,

    /// Milliseconds after which a strong counter's value expires and reads as its initial
    /// value again; strong counters only; unset: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub lifespan: Option<i64>,

    /// Number of concurrent updates a weak counter allows; weak counters only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub concurrency_level: Option<i32>,

    /// How changes are handled: counters cannot change on the server, only be recreated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updates: Option<Updates>,
}

impl_server_resource!(Counter => ResourceKind::Counter);

impl CounterSpec {
    /// `updates.strategy`, defaulted.
    pub fn update_strategy(&self) -> UpdateStrategy {
        self.updates
            .as_ref()
            .map(|u| u.strategy)
            .unwrap_or_default()
    }
}

/// Consistency of a counter.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum CounterType {
    /// One value for the whole cluster, optionally bounded.
    #[default]
    Strong,
    /// Eventually consistent, unbounded, faster updates.
    Weak,
}

/// Whether a counter's value survives a cluster restart.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CounterStorage {
    /// Lost when the cluster stops.
    #[default]
    Volatile,
    /// Kept across restarts.
    Persistent,
}
