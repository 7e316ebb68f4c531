//! The per-cluster resources operator's objects (see [`super`]): its ServiceAccount, Role and
//! RoleBinding (exactly [`common_crds::rbac`]'s, so the cluster operator never hands out more than
//! that module defines) and the Deployment running `resources-operator run` for the cluster.
//!
//! [`build`] returns all four from the `Infinispan` CR (as read from the API server: it needs the
//! name, namespace and uid) and the operator-level [`Settings`]. Every object is named
//! [`rbac::resources_operator_name`] (`resources-operator-<cluster>`), lives in the CR's
//! namespace, carries [`labels`] and is controlled by the CR ([`owner_reference`], with
//! `blockOwnerDeletion`), so the garbage collector removes it with the cluster.
//!
//! Decisions:
//!
//! - **Server URL** ([`infinispan_url`]): without TLS (`spec.security.endpointEncryption.type`
//!   `None`), `http://<cluster>-operator.<namespace>.svc.<cluster domain>:11222`, the operators'
//!   Service: the client Service with client-IP session affinity, so that the operator's
//!   connections all reach the server pod that issued its DIGEST nonces (each node has its own:
//!   see the server module's "The operators' Service"). With TLS (`Secret`: the server then
//!   speaks only TLS on its single endpoint port), `https://` to the same Service, and
//!   `--tls-server-name=<cluster>.<namespace>.svc.<cluster domain>`: the certificate is issued
//!   for the client Service's host name, and the resources operator verifies it against that
//!   name, its system roots and, when the certificate Secret holds `ca.crt`, that CA (mounted,
//!   `--ca-bundle`). Through the client Service instead, a new connection that lands on another
//!   pod than the last costs one more DIGEST challenge (a round trip; no request failed in the
//!   measurement, `infinispan-rest/tests/multi_node.rs`).
//! - **Command line**: flags (`--name=value`, never the environment) so that `kubectl get -o
//!   yaml` shows them in one place: `run --cluster --namespace --infinispan-url
//!   --credentials-secret --log-level --metrics-address --leader-election=true`, plus the
//!   environment variable `POD_NAME` from the downward API (the Lease holder identity, design
//!   E7). The image's entrypoint must be the `resources-operator` binary (no `command` is set).
//!   `syncMode` and `conflictWinner` are *not* passed: the resources operator reads them from the
//!   CR it watches, so changing them neither freezes them nor rolls the pods.
//! - **Replicas**: [`DEFAULT_REPLICAS`] (one). The CR has no field for it yet; leader election is
//!   on anyway, so more replicas would be Ready standbys.
//! - **Resources**: `spec.resourcesOperator.resources` replaces [`default_resources`] as a
//!   whole when given (a per-key merge could pair a user's request with a smaller default limit,
//!   which the API server refuses).
//! - **Scheduling**: `spec.scheduling` describes the *server* pods. The resources operator takes
//!   its node-level parts: `nodeSelector`, `tolerations`, `priorityClassName` and
//!   `affinity.nodeAffinity`. Pod (anti-)affinity and topology spread constraints select server
//!   pods; applied to this pod, a required anti-affinity against the server pods could leave it
//!   nowhere to run, so they are left out.
//! - **Security**: the restricted Pod Security profile (non-root, no privilege escalation, every
//!   capability dropped, `RuntimeDefault` seccomp) plus a read-only root filesystem. No
//!   `runAsUser` is set (OpenShift assigns one per namespace): the image must declare a numeric
//!   non-root `USER`.
//! - **Labels**: the `app.kubernetes.io/*` set of [`labels`] plus `infinispan.org/cluster`; the
//!   Deployment's selector is [`selector_labels`] (name and instance), constant for the life of
//!   the cluster since the CR's name cannot change.
//! - **Rollout**: the pod template carries [`ROLLOUT_HASH_ANNOTATION`], a SHA-256 of the pod
//!   template's labels and spec (image, flags, resources, scheduling, pull secrets...) and of
//!   [`Settings::credentials_revision`]. Kubernetes rolls the pods on any template change
//!   already; the annotation adds the one input that is not in the template (the credentials,
//!   which the resources operator reads once at start) and shows why a rollout happened. Nothing
//!   else of the CR (its labels, annotations, replicas, server settings, sync mode) reaches the
//!   template, so nothing else rolls the pods.

use std::collections::BTreeMap;

use common_crds::Infinispan;
use common_crds::infinispan::{EncryptionType, LogLevel};
use common_crds::naming::{is_dns1123_label, is_dns1123_subdomain};
use common_crds::rbac::{self, OperatorScope};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, KeyToPath,
    LocalObjectReference, ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, SecretVolumeSource, ServiceAccount, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sha2::{Digest, Sha256};

use super::server::{client_service_name, operator_service_name};

/// Cluster domain of the server's Service URL when the cluster operator is not told otherwise.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";
/// The server's endpoint port (REST and Hot Rod), the port of its client Service.
pub const SERVER_PORT: u16 = 11222;
/// Port of the resources operator's `/metrics`, `/healthz` and `/readyz`.
pub const METRICS_PORT: u16 = 8080;
/// Name of [`METRICS_PORT`] in the container, which the probes use.
pub const METRICS_PORT_NAME: &str = "metrics";
/// Name of the resources operator's container.
pub const CONTAINER_NAME: &str = "resources-operator";
/// Replicas of the Deployment (the CR has no field for it).
pub const DEFAULT_REPLICAS: i32 = 1;
/// Where the server's CA (`ca.crt` of the certificate Secret) is mounted.
pub const SERVER_CA_DIR: &str = "/etc/infinispan/server-ca";
/// The key of the certificate Secret holding the CA, and the file name.
pub const SERVER_CA_KEY: &str = "ca.crt";
const SERVER_CA_VOLUME: &str = "server-ca";
/// Pod-template annotation: the SHA-256 (hex) of everything that must roll the pods.
pub const ROLLOUT_HASH_ANNOTATION: &str = "infinispan.org/rollout-hash";

/// `app.kubernetes.io/name` of the resources operator's objects.
pub const APP_NAME: &str = "infinispan-resources-operator";
/// `app.kubernetes.io/component` of the resources operator's objects.
pub const COMPONENT: &str = "resources-operator";
pub use super::PART_OF;

/// What the builders need beyond the CR: the cluster operator's own settings and the name of the
/// cluster's credentials Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Image of the resources operator; `spec.resourcesOperator.image` overrides it.
    pub image: String,
    /// Cluster domain of the server's Service URL (default [`DEFAULT_CLUSTER_DOMAIN`]).
    pub cluster_domain: String,
    /// Secret (in the CR's namespace) with the operators' admin credentials of this cluster
    /// (keys `username` and `password`), the one named in `status.operatorCredentialsSecret`.
    pub credentials_secret: String,
    /// A token that changes when the content of the credentials Secret changes (a digest of its
    /// data, never the data): the resources operator reads the Secret once at start, so a new
    /// value rolls its pods. `None`: rotation is not tracked.
    pub credentials_revision: Option<String>,
    /// Image pull Secrets of the pods (they must exist in the CR's namespace).
    pub image_pull_secrets: Vec<String>,
    /// With endpoint TLS: the certificate Secret has a `ca.crt`, which the pod then mounts and
    /// trusts (`--ca-bundle`), so a server certificate from a private CA is verified. Without
    /// it the pod trusts the system roots only.
    pub server_ca: bool,
}

impl Settings {
    /// Settings with the default cluster domain, no pull Secrets and untracked credentials.
    pub fn new(image: impl Into<String>, credentials_secret: impl Into<String>) -> Self {
        Self {
            image: image.into(),
            cluster_domain: DEFAULT_CLUSTER_DOMAIN.to_string(),
            credentials_secret: credentials_secret.into(),
            credentials_revision: None,
            image_pull_secrets: Vec::new(),
            server_ca: false,
        }
    }
}

/// The CR or the settings cannot give the resources operator's objects.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("the Infinispan CR has no metadata.name")]
    MissingName,
    #[error("the Infinispan CR {name} has no metadata.namespace")]
    MissingNamespace { name: String },
    #[error(
        "the Infinispan CR {namespace}/{name} has no metadata.uid (build from the object read from the API server)"
    )]
    MissingUid { namespace: String, name: String },
    #[error(
        "the Infinispan CR name {name:?} is not a DNS-1123 label (1 to 63 characters of a-z, 0-9 and '-'): it names the cluster's Service and is a label value"
    )]
    InvalidName { name: String },
    #[error("no resources operator image: the setting is empty and the CR sets none")]
    MissingImage,
    #[error("the cluster domain {domain:?} is not a DNS name")]
    InvalidClusterDomain { domain: String },
    #[error("the credentials Secret name {name:?} is not a valid object name")]
    InvalidCredentialsSecret { name: String },
    #[error("hashing the pod template: {0}")]
    Hash(#[source] serde_json::Error),
}

/// The four objects of one cluster's resources operator.
#[derive(Clone, Debug, PartialEq)]
pub struct Objects {
    pub service_account: ServiceAccount,
    pub role: Role,
    pub role_binding: RoleBinding,
    pub deployment: Deployment,
}

/// Every object of the resources operator of `cluster`.
pub fn build(cluster: &Infinispan, settings: &Settings) -> Result<Objects, BuildError> {
    Ok(Objects {
        service_account: service_account(cluster, settings)?,
        role: role(cluster, settings)?,
        role_binding: role_binding(cluster, settings)?,
        deployment: deployment(cluster, settings)?,
    })
}

/// The ServiceAccount the pods run as ([`rbac::service_account`], labelled and owned).
pub fn service_account(
    cluster: &Infinispan,
    settings: &Settings,
) -> Result<ServiceAccount, BuildError> {
    let id = Identity::of(cluster, settings)?;
    let mut account = rbac::service_account(id.scope());
    id.own(&mut account.metadata);
    Ok(account)
}

/// The Role with exactly [`rbac::rules`] (labelled and owned).
pub fn role(cluster: &Infinispan, settings: &Settings) -> Result<Role, BuildError> {
    let id = Identity::of(cluster, settings)?;
    let mut role = rbac::role(id.scope());
    id.own(&mut role.metadata);
    Ok(role)
}

/// The RoleBinding of the Role to the ServiceAccount ([`rbac::role_binding`], labelled and
/// owned).
pub fn role_binding(cluster: &Infinispan, settings: &Settings) -> Result<RoleBinding, BuildError> {
    let id = Identity::of(cluster, settings)?;
    let mut binding = rbac::role_binding(id.scope(), &rbac::resources_operator_name(id.name));
    id.own(&mut binding.metadata);
    Ok(binding)
}

/// The Deployment running `resources-operator run` for the cluster (see the module
/// documentation for its decisions).
pub fn deployment(cluster: &Infinispan, settings: &Settings) -> Result<Deployment, BuildError> {
    let id = Identity::of(cluster, settings)?;
    let image = image(cluster, settings)?;
    let url = infinispan_url(cluster, &settings.cluster_domain)?;
    let spec = &cluster.spec.resources_operator;
    let object_name = rbac::resources_operator_name(id.name);

    // The server's CA, from the certificate Secret (TLS only).
    let ca_secret = cluster
        .spec
        .security
        .endpoint_encryption
        .cert_secret_name
        .clone()
        .filter(|_| settings.server_ca && url.starts_with("https://"));
    let mut args = vec![
        "run".to_string(),
        format!("--cluster={}", id.name),
        format!("--namespace={}", id.namespace),
        format!("--infinispan-url={url}"),
        format!("--credentials-secret={}", settings.credentials_secret),
        format!("--log-level={}", log_level(spec.log_level)),
        format!("--metrics-address=0.0.0.0:{METRICS_PORT}"),
        "--leader-election=true".to_string(),
    ];
    if ca_secret.is_some() {
        args.push(format!("--ca-bundle={SERVER_CA_DIR}/{SERVER_CA_KEY}"));
    }
    if url.starts_with("https://") {
        args.push(format!(
            "--tls-server-name={}",
            client_service_host(cluster, &settings.cluster_domain)?
        ));
    }
    let container = Container {
        name: CONTAINER_NAME.to_string(),
        image: Some(image),
        args: Some(args),
        env: Some(vec![EnvVar {
            name: "POD_NAME".to_string(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.name".to_string(),
                    api_version: None,
                }),
                ..EnvVarSource::default()
            }),
            value: None,
        }]),
        ports: Some(vec![ContainerPort {
            name: Some(METRICS_PORT_NAME.to_string()),
            container_port: i32::from(METRICS_PORT),
            protocol: Some("TCP".to_string()),
            ..ContainerPort::default()
        }]),
        liveness_probe: Some(probe("/healthz", 10)),
        readiness_probe: Some(probe("/readyz", 5)),
        resources: Some(spec.resources.clone().unwrap_or_else(default_resources)),
        security_context: Some(super::restricted_container(true)),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        volume_mounts: ca_secret.as_ref().map(|_| {
            vec![VolumeMount {
                name: SERVER_CA_VOLUME.to_string(),
                mount_path: SERVER_CA_DIR.to_string(),
                read_only: Some(true),
                ..VolumeMount::default()
            }]
        }),
        ..Container::default()
    };

    let scheduling = cluster.spec.scheduling.clone().unwrap_or_default();
    let pod = PodSpec {
        containers: vec![container],
        service_account_name: Some(object_name.clone()),
        volumes: ca_secret.map(|secret| {
            vec![Volume {
                name: SERVER_CA_VOLUME.to_string(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret),
                    items: Some(vec![KeyToPath {
                        key: SERVER_CA_KEY.to_string(),
                        path: SERVER_CA_KEY.to_string(),
                        ..KeyToPath::default()
                    }]),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            }]
        }),
        automount_service_account_token: Some(true),
        enable_service_links: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            seccomp_profile: Some(super::runtime_default()),
            ..PodSecurityContext::default()
        }),
        image_pull_secrets: non_empty(
            settings
                .image_pull_secrets
                .iter()
                .map(|name| LocalObjectReference { name: name.clone() })
                .collect(),
        ),
        node_selector: (!scheduling.node_selector.is_empty()).then_some(scheduling.node_selector),
        tolerations: non_empty(scheduling.tolerations),
        priority_class_name: scheduling.priority_class_name,
        affinity: scheduling
            .affinity
            .and_then(|affinity| affinity.node_affinity)
            .map(|node_affinity| Affinity {
                node_affinity: Some(node_affinity),
                ..Affinity::default()
            }),
        ..PodSpec::default()
    };

    let mut template = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(id.name)),
            ..ObjectMeta::default()
        }),
        spec: Some(pod),
    };
    let hash = rollout_hash(&template, settings.credentials_revision.as_deref())?;
    if let Some(metadata) = template.metadata.as_mut() {
        metadata.annotations = Some(BTreeMap::from([(
            ROLLOUT_HASH_ANNOTATION.to_string(),
            hash,
        )]));
    }

    let mut metadata = ObjectMeta {
        name: Some(object_name),
        namespace: Some(id.namespace.to_string()),
        ..ObjectMeta::default()
    };
    id.own(&mut metadata);
    Ok(Deployment {
        metadata,
        spec: DeploymentSpec {
            replicas: Some(DEFAULT_REPLICAS),
            selector: LabelSelector {
                match_labels: Some(selector_labels(id.name)),
                match_expressions: None,
            },
            template,
            ..DeploymentSpec::default()
        },
        status: None,
    })
}

/// The server URL the resources operator is given (see the module documentation): the
/// operators' Service ([`operator_service_url`]), `https` when the endpoint is encrypted
/// (`spec.security.endpointEncryption.type: Secret`; the certificate is then verified against
/// [`client_service_host`], `--tls-server-name`).
pub fn infinispan_url(cluster: &Infinispan, cluster_domain: &str) -> Result<String, BuildError> {
    operator_service_url(cluster, cluster_domain)
}

/// The URL of the cluster's operators' Service (client-IP session affinity):
/// `http(s)://<cluster>-operator.<namespace>.svc.<cluster_domain>:11222`.
pub fn operator_service_url(
    cluster: &Infinispan,
    cluster_domain: &str,
) -> Result<String, BuildError> {
    let host = service_host(cluster, cluster_domain, operator_service_name)?;
    Ok(format!(
        "{}://{host}:{SERVER_PORT}",
        endpoint_scheme(cluster)
    ))
}

/// `<cluster>.<namespace>.svc.<cluster_domain>`, the client Service's host name: the name a
/// server certificate is issued for.
pub fn client_service_host(
    cluster: &Infinispan,
    cluster_domain: &str,
) -> Result<String, BuildError> {
    service_host(cluster, cluster_domain, client_service_name)
}

/// `<service>.<namespace>.svc.<cluster_domain>` of the cluster's Service named by `service`.
fn service_host(
    cluster: &Infinispan,
    cluster_domain: &str,
    service: fn(&str) -> String,
) -> Result<String, BuildError> {
    let (name, namespace) = name_and_namespace(cluster)?;
    let domain = cluster_domain.strip_suffix('.').unwrap_or(cluster_domain);
    if !is_dns1123_subdomain(domain) {
        return Err(BuildError::InvalidClusterDomain {
            domain: cluster_domain.to_string(),
        });
    }
    Ok(format!("{}.{namespace}.svc.{domain}", service(name)))
}

/// The scheme of the cluster's endpoint: `https` when it is encrypted
/// (`spec.security.endpointEncryption.type: Secret`: the server then speaks only TLS on its one
/// port), `http` otherwise. The one place of that rule (the cluster operator's own server
/// access uses it too, `crate::servers`).
pub fn endpoint_scheme(cluster: &Infinispan) -> &'static str {
    match cluster.spec.security.endpoint_encryption.type_ {
        EncryptionType::None => "http",
        EncryptionType::Secret => "https",
    }
}

/// The labels of every object of the resources operator of `cluster` (and of its pods).
pub fn labels(cluster: &str) -> BTreeMap<String, String> {
    super::labels(APP_NAME, COMPONENT, cluster)
}

/// The Deployment's selector: the name and the instance (the cluster), which never change.
pub fn selector_labels(cluster: &str) -> BTreeMap<String, String> {
    super::selector_labels(APP_NAME, cluster)
}

/// The controller owner reference to the `Infinispan` CR ([`super::controller_reference`]).
pub fn owner_reference(cluster: &Infinispan) -> Result<OwnerReference, BuildError> {
    let (name, namespace) = name_and_namespace(cluster)?;
    let uid = cluster
        .metadata
        .uid
        .clone()
        .filter(|uid| !uid.is_empty())
        .ok_or_else(|| BuildError::MissingUid {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })?;
    Ok(super::controller_reference(name, uid))
}

/// Requests and limits when the CR sets none: small, the operator holds a few caches of CRs.
pub fn default_resources() -> ResourceRequirements {
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.to_string())),
            ("memory".to_string(), Quantity(memory.to_string())),
        ])
    };
    ResourceRequirements {
        requests: Some(quantities("50m", "64Mi")),
        limits: Some(quantities("500m", "256Mi")),
        claims: None,
    }
}

/// The CR's identity and the checked settings every object needs.
struct Identity<'a> {
    name: &'a str,
    namespace: &'a str,
    owner: OwnerReference,
    credentials_secret: &'a str,
}

impl<'a> Identity<'a> {
    fn of(cluster: &'a Infinispan, settings: &'a Settings) -> Result<Self, BuildError> {
        let (name, namespace) = name_and_namespace(cluster)?;
        let owner = owner_reference(cluster)?;
        if !is_dns1123_subdomain(&settings.credentials_secret) {
            return Err(BuildError::InvalidCredentialsSecret {
                name: settings.credentials_secret.clone(),
            });
        }
        Ok(Self {
            name,
            namespace,
            owner,
            credentials_secret: &settings.credentials_secret,
        })
    }

    fn scope(&self) -> OperatorScope<'a> {
        OperatorScope {
            cluster: self.name,
            namespace: self.namespace,
            credentials_secret: self.credentials_secret,
        }
    }

    /// Adds the labels and the owner reference to `metadata`.
    fn own(&self, metadata: &mut ObjectMeta) {
        metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .extend(labels(self.name));
        metadata.owner_references = Some(vec![self.owner.clone()]);
    }
}

fn name_and_namespace(cluster: &Infinispan) -> Result<(&str, &str), BuildError> {
    let name = cluster
        .metadata
        .name
        .as_deref()
        .filter(|name| !name.is_empty())
        .ok_or(BuildError::MissingName)?;
    if !is_dns1123_label(name) {
        return Err(BuildError::InvalidName {
            name: name.to_string(),
        });
    }
    let namespace = cluster
        .metadata
        .namespace
        .as_deref()
        .filter(|namespace| !namespace.is_empty())
        .ok_or_else(|| BuildError::MissingNamespace {
            name: name.to_string(),
        })?;
    Ok((name, namespace))
}

fn image(cluster: &Infinispan, settings: &Settings) -> Result<String, BuildError> {
    cluster
        .spec
        .resources_operator
        .image
        .as_deref()
        .filter(|image| !image.trim().is_empty())
        .or_else(|| Some(settings.image.as_str()).filter(|image| !image.trim().is_empty()))
        .map(str::to_string)
        .ok_or(BuildError::MissingImage)
}

fn log_level(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Trace => "trace",
        LogLevel::Debug => "debug",
        LogLevel::Info => "info",
        LogLevel::Warn => "warn",
        LogLevel::Error => "error",
    }
}

fn probe(path: &str, period_seconds: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_string()),
            port: IntOrString::String(METRICS_PORT_NAME.to_string()),
            scheme: Some("HTTP".to_string()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period_seconds),
        timeout_seconds: Some(2),
        failure_threshold: Some(3),
        ..Probe::default()
    }
}

fn non_empty<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

/// SHA-256 (hex) of the template (before the annotation is set) and the credentials revision.
fn rollout_hash(
    template: &PodTemplateSpec,
    credentials_revision: Option<&str>,
) -> Result<String, BuildError> {
    let mut hasher = Sha256::new();
    hasher.update(serde_json::to_vec(template).map_err(BuildError::Hash)?);
    hasher.update([0]);
    if let Some(revision) = credentials_revision {
        hasher.update(revision.as_bytes());
    }
    Ok(format!("{:x}", hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::snapshot::{self, assert_snapshot};
    use common_crds::InfinispanSpec;
    use common_crds::infinispan::{
        EndpointEncryption, ResourcesOperatorSpec, SchedulingSpec, SecuritySpec, SyncMode,
    };
    use common_crds::labels::CLUSTER_LABEL;
    use k8s_openapi::api::core::v1::{
        NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm,
        PodAntiAffinity, Toleration,
    };

    const UID: &str = "6f0c8a7e-4f5b-4d6a-9c1e-2b3a4c5d6e7f";

    /// The spec of `{}` (every default), as the API server stores it.
    fn default_spec() -> InfinispanSpec {
        serde_json::from_value(serde_json::json!({})).unwrap_or_else(|e| panic!("{e}"))
    }

    fn cluster(name: &str, namespace: &str) -> Infinispan {
        let mut cr = Infinispan::new(name, default_spec());
        cr.metadata.namespace = Some(namespace.to_string());
        cr.metadata.uid = Some(UID.to_string());
        cr
    }

    fn settings() -> Settings {
        Settings::new(
            "quay.io/infinispan/resources-operator:0.1.0",
            "demo-operator-credentials",
        )
    }

    /// A CR setting everything the resources operator takes from it.
    fn full_cluster() -> Infinispan {
        let mut cr = cluster("demo", "team-a");
        cr.metadata.labels = Some(BTreeMap::from([("team".to_string(), "a".to_string())]));
        cr.spec.replicas = 3;
        cr.spec.security = SecuritySpec {
            endpoint_encryption: EndpointEncryption {
                type_: EncryptionType::Secret,
                cert_secret_name: Some("demo-tls".to_string()),
            },
            ..SecuritySpec::default()
        };
        cr.spec.resources_operator = ResourcesOperatorSpec {
            resources: Some(ResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "memory".to_string(),
                    Quantity("128Mi".to_string()),
                )])),
                limits: Some(BTreeMap::from([(
                    "memory".to_string(),
                    Quantity("512Mi".to_string()),
                )])),
                claims: None,
            }),
            log_level: LogLevel::Debug,
            image: Some("registry.example.com/mirror/resources-operator:0.1.0".to_string()),
            sync_mode: SyncMode::ToServer,
            ..ResourcesOperatorSpec::default()
        };
        cr.spec.scheduling = Some(SchedulingSpec {
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: vec![NodeSelectorTerm {
                            match_expressions: Some(vec![NodeSelectorRequirement {
                                key: "kubernetes.io/arch".to_string(),
                                operator: "In".to_string(),
                                values: Some(vec!["amd64".to_string(), "arm64".to_string()]),
                            }]),
                            match_fields: None,
                        }],
                    }),
                    preferred_during_scheduling_ignored_during_execution: None,
                }),
                pod_anti_affinity: Some(PodAntiAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![
                        PodAffinityTerm {
                            label_selector: Some(LabelSelector {
                                match_labels: Some(BTreeMap::from([(
                                    "app.kubernetes.io/name".to_string(),
                                    "infinispan".to_string(),
                                )])),
                                match_expressions: None,
                            }),
                            topology_key: "kubernetes.io/hostname".to_string(),
                            ..PodAffinityTerm::default()
                        },
                    ]),
                    preferred_during_scheduling_ignored_during_execution: None,
                }),
                pod_affinity: None,
            }),
            tolerations: vec![Toleration {
                key: Some("dedicated".to_string()),
                operator: Some("Equal".to_string()),
                value: Some("infinispan".to_string()),
                effect: Some("NoSchedule".to_string()),
                toleration_seconds: None,
            }],
            node_selector: BTreeMap::from([(
                "node-role.example.com/data".to_string(),
                "true".to_string(),
            )]),
            priority_class_name: Some("infinispan-critical".to_string()),
            topology_spread_constraints: Vec::new(),
        });
        cr
    }

    fn full_settings() -> Settings {
        Settings {
            cluster_domain: "corp.example.".to_string(),
            credentials_revision: Some("3f2a9c".to_string()),
            image_pull_secrets: vec!["registry-example".to_string()],
            ..settings()
        }
    }

    fn built(cr: &Infinispan, settings: &Settings) -> Objects {
        build(cr, settings).unwrap_or_else(|e| panic!("{e}"))
    }

    fn pod_spec(deployment: &Deployment) -> PodSpec {
        deployment
            .spec
            .template
            .spec
            .clone()
            .unwrap_or_else(|| panic!("no pod spec"))
    }

    fn container(deployment: &Deployment) -> Container {
        let pod = pod_spec(deployment);
        assert_eq!(pod.containers.len(), 1);
        pod.containers[0].clone()
    }

    fn hash(deployment: &Deployment) -> String {
        deployment
            .spec
            .template
            .metadata
            .as_ref()
            .and_then(|meta| meta.annotations.as_ref())
            .and_then(|annotations| annotations.get(ROLLOUT_HASH_ANNOTATION))
            .cloned()
            .unwrap_or_else(|| panic!("no {ROLLOUT_HASH_ANNOTATION}"))
    }

    fn args(deployment: &Deployment) -> Vec<String> {
        container(deployment).args.unwrap_or_default()
    }

    // ---- Golden snapshots ---------------------------------------------------------------

    /// The objects as one multi-document YAML, in the order they are applied.
    fn yaml(objects: &Objects) -> String {
        snapshot::yaml([
            serde_saphyr::to_string(&objects.service_account),
            serde_saphyr::to_string(&objects.role),
            serde_saphyr::to_string(&objects.role_binding),
            serde_saphyr::to_string(&objects.deployment),
        ])
    }

    #[test]
    fn snapshot_of_a_default_cluster() {
        let objects = built(&cluster("demo", "team-a"), &settings());
        assert_snapshot("resources_operator_default.yaml", &yaml(&objects));
    }

    #[test]
    fn snapshot_of_a_cluster_setting_everything() {
        let objects = built(&full_cluster(), &full_settings());
        assert_snapshot("resources_operator_full.yaml", &yaml(&objects));
    }

    // ---- What matters -------------------------------------------------------------------

    #[test]
    fn the_role_has_exactly_the_rbac_modules_rules() {
        for (cr, settings) in [
            (cluster("demo", "team-a"), settings()),
            (full_cluster(), full_settings()),
        ] {
            let objects = built(&cr, &settings);
            let scope = OperatorScope {
                cluster: "demo",
                namespace: "team-a",
                credentials_secret: "demo-operator-credentials",
            };
            assert_eq!(objects.role.rules, Some(rbac::rules(scope)));
            assert_eq!(objects.role.rules, rbac::role(scope).rules);
            assert_eq!(
                objects.role_binding.role_ref,
                rbac::role_binding(scope, "resources-operator-demo").role_ref
            );
            assert_eq!(
                objects.role_binding.subjects,
                rbac::role_binding(scope, "resources-operator-demo").subjects
            );
            let name = Some("resources-operator-demo".to_string());
            assert_eq!(objects.service_account.metadata.name, name);
            assert_eq!(objects.role.metadata.name, name);
            assert_eq!(objects.role_binding.metadata.name, name);
            assert_eq!(objects.deployment.metadata.name, name);
            assert_eq!(pod_spec(&objects.deployment).service_account_name, name);
        }
    }

    #[test]
    fn every_object_is_owned_by_the_cluster_and_in_its_namespace() {
        let objects = built(&full_cluster(), &full_settings());
        let expected = OwnerReference {
            api_version: "infinispan.org/v1".to_string(),
            kind: "Infinispan".to_string(),
            name: "demo".to_string(),
            uid: UID.to_string(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        for metadata in [
            &objects.service_account.metadata,
            &objects.role.metadata,
            &objects.role_binding.metadata,
            &objects.deployment.metadata,
        ] {
            assert_eq!(metadata.owner_references, Some(vec![expected.clone()]));
            assert_eq!(metadata.namespace.as_deref(), Some("team-a"));
            let labels = metadata.labels.clone().unwrap_or_default();
            assert_eq!(labels, super::labels("demo"));
            for key in [
                "app.kubernetes.io/name",
                "app.kubernetes.io/instance",
                "app.kubernetes.io/component",
                "app.kubernetes.io/managed-by",
                "app.kubernetes.io/part-of",
                CLUSTER_LABEL,
            ] {
                assert!(labels.contains_key(key), "{key} in {labels:?}");
            }
            // The CR's own labels are not copied.
            assert!(!labels.contains_key("team"));
        }
    }

    #[test]
    fn the_selector_never_changes_and_selects_the_pods() {
        let default = built(&cluster("demo", "team-a"), &settings()).deployment;
        let full = built(&full_cluster(), &full_settings()).deployment;
        let selector = |d: &Deployment| Some(d.spec.selector.clone());
        assert_eq!(selector(&default), selector(&full));
        assert_eq!(
            selector(&default).and_then(|s| s.match_labels),
            Some(BTreeMap::from([
                (
                    "app.kubernetes.io/name".to_string(),
                    "infinispan-resources-operator".to_string()
                ),
                ("app.kubernetes.io/instance".to_string(), "demo".to_string()),
            ]))
        );
        let pod_labels = full
            .spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        for (key, value) in selector_labels("demo") {
            assert_eq!(pod_labels.get(&key), Some(&value), "{key}");
        }
        // Another cluster in the namespace selects other pods.
        let other = built(&cluster("other", "team-a"), &settings()).deployment;
        assert_ne!(selector(&default), selector(&other));
    }

    /// The checks of the restricted Pod Security Standard (and a read-only root filesystem).
    #[test]
    fn the_pod_passes_the_restricted_profile() {
        for deployment in [
            built(&cluster("demo", "team-a"), &settings()).deployment,
            built(&full_cluster(), &full_settings()).deployment,
        ] {
            let pod = pod_spec(&deployment);
            let pod_context = pod.security_context.clone().unwrap_or_default();
            assert_eq!(pod.host_network, None);
            assert_eq!(pod.host_pid, None);
            assert_eq!(pod.host_ipc, None);
            assert_eq!(pod.volumes, None);
            assert_eq!(pod_context.run_as_user, None);
            assert_eq!(pod_context.run_as_non_root, Some(true));
            assert_eq!(
                pod_context.seccomp_profile.map(|p| p.type_).as_deref(),
                Some("RuntimeDefault")
            );
            assert_eq!(pod.init_containers, None);
            for container in &pod.containers {
                let context = container.security_context.clone().unwrap_or_default();
                assert_eq!(context.allow_privilege_escalation, Some(false));
                assert_ne!(context.privileged, Some(true));
                assert_eq!(context.read_only_root_filesystem, Some(true));
                assert_eq!(context.run_as_non_root, Some(true));
                assert_eq!(context.run_as_user, None);
                let capabilities = context.capabilities.unwrap_or_default();
                assert_eq!(capabilities.drop, Some(vec!["ALL".to_string()]));
                assert_eq!(capabilities.add, None);
                assert_eq!(
                    context.seccomp_profile.map(|p| p.type_).as_deref(),
                    Some("RuntimeDefault")
                );
                for port in container.ports.iter().flatten() {
                    assert_eq!(port.host_port, None);
                }
            }
        }
    }

    #[test]
    fn probes_use_the_metrics_port() {
        let container = container(&built(&cluster("demo", "team-a"), &settings()).deployment);
        let port = container
            .ports
            .clone()
            .unwrap_or_default()
            .into_iter()
            .find(|port| port.name.as_deref() == Some(METRICS_PORT_NAME))
            .unwrap_or_else(|| panic!("no metrics port"));
        assert_eq!(port.container_port, 8080);
        assert!(
            args(&built(&cluster("demo", "team-a"), &settings()).deployment)
                .contains(&"--metrics-address=0.0.0.0:8080".to_string())
        );
        for (probe, path) in [
            (container.liveness_probe, "/healthz"),
            (container.readiness_probe, "/readyz"),
        ] {
            let get = probe
                .and_then(|p| p.http_get)
                .unwrap_or_else(|| panic!("no {path} probe"));
            assert_eq!(get.path.as_deref(), Some(path));
            assert_eq!(get.port, IntOrString::String("metrics".to_string()));
        }
    }

    #[test]
    fn the_pod_runs_the_sync_of_its_cluster_with_leader_election() {
        let deployment = built(&cluster("demo", "team-a"), &settings()).deployment;
        assert_eq!(
            args(&deployment),
            [
                "run",
                "--cluster=demo",
                "--namespace=team-a",
                "--infinispan-url=http://demo-operator.team-a.svc.cluster.local:11222",
                "--credentials-secret=demo-operator-credentials",
                "--log-level=info",
                "--metrics-address=0.0.0.0:8080",
                "--leader-election=true",
            ]
        );
        assert_eq!(deployment.spec.replicas, Some(1));
        let container = container(&deployment);
        assert_eq!(container.command, None);
        assert_eq!(
            container.image.as_deref(),
            Some("quay.io/infinispan/resources-operator:0.1.0")
        );
        let env = container.env.unwrap_or_default();
        assert_eq!(env.len(), 1);
        assert_eq!(env[0].name, "POD_NAME");
        assert_eq!(
            env[0]
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map(|f| f.field_path.as_str()),
            Some("metadata.name")
        );
        assert_eq!(container.resources, Some(default_resources()));
        let defaults = default_resources();
        for part in [defaults.requests, defaults.limits] {
            let part = part.unwrap_or_default();
            assert!(part.contains_key("cpu") && part.contains_key("memory"));
        }
    }

    #[test]
    fn the_cr_and_the_settings_reach_the_pod() {
        let deployment = built(&full_cluster(), &full_settings()).deployment;
        let args = args(&deployment);
        assert!(args.contains(
            &"--infinispan-url=https://demo-operator.team-a.svc.corp.example:11222".into()
        ));
        assert!(args.contains(&"--tls-server-name=demo.team-a.svc.corp.example".into()));
        assert!(args.contains(&"--log-level=debug".to_string()));
        // The sync mode is read from the CR by the operator itself.
        assert!(
            !args.iter().any(|a| a.starts_with("--sync-mode")),
            "{args:?}"
        );
        assert!(!args.iter().any(|a| a.starts_with("--conflict-winner")));
        // The server's replicas are not the operator's.
        assert_eq!(deployment.spec.replicas, Some(1));
        let container = container(&deployment);
        assert_eq!(
            container.image.as_deref(),
            Some("registry.example.com/mirror/resources-operator:0.1.0")
        );
        assert_eq!(
            container.resources,
            full_cluster().spec.resources_operator.resources
        );
        let pod = pod_spec(&deployment);
        let scheduling = full_cluster().spec.scheduling.unwrap_or_default();
        assert_eq!(pod.node_selector, Some(scheduling.node_selector));
        assert_eq!(pod.tolerations, Some(scheduling.tolerations));
        assert_eq!(
            pod.priority_class_name.as_deref(),
            Some("infinispan-critical")
        );
        let affinity = pod.affinity.unwrap_or_default();
        assert_eq!(
            affinity.node_affinity,
            scheduling.affinity.and_then(|a| a.node_affinity)
        );
        assert_eq!(affinity.pod_anti_affinity, None);
        assert_eq!(affinity.pod_affinity, None);
        assert_eq!(
            pod.image_pull_secrets,
            Some(vec![LocalObjectReference {
                name: "registry-example".to_string()
            }])
        );
        // Nothing of the scheduling when the CR has none.
        let pod = pod_spec(&built(&cluster("demo", "team-a"), &settings()).deployment);
        assert_eq!(pod.affinity, None);
        assert_eq!(pod.tolerations, None);
        assert_eq!(pod.node_selector, None);
        assert_eq!(pod.priority_class_name, None);
        assert_eq!(pod.image_pull_secrets, None);
    }

    #[test]
    fn the_url_follows_the_endpoint_encryption() {
        let mut cr = cluster("demo", "ns");
        let url = |cr: &Infinispan, domain: &str| infinispan_url(cr, domain).ok();
        // Plain: the operators' Service (client-IP session affinity).
        assert_eq!(
            url(&cr, "cluster.local").as_deref(),
            Some("http://demo-operator.ns.svc.cluster.local:11222")
        );
        // TLS: the same Service; the certificate is verified against the client Service's
        // name (--tls-server-name, see the Deployment's test).
        cr.spec.security.endpoint_encryption.type_ = EncryptionType::Secret;
        assert_eq!(
            url(&cr, "cluster.local.").as_deref(),
            Some("https://demo-operator.ns.svc.cluster.local:11222")
        );
        assert_eq!(
            operator_service_url(&cr, "cluster.local.").ok().as_deref(),
            Some("https://demo-operator.ns.svc.cluster.local:11222")
        );
        assert_eq!(
            client_service_host(&cr, "cluster.local.").ok().as_deref(),
            Some("demo.ns.svc.cluster.local")
        );
        for encryption in [EncryptionType::None, EncryptionType::Secret] {
            cr.spec.security.endpoint_encryption.type_ = encryption;
            for bad in ["", ".", "Cluster.Local", "a..b", "-x"] {
                for result in [
                    infinispan_url(&cr, bad),
                    operator_service_url(&cr, bad),
                    client_service_host(&cr, bad),
                ] {
                    assert!(
                        matches!(result, Err(BuildError::InvalidClusterDomain { .. })),
                        "{bad:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_rollout_hash_changes_only_with_what_must_roll_the_pods() {
        let base_cr = full_cluster();
        let base_settings = full_settings();
        let base = hash(&built(&base_cr, &base_settings).deployment);
        assert_eq!(base.len(), 64);
        assert_eq!(base, hash(&built(&base_cr, &base_settings).deployment));

        // Unrelated: the CR's metadata, the server's settings, what the operator reads live.
        let mut unrelated: Vec<(&str, Infinispan)> = Vec::new();
        let mut cr = base_cr.clone();
        cr.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert("cost-center".to_string(), "42".to_string());
        unrelated.push(("labels", cr));
        let mut cr = base_cr.clone();
        cr.metadata.annotations = Some(BTreeMap::from([("a".to_string(), "b".to_string())]));
        cr.metadata.generation = Some(7);
        cr.metadata.resource_version = Some("12345".to_string());
        unrelated.push(("annotations, generation, resourceVersion", cr));
        let mut cr = base_cr.clone();
        cr.spec.replicas = 5;
        cr.spec.version = Some("16.0.7".to_string());
        unrelated.push(("server replicas and version", cr));
        let mut cr = base_cr.clone();
        cr.spec.resources_operator.sync_mode = SyncMode::FromServer;
        unrelated.push(("sync mode", cr));
        let mut cr = base_cr.clone();
        cr.status = Some(Default::default());
        unrelated.push(("status", cr));
        for (what, cr) in unrelated {
            assert_eq!(hash(&built(&cr, &base_settings).deployment), base, "{what}");
        }

        // What must roll the pods.
        let mut rolling: Vec<(&str, Infinispan, Settings)> = Vec::new();
        let mut cr = base_cr.clone();
        cr.spec.resources_operator.image = Some("other:1".to_string());
        rolling.push(("image of the CR", cr, base_settings.clone()));
        let mut cr = base_cr.clone();
        cr.spec.resources_operator.resources = None;
        rolling.push(("resources", cr, base_settings.clone()));
        let mut cr = base_cr.clone();
        cr.spec.resources_operator.log_level = LogLevel::Trace;
        rolling.push(("log level", cr, base_settings.clone()));
        let mut cr = base_cr.clone();
        cr.spec.security.endpoint_encryption = EndpointEncryption::default();
        rolling.push(("encryption (URL)", cr, base_settings.clone()));
        let mut cr = base_cr.clone();
        cr.spec.scheduling = None;
        rolling.push(("scheduling", cr, base_settings.clone()));
        let changed = Settings {
            cluster_domain: "cluster.local".to_string(),
            ..base_settings.clone()
        };
        rolling.push(("cluster domain", base_cr.clone(), changed));
        let changed = Settings {
            credentials_revision: Some("new".to_string()),
            ..base_settings.clone()
        };
        rolling.push(("credentials revision", base_cr.clone(), changed));
        let changed = Settings {
            credentials_secret: "other-credentials".to_string(),
            ..base_settings.clone()
        };
        rolling.push(("credentials Secret", base_cr.clone(), changed));
        let changed = Settings {
            image_pull_secrets: Vec::new(),
            ..base_settings.clone()
        };
        rolling.push(("pull Secrets", base_cr.clone(), changed));
        for (what, cr, settings) in rolling {
            assert_ne!(hash(&built(&cr, &settings).deployment), base, "{what}");
        }

        // The default image comes from the settings when the CR sets none.
        let cr = cluster("demo", "team-a");
        let other = Settings {
            image: "other:2".to_string(),
            ..settings()
        };
        assert_ne!(
            hash(&built(&cr, &settings()).deployment),
            hash(&built(&cr, &other).deployment)
        );
    }

    #[test]
    fn a_cr_without_identity_or_a_bad_setting_is_refused() {
        let mut cr = cluster("demo", "team-a");
        cr.metadata.uid = None;
        let error = build(&cr, &settings()).err();
        assert!(
            matches!(&error, Some(BuildError::MissingUid { name, namespace }) if name == "demo" && namespace == "team-a"),
            "{error:?}"
        );
        let mut cr = cluster("demo", "team-a");
        cr.metadata.namespace = None;
        assert!(matches!(
            build(&cr, &settings()),
            Err(BuildError::MissingNamespace { .. })
        ));
        let mut cr = cluster("demo", "team-a");
        cr.metadata.name = None;
        assert!(matches!(
            build(&cr, &settings()),
            Err(BuildError::MissingName)
        ));
        let long = "x".repeat(64);
        for bad in ["Demo", "a.b", long.as_str()] {
            assert!(
                matches!(
                    build(&cluster(bad, "team-a"), &settings()),
                    Err(BuildError::InvalidName { .. })
                ),
                "{bad}"
            );
        }
        let no_image = Settings {
            image: " ".to_string(),
            ..settings()
        };
        assert!(matches!(
            build(&cluster("demo", "team-a"), &no_image),
            Err(BuildError::MissingImage)
        ));
        let mut cr = cluster("demo", "team-a");
        cr.spec.resources_operator.image = Some("mine:1".to_string());
        assert!(build(&cr, &no_image).is_ok());
        let bad_secret = Settings {
            credentials_secret: String::new(),
            ..settings()
        };
        assert!(matches!(
            build(&cluster("demo", "team-a"), &bad_secret),
            Err(BuildError::InvalidCredentialsSecret { .. })
        ));
        let message = BuildError::MissingUid {
            namespace: "ns".to_string(),
            name: "demo".to_string(),
        }
        .to_string();
        assert!(message.contains("ns/demo"), "{message}");
    }
}

#[cfg(test)]
mod server_ca_tests {
    use super::*;
    use common_crds::infinispan::InfinispanSpec;

    fn tls_cluster() -> Infinispan {
        let spec: InfinispanSpec = serde_json::from_value(serde_json::json!({
            "security": { "endpointEncryption": { "type": "Secret", "certSecretName": "demo-tls" } }
        }))
        .expect("spec");
        let mut cr = Infinispan::new("demo", spec);
        cr.metadata.namespace = Some("team-a".into());
        cr.metadata.uid = Some("uid-1".into());
        cr
    }

    #[test]
    fn a_private_ca_is_mounted_and_trusted_only_when_the_secret_has_one() {
        let mut settings = Settings::new("img", "demo-operator-credentials");
        let without = deployment(&tls_cluster(), &settings).expect("deployment");
        let args = without.spec.template.spec.as_ref().expect("pod").containers[0]
            .args
            .clone();
        let args = args.unwrap_or_default();
        assert!(!args.iter().any(|a| a.starts_with("--ca-bundle")));
        // The operators' Service, the certificate checked against the client Service's name.
        assert!(
            args.iter()
                .any(|a| a.starts_with("--infinispan-url=https://demo-operator.")),
            "{args:?}"
        );
        assert!(
            args.iter()
                .any(|a| a == "--tls-server-name=demo.team-a.svc.cluster.local"),
            "{args:?}"
        );
        settings.server_ca = true;
        let with = deployment(&tls_cluster(), &settings).expect("deployment");
        let pod = with.spec.template.spec.clone().expect("pod");
        let container = &pod.containers[0];
        assert!(
            container
                .args
                .iter()
                .flatten()
                .any(|a| a == "--ca-bundle=/etc/infinispan/server-ca/ca.crt")
        );
        let volume = &pod.volumes.expect("volumes")[0];
        let secret = volume.secret.as_ref().expect("secret volume");
        assert_eq!(secret.secret_name.as_deref(), Some("demo-tls"));
        assert_eq!(secret.items.as_ref().expect("items")[0].key, "ca.crt");
        let mount = &container.volume_mounts.as_ref().expect("mounts")[0];
        assert_eq!(mount.read_only, Some(true));
        // A change of trust rolls the pod.
        assert_ne!(
            with.spec.template.metadata.and_then(|m| m.annotations),
            without.spec.template.metadata.and_then(|m| m.annotations)
        );
        // Plain text: nothing to trust.
        let mut plain = tls_cluster();
        plain.spec.security.endpoint_encryption.type_ =
            common_crds::infinispan::EncryptionType::None;
        let pod = deployment(&plain, &settings)
            .expect("deployment")
            .spec
            .template
            .spec
            .expect("pod");
        assert!(pod.volumes.is_none());
    }
}
