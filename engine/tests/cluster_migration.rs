//! A queue's hash slot migrated between primaries, the way `redis-cli --cluster reshard` does it
//! (SETSLOT IMPORTING / MIGRATING, GETKEYSINSLOT + MIGRATE in small batches, SETSLOT NODE),
//! while a worker, a scheduler and a submitter keep using the queue.
//!
//! What the test shows happens (its output prints the evidence): no script of the queue runs
//! while the slot is half-migrated. Every engine call declares all 16 `queue_keys`, among them
//! the prefix keys (`orq:{q}:task:`, `ready:`, `idem:`, `tenant:`) that never exist as keys. So
//! on the MIGRATING source a call always has a missing declared key: TRYAGAIN while some
//! declared key is still there, ASK once none is; and on the IMPORTING target (after ASKING) a
//! multi-key call with a missing key is TRYAGAIN too. A script therefore never runs on the
//! source with some of its undeclared keys (task hashes, ready lists) already moved: the queue
//! is unavailable (transient TRYAGAIN, retried by the cluster client and then by the callers)
//! for the whole migration instead. Were the scripts ever to declare only keys that exist,
//! this test is the one that would catch a script seeing a moved task hash as missing.

mod common;

use async_trait::async_trait;
use common::{backoff, spawn_worker, spec};
use orq::keys::queue_keys;
use orq::testing::RedisCluster;
use orq::{
    Client, Entropy, Handler, HandlerError, Handlers, RedisStore, Scheduler, SchedulerConfig,
    Status, Store, SystemClock, TaskContext, WorkerConfig,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A sync connection to the cluster node on `port`, for commands the engine never sends.
fn node(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("node url")
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("connect to the cluster node on {port}: {e}"))
}

/// The cluster node id of the node on `port`.
fn node_id(port: u16) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut node(port))
        .unwrap()
}

/// One run of [`Rec`]: (attempt, epoch, worker).
type RunLog = Arc<Mutex<HashMap<String, Vec<(u32, u64)>>>>;

/// `rec`: records each run by task id (attempt, epoch), sleeps 30 ms, and with payload
/// `{"fail_once":true}` fails its first attempt (retryable).
#[derive(Clone, Default)]
struct Rec {
    runs: RunLog,
    /// Set while the slot is half-migrated.
    migrating: Arc<AtomicBool>,
    /// Runs started while the slot was half-migrated.
    runs_migrating: Arc<AtomicUsize>,
}

#[async_trait]
impl Handler for Rec {
    async fn handle(&self, ctx: TaskContext) -> Result<serde_json::Value, HandlerError> {
        self.runs
            .lock()
            .unwrap()
            .entry(ctx.task.id.clone())
            .or_default()
            .push((ctx.attempt, ctx.epoch));
        if self.migrating.load(Ordering::SeqCst) {
            self.runs_migrating.fetch_add(1, Ordering::SeqCst);
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
        let p: serde_json::Value = serde_json::from_str(&ctx.task.payload).unwrap();
        if p["fail_once"] == serde_json::Value::Bool(true) && ctx.attempt == 1 {
            return Err(HandlerError::retryable("first attempt fails"));
        }
        Ok(serde_json::json!({ "i": p["i"] }))
    }
}

/// What the submitter saw: the acknowledged tasks (key → (id, fail_once)), and the transient
/// errors by kind.
#[derive(Default, Debug)]
struct Submitted {
    acked: BTreeMap<String, (String, bool)>,
    transient: BTreeMap<String, u64>,
    /// Submits acknowledged while the slot was half-migrated.
    acked_migrating: usize,
}

// Goal: a slot migration of a busy queue loses nothing. Every task a submitter got an
// acknowledgement for reaches `completed` (none lost, stuck or dead), no task runs twice under
// one lease epoch, the queue's keys all end on the new primary, and the queue's counts agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slot_migration_of_a_busy_queue_loses_nothing() {
    let cluster = RedisCluster::start(3, 1);
    let q = "mq";
    let slot = cluster.key_slot(&queue_keys(q)[0]);
    let src = cluster.primary_of_slot(slot);
    let dst = cluster
        .primaries()
        .into_iter()
        .map(|n| n.port)
        .find(|&p| p != src)
        .expect("another primary");
    let others: Vec<u16> = cluster
        .primaries()
        .into_iter()
        .map(|n| n.port)
        .filter(|&p| p != src && p != dst)
        .collect();
    let (src_id, dst_id) = (node_id(src), node_id(dst));
    println!("slot {slot} of {q}: {src} ({src_id}) -> {dst} ({dst_id})");

    let store: Arc<dyn Store> = Arc::new(RedisStore::connect(&cluster.url()).await.unwrap());
    let client = Client::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_os()),
    );

    let shutdown = CancellationToken::new();
    let scheduler = Scheduler::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_os()),
        SchedulerConfig {
            queues: vec![q.to_string()],
            interval_ms: 100,
            ..SchedulerConfig::default()
        },
    );
    let scheduler = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { scheduler.run(shutdown).await }
    });
    let rec = Rec::default();
    let worker = spawn_worker(
        store.clone(),
        Handlers::new().register("rec", rec.clone()),
        WorkerConfig {
            id: "w-mig".into(),
            queues: vec![q.to_string()],
            concurrency: 4,
            idle_poll_ms: 50,
            heartbeat_divisor: 3,
            shutdown_grace_ms: 1_000,
            ..WorkerConfig::default()
        },
    );

    // The submitter: one task at a time, resent under its idempotency key on a transient error.
    let stop_submitting = CancellationToken::new();
    let submitter = tokio::spawn({
        let client = client.clone();
        let stop = stop_submitting.clone();
        let migrating = rec.migrating.clone();
        async move {
            let mut seen = Submitted::default();
            let mut i = 0u64;
            while !stop.is_cancelled() {
                let key = format!("k-{i}");
                let fail_once = i % 7 == 3;
                let mut s = spec(q, "rec", &format!(r#"{{"i":{i},"fail_once":{fail_once}}}"#))
                    .idempotency_key(key.clone())
                    .max_retries(3)
                    .backoff(backoff(50, 1.0));
                if i % 5 == 1 {
                    s = s.delay_ms(300);
                }
                loop {
                    match client.submit(s.clone()).await {
                        Ok(sub) => {
                            if let Some((id, _)) = seen.acked.get(&key) {
                                assert_eq!(*id, sub.task.id, "{key} resent: another task");
                            }
                            seen.acked.insert(key.clone(), (sub.task.id, fail_once));
                            if migrating.load(Ordering::SeqCst) {
                                seen.acked_migrating += 1;
                            }
                            break;
                        }
                        Err(e) => match e.transient() {
                            Some(t) => {
                                *seen.transient.entry(t.word().to_string()).or_default() += 1;
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                            None => return Err(format!("submit {key}: {e:?}")),
                        },
                    }
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Ok(seen)
        }
    });

    // Let the workload get going, then migrate the slot key by key.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let migrating = rec.migrating.clone();
    let migration = tokio::task::spawn_blocking(move || {
        let setslot = |port: u16, how: &str, id: &str| {
            let _: () = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(how)
                .arg(id)
                .query(&mut node(port))
                .unwrap_or_else(|e| panic!("SETSLOT {slot} {how} on {port}: {e}"));
        };
        setslot(dst, "IMPORTING", &src_id);
        setslot(src, "MIGRATING", &dst_id);
        migrating.store(true, Ordering::SeqCst);
        let mut conn = node(src);
        let (mut moved, mut batches) = (0usize, 0usize);
        // What the source answers a script call declaring the queue's stats key and the task
        // prefix key (as the engine's calls do) after each batch.
        let mut probes: BTreeMap<String, usize> = BTreeMap::new();
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(10)
                .query(&mut conn)
                .unwrap();
            if keys.is_empty() {
                break;
            }
            let _: () = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(dst)
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(&keys)
                .query(&mut conn)
                .unwrap_or_else(|e| panic!("MIGRATE {keys:?}: {e}"));
            moved += keys.len();
            batches += 1;
            let probe: redis::RedisResult<i64> = redis::cmd("EVAL")
                .arg("return 1")
                .arg(2)
                .arg(format!("orq:{{{q}}}:stats"))
                .arg(format!("orq:{{{q}}}:task:"))
                .query(&mut conn);
            let mut word = match probe {
                Ok(_) => "ran".to_string(),
                Err(e) => e.code().unwrap_or("other").to_string(),
            };
            if word == "ASK" {
                // Followed as a cluster client does: ASKING, then the call, on the target.
                let mut target = node(dst);
                let _: () = redis::cmd("ASKING").query(&mut target).unwrap();
                let asked: redis::RedisResult<i64> = redis::cmd("EVAL")
                    .arg("return 1")
                    .arg(2)
                    .arg(format!("orq:{{{q}}}:stats"))
                    .arg(format!("orq:{{{q}}}:task:"))
                    .query(&mut target);
                word = match asked {
                    Ok(_) => "ASK then ran on the target".to_string(),
                    Err(e) => format!("ASK then {} on the target", e.code().unwrap_or("other")),
                };
            }
            *probes.entry(word).or_default() += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        setslot(dst, "NODE", &dst_id);
        setslot(src, "NODE", &dst_id);
        for p in others {
            setslot(p, "NODE", &dst_id);
        }
        migrating.store(false, Ordering::SeqCst);
        (moved, batches, probes)
    });
    let (moved, batches, probes) = migration.await.expect("the migration");
    println!(
        "migrated {moved} keys in {batches} batches; a script call on the source between \
         batches got {probes:?}; handler runs started while half-migrated: {}",
        rec.runs_migrating.load(Ordering::SeqCst)
    );

    // The workload goes on a while on the new primary, then the submitter stops.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    stop_submitting.cancel();
    let seen = submitter
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("non-transient submit error: {e}"));
    println!(
        "tasks acknowledged: {} ({} while half-migrated); transient errors seen by the \
         submitter: {:?}",
        seen.acked.len(),
        seen.acked_migrating,
        seen.transient
    );
    assert!(seen.acked.len() > 20, "the workload ran: {seen:?}");

    // Every acknowledged task completes (a generous deadline: a loaded 2-core machine).
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut pending: Vec<(String, String, bool)> = seen
        .acked
        .iter()
        .map(|(k, (id, f))| (k.clone(), id.clone(), *f))
        .collect();
    let mut last_status: HashMap<String, String> = HashMap::new();
    while !pending.is_empty() && Instant::now() < deadline {
        let mut still = Vec::new();
        for (key, id, f) in pending {
            match client.get(Some(q), &id).await {
                Ok(t) if t.status == Status::Completed => {}
                Ok(t) => {
                    assert_ne!(t.status, Status::Dead, "{key} {id} dead: {t:?}");
                    last_status.insert(id.clone(), format!("{:?}", t.status));
                    still.push((key, id, f));
                }
                Err(e) => {
                    last_status.insert(id.clone(), format!("{e:?}"));
                    still.push((key, id, f));
                }
            }
        }
        pending = still;
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let runs = rec.runs.lock().unwrap().clone();
    assert!(
        pending.is_empty(),
        "{} acknowledged tasks never completed: {:?}",
        pending.len(),
        pending
            .iter()
            .map(|(k, id, _)| (k, id, last_status.get(id), runs.get(id)))
            .collect::<Vec<_>>()
    );

    // Runs per task: none twice under one epoch; a fail-once task ran at least twice.
    let mut histogram: BTreeMap<usize, usize> = BTreeMap::new();
    for (key, (id, fail_once)) in &seen.acked {
        let r = runs.get(id).cloned().unwrap_or_default();
        *histogram.entry(r.len()).or_default() += 1;
        let mut epochs: Vec<u64> = r.iter().map(|x| x.1).collect();
        epochs.sort_unstable();
        epochs.dedup();
        assert_eq!(
            epochs.len(),
            r.len(),
            "{key} {id} ran twice under one epoch: {r:?}"
        );
        assert!(r.len() > usize::from(*fail_once), "{key} {id}: {r:?}");
    }
    println!("runs per task (runs -> tasks): {histogram:?}");
    let multi: Vec<_> = seen
        .acked
        .iter()
        .filter_map(|(k, (id, f))| {
            let r = runs.get(id)?;
            (r.len() > 1 + usize::from(*f)).then(|| (k.clone(), r.clone()))
        })
        .collect();
    println!("tasks with more runs than planned: {multi:?}");

    // The queue's keys all live on the new primary.
    let count = |port: u16| -> u64 {
        redis::cmd("CLUSTER")
            .arg("COUNTKEYSINSLOT")
            .arg(slot)
            .query(&mut node(port))
            .unwrap()
    };
    assert_eq!(
        count(src),
        0,
        "the old primary {src} holds no key of slot {slot}"
    );
    assert!(count(dst) > 0, "the new primary {dst} holds the queue");
    let (_, left): (u64, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("MATCH")
        .arg(format!("orq:{{{q}}}:*"))
        .arg("COUNT")
        .arg(100_000)
        .query(&mut node(src))
        .unwrap();
    assert!(left.is_empty(), "keys of {q} left on {src}: {left:?}");
    assert_eq!(cluster.primary_of_slot(slot), dst);

    // The counts agree: every task completed, nothing repaired.
    let stats = client.stats(q).await.unwrap();
    println!("stats: {:?} totals {:?}", stats.counts, stats.totals);
    let n = seen.acked.len() as i64;
    for s in Status::ALL {
        let want = if s == Status::Completed { n } else { 0 };
        assert_eq!(stats.counts.get(&s).copied().unwrap_or(0), want, "{s}");
    }
    assert_eq!(stats.totals.get("enqueued").copied().unwrap_or(0), n);
    assert_eq!(stats.totals.get("completed").copied().unwrap_or(0), n);
    assert_eq!(stats.totals.get("dead").copied().unwrap_or(0), 0);
    assert_eq!(stats.totals.get("repaired").copied().unwrap_or(0), 0);

    worker.stop().await;
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), scheduler)
        .await
        .expect("the scheduler stops")
        .unwrap();
}
