//! The queue routes: list queues, a queue's stats and tenants, a tenant's limits, pause, resume,
//! drain and settings.

use super::*;

/// Tenants in `GET /queues/{queue}` (the first, by name) and the default page of
/// `GET /queues/{queue}/tenants`.
pub const TENANTS_PAGE_DEFAULT: u64 = 100;

/// The stats read for `caller`: a tenant key's own tenant only; an admin's first `tenants`
/// tenants from `offset` (by name). A read's work in the store grows with its tenants (each is
/// about 12 Redis calls inside one script call, which blocks Redis while it runs), so every read
/// is bounded.
fn query_for(caller: &Caller, tenants: u64, offset: u64) -> orq::StatsQuery {
    match caller.tenant() {
        Some(own) => orq::StatsQuery {
            tenants: 1,
            only: Some(own.to_string()),
            ..orq::StatsQuery::default()
        },
        None => orq::StatsQuery {
            tenants,
            offset,
            ..orq::StatsQuery::default()
        },
    }
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
        tenants_total: st.tenants_total,
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
    v.tenants_total = v.tenants.len() as u64;
    v
}

/// Whether `caller` may know that the queue of `st` exists: an admin always; a tenant key with
/// a queues list for every queue it names (its queues, whether or not they exist yet: `st` of a
/// queue it may not use never reaches here); a tenant key without one only where its tenant is
/// known (it submitted there, or an admin set its limits there). So a tenant key cannot tell a
/// queue only other tenants use from one that does not exist.
fn tenant_sees(caller: &Caller, st: &orq::QueueStats) -> bool {
    match &caller.scope {
        crate::auth::Scope::Admin => true,
        crate::auth::Scope::Tenant { tenant, queues } => {
            queues.is_some() || st.tenants.iter().any(|t| t.tenant == *tenant)
        }
        // Refused before any handler (`auth::authenticate`); sees nothing if it came here.
        crate::auth::Scope::Worker { .. } => false,
    }
}

/// A tenant's own entry, as a tenant key sees it (`share` null).
fn own_tenant_json(t: &orq::TenantStats) -> TenantJson {
    let mut v = TenantJson::from(t);
    v.share = None;
    v
}

/// Query of `GET /queues/{queue}/tenants`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct TenantsParams {
    /// Page size (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
    /// The `next_cursor` of the previous page (opaque).
    cursor: Option<String>,
}

/// A page of a queue's tenants, by name: weight, limits, counts, leases served, share of service, completions/s.
#[utoipa::path(
    get,
    path = "/api/v1/queues/{queue}/tenants",
    tag = "queues",
    security(("bearer" = [])),
    params(QueueName, TenantsParams),
    responses(
        (status = 200, description = "A page of the tenants, by name.", body = TenantsJson),
        QueueErrors,
    ),
)]
pub(crate) async fn list_tenants(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(p): ApiQuery<TenantsParams>,
    QueuePath(queue): QueuePath,
) -> ApiResult {
    caller.check_queue(&queue)?;
    let limit = crate::model::parse_limit(
        p.limit.as_deref(),
        TENANTS_PAGE_DEFAULT,
        orq::client::STATS_TENANTS_MAX,
    )?;
    let offset = match p.cursor.as_deref() {
        None => 0,
        Some(c) => c
            .parse::<u64>()
            .ok()
            .filter(|n| *n <= orq::client::STATS_OFFSET_MAX)
            .ok_or_else(|| ApiError::bad_request("cursor: not a cursor of this listing"))?,
    };
    let st = s
        .client
        .stats_with(&queue, &query_for(&caller, limit, offset))
        .await?;
    let next = offset + st.tenants.len() as u64;
    let next_cursor =
        (caller.tenant().is_none() && st.tenants.len() as u64 == limit && next < st.tenants_total)
            .then(|| next.to_string());
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
        tenants_total: if caller.tenant().is_some() {
            tenants.len() as u64
        } else {
            st.tenants_total
        },
        tenants,
        next_cursor,
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
    // A tenant key with a queues list has exactly those queues (whether they exist yet or not,
    // so the answer tells nothing of other tenants); one without sees the queues where its
    // tenant is known.
    let names = match &caller.scope {
        crate::auth::Scope::Tenant {
            queues: Some(own), ..
        } => own.iter().cloned().collect(),
        _ => s.client.queues().await?,
    };
    let stats = stats_of_queues(&s.client, &names, &query_for(&caller, 0, 0)).await?;
    let queues: Vec<_> = stats
        .iter()
        .filter(|st| tenant_sees(&caller, st))
        .map(|st| stats_view(st, &caller))
        .collect();
    Ok(Json(QueuesJson { queues }).into_response())
}

/// The stats of each of `names` read with `query`, concurrently, in the order of `names`.
pub(crate) async fn stats_of_queues(
    client: &Client,
    names: &[String],
    query: &orq::StatsQuery,
) -> Result<Vec<orq::QueueStats>, orq::Error> {
    let mut out = Vec::with_capacity(names.len());
    let mut set = tokio::task::JoinSet::new();
    for (i, n) in names.iter().enumerate() {
        let c = client.clone();
        let n = n.clone();
        let query = query.clone();
        set.spawn(async move { (i, c.stats_with(&n, &query).await) });
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
    let missing = || ApiError::not_found(format!("no queue named {queue}"));
    let named = matches!(
        &caller.scope,
        crate::auth::Scope::Tenant {
            queues: Some(_),
            ..
        }
    );
    if !named && !s.client.queues().await?.iter().any(|q| q == queue.as_str()) {
        return Err(missing());
    }
    let st = s
        .client
        .stats_with(&queue, &query_for(&caller, TENANTS_PAGE_DEFAULT, 0))
        .await?;
    // A queue only other tenants use is, to a tenant key, exactly like one that does not exist.
    if !tenant_sees(&caller, &st) {
        return Err(missing());
    }
    Ok(Json(stats_view(&st, &caller)).into_response())
}

/// Delete a queue that holds no work (admin keys only): no queued, scheduled, retrying, leased
/// or dead task (purge or replay the DLQ first). Its finished tasks, its tenants' settings and
/// its keys are deleted and it leaves the queue list; a queue a tenant key created no longer
/// counts against that tenant's `--tenant-queues-max`. A submit racing the delete either keeps
/// the queue (409) or creates it anew.
#[utoipa::path(
    delete,
    path = "/api/v1/queues/{queue}",
    tag = "queues",
    security(("bearer" = [])),
    params(QueueName),
    responses(
        (status = 200, description = "Deleted (or, with `deleted` false, partly: ask again).",
            body = DeletedQueueJson),
        QueueDeleteErrors,
    ),
)]
pub(crate) async fn delete_queue(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    QueuePath(queue): QueuePath,
) -> ApiResult {
    caller.require_admin("deleting a queue")?;
    let answer = |deleted, finished| {
        Json(DeletedQueueJson {
            queue: queue.to_string(),
            deleted,
            finished_deleted: finished,
        })
        .into_response()
    };
    let r = s.client.delete_queue(&queue).await;
    s.queues_cache.forget();
    s.defaults_cache.lock().unwrap().remove(queue.as_str());
    match r? {
        orq::client::Deleted::Deleted { finished } => Ok(answer(true, finished)),
        orq::client::Deleted::More { finished } => Ok(answer(false, finished)),
        orq::client::Deleted::NotFound => {
            Err(ApiError::not_found(format!("no queue named {queue}")))
        }
        orq::client::Deleted::Busy {
            queued,
            scheduled,
            retrying,
            leased,
            dead,
        } => Err(ApiError::conflict(format!(
            "queue {queue} holds work: {queued} queued, {scheduled} scheduled, {retrying} \
             retrying, {leased} leased, {dead} dead; cancel or drain it and purge or replay its \
             dead tasks first"
        ))),
    }
}
