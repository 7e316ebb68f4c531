//! The Infinispan cluster operator, as a library driven by the thin `main` of the
//! `cluster-operator` binary (so that tests drive it too).
//!
//! - [`build`]: the desired objects of an `Infinispan` CR (pure builders).
//! - [`cli`]: the command line.
//! - [`manifests`]: the CRD, admission-policy and RBAC-rules YAML (`crd`, `admission-policy`,
//!   `resources-operator-rules`).
//!
//! The controller itself (`run`) is not implemented yet.

pub mod build;
pub mod cli;
pub mod manifests;

use cli::{Cli, Command, CrdArgs};
use manifests::ManifestError;

/// A command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("the cluster controller is not implemented yet")]
    ControllerNotImplemented,
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
        Command::ResourcesOperatorRules => {
            manifests::print(&manifests::resources_operator_rules()?)?
        }
        Command::Run => return Err(Error::ControllerNotImplemented),
    }
    Ok(())
}
