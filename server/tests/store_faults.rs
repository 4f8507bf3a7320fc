//! The store's own refusals on a real Redis: an OOM episode (`maxmemory` reached under
//! `noeviction`) and a read-only window (the server turned into a replica, as in a failover).
//! Submits answer 503 `store_unavailable` with `Retry-After` while they last, `/readyz` says not
//! ready, and the tasks that were running are completed on their first attempt once the store
//! takes writes again: their outcomes were retried with the same token, never dropped, so nothing
//! waited for a lease to expire or ran twice.

mod common;

use axum::http::{Method, StatusCode};
use common::TestApp;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A plain connection to the fixture's private Redis, for the fault's CONFIG/REPLICAOF calls.
fn redis(app: &TestApp) -> redis::Connection {
    let url = app.redis.as_ref().expect("a Redis fixture").url();
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

fn cmd(con: &mut redis::Connection, args: &[&str]) {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query::<redis::Value>(con)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

/// Submit `n` sleep tasks of `ms` with no retries (a dropped outcome would end in the DLQ).
async fn submit_sleeps(app: &TestApp, n: usize, ms: u64) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..n {
        let body = json!({"type": "sleep", "payload": {"ms": ms}, "max_retries": 0,
            "lease_ms": 60_000})
        .to_string();
        let (s, t) = app.call(Method::POST, "/api/v1/tasks", Some(&body)).await;
        assert_eq!(s, StatusCode::CREATED, "{t}");
        ids.push(t["id"].as_str().unwrap().to_string());
    }
    ids
}

/// Wait until at least `n` of `ids` are leased; returns those.
async fn leased(app: &TestApp, ids: &[String], n: usize) -> Vec<String> {
    let deadline = Instant::now() + common::WAIT;
    loop {
        let mut held = Vec::new();
        for id in ids {
            let (_, t) = app
                .call(Method::GET, &format!("/api/v1/tasks/{id}"), None)
                .await;
            if t["status"] == "leased" {
                held.push(id.clone());
            }
        }
        if held.len() >= n {
            return held;
        }
        assert!(
            Instant::now() < deadline,
            "fewer than {n} tasks ever leased"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A submit and a readiness probe during the episode: 503 `store_unavailable`, `Retry-After`,
/// and a message naming what the store is doing (`words`).
async fn assert_refused(app: &TestApp, words: &str) {
    let body = json!({"payload": "during the episode"}).to_string();
    let (s, e, headers) = app
        .call_as(None, Method::POST, "/api/v1/tasks", Some(&body))
        .await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{e}");
    assert_eq!(e["error"]["code"], "store_unavailable", "{e}");
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.contains(words), "{msg}");
    assert!(headers.contains_key("retry-after"), "{headers:?}");
    // A batch's store failure is the call's, not its first item's.
    let batch = json!({"tasks": [{"payload": 1}]}).to_string();
    let (s, e) = app
        .call(Method::POST, "/api/v1/tasks/batch", Some(&batch))
        .await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{e}");
    assert_eq!(e["error"]["code"], "store_unavailable", "{e}");
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.starts_with("the store "), "{msg}");
    let (s, e, headers) = app.call_as(None, Method::GET, "/api/v1/readyz", None).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{e}");
    assert_eq!(e["error"]["code"], "store_unavailable", "{e}");
    assert!(headers.contains_key("retry-after"));
}

/// Every task of `ids` completes on attempt 1 with no failed attempt in its attempts.
async fn assert_completed_once(app: &TestApp, ids: &[String]) {
    for id in ids {
        let t: Value = app
            .wait_task(id, "completed or dead", |t| {
                t["status"] == "completed" || t["status"] == "dead"
            })
            .await;
        assert_eq!(t["status"], "completed", "{t}");
        assert_eq!(t["attempt"], 1, "ran more than once: {t}");
        let attempts = t["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 1, "only the successful attempt: {t}");
        assert_eq!(attempts[0]["outcome"], "completed", "{t}");
    }
    let (s, _) = app.call(Method::GET, "/api/v1/readyz", None).await;
    assert_eq!(s, StatusCode::OK);
    submit_sleeps(app, 1, 1).await;
}

// Goal: the OOM scenario. Method: six sleep tasks, four running (the fixture's pool);
// `maxmemory 1` under `noeviction` for longer than the running handlers take, so their
// completions (and heartbeats) are refused with OOM; then memory comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oom_episode_refuses_submits_and_loses_no_running_outcome() {
    let app = TestApp::start(true, vec![]).await;
    let ids = submit_sleeps(&app, 6, 300).await;
    let running = leased(&app, &ids, 2).await;
    let mut con = redis(&app);
    cmd(
        &mut con,
        &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
    );
    cmd(&mut con, &["CONFIG", "SET", "maxmemory", "1"]);
    assert_refused(&app, "out of memory").await;
    // Longer than the running handlers' 300 ms: they finish while the store refuses.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    for id in &running {
        let (_, t) = app
            .call(Method::GET, &format!("/api/v1/tasks/{id}"), None)
            .await;
        assert_eq!(t["status"], "leased", "recorded during the episode? {t}");
    }
    cmd(&mut con, &["CONFIG", "SET", "maxmemory", "0"]);
    assert_completed_once(&app, &ids).await;
}

// Goal: a failover's read-only window: the server becomes a replica (of a primary that does not
// answer, so it keeps its data) and then a primary again; the same guarantees hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_window_refuses_submits_and_loses_no_running_outcome() {
    let app = TestApp::start(true, vec![]).await;
    let ids = submit_sleeps(&app, 6, 300).await;
    leased(&app, &ids, 2).await;
    let mut con = redis(&app);
    // Port 1 on loopback: nothing listens, so the replica never syncs (and never drops data).
    cmd(&mut con, &["REPLICAOF", "127.0.0.1", "1"]);
    assert_refused(&app, "read-only").await;
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    cmd(&mut con, &["REPLICAOF", "NO", "ONE"]);
    assert_completed_once(&app, &ids).await;
}

// Goal: `--redis` naming a replica is refused at startup with exit code 2 and a message that says
// so, instead of a worker whose every call is refused. Method: a private Redis made a replica of
// an absent primary; `orq worker` as a real process.
#[test]
fn a_replica_url_is_refused_at_startup() {
    let redis = orq::testing::RedisServer::start();
    let mut con = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    cmd(&mut con, &["REPLICAOF", "127.0.0.1", "1"]);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_orq"))
        .args(["worker", "--redis", &redis.url()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn orq");
    let deadline = Instant::now() + common::WAIT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("orq worker kept running against a replica");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("read-only replica"), "{err}");
}

// Goal: with the store gone, every submit route answers 503 store_unavailable naming the cause,
// a batch's too (its per-item reads fail first: the message is the call's, not `tasks[0].`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_store_answers_503_on_every_submit_route() {
    let mut app = TestApp::start(false, vec![]).await;
    drop(app.redis.take());
    let batch = json!({"tasks": [{"payload": 1}]}).to_string();
    let one = json!({"payload": 1}).to_string();
    for (uri, body) in [("/api/v1/tasks/batch", &batch), ("/api/v1/tasks", &one)] {
        let (s, e) = app.call(Method::POST, uri, Some(body)).await;
        assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{uri}: {e}");
        assert_eq!(e["error"]["code"], "store_unavailable", "{uri}: {e}");
        let msg = e["error"]["message"].as_str().unwrap();
        assert!(msg.starts_with("the store is unreachable"), "{uri}: {msg}");
    }
}
