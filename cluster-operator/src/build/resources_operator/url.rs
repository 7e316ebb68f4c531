//! How the resources operator reaches the server: the operators' Service (client-IP session
//! affinity, so DIGEST nonces stay with the pod that issued them), `https` with endpoint TLS,
//! the certificate checked against the client Service's host name.

use common_crds::Infinispan;

use super::{BuildError, name_and_namespace};
use crate::build::identity;
use crate::build::server::{SERVER_PORT, client_service_name, operator_service_name};

/// The server URL the resources operator is given (`docs/cluster-objects.md`): the
/// operators' Service ([`operator_service_url`]), `https` when the endpoint is encrypted
/// (`spec.security.endpointEncryption.type: Secret`; the certificate is then verified against
/// [`client_service_host`], `--tls-server-name`).
pub fn infinispan_url(cluster: &Infinispan, cluster_domain: &str) -> Result<String, BuildError> {
    operator_service_url(cluster, cluster_domain)
}

/// The URL of the cluster's operators' Service (client-IP session affinity):
/// `http(s)://<cluster>-operator.<namespace>.svc.<cluster_domain>:11222`.
pub fn operator_service_url(
    cluster: &Infinispan,
    cluster_domain: &str,
) -> Result<String, BuildError> {
    let host = service_host(cluster, cluster_domain, operator_service_name)?;
    Ok(format!(
        "{}://{host}:{SERVER_PORT}",
        endpoint_scheme(cluster)
    ))
}

/// `<cluster>.<namespace>.svc.<cluster_domain>`, the client Service's host name: the name a
/// server certificate is issued for.
pub fn client_service_host(
    cluster: &Infinispan,
    cluster_domain: &str,
) -> Result<String, BuildError> {
    service_host(cluster, cluster_domain, client_service_name)
}

/// `<service>.<namespace>.svc.<cluster_domain>` of the cluster's Service named by `service`.
fn service_host(
    cluster: &Infinispan,
    cluster_domain: &str,
    service: fn(&str) -> String,
) -> Result<String, BuildError> {
    let (name, namespace) = name_and_namespace(cluster)?;
    identity::service_host(&service(name), namespace, cluster_domain).ok_or_else(|| {
        BuildError::InvalidClusterDomain {
            domain: cluster_domain.to_string(),
        }
    })
}

/// The scheme of the cluster's endpoint: `https` when it is encrypted
/// (`spec.security.endpointEncryption.type` `Secret` or `Generated`, of a resolved CR: the
/// server then speaks only TLS on its one port), `http` otherwise. The one place of that rule (the cluster operator's own server
/// access uses it too, `crate::servers`).
pub fn endpoint_scheme(cluster: &Infinispan) -> &'static str {
    if crate::build::security::endpoint_tls(cluster) {
        "https"
    } else {
        "http"
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::cluster;
    use super::*;
    use common_crds::infinispan::EncryptionType;

    #[test]
    fn the_url_follows_the_endpoint_encryption() {
        let mut cr = cluster("demo", "ns");
        let url = |cr: &Infinispan, domain: &str| infinispan_url(cr, domain).ok();
        // Plain: the operators' Service (client-IP session affinity).
        assert_eq!(
            url(&cr, "cluster.local").as_deref(),
            Some("http://demo-operator.ns.svc.cluster.local:11222")
        );
        // TLS: the same Service; the certificate is verified against the client Service's
        // name (--tls-server-name, see the Deployment's test).
        cr.spec.security.endpoint_encryption.type_ = Some(EncryptionType::Secret);
        assert_eq!(
            url(&cr, "cluster.local.").as_deref(),
            Some("https://demo-operator.ns.svc.cluster.local:11222")
        );
        assert_eq!(
            operator_service_url(&cr, "cluster.local.").ok().as_deref(),
            Some("https://demo-operator.ns.svc.cluster.local:11222")
        );
        assert_eq!(
            client_service_host(&cr, "cluster.local.").ok().as_deref(),
            Some("demo.ns.svc.cluster.local")
        );
        for encryption in [
            EncryptionType::None,
            EncryptionType::Secret,
            EncryptionType::Generated,
        ] {
            cr.spec.security.endpoint_encryption.type_ = Some(encryption);
            for bad in ["", ".", "Cluster.Local", "a..b", "-x"] {
                for result in [
                    infinispan_url(&cr, bad),
                    operator_service_url(&cr, bad),
                    client_service_host(&cr, bad),
                ] {
                    assert!(
                        matches!(result, Err(BuildError::InvalidClusterDomain { .. })),
                        "{bad:?}"
                    );
                }
            }
        }
    }
}
