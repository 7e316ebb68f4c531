//! The command line: `cluster-operator <command>`.

use std::path::PathBuf;
use std::time::Duration;

use std::net::SocketAddr;

use clap::{Args, Parser, Subcommand};
pub use operator_runtime::duration::parse_duration;
pub use operator_runtime::logging::LogFormat;

/// The Infinispan cluster operator: deploys and runs Infinispan clusters, one resources operator
/// per cluster, backups and restores.
#[derive(Debug, Parser)]
#[command(name = "cluster-operator", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the CustomResourceDefinitions of the eight kinds (Infinispan, Backup, Restore, Cache,
    /// Template, Counter, Schema, Task) as one multi-document YAML.
    Crd(CrdArgs),
    /// Run the controller: every `Infinispan` CR in the watched namespaces becomes a server
    /// cluster and its resources operator.
    ///
    /// Kubernetes credentials come from KUBECONFIG or the in-cluster service account. Every flag
    /// is also an environment variable prefixed `CLUSTER_OPERATOR_`.
    Run(Box<RunArgs>),
    /// Convert infinispan-operator manifests (Infinispan, Cache, Backup, Restore, Batch) into
    /// this project's CRs.
    ///
    /// Reads multi-document YAML (files or standard input), writes the converted objects as
    /// multi-document YAML (standard output or --output) and a report of every field (standard
    /// error): mapped, changed, dropped (no equivalent here) or omitted. Exit status: 0 when
    /// everything was carried over, 2 when something was dropped, 1 when the input cannot be
    /// read. docs/migration.md explains each mapping.
    Convert(ConvertArgs),
    /// Copy a backup archive between a server and a file (what the Backup and Restore Jobs of
    /// `storage: Volume` run; not for people). The operators' credentials come from
    /// ARCHIVE_USERNAME and ARCHIVE_PASSWORD, the CA bundle (PEM) from ARCHIVE_CA_PEM. The
    /// outcome is one JSON line on standard output and in /dev/termination-log.
    #[command(hide = true)]
    Archive(ArchiveArgs),
    /// Download the extra server libraries of a cluster into the server's lib directory (the
    /// server pods' init container; not for people). Fails, with the reason in
    /// /dev/termination-log, when an artifact cannot be downloaded or does not match its SHA-256.
    #[command(hide = true)]
    Artifacts(ArtifactsArgs),
}

/// Options of `artifacts`.
#[derive(Debug, Clone, Args)]
pub struct ArtifactsArgs {
    #[command(subcommand)]
    pub fetch: ArtifactsFetch,
}

/// What `artifacts` does.
#[derive(Debug, Clone, Subcommand)]
pub enum ArtifactsFetch {
    /// Fetch the artifacts of PLAN (JSON) into the directory INTO.
    Fetch {
        #[arg(long)]
        into: PathBuf,
        #[arg(long)]
        plan: String,
    },
}

/// Options of `archive`.
#[derive(Debug, Clone, Args)]
pub struct ArchiveArgs {
    #[command(subcommand)]
    pub copy: ArchiveCopy,
    /// The server (pod 0 of the cluster).
    #[arg(long, global = true, default_value = "")]
    pub url: String,
    /// The name the server's certificate carries, when not the URL's host.
    #[arg(long, global = true)]
    pub tls_server_name: Option<String>,
}

/// What `archive` copies.
#[derive(Debug, Clone, Subcommand)]
pub enum ArchiveCopy {
    /// Save the server's backup job JOB into the file TO.
    Save {
        #[arg(long)]
        job: String,
        #[arg(long)]
        to: PathBuf,
    },
    /// Restore the archive FROM into the server as restore job JOB.
    Restore {
        #[arg(long)]
        job: String,
        #[arg(long)]
        from: PathBuf,
        /// The Restore's spec.resources (JSON); absent: everything in the archive.
        #[arg(long)]
        resources: Option<String>,
    },
}

/// Options of `run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Namespaces to watch, comma-separated; `*` or empty: all namespaces. Default: the
    /// operator's own namespace in a pod, all namespaces outside a cluster. OLM's
    /// `WATCH_NAMESPACE` is read when this is not set.
    #[arg(long, env = "CLUSTER_OPERATOR_WATCH_NAMESPACES")]
    pub watch_namespaces: Option<String>,

    /// Server image of a version, `VERSION=IMAGE`; repeatable (env: comma-separated). Adds to or
    /// replaces the built-in list.
    #[arg(long = "server-image", env = "CLUSTER_OPERATOR_SERVER_IMAGES", value_delimiter = ',', value_parser = parse_server_image)]
    pub server_images: Vec<(String, String)>,

    /// Server version of CRs that set none.
    #[arg(long, env = "CLUSTER_OPERATOR_DEFAULT_SERVER_VERSION", default_value = DEFAULT_SERVER_VERSION)]
    pub default_server_version: String,

    /// Image of the resources operator each cluster runs (a CR's
    /// spec.resourcesOperator.image overrides it).
    #[arg(long, env = "CLUSTER_OPERATOR_RESOURCES_OPERATOR_IMAGE", default_value = DEFAULT_RESOURCES_OPERATOR_IMAGE)]
    pub resources_operator_image: String,

    /// An image a CR may name (spec.image, spec.resourcesOperator.image) beyond the operator's
    /// own must start with one of these prefixes, e.g. `registry.example.com/infinispan/`;
    /// repeatable (env: comma-separated). Default: none (only the operator's own images).
    #[arg(
        long = "allowed-image-prefix",
        env = "CLUSTER_OPERATOR_ALLOWED_IMAGE_PREFIXES",
        value_delimiter = ','
    )]
    pub allowed_image_prefixes: Vec<String>,

    /// A CR may download extra server libraries (spec.dependencies.artifacts) only from URLs
    /// starting with one of these prefixes, e.g. `https://repo.example.com/libs/`; repeatable
    /// (env: comma-separated). Default: none.
    #[arg(
        long = "allowed-artifact-prefix",
        env = "CLUSTER_OPERATOR_ALLOWED_ARTIFACT_PREFIXES",
        value_delimiter = ','
    )]
    pub allowed_artifact_prefixes: Vec<String>,

    /// Let CRs mount a PersistentVolumeClaim's jars into the servers' lib directory
    /// (spec.dependencies.volumeClaimName).
    #[arg(
        long,
        env = "CLUSTER_OPERATOR_ALLOW_ARTIFACT_VOLUMES",
        value_name = "BOOL",
        value_parser = clap::builder::BoolishValueParser::new(),
        num_args = 0..=1,
        require_equals = true,
        default_value = "false",
        default_missing_value = "true"
    )]
    pub allow_artifact_volumes: bool,

    /// Let CRs read Secrets and ConfigMaps into the server's environment
    /// (spec.container.env[].valueFrom): whoever may create an Infinispan CR then reads any
    /// Secret of its namespace through the server pod.
    #[arg(
        long,
        env = "CLUSTER_OPERATOR_ALLOW_ENV_VALUE_FROM",
        value_name = "BOOL",
        value_parser = clap::builder::BoolishValueParser::new(),
        num_args = 0..=1,
        require_equals = true,
        default_value = "false",
        default_missing_value = "true"
    )]
    pub allow_env_value_from: bool,

    /// Let CRs load code into the server's JVM (-javaagent, -agentlib, -agentpath,
    /// -Xbootclasspath in spec.container.extraJvmOpts).
    #[arg(
        long,
        env = "CLUSTER_OPERATOR_ALLOW_JVM_AGENTS",
        value_name = "BOOL",
        value_parser = clap::builder::BoolishValueParser::new(),
        num_args = 0..=1,
        require_equals = true,
        default_value = "false",
        default_missing_value = "true"
    )]
    pub allow_jvm_agents: bool,

    /// Let CRs use any Secret or ConfigMap of their namespace they name (endpointSecretName,
    /// endpointEncryption.certSecretName, configMapName), not only those whose annotation
    /// infinispan.org/allow-clusters lists the cluster.
    #[arg(
        long,
        env = "CLUSTER_OPERATOR_ALLOW_UNMARKED_REFERENCES",
        value_name = "BOOL",
        value_parser = clap::builder::BoolishValueParser::new(),
        num_args = 0..=1,
        require_equals = true,
        default_value = "false",
        default_missing_value = "true"
    )]
    pub allow_unmarked_references: bool,

    /// An annotation of spec.expose must start with one of these prefixes; repeatable (env:
    /// comma-separated). Replaces the default list: the cloud load-balancer, MetalLB,
    /// external-dns and cert-manager prefixes (never ingress-controller snippets).
    #[arg(
        long = "allowed-expose-annotation-prefix",
        env = "CLUSTER_OPERATOR_ALLOWED_EXPOSE_ANNOTATION_PREFIXES",
        value_delimiter = ','
    )]
    pub allowed_expose_annotation_prefixes: Option<Vec<String>>,

    /// Cluster DNS domain of the server Services' names.
    #[arg(
        long,
        env = "CLUSTER_OPERATOR_CLUSTER_DOMAIN",
        default_value = "cluster.local"
    )]
    pub cluster_domain: String,

    /// Image pull Secrets (names, comma-separated) of the pods the operator creates; they must
    /// exist in each cluster's namespace.
    #[arg(
        long,
        env = "CLUSTER_OPERATOR_IMAGE_PULL_SECRETS",
        value_delimiter = ','
    )]
    pub image_pull_secrets: Vec<String>,

    /// fsGroup of the server pods (group that may write the data volume); `none` leaves it to
    /// the platform (OpenShift's restricted SCC assigns one).
    #[arg(long, env = "CLUSTER_OPERATOR_SERVER_FS_GROUP", default_value = "65532", value_parser = parse_fs_group)]
    pub server_fs_group: FsGroup,

    /// How long a cluster's resources operator may take to release its finalizers when the
    /// cluster is deleted or its resources operator disabled, before the cluster operator
    /// removes them itself (e.g. 60, 60s, 2m).
    #[arg(long, env = "CLUSTER_OPERATOR_DRAIN_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub drain_timeout: Duration,

    /// How long the operator asks a cluster scaled to 0 for the graceful shutdown of its cache
    /// container (its caches' state persisted on the data volumes) before it stops the pods
    /// without it (e.g. 120, 2m).
    #[arg(long, env = "CLUSTER_OPERATOR_GRACEFUL_STOP_TIMEOUT", default_value = "2m", value_parser = parse_duration)]
    pub graceful_stop_timeout: Duration,

    /// How long the certificates the operator issues (endpoint and transport TLS of type
    /// `Generated`) are valid (e.g. 8760h, at least 1m). Each is renewed after two thirds of
    /// it, which rolls the cluster's pods one at a time; the cluster's CA lasts 10 years.
    #[arg(long, env = "CLUSTER_OPERATOR_CERTIFICATE_LIFETIME", default_value = "8760h", value_parser = parse_duration)]
    pub certificate_lifetime: Duration,

    /// Who installs the label policy (the ValidatingAdmissionPolicy that keeps the
    /// `infinispan.org/cluster` label of resource CRs): `operator` applies it at startup when
    /// its identity may (OLM grants that) and warns once when it may not; `external` leaves it
    /// to the Helm chart or an administrator and does not try.
    #[arg(long, env = "CLUSTER_OPERATOR_LABEL_POLICY", value_enum, default_value_t = LabelPolicy::Operator)]
    pub label_policy: LabelPolicy,

    /// The binding of the shared label policy (the one that confines a namespace's shared
    /// resources operator to its member clusters), whose namespace selector the operator keeps
    /// to the namespaces that have a shared resources operator (its identity needs `patch` on
    /// it); `none` leaves the binding as installed. The Helm chart passes its release's name.
    #[arg(
        long,
        env = "CLUSTER_OPERATOR_SHARED_LABEL_POLICY_BINDING",
        default_value = common_crds::generate::SHARED_LABEL_POLICY_NAME
    )]
    pub shared_label_policy_binding: String,

    /// Out-of-cluster mode: reach the server of the cluster `NAMESPACE/NAME` at `URL` instead
    /// of its in-cluster Service name (`NAMESPACE/NAME=URL`; repeatable; env: comma-separated).
    /// Used for Backup and Restore.
    #[arg(
        long = "server-url",
        env = "CLUSTER_OPERATOR_SERVER_URLS",
        value_delimiter = ','
    )]
    pub server_urls: Vec<crate::servers::ServerAddress>,

    /// PEM file of CA certificates trusted for servers' TLS certificates, in addition to a
    /// certificate Secret's `ca.crt` and the system roots.
    #[arg(long, env = "CLUSTER_OPERATOR_CA_BUNDLE")]
    pub ca_bundle: Option<PathBuf>,

    /// Directory where a Restore keeps an archive between its download from the source cluster
    /// and its upload to the target (default: the system temporary directory).
    #[arg(long, env = "CLUSTER_OPERATOR_ARCHIVE_DIR")]
    pub archive_dir: Option<PathBuf>,

    /// The largest Restore archive the operator downloads into --archive-dir, in bytes; a
    /// larger one fails the Restore (`ArchiveTooLarge`). Keep it under the directory's free
    /// space (in a pod: the emptyDir's size limit).
    #[arg(
        long,
        env = "CLUSTER_OPERATOR_ARCHIVE_MAX_BYTES",
        default_value_t = crate::backup::DEFAULT_ARCHIVE_MAX_BYTES
    )]
    pub archive_max_bytes: u64,

    /// Image of the Jobs that copy Backup archives to and from their PersistentVolumeClaims
    /// (`cluster-operator archive`): this operator's own image.
    #[arg(long, env = "CLUSTER_OPERATOR_ARCHIVE_IMAGE", default_value = DEFAULT_CLUSTER_OPERATOR_IMAGE)]
    pub archive_image: String,

    /// Address of the HTTP endpoint serving /metrics, /healthz and /readyz.
    #[arg(
        long,
        env = "CLUSTER_OPERATOR_METRICS_ADDRESS",
        default_value = "0.0.0.0:8080"
    )]
    pub metrics_address: SocketAddr,

    #[command(flatten)]
    pub election: ElectionArgs,

    /// Log format.
    #[arg(long, env = "CLUSTER_OPERATOR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log level or filter directives (tracing EnvFilter syntax), e.g. `info` or
    /// `cluster_operator=debug,info`.
    #[arg(long, env = "CLUSTER_OPERATOR_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
}

operator_runtime::election_args! {
    /// Leader-election options of `run`.
    pub struct ElectionArgs {
        env_prefix: "CLUSTER_OPERATOR_",
        /// Elect one leader among the replicas through the Lease `infinispan-cluster-operator`
        /// (`true` or `false`); standbys are Ready and write nothing.
        enabled,
        /// Namespace of the Lease; default: the operator's own namespace (POD_NAMESPACE or the
        /// service account's), else the first watched namespace.
        lease_namespace,
        /// How long a Lease holds without renewal (e.g. `15s`).
        lease_duration,
        /// How long the leader keeps trying to renew before it gives up and stops.
        lease_renew_deadline,
        /// How often the leader renews and a standby looks at the Lease.
        lease_retry_period,
        /// Holder identity written in the Lease; default: POD_NAME, else `<hostname>-<pid>`.
        identity,
    }
}

/// The server version CRs run when they set none.
pub const DEFAULT_SERVER_VERSION: &str = "16.0.7";
/// The built-in server images, by version.
pub const SERVER_IMAGES: [(&str, &str); 1] = [("16.0.7", "quay.io/infinispan/server:16.0.7")];
/// The cluster operator's image (the release of this build).
pub const DEFAULT_CLUSTER_OPERATOR_IMAGE: &str = concat!(
    "quay.io/infinispan-operators/cluster-operator:",
    env!("CARGO_PKG_VERSION")
);
/// The resources operator's image (the release of this build).
pub const DEFAULT_RESOURCES_OPERATOR_IMAGE: &str = concat!(
    "quay.io/infinispan-operators/resources-operator:",
    env!("CARGO_PKG_VERSION")
);

fn parse_server_image(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((version, image)) if !version.trim().is_empty() && !image.trim().is_empty() => {
            Ok((version.trim().to_string(), image.trim().to_string()))
        }
        _ => Err(format!(
            "{text:?} is not VERSION=IMAGE, e.g. 16.0.7=quay.io/infinispan/server:16.0.7"
        )),
    }
}

/// `--server-fs-group`: a group id, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsGroup(pub Option<i64>);

fn parse_fs_group(text: &str) -> Result<FsGroup, String> {
    if text.trim() == "none" {
        return Ok(FsGroup(None));
    }
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|group| *group >= 0)
        .map(|group| FsGroup(Some(group)))
        .ok_or_else(|| format!("{text:?} is not a group id (a number >= 0) or `none`"))
}

/// Who installs the label policy: see [`RunArgs::label_policy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LabelPolicy {
    /// The operator applies it at startup when permitted.
    Operator,
    /// Installed by the Helm chart or an administrator: the operator does not try.
    External,
}

#[derive(Debug, Args)]
pub struct CrdArgs {
    /// Write one file per CRD, named infinispan.org_<plural>.yaml, into this directory (created
    /// if missing) instead of printing them.
    // The text is the `--help` text: `<plural>` stays as the user reads it, not as HTML.
    #[allow(rustdoc::invalid_html_tags)]
    #[arg(long, value_name = "DIR")]
    pub split: Option<PathBuf>,
}

/// Options of `convert`.
#[derive(Debug, Clone, Args)]
pub struct ConvertArgs {
    /// A manifest to read (multi-document YAML, or a List); repeatable; `-` is standard input.
    /// Default: standard input.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Write the converted objects to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Format of the report written to standard error.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub report_format: ReportFormat,
}

/// Format of `convert`'s report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// One line per field, grouped by object.
    Text,
    /// One JSON document: objects, their fields, a summary.
    Json,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::path::Path;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_the_commands() {
        let parse = |args: &[&str]| Cli::try_parse_from(args).map(|cli| cli.command);
        assert!(matches!(
            parse(&["cluster-operator", "crd"]),
            Ok(Command::Crd(CrdArgs { split: None }))
        ));
        assert!(matches!(
            parse(&["cluster-operator", "crd", "--split", "out"]),
            Ok(Command::Crd(CrdArgs { split: Some(dir) })) if dir == Path::new("out")
        ));
        let Ok(Command::Run(run)) = parse(&["cluster-operator", "run"]) else {
            panic!("run parses");
        };
        assert_eq!(run.default_server_version, DEFAULT_SERVER_VERSION);
        assert_eq!(run.drain_timeout, Duration::from_secs(60));
        assert_eq!(run.graceful_stop_timeout, Duration::from_secs(120));
        assert_eq!(run.server_fs_group, FsGroup(Some(65532)));
        assert_eq!(run.label_policy, LabelPolicy::Operator);
        assert!(!run.allow_env_value_from && !run.allow_jvm_agents);
        assert!(!run.allow_unmarked_references);
        assert!(run.allowed_image_prefixes.is_empty());
        assert!(run.allowed_artifact_prefixes.is_empty() && !run.allow_artifact_volumes);
        assert_eq!(run.allowed_expose_annotation_prefixes, None);
        let Ok(Command::Run(policy)) = parse(&[
            "cluster-operator",
            "run",
            "--allowed-image-prefix=a/,b/",
            "--allow-env-value-from",
            "--allow-jvm-agents=false",
            "--allow-unmarked-references",
            "--allowed-expose-annotation-prefix=x/",
            "--allowed-artifact-prefix=https://repo/libs/",
            "--allow-artifact-volumes",
        ]) else {
            panic!("run parses");
        };
        assert_eq!(policy.allowed_artifact_prefixes, ["https://repo/libs/"]);
        assert!(policy.allow_artifact_volumes);
        assert_eq!(policy.allowed_image_prefixes, ["a/", "b/"]);
        assert!(policy.allow_env_value_from && !policy.allow_jvm_agents);
        assert!(policy.allow_unmarked_references);
        assert_eq!(
            policy.allowed_expose_annotation_prefixes,
            Some(vec!["x/".to_string()])
        );
        let Ok(Command::Run(run)) = parse(&[
            "cluster-operator",
            "run",
            "--watch-namespaces=a,b",
            "--server-image=16.1.0=img:1",
            "--drain-timeout=2m",
            "--server-fs-group=none",
        ]) else {
            panic!("run parses");
        };
        assert_eq!(run.watch_namespaces.as_deref(), Some("a,b"));
        assert_eq!(
            run.server_images,
            vec![("16.1.0".to_string(), "img:1".to_string())]
        );
        assert_eq!(run.drain_timeout, Duration::from_secs(120));
        assert_eq!(run.server_fs_group, FsGroup(None));
        assert!(parse(&["cluster-operator", "run", "--server-image=nope"]).is_err());
        let Ok(Command::Run(run)) = parse(&[
            "cluster-operator",
            "run",
            "--server-url=ns/a=http://127.0.0.1:1",
            "--server-url=ns/b=http://127.0.0.1:2",
        ]) else {
            panic!("run parses");
        };
        assert_eq!(run.server_urls.len(), 2);
        assert!(parse(&["cluster-operator", "run", "--server-url=nope"]).is_err());
        assert!(parse(&["cluster-operator", "run", "--server-fs-group=-1"]).is_err());
        let Ok(Command::Convert(convert)) = parse(&["cluster-operator", "convert"]) else {
            panic!("convert parses");
        };
        assert!(convert.files.is_empty() && convert.output.is_none());
        assert_eq!(convert.report_format, ReportFormat::Text);
        let Ok(Command::Convert(convert)) = parse(&[
            "cluster-operator",
            "convert",
            "-f",
            "a.yaml",
            "-f",
            "-",
            "-o",
            "out.yaml",
            "--report-format",
            "json",
        ]) else {
            panic!("convert parses");
        };
        assert_eq!(convert.files, [Path::new("a.yaml"), Path::new("-")]);
        assert_eq!(convert.output.as_deref(), Some(Path::new("out.yaml")));
        assert_eq!(convert.report_format, ReportFormat::Json);
        assert!(parse(&["cluster-operator", "convert", "--report-format", "xml"]).is_err());
        assert!(parse(&["cluster-operator"]).is_err());
        assert!(parse(&["cluster-operator", "crds"]).is_err());
        // The generators of the other install artifacts are the tools crate's (`xtask`).
        for generator in [
            "admission-policy",
            "resources-operator-rules",
            "cluster-operator-rules",
            "crd-reference",
            "olm",
        ] {
            assert!(
                parse(&["cluster-operator", generator]).is_err(),
                "{generator}"
            );
        }
    }
}
