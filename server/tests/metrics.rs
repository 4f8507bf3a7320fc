//! Prometheus metrics: the API's `/metrics` after a known workload, and `--metrics-listen` of
//! `orq worker` and `orq scheduler` processes. Every exposition is checked by Prometheus's own
//! `promtool check metrics` (Debian package `prometheus`), then its values are read back.

mod common;
mod roles;

use axum::http::{Method, StatusCode};
use common::TestApp;
use orq::testing::RedisServer;
use roles::{free_listen_addr, wait_for, Proc};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

/// Run `promtool check metrics` on `text`; panics with its output when it finds a problem (or
/// when promtool is missing: `apt-get install prometheus`).
fn promtool_check(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus) must be installed to test the metrics");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The samples of an exposition: `name{label="value",...}` (as written, labels in name order)
/// to value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').expect("a sample line");
            (k.to_string(), v.parse().expect("a sample value"))
        })
        .collect()
}

fn value(s: &BTreeMap<String, f64>, key: &str) -> f64 {
    *s.get(key)
        .unwrap_or_else(|| panic!("no sample {key}; have: {:?}", s.keys().collect::<Vec<_>>()))
}

async fn submit(app: &TestApp, body: Value) -> String {
    let (s, t) = app
        .call(Method::POST, "/api/v1/tasks", Some(&body.to_string()))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{t}");
    t["id"].as_str().unwrap().to_string()
}

async fn scrape(app: &TestApp) -> BTreeMap<String, f64> {
    let (s, text) = app.call_text(Method::GET, "/metrics", None).await;
    assert_eq!(s, StatusCode::OK, "{text}");
    promtool_check(&text);
    samples(&text)
}

// Goal: after a known workload, /metrics holds what happened, per queue and tenant, in a form
// promtool accepts, with tenant labels bounded. Method: on a private Redis with an in-process
// worker and scheduler, queue m1 gets 3 completing tasks of tenant acme, 1 dying one of tenant
// beta and 1 cancelled delayed one; queue m2 is paused with 2 tasks waiting; queue m3 is paused
// with 25 tenants' tasks waiting. Then every figure is read back from the exposition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_after_a_known_workload() {
    let app = TestApp::start(true, vec![]).await;
    let mut done = Vec::new();
    for _ in 0..3 {
        done.push(
            submit(
                &app,
                json!({"queue": "m1", "tenant": "acme", "payload": {}}),
            )
            .await,
        );
    }
    let dead = submit(
        &app,
        json!({"queue": "m1", "tenant": "beta", "type": "fail", "payload": {"times": 1},
            "max_retries": 0}),
    )
    .await;
    let later = submit(
        &app,
        json!({"queue": "m1", "tenant": "beta", "payload": {}, "delay_ms": 3_600_000}),
    )
    .await;
    let (s, r) = app
        .call(Method::POST, &format!("/api/v1/tasks/{later}/cancel"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    for id in &done {
        app.wait_task(id, "completed", |t| t["status"] == "completed")
            .await;
    }
    app.wait_task(&dead, "dead", |t| t["status"] == "dead")
        .await;
    for q in ["m2", "m3"] {
        let (s, r) = app
            .call(Method::POST, &format!("/api/v1/queues/{q}/pause"), None)
            .await;
        assert_eq!(s, StatusCode::OK, "{r}");
    }
    for _ in 0..2 {
        submit(&app, json!({"queue": "m2", "tenant": "t", "payload": {}})).await;
    }
    for i in 0..25 {
        submit(
            &app,
            json!({"queue": "m3", "tenant": format!("t{i:02}"), "payload": {}}),
        )
        .await;
    }

    // The oldest ready task of m2 ages (by the store's clock) while the queue is paused.
    wait_for("m2's oldest ready task to age", async || {
        let s = scrape(&app).await;
        (value(&s, r#"orq_queue_oldest_ready_age_seconds{queue="m2"}"#) > 0.0)
            .then_some(Value::Null)
    })
    .await;
    let s = scrape(&app).await;
    let m1 = |name: &str| value(&s, &format!(r#"{name}{{queue="m1"}}"#));
    assert_eq!(m1("orq_tasks_submitted_total"), 5.0);
    assert_eq!(m1("orq_tasks_completed_total"), 3.0);
    assert_eq!(m1("orq_task_attempts_failed_total"), 1.0);
    assert_eq!(m1("orq_tasks_dead_total"), 1.0);
    assert_eq!(m1("orq_tasks_cancelled_total"), 1.0);
    assert_eq!(m1("orq_lease_expiries_total"), 0.0);
    assert_eq!(m1("orq_queue_paused"), 0.0);
    assert_eq!(
        m1("orq_queue_oldest_ready_age_seconds"),
        0.0,
        "nothing waits in m1"
    );
    for (status, n) in [
        ("completed", 3.0),
        ("dead", 1.0),
        ("cancelled", 1.0),
        ("queued", 0.0),
    ] {
        assert_eq!(
            value(&s, &format!(r#"orq_tasks{{queue="m1",status="{status}"}}"#)),
            n,
            "{status}"
        );
    }
    let tenant = |q: &str, t: &str, status: &str| {
        value(
            &s,
            &format!(r#"orq_tenant_tasks{{queue="{q}",status="{status}",tenant="{t}"}}"#),
        )
    };
    assert_eq!(tenant("m1", "acme", "completed"), 3.0);
    assert_eq!(tenant("m1", "beta", "dead"), 1.0);
    assert_eq!(tenant("m1", "beta", "cancelled"), 1.0);
    assert_eq!(value(&s, r#"orq_queue_paused{queue="m2"}"#), 1.0);
    assert_eq!(value(&s, r#"orq_tasks{queue="m2",status="queued"}"#), 2.0);

    // m3: 20 tenants by name with their own label, the other 5 summed as _other.
    let m3_tenants: std::collections::BTreeSet<&str> = s
        .keys()
        .filter_map(|k| k.strip_prefix(r#"orq_tenant_tasks{queue="m3",status="queued",tenant=""#))
        .map(|rest| rest.trim_end_matches("\"}"))
        .collect();
    assert_eq!(m3_tenants.len(), 21, "{m3_tenants:?}");
    assert!(m3_tenants.contains("t00") && m3_tenants.contains("t19"));
    assert!(!m3_tenants.contains("t20"), "past the cap: {m3_tenants:?}");
    assert_eq!(tenant("m3", "_other", "queued"), 5.0);
    assert_eq!(tenant("m3", "t00", "queued"), 1.0);

    // This process's own: its store calls, the leases it made, its worker's slots.
    assert!(
        value(
            &s,
            r#"orq_store_call_duration_seconds_count{script="enqueue"}"#
        ) >= 32.0
    );
    assert!(value(&s, r#"orq_task_wait_seconds_count{queue="m1"}"#) >= 4.0);
    assert!(value(&s, r#"orq_task_run_seconds_count{type="fail"}"#) >= 1.0);
    let slots = value(&s, r#"orq_worker_slots{state="busy"}"#)
        + value(&s, r#"orq_worker_slots{state="free"}"#);
    assert!(slots >= 4.0, "the fixture's pool has 4 slots: {slots}");
    assert!(value(&s, "orq_scheduler_pass_duration_seconds_count") >= 1.0);
}

// Goal: a worker's and a scheduler's own metrics are served at --metrics-listen, and a bad
// address stops orq at start. Method: real `orq worker` and `orq scheduler` processes on a
// private Redis; a task runs through the worker; both expositions pass promtool and count it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_and_scheduler_serve_their_metrics() {
    let redis = RedisServer::start();
    let url = redis.url();
    let (wm, sm) = (free_listen_addr(), free_listen_addr());
    let _worker = Proc::spawn(&[
        "worker",
        "--redis",
        &url,
        "--concurrency",
        "3",
        "--metrics-listen",
        &wm,
    ]);
    let _scheduler = Proc::spawn(&["scheduler", "--redis", &url, "--metrics-listen", &sm]);
    let client = orq::Client::new(
        std::sync::Arc::new(orq::RedisStore::connect(&url).await.unwrap()),
        std::sync::Arc::new(orq::SystemClock),
        std::sync::Arc::new(orq::Entropy::from_os()),
    );
    let sub = client
        .submit(orq::TaskSpec::new("{}").queue("pm"))
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let get = |addr: String| {
        let http = http.clone();
        async move {
            let r = http
                .get(format!("http://{addr}/metrics"))
                .send()
                .await
                .ok()?;
            (r.status() == 200).then_some(())?;
            r.text().await.ok()
        }
    };
    let worker_text = wait_for("the worker to run the task", async || {
        let text = get(wm.clone()).await?;
        let s = samples(&text);
        (s.get(r#"orq_task_run_seconds_count{type="echo"}"#) == Some(&1.0))
            .then_some(Value::String(text))
    })
    .await;
    let worker_text = worker_text.as_str().unwrap();
    promtool_check(worker_text);
    let s = samples(worker_text);
    assert_eq!(value(&s, r#"orq_worker_slots{state="busy"}"#), 0.0);
    assert_eq!(value(&s, r#"orq_worker_slots{state="free"}"#), 3.0);
    assert_eq!(value(&s, r#"orq_task_wait_seconds_count{queue="pm"}"#), 1.0);
    assert!(
        value(
            &s,
            r#"orq_store_call_duration_seconds_count{script="lease"}"#
        ) >= 1.0
    );
    let done = client.get(Some("pm"), &sub.task.id).await.unwrap();
    assert_eq!(done.status, orq::Status::Completed);

    let sched_text = wait_for("a scheduler pass", async || {
        let text = get(sm.clone()).await?;
        let s = samples(&text);
        (s.get("orq_scheduler_pass_duration_seconds_count")? >= &1.0).then_some(Value::String(text))
    })
    .await;
    promtool_check(sched_text.as_str().unwrap());

    // An address that cannot be bound stops the worker at start, with exit code 2.
    let out = Command::new(env!("CARGO_BIN_EXE_orq"))
        .args(["worker", "--redis", &url, "--metrics-listen", "256.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--metrics-listen"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The directory `deploy/` of the repository.
fn deploy_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// Run `promtool <args>` in `dir`; panics with its output unless it succeeds.
fn promtool(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool (Debian package prometheus) must be installed");
    assert!(
        out.status.success(),
        "promtool {args:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `orq_*` words of `text` (metric names, a histogram's `_bucket`, `_sum` and `_count`
/// series named by their family).
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("orq_"))
        .map(|w| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| w.strip_suffix(s))
                .unwrap_or(w)
                .to_string()
        })
        .collect()
}

// Goal: the alert rules, the Prometheus configuration and the Grafana dashboard under deploy/
// are valid and query only metrics orq exports. Method: promtool checks the rules and the
// configuration and runs the rules' unit tests (orq-alerts.test.yml: each alert fires on its
// series with its annotations, and not before its `for`); the dashboard JSON must be what
// generate.py writes; every orq_* name in the rules and the dashboard must be a metric that
// orq's sources define.
#[test]
fn deploy_files_pass_promtool_and_name_real_metrics() {
    let prom = deploy_dir().join("prometheus");
    promtool(&prom, &["check", "rules", "orq-alerts.yml"]);
    promtool(&prom, &["test", "rules", "orq-alerts.test.yml"]);
    promtool(&prom, &["check", "config", "prometheus.yml"]);

    let grafana = deploy_dir().join("grafana");
    let generated = Command::new("python3")
        .args([
            "-c",
            "import json, generate; print(json.dumps(generate.dashboard(), indent=2))",
        ])
        .current_dir(&grafana)
        .output()
        .expect("python3");
    assert!(generated.status.success(), "{generated:?}");
    let dashboard = std::fs::read_to_string(grafana.join("orq-dashboard.json")).unwrap();
    assert_eq!(
        String::from_utf8(generated.stdout).unwrap(),
        dashboard,
        "deploy/grafana/orq-dashboard.json is not generate.py's output: run python3 deploy/grafana/generate.py"
    );

    let sources = [
        include_str!("../../engine/src/metrics.rs"),
        include_str!("../src/metrics.rs"),
    ];
    let defined: std::collections::BTreeSet<String> = sources
        .iter()
        .flat_map(|s| s.split('"').filter(|w| w.starts_with("orq_")))
        .map(str::to_string)
        .collect();
    assert!(defined.contains("orq_tasks") && defined.contains("orq_worker_slots"));
    let rules = std::fs::read_to_string(prom.join("orq-alerts.yml")).unwrap();
    let used: std::collections::BTreeSet<String> = metric_names(&rules)
        .into_iter()
        .chain(metric_names(&dashboard))
        .collect();
    let unknown: Vec<_> = used.difference(&defined).collect();
    assert!(unknown.is_empty(), "not orq metrics: {unknown:?}");
    // The dashboard shows every metric orq exports.
    let unshown: Vec<_> = defined
        .iter()
        .filter(|m| !metric_names(&dashboard).contains(*m))
        .collect();
    assert!(unshown.is_empty(), "metrics no panel shows: {unshown:?}");
}
