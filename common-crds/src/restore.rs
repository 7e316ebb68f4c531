//! `Restore` (v2alpha1): restores a Backup's archive into a cluster.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::backup::{ArchiveVolume, Phase};
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
        description = "Backup restored (or spec.source)"
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
#[x_kube(validation = Rule::new("has(self.backup) != has(self.source)").message("a Restore names either spec.backup (a Backup CR) or spec.source (an archive on a PersistentVolumeClaim), not both"))]
pub struct RestoreSpec {
    /// Name of the Infinispan CR (same namespace) to restore into.
    #[schemars(length(min = 1, max = 253))]
    pub cluster: String,

    /// Name of the Backup CR (same namespace) whose archive to restore; or `source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub backup: Option<String>,

    /// An archive on a PersistentVolumeClaim of the namespace, instead of a Backup: one that
    /// infinispan-operator's Backup left (its layout, `<name>/<name>.zip` on the claim `<name>`),
    /// or a retained Backup's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<RestoreSource>,

    /// What to restore from the archive; absent means everything in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<SelectedResources>,
}

/// An archive on a PersistentVolumeClaim.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct RestoreSource {
    /// The PersistentVolumeClaim (same namespace).
    #[schemars(length(min = 1, max = 253))]
    pub persistent_volume_claim: String,

    /// The archive's path inside the volume; default `<claim>/<claim>.zip`
    /// (infinispan-operator's layout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub path: Option<String>,
}

impl RestoreSource {
    /// The archive's path inside the volume (the default filled in).
    pub fn archive_path(&self) -> String {
        self.path.clone().unwrap_or_else(|| {
            let claim = &self.persistent_volume_claim;
            format!("{claim}/{claim}.zip")
        })
    }
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

    /// The archive restored, for people: `pvc/<claim>:<path>`, or `<cluster>:<server backup
    /// job>` of its Backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,

    /// The archive's PersistentVolumeClaim and path, when it came from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<ArchiveVolume>,

    /// When the restore started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the restore finished (successfully or not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
}
