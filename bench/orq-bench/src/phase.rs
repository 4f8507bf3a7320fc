//! A phase with workers (end to end, delayed): a worker pool with a no-op handler that records
//! when each task started, while the phase's tasks are submitted; and the submit loop all phases
//! share.

use crate::counting::CountingStore;
use crate::progress::{Progress, Quiet};
use crate::queues::tasks_of_queue;
use crate::redis_work::{CountersProbe, RedisWork};
use crate::report::Latency;
use crate::BenchPlan;
use orq::{
    Clock, Entropy, Handler, HandlerError, Handlers, Store, TaskContext, TaskSpec, Worker,
    WorkerConfig,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

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

/// Reading the Redis work of a phase.
pub(crate) struct Work<'a> {
    pub(crate) counters: &'a CountersProbe,
    pub(crate) tasks_by_node: BTreeMap<String, (usize, u64)>,
}

/// What a phase with workers measured.
pub(crate) struct PhaseResult {
    /// Handler start minus the reference time (submit, or run_at for delayed tasks), ms.
    pub(crate) latency: Option<Latency>,
    /// First submit to last completion (s).
    pub(crate) seconds: f64,
    /// Script calls during the phase.
    pub(crate) calls: u64,
    /// The same, by script name.
    pub(crate) by_script: BTreeMap<&'static str, u64>,
    /// The Redis work, when asked for and Redis answered.
    pub(crate) redis_work: Option<RedisWork>,
}

/// What the phases with workers share.
pub(crate) struct Phase<'a> {
    pub(crate) store: &'a Arc<CountingStore>,
    pub(crate) clock: &'a Arc<dyn Clock>,
    pub(crate) entropy: &'a Arc<Entropy>,
    pub(crate) client: &'a orq::Client,
    pub(crate) plan: &'a BenchPlan,
    pub(crate) progress: &'a dyn Progress,
}

impl Phase<'_> {
    /// Run a worker pool on `queues` while `n` tasks are submitted to them (due `delay_ms` ..
    /// `delay_ms + spread` from now when `delayed`), until all completed; with `work`, read
    /// the Redis counters before the first submit and after the last completion.
    pub(crate) async fn run(
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
            submit_all(self.client, self.plan, &NOOP, queues, n, base, &Quiet).await?;
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

/// The tasks a submit loop sends: their type and the payload of task k.
pub(crate) struct Tasks {
    /// The task type (the handler that runs them).
    pub(crate) task_type: &'static str,
    /// The payload of task k (JSON).
    pub(crate) payload: fn(u64) -> String,
}

/// The tasks of the phases with the bench's own pool: type `noop` (the probe), payload `{}`.
pub(crate) const NOOP: Tasks = Tasks {
    task_type: "noop",
    payload: |_| "{}".to_string(),
};

/// Submit `n` tasks in batches of B, task k to queue k mod Q of `queues` and tenant k mod
/// T (a batch of several queues is one script call per queue); with `delay_base` (ms since the
/// epoch), task k is due at base + delay_ms + spread × k / (n − 1).
pub(crate) async fn submit_all(
    client: &orq::Client,
    plan: &BenchPlan,
    tasks: &Tasks,
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
                let mut spec = TaskSpec::new((tasks.payload)(k))
                    .queue(&queues[(k % queues.len() as u64) as usize])
                    .task_type(tasks.task_type)
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
