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
//! - **Which certificate it presents**: with `clientCert: Validate`, the operators' client
//!   certificate from the Secret `<name>-client-tls` the cluster operator issues from the
//!   cluster's CA (the server trusts that CA besides the user's).
//! - A client is built per call (a new connection pool): callers are Backups and Restores,
//!   rare enough that caching clients (and invalidating them on a credentials rotation) would
//!   cost more than it saves.
//!
//! The module: `addresses` (the out-of-cluster URL overrides), `credentials` (the
//! credentials and CAs read from Secrets), and here the targets, the endpoints and the
//! clients built from them.

mod addresses;
mod credentials;

use std::fmt;

use common_crds::Infinispan;
use infinispan_rest::{ClientConfig, ClientIdentity};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::build::resources_operator::{self, BuildError};
use crate::build::security;
use crate::build::server::{SERVER_PORT, ping_service_name};

use crate::certificates::objects::client_secret_name;
pub use addresses::{AddressError, SERVER_URLS_ENV, ServerAddress, ServerAddresses};
pub use credentials::{
    CA_KEY, ca_from_secret, client_identity_from_secret, credentials_from_secret,
    credentials_secret_name, secret_value, trust_bundle,
};

/// Which server of a cluster to reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// One node, through the operators' Service (client-IP session affinity).
    Service,
    /// Always the same node, pod 0 (node-local work: backups and restores).
    FirstPod,
    /// The pod of this ordinal (what each server reports of itself).
    Pod(u32),
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
    #[error(
        "the status of the Infinispan cluster {namespace}/{name} names the Secret {named:?} as the operators' credentials, but the cluster operator keeps them in {expected:?}: the status is not followed (it is rewritten on the cluster's next reconcile)"
    )]
    CredentialsSecretNotTheOperators {
        namespace: String,
        name: String,
        named: String,
        expected: String,
    },
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
    #[error(
        "the operators' client certificate Secret {namespace}/{secret} does not exist or is incomplete yet (the cluster operator issues it when clientCert is Validate)"
    )]
    ClientCertificateNotReady { namespace: String, secret: String },
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
            | Self::CredentialsSecretNotTheOperators { .. }
            | Self::CredentialsKeyMissing { .. }
            | Self::CredentialsNotUtf8 { .. } => "CredentialsInvalid",
            Self::CertificateSecretNotFound { .. } => "CertificateNotFound",
            Self::ClientCertificateNotReady { .. } => "ClientCertificateNotReady",
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
        let cluster = &security::resolved(cluster, &security::recorded(cluster));
        // The name a certificate is issued for (and the check of the domain).
        let certified = resources_operator::client_service_host(cluster, &self.cluster_domain)?;
        let https = security::endpoint_tls(cluster);
        let url = match target {
            Target::Service => {
                resources_operator::operator_service_url(cluster, &self.cluster_domain)?
            }
            Target::FirstPod | Target::Pod(_) => {
                let ordinal = match target {
                    Target::Pod(ordinal) => ordinal,
                    _ => 0,
                };
                let scheme = resources_operator::endpoint_scheme(cluster);
                let domain = self.cluster_domain.trim_end_matches('.');
                let ping = ping_service_name(name);
                format!("{scheme}://{name}-{ordinal}.{ping}.{namespace}.svc.{domain}:{SERVER_PORT}")
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

    /// A REST client for the pod of `ordinal` of `cluster`; `None` when an override names the
    /// cluster's server (one URL: its pods cannot be told apart).
    pub async fn pod_client_for(
        &self,
        client: &kube::Client,
        cluster: &Infinispan,
        ordinal: u32,
    ) -> Result<Option<infinispan_rest::Client>, ServerAccessError> {
        let (name, namespace) = name_and_namespace(cluster)?;
        if self.addresses.get(namespace, name).is_some() {
            return Ok(None);
        }
        self.client_at(client, cluster, Target::Pod(ordinal))
            .await
            .map(Some)
    }

    /// What reaching pod 0 of `cluster` as the operators takes, for a pod of the operator's
    /// (the archive Jobs): the endpoint, the credentials Secret and the CA bundle.
    pub async fn node_access(
        &self,
        client: &kube::Client,
        cluster: &Infinispan,
    ) -> Result<Access, ServerAccessError> {
        self.access(client, cluster, Target::FirstPod).await
    }

    async fn access(
        &self,
        client: &kube::Client,
        cluster: &Infinispan,
        target: Target,
    ) -> Result<Access, ServerAccessError> {
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
        let resolved = security::resolved(cluster, &security::recorded(cluster));
        // Authenticate: the certificate is the identity; the server takes no password.
        let credentials_secret = if security::certificate_authentication(&resolved) {
            None
        } else {
            credentials_secret_name(cluster)?
        };
        let (credentials, credentials_secret) = match credentials_secret {
            Some(secret) => {
                let found = read(secret).await?.ok_or_else(|| {
                    ServerAccessError::CredentialsSecretNotFound {
                        namespace: namespace.to_string(),
                        secret: secret.to_string(),
                    }
                })?;
                (
                    Some(credentials_from_secret(&found)?),
                    Some(secret.to_string()),
                )
            }
            None => (None, None),
        };
        let certificate_ca = match security::endpoint_certificate_secret(&resolved) {
            Some(secret) => {
                let found = read(&secret).await?.ok_or_else(|| {
                    ServerAccessError::CertificateSecretNotFound {
                        namespace: namespace.to_string(),
                        secret: secret.clone(),
                    }
                })?;
                ca_from_secret(&found)
            }
            None => None,
        };
        let client_certificate = if security::client_certificates_required(&resolved) {
            let secret = client_secret_name(name);
            let found = read(&secret).await?;
            let identity = found.as_ref().and_then(client_identity_from_secret).ok_or(
                ServerAccessError::ClientCertificateNotReady {
                    namespace: namespace.to_string(),
                    secret: secret.clone(),
                },
            )?;
            Some((secret, identity))
        } else {
            None
        };
        Ok(Access {
            endpoint,
            credentials,
            credentials_secret,
            ca_pem: trust_bundle(certificate_ca, self.ca_bundle_pem.as_deref()),
            client_certificate,
        })
    }

    async fn client_at(
        &self,
        client: &kube::Client,
        cluster: &Infinispan,
        target: Target,
    ) -> Result<infinispan_rest::Client, ServerAccessError> {
        let (name, namespace) = name_and_namespace(cluster)?;
        let Access {
            endpoint,
            credentials,
            ca_pem,
            client_certificate,
            ..
        } = self.access(client, cluster, target).await?;
        let mut config = ClientConfig::new(&endpoint.url);
        if let Some((_, identity)) = client_certificate {
            config = config.with_client_identity(identity);
        }
        if let Some(credentials) = credentials {
            config = config.with_credentials(credentials);
        }
        if let Some(bundle) = ca_pem {
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

/// How the operators reach a server ([`Servers::node_access`]).
#[derive(Debug)]
pub struct Access {
    pub endpoint: Endpoint,
    pub credentials: Option<infinispan_rest::Credentials>,
    /// The Secret the credentials come from.
    pub credentials_secret: Option<String>,
    /// The CAs to trust (PEM); `None`: the system's roots.
    pub ca_pem: Option<Vec<u8>>,
    /// The Secret of the operators' client certificate and what it holds, when the cluster
    /// asks clients for one.
    pub client_certificate: Option<(String, ClientIdentity)>,
}

pub(crate) fn name_and_namespace(cluster: &Infinispan) -> Result<(&str, &str), ServerAccessError> {
    match (&cluster.metadata.name, &cluster.metadata.namespace) {
        (Some(name), Some(namespace)) => Ok((name, namespace)),
        _ => Err(ServerAccessError::MissingMetadata),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common_crds::InfinispanSpec;
    use common_crds::infinispan::EncryptionType;

    pub(super) fn cluster(namespace: &str, name: &str) -> Infinispan {
        let spec: InfinispanSpec = serde_json::from_value(serde_json::json!({})).expect("spec");
        let mut cr = Infinispan::new(name, spec);
        cr.metadata.namespace = Some(namespace.to_string());
        cr
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
        cr.spec.security.endpoint_encryption.type_ = Some(EncryptionType::Secret);
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
    fn debug_shows_no_bundle_content() {
        let servers = Servers::new(ServerAddresses::new(), "cluster.local")
            .with_ca_bundle_pem(b"-----BEGIN CERTIFICATE-----secret".to_vec());
        assert!(!format!("{servers:?}").contains("BEGIN"));
    }
}
