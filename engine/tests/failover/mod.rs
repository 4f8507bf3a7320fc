//! The failover workload that `sentinel.rs` and `cluster.rs` share (issue 21, item 5), and the
//! helpers both use: a client submitting one task after another (each retried with its
//! idempotency key until acknowledged), a worker pool and a scheduler, each on a store of its
//! own as separate processes would be, run while a test injects a fault (a kill -9 of a primary,
//! or a planned failover). Afterwards every acknowledged task is waited for until it is
//! completed or provably lost, and two losses are counted:
//! - a lost acknowledged submit: a task whose submit was acknowledged and that the store does
//!   not know after the failover;
//! - a lost recorded outcome: a task whose success the store acknowledged to the worker (seen by
//!   a wrapper of the worker's store: a `complete` / `complete_batch` reply of `completed` or
//!   `again` for it) whose handler started again after that acknowledgement (the completion was
//!   rolled back, so the task was queued or leased again). A task that is also lost outright is
//!   counted once, as a lost submit.
//!
//! What it checks besides: submits and outcomes resume within [`RESUME_DEADLINE`] of the fault
//! (the figures are printed, never asserted tighter), and the scheduler reaps a lease left by a
//! crashed worker after the failover. What it skips: failed and released outcomes (the handler
//! always succeeds), cancels, replays and settings (never sent), and tasks run twice before
//! their outcome was acknowledged (a lost lease; at-least-once delivery allows it).
//!
//! Every test binary that includes this module uses a different subset of it.
#![allow(dead_code)]

use crate::common::{backoff, eventually, spawn_worker, spec, RunningWorker, DEADLINE};
use async_trait::async_trait;
use orq::{
    ops, Client, Entropy, Handler, HandlerError, Handlers, RedisStore, Resp, Scheduler,
    SchedulerConfig, Status, Store, StoreError, SystemClock, Task, TaskContext, WaitReplicas,
    WorkerConfig,
};
use orq_lua::Script;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Longest wait for the first acknowledged submit, and the first acknowledged outcome, after a
/// fault: the bound within which orq must carry on. Generous for a loaded 2-core machine; a
/// failover here takes about 1-3 s, a replica's resync a second more.
pub const RESUME_DEADLINE: Duration = Duration::from_secs(30);

/// Longest wait for the tasks of a failover test to finish (a failover, lease expiries and
/// re-runs on a loaded machine).
pub const LONG: Duration = Duration::from_secs(90);

/// Without `--wait-replicas`, what a kill -9 of a primary may take with it: only what it
/// acknowledged in this window before it died. Replication is asynchronous but continuous (the
/// primary streams each write to its replica as it answers the client), so what a crash loses
/// is what was still on its way to the replica: on loopback a fraction of a millisecond, on a
/// loaded machine the time the replica waits for a CPU. 2 s is far above both, so the
/// assertion only fails when something older is lost, which replication lag cannot explain.
pub const LOSS_WINDOW: Duration = Duration::from_secs(2);

/// `--wait-replicas 1` for the tests that must lose nothing: each recorded write answers once
/// one replica has it, at most 500 ms (then the call is refused as transient and sent again).
pub const WAIT_ONE: WaitReplicas = WaitReplicas {
    replicas: 1,
    timeout_ms: 500,
};

/// The lease of the workload's tasks (ms): long enough that a busy worker keeps it through a
/// failover, short enough that a task whose lease was lost with the old primary is reaped and
/// run again well within [`LONG`].
pub const TASK_LEASE_MS: u64 = 5_000;

/// Submits acknowledged before the fault, so that the fault hits a running workload.
const BUSY_ACKS: usize = 30;

/// Outcomes acknowledged before the fault.
const BUSY_OUTCOMES: usize = 5;

/// How long the workload runs before the fault: longer than [`LOSS_WINDOW`], so that some of
/// what was acknowledged before the fault is outside the window and must survive.
const BUSY_FOR: Duration = Duration::from_secs(3);

/// Submits started after the service resumed and acknowledged, before the submitter stops: the
/// workload carries on, not just one call.
const AFTER_FAULT_ACKS: usize = 20;

/// A client on `store`.
pub fn client_on(store: &Arc<dyn Store>) -> Client {
    Client::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_os()),
    )
}

/// A sync connection to the server on `port`, for commands the engine never sends.
pub fn node(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("node url")
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("connect to the server on {port}: {e}"))
}

/// A worker config serving `queues` (every known queue when empty).
pub fn worker_config(id: &str, queues: &[&str]) -> WorkerConfig {
    WorkerConfig {
        id: id.into(),
        queues: queues.iter().map(|q| q.to_string()).collect(),
        concurrency: 4,
        idle_poll_ms: 50,
        heartbeat_divisor: 3,
        shutdown_grace_ms: 1_000,
        ..WorkerConfig::default()
    }
}

/// A scheduler running in the background; stopped when [`RunningScheduler::stop`] is called
/// (or, without waiting, when dropped).
pub struct RunningScheduler {
    shutdown: CancellationToken,
    handle: Option<JoinHandle<()>>,
}

impl RunningScheduler {
    /// Stop the scheduler and wait until it has (within [`DEADLINE`]).
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        let handle = self.handle.take().expect("scheduler handle");
        tokio::time::timeout(DEADLINE, handle)
            .await
            .expect("the scheduler stops")
            .expect("the scheduler did not panic");
    }
}

impl Drop for RunningScheduler {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Start a scheduler on `store` promoting and reaping every 100 ms.
pub fn spawn_scheduler(store: &Arc<dyn Store>) -> RunningScheduler {
    let scheduler = Scheduler::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_os()),
        SchedulerConfig {
            interval_ms: 100,
            ..SchedulerConfig::default()
        },
    );
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { scheduler.run(shutdown).await }
    });
    RunningScheduler {
        shutdown,
        handle: Some(handle),
    }
}

/// Lease one task of `queue` as a worker `w-crashed` that then crashes (never heartbeats nor
/// reports): only the scheduler's reaping frees it. Panics unless exactly one task is leased.
pub async fn lease_as_crashed_worker(store: &dyn Store, queue: &str) -> Task {
    let entropy = Entropy::from_os();
    let mut leased = ops::lease(
        store,
        queue,
        "w-crashed",
        1,
        &entropy.token_bits(),
        entropy.unit(),
    )
    .await
    .expect("lease as the crashed worker");
    assert_eq!(leased.tasks.len(), 1, "one task leased of {queue}");
    leased.tasks.pop().expect("one task")
}

/// When each task's handler started, per task id.
#[derive(Clone, Default)]
pub struct RunLog(Arc<Mutex<HashMap<String, Vec<Instant>>>>);

impl RunLog {
    /// The start of each run of task `id`.
    pub fn of(&self, id: &str) -> Vec<Instant> {
        let runs = self.0.lock().expect("run log");
        runs.get(id).cloned().unwrap_or_default()
    }
}

/// `slow`: notes when it starts, sleeps 100 ms, then returns the payload, so that tasks are
/// running when the primary goes away.
#[derive(Clone, Default)]
pub struct Slow {
    /// Every run's start.
    pub runs: RunLog,
}

#[async_trait]
impl Handler for Slow {
    async fn handle(&self, ctx: TaskContext) -> Result<serde_json::Value, HandlerError> {
        self.runs
            .0
            .lock()
            .expect("run log")
            .entry(ctx.task.id.clone())
            .or_default()
            .push(Instant::now());
        tokio::time::sleep(Duration::from_millis(100)).await;
        serde_json::from_str(&ctx.task.payload)
            .map_err(|e| HandlerError::permanent(format!("payload is not JSON: {e}")))
    }
}

/// A store that notes, for each task, when the store first acknowledged its success to the
/// caller: a `complete` or `complete_batch` reply saying `completed` or `again` for it. With
/// `--wait-replicas` that reply comes only after the replicas have the write.
pub struct OutcomeLog {
    store: Arc<dyn Store>,
    acked: Arc<Mutex<HashMap<String, Instant>>>,
}

impl OutcomeLog {
    /// Note the acknowledgements of `reply` to a call of `script` with `args`.
    fn note(&self, script: &Script, args: &[Vec<u8>], reply: &Resp) {
        let Some(items) = reply.as_array() else {
            return;
        };
        // complete: ARGV[1] the id, reply {now_ms, outcome}; complete_batch: ARGV[3] n, then
        // (id, token, result) per item, reply {now_ms, {outcome, ...}, ...}.
        let acked: Vec<(&[u8], &Resp)> = match script.name {
            "complete" => match (args.first(), items.get(1)) {
                (Some(id), Some(o)) => vec![(id.as_slice(), o)],
                _ => Vec::new(),
            },
            "complete_batch" => {
                let outcomes = items.get(1).and_then(Resp::as_array).unwrap_or_default();
                outcomes
                    .iter()
                    .enumerate()
                    .filter_map(|(i, o)| Some((args.get(3 + 3 * i)?.as_slice(), o)))
                    .collect()
            }
            _ => Vec::new(),
        };
        let now = Instant::now();
        let mut log = self.acked.lock().expect("outcome log");
        for (id, outcome) in acked {
            if matches!(outcome.as_str(), Some("completed" | "again")) {
                log.entry(String::from_utf8_lossy(id).into_owned())
                    .or_insert(now);
            }
        }
    }
}

#[async_trait]
impl Store for OutcomeLog {
    async fn eval(
        &self,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<Resp, StoreError> {
        let reply = self.store.eval(script, keys, args).await?;
        self.note(script, args, &reply);
        Ok(reply)
    }

    fn wake(&self, channels: &[String]) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.store.wake(channels)
    }
}

/// A task the submitter got an acknowledgement for.
#[derive(Debug, Clone)]
pub struct Acked {
    pub id: String,
    /// When its first submit attempt started.
    pub started: Instant,
    /// When the acknowledgement came.
    pub acked: Instant,
}

/// Submit `spec` as a client would through a failover: retry on a transient error (the same
/// idempotency key, so a retry of a submit that was stored returns that task) until it is
/// acknowledged; panic on any other error or after [`LONG`]. `spec` must carry an idempotency
/// key: a submit refused as transient may have been stored (NOREPLICAS after the write, a lost
/// reply), and without the key its retry would store a second task.
pub async fn submit_retrying(client: &Client, spec: orq::TaskSpec) -> Acked {
    assert!(
        spec.idempotency_key.is_some(),
        "submit_retrying needs an idempotency key"
    );
    let started = Instant::now();
    loop {
        match client.submit(spec.clone()).await {
            Ok(s) => {
                return Acked {
                    id: s.task.id,
                    started,
                    acked: Instant::now(),
                }
            }
            Err(e) => {
                assert!(e.is_unavailable(), "only transient errors meanwhile: {e}");
                assert!(started.elapsed() < LONG, "no submit succeeded in {LONG:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Submit `slow` tasks `<queue>-<i>` (the idempotency key) to `queue` one after another, each
/// retried until acknowledged, until `stop` fires; the acknowledged ones are pushed to `acked`.
pub fn spawn_submitter(
    client: Client,
    queue: &str,
    acked: Arc<Mutex<Vec<Acked>>>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    let queue = queue.to_string();
    tokio::spawn(async move {
        let mut i = 0u64;
        while !stop.is_cancelled() {
            let s = spec(&queue, "slow", &format!(r#"{{"i":{i}}}"#))
                .lease_ms(TASK_LEASE_MS)
                .max_retries(10)
                .backoff(backoff(50, 1.0))
                .idempotency_key(format!("{queue}-{i}"));
            let a = submit_retrying(&client, s).await;
            acked.lock().expect("acked").push(a);
            i += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}

/// Wait until each task of `tasks` in `queue` is finished or not found (lost), within
/// [`LONG`]. Returns the lost ones. Transient errors are retried.
pub async fn completed_or_lost(client: &Client, queue: &str, tasks: &[Acked]) -> Vec<Acked> {
    let deadline = Instant::now() + LONG;
    let mut pending: Vec<Acked> = tasks.to_vec();
    let mut lost = Vec::new();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for a in pending {
            match client.get(Some(queue), &a.id).await {
                Ok(t) if t.status == Status::Completed => {}
                Ok(t) => {
                    assert!(!t.status.is_finished(), "{} ended {}", a.id, t.status);
                    still.push(a)
                }
                Err(orq::Error::NotFound { .. }) => lost.push(a),
                Err(e) if e.is_unavailable() => still.push(a),
                Err(e) => panic!("get {}: {e}", a.id),
            }
        }
        pending = still;
        if !pending.is_empty() {
            assert!(
                Instant::now() < deadline,
                "{} acknowledged tasks not completed after {LONG:?}: {:?}",
                pending.len(),
                pending.iter().map(|a| &a.id).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    lost
}

/// The failover workload on one queue: a submitter, a worker pool and a scheduler, each with
/// its own store on the same URL (and the same `--wait-replicas`).
pub struct Workload {
    queue: String,
    /// A client on the submitter's store, for the test's own calls.
    pub client: Client,
    scheduler_store: Arc<dyn Store>,
    acked: Arc<Mutex<Vec<Acked>>>,
    outcomes: Arc<Mutex<HashMap<String, Instant>>>,
    runs: RunLog,
    stop: CancellationToken,
    submitter: JoinHandle<()>,
    worker: RunningWorker,
    scheduler: RunningScheduler,
}

/// A store on `url` that waits for replicas as `wait` says.
async fn store_on(url: &str, wait: Option<WaitReplicas>) -> Arc<dyn Store> {
    let store = RedisStore::connect(url)
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
    Arc::new(store.with_wait_replicas(wait))
}

impl Workload {
    /// Start the workload on `queue` through `url` and return once it is busy: tasks are
    /// acknowledged, running and completing.
    pub async fn start(url: &str, wait: Option<WaitReplicas>, queue: &str) -> Workload {
        let api = store_on(url, wait).await;
        let outcomes = Arc::new(Mutex::new(HashMap::new()));
        let worker_store: Arc<dyn Store> = Arc::new(OutcomeLog {
            store: store_on(url, wait).await,
            acked: outcomes.clone(),
        });
        let scheduler_store = store_on(url, wait).await;
        let slow = Slow::default();
        let worker = spawn_worker(
            worker_store,
            Handlers::new().register("slow", slow.clone()),
            worker_config(&format!("w-{queue}"), &[queue]),
        );
        let scheduler = spawn_scheduler(&scheduler_store);
        let client = client_on(&api);
        let acked = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let submitter = spawn_submitter(client.clone(), queue, acked.clone(), stop.clone());
        let w = Workload {
            queue: queue.to_string(),
            client,
            scheduler_store,
            acked,
            outcomes,
            runs: slow.runs,
            stop,
            submitter,
            worker,
            scheduler,
        };
        let started = Instant::now();
        eventually("the workload to be busy", || async {
            let submits = w.acked.lock().expect("acked").len();
            let outcomes = w.outcomes.lock().expect("outcomes").len();
            (submits >= BUSY_ACKS && outcomes >= BUSY_OUTCOMES && started.elapsed() >= BUSY_FOR)
                .then_some(())
        })
        .await;
        w
    }

    /// After a fault injected at `fault` (for a crash, taken once the process is gone, so that
    /// whatever the old primary acknowledged, it acknowledged before): check that submits and
    /// outcomes resume within [`RESUME_DEADLINE`], let [`AFTER_FAULT_ACKS`] more submits
    /// through, stop submitting, wait until every acknowledged task is completed or lost, count
    /// the losses, stop the worker, check that the scheduler reaps a crashed worker's lease, and
    /// stop the scheduler. The caller lets the deployment settle first (one primary left), so
    /// that the checks read the primary that survives.
    pub async fn finish(self, fault: Instant) -> Figures {
        let first_ack = |log: &[Instant]| log.iter().copied().filter(|&t| t > fault).min();
        let resumed = loop {
            if self.submitter.is_finished() {
                // It stops only on `stop`, not yet fired, or by a panic: show that panic now.
                match self.submitter.await {
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    other => panic!("the submitter ended early: {other:?}"),
                }
            }
            let submits: Vec<Instant> = self.submit_acks();
            let outcomes: Vec<Instant> = self.outcome_acks();
            if let (Some(s), Some(o)) = (first_ack(&submits), first_ack(&outcomes)) {
                break s.max(o);
            }
            assert!(
                fault.elapsed() < RESUME_DEADLINE,
                "no submit (or no outcome) acknowledged within {RESUME_DEADLINE:?} of the fault"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let deadline = Instant::now() + LONG;
        loop {
            let after = self
                .acked
                .lock()
                .expect("acked")
                .iter()
                .filter(|a| a.started > resumed)
                .count();
            if after >= AFTER_FAULT_ACKS {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "only {after} submits acknowledged after the service resumed, in {LONG:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.stop.cancel();
        tokio::time::timeout(LONG, self.submitter)
            .await
            .expect("the submitter stops")
            .expect("the submitter did not panic");

        let acked = self.acked.lock().expect("acked").clone();
        let lost_submits = completed_or_lost(&self.client, &self.queue, &acked).await;
        self.worker.stop().await;
        let lost_ids: HashSet<&str> = lost_submits.iter().map(|a| a.id.as_str()).collect();
        let outcomes = self.outcomes.lock().expect("outcomes").clone();
        let mut lost_outcomes: Vec<(String, Instant)> = outcomes
            .iter()
            .filter(|(id, _)| !lost_ids.contains(id.as_str()))
            .filter(|(id, &at)| self.runs.of(id).iter().any(|&run| run > at))
            .map(|(id, &at)| (id.clone(), at))
            .collect();
        lost_outcomes.sort_by_key(|(_, at)| *at);

        // The scheduler carries on: it reaps the lease of a worker that crashed after the
        // failover (no worker serves that queue, so nothing else could free it). The queue is
        // a fresh one: the workload's queue may still hold a task whose submit was applied but
        // never acknowledged (refused as NOREPLICAS when the submitter stopped), which a lease
        // there could take first. The submit carries an idempotency key, so a retry of a
        // submit stored but refused returns that task instead of storing a second one.
        let crash_queue = format!("{}-crashed", self.queue);
        let crashed = submit_retrying(
            &self.client,
            spec(&crash_queue, "slow", r#"{"crashed":true}"#)
                .lease_ms(1_000)
                .idempotency_key("crashed"),
        )
        .await;
        let leased = lease_as_crashed_worker(&*self.scheduler_store, &crash_queue).await;
        assert_eq!(leased.id, crashed.id);
        eventually(
            "the scheduler to reap the crashed worker's lease",
            || async {
                let t = self
                    .client
                    .get(Some(&crash_queue), &crashed.id)
                    .await
                    .ok()?;
                (t.status != Status::Leased).then_some(())
            },
        )
        .await;
        self.scheduler.stop().await;

        Figures {
            fault,
            submits: acked,
            outcomes: outcomes.into_values().collect(),
            lost_submits,
            lost_outcomes,
        }
    }

    /// When each submit was acknowledged, in order.
    fn submit_acks(&self) -> Vec<Instant> {
        let acked = self.acked.lock().expect("acked");
        acked.iter().map(|a| a.acked).collect()
    }

    /// When each task's outcome was first acknowledged.
    fn outcome_acks(&self) -> Vec<Instant> {
        let outcomes = self.outcomes.lock().expect("outcomes");
        outcomes.values().copied().collect()
    }
}

/// What a failover cost the workload.
pub struct Figures {
    /// When the fault was injected.
    pub fault: Instant,
    /// Every acknowledged submit.
    pub submits: Vec<Acked>,
    /// When each task's outcome was first acknowledged.
    pub outcomes: Vec<Instant>,
    /// Acknowledged submits whose task the store no longer knows.
    pub lost_submits: Vec<Acked>,
    /// Tasks whose acknowledged success was rolled back (the handler ran again after it), with
    /// the acknowledgement's time.
    pub lost_outcomes: Vec<(String, Instant)>,
}

/// The longest gap in `times` from the last one at or before `fault` on: (its end − `fault`,
/// its length). A crash shows as the gap from the last acknowledgement of the old primary to
/// the first of the new one.
fn longest_gap(times: &[Instant], fault: Instant) -> (Duration, Duration) {
    let mut sorted: Vec<Instant> = times.to_vec();
    sorted.sort();
    let from = sorted.iter().rposition(|&t| t <= fault).unwrap_or(0);
    sorted[from..]
        .windows(2)
        .map(|w| (w[1].saturating_duration_since(fault), w[1] - w[0]))
        .max_by_key(|&(_, gap)| gap)
        .unwrap_or_default()
}

impl Figures {
    /// Print the figures for the CI log: `what` names the test's deployment and fault.
    pub fn report(&self, what: &str) {
        let submit_acks: Vec<Instant> = self.submits.iter().map(|a| a.acked).collect();
        let first_after = |times: &[Instant]| {
            times
                .iter()
                .filter(|&&t| t > self.fault)
                .min()
                .map_or(0, |t| (*t - self.fault).as_millis())
        };
        let (submit_end, submit_stall) = longest_gap(&submit_acks, self.fault);
        let (outcome_end, outcome_stall) = longest_gap(&self.outcomes, self.fault);
        let window_start = self.fault - LOSS_WINDOW;
        let in_window = |t: Instant| t >= window_start && t <= self.fault;
        // Straight to stderr, not eprintln!: the test harness captures eprintln! of a test that
        // passes, and these figures belong in every CI log.
        let _ = writeln!(
            std::io::stderr(),
            "failover figures: {what}: first submit acknowledged {} ms after the fault, first \
             outcome {} ms; longest stall of submits {} ms (ended {} ms after the fault), of \
             outcomes {} ms (ended {} ms after); {} submits acknowledged ({} after the fault), \
             {} lost; {} outcomes acknowledged, {} lost; in the {} ms before the fault {} \
             submits and {} outcomes were acknowledged",
            first_after(&submit_acks),
            first_after(&self.outcomes),
            submit_stall.as_millis(),
            submit_end.as_millis(),
            outcome_stall.as_millis(),
            outcome_end.as_millis(),
            self.submits.len(),
            self.submits.iter().filter(|a| a.acked > self.fault).count(),
            self.lost_submits.len(),
            self.outcomes.len(),
            self.lost_outcomes.len(),
            LOSS_WINDOW.as_millis(),
            submit_acks.iter().filter(|&&t| in_window(t)).count(),
            self.outcomes.iter().filter(|&&t| in_window(t)).count(),
        );
    }

    /// With `--wait-replicas`: no acknowledged submit and no acknowledged outcome was lost.
    pub fn assert_nothing_lost(&self) {
        assert!(
            self.lost_submits.is_empty(),
            "acknowledged submits lost: {:?}",
            self.lost_submits
        );
        assert!(
            self.lost_outcomes.is_empty(),
            "acknowledged outcomes lost (the task ran again): {:?}",
            self.lost_outcomes
        );
    }

    /// Every loss is of something acknowledged at most [`LOSS_WINDOW`] before the fault, or
    /// later: what a replica had before the fault survives.
    pub fn assert_nothing_lost_before_window(&self) {
        let window_start = self.fault - LOSS_WINDOW;
        for a in &self.lost_submits {
            assert!(
                a.acked >= window_start,
                "a submit acknowledged {:?} before the fault was lost: {a:?}",
                self.fault - a.acked
            );
        }
        for (id, at) in &self.lost_outcomes {
            assert!(
                *at >= window_start,
                "an outcome of {id} acknowledged {:?} before the fault was lost",
                self.fault - *at
            );
        }
    }

    /// Without `--wait-replicas`, after a crash of the primary: every loss is of something the
    /// old primary acknowledged in the [`LOSS_WINDOW`] before it died; nothing acknowledged
    /// earlier, and nothing submitted after the fault, is lost. So the loss is at most what was
    /// acknowledged in that window.
    pub fn assert_loss_within_window(&self) {
        self.assert_nothing_lost_before_window();
        for a in &self.lost_submits {
            assert!(
                a.started < self.fault,
                "a submit started after the fault was lost: {a:?}"
            );
        }
        // A success the old primary acknowledged just before it died may be noted here a
        // little after the fault (the reply was in flight): at most the window later.
        for (id, at) in &self.lost_outcomes {
            assert!(
                *at <= self.fault + LOSS_WINDOW,
                "an outcome of {id} acknowledged {:?} after the fault was lost",
                *at - self.fault
            );
        }
    }
}
