//! The dashboard's side of the server, through the router on a private Redis (and, for the
//! command line, a real `orq api` process): the static files at `/` with their cache headers,
//! the event stream (SSE), the workers and metrics views, and the simulation timelines; with the
//! bad inputs of each (a typed 4xx, never a 500).
//!
//! Why this file is long (about 1,070 lines): it covers the four things the dashboard uses
//! (static files, what a directory may not serve, and their build with npm, about 400 lines; the
//! event stream, about 190; workers and metrics, about 200; timelines, about 135) plus the real
//! `orq api` process that wires them.
//! Each file under `tests/` is its own binary linking the whole server, so they stay together
//! instead of adding binaries.

mod common;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::response::Response;
use common::{code, TestApp, WAIT};
use http_body_util::BodyExt;
use orq_server::dashboard::{ensure_built, BuildOutcome};
use orq_server::AppState;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use tower::ServiceExt;

const GET: Method = Method::GET;
const POST: Method = Method::POST;

async fn send(router: &axum::Router, req: Request<Body>) -> Response {
    router.clone().oneshot(req).await.unwrap()
}

fn get(uri: &str) -> Request<Body> {
    Request::builder().uri(uri).body(Body::empty()).unwrap()
}

async fn text(resp: Response) -> String {
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn header_of(resp: &Response, name: header::HeaderName) -> &str {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// A fake static export in `root/out` (pages, a hashed asset, a 404 page) and a file outside it.
fn fake_export(root: &Path) -> std::path::PathBuf {
    let out = root.join("out");
    write(&out.join("index.html"), "<html>queues home</html>");
    write(&out.join("tasks/index.html"), "<html>tasks page</html>");
    write(&out.join("task/index.html"), "<html>one task page</html>");
    write(&out.join("replay/index.html"), "<html>replay page</html>");
    write(&out.join("404.html"), "<html>custom not found</html>");
    write(
        &out.join("_next/static/chunks/app-3f9a.js"),
        "console.log('app')",
    );
    write(&root.join("secret.txt"), "do not serve me");
    out
}

// Goal: the static export is served at `/` (directories answer their index.html, the 404 page
// for missing files, hashed assets cached for good, HTML revalidated), while every path under
// /api stays the API with typed JSON errors, and nothing outside the directory is reachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_is_served_at_root_and_api_errors_stay_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = fake_export(dir.path());
    let app = TestApp::start_with(false, vec![], |s| s.with_dashboard(out.clone())).await;
    let r = &app.router;

    let resp = send(r, get("/")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(header_of(&resp, header::CONTENT_TYPE).starts_with("text/html"));
    assert_eq!(header_of(&resp, header::CACHE_CONTROL), "no-cache");
    assert_eq!(text(resp).await, "<html>queues home</html>");

    for (uri, want) in [
        ("/tasks/", "tasks page"),
        ("/task/?id=01ARZ3NDEKTSV4RRFFQ69G5FAV", "one task page"),
        ("/replay/", "replay page"),
    ] {
        let resp = send(r, get(uri)).await;
        assert_eq!(resp.status(), StatusCode::OK, "{uri}");
        assert_eq!(header_of(&resp, header::CACHE_CONTROL), "no-cache", "{uri}");
        assert!(text(resp).await.contains(want), "{uri}");
    }
    // Without the trailing slash: a redirect to the directory.
    let resp = send(r, get("/tasks")).await;
    assert!(resp.status().is_redirection(), "{}", resp.status());
    assert_eq!(header_of(&resp, header::LOCATION), "/tasks/");

    let resp = send(r, get("/_next/static/chunks/app-3f9a.js")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        header_of(&resp, header::CACHE_CONTROL),
        "public, max-age=31536000, immutable"
    );
    assert!(header_of(&resp, header::CONTENT_TYPE).contains("javascript"));
    let modified = header_of(&resp, header::LAST_MODIFIED).to_string();
    assert_eq!(text(resp).await, "console.log('app')");
    // Revalidation answers 304 and keeps the asset immutable; a page's 304 stays no-cache.
    for (uri, cache) in [
        (
            "/_next/static/chunks/app-3f9a.js",
            "public, max-age=31536000, immutable",
        ),
        ("/", "no-cache"),
    ] {
        let req = Request::builder()
            .uri(uri)
            .header(header::IF_MODIFIED_SINCE, &modified)
            .body(Body::empty())
            .unwrap();
        let resp = send(r, req).await;
        assert_eq!(resp.status(), StatusCode::NOT_MODIFIED, "{uri}");
        assert_eq!(header_of(&resp, header::CACHE_CONTROL), cache, "{uri}");
    }

    for uri in ["/no/such/page", "/_next/static/chunks/missing.js"] {
        let resp = send(r, get(uri)).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{uri}");
        assert_eq!(header_of(&resp, header::CACHE_CONTROL), "no-cache", "{uri}");
        assert_eq!(text(resp).await, "<html>custom not found</html>", "{uri}");
    }

    // Nothing outside the directory, however the path is spelled.
    for uri in [
        "/../secret.txt",
        "/..%2Fsecret.txt",
        "/%2e%2e/secret.txt",
        "/tasks/../../secret.txt",
    ] {
        let resp = send(r, get(uri)).await;
        let status = resp.status();
        let body = text(resp).await;
        assert!(!body.contains("do not serve me"), "{uri} served {body}");
        assert!(status.is_client_error(), "{uri}: {status}");
    }

    let resp = send(
        r,
        Request::builder()
            .method(POST)
            .uri("/")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(resp.headers()["allow"], "GET,HEAD");
    let v: Value = serde_json::from_str(&text(resp).await).unwrap();
    assert_eq!(code(&v), "method_not_allowed", "a typed error: {v}");

    // The API is untouched by the fallback: real routes answer, unknown ones are typed 404s.
    let (s, v) = app.call(GET, "/api/v1/queues", None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(v["queues"].is_array());
    for uri in ["/api/v1/nope", "/api/v1/", "/api", "/api/v2/tasks"] {
        let (s, v) = app.call(GET, uri, None).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{uri}");
        assert_eq!(code(&v), "not_found", "{uri}: {v}");
    }
}

// Goal: without a built dashboard, `/` says how to build it and the API goes on working; this
// holds both with no directory configured and with one that has no index.html.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_dashboard_says_how_to_build_it_and_the_api_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("out");
    std::fs::create_dir_all(&empty).unwrap();
    for app in [
        TestApp::start(false, vec![]).await,
        TestApp::start_with(false, vec![], |s| s.with_dashboard(empty.clone())).await,
        TestApp::start_with(false, vec![], |s| {
            s.with_dashboard(dir.path().join("nowhere"))
        })
        .await,
    ] {
        let resp = send(&app.router, get("/")).await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(header_of(&resp, header::CONTENT_TYPE).starts_with("text/html"));
        let page = text(resp).await;
        assert!(
            page.contains("npm ci &amp;&amp; npm run build") && page.contains("--dashboard"),
            "{page}"
        );
        let resp = send(&app.router, get("/tasks/")).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        let (s, v) = app.call(GET, "/api/v1/healthz", None).await;
        assert_eq!((s, v["status"].as_str()), (StatusCode::OK, Some("ok")));
        let (s, v) = app.call(GET, "/api/v1/nope", None).await;
        assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "not_found"));
    }
}

// Goal: `--dashboard DIR` serves only regular files inside DIR. A symbolic link to a file
// outside, a linked directory that leads out (the system's `etc`, as the issue found it), a
// dotfile, a dot directory and a link inside DIR to a dotfile each answer the 404 page like a
// missing file, however the path is spelled and whatever the method, while the ordinary files
// and a link that stays inside are served. Method: a temporary export holding each of them,
// through the router on the embedded store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dashboard_directory_serves_only_regular_files_inside_it() {
    let root = tempfile::tempdir().unwrap();
    let out = fake_export(root.path());
    let outside = root.path().join("etc");
    write(&outside.join("passwd"), "root:x:0:0:SECRET");
    write(&out.join(".env"), "TOKEN=SECRET");
    write(&out.join(".git/config"), "[remote] SECRET");
    write(&out.join(".well-known/security.txt"), "SECRET");
    write(&out.join("tasks/.hidden"), "SECRET");
    let link = |to: &Path, at: &str| std::os::unix::fs::symlink(to, out.join(at)).unwrap();
    link(&root.path().join("secret.txt"), "notes.txt");
    link(&outside, "etc");
    link(&out.join(".env"), "env.txt");
    link(&out.join(".git"), "git");
    link(&out.join("tasks/index.html"), "also-tasks.html");
    let (app, _) = TestApp::embedded(false, vec![], |s| s.with_dashboard(out.clone()));
    let r = &app.router;

    for uri in [
        "/notes.txt",
        "/etc/passwd",
        "/etc/",
        "/etc",
        "/.env",
        "/%2eenv",
        "/%2Eenv",
        "/.git/config",
        "/.git/",
        "/.well-known/security.txt",
        "/tasks/.hidden",
        "/env.txt",
        "/git/config",
    ] {
        for method in [GET, Method::HEAD] {
            let req = Request::builder()
                .method(method.clone())
                .uri(uri)
                .body(Body::empty())
                .unwrap();
            let resp = send(r, req).await;
            let status = resp.status();
            let body = text(resp).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{method} {uri}: {body}");
            assert!(
                !body.contains("SECRET") && !body.contains("do not serve"),
                "{uri}: {body}"
            );
            if method == GET {
                assert_eq!(body, "<html>custom not found</html>", "{uri}");
            }
        }
    }
    // A conditional request for a missing file still gets the whole 404 page.
    let req = Request::builder()
        .uri("/.env")
        .header(header::IF_MODIFIED_SINCE, "Sat, 01 Jan 2100 00:00:00 GMT")
        .body(Body::empty())
        .unwrap();
    let resp = send(r, req).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert_eq!(text(resp).await, "<html>custom not found</html>");

    // Ordinary files, and a link that stays inside DIR, are served as before.
    for (uri, want) in [
        ("/", "<html>queues home</html>"),
        ("/tasks/", "<html>tasks page</html>"),
        ("/also-tasks.html", "<html>tasks page</html>"),
        ("/_next/static/chunks/app-3f9a.js", "console.log('app')"),
    ] {
        let resp = send(r, get(uri)).await;
        assert_eq!(resp.status(), StatusCode::OK, "{uri}");
        assert!(!header_of(&resp, header::LAST_MODIFIED).is_empty(), "{uri}");
        assert_eq!(text(resp).await, want, "{uri}");
    }
    let resp = send(r, get("/also-tasks.html")).await;
    assert!(header_of(&resp, header::CONTENT_TYPE).starts_with("text/html"));
    let resp = send(r, get("/tasks?x=1")).await;
    assert_eq!(resp.status(), StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(header_of(&resp, header::LOCATION), "/tasks/?x=1");
}

/// One parsed SSE message.
#[derive(Debug, Clone, Default)]
struct Sse {
    id: Option<String>,
    event: Option<String>,
    data: String,
}

impl Sse {
    fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or(Value::Null)
    }
}

/// An open event stream: reads frames and splits them into messages.
struct SseReader {
    body: Body,
    buf: String,
}

impl SseReader {
    async fn open(app: &TestApp, uri: &str, last_event_id: Option<&str>) -> SseReader {
        let mut req = Request::builder().uri(uri);
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let resp = send(&app.router, req.body(Body::empty()).unwrap()).await;
        assert_eq!(resp.status(), StatusCode::OK, "{uri}");
        assert!(
            header_of(&resp, header::CONTENT_TYPE).starts_with("text/event-stream"),
            "{uri}"
        );
        SseReader {
            body: resp.into_body(),
            buf: String::new(),
        }
    }

    /// The next message (comments skipped), or `None` when none comes within `within`.
    async fn next(&mut self, within: Duration) -> Option<Sse> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut m = Sse::default();
                let mut data = Vec::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        m.id = Some(v.trim_start().to_string());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        m.event = Some(v.trim_start().to_string());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.trim_start().to_string());
                    }
                }
                if m.id.is_none() && m.event.is_none() && data.is_empty() {
                    continue; // a keep-alive comment
                }
                m.data = data.join("\n");
                return Some(m);
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .ok()??
                .unwrap();
            if let Ok(bytes) = frame.into_data() {
                self.buf.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }

    /// Messages until `done` holds for one (included), or panic after [`WAIT`].
    async fn until(&mut self, what: &str, mut done: impl FnMut(&Sse) -> bool) -> Vec<Sse> {
        let deadline = Instant::now() + WAIT;
        let mut got = Vec::new();
        while Instant::now() < deadline {
            if let Some(m) = self.next(Duration::from_millis(500)).await {
                let stop = done(&m);
                got.push(m);
                if stop {
                    return got;
                }
            }
        }
        panic!("no {what} within {WAIT:?}; got {got:?}");
    }
}

async fn submit(app: &TestApp, body: Value) -> String {
    let (s, t) = app
        .call(POST, "/api/v1/tasks", Some(&body.to_string()))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{t}");
    t["id"].as_str().unwrap().to_string()
}

// Goal: a client of `/events?queue=q1` sees q1's task go queued → leased → completed as it
// happens, with the documented id, event name and data (worker, wait and run times), sees a
// pause as an `event: queue` message, and sees nothing of another queue; a client without
// `queue` sees both queues.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_stream_carries_transitions_as_they_happen_filtered_by_queue() {
    let app = TestApp::start(true, vec![]).await;
    let mut q1 = SseReader::open(&app, "/api/v1/events?queue=q1", None).await;
    let mut all = SseReader::open(&app, "/api/v1/events", None).await;
    let other = submit(&app, json!({"queue": "q2", "payload": 0})).await;
    let id = submit(&app, json!({"queue": "q1", "payload": {"n": 1}})).await;
    let got = q1
        .until("q1's completion", |m| {
            m.json()["kind"] == "completed" && m.json()["task_id"] == id.as_str()
        })
        .await;
    assert!(
        got.iter().all(|m| m.json()["queue"] == "q1"),
        "only q1: {got:?}"
    );
    assert!(
        got.iter().all(|m| m.json()["task_id"] != other.as_str()),
        "{got:?}"
    );
    let mine: Vec<&Sse> = got
        .iter()
        .filter(|m| m.json()["task_id"] == id.as_str())
        .collect();
    let kinds: Vec<_> = mine.iter().map(|m| m.json()["kind"].clone()).collect();
    assert_eq!(
        kinds,
        [json!("queued"), json!("leased"), json!("completed")]
    );
    let mut last = (0u64, 0u64);
    for m in &mine {
        let d = m.json();
        assert_eq!(m.event.as_deref(), Some("task"));
        let sid = d["stream_id"].as_str().unwrap();
        assert_eq!(m.id.as_deref(), Some(format!("q1/{sid}").as_str()));
        let parsed = orq_server::live::parse_stream_id(sid).expect("a stream id");
        assert!(parsed > last, "ids increase");
        last = parsed;
        assert!(d["ts"].as_i64().unwrap() > 1_600_000_000_000, "{d}");
        assert_eq!(d["tenant"], "default");
        assert!(d["fields"].is_object(), "{d}");
    }
    let (leased, completed) = (mine[1].json(), mine[2].json());
    assert_eq!(leased["attempt"], 1);
    let worker = leased["fields"]["w"].as_str().unwrap();
    assert!(!worker.is_empty());
    assert!(leased["fields"]["wait_ms"]
        .as_str()
        .unwrap()
        .parse::<u64>()
        .is_ok());
    assert_eq!(completed["fields"]["w"], worker);
    assert!(completed["fields"]["run_ms"]
        .as_str()
        .unwrap()
        .parse::<u64>()
        .is_ok());

    let (s, _) = app.call(POST, "/api/v1/queues/q1/pause", None).await;
    assert_eq!(s, StatusCode::OK);
    let got = q1
        .until("the pause", |m| m.json()["kind"] == "paused")
        .await;
    let pause = got.last().unwrap();
    assert_eq!(pause.event.as_deref(), Some("queue"));
    assert_eq!(pause.json()["task_id"], Value::Null);

    // The unfiltered client saw both queues' tasks complete.
    let mut done = BTreeMap::new();
    all.until("both completions", |m| {
        let d = m.json();
        if d["kind"] == "completed" {
            done.insert(d["queue"].as_str().unwrap().to_string(), ());
        }
        done.len() == 2
    })
    .await;
}

// Goal: `Last-Event-ID` resends the entries of that queue after the given one, in order and
// once each (the poller's broadcast of the same entries is not repeated), then the stream goes
// on with new entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_event_id_resends_missed_entries_once() {
    let app = TestApp::start(true, vec![]).await;
    let id = submit(&app, json!({"queue": "r", "payload": 1})).await;
    app.wait_task(&id, "completed", |t| t["status"] == "completed")
        .await;
    let entries = app.client.events("r", None, 100).await.unwrap();
    let kinds: Vec<&str> = entries.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["queued", "leased", "completed"]);
    let first = format!("r/{}", entries[0].stream_id);
    let mut s = SseReader::open(&app, "/api/v1/events?queue=r", Some(&first)).await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let m = s.next(WAIT).await.expect("a resent entry");
        ids.push(m.id.unwrap());
    }
    let want: Vec<String> = entries[1..]
        .iter()
        .map(|e| format!("r/{}", e.stream_id))
        .collect();
    assert_eq!(ids, want);
    // Then new entries, with nothing resent twice in between.
    let next = submit(&app, json!({"queue": "r", "payload": 2})).await;
    let got = s
        .until("the new task's completion", |m| {
            m.json()["kind"] == "completed" && m.json()["task_id"] == next.as_str()
        })
        .await;
    for m in &got {
        assert!(
            !want.contains(m.id.as_ref().unwrap()),
            "resent twice: {m:?}"
        );
        assert_eq!(m.json()["task_id"], next.as_str(), "{m:?}");
    }
}

// Goal: every bad input of `/events` is a typed 400 (or 405), and clients beyond the cap get
// a typed 503 until one leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_stream_bad_inputs_and_client_cap() {
    let app = TestApp::start(false, vec![]).await;
    for uri in [
        "/api/v1/events?queue=a%20b",
        "/api/v1/events?queue=%7Bq%7D",
        "/api/v1/events?queue=",
        "/api/v1/events?queue=x&queue=y",
        "/api/v1/events?topic=q",
    ] {
        let (s, v) = app.call(GET, uri, None).await;
        assert_eq!(
            (s, code(&v)),
            (StatusCode::BAD_REQUEST, "bad_request"),
            "{uri}: {v}"
        );
    }
    for (uri, last) in [
        ("/api/v1/events", "garbage"),
        ("/api/v1/events", "q/notanid"),
        ("/api/v1/events", "bad queue/1-0"),
        ("/api/v1/events", "q/1-0-0"),
        ("/api/v1/events?queue=a", "b/1-0"),
    ] {
        let req = Request::builder()
            .uri(uri)
            .header("last-event-id", last)
            .body(Body::empty())
            .unwrap();
        let resp = send(&app.router, req).await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{last}");
        let v: Value = serde_json::from_str(&text(resp).await).unwrap();
        assert_eq!(code(&v), "bad_request", "{last}: {v}");
    }
    let (s, v) = app.call(POST, "/api/v1/events", None).await;
    assert_eq!(
        (s, code(&v)),
        (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
    );

    let mut open = Vec::new();
    for _ in 0..orq_server::live::SSE_CLIENTS_MAX {
        let resp = send(&app.router, get("/api/v1/events")).await;
        assert_eq!(resp.status(), StatusCode::OK);
        open.push(resp);
    }
    let (s, v) = app.call(GET, "/api/v1/events", None).await;
    assert_eq!(
        (s, code(&v)),
        (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        "{v}"
    );
    open.pop(); // a client leaves: its slot is free again
    let resp = send(&app.router, get("/api/v1/events")).await;
    assert_eq!(resp.status(), StatusCode::OK);
}

// Goal: the workers view lists the worker running a task with that lease (type, tenant, times),
// and the lease is gone once the task completes while the worker stays listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_view_lists_each_worker_and_its_leases() {
    let app = TestApp::start(true, vec![]).await;
    let id = submit(
        &app,
        json!({"queue": "wq", "tenant": "acme", "type": "sleep", "payload": {"ms": 1500}}),
    )
    .await;
    app.wait_task(&id, "leased", |t| t["status"] == "leased")
        .await;
    let (s, v) = app.call(GET, "/api/v1/queues/wq/workers", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let now = v["now_ms"].as_i64().unwrap();
    let workers = v["workers"].as_array().unwrap();
    let holder = workers
        .iter()
        .find(|w| {
            w["leases"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l["task_id"] == id.as_str())
        })
        .unwrap_or_else(|| panic!("no worker holds {id}: {v}"));
    let lease = &holder["leases"][0];
    assert_eq!(lease["type"], "sleep");
    assert_eq!(lease["tenant"], "acme");
    let leased_at = lease["leased_at_ms"].as_i64().unwrap();
    assert!(
        leased_at <= now && lease["lease_exp_ms"].as_i64().unwrap() > leased_at,
        "{v}"
    );
    assert!(lease["heartbeat_age_ms"].as_i64().unwrap() >= 0, "{v}");
    assert!(holder["idle_ms"].as_i64().unwrap() >= 0, "{v}");
    assert!(holder["last_seen_ms"].as_i64().unwrap() <= now, "{v}");
    assert_eq!(v["leases_total"], 1);

    app.wait_task(&id, "completed", |t| t["status"] == "completed")
        .await;
    let (_, v) = app.call(GET, "/api/v1/queues/wq/workers", None).await;
    let after = v["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == holder["id"])
        .unwrap_or_else(|| panic!("the worker is still listed: {v}"));
    assert_eq!(after["leases"], json!([]));

    for (uri, status, c) in [
        (
            "/api/v1/queues/a%20b/workers",
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "/api/v1/queues/nosuch/workers",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/api/v1/queues/wq/workers?limit=1",
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
    ] {
        let (s, v) = app.call(GET, uri, None).await;
        assert_eq!((s, code(&v)), (status, c), "{uri}: {v}");
    }
}

fn sum(buckets: &[Value], field: &str) -> u64 {
    buckets.iter().map(|b| b[field].as_u64().unwrap()).sum()
}

// Goal: the metrics view counts submits (a delayed task once), completions, failures and
// deaths from the event stream, with wait and run latencies, in a dense hour of 10 s buckets
// ending now; bad names are 400 and unknown queues 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_throughput_and_latency_from_the_event_stream() {
    let app = TestApp::start(true, vec![]).await;
    for i in 0..5 {
        submit(&app, json!({"queue": "m", "payload": i})).await;
    }
    submit(&app, json!({"queue": "m", "payload": 5, "delay_ms": 300})).await;
    submit(
        &app,
        json!({"queue": "m", "type": "fail", "payload": {"permanent": true}}),
    )
    .await;
    let deadline = Instant::now() + WAIT;
    let v = loop {
        let (s, v) = app.call(GET, "/api/v1/queues/m/metrics", None).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let b = v["buckets"].as_array().unwrap();
        if sum(b, "completed") == 6 && sum(b, "dead") == 1 {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "metrics never showed the work: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(v["bucket_ms"], 10_000);
    let b = v["buckets"].as_array().unwrap();
    assert_eq!(b.len(), 360);
    for w in b.windows(2) {
        assert_eq!(
            w[1]["t_ms"].as_i64().unwrap() - w[0]["t_ms"].as_i64().unwrap(),
            10_000
        );
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let last = b[359]["t_ms"].as_i64().unwrap();
    assert!(
        last <= now && now - last < 20_000,
        "the last bucket is now's: {last} vs {now}"
    );
    assert_eq!(sum(b, "submitted"), 7, "the delayed task counts once");
    assert_eq!(sum(b, "failed"), 1);
    let wait = b
        .iter()
        .filter_map(|x| x["wait_ms"].as_object())
        .collect::<Vec<_>>();
    let run = b
        .iter()
        .filter_map(|x| x["run_ms"].as_object())
        .collect::<Vec<_>>();
    let count = |qs: &[&serde_json::Map<String, Value>]| -> u64 {
        qs.iter().map(|q| q["count"].as_u64().unwrap()).sum()
    };
    assert_eq!(count(&wait), 7, "every lease has a wait: {wait:?}");
    assert_eq!(count(&run), 6, "every completion has a run time: {run:?}");
    for q in wait.iter().chain(run.iter()) {
        let (p50, p99, max) = (q["p50"].as_u64(), q["p99"].as_u64(), q["max"].as_u64());
        assert!(p50 <= p99 && p99 <= max, "{q:?}");
    }

    for (uri, status, c) in [
        (
            "/api/v1/queues/a%20b/metrics",
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "/api/v1/queues/nosuch/metrics",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/api/v1/queues/m/metrics?window=1h",
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
    ] {
        let (s, v) = app.call(GET, uri, None).await;
        assert_eq!((s, code(&v)), (status, c), "{uri}: {v}");
    }
}

// Goal: metrics start with the server but cover what the stream held at startup. Method: run
// tasks, then start a second API (a new state) over the same Redis: its metrics count them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_of_a_new_server_cover_what_the_stream_holds() {
    let app = TestApp::start(true, vec![]).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(submit(&app, json!({"queue": "old", "payload": i})).await);
    }
    for id in &ids {
        app.wait_task(id, "completed", |t| t["status"] == "completed")
            .await;
    }
    let second = orq_server::app(AppState::new(
        app.client.clone(),
        std::sync::Arc::new(orq::SystemClock),
        std::sync::Arc::new(orq_server::handlers::HttpAllow::default()),
    ));
    let deadline = Instant::now() + WAIT;
    loop {
        let resp = send(&second, get("/api/v1/queues/old/metrics")).await;
        assert_eq!(resp.status(), StatusCode::OK);
        let v: Value = serde_json::from_str(&text(resp).await).unwrap();
        let b = v["buckets"].as_array().unwrap();
        if sum(b, "completed") == 3 {
            assert_eq!(sum(b, "submitted"), 3);
            break;
        }
        assert!(Instant::now() < deadline, "the backlog never counted: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// Goal: the timelines directory is listed (regular .jsonl / .json files only, sorted, with
// size and time) and each file served byte for byte with its content type; bad names, other
// files, symlinks and oversized files are typed errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timelines_are_listed_and_served_with_bad_names_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("timelines");
    let line1 = r#"{"kind":"header","version":1,"seed":42}"#;
    let line2 = r#"{"t_ms":5,"actor":"w1","kind":"leased","task":"01K","tenant":"t","attempt":1,"details":{}}"#;
    let seed42 = format!("{line1}\n{line2}\n");
    write(&dir.join("seed-42.jsonl"), &seed42);
    write(&dir.join("a.json"), "[]");
    write(&dir.join("notes.txt"), "not a timeline");
    write(&dir.join("sub.jsonl/inner.jsonl"), "{}"); // a directory with a timeline's name
    write(&root.path().join("outside.jsonl"), "secret");
    std::os::unix::fs::symlink(root.path().join("outside.jsonl"), dir.join("link.jsonl")).unwrap();
    let big = std::fs::File::create(dir.join("z-big.jsonl")).unwrap();
    big.set_len(orq_server::timelines::FILE_MAX_BYTES + 1)
        .unwrap(); // sparse: no disk used
    let app = TestApp::start_with(false, vec![], |s| s.with_timelines(dir.clone())).await;

    let (s, v) = app.call(GET, "/api/v1/timelines", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let list = v["timelines"].as_array().unwrap();
    let names: Vec<_> = list.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a.json", "seed-42.jsonl", "z-big.jsonl"]);
    assert_eq!(list[1]["bytes"], seed42.len());
    let modified = list[1]["modified_ms"].as_u64().unwrap();
    assert!(modified > 1_600_000_000_000, "{v}");

    let resp = send(&app.router, get("/api/v1/timelines/seed-42.jsonl")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        header_of(&resp, header::CONTENT_TYPE),
        "application/x-ndjson"
    );
    assert_eq!(text(resp).await, seed42);
    let resp = send(&app.router, get("/api/v1/timelines/a.json")).await;
    assert_eq!(header_of(&resp, header::CONTENT_TYPE), "application/json");
    assert_eq!(text(resp).await, "[]");

    let long = format!("{}.jsonl", "x".repeat(124));
    for (uri, status, c) in [
        (
            "/api/v1/timelines/z-big.jsonl",
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
        ),
        (
            "/api/v1/timelines/missing.jsonl",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/api/v1/timelines/notes.txt",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/api/v1/timelines/link.jsonl",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/api/v1/timelines/sub.jsonl",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/api/v1/timelines/..%2Foutside.jsonl",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/api/v1/timelines/a..jsonl",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/api/v1/timelines/a%20b.jsonl",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            &format!("/api/v1/timelines/{long}"),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/api/v1/timelines/seed-42.jsonl?x=1",
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "/api/v1/timelines?all=1",
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
    ] {
        let (s, v) = app.call(GET, uri, None).await;
        assert_eq!((s, code(&v)), (status, c), "{uri}: {v}");
    }
    // At the length limit the name is valid (and merely missing).
    let max = format!("{}.jsonl", "x".repeat(122));
    assert_eq!(max.len(), 128);
    let (s, v) = app
        .call(GET, &format!("/api/v1/timelines/{max}"), None)
        .await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "not_found"));
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no such timeline"));
}

// Goal: without --timelines both routes are typed 404s that say how to enable them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timelines_without_a_directory_are_not_found() {
    let app = TestApp::start(false, vec![]).await;
    for uri in ["/api/v1/timelines", "/api/v1/timelines/seed-42.jsonl"] {
        let (s, v) = app.call(GET, uri, None).await;
        assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "not_found"), "{uri}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--timelines"),
            "{v}"
        );
    }
}

/// A fake `npm` (a shell script) that logs its arguments to `log`; `run build` writes
/// `out/index.html` unless `fail` is set, in which case every command exits 1.
fn fake_npm(dir: &Path, log: &Path, fail: bool) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let npm = dir.join("npm");
    let body = if fail {
        "echo \"npm failed on purpose\" >&2\nexit 1\n".to_string()
    } else {
        "if [ \"$1\" = run ] && [ \"$2\" = build ]; then mkdir -p out && echo built > out/index.html; fi\n"
            .to_string()
    };
    std::fs::write(
        &npm,
        format!("#!/bin/sh\necho \"$*\" >> '{}'\n{body}", log.display()),
    )
    .unwrap();
    std::fs::set_permissions(&npm, std::fs::Permissions::from_mode(0o755)).unwrap();
    npm
}

// Goal: a missing dashboard is built with npm when its sources are next to it (`npm ci` only
// when node_modules is missing, then `npm run build`), not rebuilt when built, and each case
// without sources, without npm or with a failing npm is reported without building.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_dashboard_is_built_with_npm_when_its_sources_are_there() {
    let root = tempfile::tempdir().unwrap();
    let project = root.path().join("dashboard");
    let out = project.join("out");
    let log = root.path().join("npm.log");
    let npm = fake_npm(root.path(), &log, false);
    std::fs::create_dir_all(&project).unwrap();
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();

    assert_eq!(
        ensure_built(&out, Some(&npm)).await,
        BuildOutcome::NoSources
    );
    assert_eq!(log_text(), "", "nothing ran without package.json");
    write(&project.join("package.json"), "{}");
    assert_eq!(ensure_built(&out, None).await, BuildOutcome::NoNpm);

    assert_eq!(ensure_built(&out, Some(&npm)).await, BuildOutcome::Built);
    assert_eq!(log_text(), "ci --no-audit --no-fund\nrun build\n");
    assert!(out.join("index.html").is_file());
    assert_eq!(
        ensure_built(&out, Some(&npm)).await,
        BuildOutcome::AlreadyBuilt
    );
    assert_eq!(log_text().lines().count(), 2, "not rebuilt");

    // With node_modules present only the build runs; a failing npm is reported.
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::create_dir_all(project.join("node_modules")).unwrap();
    std::fs::remove_file(&log).unwrap();
    assert_eq!(ensure_built(&out, Some(&npm)).await, BuildOutcome::Built);
    assert_eq!(log_text(), "run build\n");
    std::fs::remove_dir_all(&out).unwrap();
    let failing = fake_npm(&project, &log, true);
    match ensure_built(&out, Some(&failing)).await {
        BuildOutcome::Failed(m) => assert!(m.contains("npm run build"), "{m}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    assert!(!out.exists());
}

/// An `orq` child process, killed (SIGKILL) and reaped when dropped.
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

// Goal: the command line wires --dashboard and --timelines into a real `orq api`, an open event
// stream does not hold up graceful shutdown on SIGTERM, and a --timelines that is not a
// directory is refused at startup (exit 2, naming the flag).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orq_api_serves_its_dashboard_and_timelines_and_stops_with_a_stream_open() {
    let redis = orq::testing::RedisServer::start();
    let root = tempfile::tempdir().unwrap();
    let out = fake_export(root.path());
    let timelines = root.path().join("timelines");
    write(&timelines.join("seed-7.jsonl"), "{\"kind\":\"header\"}\n");
    let listen = format!("127.0.0.1:{}", free_port());
    let bin = env!("CARGO_BIN_EXE_orq");
    let mut api = Proc(
        std::process::Command::new(bin)
            .args(["api", "--redis", &redis.url(), "--listen", &listen])
            .arg("--dashboard")
            .arg(&out)
            .arg("--timelines")
            .arg(&timelines)
            .env("ORQ_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn orq api"),
    );
    let http = reqwest::Client::new();
    let base = format!("http://{listen}");
    let deadline = Instant::now() + WAIT;
    let home = loop {
        if let Ok(r) = http.get(format!("{base}/")).send().await {
            break r;
        }
        assert!(Instant::now() < deadline, "orq api never answered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(home.status().as_u16(), 200);
    assert_eq!(home.text().await.unwrap(), "<html>queues home</html>");
    let list: Value = http
        .get(format!("{base}/api/v1/timelines"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["timelines"][0]["name"], "seed-7.jsonl", "{list}");

    let mut stream = http
        .get(format!("{base}/api/v1/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    let term = std::process::Command::new("kill")
        .args(["-TERM", &api.0.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = api.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "orq api did not stop with an event stream open"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status}");
    // The stream ended rather than being cut mid-message.
    while let Ok(Some(_)) = stream.chunk().await {}

    let bad = std::process::Command::new(bin)
        .args(["api", "--redis", &redis.url(), "--listen", &listen])
        .args(["--timelines", "/nonexistent/timelines"])
        .env("ORQ_LOG", "warn")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("--timelines") && err.contains("not a directory"),
        "{err}"
    );
}
