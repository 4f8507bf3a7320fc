//! The `http` target: orq-server's request decoders and its whole router.
//!
//! Each input is a route, a path argument, a query string and a body. Three properties:
//! 1. the body decoders of `orq_server::model` (`parse_body` into `SubmitBody`, `BatchBody`,
//!    `TenantBody`, `QueueSettingsBody`, `BulkReplayBody`, `QueueDefaults`, then `into_spec`,
//!    `into_limits` and `validate`) never panic, and every refusal is a typed `ApiError` with a
//!    4xx status;
//! 2. the router (`orq_server::app` over the embedded `MemoryStore`, driven with tower's
//!    `oneshot`) never panics and never answers 5xx, and every 4xx carries the JSON error body
//!    `{"error": {"code": "...", "message": "..."}}`;
//! 3. the `http` handler's URL normalisation (`webhook_url`, on the path argument as a whole URL
//!    and as a path under an allowed prefix) never panics, and what it accepts is a fixed point:
//!    normalising the normalised URL gives it back unchanged, with no dot segment in its path, so
//!    the URL that was checked is the URL that is requested.
//!
//! The router keeps its store across inputs (rebuilt every [`SERVER_USES_MAX`] inputs, so memory
//! stays bounded): a failure that depends on state left by earlier inputs may need those inputs
//! to reproduce, which libFuzzer's crash file alone does not carry.

use crate::codec::{Reader, Writer};
use arbitrary::{Arbitrary, Result, Unstructured};
use axum::body::Body;
use axum::http::{Method, Request};
use http_body_util::BodyExt;
use orq::{Client, Entropy, SystemClock};
use orq_model::{MemoryStore, WallClock};
use orq_server::handlers::http_allow::webhook_url;
use orq_server::handlers::HttpAllow;
use orq_server::model::{
    parse_body, BatchBody, BulkReplayBody, QueueDefaults, QueueSettingsBody, SubmitBody, TenantBody,
};
use orq_server::{app, ApiError, AppState};
use std::sync::{Arc, Mutex};
use tower::ServiceExt;

/// Inputs served by one router before it is rebuilt on a fresh store.
pub const SERVER_USES_MAX: u32 = 500;

/// The routes an input can call: method, path (`{a}` and `{b}` are the path argument, split
/// at its first `/`), and whether the body is sent.
pub const ROUTES: [(&str, &str); 16] = [
    ("POST", "/api/v1/tasks"),
    ("POST", "/api/v1/tasks/batch"),
    ("PUT", "/api/v1/queues/{a}/tenants/{b}"),
    ("PUT", "/api/v1/queues/{a}/settings"),
    ("POST", "/api/v1/dlq/replay"),
    ("GET", "/api/v1/tasks"),
    ("GET", "/api/v1/dlq"),
    ("GET", "/api/v1/tasks/{a}"),
    ("POST", "/api/v1/tasks/{a}/cancel"),
    ("POST", "/api/v1/dlq/{a}/replay"),
    ("DELETE", "/api/v1/dlq/{a}"),
    ("GET", "/api/v1/queues/{a}"),
    ("GET", "/api/v1/queues/{a}/tenants"),
    ("POST", "/api/v1/queues/{a}/pause"),
    ("GET", "/api/v1/queues/{a}/workers"),
    ("GET", "/api/v1/queues/{a}/metrics"),
];

/// One request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Input {
    /// Index into [`ROUTES`].
    pub route: u8,
    /// The path argument (percent-encoded into the path).
    pub arg: Vec<u8>,
    /// The query string (bytes a URI cannot hold are percent-encoded; `&` and `=` are kept).
    pub query: Vec<u8>,
    /// The body: every byte left.
    pub body: Vec<u8>,
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let mut r = Reader::new(u);
        Ok(Input {
            route: r.byte()?,
            arg: r.short()?,
            query: r.short()?,
            body: r.rest(),
        })
    }
}

impl Input {
    /// The bytes that decode to this input.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.byte(self.route);
        w.short(&self.arg);
        w.short(&self.query);
        w.rest(&self.body);
        w.out
    }
}

fn percent(bytes: &[u8], keep: impl Fn(u8) -> bool) -> String {
    let mut s = String::new();
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || keep(b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// Property 1 on one decoded result.
fn check_api_error(what: &str, e: &ApiError) {
    assert!(
        e.status().is_client_error(),
        "{what}: refused with {} ({}: {})",
        e.status(),
        e.code,
        e.message
    );
    assert!(!e.message.is_empty(), "{what}: error without a message");
}

fn decoded<T>(what: &str, r: std::result::Result<T, ApiError>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            check_api_error(what, &e);
            None
        }
    }
}

/// Property 1: every decoder on `body`.
pub fn check_decoders(body: &[u8]) {
    let now_ms = 1_800_000_000_000;
    if let Some(b) = decoded("SubmitBody", parse_body::<SubmitBody>(body)) {
        decoded("SubmitBody::into_spec", b.into_spec(now_ms, None));
    }
    if let Some(b) = decoded("BatchBody", parse_body::<BatchBody>(body)) {
        for item in b.tasks {
            decoded("BatchBody item", item.into_spec(now_ms, None));
        }
    }
    if let Some(b) = decoded("TenantBody", parse_body::<TenantBody>(body)) {
        decoded("TenantBody::into_limits", b.into_limits());
    }
    if let Some(b) = decoded("QueueSettingsBody", parse_body::<QueueSettingsBody>(body)) {
        if let Some(Some(d)) = b.defaults {
            decoded("QueueDefaults::validate", d.validate());
        }
    }
    decoded("BulkReplayBody", parse_body::<BulkReplayBody>(body));
    if let Some(d) = decoded("QueueDefaults", parse_body::<QueueDefaults>(body)) {
        decoded("QueueDefaults::validate", d.validate());
    }
}

struct Server {
    rt: tokio::runtime::Runtime,
    router: axum::Router,
    uses: u32,
}

impl Server {
    fn new() -> Server {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let router = rt.block_on(async {
            let store = Arc::new(MemoryStore::new(Arc::new(WallClock)));
            let clock = Arc::new(SystemClock);
            let client = Client::new(store, clock.clone(), Arc::new(Entropy::from_seed(7)));
            app(AppState::new(
                client,
                clock,
                Arc::new(HttpAllow::parse(["http://127.0.0.1:9/"]).expect("a valid prefix")),
            ))
        });
        Server {
            rt,
            router,
            uses: 0,
        }
    }
}

static SERVER: Mutex<Option<Server>> = Mutex::new(None);

/// Property 2: one request through the router. With `ORQ_FUZZ_VERBOSE` set, each request and
/// its answer are printed (triage).
pub fn check_router(input: &Input) {
    let (method, template) = ROUTES[usize::from(input.route) % ROUTES.len()];
    let (a, b) = match input.arg.iter().position(|&c| c == b'/') {
        Some(i) => (&input.arg[..i], &input.arg[i + 1..]),
        None => (&input.arg[..], &b"t"[..]),
    };
    let seg = |s: &[u8]| {
        if s.is_empty() {
            "q".to_string()
        } else {
            percent(s, |_| false)
        }
    };
    let mut uri = template.replace("{a}", &seg(a)).replace("{b}", &seg(b));
    if !input.query.is_empty() {
        uri.push('?');
        uri.push_str(&percent(&input.query, |c| b"&=,:".contains(&c)));
    }
    let request = Request::builder()
        .method(Method::from_bytes(method.as_bytes()).expect("a method"))
        .uri(&uri)
        .header("content-type", "application/json")
        .body(Body::from(input.body.clone()))
        .expect("a request");
    let mut guard = SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let server = guard.get_or_insert_with(Server::new);
    server.uses += 1;
    let router = server.router.clone();
    let (status, body) = server.rt.block_on(async move {
        let resp = router
            .oneshot(request)
            .await
            .expect("the router is infallible");
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes().to_vec())
            .unwrap_or_default();
        (status, body)
    });
    if std::env::var_os("ORQ_FUZZ_VERBOSE").is_some() {
        eprintln!(
            "{method} {uri} -> {status} {}",
            String::from_utf8_lossy(&body)
        );
    }
    if server.uses >= SERVER_USES_MAX {
        *guard = None;
    }
    drop(guard);
    assert!(
        !status.is_server_error(),
        "{method} {uri} answered {status}: {}",
        String::from_utf8_lossy(&body)
    );
    if status.is_client_error() {
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_else(|e| {
            panic!(
                "{method} {uri} answered {status} with a body that is not JSON ({e}): {}",
                String::from_utf8_lossy(&body)
            )
        });
        let code = v["error"]["code"].as_str();
        let message = v["error"]["message"].as_str();
        assert!(
            code.is_some_and(|c| !c.is_empty()) && message.is_some(),
            "{method} {uri} answered {status} without an error code and message: {v}"
        );
    }
}

/// Property 3: the webhook URL normalisation on `text`, alone and as a path under a prefix.
pub fn check_webhook_url(text: &[u8]) {
    let text = String::from_utf8_lossy(text);
    for raw in [text.to_string(), format!("http://127.0.0.1:9/api/{text}")] {
        let Ok(url) = webhook_url(&raw) else {
            continue;
        };
        let again = webhook_url(url.as_str());
        assert_eq!(
            again.as_ref().map(|u| u.as_str()),
            Ok(url.as_str()),
            "{raw:?} normalised to {url}, which is not a fixed point"
        );
        assert!(
            url.path()
                .split('/')
                .all(|s| s != "." && s != ".." && !s.eq_ignore_ascii_case("%2e%2e")),
            "{raw:?} normalised to {url}, with a dot segment"
        );
    }
}

/// The three properties on one input.
pub fn run(input: &Input) {
    check_webhook_url(&input.arg);
    check_decoders(&input.body);
    check_router(input);
}
