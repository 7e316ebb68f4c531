//! The command line: `xtask <command>` (`cargo run -p tools -- <command>`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// The generators of the Infinispan operators' install artifacts (`make crds` runs them; the
/// CRDs come from `cluster-operator crd`).
#[derive(Debug, Parser)]
#[command(name = "xtask", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the ValidatingAdmissionPolicy that keeps the infinispan.org/cluster label of resource
    /// CRs, and its binding, as YAML.
    AdmissionPolicy,
    /// Print the RBAC rules of the resources operator without their per-cluster names (what the
    /// cluster operator must hold to grant each cluster's Role), as a YAML list with a comment
    /// header; the Helm chart includes it.
    ResourcesOperatorRules,
    /// Print the cluster operator's own RBAC rules (in every watched namespace; for all
    /// namespaces as a ClusterRole) and, under `labelPolicyRules`, the optional cluster-wide rules
    /// that let it apply the label policy itself, as YAML with a comment header; the Helm chart
    /// and the OLM bundle include them.
    ClusterOperatorRules,
    /// Print the cluster operator's pod as both the Helm chart and the OLM bundle run it, without
    /// what each sets its own way (image, environment, resources, scheduling), as YAML with a
    /// comment header; the Helm chart's Deployment includes it.
    OperatorPod,
    /// Print the reference of the nine CRDs as Markdown, generated from their OpenAPI schemas:
    /// per kind its names, printer columns and, per object level, every field with its type,
    /// default, constraints, CEL rules and description (docs/crd-reference.md is this output).
    CrdReference,
    /// Write the OLM files generated from the operator's sources under DIR (the repository's
    /// `olm/`): the ClusterServiceVersion and metadata/annotations.yaml of the bundle, and the
    /// file-based catalog. The bundle's CRDs come from `cluster-operator crd --split`.
    Olm(OlmArgs),
}

#[derive(Debug, Args)]
pub struct OlmArgs {
    /// The directory to write into: bundle/manifests/infinispan-operator.clusterserviceversion.yaml,
    /// bundle/metadata/annotations.yaml, catalog/infinispan-operator/catalog.yaml below it.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
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
            parse(&["xtask", "admission-policy"]),
            Ok(Command::AdmissionPolicy)
        ));
        assert!(matches!(
            parse(&["xtask", "resources-operator-rules"]),
            Ok(Command::ResourcesOperatorRules)
        ));
        assert!(matches!(
            parse(&["xtask", "cluster-operator-rules"]),
            Ok(Command::ClusterOperatorRules)
        ));
        assert!(matches!(
            parse(&["xtask", "operator-pod"]),
            Ok(Command::OperatorPod)
        ));
        assert!(matches!(
            parse(&["xtask", "crd-reference"]),
            Ok(Command::CrdReference)
        ));
        assert!(matches!(
            parse(&["xtask", "olm", "--dir", "olm"]),
            Ok(Command::Olm(OlmArgs { dir })) if dir == Path::new("olm")
        ));
        assert!(parse(&["xtask", "olm"]).is_err());
        assert!(parse(&["xtask"]).is_err());
        // The operator's commands are not here.
        assert!(parse(&["xtask", "crd"]).is_err());
        assert!(parse(&["xtask", "run"]).is_err());
    }
}
