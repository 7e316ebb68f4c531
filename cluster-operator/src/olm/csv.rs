//! The ClusterServiceVersion of the bundle, built from what the operator is made of: the CRDs
//! of `common-crds` (kinds, versions, descriptions, descriptor descriptions and select options
//! read from their schemas), the rules of [`crate::rbac`], the image and flag defaults of
//! [`crate::cli`].
//!
//! Choices:
//! - **Capability level `Basic Install`.** The operator installs and runs clusters, and takes
//!   backups and restores (a level-3 feature), but the levels are cumulative and level 2,
//!   `Seamless Upgrades`, is not there: it knows one server version and has no upgrade
//!   procedure for a server version change (a change of `spec.version` is a plain rolling
//!   update), and this is the first operator release (no `replaces`).
//! - **Install modes: all four.** The Deployment reads `WATCH_NAMESPACE` from the pod's
//!   `olm.targetNamespaces` annotation: one namespace (OwnNamespace, SingleNamespace), a
//!   comma-separated list (MultiNamespace), or the empty string (AllNamespaces), which
//!   [`crate::scope::resolve`] reads as all namespaces.
//! - **Permissions**: [`crate::rbac::rules`], which OLM grants in the operator's namespace and
//!   every target namespace (cluster-wide in AllNamespaces mode); they include the Lease and
//!   Events rules the operator needs in its own namespace. **Cluster permissions**:
//!   [`crate::rbac::label_policy_rules`] only, so the operator applies the label policy itself
//!   (a bundle cannot carry a ValidatingAdmissionPolicy).
//! - **Images**: the operator's, the resources operator's and the server's are in
//!   `relatedImages` and given to the operator by environment variables in one place, so a
//!   mirror rewrites them together.
//! - `createdAt` is fixed ([`CREATED_AT`]): generated files must be reproducible.
//! - No `maintainers`: the project has no maintainer address to publish yet (operatorhub's
//!   validator requires an email for each maintainer listed).

use std::collections::BTreeMap;

use base64::Engine;
use common_crds::generate::all_crds;
use common_crds::labels::CLUSTER_LABEL;
use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::{OPERATOR_IMAGE, OlmError, PACKAGE, VERSION, csv_name};
use crate::cli::{DEFAULT_RESOURCES_OPERATOR_IMAGE, DEFAULT_SERVER_VERSION, SERVER_IMAGES};

/// When this version's CSV was made (fixed, so the file is reproducible; set with the version).
pub const CREATED_AT: &str = "2026-11-30T00:00:00Z";
/// Oldest Kubernetes the operator supports: the label policy is an
/// `admissionregistration.k8s.io/v1` ValidatingAdmissionPolicy (GA in 1.30).
pub const MIN_KUBE_VERSION: &str = "1.30.0";
/// The operator capability level (see the module documentation).
pub const CAPABILITY: &str = "Basic Install";
/// OperatorHub category.
pub const CATEGORIES: &str = "Database";
/// The Deployment OLM creates, and its ServiceAccount.
pub const DEPLOYMENT_NAME: &str = "infinispan-cluster-operator";
pub const SERVICE_ACCOUNT: &str = "infinispan-cluster-operator";
/// The operator's container.
pub const CONTAINER_NAME: &str = "cluster-operator";
/// Port of /metrics, /healthz and /readyz (the default of `--metrics-address`).
pub const METRICS_PORT: u16 = 8080;
/// The pod annotation OLM sets to the OperatorGroup's target namespaces (comma-separated;
/// empty for all namespaces).
pub const TARGET_NAMESPACES_ANNOTATION: &str = "olm.targetNamespaces";
/// Where the operator's writable scratch space (Restore archives in transit) is mounted: the
/// root filesystem is read-only.
pub const TMP_DIR: &str = "/tmp";
/// The short description (tiles, search results).
pub const SHORT_DESCRIPTION: &str = "Runs Infinispan clusters, their backups and restores, and keeps caches, templates, counters, schemas and tasks in sync with Kubernetes in both directions.";

const ICON_SVG: &str = include_str!("icon.svg");

/// The icon, an SVG, base64-encoded (`{base64data, mediatype}`).
pub fn icon() -> Value {
    json!({
        "base64data": base64::engine::general_purpose::STANDARD.encode(ICON_SVG),
        "mediatype": "image/svg+xml",
    })
}

/// The long description (markdown), shown on the operator's page.
pub fn description() -> String {
    format!(
        "\
[Infinispan](https://infinispan.org) is an open-source in-memory data grid: a distributed \
key-value store and cache with a REST and Hot Rod API.

This operator, written in Rust, runs Infinispan clusters on Kubernetes:

- **Infinispan**: a cluster (StatefulSet, Services, generated configuration and credentials, \
optional external exposure, PodDisruptionBudget), with status conditions and scaling through \
the scale subresource.
- **Backup** and **Restore**: an archive of a cluster's caches, templates, counters, schemas and \
tasks, and its restoration into another cluster.
- **Cache**, **Template**, **Counter**, **Schema** and **Task**: server resources as CRs, \
labelled `{CLUSTER_LABEL}=<cluster>`. Each cluster gets its own *resources operator* (a small \
Deployment with least-privilege RBAC) that keeps them in sync with the server **in both \
directions**: a cache created by an application on the server appears as a Cache CR, and a \
Cache CR applied with kubectl appears on the server.

### Install modes

All four: the operator watches the OperatorGroup's target namespaces (one, a list, or all). It \
elects a leader through a Lease in its own namespace, so more replicas wait as standbys.

### Cluster permissions

Besides its namespaced permissions, the operator asks for `get`, `create` and `patch` of \
ValidatingAdmissionPolicies and their bindings, cluster-wide: at startup it applies the policy \
that keeps the `{CLUSTER_LABEL}` label of the resource CRs from changing (an OLM bundle cannot \
carry admission policies).

### Documentation

The README, the sync contract and the backup guide are in the [repository]({repository}).
",
        repository = env!("CARGO_PKG_REPOSITORY")
    )
}

fn field_env(name: &str, field_path: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: field_path.to_string(),
            }),
            ..EnvVarSource::default()
        }),
    }
}

fn value_env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.to_string()),
        value_from: None,
    }
}

/// An HTTP probe on the metrics port (the Helm chart's timings; the e2e suite compares them).
fn probe(path: &str, initial_delay_seconds: Option<i32>, period_seconds: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_string()),
            port: IntOrString::String("metrics".to_string()),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds,
        period_seconds: Some(period_seconds),
        timeout_seconds: Some(5),
        failure_threshold: Some(3),
        ..Probe::default()
    }
}

/// `VERSION=IMAGE,...` of the built-in server images (`--server-image`'s environment form).
pub fn server_images_env() -> String {
    SERVER_IMAGES
        .iter()
        .map(|(version, image)| format!("{version}={image}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The labels of the operator's pods (and the Deployment's selector).
pub fn pod_labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "app.kubernetes.io/name".to_string(),
            DEPLOYMENT_NAME.to_string(),
        ),
        ("app.kubernetes.io/part-of".to_string(), PACKAGE.to_string()),
    ])
}

/// The operator's Deployment spec: `cluster-operator run` on a read-only root filesystem under
/// the restricted Pod Security profile, probes on the metrics endpoint, the watched namespaces
/// from OLM's annotation. The container is the Helm chart's with its default values (security
/// contexts, probes, port, resources, /tmp volume, images; `e2e/tests/olm_bundle.rs` compares
/// them), except for what OLM does differently: the watched namespaces and the label policy.
pub fn operator_deployment() -> DeploymentSpec {
    let container = Container {
        name: CONTAINER_NAME.to_string(),
        image: Some(OPERATOR_IMAGE.to_string()),
        args: Some(vec!["run".to_string()]),
        env: Some(vec![
            field_env(
                "WATCH_NAMESPACE",
                &format!("metadata.annotations['{TARGET_NAMESPACES_ANNOTATION}']"),
            ),
            field_env("POD_NAMESPACE", "metadata.namespace"),
            field_env("POD_NAME", "metadata.name"),
            value_env(
                "CLUSTER_OPERATOR_METRICS_ADDRESS",
                &format!("0.0.0.0:{METRICS_PORT}"),
            ),
            value_env(
                "CLUSTER_OPERATOR_RESOURCES_OPERATOR_IMAGE",
                DEFAULT_RESOURCES_OPERATOR_IMAGE,
            ),
            value_env("CLUSTER_OPERATOR_SERVER_IMAGES", &server_images_env()),
            value_env(
                "CLUSTER_OPERATOR_DEFAULT_SERVER_VERSION",
                DEFAULT_SERVER_VERSION,
            ),
            // A bundle cannot carry the label policy: the operator applies it (its cluster
            // permissions allow it).
            value_env("CLUSTER_OPERATOR_LABEL_POLICY", "operator"),
            value_env("CLUSTER_OPERATOR_ARCHIVE_DIR", TMP_DIR),
        ]),
        ports: Some(vec![ContainerPort {
            name: Some("metrics".to_string()),
            container_port: i32::from(METRICS_PORT),
            protocol: Some("TCP".to_string()),
            ..ContainerPort::default()
        }]),
        liveness_probe: Some(probe("/healthz", Some(5), 10)),
        readiness_probe: Some(probe("/readyz", None, 5)),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_string(), Quantity("50m".to_string())),
                ("memory".to_string(), Quantity("64Mi".to_string())),
            ])),
            limits: Some(BTreeMap::from([(
                "memory".to_string(),
                Quantity("256Mi".to_string()),
            )])),
            claims: None,
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_string()]),
                add: None,
            }),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            seccomp_profile: Some(crate::build::runtime_default()),
            ..SecurityContext::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        volume_mounts: Some(vec![VolumeMount {
            name: "tmp".to_string(),
            mount_path: TMP_DIR.to_string(),
            ..VolumeMount::default()
        }]),
        ..Container::default()
    };
    DeploymentSpec {
        replicas: Some(1),
        selector: LabelSelector {
            match_labels: Some(pod_labels()),
            match_expressions: None,
        },
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(pod_labels()),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec {
                containers: vec![container],
                service_account_name: Some(SERVICE_ACCOUNT.to_string()),
                automount_service_account_token: Some(true),
                enable_service_links: Some(false),
                security_context: Some(PodSecurityContext {
                    run_as_non_root: Some(true),
                    seccomp_profile: Some(crate::build::runtime_default()),
                    ..PodSecurityContext::default()
                }),
                volumes: Some(vec![Volume {
                    name: "tmp".to_string(),
                    empty_dir: Some(EmptyDirVolumeSource::default()),
                    ..Volume::default()
                }]),
                ..PodSpec::default()
            }),
        },
        ..DeploymentSpec::default()
    }
}

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
}

/// One spec or status descriptor: (path below spec/status, display name, widget).
type Descriptor = (&'static str, &'static str, Widget);

/// What the CSV says about one kind beyond its CRD.
struct KindInfo {
    kind: &'static str,
    display_name: &'static str,
    /// (kind, version) of the objects the operators create for a CR of this kind.
    resources: &'static [(&'static str, &'static str)],
    spec: &'static [Descriptor],
    status: &'static [Descriptor],
}

/// The kinds whose CRs only get Events (`events.k8s.io/v1`, kube-runtime's recorder) from the
/// operators; the other objects they stand for live on the Infinispan server. Listing Events
/// also tells operator-sdk's deprecated-API check that the `events.k8s.io` rule is about v1.
const EVENTS: &[(&str, &str)] = &[("Event", "v1")];

const RESOURCE_STATUS: &[Descriptor] = &[
    ("conditions", "Conditions", Widget::Conditions),
    ("serverName", "Server name", Widget::Auto),
];

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
        spec: &[
            ("replicas", "Replicas", Widget::PodCount),
            ("version", "Server version", Widget::Auto),
            ("image", "Server image", Widget::Auto),
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
        ],
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
        spec: &[("cluster", "Cluster", Widget::Auto)],
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
        spec: &[
            ("cluster", "Cluster", Widget::Auto),
            ("backup", "Backup", Widget::Auto),
        ],
        status: &[
            ("phase", "Phase", Widget::Phase),
            ("conditions", "Conditions", Widget::Conditions),
            ("archive", "Archive", Widget::Auto),
            ("startTime", "Started", Widget::Auto),
            ("completionTime", "Completed", Widget::Auto),
        ],
    },
    KindInfo {
        kind: "Cache",
        display_name: "Cache",
        resources: EVENTS,
        spec: &[
            ("name", "Server name", Widget::Auto),
            ("templateName", "Template name", Widget::Auto),
            ("template", "Configuration", Widget::Auto),
            ("updates.strategy", "Update strategy", Widget::Auto),
            ("deletionPolicy", "Deletion policy", Widget::Auto),
        ],
        status: RESOURCE_STATUS,
    },
    KindInfo {
        kind: "Template",
        display_name: "Cache Template",
        resources: EVENTS,
        spec: &[
            ("name", "Server name", Widget::Auto),
            ("template", "Configuration", Widget::Auto),
            ("updates.strategy", "Update strategy", Widget::Auto),
            ("deletionPolicy", "Deletion policy", Widget::Auto),
        ],
        status: RESOURCE_STATUS,
    },
    KindInfo {
        kind: "Counter",
        display_name: "Counter",
        resources: EVENTS,
        spec: &[
            ("name", "Server name", Widget::Auto),
            ("type", "Type", Widget::Auto),
            ("initialValue", "Initial value", Widget::Auto),
            ("lowerBound", "Lower bound", Widget::Auto),
            ("upperBound", "Upper bound", Widget::Auto),
            ("storage", "Storage", Widget::Auto),
            ("updates.strategy", "Update strategy", Widget::Auto),
            ("deletionPolicy", "Deletion policy", Widget::Auto),
        ],
        status: RESOURCE_STATUS,
    },
    KindInfo {
        kind: "Schema",
        display_name: "Protobuf Schema",
        resources: EVENTS,
        spec: &[
            ("name", "Server name", Widget::Auto),
            ("schema", "Schema", Widget::Auto),
            ("deletionPolicy", "Deletion policy", Widget::Auto),
        ],
        status: RESOURCE_STATUS,
    },
    KindInfo {
        kind: "Task",
        display_name: "Server Task",
        resources: EVENTS,
        spec: &[
            ("name", "Server name", Widget::Auto),
            ("script", "Script", Widget::Auto),
            ("deletionPolicy", "Deletion policy", Widget::Auto),
        ],
        status: RESOURCE_STATUS,
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
            let info = KINDS
                .iter()
                .find(|info| info.kind == kind)
                .ok_or_else(|| CsvError::UnknownKind(kind.to_string()))?;
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
                "specDescriptors": descriptors(kind, schema, "spec", info.spec)?,
                "statusDescriptors": descriptors(kind, schema, "status", info.status)?,
                "resources": resources,
            }))
        })
        .collect()
}

/// The examples (`alm-examples`): one CR of every kind, forming one small setup: a cluster,
/// a backup of it restored into it, and one resource of each kind on it.
pub fn examples() -> Vec<Value> {
    let cluster = "example-infinispan";
    let labels = json!({ CLUSTER_LABEL: cluster });
    let resource = |kind: &str, name: &str, spec: Value| {
        json!({
            "apiVersion": "infinispan.org/v2alpha1",
            "kind": kind,
            "metadata": { "name": name, "labels": labels },
            "spec": spec,
        })
    };
    vec![
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
        resource(
            "Cache",
            "example-cache",
            json!({ "template": "distributedCache:\n  mode: SYNC\n  statistics: true\n" }),
        ),
        resource(
            "Template",
            "example-template",
            json!({ "template": "replicatedCache:\n  mode: SYNC\n  memory:\n    maxCount: 10000\n" }),
        ),
        resource(
            "Counter",
            "example-counter",
            json!({ "type": "strong", "initialValue": 0, "upperBound": 1000000 }),
        ),
        resource(
            "Schema",
            "example-schema",
            json!({ "schema": "package example;\n\nmessage Book {\n  optional string title = 1;\n}\n" }),
        ),
        resource(
            "Task",
            "example-task",
            json!({ "script": "// mode=local,language=javascript\n\"hello from a Task CR\"\n" }),
        ),
    ]
}

/// The ClusterServiceVersion.
pub fn csv() -> Result<Value, OlmError> {
    let owned = owned_crds().map_err(OlmError::Csv)?;
    let examples = serde_json::to_string_pretty(&examples()).map_err(OlmError::Json)?;
    let repository = env!("CARGO_PKG_REPOSITORY");
    let mut related_images = vec![
        json!({ "name": "cluster-operator", "image": OPERATOR_IMAGE }),
        json!({ "name": "resources-operator", "image": DEFAULT_RESOURCES_OPERATOR_IMAGE }),
    ];
    related_images.extend(SERVER_IMAGES.iter().map(|(version, image)| {
        json!({ "name": format!("infinispan-server-{version}"), "image": image })
    }));
    Ok(json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": csv_name(),
            "annotations": {
                "alm-examples": examples,
                "capabilities": CAPABILITY,
                "categories": CATEGORIES,
                "containerImage": OPERATOR_IMAGE,
                "createdAt": CREATED_AT,
                "description": SHORT_DESCRIPTION,
                "operatorframework.io/suggested-namespace": PACKAGE,
                "repository": repository,
                "support": "Infinispan operators project",
            },
        },
        "spec": {
            "displayName": "Infinispan Operators",
            "description": description(),
            "version": VERSION,
            "maturity": "alpha",
            "minKubeVersion": MIN_KUBE_VERSION,
            "keywords": ["infinispan", "data grid", "cache", "in-memory", "key-value", "nosql", "backup"],
            "provider": { "name": "Infinispan operators project", "url": repository },
            "links": [
                { "name": "Source code and documentation", "url": repository },
                { "name": "Infinispan", "url": "https://infinispan.org" },
            ],
            "icon": [icon()],
            "installModes": [
                { "type": "OwnNamespace", "supported": true },
                { "type": "SingleNamespace", "supported": true },
                { "type": "MultiNamespace", "supported": true },
                { "type": "AllNamespaces", "supported": true },
            ],
            "customresourcedefinitions": { "owned": owned },
            "install": {
                "strategy": "deployment",
                "spec": {
                    "deployments": [{
                        "name": DEPLOYMENT_NAME,
                        "label": pod_labels(),
                        "spec": operator_deployment(),
                    }],
                    "permissions": [{
                        "serviceAccountName": SERVICE_ACCOUNT,
                        "rules": crate::rbac::rules(),
                    }],
                    "clusterPermissions": [{
                        "serviceAccountName": SERVICE_ACCOUNT,
                        "rules": crate::rbac::label_policy_rules(),
                    }],
                },
            },
            "relatedImages": related_images,
        },
    }))
}

/// The CSV as YAML, with a header saying where it comes from.
pub fn csv_yaml() -> Result<String, OlmError> {
    super::yaml_with_header(
        "Generated by `cluster-operator olm --dir olm` (`make crds`) from the operator's sources\n\
         (cluster-operator/src/olm/csv.rs): do not edit, a test fails when this copy is stale.",
        "the ClusterServiceVersion",
        &csv()?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scope::{WatchScope, resolve};
    use k8s_openapi::api::rbac::v1::PolicyRule;

    fn allows(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
        rules.iter().any(|rule| {
            rule.api_groups.iter().flatten().any(|g| g == group)
                && rule.resources.iter().flatten().any(|r| r == resource)
                && rule.verbs.iter().any(|v| v == verb)
                && rule.resource_names.is_none()
        })
    }

    fn csv_value() -> Value {
        csv().expect("the CSV builds")
    }

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
        let examples = examples();
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
        for example in &examples[3..] {
            assert_eq!(
                example["metadata"]["labels"][CLUSTER_LABEL],
                "example-infinispan"
            );
        }
    }

    #[test]
    fn the_annotation_holds_the_examples() {
        let csv = csv_value();
        let text = csv["metadata"]["annotations"]["alm-examples"]
            .as_str()
            .expect("alm-examples is a string");
        let parsed: Value = serde_json::from_str(text).expect("JSON");
        assert_eq!(parsed, Value::Array(examples()));
    }

    #[test]
    fn install_strategy_runs_the_operator_restricted() {
        let deployment = operator_deployment();
        let pod = deployment.template.spec.as_ref().expect("pod");
        assert_eq!(pod.service_account_name.as_deref(), Some(SERVICE_ACCOUNT));
        let container = &pod.containers[0];
        assert_eq!(container.image.as_deref(), Some(OPERATOR_IMAGE));
        assert_eq!(container.args, Some(vec!["run".to_string()]));
        let security = container.security_context.as_ref().expect("security");
        assert_eq!(security.read_only_root_filesystem, Some(true));
        assert_eq!(security.allow_privilege_escalation, Some(false));
        assert_eq!(security.run_as_non_root, Some(true));
        assert!(
            container
                .volume_mounts
                .iter()
                .flatten()
                .any(|m| m.mount_path == TMP_DIR)
        );
        let env: BTreeMap<&str, &EnvVar> = container
            .env
            .iter()
            .flatten()
            .map(|e| (e.name.as_str(), e))
            .collect();
        let field = |name: &str| {
            env[name]
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map(|f| f.field_path.clone())
        };
        assert_eq!(
            field("WATCH_NAMESPACE").as_deref(),
            Some("metadata.annotations['olm.targetNamespaces']")
        );
        assert_eq!(
            field("POD_NAMESPACE").as_deref(),
            Some("metadata.namespace")
        );
        // The metrics address matches the container port the probes use.
        let address: std::net::SocketAddr = env["CLUSTER_OPERATOR_METRICS_ADDRESS"]
            .value
            .as_deref()
            .expect("metrics address")
            .parse()
            .expect("socket address");
        let ports = container.ports.as_ref().expect("ports");
        assert_eq!(ports[0].container_port, i32::from(address.port()));
        assert_eq!(address.port(), METRICS_PORT);
        // The selector selects the template.
        assert_eq!(
            deployment.selector.match_labels.as_ref(),
            deployment
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.as_ref())
        );
    }

    #[test]
    fn every_value_olm_gives_watch_namespace_is_understood() {
        // OwnNamespace and SingleNamespace: one name; MultiNamespace: a list; AllNamespaces: "".
        assert_eq!(
            resolve(Some("operators"), true, Some("operators")),
            Ok(WatchScope::Namespaces(["operators".to_string()].into()))
        );
        assert_eq!(
            resolve(Some("team-a"), true, Some("operators")),
            Ok(WatchScope::Namespaces(["team-a".to_string()].into()))
        );
        assert_eq!(
            resolve(Some("team-a,team-b"), true, Some("operators")),
            Ok(WatchScope::Namespaces(
                ["team-a".to_string(), "team-b".to_string()].into()
            ))
        );
        assert_eq!(
            resolve(Some(""), true, Some("operators")),
            Ok(WatchScope::All)
        );
        let csv = csv_value();
        let modes = csv["spec"]["installModes"].as_array().expect("modes");
        assert_eq!(modes.len(), 4);
        assert!(modes.iter().all(|m| m["supported"] == true));
    }

    #[test]
    fn permissions_cover_what_the_operator_does_in_its_namespace() {
        let csv = csv_value();
        let strategy = &csv["spec"]["install"]["spec"];
        let rules: Vec<PolicyRule> =
            serde_json::from_value(strategy["permissions"][0]["rules"].clone()).expect("rules");
        assert_eq!(rules, crate::rbac::rules());
        for verb in ["get", "create", "update"] {
            assert!(
                allows(&rules, "coordination.k8s.io", "leases", verb),
                "{verb}"
            );
        }
        for verb in ["create", "patch"] {
            assert!(allows(&rules, "events.k8s.io", "events", verb), "{verb}");
        }
        let cluster_rules: Vec<PolicyRule> =
            serde_json::from_value(strategy["clusterPermissions"][0]["rules"].clone())
                .expect("cluster rules");
        assert_eq!(cluster_rules, crate::rbac::label_policy_rules());
        for account in [
            &strategy["permissions"][0]["serviceAccountName"],
            &strategy["clusterPermissions"][0]["serviceAccountName"],
        ] {
            assert_eq!(account, SERVICE_ACCOUNT);
        }
    }

    #[test]
    fn related_images_name_every_image_the_operator_runs() {
        let csv = csv_value();
        let images: Vec<&str> = csv["spec"]["relatedImages"]
            .as_array()
            .expect("related images")
            .iter()
            .filter_map(|i| i["image"].as_str())
            .collect();
        assert!(images.contains(&OPERATOR_IMAGE));
        assert!(images.contains(&DEFAULT_RESOURCES_OPERATOR_IMAGE));
        for (_, image) in SERVER_IMAGES {
            assert!(images.contains(&image));
        }
        assert_eq!(
            csv["metadata"]["annotations"]["containerImage"],
            OPERATOR_IMAGE
        );
    }

    #[test]
    fn metadata_is_valid_for_operatorhub() {
        let csv = csv_value();
        let annotations = &csv["metadata"]["annotations"];
        assert!(
            [
                "Basic Install",
                "Seamless Upgrades",
                "Full Lifecycle",
                "Deep Insights",
                "Auto Pilot"
            ]
            .contains(&annotations["capabilities"].as_str().unwrap_or_default())
        );
        assert!(
            annotations["createdAt"]
                .as_str()
                .unwrap_or_default()
                .ends_with('Z')
        );
        let icon = &csv["spec"]["icon"][0];
        let svg = base64::engine::general_purpose::STANDARD
            .decode(icon["base64data"].as_str().expect("data"))
            .expect("base64");
        assert!(String::from_utf8(svg).expect("UTF-8").starts_with("<svg"));
        assert_eq!(csv["spec"]["version"], VERSION);
        for url in [
            &csv["metadata"]["annotations"]["repository"],
            &csv["spec"]["provider"]["url"],
            &csv["spec"]["links"][0]["url"],
        ] {
            assert!(
                url.as_str().unwrap_or_default().starts_with("https://"),
                "{url}"
            );
        }
        assert!(csv["metadata"]["name"].as_str().unwrap_or_default().len() <= 63);
    }

    #[test]
    fn the_yaml_is_reproducible() {
        assert_eq!(csv_yaml().expect("yaml"), csv_yaml().expect("yaml"));
        assert!(csv_yaml().expect("yaml").starts_with("# Generated by"));
    }
}
