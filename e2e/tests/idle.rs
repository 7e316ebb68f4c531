//! End-to-end L1, measured from outside the operator: one idle minute with settled CRs costs
//! zero writes to the API server (the API server's audit log: every write in the test's
//! namespace, Events included; Lease writes are excluded by the testbed's audit policy and
//! counted separately) and zero writes to the server (an independent event-stream listener on
//! a dedicated node, so that no other suite's caches count).

use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use e2e::node::{Node, NodeGuard};
use e2e::operator::*;
use futures::StreamExt;
use infinispan_rest::{ConfigDocument, CreateCacheOptions, StreamItem};
use serde_json::Value;

const IDLE: Duration = Duration::from_secs(60);

/// Audit entries (ResponseComplete) for writes in `namespace` appended to the audit log after
/// byte `offset`.
fn audited_writes(
    log: &std::path::Path,
    offset: u64,
    namespace: &str,
) -> anyhow::Result<Vec<String>> {
    let mut file =
        std::fs::File::open(log).with_context(|| format!("opening {}", log.display()))?;
    file.seek(SeekFrom::Start(offset))?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let mut writes = Vec::new();
    for line in text.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let in_namespace = entry
            .pointer("/objectRef/namespace")
            .and_then(Value::as_str)
            == Some(namespace);
        let complete = entry.get("stage").and_then(Value::as_str) == Some("ResponseComplete");
        if in_namespace && complete {
            writes.push(format!(
                "{} {} {}/{} by {}",
                entry["verb"].as_str().unwrap_or("?"),
                entry
                    .pointer("/objectRef/resource")
                    .and_then(Value::as_str)
                    .unwrap_or("?"),
                entry
                    .pointer("/objectRef/name")
                    .and_then(Value::as_str)
                    .unwrap_or("?"),
                entry
                    .pointer("/objectRef/subresource")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                entry
                    .pointer("/user/username")
                    .and_then(Value::as_str)
                    .unwrap_or("?"),
            ));
        }
    }
    Ok(writes)
}

/// Sum of a counter of the operator's metrics, over the lines that start with `prefix`.
async fn metric_sum(f: &Fixture, prefix: &str) -> anyhow::Result<f64> {
    let (_, body) = f.operator.get("/metrics").await?;
    Ok(body
        .lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

#[tokio::test]
async fn l1_an_idle_minute_writes_nothing_on_either_side() -> anyhow::Result<()> {
    let node = Node::new("idle", 2005);
    node.stop_and_wipe()?;
    node.start()?;
    let _guard = NodeGuard(node.clone());
    let options = Options {
        infinispan_url: Some(node.url()),
        ..Options::default()
    };
    with_options_fixture("l1-minute", options, async |f| {
        let json_cr = f.server_name("idle-json");
        let yaml_cr = f.server_name("idle-yaml");
        let mirrored = f.server_name("idle-mirror");
        f.apply_cache(&json_cr, r#"{"distributed-cache":{"mode":"SYNC"}}"#)
            .await?;
        f.apply_cache(&yaml_cr, "localCache:\n  statistics: \"true\"\n")
            .await?;
        f.rest
            .create_cache(
                &mirrored,
                &ConfigDocument::json(r#"{"local-cache":{}}"#),
                CreateCacheOptions::default(),
            )
            .await?;
        let mirror = common_crds::naming::mirror_name(CLUSTER, &mirrored);
        for name in [&json_cr, &yaml_cr, &mirror] {
            f.wait_ready(name, "Synced").await?;
        }
        // Let requeues after the last writes run out.
        tokio::time::sleep(Duration::from_secs(5)).await;

        let mut listener = live_events(&f.rest).await?;
        let audit = f.testbed.run_dir.join("logs/audit.log");
        let offset = std::fs::metadata(&audit)
            .with_context(|| format!("the testbed's audit log {} is missing", audit.display()))?
            .len();
        let renewals_before = metric_sum(f, "infinispan_resources_operator_lease_writes_total").await?;

        let idle = tokio::time::sleep(IDLE);
        tokio::pin!(idle);
        let mut server_events = Vec::new();
        loop {
            tokio::select! {
                _ = &mut idle => break,
                item = listener.next() => match item {
                    Some(StreamItem::Event(event)) => server_events.push(format!("{event:?}")),
                    Some(StreamItem::Disconnected { error, .. }) => bail!("listener disconnected: {error}"),
                    Some(_) => {}
                    None => bail!("the listener ended"),
                }
            }
        }
        // The audit backend writes in batches: give it a moment.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let api_writes = audited_writes(&audit, offset, &f.ns.name)?;
        let renewals = metric_sum(f, "infinispan_resources_operator_lease_writes_total").await?
            - renewals_before;
        println!(
            "L1, one idle minute with 3 settled Cache CRs: {} API-server writes in the namespace \
             (audit log), {} server config events (independent listener), {renewals} Lease \
             writes (operator metric; excluded from L1)",
            api_writes.len(),
            server_events.len()
        );
        ensure!(api_writes.is_empty(), "API-server writes while idle: {api_writes:#?}");
        ensure!(server_events.is_empty(), "server writes while idle: {server_events:#?}");
        // Lease renewals run at their configured rate (default retry period 2 s): about 30 a
        // minute, never a storm.
        ensure!(
            renewals <= 60.0 / 2.0 + 5.0,
            "{renewals} Lease writes in a minute: more than the configured rate"
        );
        Ok(())
    })
    .await
}
