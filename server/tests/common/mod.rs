//! Fixtures shared by the server's tests: a router over a private Redis (or the embedded
//! `MemoryStore`, optionally recording every key the store is asked to touch), with an optional
//! in-process worker pool and scheduler running the built-in handlers.
#![allow(dead_code)]

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use orq::testing::RedisServer;
use orq::{
    Entropy, RedisStore, Scheduler, SchedulerConfig, Store, SystemClock, Worker, WorkerConfig,
};
use orq_server::handlers::{builtin, HttpAllow};
use orq_server::{app, AppState};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// How long tests wait for a condition before failing (generous: CI machines are loaded).
pub const WAIT: Duration = Duration::from_secs(60);

pub struct TestApp {
    /// The private Redis (`None` on the embedded store).
    pub redis: Option<RedisServer>,
    pub router: axum::Router,
    pub store: Arc<dyn Store>,
    pub client: orq::Client,
    stop: CancellationToken,
}

impl TestApp {
    /// A router over a fresh Redis; with `workers`, a pool (concurrency 4) and a scheduler run
    /// in the background until the fixture is dropped. `allow` is the http allow-list.
    pub async fn start(workers: bool, allow: Vec<String>) -> TestApp {
        Self::start_with(workers, allow, |s| s).await
    }

    /// As [`TestApp::start`], with the state passed through `configure` (dashboard, timelines).
    pub async fn start_with(
        workers: bool,
        allow: Vec<String>,
        configure: impl FnOnce(AppState) -> AppState,
    ) -> TestApp {
        let redis = RedisServer::start();
        let store: Arc<dyn Store> = Arc::new(RedisStore::connect(&redis.url()).await.unwrap());
        Self::over(Some(redis), store, workers, allow, configure)
    }

    /// As [`TestApp::start_with`] on the embedded store (no Redis), every store call recorded
    /// in the returned [`Recorder`].
    pub fn embedded(
        workers: bool,
        allow: Vec<String>,
        configure: impl FnOnce(AppState) -> AppState,
    ) -> (TestApp, Recorder) {
        let memory = orq_model::MemoryStore::new(Arc::new(orq_model::WallClock));
        let recorder = Recorder::default();
        let store: Arc<dyn Store> = Arc::new(RecordingStore {
            inner: Arc::new(memory),
            calls: recorder.clone(),
        });
        (Self::over(None, store, workers, allow, configure), recorder)
    }

    fn over(
        redis: Option<RedisServer>,
        store: Arc<dyn Store>,
        workers: bool,
        allow: Vec<String>,
        configure: impl FnOnce(AppState) -> AppState,
    ) -> TestApp {
        let clock = Arc::new(SystemClock);
        let entropy = Arc::new(Entropy::from_os());
        let client = orq::Client::new(store.clone(), clock.clone(), entropy.clone());
        let stop = CancellationToken::new();
        if workers {
            let w = Worker::new(
                store.clone(),
                clock.clone(),
                entropy.clone(),
                builtin(HttpAllow::parse(&allow).expect("valid --http-allow prefixes")),
                WorkerConfig {
                    concurrency: 4,
                    idle_poll_ms: 20,
                    shutdown_grace_ms: 100,
                    ..WorkerConfig::default()
                },
            );
            let s = Scheduler::new(
                store.clone(),
                clock.clone(),
                entropy.clone(),
                SchedulerConfig {
                    interval_ms: 50,
                    ..SchedulerConfig::default()
                },
            );
            let (t1, t2) = (stop.clone(), stop.clone());
            tokio::spawn(async move { w.run(t1).await });
            tokio::spawn(async move { s.run(t2).await });
        }
        let router = app(configure(AppState::new(
            client.clone(),
            clock,
            Arc::new(HttpAllow::parse(&allow).expect("valid --http-allow prefixes")),
        )));
        TestApp {
            redis,
            router,
            store,
            client,
            stop,
        }
    }

    /// Send one request with `Authorization: Bearer <key>` when `key` is given; returns the
    /// status, the JSON body (Null when empty or not JSON) and the headers.
    pub async fn call_as(
        &self,
        key: Option<&str>,
        method: Method,
        uri: &str,
        body: Option<&str>,
    ) -> (StatusCode, Value, HeaderMap) {
        let mut req = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json");
        if let Some(k) = key {
            req = req.header("authorization", format!("Bearer {k}"));
        }
        let req = req
            .body(
                body.map(|b| Body::from(b.to_string()))
                    .unwrap_or_else(Body::empty),
            )
            .unwrap();
        let resp = self.router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let is_stream = headers
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        if is_stream {
            return (status, Value::Null, headers); // an event stream never ends: not read
        }
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        assert!(
            status.as_u16() < 500 || status.as_u16() == 503,
            "{uri} answered {status}: {json}"
        );
        (status, json, headers)
    }

    /// Send one request; returns the status and the JSON body (Null when empty or not JSON).
    pub async fn call(&self, method: Method, uri: &str, body: Option<&str>) -> (StatusCode, Value) {
        self.call_bytes(method, uri, body.map(|b| b.as_bytes().to_vec()))
            .await
    }

    /// Send one request; returns the status and the raw body text.
    pub async fn call_text(
        &self,
        method: Method,
        uri: &str,
        body: Option<&str>,
    ) -> (StatusCode, String) {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .body(
                body.map(|b| Body::from(b.to_string()))
                    .unwrap_or_else(Body::empty),
            )
            .unwrap();
        let resp = self.router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    pub async fn call_bytes(
        &self,
        method: Method,
        uri: &str,
        body: Option<Vec<u8>>,
    ) -> (StatusCode, Value) {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(body.map(Body::from).unwrap_or_else(Body::empty))
            .unwrap();
        let resp = self.router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        assert!(
            status.as_u16() < 500 || status.as_u16() == 503,
            "{uri} answered {status}: {json}"
        );
        (status, json)
    }

    /// Poll `GET /tasks/{id}` until `pred` holds, or panic after [`WAIT`].
    pub async fn wait_task(&self, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let (status, t) = self
                .call(Method::GET, &format!("/api/v1/tasks/{id}"), None)
                .await;
            assert_eq!(status, StatusCode::OK, "{t}");
            if pred(&t) {
                return t;
            }
            assert!(
                Instant::now() < deadline,
                "task {id} never became {what}: {t}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// One store call: the script name, its keys and its arguments.
pub type Call = (String, Vec<String>, Vec<Vec<u8>>);

/// Every store call of a [`RecordingStore`].
#[derive(Clone, Default)]
pub struct Recorder(pub Arc<Mutex<Vec<Call>>>);

impl Recorder {
    /// Number of calls so far.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// True when no key or argument of any call contains `needle`.
    pub fn never_saw(&self, needle: &[u8]) -> bool {
        let calls = self.0.lock().unwrap();
        calls.iter().all(|(_, keys, args)| {
            keys.iter()
                .all(|k| !k.as_bytes().windows(needle.len()).any(|w| w == needle))
                && args
                    .iter()
                    .all(|a| !a.windows(needle.len()).any(|w| w == needle))
        })
    }
}

/// A store that records each call, then passes it on.
pub struct RecordingStore {
    pub inner: Arc<dyn Store>,
    pub calls: Recorder,
}

#[async_trait::async_trait]
impl Store for RecordingStore {
    async fn eval(
        &self,
        script: &'static orq_lua::Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<orq::Resp, orq::StoreError> {
        self.calls
            .0
            .lock()
            .unwrap()
            .push((script.name.to_string(), keys.to_vec(), args.to_vec()));
        self.inner.eval(script, keys, args).await
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The error code of an error body.
/// Send `req` to `router` as it is (headers and all): the status and the JSON body (Null when
/// empty or not JSON).
pub async fn send(router: &axum::Router, req: Request<Body>) -> (StatusCode, Value) {
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

pub fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

/// The error message of an error body.
pub fn message(v: &Value) -> &str {
    v["error"]["message"].as_str().unwrap_or("")
}

/// The (method, path) of every route the router declares, read from `app`'s source, so a route
/// added later without a row in a test's table (or in the OpenAPI document) fails that test.
pub fn declared_routes() -> BTreeSet<(String, String)> {
    let src = include_str!("../../src/api.rs");
    let start = src.find("pub fn app(").expect("fn app");
    let end = start + src[start..].find("type ApiResult").expect("end of fn app");
    let body = &src[start..end];
    let mut out = BTreeSet::new();
    let parts: Vec<&str> = body.split(".route(").skip(1).collect();
    for part in parts {
        let part = part.split(".route_layer(").next().unwrap();
        let q1 = part.find('"').unwrap();
        let q2 = q1 + 1 + part[q1 + 1..].find('"').unwrap();
        let path = &part[q1 + 1..q2];
        let rest = &part[q2..];
        for m in ["get", "post", "put", "delete"] {
            let called = rest.contains(&format!("({m}("))
                || rest.contains(&format!(" {m}("))
                || rest.contains(&format!(".{m}("))
                || rest.contains(&format!("routing::{m}("));
            if called {
                out.insert((m.to_uppercase(), path.to_string()));
            }
        }
    }
    out
}
