//! Spec and status pieces shared by the resource kinds (Cache, Template, Counter, Schema, Task),
//! and by Backup and Restore.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::KubeSchema;
use kube::core::Rule;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::kind::ResourceKind;

/// Longest server-side name (`spec.name`) of a resource.
pub const MAX_SERVER_NAME_LEN: usize = 255;

/// Longest configuration document, schema or script a CR may carry (1 MiB; etcd refuses objects
/// above 1.5 MiB anyway).
pub const MAX_DOCUMENT_LEN: usize = 1024 * 1024;

/// What happens on the server when the CR is deleted.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeletionPolicy {
    /// Delete the server object with the CR.
    #[default]
    Delete,
    /// Keep the server object; only the CR goes.
    Retain,
}

/// What to do with a change the server can only apply by recreating the object.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum UpdateStrategy {
    /// Keep the server object as it is and report `Ready=False, reason=Immutable`.
    #[default]
    Retain,
    /// Delete and recreate the server object with the new configuration (its data is lost).
    Recreate,
}

/// How changes that the server cannot apply in place are handled.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct Updates {
    /// `retain` (default): a change the server cannot apply in place is not applied and the CR
    /// reports `Ready=False` with reason `Immutable`. `recreate`: the server object is deleted
    /// and created again with the new configuration; its data is lost.
    #[serde(default)]
    pub strategy: UpdateStrategy,
}

/// The spec fields every resource kind has.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct ResourceSpecCommon {
    /// Name of the object on the Infinispan server; defaults to metadata.name (use it for names
    /// Kubernetes does not accept, such as upper case or '/'). Schemas get '.proto' appended
    /// when it is missing, as the server does. Once set it cannot change: the server object
    /// cannot be renamed. It may be added later only with the value metadata.name, the name the
    /// object already has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    pub name: Option<String>,

    /// What happens to the server object when this CR is deleted: Delete (default) deletes it,
    /// Retain leaves it on the server.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// What both sides agreed on at the last sync (design "The outcome table"), written by the
/// resources operator together with the change that made it true.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct LastSynced {
    /// Digest of the normalised server object at the last sync.
    pub digest: String,
    /// metadata.generation of the CR at the last sync.
    pub generation: i64,
    /// The server epoch (identity of the server's state) at the last sync; a different epoch
    /// means the server lost or replaced its state since.
    pub epoch: String,
}

/// Status of a resource CR, written by the resources operator.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct ResourceStatus {
    /// The metadata.generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Name of the object on the server this CR stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,

    /// Where the object was made first: `kubernetes` (created as a CR) or `server` (mirrored
    /// from the server); the label `infinispan.org/origin` says the same for mirror CRs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,

    /// Ready (with a reason from a fixed list: Synced, Pending, Rejected, Immutable,
    /// DependencyMissing, Conflict, ClusterNotFound, ServerUnavailable, Unsupported, SchemaError,
    /// ReadOnlyMode, Unmanaged, WriteLoop) and ReconciliationPaused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// What the CR and the server agreed on at the last sync; used by the resources operator to
    /// tell which side changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_synced: Option<LastSynced>,
}

/// Which resources a Backup or Restore covers. A kind left out is covered entirely; a kind
/// listed covers the names listed ("*" means all of that kind, an empty list none of it).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct SelectedResources {
    /// Server names of caches; absent means all, "*" means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1000), inner(length(min = 1, max = 255)))]
    pub caches: Option<Vec<String>>,
    /// Server names of templates; absent means all, "*" means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1000), inner(length(min = 1, max = 255)))]
    pub templates: Option<Vec<String>>,
    /// Server names of counters; absent means all, "*" means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1000), inner(length(min = 1, max = 255)))]
    pub counters: Option<Vec<String>>,
    /// Server names of Protobuf schemas; absent means all, "*" means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1000), inner(length(min = 1, max = 255)))]
    pub schemas: Option<Vec<String>>,
    /// Server names of tasks; absent means all, "*" means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1000), inner(length(min = 1, max = 255)))]
    pub tasks: Option<Vec<String>>,
}

/// Message of the rule of [`spec_name_immutable_rule`].
pub const SPEC_NAME_IMMUTABLE_MESSAGE: &str =
    "spec.name is immutable once set: the server object cannot be renamed";

/// The CEL transition rule, on the root of a resource kind's schema, that makes `spec.name`
/// immutable once set (design "common spec").
///
/// A rule on `spec.name` itself would be skipped whenever the field is absent (so removing it
/// would pass), hence a rule on the root, which may also read `metadata.name`: once the old
/// object had `spec.name`, the new one must have the same; when it had none (the server name was
/// metadata.name), `spec.name` may only be added with the value metadata.name. For schemas the
/// names are compared as the server sees them, with '.proto' appended when missing.
pub fn spec_name_immutable_rule(kind: ResourceKind) -> Rule {
    let same = |a: &str, b: &str| match kind {
        ResourceKind::Schema => format!("{} == {}", proto(a), proto(b)),
        ResourceKind::Cache
        | ResourceKind::Template
        | ResourceKind::Counter
        | ResourceKind::Task => {
            format!("{a} == {b}")
        }
    };
    Rule::new(format!(
        "has(oldSelf.spec.name) ? (has(self.spec.name) && {}) : (!has(self.spec.name) || {})",
        same("self.spec.name", "oldSelf.spec.name"),
        same("self.spec.name", "self.metadata.name"),
    ))
    .message(SPEC_NAME_IMMUTABLE_MESSAGE)
    .field_path(".spec.name")
}

/// CEL: `name` with '.proto' appended unless it ends with it.
fn proto(name: &str) -> String {
    format!("({name}.endsWith('.proto') ? {name} : {name} + '.proto')")
}

/// What the five resource kinds (Cache, Template, Counter, Schema, Task) have in common, for code
/// generic over the kind.
pub trait ServerResource: kube::Resource<DynamicType = ()> {
    /// Which kind this is.
    const KIND: ResourceKind;

    /// The spec fields every resource kind has.
    fn spec_common(&self) -> &ResourceSpecCommon;

    /// The status, when written.
    fn resource_status(&self) -> Option<&ResourceStatus>;

    /// Name of the server object this CR stands for (design N1): `spec.name`, else
    /// `metadata.name`; for schemas with '.proto' appended when missing. `None` only for an
    /// object without a name (one not read from the API server).
    fn server_name(&self) -> Option<String> {
        let metadata_name = self.meta().name.as_deref()?;
        Some(crate::naming::server_name(
            Self::KIND,
            self.spec_common().name.as_deref(),
            metadata_name,
        ))
    }
}

/// `impl ServerResource for $cr` as `$kind`, for a CRD type with `spec.common` and `status`
/// (each kind's file says it of its own type).
macro_rules! impl_server_resource {
    ($cr:ty => $kind:expr) => {
        impl $crate::common::ServerResource for $cr {
            const KIND: $crate::kind::ResourceKind = $kind;

            fn spec_common(&self) -> &$crate::common::ResourceSpecCommon {
                &self.spec.common
            }

            fn resource_status(&self) -> Option<&$crate::common::ResourceStatus> {
                self.status.as_ref()
            }
        }
    };
}
pub(crate) use impl_server_resource;

/// Schema transform for the types of this crate: Rust doc comments keep their line breaks in
/// schemars' descriptions, which `kubectl explain` would show as ragged lines. This joins the
/// lines of each paragraph (paragraphs stay separated by a blank line) in the description of the
/// type and of its own properties; nested types of this crate do the same for theirs, while the
/// descriptions of Kubernetes types (inlined below) are left as upstream wrote them.
pub(crate) fn unwrap_doc_lines(schema: &mut schemars::Schema) {
    fn unwrap(value: &mut serde_json::Value) {
        if let Some(serde_json::Value::String(text)) = value.get_mut("description") {
            *text = text
                .split("\n\n")
                .map(|paragraph| {
                    paragraph
                        .lines()
                        .map(str::trim)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect::<Vec<_>>()
                .join("\n\n");
        }
    }
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if let Some(properties) = object.get_mut("properties").and_then(|p| p.as_object_mut()) {
        properties.values_mut().for_each(unwrap);
    }
    let mut whole = serde_json::Value::Object(std::mem::take(object));
    unwrap(&mut whole);
    if let serde_json::Value::Object(whole) = whole {
        *object = whole;
    }
}
