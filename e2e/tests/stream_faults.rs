//! End-to-end, design R4 (and K3 while the server is unreachable): the real operator binary
//! reaches a dedicated Infinispan node through a loopback fault proxy (`e2e::proxy`), and the
//! test talks to the node directly, so the faults cut, refuse or stall only the operator's
//! connections. What is asserted is what a user sees: CRs, their conditions, server caches,
//! and the operator's stream metrics.
//!
//! Each test starts its own node (offsets 2010, 2012, 2013 of the resources-operator range;
//! stopped and wiped at the end), one test at a time: node starts and the timing of a stall are
//! measured on a small shared machine, so nothing else of this file runs meanwhile.
//!
//! The operator runs with its defaults (no test-only flags): stream probe after 15 s of
//! silence, probe timeout 5 s, reconnect backoff from 500 ms doubling to 30 s with jitter.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use common_crds::labels::RESOURCES_FINALIZER;
use e2e::eventually;
use e2e::node::{Node, NodeGuard};
use e2e::operator::*;
use e2e::proxy::FaultProxy;
use kube::ResourceExt;
use kube::api::DeleteParams;

/// One test of this file at a time (each owns a node while it runs).
static ONE_NODE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The stream's probe: silence after which it runs, and its bound (`StreamOptions` defaults).
const PROBE_INTERVAL: Duration = Duration::from_secs(15);
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on a reconnect once the path is open again: the next backoff step (at most 30 s),
/// plus, after a stall, a header timeout (15 s) on a pooled connection that died in the stall.
const RECONNECT: Duration = Duration::from_secs(90);

/// Starts a dedicated node (blocking script, run off the runtime) and a proxy in front of it.
async fn node_behind_proxy(name: &str, offset: u16) -> anyhow::Result<(NodeGuard, FaultProxy)> {
    let node = Node::new(name, offset);
    let started = node.clone();
    tokio::task::spawn_blocking(move || started.start())
        .await
        .context("starting the node")??;
    let guard = NodeGuard(node.clone());
    let proxy = FaultProxy::for_url(&node.url()).await?;
    Ok((guard, proxy))
}

/// The operator talks to the proxy, the test to the node.
fn options(node: &NodeGuard, proxy: &FaultProxy) -> Options {
    Options {
        infinispan_url: Some(proxy.url()),
        test_url: Some(node.0.url()),
        ..Options::default()
    }
}

/// Sum of the samples of metric `name` (every label set) in a text exposition.
fn metric(body: &str, name: &str) -> f64 {
    body.lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

// The config event stream's (the feeds of schemas, counters and tasks have their own label).
const CONNECTIONS: &str =
    "infinispan_resources_operator_stream_connections_total{stream=\"config\"}";
const DISCONNECTS: &str =
    "infinispan_resources_operator_stream_disconnects_total{stream=\"config\"}";

async fn read_metric(f: &Fixture, name: &str) -> anyhow::Result<f64> {
    let (status, body) = f.operator.get("/metrics").await?;
    ensure!(status == 200, "/metrics answered {status}");
    Ok(metric(&body, name))
}

/// Waits until metric `name` exceeds `above`; returns the time it took.
async fn wait_metric_above(
    f: &Fixture,
    name: &str,
    above: f64,
    timeout: Duration,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    eventually(&format!("{name} > {above}"), timeout, || async move {
        Ok((read_metric(f, name).await? > above).then_some(()))
    })
    .await
    .map_err(|e| f.operator.with_log(e))?;
    Ok(start.elapsed())
}

/// Waits for the mirror CR of `server_name` to be Synced.
async fn wait_mirror(f: &Fixture, server_name: &str, timeout: Duration) -> anyhow::Result<()> {
    let mirror = common_crds::naming::mirror_name(CLUSTER, server_name);
    let mirror = mirror.as_str();
    eventually(
        &format!("mirror CR {mirror} Synced"),
        timeout,
        || async move {
            let Some(cr) = f.caches.get_opt(mirror).await? else {
                return Ok(None);
            };
            Ok(ready_condition(&cr)
                .is_some_and(|c| c.reason == "Synced")
                .then_some(()))
        },
    )
    .await
    .map_err(|e| f.operator.with_log(e))
}

/// R4, a cut: every connection of the operator is reset and new ones are refused for a few
/// seconds. Meanwhile a cache created on the server by another client and a Cache CR applied
/// by a user wait; the CR says why (`Ready=False, ServerUnavailable`). Once connections are
/// accepted again the operator reconnects by itself (the connection metric goes up; it kept
/// retrying, with backoff, while refused): the server's cache appears as a mirror CR and the
/// user's CR is created on the server (`Synced`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_stream_reconnects_and_catches_up() -> anyhow::Result<()> {
    let _one = ONE_NODE_AT_A_TIME.lock().await;
    let (node, proxy) = node_behind_proxy("sf-cut", 2010).await?;
    with_options_fixture("sf-cut", options(&node, &proxy), async |f| {
        let created = f.server_name("cut-created");
        let applied = f.server_name("cut-applied");
        let f = &*f;
        let connections = read_metric(f, CONNECTIONS).await?;
        let disconnects = read_metric(f, DISCONNECTS).await?;
        ensure!(connections == 1.0, "{connections} connections at start");

        proxy.refuse(true);
        proxy.cut();
        let noticed = wait_metric_above(f, DISCONNECTS, disconnects, SLOW).await?;

        f.create_on_server(&created, r#"{"local-cache":{}}"#)
            .await?;
        f.apply_cache(&applied, r#"{"local-cache":{"statistics":true}}"#)
            .await?;
        let cr = f
            .wait_condition(&applied, "Ready", "False", "ServerUnavailable")
            .await?;
        let ready = ready_condition(&cr).context("no Ready")?;
        ensure!(
            ready.message.contains("cannot be reached"),
            "the condition does not say why: {ready:?}"
        );
        // Refused for a few seconds more: the operator keeps trying, nothing crosses.
        tokio::time::sleep(Duration::from_secs(4)).await;
        ensure!(
            proxy.refused() >= 2,
            "the operator did not retry while refused ({} refused)",
            proxy.refused()
        );
        ensure!(
            !f.rest.cache_exists(&applied).await?,
            "created on the server while refused?"
        );
        let mirror = common_crds::naming::mirror_name(CLUSTER, &created);
        ensure!(
            f.caches.get_opt(&mirror).await?.is_none(),
            "a mirror CR appeared while the server was unreachable"
        );
        ensure!(
            read_metric(f, CONNECTIONS).await? == connections,
            "reconnected while refused"
        );

        proxy.refuse(false);
        let reopened = Instant::now();
        wait_metric_above(f, CONNECTIONS, connections, RECONNECT).await?;
        let reconnect = reopened.elapsed();
        wait_mirror(f, &created, SLOW).await?;
        f.wait_ready(&applied, "Synced").await?;
        ensure!(f.rest.cache_exists(&applied).await?, "no server cache");
        let caught_up = reopened.elapsed();
        println!(
            "cut: disconnect noticed after {noticed:?}; {} connections refused meanwhile; \
             reconnected {reconnect:?} after the proxy accepted again, caught up after \
             {caught_up:?}",
            proxy.refused()
        );
        Ok(())
    })
    .await
}

/// R4, a silently dead connection: the proxy stops forwarding without closing anything (the
/// operator's TCP peer, the proxy, stays alive, so TCP keepalive cannot see it). The operator
/// must notice through its read-only probe (the names list), without writing anything, within
/// `probe_interval + probe_timeout` of the last byte; then, once new connections flow again
/// (the stalled ones stay dead), reconnect and catch up: a cache created on the server during
/// the stall, whose event was lost in the dead connection, appears as a mirror CR.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silently_stalled_stream_is_detected_without_writes() -> anyhow::Result<()> {
    let _one = ONE_NODE_AT_A_TIME.lock().await;
    let (node, proxy) = node_behind_proxy("sf-stall", 2012).await?;
    with_options_fixture("sf-stall", options(&node, &proxy), async |f| {
        let created = f.server_name("stall-created");
        let f = &*f;
        let connections = read_metric(f, CONNECTIONS).await?;
        let disconnects = read_metric(f, DISCONNECTS).await?;
        let writes = f.operator.server_writes().await?;

        proxy.stall(true);
        let stalled_at = Instant::now();
        f.create_on_server(&created, r#"{"local-cache":{}}"#)
            .await?;
        // Detection: at most one probe interval of silence, then the probe's timeout.
        wait_metric_above(f, DISCONNECTS, disconnects, 2 * SLOW).await?;
        let detection = stalled_at.elapsed();
        let bound = PROBE_INTERVAL + PROBE_TIMEOUT + Duration::from_secs(5);
        ensure!(
            detection <= bound,
            "the stall was detected after {detection:?} (bound {bound:?})"
        );
        ensure!(
            f.operator.log_lines(&[
                "server stream disconnected",
                "stream=\"config\"",
                "probe of the event stream's server"
            ]) >= 1,
            "the disconnect was not the probe's doing"
        );
        ensure!(
            f.operator.server_writes().await? == writes,
            "the operator wrote to the server while detecting the stall"
        );
        let mirror = common_crds::naming::mirror_name(CLUSTER, &created);
        ensure!(
            f.caches.get_opt(&mirror).await?.is_none(),
            "the create event crossed the stalled connection"
        );

        proxy.stall(false);
        let unstalled = Instant::now();
        wait_metric_above(f, CONNECTIONS, connections, RECONNECT).await?;
        let reconnect = unstalled.elapsed();
        wait_mirror(f, &created, SLOW).await?;
        let caught_up = unstalled.elapsed();
        // The old connections were never closed by the proxy: the operator gave up on them.
        ensure!(
            proxy.stalled_connections() >= 1,
            "no stalled connection left"
        );
        println!(
            "stall: detected after {detection:?} (bound {bound:?}, probe {PROBE_INTERVAL:?} + \
             {PROBE_TIMEOUT:?}); reconnected {reconnect:?} and caught up {caught_up:?} after \
             new connections flowed; {} connections still stalled",
            proxy.stalled_connections()
        );
        Ok(())
    })
    .await
}

/// K3 and R4 while the server is unreachable: a synced Cache CR deleted while the proxy resets
/// everything stays (its finalizer) with `Ready=False, ServerUnavailable` saying the deletion
/// waits, and the server cache stays; when traffic flows again, the server cache is deleted and
/// the CR goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_waits_for_an_unreachable_server() -> anyhow::Result<()> {
    let _one = ONE_NODE_AT_A_TIME.lock().await;
    let (node, proxy) = node_behind_proxy("sf-k3", 2013).await?;
    with_options_fixture("sf-k3", options(&node, &proxy), async |f| {
        let name = f.server_name("k3-unreachable");
        let f = &*f;
        let name = name.as_str();
        f.apply_cache(name, r#"{"local-cache":{}}"#).await?;
        f.wait_ready(name, "Synced").await?;
        // Let the check that follows a write (500 ms later) run: a server call cut in flight
        // reports its own transport error, which is not what this test is about.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let disconnects = read_metric(f, DISCONNECTS).await?;

        proxy.refuse(true);
        proxy.cut();
        wait_metric_above(f, DISCONNECTS, disconnects, SLOW).await?;
        f.caches.delete(name, &DeleteParams::default()).await?;
        let ready = eventually(
            "Ready=False, ServerUnavailable, saying the deletion waits",
            SLOW,
            || async move {
                let cr = f.caches.get(name).await?;
                Ok(ready_condition(&cr).filter(|c| {
                    c.status == "False"
                        && c.reason == "ServerUnavailable"
                        && c.message.contains("deletion")
                }))
            },
        )
        .await
        .map_err(|e| f.operator.with_log(e))?;
        ensure!(
            ready.message.contains("cannot be reached"),
            "the condition does not say why: {ready:?}"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        let cr = f.caches.get(name).await?;
        ensure!(
            cr.metadata.deletion_timestamp.is_some()
                && cr.finalizers().iter().any(|f| f == RESOURCES_FINALIZER),
            "the CR is not held by its finalizer: {:?}",
            cr.metadata
        );
        ensure!(
            f.rest.cache_exists(name).await?,
            "the server cache went while unreachable"
        );

        proxy.refuse(false);
        let reopened = Instant::now();
        eventually("the server cache deleted", RECONNECT, || async move {
            Ok((!f.rest.cache_exists(name).await?).then_some(()))
        })
        .await
        .map_err(|e| f.operator.with_log(e))?;
        f.wait_gone(name).await?;
        println!(
            "k3: deletion done {:?} after the proxy accepted again",
            reopened.elapsed()
        );
        Ok(())
    })
    .await
}

#[test]
fn metric_sums_every_label_set() {
    let body = "# HELP x_total X\nx_total{a=\"1\"} 2\nx_total{a=\"2\"} 3\nx_total_more 9\nx 4\n";
    assert_eq!(metric(body, "x_total"), 5.0);
    assert_eq!(metric(body, "x"), 4.0);
}
