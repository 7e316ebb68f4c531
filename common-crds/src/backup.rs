//! `Backup` (v2alpha1): a backup archive of a cluster's resources and data, taken by the cluster
//! operator.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{DeletionPolicy, SelectedResources};

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

    /// Where the archive is kept: `Volume` (default) or `ServerNode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 16))]
    pub storage: Option<BackupStorage>,

    /// The PersistentVolumeClaim of `storage: Volume` (infinispan-operator's field): its size
    /// and StorageClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<BackupVolume>,

    /// What happens to the archive when the Backup is deleted: `Delete` (default) deletes it
    /// (its PersistentVolumeClaim, or the file on the server), `Retain` keeps the
    /// PersistentVolumeClaim (a Restore can still name it in `spec.source`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 16))]
    pub deletion_policy: Option<DeletionPolicy>,
}

impl BackupSpec {
    /// Where the archive is kept (the default filled in).
    pub fn storage(&self) -> BackupStorage {
        self.storage.unwrap_or_default()
    }

    /// Whether deleting the Backup deletes its archive.
    pub fn deletes_archive(&self) -> bool {
        self.deletion_policy.unwrap_or_default() == DeletionPolicy::Delete
    }
}

/// Where a Backup's archive is kept.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackupStorage {
    /// A PersistentVolumeClaim of the Backup's own, named like it, holding
    /// `<name>/<name>.zip` (infinispan-operator's layout): it outlives the cluster's pods and
    /// the cluster itself. The archive is copied there by a Job once the server has written it.
    #[default]
    Volume,
    /// The data volume of the server pod that took the backup (pod 0), reachable over REST
    /// until that pod restarts: a copy into another cluster right away, with no extra volume
    /// or pod.
    ServerNode,
}

/// The PersistentVolumeClaim that keeps a Backup's archive.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct BackupVolume {
    /// Its size (default 1Gi): room for the archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<Quantity>,

    /// Its StorageClass; absent means the cluster's default class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub storage_class_name: Option<String>,
}

/// Where an archive is on a PersistentVolumeClaim.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct ArchiveVolume {
    /// The PersistentVolumeClaim.
    pub claim_name: String,

    /// The archive's path inside the volume.
    pub path: String,

    /// The archive's size in bytes, once written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,

    /// The archive's SHA-256 (hex), once written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
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

    /// Where the archive is, for people: `pvc/<claim>:<path>` (`storage: Volume`), or
    /// `<cluster>:<server backup job>` (`storage: ServerNode`: on the server of the cluster
    /// backed up, on the node that took it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,

    /// The archive's PersistentVolumeClaim and path (`storage: Volume`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<ArchiveVolume>,

    /// When the backup started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the backup finished (successfully or not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
}
