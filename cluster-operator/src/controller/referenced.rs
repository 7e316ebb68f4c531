//! What an `Infinispan` CR points to, read from the API server: the operators' credentials
//! (generated when missing), the application identities (the user's Secret, or generated), the
//! configuration overlay ConfigMap and the TLS Secret. Turned into the builders' [`Referenced`]
//! input, or into a [`ReferenceError`] that says which object is missing or wrong and why (the
//! `Degraded` condition shows it).

use common_crds::Infinispan;
use common_crds::conditions::ProblemReason;
use common_crds::infinispan::{EncryptionType, SecurityStatus};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::PostParams;

use super::credentials;
use super::status::Problem;
use crate::build::resources_operator::ClientCertificate;
use crate::build::server::credential_store::CredentialStore;
use crate::build::server::sites::SiteTls;
use crate::build::server::{BuildError, ConfigOverlay, Identities, Referenced, TlsCertificate};
use crate::certificates::client_trust::ClientTrust;
use crate::cr_policy::{self, CrPolicy};

/// A referenced object is missing or cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    #[error("the Secret {namespace}/{name} named by {field} does not exist")]
    MissingSecret {
        namespace: String,
        name: String,
        field: &'static str,
    },
    #[error("the ConfigMap {namespace}/{name} named by spec.configMapName does not exist")]
    MissingConfigMap { namespace: String, name: String },
    #[error(transparent)]
    Invalid(#[from] BuildError),
    #[error(
        "the Secret {namespace}/{secret} with the cluster's CA was deleted, but certificates it signed remain ({}): restore it, or delete those Secrets to have a new CA and new certificates issued (the pods then restart with them; scale the cluster to 0 first when its transport uses TLS, or the pods restarted first cannot join the others)",
        signed.join(", ")
    )]
    CaMissing {
        namespace: String,
        secret: String,
        signed: Vec<String>,
    },
    #[error(
        "the Secret {namespace}/{secret} does not hold the cluster's CA (keys ca.crt and ca.key)"
    )]
    CaUnreadable { namespace: String, secret: String },
    #[error(
        "the {kind} {name} exists and is not this cluster's (no controller reference to its Infinispan CR): the operator does not take over an object it did not create; delete or rename it, or rename the cluster"
    )]
    NotOwned { kind: &'static str, name: String },
    #[error(
        "the {kind} {namespace}/{name} named by {field} does not allow this cluster: the operator uses a Secret or ConfigMap a CR names only when the object's annotation {annotation} lists the cluster ({cluster}, or * for every cluster of the namespace), so that naming an object gives no one what they may not read. Whoever may update it allows it: kubectl annotate {resource} {name} {annotation}={cluster}",
        annotation = common_crds::labels::ALLOW_CLUSTERS_ANNOTATION,
        resource = kind.to_lowercase()
    )]
    NotAllowed {
        kind: &'static str,
        namespace: String,
        name: String,
        field: &'static str,
        cluster: String,
    },
    #[error(transparent)]
    Certificate(#[from] crate::certificates::CertificateError),
    #[error(transparent)]
    Random(#[from] credentials::RandomError),
    #[error("reading or creating a referenced object failed: {0}")]
    Api(#[from] kube::Error),
}

impl ReferenceError {
    /// The problem the user must fix (a missing or unusable object), or the error itself when
    /// the API server or the random source failed (worth a retry with backoff).
    pub fn into_problem(self) -> Result<Problem, Self> {
        let reason = match &self {
            Self::MissingSecret { .. } => ProblemReason::MissingSecret,
            Self::MissingConfigMap { .. } => ProblemReason::MissingConfigMap,
            Self::Invalid(error) => error.reason(),
            Self::CaMissing { .. } | Self::CaUnreadable { .. } => {
                ProblemReason::CertificateAuthorityMissing
            }
            Self::NotOwned { .. } => ProblemReason::ObjectNotOwned,
            Self::NotAllowed { .. } => ProblemReason::ReferenceNotAllowed,
            Self::Certificate(_) | Self::Random(_) | Self::Api(_) => return Err(self),
        };
        Ok(Problem::new(reason, self))
    }
}

/// What the builders need, plus the operators' credentials Secret.
#[derive(Debug)]
pub struct Read {
    pub referenced: Referenced,
    /// The operators' credentials Secret (created if it was missing).
    pub operator_credentials: Secret,
    /// A digest of the credentials Secret's data (never the data), so that a new password
    /// rolls the resources operator (it reads the Secret once at start).
    pub credentials_revision: String,
    /// The endpoint certificate Secret has a `ca.crt` (the resources operator trusts it).
    pub server_ca: bool,
    /// The certificate the operators present when the endpoint asks clients for one: its
    /// Secret's name and revision (a renewed certificate rolls the resources operator).
    pub client_certificate: Option<ClientCertificate>,
    /// When the first certificate the operator issued for the cluster is due for renewal.
    pub renew_at: Option<k8s_openapi::jiff::Timestamp>,
    /// The API server serves ServiceMonitors (the Prometheus Operator's CRD is installed).
    pub service_monitors_served: bool,
    /// The API server serves OpenShift Routes (set by the controller after [`read`]).
    pub routes_served: bool,
    /// The metrics user's credentials Secret, when the realm has that user
    /// ([`crate::build::server::metrics_user_needed`] and ServiceMonitors served).
    pub metrics_credentials: Option<Secret>,
}

/// What the operator needs to issue certificates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateSettings {
    pub lifetimes: crate::certificates::Lifetimes,
    /// The cluster domain the Services' names end with.
    pub cluster_domain: String,
}

/// Reads (and creates what the operator generates) everything `cluster` (resolved: its TLS
/// types, `tls_in_effect`, written in) references. A Secret or ConfigMap the CR names is used
/// only when `policy` allows it ([`cr_policy::reference_allowed`]).
pub async fn read(
    client: &kube::Client,
    cluster: &Infinispan,
    tls_in_effect: &SecurityStatus,
    certificates: &CertificateSettings,
    policy: &CrPolicy,
    service_monitors_served: bool,
) -> Result<Read, ReferenceError> {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let owner = super::apply::owner_reference(cluster);
    let security = &cluster.spec.security;
    let encryption = &security.endpoint_encryption;

    // First what the CR names, so that a missing or unallowed object leaves nothing generated.
    let user_identities = match &security.endpoint_secret_name {
        Some(secret) if security.endpoint_authentication => Some(
            named_secret(
                &secrets,
                &namespace,
                secret,
                "spec.security.endpointSecretName",
                &name,
                policy,
            )
            .await?,
        ),
        _ => None,
    };
    let overlay = match &cluster.spec.config_map_name {
        Some(config_map) => {
            let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
            let found = config_maps.get_opt(config_map).await?.ok_or_else(|| {
                ReferenceError::MissingConfigMap {
                    namespace: namespace.clone(),
                    name: config_map.clone(),
                }
            })?;
            allowed(
                &found.metadata,
                "ConfigMap",
                "spec.configMapName",
                &name,
                policy,
            )?;
            Some(ConfigOverlay::from_config_map(&found)?)
        }
        None => None,
    };
    let user_tls = match (
        encryption.type_.unwrap_or_default(),
        &encryption.cert_secret_name,
    ) {
        (EncryptionType::Secret, Some(tls_secret)) => Some(
            named_secret(
                &secrets,
                &namespace,
                tls_secret,
                "spec.security.endpointEncryption.certSecretName",
                &name,
                policy,
            )
            .await?,
        ),
        (EncryptionType::Secret, None) => return Err(BuildError::MissingTlsSecretName.into()),
        _ => None,
    };
    let validate_clients = encryption.asks_client_certificates();
    let client_cas = match (validate_clients, &encryption.client_cert_secret_name) {
        (true, Some(trust_secret)) => Some(
            named_secret(
                &secrets,
                &namespace,
                trust_secret,
                "spec.security.endpointEncryption.clientCertSecretName",
                &name,
                policy,
            )
            .await?,
        ),
        (true, None) => return Err(BuildError::MissingClientCertSecretName.into()),
        (false, _) => None,
    };

    let credential_store = match &security.credential_store_secret_name {
        Some(store_secret) => Some(
            named_secret(
                &secrets,
                &namespace,
                store_secret,
                "spec.security.credentialStoreSecretName",
                &name,
                policy,
            )
            .await?,
        ),
        None => None,
    };
    let credential_store = credential_store
        .as_ref()
        .map(CredentialStore::from_secret)
        .transpose()
        .map_err(BuildError::from)?;
    let site_tls = match cluster
        .spec
        .service
        .sites
        .as_ref()
        .and_then(|sites| sites.local.encryption.as_ref())
    {
        Some(encryption) => {
            let read = async |secret: &str, field: &'static str| {
                named_secret(&secrets, &namespace, secret, field, &name, policy).await
            };
            let transport = read(
                &encryption.transport_key_store.secret_name,
                "spec.service.sites.local.encryption.transportKeyStore.secretName",
            )
            .await?;
            let router = read(
                &encryption.router_key_store.secret_name,
                "spec.service.sites.local.encryption.routerKeyStore.secretName",
            )
            .await?;
            let trust = read(
                &encryption.trust_store.secret_name,
                "spec.service.sites.local.encryption.trustStore.secretName",
            )
            .await?;
            Some(SiteTls::from_secrets(
                encryption, &transport, &router, &trust,
            )?)
        }
        None => None,
    };

    // Then what the operator generates.
    let operator_credentials = get_or_create(
        &secrets,
        &credentials::operator_credentials_name(&name),
        || {
            Ok(credentials::operator_credentials(
                cluster,
                owner.clone(),
                &credentials::random_password()?,
            ))
        },
    )
    .await?;
    let identities = if security.endpoint_authentication {
        let application = match user_identities {
            Some(found) => found,
            None => {
                get_or_create(
                    &secrets,
                    &credentials::generated_identities_name(&name),
                    || {
                        Ok(credentials::generated_identities(
                            cluster,
                            owner.clone(),
                            &credentials::random_password()?,
                        ))
                    },
                )
                .await?
            }
        };
        Some(Identities::from_secrets(
            &operator_credentials,
            &application,
        )?)
    } else {
        None
    };
    // The credential store's password, while the CR names a store.
    if credential_store.is_some() {
        get_or_create(
            &secrets,
            &crate::build::server::credential_store::password_secret_name(&name),
            || {
                Ok(credentials::credential_store_password(
                    cluster,
                    owner.clone(),
                    &credentials::random_password()?,
                ))
            },
        )
        .await?;
    }
    // The user the ServiceMonitor scrapes as, only while one scrapes with credentials.
    let metrics_credentials =
        if service_monitors_served && crate::build::server::metrics_user_needed(cluster) {
            Some(
                get_or_create(
                    &secrets,
                    &crate::build::server::metrics_credentials_name(&name),
                    || {
                        Ok(credentials::metrics_credentials(
                            cluster,
                            owner.clone(),
                            &credentials::random_password()?,
                        ))
                    },
                )
                .await?,
            )
        } else {
            None
        };
    let identities = match (identities, &metrics_credentials) {
        (Some(identities), Some(metrics)) => Some(identities.with_metrics_user(metrics)?),
        (identities, _) => identities,
    };
    // What the operator issues (the CR is resolved: its TLS types are written in).
    let generated = super::certificates::ensure(
        client,
        cluster,
        tls_in_effect,
        certificates.lifetimes,
        &certificates.cluster_domain,
        &owner,
    )
    .await?;
    let mut server_ca = false;
    let tls = match (encryption.type_.unwrap_or_default(), user_tls) {
        (EncryptionType::Secret, Some(found)) => {
            server_ca = found
                .data
                .as_ref()
                .is_some_and(|d| d.contains_key(crate::servers::CA_KEY));
            Some(TlsCertificate::from_secret(&found)?)
        }
        (EncryptionType::Generated, _) => {
            server_ca = true;
            generated
                .endpoint
                .as_ref()
                .map(TlsCertificate::from_secret)
                .transpose()?
        }
        _ => None,
    };

    // With client certificates: the user's CAs and the cluster's, which signs the operators'.
    let client_trust = match (&client_cas, &generated.ca_pem) {
        (Some(found), Some(ca_pem)) => {
            Some(ClientTrust::from_secret(found, ca_pem)?.listing(&generated.listed)?)
        }
        _ => None,
    };
    let client_certificate = generated.client.as_ref().map(|secret| ClientCertificate {
        secret: secret.metadata.name.clone().unwrap_or_default(),
        revision: revision(secret),
    });

    let credentials_revision = revision(&operator_credentials);
    Ok(Read {
        referenced: Referenced {
            identities,
            overlay,
            tls,
            transport: generated.transport,
            client_trust,
            credential_store,
            site_tls,
        },
        operator_credentials,
        credentials_revision,
        server_ca,
        client_certificate,
        renew_at: generated.renew_at,
        service_monitors_served,
        routes_served: false,
        metrics_credentials,
    })
}

/// The Secret `name` that the CR's `field` names, when it exists and allows `cluster`.
async fn named_secret(
    secrets: &Api<Secret>,
    namespace: &str,
    name: &str,
    field: &'static str,
    cluster: &str,
    policy: &CrPolicy,
) -> Result<Secret, ReferenceError> {
    let found = secrets
        .get_opt(name)
        .await?
        .ok_or_else(|| ReferenceError::MissingSecret {
            namespace: namespace.to_string(),
            name: name.to_string(),
            field,
        })?;
    allowed(&found.metadata, "Secret", field, cluster, policy)?;
    Ok(found)
}

/// `Ok` when the object `meta` that the CR's `field` names allows `cluster` to use it.
fn allowed(
    meta: &kube::api::ObjectMeta,
    kind: &'static str,
    field: &'static str,
    cluster: &str,
    policy: &CrPolicy,
) -> Result<(), ReferenceError> {
    if cr_policy::reference_allowed(meta.annotations.as_ref(), cluster, policy) {
        return Ok(());
    }
    Err(ReferenceError::NotAllowed {
        kind,
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        field,
        cluster: cluster.to_string(),
    })
}

/// The Secret `name`, created from `build` when it does not exist (never overwritten: the
/// user may rotate what it holds).
async fn get_or_create(
    secrets: &Api<Secret>,
    name: &str,
    build: impl FnOnce() -> Result<Secret, ReferenceError>,
) -> Result<Secret, ReferenceError> {
    if let Some(found) = secrets.get_opt(name).await? {
        return Ok(found);
    }
    let created = build()?;
    match secrets.create(&PostParams::default(), &created).await {
        Ok(created) => {
            tracing::info!(secret = name, "generated the Secret");
            Ok(created)
        }
        // Created concurrently (another reconcile, a previous leader): use that one.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(secrets.get(name).await?),
        Err(error) => Err(error.into()),
    }
}

/// What changes whenever the Secret does: its uid and resourceVersion (a recreated Secret has a
/// new uid; every write gives a new resourceVersion). Nothing derived from its data, so the
/// annotation it ends up in (the resources operator's rollout hash, readable by whoever may
/// read the Deployment) says nothing about the password: a hash of the data, even truncated,
/// lets a reader test password guesses offline.
fn revision(secret: &Secret) -> String {
    format!(
        "{}/{}",
        secret.metadata.uid.as_deref().unwrap_or_default(),
        secret
            .metadata
            .resource_version
            .as_deref()
            .unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    #[test]
    fn the_revision_follows_the_secret_and_says_nothing_of_its_data() {
        let secret = |uid: &str, version: &str, password: &str| Secret {
            metadata: kube::api::ObjectMeta {
                uid: Some(uid.to_string()),
                resource_version: Some(version.to_string()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(
                "password".to_string(),
                ByteString(password.as_bytes().to_vec()),
            )])),
            ..Secret::default()
        };
        let first = revision(&secret("u1", "10", "secret-value"));
        assert_eq!(first, revision(&secret("u1", "10", "secret-value")));
        // A write (the password rotated) or a recreated Secret: a new revision.
        assert_ne!(first, revision(&secret("u1", "11", "other")));
        assert_ne!(first, revision(&secret("u2", "10", "secret-value")));
        // Nothing of the data: the same revision whatever the password.
        assert_eq!(first, revision(&secret("u1", "10", "guess")));
        assert!(!first.contains("secret"));
    }
}
