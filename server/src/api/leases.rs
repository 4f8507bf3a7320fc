//! The worker protocol: HTTP workers (any language) lease tasks, heartbeat, and report each
//! lease's outcome (complete, fail, release) with its token, through the same transition
//! scripts as the Rust worker (`orq::ops`). Admin and worker keys only ([`Caller::require_worker`],
//! by the `authenticate_worker` middleware); a worker key limited to some queues is refused the
//! others (403). Every report is safe to send again with the same token: the second answers
//! `already_applied`. A token that no longer holds the task answers 409 `lease_lost`, a cancelled
//! task 409 `cancelled`.

use super::*;
use crate::error::ErrorDetail;
use crate::model::{
    CompleteBody, CompleteManyBody, CompleteManyJson, FailBody, HeartbeatBody, HeartbeatJson,
    ItemReportJson, LeaseBody, LeasedTaskJson, LeasesJson, ReleaseBody, ReportJson,
    COMPLETE_MANY_BODY_MAX_BYTES, COMPLETE_MANY_MAX, ERROR_MAX_BYTES, REPORT_BODY_MAX_BYTES,
    RESULT_MAX_BYTES,
};
use crate::openapi_errors::{LeaseErrors, ReportErrors};
use crate::pull::{self, PullRequest, LEASE_QUEUES_MAX, LEASE_WAIT_MS_MAX};
use orq::ops::{self, LEASE_BATCH_MAX, LEASE_TENANTS_MAX};
use orq::task::{LEASE_MS_MAX, LEASE_MS_MIN};

/// Largest body of a lease call (bytes).
const LEASE_BODY_MAX_BYTES: usize = SMALL_BODY_MAX_BYTES;

/// Lease up to `count` tasks of some queues; wait up to `wait_ms` for work when none is ready.
#[utoipa::path(
    post,
    path = "/api/v1/leases",
    tag = "workers",
    security(("bearer" = [])),
    request_body = LeaseBody,
    responses(
        (status = 200, description = "The leased tasks (none when the wait ended without work).",
            body = LeasesJson),
        LeaseErrors,
    ),
)]
pub(crate) async fn lease(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    ApiJson(body): ApiJson<LeaseBody, LEASE_BODY_MAX_BYTES>,
) -> ApiResult {
    let count = body.count.unwrap_or(1);
    if !(1..=LEASE_BATCH_MAX as u64).contains(&count) {
        return Err(ApiError::bad_request(format!(
            "count: must be between 1 and {LEASE_BATCH_MAX}"
        )));
    }
    let wait_ms = body.wait_ms.unwrap_or(0);
    if wait_ms > LEASE_WAIT_MS_MAX {
        return Err(ApiError::bad_request(format!(
            "wait_ms: must be between 0 and {LEASE_WAIT_MS_MAX}"
        )));
    }
    if body.queues.is_empty() || body.queues.len() > LEASE_QUEUES_MAX {
        return Err(ApiError::bad_request(format!(
            "queues: name 1 to {LEASE_QUEUES_MAX} queues"
        )));
    }
    let mut queues: Vec<Name> = Vec::with_capacity(body.queues.len());
    for q in body.queues {
        caller.check_queue(&q)?;
        if !queues.contains(&q) {
            queues.push(q);
        }
    }
    let mut asked: Vec<String> = Vec::new();
    if let Some(ts) = body.tenants {
        if ts.is_empty() || ts.len() > LEASE_TENANTS_MAX {
            return Err(ApiError::bad_request(format!(
                "tenants: name 1 to {LEASE_TENANTS_MAX} tenants (leave it out for every tenant)"
            )));
        }
        for t in ts {
            if !asked.iter().any(|a| a == t.as_str()) {
                asked.push(t.to_string());
            }
        }
    }
    let tenants = caller.lease_tenants(&asked)?;
    s.queues_cache.check(&s.client, &*s.clock, &queues).await?;
    // A waiting call holds one of its key's slots until it answers; a key at its cap gets a 429
    // (no wait is ever refused to a call that does not wait).
    let _waiting = if wait_ms > 0 {
        Some(s.lease_waits.take(&caller).ok_or_else(|| {
            ApiError::limited(
                format!(
                    "wait_ms: this key has {} lease calls waiting for work, the most one key may; \
                     retry later or lease without waiting",
                    s.lease_waits.max()
                ),
                1,
            )
        })?)
    } else {
        None
    };
    let req = PullRequest {
        worker: &body.worker,
        queues: &queues,
        tenants: &tenants,
        count: count as usize,
        wait_ms,
    };
    let tasks = pull::lease(&s.client, &*s.clock, req, &s.shutdown).await?;
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        let (queue, id) = (task.queue.clone(), task.id.clone());
        let token = task.lease.as_ref().map(|l| l.token.clone());
        match LeasedTaskJson::from_leased(task) {
            Some(t) => out.push(t),
            // Only a store written past the API holds a payload that is not JSON: no worker
            // of this protocol could take it.
            None => {
                let bad = ops::CorruptLease {
                    id,
                    token: token.unwrap_or_default(),
                    error: orq::Error::Invalid {
                        op: "lease",
                        message: "payload: not JSON".into(),
                    },
                };
                ops::fail_corrupt(&**s.client.store(), &queue, bad).await;
            }
        }
    }
    Ok(Json(LeasesJson { tasks: out }).into_response())
}

/// Extend a lease: the deadline becomes now plus `extend_ms` (default the task's `lease_ms`).
#[utoipa::path(
    post,
    path = "/api/v1/leases/{id}/heartbeat",
    tag = "workers",
    security(("bearer" = [])),
    params(TaskId),
    request_body = HeartbeatBody,
    responses(
        (status = 200, description = "The lease is held until the new deadline.",
            body = HeartbeatJson),
        ReportErrors,
    ),
)]
pub(crate) async fn heartbeat(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    TaskIdPath(id): TaskIdPath,
    ApiJson(body): ApiJson<HeartbeatBody, LEASE_BODY_MAX_BYTES>,
) -> ApiResult {
    authorize_report(&s, &caller, &body.queue, &id).await?;
    let extend_ms = body.extend_ms.unwrap_or(0);
    if body.extend_ms.is_some() && !(LEASE_MS_MIN..=LEASE_MS_MAX).contains(&extend_ms) {
        return Err(ApiError::bad_request(format!(
            "extend_ms: must be between {LEASE_MS_MIN} and {LEASE_MS_MAX}"
        )));
    }
    let store = &**s.client.store();
    let (now, deadline) = ops::heartbeat(store, &body.queue, &id, &body.token, extend_ms).await?;
    Ok(Json(HeartbeatJson {
        lease_expires_at: crate::model::format_time_ms(deadline),
        lease_left_ms: deadline.saturating_sub(now),
    })
    .into_response())
}

/// A handler's result as the store keeps it (`null` when absent), refused with 413 when larger
/// than `RESULT_MAX_BYTES` and 400 when not readable JSON; `field` names it in the error.
fn checked_result<'a>(
    field: &str,
    result: Option<&'a serde_json::value::RawValue>,
) -> Result<&'a str, ApiError> {
    let result = result.map_or("null", |r| r.get());
    if result.len() > RESULT_MAX_BYTES {
        return Err(ApiError::too_large(format!(
            "{field}: larger than {RESULT_MAX_BYTES} bytes"
        )));
    }
    crate::model::readable_json(field, result)?;
    Ok(result)
}

/// Complete a leased task with the handler's `result`.
#[utoipa::path(
    post,
    path = "/api/v1/leases/{id}/complete",
    tag = "workers",
    security(("bearer" = [])),
    params(TaskId),
    request_body = CompleteBody,
    responses(
        (status = 200, description = "Completed (now, or by an earlier call with this token).",
            body = ReportJson),
        ReportErrors,
    ),
)]
pub(crate) async fn complete(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    TaskIdPath(id): TaskIdPath,
    ApiJson(body): ApiJson<CompleteBody, REPORT_BODY_MAX_BYTES>,
) -> ApiResult {
    caller.check_queue(&body.queue)?;
    let result = checked_result("result", body.result.as_deref())?;
    authorize_report(&s, &caller, &body.queue, &id).await?;
    let store = &**s.client.store();
    let r = ops::complete(store, &body.queue, &id, &body.token, result).await?;
    reported(id, r)
}

/// Complete several leases of one queue in one call (one script call in the store): each
/// completion is applied or refused on its own, and the answer says which, in order. A refusal
/// of the whole call (a 503, a 403) applies none; sending the same completions again is safe.
#[utoipa::path(
    post,
    path = "/api/v1/leases/complete",
    tag = "workers",
    security(("bearer" = [])),
    request_body = CompleteManyBody,
    responses(
        (status = 200, description = "One report per completion, in order.",
            body = CompleteManyJson),
        ReportErrors,
    ),
)]
pub(crate) async fn complete_many(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    ApiJson(body): ApiJson<CompleteManyBody, COMPLETE_MANY_BODY_MAX_BYTES>,
) -> ApiResult {
    caller.check_queue(&body.queue)?;
    let n = body.completions.len();
    if n == 0 || n > COMPLETE_MANY_MAX {
        return Err(ApiError::bad_request(format!(
            "completions: send 1 to {COMPLETE_MANY_MAX}"
        )));
    }
    let mut batch = Vec::with_capacity(n);
    for (i, c) in body.completions.into_iter().enumerate() {
        let id = c.id.to_ascii_uppercase();
        if !orq::keys::is_valid_task_id(&id) {
            return Err(ApiError::bad_request(format!(
                "completions[{i}].id: a task id is a 26-character ULID"
            )));
        }
        let result = checked_result(&format!("completions[{i}].result"), c.result.as_deref())?;
        batch.push(ops::Completion {
            id,
            token: c.token.to_string(),
            result: result.to_string(),
        });
    }
    // A key limited to some tenants: the completions of other tenants' tasks are answered
    // `not_found` each (as their own `/complete` would be) and never reach the store.
    let refused: Vec<Option<ApiError>> = futures_util::future::join_all(
        batch
            .iter()
            .map(|c| authorize_report(&s, &caller, &body.queue, &c.id)),
    )
    .await
    .into_iter()
    .map(Result::err)
    .collect();
    // A store failure of a check is the call's, as any store failure is (nothing applied).
    if let Some(e) = refused
        .iter()
        .flatten()
        .find(|e| e.code != ErrorCode::NotFound)
    {
        return Err(e.clone());
    }
    let (allowed, denied): (Vec<_>, Vec<_>) = batch
        .into_iter()
        .zip(refused)
        .enumerate()
        .partition(|(_, (_, r))| r.is_none());
    let allowed: Vec<(usize, ops::Completion)> =
        allowed.into_iter().map(|(i, (c, _))| (i, c)).collect();
    let sent: Vec<ops::Completion> = allowed.iter().map(|(_, c)| c.clone()).collect();
    let store = &**s.client.store();
    let results = if sent.is_empty() {
        Vec::new()
    } else {
        ops::complete_batch(store, &body.queue, &sent).await?.1
    };
    let mut answers: Vec<Option<(ops::Completion, Result<ops::Reported, ApiError>)>> =
        (0..n).map(|_| None).collect();
    for ((i, c), r) in allowed.into_iter().zip(results) {
        answers[i] = Some((c, r.map_err(ApiError::from)));
    }
    for (i, (c, e)) in denied {
        answers[i] = Some((c, Err(e.expect("partitioned on refusals"))));
    }
    let reports = answers
        .into_iter()
        .map(|a| a.expect("every completion is answered"))
        .map(|(c, r)| match r {
            Ok(r) => ItemReportJson {
                id: c.id,
                reported: Some(r.into()),
                error: None,
            },
            Err(e) => ItemReportJson {
                id: c.id,
                reported: None,
                error: Some(ErrorDetail {
                    code: e.code,
                    message: e.message,
                }),
            },
        })
        .collect();
    Ok(Json(CompleteManyJson { reports }).into_response())
}

/// Fail a leased task: retried with its backoff while it has retries left, or (`permanent`, or
/// out of retries) moved to the dead-letter queue.
#[utoipa::path(
    post,
    path = "/api/v1/leases/{id}/fail",
    tag = "workers",
    security(("bearer" = [])),
    params(TaskId),
    request_body = FailBody,
    responses(
        (status = 200, description = "Failed (now, or by an earlier call with this token).",
            body = ReportJson),
        ReportErrors,
    ),
)]
pub(crate) async fn fail(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    TaskIdPath(id): TaskIdPath,
    ApiJson(body): ApiJson<FailBody, REPORT_BODY_MAX_BYTES>,
) -> ApiResult {
    caller.check_queue(&body.queue)?;
    if body.error.is_empty() {
        return Err(ApiError::bad_request(
            "error: required (say what went wrong)",
        ));
    }
    if body.error.len() > ERROR_MAX_BYTES {
        return Err(ApiError::bad_request(format!(
            "error: longer than {ERROR_MAX_BYTES} bytes"
        )));
    }
    authorize_report(&s, &caller, &body.queue, &id).await?;
    let store = &**s.client.store();
    let jitter = s.client.entropy().unit();
    let r = ops::fail(
        store,
        &body.queue,
        &id,
        &body.token,
        &body.error,
        !body.permanent,
        jitter,
    )
    .await?;
    reported(id, r)
}

/// Give a leased task back without spending an attempt (a worker shutting down): it is ready
/// again at once.
#[utoipa::path(
    post,
    path = "/api/v1/leases/{id}/release",
    tag = "workers",
    security(("bearer" = [])),
    params(TaskId),
    request_body = ReleaseBody,
    responses(
        (status = 200, description = "Released (now, or by an earlier call with this token).",
            body = ReportJson),
        ReportErrors,
    ),
)]
pub(crate) async fn release(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    TaskIdPath(id): TaskIdPath,
    ApiJson(body): ApiJson<ReleaseBody, LEASE_BODY_MAX_BYTES>,
) -> ApiResult {
    authorize_report(&s, &caller, &body.queue, &id).await?;
    let store = &**s.client.store();
    let r = ops::release(store, &body.queue, &id, &body.token).await?;
    reported(id, r)
}

/// The queue and tenant rules of a report (heartbeat, complete, fail, release) on task `id` of
/// `queue`: the same as a lease's. A key limited to some queues is refused the others (403); a
/// key limited to some tenants reports only on their tasks, and a report on another tenant's
/// task answers 404 exactly as for a task that does not exist (the token alone does not say
/// whose task it is). The tenant is read from the task (a task's tenant never changes), one
/// store call for keys with a tenant limit only.
async fn authorize_report(
    s: &AppState,
    caller: &Caller,
    queue: &str,
    id: &str,
) -> Result<(), ApiError> {
    caller.check_queue(queue)?;
    let Some(allowed) = caller.report_tenants() else {
        return Ok(());
    };
    match s.client.get(Some(queue), id).await {
        Ok(task) if allowed.contains(&task.tenant) => Ok(()),
        Ok(_) | Err(orq::Error::NotFound { .. }) => Err(ApiError::task_not_found(id)),
        Err(e) => Err(e.into()),
    }
}

/// The answer of a complete, fail or release of task `id` that ended as `r`.
fn reported(id: String, r: ops::Reported) -> ApiResult {
    Ok(Json(ReportJson {
        id,
        reported: r.into(),
    })
    .into_response())
}
