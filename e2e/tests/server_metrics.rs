//! Integration: the servers' `/metrics` scraped the way Prometheus scrapes it through the
//! ServiceMonitor the cluster operator builds (`e2e::scrape`: the endpoint's scheme and path,
//! its TLS CA and server name, its BASIC credentials sent up front), against a real Infinispan
//! 16.0.7 server running the configuration the operator generates for the same CR.
//!
//! Each test builds an `Infinispan` CR's objects with the operator's own builders (the realm's
//! users files, the PEM keystore the init container would write from a certificate issued by the
//! operator's own CA code, `infinispan.xml`), starts a standalone node on loopback with them
//! (offsets 2070-2071 of `e2e::node`, stopped and wiped at the end) and scrapes it. What is moved
//! for loopback, as in `docs/cluster-objects.md` "What was checked on a real server": the files'
//! directories, the port offset, and the JGroups stack (TCPPING on loopback instead of
//! DNS_PING); the certificate also names 127.0.0.1 so that `infinispan.sh` can probe the node's
//! health (the scrape checks the ServiceMonitor's server name, never the address).
//!
//! - TLS (`Generated`, the default) with authentication: the scrape as the generated metrics user
//!   (role `monitor`) over https returns 200 and the servers' metrics, cache statistics
//!   included; every metric the servers' Grafana dashboard queries is in it. Without
//!   credentials, or with a wrong password: 401. The metrics user cannot create a cache.
//! - No TLS, `metricsAuthentication: false`: the plain-http scrape without credentials returns
//!   the metrics, while the REST API still refuses anonymous requests (401); the server refuses
//!   BASIC in clear (403), why a plain-text cluster with authenticated metrics gets no
//!   ServiceMonitor.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail, ensure};
use cluster_operator::build::server::{
    self, Identities, Monitoring, Referenced, ServerImages, TlsCertificate,
};
use cluster_operator::certificates::{Purpose, issue, objects::ca_config_map_name};
use cluster_operator::controller::certificates::endpoint_names;
use cluster_operator::controller::credentials;
use common_crds::Infinispan;
use common_crds::infinispan::InfinispanSpec;
use e2e::node::{Node, NodeGuard};
use e2e::scrape::{Resolve, Scraped, dashboard_metric_names, scrape};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMapKeySelector, Secret, SecretKeySelector};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;

const NAMESPACE: &str = "metrics";
const DOMAIN: &str = "cluster.local";

/// A cluster's objects as the operator would have them, and the node running them.
struct Cluster {
    name: String,
    dir: PathBuf,
    /// Secrets and ConfigMaps by name: what the ServiceMonitor's selectors resolve against.
    secrets: BTreeMap<String, Secret>,
    config_maps: BTreeMap<String, BTreeMap<String, String>>,
    objects: server::Objects,
    operator_password: String,
    ca_pem: Option<String>,
}

impl Resolve for Cluster {
    fn secret_key(&self, selector: &SecretKeySelector) -> anyhow::Result<String> {
        let secret = self
            .secrets
            .get(&selector.name)
            .with_context(|| format!("no Secret {}", selector.name))?;
        let value = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&selector.key))
            .with_context(|| format!("no key {} in the Secret {}", selector.key, selector.name))?;
        Ok(String::from_utf8(value.0.clone())?)
    }

    fn config_map_key(&self, selector: &ConfigMapKeySelector) -> anyhow::Result<String> {
        self.config_maps
            .get(&selector.name)
            .and_then(|data| data.get(&selector.key))
            .cloned()
            .with_context(|| format!("no key {} in the ConfigMap {}", selector.key, selector.name))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn text(secret: &Secret, key: &str) -> anyhow::Result<String> {
    let value = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .with_context(|| format!("no {key}"))?;
    Ok(String::from_utf8(value.0.clone())?)
}

fn write(path: &Path, content: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, content).with_context(|| format!("writing {}", path.display()))
}

/// Builds the objects of the CR `name` with `spec` (its TLS type written in, as the controller
/// resolves it) and writes the server's files for a loopback node.
fn prepare(name: &str, spec: serde_json::Value) -> anyhow::Result<Cluster> {
    let mut cr = Infinispan::new(name, serde_json::from_value::<InfinispanSpec>(spec)?);
    cr.metadata.namespace = Some(NAMESPACE.to_string());
    cr.metadata.uid = Some(format!("{name}-uid"));
    let owner = cluster_operator::controller::owner_reference(&cr);
    let operator_password = credentials::random_password()?;
    let operator = credentials::operator_credentials(&cr, owner.clone(), &operator_password);
    let application =
        credentials::generated_identities(&cr, owner.clone(), &credentials::random_password()?);
    let mut identities = Identities::from_secrets(&operator, &application)?;
    let mut secrets = BTreeMap::new();
    // What the controller adds when the API server serves ServiceMonitors.
    if server::metrics_user_needed(&cr) {
        let metrics =
            credentials::metrics_credentials(&cr, owner.clone(), &credentials::random_password()?);
        identities = identities.with_metrics_user(&metrics)?;
        secrets.insert(server::metrics_credentials_name(name), metrics);
    }
    let dir = e2e::run_dir().join(e2e::operator::unique(&format!("metrics-{name}")));
    let mut config_maps = BTreeMap::new();
    let mut tls = None;
    let mut ca_pem = None;
    if cluster_operator::build::security::endpoint_tls(&cr) {
        let now = Timestamp::now();
        let day = SignedDuration::from_hours(24);
        let ca = issue::new_ca(&format!("{NAMESPACE}/{name} test CA"), now, day)?;
        let mut names = endpoint_names(name, NAMESPACE, DOMAIN);
        names.push("127.0.0.1".to_string());
        let issued = issue::issue(&ca, Purpose::Endpoint, &names, now, day)?;
        let secret_name = cluster_operator::build::security::endpoint_certificate_secret(&cr)
            .context("no endpoint certificate Secret")?;
        let secret = Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(secret_name.clone()),
                ..Default::default()
            },
            data: Some(
                [
                    ("tls.key", &issued.key_pem),
                    ("tls.crt", &issued.cert_pem),
                    ("ca.crt", &ca.cert_pem),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
            ),
            ..Default::default()
        };
        tls = Some(TlsCertificate::from_secret(&secret)?);
        // The init container's server.pem: the key, then the certificate chain.
        write(
            &dir.join("tls/server.pem"),
            &format!("{}{}", issued.key_pem, issued.cert_pem),
        )?;
        write(&dir.join("ca.pem"), &ca.cert_pem)?;
        secrets.insert(secret_name, secret);
        config_maps.insert(
            ca_config_map_name(name),
            BTreeMap::from([("ca.crt".to_string(), ca.cert_pem.clone())]),
        );
        ca_pem = Some(ca.cert_pem);
    }
    let settings = server::Settings::new(ServerImages::single(
        "16.0.7",
        "quay.io/infinispan/server:16.0.7",
    ));
    let referenced = Referenced {
        identities: Some(identities),
        overlay: None,
        tls,
        transport: None,
        client_trust: None,
        credential_store: None,
        site_tls: None,
    };
    let objects = server::build(&cr, &settings, &referenced)?;
    let realm = objects
        .identities_secret
        .as_ref()
        .context("no identities Secret")?;
    write(
        &dir.join("identities/users.properties"),
        &text(realm, server::USERS_KEY)?,
    )?;
    write(
        &dir.join("identities/groups.properties"),
        &text(realm, server::GROUPS_KEY)?,
    )?;
    let xml = objects
        .config_map
        .data
        .as_ref()
        .and_then(|d| d.get(server::SERVER_CONFIG_KEY))
        .context("no infinispan.xml")?;
    write(&dir.join("infinispan.xml"), &loopback(xml, &dir)?)?;
    Ok(Cluster {
        name: name.to_string(),
        dir,
        secrets,
        config_maps,
        objects,
        operator_password,
        ca_pem,
    })
}

/// The operator's `infinispan.xml` with what differs on loopback moved: the mounted
/// directories, the port offset (`-o`), the JGroups discovery.
fn loopback(xml: &str, dir: &Path) -> anyhow::Result<String> {
    let replacements = [
        (
            format!("{}/", server::IDENTITIES_DIR),
            format!("{}/identities/", dir.display()),
        ),
        (
            format!("{}/", server::TLS_DIR),
            format!("{}/tls/", dir.display()),
        ),
        (
            r#"port-offset="0""#.to_string(),
            r#"port-offset="${infinispan.socket.binding.port-offset:0}""#.to_string(),
        ),
        (
            r#"stack="kubernetes""#.to_string(),
            r#"stack="loopback""#.to_string(),
        ),
        (
            "  <cache-container".to_string(),
            concat!(
                r#"  <jgroups><stack name="loopback" extends="tcp">"#,
                r#"<TCP bind_port="${testbed.jgroups.port:7800}" port_range="0" stack.combine="COMBINE"/>"#,
                r#"<TCPPING initial_hosts="${testbed.jgroups.initial-hosts:127.0.0.1[7800]}" port_range="0" stack.combine="REPLACE" stack.position="MPING"/>"#,
                "</stack></jgroups>\n  <cache-container"
            )
            .to_string(),
        ),
    ];
    let mut out = xml.to_string();
    for (from, to) in replacements {
        // The TLS directory only with TLS.
        ensure!(
            out.contains(&from) || from.starts_with(server::TLS_DIR),
            "the configuration has no {from}"
        );
        out = out.replace(&from, &to);
    }
    Ok(out)
}

/// Starts `cluster`'s node at `offset`.
fn start(cluster: &Cluster, offset: u16) -> anyhow::Result<(NodeGuard, SocketAddr)> {
    let node = Node::new(&cluster.name, offset);
    node.stop_and_wipe()?;
    let config = cluster.dir.join("infinispan.xml").display().to_string();
    let ca = cluster.dir.join("ca.pem").display().to_string();
    let mut args = vec!["--config", config.as_str()];
    if cluster.ca_pem.is_some() {
        args.extend(["--ca", ca.as_str()]);
    }
    node.start_with(&args)?;
    let address: SocketAddr = format!("127.0.0.1:{}", 11222 + offset).parse()?;
    Ok((NodeGuard(node), address))
}

/// The last lines of the node's log, for a failure's message.
fn log_tail(cluster: &Cluster) -> String {
    let log = e2e::run_dir()
        .join("infinispan")
        .join(&cluster.name)
        .join("log/server.log");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// `curl` against the node as the operator user (DIGEST), reaching it under the client
/// Service's name: status code.
fn as_operator(
    cluster: &Cluster,
    address: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> anyhow::Result<u16> {
    let mut command = Command::new("curl");
    command.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", method]);
    command.args([
        "--digest",
        "-u",
        &format!(
            "{}:{}",
            credentials::OPERATOR_USERNAME,
            cluster.operator_password
        ),
    ]);
    let url = match &cluster.ca_pem {
        Some(_) => {
            let host = format!("{}.{NAMESPACE}.svc.{DOMAIN}", cluster.name);
            command.args([
                "--cacert",
                &cluster.dir.join("ca.pem").display().to_string(),
                "--resolve",
                &format!("{host}:{}:127.0.0.1", address.port()),
            ]);
            format!("https://{host}:{}{path}", address.port())
        }
        None => format!("http://{address}{path}"),
    };
    if let Some(body) = body {
        // A cache configuration is JSON; entries are text.
        let content_type = if body.starts_with('{') {
            "application/json"
        } else {
            "text/plain; charset=UTF-8"
        };
        command.args([
            "-H",
            &format!("Content-Type: {content_type}"),
            "--data",
            body,
        ]);
    }
    let output = command.arg(url).output().context("running curl")?;
    Ok(String::from_utf8_lossy(&output.stdout).trim().parse()?)
}

/// A cache with statistics, three entries, a hit and a miss.
fn some_traffic(cluster: &Cluster, address: SocketAddr) -> anyhow::Result<()> {
    let created = as_operator(
        cluster,
        address,
        "POST",
        "/rest/v2/caches/orders",
        Some(r#"{"distributed-cache":{"mode":"SYNC","statistics":true}}"#),
    )?;
    ensure!(
        created == 200 || created == 204,
        "creating the cache: {created}; the server's log:\n{}",
        log_tail(cluster)
    );
    for key in ["a", "b", "c"] {
        let put = as_operator(
            cluster,
            address,
            "PUT",
            &format!("/rest/v2/caches/orders/{key}"),
            Some("v"),
        )?;
        ensure!(put == 204 || put == 200, "put {key}: {put}");
    }
    ensure!(as_operator(cluster, address, "GET", "/rest/v2/caches/orders/a", None)? == 200);
    ensure!(as_operator(cluster, address, "GET", "/rest/v2/caches/orders/zz", None)? == 404);
    Ok(())
}

fn endpoint(cluster: &Cluster) -> anyhow::Result<server::Endpoint> {
    let Monitoring::ServiceMonitor(monitor) = &cluster.objects.monitoring else {
        bail!("no ServiceMonitor: {:?}", cluster.objects.monitoring);
    };
    let [endpoint] = &monitor.spec.endpoints[..] else {
        bail!("one endpoint expected: {:?}", monitor.spec.endpoints);
    };
    Ok(endpoint.clone())
}

/// The value of a sample line (`name{labels} value [timestamp]`).
fn value(sample: &str) -> Option<f64> {
    let after_labels = sample.rsplit_once('}').map_or(sample, |(_, rest)| rest);
    after_labels.split_whitespace().next()?.parse().ok()
}

fn ensure_metrics(scraped: &Scraped) -> anyhow::Result<()> {
    ensure!(
        scraped.status == 200,
        "scrape: {} {}",
        scraped.status,
        scraped.body
    );
    let content_type = scraped.header("content-type").unwrap_or_default();
    // Prometheus asks for OpenMetrics first, the text format next: the server answers the first.
    ensure!(
        content_type.starts_with("application/openmetrics-text")
            || content_type.starts_with("text/plain"),
        "content type {content_type}"
    );
    let names = scraped.metric_names();
    for expected in [
        "infinispan_cluster_size",
        "jvm_memory_used_bytes",
        "process_cpu_usage",
    ] {
        ensure!(names.contains(expected), "no {expected} in the scrape");
    }
    let size: Vec<&str> = scraped.samples("infinispan_cluster_size").collect();
    ensure!(
        size.iter().any(|s| value(s) == Some(1.0)),
        "cluster size: {size:?}"
    );
    Ok(())
}

#[tokio::test]
async fn with_tls_prometheus_scrapes_as_the_metrics_user_and_gets_the_servers_metrics()
-> anyhow::Result<()> {
    e2e::Testbed::get()?;
    // The defaults of a new cluster: TLS Generated, authentication on, a ServiceMonitor.
    let cluster = prepare(
        "mon-tls",
        json!({
            "replicas": 1, "version": "16.0.7",
            "security": {"endpointEncryption": {"type": "Generated"}, "transportEncryption": {"type": "None"}}
        }),
    )?;
    let endpoint = endpoint(&cluster)?;
    ensure!(endpoint.scheme == "https" && endpoint.path == "/metrics");
    let auth = endpoint.basic_auth.clone().context("no basicAuth")?;
    ensure!(auth.username.name == format!("{}-metrics-credentials", cluster.name));
    ensure!(cluster.secret_key(&auth.username)? == server::METRICS_USERNAME);
    let (_node, address) = start(&cluster, 2070)?;
    some_traffic(&cluster, address)?;

    let scraped = scrape(address, &endpoint, &cluster)?;
    ensure_metrics(&scraped)?;
    let hits: Vec<&str> = scraped
        .samples("infinispan_statistics_hits")
        .filter(|s| s.contains(r#"cache="orders""#))
        .collect();
    ensure!(
        hits.iter().any(|s| value(s) == Some(1.0)),
        "the cache's hits: {hits:?}"
    );
    let stores: Vec<&str> = scraped
        .samples("infinispan_statistics_stores")
        .filter(|s| s.contains(r#"cache="orders""#))
        .collect();
    ensure!(
        stores.iter().any(|s| value(s) == Some(3.0)),
        "the cache's stores: {stores:?}"
    );
    // Every metric the servers' dashboard queries (but Prometheus' own `up`) is served.
    let dashboard: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        e2e::repo_root().join("helm/infinispan-operator/files/grafana-dashboard-servers.json"),
    )?)?;
    let served = scraped.metric_names();
    let missing: Vec<String> = dashboard_metric_names(&dashboard)
        .into_iter()
        .filter(|name| name != "up" && !served.contains(name))
        .collect();
    ensure!(
        missing.is_empty(),
        "the servers' dashboard queries metrics the server does not serve: {missing:?}"
    );

    // Without credentials, or with another password: refused.
    let anonymous = server::Endpoint {
        basic_auth: None,
        ..endpoint.clone()
    };
    ensure!(scrape(address, &anonymous, &cluster)?.status == 401);
    struct Wrong<'a>(&'a Cluster);
    impl Resolve for Wrong<'_> {
        fn secret_key(&self, selector: &SecretKeySelector) -> anyhow::Result<String> {
            let value = self.0.secret_key(selector)?;
            Ok(if selector.key == "password" {
                format!("{value}x")
            } else {
                value
            })
        }
        fn config_map_key(&self, selector: &ConfigMapKeySelector) -> anyhow::Result<String> {
            self.0.config_map_key(selector)
        }
    }
    ensure!(scrape(address, &endpoint, &Wrong(&cluster))?.status == 401);
    // A server name the certificate does not carry: the TLS check fails.
    let mut elsewhere = endpoint.clone();
    if let Some(tls) = elsewhere.tls_config.as_mut() {
        tls.server_name = Some("other.metrics.svc.cluster.local".into());
    }
    ensure!(scrape(address, &elsewhere, &cluster).is_err());

    // The metrics user (role monitor) cannot create a cache.
    let user = cluster.secret_key(&auth.username)?;
    let password = cluster.secret_key(&auth.password)?;
    let host = format!("{}.{NAMESPACE}.svc.{DOMAIN}", cluster.name);
    let output = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
        .args(["-u", &format!("{user}:{password}")])
        .args([
            "--cacert",
            &cluster.dir.join("ca.pem").display().to_string(),
        ])
        .args(["--resolve", &format!("{host}:{}:127.0.0.1", address.port())])
        .args(["-H", "Content-Type: application/json"])
        .args(["--data", r#"{"local-cache":{}}"#])
        .arg(format!(
            "https://{host}:{}/rest/v2/caches/not-mine",
            address.port()
        ))
        .output()?;
    let status = String::from_utf8_lossy(&output.stdout).trim().to_string();
    ensure!(
        status == "403",
        "the metrics user creating a cache: {status}"
    );
    Ok(())
}

#[tokio::test]
async fn anonymous_metrics_are_scraped_in_clear_while_the_rest_api_stays_closed()
-> anyhow::Result<()> {
    e2e::Testbed::get()?;
    // Authenticated metrics without TLS: no ServiceMonitor (no scraper can authenticate).
    let closed = prepare(
        "mon-closed",
        json!({
            "replicas": 1, "version": "16.0.7",
            "security": {"endpointEncryption": {"type": "None"}, "transportEncryption": {"type": "None"}}
        }),
    )?;
    ensure!(closed.objects.monitoring == Monitoring::NeedsTls);
    drop(closed);

    let cluster = prepare(
        "mon-open",
        json!({
            "replicas": 1, "version": "16.0.7",
            "security": {"endpointEncryption": {"type": "None"}, "transportEncryption": {"type": "None"}},
            "monitoring": {"metricsAuthentication": false}
        }),
    )?;
    let endpoint = endpoint(&cluster)?;
    ensure!(
        endpoint.scheme == "http" && endpoint.basic_auth.is_none() && endpoint.tls_config.is_none()
    );
    ensure!(!server::metrics_user_needed(&Infinispan::new(
        "x",
        serde_json::from_value(json!({"monitoring": {"metricsAuthentication": false}}))?
    )));
    let (_node, address) = start(&cluster, 2071)?;
    some_traffic(&cluster, address)?;
    let scraped = scrape(address, &endpoint, &cluster)?;
    ensure_metrics(&scraped)?;

    // Everything else still asks for credentials; BASIC in clear is refused (403), DIGEST works.
    let curl = |args: &[&str], path: &str| -> anyhow::Result<String> {
        let output = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
            .args(args)
            .arg(format!("http://{address}{path}"))
            .output()?;
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    };
    ensure!(curl(&[], "/rest/v2/caches")? == "401");
    ensure!(curl(&[], "/rest/v2/server/config")? == "401");
    let operator = format!(
        "{}:{}",
        credentials::OPERATOR_USERNAME,
        cluster.operator_password
    );
    ensure!(curl(&["-u", &operator], "/rest/v2/caches")? == "403");
    ensure!(curl(&["--digest", "-u", &operator], "/rest/v2/caches")? == "200");
    Ok(())
}
