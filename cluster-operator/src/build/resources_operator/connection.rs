//! How a resources operator reaches one cluster's server, whichever pod runs it: the URL, the
//! credentials Secret (none when the client certificate is the identity), the certificate
//! Secret whose CA it trusts, the client certificate it presents and the name the server's
//! certificate is checked against. A per-cluster pod gets these as flags and mounted Secrets
//! ([`super::deployment`]), a member of the shared operator as its ConfigMap entry
//! ([`super::shared`]).

use common_crds::Infinispan;

use super::{BuildError, ClientCertificate, Settings, client_service_host, infinispan_url};
use crate::build::security;

/// The connection of `cluster`'s resources operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Connection<'a> {
    pub url: String,
    /// `None`: `clientCert: Authenticate`, the certificate is the identity.
    pub credentials_secret: Option<&'a str>,
    /// With endpoint TLS and a CA in the certificate Secret: that Secret (key `ca.crt`).
    pub ca_secret: Option<String>,
    /// With endpoint TLS and `clientCert` set: the certificate to present.
    pub client_certificate: Option<&'a ClientCertificate>,
    /// With endpoint TLS: the client Service's host name.
    pub tls_server_name: Option<String>,
}

impl<'a> Connection<'a> {
    pub fn of(cluster: &Infinispan, settings: &'a Settings) -> Result<Self, BuildError> {
        let url = infinispan_url(cluster, &settings.cluster_domain)?;
        let https = url.starts_with("https://");
        let ca_secret =
            security::endpoint_certificate_secret(cluster).filter(|_| settings.server_ca && https);
        let client_certificate = settings.client_certificate.as_ref().filter(|_| https);
        let certificate_is_identity =
            client_certificate.is_some() && security::certificate_authentication(cluster);
        let credentials_secret =
            (!certificate_is_identity).then_some(settings.credentials_secret.as_str());
        let tls_server_name = if https {
            Some(client_service_host(cluster, &settings.cluster_domain)?)
        } else {
            None
        };
        Ok(Self {
            url,
            credentials_secret,
            ca_secret,
            client_certificate,
            tls_server_name,
        })
    }
}
