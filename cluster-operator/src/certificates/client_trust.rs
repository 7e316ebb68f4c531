//! The CAs a cluster trusts for client certificates (`clientCert: Validate`): every certificate
//! of the user's truststore Secret (`clientCertSecretName`), then the cluster's own CA, which
//! signs the certificate the operators present. With `clientCert: Authenticate` the server
//! accepts only the certificates the file holds themselves (measured on 16.0.7: a certificate
//! merely signed by a CA of the file is refused), so the operators' certificates are listed
//! too ([`ClientTrust::listing`]). Written as one PEM file (the server reads a PEM
//! truststore, measured on 16.0.7) into the server ConfigMap: CA certificates are public, and
//! a change of them changes the config hash, so the pods roll onto it.
//!
//! The Secret takes infinispan-operator's keys: `trust.ca` (PEM, one certificate or more) and
//! any `trust.cert.<name>` (PEM), or `truststore.p12` with its `truststore-password` (every
//! certificate in the store is trusted, whatever its alias). Pure: no I/O.

use std::fmt::Write as _;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use p12_keystore::{KeyStore, KeyStoreEntry, Pkcs12ImportPolicy};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use sha2::{Digest, Sha256};

use crate::build::server::BuildError;

/// The PEM CA key of infinispan-operator's truststore Secret.
pub const TRUST_CA_KEY: &str = "trust.ca";
/// The prefix of its PEM client-certificate keys (`trust.cert.<name>`).
pub const TRUST_CERT_PREFIX: &str = "trust.cert.";
/// Its PKCS#12 truststore and that store's password.
pub const TRUSTSTORE_P12_KEY: &str = "truststore.p12";
pub const TRUSTSTORE_PASSWORD_KEY: &str = "truststore-password";

/// At most this many certificates are taken from a truststore Secret (a Secret holds at most
/// 1 MiB; a CA certificate is about 1 KiB).
pub const MAX_CERTIFICATES: usize = 200;

/// The trusted CAs, checked: one PEM file and its digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientTrust {
    /// The certificates (DER), in the file's order.
    certificates: Vec<Vec<u8>>,
    pem: String,
    digest: String,
}

impl ClientTrust {
    /// The certificates of the user's truststore Secret `secret`, then `cluster_ca_pem`.
    /// Errors name the Secret and the key, never a password.
    pub fn from_secret(secret: &Secret, cluster_ca_pem: &str) -> Result<Self, BuildError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let invalid = |problem: String| BuildError::InvalidTlsSecret {
            secret: name.clone(),
            problem,
        };
        let data = secret.data.clone().unwrap_or_default();
        let mut certificates: Vec<Vec<u8>> = Vec::new();
        if let Some(store) = data.get(TRUSTSTORE_P12_KEY) {
            let password = match data.get(TRUSTSTORE_PASSWORD_KEY) {
                Some(password) => std::str::from_utf8(&password.0)
                    .map_err(|_| invalid(format!("{TRUSTSTORE_PASSWORD_KEY} is not UTF-8")))?
                    .trim_end_matches(['\n', '\r'])
                    .to_string(),
                None => {
                    return Err(invalid(format!(
                        "{TRUSTSTORE_P12_KEY} needs its password in {TRUSTSTORE_PASSWORD_KEY}"
                    )));
                }
            };
            let store = KeyStore::from_pkcs12(&store.0, &password, Pkcs12ImportPolicy::Raw)
                .map_err(|_| {
                    invalid(format!(
                        "{TRUSTSTORE_P12_KEY} cannot be read as a PKCS#12 store with the password of {TRUSTSTORE_PASSWORD_KEY}"
                    ))
                })?;
            for (_, entry) in store.entries() {
                match entry {
                    KeyStoreEntry::Certificate(certificate) => {
                        certificates.push(certificate.as_der().to_vec());
                    }
                    KeyStoreEntry::PrivateKeyChain(chain) => {
                        certificates.extend(chain.certs().iter().map(|c| c.as_der().to_vec()));
                    }
                    KeyStoreEntry::Secret(_) => {}
                }
            }
            if certificates.is_empty() {
                return Err(invalid(format!(
                    "{TRUSTSTORE_P12_KEY} holds no certificate"
                )));
            }
        }
        let pem_keys = data
            .keys()
            .filter(|key| *key == TRUST_CA_KEY || key.starts_with(TRUST_CERT_PREFIX));
        for key in pem_keys {
            let text = std::str::from_utf8(&data[key].0)
                .map_err(|_| invalid(format!("{key} is not PEM text")))?;
            let mut found = 0;
            for certificate in CertificateDer::pem_slice_iter(text.as_bytes()) {
                let certificate =
                    certificate.map_err(|_| invalid(format!("{key} holds invalid PEM")))?;
                certificates.push(certificate.to_vec());
                found += 1;
            }
            if found == 0 {
                return Err(invalid(format!("{key} holds no PEM certificate")));
            }
        }
        if certificates.is_empty() {
            return Err(invalid(format!(
                "it holds no CA for client certificates: give {TRUST_CA_KEY} (PEM), {TRUST_CERT_PREFIX}<name> (PEM) or {TRUSTSTORE_P12_KEY} with {TRUSTSTORE_PASSWORD_KEY}"
            )));
        }
        if certificates.len() > MAX_CERTIFICATES {
            return Err(invalid(format!(
                "it holds {} certificates, more than {MAX_CERTIFICATES}",
                certificates.len()
            )));
        }
        let cluster_ca = CertificateDer::from_pem_slice(cluster_ca_pem.as_bytes())
            .map_err(|_| invalid("the cluster's CA is not valid PEM".to_string()))?;
        if !certificates.iter().any(|c| c[..] == cluster_ca[..]) {
            certificates.push(cluster_ca.to_vec());
        }
        Ok(Self::of(certificates))
    }

    /// With `clientCert: Authenticate`: the first certificate of each PEM of `certificates`
    /// (the operators' issued certificates, `tls.crt`: the certificate, then the CA) listed
    /// too, after the others, so that the server accepts them themselves.
    pub fn listing(self, certificates: &[String]) -> Result<Self, BuildError> {
        let mut ders = self.certificates;
        for pem in certificates {
            let first = CertificateDer::pem_slice_iter(pem.as_bytes())
                .next()
                .and_then(Result::ok)
                .ok_or_else(|| BuildError::InvalidTlsSecret {
                    secret: "the operators' client certificate".to_string(),
                    problem: "tls.crt holds no PEM certificate".to_string(),
                })?;
            if !ders.iter().any(|d| d[..] == first[..]) {
                ders.push(first.to_vec());
            }
        }
        Ok(Self::of(ders))
    }

    fn of(certificates: Vec<Vec<u8>>) -> Self {
        let mut pem = String::new();
        for der in &certificates {
            pem.push_str(&pem_certificate(der));
        }
        Self {
            digest: format!("{:x}", Sha256::digest(pem.as_bytes())),
            certificates,
            pem,
        }
    }

    /// The PEM file: every trusted certificate, the cluster's CA, then the listed ones.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// SHA-256 (hex) of [`Self::pem`].
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// How many certificates are trusted, the cluster's CA included.
    pub fn count(&self) -> usize {
        self.certificates.len()
    }
}

/// `der` as a PEM `CERTIFICATE` block, 64 characters a line.
fn pem_certificate(der: &[u8]) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in encoded.as_bytes().chunks(64) {
        // Base64 is ASCII.
        let _ = writeln!(pem, "{}", String::from_utf8_lossy(line));
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    use kube::api::ObjectMeta;

    use super::*;
    use crate::certificates::issue::new_ca;

    fn ca(subject: &str) -> String {
        new_ca(subject, Timestamp::now(), SignedDuration::from_hours(24))
            .expect("a CA")
            .cert_pem
    }

    fn secret(data: &[(&str, &[u8])]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some("client-cas".to_string()),
                ..ObjectMeta::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Secret::default()
        }
    }

    fn ders(pem: &str) -> Vec<Vec<u8>> {
        CertificateDer::pem_slice_iter(pem.as_bytes())
            .map(|c| c.expect("PEM").to_vec())
            .collect()
    }

    #[test]
    fn pem_keys_and_the_cluster_ca_make_one_pem_file_that_reads_back_the_same() {
        let user = ca("user CA");
        let other = ca("partner CA");
        let cluster = ca("cluster CA");
        let trust = ClientTrust::from_secret(
            &secret(&[
                (TRUST_CA_KEY, user.as_bytes()),
                ("trust.cert.partner", other.as_bytes()),
                ("unrelated", b"not read"),
            ]),
            &cluster,
        )
        .expect("trusted");
        assert_eq!(trust.count(), 3);
        let expected: Vec<Vec<u8>> = [&user, &other, &cluster]
            .iter()
            .flat_map(|pem| ders(pem))
            .collect();
        assert_eq!(ders(trust.pem()), expected);
        // The same input gives the same file; another CA another digest.
        let again = ClientTrust::from_secret(&secret(&[(TRUST_CA_KEY, user.as_bytes())]), &cluster)
            .expect("trusted");
        assert_ne!(again.digest(), trust.digest());
        assert_eq!(
            again,
            ClientTrust::from_secret(&secret(&[(TRUST_CA_KEY, user.as_bytes())]), &cluster)
                .expect("trusted")
        );
    }

    #[test]
    fn a_pkcs12_truststore_is_read_with_its_password() {
        let user = ca("user CA");
        let cluster = ca("cluster CA");
        let mut store = KeyStore::new();
        let der = ders(&user).remove(0);
        store.add_entry(
            "user-ca",
            KeyStoreEntry::Certificate(p12_keystore::Certificate::from_der(&der).expect("der")),
        );
        let p12 = store.writer("changeit").write().expect("p12");
        let trust = ClientTrust::from_secret(
            &secret(&[
                (TRUSTSTORE_P12_KEY, &p12),
                (TRUSTSTORE_PASSWORD_KEY, b"changeit\n"),
            ]),
            &cluster,
        )
        .expect("trusted");
        assert_eq!(ders(trust.pem()), vec![der, ders(&cluster).remove(0)]);

        let wrong = ClientTrust::from_secret(
            &secret(&[
                (TRUSTSTORE_P12_KEY, &p12),
                (TRUSTSTORE_PASSWORD_KEY, b"guess"),
            ]),
            &cluster,
        )
        .expect_err("wrong password")
        .to_string();
        assert!(wrong.contains("truststore-password"), "{wrong}");
        assert!(!wrong.contains("guess"), "{wrong}");
        let no_password =
            ClientTrust::from_secret(&secret(&[(TRUSTSTORE_P12_KEY, &p12)]), &cluster)
                .expect_err("no password")
                .to_string();
        assert!(no_password.contains("needs its password"), "{no_password}");
    }

    #[test]
    fn a_secret_without_a_usable_ca_is_refused_with_what_to_give() {
        let cluster = ca("cluster CA");
        for (data, expected) in [
            (vec![("tls.crt", b"x".as_slice())], "holds no CA"),
            (vec![(TRUST_CA_KEY, b"no pem here".as_slice())], "no PEM"),
            (
                vec![(
                    TRUST_CA_KEY,
                    b"-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n".as_slice(),
                )],
                "invalid PEM",
            ),
        ] {
            let error = ClientTrust::from_secret(&secret(&data), &cluster)
                .expect_err("refused")
                .to_string();
            assert!(error.contains("client-cas"), "{error}");
            assert!(error.contains(expected), "{error}");
        }
    }

    #[test]
    fn the_cluster_ca_is_not_listed_twice() {
        let cluster = ca("cluster CA");
        let trust =
            ClientTrust::from_secret(&secret(&[(TRUST_CA_KEY, cluster.as_bytes())]), &cluster)
                .expect("trusted");
        assert_eq!(trust.count(), 1);
    }
}
