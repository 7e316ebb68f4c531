//! `resources-operator run`: wires the pieces for one Infinispan cluster.
//!
//! Steps: logging, the checked leader-election options and the CA bundle (read and checked
//! once: a bad file stops the start, see [`ca_bundle`]); Kubernetes client (KUBECONFIG or
//! in-cluster); the metrics endpoint; leader election (a standby waits here, Ready, reading
//! the Lease and nothing else; see `operator_runtime::leadership`); then, as the leader: the
//! Infinispan CR (sync defaults, owner of mirror CRs); the credentials Secret; the REST client
//! (the one client of the run: every engine and every server stream uses a clone of it, so all
//! of them trust the same CA bundle); the engines (CR watch + controller per kind) and the
//! server streams feeding them, while the Lease is renewed; graceful shutdown on SIGTERM or
//! Ctrl-C (engines first, then the Lease released). A leader that loses the Lease drops the
//! engines at once and the process exits non-zero.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common_crds::Infinispan;
use futures::FutureExt;
use infinispan_rest::{
    ClientConfig, ClientIdentity, Credentials, Documents, InternalObjects, StreamOptions,
};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Resource};
use operator_runtime::endpoint::{self, Readiness};
use operator_runtime::events::{Recorder, Reporter};
use operator_runtime::leadership::{Candidate, ElectionConfig, Leadership, Loss, TimingsError};
use operator_runtime::logging::{self, LogLevelError};
use tokio::sync::watch;
use tracing::Instrument;

use crate::cli::RunArgs;
use crate::cluster;
use crate::engine::ServerState;
use crate::engine::controller::{Settings, Wiring};
use crate::engine::drift::{self, DocumentSource};
use crate::engine::server_writes::ServerWrites;
use crate::engine::stream;
use crate::kinds::cache::CacheAdapter;
use crate::kinds::counter::CounterAdapter;
use crate::kinds::schema::SchemaAdapter;
use crate::kinds::task::TaskAdapter;
use crate::kinds::template::TemplateAdapter;
use crate::member::{CaBundle, ClientCertificate, MemberConfig};
use crate::metrics::{self, Metrics};
use common_crds::shared::SecretKey;

/// Name of the controller in Kubernetes Events.
pub const REPORTER: &str = "infinispan-resources-operator";

/// Reconciles in flight at once (per kind).
const CONCURRENCY: u16 = 16;

/// Why `run` could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    LogLevel(#[from] LogLevelError),
    #[error("cannot reach Kubernetes: {0}")]
    Kubernetes(#[source] kube::Error),
    #[error("cannot read the Infinispan CR {namespace}/{name}: {source}")]
    Cluster {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("the Infinispan CR {namespace}/{name} has no name or uid")]
    ClusterIdentity { namespace: String, name: String },
    #[error("cannot read the credentials Secret {namespace}/{name}: {message}")]
    Credentials {
        namespace: String,
        name: String,
        message: String,
    },
    #[error("cannot use the {what} of the Secret {namespace}/{name}: {message}")]
    TlsSecret {
        what: &'static str,
        namespace: String,
        name: String,
        message: String,
    },
    #[error("cannot use the CA bundle {} (--ca-bundle): {message}", path.display())]
    CaBundle { path: PathBuf, message: String },
    #[error("cannot read the client certificate or key {} (--client-certificate, --client-key): {message}", path.display())]
    ClientCertificate { path: PathBuf, message: String },
    #[error("cannot build the Infinispan REST client: {0}")]
    Rest(#[from] infinispan_rest::Error),
    #[error("cannot set up metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("cannot listen on the metrics address: {0}")]
    Listen(#[source] std::io::Error),
    #[error(transparent)]
    Timings(#[from] TimingsError),
    #[error("lost the leadership ({0}); the work in flight was aborted, exiting")]
    LeadershipLost(#[source] Loss),
}

/// The PEM CA bundle of `--ca-bundle`, read and checked as the REST client will use it; `None`
/// without the flag (the system's roots).
pub fn ca_bundle(path: Option<&Path>) -> Result<Option<Vec<u8>>, RunError> {
    let Some(path) = path else {
        return Ok(None);
    };
    let error = |message: String| RunError::CaBundle {
        path: path.to_path_buf(),
        message,
    };
    let pem = std::fs::read(path).map_err(|e| error(e.to_string()))?;
    let certificates = ClientConfig::check_ca_bundle_pem(&pem).map_err(|e| error(e.to_string()))?;
    tracing::info!(
        file = %path.display(),
        certificates,
        "trusting the CA bundle for the server's TLS certificate"
    );
    Ok(Some(pem))
}

/// The certificate chain and key of `--client-certificate` and `--client-key`; `None` without
/// them. The files are read once: a renewed certificate comes with a new pod (the cluster
/// operator rolls the Deployment). The REST client checks them when it is built.
pub fn client_identity(args: &RunArgs) -> Result<Option<ClientIdentity>, RunError> {
    let (Some(cert), Some(key)) = (&args.client_certificate, &args.client_key) else {
        return Ok(None);
    };
    let read = |path: &PathBuf| {
        std::fs::read(path).map_err(|e| RunError::ClientCertificate {
            path: path.clone(),
            message: e.to_string(),
        })
    };
    tracing::info!(file = %cert.display(), "presenting the client certificate to the server");
    Ok(Some(ClientIdentity {
        cert_chain_pem: read(cert)?,
        key_pem: read(key)?,
    }))
}

/// The credentials of the credentials Secret; none when there is none.
async fn credentials(
    client: &kube::Client,
    config: &MemberConfig,
) -> Result<Option<Credentials>, RunError> {
    let Some(name) = &config.credentials_secret else {
        return Ok(None);
    };
    let error = |message: String| RunError::Credentials {
        namespace: config.namespace.clone(),
        name: name.clone(),
        message,
    };
    let secret = Api::<Secret>::namespaced(client.clone(), &config.namespace)
        .get(name)
        .await
        .map_err(|e| error(e.to_string()))?;
    let data = secret.data.unwrap_or_default();
    let key = |k: &str| -> Result<String, RunError> {
        let bytes = data.get(k).ok_or_else(|| error(format!("no key {k:?}")))?;
        String::from_utf8(bytes.0.clone()).map_err(|_| error(format!("key {k:?} is not UTF-8")))
    };
    Ok(Some(Credentials::new(key("username")?, key("password")?)))
}

/// The values of `keys` of the Secret `name` (a shared member's CA or client certificate);
/// `what` names them in errors.
async fn secret_values<const N: usize>(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    keys: [&str; N],
    what: &'static str,
) -> Result<[Vec<u8>; N], RunError> {
    let error = |message: String| RunError::TlsSecret {
        what,
        namespace: namespace.to_string(),
        name: name.to_string(),
        message,
    };
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(|e| error(e.to_string()))?;
    let data = secret.data.unwrap_or_default();
    let mut values = Vec::with_capacity(N);
    for key in keys {
        let value = data
            .get(key)
            .ok_or_else(|| error(format!("no key {key:?}")))?;
        values.push(value.0.clone());
    }
    values
        .try_into()
        .map_err(|_| error("the keys could not be read".to_string()))
}

/// The PEM CA bundle `config` trusts (read from its Secret for a shared member, and checked as
/// a file is); `None`: the system's roots.
async fn member_ca_bundle(
    client: &kube::Client,
    config: &MemberConfig,
) -> Result<Option<Vec<u8>>, RunError> {
    match &config.ca_bundle {
        CaBundle::System => Ok(None),
        CaBundle::Pem { pem, .. } => Ok(Some(pem.clone())),
        CaBundle::Secret(SecretKey { name, key }) => {
            let what = "CA bundle";
            let [pem] =
                secret_values(client, &config.namespace, name, [key.as_str()], what).await?;
            ClientConfig::check_ca_bundle_pem(&pem).map_err(|e| RunError::TlsSecret {
                what,
                namespace: config.namespace.clone(),
                name: name.clone(),
                message: e.to_string(),
            })?;
            Ok(Some(pem))
        }
    }
}

/// The client certificate `config` presents (read from its Secret for a shared member).
async fn member_client_identity(
    client: &kube::Client,
    config: &MemberConfig,
) -> Result<Option<ClientIdentity>, RunError> {
    match &config.client_certificate {
        ClientCertificate::None => Ok(None),
        ClientCertificate::Pem(identity) => Ok(Some(identity.clone())),
        ClientCertificate::Secret(name) => {
            let [cert_chain_pem, key_pem] = secret_values(
                client,
                &config.namespace,
                name,
                ["tls.crt", "tls.key"],
                "client certificate",
            )
            .await?;
            Ok(Some(ClientIdentity {
                cert_chain_pem,
                key_pem,
            }))
        }
    }
}

/// Runs until SIGTERM or Ctrl-C, or until leadership is lost (an error: the process must end).
pub async fn run(args: RunArgs) -> Result<(), RunError> {
    logging::init(args.common.log_format, &args.common.log_level)?;
    let election = args.election.election()?;
    let ca_bundle = ca_bundle(args.ca_bundle.as_deref())?;
    let client_identity = client_identity(&args)?;
    let client = kube::Client::try_default()
        .await
        .map_err(RunError::Kubernetes)?;

    let metrics = Metrics::new()?;
    let readiness = Readiness::new(metrics::WAITING_FOR);
    let listener = endpoint::bind(args.common.metrics_address)
        .await
        .map_err(RunError::Listen)?;
    let endpoint = AbortOnDrop(tokio::spawn(endpoint::serve(
        listener,
        metrics.registry.clone(),
        readiness.clone(),
    )));
    // Memory a burst of work freed (the startup sync, a relist) goes back to the system once
    // the burst ends, checked every second.
    let _give_back = AbortOnDrop(tokio::spawn({
        let metrics = metrics.clone();
        async move {
            operator_runtime::memory::give_back_after_bursts(
                move || metrics.activity(),
                std::time::Duration::from_secs(1),
            )
            .await;
        }
    }));
    let shutdown = Shutdown::listen();
    let config = MemberConfig::from_args(&args, ca_bundle, client_identity);
    let start = Start {
        config: &config,
        client: client.clone(),
        metrics: metrics.clone(),
        readiness: readiness.clone(),
        shutdown: &shutdown,
    };

    let Some(election) = election else {
        tracing::info!(
            cluster = args.cluster,
            "leader election is off (--leader-election=false): this process syncs alone; \
             run exactly one replica"
        );
        metrics.election.leader.set(1);
        let result = sync(start, None).await;
        drop(endpoint);
        tracing::info!("stopped");
        return result;
    };

    let lease_name = common_crds::rbac::leader_lease_name(&args.cluster);
    tracing::info!(
        cluster = args.cluster,
        identity = election.identity,
        lease = lease_name,
        timings = ?election.timings,
        "leader election: waiting for the Lease"
    );
    let candidate = Candidate::new(
        client.clone(),
        ElectionConfig {
            namespace: args.namespace.clone(),
            lease_name,
            identity: election.identity,
            timings: election.timings,
        },
        metrics.election.clone(),
    );
    let mut leadership = tokio::select! {
        leadership = candidate.acquire(&readiness) => leadership,
        () = shutdown.wait() => {
            tracing::info!("stopped as a standby");
            return Ok(());
        }
    };
    let result = sync(start, Some(&mut leadership)).await;
    match result {
        // Not ours any more: nothing to release.
        Err(RunError::LeadershipLost(_)) => {}
        // Stopped, or could not start: a standby may take over at once.
        Ok(()) | Err(_) => leadership.release().await,
    }
    drop(endpoint);
    if result.is_ok() {
        tracing::info!("stopped");
    }
    result
}

/// The sync itself, once this process may write: reads the cluster's settings and credentials,
/// wires the cache engine and its event stream, and runs them until shutdown, or until
/// `leadership` is lost, which drops the engine (and every reconcile in flight) at once.
pub(crate) async fn sync(
    start: Start<'_>,
    leadership: Option<&mut Leadership>,
) -> Result<(), RunError> {
    let Start {
        config,
        client,
        metrics,
        readiness,
        shutdown,
    } = start;
    let cluster = Api::<Infinispan>::namespaced(client.clone(), &config.namespace)
        .get(&config.cluster)
        .await
        .map_err(|source| RunError::Cluster {
            namespace: config.namespace.clone(),
            name: config.cluster.clone(),
            source,
        })?;
    let owner = cluster
        .controller_owner_ref(&())
        .ok_or_else(|| RunError::ClusterIdentity {
            namespace: config.namespace.clone(),
            name: config.cluster.clone(),
        })?;
    let rest = rest_client(&client, config).await?;
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: REPORTER.to_string(),
            instance: std::env::var("POD_NAME").ok(),
        },
    );
    // The Infinispan CR, watched from here on: policy changes and drain (design E3, sync mode; E5,
    // drain).
    let (state, initial, _cluster_watch) = watch_cluster(&client, config, &cluster);
    let settings = Settings {
        cluster: config.cluster.clone(),
        namespace: config.namespace.clone(),
        state: state.clone(),
        owner,
    };
    let ca_bundle = match &config.ca_bundle {
        CaBundle::System => "the system's roots".to_string(),
        CaBundle::Pem { source, .. } => source.clone(),
        CaBundle::Secret(SecretKey { name, key }) => format!("Secret {name}, key {key}"),
    };
    tracing::info!(
        cluster = config.cluster,
        namespace = config.namespace,
        url = config.infinispan_url,
        ca_bundle,
        state = ?initial,
        "starting the sync"
    );

    let server = ServerState {
        writes: ServerWrites::new(
            config.server_write_concurrency,
            Some(metrics.server_writes.clone()),
        ),
        ..ServerState::default()
    };
    tracing::info!(
        max = server.writes.max(),
        "server writes in flight at once (--server-write-concurrency)"
    );
    // One engine per kind, each wired to its CR watch.
    let parts = Parts {
        client,
        settings,
        server: server.clone(),
        metrics: metrics.clone(),
        readiness,
        recorder,
    };
    let (engines, streams) = Engines::wire(&parts, &rest, config);
    let all: Vec<Arc<dyn stream::KindSink>> = streams
        .iter()
        .flat_map(|stream| stream.sinks.iter().cloned())
        .collect();
    // Ready once every kind's engine has its first snapshot.
    parts.readiness.expect_parts(all.len());
    // Aborted however this function ends.
    let _streams = spawn_streams(
        streams,
        &all,
        &server,
        &metrics,
        &rest,
        config.drift_check_interval,
        &parts.readiness,
    );
    let (resume_tx, resume) = futures::channel::oneshot::channel::<()>();
    let retire = Retire {
        epoch: server.epoch.clone(),
        rest: rest.clone(),
    };
    // Spawned tasks keep the caller's span (a shared operator's member: its cluster).
    let _follow = AbortOnDrop(tokio::spawn(
        follow_cluster(all, state, initial, resume_tx, retire).in_current_span(),
    ));
    // The engines stop on SIGTERM, or when a drained cluster is enabled again (the process
    // then exits, and a fresh start resumes the sync: in a pod, a restart).
    let signalled = shutdown.signalled();
    let stop = async move {
        let _ = futures::future::select(Box::pin(signalled), resume).await;
    }
    .boxed()
    .shared();
    // A graceful stop lets reconciles in flight finish, but never for longer than
    // STOP_DEADLINE after the signal (a pod is killed at the end of its grace period anyway;
    // seen once in CI: engines signalled 150 ms after they started never finished).
    let engine = async {
        let engine = std::pin::pin!(engines.run(stop));
        let deadline = async {
            shutdown.wait().await;
            tokio::time::sleep(STOP_DEADLINE).await;
        };
        tokio::select! {
            () = engine => {}
            () = deadline => tracing::warn!(
                deadline = ?STOP_DEADLINE,
                "the engines did not finish within the stop deadline: stopping without them"
            ),
        }
    };
    match leadership {
        None => {
            engine.await;
            Ok(())
        }
        Some(leadership) => tokio::select! {
            () = engine => Ok(()),
            loss = leadership.hold() => Err(RunError::LeadershipLost(loss)),
        },
    }
}

/// How long reconciles in flight may take to finish after SIGTERM.
const STOP_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// The one REST client of the run: the engines and every server stream (config events,
/// schema, counter and task feeds) use clones of it, so its TLS settings are everyone's.
async fn rest_client(
    client: &kube::Client,
    member: &MemberConfig,
) -> Result<infinispan_rest::Client, RunError> {
    let mut config = ClientConfig::new(member.infinispan_url.clone());
    if let Some(credentials) = credentials(client, member).await? {
        config = config.with_credentials(credentials);
    }
    if let Some(pem) = member_ca_bundle(client, member).await? {
        config = config.with_ca_bundle_pem(pem);
    }
    if let Some(name) = &member.tls_server_name {
        config = config.with_tls_server_name(name);
    }
    if let Some(identity) = member_client_identity(client, member).await? {
        config = config.with_client_identity(identity);
    }
    Ok(infinispan_rest::Client::new(config)?)
}

/// Watches the Infinispan CR `cluster` (read once already) for what it says of the sync: its
/// state now, and the watch (aborted when dropped).
fn watch_cluster(
    client: &kube::Client,
    config: &MemberConfig,
    cluster: &Infinispan,
) -> (
    watch::Receiver<cluster::ClusterState>,
    cluster::ClusterState,
    AbortOnDrop<()>,
) {
    let overrides = config.overrides;
    let initial = cluster::state_of(Some(cluster), overrides);
    let (state_tx, state) = watch::channel(initial);
    let watch = AbortOnDrop(tokio::spawn(
        cluster::watch(
            Api::<Infinispan>::namespaced(client.clone(), &config.namespace),
            config.cluster.clone(),
            overrides,
            state_tx,
        )
        .in_current_span(),
    ));
    (state, initial, watch)
}

/// Runs one task per server stream, feeding its engines; `all` are every stream's engines.
/// `drift_interval`: how often each stream's documents are checked (zero: never).
fn spawn_streams(
    streams: Vec<Stream>,
    all: &[Arc<dyn stream::KindSink>],
    server: &ServerState,
    metrics: &Metrics,
    rest: &infinispan_rest::Client,
    drift_interval: Duration,
    readiness: &Readiness,
) -> Vec<AbortOnDrop<()>> {
    streams
        .into_iter()
        .map(|stream| {
            let others = all
                .iter()
                .filter(|other| !stream.sinks.iter().any(|own| Arc::ptr_eq(own, other)))
                .cloned()
                .collect();
            let source = stream
                .documents
                .filter(|_| !drift_interval.is_zero())
                .map(|documents| {
                    let source: Box<dyn DocumentSource> = Box::new((rest.clone(), documents));
                    let timing =
                        drift::Timing::every(drift_interval).first_at(drift::spread_fraction());
                    (source, timing)
                });
            let run = stream::run(
                stream.name,
                stream.sinks,
                others,
                server.clone(),
                metrics.clone(),
                stream.events,
                stream.owns_epoch.then(|| rest.clone()),
                drift::Watch::new(source),
            );
            // A stream ends only when its CR store is gone: nothing of its kinds is synced
            // any more, so the process is no longer healthy (the kubelet restarts it).
            let (name, readiness) = (stream.name, readiness.clone());
            AbortOnDrop(tokio::spawn(
                async move {
                    run.await;
                    readiness.fail(format!(
                        "the {name} stream stopped: its kinds are not synced"
                    ));
                }
                .in_current_span(),
            ))
        })
        .collect()
}

/// The engine of every kind.
struct Engines {
    caches: Wiring<CacheAdapter>,
    templates: Wiring<TemplateAdapter>,
    schemas: Wiring<SchemaAdapter>,
    counters: Wiring<CounterAdapter>,
    tasks: Wiring<TaskAdapter>,
}

impl Engines {
    /// Wires the engine of every kind, and the server streams that feed them.
    fn wire(
        parts: &Parts,
        rest: &infinispan_rest::Client,
        config: &MemberConfig,
    ) -> (Self, Vec<Stream>) {
        let internal = InternalObjects::default;
        let caches = parts.wire(CacheAdapter::new(rest.clone(), internal()));
        let templates = parts.wire(
            TemplateAdapter::new(rest.clone(), internal()).with_caches(caches.engine.store.clone()),
        );
        let schemas = parts.wire(SchemaAdapter::new(rest.clone(), internal()));
        let created_counters = infinispan_rest::CreatedCounters::default();
        let counters = parts.wire(CounterAdapter::new(
            rest.clone(),
            internal(),
            created_counters.clone(),
        ));
        let tasks = parts.wire(TaskAdapter::new(rest.clone(), internal()));
        let sink = |engine: Arc<dyn stream::KindSink>| engine;
        // The config event stream feeds caches and templates and owns the server's epoch; the
        // other kinds have feeds of their own (infinispan_rest::events::feeds). Bulk work
        // follows design D1's order within each stream; across them, dependencies wait and are
        // re-triggered.
        let streams: Vec<Stream> = vec![
            Stream {
                name: "config",
                sinks: vec![sink(templates.engine.clone()), sink(caches.engine.clone())],
                events: rest.config_events(StreamOptions::default()),
                owns_epoch: true,
                documents: Some(Documents::Configs),
            },
            Stream {
                name: "schemas",
                sinks: vec![sink(schemas.engine.clone())],
                events: rest.schema_feed(StreamOptions::default()),
                owns_epoch: false,
                documents: Some(Documents::Schemas),
            },
            Stream {
                name: "counters",
                sinks: vec![sink(counters.engine.clone())],
                events: rest.counter_feed(
                    config.counter_list_interval,
                    StreamOptions::default(),
                    created_counters,
                ),
                owns_epoch: false,
                documents: None,
            },
            Stream {
                name: "tasks",
                sinks: vec![sink(tasks.engine.clone())],
                events: rest.task_feed(StreamOptions::default()),
                owns_epoch: false,
                documents: Some(Documents::Tasks),
            },
        ];
        let engines = Self {
            caches,
            templates,
            schemas,
            counters,
            tasks,
        };
        (engines, streams)
    }

    /// Runs every engine until `stop` resolves.
    async fn run(self, stop: impl Future<Output = ()> + Clone + Send + Sync + 'static) {
        let Self {
            caches,
            templates,
            schemas,
            counters,
            tasks,
        } = self;
        futures::join!(
            schemas.run(stop.clone(), CONCURRENCY),
            templates.run(stop.clone(), CONCURRENCY),
            counters.run(stop.clone(), CONCURRENCY),
            caches.run(stop.clone(), CONCURRENCY),
            tasks.run(stop, CONCURRENCY),
        );
    }
}

/// What the sync starts with, whether this process leads or runs alone, or is a member of the
/// shared operator.
pub(crate) struct Start<'a> {
    pub config: &'a MemberConfig,
    pub client: kube::Client,
    pub metrics: Metrics,
    pub readiness: Readiness,
    /// Stops the sync (SIGTERM; for a shared member, also leaving or failing).
    pub shutdown: &'a Shutdown,
}

/// One server stream.
struct Stream {
    /// For logs and metrics.
    name: &'static str,
    /// The engines it feeds.
    sinks: Vec<Arc<dyn stream::KindSink>>,
    events: infinispan_rest::ConfigEventStream,
    /// Whether it owns the server's epoch.
    owns_epoch: bool,
    /// The server's current documents of its kinds, for the drift check (none for counters:
    /// their definitions cannot change).
    documents: Option<infinispan_rest::Documents>,
}

/// What every kind's engine is wired with.
struct Parts {
    client: kube::Client,
    settings: Settings,
    server: ServerState,
    metrics: Metrics,
    readiness: Readiness,
    recorder: Recorder,
}

impl Parts {
    fn wire<A: crate::engine::kind::KindAdapter>(&self, adapter: A) -> Wiring<A> {
        Wiring::new(
            self.client.clone(),
            adapter,
            self.settings.clone(),
            self.server.clone(),
            self.metrics.clone(),
            self.readiness.clone(),
            self.recorder.clone(),
        )
    }
}

/// What turning the operator off deletes on the server: the epoch's markers.
struct Retire {
    epoch: crate::engine::epoch::ServerEpoch,
    rest: infinispan_rest::Client,
}

/// How long turning the operator off waits for the server's markers to be known before it
/// drains without deleting them.
const RETIRE_WAIT: Duration = Duration::from_secs(5);

impl Retire {
    /// Before a drain: a cluster whose resources operator is turned off (not one being deleted,
    /// whose server may come back with its state) loses the operator's markers.
    async fn before_drain(&self, cause: cluster::DrainCause) {
        if cause == cluster::DrainCause::Disabled {
            self.epoch.retire(&self.rest, RETIRE_WAIT).await;
        }
    }
}

/// Applies the Infinispan CR's state to the engine: a policy change re-decides every object; a
/// drain starts draining (turned off: after deleting the epoch's markers); enabled again after
/// a drain sends `resume`.
async fn follow_cluster(
    engines: Vec<Arc<dyn stream::KindSink>>,
    mut state: watch::Receiver<cluster::ClusterState>,
    mut last: cluster::ClusterState,
    resume: futures::channel::oneshot::Sender<()>,
    retire: Retire,
) {
    use cluster::ClusterState::{Active, Draining};
    if let Draining(cause) = last {
        retire.before_drain(cause).await;
        for engine in &engines {
            engine.start_draining(cause);
        }
    }
    while state.changed().await.is_ok() {
        let now = *state.borrow_and_update();
        match (last, now) {
            (Active(before), Active(after)) if before != after => {
                tracing::info!(
                    ?before,
                    ?after,
                    "sync policy changed: every object is decided again"
                );
                for engine in &engines {
                    engine.resync().await;
                }
            }
            (Active(_), Draining(cause)) => {
                retire.before_drain(cause).await;
                for engine in &engines {
                    engine.start_draining(cause);
                }
            }
            (Draining(_), Active(_)) => {
                tracing::info!(
                    "the cluster is enabled again: stopping so that a fresh start resumes the sync"
                );
                let _ = resume.send(());
                return;
            }
            _ => {}
        }
        last = now;
    }
}

/// Aborts a task when dropped.
#[derive(Debug)]
pub(crate) struct AbortOnDrop<T>(pub tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// SIGTERM or Ctrl-C (or, for a shared member, its own stop), seen by every part that must
/// stop.
#[derive(Debug)]
pub(crate) struct Shutdown {
    signalled: watch::Receiver<bool>,
    _listener: Option<AbortOnDrop<()>>,
}

impl Shutdown {
    /// Stops when `signalled` becomes true.
    pub(crate) fn on(signalled: watch::Receiver<bool>) -> Self {
        Self {
            signalled,
            _listener: None,
        }
    }

    pub(crate) fn listen() -> Self {
        let (tx, signalled) = watch::channel(false);
        let listener = tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("shutting down");
            tx.send_replace(true);
            // Keep the sender: receivers wait on the value, not on the channel closing.
            std::future::pending::<()>().await;
        });
        Self {
            signalled,
            _listener: Some(AbortOnDrop(listener)),
        }
    }

    /// Whether the signal came.
    pub(crate) fn is_signalled(&self) -> bool {
        *self.signalled.borrow()
    }

    /// Resolves at the signal.
    pub(crate) async fn wait(&self) {
        let mut signalled = self.signalled.clone();
        let _ = signalled.wait_for(|s| *s).await;
    }

    /// A future resolving at the signal, as the engine's graceful shutdown wants it.
    fn signalled(&self) -> impl std::future::Future<Output = ()> + Send + Sync + 'static {
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        let mut signalled = self.signalled.clone();
        tokio::spawn(async move {
            if signalled.wait_for(|s| *s).await.is_ok() {
                let _ = tx.send(());
            }
        });
        rx.map(|_| ())
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_ca_bundle_the_system_roots_are_used() -> Result<(), RunError> {
        assert_eq!(ca_bundle(None)?, None);
        Ok(())
    }

    #[test]
    fn a_missing_or_invalid_ca_bundle_is_an_error_naming_the_file() -> Result<(), anyhow::Error> {
        let dir = std::env::temp_dir().join(format!("ca-bundle-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let not_pem = dir.join("not-a-ca.pem");
        std::fs::write(
            &not_pem,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )?;
        let broken = dir.join("broken.pem");
        std::fs::write(
            &broken,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )?;
        let cases = [
            (dir.join("missing.pem"), "No such file"),
            (dir.clone(), "directory"),
            (not_pem, "no certificate"),
            (broken, "CA bundle"),
        ];
        for (path, why) in cases {
            let Err(error) = ca_bundle(Some(&path)) else {
                anyhow::bail!("{} accepted", path.display());
            };
            let text = error.to_string();
            assert!(matches!(error, RunError::CaBundle { .. }), "{text}");
            assert!(text.contains(&path.display().to_string()), "{text}");
            assert!(text.contains("--ca-bundle"), "{text}");
            assert!(text.contains(why), "{text}");
        }
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
