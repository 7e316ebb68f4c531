//! The resources operator: keeps `Cache`, `Template`, `Counter`, `Schema` and `Task` CRs of one
//! Infinispan cluster in sync with that cluster's server, in both directions.
//!
//! - [`cli`]: the command line (`run`).
//! - [`run`]: wiring for one cluster: clients, metrics endpoint, engines, event stream, shutdown.
//! - [`shared`]: `run-shared`, one process for every cluster of a namespace that chooses it, each
//!   member cluster with a sync of its own ([`member`]: what one cluster's sync needs).
//! - [`cluster`]: the Infinispan CR, watched: sync policy and drain (E5).
//! - [`engine`]: the generic sync engine (decision, queue, event stream, status).
//! - [`kinds`]: the kind adapters (where a cache becomes a CR and back: [`kinds::cache`]).
//! - [`metrics`]: the sync's Prometheus metrics.
//!
//! Leader election among replicas (the Lease `<cluster>-resources-operator`; a standby is Ready
//! and idle), the `/metrics`, `/healthz`, `/readyz` endpoint and logging come from
//! `operator_runtime`, shared with the cluster operator.

pub mod cli;
pub mod cluster;
pub mod engine;
pub mod kinds;
pub mod member;
pub mod metrics;
pub mod run;
pub mod shared;

pub use cli::{Cli, Command};

/// malloc arenas of the process (`operator_runtime::memory::limit_arenas`): its threads mostly
/// wait on the network, and each further arena keeps its own free memory.
pub const MALLOC_ARENAS: u16 = 1;

/// Runs the command the user asked for.
pub async fn execute(cli: Cli) -> Result<(), run::RunError> {
    match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::RunShared(args) => shared::run_shared(args).await,
    }
}
