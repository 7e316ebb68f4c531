//! Shared helpers of the integration tests: the testbed's env file, unique names, a plain-HTTP
//! "other client" (curl), and private server nodes started and stopped by the tests.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use infinispan_rest::{
    AuthMethod, Client, ClientConfig, ConfigEventStream, Credentials, StreamItem,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crate has a parent")
        .to_path_buf()
}

/// The testbed's variables. Fails (never skips) when the testbed is not up.
#[derive(Debug, Clone)]
pub struct Testbed {
    pub url: String,
    pub user: String,
    pub password: String,
    pub version: String,
    pub run_dir: PathBuf,
}

pub fn testbed() -> Testbed {
    let run_dir = std::env::var("TESTBED_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo_root().join("target/testbed"));
    let file = run_dir.join("env");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!(
            "the testbed is not up ({}: {e}): run `make testbed-up` first",
            file.display()
        )
    });
    let mut vars = HashMap::new();
    for line in text.lines() {
        let line = line.trim().trim_start_matches("export ").trim();
        if let Some((k, v)) = line.split_once('=') {
            vars.insert(k.to_owned(), v.trim_matches('"').to_owned());
        }
    }
    let get = |k: &str| {
        vars.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("{k} missing in {}: run `make testbed-up`", file.display()))
    };
    Testbed {
        url: get("INFINISPAN_URL"),
        user: get("INFINISPAN_USER"),
        password: get("INFINISPAN_PASSWORD"),
        version: get("INFINISPAN_VERSION"),
        run_dir,
    }
}

impl Testbed {
    pub fn credentials(&self) -> Credentials {
        Credentials::new(&self.user, &self.password)
    }
    pub fn config(&self) -> ClientConfig {
        ClientConfig::new(&self.url).with_credentials(self.credentials())
    }
    pub fn client(&self) -> Client {
        Client::new(self.config()).expect("client")
    }
    pub fn client_with(&self, auth: AuthMethod) -> Client {
        Client::new(self.config().with_auth(auth)).expect("client")
    }
    /// A client of the testbed's server through a loopback proxy listening on `port`.
    pub fn client_via(&self, port: u16) -> Client {
        Client::new(
            ClientConfig::new(format!("http://127.0.0.1:{port}"))
                .with_credentials(self.credentials()),
        )
        .expect("client")
    }

    /// A plain HTTP call by another client (curl, BASIC), for changes the stream must see.
    /// Returns (status, body).
    pub fn curl(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&str>,
    ) -> (u16, String) {
        curl_at(
            &self.url,
            &self.user,
            &self.password,
            method,
            path,
            content_type,
            body,
        )
    }
}

pub fn curl_at(
    base: &str,
    user: &str,
    password: &str,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Option<&str>,
) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-m", "30", "-X", method, "-w", "\n%{http_code}"]);
    // credentials through a config on stdin would be nicer; the testbed password is throwaway
    cmd.arg("-u").arg(format!("{user}:{password}"));
    if let Some(ct) = content_type {
        cmd.arg("-H").arg(format!("Content-Type: {ct}"));
    }
    if let Some(b) = body {
        cmd.arg("--data-binary").arg(b);
    }
    cmd.arg(format!("{base}{path}"));
    let out = cmd.output().expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// A unique object name: `<prefix>-<random>`.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{:08x}", fastrand::u32(..))
}

/// Options of [`Node::start_with`]; the defaults are those of [`Node::start`].
#[derive(Debug, Clone, Default)]
pub struct NodeOptions {
    /// JGroups cluster name (default `<name>-cluster`, a cluster of its own).
    pub cluster: Option<String>,
    /// TCPPING initial hosts, e.g. `127.0.0.1[18980],127.0.0.1[18981]`.
    pub peers: Option<String>,
    /// A server XML file under e2e/testbed/infinispan.
    pub config: Option<String>,
    /// Files copied into the node's conf dir before it starts.
    pub conf_files: Vec<PathBuf>,
    /// The CA of a TLS node: its health is probed over https and its URL is https.
    pub ca: Option<PathBuf>,
}

/// A private server node of the testbed, stopped and wiped on drop.
#[derive(Debug)]
pub struct Node {
    pub name: String,
    pub offset: u16,
    pub url: String,
}

fn script() -> PathBuf {
    repo_root().join("e2e/testbed/infinispan.sh")
}

impl Node {
    /// Starts a node of its own cluster. `config`: a server XML file under e2e/testbed/infinispan.
    pub fn start(name: &str, offset: u16, jgroups_port: u16, config: Option<&str>) -> Node {
        let tb = testbed();
        let mut cmd = Command::new(script());
        cmd.env("TESTBED_RUN_DIR", &tb.run_dir)
            .args(["start", name, "--offset"])
            .arg(offset.to_string())
            .arg("--cluster")
            .arg(format!("{name}-cluster"))
            .arg("--jgroups-port")
            .arg(jgroups_port.to_string());
        if let Some(c) = config {
            cmd.arg("--config")
                .arg(repo_root().join("e2e/testbed/infinispan").join(c));
        }
        let node = Node {
            name: name.to_owned(),
            offset,
            url: format!("http://127.0.0.1:{}", 11222 + offset),
        };
        let out = cmd.output().expect("infinispan.sh runs");
        assert!(
            out.status.success(),
            "starting node {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        node
    }

    /// Starts a node with every option of `infinispan.sh start` (own cluster name and peers
    /// for multi-node clusters, extra conf files and a CA for TLS nodes). The URL is https when
    /// `options.ca` is set. Stopped and wiped on drop, also when the start fails.
    pub fn start_with(name: &str, offset: u16, jgroups_port: u16, options: &NodeOptions) -> Node {
        let tb = testbed();
        let mut cmd = Command::new(script());
        cmd.env("TESTBED_RUN_DIR", &tb.run_dir)
            .args(["start", name, "--offset"])
            .arg(offset.to_string())
            .arg("--cluster")
            .arg(
                options
                    .cluster
                    .clone()
                    .unwrap_or_else(|| format!("{name}-cluster")),
            )
            .arg("--jgroups-port")
            .arg(jgroups_port.to_string());
        if let Some(p) = &options.peers {
            cmd.arg("--peers").arg(p);
        }
        if let Some(c) = &options.config {
            cmd.arg("--config")
                .arg(repo_root().join("e2e/testbed/infinispan").join(c));
        }
        for f in &options.conf_files {
            cmd.arg("--conf-file").arg(f);
        }
        if let Some(ca) = &options.ca {
            cmd.arg("--ca").arg(ca);
        }
        let scheme = if options.ca.is_some() {
            "https"
        } else {
            "http"
        };
        let node = Node {
            name: name.to_owned(),
            offset,
            url: format!("{scheme}://127.0.0.1:{}", 11222 + offset),
        };
        let out = cmd.output().expect("infinispan.sh runs");
        assert!(
            out.status.success(),
            "starting node {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        node
    }

    /// The node's server root (conf/, data/, log/).
    pub fn root(&self) -> PathBuf {
        testbed().run_dir.join("infinispan").join(&self.name)
    }

    /// Stops the node (state kept) and starts it again with the same settings.
    pub fn restart(&self, jgroups_port: u16, config: Option<&str>) {
        self.stop(false);
        let again = Node::start(&self.name, self.offset, jgroups_port, config);
        std::mem::forget(again);
    }

    pub fn stop(&self, wipe: bool) {
        let tb = testbed();
        let mut cmd = Command::new(script());
        cmd.env("TESTBED_RUN_DIR", &tb.run_dir)
            .args(["stop", &self.name]);
        if wipe {
            cmd.arg("--wipe");
        }
        let _ = cmd.output();
    }

    pub fn client(&self) -> Client {
        let tb = testbed();
        Client::new(ClientConfig::new(&self.url).with_credentials(tb.credentials()))
            .expect("client")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop(true);
    }
}

/// The next stream item within `timeout`.
pub async fn next_item(stream: &mut ConfigEventStream, timeout: Duration) -> StreamItem {
    tokio::time::timeout(timeout, stream.next())
        .await
        .expect("a stream item in time")
        .expect("the stream never ends")
}

/// Skips items until `pred` matches (returns it), failing after `timeout`.
pub async fn wait_for<F: FnMut(&StreamItem) -> bool>(
    stream: &mut ConfigEventStream,
    timeout: Duration,
    mut pred: F,
    what: &str,
) -> StreamItem {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, stream.next()).await {
            Ok(Some(item)) => {
                if pred(&item) {
                    return item;
                }
            }
            Ok(None) => panic!("stream ended while waiting for {what}"),
            Err(_) => panic!("timed out after {timeout:?} waiting for {what}"),
        }
    }
}

/// A `HEAD` on a new connection; the status and the `WWW-Authenticate` values.
pub async fn raw_head(base: &str, path: &str, authorization: Option<&str>) -> (u16, Vec<String>) {
    let host = base.strip_prefix("http://").expect("a plain-HTTP node");
    let host = host.trim_end_matches('/');
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(host).await.expect("connect");
    let auth = authorization
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let request =
        format!("HEAD {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    conn.read_to_string(&mut response).await.expect("read");
    let mut lines = response.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let challenges = lines
        .filter_map(|l| l.split_once(':'))
        .filter(|(name, _)| name.eq_ignore_ascii_case("www-authenticate"))
        .map(|(_, value)| value.trim().to_owned())
        .collect();
    (status, challenges)
}

/// One connection of a [`start_freezing_proxy`]: its freeze flag and the bytes it carried
/// from the server.
pub type Link = (Arc<AtomicBool>, Arc<AtomicU64>);

/// A loopback TCP proxy whose connections can be frozen one by one (sockets stay open, bytes
/// vanish) while the others, and new ones, flow.
pub async fn start_freezing_proxy(upstream: String) -> (u16, Arc<Mutex<Vec<Link>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let links: Arc<Mutex<Vec<Link>>> = Arc::default();
    let all = links.clone();
    tokio::spawn(async move {
        while let Ok((down, _)) = listener.accept().await {
            let Ok(up) = TcpStream::connect(&upstream).await else {
                continue;
            };
            let link: Link = Default::default();
            all.lock().expect("links").push(link.clone());
            let (dr, dw) = down.into_split();
            let (ur, uw) = up.into_split();
            tokio::spawn(pump(dr, uw, link.0.clone(), None));
            tokio::spawn(pump(ur, dw, link.0, Some(link.1)));
        }
    });
    (port, links)
}

/// Forwards `from` to `to` until either ends; while `blackhole` is set, bytes vanish and an
/// end is never told (a silently dead peer). `carried` counts the bytes forwarded.
pub async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    blackhole: Arc<AtomicBool>,
    carried: Option<Arc<AtomicU64>>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                if !blackhole.load(Ordering::SeqCst) {
                    let _ = to.shutdown().await;
                    return;
                }
                // silently dead: never tell the other side
                std::future::pending::<()>().await;
            }
            Ok(n) => {
                if blackhole.load(Ordering::SeqCst) {
                    continue;
                }
                if to.write_all(&buf[..n]).await.is_err() {
                    return;
                }
                if let Some(carried) = &carried {
                    carried.fetch_add(n as u64, Ordering::SeqCst);
                }
            }
        }
    }
}
