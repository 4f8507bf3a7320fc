//! The HTTP API end to end through the router, on a private Redis: the happy paths with real
//! workers, and every kind of bad input the issue names (each must be a typed 4xx, never a 500).
//!
//! Why this file is long (about 960 lines): it covers every route's happy path and bad inputs
//! (`bad_inputs_get_typed_errors` alone is about 165 lines). Each file under `tests/` is its own
//! binary linking the whole server, so the tests stay together instead of adding binaries.

mod common;

use axum::http::{Method, StatusCode};
use common::{code, message, TestApp};
use serde_json::{json, Value};

const POST: Method = Method::POST;
const GET: Method = Method::GET;

async fn submit(app: &TestApp, body: Value) -> Value {
    let (status, t) = app
        .call(POST, "/api/v1/tasks", Some(&body.to_string()))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{t}");
    t
}

fn id(t: &Value) -> String {
    t["id"].as_str().expect("task id").to_string()
}

// Goal: a submitted echo task runs on a worker and completes with its payload as result, and
// the task JSON has the documented fields and formats.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submitted_task_completes_with_its_result() {
    let app = TestApp::start(true, vec![]).await;
    let t = submit(&app, json!({"payload": {"hello": "world", "n": [1, 2.5]}})).await;
    for field in [
        "id",
        "queue",
        "tenant",
        "type",
        "payload",
        "priority",
        "status",
        "attempt",
        "max_retries",
        "run_at",
        "created_at",
        "updated_at",
        "lease",
        "last_error",
        "result",
    ] {
        assert!(t.get(field).is_some(), "task JSON lacks {field}: {t}");
    }
    assert_eq!(t["queue"], "default");
    assert_eq!(t["tenant"], "default");
    assert_eq!(t["type"], "echo");
    assert_eq!(t["status"], "queued");
    let created = t["created_at"].as_str().unwrap();
    assert!(
        created.ends_with('Z') && created.len() == 24,
        "RFC 3339 with ms: {created}"
    );
    let done = app
        .wait_task(&id(&t), "completed", |t| t["status"] == "completed")
        .await;
    assert_eq!(done["result"], json!({"hello": "world", "n": [1, 2.5]}));
    assert_eq!(done["attempt"], 1);
    assert!(done["lease"].is_null());
}

// Goal: backoff numbers are stored and answered exactly as sent, including values one float step
// from a default (which must not be mistaken for the default and dropped from the record).
// Method: submit backoffs whose multiplier and jitter need all 17 significant digits; compare the
// submit answer and a GET with what was sent, bit for bit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backoff_floats_round_trip_exactly() {
    let app = TestApp::start(false, vec![]).await;
    for (multiplier, jitter) in [
        (1.999_999_999_999_999_8_f64, 0.381_204_237_688_212_43_f64),
        (2.000_000_000_000_000_4, 0.999_999_999_999_999_9),
        (1.1, 0.200_000_000_000_000_04),
    ] {
        let body = json!({
            "payload": 1,
            "backoff": {"initial_ms": 10, "multiplier": multiplier, "max_ms": 1000, "jitter": jitter},
        });
        let t = submit(&app, body).await;
        let (status, got) = app
            .call(GET, &format!("/api/v1/tasks/{}", id(&t)), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{got}");
        for answer in [&t, &got] {
            assert_eq!(
                answer["backoff"]["multiplier"].as_f64(),
                Some(multiplier),
                "{answer}"
            );
            assert_eq!(
                answer["backoff"]["jitter"].as_f64(),
                Some(jitter),
                "{answer}"
            );
        }
    }
}

// Goal: the idempotency key returns the first task (200) instead of creating a second (201).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_key_returns_the_existing_task() {
    let app = TestApp::start(false, vec![]).await;
    let body = json!({"payload": 1, "idempotency_key": "order-42"}).to_string();
    let (s1, t1) = app.call(POST, "/api/v1/tasks", Some(&body)).await;
    let (s2, t2) = app.call(POST, "/api/v1/tasks", Some(&body)).await;
    assert_eq!(s1, StatusCode::CREATED);
    assert_eq!(s2, StatusCode::OK);
    assert_eq!(t1["id"], t2["id"]);
    assert_eq!(t2["idempotency_key"], "order-42");
}

// Goal: a batch is stored in one call and returned in order, saying per task whether it was
// created (a re-sent batch with idempotency keys answers 200 and marks every task as existing);
// one bad item rejects the whole batch and stores nothing; more than 1000 items is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_submit_is_all_or_nothing() {
    let app = TestApp::start(false, vec![]).await;
    let body = json!({"tasks": [
        {"payload": 1, "priority": 1},
        {"payload": 2, "tenant": "acme"},
        {"payload": 3, "delay_ms": 60000},
    ]});
    let (s, r) = app
        .call(POST, "/api/v1/tasks/batch", Some(&body.to_string()))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let tasks = r["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 3);
    assert_eq!(tasks[0]["payload"], 1);
    assert_eq!(tasks[1]["tenant"], "acme");
    assert_eq!(tasks[2]["status"], "scheduled");
    assert_eq!(r["created"], json!([true, true, true]));

    // Idempotency keys: a re-sent batch says which tasks already existed and returns those.
    let keyed = json!({"tasks": [
        {"payload": 10, "idempotency_key": "k-1"},
        {"payload": 11, "idempotency_key": "k-2"},
    ]});
    let (s, first) = app
        .call(POST, "/api/v1/tasks/batch", Some(&keyed.to_string()))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{first}");
    let (s, again) = app
        .call(POST, "/api/v1/tasks/batch", Some(&keyed.to_string()))
        .await;
    assert_eq!(s, StatusCode::OK, "nothing new stored: {again}");
    assert_eq!(again["created"], json!([false, false]));
    assert_eq!(again["tasks"][0]["id"], first["tasks"][0]["id"]);
    assert_eq!(again["tasks"][1]["id"], first["tasks"][1]["id"]);
    let mixed = json!({"tasks": [
        {"payload": 12, "idempotency_key": "k-1"},
        {"payload": 13, "idempotency_key": "k-3"},
    ]});
    let (s, mixed) = app
        .call(POST, "/api/v1/tasks/batch", Some(&mixed.to_string()))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{mixed}");
    assert_eq!(mixed["created"], json!([false, true]));
    assert_eq!(
        mixed["tasks"][0]["payload"], 10,
        "the existing task, not the new body"
    );

    let bad = json!({"tasks": [{"payload": 4}, {"payload": 5, "priority": 12}]});
    let (s, e) = app
        .call(POST, "/api/v1/tasks/batch", Some(&bad.to_string()))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(message(&e).starts_with("tasks[1].priority"), "{e}");
    let (_, page) = app.call(GET, "/api/v1/tasks?limit=100", None).await;
    assert_eq!(
        page["tasks"].as_array().unwrap().len(),
        6,
        "nothing of the bad batch stored"
    );

    let many: Vec<Value> = (0..1001).map(|i| json!({"payload": i})).collect();
    let (s, e) = app
        .call(
            POST,
            "/api/v1/tasks/batch",
            Some(&json!({"tasks": many}).to_string()),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    let (s, _) = app
        .call(POST, "/api/v1/tasks/batch", Some(r#"{"tasks": []}"#))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

// Goal: a failing task lands in the DLQ with its error, is listed there, is replayed and then
// completes; a dead task can be purged, after which it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_task_is_listed_replayed_and_purged() {
    let app = TestApp::start(true, vec![]).await;
    let t = submit(
        &app,
        json!({"type": "fail", "payload": {"times": 1}, "max_retries": 0}),
    )
    .await;
    let dead = app
        .wait_task(&id(&t), "dead", |t| t["status"] == "dead")
        .await;
    assert_eq!(dead["attempt"], 1);
    assert!(dead["last_error"]
        .as_str()
        .unwrap()
        .contains("planned failure"));
    let (s, dlq) = app.call(GET, "/api/v1/dlq", None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(dlq["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["id"] == t["id"]));

    let (s, r) = app
        .call(POST, &format!("/api/v1/dlq/{}/replay", id(&t)), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["replays"], 1);
    let done = app
        .wait_task(&id(&t), "completed", |t| t["status"] == "completed")
        .await;
    let attempts = done["attempts"].as_array().unwrap();
    assert_eq!(
        attempts.iter().map(|a| &a["outcome"]).collect::<Vec<_>>(),
        [&json!("failed"), &json!("completed")],
        "the failed attempt kept, the successful one added: {done}"
    );

    // Replay of a task that is not dead is a conflict.
    let (s, _) = app
        .call(POST, &format!("/api/v1/dlq/{}/replay", id(&t)), None)
        .await;
    assert_eq!(s, StatusCode::CONFLICT);

    let p = submit(
        &app,
        json!({"type": "fail", "payload": {"permanent": true}}),
    )
    .await;
    app.wait_task(&id(&p), "dead", |t| t["status"] == "dead")
        .await;
    let (s, _) = app
        .call(Method::DELETE, &format!("/api/v1/dlq/{}", id(&p)), None)
        .await;
    assert_eq!(s, StatusCode::OK);
    let (s, e) = app
        .call(GET, &format!("/api/v1/tasks/{}", id(&p)), None)
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(code(&e), "not_found");
    // Purging a task that is not dead is refused.
    let (s, _) = app
        .call(Method::DELETE, &format!("/api/v1/dlq/{}", id(&t)), None)
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
}

// Goal: bulk replay puts back the dead tasks that match its filter, bounded by its limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_replay_filters_by_tenant_and_is_bounded() {
    let app = TestApp::start(true, vec![]).await;
    let mut ids = Vec::new();
    for tenant in ["a", "a", "a", "b"] {
        let t = submit(
            &app,
            json!({"type": "fail", "tenant": tenant, "payload": {"times": 1},
            "max_retries": 0}),
        )
        .await;
        ids.push(id(&t));
    }
    for i in &ids {
        app.wait_task(i, "dead", |t| t["status"] == "dead").await;
    }
    let (s, r) = app
        .call(
            POST,
            "/api/v1/dlq/replay",
            Some(r#"{"tenant": "a", "limit": 2}"#),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["replayed"], 2);
    assert_eq!(r["more"], true);
    let (_, r) = app
        .call(POST, "/api/v1/dlq/replay", Some(r#"{"tenant": "a"}"#))
        .await;
    assert_eq!(r["replayed"], 1);
    let (_, dlq) = app.call(GET, "/api/v1/dlq?tenant=b", None).await;
    assert_eq!(
        dlq["tasks"].as_array().unwrap().len(),
        1,
        "tenant b untouched"
    );
    let (s, _) = app
        .call(POST, "/api/v1/dlq/replay", Some(r#"{"limit": 0}"#))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // Every field is optional: no body at all is `{}` (the default queue, every tenant).
    let (s, r) = app.call(POST, "/api/v1/dlq/replay", None).await;
    assert_eq!((s, &r["replayed"]), (StatusCode::OK, &json!(1)), "{r}");
    let (s, r) = app.call(POST, "/api/v1/dlq/replay", Some(" \n")).await;
    assert_eq!((s, &r["replayed"]), (StatusCode::OK, &json!(0)), "{r}");
    let (s, r) = app.call(POST, "/api/v1/dlq/replay", Some("null")).await;
    assert_eq!((s, &r["replayed"]), (StatusCode::OK, &json!(0)), "{r}");
    let (s, e) = app.call(POST, "/api/v1/dlq/replay", Some("[]")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
}

// Goal: cancel works on queued and scheduled tasks, is idempotent, and a finished task answers 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_queued_scheduled_and_finished_tasks() {
    let app = TestApp::start(false, vec![]).await;
    let q = submit(&app, json!({"payload": 1})).await;
    let s = submit(&app, json!({"payload": 2, "delay_ms": 60000})).await;
    for t in [&q, &s] {
        let (st, c) = app
            .call(POST, &format!("/api/v1/tasks/{}/cancel", id(t)), None)
            .await;
        assert_eq!(st, StatusCode::OK, "{c}");
        assert_eq!(c["status"], "cancelled");
        let (st, c) = app
            .call(POST, &format!("/api/v1/tasks/{}/cancel", id(t)), None)
            .await;
        assert_eq!(st, StatusCode::OK, "cancelling twice is not an error: {c}");
    }
    // Complete one with a worker, then cancel it: 409.
    let app2 = TestApp::start(true, vec![]).await;
    let t = {
        let (st, t) = app2
            .call(POST, "/api/v1/tasks", Some(r#"{"payload": 3}"#))
            .await;
        assert_eq!(st, StatusCode::CREATED);
        t
    };
    app2.wait_task(&id(&t), "completed", |t| t["status"] == "completed")
        .await;
    let (st, e) = app2
        .call(POST, &format!("/api/v1/tasks/{}/cancel", id(&t)), None)
        .await;
    assert_eq!(st, StatusCode::CONFLICT, "{e}");
    assert_eq!(code(&e), "conflict");
}

// Goal: listing pages through a status with a cursor, each task exactly once; queue stats count
// per status and per tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_pages_and_queue_stats() {
    let app = TestApp::start(false, vec![]).await;
    let tasks: Vec<Value> = (0..25)
        .map(|i| json!({"payload": i, "tenant": if i % 2 == 0 { "even" } else { "odd" }}))
        .collect();
    let (s, _) = app
        .call(
            POST,
            "/api/v1/tasks/batch",
            Some(&json!({"tasks": tasks}).to_string()),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let mut seen = std::collections::HashSet::new();
    let mut cursor = String::new();
    let mut pages = 0;
    loop {
        let uri = format!("/api/v1/tasks?status=queued&limit=7&cursor={cursor}");
        let (s, page) = app.call(GET, &uri, None).await;
        assert_eq!(s, StatusCode::OK, "{page}");
        for t in page["tasks"].as_array().unwrap() {
            assert!(
                seen.insert(t["id"].as_str().unwrap().to_string()),
                "duplicate {t}"
            );
        }
        pages += 1;
        assert!(pages < 20, "paging does not end");
        match page["next_cursor"].as_str() {
            Some(c) => cursor = c.to_string(),
            None => break,
        }
    }
    assert_eq!(seen.len(), 25);
    let (_, odd) = app
        .call(GET, "/api/v1/tasks?tenant=odd&limit=100", None)
        .await;
    assert_eq!(odd["tasks"].as_array().unwrap().len(), 12);

    let (s, st) = app.call(GET, "/api/v1/queues/default", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(st["counts"]["queued"], 25);
    let tenants = st["tenants"].as_array().unwrap();
    assert_eq!(tenants.len(), 2);
    assert_eq!(tenants[0]["tenant"], "even");
    assert_eq!(tenants[0]["counts"]["queued"], 13);
    let (_, all) = app.call(GET, "/api/v1/queues", None).await;
    assert_eq!(all["queues"][0]["queue"], "default");
}

// Goal: health and readiness answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness() {
    let app = TestApp::start(false, vec![]).await;
    let (s, _) = app.call(GET, "/api/v1/healthz", None).await;
    assert_eq!(s, StatusCode::OK);
    let (s, r) = app.call(GET, "/api/v1/readyz", None).await;
    assert_eq!(s, StatusCode::OK, "{r}");
}

// Goal: every bad input the issue names gets its typed 4xx with a message naming the field, and
// never a 500 (the fixture asserts no 5xx on every call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_get_typed_errors() {
    let app = TestApp::start(false, vec!["http://127.0.0.1:9/".into()]).await;
    let cases: Vec<(&str, u16, &str)> = vec![
        (r#"{"payload": 1"#, 400, "request body"),
        ("", 400, "request body"),
        ("[]", 400, "request body"),
        ("not json", 400, "request body"),
        (r#"{"queue": "q"}"#, 400, "payload"),
        (r#"{"payload": 1, "colour": "red"}"#, 400, "colour"),
        (r#"{"payload": 1, "priority": 10}"#, 400, "priority"),
        (r#"{"payload": 1, "priority": -1}"#, 400, "priority"),
        (r#"{"payload": 1, "priority": 1.5}"#, 400, "priority"),
        (r#"{"payload": 1, "priority": "high"}"#, 400, "priority"),
        (r#"{"payload": 1, "max_retries": 101}"#, 400, "max_retries"),
        (r#"{"payload": 1, "lease_ms": 999}"#, 400, "lease_ms"),
        (r#"{"payload": 1, "lease_ms": 3600001}"#, 400, "lease_ms"),
        (
            r#"{"payload": 1, "delay_ms": 40000000000}"#,
            400,
            "delay_ms",
        ),
        (
            r#"{"payload": 1, "delay_ms": 99999999999999999999999}"#,
            400,
            "delay_ms",
        ),
        (r#"{"payload": 1, "run_at": "tomorrow"}"#, 400, "run_at"),
        (
            r#"{"payload": 1, "run_at": "2999-01-01T00:00:00Z"}"#,
            400,
            "run_at",
        ),
        (
            r#"{"payload": 1, "delay_ms": 5, "run_at": "2020-01-01T00:00:00Z"}"#,
            400,
            "delay_ms",
        ),
        (r#"{"payload": 1, "timeout_ms": 0}"#, 400, "timeout_ms"),
        (r#"{"payload": 1, "queue": "a b"}"#, 400, "queue"),
        (r#"{"payload": 1, "queue": "{x}"}"#, 400, "queue"),
        (r#"{"payload": 1, "queue": ""}"#, 400, "queue"),
        (r#"{"payload": 1, "tenant": "a:b"}"#, 400, "tenant"),
        (r#"{"payload": 1, "type": "x*"}"#, 400, "type"),
        (
            r#"{"payload": 1, "idempotency_key": "{k}"}"#,
            400,
            "idempotency_key",
        ),
        (
            r#"{"payload": 1, "backoff": {"jitter": 2}}"#,
            400,
            "backoff.jitter",
        ),
        (
            r#"{"payload": 1, "backoff": {"multiplier": 0.5}}"#,
            400,
            "backoff.multiplier",
        ),
        (r#"{"payload": 1, "backoff": {"speed": 1}}"#, 400, "speed"),
        (
            r#"{"type": "http", "payload": {"url": "http://127.0.0.1:10/x"}}"#,
            422,
            "payload.url",
        ),
        (
            r#"{"type": "http", "payload": {"url": "http://127.0.0.1:9/x", "method": "GET"}}"#,
            422,
            "method",
        ),
        (
            r#"{"type": "sleep", "payload": {"ms": "long"}}"#,
            422,
            "payload.ms: invalid type: string \"long\", expected u64 (task type sleep)",
        ),
        // Named by field and by what it expects, never by a Rust type.
        (
            r#"{"type": "sleep", "payload": "abc"}"#,
            422,
            "payload: invalid type: string \"abc\", expected an object {\"ms\": <milliseconds>}",
        ),
        (
            r#"{"type": "fail", "payload": true}"#,
            422,
            "payload: invalid type: boolean `true`, expected an object {\"times\"",
        ),
        (
            r#"{"type": "fail", "payload": {"times": -1}}"#,
            422,
            "payload.times: invalid value: integer `-1`",
        ),
        (
            r#"{"type": "http", "payload": 7}"#,
            422,
            "payload: invalid type: integer `7`, expected an object {\"url\"",
        ),
        (
            r#"{"type": "http", "payload": {"uri": "x"}}"#,
            422,
            "payload.uri: unknown field `uri`, expected one of `url`",
        ),
    ];
    for (body, want, mentions) in cases {
        let (s, e) = app.call(POST, "/api/v1/tasks", Some(body)).await;
        assert_eq!(s.as_u16(), want, "{body} -> {e}");
        assert!(
            message(&e).contains(mentions),
            "{body}: message {:?} should mention {mentions}",
            message(&e)
        );
        assert!(!code(&e).is_empty(), "{body}: typed error body: {e}");
        assert!(
            !message(&e).contains("Payload"),
            "{body}: names a Rust type: {e}"
        );
    }
    // An allowed http task is accepted.
    let (s, _) = app
        .call(
            POST,
            "/api/v1/tasks",
            Some(r#"{"type": "http", "payload": {"url": "http://127.0.0.1:9/x"}}"#),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);

    // Payload just over 1 MiB: 413. Body over the route limit: 413.
    let big = format!(r#"{{"payload": "{}"}}"#, "x".repeat(1 << 20));
    let (s, e) = app.call(POST, "/api/v1/tasks", Some(&big)).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{e}");
    assert_eq!(code(&e), "payload_too_large");
    let huge = vec![b' '; (16 << 20) + 1];
    let (s, _) = app
        .call_bytes(POST, "/api/v1/tasks/batch", Some(huge))
        .await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    // Invalid UTF-8.
    let (s, _) = app
        .call_bytes(
            POST,
            "/api/v1/tasks",
            Some(b"{\"payload\": \"\xff\"}".to_vec()),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    // Unknown ids: 404, whether well-formed or not.
    for path in [
        "/api/v1/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "/api/v1/tasks/nope",
        "/api/v1/tasks/..%2F..%2Fetc",
    ] {
        let (s, e) = app.call(GET, path, None).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{path}: {e}");
    }
    for (m, path) in [
        (POST, "/api/v1/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV/cancel"),
        (POST, "/api/v1/dlq/01ARZ3NDEKTSV4RRFFQ69G5FAV/replay"),
        (Method::DELETE, "/api/v1/dlq/01ARZ3NDEKTSV4RRFFQ69G5FAV"),
    ] {
        let (s, _) = app.call(m, path, None).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{path}");
    }
    // Query parameters.
    for (path, mentions) in [
        ("/api/v1/tasks?status=lost", "status"),
        ("/api/v1/tasks?limit=0", "limit"),
        ("/api/v1/tasks?limit=abc", "limit"),
        ("/api/v1/tasks?limit=1001", "limit"),
        ("/api/v1/tasks?cursor=zzz", "cursor"),
        ("/api/v1/tasks?cursor=9:0:0", "cursor"),
        ("/api/v1/tasks?queue=%7Bq%7D", "queue"),
        ("/api/v1/tasks?sort=asc", "sort"),
        (
            "/api/v1/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV?queue=a%20b",
            "queue",
        ),
        ("/api/v1/dlq?status=queued", "status"),
        ("/api/v1/queues/a%20b", "queue"),
    ] {
        let (s, e) = app.call(GET, path, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{path}: {e}");
        assert!(message(&e).contains(mentions), "{path}: {e}");
    }
    let (s, _) = app.call(GET, "/api/v1/queues/never-used", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, e) = app.call(Method::PUT, "/api/v1/tasks", None).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED, "{e}");
    assert_eq!(code(&e), "method_not_allowed");
    let (s, e) = app.call(GET, "/api/v2/whatever", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(code(&e), "not_found");
}

// Goal: the http handler succeeds on 2xx with status and body as result, retries 5xx, and sends
// other 4xx and redirects straight to the DLQ. Method: a local axum server answers by path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_handler_outcomes_follow_the_status() {
    use axum::routing::post;
    let hook = axum::Router::new()
        .route(
            "/ok",
            post(|body: String| async move { (StatusCode::OK, format!("got {body}")) }),
        )
        .route(
            "/boom",
            post(|| async { StatusCode::INTERNAL_SERVER_ERROR }),
        )
        .route("/gone", post(|| async { StatusCode::NOT_FOUND }))
        .route(
            "/moved",
            post(|| async { (StatusCode::FOUND, [("location", "http://127.0.0.1:9/")]) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, hook).await });
    let prefix = format!("http://{addr}/");
    let app = TestApp::start(true, vec![prefix.clone()]).await;
    let task = |path: &str| {
        json!({"type": "http", "max_retries": 1, "backoff": {"initial_ms": 10, "jitter": 0},
            "payload": {"url": format!("{prefix}{path}"), "body": {"k": 1}}})
    };
    let ok = submit(&app, task("ok")).await;
    let boom = submit(&app, task("boom")).await;
    let gone = submit(&app, task("gone")).await;
    let moved = submit(&app, task("moved")).await;
    let t = app
        .wait_task(&id(&ok), "completed", |t| t["status"] == "completed")
        .await;
    assert_eq!(
        t["result"],
        json!({"status": 200, "body": r#"got {"k":1}"#})
    );
    let t = app
        .wait_task(&id(&boom), "dead", |t| t["status"] == "dead")
        .await;
    assert_eq!(t["attempt"], 2, "5xx is retried: {t}");
    let t = app
        .wait_task(&id(&gone), "dead", |t| t["status"] == "dead")
        .await;
    assert_eq!(t["attempt"], 1, "404 is permanent: {t}");
    let t = app
        .wait_task(&id(&moved), "dead", |t| t["status"] == "dead")
        .await;
    assert_eq!(t["attempt"], 1, "redirects are not followed: {t}");
    assert!(t["last_error"].as_str().unwrap().contains("redirect"));
}

// Goal: payloads come back byte for byte from every route that shows them (single submit,
// get by id, batch, listing), however unusual their formatting: emoji (raw, as escaped
// surrogate pairs, joined sequences and flags), every JSON escape, NUL and control characters
// as escapes, combining marks, right-to-left text, a BOM and noncharacters inside strings, huge
// integers; and a worker's echo result is the same JSON value. Payloads no reader could parse
// are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_round_trip_byte_for_byte_everywhere() {
    let app = TestApp::start(true, vec![]).await;
    let odd = [
        r#"{"b":1,"a":2}"#,
        r#"123456789012345678901234567890"#,
        r#"{"dup":1,"dup":2}"#,
        r#""\u00e9 😀 é""#,
        r#"[1E2, -0, 1.5e-300, {"x": null}]"#,
        r#""😀👩‍👩‍👧‍👦🏳️‍🌈🇫🇷 \ud83d\ude00 \uD83D\uDE00""#,
        r#""\"\\\/\b\f\n\r\t \u0000 \u001f \u007f""#,
        r#"{"é": "e\u0301", "עברית": "مرحبا", "中文": "漢字", "\u2028": "\u2029"}"#,
        "\"\u{feff}BOM \u{fffe} \u{ffff} \u{10ffff}\"",
        r#"  [ 1 ,	2 ]  "#,
        r#"{"n": -123456789012345678901234567890.5e-7}"#,
    ];
    let mut ids = Vec::new();
    for p in odd {
        let body = format!(r#"{{"payload": {p}}}"#);
        let (s, text) = app.call_text(POST, "/api/v1/tasks", Some(&body)).await;
        assert_eq!(s, StatusCode::CREATED, "{text}");
        assert!(
            text.contains(&format!(r#""payload":{}"#, p.trim())),
            "submit reply: {text}"
        );
        let t: Value = serde_json::from_str(&text).unwrap();
        ids.push(id(&t));
    }
    for (p, i) in odd.iter().zip(&ids) {
        let (_, text) = app
            .call_text(GET, &format!("/api/v1/tasks/{i}"), None)
            .await;
        assert!(
            text.contains(&format!(r#""payload":{}"#, p.trim())),
            "get {i}: {text}"
        );
        let done = app
            .wait_task(i, "completed", |t| t["status"] == "completed")
            .await;
        let want: Value = serde_json::from_str(p).unwrap();
        assert_eq!(done["result"], want, "echo of {p}");
    }
    let batch = format!(r#"{{"tasks": [{{"payload": {}}}]}}"#, odd[0]);
    let (_, text) = app
        .call_text(POST, "/api/v1/tasks/batch", Some(&batch))
        .await;
    assert!(
        text.contains(&format!(r#""payload":{}"#, odd[0])),
        "batch reply: {text}"
    );
    let (s, text) = app.call_text(GET, "/api/v1/tasks?limit=100", None).await;
    assert_eq!(s, StatusCode::OK);
    for p in odd {
        assert!(
            text.contains(&format!(r#""payload":{}"#, p.trim())),
            "listing lacks {p}: {text}"
        );
    }
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    for bad in [r#"{"e": 1e400}"#, r#""\udc00""#, deep.as_str()] {
        let (s, e) = app
            .call(
                POST,
                "/api/v1/tasks",
                Some(&format!(r#"{{"payload": {bad}}}"#)),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {e}");
        assert!(
            message(&e).starts_with("payload") || message(&e).starts_with("request body"),
            "{e}"
        );
    }
}

// Goal: the second round of bad inputs found by trying to break the API: trailing garbage,
// non-object bodies, query strings on routes without parameters, framing headers and huge URLs
// in http tasks, bad path encodings; lowercase ids still name their task; idempotency keys are
// scoped by tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_bad_inputs_and_tenant_scoped_idempotency() {
    let app = TestApp::start(false, vec!["http://127.0.0.1:9/".into()]).await;
    for body in [r#"{"payload": 1}trailing"#, "[1]", "1", r#""x""#] {
        let (s, e) = app.call(POST, "/api/v1/tasks", Some(body)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {e}");
        assert!(message(&e).starts_with("request body"), "{body}: {e}");
    }
    let (s, _) = app
        .call(
            POST,
            "/api/v1/tasks/batch",
            Some(r#"{"tasks": [{"payload": 1}]} x"#),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    for (m, path) in [
        (POST, "/api/v1/tasks?queue=other"),
        (GET, "/api/v1/queues/default?foo=1"),
        (GET, "/api/v1/queues?x=1"),
    ] {
        let body = (m == POST).then_some(r#"{"payload": 1}"#);
        let (s, e) = app.call(m, path, body).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{path}: {e}");
        assert!(message(&e).starts_with("query"), "{e}");
    }
    // A bad name in a query reads as in a body: the parameter, then the rule (no extractor
    // wording between them).
    let (s, e) = app.call(GET, "/api/v1/tasks?queue=bad%20name", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    assert!(message(&e).starts_with("query: queue: "), "{e}");
    for headers in [
        r#"{"Host": "evil.example"}"#,
        r#"{"content-length": "0"}"#,
        r#"{"Transfer-Encoding": "chunked"}"#,
        r#"{"X-Orq-Epoch": "9"}"#,
    ] {
        let body = format!(
            r#"{{"type": "http", "payload": {{"url": "http://127.0.0.1:9/h", "headers": {headers}}}}}"#
        );
        let (s, e) = app.call(POST, "/api/v1/tasks", Some(&body)).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{headers}: {e}");
        assert!(message(&e).contains("payload.headers"), "{e}");
    }
    let long = format!(
        r#"{{"type": "http", "payload": {{"url": "http://127.0.0.1:9/{}"}}}}"#,
        "a".repeat(3000)
    );
    let (s, e) = app.call(POST, "/api/v1/tasks", Some(&long)).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    let (s, e) = app.call(GET, "/api/v1/tasks/%FF%FE", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(code(&e), "not_found", "a JSON error: {e}");

    let t = submit(&app, json!({"payload": 1})).await;
    let (s, got) = app
        .call(
            GET,
            &format!("/api/v1/tasks/{}", id(&t).to_lowercase()),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "ULIDs are case-insensitive: {got}");
    assert_eq!(got["id"], t["id"]);

    let a = submit(
        &app,
        json!({"payload": "a", "tenant": "t1", "idempotency_key": "k1"}),
    )
    .await;
    let b = submit(
        &app,
        json!({"payload": "b", "tenant": "t2", "idempotency_key": "k1"}),
    )
    .await;
    assert_ne!(
        a["id"], b["id"],
        "another tenant's key never returns this tenant's task"
    );
    assert_eq!(b["payload"], "b");
}

// Goal: the tenancy routes: tenant limits are set, shown and validated; max_queued answers 429
// with Retry-After; pause / resume / drain / settings work; bad input gets typed 4xx.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_limits_pause_resume_drain_and_admission() {
    let app = TestApp::start(false, vec![]).await;
    let put = |body: &'static str| {
        let app = &app;
        async move {
            app.call(
                Method::PUT,
                "/api/v1/queues/default/tenants/acme",
                Some(body),
            )
            .await
        }
    };
    let (s, t) = put(r#"{"weight": 2, "max_inflight": 3, "max_queued": 2, "rate_per_s": 5}"#).await;
    assert_eq!(s, StatusCode::OK, "{t}");
    assert_eq!(t["weight"], 2.0);
    assert_eq!(t["max_inflight"], 3);
    assert_eq!(t["burst"], 5, "burst defaults to the rate");
    for (body, field) in [
        (r#"{"weight": 0}"#, "weight"),
        (r#"{"weight": -1}"#, "weight"),
        (r#"{"max_inflight": 0}"#, "max_inflight"),
        (r#"{"rate_per_s": 1e9}"#, "rate_per_s"),
        (r#"{"burst": 0}"#, "burst"),
        (r#"{"colour": 1}"#, "colour"),
        (r#"{"max_queued": "many"}"#, "max_queued"),
    ] {
        let (s, e) = put(body).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {e}");
        assert!(message(&e).contains(field), "{body}: {e}");
    }
    let (s, _) = app
        .call(
            Method::PUT,
            "/api/v1/queues/default/tenants/a%20b",
            Some("{}"),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    for _ in 0..2 {
        let (s, _) = app
            .call(
                POST,
                "/api/v1/tasks",
                Some(r#"{"payload": 1, "tenant": "acme"}"#),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED);
    }
    let req = axum::http::Request::builder()
        .method(POST)
        .uri("/api/v1/tasks")
        .body(axum::body::Body::from(
            r#"{"payload": 1, "tenant": "acme"}"#,
        ))
        .unwrap();
    let resp = tower::ServiceExt::oneshot(app.router.clone(), req)
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(resp.headers()["retry-after"], "1");
    let (_, tenants) = app.call(GET, "/api/v1/queues/default/tenants", None).await;
    let acme = tenants["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tenant"] == "acme")
        .unwrap()
        .clone();
    assert_eq!(
        acme["counts"]["queued"], 2,
        "the refused submit stored nothing"
    );
    // Clearing a limit with null.
    let (s, t) = put(r#"{"max_queued": null}"#).await;
    assert_eq!(s, StatusCode::OK);
    assert!(t["max_queued"].is_null(), "{t}");

    let (s, p) = app.call(POST, "/api/v1/queues/default/pause", None).await;
    assert_eq!((s, p["paused"].clone()), (StatusCode::OK, json!(true)));
    let (_, st) = app.call(GET, "/api/v1/queues/default", None).await;
    assert_eq!(st["paused"], true);
    let (s, _) = app.call(POST, "/api/v1/queues/default/resume", None).await;
    assert_eq!(s, StatusCode::OK);
    let (s, d) = app
        .call(POST, "/api/v1/queues/default/drain?timeout_ms=100", None)
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        d["drained"], false,
        "two tasks wait and no worker runs: {d}"
    );
    assert_eq!(d["remaining"], 2);
    let (s, _) = app
        .call(POST, "/api/v1/queues/default/drain?timeout_ms=999999", None)
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, st) = app
        .call(
            Method::PUT,
            "/api/v1/queues/default/settings",
            Some(r#"{"aging_step_ms": 500}"#),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{st}");
    assert_eq!(st["aging_step_ms"], 500);
    let (s, _) = app
        .call(
            Method::PUT,
            "/api/v1/queues/default/settings",
            Some(r#"{"aging_step_ms": -5}"#),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

// Goal: per-queue default task options fill the fields a submit leaves out (explicit fields
// win), are validated with field names, and can be removed with null.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_defaults_fill_missing_submit_fields() {
    let app = TestApp::start(false, vec![]).await;
    let settings = |body: &'static str| {
        let app = &app;
        async move {
            app.call(Method::PUT, "/api/v1/queues/jobs/settings", Some(body))
                .await
        }
    };
    let (s, st) = settings(
        r#"{"defaults": {"max_retries": 7, "lease_ms": 5000, "priority": 4, "backoff": {"initial_ms": 50}}}"#,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{st}");
    assert_eq!(st["defaults"]["max_retries"], 7);
    let t = submit(&app, json!({"queue": "jobs", "payload": 1})).await;
    assert_eq!(t["max_retries"], 7);
    assert_eq!(t["lease_ms"], 5000);
    assert_eq!(t["priority"], 4);
    assert_eq!(t["backoff"]["initial_ms"], 50);
    assert_eq!(
        t["backoff"]["multiplier"], 2.0,
        "unset default fields keep the built-in ones"
    );
    let t = submit(
        &app,
        json!({"queue": "jobs", "payload": 1, "max_retries": 1}),
    )
    .await;
    assert_eq!(t["max_retries"], 1, "explicit fields win");
    let t = submit(&app, json!({"queue": "other", "payload": 1})).await;
    assert_eq!(
        t["max_retries"], 3,
        "other queues keep the built-in defaults"
    );
    for (body, field) in [
        (r#"{"defaults": {"priority": 12}}"#, "defaults.priority"),
        (r#"{"defaults": {"lease_ms": 10}}"#, "defaults.lease_ms"),
        (r#"{"defaults": {"colour": 1}}"#, "colour"),
        (
            r#"{"defaults": {"backoff": {"jitter": 3}}}"#,
            "defaults.backoff.jitter",
        ),
    ] {
        let (s, e) = settings(body).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {e}");
        assert!(message(&e).contains(field), "{body}: {e}");
    }
    let (s, st) = settings(r#"{"defaults": null}"#).await;
    assert_eq!(s, StatusCode::OK);
    assert!(st["defaults"].is_null(), "{st}");
    let t = submit(&app, json!({"queue": "jobs", "payload": 1})).await;
    assert_eq!(t["max_retries"], 3, "defaults removed");
}

// Goal: a queue's tenants are read a bounded page at a time, so a queue of many tenants never
// costs one read (one script call that blocks Redis) per tenant. Method: 250 tenants with a task
// each on a paused queue; GET /queues/{q}/tenants pages through them by name, each once;
// GET /queues/{q} holds the first 100 and the total, GET /queues none and the total; bad page
// arguments are 400s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_are_read_a_bounded_page_at_a_time() {
    let app = TestApp::start(false, vec![]).await;
    let tasks: Vec<Value> = (0..250)
        .map(|i| json!({"queue": "many", "tenant": format!("t{i:03}"), "payload": {}}))
        .collect();
    let (s, r) = app
        .call(
            Method::POST,
            "/api/v1/tasks/batch",
            Some(&json!({"tasks": tasks}).to_string()),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");

    let mut seen = Vec::new();
    let mut uri = "/api/v1/queues/many/tenants".to_string();
    loop {
        let (s, page) = app.call(Method::GET, &uri, None).await;
        assert_eq!(s, StatusCode::OK, "{page}");
        assert_eq!(page["tenants_total"], 250);
        let names: Vec<String> = page["tenants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["tenant"].as_str().unwrap().to_string())
            .collect();
        assert!(names.len() <= 100, "a default page holds at most 100");
        seen.extend(names);
        match page["next_cursor"].as_str() {
            Some(c) => uri = format!("/api/v1/queues/many/tenants?cursor={c}"),
            None => break,
        }
    }
    let want: Vec<String> = (0..250).map(|i| format!("t{i:03}")).collect();
    assert_eq!(seen, want, "every tenant once, by name");

    let (s, page) = app
        .call(
            Method::GET,
            "/api/v1/queues/many/tenants?limit=7&cursor=245",
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert_eq!(page["tenants"].as_array().unwrap().len(), 5);
    assert_eq!(page["tenants"][0]["tenant"], "t245");
    assert_eq!(page["next_cursor"], Value::Null);

    let (s, q) = app.call(Method::GET, "/api/v1/queues/many", None).await;
    assert_eq!(s, StatusCode::OK, "{q}");
    assert_eq!(q["tenants"].as_array().unwrap().len(), 100);
    assert_eq!(q["tenants_total"], 250);
    assert_eq!(q["counts"]["queued"], 250);
    let (s, all) = app.call(Method::GET, "/api/v1/queues", None).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    let many = all["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == "many")
        .unwrap();
    assert_eq!(many["tenants"], json!([]));
    assert_eq!(many["tenants_total"], 250);

    for bad in [
        "limit=0",
        "limit=1001",
        "limit=x",
        "cursor=abc",
        "cursor=-1",
        "page=2",
    ] {
        let (s, e) = app
            .call(
                Method::GET,
                &format!("/api/v1/queues/many/tenants?{bad}"),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {e}");
        assert_eq!(code(&e), "bad_request", "{bad}");
    }
}
