//! `Schema` (v2alpha1): a Protobuf schema registered on the server.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{ResourceSpecCommon, ResourceStatus, impl_server_resource};
use crate::kind::ResourceKind;

/// A Protobuf schema on an Infinispan server.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "infinispan.org",
    version = "v2alpha1",
    kind = "Schema",
    namespaced,
    shortname = "ispnschema",
    category = "infinispan-all",
    status = "ResourceStatus",
    derive = "PartialEq",
    doc = "A Protobuf schema on the Infinispan server of the cluster named by the label infinispan.org/cluster (required). Its server name always ends in .proto: the server appends it to names that lack it.",
    validation = crate::common::spec_name_immutable_rule(ResourceKind::Schema),
    printcolumn(name = "Cluster", type_ = "string", json_path = ".metadata.labels.infinispan\\.org/cluster", description = "Infinispan cluster (label infinispan.org/cluster)"),
    printcolumn(name = "Server-Name", type_ = "string", json_path = ".status.serverName", description = "Name on the server"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status", description = "Whether the CR and the server agree"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].reason", description = "Why the CR is (not) ready"),
    printcolumn(name = "Origin", type_ = "string", json_path = ".status.origin", description = "kubernetes: created as a CR; server: mirrored from the server"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct SchemaSpec {
    #[serde(flatten)]
    pub common: ResourceSpecCommon,

    /// The Protobuf schema (.proto file text).
    #[schemars(length(min = 1, max = 1048576))]
    pub schema: String,
}

impl_server_resource!(Schema => ResourceKind::Schema);
