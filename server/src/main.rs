//! The `orq` binary: see `orq --help`.

use clap::Parser;

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ORQ_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = orq_server::cli::Cli::parse();
    if let Err(e) = orq_server::cli::run(cli).await {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}
