//! Issuing: the cluster's CA (self-signed, ECDSA P-256) and the certificates signed by it, and
//! the PKCS#12 key and trust stores of the transport (JGroups reads no PEM). Randomness (keys,
//! serial numbers, store salts) but no I/O.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use p12_keystore::{Certificate as StoreCertificate, KeyStore, KeyStoreEntry, PrivateKeyChain};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SerialNumber,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};

use super::{CertificateError, Purpose};

/// The CA of one cluster: its certificate and private key, PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct Ca {
    pub subject: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca")
            .field("subject", &self.subject)
            .field("key_pem", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// A certificate issued by a cluster's CA, with its private key (PEM) and validity.
#[derive(Clone, PartialEq, Eq)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    pub not_before: Timestamp,
    pub not_after: Timestamp,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .field("key_pem", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// Certificates start this long before they are issued: clocks of the nodes may be behind.
pub(crate) const BACKDATE: SignedDuration = SignedDuration::from_mins(5);

fn rcgen_time(at: Timestamp) -> Result<time::OffsetDateTime, CertificateError> {
    time::OffsetDateTime::from_unix_timestamp(at.as_second())
        .map_err(|_| CertificateError::Time(at.to_string()))
}

fn random_serial() -> Result<SerialNumber, CertificateError> {
    let mut serial = [0u8; 16];
    getrandom::fill(&mut serial).map_err(|error| CertificateError::Random(error.to_string()))?;
    // Positive and without a leading zero byte (RFC 5280: at most 20 octets, positive).
    serial[0] = (serial[0] & 0x7f) | 0x40;
    Ok(SerialNumber::from_slice(&serial))
}

fn ca_params(subject: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, "Infinispan operator");
    name.push(DnType::CommonName, subject);
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// A new CA named `subject`, valid for `lifetime` from `now`.
pub fn new_ca(
    subject: &str,
    now: Timestamp,
    lifetime: SignedDuration,
) -> Result<Ca, CertificateError> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = ca_params(subject);
    params.not_before = rcgen_time(now - BACKDATE)?;
    params.not_after = rcgen_time(now + lifetime)?;
    params.serial_number = Some(random_serial()?);
    let cert = params.self_signed(&key)?;
    Ok(Ca {
        subject: subject.to_string(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A certificate for `purpose` with the DNS names `names` (the first is the common name),
/// signed by `ca`, valid for `lifetime` from `now`.
pub fn issue(
    ca: &Ca,
    purpose: Purpose,
    names: &[String],
    now: Timestamp,
    lifetime: SignedDuration,
) -> Result<Issued, CertificateError> {
    let ca_key = KeyPair::from_pem(&ca.key_pem)?;
    let issuer = Issuer::new(ca_params(&ca.subject), ca_key);
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    // A client certificate names no host: its first name is only its common name.
    let sans = match purpose {
        Purpose::Client => Vec::new(),
        Purpose::Endpoint | Purpose::Transport => names.to_vec(),
    };
    let mut params = CertificateParams::new(sans)?;
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, "Infinispan operator");
    if purpose == Purpose::Client {
        // A subject of its own: a server's truststore realm finds a client's certificate by
        // its subject, so of two listed certificates with one subject only one is accepted
        // (measured on 16.0.7). The common name, which roles are mapped from, stays.
        let mut unique = [0u8; 8];
        getrandom::fill(&mut unique)
            .map_err(|error| CertificateError::Random(error.to_string()))?;
        let unique: String = unique.iter().map(|b| format!("{b:02x}")).collect();
        name.push(DnType::OrganizationalUnitName, format!("issue {unique}"));
    }
    name.push(
        DnType::CommonName,
        names.first().map(String::as_str).unwrap_or("infinispan"),
    );
    params.distinguished_name = name;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = match purpose {
        Purpose::Endpoint => vec![ExtendedKeyUsagePurpose::ServerAuth],
        // Every member is a TLS server and a TLS client of the others.
        Purpose::Transport => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        Purpose::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
    };
    params.use_authority_key_identifier_extension = true;
    let not_before = now - BACKDATE;
    let not_after = now + lifetime;
    params.not_before = rcgen_time(not_before)?;
    params.not_after = rcgen_time(not_after)?;
    params.serial_number = Some(random_serial()?);
    let cert = params.signed_by(&key, &issuer)?;
    Ok(Issued {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        not_before,
        not_after,
    })
}

/// SHA-256 (hex) of the CA's certificate: what issued certificates record as their issuer.
pub fn fingerprint(cert_pem: &str) -> String {
    format!("{:x}", Sha256::digest(cert_pem.trim().as_bytes()))
}

fn cert_der(pem_text: &str, what: &'static str) -> Result<Vec<u8>, CertificateError> {
    CertificateDer::from_pem_slice(pem_text.as_bytes())
        .map(|der| der.to_vec())
        .map_err(|_| CertificateError::Pem(what))
}

fn key_der(pem_text: &str, what: &'static str) -> Result<Vec<u8>, CertificateError> {
    PrivatePkcs8KeyDer::from_pem_slice(pem_text.as_bytes())
        .map(|der| der.secret_pkcs8_der().to_vec())
        .map_err(|_| CertificateError::Pem(what))
}

/// The transport's PKCS#12 stores, both protected by `password`: the key store (alias
/// `transport`: the key and the certificate chain up to the CA) and the trust store (alias
/// `ca`: the CA as a trusted certificate entry).
pub fn transport_stores(
    ca: &Ca,
    issued: &Issued,
    password: &str,
) -> Result<(Vec<u8>, Vec<u8>), CertificateError> {
    let ca_der = cert_der(&ca.cert_pem, "the CA certificate")?;
    let cert_der = cert_der(&issued.cert_pem, "the transport certificate")?;
    let key_der = key_der(&issued.key_pem, "the transport key")?;
    let store_error =
        |error: p12_keystore::error::Error| CertificateError::Store(error.to_string());
    let ca_cert = StoreCertificate::from_der(&ca_der).map_err(store_error)?;
    let cert = StoreCertificate::from_der(&cert_der).map_err(store_error)?;
    let key = p12_keystore::PrivateKey::from_der(&key_der).map_err(store_error)?;
    let local_key_id = Sha256::digest(&cert_der).to_vec();
    let mut keys = KeyStore::new();
    keys.add_entry(
        "transport",
        KeyStoreEntry::PrivateKeyChain(PrivateKeyChain::new(
            local_key_id,
            key,
            [cert, ca_cert.clone()],
        )),
    );
    let mut trust = KeyStore::new();
    trust.add_entry("ca", KeyStoreEntry::Certificate(ca_cert));
    Ok((
        keys.writer(password).write().map_err(store_error)?,
        trust.writer(password).write().map_err(store_error)?,
    ))
}
