//! The admin commands (`orq tasks`, `dlq`, `queues`, `tenants`) against a live `orq serve` with
//! API keys, run as a user runs them: the `orq` binary with `ORQ_URL` / `ORQ_API_KEY` or their
//! flags. Each command's effect is checked through the HTTP API, and each exit code is reached:
//! 0 done, 1 refused, 2 usage, 3 not found, 4 denied, 5 unreachable, 6 incomplete.

mod roles;

use roles::*;
use serde_json::{json, Value};
use std::process::{Command, Output, Stdio};

/// A live `orq serve` with an admin key and a tenant key (tenant `acme`).
struct Live {
    _serve: Proc,
    _dir: tempfile::TempDir,
    url: String,
    admin: String,
    tenant: String,
    http: reqwest::Client,
}

impl Live {
    async fn start() -> Live {
        let dir = tempfile::tempdir().unwrap();
        let (admin, a) = new_key(&["--admin"]);
        let (tenant, t) = new_key(&["--tenant", "acme"]);
        let keys = dir.path().join("keys.toml");
        std::fs::write(&keys, format!("{a}\n{t}\n")).unwrap();
        let listen = free_listen_addr();
        let serve = Proc::spawn(&[
            "serve",
            "--listen",
            &listen,
            "--api-keys",
            keys.to_str().unwrap(),
            "--no-dashboard-build",
        ]);
        let http = reqwest::Client::new();
        let url = format!("http://{listen}");
        wait_ready(&http, &format!("{url}/api/v1")).await;
        Live {
            _serve: serve,
            _dir: dir,
            url,
            admin,
            tenant,
            http,
        }
    }

    /// `orq ARGS` with ORQ_URL and the admin key in ORQ_API_KEY (unless `env` sets them).
    fn orq(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_orq"));
        c.args(args)
            .env("ORQ_URL", &self.url)
            .env("ORQ_API_KEY", &self.admin)
            .env("ORQ_LOG", "warn")
            .stdin(Stdio::null());
        for (k, v) in env {
            if v.is_empty() {
                c.env_remove(k);
            } else {
                c.env(k, v);
            }
        }
        c.output().expect("run orq")
    }

    /// `orq ARGS --output json`, which must succeed: its JSON.
    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["--output", "json"]);
        let o = self.orq(&all, &[]);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// `orq ARGS` must end with `code`; its stdout and stderr.
    fn expect(&self, code: i32, args: &[&str], env: &[(&str, &str)]) -> (String, String) {
        let o = self.orq(args, env);
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        assert_eq!(o.status.code(), Some(code), "{args:?}:\n{out}\n{err}");
        (out, err)
    }

    /// POST `body` to `path` of the API with the admin key.
    async fn post(&self, path: &str, body: Value) -> Value {
        self.post_with(path, &[], body).await
    }

    /// [`Live::post`] with `headers` too.
    async fn post_with(&self, path: &str, headers: &[(&str, &str)], body: Value) -> Value {
        let mut req = self
            .http
            .post(format!("{}/api/v1{path}", self.url))
            .bearer_auth(&self.admin);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let r = req.json(&body).send().await.unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r.json().await.unwrap()
    }

    /// Submit `n` tasks that fail once with no retry (dead at once), of `tenant`, in `queue`;
    /// wait until all are dead.
    async fn dead_tasks(&self, queue: &str, tenant: &str, n: usize) -> Vec<String> {
        let mut ids = Vec::new();
        for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
            let tasks: Vec<Value> = chunk
                .iter()
                .map(|_| {
                    json!({"queue": queue, "tenant": tenant, "type": "fail",
                           "payload": {"times": 1}, "max_retries": 0})
                })
                .collect();
            let v = self.post("/tasks/batch", json!({"tasks": tasks})).await;
            ids.extend(
                v["tasks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t["id"].as_str().unwrap().to_string()),
            );
        }
        self.wait_dead(queue, |d| d >= n as u64).await;
        ids
    }

    /// Wait until the queue's dead count satisfies `ok`.
    async fn wait_dead(&self, queue: &str, ok: impl Fn(u64) -> bool) {
        wait_for("the dead count", async || {
            let v = self.json(&["queues", "stats", queue]);
            ok(v["counts"]["dead"].as_u64()?).then_some(v)
        })
        .await;
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

// Goal: every admin command does what it says, checked through the API, in tables and JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_commands_against_a_live_orq() {
    let live = Live::start().await;
    let ids = live.dead_tasks("mail", "t1", 3).await;
    live.dead_tasks("mail", "t2", 2).await;

    // Queues: the table and the JSON name the queue and its counts.
    let (table, _) = live.expect(0, &["queues", "list"], &[]);
    let row = table
        .lines()
        .find(|l| l.contains("mail"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.split_whitespace().any(|w| w == "5"), "5 dead: {row}");
    let qs = live.json(&["queues", "list"]);
    let mail = qs["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == "mail")
        .unwrap();
    assert_eq!(mail["counts"]["dead"], 5);

    // Tasks: get in both forms, a listing with a cursor.
    let t = live.json(&["tasks", "get", &ids[0], "--queue", "mail"]);
    assert_eq!(
        (t["id"].as_str(), t["status"].as_str()),
        (Some(ids[0].as_str()), Some("dead"))
    );
    let (table, _) = live.expect(0, &["tasks", "get", &ids[0], "-q", "mail"], &[]);
    assert!(
        table.contains("planned failure 1 (attempt 1)") && table.contains("OUTCOME"),
        "{table}"
    );
    let (page, _) = live.expect(
        0,
        &["tasks", "list", "--queue", "mail", "--limit", "2"],
        &[],
    );
    let more = page.lines().last().unwrap();
    assert!(
        more.starts_with("more: orq tasks list --queue mail --cursor "),
        "{page}"
    );
    let cursor = more.rsplit(' ').next().unwrap();
    let next = live.json(&[
        "tasks", "list", "--queue", "mail", "--limit", "2", "--cursor", cursor,
    ]);
    assert_eq!(next["tasks"].as_array().unwrap().len(), 2);
    let dead_t2 = live.json(&["dlq", "list", "--queue", "mail", "--tenant", "t2"]);
    assert_eq!(dead_t2["tasks"].as_array().unwrap().len(), 2);

    // DLQ: replay one by id, then every t1 task, then purge the rest.
    // (Named twice: counted once.)
    let v = live.json(&["dlq", "replay", "--queue", "mail", &ids[0], &ids[0]]);
    assert_eq!(v["replayed"], 1, "{v}");
    let v = live.json(&[
        "dlq", "replay", "--queue", "mail", "--all", "--tenant", "t1",
    ]);
    assert_eq!(v["replayed"], 2, "the other two of t1: {v}");
    let (said, _) = live.expect(0, &["dlq", "purge", "--queue", "mail", "--all"], &[]);
    assert_eq!(said.trim(), "purged 2 dead task(s) of queue mail");
    live.wait_dead("mail", |d| d == 0).await;
    for id in &ids {
        let t = wait_for("a replayed task to complete", async || {
            let t = live.json(&["tasks", "get", id, "--queue", "mail"]);
            (t["status"] == "completed").then_some(t)
        })
        .await;
        assert_eq!(t["replays"], 1, "{t}");
    }

    // Tenants: set, read back (table and JSON), clear.
    let v = live.json(&[
        "tenants",
        "set",
        "--queue",
        "mail",
        "t2",
        "--weight",
        "2.5",
        "--max-inflight",
        "3",
    ]);
    assert_eq!(
        (v["weight"].as_f64(), v["max_inflight"].as_u64()),
        (Some(2.5), Some(3))
    );
    let (table, _) = live.expect(0, &["tenants", "get", "--queue", "mail", "t2"], &[]);
    let row = table.lines().find(|l| l.contains("t2")).unwrap();
    assert!(row.contains("2.5") && row.contains(" 3 "), "{table}");
    let v = live.json(&[
        "tenants",
        "set",
        "--queue",
        "mail",
        "t2",
        "--clear",
        "weight,max-inflight",
    ]);
    assert_eq!(
        (v["weight"].as_f64(), v["max_inflight"].as_u64()),
        (Some(1.0), None),
        "{v}"
    );
    let all = live.json(&["tenants", "get", "--queue", "mail"]);
    let names: Vec<&str> = all["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["tenant"].as_str())
        .collect();
    assert_eq!(names, ["t1", "t2"]);

    // Queues: pause (a task waits), drain times out (6), cancel it, resume.
    live.expect(0, &["queues", "pause", "mail"], &[]);
    assert_eq!(live.json(&["queues", "stats", "mail"])["paused"], true);
    let waiting = live
        .post(
            "/tasks",
            json!({"queue": "mail", "type": "echo", "payload": 1}),
        )
        .await;
    let id = waiting["id"].as_str().unwrap();
    let (_, err) = live.expect(6, &["queues", "drain", "mail", "--timeout-ms", "200"], &[]);
    let (out, _) = live.expect(
        6,
        &["queues", "drain", "mail", "--timeout-ms", "0", "-o", "json"],
        &[],
    );
    assert!(
        err.contains("not drained after 200 ms: 1 task(s) left"),
        "{err}"
    );
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap_or_default()["remaining"],
        1,
        "{out}"
    );
    let v = live.json(&["tasks", "cancel", id, "--queue", "mail"]);
    assert_eq!(v["status"], "cancelled");
    live.expect(0, &["queues", "resume", "mail"], &[]);
    assert_eq!(live.json(&["queues", "stats", "mail"])["paused"], false);
    live.expect(0, &["queues", "drain", "mail"], &[]);

    // Deleting a queue: refused (1) while it holds work, then done; gone from the list (3).
    let spare = live
        .post(
            "/tasks",
            json!({"queue": "spare", "payload": 1, "delay_ms": 600_000}),
        )
        .await;
    let (_, err) = live.expect(1, &["queues", "delete", "spare"], &[]);
    assert!(err.contains("1 scheduled"), "{err}");
    let spare_id = spare["id"].as_str().unwrap();
    live.json(&["tasks", "cancel", spare_id, "--queue", "spare"]);
    let (out, _) = live.expect(0, &["queues", "delete", "spare"], &[]);
    assert!(
        out.contains("queue spare deleted (1 finished task(s) with it)"),
        "{out}"
    );
    live.expect(3, &["queues", "stats", "spare"], &[]);

    // A task submitted under a trace context shows it; one without has no such rows.
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let traced = live
        .post_with(
            "/tasks",
            &[("traceparent", tp), ("tracestate", "vendor=1")],
            json!({"queue": "traced", "type": "sleep", "payload": {"ms": 1}}),
        )
        .await;
    let id = traced["id"].as_str().unwrap();
    let (table, _) = live.expect(0, &["tasks", "get", id, "-q", "traced"], &[]);
    let row = |k: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(k))
    };
    assert!(
        row("traceparent").is_some_and(|l| l.contains(tp)),
        "{table}"
    );
    assert!(
        row("tracestate").is_some_and(|l| l.contains("vendor=1")),
        "{table}"
    );
    let (table, _) = live.expect(0, &["tasks", "get", &ids[1], "-q", "mail"], &[]);
    assert!(!table.contains("traceparent"), "{table}");
}

// Goal: the exit codes scripts rely on, each with the API's error code in the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_name_what_went_wrong() {
    let live = Live::start().await;
    live.dead_tasks("codes", "acme", 1).await;

    // 3: not found, for a task, a dead task among others (the others are still replayed), a
    // tenant.
    let (_, err) = live.expect(
        3,
        &["tasks", "get", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "-q", "codes"],
        &[],
    );
    assert!(
        err.starts_with("error: not_found: ") && err.contains("(HTTP 404)"),
        "{err}"
    );
    let dead = live.json(&["dlq", "list", "--queue", "codes"]);
    let id = dead["tasks"][0]["id"].as_str().unwrap().to_string();
    let (out, err) = live.expect(
        3,
        &[
            "dlq",
            "replay",
            "-q",
            "codes",
            "01ARZ3NDEKTSV4RRFFQ69G5FAV",
            &id,
        ],
        &[],
    );
    assert!(out.contains("replayed 1 dead task(s)"), "{out}");
    assert!(
        err.contains("not_found") && err.contains("01ARZ3NDEKTSV4RRFFQ69G5FAV"),
        "{err}"
    );
    live.expect(3, &["tenants", "get", "-q", "codes", "nobody"], &[]);

    // 4: no key, a wrong key, a tenant key asking for an admin's right.
    let (_, err) = live.expect(4, &["queues", "list"], &[("ORQ_API_KEY", "")]);
    assert!(
        err.contains("unauthorized") && err.contains("HTTP 401"),
        "{err}"
    );
    live.expect(4, &["queues", "list", "--api-key", "orq_not_a_key"], &[]);
    let (_, err) = live.expect(
        4,
        &["queues", "pause", "codes"],
        &[("ORQ_API_KEY", &live.tenant)],
    );
    assert!(
        err.contains("forbidden") && err.contains("HTTP 403"),
        "{err}"
    );

    // 1: refused input, named by the API.
    let (_, err) = live.expect(
        1,
        &["tenants", "set", "-q", "codes", "acme", "--weight", "5000"],
        &[],
    );
    assert!(
        err.contains("HTTP 422") || err.contains("HTTP 400"),
        "{err}"
    );
    assert!(err.contains("weight"), "{err}");

    // 2: usage (clap's, and ours).
    live.expect(2, &["dlq", "replay", "-q", "codes"], &[]);
    live.expect(2, &["dlq", "purge", "--all", "some-id"], &[]);
    live.expect(2, &["tenants", "set", "acme"], &[]);
    live.expect(2, &["queues", "list", "--url", "ftp://x"], &[]);

    // 5: nothing listens there (the flag wins over ORQ_URL).
    let nowhere = format!("http://{}", free_listen_addr());
    let (_, err) = live.expect(5, &["queues", "list", "--url", &nowhere], &[]);
    assert!(
        err.contains("cannot reach orq") && err.contains("refused"),
        "{err}"
    );

    // 2: values with no JSON form, a setting both set and cleared, an empty id, a URL with a
    // query.
    for args in [
        &["tenants", "set", "-q", "codes", "acme", "--weight", "NaN"][..],
        &[
            "tenants",
            "set",
            "-q",
            "codes",
            "acme",
            "--rate-per-s",
            "inf",
        ],
        &[
            "tenants", "set", "-q", "codes", "acme", "--weight", "2", "--clear", "weight",
        ],
        &["tasks", "get", ""],
    ] {
        live.expect(2, args, &[]);
    }
    live.expect(
        2,
        &["queues", "list", "--url", &format!("{}?x=1", live.url)],
        &[],
    );

    // 5, not 3: a 404 that is not orq's (a wrong path) says nothing about what was named; a
    // password in --url is not printed.
    let wrong = format!("{}/foo", live.url);
    let (_, err) = live.expect(5, &["tasks", "get", &id, "--url", &wrong], &[]);
    assert!(err.contains("is --url an orq API?"), "{err}");
    let with_pw = wrong.replacen("http://", "http://user:topsecret@", 1);
    let (_, err) = live.expect(5, &["queues", "list", "--url", &with_pw], &[]);
    assert!(!err.contains("topsecret"), "{err}");

    // A key read from a file keeps its newline: it still works.
    let key = format!("{}\n", live.admin);
    live.expect(0, &["queues", "list"], &[("ORQ_API_KEY", &key)]);

    // --help lists the codes.
    let (help, _) = live.expect(0, &["dlq", "--help"], &[]);
    assert!(
        help.contains("Exit codes:") && help.contains("6  stopped before the end"),
        "{help}"
    );
}

// Goal: bulk replay and purge go past one page (1000) of dead tasks and count every task once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_replay_and_purge_page_through_the_dlq() {
    let live = Live::start().await;
    live.dead_tasks("bulk", "t", 1100).await;
    let v = live.json(&["dlq", "replay", "--queue", "bulk", "--all"]);
    assert_eq!(v["replayed"], 1100, "{v}");
    live.dead_tasks("bulk2", "t", 1100).await;
    let v = live.json(&[
        "dlq", "purge", "--queue", "bulk2", "--all", "--type", "fail",
    ]);
    assert_eq!(v["purged"], 1100, "{v}");
    assert_eq!(
        live.json(&["queues", "stats", "bulk2"])["counts"]["dead"],
        0
    );
    wait_for("the replayed tasks to complete", async || {
        let v = live.json(&["queues", "stats", "bulk"]);
        (v["counts"]["completed"] == 1100).then_some(v)
    })
    .await;
}
