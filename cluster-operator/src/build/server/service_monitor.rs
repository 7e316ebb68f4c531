//! The cluster's `ServiceMonitor` (`monitoring.coreos.com/v1`, the Prometheus Operator's kind):
//! Prometheus scrapes `/metrics` of every server pod through the client Service's endpoints,
//! with the scheme, TLS settings and credentials the server asks for
//! (`docs/monitoring.md` says why each is so; measured on 16.0.7).
//!
//! - Authentication off: `http` or `https`, no credentials.
//! - Authentication on, `spec.monitoring.metricsAuthentication` false: the server's endpoint has
//!   `metrics-auth="false"` (`config.rs`): `/metrics` alone answers without credentials.
//! - Authentication on and TLS: BASIC with the generated metrics user
//!   ([`METRICS_USERNAME`], role [`METRICS_ROLE`], Secret `<cluster>-metrics-credentials`),
//!   never the operators' admin user.
//! - `clientCert: Authenticate`: no credentials; the scraper presents its own certificate
//!   (Secret `<cluster>-metrics-client-tls`, common name `infinispan-metrics <ns>/<cluster>`,
//!   which the server lists and maps to a role with MONITOR only).
//! - Authentication on without TLS: none. The server offers BASIC only over TLS (403 in clear)
//!   and Prometheus speaks no DIGEST, so no scrape with credentials can succeed.
//!
//! The type is this module's own (the few fields the operator sets), not a client of the
//! Prometheus Operator's API: the controller applies it only when the API server serves the
//! kind ([`SERVICE_MONITOR_API_GROUP_VERSION`]).

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMapKeySelector, SecretKeySelector};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::Resource;
use serde::{Deserialize, Serialize};

use super::inputs::Cx;
use super::{PASSWORD_KEY, SERVER_PORT_NAME, USERNAME_KEY, client_service_name, selector_labels};
use crate::build::identity;
use crate::certificates::objects::{
    CA_CERT_KEY, TLS_CERT_KEY, TLS_KEY_KEY, ca_config_map_name, client_secret_name,
    metrics_client_secret_name,
};
use common_crds::infinispan::EncryptionType;
use common_crds::labels::CLUSTER_LABEL;

/// The API group and version of the kind, as discovery lists it.
pub const SERVICE_MONITOR_API_GROUP_VERSION: &str = "monitoring.coreos.com/v1";
/// The resource (plural) discovery lists for the kind.
pub const SERVICE_MONITOR_PLURAL: &str = "servicemonitors";
/// The path the server serves its metrics on (Prometheus text format).
pub const METRICS_PATH: &str = "/metrics";
/// The realm user Prometheus scrapes as.
pub const METRICS_USERNAME: &str = "operator-metrics";
/// The server's built-in role of [`METRICS_USERNAME`] (permission MONITOR only: it cannot
/// create or change caches, schemas or counters).
pub const METRICS_ROLE: &str = "monitor";
/// Label of the client Service only, which the ServiceMonitor selects (the operators' Service
/// has the same labels otherwise, and each pod must be scraped once).
pub const SERVICE_LABEL: &str = "infinispan.org/service";
/// [`SERVICE_LABEL`] of the client Service.
pub const CLIENT_SERVICE: &str = "client";

/// Name of the ServiceMonitor of `cluster`.
pub fn service_monitor_name(cluster: &str) -> String {
    cluster.to_string()
}

/// Name of the Secret with the metrics user's credentials of `cluster` (keys `username`,
/// `password`).
pub fn metrics_credentials_name(cluster: &str) -> String {
    format!("{cluster}-metrics-credentials")
}

/// `monitoring.coreos.com/v1` `ServiceMonitor`, the fields the operator sets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitor {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ServiceMonitorSpec,
}

/// `spec` of a [`ServiceMonitor`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitorSpec {
    /// The Services whose endpoints are scraped.
    pub selector: LabelSelector,
    pub namespace_selector: NamespaceSelector,
    pub endpoints: Vec<Endpoint>,
    /// Pod labels copied onto every scraped series (`infinispan.org/cluster` becomes
    /// `infinispan_org_cluster`, the label of the operators' dashboard).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_target_labels: Vec<String>,
}

/// The namespaces whose Services are selected.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceSelector {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_names: Vec<String>,
}

/// One scrape endpoint of the selected Services.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// The Service port's name.
    pub port: String,
    pub path: String,
    /// `http` or `https`.
    pub scheme: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_config: Option<TlsConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<BasicAuth>,
}

/// How the scraper checks the server's certificate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsConfig {
    /// The CA to trust; absent: the scraper's system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<SecretOrConfigMap>,
    /// The name the certificate must carry (targets are pod IPs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// The client certificate the scraper presents, when the endpoint asks for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<SecretOrConfigMap>,
    /// Its key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_secret: Option<SecretKeySelector>,
}

/// A key of a Secret or of a ConfigMap of the ServiceMonitor's namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretOrConfigMap {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretKeySelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapKeySelector>,
}

/// BASIC credentials from Secret keys.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BasicAuth {
    pub username: SecretKeySelector,
    pub password: SecretKeySelector,
}

impl Resource for ServiceMonitor {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "ServiceMonitor".into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        "monitoring.coreos.com".into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        SERVICE_MONITOR_PLURAL.into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// What the cluster's monitoring comes to.
#[derive(Clone, Debug, PartialEq)]
pub enum Monitoring {
    /// `spec.monitoring.serviceMonitor` is false: none (a left-over one is deleted).
    Off,
    /// Authentication on, `/metrics` authenticated, no TLS: no scraper can authenticate (the
    /// server offers BASIC only over TLS), so none (a left-over one is deleted).
    NeedsTls,
    /// The ServiceMonitor to keep.
    ServiceMonitor(Box<ServiceMonitor>),
}

impl Monitoring {
    /// The ServiceMonitor to keep, if any.
    pub fn service_monitor(&self) -> Option<&ServiceMonitor> {
        match self {
            Self::ServiceMonitor(monitor) => Some(monitor),
            Self::Off | Self::NeedsTls => None,
        }
    }
}

/// Whether the realm of the cluster `resolved` (its TLS types written in) needs the metrics
/// user: a ServiceMonitor is wanted and scrapes with credentials (authentication on, `/metrics`
/// authenticated, TLS on). The controller adds that the kind must be served.
pub fn metrics_user_needed(resolved: &common_crds::Infinispan) -> bool {
    let spec = &resolved.spec;
    spec.monitoring.service_monitor
        && spec.security.endpoint_authentication
        && spec.monitoring.metrics_authentication
        && crate::build::security::endpoint_tls(resolved)
        && !crate::build::security::certificate_authentication(resolved)
}

impl Cx<'_> {
    pub(super) fn monitoring(&self) -> Monitoring {
        let spec = &self.cluster.spec;
        if !spec.monitoring.service_monitor {
            return Monitoring::Off;
        }
        let authenticated = self.identities.is_some() && spec.monitoring.metrics_authentication;
        if authenticated && self.tls.is_none() {
            return Monitoring::NeedsTls;
        }
        // Authenticate: the scraper's own certificate is its identity (role MONITOR); no
        // password is taken.
        let credentials = authenticated && !self.certificate_authentication;
        let tls_config = self.tls.as_ref().map(|(secret, certificate)| {
            let ca = match spec.security.endpoint_encryption.type_ {
                Some(EncryptionType::Generated) => Some(SecretOrConfigMap {
                    config_map: Some(ConfigMapKeySelector {
                        name: ca_config_map_name(self.name),
                        key: CA_CERT_KEY.to_string(),
                        optional: None,
                    }),
                    secret: None,
                }),
                _ if certificate.has_ca() => Some(SecretOrConfigMap {
                    secret: Some(SecretKeySelector {
                        name: secret.clone(),
                        key: CA_CERT_KEY.to_string(),
                        optional: None,
                    }),
                    config_map: None,
                }),
                _ => None,
            };
            // Validate: the operators' client certificate, from the cluster's CA, which the
            // server trusts. Authenticate: the scraper's, which the server lists.
            let client = self.client_trust.is_some();
            let client_secret = if self.certificate_authentication {
                metrics_client_secret_name(self.name)
            } else {
                client_secret_name(self.name)
            };
            let client_key = |key: &str| SecretKeySelector {
                name: client_secret.clone(),
                key: key.to_string(),
                optional: None,
            };
            TlsConfig {
                ca,
                cert: client.then(|| SecretOrConfigMap {
                    secret: Some(client_key(TLS_CERT_KEY)),
                    config_map: None,
                }),
                key_secret: client.then(|| client_key(TLS_KEY_KEY)),
                // The certificate names the client Service (what the resources operator checks
                // too); the scraper connects to pod IPs.
                server_name: identity::service_host(
                    &client_service_name(self.name),
                    self.namespace,
                    &self.settings.cluster_domain,
                ),
            }
        });
        let basic_auth = credentials.then(|| {
            let key = |key: &str| SecretKeySelector {
                name: metrics_credentials_name(self.name),
                key: key.to_string(),
                optional: None,
            };
            BasicAuth {
                username: key(USERNAME_KEY),
                password: key(PASSWORD_KEY),
            }
        });
        let mut metadata = self.metadata(service_monitor_name(self.name));
        self.user.service_monitor.apply_to(&mut metadata);
        let mut selector = selector_labels(self.name);
        selector.insert(SERVICE_LABEL.to_string(), CLIENT_SERVICE.to_string());
        Monitoring::ServiceMonitor(Box::new(ServiceMonitor {
            api_version: SERVICE_MONITOR_API_GROUP_VERSION.to_string(),
            kind: ServiceMonitor::kind(&()).into_owned(),
            metadata,
            spec: ServiceMonitorSpec {
                selector: LabelSelector {
                    match_labels: Some(selector),
                    match_expressions: None,
                },
                namespace_selector: NamespaceSelector {
                    match_names: vec![self.namespace.to_string()],
                },
                endpoints: vec![Endpoint {
                    port: SERVER_PORT_NAME.to_string(),
                    path: METRICS_PATH.to_string(),
                    scheme: if self.tls.is_some() { "https" } else { "http" }.to_string(),
                    tls_config,
                    basic_auth,
                }],
                pod_target_labels: vec![CLUSTER_LABEL.to_string()],
            },
        }))
    }
}

/// The labels of the client Service beyond the cluster's own: [`SERVICE_LABEL`].
pub(super) fn client_service_labels() -> BTreeMap<String, String> {
    BTreeMap::from([(SERVICE_LABEL.to_string(), CLIENT_SERVICE.to_string())])
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{SERVER_CONFIG_KEY, build};
    use super::*;
    use common_crds::Infinispan;
    use common_crds::infinispan::EndpointEncryption;

    fn monitoring(cr: &Infinispan, referenced: &super::super::Referenced) -> Monitoring {
        build(cr, &full_settings(), referenced)
            .unwrap_or_else(|e| panic!("{e}"))
            .monitoring
    }

    fn endpoint_of(monitoring: &Monitoring) -> Endpoint {
        let monitor = monitoring
            .service_monitor()
            .unwrap_or_else(|| panic!("no ServiceMonitor: {monitoring:?}"));
        assert_eq!(monitor.spec.endpoints.len(), 1);
        monitor.spec.endpoints[0].clone()
    }

    fn with_tls(cr: &Infinispan, type_: EncryptionType) -> Infinispan {
        let mut cr = cr.clone();
        cr.spec.security.endpoint_encryption = EndpointEncryption {
            type_: Some(type_),
            cert_secret_name: (type_ == EncryptionType::Secret).then(|| "demo-tls".to_string()),
            ..EndpointEncryption::default()
        };
        cr
    }

    fn tls_referenced(with_ca: bool) -> super::super::Referenced {
        let mut data = vec![("tls.key", KEY_PEM), ("tls.crt", CERT_PEM)];
        if with_ca {
            data.push(("ca.crt", CERT_PEM));
        }
        super::super::Referenced {
            tls: Some(
                super::super::TlsCertificate::from_secret(&secret("demo-tls", &data))
                    .unwrap_or_else(|e| panic!("{e}")),
            ),
            ..referenced()
        }
    }

    fn metrics_auth_attribute(cr: &Infinispan, referenced: &super::super::Referenced) -> bool {
        let objects = build(cr, &full_settings(), referenced).unwrap_or_else(|e| panic!("{e}"));
        data(&objects.config_map, SERVER_CONFIG_KEY).contains("metrics-auth")
    }

    #[test]
    fn with_client_certificates_the_scraper_presents_the_operators_certificate() {
        let cr = super::super::fixtures::validating_clients(&with_tls(
            &cluster("demo", "team-a"),
            EncryptionType::Generated,
        ));
        let referenced = super::super::Referenced {
            client_trust: Some(super::super::fixtures::client_trust("users CA")),
            ..tls_referenced(true)
        };
        let tls = endpoint_of(&monitoring(&cr, &referenced))
            .tls_config
            .expect("a TLS config");
        let key = |key: &str| SecretKeySelector {
            name: "demo-client-tls".into(),
            key: key.into(),
            optional: None,
        };
        assert_eq!(tls.cert.and_then(|c| c.secret), Some(key("tls.crt")));
        assert_eq!(tls.key_secret, Some(key("tls.key")));
        // Without client certificates, none.
        let plain = endpoint_of(&monitoring(
            &with_tls(&cluster("demo", "team-a"), EncryptionType::Generated),
            &tls_referenced(true),
        ))
        .tls_config
        .expect("a TLS config");
        assert!(plain.cert.is_none() && plain.key_secret.is_none());
    }

    #[test]
    fn when_certificates_authenticate_the_scraper_presents_its_own_and_no_password() {
        let mut cr = super::super::fixtures::validating_clients(&with_tls(
            &cluster("demo", "team-a"),
            EncryptionType::Generated,
        ));
        cr.spec.security.endpoint_encryption.client_cert =
            Some(common_crds::infinispan::ClientCertType::Authenticate);
        assert!(!metrics_user_needed(&cr), "no password user in the realm");
        let referenced = super::super::Referenced {
            client_trust: Some(super::super::fixtures::client_trust("users CA")),
            ..tls_referenced(true)
        };
        let endpoint = endpoint_of(&monitoring(&cr, &referenced));
        assert!(endpoint.basic_auth.is_none());
        let tls = endpoint.tls_config.expect("a TLS config");
        let key = |key: &str| SecretKeySelector {
            name: "demo-metrics-client-tls".into(),
            key: key.into(),
            optional: None,
        };
        assert_eq!(tls.cert.and_then(|c| c.secret), Some(key("tls.crt")));
        assert_eq!(tls.key_secret, Some(key("tls.key")));
    }

    #[test]
    fn generated_tls_scrapes_https_trusting_the_published_ca_with_the_metrics_user() {
        let cr = with_tls(&cluster("demo", "team-a"), EncryptionType::Generated);
        assert!(metrics_user_needed(&cr));
        let monitoring = monitoring(&cr, &tls_referenced(true));
        let monitor = monitoring
            .service_monitor()
            .expect("a ServiceMonitor")
            .clone();
        assert_eq!(monitor.api_version, "monitoring.coreos.com/v1");
        assert_eq!(monitor.kind, "ServiceMonitor");
        assert_eq!(monitor.metadata.name.as_deref(), Some("demo"));
        assert_eq!(monitor.metadata.namespace.as_deref(), Some("team-a"));
        let endpoint = endpoint_of(&monitoring);
        assert_eq!(endpoint.port, "infinispan");
        assert_eq!(endpoint.path, "/metrics");
        assert_eq!(endpoint.scheme, "https");
        let tls = endpoint.tls_config.expect("a TLS config");
        assert_eq!(
            tls.ca,
            Some(SecretOrConfigMap {
                config_map: Some(ConfigMapKeySelector {
                    name: "demo-ca.crt".into(),
                    key: "ca.crt".into(),
                    optional: None
                }),
                secret: None,
            })
        );
        // The name the certificate is issued for (the client Service), not the pod IP.
        assert_eq!(
            tls.server_name.as_deref(),
            Some("demo.team-a.svc.corp.example")
        );
        let auth = endpoint.basic_auth.expect("credentials");
        assert_eq!(auth.username.name, "demo-metrics-credentials");
        assert_eq!(auth.username.key, "username");
        assert_eq!(auth.password.name, "demo-metrics-credentials");
        assert_eq!(auth.password.key, "password");
        // Never the operators' admin credentials.
        assert!(!auth.password.name.contains("operator-credentials"));
        // The pods roll for nothing: no metrics-auth attribute.
        assert!(!metrics_auth_attribute(&cr, &tls_referenced(true)));
    }

    #[test]
    fn a_users_certificate_is_trusted_through_its_ca_when_the_secret_has_one() {
        let cr = with_tls(&cluster("demo", "team-a"), EncryptionType::Secret);
        let with_ca = endpoint_of(&monitoring(&cr, &tls_referenced(true)));
        assert_eq!(
            with_ca.tls_config.and_then(|t| t.ca),
            Some(SecretOrConfigMap {
                secret: Some(SecretKeySelector {
                    name: "demo-tls".into(),
                    key: "ca.crt".into(),
                    optional: None
                }),
                config_map: None,
            })
        );
        // Without ca.crt: the scraper's system roots, still checking the Service's name.
        let without = endpoint_of(&monitoring(&cr, &tls_referenced(false)));
        assert_eq!(without.scheme, "https");
        let tls = without.tls_config.expect("a TLS config");
        assert_eq!(tls.ca, None);
        assert_eq!(
            tls.server_name.as_deref(),
            Some("demo.team-a.svc.corp.example")
        );
        assert!(without.basic_auth.is_some());
    }

    #[test]
    fn without_tls_credentials_cannot_be_used_so_none_unless_metrics_are_anonymous() {
        let cr = with_tls(&cluster("demo", "team-a"), EncryptionType::None);
        assert!(!metrics_user_needed(&cr));
        assert_eq!(monitoring(&cr, &referenced()), Monitoring::NeedsTls);
        assert!(!metrics_auth_attribute(&cr, &referenced()));

        // Anonymous /metrics: plain http, no credentials; the endpoint says metrics-auth="false".
        let mut anonymous = cr.clone();
        anonymous.spec.monitoring.metrics_authentication = false;
        assert!(!metrics_user_needed(&anonymous));
        let endpoint = endpoint_of(&monitoring(&anonymous, &referenced()));
        assert_eq!(endpoint.scheme, "http");
        assert_eq!(endpoint.tls_config, None);
        assert_eq!(endpoint.basic_auth, None);
        let objects =
            build(&anonymous, &full_settings(), &referenced()).unwrap_or_else(|e| panic!("{e}"));
        assert!(data(&objects.config_map, SERVER_CONFIG_KEY).contains(
            r#"<endpoint socket-binding="default" security-realm="default" metrics-auth="false">"#
        ));
        // ... over TLS too, with no credentials and no metrics user.
        let anonymous_tls = with_tls(&anonymous, EncryptionType::Generated);
        assert!(!metrics_user_needed(&anonymous_tls));
        let endpoint = endpoint_of(&monitoring(&anonymous_tls, &tls_referenced(true)));
        assert_eq!(endpoint.scheme, "https");
        assert_eq!(endpoint.basic_auth, None);
        assert!(metrics_auth_attribute(
            &anonymous_tls,
            &tls_referenced(true)
        ));
    }

    #[test]
    fn without_authentication_metrics_are_scraped_as_they_are_served() {
        let cr = bare_cluster();
        assert!(!metrics_user_needed(&cr));
        let endpoint = endpoint_of(&monitoring(&cr, &super::super::Referenced::default()));
        assert_eq!(endpoint.scheme, "http");
        assert_eq!(endpoint.basic_auth, None);
        // No realm: the attribute would mean nothing, and is not written.
        let mut anonymous = cr.clone();
        anonymous.spec.monitoring.metrics_authentication = false;
        assert!(!metrics_auth_attribute(
            &anonymous,
            &super::super::Referenced::default()
        ));
    }

    #[test]
    fn opting_out_builds_none_and_needs_no_metrics_user() {
        let mut cr = with_tls(&cluster("demo", "team-a"), EncryptionType::Generated);
        cr.spec.monitoring.service_monitor = false;
        assert!(!metrics_user_needed(&cr));
        assert_eq!(monitoring(&cr, &tls_referenced(true)), Monitoring::Off);
    }

    #[test]
    fn the_service_monitor_selects_the_client_service_alone_and_labels_series_by_cluster() {
        let mut cr = with_tls(&cluster("demo", "team-a"), EncryptionType::Generated);
        cr.spec
            .monitoring
            .service_monitor_metadata
            .labels
            .insert("release".into(), "prometheus".into());
        let objects =
            build(&cr, &full_settings(), &tls_referenced(true)).unwrap_or_else(|e| panic!("{e}"));
        let monitor = objects
            .monitoring
            .service_monitor()
            .expect("a ServiceMonitor");
        let selector = monitor
            .spec
            .selector
            .match_labels
            .clone()
            .unwrap_or_default();
        let labels =
            |s: &k8s_openapi::api::core::v1::Service| s.metadata.labels.clone().unwrap_or_default();
        let selects = |s: &k8s_openapi::api::core::v1::Service| {
            selector.iter().all(|(k, v)| labels(s).get(k) == Some(v))
        };
        assert!(selects(&objects.client_service));
        assert!(!selects(&objects.operator_service));
        assert!(!selects(&objects.ping_service));
        // The endpoint's port is the client Service's port name.
        let port = objects
            .client_service
            .spec
            .clone()
            .unwrap_or_default()
            .ports
            .unwrap_or_default();
        assert_eq!(
            port[0].name.as_deref(),
            Some(monitor.spec.endpoints[0].port.as_str())
        );
        assert_eq!(monitor.spec.namespace_selector.match_names, ["team-a"]);
        assert_eq!(monitor.spec.pod_target_labels, ["infinispan.org/cluster"]);
        assert_eq!(
            monitor
                .metadata
                .labels
                .clone()
                .unwrap_or_default()
                .get("release")
                .map(String::as_str),
            Some("prometheus")
        );
    }

    #[test]
    fn a_reserved_key_on_the_service_monitor_is_refused() {
        let mut cr = cluster("demo", "team-a");
        cr.spec
            .monitoring
            .service_monitor_metadata
            .labels
            .insert("infinispan.org/cluster".into(), "other".into());
        let error = build(&cr, &full_settings(), &referenced())
            .err()
            .unwrap_or_else(|| panic!("accepted"));
        assert!(
            error
                .to_string()
                .contains("spec.monitoring.serviceMonitorMetadata.labels"),
            "{error}"
        );
    }

    #[test]
    fn the_metrics_user_has_the_monitor_role_only_and_cannot_take_a_users_name() {
        let metrics = secret(
            "demo-metrics-credentials",
            &[("username", METRICS_USERNAME), ("password", "m3trics")],
        );
        let identities = identities()
            .with_metrics_user(&metrics)
            .unwrap_or_else(|e| panic!("{e}"));
        let users = identities.users();
        assert_eq!(users[0].username, "operator");
        let last = users.last().expect("users");
        assert_eq!(last.username, METRICS_USERNAME);
        assert_eq!(last.password, "m3trics");
        assert_eq!(last.roles, [METRICS_ROLE]);
        assert!(
            identities
                .groups_properties()
                .contains(&format!("{METRICS_USERNAME}=monitor\n"))
        );
        // An application user of that name: refused, named.
        let clash = super::super::Identities::from_secrets(
            &operator_secret(),
            &identities_yaml(&format!(
                "credentials:\n- username: {METRICS_USERNAME}\n  password: x\n"
            )),
        )
        .unwrap_or_else(|e| panic!("{e}"))
        .with_metrics_user(&metrics)
        .expect_err("a duplicate user");
        assert!(clash.to_string().contains(METRICS_USERNAME), "{clash}");
    }
}
