//! `Batch` (v2alpha1, infinispan-operator's kind): an Infinispan CLI script run once against a
//! cluster, as a Job of the cluster operator.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A CLI script run against a cluster.
// Clippy reads the repeated `type_ = "..."` of kube's `printcolumn(...)` as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "infinispan.org",
    version = "v2alpha1",
    kind = "Batch",
    namespaced,
    shortname = "ispnbatch",
    category = "infinispan-all",
    status = "BatchStatus",
    derive = "PartialEq",
    doc = "An Infinispan CLI script (infinispan-operator's Batch) run once against a cluster by a Job of the cluster operator, as the operators' user. The spec cannot change after creation: create another Batch instead.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.cluster",
        description = "Infinispan cluster the script runs against"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Initializing, Initialized, Running, Succeeded or Failed"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
#[x_kube(
    validation = Rule::new("self == oldSelf").message("the spec of a Batch cannot change: create another Batch"),
    validation = Rule::new("has(self.config) != has(self.configMap)").message("a Batch needs exactly one of spec.config (the script) and spec.configMap (a ConfigMap with the script in its key batch)")
)]
pub struct BatchSpec {
    /// Name of the Infinispan CR (same namespace) the script runs against.
    #[schemars(length(min = 1, max = 253))]
    pub cluster: String,

    /// The script: CLI commands, one a line (`create cache ...`, `create counter ...`,
    /// `put ...`); `connect` is done for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 262144))]
    pub config: Option<String>,

    /// A ConfigMap (same namespace, annotated infinispan.org/allow-clusters for the cluster)
    /// whose key `batch` is the script; its other keys are files beside it (e.g. a cache
    /// configuration that `create cache --file=` names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub config_map: Option<String>,
}

/// Progress of a Batch (infinispan-operator's phases).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchPhase {
    /// Waiting for the cluster or the script.
    Initializing,
    /// Its Job is created.
    Initialized,
    /// The script runs.
    Running,
    /// Every command ran without an error.
    Succeeded,
    /// A command failed, or the script could not run; `reason` says which.
    Failed,
}

/// Observed state of a Batch, written by the cluster operator.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct BatchStatus {
    /// Initializing, Initialized, Running, Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<BatchPhase>,

    /// Why it waits or failed: the CLI's error lines when a command failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// The uid of the cluster it ran against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_uid: Option<String>,

    /// Its Job (`kubectl logs job/<job>` shows the CLI's output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,

    /// When the Job finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
}

impl BatchPhase {
    /// Succeeded or Failed: nothing more happens.
    pub fn finished(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}
