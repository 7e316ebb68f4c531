//! `cluster-operator run`: the Kubernetes client, the watch scope, the settings of every
//! cluster, one controller per watched namespace (or one for all), shutdown on SIGTERM. The
//! steps, in startup order, are listed on `run_async`, each a function below.

use std::collections::BTreeMap;
use std::sync::Arc;

use common_crds::labels::CLUSTER_OPERATOR_FIELD_MANAGER;
use common_crds::{Batch, Infinispan};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use operator_runtime::events::{Recorder, Reporter};
use tokio::sync::watch;

use crate::backup;
use crate::build::{resources_operator, server};
use crate::cli::{LabelPolicy, RunArgs, SERVER_IMAGES};
use crate::controller::{self, Context, Settings};
use crate::policy_scope::PolicyScope;
use crate::scope::{self, ScopeError, WatchScope};
use crate::servers::{ServerAddresses, Servers};
use operator_runtime::endpoint::{self, Readiness};
use operator_runtime::leadership::{
    self, Candidate, ElectionConfig, ElectionMetrics, Leadership, Loss, Timings, TimingsError,
};

/// The cluster operator's Lease (leader election among its replicas).
pub const LEASE_NAME: &str = "infinispan-cluster-operator";

/// Aborts a task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How long reconciles in flight may take to finish after SIGTERM.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// `run` could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("invalid --log-level {level:?}: {message}")]
    LogLevel { level: String, message: String },
    #[error(transparent)]
    Scope(#[from] ScopeError),
    #[error("cannot reach the Kubernetes API server: {0}")]
    Kube(#[from] kube::Error),
    #[error("the default server version {version} has no image (--server-image {version}=IMAGE)")]
    DefaultVersionWithoutImage { version: String },
    #[error(transparent)]
    ServerAddresses(#[from] crate::servers::AddressError),
    #[error("cannot read the CA bundle {}: {source}", path.display())]
    CaBundle {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Timings(#[from] TimingsError),
    #[error(
        "leader election needs a namespace for its Lease: set --lease-namespace (or run in a pod, or watch a list of namespaces), or --leader-election=false"
    )]
    NoLeaseNamespace,
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("cannot listen on the metrics address {address}: {source}")]
    Listen {
        address: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("lost the leadership ({0}); the work in flight was aborted, exiting")]
    LeadershipLost(#[source] Loss),
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

fn init_logging(args: &RunArgs) -> Result<(), RunError> {
    operator_runtime::logging::init(args.log_format, &args.log_level).map_err(|e| {
        RunError::LogLevel {
            level: e.level,
            message: e.message,
        }
    })
}

/// The controller settings from the command line and the operator's own namespace (the
/// clusters' NetworkPolicies admit its pods to the servers' endpoint).
pub fn settings(args: &RunArgs, own_namespace: Option<&str>) -> Result<Settings, RunError> {
    let mut by_version: BTreeMap<String, String> = SERVER_IMAGES
        .iter()
        .map(|(version, image)| (version.to_string(), image.to_string()))
        .collect();
    by_version.extend(args.server_images.iter().cloned());
    if !by_version.contains_key(&args.default_server_version) {
        return Err(RunError::DefaultVersionWithoutImage {
            version: args.default_server_version.clone(),
        });
    }
    let mut server = server::Settings::new(server::ServerImages {
        default_version: args.default_server_version.clone(),
        by_version,
    });
    server.cluster_domain = args.cluster_domain.clone();
    server.fs_group = args.server_fs_group.0;
    server.image_pull_secrets = args.image_pull_secrets.clone();
    server.operator_namespace = own_namespace.map(str::to_string);
    server.artifacts_image = args.archive_image.clone();
    let mut resources =
        resources_operator::Settings::new(args.resources_operator_image.clone(), "");
    resources.cluster_domain = args.cluster_domain.clone();
    resources.image_pull_secrets = args.image_pull_secrets.clone();
    let mut policy = crate::cr_policy::CrPolicy {
        allowed_image_prefixes: args.allowed_image_prefixes.clone(),
        allowed_artifact_prefixes: args.allowed_artifact_prefixes.clone(),
        allow_artifact_volumes: args.allow_artifact_volumes,
        allow_env_value_from: args.allow_env_value_from,
        allow_jvm_agents: args.allow_jvm_agents,
        allow_unmarked_references: args.allow_unmarked_references,
        ..crate::cr_policy::CrPolicy::default()
    };
    if let Some(prefixes) = &args.allowed_expose_annotation_prefixes {
        policy.allowed_expose_annotation_prefixes = prefixes.clone();
    }
    let certificate_lifetime = args
        .certificate_lifetime
        .max(std::time::Duration::from_secs(60));
    let certificates = crate::controller::referenced::CertificateSettings {
        lifetimes: crate::certificates::Lifetimes {
            certificate: k8s_openapi::jiff::SignedDuration::try_from(certificate_lifetime)
                .unwrap_or(crate::certificates::DEFAULT_CERTIFICATE_LIFETIME),
            ..crate::certificates::Lifetimes::default()
        },
        cluster_domain: args.cluster_domain.clone(),
    };
    Ok(Settings {
        server,
        resources_operator: resources,
        drain_timeout: args.drain_timeout,
        policy,
        certificates,
        graceful_stop_timeout: args.graceful_stop_timeout,
    })
}

/// The namespace the operator's pod runs in, if it runs in one.
fn own_namespace() -> Option<String> {
    std::env::var("POD_NAMESPACE").ok().or_else(|| {
        std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace").ok()
    })
}

/// Runs the controller until SIGTERM or Ctrl-C.
pub fn run(args: RunArgs) -> Result<(), RunError> {
    init_logging(&args)?;
    operator_runtime::memory::limit_arenas(2);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    runtime.block_on(run_async(args))
}

/// The steps of `run`, in order: listen for signals; check the flags and environment
/// ([`check`]); reach the API server ([`connect`]); serve `/metrics` `/healthz` `/readyz`
/// ([`serve_endpoint`]); wait for the Lease ([`elect`]); build the controllers' context
/// ([`context`]); install the label policy ([`label_policy`]) and scope the shared one's binding
/// ([`PolicyScope::seed`]); start the controllers
/// ([`spawn_controllers`]); Ready; run until stopped ([`run_until_stopped`]).
async fn run_async(args: RunArgs) -> Result<(), RunError> {
    // Signals first: a SIGTERM during startup is a clean stop, not a kill.
    let signals = Signals::listen();
    let Checked {
        scope,
        settings,
        servers,
        backup,
        timings,
        lease_namespace,
    } = check(&args)?;
    let client = connect().await?;
    let endpoint = serve_endpoint(args.metrics_address).await?;
    let election = elect(
        &client,
        &args,
        lease_namespace,
        timings,
        &endpoint,
        &signals,
    );
    let Ok(leadership) = election.await else {
        return Ok(()); // stopped as a standby
    };
    let policy_scope = PolicyScope::new(
        client.clone(),
        Some(args.shared_label_policy_binding.clone()).filter(|name| name != "none"),
    );
    let context = context(&client, settings, servers.clone(), policy_scope.clone());
    tracing::info!(?scope, "cluster operator starting");
    label_policy(&client, args.label_policy).await;
    if let Err(error) = policy_scope.seed(&scope).await {
        tracing::warn!(%error, "the shared label policy's binding is left as it is");
    }
    let controllers = spawn_controllers(
        &client,
        &scope,
        &servers,
        &backup,
        &context,
        &signals,
        &endpoint.readiness,
    );
    endpoint.readiness.set_ready();
    run_until_stopped(controllers, leadership, &signals).await
}

/// What `run` takes from its flags and environment, checked before Kubernetes is reached.
struct Checked {
    scope: WatchScope,
    settings: Settings,
    servers: Arc<Servers>,
    backup: backup::Settings,
    timings: Timings,
    /// The Lease's namespace; `None`: leader election is off.
    lease_namespace: Option<String>,
}

/// Checks the flags (and `WATCH_NAMESPACE`, the pod's namespace, the CA bundle file), in this
/// order: watch scope, controller settings, server addresses, CA bundle, election timings, the
/// Lease's namespace.
fn check(args: &RunArgs) -> Result<Checked, RunError> {
    let requested = args
        .watch_namespaces
        .clone()
        .or_else(|| std::env::var("WATCH_NAMESPACE").ok());
    let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    let own_namespace = own_namespace();
    let scope = scope::resolve(requested.as_deref(), in_cluster, own_namespace.as_deref())?;
    let settings = settings(args, own_namespace.as_deref())?;
    let mut servers = Servers::new(
        ServerAddresses::from_entries(args.server_urls.iter().cloned())?,
        args.cluster_domain.clone(),
    );
    if let Some(path) = &args.ca_bundle {
        let pem = std::fs::read(path).map_err(|source| RunError::CaBundle {
            path: path.clone(),
            source,
        })?;
        servers = servers.with_ca_bundle_pem(pem);
    }
    let mut backup = backup::Settings {
        archive_max_bytes: args.archive_max_bytes,
        archive_image: args.archive_image.clone(),
        image_pull_secrets: args.image_pull_secrets.clone(),
        ..backup::Settings::default()
    };
    if let Some(dir) = &args.archive_dir {
        backup.archive_dir = dir.clone();
    }
    let timings = Timings::new(
        args.election.lease_duration,
        args.election.lease_renew_deadline,
        args.election.lease_retry_period,
    )?;
    let lease_namespace = lease_namespace(
        args.election.enabled,
        args.election.lease_namespace.clone(),
        own_namespace,
        &scope,
    )?;
    Ok(Checked {
        scope,
        settings,
        servers: Arc::new(servers),
        backup,
        timings,
        lease_namespace,
    })
}

/// The Lease's namespace (pure): `None` when leader election is off; else `--lease-namespace`,
/// else the operator's own namespace, else the first watched namespace; none of them is an
/// error.
fn lease_namespace(
    enabled: bool,
    flag: Option<String>,
    own_namespace: Option<String>,
    scope: &WatchScope,
) -> Result<Option<String>, RunError> {
    let namespace = flag.or(own_namespace).or_else(|| match scope {
        WatchScope::Namespaces(namespaces) => namespaces.iter().next().cloned(),
        WatchScope::All => None,
    });
    match (enabled, namespace) {
        (false, _) => Ok(None),
        (true, Some(namespace)) => Ok(Some(namespace.trim().to_string())),
        (true, None) => Err(RunError::NoLeaseNamespace),
    }
}

/// The Kubernetes client; fails early and clearly when the API server is not there.
async fn connect() -> Result<kube::Client, RunError> {
    let client = kube::Client::try_default().await?;
    client.apiserver_version().await?;
    Ok(client)
}

/// `/metrics`, `/healthz` and `/readyz`, served from here until dropped.
struct Endpoint {
    election_metrics: ElectionMetrics,
    /// Not ready until the controllers run (a standby: "waiting for the Lease").
    readiness: Readiness,
    _serving: AbortOnDrop<()>,
}

/// Registers the metrics and serves the endpoint on `address`.
async fn serve_endpoint(address: std::net::SocketAddr) -> Result<Endpoint, RunError> {
    let registry =
        prometheus::Registry::new_custom(Some("infinispan_cluster_operator".into()), None)?;
    let election_metrics = ElectionMetrics::register(&registry)?;
    let readiness = Readiness::new("waiting for the Lease");
    let listener = endpoint::bind(address)
        .await
        .map_err(|source| RunError::Listen { address, source })?;
    let serving = AbortOnDrop(tokio::spawn(endpoint::serve(
        listener,
        registry,
        readiness.clone(),
    )));
    Ok(Endpoint {
        election_metrics,
        readiness,
        _serving: serving,
    })
}

/// Stopped (SIGTERM or Ctrl-C) while waiting for the Lease.
struct StoppedAsStandby;

/// Leader election: without a Lease namespace (off) this replica runs alone (`None`); else it
/// waits, Ready as a standby, until it holds the Lease or is stopped.
async fn elect(
    client: &kube::Client,
    args: &RunArgs,
    lease_namespace: Option<String>,
    timings: Timings,
    endpoint: &Endpoint,
    signals: &Signals,
) -> Result<Option<Leadership>, StoppedAsStandby> {
    let Some(namespace) = lease_namespace else {
        tracing::info!("leader election is off (--leader-election=false): run exactly one replica");
        endpoint.election_metrics.leader.set(1);
        return Ok(None);
    };
    let config = ElectionConfig {
        namespace,
        lease_name: LEASE_NAME.to_string(),
        identity: args
            .election
            .identity
            .clone()
            .filter(|i| !i.is_empty())
            .unwrap_or_else(|| leadership::default_identity(std::env::var("POD_NAME").ok())),
        timings,
    };
    tracing::info!(
        namespace = config.namespace,
        lease = LEASE_NAME,
        identity = config.identity,
        "leader election: waiting for the Lease"
    );
    let candidate = Candidate::new(client.clone(), config, endpoint.election_metrics.clone());
    tokio::select! {
        leadership = candidate.acquire(&endpoint.readiness) => Ok(Some(leadership)),
        () = signals.stopped() => {
            tracing::info!("stopped as a standby");
            Err(StoppedAsStandby)
        }
    }
}

/// What every `Infinispan` reconcile shares: the client, the settings, the Event recorder,
/// the per-CR backoff and the way to the servers.
fn context(
    client: &kube::Client,
    settings: Settings,
    servers: Arc<Servers>,
    policy_scope: PolicyScope,
) -> Arc<Context> {
    Arc::new(Context {
        client: client.clone(),
        settings,
        servers,
        policy_scope,
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: CLUSTER_OPERATOR_FIELD_MANAGER.to_string(),
                instance: std::env::var("POD_NAME").ok(),
            },
        ),
        backoff: Arc::default(),
        versions: Default::default(),
    })
}

/// Installs the label policy (`--label-policy=operator`), or says who does.
async fn label_policy(client: &kube::Client, policy: LabelPolicy) {
    match policy {
        LabelPolicy::Operator => {
            crate::label_policy::ensure(client).await;
        }
        LabelPolicy::External => {
            tracing::info!(
                "the label policy is installed by the Helm chart or an administrator (--label-policy=external)"
            );
        }
    }
}

/// The namespaces one controller pair watches each (pure): `None` for all namespaces at once.
fn watched(scope: &WatchScope) -> Vec<Option<&str>> {
    match scope {
        WatchScope::All => vec![None],
        WatchScope::Namespaces(namespaces) => namespaces.iter().map(|n| Some(n.as_str())).collect(),
    }
}

/// The API of `K` in `namespace`, or in all namespaces.
fn api<K>(client: &kube::Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        None => Api::all(client.clone()),
        Some(namespace) => Api::namespaced(client.clone(), namespace),
    }
}

/// Starts, per watched namespace (or once for all), the `Backup`/`Restore` controller and then
/// the `Infinispan` controller; each stops gracefully at the signal.
fn spawn_controllers(
    client: &kube::Client,
    scope: &WatchScope,
    servers: &Arc<Servers>,
    backup_settings: &backup::Settings,
    context: &Arc<Context>,
    signals: &Signals,
    readiness: &Readiness,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut controllers = Vec::new();
    for namespace in watched(scope) {
        let scope = namespace.map_or("every namespace".to_string(), |ns| {
            format!("namespace {ns}")
        });
        controllers.push(supervised(
            format!("the Backup and Restore controllers of {scope}"),
            backup::run(
                client.clone(),
                backup::Apis::new(client, namespace),
                servers.clone(),
                backup_settings.clone(),
                signals.stopping(),
            ),
            signals,
            readiness,
        ));
        let settings = &context.settings;
        controllers.push(supervised(
            format!("the Batch controller of {scope}"),
            crate::batch::run(
                api::<Batch>(client, namespace),
                api::<Infinispan>(client, namespace),
                api::<Job>(client, namespace),
                crate::batch::Context {
                    client: client.clone(),
                    images: settings.server.images.clone(),
                    cluster_domain: settings.server.cluster_domain.clone(),
                    image_pull_secrets: settings.server.image_pull_secrets.clone(),
                    policy: settings.policy.clone(),
                },
                signals.stopping(),
            ),
            signals,
            readiness,
        ));
        let owner = client.clone();
        let ns = namespace.map(str::to_string);
        controllers.push(supervised(
            format!("the Infinispan controller of {scope}"),
            controller::run(
                api::<Infinispan>(client, namespace),
                move || {
                    (
                        api::<StatefulSet>(&owner, ns.as_deref()),
                        api::<Deployment>(&owner, ns.as_deref()),
                        api::<Pod>(&owner, ns.as_deref()),
                    )
                },
                context.clone(),
                signals.stopping(),
            ),
            signals,
            readiness,
        ));
    }
    controllers
}

/// Runs a controller; should it end before the signal, `/healthz` fails with `what` (the kubelet
/// restarts the process: its CRs would not be reconciled any more).
fn supervised(
    what: String,
    controller: impl Future<Output = ()> + Send + 'static,
    signals: &Signals,
    readiness: &Readiness,
) -> tokio::task::JoinHandle<()> {
    let (stopped, readiness) = (signals.stopped.clone(), readiness.clone());
    tokio::spawn(async move {
        controller.await;
        if !*stopped.borrow() {
            readiness.fail(format!("{what} stopped"));
        }
    })
}

/// Runs until the signal, or until the Lease is lost: then every controller is aborted at once
/// (no write after the loss) and the loss is the error. After the signal, reconciles in flight
/// get [`SHUTDOWN_GRACE`] to finish (a controller still on its first list does not hold the
/// exit); then the Lease is released.
async fn run_until_stopped(
    controllers: Vec<tokio::task::JoinHandle<()>>,
    leadership: Option<Leadership>,
    signals: &Signals,
) -> Result<(), RunError> {
    let aborts: Vec<_> = controllers.iter().map(|c| c.abort_handle()).collect();
    let mut leadership = leadership;
    if let Some(held) = leadership.as_mut() {
        tokio::select! {
            () = signals.stopped() => {}
            loss = held.hold() => {
                // Not ours any more: stop every write at once.
                aborts.iter().for_each(|a| a.abort());
                return Err(RunError::LeadershipLost(loss));
            }
        }
    } else {
        signals.stopped().await;
    }
    let finished = futures::future::join_all(controllers);
    if tokio::time::timeout(SHUTDOWN_GRACE, finished)
        .await
        .is_err()
    {
        tracing::warn!("reconciles did not finish within {SHUTDOWN_GRACE:?}; stopping them");
        aborts.iter().for_each(|a| a.abort());
    }
    if let Some(held) = leadership {
        held.release().await;
    }
    Ok(())
}

/// SIGTERM or Ctrl-C, listened to from the start of `run`.
struct Signals {
    stopped: watch::Receiver<bool>,
}

impl Signals {
    /// Registers the handlers now (synchronously); `stopped` resolves from the first signal on.
    fn listen() -> Self {
        let (stop, stopped) = watch::channel(false);
        #[cfg(unix)]
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::spawn(async move {
            #[cfg(unix)]
            match term {
                Some(mut term) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = tokio::signal::ctrl_c() => {}
                    }
                }
                None => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
            #[cfg(not(unix))]
            let _ = tokio::signal::ctrl_c().await;
            tracing::info!("shutting down");
            stop.send_replace(true);
        });
        Self { stopped }
    }

    /// Waits for the signal.
    async fn stopped(&self) {
        let mut stopped = self.stopped.clone();
        let _ = stopped.wait_for(|s| *s).await;
    }

    /// A future of its own resolving at the signal, as a controller's graceful shutdown wants
    /// it.
    fn stopping(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let mut stopped = self.stopped.clone();
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn namespaces(names: &[&str]) -> WatchScope {
        WatchScope::Namespaces(names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>())
    }

    #[test]
    fn the_lease_namespace_is_the_flag_else_the_own_else_the_first_watched() {
        let flag = || Some(" flag ".to_string());
        let own = || Some("own".to_string());
        let watched = namespaces(&["b", "a"]);
        let lease = |enabled, flag, own, scope: &WatchScope| {
            lease_namespace(enabled, flag, own, scope).map_err(|e| e.to_string())
        };
        assert_eq!(
            lease(true, flag(), own(), &watched),
            Ok(Some("flag".into()))
        );
        assert_eq!(lease(true, None, own(), &watched), Ok(Some("own".into())));
        assert_eq!(lease(true, None, None, &watched), Ok(Some("a".into())));
        assert_eq!(lease(false, flag(), own(), &watched), Ok(None));
        assert_eq!(lease(false, None, None, &WatchScope::All), Ok(None));
        assert!(matches!(
            lease_namespace(true, None, None, &WatchScope::All),
            Err(RunError::NoLeaseNamespace)
        ));
    }

    #[test]
    fn one_controller_pair_per_watched_namespace_or_one_for_all() {
        assert_eq!(watched(&WatchScope::All), vec![None]);
        assert_eq!(
            watched(&namespaces(&["b", "a"])),
            vec![Some("a"), Some("b")]
        );
    }
}
