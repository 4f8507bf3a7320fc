//! A worker pool's wake-ups on every deployment: an idle pool leases a submitted task on the
//! submit's wake-up (also after its subscriber reconnects, and from a queue it has not seen)
//! rather than at its next idle poll.

use crate::common::{eventually, spec, Echo, Env};
use orq::{Handlers, Status, WorkerConfig};

/// A store wrapper that counts lease and queue-list calls and passes the wake-ups through (also
/// used by `pool.rs`).
pub(crate) struct CountedLeases {
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
    pub(crate) fn on(env: &Env) -> std::sync::Arc<CountedLeases> {
        std::sync::Arc::new(CountedLeases {
            inner: env.store.clone(),
            leases: Default::default(),
            lists: Default::default(),
        })
    }
    pub(crate) fn count(&self) -> usize {
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
        an_idle_pool_leases_on_the_submits_wake_up,
        an_idle_pool_leases_on_wake_ups_after_its_subscriber_reconnects => ONE_NODE,
        a_pool_serving_every_queue_leases_from_a_new_queue_on_its_wake_up,
    ]
}
