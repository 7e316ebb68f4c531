//! The command line: `cluster-operator <command>`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    /// Print the ValidatingAdmissionPolicy that keeps the infinispan.org/cluster label of resource
    /// CRs, and its binding, as YAML.
    AdmissionPolicy,
    /// Print the RBAC rules of the resources operator without their per-cluster names (what the
    /// cluster operator must hold to grant each cluster's Role), as a YAML list with a comment
    /// header; the Helm chart includes it.
    ResourcesOperatorRules,
    /// Run the controller.
    Run,
}

#[derive(Debug, Args)]
pub struct CrdArgs {
    /// Write one file per CRD, named infinispan.org_<plural>.yaml, into this directory (created
    /// if missing) instead of printing them.
    #[arg(long, value_name = "DIR")]
    pub split: Option<PathBuf>,
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
        assert!(matches!(
            parse(&["cluster-operator", "admission-policy"]),
            Ok(Command::AdmissionPolicy)
        ));
        assert!(matches!(
            parse(&["cluster-operator", "resources-operator-rules"]),
            Ok(Command::ResourcesOperatorRules)
        ));
        assert!(matches!(
            parse(&["cluster-operator", "run"]),
            Ok(Command::Run)
        ));
        assert!(parse(&["cluster-operator"]).is_err());
        assert!(parse(&["cluster-operator", "crds"]).is_err());
    }
}
