//! The cluster's own certificate authority and the certificates the cluster operator issues
//! from it (`docs/security.md`, "Encryption"): no cert-manager needed.
//!
//! - [`issue`]: a new CA, a certificate signed by it (endpoint or transport), the transport's
//!   PKCS#12 stores;
//! - [`renewal`]: whether a certificate Secret is still good, or why a new one is issued (pure);
//! - [`objects`]: the Secrets and the published CA ConfigMap, their names and annotations;
//! - [`client_trust`]: the CAs a cluster that asks clients for a certificate trusts (the
//!   user's truststore Secret and the cluster's CA, which signs the operators' certificate).
//!
//! Per cluster `<c>`: the Secret `<c>-ca` (the CA's key: only the cluster operator reads it),
//! the Secret `<c>-endpoint-tls` (`kubernetes.io/tls`, with `ca.crt`), the Secret
//! `<c>-transport-tls` (PKCS#12 key and trust stores, their password), the Secret
//! `<c>-client-tls` (`kubernetes.io/tls`: the certificate the operators present when the
//! cluster asks clients for one), the ConfigMap `<c>-ca.crt` (the CA clients trust). All owned
//! by the CR.

pub mod client_trust;
pub mod issue;
pub mod objects;
pub mod renewal;

use k8s_openapi::jiff::SignedDuration;

/// What a certificate is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// The server endpoint (REST, Hot Rod): TLS server.
    Endpoint,
    /// The cluster transport (JGroups): TLS server and client (mutual TLS).
    Transport,
    /// The operators as clients of an endpoint that asks for a certificate: TLS client only,
    /// no DNS names (the first name given is the common name).
    Client,
}

/// How long what the operator issues is valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    /// The CA (default 10 years).
    pub ca: SignedDuration,
    /// The endpoint and transport certificates (default 1 year), renewed after two thirds.
    pub certificate: SignedDuration,
}

/// 10 years.
pub const DEFAULT_CA_LIFETIME: SignedDuration = SignedDuration::from_hours(24 * 3652);
/// 365 days.
pub const DEFAULT_CERTIFICATE_LIFETIME: SignedDuration = SignedDuration::from_hours(24 * 365);

impl Default for Lifetimes {
    fn default() -> Self {
        Self {
            ca: DEFAULT_CA_LIFETIME,
            certificate: DEFAULT_CERTIFICATE_LIFETIME,
        }
    }
}

/// Issuing failed (never a problem of the CR: retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    #[error("generating a key or certificate failed: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("the time {0} is outside what a certificate can hold")]
    Time(String),
    #[error("the operating system's random source failed: {0}")]
    Random(String),
    #[error("{0} is not valid PEM")]
    Pem(&'static str),
    #[error("writing a PKCS#12 store failed: {0}")]
    Store(String),
}

#[cfg(test)]
mod tests;
