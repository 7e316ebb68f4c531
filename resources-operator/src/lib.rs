//! The resources operator: keeps `Cache`, `Template`, `Counter`, `Schema` and `Task` CRs of one
//! Infinispan cluster in sync with that cluster's server, in both directions.
//!
//! The sync engine and its kind adapters are built in the resources-operator issues; until then
//! the binary offers its command line and says plainly that `run` is not implemented.
//!
//! - [`engine`]: the generic sync engine; so far its pure [`engine::decision`].

pub mod engine;

use clap::{Parser, Subcommand};

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
    /// Run the sync for one Infinispan cluster (not implemented yet).
    Run,
}

/// Errors of the resources operator's entry point.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "`resources-operator run` is not implemented yet: the sync engine is built in a later issue"
    )]
    NotImplemented,
}

/// Runs the command the user asked for.
pub fn execute(cli: Cli) -> Result<(), Error> {
    match cli.command {
        Command::Run => Err(Error::NotImplemented),
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
    fn run_says_it_is_not_implemented() {
        let error = execute(Cli {
            command: Command::Run,
        })
        .err();
        assert!(matches!(error, Some(Error::NotImplemented)));
    }
}
