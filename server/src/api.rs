//! The HTTP API under `/api/v1`: submit, read, list, cancel, DLQ, queue stats, health; the live
//! views ([`crate::live`]) and timelines ([`crate::timelines`]); its OpenAPI document
//! ([`crate::openapi`]); the dashboard at `/`. Every handler takes its input through the
//! extractors of [`crate::extract`] (bodies, queries and path names checked and capped, typed
//! JSON errors, [`ApiError`]) and validates the rest; nothing user-supplied reaches a key name
//! without passing `orq::keys` validation. Each handler's `#[utoipa::path]` documents its
//! parameters, body and every status it answers.
//!
//! Every route but `/healthz`, `/readyz`, `/openapi.json` and the dashboard's files needs an
//! API key when keys are configured ([`crate::auth`]); each handler takes the [`Caller`] and
//! applies its rule: admin-only routes answer 403 to tenant keys, and tenant keys see, count and
//! change only their own tenant's tasks in their queues (another tenant's task is a 404, as if it
//! did not exist).

use crate::auth::{Auth, Caller};
use crate::error::{ApiError, ErrorCode};
use crate::extract::{
    ApiJson, ApiQuery, NoQuery, QueuePath, QueueTenantPath, TaskIdPath, SMALL_BODY_MAX_BYTES,
};
use crate::handlers::{check_payload, HttpAllow};
use crate::live::{self, Live};
use crate::model::{
    BatchBody, BulkReplayBody, CountsJson, DrainedJson, HealthJson, PausedJson, PurgedJson,
    QueueDefaults, QueueSettingsBody, QueueStatsJson, QueuesJson, ReplayedJson, SubmitBody,
    TaskJson, TasksJson, TenantBody, TenantEntryJson, TenantJson, TenantNameJson, TenantsJson,
};
use crate::names::{check_name, Name};
use crate::openapi::{QueueName, TaskId, TenantName, Unavailable};
use crate::openapi_errors::{
    BodyErrors, KeyErrors, PurgeErrors, QueueErrors, QueueLookupErrors, SubmitErrors,
    TaskChangeErrors, TaskErrors,
};
use crate::ratelimit::SubmitLimiter;
use crate::{dashboard, timelines};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use orq::keys::is_valid_name;
use orq::task::BATCH_MAX;
use orq::{Client, Clock, ListQuery, Status, Task};
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Largest request body of any route (bytes): a full batch of small tasks fits.
pub const BODY_MAX_BYTES: usize = 16 << 20;
/// Largest body of a single submit (bytes): a 1 MiB payload plus the other fields.
pub const SUBMIT_BODY_MAX_BYTES: usize = (1 << 20) + 64 * 1024;
/// Default page size of listings.
pub const LIST_LIMIT_DEFAULT: u32 = 50;
/// Default number of tasks a bulk DLQ replay puts back.
pub const REPLAY_LIMIT_DEFAULT: u64 = 1000;

/// How long a queue's default task options are cached by the API (ms): a change made through
/// another API process applies to submits within this time.
pub const DEFAULTS_CACHE_MS: u64 = 1_000;

/// Cached default task options per queue: (time read, defaults).
pub type DefaultsCache =
    Arc<std::sync::Mutex<std::collections::BTreeMap<String, (u64, Option<QueueDefaults>)>>>;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// Default task options per queue, read through [`AppState::defaults`].
    pub defaults_cache: DefaultsCache,
    /// The engine client.
    pub client: Client,
    /// Wall clock (bounds `run_at`).
    pub clock: Arc<dyn Clock>,
    /// The `http` handler's allow-list, checked at submit.
    pub allow: Arc<HttpAllow>,
    /// The event poller's broadcast, metrics and SSE client slots (`/events`, `/metrics`).
    pub live: Live,
    /// The dashboard's static files, served at `/` (`None`: `/` says how to build them).
    pub dashboard: Option<Arc<PathBuf>>,
    /// The directory of simulation timelines (`None`: the `/timelines` routes answer 404).
    pub timelines: Option<Arc<PathBuf>>,
    /// Cancelled when the server shuts down: ends the open event streams, so graceful shutdown
    /// does not wait for their clients.
    pub shutdown: CancellationToken,
    /// API keys, or none (every request is an admin).
    pub auth: Auth,
    /// The per-(queue, tenant) submit rate limit (`None`: unlimited).
    pub submit_limit: Option<SubmitLimiter>,
}

/// The router (no socket), for `main` and for tests: the API under `/api/v1` and the dashboard
/// at `/` (every other path).
pub fn app(state: AppState) -> Router {
    // Every route of this router needs a key (when keys are configured): the middleware puts the
    // caller in place, and a handler without it cannot get a `Caller` (401).
    let protected = Router::new()
        .route("/api/v1/tasks", post(submit).get(list_tasks))
        .route("/api/v1/tasks/batch", post(submit_batch))
        .route("/api/v1/tasks/{id}", get(get_task))
        .route("/api/v1/tasks/{id}/cancel", post(cancel_task))
        .route("/api/v1/dlq", get(list_dlq))
        .route("/api/v1/dlq/replay", post(replay_bulk))
        .route("/api/v1/dlq/{id}/replay", post(replay_one))
        .route("/api/v1/dlq/{id}", axum::routing::delete(purge_one))
        .route("/api/v1/queues", get(list_queues))
        .route("/api/v1/queues/{queue}", get(queue_stats))
        .route("/api/v1/queues/{queue}/tenants", get(list_tenants))
        .route(
            "/api/v1/queues/{queue}/tenants/{tenant}",
            axum::routing::put(put_tenant),
        )
        .route("/api/v1/queues/{queue}/pause", post(pause_queue))
        .route("/api/v1/queues/{queue}/resume", post(resume_queue))
        .route("/api/v1/queues/{queue}/drain", post(drain_queue))
        .route(
            "/api/v1/queues/{queue}/settings",
            axum::routing::put(put_settings),
        )
        .route("/api/v1/queues/{queue}/metrics", get(live::metrics))
        .route("/api/v1/queues/{queue}/workers", get(live::workers))
        .route("/api/v1/events", get(live::events))
        .route("/api/v1/timelines", get(timelines::list))
        .route("/api/v1/timelines/{name}", get(timelines::get))
        .route_layer(axum::middleware::from_fn_with_state(
            state.auth.clone(),
            crate::auth::authenticate,
        ));
    Router::new()
        .route("/api/v1/healthz", get(healthz))
        .route("/api/v1/readyz", get(readyz))
        .route("/api/v1/openapi.json", get(crate::openapi::openapi_json))
        .merge(protected)
        .fallback(fallback)
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                ErrorCode::MethodNotAllowed,
                "method not allowed on this route",
            )
        })
        .layer(DefaultBodyLimit::max(BODY_MAX_BYTES))
        .with_state(state)
}

type ApiResult = Result<Response, ApiError>;

/// Paths no route matched: under `/api` a typed 404, elsewhere the dashboard's files.
async fn fallback(State(s): State<AppState>, req: Request) -> Response {
    let path = req.uri().path();
    if path == "/api" || path.starts_with("/api/") {
        return ApiError::not_found("no such route").into_response();
    }
    dashboard::serve(s.dashboard.as_deref().map(PathBuf::as_path), req).await
}

/// The process is up.
#[utoipa::path(
    get,
    path = "/api/v1/healthz",
    tag = "health",
    responses((status = 200, description = "Up.", body = HealthJson)),
)]
pub(crate) async fn healthz() -> Json<HealthJson> {
    Json(HealthJson { status: "ok" })
}

/// The store answers and accepts writes: 503 `store_unavailable` while it refuses them (out of
/// memory, read-only, loading) or does not answer.
#[utoipa::path(
    get,
    path = "/api/v1/readyz",
    tag = "health",
    responses(
        (status = 200, description = "Ready.", body = HealthJson),
        (status = 503, response = Unavailable),
    ),
)]
pub(crate) async fn readyz(State(s): State<AppState>) -> Response {
    match s.client.probe_writes().await {
        Ok(()) => Json(HealthJson { status: "ready" }).into_response(),
        Err(e) => match e.transient() {
            Some(cause) => ApiError::store_unavailable(cause).into_response(),
            None => ApiError::new(
                ErrorCode::Unavailable,
                format!("the store answered the readiness probe unexpectedly: {e}"),
            )
            .into_response(),
        },
    }
}

impl AppState {
    /// A state over `client`, with no dashboard and no timelines. Starts the event poller of
    /// the live views on the current tokio runtime (see [`Live::start`]); it stops when the last
    /// clone of this state is dropped.
    pub fn new(client: Client, clock: Arc<dyn Clock>, allow: Arc<HttpAllow>) -> Self {
        AppState {
            defaults_cache: Arc::default(),
            live: Live::start(client.clone(), &*clock),
            client,
            clock: clock.clone(),
            allow,
            dashboard: None,
            timelines: None,
            shutdown: CancellationToken::new(),
            auth: Auth::Off,
            submit_limit: Some(SubmitLimiter::new(
                crate::ratelimit::RATE_PER_S_DEFAULT,
                crate::ratelimit::BURST_DEFAULT,
                clock.clone(),
            )),
        }
    }

    /// Require the API keys of `auth` on every route but health, readiness and the dashboard.
    pub fn with_auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    /// Limit submits per (queue, tenant) with `limiter` (`None`: no limit).
    pub fn with_submit_limit(mut self, limiter: Option<SubmitLimiter>) -> Self {
        self.submit_limit = limiter;
        self
    }

    /// Spend the submit rate tokens of `specs` (one per task, per queue and tenant), all or
    /// none: 429 with `Retry-After` when a (queue, tenant) is over its rate.
    fn admit(&self, specs: &[orq::TaskSpec]) -> Result<(), ApiError> {
        let Some(limiter) = &self.submit_limit else {
            return Ok(());
        };
        let mut counts: std::collections::BTreeMap<(&str, &str), u64> = Default::default();
        for sp in specs {
            *counts.entry((&sp.queue, &sp.tenant)).or_default() += 1;
        }
        let wants: Vec<(&str, &str, u64)> = counts.iter().map(|(&(q, t), &n)| (q, t, n)).collect();
        limiter.take_all(&wants).map_err(|wait_ms| {
            let who = match counts.keys().next() {
                Some((q, t)) if counts.len() == 1 => format!("tenant {t} in queue {q}"),
                _ => "a tenant of this batch".to_string(),
            };
            ApiError::limited(
                format!(
                    "{who} is submitting faster than {} tasks/s (burst {}); retry later",
                    limiter.rate_per_s(),
                    limiter.burst()
                ),
                wait_ms.div_ceil(1000),
            )
        })
    }

    /// Serve the dashboard's static export from `dir` at `/`.
    pub fn with_dashboard(mut self, dir: PathBuf) -> Self {
        self.dashboard = Some(Arc::new(dir));
        self
    }

    /// Serve the simulation timelines of `dir` under `/api/v1/timelines`.
    pub fn with_timelines(mut self, dir: PathBuf) -> Self {
        self.timelines = Some(Arc::new(dir));
        self
    }

    /// End the open event streams when `token` is cancelled.
    pub fn with_shutdown(mut self, token: CancellationToken) -> Self {
        self.shutdown = token;
        self
    }

    /// The default task options of `queue` (cached for [`DEFAULTS_CACHE_MS`]).
    pub async fn defaults(&self, queue: &str) -> Result<Option<QueueDefaults>, ApiError> {
        let now = self.clock.now_ms();
        if let Some((at, d)) = self.defaults_cache.lock().unwrap().get(queue) {
            if now.saturating_sub(*at) < DEFAULTS_CACHE_MS {
                return Ok(d.clone());
            }
        }
        if !is_valid_name(queue) {
            return Ok(None); // the submit's own validation names the field
        }
        let st = self.client.stats(queue).await?;
        let d = st
            .defaults
            .as_deref()
            .and_then(|j| serde_json::from_str::<QueueDefaults>(j).ok());
        self.defaults_cache
            .lock()
            .unwrap()
            .insert(queue.to_string(), (now, d.clone()));
        Ok(d)
    }
}

/// The tenant and queue rules of a submit: a tenant key's tenant is forced (naming another is a
/// 403) and its queue must be one of the key's (403). An invalid queue name is left for the
/// submit's own validation (400).
fn authorize_submit(caller: &Caller, mut body: SubmitBody) -> Result<SubmitBody, ApiError> {
    body.tenant = caller.tenant_for("tenant", body.tenant)?;
    let queue = body.queue.as_deref().unwrap_or("default");
    if is_valid_name(queue) {
        caller.check_queue(queue)?;
    }
    Ok(body)
}

async fn spec_of(s: &AppState, body: SubmitBody) -> Result<orq::TaskSpec, ApiError> {
    let queue = body.queue.clone().unwrap_or_else(|| "default".into());
    let defaults = s.defaults(&queue).await?;
    let spec = body.into_spec(s.clock.now_ms(), defaults.as_ref())?;
    check_payload(&spec.task_type, &spec.payload, &s.allow)?;
    Ok(spec)
}

/// Submit a task: 201 with the task, or 200 with the existing task when its idempotency key was
/// used in the last 24 h.
#[utoipa::path(
    post,
    path = "/api/v1/tasks",
    tag = "tasks",
    security(("bearer" = [])),
    request_body = SubmitBody,
    responses(
        (status = 201, description = "Created.", body = TaskJson),
        (
            status = 200,
            description = "The task submitted earlier with this idempotency key.",
            body = TaskJson,
        ),
        SubmitErrors,
    ),
)]
pub(crate) async fn submit(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    ApiJson(body): ApiJson<SubmitBody, SUBMIT_BODY_MAX_BYTES>,
) -> ApiResult {
    let body = authorize_submit(&caller, body)?;
    let spec = spec_of(&s, body).await?;
    s.admit(std::slice::from_ref(&spec))?;
    let done = s.client.submit(spec).await?;
    let status = if done.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(TaskJson::from(done.task))).into_response())
}

/// Submit 1..=1000 tasks at once: all or nothing on validation and on the rate limit.
#[utoipa::path(
    post,
    path = "/api/v1/tasks/batch",
    tag = "tasks",
    security(("bearer" = [])),
    request_body = BatchBody,
    responses(
        (
            status = 201,
            description = "The tasks, in the order given (without `next_cursor`), and per task \
                whether this call created it (`created`); at least one was created.",
            body = TasksJson,
        ),
        (
            status = 200,
            description = "Every task's idempotency key (or id) matched an existing task: those \
                tasks, in the order given, `created` all false.",
            body = TasksJson,
        ),
        SubmitErrors,
    ),
)]
pub(crate) async fn submit_batch(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    ApiJson(batch): ApiJson<BatchBody>,
) -> ApiResult {
    if batch.tasks.is_empty() || batch.tasks.len() > BATCH_MAX {
        return Err(ApiError::bad_request(format!(
            "tasks: between 1 and {BATCH_MAX} per batch"
        )));
    }
    let mut specs = Vec::with_capacity(batch.tasks.len());
    for (i, b) in batch.tasks.into_iter().enumerate() {
        let spec = match authorize_submit(&caller, b) {
            Ok(b) => spec_of(&s, b).await,
            Err(e) => Err(e),
        };
        // A field of item i names its path; a store failure is the call's, not the item's.
        specs.push(spec.map_err(|mut e| {
            if e.code != ErrorCode::StoreUnavailable {
                e.message = format!("tasks[{i}].{}", e.message);
            }
            e
        })?);
    }
    s.admit(&specs)?;
    let done = s.client.submit_batch(specs).await?;
    let created: Vec<bool> = done.iter().map(|d| d.created).collect();
    // As for one task: 201 when this call stored something, 200 when every task already existed.
    let status = if created.iter().any(|&c| c) {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let tasks = done.into_iter().map(|d| TaskJson::from(d.task)).collect();
    let body = TasksJson {
        tasks,
        next_cursor: None,
        created: Some(created),
    };
    Ok((status, Json(body)).into_response())
}

/// `?queue=` of by-id routes.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ById {
    /// The task's queue (without it, every known queue is searched).
    #[param(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    queue: Option<String>,
}

fn by_id(q: ById) -> Result<Option<String>, ApiError> {
    if let Some(queue) = &q.queue {
        check_name("queue", queue)?;
    }
    Ok(q.queue)
}

/// The task `id` (in `queue` when given) if the caller may see it; otherwise the same 404 as for
/// a task that does not exist, so a tenant key cannot learn that another tenant's id exists.
async fn visible_task(
    s: &AppState,
    caller: &Caller,
    queue: Option<&str>,
    id: &str,
) -> Result<Task, ApiError> {
    if queue.is_some_and(|q| !caller.may_use_queue(q)) {
        return Err(ApiError::task_not_found(id));
    }
    let task = s.client.get(queue, id).await?;
    if caller.sees(&task.queue, &task.tenant) {
        Ok(task)
    } else {
        Err(ApiError::task_not_found(id))
    }
}

/// One task.
#[utoipa::path(
    get,
    path = "/api/v1/tasks/{id}",
    tag = "tasks",
    security(("bearer" = [])),
    params(TaskId, ById),
    responses(
        (status = 200, description = "The task.", body = TaskJson),
        TaskErrors,
    ),
)]
pub(crate) async fn get_task(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ById>,
    TaskIdPath(id): TaskIdPath,
) -> ApiResult {
    let queue = by_id(q)?;
    let task = visible_task(&s, &caller, queue.as_deref(), &id).await?;
    Ok(Json(TaskJson::from(task)).into_response())
}

/// Cancel a scheduled, queued, retrying or leased task (cancelling a cancelled task returns it).
#[utoipa::path(
    post,
    path = "/api/v1/tasks/{id}/cancel",
    tag = "tasks",
    security(("bearer" = [])),
    params(TaskId, ById),
    responses(
        (status = 200, description = "The cancelled task.", body = TaskJson),
        TaskChangeErrors,
    ),
)]
pub(crate) async fn cancel_task(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ById>,
    TaskIdPath(id): TaskIdPath,
) -> ApiResult {
    let queue = by_id(q)?;
    // A task's queue and tenant never change, so the check stays true for the cancel.
    let found = visible_task(&s, &caller, queue.as_deref(), &id).await?;
    let task = s.client.cancel(Some(&found.queue), &id).await?;
    Ok(Json(TaskJson::from(task)).into_response())
}

/// Query of `GET /tasks` and `GET /dlq` (which takes no `status`).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListParams {
    /// Queue (default `default`).
    #[param(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    queue: Option<String>,
    /// Only this tenant's tasks.
    #[param(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    tenant: Option<String>,
    /// Only tasks in this status.
    #[param(value_type = Option<crate::openapi::StatusName>)]
    status: Option<String>,
    /// Only tasks of this type.
    #[serde(rename = "type")]
    #[param(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    task_type: Option<String>,
    /// Page size (default 50).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
    /// The `next_cursor` of the previous page (opaque).
    cursor: Option<String>,
}

async fn list_common(
    s: &AppState,
    caller: &Caller,
    mut p: ListParams,
    status: Option<Status>,
) -> ApiResult {
    let queue = p.queue.take().unwrap_or_else(|| "default".into());
    check_name("queue", &queue)?;
    caller.check_queue(&queue)?;
    p.tenant = caller.tenant_for("tenant", p.tenant)?;
    for (field, v) in [("tenant", &p.tenant), ("type", &p.task_type)] {
        if let Some(v) = v {
            check_name(field, v)?;
        }
    }
    let limit = match p.limit.as_deref() {
        None => LIST_LIMIT_DEFAULT,
        Some(l) => l
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=orq::client::LIST_LIMIT_MAX).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "limit: must be an integer from 1 to {}",
                    orq::client::LIST_LIMIT_MAX
                ))
            })?,
    };
    if let Some(c) = p.cursor.take() {
        p.cursor = Some(s.auth.cursor_in(caller, c)?);
    }
    if let Some(c) = &p.cursor {
        let ok = c.len() <= 64 && c.bytes().all(|b| b.is_ascii_digit() || b == b':');
        if !ok {
            return Err(ApiError::bad_request("cursor: malformed"));
        }
    }
    let page = s
        .client
        .list(&ListQuery {
            queue,
            status,
            tenant: p.tenant,
            task_type: p.task_type,
            limit,
            cursor: p.cursor.filter(|c| !c.is_empty()),
        })
        .await?;
    let tasks = page.tasks.into_iter().map(TaskJson::from).collect();
    Ok(Json(TasksJson {
        created: None,
        tasks,
        next_cursor: Some(page.next_cursor.map(|c| s.auth.cursor_out(caller, c))),
    })
    .into_response())
}

/// One page of a queue's tasks, newest first; follow `next_cursor` until it is null.
#[utoipa::path(
    get,
    path = "/api/v1/tasks",
    tag = "tasks",
    security(("bearer" = [])),
    params(ListParams),
    responses(
        (status = 200, description = "A page of tasks.", body = TasksJson),
        QueueErrors,
    ),
)]
pub(crate) async fn list_tasks(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ListParams>,
) -> ApiResult {
    let mut p = q;
    let status = match p.status.take() {
        None => None,
        Some(v) => Some(Status::parse(&v).ok_or_else(|| {
            ApiError::bad_request(
                "status: one of scheduled, queued, leased, retrying, completed, dead, cancelled",
            )
        })?),
    };
    list_common(&s, &caller, p, status).await
}

/// One page of a queue's dead tasks, newest first.
#[utoipa::path(
    get,
    path = "/api/v1/dlq",
    tag = "dlq",
    security(("bearer" = [])),
    params(
        (
            "queue" = Option<String>,
            Query,
            description = "Queue (default `default`).",
            pattern = "^[A-Za-z0-9._-]{1,64}$",
        ),
        (
            "tenant" = Option<String>,
            Query,
            description = "Only this tenant's tasks.",
            pattern = "^[A-Za-z0-9._-]{1,64}$",
        ),
        (
            "type" = Option<String>,
            Query,
            description = "Only tasks of this type.",
            pattern = "^[A-Za-z0-9._-]{1,64}$",
        ),
        (
            "limit" = Option<u32>,
            Query,
            description = "Page size (default 50).",
            minimum = 1,
            maximum = 1000,
        ),
        (
            "cursor" = Option<String>,
            Query,
            description = "The `next_cursor` of the previous page (opaque).",
        ),
    ),
    responses(
        (status = 200, description = "A page of dead tasks.", body = TasksJson),
        QueueErrors,
    ),
)]
pub(crate) async fn list_dlq(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ListParams>,
) -> ApiResult {
    let p = q;
    if p.status.is_some() {
        return Err(ApiError::bad_request(
            "status: the DLQ lists dead tasks only",
        ));
    }
    list_common(&s, &caller, p, Some(Status::Dead)).await
}

/// Replay a dead task: queued again with a fresh retry budget, its history kept.
#[utoipa::path(
    post,
    path = "/api/v1/dlq/{id}/replay",
    tag = "dlq",
    security(("bearer" = [])),
    params(TaskId, ById),
    responses(
        (status = 200, description = "The replayed task.", body = TaskJson),
        TaskChangeErrors,
    ),
)]
pub(crate) async fn replay_one(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ById>,
    TaskIdPath(id): TaskIdPath,
) -> ApiResult {
    let queue = by_id(q)?;
    let found = visible_task(&s, &caller, queue.as_deref(), &id).await?;
    let task = s.client.replay(Some(&found.queue), &id).await?;
    Ok(Json(TaskJson::from(task)).into_response())
}

/// Replay up to `limit` dead tasks of a queue, optionally of one tenant or type.
#[utoipa::path(
    post,
    path = "/api/v1/dlq/replay",
    tag = "dlq",
    security(("bearer" = [])),
    request_body = BulkReplayBody,
    responses(
        (status = 200, description = "How many were replayed.", body = ReplayedJson),
        BodyErrors,
    ),
)]
pub(crate) async fn replay_bulk(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    ApiJson(mut b): ApiJson<BulkReplayBody, SMALL_BODY_MAX_BYTES>,
) -> ApiResult {
    let queue = b.queue.take().unwrap_or_else(|| "default".into());
    check_name("queue", &queue)?;
    caller.check_queue(&queue)?;
    b.tenant = caller.tenant_for("tenant", b.tenant)?;
    for (field, v) in [("tenant", &b.tenant), ("type", &b.task_type)] {
        if let Some(v) = v {
            check_name(field, v)?;
        }
    }
    let limit = b.limit.unwrap_or(REPLAY_LIMIT_DEFAULT);
    if limit == 0 || limit > orq::client::REPLAY_LIMIT_MAX {
        return Err(ApiError::bad_request(format!(
            "limit: must be from 1 to {}",
            orq::client::REPLAY_LIMIT_MAX
        )));
    }
    let r = s
        .client
        .replay_bulk(&queue, b.tenant.as_deref(), b.task_type.as_deref(), limit)
        .await?;
    Ok(Json(ReplayedJson {
        queue,
        replayed: r.replayed,
        more: r.more,
    })
    .into_response())
}

/// Delete a dead task for good (admin keys only).
#[utoipa::path(
    delete,
    path = "/api/v1/dlq/{id}",
    tag = "dlq",
    security(("bearer" = [])),
    params(TaskId, ById),
    responses(
        (status = 200, description = "Purged.", body = PurgedJson),
        PurgeErrors,
    ),
)]
pub(crate) async fn purge_one(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ById>,
    TaskIdPath(id): TaskIdPath,
) -> ApiResult {
    caller.require_admin("purging a dead task")?;
    let queue = by_id(q)?;
    s.client.purge(queue.as_deref(), &id).await?;
    Ok(Json(PurgedJson { id, purged: true }).into_response())
}

fn stats_json(st: &orq::QueueStats) -> QueueStatsJson {
    QueueStatsJson {
        queue: st.queue.clone(),
        paused: st.paused,
        aging_step_ms: st.aging_step_ms,
        defaults: st
            .defaults
            .as_deref()
            .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok()),
        counts: CountsJson::of(&st.counts),
        totals: st.totals.clone(),
        tenants: st.tenants.iter().map(TenantJson::from).collect(),
    }
}

/// A queue's stats as `caller` may see them: everything for an admin; for a tenant key only its
/// own tenant's counts and entry (its `share` null, as it would reveal the other tenants'
/// service), and no queue-wide `totals` (empty).
fn stats_view(st: &orq::QueueStats, caller: &Caller) -> QueueStatsJson {
    let Some(tenant) = caller.tenant() else {
        return stats_json(st);
    };
    let own = st.tenants.iter().find(|t| t.tenant == tenant);
    let mut v = stats_json(st);
    v.counts = own
        .map(|t| CountsJson::of(&t.counts))
        .unwrap_or_else(|| CountsJson::of(&Default::default()));
    v.totals = Default::default();
    v.tenants = own.map(own_tenant_json).into_iter().collect();
    v
}

/// A tenant's own entry, as a tenant key sees it (`share` null).
fn own_tenant_json(t: &orq::TenantStats) -> TenantJson {
    let mut v = TenantJson::from(t);
    v.share = None;
    v
}

/// A queue's tenants: weight, limits, counts, leases served, share of service, completions/s.
#[utoipa::path(
    get,
    path = "/api/v1/queues/{queue}/tenants",
    tag = "queues",
    security(("bearer" = [])),
    params(QueueName),
    responses(
        (status = 200, description = "The tenants.", body = TenantsJson),
        QueueErrors,
    ),
)]
pub(crate) async fn list_tenants(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    QueuePath(queue): QueuePath,
) -> ApiResult {
    caller.check_queue(&queue)?;
    let st = s.client.stats(&queue).await?;
    let tenants: Vec<_> = match caller.tenant() {
        None => st.tenants.iter().map(TenantJson::from).collect(),
        Some(own) => st
            .tenants
            .iter()
            .filter(|t| t.tenant == own)
            .map(own_tenant_json)
            .collect(),
    };
    Ok(Json(TenantsJson {
        queue: queue.into(),
        tenants,
    })
    .into_response())
}

/// Set a tenant's weight and limits (admin keys only): each field optional, `null` removes it.
#[utoipa::path(
    put,
    path = "/api/v1/queues/{queue}/tenants/{tenant}",
    tag = "queues",
    security(("bearer" = [])),
    params(QueueName, TenantName),
    request_body = TenantBody,
    responses(
        (status = 200, description = "The tenant's entry.", body = TenantEntryJson),
        BodyErrors,
    ),
)]
pub(crate) async fn put_tenant(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    QueueTenantPath(queue, tenant): QueueTenantPath,
    ApiJson(body): ApiJson<TenantBody, SMALL_BODY_MAX_BYTES>,
) -> ApiResult {
    caller.require_admin("setting a tenant's limits")?;
    let limits = body.into_limits()?;
    s.client.configure_tenant(&queue, &tenant, &limits).await?;
    let st = s.client.stats(&queue).await?;
    let entry = match st.tenants.iter().find(|t| t.tenant == tenant.as_str()) {
        Some(t) => TenantEntryJson::Listed(TenantJson::from(t)),
        None => TenantEntryJson::Unlisted(TenantNameJson {
            tenant: tenant.into(),
        }),
    };
    Ok(Json(entry).into_response())
}

async fn set_paused(s: &AppState, caller: &Caller, queue: Name, paused: bool) -> ApiResult {
    caller.require_admin(if paused {
        "pausing a queue"
    } else {
        "resuming a queue"
    })?;
    s.client.configure_queue(&queue, Some(paused), None).await?;
    Ok(Json(PausedJson {
        queue: queue.into(),
        paused,
    })
    .into_response())
}

/// Stop leasing from a queue (admin keys only); submits, promotion and reaping go on.
#[utoipa::path(
    post,
    path = "/api/v1/queues/{queue}/pause",
    tag = "queues",
    security(("bearer" = [])),
    params(QueueName),
    responses(
        (status = 200, description = "Paused.", body = PausedJson),
        QueueErrors,
    ),
)]
pub(crate) async fn pause_queue(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    QueuePath(queue): QueuePath,
) -> ApiResult {
    set_paused(&s, &caller, queue, true).await
}

/// Restart leasing from a queue (admin keys only).
#[utoipa::path(
    post,
    path = "/api/v1/queues/{queue}/resume",
    tag = "queues",
    security(("bearer" = [])),
    params(QueueName),
    responses(
        (status = 200, description = "Resumed.", body = PausedJson),
        QueueErrors,
    ),
)]
pub(crate) async fn resume_queue(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    QueuePath(queue): QueuePath,
) -> ApiResult {
    set_paused(&s, &caller, queue, false).await
}

/// Longest a drain request waits (ms).
pub const DRAIN_TIMEOUT_MS_MAX: u64 = 60_000;

/// Query of `POST /queues/{queue}/drain`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct DrainParams {
    /// Longest wait (ms; default 10000).
    #[param(minimum = 0, maximum = 60_000)]
    timeout_ms: Option<u64>,
}

/// Wait (at most `timeout_ms`) until nothing of the queue is queued, scheduled, retrying or
/// leased (admin keys only).
#[utoipa::path(
    post,
    path = "/api/v1/queues/{queue}/drain",
    tag = "queues",
    security(("bearer" = [])),
    params(QueueName, DrainParams),
    responses(
        (
            status = 200,
            description = "Drained, or what remains when the wait ended.",
            body = DrainedJson,
        ),
        QueueErrors,
    ),
)]
pub(crate) async fn drain_queue(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<DrainParams>,
    QueuePath(queue): QueuePath,
) -> ApiResult {
    caller.require_admin("draining a queue")?;
    let p = q;
    let timeout = p.timeout_ms.unwrap_or(10_000);
    if timeout > DRAIN_TIMEOUT_MS_MAX {
        return Err(ApiError::bad_request(format!(
            "timeout_ms: at most {DRAIN_TIMEOUT_MS_MAX}"
        )));
    }
    let left = s.client.drain(&queue, timeout, 50).await?;
    Ok(Json(DrainedJson {
        queue: queue.into(),
        drained: left == 0,
        remaining: left,
    })
    .into_response())
}

/// Change a queue's aging step and default task options (admin keys only).
#[utoipa::path(
    put,
    path = "/api/v1/queues/{queue}/settings",
    tag = "queues",
    security(("bearer" = [])),
    params(QueueName),
    request_body = QueueSettingsBody,
    responses(
        (status = 200, description = "The queue's stats after the change.", body = QueueStatsJson),
        BodyErrors,
    ),
)]
pub(crate) async fn put_settings(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    QueuePath(queue): QueuePath,
    ApiJson(b): ApiJson<QueueSettingsBody, SMALL_BODY_MAX_BYTES>,
) -> ApiResult {
    caller.require_admin("changing a queue's settings")?;
    if let Some(step) = b.aging_step_ms {
        let max = orq_lua::facts::AGING_STEP_MS_MAX;
        if step > max {
            return Err(ApiError::bad_request(format!(
                "aging_step_ms: must be 0..={max}"
            )));
        }
    }
    if let Some(Some(d)) = &b.defaults {
        d.validate()?;
    }
    if b.aging_step_ms.is_some() {
        s.client
            .configure_queue(&queue, None, b.aging_step_ms)
            .await?;
    }
    match &b.defaults {
        Some(Some(d)) => {
            let json =
                serde_json::to_string(d).map_err(|e| ApiError::bad_request(e.to_string()))?;
            s.client.set_queue_defaults(&queue, Some(&json)).await?
        }
        Some(None) => s.client.set_queue_defaults(&queue, None).await?,
        None => {}
    }
    s.defaults_cache.lock().unwrap().remove(queue.as_str());
    let st = s.client.stats(&queue).await?;
    Ok(Json(stats_json(&st)).into_response())
}

/// `GET /queues`: every known queue for an admin; for a tenant key the queues it may use where
/// its tenant has tasks (or that its key lists), each with its own counts only.
#[utoipa::path(
    get,
    path = "/api/v1/queues",
    tag = "queues",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The queues.", body = QueuesJson),
        KeyErrors,
    ),
)]
pub(crate) async fn list_queues(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
) -> ApiResult {
    let mut names = s.client.queues().await?;
    names.retain(|n| caller.may_use_queue(n));
    let stats = futures_join(&s.client, &names).await?;
    let listed = |st: &&orq::QueueStats| match &caller.scope {
        crate::auth::Scope::Admin => true,
        crate::auth::Scope::Tenant { tenant, queues } => {
            queues.is_some() || st.tenants.iter().any(|t| t.tenant == *tenant)
        }
    };
    let queues: Vec<_> = stats
        .iter()
        .filter(listed)
        .map(|st| stats_view(st, &caller))
        .collect();
    Ok(Json(QueuesJson { queues }).into_response())
}

async fn futures_join(
    client: &Client,
    names: &[String],
) -> Result<Vec<orq::QueueStats>, orq::Error> {
    let mut out = Vec::with_capacity(names.len());
    let mut set = tokio::task::JoinSet::new();
    for (i, n) in names.iter().enumerate() {
        let c = client.clone();
        let n = n.clone();
        set.spawn(async move { (i, c.stats(&n).await) });
    }
    let mut slots: Vec<Option<orq::QueueStats>> = vec![None; names.len()];
    while let Some(joined) = set.join_next().await {
        let (i, r) = joined.map_err(|e| orq::Error::protocol("stats", e.to_string()))?;
        slots[i] = Some(r?);
    }
    out.extend(slots.into_iter().flatten());
    Ok(out)
}

/// A queue's counts per status and tenant, cumulative totals, paused, aging step, defaults.
#[utoipa::path(
    get,
    path = "/api/v1/queues/{queue}",
    tag = "queues",
    security(("bearer" = [])),
    params(QueueName),
    responses(
        (status = 200, description = "The queue.", body = QueueStatsJson),
        QueueLookupErrors,
    ),
)]
pub(crate) async fn queue_stats(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    QueuePath(queue): QueuePath,
) -> ApiResult {
    caller.check_queue(&queue)?;
    if !s.client.queues().await?.iter().any(|q| q == queue.as_str()) {
        return Err(ApiError::not_found(format!("no queue named {queue}")));
    }
    let st = s.client.stats(&queue).await?;
    Ok(Json(stats_view(&st, &caller)).into_response())
}
