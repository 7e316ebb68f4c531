//! The Infinispan cluster operator, as a library driven by the thin `main` of the
//! `cluster-operator` binary (so that tests drive it too).
//!
//! - [`backup`]: the `Backup` and `Restore` controllers (the server's REST backup API).
//! - [`build`]: the desired objects of an `Infinispan` CR (pure builders).
//! - [`cli`]: the command line.
//! - [`manifests`]: the CRD, admission-policy and RBAC-rules YAML (`crd`, `admission-policy`,
//!   `resources-operator-rules`).
//! - [`controller`]: the `Infinispan` controller (apply, status, teardown).
//! - [`scope`]: which namespaces are watched.
//! - [`servers`]: how the operator reaches a cluster's server (URL, credentials, CA).
//! - [`run`]: `cluster-operator run`.
//! - [`rbac`]: the cluster operator's own RBAC rules.
//! - [`reference`]: the CRD reference in Markdown (`crd-reference`).
//! - [`label_policy`]: the label policy applied at startup when permitted.
//! - [`olm`]: the OLM bundle's ClusterServiceVersion and metadata, and the file-based catalog
//!   (`olm`).

pub mod backup;
pub mod build;
pub mod cli;
pub mod controller;
pub mod label_policy;
pub mod manifests;
pub mod olm;
pub mod rbac;
pub mod reference;
pub mod run;
pub mod scope;
pub mod servers;

use cli::{Cli, Command, CrdArgs};
use manifests::ManifestError;

/// A command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Olm(#[from] olm::OlmError),
    #[error(transparent)]
    Run(#[from] run::RunError),
}

/// Runs one command of the command line.
pub fn execute(cli: Cli) -> Result<(), Error> {
    let Cli { command } = cli;
    match command {
        Command::Crd(CrdArgs { split: None }) => manifests::print(&manifests::crds()?)?,
        Command::Crd(CrdArgs { split: Some(dir) }) => {
            manifests::write_crd_files(&dir)?;
        }
        Command::AdmissionPolicy => manifests::print(&manifests::admission_policy()?)?,
        Command::ClusterOperatorRules => manifests::print(&manifests::cluster_operator_rules()?)?,
        Command::CrdReference => manifests::print(&reference::crd_reference())?,
        Command::ResourcesOperatorRules => {
            manifests::print(&manifests::resources_operator_rules()?)?
        }
        Command::Olm(args) => {
            olm::write_files(&args.dir)?;
        }
        Command::Run(args) => run::run(*args)?,
    }
    Ok(())
}
