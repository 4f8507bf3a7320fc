//! The API's extractors: each turns a part of the request into a checked value or answers the
//! API's typed JSON error ([`ApiError`]), so the handlers do no extraction of their own.
//!
//! - [`ApiJson`]: a strict JSON object body under a size cap (408 when the body does not arrive
//!   in time, 413 over the cap, 400 naming the field otherwise; see [`parse_body`]).
//! - [`ApiQuery`]: query parameters (400 `query: ...`).
//! - [`NoQuery`]: a route without parameters refuses any, rather than silently ignore them.
//! - [`QueuePath`], [`QueueTenantPath`]: the [`Name`]s of the `/queues/{queue}/...` routes.
//! - [`TaskIdPath`]: a task id (anything that is not a ULID cannot name a task: 404).
//!
//! Extractors run before the handler, in argument order, the body last.

use crate::api::BODY_MAX_BYTES;
use crate::error::ApiError;
use crate::model::parse_body;
use crate::names::{InvalidName, Name};
use crate::serve::BodyTimeout;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use orq::keys::is_valid_task_id;
use serde::de::DeserializeOwned;

/// Largest body of the small admin routes (tenant limits, queue settings, bulk replay), bytes.
pub const SMALL_BODY_MAX_BYTES: usize = 64 * 1024;

/// A JSON object body of type `T`, at most `MAX` bytes, parsed strictly ([`parse_body`]).
pub struct ApiJson<T, const MAX: usize = BODY_MAX_BYTES>(pub T);

impl<T, S, const MAX: usize> FromRequest<S> for ApiJson<T, MAX>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        parse_body(&body_bytes::<S, MAX>(req, state).await?).map(ApiJson)
    }
}

/// As [`ApiJson`], for a body whose every field is optional: no body (nothing, or only
/// whitespace) and JSON `null` are `T::default()`, as `{}` is (the OpenAPI document says so:
/// a request body of `Option<T>`).
pub struct ApiJsonOrEmpty<T, const MAX: usize = BODY_MAX_BYTES>(pub T);

impl<T, S, const MAX: usize> FromRequest<S> for ApiJsonOrEmpty<T, MAX>
where
    T: DeserializeOwned + Default,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = body_bytes::<S, MAX>(req, state).await?;
        if bytes.trim_ascii().is_empty() || bytes.trim_ascii() == b"null" {
            return Ok(ApiJsonOrEmpty(T::default()));
        }
        parse_body(&bytes).map(ApiJsonOrEmpty)
    }
}

/// The body of `req`, at most `MAX` bytes (413 beyond; 408 when it does not arrive in time).
async fn body_bytes<S: Send + Sync, const MAX: usize>(
    req: Request,
    state: &S,
) -> Result<Bytes, ApiError> {
    let bytes = Bytes::from_request(req, state).await.map_err(|r| {
        if is_body_timeout(&r) {
            ApiError::request_timeout(format!("request body: {}", r.body_text()))
        } else if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large(MAX)
        } else {
            ApiError::bad_request(format!("request body: {}", r.body_text()))
        }
    })?;
    if bytes.len() > MAX {
        return Err(too_large(MAX));
    }
    Ok(bytes)
}

fn too_large(max: usize) -> ApiError {
    ApiError::too_large(format!("request body: larger than {max} bytes"))
}

/// True when `e` or one of its sources is the server's body deadline ([`BodyTimeout`]).
fn is_body_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    // Bounded: error chains are short, and a cycle would be a bug elsewhere.
    for _ in 0..16 {
        let Some(x) = cur else {
            return false;
        };
        if x.downcast_ref::<BodyTimeout>().is_some() {
            return true;
        }
        cur = x.source();
    }
    false
}

/// The query parameters as `T` (unknown ones refused when `T` says `deny_unknown_fields`).
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| ApiQuery(v))
            .map_err(|r| ApiError::bad_request(format!("query: {}", query_problem(&r))))
    }
}

/// What is wrong with a query string, without axum's "Failed to deserialize query string: "
/// (so a bad parameter reads as a bad body field does: `queue: must match ...`).
fn query_problem(r: &axum::extract::rejection::QueryRejection) -> String {
    use axum::extract::rejection::QueryRejection;
    match r {
        QueryRejection::FailedToDeserializeQueryString(e) => std::error::Error::source(e)
            .map(|inner| inner.to_string())
            .unwrap_or_else(|| e.body_text()),
        other => other.body_text(),
    }
}

/// No query parameters (an empty `?` is none).
pub struct NoQuery;

impl<S: Send + Sync> FromRequestParts<S> for NoQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        match parts.uri.query() {
            None | Some("") => Ok(NoQuery),
            Some(_) => Err(ApiError::bad_request(
                "query: this route takes no query parameters",
            )),
        }
    }
}

/// The `{queue}` of a `/queues/{queue}/...` path, validated.
pub struct QueuePath(pub Name);

impl<S: Send + Sync> FromRequestParts<S> for QueuePath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(queue) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::bad_request(format!("queue: {InvalidName}")))?;
        Ok(QueuePath(Name::parse("queue", queue)?))
    }
}

/// The `{queue}` and `{tenant}` of `/queues/{queue}/tenants/{tenant}`, validated.
pub struct QueueTenantPath(pub Name, pub Name);

impl<S: Send + Sync> FromRequestParts<S> for QueueTenantPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path((queue, tenant)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::bad_request(format!("queue, tenant: {InvalidName}")))?;
        Ok(QueueTenantPath(
            Name::parse("queue", queue)?,
            Name::parse("tenant", tenant)?,
        ))
    }
}

/// The `{id}` of a by-id route: a ULID, case-insensitive (Crockford base32), stored in upper
/// case. Anything else cannot name a task: 404.
pub struct TaskIdPath(pub String);

impl<S: Send + Sync> FromRequestParts<S> for TaskIdPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let unknown =
            || ApiError::not_found("no task with this id (task ids are 26-character ULIDs)");
        let Path(id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| unknown())?;
        let id = id.to_ascii_uppercase();
        if is_valid_task_id(&id) {
            Ok(TaskIdPath(id))
        } else {
            Err(unknown())
        }
    }
}
