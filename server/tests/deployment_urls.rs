//! Bad `--redis` deployment URLs at startup, and readiness when no primary is reachable (issue
//! 21, "Bad input"): a cluster URL whose nodes are down, a Sentinel URL whose sentinels are down
//! or do not know the master name, a URL of the wrong scheme or without its parts — each role
//! stops at once with a clear message and exit code 2, never a panic or a hang; an API on a
//! cluster whose primaries are all gone answers `/readyz` 503. And the data-format version
//! (design note 39): a fresh Redis gets this orq's, a Redis holding another refuses every role
//! with exit code 2 and a message that says what to do.

mod roles;

use orq::format::DATA_FORMAT;
use orq::keys::FORMAT_KEY;
use orq::testing::{RedisCluster, RedisSentinel, RedisServer};
use roles::*;
use serde_json::Value;
use std::io::Read;
use std::time::{Duration, Instant};

/// `orq <role> --redis <url>` (with a free `--listen` for the API): its exit code and stderr.
/// Panics when it is still running after [`WAIT`] (a hang).
fn run_role(role: &str, url: &str) -> (Option<i32>, String) {
    let listen = free_listen_addr();
    let mut args = vec![role, "--redis", url];
    if role == "api" || role == "serve" {
        args.extend(["--listen", &listen]);
    }
    if role == "serve" {
        args.push("--no-dashboard-build");
    }
    let mut child = Proc::spawn_piped(&args, "warn");
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("orq {role} --redis {url} still runs after {WAIT:?}: it must stop");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("piped stderr")
        .read_to_string(&mut err)
        .expect("read stderr");
    (status.code(), err)
}

// Goal: every role stops at startup on a deployment URL that leads nowhere, with exit code 2 and
// a message that says what is wrong (and shows no password), never a panic or a hang.
// Method: for `orq api`, `orq worker` and `orq scheduler`: a cluster URL naming two ports
// nobody listens on; a Sentinel URL naming such a port (with a password in it); a real
// Sentinel deployment asked for a master name it does not know; `http://`; a cluster URL
// without a node; a Sentinel URL without a master name. Each must exit with code 2 and the
// expected words on stderr, and no `panicked`.
#[test]
fn deployment_urls_that_lead_nowhere_stop_every_role_with_exit_code_2() {
    let sentinel = RedisSentinel::start();
    let ports = sentinel.sentinel_ports();
    let unknown_master = format!("redis+sentinel://127.0.0.1:{}/nosuchmaster", ports[0]);
    let (down_a, down_b) = (free_port(), free_port());
    let cases = [
        (
            format!("redis+cluster://127.0.0.1:{down_a},127.0.0.1:{down_b}"),
            "no node of the Redis Cluster URL answers",
        ),
        (
            format!("redis+sentinel://:hunter2@127.0.0.1:{down_a}/orqmaster"),
            "no Redis Sentinel of the URL answers",
        ),
        (
            unknown_master,
            "no Redis Sentinel knows a master named \"nosuchmaster\"",
        ),
        ("http://127.0.0.1:6379".to_string(), "bad Redis URL"),
        ("redis+cluster://".to_string(), "bad Redis Cluster URL"),
        (
            format!("redis+sentinel://127.0.0.1:{}", ports[0]),
            "bad Redis Sentinel URL",
        ),
    ];
    for role in ["api", "worker", "scheduler"] {
        for (url, expected) in &cases {
            let (code, err) = run_role(role, url);
            assert_eq!(code, Some(2), "orq {role} --redis {url}: {err}");
            assert!(err.contains(expected), "orq {role} --redis {url}: {err}");
            assert!(!err.contains("panicked"), "orq {role} --redis {url}: {err}");
            assert!(!err.contains("hunter2"), "the password is shown: {err}");
        }
    }
}

// Goal: `/readyz` says "not ready" (503, a store-unavailable error) while no primary of a
// cluster is reachable, and the API keeps answering.
// Method: a cluster of three primaries without replicas; `orq api` on its URL is ready; every
// node is killed; `/readyz` must answer 503 with code `store_unavailable` within the deadline
// (the store's calls time out and retry in bounded time), and `/healthz` still answers 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_not_ready_while_no_primary_is_reachable() {
    let mut cluster = RedisCluster::start(3, 0);
    let listen = free_listen_addr();
    let mut api = Proc::spawn(&["api", "--redis", &cluster.url(), "--listen", &listen]);
    let http = reqwest::Client::new();
    let base = format!("http://{listen}/api/v1");
    wait_ready(&http, &base).await;
    for port in cluster.ports() {
        cluster.kill_node(port);
    }
    let body = wait_for("/readyz to answer 503", async || {
        let r = http.get(format!("{base}/readyz")).send().await.ok()?;
        (r.status().as_u16() == 503).then_some(r.json::<Value>().await.ok()?)
    })
    .await;
    assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
    let health = http.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status().as_u16(), 200);
    api.assert_running("api");
}

/// The data-format key's value in the Redis at `url` (`None` when absent).
fn stored_format(url: &str) -> Option<String> {
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    redis::cmd("GET").arg(FORMAT_KEY).query(&mut c).unwrap()
}

/// Set the data-format key of the Redis at `url` to `value`.
fn set_format(url: &str, value: &str) {
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    let _: () = redis::cmd("SET")
        .arg(FORMAT_KEY)
        .arg(value)
        .query(&mut c)
        .unwrap();
}

// Goal: a fresh Redis gets this orq's data format at the first start; a Redis that holds another
// format, or a value that is no format, stops `orq serve`, `orq worker` (and the other roles)
// at startup with exit code 2 and a message that says what to do, writing nothing over it; a
// Redis of this format starts every role.
// Method: one Redis. `orq serve --redis` on it empty: ready, and the key holds DATA_FORMAT.
// Then the key set to DATA_FORMAT + 1, then to "abc": each role must exit 2 with the words of
// the refusal, no `panicked`, and the key unchanged. Then DATA_FORMAT again: `orq worker` and
// `orq serve` run (serve ready, the worker still running after it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_holding_another_data_format_stops_every_role_with_exit_code_2() {
    let redis = RedisServer::start();
    let url = redis.url();
    let http = reqwest::Client::new();
    assert_eq!(stored_format(&url), None);
    {
        let listen = free_listen_addr();
        let mut serve = Proc::spawn(&[
            "serve",
            "--redis",
            &url,
            "--listen",
            &listen,
            "--no-dashboard-build",
        ]);
        wait_ready(&http, &format!("http://{listen}/api/v1")).await;
        serve.assert_running("serve");
    }
    assert_eq!(stored_format(&url), Some(DATA_FORMAT.to_string()));

    let other = (DATA_FORMAT + 1).to_string();
    let cases = [
        (
            other.clone(),
            vec![
                format!("this Redis holds orq data format {other}"),
                format!("this orq reads format {DATA_FORMAT}"),
                format!("run an orq that reads format {other}"),
                "another Redis".to_string(),
                "FLUSHALL".to_string(),
            ],
        ),
        (
            "abc".to_string(),
            vec![
                format!("{FORMAT_KEY} holds \"abc\", which is no orq data format"),
                "another Redis".to_string(),
            ],
        ),
    ];
    for (value, expected) in &cases {
        set_format(&url, value);
        for role in ["serve", "worker", "api", "scheduler"] {
            let (code, err) = run_role(role, &url);
            assert_eq!(code, Some(2), "orq {role} on format {value:?}: {err}");
            for words in expected {
                assert!(
                    err.contains(words.as_str()),
                    "orq {role}: {words:?} in {err}"
                );
            }
            assert!(!err.contains("panicked"), "orq {role}: {err}");
            assert_eq!(stored_format(&url).as_deref(), Some(value.as_str()));
        }
    }

    set_format(&url, &DATA_FORMAT.to_string());
    let mut worker = Proc::spawn(&["worker", "--redis", &url]);
    let listen = free_listen_addr();
    let mut serve = Proc::spawn(&[
        "serve",
        "--redis",
        &url,
        "--listen",
        &listen,
        "--no-dashboard-build",
    ]);
    wait_ready(&http, &format!("http://{listen}/api/v1")).await;
    serve.assert_running("serve");
    worker.assert_running("worker");
}
