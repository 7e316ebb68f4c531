//! The objects holding what the operator issues: their names, their data keys, the annotations
//! that record each certificate ([`Recorded`]), built from and read back into the issued
//! material.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use sha2::{Digest, Sha256};

use super::issue::{Ca, Issued};
use super::renewal::Recorded;

/// Key of a CA certificate (PEM), as in `kubernetes.io/tls` Secrets and `kube-root-ca.crt`.
pub const CA_CERT_KEY: &str = "ca.crt";
/// Key of the CA's private key in the CA Secret.
pub const CA_KEY_KEY: &str = "ca.key";
/// Keys of a `kubernetes.io/tls` Secret.
pub const TLS_CERT_KEY: &str = "tls.crt";
pub const TLS_KEY_KEY: &str = "tls.key";
/// The transport's PKCS#12 key store (alias `transport`).
pub const KEYSTORE_KEY: &str = "keystore.p12";
/// The transport's PKCS#12 trust store (alias `ca`).
pub const TRUSTSTORE_KEY: &str = "truststore.p12";
/// The password of both transport stores.
pub const STORE_PASSWORD_KEY: &str = "password";

/// Annotations recording a certificate (RFC 3339 times, hex digests).
pub const NOT_BEFORE_ANNOTATION: &str = "infinispan.org/not-before";
pub const NOT_AFTER_ANNOTATION: &str = "infinispan.org/not-after";
pub const NAMES_ANNOTATION: &str = "infinispan.org/certificate-names";
pub const ISSUER_ANNOTATION: &str = "infinispan.org/issuer";

/// The CA Secret of `cluster` (its private key: read by the cluster operator only).
pub fn ca_secret_name(cluster: &str) -> String {
    format!("{cluster}-ca")
}

/// The endpoint certificate Secret of `cluster` (`kubernetes.io/tls` with `ca.crt`).
pub fn endpoint_secret_name(cluster: &str) -> String {
    format!("{cluster}-endpoint-tls")
}

/// The transport stores Secret of `cluster`.
pub fn transport_secret_name(cluster: &str) -> String {
    format!("{cluster}-transport-tls")
}

/// The Secret of the certificate the operators present to `cluster`'s endpoint when it asks
/// clients for one (`kubernetes.io/tls` with `ca.crt`).
pub fn client_secret_name(cluster: &str) -> String {
    format!("{cluster}-client-tls")
}

/// The common name of the operators' client certificate for `cluster`. With
/// `clientCert: Authenticate` it is also the name of the server role it maps to (`ALL`).
pub fn client_common_name(namespace: &str, cluster: &str) -> String {
    format!("infinispan-operator {namespace}/{cluster}")
}

/// With `clientCert: Authenticate`: the Secret of the operators' next certificate, which the
/// server lists before they present it.
pub fn client_next_secret_name(cluster: &str) -> String {
    format!("{cluster}-client-tls-next")
}

/// With `clientCert: Authenticate`: the Secret of the certificate the ServiceMonitor's scraper
/// presents (`kubernetes.io/tls` with `ca.crt`).
pub fn metrics_client_secret_name(cluster: &str) -> String {
    format!("{cluster}-metrics-client-tls")
}

/// The Secret of the scraper's next certificate ([`client_next_secret_name`]'s counterpart).
pub fn metrics_client_next_secret_name(cluster: &str) -> String {
    format!("{cluster}-metrics-client-tls-next")
}

/// The common name of the scraper's certificate, and the name of its server role (`MONITOR`).
pub fn metrics_common_name(namespace: &str, cluster: &str) -> String {
    format!("infinispan-metrics {namespace}/{cluster}")
}

/// The ConfigMap publishing `cluster`'s CA to clients (named like `kube-root-ca.crt`).
pub fn ca_config_map_name(cluster: &str) -> String {
    format!("{cluster}-ca.crt")
}

/// The subject of `cluster`'s CA.
pub fn ca_subject(namespace: &str, cluster: &str) -> String {
    format!("Infinispan {namespace}/{cluster} CA")
}

/// SHA-256 (hex) of the names a certificate holds, in order.
pub fn names_digest(names: &[String]) -> String {
    let mut hasher = Sha256::new();
    for name in names {
        hasher.update((name.len() as u64).to_be_bytes());
        hasher.update(name.as_bytes());
    }
    format!("{:x}", hasher.finalize())
}

fn bytes(text: &str) -> ByteString {
    ByteString(text.as_bytes().to_vec())
}

fn text<'a>(secret: &'a Secret, key: &str) -> Option<&'a str> {
    secret
        .data
        .as_ref()?
        .get(key)
        .and_then(|value| std::str::from_utf8(&value.0).ok())
}

fn with_annotations(mut meta: ObjectMeta, annotations: BTreeMap<String, String>) -> ObjectMeta {
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .extend(annotations);
    meta
}

fn recorded_annotations(recorded: &Recorded) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            NOT_BEFORE_ANNOTATION.to_string(),
            recorded.not_before.to_string(),
        ),
        (
            NOT_AFTER_ANNOTATION.to_string(),
            recorded.not_after.to_string(),
        ),
        (NAMES_ANNOTATION.to_string(), recorded.names.clone()),
        (ISSUER_ANNOTATION.to_string(), recorded.issuer.clone()),
    ])
}

/// What `secret`'s annotations record (`None` when one is missing or unreadable).
pub fn recorded(secret: &Secret) -> Option<Recorded> {
    let annotations = secret.metadata.annotations.as_ref()?;
    let time = |key: &str| annotations.get(key)?.parse::<Timestamp>().ok();
    Some(Recorded {
        not_before: time(NOT_BEFORE_ANNOTATION)?,
        not_after: time(NOT_AFTER_ANNOTATION)?,
        names: annotations.get(NAMES_ANNOTATION)?.clone(),
        issuer: annotations.get(ISSUER_ANNOTATION)?.clone(),
    })
}

/// The CA Secret (`meta` named [`ca_secret_name`]).
pub fn ca_secret(meta: ObjectMeta, ca: &Ca) -> Secret {
    Secret {
        metadata: meta,
        type_: Some("Opaque".to_string()),
        data: Some(BTreeMap::from([
            (CA_CERT_KEY.to_string(), bytes(&ca.cert_pem)),
            (CA_KEY_KEY.to_string(), bytes(&ca.key_pem)),
        ])),
        ..Secret::default()
    }
}

/// The CA read back from its Secret (`None` when a key is missing).
pub fn ca_from_secret(secret: &Secret, subject: &str) -> Option<Ca> {
    Some(Ca {
        subject: subject.to_string(),
        cert_pem: text(secret, CA_CERT_KEY)?.to_string(),
        key_pem: text(secret, CA_KEY_KEY)?.to_string(),
    })
}

/// The endpoint or client certificate Secret: `tls.crt` (the certificate, then the CA),
/// `tls.key`, `ca.crt`.
pub fn tls_secret(meta: ObjectMeta, ca: &Ca, issued: &Issued, recorded: &Recorded) -> Secret {
    Secret {
        metadata: with_annotations(meta, recorded_annotations(recorded)),
        type_: Some("kubernetes.io/tls".to_string()),
        data: Some(BTreeMap::from([
            (
                TLS_CERT_KEY.to_string(),
                bytes(&format!("{}{}", issued.cert_pem, ca.cert_pem)),
            ),
            (TLS_KEY_KEY.to_string(), bytes(&issued.key_pem)),
            (CA_CERT_KEY.to_string(), bytes(&ca.cert_pem)),
        ])),
        ..Secret::default()
    }
}

/// `listed`'s certificate in the Secret of `meta`: its data and what it records, so that
/// the certificate a server lists can be presented from the Secret consumers mount.
pub fn tls_secret_renamed(listed: &Secret, meta: ObjectMeta) -> Secret {
    let annotations = recorded(listed)
        .map(|r| recorded_annotations(&r))
        .unwrap_or_default();
    Secret {
        metadata: with_annotations(meta, annotations),
        type_: Some("kubernetes.io/tls".to_string()),
        data: listed.data.clone(),
        ..Secret::default()
    }
}

/// `tls.crt` of a Secret of the operator (the certificate, then its CA).
pub fn certificate_pem(secret: &Secret) -> Option<String> {
    text(secret, TLS_CERT_KEY).map(str::to_string)
}

/// The transport stores Secret.
pub fn transport_secret(
    meta: ObjectMeta,
    keystore: Vec<u8>,
    truststore: Vec<u8>,
    password: &str,
    recorded: &Recorded,
) -> Secret {
    Secret {
        metadata: with_annotations(meta, recorded_annotations(recorded)),
        type_: Some("Opaque".to_string()),
        data: Some(BTreeMap::from([
            (KEYSTORE_KEY.to_string(), ByteString(keystore)),
            (TRUSTSTORE_KEY.to_string(), ByteString(truststore)),
            (STORE_PASSWORD_KEY.to_string(), bytes(password)),
        ])),
        ..Secret::default()
    }
}

/// The transport Secret is complete (both stores and the password).
pub fn transport_secret_complete(secret: &Secret) -> bool {
    let data = secret.data.as_ref();
    [KEYSTORE_KEY, TRUSTSTORE_KEY, STORE_PASSWORD_KEY]
        .iter()
        .all(|key| data.is_some_and(|d| d.get(*key).is_some_and(|v| !v.0.is_empty())))
}

/// A `kubernetes.io/tls` Secret of the operator (endpoint or client) is complete.
pub fn tls_secret_complete(secret: &Secret) -> bool {
    [TLS_CERT_KEY, TLS_KEY_KEY, CA_CERT_KEY]
        .iter()
        .all(|key| text(secret, key).is_some_and(|v| !v.is_empty()))
}

/// The ConfigMap publishing the CA (`ca.crt`).
pub fn ca_config_map(meta: ObjectMeta, ca: &Ca) -> ConfigMap {
    ConfigMap {
        metadata: meta,
        data: Some(BTreeMap::from([(
            CA_CERT_KEY.to_string(),
            ca.cert_pem.clone(),
        )])),
        ..ConfigMap::default()
    }
}
