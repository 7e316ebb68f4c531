//! The cluster's CA and the certificates the operator issues from it, kept in their Secrets
//! (`crate::certificates`): created when missing, issued again when [`renewal::verdict`] says
//! so, the CA published in the ConfigMap `<cluster>-ca.crt`. A new certificate changes the
//! config hash, so the pods roll one at a time onto it; the CA stays, so old and new pods
//! trust each other throughout.
//!
//! The CA is never replaced behind the cluster's back: when its Secret is gone but certificates
//! it signed are still there, nothing is issued and the CR says what to do
//! ([`ReferenceError::CaMissing`]).

use common_crds::Infinispan;
use common_crds::infinispan::{EncryptionType, SecurityStatus, TransportEncryptionType};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use super::referenced::ReferenceError;
use crate::build::security;
use crate::build::server::{
    TransportTls, client_service_name, labels, operator_service_name, ping_service_name,
};
use crate::certificates::issue::{self, Ca};
use crate::certificates::objects::{self, names_digest};
use crate::certificates::renewal::{self, Recorded, Verdict};
use crate::certificates::{Lifetimes, Purpose};

/// What the operator issued for a cluster.
#[derive(Debug, Default)]
pub struct Generated {
    /// The endpoint certificate Secret, when the endpoint TLS is `Generated`.
    pub endpoint: Option<Secret>,
    /// The transport stores, when the transport TLS is `Generated`.
    pub transport: Option<TransportTls>,
    /// The operators' client certificate Secret, when the endpoint asks clients for one.
    pub client: Option<Secret>,
    /// With `clientCert: Authenticate` and a ServiceMonitor: the scraper's certificate Secret.
    pub metrics_client: Option<Secret>,
    /// With `clientCert: Authenticate`: the certificates (`tls.crt`, PEM) the server must list
    /// for the operators and the scraper, presented and next.
    pub listed: Vec<String>,
    /// The cluster's CA (PEM), whenever the operator issues anything.
    pub ca_pem: Option<String>,
    /// The earliest renewal due: the reconcile comes back then.
    pub renew_at: Option<Timestamp>,
}

/// The DNS names of the endpoint certificate: the client Service (first: what the operators
/// check), the operators' Service and every pod (`*.<cluster>-ping`), each short and
/// qualified. Not `spec.expose.host`: a change of the exposure would roll the servers; clients
/// from outside that check the name use a certificate of their own (`Secret`).
pub fn endpoint_names(name: &str, namespace: &str, cluster_domain: &str) -> Vec<String> {
    let domain = cluster_domain.trim_end_matches('.');
    let mut names = Vec::new();
    for service in [client_service_name(name), operator_service_name(name)] {
        names.push(format!("{service}.{namespace}.svc.{domain}"));
    }
    names.push(format!(
        "*.{}.{namespace}.svc.{domain}",
        ping_service_name(name)
    ));
    for service in [client_service_name(name), operator_service_name(name)] {
        names.push(format!("{service}.{namespace}.svc"));
        names.push(format!("{service}.{namespace}"));
        names.push(service);
    }
    names.push(format!("*.{}.{namespace}.svc", ping_service_name(name)));
    names
}

/// The DNS names of the transport certificate: the pods.
pub fn transport_names(name: &str, namespace: &str, cluster_domain: &str) -> Vec<String> {
    let domain = cluster_domain.trim_end_matches('.');
    vec![format!(
        "*.{}.{namespace}.svc.{domain}",
        ping_service_name(name)
    )]
}

fn meta(name: String, namespace: &str, cluster: &str, owner: &OwnerReference) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(namespace.to_string()),
        labels: Some(labels(cluster)),
        owner_references: Some(vec![owner.clone()]),
        ..ObjectMeta::default()
    }
}

/// Creates and renews what `security` asks the operator to issue for `cluster` (the resolved
/// CR), with `lifetimes`, for the Services of `cluster_domain`.
pub async fn ensure(
    client: &kube::Client,
    cluster: &Infinispan,
    security: &SecurityStatus,
    lifetimes: Lifetimes,
    cluster_domain: &str,
    owner: &OwnerReference,
) -> Result<Generated, ReferenceError> {
    let endpoint = security.endpoint_encryption == EncryptionType::Generated;
    let transport = security.transport_encryption == TransportEncryptionType::Generated;
    let client_certificate = cluster
        .spec
        .security
        .endpoint_encryption
        .asks_client_certificates();
    let listed = security::certificate_authentication(cluster);
    if !(endpoint || transport || client_certificate) {
        return Ok(Generated::default());
    }
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let endpoint_name = objects::endpoint_secret_name(&name);
    let transport_name = objects::transport_secret_name(&name);
    let found_endpoint = ours(secrets.get_opt(&endpoint_name).await?, "Secret", owner)?;
    let found_transport = ours(secrets.get_opt(&transport_name).await?, "Secret", owner)?;
    let client_name = objects::client_secret_name(&name);
    let found_client = ours(secrets.get_opt(&client_name).await?, "Secret", owner)?;

    let ca = ca(
        &secrets,
        &name,
        &namespace,
        owner,
        lifetimes,
        [&found_endpoint, &found_transport, &found_client],
    )
    .await?;
    let issuer = issue::fingerprint(&ca.cert_pem);
    publish_ca(client, &name, &namespace, owner, &ca).await?;

    let now = Timestamp::now();
    let mut generated = Generated {
        ca_pem: Some(ca.cert_pem.clone()),
        ..Generated::default()
    };
    let mut due = |at: Timestamp| {
        generated.renew_at = Some(
            generated
                .renew_at
                .map_or(at, |earlier: Timestamp| earlier.min(at)),
        );
    };
    let issuing = Issuing {
        secrets: &secrets,
        ca: &ca,
        issuer: &issuer,
        now,
        lifetime: lifetimes.certificate,
        namespace: &namespace,
        cluster: &name,
        owner,
    };
    if endpoint {
        let names = endpoint_names(&name, &namespace, cluster_domain);
        let (secret, renew_at) = issuing
            .tls_secret(
                Purpose::Endpoint,
                &endpoint_name,
                found_endpoint.as_ref(),
                &names,
                "endpoint certificate",
            )
            .await?;
        due(renew_at);
        generated.endpoint = secret;
    }
    if transport {
        let names = transport_names(&name, &namespace, cluster_domain);
        let digest = names_digest(&names);
        let verdict = verdict_on(
            found_transport.as_ref(),
            objects::transport_secret_complete,
            &digest,
            &issuer,
            now,
        );
        let secret = match verdict {
            Verdict::Keep { renew_at } => {
                due(renew_at);
                found_transport.clone().unwrap_or_default()
            }
            Verdict::Issue(reason) => {
                let issued =
                    issue::issue(&ca, Purpose::Transport, &names, now, lifetimes.certificate)?;
                let password = super::credentials::random_password()?;
                let (keystore, truststore) = issue::transport_stores(&ca, &issued, &password)?;
                let recorded = recorded(&issued, digest, issuer.clone());
                due(renewal::renew_at(recorded.not_before, recorded.not_after));
                let secret = objects::transport_secret(
                    meta(transport_name.clone(), &namespace, &name, owner),
                    keystore,
                    truststore,
                    &password,
                    &recorded,
                );
                tracing::info!(cluster = %format!("{namespace}/{name}"), secret = %transport_name, reason = reason.as_str(), not_after = %recorded.not_after, "issued the transport certificate");
                apply_secret(&secrets, &transport_name, &secret).await?
            }
        };
        generated.transport = Some(TransportTls {
            secret: transport_name,
            digest: transport_digest(&secret),
        });
    }
    if listed {
        let identity = issuing
            .listed_tls_secrets(
                &client_name,
                found_client.as_ref(),
                &objects::client_next_secret_name(&name),
                objects::client_common_name(&namespace, &name),
                "operators' client certificate",
            )
            .await?;
        due(identity.due);
        generated.listed.extend(identity.listed);
        generated.client = Some(identity.current);
        if cluster.spec.monitoring.service_monitor {
            let metrics_name = objects::metrics_client_secret_name(&name);
            let found = ours(secrets.get_opt(&metrics_name).await?, "Secret", owner)?;
            let identity = issuing
                .listed_tls_secrets(
                    &metrics_name,
                    found.as_ref(),
                    &objects::metrics_client_next_secret_name(&name),
                    objects::metrics_common_name(&namespace, &name),
                    "scraper's client certificate",
                )
                .await?;
            due(identity.due);
            generated.listed.extend(identity.listed);
            generated.metrics_client = Some(identity.current);
        }
    } else if client_certificate {
        let names = vec![objects::client_common_name(&namespace, &name)];
        let (secret, renew_at) = issuing
            .tls_secret(
                Purpose::Client,
                &client_name,
                found_client.as_ref(),
                &names,
                "operators' client certificate",
            )
            .await?;
        due(renew_at);
        generated.client = secret;
    }
    Ok(generated)
}

/// What issuing a certificate of the cluster's CA takes.
struct Issuing<'a> {
    secrets: &'a Api<Secret>,
    ca: &'a Ca,
    /// The CA's fingerprint, recorded on what it signs.
    issuer: &'a str,
    now: Timestamp,
    lifetime: SignedDuration,
    namespace: &'a str,
    cluster: &'a str,
    owner: &'a OwnerReference,
}

impl Issuing<'_> {
    /// The `kubernetes.io/tls` Secret `name` of a certificate for `purpose` with `names`:
    /// `found` while it is good, else a new certificate (`what`, for the log); with when it is
    /// due for renewal.
    async fn tls_secret(
        &self,
        purpose: Purpose,
        name: &str,
        found: Option<&Secret>,
        names: &[String],
        what: &str,
    ) -> Result<(Option<Secret>, Timestamp), ReferenceError> {
        let digest = names_digest(names);
        let verdict = verdict_on(
            found,
            objects::tls_secret_complete,
            &digest,
            self.issuer,
            self.now,
        );
        match verdict {
            Verdict::Keep { renew_at } => Ok((found.cloned(), renew_at)),
            Verdict::Issue(reason) => {
                let (applied, recorded) = self
                    .issue_tls(purpose, name, names, digest, reason, what)
                    .await?;
                Ok((
                    Some(applied),
                    renewal::renew_at(recorded.not_before, recorded.not_after),
                ))
            }
        }
    }

    /// A new certificate for `purpose` with `names` (of digest `digest`) in the
    /// `kubernetes.io/tls` Secret `name`, applied, for `reason` (logged with `what`).
    async fn issue_tls(
        &self,
        purpose: Purpose,
        name: &str,
        names: &[String],
        digest: String,
        reason: renewal::Reason,
        what: &str,
    ) -> Result<(Secret, Recorded), ReferenceError> {
        let issued = issue::issue(self.ca, purpose, names, self.now, self.lifetime)?;
        let recorded = recorded(&issued, digest, self.issuer.to_string());
        let secret = objects::tls_secret(
            meta(name.to_string(), self.namespace, self.cluster, self.owner),
            self.ca,
            &issued,
            &recorded,
        );
        tracing::info!(cluster = %format!("{}/{}", self.namespace, self.cluster), secret = %name, reason = reason.as_str(), not_after = %recorded.not_after, "issued the {what}");
        let applied = apply_secret(self.secrets, name, &secret).await?;
        Ok((applied, recorded))
    }

    /// A client identity of an endpoint that authenticates by certificate, of common name
    /// `common_name`: the presented certificate's Secret `name` (`found` as it is now) and the
    /// listed one's `next_name`, kept, rotated or issued as [`renewal::listed_plan`] says.
    async fn listed_tls_secrets(
        &self,
        name: &str,
        found: Option<&Secret>,
        next_name: &str,
        common_name: String,
        what: &str,
    ) -> Result<ListedIdentity, ReferenceError> {
        let found_next = ours(self.secrets.get_opt(next_name).await?, "Secret", self.owner)?;
        let found_next = found_next.as_ref();
        let names = &[common_name][..];
        let digest = names_digest(names);
        let record = |secret: Option<&Secret>| {
            secret.map(|s| objects::recorded(s).filter(|_| objects::tls_secret_complete(s)))
        };
        let plan = renewal::listed_plan(
            record(found).as_ref().map(Option::as_ref),
            record(found_next).as_ref().map(Option::as_ref),
            &digest,
            self.issuer,
            self.now,
        );
        // Total: listed_plan issues what is missing or unusable; the fallbacks issue anyway.
        let listed_what = format!("listed {what}");
        let issue_current =
            |reason| self.issue_tls(Purpose::Client, name, names, digest.clone(), reason, what);
        let issue_next = |reason| {
            self.issue_tls(
                Purpose::Client,
                next_name,
                names,
                digest.clone(),
                reason,
                &listed_what,
            )
        };
        let current = match (
            plan.issue_current,
            plan.promote.then_some(found_next).flatten(),
            found,
        ) {
            (Some(reason), _, _) => issue_current(reason).await?.0,
            (None, Some(listed), _) => {
                let promoted = objects::tls_secret_renamed(
                    listed,
                    meta(name.to_string(), self.namespace, self.cluster, self.owner),
                );
                tracing::info!(cluster = %format!("{}/{}", self.namespace, self.cluster), secret = %name, from = %next_name, "the listed {what} is presented from now on");
                apply_secret(self.secrets, name, &promoted).await?
            }
            (None, None, Some(found)) => found.clone(),
            (None, None, None) => issue_current(renewal::Reason::Missing).await?.0,
        };
        let next = match (plan.issue_next, found_next) {
            (Some(reason), _) => issue_next(reason).await?.0,
            (None, Some(found)) => found.clone(),
            (None, None) => issue_next(renewal::Reason::Missing).await?.0,
        };
        let due = match (objects::recorded(&current), objects::recorded(&next)) {
            (Some(c), Some(n)) => renewal::listed_due(&c, &n),
            _ => self.now,
        };
        Ok(ListedIdentity {
            listed: [&current, &next]
                .iter()
                .filter_map(|s| objects::certificate_pem(s))
                .collect(),
            current,
            due,
        })
    }
}

/// A client identity of an endpoint that authenticates by certificate.
struct ListedIdentity {
    /// The Secret of the certificate presented.
    current: Secret,
    /// The certificates the server must list (`tls.crt` of both Secrets).
    listed: Vec<String>,
    /// When to look again.
    due: Timestamp,
}

/// [`renewal::verdict`] on the Secret `found` (its record, when `complete` says its data is).
fn verdict_on(
    found: Option<&Secret>,
    complete: fn(&Secret) -> bool,
    names: &str,
    issuer: &str,
    now: Timestamp,
) -> Verdict {
    let current = found.map(|s| objects::recorded(s).filter(|_| complete(s)));
    renewal::verdict(current.as_ref().map(Option::as_ref), names, issuer, now)
}

/// `found` when the cluster controls it (or nothing was found); an object of that name the
/// cluster does not control is never taken over ([`ReferenceError::NotOwned`]).
fn ours<K: kube::Resource>(
    found: Option<K>,
    kind: &'static str,
    owner: &OwnerReference,
) -> Result<Option<K>, ReferenceError> {
    match found {
        Some(found)
            if !found
                .meta()
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == owner.uid) =>
        {
            Err(ReferenceError::NotOwned {
                kind,
                name: found.meta().name.clone().unwrap_or_default(),
            })
        }
        found => Ok(found),
    }
}

fn recorded(issued: &issue::Issued, names: String, issuer: String) -> Recorded {
    Recorded {
        not_before: issued.not_before,
        not_after: issued.not_after,
        names,
        issuer,
    }
}

/// What rolls the pods when the transport Secret changes: its not-after and issuer (a new
/// certificate), never the stores' bytes or password.
fn transport_digest(secret: &Secret) -> String {
    objects::recorded(secret)
        .map(|r| format!("{}/{}/{}", r.not_after, r.issuer, r.names))
        .unwrap_or_default()
}

/// The cluster's CA: read from its Secret, or created when neither it nor anything it signed
/// exists.
async fn ca(
    secrets: &Api<Secret>,
    name: &str,
    namespace: &str,
    owner: &OwnerReference,
    lifetimes: Lifetimes,
    issued: [&Option<Secret>; 3],
) -> Result<Ca, ReferenceError> {
    let secret_name = objects::ca_secret_name(name);
    let subject = objects::ca_subject(namespace, name);
    if let Some(found) = ours(secrets.get_opt(&secret_name).await?, "Secret", owner)? {
        return objects::ca_from_secret(&found, &subject).ok_or_else(|| {
            ReferenceError::CaUnreadable {
                namespace: namespace.to_string(),
                secret: secret_name.clone(),
            }
        });
    }
    let signed: Vec<String> = issued
        .iter()
        .filter_map(|s| s.as_ref())
        .filter(|s| objects::recorded(s).is_some())
        .filter_map(|s| s.metadata.name.clone())
        .collect();
    if !signed.is_empty() {
        return Err(ReferenceError::CaMissing {
            namespace: namespace.to_string(),
            secret: secret_name,
            signed,
        });
    }
    let ca = issue::new_ca(&subject, Timestamp::now(), lifetimes.ca)?;
    let secret = objects::ca_secret(meta(secret_name.clone(), namespace, name, owner), &ca);
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(cluster = %format!("{namespace}/{name}"), secret = %secret_name, "created the cluster's CA");
            Ok(ca)
        }
        // Created concurrently: use that one.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let found = secrets.get(&secret_name).await?;
            objects::ca_from_secret(&found, &subject).ok_or(ReferenceError::CaUnreadable {
                namespace: namespace.to_string(),
                secret: secret_name,
            })
        }
        Err(error) => Err(error.into()),
    }
}

async fn apply_secret(
    secrets: &Api<Secret>,
    name: &str,
    secret: &Secret,
) -> Result<Secret, ReferenceError> {
    let mut secret = secret.clone();
    secret.metadata.managed_fields = None;
    let applied = secrets
        .patch(
            name,
            &PatchParams::apply(common_crds::labels::CLUSTER_OPERATOR_FIELD_MANAGER).force(),
            &Patch::Apply(&serde_json::json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": secret.metadata,
                "type": secret.type_,
                "data": secret.data,
            })),
        )
        .await?;
    Ok(applied)
}

/// The ConfigMap `<cluster>-ca.crt` with the CA's certificate.
async fn publish_ca(
    client: &kube::Client,
    name: &str,
    namespace: &str,
    owner: &OwnerReference,
    ca: &Ca,
) -> Result<(), ReferenceError> {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let config_map_name = objects::ca_config_map_name(name);
    let wanted = objects::ca_config_map(meta(config_map_name.clone(), namespace, name, owner), ca);
    if let Some(found) = ours(
        config_maps.get_opt(&config_map_name).await?,
        "ConfigMap",
        owner,
    )? && found.data == wanted.data
    {
        return Ok(());
    }
    config_maps
        .patch(
            &config_map_name,
            &PatchParams::apply(common_crds::labels::CLUSTER_OPERATOR_FIELD_MANAGER).force(),
            &Patch::Apply(&serde_json::json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": wanted.metadata,
                "data": wanted.data,
            })),
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_certificate_names_the_services_and_the_pods() {
        let names = endpoint_names("demo", "team-a", "cluster.local.");
        assert_eq!(names[0], "demo.team-a.svc.cluster.local");
        for expected in [
            "demo-operator.team-a.svc.cluster.local",
            "*.demo-ping.team-a.svc.cluster.local",
            "demo.team-a.svc",
            "demo",
            "*.demo-ping.team-a.svc",
        ] {
            assert!(
                names.iter().any(|n| n == expected),
                "{expected} in {names:?}"
            );
        }
        assert_eq!(
            transport_names("demo", "team-a", "cluster.local"),
            vec!["*.demo-ping.team-a.svc.cluster.local".to_string()]
        );
    }
}
