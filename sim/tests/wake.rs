//! Wake-ups on the embedded store (docs/design-notes.md, note 27): the scripts' PUBLISH calls
//! reach `Store::wake` listeners, and an idle worker pool leases on them instead of polling.

use async_trait::async_trait;
use orq::keys::{wake_channel, QUEUES_WAKE_CHANNEL};
use orq::{
    Client, Entropy, Handler, HandlerError, Handlers, Status, Store, SystemClock, TaskContext,
    TaskSpec, Worker, WorkerConfig,
};
use orq_sim::{ManualClock, MemoryStore, WallClock};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

struct Echo;

#[async_trait]
impl Handler for Echo {
    async fn handle(&self, ctx: TaskContext) -> Result<serde_json::Value, HandlerError> {
        serde_json::from_str(&ctx.task.payload).map_err(|e| HandlerError::permanent(e.to_string()))
    }
}

fn spec(queue: &str) -> TaskSpec {
    TaskSpec::new("{}").queue(queue).task_type("echo")
}

// Goal: a call that makes work ready wakes the listeners of its queue's channel, and only those;
// a new queue wakes the listeners of the queue list; calls that make nothing ready wake no one.
// Method: listeners on q's channel, on r's and on the queue list; submit to q (a new queue),
// then read and lease it empty-handed, checking which receivers changed after each step.
#[tokio::test]
async fn scripts_wake_the_listeners_of_the_queue_they_make_work_ready_in() {
    let store = Arc::new(MemoryStore::new(Arc::new(ManualClock::from_ms(
        1_800_000_000_000,
    ))));
    let client = Client::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_seed(1)),
    );
    let mut q = store
        .wake(&[wake_channel("q")])
        .expect("the model gives wake-ups");
    let mut r = store.wake(&[wake_channel("r")]).unwrap();
    let mut list = store.wake(&[QUEUES_WAKE_CHANNEL.to_string()]).unwrap();
    let task = client.submit(spec("q")).await.unwrap().task;
    assert!(q.has_changed().unwrap(), "the submit woke q's listener");
    assert!(!r.has_changed().unwrap(), "r's listener was not woken");
    assert!(
        list.has_changed().unwrap(),
        "a new queue woke the queue list's listener"
    );
    q.borrow_and_update();
    list.borrow_and_update();

    client.get(Some("q"), &task.id).await.unwrap();
    let leased = orq::ops::lease(&*store, "q", "w1", 10, "00ff", 0.5)
        .await
        .unwrap();
    assert_eq!(leased.tasks.len(), 1);
    let none = orq::ops::lease(&*store, "q", "w1", 10, "00ff", 0.5)
        .await
        .unwrap();
    assert!(none.tasks.is_empty());
    assert!(!q.has_changed().unwrap(), "a read and leases woke no one");
    client.submit(spec("q")).await.unwrap();
    assert!(q.has_changed().unwrap(), "a second submit wakes again");
    assert!(!list.has_changed().unwrap(), "q is no longer new");
    let _ = r.borrow_and_update();
}

// Goal: an idle pool on the embedded store leases a task submitted after it went idle on the
// submit's wake-up, not at its next idle poll.
// Method: the wall clock, idle_poll_ms 120 s (four times the 30 s deadline); wait for the pool's
// first lease round, submit, and the task must complete within the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_pool_on_the_embedded_store_leases_on_the_submits_wake_up() {
    let store = Arc::new(MemoryStore::new(Arc::new(WallClock)));
    let client = Client::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_seed(2)),
    );
    let worker = Worker::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_seed(3)),
        Handlers::new().register("echo", Echo),
        WorkerConfig {
            id: "w1".into(),
            queues: vec!["q".into()],
            concurrency: 4,
            idle_poll_ms: 120_000,
            ..WorkerConfig::default()
        },
    );
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let stop = stop.clone();
        async move { worker.run(stop).await }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    // The pool's first (empty) lease calls: both lanes ask once when they start.
    while store.script_calls() < 2 {
        assert!(Instant::now() < deadline, "the pool never leased");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let id = client.submit(spec("q")).await.unwrap().task.id;
    loop {
        let t = client.get(Some("q"), &id).await.unwrap();
        if t.status == Status::Completed {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for the task to complete (it is {})",
            t.status
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    run.await.expect("the pool did not panic");
}
