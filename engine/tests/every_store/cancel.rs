//! Cancellation on every deployment: of a queued, a scheduled and a leased task (whose running
//! handler is aborted through its heartbeat), and the refusals that follow.

use crate::common::{spec, Block, Env};
use orq::ops;
use orq::{Error, Handlers, Status};
use std::sync::atomic::Ordering;

// Goal: a queued task can be cancelled, and is then never leased.
// Method: submit, cancel, check status and stats, then a lease call returns nothing. Cancelling
// again answers the cancelled task unchanged.
async fn queued_task_is_cancelled_and_never_leased(env: Env) {
    let sub = env.client.submit(spec("q", "echo", "{}")).await.unwrap();
    let cancelled = env.client.cancel(None, &sub.task.id).await.unwrap();
    assert_eq!(cancelled.status, Status::Cancelled);
    assert!(cancelled.finished_at_ms.is_some());

    assert!(env.lease("q", "w-1", 10).await.tasks.is_empty());
    let stats = env.stats("q").await;
    assert_eq!(stats.counts[&Status::Queued], 0);
    assert_eq!(stats.counts[&Status::Cancelled], 1);

    let again = env.client.cancel(Some("q"), &sub.task.id).await.unwrap();
    assert_eq!(again.status, Status::Cancelled);
    assert_eq!(again.finished_at_ms, cancelled.finished_at_ms);
    assert_eq!(env.stats("q").await.counts[&Status::Cancelled], 1);
}

// Goal: a scheduled (delayed) task can be cancelled before its run_at, and is never promoted.
// Method: submit with a 1 s delay, cancel, wait until the store's clock passes run_at, then
// lease: nothing; status stays cancelled.
async fn scheduled_task_is_cancelled_and_never_promoted(env: Env) {
    let sub = env
        .client
        .submit(spec("q", "echo", "{}").delay_ms(1_000))
        .await
        .unwrap();
    assert_eq!(sub.task.status, Status::Scheduled);
    let cancelled = env.client.cancel(Some("q"), &sub.task.id).await.unwrap();
    assert_eq!(cancelled.status, Status::Cancelled);
    assert_eq!(env.stats("q").await.counts[&Status::Scheduled], 0);

    let run_at_ms = sub.task.run_at_ms;
    crate::common::eventually("the store's clock to pass run_at", || async {
        (env.store_now_ms("q").await >= run_at_ms).then_some(())
    })
    .await;
    let batch = env.lease("q", "w-1", 10).await;
    assert!(batch.tasks.is_empty());
    assert_eq!(batch.next_ms, None, "nothing left scheduled");
    assert_eq!(env.get("q", &sub.task.id).await.status, Status::Cancelled);
}

// Goal: cancelling a leased task stops its running handler: the worker learns it at the next
// heartbeat and aborts the handler, and the task ends cancelled, never completed.
// Method: a `block` handler that runs 60 s unless stopped, lease_ms 1000 (heartbeats every
// ~333 ms); wait until it runs, cancel, then wait until the handler saw its cancellation token
// fire or was dropped; check it never returned, the task is cancelled and nothing completed.
async fn leased_task_is_cancelled_and_its_handler_aborted(env: Env) {
    let block = Block::new(60_000);
    let state = block.state.clone();
    let worker = env.worker("w-1", "q", Handlers::new().register("block", block), |_| {});
    let sub = env
        .client
        .submit(spec("q", "block", "{}").lease_ms(1_000))
        .await
        .unwrap();
    let id = sub.task.id;
    crate::common::eventually("the handler to start", || async {
        (state.started.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await;
    let running = env.get("q", &id).await;
    assert_eq!(running.status, Status::Leased);

    let cancelled = env.client.cancel(None, &id).await.unwrap();
    assert_eq!(cancelled.status, Status::Cancelled);
    crate::common::eventually("the handler to be stopped", || async {
        (state.saw_cancel.load(Ordering::SeqCst) || state.aborted.load(Ordering::SeqCst))
            .then_some(())
    })
    .await;
    worker.stop().await;
    assert!(
        !state.returned.load(Ordering::SeqCst),
        "the handler ran to its end"
    );
    let after = env.get("q", &id).await;
    assert_eq!(after.status, Status::Cancelled);
    assert!(after.result.is_none());
    let stats = env.stats("q").await;
    assert_eq!(stats.counts[&Status::Cancelled], 1);
    assert_eq!(stats.counts[&Status::Leased], 0);
    assert_eq!(stats.totals.get("completed").copied().unwrap_or(0), 0);
}

// Goal: once a leased task is cancelled, its worker's heartbeat and late reports are refused as
// Cancelled and change nothing.
// Method: ops::lease, cancel, then heartbeat / complete / fail / release with the lease token.
async fn reports_on_a_cancelled_lease_are_refused(env: Env) {
    let sub = env.client.submit(spec("q", "echo", "{}")).await.unwrap();
    let t = env.lease_one("q", "w-1").await;
    let token = t.lease.unwrap().token;
    env.client.cancel(Some("q"), &sub.task.id).await.unwrap();

    let hb = ops::heartbeat(&*env.store, "q", &t.id, &token, 0).await;
    assert_eq!(hb, Err(Error::Cancelled { op: "heartbeat" }));
    let c = ops::complete(&*env.store, "q", &t.id, &token, "null").await;
    assert_eq!(c, Err(Error::Cancelled { op: "complete" }));
    let f = ops::fail(&*env.store, "q", &t.id, &token, "x", true, 0.5).await;
    assert_eq!(f, Err(Error::Cancelled { op: "fail" }));
    let r = ops::release(&*env.store, "q", &t.id, &token).await;
    assert_eq!(r, Err(Error::Cancelled { op: "release" }));
    let after = env.get("q", &t.id).await;
    assert_eq!(after.status, Status::Cancelled);
    assert!(after.result.is_none());
    assert!(env.lease("q", "w-2", 10).await.tasks.is_empty());
}

// Goal: a finished task cannot be cancelled: completed and dead tasks answer Conflict.
// Method: complete one task and fail another permanently with the low-level calls, then cancel.
async fn cancel_of_a_finished_task_is_a_conflict(env: Env) {
    let done = env.client.submit(spec("q", "echo", "{}")).await.unwrap();
    let t = env.lease_one("q", "w-1").await;
    let token = t.lease.unwrap().token;
    ops::complete(&*env.store, "q", &t.id, &token, "1")
        .await
        .unwrap();
    assert_eq!(
        env.client.cancel(None, &done.task.id).await.unwrap_err(),
        Error::Conflict {
            op: "cancel",
            status: "completed".into()
        }
    );

    let dead = env.client.submit(spec("q", "echo", "{}")).await.unwrap();
    let t = env.lease_one("q", "w-1").await;
    let token = t.lease.unwrap().token;
    ops::fail(&*env.store, "q", &t.id, &token, "fatal", false, 0.5)
        .await
        .unwrap();
    assert_eq!(
        env.client
            .cancel(Some("q"), &dead.task.id)
            .await
            .unwrap_err(),
        Error::Conflict {
            op: "cancel",
            status: "dead".into()
        }
    );
    assert_eq!(env.get("q", &done.task.id).await.status, Status::Completed);
    assert_eq!(env.get("q", &dead.task.id).await.status, Status::Dead);
    assert!(matches!(
        env.client
            .cancel(Some("q"), "01ARZ3NDEKTSV4RRFFQ69G5FAV")
            .await,
        Err(Error::NotFound { .. })
    ));
}

/// This suite's tests and the deployments each runs on.
pub fn cases() -> Vec<crate::deployment::Case> {
    cases![
        queued_task_is_cancelled_and_never_leased,
        scheduled_task_is_cancelled_and_never_promoted,
        leased_task_is_cancelled_and_its_handler_aborted,
        reports_on_a_cancelled_lease_are_refused,
        cancel_of_a_finished_task_is_a_conflict,
    ]
}
