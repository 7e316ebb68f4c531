//! `Task` (v2alpha1): a server task (script).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{ResourceSpecCommon, ResourceStatus, impl_server_resource};
use crate::kind::ResourceKind;

/// A server task (a script) on an Infinispan server.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "infinispan.org",
    version = "v2alpha1",
    kind = "Task",
    namespaced,
    shortname = "ispntask",
    category = "infinispan-all",
    status = "ResourceStatus",
    derive = "PartialEq",
    doc = "A server task (script) on the Infinispan server of the cluster named by the label infinispan.org/cluster (required). The script's first line holds its options, e.g. // mode=local,language=javascript. The server has no task events and no task delete: the resources operator follows the server's script cache instead (its entry events, and deletes there).",
    validation = crate::common::spec_name_immutable_rule(ResourceKind::Task),
    printcolumn(name = "Cluster", type_ = "string", json_path = ".metadata.labels.infinispan\\.org/cluster", description = "Infinispan cluster (label infinispan.org/cluster)"),
    printcolumn(name = "Server-Name", type_ = "string", json_path = ".status.serverName", description = "Name on the server"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status", description = "Whether the CR and the server agree"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].reason", description = "Why the CR is (not) ready"),
    printcolumn(name = "Origin", type_ = "string", json_path = ".status.origin", description = "kubernetes: created as a CR; server: mirrored from the server"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct TaskSpec {
    #[serde(flatten)]
    pub common: ResourceSpecCommon,

    /// The script, with its leading metadata comment as the server expects it (for example
    /// "// mode=local,language=javascript").
    #[schemars(length(min = 1, max = 1048576))]
    pub script: String,
}

impl_server_resource!(Task => ResourceKind::Task);
