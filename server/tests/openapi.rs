//! The OpenAPI document at `/api/v1/openapi.json`: it lists exactly the routes of the router,
//! parses as OpenAPI 3.1, every `$ref` in it resolves, its security says what the router
//! enforces, and the limits written in its attributes are the code's. Then the regressions that
//! schemathesis found (test.sh runs it against a live server).

mod common;

use axum::http::{Method, StatusCode};
use common::{code, declared_routes, message, TestApp};
use orq_server::auth::{toml_entry, ApiKeys, Auth, Scope};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::Arc;

const ADMIN: &str = "orq_openapi_test_admin";

/// The document as the router serves it (no key needed, even with keys configured).
async fn served_document() -> Value {
    let keys = toml_entry("ops", ADMIN, &Scope::Admin);
    let auth = Auth::Keys(Arc::new(ApiKeys::parse(&keys).expect("a valid keys file")));
    let (app, _) = TestApp::embedded(false, vec![], |s| s.with_auth(auth));
    let (s, doc, headers) = app
        .call_as(None, Method::GET, "/api/v1/openapi.json", None)
        .await;
    assert_eq!(s, StatusCode::OK, "{doc}");
    assert_eq!(headers["content-type"], "application/json");
    doc
}

/// Every (METHOD, path) operation of `doc`.
fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            if ["get", "post", "put", "delete", "patch", "head", "options"].contains(&&**method) {
                out.push((method.to_uppercase(), path.clone(), op));
            }
        }
    }
    out
}

/// The value a local `$ref` (`#/components/...`) points at.
fn resolve<'a>(doc: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    doc.pointer(pointer)
}

/// Every `$ref` string anywhere in `v`.
fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => out.push(r.clone()),
                    _ => refs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

/// A component schema, through an `allOf` wrapper (see `RunAtOrDelay`).
fn schema_properties<'a>(doc: &'a Value, name: &str) -> &'a Value {
    let s = &doc["components"]["schemas"][name];
    match s.get("allOf") {
        Some(parts) => &parts[0]["properties"],
        None => &s["properties"],
    }
}

/// The query or path parameter `name` of an operation.
fn parameter<'a>(doc: &'a Value, method: &str, path: &str, name: &str) -> &'a Value {
    doc["paths"][path][method]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{method} {path} has no parameter {name}"))
}

/// The fixed fields OpenAPI 3.1 requires of the objects this document uses (the full
/// meta-schema check is schemathesis's, which refuses to load an invalid document).
fn check_openapi_31_shape(doc: &Value) {
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["info"]["title"].is_string() && doc["info"]["version"].is_string());
    for (method, path, op) in operations(doc) {
        let at = format!("{method} {path}");
        // Every route is under /api/v1 but Prometheus's conventional /metrics.
        assert!(path.starts_with("/api/v1/") || path == "/metrics", "{at}");
        let responses = op["responses"].as_object().expect("responses");
        assert!(!responses.is_empty(), "{at}");
        for (status, r) in responses {
            let n: u16 = status
                .parse()
                .unwrap_or_else(|_| panic!("{at}: status {status}"));
            assert!((100..600).contains(&n), "{at}: status {status}");
            let r = r
                .get("$ref")
                .map_or(r, |x| resolve(doc, x.as_str().unwrap()).unwrap());
            assert!(r["description"].is_string(), "{at} {status}: a description");
            for (media, content) in r["content"].as_object().into_iter().flatten() {
                assert!(media.contains('/'), "{at} {status}: {media}");
                assert!(content["schema"].is_object(), "{at} {status} {media}");
            }
        }
        for p in op["parameters"].as_array().into_iter().flatten() {
            let loc = p["in"].as_str().expect("in");
            assert!(["path", "query", "header"].contains(&loc), "{at}: {p}");
            assert!(
                p["name"].is_string() && p["schema"].is_object(),
                "{at}: {p}"
            );
            if loc == "path" {
                let name = p["name"].as_str().unwrap();
                assert!(path.contains(&format!("{{{name}}}")), "{at}: {name}");
                assert_eq!(p["required"], true, "{at}: path parameters are required");
            }
        }
        if let Some(body) = op.get("requestBody") {
            assert!(
                body["content"]["application/json"]["schema"].is_object(),
                "{at}"
            );
        }
    }
    for (name, s) in doc["components"]["schemas"].as_object().expect("schemas") {
        assert!(s.is_object(), "{name}");
    }
}

// Goal: the document lists exactly the routes of the router (none missing, none invented) and
// is OpenAPI 3.1 that a typed reader accepts, with every reference resolving. Method: the route
// list read from `app`'s source (as the authorisation matrix does), compared with the paths of
// the served document; the document parsed back into utoipa's OpenAPI model.
#[tokio::test]
async fn document_lists_every_route_of_the_router() {
    let doc = served_document().await;
    check_openapi_31_shape(&doc);

    let documented: BTreeSet<(String, String)> = operations(&doc)
        .into_iter()
        .map(|(m, p, _)| (m, p))
        .collect();
    assert_eq!(
        documented,
        declared_routes(),
        "every route of the router, and only those, is in the document"
    );

    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(
        all.len() > 50,
        "the document uses references: {}",
        all.len()
    );
    for r in &all {
        assert!(resolve(&doc, r).is_some(), "dangling reference {r}");
    }
    let ids: Vec<_> = operations(&doc)
        .iter()
        .map(|(_, _, op)| op["operationId"].as_str().unwrap().to_string())
        .collect();
    let unique: BTreeSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "operation ids are unique: {ids:?}");
}

// Goal: the document's security is what the router enforces: with keys configured, a request
// without a key is 401 exactly on the operations that name the bearer scheme, and those (and
// only those) document a 401 answer. Method: one keyless request per documented operation, its
// path parameters filled with plausible values.
#[tokio::test]
async fn document_security_matches_what_the_router_enforces() {
    let doc = served_document().await;
    let scheme = &doc["components"]["securitySchemes"]["bearer"];
    assert_eq!(
        (&scheme["type"], &scheme["scheme"]),
        (&json!("http"), &json!("bearer"))
    );

    let keys = toml_entry("ops", ADMIN, &Scope::Admin);
    let auth = Auth::Keys(Arc::new(ApiKeys::parse(&keys).unwrap()));
    let (app, _) = TestApp::embedded(false, vec![], |s| s.with_auth(auth));
    let mut public = Vec::new();
    for (method, path, op) in operations(&doc) {
        let secured = match op.get("security") {
            None => false,
            Some(s) => {
                assert_eq!(s, &json!([{"bearer": []}]), "{method} {path}");
                true
            }
        };
        assert_eq!(
            op["responses"].get("401").is_some(),
            secured,
            "{method} {path}: a 401 answer is documented exactly when a key is needed"
        );
        let uri = path
            .replace("{id}", "01KB0000000000000000000000")
            .replace("{queue}", "default")
            .replace("{tenant}", "acme")
            .replace("{name}", "seed-1.jsonl");
        let m = Method::from_bytes(method.as_bytes()).unwrap();
        let (s, v, _) = app.call_as(None, m, &uri, None).await;
        if secured {
            assert_eq!(
                (s, code(&v)),
                (StatusCode::UNAUTHORIZED, "unauthorized"),
                "{method} {uri}"
            );
        } else {
            assert_ne!(s, StatusCode::UNAUTHORIZED, "{method} {uri}: {v}");
            public.push(path);
        }
    }
    public.sort();
    assert_eq!(
        public,
        ["/api/v1/healthz", "/api/v1/openapi.json", "/api/v1/readyz"],
        "the public routes of the README"
    );
}

// Goal: the limits written as literals in the `#[schema]` / `#[param]` attributes (which take no
// constants) are the code's, and the enums are built from the code's lists. Method: read them
// back from the document and compare with the constants the handlers enforce.
#[tokio::test]
async fn document_constraints_match_the_code() {
    let doc = served_document().await;
    let name_pattern = orq_server::openapi::NAME_PATTERN;
    assert!(
        orq::keys::NAME_MAX == 64 && name_pattern.contains("{1,64}"),
        "the name pattern's length is the code's"
    );

    // A simulation's bounds are the code's.
    let sim = schema_properties(&doc, "SimulationRequest");
    assert_eq!(sim["tasks"]["maximum"], orq_server::simulations::TASKS_MAX);
    assert_eq!(sim["seed"]["maximum"], orq_server::simulations::SEED_MAX);
    assert_eq!(sim["seed"]["minimum"], 0);

    // Every name field and parameter uses the one pattern.
    let submit = schema_properties(&doc, "SubmitBody");
    let replay = schema_properties(&doc, "BulkReplayBody");
    for p in [
        &submit["queue"],
        &submit["tenant"],
        &submit["type"],
        &replay["queue"],
        &replay["tenant"],
        &replay["type"],
    ] {
        assert_eq!(p["pattern"], name_pattern, "{p}");
    }
    let name_params = [
        ("get", "/api/v1/tasks", "queue"),
        ("get", "/api/v1/tasks", "tenant"),
        ("get", "/api/v1/tasks", "type"),
        ("get", "/api/v1/dlq", "queue"),
        ("get", "/api/v1/dlq", "tenant"),
        ("get", "/api/v1/dlq", "type"),
        ("get", "/api/v1/tasks/{id}", "queue"),
        ("get", "/api/v1/queues/{queue}", "queue"),
        ("put", "/api/v1/queues/{queue}/tenants/{tenant}", "tenant"),
        ("get", "/api/v1/events", "queue"),
    ];
    for (m, path, name) in name_params {
        let p = parameter(&doc, m, path, name);
        assert_eq!(p["schema"]["pattern"], name_pattern, "{m} {path} {name}");
    }

    // Numeric limits.
    let range = |v: &Value| (v["minimum"].as_u64(), v["maximum"].as_u64());
    use orq::task::*;
    let max = |n: u64| Some(n);
    assert_eq!(
        range(&submit["priority"]),
        (Some(0), max(PRIORITY_MAX.into()))
    );
    assert_eq!(
        range(&submit["max_retries"]),
        (Some(0), max(MAX_RETRIES_MAX.into()))
    );
    assert_eq!(range(&submit["delay_ms"]), (Some(0), max(DELAY_MS_MAX)));
    assert_eq!(
        range(&submit["lease_ms"]),
        (Some(LEASE_MS_MIN), max(LEASE_MS_MAX))
    );
    assert_eq!(range(&submit["timeout_ms"]), (Some(1), max(TIMEOUT_MS_MAX)));
    let defaults = schema_properties(&doc, "QueueDefaults");
    assert_eq!(
        range(&defaults["lease_ms"]),
        (Some(LEASE_MS_MIN), max(LEASE_MS_MAX))
    );
    assert_eq!(
        range(&defaults["timeout_ms"]),
        (Some(1), max(TIMEOUT_MS_MAX))
    );
    for backoff in ["BackoffBody", "BackoffDefaults"] {
        let initial = &schema_properties(&doc, backoff)["initial_ms"];
        assert_eq!(
            range(initial),
            (Some(0), max(BACKOFF_INITIAL_MS_MAX)),
            "{backoff}"
        );
    }
    let settings = schema_properties(&doc, "QueueSettingsBody");
    assert_eq!(
        range(&settings["aging_step_ms"]),
        (Some(0), max(orq_lua::facts::AGING_STEP_MS_MAX))
    );
    let batch = schema_properties(&doc, "BatchBody");
    assert_eq!(batch["tasks"]["maxItems"], json!(BATCH_MAX));
    assert_eq!(
        range(&replay["limit"]),
        (Some(1), max(orq::client::REPLAY_LIMIT_MAX))
    );
    for path in ["/api/v1/tasks", "/api/v1/dlq"] {
        let limit = &parameter(&doc, "get", path, "limit")["schema"];
        let want = (Some(1), max(orq::client::LIST_LIMIT_MAX.into()));
        assert_eq!(range(limit), want, "{path}");
    }
    // The worker protocol's limits and patterns.
    let lease = schema_properties(&doc, "LeaseBody");
    assert_eq!(
        range(&lease["count"]),
        (Some(1), max(orq::ops::LEASE_BATCH_MAX as u64))
    );
    assert_eq!(
        range(&lease["wait_ms"]),
        (Some(0), max(orq_server::pull::LEASE_WAIT_MS_MAX))
    );
    assert_eq!(
        lease["queues"]["maxItems"],
        json!(orq_server::pull::LEASE_QUEUES_MAX)
    );
    let name_schema = &doc["components"]["schemas"]["Name"];
    assert_eq!(name_schema["pattern"], name_pattern);
    assert_eq!(
        lease["queues"]["items"]["$ref"],
        "#/components/schemas/Name"
    );
    let heartbeat = schema_properties(&doc, "HeartbeatBody");
    assert_eq!(
        range(&heartbeat["extend_ms"]),
        (Some(LEASE_MS_MIN), max(LEASE_MS_MAX))
    );
    let fail = schema_properties(&doc, "FailBody");
    assert_eq!(
        fail["error"]["maxLength"],
        json!(orq_server::model::ERROR_MAX_BYTES)
    );
    let token = &doc["components"]["schemas"]["LeaseToken"];
    assert_eq!(token["pattern"], orq_server::model::LEASE_TOKEN_PATTERN);
    // The pattern, read as the code reads tokens: each sample is accepted by both or neither.
    let pattern = orq_server::model::LEASE_TOKEN_PATTERN;
    assert!(pattern.contains("{0,19}") && pattern.contains("{1,32}"));
    assert_eq!(orq::keys::TOKEN_BITS_MAX, 32);
    for (sample, ok) in [
        ("0-a", true),
        ("12-0f", true),
        ("01-a", false),
        ("1-A", false),
    ] {
        assert_eq!(orq::keys::is_valid_lease_token(sample), ok, "{sample}");
    }

    let drain = &parameter(&doc, "post", "/api/v1/queues/{queue}/drain", "timeout_ms")["schema"];
    assert_eq!(
        range(drain),
        (Some(0), max(orq_server::api::DRAIN_TIMEOUT_MS_MAX))
    );

    // `delay_ms` and `run_at` are exclusive: one of them absent or null.
    let exclusive = &doc["components"]["schemas"]["SubmitBody"]["allOf"][1]["anyOf"];
    assert_eq!(
        exclusive,
        &json!([
            {"type": "object", "properties": {"delay_ms": {"type": "null"}}},
            {"type": "object", "properties": {"run_at": {"type": "null"}}},
        ]),
    );

    // Enums from the code's lists.
    let statuses: Vec<_> = orq::Status::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(
        doc["components"]["schemas"]["Status"]["enum"],
        json!(statuses)
    );
    let counts = &doc["components"]["schemas"]["Counts"];
    assert_eq!(counts["required"], json!(statuses));
    assert_eq!(
        doc["components"]["schemas"]["ErrorCode"]["enum"],
        json!(orq_server::error::ErrorCode::ALL)
    );
}

// Goal (found by schemathesis): JSON Schema's `integer` includes numbers written with a zero
// fraction or an exponent (`6079.0`, `1e3`), and clients in languages without an integer type
// send them; the bodies accept them as the document promises, while a real fraction or a value
// out of range is still a 400 naming the field.
#[tokio::test]
async fn integral_numbers_with_a_fraction_are_integers_in_bodies() {
    let (app, _) = TestApp::embedded(false, vec![], |s| s);
    let (s, t) = app
        .call(
            Method::POST,
            "/api/v1/tasks",
            Some(
                r#"{"payload": 1, "priority": 5.0, "max_retries": 2e0, "delay_ms": 1e3,
                "lease_ms": 30000.0, "backoff": {"initial_ms": 10.0}}"#,
            ),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{t}");
    assert_eq!((&t["priority"], &t["max_retries"]), (&json!(5), &json!(2)));
    assert_eq!(t["backoff"]["initial_ms"], json!(10));
    let (s, v) = app
        .call(
            Method::PUT,
            "/api/v1/queues/default/tenants/acme",
            Some(r#"{"max_inflight": 2217.0, "burst": 10.0}"#),
        )
        .await;
    assert_eq!(
        (s, &v["max_inflight"]),
        (StatusCode::OK, &json!(2217)),
        "{v}"
    );
    let (s, v) = app
        .call(
            Method::POST,
            "/api/v1/dlq/replay",
            Some(r#"{"limit": 6079.0}"#),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    for (body, field) in [
        (r#"{"payload": 1, "priority": 1.5}"#, "priority"),
        (r#"{"payload": 1, "max_retries": -1.0}"#, "max_retries"),
        (r#"{"payload": 1, "delay_ms": 1e30}"#, "delay_ms"),
        (
            r#"{"payload": 1, "backoff": {"max_ms": -2.0}}"#,
            "backoff.max_ms",
        ),
    ] {
        let (s, v) = app.call(Method::POST, "/api/v1/tasks", Some(body)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {v}");
        assert!(message(&v).starts_with(field), "{body}: {v}");
    }
}

// Goal (found by schemathesis): `status=` and `limit=` with an empty value are refused like any
// other value outside the document's enum and range, instead of silently meaning "absent";
// an empty `cursor=` still means the first page.
#[tokio::test]
async fn empty_status_and_limit_are_refused() {
    let (app, _) = TestApp::embedded(false, vec![], |s| s);
    for (uri, field) in [
        ("/api/v1/tasks?status=", "status"),
        ("/api/v1/tasks?limit=", "limit"),
        ("/api/v1/dlq?limit=", "limit"),
    ] {
        let (s, v) = app.call(Method::GET, uri, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {v}");
        assert!(message(&v).starts_with(field), "{uri}: {v}");
    }
    let (s, v) = app.call(Method::GET, "/api/v1/tasks?cursor=", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
}

/// The committed copy of the document that the dashboard's TypeScript types are generated from
/// (`dashboard/lib/api-types.ts`, by `npm run gen:api` in `dashboard/`).
const SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../dashboard/lib/openapi.json");

/// The environment variable that makes the snapshot test write the snapshot instead.
const UPDATE_VAR: &str = "ORQ_UPDATE_OPENAPI";

// Goal: the dashboard's types cannot drift from the server. The served document equals the
// committed snapshot; `ORQ_UPDATE_OPENAPI=1` rewrites the snapshot instead of comparing.
#[tokio::test]
async fn dashboard_snapshot_is_the_served_document() {
    let doc = served_document().await;
    let pretty = serde_json::to_string_pretty(&doc).expect("a JSON value serialises") + "\n";
    if std::env::var_os(UPDATE_VAR).is_some() {
        std::fs::write(SNAPSHOT, &pretty).expect("write dashboard/lib/openapi.json");
        return;
    }
    let committed = std::fs::read_to_string(SNAPSHOT).unwrap_or_default();
    assert!(
        committed == pretty,
        "dashboard/lib/openapi.json is not the server's OpenAPI document; regenerate it with \
         `{UPDATE_VAR}=1 cargo test -p orq-server --test openapi dashboard_snapshot`, then the \
         dashboard's types with `cd dashboard && npm run gen:api`, and commit both"
    );
}
