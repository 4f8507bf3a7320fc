//! Wake-ups on the embedded store (docs/design-notes.md, note 27): the scripts' PUBLISH calls
//! reach `Store::wake` listeners. That an idle worker pool leases on them instead of polling is
//! tested on every deployment, this one included, by the engine's `every_store` suite.

use orq::keys::{wake_channel, QUEUES_WAKE_CHANNEL};
use orq::{Client, Entropy, Store, SystemClock, TaskSpec};
use orq_sim::{ManualClock, MemoryStore};
use std::sync::Arc;

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
