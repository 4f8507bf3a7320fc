//! `orq bench --role producer`: only the submit loop, through the Rust client straight to Redis,
//! for a worker in another process (`orq worker`, whose built-in `echo` handler runs the tasks);
//! `bench/compare.py` runs it against BullMQ's producer (Queue.addBulk) in its own process.

use crate::phase::{submit_all, Tasks};
use crate::progress::Quiet;
use crate::BenchPlan;
use orq::{Clock, Entropy, Store};
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// The tasks of a producer run: type `echo` (a built-in handler of `orq worker`), payload
/// `{"i":k}` (what `bench/bullmq/bench.mjs` gives job k as its data).
const ECHO: Tasks = Tasks {
    task_type: "echo",
    payload: |k| format!("{{\"i\":{k}}}"),
};

/// What a producer run reports (one JSON line on stdout).
#[derive(Debug, Serialize)]
pub struct ProducerReport {
    /// `"orq"`.
    pub engine: &'static str,
    /// `"producer"`.
    pub role: &'static str,
    /// `"rust"`: the Rust client, straight to Redis.
    pub producer: &'static str,
    /// Tasks submitted.
    pub tasks: u64,
    /// Wall clock just before the first submit call (ms since the Unix epoch).
    pub first_submit_ms: u64,
    /// Wall clock after the last submit call answered (ms since the Unix epoch).
    pub last_submit_ms: u64,
    /// First submit to last answer (s).
    pub submit_s: f64,
}

/// Submit the plan's tasks to `queue` in batches, one call in flight: `plan.tasks` plain tasks,
/// or with `plan.delayed` > 0 that many delayed ones, due `delay_ms` .. `delay_ms + spread` from
/// the first submit, spread evenly. Errors: the first failed submit, as text.
pub async fn produce(
    plan: &BenchPlan,
    store: Arc<dyn Store>,
    queue: &str,
) -> Result<ProducerReport, String> {
    if !orq::keys::is_valid_name(queue) {
        return Err(format!("--queue {queue:?}: [A-Za-z0-9._-]{{1,64}}"));
    }
    let clock: Arc<dyn Clock> = Arc::new(orq::SystemClock);
    let client = orq::Client::new(store, clock.clone(), Arc::new(Entropy::from_os()));
    let (n, delay_base) = if plan.delayed > 0 {
        (plan.delayed, Some(clock.now_ms()))
    } else {
        (plan.tasks, None)
    };
    let queues = [queue.to_string()];
    let first_submit_ms = clock.now_ms();
    let t0 = Instant::now();
    submit_all(&client, plan, &ECHO, &queues, n, delay_base, &Quiet).await?;
    let submit_s = t0.elapsed().as_secs_f64();
    Ok(ProducerReport {
        engine: "orq",
        role: "producer",
        producer: "rust",
        tasks: n,
        first_submit_ms,
        last_submit_ms: clock.now_ms(),
        submit_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use orq::client::ListQuery;
    use orq::Status;

    fn plan(tasks: u64, delayed: u64) -> BenchPlan {
        BenchPlan {
            tasks,
            queues: 1,
            batch: 100,
            concurrency: 1,
            lanes: 1,
            tenants: 1,
            priorities: 1,
            delayed,
            delay_ms: 60_000,
            delay_spread_ms: 1_000,
        }
    }

    /// The tasks of `queue` with `status`, as (type, payload).
    async fn tasks(store: Arc<dyn Store>, queue: &str, status: Status) -> Vec<(String, String)> {
        let client = orq::Client::new(
            store,
            Arc::new(orq::SystemClock),
            Arc::new(Entropy::from_os()),
        );
        let page = client
            .list(&ListQuery {
                queue: queue.into(),
                status: Some(status),
                tenant: None,
                task_type: None,
                limit: 1000,
                cursor: None,
            })
            .await
            .unwrap();
        page.tasks
            .into_iter()
            .map(|t| (t.task_type, t.payload))
            .collect()
    }

    // Goal: the producer role submits exactly the plan's tasks to the queue, as `echo` tasks
    // numbered in their payload, plain or (with `delayed`) scheduled, and refuses a bad name.
    #[test]
    fn producer_submits_echo_tasks_to_its_queue() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let store: Arc<dyn Store> =
                Arc::new(orq_model::MemoryStore::new(Arc::new(orq_model::WallClock)));
            let r = produce(&plan(250, 0), store.clone(), "p1").await.unwrap();
            assert_eq!((r.tasks, r.role, r.producer), (250, "producer", "rust"));
            assert!(r.first_submit_ms <= r.last_submit_ms);
            let mut queued = tasks(store.clone(), "p1", Status::Queued).await;
            queued.sort();
            let mut want: Vec<(String, String)> = (0..250)
                .map(|k| ("echo".to_string(), format!("{{\"i\":{k}}}")))
                .collect();
            want.sort();
            assert_eq!(queued, want);

            let r = produce(&plan(250, 7), store.clone(), "p2").await.unwrap();
            assert_eq!(r.tasks, 7);
            assert_eq!(tasks(store.clone(), "p2", Status::Scheduled).await.len(), 7);
            assert!(tasks(store.clone(), "p2", Status::Queued).await.is_empty());

            assert!(produce(&plan(1, 0), store, "bad name").await.is_err());
        });
    }
}
