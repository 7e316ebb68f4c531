//! Prometheus metrics of the sync (prefix `infinispan_resources_operator_`), in the registry
//! that `operator_runtime::endpoint` serves on `/metrics`; the leader election's metrics
//! (`leader`, `lease_writes_total`) are registered in it too.

use operator_runtime::leadership::ElectionMetrics;
use prometheus::{
    HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

use crate::engine::server_writes::WriteMetrics;

/// Prefix of every metric name.
pub const PREFIX: &str = "infinispan_resources_operator";

/// The log target of one line per server event that took a CR write, with its
/// `event_to_cr_ms` (the histogram's observation): the line's timestamp is when the write was
/// answered. Off at the default level; `--log-level info,resources_operator::latency=debug`
/// turns it on (the benchmark does, to split each change's time between the server, the
/// operator and the API server).
pub const LATENCY_LOG: &str = "resources_operator::latency";

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
    /// `leader` (1 while this process leads: holds the Lease, or runs without leader
    /// election) and `lease_writes_total` by operation.
    pub election: ElectionMetrics,
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
    /// From a server event that changed an object to the CR write it caused (S1, server objects
    /// appear as CRs; S2, server changes update the CR; S3, server removals delete the CR), by
    /// kind.
    pub event_to_cr_seconds: HistogramVec,
    /// The operator's writes of CRs (create, patch, status, delete), from request to answer,
    /// by kind: the API server's part of `event_to_cr_seconds`.
    pub cr_write_seconds: HistogramVec,
    /// CRs the operator could not read (each watch event of one), by kind.
    pub invalid_crs: IntCounterVec,
    /// Server objects without a CR because the API server refused their mirror CR (a CRD
    /// stricter than the server), by kind.
    pub objects_not_mirrored: IntGaugeVec,
    /// Drift checks of the server's documents (see `engine::drift`), by stream and result
    /// (`ok`, `error`).
    pub drift_checks: IntCounterVec,
    /// Server objects found changed without an event (drift), by kind.
    pub drift_detected: IntCounterVec,
    /// The window of server writes: its places now (`server_write_window`), the writes in
    /// flight (`server_writes_in_flight`), and the overload signals that shrank or paused it
    /// (`server_write_overloads_total`, by reason).
    pub server_writes: WriteMetrics,
}

impl Metrics {
    /// A counter of the operator's work: reconciles, server events and writes, all kinds
    /// (when it stops moving, a burst of work has ended; see `operator_runtime::memory`).
    pub fn activity(&self) -> u64 {
        use prometheus::core::Collector;
        [&self.reconciles, &self.stream_events, &self.writes]
            .into_iter()
            .flat_map(|counters| counters.collect())
            .map(|family| {
                family
                    .get_metric()
                    .iter()
                    .map(|metric| metric.get_counter().get_value())
                    .sum::<f64>()
            })
            .sum::<f64>() as u64
    }

    /// A new sync of the same cluster starts with these metrics (a shared operator's member
    /// starting again): the gauges that describe a running sync go back to 0, since what the
    /// sync before left in them (requests it had queued, reconciles it was running, its
    /// objects, its leadership) went with it. Counters and histograms keep counting.
    pub fn sync_restarted(&self) {
        for gauges in [
            &self.server_objects,
            &self.draining,
            &self.drained,
            &self.reconciles_in_flight,
            &self.queue_depth,
            &self.objects_not_mirrored,
        ] {
            zero(gauges);
        }
        self.server_writes.window.set(0);
        self.server_writes.in_flight.set(0);
        self.election.leader.set(0);
    }

    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new_custom(Some(PREFIX.to_string()), None)?;
        let r = &registry;
        let kind = &["kind"];
        let stream = &["stream"];
        Ok(Self {
            reconciles: counter(
                r,
                "reconciles_total",
                "Reconciles by kind and result",
                &["kind", "result"],
            )?,
            reconcile_duration: histogram(
                r,
                "reconcile_duration_seconds",
                "Duration of reconciles",
                vec![
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ],
            )?,
            writes: counter(
                r,
                "writes_total",
                "Writes by kind, side (server, kubernetes) and operation",
                &["kind", "side", "operation"],
            )?,
            server_objects: gauge(
                r,
                "server_objects",
                "Server objects known from the event stream",
                kind,
            )?,
            stream_connections: counter(
                r,
                "stream_connections_total",
                "Connections of the server streams (config events; schema, counter, task feeds)",
                stream,
            )?,
            stream_disconnects: counter(
                r,
                "stream_disconnects_total",
                "Disconnections of the server streams",
                stream,
            )?,
            stream_events: counter(r, "stream_events_total", "Config events received", kind)?,
            election: ElectionMetrics::register(r)?,
            draining: gauge(
                r,
                "draining",
                "1 while draining (the Infinispan CR is deleted or disables the operator)",
                kind,
            )?,
            drained: gauge(
                r,
                "drained",
                "1 once no CR of the kind holds the operator's finalizer while draining",
                kind,
            )?,
            reconciles_in_flight: gauge(r, "reconciles_in_flight", "Reconciles running now", kind)?,
            queue_depth: gauge(
                r,
                "queue_depth",
                "Reconcile requests queued by the engine (server events, dependencies, resyncs) not started yet",
                kind,
            )?,
            event_to_cr_seconds: histogram(
                r,
                "event_to_cr_seconds",
                "From a server event that changed an object to the CR write it caused",
                vec![0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0],
            )?,
            cr_write_seconds: histogram(
                r,
                "cr_write_seconds",
                "The operator's writes of CRs (create, patch, status, delete), request to answer",
                vec![
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ],
            )?,
            invalid_crs: counter(
                r,
                "invalid_crs_total",
                "CRs the operator could not read (per watch event)",
                kind,
            )?,
            objects_not_mirrored: gauge(
                r,
                "objects_not_mirrored",
                "Server objects without a CR: the API server refused their mirror CR",
                kind,
            )?,
            drift_checks: counter(
                r,
                "drift_checks_total",
                "Checks of the server's documents against what its events said, by stream and result",
                &["stream", "result"],
            )?,
            drift_detected: counter(
                r,
                "drift_detected_total",
                "Server objects found changed without an event (drift)",
                kind,
            )?,
            server_writes: WriteMetrics {
                window: int_gauge(
                    r,
                    "server_write_window",
                    "Writes to the server allowed in flight at once now (--server-write-concurrency at most; fewer while the server is slow)",
                )?,
                in_flight: int_gauge(
                    r,
                    "server_writes_in_flight",
                    "Writes to the server in flight now",
                )?,
                overloads: counter(
                    r,
                    "server_write_overloads_total",
                    "Server writes answered with a sign of overload (timeout, 5xx, 429), which shrink the window and pause writes, by reason",
                    &["reason"],
                )?,
            },
            registry,
        })
    }
}

/// A counter vector `name` registered in `registry`.
fn counter(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> Result<IntCounterVec, prometheus::Error> {
    let counter = IntCounterVec::new(Opts::new(name, help), labels)?;
    registry.register(Box::new(counter.clone()))?;
    Ok(counter)
}

/// A gauge `name` registered in `registry`.
fn int_gauge(registry: &Registry, name: &str, help: &str) -> Result<IntGauge, prometheus::Error> {
    let gauge = IntGauge::new(name, help)?;
    registry.register(Box::new(gauge.clone()))?;
    Ok(gauge)
}

/// A gauge vector `name` registered in `registry`.
fn gauge(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> Result<IntGaugeVec, prometheus::Error> {
    let gauge = IntGaugeVec::new(Opts::new(name, help), labels)?;
    registry.register(Box::new(gauge.clone()))?;
    Ok(gauge)
}

/// Sets every series of `gauges` to 0, keeping the series (a reader that looks for one still
/// finds it).
fn zero(gauges: &IntGaugeVec) {
    use prometheus::core::Collector;
    for family in gauges.collect() {
        for metric in family.get_metric() {
            let values: Vec<&str> = metric.get_label().iter().map(|l| l.value()).collect();
            gauges.with_label_values(&values).set(0);
        }
    }
}

/// A histogram vector `name` by kind, with `buckets`, registered in `registry`.
fn histogram(
    registry: &Registry,
    name: &str,
    help: &str,
    buckets: Vec<f64>,
) -> Result<HistogramVec, prometheus::Error> {
    let histogram = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), &["kind"])?;
    registry.register(Box::new(histogram.clone()))?;
    Ok(histogram)
}

/// What `/readyz` says while the operator is not ready: a standby is Ready once it has seen
/// another holder of the Lease; the leader (or a process without leader election) once every
/// kind's engine has its first server snapshot and a filled CR store (design E7: readiness does
/// not depend on leadership, and a standby that takes over later stays Ready).
pub const WAITING_FOR: &str = "waiting for the Lease or the first server snapshot";

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
        let text = operator_runtime::endpoint::render(&metrics.registry);
        assert!(
            text.contains("infinispan_resources_operator_reconciles_total{kind=\"Cache\",result=\"nothing\"} 1"),
            "{text}"
        );
        Ok(())
    }

    #[test]
    fn a_restarted_sync_starts_its_gauges_from_zero_and_keeps_its_counters()
    -> Result<(), prometheus::Error> {
        let metrics = Metrics::new()?;
        metrics.queue_depth.with_label_values(&["Cache"]).set(23);
        metrics.queue_depth.with_label_values(&["Schema"]).set(2);
        metrics
            .reconciles_in_flight
            .with_label_values(&["Cache"])
            .set(4);
        metrics
            .server_objects
            .with_label_values(&["Cache"])
            .set(250);
        metrics.server_writes.in_flight.set(3);
        metrics.election.leader.set(1);
        metrics
            .writes
            .with_label_values(&["Cache", "server", "create"])
            .inc();
        metrics.sync_restarted();
        let text = operator_runtime::endpoint::render(&metrics.registry);
        for series in [
            "queue_depth{kind=\"Cache\"} 0",
            "queue_depth{kind=\"Schema\"} 0",
            "reconciles_in_flight{kind=\"Cache\"} 0",
            "server_objects{kind=\"Cache\"} 0",
            "server_writes_in_flight 0",
            "leader 0",
            "writes_total{kind=\"Cache\",operation=\"create\",side=\"server\"} 1",
        ] {
            assert!(
                text.contains(&format!("infinispan_resources_operator_{series}\n")),
                "{series} in {text}"
            );
        }
        Ok(())
    }

    #[test]
    fn leadership_is_exported() -> Result<(), prometheus::Error> {
        let metrics = Metrics::new()?;
        let text = operator_runtime::endpoint::render(&metrics.registry);
        assert!(
            text.contains("infinispan_resources_operator_leader 0"),
            "{text}"
        );
        metrics.election.leader.set(1);
        metrics
            .election
            .lease_writes
            .with_label_values(&["renew"])
            .inc();
        let text = operator_runtime::endpoint::render(&metrics.registry);
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
}
