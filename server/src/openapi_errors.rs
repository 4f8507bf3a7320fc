//! The error answers of each route in the OpenAPI document, declared once: each status has one
//! component response in [`crate::openapi`] (its name from [`component`]), and each route names
//! one of the sets below in its `#[utoipa::path(responses(...))]`, after its success answers.
//! A set is a list of [`ErrorCode`]s; its responses are references to the components of their
//! statuses.

use crate::error::ErrorCode;
use std::collections::BTreeMap;
use utoipa::openapi::response::Response;
use utoipa::openapi::{Ref, RefOr};

/// The name of the component response (`#/components/responses/NAME`) that documents `code`'s
/// status, or `None` for codes no route documents (405 and 500 come from no handler's logic).
pub fn component(code: ErrorCode) -> Option<&'static str> {
    Some(match code {
        ErrorCode::BadRequest => "BadRequest",
        ErrorCode::Unauthorized => "Unauthorized",
        ErrorCode::Forbidden => "Forbidden",
        ErrorCode::NotFound => "NotFound",
        ErrorCode::RequestTimeout => "RequestTimeout",
        ErrorCode::Conflict | ErrorCode::LeaseLost | ErrorCode::Cancelled => "Conflict",
        ErrorCode::PayloadTooLarge => "PayloadTooLarge",
        ErrorCode::Unprocessable => "Unprocessable",
        ErrorCode::Limited => "TooManyRequests",
        ErrorCode::Unavailable | ErrorCode::StoreUnavailable => "Unavailable",
        ErrorCode::MethodNotAllowed | ErrorCode::Internal => return None,
    })
}

/// The responses map of `codes`: status -> reference to its component response.
pub fn responses(codes: &[ErrorCode]) -> BTreeMap<String, RefOr<Response>> {
    codes
        .iter()
        .map(|&c| {
            let name = component(c).expect("a documented error code");
            (
                c.status().as_u16().to_string(),
                RefOr::Ref(Ref::from_response_name(name)),
            )
        })
        .collect()
}

/// Declares a set of error answers: a type whose `IntoResponses` lists `codes`.
macro_rules! error_set {
    ($(#[$doc:meta])* $name:ident: $($code:ident),+ $(,)?) => {
        $(#[$doc])*
        pub struct $name;

        impl $name {
            /// The codes of this set.
            pub const CODES: &'static [ErrorCode] = &[$(ErrorCode::$code),+];
        }

        impl utoipa::IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<Response>> {
                responses(Self::CODES)
            }
        }
    };
}

error_set!(
    /// A route that needs a key and takes arguments but no body: 400, 401, 503.
    KeyErrors: BadRequest, Unauthorized, StoreUnavailable
);
error_set!(
    /// A route of a queue (or of all tasks) that a key may lack the right to: 400, 401, 403, 503.
    QueueErrors: BadRequest, Unauthorized, Forbidden, StoreUnavailable
);
error_set!(
    /// A queue's view that is refused for an unknown queue: [`QueueErrors`] and 404.
    QueueLookupErrors: BadRequest, Unauthorized, Forbidden, NotFound, StoreUnavailable
);
error_set!(
    /// Deleting a queue: [`QueueLookupErrors`] and 409 (it holds work).
    QueueDeleteErrors: BadRequest, Unauthorized, Forbidden, NotFound, Conflict, StoreUnavailable
);
error_set!(
    /// A queue's route with a JSON body: [`QueueErrors`] and 408, 413.
    BodyErrors: BadRequest, Unauthorized, Forbidden, RequestTimeout, PayloadTooLarge,
        StoreUnavailable
);
error_set!(
    /// Submitting: [`BodyErrors`] and 422 (a payload its handler refuses), 429 (limits).
    SubmitErrors: BadRequest, Unauthorized, Forbidden, RequestTimeout, PayloadTooLarge,
        Unprocessable, Limited, StoreUnavailable
);
error_set!(
    /// Reading a task by id (another tenant's is a 404): 400, 401, 404, 503.
    TaskErrors: BadRequest, Unauthorized, NotFound, StoreUnavailable
);
error_set!(
    /// Changing a task by id: [`TaskErrors`] and 409 (not in a state that allows it).
    TaskChangeErrors: BadRequest, Unauthorized, NotFound, Conflict, StoreUnavailable
);
error_set!(
    /// Purging a dead task (admin keys only): [`TaskChangeErrors`] and 403.
    PurgeErrors: BadRequest, Unauthorized, Forbidden, NotFound, Conflict, StoreUnavailable
);
error_set!(
    /// Leasing (worker protocol): [`BodyErrors`] and 404 (a queue that does not exist).
    LeaseErrors: BadRequest, Unauthorized, Forbidden, NotFound, RequestTimeout, PayloadTooLarge,
        StoreUnavailable
);
error_set!(
    /// Reporting on a lease (worker protocol): [`LeaseErrors`] and 409 (`lease_lost`,
    /// `cancelled`).
    ReportErrors: BadRequest, Unauthorized, Forbidden, NotFound, RequestTimeout, Conflict,
        LeaseLost, Cancelled, PayloadTooLarge, StoreUnavailable
);
error_set!(
    /// Running a simulation (admin keys only): [`BodyErrors`] and 409 (a run is in progress),
    /// 422 (beyond the bounds), 503 `unavailable` (the simulator is missing or being built).
    SimulationErrors: BadRequest, Unauthorized, Forbidden, RequestTimeout, Conflict,
        PayloadTooLarge, Unprocessable, Unavailable
);
error_set!(
    /// Reading a timeline file: 400, 401, 403, 404, 413 (the file is over its limit).
    FileErrors: BadRequest, Unauthorized, Forbidden, NotFound, PayloadTooLarge
);

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::IntoResponses;

    #[test]
    fn a_set_answers_one_reference_per_status() {
        let r = SubmitErrors::responses();
        assert_eq!(
            r.keys().map(String::as_str).collect::<Vec<_>>(),
            ["400", "401", "403", "408", "413", "422", "429", "503"]
        );
        match &r["429"] {
            RefOr::Ref(x) => assert_eq!(x.ref_location, "#/components/responses/TooManyRequests"),
            RefOr::T(_) => panic!("429 is not a reference"),
        }
    }

    #[test]
    fn codes_that_share_a_status_share_its_component() {
        for a in ErrorCode::ALL {
            for b in ErrorCode::ALL {
                if a.status() == b.status() {
                    assert_eq!(component(a), component(b), "{a} and {b}");
                }
            }
        }
    }
}
