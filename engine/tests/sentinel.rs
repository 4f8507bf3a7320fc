//! orq on a Sentinel deployment (one primary, one replica, three sentinels,
//! `orq::testing::RedisSentinel`): the `redis+sentinel://` store finds the primary through the
//! sentinels, runs every operation there, follows a crash failover and a planned one (the
//! connection and the wake-up subscriber find the new primary), and a master name the sentinels
//! do not know, or sentinels that do not listen, are errors within a timeout, not panics or hangs.

mod common;

use async_trait::async_trait;
use common::{eventually, spawn_worker, spec, Echo, DEADLINE};
use orq::keys::wake_channel;
use orq::testing::{RedisSentinel, MASTER_NAME};
use orq::{
    ops, Client, Entropy, Handler, HandlerError, Handlers, ListQuery, RedisStore, Scheduler,
    SchedulerConfig, Status, Store, SystemClock, TaskContext, WorkerConfig,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Longest wait for the tasks of a failover test to finish (a failover, lease expiries and
/// re-runs on a loaded machine).
const LONG: Duration = Duration::from_secs(90);

/// A client on `store`.
fn client_on(store: &Arc<dyn Store>) -> Client {
    Client::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_os()),
    )
}

/// A sync connection to the server on `port`, for commands the engine never sends.
fn node(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("node url")
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("connect to the server on {port}: {e}"))
}

/// PUBSUB NUMSUB of `channel` on the server on `port` (0 when it cannot be asked).
fn numsub(port: u16, channel: &str) -> i64 {
    let Ok(mut c) = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("node url")
        .get_connection_with_timeout(Duration::from_secs(5))
    else {
        return 0;
    };
    let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(&mut c)
        .unwrap_or_default();
    counts.first().map_or(0, |(_, n)| *n)
}

/// A `master_repl_offset` from `INFO replication` of the server on `port`.
fn repl_offset(port: u16) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut node(port))
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("master_repl_offset:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("master_repl_offset")
}

/// `slow`: sleeps 100 ms, then returns the payload, so that tasks are running when the primary
/// goes away.
#[derive(Clone, Default)]
struct Slow;

#[async_trait]
impl Handler for Slow {
    async fn handle(&self, ctx: TaskContext) -> Result<serde_json::Value, HandlerError> {
        tokio::time::sleep(Duration::from_millis(100)).await;
        serde_json::from_str(&ctx.task.payload)
            .map_err(|e| HandlerError::permanent(format!("payload is not JSON: {e}")))
    }
}

/// A worker config serving `queues`.
fn worker_config(id: &str, queues: &[&str]) -> WorkerConfig {
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

/// Start a scheduler on `store` reaping expired leases every 100 ms.
fn spawn_scheduler(store: &Arc<dyn Store>, shutdown: &CancellationToken) -> JoinHandle<()> {
    let scheduler = Scheduler::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_os()),
        SchedulerConfig {
            interval_ms: 100,
            ..SchedulerConfig::default()
        },
    );
    let shutdown = shutdown.clone();
    tokio::spawn(async move { scheduler.run(shutdown).await })
}

/// A task the submitter got an acknowledgement for.
#[derive(Debug, Clone)]
struct Acked {
    id: String,
    /// When its first submit attempt started.
    started: Instant,
    /// When the acknowledgement came.
    acked: Instant,
}

/// Submit `spec` as a client would through a failover: retry on a transient error (the same
/// idempotency key, so a retry of a submit that was stored returns that task) until it is
/// acknowledged; panic on any other error or after [`LONG`].
async fn submit_retrying(client: &Client, spec: orq::TaskSpec) -> Acked {
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

/// Submit tasks `<prefix>-<i>` to `queue` one after another (each retried until acknowledged)
/// until `stop` fires; the acknowledged ones are pushed to `acked`.
fn spawn_submitter(
    client: Client,
    queue: &'static str,
    prefix: &'static str,
    acked: Arc<Mutex<Vec<Acked>>>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut i = 0u64;
        while !stop.is_cancelled() {
            let s = spec(queue, "slow", &format!(r#"{{"i":{i}}}"#))
                .lease_ms(5_000)
                .idempotency_key(format!("{prefix}-{i}"));
            let a = submit_retrying(&client, s).await;
            acked.lock().unwrap().push(a);
            i += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}

/// Wait until each task of `tasks` in `queue` is completed or not found (lost), within
/// [`LONG`]. Returns the lost ones. Transient errors are retried.
async fn completed_or_lost(client: &Client, queue: &str, tasks: &[Acked]) -> Vec<Acked> {
    let deadline = Instant::now() + LONG;
    let mut pending: Vec<Acked> = tasks.to_vec();
    let mut lost = Vec::new();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for a in pending {
            match client.get(Some(queue), &a.id).await {
                Ok(t) if t.status == Status::Completed => {}
                Ok(_) => still.push(a),
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

// Goal: every operation works through a sentinel URL: connect finds the primary (ROLE master,
// CONFIG GET and used_memory answered by it), a real Worker runs a batch of tasks, a real
// Scheduler reaps a lease left by a crashed worker, and get, list, stats and the queue list read
// them back; the data is on the server the sentinels name as the primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_run_through_a_sentinel_url() {
    let fx = RedisSentinel::start();
    let redis = RedisStore::connect(&fx.url())
        .await
        .expect("connect through the sentinels");
    assert!(!redis.is_cluster());
    assert_eq!(redis.role().await.as_deref(), Some("master"));
    assert_eq!(
        redis.config_get("appendonly").await.as_deref(),
        Some("no"),
        "CONFIG GET answered by the primary"
    );
    assert!(redis.used_memory().await.is_some_and(|m| m > 0));
    let store: Arc<dyn Store> = Arc::new(redis.clone());
    let client = client_on(&store);
    let shutdown = CancellationToken::new();
    let scheduler = spawn_scheduler(&store, &shutdown);

    // A lease held by a worker that crashed: the scheduler reaps it.
    let crashed = client
        .submit(spec("sq", "echo", r#"{"crashed":true}"#).lease_ms(1_000))
        .await
        .unwrap();
    let entropy = Entropy::from_os();
    let leased = ops::lease(
        &*store,
        "sq",
        "w-crashed",
        1,
        &entropy.token_bits(),
        entropy.unit(),
    )
    .await
    .unwrap();
    assert_eq!(leased.tasks.len(), 1);
    eventually("the scheduler to reap the expired lease", || async {
        let t = client.get(Some("sq"), &crashed.task.id).await.unwrap();
        (t.status != Status::Leased).then_some(())
    })
    .await;

    let ids: Vec<String> = client
        .submit_batch(
            (0..10)
                .map(|i| spec("sq", "echo", &format!(r#"{{"i":{i}}}"#)))
                .collect(),
        )
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.task.id)
        .collect();
    let echo = Echo::default();
    let worker = spawn_worker(
        store.clone(),
        Handlers::new().register("echo", echo.clone()),
        worker_config("w-sentinel", &["sq"]),
    );
    for id in ids.iter().chain([&crashed.task.id]) {
        let t = eventually(&format!("task {id} to complete"), || async {
            let t = client.get(Some("sq"), id).await.unwrap();
            (t.status == Status::Completed).then_some(t)
        })
        .await;
        let want: serde_json::Value = serde_json::from_str(&t.payload).unwrap();
        let got: serde_json::Value = serde_json::from_str(t.result.as_deref().unwrap()).unwrap();
        assert_eq!(got, want, "{id}");
    }
    assert_eq!(echo.runs.of(&crashed.task.id)[0].worker, "w-sentinel");
    let page = client
        .list(&ListQuery {
            queue: "sq".into(),
            status: Some(Status::Completed),
            tenant: None,
            task_type: None,
            limit: 100,
            cursor: None,
        })
        .await
        .unwrap();
    assert_eq!(page.tasks.len(), 11);
    let stats = client.stats("sq").await.unwrap();
    assert_eq!(stats.counts[&Status::Completed], 11);
    assert_eq!(client.queues().await.unwrap(), ["sq"]);

    // The tasks live on the primary the sentinels name.
    let primary = fx.primary_port().expect("a sentinel answers");
    let exists: bool = redis::cmd("SISMEMBER")
        .arg(orq::keys::QUEUES_KEY)
        .arg("sq")
        .query(&mut node(primary))
        .unwrap();
    assert!(exists, "the queue registry is on the primary {primary}");

    worker.stop().await;
    shutdown.cancel();
    tokio::time::timeout(DEADLINE, scheduler)
        .await
        .expect("the scheduler stops")
        .unwrap();
}

// Goal: the store follows a crash failover under load. Tasks are submitted and running when the
// primary is killed (SIGKILL); a client keeps submitting, retrying each submit on a transient
// error with its idempotency key, until the sentinels have promoted the replica. Then:
// - submits succeed again (on the new primary), without restarting anything;
// - every task whose submit started after the kill completes (worker and scheduler on the new
//   primary); tasks acknowledged by the old primary just before it died may be lost (replication
//   is asynchronous): they are counted and printed, not asserted;
// - the wake-up subscriber of an idle worker's store found the new primary (PUBSUB NUMSUB there),
//   and a task submitted after the failover to that worker's queue runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_failover_is_followed_under_load() {
    let mut fx = RedisSentinel::start();
    let url = fx.url();
    let store: Arc<dyn Store> = Arc::new(RedisStore::connect(&url).await.unwrap());
    let client = client_on(&store);
    let shutdown = CancellationToken::new();
    let scheduler = spawn_scheduler(&store, &shutdown);
    let worker = spawn_worker(
        store.clone(),
        Handlers::new().register("slow", Slow),
        worker_config("w-busy", &["fq"]),
    );
    // An idle worker on its own store: only a wake-up (or its hourly poll) starts its tasks.
    let idle_store: Arc<dyn Store> = Arc::new(RedisStore::connect(&url).await.unwrap());
    let idle = spawn_worker(
        idle_store,
        Handlers::new().register("slow", Slow),
        WorkerConfig {
            idle_poll_ms: 3_600_000,
            lanes: 1,
            ..worker_config("w-idle", &["wq"])
        },
    );
    let old = fx.primary_port().expect("a sentinel answers");
    eventually("the idle worker to subscribe on the primary", || async {
        (numsub(old, &wake_channel("wq")) >= 1).then_some(())
    })
    .await;

    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    let submitter = spawn_submitter(client.clone(), "fq", "crash", acked.clone(), stop.clone());
    eventually("some tasks to be acknowledged and running", || async {
        let n = acked.lock().unwrap().len();
        let done = client.stats("fq").await.ok()?.counts[&Status::Completed];
        (n >= 30 && done >= 5).then_some(())
    })
    .await;

    let killed = fx.kill_primary();
    assert_eq!(killed, old);
    let killed_at = Instant::now();
    let new = tokio::task::block_in_place(|| fx.wait_for_new_primary(old));
    let promoted_at = Instant::now();
    assert_ne!(new, old);
    // Keep submitting until some acknowledgements came from the new primary.
    eventually("submits to succeed after the failover", || async {
        let n = acked
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.started > promoted_at)
            .count();
        (n >= 20).then_some(())
    })
    .await;
    stop.cancel();
    tokio::time::timeout(LONG, submitter)
        .await
        .expect("the submitter stops")
        .unwrap();
    let acked = acked.lock().unwrap().clone();
    let first_after = acked
        .iter()
        .filter(|a| a.acked > killed_at)
        .map(|a| a.acked)
        .min()
        .expect("a submit acknowledged after the kill");

    let (before, after): (Vec<Acked>, Vec<Acked>) =
        acked.iter().cloned().partition(|a| a.started < killed_at);
    let lost_before = completed_or_lost(&client, "fq", &before).await;
    let lost_after = completed_or_lost(&client, "fq", &after).await;
    assert!(
        lost_after.is_empty(),
        "tasks submitted after the kill were lost: {lost_after:?}"
    );
    eprintln!(
        "crash failover: {} tasks acknowledged before the kill, {} lost; {} after, 0 lost; \
         promotion seen {:?} after the kill; first submit acknowledged {:?} after the kill",
        before.len(),
        lost_before.len(),
        after.len(),
        promoted_at - killed_at,
        first_after - killed_at
    );

    // The idle worker's subscriber found the new primary, and a wake-up starts its task.
    eventually(
        "the idle worker to subscribe on the new primary",
        || async { (numsub(new, &wake_channel("wq")) >= 1).then_some(()) },
    )
    .await;
    let woken = submit_retrying(&client, spec("wq", "slow", r#"{"woken":1}"#)).await;
    let lost = completed_or_lost(&client, "wq", std::slice::from_ref(&woken)).await;
    assert!(lost.is_empty());

    // The new primary serves the queue: the registry and the tasks are there.
    let exists: bool = redis::cmd("SISMEMBER")
        .arg(orq::keys::QUEUES_KEY)
        .arg("fq")
        .query(&mut node(new))
        .unwrap();
    assert!(exists);

    idle.stop().await;
    worker.stop().await;
    shutdown.cancel();
    tokio::time::timeout(DEADLINE, scheduler)
        .await
        .expect("the scheduler stops")
        .unwrap();
}

// Goal: a planned failover (SENTINEL FAILOVER) while a worker runs loses nothing acknowledged
// before it: the replica had every write (checked: its replication offset reached the
// primary's after the last acknowledgement), the store leaves the demoted primary (READONLY or
// its connection killed by Sentinel) for the promoted one, and every task, those acknowledged
// before and those submitted during and after the switch, completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planned_failover_loses_nothing() {
    let fx = RedisSentinel::start();
    let store: Arc<dyn Store> = Arc::new(RedisStore::connect(&fx.url()).await.unwrap());
    let client = client_on(&store);
    let shutdown = CancellationToken::new();
    let scheduler = spawn_scheduler(&store, &shutdown);
    let worker = spawn_worker(
        store.clone(),
        Handlers::new().register("slow", Slow),
        worker_config("w-planned", &["pq"]),
    );
    let mut before = Vec::new();
    for i in 0..40 {
        let s = spec("pq", "slow", &format!(r#"{{"before":{i}}}"#))
            .lease_ms(5_000)
            .idempotency_key(format!("before-{i}"));
        before.push(submit_retrying(&client, s).await);
    }
    let old = fx.primary_port().expect("a sentinel answers");
    let replica = *fx
        .server_ports()
        .iter()
        .find(|&&p| p != old)
        .expect("the replica");
    let target = repl_offset(old);
    eventually("the replica to catch up", || async {
        (repl_offset(replica) >= target).then_some(())
    })
    .await;

    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    let submitter = spawn_submitter(client.clone(), "pq", "planned", acked.clone(), stop.clone());
    fx.failover();
    let asked_at = Instant::now();
    let new = tokio::task::block_in_place(|| fx.wait_for_new_primary(old));
    assert_eq!(new, replica);
    let promoted_at = Instant::now();
    eventually("submits to succeed after the failover", || async {
        let n = acked
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.started > promoted_at)
            .count();
        (n >= 20).then_some(())
    })
    .await;
    stop.cancel();
    tokio::time::timeout(LONG, submitter)
        .await
        .expect("the submitter stops")
        .unwrap();
    let during = acked.lock().unwrap().clone();

    let lost = completed_or_lost(&client, "pq", &before).await;
    assert!(
        lost.is_empty(),
        "tasks acknowledged before the planned failover were lost: {lost:?}"
    );
    // Tasks acknowledged during the switch by the old primary (after the replica's promotion,
    // before Sentinel demoted it) may be lost: counted; those after the promotion may not.
    let (switching, after): (Vec<Acked>, Vec<Acked>) =
        during.into_iter().partition(|a| a.started < promoted_at);
    let lost_switching = completed_or_lost(&client, "pq", &switching).await;
    let lost_after = completed_or_lost(&client, "pq", &after).await;
    assert!(lost_after.is_empty(), "{lost_after:?}");
    eprintln!(
        "planned failover: {} acknowledged before, 0 lost; {} during the switch, {} lost; \
         {} after; promotion seen {:?} after SENTINEL FAILOVER",
        before.len(),
        switching.len(),
        lost_switching.len(),
        after.len(),
        promoted_at - asked_at
    );
    assert_eq!(
        RedisStore::connect(&fx.url())
            .await
            .unwrap()
            .role()
            .await
            .as_deref(),
        Some("master")
    );

    worker.stop().await;
    shutdown.cancel();
    tokio::time::timeout(DEADLINE, scheduler)
        .await
        .expect("the scheduler stops")
        .unwrap();
}

// Goal: bad Sentinel input is an error, never a panic or a hang: malformed URLs at open; a
// master name the sentinels do not know at connect, with a message naming it, and as a
// transient failure of a call; sentinels nobody listens on at connect and on a call (and a
// wake-up request goes on without blocking), each within a timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_sentinel_input_is_an_error_not_a_panic_or_hang() {
    for bad in [
        "redis+sentinel://",
        "redis+sentinel:///orqmaster",
        "redis+sentinel://127.0.0.1:26379",
        "redis+sentinel://127.0.0.1:26379/",
        "redis+sentinel://127.0.0.1:notaport/orqmaster",
        "redis+sentinel://127.0.0.1:70000/orqmaster",
        "redis+sentinel://127.0.0.1:1,,127.0.0.1:2/orqmaster",
        "redis+sentinel://127.0.0.1:1/orqmaster/notadb",
    ] {
        let e = RedisStore::open(bad).expect_err(bad);
        assert!(e.0.starts_with("bad Redis"), "{bad}: {e}");
    }

    let fx = RedisSentinel::start();
    let url = fx.url().replace(MASTER_NAME, "nosuchmaster");
    let e = tokio::time::timeout(LONG, RedisStore::connect(&url))
        .await
        .expect("connect gives up within the timeout")
        .expect_err("the sentinels do not know the name");
    assert!(e.0.contains("\"nosuchmaster\""), "{e}");
    eprintln!("unknown master name: {e}");
    let store: Arc<dyn Store> = Arc::new(RedisStore::open(&url).unwrap());
    let e = tokio::time::timeout(LONG, client_on(&store).submit(spec("q", "echo", "{}")))
        .await
        .expect("a submit gives up within the timeout")
        .expect_err("the sentinels do not know the name");
    assert!(e.is_unavailable(), "{e}");
    assert!(e.to_string().contains("nosuchmaster"), "{e}");

    let nobody: Vec<u16> = (0..2)
        .map(|_| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        })
        .collect();
    let url = format!(
        "redis+sentinel://127.0.0.1:{},127.0.0.1:{}/{MASTER_NAME}",
        nobody[0], nobody[1]
    );
    let e = tokio::time::timeout(LONG, RedisStore::connect(&url))
        .await
        .expect("connect gives up within the timeout")
        .expect_err("nobody listens");
    assert!(e.0.contains(MASTER_NAME), "{e}");
    eprintln!("no sentinel listening: {e}");
    let store: Arc<dyn Store> = Arc::new(RedisStore::open(&url).unwrap());
    assert!(store.wake(&[wake_channel("q")]).is_some());
    let e = tokio::time::timeout(LONG, client_on(&store).submit(spec("q", "echo", "{}")))
        .await
        .expect("a submit gives up within the timeout")
        .expect_err("nobody listens");
    assert!(e.is_unavailable(), "{e}");
}
