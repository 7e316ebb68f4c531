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
