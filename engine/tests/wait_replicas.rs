//! `--wait-replicas` on a real primary with a real replica (two private `redis-server`s, the
//! second `REPLICAOF` the first): a recorded write answers only once the replica has it; with
//! the replica detached, a submit and a worker's outcome are refused as transient (`NOREPLICAS`,
//! recorded on the primary but not acknowledged), a resent submit with the same idempotency key
//! waits again and is acknowledged once the replica is back, and the worker keeps resending its
//! outcome with its lease token meanwhile; leases and reads never wait.

mod common;

use common::{eventually, spawn_worker, spec, Echo};
use orq::testing::RedisServer;
use orq::{
    Client, Entropy, Error, Handlers, RedisStore, Status, Store, SystemClock, Transient,
    WaitReplicas, WorkerConfig,
};
use std::sync::Arc;
use std::time::Duration;

/// A sync connection to the server on `port`, for commands the engine never sends.
fn node(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("url")
        .get_connection_with_timeout(Duration::from_secs(5))
        .expect("connect")
}

/// Make the server on `replica` replicate `primary` (or nobody, with `None`) and, when it
/// replicates, wait until its link is up and it has caught up.
async fn replicate(replica: u16, primary: Option<u16>) {
    let mut c = node(replica);
    let mut cmd = redis::cmd("REPLICAOF");
    match primary {
        Some(p) => cmd.arg("127.0.0.1").arg(p),
        None => cmd.arg("NO").arg("ONE"),
    };
    let _: String = cmd.query(&mut c).expect("REPLICAOF");
    if primary.is_some() {
        eventually("the replica to sync", || async {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut node(replica))
                .ok()?;
            info.contains("master_link_status:up").then_some(())
        })
        .await;
    }
}

/// The client of a store that waits for `replicas` replicas, at most 300 ms.
fn waiting_client(url: &str, replicas: u32) -> (Arc<dyn Store>, Client) {
    let store: Arc<dyn Store> = Arc::new(RedisStore::open(url).expect("open").with_wait_replicas(
        Some(WaitReplicas {
            replicas,
            timeout_ms: 300,
        }),
    ));
    let client = Client::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_os()),
    );
    (store, client)
}

/// Tasks of queue `wq` in `status` (None when the store does not answer).
async fn count(client: &Client, status: Status) -> Option<i64> {
    let s = client.stats("wq").await.ok()?;
    Some(s.counts.get(&status).copied().unwrap_or(0))
}

/// Calls of WAIT the server on `port` has answered (`INFO commandstats`).
fn wait_calls(port: u16) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut node(port))
        .expect("INFO commandstats");
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_wait:calls="))
        .and_then(|v| v.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

fn is_no_replicas(e: &Error) -> bool {
    e.transient() == Some(Transient::NoReplicas)
}

// Goal: with --wait-replicas, acknowledged means on the replica. Method: a submit is
// acknowledged while the replica is attached, and after a FUNCTION FLUSH (the library loaded,
// then FCALL and WAIT again);
// with it detached the same submit (idempotency
// key) is refused NOREPLICAS although the primary recorded it, reads still answer, and the
// resend is acknowledged (the same task, once) after the replica is back; a task's outcome
// refused NOREPLICAS is sent again (WAIT calls go on) and the task ran once (attempt 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_means_replicated_and_shortfalls_are_transient() {
    let primary = RedisServer::start();
    let replica = RedisServer::start();
    replicate(replica.port(), Some(primary.port())).await;
    let (store, client) = waiting_client(&primary.url(), 1);

    // Attached: acknowledged, and the replica has it.
    let a = client
        .submit(spec("wq", "echo", "\"a\"").idempotency_key("a"))
        .await
        .expect("acknowledged with the replica attached");
    let on_replica: bool = redis::cmd("EXISTS")
        .arg(format!("orq:{{wq}}:task:{}", a.task.id))
        .query::<i64>(&mut node(replica.port()))
        .expect("EXISTS on the replica")
        == 1;
    assert!(on_replica, "an acknowledged submit is on the replica");

    // After FUNCTION FLUSH the pipelined FCALL answers "Function not found"; the store loads the
    // library and sends the FCALL with its WAIT again: acknowledged, once.
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query(&mut node(primary.port()))
        .expect("FUNCTION FLUSH");
    let waits = wait_calls(primary.port());
    let flushed = client
        .submit(spec("wf", "echo", "\"f\"").idempotency_key("f"))
        .await
        .expect("acknowledged after a function flush");
    assert!(flushed.created);
    assert!(wait_calls(primary.port()) >= waits + 2, "each try waited");

    // Detached: refused as transient, recorded on the primary, not acknowledged.
    replicate(replica.port(), None).await;
    let b_spec = spec("wq", "echo", "\"b\"").idempotency_key("b");
    let e = client
        .submit(b_spec.clone())
        .await
        .expect_err("no replica: not acknowledged");
    assert!(is_no_replicas(&e), "{e}");
    let e = client
        .submit(b_spec.clone())
        .await
        .expect_err("a resend waits again");
    assert!(is_no_replicas(&e), "{e}");
    // Reads never wait.
    assert_eq!(
        count(&client, Status::Queued).await,
        Some(2),
        "reads answer without replicas, and the refused submit is recorded"
    );

    // A worker whose outcome is refused NOREPLICAS keeps it and delivers it later.
    let waits = || wait_calls(primary.port());
    let before = waits();
    let worker = spawn_worker(
        store.clone(),
        Handlers::new().register("echo", Echo::default()),
        WorkerConfig {
            queues: vec!["wq".into()],
            idle_poll_ms: 20,
            ..WorkerConfig::default()
        },
    );
    // The primary records both outcomes (the scripts ran), but the worker is not told they
    // are recorded: it sends them again with their tokens, each try waiting again (until a
    // heartbeat says the lease is gone, the task being completed on the primary). Only
    // outcomes wait: at most two first tries, so four WAITs include a resend.
    eventually("the worker to run both tasks", || async {
        (count(&client, Status::Completed).await? == 2).then_some(())
    })
    .await;
    eventually(
        "the worker to resend its unacknowledged outcomes",
        || async { (waits() >= before + 4).then_some(()) },
    )
    .await;

    // Back: the resend is acknowledged as the same task, and both complete on attempt 1.
    replicate(replica.port(), Some(primary.port())).await;
    let b = eventually("the resent submit to be acknowledged", || async {
        client.submit(b_spec.clone()).await.ok()
    })
    .await;
    for id in [&a.task.id, &b.task.id] {
        let t = eventually("the task to complete", || async {
            let t = client.get(Some("wq"), id).await.ok()?;
            (t.status == Status::Completed).then_some(t)
        })
        .await;
        assert_eq!(t.attempt, 1, "{t:?}");
    }
    assert_eq!(count(&client, Status::Completed).await, Some(2));
    worker.stop().await;
}
