//! Prometheus metrics (prefix `infinispan_resources_operator_`) and the small HTTP endpoint
//! serving `/metrics`, `/healthz` and `/readyz`.
//!
//! The endpoint is a minimal HTTP/1.1 responder on a Tokio listener (GET only, one request per
//! connection): the operator needs nothing more and it keeps the binary small.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Prefix of every metric name.
pub const PREFIX: &str = "infinispan_resources_operator";

/// The operator's metrics.
#[derive(Debug, Clone)]
pub struct Metrics {
    pub registry: Registry,
    /// Reconciles by kind and result (`nothing`, `wrote`, `wait`, `rejected`, `error`).
    pub reconciles: IntCounterVec,
    /// Duration of reconciles by kind.
    pub reconcile_duration: HistogramVec,
    /// Writes by kind, side (`server`, `kubernetes`) and operation.
    pub writes: IntCounterVec,
    /// Server objects known from the event stream, by kind.
    pub server_objects: IntGaugeVec,
    /// Connections of the config event stream (1 for the first).
    pub stream_connections: IntCounterVec,
    /// Disconnections of the server streams, by stream (`config`, `schemas`, `counters`,
    /// `tasks`).
    pub stream_disconnects: IntCounterVec,
    /// Config events received, by kind.
    pub stream_events: IntCounterVec,
    /// 1 while this process leads (holds the Lease, or runs without leader election), else 0.
    pub leader: IntGauge,
    /// Writes to the Lease by operation (`create`, `acquire`, `renew`, `release`).
    pub lease_writes: IntCounterVec,
    /// 1 while draining (design E5), by kind.
    pub draining: IntGaugeVec,
    /// 1 once drained: no CR of the kind holds the finalizer (design E5).
    pub drained: IntGaugeVec,
    /// Reconciles running now, by kind.
    pub reconciles_in_flight: IntGaugeVec,
    /// Reconcile requests the engine queued (server events, dependencies, resyncs) not started
    /// yet, by kind. Requests from CR watch events are queued inside kube-runtime and not
    /// counted.
    pub queue_depth: IntGaugeVec,
    /// From a server event that changed an object to the CR write it caused (S1, S2, S3), by
    /// kind.
    pub event_to_cr_seconds: HistogramVec,
    /// CRs the operator could not read (each watch event of one), by kind.
    pub invalid_crs: IntCounterVec,
}

impl Metrics {
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new_custom(Some(PREFIX.to_string()), None)?;
        let reconciles = IntCounterVec::new(
            Opts::new("reconciles_total", "Reconciles by kind and result"),
            &["kind", "result"],
        )?;
        let reconcile_duration = HistogramVec::new(
            HistogramOpts::new("reconcile_duration_seconds", "Duration of reconciles").buckets(
                vec![
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ],
            ),
            &["kind"],
        )?;
        let writes = IntCounterVec::new(
            Opts::new(
                "writes_total",
                "Writes by kind, side (server, kubernetes) and operation",
            ),
            &["kind", "side", "operation"],
        )?;
        let server_objects = IntGaugeVec::new(
            Opts::new(
                "server_objects",
                "Server objects known from the event stream",
            ),
            &["kind"],
        )?;
        let stream_connections = IntCounterVec::new(
            Opts::new(
                "stream_connections_total",
                "Connections of the server streams (config events; schema, counter, task feeds)",
            ),
            &["stream"],
        )?;
        let stream_disconnects = IntCounterVec::new(
            Opts::new(
                "stream_disconnects_total",
                "Disconnections of the server streams",
            ),
            &["stream"],
        )?;
        let stream_events = IntCounterVec::new(
            Opts::new("stream_events_total", "Config events received"),
            &["kind"],
        )?;
        registry.register(Box::new(reconciles.clone()))?;
        registry.register(Box::new(reconcile_duration.clone()))?;
        registry.register(Box::new(writes.clone()))?;
        registry.register(Box::new(server_objects.clone()))?;
        registry.register(Box::new(stream_connections.clone()))?;
        registry.register(Box::new(stream_disconnects.clone()))?;
        let leader = IntGauge::new(
            "leader",
            "1 while this process leads (holds the Lease or runs without leader election)",
        )?;
        let lease_writes = IntCounterVec::new(
            Opts::new("lease_writes_total", "Writes to the leader-election Lease"),
            &["operation"],
        )?;
        registry.register(Box::new(stream_events.clone()))?;
        registry.register(Box::new(leader.clone()))?;
        registry.register(Box::new(lease_writes.clone()))?;
        let draining = IntGaugeVec::new(
            Opts::new(
                "draining",
                "1 while draining (the Infinispan CR is deleted or disables the operator)",
            ),
            &["kind"],
        )?;
        let drained = IntGaugeVec::new(
            Opts::new(
                "drained",
                "1 once no CR of the kind holds the operator's finalizer while draining",
            ),
            &["kind"],
        )?;
        registry.register(Box::new(draining.clone()))?;
        registry.register(Box::new(drained.clone()))?;
        let reconciles_in_flight = IntGaugeVec::new(
            Opts::new("reconciles_in_flight", "Reconciles running now"),
            &["kind"],
        )?;
        let queue_depth = IntGaugeVec::new(
            Opts::new(
                "queue_depth",
                "Reconcile requests queued by the engine (server events, dependencies, resyncs) not started yet",
            ),
            &["kind"],
        )?;
        let event_to_cr_seconds = HistogramVec::new(
            HistogramOpts::new(
                "event_to_cr_seconds",
                "From a server event that changed an object to the CR write it caused",
            )
            .buckets(vec![
                0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            ]),
            &["kind"],
        )?;
        registry.register(Box::new(reconciles_in_flight.clone()))?;
        registry.register(Box::new(queue_depth.clone()))?;
        registry.register(Box::new(event_to_cr_seconds.clone()))?;
        let invalid_crs = IntCounterVec::new(
            Opts::new(
                "invalid_crs_total",
                "CRs the operator could not read (per watch event)",
            ),
            &["kind"],
        )?;
        registry.register(Box::new(invalid_crs.clone()))?;
        Ok(Self {
            registry,
            reconciles,
            reconcile_duration,
            writes,
            server_objects,
            stream_connections,
            stream_disconnects,
            stream_events,
            leader,
            lease_writes,
            draining,
            drained,
            reconciles_in_flight,
            queue_depth,
            event_to_cr_seconds,
            invalid_crs,
        })
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buffer = Vec::new();
        if let Err(error) = TextEncoder::new().encode(&self.registry.gather(), &mut buffer) {
            tracing::warn!(%error, "cannot encode metrics");
        }
        String::from_utf8_lossy(&buffer).into_owned()
    }
}

/// Readiness, set once and never withdrawn (design E7: it does not depend on leadership):
/// - a standby is Ready once it has read the Lease and found it held by another replica;
/// - the leader (or a process without leader election) is Ready once its engine has the first
///   snapshot of the server and the CR store is filled, for every kind. A standby that takes over later stays
///   Ready.
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    ready: Arc<AtomicBool>,
    /// Parts (one per kind's engine) that must be ready, and how many are.
    expected: Arc<AtomicUsize>,
    parts: Arc<AtomicUsize>,
}

impl Readiness {
    /// Ready as a whole (a standby that waits for the Lease).
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

/// Binds the endpoint (so that a bad address fails at startup).
pub async fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(address).await
}

/// Serves the endpoint until the task is dropped.
pub async fn serve(listener: TcpListener, metrics: Metrics, readiness: Readiness) {
    loop {
        let (mut socket, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "metrics endpoint: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let metrics = metrics.clone();
        let readiness = readiness.clone();
        tokio::spawn(async move {
            let mut buffer = vec![0u8; 4096];
            let read = tokio::time::timeout(Duration::from_secs(5), socket.read(&mut buffer)).await;
            let Ok(Ok(n)) = read else { return };
            let request = String::from_utf8_lossy(&buffer[..n]);
            let path = request
                .lines()
                .next()
                .and_then(|line| line.split_whitespace().nth(1))
                .unwrap_or("/");
            let (status, content_type, body) = respond(path, &metrics, &readiness);
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            if let Err(error) = socket.write_all(response.as_bytes()).await {
                tracing::debug!(%error, "metrics endpoint: write failed");
            }
            let _ = socket.shutdown().await;
        });
    }
}

fn respond(
    path: &str,
    metrics: &Metrics,
    readiness: &Readiness,
) -> (&'static str, &'static str, String) {
    const TEXT: &str = "text/plain; charset=utf-8";
    match path {
        "/metrics" => ("200 OK", "text/plain; version=0.0.4", metrics.render()),
        "/healthz" => ("200 OK", TEXT, "ok\n".to_string()),
        "/readyz" if readiness.is_ready() => ("200 OK", TEXT, "ready\n".to_string()),
        "/readyz" => (
            "503 Service Unavailable",
            TEXT,
            "waiting for the Lease or the first server snapshot\n".to_string(),
        ),
        _ => ("404 Not Found", TEXT, "not found\n".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prefixed_metrics() -> Result<(), prometheus::Error> {
        let metrics = Metrics::new()?;
        metrics
            .reconciles
            .with_label_values(&["Cache", "nothing"])
            .inc();
        let text = metrics.render();
        assert!(
            text.contains("infinispan_resources_operator_reconciles_total{kind=\"Cache\",result=\"nothing\"} 1"),
            "{text}"
        );
        Ok(())
    }

    #[test]
    fn leadership_is_exported() -> Result<(), prometheus::Error> {
        let metrics = Metrics::new()?;
        let text = metrics.render();
        assert!(
            text.contains("infinispan_resources_operator_leader 0"),
            "{text}"
        );
        metrics.leader.set(1);
        metrics.lease_writes.with_label_values(&["renew"]).inc();
        let text = metrics.render();
        assert!(
            text.contains("infinispan_resources_operator_leader 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "infinispan_resources_operator_lease_writes_total{operation=\"renew\"} 1"
            ),
            "{text}"
        );
        Ok(())
    }

    #[test]
    fn readyz_follows_readiness() -> Result<(), prometheus::Error> {
        let metrics = Metrics::new()?;
        let readiness = Readiness::default();
        assert_eq!(
            respond("/readyz", &metrics, &readiness).0,
            "503 Service Unavailable"
        );
        readiness.set_ready();
        assert_eq!(respond("/readyz", &metrics, &readiness).0, "200 OK");
        assert_eq!(respond("/healthz", &metrics, &readiness).0, "200 OK");
        Ok(())
    }
}
