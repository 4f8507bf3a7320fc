//! The `orq` command line: `serve` (API + scheduler + workers), `api`, `worker`, `scheduler`.

use crate::api::{app, AppState};
use crate::handlers::{builtin, HttpAllow};
use clap::{Args, Parser, Subcommand};
use orq::keys::is_valid_name;
use orq::{
    Clock, Entropy, RedisStore, Scheduler, SchedulerConfig, Store, SystemClock, Worker,
    WorkerConfig,
};
use orq_sim::{MemoryStore, WallClock};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// orq: a background task engine on Redis whose every state transition is a Lua script.
#[derive(Debug, Parser)]
#[command(
    name = "orq",
    version,
    about = "orq: a background task engine on Redis whose every state transition is a Lua script"
)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The roles `orq` can run.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP API and dashboard, the scheduler and a worker pool in one process (embedded
    /// in-memory store unless --redis is given).
    Serve(ServeArgs),
    /// Run only the HTTP API (and the dashboard at /).
    Api(ApiArgs),
    /// Run only a worker pool (built-in handlers: echo, sleep, fail, http).
    Worker(WorkerArgs),
    /// Run only the scheduler (promotes due tasks, reaps expired leases).
    Scheduler(StoreArgs),
}

/// Where the state lives.
#[derive(Debug, Args, Clone)]
pub struct StoreArgs {
    /// Redis URL, e.g. redis://127.0.0.1:6379/ (Redis 7 or newer). Without it, `orq serve` runs
    /// on the embedded store: the same scripts in an in-memory Redis model, state kept in memory
    /// only and lost when orq stops. The other roles need Redis.
    #[arg(long, env = "ORQ_REDIS_URL", value_name = "URL")]
    pub redis: Option<String>,
    /// Queues to serve, comma-separated (default: every queue that has received a task).
    #[arg(long, env = "ORQ_QUEUES", value_delimiter = ',', value_name = "Q,..")]
    pub queues: Vec<String>,
}

/// HTTP API options.
#[derive(Debug, Args, Clone)]
pub struct ListenArgs {
    /// Address to listen on.
    #[arg(
        long,
        env = "ORQ_LISTEN",
        default_value = "127.0.0.1:8080",
        value_name = "ADDR"
    )]
    pub listen: String,
}

/// Options of the `http` handler (checked at submit time by the API too).
#[derive(Debug, Args, Clone)]
pub struct HttpArgs {
    /// Allow the `http` handler to call URLs under PREFIX (repeatable; env: comma-separated).
    #[arg(
        long = "http-allow",
        env = "ORQ_HTTP_ALLOW",
        value_delimiter = ',',
        value_name = "PREFIX"
    )]
    pub http_allow: Vec<String>,
}

/// What the HTTP server serves besides the API.
#[derive(Debug, Args, Clone)]
pub struct WebArgs {
    /// Directory of the dashboard's static export (Next.js `out/`), served at `/`. When it holds
    /// no index.html, `/` answers a page that says how to build it; the API works either way.
    #[arg(
        long,
        env = "ORQ_DASHBOARD",
        value_name = "DIR",
        default_value = crate::dashboard::DIR_DEFAULT
    )]
    pub dashboard: PathBuf,
    /// Directory of simulation timelines (`orq-sim run --timeline FILE`): its .jsonl and .json
    /// files are listed at /api/v1/timelines for the dashboard's replay view. Without it those
    /// routes answer 404.
    #[arg(long, env = "ORQ_TIMELINES", value_name = "DIR")]
    pub timelines: Option<PathBuf>,
}

/// Worker options.
#[derive(Debug, Args, Clone)]
pub struct PoolArgs {
    /// Most tasks run at once.
    #[arg(long, env = "ORQ_CONCURRENCY", default_value_t = 16)]
    pub concurrency: usize,
    /// Worker id recorded on leases (default: generated from the process id).
    #[arg(long = "worker-id", env = "ORQ_WORKER_ID")]
    pub worker_id: Option<String>,
}

/// `orq serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    listen: ListenArgs,
    #[command(flatten)]
    web: WebArgs,
    /// Do not build the dashboard at startup. Without this flag, when the --dashboard directory
    /// holds no index.html, its parent holds the dashboard's sources (package.json) and npm is
    /// on PATH, orq runs `npm ci` (when node_modules is missing) and `npm run build` there first.
    #[arg(long = "no-dashboard-build")]
    no_dashboard_build: bool,
    #[command(flatten)]
    pool: PoolArgs,
    #[command(flatten)]
    http: HttpArgs,
}

/// `orq api`.
#[derive(Debug, Args)]
pub struct ApiArgs {
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    listen: ListenArgs,
    #[command(flatten)]
    web: WebArgs,
    #[command(flatten)]
    http: HttpArgs,
}

/// `orq worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    pool: PoolArgs,
    #[command(flatten)]
    http: HttpArgs,
}

struct Runtime {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    entropy: Arc<Entropy>,
    queues: Vec<String>,
}

/// Open the store: Redis when `--redis` is given; otherwise the embedded in-memory store when
/// `embedded_ok` (only `orq serve`, whose roles share one process), else an error.
async fn open_store(args: &StoreArgs, role: &str, embedded_ok: bool) -> Result<Runtime, String> {
    for q in &args.queues {
        if !is_valid_name(q) {
            return Err(format!("--queues: {q:?} must match [A-Za-z0-9._-]{{1,64}}"));
        }
    }
    let store: Arc<dyn Store> = match &args.redis {
        Some(url) => {
            let store = RedisStore::open(url).map_err(|e| e.to_string())?;
            match store.ping().await {
                Ok(()) => {
                    if let Some(policy) = store.config_get("maxmemory-policy").await {
                        if policy != "noeviction" {
                            tracing::warn!(%policy, "Redis maxmemory-policy may evict orq's keys; use noeviction");
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, %url, "Redis not reachable yet; will keep trying"),
            }
            Arc::new(store)
        }
        None if embedded_ok => {
            tracing::warn!(
                "embedded store: state is kept in memory only and is lost when orq stops; \
                 pass --redis URL for durable, shared state"
            );
            println!(
                "orq: embedded in-memory store (state is lost when orq stops; use --redis for Redis)"
            );
            Arc::new(MemoryStore::new(Arc::new(WallClock)))
        }
        None => {
            return Err(format!(
                "orq {role} needs a Redis: pass --redis redis://127.0.0.1:6379/ (or set ORQ_REDIS_URL). \
                 Only `orq serve` can run on the embedded store, because its roles share one process."
            ))
        }
    };
    Ok(Runtime {
        store,
        clock: Arc::new(SystemClock),
        entropy: Arc::new(Entropy::from_os()),
        queues: args.queues.clone(),
    })
}

/// Cancelled on SIGINT or SIGTERM.
fn shutdown_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("install the SIGTERM handler");
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!("shutting down");
        t.cancel();
    });
    token
}

fn worker_config(rt: &Runtime, pool: &PoolArgs) -> Result<WorkerConfig, String> {
    if pool.concurrency == 0 || pool.concurrency > 10_000 {
        return Err("--concurrency: must be 1..=10000".into());
    }
    let mut c = WorkerConfig {
        queues: rt.queues.clone(),
        concurrency: pool.concurrency,
        ..WorkerConfig::default()
    };
    if let Some(id) = &pool.worker_id {
        if !is_valid_name(id) {
            return Err("--worker-id: must match [A-Za-z0-9._-]{1,64}".into());
        }
        c.id = id.clone();
    }
    Ok(c)
}

/// Check the directories of `web` before anything starts.
fn check_web(web: &WebArgs) -> Result<(), String> {
    if let Some(dir) = &web.timelines {
        if !dir.is_dir() {
            return Err(format!("--timelines: {} is not a directory", dir.display()));
        }
    }
    Ok(())
}

async fn serve_http(
    rt: &Runtime,
    listen: &ListenArgs,
    web: &WebArgs,
    http: &HttpArgs,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let mut state = AppState::new(
        orq::Client::new(rt.store.clone(), rt.clock.clone(), rt.entropy.clone()),
        rt.clock.clone(),
        Arc::new(HttpAllow(http.http_allow.clone())),
    )
    .with_dashboard(web.dashboard.clone())
    .with_shutdown(shutdown.clone());
    if let Some(dir) = &web.timelines {
        state = state.with_timelines(dir.clone());
    }
    let listener = tokio::net::TcpListener::bind(&listen.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", listen.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tracing::info!(%addr, "API listening on http://{addr}/api/v1");
    println!("orq API listening on http://{addr}/api/v1");
    if crate::dashboard::is_built(&web.dashboard) {
        tracing::info!(dir = %web.dashboard.display(), "dashboard at http://{addr}/");
        println!("orq dashboard at http://{addr}/");
    } else {
        tracing::warn!(
            dir = %web.dashboard.display(),
            "the dashboard is not built (no index.html); http://{addr}/ says how to build it"
        );
    }
    axum::serve(listener, app(state))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .map_err(|e| e.to_string())
}

fn make_worker(rt: &Runtime, pool: &PoolArgs, http: &HttpArgs) -> Result<Worker, String> {
    Ok(Worker::new(
        rt.store.clone(),
        rt.clock.clone(),
        rt.entropy.clone(),
        builtin(HttpAllow(http.http_allow.clone())),
        worker_config(rt, pool)?,
    ))
}

fn make_scheduler(rt: &Runtime) -> Scheduler {
    Scheduler::new(
        rt.store.clone(),
        rt.clock.clone(),
        rt.entropy.clone(),
        SchedulerConfig {
            queues: rt.queues.clone(),
            ..SchedulerConfig::default()
        },
    )
}

/// Run the parsed command until SIGINT / SIGTERM. Errors are for the user (exit code 2).
pub async fn run(cli: Cli) -> Result<(), String> {
    let allow = match &cli.command {
        Command::Serve(a) => Some(&a.http),
        Command::Api(a) => Some(&a.http),
        Command::Worker(a) => Some(&a.http),
        Command::Scheduler(_) => None,
    };
    if let Some(h) = allow {
        HttpAllow(h.http_allow.clone()).validate()?;
    }
    match &cli.command {
        Command::Serve(a) => check_web(&a.web)?,
        Command::Api(a) => check_web(&a.web)?,
        Command::Worker(_) | Command::Scheduler(_) => {}
    }
    let shutdown = shutdown_signal();
    match cli.command {
        Command::Serve(a) => {
            if !a.no_dashboard_build {
                let npm = crate::dashboard::find_on_path("npm");
                tokio::select! {
                    _ = crate::dashboard::ensure_built(&a.web.dashboard, npm.as_deref()) => {}
                    _ = shutdown.cancelled() => return Ok(()),
                }
            }
            let rt = open_store(&a.store, "serve", true).await?;
            let worker = make_worker(&rt, &a.pool, &a.http)?;
            let scheduler = make_scheduler(&rt);
            let (s1, s2) = (shutdown.clone(), shutdown.clone());
            let w = tokio::spawn(async move { worker.run(s1).await });
            let s = tokio::spawn(async move { scheduler.run(s2).await });
            let r = serve_http(&rt, &a.listen, &a.web, &a.http, shutdown.clone()).await;
            shutdown.cancel();
            let _ = tokio::join!(w, s);
            r
        }
        Command::Api(a) => {
            let rt = open_store(&a.store, "api", false).await?;
            serve_http(&rt, &a.listen, &a.web, &a.http, shutdown).await
        }
        Command::Worker(a) => {
            let rt = open_store(&a.store, "worker", false).await?;
            let worker = make_worker(&rt, &a.pool, &a.http)?;
            println!("orq worker {} started", worker.id());
            worker.run(shutdown).await;
            Ok(())
        }
        Command::Scheduler(a) => {
            let rt = open_store(&a, "scheduler", false).await?;
            let scheduler = make_scheduler(&rt);
            scheduler.run(shutdown).await;
            Ok(())
        }
    }
}
