//! The Secrets the cluster operator generates once per cluster and never rewrites: the
//! operators' admin credentials (design "Credentials") and, when the user names no identities
//! Secret, the application identities.
//!
//! - `<cluster>-operator-credentials`: keys `username` ([`OPERATOR_USERNAME`]) and `password`
//!   (32 random alphanumeric characters from the operating system's CSPRNG), the user the
//!   cluster operator and the resources operator act as (role `admin`). Named in
//!   `status.operatorCredentialsSecret`.
//! - `<cluster>-generated-identities`: key `identities.yaml` with one application user,
//!   [`APPLICATION_USERNAME`] (role `admin`), the format of `spec.security.endpointSecretName`
//!   (and of infinispan-operator's generated Secret, so its users find their password where
//!   they look for it).
//!
//! - `<cluster>-metrics-credentials`: keys `username` (`operator-metrics`) and `password`, the
//!   user (role `monitor`) the cluster's ServiceMonitor scrapes `/metrics` as; only while the
//!   cluster has a ServiceMonitor that scrapes with credentials (deleted otherwise).
//!
//! They are created when missing and then left alone: a user may rotate a password by editing
//! the Secret (the server's realm reloads its files, see `build::server`). Both are controlled by
//! the `Infinispan` CR, so they go with it.

use std::collections::BTreeMap;

use common_crds::Infinispan;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::build::server::{IDENTITIES_KEY, PASSWORD_KEY, USERNAME_KEY};

/// The user name of the operators.
pub const OPERATOR_USERNAME: &str = "operator";
/// The application user of a generated identities Secret.
pub const APPLICATION_USERNAME: &str = "developer";
/// Length of generated passwords (62 symbols: about 190 bits).
pub const PASSWORD_LEN: usize = 32;

/// Name of the operators' credentials Secret of `cluster`.
pub fn operator_credentials_name(cluster: &str) -> String {
    format!("{cluster}-operator-credentials")
}

/// Name of the generated application identities Secret of `cluster`.
pub fn generated_identities_name(cluster: &str) -> String {
    format!("{cluster}-generated-identities")
}

/// The random source failed (the operating system gave no randomness).
#[derive(Debug, thiserror::Error)]
#[error("the operating system's random generator failed: {0}")]
pub struct RandomError(String);

/// A password of [`PASSWORD_LEN`] characters of `A-Za-z0-9` (uniform: rejection sampling).
pub fn random_password() -> Result<String, RandomError> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    // 248 = 4 * 62: bytes at or above it would favour the first symbols.
    const LIMIT: u8 = 248;
    let mut password = String::with_capacity(PASSWORD_LEN);
    let mut buffer = [0u8; 64];
    while password.len() < PASSWORD_LEN {
        getrandom::fill(&mut buffer).map_err(|e| RandomError(e.to_string()))?;
        for byte in buffer {
            if byte < LIMIT && password.len() < PASSWORD_LEN {
                password.push(char::from(ALPHABET[usize::from(byte % 62)]));
            }
        }
    }
    Ok(password)
}

fn secret(
    name: String,
    cluster: &Infinispan,
    owner: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    data: BTreeMap<String, ByteString>,
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: cluster.metadata.namespace.clone(),
            labels: Some(crate::build::server::labels(
                cluster.metadata.name.as_deref().unwrap_or_default(),
            )),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".to_string()),
        data: Some(data),
        ..Secret::default()
    }
}

/// The operators' credentials Secret of `cluster` with `password`.
pub fn operator_credentials(
    cluster: &Infinispan,
    owner: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    password: &str,
) -> Secret {
    let name = operator_credentials_name(cluster.metadata.name.as_deref().unwrap_or_default());
    secret(name, cluster, owner, user(OPERATOR_USERNAME, password))
}

/// The `username` and `password` keys of a user's credentials Secret.
fn user(username: &str, password: &str) -> BTreeMap<String, ByteString> {
    BTreeMap::from([
        (
            USERNAME_KEY.to_string(),
            ByteString(username.as_bytes().to_vec()),
        ),
        (
            PASSWORD_KEY.to_string(),
            ByteString(password.as_bytes().to_vec()),
        ),
    ])
}

/// The metrics user's credentials Secret of `cluster` with `password`
/// ([`crate::build::server::metrics_credentials_name`]): the user Prometheus scrapes `/metrics`
/// as (role `monitor`), named by the cluster's ServiceMonitor.
pub fn metrics_credentials(
    cluster: &Infinispan,
    owner: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    password: &str,
) -> Secret {
    let name = crate::build::server::metrics_credentials_name(
        cluster.metadata.name.as_deref().unwrap_or_default(),
    );
    secret(
        name,
        cluster,
        owner,
        user(crate::build::server::METRICS_USERNAME, password),
    )
}

/// The password of `cluster`'s credential store
/// ([`crate::build::server::credential_store::password_secret_name`]).
pub fn credential_store_password(
    cluster: &Infinispan,
    owner: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    password: &str,
) -> Secret {
    use crate::build::server::credential_store::{PASSWORD_KEY, password_secret_name};
    let name = password_secret_name(cluster.metadata.name.as_deref().unwrap_or_default());
    secret(
        name,
        cluster,
        owner,
        BTreeMap::from([(
            PASSWORD_KEY.to_string(),
            ByteString(password.as_bytes().to_vec()),
        )]),
    )
}

/// The generated application identities Secret of `cluster` with `password`.
pub fn generated_identities(
    cluster: &Infinispan,
    owner: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    password: &str,
) -> Secret {
    let name = generated_identities_name(cluster.metadata.name.as_deref().unwrap_or_default());
    // The password is alphanumeric: no YAML quoting needed.
    let yaml = format!(
        "credentials:\n- username: {APPLICATION_USERNAME}\n  password: {password}\n  roles: [admin]\n"
    );
    secret(
        name,
        cluster,
        owner,
        BTreeMap::from([(IDENTITIES_KEY.to_string(), ByteString(yaml.into_bytes()))]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::server::Identities;
    use common_crds::infinispan::InfinispanSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn cluster() -> Infinispan {
        let mut cr = Infinispan::new(
            "demo",
            serde_json::from_value::<InfinispanSpec>(serde_json::json!({})).expect("spec"),
        );
        cr.metadata.namespace = Some("team-a".into());
        cr.metadata.uid = Some("uid-1".into());
        cr
    }

    fn owner() -> OwnerReference {
        OwnerReference {
            api_version: "infinispan.org/v1".into(),
            kind: "Infinispan".into(),
            name: "demo".into(),
            uid: "uid-1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    #[test]
    fn passwords_are_long_alphanumeric_and_differ() {
        let a = random_password().expect("random");
        let b = random_password().expect("random");
        assert_eq!(a.len(), PASSWORD_LEN);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()), "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn generated_secrets_are_owned_and_readable_by_the_builders() {
        let creds = operator_credentials(&cluster(), owner(), "p4ss");
        assert_eq!(
            creds.metadata.name.as_deref(),
            Some("demo-operator-credentials")
        );
        assert_eq!(creds.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(creds.metadata.owner_references, Some(vec![owner()]));
        let identities = generated_identities(&cluster(), owner(), "d3v");
        assert_eq!(
            identities.metadata.name.as_deref(),
            Some("demo-generated-identities")
        );
        let parsed = Identities::from_secrets(&creds, &identities).expect("valid identities");
        let users: Vec<_> = parsed
            .users()
            .iter()
            .map(|u| (u.username.as_str(), u.password.as_str(), u.roles.clone()))
            .collect();
        assert_eq!(
            users,
            [
                ("operator", "p4ss", vec!["admin".to_string()]),
                ("developer", "d3v", vec!["admin".to_string()])
            ]
        );
    }
}
