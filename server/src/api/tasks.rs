//! The task and dead-letter routes: submit (one or a batch), read, list, cancel; list, replay
//! (one or in bulk) and purge dead tasks.

use super::*;
use tracing::Instrument;

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
    params(TraceHeaders),
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
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<SubmitBody, SUBMIT_BODY_MAX_BYTES>,
) -> ApiResult {
    let body = authorize_submit(&caller, body)?;
    let mut spec = spec_of(&s, body).await?;
    s.admit(std::slice::from_ref(&spec))?;
    s.admit_queues(&caller, &[&spec.queue]).await?;
    // Disabled (a no-op) unless this process exports traces (crate::telemetry).
    let span = tracing::info_span!(target: orq::trace::TARGET, "orq.submit",
        otel.kind = "server", orq.queue = %spec.queue, orq.tenant = %spec.tenant,
        orq.type = %spec.task_type, orq.task_id = tracing::field::Empty);
    crate::telemetry::continue_trace(&span, &headers);
    spec.trace = crate::telemetry::submitted_context(&span, &headers);
    let done = s.client.submit(spec).instrument(span.clone()).await?;
    span.record("orq.task_id", done.task.id.as_str());
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
    params(TraceHeaders),
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
    headers: axum::http::HeaderMap,
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
    // The queues a tenant key brings into existence: all of the batch's, or none.
    let queues: std::collections::BTreeSet<&str> =
        specs.iter().map(|sp| sp.queue.as_str()).collect();
    s.admit_queues(&caller, &queues.into_iter().collect::<Vec<_>>())
        .await?;
    let span = tracing::info_span!(target: orq::trace::TARGET, "orq.submit_batch",
        otel.kind = "server", orq.tasks = specs.len());
    crate::telemetry::continue_trace(&span, &headers);
    let trace = crate::telemetry::submitted_context(&span, &headers);
    for spec in &mut specs {
        spec.trace = trace.clone();
    }
    let done = s.client.submit_batch(specs).instrument(span).await?;
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

/// The W3C Trace Context headers a submit continues (README "Tracing"). Never an error: a
/// `traceparent` that breaks the W3C rules, or two of them, is ignored (a new trace starts);
/// several `tracestate` headers are one list, cut as W3C says (at most 32 members, 512 bytes).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // read from the HeaderMap by crate::telemetry; here for the OpenAPI document
pub(crate) struct TraceHeaders {
    /// `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`: the caller's span, which the
    /// submit's span (or, when the API exports no traces, the stored task) continues.
    #[param(value_type = String, required = false)]
    traceparent: Option<String>,
    /// Vendor list members (`key=value`, comma-separated) carried with the trace.
    #[param(value_type = String, required = false)]
    tracestate: Option<String>,
}

/// `?queue=` of by-id routes.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ById {
    /// The task's queue (without it, the queues the key may use are searched, at most 64: more
    /// is a 400 asking for it).
    #[param(value_type = Option<String>, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    queue: Option<Name>,
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
    // Without a queue, only the queues the caller may use are searched (a tenant key with a
    // queues list: those), at most orq::client::LOOKUP_QUEUES_MAX (400 asking for the queue
    // beyond).
    let task = match (queue, &caller.scope) {
        (
            None,
            crate::auth::Scope::Tenant {
                queues: Some(own), ..
            },
        ) => {
            let among: Vec<String> = own.iter().cloned().collect();
            s.client.get_among(&among, id).await?
        }
        _ => s.client.get(queue, id).await?,
    };
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
    let queue = q.queue;
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
    let queue = q.queue;
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
    #[param(value_type = Option<String>, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    queue: Option<Name>,
    /// Only this tenant's tasks.
    #[param(value_type = Option<String>, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    tenant: Option<Name>,
    /// Only tasks in this status.
    #[param(value_type = Option<crate::openapi::StatusName>)]
    status: Option<String>,
    /// Only tasks of this type.
    #[serde(rename = "type")]
    #[param(value_type = Option<String>, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    task_type: Option<Name>,
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
    let queue = p
        .queue
        .take()
        .map_or_else(|| "default".into(), String::from);
    caller.check_queue(&queue)?;
    let tenant = caller.tenant_for("tenant", p.tenant.take().map(String::from))?;
    let limit = crate::model::parse_limit(
        p.limit.as_deref(),
        u64::from(LIST_LIMIT_DEFAULT),
        u64::from(orq::client::LIST_LIMIT_MAX),
    )? as u32;
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
            tenant,
            task_type: p.task_type.map(String::from),
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
    let queue = q.queue;
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
    request_body(content = Option<BulkReplayBody>, description = "Optional: no body is `{}`."),
    responses(
        (status = 200, description = "How many were replayed.", body = ReplayedJson),
        BodyErrors,
    ),
)]
pub(crate) async fn replay_bulk(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    ApiJsonOrEmpty(mut b): ApiJsonOrEmpty<BulkReplayBody, SMALL_BODY_MAX_BYTES>,
) -> ApiResult {
    let queue = b
        .queue
        .take()
        .map_or_else(|| "default".into(), String::from);
    caller.check_queue(&queue)?;
    let tenant = caller.tenant_for("tenant", b.tenant.take().map(String::from))?;
    let limit = b.limit.unwrap_or(REPLAY_LIMIT_DEFAULT);
    if limit == 0 || limit > orq::client::REPLAY_LIMIT_MAX {
        return Err(ApiError::bad_request(format!(
            "limit: must be from 1 to {}",
            orq::client::REPLAY_LIMIT_MAX
        )));
    }
    let r = s
        .client
        .replay_bulk(&queue, tenant.as_deref(), b.task_type.as_deref(), limit)
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
    let queue = q.queue;
    s.client.purge(queue.as_deref(), &id).await?;
    Ok(Json(PurgedJson { id, purged: true }).into_response())
}
