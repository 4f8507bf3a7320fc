//! A task's life on every deployment: submit, run, complete; delays, priorities, FIFO order,
//! batch submit and idempotency keys; a worker pool's lanes and wake-ups.

use crate::common::{eventually, spec, Echo, Env};
use orq::ops;
use orq::{Handlers, ListQuery, Status, WorkerConfig};
use std::collections::HashSet;

// Goal: a submitted task is leased by a worker, its handler runs once, and the task ends
// `completed` with the handler's result stored.
// Method: an echo handler returns the payload; a worker serves the queue; poll until completed.
async fn submitted_task_completes_with_the_handlers_result(env: Env) {
    let echo = Echo::default();
    let worker = env.worker(
        "w-1",
        "q",
        Handlers::new().register("echo", echo.clone()),
        |_| {},
    );

    let payload = r#"{"hello":"world","n":[1,2,3]}"#;
    let sub = env.client.submit(spec("q", "echo", payload)).await.unwrap();
    assert!(sub.created);
    assert_eq!(sub.task.status, Status::Queued);
    assert_eq!(sub.task.attempt, 0);

    let done = env.wait_status("q", &sub.task.id, Status::Completed).await;
    let result: serde_json::Value = serde_json::from_str(done.result.as_deref().unwrap()).unwrap();
    let expected: serde_json::Value = serde_json::from_str(payload).unwrap();
    assert_eq!(result, expected);
    assert_eq!(done.attempt, 1);
    assert!(done.lease.is_none());
    assert!(done.finished_at_ms.is_some_and(|f| f >= done.created_at_ms));
    assert!(done.last_error.is_none());

    let runs = echo.runs.of(&sub.task.id);
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0].attempt, runs[0].epoch), (1, 1));
    assert_eq!(runs[0].worker, "w-1");

    let stats = env.stats("q").await;
    assert_eq!(stats.counts[&Status::Completed], 1);
    assert_eq!(stats.counts[&Status::Queued], 0);
    assert_eq!(stats.totals["completed"], 1);
    assert_eq!(stats.totals["enqueued"], 1);
    worker.stop().await;
}

// Goal: a delayed task is never leased before its run_at by the store's clock, and is leased
// once it falls due.
// Method: submit one task delayed 1500 ms and one delayed 60 s, then call lease repeatedly. The
// first call, right after submit, returns nothing; every reply whose store time is before a
// task's run_at must not hold that task; the reply that finally returns the 1500 ms task carries
// a store time and a lease start at or after its run_at; the 60 s task stays scheduled.
async fn delayed_task_is_not_leased_before_its_run_at(env: Env) {
    let subs = env
        .client
        .submit_batch(vec![
            spec("q", "echo", "{}").delay_ms(1_500),
            spec("q", "echo", "{}").delay_ms(60_000),
        ])
        .await
        .unwrap();
    let (soon, late) = (subs[0].task.clone(), subs[1].task.clone());
    for (t, delay_ms) in [(&soon, 1_500), (&late, 60_000)] {
        assert_eq!(t.status, Status::Scheduled);
        assert_eq!(t.run_at_ms, t.created_at_ms + delay_ms);
    }
    assert_eq!(env.stats("q").await.counts[&Status::Scheduled], 2);

    // Whether a reply may hold a task: only at or after the task's run_at.
    let check = |now_ms: u64, tasks: &[orq::Task]| {
        for t in tasks {
            let run_at_ms = if t.id == soon.id {
                soon.run_at_ms
            } else {
                late.run_at_ms
            };
            assert!(
                now_ms >= run_at_ms,
                "task {} leased at {now_ms} < run_at {run_at_ms}",
                t.id
            );
        }
    };
    let first = env.lease("q", "w-1", 10).await;
    check(first.now_ms, &first.tasks);
    if first.now_ms < soon.run_at_ms {
        assert!(
            first.tasks.is_empty(),
            "a lease right after submit returns nothing"
        );
        assert_eq!(
            first.next_ms,
            Some(soon.run_at_ms),
            "next_ms is the earliest run_at"
        );
    }

    let (now_ms, t) = crate::common::eventually("the 1500 ms task to be leased", || async {
        let batch = env.lease("q", "w-1", 10).await;
        check(batch.now_ms, &batch.tasks);
        let now_ms = batch.now_ms;
        batch.tasks.into_iter().next().map(|t| (now_ms, t))
    })
    .await;
    assert_eq!(t.id, soon.id);
    assert!(now_ms >= soon.run_at_ms);
    let lease = t.lease.unwrap();
    assert!(
        lease.expires_at_ms - t.lease_ms >= soon.run_at_ms,
        "leased_at >= run_at"
    );
    assert_eq!(t.attempt, 1);
    assert_eq!(env.get("q", &late.id).await.status, Status::Scheduled);
}

// Goal: the most urgent priority is leased first.
// Method: submit priorities 1, 5, 9 in one batch, then lease one task at a time.
async fn higher_priority_is_leased_first(env: Env) {
    let specs = [1u8, 5, 9]
        .iter()
        .map(|&p| spec("q", "echo", &format!("{{\"p\":{p}}}")).priority(p))
        .collect();
    let subs = env.client.submit_batch(specs).await.unwrap();
    assert!(subs.iter().all(|s| s.created));

    let mut order = Vec::new();
    for _ in 0..3 {
        let batch = env.lease("q", "w-1", 1).await;
        assert_eq!(batch.tasks.len(), 1);
        order.push(batch.tasks[0].priority);
    }
    assert_eq!(order, vec![9, 5, 1]);
    assert!(env.lease("q", "w-1", 1).await.tasks.is_empty());
}

// Goal: tasks of one priority are leased in submit order, whatever their ids.
// Method: submit a batch of 10 tasks of priority 3 and then a single task, interleaved with a
// more urgent task; lease one at a time and compare with the submit order.
async fn same_priority_is_leased_in_submit_order(env: Env) {
    let mut expected = Vec::new();
    let specs = (0..10)
        .map(|i| spec("q", "echo", &format!("{{\"i\":{i}}}")).priority(3))
        .collect();
    for s in env.client.submit_batch(specs).await.unwrap() {
        expected.push(s.task.id);
    }
    let urgent = env
        .client
        .submit(spec("q", "echo", "{}").priority(7))
        .await
        .unwrap();
    let last = env
        .client
        .submit(spec("q", "echo", "{\"i\":10}").priority(3))
        .await
        .unwrap();
    expected.push(last.task.id);

    let first = env.lease("q", "w-1", 1).await;
    assert_eq!(first.tasks[0].id, urgent.task.id);
    let mut order = Vec::new();
    for _ in 0..expected.len() {
        let batch = env.lease("q", "w-1", 1).await;
        assert_eq!(batch.tasks.len(), 1);
        order.push(batch.tasks[0].id.clone());
    }
    assert_eq!(order, expected);
}

// Goal: a batch of 500 tasks is stored in one call, and a worker pool runs every one of them
// to completion exactly once.
// Method: submit_batch 500 echo tasks; run a worker with concurrency 8; poll the stats until 500
// are completed; list the completed index; compare with the submitted ids.
async fn batch_of_500_is_created_and_completed_by_a_worker(env: Env) {
    let specs = (0..500)
        .map(|i| spec("q", "echo", &format!("{{\"i\":{i}}}")))
        .collect();
    let subs = env.client.submit_batch(specs).await.unwrap();
    assert_eq!(subs.len(), 500);
    assert!(subs
        .iter()
        .all(|s| s.created && s.task.status == Status::Queued));
    for (i, s) in subs.iter().enumerate() {
        assert_eq!(
            s.task.payload,
            format!("{{\"i\":{i}}}"),
            "results in input order"
        );
    }
    let ids: HashSet<String> = subs.iter().map(|s| s.task.id.clone()).collect();
    assert_eq!(ids.len(), 500);
    assert_eq!(env.stats("q").await.counts[&Status::Queued], 500);

    let echo = Echo::default();
    let worker = env.worker(
        "w-1",
        "q",
        Handlers::new().register("echo", echo.clone()),
        |c| c.concurrency = 8,
    );
    crate::common::eventually("500 completed tasks", || async {
        (env.stats("q").await.counts[&Status::Completed] == 500).then_some(())
    })
    .await;
    worker.stop().await;

    let stats = env.stats("q").await;
    assert_eq!(stats.totals["completed"], 500);
    assert_eq!(stats.counts[&Status::Queued], 0);
    assert_eq!(stats.counts[&Status::Leased], 0);
    assert_eq!(echo.runs.total(), 500, "each task ran exactly once");
    let page = env
        .client
        .list(&ListQuery {
            queue: "q".into(),
            status: Some(Status::Completed),
            limit: 1000,
            ..ListQuery::default()
        })
        .await
        .unwrap();
    let completed: HashSet<String> = page.tasks.iter().map(|t| t.id.clone()).collect();
    assert_eq!(completed, ids);
    assert!(page.tasks.iter().all(|t| t.attempt == 1));
}

// Goal: an idempotency key makes a second submit return the first task instead of a new one,
// across calls and within one batch.
// Method: submit twice with the same key (different payloads); then a batch holding one key
// twice; check `created`, ids, payloads and that only the first tasks were stored.
async fn idempotency_key_returns_the_first_task(env: Env) {
    let first = env
        .client
        .submit(spec("q", "echo", r#"{"v":1}"#).idempotency_key("order:42"))
        .await
        .unwrap();
    assert!(first.created);
    let again = env
        .client
        .submit(spec("q", "echo", r#"{"v":2}"#).idempotency_key("order:42"))
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.task.id, first.task.id);
    assert_eq!(again.task.payload, r#"{"v":1}"#);
    assert_eq!(again.task.idempotency_key.as_deref(), Some("order:42"));

    let batch = env
        .client
        .submit_batch(vec![
            spec("q", "echo", r#"{"v":3}"#).idempotency_key("order:43"),
            spec("q", "echo", r#"{"v":4}"#).idempotency_key("order:43"),
            spec("q", "echo", r#"{"v":5}"#).idempotency_key("order:42"),
        ])
        .await
        .unwrap();
    assert!(batch[0].created);
    assert!(!batch[1].created);
    assert_eq!(batch[1].task.id, batch[0].task.id);
    assert_eq!(batch[1].task.payload, r#"{"v":3}"#);
    assert!(!batch[2].created);
    assert_eq!(batch[2].task.id, first.task.id);

    let stats = env.stats("q").await;
    assert_eq!(stats.totals["enqueued"], 2);
    assert_eq!(stats.counts[&Status::Queued], 2);
    // A key still returns its task after the task has run.
    let leased = env.lease_one("q", "w-1").await;
    let token = leased.lease.unwrap().token;
    ops::complete(&*env.store, "q", &leased.id, &token, "null")
        .await
        .unwrap();
    let after = env
        .client
        .submit(spec("q", "echo", r#"{"v":6}"#).idempotency_key("order:42"))
        .await
        .unwrap();
    assert!(!after.created);
    assert_eq!(after.task.id, first.task.id);
}

// Goal: the compact task record. A task submitted with the default settings stores only what
// differs from them (no id, queue, attempt, epoch, updated_at, run_at or retry policy fields, and
// no status while queued), in the stored field names (orq::task::STORED_NAMES), and every
// read (get, list, an idempotent re-submit, lease, cancel) gives back the task the submit
// answered; a task with its own settings stores and reads them back exactly.
// Method: submit one default and one customised task on a private Redis; read each raw hash with
// HGETALL; compare the submit's task with get, list and a re-submit of the same id; lease both and
// cancel one, checking the settings survive each transition.
async fn compact_records_store_only_what_differs_and_read_back_whole(env: Env) {
    use orq::{Backoff, TaskSpec};
    let plain = env
        .client
        .submit(TaskSpec::new(r#"{"n":1}"#).queue("q").task_type("echo"))
        .await
        .unwrap()
        .task;
    let custom_spec = TaskSpec::new(r#"{"n":2}"#)
        .queue("q")
        .tenant("acme")
        .task_type("echo")
        .priority(7)
        .max_retries(9)
        .backoff(Backoff {
            initial_ms: 250,
            multiplier: 1.5,
            max_ms: 9_000,
            jitter: 0.3,
        })
        .lease_ms(12_000)
        .timeout_ms(4_000);
    let custom = env.client.submit(custom_spec.clone()).await.unwrap().task;

    let mut raw = env.raw().await;
    let stored: std::collections::BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(format!("orq:{{q}}:task:{}", plain.id))
        .query_async(&mut raw)
        .await
        .unwrap();
    let names: Vec<&str> = stored.keys().map(String::as_str).collect();
    let fields: Vec<Option<&str>> = names
        .iter()
        .map(|k| orq::task::field_of_stored(k))
        .collect();
    assert_eq!(
        fields,
        [
            Some("created_at"),
            Some("payload"),
            Some("tenant"),
            Some("type")
        ],
        "a default task stores only what differs from the defaults: {stored:?}"
    );
    let stored: std::collections::BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(format!("orq:{{q}}:task:{}", custom.id))
        .query_async(&mut raw)
        .await
        .unwrap();
    for (name, value) in [
        ("priority", "7"),
        ("max_retries", "9"),
        ("b_init", "250"),
        ("b_mult", "1.5"),
        ("b_max", "9000"),
        ("b_jitter", "0.29999999999999999"),
        ("lease_ms", "12000"),
        ("timeout_ms", "4000"),
    ] {
        let stored_name = orq::task::stored_name(name).expect("a task field");
        assert_eq!(
            stored.get(stored_name).map(String::as_str),
            Some(value),
            "{name} in {stored:?}"
        );
    }

    let mut later_spec = TaskSpec::new("{}").queue("q").task_type("echo");
    later_spec.delay_ms = 60_000;
    let later = env.client.submit(later_spec).await.unwrap().task;
    assert_eq!(later.status, Status::Scheduled);
    let run_at: String = redis::cmd("HGET")
        .arg(format!("orq:{{q}}:task:{}", later.id))
        .arg(orq::task::stored_name("run_at").unwrap())
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(run_at, later.run_at_ms.to_string());
    assert!(later.run_at_ms >= later.created_at_ms + 60_000);

    // Reads give back what submit answered.
    for sub in [&plain, &custom, &later] {
        assert_eq!(&env.get("q", &sub.id).await, sub);
    }
    assert_eq!(plain.max_retries, orq::task::DEFAULT_MAX_RETRIES);
    assert_eq!(plain.lease_ms, orq::task::DEFAULT_LEASE_MS);
    assert_eq!(plain.backoff, Backoff::default());
    assert_eq!(
        (plain.attempt, plain.updated_at_ms),
        (0, plain.created_at_ms)
    );
    let query = ListQuery {
        queue: "q".into(),
        limit: 10,
        ..ListQuery::default()
    };
    let page = env.client.list(&query).await.unwrap();
    let mut listed = page.tasks.clone();
    listed.sort_by(|a, b| a.id.cmp(&b.id));
    let mut want = vec![plain.clone(), custom.clone(), later.clone()];
    want.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(listed, want);
    let again = env
        .client
        .submit(TaskSpec {
            id: Some(custom.id.clone()),
            ..custom_spec.clone()
        })
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.task, custom);

    // Lease both (custom first: priority 7), then cancel the custom one.
    let leased = env.lease("q", "w1", 2).await.tasks;
    assert_eq!(leased.len(), 2);
    assert_eq!(leased[0].id, custom.id);
    let l = &leased[0];
    assert_eq!((l.queue.as_str(), l.tenant.as_str()), ("q", "acme"));
    assert_eq!((l.attempt, l.max_retries, l.priority), (1, 9, 7));
    assert_eq!(
        (l.backoff, l.lease_ms, l.timeout_ms),
        (custom.backoff, 12_000, Some(4_000))
    );
    let lease = l.lease.clone().unwrap();
    assert_eq!(lease.epoch, 1);
    assert_eq!(lease.expires_at_ms, l.updated_at_ms + 12_000);
    assert_eq!(
        (leased[1].id.as_str(), leased[1].lease_ms),
        (plain.id.as_str(), 30_000)
    );
    let cancelled = env.client.cancel(Some("q"), &custom.id).await.unwrap();
    assert_eq!(cancelled.status, Status::Cancelled);
    assert_eq!(
        (cancelled.queue.as_str(), cancelled.id.as_str()),
        ("q", custom.id.as_str())
    );
    assert_eq!(
        (cancelled.max_retries, cancelled.backoff),
        (9, custom.backoff)
    );
}

/// A store that holds every completion call until the test opens the gate.
struct GatedCompletions {
    inner: std::sync::Arc<dyn orq::Store>,
    gate: tokio::sync::Semaphore,
    held: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl orq::Store for GatedCompletions {
    async fn eval(
        &self,
        script: &'static orq_lua::Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<orq::Resp, orq::StoreError> {
        if script.name == "complete_batch" || script.name == "complete" {
            self.held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _pass = self.gate.acquire().await.expect("gate open");
        }
        self.inner.eval(script, keys, args).await
    }
}

// Goal: a handler slot is refilled while the finished task's completion is still being recorded
// (the next lease overlaps the completion call instead of waiting for its reply), and no more
// than `concurrency` finished tasks wait for their outcome to be recorded.
// Method: a pool of concurrency 1 serving two queues (so completions do not lease: the lease
// loop refills every slot) over a store that holds every completion call until the test opens
// the gate; submit three tasks to one queue. The second handler must start while the first task's
// completion is held (the first task still leased); the third must not start while two finished
// tasks wait. Opening the gate completes all three.
async fn a_slot_is_refilled_while_the_last_completion_is_recorded(env: Env) {
    use std::sync::atomic::Ordering;
    let gated = std::sync::Arc::new(GatedCompletions {
        inner: env.store.clone(),
        gate: tokio::sync::Semaphore::new(0),
        held: Default::default(),
    });
    let echo = Echo::default();
    let worker = env.worker_on(
        gated.clone(),
        "w-1",
        "q",
        Handlers::new().register("echo", echo.clone()),
        |c| {
            c.concurrency = 1;
            c.queues.push("other".into());
        },
    );
    let mut ids = Vec::new();
    for n in 0..3 {
        let sub = env
            .client
            .submit(spec("q", "echo", &format!("{{\"n\":{n}}}")))
            .await
            .unwrap();
        ids.push(sub.task.id);
    }
    crate::common::eventually(
        "two handlers to have run with a completion held",
        || async {
            (echo.runs.total() >= 2 && gated.held.load(Ordering::SeqCst) >= 1).then_some(())
        },
    )
    .await;
    let leased = env
        .client
        .list(&ListQuery {
            queue: "q".into(),
            status: Some(Status::Leased),
            limit: 10,
            ..ListQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(
        leased.tasks.len(),
        2,
        "both run tasks are leased, none completed yet"
    );
    // Two finished tasks wait for their outcome: the third may not start.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        echo.runs.total(),
        2,
        "at most `concurrency` finished tasks wait"
    );
    gated.gate.add_permits(1_000);
    for id in &ids {
        env.wait_status("q", id, Status::Completed).await;
    }
    assert_eq!(echo.runs.total(), 3);
    worker.stop().await;
}

/// Records the `n` of every lease: of each `lease` call (ARGV[2]) and each `complete_batch` that
/// also leases; passes every call on.
struct LeaseSizes {
    inner: std::sync::Arc<dyn orq::Store>,
    sizes: std::sync::Mutex<Vec<usize>>,
    /// How many of them were complete_batch calls.
    refills: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl orq::Store for LeaseSizes {
    async fn eval(
        &self,
        script: &'static orq_lua::Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<orq::Resp, orq::StoreError> {
        let int = |i: usize| {
            std::str::from_utf8(&args[i])
                .unwrap()
                .parse::<usize>()
                .unwrap()
        };
        if script.name == "lease" {
            self.sizes.lock().unwrap().push(int(1));
        }
        // A complete_batch that also leases: its n follows the worker id after the items.
        if script.name == "complete_batch" && args.len() == 3 + 3 * int(2) + 6 {
            self.sizes.lock().unwrap().push(int(3 + 3 * int(2) + 1));
            self.refills
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        self.inner.eval(script, keys, args).await
    }
}

/// A handler that counts its starts and returns when the test gives it a permit.
#[derive(Clone)]
struct Gated {
    started: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    permits: std::sync::Arc<tokio::sync::Semaphore>,
}

#[async_trait::async_trait]
impl orq::Handler for Gated {
    async fn handle(&self, _: orq::TaskContext) -> Result<serde_json::Value, orq::HandlerError> {
        self.started
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.permits.acquire().await.expect("open").forget();
        Ok(serde_json::Value::Null)
    }
}

impl Default for Gated {
    fn default() -> Self {
        Gated {
            started: Default::default(),
            permits: std::sync::Arc::new(tokio::sync::Semaphore::new(0)),
        }
    }
}

impl Gated {
    fn started(&self) -> usize {
        self.started.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Wait until `n` handlers have started.
    async fn wait_started(&self, n: usize) {
        crate::common::eventually(&format!("{n} handlers to have started"), || async {
            (self.started() == n).then_some(())
        })
        .await;
    }
}

impl LeaseSizes {
    /// The sizes of the lease calls after the first `calls`.
    fn since(&self, calls: usize) -> Vec<usize> {
        self.sizes.lock().unwrap()[calls..].to_vec()
    }
}

/// A pool of concurrency 4 in one lane with `linger_ms`, over a store that records lease sizes,
/// with eight gated tasks submitted; returns once the first four handlers run.
async fn gated_pool(
    env: &Env,
    linger_ms: u64,
) -> (
    std::sync::Arc<LeaseSizes>,
    Gated,
    crate::common::RunningWorker,
    Vec<String>,
) {
    let sizes = std::sync::Arc::new(LeaseSizes {
        inner: env.store.clone(),
        sizes: Default::default(),
        refills: Default::default(),
    });
    let gated = Gated::default();
    let worker = env.worker_on(
        sizes.clone(),
        "w-1",
        "q",
        Handlers::new().register("gated", gated.clone()),
        |c| {
            c.concurrency = 4;
            c.lease_linger_ms = linger_ms;
            // One lane: these tests follow one lease loop's batching.
            c.lanes = 1;
        },
    );
    let specs = (0..8)
        .map(|n| spec("q", "gated", &format!("{{\"n\":{n}}}")))
        .collect();
    let ids = env.submit_ids(specs).await;
    gated.wait_started(4).await;
    (sizes, gated, worker, ids)
}

/// Let every gated handler return, wait until all `ids` completed, stop the pool.
async fn finish_gated(
    env: &Env,
    gated: &Gated,
    worker: crate::common::RunningWorker,
    ids: &[String],
) {
    gated.permits.add_permits(100);
    for id in ids {
        env.wait_status("q", id, Status::Completed).await;
    }
    worker.stop().await;
}

// Goal: lease batching. A busy pool whose handlers still run waits (up to lease_linger_ms) for
// more slots to free before it leases, so that one call carries more tasks; an idle pool leases
// at once.
// Method: concurrency 4, a linger far longer than the test, eight gated tasks. The idle pool
// leases four at once. Handlers are then let go one at a time: while any of the four still
// runs, no lease call goes out and no fifth handler starts; when the last returns, one call
// leases four.
async fn a_busy_pool_leases_once_its_slots_are_free_not_slot_by_slot(env: Env) {
    let (sizes, gated, worker, ids) = gated_pool(&env, 600_000).await;
    assert_eq!(
        sizes.sizes.lock().unwrap()[0],
        4,
        "the idle pool asks for all its slots"
    );
    let calls = sizes.sizes.lock().unwrap().len();
    for _ in 0..3 {
        gated.permits.add_permits(1);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        gated.started(),
        4,
        "no fifth handler while three of four still run"
    );
    assert_eq!(
        sizes.sizes.lock().unwrap().len(),
        calls,
        "no lease call while the pool lingers"
    );
    gated.permits.add_permits(1);
    gated.wait_started(8).await;
    let leased = sizes.since(calls);
    assert_eq!(
        leased.first(),
        Some(&4),
        "one call leases the four free slots: {leased:?}"
    );
    finish_gated(&env, &gated, worker, &ids).await;
}

// Goal: the linger is bounded: a freed slot is refilled after lease_linger_ms even while the
// other handlers keep running.
// Method: concurrency 4, a 200 ms linger, eight gated tasks; let one handler go and hold the
// other three: a fifth handler starts, leased by a call for one task.
async fn a_lingering_pool_leases_a_lone_free_slot_after_the_linger(env: Env) {
    let (sizes, gated, worker, ids) = gated_pool(&env, 200).await;
    let calls = sizes.sizes.lock().unwrap().len();
    gated.permits.add_permits(1);
    gated.wait_started(5).await;
    let later = sizes.since(calls);
    assert_eq!(
        later.first(),
        Some(&1),
        "one free slot, one task asked: {later:?}"
    );
    finish_gated(&env, &gated, worker, &ids).await;
}

/// A handler that sleeps `ms` and records how many of its runs overlapped at most.
#[derive(Clone, Default)]
struct Overlap {
    ms: u64,
    now: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    max: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    runs: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

#[async_trait::async_trait]
impl orq::Handler for Overlap {
    async fn handle(&self, _: orq::TaskContext) -> Result<serde_json::Value, orq::HandlerError> {
        use std::sync::atomic::Ordering;
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        tokio::time::sleep(std::time::Duration::from_millis(self.ms)).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(serde_json::Value::Null)
    }
}

/// What [`refill_pool`] and [`lanes_pool`] return: the lease counters, the handler, the running
/// pool and the submitted task ids.
type OverlapPool = (
    std::sync::Arc<LeaseSizes>,
    Overlap,
    crate::common::RunningWorker,
    Vec<String>,
);

/// A pool of `concurrency` on queue "q" running [`Overlap`] handlers of `ms`, over a store that
/// records the leases; `tasks` tasks submitted.
async fn refill_pool(env: &Env, concurrency: usize, ms: u64, tasks: usize) -> OverlapPool {
    lanes_pool(env, concurrency, WorkerConfig::default().lanes, ms, tasks).await
}

/// [`refill_pool`] with `lanes` lanes.
async fn lanes_pool(
    env: &Env,
    concurrency: usize,
    lanes: usize,
    ms: u64,
    tasks: usize,
) -> OverlapPool {
    let calls = std::sync::Arc::new(LeaseSizes {
        inner: env.store.clone(),
        sizes: Default::default(),
        refills: Default::default(),
    });
    let overlap = Overlap {
        ms,
        ..Overlap::default()
    };
    let worker = env.worker_on(
        calls.clone(),
        "w-1",
        "q",
        Handlers::new().register("overlap", overlap.clone()),
        |c| {
            c.concurrency = concurrency;
            c.lanes = lanes;
        },
    );
    let specs = (0..tasks)
        .map(|n| spec("q", "overlap", &format!("{{\"n\":{n}}}")))
        .collect();
    let ids = env.submit_ids(specs).await;
    (calls, overlap, worker, ids)
}

/// Wait until every task of `ids` completed after one attempt, stop the pool, check that each
/// handler ran once; returns the most handlers that overlapped (and resets the counters).
async fn run_once_each(
    env: &Env,
    ids: &[String],
    worker: crate::common::RunningWorker,
    overlap: &Overlap,
) -> usize {
    use std::sync::atomic::Ordering;
    for id in ids {
        let t = env.wait_status("q", id, Status::Completed).await;
        assert_eq!(t.attempt, 1, "task {id} ran once");
    }
    worker.stop().await;
    assert_eq!(
        overlap.runs.swap(0, Ordering::SeqCst),
        ids.len(),
        "each handler ran once"
    );
    overlap.max.swap(0, Ordering::SeqCst)
}

// Goal: a pool serving one queue with ready work refills the slots its completions free in the
// completion's own call (complete_batch with a lease: one round trip instead of two), and the
// lease loop and the completer together never run more handlers than `concurrency` (both
// reserve their slots before they ask).
// Method: concurrency 3, 40 tasks whose handlers sleep 5 ms; every task completes once, at least
// one complete_batch leased, and no more than three handlers ever overlapped.
async fn completions_lease_the_next_tasks_and_the_pool_stays_within_its_concurrency(env: Env) {
    use std::sync::atomic::Ordering;
    let (calls, overlap, worker, ids) = refill_pool(&env, 3, 5, 40).await;
    let max = run_once_each(&env, &ids, worker, &overlap).await;
    assert!(
        max <= 3,
        "at most `concurrency` handlers at once, saw {max}"
    );
    let refills = calls.refills.load(Ordering::SeqCst);
    let leases = calls.sizes.lock().unwrap().len() - refills;
    assert!(
        refills >= 1,
        "completions leased ({leases} lease calls, {refills} refills)"
    );
}

// Goal: a pool's lanes split its slots and together stay within its concurrency: each lane
// leases for its own share (concurrency / lanes, the first lanes one more), every task runs once,
// and the lanes stop together.
// Method: concurrency 5 in 2 lanes (3 + 2 slots), 60 tasks whose handlers sleep 5 ms; no lease
// asks for more than 3, at most 5 handlers overlap; then the same with 16 lanes asked of a pool
// of concurrency 3 (3 lanes of 1: no call asks for more than 1).
async fn lanes_split_the_slots_of_a_pool_and_stay_within_its_concurrency(env: Env) {
    for (concurrency, lanes, share) in [(5, 2, 3), (3, 16, 1)] {
        let (calls, overlap, worker, ids) = lanes_pool(&env, concurrency, lanes, 5, 60).await;
        let max = run_once_each(&env, &ids, worker, &overlap).await;
        assert!(
            max <= concurrency,
            "at most {concurrency} handlers at once, saw {max}"
        );
        let sizes = calls.sizes.lock().unwrap().clone();
        assert!(!sizes.is_empty());
        assert!(
            sizes.iter().all(|&n| (1..=share).contains(&n)),
            "each lane asks for at most its share of {share}: {sizes:?}"
        );
        assert!(
            sizes.contains(&share),
            "a lane asked for its whole share: {sizes:?}"
        );
    }
}

// Goal: an idle pool of two lanes asks the store about as often as one lane would: only its
// first lane polls every idle_poll_ms; the other waits ten times longer (or until a lane finds
// work), so idle lanes do not multiply the idle load on Redis.
// Method: an empty queue, concurrency 4 in 2 lanes, idle_poll_ms 20, for about a second; the
// lease calls are at most one per 20 ms of the time that passed, plus a few (two polling lanes
// would make twice that). Only an upper bound: a loaded machine makes fewer calls, not more.
async fn an_idle_pool_of_two_lanes_polls_about_as_often_as_one(env: Env) {
    let calls = std::sync::Arc::new(LeaseSizes {
        inner: env.store.clone(),
        sizes: Default::default(),
        refills: Default::default(),
    });
    let started = std::time::Instant::now();
    let worker = env.worker_on(calls.clone(), "w-1", "idle", Handlers::new(), |c| {
        c.concurrency = 4;
        c.lanes = 2;
        c.idle_poll_ms = 20;
    });
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    let asked = calls.sizes.lock().unwrap().len();
    let elapsed_ms = started.elapsed().as_millis() as usize;
    worker.stop().await;
    let one_lane = elapsed_ms / 20 + 1;
    assert!(asked >= 2, "both lanes asked once at start: {asked}");
    assert!(
        asked <= one_lane + one_lane / 10 + 4,
        "{asked} lease calls in {elapsed_ms} ms; one polling lane makes at most {one_lane}"
    );
}

// Goal: while one lane is busy, the pool's other lanes poll at the usual rate, so new work
// never waits for a busy lane (only when the first lane polls an idle store too do the others
// poll less often).
// Method: 2 slots in 2 lanes, idle_poll_ms 4 s (an idle second lane would wait 40 s, more than
// the test's 30 s deadline). Task A, submitted before the pool starts, goes to the first lane's
// first lease and holds it; task B, submitted then, must still start: the second lane asks
// again after 4 s.
async fn a_busy_first_lane_leaves_new_work_to_the_others_at_the_usual_rate(env: Env) {
    let gated = Gated::default();
    env.submit_ids(vec![spec("q", "gated", "{\"n\":1}")]).await;
    let worker = env.worker_on(
        env.store.clone(),
        "w-1",
        "q",
        Handlers::new().register("gated", gated.clone()),
        |c| {
            c.concurrency = 2;
            c.lanes = 2;
            c.idle_poll_ms = 4_000;
        },
    );
    gated.wait_started(1).await;
    env.submit_ids(vec![spec("q", "gated", "{\"n\":2}")]).await;
    gated.wait_started(2).await;
    gated.permits.add_permits(2);
    worker.stop().await;
}

// Goal: a pool that stops while its completions lease leaves no task leased: what the completer
// leased in a call in flight at shutdown runs within the grace period or is released.
// Method: concurrency 4, 200 tasks of 2 ms; stop the pool once 20 have run, then no task is
// leased, and every task is completed or queued again.
async fn a_pool_stopped_while_its_completions_lease_leaves_nothing_leased(env: Env) {
    use std::sync::atomic::Ordering;
    let (calls, overlap, worker, ids) = refill_pool(&env, 4, 2, 200).await;
    crate::common::eventually("20 handlers to have run", || async {
        (overlap.runs.load(Ordering::SeqCst) >= 20).then_some(())
    })
    .await;
    worker.stop().await;
    assert!(
        calls.refills.load(Ordering::SeqCst) >= 1,
        "completions leased"
    );
    let mut completed = 0;
    for id in &ids {
        let t = env.get("q", id).await;
        assert!(
            matches!(t.status, Status::Completed | Status::Queued),
            "task {id} is {} after the pool stopped",
            t.status
        );
        completed += usize::from(t.status == Status::Completed);
    }
    assert_eq!(
        completed,
        overlap.runs.load(Ordering::SeqCst),
        "every handler that ran was completed, no other task"
    );
}

/// A store wrapper that counts lease and queue-list calls and passes the wake-ups through.
struct CountedLeases {
    inner: std::sync::Arc<dyn orq::Store>,
    leases: std::sync::atomic::AtomicUsize,
    lists: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl orq::Store for CountedLeases {
    async fn eval(
        &self,
        script: &'static orq_lua::Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<orq::Resp, orq::StoreError> {
        if script.name == "lease" {
            self.leases
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        if script.name == "queues" {
            self.lists.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        self.inner.eval(script, keys, args).await
    }

    fn wake(&self, channels: &[String]) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.inner.wake(channels)
    }
}

impl CountedLeases {
    fn on(env: &Env) -> std::sync::Arc<CountedLeases> {
        std::sync::Arc::new(CountedLeases {
            inner: env.store.clone(),
            leases: Default::default(),
            lists: Default::default(),
        })
    }
    fn count(&self) -> usize {
        self.leases.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// An echo pool of `queue` on this store whose idle poll (120 s) is four times the tests'
    /// 30 s deadline, so a task it runs within the deadline was leased on a wake-up.
    fn idle_echo_pool(
        self: &std::sync::Arc<Self>,
        env: &Env,
        queue: &str,
        tune: impl FnOnce(&mut WorkerConfig),
    ) -> crate::common::RunningWorker {
        env.worker_on(
            self.clone(),
            "w-1",
            queue,
            Handlers::new().register("echo", Echo::default()),
            |c| {
                c.idle_poll_ms = 120_000;
                tune(c);
            },
        )
    }
}

/// Start an idle pool of two lanes on `q` (idle poll 120 s) and wait for its first (empty)
/// lease calls; submit a task and wait until it completes. Returns the pool.
async fn idle_pool_runs_a_task_on_its_wake_up(
    env: &Env,
    store: &std::sync::Arc<CountedLeases>,
) -> crate::common::RunningWorker {
    let worker = store.idle_echo_pool(env, "q", |c| c.lanes = 2);
    eventually("the pool's first lease calls", || async {
        (store.count() >= 2).then_some(())
    })
    .await;
    let first = env.submit_ids(vec![spec("q", "echo", "{\"n\":1}")]).await;
    env.wait_status("q", &first[0], Status::Completed).await;
    worker
}

// Goal: an idle pool leases a task submitted to its queue when the submit's wake-up arrives
// (Redis pub/sub or the embedded store's channels, design note 27), not at its next idle poll.
// Method: idle_poll_ms 120 s, four times the 30 s deadline, so a task that completes within the
// deadline was leased on a wake-up. The pool makes its first (empty) lease calls, then a task is
// submitted and must complete.
async fn an_idle_pool_leases_on_the_submits_wake_up(env: Env) {
    let store = CountedLeases::on(&env);
    let worker = idle_pool_runs_a_task_on_its_wake_up(&env, &store).await;
    worker.stop().await;
}

// Goal: after the wake-up subscriber's connection is killed, the subscriber reconnects and
// wake-ups work again.
// Method: as the test above, then `CLIENT KILL ID` drops the subscriber (the one pub/sub client
// that is not a sentinel's), and a second task submitted after it must complete within the
// deadline, a quarter of the idle poll.
async fn an_idle_pool_leases_on_wake_ups_after_its_subscriber_reconnects(env: Env) {
    let store = CountedLeases::on(&env);
    let worker = idle_pool_runs_a_task_on_its_wake_up(&env, &store).await;
    // The store's subscriber is the one pub/sub client that is not a sentinel's (sentinels
    // name their connections `sentinel-<id>-pubsub`).
    let mut raw = env.raw().await;
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut raw)
        .await
        .unwrap();
    let ours: Vec<&str> = clients
        .lines()
        .filter(|c| !c.contains(" name=sentinel-"))
        .filter_map(|c| c.split(' ').find_map(|f| f.strip_prefix("id=")))
        .collect();
    let mut killed = 0;
    for id in &ours {
        let n: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(*id)
            .query_async(&mut raw)
            .await
            .unwrap();
        killed += n;
    }
    assert_eq!(killed, 1, "one subscriber connection (the store's)");
    let second = env.submit_ids(vec![spec("q", "echo", "{\"n\":2}")]).await;
    env.wait_status("q", &second[0], Status::Completed).await;
    worker.stop().await;
}

// Goal: a pool that serves every queue hears of a new queue (the `queues` script's wake-up) and
// leases its first task without waiting for its idle poll.
// Method: a pool with no queue list and idle_poll_ms 120 s starts on an empty store; a task is
// then submitted to a queue nobody has used, and must complete within the 30 s deadline.
async fn a_pool_serving_every_queue_leases_from_a_new_queue_on_its_wake_up(env: Env) {
    let store = CountedLeases::on(&env);
    let worker = store.idle_echo_pool(&env, "unused", |c| c.queues = Vec::new());
    eventually("the pool to list the (empty) queue list", || async {
        (store.lists.load(std::sync::atomic::Ordering::SeqCst) >= 1).then_some(())
    })
    .await;
    let id = env.submit_ids(vec![spec("fresh", "echo", "{}")]).await;
    env.wait_status("fresh", &id[0], Status::Completed).await;
    assert!(store.count() >= 1, "the pool leased from the new queue");
    worker.stop().await;
}

/// This suite's tests and the deployments each runs on.
pub fn cases() -> Vec<crate::deployment::Case> {
    use crate::deployment::ONE_NODE;
    cases![
        submitted_task_completes_with_the_handlers_result,
        delayed_task_is_not_leased_before_its_run_at,
        higher_priority_is_leased_first,
        same_priority_is_leased_in_submit_order,
        batch_of_500_is_created_and_completed_by_a_worker,
        idempotency_key_returns_the_first_task,
        compact_records_store_only_what_differs_and_read_back_whole => ONE_NODE,
        a_slot_is_refilled_while_the_last_completion_is_recorded,
        a_busy_pool_leases_once_its_slots_are_free_not_slot_by_slot,
        a_lingering_pool_leases_a_lone_free_slot_after_the_linger,
        completions_lease_the_next_tasks_and_the_pool_stays_within_its_concurrency,
        lanes_split_the_slots_of_a_pool_and_stay_within_its_concurrency,
        an_idle_pool_of_two_lanes_polls_about_as_often_as_one,
        a_busy_first_lane_leaves_new_work_to_the_others_at_the_usual_rate,
        a_pool_stopped_while_its_completions_lease_leaves_nothing_leased,
        an_idle_pool_leases_on_the_submits_wake_up,
        an_idle_pool_leases_on_wake_ups_after_its_subscriber_reconnects => ONE_NODE,
        a_pool_serving_every_queue_leases_from_a_new_queue_on_its_wake_up,
    ]
}
