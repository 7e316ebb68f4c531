//! Cross-site replication (`spec.service.sites`, `docs/cross-site.md`): the JGroups stacks of
//! the server configuration, the gossip router's Deployment `<cluster>-router` and its Service
//! `<cluster>-site`.
//!
//! Each site's server pods keep their `kubernetes` stack (or its TLS extension) for their own
//! cluster and add RELAY2 on top of it; the site masters (`maxRelayNodes` of them) join the
//! sites' bridge through a TUNNEL to every gossip router listed: this site's own and each
//! location's. Every pod connects out to the routers, so nothing reaches the server pods from
//! another site: the NetworkPolicy does not change. The router runs the server image's own
//! JGroups (`org.jgroups.stack.GossipRouter`), measured on 16.0.7 (`docs/cross-site.md`).

use std::collections::BTreeMap;

use common_crds::Infinispan;
use common_crds::sites::{
    ROUTER_PORT, RouterAddress, SiteEncryption, SiteExposeType, SitesSpec, router_name,
    site_service_name,
};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, PodSpec, PodTemplateSpec, Probe, ResourceRequirements, Secret, Service,
    ServicePort, ServiceSpec, TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sha2::{Digest, Sha256};

use super::inputs::{BuildError, Cx};
use crate::build::identity;
use crate::build::pod::{
    container_port, image_pull_secrets, mount, non_empty, restricted_container, restricted_pod,
    secret_env, secret_volume,
};

/// The JGroups stack of the server transport with cross-site on: the cluster's own stack with
/// RELAY2 on top.
pub const XSITE_STACK: &str = "xsite";
/// The stack of the sites' bridge: a TUNNEL to the gossip routers.
pub const XSITE_TUNNEL_STACK: &str = "xsite-tunnel";
/// `app.kubernetes.io/name` of the gossip router's objects.
pub const ROUTER_APP_NAME: &str = "infinispan-router";
/// `app.kubernetes.io/component` of the gossip router's objects.
pub const ROUTER_COMPONENT: &str = "gossip-router";
/// Name of the gossip router's container and of its port.
pub const ROUTER_CONTAINER_NAME: &str = "gossip-router";
/// Where the server image keeps its libraries (JGroups among them).
const SERVER_LIB: &str = "/opt/infinispan/lib/*";

/// The cross-site settings of one cluster, checked and resolved.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Sites {
    /// The local site's name.
    pub local: String,
    /// The remote sites' names, in the CR's order.
    pub remote: Vec<String>,
    /// Every router the pods connect to: this site's own first (when it runs one), then the
    /// locations'.
    pub routers: Vec<RouterAddress>,
    pub max_relay_nodes: i32,
    /// Heartbeat interval and timeout (ms), when on.
    pub heartbeats: Option<(i64, i64)>,
    /// TLS between the sites, when `local.encryption` asks for it.
    pub tls: Option<SiteTls>,
}

/// One store of the cross-site TLS, checked: its Secret, the key holding it, its type and
/// (keystores) the alias of the key entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteStore {
    pub secret: String,
    pub key: String,
    pub store_type: String,
    pub alias: Option<String>,
}

/// The stores of `spec.service.sites.local.encryption`, checked (what the controller read):
/// the transport's keystore (the server pods), the router's keystore, the truststore, and a
/// digest of the three Secrets' content (a new certificate rolls the pods and the router).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteTls {
    pub protocol: &'static str,
    pub transport: SiteStore,
    pub router: SiteStore,
    pub trust: SiteStore,
    pub digest: String,
}

/// The key of a store's password in its Secret (infinispan-operator's).
pub const STORE_PASSWORD_KEY: &str = "password";
/// The key of a store's type in its Secret (infinispan-operator's); absent: PKCS12.
pub const STORE_TYPE_KEY: &str = "type";
/// Where the server pods find the transport's keystore.
const TRANSPORT_STORE_DIR: &str = "/etc/infinispan/xsite-tls/keystore";
/// Where the server pods and the router find the truststore.
const TRUST_STORE_DIR: &str = "/etc/infinispan/xsite-tls/truststore";
/// Where the router finds its keystore.
const ROUTER_STORE_DIR: &str = "/etc/infinispan/xsite-tls/router-keystore";
const TRANSPORT_STORE_VOLUME: &str = "xsite-keystore";
const TRUST_STORE_VOLUME: &str = "xsite-truststore";
const ROUTER_STORE_VOLUME: &str = "xsite-router-keystore";
/// The variables of the stores' passwords (server: read by the configuration, `${env.…}`;
/// router: expanded into its arguments by the kubelet, `$(…)`).
const KEYSTORE_PASSWORD_ENV: &str = "XSITE_KEYSTORE_PASSWORD";
const TRUSTSTORE_PASSWORD_ENV: &str = "XSITE_TRUSTSTORE_PASSWORD";
/// The router's diagnostics port: its probes' target with TLS (a bare TCP connection to the
/// TLS port would be a failed handshake in its log at every probe).
pub const ROUTER_DIAG_PORT: u16 = 7901;

/// Name of [`ROUTER_DIAG_PORT`].
const ROUTER_DIAG_PORT_NAME: &str = "router-diag";

/// One store in `secret`, under `key` (`field` names it in errors): it is there, with a
/// password, and a type PKCS12 (default) or JKS.
fn site_store(
    secret: &Secret,
    field: &str,
    key: String,
    alias: Option<String>,
) -> Result<SiteStore, BuildError> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    let missing = |k: &str| BuildError::InvalidSites {
        problem: format!("{field}: the Secret {name:?} has no key {k}"),
    };
    crate::servers::secret_value(secret, &key)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| missing(&key))?;
    crate::servers::secret_value(secret, STORE_PASSWORD_KEY)
        .ok_or_else(|| missing(STORE_PASSWORD_KEY))?;
    let store_type = match crate::servers::secret_value(secret, STORE_TYPE_KEY) {
        None => "PKCS12".to_string(),
        Some(bytes) => {
            let text = String::from_utf8_lossy(&bytes).trim().to_uppercase();
            if text != "PKCS12" && text != "JKS" {
                return Err(BuildError::InvalidSites {
                    problem: format!(
                        "{field}: the Secret {name:?} says type {text:?}, not PKCS12 or JKS"
                    ),
                });
            }
            text
        }
    };
    Ok(SiteStore {
        secret: name,
        key,
        store_type,
        alias,
    })
}

impl SiteTls {
    /// Checks the three Secrets `encryption` names, as read (`transport`, `router`, `trust`).
    pub fn from_secrets(
        encryption: &SiteEncryption,
        transport: &Secret,
        router: &Secret,
        trust: &Secret,
    ) -> Result<Self, BuildError> {
        let field = "spec.service.sites.local.encryption";
        let (keystore, router_keystore) = (
            &encryption.transport_key_store,
            &encryption.router_key_store,
        );
        let key = |filename: &Option<String>, default: &str| {
            filename.clone().unwrap_or_else(|| default.to_string())
        };
        let mut hasher = Sha256::new();
        for secret in [transport, router, trust] {
            for (name, value) in secret.data.iter().flatten() {
                super::referenced::hash_part(&mut hasher, name);
                hasher.update(&value.0);
            }
        }
        Ok(Self {
            protocol: encryption.protocol.as_str(),
            transport: site_store(
                transport,
                &format!("{field}.transportKeyStore"),
                key(&keystore.filename, "keystore.p12"),
                Some(keystore.alias.clone().unwrap_or_else(|| "transport".into())),
            )?,
            router: site_store(
                router,
                &format!("{field}.routerKeyStore"),
                key(&router_keystore.filename, "keystore.p12"),
                Some(
                    router_keystore
                        .alias
                        .clone()
                        .unwrap_or_else(|| "router".into()),
                ),
            )?,
            trust: site_store(
                trust,
                &format!("{field}.trustStore"),
                key(&encryption.trust_store.filename, "truststore.p12"),
                None,
            )?,
            digest: format!("{:x}", hasher.finalize()),
        })
    }
}

/// The labels of the gossip router's objects of `cluster`.
pub fn router_labels(cluster: &str) -> BTreeMap<String, String> {
    identity::labels(ROUTER_APP_NAME, ROUTER_COMPONENT, cluster)
}

/// The selector of the gossip router's pods of `cluster` (never the server pods').
pub fn router_selector_labels(cluster: &str) -> BTreeMap<String, String> {
    identity::selector_labels(ROUTER_APP_NAME, cluster)
}

/// The sites of `cluster` (named `name` in `namespace`), resolved under `cluster_domain`;
/// `None` when it has none.
pub(super) fn resolve(
    cluster: &Infinispan,
    name: &str,
    namespace: &str,
    cluster_domain: &str,
    tls: Option<&SiteTls>,
) -> Result<Option<Sites>, BuildError> {
    let Some(spec) = cluster.spec.service.sites.as_ref() else {
        return Ok(None);
    };
    let SitesSpec { local, locations } = spec;
    let mut routers = Vec::new();
    // (The cluster domain was checked with the JGroups DNS query's.)
    if local.discovery.launch_gossip_router {
        routers.push(local.router(name, namespace, cluster_domain));
    }
    for location in locations {
        let router = location
            .router(name, namespace, cluster_domain)
            .ok_or_else(|| BuildError::InvalidSites {
                problem: format!(
                    "location {:?}: url {:?} is not infinispan+xsite://host[:port]",
                    location.name,
                    location.url.as_deref().unwrap_or_default()
                ),
            })?;
        if routers.contains(&router) {
            return Err(BuildError::InvalidSites {
                problem: format!(
                    "location {:?}: its gossip router {}:{} is this site's own, or another location's",
                    location.name, router.host, router.port
                ),
            });
        }
        routers.push(router);
    }
    if routers.is_empty() {
        return Err(BuildError::InvalidSites {
            problem: "launchGossipRouter is false and no location gives a gossip router: the pods would have none to join".into(),
        });
    }
    let tls = match (&local.encryption, tls) {
        (None, _) => None,
        (Some(_), Some(tls)) => Some(tls.clone()),
        (Some(_), None) => {
            return Err(BuildError::InvalidSites {
                problem: "local.encryption is set but its stores were not given".into(),
            });
        }
    };
    let heartbeats = &local.discovery.heartbeats;
    Ok(Some(Sites {
        tls,
        local: local.name.clone(),
        remote: locations.iter().map(|l| l.name.clone()).collect(),
        routers,
        max_relay_nodes: local.max_relay_nodes,
        heartbeats: heartbeats
            .enabled
            .then_some((heartbeats.interval, heartbeats.timeout)),
    }))
}

impl Sites {
    /// `host[port],host[port]`, TUNNEL's `gossip_router_hosts`.
    fn router_hosts(&self) -> String {
        self.routers
            .iter()
            .map(|r| format!("{}[{}]", r.host, r.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The two stacks (inside `<jgroups>`): the bridge's TUNNEL and the transport's RELAY2 over
    /// `base`, each line with its indentation level.
    pub(super) fn stacks(&self, base: &str) -> Vec<(usize, String)> {
        let mut tunnel = format!(
            r#"<TUNNEL gossip_router_hosts="{}" bind_addr="${{jgroups.bind.address:SITE_LOCAL}}" port_range="0""#,
            super::config::xml_escape(&self.router_hosts())
        );
        if let Some((interval, timeout)) = self.heartbeats {
            tunnel.push_str(&format!(
                r#" heartbeat_interval="{interval}" heartbeat_timeout="{timeout}""#
            ));
        }
        if let Some(tls) = &self.tls {
            let (keystore, truststore) = (&tls.transport, &tls.trust);
            tunnel.push_str(&format!(
                concat!(
                    r#" tls.enabled="true" tls.protocols="{protocol}""#,
                    r#" tls.keystore_path="{kdir}/{kkey}" tls.keystore_password="${{env.{kenv}}}""#,
                    r#" tls.keystore_type="{ktype}" tls.keystore_alias="{alias}""#,
                    r#" tls.truststore_path="{tdir}/{tkey}" tls.truststore_password="${{env.{tenv}}}""#,
                    r#" tls.truststore_type="{ttype}""#,
                ),
                protocol = tls.protocol,
                kdir = TRANSPORT_STORE_DIR,
                kkey = super::config::xml_escape(&keystore.key),
                kenv = KEYSTORE_PASSWORD_ENV,
                ktype = keystore.store_type,
                alias = super::config::xml_escape(keystore.alias.as_deref().unwrap_or_default()),
                tdir = TRUST_STORE_DIR,
                tkey = super::config::xml_escape(&truststore.key),
                tenv = TRUSTSTORE_PASSWORD_ENV,
                ttype = truststore.store_type,
            ));
        }
        tunnel.push_str(
            r#" reconnect_interval="1000" stack.combine="REPLACE" stack.position="UDP"/>"#,
        );
        let mut lines = vec![
            (
                1,
                format!(r#"<stack name="{XSITE_TUNNEL_STACK}" extends="udp">"#),
            ),
            (2, tunnel),
            // The `udp` stack's failure detection and merges take about 45 s to see a site go
            // and come back through the routers; these take 12.5 s and 7 s (measured on
            // 16.0.7, docs/cross-site.md).
            (
                2,
                r#"<FD_ALL3 timeout="10000" interval="2000" stack.combine="COMBINE"/>"#.to_string(),
            ),
            (
                2,
                r#"<MERGE3 min_interval="2000" max_interval="5000" stack.combine="COMBINE"/>"#
                    .to_string(),
            ),
            (1, "</stack>".to_string()),
            (
                1,
                format!(r#"<stack name="{XSITE_STACK}" extends="{base}">"#),
            ),
            (
                2,
                format!(
                    r#"<relay.RELAY2 xmlns="urn:org:jgroups" site="{}" max_site_masters="{}" can_become_site_master="true"/>"#,
                    super::config::xml_escape(&self.local),
                    self.max_relay_nodes
                ),
            ),
            (
                2,
                format!(r#"<remote-sites default-stack="{XSITE_TUNNEL_STACK}">"#),
            ),
        ];
        for site in std::iter::once(&self.local).chain(&self.remote) {
            lines.push((
                3,
                format!(
                    r#"<remote-site name="{}"/>"#,
                    super::config::xml_escape(site)
                ),
            ));
        }
        lines.push((2, "</remote-sites>".to_string()));
        lines.push((1, "</stack>".to_string()));
        lines
    }
}

/// A keystore (the volume `keystore_volume` at `keystore_dir`) and the truststore, each the
/// one key of its Secret, mounted read-only, and the variables of their passwords: what the
/// server pods and the router both need.
fn mounted_stores(
    keystore: &SiteStore,
    keystore_volume: &str,
    keystore_dir: &str,
    truststore: &SiteStore,
) -> (Vec<Volume>, Vec<VolumeMount>, Vec<EnvVar>) {
    let stores = [
        (
            keystore_volume,
            keystore_dir,
            keystore,
            KEYSTORE_PASSWORD_ENV,
        ),
        (
            TRUST_STORE_VOLUME,
            TRUST_STORE_DIR,
            truststore,
            TRUSTSTORE_PASSWORD_ENV,
        ),
    ];
    let volumes = stores
        .iter()
        .map(|(volume, _, store, _)| secret_volume(volume, store.secret.clone(), &[&store.key]))
        .collect();
    let mounts = stores
        .iter()
        .map(|(volume, dir, _, _)| mount(volume, dir, true))
        .collect();
    let env = stores
        .iter()
        .map(|(_, _, store, variable)| secret_env(variable, &store.secret, STORE_PASSWORD_KEY))
        .collect();
    (volumes, mounts, env)
}

impl Cx<'_> {
    /// With cross-site TLS: the server pods' volumes and mounts of the transport's keystore
    /// and the truststore, and the variables of their passwords.
    pub(super) fn site_tls_pod_parts(&self) -> (Vec<Volume>, Vec<VolumeMount>, Vec<EnvVar>) {
        let Some(tls) = self.sites.as_ref().and_then(|s| s.tls.as_ref()) else {
            return Default::default();
        };
        mounted_stores(
            &tls.transport,
            TRANSPORT_STORE_VOLUME,
            TRANSPORT_STORE_DIR,
            &tls.trust,
        )
    }

    fn sites_spec(&self) -> Option<&SitesSpec> {
        self.cluster.spec.service.sites.as_ref()
    }

    /// Whether this site runs its own gossip router.
    fn launches_router(&self) -> bool {
        self.sites_spec()
            .is_some_and(|s| s.local.discovery.launch_gossip_router)
    }

    fn router_metadata(&self, name: String) -> ObjectMeta {
        let mut metadata = self.metadata(name);
        metadata.labels = Some(router_labels(self.name));
        metadata
    }

    /// The Service `<cluster>-site` in front of the gossip router, of the kind
    /// `spec.service.sites.local.expose` asks for; `None` without a router of this site.
    pub(super) fn site_service(&self) -> Option<Service> {
        if !self.launches_router() {
            return None;
        }
        let expose = &self.sites_spec()?.local.expose;
        let mut metadata = self.router_metadata(site_service_name(self.name));
        if !expose.annotations.is_empty() {
            metadata.annotations = Some(expose.annotations.clone());
        }
        let type_ = match expose.type_ {
            SiteExposeType::ClusterIP => "ClusterIP",
            SiteExposeType::NodePort => "NodePort",
            SiteExposeType::LoadBalancer => "LoadBalancer",
        };
        Some(Service {
            metadata,
            spec: Some(ServiceSpec {
                type_: Some(type_.to_string()),
                selector: Some(router_selector_labels(self.name)),
                ports: Some(vec![ServicePort {
                    name: Some(ROUTER_CONTAINER_NAME.to_string()),
                    port: expose.port.unwrap_or(i32::from(ROUTER_PORT)),
                    target_port: Some(IntOrString::String(ROUTER_CONTAINER_NAME.to_string())),
                    node_port: expose.node_port,
                    protocol: Some("TCP".to_string()),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            status: None,
        })
    }

    /// The gossip router's Deployment `<cluster>-router`: one pod of the server image running
    /// JGroups' GossipRouter (none while the cluster is scaled to 0); `None` without a router
    /// of this site.
    pub(super) fn router_deployment(&self) -> Option<Deployment> {
        if !self.launches_router() {
            return None;
        }
        let discovery = &self.sites_spec()?.local.discovery;
        let mut args = vec![
            // The router's heap is small; no perf data file in /tmp.
            "-XX:MaxRAMPercentage=50".to_string(),
            "-XX:-UsePerfData".to_string(),
            "-cp".to_string(),
            SERVER_LIB.to_string(),
            "org.jgroups.stack.GossipRouter".to_string(),
            "-port".to_string(),
            ROUTER_PORT.to_string(),
            "-bind_addr".to_string(),
            "0.0.0.0".to_string(),
            "-dump_msgs".to_string(),
            "registration".to_string(),
            "-suspect".to_string(),
            discovery.suspect_events.to_string(),
        ];
        if discovery.heartbeats.enabled {
            args.extend([
                "-expiry".to_string(),
                discovery.heartbeats.timeout.to_string(),
                "-reaper_interval".to_string(),
                discovery.heartbeats.interval.to_string(),
            ]);
        }
        let tls = self.sites.as_ref().and_then(|sites| sites.tls.as_ref());
        let mut ports = vec![container_port(ROUTER_CONTAINER_NAME, ROUTER_PORT)];
        let (mut volumes, mut mounts, mut env) = Default::default();
        let mut probed = ROUTER_CONTAINER_NAME;
        if let Some(tls) = tls {
            let (keystore, truststore) = (&tls.router, &tls.trust);
            // The passwords reach the arguments through the kubelet's `$(…)` expansion: the
            // pod spec holds only the Secrets' names.
            let keystore_path = format!("{ROUTER_STORE_DIR}/{}", keystore.key);
            let truststore_path = format!("{TRUST_STORE_DIR}/{}", truststore.key);
            let keystore_password = format!("$({KEYSTORE_PASSWORD_ENV})");
            let truststore_password = format!("$({TRUSTSTORE_PASSWORD_ENV})");
            let diag_port = ROUTER_DIAG_PORT.to_string();
            args.extend(
                [
                    "-nio",
                    "false",
                    "-tls_protocol",
                    tls.protocol,
                    "-tls_keystore_path",
                    &keystore_path,
                    "-tls_keystore_password",
                    &keystore_password,
                    "-tls_keystore_type",
                    &keystore.store_type,
                    "-tls_keystore_alias",
                    keystore.alias.as_deref().unwrap_or_default(),
                    "-tls_client_auth",
                    "need",
                    "-tls_truststore_path",
                    &truststore_path,
                    "-tls_truststore_password",
                    &truststore_password,
                    "-tls_truststore_type",
                    &truststore.store_type,
                    "-diag_enabled",
                    "true",
                    "-diag_enable_udp",
                    "false",
                    "-diag_enable_tcp",
                    "true",
                    "-diag_port",
                    &diag_port,
                    "-diag_port_range",
                    "0",
                ]
                .map(str::to_string),
            );
            ports.push(container_port(ROUTER_DIAG_PORT_NAME, ROUTER_DIAG_PORT));
            probed = ROUTER_DIAG_PORT_NAME;
            (volumes, mounts, env) =
                mounted_stores(keystore, ROUTER_STORE_VOLUME, ROUTER_STORE_DIR, truststore);
        }
        let tcp_probe = |period: i32, failures: i32| Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::String(probed.to_string()),
                host: None,
            }),
            period_seconds: Some(period),
            failure_threshold: Some(failures),
            timeout_seconds: Some(1),
            ..Probe::default()
        };
        let memory = || ("memory".to_string(), Quantity("256Mi".to_string()));
        let container = Container {
            name: ROUTER_CONTAINER_NAME.to_string(),
            image: Some(self.image.image.clone()),
            command: Some(vec!["java".to_string()]),
            args: Some(args),
            ports: Some(ports),
            env: non_empty(env),
            volume_mounts: non_empty(mounts),
            startup_probe: Some(tcp_probe(1, 60)),
            readiness_probe: Some(tcp_probe(5, 2)),
            liveness_probe: Some(tcp_probe(10, 6)),
            resources: Some(ResourceRequirements {
                requests: Some(BTreeMap::from([
                    ("cpu".to_string(), Quantity("100m".to_string())),
                    memory(),
                ])),
                limits: Some(BTreeMap::from([memory()])),
                claims: None,
            }),
            security_context: Some(restricted_container(false)),
            termination_message_policy: Some("FallbackToLogsOnError".to_string()),
            ..Container::default()
        };
        let labels = router_labels(self.name);
        let selector = router_selector_labels(self.name);
        Some(Deployment {
            metadata: self.router_metadata(router_name(self.name)),
            spec: DeploymentSpec {
                replicas: Some(if self.cluster.spec.replicas > 0 { 1 } else { 0 }),
                selector: LabelSelector {
                    match_labels: Some(selector),
                    match_expressions: None,
                },
                // One router at a time: a second one would split the sites' registrations.
                strategy: Some(DeploymentStrategy {
                    type_: Some("Recreate".to_string()),
                    rolling_update: None,
                }),
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(labels),
                        // New stores restart the router.
                        annotations: tls.map(|tls| {
                            BTreeMap::from([(
                                super::CONFIG_HASH_ANNOTATION.to_string(),
                                tls.digest.clone(),
                            )])
                        }),
                        ..ObjectMeta::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![container],
                        automount_service_account_token: Some(false),
                        enable_service_links: Some(false),
                        security_context: Some(restricted_pod(None)),
                        image_pull_secrets: image_pull_secrets(&self.settings.image_pull_secrets),
                        volumes: non_empty(volumes),
                        ..PodSpec::default()
                    }),
                },
                ..DeploymentSpec::default()
            },
            status: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::Referenced;
    use super::super::fixtures::*;
    use super::*;
    use common_crds::sites::{LocalSite, SiteDiscovery, SiteExpose, SiteLocation};

    fn location(name: &str, namespace: Option<&str>, url: Option<&str>) -> SiteLocation {
        SiteLocation {
            name: name.into(),
            url: url.map(str::to_string),
            namespace: namespace.map(str::to_string),
            cluster_name: Some(name.to_lowercase()),
        }
    }

    pub(crate) fn with_sites(launch: bool, locations: Vec<SiteLocation>) -> Infinispan {
        let mut cr = cluster("lon", "site-a");
        cr.spec.service.sites = Some(SitesSpec {
            local: LocalSite {
                name: "LON".into(),
                expose: SiteExpose::default(),
                max_relay_nodes: 2,
                discovery: SiteDiscovery {
                    launch_gossip_router: launch,
                    ..SiteDiscovery::default()
                },
                encryption: None,
            },
            locations,
        });
        cr
    }

    fn resolved(cr: &Infinispan) -> Result<Option<Sites>, BuildError> {
        resolve(cr, "lon", "site-a", "cluster.local", None)
    }

    #[test]
    fn the_pods_join_their_own_router_and_each_locations() {
        let cr = with_sites(true, vec![location("NYC", Some("site-b"), None)]);
        let sites = resolved(&cr).expect("valid").expect("sites");
        assert_eq!(sites.local, "LON");
        assert_eq!(sites.remote, ["NYC"]);
        assert_eq!(
            sites.router_hosts(),
            "lon-site.site-a.svc.cluster.local[7900],nyc-site.site-b.svc.cluster.local[7900]"
        );
        assert_eq!(sites.heartbeats, Some((10_000, 30_000)));
        // Without a router of its own: the locations' only.
        let cr = with_sites(
            false,
            vec![location(
                "NYC",
                None,
                Some("infinispan+xsite://nyc.example.com"),
            )],
        );
        let sites = resolved(&cr).expect("valid").expect("sites");
        assert_eq!(sites.router_hosts(), "nyc.example.com[7900]");
        assert!(
            resolved(&cluster("lon", "site-a"))
                .expect("valid")
                .is_none()
        );
    }

    #[test]
    fn a_site_without_any_router_or_with_its_own_as_a_location_is_refused() {
        let error = resolved(&with_sites(false, vec![])).expect_err("no router");
        assert!(error.to_string().contains("launchGossipRouter"), "{error}");
        assert_eq!(
            error.reason(),
            common_crds::conditions::ProblemReason::InvalidSites
        );
        let mut own = location("NYC", Some("site-a"), None);
        own.cluster_name = Some("lon".into());
        let error = resolved(&with_sites(true, vec![own])).expect_err("own router");
        assert!(error.to_string().contains("lon-site.site-a"), "{error}");
    }

    #[test]
    fn the_stacks_relay_over_the_clusters_own_stack_and_tunnel_to_the_routers() {
        let cr = with_sites(true, vec![location("NYC", Some("site-b"), None)]);
        let sites = resolved(&cr).expect("valid").expect("sites");
        let xml: Vec<String> = sites
            .stacks("kubernetes")
            .into_iter()
            .map(|l| l.1)
            .collect();
        let xml = xml.join("\n");
        assert!(
            xml.contains(r#"<stack name="xsite-tunnel" extends="udp">"#),
            "{xml}"
        );
        assert!(
            xml.contains(r#"gossip_router_hosts="lon-site.site-a.svc.cluster.local[7900],nyc-site.site-b.svc.cluster.local[7900]""#),
            "{xml}"
        );
        assert!(
            xml.contains(r#"heartbeat_interval="10000" heartbeat_timeout="30000""#),
            "{xml}"
        );
        assert!(
            xml.contains(r#"<stack name="xsite" extends="kubernetes">"#),
            "{xml}"
        );
        assert!(
            xml.contains(
                r#"<relay.RELAY2 xmlns="urn:org:jgroups" site="LON" max_site_masters="2""#
            ),
            "{xml}"
        );
        assert!(
            xml.contains("<remote-site name=\"LON\"/>\n<remote-site name=\"NYC\"/>"),
            "{xml}"
        );
    }

    fn store_secret(name: &str, key: &str, with_password: bool) -> Secret {
        let mut data = std::collections::BTreeMap::from([(
            key.to_string(),
            k8s_openapi::ByteString(b"store".to_vec()),
        )]);
        if with_password {
            data.insert(
                "password".into(),
                k8s_openapi::ByteString(b"secret".to_vec()),
            );
        }
        Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            data: Some(data),
            ..Secret::default()
        }
    }

    fn encryption() -> SiteEncryption {
        serde_json::from_value(serde_json::json!({
            "transportKeyStore": {"secretName": "xsite-transport"},
            "routerKeyStore": {"secretName": "xsite-router", "alias": "gr", "filename": "router.p12"},
            "trustStore": {"secretName": "xsite-trust"},
        }))
        .expect("encryption")
    }

    fn site_tls() -> SiteTls {
        SiteTls::from_secrets(
            &encryption(),
            &store_secret("xsite-transport", "keystore.p12", true),
            &store_secret("xsite-router", "router.p12", true),
            &store_secret("xsite-trust", "truststore.p12", true),
        )
        .expect("valid stores")
    }

    #[test]
    fn a_store_secret_without_its_store_or_password_is_refused() {
        let error = SiteTls::from_secrets(
            &encryption(),
            &store_secret("xsite-transport", "keystore.p12", false),
            &store_secret("xsite-router", "router.p12", true),
            &store_secret("xsite-trust", "truststore.p12", true),
        )
        .expect_err("no password");
        assert!(
            error
                .to_string()
                .contains("transportKeyStore: the Secret \"xsite-transport\" has no key password"),
            "{error}"
        );
        let error = SiteTls::from_secrets(
            &encryption(),
            &store_secret("xsite-transport", "keystore.p12", true),
            &store_secret("xsite-router", "keystore.p12", true),
            &store_secret("xsite-trust", "truststore.p12", true),
        )
        .expect_err("no router.p12");
        assert!(
            error.to_string().contains("has no key router.p12"),
            "{error}"
        );
        // Asked for and not read: refused, never plain text.
        let mut cr = with_sites(true, vec![location("NYC", Some("site-b"), None)]);
        cr.spec
            .service
            .sites
            .as_mut()
            .expect("sites")
            .local
            .encryption = Some(encryption());
        let error = resolved(&cr).expect_err("stores not given");
        assert!(error.to_string().contains("encryption"), "{error}");
    }

    #[test]
    fn with_tls_the_pods_and_the_router_present_their_stores_and_the_router_is_probed_on_its_diagnostics_port()
     {
        let mut cr = with_sites(true, vec![location("NYC", Some("site-b"), None)]);
        cr.spec
            .service
            .sites
            .as_mut()
            .expect("sites")
            .local
            .encryption = Some(encryption());
        let with_stores = Referenced {
            site_tls: Some(site_tls()),
            ..referenced()
        };
        let objects = built(&cr, &settings(), &with_stores);
        let xml = &objects.config_map.data.clone().expect("data")[super::super::SERVER_CONFIG_KEY];
        for attribute in [
            r#"tls.enabled="true""#,
            r#"tls.protocols="TLSv1.3""#,
            r#"tls.keystore_path="/etc/infinispan/xsite-tls/keystore/keystore.p12""#,
            r#"tls.keystore_password="${env.XSITE_KEYSTORE_PASSWORD}""#,
            r#"tls.keystore_alias="transport""#,
            r#"tls.truststore_path="/etc/infinispan/xsite-tls/truststore/truststore.p12""#,
            r#"tls.truststore_type="PKCS12""#,
        ] {
            assert!(xml.contains(attribute), "{attribute} in {xml}");
        }
        // The server pods: both stores mounted, both passwords from their Secrets.
        let pod = objects
            .stateful_set
            .spec
            .template
            .spec
            .clone()
            .expect("pod");
        let volumes = serde_json::to_value(&pod.volumes)
            .expect("json")
            .to_string();
        assert!(
            volumes.contains("xsite-transport") && volumes.contains("xsite-trust"),
            "{volumes}"
        );
        let env = serde_json::to_value(&pod.containers[0].env)
            .expect("json")
            .to_string();
        assert!(
            env.contains("XSITE_KEYSTORE_PASSWORD") && env.contains("xsite-transport"),
            "{env}"
        );
        assert!(
            !env.contains("secret\""),
            "a password value in the pod spec: {env}"
        );
        // The router: TLS arguments with the passwords expanded by the kubelet, its stores,
        // probes on the diagnostics port.
        let router = objects.router.expect("router");
        let pod = router.spec.template.spec.clone().expect("pod");
        let container = &pod.containers[0];
        let args = container.args.clone().unwrap_or_default();
        for pair in [
            ["-tls_client_auth", "need"],
            ["-tls_keystore_alias", "gr"],
            [
                "-tls_keystore_path",
                "/etc/infinispan/xsite-tls/router-keystore/router.p12",
            ],
            ["-tls_keystore_password", "$(XSITE_KEYSTORE_PASSWORD)"],
            ["-tls_protocol", "TLSv1.3"],
            ["-nio", "false"],
        ] {
            assert!(args.windows(2).any(|w| w == pair), "{pair:?} in {args:?}");
        }
        let probe = container
            .readiness_probe
            .clone()
            .and_then(|p| p.tcp_socket)
            .expect("tcp");
        assert_eq!(probe.port, IntOrString::String("router-diag".into()));
        let env = serde_json::to_value(&container.env)
            .expect("json")
            .to_string();
        assert!(
            env.contains("xsite-router") && env.contains("xsite-trust"),
            "{env}"
        );
        // New stores restart the router and roll the servers.
        let annotations = router.spec.template.metadata.and_then(|m| m.annotations);
        assert_eq!(
            annotations.and_then(|a| a.get(super::super::CONFIG_HASH_ANNOTATION).cloned()),
            Some(site_tls().digest)
        );
        let plain = built(
            &with_sites(true, vec![location("NYC", Some("site-b"), None)]),
            &settings(),
            &referenced(),
        );
        let hash = |o: &super::super::Objects| {
            o.stateful_set
                .spec
                .template
                .metadata
                .clone()
                .and_then(|m| m.annotations)
        };
        assert_ne!(hash(&plain), hash(&built(&cr, &settings(), &with_stores)));
    }

    #[test]
    fn snapshot_of_a_cross_site_cluster() {
        let cr = with_sites(
            true,
            vec![
                location("NYC", Some("site-b"), None),
                location(
                    "SFO",
                    None,
                    Some("infinispan+xsite://sfo.example.com:31900"),
                ),
            ],
        );
        let objects = built(&cr, &settings(), &referenced());
        crate::build::snapshot::assert_snapshot(
            "server-cross-site.yaml",
            &super::super::tests::yaml(&objects),
        );
    }

    #[test]
    fn the_router_runs_the_server_image_and_its_service_selects_only_it() {
        let cr = with_sites(true, vec![location("NYC", Some("site-b"), None)]);
        let objects = built(&cr, &settings(), &referenced());
        let router = objects.router.expect("a router");
        assert_eq!(router.metadata.name.as_deref(), Some("lon-router"));
        let spec = router.spec;
        assert_eq!(spec.replicas, Some(1));
        let pod = spec.template.spec.expect("pod");
        let container = &pod.containers[0];
        assert_eq!(
            container.image,
            objects
                .stateful_set
                .spec
                .template
                .spec
                .as_ref()
                .and_then(|p| p.containers[0].image.clone())
        );
        let args = container.args.clone().unwrap_or_default();
        assert!(args.windows(2).any(|w| w == ["-port", "7900"]), "{args:?}");
        assert!(
            args.windows(2).any(|w| w == ["-expiry", "30000"]),
            "{args:?}"
        );
        assert!(args.contains(&"org.jgroups.stack.GossipRouter".to_string()));
        let service = objects.site_service.expect("a site Service");
        assert_eq!(service.metadata.name.as_deref(), Some("lon-site"));
        let service_spec = service.spec.expect("spec");
        assert_eq!(service_spec.type_.as_deref(), Some("ClusterIP"));
        let selector = service_spec.selector.expect("selector");
        assert_eq!(selector, router_selector_labels("lon"));
        assert_ne!(selector, super::super::selector_labels("lon"));
        // The server pods keep their own selector; the transport relays.
        let config = objects.config_map.data.expect("data");
        let xml = &config[super::super::SERVER_CONFIG_KEY];
        assert!(
            xml.contains(r#"<transport cluster="lon" stack="xsite""#),
            "{xml}"
        );

        // Without a router of its own: neither object; a stopped cluster: no router pod.
        let mut no_router = with_sites(
            false,
            vec![location(
                "NYC",
                None,
                Some("infinispan+xsite://nyc.example.com"),
            )],
        );
        let objects = built(&no_router, &settings(), &referenced());
        assert!(objects.router.is_none() && objects.site_service.is_none());
        no_router
            .spec
            .service
            .sites
            .as_mut()
            .expect("sites")
            .local
            .discovery
            .launch_gossip_router = true;
        no_router.spec.replicas = 0;
        let objects = built(&no_router, &settings(), &referenced());
        assert_eq!(objects.router.and_then(|r| r.spec.replicas), Some(0));
    }
}
