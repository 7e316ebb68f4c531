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
    ROUTER_PORT, RouterAddress, SiteExposeType, SitesSpec, router_name, site_service_name,
};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Container, PodSpec, PodTemplateSpec, Probe, ResourceRequirements, Service, ServicePort,
    ServiceSpec, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::inputs::{BuildError, Cx};
use crate::build::identity;
use crate::build::pod::{container_port, image_pull_secrets, restricted_container, restricted_pod};

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
) -> Result<Option<Sites>, BuildError> {
    let Some(spec) = cluster.spec.service.sites.as_ref() else {
        return Ok(None);
    };
    let SitesSpec { local, locations } = spec;
    let mut routers = Vec::new();
    if local.discovery.launch_gossip_router {
        let own = identity::service_host(&site_service_name(name), namespace, cluster_domain)
            .ok_or_else(|| BuildError::InvalidClusterDomain {
                domain: cluster_domain.to_string(),
            })?;
        // Through its Service, on the Service's port.
        routers.push(RouterAddress {
            host: own,
            port: local
                .expose
                .port
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(ROUTER_PORT),
        });
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
    let heartbeats = &local.discovery.heartbeats;
    Ok(Some(Sites {
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

impl Cx<'_> {
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
        let tcp_probe = |period: i32, failures: i32| Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::String(ROUTER_CONTAINER_NAME.to_string()),
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
            ports: Some(vec![container_port(ROUTER_CONTAINER_NAME, ROUTER_PORT)]),
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
                        ..ObjectMeta::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![container],
                        automount_service_account_token: Some(false),
                        enable_service_links: Some(false),
                        security_context: Some(restricted_pod(None)),
                        image_pull_secrets: image_pull_secrets(&self.settings.image_pull_secrets),
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
            },
            locations,
        });
        cr
    }

    fn resolved(cr: &Infinispan) -> Result<Option<Sites>, BuildError> {
        resolve(cr, "lon", "site-a", "cluster.local")
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
