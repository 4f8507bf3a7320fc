//! The admin commands' HTTP client: one orq API (`--url`), one key (`--api-key`), JSON in and
//! out, and every failure mapped to an [`Exit`] code with the API's error code in the message.

use super::exit::{Exit, Failure};
use reqwest::Method;
use serde_json::Value;
use std::time::Duration;

/// How long one request may take (ms): a drain asks the server to wait up to its own
/// `timeout_ms`, which is added to this.
pub const REQUEST_TIMEOUT_MS: u64 = 30_000;

/// An orq API to call.
#[derive(Debug, Clone)]
pub struct Api {
    http: reqwest::Client,
    /// `http://host:port/api/v1`, no trailing slash.
    base: String,
    key: Option<String>,
}

impl Api {
    /// A client of the orq at `url` (`http://host:port`, with or without `/api/v1`), sending
    /// `key` as a bearer token when given. Errors: a URL that is not http(s).
    pub fn new(url: &str, key: Option<String>) -> Result<Api, Failure> {
        let trimmed = url.trim_end_matches('/');
        let shown = orq::redact::redacted(url);
        if !(trimmed.starts_with("http://") || trimmed.starts_with("https://"))
            || trimmed.contains(['?', '#'])
        {
            return Err(Failure::new(
                Exit::Usage,
                format!(
                    "--url: {shown:?} is not the http:// or https:// URL of an orq API \
                     (http://HOST:PORT, no query)"
                ),
            ));
        }
        let base = if trimmed.ends_with("/api/v1") {
            trimmed.to_string()
        } else {
            format!("{trimmed}/api/v1")
        };
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| Failure::new(Exit::Usage, format!("cannot make an HTTP client: {e}")))?;
        Ok(Api {
            http,
            base,
            // A key read from a file often ends with a newline.
            key: key.map(|k| k.trim().to_string()).filter(|k| !k.is_empty()),
        })
    }

    /// The API's base URL (`.../api/v1`).
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `url` as messages show it: a password in it replaced by `***`.
    fn shown(url: &str) -> String {
        orq::redact::redacted(url)
    }

    /// `method path` (path under `/api/v1`, with its query) with an optional JSON body; the
    /// answer's JSON. `extra_ms` adds to [`REQUEST_TIMEOUT_MS`] for calls the server holds.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        extra_ms: u64,
    ) -> Result<Value, Failure> {
        let url = format!("{}{path}", self.base);
        let shown = Api::shown(&url);
        let mut req = self
            .http
            .request(method.clone(), &url)
            .timeout(Duration::from_millis(REQUEST_TIMEOUT_MS + extra_ms));
        if let Some(k) = &self.key {
            req = req.bearer_auth(k);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let answer = req.send().await.map_err(|e| {
            Failure::new(
                Exit::Unavailable,
                format!(
                    "cannot reach orq at {}: {}",
                    Api::shown(&self.base),
                    Api::shown(&error_chain(&e))
                ),
            )
        })?;
        let status = answer.status().as_u16();
        let text = answer.text().await.map_err(|e| {
            Failure::new(
                Exit::Unavailable,
                format!(
                    "{method} {shown}: the answer was cut: {}",
                    Api::shown(&error_chain(&e))
                ),
            )
        })?;
        let json: Option<Value> = serde_json::from_str(&text).ok();
        if (200..300).contains(&status) {
            return json.ok_or_else(|| {
                Failure::new(
                    Exit::Unavailable,
                    format!(
                        "{method} {shown}: the answer is not JSON (HTTP {status}); is this an \
                         orq API?"
                    ),
                )
            });
        }
        match json.as_ref().map(|j| &j["error"]) {
            Some(e) if e["code"].is_string() => Err(Failure::new(
                Exit::of_status(status),
                format!(
                    "{}: {} (HTTP {status})",
                    e["code"].as_str().unwrap_or_default(),
                    e["message"].as_str().unwrap_or_default()
                ),
            )),
            // Not an orq error answer (a proxy's page, another server): its 404 says nothing
            // about what was named, so it is not "not found".
            _ => Err(Failure::new(
                Exit::Unavailable,
                format!(
                    "{method} {shown}: HTTP {status} without an orq error answer; is --url an \
                     orq API? (the answer began: {:?})",
                    text.chars().take(80).collect::<String>()
                ),
            )),
        }
    }

    /// GET `path`.
    pub async fn get(&self, path: &str) -> Result<Value, Failure> {
        self.call(Method::GET, path, None, 0).await
    }
}

/// An error and its causes, `: `-joined (reqwest's own message hides the cause, such as
/// "Connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

/// `s` percent-encoded for a URL path segment or query value.
pub fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// `?a=1&b=x` of the pairs whose value is given (`""` when none is).
pub fn query(pairs: &[(&str, Option<String>)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", enc(v))))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_queries() {
        for url in [
            "http://h:1",
            "http://h:1/",
            "http://h:1/api/v1",
            "http://h:1/api/v1/",
        ] {
            assert_eq!(
                Api::new(url, None).unwrap().base(),
                "http://h:1/api/v1",
                "{url}"
            );
        }
        assert_eq!(Api::new("h:1", None).unwrap_err().exit, Exit::Usage);
        assert_eq!(
            query(&[
                ("queue", Some("a b".into())),
                ("tenant", None),
                ("limit", Some("5".into()))
            ]),
            "?queue=a%20b&limit=5"
        );
        assert_eq!(query(&[("x", None)]), "");
    }
}
