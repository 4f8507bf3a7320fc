//! Distributed tracing across processes: `orq api` and `orq worker` on one private Redis export
//! their spans over OTLP/HTTP to a receiver in this test, which decodes them with the published
//! OpenTelemetry protos (`opentelemetry-proto`), as a collector would. Checked: a submit's span
//! continues the caller's `traceparent` (a malformed one starts a new trace, and the submit
//! succeeds); the task stores the submit span's context, and the worker's task span continues it
//! (the submit span its parent, one trace from the caller to the outcome), carrying queue,
//! tenant, type, attempt and epoch, with the lease, handler and outcome spans as its children;
//! the `http` handler sends the handler span's `traceparent` (and the caller's `tracestate`) to
//! the webhook. An API that exports nothing still stores the caller's context, so an exporting
//! worker continues the caller's trace; the worker protocol hands it out with the lease. Without
//! `--otlp-endpoint` (or with it and a standard switch off) nothing is sent, and the webhook gets
//! the caller's context unchanged.

mod roles;

use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use orq::testing::RedisServer;
use prost::Message;
use roles::*;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// One exported span, flattened.
#[derive(Debug, Clone)]
struct Got {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    attrs: Vec<(String, String)>,
    /// The span's status code (0 unset, 1 ok, 2 error) and message.
    status: (i32, String),
}

impl Got {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Received {
    spans: Vec<Got>,
    posts: usize,
    hook_traceparents: Vec<String>,
    /// The `tracestate` headers each webhook call carried (an empty one must not be sent).
    hook_tracestates: Vec<Vec<String>>,
}

type Shared = Arc<Mutex<Received>>;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn value(v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

async fn collect(
    axum::extract::State(r): axum::extract::State<Shared>,
    body: Bytes,
) -> impl axum::response::IntoResponse {
    let req = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf body");
    let mut r = r.lock().unwrap();
    r.posts += 1;
    for rs in req.resource_spans {
        let service = rs
            .resource
            .iter()
            .flat_map(|res| &res.attributes)
            .find(|a| a.key == "service.name")
            .map(|a| value(&a.value))
            .unwrap_or_default();
        for ss in rs.scope_spans {
            for s in ss.spans {
                r.spans.push(Got {
                    service: service.clone(),
                    name: s.name.clone(),
                    trace_id: hex(&s.trace_id),
                    span_id: hex(&s.span_id),
                    parent_span_id: hex(&s.parent_span_id),
                    status: s
                        .status
                        .as_ref()
                        .map(|st| (st.code, st.message.clone()))
                        .unwrap_or_default(),
                    attrs: s
                        .attributes
                        .iter()
                        .map(|a| (a.key.clone(), value(&a.value)))
                        .collect(),
                });
            }
        }
    }
    (
        [("content-type", "application/x-protobuf")],
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
}

async fn hook(axum::extract::State(r): axum::extract::State<Shared>, headers: HeaderMap) {
    let tp = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let ts = headers
        .get_all("tracestate")
        .iter()
        .map(|v| v.to_str().unwrap_or("?").to_string())
        .collect();
    let mut r = r.lock().unwrap();
    r.hook_traceparents.push(tp);
    r.hook_tracestates.push(ts);
}

/// The receiver (POST /v1/traces) and the webhook (POST /hook) on one free port.
async fn receiver() -> (String, Shared) {
    let shared: Shared = Arc::default();
    let app = axum::Router::new()
        .route("/v1/traces", post(collect))
        .route("/hook", post(hook))
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), shared)
}

async fn spans_until(r: &Shared, what: &str, f: impl Fn(&[Got]) -> bool) -> Vec<Got> {
    wait_for(what, async || {
        let spans = r.lock().unwrap().spans.clone();
        f(&spans).then(|| serde_json::to_value(spans.len()).unwrap())
    })
    .await;
    r.lock().unwrap().spans.clone()
}

/// The `tracestate` every submit sends: two list members, so the stored form holds commas.
const STATE: &str = "vendor=1,rojo=00f067aa0ba902b7";

async fn submit_with(http: &reqwest::Client, base: &str, traceparent: &str, body: Value) -> String {
    let r = http
        .post(format!("{base}/tasks"))
        .header("traceparent", traceparent)
        .header("tracestate", STATE)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

// Goal: traces cross the API and worker processes as a collector sees them. Method: a real
// OTLP/HTTP receiver decoding protobuf; `orq api` and `orq worker` with --otlp-endpoint (and a
// short batch delay, OTEL_BSP_SCHEDULE_DELAY, so spans arrive in time); an echo task and an
// `http` task submitted with a traceparent, one with a malformed traceparent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_an_otlp_receiver_with_their_parents() {
    let (collector, got) = receiver().await;
    let redis = RedisServer::start();
    let url = redis.url();
    let listen = free_listen_addr();
    let allow = format!("{collector}/hook");
    let env = [("OTEL_BSP_SCHEDULE_DELAY", "100")];
    let _api = Proc::spawn_with(
        &[
            "api",
            "--redis",
            &url,
            "--listen",
            &listen,
            "--otlp-endpoint",
            &collector,
            "--http-allow",
            &allow,
        ],
        &["OTEL_SERVICE_NAME"],
        &env,
    );
    let _worker = Proc::spawn_with(
        &[
            "worker",
            "--redis",
            &url,
            "--otlp-endpoint",
            &collector,
            "--http-allow",
            &allow,
        ],
        &["OTEL_SERVICE_NAME"],
        &env,
    );
    let http = reqwest::Client::new();
    let base = format!("http://{listen}/api/v1");
    wait_ready(&http, &base).await;

    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let echo = submit_with(
        &http,
        &base,
        &format!("00-{trace}-{parent}-01"),
        json!({"type": "echo", "payload": {"hi": 1}, "tenant": "acme", "queue": "default"}),
    )
    .await;
    let hooked = submit_with(
        &http,
        &base,
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        json!({"type": "http", "payload": {"url": allow}}),
    )
    .await;
    let bad = submit_with(
        &http,
        &base,
        "00-not-a-trace-at-all",
        json!({"type": "echo", "payload": 1}),
    )
    .await;

    let failing = submit_with(
        &http,
        &base,
        "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
        json!({"type": "fail", "payload": {"times": 1}, "max_retries": 0}),
    )
    .await;

    let spans = spans_until(&got, "the submit, task and outcome spans", |s| {
        let outcomes = s.iter().filter(|x| x.name == "orq.outcome").count();
        let submits = s.iter().filter(|x| x.name == "orq.submit").count();
        outcomes >= 4 && submits >= 4
    })
    .await;

    // A failed attempt is an error, with the handler's message, on the task and outcome spans.
    let task = spans
        .iter()
        .find(|x| x.name == "orq.task" && x.attr("orq.task_id") == Some(failing.as_str()))
        .expect("the failing task's span");
    let outcome = spans
        .iter()
        .find(|x| x.name == "orq.outcome" && x.parent_span_id == task.span_id)
        .expect("its outcome span");
    assert_eq!(outcome.attr("orq.outcome"), Some("failed"));
    for s in [task, outcome] {
        assert_eq!(s.status.0, 2, "status ERROR: {s:?}");
        assert!(s.status.1.contains("planned failure"), "{s:?}");
    }

    // The submit continues the caller's trace, with the caller's span as its parent.
    let submit = spans
        .iter()
        .find(|x| x.name == "orq.submit" && x.attr("orq.task_id") == Some(echo.as_str()))
        .expect("the echo task's submit span");
    assert_eq!(submit.service, "orq-api");
    assert_eq!(submit.trace_id, trace);
    assert_eq!(submit.parent_span_id, parent);
    assert_eq!(submit.attr("orq.tenant"), Some("acme"));
    assert_eq!(submit.attr("orq.type"), Some("echo"));
    assert_eq!(submit.attr("orq.queue"), Some("default"));
    // A malformed traceparent is ignored: a new trace, no parent, the task submitted.
    let fresh = spans
        .iter()
        .find(|x| x.name == "orq.submit" && x.attr("orq.task_id") == Some(bad.as_str()))
        .expect("the malformed submit's span");
    assert_eq!(fresh.parent_span_id, "", "{fresh:?}");
    assert_eq!(fresh.trace_id.len(), 32);
    assert_ne!(fresh.trace_id, "0".repeat(32));

    // The worker's task span and its children.
    for (id, ty) in [(&echo, "echo"), (&hooked, "http")] {
        let task = spans
            .iter()
            .find(|x| x.name == "orq.task" && x.attr("orq.task_id") == Some(id.as_str()))
            .unwrap_or_else(|| panic!("no task span for {id}: {spans:#?}"));
        assert_eq!(task.service, "orq-worker");
        assert_eq!(task.attr("orq.type"), Some(ty));
        assert_eq!(task.attr("orq.queue"), Some("default"));
        assert_eq!(task.attr("orq.attempt"), Some("1"));
        assert_eq!(task.attr("orq.epoch"), Some("1"));
        assert!(task.attr("orq.worker").is_some());
        for child in ["orq.lease", "orq.handler", "orq.outcome"] {
            let c = spans
                .iter()
                .find(|x| x.name == child && x.parent_span_id == task.span_id)
                .unwrap_or_else(|| panic!("no {child} under the task span of {id}"));
            assert_eq!(c.trace_id, task.trace_id);
        }
        let outcome = spans
            .iter()
            .find(|x| x.name == "orq.outcome" && x.parent_span_id == task.span_id)
            .unwrap();
        assert_eq!(outcome.attr("orq.outcome"), Some("completed"));
        // One trace from the caller to the outcome: the task span's parent is the submit span.
        let submit = spans
            .iter()
            .find(|x| x.name == "orq.submit" && x.attr("orq.task_id") == Some(id.as_str()))
            .unwrap();
        assert_eq!(
            task.trace_id, submit.trace_id,
            "the task continues the submit's trace"
        );
        assert_eq!(
            task.parent_span_id, submit.span_id,
            "the submit span is the task's parent"
        );
        // The task shows the context it stored: the submit span's, with the caller's state.
        let t = get_json(&http, &format!("{base}/tasks/{id}"))
            .await
            .unwrap();
        assert_eq!(
            t["traceparent"],
            format!("00-{}-{}-01", submit.trace_id, submit.span_id)
        );
        assert_eq!(t["tracestate"], STATE);
    }
    assert_eq!(
        spans
            .iter()
            .find(|x| x.name == "orq.task" && x.attr("orq.task_id") == Some(echo.as_str()))
            .unwrap()
            .trace_id,
        trace,
        "the caller's trace reaches the worker"
    );
    // The malformed submit's fresh trace is continued too.
    let task = spans
        .iter()
        .find(|x| x.name == "orq.task" && x.attr("orq.task_id") == Some(bad.as_str()))
        .expect("the task span of the malformed submit's task");
    assert_eq!(
        (task.trace_id.as_str(), task.parent_span_id.as_str()),
        (fresh.trace_id.as_str(), fresh.span_id.as_str())
    );

    // The webhook got the handler span's traceparent.
    let task = spans
        .iter()
        .find(|x| x.name == "orq.task" && x.attr("orq.task_id") == Some(hooked.as_str()))
        .unwrap();
    let handler = spans
        .iter()
        .find(|x| x.name == "orq.handler" && x.parent_span_id == task.span_id)
        .unwrap();
    let tps = got.lock().unwrap().hook_traceparents.clone();
    assert_eq!(
        tps,
        [format!("00-{}-{}-01", task.trace_id, handler.span_id)],
        "the webhook's traceparent"
    );
    let states = got.lock().unwrap().hook_tracestates.clone();
    assert_eq!(
        states,
        [vec![STATE.to_string()]],
        "the caller's tracestate, once"
    );
}

// Goal: an API that exports no traces still stores the caller's trace context, so a worker that
// exports continues the caller's trace (its task span a child of the caller's span), and the
// worker protocol hands the context out with the lease for workers in other languages; a
// submit without a traceparent stores none. Method: `orq api` without --otlp-endpoint, `orq
// worker` with it serving the queue `default`; one task there, one in `manual` leased through
// POST /api/v1/leases, one without headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_continues_the_callers_trace_when_the_api_exports_none() {
    let (collector, got) = receiver().await;
    let redis = RedisServer::start();
    let url = redis.url();
    let listen = free_listen_addr();
    let env = [("OTEL_BSP_SCHEDULE_DELAY", "100")];
    let _api = Proc::spawn_with(
        &["api", "--redis", &url, "--listen", &listen],
        &["OTEL_EXPORTER_OTLP_ENDPOINT"],
        &[],
    );
    let _worker = Proc::spawn_with(
        &[
            "worker",
            "--redis",
            &url,
            "--queues",
            "default",
            "--otlp-endpoint",
            &collector,
        ],
        &["OTEL_SERVICE_NAME"],
        &env,
    );
    let http = reqwest::Client::new();
    let base = format!("http://{listen}/api/v1");
    wait_ready(&http, &base).await;
    let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let id = submit_with(&http, &base, caller, json!({"type": "echo", "payload": 1})).await;
    let spans = spans_until(&got, "the task span", |s| {
        s.iter().any(|x| x.name == "orq.outcome")
    })
    .await;
    let task = spans
        .iter()
        .find(|x| x.name == "orq.task" && x.attr("orq.task_id") == Some(id.as_str()))
        .expect("the task span");
    assert_eq!(task.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(
        task.parent_span_id, "00f067aa0ba902b7",
        "the caller's span is the parent"
    );
    assert!(
        !spans.iter().any(|x| x.name == "orq.submit"),
        "the API exports nothing"
    );

    let manual = submit_with(
        &http,
        &base,
        caller,
        json!({"type": "echo", "payload": 2, "queue": "manual"}),
    )
    .await;
    let r = http
        .post(format!("{base}/leases"))
        .json(&json!({"queues": ["manual"], "worker": "py-1", "count": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let leased = r.json::<Value>().await.unwrap();
    let t = &leased["tasks"][0];
    assert_eq!(t["id"], manual.as_str());
    assert_eq!(t["traceparent"], caller);
    assert_eq!(t["tracestate"], STATE);

    // No context without a traceparent, nor from a malformed one that the OpenTelemetry SDK's
    // own parser would take with other ids, nor from two traceparent headers.
    let tp31 = "00-1234567890123456789012345678901-00f067aa0ba902b7-01";
    for headers in [
        vec![],
        vec![("traceparent", tp31)],
        vec![("traceparent", caller), ("traceparent", caller)],
    ] {
        let mut req = http.post(format!("{base}/tasks"));
        for (k, v) in &headers {
            req = req.header(*k, *v);
        }
        let r = req
            .json(&json!({"type": "echo", "payload": 3, "queue": "manual"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let plain = r.json::<Value>().await.unwrap();
        assert_eq!(plain["traceparent"], Value::Null, "{headers:?}");
        assert_eq!(plain["tracestate"], Value::Null, "{headers:?}");
    }
}

// Goal: tracing is off by default: a worker and an API without --otlp-endpoint send nothing, and
// the webhook gets the caller's context passed on unchanged (W3C asks that of a participant that
// does not trace), none for a task submitted without; with an endpoint, the standard switches
// turn exporting off as well (`OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`), and a bad
// endpoint is then no error. Method: the same receiver, processes without the flag, then with it
// and one switch each, then with a switch and an endpoint that is not a URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_nothing_is_exported() {
    let (collector, got) = receiver().await;
    exports_nothing(&collector, &got, &[], &[], &[]).await;
    let endpoint = ["--otlp-endpoint", collector.as_str()];
    exports_nothing(
        &collector,
        &got,
        &endpoint,
        &[("OTEL_SDK_DISABLED", "true")],
        &[("OTEL_TRACES_EXPORTER", "none")],
    )
    .await;
    // Switched off, an endpoint orq could not use (a gRPC-style one set for other programs) is
    // no error: it is not used.
    exports_nothing(
        &collector,
        &got,
        &[],
        &[
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"),
        ],
        &[
            ("OTEL_TRACES_EXPORTER", "none"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "not a url"),
        ],
    )
    .await;
}

/// An `orq api` and an `orq worker` with `args` and their env, on a fresh Redis, run an `http`
/// task submitted with a traceparent and one without: nothing reaches the receiver `got` at
/// `collector`; the webhook gets the caller's `traceparent` and `tracestate` for the first, none
/// for the second.
async fn exports_nothing(
    collector: &str,
    got: &Shared,
    args: &[&str],
    api_env: &[(&str, &str)],
    worker_env: &[(&str, &str)],
) {
    let redis = RedisServer::start();
    let url = redis.url();
    let listen = free_listen_addr();
    let allow = format!("{collector}/hook");
    let clear = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_SDK_DISABLED",
        "OTEL_TRACES_EXPORTER",
    ];
    let role = |role: &[&str], env| {
        let all: Vec<&str> = role.iter().chain(args).copied().collect();
        Proc::spawn_with(&all, &clear, env)
    };
    let _api = role(
        &[
            "api",
            "--redis",
            &url,
            "--listen",
            &listen,
            "--http-allow",
            &allow,
        ],
        api_env,
    );
    let _worker = role(
        &["worker", "--redis", &url, "--http-allow", &allow],
        worker_env,
    );
    let http = reqwest::Client::new();
    let base = format!("http://{listen}/api/v1");
    wait_ready(&http, &base).await;
    let before = got.lock().unwrap().hook_traceparents.len();
    let caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let traced = submit_with(
        &http,
        &base,
        caller,
        json!({"type": "http", "payload": {"url": allow}}),
    )
    .await;
    let plain = submit_task(
        &http,
        &base,
        json!({"type": "http", "payload": {"url": allow}}),
    )
    .await;
    for id in [&traced, &plain] {
        wait_for("the http task to complete", async || {
            let t = get_json(&http, &format!("{base}/tasks/{id}")).await?;
            (t["status"] == "completed").then_some(t)
        })
        .await;
    }
    let r = got.lock().unwrap();
    let setup = format!("{args:?} {api_env:?} {worker_env:?}");
    assert_eq!(r.posts, 0, "nothing exported ({setup})");
    let mut calls: Vec<(&String, &Vec<String>)> = r.hook_traceparents[before..]
        .iter()
        .zip(&r.hook_tracestates[before..])
        .collect();
    calls.sort();
    assert_eq!(
        calls,
        [
            (&String::new(), &vec![]),
            (&caller.to_string(), &vec![STATE.to_string()])
        ],
        "the caller's context passed on, none without ({setup})"
    );
}
