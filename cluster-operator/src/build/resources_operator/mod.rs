//! The per-cluster resources operator's objects (see [`super`]): its ServiceAccount, Role and
//! RoleBinding (exactly [`common_crds::rbac`]'s, so the cluster operator never hands out more than
//! that module defines) and the Deployment running `resources-operator run` for the cluster.
//!
//! [`build`] returns all four from the `Infinispan` CR (as read from the API server) and the
//! operator-level [`Settings`]. Every object is named [`rbac::resources_operator_name`]
//! (`resources-operator-<cluster>`), lives in the CR's namespace, carries [`labels`] and is
//! controlled by the CR. The decisions behind the Deployment: `docs/cluster-objects.md`.

mod connection;
mod deployment;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod shared;
mod url;

use std::collections::BTreeMap;

use common_crds::Infinispan;
use common_crds::infinispan::ResourcesOperatorDeployment;
use common_crds::naming::is_dns1123_subdomain;
use common_crds::rbac::{self, OperatorScope};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::MissingMetadata;
use super::identity;
pub use deployment::{default_resources, deployment};
pub use url::{client_service_host, endpoint_scheme, infinispan_url, operator_service_url};

/// Longest CR name: a DNS-1123 label's 63 characters (it names the cluster's Service and is a
/// label value).
const MAX_NAME_LEN: usize = 63;

// Server facts the resources operator's URL is made of (defined with the server's objects).
pub use super::server::{DEFAULT_CLUSTER_DOMAIN, SERVER_PORT};
/// Port of the resources operator's `/metrics`, `/healthz` and `/readyz`.
pub const METRICS_PORT: u16 = 8080;
/// Name of [`METRICS_PORT`] in the container, which the probes use.
pub const METRICS_PORT_NAME: &str = "metrics";
/// Name of the resources operator's container.
pub const CONTAINER_NAME: &str = "resources-operator";
/// Replicas of the Deployment when `spec.resourcesOperator.replicas` is absent.
pub const DEFAULT_REPLICAS: i32 = 1;
/// Where the server's CA (`ca.crt` of the certificate Secret) is mounted.
pub const SERVER_CA_DIR: &str = "/etc/infinispan/server-ca";
/// The key of the certificate Secret holding the CA, and the file name.
pub const SERVER_CA_KEY: &str = "ca.crt";
const SERVER_CA_VOLUME: &str = "server-ca";
/// Where the operators' client certificate (`tls.crt`, `tls.key`) is mounted, when the server
/// asks clients for one.
pub const CLIENT_CERTIFICATE_DIR: &str = "/etc/infinispan/client-tls";
const CLIENT_CERTIFICATE_VOLUME: &str = "client-tls";
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
    /// With `clientCert: Validate`: the Secret of the certificate the pod presents, mounted
    /// and given as `--client-certificate`/`--client-key`; its revision rolls the pods.
    pub client_certificate: Option<ClientCertificate>,
}

/// The operators' client certificate Secret and its revision (uid and resourceVersion).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCertificate {
    pub secret: String,
    pub revision: String,
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
            client_certificate: None,
        }
    }
}

/// The CR or the settings cannot give the resources operator's objects.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    MissingMetadata(#[from] MissingMetadata),
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

/// What a cluster's resources operator is, as `spec.resourcesOperator.deployment` chooses.
#[derive(Clone, Debug, PartialEq)]
pub enum Built {
    /// A Deployment of its own.
    PerCluster(Box<Objects>),
    /// A member of the namespace's shared operator.
    Shared(Box<shared::MemberObjects>),
}

/// The resources operator of `cluster`, per cluster or shared.
pub fn build_for(cluster: &Infinispan, settings: &Settings) -> Result<Built, BuildError> {
    Ok(match cluster.spec.resources_operator.deployment {
        ResourcesOperatorDeployment::PerCluster => {
            Built::PerCluster(Box::new(build(cluster, settings)?))
        }
        ResourcesOperatorDeployment::SharedInNamespace => {
            Built::Shared(Box::new(shared::member(cluster, settings)?))
        }
    })
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

/// The labels of every object of the resources operator of `cluster` (and of its pods).
pub fn labels(cluster: &str) -> BTreeMap<String, String> {
    identity::labels(APP_NAME, COMPONENT, cluster)
}

/// The Deployment's selector: the name and the instance (the cluster), which never change.
pub fn selector_labels(cluster: &str) -> BTreeMap<String, String> {
    identity::selector_labels(APP_NAME, cluster)
}

/// The controller owner reference to the `Infinispan` CR.
pub fn owner_reference(cluster: &Infinispan) -> Result<OwnerReference, BuildError> {
    let (name, namespace) = name_and_namespace(cluster)?;
    Ok(identity::owner_reference(cluster, name, namespace)?)
}

/// The CR's name and namespace, checked.
pub(super) fn name_and_namespace(cluster: &Infinispan) -> Result<(&str, &str), BuildError> {
    identity::name_and_namespace(cluster, MAX_NAME_LEN, |name| BuildError::InvalidName {
        name,
    })
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

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;
    use crate::build::snapshot::{self, assert_snapshot};
    use crate::build::test_support::controlled_by;
    use common_crds::labels::CLUSTER_LABEL;

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
        let expected = controlled_by("demo", UID);
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
    fn a_cr_without_identity_or_a_bad_setting_is_refused() {
        let mut cr = cluster("demo", "team-a");
        cr.metadata.uid = None;
        let error = build(&cr, &settings()).err();
        assert!(
            matches!(&error, Some(BuildError::MissingMetadata(MissingMetadata::Uid { name, namespace })) if name == "demo" && namespace == "team-a"),
            "{error:?}"
        );
        let mut cr = cluster("demo", "team-a");
        cr.metadata.namespace = None;
        assert!(matches!(
            build(&cr, &settings()),
            Err(BuildError::MissingMetadata(
                MissingMetadata::Namespace { .. }
            ))
        ));
        let mut cr = cluster("demo", "team-a");
        cr.metadata.name = None;
        assert!(matches!(
            build(&cr, &settings()),
            Err(BuildError::MissingMetadata(MissingMetadata::Name))
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
        let message = BuildError::from(MissingMetadata::Uid {
            namespace: "ns".to_string(),
            name: "demo".to_string(),
        })
        .to_string();
        assert!(message.contains("ns/demo"), "{message}");
    }
}
