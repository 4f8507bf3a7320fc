//! `ErrorCode`: every stable `code` of an error answer, each with its HTTP status and its wire
//! string (written once, in [`ErrorCode::as_str`]; serde and the OpenAPI document's `ErrorCode`
//! schema take it from there).

use axum::http::StatusCode;
use serde::Serialize;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

/// Stable, machine-readable error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 400: a malformed body, field, parameter or query; the message names it.
    BadRequest,
    /// 401: no API key, or an unknown one (keys configured); with `WWW-Authenticate`.
    Unauthorized,
    /// 403: the key is known but lacks the right.
    Forbidden,
    /// 404: no such task, queue, route or file (another tenant's task too).
    NotFound,
    /// 405: the route exists but not with this method.
    MethodNotAllowed,
    /// 408: the request body did not arrive in time.
    RequestTimeout,
    /// 409: the task or queue is not in a state that allows this.
    Conflict,
    /// 409: the lease token is not the task's current one (the lease expired and the task was
    /// leased again, or it was reported already with another token): the worker lost the task
    /// and must drop its work.
    LeaseLost,
    /// 409: the task was cancelled while leased: the worker must abort its handler.
    Cancelled,
    /// 413: the body, a payload or a file is over its limit.
    PayloadTooLarge,
    /// 422: a payload its handler refuses.
    Unprocessable,
    /// 429: over a rate or a tenant's limit; with `Retry-After`.
    Limited,
    /// 503: this process cannot serve it now.
    Unavailable,
    /// 503: the store refused the call for a reason that passes, or did not answer; with
    /// `Retry-After`.
    StoreUnavailable,
    /// 500: an unexpected store reply.
    Internal,
}

impl ErrorCode {
    /// Every code, in the order of the statuses they go with.
    pub const ALL: [ErrorCode; 15] = [
        ErrorCode::BadRequest,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::RequestTimeout,
        ErrorCode::Conflict,
        ErrorCode::LeaseLost,
        ErrorCode::Cancelled,
        ErrorCode::PayloadTooLarge,
        ErrorCode::Unprocessable,
        ErrorCode::Limited,
        ErrorCode::Unavailable,
        ErrorCode::StoreUnavailable,
        ErrorCode::Internal,
    ];

    /// The HTTP status an answer with this code carries.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::BadRequest => StatusCode::BAD_REQUEST,
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden => StatusCode::FORBIDDEN,
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorCode::Conflict | ErrorCode::LeaseLost | ErrorCode::Cancelled => {
                StatusCode::CONFLICT
            }
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::Unprocessable => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::Limited => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::Unavailable | ErrorCode::StoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The wire string, e.g. `"store_unavailable"`: written here only; serde and the OpenAPI
    /// schema take it from here.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::Conflict => "conflict",
            ErrorCode::LeaseLost => "lease_lost",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::Unprocessable => "unprocessable",
            ErrorCode::Limited => "limited",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::StoreUnavailable => "store_unavailable",
            ErrorCode::Internal => "internal",
        }
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl PartialSchema for ErrorCode {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some("Stable, machine-readable error code."))
            .enum_values(Some(ErrorCode::ALL.map(ErrorCode::as_str)))
            .build()
            .into()
    }
}

impl ToSchema for ErrorCode {
    fn name() -> std::borrow::Cow<'static, str> {
        "ErrorCode".into()
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_each_variant_once_in_declaration_order() {
        for (i, c) in ErrorCode::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i, "{c:?} is out of place in ALL");
        }
    }

    #[test]
    fn wire_strings_are_snake_case_and_statuses_are_errors() {
        assert_eq!(ErrorCode::StoreUnavailable.as_str(), "store_unavailable");
        assert_eq!(ErrorCode::BadRequest.to_string(), "bad_request");
        assert_eq!(
            serde_json::to_value(ErrorCode::PayloadTooLarge).unwrap(),
            serde_json::json!("payload_too_large")
        );
        for c in ErrorCode::ALL {
            assert!(
                c.status().is_client_error() || c.status().is_server_error(),
                "{c}"
            );
            assert!(
                c.as_str()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{c}"
            );
        }
        let mut names: Vec<_> = ErrorCode::ALL.map(ErrorCode::as_str).to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(
            names.len(),
            ErrorCode::ALL.len(),
            "two codes share a wire string"
        );
    }
}
