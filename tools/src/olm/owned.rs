//! The CSV's description of the CRDs it owns (`spec.customresourcedefinitions.owned`: display
//! names, spec and status descriptors read from the schemas, the objects each kind stands for)
//! and its examples (`alm-examples`).

use std::borrow::Cow;

use common_crds::ResourceKind;
use common_crds::generate::all_crds;
use common_crds::labels::CLUSTER_LABEL;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use serde_json::{Value, json};

use cluster_operator::cli::DEFAULT_SERVER_VERSION;

/// How a descriptor is shown in a console form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Widget {
    /// From the schema: an enum becomes a select of its values, a boolean a switch, an integer a
    /// number, anything else text.
    Auto,
    PodCount,
    Secret,
    ConfigMap,
    StorageClass,
    Resources,
    Conditions,
    Phase,
    /// An object whose fields have descriptors of their own: shown under "advanced" (the
    /// console's form groups its fields there; scorecard's `olm-spec-descriptors` wants every
    /// top-level field of the example described).
    Group,
}

/// One spec or status descriptor: (path below spec/status, display name, widget).
type Descriptor = (&'static str, &'static str, Widget);

/// What the CSV says about one kind beyond its CRD.
#[derive(Clone)]
struct KindInfo {
    kind: &'static str,
    display_name: &'static str,
    /// (kind, version) of the objects the operators create for a CR of this kind.
    resources: &'static [(&'static str, &'static str)],
    spec: Cow<'static, [Descriptor]>,
    status: &'static [Descriptor],
}

/// What the CSV says about `kind`: [`KINDS`] for the cluster operator's kinds, the registry for
/// the resource kinds (their spec fields shown as the schema says, statuses alike).
fn described(kind: &str) -> Option<KindInfo> {
    if let Some(info) = KINDS.iter().find(|info| info.kind == kind) {
        return Some(info.clone());
    }
    let info = ResourceKind::from_kind(kind)?.info();
    Some(KindInfo {
        kind: info.kind,
        display_name: info.display_name,
        resources: EVENTS,
        spec: info
            .spec_fields
            .iter()
            .map(|&(path, display_name)| (path, display_name, Widget::Auto))
            .collect(),
        status: RESOURCE_STATUS,
    })
}

/// The kinds whose CRs only get Events (`events.k8s.io/v1`, kube-runtime's recorder) from the
/// operators; the other objects they stand for live on the Infinispan server. Listing Events
/// also tells operator-sdk's deprecated-API check that the `events.k8s.io` rule is about v1.
const EVENTS: &[(&str, &str)] = &[("Event", "v1")];
const EVENTS_AND_JOBS: &[(&str, &str)] = &[("Event", "v1"), ("Job", "v1")];

const RESOURCE_STATUS: &[Descriptor] = &[
    ("conditions", "Conditions", Widget::Conditions),
    ("serverName", "Server name", Widget::Auto),
];

/// The cluster operator's kinds; the resource kinds are described by the registry
/// ([`ResourceKind::info`], see [`described`]).
const KINDS: &[KindInfo] = &[
    KindInfo {
        kind: "Infinispan",
        display_name: "Infinispan Cluster",
        resources: &[
            ("StatefulSet", "v1"),
            ("Service", "v1"),
            ("ConfigMap", "v1"),
            ("Secret", "v1"),
            ("PodDisruptionBudget", "v1"),
            ("Ingress", "v1"),
            ("Deployment", "v1"),
            ("ServiceAccount", "v1"),
            ("Role", "v1"),
            ("RoleBinding", "v1"),
            ("Event", "v1"),
        ],
        spec: Cow::Borrowed(&[
            ("replicas", "Replicas", Widget::PodCount),
            ("version", "Server version", Widget::Auto),
            ("image", "Server image", Widget::Auto),
            ("service", "Server storage and service", Widget::Group),
            (
                "resourcesOperator",
                "Resources operator settings",
                Widget::Group,
            ),
            ("container.resources", "Server resources", Widget::Resources),
            ("service.container.storage", "Storage size", Widget::Auto),
            (
                "service.container.storageClassName",
                "Storage class",
                Widget::StorageClass,
            ),
            (
                "service.container.ephemeralStorage",
                "Ephemeral storage",
                Widget::Auto,
            ),
            (
                "security.endpointAuthentication",
                "Authentication",
                Widget::Auto,
            ),
            (
                "security.endpointSecretName",
                "Identities Secret",
                Widget::Secret,
            ),
            (
                "security.endpointEncryption.type",
                "Encryption",
                Widget::Auto,
            ),
            (
                "security.endpointEncryption.certSecretName",
                "Certificate Secret",
                Widget::Secret,
            ),
            ("expose.type", "Expose", Widget::Auto),
            ("configMapName", "Configuration overlay", Widget::ConfigMap),
            (
                "resourcesOperator.enabled",
                "Resources operator",
                Widget::Auto,
            ),
            ("resourcesOperator.syncMode", "Sync mode", Widget::Auto),
            (
                "resourcesOperator.conflictWinner",
                "Conflict winner",
                Widget::Auto,
            ),
        ]),
        status: &[
            ("conditions", "Conditions", Widget::Conditions),
            ("replicas", "Replicas", Widget::PodCount),
            ("readyReplicas", "Ready replicas", Widget::Auto),
            ("version", "Server version", Widget::Auto),
            (
                "operatorCredentialsSecret",
                "Operator credentials",
                Widget::Secret,
            ),
        ],
    },
    KindInfo {
        kind: "Backup",
        display_name: "Backup",
        resources: EVENTS,
        spec: Cow::Borrowed(&[("cluster", "Cluster", Widget::Auto)]),
        status: &[
            ("phase", "Phase", Widget::Phase),
            ("conditions", "Conditions", Widget::Conditions),
            ("archive", "Archive", Widget::Auto),
            ("startTime", "Started", Widget::Auto),
            ("completionTime", "Completed", Widget::Auto),
        ],
    },
    KindInfo {
        kind: "Restore",
        display_name: "Restore",
        resources: EVENTS,
        spec: Cow::Borrowed(&[
            ("cluster", "Cluster", Widget::Auto),
            ("backup", "Backup", Widget::Auto),
        ]),
        status: &[
            ("phase", "Phase", Widget::Phase),
            ("conditions", "Conditions", Widget::Conditions),
            ("archive", "Archive", Widget::Auto),
            ("startTime", "Started", Widget::Auto),
            ("completionTime", "Completed", Widget::Auto),
        ],
    },
    KindInfo {
        kind: "Batch",
        display_name: "Batch",
        resources: EVENTS_AND_JOBS,
        spec: Cow::Borrowed(&[
            ("cluster", "Cluster", Widget::Auto),
            ("config", "Script", Widget::Auto),
            ("configMap", "Script ConfigMap", Widget::Auto),
        ]),
        status: &[
            ("phase", "Phase", Widget::Phase),
            ("reason", "Reason", Widget::Auto),
            ("job", "Job", Widget::Auto),
        ],
    },
];

/// The CSV could not be built from the CRDs (a bug caught by the unit tests).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CsvError {
    #[error("the CRD of {0} has no storage version")]
    NoStorageVersion(String),
    #[error("no CSV information for the kind {0}")]
    UnknownKind(String),
    #[error("{kind}: no schema property {path} (descriptor)")]
    NoSuchProperty { kind: String, path: String },
    #[error("{kind}: the schema has no description for {path}")]
    NoDescription { kind: String, path: String },
}

fn schema_of(crd: &CustomResourceDefinition) -> Result<(String, &JSONSchemaProps), CsvError> {
    crd.spec
        .versions
        .iter()
        .find(|v| v.storage)
        .and_then(|v| {
            v.schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .map(|schema| (v.name.clone(), schema))
        })
        .ok_or_else(|| CsvError::NoStorageVersion(crd.spec.names.kind.clone()))
}

/// The schema of `path` (dot-separated) below `root`.
fn property<'a>(root: &'a JSONSchemaProps, path: &str) -> Option<&'a JSONSchemaProps> {
    path.split('.').try_fold(root, |schema, name| {
        schema.properties.as_ref().and_then(|p| p.get(name))
    })
}

fn x_descriptors(widget: Widget, schema: &JSONSchemaProps) -> Vec<String> {
    const UI: &str = "urn:alm:descriptor:com.tectonic.ui";
    match widget {
        Widget::PodCount => vec![format!("{UI}:podCount")],
        Widget::Secret => vec!["urn:alm:descriptor:io.kubernetes:Secret".to_string()],
        Widget::ConfigMap => vec!["urn:alm:descriptor:io.kubernetes:ConfigMap".to_string()],
        Widget::StorageClass => {
            vec!["urn:alm:descriptor:io.kubernetes:StorageClass".to_string()]
        }
        Widget::Resources => vec![format!("{UI}:resourceRequirements")],
        Widget::Conditions => vec!["urn:alm:descriptor:io.kubernetes.conditions".to_string()],
        Widget::Phase => vec!["urn:alm:descriptor:io.kubernetes.phase".to_string()],
        Widget::Group => vec![format!("{UI}:advanced")],
        Widget::Auto => match (&schema.enum_, schema.type_.as_deref()) {
            (Some(values), _) => values
                .iter()
                .filter_map(|v| v.0.as_str())
                .map(|v| format!("{UI}:select:{v}"))
                .collect(),
            (None, Some("boolean")) => vec![format!("{UI}:booleanSwitch")],
            (None, Some("integer" | "number")) => vec![format!("{UI}:number")],
            _ => vec![format!("{UI}:text")],
        },
    }
}

fn descriptors(
    kind: &str,
    root: &JSONSchemaProps,
    section: &str,
    list: &[Descriptor],
) -> Result<Vec<Value>, CsvError> {
    let section_schema = property(root, section).ok_or_else(|| CsvError::NoSuchProperty {
        kind: kind.to_string(),
        path: section.to_string(),
    })?;
    list.iter()
        .map(|(path, display_name, widget)| {
            let schema =
                property(section_schema, path).ok_or_else(|| CsvError::NoSuchProperty {
                    kind: kind.to_string(),
                    path: format!("{section}.{path}"),
                })?;
            let description = schema
                .description
                .clone()
                .filter(|d| !d.trim().is_empty())
                .ok_or_else(|| CsvError::NoDescription {
                    kind: kind.to_string(),
                    path: format!("{section}.{path}"),
                })?;
            Ok(json!({
                "path": path,
                "displayName": display_name,
                "description": description,
                "x-descriptors": x_descriptors(*widget, schema),
            }))
        })
        .collect()
}

/// `spec.customresourcedefinitions.owned`: every CRD, described from its schema.
pub fn owned_crds() -> Result<Vec<Value>, CsvError> {
    all_crds()
        .iter()
        .map(|crd| {
            let kind = crd.spec.names.kind.as_str();
            let info = described(kind).ok_or_else(|| CsvError::UnknownKind(kind.to_string()))?;
            let (version, schema) = schema_of(crd)?;
            let description =
                schema
                    .description
                    .clone()
                    .ok_or_else(|| CsvError::NoDescription {
                        kind: kind.to_string(),
                        path: "(the kind)".to_string(),
                    })?;
            let resources: Vec<Value> = info
                .resources
                .iter()
                .map(|(kind, version)| json!({ "kind": kind, "name": "", "version": version }))
                .collect();
            Ok(json!({
                "name": crd.metadata.name,
                "version": version,
                "kind": kind,
                "displayName": info.display_name,
                "description": description,
                "specDescriptors": descriptors(kind, schema, "spec", &info.spec)?,
                "statusDescriptors": descriptors(kind, schema, "status", info.status)?,
                "resources": resources,
            }))
        })
        .collect()
}

/// The examples (`alm-examples`): one CR of every kind, forming one small setup: a cluster,
/// a backup of it restored into it, and one resource of each kind on it (the registry's
/// example of the kind).
pub fn examples() -> Result<Vec<Value>, serde_json::Error> {
    let cluster = "example-infinispan";
    let labels = json!({ CLUSTER_LABEL: cluster });
    let resource = |kind: ResourceKind| -> Result<Value, serde_json::Error> {
        let (name, spec) = kind.info().example;
        Ok(json!({
            "apiVersion": "infinispan.org/v2alpha1",
            "kind": kind.as_str(),
            "metadata": { "name": name, "labels": labels },
            "spec": serde_json::from_str::<Value>(spec)?,
        }))
    };
    let mut examples = vec![
        json!({
            "apiVersion": "infinispan.org/v1",
            "kind": "Infinispan",
            "metadata": { "name": cluster },
            "spec": {
                "replicas": 2,
                "version": DEFAULT_SERVER_VERSION,
                "service": { "container": { "storage": "1Gi" } },
                "resourcesOperator": { "syncMode": "Bidirectional" },
            },
        }),
        json!({
            "apiVersion": "infinispan.org/v2alpha1",
            "kind": "Backup",
            "metadata": { "name": "example-backup" },
            "spec": { "cluster": cluster },
        }),
        json!({
            "apiVersion": "infinispan.org/v2alpha1",
            "kind": "Restore",
            "metadata": { "name": "example-restore" },
            "spec": { "cluster": cluster, "backup": "example-backup" },
        }),
        json!({
            "apiVersion": "infinispan.org/v2alpha1",
            "kind": "Batch",
            "metadata": { "name": "example-batch" },
            "spec": {
                "cluster": cluster,
                "config": "create counter --type=weak --initial-value=0 example-counter\n",
            },
        }),
    ];
    for kind in ResourceKind::LISTED {
        examples.push(resource(kind)?);
    }
    Ok(examples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owns_every_crd_with_descriptions_from_the_schemas() {
        let owned = owned_crds().expect("owned CRDs");
        let crds = all_crds();
        assert_eq!(owned.len(), crds.len());
        for (entry, crd) in owned.iter().zip(&crds) {
            assert_eq!(entry["name"], json!(crd.metadata.name));
            assert_eq!(entry["kind"], json!(crd.spec.names.kind));
            let (version, schema) = schema_of(crd).expect("schema");
            assert_eq!(entry["version"], json!(version));
            assert_eq!(entry["description"], json!(schema.description));
            assert!(!entry["displayName"].as_str().unwrap_or_default().is_empty());
            for section in ["specDescriptors", "statusDescriptors"] {
                let list = entry[section].as_array().expect("descriptors");
                assert!(!list.is_empty(), "{} {section}", crd.spec.names.kind);
                for descriptor in list {
                    assert!(
                        !descriptor["description"]
                            .as_str()
                            .unwrap_or_default()
                            .is_empty()
                    );
                    assert!(
                        !descriptor["x-descriptors"]
                            .as_array()
                            .expect("x")
                            .is_empty()
                    );
                }
            }
        }
        let infinispan = &owned[0];
        let kinds: Vec<&str> = infinispan["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .filter_map(|r| r["kind"].as_str())
            .collect();
        for kind in [
            "StatefulSet",
            "Service",
            "Secret",
            "ConfigMap",
            "Deployment",
        ] {
            assert!(kinds.contains(&kind), "{kind}");
        }
        let conditions = infinispan["statusDescriptors"]
            .as_array()
            .expect("status")
            .iter()
            .find(|d| d["path"] == "conditions")
            .expect("conditions descriptor");
        assert_eq!(
            conditions["x-descriptors"],
            json!(["urn:alm:descriptor:io.kubernetes.conditions"])
        );
    }

    #[test]
    fn enum_descriptors_offer_the_schema_values() {
        let owned = owned_crds().expect("owned CRDs");
        let sync_mode = owned[0]["specDescriptors"]
            .as_array()
            .expect("spec")
            .iter()
            .find(|d| d["path"] == "resourcesOperator.syncMode")
            .expect("syncMode");
        assert_eq!(
            sync_mode["x-descriptors"],
            json!([
                "urn:alm:descriptor:com.tectonic.ui:select:Bidirectional",
                "urn:alm:descriptor:com.tectonic.ui:select:ToServer",
                "urn:alm:descriptor:com.tectonic.ui:select:FromServer",
            ])
        );
        let replicas = &owned[0]["specDescriptors"][0];
        assert_eq!(replicas["path"], "replicas");
        assert_eq!(
            replicas["x-descriptors"],
            json!(["urn:alm:descriptor:com.tectonic.ui:podCount"])
        );
    }

    #[test]
    fn a_missing_property_is_an_error() {
        let crd = &all_crds()[0];
        let (_, schema) = schema_of(crd).expect("schema");
        assert_eq!(
            descriptors(
                "Infinispan",
                schema,
                "spec",
                &[("nope", "Nope", Widget::Auto)]
            ),
            Err(CsvError::NoSuchProperty {
                kind: "Infinispan".into(),
                path: "spec.nope".into()
            })
        );
    }

    #[test]
    fn one_example_per_kind_that_the_types_accept() {
        let examples = examples().expect("examples");
        let kinds: Vec<&str> = examples.iter().filter_map(|e| e["kind"].as_str()).collect();
        let crd_kinds: Vec<String> = all_crds()
            .iter()
            .map(|c| c.spec.names.kind.clone())
            .collect();
        assert_eq!(kinds, crd_kinds);
        for example in &examples {
            let value = example.clone();
            let parsed = match example["kind"].as_str().unwrap_or_default() {
                "Infinispan" => serde_json::from_value::<common_crds::Infinispan>(value).map(drop),
                "Backup" => serde_json::from_value::<common_crds::Backup>(value).map(drop),
                "Restore" => serde_json::from_value::<common_crds::Restore>(value).map(drop),
                "Batch" => serde_json::from_value::<common_crds::Batch>(value).map(drop),
                "Cache" => serde_json::from_value::<common_crds::Cache>(value).map(drop),
                "Template" => serde_json::from_value::<common_crds::Template>(value).map(drop),
                "Counter" => serde_json::from_value::<common_crds::Counter>(value).map(drop),
                "Schema" => serde_json::from_value::<common_crds::Schema>(value).map(drop),
                "Task" => serde_json::from_value::<common_crds::Task>(value).map(drop),
                other => panic!("unexpected kind {other}"),
            };
            parsed.unwrap_or_else(|e| panic!("{example}: {e}"));
        }
        // The resource kinds carry the cluster label the admission policy requires.
        for example in &examples[4..] {
            assert_eq!(
                example["metadata"]["labels"][CLUSTER_LABEL],
                "example-infinispan"
            );
        }
    }
}
