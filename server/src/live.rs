//! Live views for the dashboard, fed by the queues' event streams (`orq:{q}:events`):
//! `GET /api/v1/events` (Server-Sent Events), `GET /api/v1/queues/{queue}/metrics` (throughput
//! and latency over the last hour) and `GET /api/v1/queues/{queue}/workers`.
//!
//! One poller per [`AppState`] (not one per client) reads every known queue's stream every
//! [`POLL_MS`] while an SSE client is connected (every [`IDLE_POLLS`] × that without one) for the
//! entries after the last one it saw, folds them into per-queue metrics and
//! broadcasts them to the SSE clients, each of which filters by its own `?queue=`. The poller
//! stops when the last clone of its state is dropped.

use crate::api::AppState;
use crate::auth::Caller;
use crate::error::{ApiError, ErrorCode};
use crate::extract::{ApiQuery, NoQuery, QueuePath};
use crate::key_slots::{KeySlot, KeySlots, SSE_CLIENTS_PER_KEY_MAX};
use crate::names::Name;
use crate::openapi::QueueName;
use crate::openapi_errors::{QueueErrors, QueueLookupErrors};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::Stream;
use orq::client::{QueueEvent, EVENTS_PAGE_MAX};
use orq::{Client, Clock};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

mod metrics;
mod stream;
pub use metrics::{BucketSummary, Quantiles, QueueMetrics};
pub use stream::{messages, EventFilter, Message};

/// How often the poller reads each queue's event stream while an SSE client is connected (ms).
pub const POLL_MS: u64 = 250;
/// Without an SSE client, the poller reads the streams every `IDLE_POLLS`-th tick of
/// [`POLL_MS`] (every 2 s: only the metrics read them then, in buckets of [`BUCKET_MS`]). At
/// light load the reads were a fifth of a task's script calls (`bench/light.py`).
pub const IDLE_POLLS: u64 = 8;
/// The poller reads the queue list every `QUEUES_POLLS`-th tick of [`POLL_MS`] (every 2 s: a new
/// queue's events are then read from the oldest its stream holds), not on every tick.
pub const QUEUES_POLLS: u64 = 8;
/// Most pages of [`EVENTS_PAGE_MAX`] events the poller reads from one queue per poll, so one
/// busy queue cannot starve the others; a queue that writes more than
/// `POLL_PAGES_MAX × EVENTS_PAGE_MAX / POLL_MS` events/s for longer than its stream holds
/// (at least 10,000 events) loses events to the stream's trimming before the poller reads them.
pub const POLL_PAGES_MAX: usize = 10;
/// Most queues the poller follows (the first by name).
pub const QUEUES_MAX: usize = 1000;
/// Events the broadcast channel buffers for the slowest SSE client before it lags.
pub const BROADCAST_CAPACITY: usize = 4096;
/// Most SSE clients connected at once; beyond, `GET /events` answers 503.
pub const SSE_CLIENTS_MAX: usize = 256;
/// Interval of the SSE keep-alive comment (s).
pub const KEEP_ALIVE_S: u64 = 15;
/// Longest event id part of a `Last-Event-ID` (bytes): a sealed id is about 200 hex digits.
pub const LAST_EVENT_ID_MAX_BYTES: usize = 256;
/// Most entries resent after a `Last-Event-ID`.
pub const RESEND_MAX: usize = 1000;
/// Width of one metrics bucket (ms).
pub const BUCKET_MS: i64 = 10_000;
/// Buckets kept per queue: one hour.
pub const BUCKETS: usize = 360;
/// Most latency values kept per bucket and measure; beyond, a uniform reservoir sample of this
/// size stands for them (the maximum and the count stay exact).
pub const SAMPLE_MAX: usize = 4096;
/// Most ids of tasks seen `scheduled` remembered per queue (see [`QueueMetrics`]: `submitted`).
pub const SCHEDULED_TRACK_MAX: usize = 20_000;

/// One event of a stream as the poller broadcasts it, with its SSE `data` already serialised.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveEvent {
    /// The queue whose stream holds the entry.
    pub queue: String,
    /// The event's id, a stream id `<ms>-<n>` (`orq::decode::stream_events`).
    pub stream_id: String,
    /// The SSE event name: `task` for task transitions, `queue` for `paused`, `resumed`,
    /// `configured` and `tenant_configured`.
    pub class: &'static str,
    /// The task's tenant (or the configured tenant); empty for queue settings events.
    pub tenant: String,
    /// The SSE `data`: `{"queue": "q", "stream_id": "1700000000000-42", "kind": "leased",
    /// "ts": 1700000000000, "task_id": "01K..", "tenant": "t", "attempt": 1,
    /// "fields": {"w": "w1", "epoch": "1", "wait_ms": "12"}}`; `ts` is the store's clock in ms
    /// since the Unix epoch; `task_id` and `tenant` are null when the entry has none (queue
    /// settings events); `fields` are the kind-specific pairs, values as strings.
    pub data: String,
}

impl LiveEvent {
    /// The live form of `e`, an entry of `queue`'s stream.
    pub fn new(queue: &str, e: &QueueEvent) -> Self {
        let class = match e.kind.as_str() {
            "paused" | "resumed" | "configured" | "tenant_configured" => "queue",
            _ => "task",
        };
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let data = json!({
            "queue": queue,
            "stream_id": e.stream_id,
            "kind": e.kind,
            "ts": e.ts_ms,
            "task_id": opt(&e.task_id),
            "tenant": opt(&e.tenant),
            "attempt": e.attempt,
            "fields": e.fields,
        })
        .to_string();
        LiveEvent {
            queue: queue.to_string(),
            stream_id: e.stream_id.clone(),
            class,
            tenant: e.tenant.clone(),
            data,
        }
    }
}

/// A stream id `<ms>-<n>` (an event's id) as a pair, for ordering; `None` when malformed
/// ([`orq::decode::stream_id`]).
pub fn parse_stream_id(s: &str) -> Option<(u64, u64)> {
    orq::decode::stream_id(s)
}

/// The shared half of the live views: the broadcast channel, the metrics and the SSE client
/// slots. Cheap to clone.
#[derive(Clone)]
pub struct Live {
    inner: Arc<LiveInner>,
}

struct LiveInner {
    tx: broadcast::Sender<Arc<LiveEvent>>,
    metrics: Mutex<BTreeMap<String, QueueMetrics>>,
    clients: Arc<Semaphore>,
    /// The per-key cap below [`SSE_CLIENTS_MAX`] (`crate::key_slots`).
    per_key: KeySlots,
}

/// What an open event stream holds: one of the process's [`SSE_CLIENTS_MAX`] slots and one of
/// its key's [`SSE_CLIENTS_PER_KEY_MAX`]; both are given back when the stream ends.
#[derive(Debug)]
pub struct ClientSlot {
    _global: OwnedSemaphorePermit,
    _key: KeySlot,
}

impl Live {
    /// Live views with no poller (tests feed them with [`Live::record`]).
    pub fn idle() -> Self {
        Self::with_capacity(BROADCAST_CAPACITY)
    }

    /// Live views whose broadcast channel buffers `capacity` events.
    pub fn with_capacity(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity);
        Live {
            inner: Arc::new(LiveInner {
                tx,
                metrics: Mutex::default(),
                clients: Arc::new(Semaphore::new(SSE_CLIENTS_MAX)),
                per_key: KeySlots::new(SSE_CLIENTS_PER_KEY_MAX),
            }),
        }
    }

    /// Live views with a poller over `client`, spawned on the current tokio runtime (none when
    /// there is no runtime). Metrics start now and cover what the streams still hold; entries
    /// older than now by `clock` (compared with their store time) feed the metrics only, the
    /// newer ones are broadcast too.
    pub fn start(client: Client, clock: &dyn Clock) -> Self {
        let live = Self::idle();
        if tokio::runtime::Handle::try_current().is_ok() {
            let weak = Arc::downgrade(&live.inner);
            let since_ms = clock.now_ms() as i64;
            tokio::spawn(poll(client, weak, since_ms));
        }
        live
    }

    /// A receiver of every event broadcast from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<LiveEvent>> {
        self.inner.tx.subscribe()
    }

    /// Fold `events` (entries of `queue`'s stream, oldest first) into the queue's metrics and
    /// send those of store time `broadcast_from_ms` or later to the SSE clients.
    pub fn record(&self, queue: &str, events: &[QueueEvent], broadcast_from_ms: i64) {
        {
            let mut metrics = self.inner.metrics.lock().unwrap();
            let m = metrics.entry(queue.to_string()).or_default();
            for e in events {
                m.add(e);
            }
        }
        for e in events.iter().filter(|e| e.ts_ms >= broadcast_from_ms) {
            // An error means no client is listening: nothing to do.
            let _ = self.inner.tx.send(Arc::new(LiveEvent::new(queue, e)));
        }
    }

    /// The metrics of `queue` for the [`BUCKETS`] buckets ending with the one holding `now_ms`.
    pub fn metrics(&self, queue: &str, now_ms: i64) -> Vec<BucketSummary> {
        let metrics = self.inner.metrics.lock().unwrap();
        match metrics.get(queue) {
            Some(m) => m.summary(now_ms),
            None => QueueMetrics::default().summary(now_ms),
        }
    }

    /// An SSE client slot for `caller`, or the reason there is none: [`SSE_CLIENTS_MAX`]
    /// clients are connected, or `caller`'s key holds [`SSE_CLIENTS_PER_KEY_MAX`] streams.
    pub fn client_slot(&self, caller: &Caller) -> Result<ClientSlot, String> {
        let key = self.inner.per_key.take(caller).ok_or_else(|| {
            format!(
                "this key has {SSE_CLIENTS_PER_KEY_MAX} event streams open, the most one key may; \
                 close one or retry later"
            )
        })?;
        let global = self
            .inner
            .clients
            .clone()
            .try_acquire_owned()
            .map_err(|_| {
                format!("too many event stream clients (at most {SSE_CLIENTS_MAX}); retry later")
            })?;
        Ok(ClientSlot {
            _global: global,
            _key: key,
        })
    }
}

/// The poller: every [`POLL_MS`] while an SSE client is connected (else every [`IDLE_POLLS`]-th
/// tick), read each known queue's new stream entries and record them, broadcasting those of
/// store time `since_ms` or later; the queue list is read every [`QUEUES_POLLS`]-th tick. Ends
/// when the [`Live`] it feeds is dropped.
async fn poll(client: Client, live: Weak<LiveInner>, since_ms: i64) {
    // The last stream id read, per queue (absent: read from the oldest entry held).
    let mut cursors: BTreeMap<String, String> = BTreeMap::new();
    // The queue list as last read (`None`: to be read at the next poll).
    let mut queues: Option<Vec<String>> = None;
    let mut failing = false;
    let mut tick = tokio::time::interval(Duration::from_millis(POLL_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for n in 0u64.. {
        tick.tick().await;
        let Some(inner) = live.upgrade() else {
            return;
        };
        let live = Live { inner };
        if n % IDLE_POLLS != 0 && live.inner.tx.receiver_count() == 0 {
            continue;
        }
        if n % QUEUES_POLLS == 0 {
            queues = None;
        }
        match poll_once(&client, &live, &mut cursors, &mut queues, since_ms).await {
            Ok(()) if failing => {
                tracing::info!("event poller: the store answers again");
                failing = false;
            }
            Ok(()) => {}
            Err(e) if !failing => {
                tracing::warn!(error = %e, "event poller: cannot read the event streams; retrying");
                failing = true;
            }
            Err(_) => {}
        }
    }
}

/// One poll: the queue list when `queues` holds none (kept for the next polls), then each
/// queue's new entries.
async fn poll_once(
    client: &Client,
    live: &Live,
    cursors: &mut BTreeMap<String, String>,
    queues: &mut Option<Vec<String>>,
    since_ms: i64,
) -> orq::Result<()> {
    if queues.is_none() {
        *queues = Some(client.queues().await?);
    }
    for queue in queues.iter().flatten().take(QUEUES_MAX) {
        for _ in 0..POLL_PAGES_MAX {
            let after = cursors.get(queue).map(String::as_str);
            let page = client.events(queue, after, EVENTS_PAGE_MAX).await?;
            let Some(last) = page.last() else {
                break;
            };
            cursors.insert(queue.clone(), last.stream_id.clone());
            live.record(queue, &page, since_ms);
            if page.len() < EVENTS_PAGE_MAX {
                break;
            }
        }
    }
    Ok(())
}

/// Query of `GET /events`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsParams {
    /// Only this queue's events (default: every queue).
    #[param(value_type = Option<String>, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    queue: Option<Name>,
}

/// `Last-Event-ID: <queue>/<event id>`, validated: a stream id `<ms>-<n>`, or an event id as
/// `caller` received it (sealed for a tenant key: `to_event_for`), opened with `auth`.
fn last_event_id(
    headers: &HeaderMap,
    auth: &crate::auth::Auth,
    caller: &Caller,
) -> Result<Option<(String, String)>, ApiError> {
    let Some(v) = headers.get("last-event-id") else {
        return Ok(None);
    };
    let bad = || ApiError::bad_request("Last-Event-ID: must be an event's id (<queue>/<ms>-<n>)");
    let v = v.to_str().map_err(|_| bad())?.trim();
    if v.is_empty() {
        return Ok(None);
    }
    let (queue, id) = v.split_once('/').ok_or_else(bad)?;
    if !orq::keys::is_valid_name(queue) || id.len() > LAST_EVENT_ID_MAX_BYTES {
        return Err(bad());
    }
    // A stream id in the clear is taken from anyone (it names a point in time, and tells its
    // sender nothing); any other id must be one sealed for this caller.
    let id = if parse_stream_id(id).is_some() {
        id.to_string()
    } else {
        auth.cursor_in(caller, id.to_string()).map_err(|_| bad())?
    };
    if parse_stream_id(&id).is_none() {
        return Err(bad());
    }
    Ok(Some((queue.to_string(), id)))
}

/// `GET /api/v1/events?queue=` → `text/event-stream` of the queues' transitions as they happen
/// (within about [`POLL_MS`]): `id: <queue>/<stream-id>`, `event: task` (a task's transition) or
/// `event: queue` (`paused`, `resumed`, `configured`, `tenant_configured`), `data:` the JSON of
/// [`LiveEvent::data`]. Without `queue`, every queue. A keep-alive comment every
/// [`KEEP_ALIVE_S`] s. `Last-Event-ID: <queue>/<stream-id>` first resends that queue's entries
/// after it (at most [`RESEND_MAX`]; then an `event: lagged` says more may be missing). A client
/// too slow for the broadcast buffer gets `event: lagged`, `data: {"skipped": n}` and goes on.
/// A tenant key's client receives only its own tenant's task entries in the queues it may use
/// (see [`EventFilter`]).
/// Errors: 400 (bad `queue`, unknown parameter, malformed `Last-Event-ID`, or one naming another
/// queue than `queue`), 403 (a tenant key naming a queue it may not use, in `queue` or
/// `Last-Event-ID`), 503 `unavailable` beyond [`SSE_CLIENTS_MAX`] clients.
#[utoipa::path(
    get,
    path = "/api/v1/events",
    tag = "live",
    security(("bearer" = [])),
    params(
        EventsParams,
        (
            "Last-Event-ID" = Option<String>,
            Header,
            description = "`<queue>/<event id>`, an event's `id` as received (a stream id \
                `<ms>-<n>`; sealed, in hex, for a tenant key): first resend that queue's \
                entries after it (empty: none).",
            pattern = "^([A-Za-z0-9._-]{1,64}/([0-9]{1,20}-[0-9]{1,20}|[0-9a-f]{56,256}))?$",
        ),
    ),
    responses(
        (
            status = 200,
            description = "Server-Sent Events: `event: task`, `queue` or `lagged`; \
            `data:` JSON with `queue`, `stream_id`, `kind`, `ts`, `task_id`, `tenant`, \
            `attempt`, `fields`.",
            content_type = "text/event-stream",
            body = String,
        ),
        QueueErrors,
    ),
)]
pub async fn events(
    State(s): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<EventsParams>,
) -> Result<Response, ApiError> {
    let p = q;
    if let Some(queue) = &p.queue {
        caller.check_queue(queue)?;
    }
    let last = last_event_id(&headers, &s.auth, &caller)?;
    if let Some((lq, _)) = &last {
        caller.check_queue(lq)?;
    }
    if let (Some(want), Some((lq, _))) = (&p.queue, &last) {
        if want.as_str() != lq {
            return Err(ApiError::bad_request(format!(
                "Last-Event-ID: names queue {lq} but this stream is of queue {want}"
            )));
        }
    }
    let slot = s
        .live
        .client_slot(&caller)
        .map_err(|why| ApiError::new(ErrorCode::Unavailable, why))?;
    // Subscribe before reading the resend, so nothing falls between the two.
    let rx = s.live.subscribe();
    let resent = match &last {
        Some((queue, after)) => s
            .client
            .events(queue, Some(after), RESEND_MAX)
            .await?
            .iter()
            .map(|e| Arc::new(LiveEvent::new(queue, e)))
            .collect(),
        None => Vec::new(),
    };
    let filter = EventFilter {
        queue: p.queue.map(String::from),
        caller: caller.clone(),
    };
    let stream = messages(resent, rx, filter, s.shutdown.clone(), Some(slot));
    let auth = s.auth.clone();
    let stream = futures_util::StreamExt::map(stream, move |m| {
        Ok::<_, Infallible>(m.to_event_for(&auth, &caller))
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(KEEP_ALIVE_S)))
        .into_response())
}

/// 404 unless `queue` has received a task.
async fn known_queue(s: &AppState, queue: &str) -> Result<(), ApiError> {
    if s.client.queues().await?.iter().any(|q| q == queue) {
        Ok(())
    } else {
        Err(ApiError::not_found(format!("no queue named {queue}")))
    }
}

/// `GET /api/v1/queues/{queue}/metrics` →
/// `{"queue": "q", "bucket_ms": 10000, "buckets": [{"t_ms", "completed", "failed", "dead",
/// "submitted", "wait_ms": {"p50", "p99", "max", "count"} | null, "run_ms": {...} | null}]}`:
/// the last hour in [`BUCKETS`] buckets of [`BUCKET_MS`], oldest first, the last one the bucket
/// of now (see [`BucketSummary`] for each field; latencies in ms). Computed in memory by this
/// process's event poller: metrics start when the server starts and cover what the stream still
/// held then (at least its last 10,000 events), so they restart with the process, and each API process
/// computes its own. Queue-wide, so admin keys only. Errors: 400 bad queue name or any query
/// parameter; 403 a tenant key; 404 unknown queue.
#[utoipa::path(
    get,
    path = "/api/v1/queues/{queue}/metrics",
    tag = "live",
    security(("bearer" = [])),
    params(QueueName),
    responses(
        (status = 200, description = "The last hour, oldest bucket first.", body = MetricsJson),
        QueueLookupErrors,
    ),
)]
pub async fn metrics(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    QueuePath(queue): QueuePath,
) -> Result<Response, ApiError> {
    caller.require_admin("a queue's metrics")?;
    known_queue(&s, &queue).await?;
    let now = s.clock.now_ms() as i64;
    let buckets = s.live.metrics(&queue, now);
    Ok(Json(MetricsJson {
        queue: queue.into(),
        bucket_ms: BUCKET_MS,
        buckets,
    })
    .into_response())
}

/// `GET /api/v1/queues/{queue}/workers` →
/// `{"queue": "q", "now_ms": n, "leases_total": n, "workers": [{"id": "w1", "last_seen_ms": n,
/// "idle_ms": n, "leases": [{"task_id", "type", "tenant", "leased_at_ms", "lease_exp_ms",
/// "heartbeat_age_ms"}]}]}`: the workers the queue has seen in the last hour (by a lease or
/// heartbeat call), most recently seen first, and the leases each holds now. Times are the
/// store's clock in ms since the Unix epoch; `idle_ms` = `now_ms - last_seen_ms` and
/// `heartbeat_age_ms` = ms since the lease's last heartbeat (or its start). At most 1000 workers
/// and leases (`leases_total` counts every live lease). Every tenant's leases, so admin keys
/// only. Errors: 400 bad queue name or any query parameter; 403 a tenant key; 404 unknown queue.
#[utoipa::path(
    get,
    path = "/api/v1/queues/{queue}/workers",
    tag = "live",
    security(("bearer" = [])),
    params(QueueName),
    responses(
        (status = 200, description = "The workers, most recently seen first.", body = WorkersJson),
        QueueLookupErrors,
    ),
)]
pub async fn workers(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    QueuePath(queue): QueuePath,
) -> Result<Response, ApiError> {
    caller.require_admin("the workers view")?;
    known_queue(&s, &queue).await?;
    let w = s.client.workers(&queue).await?;
    let now = w.now_ms;
    let workers: Vec<_> = w
        .workers
        .iter()
        .map(|wi| WorkerJson {
            id: wi.id.clone(),
            last_seen_ms: wi.last_seen_ms,
            idle_ms: (now - wi.last_seen_ms).max(0),
            leases: wi
                .leases
                .iter()
                .map(|l| WorkerLeaseJson {
                    task_id: l.task_id.clone(),
                    task_type: l.task_type.clone(),
                    tenant: l.tenant.clone(),
                    leased_at_ms: l.leased_at_ms,
                    lease_exp_ms: l.lease_exp_ms,
                    heartbeat_age_ms: (now - l.heartbeat_at_ms).max(0),
                })
                .collect(),
        })
        .collect();
    Ok(Json(WorkersJson {
        queue: queue.into(),
        now_ms: now,
        leases_total: w.leases_total,
        workers,
    })
    .into_response())
}

/// `GET /queues/{queue}/metrics`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Metrics)]
pub struct MetricsJson {
    /// Queue name.
    pub queue: String,
    /// Width of a bucket (ms).
    pub bucket_ms: i64,
    /// The last hour, oldest first; the last one holds now.
    pub buckets: Vec<BucketSummary>,
}

/// `GET /queues/{queue}/workers`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = WorkerList)]
pub struct WorkersJson {
    /// Queue name.
    pub queue: String,
    /// The store's clock (ms since the Unix epoch).
    pub now_ms: i64,
    /// Every live lease of the queue (the lists below hold at most 1000).
    pub leases_total: u64,
    /// The workers seen in the last hour, most recently seen first.
    pub workers: Vec<WorkerJson>,
}

/// One worker of [`WorkersJson`].
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Worker)]
pub struct WorkerJson {
    /// Worker id.
    pub id: String,
    /// Its last lease or heartbeat call (store clock, ms).
    pub last_seen_ms: i64,
    /// `now_ms - last_seen_ms`.
    pub idle_ms: i64,
    /// The leases it holds now.
    pub leases: Vec<WorkerLeaseJson>,
}

/// One lease of a [`WorkerJson`].
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = WorkerLease)]
pub struct WorkerLeaseJson {
    /// The leased task.
    pub task_id: String,
    /// Its handler type.
    #[serde(rename = "type")]
    pub task_type: String,
    /// Its tenant.
    pub tenant: String,
    /// When the lease began (store clock, ms).
    pub leased_at_ms: i64,
    /// When it expires (store clock, ms).
    pub lease_exp_ms: i64,
    /// Ms since its last heartbeat (or its start).
    pub heartbeat_age_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    fn ev(kind: &str, ts_ms: i64, id: &str, attempt: u32, fields: &[(&str, &str)]) -> QueueEvent {
        QueueEvent {
            stream_id: format!("{ts_ms}-0"),
            kind: kind.to_string(),
            ts_ms,
            task_id: id.to_string(),
            tenant: "t".to_string(),
            attempt,
            fields: fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    // Goal: a client too slow for the broadcast buffer is told how many entries it missed and
    // then goes on with the newest ones. Method: a channel of 2, five entries sent before the
    // client reads.
    #[tokio::test]
    async fn lagging_client_gets_a_lagged_message_and_continues() {
        let live = Live::with_capacity(2);
        let rx = live.subscribe();
        let events: Vec<_> = (1..=5).map(|i| ev("queued", i, "a", 0, &[])).collect();
        live.record("q", &events, 0);
        let stop = CancellationToken::new();
        let mut s = Box::pin(messages(
            vec![],
            rx,
            EventFilter::queue(None),
            stop.clone(),
            None,
        ));
        assert_eq!(s.next().await, Some(Message::Lagged(Some(3))));
        for want in ["4-0", "5-0"] {
            match s.next().await {
                Some(Message::Entry(e)) => assert_eq!(e.stream_id, want),
                other => panic!("expected entry {want}, got {other:?}"),
            }
        }
        stop.cancel();
        assert_eq!(s.next().await, None, "the stream ends at shutdown");
    }

    // Goal: resent entries come first, broadcast copies of them are not sent twice, and other
    // queues are filtered out.
    #[tokio::test]
    async fn resent_entries_are_not_repeated_and_other_queues_are_filtered() {
        let live = Live::idle();
        let rx = live.subscribe();
        let resent = vec![Arc::new(LiveEvent::new(
            "q",
            &ev("queued", 10, "a", 0, &[]),
        ))];
        live.record("q", &[ev("queued", 10, "a", 0, &[])], 0);
        live.record("other", &[ev("queued", 11, "b", 0, &[])], 0);
        live.record("q", &[ev("leased", 12, "a", 1, &[("w", "w1")])], 0);
        let stop = CancellationToken::new();
        let s = messages(
            resent,
            rx,
            EventFilter::queue(Some("q".into())),
            stop.clone(),
            None,
        );
        let got: Vec<_> = s.take(2).collect().await;
        let ids: Vec<_> = got
            .iter()
            .map(|m| match m {
                Message::Entry(e) => format!("{}/{}", e.queue, e.stream_id),
                Message::Lagged(_) => "lagged".into(),
            })
            .collect();
        assert_eq!(ids, ["q/10-0", "q/12-0"]);
    }

    // Goal: the metrics count each kind in the bucket of its time, take latencies from
    // wait_ms / run_ms, do not count a delayed task's promotion as a second submit, and answer
    // a dense hour of buckets.
    #[test]
    fn metrics_count_kinds_per_bucket_with_latency_quantiles() {
        let mut m = QueueMetrics::default();
        let t0 = 1_700_000_000_000; // a multiple of BUCKET_MS
        m.add(&ev("queued", t0 + 1, "a", 0, &[]));
        m.add(&ev("scheduled", t0 + 2, "b", 0, &[("run_at", "1")]));
        m.add(&ev("queued", t0 + 3, "b", 0, &[])); // b's promotion: not a submit
        for (i, wait) in [5u64, 1, 9, 3].iter().enumerate() {
            let w = wait.to_string();
            m.add(&ev("leased", t0 + 4 + i as i64, "a", 1, &[("wait_ms", &w)]));
        }
        m.add(&ev("completed", t0 + 10, "a", 1, &[("run_ms", "40")]));
        m.add(&ev("retrying", t0 + BUCKET_MS, "b", 1, &[]));
        m.add(&ev("dead", t0 + BUCKET_MS + 1, "b", 2, &[]));
        let s = m.summary(t0 + BUCKET_MS + 5);
        assert_eq!(s.len(), BUCKETS);
        let (a, b) = (&s[BUCKETS - 2], &s[BUCKETS - 1]);
        assert_eq!((a.t_ms, b.t_ms), (t0, t0 + BUCKET_MS));
        assert_eq!((a.submitted, a.completed, a.failed, a.dead), (2, 1, 0, 0));
        let w = a.wait_ms.expect("wait quantiles");
        assert_eq!((w.p50, w.p99, w.max, w.count), (3, 9, 9, 4));
        assert_eq!(a.run_ms.map(|r| r.max), Some(40));
        assert_eq!((b.failed, b.dead, b.completed), (2, 1, 0));
        assert_eq!(b.wait_ms, None);
        assert!(s[..BUCKETS - 2]
            .iter()
            .all(|x| x.completed == 0 && x.wait_ms.is_none()));
        // An hour later the old buckets have left the window.
        let later = m.summary(t0 + BUCKETS as i64 * BUCKET_MS + BUCKET_MS);
        assert!(later.iter().all(|x| x.completed == 0 && x.failed == 0));
    }

    // Goal: latency quantiles stay bounded in memory and close to exact beyond SAMPLE_MAX
    // values, and a bucket two steps old is summarised (its sample freed) with the same answer.
    #[test]
    fn latency_sample_is_bounded_and_summarised_when_old() {
        let mut m = QueueMetrics::default();
        let t0 = 1_700_000_000_000;
        for v in 1..=20_000u64 {
            let w = v.to_string();
            m.add(&ev(
                "leased",
                t0 + (v as i64 % 1000),
                "a",
                1,
                &[("wait_ms", &w)],
            ));
        }
        let open = m.summary(t0)[BUCKETS - 1].wait_ms.unwrap();
        assert_eq!((open.max, open.count), (20_000, 20_000));
        assert!((8_000..12_000).contains(&open.p50), "{open:?}");
        assert!(open.p99 >= 19_000, "{open:?}");
        assert!(m.buckets[0].wait.sample.len() <= SAMPLE_MAX);
        m.add(&ev("queued", t0 + 2 * BUCKET_MS, "c", 0, &[]));
        assert!(m.buckets[0].wait.sample.is_empty(), "summarised");
        let closed = m.summary(t0 + 2 * BUCKET_MS)[BUCKETS - 3].wait_ms.unwrap();
        assert_eq!(open, closed);
    }

    #[test]
    fn stream_ids_parse_and_order() {
        assert_eq!(
            parse_stream_id("1700000000000-3"),
            Some((1_700_000_000_000, 3))
        );
        for bad in [
            "",
            "1",
            "-1",
            "1-",
            "a-1",
            "1-2-3",
            "1 -2",
            &format!("{}-0", "9".repeat(21)),
        ] {
            assert_eq!(parse_stream_id(bad), None, "{bad:?}");
        }
        assert!(parse_stream_id("10-0") > parse_stream_id("9-5"));
    }
}
