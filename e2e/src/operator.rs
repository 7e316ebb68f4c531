//! The resources operator as a separate process, and the fixture of its end-to-end suites: a
//! fresh namespace with an `Infinispan` CR and a credentials Secret, the real binary started
//! for that cluster, helpers to act on both sides and wait, and a teardown that never deletes a
//! server object by accident.
//!
//! Teardown order matters: the operator is stopped first and the finalizers of the namespace's
//! CRs (every kind) are removed before the namespace goes, so that deleting the namespace never
//! deletes a server cache (mirror CRs exist for every cache of the shared node).
//!
//! The operator runs as its own ServiceAccount, bound to the Role of `common_crds::rbac` (see
//! [`crate::identity`]), unless a test asks for the admin ([`Identity::Admin`]).
//!
//! Suites that share node0 run one test at a time ([`SERIAL`]): every operator mirrors every
//! cache of node0, so parallel tests would only add noise to each other.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, bail};
use common_crds::labels::CLUSTER_LABEL;
use common_crds::{Cache, Infinispan};
use infinispan_rest::{
    ClientConfig, ConfigDocument, ConfigFormat, CreateCacheOptions, Credentials,
};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::identity::OperatorIdentity;
use crate::{TestNamespace, Testbed, eventually};

/// Name of the `Infinispan` CR of a fixture.
pub const CLUSTER: &str = "demo";
/// Name of the credentials Secret of a fixture.
pub const SECRET: &str = "demo-operator-credentials";
/// S1 asks for about a second; the tests allow some slack for a loaded machine.
pub const FAST: Duration = Duration::from_secs(5);
pub const SLOW: Duration = Duration::from_secs(30);

/// One test at a time (see the module documentation).
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub fn operator_binary() -> anyhow::Result<PathBuf> {
    static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            crate::workspace_binary("resources-operator", "resources-operator")
                .map_err(|e| format!("{e:#}"))
        })
        .clone()
        .map_err(anyhow::Error::msg)
}

/// A name unique to this process and instant, for objects shared between tests.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!(
        "{prefix}-{:08x}",
        nanos ^ std::process::id().rotate_left(16)
    )
}

/// How to start one operator process.
#[derive(Clone, Debug)]
pub struct Launch {
    pub namespace: String,
    /// The `Infinispan` CR the operator serves.
    pub cluster: String,
    /// The server URL given to the operator (a dedicated node or a proxy in some suites).
    pub infinispan_url: String,
    /// The Kubernetes identity the operator runs as.
    pub kubeconfig: PathBuf,
    /// Arguments added after the common ones.
    pub args: Vec<String>,
    /// Distinguishes the log files of several processes of one namespace.
    pub instance: String,
}

impl Launch {
    /// The testbed's node0 and admin identity, for `namespace`.
    pub fn new(testbed: &Testbed, namespace: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            cluster: CLUSTER.to_string(),
            infinispan_url: testbed.infinispan_url.clone(),
            kubeconfig: testbed.kubeconfig.clone(),
            args: Vec::new(),
            instance: "0".to_string(),
        }
    }

    pub fn with_args(mut self, args: &[&str]) -> Self {
        self.args = args.iter().map(|a| a.to_string()).collect();
        self
    }

    /// The `POD_NAME` the process gets (its leader-election identity): one per instance, so a
    /// restart of the same instance is the same pod restarting, and two instances are two pods.
    pub fn pod_name(&self) -> String {
        format!("resources-operator-{}", self.instance)
    }
}

/// The running operator process.
#[derive(Debug)]
pub struct Operator {
    pub child: tokio::process::Child,
    pub metrics: SocketAddr,
    pub log: PathBuf,
}

impl Operator {
    /// Starts the operator and waits until `/readyz` answers 200.
    pub async fn start(launch: &Launch) -> anyhow::Result<Self> {
        let operator = Self::spawn(launch)?;
        let op = &operator;
        // Generous: the shared API server may be busy with another suite.
        eventually("the operator is ready (/readyz)", 2 * SLOW, || async move {
            Ok((op.get("/readyz").await?.0 == 200).then_some(()))
        })
        .await
        .map_err(|e| operator.with_log(e))?;
        Ok(operator)
    }

    /// Starts the operator without waiting for anything.
    pub fn spawn(launch: &Launch) -> anyhow::Result<Self> {
        let binary = operator_binary()?;
        let metrics = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0")?;
            probe.local_addr()?
        };
        let log_dir = crate::repo_root().join("target/e2e-logs");
        std::fs::create_dir_all(&log_dir)?;
        let log = log_dir.join(format!(
            "resources-operator-{}-{}-{}.log",
            launch.namespace, launch.cluster, launch.instance
        ));
        let log_file = std::fs::File::create(&log)?;
        let child = tokio::process::Command::new(binary)
            .args([
                "run",
                "--cluster",
                &launch.cluster,
                "--namespace",
                &launch.namespace,
                "--infinispan-url",
                &launch.infinispan_url,
                "--credentials-secret",
                SECRET,
                "--metrics-address",
                &metrics.to_string(),
                "--log-level",
                "resources_operator=debug,operator_runtime=debug,info",
            ])
            .args(&launch.args)
            .env("KUBECONFIG", &launch.kubeconfig)
            .env("POD_NAME", launch.pod_name())
            .stdout(std::process::Stdio::null())
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .context("starting resources-operator")?;
        Ok(Self {
            child,
            metrics,
            log,
        })
    }

    /// GET on the metrics endpoint: (status, body).
    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        crate::process::http_get(self.metrics, path).await
    }

    /// Sum of the operator's `writes_total` counters of the server side. (Kubernetes-side
    /// writes are not compared: other suites on the shared node0 may create caches, which this
    /// operator rightly mirrors.)
    pub async fn server_writes(&self) -> anyhow::Result<f64> {
        let (_, body) = self.get("/metrics").await?;
        Ok(body
            .lines()
            .filter(|l| l.starts_with("infinispan_resources_operator_writes_total"))
            .filter(|l| l.contains("side=\"server\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum())
    }

    /// The operator's `queue_depth` gauge for `kind`: reconcile requests it sent and has not
    /// started.
    pub async fn queue_depth(&self, kind: &str) -> anyhow::Result<f64> {
        self.gauge("queue_depth", kind).await
    }

    /// The value of the operator's per-kind metric `infinispan_resources_operator_<name>` for
    /// `kind`, or an error when /metrics has no such series.
    pub async fn gauge(&self, name: &str, kind: &str) -> anyhow::Result<f64> {
        let (_, body) = self.get("/metrics").await?;
        let series = format!("infinispan_resources_operator_{name}{{kind=\"{kind}\"}} ");
        body.lines()
            .find_map(|l| l.strip_prefix(&series)?.parse::<f64>().ok())
            .with_context(|| format!("no {series}in the metrics"))
    }

    pub fn with_log(&self, error: anyhow::Error) -> anyhow::Error {
        crate::process::with_log_tail(error, "operator", &self.log, 60)
    }

    /// Lines of the operator's log that contain every one of `needles`.
    pub fn log_lines(&self, needles: &[&str]) -> usize {
        crate::process::count_log_lines(&self.log, needles)
    }

    /// Stops the operator with SIGTERM and expects a graceful exit (status 0) within 15 s.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        crate::process::stop_gracefully(&mut self.child, "operator").await
    }
}

/// What a fixture sets up, beyond the defaults (node0, admin identity, default Infinispan CR).
#[derive(Clone, Debug)]
pub struct Options {
    /// `spec` of the `Infinispan` CR.
    pub spec: Value,
    /// Arguments added to the operator's command line.
    pub args: Vec<String>,
    /// The server the operator is given (default: the testbed's node0).
    pub infinispan_url: Option<String>,
    /// The server the test itself talks to (default: `infinispan_url`, else node0).
    pub test_url: Option<String>,
    /// PEM CA bundle the test's own REST client trusts (an https server). The operator's is
    /// given in `args` (`--ca-bundle`), so a test can run it without one.
    pub test_ca_bundle: Option<Vec<u8>>,
    /// Waits for the operator's `/readyz` before the test (default); `false` for an operator
    /// that is not meant to become ready.
    pub wait_ready: bool,
    /// The Kubernetes identity the operator runs as.
    pub identity: Identity,
}

/// The Kubernetes identity of a fixture's operator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Identity {
    /// Its own ServiceAccount with the Role of `common_crds::rbac`: what an install gives it.
    #[default]
    ServiceAccount,
    /// The testbed's admin (`system:masters`).
    Admin,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            spec: json!({}),
            args: Vec::new(),
            infinispan_url: None,
            test_url: None,
            test_ca_bundle: None,
            wait_ready: true,
            identity: Identity::default(),
        }
    }
}

/// Everything one test needs.
pub struct Fixture {
    pub testbed: Testbed,
    pub client: kube::Client,
    pub ns: TestNamespace,
    pub rest: infinispan_rest::Client,
    pub caches: Api<Cache>,
    pub launch: Launch,
    /// The operator's ServiceAccount ([`Identity::ServiceAccount`]).
    pub identity: Option<OperatorIdentity>,
    pub operator: Operator,
    /// Server caches to remove at the end.
    pub server_names: Vec<String>,
}

impl std::fmt::Debug for Fixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fixture")
            .field("namespace", &self.ns.name)
            .field("launch", &self.launch)
            .finish_non_exhaustive()
    }
}

impl Fixture {
    /// A fixture whose Infinispan CR has `spec` and whose operator gets `extra` arguments.
    pub async fn new(prefix: &str, spec: Value, extra: &[&str]) -> anyhow::Result<Self> {
        let options = Options {
            spec,
            args: extra.iter().map(|a| a.to_string()).collect(),
            ..Options::default()
        };
        Self::with_options(prefix, options).await
    }

    /// A fixture set up as `options` say; the operator is started and Ready.
    pub async fn with_options(prefix: &str, options: Options) -> anyhow::Result<Self> {
        let testbed = Testbed::get()?;
        let client = testbed.admin_client().await?;
        crate::install_crds(&client).await?;
        let ns = TestNamespace::create(&client, prefix).await?;
        let secret: Secret = serde_json::from_value(json!({
            "metadata": { "name": SECRET },
            "stringData": {
                "username": testbed.infinispan_user,
                "password": testbed.infinispan_password,
            }
        }))?;
        Api::<Secret>::namespaced(client.clone(), &ns.name)
            .create(&PostParams::default(), &secret)
            .await?;
        let cluster: Infinispan = serde_json::from_value(json!({
            "apiVersion": "infinispan.org/v1",
            "kind": "Infinispan",
            "metadata": { "name": CLUSTER },
            "spec": options.spec
        }))?;
        Api::<Infinispan>::namespaced(client.clone(), &ns.name)
            .create(&PostParams::default(), &cluster)
            .await?;
        let test_url = options
            .test_url
            .clone()
            .or_else(|| options.infinispan_url.clone())
            .unwrap_or_else(|| testbed.infinispan_url.clone());
        let mut config = ClientConfig::new(test_url).with_credentials(Credentials::new(
            testbed.infinispan_user.clone(),
            testbed.infinispan_password.clone(),
        ));
        if let Some(pem) = options.test_ca_bundle {
            config = config.with_ca_bundle_pem(pem);
        }
        let rest = infinispan_rest::Client::new(config)?;
        let mut launch = Launch::new(&testbed, &ns.name);
        launch.args = options.args;
        if let Some(url) = options.infinispan_url {
            launch.infinispan_url = url;
        }
        let identity = match options.identity {
            Identity::ServiceAccount => {
                let scope = common_crds::rbac::OperatorScope {
                    cluster: CLUSTER,
                    namespace: &ns.name,
                    credentials_secret: SECRET,
                };
                let identity = OperatorIdentity::create(&client, &testbed, scope).await?;
                launch.kubeconfig = identity.kubeconfig.clone();
                Some(identity)
            }
            Identity::Admin => None,
        };
        let operator = if options.wait_ready {
            Operator::start(&launch).await?
        } else {
            Operator::spawn(&launch)?
        };
        let caches = Api::<Cache>::namespaced(client.clone(), &ns.name);
        Ok(Self {
            testbed,
            client,
            ns,
            rest,
            caches,
            launch,
            identity,
            operator,
            server_names: Vec::new(),
        })
    }

    /// Kills the operator with SIGKILL (no cleanup of any kind).
    pub async fn kill_operator(&mut self) -> anyhow::Result<()> {
        self.operator.child.kill().await?;
        Ok(())
    }

    /// Starts a new operator process for the namespace, with `extra` arguments.
    pub async fn restart_operator(&mut self, extra: &[&str]) -> anyhow::Result<()> {
        self.launch.args = extra.iter().map(|a| a.to_string()).collect();
        self.operator = Operator::start(&self.launch).await?;
        Ok(())
    }

    /// A cache name unique to this test, removed from the server at the end.
    pub fn server_name(&mut self, prefix: &str) -> String {
        let name = unique(prefix);
        self.server_names.push(name.clone());
        name
    }

    /// Applies a user Cache CR (origin kubernetes).
    pub async fn apply_cache(&self, name: &str, template: &str) -> anyhow::Result<Cache> {
        self.apply_cache_with(name, template, json!({}), json!({}))
            .await
    }

    /// Applies a user Cache CR with annotations and extra spec fields.
    pub async fn apply_cache_with(
        &self,
        name: &str,
        template: &str,
        annotations: Value,
        spec: Value,
    ) -> anyhow::Result<Cache> {
        let mut full_spec = json!({ "template": template });
        if let (Some(full), Some(extra)) = (full_spec.as_object_mut(), spec.as_object()) {
            full.extend(extra.clone());
        }
        let cr: Cache = serde_json::from_value(json!({
            "apiVersion": "infinispan.org/v2alpha1",
            "kind": "Cache",
            "metadata": {
                "name": name,
                "labels": { CLUSTER_LABEL: CLUSTER },
                "annotations": annotations,
            },
            "spec": full_spec
        }))?;
        Ok(self.caches.create(&PostParams::default(), &cr).await?)
    }

    /// Creates a cache on the server, as another client would.
    pub async fn create_on_server(&self, server_name: &str, config: &str) -> anyhow::Result<()> {
        self.rest
            .create_cache(
                server_name,
                &ConfigDocument::json(config),
                CreateCacheOptions::default(),
            )
            .await?;
        Ok(())
    }

    /// Waits for a Kubernetes Event about the CR `name` with `reason` (events.k8s.io/v1, as
    /// the operator publishes them); returns its type and note.
    pub async fn wait_event(&self, name: &str, reason: &str) -> anyhow::Result<(String, String)> {
        let events: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(self.client.clone(), &self.ns.name);
        let events = &events;
        eventually(
            &format!("an Event {reason} about {name}"),
            SLOW,
            || async move {
                let found = events
                    .list(&ListParams::default())
                    .await?
                    .into_iter()
                    .find(|e| {
                        e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                            && e.reason.as_deref() == Some(reason)
                    })
                    .map(|e| (e.type_.unwrap_or_default(), e.note.unwrap_or_default()));
                Ok(found)
            },
        )
        .await
        .map_err(|e| self.operator.with_log(e))
    }

    /// Waits for a condition of `type_` with `status` and `reason`.
    pub async fn wait_condition(
        &self,
        name: &str,
        type_: &str,
        status: &str,
        reason: &str,
    ) -> anyhow::Result<Cache> {
        eventually(
            &format!("Cache {name} {type_}={status} ({reason})"),
            SLOW,
            || async move {
                let cr = self.caches.get(name).await?;
                let ok = cr.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == type_ && c.status == status && c.reason == reason)
                });
                Ok(ok.then_some(cr))
            },
        )
        .await
        .map_err(|e| self.operator.with_log(e))
    }

    /// Waits for `Ready` with `reason` at the CR's current generation.
    pub async fn wait_ready(&self, name: &str, reason: &str) -> anyhow::Result<Cache> {
        let result = eventually(
            &format!("Cache {name} Ready with reason {reason}"),
            SLOW,
            || async move {
                let cr = self.caches.get(name).await?;
                let status = cr.status.clone().unwrap_or_default();
                let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
                let ok = ready.is_some_and(|c| c.reason == reason)
                    && status.observed_generation == cr.metadata.generation;
                Ok(ok.then_some(cr))
            },
        )
        .await;
        result.map_err(|e| self.operator.with_log(e))
    }

    pub async fn wait_gone(&self, name: &str) -> anyhow::Result<()> {
        eventually(&format!("Cache CR {name} gone"), SLOW, || async move {
            Ok(self.caches.get_opt(name).await?.is_none().then_some(()))
        })
        .await
        .map_err(|e| self.operator.with_log(e))
    }

    pub async fn wait_server(&self, server_name: &str, exists: bool) -> anyhow::Result<()> {
        eventually(
            &format!("server cache {server_name} exists={exists}"),
            SLOW,
            || async move { Ok((self.rest.cache_exists(server_name).await? == exists).then_some(())) },
        )
        .await
        .map_err(|e| self.operator.with_log(e))
    }

    /// Waits until the CR `name` of kind `K` says `Ready` with `reason` for its current
    /// generation; returns it.
    pub async fn wait_kind<K>(&self, name: &str, reason: &str) -> anyhow::Result<K>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
            + common_crds::ServerResource
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::namespaced(self.client.clone(), &self.ns.name);
        let api = &api;
        eventually(
            &format!("{} {name} Ready {reason}", K::kind(&())),
            SLOW,
            || async move {
                let cr = api.get_opt(name).await?;
                Ok(cr.filter(|cr| {
                    cr.resource_status().is_some_and(|s| {
                        s.conditions
                            .iter()
                            .any(|c| c.type_ == "Ready" && c.reason == reason)
                            && s.observed_generation == cr.meta().generation
                    })
                }))
            },
        )
        .await
        .map_err(|e| self.operator.with_log(e))
    }

    /// Waits until the CR `name` of kind `K` is gone.
    pub async fn wait_kind_gone<K>(&self, name: &str) -> anyhow::Result<()>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::namespaced(self.client.clone(), &self.ns.name);
        let api = &api;
        eventually(
            &format!("{} {name} gone", K::kind(&())),
            SLOW,
            || async move { Ok(api.get_opt(name).await?.is_none().then_some(())) },
        )
        .await
        .map_err(|e| self.operator.with_log(e))
    }

    /// The server's configuration of a cache, without the name wrapper.
    pub async fn server_config(&self, server_name: &str) -> anyhow::Result<Value> {
        let doc = self
            .rest
            .cache_config(server_name, ConfigFormat::Json)
            .await?;
        let value: Value = serde_json::from_str(&doc.text)?;
        Ok(value.get(server_name).cloned().unwrap_or(value))
    }

    /// Stops the operator, releases the namespace's finalizers, deletes the namespace and the
    /// test's server caches.
    pub async fn teardown(self) -> anyhow::Result<()> {
        let Self {
            testbed: _,
            client: _,
            ns,
            rest,
            caches,
            launch: _,
            // Its token dies with the namespace (the API server looks the account up).
            identity: _,
            operator,
            server_names,
        } = self;
        let log = operator.log.clone();
        operator
            .stop()
            .await
            .with_context(|| format!("operator log: {}", log.display()))?;
        release_finalizers(&caches).await?;
        let client = caches.clone().into_client();
        release_finalizers(&Api::<common_crds::Template>::namespaced(
            client.clone(),
            &ns.name,
        ))
        .await?;
        release_finalizers(&Api::<common_crds::Counter>::namespaced(
            client.clone(),
            &ns.name,
        ))
        .await?;
        release_finalizers(&Api::<common_crds::Schema>::namespaced(
            client.clone(),
            &ns.name,
        ))
        .await?;
        release_finalizers(&Api::<common_crds::Task>::namespaced(client, &ns.name)).await?;
        ns.delete().await?;
        for name in server_names {
            match rest.delete_cache(&name).await {
                Ok(()) | Err(infinispan_rest::Error::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }
}

/// A config event stream of `rest` whose replay (the server's current state) is over: what it
/// yields next are live changes. For tests that count server writes from outside the operator.
pub async fn live_events(
    rest: &infinispan_rest::Client,
) -> anyhow::Result<infinispan_rest::ConfigEventStream> {
    use futures::StreamExt;
    use infinispan_rest::{StreamItem, StreamOptions};
    let mut stream = rest.config_events(StreamOptions::default());
    loop {
        match tokio::time::timeout(SLOW, stream.next()).await? {
            Some(StreamItem::ReplayComplete { .. }) => return Ok(stream),
            Some(StreamItem::Disconnected { error, .. }) => {
                bail!("listener disconnected during the replay: {error}")
            }
            Some(_) => {}
            None => bail!("the listener ended"),
        }
    }
}

/// Removes the finalizers of every CR of `api` (teardown: the namespace's deletion must never
/// wait for an operator that is gone, nor delete a server object).
pub async fn release_finalizers<K>(api: &Api<K>) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    for cr in api.list(&ListParams::default()).await? {
        if !cr.finalizers().is_empty() {
            let patch = json!({ "metadata": { "finalizers": null } });
            match api
                .patch(
                    &cr.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                // Gone between the list and the patch: nothing to release.
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.is_not_found() => {}
                Err(error) => return Err(error.into()),
            }
        }
    }
    Ok(())
}

/// A resource CR of `kind` for the fixtures' cluster: `metadata.name` `name`, this `spec`.
pub fn resource_cr<K: serde::de::DeserializeOwned>(
    kind: &str,
    name: &str,
    spec: Value,
) -> anyhow::Result<K> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v2alpha1",
        "kind": kind,
        "metadata": { "name": name, "labels": { CLUSTER_LABEL: CLUSTER } },
        "spec": spec
    }))?)
}

/// A Protobuf message name of its own for each use (message names are global on the server:
/// two schemas declaring one name are both in error): `unique(prefix)`, letters only.
pub fn protobuf_message(prefix: &str) -> String {
    unique(prefix)
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| match c.to_digit(10) {
            Some(d) => char::from(b'G' + d as u8),
            None => c.to_ascii_uppercase(),
        })
        .collect()
}

/// Runs a test body on a fixture (default cluster, Bidirectional) and always tears down.
pub async fn with_fixture<F>(prefix: &str, body: F) -> anyhow::Result<()>
where
    F: AsyncFnOnce(&mut Fixture) -> anyhow::Result<()>,
{
    with_custom_fixture(prefix, json!({}), &[], body).await
}

/// Runs a test body on a fixture with this Infinispan spec and these operator arguments.
pub async fn with_custom_fixture<F>(
    prefix: &str,
    spec: Value,
    extra: &[&str],
    body: F,
) -> anyhow::Result<()>
where
    F: AsyncFnOnce(&mut Fixture) -> anyhow::Result<()>,
{
    let _serial = SERIAL.lock().await;
    let mut fixture = Fixture::new(prefix, spec, extra).await?;
    let result = body(&mut fixture).await;
    let result = result.map_err(|e| fixture.operator.with_log(e));
    let teardown = fixture.teardown().await;
    result?;
    teardown
}

/// Runs a test body on a fixture set up as `options` say, and always tears down.
pub async fn with_options_fixture<F>(prefix: &str, options: Options, body: F) -> anyhow::Result<()>
where
    F: AsyncFnOnce(&mut Fixture) -> anyhow::Result<()>,
{
    let _serial = SERIAL.lock().await;
    let mut fixture = Fixture::with_options(prefix, options).await?;
    let result = body(&mut fixture).await;
    let result = result.map_err(|e| fixture.operator.with_log(e));
    let teardown = fixture.teardown().await;
    result?;
    teardown
}

/// `expiration.lifespan` of a distributed-cache document, as text (the server writes numbers
/// as strings: `{"lifespan":11000}` comes back as `{"lifespan":"11000"}`).
pub fn lifespan(config: &Value) -> Option<String> {
    match config.pointer("/distributed-cache/expiration/lifespan")? {
        Value::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    }
}

pub fn ready_condition(
    cr: &Cache,
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    cr.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .cloned()
}
