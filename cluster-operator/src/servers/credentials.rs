//! As whom and trusting whom the operator reaches a server: the operators' credentials from
//! the Secret the cluster's status names, the CA of the endpoint certificate Secret and the
//! operator-wide bundle joined into one trust bundle. Pure functions of the objects read.

use common_crds::Infinispan;
use infinispan_rest::{ClientIdentity, Credentials};
use k8s_openapi::api::core::v1::Secret;

use super::{ServerAccessError, name_and_namespace};
use crate::build::server::{PASSWORD_KEY, USERNAME_KEY};

/// Key of the CA certificate in a TLS Secret (cert-manager's name for it).
pub const CA_KEY: &str = "ca.crt";

/// The name of the Secret with the operators' credentials of `cluster`: the one its status
/// names, once the cluster operator wrote it there. `None` when the cluster needs none
/// (authentication off and none named); [`ServerAccessError::CredentialsNotReady`] when it
/// needs one the status does not name yet.
///
/// The status is a readiness signal only, never trusted for the name: whoever may write
/// `infinispans/status` could otherwise point Backups and Restores at another Secret of the
/// namespace. The only name accepted is the one the cluster operator gives,
/// `<cluster>-operator-credentials` ([`ServerAccessError::CredentialsSecretNotTheOperators`]).
pub fn credentials_secret_name(cluster: &Infinispan) -> Result<Option<&str>, ServerAccessError> {
    let named = cluster
        .status
        .as_ref()
        .and_then(|s| s.operator_credentials_secret.as_deref())
        .filter(|s| !s.is_empty());
    match named {
        Some(secret) => {
            let (name, namespace) = name_and_namespace(cluster)?;
            let expected = crate::controller::credentials::operator_credentials_name(name);
            if secret == expected {
                Ok(Some(secret))
            } else {
                Err(ServerAccessError::CredentialsSecretNotTheOperators {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    named: secret.to_string(),
                    expected,
                })
            }
        }
        None if !cluster.spec.security.endpoint_authentication => Ok(None),
        None => {
            let (name, namespace) = name_and_namespace(cluster)?;
            Err(ServerAccessError::CredentialsNotReady {
                namespace: namespace.to_string(),
                name: name.to_string(),
            })
        }
    }
}

/// The content of `key` of `secret` (`data`, else `stringData`).
pub fn secret_value(secret: &Secret, key: &str) -> Option<Vec<u8>> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|v| v.0.clone())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|v| v.clone().into_bytes())
        })
}

/// The credentials in an operator credentials Secret (keys `username` and `password`).
pub fn credentials_from_secret(secret: &Secret) -> Result<Credentials, ServerAccessError> {
    let namespace = secret.metadata.namespace.clone().unwrap_or_default();
    let name = secret.metadata.name.clone().unwrap_or_default();
    let value = |key: &'static str| -> Result<String, ServerAccessError> {
        let bytes = secret_value(secret, key)
            .filter(|b| !b.is_empty())
            .ok_or_else(|| ServerAccessError::CredentialsKeyMissing {
                namespace: namespace.clone(),
                secret: name.clone(),
                key,
            })?;
        String::from_utf8(bytes).map_err(|_| ServerAccessError::CredentialsNotUtf8 {
            namespace: namespace.clone(),
            secret: name.clone(),
            key,
        })
    };
    Ok(Credentials::new(value(USERNAME_KEY)?, value(PASSWORD_KEY)?))
}

/// The CA certificate(s) of a TLS Secret (`ca.crt`), when it has them.
pub fn ca_from_secret(secret: &Secret) -> Option<Vec<u8>> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(CA_KEY))
        .map(|b| b.0.clone())
        .filter(|b| !b.is_empty())
}

/// The certificate chain (`tls.crt`) and key (`tls.key`) of the operators' client
/// certificate Secret; `None` while either is missing.
pub fn client_identity_from_secret(secret: &Secret) -> Option<ClientIdentity> {
    let data = secret.data.as_ref()?;
    let value = |key: &str| data.get(key).map(|b| b.0.clone()).filter(|b| !b.is_empty());
    Some(ClientIdentity {
        cert_chain_pem: value(crate::certificates::objects::TLS_CERT_KEY)?,
        key_pem: value(crate::certificates::objects::TLS_KEY_KEY)?,
    })
}

/// The CAs to trust: the certificate Secret's and the operator-wide bundle, together; `None`
/// (the system's roots) when neither is given.
pub fn trust_bundle(certificate_ca: Option<Vec<u8>>, operator: Option<&[u8]>) -> Option<Vec<u8>> {
    match (certificate_ca, operator) {
        (None, None) => None,
        (Some(ca), None) => Some(ca),
        (None, Some(bundle)) => Some(bundle.to_vec()),
        (Some(mut ca), Some(bundle)) => {
            if !ca.ends_with(b"\n") {
                ca.push(b'\n');
            }
            ca.extend_from_slice(bundle);
            Some(ca)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::tests::cluster;
    use common_crds::InfinispanStatus;
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn with_credentials(mut cr: Infinispan, secret: &str) -> Infinispan {
        cr.status = Some(InfinispanStatus {
            operator_credentials_secret: Some(secret.to_string()),
            ..InfinispanStatus::default()
        });
        cr
    }

    fn secret(data: &[(&str, &[u8])]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some("demo-operator-credentials".into()),
                namespace: Some("team-a".into()),
                ..ObjectMeta::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn credentials_come_from_the_secret_the_status_names() {
        let cr = cluster("team-a", "demo");
        let e = credentials_secret_name(&cr).expect_err("not ready");
        assert_eq!(e.reason(), "CredentialsNotReady");
        assert!(e.to_string().contains("team-a/demo"), "{e}");
        let cr = with_credentials(cr, "demo-operator-credentials");
        assert_eq!(
            credentials_secret_name(&cr).expect("named"),
            Some("demo-operator-credentials")
        );
        // A status pointing elsewhere (written by whoever may write infinispans/status) is
        // refused, not followed.
        let redirected = with_credentials(cluster("team-a", "demo"), "someone-elses-secret");
        let e = credentials_secret_name(&redirected).expect_err("not the operator's Secret");
        assert_eq!(e.reason(), "CredentialsInvalid");
        assert!(e.to_string().contains("demo-operator-credentials"), "{e}");
        let mut open = cluster("team-a", "open");
        open.spec.security.endpoint_authentication = false;
        assert_eq!(credentials_secret_name(&open).expect("none needed"), None);

        let creds = credentials_from_secret(&secret(&[
            ("username", b"operator"),
            ("password", b"s3cr3t-pw"),
        ]))
        .expect("ok");
        assert_eq!(creds.username, "operator");
        assert!(!format!("{creds:?}").contains("s3cr3t-pw"));

        let e = credentials_from_secret(&secret(&[("username", b"operator")]))
            .expect_err("no password");
        assert!(matches!(
            e,
            ServerAccessError::CredentialsKeyMissing {
                key: "password",
                ..
            }
        ));
        assert_eq!(
            e.to_string(),
            "the operator credentials Secret team-a/demo-operator-credentials has no \"password\" key"
        );
        let e = credentials_from_secret(&secret(&[
            ("username", b"operator"),
            ("password", &[0xff, 0xfe]),
        ]))
        .expect_err("binary");
        assert_eq!(e.reason(), "CredentialsInvalid");
        assert!(matches!(e, ServerAccessError::CredentialsNotUtf8 { .. }));
        let e = credentials_from_secret(&secret(&[("username", b""), ("password", b"x")]))
            .expect_err("empty user");
        assert!(matches!(
            e,
            ServerAccessError::CredentialsKeyMissing {
                key: "username",
                ..
            }
        ));
    }

    #[test]
    fn the_trust_bundle_joins_the_certificate_ca_and_the_operator_bundle() {
        let tls = secret(&[("tls.crt", b"cert"), ("ca.crt", b"CA-1")]);
        assert_eq!(ca_from_secret(&tls), Some(b"CA-1".to_vec()));
        assert_eq!(ca_from_secret(&secret(&[("tls.crt", b"cert")])), None);
        assert_eq!(trust_bundle(None, None), None);
        assert_eq!(trust_bundle(Some(b"A".to_vec()), None), Some(b"A".to_vec()));
        assert_eq!(trust_bundle(None, Some(b"B")), Some(b"B".to_vec()));
        assert_eq!(
            trust_bundle(Some(b"A".to_vec()), Some(b"B")),
            Some(b"A\nB".to_vec())
        );
        assert_eq!(
            trust_bundle(Some(b"A\n".to_vec()), Some(b"B")),
            Some(b"A\nB".to_vec())
        );
    }
}
