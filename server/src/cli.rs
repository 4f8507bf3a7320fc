//! The `orq` command line: `serve` (API + scheduler + workers), `api`, `worker`, `scheduler`,
//! `key new` (make an API key), `config print` (a role's effective configuration, see
//! [`crate::config`]), and the admin commands over a running orq's HTTP API (`tasks`, `dlq`,
//! `queues`, `tenants`: [`crate::admin`]); `bench` is `orq_bench`'s.
//!
//! The doc comments of the clap types below are the command line's `--help` text, written for a
//! terminal: `[[key]]` and `<master-name>` there are literal text, not rustdoc links or HTML.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use crate::api::{app, AppState};
use crate::auth::{ApiKeys, Auth, Scope};
use crate::handlers::{builtin, AllowedPrefix, HttpAllow};
use crate::ratelimit::SubmitLimiter;
use crate::redis_checks::check_deployment;
use crate::serve::ServeLimits;
use clap::{Args, Parser, Subcommand};
use orq::format::{check_data_format, FormatError};
use orq::keys::is_valid_name;
use orq::{
    Clock, Entropy, RedisStore, Scheduler, SchedulerConfig, Store, SystemClock, WaitReplicas,
    Worker, WorkerConfig,
};
use orq_model::{MemoryStore, WallClock};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Print a line on stdout for the person at the terminal, ignoring write errors: stdout may be
/// a pipe whose reader has gone (`orq serve | head`), and a status line is not worth a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// The line that says a role is ready (`orq API listening on URL`, `orq worker ID started`), on
/// stdout for the programs that start orq and wait for it (the clients' test fixtures,
/// benchmarks): printed only when stdout is not a terminal, where the log (stderr) says the same
/// for people.
fn ready_line(line: &str) {
    use std::io::IsTerminal as _;
    if !std::io::stdout().is_terminal() {
        say!("{line}");
    }
}

/// orq: a background task engine on Redis whose every state transition is a Lua script.
#[derive(Debug, Parser)]
#[command(
    name = "orq",
    version,
    about = "orq: a background task engine on Redis whose every state transition is a Lua script",
    after_help = "Logs go to stderr. ORQ_LOG sets the level (warn, info, debug, or per module: \
                  orq=debug); ORQ_LOG_FORMAT=json writes one JSON object per line."
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
    /// Run only a worker pool (built-in handlers: echo, sleep, fail, http). SIGTERM or SIGINT:
    /// stop leasing, let running handlers finish (--shutdown-grace-ms), release the rest.
    Worker(WorkerArgs),
    /// Run only the scheduler (promotes due tasks, reaps expired leases).
    Scheduler(SchedulerArgs),
    /// Manage API keys (see `orq key new --help`).
    #[command(subcommand)]
    Key(KeyCommand),
    /// Config files: `orq config print ROLE` shows a role's effective configuration (see
    /// --config of each role).
    #[command(subcommand)]
    Config(crate::config::ConfigCommand),
    /// Tasks of a running orq, over its HTTP API (--url, --api-key): get, list, cancel.
    Tasks(crate::admin::TasksArgs),
    /// The dead-letter queue of a running orq: list, replay, purge (one by one or --all).
    Dlq(crate::admin::DlqArgs),
    /// Queues of a running orq: list, stats, pause, resume, drain, delete.
    Queues(crate::admin::QueuesArgs),
    /// Tenants of a queue of a running orq: get their settings and counts, set their fair-share
    /// settings.
    Tenants(crate::admin::TenantsArgs),
    /// Load generator: submit, end-to-end and delayed-task phases with a no-op handler on queues
    /// of its own; prints a table and writes JSON (--json). Against --redis URL (it writes only
    /// keys of queues named ob-<id>-*, and deletes them at the end; it also reports each
    /// primary's script calls, script time and CPU from INFO) or the embedded store.
    Bench(orq_bench::BenchArgs),
}

impl Command {
    /// The role's trace export options and its name, for the roles that make spans.
    pub fn otlp(&self) -> Option<(&crate::telemetry::OtlpArgs, &'static str)> {
        match self {
            Command::Serve(a) => Some((&a.otlp, "serve")),
            Command::Api(a) => Some((&a.otlp, "api")),
            Command::Worker(a) => Some((&a.otlp, "worker")),
            _ => None,
        }
    }

    /// The admin command this is, if it is one (they run apart from the roles, with their own
    /// exit codes).
    pub fn admin(&self) -> Option<crate::admin::Admin<'_>> {
        use crate::admin::Admin;
        match self {
            Command::Tasks(a) => Some(Admin::Tasks(a)),
            Command::Dlq(a) => Some(Admin::Dlq(a)),
            Command::Queues(a) => Some(Admin::Queues(a)),
            Command::Tenants(a) => Some(Admin::Tenants(a)),
            _ => None,
        }
    }
}

/// `orq key ...`.
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Make a fresh random API key: prints the key on the first line of stdout (shown only this
    /// once: orq keeps only its SHA-256), then the [[key]] entry to append to the API keys file
    /// (`orq key new --tenant acme | tail -n +2 >> keys.toml`).
    New(KeyNewArgs),
}

/// `orq key new`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("scope").required(true).args(["admin", "tenant", "worker"])))]
pub struct KeyNewArgs {
    /// A key with every right (submit, read, cancel, replay and purge any task; pause, resume,
    /// settings, tenant limits, workers, metrics, timelines; lease and report as a worker).
    #[arg(long, conflicts_with_all = ["tenant", "queues", "worker"])]
    pub admin: bool,
    /// A key limited to tenant T: it submits, reads, cancels and replays T's tasks only.
    #[arg(long, value_name = "T", conflicts_with = "worker")]
    pub tenant: Option<String>,
    /// A worker key: it only leases tasks and reports on them through the worker protocol
    /// (POST /api/v1/leases and its heartbeat, complete, fail and release routes).
    #[arg(long)]
    pub worker: bool,
    /// With --tenant or --worker: only in these queues (comma-separated; default: every queue).
    #[arg(long, value_delimiter = ',', value_name = "Q,..")]
    pub queues: Vec<String>,
    /// With --worker: lease only these tenants' tasks (comma-separated, at most 16; default:
    /// every tenant's).
    #[arg(long, value_delimiter = ',', value_name = "T,..")]
    pub tenants: Vec<String>,
    /// The key's name in the file and in logs (default: the tenant, "worker" or "admin", then 8
    /// hex digits of the key's hash).
    #[arg(long, value_name = "N")]
    pub name: Option<String>,
}

/// Where the state lives.
#[derive(Debug, Args, Clone)]
pub struct StoreArgs {
    /// Redis URL, e.g. redis://127.0.0.1:6379/ (Redis 7 or newer), or for a Redis Cluster
    /// redis+cluster://host:port[,host:port...] (any one reachable node is enough; each queue
    /// lives in one hash slot), or for a primary found through Sentinel
    /// redis+sentinel://host:port[,host:port...]/<master-name>[/<db>] (the sentinels' addresses;
    /// a failover is followed). Without it, `orq serve` runs on the embedded store: the same
    /// scripts in an in-memory Redis model, state kept in memory only and lost when orq stops.
    /// The other roles need Redis.
    #[arg(long, env = "ORQ_REDIS_URL", value_name = "URL")]
    pub redis: Option<String>,
    /// Acknowledged means replicated: a submit, an outcome, a cancel or a replay answers only
    /// once N replicas have it (Redis WAIT on the same primary); when fewer acknowledge within
    /// --wait-timeout-ms the call is refused as transient (API 503 `store_unavailable`; send it
    /// again with its idempotency key, workers resend outcomes with their lease token). 0 (the
    /// default) answers as soon as the primary has it: a failover can lose the last writes.
    #[arg(long, env = "ORQ_WAIT_REPLICAS", value_name = "N", default_value_t = 0, requires = "redis",
          value_parser = clap::value_parser!(u32).range(0..=16))]
    pub wait_replicas: u32,
    /// With --wait-replicas: how long a call waits for its replicas (ms).
    #[arg(long, env = "ORQ_WAIT_TIMEOUT_MS", value_name = "MS", default_value_t = 1_000,
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub wait_timeout_ms: u64,
    /// Queues to serve, comma-separated (default: every queue that has received a task).
    #[arg(long, env = "ORQ_QUEUES", value_delimiter = ',', value_name = "Q,..")]
    pub queues: Vec<String>,
}

/// HTTP API options.
#[derive(Debug, Args, Clone)]
pub struct ListenArgs {
    /// Address to listen on. Without --api-keys only a loopback address is accepted (unless
    /// --insecure-no-auth).
    #[arg(
        long,
        env = "ORQ_LISTEN",
        default_value = "127.0.0.1:8080",
        value_name = "ADDR"
    )]
    pub listen: String,
    /// TOML file of API keys ([[key]] entries with name, sha256, and role = "admin", role =
    /// "worker" (the worker protocol's /api/v1/leases routes only) or tenant = "T", the last two
    /// with optional queues = [..]; make one with `orq key new`). Every route but
    /// /api/v1/healthz, /api/v1/readyz, /api/v1/openapi.json and the dashboard's files then
    /// needs `Authorization: Bearer <key>`. Without it, authentication is off and orq listens on
    /// loopback addresses only.
    #[arg(long = "api-keys", env = "ORQ_API_KEYS", value_name = "FILE")]
    pub api_keys: Option<PathBuf>,
    /// Allow listening on a non-loopback address without --api-keys: anyone who can reach the
    /// port can then submit, read, cancel and purge every task. Only behind something else
    /// that authenticates. (Without it, a keyless orq also answers only requests to loopback
    /// host names: localhost, 127.0.0.1, [::1].)
    #[arg(long = "insecure-no-auth", conflicts_with = "api_keys")]
    pub insecure_no_auth: bool,
    /// Most submitted tasks per second per tenant, all its queues together, in this API process;
    /// beyond, 429 with Retry-After. 0 turns the limit off.
    #[arg(
        long = "submit-rate-per-tenant",
        env = "ORQ_SUBMIT_RATE_PER_TENANT",
        value_name = "N",
        default_value_t = crate::ratelimit::RATE_PER_S_DEFAULT
    )]
    pub submit_rate_per_tenant: u64,
    /// Burst of the submit rate limit: tasks a tenant may submit at once, across its queues (at
    /// least 1000, a full batch).
    #[arg(
        long = "submit-burst-per-tenant",
        env = "ORQ_SUBMIT_BURST_PER_TENANT",
        value_name = "N",
        default_value_t = crate::ratelimit::BURST_DEFAULT
    )]
    pub submit_burst_per_tenant: u64,
    /// Most queues one tenant's keys may bring into existence (a tenant key without a queues
    /// list that submits to a queue that does not exist creates it, counted against its tenant
    /// until an admin deletes it: DELETE /api/v1/queues/{queue}); beyond, 403. Queues an admin
    /// creates, and those a tenant key's queues list names, are not counted.
    #[arg(
        long = "tenant-queues-max",
        env = "ORQ_TENANT_QUEUES_MAX",
        value_name = "N",
        default_value_t = crate::api::TENANT_QUEUES_MAX_DEFAULT,
        value_parser = clap::value_parser!(u64).range(1..=1_000_000)
    )]
    pub tenant_queues_max: u64,
    /// Time a client has to send a request's headers (and longest an idle keep-alive connection
    /// stays open), ms.
    #[arg(
        long = "header-timeout-ms",
        env = "ORQ_HEADER_TIMEOUT_MS",
        value_name = "MS",
        default_value_t = crate::serve::HEADER_TIMEOUT_MS_DEFAULT
    )]
    pub header_timeout_ms: u64,
    /// Time a client has to send a whole request body after its headers, ms (408 beyond).
    #[arg(
        long = "body-timeout-ms",
        env = "ORQ_BODY_TIMEOUT_MS",
        value_name = "MS",
        default_value_t = crate::serve::BODY_TIMEOUT_MS_DEFAULT
    )]
    pub body_timeout_ms: u64,
}

/// Longest --header-timeout-ms and --body-timeout-ms (ms): ten minutes.
pub const TIMEOUT_MS_MAX: u64 = 600_000;

/// The HTTP API's checked options: what [`ListenArgs`] asks for, validated before anything
/// starts.
#[derive(Debug, Clone)]
pub struct ApiSetup {
    /// API keys, or off.
    pub auth: Auth,
    /// `(rate_per_s, burst)` of the submit limit, `None` when off.
    pub submit_limit: Option<(u64, u64)>,
    /// Most queues one tenant's keys may create (--tenant-queues-max).
    pub tenant_queues_max: u64,
    /// Server timeouts.
    pub limits: ServeLimits,
    /// Authentication off and no --insecure-no-auth: answer only loopback host names
    /// (`loopback_host.rs`).
    pub loopback_hosts_only: bool,
}

impl ListenArgs {
    /// Load the keys file and check the numbers. Errors are for the user (exit code 2).
    pub fn setup(&self) -> Result<ApiSetup, String> {
        let auth = match &self.api_keys {
            Some(path) => Auth::Keys(Arc::new(ApiKeys::load(path)?)),
            None => Auth::Off,
        };
        let submit_limit = match self.submit_rate_per_tenant {
            0 => None,
            rate => {
                if self.submit_burst_per_tenant < orq::task::BATCH_MAX as u64 {
                    return Err(format!(
                        "--submit-burst-per-tenant: at least {} (a full batch must fit)",
                        orq::task::BATCH_MAX
                    ));
                }
                Some((rate, self.submit_burst_per_tenant))
            }
        };
        for (flag, ms) in [
            ("--header-timeout-ms", self.header_timeout_ms),
            ("--body-timeout-ms", self.body_timeout_ms),
        ] {
            if ms == 0 || ms > TIMEOUT_MS_MAX {
                return Err(format!("{flag}: must be 1..={TIMEOUT_MS_MAX}"));
            }
        }
        Ok(ApiSetup {
            loopback_hosts_only: matches!(auth, Auth::Off) && !self.insecure_no_auth,
            auth,
            submit_limit,
            tenant_queues_max: self.tenant_queues_max,
            limits: ServeLimits {
                header_timeout_ms: self.header_timeout_ms,
                body_timeout_ms: self.body_timeout_ms,
                ..ServeLimits::default()
            },
        })
    }
}

/// Bind the API's listener, refusing a non-loopback address when authentication is off (unless
/// `insecure_no_auth`). The check is on the bound address, so a host name that resolves to a
/// public address is refused too.
pub async fn bind_api(
    listen: &str,
    auth: &Auth,
    insecure_no_auth: bool,
) -> Result<tokio::net::TcpListener, String> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    if matches!(auth, Auth::Keys(_)) {
        return Ok(listener);
    }
    if addr.ip().is_loopback() {
        tracing::info!(%addr, "no API keys (--api-keys): authentication is off, listening on loopback only");
        if insecure_no_auth {
            tracing::warn!(
                %addr,
                "--insecure-no-auth: requests to any host name are answered, not only to \
                 loopback names (a web page on a name pointed at 127.0.0.1 can reach this orq)"
            );
        }
        return Ok(listener);
    }
    if insecure_no_auth {
        tracing::warn!(
            %addr,
            "--insecure-no-auth: listening on a non-loopback address without API keys; anyone \
             who can reach it can submit, read, cancel and purge every task"
        );
        return Ok(listener);
    }
    Err(format!(
        "refusing to listen on {addr} without API keys: anyone who can reach it could submit, \
         read, cancel and purge every task. Pass --api-keys FILE (make keys with `orq key new`), \
         listen on a loopback address (127.0.0.1), or pass --insecure-no-auth to accept the risk"
    ))
}

/// Options of the `http` handler (checked at submit time by the API too).
#[derive(Debug, Args, Clone)]
pub struct HttpArgs {
    /// Allow the `http` handler to call URLs under PREFIX (repeatable, or comma-separated): an
    /// http(s) URL with a host and optionally a path, such as `https://hooks.example/api/`. URLs
    /// and prefixes are compared normalised (case, default port, dot segments), and a path
    /// prefix ends at a `/`: `/api/` allows `/api/x`, never `/apix` or `/api/../x`.
    #[arg(
        long = "http-allow",
        env = "ORQ_HTTP_ALLOW",
        value_delimiter = ',',
        value_name = "PREFIX",
        value_parser = AllowedPrefix::parse
    )]
    pub http_allow: Vec<AllowedPrefix>,
}

impl HttpArgs {
    /// The allow-list, logged once as normalised (what URLs are compared with).
    fn allow(&self, role: &str) -> HttpAllow {
        let shown: Vec<&str> = self.http_allow.iter().map(AllowedPrefix::as_str).collect();
        tracing::info!(role, prefixes = ?shown, "http handler allow-list (normalised)");
        HttpAllow::new(self.http_allow.clone())
    }
}

/// What the HTTP server serves besides the API.
#[derive(Debug, Args, Clone)]
pub struct WebArgs {
    /// Directory of the dashboard's static export (Next.js `out/`), served at `/` from disk.
    /// Without it: the export embedded in the binary (a release build carries dashboard/out as it
    /// was at compile time), else the source checkout's dashboard/out. When the chosen one holds
    /// no index.html, `/` answers a page that says how to build it; the API works either way.
    #[arg(long, env = "ORQ_DASHBOARD", value_name = "DIR")]
    pub dashboard: Option<PathBuf>,
    /// Directory of simulation timelines (`orq-sim run --timeline FILE`): its .jsonl and .json
    /// files are listed at /api/v1/timelines for the dashboard's replay view. Without it those
    /// routes answer 404.
    #[arg(long, env = "ORQ_TIMELINES", value_name = "DIR")]
    pub timelines: Option<PathBuf>,
    /// How the dashboard's simulation runs are started and bounded.
    #[command(flatten)]
    pub sim: crate::simulations::SimArgs,
}

impl WebArgs {
    /// Where the dashboard is served from: `--dashboard DIR`, else the embedded export when it
    /// holds index.html, else the source checkout's `dashboard/out`
    /// ([`crate::dashboard::Source::choose`]).
    pub fn dashboard_source(&self) -> crate::dashboard::Source {
        crate::dashboard::Source::choose(
            self.dashboard.as_deref(),
            crate::dashboard_files::embedded(),
        )
    }
}

/// Worker options.
#[derive(Debug, Args, Clone)]
pub struct PoolArgs {
    /// Most handlers running at once (a task whose handler returned frees its slot while its
    /// outcome is recorded). With `orq serve`, 0 runs no built-in worker: tasks then run only on
    /// workers of the worker protocol (POST /api/v1/leases, e.g. the Python and TypeScript
    /// clients) and `orq worker` processes, so the built-in one takes none of their tasks.
    #[arg(long, env = "ORQ_CONCURRENCY", default_value_t = 16)]
    pub concurrency: usize,
    /// Worker id recorded on leases (default: generated from the process id).
    #[arg(long = "worker-id", env = "ORQ_WORKER_ID")]
    pub worker_id: Option<String>,
    /// Lease batching, ms (0..=1000; 0 turns it off): while the pool is busy and some handlers
    /// still run, wait up to this long for more slots to free before leasing, so that one lease
    /// call carries more tasks (less Redis work per task, at most this much more queue wait)
    #[arg(
        long = "lease-linger-ms",
        env = "ORQ_LEASE_LINGER_MS",
        default_value_t = 1
    )]
    pub lease_linger_ms: u64,
    /// Lanes the slots are split into (1..=16; a pool runs at most one lane per slot, so more
    /// than --concurrency means --concurrency lanes of one slot), each with its own lease loop
    /// and completer: while one lane's call is in the store another's tasks run, so a busy pool
    /// keeps the store working.
    #[arg(long, env = "ORQ_LANES", default_value_t = 2)]
    pub lanes: usize,
    /// On SIGTERM or SIGINT the pool stops leasing and lets running handlers finish for up to
    /// this long (ms, 0..=3600000); then it aborts the rest and releases their tasks (ready again
    /// at once, no attempt spent) and exits. A task whose release does not reach the store runs
    /// again once its lease expires.
    #[arg(
        long = "shutdown-grace-ms",
        env = "ORQ_SHUTDOWN_GRACE_MS",
        default_value_t = 10_000
    )]
    pub shutdown_grace_ms: u64,
}

/// `orq serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    config: crate::config::ConfigArgs,
    #[command(flatten)]
    otlp: crate::telemetry::OtlpArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    listen: ListenArgs,
    #[command(flatten)]
    web: WebArgs,
    /// Do not build the dashboard at startup. Without this flag, when the dashboard is served
    /// from a directory (--dashboard DIR, or dashboard/out when the binary embeds no dashboard)
    /// that holds no index.html, its parent holds the dashboard's sources (package.json) and npm
    /// is on PATH, orq runs `npm ci` (when node_modules is missing) and `npm run build` there
    /// first. A binary with the dashboard embedded never runs npm.
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
    config: crate::config::ConfigArgs,
    #[command(flatten)]
    otlp: crate::telemetry::OtlpArgs,
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
    config: crate::config::ConfigArgs,
    #[command(flatten)]
    otlp: crate::telemetry::OtlpArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    pool: PoolArgs,
    #[command(flatten)]
    http: HttpArgs,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
}

/// `orq scheduler`.
#[derive(Debug, Args)]
pub struct SchedulerArgs {
    #[command(flatten)]
    config: crate::config::ConfigArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
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
            let wait = (args.wait_replicas > 0).then_some(WaitReplicas {
                replicas: args.wait_replicas,
                timeout_ms: args.wait_timeout_ms,
            });
            let store = RedisStore::open(url)
                .map_err(|e| e.to_string())?
                .with_wait_replicas(wait);
            // A cluster or Sentinel URL that leads nowhere is a mistake to stop on (exit 2);
            // a single server that is down is waited for: no role starts before the data
            // format is checked (design note 39), so the process waits here until it is.
            store.find_deployment().await.map_err(|e| e.to_string())?;
            wait_for_redis(&store).await;
            for warning in check_deployment(&store, url).await? {
                tracing::warn!("{warning}");
            }
            tracing::info!("{}", crate::redis_checks::describe_deployment(&store, url).await);
            wait_for_data_format(&store).await?;
            Arc::new(store)
        }
        None if embedded_ok => {
            tracing::warn!(
                "embedded store: state is kept in memory only and is lost when orq stops; \
                 pass --redis URL for durable, shared state"
            );
            let store = MemoryStore::new(Arc::new(WallClock));
            // An empty store: this just writes the version, as on a fresh Redis.
            check_data_format(&store).await.map_err(|e| e.to_string())?;
            Arc::new(store)
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

/// [`open_store`], given up when `shutdown` comes first (SIGTERM while orq still waits for a
/// Redis that does not answer): `None`, and the role exits cleanly without starting.
async fn open_or_stop(
    args: &StoreArgs,
    role: &str,
    embedded_ok: bool,
    shutdown: &CancellationToken,
) -> Result<Option<Runtime>, String> {
    tokio::select! {
        rt = open_store(args, role, embedded_ok) => rt.map(Some),
        _ = shutdown.cancelled() => Ok(None),
    }
}

/// How often startup asks again a Redis that does not answer yet.
const STARTUP_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// Wait until `store` answers PING (every [`STARTUP_RETRY`]; a warning the first time): the
/// deployment checks and the data-format check need an answer before any role starts.
async fn wait_for_redis(store: &RedisStore) {
    let mut warned = false;
    while let Err(e) = store.ping().await {
        if !warned {
            tracing::warn!(error = %e, "Redis not reachable yet; waiting for it before starting");
            warned = true;
        }
        tokio::time::sleep(STARTUP_RETRY).await;
    }
}

/// Check the data format of the Redis `store` (design note 39), asking again while the answer
/// does not come or is a refusal that passes (every [`STARTUP_RETRY`]; a warning the first
/// time). Errors: the refusal's message (another format, or a key that holds no format), which
/// stops the process with exit code 2.
async fn wait_for_data_format(store: &RedisStore) -> Result<(), String> {
    let mut warned = false;
    loop {
        match check_data_format(store).await {
            Ok(()) => return Ok(()),
            Err(FormatError::Unavailable(e)) => {
                if !warned {
                    tracing::warn!(error = %e, "the data format could not be checked yet; asking again");
                    warned = true;
                }
                tokio::time::sleep(STARTUP_RETRY).await;
            }
            Err(e) => return Err(e.to_string()),
        }
    }
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

impl PoolArgs {
    /// Check the numbers and the worker id before anything starts (exit code 2).
    fn check(&self) -> Result<(), String> {
        if self.concurrency == 0 || self.concurrency > 10_000 {
            return Err(
                "--concurrency: must be 1..=10000 (orq serve also takes 0: no built-in worker)"
                    .into(),
            );
        }
        if self.lease_linger_ms > 1_000 {
            return Err("--lease-linger-ms: must be 0..=1000".into());
        }
        if self.lanes == 0 || self.lanes > orq::worker::LANES_MAX {
            return Err(format!("--lanes: must be 1..={}", orq::worker::LANES_MAX));
        }
        if self.shutdown_grace_ms > 3_600_000 {
            return Err("--shutdown-grace-ms: must be 0..=3600000".into());
        }
        if self
            .worker_id
            .as_deref()
            .is_some_and(|id| !is_valid_name(id))
        {
            return Err("--worker-id: must match [A-Za-z0-9._-]{1,64}".into());
        }
        Ok(())
    }
}

fn worker_config(rt: &Runtime, pool: &PoolArgs) -> Result<WorkerConfig, String> {
    pool.check()?;
    let mut c = WorkerConfig {
        queues: rt.queues.clone(),
        concurrency: pool.concurrency,
        lease_linger_ms: pool.lease_linger_ms,
        lanes: pool.lanes,
        shutdown_grace_ms: pool.shutdown_grace_ms,
        ..WorkerConfig::default()
    };
    if let Some(id) = &pool.worker_id {
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
    listener: tokio::net::TcpListener,
    setup: &ApiSetup,
    web: &WebArgs,
    http: &HttpArgs,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let limiter = setup
        .submit_limit
        .map(|(rate, burst)| SubmitLimiter::new(rate, burst, rt.clock.clone()));
    let dashboard = web.dashboard_source();
    let mut state = AppState::new(
        // Natural batching of single submits: concurrent POST /api/v1/tasks share script calls.
        orq::Client::new(rt.store.clone(), rt.clock.clone(), rt.entropy.clone()).coalescing(),
        rt.clock.clone(),
        Arc::new(http.allow("api")),
    )
    .with_dashboard_source(dashboard.clone())
    .with_shutdown(shutdown.clone())
    .with_auth(setup.auth.clone())
    .with_loopback_hosts_only(setup.loopback_hosts_only)
    .with_submit_limit(limiter)
    .with_tenant_queues_max(setup.tenant_queues_max);
    if let Some(dir) = &web.timelines {
        state = state.with_timelines(dir.clone());
    }
    state = state.with_simulator(crate::simulations::Simulator::new(web.sim.clone()));
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    if let Auth::Keys(keys) = &setup.auth {
        tracing::info!(keys = keys.len(), "API keys required (--api-keys)");
    }
    tracing::info!(%addr, "API listening on http://{addr}/api/v1");
    ready_line(&format!("orq API listening on http://{addr}/api/v1"));
    if dashboard.is_built() {
        tracing::info!(from = %dashboard.describe(), "dashboard at http://{addr}/");
    } else {
        tracing::warn!(
            from = %dashboard.describe(),
            "the dashboard is not built (no index.html); http://{addr}/ says how to build it"
        );
    }
    crate::serve::serve(listener, app(state), setup.limits, shutdown).await;
    Ok(())
}

fn make_worker(rt: &Runtime, pool: &PoolArgs, http: &HttpArgs) -> Result<Worker, String> {
    Ok(Worker::new(
        rt.store.clone(),
        rt.clock.clone(),
        rt.entropy.clone(),
        builtin(http.allow("worker")),
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

/// `orq key new`: the key and its file entry, as printed.
pub fn key_new(a: &KeyNewArgs) -> Result<String, String> {
    let mut queues = BTreeSet::new();
    for q in &a.queues {
        if !is_valid_name(q) {
            return Err(format!("--queues: {q:?} must match [A-Za-z0-9._-]{{1,64}}"));
        }
        queues.insert(q.clone());
    }
    let queues = (!queues.is_empty()).then_some(queues);
    if !a.tenants.is_empty() && !a.worker {
        return Err("--tenants: applies to --worker keys only (a tenant key has --tenant)".into());
    }
    let mut tenants = BTreeSet::new();
    for t in &a.tenants {
        if !is_valid_name(t) {
            return Err(format!(
                "--tenants: {t:?} must match [A-Za-z0-9._-]{{1,64}}"
            ));
        }
        tenants.insert(t.clone());
    }
    if tenants.len() > orq::ops::LEASE_TENANTS_MAX {
        return Err(format!(
            "--tenants: at most {} tenants",
            orq::ops::LEASE_TENANTS_MAX
        ));
    }
    let tenants = (!tenants.is_empty()).then_some(tenants);
    let scope = match (&a.tenant, a.worker) {
        (None, true) => Scope::Worker { queues, tenants },
        (None, false) if queues.is_some() => {
            return Err("--queues: applies to --tenant and --worker keys only".into())
        }
        (None, false) => Scope::Admin,
        (Some(_), true) => return Err("--tenant and --worker: give one of them".into()),
        (Some(t), false) => {
            if !is_valid_name(t) {
                return Err("--tenant: must match [A-Za-z0-9._-]{1,64}".into());
            }
            Scope::Tenant {
                tenant: t.clone(),
                queues,
            }
        }
    };
    let key = crate::auth::new_key()?;
    let name = match &a.name {
        Some(n) if is_valid_name(n) => n.clone(),
        Some(_) => return Err("--name: must match [A-Za-z0-9._-]{1,64}".into()),
        None => {
            let base = match (&a.tenant, a.worker) {
                (Some(t), _) => t.as_str(),
                (None, true) => "worker",
                (None, false) => "admin",
            };
            let base = &base[..base.len().min(55)];
            format!("{base}-{}", &crate::auth::sha256_hex(&key)[..8])
        }
    };
    Ok(format!(
        "{key}\n# Append to the API keys file (--api-keys). The key above is shown only this once: \
         orq keeps only its SHA-256.\n{}",
        crate::auth::toml_entry(&name, &key, &scope)
    ))
}

/// The checks of a role's options that need no store, made before anything starts (and by
/// `orq config print`): directories, worker numbers and id, the API's keys file and limits.
/// The API's checked options (its keys file loaded once, here) when the role serves the API.
/// Errors are for the user (exit code 2).
pub fn preflight(command: &Command) -> Result<Option<ApiSetup>, String> {
    Ok(match command {
        Command::Serve(a) => {
            check_web(&a.web)?;
            let setup = a.listen.setup()?;
            if a.pool.concurrency != 0 {
                a.pool.check()?;
            }
            Some(setup)
        }
        Command::Api(a) => {
            check_web(&a.web)?;
            Some(a.listen.setup()?)
        }
        Command::Worker(a) => {
            a.pool.check()?;
            None
        }
        _ => None,
    })
}

/// Run the parsed command until SIGINT / SIGTERM. Errors are for the user (exit code 2).
pub async fn run(cli: Cli) -> Result<(), String> {
    if let Command::Key(KeyCommand::New(a)) = &cli.command {
        say!("{}", key_new(a)?.trim_end_matches('\n'));
        return Ok(());
    }
    if let Command::Bench(a) = &cli.command {
        return orq_bench::cli(a).await;
    }
    if let Command::Config(crate::config::ConfigCommand::Print(a)) = &cli.command {
        say!("{}", crate::config::print(a)?.trim_end_matches('\n'));
        return Ok(());
    }
    // Check the API's options and bind its address before anything starts, so a bad keys file
    // or a refused address stops orq at once (exit code 2).
    let setup = preflight(&cli.command)?;
    let listen = match &cli.command {
        Command::Serve(a) => Some(&a.listen),
        Command::Api(a) => Some(&a.listen),
        _ => None,
    };
    let api = match (listen, setup) {
        (Some(l), Some(setup)) => {
            let listener = bind_api(&l.listen, &setup.auth, l.insecure_no_auth).await?;
            Some((setup, listener))
        }
        _ => None,
    };
    let shutdown = shutdown_signal();
    match cli.command {
        Command::Serve(a) => {
            // npm runs only for a dashboard served from disk (never when it is embedded).
            if let (false, crate::dashboard::Source::Dir(dir)) =
                (a.no_dashboard_build, a.web.dashboard_source())
            {
                let npm = crate::dashboard::find_on_path("npm");
                tokio::select! {
                    _ = crate::dashboard::ensure_built(&dir, npm.as_deref()) => {}
                    _ = shutdown.cancelled() => return Ok(()),
                }
            }
            let (setup, listener) = api.expect("serve has an API");
            let Some(rt) = open_or_stop(&a.store, "serve", true, &shutdown).await? else {
                return Ok(());
            };
            // --concurrency 0: no built-in worker (tasks run on HTTP workers, /api/v1/leases,
            // or `orq worker` processes).
            let worker = match a.pool.concurrency {
                0 => None,
                _ => Some(make_worker(&rt, &a.pool, &a.http)?),
            };
            let scheduler = make_scheduler(&rt);
            let (s1, s2) = (shutdown.clone(), shutdown.clone());
            let w = tokio::spawn(async move {
                match worker {
                    Some(worker) => worker.run(s1).await,
                    None => tracing::info!("no built-in worker (--concurrency 0)"),
                }
            });
            let s = tokio::spawn(async move { scheduler.run(s2).await });
            let r = serve_http(&rt, listener, &setup, &a.web, &a.http, shutdown.clone()).await;
            shutdown.cancel();
            let _ = tokio::join!(w, s);
            r
        }
        Command::Api(a) => {
            let (setup, listener) = api.expect("api has an API");
            let Some(rt) = open_or_stop(&a.store, "api", false, &shutdown).await? else {
                return Ok(());
            };
            serve_http(&rt, listener, &setup, &a.web, &a.http, shutdown).await
        }
        Command::Worker(a) => {
            a.metrics.serve(shutdown.clone()).await?;
            let Some(rt) = open_or_stop(&a.store, "worker", false, &shutdown).await? else {
                return Ok(());
            };
            let worker = make_worker(&rt, &a.pool, &a.http)?;
            ready_line(&format!("orq worker {} started", worker.id()));
            worker.run(shutdown).await;
            Ok(())
        }
        Command::Scheduler(a) => {
            a.metrics.serve(shutdown.clone()).await?;
            let Some(rt) = open_or_stop(&a.store, "scheduler", false, &shutdown).await? else {
                return Ok(());
            };
            let scheduler = make_scheduler(&rt);
            scheduler.run(shutdown).await;
            Ok(())
        }
        _ => unreachable!("handled above, or in main (the admin commands)"),
    }
}
