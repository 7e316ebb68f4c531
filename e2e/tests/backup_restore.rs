//! Backup and Restore CRs end to end, on the testbed's API server and real Infinispan 16.0.7
//! processes: the cluster operator's Backup and Restore controllers (`cluster_operator::backup::
//! run`, in this process, as the cluster operator's least-privilege identity) reach each
//! `Infinispan` CR's server through a per-cluster URL override (the out-of-cluster mode). The
//! Infinispan CRs exist in the API server with `status.operatorCredentialsSecret` written by the
//! test (as the cluster controller would). This suite's subjects are what an archive carries,
//! object by object, and the failure cases, which need faults made from outside (a server that
//! refuses connections, a source server restarted between backup and restore); the same
//! controllers in the cluster operator's pod, between two clusters of server pods, are
//! `in_pods`'s Backup and Restore test.
//!
//! Private nodes (offsets 2045-2049): 2045 and 2046 are the source and target of the object by
//! object check, 2047 the server of the failure cases.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use cluster_operator::backup::{self, Settings, Stats};
use cluster_operator::servers::{ServerAddress, ServerAddresses, Servers};
use common_crds::backup::Phase;
use common_crds::labels::BACKUP_FINALIZER;
use common_crds::{Backup, Infinispan, Restore};
use e2e::cluster_operator::ClusterOperatorIdentity;
use e2e::node::{Node, NodeGuard};
use e2e::proxy::FaultProxy;
use e2e::{TEST_FIELD_MANAGER, TestNamespace, Testbed, eventually, install_crds};
use infinispan_rest::{
    ConfigDocument, ConfigFormat, CounterConfig, CounterStorage, CreateCacheOptions,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::oneshot;

const WAIT: Duration = Duration::from_secs(90);
const MARKER_PREFIX: &str = "___infinispan-operator.";

/// The controllers of one test, in this process, and what they need.
struct Harness {
    admin: Client,
    testbed: Testbed,
    ns: TestNamespace,
    identity: ClusterOperatorIdentity,
    stats: Arc<Stats>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    archive_dir: std::path::PathBuf,
}

impl Harness {
    async fn new(prefix: &str) -> anyhow::Result<Self> {
        let testbed = Testbed::get()?;
        let admin = testbed.admin_client().await?;
        install_crds(&admin).await?;
        let ns = TestNamespace::create(&admin, prefix).await?;
        let identity = ClusterOperatorIdentity::create(&admin, &testbed, &[&ns.name]).await?;
        let archive_dir = std::env::temp_dir().join(format!("{}-archives", ns.name));
        Ok(Self {
            admin,
            testbed,
            ns,
            identity,
            stats: Arc::default(),
            stop: None,
            task: None,
            archive_dir,
        })
    }

    /// Starts the controllers, reaching the clusters `name -> url` of the test's namespace at
    /// those URLs.
    async fn start(&mut self, urls: &[(&str, String)]) -> anyhow::Result<()> {
        self.start_bounded(urls, backup::DEFAULT_ARCHIVE_MAX_BYTES)
            .await
    }

    /// [`Harness::start`] with the largest archive a Restore downloads.
    async fn start_bounded(
        &mut self,
        urls: &[(&str, String)],
        archive_max_bytes: u64,
    ) -> anyhow::Result<()> {
        let client = e2e::client_from_kubeconfig(&self.identity.kubeconfig).await?;
        let addresses =
            ServerAddresses::from_entries(urls.iter().map(|(name, url)| ServerAddress {
                namespace: self.ns.name.clone(),
                name: name.to_string(),
                url: url.clone(),
            }))?;
        // The same entries, through the parser the command line uses.
        let text = addresses
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(",");
        ensure!(text.parse::<ServerAddresses>()? == addresses);
        let servers = Arc::new(Servers::new(addresses, "cluster.local"));
        let ns = &self.ns.name;
        let settings = Settings {
            archive_dir: self.archive_dir.clone(),
            archive_max_bytes,
            stats: self.stats.clone(),
            ..Settings::default()
        };
        let (stop, stopped) = oneshot::channel::<()>();
        self.stop = Some(stop);
        self.task = Some(tokio::spawn(backup::run(
            client.clone(),
            backup::Apis::new(&client, Some(ns)),
            servers,
            settings,
            async move {
                let _ = stopped.await;
            },
        )));
        Ok(())
    }

    async fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .context("the controllers did not stop within 30 s")??;
        }
        Ok(())
    }

    async fn teardown(mut self) -> anyhow::Result<()> {
        self.stop().await?;
        // Backups keep a finalizer: release what is left so the namespace can go.
        let backups: Api<Backup> = Api::namespaced(self.admin.clone(), &self.ns.name);
        for b in backups.list(&ListParams::default()).await? {
            let _ = backups
                .patch(
                    &b.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                )
                .await;
        }
        let _ = std::fs::remove_dir_all(&self.archive_dir);
        self.identity.delete(&self.admin).await?;
        self.ns.delete().await
    }

    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.admin.clone(), &self.ns.name)
    }

    /// An `Infinispan` CR `name` whose operator credentials are `user`/`password`, named in its
    /// status as the cluster controller would; `credentials: false` leaves the status empty.
    async fn cluster(&self, name: &str, credentials: Option<(&str, &str)>) -> anyhow::Result<()> {
        let cr: Infinispan = serde_json::from_value(json!({
            "apiVersion": "infinispan.org/v1", "kind": "Infinispan",
            "metadata": { "name": name }, "spec": {}
        }))?;
        self.api::<Infinispan>()
            .create(&PostParams::default(), &cr)
            .await
            .with_context(|| format!("creating Infinispan {name}"))?;
        let Some((user, password)) = credentials else {
            return Ok(());
        };
        let secret_name = format!("{name}-operator-credentials");
        let secret: Secret = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": secret_name },
            "stringData": { "username": user, "password": password }
        }))?;
        self.api::<Secret>()
            .create(&PostParams::default(), &secret)
            .await?;
        self.api::<Infinispan>()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"operatorCredentialsSecret": secret_name}})),
            )
            .await?;
        Ok(())
    }

    async fn backup(
        &self,
        name: &str,
        cluster: &str,
        resources: Option<Value>,
    ) -> anyhow::Result<()> {
        // The archive stays on the server: these servers are loopback processes, which the
        // copy Job of `storage: Volume` (a pod) cannot reach; in_pods.rs tests that storage.
        let mut spec = json!({ "cluster": cluster, "storage": "ServerNode" });
        if let Some(r) = resources {
            spec["resources"] = r;
        }
        let cr: Backup = serde_json::from_value(json!({
            "apiVersion": "infinispan.org/v2alpha1", "kind": "Backup",
            "metadata": { "name": name }, "spec": spec
        }))?;
        self.api::<Backup>()
            .patch(
                name,
                &PatchParams::apply(TEST_FIELD_MANAGER),
                &Patch::Apply(&cr),
            )
            .await?;
        Ok(())
    }

    async fn restore(
        &self,
        name: &str,
        cluster: &str,
        backup: &str,
        resources: Option<Value>,
    ) -> anyhow::Result<()> {
        let mut spec = json!({ "cluster": cluster, "backup": backup });
        if let Some(r) = resources {
            spec["resources"] = r;
        }
        let cr: Restore = serde_json::from_value(json!({
            "apiVersion": "infinispan.org/v2alpha1", "kind": "Restore",
            "metadata": { "name": name }, "spec": spec
        }))?;
        self.api::<Restore>()
            .patch(
                name,
                &PatchParams::apply(TEST_FIELD_MANAGER),
                &Patch::Apply(&cr),
            )
            .await?;
        Ok(())
    }

    /// Waits for the Backup's phase; returns the CR.
    async fn backup_phase(&self, name: &str, phase: Phase) -> anyhow::Result<Backup> {
        let api = self.api::<Backup>();
        eventually(&format!("Backup {name} {phase:?}"), WAIT, || {
            let api = api.clone();
            async move {
                let b = api.get(name).await?;
                let now = b.status.as_ref().and_then(|s| s.phase);
                if matches!(now, Some(Phase::Failed | Phase::Succeeded)) && now != Some(phase) {
                    bail!("Backup {name} ended {now:?}, not {phase:?}: {:?}", b.status);
                }
                Ok((now == Some(phase)).then_some(b))
            }
        })
        .await
    }

    async fn restore_phase(&self, name: &str, phase: Phase) -> anyhow::Result<Restore> {
        let api = self.api::<Restore>();
        eventually(&format!("Restore {name} {phase:?}"), WAIT, || {
            let api = api.clone();
            async move {
                let r = api.get(name).await?;
                let now = r.status.as_ref().and_then(|s| s.phase);
                if matches!(now, Some(Phase::Failed | Phase::Succeeded)) && now != Some(phase) {
                    bail!(
                        "Restore {name} ended {now:?}, not {phase:?}: {:?}",
                        r.status
                    );
                }
                Ok((now == Some(phase)).then_some(r))
            }
        })
        .await
    }

    /// Waits until the CR's `type_` condition has `reason`; returns it.
    async fn backup_condition(
        &self,
        name: &str,
        type_: &str,
        reason: &str,
    ) -> anyhow::Result<Condition> {
        let api = self.api::<Backup>();
        eventually(&format!("Backup {name} {type_} {reason}"), WAIT, || {
            let api = api.clone();
            async move {
                let b = api.get(name).await?;
                Ok(condition(b.status.map(|s| s.conditions), type_).filter(|c| c.reason == reason))
            }
        })
        .await
    }

    async fn restore_condition(
        &self,
        name: &str,
        type_: &str,
        reason: &str,
    ) -> anyhow::Result<Condition> {
        let api = self.api::<Restore>();
        eventually(&format!("Restore {name} {type_} {reason}"), WAIT, || {
            let api = api.clone();
            async move {
                let r = api.get(name).await?;
                Ok(condition(r.status.map(|s| s.conditions), type_).filter(|c| c.reason == reason))
            }
        })
        .await
    }

    /// The reasons of the Events about `name`.
    async fn event_reasons(&self, name: &str) -> anyhow::Result<Vec<String>> {
        Ok(self
            .api::<Event>()
            .list(&ListParams::default())
            .await?
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .filter_map(|e| e.reason)
            .collect())
    }
}

fn condition(conditions: Option<Vec<Condition>>, type_: &str) -> Option<Condition> {
    conditions?.into_iter().find(|c| c.type_ == type_)
}

/// A node of this suite, wiped first (a node left by an earlier run keeps its objects).
fn fresh_node(name: &str, offset: u16) -> anyhow::Result<NodeGuard> {
    let node = Node::new(name, offset);
    node.stop_and_wipe()?;
    node.start()?;
    Ok(NodeGuard(node))
}

/// `curl` against a node with the testbed's credentials (given on stdin, never on the
/// command line): (status, body).
fn curl(
    testbed: &Testbed,
    method: &str,
    url: &str,
    content_type: Option<&str>,
    body: Option<&str>,
) -> anyhow::Result<(u16, String)> {
    use std::io::Write;
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-s", "-K", "-", "-X", method, "-w", "\n%{http_code}", url]);
    if let Some(ct) = content_type {
        cmd.args(["-H", &format!("Content-Type: {ct}")]);
        cmd.args(["-H", &format!("Accept: {ct}")]);
    }
    if let Some(b) = body {
        cmd.args(["--data-binary", b]);
    }
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("running curl")?;
    child.stdin.take().context("curl stdin")?.write_all(
        format!(
            "user = \"{}:{}\"\n",
            testbed.infinispan_user, testbed.infinispan_password
        )
        .as_bytes(),
    )?;
    let out = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').context("curl output")?;
    Ok((status.trim().parse()?, body.to_string()))
}

fn put_entry(
    testbed: &Testbed,
    node: &Node,
    cache: &str,
    key: &str,
    ct: &str,
    value: &str,
) -> anyhow::Result<()> {
    let (status, body) = curl(
        testbed,
        "PUT",
        &format!("{}/rest/v2/caches/{cache}/{key}", node.url()),
        Some(ct),
        Some(value),
    )?;
    ensure!(
        status == 204 || status == 200,
        "PUT {cache}/{key}: {status} {body}"
    );
    Ok(())
}

fn get_entry(
    testbed: &Testbed,
    node: &Node,
    cache: &str,
    key: &str,
    ct: &str,
) -> anyhow::Result<Option<String>> {
    let (status, body) = curl(
        testbed,
        "GET",
        &format!("{}/rest/v2/caches/{cache}/{key}", node.url()),
        Some(ct),
        None,
    )?;
    match status {
        200 => Ok(Some(body)),
        404 => Ok(None),
        _ => bail!("GET {cache}/{key}: {status} {body}"),
    }
}

/// Everything a server holds that a backup carries, in comparable form.
#[derive(Debug, PartialEq)]
struct World {
    caches: BTreeMap<String, Value>,
    templates: BTreeMap<String, Value>,
    counters: BTreeMap<String, (CounterConfig, i64)>,
    schemas: BTreeMap<String, String>,
    tasks: BTreeMap<String, String>,
}

async fn world(rest: &infinispan_rest::Client) -> anyhow::Result<World> {
    let mut caches = BTreeMap::new();
    for name in rest.list_caches().await? {
        if name.starts_with("___") {
            continue;
        }
        let doc = rest.cache_config(&name, ConfigFormat::Json).await?;
        caches.insert(name, serde_json::from_str(&doc.text)?);
    }
    let mut templates = BTreeMap::new();
    for t in rest.list_templates().await? {
        if t.name.starts_with("org.infinispan.") {
            continue;
        }
        let doc = rest.template_config(&t.name, ConfigFormat::Json).await?;
        templates.insert(t.name, serde_json::from_str(&doc.text)?);
    }
    let mut counters = BTreeMap::new();
    for name in rest.list_counters().await? {
        let config = rest.counter_config(&name).await?;
        let value = rest.counter_value(&name).await?;
        counters.insert(name, (config, value));
    }
    let mut schemas = BTreeMap::new();
    for s in rest.list_schemas().await? {
        let text = rest.schema(&s.name).await?;
        schemas.insert(s.name, text);
    }
    let mut tasks = BTreeMap::new();
    for t in rest.list_tasks(true).await? {
        let script = rest.task_script(&t.name).await?;
        tasks.insert(t.name, script);
    }
    Ok(World {
        caches,
        templates,
        counters,
        schemas,
        tasks,
    })
}

async fn marker_caches(rest: &infinispan_rest::Client) -> anyhow::Result<Vec<String>> {
    Ok(rest
        .list_caches()
        .await?
        .into_iter()
        .filter(|c| c.starts_with(MARKER_PREFIX))
        .collect())
}

const PERSON_PROTO: &str = "syntax = \"proto2\";\npackage br;\n/**\n * @Indexed\n */\nmessage Person {\n  /** @Basic */\n  optional string name = 1;\n  /** @Basic */\n  optional int32 age = 2;\n}\n";
const TASK_SCRIPT: &str = "// mode=local,language=javascript,parameters=[who]\n\"hello \" + who";

#[tokio::test]
async fn a_backup_restores_into_a_separate_server_object_by_object() -> anyhow::Result<()> {
    let mut h = Harness::new("br").await?;
    let result = object_by_object(&mut h).await;
    let teardown = h.teardown().await;
    result.and(teardown)
}

async fn object_by_object(h: &mut Harness) -> anyhow::Result<()> {
    let (source_node, target_node) = {
        let (a, b) = tokio::join!(
            tokio::task::spawn_blocking(|| fresh_node("br-source", 2045)),
            tokio::task::spawn_blocking(|| fresh_node("br-target", 2046)),
        );
        (a??, b??)
    };
    let tb = h.testbed.clone();
    let user = tb.infinispan_user.clone();
    let password = tb.infinispan_password.clone();
    let source = source_node.0.rest(&tb)?;
    let target = target_node.0.rest(&tb)?;

    // The source server's objects, created over REST (as any client would).
    source
        .create_template(
            "br-template",
            &ConfigDocument::json(
                r#"{"distributed-cache":{"mode":"SYNC","owners":1,"encoding":{"media-type":"text/plain"},"statistics":true}}"#,
            ),
        )
        .await?;
    source
        .create_schema("br-person.proto", PERSON_PROTO)
        .await?;
    source
        .create_cache(
            "people",
            &ConfigDocument::json(
                r#"{"distributed-cache":{"mode":"SYNC","encoding":{"media-type":"application/x-protostream"},"indexing":{"enabled":true,"storage":"local-heap","indexed-entities":["br.Person"]}}}"#,
            ),
            CreateCacheOptions::default(),
        )
        .await?;
    source
        .create_cache(
            "plain",
            &ConfigDocument::json(
                r#"{"local-cache":{"encoding":{"media-type":"text/plain"},"expiration":{"lifespan":"3600000"},"memory":{"max-count":"1000","when-full":"REMOVE"}}}"#,
            ),
            CreateCacheOptions::default(),
        )
        .await?;
    source
        .create_cache_from_template(
            "from-template",
            "br-template",
            CreateCacheOptions::default(),
        )
        .await?;
    source
        .create_counter(
            "br-strong",
            &CounterConfig::Strong {
                initial_value: 5,
                storage: CounterStorage::Persistent,
                lower_bound: Some(0),
                upper_bound: Some(100),
                lifespan: None,
            },
        )
        .await?;
    source.counter_increment("br-strong").await?;
    source.counter_increment("br-strong").await?;
    source
        .create_counter(
            "br-weak",
            &CounterConfig::Weak {
                initial_value: 3,
                storage: CounterStorage::Persistent,
                concurrency_level: Some(4),
            },
        )
        .await?;
    source.put_task("br-hello", TASK_SCRIPT).await?;
    for (k, v) in [("k1", "v1"), ("k2", "v2"), ("k/3", "v 3")] {
        let key = infinispan_rest::names::encode(k);
        put_entry(&tb, &source_node.0, "plain", &key, "text/plain", v)?;
    }
    put_entry(
        &tb,
        &source_node.0,
        "from-template",
        "t1",
        "text/plain",
        "tv1",
    )?;
    put_entry(
        &tb,
        &source_node.0,
        "people",
        "ada",
        "application/json",
        r#"{"_type":"br.Person","name":"Ada","age":36}"#,
    )?;
    // The resources operator's markers, made by hand: the source's state, never to travel.
    source
        .create_cache(
            "___infinispan-operator.sync-state.do-not-delete.0123456789abcdef",
            &ConfigDocument::json(r#"{"local-cache":{}}"#),
            CreateCacheOptions::default(),
        )
        .await?;
    source
        .create_cache(
            "___infinispan-operator.session.fedcba9876543210",
            &ConfigDocument::json(r#"{"local-cache":{}}"#),
            CreateCacheOptions { volatile: true },
        )
        .await?;
    // The target's own marker, which must stay the only one there.
    let own_marker = "___infinispan-operator.sync-state.do-not-delete.aaaaaaaaaaaaaaaa";
    target
        .create_cache(
            own_marker,
            &ConfigDocument::json(r#"{"local-cache":{}}"#),
            CreateCacheOptions::default(),
        )
        .await?;
    let expected = world(&source).await?;
    ensure!(expected.caches.len() == 3 && expected.templates.len() == 1);
    ensure!(
        expected.counters.len() == 2 && expected.schemas.len() == 1 && expected.tasks.len() == 1
    );
    ensure!(expected.counters["br-strong"].1 == 7);

    h.cluster("source", Some((&user, &password))).await?;
    h.cluster("target", Some((&user, &password))).await?;
    h.start(&[
        ("source", source_node.0.url()),
        ("target", target_node.0.url()),
    ])
    .await?;

    // Backup of everything.
    h.backup("full", "source", None).await?;
    let backup = h.backup_phase("full", Phase::Succeeded).await?;
    let status = backup.status.clone().context("status")?;
    let archive = status.archive.clone().context("archive")?;
    ensure!(archive.starts_with("source:"), "{archive}");
    let job = archive.trim_start_matches("source:").to_string();
    ensure!(job.starts_with(&format!("{}.full-", h.ns.name)), "{job}");
    ensure!(status.start_time.is_some() && status.completion_time.is_some());
    ensure!(status.start_time <= status.completion_time);
    ensure!(status.observed_generation == backup.metadata.generation);
    let complete = condition(Some(status.conditions.clone()), "Complete").context("Complete")?;
    ensure!(
        complete.status == "True" && complete.reason == "Succeeded",
        "{complete:?}"
    );
    ensure!(condition(Some(status.conditions), "Failed").is_none());
    ensure!(backup.finalizers().iter().any(|f| f == BACKUP_FINALIZER));
    ensure!(
        source.list_backups().await?.contains(&job),
        "the archive on the source"
    );

    // Restore into the other server, through the operator (no shared filesystem). The target
    // takes another cluster's data only once it says so.
    h.restore("into-target", "target", "full", None).await?;
    let c = h
        .restore_condition("into-target", "Complete", "RestoreNotAccepted")
        .await?;
    ensure!(
        c.message.contains("spec.acceptRestoresFrom") && c.message.contains("source"),
        "{c:?}"
    );
    ensure!(
        target.list_restores().await?.is_empty(),
        "a restore ran on the target before it accepted"
    );
    h.api::<Infinispan>()
        .patch(
            "target",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"acceptRestoresFrom": ["source"]}})),
        )
        .await?;
    let restore = h.restore_phase("into-target", Phase::Succeeded).await?;
    let rstatus = restore.status.clone().context("status")?;
    ensure!(
        rstatus.archive.as_deref() == Some(archive.as_str()),
        "{rstatus:?}"
    );
    ensure!(rstatus.start_time.is_some() && rstatus.completion_time.is_some());

    // Object by object.
    let restored = world(&target).await?;
    for (name, config) in &expected.caches {
        ensure!(
            restored.caches.get(name) == Some(config),
            "cache {name}: {:?} != {config}",
            restored.caches.get(name)
        );
    }
    ensure!(
        restored.templates == expected.templates,
        "templates: {:?} != {:?}",
        restored.templates,
        expected.templates
    );
    ensure!(
        restored.counters == expected.counters,
        "counters: {:?} != {:?}",
        restored.counters,
        expected.counters
    );
    // Infinispan 16.0.7's backup drops a schema's final newline: the text is otherwise the
    // same, byte for byte.
    let trimmed = |schemas: &BTreeMap<String, String>| {
        schemas
            .iter()
            .map(|(k, v)| (k.clone(), v.trim_end_matches('\n').to_string()))
            .collect::<BTreeMap<_, _>>()
    };
    ensure!(
        trimmed(&restored.schemas) == trimmed(&expected.schemas),
        "schemas: {:?} != {:?}",
        restored.schemas,
        expected.schemas
    );
    ensure!(
        restored.tasks == expected.tasks,
        "tasks: {:?} != {:?}",
        restored.tasks,
        expected.tasks
    );
    ensure!(
        World {
            schemas: trimmed(&restored.schemas),
            ..restored
        } == World {
            schemas: trimmed(&expected.schemas),
            ..expected
        }
    );
    for (k, v) in [("k1", "v1"), ("k2", "v2"), ("k/3", "v 3")] {
        let key = infinispan_rest::names::encode(k);
        let got = get_entry(&tb, &target_node.0, "plain", &key, "text/plain")?;
        ensure!(got.as_deref() == Some(v), "plain/{k}: {got:?}");
    }
    ensure!(
        get_entry(&tb, &target_node.0, "from-template", "t1", "text/plain")?.as_deref()
            == Some("tv1")
    );
    let ada = get_entry(&tb, &target_node.0, "people", "ada", "application/json")?
        .context("people/ada")?;
    let ada: Value = serde_json::from_str(&ada)?;
    ensure!(ada["name"] == "Ada" && ada["age"] == 36, "{ada}");
    // The restored task runs; the restored schema serves the restored cache.
    ensure!(
        target
            .exec_task("br-hello", &[("who", "target")])
            .await?
            .contains("hello target")
    );
    // No marker travelled: the target has its own, only.
    ensure!(
        marker_caches(&target).await? == vec![own_marker.to_string()],
        "markers on the target: {:?}",
        marker_caches(&target).await?
    );
    ensure!(
        marker_caches(&source).await?.len() == 2,
        "the source keeps its markers"
    );

    // Events for the transitions.
    let reasons = h.event_reasons("full").await?;
    for r in ["BackupStarted", "BackupSucceeded"] {
        ensure!(reasons.iter().any(|x| x == r), "{r} in {reasons:?}");
    }
    let reasons = h.event_reasons("into-target").await?;
    for r in ["RestoreStarted", "RestoreSucceeded"] {
        ensure!(reasons.iter().any(|x| x == r), "{r} in {reasons:?}");
    }

    // A selective restore: one cache, nothing else, brings back just that cache.
    target.delete_cache("plain").await?;
    target.delete_cache("from-template").await?;
    h.restore(
        "only-plain",
        "target",
        "full",
        Some(json!({"caches": ["plain"], "templates": [], "counters": [], "schemas": [], "tasks": []})),
    )
    .await?;
    h.restore_phase("only-plain", Phase::Succeeded).await?;
    ensure!(target.cache_exists("plain").await?);
    ensure!(
        !target.cache_exists("from-template").await?,
        "not selected, not restored"
    );
    ensure!(get_entry(&tb, &target_node.0, "plain", "k1", "text/plain")?.as_deref() == Some("v1"));

    // Idle: finished CRs cost nothing.
    let writes = h.stats.status_writes();
    let reconciles = h.stats.backup_reconciles() + h.stats.restore_reconciles();
    tokio::time::sleep(Duration::from_secs(5)).await;
    ensure!(
        h.stats.status_writes() == writes,
        "status written while idle"
    );
    ensure!(
        h.stats.backup_reconciles() + h.stats.restore_reconciles() == reconciles,
        "reconciles while idle"
    );

    // Deleting the Backup deletes its archive on the source (finalizer).
    h.api::<Backup>()
        .delete("full", &DeleteParams::default())
        .await?;
    let api = h.api::<Backup>();
    eventually("Backup full gone", WAIT, || {
        let api = api.clone();
        async move { Ok(api.get_opt("full").await?.is_none().then_some(())) }
    })
    .await?;
    ensure!(
        !source.list_backups().await?.contains(&job),
        "the archive is deleted with the CR"
    );
    h.stop().await?;
    drop(source_node);
    drop(target_node);
    Ok(())
}

#[tokio::test]
async fn failures_are_clear_conditions_without_a_hot_loop() -> anyhow::Result<()> {
    let mut h = Harness::new("br-fail").await?;
    let result = failures(&mut h).await;
    let teardown = h.teardown().await;
    result.and(teardown)
}

async fn failures(h: &mut Harness) -> anyhow::Result<()> {
    let node = tokio::task::spawn_blocking(|| fresh_node("br-fail", 2047)).await??;
    let tb = h.testbed.clone();
    let (user, password) = (tb.infinispan_user.clone(), tb.infinispan_password.clone());
    let rest = node.0.rest(&tb)?;
    rest.create_cache(
        "c1",
        &ConfigDocument::json(r#"{"local-cache":{}}"#),
        CreateCacheOptions::default(),
    )
    .await?;
    // A server that refuses every connection, counting them.
    let down = FaultProxy::for_url(&node.0.url()).await?;
    down.refuse(true);

    h.cluster("down", Some((&user, &password))).await?;
    h.cluster("wrong-password", Some((&user, "not-the-password")))
        .await?;
    h.cluster("no-credentials", None).await?;
    let urls = [
        ("down", down.url()),
        ("wrong-password", node.0.url()),
        ("no-credentials", node.0.url()),
        ("late", node.0.url()),
    ];
    h.start(&urls).await?;

    let started = Instant::now();
    let tries_before = down.refused();
    h.backup("to-down", "down", None).await?;
    h.backup("wrong-password", "wrong-password", None).await?;
    h.backup("no-credentials", "no-credentials", None).await?;
    h.backup("before-its-cluster", "late", None).await?;
    h.restore("of-nothing", "down", "no-such-backup", None)
        .await?;

    let c = h
        .backup_condition("to-down", "Complete", "ServerUnavailable")
        .await?;
    ensure!(
        c.status == "False" && c.message.contains("transport error"),
        "{c:?}"
    );
    let c = h
        .backup_condition("wrong-password", "Complete", "AccessDenied")
        .await?;
    ensure!(c.message.contains("401"), "{c:?}");
    ensure!(!c.message.contains("not-the-password"));
    let c = h
        .backup_condition("no-credentials", "Complete", "CredentialsNotReady")
        .await?;
    ensure!(c.message.contains("operatorCredentialsSecret"), "{c:?}");
    let c = h
        .backup_condition("before-its-cluster", "Complete", "ClusterNotFound")
        .await?;
    ensure!(c.message.contains("late"), "{c:?}");
    let c = h
        .restore_condition("of-nothing", "Complete", "BackupNotFound")
        .await?;
    ensure!(c.message.contains("no-such-backup"), "{c:?}");
    for name in [
        "to-down",
        "wrong-password",
        "no-credentials",
        "before-its-cluster",
    ] {
        let b = h.api::<Backup>().get(name).await?;
        ensure!(
            b.status.and_then(|s| s.phase) == Some(Phase::Pending),
            "{name} stays Pending"
        );
    }

    // No hot loop: over 20 s, the unreachable server is tried a handful of times (backoff
    // 2, 4, 8, 16 s), and nothing is written once the condition says why.
    let writes = h.stats.status_writes();
    let reconciles = h.stats.backup_reconciles() + h.stats.restore_reconciles();
    let tries = down.refused();
    tokio::time::sleep(Duration::from_secs(20)).await;
    let tries = down.refused() - tries;
    let reconciles = h.stats.backup_reconciles() + h.stats.restore_reconciles() - reconciles;
    let total = down.refused() - tries_before;
    eprintln!(
        "in 20 s: {tries} connections to the unreachable server, {reconciles} reconciles of 5 waiting CRs, {} status writes; {total} connections in all over {:?}",
        h.stats.status_writes() - writes,
        started.elapsed()
    );
    ensure!(
        tries <= 6,
        "{tries} connection attempts in 20 s: a hot loop"
    );
    ensure!(
        total <= 12,
        "{total} connection attempts since the start: a hot loop"
    );
    ensure!(
        reconciles <= 30,
        "{reconciles} reconciles in 20 s: a hot loop"
    );
    ensure!(
        h.stats.status_writes() == writes,
        "status rewritten while waiting"
    );

    // The cluster that was missing appears: the waiting Backup goes on by itself (woken by
    // the watch, not by a long backoff).
    h.cluster("late", Some((&user, &password))).await?;
    let appeared = Instant::now();
    h.backup_phase("before-its-cluster", Phase::Succeeded)
        .await?;
    eprintln!(
        "the Backup succeeded {:?} after its cluster appeared",
        appeared.elapsed()
    );

    // A backup the server fails: a cache that does not exist. The server's message.
    h.backup("fails", "late", Some(json!({"caches": ["no-such-cache"]})))
        .await?;
    let failed = h.backup_phase("fails", Phase::Failed).await?;
    let c = condition(failed.status.map(|s| s.conditions), "Failed").context("Failed")?;
    ensure!(c.status == "True" && c.reason == "ServerFailed", "{c:?}");
    ensure!(
        c.message.contains("ISPN012042"),
        "the server's message: {c:?}"
    );
    // Nothing selected: refused before the server is asked.
    h.backup(
        "nothing",
        "late",
        Some(json!({"caches": [], "templates": [], "counters": [], "schemas": [], "tasks": []})),
    )
    .await?;
    let c = h
        .backup_condition("nothing", "Failed", "InvalidSelection")
        .await?;
    ensure!(c.message.contains("nothing is selected"), "{c:?}");

    // A Restore of the failed Backup fails, saying why.
    h.restore("of-failed", "late", "fails", None).await?;
    let c = h
        .restore_condition("of-failed", "Failed", "BackupFailed")
        .await?;
    ensure!(
        c.message.contains("fails") && c.message.contains("ISPN012042"),
        "{c:?}"
    );
    // A Restore naming what the archive lacks fails before the server restores anything.
    h.restore(
        "not-in-archive",
        "late",
        "before-its-cluster",
        Some(json!({"caches": ["c1", "nope"]})),
    )
    .await?;
    let c = h
        .restore_condition("not-in-archive", "Failed", "InvalidSelection")
        .await?;
    ensure!(c.message.contains("cache 'nope'"), "{c:?}");

    // The source node restarts: Infinispan forgets its backups, the archive cannot be read.
    node.0.stop()?;
    node.0.start()?;
    h.restore("after-restart", "late", "before-its-cluster", None)
        .await?;
    let c = h
        .restore_condition("after-restart", "Failed", "ArchiveUnavailable")
        .await?;
    ensure!(c.message.contains("restarted"), "{c:?}");
    // An archive larger than the operator downloads: the Restore fails saying which settings to
    // raise, and nothing is left in the archive directory (no eviction of a full /tmp).
    h.backup("for-a-small-bound", "late", None).await?;
    h.backup_phase("for-a-small-bound", Phase::Succeeded)
        .await?;
    h.stop().await?;
    h.start_bounded(&urls, 1024).await?;
    h.restore("too-large", "late", "for-a-small-bound", None)
        .await?;
    let c = h
        .restore_condition("too-large", "Failed", "ArchiveTooLarge")
        .await?;
    ensure!(
        c.message.contains("1024 bytes") && c.message.contains("tmpSizeLimit"),
        "{c:?}"
    );
    let left: Vec<_> = std::fs::read_dir(&h.archive_dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    ensure!(left.is_empty(), "archive files left: {left:?}");
    // Deleting that Backup now: the server has nothing to delete, the finalizer goes anyway.
    h.api::<Backup>()
        .delete("before-its-cluster", &DeleteParams::default())
        .await?;
    let api = h.api::<Backup>();
    eventually("Backup before-its-cluster gone", WAIT, || {
        let api = api.clone();
        async move {
            Ok(api
                .get_opt("before-its-cluster")
                .await?
                .is_none()
                .then_some(()))
        }
    })
    .await?;
    // A Backup whose cluster cannot be reached and never started: deleted at once.
    h.api::<Backup>()
        .delete("to-down", &DeleteParams::default())
        .await?;
    eventually("Backup to-down gone", WAIT, || {
        let api = api.clone();
        async move { Ok(api.get_opt("to-down").await?.is_none().then_some(())) }
    })
    .await?;
    h.stop().await?;
    drop(down);
    drop(node);
    Ok(())
}
