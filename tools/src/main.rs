//! `xtask`: see the library, [`tools`].

use std::process::ExitCode;

use clap::Parser;
use tools::cli::Cli;

fn main() -> ExitCode {
    match tools::execute(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // Every error's message already includes its causes.
            eprintln!("xtask: {error}");
            ExitCode::FAILURE
        }
    }
}
