//! `Cache` (v2alpha1): a cache on the server of the cluster named by the `infinispan.org/cluster`
//! label.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::common::{
    ResourceSpecCommon, ResourceStatus, UpdateStrategy, Updates, impl_server_resource,
};
use crate::kind::ResourceKind;

/// Message of the rule that asks for exactly one of `template` and `templateName`.
pub const TEMPLATE_XOR_MESSAGE: &str =
    "exactly one of spec.template (a configuration document) or spec.templateName must be set";

/// A cache on an Infinispan server.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "infinispan.org",
    version = "v2alpha1",
    kind = "Cache",
    namespaced,
    shortname = "ispncache",
    category = "infinispan-all",
    status = "ResourceStatus",
    derive = "PartialEq",
    doc = "A cache on the Infinispan server of the cluster named by the label infinispan.org/cluster (required). Kept in sync in both directions by the cluster's resources operator: caches created on the server by any client appear as Cache CRs (label infinispan.org/origin=server).",
    validation = crate::common::spec_name_immutable_rule(ResourceKind::Cache),
    printcolumn(name = "Cluster", type_ = "string", json_path = ".metadata.labels.infinispan\\.org/cluster", description = "Infinispan cluster (label infinispan.org/cluster)"),
    printcolumn(name = "Server-Name", type_ = "string", json_path = ".status.serverName", description = "Name on the server"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status", description = "Whether the CR and the server agree"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].reason", description = "Why the CR is (not) ready"),
    printcolumn(name = "Origin", type_ = "string", json_path = ".status.origin", description = "kubernetes: created as a CR; server: mirrored from the server"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
#[x_kube(validation = Rule::new("has(self.template) != has(self.templateName)").message(crate::cache::TEMPLATE_XOR_MESSAGE))]
pub struct CacheSpec {
    #[serde(flatten)]
    pub common: ResourceSpecCommon,

    /// The cache configuration: a JSON, YAML or XML document as the server accepts it (for
    /// example "distributedCache: {mode: SYNC}"). The format is kept: a cache changed on the
    /// server is written back in the format of this document. Exactly one of template and
    /// templateName.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1048576))]
    pub template: Option<String>,

    /// Name of a cache template on the server (a Template CR's server name, or a built-in
    /// template such as org.infinispan.DIST_SYNC) to create the cache from. Exactly one of
    /// template and templateName.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    pub template_name: Option<String>,

    /// How changes the server cannot apply in place are handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updates: Option<Updates>,
}

impl_server_resource!(Cache => ResourceKind::Cache);

impl CacheSpec {
    /// `updates.strategy`, defaulted.
    pub fn update_strategy(&self) -> UpdateStrategy {
        self.updates
            .as_ref()
            .map(|u| u.strategy)
            .unwrap_or_default()
    }
}
