//! `spec.service.sites` of an `Infinispan` CR: cross-site replication, this cluster as one site
//! of several (infinispan-operator's field names, so manifests carry over; `docs/cross-site.md`).
//!
//! Each site runs a JGroups gossip router (a Deployment `<cluster>-router` and its Service
//! `<cluster>-site`); the server pods join their own router and every remote site's through a
//! TUNNEL, and RELAY2 carries the backups between the sites.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The port of a gossip router (infinispan-operator's).
pub const ROUTER_PORT: u16 = 7900;

/// A site name: what RELAY2 and the caches' `backups` call a site.
const SITE_NAME_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_.-]*$";

/// This cluster is one site of a cross-site deployment.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
#[x_kube(
    validation = Rule::new("!has(self.locations) || self.locations.all(l, l.name != self.local.name)")
        .message("a location must not have the local site's name (spec.service.sites.local.name)")
)]
pub struct SitesSpec {
    /// This site: its name, how its gossip router is reached, its relay nodes.
    pub local: LocalSite,

    /// The remote sites this site backs up to and receives backups from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(
        validation = Rule::new("self.all(a, self.exists_one(b, b.name == a.name))")
            .message("two locations have the same name")
    )]
    pub locations: Vec<SiteLocation>,
}

/// The local site.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct LocalSite {
    /// The site's name (e.g. LON), as the caches' `backups` of the other sites name it.
    #[schemars(length(min = 1, max = 64), regex(pattern = SITE_NAME_PATTERN))]
    pub name: String,

    /// How the site's gossip router is reached from the other sites: the Service
    /// `<cluster>-site`. Default: ClusterIP (sites in one Kubernetes cluster).
    #[serde(default)]
    pub expose: SiteExpose,

    /// How many server pods of this site relay to the other sites (RELAY2's site masters).
    #[serde(default = "default_max_relay_nodes")]
    #[schemars(range(min = 1, max = 128))]
    pub max_relay_nodes: i32,

    /// The gossip router of this site.
    #[serde(default)]
    pub discovery: SiteDiscovery,

    /// TLS between the sites: the server pods and the gossip routers present certificates to
    /// each other (mutual TLS), from the user's PKCS#12 stores. Every site of a deployment
    /// must use it, or none. Absent: plain text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<SiteEncryption>,
}

/// TLS of the cross-site transport (infinispan-operator's field). Each Secret holds the store
/// (key `filename`), its password (key `password`) and optionally its type (key `type`,
/// default PKCS12); each must allow the cluster (annotation `infinispan.org/allow-clusters`).
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct SiteEncryption {
    /// TLSv1.3 (default) or TLSv1.2.
    #[serde(default)]
    pub protocol: TlsProtocol,
    /// The certificate the server pods present to the gossip routers.
    pub transport_key_store: SiteKeyStore,
    /// The certificate this site's gossip router presents.
    pub router_key_store: SiteKeyStore,
    /// The CAs that sign the other sites' certificates (and this site's: the router checks
    /// the pods' too). Required here (infinispan-operator fell back to the JVM's CAs).
    pub trust_store: SiteTrustStore,
}

/// A TLS protocol version.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TlsProtocol {
    #[default]
    #[serde(rename = "TLSv1.3")]
    TlsV13,
    #[serde(rename = "TLSv1.2")]
    TlsV12,
}

impl TlsProtocol {
    /// As JSSE names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TlsV13 => "TLSv1.3",
            Self::TlsV12 => "TLSv1.2",
        }
    }
}

/// A keystore in a Secret.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct SiteKeyStore {
    /// The Secret (same namespace).
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
    /// The alias of the key entry; absent: `transport` for the transport's keystore, `router`
    /// for the router's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// The key of the store in the Secret; absent: `keystore.p12`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[-._a-zA-Z0-9]+$"))]
    pub filename: Option<String>,
}

/// A truststore in a Secret.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct SiteTrustStore {
    /// The Secret (same namespace).
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
    /// The key of the store in the Secret; absent: `truststore.p12`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[-._a-zA-Z0-9]+$"))]
    pub filename: Option<String>,
}

fn default_max_relay_nodes() -> i32 {
    1
}

/// The Service `<cluster>-site` in front of the site's gossip router.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
#[x_kube(
    validation = Rule::new("self.type == 'NodePort' || !has(self.nodePort)")
        .message("spec.service.sites.local.expose.nodePort is only allowed when type is NodePort")
)]
pub struct SiteExpose {
    /// ClusterIP (default), NodePort or LoadBalancer.
    #[serde(default, rename = "type")]
    pub type_: SiteExposeType,

    /// The node port of type NodePort (30000-32767); absent means one is allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30000, max = 32767))]
    pub node_port: Option<i32>,

    /// The Service's port; absent means 7900. The router listens on 7900.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,

    /// Annotations of the Service (e.g. a load balancer's settings).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Kind of Service in front of the gossip router.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SiteExposeType {
    /// Reachable inside the Kubernetes cluster (sites in one cluster, or joined networks).
    #[default]
    ClusterIP,
    /// On a port of every node.
    NodePort,
    /// Through the platform's load balancer.
    LoadBalancer,
}

/// The site's gossip router.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct SiteDiscovery {
    /// gossiprouter, the only kind (infinispan-operator's field).
    #[serde(default, rename = "type")]
    pub type_: SiteDiscoveryType,

    /// Whether this site runs a gossip router (Deployment `<cluster>-router`, Service
    /// `<cluster>-site`); false: the pods use only the remote sites' routers, one of which
    /// must run one.
    #[serde(default = "crate::infinispan::default_true")]
    pub launch_gossip_router: bool,

    /// Whether the router tells the pods when a connection to another member closes
    /// (JGroups suspect events: a site that went away is noticed sooner).
    #[serde(default)]
    pub suspect_events: bool,

    /// Heartbeats between the pods and the routers, which keep idle connections open and
    /// find dead ones.
    #[serde(default)]
    pub heartbeats: RouterHeartbeats,
}

impl Default for SiteDiscovery {
    fn default() -> Self {
        Self {
            type_: SiteDiscoveryType::default(),
            launch_gossip_router: true,
            suspect_events: false,
            heartbeats: RouterHeartbeats::default(),
        }
    }
}

/// The one kind of site discovery.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SiteDiscoveryType {
    /// A JGroups gossip router per site.
    #[default]
    #[serde(rename = "gossiprouter")]
    GossipRouter,
}

/// Heartbeats to the gossip routers (infinispan-operator's defaults).
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
#[x_kube(
    validation = Rule::new("self.timeout > self.interval")
        .message("spec.service.sites.local.discovery.heartbeats.timeout must be longer than its interval")
)]
pub struct RouterHeartbeats {
    /// Whether heartbeats are sent.
    #[serde(default = "crate::infinispan::default_true")]
    pub enabled: bool,
    /// Milliseconds between two heartbeats.
    #[serde(default = "default_heartbeat_interval")]
    #[schemars(range(min = 1000))]
    pub interval: i64,
    /// Milliseconds without a message or heartbeat after which a connection to a router is
    /// closed.
    #[serde(default = "default_heartbeat_timeout")]
    #[schemars(range(min = 2000))]
    pub timeout: i64,
}

fn default_heartbeat_interval() -> i64 {
    10_000
}

fn default_heartbeat_timeout() -> i64 {
    30_000
}

impl Default for RouterHeartbeats {
    fn default() -> Self {
        Self {
            enabled: true,
            interval: default_heartbeat_interval(),
            timeout: default_heartbeat_timeout(),
        }
    }
}

/// A remote site: where its gossip router is.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
#[x_kube(
    validation = Rule::new("has(self.url) || has(self.namespace) || has(self.clusterName)")
        .message("a location needs url (infinispan+xsite://host:port), or the namespace and/or clusterName of its Infinispan CR in this Kubernetes cluster"),
    validation = Rule::new("!has(self.url) || (!has(self.namespace) && !has(self.clusterName))")
        .message("a location has either url or namespace/clusterName, not both")
)]
pub struct SiteLocation {
    /// The remote site's name (its spec.service.sites.local.name).
    #[schemars(length(min = 1, max = 64), regex(pattern = SITE_NAME_PATTERN))]
    pub name: String,

    /// Where the remote site's gossip router is reached from here:
    /// `infinispan+xsite://host[:port]` (port 7900 by default), e.g. the address of its
    /// `<cluster>-site` Service exposed as NodePort or LoadBalancer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^infinispan\+xsite://(([a-z0-9]|[a-z0-9][a-z0-9-]*[a-z0-9])\.)*([a-z0-9]|[a-z0-9][a-z0-9-]*[a-z0-9])(:[0-9]{1,5})?$"
    ))]
    pub url: Option<String>,

    /// The remote site's Infinispan CR is in this Kubernetes cluster, in this namespace
    /// (default: this CR's): its router is its `<clusterName>-site` Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,

    /// The name of the remote site's Infinispan CR in this Kubernetes cluster (default: this
    /// CR's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: Option<String>,
}

/// Where a location's gossip router is, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouterAddress {
    pub host: String,
    pub port: u16,
}

impl SiteLocation {
    /// The router's host and port: the URL's, or the `<clusterName>-site` Service of the
    /// remote CR (`own_name`, `own_namespace` when the location does not say) under
    /// `cluster_domain`. `None` for a URL the schema would refuse.
    pub fn router(
        &self,
        own_name: &str,
        own_namespace: &str,
        cluster_domain: &str,
    ) -> Option<RouterAddress> {
        if let Some(url) = &self.url {
            let rest = url.strip_prefix("infinispan+xsite://")?;
            let (host, port) = match rest.rsplit_once(':') {
                Some((host, port)) => (host, port.parse().ok()?),
                None => (rest, ROUTER_PORT),
            };
            return (!host.is_empty()).then(|| RouterAddress {
                host: host.to_string(),
                port,
            });
        }
        let cluster = self.cluster_name.as_deref().unwrap_or(own_name);
        let namespace = self.namespace.as_deref().unwrap_or(own_namespace);
        let domain = cluster_domain.strip_suffix('.').unwrap_or(cluster_domain);
        Some(RouterAddress {
            host: format!("{}.{namespace}.svc.{domain}", site_service_name(cluster)),
            port: ROUTER_PORT,
        })
    }
}

impl LocalSite {
    /// This site's own router, as its pods reach it: its Service `<cluster>-site` in
    /// `namespace` under `cluster_domain`, on the Service's port.
    pub fn router(&self, cluster: &str, namespace: &str, cluster_domain: &str) -> RouterAddress {
        let domain = cluster_domain.strip_suffix('.').unwrap_or(cluster_domain);
        RouterAddress {
            host: format!("{}.{namespace}.svc.{domain}", site_service_name(cluster)),
            port: self
                .expose
                .port
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(ROUTER_PORT),
        }
    }
}

/// Name of the Service in front of the gossip router of `cluster`.
pub fn site_service_name(cluster: &str) -> String {
    format!("{cluster}-site")
}

/// Name of the gossip router's Deployment of `cluster`.
pub fn router_name(cluster: &str) -> String {
    format!("{cluster}-router")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location(json: serde_json::Value) -> SiteLocation {
        serde_json::from_value(json).expect("a location")
    }

    #[test]
    fn a_location_resolves_to_its_url_or_to_the_site_service_of_its_cr() {
        let resolve = |json| location(json).router("lon", "team-a", "cluster.local.");
        assert_eq!(
            resolve(
                serde_json::json!({"name": "NYC", "url": "infinispan+xsite://nyc.example.com:31900"})
            ),
            Some(RouterAddress {
                host: "nyc.example.com".into(),
                port: 31900
            })
        );
        assert_eq!(
            resolve(serde_json::json!({"name": "NYC", "url": "infinispan+xsite://10.0.0.7"})),
            Some(RouterAddress {
                host: "10.0.0.7".into(),
                port: ROUTER_PORT
            })
        );
        assert_eq!(
            resolve(
                serde_json::json!({"name": "NYC", "namespace": "team-b", "clusterName": "nyc"})
            ),
            Some(RouterAddress {
                host: "nyc-site.team-b.svc.cluster.local".into(),
                port: ROUTER_PORT
            })
        );
        // The CR's own name or namespace where the location does not say.
        assert_eq!(
            resolve(serde_json::json!({"name": "NYC", "namespace": "team-b"})).map(|r| r.host),
            Some("lon-site.team-b.svc.cluster.local".into())
        );
        assert_eq!(
            resolve(serde_json::json!({"name": "NYC", "clusterName": "nyc"})).map(|r| r.host),
            Some("nyc-site.team-a.svc.cluster.local".into())
        );
        assert_eq!(
            resolve(serde_json::json!({"name": "NYC", "url": "http://nyc:7900"})),
            None
        );
        assert_eq!(
            resolve(serde_json::json!({"name": "NYC", "url": "infinispan+xsite://nyc:x"})),
            None
        );
    }

    #[test]
    fn defaults_are_infinispan_operators() {
        let sites: SitesSpec = serde_json::from_value(serde_json::json!({
            "local": {"name": "LON"}
        }))
        .expect("sites");
        assert_eq!(sites.local.max_relay_nodes, 1);
        assert_eq!(sites.local.expose.type_, SiteExposeType::ClusterIP);
        assert!(sites.local.discovery.launch_gossip_router);
        assert!(!sites.local.discovery.suspect_events);
        assert_eq!(
            sites.local.discovery.heartbeats,
            RouterHeartbeats::default()
        );
        assert_eq!(sites.local.discovery.heartbeats.interval, 10_000);
        assert_eq!(sites.local.discovery.heartbeats.timeout, 30_000);
        // infinispan-operator's manifest form.
        let theirs: SitesSpec = serde_json::from_value(serde_json::json!({
            "local": {"name": "LON", "expose": {"type": "LoadBalancer", "port": 65535},
                      "maxRelayNodes": 2, "discovery": {"type": "gossiprouter",
                      "launchGossipRouter": false}},
            "locations": [{"name": "NYC", "url": "infinispan+xsite://nyc.example.com:7900"}]
        }))
        .expect("their manifest");
        assert_eq!(theirs.local.expose.port, Some(65535));
        assert!(!theirs.local.discovery.launch_gossip_router);
    }
}
