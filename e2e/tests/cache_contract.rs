//! End-to-end: the cache scenarios of the sync contract (design "The sync contract") that
//! `cache_sync.rs` does not cover, each checked the way a user would: CRs, their conditions and
//! the server's state through REST, with the real `resources-operator` binary.
//!
//! - N1: two clusters in one namespace, each with its own operator and server, same cache name.
//! - N2: two user CRs for one server cache; N3: the cluster label of a synced CR is guarded.
//! - Names with `/`, `+`, a space and non-ASCII letters, both ways.
//! - S2 in the three document formats after a single-attribute change on the server.
//! - `updates.strategy: recreate` against `Immutable`; `deletionPolicy: Retain`.
//! - L2: the writes one change costs, counted from outside (an independent event listener, the
//!   API server's audit log) and by the operator's own metrics.
//! - E4: internal and connector caches are never mirrored, pushed or deleted.
//!
//! Suites that need a server of their own use dedicated nodes (offsets 2020-2029 of the
//! resources-operator range, `e2e::node`); the others share node0 like `cache_sync.rs` and run
//! one at a time ([`SERIAL`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use common_crds::labels::{CLUSTER_LABEL, ORIGIN_LABEL, RESOURCES_FINALIZER};
use common_crds::naming::{is_dns1123_label, mirror_name};
use common_crds::{Cache, Infinispan};
use e2e::audit::{Audit, Write as AuditWrite};
use e2e::eventually;
use e2e::identity::OperatorIdentity;
use e2e::node::{Node, NodeGuard};
use e2e::operator::*;
use futures::StreamExt;
use infinispan_rest::{
    Comparison, ConfigDocument, ConfigEvent, ConfigFormat, CreateCacheOptions, StreamItem,
};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The second cluster of the N1 test.
const OTHER: &str = "other";

/// Time for requeues and echo events to run out after a change has settled.
const SETTLE: Duration = Duration::from_secs(3);

// ---- Helpers ---------------------------------------------------------------------------------

/// Creates another `Infinispan` CR named `name` in the fixture's namespace (a second cluster
/// beside [`CLUSTER`], design N1).
async fn create_cluster(f: &Fixture, name: &str) -> anyhow::Result<()> {
    let cluster: Infinispan = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v1",
        "kind": "Infinispan",
        "metadata": { "name": name },
        "spec": {}
    }))?;
    Api::<Infinispan>::namespaced(f.client.clone(), &f.ns.name)
        .create(&PostParams::default(), &cluster)
        .await?;
    Ok(())
}

/// Starts a second operator in the fixture's namespace, for the `Infinispan` CR `cluster` and
/// the server at `infinispan_url`, with the namespace's credentials Secret and, like the
/// fixture's operator, its own ServiceAccount (scoped to `cluster`) unless the fixture runs
/// as the admin. Dropping it kills it.
async fn start_operator_for(
    f: &Fixture,
    cluster: &str,
    infinispan_url: &str,
    instance: &str,
) -> anyhow::Result<Operator> {
    let mut launch = Launch {
        cluster: cluster.to_string(),
        infinispan_url: infinispan_url.to_string(),
        instance: instance.to_string(),
        args: Vec::new(),
        ..f.launch.clone()
    };
    if f.identity.is_some() {
        let scope = common_crds::rbac::OperatorScope {
            cluster,
            namespace: &f.ns.name,
            credentials_secret: SECRET,
        };
        let identity = OperatorIdentity::create(&f.client, &f.testbed, scope).await?;
        launch.kubeconfig = identity.kubeconfig;
    }
    Operator::start(&launch).await
}

/// Applies a user Cache CR labelled for `cluster` (not the fixture's).
async fn apply_cache_for(
    f: &Fixture,
    cluster: &str,
    name: &str,
    template: &str,
) -> anyhow::Result<Cache> {
    let cr: Cache = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v2alpha1",
        "kind": "Cache",
        "metadata": { "name": name, "labels": { CLUSTER_LABEL: cluster } },
        "spec": { "template": template }
    }))?;
    Ok(f.caches.create(&PostParams::default(), &cr).await?)
}

/// Waits until the mirror CR of `server_name` in `cluster` exists and is Ready (Synced).
async fn wait_mirror(f: &Fixture, cluster: &str, server_name: &str) -> anyhow::Result<Cache> {
    let name = mirror_name(cluster, server_name);
    f.wait_ready(&name, "Synced").await
}

/// The server's configuration of a cache as a document (for the server's own comparison).
async fn server_document(
    rest: &infinispan_rest::Client,
    name: &str,
) -> anyhow::Result<ConfigDocument> {
    let doc = rest.cache_config(name, ConfigFormat::Json).await?;
    let value: Value = serde_json::from_str(&doc.text)?;
    let inner = value.get(name).cloned().unwrap_or(value);
    Ok(ConfigDocument::json(inner.to_string()))
}

/// The operator's `writes_total` counters as `side/operation` -> count (every kind).
async fn writes(operator: &Operator) -> anyhow::Result<BTreeMap<String, f64>> {
    let (_, body) = operator.get("/metrics").await?;
    let mut counts = BTreeMap::new();
    for line in body
        .lines()
        .filter(|l| l.starts_with("infinispan_resources_operator_writes_total{"))
    {
        let (labels, value) = line.rsplit_once(' ').context("no value")?;
        let label = |key: &str| -> Option<String> {
            let start = labels.find(&format!("{key}=\""))? + key.len() + 2;
            let end = labels[start..].find('"')? + start;
            Some(labels[start..end].to_string())
        };
        let key = format!(
            "{}/{}",
            label("side").context("no side")?,
            label("operation").context("no operation")?
        );
        *counts.entry(key).or_insert(0.0) += value.parse::<f64>()?;
    }
    Ok(counts)
}

/// What changed between two [`writes`] readings (zero deltas left out).
fn delta(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, d)| *d != 0.0)
        .collect()
}

/// An independent listener on a server's config event stream: records, after the replay, the
/// live events of every cache (as `create`/`update`/`remove` per name, in order).
struct Listener {
    events: Arc<Mutex<Vec<(String, &'static str)>>>,
    disconnects: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    async fn start(rest: &infinispan_rest::Client) -> anyhow::Result<Self> {
        let mut stream = live_events(rest).await?;
        let events = Arc::new(Mutex::new(Vec::new()));
        let disconnects = Arc::new(Mutex::new(Vec::new()));
        let (e, d) = (events.clone(), disconnects.clone());
        let task = tokio::spawn(async move {
            while let Some(item) = stream.next().await {
                match item {
                    StreamItem::Event(event) => {
                        let entry = match event {
                            ConfigEvent::CacheCreated { name, .. } => (name, "create"),
                            ConfigEvent::CacheUpdated { name, .. } => (name, "update"),
                            ConfigEvent::CacheRemoved { name } => (name, "remove"),
                            _ => continue,
                        };
                        if let Ok(mut events) = e.lock() {
                            events.push(entry);
                        }
                    }
                    StreamItem::Disconnected { error, .. } => {
                        if let Ok(mut d) = d.lock() {
                            d.push(error.to_string());
                        }
                    }
                    StreamItem::Connected { .. } | StreamItem::ReplayComplete { .. } => {}
                }
            }
        });
        Ok(Self {
            events,
            disconnects,
            task,
        })
    }

    /// The live events of cache `name` so far, in order; fails if the listener ever lost its
    /// connection (it could have missed events).
    fn of(&self, name: &str) -> anyhow::Result<Vec<&'static str>> {
        let disconnects = self
            .disconnects
            .lock()
            .map(|d| d.clone())
            .unwrap_or_default();
        ensure!(
            disconnects.is_empty(),
            "the listener disconnected: {disconnects:?}"
        );
        Ok(self
            .events
            .lock()
            .map(|events| {
                events
                    .iter()
                    .filter(|(n, _)| n == name)
                    .map(|(_, kind)| *kind)
                    .collect()
            })
            .unwrap_or_default())
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The audit log is written asynchronously by the API server: waits until `count` writes to the
/// CR are in it, then a little longer for any that follow, and returns them all.
async fn audited(
    audit: &Audit,
    namespace: &str,
    name: &str,
    count: usize,
) -> anyhow::Result<Vec<AuditWrite>> {
    eventually(
        &format!("{count} writes to {name} in the audit log"),
        SLOW,
        || async move { Ok((audit.cache_writes(namespace, name)?.len() >= count).then_some(())) },
    )
    .await?;
    tokio::time::sleep(SETTLE).await;
    audit.cache_writes(namespace, name)
}

/// `[create (201), patch status (200)]`, for messages.
fn show(writes: &[AuditWrite]) -> String {
    let items: Vec<String> = writes.iter().map(ToString::to_string).collect();
    format!("[{}]", items.join(", "))
}

fn count(writes: &[AuditWrite], verb: &str, subresource: Option<&str>) -> usize {
    writes
        .iter()
        .filter(|w| w.verb == verb && w.subresource.as_deref() == subresource)
        .count()
}

/// Applies the generated label policies (design N3) and their bindings, and waits until the API
/// server enforces it (policies are compiled asynchronously). Idempotent (server-side apply).
async fn install_label_policy(client: &kube::Client, namespace: &str) -> anyhow::Result<()> {
    e2e::apply_label_policies(client).await?;
    let caches = Api::<Cache>::namespaced(client.clone(), namespace);
    eventually(
        "the label policy is enforced",
        Duration::from_secs(60),
        || {
            let caches = caches.clone();
            async move {
                // A probe without the label (the operator selects by label: it never sees it).
                let probe: Cache = serde_json::from_value(json!({
                    "apiVersion": "infinispan.org/v2alpha1",
                    "kind": "Cache",
                    "metadata": { "name": "policy-probe" },
                    "spec": { "templateName": "t" }
                }))?;
                match caches.create(&PostParams::default(), &probe).await {
                    Ok(_) => {
                        caches
                            .delete("policy-probe", &DeleteParams::default())
                            .await?;
                        Ok(None)
                    }
                    Err(kube::Error::Api(status)) if status.message.contains(CLUSTER_LABEL) => {
                        Ok(Some(()))
                    }
                    Err(other) => Err(other.into()),
                }
            }
        },
    )
    .await
}

/// Starts a dedicated node with the testbed's server configuration plus the RESP and Memcached
/// connectors (`e2e/testbed/infinispan/infinispan-connectors.xml`), which create their own
/// caches (`respCache` at startup, `memcachedCache` on first use).
fn start_with_connectors(node: &Node) -> anyhow::Result<()> {
    let root = e2e::repo_root();
    let peers = format!("127.0.0.1[{}]", node.jgroups_port);
    let output = std::process::Command::new(root.join("e2e/testbed/infinispan.sh"))
        .args([
            "start",
            &node.name,
            "--offset",
            &node.offset.to_string(),
            "--jgroups-port",
            &node.jgroups_port.to_string(),
            "--cluster",
            &node.name,
            "--peers",
            &peers,
            "--config",
        ])
        .arg(root.join("e2e/testbed/infinispan/infinispan-connectors.xml"))
        .env("TESTBED_RUN_DIR", e2e::run_dir())
        .output()?;
    ensure!(
        output.status.success(),
        "starting {} with connectors: {}{}",
        node.name,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// Speaks the Memcached text protocol to a node once: the connector creates `memcachedCache` on
/// first use (the `set` itself is refused: authentication is on).
async fn touch_memcached(node: &Node) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", 11222 + node.offset)).await?;
    socket.write_all(b"set e4 0 0 1\r\nx\r\n").await?;
    let mut answer = vec![0u8; 256];
    let _ = tokio::time::timeout(Duration::from_secs(5), socket.read(&mut answer)).await;
    Ok(())
}

// ---- N1 --------------------------------------------------------------------------------------

/// N1: two clusters in one namespace (`demo` on node0, `other` on a dedicated node, each with
/// its own operator) with a cache of the same name: two mirror CRs with different names, each
/// labelled with its cluster and holding its own server's configuration; a user CR of one
/// cluster only ever reaches its own server; a removal on one server deletes only that
/// cluster's CR.
#[tokio::test]
async fn n1_two_clusters_in_one_namespace_stay_apart() -> anyhow::Result<()> {
    let node = Node::new("cc-n1-other", 2020);
    node.start()?;
    let _node = NodeGuard(node.clone());
    with_fixture("cc-n1", async |f| {
        let rest_b = node.rest(&f.testbed)?;
        // Node0's caches of the test (removed at the end); the other node is wiped.
        let shared = f.server_name("n1-shared");
        let only_a = f.server_name("n1-only-a");
        create_cluster(f, OTHER).await?;
        let operator_b = start_operator_for(f, OTHER, &node.url(), "other").await?;
        let f = &*f;
        let result = async {
            let config_a = json!({"local-cache":{}});
            let config_b = json!({"local-cache":{"statistics":true}});
            f.create_on_server(&shared, &config_a.to_string()).await?;
            rest_b
                .create_cache(
                    &shared,
                    &ConfigDocument::json(config_b.to_string()),
                    CreateCacheOptions::default(),
                )
                .await?;
            let mirror_a = mirror_name(CLUSTER, &shared);
            let mirror_b = mirror_name(OTHER, &shared);
            ensure!(mirror_a != mirror_b, "one CR name for both clusters");
            for (cluster, mirror, config) in [
                (CLUSTER, &mirror_a, &config_a),
                (OTHER, &mirror_b, &config_b),
            ] {
                let cr = wait_mirror(f, cluster, &shared)
                    .await
                    .map_err(|e| operator_b.with_log(e))?;
                ensure!(cr.name_any() == *mirror);
                ensure!(
                    cr.labels().get(CLUSTER_LABEL).map(String::as_str) == Some(cluster),
                    "{mirror}: {:?}",
                    cr.labels()
                );
                ensure!(cr.spec.common.name.as_deref() == Some(shared.as_str()));
                let owner = cr.owner_references().first().context("no owner")?;
                ensure!(owner.name == cluster, "{mirror} owned by {}", owner.name);
                let template: Value =
                    serde_json::from_str(cr.spec.template.as_deref().context("no template")?)?;
                ensure!(template == *config, "{mirror}: template {template}");
            }

            // A user CR reaches only its own cluster's server.
            let only_b = unique("n1-only-b");
            let writes_a = f.operator.server_writes().await?;
            let writes_b = operator_b.server_writes().await?;
            f.apply_cache(&only_a, r#"{"local-cache":{}}"#).await?;
            apply_cache_for(f, OTHER, &only_b, r#"{"local-cache":{}}"#).await?;
            f.wait_ready(&only_a, "Synced").await?;
            f.wait_ready(&only_b, "Synced")
                .await
                .map_err(|e| operator_b.with_log(e))?;
            ensure!(f.rest.cache_exists(&only_a).await?, "{only_a} not on node0");
            ensure!(
                rest_b.cache_exists(&only_b).await?,
                "{only_b} not on the other node"
            );
            tokio::time::sleep(SETTLE).await;
            ensure!(
                !rest_b.cache_exists(&only_a).await?,
                "cluster demo's CR reached the other server"
            );
            ensure!(
                !f.rest.cache_exists(&only_b).await?,
                "cluster other's CR reached node0"
            );
            ensure!(f.operator.server_writes().await? == writes_a + 1.0);
            ensure!(operator_b.server_writes().await? == writes_b + 1.0);
            for (name, cluster) in [(&only_a, CLUSTER), (&only_b, OTHER)] {
                let status = f.caches.get(name).await?.status.unwrap_or_default();
                ensure!(
                    status.server_name.as_deref() == Some(name.as_str()),
                    "{name} ({cluster}): {status:?}"
                );
            }
            f.caches.delete(&only_a, &DeleteParams::default()).await?;
            f.wait_server(&only_a, false).await?;

            // A removal on the other server deletes only the other cluster's CR.
            rest_b.delete_cache(&shared).await?;
            f.wait_gone(&mirror_b)
                .await
                .map_err(|e| operator_b.with_log(e))?;
            tokio::time::sleep(SETTLE).await;
            ensure!(
                f.caches.get_opt(&mirror_a).await?.is_some(),
                "the removal on the other server deleted cluster demo's CR"
            );
            f.wait_ready(&mirror_a, "Synced").await?;
            ensure!(f.rest.cache_exists(&shared).await?, "node0's cache went");
            f.rest.delete_cache(&shared).await?;
            f.wait_gone(&mirror_a).await?;
            Ok(())
        }
        .await;
        let result = result.map_err(|e| operator_b.with_log(e));
        operator_b.stop().await?;
        result
    })
    .await
}

// ---- N2 --------------------------------------------------------------------------------------

/// N2 between user CRs: of two user CRs for one server cache the older wins; the younger reports
/// Ready=False, Conflict naming the winner and never touches the server, also when deleted.
/// Deleting the winner deletes the server cache (K3); the younger then stands for the name and,
/// never synced, creates the cache from its own spec (K1): the documented behaviour of
/// `engine/decision.rs` (a hand-over costs the cache's data).
#[tokio::test]
async fn n2_the_older_user_cr_wins_and_hands_over() -> anyhow::Result<()> {
    with_fixture("cc-n2", async |f| {
        let shared = f.server_name("n2-dup");
        let f = &*f;
        let spec = json!({ "name": shared });
        let old = r#"{"distributed-cache":{"mode":"SYNC"}}"#;
        let young = r#"{"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":5000}}}"#;
        f.apply_cache_with("n2-old", old, json!({}), spec.clone())
            .await?;
        f.wait_ready("n2-old", "Synced").await?;
        let before = f.server_config(&shared).await?;
        let writes_before = f.operator.server_writes().await?;
        // Created right after the winner synced, most likely in the same second (timestamps
        // have one-second precision): the synced CR keeps its claim all the same.
        f.apply_cache_with("n2-young", young, json!({}), spec.clone())
            .await?;
        f.apply_cache_with("n2-youngest", young, json!({}), spec.clone())
            .await?;
        for loser in ["n2-young", "n2-youngest"] {
            let cr = f.wait_ready(loser, "Conflict").await?;
            let ready = ready_condition(&cr).context("no Ready")?;
            ensure!(ready.status == "False", "{loser}: {ready:?}");
            ensure!(
                ready.message.contains("n2-old"),
                "{loser}: the message does not name the winner: {}",
                ready.message
            );
            ensure!(cr.finalizers().is_empty(), "{loser}: {:?}", cr.finalizers());
        }
        let winner = f.wait_ready("n2-old", "Synced").await?;
        ensure!(ready_condition(&winner).is_some_and(|c| c.status == "True"));
        tokio::time::sleep(SETTLE).await;
        ensure!(
            f.server_config(&shared).await? == before,
            "a losing CR changed the server"
        );

        // Deleting a loser never touches the server.
        let listener = Listener::start(&f.rest).await?;
        f.caches
            .delete("n2-youngest", &DeleteParams::default())
            .await?;
        f.wait_gone("n2-youngest").await?;
        tokio::time::sleep(SETTLE).await;
        ensure!(
            f.server_config(&shared).await? == before,
            "deleting a loser changed the server"
        );
        ensure!(
            listener.of(&shared)?.is_empty(),
            "{:?}",
            listener.of(&shared)?
        );
        ensure!(
            f.operator.server_writes().await? == writes_before,
            "the losers wrote to the server"
        );

        // Deleting the winner: K3, then the younger creates the cache from its own spec.
        f.caches.delete("n2-old", &DeleteParams::default()).await?;
        f.wait_gone("n2-old").await?;
        // (The server cache is removed and created again within milliseconds: the listener
        // below sees both.)
        // The winner's going hands the name over: the remaining claimants decide again at once
        // (the older of the two takes it).
        let cr = f.wait_ready("n2-young", "Synced").await?;
        ensure!(cr.finalizers().iter().any(|x| x == RESOURCES_FINALIZER));
        let after = f.server_config(&shared).await?;
        ensure!(
            lifespan(&after).as_deref() == Some("5000"),
            "the server does not have the younger CR's configuration: {after}"
        );
        let events = listener.of(&shared)?;
        ensure!(
            events.first() == Some(&"remove") && events.contains(&"create"),
            "expected the winner's deletion then the younger's creation: {events:?}"
        );
        Ok(())
    })
    .await
}

// ---- N3 --------------------------------------------------------------------------------------

/// N3 with the operator running: changing or removing the cluster label of a synced CR is
/// refused by the API server with a message naming the label; the CR stays as it was and the
/// server cache is untouched.
#[tokio::test]
async fn n3_the_cluster_label_of_a_synced_cr_cannot_change() -> anyhow::Result<()> {
    with_fixture("cc-n3", async |f| {
        let name = f.server_name("n3");
        let f = &*f;
        install_label_policy(&f.client, &f.ns.name).await?;
        f.apply_cache(&name, r#"{"distributed-cache":{"mode":"SYNC"}}"#)
            .await?;
        let synced = f.wait_ready(&name, "Synced").await?;
        let config = f.server_config(&name).await?;
        let writes_before = f.operator.server_writes().await?;
        let listener = Listener::start(&f.rest).await?;

        for (what, patch) in [
            (
                "changed",
                json!({"metadata": {"labels": {CLUSTER_LABEL: OTHER}}}),
            ),
            (
                "removed",
                json!({"metadata": {"labels": {CLUSTER_LABEL: null}}}),
            ),
            (
                "dropped with all labels",
                json!({"metadata": {"labels": null}}),
            ),
        ] {
            match f
                .caches
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => bail!("the cluster label was {what}"),
                Err(kube::Error::Api(status)) => ensure!(
                    status.message.contains(CLUSTER_LABEL) && status.message.contains(CLUSTER),
                    "label {what}: {}",
                    status.message
                ),
                Err(other) => return Err(other.into()),
            }
        }
        tokio::time::sleep(SETTLE).await;
        let cr = f.caches.get(&name).await?;
        ensure!(
            cr.resource_version() == synced.resource_version(),
            "the CR was written"
        );
        ensure!(cr.labels().get(CLUSTER_LABEL).map(String::as_str) == Some(CLUSTER));
        ensure!(
            f.server_config(&name).await? == config,
            "the server changed"
        );
        ensure!(listener.of(&name)?.is_empty(), "{:?}", listener.of(&name)?);
        ensure!(f.operator.server_writes().await? == writes_before);
        Ok(())
    })
    .await
}

// ---- Names -----------------------------------------------------------------------------------

/// Names both ways: a cache whose name has `/`, `+`, a space and non-ASCII letters (the server
/// accepts them; the REST client percent-encodes the path segment). Created on the server, it
/// gets a mirror CR with a valid DNS name (N1) and its exact name in spec.name; removed on the
/// server, the CR goes (S3); the CR deleted, the server cache goes (K3). A user CR with such a
/// spec.name creates it on the server (K1) and deletes it (K3).
#[tokio::test]
async fn names_with_slash_plus_space_and_unicode_sync_both_ways() -> anyhow::Result<()> {
    with_fixture("cc-names", async |f| {
        let odd = f.server_name("a/b+c d-ü");
        let user = f.server_name("x/y+z w-é");
        let f = &*f;
        let config = r#"{"local-cache":{"statistics":true}}"#;
        let mirror = mirror_name(CLUSTER, &odd);
        ensure!(
            is_dns1123_label(&mirror) && mirror.starts_with("a-b-c-d-"),
            "{mirror}"
        );

        // Server -> Kubernetes, removed on the server.
        f.create_on_server(&odd, config).await?;
        let cr = wait_mirror(f, CLUSTER, &odd).await?;
        ensure!(cr.spec.common.name.as_deref() == Some(odd.as_str()));
        let status = cr.status.clone().unwrap_or_default();
        ensure!(
            status.server_name.as_deref() == Some(odd.as_str()),
            "{status:?}"
        );
        f.rest.delete_cache(&odd).await?;
        f.wait_gone(&mirror).await?;

        // Again, this time the CR is deleted.
        f.create_on_server(&odd, config).await?;
        wait_mirror(f, CLUSTER, &odd).await?;
        f.caches.delete(&mirror, &DeleteParams::default()).await?;
        f.wait_server(&odd, false).await?;
        f.wait_gone(&mirror).await?;

        // Kubernetes -> server.
        f.apply_cache_with("names-user", config, json!({}), json!({ "name": user }))
            .await?;
        let cr = f.wait_ready("names-user", "Synced").await?;
        let status = cr.status.unwrap_or_default();
        ensure!(
            status.server_name.as_deref() == Some(user.as_str()),
            "{status:?}"
        );
        ensure!(
            f.rest.cache_exists(&user).await?,
            "{user} not on the server"
        );
        ensure!(
            f.server_config(&user).await? == serde_json::from_str::<Value>(config)?,
            "server config of {user}"
        );
        ensure!(
            f.caches
                .get_opt(&mirror_name(CLUSTER, &user))
                .await?
                .is_none(),
            "a mirror CR appeared beside the user CR"
        );
        f.caches
            .delete("names-user", &DeleteParams::default())
            .await?;
        f.wait_server(&user, false).await?;
        f.wait_gone("names-user").await?;
        Ok(())
    })
    .await
}

// ---- S2 in every format ----------------------------------------------------------------------

/// S2 for JSON, YAML and XML user CRs, after a change of one mutable attribute on the server
/// (`set-mutable-attribute`, not a PUT of a whole document as in `cache_sync.rs`): the CR's spec
/// is rewritten once, in the CR's own format, semantically equal to the server's configuration,
/// and then left alone.
#[tokio::test]
async fn s2_a_server_attribute_change_keeps_every_document_format() -> anyhow::Result<()> {
    with_fixture("cc-s2", async |f| {
        let json_name = f.server_name("s2-json");
        let yaml_name = f.server_name("s2-yaml");
        let xml_name = f.server_name("s2-xml");
        let f = &*f;
        let cases = [
            (
                json_name.as_str(),
                r#"{"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":10000}}}"#,
                ConfigFormat::Json,
            ),
            (
                yaml_name.as_str(),
                "distributedCache:\n  mode: \"SYNC\"\n  expiration:\n    lifespan: \"10000\"\n",
                ConfigFormat::Yaml,
            ),
            (
                xml_name.as_str(),
                r#"<distributed-cache mode="SYNC"><expiration lifespan="10000"/></distributed-cache>"#,
                ConfigFormat::Xml,
            ),
        ];
        for (name, template, _) in cases {
            f.apply_cache(name, template).await?;
        }
        for (name, _, format) in cases {
            f.wait_ready(name, "Synced").await?;
            f.rest
                .set_mutable_attribute(name, "expiration.lifespan", "45000")
                .await?;
            let cr = eventually(
                &format!("the spec of {name} has the new lifespan"),
                SLOW,
                || async move {
                    let cr = f.caches.get(name).await?;
                    let has = cr
                        .spec
                        .template
                        .as_deref()
                        .is_some_and(|t| t.contains("45000"));
                    Ok(has.then_some(cr))
                },
            )
            .await
            .map_err(|e| f.operator.with_log(e))?;
            let template = cr.spec.template.clone().unwrap_or_default();
            ensure!(
                ConfigFormat::detect(&template) == format,
                "{name}: not {format:?} any more: {template}"
            );
            if format == ConfigFormat::Json {
                serde_json::from_str::<Value>(&template)
                    .with_context(|| format!("{name}: not JSON: {template}"))?;
            }
            let server = server_document(&f.rest, name).await?;
            let comparison = f
                .rest
                .compare_configs(&ConfigDocument::new(format, template.clone()), &server, false)
                .await?;
            ensure!(
                comparison == Comparison::Equal,
                "{name}: the spec differs from the server: {comparison:?}\n{template}"
            );
            let cr = f.wait_ready(name, "Synced").await?;
            ensure!(cr.metadata.generation == Some(2), "{name}: {:?}", cr.metadata.generation);
            let last = cr.status.and_then(|s| s.last_synced).context("no lastSynced")?;
            ensure!(last.generation == 2, "{name}: {last:?}");
        }
        // And then nothing more (L3: no rewrite with the server's expanded form).
        tokio::time::sleep(SETTLE).await;
        for (name, _, _) in cases {
            let cr = f.caches.get(name).await?;
            ensure!(
                cr.metadata.generation == Some(2),
                "{name} rewritten again: {:?}",
                cr.metadata.generation
            );
        }
        Ok(())
    })
    .await
}

// ---- K2: updates.strategy --------------------------------------------------------------------

/// K2 for changes the server cannot take in place: with `updates.strategy: recreate` the cache
/// is deleted and created again with the new configuration (seen by an independent listener as a
/// removal and a creation) and the CR is Synced; without it (default `retain`) the CR reports
/// Ready=False, Immutable naming the attribute, and the server keeps its cache.
#[tokio::test]
async fn k2_recreate_strategy_recreates_and_retain_reports_immutable() -> anyhow::Result<()> {
    with_fixture("cc-k2", async |f| {
        let recreated = f.server_name("k2-recreate");
        let kept = f.server_name("k2-retain");
        let f = &*f;
        let base = r#"{"distributed-cache":{"mode":"SYNC","owners":2}}"#;
        f.apply_cache_with(
            &recreated,
            base,
            json!({}),
            json!({"updates": {"strategy": "recreate"}}),
        )
        .await?;
        f.apply_cache(&kept, base).await?;
        f.wait_ready(&recreated, "Synced").await?;
        f.wait_ready(&kept, "Synced").await?;
        let kept_before = f.server_config(&kept).await?;
        let listener = Listener::start(&f.rest).await?;
        let before = writes(&f.operator).await?;

        // The cache mode (distributed -> replicated) cannot change in place.
        let replicated = json!({"replicated-cache":{"mode":"SYNC"}});
        let patch = json!({"spec": {"template": replicated.to_string()}});
        f.caches
            .patch(&recreated, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let cr = f.wait_ready(&recreated, "Synced").await?;
        ensure!(cr.metadata.generation == Some(2));
        let config = f.server_config(&recreated).await?;
        ensure!(config == replicated, "server config {config}");
        tokio::time::sleep(SETTLE).await;
        let events = listener.of(&recreated)?;
        ensure!(
            events == ["remove", "create"],
            "events of {recreated}: {events:?}"
        );
        let counted = delta(&before, &writes(&f.operator).await?);
        ensure!(
            counted.get("server/delete") == Some(&1.0)
                && counted.get("server/recreate") == Some(&1.0),
            "{counted:?}"
        );

        // Neither can the number of owners; without recreate: Immutable, named.
        let patch =
            json!({"spec": {"template": r#"{"distributed-cache":{"mode":"SYNC","owners":1}}"#}});
        f.caches
            .patch(&kept, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let cr = f.wait_ready(&kept, "Immutable").await?;
        let ready = ready_condition(&cr).context("no Ready")?;
        ensure!(ready.status == "False", "{ready:?}");
        ensure!(
            ready.message.contains("owners") && ready.message.contains("recreate"),
            "the message names neither the attribute nor the way out: {}",
            ready.message
        );
        tokio::time::sleep(SETTLE).await;
        ensure!(
            f.server_config(&kept).await? == kept_before,
            "the server changed"
        );
        ensure!(listener.of(&kept)?.is_empty(), "{:?}", listener.of(&kept)?);
        Ok(())
    })
    .await
}

// ---- K3: deletionPolicy Retain ---------------------------------------------------------------

/// K3 with `deletionPolicy: Retain`: the CR gets no finalizer, deleting it leaves the server
/// cache as it was. The cache then has no CR: like any server-only cache in Bidirectional mode
/// it is mirrored, at the latest when the operator restarts (R1).
#[tokio::test]
async fn k3_retain_policy_leaves_the_server_cache() -> anyhow::Result<()> {
    with_fixture("cc-retain", async |f| {
        let name = f.server_name("retain");
        let config = r#"{"distributed-cache":{"mode":"SYNC"}}"#;
        f.apply_cache_with(
            &name,
            config,
            json!({}),
            json!({"deletionPolicy": "Retain"}),
        )
        .await?;
        let cr = f.wait_ready(&name, "Synced").await?;
        ensure!(cr.finalizers().is_empty(), "{:?}", cr.finalizers());
        let before = f.server_config(&name).await?;
        let writes_before = f.operator.server_writes().await?;
        let listener = Listener::start(&f.rest).await?;
        f.caches.delete(&name, &DeleteParams::default()).await?;
        f.wait_gone(&name).await?;
        tokio::time::sleep(SETTLE).await;
        ensure!(
            f.rest.cache_exists(&name).await?,
            "the server cache was deleted"
        );
        ensure!(
            f.server_config(&name).await? == before,
            "the server cache changed"
        );
        ensure!(listener.of(&name)?.is_empty(), "{:?}", listener.of(&name)?);
        ensure!(f.operator.server_writes().await? == writes_before);

        // The retained cache has no CR any more: the server-only path mirrors it at once (as a
        // restart would).
        let f = &*f;
        let mirror = wait_mirror(f, CLUSTER, &name).await?;
        ensure!(
            mirror.labels().get(ORIGIN_LABEL).map(String::as_str) == Some("server"),
            "{:?}",
            mirror.labels()
        );
        ensure!(f.server_config(&name).await? == before);
        Ok(())
    })
    .await
}

// ---- L2 --------------------------------------------------------------------------------------

/// L2: one change on one side costs one write on the other side and at most one status write
/// (plus the finalizer of a new user CR). Counted three ways on a dedicated node (no other suite
/// writes there): the operator's metrics, an independent event listener on the server, and the
/// API server's audit log for the CR.
#[tokio::test]
async fn l2_one_change_costs_one_write_on_the_other_side() -> anyhow::Result<()> {
    let node = Node::new("cc-l2", 2021);
    node.start()?;
    let _node = NodeGuard(node.clone());
    let options = Options {
        infinispan_url: Some(node.url()),
        ..Options::default()
    };
    with_options_fixture("cc-l2", options, async |f| {
        let f = &*f;
        let ns = f.ns.name.as_str();
        let listener = Listener::start(&f.rest).await?;
        let mut report = Vec::new();

        // K1: a new user CR.
        let user = "l2-user";
        let (audit, before) = (Audit::mark(&f.testbed)?, writes(&f.operator).await?);
        f.apply_cache(user, r#"{"distributed-cache":{"mode":"SYNC"}}"#)
            .await?;
        f.wait_ready(user, "Synced").await?;
        let k8s = audited(&audit, ns, user, 3).await?;
        let counted = delta(&before, &writes(&f.operator).await?);
        let server = listener.of(user)?;
        report.push(format!(
            "K1: metrics {counted:?}; server events {server:?}; audit {}",
            show(&k8s)
        ));
        ensure!(server == ["create"], "{}", report.join("\n"));
        ensure!(
            counted.get("server/create") == Some(&1.0)
                && counted.get("kubernetes/finalizer") == Some(&1.0),
            "{}",
            report.join("\n")
        );
        // The user's create, one finalizer write, one status write (L2).
        ensure!(
            count(&k8s, "create", None) == 1
                && count(&k8s, "patch", None) == 1
                && count(&k8s, "patch", Some("status")) == 1
                && k8s.len() == 3,
            "K1 writes to the CR (the user's create, the finalizer, status): {}",
            report.join("\n")
        );

        // K2: a spec change.
        let (audit, before) = (Audit::mark(&f.testbed)?, writes(&f.operator).await?);
        let patch = json!({"spec": {"template":
            r#"{"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":20000}}}"#}});
        f.caches
            .patch(user, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        f.wait_ready(user, "Synced").await?;
        let k8s = audited(&audit, ns, user, 2).await?;
        let counted = delta(&before, &writes(&f.operator).await?);
        let server = listener.of(user)?;
        report.push(format!(
            "K2: metrics {counted:?}; server events {server:?}; audit {}",
            show(&k8s)
        ));
        ensure!(server == ["create", "update"], "{}", report.join("\n"));
        ensure!(
            counted.get("server/update") == Some(&1.0),
            "{}",
            report.join("\n")
        );
        ensure!(
            count(&k8s, "patch", None) == 1
                && count(&k8s, "patch", Some("status")) <= 1
                && k8s.len() <= 2,
            "K2 writes to the CR (the user's patch, one status): {}",
            report.join("\n")
        );

        // S2: a change on the server.
        let (audit, before) = (Audit::mark(&f.testbed)?, writes(&f.operator).await?);
        f.rest
            .set_mutable_attribute(user, "expiration.lifespan", "30000")
            .await?;
        eventually("the CR has the server's lifespan", SLOW, || async move {
            let cr = f.caches.get(user).await?;
            Ok(cr
                .spec
                .template
                .as_deref()
                .is_some_and(|t| t.contains("30000"))
                .then_some(()))
        })
        .await?;
        f.wait_ready(user, "Synced").await?;
        let k8s = audited(&audit, ns, user, 1).await?;
        let counted = delta(&before, &writes(&f.operator).await?);
        let server = listener.of(user)?;
        report.push(format!(
            "S2: metrics {counted:?}; server events {server:?}; audit {}",
            show(&k8s)
        ));
        ensure!(
            server == ["create", "update", "update"],
            "{}",
            report.join("\n")
        );
        ensure!(
            counted.keys().all(|k| k.starts_with("kubernetes/"))
                && counted.get("kubernetes/update_spec") == Some(&1.0),
            "{}",
            report.join("\n")
        );
        ensure!(
            count(&k8s, "patch", None) == 1
                && count(&k8s, "patch", Some("status")) <= 1
                && k8s.len() <= 2,
            "S2 writes to the CR (the spec, one status): {}",
            report.join("\n")
        );

        // S1: a cache created on the server.
        let created = unique("l2-server");
        let mirror = mirror_name(CLUSTER, &created);
        let (audit, before) = (Audit::mark(&f.testbed)?, writes(&f.operator).await?);
        f.create_on_server(&created, r#"{"local-cache":{}}"#)
            .await?;
        f.wait_ready(&mirror, "Synced").await?;
        let k8s = audited(&audit, ns, &mirror, 1).await?;
        let counted = delta(&before, &writes(&f.operator).await?);
        let server = listener.of(&created)?;
        report.push(format!(
            "S1: metrics {counted:?}; server events {server:?}; audit {}",
            show(&k8s)
        ));
        ensure!(server == ["create"], "{}", report.join("\n"));
        ensure!(
            counted.keys().all(|k| k.starts_with("kubernetes/")),
            "{}",
            report.join("\n")
        );
        ensure!(
            count(&k8s, "create", None) == 1
                && count(&k8s, "patch", Some("status")) <= 1
                && k8s.len() <= 2,
            "S1 writes to the CR (one create, one status): {}",
            report.join("\n")
        );

        // S3: the cache removed on the server. The CR holds the finalizer: releasing it and
        // deleting the CR are two writes (Kubernetes has no single call for both).
        let (audit, before) = (Audit::mark(&f.testbed)?, writes(&f.operator).await?);
        f.rest.delete_cache(&created).await?;
        f.wait_gone(&mirror).await?;
        let k8s = audited(&audit, ns, &mirror, 2).await?;
        let counted = delta(&before, &writes(&f.operator).await?);
        let server = listener.of(&created)?;
        report.push(format!(
            "S3: metrics {counted:?}; server events {server:?}; audit {}",
            show(&k8s)
        ));
        ensure!(server == ["create", "remove"], "{}", report.join("\n"));
        ensure!(
            counted.keys().all(|k| k.starts_with("kubernetes/")),
            "{}",
            report.join("\n")
        );
        ensure!(
            count(&k8s, "delete", None) == 1 && k8s.len() <= 2,
            "S3 writes to the CR (finalizer release, delete): {}",
            report.join("\n")
        );

        // K3: the user CR deleted.
        let (audit, before) = (Audit::mark(&f.testbed)?, writes(&f.operator).await?);
        f.caches.delete(user, &DeleteParams::default()).await?;
        f.wait_gone(user).await?;
        f.wait_server(user, false).await?;
        let k8s = audited(&audit, ns, user, 2).await?;
        let counted = delta(&before, &writes(&f.operator).await?);
        let server = listener.of(user)?;
        report.push(format!(
            "K3: metrics {counted:?}; server events {server:?}; audit {}",
            show(&k8s)
        ));
        ensure!(
            server == ["create", "update", "update", "remove"],
            "{}",
            report.join("\n")
        );
        ensure!(
            counted.get("server/delete") == Some(&1.0),
            "{}",
            report.join("\n")
        );
        ensure!(
            count(&k8s, "delete", None) == 1 && count(&k8s, "patch", None) == 1 && k8s.len() == 2,
            "K3 writes to the CR (the user's delete, the finalizer release): {}",
            report.join("\n")
        );
        println!("L2 measured:\n{}", report.join("\n"));
        Ok(())
    })
    .await
}

// ---- E4 --------------------------------------------------------------------------------------

/// E4: internal caches (`___protobuf_metadata`, `___script_cache`) and the caches of the RESP and
/// Memcached connectors (`respCache` at startup, `memcachedCache` created while the operator
/// runs) never become CRs, while an ordinary cache does; a user CR naming an internal or
/// connector cache reports Ready=False, Unsupported, never touches the server and deleting it
/// leaves the server cache.
#[tokio::test]
async fn e4_internal_and_connector_caches_are_never_synced() -> anyhow::Result<()> {
    let node = Node::new("cc-e4", 2022);
    start_with_connectors(&node)?;
    let _node = NodeGuard(node.clone());
    let options = Options {
        infinispan_url: Some(node.url()),
        ..Options::default()
    };
    with_options_fixture("cc-e4", options, async |f| {
        let f = &*f;
        touch_memcached(&node).await?;
        eventually("memcachedCache exists", SLOW, || async move {
            Ok(f.rest.cache_exists("memcachedCache").await?.then_some(()))
        })
        .await?;
        // An ordinary cache, created after memcachedCache: once its mirror is there, the
        // operator has seen every event before it.
        let plain = unique("e4-plain");
        f.create_on_server(&plain, r#"{"local-cache":{}}"#).await?;
        wait_mirror(f, CLUSTER, &plain).await?;
        tokio::time::sleep(SETTLE).await;
        let crs: Vec<String> = f
            .caches
            .list(&Default::default())
            .await?
            .into_iter()
            .filter_map(|cr| cr.spec.common.name)
            .collect();
        ensure!(crs == [plain.clone()], "CRs for {crs:?}");

        let internal = [
            ("e4-script", "___script_cache"),
            ("e4-protobuf", "___protobuf_metadata"),
            ("e4-memcached", "memcachedCache"),
        ];
        let mut before = Vec::new();
        for (_, server_name) in internal {
            before.push(server_document(&f.rest, server_name).await?.text);
        }
        let listener = Listener::start(&f.rest).await?;
        for (cr, server_name) in internal {
            f.apply_cache_with(
                cr,
                r#"{"local-cache":{"statistics":true}}"#,
                json!({}),
                json!({ "name": server_name }),
            )
            .await?;
        }
        for (cr, _) in internal {
            let synced = f.wait_ready(cr, "Unsupported").await?;
            let ready = ready_condition(&synced).context("no Ready")?;
            ensure!(ready.status == "False", "{cr}: {ready:?}");
            ensure!(
                synced.finalizers().is_empty(),
                "{cr}: {:?}",
                synced.finalizers()
            );
            f.caches.delete(cr, &DeleteParams::default()).await?;
            f.wait_gone(cr).await?;
        }
        tokio::time::sleep(SETTLE).await;
        for ((_, server_name), before) in internal.iter().zip(&before) {
            ensure!(
                f.rest.cache_exists(server_name).await?,
                "{server_name} was deleted"
            );
            let after = server_document(&f.rest, server_name).await?.text;
            ensure!(after == *before, "{server_name} changed: {after}");
            ensure!(
                listener.of(server_name)?.is_empty(),
                "{server_name}: {:?}",
                listener.of(server_name)?
            );
        }
        ensure!(f.operator.server_writes().await? == 0.0);
        Ok(())
    })
    .await
}
