//! The command line: `resources-operator run ...`. Every flag is also an environment variable
//! prefixed `RESOURCES_OPERATOR_` (what the Helm chart and the cluster operator set).

use std::net::SocketAddr;

use clap::{Args, Parser, Subcommand, ValueEnum};
use common_crds::infinispan::{ConflictWinner, SyncMode};

/// Command line of the `resources-operator` binary.
#[derive(Debug, Parser)]
#[command(
    name = "resources-operator",
    version,
    about = "Keeps Infinispan resource CRs and one cluster's server in sync"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the sync for one Infinispan cluster (so far for Cache CRs).
    ///
    /// Kubernetes credentials come from KUBECONFIG or the in-cluster service account. Leader
    /// election is not implemented yet: run exactly one replica per cluster.
    Run(RunArgs),
}

/// Options of `run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Name of the `Infinispan` CR whose resources this operator syncs.
    #[arg(long, env = "RESOURCES_OPERATOR_CLUSTER")]
    pub cluster: String,

    /// Namespace of the Infinispan CR and of the resource CRs.
    #[arg(long, env = "RESOURCES_OPERATOR_NAMESPACE")]
    pub namespace: String,

    /// Base URL of the cluster's REST endpoint, e.g. http://demo.ns.svc.cluster.local:11222.
    #[arg(long, env = "RESOURCES_OPERATOR_INFINISPAN_URL")]
    pub infinispan_url: String,

    /// Secret (same namespace) with the keys `username` and `password` of an admin user.
    #[arg(long, env = "RESOURCES_OPERATOR_CREDENTIALS_SECRET")]
    pub credentials_secret: String,

    /// Direction of sync; default: the Infinispan CR's spec.resourcesOperator.syncMode.
    #[arg(long, env = "RESOURCES_OPERATOR_SYNC_MODE", value_enum)]
    pub sync_mode: Option<SyncModeArg>,

    /// Which side wins a conflict; default: the Infinispan CR's
    /// spec.resourcesOperator.conflictWinner.
    #[arg(long, env = "RESOURCES_OPERATOR_CONFLICT_WINNER", value_enum)]
    pub conflict_winner: Option<ConflictWinnerArg>,

    /// Log format.
    #[arg(long, env = "RESOURCES_OPERATOR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log level or filter directives (tracing EnvFilter syntax), e.g. `info` or
    /// `resources_operator=debug,info`.
    #[arg(long, env = "RESOURCES_OPERATOR_LOG_LEVEL", default_value = "info")]
    pub log_level: String,

    /// Address of the HTTP endpoint serving /metrics, /healthz and /readyz.
    #[arg(
        long,
        env = "RESOURCES_OPERATOR_METRICS_ADDRESS",
        default_value = "0.0.0.0:8080"
    )]
    pub metrics_address: SocketAddr,
}

/// `--sync-mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SyncModeArg {
    #[value(name = "Bidirectional")]
    Bidirectional,
    #[value(name = "ToServer")]
    ToServer,
    #[value(name = "FromServer")]
    FromServer,
}

impl From<SyncModeArg> for SyncMode {
    fn from(value: SyncModeArg) -> Self {
        match value {
            SyncModeArg::Bidirectional => SyncMode::Bidirectional,
            SyncModeArg::ToServer => SyncMode::ToServer,
            SyncModeArg::FromServer => SyncMode::FromServer,
        }
    }
}

/// `--conflict-winner` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConflictWinnerArg {
    #[value(name = "Kubernetes")]
    Kubernetes,
    #[value(name = "Server")]
    Server,
}

impl From<ConflictWinnerArg> for ConflictWinner {
    fn from(value: ConflictWinnerArg) -> Self {
        match value {
            ConflictWinnerArg::Kubernetes => ConflictWinner::Kubernetes,
            ConflictWinnerArg::Server => ConflictWinner::Server,
        }
    }
}

/// `--log-format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_its_flags() {
        let cli = Cli::try_parse_from([
            "resources-operator",
            "run",
            "--cluster",
            "demo",
            "--namespace",
            "ns",
            "--infinispan-url",
            "http://127.0.0.1:11222",
            "--credentials-secret",
            "creds",
            "--sync-mode",
            "ToServer",
            "--log-format",
            "json",
            "--metrics-address",
            "127.0.0.1:9000",
        ]);
        let Ok(Cli {
            command: Command::Run(args),
        }) = cli
        else {
            panic!("does not parse: {cli:?}");
        };
        assert_eq!(args.cluster, "demo");
        assert_eq!(args.sync_mode, Some(SyncModeArg::ToServer));
        assert_eq!(args.conflict_winner, None);
        assert_eq!(args.log_format, LogFormat::Json);
    }

    #[test]
    fn leader_election_is_said_to_be_missing() {
        let help = Cli::command()
            .find_subcommand_mut("run")
            .map(|c| c.render_long_help().to_string())
            .unwrap_or_default();
        assert!(
            help.contains("Leader election is not implemented yet"),
            "{help}"
        );
    }
}
