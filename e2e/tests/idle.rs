//! End-to-end L1, measured from outside the operator: one idle minute with settled CRs costs
//! zero writes to the API server (the API server's audit log: every write in the test's
//! namespace, Events included; Lease writes are excluded by the testbed's audit policy and
//! counted separately) and zero writes to the server (independent listeners on a dedicated
//! node, so that no other suite's objects count: the config event stream for caches and
//! templates, the schema and task feeds for the entry events of `___protobuf_metadata` and
//! `___script_cache`, the counter feed for counters).
//!
//! The settled state has every synced kind: Cache CRs (JSON, YAML, a mirror) and a Template, a
//! Schema, a Counter and a Task CR each, plus a mirror of each made by a server-side create.

use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use common_crds::labels::CLUSTER_LABEL;
use common_crds::{Counter, Schema, ServerResource, Task, Template};
use e2e::eventually;
use e2e::node::{Node, NodeGuard};
use e2e::operator::*;
use futures::StreamExt;
use infinispan_rest::{
    ConfigDocument, ConfigEvent, ConfigEventStream, CounterConfig, CounterStorage,
    CreateCacheOptions, StreamItem, StreamOptions,
};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const IDLE: Duration = Duration::from_secs(60);
/// The operator's counter list interval here, and the test's own counter feed's.
const COUNTER_LIST: Duration = Duration::from_secs(1);

/// Creates a CR of kind `K` (`spec` as JSON) with the cluster label.
async fn create_cr<K>(f: &Fixture, name: &str, spec: Value) -> anyhow::Result<()>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let cr: K = serde_json::from_value(json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": { "name": name, "labels": { CLUSTER_LABEL: CLUSTER } },
        "spec": spec,
    }))?;
    Api::<K>::namespaced(f.client.clone(), &f.ns.name)
        .create(&PostParams::default(), &cr)
        .await?;
    Ok(())
}

/// Waits until the CR `name` of kind `K` is `Ready=True, reason=Synced` at its generation.
async fn wait_synced<K>(f: &Fixture, name: &str) -> anyhow::Result<()>
where
    K: ServerResource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api = Api::<K>::namespaced(f.client.clone(), &f.ns.name);
    let api = &api;
    eventually(
        &format!("{} {name} Synced", K::KIND.as_str()),
        SLOW,
        || async move {
            let Some(cr) = api.get_opt(name).await? else {
                return Ok(None);
            };
            let synced = cr.resource_status().is_some_and(|s| {
                s.observed_generation == cr.meta().generation
                    && s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True" && c.reason == "Synced")
            });
            Ok(synced.then_some(()))
        },
    )
    .await
    .map_err(|e| f.operator.with_log(e))
}

/// A feed of the test's own whose snapshot is over: what it yields next are live changes.
async fn live_feed(what: &str, mut feed: ConfigEventStream) -> anyhow::Result<ConfigEventStream> {
    loop {
        match tokio::time::timeout(SLOW, feed.next())
            .await
            .with_context(|| format!("the {what} did not finish its snapshot in {SLOW:?}"))?
        {
            Some(StreamItem::ReplayComplete { .. }) => return Ok(feed),
            Some(StreamItem::Disconnected { error, .. }) => {
                bail!("the {what} disconnected during its snapshot: {error}")
            }
            Some(_) => {}
            None => bail!("the {what} ended"),
        }
    }
}

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
        args: vec![format!(
            "--counter-list-interval={}s",
            COUNTER_LIST.as_secs()
        )],
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

        // A Template, a Schema, a Counter and a Task CR, and one of each created on the server.
        let template_cr = unique("idle-template");
        let server_template = unique("idle-srv-template");
        create_cr::<Template>(
            f,
            &template_cr,
            json!({ "template": r#"{"local-cache":{}}"# }),
        )
        .await?;
        f.rest
            .create_template(
                &server_template,
                &ConfigDocument::json(r#"{"local-cache":{"statistics":true}}"#),
            )
            .await?;
        let schema_cr = unique("idle-schema");
        let counter_cr = unique("idle-counter");
        let task_cr = unique("idle-task");
        let message = |tag: &str| -> String {
            unique(tag)
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .map(|c| c.to_ascii_uppercase())
                .collect::<String>()
        };
        let script = "// mode=local,language=javascript\n\"idle\"";
        create_cr::<Schema>(
            f,
            &schema_cr,
            json!({ "schema": format!("message {} {{ optional string a = 1; }}", message("IdleCr")) }),
        )
        .await?;
        create_cr::<Counter>(
            f,
            &counter_cr,
            json!({ "storage": "Persistent", "initialValue": 4 }),
        )
        .await?;
        create_cr::<Task>(f, &task_cr, json!({ "script": script })).await?;
        let server_schema = format!("{}.proto", unique("idle-srv-schema"));
        let server_counter = unique("idle-srv-counter");
        let server_task = unique("idle-srv-task");
        f.rest
            .create_schema(
                &server_schema,
                &format!("message {} {{ optional int32 b = 1; }}", message("IdleSrv")),
            )
            .await?;
        f.rest
            .create_counter(
                &server_counter,
                &CounterConfig::Weak {
                    initial_value: 2,
                    storage: CounterStorage::Persistent,
                    concurrency_level: Some(4),
                },
            )
            .await?;
        f.rest.put_task(&server_task, script).await?;

        for name in [&json_cr, &yaml_cr, &mirror] {
            f.wait_ready(name, "Synced").await?;
        }
        let mirror_of = |name: &str| common_crds::naming::mirror_name(CLUSTER, name);
        for name in [&template_cr, &mirror_of(&server_template)] {
            wait_synced::<Template>(f, name).await?;
        }
        for name in [&schema_cr, &mirror_of(&server_schema)] {
            wait_synced::<Schema>(f, name).await?;
        }
        for name in [&counter_cr, &mirror_of(&server_counter)] {
            wait_synced::<Counter>(f, name).await?;
        }
        for name in [&task_cr, &mirror_of(&server_task)] {
            wait_synced::<Task>(f, name).await?;
        }
        // Let requeues after the last writes run out.
        tokio::time::sleep(Duration::from_secs(5)).await;

        // Independent listeners, live once their snapshots are over: the config stream (caches
        // and templates), and the schema, task and counter feeds (entry events of the internal
        // caches; the list).
        let config = live_events(&f.rest).await?;
        let schemas = live_feed("schema feed", f.rest.schema_feed(StreamOptions::default())).await?;
        let tasks = live_feed("task feed", f.rest.task_feed(StreamOptions::default())).await?;
        let counters = live_feed(
            "counter feed",
            f.rest.counter_feed(COUNTER_LIST, StreamOptions::default(), Default::default()),
        )
        .await?;
        let mut listener = futures::stream::select_all([
            config.map(|item| ("config stream", item)).boxed(),
            schemas.map(|item| ("schema feed", item)).boxed(),
            tasks.map(|item| ("task feed", item)).boxed(),
            counters.map(|item| ("counter feed", item)).boxed(),
        ]);
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
                    Some((from, StreamItem::Event(event))) => {
                        server_events.push(format!("{from}: {event:?}"))
                    }
                    Some((from, StreamItem::Disconnected { error, .. })) => {
                        bail!("the {from} disconnected: {error}")
                    }
                    Some(_) => {}
                    None => bail!("the listeners ended"),
                }
            }
        }
        // The audit backend writes in batches: give it a moment.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let api_writes = audited_writes(&audit, offset, &f.ns.name)?;
        let renewals = metric_sum(f, "infinispan_resources_operator_lease_writes_total").await?
            - renewals_before;
        println!(
            "L1, one idle minute with 11 settled CRs (3 Cache, 2 each of Template, Schema, \
             Counter, Task): \
             {} API-server writes in the namespace (audit log), {} server events (independent \
             config stream, schema, task and counter feeds), {renewals} Lease writes \
             (operator metric; excluded from L1)",
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

        // The listeners hear writes: one write of each kind after the minute reaches them (a
        // template created: the config stream).
        f.rest
            .put_schema(&server_schema, &f.rest.schema(&server_schema).await?)
            .await?;
        f.rest.put_task(&server_task, script).await?;
        let probe = unique("idle-probe");
        f.rest
            .create_counter(
                &probe,
                &CounterConfig::Strong {
                    initial_value: 0,
                    storage: CounterStorage::Volatile,
                    lower_bound: None,
                    upper_bound: None,
                    lifespan: None,
                },
            )
            .await?;
        let probe_template = unique("idle-probe-template");
        f.rest
            .create_template(&probe_template, &ConfigDocument::json(r#"{"local-cache":{}}"#))
            .await?;
        let mut heard = std::collections::BTreeSet::new();
        let deadline = tokio::time::Instant::now() + SLOW;
        while heard.len() < 4 {
            match tokio::time::timeout_at(deadline, listener.next()).await {
                Err(_) => bail!("the listeners missed writes after the minute: heard only {heard:?}"),
                Ok(Some(("config stream", StreamItem::Event(event)))) => {
                    let probe = matches!(
                        &event,
                        ConfigEvent::TemplateCreated { name, .. } if *name == probe_template
                    );
                    if probe {
                        heard.insert("config stream");
                    }
                }
                Ok(Some((from, StreamItem::Event(_)))) => {
                    heard.insert(from);
                }
                Ok(Some(_)) => {}
                Ok(None) => bail!("the listeners ended"),
            }
        }
        Ok(())
    })
    .await
}
