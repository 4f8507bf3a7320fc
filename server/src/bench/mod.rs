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

mod queues;
mod redis_work;

use queues::tasks_of_queue;
pub use queues::{queue_names, QUEUES_MAX};
use redis_work::{redis_probes, tasks_by_node};
pub use redis_work::{
    CountersProbe, MemoryProbe, PrimaryProbe, PrimaryWork, RedisCounters, RedisProbes, RedisWork,
};

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
                Arc::new(orq_model::MemoryStore::new(Arc::new(orq_model::WallClock)));
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

    pub(super) fn table_of_work_lists_each_primary(w: &RedisWork) -> bool {
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
