//! The worker pool: leases tasks, runs their handlers with heartbeats and timeouts, and reports
//! the outcome. The per-task decisions (heartbeat cadence, what a heartbeat reply means, how an
//! outcome is reported) and the lease loop's decisions (how many slots are free, when to linger,
//! how long an idle lane waits) are plain functions so that the simulator drives the same logic
//! and unit tests pin them down.
//!
//! This file holds the public surface ([`Worker`], [`WorkerConfig`], [`Handler`], [`Outcome`],
//! the pool's limits); the rest is one concern per file:
//!
//! - `lane`: the lease loop of one lane (lanes, wake-ups, idle poll, shutdown); it only
//!   sequences I/O, deciding through `decide`.
//! - `lease_pass`: a lane's leasing pass over its queues (refusal backoff, store outages).
//! - `decide`: the lease loop's plain decision functions.
//! - `slots`: the handler slots a lane leases into.
//! - `execute`: the run of one task (its handler under heartbeats, timeout and cancellation).
//! - `report`: the report of an outcome (retries with the same token while the lease lasts).
//! - `completer`: the group commit of successes, which may refill the slots it frees.

mod completer;
mod decide;
mod execute;
mod lane;
mod lease_pass;
mod report;
mod slots;
mod stand_back;

pub use decide::lease_refused_backoff_ms;

use crate::client::Client;
use crate::clock::{Clock, Entropy};
use crate::store::Store;
use crate::task::Task;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// What a handler receives for one attempt.
#[derive(Debug, Clone)]
pub struct TaskContext {
    /// The task as leased (payload, tenant, lease, ...).
    pub task: Task,
    /// This attempt's number, from 1.
    pub attempt: u32,
    /// The lease's fencing epoch: pass it to systems you write to so they can reject a stale
    /// worker's late write (Kleppmann, "How to do distributed locking", 2016).
    pub epoch: u64,
    /// Cancelled when the lease is lost (expired, superseded, the task cancelled), the handler
    /// timed out, or the worker shuts down. The handler future is also dropped at its next await.
    pub cancel: CancellationToken,
}

/// A handler's failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerError {
    /// What went wrong (stored on the task, truncated to 2 KiB).
    pub message: String,
    /// False sends the task to the DLQ at once, whatever retries are left.
    pub retryable: bool,
}

impl HandlerError {
    /// A failure worth retrying (after backoff).
    pub fn retryable(message: impl Into<String>) -> Self {
        HandlerError {
            message: message.into(),
            retryable: true,
        }
    }

    /// A failure that no retry can fix.
    pub fn permanent(message: impl Into<String>) -> Self {
        HandlerError {
            message: message.into(),
            retryable: false,
        }
    }
}

/// Runs tasks of one type. Register handlers by type name in [`Handlers`].
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Run one attempt. `Ok(result)` completes the task with `result` stored as JSON.
    async fn handle(&self, ctx: TaskContext) -> Result<serde_json::Value, HandlerError>;
}

/// Handlers by task type.
#[derive(Clone, Default)]
pub struct Handlers(HashMap<String, Arc<dyn Handler>>);

impl Handlers {
    /// No handlers.
    pub fn new() -> Self {
        Handlers::default()
    }

    /// Register `handler` for tasks of type `task_type` (replacing any previous one).
    pub fn register(mut self, task_type: impl Into<String>, handler: impl Handler) -> Self {
        self.0.insert(task_type.into(), Arc::new(handler));
        self
    }

    /// The handler for `task_type`.
    pub fn get(&self, task_type: &str) -> Option<Arc<dyn Handler>> {
        self.0.get(task_type).cloned()
    }

    /// Registered type names, sorted.
    pub fn types(&self) -> Vec<String> {
        let mut t: Vec<_> = self.0.keys().cloned().collect();
        t.sort();
        t
    }
}

/// Most lanes a pool's slots are split into ([`WorkerConfig::lanes`]).
pub const LANES_MAX: usize = 16;

/// How many times longer than [`WorkerConfig::idle_poll_ms`] an idle lane other than a pool's
/// first waits before it asks again, unless a lane that leased work wakes it first.
pub const LANE_IDLE_FACTOR: u64 = 10;

/// With a store that gives wake-ups ([`Store::wake`]: Redis pub/sub, or the embedded store), an
/// idle lane asks again after at most this long (ms), or [`WorkerConfig::idle_poll_ms`] when
/// that is longer: a wake-up makes it ask at once, so this poll only bounds how long a lost
/// wake-up can delay work (design note 27).
pub const WAKE_IDLE_POLL_MS: u64 = 5_000;

/// Worker pool settings.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Worker id, recorded on leases (default: `<hostname-ish>-<pid>-<random>`).
    pub id: String,
    /// Queues to serve; empty serves every known queue (the list is read again when a new queue
    /// is announced (a wake-up) and at every idle poll while the pool has nothing to run, so a
    /// new queue's first task waits at most about one idle poll without wake-ups, and the list
    /// is read every [`Self::idle_poll_ms`] × 20 while the pool is busy).
    pub queues: Vec<String>,
    /// Most handlers running at once. A task whose handler has returned gives its slot back
    /// while its outcome is recorded (at most this many such tasks wait), so refilling the slot
    /// does not wait for the completion's reply.
    pub concurrency: usize,
    /// Longest wait between lease attempts when there is no work and the store gives no
    /// wake-ups (ms); with wake-ups, an idle lane waits for one, or at most
    /// [`WAKE_IDLE_POLL_MS`] (or this, when longer). A lease reply that says when the next task
    /// is due shortens the wait to that.
    pub idle_poll_ms: u64,
    /// Lease batching, like a producer's linger: while the pool is busy (its last round leased
    /// work) and some handlers still run, the lease loop waits up to this long for more slots
    /// to free before it asks, so one lease call carries more tasks (a call's fixed cost in
    /// Redis is about five tasks' worth, docs/measurements.md). An idle pool asks at once.
    /// When completions refill the slots (a pool of one queue with ready work, see
    /// `complete_in_batches`), the completer lingers the same way before its call. 0 turns it
    /// off (ms).
    pub lease_linger_ms: u64,
    /// Lanes the pool's slots are split into (1..=[`LANES_MAX`], at most `concurrency`), each
    /// with its own lease loop and completer over the same store connection: while one lane's
    /// call is in the store, another's tasks run and its next call is on its way, so a busy pool
    /// keeps the store working instead of waiting for its own round trips. Two lanes of 25
    /// slots ran 13 % more no-op tasks per second than one of 50 on one Redis; three and four
    /// ran no more than two (docs/measurements.md). Lanes share the worker id, and each serves
    /// every queue of the pool. While the pool is idle only its first lane polls every
    /// `idle_poll_ms` (the others every [`LANE_IDLE_FACTOR`] times that, as long as the first
    /// lane polls) and answers the store's wake-ups (the others answer them while the first is
    /// busy or full); a lane whose round leaves work wakes the idle ones.
    pub lanes: usize,
    /// Heartbeats are sent every `lease_ms / heartbeat_divisor`.
    pub heartbeat_divisor: u64,
    /// On shutdown, how long in-flight handlers may run before they are aborted and their tasks
    /// released (ms).
    pub shutdown_grace_ms: u64,
    /// A bug planted on purpose for the simulator's self-test: keep running a handler after a
    /// heartbeat said its lease is gone. Never set it outside that test.
    #[doc(hidden)]
    pub planted_ignore_lost_lease: bool,
    /// A bug planted on purpose for the simulator's self-test: give up an outcome the first
    /// time the store refuses it transiently (what orq did before store refusals were
    /// classified). Never set it outside that test.
    #[doc(hidden)]
    pub planted_drop_refused_outcome: bool,
    /// A bug planted on purpose for the simulator's self-test: after a heartbeat the store
    /// refused transiently, wait the whole interval before the next one (what orq did before
    /// [`crate::heartbeat::after_heartbeat`]). Never set it outside that test.
    #[doc(hidden)]
    pub planted_heartbeat_waits_interval: bool,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            id: format!(
                "w{}-{:06x}",
                std::process::id(),
                rand::random::<u32>() & 0xffffff
            ),
            queues: Vec::new(),
            concurrency: 8,
            idle_poll_ms: 100,
            lease_linger_ms: 1,
            lanes: 2,
            heartbeat_divisor: 3,
            shutdown_grace_ms: 10_000,
            planted_ignore_lost_lease: false,
            planted_drop_refused_outcome: false,
            planted_heartbeat_waits_interval: false,
        }
    }
}

/// How one attempt ended, as far as the worker knows.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The handler returned a result (JSON text).
    Succeeded(String),
    /// The handler failed (or panicked, or timed out).
    Failed(HandlerError),
    /// The lease is gone (expired, superseded or the task cancelled): nothing to report.
    LeaseLost,
    /// The worker is shutting down: give the task back.
    Release,
}

impl Outcome {
    /// What the worker reports (the `orq.outcome` span's attribute, [`crate::trace`]).
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Succeeded(_) => "completed",
            Outcome::Failed(_) => "failed",
            Outcome::LeaseLost => "lease_lost",
            Outcome::Release => "released",
        }
    }
}

/// Longest a worker waits before it asks a queue again after a lease call on it was refused with
/// an error other than an unreachable store (corrupt or foreign state in the queue's keys): the
/// wait doubles from `idle_poll_ms` with each refusal in a row, up to this (ms).
pub const LEASE_REFUSED_BACKOFF_MS_MAX: u64 = 5_000;

/// How long a worker waits for an aborted handler (shutdown past its grace, lost lease, timeout)
/// to be dropped before it reports the outcome (ms). Only a handler that blocks its thread
/// without yielding takes this long.
pub const HANDLER_ABORT_WAIT_MS: u64 = 1_000;

/// A pool of workers. Cheap to clone.
#[derive(Clone)]
pub struct Worker {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    entropy: Arc<Entropy>,
    handlers: Handlers,
    config: WorkerConfig,
    client: Client,
    /// Shared by the lanes of one pool.
    lanes: Arc<LaneShare>,
    /// `orq_task_run_seconds` of each handler's type, looked up once.
    run_seconds: HashMap<String, prometheus::Histogram>,
}

/// What the lanes of one pool share ([`WorkerConfig::lanes`]).
#[derive(Default)]
struct LaneShare {
    /// A lane that leased work wakes the idle ones.
    wake: Notify,
    /// Whether the first lane is polling an idle store (it has free slots and its last round
    /// left no work): only then do the other lanes poll less often and leave the store's
    /// wake-ups to it, since its polls and leases will find new work and wake them.
    first_polling: std::sync::atomic::AtomicBool,
}

impl Worker {
    /// A pool over `store` running `handlers`.
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        entropy: Arc<Entropy>,
        handlers: Handlers,
        config: WorkerConfig,
    ) -> Self {
        Worker::lane(store, clock, entropy, handlers, config, Arc::default())
    }

    /// A pool (or one lane of a pool) sharing `lanes` with the other lanes of its pool.
    fn lane(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        entropy: Arc<Entropy>,
        handlers: Handlers,
        config: WorkerConfig,
        lanes: Arc<LaneShare>,
    ) -> Self {
        let client = Client::new(store.clone(), clock.clone(), entropy.clone());
        let run_seconds = handlers
            .types()
            .into_iter()
            .map(|t| {
                let h = crate::metrics::metrics().task_run.with_label_values(&[&t]);
                (t, h)
            })
            .collect();
        Worker {
            inner: Arc::new(Inner {
                run_seconds,
                store,
                clock,
                entropy,
                handlers,
                config,
                client,
                lanes,
            }),
        }
    }

    /// This pool's worker id.
    pub fn id(&self) -> &str {
        &self.inner.config.id
    }

    /// Lease and run tasks until `shutdown` is cancelled; then stop leasing, let in-flight
    /// handlers finish for up to `shutdown_grace_ms`, abort the rest and release their tasks.
    /// With several [`WorkerConfig::lanes`], each lane does so with its share of the slots
    /// (`concurrency / lanes`, the first `concurrency % lanes` lanes one more), and this returns
    /// once every lane has stopped.
    pub async fn run(&self, shutdown: CancellationToken) {
        let config = &self.inner.config;
        let lanes = decide::lane_count(config.lanes, config.concurrency);
        tracing::info!(worker = %config.id, concurrency = config.concurrency, lanes, "worker started");
        let _slots = crate::metrics::PoolSlots::open(config.concurrency);
        if lanes == 1 {
            self.run_lane(0, shutdown).await;
            tracing::info!(worker = %config.id, "worker stopped");
            return;
        }
        let lane_workers: Vec<Worker> = (0..lanes)
            .map(|i| {
                let mut c = config.clone();
                c.concurrency = decide::lane_concurrency(config.concurrency, lanes, i);
                c.lanes = 1;
                Worker::lane(
                    self.inner.store.clone(),
                    self.inner.clock.clone(),
                    self.inner.entropy.clone(),
                    self.inner.handlers.clone(),
                    c,
                    self.inner.lanes.clone(),
                )
            })
            .collect();
        futures::future::join_all(
            lane_workers
                .iter()
                .enumerate()
                .map(|(lane, w)| w.run_lane(lane, shutdown.clone())),
        )
        .await;
        tracing::info!(worker = %config.id, "worker stopped");
    }
}
