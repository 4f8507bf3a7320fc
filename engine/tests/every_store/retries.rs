//! Failures on every deployment: retries with exponential backoff, the dead-letter queue, and
//! replay and purge of dead tasks.

use crate::common::{backoff, spec, Env, Fail};
use orq::{AttemptOutcome, Error, Handlers, Status};

// Goal: a task whose handler fails twice, with 3 retries allowed, completes on attempt 3, and
// the wait before each retry follows the backoff (200 ms, then 600 ms: it grows).
// Method: the `fail` handler fails the first 2 runs and records, for every run, the store's
// lease time and the task's run_at. From the history (store failure times) and the runs: each
// retry's run_at is exactly failure time + backoff, no retry is leased before its run_at, and
// the gap between attempt starts grows.
async fn transient_failures_retry_with_growing_backoff_then_complete(env: Env) {
    let fail = Fail::default();
    let worker = env.worker(
        "w-1",
        "q",
        Handlers::new().register("fail", fail.clone()),
        |_| {},
    );
    let sub = env
        .client
        .submit(
            spec("q", "fail", r#"{"times":2}"#)
                .max_retries(3)
                .backoff(backoff(200, 3.0)),
        )
        .await
        .unwrap();

    let done = env.wait_status("q", &sub.task.id, Status::Completed).await;
    worker.stop().await;
    assert_eq!(done.attempt, 3);
    assert_eq!(done.result.as_deref(), Some(r#"{"ok":3}"#));
    assert_eq!(done.last_error.as_deref(), Some("failure 2 of 2"));

    let runs = fail.runs.of(&sub.task.id);
    let attempts: Vec<u32> = runs.iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, vec![1, 2, 3]);
    // The two failures, then the success (which the completion records in the task's fields).
    let history = &done.attempts;
    assert_eq!(history.len(), 3, "{history:?}");
    for (i, a) in history[..2].iter().enumerate() {
        assert_eq!(a.attempt, i as u32 + 1);
        assert_eq!(a.worker, "w-1");
        assert_eq!(a.outcome, AttemptOutcome::Failed);
        assert_eq!(a.error, Some(format!("failure {} of 2", i + 1)));
    }
    let success = &history[2];
    assert_eq!(
        (
            success.attempt,
            success.worker.as_str(),
            success.outcome,
            success.error.as_deref()
        ),
        (3, "w-1", AttemptOutcome::Completed, None)
    );
    assert_eq!(Some(success.at_ms), done.finished_at_ms);
    // The backoff by the store's clock: exactly 200 ms after the first failure, 600 after the
    // second (jitter 0), and never leased early.
    assert_eq!(runs[1].run_at_ms, history[0].at_ms + 200);
    assert_eq!(runs[2].run_at_ms, history[1].at_ms + 600);
    for r in &runs[1..] {
        assert!(
            r.leased_at_ms >= r.run_at_ms,
            "retry leased before its run_at: {r:?}"
        );
    }
    let gap1 = runs[1].leased_at_ms - runs[0].leased_at_ms;
    let gap2 = runs[2].leased_at_ms - runs[1].leased_at_ms;
    assert!(gap1 >= 200 && gap2 >= 600, "gaps {gap1} and {gap2} ms");
    assert!(
        gap2 > gap1,
        "gaps between attempts grow: {gap1} then {gap2} ms"
    );

    let stats = env.stats("q").await;
    assert_eq!(stats.totals["failed"], 2);
    assert_eq!(stats.totals["completed"], 1);
    assert_eq!(stats.totals.get("dead").copied().unwrap_or(0), 0);
}

// Goal: a task that keeps failing goes to the DLQ after its last attempt (max_retries + 1), with
// its last error stored, and does not run again.
// Method: `fail` with times 9 and max_retries 2; wait for `dead`; check attempts, history, the
// last error, the stats, and that the handler ran exactly 3 times.
async fn exhausted_retries_send_the_task_to_the_dlq_with_its_last_error(env: Env) {
    let fail = Fail::default();
    let worker = env.worker(
        "w-1",
        "q",
        Handlers::new().register("fail", fail.clone()),
        |_| {},
    );
    let sub = env
        .client
        .submit(
            spec("q", "fail", r#"{"times":9}"#)
                .max_retries(2)
                .backoff(backoff(50, 2.0)),
        )
        .await
        .unwrap();

    let dead = env.wait_status("q", &sub.task.id, Status::Dead).await;
    worker.stop().await;
    assert_eq!(dead.attempt, 3);
    assert_eq!(dead.last_error.as_deref(), Some("failure 3 of 9"));
    assert!(dead.finished_at_ms.is_some());
    assert!(dead.result.is_none());
    assert_eq!(dead.attempts.len(), 3, "{:?}", dead.attempts);
    assert_eq!(dead.attempts[2].error.as_deref(), Some("failure 3 of 9"));
    assert_eq!(dead.attempts[2].at_ms, dead.finished_at_ms.unwrap());
    assert_eq!(fail.runs.of(&sub.task.id).len(), 3);

    let stats = env.stats("q").await;
    assert_eq!(stats.counts[&Status::Dead], 1);
    assert_eq!(stats.counts[&Status::Retrying], 0);
    assert_eq!(stats.totals["failed"], 3);
    assert_eq!(stats.totals["dead"], 1);
}

// Goal: a permanent error sends the task to the DLQ after one attempt, retries notwithstanding.
// Method: `fail` with permanent true and max_retries 3; wait for `dead`; one run, attempt 1.
async fn permanent_error_sends_the_task_to_the_dlq_after_one_attempt(env: Env) {
    let fail = Fail::default();
    let worker = env.worker(
        "w-1",
        "q",
        Handlers::new().register("fail", fail.clone()),
        |_| {},
    );
    let sub = env
        .client
        .submit(
            spec("q", "fail", r#"{"permanent":true}"#)
                .max_retries(3)
                .backoff(backoff(50, 2.0)),
        )
        .await
        .unwrap();

    let dead = env.wait_status("q", &sub.task.id, Status::Dead).await;
    worker.stop().await;
    assert_eq!(dead.attempt, 1);
    assert_eq!(
        dead.last_error.as_deref(),
        Some("permanent failure on run 1")
    );
    assert_eq!(fail.runs.of(&sub.task.id).len(), 1);
    assert_eq!(env.stats("q").await.totals["dead"], 1);
}

// Goal: replaying a dead task puts it back in the queue with a fresh retry budget, keeping its
// history and moving its run_at to the replay time, and a worker then completes it.
// Method: `fail` with times 1 and max_retries 0 dies after one run; Client::replay; the second
// run (counted by the handler) succeeds. A replay of a task that is not dead is a conflict.
async fn replayed_dead_task_runs_again_and_completes(env: Env) {
    let fail = Fail::default();
    let worker = env.worker(
        "w-1",
        "q",
        Handlers::new().register("fail", fail.clone()),
        |_| {},
    );
    let sub = env
        .client
        .submit(spec("q", "fail", r#"{"times":1}"#).max_retries(0))
        .await
        .unwrap();
    let id = sub.task.id;
    let dead = env.wait_status("q", &id, Status::Dead).await;
    assert_eq!(dead.attempt, 1);

    let replayed = env.client.replay(None, &id).await.unwrap();
    assert!(matches!(
        replayed.status,
        Status::Queued | Status::Leased | Status::Completed
    ));
    assert_eq!(replayed.replays, 1);
    // Due again at the replay: run_at moves from the first submit to the replay time.
    assert!(
        replayed.run_at_ms >= dead.finished_at_ms.unwrap(),
        "{replayed:?}"
    );

    let done = env.wait_status("q", &id, Status::Completed).await;
    worker.stop().await;
    assert_eq!(done.attempt, 1, "attempts restart after a replay");
    assert_eq!(done.replays, 1);
    assert_eq!(done.result.as_deref(), Some(r#"{"ok":2}"#));
    assert_eq!(done.attempts.len(), 2, "the first life's history is kept");
    assert_eq!(done.attempts[0].error.as_deref(), Some("failure 1 of 1"));
    assert_eq!(
        (done.attempts[1].attempt, done.attempts[1].outcome),
        (1, AttemptOutcome::Completed)
    );
    assert_eq!(fail.runs.of(&id).len(), 2);

    let stats = env.stats("q").await;
    assert_eq!(stats.counts[&Status::Dead], 0);
    assert_eq!(stats.counts[&Status::Completed], 1);
    assert_eq!(stats.totals["replayed"], 1);
    assert_eq!(
        env.client.replay(Some("q"), &id).await.unwrap_err(),
        Error::Conflict {
            op: "replay",
            status: "completed".into()
        }
    );
}

// Goal: purging a dead task deletes it for good; purging a task that is not dead is refused.
// Method: a permanent failure goes to the DLQ; Client::purge; get answers NotFound, the DLQ
// count drops to 0, and a second purge answers NotFound.
async fn purged_dead_task_is_gone(env: Env) {
    let fail = Fail::default();
    let worker = env.worker(
        "w-1",
        "q",
        Handlers::new().register("fail", fail.clone()),
        |_| {},
    );
    let sub = env
        .client
        .submit(spec("q", "fail", r#"{"permanent":true}"#))
        .await
        .unwrap();
    let id = sub.task.id;
    env.wait_status("q", &id, Status::Dead).await;
    worker.stop().await;

    let queued = env.client.submit(spec("q", "fail", "{}")).await.unwrap();
    assert_eq!(
        env.client.purge(None, &queued.task.id).await.unwrap_err(),
        Error::Conflict {
            op: "purge",
            status: "queued".into()
        }
    );

    env.client.purge(None, &id).await.unwrap();
    assert!(matches!(
        env.client.get(Some("q"), &id).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        env.client.get(None, &id).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        env.client.purge(Some("q"), &id).await,
        Err(Error::NotFound { .. })
    ));
    let stats = env.stats("q").await;
    assert_eq!(stats.counts[&Status::Dead], 0);
    assert_eq!(stats.totals["purged"], 1);
    assert_eq!(env.get("q", &queued.task.id).await.status, Status::Queued);
}

/// This suite's tests and the deployments each runs on.
pub fn cases() -> Vec<crate::deployment::Case> {
    cases![
        transient_failures_retry_with_growing_backoff_then_complete,
        exhausted_retries_send_the_task_to_the_dlq_with_its_last_error,
        permanent_error_sends_the_task_to_the_dlq_after_one_attempt,
        replayed_dead_task_runs_again_and_completes,
        purged_dead_task_is_gone,
    ]
}
