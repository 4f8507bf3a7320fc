//! Bad `--redis` deployment URLs at startup, and readiness when no primary is reachable (issue
//! 21, "Bad input"): a cluster URL whose nodes are down, a Sentinel URL whose sentinels are down
//! or do not know the master name, a URL of the wrong scheme or without its parts — each role
//! stops at once with a clear message and exit code 2, never a panic or a hang; an API on a
//! cluster whose primaries are all gone answers `/readyz` 503.

mod roles;

use orq::testing::{RedisCluster, RedisSentinel};
use roles::*;
use serde_json::Value;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `orq <role> --redis <url>` (with a free `--listen` for the API): its exit code and stderr.
/// Panics when it is still running after [`WAIT`] (a hang).
fn run_role(role: &str, url: &str) -> (Option<i32>, String) {
    let listen = free_listen_addr();
    let mut args = vec![role, "--redis", url];
    if role == "api" {
        args.extend(["--listen", &listen]);
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_orq"))
        .args(&args)
        .env("ORQ_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn orq");
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
