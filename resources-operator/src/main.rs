use clap::Parser;

fn main() -> std::process::ExitCode {
    // Before the runtime starts its threads (see operator_runtime::memory).
    operator_runtime::memory::limit_arenas(resources_operator::MALLOC_ARENAS);
    let cli = resources_operator::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the Tokio runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(resources_operator::execute(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
