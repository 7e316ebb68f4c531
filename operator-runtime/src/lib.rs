//! What every operator process of this workspace runs with, whatever it operates: the cluster
//! operator and the resources operator get the same leader election, health and metrics
//! endpoint and logging from here.
//!
//! - [`leadership`]: leader election among an operator's replicas through a Lease
//!   (coordination.k8s.io/v1) of the operator's choosing: the pure step [`leadership::decide`],
//!   a [`leadership::Candidate`] that waits for the Lease, the [`leadership::Leadership`] it
//!   becomes (renews; returns when lost; released on shutdown), checked
//!   [`leadership::Timings`], [`leadership::ElectionMetrics`].
//! - [`endpoint`]: `/metrics`, `/healthz`, `/readyz` over HTTP for one Prometheus registry
//!   and one [`endpoint::Readiness`].
//! - [`logging`]: the process's `tracing` subscriber (text or JSON on stderr, a level or
//!   filter directives).
//! - [`duration`]: durations on the command line (`15`, `500ms`, `1m30s`).
//! - [`mod@election_args`]: the leader-election flags of `run` ([`election_args!`]) and what they
//!   resolve to.
//! - [`memory`]: malloc kept to few arenas, and free heap memory given back after bursts.
//! - [`events`]: Kubernetes Events with series, in bounded memory (kube-runtime's `Recorder`
//!   keeps every Event of the last six minutes).
//!
//! Decisions:
//! - **Parameters, not globals.** Nothing here knows an operator: the Lease's namespace, name
//!   and holder identity, the timings, the registry (and so the metric prefix) and what
//!   `/readyz` says while waiting all come from the caller. Two operators (or two elections)
//!   never share a Lease or a registry; a registry takes [`leadership::ElectionMetrics`] once.
//! - **Leader election is our own, client-go's protocol** (kube-rs has none): optimistic
//!   concurrency on the Lease's resourceVersion, expiry judged on the local monotonic clock
//!   (never by comparing wall clocks across nodes), the leader gives up at its renew deadline,
//!   before anyone may take over. Losing the Lease is final for the process: the caller drops
//!   its work and exits, a fresh process starts as a standby. The decision is a pure function,
//!   unit-tested; the module documentation has the details.
//! - **Readiness never depends on leadership**: a standby is Ready once it has seen another
//!   holder; a leader is Ready when the operator says so (as a whole, or once each expected
//!   part is).
//! - **The endpoint is a minimal HTTP/1.1 responder** on a Tokio listener, not a web framework:
//!   GET of three paths is all Kubernetes probes and Prometheus need, and binaries stay small.
//!   The Prometheus crate runs without its process collector and protobuf.
//! - **Flags: the shared ones declared once, named per operator.** clap's environment variable
//!   names are literal, and each operator has its own prefix (`RESOURCES_OPERATOR_`,
//!   `CLUSTER_OPERATOR_`): the leader-election flags are stamped per operator by
//!   [`election_args!`] (the operator gives the prefix and the help texts); the other flags are
//!   the operator's own. The values they parse into ([`logging::LogFormat`],
//!   [`duration::parse_duration`], [`leadership::Timings`] whose errors name the conventional
//!   `--lease-*` flags, [`election_args::Election`]) are shared.
//! - Not here: what an operator measures (its own metrics in its own registry), its shutdown
//!   and its work.
//!
//! A second operator, in short:
//!
//! ```no_run
//! use operator_runtime::endpoint::{self, Readiness};
//! use operator_runtime::leadership::{self, Candidate, ElectionConfig, ElectionMetrics, Timings};
//! use operator_runtime::logging::{self, LogFormat};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! logging::init(LogFormat::Json, "info")?;
//! let registry = prometheus::Registry::new_custom(Some("my_operator".into()), None)?;
//! let election_metrics = ElectionMetrics::register(&registry)?;
//! let readiness = Readiness::new("waiting for the Lease or the first list");
//! let listener = endpoint::bind("0.0.0.0:8080".parse()?).await?;
//! let _endpoint = tokio::spawn(endpoint::serve(listener, registry, readiness.clone()));
//!
//! let client = kube::Client::try_default().await?;
//! let config = ElectionConfig {
//!     namespace: "operators".into(),
//!     lease_name: "my-operator".into(),
//!     identity: leadership::default_identity(std::env::var("POD_NAME").ok()),
//!     timings: Timings::default(),
//! };
//! let mut leadership = Candidate::new(client, config, election_metrics)
//!     .acquire(&readiness)
//!     .await;
//! readiness.set_ready();
//! tokio::select! {
//!     () = std::future::pending::<()>() => {} // the operator's work, until SIGTERM
//!     loss = leadership.hold() => return Err(loss.into()), // stop at once, exit non-zero
//! }
//! leadership.release().await;
//! # Ok(())
//! # }
//! ```

pub mod duration;
pub mod election_args;
pub mod endpoint;
pub mod events;
pub mod leadership;
pub mod logging;
pub mod memory;
