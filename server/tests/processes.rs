//! Multi-process: `orq api` and two `orq worker` processes against one private Redis. One worker
//! is killed with SIGKILL while it runs a task; the task must complete on the other one.

mod roles;

use orq::testing::RedisServer;
use roles::*;
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::Instant;

// Goal: crash recovery across processes. Method: the API and two workers run as real `orq`
// processes; a `sleep` task with a 1 s lease starts on one worker, which we SIGKILL; after the
// lease expires the other worker's lease call reaps it and runs attempt 2 to completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_workers_task_completes_on_the_other_worker() {
    let redis = RedisServer::start();
    let url = redis.url();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let _api = Proc::spawn(&["api", "--redis", &url, "--listen", &listen]);
    let mut workers = [
        Proc::spawn(&[
            "worker",
            "--redis",
            &url,
            "--concurrency",
            "2",
            "--worker-id",
            "w-a",
        ]),
        Proc::spawn(&[
            "worker",
            "--redis",
            &url,
            "--concurrency",
            "2",
            "--worker-id",
            "w-b",
        ]),
    ];
    let http = reqwest::Client::new();
    let base = format!("http://{listen}/api/v1");
    wait_ready(&http, &base).await;

    let body = json!({"type": "sleep", "payload": {"ms": 3000}, "lease_ms": 1000, "max_retries": 3,
        "backoff": {"initial_ms": 10, "jitter": 0}});
    let id = roles::submit_task(&http, &base, body).await;
    let get = |id: String| {
        let http = http.clone();
        let url = format!("{base}/tasks/{id}");
        async move { roles::get_json(&http, &url).await }
    };

    let leased = wait_for("the task to be leased", async || {
        let t = get(id.clone()).await?;
        (t["status"] == "leased").then_some(t)
    })
    .await;
    let first = leased["lease"]["worker"].as_str().unwrap().to_string();
    let (victim, survivor) = if first == "w-a" {
        (0, "w-b")
    } else {
        (1, "w-a")
    };
    workers[victim].kill();

    let mut saw_survivor = false;
    let done = wait_for("the task to complete", async || {
        let t = get(id.clone()).await?;
        if t["lease"]["worker"] == survivor {
            saw_survivor = true;
        }
        (t["status"] == "completed").then_some(t)
    })
    .await;
    assert_eq!(done["attempt"], 2, "the lost attempt counts: {done}");
    assert_eq!(done["result"], json!({"slept_ms": 3000}));
    let attempts = done["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{done}");
    assert_eq!(
        (&attempts[0]["attempt"], &attempts[0]["outcome"]),
        (&json!(1), &json!("expired")),
        "{done}"
    );
    assert_eq!(attempts[0]["worker"], first.as_str(), "{done}");
    assert_eq!(
        (
            &attempts[1]["attempt"],
            &attempts[1]["outcome"],
            &attempts[1]["error"]
        ),
        (&json!(2), &json!("completed"), &Value::Null),
        "{done}"
    );
    assert_eq!(attempts[1]["worker"], survivor, "{done}");
    assert!(saw_survivor, "attempt 2 ran on {survivor}");
}

// Goal: the README's first command needs no Redis. Method: run `orq serve` with no --redis
// (the embedded store), submit an echo task and a failing task over HTTP, replay the dead one,
// and see both complete; the startup output says that state lives in memory only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_without_redis_runs_on_the_embedded_store() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let child = Command::new(env!("CARGO_BIN_EXE_orq"))
        .args(["serve", "--listen", &listen, "--no-dashboard-build"])
        .env("ORQ_LOG", "warn")
        .env_remove("ORQ_REDIS_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn orq serve");
    let mut serve = Proc(Some(child));
    let http = reqwest::Client::new();
    let base = format!("http://{listen}/api/v1");
    wait_ready(&http, &base).await;
    let submit = |body: Value| submit_task(&http, &base, body);
    let status_of = |id: String| {
        let http = http.clone();
        let base = base.clone();
        async move {
            let r = http.get(format!("{base}/tasks/{id}")).send().await.ok()?;
            r.json::<Value>().await.ok()
        }
    };
    let echo = submit(json!({"payload": {"hello": "embedded"}})).await;
    let failing = submit(json!({"type": "fail", "payload": {"times": 1}, "max_retries": 0})).await;
    let done = wait_for("echo to complete", async || {
        let t = status_of(echo.clone()).await?;
        (t["status"] == "completed").then_some(t)
    })
    .await;
    assert_eq!(done["result"], json!({"hello": "embedded"}));
    wait_for("the failing task to die", async || {
        let t = status_of(failing.clone()).await?;
        (t["status"] == "dead").then_some(t)
    })
    .await;
    let r = http
        .post(format!("{base}/dlq/{failing}/replay"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    wait_for("the replayed task to complete", async || {
        let t = status_of(failing.clone()).await?;
        (t["status"] == "completed").then_some(t)
    })
    .await;
    // The startup log names the embedded store and its lack of durability, once; stdout (not a
    // terminal here) holds only the line programs wait for.
    let mut child = serve.0.take().unwrap();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(log.matches("embedded store").count(), 1, "{log}");
    assert!(log.contains("lost when orq stops"), "{log}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [format!("orq API listening on http://{listen}/api/v1")],
        "{stdout}"
    );
}

// Goal: a server whose stdout and stderr pipes were closed by their reader (`orq serve 2>&1 |
// head -n 1`) keeps serving, and SIGTERM still stops it cleanly (it used to panic on the first
// status or log line it could not write). Method: spawn with both streams piped, close the read
// ends at once, check the API answers, send SIGTERM with `kill`, and wait for exit status 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_output_pipes_neither_crash_nor_block_shutdown() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_orq"))
        .args(["serve", "--listen", &listen, "--no-dashboard-build"])
        .env("ORQ_LOG", "info")
        .env_remove("ORQ_REDIS_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn orq serve");
    drop(child.stdout.take());
    drop(child.stderr.take());
    let mut serve = Proc(Some(child));
    let http = reqwest::Client::new();
    let base = format!("http://{listen}/api/v1");
    wait_ready(&http, &base).await;
    // Serves with its output gone.
    roles::submit_task(&http, &base, json!({"payload": 1})).await;
    let status = serve
        .terminate("orq serve with its output pipes closed")
        .await;
    assert!(status.success(), "clean exit: {status:?}");
}

// Goal: what SIGTERM does to running tasks, as `orq worker --help` says: the pool stops
// leasing, lets a running handler finish within --shutdown-grace-ms, then releases what still
// runs (no attempt spent) and exits cleanly. Method: a worker with a 300 ms grace runs a 60 s
// sleep task (lease 60 s, so only a release can free it soon); SIGTERM; the process exits 0,
// the task is queued again, and a second worker leases it with attempt 1 long before the first
// lease would have expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_releases_running_tasks_after_the_grace() {
    let redis = RedisServer::start();
    let url = redis.url();
    let listen = free_listen_addr();
    let _api = Proc::spawn(&["api", "--redis", &url, "--listen", &listen]);
    let mut first = Proc::spawn(&[
        "worker",
        "--redis",
        &url,
        "--worker-id",
        "w-first",
        "--shutdown-grace-ms",
        "300",
    ]);
    let http = reqwest::Client::new();
    let base = format!("http://{listen}/api/v1");
    wait_ready(&http, &base).await;
    let body = json!({"type": "sleep", "payload": {"ms": 60000}, "lease_ms": 60000});
    let id = roles::submit_task(&http, &base, body).await;
    let get = async |id: &str| roles::get_json(&http, &format!("{base}/tasks/{id}")).await;
    wait_for("the first worker to lease the task", async || {
        let t = get(&id).await?;
        (t["lease"]["worker"] == "w-first").then_some(t)
    })
    .await;
    let status = first.terminate("orq worker").await;
    assert!(status.success(), "clean exit: {status:?}");
    let released = get(&id).await.unwrap();
    assert_eq!(
        released["status"], "queued",
        "released, not left leased: {released}"
    );
    // Ready again at once: a second worker takes it.
    let _second = Proc::spawn(&["worker", "--redis", &url, "--worker-id", "w-second"]);
    let t = wait_for("the second worker to lease the task", async || {
        let t = get(&id).await?;
        (t["lease"]["worker"] == "w-second").then_some(t)
    })
    .await;
    assert_eq!(t["attempt"], 1, "a release spends no attempt: {t}");
}

// Goal: with --redis, the startup log says which Redis orq connected to: the address (no
// password: `orq::redact`'s unit test), the version, the role and whether AOF is on. Method:
// start `orq scheduler` on a private Redis, read its log until that line.
#[test]
fn startup_log_names_the_redis_it_connected_to() {
    use std::io::{BufRead, BufReader};
    let redis = RedisServer::start();
    let url = redis.url();
    let mut child = Proc::spawn_piped(&["scheduler", "--redis", &url], "info");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + WAIT;
    let line = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if l.contains("connected to Redis") => break l,
            Ok(_) => {}
            Err(_) => {
                let _ = child.kill();
                panic!("no 'connected to Redis' line in the startup log");
            }
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains(&format!("at {url}")), "{line}");
    // And `orq worker` says on stdout (not a terminal) when it has started: benchmarks wait for it.
    let mut worker = Command::new(env!("CARGO_BIN_EXE_orq"))
        .args(["worker", "--redis", &url, "--worker-id", "w-ready"])
        .env("ORQ_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn orq worker");
    let out = worker.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut first = String::new();
        let _ = BufReader::new(out).read_line(&mut first);
        let _ = tx.send(first);
    });
    let first = rx.recv_timeout(WAIT);
    let _ = worker.kill();
    let _ = worker.wait();
    let first = first.expect("orq worker printed no line on stdout");
    assert_eq!(first.trim_end(), "orq worker w-ready started");
    assert!(
        line.contains("Redis 7.") || line.contains("Redis 6."),
        "{line}"
    );
    assert!(
        line.contains("role master") && line.contains("AOF off"),
        "{line}"
    );
}

// Goal: ORQ_LOG_FORMAT=json makes every log line one JSON object (for log pipelines), with the
// level and the message. Method: run `orq serve` until it is ready, stop it, parse every line
// it wrote to stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_per_line() {
    let listen = free_listen_addr();
    let child = Command::new(env!("CARGO_BIN_EXE_orq"))
        .args(["serve", "--listen", &listen, "--no-dashboard-build"])
        .env("ORQ_LOG", "info")
        .env("ORQ_LOG_FORMAT", "json")
        .env_remove("ORQ_REDIS_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn orq serve");
    let mut serve = Proc(Some(child));
    let http = reqwest::Client::new();
    wait_ready(&http, &format!("http://{listen}/api/v1")).await;
    let mut child = serve.0.take().unwrap();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.len() >= 3, "{log}");
    for line in &lines {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(
            v["level"].is_string() && v["fields"]["message"].is_string(),
            "{line}"
        );
    }
    assert!(
        lines.iter().any(|l| l.contains("API listening on")),
        "{log}"
    );
}

// Goal: SIGTERM stops a role that still waits for its Redis at startup (it used to wait for
// ever, ignoring the signal, until a SIGKILL). Method: each role against a Redis address where
// nothing listens; once it says it waits, SIGTERM; it exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_a_role_waiting_for_its_redis() {
    use std::io::BufRead as _;
    let nowhere = format!("redis://{}/", free_listen_addr());
    for role in ["worker", "scheduler", "api"] {
        let listen = free_listen_addr();
        let mut args = vec![role, "--redis", &nowhere];
        if role == "api" {
            args.extend(["--listen", &listen]);
        }
        let mut child = Proc::spawn_piped(&args, "warn");
        let stderr = child.stderr.take().unwrap();
        let mut proc = Proc(Some(child));
        let waiting = tokio::task::spawn_blocking(move || {
            std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
                .any(|l| l.contains("Redis not reachable yet"))
        });
        let said = tokio::time::timeout(WAIT, waiting).await;
        assert!(
            matches!(said, Ok(Ok(true))),
            "{role} never said it waits for Redis"
        );
        let status = proc.terminate(role).await;
        assert!(status.success(), "{role}: {status:?}");
    }
}
