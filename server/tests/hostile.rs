//! Hostile input: names that could break out of a Redis key, ids that are not ULIDs, bodies too
//! large, too deep or not UTF-8, numbers and times out of range, clients that send slowly, a
//! flood of submits from one tenant, handler errors too long to store, an `http` task redirected
//! outside its allow-list, a Redis that may evict orq's keys, and web pages that would write
//! cross-site, rebind a name to orq or frame it. Every answer must be the typed 4xx the README
//! promises (the fixture fails on any 5xx but 503).
//!
//! Why this file is long (about 1,330 lines): each kind of hostile input is its own test with its own
//! table of inputs (the names test alone is about 150 lines). Each file under `tests/` is its own
//! binary linking the whole server, so they stay together instead of adding binaries.

mod common;

use axum::http::{Method, StatusCode};
use common::{code, message, TestApp, WAIT};
use orq::Clock;
use orq_server::ratelimit::SubmitLimiter;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const POST: Method = Method::POST;
const GET: Method = Method::GET;
const PUT: Method = Method::PUT;

fn pct(s: &str) -> String {
    s.bytes().map(|b| format!("%{b:02X}")).collect()
}

// Goal: a queue, tenant or type name with `{`, `}`, `:`, `*`, a space, a control character or
// non-ASCII, empty or longer than 64 bytes, is refused with 400 naming the field, wherever it
// comes in (JSON body, path, query string, Last-Event-ID), and never reaches the store: no key
// or argument of any script call contains it. Method: the embedded store behind a recorder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_are_refused_before_any_key_is_built() {
    let (app, recorder) = TestApp::embedded(false, vec![], |s| s);
    let long = "n".repeat(65);
    let names = [
        "{q}", "a}b", "a{b", "a:b", "a*", "a b", "a\u{1}b", "a\tb", "a\nb", "a\u{7f}b", "é", "",
        &long,
    ];
    for name in names {
        let j = serde_json::to_string(name).unwrap();
        let bodies = [
            (
                "POST",
                "/api/v1/tasks",
                format!(r#"{{"payload": 1, "queue": {j}}}"#),
                "queue",
            ),
            (
                "POST",
                "/api/v1/tasks",
                format!(r#"{{"payload": 1, "tenant": {j}}}"#),
                "tenant",
            ),
            (
                "POST",
                "/api/v1/tasks",
                format!(r#"{{"payload": 1, "type": {j}}}"#),
                "type",
            ),
            (
                "POST",
                "/api/v1/tasks/batch",
                format!(r#"{{"tasks": [{{"payload": 1}}, {{"payload": 1, "queue": {j}}}]}}"#),
                "tasks[1].queue",
            ),
            (
                "POST",
                "/api/v1/dlq/replay",
                format!(r#"{{"queue": {j}}}"#),
                "queue",
            ),
            (
                "POST",
                "/api/v1/dlq/replay",
                format!(r#"{{"tenant": {j}}}"#),
                "tenant",
            ),
            (
                "POST",
                "/api/v1/dlq/replay",
                format!(r#"{{"type": {j}}}"#),
                "type",
            ),
        ];
        for (m, uri, body, field) in bodies {
            let (s, e) = app.call(m.parse().unwrap(), uri, Some(&body)).await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{uri} {body}: {e}");
            assert!(message(&e).contains(field), "{uri} {body}: {e}");
        }
        let p = pct(name);
        let mut paths: Vec<(Method, String)> = vec![
            (GET, format!("/api/v1/queues/{p}")),
            (GET, format!("/api/v1/queues/{p}/tenants")),
            (PUT, format!("/api/v1/queues/{p}/tenants/ok")),
            (PUT, format!("/api/v1/queues/ok/tenants/{p}")),
            (POST, format!("/api/v1/queues/{p}/pause")),
            (POST, format!("/api/v1/queues/{p}/resume")),
            (POST, format!("/api/v1/queues/{p}/drain")),
            (PUT, format!("/api/v1/queues/{p}/settings")),
            (GET, format!("/api/v1/queues/{p}/metrics")),
            (GET, format!("/api/v1/queues/{p}/workers")),
            (GET, format!("/api/v1/tasks?queue={p}")),
            (GET, format!("/api/v1/tasks?tenant={p}")),
            (GET, format!("/api/v1/tasks?type={p}")),
            (GET, format!("/api/v1/dlq?queue={p}")),
            (GET, format!("/api/v1/dlq?tenant={p}")),
            (
                GET,
                format!("/api/v1/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV?queue={p}"),
            ),
            (
                POST,
                format!("/api/v1/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV/cancel?queue={p}"),
            ),
            (
                POST,
                format!("/api/v1/dlq/01ARZ3NDEKTSV4RRFFQ69G5FAV/replay?queue={p}"),
            ),
            (
                Method::DELETE,
                format!("/api/v1/dlq/01ARZ3NDEKTSV4RRFFQ69G5FAV?queue={p}"),
            ),
            (GET, format!("/api/v1/events?queue={p}")),
        ];
        if name.is_empty() {
            // An empty path segment is another route (or none): 404 or 405, not a name.
            paths.retain(|(_, u)| !u.contains("//") && !u.ends_with('/'));
        }
        for (m, uri) in paths {
            let body = (m == PUT).then_some("{}");
            let (s, e) = app.call(m.clone(), &uri, body).await;
            let field = if uri.contains("/queues/ok/tenants/") || uri.contains("tenant=") {
                "tenant"
            } else if uri.contains("type=") {
                "type"
            } else {
                "queue"
            };
            assert_eq!(s, StatusCode::BAD_REQUEST, "{m} {uri}: {e}");
            assert!(message(&e).contains(field), "{m} {uri}: {e}");
        }
        // Raw in the header when a header can carry it, else percent-encoded.
        let printable = !name.is_empty() && name.bytes().all(|b| (0x20..0x7f).contains(&b));
        let in_header = if printable {
            name.to_string()
        } else {
            p.clone()
        };
        let req = axum::http::Request::builder()
            .uri("/api/v1/events")
            .header("last-event-id", format!("{in_header}/1-0"))
            .body(axum::body::Body::empty())
            .unwrap();
        let resp = tower::ServiceExt::oneshot(app.router.clone(), req)
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "Last-Event-ID {p}");
    }
    // Idempotency keys have their own alphabet (':' allowed) and are checked the same way.
    for key in ["{k}", "k*", "k k", "k\u{0}", &"k".repeat(129)] {
        let body = json!({"payload": 1, "idempotency_key": key}).to_string();
        let (s, e) = app.call(POST, "/api/v1/tasks", Some(&body)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{key:?}: {e}");
        assert!(message(&e).contains("idempotency_key"), "{e}");
    }
    assert!(recorder.len() > 0, "the recorder sees the store's calls");
    for name in names
        .iter()
        .filter(|n| !n.is_empty() && n.len() <= 64 && **n != "é")
    {
        assert!(
            recorder.never_saw(name.as_bytes()),
            "{name:?} reached the store"
        );
    }
    for needle in ["{k}", "k*", "k k", "{q}", "a*"] {
        assert!(recorder.never_saw(needle.as_bytes()), "{needle:?}");
    }
    assert!(recorder.never_saw("é".as_bytes()));
}

// Goal: a task id that is not a ULID names no task: 404 on every by-id route, and nothing of it
// reaches the store; lowercase ULIDs are the same id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_that_are_not_ulids_name_no_task() {
    let (app, recorder) = TestApp::embedded(false, vec![], |s| s);
    let bad = [
        "nope",
        "01ARZ3NDEKTSV4RRFFQ69G5FA",
        "01ARZ3NDEKTSV4RRFFQ69G5FAVX",
        "81ARZ3NDEKTSV4RRFFQ69G5FAV", // overflows 128 bits
        "01ARZ3NDEKTSV4RRFFQ69G5FAU", // U is not Crockford base32
        "01ARZ3NDEKTSV4RRFFQ69G5F%7B",
        "01ARZ3NDEKTSV4RRFFQ69G5FA%2A",
        "01ARZ3NDEKTSV4RRFFQ69G5F%00",
        "%F0%9F%98%80",
        "-1",
        "99999999999999999999999999",
    ];
    for id in bad {
        for (m, uri) in [
            (GET, format!("/api/v1/tasks/{id}")),
            (POST, format!("/api/v1/tasks/{id}/cancel")),
            (POST, format!("/api/v1/dlq/{id}/replay")),
            (Method::DELETE, format!("/api/v1/dlq/{id}")),
        ] {
            let (s, e) = app.call(m.clone(), &uri, None).await;
            assert_eq!(s, StatusCode::NOT_FOUND, "{m} {uri}: {e}");
            assert_eq!(code(&e), "not_found", "{e}");
        }
    }
    for needle in [
        "01ARZ3NDEKTSV4RRFFQ69G5FA",
        "81ARZ3",
        "NOPE",
        "nope",
        "9999999999",
    ] {
        assert!(recorder.never_saw(needle.as_bytes()), "{needle}");
    }
}

// Goal: bodies too large answer 413, too deep or malformed JSON and invalid UTF-8 answer 400,
// on every route that takes a body, each as a typed JSON error; none crashes the server (a
// million nested brackets included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_deep_and_malformed_bodies_get_typed_errors() {
    let (app, _) = TestApp::embedded(false, vec![], |s| s);
    let small_body_routes = [
        (PUT, "/api/v1/queues/q/tenants/t"),
        (PUT, "/api/v1/queues/q/settings"),
        (POST, "/api/v1/dlq/replay"),
    ];
    // 64 KiB routes: a body of 65 KiB is 413.
    let big = format!(r#"{{"x": "{}"}}"#, "a".repeat(65 * 1024));
    for (m, uri) in &small_body_routes {
        let (s, e) = app.call(m.clone(), uri, Some(&big)).await;
        assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{uri}: {e}");
        assert_eq!(code(&e), "payload_too_large");
    }
    // A batch item's payload over 1 MiB: 413 naming the item.
    let item = format!(
        r#"{{"tasks": [{{"payload": "{}"}}]}}"#,
        "x".repeat((1 << 20) + 1)
    );
    let (s, e) = app.call(POST, "/api/v1/tasks/batch", Some(&item)).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{e}");
    assert!(message(&e).starts_with("tasks[0].payload"), "{e}");
    // A single submit body over its own limit (1 MiB + 64 KiB): 413 before parsing.
    let huge = format!(r#"{{"payload": 1, "x": "{}"}}"#, "x".repeat(2 << 20));
    let (s, e) = app.call(POST, "/api/v1/tasks", Some(&huge)).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{e}");

    // Depth: a payload 127 deep is stored, 128 deep is refused (serde_json's recursion limit),
    // half a million deep too (no stack overflow), wherever the nesting is.
    let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let (s, e) = app
        .call(
            POST,
            "/api/v1/tasks",
            Some(&format!(r#"{{"payload": {}}}"#, nest(127))),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    for (body, mentions) in [
        (format!(r#"{{"payload": {}}}"#, nest(128)), "payload"),
        (format!(r#"{{"payload": {}}}"#, nest(500_000)), "payload"),
        (
            format!(r#"{{"payload": 1, "backoff": {}}}"#, nest(100_000)),
            "backoff",
        ),
        (
            format!(r#"{{"payload": 1, "colour": {}}}"#, nest(100_000)),
            "colour",
        ),
        (format!(r#"{{"payload": {}"#, "[".repeat(1_000_000)), ""),
    ] {
        let (s, e) = app.call(POST, "/api/v1/tasks", Some(&body)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{}: {e}", &body[..40]);
        assert!(message(&e).contains(mentions), "{e}");
        assert_eq!(code(&e), "bad_request");
    }
    let deep_batch = format!(r#"{{"tasks": {}}}"#, nest(1_000_000));
    let (s, _) = app
        .call(POST, "/api/v1/tasks/batch", Some(&deep_batch))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    for (m, uri) in &small_body_routes {
        let (s, e) = app
            .call(
                m.clone(),
                uri,
                Some(&format!(r#"{{"x": {}}}"#, nest(30_000))),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {e}");
    }

    // Invalid UTF-8 (raw bytes, and lone surrogates as escapes) on every body route.
    let raw: &[u8] = b"{\"payload\": \"\xc3\x28\"}";
    for (m, uri) in [
        (POST, "/api/v1/tasks"),
        (POST, "/api/v1/tasks/batch"),
        (PUT, "/api/v1/queues/q/tenants/t"),
        (PUT, "/api/v1/queues/q/settings"),
        (POST, "/api/v1/dlq/replay"),
    ] {
        let (s, e) = app.call_bytes(m.clone(), uri, Some(raw.to_vec())).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {e}");
        assert_eq!(code(&e), "bad_request", "{uri}: {e}");
    }
    for bad in [r#""\ud800""#, r#""\udfff""#, r#"{"\ud800": 1}"#] {
        let (s, e) = app
            .call(
                POST,
                "/api/v1/tasks",
                Some(&format!(r#"{{"payload": {bad}}}"#)),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {e}");
    }
    let (s, _) = app
        .call_bytes(
            POST,
            "/api/v1/tasks",
            Some(b"{\"queue\": \"q\xff\", \"payload\": 1}".to_vec()),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // Not JSON at all, or JSON of the wrong shape.
    for body in [
        "\u{feff}{\"payload\": 1}",
        "null",
        "{\"payload\": 1, \"payload\": 2}",
        "{}",
    ] {
        let (s, e) = app.call(POST, "/api/v1/tasks", Some(body)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body:?}: {e}");
    }
}

// Goal: numbers out of range (negative, too large for their type, fractional where an integer
// is expected, beyond f64) and run_at far in the past or future are refused with 400 naming
// the field; the edges inside the range are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_numbers_and_times_are_refused() {
    let (app, _) = TestApp::embedded(false, vec![], |s| s);
    let now_ms = orq::SystemClock.now_ms();
    let at = |ms: u64| orq_server::model::format_time_ms(ms);
    let day = 86_400_000u64;
    let submits = [
        (r#""priority": 9223372036854775807"#, "priority"),
        (r#""priority": -9223372036854775809"#, "priority"),
        (r#""priority": 1e2"#, "priority"),
        (r#""max_retries": -1"#, "max_retries"),
        (r#""max_retries": 1e30"#, "max_retries"),
        (r#""lease_ms": -1"#, "lease_ms"),
        (r#""lease_ms": 18446744073709551616"#, "lease_ms"),
        (r#""timeout_ms": -1"#, "timeout_ms"),
        (r#""timeout_ms": 86400001"#, "timeout_ms"),
        (r#""delay_ms": -1"#, "delay_ms"),
        (r#""delay_ms": 9223372036854775807"#, "delay_ms"),
        (r#""backoff": {"initial_ms": -1}"#, "backoff.initial_ms"),
        (r#""backoff": {"max_ms": 1e30}"#, "backoff.max_ms"),
        (r#""backoff": {"multiplier": 1e400}"#, "backoff.multiplier"),
        (r#""backoff": {"multiplier": -2}"#, "backoff.multiplier"),
        (r#""backoff": {"jitter": -0.1}"#, "backoff.jitter"),
        (r#""run_at": "0001-01-01T00:00:00Z""#, "run_at"),
        (r#""run_at": "1969-12-31T23:59:59Z""#, "run_at"),
        (r#""run_at": "9999-12-31T23:59:59Z""#, "run_at"),
        (r#""run_at": "+10000-01-01T00:00:00Z""#, "run_at"),
        (r#""run_at": "2026-02-30T00:00:00Z""#, "run_at"),
        (r#""run_at": "2026-01-01T00:00:00+99:00""#, "run_at"),
        (r#""run_at": 1700000000000"#, "run_at"),
    ];
    let too_late = format!(r#""run_at": "{}""#, at(now_ms + 367 * day));
    for (field, mentions) in submits
        .iter()
        .map(|(f, m)| (f.to_string(), *m))
        .chain([(too_late, "run_at")])
    {
        let body = format!(r#"{{"payload": 1, {field}}}"#);
        let (s, e) = app.call(POST, "/api/v1/tasks", Some(&body)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {e}");
        assert!(message(&e).starts_with(mentions), "{body}: {e}");
    }
    // Inside the range: the epoch (due at once), about 300 days ahead, the numeric edges.
    for (field, status) in [
        (r#""run_at": "1970-01-01T00:00:00Z""#.to_string(), "queued"),
        (
            format!(r#""run_at": "{}""#, at(now_ms + 300 * day)),
            "scheduled",
        ),
        (
            r#""priority": 9, "max_retries": 100, "lease_ms": 3600000, "timeout_ms": 86400000"#
                .to_string(),
            "queued",
        ),
        (format!(r#""delay_ms": {}"#, 366 * day), "scheduled"),
    ] {
        let body = format!(r#"{{"payload": 1, {field}}}"#);
        let (s, t) = app.call(POST, "/api/v1/tasks", Some(&body)).await;
        assert_eq!(s, StatusCode::CREATED, "{body}: {t}");
        assert_eq!(t["status"], status, "{body}: {t}");
    }
    for (body, mentions) in [
        (r#"{"weight": 1e309}"#, "weight"),
        (r#"{"weight": -0.0}"#, "weight"),
        (r#"{"max_inflight": -1}"#, "max_inflight"),
        (r#"{"max_inflight": 1e20}"#, "max_inflight"),
        (r#"{"max_inflight": 1000001}"#, "max_inflight"),
        (r#"{"max_queued": 18446744073709551616}"#, "max_queued"),
        (r#"{"rate_per_s": 0}"#, "rate_per_s"),
        (r#"{"burst": -5}"#, "burst"),
    ] {
        let (s, e) = app
            .call(PUT, "/api/v1/queues/default/tenants/t", Some(body))
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {e}");
        assert!(message(&e).contains(mentions), "{body}: {e}");
    }
    for (body, mentions) in [
        (r#"{"aging_step_ms": -1}"#, "aging_step_ms"),
        (r#"{"aging_step_ms": 3600001}"#, "aging_step_ms"),
        (r#"{"aging_step_ms": 1e30}"#, "aging_step_ms"),
        (
            r#"{"defaults": {"max_retries": -3}}"#,
            "defaults.max_retries",
        ),
    ] {
        let (s, e) = app
            .call(PUT, "/api/v1/queues/default/settings", Some(body))
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {e}");
        assert!(message(&e).contains(mentions), "{body}: {e}");
    }
    for (body, mentions) in [
        (r#"{"limit": -1}"#, "limit"),
        (r#"{"limit": 1e30}"#, "limit"),
        (r#"{"limit": 10001}"#, "limit"),
        (r#"{"limit": 0}"#, "limit"),
    ] {
        let (s, e) = app.call(POST, "/api/v1/dlq/replay", Some(body)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {e}");
        assert!(message(&e).contains(mentions), "{body}: {e}");
    }
    for (uri, mentions) in [
        ("/api/v1/tasks?limit=-1", "limit"),
        ("/api/v1/tasks?limit=99999999999999999999", "limit"),
        ("/api/v1/tasks?limit=1e3", "limit"),
        ("/api/v1/dlq?limit=-5", "limit"),
    ] {
        let (s, e) = app.call(GET, uri, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {e}");
        assert!(message(&e).contains(mentions), "{uri}: {e}");
    }
    for uri in [
        "/api/v1/queues/default/drain?timeout_ms=-1",
        "/api/v1/queues/default/drain?timeout_ms=18446744073709551616",
        "/api/v1/queues/default/drain?timeout_ms=60001",
    ] {
        let (s, e) = app.call(POST, uri, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {e}");
        assert!(message(&e).contains("timeout_ms"), "{uri}: {e}");
    }
}

/// A clock the test moves by hand (the submit limiter's time).
#[derive(Debug, Default)]
struct ManualClock(AtomicU64);

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
    fn sleep(&self, _ms: u64) -> futures_util::future::BoxFuture<'static, ()> {
        Box::pin(std::future::ready(()))
    }
}

// Goal: a flood of submits from one tenant is answered 429 with Retry-After once its bucket is
// empty, in every queue it names (one bucket per tenant, across queues), stores nothing more,
// and does not slow other tenants; the bucket
// refills with time; a batch counts one token per task and is refused whole. Method: a limiter
// of 2 tasks/s with a burst of 5 on a clock the test moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_submits_from_one_tenant_gets_429_with_retry_after() {
    let clock = Arc::new(ManualClock::default());
    clock.0.store(1_000_000, Ordering::SeqCst);
    let limiter = SubmitLimiter::new(2, 5, clock.clone());
    let (app, _) = TestApp::embedded(false, vec![], move |s| s.with_submit_limit(Some(limiter)));
    let flood = r#"{"payload": 1, "tenant": "flood"}"#;
    for i in 0..5 {
        let (s, e) = app.call(POST, "/api/v1/tasks", Some(flood)).await;
        assert_eq!(s, StatusCode::CREATED, "submit {i}: {e}");
    }
    let mut refused = 0;
    for _ in 0..50 {
        let (s, e, h) = app.call_as(None, POST, "/api/v1/tasks", Some(flood)).await;
        assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{e}");
        assert_eq!(code(&e), "limited");
        assert!(message(&e).contains("flood"), "{e}");
        let after: u64 = h["retry-after"].to_str().unwrap().parse().unwrap();
        assert!(after >= 1, "{after}");
        refused += 1;
    }
    assert_eq!(refused, 50);
    let (_, page) = app.call(GET, "/api/v1/tasks?tenant=flood", None).await;
    assert_eq!(
        page["tasks"].as_array().unwrap().len(),
        5,
        "refused submits stored nothing"
    );
    let (s, _) = app
        .call(
            POST,
            "/api/v1/tasks",
            Some(r#"{"payload": 1, "tenant": "calm"}"#),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "another tenant is not slowed");
    // The bucket is the tenant's across queues: naming new queues does not sidestep it.
    for q in ["other", "r1", "r2", "r3"] {
        let body = json!({"payload": 1, "tenant": "flood", "queue": q}).to_string();
        let (s, e, _) = app.call_as(None, POST, "/api/v1/tasks", Some(&body)).await;
        assert_eq!(
            s,
            StatusCode::TOO_MANY_REQUESTS,
            "queue {q}: the same tenant in another queue shares its bucket: {e}"
        );
    }
    // calm has 4 tokens: a batch of 5 of calm's is refused whole; one of 4 passes.
    let batch = |n: usize| {
        let tasks: Vec<Value> = (0..n)
            .map(|_| json!({"payload": 1, "tenant": "calm"}))
            .collect();
        json!({ "tasks": tasks }).to_string()
    };
    let (s, _) = app.call(POST, "/api/v1/tasks/batch", Some(&batch(5))).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
    let (_, page) = app.call(GET, "/api/v1/tasks?tenant=calm", None).await;
    assert_eq!(
        page["tasks"].as_array().unwrap().len(),
        1,
        "nothing of the refused batch"
    );
    let (s, _) = app.call(POST, "/api/v1/tasks/batch", Some(&batch(4))).await;
    assert_eq!(s, StatusCode::CREATED);
    // Half a second refills one token of flood's.
    clock.0.fetch_add(500, Ordering::SeqCst);
    let (s, _) = app.call(POST, "/api/v1/tasks", Some(flood)).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, _) = app.call(POST, "/api/v1/tasks", Some(flood)).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
}

/// Serve `router` on a fresh loopback port with the given timeouts; returns the address.
async fn serve_with(router: axum::Router, header_ms: u64, body_ms: u64) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = orq_server::serve::ServeLimits {
        header_timeout_ms: header_ms,
        body_timeout_ms: body_ms,
        ..Default::default()
    };
    tokio::spawn(orq_server::serve::serve(
        listener,
        router,
        limits,
        tokio_util::sync::CancellationToken::new(),
    ));
    addr
}

/// Connect, send `head` then `drip` one byte every 100 ms (for at most 30 s; nothing when
/// `None`), and read what the server sends until it closes the connection. Returns what was
/// read, or panics when the connection is still open after [`WAIT`]. Runs on a blocking thread:
/// plain std sockets.
fn trickle(addr: std::net::SocketAddr, head: Vec<u8>, drip: Option<u8>) -> Vec<u8> {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    s.write_all(&head).unwrap();
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return got, // reset by the server: closed too
        }
        assert!(
            start.elapsed() < WAIT,
            "the server kept a slow connection open for {WAIT:?}; read {:?}",
            String::from_utf8_lossy(&got)
        );
        let Some(byte) = drip.filter(|_| start.elapsed() < Duration::from_secs(30)) else {
            continue;
        };
        if s.write_all(&[byte]).is_err() {
            // The server closed its side; read what it sent before.
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            return got;
        }
    }
}

// Goal: slow-loris clients are cut off: one that trickles its headers, one that never sends
// anything, and one that trickles its body (answered 408 with a typed error first); a normal
// request on the same server still works. Method: the real server loop with a 500 ms header
// timeout and a 1 s body timeout, raw TCP clients sending a byte every 100 ms; the test only
// requires that each connection is closed within a generous deadline, never that it is quick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_loris_clients_are_disconnected() {
    let (app, _) = TestApp::embedded(false, vec![], |s| s);
    let addr = serve_with(app.router.clone(), 500, 1000).await;
    let slow_headers = tokio::task::spawn_blocking(move || {
        trickle(
            addr,
            b"GET /api/v1/healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ".to_vec(),
            Some(b'a'),
        )
    });
    let silent = tokio::task::spawn_blocking(move || trickle(addr, Vec::new(), None));
    let slow_body = tokio::task::spawn_blocking(move || {
        trickle(
            addr,
            b"POST /api/v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
              Content-Length: 100000\r\n\r\n{\"payload\": \""
                .to_vec(),
            Some(b'a'),
        )
    });
    let got = slow_headers.await.unwrap();
    assert!(
        !String::from_utf8_lossy(&got).contains("200 OK"),
        "a request whose headers never ended was served: {got:?}"
    );
    let _ = silent.await.unwrap();
    let got = String::from_utf8_lossy(&slow_body.await.unwrap()).into_owned();
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(got.contains("\"request_timeout\""), "{got}");

    let r = reqwest::get(format!("http://{addr}/api/v1/healthz"))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "the server still serves");
    let r = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/tasks"))
        .json(&json!({"payload": "fast"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
}

// Goal: the command line refuses limits that cannot work: a submit burst smaller than a batch,
// zero or huge timeouts, a lease linger over a second, no handler slots, no lanes or more than
// 16 (exit code 2, naming the flag).
#[test]
fn bad_limit_flags_are_refused_at_startup() {
    for (flag, value) in [
        ("--submit-burst-per-tenant", "999"),
        ("--header-timeout-ms", "0"),
        ("--body-timeout-ms", "600001"),
        ("--lease-linger-ms", "1001"),
        ("--concurrency", "10001"),
        ("--lanes", "0"),
        ("--lanes", "17"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_orq"))
            .args([
                "serve",
                "--no-dashboard-build",
                "--listen",
                "127.0.0.1:0",
                flag,
                value,
            ])
            .env("ORQ_LOG", "warn")
            .env_remove("ORQ_API_KEYS")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{flag}: {err}");
    }
}

/// A local HTTP server: `router` on a fresh loopback port; returns its base URL.
async fn local_server(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}")
}

async fn wait_dead(app: &TestApp, id: &str) -> Value {
    app.wait_task(id, "dead", |t| t["status"] == "dead").await
}

// Goal: an error message longer than the store keeps (2048 bytes, ERROR_MAX in lib/task.lua) is
// stored cut to exactly that size, as the task's last_error and in its attempts, and the API
// shows it (a multi-byte character cut in half shows as U+FFFD, never as a 500). Method: the
// `http` handler calls a local server that answers 400 with a 10 KB body, which becomes the
// task's permanent error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_errors_are_stored_truncated_to_2048_bytes() {
    use axum::routing::post;
    let base = local_server(
        axum::Router::new()
            .route(
                "/ascii",
                post(|| async { (StatusCode::BAD_REQUEST, "e".repeat(10_240)) }),
            )
            .route(
                "/emoji",
                post(|| async { (StatusCode::BAD_REQUEST, "😀".repeat(3_000)) }),
            ),
    )
    .await;
    let (app, _) = TestApp::embedded(true, vec![format!("{base}/")], |s| s);
    let submit = |path: &str| {
        json!({"type": "http", "max_retries": 0, "payload": {"url": format!("{base}/{path}")}})
            .to_string()
    };
    let (s, a) = app
        .call(POST, "/api/v1/tasks", Some(&submit("ascii")))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    let (s, e) = app
        .call(POST, "/api/v1/tasks", Some(&submit("emoji")))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    let a = wait_dead(&app, a["id"].as_str().unwrap()).await;
    let err = a["last_error"].as_str().unwrap();
    assert_eq!(err.len(), 2048, "cut to ERROR_MAX bytes");
    assert_eq!(err, format!("HTTP 400: {}", "e".repeat(2048 - 10)));
    let line = a["attempts"][0]["error"].as_str().unwrap();
    assert!(
        line.len() <= 2048 && line.starts_with("HTTP 400: eeee"),
        "the attempt's error is cut too: {} bytes",
        line.len()
    );
    let e = wait_dead(&app, e["id"].as_str().unwrap()).await;
    let err = e["last_error"].as_str().unwrap();
    assert!(err.starts_with("HTTP 400: 😀😀"), "{}", &err[..40]);
    // 2038 bytes of 4-byte emoji: 509 whole ones and half of the next, shown as U+FFFD.
    assert_eq!(err.matches('😀').count(), 509);
    assert!(err.ends_with('\u{FFFD}'), "{:?}", &err[err.len() - 8..]);
}

// Goal: the http handler never reaches an address outside its allow-list through a redirect:
// an allowed server answering 301, 302, 303, 307 or 308 towards a server that is not allowed
// sends the task to the DLQ with a redirect error, and the other server is never called.
// Method: two local axum servers; the second counts its requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_handler_never_follows_a_redirect_outside_its_allow_list() {
    use axum::routing::any;
    let hits = Arc::new(AtomicU64::new(0));
    let h = hits.clone();
    let forbidden = local_server(axum::Router::new().route(
        "/{*rest}",
        any(move || {
            let h = h.clone();
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                "reached"
            }
        }),
    ))
    .await;
    let target = format!("{forbidden}/secret");
    let allowed = local_server(axum::Router::new().route(
        "/r/{code}",
        any(move |axum::extract::Path(code): axum::extract::Path<u16>| {
            let target = target.clone();
            async move {
                (
                    StatusCode::from_u16(code).unwrap(),
                    [("location", target)],
                    "moved",
                )
            }
        }),
    ))
    .await;
    let (app, _) = TestApp::embedded(true, vec![format!("{allowed}/")], |s| s);
    // The other server is not allowed at submit either.
    let direct = json!({"type": "http", "payload": {"url": format!("{forbidden}/secret")}});
    let (s, _) = app
        .call(POST, "/api/v1/tasks", Some(&direct.to_string()))
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let mut ids = Vec::new();
    for code in [301, 302, 303, 307, 308] {
        let body = json!({"type": "http", "max_retries": 2, "backoff": {"initial_ms": 10},
            "payload": {"url": format!("{allowed}/r/{code}")}});
        let (s, t) = app
            .call(POST, "/api/v1/tasks", Some(&body.to_string()))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{t}");
        ids.push(t["id"].as_str().unwrap().to_string());
    }
    for id in &ids {
        let t = wait_dead(&app, id).await;
        assert_eq!(t["attempt"], 1, "a redirect is a permanent failure: {t}");
        assert!(
            t["last_error"].as_str().unwrap().contains("redirect"),
            "{t}"
        );
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the server outside the allow-list was reached"
    );
}

/// Send one inline command to the Redis at `port` and return its first reply line.
fn redis_command(port: u16, command: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("{command}\r\n").as_bytes()).unwrap();
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).trim_end().to_string()
}

// Goal: the startup check warns when Redis's maxmemory-policy can evict orq's keys: any
// allkeys-* policy (tasks lost), any volatile-* one (idempotency keys have a TTL), and not
// noeviction. Method: a private redis-server whose policy is set with CONFIG SET.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maxmemory_policy_that_can_evict_is_warned_about() {
    let redis = orq::testing::RedisServer::start();
    let port: u16 = redis
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let store = orq::RedisStore::connect(&redis.url()).await.unwrap();
    assert_eq!(
        orq_server::redis_checks::check_maxmemory(&store).await,
        Vec::<String>::new(),
        "a fresh Redis is noeviction"
    );
    assert_eq!(
        redis_command(port, "CONFIG SET maxmemory-policy allkeys-lru"),
        "+OK"
    );
    let w = orq_server::redis_checks::check_maxmemory(&store)
        .await
        .pop()
        .expect("a warning");
    assert!(w.contains("allkeys-lru") && w.contains("noeviction"), "{w}");
    assert_eq!(
        redis_command(port, "CONFIG SET maxmemory-policy volatile-ttl"),
        "+OK"
    );
    let w = orq_server::redis_checks::check_maxmemory(&store)
        .await
        .pop()
        .expect("a warning");
    assert!(
        w.contains("volatile-ttl") && w.contains("idempotency"),
        "{w}"
    );
    for p in [
        "allkeys-random",
        "allkeys-lfu",
        "volatile-lru",
        "volatile-random",
    ] {
        assert!(
            orq_server::redis_checks::maxmemory_warning(p).is_some(),
            "{p}"
        );
    }
}

// Goal: a web page on another site cannot make a visitor's browser write to orq (without API
// keys every request acts as an admin): a write whose Fetch Metadata or Origin says it comes from
// another site is refused with 403 naming why, before it reaches the store, on every kind of
// write route; orq's own pages, clients that are not browsers and reads pass. Method: the
// embedded store behind a recorder; requests with the headers a browser sends for a form post or
// a no-cors fetch (any Content-Type), then the same from the same origin and without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_site_writes_are_refused_before_the_store() {
    use axum::body::Body;
    let (app, recorder) = TestApp::embedded(false, vec![], |s| s);
    let send = |method: Method, uri: &str, headers: &[(&str, &str)], body: &str| {
        let mut req = axum::http::Request::builder()
            .method(method)
            .uri(uri)
            .header("host", "127.0.0.1:8080");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Body::from(body.to_string())).unwrap();
        let router = app.router.clone();
        async move { common::send(&router, req).await }
    };
    // Every refused write names the queue `csrfq`: no store call may carry it (background
    // pollers call the store meanwhile, so the calls are not counted).
    let task = r#"{"queue":"csrfq","type":"sleep","payload":{"ms":1}}"#;
    let writes: [(Method, &str, &str); 7] = [
        (POST, "/api/v1/tasks", task),
        (
            POST,
            "/api/v1/tasks/batch",
            r#"{"tasks":[{"queue":"csrfq","type":"sleep","payload":{"ms":1}}]}"#,
        ),
        (POST, "/api/v1/dlq/replay", r#"{"queue":"csrfq"}"#),
        (POST, "/api/v1/queues/csrfq/pause", ""),
        (PUT, "/api/v1/queues/csrfq/settings", r#"{"max_retries":1}"#),
        (
            Method::DELETE,
            "/api/v1/dlq/01ARZ3NDEKTSV4RRFFQ69G5FAV?queue=csrfq",
            "",
        ),
        (POST, "/api/v1/simulations", r#"{"seed":1}"#),
    ];
    let cross: [&[(&str, &str)]; 4] = [
        &[
            ("sec-fetch-site", "cross-site"),
            ("origin", "https://evil.example"),
            ("content-type", "text/plain"),
        ],
        &[
            ("sec-fetch-site", "same-site"),
            ("content-type", "application/x-www-form-urlencoded"),
        ],
        &[
            ("origin", "https://evil.example"),
            ("content-type", "text/plain"),
        ],
        &[("origin", "null"), ("content-type", "application/json")],
    ];
    for (method, uri, body) in &writes {
        for headers in cross {
            let (status, v) = send(method.clone(), uri, headers, body).await;
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "{method} {uri} {headers:?}: {v}"
            );
            assert_eq!(code(&v), "forbidden", "{v}");
            assert!(
                message(&v).starts_with("cross-site request refused ("),
                "{v}"
            );
        }
    }
    assert!(
        recorder.never_saw(b"csrfq"),
        "no refused write reached the store"
    );
    // The same submit from orq's own pages, and from a client that is not a browser.
    let json = ("content-type", "application/json");
    for headers in [
        vec![
            json,
            ("sec-fetch-site", "same-origin"),
            ("origin", "http://127.0.0.1:8080"),
        ],
        vec![json, ("origin", "http://127.0.0.1:8080")],
        vec![json],
    ] {
        let (status, v) = send(POST, "/api/v1/tasks", &headers, task).await;
        assert_eq!(status, StatusCode::CREATED, "{headers:?}: {v}");
    }
    // Reads pass (a page elsewhere cannot read the answer: orq sends no CORS headers).
    let (status, v) = send(GET, "/api/v1/queues", cross[0], "").await;
    assert_eq!(status, StatusCode::OK, "{v}");
}

// Goal: a keyless loopback orq cannot be reached through a name a web page's owner points at
// 127.0.0.1 (DNS rebinding: to the browser that page is then on orq's own origin): any request,
// read or write, API or dashboard, whose Host is not a loopback name is refused with 403 before
// the store; loopback names and requests without Host pass; an orq with the check off (keys, or
// --insecure-no-auth) answers any Host. Method: the embedded store behind a recorder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_orq_answers_only_loopback_host_names() {
    use axum::body::Body;
    let send = |router: axum::Router, method: Method, uri: &str, host: Option<&str>| {
        let mut req = axum::http::Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json");
        if let Some(h) = host {
            req = req.header("host", h);
        }
        let body = if uri.ends_with("/tasks") {
            r#"{"queue":"rebindq","payload":1}"#
        } else {
            ""
        };
        let req = req.body(Body::from(body)).unwrap();
        async move { common::send(&router, req).await }
    };
    let (app, recorder) = TestApp::embedded(false, vec![], |s| s.with_loopback_hosts_only(true));
    for host in [
        "rebind.example:8080",
        "rebind.example",
        "10.0.0.5:8080",
        "localhost.evil.example",
    ] {
        for (method, uri) in [
            (GET, "/api/v1/queues/rebindq"),
            (POST, "/api/v1/tasks"),
            (GET, "/"),
        ] {
            let (status, v) = send(app.router.clone(), method.clone(), uri, Some(host)).await;
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "{method} {uri} Host {host}: {v}"
            );
            assert!(message(&v).contains("DNS rebinding"), "{v}");
        }
    }
    // The refused requests name the queue `rebindq` (background pollers call the store
    // meanwhile, so the calls are not counted).
    assert!(
        recorder.never_saw(b"rebindq"),
        "no refused request reached the store"
    );
    for host in [
        Some("localhost:8080"),
        Some("127.0.0.1:8080"),
        Some("[::1]:8080"),
        None,
    ] {
        let (status, v) = send(app.router.clone(), POST, "/api/v1/tasks", host).await;
        assert_eq!(status, StatusCode::CREATED, "Host {host:?}: {v}");
    }
    // A second Host that is not loopback's, or an absolute-form target naming another host.
    let twice = axum::http::Request::get("/api/v1/queues")
        .header("host", "localhost:8080")
        .header("host", "rebind.example:8080")
        .body(Body::empty())
        .unwrap();
    let absolute = axum::http::Request::get("http://rebind.example/api/v1/queues")
        .header("host", "localhost:8080")
        .body(Body::empty())
        .unwrap();
    for req in [twice, absolute] {
        let what = format!("{:?} {:?}", req.uri(), req.headers());
        let (status, _) = common::send(&app.router, req).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{what}");
    }
    let (open, _) = TestApp::embedded(false, vec![], |s| s);
    let (status, v) = send(
        open.router.clone(),
        GET,
        "/api/v1/queues",
        Some("orq.example"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "the check off: {v}");
}

/// An answer's status and headers, and its body unless it is an event stream (which never ends).
async fn answer(
    router: &axum::Router,
    req: axum::http::Request<axum::body::Body>,
) -> (StatusCode, axum::http::HeaderMap, String) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let resp = router.clone().oneshot(req).await.unwrap();
    let (status, headers) = (resp.status(), resp.headers().clone());
    let stream = headers
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if stream {
        return (status, headers, String::new());
    }
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

/// `'sha256-<base64>'` of `text`: a CSP hash source, computed here rather than by the server.
fn csp_hash(text: &str) -> String {
    use base64::prelude::{Engine as _, BASE64_STANDARD};
    use sha2::Digest;
    format!(
        "'sha256-{}'",
        BASE64_STANDARD.encode(sha2::Sha256::digest(text.as_bytes()))
    )
}

/// Asserts that `h` (of an answer to `what` with `status`) carries the headers that keep web pages
/// from framing, sniffing or following orq, and returns its Content-Security-Policy ("" on a 304,
/// which has none: the browser keeps the one it stored with the page).
fn guarded(what: &str, status: StatusCode, h: &axum::http::HeaderMap) -> String {
    let one = |name: &str| {
        let all: Vec<_> = h.get_all(name).iter().collect();
        assert_eq!(all.len(), 1, "{what} ({status}): one {name}: {h:?}");
        all[0].to_str().unwrap().to_string()
    };
    assert_eq!(one("x-frame-options"), "DENY", "{what}");
    assert_eq!(one("x-content-type-options"), "nosniff", "{what}");
    assert_eq!(one("referrer-policy"), "same-origin", "{what}");
    if status == StatusCode::NOT_MODIFIED {
        assert!(h.get("content-security-policy").is_none(), "{what}: {h:?}");
        return String::new();
    }
    let csp = one("content-security-policy");
    for directive in [
        "frame-ancestors 'none'",
        "default-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
    ] {
        assert!(
            csp.split(';').any(|d| d.trim() == directive),
            "{what}: {directive} in {csp}"
        );
    }
    assert!(!csp.contains("unsafe"), "{what}: {csp}");
    csp
}

// Goal: no page can frame orq's answers, have them sniffed as another type or learn a dashboard
// address from the Referer: every answer carries X-Frame-Options DENY, nosniff, Referrer-Policy
// same-origin and a Content-Security-Policy with frame-ancestors 'none' (and no 'unsafe-*'),
// whatever it is: dashboard pages, files, the 404 page, the redirect, the typed 405, the page
// that says the dashboard is not built, every route the router declares (whatever it answers,
// the event stream included), unknown API routes, 401 and 403 from keys, the cross-site and Host
// refusals. An HTML page's policy allows exactly its own inline scripts and styles by hash; a 304
// carries the headers but no policy (the browser keeps the page's). Method: routers on the
// embedded store; a fake export whose pages hold inline scripts and a style, hashed here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_refuses_framing_and_sniffing_and_carries_the_policy() {
    use axum::body::Body;
    use axum::http::Request;
    use orq_server::auth::{toml_entry, ApiKeys, Auth, Scope};
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    let write = |p: &str, text: &str| {
        let p = out.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let (home_js, home_css, lost_js) = ("self.x=1", "p{color:red}", "lost()");
    write(
        "index.html",
        &format!(
            "<html><head><script src=\"/_next/static/a.js\"></script><script>{home_js}</script>\
             <style>{home_css}</style></head><body>home</body></html>"
        ),
    );
    write("tasks/index.html", "<html>tasks</html>");
    write(
        "404.html",
        &format!("<html><script>{lost_js}</script></html>"),
    );
    write("_next/static/a.js", "console.log(1)");
    let (app, _) = TestApp::embedded(false, vec![], |s| s.with_dashboard(out.clone()));
    let r = &app.router;
    let get = |uri: &str| Request::get(uri).body(Body::empty()).unwrap();

    // Dashboard pages: each policy lists its own inline elements, and only those.
    let (s, h, body) = answer(r, get("/")).await;
    assert_eq!((s, body.contains("home")), (StatusCode::OK, true));
    let csp = guarded("GET /", s, &h);
    assert!(
        csp.ends_with(&format!(
            "; script-src 'self' {}; style-src 'self' {}",
            csp_hash(home_js),
            csp_hash(home_css)
        )),
        "{csp}"
    );
    let (s, h, body) = answer(r, get("/nope")).await;
    assert_eq!((s, body.contains(lost_js)), (StatusCode::NOT_FOUND, true));
    let csp = guarded("GET /nope", s, &h);
    assert!(
        csp.ends_with(&format!("; script-src 'self' {}", csp_hash(lost_js))),
        "{csp}"
    );
    // Files, the redirect, the typed 405: the policy without hashes.
    let post = Request::post("/").body(Body::empty()).unwrap();
    for (what, req, want) in [
        ("asset", get("/_next/static/a.js"), StatusCode::OK),
        ("redirect", get("/tasks"), StatusCode::TEMPORARY_REDIRECT),
        ("405", post, StatusCode::METHOD_NOT_ALLOWED),
        ("a dotfile", get("/.env"), StatusCode::NOT_FOUND),
    ] {
        let (s, h, _) = answer(r, req).await;
        assert_eq!(s, want, "{what}");
        let csp = guarded(what, s, &h);
        assert!(
            !csp.contains("sha256") || what == "a dotfile",
            "{what}: {csp}"
        );
    }
    // Revalidations: 304 with the headers, without a policy.
    for uri in ["/", "/_next/static/a.js"] {
        let (_, h, _) = answer(r, get(uri)).await;
        let modified = h["last-modified"].clone();
        let req = Request::get(uri)
            .header("if-modified-since", modified)
            .body(Body::empty())
            .unwrap();
        let (s, h, _) = answer(r, req).await;
        assert_eq!(s, StatusCode::NOT_MODIFIED, "{uri}");
        guarded(uri, s, &h);
    }

    // Every route the router declares, whatever it answers to an empty request.
    for (method, path) in common::declared_routes() {
        let uri = path
            .replace("{id}", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
            .replace("{queue}", "hdrq")
            .replace("{tenant}", "t")
            .replace("{name}", "x.jsonl");
        let req = Request::builder()
            .method(method.as_str())
            .uri(&uri)
            .header("content-type", "application/json")
            .body(Body::empty())
            .unwrap();
        let (s, h, body) = answer(r, req).await;
        guarded(&format!("{method} {uri}"), s, &h);
        assert!(
            s.as_u16() < 500 || s.as_u16() == 503,
            "{method} {uri}: {s} {body}"
        );
    }
    // Unknown API routes, a method a route does not take, a malformed body.
    for (what, req) in [
        ("unknown route", get("/api/v1/nope")),
        (
            "405 on the API",
            Request::delete("/api/v1/tasks")
                .body(Body::empty())
                .unwrap(),
        ),
        (
            "400",
            Request::post("/api/v1/tasks")
                .header("content-type", "application/json")
                .body(Body::from("{"))
                .unwrap(),
        ),
        (
            "cross-site refusal",
            Request::post("/api/v1/tasks")
                .header("sec-fetch-site", "cross-site")
                .body(Body::from(r#"{"payload":1}"#))
                .unwrap(),
        ),
    ] {
        let (s, h, _) = answer(r, req).await;
        assert!(s.is_client_error(), "{what}: {s}");
        guarded(what, s, &h);
    }

    // The page that says the dashboard is not built: its style is allowed by hash.
    let (bare, _) = TestApp::embedded(false, vec![], |s| s);
    let (s, h, body) = answer(&bare.router, get("/")).await;
    assert_eq!(s, StatusCode::OK);
    let style = body
        .split_once("<style>")
        .and_then(|(_, rest)| rest.split_once("</style>"))
        .map(|(css, _)| css)
        .expect("the page's style element");
    let csp = guarded("not built", s, &h);
    assert!(
        csp.ends_with(&format!("; style-src 'self' {}", csp_hash(style))),
        "{csp}"
    );

    // Keys: 401 without one, 403 for a key without the right; the Host refusal.
    const ADMIN: &str = "orq_headers_test_admin";
    const TENANT: &str = "orq_headers_test_tenant";
    let keys = [
        toml_entry("ops", ADMIN, &Scope::Admin),
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
    let auth = Auth::Keys(Arc::new(ApiKeys::parse(&keys).unwrap()));
    let (keyed, _) = TestApp::embedded(false, vec![], |s| s.with_auth(auth));
    let (s, h, _) = answer(&keyed.router, get("/api/v1/queues")).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    guarded("401", s, &h);
    let req = Request::post("/api/v1/queues/hdrq/pause")
        .header("authorization", format!("Bearer {TENANT}"))
        .body(Body::empty())
        .unwrap();
    let (s, h, _) = answer(&keyed.router, req).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    guarded("403", s, &h);
    let (loopback, _) = TestApp::embedded(false, vec![], |s| s.with_loopback_hosts_only(true));
    let req = Request::get("/")
        .header("host", "rebind.example")
        .body(Body::empty())
        .unwrap();
    let (s, h, _) = answer(&loopback.router, req).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    guarded("Host refusal", s, &h);
}
