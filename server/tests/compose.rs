//! compose.yaml, verified as far as a machine without a container engine can: `docker-compose
//! config` validates the file (and resolves its anchors), then each service runs as a local
//! process with the compose file's own command, arguments and environment (host names and ports
//! mapped to a private Redis and free loopback ports), each health check is run until it passes,
//! and the README's walk-through goes through the API. The Dockerfile is not built here (no
//! container engine, no base images): README, "Containers", says so.

mod roles;

use orq::testing::RedisServer;
use roles::{free_listen_addr, get_json, submit_task, wait_for, wait_ready, Proc};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

/// The compose file as `docker-compose config` normalises it (anchors and merges resolved), as
/// JSON (read with the YAML module docker-compose itself depends on).
fn compose_config() -> Value {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new("docker-compose")
        .args(["-f", "compose.yaml", "config"])
        .current_dir(&root)
        .output()
        .expect("docker-compose (Debian package docker-compose) must be installed");
    assert!(
        out.status.success(),
        "docker-compose config: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut py = Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    py.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    let out = py.wait_with_output().unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// Replace each key of `map` by its value in `s`.
fn mapped(s: &str, map: &BTreeMap<String, String>) -> String {
    map.iter()
        .fold(s.to_string(), |s, (from, to)| s.replace(from.as_str(), to))
}

// Goal: `docker compose up` would start a working orq: the file is valid, Redis runs with AOF
// and noeviction, and the API, the scheduler and three workers started with the file's commands
// and environment serve the README's walk-through and pass their health checks. Method: as the
// module says; the services' container addresses (redis:6379, 0.0.0.0:8080 and :9090, the
// health checks' 127.0.0.1 ports) are mapped to a private Redis and free loopback ports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compose_services_run_the_walk_through_as_local_processes() {
    let config = compose_config();
    let services = config["services"].as_object().unwrap();
    let names: Vec<&str> = services.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "orq-api",
            "orq-scheduler",
            "orq-worker-1",
            "orq-worker-2",
            "orq-worker-3",
            "redis"
        ]
    );

    // Redis with the compose file's own arguments: AOF on, noeviction.
    let redis_cmd = strings(&services["redis"]["command"]);
    assert_eq!(redis_cmd[0], "redis-server");
    let args: Vec<&str> = redis_cmd[1..].iter().map(String::as_str).collect();
    let redis = RedisServer::start_with(&args);
    let mut raw = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let aof: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(aof[1], "yes");
    let policy: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-policy")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(policy[1], "noeviction");

    // Start every orq service with its command and environment, addresses mapped.
    let redis_addr = redis.url().replace("redis://", "").replace('/', "");
    let mut procs = Vec::new();
    let mut health = Vec::new();
    let mut api_base = None;
    for (name, svc) in services.iter().filter(|(n, _)| n.as_str() != "redis") {
        assert_eq!(svc["image"], "orq:local", "{name}");
        let listen = free_listen_addr();
        let port = if name == "orq-api" { "8080" } else { "9090" };
        let map: BTreeMap<String, String> = [
            ("redis:6379".to_string(), redis_addr.clone()),
            (format!("0.0.0.0:{port}"), listen.clone()),
            (format!("127.0.0.1:{port}"), listen.clone()),
        ]
        .into();
        let args: Vec<String> = strings(&svc["command"])
            .iter()
            .map(|a| mapped(a, &map))
            .collect();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_orq"));
        cmd.args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (k, v) in svc["environment"].as_object().unwrap() {
            let v = mapped(v.as_str().unwrap(), &map);
            cmd.env(
                k,
                if k == "ORQ_LOG" {
                    "warn".to_string()
                } else {
                    v
                },
            );
        }
        procs.push(Proc(Some(cmd.spawn().expect("spawn orq"))));
        let check = strings(&svc["healthcheck"]["test"]);
        assert_eq!(check[0], "CMD", "{name}");
        health.push((
            name.clone(),
            check[1..]
                .iter()
                .map(|a| mapped(a, &map))
                .collect::<Vec<_>>(),
        ));
        if name == "orq-api" {
            api_base = Some(format!("http://{listen}/api/v1"));
        }
    }
    let base = api_base.expect("an orq-api service");
    let http = reqwest::Client::new();
    wait_ready(&http, &base).await;

    // Every health check passes (run as the container would run it).
    for (name, check) in &health {
        wait_for(&format!("{name}'s health check"), async || {
            let ok = Command::new(&check[0])
                .args(&check[1..])
                .stderr(Stdio::null())
                .status()
                .ok()?
                .success();
            ok.then_some(Value::Null)
        })
        .await;
    }

    // The README's walk-through: an echo task, a delayed one, one that retries, one that sleeps.
    let submit = |body: Value| submit_task(&http, &base, body);
    let ids = [
        submit(json!({"type": "echo", "payload": {"to": "ada@example.com"}})).await,
        submit(json!({"type": "echo", "payload": {"later": true}, "delay_ms": 1000})).await,
        submit(json!({"type": "fail", "payload": {"times": 2},
            "backoff": {"initial_ms": 100, "jitter": 0}}))
        .await,
        submit(json!({"type": "sleep", "payload": {"ms": 200}})).await,
    ];
    for id in &ids {
        let done = wait_for(&format!("task {id} to complete"), async || {
            let t = get_json(&http, &format!("{base}/tasks/{id}")).await?;
            (t["status"] == "completed").then_some(t)
        })
        .await;
        let attempts = done["attempts"].as_array().unwrap();
        assert_eq!(
            attempts.last().map(|a| &a["outcome"]),
            Some(&json!("completed")),
            "{done}"
        );
    }
    // The walk-through's counts, and every service still up.
    let q = get_json(&http, &format!("{base}/queues/default"))
        .await
        .expect("the queue's stats");
    assert_eq!(q["counts"]["completed"], 4, "{q}");
    assert_eq!(q["totals"]["failed"], 2, "{q}");
    for p in &mut procs {
        p.assert_running("compose service");
    }
}
