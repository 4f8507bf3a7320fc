//! Built-in handlers for tasks submitted over HTTP: `echo`, `sleep`, `fail` (demos and tests)
//! and `http` (call a webhook under an allow-list). Their payloads are checked at submit time
//! ([`check_payload`]) so a task that can never run is refused with 422 instead of dying later.
//! The `http` handler and its allow-list live in [`http`] and [`http_allow`].

pub mod http;
pub mod http_allow;

pub use http::Http;
pub use http_allow::{AllowedPrefix, HttpAllow};

use crate::error::ApiError;
use async_trait::async_trait;
use orq::{Handler, HandlerError, Handlers, TaskContext};
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Longest `sleep` a task may ask for (ms): one hour.
pub const SLEEP_MS_MAX: u64 = 3_600_000;

/// `sleep` payload.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object {\"ms\": <milliseconds>}")]
struct SleepPayload {
    ms: u64,
}

/// `fail` payload.
#[derive(Debug, Deserialize, Default)]
#[serde(
    deny_unknown_fields,
    default,
    expecting = "an object {\"times\": <failures before success>, \"permanent\": <bool>}"
)]
struct FailPayload {
    times: Option<u32>,
    permanent: bool,
}

/// Decode a built-in type's payload; the error names the field (`payload.ms: ...`), the type
/// and what was expected, never a Rust type.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(
    task_type: &str,
    payload: &str,
) -> Result<T, String> {
    let de = &mut serde_json::Deserializer::from_str(payload);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        // serde_json appends " at line 1 column 5": the position in the payload, not the body.
        let text = inner.to_string();
        let text = text.split(" at line ").next().unwrap_or(&text);
        if path.is_empty() || path == "." {
            format!("payload: {text} (task type {task_type})")
        } else {
            format!("payload.{path}: {text} (task type {task_type})")
        }
    })
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
        "http" => http::check_payload(payload, allow).map(|_| ()),
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
        // left one record in its history (a leased task has no completed one).
        let life_attempt = ctx.task.attempts.len() as u32 + 1;
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

    // Goal: the payloads of the demo types are checked at submit; other types pass unchecked.
    #[test]
    fn builtin_payloads_are_checked_at_submit() {
        let a = HttpAllow::default();
        assert!(check_payload("sleep", r#"{"ms": 5}"#, &a).is_ok());
        assert!(check_payload("sleep", r#"{"ms": "x"}"#, &a).is_err());
        let e = check_payload("sleep", &format!(r#"{{"ms": {}}}"#, SLEEP_MS_MAX + 1), &a);
        assert_eq!(e.unwrap_err().status().as_u16(), 422);
        assert!(check_payload("fail", r#"{"times": 2}"#, &a).is_ok());
        assert!(check_payload("fail", r#"{"colour": 2}"#, &a).is_err());
        assert!(check_payload("custom", "[1]", &a).is_ok());
    }
}
