//! `Template` (v2alpha1): a cache configuration template on the server.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    ResourceSpecCommon, ResourceStatus, UpdateStrategy, Updates, impl_server_resource,
};
use crate::kind::ResourceKind;

/// A cache configuration template on an Infinispan server.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "infinispan.org",
    version = "v2alpha1",
    kind = "Template",
    namespaced,
    shortname = "ispntemplate",
    category = "infinispan-all",
    status = "ResourceStatus",
    derive = "PartialEq",
    doc = "A cache configuration template on the Infinispan server of the cluster named by the label infinispan.org/cluster (required); caches refer to it by spec.templateName. Templates are immutable on the server: a change needs updates.strategy recreate, and a template is not recreated while caches use it.",
    validation = crate::common::spec_name_immutable_rule(ResourceKind::Template),
    printcolumn(name = "Cluster", type_ = "string", json_path = ".metadata.labels.infinispan\\.org/cluster", description = "Infinispan cluster (label infinispan.org/cluster)"),
    printcolumn(name = "Server-Name", type_ = "string", json_path = ".status.serverName", description = "Name on the server"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status", description = "Whether the CR and the server agree"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].reason", description = "Why the CR is (not) ready"),
    printcolumn(name = "Origin", type_ = "string", json_path = ".status.origin", description = "kubernetes: created as a CR; server: mirrored from the server"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct TemplateSpec {
    #[serde(flatten)]
    pub common: ResourceSpecCommon,

    /// The template's configuration: a JSON, YAML or XML document as the server accepts it. The
    /// format is kept when the template is written back from the server.
    #[schemars(length(min = 1, max = 1048576))]
    pub template: String,

    /// How changes the server cannot apply in place are handled (templates can only be
    /// recreated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updates: Option<Updates>,
}

impl_server_resource!(Template => ResourceKind::Template);

impl TemplateSpec {
    /// `updates.strategy`, defaulted.
    pub fn update_strategy(&self) -> UpdateStrategy {
        self.updates
            .as_ref()
            .map(|u| u.strategy)
            .unwrap_or_default()
    }
}
