//! The CA bundle a client trusts for https: PEM to rustls trust anchors, read the same way when
//! a client is built and when a bundle is only checked (`ClientConfig::check_ca_bundle_pem`).

use crate::error::Error;

/// The trust anchors of a PEM CA bundle: every `CERTIFICATE` block (other blocks and text
/// around them are skipped); an error when one does not parse or none is there.
pub(crate) fn ca_roots(pem: &[u8]) -> Result<rustls::RootCertStore, Error> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| Error::Config(format!("CA bundle: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| Error::Config(format!("CA bundle: {e}")))?;
    }
    if roots.is_empty() {
        return Err(Error::Config("CA bundle holds no certificate".into()));
    }
    Ok(roots)
}

/// The certificate chain and key of a [`crate::ClientIdentity`], as rustls takes them.
pub(crate) fn client_identity(
    identity: &crate::ClientIdentity,
) -> Result<
    (
        Vec<rustls_pki_types::CertificateDer<'static>>,
        rustls_pki_types::PrivateKeyDer<'static>,
    ),
    Error,
> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_slice_iter(&identity.cert_chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Config(format!("client certificate: {e}")))?;
    if chain.is_empty() {
        return Err(Error::Config(
            "client certificate: the PEM holds no certificate".into(),
        ));
    }
    // The error says what is wrong, never the key.
    let key = PrivateKeyDer::from_pem_slice(&identity.key_pem).map_err(|_| {
        Error::Config("client certificate: its key is not an unencrypted PEM private key".into())
    })?;
    Ok((chain, key))
}

/// The system's trust anchors (what a client without a CA bundle trusts), for a client that
/// also presents a certificate.
pub(crate) fn native_roots() -> Result<rustls::RootCertStore, Error> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(Error::Config(format!(
            "system CA roots: none could be read ({} errors)",
            found.errors.len()
        )));
    }
    Ok(roots)
}
