//! The `http` built-in handler: calls a webhook under the allow-list ([`super::http_allow`]).
//!
//! Its payload `{"url", "method", "headers", "body", "timeout_ms"}` is checked at submit (422
//! naming the field) and again when the task runs, against the allow-list of the worker that runs
//! it (it may have changed since): a URL no longer allowed fails the task permanently, naming the
//! reason. The request goes to the normalised URL, never to the submitted text; redirects are not
//! followed; the whole exchange (connect, headers, body) is bounded by the task's `timeout_ms`,
//! and at most [`HTTP_BODY_KEEP_BYTES`] of the response body are read.

use super::http_allow::HttpAllow;
use super::parse;
use async_trait::async_trait;
use orq::{Handler, HandlerError, TaskContext};
use reqwest::Url;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// Longest `http` call timeout (ms): connect, send, and read the response.
pub const HTTP_TIMEOUT_MS_MAX: u64 = 300_000;
/// Default `http` call timeout (ms).
pub const HTTP_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// Most bytes of an `http` response body read and kept in the task's result (or error); the
/// rest is never read (the connection is closed).
pub const HTTP_BODY_KEEP_BYTES: usize = 64 * 1024;
/// Most headers an `http` task may set.
pub const HTTP_HEADERS_MAX: usize = 32;
/// Most bytes of header names and values an `http` task may set, all together.
pub const HTTP_HEADER_BYTES_MAX: usize = 8 * 1024;

/// Headers an `http` task may not set: routing, framing and connection headers belong to the
/// HTTP client (a `Host` header could route around the allow-list behind a proxy), and the
/// headers proxies and frameworks trust to rewrite a request's host, path, scheme or method.
/// Names are compared in lower case with `_` read as `-` (WSGI servers and some proxies treat
/// the two alike). See also [`FORBIDDEN_HEADER_PREFIXES`].
pub const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "expect",
    "forwarded",
    "front-end-https",
    "x-host",
    "x-original-url",
    "x-original-uri",
    "x-original-host",
    "x-rewrite-url",
    "x-http-method",
    "x-http-method-override",
    "x-method-override",
    "x-real-ip",
    "x-client-ip",
    "true-client-ip",
];

/// Prefixes of header names an `http` task may not set (compared as [`FORBIDDEN_HEADERS`]):
/// `proxy-*`, every `x-forwarded-*`, Envoy's `x-envoy-*`, and `x-orq-*` (orq sets
/// `x-orq-task-id`, `x-orq-attempt`, `x-orq-epoch`).
pub const FORBIDDEN_HEADER_PREFIXES: &[&str] = &["proxy-", "x-forwarded-", "x-envoy-", "x-orq-"];

/// True when a payload may not set the header `name`.
pub fn header_forbidden(name: &str) -> bool {
    let name = name.to_ascii_lowercase().replace('_', "-");
    FORBIDDEN_HEADERS.contains(&name.as_str())
        || FORBIDDEN_HEADER_PREFIXES
            .iter()
            .any(|p| name.starts_with(p))
}

/// `http` payload.
#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object {\"url\": <URL>, \"method\", \"headers\", \"body\", \"timeout_ms\"}"
)]
struct HttpPayload {
    url: String,
    #[serde(default = "default_method")]
    method: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    body: Value,
    timeout_ms: Option<u64>,
}

fn default_method() -> String {
    "POST".into()
}

/// A payload that passed every check, with the URL to request.
#[derive(Debug)]
pub(crate) struct Checked {
    url: Url,
    payload: HttpPayload,
}

/// Decode and check an `http` payload against `allow`. Errors name the field
/// (`payload.url: ...`).
pub(crate) fn check_payload(payload: &str, allow: &HttpAllow) -> Result<Checked, String> {
    let p: HttpPayload = parse("http", payload)?;
    if p.method != "POST" && p.method != "PUT" {
        return Err("payload.method: must be POST or PUT".into());
    }
    let url = allow
        .check(&p.url)
        .map_err(|e| format!("payload.url: {e}"))?;
    if p.timeout_ms
        .is_some_and(|t| t == 0 || t > HTTP_TIMEOUT_MS_MAX)
    {
        return Err(format!(
            "payload.timeout_ms: must be 1..={HTTP_TIMEOUT_MS_MAX}"
        ));
    }
    if p.headers.len() > HTTP_HEADERS_MAX {
        return Err(format!("payload.headers: at most {HTTP_HEADERS_MAX}"));
    }
    let header_bytes: usize = p.headers.iter().map(|(k, v)| k.len() + v.len()).sum();
    if header_bytes > HTTP_HEADER_BYTES_MAX {
        return Err(format!(
            "payload.headers: at most {HTTP_HEADER_BYTES_MAX} bytes of names and values"
        ));
    }
    for (k, v) in &p.headers {
        if header_forbidden(k) {
            return Err(format!(
                "payload.headers: {k} is set by orq or the HTTP client and cannot be given"
            ));
        }
        reqwest::header::HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("payload.headers: invalid header name {k:?}"))?;
        reqwest::header::HeaderValue::from_str(v)
            .map_err(|_| format!("payload.headers: invalid value for {k:?}"))?;
    }
    Ok(Checked { url, payload: p })
}

/// `http`: calls a webhook under the allow-list. 2xx succeeds with `{"status", "body"}` (body
/// truncated to [`HTTP_BODY_KEEP_BYTES`]); 408, 429, 5xx, timeouts and connection errors are
/// retryable; redirects are not followed; other statuses, and a payload the allow-list refuses
/// when the task runs, are permanent failures.
#[derive(Debug)]
pub struct Http {
    client: reqwest::Client,
    allow: HttpAllow,
}

impl Http {
    /// A handler with its own HTTP client (no redirects) and allow-list.
    pub fn new(allow: HttpAllow) -> Self {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("build the HTTP client");
        Http { client, allow }
    }
}

#[async_trait]
impl Handler for Http {
    async fn handle(&self, ctx: TaskContext) -> Result<Value, HandlerError> {
        let Checked { url, payload: p } = check_payload(&ctx.task.payload, &self.allow)
            .map_err(|e| HandlerError::permanent(format!("{e} (checked when the task ran)")))?;
        let method = if p.method == "PUT" {
            reqwest::Method::PUT
        } else {
            reqwest::Method::POST
        };
        let timeout = p.timeout_ms.unwrap_or(HTTP_TIMEOUT_MS_DEFAULT);
        let mut req = self
            .client
            .request(method, url)
            .timeout(Duration::from_millis(timeout))
            .header("x-orq-task-id", &ctx.task.id)
            .header("x-orq-attempt", ctx.attempt.to_string())
            .header("x-orq-epoch", ctx.epoch.to_string())
            .json(&p.body);
        // The trace goes on to the webhook; a trace header the payload sets is its own.
        let own = |name: &str| p.headers.keys().any(|k| k.eq_ignore_ascii_case(name));
        if !own("traceparent") {
            let stored = ctx.task.trace.as_ref();
            req = req.headers(crate::telemetry::outgoing_headers(stored, |name| {
                !own(name)
            }));
        }
        for (k, v) in &p.headers {
            req = req.header(k, v);
        }
        let exchange = async {
            let mut resp = req.send().await?;
            let status = resp.status().as_u16();
            let mut kept = Vec::new();
            while kept.len() < HTTP_BODY_KEEP_BYTES {
                let Some(chunk) = resp.chunk().await? else {
                    break;
                };
                let room = HTTP_BODY_KEEP_BYTES - kept.len();
                kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Ok::<_, reqwest::Error>((status, kept))
        };
        let (status, kept) = tokio::select! {
            r = exchange => r.map_err(|e| request_error(&ctx, &e, timeout))?,
            _ = ctx.cancel.cancelled() => return Err(HandlerError::retryable("cancelled")),
        };
        let body = String::from_utf8_lossy(&kept).into_owned();
        match status {
            200..=299 => Ok(serde_json::json!({"status": status, "body": body})),
            408 | 429 | 500..=599 => Err(HandlerError::retryable(format!("HTTP {status}: {body}"))),
            301 | 302 | 303 | 307 | 308 => Err(HandlerError::permanent(format!(
                "HTTP {status}: redirects are not followed"
            ))),
            _ => Err(HandlerError::permanent(format!("HTTP {status}: {body}"))),
        }
    }
}

/// The task's error for a failed exchange: a category only (the task's reader learns no resolver
/// or socket detail); the full error chain goes to the worker's log.
fn request_error(ctx: &TaskContext, e: &reqwest::Error, timeout_ms: u64) -> HandlerError {
    let mut chain = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        chain.push_str(": ");
        chain.push_str(&s.to_string());
        source = s.source();
    }
    tracing::warn!(task = %ctx.task.id, error = %chain, "http task: the request failed");
    HandlerError::retryable(if e.is_timeout() {
        format!("request timed out after {timeout_ms} ms")
    } else if e.is_connect() {
        "could not connect to the webhook (see the worker's log)".to_string()
    } else {
        "the request failed before a complete response (see the worker's log)".to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::super::check_payload as check;
    use super::*;

    // Goal: the http payload's fields are checked at submit with a 422 naming the field.
    #[test]
    fn http_payloads_are_checked_at_submit() {
        let a = HttpAllow::parse(["http://127.0.0.1:9000/"]).unwrap();
        assert!(check("http", r#"{"url": "http://127.0.0.1:9000/h"}"#, &a).is_ok());
        let refused = |payload: &str, field: &str| {
            let e = check("http", payload, &a).unwrap_err();
            assert_eq!(e.status().as_u16(), 422, "{payload}");
            assert!(e.message.contains(field), "{payload}: {}", e.message);
        };
        refused(r#"{"url": "http://10.0.0.1/h"}"#, "payload.url");
        refused(r#"{"url": "http://127.0.0.1:9000/..;/h"}"#, "payload.url");
        refused(
            r#"{"url": "http://127.0.0.1:9000/h", "method": "GET"}"#,
            "payload.method",
        );
        refused(
            r#"{"url": "http://127.0.0.1:9000/h", "timeout_ms": 0}"#,
            "payload.timeout_ms",
        );
        for h in [
            "X-Forwarded-Host",
            "X_Forwarded_Host",
            "x-forwarded_host",
            "Transfer_Encoding",
            "X-Forwarded-Prefix",
            "X-Envoy-Original-Path",
            "X-Method-Override",
            "HOST",
            "Proxy-Authorization",
            "X-ORQ-EPOCH",
        ] {
            let p = serde_json::json!({"url": "http://127.0.0.1:9000/h", "headers": {h: "a"}});
            refused(&p.to_string(), "payload.headers");
        }
        let p = r#"{"url": "http://127.0.0.1:9000/h", "headers": {"Authorization": "Bearer x", "X-Signature": "s"}}"#;
        assert!(check("http", p, &a).is_ok());
        let many: BTreeMap<String, String> = (0..=HTTP_HEADERS_MAX)
            .map(|i| (format!("x-h{i}"), "v".to_string()))
            .collect();
        let p = serde_json::json!({"url": "http://127.0.0.1:9000/h", "headers": many});
        refused(&p.to_string(), "payload.headers");
        let big = serde_json::json!({"url": "http://127.0.0.1:9000/h",
            "headers": {"x-big": "v".repeat(HTTP_HEADER_BYTES_MAX)}});
        refused(&big.to_string(), "payload.headers");
    }
}
