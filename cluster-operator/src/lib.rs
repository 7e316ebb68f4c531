//! The Infinispan cluster operator, as a library driven by the thin `main` of the
//! `cluster-operator` binary (so that tests drive it too).
//!
//! - [`backup`]: the `Backup` and `Restore` controllers (the server's REST backup API).
//! - [`build`]: the desired objects of an `Infinispan` CR (pure builders).
//! - [`certificates`]: the per-cluster CA and the certificates issued from it.
//! - [`cli`]: the command line.
//! - [`convert`]: `convert`, infinispan-operator manifests to this project's CRs.
//! - [`manifests`]: the CRD YAML (`crd`).
//! - [`controller`]: the `Infinispan` controller (apply, status, teardown).
//! - [`cr_policy`]: what an `Infinispan` CR may ask for (images, Secrets, JVM agents,
//!   annotations).
//! - [`scope`]: which namespaces are watched.
//! - [`servers`]: how the operator reaches a cluster's server (URL, credentials, CA).
//! - [`run`]: `cluster-operator run`.
//! - [`rbac`]: the cluster operator's own RBAC rules.
//! - [`label_policy`]: the label policy applied at startup when permitted.
//! - [`policy_scope`]: the namespaces the shared label policy's binding matches.
//!
//! The generators of the other install artifacts (OLM bundle and catalog, CRD reference, RBAC
//! rules and label-policy YAML) are the `tools` crate's `xtask` binary, which uses this library.

pub mod artifacts;
pub mod backup;
pub mod batch;
pub mod build;
pub mod certificates;
pub mod cli;
pub mod controller;
pub mod convert;
pub mod cr_policy;
pub mod label_policy;
pub mod manifests;
pub mod policy_scope;
pub mod rbac;
pub mod run;
pub mod scope;
pub mod servers;

use std::process::ExitCode;

use cli::{ArtifactsArgs, ArtifactsFetch, Cli, Command, CrdArgs};
use manifests::ManifestError;

/// A command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Run(#[from] run::RunError),
}

/// Runs one command of the command line; the exit status of the process when it returns.
pub fn execute(cli: Cli) -> Result<ExitCode, Error> {
    let Cli { command } = cli;
    match command {
        Command::Crd(CrdArgs { split: None }) => manifests::print(&manifests::crds()?)?,
        Command::Crd(CrdArgs { split: Some(dir) }) => {
            manifests::write_crd_files(&dir)?;
        }
        Command::Run(args) => run::run(*args)?,
        Command::Convert(args) => {
            return Ok(ExitCode::from(convert::command::run_stdio(&args).code()));
        }
        Command::Archive(args) => return Ok(backup::archive_job::run(args)),
        Command::Artifacts(ArtifactsArgs {
            fetch: ArtifactsFetch::Fetch { into, plan },
        }) => return Ok(artifacts::fetch::run(&into, &plan)),
    }
    Ok(ExitCode::SUCCESS)
}
