//! `resources-operator run`: wires the pieces for one Infinispan cluster.
//!
//! Steps: logging; Kubernetes client (KUBECONFIG or in-cluster); the Infinispan CR (sync
//! defaults, owner of mirror CRs); the credentials Secret; the REST client; the metrics
//! endpoint; the cache engine (CR watch + controller) and the config event stream feeding it;
//! graceful shutdown on SIGTERM or Ctrl-C.

use std::sync::Arc;

use common_crds::Infinispan;
use futures::FutureExt;
use infinispan_rest::{ClientConfig, Credentials, InternalObjects, StreamOptions};
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::events::{Recorder, Reporter};
use kube::{Api, Resource};

use crate::cli::{LogFormat, RunArgs};
use crate::engine::controller::{Settings, Wiring};
use crate::engine::stream;
use crate::kinds::cache::CacheAdapter;
use crate::metrics::{self, Metrics, Readiness};

/// Name of the controller in Kubernetes Events.
pub const REPORTER: &str = "infinispan-resources-operator";

/// Reconciles in flight at once (per kind).
const CONCURRENCY: u16 = 16;

/// Why `run` could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("invalid --log-level {level:?}: {message}")]
    LogLevel { level: String, message: String },
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
    #[error("cannot build the Infinispan REST client: {0}")]
    Rest(#[from] infinispan_rest::Error),
    #[error("cannot set up metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("cannot listen on the metrics address: {0}")]
    Listen(#[source] std::io::Error),
}

fn init_logging(args: &RunArgs) -> Result<(), RunError> {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log_level).map_err(|e| {
        RunError::LogLevel {
            level: args.log_level.clone(),
            message: e.to_string(),
        }
    })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // A second initialisation (tests) is harmless: keep the first.
    let _ = match args.log_format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
    Ok(())
}

async fn credentials(client: &kube::Client, args: &RunArgs) -> Result<Credentials, RunError> {
    let error = |message: String| RunError::Credentials {
        namespace: args.namespace.clone(),
        name: args.credentials_secret.clone(),
        message,
    };
    let secret = Api::<Secret>::namespaced(client.clone(), &args.namespace)
        .get(&args.credentials_secret)
        .await
        .map_err(|e| error(e.to_string()))?;
    let data = secret.data.unwrap_or_default();
    let key = |k: &str| -> Result<String, RunError> {
        let bytes = data.get(k).ok_or_else(|| error(format!("no key {k:?}")))?;
        String::from_utf8(bytes.0.clone()).map_err(|_| error(format!("key {k:?} is not UTF-8")))
    };
    Ok(Credentials::new(key("username")?, key("password")?))
}

/// Runs until SIGTERM or Ctrl-C.
pub async fn run(args: RunArgs) -> Result<(), RunError> {
    init_logging(&args)?;
    let client = kube::Client::try_default()
        .await
        .map_err(RunError::Kubernetes)?;

    let cluster = Api::<Infinispan>::namespaced(client.clone(), &args.namespace)
        .get(&args.cluster)
        .await
        .map_err(|source| RunError::Cluster {
            namespace: args.namespace.clone(),
            name: args.cluster.clone(),
            source,
        })?;
    let spec = &cluster.spec.resources_operator;
    let mode = args.sync_mode.map(Into::into).unwrap_or(spec.sync_mode);
    let winner = args
        .conflict_winner
        .map(Into::into)
        .unwrap_or(spec.conflict_winner);
    let owner = cluster
        .controller_owner_ref(&())
        .ok_or_else(|| RunError::ClusterIdentity {
            namespace: args.namespace.clone(),
            name: args.cluster.clone(),
        })?;

    let rest = infinispan_rest::Client::new(
        ClientConfig::new(args.infinispan_url.clone())
            .with_credentials(credentials(&client, &args).await?),
    )?;

    let metrics = Metrics::new()?;
    let readiness = Readiness::default();
    let listener = metrics::bind(args.metrics_address)
        .await
        .map_err(RunError::Listen)?;
    let endpoint = tokio::spawn(metrics::serve(listener, metrics.clone(), readiness.clone()));

    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: REPORTER.to_string(),
            instance: std::env::var("POD_NAME").ok(),
        },
    );
    let settings = Settings {
        cluster: args.cluster.clone(),
        namespace: args.namespace.clone(),
        mode,
        winner,
        owner,
    };
    tracing::info!(
        cluster = args.cluster,
        namespace = args.namespace,
        url = args.infinispan_url,
        ?mode,
        ?winner,
        "starting; leader election is not implemented yet: run one replica"
    );

    let caches = Wiring::new(
        client,
        CacheAdapter::new(rest.clone(), InternalObjects::default()),
        settings,
        metrics,
        readiness,
        recorder,
    );
    let events = rest.config_events(StreamOptions::default());
    let stream_task = tokio::spawn(stream::run(Arc::clone(&caches.engine), events));

    let (stop_tx, stop_rx) = futures::channel::oneshot::channel::<()>();
    let signals = tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down");
        let _ = stop_tx.send(());
    });
    caches.run(stop_rx.map(|_| ()), CONCURRENCY).await;

    stream_task.abort();
    endpoint.abort();
    signals.abort();
    tracing::info!("stopped");
    Ok(())
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
