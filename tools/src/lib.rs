//! The generators of the install artifacts, out of the operator binary: the `xtask` binary that
//! `make crds` runs (the operator itself keeps `run` and `crd`).
//!
//! - [`cli`]: the command line.
//! - [`rules`]: the label policy and the RBAC rules as YAML (`admission-policy`,
//!   `resources-operator-rules`, `cluster-operator-rules`).
//! - [`mod@reference`]: the CRD reference in Markdown (`crd-reference`).
//! - [`operator_pod`]: the operator's pod both installers run (`operator-pod`, for the Helm
//!   chart; the OLM bundle's Deployment is built from it).
//! - [`olm`]: the OLM bundle's ClusterServiceVersion and metadata, and the file-based catalog
//!   (`olm`).

pub mod cli;
pub mod olm;
pub mod operator_pod;
pub mod reference;
pub mod rules;

use cli::{Cli, Command};
use cluster_operator::manifests::{self, ManifestError};

/// A command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Generate(#[from] common_crds::generate::GenerateError),
    #[error(transparent)]
    Olm(#[from] olm::OlmError),
}

/// Runs one command of the command line.
pub fn execute(cli: Cli) -> Result<(), Error> {
    let Cli { command } = cli;
    match command {
        Command::AdmissionPolicy => manifests::print(&rules::admission_policy()?)?,
        Command::ClusterOperatorRules => manifests::print(&rules::cluster_operator_rules()?)?,
        Command::CrdReference => manifests::print(&reference::crd_reference())?,
        Command::OperatorPod => manifests::print(&operator_pod::operator_pod_yaml()?)?,
        Command::ResourcesOperatorRules => manifests::print(&rules::resources_operator_rules()?)?,
        Command::Olm(args) => {
            olm::write_files(&args.dir)?;
        }
    }
    Ok(())
}
