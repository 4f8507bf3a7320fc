//! The `orq` binary: see `orq --help`.

/// mimalloc instead of the system allocator: in `orq bench` glibc's malloc and free were about
/// 30 % of orq's own CPU time (perf), as the redis client's reply parser, the decoder and the
/// worker pool allocate per task.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `ORQ_LOG_FORMAT`: `json` for one JSON object per log line (log pipelines), else text.
const LOG_FORMAT_ENV: &str = "ORQ_LOG_FORMAT";

#[tokio::main]
async fn main() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ORQ_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // A log line that cannot be written (stderr is a pipe whose reader has gone) is dropped:
    // tracing's own report of that error would go to the same closed stderr and panic.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .log_internal_errors(false);
    match std::env::var(LOG_FORMAT_ENV).as_deref() {
        Ok("json") => logs.json().with_current_span(false).init(),
        Ok("text") | Err(_) => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        Ok(other) => {
            logs.init();
            tracing::warn!("{LOG_FORMAT_ENV}={other:?} is unknown (json or text); logging text");
        }
    }
    let fail = |e: String| -> ! {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "error: {e}");
        std::process::exit(2);
    };
    let (cli, merged) = match orq_server::config::parse(std::env::args_os().collect()) {
        Ok(parsed) => parsed,
        Err(orq_server::config::Error::Clap(e)) => e.exit(),
        Err(orq_server::config::Error::Config(e)) => fail(e),
    };
    if let Some(admin) = cli.command.admin() {
        use std::io::Write as _;
        match orq_server::admin::run(admin).await {
            Ok(text) => {
                let _ = writeln!(std::io::stdout(), "{}", text.trim_end_matches('\n'));
                std::process::exit(0)
            }
            Err(f) => {
                if let Some(text) = &f.stdout {
                    let _ = writeln!(std::io::stdout(), "{}", text.trim_end_matches('\n'));
                }
                let _ = writeln!(std::io::stderr(), "error: {}", f.message);
                std::process::exit(f.exit.code())
            }
        }
    }
    for f in &merged.from_file {
        tracing::debug!(key = %f.key, at = %f.at, "option from the config file");
    }
    if let Some(file) = &merged.file {
        tracing::info!(file = %file.display(), options = merged.from_file.len(), "config file read");
    }
    if let Err(e) = orq_server::cli::run(cli).await {
        fail(merged.annotate(e));
    }
}
