//! `Restore` (v2alpha1): restores a Backup's archive into a cluster.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::backup::Phase;
use crate::common::SelectedResources;

/// A restore of a Backup into an Infinispan cluster.
// Clippy reads the repeated `type_ = "..."` of kube's `printcolumn(...)` as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "infinispan.org",
    version = "v2alpha1",
    kind = "Restore",
    namespaced,
    shortname = "ispnrestore",
    category = "infinispan-all",
    status = "RestoreStatus",
    derive = "PartialEq",
    doc = "Restores the archive of a Backup into an Infinispan cluster, once, by the cluster operator. CRs recreate what the restored server lacks; no CR is deleted. The spec cannot change after creation: create another Restore instead.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.cluster",
        description = "Infinispan cluster restored into"
    ),
    printcolumn(
        name = "Backup",
        type_ = "string",
        json_path = ".spec.backup",
        description = "Backup restored"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Pending, Running, Succeeded or Failed"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
#[x_kube(validation = Rule::new("self == oldSelf").message("the spec of a Restore cannot change: create another Restore"))]
pub struct RestoreSpec {
    /// Name of the Infinispan CR (same namespace) to restore into.
    #[schemars(length(min = 1, max = 253))]
    pub cluster: String,

    /// Name of the Backup CR (same namespace) whose archive to restore.
    #[schemars(length(min = 1, max = 253))]
    pub backup: String,

    /// What to restore from the archive; absent means everything in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<SelectedResources>,
}

/// Observed state of a Restore, written by the cluster operator.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct RestoreStatus {
    /// Pending, Running, Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,

    /// Complete and Failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// The metadata.generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// The archive restored: `<cluster>:<server backup job>` of its Backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,

    /// When the restore started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the restore finished (successfully or not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
}
