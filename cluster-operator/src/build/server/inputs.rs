//! What the server builders take in: the operator's [`Settings`] (images, cluster domain,
//! pod defaults), the [`Referenced`] content, the [`BuildError`]s, and [`Cx`], the CR, settings
//! and referenced content checked once for every builder.

use std::collections::BTreeMap;

use common_crds::Infinispan;
use common_crds::conditions::ProblemReason;
use common_crds::infinispan::{EncryptionType, LogLevel, TransportEncryptionType};
use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::credential_store::{CredentialStore, CredentialStoreError};
use super::{
    ConfigOverlay, DEFAULT_CLUSTER_DOMAIN, DEFAULT_FS_GROUP, IDENTITIES_KEY, Identities,
    MAX_CLUSTER_NAME_LEN, MIN_VERSION, TlsCertificate, labels, ping_service_name,
};
use crate::build::MissingMetadata;
use crate::build::identity;
use crate::build::user_metadata::{self, ReservedKey, UserMetadata};
use crate::certificates::client_trust::ClientTrust;

/// Server log categories set unless `spec.logging.categories` names them (the server's own
/// defaults, minus its file appenders; audit events are logged at INFO, so off unless asked).
const DEFAULT_LOG_CATEGORIES: [(&str, &str); 4] = [
    ("com.arjuna", "WARN"),
    (
        "io.netty.handler.ssl.ApplicationProtocolNegotiationHandler",
        "ERROR",
    ),
    ("org.infinispan.AUDIT", "ERROR"),
    ("org.jboss.threads", "WARN"),
];

/// Server image of each supported version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerImages {
    /// Version run when the CR sets none (a key of `by_version` unless every CR sets `image`).
    pub default_version: String,
    /// Image of each version, e.g. `16.0.7` -> `quay.io/infinispan/server:16.0.7`.
    pub by_version: BTreeMap<String, String>,
}

impl ServerImages {
    /// One version, the default.
    pub fn single(version: impl Into<String>, image: impl Into<String>) -> Self {
        let version = version.into();
        Self {
            by_version: BTreeMap::from([(version.clone(), image.into())]),
            default_version: version,
        }
    }

    /// The version and image `cluster` runs: `spec.image` when set, else the image of
    /// `spec.version` (or the default version). Checked in this order: the version's form, at
    /// least [`MIN_VERSION`] (so that an old version is told why, not only that it has no
    /// image), then its image.
    pub fn resolve(&self, cluster: &Infinispan) -> Result<ServerImage, BuildError> {
        let spec = &cluster.spec;
        let version = spec
            .version
            .as_deref()
            .map(str::trim)
            .filter(|version| !version.is_empty())
            .unwrap_or(&self.default_version);
        let known = || self.by_version.keys().cloned().collect::<Vec<_>>();
        let (major, minor) = parse_version(version).ok_or_else(|| BuildError::InvalidVersion {
            version: version.to_string(),
            known: known(),
        })?;
        if (major, minor) < MIN_VERSION {
            return Err(BuildError::UnsupportedVersion {
                version: version.to_string(),
                known: known(),
            });
        }
        let image =
            match spec.image.as_deref().map(str::trim) {
                Some(image) if !image.is_empty() => image.to_string(),
                _ => self.by_version.get(version).cloned().ok_or_else(|| {
                    BuildError::UnknownVersion {
                        version: version.to_string(),
                        known: known(),
                    }
                })?,
            };
        Ok(ServerImage {
            version: version.to_string(),
            major,
            minor,
            image,
        })
    }
}

/// The version a cluster runs and its image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerImage {
    /// As written in the CR or the settings, e.g. `16.0.7`.
    pub version: String,
    pub major: u32,
    pub minor: u32,
    pub image: String,
}

/// `major.minor` of `16.0.7`, `16.0`, `16.0.7.Final`...
fn parse_version(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// What the server builders need beyond the CR: the cluster operator's own settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Version -> image mapping and default version.
    pub images: ServerImages,
    /// Cluster domain of the DNS name JGroups queries (default [`DEFAULT_CLUSTER_DOMAIN`]).
    pub cluster_domain: String,
    /// `fsGroup` of the server pods (default [`DEFAULT_FS_GROUP`]); `None` where the platform
    /// assigns one (OpenShift's restricted SCC refuses any other).
    pub fs_group: Option<i64>,
    /// Requests and limits of the server container when the CR sets none (replaced as a whole,
    /// never merged per key).
    pub default_resources: ResourceRequirements,
    /// Image pull Secrets of the server pods (they must exist in the CR's namespace).
    pub image_pull_secrets: Vec<String>,
    /// The cluster operator's own namespace when it runs in a pod: its pods may reach the
    /// servers' endpoint through the clusters' NetworkPolicies.
    pub operator_namespace: Option<String>,
    /// The operator's own image: the init container that fetches `spec.dependencies`.
    pub artifacts_image: String,
}

impl Settings {
    /// Settings with the default cluster domain, fsGroup and resources and no pull Secrets.
    pub fn new(images: ServerImages) -> Self {
        Self {
            images,
            cluster_domain: DEFAULT_CLUSTER_DOMAIN.to_string(),
            fs_group: Some(DEFAULT_FS_GROUP),
            default_resources: default_resources(),
            image_pull_secrets: Vec::new(),
            operator_namespace: None,
            artifacts_image: crate::cli::DEFAULT_CLUSTER_OPERATOR_IMAGE.to_string(),
        }
    }
}

/// Requests and limits of the server when neither the CR nor the settings say: the heap is 70%
/// of the memory limit (`RUN_IN_CONTAINER`); no CPU limit (throttling stalls JGroups).
pub fn default_resources() -> ResourceRequirements {
    let memory = || ("memory".to_string(), Quantity("1Gi".to_string()));
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), Quantity("500m".to_string())),
            memory(),
        ])),
        limits: Some(BTreeMap::from([memory()])),
        claims: None,
    }
}

/// The content of what the CR refers to, read by the controller and checked by the
/// constructors of each field. A field the spec does not ask for is ignored; one it asks for
/// and is missing is an error ([`BuildError::MissingIdentities`], [`BuildError::MissingOverlay`],
/// [`BuildError::MissingTlsCertificate`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Referenced {
    /// The realm's users, when `spec.security.endpointAuthentication` is on.
    pub identities: Option<Identities>,
    /// The overlay, when `spec.configMapName` is set.
    pub overlay: Option<ConfigOverlay>,
    /// The TLS certificate, when `spec.security.endpointEncryption.type` is `Secret` or
    /// `Generated`.
    pub tls: Option<TlsCertificate>,
    /// The transport's stores, when `spec.security.transportEncryption.type` is `Generated`.
    pub transport: Option<TransportTls>,
    /// The CAs client certificates must be signed by (`Validate`), or the certificates
    /// themselves (`Authenticate`), when `spec.security.endpointEncryption.clientCert` asks.
    pub client_trust: Option<ClientTrust>,
    /// The credential store's Secret, checked, when `spec.security.credentialStoreSecretName`
    /// is set.
    pub credential_store: Option<CredentialStore>,
    /// The cross-site TLS stores, checked, when `spec.service.sites.local.encryption` is set.
    pub site_tls: Option<super::sites::SiteTls>,
}

/// The Secret with the transport's PKCS#12 stores (`keystore.p12`, `truststore.p12`,
/// `password`) and a digest of its content (a new certificate rolls the pods).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportTls {
    pub secret: String,
    pub digest: String,
}

/// The CR, the settings or the referenced content cannot give the server's objects. Messages
/// never hold a password or a key.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    MissingMetadata(#[from] MissingMetadata),
    #[error(
        "the Infinispan CR name {name:?} is not a DNS-1123 label of at most {MAX_CLUSTER_NAME_LEN} characters (a-z, 0-9 and '-'): it names the StatefulSet, whose pods' controller-revision-hash label adds 11 characters"
    )]
    InvalidName { name: String },
    #[error("the cluster domain {domain:?} is not a DNS name")]
    InvalidClusterDomain { domain: String },
    #[error(
        "server version {version:?} has no image here: the operator runs the versions of its image list ({}; more with its --server-image VERSION=IMAGE), or spec.image with spec.version saying what it runs",
        known.join(", ")
    )]
    UnknownVersion { version: String, known: Vec<String> },
    #[error(
        "server version {version:?} is not of the form major.minor[.patch] (versions with an image here: {})",
        known.join(", ")
    )]
    InvalidVersion { version: String, known: Vec<String> },
    #[error(
        "server version {version:?} is not supported: the operator runs Infinispan {}.{} and later (versions with an image here: {}). Older servers lack what it relies on: the anonymous /health/live and /health/ready endpoints its probes use (added in 16.0; the 15.x backport was reverted) and the {}.{} server configuration schema it writes; the resources operator's sync is tested on 16.0's REST API and event stream only (14.x serves other paths). Move to {}.{} or later (docs/migration.md: a server upgrade is part of the move)",
        MIN_VERSION.0,
        MIN_VERSION.1,
        known.join(", "),
        MIN_VERSION.0,
        MIN_VERSION.1,
        MIN_VERSION.0,
        MIN_VERSION.1
    )]
    UnsupportedVersion { version: String, known: Vec<String> },
    #[error("the image {image:?} is empty")]
    EmptyImage { image: String },
    #[error(
        "authentication is on but no identities were given (the operator credentials and application identities Secrets)"
    )]
    MissingIdentities,
    #[error("spec.configMapName is {config_map:?} but no overlay was given")]
    MissingOverlay { config_map: String },
    #[error("endpointEncryption is Secret but certSecretName is not set")]
    MissingTlsSecretName,
    #[error("endpointEncryption uses the Secret {secret:?} but no TLS certificate was given")]
    MissingTlsCertificate { secret: String },
    #[error("transportEncryption is Generated but no transport certificate was given")]
    MissingTransportCertificate,
    #[error(
        "spec.security.endpointEncryption.clientCertSecretName is required when clientCert is Validate"
    )]
    MissingClientCertSecretName,
    #[error(
        "spec.security.endpointEncryption.clientCert is Validate but the endpoint has no TLS (this cluster's endpointEncryption type resolves to None): set type Generated or Secret"
    )]
    ClientCertWithoutTls,
    #[error("clientCert is Validate or Authenticate but no client truststore was given")]
    MissingClientTrust,
    #[error(transparent)]
    InvalidArtifact(#[from] crate::artifacts::PlanError),
    #[error(transparent)]
    InvalidCredentialStore(#[from] CredentialStoreError),
    #[error(
        "spec.security.credentialStoreSecretName is {secret:?} but no credential store was given"
    )]
    MissingCredentialStore { secret: String },
    #[error("key {key} of Secret {secret:?} {problem}")]
    SecretKey {
        secret: String,
        key: String,
        problem: &'static str,
    },
    #[error(
        "{IDENTITIES_KEY} of Secret {secret:?} is not a YAML mapping with `credentials:`, a list of username, password and optional roles{position}"
    )]
    InvalidIdentities { secret: String, position: String },
    #[error("user {username:?}: {problem}")]
    InvalidUser { username: String, problem: String },
    #[error("user {username:?} is defined twice (the operator user's name is reserved)")]
    DuplicateUser { username: String },
    #[error("the overlay ConfigMap {config_map:?}: {problem}")]
    InvalidOverlay { config_map: String, problem: String },
    #[error("the TLS Secret {secret:?}: {problem}")]
    InvalidTlsSecret { secret: String, problem: String },
    #[error("log category {category:?} is empty or has white space or a control character")]
    InvalidLogCategory { category: String },
    #[error(transparent)]
    ReservedKey(#[from] ReservedKey),
    #[error("spec.service.sites: {problem}")]
    InvalidSites { problem: String },
}

impl BuildError {
    /// A stable, low-cardinality name of the error (condition reasons, Event reasons, metric
    /// labels).
    pub fn reason(&self) -> ProblemReason {
        match self {
            Self::MissingMetadata(_) | Self::InvalidName { .. } => ProblemReason::InvalidCluster,
            Self::InvalidClusterDomain { .. } | Self::EmptyImage { .. } => {
                ProblemReason::InvalidSettings
            }
            Self::UnknownVersion { .. }
            | Self::InvalidVersion { .. }
            | Self::UnsupportedVersion { .. } => ProblemReason::UnsupportedVersion,
            Self::MissingIdentities
            | Self::SecretKey { .. }
            | Self::InvalidIdentities { .. }
            | Self::InvalidUser { .. }
            | Self::DuplicateUser { .. } => ProblemReason::InvalidIdentities,
            Self::MissingOverlay { .. } | Self::InvalidOverlay { .. } => {
                ProblemReason::InvalidConfigOverlay
            }
            Self::MissingTlsSecretName
            | Self::MissingTlsCertificate { .. }
            | Self::MissingTransportCertificate
            | Self::MissingClientCertSecretName
            | Self::ClientCertWithoutTls
            | Self::MissingClientTrust
            | Self::InvalidTlsSecret { .. } => ProblemReason::InvalidTlsSecret,
            Self::InvalidLogCategory { .. } => ProblemReason::InvalidLogging,
            Self::InvalidCredentialStore(_) | Self::MissingCredentialStore { .. } => {
                ProblemReason::InvalidCredentialStore
            }
            Self::InvalidArtifact(_) => ProblemReason::InvalidCluster,
            Self::ReservedKey(_) => ProblemReason::InvalidMetadata,
            Self::InvalidSites { .. } => ProblemReason::InvalidSites,
        }
    }
}

/// The checked CR, settings and referenced content every builder needs.
pub(super) struct Cx<'a> {
    pub(super) cluster: &'a Infinispan,
    pub(super) name: &'a str,
    pub(super) namespace: &'a str,
    owner: OwnerReference,
    pub(super) settings: &'a Settings,
    pub(super) image: ServerImage,
    /// `Some` when authentication is on.
    pub(super) identities: Option<&'a Identities>,
    pub(super) overlay: Option<&'a ConfigOverlay>,
    /// The certificate's Secret (the user's or the generated one) and the checked content,
    /// when TLS is on.
    pub(super) tls: Option<(String, &'a TlsCertificate)>,
    /// The transport's stores, when transport TLS is on.
    pub(super) transport: Option<&'a TransportTls>,
    /// The CAs of client certificates, when the endpoint asks for them.
    pub(super) client_trust: Option<&'a ClientTrust>,
    /// The certificate alone identifies clients (`clientCert: Authenticate`, with
    /// `client_trust` and authentication on): no password login.
    pub(super) certificate_authentication: bool,
    /// The credential store's Secret, when the CR names one.
    pub(super) credential_store: Option<&'a CredentialStore>,
    /// The extra server libraries to download (`spec.dependencies.artifacts`), checked.
    pub(super) artifacts: Option<crate::artifacts::Plan>,
    pub(super) log_categories: BTreeMap<String, &'static str>,
    pub(super) dns_query: String,
    /// The labels and annotations the CR adds to the pods and the Services.
    pub(super) user: UserMetadata,
    /// Cross-site replication, when `spec.service.sites` asks for it.
    pub(super) sites: Option<super::sites::Sites>,
}

impl<'a> Cx<'a> {
    /// Checks, in this order: the CR's name, namespace and uid, the cluster domain, the image,
    /// the referenced content the spec asks for, the log categories and the labels and
    /// annotations it adds.
    pub(super) fn of(
        cluster: &'a Infinispan,
        settings: &'a Settings,
        referenced: &'a Referenced,
    ) -> Result<Self, BuildError> {
        let (name, namespace) =
            identity::name_and_namespace(cluster, MAX_CLUSTER_NAME_LEN, |name| {
                BuildError::InvalidName { name }
            })?;
        let owner = identity::owner_reference(cluster, name, namespace)?;
        let dns_query = identity::service_host(
            &ping_service_name(name),
            namespace,
            &settings.cluster_domain,
        )
        .ok_or_else(|| BuildError::InvalidClusterDomain {
            domain: settings.cluster_domain.clone(),
        })?;
        let image = settings.images.resolve(cluster)?;
        if image.image.trim().is_empty() {
            return Err(BuildError::EmptyImage { image: image.image });
        }
        Ok(Self {
            cluster,
            name,
            namespace,
            owner,
            settings,
            image,
            identities: identities(cluster, referenced)?,
            overlay: overlay(cluster, referenced)?,
            tls: tls(cluster, referenced)?,
            client_trust: client_trust(cluster, referenced)?,
            certificate_authentication: referenced.client_trust.is_some()
                && referenced.identities.is_some()
                && crate::build::security::certificate_authentication(cluster),
            credential_store: credential_store(cluster, referenced)?,
            artifacts: artifacts(cluster)?,
            transport: transport(cluster, referenced)?,
            log_categories: log_categories(cluster)?,
            dns_query,
            user: user_metadata::of(cluster)?,
            sites: super::sites::resolve(
                cluster,
                name,
                namespace,
                &settings.cluster_domain,
                referenced.site_tls.as_ref(),
            )?,
        })
    }

    /// Metadata of an object of the cluster: name, namespace, labels, owner.
    pub(super) fn metadata(&self, name: String) -> ObjectMeta {
        identity::object_meta(name, self.namespace, labels(self.name), &self.owner)
    }
}

/// The realm's users when `spec.security.endpointAuthentication` is on.
fn identities<'a>(
    cluster: &Infinispan,
    referenced: &'a Referenced,
) -> Result<Option<&'a Identities>, BuildError> {
    if !cluster.spec.security.endpoint_authentication {
        return Ok(None);
    }
    referenced
        .identities
        .as_ref()
        .map(Some)
        .ok_or(BuildError::MissingIdentities)
}

/// The overlay when `spec.configMapName` is set.
fn overlay<'a>(
    cluster: &Infinispan,
    referenced: &'a Referenced,
) -> Result<Option<&'a ConfigOverlay>, BuildError> {
    let Some(config_map) = cluster.spec.config_map_name.as_deref() else {
        return Ok(None);
    };
    referenced
        .overlay
        .as_ref()
        .map(Some)
        .ok_or_else(|| BuildError::MissingOverlay {
            config_map: config_map.to_string(),
        })
}

/// The TLS Secret's name and checked content when `spec.security.endpointEncryption` is
/// `Secret` (the user's Secret) or `Generated` (the operator's).
fn tls<'a>(
    cluster: &Infinispan,
    referenced: &'a Referenced,
) -> Result<Option<(String, &'a TlsCertificate)>, BuildError> {
    let encryption = &cluster.spec.security.endpoint_encryption;
    if encryption.type_ == Some(EncryptionType::Secret)
        && encryption
            .cert_secret_name
            .as_deref()
            .is_none_or(str::is_empty)
    {
        return Err(BuildError::MissingTlsSecretName);
    }
    let Some(secret) = crate::build::security::endpoint_certificate_secret(cluster) else {
        return Ok(None);
    };
    let certificate = referenced
        .tls
        .as_ref()
        .ok_or_else(|| BuildError::MissingTlsCertificate {
            secret: secret.clone(),
        })?;
    Ok(Some((secret, certificate)))
}

/// The plan of `spec.dependencies.artifacts`, when there are any.
fn artifacts(cluster: &Infinispan) -> Result<Option<crate::artifacts::Plan>, BuildError> {
    match &cluster.spec.dependencies {
        Some(dependencies) if !dependencies.artifacts.is_empty() => {
            Ok(Some(crate::artifacts::Plan::of(&dependencies.artifacts)?))
        }
        _ => Ok(None),
    }
}

/// The CAs (`Validate`) or the certificates (`Authenticate`) of clients when
/// `spec.security.endpointEncryption.clientCert` asks for them (which needs TLS on the
/// endpoint).
fn client_trust<'a>(
    cluster: &Infinispan,
    referenced: &'a Referenced,
) -> Result<Option<&'a ClientTrust>, BuildError> {
    let encryption = &cluster.spec.security.endpoint_encryption;
    if !encryption.asks_client_certificates() {
        return Ok(None);
    }
    if encryption.client_cert_secret_name.is_none() {
        return Err(BuildError::MissingClientCertSecretName);
    }
    if crate::build::security::endpoint_certificate_secret(cluster).is_none() {
        return Err(BuildError::ClientCertWithoutTls);
    }
    referenced
        .client_trust
        .as_ref()
        .map(Some)
        .ok_or(BuildError::MissingClientTrust)
}

/// The credential store's Secret when `spec.security.credentialStoreSecretName` names one.
fn credential_store<'a>(
    cluster: &Infinispan,
    referenced: &'a Referenced,
) -> Result<Option<&'a CredentialStore>, BuildError> {
    let Some(secret) = &cluster.spec.security.credential_store_secret_name else {
        return Ok(None);
    };
    referenced
        .credential_store
        .as_ref()
        .map(Some)
        .ok_or_else(|| BuildError::MissingCredentialStore {
            secret: secret.clone(),
        })
}

/// The transport's stores when `spec.security.transportEncryption` is `Generated`.
fn transport<'a>(
    cluster: &Infinispan,
    referenced: &'a Referenced,
) -> Result<Option<&'a TransportTls>, BuildError> {
    if cluster.spec.security.transport_encryption.type_ != Some(TransportEncryptionType::Generated)
    {
        return Ok(None);
    }
    referenced
        .transport
        .as_ref()
        .map(Some)
        .ok_or(BuildError::MissingTransportCertificate)
}

/// [`DEFAULT_LOG_CATEGORIES`] with `spec.logging.categories` over them, each category checked.
fn log_categories(cluster: &Infinispan) -> Result<BTreeMap<String, &'static str>, BuildError> {
    let mut log_categories: BTreeMap<String, &'static str> = DEFAULT_LOG_CATEGORIES
        .iter()
        .map(|(category, level)| (category.to_string(), *level))
        .collect();
    for (category, level) in cluster
        .spec
        .logging
        .iter()
        .flat_map(|logging| &logging.categories)
    {
        if category.is_empty()
            || category
                .chars()
                .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(BuildError::InvalidLogCategory {
                category: category.clone(),
            });
        }
        log_categories.insert(category.clone(), log_level(*level));
    }
    Ok(log_categories)
}

/// The level's name in `log4j2.xml`.
fn log_level(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Trace => "TRACE",
        LogLevel::Debug => "DEBUG",
        LogLevel::Info => "INFO",
        LogLevel::Warn => "WARN",
        LogLevel::Error => "ERROR",
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{build, stateful_set};
    use super::*;
    use k8s_openapi::api::apps::v1::StatefulSet;

    #[test]
    fn the_image_follows_the_version_mapping_or_the_override() {
        let image_of = |cr: &Infinispan| container(&stateful_set_of(cr)).image;
        fn stateful_set_of(cr: &Infinispan) -> StatefulSet {
            stateful_set(cr, &settings(), &referenced()).unwrap_or_else(|e| panic!("{e}"))
        }
        let mut cr = cluster("demo", "team-a");
        assert_eq!(
            image_of(&cr).as_deref(),
            Some("quay.io/infinispan/server:16.0.7")
        );
        cr.spec.version = Some("16.1.2".to_string());
        assert_eq!(
            image_of(&cr).as_deref(),
            Some("quay.io/infinispan/server:16.1.2")
        );
        cr.spec.image = Some("mirror.example.com/ispn:custom".to_string());
        assert_eq!(
            image_of(&cr).as_deref(),
            Some("mirror.example.com/ispn:custom")
        );

        let error_of = |version: Option<&str>, image: Option<&str>| {
            let mut cr = cluster("demo", "team-a");
            cr.spec.version = version.map(str::to_string);
            cr.spec.image = image.map(str::to_string);
            build(&cr, &settings(), &referenced())
                .err()
                .unwrap_or_else(|| panic!("{version:?} {image:?} accepted"))
        };
        let unknown = error_of(Some("16.0.3"), None);
        assert!(matches!(unknown, BuildError::UnknownVersion { .. }));
        assert!(unknown.to_string().contains("16.0.7, 16.1.2"), "{unknown}");
        assert!(unknown.to_string().contains("--server-image"), "{unknown}");
        // Older than 16.0, with or without an image: told which versions work and why.
        for image in [None, Some("mirror/ispn:15")] {
            let old = error_of(Some("15.2.6"), image);
            assert!(
                matches!(old, BuildError::UnsupportedVersion { .. }),
                "{old}"
            );
            let message = old.to_string();
            for says in ["16.0 and later", "16.0.7, 16.1.2", "/health/live", "schema"] {
                assert!(message.contains(says), "{says}: {message}");
            }
        }
        // An operator whose list maps an old version to an image still refuses it.
        let mut listed = settings();
        listed.images.by_version.insert(
            "14.0.21".to_string(),
            "quay.io/infinispan/server:14.0".to_string(),
        );
        let mut cr = cluster("demo", "team-a");
        cr.spec.version = Some("14.0.21".to_string());
        assert!(matches!(
            listed.images.resolve(&cr),
            Err(BuildError::UnsupportedVersion { .. })
        ));
        assert!(matches!(
            error_of(Some("latest"), Some("mirror/ispn:latest")),
            BuildError::InvalidVersion { .. }
        ));
        for version in ["15.2.6", "16.0.3", "latest"] {
            assert_eq!(error_of(Some(version), None).reason(), "UnsupportedVersion");
        }
    }

    #[test]
    fn missing_inputs_and_bad_names_are_refused() {
        let refused = |cr: &Infinispan, settings: &Settings, referenced: &Referenced| {
            build(cr, settings, referenced)
                .err()
                .unwrap_or_else(|| panic!("accepted"))
        };
        let cr = cluster("demo", "team-a");
        assert!(matches!(
            refused(&cr, &settings(), &Referenced::default()),
            BuildError::MissingIdentities
        ));
        assert!(matches!(
            refused(&full_cluster(), &full_settings(), &referenced()),
            BuildError::MissingOverlay { .. }
        ));
        let mut no_tls = full_referenced();
        no_tls.tls = None;
        assert!(matches!(
            refused(&full_cluster(), &full_settings(), &no_tls),
            BuildError::MissingTlsCertificate { .. }
        ));
        let mut no_uid = cr.clone();
        no_uid.metadata.uid = None;
        assert!(matches!(
            refused(&no_uid, &settings(), &referenced()),
            BuildError::MissingMetadata(MissingMetadata::Uid { .. })
        ));
        let mut no_namespace = cr.clone();
        no_namespace.metadata.namespace = None;
        assert!(matches!(
            refused(&no_namespace, &settings(), &referenced()),
            BuildError::MissingMetadata(MissingMetadata::Namespace { .. })
        ));
        let longest = "a".repeat(MAX_CLUSTER_NAME_LEN);
        assert!(build(&cluster(&longest, "ns"), &settings(), &referenced()).is_ok());
        for name in [format!("{longest}b"), "Demo".to_string(), "a.b".to_string()] {
            assert!(matches!(
                refused(&cluster(&name, "ns"), &settings(), &referenced()),
                BuildError::InvalidName { .. }
            ));
        }
        let mut domain = settings();
        domain.cluster_domain = "not a domain".to_string();
        assert!(matches!(
            refused(&cr, &domain, &referenced()),
            BuildError::InvalidClusterDomain { .. }
        ));
    }
}
