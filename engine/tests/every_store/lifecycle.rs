//! A task's life on every deployment: submit, run, complete; delays, priorities, FIFO order,
//! batch submit, idempotency keys and the compact task record. A worker pool's slots and lanes
//! are in `pool.rs`, its wake-ups in `wakeups.rs`.

use crate::common::{spec, Echo, Env};
use orq::ops;
use orq::{Handlers, ListQuery, Status};
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

// Goal: a new task's answer to its submit is the task as stored: the store answers a new task
// with 1 only, and the client derives its status and run_at from its spec and the store's time.
// Method: submit one batch with no delay, a delay, a run_at in the past and a run_at an hour
// ahead; each answer's status, run_at and created_at equal what `get` reads back, and the past
// run_at is kept as sent, queued.
async fn a_submits_answer_is_the_stored_task(env: Env) {
    let mut past = spec("q", "echo", "{}");
    past.run_at_ms = Some(1_000);
    let subs = env
        .client
        .submit_batch(vec![
            spec("q", "echo", "{}"),
            spec("q", "echo", "{}").delay_ms(5_000),
            past,
            spec("q", "echo", "{}"),
        ])
        .await
        .unwrap();
    let now_ms = subs[0].task.created_at_ms;
    let mut ahead = spec("q", "echo", "{}");
    ahead.run_at_ms = Some(now_ms + 3_600_000);
    let ahead = env.client.submit(ahead).await.unwrap();
    let want = [
        (Status::Queued, now_ms),
        (Status::Scheduled, now_ms + 5_000),
        (Status::Queued, 1_000),
        (Status::Queued, now_ms),
        (Status::Scheduled, now_ms + 3_600_000),
    ];
    let all: Vec<_> = subs.iter().chain([&ahead]).collect();
    for (sub, (status, run_at_ms)) in all.iter().zip(want) {
        assert!(sub.created);
        let t = &sub.task;
        assert_eq!(
            (t.status, t.run_at_ms),
            (status, run_at_ms),
            "answer of {}",
            t.id
        );
        let stored = env.get("q", &t.id).await;
        assert_eq!(
            (stored.status, stored.run_at_ms, stored.created_at_ms),
            (t.status, t.run_at_ms, t.created_at_ms),
            "stored {}",
            t.id
        );
    }
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

// Goal: a task's trace context (`TaskSpec::trace`) is stored with it and reaches every attempt
// unchanged: in the submit's answer, in get, in the lease (the NUL-joined record of a first
// lease and the array of one whose record holds an error), and after a replay from the DLQ.
// Method: one task with a traceparent and a two-member tracestate, no retries; lease it, fail it
// (dead), replay it, lease it again; a task without one has none everywhere.
async fn a_tasks_trace_context_reaches_every_attempt(env: Env) {
    let cx = orq::TraceContext::parse(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        Some("vendor=1,rojo=00f067aa0ba902b7"),
    )
    .unwrap();
    let traced = env
        .client
        .submit(spec("q", "echo", "{}").max_retries(0).trace(cx.clone()))
        .await
        .unwrap()
        .task;
    assert_eq!(traced.trace.as_ref(), Some(&cx), "the submit's answer");
    let plain = env
        .client
        .submit(spec("q", "echo", "{}"))
        .await
        .unwrap()
        .task;
    assert_eq!(plain.trace, None);
    assert_eq!(env.get("q", &traced.id).await.trace.as_ref(), Some(&cx));

    let first = env.lease("q", "w1", 2).await.tasks;
    assert_eq!(first.len(), 2);
    for t in &first {
        let want = (t.id == traced.id).then(|| cx.clone());
        assert_eq!(t.trace, want, "first lease of {}", t.id);
    }
    let token = first
        .iter()
        .find(|t| t.id == traced.id)
        .and_then(|t| t.lease.clone())
        .unwrap()
        .token;
    ops::fail(
        &*env.store,
        "q",
        &traced.id,
        &token,
        "boom, with free text",
        true,
        0.5,
    )
    .await
    .unwrap();
    assert_eq!(env.get("q", &traced.id).await.status, Status::Dead);
    env.client.replay(Some("q"), &traced.id).await.unwrap();
    let again = env.lease_one("q", "w1").await;
    assert_eq!(again.id, traced.id);
    assert_eq!(again.last_error.as_deref(), Some("boom, with free text"));
    assert_eq!(again.trace.as_ref(), Some(&cx), "the lease after a replay");
}

/// This suite's tests and the deployments each runs on.
pub fn cases() -> Vec<crate::deployment::Case> {
    use crate::deployment::ONE_NODE;
    cases![
        submitted_task_completes_with_the_handlers_result,
        delayed_task_is_not_leased_before_its_run_at,
        a_submits_answer_is_the_stored_task,
        higher_priority_is_leased_first,
        same_priority_is_leased_in_submit_order,
        batch_of_500_is_created_and_completed_by_a_worker,
        idempotency_key_returns_the_first_task,
        a_tasks_trace_context_reaches_every_attempt,
        compact_records_store_only_what_differs_and_read_back_whole => ONE_NODE,
    ]
}
