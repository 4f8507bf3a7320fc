//! `orq bench`: the load generator. Against a Redis (`--redis URL`) or the embedded store it runs
//! three phases on queues of its own, with a no-op handler, and reports what a user of a task
//! queue asks first. The phases and the JSON shape are shared with `bench/bullmq/bench.mjs`, so
//! the two engines can be compared side by side on the same Redis (`bench/README.md`):
//!
//! 1. **submit**: N tasks in batches of B (spread over T tenants and P priorities), no worker
//!    running → `submit_per_s`, and `mem_bytes_per_task` (Redis `INFO memory` `used_memory`
//!    delta / N; `null` on the embedded store).
//! 2. **end to end**: a worker pool of concurrency C runs while N more tasks are submitted →
//!    `complete_per_s` (N / first submit to last completion), `wait_ms` (handler start minus
//!    the task's `created_at`, i.e. submit → handler start), `script_calls_per_task` (every
//!    script call of the phase, idle polls included, / N) and `script_calls` (the same calls
//!    by script name: N / `script_calls.lease` is the tasks per lease call).
//! 3. **delayed** (with `--delayed D`): D tasks due `delay_ms` .. `delay_ms + spread` after
//!    submit, spread evenly, workers running → `lateness_ms` (handler start minus `run_at`).
//!
//! With `--queues Q` each phase's tasks go round robin to Q queues, which the worker pool
//! serves together; their names are chosen so their hash slots spread evenly over a Redis
//! Cluster's slots ([`queue_names`]). Against Redis the bench also reports the Redis work of the
//! end-to-end phase on each primary (`redis_work`, [`RedisWork`]): script calls and their time
//! from `INFO commandstats`, CPU from `INFO cpu`, as deltas (the counters are never reset).
//!
//! Latency figures are `{p50, p99, max}` in ms (nearest rank). Handler start times are read from
//! this process's clock and task times from the store's: on one machine they agree to about a
//! millisecond.

use orq::resp::Resp;
use orq::{
    Clock, Entropy, Handler, HandlerError, Handlers, Store, StoreError, TaskContext, TaskSpec,
    Worker, WorkerConfig,
};
use orq_lua::Script;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// What to run (the `orq bench` options).
#[derive(Debug, Clone)]
pub struct BenchPlan {
    /// N: tasks per phase (1..=10,000,000).
    pub tasks: u64,
    /// Q: queues each phase's tasks are spread over, round robin (1..=[`QUEUES_MAX`]).
    pub queues: usize,
    /// B: tasks per submit call (1..=1000).
    pub batch: u64,
    /// C: handlers running at once in the worker pool (1..=10,000).
    pub concurrency: usize,
    /// Lanes the pool's slots are split into ([`orq::WorkerConfig::lanes`], 1..=16).
    pub lanes: usize,
    /// T: tenants the tasks are spread over, round robin (1..=100,000).
    pub tenants: u64,
    /// P: priorities the tasks are spread over, round robin: task k has priority k mod P
    /// (1..=10; 1 = all at priority 0).
    pub priorities: u8,
    /// D: delayed tasks in phase 3 (0 skips it).
    pub delayed: u64,
    /// Delay of the first delayed task (ms).
    pub delay_ms: u64,
    /// The delays are spread evenly over [delay_ms, delay_ms + spread] (ms).
    pub delay_spread_ms: u64,
}

/// The most queues a phase may spread its tasks over (`--queues`).
pub const QUEUES_MAX: usize = 64;

/// How many names [`queue_names`] tries for one queue before it takes a name whatever its slot.
/// A name lands in its target (half of one of at most [`QUEUES_MAX`] equal slices of the 16,384
/// slots) with probability 1/128 or more, so this bound is never reached in practice.
const QUEUE_NAME_TRIES_MAX: u32 = 100_000;

/// Redis Cluster's hash slots.
const CLUSTER_SLOTS: u32 = 16_384;

/// The Redis Cluster hash slot of a key whose hash tag is `tag`: CRC16 (XMODEM) mod 16,384. Every
/// key of queue `q` has the tag `{q}`, so this is the queue's slot.
pub fn hash_slot(tag: &str) -> u16 {
    let mut crc = 0u16;
    for &b in tag.as_bytes() {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    (u32::from(crc) % CLUSTER_SLOTS) as u16
}

/// The names of a phase's `n` queues: `<base>` alone when `n` is 1 (the names of a one-queue run
/// do not change); otherwise queue i is `<base>-<i>`, or `<base>-<i>.<k>` with the smallest k
/// that puts its hash slot in the middle half of the i-th of n equal slices of the 16,384 slots.
/// So on a cluster whose primaries hold equal runs of slots (as `redis-cli --cluster create`
/// splits them) the queues spread evenly over the primaries, and a run's spread does not depend
/// on its random prefix. A user's queues land wherever their names hash.
pub fn queue_names(base: &str, n: usize) -> Vec<String> {
    assert!((1..=QUEUES_MAX).contains(&n), "queues {n}");
    if n == 1 {
        return vec![base.to_string()];
    }
    let width = CLUSTER_SLOTS / n as u32;
    (0..n as u32)
        .map(|i| {
            let lo = i * CLUSTER_SLOTS / n as u32 + width / 4;
            let target = lo..lo + width / 2;
            let plain = format!("{base}-{i}");
            std::iter::once(plain.clone())
                .chain((1..QUEUE_NAME_TRIES_MAX).map(|k| format!("{plain}.{k}")))
                .find(|name| target.contains(&u32::from(hash_slot(name))))
                .unwrap_or(plain)
        })
        .collect()
}

/// Nearest-rank percentiles of a latency sample (ms).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    /// Median (ms).
    pub p50: f64,
    /// 99th percentile (ms).
    pub p99: f64,
    /// Largest (ms).
    pub max: f64,
}

impl Latency {
    /// The summary of `xs` (ms), or `None` when empty.
    pub fn of(xs: &[f64]) -> Option<Latency> {
        if xs.is_empty() {
            return None;
        }
        let mut s = xs.to_vec();
        s.sort_by(f64::total_cmp);
        let rank = |q: f64| s[((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
        Some(Latency {
            p50: rank(0.5),
            p99: rank(0.99),
            max: s[s.len() - 1],
        })
    }
}

/// The report: printed as a table and written as JSON (`--json FILE`).
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Always `"orq"` (BullMQ's script writes `"bullmq"`).
    pub engine: &'static str,
    /// orq's version.
    pub version: &'static str,
    /// `"redis"` or `"embedded"`.
    pub store: &'static str,
    /// N.
    pub tasks: u64,
    /// Q: the queues each phase's tasks were spread over.
    pub queues: usize,
    /// B.
    pub batch: u64,
    /// C.
    pub concurrency: usize,
    /// Lanes of the pool.
    pub lanes: usize,
    /// T.
    pub tenants: u64,
    /// P.
    pub priorities: u8,
    /// D.
    pub delayed: u64,
    /// Phase 1: tasks submitted per second.
    pub submit_per_s: f64,
    /// Phase 2: tasks completed per second, first submit to last completion.
    pub complete_per_s: f64,
    /// Phase 2: submit → handler start (ms).
    pub wait_ms: Option<Latency>,
    /// Phase 3: handler start − run_at (ms); `null` without delayed tasks.
    pub lateness_ms: Option<Latency>,
    /// Phase 1: Redis memory per queued task (bytes); `null` on the embedded store.
    pub mem_bytes_per_task: Option<f64>,
    /// Phase 2: script calls per task.
    pub script_calls_per_task: f64,
    /// Phase 2: script calls by script name (`lease`, `complete_batch`, `enqueue`, ...), so the
    /// tasks per lease call are `tasks / script_calls.lease`.
    pub script_calls: BTreeMap<&'static str, u64>,
    /// Phase 2: the Redis work it caused, per primary; `null` on the embedded store, or when
    /// Redis refuses `INFO`.
    pub redis_work: Option<RedisWork>,
}

/// The Redis work of the end-to-end phase: deltas of `INFO commandstats` and `INFO cpu` on each
/// primary between the phase's first submit and its last completion (the counters are never
/// reset). Script calls are EVALSHA and EVAL (the NOSCRIPT fall-back), the bench's stats polls
/// and the pool's idle lease calls included; CPU is the whole server's (`used_cpu_sys` +
/// `used_cpu_user`), so on a shared server it includes other clients' work.
#[derive(Debug, Clone, Serialize)]
pub struct RedisWork {
    /// Script calls on all primaries.
    pub script_calls: u64,
    /// Time Redis spent in scripts, all primaries, per task of the phase (µs).
    pub script_usec_per_task: f64,
    /// Commands of any kind on all primaries.
    pub calls: u64,
    /// CPU time of all primaries (s).
    pub cpu_s: f64,
    /// Each primary, sorted by address.
    pub primaries: Vec<PrimaryWork>,
}

/// The end-to-end phase's work on one primary ([`RedisWork`]).
#[derive(Debug, Clone, Serialize)]
pub struct PrimaryWork {
    /// `host:port` as the cluster names it; `""` for a single server or a Sentinel primary.
    pub node: String,
    /// The phase's queues whose slot it serves.
    pub queues: usize,
    /// The phase's tasks in those queues.
    pub tasks: u64,
    /// Script calls (EVALSHA + EVAL).
    pub script_calls: u64,
    /// Its share of all primaries' script calls (%).
    pub script_calls_share_pct: f64,
    /// Time in scripts (µs).
    pub script_usec: u64,
    /// Time in scripts per task of its queues (µs; `null` when it serves none).
    pub script_usec_per_task: Option<f64>,
    /// Commands of any kind.
    pub calls: u64,
    /// CPU time (s).
    pub cpu_s: f64,
    /// Its share of all primaries' CPU time (%).
    pub cpu_share_pct: f64,
}

/// The counters of one Redis server that [`RedisWork`] takes deltas of.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RedisCounters {
    /// `cmdstat_evalsha` + `cmdstat_eval` calls.
    pub script_calls: u64,
    /// `cmdstat_evalsha` + `cmdstat_eval` usec.
    pub script_usec: u64,
    /// Calls of every `cmdstat_*` line.
    pub calls: u64,
    /// `used_cpu_sys` + `used_cpu_user` (s).
    pub cpu_s: f64,
}

impl RedisCounters {
    /// Read the counters from the text of `INFO commandstats cpu`; None when the CPU fields are
    /// missing (commandstats lists only commands called since the last reset, so none may be
    /// missing).
    pub fn parse(info: &str) -> Option<RedisCounters> {
        let mut c = RedisCounters::default();
        let (mut sys, mut user) = (None, None);
        for line in info.lines() {
            let line = line.trim_end();
            if let Some(rest) = line.strip_prefix("cmdstat_") {
                let Some((command, fields)) = rest.split_once(':') else {
                    continue;
                };
                let field = |name: &str| {
                    fields
                        .split(',')
                        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0)
                };
                c.calls += field("calls");
                if command == "evalsha" || command == "eval" {
                    c.script_calls += field("calls");
                    c.script_usec += field("usec");
                }
            } else if let Some(v) = line.strip_prefix("used_cpu_sys:") {
                sys = v.parse::<f64>().ok();
            } else if let Some(v) = line.strip_prefix("used_cpu_user:") {
                user = v.parse::<f64>().ok();
            }
        }
        c.cpu_s = sys? + user?;
        Some(c)
    }

    /// What happened from `before` to `self` (zero for a counter that went back, as after a
    /// restart or a `CONFIG RESETSTAT` by someone else).
    fn since(&self, before: &RedisCounters) -> RedisCounters {
        RedisCounters {
            script_calls: self.script_calls.saturating_sub(before.script_calls),
            script_usec: self.script_usec.saturating_sub(before.script_usec),
            calls: self.calls.saturating_sub(before.calls),
            cpu_s: (self.cpu_s - before.cpu_s).max(0.0),
        }
    }
}

impl RedisWork {
    /// The work from the `before` and `after` counters of each primary (by node; a node missing
    /// from either, as after a failover, is left out), for `tasks_by_node`: the phase's queues
    /// and tasks on each node; `tasks` in all.
    pub fn of(
        before: &[(String, RedisCounters)],
        after: &[(String, RedisCounters)],
        tasks_by_node: &BTreeMap<String, (usize, u64)>,
        tasks: u64,
    ) -> RedisWork {
        let deltas: Vec<(String, RedisCounters)> = after
            .iter()
            .filter_map(|(node, a)| {
                let (_, b) = before.iter().find(|(n, _)| n == node)?;
                Some((node.clone(), a.since(b)))
            })
            .collect();
        let script_calls: u64 = deltas.iter().map(|(_, d)| d.script_calls).sum();
        let script_usec: u64 = deltas.iter().map(|(_, d)| d.script_usec).sum();
        let cpu_s: f64 = deltas.iter().map(|(_, d)| d.cpu_s).sum();
        let pct = |part: f64, all: f64| if all > 0.0 { 100.0 * part / all } else { 0.0 };
        let primaries = deltas
            .iter()
            .map(|(node, d)| {
                let (queues, node_tasks) = tasks_by_node.get(node).copied().unwrap_or((0, 0));
                PrimaryWork {
                    node: node.clone(),
                    queues,
                    tasks: node_tasks,
                    script_calls: d.script_calls,
                    script_calls_share_pct: pct(d.script_calls as f64, script_calls as f64),
                    script_usec: d.script_usec,
                    script_usec_per_task: (node_tasks > 0)
                        .then(|| d.script_usec as f64 / node_tasks as f64),
                    calls: d.calls,
                    cpu_s: d.cpu_s,
                    cpu_share_pct: pct(d.cpu_s, cpu_s),
                }
            })
            .collect();
        RedisWork {
            script_calls,
            script_usec_per_task: script_usec as f64 / tasks as f64,
            calls: deltas.iter().map(|(_, d)| d.calls).sum(),
            cpu_s,
            primaries,
        }
    }
}

/// A store that counts the script calls going through it, in all and by script.
pub struct CountingStore {
    inner: Arc<dyn Store>,
    calls: AtomicU64,
    by_script: Mutex<BTreeMap<&'static str, u64>>,
}

impl CountingStore {
    /// Wrap `inner`.
    pub fn new(inner: Arc<dyn Store>) -> Self {
        CountingStore {
            inner,
            calls: AtomicU64::new(0),
            by_script: Mutex::new(BTreeMap::new()),
        }
    }

    /// Script calls so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Script calls so far, by script name.
    pub fn calls_by_script(&self) -> BTreeMap<&'static str, u64> {
        self.by_script.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Store for CountingStore {
    async fn eval(
        &self,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<Resp, StoreError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        *self
            .by_script
            .lock()
            .unwrap()
            .entry(script.name)
            .or_insert(0) += 1;
        self.inner.eval(script, keys, args).await
    }

    fn wake(&self, channels: &[String]) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.inner.wake(channels)
    }
}

/// The no-op handler: records when it started, relative to the task's reference time.
struct Probe {
    clock: Arc<dyn Clock>,
    /// ms from the reference (created_at, or run_at when `delayed`) to handler start.
    samples: Arc<Mutex<Vec<f64>>>,
    started: Arc<AtomicU64>,
    delayed: bool,
}

#[async_trait::async_trait]
impl Handler for Probe {
    async fn handle(&self, ctx: TaskContext) -> Result<serde_json::Value, HandlerError> {
        let now = self.clock.now_ms() as f64;
        let reference = if self.delayed {
            ctx.task.run_at_ms
        } else {
            ctx.task.created_at_ms
        } as f64;
        if ctx.attempt == 1 {
            self.samples.lock().unwrap().push(now - reference);
            self.started.fetch_add(1, Ordering::Relaxed);
        }
        Ok(serde_json::Value::Null)
    }
}

/// Progress reporting, so a long run shows where it is (an `indicatif` bar in the CLI).
pub trait Progress: Send + Sync {
    /// A phase began, with `total` units of work.
    fn phase(&self, name: &str, total: u64);
    /// `done` units of the current phase are done.
    fn set(&self, done: u64);
    /// The run ended (clear the bar).
    fn finish(&self) {}
}

/// Progress that reports nothing (tests).
pub struct Quiet;

impl Progress for Quiet {
    fn phase(&self, _: &str, _: u64) {}
    fn set(&self, _: u64) {}
}

/// Reads Redis's `used_memory` (bytes), when the bench runs against Redis.
pub type MemoryProbe =
    Box<dyn Fn() -> futures_util::future::BoxFuture<'static, Option<u64>> + Send + Sync>;

/// Reads each primary's [`RedisCounters`] (None when Redis refuses `INFO`).
pub type CountersProbe = Box<
    dyn Fn() -> futures_util::future::BoxFuture<'static, Option<Vec<(String, RedisCounters)>>>
        + Send
        + Sync,
>;

/// Names the primary of a queue (`""` off a cluster; None when a node does not answer).
pub type PrimaryProbe =
    Box<dyn Fn(String) -> futures_util::future::BoxFuture<'static, Option<String>> + Send + Sync>;

/// What the bench reads from Redis besides running the scripts (all None on the embedded store).
#[derive(Default)]
pub struct RedisProbes {
    /// `used_memory`, for `mem_bytes_per_task`.
    pub memory: Option<MemoryProbe>,
    /// The counters of each primary, for `redis_work`.
    pub counters: Option<CountersProbe>,
    /// The primary of a queue, for `redis_work`.
    pub primary: Option<PrimaryProbe>,
}

/// Run the plan against `store`. `queue_prefix` names this run's queues (`<prefix>-submit`,
/// `<prefix>-e2e`, `<prefix>-delayed`, each followed by `-<i>...` with several queues:
/// [`queue_names`]); `probes` read Redis's memory use and work.
/// Errors: the first failed submit or stats call, as text.
pub async fn run(
    plan: &BenchPlan,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    store_kind: &'static str,
    queue_prefix: &str,
    probes: RedisProbes,
    progress: &dyn Progress,
) -> Result<BenchReport, String> {
    assert!((1..=QUEUES_MAX).contains(&plan.queues), "queues");
    let counting = Arc::new(CountingStore::new(store));
    let entropy = Arc::new(Entropy::from_os());
    let client = orq::Client::new(counting.clone(), clock.clone(), entropy.clone());

    // 1. submit, no worker running.
    let q_submit = queue_names(&format!("{queue_prefix}-submit"), plan.queues);
    let memory = &probes.memory;
    let mem0 = match memory {
        Some(m) => m().await,
        None => None,
    };
    progress.phase("submit", plan.tasks);
    let t0 = Instant::now();
    submit_all(&client, plan, &q_submit, plan.tasks, None, progress).await?;
    let submit_s = t0.elapsed().as_secs_f64();
    let mem1 = match memory {
        Some(m) => m().await,
        None => None,
    };
    let mem_bytes_per_task = match (mem0, mem1) {
        (Some(a), Some(b)) => Some((b as f64 - a as f64) / plan.tasks as f64),
        _ => None,
    };

    // 2. end to end: the pool runs while tasks are submitted.
    let ctx = Phase {
        store: &counting,
        clock: &clock,
        entropy: &entropy,
        client: &client,
        plan,
        progress,
    };
    let q_e2e = queue_names(&format!("{queue_prefix}-e2e"), plan.queues);
    let work = match (&probes.counters, &probes.primary) {
        (Some(counters), Some(primary)) => Some(Work {
            counters,
            tasks_by_node: tasks_by_node(primary, &q_e2e, plan.tasks).await,
        }),
        _ => None,
    };
    let e2e = ctx
        .run("end to end", &q_e2e, plan.tasks, false, work.as_ref())
        .await?;

    // 3. delayed tasks, workers running.
    let lateness = if plan.delayed > 0 {
        ctx.run(
            "delayed",
            &queue_names(&format!("{queue_prefix}-delayed"), plan.queues),
            plan.delayed,
            true,
            None,
        )
        .await?
        .latency
    } else {
        None
    };

    Ok(BenchReport {
        engine: "orq",
        version: env!("CARGO_PKG_VERSION"),
        store: store_kind,
        tasks: plan.tasks,
        queues: plan.queues,
        batch: plan.batch,
        concurrency: plan.concurrency,
        // The lanes the pool ran (a pool never has more lanes than slots).
        lanes: plan.lanes.min(plan.concurrency),
        tenants: plan.tenants,
        priorities: plan.priorities,
        delayed: plan.delayed,
        submit_per_s: plan.tasks as f64 / submit_s,
        complete_per_s: plan.tasks as f64 / e2e.seconds,
        wait_ms: e2e.latency,
        lateness_ms: lateness,
        mem_bytes_per_task,
        script_calls_per_task: e2e.calls as f64 / plan.tasks as f64,
        script_calls: e2e.by_script,
        redis_work: e2e.redis_work,
    })
}

/// How many of `queues` each primary serves, and how many of `n` tasks (spread round robin)
/// those queues get; empty when a node does not answer (the report then shows no per-task time
/// per primary).
async fn tasks_by_node(
    primary: &PrimaryProbe,
    queues: &[String],
    n: u64,
) -> BTreeMap<String, (usize, u64)> {
    let mut out: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for (i, q) in queues.iter().enumerate() {
        let Some(node) = primary(orq::keys::queue_keys(q)[0].clone()).await else {
            return BTreeMap::new();
        };
        let e = out.entry(node).or_default();
        e.0 += 1;
        e.1 += tasks_of_queue(n, queues.len(), i);
    }
    out
}

/// How many of `n` tasks spread round robin over `queues` queues go to queue `i`.
fn tasks_of_queue(n: u64, queues: usize, i: usize) -> u64 {
    let q = queues as u64;
    n / q + u64::from((i as u64) < n % q)
}

/// Reading the Redis work of a phase.
struct Work<'a> {
    counters: &'a CountersProbe,
    tasks_by_node: BTreeMap<String, (usize, u64)>,
}

/// What a phase with workers measured.
struct PhaseResult {
    /// Handler start minus the reference time (submit, or run_at for delayed tasks), ms.
    latency: Option<Latency>,
    /// First submit to last completion (s).
    seconds: f64,
    /// Script calls during the phase.
    calls: u64,
    /// The same, by script name.
    by_script: BTreeMap<&'static str, u64>,
    /// The Redis work, when asked for and Redis answered.
    redis_work: Option<RedisWork>,
}

/// What the phases with workers share.
struct Phase<'a> {
    store: &'a Arc<CountingStore>,
    clock: &'a Arc<dyn Clock>,
    entropy: &'a Arc<Entropy>,
    client: &'a orq::Client,
    plan: &'a BenchPlan,
    progress: &'a dyn Progress,
}

impl Phase<'_> {
    /// Run a worker pool on `queues` while `n` tasks are submitted to them (due `delay_ms` ..
    /// `delay_ms + spread` from now when `delayed`), until all completed; with `work`, read
    /// the Redis counters before the first submit and after the last completion.
    async fn run(
        &self,
        name: &str,
        queues: &[String],
        n: u64,
        delayed: bool,
        work: Option<&Work<'_>>,
    ) -> Result<PhaseResult, String> {
        let samples = Arc::new(Mutex::new(Vec::with_capacity(n as usize)));
        let started = Arc::new(AtomicU64::new(0));
        let probe = Probe {
            clock: self.clock.clone(),
            samples: samples.clone(),
            started: started.clone(),
            delayed,
        };
        let pool = pool(
            self.store,
            self.clock,
            self.entropy,
            self.plan,
            queues,
            probe,
        );
        let stop = CancellationToken::new();
        let running = tokio::spawn({
            let stop = stop.clone();
            async move { pool.run(stop).await }
        });
        let calls0 = self.store.calls();
        let by_script0 = self.store.calls_by_script();
        let counters0 = match work {
            Some(w) => (w.counters)().await,
            None => None,
        };
        self.progress.phase(name, n);
        let t0 = Instant::now();
        let base = delayed.then(|| self.clock.now_ms());
        let done = async {
            submit_all(self.client, self.plan, queues, n, base, &Quiet).await?;
            wait_completed(self.client, queues, n, &started, self.progress).await
        }
        .await;
        let seconds = t0.elapsed().as_secs_f64();
        let counters1 = match work {
            Some(w) => (w.counters)().await,
            None => None,
        };
        let redis_work = match (work, counters0, counters1) {
            (Some(w), Some(c0), Some(c1)) => Some(RedisWork::of(&c0, &c1, &w.tasks_by_node, n)),
            _ => None,
        };
        let calls = self.store.calls() - calls0;
        let mut by_script = self.store.calls_by_script();
        for (name, c) in by_script.iter_mut() {
            *c -= by_script0.get(name).copied().unwrap_or(0);
        }
        by_script.retain(|_, c| *c > 0);
        stop.cancel();
        let _ = running.await;
        done?;
        let latency = Latency::of(&samples.lock().unwrap());
        Ok(PhaseResult {
            latency,
            seconds,
            calls,
            by_script,
            redis_work,
        })
    }
}

/// The worker pool of a phase: concurrency C, serving only `queues`, the probe for type `noop`.
fn pool(
    store: &Arc<CountingStore>,
    clock: &Arc<dyn Clock>,
    entropy: &Arc<Entropy>,
    plan: &BenchPlan,
    queues: &[String],
    probe: Probe,
) -> Worker {
    let store: Arc<dyn Store> = store.clone();
    Worker::new(
        store,
        clock.clone(),
        entropy.clone(),
        Handlers::new().register("noop", probe),
        WorkerConfig {
            queues: queues.to_vec(),
            concurrency: plan.concurrency,
            lanes: plan.lanes,
            ..WorkerConfig::default()
        },
    )
}

/// Submit `n` no-op tasks in batches of B, task k to queue k mod Q of `queues` and tenant k mod
/// T (a batch of several queues is one script call per queue); with `delay_base` (ms since the
/// epoch), task k is due at base + delay_ms + spread × k / (n − 1).
async fn submit_all(
    client: &orq::Client,
    plan: &BenchPlan,
    queues: &[String],
    n: u64,
    delay_base: Option<u64>,
    progress: &dyn Progress,
) -> Result<(), String> {
    let mut i = 0u64;
    while i < n {
        let end = (i + plan.batch).min(n);
        let specs = (i..end)
            .map(|k| {
                let mut spec = TaskSpec::new("{}")
                    .queue(&queues[(k % queues.len() as u64) as usize])
                    .task_type("noop")
                    .tenant(format!("t{}", k % plan.tenants))
                    .priority((k % u64::from(plan.priorities.clamp(1, 10))) as u8);
                if let Some(base) = delay_base {
                    let spread = if n > 1 {
                        plan.delay_spread_ms * k / (n - 1)
                    } else {
                        0
                    };
                    spec.run_at_ms = Some(base + plan.delay_ms + spread);
                }
                spec
            })
            .collect();
        client
            .submit_batch(specs)
            .await
            .map_err(|e| format!("submit to {}: {e}", queues.join(", ")))?;
        i = end;
        progress.set(i);
    }
    Ok(())
}

/// Wait until `n` handlers started and the store counts all completed in `queues` (each one's
/// round-robin share of `n`).
async fn wait_completed(
    client: &orq::Client,
    queues: &[String],
    n: u64,
    started: &AtomicU64,
    progress: &dyn Progress,
) -> Result<(), String> {
    loop {
        let s = started.load(Ordering::Relaxed);
        progress.set(s);
        if s >= n {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    for (i, queue) in queues.iter().enumerate() {
        let want = tasks_of_queue(n, queues.len(), i);
        loop {
            let st = client
                .stats(queue)
                .await
                .map_err(|e| format!("stats of {queue}: {e}"))?;
            if st.counts.get(&orq::Status::Completed).copied().unwrap_or(0) as u64 >= want {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }
    Ok(())
}

/// An `indicatif` progress bar, one per phase.
struct Bar(indicatif::ProgressBar);

impl Progress for Bar {
    fn phase(&self, name: &str, total: u64) {
        self.0.reset();
        self.0.set_length(total);
        self.0.set_position(0);
        self.0.set_message(name.to_string());
    }
    fn set(&self, done: u64) {
        self.0.set_position(done);
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

/// `orq bench`: run the plan from the command line, print the table, write the JSON. Against
/// Redis the run's queues (`ob-<id>-*`) are deleted at the end, whatever happened.
/// Errors are for the user (exit code 2).
pub async fn cli(a: &crate::cli::BenchArgs) -> Result<(), String> {
    let plan = BenchPlan {
        tasks: a.tasks,
        queues: a.queues as usize,
        batch: a.batch,
        concurrency: a.concurrency as usize,
        lanes: a.lanes as usize,
        tenants: a.tenants,
        priorities: a.priorities,
        delayed: a.delayed,
        delay_ms: a.delay_ms,
        delay_spread_ms: a.delay_spread_ms,
    };
    let clock: Arc<dyn Clock> = Arc::new(orq::SystemClock);
    // The run's queues are `ob-<8 random base32 digits>-<phase>`: unique per run, and about as
    // long as BullMQ's `orqbench` (bench/bullmq). Every task key holds its queue's name, and
    // jemalloc rounds a key up to its size class (16-byte steps here): the earlier names,
    // `orqbench-<ulid>-submit`, cost orq 32 bytes of `mem_bytes_per_task` per task that
    // BullMQ's short name does not.
    let id = Entropy::from_os()
        .ulid(clock.now_ms())
        .to_string()
        .to_lowercase();
    let prefix = format!("ob-{}", &id[id.len() - 8..]);
    let progress: Box<dyn Progress> = if a.no_progress {
        Box::new(Quiet)
    } else {
        let bar = indicatif::ProgressBar::new(plan.tasks);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg:>12} [{bar:40}] {pos}/{len} {per_sec} eta {eta}",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        Box::new(Bar(bar))
    };
    let report = match &a.redis {
        Some(url) => {
            let redis = Arc::new(orq::RedisStore::open(url).map_err(|e| e.to_string())?);
            redis
                .ping()
                .await
                .map_err(|e| format!("cannot reach Redis at {url}: {e}"))?;
            let store: Arc<dyn Store> = redis.clone();
            let r = run(
                &plan,
                store,
                clock,
                "redis",
                &prefix,
                redis_probes(&redis),
                &*progress,
            )
            .await;
            let pattern = format!("orq:{{{prefix}-*");
            if let Err(e) = redis
                .delete_matching(&pattern, &format!("{prefix}-*"))
                .await
            {
                eprintln!("orq bench: could not delete the bench queues ({pattern}): {e}");
            }
            r?
        }
        None => {
            let store: Arc<dyn Store> =
                Arc::new(orq_sim::MemoryStore::new(Arc::new(orq_sim::WallClock)));
            let probes = RedisProbes::default();
            run(&plan, store, clock, "embedded", &prefix, probes, &*progress).await?
        }
    };
    progress.finish();
    {
        use std::io::Write as _;
        // stdout may be a closed pipe (`orq bench | head`): the JSON file still gets written.
        let _ = write!(std::io::stdout(), "{}", table(&report));
    }
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&report).expect("the report serialises");
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// The probes of a bench on `redis`: its memory, each primary's counters, a key's primary.
fn redis_probes(redis: &Arc<orq::RedisStore>) -> RedisProbes {
    let r = redis.clone();
    let memory: MemoryProbe = Box::new(move || {
        let r = r.clone();
        Box::pin(async move { r.used_memory().await })
    });
    let r = redis.clone();
    let counters: CountersProbe = Box::new(move || {
        let r = r.clone();
        Box::pin(async move {
            r.info_each(&["commandstats", "cpu"])
                .await?
                .into_iter()
                .map(|(node, info)| Some((node, RedisCounters::parse(&info)?)))
                .collect()
        })
    });
    let r = redis.clone();
    let primary: PrimaryProbe = Box::new(move |key| {
        let r = r.clone();
        Box::pin(async move { r.primary_of(&key).await })
    });
    RedisProbes {
        memory: Some(memory),
        counters: Some(counters),
        primary: Some(primary),
    }
}

/// The report as a table for a terminal.
pub fn table(r: &BenchReport) -> String {
    let lat = |l: &Option<Latency>| match l {
        Some(l) => format!("p50 {:.1}  p99 {:.1}  max {:.1}", l.p50, l.p99, l.max),
        None => "-".to_string(),
    };
    // One queue (the default) keeps the workload line of the runs before `--queues`.
    let queues = if r.queues > 1 {
        format!(", {} queues", r.queues)
    } else {
        String::new()
    };
    let mut rows = vec![
        ("store", r.store.to_string()),
        (
            "workload",
            format!(
                "{} tasks, batch {}, concurrency {} in {} lanes, {} tenants, {} priorities, {} delayed{queues}",
                r.tasks, r.batch, r.concurrency, r.lanes, r.tenants, r.priorities, r.delayed
            ),
        ),
        ("submit", format!("{:.0} tasks/s", r.submit_per_s)),
        ("end to end", format!("{:.0} tasks/s", r.complete_per_s)),
        ("queue wait (ms)", lat(&r.wait_ms)),
        ("delayed lateness (ms)", lat(&r.lateness_ms)),
        (
            "memory per queued task",
            r.mem_bytes_per_task
                .map_or("-".to_string(), |b| format!("{b:.0} bytes")),
        ),
        (
            "script calls per task",
            format!("{:.3}", r.script_calls_per_task),
        ),
        (
            "script calls (end to end)",
            r.script_calls
                .iter()
                .map(|(name, c)| format!("{name} {c}"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    ];
    if let Some(w) = &r.redis_work {
        rows.push((
            "redis work (end to end)",
            format!(
                "{:.1} script usec per task, {} script calls, CPU {:.2} s, {} primaries",
                w.script_usec_per_task,
                w.script_calls,
                w.cpu_s,
                w.primaries.len()
            ),
        ));
        for p in &w.primaries {
            let per_task = p
                .script_usec_per_task
                .map_or("-".to_string(), |u| format!("{u:.1}"));
            rows.push((
                if p.node.is_empty() {
                    "  the server"
                } else {
                    "  primary"
                },
                format!(
                    "{}{} queue{}, {} tasks: script calls {} ({:.1}%), {per_task} script usec per task, CPU {:.2} s ({:.1}%)",
                    if p.node.is_empty() { String::new() } else { format!("{}: ", p.node) },
                    p.queues,
                    if p.queues == 1 { "" } else { "s" },
                    p.tasks,
                    p.script_calls,
                    p.script_calls_share_pct,
                    p.cpu_s,
                    p.cpu_share_pct
                ),
            ));
        }
    }
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(k, v)| format!("{k:<width$}  {v}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: nearest-rank percentiles as documented.
    #[test]
    fn latency_percentiles_are_nearest_rank() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        let l = Latency::of(&xs).unwrap();
        assert_eq!((l.p50, l.p99, l.max), (50.0, 99.0, 100.0));
        assert_eq!(Latency::of(&[]), None);
        let one = Latency::of(&[7.0]).unwrap();
        assert_eq!((one.p50, one.p99, one.max), (7.0, 7.0, 7.0));
    }

    // Goal: the slot function is Redis Cluster's (CRC16/XMODEM mod 16384).
    // Method: keys whose slots Redis documents or reports (`CLUSTER KEYSLOT`).
    #[test]
    fn hash_slot_is_redis_clusters() {
        assert_eq!(hash_slot("foo"), 12182);
        assert_eq!(hash_slot("bar"), 5061);
        assert_eq!(hash_slot("123456789"), 0x31c3);
    }

    // Goal: one queue keeps its old name; several spread evenly over the slots.
    // Method: for each count, each queue's slot lies in the middle half of its slice, and the
    // names are distinct, valid and derived from the base.
    #[test]
    fn queue_names_spread_over_the_slots() {
        assert_eq!(queue_names("ob-x-e2e", 1), vec!["ob-x-e2e".to_string()]);
        for n in [2, 3, 6, 7, QUEUES_MAX] {
            let names = queue_names("ob-abcdefgh-delayed", n);
            assert_eq!(names.len(), n);
            let distinct: std::collections::BTreeSet<_> = names.iter().collect();
            assert_eq!(distinct.len(), n, "{names:?}");
            let width = CLUSTER_SLOTS / n as u32;
            for (i, name) in names.iter().enumerate() {
                assert!(
                    name.starts_with(&format!("ob-abcdefgh-delayed-{i}")),
                    "{name}"
                );
                assert!(orq::keys::is_valid_name(name), "{name}");
                let slot = u32::from(hash_slot(name));
                let lo = i as u32 * CLUSTER_SLOTS / n as u32 + width / 4;
                assert!((lo..lo + width / 2).contains(&slot), "{name}: {slot}");
            }
        }
    }

    // Goal: round robin gives each queue its share, and the shares add up.
    #[test]
    fn tasks_of_queue_adds_up() {
        for (n, q) in [(10, 3), (1, 6), (50_000, 6), (7, 7)] {
            let shares: Vec<u64> = (0..q).map(|i| tasks_of_queue(n, q, i)).collect();
            assert_eq!(shares.iter().sum::<u64>(), n, "{n} over {q}");
            assert!(shares.iter().max().unwrap() - shares.iter().min().unwrap() <= 1);
        }
    }

    const INFO_BEFORE: &str = "# Commandstats\r\n\
        cmdstat_evalsha:calls=100,usec=2000,usec_per_call=20.00,rejected_calls=0,failed_calls=3\r\n\
        cmdstat_eval:calls=3,usec=300,usec_per_call=100.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=10,usec=50,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n\
        \r\n# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\n\
        used_cpu_sys_children:9.000000\r\nused_cpu_user_main_thread:2.000000\r\n";

    // Goal: the counters come from the documented INFO fields, children's CPU left out.
    #[test]
    fn counters_parse_commandstats_and_cpu() {
        let c = RedisCounters::parse(INFO_BEFORE).unwrap();
        assert_eq!(
            c,
            RedisCounters {
                script_calls: 103,
                script_usec: 2300,
                calls: 113,
                cpu_s: 3.75,
            }
        );
        assert_eq!(RedisCounters::parse("# Commandstats\r\n"), None);
    }

    // Goal: the work is the deltas, shared out per primary, per task of its queues.
    // Method: two primaries with known counters before and after; a third seen only after (a
    // failover) is left out.
    #[test]
    fn redis_work_is_the_deltas_per_primary() {
        let c = |script_calls, script_usec, calls, cpu_s| RedisCounters {
            script_calls,
            script_usec,
            calls,
            cpu_s,
        };
        let before = vec![
            ("a:1".to_string(), c(100, 1000, 200, 1.0)),
            ("b:2".to_string(), c(0, 0, 10, 5.0)),
        ];
        let after = vec![
            ("a:1".to_string(), c(400, 7000, 600, 4.0)),
            ("b:2".to_string(), c(100, 3000, 110, 6.0)),
            ("c:3".to_string(), c(9, 9, 9, 9.0)),
        ];
        let tasks = BTreeMap::from([("a:1".to_string(), (2, 60)), ("b:2".to_string(), (1, 40))]);
        let w = RedisWork::of(&before, &after, &tasks, 100);
        assert_eq!((w.script_calls, w.calls), (400, 500));
        assert_eq!(w.script_usec_per_task, 90.0);
        assert_eq!(w.cpu_s, 4.0);
        let a = &w.primaries[0];
        assert_eq!((a.node.as_str(), a.queues, a.tasks), ("a:1", 2, 60));
        assert_eq!((a.script_calls, a.script_calls_share_pct), (300, 75.0));
        assert_eq!(
            (a.script_usec_per_task, a.cpu_s, a.cpu_share_pct),
            (Some(100.0), 3.0, 75.0)
        );
        let b = &w.primaries[1];
        assert_eq!(
            (b.script_calls_share_pct, b.script_usec_per_task),
            (25.0, Some(75.0))
        );
        assert_eq!(w.primaries.len(), 2);
        assert!(table_of_work_lists_each_primary(&w));
    }

    fn table_of_work_lists_each_primary(w: &RedisWork) -> bool {
        let r = BenchReport {
            engine: "orq",
            version: "0",
            store: "redis",
            tasks: 100,
            queues: 3,
            batch: 10,
            concurrency: 1,
            lanes: 1,
            tenants: 1,
            priorities: 1,
            delayed: 0,
            submit_per_s: 1.0,
            complete_per_s: 1.0,
            wait_ms: None,
            lateness_ms: None,
            mem_bytes_per_task: None,
            script_calls_per_task: 1.0,
            script_calls: BTreeMap::new(),
            redis_work: Some(w.clone()),
        };
        let t = table(&r);
        t.contains("3 queues")
            && t.contains("a:1: 2 queues, 60 tasks: script calls 300 (75.0%), 100.0 script usec per task, CPU 3.00 s (75.0%)")
            && t.contains("b:2: 1 queue, 40 tasks")
    }
}
