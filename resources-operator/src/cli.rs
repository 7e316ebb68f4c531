//! The command line: `resources-operator run ...`. Every flag is also an environment variable
//! prefixed `RESOURCES_OPERATOR_` (what the Helm chart and the cluster operator set).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::TypedValueParser as _;
use clap::{Args, Parser, Subcommand, ValueEnum};
use common_crds::infinispan::{ConflictWinner, SyncMode};

use operator_runtime::duration::parse_duration;
// What `ElectionArgs::election` resolves to.
pub use operator_runtime::election_args::Election;
pub use operator_runtime::leadership::Timings;
pub use operator_runtime::logging::LogFormat;

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
    /// Run the sync for one Infinispan cluster (so far for Cache and Template CRs).
    ///
    /// Kubernetes credentials come from KUBECONFIG or the in-cluster service account.
    ///
    /// Leader election is on by default: replicas for one cluster share the Lease
    /// `<cluster>-resources-operator` in the namespace; the holder syncs, the others are Ready
    /// standbys that write nothing, and one takes over when the holder stops (SIGTERM releases
    /// the Lease) or dies (after the lease duration). A leader that loses the Lease stops all
    /// work at once and exits with a non-zero status. `--leader-election=false` runs without a
    /// Lease: then run exactly one replica per cluster.
    Run(RunArgs),

    /// Run the sync for every cluster of a namespace that the shared operator's ConfigMap
    /// lists (`spec.resourcesOperator.deployment: SharedInNamespace`; the cluster operator
    /// writes the ConfigMap).
    ///
    /// Each member cluster gets a sync of its own (streams, engines, metrics labelled
    /// `cluster`), started when its key appears, restarted when its value changes, stopped when
    /// it goes, without a restart of the process; one member failing is retried with backoff and
    /// delays no other. Each member holds its cluster's Lease `<cluster>-resources-operator`
    /// while it syncs, as a per-cluster operator does: a cluster moving between a per-cluster
    /// operator and the shared one is never synced by both.
    RunShared(SharedArgs),
}

/// Options of `run-shared`.
#[derive(Debug, Clone, Args)]
pub struct SharedArgs {
    /// Namespace of the member clusters, of their resource CRs and of the ConfigMap.
    #[arg(long, env = "RESOURCES_OPERATOR_NAMESPACE")]
    pub namespace: String,

    /// The ConfigMap listing the members: one key per cluster, a JSON member entry as value.
    #[arg(
        long,
        env = "RESOURCES_OPERATOR_MEMBERS_CONFIG",
        default_value = common_crds::shared::SHARED_NAME
    )]
    pub members_config: String,

    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub election: ElectionArgs,
}

/// Options of both `run` and `run-shared`: logging, the metrics endpoint, and the sync's
/// settings (for `run-shared`, each member's unless its entry says otherwise).
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
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

    /// How often the counters are listed (counters have no events a sync can rely on, design
    /// R5): a new or removed counter on the server reaches Kubernetes within this time. One
    /// list request per interval, plus one read per new counter.
    #[arg(
        long,
        env = "RESOURCES_OPERATOR_COUNTER_LIST_INTERVAL",
        value_parser = parse_duration,
        default_value = "10s"
    )]
    pub counter_list_interval: Duration,

    /// How often the server's documents are compared with what its events said (drift: a
    /// change stored without an event, or an update a stream missed); `0s` turns the check off.
    /// One request per interval for all caches and templates, one for schemas, one for tasks.
    #[arg(
        long,
        env = "RESOURCES_OPERATOR_DRIFT_CHECK_INTERVAL",
        value_parser = parse_duration,
        default_value = "60s"
    )]
    pub drift_check_interval: Duration,

    /// Writes to the server (creates, updates, deletes, of every kind) in flight at once, at
    /// most: objects that do not depend on each other are pushed concurrently (bulk order and
    /// dependencies kept). Fewer while the server answers with timeouts, 5xx or 429 (the window
    /// halves, then grows back); `1` writes one object at a time. 1 to 64.
    #[arg(
        long,
        env = "RESOURCES_OPERATOR_SERVER_WRITE_CONCURRENCY",
        default_value_t = crate::engine::server_writes::DEFAULT_CONCURRENCY,
        value_parser = clap::value_parser!(u16)
            .range(1..=crate::engine::server_writes::MAX_CONCURRENCY as i64)
            .map(usize::from)
    )]
    pub server_write_concurrency: usize,
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
    // The text is the `--help` text: the URL stays bare, as the user reads it.
    #[allow(rustdoc::bare_urls)]
    #[arg(long, env = "RESOURCES_OPERATOR_INFINISPAN_URL")]
    pub infinispan_url: String,

    /// Secret (same namespace) with the keys `username` and `password` of an admin user.
    /// Absent: no credentials are sent (a server without authentication, or one that
    /// authenticates the client certificate of `--client-certificate`).
    #[arg(long, env = "RESOURCES_OPERATOR_CREDENTIALS_SECRET")]
    pub credentials_secret: Option<String>,

    /// PEM file with the CA certificates to trust for an https `--infinispan-url` (one or
    /// more; e.g. the private CA that signed the server's certificate), instead of the system's
    /// roots. Read once at startup: a missing or invalid file stops the operator.
    #[arg(long, env = "RESOURCES_OPERATOR_CA_BUNDLE", value_name = "FILE")]
    pub ca_bundle: Option<PathBuf>,

    /// The host name to verify the server's certificate against, instead of the
    /// `--infinispan-url` host: when the URL names another Service of the same pods than the
    /// one the certificate is issued for (the cluster operator gives the operators' Service in
    /// the URL, and the client Service's name here).
    #[arg(long, env = "RESOURCES_OPERATOR_TLS_SERVER_NAME", value_name = "HOST")]
    pub tls_server_name: Option<String>,

    /// PEM file with the certificate chain to present when the server asks clients for a
    /// certificate (`clientCert: Validate`), with its key in `--client-key`. Read once at
    /// startup: a missing or invalid file stops the operator.
    #[arg(
        long,
        env = "RESOURCES_OPERATOR_CLIENT_CERTIFICATE",
        value_name = "FILE",
        requires = "client_key"
    )]
    pub client_certificate: Option<PathBuf>,

    /// PEM file with the private key of `--client-certificate`.
    #[arg(
        long,
        env = "RESOURCES_OPERATOR_CLIENT_KEY",
        value_name = "FILE",
        requires = "client_certificate"
    )]
    pub client_key: Option<PathBuf>,

    /// Direction of sync; default: the Infinispan CR's spec.resourcesOperator.syncMode.
    #[arg(long, env = "RESOURCES_OPERATOR_SYNC_MODE", value_enum)]
    pub sync_mode: Option<SyncModeArg>,

    /// Which side wins a conflict; default: the Infinispan CR's
    /// spec.resourcesOperator.conflictWinner.
    #[arg(long, env = "RESOURCES_OPERATOR_CONFLICT_WINNER", value_enum)]
    pub conflict_winner: Option<ConflictWinnerArg>,

    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub election: ElectionArgs,
}

operator_runtime::election_args! {
    /// Leader-election options of `run`.
    pub struct ElectionArgs {
        env_prefix: "RESOURCES_OPERATOR_",
        /// Elect one leader among the replicas through a Lease (`true` or `false`).
        enabled,
        /// How long a Lease holds without renewal (whole seconds; e.g. `15`, `15s`, `1m`).
        lease_duration,
        /// How long the leader keeps trying to renew before it gives up and stops (shorter than the
        /// lease duration; e.g. `10s`).
        lease_renew_deadline,
        /// How often the leader renews and a standby looks at the Lease (shorter than the renew
        /// deadline; e.g. `2s`, `500ms`).
        lease_retry_period,
        /// Holder identity written in the Lease; default: the environment variable POD_NAME, else
        /// `<hostname>-<pid>`.
        identity,
    }
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
        assert_eq!(args.ca_bundle, None);
        assert_eq!(args.sync_mode, Some(SyncModeArg::ToServer));
        assert_eq!(args.conflict_winner, None);
        assert_eq!(args.common.log_format, LogFormat::Json);
    }

    const REQUIRED: [&str; 9] = [
        "resources-operator",
        "run",
        "--cluster",
        "demo",
        "--namespace",
        "ns",
        "--infinispan-url",
        "http://127.0.0.1:11222",
        "--credentials-secret=creds",
    ];

    fn run_args(extra: &[&str]) -> Result<RunArgs, clap::Error> {
        let cli = Cli::try_parse_from(REQUIRED.iter().chain(extra))?;
        let Command::Run(args) = cli.command else {
            panic!("not the run command: {:?}", cli.command);
        };
        Ok(args)
    }

    #[test]
    fn run_shared_needs_only_the_namespace() -> Result<(), anyhow::Error> {
        let cli = Cli::try_parse_from(["resources-operator", "run-shared", "--namespace", "ns"])?;
        let Command::RunShared(args) = cli.command else {
            panic!("not run-shared: {:?}", cli.command);
        };
        assert_eq!(args.namespace, "ns");
        assert_eq!(args.members_config, common_crds::shared::SHARED_NAME);
        assert_eq!(args.common.server_write_concurrency, 4);
        assert_eq!(args.common.drift_check_interval, Duration::from_secs(60));
        assert!(args.election.election()?.is_some());
        assert!(Cli::try_parse_from(["resources-operator", "run-shared"]).is_err());
        Ok(())
    }

    #[test]
    fn server_writes_are_bounded() -> Result<(), anyhow::Error> {
        assert_eq!(run_args(&[])?.common.server_write_concurrency, 4);
        assert_eq!(
            run_args(&["--server-write-concurrency=1"])?
                .common
                .server_write_concurrency,
            1
        );
        assert!(run_args(&["--server-write-concurrency=0"]).is_err());
        assert!(run_args(&["--server-write-concurrency=65"]).is_err());
        Ok(())
    }

    #[test]
    fn the_tls_server_name_is_optional() -> Result<(), anyhow::Error> {
        assert_eq!(run_args(&[])?.tls_server_name, None);
        let args = run_args(&["--tls-server-name=demo.ns.svc.cluster.local"])?;
        assert_eq!(
            args.tls_server_name.as_deref(),
            Some("demo.ns.svc.cluster.local")
        );
        Ok(())
    }

    #[test]
    fn the_client_certificate_comes_with_its_key() -> Result<(), anyhow::Error> {
        let args = run_args(&[
            "--client-certificate",
            "/etc/infinispan/client/tls.crt",
            "--client-key",
            "/etc/infinispan/client/tls.key",
        ])?;
        assert_eq!(
            args.client_certificate,
            Some(PathBuf::from("/etc/infinispan/client/tls.crt"))
        );
        assert_eq!(
            args.client_key,
            Some(PathBuf::from("/etc/infinispan/client/tls.key"))
        );
        assert!(run_args(&["--client-certificate", "/tmp/tls.crt"]).is_err());
        assert!(run_args(&["--client-key", "/tmp/tls.key"]).is_err());
        Ok(())
    }

    #[test]
    fn the_ca_bundle_is_a_file() -> Result<(), anyhow::Error> {
        let args = run_args(&["--ca-bundle", "/etc/infinispan/ca.pem"])?;
        assert_eq!(
            args.ca_bundle,
            Some(PathBuf::from("/etc/infinispan/ca.pem"))
        );
        Ok(())
    }

    #[test]
    fn leader_election_is_described() {
        let help = Cli::command()
            .find_subcommand_mut("run")
            .map(|c| c.render_long_help().to_string())
            .unwrap_or_default();
        assert!(help.contains("Leader election is on by default"), "{help}");
        assert!(help.contains("<cluster>-resources-operator"), "{help}");
        assert!(help.contains("--leader-election=false"), "{help}");
    }

    #[test]
    fn every_flag_has_its_environment_variable() {
        let mut cli = Cli::command();
        for command in ["run", "run-shared"] {
            let run = cli.find_subcommand_mut(command).map(|c| c.clone());
            let Some(run) = run else {
                panic!("no {command} command");
            };
            every_flag_has_an_environment_variable(&run);
        }
    }

    fn every_flag_has_an_environment_variable(run: &clap::Command) {
        for arg in run.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
            let expected = format!("RESOURCES_OPERATOR_{}", id.to_uppercase());
            match id {
                "enabled" => assert_eq!(env.as_deref(), Some("RESOURCES_OPERATOR_LEADER_ELECTION")),
                _ => assert_eq!(env.as_deref(), Some(expected.as_str()), "{id}"),
            }
        }
    }

    #[test]
    fn leader_election_is_on_by_default_with_the_designs_timings() -> Result<(), anyhow::Error> {
        let args = run_args(&["--identity", "pod-a"])?;
        let election = args.election.election()?;
        assert_eq!(
            election,
            Some(Election {
                identity: "pod-a".to_string(),
                timings: Timings::default(),
            })
        );
        Ok(())
    }

    #[test]
    fn leader_election_can_be_turned_off() -> Result<(), anyhow::Error> {
        for off in [
            "--leader-election=false",
            "--leader-election=0",
            "--leader-election=no",
        ] {
            let args = run_args(&[off])?;
            assert_eq!(args.election.election()?, None, "{off}");
        }
        for on in [
            "--leader-election",
            "--leader-election=true",
            "--leader-election=1",
        ] {
            let args = run_args(&[on, "--identity=x"])?;
            assert!(args.election.election()?.is_some(), "{on}");
        }
        assert!(run_args(&["--leader-election=maybe"]).is_err());
        Ok(())
    }

    #[test]
    fn lease_timings_take_durations() -> Result<(), anyhow::Error> {
        let args = run_args(&[
            "--lease-duration",
            "6s",
            "--lease-renew-deadline",
            "4",
            "--lease-retry-period=500ms",
            "--identity=pod-b",
        ])?;
        let Some(election) = args.election.election()? else {
            anyhow::bail!("leader election is off");
        };
        assert_eq!(election.timings.lease_duration(), Duration::from_secs(6));
        assert_eq!(election.timings.renew_deadline(), Duration::from_secs(4));
        assert_eq!(election.timings.retry_period(), Duration::from_millis(500));
        Ok(())
    }

    #[test]
    fn inconsistent_timings_are_refused_with_a_reason() -> Result<(), anyhow::Error> {
        let args = run_args(&["--lease-duration=10s", "--lease-renew-deadline=10s"])?;
        let Err(error) = args.election.election() else {
            anyhow::bail!("accepted");
        };
        assert!(
            error
                .to_string()
                .contains("must be shorter than --lease-duration"),
            "{error}"
        );
        // Checked even with leader election off, so that turning it on later cannot fail.
        let args = run_args(&["--leader-election=false", "--lease-retry-period=20s"])?;
        assert!(args.election.election().is_err());
        Ok(())
    }

    #[test]
    fn the_identity_defaults_to_something() -> Result<(), anyhow::Error> {
        let args = run_args(&[])?;
        let Some(election) = args.election.election()? else {
            anyhow::bail!("leader election is off");
        };
        assert!(!election.identity.is_empty());
        Ok(())
    }
}
