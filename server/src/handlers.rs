//! Built-in handlers for tasks submitted over HTTP: `echo`, `sleep`, `fail` (demos and tests)
//! and `http` (call a webhook under an allow-list). Their payloads are checked at submit time
//! ([`check_payload`]) so a task that can never run is refused with 422 instead of dying later.

use crate::error::ApiError;
use async_trait::async_trait;
use orq::{Handler, HandlerError, Handlers, TaskContext};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Longest `sleep` a task may ask for (ms): one hour.
pub const SLEEP_MS_MAX: u64 = 3_600_000;
/// Longest `http` call timeout (ms).
pub const HTTP_TIMEOUT_MS_MAX: u64 = 300_000;
/// Default `http` call timeout (ms).
pub const HTTP_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// Most bytes of an `http` response body kept in the task's result.
pub const HTTP_BODY_KEEP_BYTES: usize = 64 * 1024;

/// Longest URL an `http` task may call (bytes).
pub const URL_MAX_BYTES: usize = 2048;
/// Headers an `http` task may not set: routing, framing and connection headers belong to the
/// HTTP client (a `Host` header could route around the allow-list behind a proxy).
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
];

/// The allow-list of the `http` handler: URL prefixes (`--http-allow`).
#[derive(Debug, Clone, Default)]
pub struct HttpAllow(pub Vec<String>);

impl HttpAllow {
    /// Check the prefixes: each must be an http(s) URL with a host (`http://` alone would allow
    /// every URL). Errors name the bad prefix.
    pub fn validate(&self) -> Result<(), String> {
        for p in &self.0 {
            let url = reqwest::Url::parse(p).map_err(|e| format!("--http-allow {p}: {e}"))?;
            let has_host = url.host_str().is_some_and(|h| !h.is_empty());
            if !matches!(url.scheme(), "http" | "https") || !has_host {
                return Err(format!(
                    "--http-allow {p}: must be an http(s) URL prefix with a host"
                ));
            }
        }
        Ok(())
    }

    /// True when `url` starts with an allowed prefix at a boundary: the prefix ends with `/`, or
    /// the URL continues with `/`, `?`, `#` or ends there — so `http://a:80` does not allow
    /// `http://a:8080` nor `http://a:80@evil`.
    pub fn allows(&self, url: &str) -> bool {
        self.0.iter().any(|p| {
            url.strip_prefix(p.as_str()).is_some_and(|rest| {
                p.ends_with('/')
                    || rest.is_empty()
                    || rest.starts_with('/')
                    || rest.starts_with('?')
                    || rest.starts_with('#')
            })
        })
    }
}

/// `sleep` payload.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SleepPayload {
    ms: u64,
}

/// `fail` payload.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct FailPayload {
    times: Option<u32>,
    permanent: bool,
}

/// `http` payload.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
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

fn parse<T: serde::de::DeserializeOwned>(task_type: &str, payload: &str) -> Result<T, String> {
    serde_json::from_str(payload).map_err(|e| format!("payload of a {task_type} task: {e}"))
}

fn check_http(p: &HttpPayload, allow: &HttpAllow) -> Result<(), String> {
    if p.method != "POST" && p.method != "PUT" {
        return Err("payload.method: must be POST or PUT".into());
    }
    let url = reqwest::Url::parse(&p.url).map_err(|e| format!("payload.url: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("payload.url: must be http or https".into());
    }
    if !allow.allows(&p.url) {
        return Err(format!(
            "payload.url: {} is not under an allowed prefix (see --http-allow)",
            p.url
        ));
    }
    if p.timeout_ms
        .is_some_and(|t| t == 0 || t > HTTP_TIMEOUT_MS_MAX)
    {
        return Err(format!(
            "payload.timeout_ms: must be 1..={HTTP_TIMEOUT_MS_MAX}"
        ));
    }
    if p.url.len() > URL_MAX_BYTES {
        return Err(format!("payload.url: longer than {URL_MAX_BYTES} bytes"));
    }
    for (k, v) in &p.headers {
        let lower = k.to_ascii_lowercase();
        if FORBIDDEN_HEADERS.contains(&lower.as_str())
            || lower.starts_with("proxy-")
            || lower.starts_with("x-orq-")
        {
            return Err(format!(
                "payload.headers: {k} is set by orq or the HTTP client and cannot be given"
            ));
        }
        reqwest::header::HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("payload.headers: invalid header name {k:?}"))?;
        reqwest::header::HeaderValue::from_str(v)
            .map_err(|_| format!("payload.headers: invalid value for {k:?}"))?;
    }
    Ok(())
}

/// Check the payload of a built-in type at submit time (other types pass). 422 when it could
/// never run: a malformed payload, or an `http` URL outside the allow-list.
pub fn check_payload(task_type: &str, payload: &str, allow: &HttpAllow) -> Result<(), ApiError> {
    let r = match task_type {
        "sleep" => parse::<SleepPayload>(task_type, payload).and_then(|p| {
            if p.ms > SLEEP_MS_MAX {
                Err(format!("payload.ms: at most {SLEEP_MS_MAX}"))
            } else {
                Ok(())
            }
        }),
        "fail" => parse::<FailPayload>(task_type, payload).map(|_| ()),
        "http" => parse::<HttpPayload>(task_type, payload).and_then(|p| check_http(&p, allow)),
        _ => Ok(()),
    };
    r.map_err(ApiError::unprocessable)
}

/// `echo`: the result is the payload.
#[derive(Debug)]
pub struct Echo;

#[async_trait]
impl Handler for Echo {
    async fn handle(&self, ctx: TaskContext) -> Result<Value, HandlerError> {
        serde_json::from_str(&ctx.task.payload).map_err(|e| HandlerError::permanent(e.to_string()))
    }
}

/// `sleep` `{"ms": n}`: waits n ms (or until cancelled), then succeeds with `{"slept_ms": n}`.
#[derive(Debug)]
pub struct Sleep;

#[async_trait]
impl Handler for Sleep {
    async fn handle(&self, ctx: TaskContext) -> Result<Value, HandlerError> {
        let p: SleepPayload = parse("sleep", &ctx.task.payload).map_err(HandlerError::permanent)?;
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(p.ms.min(SLEEP_MS_MAX))) => {
                Ok(serde_json::json!({"slept_ms": p.ms}))
            }
            _ = ctx.cancel.cancelled() => Err(HandlerError::retryable("cancelled")),
        }
    }
}

/// `fail`: `{"times": n}` fails the task's first n attempts (counted over its whole life, so a
/// replayed task goes on counting) then succeeds; `{"permanent": true}` fails without retry;
/// `{}` always fails (retryable).
#[derive(Debug)]
pub struct Fail;

#[async_trait]
impl Handler for Fail {
    async fn handle(&self, ctx: TaskContext) -> Result<Value, HandlerError> {
        let p: FailPayload = parse("fail", &ctx.task.payload).map_err(HandlerError::permanent)?;
        if p.permanent {
            return Err(HandlerError::permanent(format!(
                "permanent failure on attempt {}",
                ctx.attempt
            )));
        }
        // Count attempts over the task's whole life, replays included: every failed attempt
        // left one history line.
        let life_attempt = ctx.task.history.len() as u32 + 1;
        match p.times {
            Some(n) if life_attempt > n => Ok(serde_json::json!({
                "succeeded_on_attempt": ctx.attempt,
                "attempts_in_life": life_attempt,
            })),
            _ => Err(HandlerError::retryable(format!(
                "planned failure {life_attempt} (attempt {})",
                ctx.attempt
            ))),
        }
    }
}

/// `http`: calls a webhook under the allow-list. 2xx succeeds with `{"status", "body"}` (body
/// truncated to [`HTTP_BODY_KEEP_BYTES`]); 408, 429, 5xx, timeouts and connection errors are
/// retryable; redirects are not followed; other statuses are permanent failures.
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
        let p: HttpPayload = parse("http", &ctx.task.payload).map_err(HandlerError::permanent)?;
        check_http(&p, &self.allow).map_err(HandlerError::permanent)?;
        let method = if p.method == "PUT" {
            reqwest::Method::PUT
        } else {
            reqwest::Method::POST
        };
        let timeout = p.timeout_ms.unwrap_or(HTTP_TIMEOUT_MS_DEFAULT);
        let mut req = self
            .client
            .request(method, &p.url)
            .timeout(Duration::from_millis(timeout))
            .header("x-orq-task-id", &ctx.task.id)
            .header("x-orq-attempt", ctx.attempt.to_string())
            .header("x-orq-epoch", ctx.epoch.to_string())
            .json(&p.body);
        for (k, v) in &p.headers {
            req = req.header(k, v);
        }
        let resp = tokio::select! {
            r = req.send() => r,
            _ = ctx.cancel.cancelled() => return Err(HandlerError::retryable("cancelled")),
        };
        let resp = resp.map_err(|e| {
            if e.is_timeout() {
                HandlerError::retryable(format!("request timed out after {timeout} ms"))
            } else {
                HandlerError::retryable(format!("request failed: {e}"))
            }
        })?;
        let status = resp.status().as_u16();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| HandlerError::retryable(format!("reading the response failed: {e}")))?;
        let keep = &bytes[..bytes.len().min(HTTP_BODY_KEEP_BYTES)];
        let body = String::from_utf8_lossy(keep).into_owned();
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

/// The built-in handlers, the `http` one with `allow` as its allow-list.
pub fn builtin(allow: HttpAllow) -> Handlers {
    Handlers::new()
        .register("echo", Echo)
        .register("sleep", Sleep)
        .register("fail", Fail)
        .register("http", Http::new(allow))
}

/// Shared handle to the allow-list for the API.
pub type SharedAllow = Arc<HttpAllow>;

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: prefixes allow only URLs under them, at a path boundary.
    #[test]
    fn allow_list_matches_at_a_boundary_only() {
        let a = HttpAllow(vec![
            "http://127.0.0.1:9000".into(),
            "https://hooks.example/".into(),
        ]);
        assert!(a.allows("http://127.0.0.1:9000"));
        assert!(a.allows("http://127.0.0.1:9000/x?y"));
        assert!(a.allows("https://hooks.example/a"));
        assert!(!a.allows("http://127.0.0.1:90001/x"));
        assert!(!a.allows("http://127.0.0.1:9000@evil.example/"));
        assert!(!a.allows("http://127.0.0.1:9000.evil.example/"));
        assert!(!a.allows("https://hooks.example.evil/"));
        assert!(!HttpAllow::default().allows("http://127.0.0.1:9000/"));
    }

    #[test]
    fn builtin_payloads_are_checked_at_submit() {
        let a = HttpAllow(vec!["http://127.0.0.1:9000/".into()]);
        assert!(check_payload("sleep", r#"{"ms": 5}"#, &a).is_ok());
        assert!(check_payload("sleep", r#"{"ms": "x"}"#, &a).is_err());
        assert!(check_payload("fail", r#"{"times": 2}"#, &a).is_ok());
        assert!(check_payload("http", r#"{"url": "http://127.0.0.1:9000/h"}"#, &a).is_ok());
        let e = check_payload("http", r#"{"url": "http://10.0.0.1/h"}"#, &a).unwrap_err();
        assert_eq!(e.status.as_u16(), 422);
        let e = check_payload(
            "http",
            r#"{"url": "http://127.0.0.1:9000/h", "method": "GET"}"#,
            &a,
        );
        assert!(e.is_err());
        assert!(check_payload("custom", "[1]", &a).is_ok());
    }
}
