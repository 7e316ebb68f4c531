//! A scrape the way Prometheus does it for one endpoint of a `ServiceMonitor`
//! (`cluster_operator::build::server::Endpoint`): a GET of `path` on the target's address with
//! the endpoint's scheme; over TLS, the certificate checked against the endpoint's CA (or no
//! extra CA: the system roots are not loaded here, so a CA is required) and `serverName` (the
//! target is a pod address, never the name); BASIC credentials sent with the first request (no
//! challenge round trip: Prometheus does not answer challenges, so DIGEST never works); the
//! `Accept` header of Prometheus' text-format scrapes. Independent of the project's REST client.
//!
//! The Secret and ConfigMap keys the endpoint names are resolved by the caller ([`Resolve`]):
//! from the objects a test built, or read from the API server.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use base64::Engine;
use cluster_operator::build::server::{Endpoint, SecretOrConfigMap};
use k8s_openapi::api::core::v1::{ConfigMapKeySelector, SecretKeySelector};
use rustls_pki_types::pem::PemObject;

/// Prometheus' `Accept` header for a scrape that accepts the text format.
pub const PROMETHEUS_ACCEPT: &str =
    "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.1";

/// What a scrape got.
#[derive(Debug, Clone)]
pub struct Scraped {
    pub status: u16,
    /// The response's headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Scraped {
    /// The first value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The metric names of the body (Prometheus text format): each sample's name, once.
    pub fn metric_names(&self) -> std::collections::BTreeSet<String> {
        self.body
            .lines()
            .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
            .filter_map(|line| line.split(['{', ' ']).next())
            .map(str::to_string)
            .collect()
    }

    /// The samples of metric `name` (whole lines).
    pub fn samples<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.body.lines().filter(move |line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
    }
}

/// Where the values an endpoint names come from.
pub trait Resolve {
    fn secret_key(&self, selector: &SecretKeySelector) -> anyhow::Result<String>;
    fn config_map_key(&self, selector: &ConfigMapKeySelector) -> anyhow::Result<String>;
}

/// Scrapes `target` (a pod's address) as Prometheus would for `endpoint`.
pub fn scrape(
    target: SocketAddr,
    endpoint: &Endpoint,
    resolve: &dyn Resolve,
) -> anyhow::Result<Scraped> {
    let Endpoint {
        port: _,
        path,
        scheme,
        tls_config,
        basic_auth,
    } = endpoint;
    let mut request = format!(
        "GET {path} HTTP/1.1\r\nHost: {target}\r\nUser-Agent: Prometheus/e2e\r\nAccept: {PROMETHEUS_ACCEPT}\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\nConnection: close\r\n"
    );
    if let Some(auth) = basic_auth {
        let user = resolve.secret_key(&auth.username)?;
        let password = resolve.secret_key(&auth.password)?;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        request.push_str(&format!("Authorization: Basic {token}\r\n"));
    }
    request.push_str("\r\n");
    let tcp = TcpStream::connect_timeout(&target, Duration::from_secs(10))
        .with_context(|| format!("connecting to {target}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let raw = match scheme.as_str() {
        "http" => exchange(tcp, &request)?,
        "https" => {
            let tls = tls_config
                .as_ref()
                .context("https without a tlsConfig: no CA to check the server with")?;
            let ca_pem = match &tls.ca {
                Some(SecretOrConfigMap {
                    secret: Some(secret),
                    config_map: None,
                }) => resolve.secret_key(secret)?,
                Some(SecretOrConfigMap {
                    secret: None,
                    config_map: Some(config_map),
                }) => resolve.config_map_key(config_map)?,
                other => bail!("tlsConfig.ca is {other:?}: one CA source expected"),
            };
            let server_name = tls
                .server_name
                .clone()
                .context("tlsConfig without serverName: a pod address is in no certificate")?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
                roots.add(cert.context("the CA's PEM")?)?;
            }
            ensure!(!roots.is_empty(), "the CA holds no certificate");
            let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots);
            // The client certificate the scraper presents (`cert`, `keySecret`), if any.
            let config = match (&tls.cert, &tls.key_secret) {
                (None, None) => builder.with_no_client_auth(),
                (
                    Some(SecretOrConfigMap {
                        secret: Some(cert),
                        config_map: None,
                    }),
                    Some(key),
                ) => {
                    let chain = resolve.secret_key(cert)?;
                    let chain = rustls_pki_types::CertificateDer::pem_slice_iter(chain.as_bytes())
                        .collect::<Result<Vec<_>, _>>()
                        .context("the client certificate's PEM")?;
                    let key = resolve.secret_key(key)?;
                    let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes())
                        .context("the client key's PEM")?;
                    builder.with_client_auth_cert(chain, key)?
                }
                other => {
                    bail!("tlsConfig.cert and keySecret are {other:?}: both from Secrets expected")
                }
            };
            let name = rustls_pki_types::ServerName::try_from(server_name.clone())
                .with_context(|| format!("serverName {server_name}"))?;
            let connection = rustls::ClientConnection::new(Arc::new(config), name)?;
            exchange(rustls::StreamOwned::new(connection, tcp), &request)?
        }
        other => bail!("scheme {other:?}"),
    };
    parse(&raw)
}

fn exchange(mut stream: impl Read + Write, request: &str) -> anyhow::Result<Vec<u8>> {
    stream.write_all(request.as_bytes())?;
    stream.flush()?;
    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw) {
        Ok(_) => {}
        // A TLS peer that closes without close_notify, after the whole response.
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(error) => return Err(error.into()),
    }
    Ok(raw)
}

/// An HTTP/1.1 response: status line, headers, body (plain or chunked).
fn parse(raw: &[u8]) -> anyhow::Result<Scraped> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of headers in the response")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    if chunked {
        let mut decoded = Vec::new();
        let mut rest = &body[..];
        loop {
            let line_end = rest
                .windows(2)
                .position(|w| w == b"\r\n")
                .context("a chunk size line")?;
            let size_text = String::from_utf8_lossy(&rest[..line_end]);
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                .with_context(|| format!("chunk size {size_text:?}"))?;
            rest = &rest[line_end + 2..];
            if size == 0 {
                break;
            }
            ensure!(rest.len() >= size, "a truncated chunk");
            decoded.extend_from_slice(&rest[..size]);
            rest = &rest[(size + 2).min(rest.len())..];
        }
        body = decoded;
    }
    Ok(Scraped {
        status,
        headers,
        body: String::from_utf8(body).context("the body is not UTF-8")?,
    })
}

/// The metric names a Grafana dashboard queries (its panels' `expr` and its variables'
/// queries): each identifier directly followed by `{`, and the first argument of
/// `label_values(...)`. `up` is Prometheus' own series of a target.
pub fn dashboard_metric_names(dashboard: &serde_json::Value) -> std::collections::BTreeSet<String> {
    fn scan(text: &str, out: &mut std::collections::BTreeSet<String>) {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i] as char;
            if c.is_ascii_alphabetic() || c == '_' {
                let start = i;
                while i < bytes.len()
                    && ((bytes[i] as char).is_ascii_alphanumeric() || bytes[i] == b'_')
                {
                    i += 1;
                }
                let token = &text[start..i];
                let before = &text[..start];
                // Not a label matcher's value or a string: those are inside quotes.
                let quoted = before.matches('"').count() % 2 == 1;
                if !quoted && (text[i..].starts_with('{') || before.ends_with("label_values(")) {
                    out.insert(token.to_string());
                }
            } else {
                i += 1;
            }
        }
    }
    fn walk(value: &serde_json::Value, out: &mut std::collections::BTreeSet<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    match (key.as_str(), value) {
                        ("expr" | "definition", serde_json::Value::String(text)) => scan(text, out),
                        _ => walk(value, out),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut names = std::collections::BTreeSet::new();
    walk(dashboard, &mut names);
    names
}

/// The Secrets and ConfigMaps an endpoint names, read from the API server (as the Prometheus
/// Operator reads them into Prometheus' configuration).
#[derive(Debug, Default)]
pub struct FromApi {
    secrets: std::collections::BTreeMap<String, k8s_openapi::api::core::v1::Secret>,
    config_maps: std::collections::BTreeMap<String, k8s_openapi::api::core::v1::ConfigMap>,
}

impl FromApi {
    /// Reads what `endpoint` names in `namespace`.
    pub async fn read(
        client: &kube::Client,
        namespace: &str,
        endpoint: &Endpoint,
    ) -> anyhow::Result<Self> {
        use k8s_openapi::api::core::v1::{ConfigMap, Secret};
        let secrets: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
        let config_maps: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), namespace);
        let mut found = Self::default();
        let mut secret_names = Vec::new();
        if let Some(auth) = &endpoint.basic_auth {
            secret_names.extend([auth.username.name.clone(), auth.password.name.clone()]);
        }
        if let Some(tls) = &endpoint.tls_config {
            if let Some(secret) = tls.cert.as_ref().and_then(|c| c.secret.as_ref()) {
                secret_names.push(secret.name.clone());
            }
            if let Some(key) = &tls.key_secret {
                secret_names.push(key.name.clone());
            }
        }
        if let Some(ca) = endpoint.tls_config.as_ref().and_then(|t| t.ca.as_ref()) {
            if let Some(secret) = &ca.secret {
                secret_names.push(secret.name.clone());
            }
            if let Some(config_map) = &ca.config_map {
                found.config_maps.insert(
                    config_map.name.clone(),
                    config_maps.get(&config_map.name).await?,
                );
            }
        }
        for name in secret_names {
            let secret = secrets.get(&name).await?;
            found.secrets.insert(name, secret);
        }
        Ok(found)
    }
}

impl Resolve for FromApi {
    fn secret_key(&self, selector: &SecretKeySelector) -> anyhow::Result<String> {
        let value = self
            .secrets
            .get(&selector.name)
            .and_then(|s| s.data.as_ref())
            .and_then(|d| d.get(&selector.key))
            .with_context(|| format!("no key {} in the Secret {}", selector.key, selector.name))?;
        Ok(String::from_utf8(value.0.clone())?)
    }

    fn config_map_key(&self, selector: &ConfigMapKeySelector) -> anyhow::Result<String> {
        self.config_maps
            .get(&selector.name)
            .and_then(|c| c.data.as_ref())
            .and_then(|d| d.get(&selector.key))
            .cloned()
            .with_context(|| format!("no key {} in the ConfigMap {}", selector.key, selector.name))
    }
}

/// The name of the Prometheus Operator's ServiceMonitor CRD.
pub const SERVICE_MONITOR_CRD: &str = "servicemonitors.monitoring.coreos.com";

/// Installs the tests' ServiceMonitor CRD (`e2e/testdata`, upstream's field names, unknown
/// fields pruned; cluster-wide) when it is missing, and waits until it is established and
/// discovery lists it; whether it installed it.
pub async fn ensure_service_monitor_crd(client: &kube::Client) -> anyhow::Result<bool> {
    crate::ensure_test_crd(
        client,
        SERVICE_MONITOR_CRD,
        "monitoring.coreos.com/v1",
        "servicemonitors",
    )
    .await
}
