//! Fixtures shared by the engine's integration tests: a store per test with a client on it (a
//! private Redis, the embedded store, or a shared cluster or Sentinel deployment), workers that
//! run until stopped, test handlers that record what they saw, and polling helpers that wait for
//! a condition with a generous deadline instead of sleeping a fixed time.
//!
//! Every test binary includes this module and uses a different subset of it.
#![allow(dead_code)]

use async_trait::async_trait;
use orq::ops::{self, Leased};
use orq::testing::RedisServer;
use orq::{
    Backoff, Client, Entropy, Handler, HandlerError, Handlers, QueueStats, RedisStore, Status,
    Store, SystemClock, Task, TaskContext, TaskSpec, Worker, WorkerConfig,
};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Longest a test waits for any condition. Generous so that a loaded 2-core machine does not
/// fail a test that is merely slow; a correct run meets every condition far sooner.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Time between two checks of a polled condition.
pub const POLL: Duration = Duration::from_millis(20);

/// Wait until `check` returns `Some`, polling every [`POLL`]; panic naming `what` after
/// [`DEADLINE`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {DEADLINE:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// What an [`Env`]'s store runs on.
pub enum Backing {
    /// A private redis-server of this test alone; killed when the test ends.
    Redis(RedisServer),
    /// The embedded store (`orq_model::MemoryStore` on the wall clock), as `orq serve` runs
    /// without `--redis`.
    Embedded,
    /// A deployment the test borrows (a Redis Cluster or Sentinel shared by a test binary);
    /// `raw_url` is a node that holds every key (a Sentinel's primary), if there is one.
    Shared {
        /// `redis://` URL of the one node that holds every key; `None` on a cluster.
        raw_url: Option<String>,
    },
}

/// A store, a client on it, and what the store runs on.
pub struct Env {
    /// What the store runs on; a private server is killed when the test ends.
    pub backing: Backing,
    /// The store every actor of the test shares.
    pub store: Arc<dyn Store>,
    /// A client on `store`.
    pub client: Client,
}

impl Env {
    /// Start a private Redis and connect to it.
    pub async fn start() -> Env {
        Env::start_with(&[]).await
    }

    /// Start a private Redis with `extra` configuration arguments and connect to it.
    pub async fn start_with(extra: &[&str]) -> Env {
        let server = RedisServer::start_with(extra);
        let store = RedisStore::connect(&server.url())
            .await
            .expect("connect to the private redis-server");
        Env::on(Backing::Redis(server), Arc::new(store))
    }

    /// A fresh embedded store (`orq_model::MemoryStore` on the wall clock).
    pub fn embedded() -> Env {
        let store = orq_model::MemoryStore::new(Arc::new(orq_model::WallClock));
        Env::on(Backing::Embedded, Arc::new(store))
    }

    /// Connect to the shared deployment at `url` (`redis+cluster://…`, `redis+sentinel://…`);
    /// `raw_url` as in [`Backing::Shared`].
    pub async fn shared(url: &str, raw_url: Option<String>) -> Env {
        let store = RedisStore::connect(url)
            .await
            .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
        Env::on(Backing::Shared { raw_url }, Arc::new(store))
    }

    fn on(backing: Backing, store: Arc<dyn Store>) -> Env {
        let client = Client::new(
            store.clone(),
            Arc::new(SystemClock),
            Arc::new(Entropy::from_os()),
        );
        Env {
            backing,
            store,
            client,
        }
    }

    /// The private server. Panics unless the test runs on one ([`Backing::Redis`]).
    pub fn server_mut(&mut self) -> &mut RedisServer {
        match &mut self.backing {
            Backing::Redis(server) => server,
            _ => panic!("this test needs a private redis-server"),
        }
    }

    /// A raw connection to the node that holds every key, for commands the engine never sends.
    /// Panics on the embedded store and on a cluster (no such node).
    pub async fn raw(&self) -> redis::aio::MultiplexedConnection {
        let url = match &self.backing {
            Backing::Redis(server) => server.url(),
            Backing::Shared { raw_url: Some(url) } => url.clone(),
            _ => panic!("this test needs a single Redis node for raw commands"),
        };
        redis::Client::open(url)
            .expect("redis url")
            .get_multiplexed_async_connection()
            .await
            .expect("raw connection to the private redis-server")
    }

    /// Start a worker pool serving `queue` with `handlers`; `tune` adjusts its config.
    pub fn worker(
        &self,
        id: &str,
        queue: &str,
        handlers: Handlers,
        tune: impl FnOnce(&mut WorkerConfig),
    ) -> RunningWorker {
        self.worker_on(self.store.clone(), id, queue, handlers, tune)
    }

    /// [`Env::worker`] talking to the private server through `store` (a wrapper around
    /// [`Env::store`] that delays or counts calls).
    pub fn worker_on(
        &self,
        store: Arc<dyn Store>,
        id: &str,
        queue: &str,
        handlers: Handlers,
        tune: impl FnOnce(&mut WorkerConfig),
    ) -> RunningWorker {
        self.worker_on_clock(store, Arc::new(SystemClock), id, queue, handlers, tune)
    }

    /// [`Env::worker_on`] with the worker's clock given (sleeps a test can end early, say).
    pub fn worker_on_clock(
        &self,
        store: Arc<dyn Store>,
        clock: Arc<dyn orq::Clock>,
        id: &str,
        queue: &str,
        handlers: Handlers,
        tune: impl FnOnce(&mut WorkerConfig),
    ) -> RunningWorker {
        let mut config = WorkerConfig {
            id: id.to_string(),
            queues: vec![queue.to_string()],
            concurrency: 4,
            idle_poll_ms: 50,
            heartbeat_divisor: 3,
            shutdown_grace_ms: 1_000,
            ..WorkerConfig::default()
        };
        tune(&mut config);
        spawn_worker_with_clock(store, clock, handlers, config)
    }

    /// The task `id` of `queue`.
    pub async fn get(&self, queue: &str, id: &str) -> Task {
        self.client
            .get(Some(queue), id)
            .await
            .unwrap_or_else(|e| panic!("get {id}: {e}"))
    }

    /// Submit `specs` in one batch and return the new tasks' ids, in order.
    pub async fn submit_ids(&self, specs: Vec<TaskSpec>) -> Vec<String> {
        self.client
            .submit_batch(specs)
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.task.id)
            .collect()
    }

    /// Wait until task `id` has `status`, and return it.
    pub async fn wait_status(&self, queue: &str, id: &str, status: Status) -> Task {
        eventually(&format!("task {id} to be {status}"), || async {
            let t = self.get(queue, id).await;
            (t.status == status).then_some(t)
        })
        .await
    }

    /// The counts of `queue`.
    pub async fn stats(&self, queue: &str) -> QueueStats {
        self.client.stats(queue).await.expect("stats")
    }

    /// The store's clock now (ms).
    pub async fn store_now_ms(&self, queue: &str) -> u64 {
        self.stats(queue).await.now_ms
    }

    /// Lease up to `n` tasks of `queue` as `worker` with the low-level call.
    pub async fn lease(&self, queue: &str, worker: &str, n: usize) -> Leased {
        let entropy = Entropy::from_os();
        ops::lease(
            &*self.store,
            queue,
            worker,
            n,
            &entropy.token_bits(),
            entropy.unit(),
        )
        .await
        .expect("lease")
    }

    /// Lease exactly one task of `queue` as `worker`, waiting until one is ready.
    pub async fn lease_one(&self, queue: &str, worker: &str) -> Task {
        eventually(&format!("a task of {queue} to lease"), || async {
            let mut batch = self.lease(queue, worker, 1).await;
            assert!(batch.tasks.len() <= 1, "asked for one task, got more");
            batch.tasks.pop()
        })
        .await
    }
}

/// Start a worker pool with `config` on `store` (any store: the tests on a Redis Cluster have
/// no [`Env`]).
pub fn spawn_worker(
    store: Arc<dyn Store>,
    handlers: Handlers,
    config: WorkerConfig,
) -> RunningWorker {
    spawn_worker_with_clock(store, Arc::new(SystemClock), handlers, config)
}

/// [`spawn_worker`] on `clock`.
pub fn spawn_worker_with_clock(
    store: Arc<dyn Store>,
    clock: Arc<dyn orq::Clock>,
    handlers: Handlers,
    config: WorkerConfig,
) -> RunningWorker {
    let worker = Worker::new(store, clock, Arc::new(Entropy::from_os()), handlers, config);
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { worker.run(shutdown).await }
    });
    RunningWorker {
        shutdown,
        handle: Some(handle),
    }
}

/// A worker pool running in the background; stopped (shutdown token cancelled) when dropped.
pub struct RunningWorker {
    /// Cancel to start a graceful shutdown.
    pub shutdown: CancellationToken,
    handle: Option<JoinHandle<()>>,
}

impl RunningWorker {
    /// Shut down gracefully and wait until the pool has stopped (within [`DEADLINE`]).
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        let handle = self.handle.take().expect("worker handle");
        tokio::time::timeout(DEADLINE, handle)
            .await
            .expect("worker stops within the deadline")
            .expect("worker task did not panic");
    }
}

impl Drop for RunningWorker {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A spec on `queue` of `task_type` with `payload` and a 30 s lease (long enough that a slow
/// machine never loses a lease by accident; tests that want leases to expire shorten it).
pub fn spec(queue: &str, task_type: &str, payload: &str) -> TaskSpec {
    TaskSpec::new(payload)
        .queue(queue)
        .task_type(task_type)
        .lease_ms(30_000)
}

/// A fast, exactly predictable backoff: `initial_ms`, then × `multiplier`, no jitter.
pub fn backoff(initial_ms: u64, multiplier: f64) -> Backoff {
    Backoff {
        initial_ms,
        multiplier,
        max_ms: 60_000,
        jitter: 0.0,
    }
}

/// One run of a handler as the handler saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// `ctx.attempt`.
    pub attempt: u32,
    /// `ctx.epoch`.
    pub epoch: u64,
    /// The worker holding the lease.
    pub worker: String,
    /// When the lease was granted, by the store's clock (ms).
    pub leased_at_ms: u64,
    /// The task's run_at for this attempt, by the store's clock (ms).
    pub run_at_ms: u64,
}

impl Run {
    fn of(ctx: &TaskContext) -> Run {
        let lease = ctx
            .task
            .lease
            .as_ref()
            .expect("a handler runs under a lease");
        Run {
            attempt: ctx.attempt,
            epoch: ctx.epoch,
            worker: lease.worker.clone(),
            leased_at_ms: lease.expires_at_ms - ctx.task.lease_ms,
            run_at_ms: ctx.task.run_at_ms,
        }
    }
}

/// Runs of a handler by task id, shared between the test and the handler.
#[derive(Clone, Default)]
pub struct Runs(Arc<Mutex<HashMap<String, Vec<Run>>>>);

impl Runs {
    /// Record a run and return how many runs of this task there have been, this one included.
    pub fn record(&self, ctx: &TaskContext) -> usize {
        let mut m = self.0.lock().unwrap();
        let runs = m.entry(ctx.task.id.clone()).or_default();
        runs.push(Run::of(ctx));
        runs.len()
    }

    /// The runs of task `id`, in order.
    pub fn of(&self, id: &str) -> Vec<Run> {
        self.0.lock().unwrap().get(id).cloned().unwrap_or_default()
    }

    /// Runs of every task.
    pub fn total(&self) -> usize {
        self.0.lock().unwrap().values().map(Vec::len).sum()
    }
}

/// `echo`: returns the payload (parsed as JSON) as the result.
#[derive(Clone, Default)]
pub struct Echo {
    /// Every run.
    pub runs: Runs,
}

#[async_trait]
impl Handler for Echo {
    async fn handle(&self, ctx: TaskContext) -> Result<serde_json::Value, HandlerError> {
        self.runs.record(&ctx);
        serde_json::from_str(&ctx.task.payload)
            .map_err(|e| HandlerError::permanent(format!("payload is not JSON: {e}")))
    }
}

/// `fail`: with payload `{"times": n}` fails the first n runs of a task (counted by the handler,
/// so across DLQ replays too) and then returns `{"ok": <run>}`; with `{"permanent": true}` fails
/// every run with a permanent error.
#[derive(Clone, Default)]
pub struct Fail {
    /// Every run.
    pub runs: Runs,
}

#[async_trait]
impl Handler for Fail {
    async fn handle(&self, ctx: TaskContext) -> Result<serde_json::Value, HandlerError> {
        let run = self.runs.record(&ctx);
        let p: serde_json::Value =
            serde_json::from_str(&ctx.task.payload).expect("fail payload is JSON");
        if p["permanent"] == serde_json::Value::Bool(true) {
            return Err(HandlerError::permanent(format!(
                "permanent failure on run {run}"
            )));
        }
        let times = p["times"].as_u64().expect("fail payload has times") as usize;
        if run <= times {
            Err(HandlerError::retryable(format!("failure {run} of {times}")))
        } else {
            Ok(serde_json::json!({ "ok": run }))
        }
    }
}

/// What a [`Block`] handler went through.
#[derive(Default)]
pub struct BlockState {
    /// Runs started.
    pub started: AtomicUsize,
    /// The handler saw `ctx.cancel` fire.
    pub saw_cancel: AtomicBool,
    /// The handler's future was dropped before it returned (aborted).
    pub aborted: AtomicBool,
    /// The handler returned on its own.
    pub returned: AtomicBool,
}

/// `block`: runs until its cancellation token fires or `run_ms` pass (default 60 s), then
/// returns `{"slept": true}`. Records start, cancellation and abortion.
#[derive(Clone)]
pub struct Block {
    /// What happened.
    pub state: Arc<BlockState>,
    /// How long a run lasts when nothing stops it (ms).
    pub run_ms: u64,
}

impl Block {
    /// A handler that runs for `run_ms` unless stopped.
    pub fn new(run_ms: u64) -> Self {
        Block {
            state: Arc::new(BlockState::default()),
            run_ms,
        }
    }
}

/// Marks a [`Block`] run aborted when dropped before the handler returned.
struct AbortGuard(Arc<BlockState>, bool);

impl Drop for AbortGuard {
    fn drop(&mut self) {
        if !self.1 {
            self.0.aborted.store(true, Ordering::SeqCst);
        }
    }
}

#[async_trait]
impl Handler for Block {
    async fn handle(&self, ctx: TaskContext) -> Result<serde_json::Value, HandlerError> {
        let mut guard = AbortGuard(self.state.clone(), false);
        self.state.started.fetch_add(1, Ordering::SeqCst);
        tokio::select! {
            _ = ctx.cancel.cancelled() => {
                self.state.saw_cancel.store(true, Ordering::SeqCst);
                guard.1 = true;
                Err(HandlerError::retryable("cancelled"))
            }
            _ = tokio::time::sleep(Duration::from_millis(self.run_ms)) => {
                guard.1 = true;
                self.state.returned.store(true, Ordering::SeqCst);
                Ok(serde_json::json!({ "slept": true }))
            }
        }
    }
}
