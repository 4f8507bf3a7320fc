//! Recovery on every deployment: a crashed worker's expired lease is reclaimed by another worker
//! and the crashed worker's late report is fenced off; reports retried after a lost reply apply
//! once.

use crate::common::{backoff, spec, Echo, Env};
use orq::ops::{self, Reported};
use orq::{
    AttemptOutcome, Entropy, Error, Handlers, Scheduler, SchedulerConfig, Status, SystemClock,
};
use std::sync::Arc;

/// Wait until the store's clock is past `deadline_ms` (leases expire strictly after it).
async fn wait_store_past(env: &Env, queue: &str, deadline_ms: u64) {
    crate::common::eventually("the store's clock to pass the lease deadline", || async {
        (env.store_now_ms(queue).await > deadline_ms).then_some(())
    })
    .await;
}

// Goal: a task leased by a worker that crashes (never heartbeats nor reports) is reaped after its
// lease deadline, run by another worker as attempt 2, and completed exactly once; the crashed
// worker's late report with its old token is refused as stale.
// Method: ops::lease as "w-crashed" with lease_ms 1000; wait until the store's clock passes the
// deadline; Scheduler::run_once reaps it; a real Worker "w-2" runs it; then the crashed worker's
// complete / fail / heartbeat with the old token all answer Stale and change nothing.
async fn expired_lease_is_reclaimed_by_another_worker(env: Env) {
    let sub = env
        .client
        .submit(
            spec("q", "echo", r#"{"job":1}"#)
                .lease_ms(1_000)
                .max_retries(3)
                .backoff(backoff(50, 2.0)),
        )
        .await
        .unwrap();
    let id = sub.task.id;
    let crashed = env.lease_one("q", "w-crashed").await;
    assert_eq!(crashed.id, id);
    assert_eq!(crashed.attempt, 1);
    let old = crashed.lease.unwrap();
    assert_eq!((old.worker.as_str(), old.epoch), ("w-crashed", 1));

    wait_store_past(&env, "q", old.expires_at_ms).await;
    let scheduler = Scheduler::new(
        env.store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_os()),
        SchedulerConfig {
            queues: vec!["q".into()],
            ..SchedulerConfig::default()
        },
    );
    let pass = scheduler.run_once().await.unwrap();
    assert_eq!(pass.reaped, 1);
    let reaped = env.get("q", &id).await;
    assert!(matches!(reaped.status, Status::Retrying | Status::Queued));
    assert_eq!(reaped.attempt, 1);
    assert_eq!(reaped.last_error.as_deref(), Some("lease expired"));
    let expired = &reaped.attempts[0];
    assert_eq!(
        (
            expired.attempt,
            expired.worker.as_str(),
            expired.outcome,
            expired.error.as_deref()
        ),
        (
            1,
            "w-crashed",
            AttemptOutcome::Expired,
            Some("lease expired")
        ),
        "{:?}",
        reaped.attempts
    );

    let echo = Echo::default();
    let worker = env.worker(
        "w-2",
        "q",
        Handlers::new().register("echo", echo.clone()),
        |_| {},
    );
    let done = env.wait_status("q", &id, Status::Completed).await;
    assert_eq!(done.attempt, 2);
    assert_eq!(done.result.as_deref(), Some(r#"{"job":1}"#));
    let runs = echo.runs.of(&id);
    assert_eq!(runs.len(), 1, "the handler ran once, on the second worker");
    assert_eq!(
        (runs[0].worker.as_str(), runs[0].attempt, runs[0].epoch),
        ("w-2", 2, 2)
    );

    // The crashed worker wakes up and reports with its old token: fenced off.
    let late = ops::complete(&*env.store, "q", &id, &old.token, r#""late""#).await;
    assert!(
        matches!(late, Err(Error::Stale { op: "complete", .. })),
        "{late:?}"
    );
    let late = ops::fail(&*env.store, "q", &id, &old.token, "late", true, 0.5).await;
    assert!(
        matches!(late, Err(Error::Stale { op: "fail", .. })),
        "{late:?}"
    );
    let late = ops::heartbeat(&*env.store, "q", &id, &old.token, 0).await;
    assert!(
        matches!(
            late,
            Err(Error::Stale {
                op: "heartbeat",
                ..
            })
        ),
        "{late:?}"
    );
    let late = ops::release(&*env.store, "q", &id, &old.token).await;
    assert!(
        matches!(late, Err(Error::Stale { op: "release", .. })),
        "{late:?}"
    );
    worker.stop().await;

    let after = env.get("q", &id).await;
    assert_eq!(after.status, Status::Completed);
    assert_eq!(after.result.as_deref(), Some(r#"{"job":1}"#));
    let stats = env.stats("q").await;
    assert_eq!(stats.totals["completed"], 1);
    assert_eq!(stats.totals["reaped"], 1);
    assert_eq!(stats.counts[&Status::Completed], 1);
    assert_eq!(stats.counts[&Status::Leased], 0);
    assert_eq!(echo.runs.total(), 1);
}

// Goal: without any scheduler, a worker's own lease call reaps an expired lease and the task
// still completes on another worker, the stale report being refused.
// Method: as above, but no Scheduler: start Worker "w-2" right after the crashed lease; its lease
// calls reap the expired lease, then promote the retry after its backoff.
async fn expired_lease_is_reaped_by_a_workers_lease_call(env: Env) {
    let sub = env
        .client
        .submit(
            spec("q", "echo", "{}")
                .lease_ms(1_000)
                .backoff(backoff(50, 2.0)),
        )
        .await
        .unwrap();
    let id = sub.task.id;
    let old = env.lease_one("q", "w-crashed").await.lease.unwrap();

    let echo = Echo::default();
    let worker = env.worker(
        "w-2",
        "q",
        Handlers::new().register("echo", echo.clone()),
        |_| {},
    );
    let done = env.wait_status("q", &id, Status::Completed).await;
    worker.stop().await;
    assert_eq!(done.attempt, 2);
    assert_eq!(echo.runs.of(&id).len(), 1);
    assert_eq!(echo.runs.of(&id)[0].worker, "w-2");
    let late = ops::complete(&*env.store, "q", &id, &old.token, "null").await;
    assert!(matches!(late, Err(Error::Stale { .. })), "{late:?}");
    let stats = env.stats("q").await;
    assert_eq!(stats.totals["completed"], 1);
    assert_eq!(stats.totals["reaped"], 1);
}

// Goal: a complete retried with the same token after a lost reply is recognised and applied once.
// Method: ops::lease, then ops::complete twice with the same token: Applied, then
// AlreadyApplied; the second result is not stored; the stats count one completion.
async fn complete_retried_with_the_same_token_applies_once(env: Env) {
    let sub = env.client.submit(spec("q", "echo", "{}")).await.unwrap();
    let t = env.lease_one("q", "w-1").await;
    assert_eq!(t.id, sub.task.id);
    let token = t.lease.unwrap().token;

    let first = ops::complete(&*env.store, "q", &t.id, &token, r#""first""#).await;
    assert_eq!(first, Ok(Reported::Applied));
    let second = ops::complete(&*env.store, "q", &t.id, &token, r#""second""#).await;
    assert_eq!(second, Ok(Reported::AlreadyApplied));

    let done = env.get("q", &t.id).await;
    assert_eq!(done.status, Status::Completed);
    assert_eq!(done.result.as_deref(), Some(r#""first""#));
    let stats = env.stats("q").await;
    assert_eq!(stats.totals["completed"], 1);
    assert_eq!(stats.counts[&Status::Completed], 1);
    assert_eq!(stats.counts[&Status::Leased], 0);
    // A different operation with the token of the ended lease is stale, not "again".
    let other = ops::fail(&*env.store, "q", &t.id, &token, "x", true, 0.5).await;
    assert!(matches!(other, Err(Error::Stale { .. })), "{other:?}");
}

// Goal: a fail retried with the same token after a lost reply is applied once, for a retryable
// failure (one retry scheduled, one attempt spent) and for a permanent one (one DLQ entry).
// Method: ops::lease then ops::fail twice with the same token, for each kind; check replies,
// the task and the stats.
async fn fail_retried_with_the_same_token_applies_once(env: Env) {
    let retryable = env
        .client
        .submit(
            spec("q", "echo", "{}")
                .max_retries(3)
                .backoff(backoff(60_000, 2.0)),
        )
        .await
        .unwrap();
    let t = env.lease_one("q", "w-1").await;
    assert_eq!(t.id, retryable.task.id);
    let token = t.lease.unwrap().token;
    let first = ops::fail(&*env.store, "q", &t.id, &token, "boom", true, 0.5).await;
    assert_eq!(first, Ok(Reported::Applied));
    let second = ops::fail(&*env.store, "q", &t.id, &token, "boom again", true, 0.5).await;
    assert_eq!(second, Ok(Reported::AlreadyApplied));
    let after = env.get("q", &t.id).await;
    assert_eq!(after.status, Status::Retrying);
    assert_eq!(after.attempt, 1);
    assert_eq!(after.last_error.as_deref(), Some("boom"));
    assert_eq!(after.attempts.len(), 1);
    let stats = env.stats("q").await;
    assert_eq!(stats.totals["failed"], 1);
    assert_eq!(stats.counts[&Status::Retrying], 1);

    let permanent = env.client.submit(spec("q", "echo", "{}")).await.unwrap();
    let t = env.lease_one("q", "w-1").await;
    assert_eq!(t.id, permanent.task.id);
    let token = t.lease.unwrap().token;
    let first = ops::fail(&*env.store, "q", &t.id, &token, "fatal", false, 0.5).await;
    assert_eq!(first, Ok(Reported::Applied));
    let second = ops::fail(&*env.store, "q", &t.id, &token, "fatal", false, 0.5).await;
    assert_eq!(second, Ok(Reported::AlreadyApplied));
    assert_eq!(env.get("q", &t.id).await.status, Status::Dead);
    let stats = env.stats("q").await;
    assert_eq!(stats.totals["failed"], 2);
    assert_eq!(stats.totals["dead"], 1);
    assert_eq!(stats.counts[&Status::Dead], 1);
    assert_eq!(stats.counts[&Status::Leased], 0);
}

// Goal: a release retried with the same token after a lost reply is applied once: the task is
// queued once, with its attempt given back once.
// Method: ops::lease then ops::release twice; check replies, attempt, queued count, and that the
// task is leased again exactly once.
async fn release_retried_with_the_same_token_applies_once(env: Env) {
    let sub = env.client.submit(spec("q", "echo", "{}")).await.unwrap();
    let t = env.lease_one("q", "w-1").await;
    let token = t.lease.unwrap().token;
    assert_eq!(
        ops::release(&*env.store, "q", &t.id, &token).await,
        Ok(Reported::Applied)
    );
    assert_eq!(
        ops::release(&*env.store, "q", &t.id, &token).await,
        Ok(Reported::AlreadyApplied)
    );
    let after = env.get("q", &sub.task.id).await;
    assert_eq!(after.status, Status::Queued);
    assert_eq!(after.attempt, 0);
    assert_eq!(env.stats("q").await.counts[&Status::Queued], 1);
    let again = env.lease("q", "w-2", 10).await;
    assert_eq!(again.tasks.len(), 1, "queued once, not twice");
    assert_eq!(again.tasks[0].attempt, 1);
}

/// This suite's tests and the deployments each runs on.
pub fn cases() -> Vec<crate::deployment::Case> {
    cases![
        expired_lease_is_reclaimed_by_another_worker,
        expired_lease_is_reaped_by_a_workers_lease_call,
        complete_retried_with_the_same_token_applies_once,
        fail_retried_with_the_same_token_applies_once,
        release_retried_with_the_same_token_applies_once,
    ]
}
