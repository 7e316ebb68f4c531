//! End-to-end: Schema, Template, Counter and Task CRs through operator kills, server restarts
//! and wipes (design R1, R2, R3), each test on a private node of its own (offsets 2040-2049 of
//! `e2e::node`; node0 is never touched), the operator listing counters every second. Every test
//! has one object of each kind made from a CR and one made on the server (a mirror).
//!
//! - R1: the operator killed with SIGKILL right after CRs are applied (before it writes, and at
//!   its first write), objects created on the server and CRs deleted while it is down: after
//!   the restart every CR is Synced with its content on the server, every server object has
//!   exactly one CR, nothing deleted comes back.
//! - R2: objects removed on the server while the operator was down, the server running on: the
//!   CRs go (Delete policy), user CRs and mirrors alike, volatile or persistent (no restart, so
//!   any absence is a removal). With a server restart that keeps the state: volatile counters
//!   are lost by the server and recreated from their CRs (never taken as deleted), persistent
//!   objects stay, and persistent objects removed before the restart still count as removed —
//!   for mirrors too: schemas and tasks have no volatile form on the server. (Infinispan
//!   16.0.7 itself brings back a persistent counter deleted before a restart: such a counter is
//!   on the server again and its CR must stay, see [`brought_back`].) Templates: one created
//!   over REST (`@@template@create` without flags, as the operator and these tests create them)
//!   is persistent — it survives a restart that keeps the state, and one removed before the
//!   restart stays removed (16.0.7, checked by hand and by these tests) — so a user Template
//!   CR's template removed before the restart counts as removed. Another client may have
//!   created a mirrored template `VOLATILE` (the admin task takes flags; the server does not
//!   tell them), so a mirrored template absent after a restart proves nothing: it is recreated
//!   from its CR, never taken as deleted.
//! - R3: a wiped server: every CR recreates its object, no CR is deleted (same UIDs).
//!
//! Every test ends on one check of the whole state ([`check_world`]), which must hold and then
//! hold again a few seconds later (nothing comes back late).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use common_crds::counter::{CounterSpec, CounterStorage as CrStorage, CounterType};
use common_crds::labels::CLUSTER_LABEL;
use common_crds::{Counter, ResourceKind, Schema, ServerResource, Task, Template};
use e2e::eventually;
use e2e::node::{Node, NodeGuard};
use e2e::operator::*;
use infinispan_rest::tasks::SCRIPT_CACHE;
use infinispan_rest::{ConfigDocument, CounterConfig, CounterStorage, InternalObjects};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

/// The operator lists counters every second here (the default is 10 s).
const COUNTER_LIST: &str = "--counter-list-interval=1s";
/// Bound on convergence after a restart of the operator or of the server (the operator's
/// reconnect backoff is capped at 30 s, and a node takes about 30 s to start).
const CONVERGE: Duration = Duration::from_secs(90);
/// Convergence must still hold this long after it was reached.
const SETTLE: Duration = Duration::from_secs(3);

/// One object of the test: a CR and the server object it stands for.
#[derive(Clone, Debug)]
struct Obj {
    kind: ResourceKind,
    /// metadata.name of the CR (a mirror name for objects created on the server).
    cr: String,
    /// The server name.
    server: String,
}

impl Obj {
    fn key(&self) -> (ResourceKind, String) {
        (self.kind, self.server.clone())
    }
}

impl std::fmt::Display for Obj {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            out,
            "{} {} (server {})",
            self.kind.as_str(),
            self.cr,
            self.server
        )
    }
}

/// What an object is, compared between a CR and the server.
#[derive(Clone, Debug, PartialEq)]
enum Content {
    /// A schema's or a task's text, line endings and trailing whitespace aside.
    Text(String),
    Counter(CounterConfig),
    /// A template's configuration as a cache document (`{"local-cache":{...}}`; the server's
    /// `-configuration` suffix taken off), compared with [`Content::matches`].
    Template(Value),
}

impl Content {
    /// Whether the server's `self` is what the CR's `cr` asks for: equal, except for templates,
    /// whose server document must hold every attribute of the CR's (the server may add some)
    /// with the same value, numbers and booleans written as strings or not.
    fn matches(&self, cr: &Content) -> bool {
        match (self, cr) {
            (Content::Template(server), Content::Template(cr)) => holds(server, cr),
            _ => self == cr,
        }
    }
}

/// `have` holds every attribute of `want`, with the same value.
fn holds(have: &Value, want: &Value) -> bool {
    fn scalar(value: &Value) -> String {
        match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        }
    }
    match (have, want) {
        (Value::Object(have), Value::Object(want)) => want
            .iter()
            .all(|(key, want)| have.get(key).is_some_and(|have| holds(have, want))),
        (Value::Array(have), Value::Array(want)) => {
            have.len() == want.len() && have.iter().zip(want).all(|(h, w)| holds(h, w))
        }
        (Value::Object(_) | Value::Array(_), _) | (_, Value::Object(_) | Value::Array(_)) => false,
        (have, want) => scalar(have) == scalar(want),
    }
}

/// A template document (`{"<kind>-configuration":{...}}` as the server lists it, or a CR's
/// `{"<kind>":{...}}`) as a cache document.
fn template_content(document: &Value) -> Content {
    let renamed = match document.as_object() {
        Some(map) if map.len() == 1 => Value::Object(
            map.iter()
                .map(|(kind, body)| {
                    let kind = kind.strip_suffix("-configuration").unwrap_or(kind);
                    (kind.to_string(), body.clone())
                })
                .collect(),
        ),
        _ => document.clone(),
    };
    Content::Template(renamed)
}

/// A Template CR's `spec.template` (JSON here: the tests write JSON, mirrors hold the server's
/// JSON); anything else is kept as text, which matches no server template.
fn cr_template_content(text: &str) -> Content {
    match serde_json::from_str::<Value>(text) {
        Ok(document) => template_content(&document),
        Err(_) => Content::Text(text.to_string()),
    }
}

fn normalise(text: &str) -> String {
    text.lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
        .trim_end()
        .to_string()
}

/// The definition a Counter CR asks for.
fn desired(spec: &CounterSpec) -> CounterConfig {
    let storage = match spec.storage {
        CrStorage::Volatile => CounterStorage::Volatile,
        CrStorage::Persistent => CounterStorage::Persistent,
    };
    match spec.type_ {
        CounterType::Strong => CounterConfig::Strong {
            initial_value: spec.initial_value,
            storage,
            lower_bound: spec.lower_bound,
            upper_bound: spec.upper_bound,
            lifespan: spec.lifespan,
        },
        CounterType::Weak => CounterConfig::Weak {
            initial_value: spec.initial_value,
            storage,
            concurrency_level: spec.concurrency_level.and_then(|c| u32::try_from(c).ok()),
        },
    }
}

/// A CR as the checks see it.
#[derive(Debug)]
struct CrView {
    kind: ResourceKind,
    name: String,
    uid: String,
    server: String,
    /// Reason of `Ready`, when its `observedGeneration` is the CR's generation.
    ready: Option<String>,
    deleting: bool,
    content: Content,
}

fn view<K: ServerResource>(cr: &K, content: Content) -> CrView {
    let status = cr.resource_status();
    let current = status.and_then(|s| s.observed_generation) == cr.meta().generation;
    let ready = status
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.reason.clone())
        .filter(|_| current);
    CrView {
        kind: K::KIND,
        name: cr.meta().name.clone().unwrap_or_default(),
        uid: cr.meta().uid.clone().unwrap_or_default(),
        server: cr.server_name().unwrap_or_default(),
        ready,
        deleting: cr.meta().deletion_timestamp.is_some(),
        content,
    }
}

fn schemas(f: &Fixture) -> Api<Schema> {
    Api::namespaced(f.client.clone(), &f.ns.name)
}

fn counters(f: &Fixture) -> Api<Counter> {
    Api::namespaced(f.client.clone(), &f.ns.name)
}

fn tasks(f: &Fixture) -> Api<Task> {
    Api::namespaced(f.client.clone(), &f.ns.name)
}

fn templates(f: &Fixture) -> Api<Template> {
    Api::namespaced(f.client.clone(), &f.ns.name)
}

/// Every Schema, Template, Counter and Task CR of the namespace.
async fn list_crs(f: &Fixture) -> anyhow::Result<Vec<CrView>> {
    let lp = ListParams::default();
    let mut out = Vec::new();
    for cr in schemas(f).list(&lp).await? {
        out.push(view(&cr, Content::Text(normalise(&cr.spec.schema))));
    }
    for cr in templates(f).list(&lp).await? {
        out.push(view(&cr, cr_template_content(&cr.spec.template)));
    }
    for cr in counters(f).list(&lp).await? {
        out.push(view(&cr, Content::Counter(desired(&cr.spec))));
    }
    for cr in tasks(f).list(&lp).await? {
        out.push(view(&cr, Content::Text(normalise(&cr.spec.script))));
    }
    Ok(out)
}

/// Every (non-internal) schema, template, counter and task of the server.
async fn server_objects(f: &Fixture) -> anyhow::Result<BTreeMap<(ResourceKind, String), Content>> {
    let internal = InternalObjects::default();
    let mut out = BTreeMap::new();
    for schema in f.rest.list_schemas().await? {
        if internal.is_internal(&schema.name) {
            continue;
        }
        match f.rest.schema(&schema.name).await {
            Ok(text) => {
                out.insert(
                    (ResourceKind::Schema, schema.name),
                    Content::Text(normalise(&text)),
                );
            }
            Err(infinispan_rest::Error::NotFound { .. }) => {}
            Err(error) => return Err(error.into()),
        }
    }
    for template in f.rest.list_templates().await? {
        if internal.is_internal(&template.name) {
            continue;
        }
        let document = template
            .configuration
            .get(&template.name)
            .unwrap_or(&template.configuration);
        out.insert(
            (ResourceKind::Template, template.name.clone()),
            template_content(document),
        );
    }
    for name in f.rest.list_counters().await? {
        if internal.is_internal(&name) {
            continue;
        }
        match f.rest.counter_config(&name).await {
            Ok(config) => {
                out.insert((ResourceKind::Counter, name), Content::Counter(config));
            }
            Err(infinispan_rest::Error::NotFound { .. }) => {}
            Err(error) => return Err(error.into()),
        }
    }
    for (name, script) in f.rest.cache_entries(SCRIPT_CACHE).await? {
        if internal.is_internal(&name) || name.starts_with("@@") {
            continue;
        }
        out.insert(
            (ResourceKind::Task, name),
            Content::Text(normalise(&script)),
        );
    }
    Ok(out)
}

/// The whole state, checked: every CR of the four kinds Synced at its generation with its
/// content on the server; no server name claimed by two CRs; every server object claimed by a
/// CR; the `present` objects' CRs exist; the `absent` objects have neither a CR nor a server
/// object. The error lists every problem found.
async fn check_world(f: &Fixture, present: &[Obj], absent: &[Obj]) -> anyhow::Result<()> {
    let crs = list_crs(f).await?;
    let server = server_objects(f).await?;
    let mut problems = Vec::new();
    let mut claims: BTreeMap<(ResourceKind, String), Vec<&str>> = BTreeMap::new();
    for cr in &crs {
        claims
            .entry((cr.kind, cr.server.clone()))
            .or_default()
            .push(&cr.name);
    }
    for ((kind, name), names) in &claims {
        if names.len() > 1 {
            problems.push(format!(
                "{} {name} is claimed by {} CRs: {names:?}",
                kind.as_str(),
                names.len()
            ));
        }
    }
    for cr in &crs {
        let what = format!("{} CR {} (server {})", cr.kind.as_str(), cr.name, cr.server);
        if cr.deleting {
            problems.push(format!("{what} is being deleted"));
            continue;
        }
        if cr.ready.as_deref() != Some("Synced") {
            problems.push(format!(
                "{what}: Ready reason at its generation {:?}, not Synced",
                cr.ready
            ));
        }
        match server.get(&(cr.kind, cr.server.clone())) {
            None => problems.push(format!("{what}: no such object on the server")),
            Some(content) if !content.matches(&cr.content) => problems.push(format!(
                "{what}: the server has {content:?}, the CR says {:?}",
                cr.content
            )),
            Some(_) => {}
        }
    }
    for (kind, name) in server.keys() {
        if !claims.contains_key(&(*kind, name.clone())) {
            problems.push(format!(
                "{} {name} is on the server without a CR",
                kind.as_str()
            ));
        }
    }
    for obj in present {
        match crs
            .iter()
            .find(|cr| cr.kind == obj.kind && cr.name == obj.cr)
        {
            None => problems.push(format!("{obj}: the CR is gone")),
            Some(cr) if cr.server != obj.server => {
                problems.push(format!("{obj}: the CR stands for {}", cr.server))
            }
            Some(_) => {}
        }
    }
    for obj in absent {
        if crs
            .iter()
            .any(|cr| cr.kind == obj.kind && cr.name == obj.cr)
        {
            problems.push(format!("{obj}: the CR is still there"));
        }
        if server.contains_key(&obj.key()) {
            problems.push(format!(
                "{obj}: on the server (not deleted, or resurrected)"
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        bail!("{}", problems.join("\n"))
    }
}

/// Waits (up to `timeout`) until [`check_world`] holds, then checks that it still holds
/// [`SETTLE`] later.
async fn converge(
    f: &Fixture,
    what: &str,
    present: &[Obj],
    absent: &[Obj],
    timeout: Duration,
) -> anyhow::Result<()> {
    eventually(what, timeout, || async move {
        check_world(f, present, absent).await.map(Some)
    })
    .await
    .map_err(|e| f.operator.with_log(e))?;
    tokio::time::sleep(SETTLE).await;
    check_world(f, present, absent)
        .await
        .with_context(|| format!("{what}: reached, but no longer {SETTLE:?} later"))
        .map_err(|e| f.operator.with_log(e))
}

/// UIDs of the CRs of `objs`, by CR name.
async fn uids(f: &Fixture, objs: &[Obj]) -> anyhow::Result<BTreeMap<String, String>> {
    let crs = list_crs(f).await?;
    objs.iter()
        .map(|obj| {
            let cr = crs
                .iter()
                .find(|cr| cr.kind == obj.kind && cr.name == obj.cr)
                .with_context(|| format!("{obj}: no CR"))?;
            Ok((obj.cr.clone(), cr.uid.clone()))
        })
        .collect()
}

fn proto() -> String {
    format!(
        "message {} {{ optional string a = 1; optional int32 b = 2; }}",
        protobuf_message("R")
    )
}

fn script(tag: &str) -> String {
    format!("// mode=local,language=javascript\nvar tag = \"{tag}\";\ntag")
}

/// A local-cache template document with a lifespan of its own (so that no two templates of a
/// test are alike: a template standing for another's configuration is seen).
fn template_document() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(60_000);
    let lifespan = NEXT.fetch_add(1_000, std::sync::atomic::Ordering::Relaxed);
    json!({ "local-cache": { "expiration": { "lifespan": lifespan } } }).to_string()
}

fn storage_name(storage: CounterStorage) -> &'static str {
    match storage {
        CounterStorage::Volatile => "Volatile",
        CounterStorage::Persistent => "Persistent",
    }
}

fn metadata(name: &str) -> serde_json::Value {
    json!({ "name": name, "labels": { CLUSTER_LABEL: CLUSTER } })
}

/// Applies a Schema CR named `name` (server name `<name>.proto`).
async fn apply_schema(f: &Fixture, name: &str) -> anyhow::Result<Obj> {
    let cr: Schema = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v2alpha1",
        "kind": "Schema",
        "metadata": metadata(name),
        "spec": { "schema": proto() }
    }))?;
    schemas(f).create(&PostParams::default(), &cr).await?;
    Ok(Obj {
        kind: ResourceKind::Schema,
        cr: name.to_string(),
        server: format!("{name}.proto"),
    })
}

/// Applies a Template CR named `name`.
async fn apply_template(f: &Fixture, name: &str) -> anyhow::Result<Obj> {
    let cr: Template = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v2alpha1",
        "kind": "Template",
        "metadata": metadata(name),
        "spec": { "template": template_document() }
    }))?;
    templates(f).create(&PostParams::default(), &cr).await?;
    Ok(Obj {
        kind: ResourceKind::Template,
        cr: name.to_string(),
        server: name.to_string(),
    })
}

/// Applies a strong Counter CR named `name`.
async fn apply_counter(
    f: &Fixture,
    name: &str,
    storage: CounterStorage,
    initial: i64,
) -> anyhow::Result<Obj> {
    let cr: Counter = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v2alpha1",
        "kind": "Counter",
        "metadata": metadata(name),
        "spec": { "storage": storage_name(storage), "initialValue": initial }
    }))?;
    counters(f).create(&PostParams::default(), &cr).await?;
    Ok(Obj {
        kind: ResourceKind::Counter,
        cr: name.to_string(),
        server: name.to_string(),
    })
}

/// Applies a Task CR named `name`.
async fn apply_task(f: &Fixture, name: &str) -> anyhow::Result<Obj> {
    let cr: Task = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v2alpha1",
        "kind": "Task",
        "metadata": metadata(name),
        "spec": { "script": script(name) }
    }))?;
    tasks(f).create(&PostParams::default(), &cr).await?;
    Ok(Obj {
        kind: ResourceKind::Task,
        cr: name.to_string(),
        server: name.to_string(),
    })
}

/// A Schema, a Template, a Counter (with `storage`) and a Task CR, applied one right after the
/// other.
async fn apply_each(
    f: &Fixture,
    prefix: &str,
    storage: CounterStorage,
) -> anyhow::Result<Vec<Obj>> {
    Ok(vec![
        apply_schema(f, &unique(&format!("{prefix}-s"))).await?,
        apply_template(f, &unique(&format!("{prefix}-tpl"))).await?,
        apply_counter(f, &unique(&format!("{prefix}-c")), storage, 3).await?,
        apply_task(f, &unique(&format!("{prefix}-t"))).await?,
    ])
}

fn mirror(kind: ResourceKind, server: String) -> Obj {
    Obj {
        kind,
        cr: common_crds::naming::mirror_name(CLUSTER, &server),
        server,
    }
}

/// Creates a strong counter on the server, as another client would; its CR is a mirror.
async fn server_counter(f: &Fixture, prefix: &str, storage: CounterStorage) -> anyhow::Result<Obj> {
    let name = unique(prefix);
    let config = CounterConfig::Strong {
        initial_value: 7,
        storage,
        lower_bound: None,
        upper_bound: None,
        lifespan: None,
    };
    f.rest.create_counter(&name, &config).await?;
    Ok(mirror(ResourceKind::Counter, name))
}

/// A schema, a template, a counter (with `storage`) and a task created on the server over REST
/// (the template with `@@template@create` without flags: persistent).
async fn server_each(
    f: &Fixture,
    prefix: &str,
    storage: CounterStorage,
) -> anyhow::Result<Vec<Obj>> {
    let schema = format!("{}.proto", unique(&format!("{prefix}-s")));
    f.rest.create_schema(&schema, &proto()).await?;
    let template = unique(&format!("{prefix}-tpl"));
    f.rest
        .create_template(&template, &ConfigDocument::json(template_document()))
        .await?;
    let counter = server_counter(f, &format!("{prefix}-c"), storage).await?;
    let task = unique(&format!("{prefix}-t"));
    f.rest.put_task(&task, &script(&task)).await?;
    Ok(vec![
        mirror(ResourceKind::Schema, schema),
        mirror(ResourceKind::Template, template),
        counter,
        mirror(ResourceKind::Task, task),
    ])
}

/// Removes the objects on the server, as another client would.
async fn delete_on_server(f: &Fixture, objs: &[Obj]) -> anyhow::Result<()> {
    for obj in objs {
        match obj.kind {
            ResourceKind::Schema => f.rest.delete_schema(&obj.server).await?,
            ResourceKind::Template => f.rest.remove_template(&obj.server).await?,
            ResourceKind::Counter => f.rest.delete_counter(&obj.server).await?,
            ResourceKind::Task => f.rest.delete_task(&obj.server).await?,
            other => bail!("no {other:?} in this suite"),
        }
    }
    Ok(())
}

async fn delete_crs(f: &Fixture, objs: &[Obj]) -> anyhow::Result<()> {
    let dp = DeleteParams::default();
    for obj in objs {
        match obj.kind {
            ResourceKind::Schema => drop(schemas(f).delete(&obj.cr, &dp).await?),
            ResourceKind::Template => drop(templates(f).delete(&obj.cr, &dp).await?),
            ResourceKind::Counter => drop(counters(f).delete(&obj.cr, &dp).await?),
            ResourceKind::Task => drop(tasks(f).delete(&obj.cr, &dp).await?),
            other => bail!("no {other:?} in this suite"),
        }
    }
    Ok(())
}

/// Whether the operator has written to any CR of `objs` yet (a finalizer or a status).
async fn written(f: &Fixture, objs: &[Obj]) -> anyhow::Result<Option<String>> {
    fn touched<K: ServerResource>(cr: Option<K>) -> Option<String> {
        let cr = cr?;
        if !cr
            .meta()
            .finalizers
            .as_deref()
            .unwrap_or_default()
            .is_empty()
        {
            Some(format!(
                "finalizer on {} {}",
                K::KIND.as_str(),
                cr.name_any()
            ))
        } else if cr.resource_status().is_some() {
            Some(format!("status of {} {}", K::KIND.as_str(), cr.name_any()))
        } else {
            None
        }
    }
    for obj in objs {
        let seen = match obj.kind {
            ResourceKind::Schema => touched(schemas(f).get_opt(&obj.cr).await?),
            ResourceKind::Template => touched(templates(f).get_opt(&obj.cr).await?),
            ResourceKind::Counter => touched(counters(f).get_opt(&obj.cr).await?),
            ResourceKind::Task => touched(tasks(f).get_opt(&obj.cr).await?),
            other => bail!("no {other:?} in this suite"),
        };
        if seen.is_some() {
            return Ok(seen);
        }
    }
    Ok(None)
}

/// Splits `removed` (objects deleted on the server before a restart that kept its state) into
/// those still gone and those the server itself brought back, looked at before the operator
/// runs again. Infinispan 16.0.7 brings back a PERSISTENT counter deleted before a restart
/// (checked by hand: `DELETE /rest/v2/counters/c` -> 204, gone from the list; after a
/// graceful stop and start it is listed again): such an object is on the server again, the
/// operator cannot know it was ever removed, so its CR must stay, Synced.
async fn brought_back(f: &Fixture, removed: Vec<Obj>) -> anyhow::Result<(Vec<Obj>, Vec<Obj>)> {
    let server = server_objects(f).await?;
    let (back, gone): (Vec<Obj>, Vec<Obj>) = removed
        .into_iter()
        .partition(|obj| server.contains_key(&obj.key()));
    for obj in &back {
        println!(
            "the server brought back {obj}, deleted before its restart (Infinispan server \
             behaviour): expected to stay"
        );
    }
    Ok((gone, back))
}

/// Node operations block (they run the testbed script): off the runtime's thread.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(work).await?
}

/// Runs `body` on a fixture whose operator and test both talk to a fresh private node
/// (`offset`), one test at a time (each starts a JVM); always tears down and stops the node.
async fn on_private_node<F>(prefix: &str, offset: u16, body: F) -> anyhow::Result<()>
where
    F: AsyncFnOnce(&mut Fixture, &Node) -> anyhow::Result<()>,
{
    let _serial = SERIAL.lock().await;
    let node = Node::new(&format!("kinds-{prefix}"), offset);
    let guard = {
        let node = node.clone();
        blocking(move || {
            node.stop_and_wipe()?;
            node.start()?;
            Ok(NodeGuard(node))
        })
        .await?
    };
    let options = Options {
        infinispan_url: Some(node.url()),
        args: vec![COUNTER_LIST.to_string()],
        ..Options::default()
    };
    let mut fixture = Fixture::with_options(prefix, options).await?;
    let started = std::time::Instant::now();
    let result = body(&mut fixture, &node).await;
    println!("{prefix}: test body took {:?}", started.elapsed());
    let result = result.map_err(|e| fixture.operator.with_log(e));
    let teardown = fixture.teardown().await;
    blocking(move || {
        drop(guard);
        Ok(())
    })
    .await?;
    result?;
    teardown
}

/// R1: killed with SIGKILL right after CRs were applied (once before it could write, once at
/// its first write), with objects created on the server and synced CRs deleted while it was
/// down: after each restart everything converges, no CR is duplicated, nothing deleted comes
/// back.
#[tokio::test]
async fn r1_kill_9_around_writes_converges() -> anyhow::Result<()> {
    on_private_node("kr-r1", 2040, async |f, _node| {
        let doomed = apply_each(f, "r1-doomed", CounterStorage::Persistent).await?;
        converge(f, "the doomed CRs synced", &doomed, &[], SLOW).await?;

        // Round 1: killed right after the apply.
        let early = apply_each(f, "r1-early", CounterStorage::Persistent).await?;
        f.kill_operator().await?;
        delete_crs(f, &doomed).await?;
        let created_1 = server_each(f, "r1-srv1", CounterStorage::Persistent).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        ensure!(
            written(f, &created_1).await?.is_none(),
            "mirrors appeared with the operator down"
        );
        f.restart_operator(&[COUNTER_LIST]).await?;
        let present: Vec<Obj> = [early, created_1].concat();
        converge(f, "round 1 converged", &present, &doomed, CONVERGE).await?;

        // Round 2: killed as soon as it wrote anything for the new CRs.
        let late = apply_each(f, "r1-late", CounterStorage::Persistent).await?;
        let deadline = tokio::time::Instant::now() + SLOW;
        let seen = loop {
            if let Some(seen) = written(f, &late).await? {
                break seen;
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(f.operator.with_log(anyhow::anyhow!(
                    "the operator wrote nothing for the new CRs within {SLOW:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        f.kill_operator().await?;
        println!("round 2: killed after seeing the {seen}");
        let created_2 = server_each(f, "r1-srv2", CounterStorage::Persistent).await?;
        f.restart_operator(&[COUNTER_LIST]).await?;
        let present: Vec<Obj> = [present, late, created_2].concat();
        converge(f, "round 2 converged", &present, &doomed, CONVERGE).await?;
        Ok(())
    })
    .await
}

/// R2, the server running on: a schema, a template, a counter (persistent and volatile) and a
/// task removed on the server while the operator was down, for user CRs and mirrors: the CRs
/// go, nothing is recreated, the other CRs stay Synced.
#[tokio::test]
async fn r2_removed_on_the_server_while_the_operator_was_down() -> anyhow::Result<()> {
    on_private_node("kr-r2", 2041, async |f, _node| {
        let kept = apply_each(f, "r2-kept", CounterStorage::Persistent).await?;
        let mut removed = apply_each(f, "r2-user", CounterStorage::Persistent).await?;
        removed.push(apply_counter(f, &unique("r2-user-vol"), CounterStorage::Volatile, 1).await?);
        removed.extend(server_each(f, "r2-srv", CounterStorage::Persistent).await?);
        let all: Vec<Obj> = [kept.clone(), removed.clone()].concat();
        converge(f, "everything synced", &all, &[], SLOW).await?;
        let before = uids(f, &kept).await?;

        f.kill_operator().await?;
        delete_on_server(f, &removed).await?;
        f.restart_operator(&[COUNTER_LIST]).await?;

        converge(
            f,
            "the removed objects' CRs gone",
            &kept,
            &removed,
            CONVERGE,
        )
        .await?;
        ensure!(uids(f, &kept).await? == before, "a kept CR was replaced");
        Ok(())
    })
    .await
}

/// R2 with a server restart that keeps the state: the server loses the volatile counters
/// (a user CR's and a mirror's); they are recreated from their CRs, never taken as deleted.
/// The persistent objects stay (templates created over REST among them, user CRs' and
/// mirrors'); persistent ones removed before the restart are removed (a user Template CR's
/// template among them: the operator creates templates persistent).
#[tokio::test]
async fn r2_server_restart_recreates_volatile_counters_keeps_persistent_objects()
-> anyhow::Result<()> {
    on_private_node("kr-r2r", 2042, async |f, node| {
        let kept: Vec<Obj> = [
            apply_each(f, "r2r-user", CounterStorage::Persistent).await?,
            server_each(f, "r2r-srv", CounterStorage::Persistent).await?,
        ]
        .concat();
        let volatile = vec![
            apply_counter(f, &unique("r2r-vol"), CounterStorage::Volatile, 5).await?,
            server_counter(f, "r2r-srv-vol", CounterStorage::Volatile).await?,
        ];
        let removed = apply_each(f, "r2r-removed", CounterStorage::Persistent).await?;
        let staying: Vec<Obj> = [kept.clone(), volatile.clone()].concat();
        let all: Vec<Obj> = [staying.clone(), removed.clone()].concat();
        converge(f, "everything synced", &all, &[], SLOW).await?;
        let before = uids(f, &all).await?;

        f.kill_operator().await?;
        delete_on_server(f, &removed).await?;
        {
            let node = node.clone();
            blocking(move || {
                node.stop()?;
                node.start()
            })
            .await?;
        }
        let (removed, back) = brought_back(f, removed).await?;
        let staying: Vec<Obj> = [staying, back].concat();
        let server = server_objects(f).await?;
        for obj in &volatile {
            ensure!(
                !server.contains_key(&obj.key()),
                "the testbed kept the volatile {obj} through a restart"
            );
        }
        for obj in &kept {
            ensure!(
                server.contains_key(&obj.key()),
                "the server lost the persistent {obj} in a restart that kept its state"
            );
        }
        f.restart_operator(&[COUNTER_LIST]).await?;

        converge(
            f,
            "volatile counters recreated, removed objects' CRs gone",
            &staying,
            &removed,
            CONVERGE,
        )
        .await?;
        let after = uids(f, &staying).await?;
        ensure!(
            after.iter().all(|(cr, uid)| before.get(cr) == Some(uid)),
            "a CR was deleted and recreated: {before:?} -> {after:?}"
        );
        Ok(())
    })
    .await
}

/// R2 for mirrors across a server restart that keeps the state: a schema, a template, a task
/// and a persistent counter created by another client, then removed on the server while the
/// operator was down, before the restart. Schemas and tasks have no volatile form (the server
/// keeps `___protobuf_metadata` and `___script_cache` through restarts, checked here), so their
/// absence after the restart proves a removal just as a persistent counter's does: the mirror
/// CRs go and nothing is recreated. The server does not bring the removed template back either
/// (checked here), but a template can be created volatile by another client and the server
/// does not tell: the mirrored template's absence proves nothing, its CR stays (same UID) and
/// recreates it.
#[tokio::test]
async fn r2_mirrors_removed_before_a_server_restart_stay_removed() -> anyhow::Result<()> {
    on_private_node("kr-r2m", 2043, async |f, node| {
        let kept = server_each(f, "r2m-kept", CounterStorage::Persistent).await?;
        let removed = server_each(f, "r2m-removed", CounterStorage::Persistent).await?;
        let all: Vec<Obj> = [kept.clone(), removed.clone()].concat();
        converge(f, "everything mirrored", &all, &[], SLOW).await?;
        let before = uids(f, &all).await?;

        f.kill_operator().await?;
        delete_on_server(f, &removed).await?;
        {
            let node = node.clone();
            blocking(move || {
                node.stop()?;
                node.start()
            })
            .await?;
        }
        let (removed, back) = brought_back(f, removed).await?;
        ensure!(
            [
                ResourceKind::Schema,
                ResourceKind::Template,
                ResourceKind::Task
            ]
            .iter()
            .all(|kind| removed.iter().any(|obj| obj.kind == *kind)),
            "the server brought back a deleted schema, template or task: {back:?}"
        );
        // A mirrored template's removal cannot be told from a volatile template's loss.
        let (recreated, removed): (Vec<Obj>, Vec<Obj>) = removed
            .into_iter()
            .partition(|obj| obj.kind == ResourceKind::Template);
        let kept: Vec<Obj> = [kept, back].concat();
        let server = server_objects(f).await?;
        for obj in &kept {
            ensure!(
                server.contains_key(&obj.key()),
                "the server lost {obj} in a restart that kept its state"
            );
        }
        f.restart_operator(&[COUNTER_LIST]).await?;

        let staying: Vec<Obj> = [kept, recreated].concat();
        converge(
            f,
            "the removed mirrors gone, the mirrored template recreated",
            &staying,
            &removed,
            CONVERGE,
        )
        .await?;
        let after = uids(f, &staying).await?;
        ensure!(
            after.iter().all(|(cr, uid)| before.get(cr) == Some(uid)),
            "a CR was deleted and recreated: {before:?} -> {after:?}"
        );
        Ok(())
    })
    .await
}

/// R3: the server wiped and started again under the running operator: every CR (user CRs and
/// mirrors, persistent and volatile counters) recreates its object; no CR is deleted.
#[tokio::test]
async fn r3_wiped_server_is_refilled_from_the_crs() -> anyhow::Result<()> {
    on_private_node("kr-r3", 2044, async |f, node| {
        let objs: Vec<Obj> = [
            apply_each(f, "r3-user", CounterStorage::Persistent).await?,
            vec![apply_counter(f, &unique("r3-user-vol"), CounterStorage::Volatile, 2).await?],
            server_each(f, "r3-srv", CounterStorage::Persistent).await?,
            vec![server_counter(f, "r3-srv-vol", CounterStorage::Volatile).await?],
        ]
        .concat();
        converge(f, "everything synced", &objs, &[], SLOW).await?;
        let before = uids(f, &objs).await?;

        {
            let node = node.clone();
            blocking(move || {
                node.stop_and_wipe()?;
                node.start()
            })
            .await?;
        }
        converge(f, "every object recreated", &objs, &[], CONVERGE).await?;
        ensure!(
            uids(f, &objs).await? == before,
            "a CR was deleted (and recreated) on the wiped server"
        );
        Ok(())
    })
    .await
}
