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
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
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

/// The standard request headers an `http` task may set, in lower case: credentials, the body's
/// media type, content negotiation, the client's name, a retry's key, conditional requests,
/// caching and the W3C trace context (a payload's own `traceparent` replaces the worker's).
/// Everything that routes, frames or rewrites the request (`Host`, `Content-Length`,
/// `Transfer-Encoding`, `Connection`, `Expect`, `Forwarded`, `Via`, `Proxy-*`), and every header
/// a proxy or CDN sets and its servers trust (`True-Client-IP`, `CF-Connecting-IP`,
/// `Fastly-Client-IP`, ...), is absent, so it is refused without being named: an allow-list has
/// no gaps for a new proxy's header to slip through. Application headers:
/// [`HTTP_APP_HEADER_PREFIX`].
pub const HTTP_HEADERS_ALLOWED: &[&str] = &[
    "accept",
    "accept-language",
    "authorization",
    "cache-control",
    "content-type",
    "idempotency-key",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-unmodified-since",
    "traceparent",
    "tracestate",
    "user-agent",
];

/// The prefix of the application headers an `http` task may set besides
/// [`HTTP_HEADERS_ALLOWED`] (`X-Signature`, `X-Api-Key`, `X-Hub-Signature-256`, `X-Request-Id`):
/// `x-` and then words of lower-case letters and digits joined by single dashes (names compared
/// in any case), none of them in [`HTTP_APP_HEADER_WORDS_REFUSED`]. A webhook's own header needs
/// no change to orq, and a name with `_` or `.` is refused (WSGI servers and some proxies read
/// `_` as `-`, so `X_Forwarded_For` would arrive as `X-Forwarded-For`).
pub const HTTP_APP_HEADER_PREFIX: &str = "x-";

/// Words no application header may contain, because proxies, load balancers and authenticating
/// gateways build the `X-` headers they set and their servers trust from them. A worker sends
/// from inside the network, past those proxies, so a server would believe what such a header
/// claims: the client's address (`X-Real-IP`, `X-Client-IP`, `X-Cluster-Client-IP`,
/// `X-Originating-IP`, `X-Remote-Addr`), the request's forwarding, host, scheme, port, path or
/// method (`X-Forwarded-*`, `X-Host`, `X-Scheme`, `X-Url-Scheme`, `X-Original-URL`,
/// `X-Rewrite-URL`, `X-HTTP-Method-Override`), the user a gateway authenticated (`X-Remote-User`,
/// `X-WebAuth-User`, `X-Auth-Request-Email`, `X-Authenticated-Userid`, `X-SSL-Client-Cert`), and
/// the families of Envoy, AWS, Google, App Engine, Azure, IIS ARR and orq itself (orq sets
/// `X-Orq-Task-Id`, `X-Orq-Attempt` and `X-Orq-Epoch`). Refusing by word, not by name, also
/// refuses the variants no list names (`X-Forwarded-Client-IP`, `X-Original-Remote-Addr`).
pub const HTTP_APP_HEADER_WORDS_REFUSED: &[&str] = &[
    // The client's address and connection.
    "ip",
    "addr",
    "address",
    "client",
    "real",
    "remote",
    "originating",
    "connecting",
    "socket",
    // Forwarding, and the host, scheme, port, path and method a proxy rewrites.
    "forwarded",
    "forward",
    "proxy",
    "via",
    "host",
    "proto",
    "protocol",
    "scheme",
    "ssl",
    "https",
    "port",
    "prefix",
    "path",
    "url",
    "uri",
    "original",
    "rewrite",
    "method",
    "override",
    // The identity an authenticating gateway asserts.
    "user",
    "userid",
    "username",
    "email",
    "principal",
    "authenticated",
    "identity",
    "groups",
    "cert",
    // Families whose every header their servers trust.
    "envoy",
    "amzn",
    "goog",
    "appengine",
    "azure",
    "arr",
    "ms",
    "orq",
];

/// Why a payload may not set the header `name`, or `None` when it may: a name in
/// [`HTTP_HEADERS_ALLOWED`], or an application header ([`HTTP_APP_HEADER_PREFIX`]) without a
/// word of [`HTTP_APP_HEADER_WORDS_REFUSED`]. Names are compared in lower case.
pub fn header_refusal(name: &str) -> Option<String> {
    let lower = name.to_ascii_lowercase();
    if HTTP_HEADERS_ALLOWED.contains(&lower.as_str()) {
        return None;
    }
    let Some(rest) = lower.strip_prefix(HTTP_APP_HEADER_PREFIX) else {
        return Some(format!(
            "{name} is not a header an http task may set (the standard ones allowed are {}; \
             application headers start with X-)",
            HTTP_HEADERS_ALLOWED.join(", ")
        ));
    };
    let words: Vec<&str> = rest.split('-').collect();
    let well_formed = words.iter().all(|w| {
        !w.is_empty()
            && w.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    });
    if !well_formed {
        return Some(format!(
            "{name} is not a header an http task may set (an application header is X- and then \
             words of letters and digits joined by single dashes)"
        ));
    }
    let refused = words
        .iter()
        .find(|w| HTTP_APP_HEADER_WORDS_REFUSED.contains(w))?;
    Some(format!(
        "{name} is not a header an http task may set (its word {refused:?} is one that proxies \
         and gateways use in headers their servers trust)"
    ))
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
    /// The payload's headers, one value per name, under the default `Content-Type:
    /// application/json` unless the payload gives its own.
    headers: HeaderMap,
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
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let mut names = BTreeMap::new();
    for (k, v) in &p.headers {
        if let Some(reason) = header_refusal(k) {
            return Err(format!("payload.headers: {reason}"));
        }
        if let Some(first) = names.insert(k.to_ascii_lowercase(), k) {
            return Err(format!(
                "payload.headers: {first} and {k} name the same header (names are compared in \
                 any case)"
            ));
        }
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("payload.headers: invalid header name {k:?}"))?;
        let value = HeaderValue::from_str(v)
            .map_err(|_| format!("payload.headers: invalid value for {k:?}"))?;
        // Insert, never append: a payload's Content-Type replaces the default one.
        headers.insert(name, value);
    }
    Ok(Checked {
        url,
        payload: p,
        headers,
    })
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
        let Checked {
            url,
            payload: p,
            headers,
        } = check_payload(&ctx.task.payload, &self.allow)
            .map_err(|e| HandlerError::permanent(format!("{e} (checked when the task ran)")))?;
        let method = if p.method == "PUT" {
            reqwest::Method::PUT
        } else {
            reqwest::Method::POST
        };
        let timeout = p.timeout_ms.unwrap_or(HTTP_TIMEOUT_MS_DEFAULT);
        let body = serde_json::to_vec(&p.body).expect("a JSON value serialises");
        let mut req = self
            .client
            .request(method, url)
            .timeout(Duration::from_millis(timeout))
            .header("x-orq-task-id", &ctx.task.id)
            .header("x-orq-attempt", ctx.attempt.to_string())
            .header("x-orq-epoch", ctx.epoch.to_string())
            .body(body);
        // The trace goes on to the webhook; a trace header the payload sets is its own.
        let own = |name: &str| headers.contains_key(name);
        if !own("traceparent") {
            let stored = ctx.task.trace.as_ref();
            req = req.headers(crate::telemetry::outgoing_headers(stored, |name| {
                !own(name)
            }));
        }
        // Replaces, name by name: exactly one Content-Type reaches the webhook.
        req = req.headers(headers);
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
            "Content_Type",
            "X--Signature",
            "X-Signature-",
            "X-",
            "X-Sig.nature",
        ] {
            let p = serde_json::json!({"url": "http://127.0.0.1:9000/h", "headers": {h: "a"}});
            refused(&p.to_string(), "payload.headers");
            refused(&p.to_string(), h);
        }
        let p = r#"{"url": "http://127.0.0.1:9000/h", "headers": {"Authorization": "Bearer x", "X-Signature": "s"}}"#;
        assert!(check("http", p, &a).is_ok());
        // Two spellings of one name would be sent as two headers.
        let p = r#"{"url": "http://127.0.0.1:9000/h", "headers": {"Content-Type": "text/plain", "content-type": "a/b"}}"#;
        refused(p, "name the same header");
        let many: BTreeMap<String, String> = (0..=HTTP_HEADERS_MAX)
            .map(|i| (format!("x-h{i}"), "v".to_string()))
            .collect();
        let p = serde_json::json!({"url": "http://127.0.0.1:9000/h", "headers": many});
        refused(&p.to_string(), "payload.headers");
        let big = serde_json::json!({"url": "http://127.0.0.1:9000/h",
            "headers": {"x-big": "v".repeat(HTTP_HEADER_BYTES_MAX)}});
        refused(&big.to_string(), "payload.headers");
    }

    // Goal: the allow-list's rule, name by name: each standard header and ordinary application
    // headers pass in any case; each header a proxy or gateway trusts is refused with a reason
    // naming it, whether the list names it or only its word, and so is every name outside both.
    #[test]
    fn only_allowed_headers_pass_and_refusals_name_the_header() {
        for name in HTTP_HEADERS_ALLOWED {
            assert_eq!(header_refusal(name), None, "{name}");
            assert_eq!(header_refusal(&name.to_ascii_uppercase()), None, "{name}");
        }
        for name in [
            "X-Signature",
            "x-api-key",
            "X-Hub-Signature-256",
            "X-Request-Id",
            "X-GitHub-Event",
            "X-Slack-Request-Timestamp",
            "X-Webhook-Secret",
            "X-Tenant",
        ] {
            assert_eq!(header_refusal(name), None, "{name}");
        }
        for name in [
            "X-Client-IP",
            "True-Client-IP",
            "CF-Connecting-IP",
            "X-Real-IP",
            "Fastly-Client-IP",
            "X-Cluster-Client-IP",
            "X-Forwarded-For",
            "X-Forwarded-Proto",
            "X-Forwarded-Scheme",
            "X-Url-Scheme",
            "X-Scheme",
            "X-HTTP-Method-Override",
            "X-Original-Method",
            "X-Original-URL",
            "X-Rewrite-URL",
            "X-Host",
            "Via",
            "Forwarded",
            "Front-End-Https",
            "X-Remote-User",
            "X-WebAuth-User",
            "X-Auth-Request-Email",
            "X-Amzn-Oidc-Data",
            "X-Goog-IAP-JWT-Assertion",
            "X-AppEngine-Cron",
            "X-MS-Client-Principal",
            "X-Envoy-Max-Retries",
            "X-Orq-Task-Id",
            "Cookie",
            "Origin",
            "Content-Length",
            "Transfer-Encoding",
            "Connection",
        ] {
            for variant in [
                name.to_string(),
                name.to_ascii_lowercase(),
                name.to_ascii_uppercase(),
            ] {
                let reason = header_refusal(&variant).unwrap_or_else(|| panic!("{variant}"));
                assert!(reason.starts_with(&variant), "{variant}: {reason}");
            }
        }
        // Every word refused is refused in an application header, and the lists are written in
        // the form they are compared in.
        for word in HTTP_APP_HEADER_WORDS_REFUSED {
            let name = format!("X-Hook-{word}-Id");
            assert!(header_refusal(&name).unwrap().contains(word), "{name}");
            assert!(word
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
        }
        for name in HTTP_HEADERS_ALLOWED {
            assert_eq!(*name, name.to_ascii_lowercase());
            assert!(!name.starts_with(HTTP_APP_HEADER_PREFIX), "{name}");
        }
    }
}
