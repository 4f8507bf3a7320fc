//! `ApiError`: the one error type of the HTTP API, answered as
//! `{"error": {"code": "...", "message": "..."}}` with the matching status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use orq::Error;
use serde::Serialize;
use utoipa::ToSchema;

pub use crate::error_code::ErrorCode;

/// `Retry-After` (s) of a 503 `store_unavailable`: the refusals that pass (an OOM episode, a
/// failover's read-only window, a restart's loading) typically last seconds.
pub const STORE_RETRY_AFTER_S: u64 = 1;

/// The body of every error answer: `{"error": {"code": "...", "message": "..."}}`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ApiError)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// The `error` of an [`ErrorBody`].
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable code.
    pub code: ErrorCode,
    /// What went wrong, for people, naming the field when there is one.
    pub message: String,
}

/// An API error: HTTP status, a stable machine-readable code and a human message.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// Stable code; it gives the HTTP status ([`ApiError::status`]).
    pub code: ErrorCode,
    /// What went wrong, naming the field when there is one.
    pub message: String,
    /// Seconds for a `Retry-After` header (429, 503 `store_unavailable`).
    pub retry_after_s: Option<u64>,
    /// The `WWW-Authenticate` challenge (401).
    pub www_authenticate: Option<&'static str>,
}

impl ApiError {
    /// The HTTP status of the answer (the code's).
    pub fn status(&self) -> StatusCode {
        self.code.status()
    }
    /// 400 `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }
    /// 401 `unauthorized`, with `challenge` as the `WWW-Authenticate` header.
    pub fn unauthorized(message: impl Into<String>, challenge: &'static str) -> Self {
        let mut e = Self::new(ErrorCode::Unauthorized, message);
        e.www_authenticate = Some(challenge);
        e
    }
    /// 403 `forbidden`: the key is known but lacks the right.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }
    /// 408 `request_timeout`: the request body did not arrive in time.
    pub fn request_timeout(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::RequestTimeout, message)
    }
    /// 429 `limited`, with `Retry-After: retry_after_s` (at least 1).
    pub fn limited(message: impl Into<String>, retry_after_s: u64) -> Self {
        let mut e = Self::new(ErrorCode::Limited, message);
        e.retry_after_s = Some(retry_after_s.max(1));
        e
    }
    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }
    /// 404 `not_found` for task `id`: the one answer for a task that does not exist and for one
    /// the caller may not see, so the two cannot be told apart.
    pub fn task_not_found(id: &str) -> Self {
        Self::not_found(format!("no task with id {id}"))
    }
    /// 409 `conflict`.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }
    /// 413 `payload_too_large`.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::PayloadTooLarge, message)
    }
    /// 422 `unprocessable`.
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unprocessable, message)
    }
    /// 503 `store_unavailable` with `Retry-After`: the store refused the call for a reason that
    /// passes, or did not answer; the message says which ("the store is out of memory; retry
    /// later"). Nothing was lost: the caller retries.
    pub fn store_unavailable(cause: orq::Transient) -> Self {
        let mut e = Self::new(
            ErrorCode::StoreUnavailable,
            format!(
                "the store {} ({}); retry later",
                cause.describe(),
                cause.word()
            ),
        );
        e.retry_after_s = Some(STORE_RETRY_AFTER_S);
        e
    }
    /// Any code, with its status.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            retry_after_s: None,
            www_authenticate: None,
        }
    }
}

/// Least time between two warnings of the API about a store that refuses (ms).
pub const STORE_LOG_EVERY_MS: u64 = 10_000;

/// Whether a warning about the store is due (at most one per [`STORE_LOG_EVERY_MS`] per process).
fn store_log_due() -> bool {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    static LAST_MS: AtomicU64 = AtomicU64::new(0);
    let now_ms = START.get_or_init(Instant::now).elapsed().as_millis() as u64 + STORE_LOG_EVERY_MS;
    let last = LAST_MS.load(Ordering::Relaxed);
    now_ms >= last + STORE_LOG_EVERY_MS
        && LAST_MS
            .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match &e {
            Error::Invalid { message, .. } => ApiError::bad_request(message.clone()),
            Error::NotFound { id, .. } => ApiError::task_not_found(id),
            // A queue setting that cannot change now.
            Error::Conflict {
                op: "configure",
                status,
            } => ApiError::conflict(status.clone()),
            Error::Conflict { op, status } => {
                ApiError::conflict(format!("cannot {op} a task that is {status}"))
            }
            Error::Stale { .. } => ApiError::new(
                ErrorCode::LeaseLost,
                format!("{e}: this lease token no longer holds the task; drop the work"),
            ),
            Error::Cancelled { .. } => {
                ApiError::new(ErrorCode::Cancelled, format!("{e}: abort the handler"))
            }
            Error::Limited {
                tenant,
                limit,
                retry_after_ms,
                ..
            } => ApiError::limited(
                format!("tenant {tenant} is at its {limit}; retry later"),
                retry_after_ms.div_ceil(1000),
            ),
            Error::Unavailable { cause, .. } => {
                // One line per STORE_LOG_EVERY_MS, not one per refused request: the worker and
                // scheduler log the episode itself.
                if store_log_due() {
                    tracing::warn!(error = %e, "store unavailable; answering 503 (logged at most every 10 s)");
                } else {
                    tracing::debug!(error = %e, "store unavailable");
                }
                ApiError::store_unavailable(*cause)
            }
            Error::Protocol { .. } => {
                tracing::error!(error = %e, "unexpected store reply");
                ApiError::new(ErrorCode::Internal, "internal error")
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
            },
        };
        let mut resp = (self.code.status(), Json(body)).into_response();
        if let Some(s) = self.retry_after_s {
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, s.into());
        }
        if let Some(c) = self.www_authenticate {
            resp.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static(c),
            );
        }
        resp
    }
}
