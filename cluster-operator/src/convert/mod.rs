//! `cluster-operator convert`: infinispan-operator manifests (`Infinispan` v1, `Cache`,
//! `Backup`, `Restore` and `Batch` v2alpha1) into this project's CRs, with a report of every
//! field: mapped as it was, changed on the way, dropped (no equivalent here) or omitted (written
//! by the API server or the other operator, or empty). `docs/migration.md`'s field tables are
//! the specification.
//!
//! Pure functions, no client: [`convert_documents`] takes parsed YAML documents and gives the
//! converted objects with one [`ObjectReport`] each. One module per kind ([`infinispan`],
//! [`cache`], [`backup`], [`restore`], [`batch`]) builds this project's typed CR, so the Rust
//! types check the shape of the output; `fields` hands out the input's fields one at a time so
//! that none goes unreported; [`command`] is the command line around it.

pub mod backup;
pub mod batch;
pub mod cache;
pub mod command;
mod fields;
pub mod infinispan;
mod metadata;
pub mod report;
pub mod restore;
mod selected;
mod sites;
mod tidy;

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::Value;

pub use fields::FieldError;
pub use report::{FieldReport, ObjectReport, Outcome, Report};

use fields::Fields;
use report::Log;

/// The API group of both operators.
const GROUP: &str = common_crds::labels::API_GROUP;

/// A converted object, ready to be written.
#[derive(Debug, Clone, PartialEq)]
pub enum Converted {
    Infinispan(Box<common_crds::Infinispan>),
    Cache(Box<common_crds::Cache>),
    Backup(Box<common_crds::Backup>),
    Restore(Box<common_crds::Restore>),
    Batch(Box<common_crds::Batch>),
    /// Not an object of infinispan-operator (a Secret, a ConfigMap, one of this project's own
    /// kinds): copied as it was.
    Unchanged(Value),
}

impl Converted {
    /// The object as JSON (what is written, as YAML).
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        fn value<T: Serialize>(object: &T) -> Result<Value, serde_json::Error> {
            serde_json::to_value(object)
        }
        match self {
            Converted::Infinispan(object) => value(object),
            Converted::Cache(object) => value(object),
            Converted::Backup(object) => value(object),
            Converted::Restore(object) => value(object),
            Converted::Batch(object) => value(object),
            Converted::Unchanged(object) => Ok(object.clone()),
        }
    }
}

/// One input document: where it came from (for messages) and its content.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// `FILE, document N` (or `stdin, document N`).
    pub source: String,
    pub value: Value,
}

/// The result of a conversion: the objects to write, in input order, and the report.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Conversion {
    pub objects: Vec<Converted>,
    /// Per object, the output paths the input set (kept in the output even when equal to a
    /// default).
    pub explicit: Vec<BTreeSet<String>>,
    pub report: Report,
}

/// Input the converter cannot read: not YAML, not an object, a field of the wrong type.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("{source_name}: not valid YAML: {message}")]
    Yaml {
        source_name: String,
        message: String,
    },
    #[error(
        "{source_name}: a document must be a Kubernetes object (a mapping with apiVersion and kind)"
    )]
    NotAnObject { source_name: String },
    #[error("{source_name}: {object}: {error}")]
    Field {
        source_name: String,
        object: String,
        #[source]
        error: FieldError,
    },
}

/// Parses `text` (multi-document YAML) into documents named after `source_name`. Empty
/// documents are skipped; a `List` (as `kubectl get -o yaml` writes) gives its items.
pub fn parse_documents(source_name: &str, text: &str) -> Result<Vec<Document>, ConvertError> {
    let values: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|error| ConvertError::Yaml {
            source_name: source_name.to_string(),
            message: error.to_string(),
        })?;
    let mut documents = Vec::new();
    for (index, value) in values.into_iter().enumerate() {
        let source = format!("{source_name}, document {}", index + 1);
        let is_list = value
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|kind| kind == "List" || kind.ends_with("List"))
            && value.get("items").is_some_and(Value::is_array);
        match value {
            Value::Object(mut map) if is_list => {
                let items = match map.remove("items") {
                    Some(Value::Array(items)) => items,
                    _ => Vec::new(),
                };
                for (item_index, item) in items.into_iter().enumerate() {
                    documents.push(Document {
                        source: format!("{source}, item {}", item_index + 1),
                        value: item,
                    });
                }
            }
            value => documents.push(Document { source, value }),
        }
    }
    Ok(documents)
}

/// Converts every document, in order.
pub fn convert_documents(documents: Vec<Document>) -> Result<Conversion, ConvertError> {
    let mut conversion = Conversion::default();
    for Document { source, value } in documents {
        let (converted, object_report) = convert_document(&source, value)?;
        if let Some(converted) = converted {
            conversion.objects.push(converted);
            conversion.explicit.push(
                object_report
                    .fields
                    .iter()
                    .filter_map(|field| field.to.clone())
                    .collect(),
            );
        }
        conversion.report.objects.push(object_report);
    }
    restore_converted_backups(&mut conversion);
    accept_restores(&mut conversion);
    Ok(conversion)
}

/// A Restore converts to one of the archive the other operator left on its claim
/// (`spec.source`); when its Backup is in the input too (converted: a Backup of this operator),
/// it restores that Backup instead (`spec.backup`), as the manifests meant together.
fn restore_converted_backups(conversion: &mut Conversion) {
    let backups: Vec<(Option<String>, String)> = conversion
        .objects
        .iter()
        .filter_map(|object| match object {
            Converted::Backup(backup) => Some((
                backup.metadata.namespace.clone(),
                backup.metadata.name.clone().unwrap_or_default(),
            )),
            _ => None,
        })
        .collect();
    let mut switched = Vec::new();
    for object in &mut conversion.objects {
        let Converted::Restore(restore) = object else {
            continue;
        };
        let Some(claim) = restore
            .spec
            .source
            .as_ref()
            .map(|s| s.persistent_volume_claim.clone())
        else {
            continue;
        };
        if backups.contains(&(restore.metadata.namespace.clone(), claim.clone())) {
            restore.spec.source = None;
            restore.spec.backup = Some(claim);
            switched.push((
                restore.metadata.namespace.clone(),
                restore.metadata.name.clone(),
            ));
        }
    }
    for report in &mut conversion.report.objects {
        if report.kind != "Restore"
            || !switched.contains(&(report.namespace.clone(), report.name.clone()))
        {
            continue;
        }
        if let Some(field) = report.fields.iter_mut().find(|f| f.field == "spec.backup") {
            field.outcome = Outcome::Mapped;
            field.to = Some("spec.backup".to_string());
            field.note = "its Backup is converted too: the Backup this operator takes is restored"
                .to_string();
        }
    }
}

/// A Restore into cluster `b` of a Backup of cluster `a` waits here until `b` accepts restores
/// from `a` (`spec.acceptRestoresFrom`); infinispan-operator had no such rule. For each such
/// pair in the input, `a` is added to `b`'s list when `b` is converted too; the Restore's report
/// says so either way.
fn accept_restores(conversion: &mut Conversion) {
    /// A Restore whose Backup (in the input) is of another cluster.
    struct CrossRestore {
        namespace: String,
        restore: String,
        target: String,
        source: String,
    }
    let key = |meta: &ObjectMeta| {
        (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        )
    };
    let backups: Vec<((String, String), String)> = conversion
        .objects
        .iter()
        .filter_map(|object| match object {
            Converted::Backup(backup) => Some((key(&backup.metadata), backup.spec.cluster.clone())),
            _ => None,
        })
        .collect();
    let crossing: Vec<CrossRestore> = conversion
        .objects
        .iter()
        .filter_map(|object| {
            let Converted::Restore(restore) = object else {
                return None;
            };
            let (namespace, name) = key(&restore.metadata);
            let backup = (namespace.clone(), restore.spec.backup.clone()?);
            let (_, source) = backups.iter().find(|(key, _)| *key == backup)?;
            (*source != restore.spec.cluster).then(|| CrossRestore {
                namespace,
                restore: name,
                target: restore.spec.cluster.clone(),
                source: source.clone(),
            })
        })
        .collect();
    for CrossRestore {
        namespace,
        restore,
        target,
        source,
    } in crossing
    {
        let is = |report: &ObjectReport, kind: &str, name: &str| {
            report.kind == kind
                && report.name.as_deref() == Some(name)
                && report.namespace.clone().unwrap_or_default() == namespace
        };
        let cluster = conversion
            .objects
            .iter_mut()
            .find_map(|object| match object {
                Converted::Infinispan(cr)
                    if key(&cr.metadata) == (namespace.clone(), target.clone()) =>
                {
                    Some(cr)
                }
                _ => None,
            });
        let note = match cluster {
            Some(cr) => {
                if !cr.spec.accepts_restores_from(&target, &source) {
                    cr.spec.accept_restores_from.push(source.clone());
                    if let Some(report) = conversion
                        .report
                        .objects
                        .iter_mut()
                        .find(|report| is(report, "Infinispan", &target))
                    {
                        report.fields.push(FieldReport {
                            field: "spec.acceptRestoresFrom".to_string(),
                            outcome: Outcome::Changed,
                            to: Some("spec.acceptRestoresFrom".to_string()),
                            note: format!(
                                "added {source}: the Restore {restore} restores a Backup of {source} into this cluster, which must accept it here"
                            ),
                        });
                    }
                }
                format!(
                    "restores a Backup of cluster {source} into {target}: {source} is added to {target}'s spec.acceptRestoresFrom"
                )
            }
            None => format!(
                "restores a Backup of cluster {source} into {target}: {target}'s spec.acceptRestoresFrom must name {source}, or the Restore waits (RestoreNotAccepted)"
            ),
        };
        if let Some(report) = conversion
            .report
            .objects
            .iter_mut()
            .find(|report| is(report, "Restore", &restore))
        {
            report.notes.push(note);
        }
    }
}

/// Converts one object: `(the object to write, if any; its report)`.
fn convert_document(
    source: &str,
    value: Value,
) -> Result<(Option<Converted>, ObjectReport), ConvertError> {
    let Value::Object(map) = value else {
        return Err(ConvertError::NotAnObject {
            source_name: source.to_string(),
        });
    };
    let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_string);
    let (Some(api_version), Some(kind)) = (text("apiVersion"), text("kind")) else {
        return Err(ConvertError::NotAnObject {
            source_name: source.to_string(),
        });
    };
    let metadata = map.get("metadata");
    let name = metadata
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let namespace = metadata
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut object_report = ObjectReport::new(source, &api_version, &kind, name, namespace);
    let field_error = |error: FieldError, report: &ObjectReport| ConvertError::Field {
        source_name: source.to_string(),
        object: report.title(),
        error,
    };
    let group = api_version.split_once('/').map(|(group, _)| group);
    if group != Some(GROUP) {
        object_report.outcome = Outcome::Mapped;
        object_report.note = "not an infinispan-operator kind: copied unchanged".to_string();
        return Ok((
            Some(Converted::Unchanged(Value::Object(map))),
            object_report,
        ));
    }
    let mut log = Log::default();
    let mut fields = Fields::root(map);
    let converted = match (api_version.as_str(), kind.as_str()) {
        ("infinispan.org/v1", "Infinispan") => infinispan::convert(&mut fields, &mut log)
            .map(|cr| Some(Converted::Infinispan(Box::new(cr)))),
        ("infinispan.org/v2alpha1", "Cache") => cache::convert(&mut fields, &mut log)
            .map(|cr| Some(Converted::Cache(Box::new(cr)))),
        ("infinispan.org/v2alpha1", "Backup") => backup::convert(&mut fields, &mut log)
            .map(|cr| Some(Converted::Backup(Box::new(cr)))),
        ("infinispan.org/v2alpha1", "Restore") => restore::convert(&mut fields, &mut log)
            .map(|cr| Some(Converted::Restore(Box::new(cr)))),
        ("infinispan.org/v2alpha1", "Batch") => batch::convert(&mut fields, &mut log)
            .map(|cr| Some(Converted::Batch(Box::new(cr)))),
        ("infinispan.org/v2alpha1", "Template" | "Counter" | "Schema" | "Task") => {
            object_report.outcome = Outcome::Mapped;
            object_report.note =
                "already one of this project's kinds (infinispan-operator has none): copied unchanged"
                    .to_string();
            return Ok((
                Some(Converted::Unchanged(Value::Object(fields.into_map()))),
                object_report,
            ));
        }
        _ => {
            object_report.outcome = Outcome::Dropped;
            object_report.note = format!(
                "{api_version} {kind} is not a kind of infinispan-operator's API (Infinispan v1; Cache, Backup, Restore, Batch v2alpha1): not converted"
            );
            return Ok((None, object_report));
        }
    }
    .map_err(|error| field_error(error, &object_report))?;
    log.unknown(fields);
    let Log {
        fields: entries,
        notes,
        object,
    } = log;
    object_report.fields = entries;
    object_report.notes = notes;
    let converted = match object {
        // Not written: dropped (no equivalent, or refused here) or omitted.
        Some((outcome, note)) => {
            object_report.outcome = outcome;
            object_report.note = note;
            None
        }
        None => {
            object_report.outcome = Outcome::Changed;
            object_report.note = format!("converted to this project's {api_version} {kind}");
            converted
        }
    };
    Ok((converted, object_report))
}

#[cfg(test)]
mod tests;
