//! `spec.service.sites` of infinispan-operator's `Infinispan` to this project's
//! (docs/migration.md, the `spec.service.sites` rows; docs/cross-site.md).

use std::collections::BTreeMap;

use common_crds::sites::{
    LocalSite, ROUTER_PORT, RouterHeartbeats, SiteDiscovery, SiteDiscoveryType, SiteEncryption,
    SiteExpose, SiteExposeType, SiteKeyStore, SiteLocation, SiteTrustStore, SitesSpec, TlsProtocol,
};
use serde_json::{Value, json};

use super::fields::{FieldError, Fields};
use super::infinispan::allow_note;
use super::report::Log;

/// Why a location found through the remote Kubernetes API (`kubernetes://`, `minikube://`,
/// `openshift://` URLs, with a token Secret) is not converted.
pub(super) const API_DISCOVERY_REASON: &str = "discovery through the remote Kubernetes API is not supported: give the remote site's gossip router address as infinispan+xsite://host:port (its <cluster>-site Service exposed as NodePort or LoadBalancer), or, for a site in this Kubernetes cluster, its namespace and clusterName";

/// `spec.service.sites`: cross-site replication, with infinispan-operator's field names
/// (docs/cross-site.md). The gossip router, its Service, TLS between the sites (with a
/// trust store) and the locations by `infinispan+xsite://` URL or by namespace/clusterName
/// carry over; a Route and the remote Kubernetes API (API URLs, token Secrets) do not.
pub(super) fn sites_spec(
    fields: &mut Fields,
    name: &str,
    log: &mut Log,
) -> Result<SitesSpec, FieldError> {
    let Some(mut local) = fields.take_object("local")? else {
        return Err(FieldError::new(fields.path("local"), "missing"));
    };
    let local_site = local_site(&mut local, name, log)?;
    log.unknown(local);
    let items: Option<Vec<Value>> = fields.take_as("locations")?;
    let mut locations = Vec::new();
    for (i, item) in items.unwrap_or_default().into_iter().enumerate() {
        let path = format!("{}[{i}]", fields.path("locations"));
        locations.extend(site_location(&path, item, log)?);
    }
    if !local_site.discovery.launch_gossip_router && locations.is_empty() {
        log.note(
            "spec.service.sites: launchGossipRouter is false and no location gives a gossip router: the operator refuses the cluster (Degraded, InvalidSites) until one does",
        );
    }
    Ok(SitesSpec {
        local: local_site,
        locations,
    })
}

/// `spec.service.sites.local`.
fn local_site(fields: &mut Fields, name: &str, log: &mut Log) -> Result<LocalSite, FieldError> {
    let name_path = fields.path("name");
    let site = log
        .take_text(fields, "name")?
        .ok_or_else(|| FieldError::new(&name_path, "missing"))?;
    log.mapped(&name_path, "");
    let mut local = LocalSite {
        name: site,
        expose: SiteExpose::default(),
        max_relay_nodes: 1,
        discovery: SiteDiscovery::default(),
        encryption: None,
    };
    if let Some(mut expose) = fields.take_object("expose")? {
        local.expose = site_expose(&mut expose, name, log)?;
        log.unknown(expose);
    }
    if let Some(relays) = fields.take_as::<i32>("maxRelayNodes")? {
        let path = fields.path("maxRelayNodes");
        match relays {
            0 => log.omitted(&path, "0: not set; 1 by default in both"),
            ..0 => log.removed(
                &path,
                "below 1: the other operator used 1, the default here",
            ),
            1..=128 => {
                log.mapped(&path, "how many pods of the site relay to the other sites");
                local.max_relay_nodes = relays;
            }
            _ => log.dropped(
                &path,
                &json!(relays),
                "above 128, refused here: 1, the default, applies",
            ),
        }
    }
    if let Some(value) = fields.take("encryption") {
        local.encryption = site_encryption(&fields.path("encryption"), value, name, log)?;
    }
    if let Some(mut discovery) = fields.take_object("discovery")? {
        local.discovery = site_discovery(&mut discovery, log)?;
        log.unknown(discovery);
    }
    Ok(local)
}

/// Why a converted site without its `encryption` must not be applied as is.
const SITE_PLAIN_TEXT: &str = "without encryption the converted site talks plain text to the other sites' gossip routers (and the sites that use TLS refuse it), so do not apply the converted CR as is: fix the encryption in the input and convert it again";

/// `spec.service.sites.local.encryption` (`value`, at `path`): TLS between the sites of
/// cluster `name`, with the same Secrets (the store under its file name, `password`, optionally
/// `type`), which must now allow the cluster. `None`, the whole encryption dropped with the
/// reason, when it cannot work here: no `trustStore` (required here; the other operator fell
/// back to the JVM's CAs) or a store without a Secret a cluster can read.
fn site_encryption(
    path: &str,
    value: Value,
    name: &str,
    log: &mut Log,
) -> Result<Option<SiteEncryption>, FieldError> {
    let original = value.clone();
    let mut fields = list_item(path, value)?;
    // The encryption's entries, reported unless the whole encryption is dropped.
    let mut entries = Log::default();
    // Why the encryption cannot be used here.
    let mut problems = Vec::new();
    let protocol_path = fields.path("protocol");
    let protocol = match entries.take_text(&mut fields, "protocol")?.as_deref() {
        None => TlsProtocol::default(),
        Some("TLSv1.3") => {
            entries.mapped(&protocol_path, "TLSv1.3, the default in both");
            TlsProtocol::TlsV13
        }
        Some("TLSv1.2") => {
            entries.mapped(&protocol_path, "");
            TlsProtocol::TlsV12
        }
        Some(other) => {
            entries.dropped(
                &protocol_path,
                &json!(other),
                "neither TLSv1.2 nor TLSv1.3, the versions both operators allow: TLSv1.3, the default, applies",
            );
            TlsProtocol::default()
        }
    };
    let mut keystores = Vec::new();
    for (key, role, alias) in [
        (
            "transportKeyStore",
            "the server pods' keystore (their certificate to the routers)",
            "transport",
        ),
        (
            "routerKeyStore",
            "this site's gossip router's keystore",
            "router",
        ),
    ] {
        let store = match fields.take_object(key)? {
            Some(mut store) => {
                let found = site_store(
                    &mut store,
                    role,
                    Some(alias),
                    name,
                    &mut entries,
                    &mut problems,
                )?;
                entries.unknown(store);
                found
            }
            None => {
                problems.push(format!(
                    "{} is missing (infinispan-operator's schema required it too)",
                    fields.path(key)
                ));
                None
            }
        };
        keystores.push(store);
    }
    let trust_store = match fields.take_object("trustStore")? {
        Some(mut store) => {
            let found = site_store(
                &mut store,
                "the CAs that sign every site's certificates",
                None,
                name,
                &mut entries,
                &mut problems,
            )?;
            entries.unknown(store);
            found
        }
        None => {
            problems.push(format!(
                "{} is missing, and it is required here (infinispan-operator fell back to the JVM's default CAs): add trustStore.secretName, a Secret of the cluster's namespace with the truststore (the CAs of every site's certificates) under truststore.p12 (or trustStore.filename) and its password under password, allowing the cluster (kubectl annotate secret <secret> {}={name})",
                fields.path("trustStore"),
                common_crds::labels::ALLOW_CLUSTERS_ANNOTATION
            ));
            None
        }
    };
    entries.unknown(fields);
    let mut keystores = keystores.into_iter();
    let (Some(Some(transport)), Some(Some(router)), Some(trust)) =
        (keystores.next(), keystores.next(), trust_store)
    else {
        log.dropped(
            path,
            &original,
            &format!("{}; {SITE_PLAIN_TEXT}", problems.join("; ")),
        );
        return Ok(None);
    };
    log.fields.append(&mut entries.fields);
    let keystore = |store: SiteStore| SiteKeyStore {
        secret_name: store.secret_name,
        alias: store.alias,
        filename: store.filename,
    };
    Ok(Some(SiteEncryption {
        protocol,
        transport_key_store: keystore(transport),
        router_key_store: keystore(router),
        trust_store: SiteTrustStore {
            secret_name: trust.secret_name,
            filename: trust.filename,
        },
    }))
}

/// A store of `spec.service.sites.local.encryption`, as converted.
struct SiteStore {
    secret_name: String,
    alias: Option<String>,
    filename: Option<String>,
}

/// One store of `spec.service.sites.local.encryption` (`fields`), `role` saying what it is: a
/// keystore when `alias` (the alias of its key entry by default, in both operators) is given,
/// else the truststore. `None`, with the reason in `problems`, when no Secret a cluster can
/// read holds it.
fn site_store(
    fields: &mut Fields,
    role: &str,
    alias: Option<&str>,
    name: &str,
    entries: &mut Log,
    problems: &mut Vec<String>,
) -> Result<Option<SiteStore>, FieldError> {
    let default_file = if alias.is_some() {
        "keystore.p12"
    } else {
        "truststore.p12"
    };
    let secret_path = fields.path("secretName");
    let alias_path = fields.path("alias");
    let filename_path = fields.path("filename");
    let secret = entries.take_text(fields, "secretName")?;
    let store_alias = match alias {
        Some(_) => entries.take_text(fields, "alias")?,
        None => None,
    };
    let filename = entries.take_text(fields, "filename")?;
    let mut usable = true;
    match &secret {
        None => {
            problems.push(format!("{secret_path} is missing: no Secret holds {role}"));
            usable = false;
        }
        Some(secret) if secret.len() > 253 => {
            problems.push(format!(
                "{secret_path} is longer than 253 characters: no Secret has such a name"
            ));
            usable = false;
        }
        Some(_) => {}
    }
    if let Some(file) = &filename
        && !file
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
    {
        problems.push(format!(
            "{filename_path} {file:?} is not a key a Secret can have (letters, digits, -, _ and .)"
        ));
        usable = false;
    }
    let Some(secret) = secret.filter(|_| usable) else {
        return Ok(None);
    };
    // infinispan-operator read the truststore's type from the transport keystore's Secret.
    let store_type = if alias.is_some() {
        "optionally its type, PKCS12 or JKS, under type"
    } else {
        "optionally its type, PKCS12 or JKS, under type of this Secret, where infinispan-operator took the transport keystore Secret's type: give this Secret type JKS if its store is JKS"
    };
    entries.mapped(
        &secret_path,
        &format!(
            "{role}: the same keys (the store under {}, its password under password, {store_type}); {}",
            filename.as_deref().unwrap_or(default_file),
            allow_note("secret", &secret, name)
        ),
    );
    if let (Some(_), Some(default_alias)) = (&store_alias, alias) {
        entries.mapped(
            &alias_path,
            &format!("the alias of the key entry ({default_alias} by default in both)"),
        );
    }
    if filename.is_some() {
        entries.mapped(
            &filename_path,
            &format!("the key of the store in the Secret ({default_file} by default in both)"),
        );
    }
    Ok(Some(SiteStore {
        secret_name: secret,
        alias: store_alias,
        filename,
    }))
}

/// `spec.service.sites.local.expose`: the Service `<name>-site` in front of the gossip router.
fn site_expose(fields: &mut Fields, name: &str, log: &mut Log) -> Result<SiteExpose, FieldError> {
    let path = fields.path("type");
    let service = format!("the Service {name}-site in front of the site's gossip router");
    let mut route = false;
    let type_ = match fields.take_as::<String>("type")?.as_deref() {
        None | Some("") => SiteExposeType::ClusterIP,
        Some("ClusterIP") => {
            log.mapped(
                &path,
                &format!("{service}, reachable inside this Kubernetes cluster only"),
            );
            SiteExposeType::ClusterIP
        }
        Some("NodePort") => {
            log.mapped(
                &path,
                &format!(
                    "{service}; give the other sites a node's address as infinispan+xsite://host:nodePort"
                ),
            );
            SiteExposeType::NodePort
        }
        Some("LoadBalancer") => {
            log.mapped(
                &path,
                &format!(
                    "{service}; give the other sites the load balancer's address as infinispan+xsite://host:port"
                ),
            );
            SiteExposeType::LoadBalancer
        }
        Some("Route") => {
            log.dropped(
                &path,
                &json!("Route"),
                &format!(
                    "there is no Route for the gossip router here (not built yet): the site gets the default ClusterIP, {service}, reachable inside this Kubernetes cluster only; to reach it from other clusters, set LoadBalancer or NodePort and give the other sites its address as infinispan+xsite://host:port"
                ),
            );
            route = true;
            SiteExposeType::ClusterIP
        }
        Some(other) => {
            return Err(FieldError::new(
                path,
                format!("{other:?} is not ClusterIP, NodePort, LoadBalancer or Route"),
            ));
        }
    };
    let mut expose = SiteExpose {
        type_,
        ..SiteExpose::default()
    };
    if let Some(port) = fields.take_as::<i32>("nodePort")? {
        let path = fields.path("nodePort");
        if port == 0 {
            log.omitted(&path, "empty");
        } else if type_ != SiteExposeType::NodePort {
            log.dropped(&path, &json!(port), "only with type NodePort here");
        } else if !(30000..=32767).contains(&port) {
            log.dropped(
                &path,
                &json!(port),
                "outside 30000-32767, refused here: a node port is allocated",
            );
        } else {
            log.mapped(&path, "");
            expose.node_port = Some(port);
        }
    }
    if let Some(port) = fields.take_as::<i32>("port")? {
        let path = fields.path("port");
        if port == 0 {
            log.omitted(&path, "empty");
        } else if type_ != SiteExposeType::LoadBalancer || port == i32::from(ROUTER_PORT) {
            // The other operator used it only for LoadBalancer; 7900 is the default.
            log.removed(
                &path,
                "used only by a LoadBalancer, whose port is 7900 by default: the Service's port stays 7900",
            );
        } else if !(1..=65535).contains(&port) {
            log.dropped(
                &path,
                &json!(port),
                "outside 1-65535, refused here: the port stays 7900",
            );
        } else {
            log.mapped(
                &path,
                "the load balancer's port (the router listens on 7900)",
            );
            expose.port = Some(port);
        }
    }
    if let Some(host) = log.take_text(fields, "routeHostName")? {
        let path = fields.path("routeHostName");
        if route {
            log.dropped(&path, &json!(host), "no Route for the gossip router here");
        } else {
            log.removed(&path, "unused without type Route, as there");
        }
    }
    if let Some(annotations) = fields.take_as::<BTreeMap<String, String>>("annotations")? {
        if !annotations.is_empty() {
            log.mapped(
                &fields.path("annotations"),
                &format!("on the Service {name}-site"),
            );
        }
        expose.annotations = annotations;
    }
    Ok(expose)
}

/// `spec.service.sites.local.discovery`: the site's gossip router.
fn site_discovery(fields: &mut Fields, log: &mut Log) -> Result<SiteDiscovery, FieldError> {
    let mut discovery = SiteDiscovery::default();
    let path = fields.path("type");
    match fields.take_as::<String>("type")?.as_deref() {
        None | Some("") => {}
        Some("gossiprouter") => {
            log.mapped(&path, "a JGroups gossip router per site");
            discovery.type_ = SiteDiscoveryType::GossipRouter;
        }
        Some(other) => {
            return Err(FieldError::new(
                path,
                format!("{other:?} is not gossiprouter"),
            ));
        }
    }
    if let Some(launch) = fields.take_as::<bool>("launchGossipRouter")? {
        let note = if launch {
            "a Deployment <name>-router and its Service <name>-site"
        } else {
            "no router of this site: the pods use the locations' routers only"
        };
        log.mapped(&fields.path("launchGossipRouter"), note);
        discovery.launch_gossip_router = launch;
    }
    let resources = "the gossip router pod's resources are the operator's here: requests 100m CPU and 256Mi memory, limit 256Mi memory";
    log.drop_field(fields, "memory", resources);
    log.drop_field(fields, "cpu", resources);
    if let Some(suspect) = fields.take_as::<bool>("suspectEvents")? {
        log.mapped(&fields.path("suspectEvents"), "");
        discovery.suspect_events = suspect;
    }
    if let Some(mut heartbeats) = fields.take_object("heartbeats")? {
        discovery.heartbeats = router_heartbeats(&mut heartbeats, log)?;
        log.unknown(heartbeats);
    }
    Ok(discovery)
}

/// `spec.service.sites.local.discovery.heartbeats`: an interval below 1 s or a timeout below
/// 2 s is dropped (the schema refuses them), and so are both when the timeout would not be
/// longer than the interval.
fn router_heartbeats(fields: &mut Fields, log: &mut Log) -> Result<RouterHeartbeats, FieldError> {
    let mut heartbeats = RouterHeartbeats::default();
    if let Some(enabled) = fields.take_as::<bool>("enabled")? {
        log.mapped(&fields.path("enabled"), "");
        heartbeats.enabled = enabled;
    }
    let mut kept = Vec::new();
    for (key, minimum) in [("interval", 1000), ("timeout", 2000)] {
        let path = fields.path(key);
        match fields.take_as::<i64>(key)? {
            None => {}
            Some(millis) if millis < minimum => log.dropped(
                &path,
                &json!(millis),
                &format!("below {minimum} ms, refused here: the default applies"),
            ),
            Some(millis) => kept.push((key, path, millis)),
        }
    }
    let mut candidate = heartbeats.clone();
    for (key, _, millis) in &kept {
        match *key {
            "interval" => candidate.interval = *millis,
            _ => candidate.timeout = *millis,
        }
    }
    if candidate.timeout <= candidate.interval {
        for (_, path, millis) in kept {
            log.dropped(
                &path,
                &json!(millis),
                &format!(
                    "the timeout must be longer than the interval here: the defaults apply (interval {} ms, timeout {} ms)",
                    heartbeats.interval, heartbeats.timeout
                ),
            );
        }
        return Ok(heartbeats);
    }
    for (_, path, _) in kept {
        log.mapped(&path, "milliseconds");
    }
    Ok(candidate)
}

/// The fields of `value`, the list item at `path` (e.g. `spec.service.sites.locations[0]`).
fn list_item(path: &str, value: Value) -> Result<Fields, FieldError> {
    let mut holder = Fields::root(serde_json::Map::from_iter([(path.to_string(), value)]));
    Ok(holder.take_object(path)?.unwrap_or_default())
}

/// Whether `host` and `port` make an `infinispan+xsite://host[:port]` the schema here accepts:
/// a lower-case DNS name or IPv4 address, a port from 1 to 65535.
pub(super) fn router_address_ok(host: &str, port: Option<&str>) -> bool {
    let label_ok = |label: &str| {
        !label.is_empty()
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    let port_ok = |port: &str| {
        port.len() <= 5
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u16>().is_ok_and(|p| p > 0)
    };
    host.split('.').all(label_ok) && port.is_none_or(port_ok)
}

/// One of `spec.service.sites.locations`: `None` (the whole location dropped) when nothing
/// converted locates the remote site's gossip router.
fn site_location(
    path: &str,
    item: Value,
    log: &mut Log,
) -> Result<Option<SiteLocation>, FieldError> {
    let original = item.clone();
    let mut fields = list_item(path, item)?;
    // The location's entries, reported unless the whole location is dropped.
    let mut entries = Log::default();
    let name_path = fields.path("name");
    let name = entries
        .take_text(&mut fields, "name")?
        .ok_or_else(|| FieldError::new(&name_path, "missing"))?;
    entries.mapped(&name_path, "");
    let url_path = fields.path("url");
    let host_path = fields.path("host");
    let port_path = fields.path("port");
    let url = entries.take_text(&mut fields, "url")?;
    let host = entries.take_text(&mut fields, "host")?;
    let port = fields.take_as::<i32>("port")?;
    let namespace = entries.take_text(&mut fields, "namespace")?;
    let cluster_name = entries.take_text(&mut fields, "clusterName")?;
    entries.drop_field(
        &mut fields,
        "secretName",
        "a token for the remote Kubernetes API, not used here",
    );
    entries.unknown(fields);

    let mut router_url = None;
    // Why the location's url (or host) was not kept.
    let mut lost: Option<String> = None;
    let mut url = url;
    if let Some(host) = host {
        // Deprecated there; its webhook wrote url from them, over any url given.
        let port_number = port.filter(|p| *p > 0).unwrap_or(i32::from(ROUTER_PORT));
        if router_address_ok(&host, Some(&port_number.to_string())) {
            let from_host = format!("infinispan+xsite://{host}:{port_number}");
            let note = format!(
                "{from_host}: host and port are deprecated there, whose webhook made this url of them"
            );
            entries.changed(&host_path, &url_path, &note);
            if port.is_some() {
                entries.changed(&port_path, &url_path, &note);
            }
            match url.take() {
                Some(given) if given == from_host => {
                    entries.mapped(&url_path, "the url host and port give")
                }
                Some(given) => entries.dropped(
                    &url_path,
                    &json!(given),
                    "host and port win, as the other operator's webhook wrote url from them",
                ),
                None => {}
            }
            router_url = Some(from_host);
        } else {
            let reason = format!(
                "{host}:{port_number} is not a host and port infinispan+xsite://host:port allows here (a lower-case DNS name or IPv4 address, a port from 1 to 65535)"
            );
            entries.dropped(&host_path, &json!(host), &reason);
            if let Some(port) = port {
                entries.dropped(&port_path, &json!(port), &reason);
            }
            lost = Some(reason);
        }
    } else if let Some(port) = port {
        if port == 0 {
            entries.omitted(&port_path, "empty");
        } else {
            entries.removed(&port_path, "unused without host, as there");
        }
    }
    if let Some(url) = url {
        match url.split_once("://") {
            Some(("infinispan+xsite", "")) => entries.removed(
                &url_path,
                "no host: as there, the site is found by its namespace and clusterName",
            ),
            Some(("infinispan+xsite", address)) => {
                let (host, port) = match address.split_once(':') {
                    Some((host, port)) => (host, Some(port)),
                    None => (address, None),
                };
                if router_address_ok(host, port) {
                    entries.mapped(&url_path, "the remote site's gossip router");
                    router_url = Some(url);
                } else {
                    let reason = "not an infinispan+xsite://host[:port] the schema here accepts (a lower-case DNS name or IPv4 address, a port from 1 to 65535)";
                    entries.dropped(&url_path, &json!(url), reason);
                    lost = Some(reason.to_string());
                }
            }
            Some(("kubernetes" | "minikube" | "openshift", _)) => {
                entries.dropped(&url_path, &json!(url), API_DISCOVERY_REASON);
                lost = Some(API_DISCOVERY_REASON.to_string());
            }
            _ => {
                let reason = "neither infinispan+xsite://host:port nor a Kubernetes API URL";
                entries.dropped(&url_path, &json!(url), reason);
                lost = Some(reason.to_string());
            }
        }
    }

    let mut location = SiteLocation {
        name,
        url: None,
        namespace: None,
        cluster_name: None,
    };
    let in_cluster = [
        ("namespace", namespace, &mut location.namespace),
        ("clusterName", cluster_name, &mut location.cluster_name),
    ];
    if let Some(url) = router_url {
        for (key, value, _) in in_cluster {
            if value.is_some() {
                entries.removed(
                    &format!("{path}.{key}"),
                    "with url, the location is found by its url (the other operator did not use it with an infinispan+xsite url either)",
                );
            }
        }
        location.url = Some(url);
    } else if in_cluster.iter().all(|(_, value, _)| value.is_none()) {
        let reason = lost.unwrap_or_else(|| {
            "nothing locates the site: a location needs url (infinispan+xsite://host:port) or the namespace and clusterName of the remote site's CR in this Kubernetes cluster".to_string()
        });
        log.dropped(path, &original, &reason);
        return Ok(None);
    } else {
        for (key, value, slot) in in_cluster {
            let Some(value) = value else {
                continue;
            };
            let field = format!("{path}.{key}");
            if lost.is_some() {
                entries.changed(
                    &field,
                    &field,
                    "without url, this locates the site in this Kubernetes cluster (its Service <clusterName>-site in the namespace; this CR's name and namespace where not given); there it named the CR behind url: if the site runs in another Kubernetes cluster, give its gossip router's address as url instead",
                );
            } else {
                entries.mapped(
                    &field,
                    "the remote site's CR in this Kubernetes cluster: its Service <clusterName>-site",
                );
            }
            *slot = Some(value);
        }
    }
    log.fields.append(&mut entries.fields);
    Ok(Some(location))
}
