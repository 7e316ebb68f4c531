use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = resources_operator::Cli::parse();
    match resources_operator::execute(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
