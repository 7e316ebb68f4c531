//! End-to-end: the escape hatches of the sync contract for Schema, Counter, Task and Template
//! CRs (design E1, E2, E4; Cache CRs have theirs in `cache_sync.rs`). One test per scenario,
//! each with one CR of every kind, against the testbed's node0 (the operator lists counters
//! every second).
//!
//! - E1, unmanaged (`infinispan.org/managed: "false"`): a CR unmanaged from the start is never
//!   created on the server (`Ready=False, Unmanaged`, no finalizer), still claims its server
//!   name (no mirror CR appears for an object another client then creates under that name,
//!   whose content stays the other client's) and its deletion leaves the server object. A
//!   managed, Synced CR then marked unmanaged and deleted leaves its server object, without any
//!   server write. The documented escape for a deletion that cannot finish: the operator reaches
//!   node0 through a fault proxy (`e2e::proxy`) that refuses every connection, so a deleted CR
//!   waits (`ServerUnavailable`, finalizer held); marking it unmanaged releases the finalizer
//!   while the server is still unreachable, and the server object (seen directly by the test)
//!   is still there once the operator is back (it is then mirrored, S1).
//! - E2, pause (`infinispan.org/pause-reconciliation: "true"`): with every CR paused, their specs
//!   change (Counter and Template with `updates.strategy: recreate`) and, for Schema and Task,
//!   the server objects change too; for 6 s nothing is written to the server (polled, and the
//!   operator's server-write counter) nor to the CRs beyond at most one status write in which
//!   the `ReconciliationPaused` condition follows the new generation (every condition carries
//!   `observedGeneration`; nothing else of the CR may change), and `ReconciliationPaused=True`. Unpaused, the outcome
//!   table decides (Bidirectional, conflict winner Kubernetes): Schema and Task changed on both
//!   sides -> C1, the CR's text is written to the server (`ConflictResolved`); Counter and
//!   Template changed only in the CR -> K2 by recreation (`RecreatedOnServer`, the counter's
//!   value reset to the new initial value).
//! - E4, internal objects: once the operator has seen the server's state (mirrors of the test's
//!   own objects are Synced, and a schema removal made the server fire its removal events for
//!   the `.errors` entries of the built-in schemas), no CR of the namespace stands for an
//!   internal object (`___*` caches, built-in schema names, `@@` admin tasks, `org.infinispan.*`
//!   templates); user CRs naming internal objects (Templates `org.infinispan.DIST_SYNC`, absent
//!   on the server, and `org.infinispan.RESP_DIST`, a built-in; a Task `@@cache@names`) get
//!   `Ready=False, Unsupported`, and neither they nor their deletion change anything on the
//!   server.
//!
//! Infinispan 16.0.7 lists no built-in schema over REST (`GET /rest/v2/schemas` and the keys of
//! `___protobuf_metadata` hold only user schemas; built-ins such as `common-java-types.proto`
//! live in the server's serialization context, and a user may even store a schema under such a
//! name: checked on a private node). So for Schema and Counter there is no server object a user
//! CR could name as internal; the E4 refusal is tested for Template and Task.

use std::time::Duration;

use anyhow::{Context, ensure};
use common_crds::ResourceKind;
use common_crds::labels::{
    CLUSTER_LABEL, MANAGED_ANNOTATION, MANAGED_FALSE, PAUSE_RECONCILIATION_ANNOTATION,
    PAUSE_RECONCILIATION_TRUE, RESOURCES_FINALIZER,
};
use e2e::eventually;
use e2e::operator::*;
use e2e::proxy::FaultProxy;
use infinispan_rest::{ConfigDocument, CounterConfig, CounterStorage, InternalObjects};
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

/// The operator lists counters every second here (the default is 10 s).
const COUNTER_LIST: &str = "--counter-list-interval=1s";
/// First line of every script of these tests.
const HEADER: &str = "// mode=local,language=javascript";
/// How long "nothing is written" is watched.
const QUIET: Duration = Duration::from_secs(6);
/// Bound on the operator's reconnect once the proxy lets connections through again (its
/// backoff is capped at 30 s; a pooled connection that died meanwhile adds a header timeout).
const RECONNECT: Duration = Duration::from_secs(90);
/// Schema names the server (16.0.7) knows as built-in: seen as `<name>.errors` keys of
/// `___protobuf_metadata` on a private node (`query.proto`, `latlng.proto`,
/// `org/infinispan/protostream/message-wrapping.proto`), plus ProtoStream's common type files.
const BUILTIN_SCHEMAS: &[&str] = &[
    "common-java-types.proto",
    "common-java-container-types.proto",
    "latlng.proto",
    "query.proto",
    "message-wrapping.proto",
];

/// An `org.infinispan.*` template name the server (16.0.7) does not have.
const ABSENT_TEMPLATE: &str = "org.infinispan.DIST_SYNC";

// The config event stream's connection counters (the operator's metrics).
const CONNECTIONS: &str =
    "infinispan_resources_operator_stream_connections_total{stream=\"config\"}";
const DISCONNECTS: &str =
    "infinispan_resources_operator_stream_disconnects_total{stream=\"config\"}";

fn counter_options() -> Options {
    Options {
        args: vec![COUNTER_LIST.to_string()],
        ..Options::default()
    }
}

// ---- The four kinds ------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Schema,
    Counter,
    Task,
    Template,
}

const KINDS: [Kind; 4] = [Kind::Schema, Kind::Counter, Kind::Task, Kind::Template];

impl Kind {
    fn resource_kind(self) -> ResourceKind {
        match self {
            Self::Schema => ResourceKind::Schema,
            Self::Counter => ResourceKind::Counter,
            Self::Task => ResourceKind::Task,
            Self::Template => ResourceKind::Template,
        }
    }

    fn api_resource(self) -> ApiResource {
        match self {
            Self::Schema => ApiResource::erase::<common_crds::Schema>(&()),
            Self::Counter => ApiResource::erase::<common_crds::Counter>(&()),
            Self::Task => ApiResource::erase::<common_crds::Task>(&()),
            Self::Template => ApiResource::erase::<common_crds::Template>(&()),
        }
    }

    fn short(self) -> &'static str {
        match self {
            Self::Schema => "sch",
            Self::Counter => "cnt",
            Self::Task => "tsk",
            Self::Template => "tpl",
        }
    }

    /// Counters and templates cannot change in place: their CRs ask for recreation.
    fn immutable(self) -> bool {
        matches!(self, Self::Counter | Self::Template)
    }
}

/// Versions of an object's content: as first applied, as the CR is edited later, and as
/// another client writes it over REST.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V1,
    V2,
    Rest,
}

/// One object of a test: a CR and the server object it stands for.
#[derive(Clone, Debug)]
struct Obj {
    kind: Kind,
    /// metadata.name of the CR (of the mirror CR for an object created on the server).
    cr: String,
    /// The server name.
    server: String,
    /// Its Protobuf message name (Schema; message names are global on the server).
    message: String,
}

impl std::fmt::Display for Obj {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            out,
            "{} {} (server {})",
            self.kind.resource_kind(),
            self.cr,
            self.server
        )
    }
}

impl Obj {
    /// An object named after its CR (schemas: `<cr>.proto`, as the server names them).
    fn new(kind: Kind, prefix: &str) -> Self {
        let cr = unique(&format!("{prefix}-{}", kind.short()));
        let server = common_crds::naming::server_name(kind.resource_kind(), None, &cr);
        Self::named(kind, cr, server)
    }

    /// A CR with `spec.name: server`.
    fn named(kind: Kind, cr: String, server: String) -> Self {
        let message = cr
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| match c.to_digit(10) {
                Some(d) => char::from(b'G' + d as u8),
                None => c.to_ascii_uppercase(),
            })
            .collect();
        Self {
            kind,
            cr,
            server,
            message,
        }
    }

    /// The mirror CR the operator makes for this server object.
    fn mirror(&self) -> Self {
        Self {
            cr: common_crds::naming::mirror_name(CLUSTER, &self.server),
            ..self.clone()
        }
    }

    fn proto(&self, version: Version) -> String {
        let m = &self.message;
        match version {
            Version::V1 => format!("message {m} {{ optional string a = 1; }}"),
            Version::V2 => {
                format!("message {m} {{ optional string a = 1; optional int32 b = 2; }}")
            }
            // A compatible change (the server refuses a replacement that drops a field without
            // reserving it, so the CR's later version could not win otherwise).
            Version::Rest => {
                format!("/* edited over REST */\nmessage {m} {{ optional string a = 1; }}")
            }
        }
    }

    fn script(version: Version) -> String {
        let expression = match version {
            Version::V1 => "6 * 7",
            Version::V2 => "6 * 7 + 1",
            Version::Rest => "6 * 7 + 2",
        };
        format!("{HEADER}\n{expression}\n")
    }

    /// What the script of `version` returns.
    fn script_result(version: Version) -> &'static str {
        match version {
            Version::V1 => "42",
            Version::V2 => "43",
            Version::Rest => "44",
        }
    }

    fn counter(version: Version) -> CounterConfig {
        let (initial_value, upper_bound) = match version {
            Version::V1 => (1, 100),
            Version::V2 => (5, 200),
            Version::Rest => (7, 300),
        };
        CounterConfig::Strong {
            initial_value,
            storage: CounterStorage::Volatile,
            lower_bound: Some(0),
            upper_bound: Some(upper_bound),
            lifespan: None,
        }
    }

    fn template(version: Version) -> &'static str {
        match version {
            Version::V1 => r#"{"distributed-cache":{"mode":"SYNC"}}"#,
            Version::V2 => r#"{"distributed-cache":{"mode":"SYNC","statistics":true}}"#,
            Version::Rest => r#"{"local-cache":{"statistics":true}}"#,
        }
    }

    /// The CR's spec for `version`.
    fn spec(&self, version: Version) -> Value {
        let mut spec = match self.kind {
            Kind::Schema => json!({ "schema": self.proto(version) }),
            Kind::Task => json!({ "script": Self::script(version) }),
            Kind::Counter => match Self::counter(version) {
                CounterConfig::Strong {
                    initial_value,
                    lower_bound,
                    upper_bound,
                    ..
                } => json!({
                    "type": "strong",
                    "initialValue": initial_value,
                    "lowerBound": lower_bound,
                    "upperBound": upper_bound,
                }),
                CounterConfig::Weak { .. } => json!({}),
            },
            Kind::Template => json!({ "template": Self::template(version) }),
        };
        if self.kind.immutable() {
            spec["updates"] = json!({ "strategy": "recreate" });
        }
        let default = common_crds::naming::server_name(self.kind.resource_kind(), None, &self.cr);
        if self.server != default {
            spec["name"] = json!(self.server);
        }
        spec
    }

    /// Whether a CR's spec holds the content of `version`.
    fn spec_holds(&self, cr: &DynamicObject, version: Version) -> bool {
        let spec = &cr.data["spec"];
        match self.kind {
            Kind::Schema => spec["schema"] == json!(self.proto(version)),
            Kind::Task => spec["script"] == json!(Self::script(version)),
            Kind::Template => spec["template"] == json!(Self::template(version)),
            Kind::Counter => {
                let want = self.spec(version);
                ["type", "initialValue", "lowerBound", "upperBound"]
                    .iter()
                    .all(|field| spec[field] == want[field])
            }
        }
    }

    /// Whether the server state ([`server_state`]) holds the content of `version` (for a
    /// counter: its definition, whatever its value).
    fn server_holds(&self, state: Option<&Value>, version: Version) -> bool {
        let Some(state) = state else {
            return false;
        };
        match self.kind {
            Kind::Schema => *state == json!(self.proto(version)),
            Kind::Task => *state == json!(Self::script(version)),
            Kind::Counter => state["config"] == Self::counter(version).to_json(),
            Kind::Template => {
                let truthy =
                    |v: Option<&Value>| v == Some(&json!(true)) || v == Some(&json!("true"));
                match version {
                    Version::V1 => {
                        state.pointer("/distributed-cache-configuration/mode")
                            == Some(&json!("SYNC"))
                            && !truthy(state.pointer("/distributed-cache-configuration/statistics"))
                    }
                    Version::V2 => {
                        state.pointer("/distributed-cache-configuration/mode")
                            == Some(&json!("SYNC"))
                            && truthy(state.pointer("/distributed-cache-configuration/statistics"))
                    }
                    Version::Rest => state.pointer("/local-cache-configuration").is_some(),
                }
            }
        }
    }
}

// ---- The server side -----------------------------------------------------------------------

/// The server's object, as JSON: the text of a schema or a script, a template's definition, a
/// counter's definition and value. `None` when the server has no such object.
async fn server_state(f: &Fixture, obj: &Obj) -> anyhow::Result<Option<Value>> {
    let name = obj.server.as_str();
    let found = match obj.kind {
        Kind::Schema => f.rest.schema(name).await.map(|text| json!(text)),
        Kind::Task => f.rest.task_script(name).await.map(|text| json!(text)),
        Kind::Counter => match f.rest.counter_config(name).await {
            Ok(config) => {
                let value = f.rest.counter_value(name).await?;
                Ok(json!({ "config": config.to_json(), "value": value }))
            }
            Err(error) => Err(error),
        },
        Kind::Template => return Ok(f.rest.template_definition(name).await?),
    };
    match found {
        Ok(state) => Ok(Some(state)),
        Err(infinispan_rest::Error::NotFound { .. }) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// Fails unless the server holds `version` of the object.
async fn expect_server(f: &Fixture, obj: &Obj, version: Version) -> anyhow::Result<()> {
    let state = server_state(f, obj).await?;
    ensure!(
        obj.server_holds(state.as_ref(), version),
        "{obj}: the server does not hold {version:?}: {state:?}"
    );
    Ok(())
}

/// Waits until the server holds `version` of the object.
async fn wait_server(f: &Fixture, obj: &Obj, version: Version) -> anyhow::Result<Value> {
    eventually(
        &format!("{obj}: the server holds {version:?}"),
        SLOW,
        || async move {
            let state = server_state(f, obj).await?;
            Ok(state.filter(|s| obj.server_holds(Some(s), version)))
        },
    )
    .await
}

/// Creates the object over REST, as another client would.
async fn create_on_server(f: &Fixture, obj: &Obj, version: Version) -> anyhow::Result<()> {
    let name = obj.server.as_str();
    match obj.kind {
        Kind::Schema => {
            f.rest.create_schema(name, &obj.proto(version)).await?;
        }
        Kind::Task => f.rest.put_task(name, &Obj::script(version)).await?,
        Kind::Counter => f.rest.create_counter(name, &Obj::counter(version)).await?,
        Kind::Template => {
            f.rest
                .create_template(name, &ConfigDocument::json(Obj::template(version)))
                .await?
        }
    }
    Ok(())
}

/// Replaces a schema's or a script's text over REST (the kinds that change in place).
async fn edit_on_server(f: &Fixture, obj: &Obj, version: Version) -> anyhow::Result<()> {
    match obj.kind {
        Kind::Schema => {
            f.rest.put_schema(&obj.server, &obj.proto(version)).await?;
        }
        Kind::Task => f.rest.put_task(&obj.server, &Obj::script(version)).await?,
        Kind::Counter | Kind::Template => {
            anyhow::bail!("{obj}: the server cannot change it in place")
        }
    }
    Ok(())
}

/// Removes the object from the server (cleanup: any path, errors ignored).
async fn delete_on_server(f: &Fixture, obj: &Obj) {
    let name = obj.server.as_str();
    let _ = match obj.kind {
        Kind::Schema => f.rest.delete_schema(name).await,
        Kind::Task => f.rest.delete_task(name).await,
        Kind::Counter => f.rest.delete_counter(name).await,
        Kind::Template => f.rest.remove_template(name).await,
    };
}

/// Sum of the samples of metric `name` (every label set) in the operator's `/metrics`.
async fn metric(f: &Fixture, name: &str) -> anyhow::Result<f64> {
    let (status, body) = f.operator.get("/metrics").await?;
    ensure!(status == 200, "/metrics answered {status}");
    Ok(body
        .lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

async fn wait_metric_above(
    f: &Fixture,
    name: &str,
    above: f64,
    timeout: Duration,
) -> anyhow::Result<()> {
    eventually(&format!("{name} > {above}"), timeout, || async move {
        Ok((metric(f, name).await? > above).then_some(()))
    })
    .await
}

// ---- The Kubernetes side -------------------------------------------------------------------

fn api(f: &Fixture, kind: Kind) -> Api<DynamicObject> {
    Api::namespaced_with(f.client.clone(), &f.ns.name, &kind.api_resource())
}

/// Creates the user CR of the object with `version` of its content.
async fn create_cr(
    f: &Fixture,
    obj: &Obj,
    version: Version,
    annotations: Value,
) -> anyhow::Result<DynamicObject> {
    let cr: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v2alpha1",
        "kind": obj.kind.resource_kind().as_str(),
        "metadata": {
            "name": obj.cr,
            "labels": { CLUSTER_LABEL: CLUSTER },
            "annotations": annotations,
        },
        "spec": obj.spec(version),
    }))?;
    api(f, obj.kind)
        .create(&PostParams::default(), &cr)
        .await
        .with_context(|| format!("creating {obj}"))
}

async fn patch_cr(f: &Fixture, obj: &Obj, patch: &Value) -> anyhow::Result<DynamicObject> {
    api(f, obj.kind)
        .patch(&obj.cr, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .with_context(|| format!("patching {obj} with {patch}"))
}

/// Sets (`Some`) or removes (`None`) an annotation.
async fn annotate(
    f: &Fixture,
    obj: &Obj,
    annotation: &str,
    value: Option<&str>,
) -> anyhow::Result<DynamicObject> {
    patch_cr(
        f,
        obj,
        &json!({ "metadata": { "annotations": { annotation: value } } }),
    )
    .await
}

fn condition<'a>(cr: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    cr.data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn has_condition(cr: &DynamicObject, type_: &str, status: &str, reason: &str) -> bool {
    condition(cr, type_).is_some_and(|c| c["status"] == status && c["reason"] == reason)
}

/// `Ready` has `reason`, for the CR's current generation.
fn ready_is(cr: &DynamicObject, reason: &str) -> bool {
    let observed = cr.data.pointer("/status/observedGeneration").cloned();
    condition(cr, "Ready").is_some_and(|c| c["reason"] == reason)
        && observed == cr.metadata.generation.map(Value::from)
}

/// Waits until the CR exists and `check` holds; returns it.
async fn wait_cr(
    f: &Fixture,
    obj: &Obj,
    what: &str,
    check: impl Fn(&DynamicObject) -> bool,
) -> anyhow::Result<DynamicObject> {
    let api = api(f, obj.kind);
    let (api, check) = (&api, &check);
    eventually(&format!("{obj}: {what}"), SLOW, || async move {
        Ok(api.get_opt(&obj.cr).await?.filter(|cr| check(cr)))
    })
    .await
}

async fn wait_ready(f: &Fixture, obj: &Obj, reason: &str) -> anyhow::Result<DynamicObject> {
    wait_cr(f, obj, &format!("Ready {reason}"), |cr| {
        ready_is(cr, reason)
    })
    .await
}

async fn wait_gone(f: &Fixture, obj: &Obj) -> anyhow::Result<()> {
    let api = api(f, obj.kind);
    let api = &api;
    eventually(&format!("{obj}: CR gone"), SLOW, || async move {
        Ok(api.get_opt(&obj.cr).await?.is_none().then_some(()))
    })
    .await
}

/// Server name a CR stands for (design N1).
fn server_name_of(kind: Kind, cr: &DynamicObject) -> String {
    common_crds::naming::server_name(
        kind.resource_kind(),
        cr.data.pointer("/spec/name").and_then(Value::as_str),
        &cr.name_any(),
    )
}

/// Names of the namespace's CRs that stand for the object's server name.
async fn crs_for(f: &Fixture, obj: &Obj) -> anyhow::Result<Vec<String>> {
    Ok(api(f, obj.kind)
        .list(&ListParams::default())
        .await?
        .into_iter()
        .filter(|cr| server_name_of(obj.kind, cr) == obj.server)
        .map(|cr| cr.name_any())
        .collect())
}

/// The CR as compared across a quiet period: without its resourceVersion and managed fields,
/// and without the generation the `ReconciliationPaused` condition reports (a paused CR's
/// condition may follow a new generation; nothing else may change).
fn comparable(cr: &DynamicObject) -> anyhow::Result<Value> {
    let mut value = serde_json::to_value(cr)?;
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("resourceVersion");
        metadata.remove("managedFields");
    }
    if let Some(conditions) = value
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for c in conditions {
            if c["type"] == "ReconciliationPaused"
                && let Some(c) = c.as_object_mut()
            {
                c.remove("observedGeneration");
            }
        }
    }
    Ok(value)
}

// ---- E1 ------------------------------------------------------------------------------------

/// E1 for every kind: unmanaged from the start (never created, still claims its name, deleted
/// without touching the server), managed then unmanaged (the server object stays, no server
/// write), and the escape from a deletion stuck on an unreachable server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e1_unmanaged_crs_of_every_kind() -> anyhow::Result<()> {
    let testbed = e2e::Testbed::get()?;
    // The operator reaches node0 through the proxy; the test talks to node0 directly.
    let proxy = FaultProxy::for_url(&testbed.infinispan_url).await?;
    let options = Options {
        infinispan_url: Some(proxy.url()),
        test_url: Some(testbed.infinispan_url.clone()),
        ..counter_options()
    };
    let proxy = &proxy;
    with_options_fixture("esc-e1", options, async |f| {
        let f = &*f;
        let unmanaged = KINDS.map(|k| Obj::new(k, "e1u"));
        let controls = KINDS.map(|k| Obj::new(k, "e1c"));
        let released = KINDS.map(|k| Obj::new(k, "e1m"));
        let stuck = KINDS.map(|k| Obj::new(k, "e1s"));
        let result = async {
            unmanaged_from_the_start(f, &unmanaged, &controls).await?;
            managed_then_unmanaged(f, &released).await?;
            stuck_deletion_escape(f, proxy, &stuck).await
        }
        .await;
        proxy.refuse(false);
        for obj in unmanaged
            .iter()
            .chain(&controls)
            .chain(&released)
            .chain(&stuck)
        {
            delete_on_server(f, obj).await;
        }
        result
    })
    .await
}

async fn unmanaged_from_the_start(
    f: &Fixture,
    unmanaged: &[Obj],
    controls: &[Obj],
) -> anyhow::Result<()> {
    let annotations = json!({ MANAGED_ANNOTATION: MANAGED_FALSE });
    for obj in unmanaged {
        create_cr(f, obj, Version::V1, annotations.clone()).await?;
    }
    for obj in unmanaged {
        let cr = wait_cr(f, obj, "Ready=False, Unmanaged", |cr| {
            has_condition(cr, "Ready", "False", "Unmanaged")
        })
        .await?;
        let message = condition(&cr, "Ready")
            .and_then(|c| c["message"].as_str())
            .unwrap_or_default();
        ensure!(
            message.contains(MANAGED_ANNOTATION),
            "{obj}: the condition does not say why: {message:?}"
        );
        ensure!(
            cr.finalizers().is_empty(),
            "{obj}: an unmanaged CR got finalizers {:?}",
            cr.finalizers()
        );
        let state = server_state(f, obj).await?;
        ensure!(
            state.is_none(),
            "{obj}: an unmanaged CR was created on the server: {state:?}"
        );
    }

    // Another client creates objects of those names, with other content; and control objects,
    // whose mirrors show when the operator has seen the server's changes.
    for obj in unmanaged {
        create_on_server(f, obj, Version::Rest).await?;
    }
    for obj in controls {
        create_on_server(f, obj, Version::V1).await?;
    }
    for obj in controls {
        wait_ready(f, &obj.mirror(), "Synced").await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for obj in unmanaged {
        let standing = crs_for(f, obj).await?;
        ensure!(
            standing == [obj.cr.clone()],
            "{obj}: the unmanaged CR does not hold its name alone: {standing:?}"
        );
        let cr = api(f, obj.kind).get(&obj.cr).await?;
        ensure!(
            cr.metadata.generation == Some(1) && obj.spec_holds(&cr, Version::V1),
            "{obj}: the unmanaged CR was rewritten: {:?}",
            cr.data["spec"]
        );
        expect_server(f, obj, Version::Rest).await?;
    }

    // Deleting an unmanaged CR leaves the server object.
    for obj in unmanaged {
        api(f, obj.kind)
            .delete(&obj.cr, &DeleteParams::default())
            .await?;
    }
    for obj in unmanaged {
        wait_gone(f, obj).await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for obj in unmanaged {
        expect_server(f, obj, Version::Rest).await?;
    }
    Ok(())
}

async fn managed_then_unmanaged(f: &Fixture, released: &[Obj]) -> anyhow::Result<()> {
    for obj in released {
        create_cr(f, obj, Version::V1, json!({})).await?;
    }
    for obj in released {
        let cr = wait_ready(f, obj, "Synced").await?;
        ensure!(
            cr.finalizers().iter().any(|f| f == RESOURCES_FINALIZER),
            "{obj}: no finalizer on a synced CR: {:?}",
            cr.finalizers()
        );
        wait_server(f, obj, Version::V1).await?;
    }
    // Let the checks that follow the writes run.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes_before = f.operator.server_writes().await?;
    for obj in released {
        annotate(f, obj, MANAGED_ANNOTATION, Some(MANAGED_FALSE)).await?;
    }
    for obj in released {
        wait_cr(f, obj, "Ready=False, Unmanaged", |cr| {
            has_condition(cr, "Ready", "False", "Unmanaged")
        })
        .await?;
    }
    for obj in released {
        api(f, obj.kind)
            .delete(&obj.cr, &DeleteParams::default())
            .await?;
    }
    for obj in released {
        wait_gone(f, obj).await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for obj in released {
        expect_server(f, obj, Version::V1).await?;
    }
    let writes_after = f.operator.server_writes().await?;
    ensure!(
        writes_after == writes_before,
        "the operator wrote to the server for unmanaged CRs ({writes_before} -> {writes_after})"
    );
    Ok(())
}

async fn stuck_deletion_escape(
    f: &Fixture,
    proxy: &FaultProxy,
    stuck: &[Obj],
) -> anyhow::Result<()> {
    for obj in stuck {
        create_cr(f, obj, Version::V1, json!({})).await?;
    }
    for obj in stuck {
        wait_ready(f, obj, "Synced").await?;
        wait_server(f, obj, Version::V1).await?;
    }
    // Let the checks that follow the writes run: a call cut in flight reports its own error.
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The server becomes unreachable for the operator.
    let disconnects = metric(f, DISCONNECTS).await?;
    proxy.refuse(true);
    proxy.cut();
    wait_metric_above(f, DISCONNECTS, disconnects, SLOW).await?;
    for obj in stuck {
        api(f, obj.kind)
            .delete(&obj.cr, &DeleteParams::default())
            .await?;
    }
    for obj in stuck {
        let cr = wait_cr(
            f,
            obj,
            "deletion waiting: Ready=False, ServerUnavailable",
            |cr| has_condition(cr, "Ready", "False", "ServerUnavailable"),
        )
        .await?;
        let message = condition(&cr, "Ready")
            .and_then(|c| c["message"].as_str())
            .unwrap_or_default();
        ensure!(
            message.contains("deletion"),
            "{obj}: the condition does not say the deletion waits: {message:?}"
        );
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for obj in stuck {
        let cr = api(f, obj.kind).get(&obj.cr).await?;
        ensure!(
            cr.metadata.deletion_timestamp.is_some()
                && cr.finalizers().iter().any(|f| f == RESOURCES_FINALIZER),
            "{obj}: the deletion is not held by the finalizer: {:?}",
            cr.metadata
        );
        expect_server(f, obj, Version::V1).await?;
    }

    // The documented escape, with the server still unreachable.
    let connections = metric(f, CONNECTIONS).await?;
    for obj in stuck {
        annotate(f, obj, MANAGED_ANNOTATION, Some(MANAGED_FALSE)).await?;
    }
    for obj in stuck {
        wait_gone(f, obj).await?;
    }
    for obj in stuck {
        expect_server(f, obj, Version::V1).await?;
    }
    let reconnected = metric(f, CONNECTIONS).await?;
    ensure!(
        reconnected == connections,
        "the operator reached the server while the proxy refused ({connections} -> {reconnected})"
    );

    // The operator is back: the objects stay, and as objects without CR they are mirrored (S1).
    proxy.refuse(false);
    wait_metric_above(f, CONNECTIONS, connections, RECONNECT).await?;
    for obj in stuck {
        let mirror = obj.mirror();
        let mirror = &mirror;
        eventually(
            &format!("{mirror}: the server object is mirrored"),
            RECONNECT,
            || async move {
                Ok(api(f, mirror.kind)
                    .get_opt(&mirror.cr)
                    .await?
                    .filter(|cr| ready_is(cr, "Synced")))
            },
        )
        .await?;
    }
    for obj in stuck {
        expect_server(f, obj, Version::V1).await?;
    }
    Ok(())
}

// ---- E2 ------------------------------------------------------------------------------------

/// E2 for every kind: nothing is written to either side while paused, whatever changes on
/// both; unpaused, the outcome table decides.
#[tokio::test]
async fn e2_paused_crs_of_every_kind() -> anyhow::Result<()> {
    with_options_fixture("esc-e2", counter_options(), async |f| {
        let f = &*f;
        let objs = KINDS.map(|k| Obj::new(k, "e2"));
        let result = paused_then_unpaused(f, &objs).await;
        for obj in &objs {
            delete_on_server(f, obj).await;
        }
        result
    })
    .await
}

async fn paused_then_unpaused(f: &Fixture, objs: &[Obj]) -> anyhow::Result<()> {
    for obj in objs {
        create_cr(f, obj, Version::V1, json!({})).await?;
    }
    for obj in objs {
        wait_ready(f, obj, "Synced").await?;
        wait_server(f, obj, Version::V1).await?;
        if obj.kind == Kind::Counter {
            // A value of its own: a recreation would reset it.
            ensure!(f.rest.counter_increment(&obj.server).await? == Some(2));
        }
    }

    // Pause.
    let mut ready_before = Vec::new();
    for obj in objs {
        annotate(
            f,
            obj,
            PAUSE_RECONCILIATION_ANNOTATION,
            Some(PAUSE_RECONCILIATION_TRUE),
        )
        .await?;
    }
    for obj in objs {
        let cr = wait_cr(f, obj, "ReconciliationPaused=True", |cr| {
            has_condition(cr, "ReconciliationPaused", "True", "Paused")
        })
        .await?;
        ready_before.push(condition(&cr, "Ready").cloned());
    }
    let writes_before = f.operator.server_writes().await?;

    // Changes on both sides while paused.
    let mut patched = Vec::new();
    for obj in objs {
        patched.push(patch_cr(f, obj, &json!({ "spec": obj.spec(Version::V2) })).await?);
    }
    for obj in objs.iter().filter(|o| !o.kind.immutable()) {
        edit_on_server(f, obj, Version::Rest).await?;
    }
    let mut frozen = Vec::new();
    for obj in objs {
        let expected = if obj.kind.immutable() {
            Version::V1
        } else {
            Version::Rest
        };
        expect_server(f, obj, expected).await?;
        frozen.push(server_state(f, obj).await?);
    }

    // Nothing is written to either side.
    // resourceVersions seen, from the one of the user's patch on.
    let mut versions: Vec<Vec<String>> = patched
        .iter()
        .map(|cr| vec![cr.resource_version().unwrap_or_default()])
        .collect();
    let quiet_until = tokio::time::Instant::now() + QUIET;
    while tokio::time::Instant::now() < quiet_until {
        for (i, obj) in objs.iter().enumerate() {
            let state = server_state(f, obj).await?;
            ensure!(
                state == frozen[i],
                "{obj}: the server object changed while paused: {:?} -> {state:?}",
                frozen[i]
            );
            let cr = api(f, obj.kind).get(&obj.cr).await?;
            let version = cr.resource_version().unwrap_or_default();
            if versions[i].last() != Some(&version) {
                versions[i].push(version);
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for (i, obj) in objs.iter().enumerate() {
        let cr = api(f, obj.kind).get(&obj.cr).await?;
        ensure!(
            has_condition(&cr, "ReconciliationPaused", "True", "Paused"),
            "{obj}: not ReconciliationPaused=True: {:?}",
            cr.data["status"]
        );
        ensure!(
            comparable(&cr)? == comparable(&patched[i])?,
            "{obj}: the CR was written while paused (resourceVersions {:?}):\nafter the user's \
             patch: {}\nnow: {}",
            versions[i],
            comparable(&patched[i])?,
            comparable(&cr)?
        );
        ensure!(
            condition(&cr, "Ready").cloned() == ready_before[i],
            "{obj}: Ready changed while paused: {:?} -> {:?}",
            ready_before[i],
            condition(&cr, "Ready")
        );
        ensure!(
            versions[i].len() <= 2,
            "{obj}: more than one write to the CR while paused: resourceVersions {:?}",
            versions[i]
        );
        println!(
            "{obj}: resourceVersions from the user's edit to the end of the quiet period: {:?}",
            versions[i]
        );
    }
    let writes_after = f.operator.server_writes().await?;
    ensure!(
        writes_after == writes_before,
        "the operator wrote to the server while paused ({writes_before} -> {writes_after})"
    );

    // Unpause: Bidirectional, conflict winner Kubernetes (the defaults).
    for obj in objs {
        annotate(f, obj, PAUSE_RECONCILIATION_ANNOTATION, None).await?;
    }
    for obj in objs {
        let state = wait_server(f, obj, Version::V2).await?;
        let cr = wait_ready(f, obj, "Synced").await?;
        ensure!(
            cr.metadata.generation == Some(2) && obj.spec_holds(&cr, Version::V2),
            "{obj}: the CR's spec was rewritten: generation {:?}, {:?}",
            cr.metadata.generation,
            cr.data["spec"]
        );
        ensure!(
            condition(&cr, "ReconciliationPaused").is_none(),
            "{obj}: ReconciliationPaused stayed"
        );
        let last_synced = cr.data.pointer("/status/lastSynced/generation").cloned();
        ensure!(
            last_synced == Some(json!(2)),
            "{obj}: lastSynced.generation {last_synced:?}"
        );
        // C1 for the kinds changed on both sides, K2 by recreation for the others.
        let reason = if obj.kind.immutable() {
            "RecreatedOnServer"
        } else {
            "ConflictResolved"
        };
        let (type_, note) = f.wait_event(&obj.cr, reason).await?;
        ensure!(type_ == "Warning", "{obj}: {reason} Event {type_}: {note}");
        match obj.kind {
            Kind::Counter => ensure!(
                state["value"] == json!(5),
                "{obj}: recreated, the value should be the new initial value 5: {state}"
            ),
            Kind::Task => {
                let result = f.rest.exec_task(&obj.server, &[]).await?;
                let want = Obj::script_result(Version::V2);
                ensure!(
                    result.trim() == want,
                    "{obj}: the task returns {result:?}, not {want:?}"
                );
            }
            Kind::Schema | Kind::Template => {}
        }
    }
    // Settled: nothing flips back later.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for obj in objs {
        expect_server(f, obj, Version::V2).await?;
        let cr = api(f, obj.kind).get(&obj.cr).await?;
        ensure!(
            ready_is(&cr, "Synced") && obj.spec_holds(&cr, Version::V2),
            "{obj}: {:?}",
            cr.data
        );
    }
    Ok(())
}

// ---- E4 ------------------------------------------------------------------------------------

/// What is internal, per kind: the operator's shared list (`___*`, `org.infinispan.*`, ...)
/// for every kind, plus built-in schema names and the server's side entries of its schema
/// cache (`*.errors`), and admin tasks (`@@...`, and anything the server lists as not a
/// script).
fn internal(kind: Kind, name: &str, admin_tasks: &[String]) -> bool {
    if InternalObjects::default().is_internal(name) {
        return true;
    }
    match kind {
        Kind::Schema => {
            name.starts_with("org/infinispan/")
                || name.starts_with("google/protobuf/")
                || name.ends_with(".errors")
                || BUILTIN_SCHEMAS
                    .iter()
                    .any(|b| name == *b || name.ends_with(&format!("/{b}")))
        }
        Kind::Task => name.starts_with("@@") || admin_tasks.iter().any(|t| t == name),
        Kind::Template => name.starts_with("org.infinispan."),
        Kind::Counter => false,
    }
}

/// Fails when a CR of the namespace (the four kinds, and caches) stands for an internal object.
async fn no_internal_crs(f: &Fixture, admin_tasks: &[String]) -> anyhow::Result<()> {
    let mut offenders = Vec::new();
    for kind in KINDS {
        for cr in api(f, kind).list(&ListParams::default()).await? {
            let server = server_name_of(kind, &cr);
            if internal(kind, &server, admin_tasks) {
                offenders.push(format!(
                    "{} {} stands for {server}",
                    kind.resource_kind(),
                    cr.name_any()
                ));
            }
        }
    }
    for cr in f.caches.list(&ListParams::default()).await? {
        let server = cr.spec.common.name.clone().unwrap_or_else(|| cr.name_any());
        if InternalObjects::default().is_internal(&server) {
            offenders.push(format!("Cache {} stands for {server}", cr.name_any()));
        }
    }
    ensure!(
        offenders.is_empty(),
        "CRs for internal objects: {offenders:?}"
    );
    Ok(())
}

/// The server's internal objects the test's CRs name, and the admin tasks, as JSON.
async fn internal_state(f: &Fixture, refused: &[Obj]) -> anyhow::Result<Value> {
    let templates: Vec<Value> = f
        .rest
        .list_templates()
        .await?
        .into_iter()
        .filter(|t| t.name.starts_with("org.infinispan."))
        .map(|t| json!({ "name": t.name, "configuration": t.configuration }))
        .collect();
    let tasks: Vec<Value> = f
        .rest
        .list_tasks(false)
        .await?
        .into_iter()
        .filter(|t| t.name.starts_with("@@") || refused.iter().any(|o| o.server == t.name))
        .map(|t| json!({ "name": t.name, "type": t.kind, "parameters": t.parameters }))
        .collect();
    let mut objects = Vec::new();
    for obj in refused {
        objects.push(json!({ "object": obj.server, "state": server_state(f, obj).await? }));
    }
    Ok(json!({ "templates": templates, "tasks": tasks, "objects": objects }))
}

/// E4 for every kind: nothing internal is mirrored; user CRs naming internal objects are
/// `Unsupported` and change nothing on the server, also when deleted.
#[tokio::test]
async fn e4_internal_objects_are_never_synced() -> anyhow::Result<()> {
    with_options_fixture("esc-e4", counter_options(), async |f| {
        let f = &*f;
        let controls = KINDS.map(|k| Obj::new(k, "e4c"));
        let refused = [
            Obj::named(
                Kind::Template,
                unique("e4-tpl-dist"),
                ABSENT_TEMPLATE.to_string(),
            ),
            Obj::named(
                Kind::Template,
                unique("e4-tpl-resp"),
                "org.infinispan.RESP_DIST".to_string(),
            ),
            Obj::named(
                Kind::Task,
                unique("e4-tsk-admin"),
                "@@cache@names".to_string(),
            ),
        ];
        let absent = !f.rest.template_exists(ABSENT_TEMPLATE).await?;
        let result = internal_objects(f, &controls, &refused).await;
        for obj in &controls {
            delete_on_server(f, obj).await;
        }
        // A template the operator must never have created goes; never one the server had.
        if absent
            && f.rest
                .template_exists(ABSENT_TEMPLATE)
                .await
                .unwrap_or(false)
        {
            let _ = f.rest.remove_template(ABSENT_TEMPLATE).await;
        }
        result
    })
    .await
}

async fn internal_objects(f: &Fixture, controls: &[Obj], refused: &[Obj]) -> anyhow::Result<()> {
    // What the server has that is internal: the checks below must not be vacuous.
    let admin_tasks: Vec<String> = f
        .rest
        .list_tasks(false)
        .await?
        .into_iter()
        .filter(|t| t.kind != "Script")
        .map(|t| t.name)
        .collect();
    ensure!(
        admin_tasks.iter().any(|t| t == "@@cache@names"),
        "the server lists no admin task @@cache@names: {admin_tasks:?}"
    );
    ensure!(
        f.rest.template_exists("org.infinispan.RESP_DIST").await?,
        "the server has no built-in template org.infinispan.RESP_DIST"
    );
    ensure!(
        !f.rest.template_exists(ABSENT_TEMPLATE).await?,
        "the server has a template {ABSENT_TEMPLATE}"
    );
    let listed_schemas: Vec<String> = f
        .rest
        .list_schemas()
        .await?
        .into_iter()
        .map(|s| s.name)
        .collect();
    println!(
        "admin tasks: {admin_tasks:?}; schemas the server lists: {listed_schemas:?} (built-in: {:?})",
        listed_schemas
            .iter()
            .filter(|s| internal(Kind::Schema, s, &[]))
            .collect::<Vec<_>>()
    );

    // The operator has seen the server's state: its own objects are mirrored. A schema removal
    // makes the server fire removals of the `.errors` entries of its built-in schemas.
    for obj in controls {
        create_on_server(f, obj, Version::V1).await?;
    }
    for obj in controls {
        wait_ready(f, &obj.mirror(), "Synced").await?;
    }
    let schema = controls
        .iter()
        .find(|o| o.kind == Kind::Schema)
        .context("no control schema")?;
    f.rest.delete_schema(&schema.server).await?;
    wait_gone(f, &schema.mirror()).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    no_internal_crs(f, &admin_tasks).await?;

    // User CRs naming internal objects.
    let before = internal_state(f, refused).await?;
    let admin_result = f.rest.exec_task("@@cache@names", &[]).await?;
    let writes_before = f.operator.server_writes().await?;
    for obj in refused {
        create_cr(f, obj, Version::V1, json!({})).await?;
    }
    for obj in refused {
        let cr = wait_cr(f, obj, "Ready=False, Unsupported", |cr| {
            ready_is(cr, "Unsupported") && has_condition(cr, "Ready", "False", "Unsupported")
        })
        .await?;
        let message = condition(&cr, "Ready")
            .and_then(|c| c["message"].as_str())
            .unwrap_or_default();
        ensure!(
            message.contains("internal"),
            "{obj}: the condition does not say why: {message:?}"
        );
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for obj in refused {
        let standing = crs_for(f, obj).await?;
        ensure!(
            standing == [obj.cr.clone()],
            "{obj}: other CRs for it: {standing:?}"
        );
        let cr = api(f, obj.kind).get(&obj.cr).await?;
        ensure!(
            ready_is(&cr, "Unsupported") && obj.spec_holds(&cr, Version::V1),
            "{obj}: {:?}",
            cr.data
        );
    }
    let during = internal_state(f, refused).await?;
    ensure!(
        during == before,
        "the server changed:\nbefore: {before}\nafter: {during}"
    );

    // Deleting them touches nothing on the server either.
    for obj in refused {
        api(f, obj.kind)
            .delete(&obj.cr, &DeleteParams::default())
            .await?;
    }
    for obj in refused {
        wait_gone(f, obj).await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = internal_state(f, refused).await?;
    ensure!(
        after == before,
        "the server changed after the deletions:\nbefore: {before}\nafter: {after}"
    );
    let admin_after = f.rest.exec_task("@@cache@names", &[]).await?;
    ensure!(
        !admin_after.contains("6 * 7") && admin_after.trim() != Obj::script_result(Version::V1),
        "@@cache@names runs another script: {admin_after:?} (before: {admin_result:?})"
    );
    let writes_after = f.operator.server_writes().await?;
    ensure!(
        writes_after == writes_before,
        "the operator wrote to the server for CRs of internal objects ({writes_before} -> \
         {writes_after})"
    );
    no_internal_crs(f, &admin_tasks).await?;
    Ok(())
}
