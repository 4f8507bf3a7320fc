//! API keys end to end: every route of the router answered for no key, a bad key, an admin key
//! and two tenant keys (A and B), with B never seeing A's tasks, counts or events; queue-limited
//! keys; and the startup rules of the `orq` binary (strict keys file, loopback without keys,
//! `orq key new`).
//!
//! Why this file is long (about 950 lines): most of it is one test,
//! `every_route_answers_each_key_as_its_rights_say`, the route-by-key matrix (about 390 lines).
//! Each file under `tests/` is its own binary linking the whole server, so the other key tests stay
//! beside it instead of adding binaries.

mod common;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use common::{code, declared_routes, message, TestApp, WAIT};
use http_body_util::BodyExt;
use orq_server::auth::{toml_entry, ApiKeys, Auth, Scope};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::ServiceExt;

const ADMIN: &str = "orq_test_admin_key";
const KEY_A: &str = "orq_test_tenant_acme";
const KEY_B: &str = "orq_test_tenant_bolt";
/// Tenant acme, queue `jobs` only.
const KEY_A_JOBS: &str = "orq_test_tenant_acme_jobs";
const BAD: &str = "orq_not_a_known_key";
/// A worker key (every queue): the worker protocol's routes only.
const KEY_W: &str = "orq_test_worker_all";

fn keys() -> Auth {
    let tenant = |t: &str, queues: Option<&[&str]>| Scope::Tenant {
        tenant: t.into(),
        queues: queues.map(|qs| qs.iter().map(|q| q.to_string()).collect::<BTreeSet<_>>()),
    };
    let text = [
        toml_entry("ops", ADMIN, &Scope::Admin),
        toml_entry("acme", KEY_A, &tenant("acme", None)),
        toml_entry("bolt", KEY_B, &tenant("bolt", None)),
        toml_entry("acme-jobs", KEY_A_JOBS, &tenant("acme", Some(&["jobs"]))),
        toml_entry(
            "pullers",
            KEY_W,
            &Scope::Worker {
                queues: None,
                tenants: None,
            },
        ),
    ]
    .join("\n");
    Auth::Keys(Arc::new(ApiKeys::parse(&text).expect("a valid keys file")))
}

/// An app on the embedded store with the test keys, a worker pool, a timelines directory
/// holding `seed-1.jsonl`, and a simulator whose binary is missing (a run is a 503).
fn app_with_keys(timelines: &std::path::Path) -> TestApp {
    std::fs::write(timelines.join("seed-1.jsonl"), "{\"kind\":\"header\"}\n").unwrap();
    let dir = timelines.to_path_buf();
    let (app, _) = TestApp::embedded(true, vec![], move |s| {
        s.with_auth(keys()).with_timelines(dir).with_simulator(
            orq_server::simulations::Simulator::new(orq_server::simulations::SimArgs {
                sim_binary: Some("/nonexistent/orq-sim".into()),
                sim_timeout_ms: orq_server::simulations::TIMEOUT_MS_DEFAULT,
                sim_memory_mb: orq_server::simulations::MEMORY_MB_DEFAULT,
            }),
        )
    });
    app
}

async fn submit_as(app: &TestApp, key: &str, body: Value) -> String {
    let (s, t, _) = app
        .call_as(
            Some(key),
            Method::POST,
            "/api/v1/tasks",
            Some(&body.to_string()),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body} -> {t}");
    t["id"].as_str().unwrap().to_string()
}

async fn wait_status(app: &TestApp, id: &str, want: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let (s, t, _) = app
            .call_as(
                Some(ADMIN),
                Method::GET,
                &format!("/api/v1/tasks/{id}"),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{t}");
        if t["status"] == want {
            return t;
        }
        assert!(Instant::now() < deadline, "{id} never became {want}: {t}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One row of the matrix: a route, the request for tenant keys and for the admin, and the
/// statuses for [no key, bad key, admin, A, B, W].
struct Row {
    method: Method,
    route: &'static str,
    /// The request of A, B, no key and bad key: (uri, body). It targets A's things.
    tenant_req: (String, Option<String>),
    /// The admin's request (its own target where the request changes state).
    admin_req: (String, Option<String>),
    want: [u16; 6],
}

// Goal: the authorisation table of the README holds for every route the router declares: no key
// and an unknown key get 401 with `WWW-Authenticate: Bearer` (public routes excepted); the admin
// key may do everything; tenant key A may submit, read, cancel and replay acme's tasks only and
// gets 403 on admin-only routes; tenant key B, asking for A's things, gets 403 when it names
// acme and 404 for A's task ids, with exactly the body of a task that does not exist. Method:
// the embedded store with workers; A's tasks are made first (some delayed, some dead); each
// row runs no key, bad key, B, A, admin in that order, so B tries A's tasks before they change.
// Worker key W may use the worker protocol's routes only (it sends the admin's request there:
// a report with a token that holds nothing is a 409 for both), and a tenant key none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_each_key_as_its_rights_say() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_with_keys(dir.path());
    let delayed = json!({"tenant": "acme", "payload": {"n": 1}, "delay_ms": 600_000});
    let a_sched1 = submit_as(&app, KEY_A, delayed.clone()).await;
    let a_sched2 = submit_as(&app, ADMIN, delayed.clone()).await;
    let dying = json!({"tenant": "acme", "type": "fail", "payload": {"times": 1},
        "max_retries": 0});
    let mut a_dead = Vec::new();
    for _ in 0..4 {
        a_dead.push(submit_as(&app, KEY_A, dying.clone()).await);
    }
    for id in &a_dead {
        wait_status(&app, id, "dead").await;
    }
    let b_task = submit_as(&app, KEY_B, json!({"payload": 2, "delay_ms": 600_000})).await;

    let same = |uri: String, body: Option<Value>| {
        let b = body.map(|b| b.to_string());
        ((uri.clone(), b.clone()), (uri, b))
    };
    let row = |method: Method,
               route: &'static str,
               reqs: ((String, Option<String>), (String, Option<String>)),
               want: [u16; 6]| Row {
        method,
        route,
        tenant_req: reqs.0,
        admin_req: reqs.1,
        want,
    };
    let (get, post, put, delete) = (Method::GET, Method::POST, Method::PUT, Method::DELETE);
    // A report on B's scheduled task with a token that holds nothing (never leased).
    let report_body = |what: &str| {
        let mut b = json!({"queue": "default", "token": "1-0000000000000000"});
        if what == "fail" {
            b["error"] = json!("x");
        }
        b
    };
    let rows = vec![
        row(
            get.clone(),
            "/api/v1/healthz",
            same("/api/v1/healthz".into(), None),
            [200; 6],
        ),
        row(
            get.clone(),
            "/api/v1/readyz",
            same("/api/v1/readyz".into(), None),
            [200; 6],
        ),
        row(
            get.clone(),
            "/api/v1/openapi.json",
            same("/api/v1/openapi.json".into(), None),
            [200; 6],
        ),
        row(
            post.clone(),
            "/api/v1/tasks",
            same("/api/v1/tasks".into(), Some(delayed.clone())),
            [401, 401, 201, 201, 403, 403],
        ),
        row(
            get.clone(),
            "/api/v1/tasks",
            same("/api/v1/tasks?tenant=acme".into(), None),
            [401, 401, 200, 200, 403, 403],
        ),
        row(
            post.clone(),
            "/api/v1/tasks/batch",
            same(
                "/api/v1/tasks/batch".into(),
                Some(json!({"tasks": [delayed.clone()]})),
            ),
            [401, 401, 201, 201, 403, 403],
        ),
        row(
            get.clone(),
            "/api/v1/tasks/{id}",
            same(format!("/api/v1/tasks/{a_sched1}"), None),
            [401, 401, 200, 200, 404, 403],
        ),
        row(
            post.clone(),
            "/api/v1/tasks/{id}/cancel",
            (
                (format!("/api/v1/tasks/{a_sched1}/cancel"), None),
                (format!("/api/v1/tasks/{a_sched2}/cancel"), None),
            ),
            [401, 401, 200, 200, 404, 403],
        ),
        row(
            get.clone(),
            "/api/v1/dlq",
            same("/api/v1/dlq?tenant=acme".into(), None),
            [401, 401, 200, 200, 403, 403],
        ),
        row(
            post.clone(),
            "/api/v1/dlq/{id}/replay",
            (
                (format!("/api/v1/dlq/{}/replay", a_dead[0]), None),
                (format!("/api/v1/dlq/{}/replay", a_dead[1]), None),
            ),
            [401, 401, 200, 200, 404, 403],
        ),
        row(
            delete.clone(),
            "/api/v1/dlq/{id}",
            same(format!("/api/v1/dlq/{}", a_dead[2]), None),
            [401, 401, 200, 403, 403, 403],
        ),
        row(
            post.clone(),
            "/api/v1/dlq/replay",
            same(
                "/api/v1/dlq/replay".into(),
                Some(json!({"tenant": "acme", "limit": 1})),
            ),
            [401, 401, 200, 200, 403, 403],
        ),
        row(
            get.clone(),
            "/api/v1/queues",
            same("/api/v1/queues".into(), None),
            [401, 401, 200, 200, 200, 403],
        ),
        row(
            get.clone(),
            "/api/v1/queues/{queue}",
            same("/api/v1/queues/default".into(), None),
            [401, 401, 200, 200, 200, 403],
        ),
        // Admin only; `default` holds work, so the admin's delete is a conflict.
        row(
            delete.clone(),
            "/api/v1/queues/{queue}",
            same("/api/v1/queues/default".into(), None),
            [401, 401, 409, 403, 403, 403],
        ),
        row(
            get.clone(),
            "/api/v1/queues/{queue}/tenants",
            same("/api/v1/queues/default/tenants".into(), None),
            [401, 401, 200, 200, 200, 403],
        ),
        row(
            put.clone(),
            "/api/v1/queues/{queue}/tenants/{tenant}",
            same(
                "/api/v1/queues/default/tenants/acme".into(),
                Some(json!({"weight": 2})),
            ),
            [401, 401, 200, 403, 403, 403],
        ),
        row(
            post.clone(),
            "/api/v1/queues/{queue}/pause",
            same("/api/v1/queues/default/pause".into(), None),
            [401, 401, 200, 403, 403, 403],
        ),
        row(
            post.clone(),
            "/api/v1/queues/{queue}/resume",
            same("/api/v1/queues/default/resume".into(), None),
            [401, 401, 200, 403, 403, 403],
        ),
        row(
            post.clone(),
            "/api/v1/queues/{queue}/drain",
            same("/api/v1/queues/default/drain?timeout_ms=1".into(), None),
            [401, 401, 200, 403, 403, 403],
        ),
        row(
            put.clone(),
            "/api/v1/queues/{queue}/settings",
            same(
                "/api/v1/queues/default/settings".into(),
                Some(json!({"aging_step_ms": 0})),
            ),
            [401, 401, 200, 403, 403, 403],
        ),
        row(
            get.clone(),
            "/api/v1/queues/{queue}/metrics",
            same("/api/v1/queues/default/metrics".into(), None),
            [401, 401, 200, 403, 403, 403],
        ),
        row(
            get.clone(),
            "/api/v1/queues/{queue}/workers",
            same("/api/v1/queues/default/workers".into(), None),
            [401, 401, 200, 403, 403, 403],
        ),
        row(
            get.clone(),
            "/api/v1/events",
            same("/api/v1/events".into(), None),
            [401, 401, 200, 200, 200, 403],
        ),
        row(
            get.clone(),
            "/api/v1/timelines",
            same("/api/v1/timelines".into(), None),
            [401, 401, 200, 403, 403, 403],
        ),
        row(
            get.clone(),
            "/api/v1/timelines/{name}",
            same("/api/v1/timelines/seed-1.jsonl".into(), None),
            [401, 401, 200, 403, 403, 403],
        ),
        row(
            get.clone(),
            "/api/v1/simulations",
            same("/api/v1/simulations".into(), None),
            [401, 401, 200, 403, 403, 403],
        ),
        row(
            post.clone(),
            "/api/v1/simulations",
            same("/api/v1/simulations".into(), Some(json!({"seed": 1}))),
            [401, 401, 503, 403, 403, 403],
        ),
        row(
            get.clone(),
            "/metrics",
            same("/metrics".into(), None),
            [401, 401, 200, 403, 403, 403],
        ),
        row(
            post.clone(),
            "/api/v1/leases",
            same(
                "/api/v1/leases".into(),
                Some(json!({"worker": "w", "queues": ["default"]})),
            ),
            [401, 401, 200, 403, 403, 200],
        ),
        row(
            post.clone(),
            "/api/v1/leases/{id}/heartbeat",
            same(
                format!("/api/v1/leases/{b_task}/heartbeat"),
                Some(report_body("heartbeat")),
            ),
            [401, 401, 409, 403, 403, 409],
        ),
        row(
            post.clone(),
            "/api/v1/leases/{id}/complete",
            same(
                format!("/api/v1/leases/{b_task}/complete"),
                Some(report_body("complete")),
            ),
            [401, 401, 409, 403, 403, 409],
        ),
        row(
            post.clone(),
            "/api/v1/leases/complete",
            same(
                "/api/v1/leases/complete".into(),
                Some(json!({"queue": "default", "completions": [
                    {"id": b_task, "token": "1-00ff"},
                ]})),
            ),
            [401, 401, 200, 403, 403, 200],
        ),
        row(
            post.clone(),
            "/api/v1/leases/{id}/fail",
            same(
                format!("/api/v1/leases/{b_task}/fail"),
                Some(report_body("fail")),
            ),
            [401, 401, 409, 403, 403, 409],
        ),
        row(
            post.clone(),
            "/api/v1/leases/{id}/release",
            same(
                format!("/api/v1/leases/{b_task}/release"),
                Some(report_body("release")),
            ),
            [401, 401, 409, 403, 403, 409],
        ),
    ];

    let covered: BTreeSet<(String, String)> = rows
        .iter()
        .map(|r| (r.method.to_string(), r.route.to_string()))
        .collect();
    assert_eq!(
        covered,
        declared_routes(),
        "the matrix must have one row per route of the router"
    );

    for r in &rows {
        // Order: no key, bad key, B, A, admin (index into `want`: 0, 1, 4, 3, 2).
        for (who, key, i) in [
            ("no key", None, 0),
            ("bad key", Some(BAD), 1),
            ("B", Some(KEY_B), 4),
            ("A", Some(KEY_A), 3),
            ("admin", Some(ADMIN), 2),
            ("W", Some(KEY_W), 5),
        ] {
            let (uri, body) = if who == "admin" || who == "W" {
                &r.admin_req
            } else {
                &r.tenant_req
            };
            let (s, v, headers) = app
                .call_as(key, r.method.clone(), uri, body.as_deref())
                .await;
            assert_eq!(s.as_u16(), r.want[i], "{} {uri} as {who}: {v}", r.method);
            match s.as_u16() {
                401 => {
                    assert_eq!(code(&v), "unauthorized", "{uri} as {who}: {v}");
                    let challenge = headers["www-authenticate"].to_str().unwrap();
                    assert!(challenge.starts_with("Bearer"), "{challenge}");
                    if key.is_some() {
                        assert!(challenge.contains("invalid_token"), "{challenge}");
                    }
                }
                403 => assert_eq!(code(&v), "forbidden", "{uri} as {who}: {v}"),
                409 if uri.starts_with("/api/v1/leases/") => {
                    assert_eq!(code(&v), "lease_lost", "{uri} as {who}: {v}")
                }
                404 => assert_eq!(code(&v), "not_found", "{uri} as {who}: {v}"),
                _ => {}
            }
        }
    }

    // The dashboard's files stay public; unknown API routes are 404 whoever asks.
    let (s, _, _) = app.call_as(None, Method::GET, "/", None).await;
    assert_ne!(s, StatusCode::UNAUTHORIZED, "the dashboard is public");
    let (s, v, _) = app.call_as(None, Method::GET, "/api/v1/nope", None).await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "not_found"));

    // A fresh dead task of A's: B can neither read, cancel nor replay it (one by one or in
    // bulk), and its 404 is the very body of a task that does not exist.
    let a_late = submit_as(&app, KEY_A, dying.clone()).await;
    wait_status(&app, &a_late, "dead").await;
    let missing = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
    let (_, hidden, _) = app
        .call_as(
            Some(KEY_B),
            Method::GET,
            &format!("/api/v1/tasks/{a_late}"),
            None,
        )
        .await;
    let (_, absent, _) = app
        .call_as(
            Some(KEY_B),
            Method::GET,
            &format!("/api/v1/tasks/{missing}"),
            None,
        )
        .await;
    assert_eq!(
        hidden.to_string().replace(&a_late, "<id>"),
        absent.to_string().replace(missing, "<id>")
    );
    for (m, uri) in [
        (Method::GET, format!("/api/v1/tasks/{a_late}?queue=default")),
        (Method::POST, format!("/api/v1/tasks/{a_late}/cancel")),
        (Method::POST, format!("/api/v1/dlq/{a_late}/replay")),
        (
            Method::POST,
            format!("/api/v1/dlq/{a_late}/replay?queue=default"),
        ),
    ] {
        let (s, _, _) = app.call_as(Some(KEY_B), m, &uri, None).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{uri}");
    }
    let (s, r, _) = app
        .call_as(Some(KEY_B), Method::POST, "/api/v1/dlq/replay", Some("{}"))
        .await;
    assert_eq!(
        (s, r["replayed"].clone()),
        (StatusCode::OK, json!(0)),
        "{r}"
    );
    let still = wait_status(&app, &a_late, "dead").await;
    assert_eq!(still["replays"], 0, "{still}");

    // What B sees of the whole system is bolt's alone.
    let a_ids: Vec<&String> = [&a_sched1, &a_sched2, &a_late]
        .into_iter()
        .chain(&a_dead)
        .collect();
    for uri in [
        "/api/v1/tasks?limit=1000",
        "/api/v1/tasks?status=scheduled",
        "/api/v1/dlq",
        "/api/v1/queues",
        "/api/v1/queues/default",
        "/api/v1/queues/default/tenants",
    ] {
        let (s, v, _) = app.call_as(Some(KEY_B), Method::GET, uri, None).await;
        assert_eq!(s, StatusCode::OK, "{uri}: {v}");
        let text = v.to_string();
        assert!(!text.contains("acme"), "B sees acme at {uri}: {text}");
        for id in &a_ids {
            assert!(!text.contains(id.as_str()), "B sees {id} at {uri}: {text}");
        }
    }
    let (_, mine, _) = app
        .call_as(Some(KEY_B), Method::GET, "/api/v1/tasks?limit=1000", None)
        .await;
    let ids: Vec<&str> = mine["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [b_task.as_str()], "B lists exactly its own task");
    let (_, q, _) = app
        .call_as(Some(KEY_B), Method::GET, "/api/v1/queues/default", None)
        .await;
    assert_eq!(q["counts"]["scheduled"], 1, "B counts only its own: {q}");
    assert_eq!(
        q["totals"],
        json!({}),
        "no queue-wide totals for a tenant key"
    );
    assert_eq!(q["tenants"][0]["tenant"], "bolt");
    assert!(q["tenants"][0]["share"].is_null());
    let (_, q, _) = app
        .call_as(Some(ADMIN), Method::GET, "/api/v1/queues/default", None)
        .await;
    assert!(
        q["counts"]["scheduled"].as_i64().unwrap() >= 4,
        "admin counts all: {q}"
    );

    // A tenant key's submit without a tenant is its own; with another tenant, 403 and nothing
    // stored; a batch with one such item is refused whole.
    let id = submit_as(&app, KEY_B, json!({"payload": 3, "delay_ms": 600_000})).await;
    let (_, t, _) = app
        .call_as(
            Some(ADMIN),
            Method::GET,
            &format!("/api/v1/tasks/{id}"),
            None,
        )
        .await;
    assert_eq!(t["tenant"], "bolt");
    let batch = json!({"tasks": [{"payload": 1}, {"payload": 2, "tenant": "acme"}]});
    let (s, e, _) = app
        .call_as(
            Some(KEY_B),
            Method::POST,
            "/api/v1/tasks/batch",
            Some(&batch.to_string()),
        )
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert!(message(&e).starts_with("tasks[1].tenant"), "{e}");
    let (_, mine, _) = app
        .call_as(Some(KEY_B), Method::GET, "/api/v1/tasks?limit=1000", None)
        .await;
    assert_eq!(
        mine["tasks"].as_array().unwrap().len(),
        2,
        "nothing of the batch stored"
    );
}

// Goal: a key limited to some queues cannot submit to, list, read, count or stream the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_limited_key_cannot_reach_other_queues() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_with_keys(dir.path());
    let in_default = submit_as(&app, KEY_A, json!({"payload": 1, "delay_ms": 600_000})).await;
    let in_jobs = submit_as(
        &app,
        KEY_A_JOBS,
        json!({"queue": "jobs", "payload": 1, "delay_ms": 600_000}),
    )
    .await;
    let (s, e, _) = app
        .call_as(
            Some(KEY_A_JOBS),
            Method::POST,
            "/api/v1/tasks",
            Some(r#"{"payload": 1}"#),
        )
        .await;
    assert_eq!(
        s,
        StatusCode::FORBIDDEN,
        "the default queue is not among its queues: {e}"
    );
    assert!(message(&e).contains("queue"), "{e}");
    for uri in [
        "/api/v1/tasks",
        "/api/v1/dlq?queue=default",
        "/api/v1/queues/default",
        "/api/v1/queues/default/tenants",
        "/api/v1/events?queue=default",
    ] {
        let (s, _, _) = app.call_as(Some(KEY_A_JOBS), Method::GET, uri, None).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{uri}");
    }
    let (s, _, _) = app
        .call_as(
            Some(KEY_A_JOBS),
            Method::GET,
            &format!("/api/v1/tasks/{in_default}"),
            None,
        )
        .await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "acme's own task, but in another queue"
    );
    let (s, _, _) = app
        .call_as(
            Some(KEY_A_JOBS),
            Method::GET,
            &format!("/api/v1/tasks/{in_jobs}"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let (_, qs, _) = app
        .call_as(Some(KEY_A_JOBS), Method::GET, "/api/v1/queues", None)
        .await;
    let names: Vec<&str> = qs["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["queue"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["jobs"], "{qs}");
    let (s, page, _) = app
        .call_as(
            Some(KEY_A_JOBS),
            Method::GET,
            "/api/v1/tasks?queue=jobs",
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(page["tasks"][0]["id"], in_jobs.as_str());
}

// Goal: a tenant key's listing cursors say nothing of the other tenants' tasks (the engine's
// cursor is an offset into an index all tenants share, so it is sealed), still page through
// exactly the key's own tasks, and work for that tenant only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_listing_cursors_are_sealed_and_page_through_own_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_with_keys(dir.path());
    let delayed = |t: &str| json!({"tenant": t, "payload": 1, "delay_ms": 600_000}).to_string();
    let many: Vec<Value> = (0..40)
        .map(|i| serde_json::from_str(&delayed(if i % 8 == 0 { "bolt" } else { "acme" })).unwrap())
        .collect();
    let (s, _, _) = app
        .call_as(
            Some(ADMIN),
            Method::POST,
            "/api/v1/tasks/batch",
            Some(&json!({ "tasks": many }).to_string()),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let mut seen = BTreeSet::new();
    let mut cursor = String::new();
    let mut cursors = Vec::new();
    for _ in 0..20 {
        let uri = format!("/api/v1/tasks?status=scheduled&limit=2&cursor={cursor}");
        let (s, page, _) = app.call_as(Some(KEY_B), Method::GET, &uri, None).await;
        assert_eq!(s, StatusCode::OK, "{page}");
        for t in page["tasks"].as_array().unwrap() {
            assert_eq!(t["tenant"], "bolt");
            assert!(seen.insert(t["id"].as_str().unwrap().to_string()), "{t}");
        }
        match page["next_cursor"].as_str() {
            Some(c) => {
                assert!(
                    !c.contains(':') && c.bytes().all(|b| b.is_ascii_hexdigit()),
                    "an opaque cursor: {c}"
                );
                cursor = c.to_string();
                cursors.push(cursor.clone());
            }
            None => break,
        }
    }
    assert_eq!(seen.len(), 5, "each of bolt's tasks once");
    assert!(!cursors.is_empty());
    let uri = |c: &str| format!("/api/v1/tasks?status=scheduled&limit=2&cursor={c}");
    let (s, _, _) = app
        .call_as(Some(KEY_A), Method::GET, &uri(&cursors[0]), None)
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "another tenant's cursor");
    let (s, _, _) = app
        .call_as(Some(KEY_B), Method::GET, &uri("2:0:10"), None)
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "a plain engine cursor");
    let (_, page, _) = app
        .call_as(
            Some(ADMIN),
            Method::GET,
            "/api/v1/tasks?status=scheduled&limit=2",
            None,
        )
        .await;
    assert!(
        page["next_cursor"].as_str().unwrap().contains(':'),
        "an admin's cursor is the engine's: {page}"
    );
}

/// One SSE message: (event, id, data as JSON).
type Sse = (String, String, Value);

/// Read messages from an event stream body until `done` holds for one, or panic after WAIT.
async fn read_until(body: &mut Body, buf: &mut String, done: impl Fn(&Sse) -> bool) -> Vec<Sse> {
    let deadline = Instant::now() + WAIT;
    let mut got = Vec::new();
    loop {
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let (mut event, mut id, mut data) = (String::new(), String::new(), String::new());
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim());
                }
            }
            if event.is_empty() && data.is_empty() {
                continue;
            }
            let m = (
                event,
                id,
                serde_json::from_str(&data).unwrap_or(Value::Null),
            );
            let stop = done(&m);
            got.push(m);
            if stop {
                return got;
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "the awaited event never came; got {got:?}");
        let frame = tokio::time::timeout(left, body.frame())
            .await
            .expect("the awaited event never came")
            .expect("the stream ended")
            .unwrap();
        if let Ok(bytes) = frame.into_data() {
            buf.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
}

async fn open_stream(app: &TestApp, key: &str, last_event_id: Option<&str>) -> Body {
    let mut req = Request::builder()
        .uri("/api/v1/events")
        .header("authorization", format!("Bearer {key}"));
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    let resp = app
        .router
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp.into_body()
}

// Goal: on the event stream a tenant key receives its own tenant's task transitions only: none
// of the other tenant's task ids, no queue settings events, and the same filter on the entries
// resent after a Last-Event-ID; the admin receives everything. Method: streams for A, B and the
// admin are opened, A and B each submit an echo task that a worker completes, the admin pauses
// and resumes the queue; each stream is read until its last expected entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_key_never_sees_another_tenants_events_on_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_with_keys(dir.path());
    let mut sa = open_stream(&app, KEY_A, None).await;
    let mut sb = open_stream(&app, KEY_B, None).await;
    let mut sadmin = open_stream(&app, ADMIN, None).await;
    let a = submit_as(&app, KEY_A, json!({"payload": "a"})).await;
    let b = submit_as(&app, KEY_B, json!({"payload": "b"})).await;
    wait_status(&app, &a, "completed").await;
    wait_status(&app, &b, "completed").await;
    for path in ["pause", "resume"] {
        let (s, _, _) = app
            .call_as(
                Some(ADMIN),
                Method::POST,
                &format!("/api/v1/queues/default/{path}"),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::OK);
    }
    // A last task of B's after the queue events, so B's stream is read past them.
    let b2 = submit_as(&app, KEY_B, json!({"payload": "b2"})).await;
    wait_status(&app, &b2, "completed").await;

    let completed = |id: &str| {
        let id = id.to_string();
        move |m: &Sse| m.2["task_id"] == id.as_str() && m.2["kind"] == "completed"
    };
    let mut buf = String::new();
    let got_b = read_until(&mut sb, &mut buf, completed(&b2)).await;
    let mut buf = String::new();
    let got_a = read_until(&mut sa, &mut buf, completed(&a)).await;
    let mut buf = String::new();
    let got_admin = read_until(&mut sadmin, &mut buf, completed(&b2)).await;

    let tasks_of = |got: &[Sse]| -> BTreeSet<String> {
        got.iter()
            .filter_map(|m| m.2["task_id"].as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(
        tasks_of(&got_b),
        [b.clone(), b2.clone()].into(),
        "{got_b:?}"
    );
    assert!(
        got_b
            .iter()
            .all(|m| m.0 == "task" && m.2["tenant"] == "bolt"),
        "{got_b:?}"
    );
    assert_eq!(tasks_of(&got_a), [a.clone()].into(), "{got_a:?}");
    assert!(tasks_of(&got_admin).is_superset(&[a.clone(), b.clone(), b2.clone()].into()));
    assert!(
        got_admin
            .iter()
            .any(|m| m.0 == "queue" && m.2["kind"] == "paused"),
        "the admin sees queue events: {got_admin:?}"
    );

    // A resend after Last-Event-ID goes through the same filter.
    let mut resent = open_stream(&app, KEY_B, Some("default/0-0")).await;
    let mut buf = String::new();
    let got = read_until(&mut resent, &mut buf, completed(&b2)).await;
    assert_eq!(tasks_of(&got), [b.clone(), b2.clone()].into(), "{got:?}");
    let (s, _, _) = app
        .call_as(
            Some(KEY_A_JOBS),
            Method::GET,
            "/api/v1/events?queue=jobs",
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
}

/// An app on the embedded store (no worker) with the test keys, a tenant allowance of 3 queues.
fn app_with_allowance() -> TestApp {
    let (app, _) = TestApp::embedded(false, vec![], |s| {
        s.with_auth(keys()).with_tenant_queues_max(3)
    });
    app
}

/// Send as `key`; the status and the JSON body.
async fn send(
    app: &TestApp,
    key: &str,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let body = body.map(|b| b.to_string());
    let (s, v, _) = app.call_as(Some(key), method, uri, body.as_deref()).await;
    (s, v)
}

// Goal: a tenant key that may use every queue brings at most --tenant-queues-max queues into
// existence (403 beyond, nothing stored, for a single submit and a batch alike); submits to
// queues that exist cost nothing of it, each tenant has its own allowance; an admin deletes a
// queue only when it holds no work (409 naming the counts), which frees the tenant's allowance,
// and a queue deleted then submitted to again is a fresh, visible queue. Method: the embedded
// store with an allowance of 3 (the spray attack of issue 42, item 1, at small scale).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_keys_create_queues_within_an_allowance_and_admins_delete_unused_ones() {
    let app = app_with_allowance();
    let task = |q: &str| json!({"queue": q, "payload": 1, "delay_ms": 600_000});
    submit_as(&app, ADMIN, task("shared")).await;
    let mut ids = Vec::new();
    for q in ["spray0", "spray1", "spray2"] {
        ids.push(submit_as(&app, KEY_A, task(q)).await);
    }
    let (s, e) = send(
        &app,
        KEY_A,
        Method::POST,
        "/api/v1/tasks",
        Some(task("spray3")),
    )
    .await;
    assert_eq!((s, code(&e)), (StatusCode::FORBIDDEN, "forbidden"), "{e}");
    assert!(message(&e).contains("--tenant-queues-max"), "{e}");
    assert!(message(&e).contains("3 queues"), "{e}");
    let batch = json!({"tasks": [task("spray1"), task("spray4")]});
    let (s, e) = send(
        &app,
        KEY_A,
        Method::POST,
        "/api/v1/tasks/batch",
        Some(batch),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{e}");
    for q in ["spray3", "spray4"] {
        let (s, _) = send(
            &app,
            ADMIN,
            Method::GET,
            &format!("/api/v1/queues/{q}"),
            None,
        )
        .await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{q} was never created");
    }
    let (_, st) = send(&app, ADMIN, Method::GET, "/api/v1/queues/spray1", None).await;
    assert_eq!(
        st["counts"]["scheduled"], 1,
        "nothing of the refused batch: {st}"
    );
    // Queues that exist are free: the admin's, and its own.
    submit_as(&app, KEY_A, task("shared")).await;
    submit_as(&app, KEY_A, task("spray0")).await;
    // Another tenant has an allowance of its own.
    submit_as(&app, KEY_B, task("bolt0")).await;

    // Deleting: admin only, refused while the queue holds work.
    let (s, _) = send(&app, KEY_A, Method::DELETE, "/api/v1/queues/spray1", None).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, e) = send(&app, ADMIN, Method::DELETE, "/api/v1/queues/spray1", None).await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "conflict"), "{e}");
    assert!(message(&e).contains("1 scheduled"), "{e}");
    let (s, _) = send(&app, ADMIN, Method::DELETE, "/api/v1/queues/nosuch", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // Cancelled, the task is finished: the queue holds no work and goes, its task with it.
    let (s, _) = send(
        &app,
        KEY_A,
        Method::POST,
        &format!("/api/v1/tasks/{}/cancel", ids[1]),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, d) = send(&app, ADMIN, Method::DELETE, "/api/v1/queues/spray1", None).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!(
        d,
        json!({"queue": "spray1", "deleted": true, "finished_deleted": 1})
    );
    let (s, _) = send(&app, ADMIN, Method::GET, "/api/v1/queues/spray1", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "deleted");
    let (s, _) = send(
        &app,
        ADMIN,
        Method::GET,
        &format!("/api/v1/tasks/{}", ids[1]),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "its finished task went with it");
    let (_, qs) = send(&app, ADMIN, Method::GET, "/api/v1/queues", None).await;
    let names: Vec<&str> = qs["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["queue"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bolt0", "shared", "spray0", "spray2"], "{qs}");
    // The allowance is acme's again, and the deleted name is a fresh queue.
    let again = submit_as(&app, KEY_A, task("spray1")).await;
    let (s, e) = send(
        &app,
        KEY_A,
        Method::POST,
        "/api/v1/tasks",
        Some(task("spray3")),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{e}");
    let (s, st) = send(&app, KEY_A, Method::GET, "/api/v1/queues/spray1", None).await;
    assert_eq!(
        (s, &st["counts"]["scheduled"]),
        (StatusCode::OK, &json!(1)),
        "{st}"
    );
    let (s, t) = send(
        &app,
        KEY_A,
        Method::GET,
        &format!("/api/v1/tasks/{again}"),
        None,
    )
    .await;
    assert_eq!((s, &t["queue"]), (StatusCode::OK, &json!("spray1")), "{t}");
}

// Goal: to a tenant key, a queue only other tenants use is exactly a queue that does not exist
// (the same 404 and message, and not listed); a key with a queues list sees its queues with
// its own counts whether or not they exist yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_only_other_tenants_use_is_a_missing_queue_to_a_tenant_key() {
    let app = app_with_allowance();
    submit_as(
        &app,
        KEY_B,
        json!({"queue": "bolts", "payload": 1, "delay_ms": 600_000}),
    )
    .await;
    let (s1, e1) = send(&app, KEY_A, Method::GET, "/api/v1/queues/bolts", None).await;
    let (s2, e2) = send(&app, KEY_A, Method::GET, "/api/v1/queues/nosuch", None).await;
    assert_eq!(
        (s1, s2),
        (StatusCode::NOT_FOUND, StatusCode::NOT_FOUND),
        "{e1} {e2}"
    );
    assert_eq!(
        message(&e1).replace("bolts", "Q"),
        message(&e2).replace("nosuch", "Q"),
        "the two answers cannot be told apart"
    );
    let (_, qs) = send(&app, KEY_A, Method::GET, "/api/v1/queues", None).await;
    assert_eq!(qs["queues"], json!([]), "{qs}");
    let (s, st) = send(&app, KEY_B, Method::GET, "/api/v1/queues/bolts", None).await;
    assert_eq!(
        (s, &st["counts"]["scheduled"]),
        (StatusCode::OK, &json!(1)),
        "{st}"
    );
    // A key limited to `jobs` sees `jobs` (no task of anyone's in it yet) with zero counts.
    let (s, st) = send(&app, KEY_A_JOBS, Method::GET, "/api/v1/queues/jobs", None).await;
    assert_eq!(
        (s, &st["counts"]["scheduled"]),
        (StatusCode::OK, &json!(0)),
        "{st}"
    );
    let (_, qs) = send(&app, KEY_A_JOBS, Method::GET, "/api/v1/queues", None).await;
    assert_eq!(qs["queues"][0]["queue"], "jobs", "{qs}");
}

// Goal: a by-id lookup without `?queue=` searches at most orq::client::LOOKUP_QUEUES_MAX queues:
// beyond, a 400 asking for the queue (and with it, the task is found); a tenant key with a
// queues list searches only its own queues. Method: the admin makes one more queue than the
// bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_without_a_queue_is_bounded() {
    let app = app_with_allowance();
    let jobs = submit_as(
        &app,
        KEY_A_JOBS,
        json!({"queue": "jobs", "payload": 1, "delay_ms": 600_000}),
    )
    .await;
    let mut last = String::new();
    for i in 0..orq::client::LOOKUP_QUEUES_MAX {
        last = submit_as(
            &app,
            ADMIN,
            json!({"queue": format!("q{i:03}"), "payload": 1, "delay_ms": 600_000}),
        )
        .await;
    }
    let (s, e) = send(
        &app,
        ADMIN,
        Method::GET,
        &format!("/api/v1/tasks/{last}"),
        None,
    )
    .await;
    assert_eq!(
        (s, code(&e)),
        (StatusCode::BAD_REQUEST, "bad_request"),
        "{e}"
    );
    assert!(message(&e).contains("?queue="), "{e}");
    let uri = format!(
        "/api/v1/tasks/{last}?queue=q{:03}",
        orq::client::LOOKUP_QUEUES_MAX - 1
    );
    let (s, t) = send(&app, ADMIN, Method::GET, &uri, None).await;
    assert_eq!((s, &t["id"]), (StatusCode::OK, &json!(last)), "{t}");
    let (s, t) = send(
        &app,
        KEY_A_JOBS,
        Method::GET,
        &format!("/api/v1/tasks/{jobs}"),
        None,
    )
    .await;
    assert_eq!(
        (s, &t["id"]),
        (StatusCode::OK, &json!(jobs)),
        "only its own queue is searched: {t}"
    );
}

// Goal: one key cannot take every event stream: past key_slots::SSE_CLIENTS_PER_KEY_MAX open
// streams its next is a 503 naming the per-key cap, while other keys (the admin's too) still
// open theirs; a stream that closes gives its slot back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_cannot_take_every_event_stream() {
    let app = app_with_allowance();
    let mut held = Vec::new();
    for _ in 0..orq_server::key_slots::SSE_CLIENTS_PER_KEY_MAX {
        held.push(open_stream(&app, KEY_A, None).await);
    }
    let (s, e) = send(&app, KEY_A, Method::GET, "/api/v1/events", None).await;
    assert_eq!(
        (s, code(&e)),
        (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        "{e}"
    );
    assert!(message(&e).contains("this key has"), "{e}");
    let _b = open_stream(&app, KEY_B, None).await;
    let _admin = open_stream(&app, ADMIN, None).await;
    held.pop();
    let _again = open_stream(&app, KEY_A, None).await;
}

// Goal: a tenant key's event ids reveal nothing of other tenants' events (a stream id's sequence
// counts every event of the queue): its `id:` and `stream_id` are sealed, and sent back as
// Last-Event-ID they resume the stream after that event; the admin's are stream ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_keys_event_ids_are_sealed_and_resume_its_stream() {
    let app = app_with_allowance();
    let mut sa = open_stream(&app, KEY_A, None).await;
    let mut sadmin = open_stream(&app, ADMIN, None).await;
    let first = submit_as(&app, KEY_A, json!({"payload": 1})).await;
    let mut buf = String::new();
    let got = read_until(&mut sa, &mut buf, |m| m.2["task_id"] == first.as_str()).await;
    let (_, id, data) = got.last().unwrap().clone();
    let (queue, event_id) = id.split_once('/').unwrap();
    assert_eq!(queue, "default");
    assert!(
        event_id.len() > 40 && event_id.bytes().all(|b| b.is_ascii_hexdigit()),
        "sealed, not <ms>-<n>: {id}"
    );
    assert_eq!(data["stream_id"], event_id, "{data}");
    let mut abuf = String::new();
    let got = read_until(&mut sadmin, &mut abuf, |m| m.2["task_id"] == first.as_str()).await;
    let admin_id = &got.last().unwrap().1;
    assert!(
        orq_server::live::parse_stream_id(admin_id.split_once('/').unwrap().1).is_some(),
        "{admin_id}"
    );
    // Resumed after the sealed id: the next task's events, not the first's again.
    let second = submit_as(&app, KEY_A, json!({"payload": 2})).await;
    let mut resumed = open_stream(&app, KEY_A, Some(&id)).await;
    let mut buf = String::new();
    let got = read_until(&mut resumed, &mut buf, |m| {
        m.2["task_id"] == second.as_str()
    })
    .await;
    assert!(
        got.iter().all(|m| m.2["task_id"] != first.as_str()),
        "{got:?}"
    );
    // A sealed id is the key's tenant's only: bolt's key cannot open acme's.
    let req = Request::builder()
        .uri("/api/v1/events")
        .header("authorization", format!("Bearer {KEY_B}"))
        .header("last-event-id", id.as_str())
        .body(Body::empty())
        .unwrap();
    let resp = app.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
}

/// An `orq` child process, killed and reaped when dropped.
struct Proc(std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn orq(args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_orq"));
    c.args(args)
        .env("ORQ_LOG", "warn")
        .env_remove("ORQ_REDIS_URL")
        .env_remove("ORQ_API_KEYS")
        .env_remove("ORQ_LISTEN");
    c
}

async fn wait_ready(base: &str) {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(r) = http.get(format!("{base}/api/v1/readyz")).send().await {
            if r.status().is_success() {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "orq never became ready at {base}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// Goal: the startup rules of the binary: a malformed keys file stops orq with exit code 2 and a
// message naming the problem; without keys a non-loopback address is refused (exit 2) unless
// --insecure-no-auth, and a loopback one says authentication is off; `orq key new` prints a key
// and an entry that, appended to a file given with --api-keys, lets that key in while requests
// without it get 401. Method: real `orq serve` processes on the embedded store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_enforces_the_keys_file_and_the_loopback_rule() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[key]]\nname = \"a\"\nsha256 = \"12\"\nrole = \"admin\"\n",
    )
    .unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let out = orq(&["serve", "--no-dashboard-build", "--listen", &listen])
        .arg("--api-keys")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--api-keys") && err.contains("64 hex"),
        "{err}"
    );

    let public = format!("0.0.0.0:{}", free_port());
    let out = orq(&["serve", "--no-dashboard-build", "--listen", &public])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to listen") && err.contains("--insecure-no-auth"),
        "{err}"
    );

    // Loopback without keys: says so, and serves.
    let mut child = orq(&["serve", "--no-dashboard-build", "--listen", &listen])
        .env("ORQ_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_ready(&format!("http://{listen}")).await;
    // ... to loopback names only: a name that a web page's owner points at 127.0.0.1 (DNS
    // rebinding) is refused.
    let http = reqwest::Client::new();
    let with_host = |base: &str, host: &str| {
        http.get(format!("{base}/api/v1/queues"))
            .header("host", host)
            .send()
    };
    let refused = with_host(&format!("http://{listen}"), "rebind.example:8080")
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let v: Value = refused.json().await.unwrap();
    assert!(message(&v).contains("DNS rebinding"), "{v}");
    let port = listen.rsplit_once(':').unwrap().1;
    let ok = with_host(&format!("http://{listen}"), &format!("localhost:{port}"))
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("authentication is off") && text.contains("loopback only"),
        "{text}"
    );

    // --insecure-no-auth lets a non-loopback address through.
    let port = free_port();
    let _insecure = Proc(
        orq(&["serve", "--no-dashboard-build", "--insecure-no-auth"])
            .args(["--listen", &format!("0.0.0.0:{port}")])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_ready(&format!("http://127.0.0.1:{port}")).await;
    // Something in front of it answers for the names it is reached by.
    let proxied = with_host(&format!("http://127.0.0.1:{port}"), "orq.example")
        .await
        .unwrap();
    assert_eq!(proxied.status(), StatusCode::OK);

    // orq key new → keys file → the key works, no key is 401.
    let made = orq(&["key", "new", "--tenant", "acme", "--name", "acme-web"])
        .output()
        .unwrap();
    assert!(made.status.success());
    let text = String::from_utf8(made.stdout).unwrap();
    let (key, entry) = text.split_once('\n').unwrap();
    assert!(key.starts_with("orq_") && key.len() == 68, "{key}");
    assert!(!entry.contains(key), "the file entry holds only the hash");
    let admin = orq(&["key", "new", "--admin"]).output().unwrap();
    let admin = String::from_utf8(admin.stdout).unwrap();
    let (admin_key, admin_entry) = admin.split_once('\n').unwrap();
    // A worker key limited to tenants: its entry lists them (and the file below must parse).
    let worker = orq(&["key", "new", "--worker", "--tenants", "globex,acme"])
        .output()
        .unwrap();
    assert!(worker.status.success());
    let worker = String::from_utf8(worker.stdout).unwrap();
    let (_, worker_entry) = worker.split_once('\n').unwrap();
    assert!(
        worker_entry.contains("role = \"worker\"")
            && worker_entry.contains("tenants = [\"acme\", \"globex\"]"),
        "{worker_entry}"
    );
    for bad in [
        &["key", "new", "--tenant", "acme", "--tenants", "acme"][..],
        &["key", "new", "--worker", "--tenants", "a b"][..],
    ] {
        let out = orq(bad).output().unwrap();
        assert!(!out.status.success(), "{bad:?}");
    }
    let file = dir.path().join("keys.toml");
    std::fs::write(&file, format!("{entry}\n{admin_entry}\n{worker_entry}")).unwrap();
    let port = free_port();
    let _secured = Proc(
        orq(&["serve", "--no-dashboard-build"])
            .args(["--listen", &format!("0.0.0.0:{port}")])
            .env("ORQ_API_KEYS", &file)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    wait_ready(&base).await;
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{base}/api/v1/tasks"))
        .json(&json!({"payload": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Bearer"));
    let r = http
        .post(format!("{base}/api/v1/tasks"))
        .bearer_auth(key)
        .json(&json!({"payload": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let t: Value = r.json().await.unwrap();
    assert_eq!(t["tenant"], "acme");
    let r = http
        .post(format!("{base}/api/v1/queues/default/pause"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = http
        .post(format!("{base}/api/v1/queues/default/pause"))
        .bearer_auth(admin_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}
