//! Graceful worker shutdown on every deployment: in-flight handlers get a grace period, and
//! tasks still running after it are released back to the queue without spending an attempt.

use crate::common::{spec, Block, Echo, Env};
use orq::{Handlers, Status};
use std::sync::atomic::Ordering;

// Goal: a worker shutting down with a handler still running after the grace period aborts the
// handler and releases the task: it is queued again with attempt 0, and runs later elsewhere.
// Method: a `block` handler that runs 60 s; shutdown_grace_ms 200; cancel the shutdown token
// once the handler runs; wait for the worker to stop; check the task, the handler and the
// stats; then a second worker completes the task on attempt 1.
async fn shutdown_releases_a_task_whose_handler_outlives_the_grace_period(env: Env) {
    let block = Block::new(60_000);
    let state = block.state.clone();
    let worker = env.worker("w-1", "q", Handlers::new().register("job", block), |c| {
        c.shutdown_grace_ms = 200
    });
    let sub = env
        .client
        .submit(spec("q", "job", r#"{"x":1}"#))
        .await
        .unwrap();
    let id = sub.task.id;
    crate::common::eventually("the handler to start", || async {
        (state.started.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await;
    assert_eq!(env.get("q", &id).await.attempt, 1);

    worker.stop().await;
    assert!(!state.returned.load(Ordering::SeqCst));
    assert!(
        state.saw_cancel.load(Ordering::SeqCst) || state.aborted.load(Ordering::SeqCst),
        "the handler was stopped"
    );
    let released = env.get("q", &id).await;
    assert_eq!(released.status, Status::Queued);
    assert_eq!(released.attempt, 0, "the aborted run does not count");
    assert!(released.lease.is_none());
    assert!(released.last_error.is_none());
    let stats = env.stats("q").await;
    assert_eq!(stats.counts[&Status::Queued], 1);
    assert_eq!(stats.counts[&Status::Leased], 0);
    assert_eq!(stats.totals.get("failed").copied().unwrap_or(0), 0);

    let echo = Echo::default();
    let next = env.worker(
        "w-2",
        "q",
        Handlers::new().register("job", echo.clone()),
        |_| {},
    );
    let done = env.wait_status("q", &id, Status::Completed).await;
    next.stop().await;
    assert_eq!(done.attempt, 1);
    assert_eq!(done.result.as_deref(), Some(r#"{"x":1}"#));
    assert_eq!(echo.runs.of(&id)[0].worker, "w-2");
}

// Goal: a worker shutting down lets a handler that finishes within the grace period complete
// its task instead of releasing it.
// Method: a `block` handler that runs 500 ms; grace 20 s; stop the worker while it runs; the
// handler returned on its own and the task ends completed on attempt 1.
async fn shutdown_lets_a_handler_finish_within_the_grace_period(env: Env) {
    let block = Block::new(500);
    let state = block.state.clone();
    let worker = env.worker("w-1", "q", Handlers::new().register("job", block), |c| {
        c.shutdown_grace_ms = 20_000
    });
    let sub = env.client.submit(spec("q", "job", "{}")).await.unwrap();
    crate::common::eventually("the handler to start", || async {
        (state.started.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await;
    worker.stop().await;

    assert!(state.returned.load(Ordering::SeqCst));
    let done = env.get("q", &sub.task.id).await;
    assert_eq!(done.status, Status::Completed);
    assert_eq!(done.result.as_deref(), Some(r#"{"slept":true}"#));
    assert_eq!(done.attempt, 1);
    assert!(!state.aborted.load(Ordering::SeqCst));
    assert_eq!(state.started.load(Ordering::SeqCst), 1);
}

/// This suite's tests and the deployments each runs on.
pub fn cases() -> Vec<crate::deployment::Case> {
    cases![
        shutdown_releases_a_task_whose_handler_outlives_the_grace_period,
        shutdown_lets_a_handler_finish_within_the_grace_period,
    ]
}
