//! The cost of `lease` as the number of backlogged tenants grows: lease calls per second with
//! 1, 100 and 10,000 tenants, on the embedded store (MemoryStore) and on a private local Redis,
//! side by side in one run.
//!
//!     cargo run --release -p orq-sim --example lease_cost
//!
//! Method: for each tenant count T, submit tasks spread evenly over T tenants (batches of 1,000),
//! then time `LEASES` lease calls of one task each (the fair-share pick, the pop, the lease write
//! and its event). Nothing completes, so every call finds work. Needs `redis-server` on PATH.

use orq::testing::RedisServer;
use orq::{ops, Client, Entropy, RedisStore, Store, SystemClock, TaskSpec};
use orq_sim::{MemoryStore, WallClock};
use std::sync::Arc;
use std::time::Instant;

/// Lease calls timed per measurement.
const LEASES: usize = 20_000;

async fn measure(store: Arc<dyn Store>, tenants: usize) -> f64 {
    let client = Client::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_seed(1)),
    );
    let per = LEASES.div_ceil(tenants).max(1);
    let mut specs = Vec::new();
    for k in 0..per {
        for t in 0..tenants {
            specs.push(
                TaskSpec::new(format!("{{\"k\":{k}}}"))
                    .queue("bench")
                    .tenant(format!("t{t}"))
                    .task_type("noop"),
            );
            if specs.len() == 1000 {
                client
                    .submit_batch(std::mem::take(&mut specs))
                    .await
                    .expect("submit");
            }
        }
    }
    if !specs.is_empty() {
        client.submit_batch(specs).await.expect("submit");
    }
    let start = Instant::now();
    for _ in 0..LEASES {
        let got = ops::lease(&*store, "bench", "w", 1, "abcdef", 0.5)
            .await
            .expect("lease");
        assert_eq!(got.tasks.len(), 1, "every call finds work");
    }
    LEASES as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    println!("| tenants | MemoryStore lease calls/s | Redis lease calls/s | ratio |");
    println!("|---|---|---|---|");
    for tenants in [1usize, 100, 10_000] {
        let memory: Arc<dyn Store> = Arc::new(MemoryStore::new(Arc::new(WallClock)));
        let m = measure(memory, tenants).await;
        let server = RedisServer::start();
        let redis: Arc<dyn Store> =
            Arc::new(RedisStore::connect(&server.url()).await.expect("redis"));
        let r = measure(redis, tenants).await;
        println!("| {tenants} | {m:.0} | {r:.0} | {:.2} |", m / r);
    }
}
