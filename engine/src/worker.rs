//! The worker pool: leases tasks, runs their handlers with heartbeats and timeouts, and reports
//! the outcome. The per-task decisions (heartbeat cadence, what a heartbeat reply means, how an
//! outcome is reported) are plain functions so that the simulator drives the same logic.

use crate::client::Client;
use crate::clock::{Clock, Entropy};
use crate::episode::Episode;
use crate::error::Error;
use crate::heartbeat::{after_heartbeat, heartbeat_interval_ms, BeatStep};
use crate::ops::{self, Completion, Reported, COMPLETE_BATCH_MAX, LEASE_BATCH_MAX};
use crate::report::{report_step, ReportStep};
use crate::store::Store;
use crate::task::Task;
use async_trait::async_trait;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinSet;
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

/// The wake-up channels of a pool serving `queues` (every known queue, and new ones, when
/// `all`).
fn wake_channels(queues: &[String], all: bool) -> Vec<String> {
    let mut c: Vec<String> = queues
        .iter()
        .map(|q| crate::keys::wake_channel(q))
        .collect();
    if all {
        c.push(crate::keys::QUEUES_WAKE_CHANNEL.to_string());
    }
    c
}

/// Until the wake-up receiver changes (never when there is none, or its sender is gone).
async fn woken(rx: &mut Option<tokio::sync::watch::Receiver<u64>>) {
    if let Some(r) = rx {
        if r.changed().await.is_ok() {
            return;
        }
    }
    std::future::pending::<()>().await
}

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
    /// lane polls); a lane that leases work wakes the idle ones.
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

/// A task handle that aborts the task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
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

/// Longest a worker waits before it asks a queue again after a lease call on it was refused with
/// an error other than an unreachable store (corrupt or foreign state in the queue's keys): the
/// wait doubles from `idle_poll_ms` with each refusal in a row, up to this (ms).
pub const LEASE_REFUSED_BACKOFF_MS_MAX: u64 = 5_000;

/// How long a worker waits for an aborted handler (shutdown past its grace, lost lease, timeout)
/// to be dropped before it reports the outcome (ms). Only a handler that blocks its thread
/// without yielding takes this long.
pub const HANDLER_ABORT_WAIT_MS: u64 = 1_000;

/// The wait before the next lease call on a queue whose last `refusals` calls in a row were
/// refused: `idle_poll_ms × 2^(refusals − 1)`, at most [`LEASE_REFUSED_BACKOFF_MS_MAX`].
pub fn lease_refused_backoff_ms(idle_poll_ms: u64, refusals: u32) -> u64 {
    let doublings = refusals.saturating_sub(1).min(16);
    idle_poll_ms
        .max(1)
        .saturating_mul(1 << doublings)
        .min(LEASE_REFUSED_BACKOFF_MS_MAX)
}

/// Most rounds of completion calls the completer has in flight at once.
const COMPLETER_CALLS_MAX: usize = 2;

/// A success waiting for the completer: the queue, the completion, and where to send its result.
type PendingCompletion = (String, Completion, oneshot::Sender<Result<Reported, Error>>);

/// Tasks the completer leased for the pool (a `complete_batch` that also leased): the queue, the
/// lease reply, the slots reserved for them (one per task, in order; those left over are given
/// back), and the local time (ms) just before the call, from which lease deadlines are reckoned.
struct Refilled {
    queue: String,
    leased: ops::Leased,
    slots: Vec<Slot>,
    pool: Arc<Slots>,
    local_ms: u64,
}

/// What the completer needs to refill the slots its completions free in the same call
/// (`ops::complete_and_lease`), and when it may: only for the queue the lease loop has put in
/// [`Refill::queue`] (a pool serving one queue whose last lease left ready work), never after
/// shutdown began.
struct Refill {
    slots: Arc<Slots>,
    concurrency: usize,
    worker: String,
    entropy: Arc<Entropy>,
    clock: Arc<dyn Clock>,
    linger_ms: u64,
    queue: std::sync::Mutex<Option<String>>,
    shutdown: CancellationToken,
    leased: mpsc::UnboundedSender<Refilled>,
}

impl Refill {
    /// Whether the completer may lease for `queue` now.
    fn allowed(&self, queue: &str) -> bool {
        !self.shutdown.is_cancelled()
            && self
                .queue
                .lock()
                .map(|q| q.as_deref() == Some(queue))
                .unwrap_or(false)
    }

    fn set(&self, queue: Option<String>) {
        if let Ok(mut q) = self.queue.lock() {
            *q = queue;
        }
    }
}

/// The group commit of successes: takes every completion waiting when it is free, and records
/// them with one `complete_batch` call per queue (up to [`COMPLETE_BATCH_MAX`] items each), so
/// under load one call carries many tasks while a lone completion is sent at once. Up to
/// [`COMPLETER_CALLS_MAX`] such rounds are in flight at once. Each sender gets its item's own
/// result (or the call's error). Runs until every sender is gone, then lets its rounds finish.
///
/// With `refill` allowed for the queue, the last call of a queue's group also leases tasks for
/// every free slot of the pool (reserved before the call, so the lease loop cannot lease them
/// too), and hands them to the lease loop to run: the slots a batch of completions frees are
/// refilled in the same round trip. It then first lingers, as the lease loop does
/// ([`WorkerConfig::lease_linger_ms`]), until every handler has returned or the linger is over,
/// so that one call carries the completions of most of the pool.
async fn complete_in_batches(
    store: Arc<dyn Store>,
    mut rx: mpsc::UnboundedReceiver<PendingCompletion>,
    refill: Arc<Refill>,
) {
    // Up to COMPLETER_CALLS_MAX rounds in flight: while one round's calls run, the next round
    // collects the completions that arrive meanwhile, so the store is kept busy.
    let permits = Arc::new(tokio::sync::Semaphore::new(COMPLETER_CALLS_MAX));
    let mut rounds: JoinSet<()> = JoinSet::new();
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        while rounds.try_join_next().is_some() {}
        let Some(first) = rx.recv().await else {
            break;
        };
        let mut pending = vec![first];
        while let Ok(next) = rx.try_recv() {
            pending.push(next);
        }
        if refill.linger_ms > 0 && refill.allowed(&pending[0].0) {
            let until = refill.clock.sleep(refill.linger_ms);
            tokio::pin!(until);
            while refill.slots.handlers() > 0 {
                tokio::select! {
                    biased;
                    _ = &mut until => break,
                    next = rx.recv() => match next {
                        Some(p) => pending.push(p),
                        None => break,
                    },
                }
            }
            while let Ok(next) = rx.try_recv() {
                pending.push(next);
            }
        }
        // Grouped by queue in first-seen order (deterministic under the simulator).
        let mut groups: Vec<(String, Vec<PendingCompletion>)> = Vec::new();
        for p in pending {
            match groups.iter_mut().find(|(q, _)| *q == p.0) {
                Some((_, g)) => g.push(p),
                None => groups.push((p.0.clone(), vec![p])),
            }
        }
        let store = store.clone();
        let refill = refill.clone();
        rounds.spawn(async move {
            for (queue, group) in groups {
                complete_group(&*store, &refill, &queue, group).await;
            }
            drop(permit);
        });
    }
    // Every sender is gone: let the rounds in flight answer their senders.
    while rounds.join_next().await.is_some() {}
}

/// One queue's completions of a round, in calls of up to [`COMPLETE_BATCH_MAX`]; the last call
/// also leases for the free slots when refilling `queue` is allowed.
async fn complete_group(
    store: &dyn Store,
    refill: &Refill,
    queue: &str,
    group: Vec<PendingCompletion>,
) {
    let mut group = group.into_iter().peekable();
    while group.peek().is_some() {
        let chunk: Vec<PendingCompletion> = group.by_ref().take(COMPLETE_BATCH_MAX).collect();
        let batch: Vec<Completion> = chunk.iter().map(|p| p.1.clone()).collect();
        let last = group.peek().is_none();
        let reply = match last.then(|| reserve(refill, queue)).flatten() {
            Some((slots, local_ms)) => {
                complete_and_refill(store, refill, queue, &batch, slots, local_ms).await
            }
            None => ops::complete_batch(store, queue, &batch).await,
        };
        match reply {
            Ok((_, results)) => {
                for (p, r) in chunk.into_iter().zip(results) {
                    let _ = p.2.send(r);
                }
            }
            Err(e) => {
                for p in chunk {
                    let _ = p.2.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Reserve every free slot of the pool (at most [`LEASE_BATCH_MAX`]) for a refill of `queue`;
/// `None` when refilling it is not allowed or no slot is free. Also returns the local time.
fn reserve(refill: &Refill, queue: &str) -> Option<(Vec<Slot>, u64)> {
    if !refill.allowed(queue) {
        return None;
    }
    let slots = Slot::reserve(&refill.slots, LEASE_BATCH_MAX, refill.concurrency);
    if slots.is_empty() {
        return None;
    }
    Some((slots, refill.clock.now_ms()))
}

/// One `complete_and_lease` call: the completions' results, the leased tasks sent to the lease
/// loop with their reserved slots. When the call is refused (not an outage), the completions are
/// sent again without the lease, so a lease-side refusal costs no completion.
async fn complete_and_refill(
    store: &dyn Store,
    refill: &Refill,
    queue: &str,
    batch: &[Completion],
    slots: Vec<Slot>,
    local_ms: u64,
) -> Result<(u64, Vec<Result<Reported, Error>>), Error> {
    let bits = refill.entropy.token_bits();
    let request = ops::LeaseRequest {
        worker: &refill.worker,
        n: slots.len(),
        token_bits: &bits,
        seed: refill.entropy.unit(),
    };
    match ops::complete_and_lease(store, queue, batch, &request).await {
        Ok((now, results, leased)) => {
            // No ready work left: the lease loop takes over (it waits for what is due next).
            if leased.next_ms != Some(leased.now_ms) {
                refill.set(None);
            }
            let refilled = Refilled {
                queue: queue.to_string(),
                leased,
                slots,
                pool: refill.slots.clone(),
                local_ms,
            };
            if let Err(mpsc::error::SendError(r)) = refill.leased.send(refilled) {
                // The pool has stopped: nobody will run these; their leases expire.
                tracing::warn!(queue = %queue, tasks = r.leased.tasks.len(),
                    "leased tasks after the pool stopped; their leases will expire");
                r.slots.into_iter().for_each(Slot::give_back);
            }
            Ok((now, results))
        }
        // The reserved slots go back with a wake-up: the lease loop may be waiting for them.
        Err(e) if e.is_unavailable() => {
            drop(slots);
            Err(e)
        }
        Err(e) => {
            drop(slots);
            refill.set(None);
            tracing::warn!(queue = %queue, error = %e,
                "complete with lease refused; completing without it");
            ops::complete_batch(store, queue, batch).await
        }
    }
}

/// The handler slots of a pool: how many handlers run, and a wake-up for the lease loop when one
/// returns. A task holds its slot from its lease until its handler returns, not until its outcome
/// is recorded, so the lease call that refills a slot overlaps the completion call of the task
/// that left it (both go over one multiplexed connection) instead of waiting for its reply. A
/// lease call reserves its slots before it is sent (`reserved` of the `running` ones), so the
/// lease loop and the completer never lease the same free slot twice.
#[derive(Default)]
struct Slots {
    running: AtomicUsize,
    reserved: AtomicUsize,
    freed: Notify,
}

impl Slots {
    /// Handlers running: taken slots that are not reservations.
    fn handlers(&self) -> usize {
        self.running
            .load(Ordering::SeqCst)
            .saturating_sub(self.reserved.load(Ordering::SeqCst))
    }
}

/// One taken slot; dropping it gives the slot back and wakes the lease loop. A reserved slot
/// (for a lease call in flight) becomes a handler's with [`Slot::assign`], or goes back quietly
/// with [`Slot::give_back`].
struct Slot {
    slots: Arc<Slots>,
    reserved: bool,
    quiet: bool,
}

impl Slot {
    fn take(slots: &Arc<Slots>) -> Slot {
        slots.running.fetch_add(1, Ordering::SeqCst);
        Slot {
            slots: slots.clone(),
            reserved: false,
            quiet: false,
        }
    }

    /// Reserve up to `max` of the slots still free below `concurrency`, in one atomic step (so
    /// that the lease loop and the completer's rounds, which may run on different threads,
    /// never take the same free slot). May return none.
    fn reserve(slots: &Arc<Slots>, max: usize, concurrency: usize) -> Vec<Slot> {
        let mut got = 0;
        let _ = slots
            .running
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |running| {
                got = concurrency.saturating_sub(running).min(max);
                Some(running + got)
            });
        slots.reserved.fetch_add(got, Ordering::SeqCst);
        (0..got)
            .map(|_| Slot {
                slots: slots.clone(),
                reserved: true,
                quiet: false,
            })
            .collect()
    }

    /// A reserved slot now held by a running handler.
    fn assign(mut self) -> Slot {
        if self.reserved {
            self.slots.reserved.fetch_sub(1, Ordering::SeqCst);
            self.reserved = false;
        }
        self
    }

    /// Give a slot back without waking the lease loop (a reservation the lease did not fill:
    /// the queue had no more ready work, so waking the loop would only poll it again).
    fn give_back(mut self) {
        self.quiet = true;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.reserved {
            self.slots.reserved.fetch_sub(1, Ordering::SeqCst);
        }
        self.slots.running.fetch_sub(1, Ordering::SeqCst);
        if !self.quiet {
            self.slots.freed.notify_one();
        }
    }
}

/// Why the run loop woke up (see [`wake`]).
enum Wake {
    /// The completer leased tasks for the pool.
    Refilled(Refilled),
    /// The timer given to [`wake`] ran out.
    Timer,
    /// A handler returned, a task finished, or shutdown began.
    Other,
}

/// Wait until the completer hands over leased tasks, a task of `in_flight` finishes, a slot is
/// freed, shutdown begins, or `timer` (when given) runs out.
async fn wake(
    in_flight: &mut JoinSet<()>,
    leased: &mut mpsc::UnboundedReceiver<Refilled>,
    slots: &Slots,
    shutdown: &CancellationToken,
    timer: Option<&mut BoxFuture<'static, ()>>,
) -> Wake {
    let timer = async {
        match timer {
            Some(t) => t.await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        r = leased.recv() => r.map_or(Wake::Other, Wake::Refilled),
        _ = in_flight.join_next(), if !in_flight.is_empty() => Wake::Other,
        _ = slots.freed.notified() => Wake::Other,
        _ = shutdown.cancelled() => Wake::Other,
        _ = timer => Wake::Timer,
    }
}

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
}

/// What the lanes of one pool share ([`WorkerConfig::lanes`]).
#[derive(Default)]
struct LaneShare {
    /// A lane that leased work wakes the idle ones.
    wake: Notify,
    /// Whether the first lane is polling an idle store (it has free slots and its last round
    /// leased nothing): only then do the other lanes poll less often, since its polls will find
    /// new work and wake them.
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
        Worker {
            inner: Arc::new(Inner {
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
        let lanes = config
            .lanes
            .clamp(1, LANES_MAX)
            .min(config.concurrency.max(1));
        tracing::info!(worker = %config.id, concurrency = config.concurrency, lanes, "worker started");
        if lanes == 1 {
            self.run_lane(0, shutdown).await;
            tracing::info!(worker = %config.id, "worker stopped");
            return;
        }
        let lane_workers: Vec<Worker> = (0..lanes)
            .map(|i| {
                let mut c = config.clone();
                c.concurrency =
                    config.concurrency / lanes + usize::from(i < config.concurrency % lanes);
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

    /// Lane `lane` of [`Worker::run`]: this pool's whole concurrency, one lease loop, one
    /// completer.
    async fn run_lane(&self, lane: usize, shutdown: CancellationToken) {
        let inner = &self.inner;
        let hard_stop = CancellationToken::new();
        let mut in_flight: JoinSet<()> = JoinSet::new();
        // The completer lives in a set of its own, so that it stops when this future is dropped.
        let mut completer: JoinSet<()> = JoinSet::new();
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let (leased_tx, mut leased_rx) = mpsc::unbounded_channel::<Refilled>();
        let slots = Arc::new(Slots::default());
        let refill = Arc::new(Refill {
            slots: slots.clone(),
            concurrency: inner.config.concurrency,
            worker: inner.config.id.clone(),
            entropy: inner.entropy.clone(),
            clock: inner.clock.clone(),
            linger_ms: inner.config.lease_linger_ms,
            queue: std::sync::Mutex::new(None),
            shutdown: shutdown.clone(),
            leased: leased_tx,
        });
        completer.spawn(complete_in_batches(
            inner.store.clone(),
            done_rx,
            refill.clone(),
        ));
        let mut queues: Vec<String> = inner.config.queues.clone();
        let mut queues_refreshed_ms = 0u64;
        // The store's wake-ups for the queues served (None: the store gives none), and the queue
        // list they were asked for.
        let all_queues = inner.config.queues.is_empty();
        let mut wake_rx: Option<tokio::sync::watch::Receiver<u64>> = None;
        let mut wake_for: Option<Vec<String>> = None;
        // Whether the last round leased nothing (the pool is idle).
        let mut idle = true;
        let mut rotate = 0usize;
        // Queues whose lease calls were refused (not a store outage): refusals in a row, and the
        // local time before which the queue is not asked again. Only looked up, never iterated.
        let mut refused: HashMap<String, (u32, u64)> = HashMap::new();
        // A run of transient store failures of this lane's lease calls (logged at its start and
        // end; the lane retries after a doubling wait instead of its idle poll).
        let mut outage = Episode::default();
        tracing::debug!(worker = %inner.config.id, lane, concurrency = inner.config.concurrency, "lane started");
        let concurrency = inner.config.concurrency;
        // While the loop leaves the free slots to the completer: the timer that bounds it, and
        // whether it has run out (the loop then leases itself until the wait is over).
        let mut stand_back: Option<BoxFuture<'static, ()>> = None;
        let mut stood_back = false;
        while !shutdown.is_cancelled() {
            while in_flight.try_join_next().is_some() {}
            while let Ok(r) = leased_rx.try_recv() {
                self.spawn_refilled(r, &mut in_flight, &hard_stop, &done_tx)
                    .await;
            }
            // While the completer refills the slots (one queue, ready work left), the loop
            // stands back as long as completions are on their way to it (tasks whose handler
            // returned and whose outcome is being reported); it leases again itself once none
            // are, so slots freed by failures or long handlers never wait for a success.
            // It stands back for at most the linger plus an idle poll in a row (one timer, so a
            // clock that stands still cannot keep it waiting), so a completion call that hangs
            // does not hold the free slots.
            let reporting = in_flight.len().saturating_sub(slots.handlers());
            let refilling = refill.queue.lock().map(|q| q.is_some()).unwrap_or(false);
            if reporting > 0 && refilling {
                if stand_back.is_none() {
                    let ms = inner.config.lease_linger_ms + inner.config.idle_poll_ms.max(1);
                    stand_back = Some(inner.clock.sleep(ms));
                }
            } else {
                stand_back = None;
                stood_back = false;
            }
            if let (Some(timer), false) = (stand_back.as_mut(), stood_back) {
                match wake(
                    &mut in_flight,
                    &mut leased_rx,
                    &slots,
                    &shutdown,
                    Some(timer),
                )
                .await
                {
                    Wake::Refilled(r) => {
                        self.spawn_refilled(r, &mut in_flight, &hard_stop, &done_tx)
                            .await
                    }
                    Wake::Timer => stood_back = true,
                    Wake::Other => {}
                }
                continue;
            }
            // Free slots: handlers not running. Tasks whose handler returned but whose outcome is
            // still being recorded hold none, but at most `concurrency` of them may wait, so a
            // store that stops answering cannot pile up leased work.
            let free_now = |in_flight: &JoinSet<()>| {
                concurrency
                    .saturating_sub(slots.running.load(Ordering::SeqCst))
                    .min((2 * concurrency).saturating_sub(in_flight.len()))
            };
            let mut free = free_now(&in_flight);
            if free == 0 {
                if let Wake::Refilled(r) =
                    wake(&mut in_flight, &mut leased_rx, &slots, &shutdown, None).await
                {
                    self.spawn_refilled(r, &mut in_flight, &hard_stop, &done_tx)
                        .await;
                }
                continue;
            }
            // Lease batching (WorkerConfig::lease_linger_ms): busy, with handlers running, wait
            // a moment for more slots to free so that the next call carries more tasks.
            let linger = inner.config.lease_linger_ms;
            if !idle && linger > 0 && free < concurrency && slots.running.load(Ordering::SeqCst) > 0
            {
                let until = inner.clock.sleep(linger);
                tokio::pin!(until);
                while free < concurrency {
                    let mut got = None;
                    tokio::select! {
                        biased;
                        _ = shutdown.cancelled() => break,
                        _ = &mut until => break,
                        // Tasks the completer leased meanwhile run at once.
                        r = leased_rx.recv() => got = r,
                        _ = slots.freed.notified() => {}
                        _ = in_flight.join_next(), if !in_flight.is_empty() => {}
                    }
                    if let Some(r) = got {
                        self.spawn_refilled(r, &mut in_flight, &hard_stop, &done_tx)
                            .await;
                    }
                    free = free_now(&in_flight);
                }
                free = free_now(&in_flight);
                if free == 0 {
                    continue;
                }
            }
            let now = inner.clock.now_ms();
            let poll_ms = if wake_rx.is_some() {
                inner.config.idle_poll_ms.max(WAKE_IDLE_POLL_MS)
            } else {
                inner.config.idle_poll_ms
            };
            let refresh_ms = if idle {
                poll_ms
            } else {
                inner.config.idle_poll_ms * 20
            };
            if inner.config.queues.is_empty()
                && (queues.is_empty() || now.saturating_sub(queues_refreshed_ms) >= refresh_ms)
            {
                match inner.client.queues().await {
                    Ok(q) => {
                        queues = q;
                        queues_refreshed_ms = now;
                    }
                    // Part of the lane's outage episode: logged at its start only.
                    Err(e) if e.is_unavailable() => {
                        if outage.failed(now).started {
                            tracing::warn!(worker = %inner.config.id, error = %e,
                                "cannot list queues; backing off until the store answers");
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot list queues"),
                }
            }
            if wake_for.as_ref() != Some(&queues) {
                wake_rx = inner.store.wake(&wake_channels(&queues, all_queues));
                wake_for = Some(queues.clone());
            }
            // Seen: a wake-up published from here on (during this round's calls too) ends the
            // idle wait below at once.
            if let Some(rx) = wake_rx.as_mut() {
                rx.borrow_and_update();
            }
            let mut wait_ms = poll_ms;
            let mut leased_any = false;
            for k in 0..queues.len() {
                if free == 0 {
                    break;
                }
                let queue = &queues[(rotate + k) % queues.len()];
                if refused.get(queue).is_some_and(|&(_, until)| now < until) {
                    continue;
                }
                // Reserved before the call (and only what is still free now), so the completer
                // cannot lease these slots too.
                let mut reserved = Slot::reserve(&slots, free.min(LEASE_BATCH_MAX), concurrency);
                let n = reserved.len();
                if n == 0 {
                    break;
                }
                let bits = inner.entropy.token_bits();
                match ops::lease(
                    &*inner.store,
                    queue,
                    &inner.config.id,
                    n,
                    &bits,
                    inner.entropy.unit(),
                )
                .await
                {
                    Ok(batch) => {
                        refused.remove(queue);
                        if let Some((failures, lasted_ms)) = outage.recovered(now) {
                            tracing::info!(worker = %inner.config.id, failures, lasted_ms,
                                "the store takes lease calls again");
                        }
                        // The completer refills this queue's slots while it has ready work and
                        // is the pool's only queue (with several, this loop's rotation keeps
                        // them fair).
                        let more = batch.next_ms == Some(batch.now_ms);
                        refill.set((more && queues.len() == 1).then(|| queue.clone()));
                        for bad in batch.corrupt {
                            self.fail_corrupt(queue, bad).await;
                        }
                        if let Some(next) = batch.next_ms {
                            wait_ms = wait_ms.min(next.saturating_sub(batch.now_ms));
                        }
                        for task in batch.tasks {
                            leased_any = true;
                            free -= 1;
                            let slot = match reserved.pop() {
                                Some(s) => s.assign(),
                                None => Slot::take(&slots),
                            };
                            self.spawn_task(
                                &mut in_flight,
                                task,
                                slot,
                                now,
                                batch.now_ms,
                                &hard_stop,
                                &done_tx,
                            );
                        }
                    }
                    Err(e) if e.is_unavailable() => {
                        let retry = outage.failed(now);
                        if retry.started {
                            tracing::warn!(worker = %inner.config.id, queue = %queue, error = %e,
                                "the store refused a lease call; backing off until it answers");
                        }
                        wait_ms = wait_ms.min(retry.wait_ms);
                        // The store refuses now: the other queues wait for the next round.
                        reserved.into_iter().for_each(Slot::give_back);
                        break;
                    }
                    Err(e) => {
                        let refusals = refused.get(queue).map_or(0, |r| r.0) + 1;
                        let wait = lease_refused_backoff_ms(inner.config.idle_poll_ms, refusals);
                        tracing::warn!(queue = %queue, error = %e, refusals, wait_ms = wait,
                            "lease refused; asking this queue again later");
                        refused.insert(queue.clone(), (refusals, now + wait));
                    }
                }
                reserved.into_iter().for_each(Slot::give_back);
            }
            rotate = rotate.wrapping_add(1);
            idle = !leased_any;
            if lane == 0 {
                inner
                    .lanes
                    .first_polling
                    .store(!leased_any, Ordering::SeqCst);
            }
            if leased_any {
                // Work has come: the pool's idle lanes ask too.
                inner.lanes.wake.notify_waiters();
            } else {
                // An idle lane other than the first polls LANE_IDLE_FACTOR times less often
                // while the first one polls too and nothing is due sooner: the first lane's
                // polls find new work and wake it, so a pool of lanes asks an idle store about
                // as often as one lane does. (While the first lane is busy, the others poll as
                // usual, so new work never waits for a busy lane.)
                if lane > 0
                    && wait_ms >= inner.config.idle_poll_ms
                    && inner.lanes.first_polling.load(Ordering::SeqCst)
                {
                    wait_ms =
                        wait_ms.max(inner.config.idle_poll_ms.saturating_mul(LANE_IDLE_FACTOR));
                }
                let sleep = inner.clock.sleep(wait_ms.max(1));
                let mut got = None;
                tokio::select! {
                    biased;
                    _ = sleep => {}
                    _ = shutdown.cancelled() => {}
                    r = leased_rx.recv() => got = r,
                    _ = slots.freed.notified() => {}
                    _ = inner.lanes.wake.notified() => {}
                    // The store's wake-up: work was made ready, or (serving every queue) a
                    // queue is new, so the list is read again.
                    _ = woken(&mut wake_rx) => {
                        if all_queues {
                            queues_refreshed_ms = 0;
                        }
                    }
                    Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
                }
                if let Some(r) = got {
                    self.spawn_refilled(r, &mut in_flight, &hard_stop, &done_tx)
                        .await;
                }
            }
        }
        // Graceful shutdown: wait for in-flight handlers, then abort and release the rest.
        let grace = inner.clock.sleep(inner.config.shutdown_grace_ms);
        tokio::pin!(grace);
        // Tasks the completer leased in a call that was in flight when shutdown began run too.
        loop {
            while let Ok(r) = leased_rx.try_recv() {
                self.spawn_refilled(r, &mut in_flight, &hard_stop, &done_tx)
                    .await;
            }
            if in_flight.is_empty() {
                break;
            }
            tokio::select! {
                biased;
                _ = in_flight.join_next() => {}
                _ = &mut grace => {
                    hard_stop.cancel();
                    while in_flight.join_next().await.is_some() {}
                    break;
                }
            }
        }
        drop(done_tx);
        completer.abort_all();
        // Leased after the last handler finished (the completer's last call): give them back.
        leased_rx.close();
        while let Ok(r) = leased_rx.try_recv() {
            for bad in r.leased.corrupt {
                self.fail_corrupt(&r.queue, bad).await;
            }
            for task in r.leased.tasks {
                if let Some(lease) = &task.lease {
                    if let Err(e) =
                        ops::release(&*inner.store, &r.queue, &task.id, &lease.token).await
                    {
                        tracing::warn!(task = %task.id, error = %e, "release at shutdown failed");
                    }
                }
            }
        }
        tracing::debug!(worker = %inner.config.id, lane, "lane stopped");
    }

    /// Run one leased task in `in_flight`, holding `slot`. Its lease deadline by the local clock
    /// is `local_ms` (just before the lease call) plus the lease's length by the store's clock.
    #[allow(clippy::too_many_arguments)]
    fn spawn_task(
        &self,
        in_flight: &mut JoinSet<()>,
        task: Task,
        slot: Slot,
        local_ms: u64,
        store_now_ms: u64,
        hard_stop: &CancellationToken,
        done: &mpsc::UnboundedSender<PendingCompletion>,
    ) {
        let inner = self.inner.clone();
        let hard = hard_stop.clone();
        let done = done.clone();
        let local_deadline_ms = task
            .lease
            .as_ref()
            .map(|l| local_ms + l.expires_at_ms.saturating_sub(store_now_ms))
            .unwrap_or(local_ms);
        in_flight.spawn(async move {
            inner
                .run_task(task, slot, local_deadline_ms, hard, done)
                .await;
        });
    }

    /// Run the tasks the completer leased (each in its reserved slot; unused slots go back), and
    /// fail the corrupt ones.
    async fn spawn_refilled(
        &self,
        r: Refilled,
        in_flight: &mut JoinSet<()>,
        hard_stop: &CancellationToken,
        done: &mpsc::UnboundedSender<PendingCompletion>,
    ) {
        let Refilled {
            queue,
            leased,
            mut slots,
            pool,
            local_ms,
        } = r;
        for task in leased.tasks {
            let slot = match slots.pop() {
                Some(s) => s.assign(),
                None => Slot::take(&pool),
            };
            self.spawn_task(
                in_flight,
                task,
                slot,
                local_ms,
                leased.now_ms,
                hard_stop,
                done,
            );
        }
        slots.into_iter().for_each(Slot::give_back);
        for bad in leased.corrupt {
            self.fail_corrupt(&queue, bad).await;
        }
    }

    /// A leased task no handler can run (its fields could not be decoded): fail it permanently,
    /// so that it lands in the DLQ with the reason instead of expiring and retrying in vain. When
    /// the fields do not even name the task and its token, its lease is left to expire.
    async fn fail_corrupt(&self, queue: &str, bad: ops::CorruptLease) {
        tracing::warn!(queue = %queue, task = %bad.id, error = %bad.error,
            "leased a task whose fields cannot be decoded; failing it");
        if bad.id.is_empty() || bad.token.is_empty() {
            return;
        }
        let message = format!("corrupt task: {}", bad.error);
        let r = ops::fail(
            &*self.inner.store,
            queue,
            &bad.id,
            &bad.token,
            &message,
            false,
            0.0,
        )
        .await;
        if let Err(e) = r {
            tracing::warn!(task = %bad.id, error = %e, "failing a corrupt task was refused");
        }
    }
}

impl Inner {
    /// Run one leased task to its reported outcome, holding `slot` while its handler runs.
    async fn run_task(
        self: Arc<Self>,
        task: Task,
        slot: Slot,
        local_deadline_ms: u64,
        hard_stop: CancellationToken,
        done: mpsc::UnboundedSender<PendingCompletion>,
    ) {
        let Some(lease) = task.lease.clone() else {
            return;
        };
        let queue = task.queue.clone();
        let id = task.id.clone();
        let lease_ms = task.lease_ms;
        let (outcome, local_deadline_ms) = self
            .execute(task, lease.clone(), local_deadline_ms, hard_stop.clone())
            .await;
        drop(slot);
        let held = Finished {
            queue: &queue,
            id: &id,
            token: &lease.token,
            lease_ms,
            local_deadline_ms,
        };
        self.report(held, outcome, &hard_stop, &done).await;
    }

    /// Run the handler under heartbeats, timeout and cancellation; return how it ended and the
    /// lease's deadline by the local clock as the last heartbeat left it.
    async fn execute(
        &self,
        task: Task,
        lease: crate::task::Lease,
        mut local_deadline_ms: u64,
        hard_stop: CancellationToken,
    ) -> (Outcome, u64) {
        let Some(handler) = self.handlers.get(&task.task_type) else {
            let missing = HandlerError::retryable(format!(
                "no handler for type {:?} on worker {}",
                task.task_type, self.config.id
            ));
            return (Outcome::Failed(missing), local_deadline_ms);
        };
        let cancel = CancellationToken::new();
        let ctx = TaskContext {
            attempt: task.attempt,
            epoch: lease.epoch,
            cancel: cancel.clone(),
            task: task.clone(),
        };
        // A spawned task turns a handler panic into a JoinError instead of killing the worker.
        // The guard aborts it when this future is dropped (the worker crashed or was stopped),
        // so a handler never outlives the worker that runs it.
        let mut run = AbortOnDrop(tokio::spawn(async move { handler.handle(ctx).await }));
        let every_ms = heartbeat_interval_ms(task.lease_ms, self.config.heartbeat_divisor);
        let timeout = match task.timeout_ms {
            Some(ms) => self.clock.sleep(ms),
            None => Box::pin(std::future::pending()),
        };
        tokio::pin!(timeout);
        let (mut next_beat_ms, mut refusals) = (every_ms, 0u32);
        let outcome = loop {
            let beat = self.clock.sleep(next_beat_ms);
            tokio::select! {
                biased;
                joined = &mut run.0 => {
                    break match joined {
                        Ok(Ok(value)) => Outcome::Succeeded(value.to_string()),
                        Ok(Err(e)) => Outcome::Failed(e),
                        Err(e) if e.is_panic() => Outcome::Failed(HandlerError::retryable("handler panicked")),
                        Err(_) => Outcome::LeaseLost,
                    };
                }
                _ = beat => {
                    let reply = ops::heartbeat(&*self.store, &task.queue, &task.id, &lease.token, 0).await;
                    let now = self.clock.now_ms();
                    match &reply {
                        Ok((store_now, exp)) => {
                            local_deadline_ms = now + exp.saturating_sub(*store_now);
                            refusals = 0;
                        }
                        Err(e) => {
                            refusals += u32::from(e.is_unavailable());
                            tracing::debug!(task = %task.id, error = %e, "heartbeat failed");
                        }
                    }
                    match after_heartbeat(&reply, refusals, now, local_deadline_ms, every_ms, self.entropy.unit()) {
                        BeatStep::Held { .. } if self.config.planted_heartbeat_waits_interval => next_beat_ms = every_ms,
                        BeatStep::Held { next_in_ms } => next_beat_ms = next_in_ms,
                        BeatStep::Lost if self.config.planted_ignore_lost_lease => next_beat_ms = every_ms,
                        BeatStep::Lost => {
                            tracing::info!(task = %task.id, "lease lost; aborting handler");
                            break Outcome::LeaseLost;
                        }
                    }
                }
                _ = &mut timeout => {
                    break Outcome::Failed(HandlerError::retryable(format!(
                        "handler timed out after {} ms", task.timeout_ms.unwrap_or(0))));
                }
                _ = hard_stop.cancelled() => break Outcome::Release,
            }
        };
        if !run.0.is_finished() {
            cancel.cancel();
            run.0.abort();
            // An abort takes effect when the runtime next reaches the handler's task: wait for
            // it (bounded), so the release or retry below is not reported, and `stop` does not
            // return, while the handler still runs. A handler that blocks its thread instead of
            // yielding is left behind after the bound.
            tokio::select! {
                _ = &mut run.0 => {}
                _ = self.clock.sleep(HANDLER_ABORT_WAIT_MS) => {
                    tracing::warn!(task = %task.id, "handler still running {HANDLER_ABORT_WAIT_MS} ms after its abort");
                }
            }
        }
        (outcome, local_deadline_ms)
    }

    /// Report `outcome` ([`crate::report`]): a transient failure is retried with the same token
    /// (the scripts apply it once) for as long as the lease can still be live, heartbeating
    /// meanwhile so the lease stays live through a refusal shorter than it; a permanent answer,
    /// a lost lease, a certainly expired lease or a hard stop ends it. Successes go through the
    /// pool's completer (group commit); failures and releases are sent at once.
    async fn report(
        &self,
        mut held: Finished<'_>,
        outcome: Outcome,
        hard_stop: &CancellationToken,
        done: &mpsc::UnboundedSender<PendingCompletion>,
    ) {
        let (queue, id, token) = (held.queue, held.id, held.token);
        let every_ms = heartbeat_interval_ms(held.lease_ms, self.config.heartbeat_divisor);
        let (mut next_beat_at_ms, mut beat_refusals) = (self.clock.now_ms() + every_ms, 0u32);
        let mut first_error: Option<Error> = None;
        for tries in 0u32.. {
            let result = match &outcome {
                Outcome::Succeeded(v) => {
                    let (tx, rx) = oneshot::channel();
                    let item = Completion {
                        id: id.to_string(),
                        token: token.to_string(),
                        result: v.clone(),
                    };
                    if done.send((queue.to_string(), item, tx)).is_err() {
                        return;
                    }
                    match rx.await {
                        Ok(r) => r.map(|_| ()),
                        // The completer stopped: the pool is being torn down.
                        Err(_) => return,
                    }
                }
                Outcome::Failed(e) => ops::fail(
                    &*self.store,
                    queue,
                    id,
                    token,
                    &e.message,
                    e.retryable,
                    self.entropy.unit(),
                )
                .await
                .map(|_| ()),
                Outcome::Release => ops::release(&*self.store, queue, id, token)
                    .await
                    .map(|_| ()),
                Outcome::LeaseLost => return,
            };
            let now = self.clock.now_ms();
            let step = report_step(
                result.as_ref().map(|_| ()),
                tries,
                now,
                held.local_deadline_ms,
                self.entropy.unit(),
            );
            let after_ms = match step {
                ReportStep::Recorded => {
                    if let Some(e) = first_error {
                        tracing::info!(task = %id, tries, first_error = %e,
                            "outcome recorded after the store refused it");
                    }
                    return;
                }
                ReportStep::Refused => {
                    // Stale or cancelled: another worker owns the task now, or nobody should.
                    if let Err(e) = result {
                        tracing::info!(task = %id, error = %e, "outcome refused");
                    }
                    return;
                }
                ReportStep::Expired => {
                    if let Err(e) = result {
                        tracing::warn!(task = %id, tries, error = %e,
                            "the lease expired before the store took the outcome; the task will run again");
                    }
                    return;
                }
                ReportStep::Retry { .. } if self.config.planted_drop_refused_outcome => return,
                ReportStep::Retry { after_ms } => after_ms,
            };
            if first_error.is_none() {
                if let Err(e) = result {
                    // Logged once per outcome; the recovery is logged when it comes.
                    tracing::warn!(task = %id, error = %e,
                        "the store refused the outcome for now; retrying with the same token while the lease lasts");
                    first_error = Some(e);
                }
            }
            // Wait, heartbeating whenever one is due, so the lease stays live meanwhile.
            let until_ms = now + after_ms;
            loop {
                let now = self.clock.now_ms();
                if now >= until_ms {
                    break;
                }
                if now >= next_beat_at_ms {
                    let reply = ops::heartbeat(&*self.store, queue, id, token, 0).await;
                    let now = self.clock.now_ms();
                    match &reply {
                        Ok((store_now, exp)) => {
                            held.local_deadline_ms = now + exp.saturating_sub(*store_now);
                            beat_refusals = 0;
                        }
                        Err(e) => beat_refusals += u32::from(e.is_unavailable()),
                    }
                    let step = after_heartbeat(
                        &reply,
                        beat_refusals,
                        now,
                        held.local_deadline_ms,
                        every_ms,
                        self.entropy.unit(),
                    );
                    match step {
                        BeatStep::Held { .. } if self.config.planted_heartbeat_waits_interval => {
                            next_beat_at_ms = now + every_ms
                        }
                        BeatStep::Held { next_in_ms } => next_beat_at_ms = now + next_in_ms,
                        // Past the deadline the next try of the outcome ends it as expired.
                        BeatStep::Lost if now >= held.local_deadline_ms => {
                            next_beat_at_ms = u64::MAX
                        }
                        BeatStep::Lost => {
                            tracing::info!(task = %id, "lease lost while its outcome waited for the store");
                            return;
                        }
                    }
                    continue;
                }
                let wake_ms = until_ms.min(next_beat_at_ms);
                tokio::select! {
                    _ = self.clock.sleep(wake_ms - now) => {}
                    _ = hard_stop.cancelled() => {
                        tracing::warn!(task = %id,
                            "stopping with an outcome the store has not taken; its lease will expire");
                        return;
                    }
                }
            }
        }
    }
}

/// A leased task whose outcome is being reported: where it is, its lease token, the lease's
/// length (ms) and its deadline by the local clock (ms, moved on by heartbeats).
struct Finished<'a> {
    queue: &'a str,
    id: &'a str,
    token: &'a str,
    lease_ms: u64,
    local_deadline_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a queue whose lease calls are refused is asked again after a wait that doubles from
    // the idle poll and stops growing at the cap, so a corrupt queue is never polled in a loop.
    #[test]
    fn refused_lease_backoff_doubles_up_to_its_cap() {
        let waits: Vec<u64> = (1..=9).map(|n| lease_refused_backoff_ms(100, n)).collect();
        assert_eq!(
            waits,
            [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000],
            "doubling from idle_poll_ms, capped"
        );
        assert_eq!(lease_refused_backoff_ms(0, 1), 1, "never zero");
        assert_eq!(
            lease_refused_backoff_ms(100, u32::MAX),
            LEASE_REFUSED_BACKOFF_MS_MAX
        );
    }
}
