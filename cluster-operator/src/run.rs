//! `cluster-operator run`: the Kubernetes client, the watch scope, the settings of every
//! cluster, one controller per watched namespace (or one for all), shutdown on SIGTERM.

use std::collections::BTreeMap;
use std::sync::Arc;

use common_crds::Infinispan;
use common_crds::labels::CLUSTER_OPERATOR_FIELD_MANAGER;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use operator_runtime::events::{Recorder, Reporter};
use tokio::sync::watch;

use crate::backup;
use crate::build::{resources_operator, server};
use crate::cli::{LabelPolicy, RunArgs, SERVER_IMAGES};
use crate::controller::{self, Context, Settings};
use crate::scope::{self, ScopeError, WatchScope};
use crate::servers::{ServerAddresses, Servers};
use operator_runtime::endpoint::{self, Readiness};
use operator_runtime::leadership::{
    self, Candidate, ElectionConfig, ElectionMetrics, Loss, Timings, TimingsError,
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

/// The controller settings from the command line.
pub fn settings(args: &RunArgs) -> Result<Settings, RunError> {
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
    let mut resources =
        resources_operator::Settings::new(args.resources_operator_image.clone(), "");
    resources.cluster_domain = args.cluster_domain.clone();
    resources.image_pull_secrets = args.image_pull_secrets.clone();
    Ok(Settings {
        server,
        resources_operator: resources,
        drain_timeout: args.drain_timeout,
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

async fn run_async(args: RunArgs) -> Result<(), RunError> {
    // Signals first: a SIGTERM during startup is a clean stop, not a kill.
    let (stop, stopped) = watch::channel(false);
    let signals = Signals::listen(stop);
    let requested = args
        .watch_namespaces
        .clone()
        .or_else(|| std::env::var("WATCH_NAMESPACE").ok());
    let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    let scope = scope::resolve(requested.as_deref(), in_cluster, own_namespace().as_deref())?;
    let settings = settings(&args)?;
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
    let servers = Arc::new(servers);
    let mut backup_settings = backup::Settings::default();
    if let Some(dir) = &args.archive_dir {
        backup_settings.archive_dir = dir.clone();
    }
    let timings = Timings::new(
        args.election.lease_duration,
        args.election.lease_renew_deadline,
        args.election.lease_retry_period,
    )?;
    let lease_namespace = args
        .election
        .lease_namespace
        .clone()
        .or_else(own_namespace)
        .or_else(|| match &scope {
            WatchScope::Namespaces(namespaces) => namespaces.iter().next().cloned(),
            WatchScope::All => None,
        });
    let lease_namespace = match (args.election.enabled, lease_namespace) {
        (false, _) => None,
        (true, Some(namespace)) => Some(namespace.trim().to_string()),
        (true, None) => return Err(RunError::NoLeaseNamespace),
    };
    let client = kube::Client::try_default().await?;
    // Fail early and clearly when the API server is not there.
    client.apiserver_version().await?;

    let registry =
        prometheus::Registry::new_custom(Some("infinispan_cluster_operator".into()), None)?;
    let election_metrics = ElectionMetrics::register(&registry)?;
    let readiness = Readiness::new("waiting for the Lease");
    let listener = endpoint::bind(args.metrics_address)
        .await
        .map_err(|source| RunError::Listen {
            address: args.metrics_address,
            source,
        })?;
    let _endpoint = AbortOnDrop(tokio::spawn(endpoint::serve(
        listener,
        registry,
        readiness.clone(),
    )));

    let mut leadership = match lease_namespace {
        None => {
            tracing::info!(
                "leader election is off (--leader-election=false): run exactly one replica"
            );
            election_metrics.leader.set(1);
            None
        }
        Some(namespace) => {
            let config = ElectionConfig {
                namespace,
                lease_name: LEASE_NAME.to_string(),
                identity: args
                    .election
                    .identity
                    .clone()
                    .filter(|i| !i.is_empty())
                    .unwrap_or_else(|| {
                        leadership::default_identity(std::env::var("POD_NAME").ok())
                    }),
                timings,
            };
            tracing::info!(
                namespace = config.namespace,
                lease = LEASE_NAME,
                identity = config.identity,
                "leader election: waiting for the Lease"
            );
            let candidate = Candidate::new(client.clone(), config, election_metrics);
            tokio::select! {
                leadership = candidate.acquire(&readiness) => Some(leadership),
                () = signals.stopped() => {
                    tracing::info!("stopped as a standby");
                    return Ok(());
                }
            }
        }
    };

    let context = Arc::new(Context {
        client: client.clone(),
        settings,
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: CLUSTER_OPERATOR_FIELD_MANAGER.to_string(),
                instance: std::env::var("POD_NAME").ok(),
            },
        ),
        backoff: Arc::default(),
    });
    tracing::info!(?scope, "cluster operator starting");
    match args.label_policy {
        LabelPolicy::Operator => {
            crate::label_policy::ensure(&client).await;
        }
        LabelPolicy::External => {
            tracing::info!(
                "the label policy is installed by the Helm chart or an administrator (--label-policy=external)"
            );
        }
    }

    let shutdown = move || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        }
    };
    let mut controllers = Vec::new();
    match &scope {
        WatchScope::All => {
            controllers.push(tokio::spawn(backup::run(
                client.clone(),
                Api::all(client.clone()),
                Api::all(client.clone()),
                Api::all(client.clone()),
                servers.clone(),
                backup_settings.clone(),
                shutdown(),
            )));
            let client = client.clone();
            controllers.push(tokio::spawn(controller::run(
                Api::<Infinispan>::all(client.clone()),
                move || {
                    (
                        Api::<StatefulSet>::all(client.clone()),
                        Api::<Deployment>::all(client.clone()),
                        Api::<Pod>::all(client.clone()),
                    )
                },
                context.clone(),
                shutdown(),
            )));
        }
        WatchScope::Namespaces(namespaces) => {
            for namespace in namespaces {
                controllers.push(tokio::spawn(backup::run(
                    client.clone(),
                    Api::namespaced(client.clone(), namespace),
                    Api::namespaced(client.clone(), namespace),
                    Api::namespaced(client.clone(), namespace),
                    servers.clone(),
                    backup_settings.clone(),
                    shutdown(),
                )));
                let client = client.clone();
                let ns = namespace.clone();
                controllers.push(tokio::spawn(controller::run(
                    Api::<Infinispan>::namespaced(client.clone(), namespace),
                    move || {
                        (
                            Api::<StatefulSet>::namespaced(client.clone(), &ns),
                            Api::<Deployment>::namespaced(client.clone(), &ns),
                            Api::<Pod>::namespaced(client.clone(), &ns),
                        )
                    },
                    context.clone(),
                    shutdown(),
                )));
            }
        }
    }
    readiness.set_ready();
    let aborts: Vec<_> = controllers.iter().map(|c| c.abort_handle()).collect();
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
    // Reconciles in flight finish; a controller still starting up (its first list) does not
    // hold the exit.
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
    /// Registers the handlers now (synchronously) and sends `true` on `stop` at the first
    /// signal.
    fn listen(stop: watch::Sender<bool>) -> Self {
        let stopped = stop.subscribe();
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
}
