//! The OpenAPI 3.1 document of the API, generated from the code with `utoipa` and served at
//! `GET /api/v1/openapi.json` (public, like `/healthz`).
//!
//! Each handler carries its `#[utoipa::path]` (method, path, parameters, body, every status it
//! can answer); the JSON shapes derive their schemas in [`crate::model`], [`crate::live`] and
//! [`crate::timelines`]; this module gathers them, names the reusable error answers (one per
//! status, each with the [`ErrorBody`] schema; a route names a set of them from
//! [`crate::openapi_errors`]) and declares the bearer scheme of
//! [`crate::auth`]. Routes that need a key say `security(("bearer" = []))`; the public ones say
//! nothing. `server/tests/openapi.rs` checks that every route of the router is in the document
//! and that its security matches what the router enforces.

use crate::error::ErrorBody;
use crate::extract::NoQuery;
use crate::{api, live, model, simulations, timelines};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use orq::{AttemptOutcome, Status};
use std::borrow::Cow;
use std::sync::LazyLock;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::RefOr;
use utoipa::{IntoParams, Modify, OpenApi, PartialSchema, ToResponse, ToSchema};

/// The pattern of queue, tenant and type names (`orq::keys::is_valid_name`), as written in the
/// `#[schema]` and `#[param]` attributes (which take literals only; a test compares them).
pub const NAME_PATTERN: &str = "^[A-Za-z0-9._-]{1,64}$";

/// The document (built once).
static DOCUMENT_JSON: LazyLock<String> = LazyLock::new(|| {
    ApiDoc::openapi()
        .to_json()
        .expect("the OpenAPI document serialises")
});

/// The API as an OpenAPI 3.1 document (this one). Public.
#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    tag = "health",
    responses(
        (status = 200, description = "This document (OpenAPI 3.1).", body = serde_json::Value),
        (status = 400, response = BadRequest),
    ),
)]
pub async fn openapi_json(_: NoQuery) -> Response {
    ([(CONTENT_TYPE, "application/json")], DOCUMENT_JSON.as_str()).into_response()
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "orq",
        description = "orq's HTTP API: submit and inspect tasks, the dead-letter queue, queue \
            and tenant settings, live views. Errors are `{\"error\": {\"code\", \"message\"}}`; \
            times are RFC 3339 UTC with milliseconds unless a name ends in `_ms`."
    ),
    paths(
        api::healthz,
        api::readyz,
        openapi_json,
        api::submit,
        api::list_tasks,
        api::submit_batch,
        api::get_task,
        api::cancel_task,
        api::list_dlq,
        api::replay_bulk,
        api::replay_one,
        api::purge_one,
        api::list_queues,
        api::queue_stats,
        api::delete_queue,
        api::list_tenants,
        api::put_tenant,
        api::pause_queue,
        api::resume_queue,
        api::drain_queue,
        api::put_settings,
        api::leases::lease,
        api::leases::heartbeat,
        api::leases::complete,
        api::leases::complete_many,
        api::leases::fail,
        api::leases::release,
        live::metrics,
        live::workers,
        live::events,
        timelines::list,
        timelines::get,
        simulations::status,
        simulations::run,
        crate::metrics::prometheus,
    ),
    components(
        schemas(ErrorBody, StatusName, AttemptOutcomeName, model::CountsJson),
        responses(
            BadRequest,
            Unauthorized,
            Forbidden,
            NotFound,
            RequestTimeout,
            Conflict,
            PayloadTooLarge,
            Unprocessable,
            TooManyRequests,
            Unavailable,
        )
    ),
    modifiers(&BearerScheme, &RunAtOrDelay),
    tags(
        (name = "tasks", description = "Submit, read, list and cancel tasks."),
        (name = "dlq", description = "The dead-letter queue."),
        (name = "queues", description = "Queue and tenant counts and settings."),
        (name = "workers", description = "The worker protocol: lease tasks, heartbeat, and \
            report each lease's outcome with its token (admin and worker keys)."),
        (name = "live", description = "Live views: events, metrics, workers."),
        (name = "timelines", description = "Simulation timelines (`--timelines DIR`)."),
        (name = "simulations", description = "Simulation runs of orq's simulator, started from the dashboard (`--sim-binary`)."),
        (name = "health", description = "Liveness, readiness and this document (public), and \
            the Prometheus metrics (`/metrics`, admin keys)."),
    )
)]
struct ApiDoc;

/// Declares the `bearer` scheme the protected routes name ([`crate::auth`]).
struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API key from the keys file (`--api-keys`), as \
                         `Authorization: Bearer <key>`; needed when keys are configured.",
                    ))
                    .build(),
            ),
        );
    }
}

/// Says in `SubmitBody` what its derive cannot: `delay_ms` and `run_at` are exclusive (one of
/// them absent or null).
struct RunAtOrDelay;

impl Modify for RunAtOrDelay {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::{AllOfBuilder, AnyOfBuilder};
        let schemas = &mut doc.components.as_mut().expect("components").schemas;
        let body = schemas
            .remove("SubmitBody")
            .expect("SubmitBody is a schema");
        let null_field = |name: &str| {
            ObjectBuilder::new().property(name, ObjectBuilder::new().schema_type(Type::Null))
        };
        let exclusive = AnyOfBuilder::new()
            .item(null_field("delay_ms"))
            .item(null_field("run_at"))
            .description(Some("`delay_ms` and `run_at`: give one or the other."));
        let description = match &body {
            RefOr::T(Schema::Object(o)) => o.description.clone(),
            _ => None,
        };
        let joined = AllOfBuilder::new()
            .item(body)
            .item(exclusive)
            .description(description);
        schemas.insert("SubmitBody".to_string(), joined.into());
    }
}

fn string_enum(values: impl IntoIterator<Item = &'static str>, description: &str) -> Schema {
    let mut o = ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description));
    o = o.enum_values(Some(values));
    o.build().into()
}

/// The schema of a task status name (`orq::Status`), from [`Status::ALL`].
pub struct StatusName;

impl PartialSchema for StatusName {
    fn schema() -> RefOr<Schema> {
        string_enum(Status::ALL.map(Status::as_str), "A task's status.").into()
    }
}

impl ToSchema for StatusName {
    fn name() -> Cow<'static, str> {
        "Status".into()
    }
}

/// The schema of an attempt's outcome (`orq::AttemptOutcome`), from [`AttemptOutcome::ALL`].
pub struct AttemptOutcomeName;

impl PartialSchema for AttemptOutcomeName {
    fn schema() -> RefOr<Schema> {
        string_enum(
            AttemptOutcome::ALL.map(AttemptOutcome::as_str),
            "How an attempt ended: `failed` (the handler failed or timed out), `expired` (its \
             lease ran out without an outcome: the worker crashed, hung or lost the store), \
             `completed`.",
        )
        .into()
    }
}

impl ToSchema for AttemptOutcomeName {
    fn name() -> Cow<'static, str> {
        "AttemptOutcome".into()
    }
}

/// The `{id}` of the by-id routes.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct TaskId {
    /// The task id: a ULID, in either case (anything else is a 404).
    #[param(pattern = "^[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}$")]
    pub id: String,
}

/// The `{queue}` of the `/queues/{queue}/...` routes.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct QueueName {
    /// Queue name.
    #[param(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub queue: String,
}

/// The `{tenant}` of `/queues/{queue}/tenants/{tenant}`.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct TenantName {
    /// Tenant name.
    #[param(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub tenant: String,
}

/// 400 `bad_request`: a malformed body, field, parameter or query; the message names it.
#[derive(ToResponse)]
pub struct BadRequest(pub ErrorBody);

/// 401 `unauthorized`: no API key, or an unknown one (keys configured).
#[derive(ToResponse)]
#[response(headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"orq\"` \
    (with `error=\"invalid_token\"` for an unknown key).")))]
pub struct Unauthorized(pub ErrorBody);

/// 403 `forbidden`: the key lacks the right (admin only, another tenant or queue).
#[derive(ToResponse)]
pub struct Forbidden(pub ErrorBody);

/// 404 `not_found`: no such task, queue or file (another tenant's task too).
#[derive(ToResponse)]
pub struct NotFound(pub ErrorBody);

/// 408 `request_timeout`: the request body did not arrive in time (`--body-timeout-ms`).
#[derive(ToResponse)]
pub struct RequestTimeout(pub ErrorBody);

/// 409 `conflict`: the task or queue is not in a state that allows this; on the worker
/// protocol's reports `lease_lost` (the token no longer holds the task: drop the work) or
/// `cancelled` (the task was cancelled: abort the handler).
#[derive(ToResponse)]
pub struct Conflict(pub ErrorBody);

/// 413 `payload_too_large`: the body, a payload or a file is over its limit.
#[derive(ToResponse)]
pub struct PayloadTooLarge(pub ErrorBody);

/// 422 `unprocessable`: a payload its handler refuses (an `http` URL not allowed).
#[derive(ToResponse)]
pub struct Unprocessable(pub ErrorBody);

/// 429 `limited`: over a submit rate or a tenant's `max_queued`; retry after `Retry-After`.
#[derive(ToResponse)]
#[response(headers(("Retry-After" = u64, description = "Seconds to wait (at least 1).")))]
pub struct TooManyRequests(pub ErrorBody);

/// 503 `store_unavailable`: the store refused the call for a reason that passes (out of memory,
/// read-only, loading, busy) or did not answer; nothing was stored, retry after `Retry-After`.
/// 503 `unavailable`: this process cannot serve it now (too many event stream clients).
#[derive(ToResponse)]
#[response(headers(("Retry-After" = u64, description = "Seconds to wait (with store_unavailable).")))]
pub struct Unavailable(pub ErrorBody);
