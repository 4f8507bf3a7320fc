//! The `orq` binary: see `orq --help`.

/// mimalloc instead of the system allocator: in `orq bench` glibc's malloc and free were about
/// 30 % of orq's own CPU time (perf), as the redis client's reply parser, the decoder and the
/// worker pool allocate per task.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `ORQ_LOG_FORMAT`: `json` for one JSON object per log line (log pipelines), else text.
const LOG_FORMAT_ENV: &str = "ORQ_LOG_FORMAT";

type Layer = Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;

/// Logs on stderr (`ORQ_LOG` filters, `ORQ_LOG_FORMAT` shapes them) and, when the role's trace
/// options name a collector and no standard variable switches exporting off, the trace spans
/// exported to it (`orq_server::telemetry`); a bad endpoint that would be used is an error.
fn init_logs(
    role: Option<(&orq_server::telemetry::OtlpArgs, &str)>,
) -> Result<Option<orq_server::telemetry::Exporting>, String> {
    let switches = orq_server::telemetry::env_switches(|name| std::env::var(name).ok());
    // Exporting switched off: the endpoint is not used, so not checked either.
    let asked = role.is_some_and(|(args, _)| args.traces_url() != Ok(None));
    let off = switches.off.as_deref().filter(|_| asked);
    let otlp = match role {
        Some((args, role)) if off.is_none() => args.traces_url()?.map(|url| (url, role)),
        _ => None,
    };
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::Layer as _;
    let filter = tracing_subscriber::EnvFilter::try_from_env("ORQ_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))
        // The trace spans are for the exporter, never the logs.
        .add_directive(
            format!("{}=off", orq::trace::TARGET)
                .parse()
                .expect("a valid directive"),
        );
    // A log line that cannot be written (stderr is a pipe whose reader has gone) is dropped:
    // tracing's own report of that error would go to the same closed stderr and panic.
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .log_internal_errors(false);
    let format = std::env::var(LOG_FORMAT_ENV);
    let logs: Layer = match format.as_deref() {
        Ok("json") => logs
            .json()
            .with_current_span(false)
            .with_filter(filter)
            .boxed(),
        _ => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_filter(filter)
            .boxed(),
    };
    // The trace layer is added only when traces are exported. An absent layer (`None` as a
    // layer) says it is interested in every call site, which made each of a worker's disabled
    // trace spans a real span of the registry: about 10 % more worker CPU per task.
    let logs_only = tracing_subscriber::registry().with(logs);
    let exporting = match otlp {
        Some((url, role)) => {
            let (layer, exporting) = orq_server::telemetry::start(url, role)?;
            let only_traces = tracing_subscriber::filter::Targets::new()
                .with_target(orq::trace::TARGET, tracing::Level::INFO);
            tracing::subscriber::set_global_default(logs_only.with(layer.with_filter(only_traces)))
                .map_err(|e| format!("logging: {e}"))?;
            Some(exporting)
        }
        None => {
            tracing::subscriber::set_global_default(logs_only)
                .map_err(|e| format!("logging: {e}"))?;
            None
        }
    };
    // Records of the `log` crate (rustls, hyper, ...) pass on to tracing at the levels it keeps,
    // as `fmt().init()` did (`SubscriberInitExt::init` would pass every one).
    tracing_log::LogTracer::builder()
        .with_max_level(tracing_log::AsLog::as_log(
            &tracing::level_filters::LevelFilter::current(),
        ))
        .init()
        .map_err(|e| format!("logging: {e}"))?;
    match format.as_deref() {
        Ok("json" | "text") | Err(_) => {}
        Ok(other) => {
            tracing::warn!("{LOG_FORMAT_ENV}={other:?} is unknown (json or text); logging text")
        }
    }
    for line in switches.ignored.iter().filter(|_| asked) {
        tracing::warn!("{line}");
    }
    if let Some(why) = off {
        tracing::info!("traces are not exported: {why}");
    }
    if let (Some((url, _)), Some(_)) = (otlp, &exporting) {
        tracing::info!(url = %orq_server::telemetry::shown(url), "exporting traces over OTLP/HTTP");
    }
    Ok(exporting)
}

#[tokio::main]
async fn main() {
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
    let exporting = init_logs(cli.command.otlp()).unwrap_or_else(|e| fail(merged.annotate(e)));
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
    let result = orq_server::cli::run(cli).await;
    if let Some(e) = exporting {
        e.shutdown();
    }
    if let Err(e) = result {
        fail(merged.annotate(e));
    }
}
