//! The shared resources operator of a namespace (`spec.resourcesOperator.deployment:
//! SharedInNamespace`): one Deployment, [`SHARED_NAME`], syncing every cluster of the namespace
//! that chooses it, each with an engine of its own.
//!
//! Which clusters it serves, and how to reach each server, is the ConfigMap [`SHARED_NAME`]: one
//! key per member cluster (the `Infinispan` CR's name), whose value is a [`Member`] as JSON. The
//! cluster operator writes each cluster's key (server-side apply, one field manager per cluster,
//! so that clusters never overwrite each other's keys); the shared operator watches the ConfigMap
//! and starts, restarts (a changed value) or stops (a removed key) the cluster's sync without a
//! restart of its own. A member's credentials, CA and client certificate are read from their
//! Secrets through the API, which the cluster's own Role (bound to the shared ServiceAccount)
//! allows by name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Name of the shared resources operator's Deployment, ServiceAccount, Role, RoleBinding and
/// members ConfigMap in a namespace. No per-cluster object can have it: those are named
/// `resources-operator-<cluster>` or `<cluster>-<suffix>`, and no suffix is `-shared` after
/// `infinispan-resources-operator`.
pub const SHARED_NAME: &str = "infinispan-resources-operator-shared";

/// How the shared operator reaches one member cluster's server: what the per-cluster
/// Deployment passes as flags, with Secrets named instead of files mounted.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Member {
    /// Base URL of the cluster's REST endpoint.
    pub infinispan_url: String,
    /// Secret with `username` and `password` of the operators' admin user; absent when the
    /// client certificate is the identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret: Option<String>,
    /// Secret and key of the PEM CA bundle to trust for an https URL; absent: the system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_secret: Option<SecretKey>,
    /// The host name the server's certificate is checked against, instead of the URL's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_server_name: Option<String>,
    /// Secret (`tls.crt`, `tls.key`) of the client certificate to present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate_secret: Option<String>,
    /// `spec.resourcesOperator.driftCheckInterval`, e.g. `60s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_check_interval: Option<String>,
    /// `spec.resourcesOperator.serverWriteConcurrency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_write_concurrency: Option<u16>,
    /// Changes when something read once at the member's start changed (rotated credentials, a
    /// renewed client certificate): the member restarts, as a per-cluster pod would roll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

/// One key of a Secret.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SecretKey {
    pub name: String,
    pub key: String,
}

impl Member {
    /// A member reached at `infinispan_url` without credentials, TLS material or settings of
    /// its own.
    pub fn at(infinispan_url: impl Into<String>) -> Self {
        Self {
            infinispan_url: infinispan_url.into(),
            credentials_secret: None,
            ca_secret: None,
            tls_server_name: None,
            client_certificate_secret: None,
            drift_check_interval: None,
            server_write_concurrency: None,
            revision: None,
        }
    }

    /// The ConfigMap value of this member.
    pub fn to_value(&self) -> String {
        // Plain strings, numbers and options: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The Secrets the member reads (credentials, CA, client certificate), for its Role.
    pub fn secrets(&self) -> Vec<&str> {
        let mut names: Vec<&str> = [
            self.credentials_secret.as_deref(),
            self.ca_secret.as_ref().map(|s| s.name.as_str()),
            self.client_certificate_secret.as_deref(),
        ]
        .into_iter()
        .flatten()
        .collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

/// The members the ConfigMap's `data` lists, by cluster; a value that is not a [`Member`] is an
/// error of that cluster only, naming what is wrong.
pub fn members(data: &BTreeMap<String, String>) -> BTreeMap<String, Result<Member, String>> {
    data.iter()
        .map(|(cluster, value)| {
            let member = serde_json::from_str::<Member>(value).map_err(|error| {
                format!("the {SHARED_NAME} ConfigMap's key {cluster:?} is not a member: {error}")
            });
            (cluster.clone(), member)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member() -> Member {
        Member {
            infinispan_url: "https://demo-operators.ns.svc.cluster.local:11222".into(),
            credentials_secret: Some("demo-operator-credentials".into()),
            ca_secret: Some(SecretKey {
                name: "demo-cert".into(),
                key: "ca.crt".into(),
            }),
            tls_server_name: Some("demo.ns.svc.cluster.local".into()),
            client_certificate_secret: None,
            drift_check_interval: Some("30s".into()),
            server_write_concurrency: Some(8),
            revision: Some("abc".into()),
        }
    }

    #[test]
    fn a_member_reads_back_from_its_value() {
        let data = BTreeMap::from([("demo".to_string(), member().to_value())]);
        assert_eq!(members(&data)["demo"], Ok(member()));
    }

    #[test]
    fn a_bad_value_is_an_error_of_its_cluster_only() {
        let data = BTreeMap::from([
            ("good".to_string(), member().to_value()),
            ("bad".to_string(), r#"{"infinispanUrl": 3}"#.to_string()),
            (
                "typo".to_string(),
                r#"{"infinispanURL": "http://x"}"#.to_string(),
            ),
        ]);
        let read = members(&data);
        assert_eq!(read["good"], Ok(member()));
        for cluster in ["bad", "typo"] {
            let Err(error) = &read[cluster] else {
                panic!("{cluster} read as a member");
            };
            assert!(error.contains(&format!("{cluster:?}")), "{error}");
            assert!(error.contains(SHARED_NAME), "{error}");
        }
    }

    #[test]
    fn the_secrets_are_each_named_once() {
        let mut both = member();
        both.client_certificate_secret = Some("demo-cert".into());
        assert_eq!(both.secrets(), ["demo-cert", "demo-operator-credentials"]);
        let none = Member {
            credentials_secret: None,
            ca_secret: None,
            ..member()
        };
        assert!(none.secrets().is_empty());
    }
}
