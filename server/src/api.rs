//! The HTTP API under `/api/v1`: submit, read, list, cancel, DLQ, queue stats, health, the worker
//! protocol ([`leases`]: lease, heartbeat, complete, fail, release); the live
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
//! did not exist). Worker keys may use the worker protocol's routes only (403 elsewhere), and
//! tenant keys may not use them.

use crate::auth::{Auth, Caller};
use crate::error::{ApiError, ErrorCode};
use crate::extract::{
    ApiJson, ApiJsonOrEmpty, ApiQuery, NoQuery, QueuePath, QueueTenantPath, TaskIdPath,
    SMALL_BODY_MAX_BYTES,
};
use crate::handlers::{check_payload, HttpAllow};
use crate::live::{self, Live};
use crate::model::{
    BatchBody, BulkReplayBody, CountsJson, DeletedQueueJson, DrainedJson, HealthJson, PausedJson,
    PurgedJson, QueueDefaults, QueueSettingsBody, QueueStatsJson, QueuesJson, ReplayedJson,
    SubmitBody, TaskJson, TasksJson, TenantBody, TenantEntryJson, TenantJson, TenantNameJson,
    TenantsJson,
};
use crate::names::Name;
use crate::openapi::{QueueName, TaskId, TenantName, Unavailable};
use crate::openapi_errors::{
    BodyErrors, KeyErrors, PurgeErrors, QueueDeleteErrors, QueueErrors, QueueLookupErrors,
    SubmitErrors, TaskChangeErrors, TaskErrors,
};
use crate::ratelimit::SubmitLimiter;
use crate::{dashboard, simulations, timelines};
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
/// Default of `--tenant-queues-max`: the queues one tenant's keys may bring into existence.
pub const TENANT_QUEUES_MAX_DEFAULT: u64 = 20;
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
    pub dashboard: Option<Arc<dashboard::Source>>,
    /// The directory of simulation timelines (`None`: the `/timelines` routes answer 404).
    pub timelines: Option<Arc<PathBuf>>,
    /// Simulation runs (`None`: the `/simulations` routes answer 503).
    pub simulator: Option<Arc<crate::simulations::Simulator>>,
    /// Cancelled when the server shuts down: ends the open event streams, so graceful shutdown
    /// does not wait for their clients.
    pub shutdown: CancellationToken,
    /// API keys, or none (every request is an admin).
    pub auth: Auth,
    /// The per-tenant submit rate limit, across queues (`None`: unlimited).
    pub submit_limit: Option<SubmitLimiter>,
    /// The queue registry as last read by the worker protocol's lease calls.
    pub queues_cache: crate::pull::QueuesCache,
    /// Answer only requests to loopback host names (a keyless loopback orq: `loopback_host.rs`).
    pub loopback_hosts_only: bool,
    /// Lease calls waiting for work, per key ([`crate::key_slots::LEASE_WAITS_PER_KEY_MAX`]).
    pub lease_waits: crate::key_slots::KeySlots,
    /// Most queues one tenant's keys may create (`--tenant-queues-max`).
    pub tenant_queues_max: u64,
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
        .route(
            "/api/v1/queues/{queue}",
            get(queue_stats).delete(delete_queue),
        )
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
        .route(
            "/api/v1/simulations",
            get(simulations::status).post(simulations::run),
        )
        .route("/metrics", get(crate::metrics::prometheus))
        .route_layer(axum::middleware::from_fn_with_state(
            state.auth.clone(),
            crate::auth::authenticate,
        ));
    // The worker protocol: admin and worker keys only.
    let workers = Router::new()
        .route("/api/v1/leases", post(leases::lease))
        .route("/api/v1/leases/complete", post(leases::complete_many))
        .route("/api/v1/leases/{id}/heartbeat", post(leases::heartbeat))
        .route("/api/v1/leases/{id}/complete", post(leases::complete))
        .route("/api/v1/leases/{id}/fail", post(leases::fail))
        .route("/api/v1/leases/{id}/release", post(leases::release))
        .route_layer(axum::middleware::from_fn_with_state(
            state.auth.clone(),
            crate::auth::authenticate_worker,
        ));
    Router::new()
        .route("/api/v1/healthz", get(healthz))
        .route("/api/v1/readyz", get(readyz))
        .route("/api/v1/openapi.json", get(crate::openapi::openapi_json))
        .merge(protected)
        .merge(workers)
        .fallback(fallback)
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                ErrorCode::MethodNotAllowed,
                "method not allowed on this route",
            )
        })
        .layer(DefaultBodyLimit::max(BODY_MAX_BYTES))
        // Outermost: a cross-site write, or a request to a name that is not loopback's on a
        // keyless orq, is refused before anything else looks at it.
        .layer(axum::middleware::from_fn(
            crate::cross_origin::refuse_cross_site,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.loopback_hosts_only,
            crate::loopback_host::refuse_other_hosts,
        ))
        .layer(axum::middleware::from_fn(crate::security_headers::add)) // on every answer
        .with_state(state)
}

type ApiResult = Result<Response, ApiError>;

/// Paths no route matched: under `/api` a typed 404, elsewhere the dashboard's files.
async fn fallback(State(s): State<AppState>, req: Request) -> Response {
    let path = req.uri().path();
    if path == "/api" || path.starts_with("/api/") {
        return ApiError::not_found("no such route").into_response();
    }
    dashboard::serve(s.dashboard.as_deref(), req).await
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
            simulator: None,
            shutdown: CancellationToken::new(),
            auth: Auth::Off,
            submit_limit: Some(SubmitLimiter::new(
                crate::ratelimit::RATE_PER_S_DEFAULT,
                crate::ratelimit::BURST_DEFAULT,
                clock.clone(),
            )),
            queues_cache: Default::default(),
            loopback_hosts_only: false,
            lease_waits: crate::key_slots::KeySlots::new(crate::key_slots::LEASE_WAITS_PER_KEY_MAX),
            tenant_queues_max: TENANT_QUEUES_MAX_DEFAULT,
        }
    }

    /// Answer only requests whose `Host` is a loopback name (`loopback_host.rs`); for a keyless
    /// orq on loopback.
    pub fn with_loopback_hosts_only(mut self, on: bool) -> Self {
        self.loopback_hosts_only = on;
        self
    }

    /// Require the API keys of `auth` on every route but health, readiness and the dashboard.
    pub fn with_auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    /// Limit submits per tenant, across queues, with `limiter` (`None`: no limit).
    pub fn with_submit_limit(mut self, limiter: Option<SubmitLimiter>) -> Self {
        self.submit_limit = limiter;
        self
    }

    /// Let at most `n` queues be created by one tenant's keys.
    pub fn with_tenant_queues_max(mut self, n: u64) -> Self {
        self.tenant_queues_max = n;
        self
    }

    /// The queue rules of a submit to `queues` (a batch's distinct queues) by `caller`: a
    /// tenant key that may use every queue creates the queues that do not exist yet within its
    /// tenant's allowance ([`AppState::tenant_queues_max`]), all of them or none (403 naming
    /// them). An admin's submit, and a tenant key's to a queue its `queues` list names, create
    /// queues as they always did (at their first task). The registry is read through the worker
    /// protocol's cache, so a submit to known queues costs no store call.
    pub(crate) async fn admit_queues(
        &self,
        caller: &Caller,
        queues: &[&str],
    ) -> Result<(), ApiError> {
        let crate::auth::Scope::Tenant {
            tenant,
            queues: None,
        } = &caller.scope
        else {
            return Ok(());
        };
        let mut missing = Vec::new();
        for q in queues {
            if is_valid_name(q)
                && !self
                    .queues_cache
                    .knows(&self.client, &*self.clock, q)
                    .await?
            {
                missing.push(*q);
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        match self
            .client
            .create_queues(&missing, tenant, self.tenant_queues_max)
            .await?
        {
            orq::client::Created::Refused { count } => {
                let named = match missing.as_slice() {
                    [one] => format!("no queue named {one}"),
                    more => format!(
                        "{} of this batch's queues do not exist ({}{})",
                        more.len(),
                        more.iter().take(3).copied().collect::<Vec<_>>().join(", "),
                        if more.len() > 3 { ", ..." } else { "" }
                    ),
                };
                Err(ApiError::forbidden(format!(
                    "queue: {named}, and tenant {tenant} has created {count} of the {} queues \
                     its keys may (--tenant-queues-max); submit to existing queues, or ask an \
                     admin to create them or delete unused ones",
                    self.tenant_queues_max
                )))
            }
            _ => Ok(()),
        }
    }

    /// Spend the submit rate tokens of `specs` (one per task, per tenant across its queues), all
    /// or none: 429 with `Retry-After` when a tenant is over its rate.
    fn admit(&self, specs: &[orq::TaskSpec]) -> Result<(), ApiError> {
        let Some(limiter) = &self.submit_limit else {
            return Ok(());
        };
        let mut counts: std::collections::BTreeMap<&str, u64> = Default::default();
        for sp in specs {
            *counts.entry(&sp.tenant).or_default() += 1;
        }
        let wants: Vec<(&str, u64)> = counts.iter().map(|(&t, &n)| (t, n)).collect();
        limiter.take_all(&wants).map_err(|wait_ms| {
            let who = match counts.keys().next() {
                Some(t) if counts.len() == 1 => format!("tenant {t}"),
                _ => "a tenant of this batch".to_string(),
            };
            ApiError::limited(
                format!(
                    "{who} is submitting faster than {} tasks/s (burst {}) across its queues; retry later",
                    limiter.rate_per_s(),
                    limiter.burst()
                ),
                wait_ms.div_ceil(1000),
            )
        })
    }

    /// Serve the dashboard's static export from `dir` at `/`.
    pub fn with_dashboard(self, dir: PathBuf) -> Self {
        self.with_dashboard_source(dashboard::Source::Dir(dir))
    }

    /// Serve the dashboard from `source` (a directory or the embedded export) at `/`.
    pub fn with_dashboard_source(mut self, source: dashboard::Source) -> Self {
        self.dashboard = Some(Arc::new(source));
        self
    }

    /// Serve the simulation timelines of `dir` under `/api/v1/timelines`.
    pub fn with_timelines(mut self, dir: PathBuf) -> Self {
        self.timelines = Some(Arc::new(dir));
        self
    }

    /// Run simulations from `/api/v1/simulations` with `simulator`.
    pub fn with_simulator(mut self, simulator: crate::simulations::Simulator) -> Self {
        self.simulator = Some(Arc::new(simulator));
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

pub(crate) mod leases;
pub(crate) mod queues;
mod tasks;
pub use queues::DRAIN_TIMEOUT_MS_MAX;
pub(crate) use queues::*;
pub(crate) use tasks::*;
