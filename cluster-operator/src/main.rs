//! `cluster-operator`: see the library, [`cluster_operator`].

use std::process::ExitCode;

use clap::Parser;
use cluster_operator::cli::Cli;

fn main() -> ExitCode {
    match cluster_operator::execute(Cli::parse()) {
        Ok(code) => code,
        Err(error) => {
            // Every error's message already includes its causes.
            eprintln!("cluster-operator: {error}");
            ExitCode::FAILURE
        }
    }
}
