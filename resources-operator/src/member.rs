//! What the sync of one cluster needs, whoever runs it: `run` builds it from its flags (one
//! cluster per process), `run-shared` from each member's entry in the shared operator's
//! ConfigMap ([`common_crds::shared::Member`]). The difference is where the TLS material comes
//! from: files a per-cluster pod mounts (read and checked before the process starts), or
//! Secrets the shared operator reads through the API when the member starts.

use std::time::Duration;

use common_crds::shared::{Member, SecretKey};
use infinispan_rest::ClientIdentity;
use operator_runtime::duration::parse_duration;

use crate::cli::RunArgs;
use crate::cluster::Overrides;
use crate::engine::server_writes;

/// The sync of one cluster.
#[derive(Clone, Debug)]
pub struct MemberConfig {
    /// Name of the `Infinispan` CR.
    pub cluster: String,
    /// Namespace of the CR and of the resource CRs.
    pub namespace: String,
    /// Base URL of the cluster's REST endpoint.
    pub infinispan_url: String,
    /// Secret with `username` and `password`; `None`: no credentials are sent.
    pub credentials_secret: Option<String>,
    pub ca_bundle: CaBundle,
    /// The host name the server's certificate is checked against.
    pub tls_server_name: Option<String>,
    pub client_certificate: ClientCertificate,
    /// Command-line overrides of the CR's sync policy (none for a shared member).
    pub overrides: Overrides,
    pub counter_list_interval: Duration,
    /// Zero: no drift check.
    pub drift_check_interval: Duration,
    pub server_write_concurrency: usize,
}

/// Which CA certificates the REST client trusts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaBundle {
    /// The system's roots.
    System,
    /// A PEM bundle already read and checked; `source` names it in logs.
    Pem { source: String, pem: Vec<u8> },
    /// A key of a Secret, read when the sync starts.
    Secret(SecretKey),
}

/// The client certificate the REST client presents.
#[derive(Clone, Debug)]
pub enum ClientCertificate {
    None,
    /// Already read.
    Pem(ClientIdentity),
    /// A `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`), read when the sync starts.
    Secret(String),
}

/// What a shared member's entry leaves to the shared operator's own flags.
#[derive(Clone, Copy, Debug)]
pub struct SharedDefaults {
    pub counter_list_interval: Duration,
    pub drift_check_interval: Duration,
    pub server_write_concurrency: usize,
}

impl MemberConfig {
    /// The sync of `run`'s one cluster, with the CA bundle and client certificate its files
    /// gave (read and checked already).
    pub fn from_args(
        args: &RunArgs,
        ca_bundle: Option<Vec<u8>>,
        client_identity: Option<ClientIdentity>,
    ) -> Self {
        let ca_bundle = match (ca_bundle, &args.ca_bundle) {
            (Some(pem), path) => CaBundle::Pem {
                source: path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                pem,
            },
            (None, _) => CaBundle::System,
        };
        Self {
            cluster: args.cluster.clone(),
            namespace: args.namespace.clone(),
            infinispan_url: args.infinispan_url.clone(),
            credentials_secret: args.credentials_secret.clone(),
            ca_bundle,
            tls_server_name: args.tls_server_name.clone(),
            client_certificate: client_identity
                .map(ClientCertificate::Pem)
                .unwrap_or(ClientCertificate::None),
            overrides: Overrides {
                mode: args.sync_mode.map(Into::into),
                winner: args.conflict_winner.map(Into::into),
            },
            counter_list_interval: args.common.counter_list_interval,
            drift_check_interval: args.common.drift_check_interval,
            server_write_concurrency: args.common.server_write_concurrency,
        }
    }

    /// The sync of the shared operator's member `cluster` of `namespace`, as its ConfigMap entry
    /// says; what the entry leaves out comes from `defaults`. A value out of range is an error
    /// naming it (the cluster operator writes the entries from a CR its schema checked).
    pub fn from_member(
        namespace: &str,
        cluster: &str,
        member: &Member,
        defaults: SharedDefaults,
    ) -> Result<Self, String> {
        let drift_check_interval = match &member.drift_check_interval {
            Some(text) => {
                parse_duration(text).map_err(|error| format!("driftCheckInterval: {error}"))?
            }
            None => defaults.drift_check_interval,
        };
        let server_write_concurrency = match member.server_write_concurrency {
            Some(n) if (1..=server_writes::MAX_CONCURRENCY).contains(&usize::from(n)) => {
                usize::from(n)
            }
            Some(n) => {
                return Err(format!(
                    "serverWriteConcurrency {n} is not between 1 and {}",
                    server_writes::MAX_CONCURRENCY
                ));
            }
            None => defaults.server_write_concurrency,
        };
        Ok(Self {
            cluster: cluster.to_string(),
            namespace: namespace.to_string(),
            infinispan_url: member.infinispan_url.clone(),
            credentials_secret: member.credentials_secret.clone(),
            ca_bundle: member
                .ca_secret
                .clone()
                .map(CaBundle::Secret)
                .unwrap_or(CaBundle::System),
            tls_server_name: member.tls_server_name.clone(),
            client_certificate: member
                .client_certificate_secret
                .clone()
                .map(ClientCertificate::Secret)
                .unwrap_or(ClientCertificate::None),
            overrides: Overrides::default(),
            counter_list_interval: defaults.counter_list_interval,
            drift_check_interval,
            server_write_concurrency,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: SharedDefaults = SharedDefaults {
        counter_list_interval: Duration::from_secs(10),
        drift_check_interval: Duration::from_secs(60),
        server_write_concurrency: 4,
    };

    fn member() -> Member {
        Member {
            infinispan_url: "https://demo-operators.ns.svc:11222".into(),
            credentials_secret: Some("demo-operator-credentials".into()),
            ca_secret: Some(SecretKey {
                name: "demo-cert".into(),
                key: "ca.crt".into(),
            }),
            tls_server_name: Some("demo.ns.svc".into()),
            client_certificate_secret: Some("demo-client".into()),
            drift_check_interval: None,
            server_write_concurrency: None,
            revision: None,
        }
    }

    #[test]
    fn a_member_entry_gives_its_server_and_secrets_and_the_defaults_the_rest() -> Result<(), String>
    {
        let config = MemberConfig::from_member("ns", "demo", &member(), DEFAULTS)?;
        assert_eq!(config.cluster, "demo");
        assert_eq!(config.namespace, "ns");
        assert_eq!(config.infinispan_url, "https://demo-operators.ns.svc:11222");
        assert_eq!(
            config.credentials_secret.as_deref(),
            Some("demo-operator-credentials")
        );
        assert_eq!(
            config.ca_bundle,
            CaBundle::Secret(SecretKey {
                name: "demo-cert".into(),
                key: "ca.crt".into()
            })
        );
        assert!(
            matches!(&config.client_certificate, ClientCertificate::Secret(s) if s == "demo-client")
        );
        assert_eq!(config.tls_server_name.as_deref(), Some("demo.ns.svc"));
        assert_eq!(config.overrides, Overrides::default());
        assert_eq!(config.drift_check_interval, Duration::from_secs(60));
        assert_eq!(config.server_write_concurrency, 4);
        Ok(())
    }

    #[test]
    fn a_members_own_settings_win_and_bad_ones_are_named() -> Result<(), String> {
        let own = Member {
            drift_check_interval: Some("1m30s".into()),
            server_write_concurrency: Some(16),
            ..member()
        };
        let config = MemberConfig::from_member("ns", "demo", &own, DEFAULTS)?;
        assert_eq!(config.drift_check_interval, Duration::from_secs(90));
        assert_eq!(config.server_write_concurrency, 16);
        let bad_interval = Member {
            drift_check_interval: Some("soon".into()),
            ..member()
        };
        let error = MemberConfig::from_member("ns", "demo", &bad_interval, DEFAULTS)
            .err()
            .unwrap_or_default();
        assert!(error.contains("driftCheckInterval"), "{error}");
        let bad_writes = Member {
            server_write_concurrency: Some(0),
            ..member()
        };
        let error = MemberConfig::from_member("ns", "demo", &bad_writes, DEFAULTS)
            .err()
            .unwrap_or_default();
        assert!(error.contains("serverWriteConcurrency 0"), "{error}");
        Ok(())
    }
}
