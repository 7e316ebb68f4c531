//! `metadata` of every kind: name, namespace, labels and annotations are kept; what the API
//! server or the other operator wrote is omitted.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::fields::{FieldError, Fields};
use super::report::Log;

/// Metadata the API server writes: a manifest to create an object does not carry them.
const SERVER_SET: [&str; 10] = [
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "finalizers",
    "ownerReferences",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// kubectl's copy of the last applied manifest (of the other operator's object).
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Takes `metadata` from the root `fields`. `ignored_annotations` are annotations the other
/// operator read that mean nothing here, each dropped with its reason.
pub fn convert(
    root: &mut Fields,
    log: &mut Log,
    ignored_annotations: &[(&str, &str)],
) -> Result<ObjectMeta, FieldError> {
    let Some(mut fields) = root.take_object("metadata")? else {
        return Err(FieldError::new(
            "metadata",
            "missing: the object has no name",
        ));
    };
    let name: Option<String> = fields.take_as("name")?;
    let Some(name) = name.filter(|name| !name.is_empty()) else {
        return Err(FieldError::new("metadata.name", "missing"));
    };
    log.mapped("metadata.name", "");
    let namespace: Option<String> = fields.take_as("namespace")?;
    if namespace.is_some() {
        log.mapped("metadata.namespace", "");
    }
    let labels: Option<BTreeMap<String, String>> = fields.take_as("labels")?;
    if labels.as_ref().is_some_and(|labels| !labels.is_empty()) {
        log.mapped("metadata.labels", "");
    }
    let mut annotations: BTreeMap<String, String> =
        fields.take_as("annotations")?.unwrap_or_default();
    if annotations.remove(LAST_APPLIED).is_some() {
        log.omitted(
            &format!("metadata.annotations.{LAST_APPLIED}"),
            "kubectl's record of the other operator's object",
        );
    }
    for (annotation, reason) in ignored_annotations {
        if let Some(value) = annotations.remove(*annotation) {
            log.dropped(
                &format!("metadata.annotations.{annotation}"),
                &serde_json::Value::String(value),
                reason,
            );
        }
    }
    if !annotations.is_empty() {
        log.mapped("metadata.annotations", "");
    }
    for key in SERVER_SET {
        log.omit_field(
            &mut fields,
            key,
            "set by the API server or the other operator",
        );
    }
    log.unknown(fields);
    Ok(ObjectMeta {
        name: Some(name),
        namespace,
        labels: labels.filter(|labels| !labels.is_empty()),
        annotations: Some(annotations).filter(|annotations| !annotations.is_empty()),
        ..ObjectMeta::default()
    })
}

/// Takes `status`: the other operator's, omitted.
pub fn omit_status(root: &mut Fields, log: &mut Log) {
    log.omit_field(root, "status", "written by the other operator");
}

/// Takes `apiVersion` and `kind` (already read by the caller).
pub fn take_type(root: &mut Fields) {
    root.take("apiVersion");
    root.take("kind");
}
