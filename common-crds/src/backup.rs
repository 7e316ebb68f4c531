//! `Backup` (v2alpha1): a backup archive of a cluster's resources and data, taken by the cluster
//! operator.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::SelectedResources;

/// A backup of an Infinispan cluster.
// Clippy reads the repeated `type_ = "..."` of kube's `printcolumn(...)` as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "infinispan.org",
    version = "v2alpha1",
    kind = "Backup",
    namespaced,
    shortname = "ispnbackup",
    category = "infinispan-all",
    status = "BackupStatus",
    derive = "PartialEq",
    doc = "A backup archive of an Infinispan cluster's resources and data, taken once by the cluster operator. The spec cannot change after creation: create another Backup instead.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.cluster",
        description = "Infinispan cluster backed up"
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
#[x_kube(validation = Rule::new("self == oldSelf").message("the spec of a Backup cannot change: create another Backup"))]
pub struct BackupSpec {
    /// Name of the Infinispan CR (same namespace) to back up.
    #[schemars(length(min = 1, max = 253))]
    pub cluster: String,

    /// What to back up; absent means everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<SelectedResources>,
}

/// Progress of a Backup or Restore.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Accepted, not started.
    Pending,
    /// Under way.
    Running,
    /// Finished successfully.
    Succeeded,
    /// Finished unsuccessfully; the conditions say why.
    Failed,
}

/// Observed state of a Backup, written by the cluster operator.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct BackupStatus {
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

    /// Where the archive is: `<cluster>:<server backup job>` (it stays on the server of the
    /// cluster backed up, on the node that took it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,

    /// When the backup started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the backup finished (successfully or not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
}
