//! The small HTTP endpoint of an operator process: `/metrics` (the text exposition of the
//! operator's Prometheus registry), `/healthz` (200 while the process can do its work; 503 with
//! the reason once a part of it stopped for good, [`Readiness::fail`], so that the kubelet
//! restarts it) and `/readyz` (200 once [`Readiness`] says so, else 503 with what the process
//! waits for).
//!
//! A minimal HTTP/1.1 responder on a Tokio listener (GET only, one request per connection):
//! operators need nothing more and it keeps the binaries small. Bounded: at most
//! [`MAX_CONNECTIONS`] connections at once (more are closed at once, unanswered), and each has
//! [`IO_TIMEOUT`] to send its request and [`IO_TIMEOUT`] to take the answer, so idle or slow
//! clients cannot pile up.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use prometheus::{Encoder, Registry, TextEncoder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Connections served at once; more are closed unanswered (a scraper and the kubelet's probes
/// need a handful).
pub const MAX_CONNECTIONS: usize = 32;
/// Bound on reading a request, and on writing its answer.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// What `/readyz` says while the process is not ready, unless the operator says better.
const NOT_READY: &str = "not ready yet";

/// Readiness, set once and never withdrawn: ready as a whole ([`Readiness::set_ready`], e.g. a
/// standby of the leader election), or once every expected part said so
/// ([`Readiness::expect_parts`], [`Readiness::part_ready`]; e.g. one part per controller that
/// needs a first complete view before it may act). Clones share the state.
#[derive(Debug, Clone)]
pub struct Readiness {
    ready: Arc<AtomicBool>,
    /// Parts that must be ready, and how many are.
    expected: Arc<AtomicUsize>,
    parts: Arc<AtomicUsize>,
    /// The body of `/readyz` while not ready.
    waiting_for: &'static str,
    /// Why the process can no longer do its work (set once).
    failed: Arc<std::sync::OnceLock<String>>,
}

impl Default for Readiness {
    fn default() -> Self {
        Self::new(NOT_READY)
    }
}

impl Readiness {
    /// Not ready; `/readyz` answers `waiting_for` meanwhile (say what the process waits for).
    pub fn new(waiting_for: &'static str) -> Self {
        Self {
            ready: Arc::default(),
            expected: Arc::default(),
            parts: Arc::default(),
            waiting_for,
            failed: Arc::default(),
        }
    }

    /// A part of the process stopped for good (e.g. a controller or a stream whose task
    /// ended): `/healthz` and `/readyz` answer 503 with `reason` from now on, so that the
    /// kubelet restarts the process. The first reason stays.
    pub fn fail(&self, reason: impl Into<String>) {
        let reason = reason.into();
        tracing::error!(
            reason,
            "a part of the operator stopped: /healthz fails from now on"
        );
        let _ = self.failed.set(reason);
    }

    /// Why the process can no longer do its work, once it cannot.
    pub fn failure(&self) -> Option<&str> {
        self.failed.get().map(String::as_str)
    }

    /// Ready as a whole.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    /// `n` parts must say [`Readiness::part_ready`] before the process is ready.
    pub fn expect_parts(&self, n: usize) {
        self.expected.store(n, Ordering::Relaxed);
    }

    /// One part is ready.
    pub fn part_ready(&self) {
        self.parts.fetch_add(1, Ordering::Relaxed);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed) || {
            let expected = self.expected.load(Ordering::Relaxed);
            expected > 0 && self.parts.load(Ordering::Relaxed) >= expected
        }
    }
}

/// The text exposition of every metric of `registry`.
pub fn render(registry: &Registry) -> String {
    let mut buffer = Vec::new();
    if let Err(error) = TextEncoder::new().encode(&registry.gather(), &mut buffer) {
        tracing::warn!(%error, "cannot encode metrics");
    }
    String::from_utf8_lossy(&buffer).into_owned()
}

/// Binds the endpoint (so that a bad address fails at startup, before anything else runs).
pub async fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(address).await
}

/// Serves the endpoint until the task is dropped.
pub async fn serve(listener: TcpListener, registry: Registry, readiness: Readiness) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (mut socket, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "metrics endpoint: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            tracing::debug!("metrics endpoint: too many connections; one closed unanswered");
            drop(socket);
            continue;
        };
        let registry = registry.clone();
        let readiness = readiness.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let mut buffer = vec![0u8; 4096];
            let read = tokio::time::timeout(IO_TIMEOUT, socket.read(&mut buffer)).await;
            let Ok(Ok(n)) = read else { return };
            let request = String::from_utf8_lossy(&buffer[..n]);
            let path = request
                .lines()
                .next()
                .and_then(|line| line.split_whitespace().nth(1))
                .unwrap_or("/");
            let (status, content_type, body) = respond(path, &registry, &readiness);
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            match tokio::time::timeout(IO_TIMEOUT, socket.write_all(response.as_bytes())).await {
                Ok(Ok(())) => {
                    let _ = tokio::time::timeout(IO_TIMEOUT, socket.shutdown()).await;
                }
                Ok(Err(error)) => tracing::debug!(%error, "metrics endpoint: write failed"),
                Err(_) => tracing::debug!("metrics endpoint: the client took too long to read"),
            }
        });
    }
}

fn respond(
    path: &str,
    registry: &Registry,
    readiness: &Readiness,
) -> (&'static str, &'static str, String) {
    const TEXT: &str = "text/plain; charset=utf-8";
    if let (Some(reason), "/healthz" | "/readyz") = (readiness.failure(), path) {
        return ("503 Service Unavailable", TEXT, format!("{reason}\n"));
    }
    match path {
        "/metrics" => ("200 OK", "text/plain; version=0.0.4", render(registry)),
        "/healthz" => ("200 OK", TEXT, "ok\n".to_string()),
        "/readyz" if readiness.is_ready() => ("200 OK", TEXT, "ready\n".to_string()),
        "/readyz" => (
            "503 Service Unavailable",
            TEXT,
            format!("{}\n", readiness.waiting_for),
        ),
        _ => ("404 Not Found", TEXT, "not found\n".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readyz_follows_readiness() {
        let registry = Registry::new();
        let readiness = Readiness::new("waiting for the Lease");
        let (status, _, body) = respond("/readyz", &registry, &readiness);
        assert_eq!(status, "503 Service Unavailable");
        assert_eq!(body, "waiting for the Lease\n");
        readiness.set_ready();
        assert_eq!(respond("/readyz", &registry, &readiness).0, "200 OK");
        assert_eq!(respond("/healthz", &registry, &readiness).0, "200 OK");
        assert_eq!(respond("/nope", &registry, &readiness).0, "404 Not Found");
    }

    #[test]
    fn a_failed_part_fails_healthz_and_readyz_with_its_reason() {
        let registry = Registry::new();
        let readiness = Readiness::default();
        readiness.set_ready();
        readiness.fail("the config stream stopped");
        readiness.fail("a second reason");
        for path in ["/healthz", "/readyz"] {
            let (status, _, body) = respond(path, &registry, &readiness);
            assert_eq!(status, "503 Service Unavailable", "{path}");
            assert_eq!(body, "the config stream stopped\n", "{path}");
        }
        assert_eq!(respond("/metrics", &registry, &readiness).0, "200 OK");
    }

    #[test]
    fn readiness_counts_parts() {
        let readiness = Readiness::default();
        // No part expected yet: not ready (the parts are not known).
        readiness.part_ready();
        assert!(!readiness.is_ready());
        readiness.expect_parts(2);
        assert!(!readiness.is_ready());
        let clone = readiness.clone();
        clone.part_ready();
        assert!(readiness.is_ready());
    }

    #[test]
    fn metrics_are_the_registrys() -> Result<(), prometheus::Error> {
        let registry = Registry::new_custom(Some("an_operator".to_string()), None)?;
        let counter = prometheus::IntCounter::new("things_total", "Things")?;
        registry.register(Box::new(counter.clone()))?;
        counter.inc();
        let (status, content_type, body) = respond("/metrics", &registry, &Readiness::default());
        assert_eq!(status, "200 OK");
        assert_eq!(content_type, "text/plain; version=0.0.4");
        assert!(body.contains("an_operator_things_total 1"), "{body}");
        Ok(())
    }

    #[tokio::test]
    async fn serves_over_tcp() -> std::io::Result<()> {
        let listener = bind("127.0.0.1:0".parse().map_err(std::io::Error::other)?).await?;
        let address = listener.local_addr()?;
        let readiness = Readiness::default();
        let server = tokio::spawn(serve(listener, Registry::new(), readiness.clone()));
        let get = |path: &'static str| async move {
            let mut socket = tokio::net::TcpStream::connect(address).await?;
            socket
                .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .await?;
            let mut response = String::new();
            socket.read_to_string(&mut response).await?;
            Ok::<_, std::io::Error>(response)
        };
        assert!(get("/readyz").await?.starts_with("HTTP/1.1 503"));
        readiness.set_ready();
        let ready = get("/readyz").await?;
        assert!(ready.starts_with("HTTP/1.1 200 OK"), "{ready}");
        assert!(ready.ends_with("\r\n\r\nready\n"), "{ready}");
        server.abort();
        Ok(())
    }

    /// Idle connections hold at most `MAX_CONNECTIONS` slots, each for at most `IO_TIMEOUT`:
    /// one more is closed unanswered, and once the idle ones time out the endpoint answers
    /// again.
    #[tokio::test]
    async fn idle_connections_are_bounded_in_number_and_time() -> std::io::Result<()> {
        let listener = bind("127.0.0.1:0".parse().map_err(std::io::Error::other)?).await?;
        let address = listener.local_addr()?;
        let server = tokio::spawn(serve(listener, Registry::new(), Readiness::default()));
        let mut idle = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            idle.push(tokio::net::TcpStream::connect(address).await?);
        }
        // Let the server take them all.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let healthz = async || {
            let mut socket = tokio::net::TcpStream::connect(address).await?;
            socket
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                .await?;
            let mut response = String::new();
            socket.read_to_string(&mut response).await?;
            Ok::<_, std::io::Error>(response)
        };
        let refused = healthz().await.unwrap_or_default();
        assert!(refused.is_empty(), "answered past the limit: {refused}");
        tokio::time::sleep(IO_TIMEOUT + Duration::from_secs(1)).await;
        let answered = healthz().await?;
        assert!(answered.starts_with("HTTP/1.1 200 OK"), "{answered}");
        drop(idle);
        server.abort();
        Ok(())
    }
}
