//! How the cluster operator reaches a cluster's Infinispan server over REST: where (the URL),
//! as whom (the operators' credentials) and whom to trust (the CA).
//!
//! Decisions:
//!
//! - **Where, in a cluster**: [`Target::Service`] is the operators' Service,
//!   `http(s)://<name>-operator.<namespace>.svc.<cluster domain>:11222` (`https` iff
//!   `spec.security.endpointEncryption.type` is `Secret`, [`resources_operator::endpoint_scheme`]):
//!   the client Service with client-IP session affinity, so that one client's connections reach
//!   the node that issued its DIGEST nonces (each node has its own). With TLS its certificate
//!   is verified against the client Service's name, `<name>.<namespace>.svc.<cluster domain>`
//!   (the name a user's certificate is issued for).
//!   [`Target::FirstPod`] is pod 0 of the StatefulSet through the headless Service,
//!   `http(s)://<name>-0.<name>-ping.<namespace>.svc.<cluster domain>:11222`, for work whose
//!   state lives on one node: backup and restore jobs (and their archives) exist only on the
//!   node that handled the request (measured on 16.0.7, docs/server-api.md "Multi-node"), so
//!   a job started through a load-balanced Service could be polled on another pod and look
//!   unknown. Pod 0's certificate is verified against the Service's name (the name a user's
//!   certificate is issued for), not the pod's.
//! - **Where, out of the cluster** (`make run`-style, the testbed, the demo): a per-cluster URL
//!   override, [`ServerAddresses`], parsed from `<namespace>/<name>=<url>` entries (the flag
//!   `--server-url`, repeatable, or the environment variable `CLUSTER_OPERATOR_SERVER_URLS`,
//!   comma-separated). An override replaces both targets: it must lead to one server node, not
//!   to a load balancer over several, when backups are taken through it. Any number of
//!   clusters may be overridden; the others keep their in-cluster URLs.
//! - **As whom**: the `username` and `password` keys of the Secret named in
//!   `status.operatorCredentialsSecret` (written by the cluster controller, design
//!   "Credentials"). Until the status names one, the server is not reachable for the operator:
//!   [`ServerAccessError::CredentialsNotReady`], a transient state. A cluster with
//!   `endpointAuthentication: false` needs none (the Secret is still used when named). The
//!   password never appears in a message, a log line or `Debug` output.
//! - **Whom to trust**: with TLS, the `ca.crt` key of the endpoint certificate Secret
//!   (`spec.security.endpointEncryption.certSecretName`; cert-manager and most issuers write it)
//!   plus the operator-wide CA bundle ([`Servers::with_ca_bundle_pem`]), when either is there;
//!   otherwise the system's roots. A bundle, when given, replaces the system roots (rustls trusts
//!   exactly the roots it is given).
//! - A client is built per call (a new connection pool): callers are Backups and Restores,
//!   rare enough that caching clients (and invalidating them on a credentials rotation) would
//!   cost more than it saves.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use common_crds::Infinispan;
use common_crds::infinispan::EncryptionType;
use common_crds::naming::is_dns1123_label;
use infinispan_rest::{ClientConfig, Credentials};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::build::resources_operator::{self, BuildError, SERVER_PORT};
use crate::build::server::{PASSWORD_KEY, USERNAME_KEY, ping_service_name};

/// Key of the CA certificate in a TLS Secret (cert-manager's name for it).
pub const CA_KEY: &str = "ca.crt";

/// The environment variable holding the comma-separated overrides.
pub const SERVER_URLS_ENV: &str = "CLUSTER_OPERATOR_SERVER_URLS";

/// One override: the cluster `namespace/name` is reached at `url`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerAddress {
    pub namespace: String,
    pub name: String,
    pub url: String,
}

/// An override entry that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("server URL override {entry:?} is not <namespace>/<name>=<url>")]
    Malformed { entry: String },
    #[error(
        "server URL override {entry:?}: {namespace:?} is not a namespace name (a DNS-1123 label)"
    )]
    InvalidNamespace { entry: String, namespace: String },
    #[error(
        "server URL override {entry:?}: {name:?} is not an Infinispan cluster name (a DNS-1123 label)"
    )]
    InvalidName { entry: String, name: String },
    #[error("server URL override {entry:?}: the URL {reason}")]
    InvalidUrl { entry: String, reason: &'static str },
    #[error("the cluster {namespace}/{name} is given two server URLs: {first} and {second}")]
    Conflict {
        namespace: String,
        name: String,
        first: String,
        second: String,
    },
}

impl FromStr for ServerAddress {
    type Err = AddressError;

    /// `<namespace>/<name>=<url>`, with `url` an `http://` or `https://` URL without user
    /// information (credentials come from the cluster's Secret, never from a flag).
    fn from_str(entry: &str) -> Result<Self, Self::Err> {
        let entry = entry.trim();
        let malformed = || AddressError::Malformed {
            entry: entry.to_string(),
        };
        let (cluster, url) = entry.split_once('=').ok_or_else(malformed)?;
        let (namespace, name) = cluster.trim().split_once('/').ok_or_else(malformed)?;
        let (namespace, name, url) = (namespace.trim(), name.trim(), url.trim());
        if !is_dns1123_label(namespace) {
            return Err(AddressError::InvalidNamespace {
                entry: entry.to_string(),
                namespace: namespace.to_string(),
            });
        }
        if !is_dns1123_label(name) {
            return Err(AddressError::InvalidName {
                entry: entry.to_string(),
                name: name.to_string(),
            });
        }
        if let Some(reason) = url_problem(url) {
            return Err(AddressError::InvalidUrl {
                entry: entry.to_string(),
                reason,
            });
        }
        Ok(ServerAddress {
            namespace: namespace.to_string(),
            name: name.to_string(),
            url: url.trim_end_matches('/').to_string(),
        })
    }
}

impl fmt::Display for ServerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}={}", self.namespace, self.name, self.url)
    }
}

/// Why a URL cannot be a server's base URL, if it cannot.
fn url_problem(url: &str) -> Option<&'static str> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some("must start with http:// or https://");
    };
    if scheme != "http" && scheme != "https" {
        return Some("must start with http:// or https://");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Some("must not carry credentials (they come from the cluster's Secret)");
    }
    if authority.is_empty() || authority.starts_with(':') {
        return Some("has no host");
    }
    if rest[authority.len()..].starts_with(['?', '#']) {
        return Some("must not have a query or a fragment");
    }
    match url.parse::<http::Uri>() {
        Ok(_) => None,
        Err(_) => Some("is not a valid URL"),
    }
}

/// Per-cluster server URL overrides, for running the operator outside the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerAddresses {
    by_cluster: BTreeMap<(String, String), String>,
}

impl ServerAddresses {
    /// No override: every cluster is reached at its in-cluster URL.
    pub fn new() -> Self {
        Self::default()
    }

    /// The overrides of `entries`; the same cluster twice is accepted only with the same URL.
    pub fn from_entries(
        entries: impl IntoIterator<Item = ServerAddress>,
    ) -> Result<Self, AddressError> {
        let mut by_cluster: BTreeMap<(String, String), String> = BTreeMap::new();
        for ServerAddress {
            namespace,
            name,
            url,
        } in entries
        {
            match by_cluster.get(&(namespace.clone(), name.clone())) {
                Some(first) if *first != url => {
                    return Err(AddressError::Conflict {
                        namespace,
                        name,
                        first: first.clone(),
                        second: url,
                    });
                }
                _ => {
                    by_cluster.insert((namespace, name), url);
                }
            }
        }
        Ok(Self { by_cluster })
    }

    /// The overrides of a comma-separated list (the environment variable's format); empty
    /// items are ignored, so an empty string is no override.
    pub fn parse_list(list: &str) -> Result<Self, AddressError> {
        Self::from_entries(
            list.split(',')
                .map(str::trim)
                .filter(|entry| !entry.is_empty())
                .map(ServerAddress::from_str)
                .collect::<Result<Vec<_>, _>>()?,
        )
    }

    /// The override of the cluster `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<&str> {
        self.by_cluster
            .get(&(namespace.to_string(), name.to_string()))
            .map(String::as_str)
    }

    /// Every override, ordered by namespace and name.
    pub fn iter(&self) -> impl Iterator<Item = ServerAddress> + '_ {
        self.by_cluster
            .iter()
            .map(|((namespace, name), url)| ServerAddress {
                namespace: namespace.clone(),
                name: name.clone(),
                url: url.clone(),
            })
    }

    pub fn len(&self) -> usize {
        self.by_cluster.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_cluster.is_empty()
    }
}

impl FromStr for ServerAddresses {
    type Err = AddressError;

    fn from_str(list: &str) -> Result<Self, Self::Err> {
        Self::parse_list(list)
    }
}

/// Which server of a cluster to reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// One node, through the operators' Service (client-IP session affinity).
    Service,
    /// Always the same node, pod 0 (node-local work: backups and restores).
    FirstPod,
}

/// Where a cluster's server is reached: the base URL and, when it differs from the URL's
/// host, the name its certificate is verified against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub url: String,
    pub tls_server_name: Option<String>,
}

/// The server of a cluster cannot be reached by the operator (yet).
#[derive(Debug, thiserror::Error)]
pub enum ServerAccessError {
    #[error("the Infinispan CR has no metadata.name or metadata.namespace")]
    MissingMetadata,
    #[error(transparent)]
    Url(#[from] BuildError),
    #[error(
        "the Infinispan cluster {namespace}/{name} names no operator credentials Secret in its status yet (status.operatorCredentialsSecret)"
    )]
    CredentialsNotReady { namespace: String, name: String },
    #[error("the operator credentials Secret {namespace}/{secret} does not exist")]
    CredentialsSecretNotFound { namespace: String, secret: String },
    #[error("the operator credentials Secret {namespace}/{secret} has no {key:?} key")]
    CredentialsKeyMissing {
        namespace: String,
        secret: String,
        key: &'static str,
    },
    #[error("the {key:?} key of the operator credentials Secret {namespace}/{secret} is not UTF-8")]
    CredentialsNotUtf8 {
        namespace: String,
        secret: String,
        key: &'static str,
    },
    #[error(
        "the endpoint certificate Secret {namespace}/{secret} (spec.security.endpointEncryption.certSecretName) does not exist"
    )]
    CertificateSecretNotFound { namespace: String, secret: String },
    #[error("reading the Secret {namespace}/{secret}: {source}")]
    Kube {
        namespace: String,
        secret: String,
        #[source]
        source: kube::Error,
    },
    #[error("the REST client for {url}: {source}")]
    Client {
        url: String,
        #[source]
        source: infinispan_rest::Error,
    },
}

impl ServerAccessError {
    /// A stable, low-cardinality label (condition reasons, Event reasons, metrics).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingMetadata | Self::Url(_) | Self::Client { .. } => "InvalidConfiguration",
            Self::CredentialsNotReady { .. } => "CredentialsNotReady",
            Self::CredentialsSecretNotFound { .. }
            | Self::CredentialsKeyMissing { .. }
            | Self::CredentialsNotUtf8 { .. } => "CredentialsInvalid",
            Self::CertificateSecretNotFound { .. } => "CertificateNotFound",
            Self::Kube { .. } => "KubernetesError",
        }
    }
}

/// How the cluster operator reaches servers: the overrides, the cluster domain of in-cluster
/// URLs, the operator-wide CA bundle.
#[derive(Clone)]
pub struct Servers {
    addresses: ServerAddresses,
    cluster_domain: String,
    ca_bundle_pem: Option<Vec<u8>>,
}

impl fmt::Debug for Servers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Servers")
            .field("addresses", &self.addresses)
            .field("cluster_domain", &self.cluster_domain)
            .field("ca_bundle_pem", &self.ca_bundle_pem.as_ref().map(Vec::len))
            .finish()
    }
}

impl Servers {
    /// Servers reached at their in-cluster URLs in `cluster_domain` (e.g. `cluster.local`),
    /// except the clusters `addresses` overrides.
    pub fn new(addresses: ServerAddresses, cluster_domain: impl Into<String>) -> Self {
        Self {
            addresses,
            cluster_domain: cluster_domain.into(),
            ca_bundle_pem: None,
        }
    }

    /// Also trusts the CAs of this PEM bundle, for every cluster.
    pub fn with_ca_bundle_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_bundle_pem = Some(pem.into());
        self
    }

    pub fn addresses(&self) -> &ServerAddresses {
        &self.addresses
    }

    /// Where `cluster`'s `target` is reached (pure).
    pub fn endpoint(
        &self,
        cluster: &Infinispan,
        target: Target,
    ) -> Result<Endpoint, ServerAccessError> {
        let (name, namespace) = name_and_namespace(cluster)?;
        if let Some(url) = self.addresses.get(namespace, name) {
            return Ok(Endpoint {
                url: url.to_string(),
                tls_server_name: None,
            });
        }
        // The name a certificate is issued for (and the check of the domain).
        let certified = resources_operator::client_service_host(cluster, &self.cluster_domain)?;
        let https = cluster.spec.security.endpoint_encryption.type_ == EncryptionType::Secret;
        let url = match target {
            Target::Service => {
                resources_operator::operator_service_url(cluster, &self.cluster_domain)?
            }
            Target::FirstPod => {
                let scheme = resources_operator::endpoint_scheme(cluster);
                let domain = self.cluster_domain.trim_end_matches('.');
                let ping = ping_service_name(name);
                format!("{scheme}://{name}-0.{ping}.{namespace}.svc.{domain}:{SERVER_PORT}")
            }
        };
        Ok(Endpoint {
            url,
            tls_server_name: https.then_some(certified),
        })
    }

    /// A REST client for `cluster`'s server through its operators' Service (or its override).
    pub async fn client_for(
        &self,
        client: &kube::Client,
        cluster: &Infinispan,
    ) -> Result<infinispan_rest::Client, ServerAccessError> {
        self.client_at(client, cluster, Target::Service).await
    }

    /// A REST client for pod 0 of `cluster` (or its override): always the same node, for
    /// backup and restore jobs.
    pub async fn node_client_for(
        &self,
        client: &kube::Client,
        cluster: &Infinispan,
    ) -> Result<infinispan_rest::Client, ServerAccessError> {
        self.client_at(client, cluster, Target::FirstPod).await
    }

    async fn client_at(
        &self,
        client: &kube::Client,
        cluster: &Infinispan,
        target: Target,
    ) -> Result<infinispan_rest::Client, ServerAccessError> {
        let endpoint = self.endpoint(cluster, target)?;
        let (name, namespace) = name_and_namespace(cluster)?;
        let secrets = Api::<Secret>::namespaced(client.clone(), namespace);
        let read = async |secret: &str| {
            secrets
                .get_opt(secret)
                .await
                .map_err(|source| ServerAccessError::Kube {
                    namespace: namespace.to_string(),
                    secret: secret.to_string(),
                    source,
                })
        };
        let credentials = match credentials_secret_name(cluster)? {
            Some(secret) => {
                let found = read(secret).await?.ok_or_else(|| {
                    ServerAccessError::CredentialsSecretNotFound {
                        namespace: namespace.to_string(),
                        secret: secret.to_string(),
                    }
                })?;
                Some(credentials_from_secret(&found)?)
            }
            None => None,
        };
        let encryption = &cluster.spec.security.endpoint_encryption;
        let certificate_ca = match (&encryption.type_, &encryption.cert_secret_name) {
            (EncryptionType::Secret, Some(secret)) => {
                let found = read(secret).await?.ok_or_else(|| {
                    ServerAccessError::CertificateSecretNotFound {
                        namespace: namespace.to_string(),
                        secret: secret.clone(),
                    }
                })?;
                ca_from_secret(&found)
            }
            _ => None,
        };
        let mut config = ClientConfig::new(&endpoint.url);
        if let Some(credentials) = credentials {
            config = config.with_credentials(credentials);
        }
        if let Some(bundle) = trust_bundle(certificate_ca, self.ca_bundle_pem.as_deref()) {
            config = config.with_ca_bundle_pem(bundle);
        }
        if let Some(tls_name) = endpoint.tls_server_name {
            config = config.with_tls_server_name(tls_name);
        }
        tracing::debug!(cluster = %format!("{namespace}/{name}"), url = %endpoint.url, "server client");
        infinispan_rest::Client::new(config).map_err(|source| ServerAccessError::Client {
            url: endpoint.url.clone(),
            source,
        })
    }
}

fn name_and_namespace(cluster: &Infinispan) -> Result<(&str, &str), ServerAccessError> {
    match (&cluster.metadata.name, &cluster.metadata.namespace) {
        (Some(name), Some(namespace)) => Ok((name, namespace)),
        _ => Err(ServerAccessError::MissingMetadata),
    }
}

/// The name of the Secret with the operators' credentials of `cluster`: the one its status
/// names. `None` when the cluster needs none (authentication off and none named);
/// [`ServerAccessError::CredentialsNotReady`] when it needs one the status does not name yet.
pub fn credentials_secret_name(cluster: &Infinispan) -> Result<Option<&str>, ServerAccessError> {
    let named = cluster
        .status
        .as_ref()
        .and_then(|s| s.operator_credentials_secret.as_deref())
        .filter(|s| !s.is_empty());
    match named {
        Some(secret) => Ok(Some(secret)),
        None if !cluster.spec.security.endpoint_authentication => Ok(None),
        None => {
            let (name, namespace) = name_and_namespace(cluster)?;
            Err(ServerAccessError::CredentialsNotReady {
                namespace: namespace.to_string(),
                name: name.to_string(),
            })
        }
    }
}

/// The credentials in an operator credentials Secret (keys `username` and `password`).
pub fn credentials_from_secret(secret: &Secret) -> Result<Credentials, ServerAccessError> {
    let namespace = secret.metadata.namespace.clone().unwrap_or_default();
    let name = secret.metadata.name.clone().unwrap_or_default();
    let value = |key: &'static str| -> Result<String, ServerAccessError> {
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| b.0.clone())
            .or_else(|| {
                secret
                    .string_data
                    .as_ref()
                    .and_then(|d| d.get(key))
                    .map(|s| s.clone().into_bytes())
            })
            .filter(|b| !b.is_empty())
            .ok_or_else(|| ServerAccessError::CredentialsKeyMissing {
                namespace: namespace.clone(),
                secret: name.clone(),
                key,
            })?;
        String::from_utf8(bytes).map_err(|_| ServerAccessError::CredentialsNotUtf8 {
            namespace: namespace.clone(),
            secret: name.clone(),
            key,
        })
    };
    Ok(Credentials::new(value(USERNAME_KEY)?, value(PASSWORD_KEY)?))
}

/// The CA certificate(s) of a TLS Secret (`ca.crt`), when it has them.
pub fn ca_from_secret(secret: &Secret) -> Option<Vec<u8>> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(CA_KEY))
        .map(|b| b.0.clone())
        .filter(|b| !b.is_empty())
}

/// The CAs to trust: the certificate Secret's and the operator-wide bundle, together; `None`
/// (the system's roots) when neither is given.
pub fn trust_bundle(certificate_ca: Option<Vec<u8>>, operator: Option<&[u8]>) -> Option<Vec<u8>> {
    match (certificate_ca, operator) {
        (None, None) => None,
        (Some(ca), None) => Some(ca),
        (None, Some(bundle)) => Some(bundle.to_vec()),
        (Some(mut ca), Some(bundle)) => {
            if !ca.ends_with(b"\n") {
                ca.push(b'\n');
            }
            ca.extend_from_slice(bundle);
            Some(ca)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common_crds::InfinispanSpec;
    use common_crds::InfinispanStatus;
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn cluster(namespace: &str, name: &str) -> Infinispan {
        let spec: InfinispanSpec = serde_json::from_value(serde_json::json!({})).expect("spec");
        let mut cr = Infinispan::new(name, spec);
        cr.metadata.namespace = Some(namespace.to_string());
        cr
    }

    fn with_credentials(mut cr: Infinispan, secret: &str) -> Infinispan {
        cr.status = Some(InfinispanStatus {
            operator_credentials_secret: Some(secret.to_string()),
            ..InfinispanStatus::default()
        });
        cr
    }

    fn secret(data: &[(&str, &[u8])]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some("demo-operator-credentials".into()),
                namespace: Some("team-a".into()),
                ..ObjectMeta::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn parses_an_override() {
        let a: ServerAddress = " team-a/demo = http://127.0.0.1:13267/ "
            .parse()
            .expect("ok");
        assert_eq!(
            a,
            ServerAddress {
                namespace: "team-a".into(),
                name: "demo".into(),
                url: "http://127.0.0.1:13267".into(),
            }
        );
        assert_eq!(a.to_string(), "team-a/demo=http://127.0.0.1:13267");
        let b: ServerAddress = "ns/c=https://localhost:8443/prefix".parse().expect("ok");
        assert_eq!(b.url, "https://localhost:8443/prefix");
    }

    #[test]
    fn refuses_malformed_overrides_with_clear_errors() {
        let err = |entry: &str| entry.parse::<ServerAddress>().expect_err(entry);
        assert!(matches!(
            err("demo=http://x"),
            AddressError::Malformed { .. }
        ));
        assert!(matches!(err("ns/demo"), AddressError::Malformed { .. }));
        assert!(matches!(
            err("Team/demo=http://x"),
            AddressError::InvalidNamespace { .. }
        ));
        assert!(matches!(
            err("ns/de.mo=http://x"),
            AddressError::InvalidName { .. }
        ));
        assert!(matches!(
            err("ns/=http://x"),
            AddressError::InvalidName { .. }
        ));
        for (url, reason) in [
            ("127.0.0.1:1", "must start with http:// or https://"),
            ("ftp://x", "must start with http:// or https://"),
            ("http://u:p@127.0.0.1:1", "must not carry credentials"),
            ("http://", "has no host"),
            ("http://:80", "has no host"),
            ("http://x?a=b", "must not have a query"),
            ("http://x y", "is not a valid URL"),
        ] {
            let entry = format!("ns/demo={url}");
            let e = err(&entry);
            assert!(
                matches!(e, AddressError::InvalidUrl { .. }),
                "{entry}: {e:?}"
            );
            let text = e.to_string();
            assert!(text.contains(reason), "{entry}: {text}");
            assert!(!text.contains("u:p@") || url.contains("u:p@"), "{text}");
        }
        // The message names the entry, so a long list points at the bad one.
        assert!(err("ns/demo=nope").to_string().contains("\"ns/demo=nope\""));
    }

    #[test]
    fn parses_the_environment_list() {
        let list = ServerAddresses::parse_list(
            "a/src=http://127.0.0.1:13267, b/dst=http://127.0.0.1:13268,,a/src=http://127.0.0.1:13267",
        )
        .expect("ok");
        assert_eq!(list.len(), 2);
        assert_eq!(list.get("a", "src"), Some("http://127.0.0.1:13267"));
        assert_eq!(list.get("b", "dst"), Some("http://127.0.0.1:13268"));
        assert_eq!(list.get("a", "dst"), None);
        assert_eq!(
            list.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            vec![
                "a/src=http://127.0.0.1:13267",
                "b/dst=http://127.0.0.1:13268"
            ]
        );
        assert!(ServerAddresses::parse_list("").expect("empty").is_empty());
        assert!(matches!(
            "a/x=http://1,a/x=http://2".parse::<ServerAddresses>(),
            Err(AddressError::Conflict { .. })
        ));
        assert!(matches!(
            ServerAddresses::parse_list("a/x=http://1,broken"),
            Err(AddressError::Malformed { .. })
        ));
    }

    #[test]
    fn in_cluster_endpoints_follow_the_encryption() {
        let servers = Servers::new(ServerAddresses::new(), "cluster.local.");
        let mut cr = cluster("team-a", "demo");
        assert_eq!(
            servers.endpoint(&cr, Target::Service).expect("ok"),
            Endpoint {
                url: "http://demo-operator.team-a.svc.cluster.local:11222".into(),
                tls_server_name: None,
            }
        );
        assert_eq!(
            servers.endpoint(&cr, Target::FirstPod).expect("ok"),
            Endpoint {
                url: "http://demo-0.demo-ping.team-a.svc.cluster.local:11222".into(),
                tls_server_name: None,
            }
        );
        cr.spec.security.endpoint_encryption.type_ = EncryptionType::Secret;
        assert_eq!(
            servers.endpoint(&cr, Target::Service).expect("ok"),
            Endpoint {
                url: "https://demo-operator.team-a.svc.cluster.local:11222".into(),
                tls_server_name: Some("demo.team-a.svc.cluster.local".into()),
            }
        );
        assert_eq!(
            servers.endpoint(&cr, Target::FirstPod).expect("ok"),
            Endpoint {
                url: "https://demo-0.demo-ping.team-a.svc.cluster.local:11222".into(),
                tls_server_name: Some("demo.team-a.svc.cluster.local".into()),
            }
        );
        let bad = Servers::new(ServerAddresses::new(), "Not A Domain");
        assert!(matches!(
            bad.endpoint(&cr, Target::Service),
            Err(ServerAccessError::Url(_))
        ));
        let mut nameless = cr.clone();
        nameless.metadata.namespace = None;
        assert!(matches!(
            servers.endpoint(&nameless, Target::Service),
            Err(ServerAccessError::MissingMetadata)
        ));
    }

    #[test]
    fn an_override_replaces_both_targets_of_its_cluster_only() {
        let addresses =
            ServerAddresses::parse_list("team-a/demo=http://127.0.0.1:13267").expect("ok");
        let servers = Servers::new(addresses, "cluster.local");
        for target in [Target::Service, Target::FirstPod] {
            assert_eq!(
                servers
                    .endpoint(&cluster("team-a", "demo"), target)
                    .expect("ok"),
                Endpoint {
                    url: "http://127.0.0.1:13267".into(),
                    tls_server_name: None,
                }
            );
        }
        assert_eq!(
            servers
                .endpoint(&cluster("team-b", "demo"), Target::Service)
                .expect("ok")
                .url,
            "http://demo-operator.team-b.svc.cluster.local:11222"
        );
    }

    #[test]
    fn credentials_come_from_the_secret_the_status_names() {
        let cr = cluster("team-a", "demo");
        let e = credentials_secret_name(&cr).expect_err("not ready");
        assert_eq!(e.reason(), "CredentialsNotReady");
        assert!(e.to_string().contains("team-a/demo"), "{e}");
        let cr = with_credentials(cr, "demo-operator-credentials");
        assert_eq!(
            credentials_secret_name(&cr).expect("named"),
            Some("demo-operator-credentials")
        );
        let mut open = cluster("team-a", "open");
        open.spec.security.endpoint_authentication = false;
        assert_eq!(credentials_secret_name(&open).expect("none needed"), None);

        let creds = credentials_from_secret(&secret(&[
            ("username", b"operator"),
            ("password", b"s3cr3t-pw"),
        ]))
        .expect("ok");
        assert_eq!(creds.username, "operator");
        assert!(!format!("{creds:?}").contains("s3cr3t-pw"));

        let e = credentials_from_secret(&secret(&[("username", b"operator")]))
            .expect_err("no password");
        assert!(matches!(
            e,
            ServerAccessError::CredentialsKeyMissing {
                key: "password",
                ..
            }
        ));
        assert_eq!(
            e.to_string(),
            "the operator credentials Secret team-a/demo-operator-credentials has no \"password\" key"
        );
        let e = credentials_from_secret(&secret(&[
            ("username", b"operator"),
            ("password", &[0xff, 0xfe]),
        ]))
        .expect_err("binary");
        assert_eq!(e.reason(), "CredentialsInvalid");
        assert!(matches!(e, ServerAccessError::CredentialsNotUtf8 { .. }));
        let e = credentials_from_secret(&secret(&[("username", b""), ("password", b"x")]))
            .expect_err("empty user");
        assert!(matches!(
            e,
            ServerAccessError::CredentialsKeyMissing {
                key: "username",
                ..
            }
        ));
    }

    #[test]
    fn the_trust_bundle_joins_the_certificate_ca_and_the_operator_bundle() {
        let tls = secret(&[("tls.crt", b"cert"), ("ca.crt", b"CA-1")]);
        assert_eq!(ca_from_secret(&tls), Some(b"CA-1".to_vec()));
        assert_eq!(ca_from_secret(&secret(&[("tls.crt", b"cert")])), None);
        assert_eq!(trust_bundle(None, None), None);
        assert_eq!(trust_bundle(Some(b"A".to_vec()), None), Some(b"A".to_vec()));
        assert_eq!(trust_bundle(None, Some(b"B")), Some(b"B".to_vec()));
        assert_eq!(
            trust_bundle(Some(b"A".to_vec()), Some(b"B")),
            Some(b"A\nB".to_vec())
        );
        assert_eq!(
            trust_bundle(Some(b"A\n".to_vec()), Some(b"B")),
            Some(b"A\nB".to_vec())
        );
    }

    #[test]
    fn debug_shows_no_bundle_content() {
        let servers = Servers::new(ServerAddresses::new(), "cluster.local")
            .with_ca_bundle_pem(b"-----BEGIN CERTIFICATE-----secret".to_vec());
        assert!(!format!("{servers:?}").contains("BEGIN"));
    }
}
