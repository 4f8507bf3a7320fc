//! Corrupt or foreign state on a real Redis (issue 6, part 4): a worker pool and a scheduler
//! keep serving the healthy tasks of a queue that also holds damaged entries, and of a queue
//! beside one whose keys hold foreign data; a leased task whose fields cannot be decoded lands
//! in the DLQ with the reason; typed errors for by-id calls. The script-level cases run on both
//! stores in sim/tests/corrupt_state.rs, which also runs this scenario on `MemoryStore`.

mod common;

use common::{eventually, spec, Echo, Env};
use orq::ops;
use orq::{Entropy, Error, Handlers, Scheduler, SchedulerConfig, SystemClock};
use redis::AsyncCommands;
use std::sync::Arc;

fn key(queue: &str, id: &str) -> String {
    format!("orq:{{{queue}}}:task:{id}")
}

const GHOST: &str = "01GGGGGGGGGGGGGGGGGGGGGGGG";

// Goal: corrupt entries cost nothing but themselves. A worker pool over two queues completes
// every healthy task of `q` although `q` holds a deleted hash, a task with status `bogus`, a task
// whose priority is not a number, and dangling scheduled and lease entries, and although queue
// `bad` has a list where its stats hash should be; the undecodable task ends in the DLQ with
// "corrupt task: ..."; the scheduler's pass succeeds for `q` while `bad` fails; every repair is
// counted in `q`'s stats.
// Method: submit through the client, plant with raw commands, run a real Worker and Scheduler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_and_scheduler_keep_serving_healthy_tasks_beside_corrupt_state() {
    let env = Env::start().await;
    let mut healthy = Vec::new();
    for n in 0..10 {
        let s = spec("q", "echo", &format!("{{\"n\":{n}}}")).max_retries(0);
        healthy.push(env.client.submit(s).await.unwrap().task.id);
    }
    let mut planted = Vec::new();
    for n in 10..13 {
        let s = spec("q", "echo", &format!("{{\"n\":{n}}}")).max_retries(0);
        planted.push(env.client.submit(s).await.unwrap().task.id);
    }
    env.client.submit(spec("bad", "echo", "{}")).await.unwrap();
    let mut raw = env.raw().await;
    let _: () = raw.del(key("q", &planted[0])).await.unwrap();
    let _: () = raw
        .hset(key("q", &planted[1]), "s", "bogus") // status (task::STORED_NAMES)
        .await
        .unwrap();
    let _: () = raw
        .hset(key("q", &planted[2]), "pr", "x") // priority
        .await
        .unwrap();
    let _: () = raw.zadd("orq:{q}:scheduled", GHOST, 0).await.unwrap();
    let _: () = raw
        .zadd("orq:{q}:leases", "01CCCCCCCCCCCCCCCCCCCCCCCC", 0)
        .await
        .unwrap();
    let _: () = raw.del("orq:{bad}:stats").await.unwrap();
    let _: () = raw.rpush("orq:{bad}:stats", "foreign").await.unwrap();
    // A due entry, so that promote has work on `bad` (an idle promote writes nothing and checks
    // only the scheduled set it reads: design note 53).
    let _: () = raw.zadd("orq:{bad}:scheduled", GHOST, 0).await.unwrap();

    // A by-id call on the foreign queue is a typed error, not a raw Redis one.
    let e = ops::promote(&*env.store, "bad", 10).await.unwrap_err();
    assert!(
        matches!(&e, Error::Protocol { message, .. } if message.starts_with("CORRUPT orq:{bad}:stats")),
        "{e:?}"
    );

    let scheduler = Scheduler::new(
        env.store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_os()),
        SchedulerConfig {
            queues: vec!["bad".into(), "q".into()],
            interval_ms: 50,
            ..SchedulerConfig::default()
        },
    );
    let pass = scheduler
        .run_once()
        .await
        .expect("q is maintained although bad fails");
    assert_eq!(
        pass.promoted + pass.reaped,
        2,
        "the two dangling entries were met"
    );

    let worker = env.worker(
        "w1",
        "q",
        Handlers::new().register("echo", Echo::default()),
        |c| c.queues = vec!["bad".into(), "q".into()],
    );
    for id in &healthy {
        env.wait_status("q", id, orq::Status::Completed).await;
    }
    let dead = eventually("the undecodable task to be in the DLQ", || {
        let mut raw = raw.clone();
        let k = key("q", &planted[2]);
        async move {
            let (status, error): (Option<String>, Option<String>) = redis::cmd("HMGET")
                .arg(&k)
                .arg("s") // status and last_error, in the stored names
                .arg("le")
                .query_async(&mut raw)
                .await
                .unwrap();
            (status.as_deref() == Some("dead")).then_some(error)
        }
    })
    .await;
    assert!(
        dead.as_deref()
            .is_some_and(|e| e.starts_with("corrupt task:")),
        "{dead:?}"
    );
    worker.stop().await;
    let repaired: Option<i64> = raw.hget("orq:{q}:stats", "total:repaired").await.unwrap();
    assert_eq!(
        repaired,
        Some(4),
        "deleted hash, bogus status, scheduled and lease entries"
    );
    let e = ops::lease(&*env.store, "bad", "w1", 1, "00ff", 0.5)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Protocol { .. }), "{e:?}");
}
