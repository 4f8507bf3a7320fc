//! The worker protocol (`/api/v1/leases`) end to end through the router, with no Rust worker
//! running: an HTTP worker leases, heartbeats and reports; the long poll returns when work comes;
//! stale and cancelled leases answer their 409 codes; reports sent twice apply once; every bad
//! input is a typed 4xx that changes nothing; worker keys reach these routes only, tenant keys
//! none of them. On the embedded store, and the happy path and the long poll on a private Redis
//! (whose wake-ups travel by pub/sub).

mod common;

use axum::http::{Method, StatusCode};
use common::{code, message, TestApp, WAIT};
use orq_server::auth::{toml_entry, ApiKeys, Auth, Scope};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

const POST: Method = Method::POST;
const GET: Method = Method::GET;

fn embedded() -> TestApp {
    TestApp::embedded(false, vec![], |s| s).0
}

async fn submit(app: &TestApp, queue: &str, body: Value) -> String {
    let mut body = body;
    body["queue"] = json!(queue);
    let (s, t) = app
        .call(POST, "/api/v1/tasks", Some(&body.to_string()))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{t}");
    t["id"].as_str().unwrap().to_string()
}

async fn lease(app: &TestApp, body: Value) -> (StatusCode, Value) {
    app.call(POST, "/api/v1/leases", Some(&body.to_string()))
        .await
}

/// Lease exactly one task of `queue` (it must be ready).
async fn lease_one(app: &TestApp, queue: &str) -> Value {
    let (s, v) = lease(
        app,
        json!({"worker": "py-1", "queues": [queue], "count": 1}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let tasks = v["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{v}");
    tasks[0].clone()
}

async fn report(app: &TestApp, id: &str, what: &str, body: Value) -> (StatusCode, Value) {
    app.call(
        POST,
        &format!("/api/v1/leases/{id}/{what}"),
        Some(&body.to_string()),
    )
    .await
}

async fn task(app: &TestApp, id: &str) -> Value {
    let (s, t) = app.call(GET, &format!("/api/v1/tasks/{id}"), None).await;
    assert_eq!(s, StatusCode::OK, "{t}");
    t
}

// Goal: the whole life of a task through the protocol: a lease answers every documented field
// (payload byte for byte, attempt, epoch, token, deadline, advised heartbeat), a heartbeat moves
// the deadline, complete stores the result, and the same complete sent again is applied once.
async fn lease_heartbeat_complete(app: &TestApp) {
    let id = submit(
        app,
        "images",
        json!({"type": "resize", "payload": {"w": 640, "src": "a.png"}, "lease_ms": 6000}),
    )
    .await;
    let t = lease_one(app, "images").await;
    for field in [
        "id",
        "queue",
        "tenant",
        "type",
        "payload",
        "priority",
        "attempt",
        "max_retries",
        "epoch",
        "token",
        "lease_expires_at",
        "lease_ms",
        "heartbeat_ms",
        "timeout_ms",
        "created_at",
    ] {
        assert!(t.get(field).is_some(), "leased task lacks {field}: {t}");
    }
    assert_eq!(t["id"], id.as_str());
    assert_eq!(t["type"], "resize");
    assert_eq!(t["payload"], json!({"w": 640, "src": "a.png"}));
    assert_eq!(t["attempt"], 1);
    assert_eq!(t["epoch"], 1);
    assert_eq!(t["lease_ms"], 6000);
    assert_eq!(t["heartbeat_ms"], 2000);
    let token = t["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("1-"), "{token}");
    let leased = task(app, &id).await;
    assert_eq!(leased["status"], "leased");
    assert_eq!(leased["lease"]["worker"], "py-1");

    let (s, hb) = report(
        app,
        &id,
        "heartbeat",
        json!({"queue": "images", "token": token, "extend_ms": 60000}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{hb}");
    let left = hb["lease_left_ms"].as_u64().unwrap();
    assert!(left > 6000 && left <= 60000, "{hb}");
    assert!(hb["lease_expires_at"].as_str().unwrap().ends_with('Z'));

    let done = json!({"queue": "images", "token": token, "result": {"thumb": "a-640.png"}});
    let (s, r) = report(app, &id, "complete", done.clone()).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r, json!({"id": id, "reported": "applied"}));
    // A lost answer: the worker sends the same report again.
    let (s, r) = report(app, &id, "complete", done).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["reported"], "already_applied");
    let t = task(app, &id).await;
    assert_eq!(t["status"], "completed");
    assert_eq!(t["result"], json!({"thumb": "a-640.png"}));
    assert_eq!(t["attempt"], 1);
    // After it, the token holds nothing: a heartbeat is refused as a lost lease.
    let (s, e) = report(
        app,
        &id,
        "heartbeat",
        json!({"queue": "images", "token": token}),
    )
    .await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "lease_lost"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_leased_heartbeated_and_completed_once_embedded() {
    lease_heartbeat_complete(&embedded()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_leased_heartbeated_and_completed_once_on_redis() {
    lease_heartbeat_complete(&TestApp::start(false, vec![]).await).await;
}

// Goal: a waiting lease answers with the task submitted while it waits (long before its 30 s
// wait ends), and a wait with no work answers an empty list.
async fn long_poll_returns_when_work_comes(app: &TestApp) {
    // The queue exists once a task was submitted to it.
    let first = submit(app, "mail", json!({"payload": 1})).await;
    let t = lease_one(app, "mail").await;
    let (s, _) = report(
        app,
        &first,
        "complete",
        json!({"queue": "mail", "token": t["token"]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK);

    let (s, v) = lease(
        app,
        json!({"worker": "w", "queues": ["mail"], "wait_ms": 100}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v, json!({"tasks": []}));

    let waiting = {
        let app_router = app.router.clone();
        tokio::spawn(async move {
            use tower::ServiceExt;
            let req = axum::http::Request::post("/api/v1/leases")
                .header("content-type", "application/json")
                .body(axum::body::Body::from(
                    json!({"worker": "w", "queues": ["mail"], "count": 5, "wait_ms": 30000})
                        .to_string(),
                ))
                .unwrap();
            let resp = app_router.oneshot(req).await.unwrap();
            let status = resp.status();
            let bytes = http_body_util::BodyExt::collect(resp.into_body())
                .await
                .unwrap()
                .to_bytes();
            (status, serde_json::from_slice::<Value>(&bytes).unwrap())
        })
    };
    // Submit only once the call has had time to start waiting; it must answer with the task
    // whether it was already waiting or not.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "the lease answered before any work came"
    );
    let id = submit(app, "mail", json!({"payload": {"to": "a@example.com"}})).await;
    let (s, v) = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("the waiting lease answered")
        .unwrap();
    assert_eq!(s, StatusCode::OK, "{v}");
    let tasks = v["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{v}");
    assert_eq!(tasks[0]["id"], id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_lease_returns_when_work_comes_embedded() {
    long_poll_returns_when_work_comes(&embedded()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_lease_returns_when_work_comes_on_redis() {
    long_poll_returns_when_work_comes(&TestApp::start(false, vec![]).await).await;
}

// Goal: a lease of several queues takes from each, and never more than `count`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_of_several_queues_takes_up_to_count_from_them() {
    let app = embedded();
    for i in 0..3 {
        submit(&app, "a", json!({"payload": i})).await;
        submit(&app, "b", json!({"payload": i})).await;
    }
    let (s, v) = lease(
        &app,
        json!({"worker": "w", "queues": ["a", "b"], "count": 4}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["tasks"].as_array().unwrap().len(), 4, "{v}");
    let (s, v) = lease(
        &app,
        json!({"worker": "w", "queues": ["b", "a", "b"], "count": 100}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["tasks"].as_array().unwrap().len(), 2, "{v}");
}

// Goal: fail retries with backoff or (permanent) sends to the DLQ; release gives the task back
// without spending an attempt; a report with a token that no longer holds the task is refused as
// `lease_lost` and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_release_and_stale_reports() {
    let app = embedded();
    let opts = json!({"payload": {}, "max_retries": 2, "backoff": {"initial_ms": 1, "max_ms": 1}});
    let id = submit(&app, "q", opts.clone()).await;

    // Release: ready again at once, the attempt not spent.
    let t = lease_one(&app, "q").await;
    let tok1 = t["token"].as_str().unwrap().to_string();
    let (s, r) = report(&app, &id, "release", json!({"queue": "q", "token": tok1})).await;
    assert_eq!(
        (s, &r["reported"]),
        (StatusCode::OK, &json!("applied")),
        "{r}"
    );
    let (s, r) = report(&app, &id, "release", json!({"queue": "q", "token": tok1})).await;
    assert_eq!(
        (s, &r["reported"]),
        (StatusCode::OK, &json!("already_applied")),
        "{r}"
    );
    let t = lease_one(&app, "q").await;
    assert_eq!(t["epoch"], 2, "a new lease, a new fencing epoch: {t}");
    let after_release = task(&app, &id).await;
    assert_eq!(after_release["attempt"], 1, "release spends no attempt");
    let tok2 = t["token"].as_str().unwrap().to_string();

    // The released lease's token is stale now: every report with it is refused.
    for what in ["heartbeat", "complete", "release"] {
        let (s, e) = report(&app, &id, what, json!({"queue": "q", "token": tok1})).await;
        assert_eq!(
            (s, code(&e)),
            (StatusCode::CONFLICT, "lease_lost"),
            "{what}: {e}"
        );
    }
    let (s, e) = report(
        &app,
        &id,
        "fail",
        json!({"queue": "q", "token": tok1, "error": "late"}),
    )
    .await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "lease_lost"), "{e}");
    assert_eq!(task(&app, &id).await["status"], "leased", "nothing changed");

    // A retryable failure: retried after its backoff, with the error kept.
    let (s, r) = report(
        &app,
        &id,
        "fail",
        json!({"queue": "q", "token": tok2, "error": "smtp 451"}),
    )
    .await;
    assert_eq!(
        (s, &r["reported"]),
        (StatusCode::OK, &json!("applied")),
        "{r}"
    );
    let t = task(&app, &id).await;
    assert_eq!(t["last_error"], "smtp 451");
    assert!(t["status"] == "retrying" || t["status"] == "queued", "{t}");

    // A permanent failure: straight to the DLQ.
    let deadline = Instant::now() + WAIT;
    let t = loop {
        let (s, v) = lease(
            &app,
            json!({"worker": "w", "queues": ["q"], "wait_ms": 1000}),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        if let Some(t) = v["tasks"].as_array().unwrap().first() {
            break t.clone();
        }
        assert!(Instant::now() < deadline, "the retry never became ready");
    };
    let (s, r) = report(
        &app,
        &id,
        "fail",
        json!({"queue": "q", "token": t["token"], "error": "bad address", "permanent": true}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let dead = task(&app, &id).await;
    assert_eq!(dead["status"], "dead", "{dead}");
    assert_eq!(dead["attempt"], 2);
}

async fn completes_many(app: &TestApp) {
    let ids: Vec<String> = submit_n(app, 3).await;
    let (s, v) = lease(app, json!({"worker": "py-1", "queues": ["q"], "count": 3})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let tasks = v["tasks"].as_array().unwrap().clone();
    assert_eq!(tasks.len(), 3, "{v}");
    let token = |i: usize| tasks[i]["token"].as_str().unwrap().to_string();
    let id = |i: usize| tasks[i]["id"].as_str().unwrap().to_string();
    // A token of another epoch: stale.
    let stale = format!("9{}", token(2));
    let body = json!({"queue": "q", "completions": [
        {"id": id(0), "token": token(0), "result": {"n": 0}},
        {"id": id(1).to_ascii_lowercase(), "token": token(1)},
        {"id": id(2), "token": stale, "result": 2},
        {"id": id(0), "token": token(0), "result": {"n": 0}},
        {"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "token": token(0)},
    ]});
    let (s, v) = app
        .call(POST, "/api/v1/leases/complete", Some(&body.to_string()))
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let r = v["reports"].as_array().unwrap();
    let got: Vec<(String, String)> = r
        .iter()
        .map(|x| {
            let what = x["reported"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| x["error"]["code"].as_str().unwrap().to_string());
            (x["id"].as_str().unwrap().to_string(), what)
        })
        .collect();
    assert_eq!(
        got,
        [
            (id(0), "applied".to_string()),
            (id(1), "applied".to_string()),
            (id(2), "lease_lost".to_string()),
            (id(0), "already_applied".to_string()),
            (
                "01ARZ3NDEKTSV4RRFFQ69G5FAV".to_string(),
                "not_found".to_string()
            ),
        ],
        "{v}"
    );
    assert_eq!(task(app, &id(0)).await["result"], json!({"n": 0}));
    assert_eq!(task(app, &id(1)).await["result"], Value::Null);
    assert_eq!(task(app, &id(1)).await["status"], "completed");
    assert_eq!(
        task(app, &id(2)).await["status"],
        "leased",
        "a refused item changes nothing"
    );
    assert!(ids.contains(&id(2)));
    // Sent again (its answer was lost): applied once.
    let (s, v) = app
        .call(POST, "/api/v1/leases/complete", Some(&body.to_string()))
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["reports"][0]["reported"], "already_applied", "{v}");
    assert_eq!(v["reports"][1]["reported"], "already_applied", "{v}");

    // Bad batches: a 400 naming the field, nothing applied.
    let one = |id: &str, result: Value| json!({"id": id, "token": token(2), "result": result});
    let deep = (0..200).fold(json!(1), |v, _| json!([v]));
    let too_many: Vec<Value> = (0..101).map(|_| one(&id(2), json!(1))).collect();
    for (bad, field) in [
        (json!({"queue": "q", "completions": []}), "completions"),
        (
            json!({"queue": "q", "completions": too_many}),
            "completions",
        ),
        (
            json!({"queue": "q", "completions": [one("nope", json!(1))]}),
            "completions[0].id",
        ),
        (
            json!({"queue": "q", "completions": [one(&id(2), json!(1)), one(&id(2), deep)]}),
            "completions[1].result",
        ),
        (
            json!({"queue": "q", "completions": [{"id": id(2), "token": "x y"}]}),
            "token",
        ),
        (
            json!({"queue": "q", "completions": [{"id": id(2)}]}),
            "token",
        ),
        (
            json!({"queue": "q", "completions": [], "extra": 1}),
            "extra",
        ),
    ] {
        let (s, e) = app
            .call(POST, "/api/v1/leases/complete", Some(&bad.to_string()))
            .await;
        assert_eq!(
            (s, code(&e)),
            (StatusCode::BAD_REQUEST, "bad_request"),
            "{bad}: {e}"
        );
        assert!(message(&e).contains(field), "{field}: {e}");
    }
    assert_eq!(
        task(app, &id(2)).await["status"],
        "leased",
        "nothing changed"
    );
}

/// Submit `n` tasks to queue q; their ids.
async fn submit_n(app: &TestApp, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(submit(app, "q", json!({"payload": {}})).await);
    }
    ids
}

// Goal: several completions in one call: each applied or refused on its own, in order, applied
// once however often the call is sent; bad batches are typed 400s that change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_leases_complete_in_one_call_embedded() {
    completes_many(&embedded()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_leases_complete_in_one_call_on_redis() {
    completes_many(&TestApp::start(false, vec![]).await).await;
}

// Goal: a task cancelled while leased answers 409 `cancelled` to the heartbeat (the worker aborts
// its handler) and to its outcome, and stays cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_lease_answers_cancelled() {
    let app = embedded();
    let id = submit(&app, "q", json!({"payload": {}})).await;
    let t = lease_one(&app, "q").await;
    let (s, c) = app
        .call(POST, &format!("/api/v1/tasks/{id}/cancel"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{c}");
    let body = json!({"queue": "q", "token": t["token"]});
    let (s, e) = report(&app, &id, "heartbeat", body.clone()).await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "cancelled"), "{e}");
    let (s, e) = report(&app, &id, "complete", body).await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "cancelled"), "{e}");
    assert_eq!(task(&app, &id).await["status"], "cancelled");
}

// Goal: every bad input is a typed 4xx naming the field, and changes nothing in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_are_typed_errors_that_change_nothing() {
    let app = embedded();
    let id = submit(&app, "q", json!({"payload": {}})).await;
    let t = lease_one(&app, "q").await;
    let token = t["token"].as_str().unwrap().to_string();
    let before = task(&app, &id).await;

    let leases = [
        (
            json!({"worker": "w", "queues": ["nope"]}),
            404,
            "not_found",
            "queues",
        ),
        (
            json!({"worker": "w", "queues": ["q"], "count": 0}),
            400,
            "bad_request",
            "count",
        ),
        (
            json!({"worker": "w", "queues": ["q"], "count": 101}),
            400,
            "bad_request",
            "count",
        ),
        (
            json!({"worker": "w", "queues": ["q"], "count": -1}),
            400,
            "bad_request",
            "count",
        ),
        (
            json!({"worker": "w", "queues": ["q"], "count": 1.5}),
            400,
            "bad_request",
            "count",
        ),
        (
            json!({"worker": "w", "queues": ["q"], "count": "1"}),
            400,
            "bad_request",
            "count",
        ),
        (
            json!({"worker": "w", "queues": ["q"], "wait_ms": 30001}),
            400,
            "bad_request",
            "wait_ms",
        ),
        (
            json!({"worker": "w", "queues": []}),
            400,
            "bad_request",
            "queues",
        ),
        (
            json!({"worker": "w", "queues": ["a b"]}),
            400,
            "bad_request",
            "queues",
        ),
        (
            json!({"worker": "w", "queues": ["q"], "types": ["x"]}),
            400,
            "bad_request",
            "types",
        ),
        (
            json!({"worker": "a b", "queues": ["q"]}),
            400,
            "bad_request",
            "worker",
        ),
        (json!({"queues": ["q"]}), 400, "bad_request", "worker"),
        (json!({"worker": "w"}), 400, "bad_request", "queues"),
    ];
    let many: Vec<String> = (0..17).map(|i| format!("q{i}")).collect();
    let too_many = json!({"worker": "w", "queues": many});
    for (body, status, want, field) in
        leases
            .into_iter()
            .chain([(too_many, 400, "bad_request", "queues")])
    {
        let (s, e) = lease(&app, body.clone()).await;
        assert_eq!(s.as_u16(), status, "{body}: {e}");
        assert_eq!(code(&e), want, "{body}: {e}");
        assert!(message(&e).contains(field), "{body}: {e}");
    }
    let (s, e) = app.call(POST, "/api/v1/leases", Some("[1]")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    let (s, e) = app.call(POST, "/api/v1/leases?x=1", Some("{}")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");

    let big = "x".repeat(orq_server::model::RESULT_MAX_BYTES);
    // Deeper than any reader parses (a payload this deep is refused too).
    let deep: Value = serde_json::from_str(&format!("{}1{}", "[".repeat(120), "]".repeat(120)))
        .map(|v: Value| (0..20).fold(v, |acc, _| json!([acc])))
        .unwrap();
    let reports = [
        (
            "complete",
            json!({"queue": "q"}),
            400,
            "bad_request",
            "token",
        ),
        (
            "complete",
            json!({"queue": "q", "token": ""}),
            400,
            "bad_request",
            "token",
        ),
        (
            "complete",
            json!({"queue": "q", "token": "xyz"}),
            400,
            "bad_request",
            "token",
        ),
        (
            "complete",
            json!({"queue": "q", "token": "1-XYZ"}),
            400,
            "bad_request",
            "token",
        ),
        (
            "complete",
            json!({"token": token}),
            400,
            "bad_request",
            "queue",
        ),
        (
            "complete",
            json!({"queue": "a:b", "token": token}),
            400,
            "bad_request",
            "queue",
        ),
        (
            "complete",
            json!({"queue": "q", "token": token, "result": big}),
            413,
            "payload_too_large",
            "result",
        ),
        (
            "complete",
            json!({"queue": "q", "token": token, "extra": 1}),
            400,
            "bad_request",
            "extra",
        ),
        (
            "complete",
            json!({"queue": "q", "token": token, "result": deep}),
            400,
            "bad_request",
            "result",
        ),
        (
            "fail",
            json!({"queue": "q", "token": token}),
            400,
            "bad_request",
            "error",
        ),
        (
            "fail",
            json!({"queue": "q", "token": token, "error": ""}),
            400,
            "bad_request",
            "error",
        ),
        (
            "fail",
            json!({"queue": "q", "token": token, "error": "e".repeat(65_537)}),
            400,
            "bad_request",
            "error",
        ),
        (
            "fail",
            json!({"queue": "q", "token": token, "error": "x", "permanent": "yes"}),
            400,
            "bad_request",
            "permanent",
        ),
        (
            "heartbeat",
            json!({"queue": "q", "token": token, "extend_ms": 999}),
            400,
            "bad_request",
            "extend_ms",
        ),
        (
            "heartbeat",
            json!({"queue": "q", "token": token, "extend_ms": 3_600_001}),
            400,
            "bad_request",
            "extend_ms",
        ),
        (
            "release",
            json!({"queue": "q", "token": "1-0000000000000000"}),
            409,
            "lease_lost",
            "stale",
        ),
        (
            "release",
            json!({"queue": "other", "token": token}),
            404,
            "not_found",
            &id,
        ),
    ];
    for (what, body, status, want, field) in reports {
        let (s, e) = report(&app, &id, what, body.clone()).await;
        assert_eq!(s.as_u16(), status, "{what} {body}: {e}");
        assert_eq!(code(&e), want, "{what} {body}: {e}");
        assert!(message(&e).contains(field), "{what} {body}: {e}");
    }
    // Ids that cannot name a task, and a well-formed id of no task.
    let ok = json!({"queue": "q", "token": token});
    for path in [
        "/api/v1/leases/not-a-ulid/complete".to_string(),
        format!("/api/v1/leases/{}/complete", "0".repeat(26)),
    ] {
        let (s, e) = app.call(POST, &path, Some(&ok.to_string())).await;
        assert_eq!(
            (s, code(&e)),
            (StatusCode::NOT_FOUND, "not_found"),
            "{path}: {e}"
        );
    }
    let (s, e) = app
        .call(GET, &format!("/api/v1/leases/{id}/complete"), None)
        .await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED, "{e}");

    let after = task(&app, &id).await;
    assert_eq!(before, after, "a refused call changed the task");
    // The lease still holds: the right report is applied.
    let (s, r) = report(&app, &id, "complete", ok).await;
    assert_eq!(
        (s, &r["reported"]),
        (StatusCode::OK, &json!("applied")),
        "{r}"
    );
}

const ADMIN: &str = "orq_test_admin_key";
const WORKER_ALL: &str = "orq_test_worker_all";
const WORKER_IMAGES: &str = "orq_test_worker_images";
const TENANT: &str = "orq_test_tenant_acme";

fn keys() -> Auth {
    let text = [
        toml_entry("ops", ADMIN, &Scope::Admin),
        toml_entry(
            "w-all",
            WORKER_ALL,
            &Scope::Worker {
                queues: None,
                tenants: None,
            },
        ),
        toml_entry(
            "w-images",
            WORKER_IMAGES,
            &Scope::Worker {
                queues: Some(["images".to_string()].into()),
                tenants: None,
            },
        ),
        toml_entry(
            "acme",
            TENANT,
            &Scope::Tenant {
                tenant: "acme".into(),
                queues: None,
            },
        ),
    ]
    .join("\n");
    Auth::Keys(Arc::new(ApiKeys::parse(&text).expect("a valid keys file")))
}

// Goal: a worker key leases and reports in its queues and may do nothing else; a tenant key may
// not lease (its own tenant's tasks neither); an admin key may.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_keys_lease_in_their_queues_and_do_nothing_else() {
    let (app, _) = TestApp::embedded(false, vec![], |s| s.with_auth(keys()));
    let call = |key: &'static str, m: Method, uri: String, body: Value| {
        let app = &app;
        async move {
            let (s, v, _) = app
                .call_as(Some(key), m, &uri, Some(&body.to_string()))
                .await;
            (s, v)
        }
    };
    for q in ["images", "mail"] {
        let (s, v) = call(
            TENANT,
            POST,
            "/api/v1/tasks".into(),
            json!({"queue": q, "payload": {}}),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    let lease_body = |q: &str| json!({"worker": "w", "queues": [q]});

    // A tenant key cannot lease, not even its own tenant's tasks.
    let (s, e) = call(TENANT, POST, "/api/v1/leases".into(), lease_body("images")).await;
    assert_eq!((s, code(&e)), (StatusCode::FORBIDDEN, "forbidden"), "{e}");
    assert!(message(&e).contains("worker key"), "{e}");

    // A worker key limited to `images` may not lease `mail`, nor use any other route.
    let (s, e) = call(
        WORKER_IMAGES,
        POST,
        "/api/v1/leases".into(),
        lease_body("mail"),
    )
    .await;
    assert_eq!((s, code(&e)), (StatusCode::FORBIDDEN, "forbidden"), "{e}");
    for (m, uri) in [
        (GET, "/api/v1/tasks?queue=images"),
        (POST, "/api/v1/tasks"),
        (GET, "/api/v1/queues"),
        (GET, "/api/v1/dlq"),
        (GET, "/api/v1/events"),
    ] {
        let (s, e) = call(WORKER_IMAGES, m.clone(), uri.into(), json!({"payload": {}})).await;
        assert_eq!(
            (s, code(&e)),
            (StatusCode::FORBIDDEN, "forbidden"),
            "{m} {uri}: {e}"
        );
    }
    let (s, v) = call(
        WORKER_IMAGES,
        POST,
        "/api/v1/leases".into(),
        lease_body("images"),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let t = v["tasks"][0].clone();
    let id = t["id"].as_str().unwrap().to_string();
    let (s, v) = call(
        WORKER_ALL,
        POST,
        "/api/v1/leases".into(),
        json!({"worker": "w2", "queues": ["mail"]}),
    )
    .await;
    assert_eq!(
        (s, v["tasks"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(1)),
        "{v}"
    );

    // Reports: a tenant key may not send them; the worker key may, in its queue.
    let body = json!({"queue": "images", "token": t["token"]});
    let uri = format!("/api/v1/leases/{id}/complete");
    let (s, e) = call(TENANT, POST, uri.clone(), body.clone()).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{e}");
    let (s, r) = call(WORKER_IMAGES, POST, uri, body).await;
    assert_eq!(s, StatusCode::OK, "{r}");

    // No key: 401; an admin key: leases anything.
    let (s, _, h) = app
        .call_as(
            None,
            POST,
            "/api/v1/leases",
            Some(&lease_body("images").to_string()),
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert!(h.get("www-authenticate").is_some());
    let id = submit_as_admin(&app).await;
    let (s, v) = call(ADMIN, POST, "/api/v1/leases".into(), lease_body("images")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["tasks"][0]["id"], id.as_str());
}

/// A worker key limited to tenants acme and globex.
const WORKER_TWO_TENANTS: &str = "orq_test_worker_two_tenants";

/// Keys: an admin, a worker key limited to tenants acme and globex.
fn tenant_keys() -> Auth {
    let text = [
        toml_entry("ops", ADMIN, &Scope::Admin),
        toml_entry(
            "w-two",
            WORKER_TWO_TENANTS,
            &Scope::Worker {
                queues: None,
                tenants: Some(["acme".to_string(), "globex".to_string()].into()),
            },
        ),
    ]
    .join("\n");
    Auth::Keys(Arc::new(ApiKeys::parse(&text).expect("a valid keys file")))
}

/// The tenants of a lease answer's tasks, sorted.
fn tenants_of(v: &Value) -> Vec<String> {
    let mut t: Vec<String> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tenant"].as_str().unwrap().to_string())
        .collect();
    t.sort();
    t
}

async fn leases_limited_to_tenants(app: &TestApp) {
    let call = |key: &'static str, body: Value| async move {
        let (s, v, _) = app
            .call_as(Some(key), POST, "/api/v1/leases", Some(&body.to_string()))
            .await;
        (s, v)
    };
    for tenant in ["acme", "globex", "initech"] {
        for _ in 0..3 {
            let (s, t, _) = app
                .call_as(
                    Some(ADMIN),
                    POST,
                    "/api/v1/tasks",
                    Some(&json!({"queue": "q", "tenant": tenant, "payload": {}}).to_string()),
                )
                .await;
            assert_eq!(s, StatusCode::CREATED, "{t}");
        }
    }
    let body = |tenants: Value| {
        let mut b = json!({"worker": "w", "queues": ["q"], "count": 100});
        if !tenants.is_null() {
            b["tenants"] = tenants;
        }
        b
    };
    // Bad lists: a 400 naming the field, a tenant outside the key's a 403; nothing leased.
    for bad in [
        json!([]),
        json!(["bad name"]),
        json!((0..17).map(|i| format!("t{i}")).collect::<Vec<_>>()),
    ] {
        let (s, e) = call(ADMIN, body(bad.clone())).await;
        assert_eq!(
            (s, code(&e)),
            (StatusCode::BAD_REQUEST, "bad_request"),
            "{bad}: {e}"
        );
        assert!(message(&e).starts_with("tenants"), "{bad}: {e}");
    }
    let (s, e) = call(WORKER_TWO_TENANTS, body(json!(["acme", "initech"]))).await;
    assert_eq!((s, code(&e)), (StatusCode::FORBIDDEN, "forbidden"), "{e}");
    assert!(message(&e).contains("initech"), "{e}");
    // The key's own list narrowed: acme's only.
    let (s, acme) = call(WORKER_TWO_TENANTS, body(json!(["acme", "acme"]))).await;
    assert_eq!(s, StatusCode::OK, "{acme}");
    assert_eq!(tenants_of(&acme), ["acme"; 3], "{acme}");
    // No list: the key's tenants, so globex's, never initech's.
    let (s, v) = call(WORKER_TWO_TENANTS, body(Value::Null)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(tenants_of(&v), ["globex"; 3], "{v}");
    let (s, v) = call(WORKER_TWO_TENANTS, body(Value::Null)).await;
    assert_eq!((s, tenants_of(&v).len()), (StatusCode::OK, 0), "{v}");
    // An admin may name any tenant; initech's tasks waited for it.
    let (s, v) = call(ADMIN, body(json!(["initech", "nobody"]))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(tenants_of(&v), ["initech"; 3], "{v}");

    // Reports are held to the key's tenants as leases are: with initech's lease token in hand,
    // the key limited to acme and globex can neither heartbeat, complete, fail nor release
    // initech's task; each answers 404 as if the task did not exist, and the task stays leased.
    let initech = &v["tasks"][0];
    let (id, token) = (initech["id"].as_str().unwrap(), initech["token"].clone());
    for what in ["heartbeat", "complete", "fail", "release"] {
        let mut b = json!({"queue": "q", "token": token});
        if what == "fail" {
            b["error"] = json!("x");
        }
        let (s, e, _) = app
            .call_as(
                Some(WORKER_TWO_TENANTS),
                POST,
                &format!("/api/v1/leases/{id}/{what}"),
                Some(&b.to_string()),
            )
            .await;
        assert_eq!(
            (s, code(&e)),
            (StatusCode::NOT_FOUND, "not_found"),
            "{what}: {e}"
        );
        assert_eq!(message(&e), format!("no task with id {id}"), "{what}: {e}");
    }
    // The batched completions: initech's refused on its own, acme's (its own lease) applied.
    let own = &acme["tasks"][0];
    let batch = json!({"queue": "q", "completions": [
        {"id": id, "token": token, "result": 1},
        {"id": own["id"], "token": own["token"], "result": 2},
    ]});
    let (s, r, _) = app
        .call_as(
            Some(WORKER_TWO_TENANTS),
            POST,
            "/api/v1/leases/complete",
            Some(&batch.to_string()),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["reports"][0]["error"]["code"], "not_found", "{r}");
    assert_eq!(r["reports"][1]["reported"], "applied", "{r}");
    let (_, t, _) = app
        .call_as(
            Some(ADMIN),
            GET,
            &format!("/api/v1/tasks/{id}?queue=q"),
            None,
        )
        .await;
    assert_eq!(t["status"], "leased", "nothing reached initech's task: {t}");
    let (s, r, _) = app
        .call_as(
            Some(ADMIN),
            POST,
            &format!("/api/v1/leases/{id}/complete"),
            Some(&json!({"queue": "q", "token": token}).to_string()),
        )
        .await;
    assert_eq!(
        (s, &r["reported"]),
        (StatusCode::OK, &json!("applied")),
        "{r}"
    );
}

// Goal: a worker key limited to some tenants leases only their tasks and reports only on theirs
// (another tenant's task is a 404 even with its lease token), and a lease body's `tenants`
// narrows any lease; bad lists are typed 4xx. On the embedded store and on Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_limited_to_tenants_take_only_theirs_embedded() {
    let (app, _) = TestApp::embedded(false, vec![], |s| s.with_auth(tenant_keys()));
    leases_limited_to_tenants(&app).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_limited_to_tenants_take_only_theirs_on_redis() {
    let app = TestApp::start_with(false, vec![], |s| s.with_auth(tenant_keys())).await;
    leases_limited_to_tenants(&app).await;
}

async fn submit_as_admin(app: &TestApp) -> String {
    let (s, t, _) = app
        .call_as(
            Some(ADMIN),
            POST,
            "/api/v1/tasks",
            Some(&json!({"queue": "images", "payload": {}}).to_string()),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{t}");
    t["id"].as_str().unwrap().to_string()
}

// Goal: a worker that hangs up while its lease waits takes nothing: the server drops the waiting
// call with the connection, so a task submitted afterwards goes to the next worker that asks
// (not to a lease whose answer nobody reads, which would hold it until its deadline). Method: the
// router served on a real socket; the first lease call gives up after 300 ms of a 30 s wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_hangs_up_while_waiting_takes_nothing() {
    let app = embedded();
    // The queue exists, and its one task is taken: the waiting call below finds nothing.
    submit(&app, "mail", json!({"payload": 0})).await;
    lease_one(&app, "mail").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/api/v1", listener.local_addr().unwrap());
    let stop = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn(orq_server::serve::serve(
        listener,
        app.router.clone(),
        Default::default(),
        stop.clone(),
    ));
    let http = reqwest::Client::new();
    let gave_up = http
        .post(format!("{base}/leases"))
        .json(&json!({"worker": "gone", "queues": ["mail"], "wait_ms": 30000}))
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    assert!(gave_up.is_err(), "the 30 s wait answered within 300 ms");
    // The server sees the hang-up the next time it polls the connection; a task submitted after
    // that must stay ready. Give it time, then submit.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let id = submit(&app, "mail", json!({"payload": 1})).await;
    let deadline = Instant::now() + WAIT;
    loop {
        let (s, v) = lease(&app, json!({"worker": "next", "queues": ["mail"]})).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        if let Some(got) = v["tasks"].as_array().unwrap().first() {
            assert_eq!(got["id"], id.as_str(), "{v}");
            assert_eq!(
                got["attempt"], 1,
                "no attempt was spent on the abandoned call: {v}"
            );
            break;
        }
        // Leased by the abandoned call: it would stay so until its 30 s lease expires.
        let st = task(&app, &id).await;
        assert_ne!(
            st["lease"]["worker"], "gone",
            "the abandoned call leased it: {st}"
        );
        assert!(
            Instant::now() < deadline,
            "the task never became leasable: {st}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    let _ = server.await;
}
