//! The `CrossSiteViewFormed` condition of a cluster with `spec.service.sites`: the sites its
//! servers see in the bridge (`GET /rest/v2/container`, `sites_view`) against the sites the CR
//! names, looked at every [`SITES_POLL`] while the CR has sites. A site missing from the view
//! is explained: its gossip router's address and, for a router in this Kubernetes cluster,
//! whether the operator can open a connection to it (unreachable router, or a remote cluster
//! that calls itself by another name). Routers given by URL are not probed: a CR must not make
//! the operator connect wherever it says.

use std::time::Duration;

use common_crds::Infinispan;
use common_crds::conditions::ConditionStatus;
use kube::ResourceExt;

use super::Context;

/// How often the sites view of a cluster with sites is read again.
pub const SITES_POLL: Duration = Duration::from_secs(15);
/// How long the operator waits for a gossip router to accept a connection.
const ROUTER_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What was observed of a cluster's sites.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SitesView {
    /// The local site, then the locations, as the CR names them.
    pub expected: Vec<String>,
    /// The sites the servers see, or why that is not known.
    pub seen: Result<Vec<String>, String>,
    /// For each expected site missing from the view (the local one: its own router), its
    /// router's address and whether it accepted a connection (`Err`: why not).
    pub routers: Vec<RouterProbe>,
}

/// Whether a site's gossip router accepted a connection from the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouterProbe {
    pub site: String,
    pub address: String,
    /// `None`: not probed (a location given by URL, outside this Kubernetes cluster).
    pub reachable: Option<Result<(), String>>,
}

/// The condition's status, reason and message (pure).
pub fn condition(view: &SitesView) -> (ConditionStatus, &'static str, String) {
    let expected = view.expected.join(", ");
    let seen = match &view.seen {
        Ok(seen) => seen,
        Err(why) => {
            return (
                ConditionStatus::False,
                "SitesViewUnknown",
                format!("the sites view ({expected} expected) is not known yet: {why}"),
            );
        }
    };
    let missing: Vec<&String> = view.expected.iter().filter(|s| !seen.contains(s)).collect();
    let unexpected: Vec<&String> = seen.iter().filter(|s| !view.expected.contains(s)).collect();
    if missing.is_empty() {
        let mut message = format!("every site is in the view: {}", seen.join(", "));
        if !unexpected.is_empty() {
            message.push_str(&format!(
                " ({} joined too, though no location names it)",
                join(&unexpected)
            ));
        }
        return (ConditionStatus::True, "CrossSiteViewFormed", message);
    }
    let mut message = format!(
        "the servers see the sites [{}]; missing: {}",
        seen.join(", "),
        join(&missing)
    );
    for probe in &view.routers {
        match &probe.reachable {
            None => message.push_str(&format!(
                ". {}: its gossip router is {} (a location outside this Kubernetes cluster: check that it runs and that this site's pods reach it)",
                probe.site, probe.address
            )),
            Some(Ok(())) => message.push_str(&format!(
                ". {}: its gossip router {} accepts connections: the site's servers have not joined it (not running, or their local site name is not {:?})",
                probe.site, probe.address, probe.site
            )),
            Some(Err(why)) => message.push_str(&format!(
                ". {}: its gossip router {} is unreachable from the operator ({why})",
                probe.site, probe.address
            )),
        }
    }
    if !unexpected.is_empty() {
        message.push_str(&format!(
            ". {} joined the view but no location names it: a remote site whose spec.service.sites.local.name differs from its location's name here?",
            join(&unexpected)
        ));
    }
    (ConditionStatus::False, "SitesMissing", message)
}

fn join(names: &[&String]) -> String {
    names
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads the sites view of `cluster` when it has sites; `None` without.
pub async fn observe(
    context: &Context,
    cluster: &Infinispan,
    ready_replicas: i32,
) -> Option<SitesView> {
    let sites = cluster.spec.service.sites.as_ref()?;
    let name = cluster.name_any();
    let namespace = cluster.namespace().unwrap_or_default();
    let domain = &context.settings.server.cluster_domain;
    let expected: Vec<String> = std::iter::once(sites.local.name.clone())
        .chain(sites.locations.iter().map(|l| l.name.clone()))
        .collect();
    let seen = if ready_replicas == 0 {
        Err("no server pod is ready".to_string())
    } else {
        match context.servers.client_for(&context.client, cluster).await {
            Ok(server) => server
                .container_info()
                .await
                .map(|info| info.sites_view)
                .map_err(|error| format!("reading it from the server failed: {error}")),
            Err(error) => Err(format!("the server cannot be reached: {error}")),
        }
    };
    let mut routers = Vec::new();
    if let Ok(seen) = &seen {
        let mut candidates = Vec::new();
        if sites.local.discovery.launch_gossip_router && !seen.contains(&sites.local.name) {
            let own = sites.local.router(&name, &namespace, domain);
            candidates.push((sites.local.name.clone(), own.host, own.port, true));
        }
        for location in &sites.locations {
            if seen.contains(&location.name) {
                continue;
            }
            if let Some(router) = location.router(&name, &namespace, domain) {
                // Only a router in this Kubernetes cluster is probed: a CR must not make the
                // operator open connections to any address it names.
                let in_cluster = location.url.is_none();
                candidates.push((location.name.clone(), router.host, router.port, in_cluster));
            }
        }
        for (site, host, port, in_cluster) in candidates {
            let reachable = if in_cluster {
                Some(probe(&host, port).await)
            } else {
                None
            };
            routers.push(RouterProbe {
                site,
                address: format!("{host}:{port}"),
                reachable,
            });
        }
    }
    Some(SitesView {
        expected,
        seen,
        routers,
    })
}

/// Whether `host:port` accepts a TCP connection within [`ROUTER_PROBE_TIMEOUT`].
async fn probe(host: &str, port: u16) -> Result<(), String> {
    match tokio::time::timeout(
        ROUTER_PROBE_TIMEOUT,
        tokio::net::TcpStream::connect((host, port)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!(
            "no answer within {}s",
            ROUTER_PROBE_TIMEOUT.as_secs()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(seen: Result<&[&str], &str>, routers: Vec<RouterProbe>) -> SitesView {
        SitesView {
            expected: vec!["LON".into(), "NYC".into()],
            seen: seen
                .map(|s| s.iter().map(|s| s.to_string()).collect())
                .map_err(str::to_string),
            routers,
        }
    }

    #[test]
    fn the_view_is_formed_when_every_named_site_is_in_it() {
        let (status, reason, message) = condition(&view(Ok(&["LON", "NYC"]), vec![]));
        assert_eq!(
            (status, reason),
            (ConditionStatus::True, "CrossSiteViewFormed")
        );
        assert_eq!(message, "every site is in the view: LON, NYC");
        let (status, _, message) = condition(&view(Ok(&["LON", "NYC", "SFO"]), vec![]));
        assert_eq!(status, ConditionStatus::True);
        assert!(message.contains("SFO joined too"), "{message}");
    }

    #[test]
    fn a_missing_site_is_named_with_its_routers_reachability() {
        let unreachable = RouterProbe {
            site: "NYC".into(),
            address: "nyc-site.b.svc.cluster.local:7900".into(),
            reachable: Some(Err("connection refused".into())),
        };
        let (status, reason, message) = condition(&view(Ok(&["LON"]), vec![unreachable]));
        assert_eq!((status, reason), (ConditionStatus::False, "SitesMissing"));
        assert!(message.contains("missing: NYC"), "{message}");
        assert!(
            message.contains("nyc-site.b.svc.cluster.local:7900 is unreachable from the operator (connection refused)"),
            "{message}"
        );

        // The router answers and a site of another name joined: a wrong site name.
        let reachable = RouterProbe {
            site: "NYC".into(),
            address: "nyc-site.b.svc.cluster.local:7900".into(),
            reachable: Some(Ok(())),
        };
        let (status, _, message) = condition(&view(Ok(&["LON", "NYX"]), vec![reachable]));
        assert_eq!(status, ConditionStatus::False);
        assert!(message.contains("accepts connections"), "{message}");
        assert!(
            message.contains("NYX joined the view but no location names it"),
            "{message}"
        );
    }

    #[test]
    fn a_router_given_by_url_is_named_without_a_verdict() {
        let by_url = RouterProbe {
            site: "NYC".into(),
            address: "nyc.example.com:31900".into(),
            reachable: None,
        };
        let (status, _, message) = condition(&view(Ok(&["LON"]), vec![by_url]));
        assert_eq!(status, ConditionStatus::False);
        assert!(
            message.contains("NYC: its gossip router is nyc.example.com:31900 (a location outside this Kubernetes cluster"),
            "{message}"
        );
        assert!(
            !message.contains("unreachable") && !message.contains("accepts"),
            "{message}"
        );
    }

    #[test]
    fn an_unknown_view_says_why() {
        let (status, reason, message) = condition(&view(Err("no server pod is ready"), vec![]));
        assert_eq!(
            (status, reason),
            (ConditionStatus::False, "SitesViewUnknown")
        );
        assert!(message.contains("LON, NYC expected"), "{message}");
        assert!(message.contains("no server pod is ready"), "{message}");
    }
}
