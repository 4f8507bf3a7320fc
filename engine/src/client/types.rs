//! The queries and replies of the client's operations: what a submit returns, a list query and
//! its page, a queue's and its tenants' stats, tenant limits, the event stream's events, the
//! workers and leases of a queue, and a bulk replay's result.

use crate::task::{Status, Task};
use std::collections::BTreeMap;

/// The outcome of one submit.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    /// The task as stored.
    pub task: Task,
    /// False when the idempotency key (or id) matched an existing task, which is returned.
    pub created: bool,
}

/// A listing request. `status: None` lists every status in a fixed order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListQuery {
    /// The queue.
    pub queue: String,
    /// Only this status.
    pub status: Option<Status>,
    /// Only this tenant.
    pub tenant: Option<String>,
    /// Only this type.
    pub task_type: Option<String>,
    /// Page size (1..=1000).
    pub limit: u32,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The tasks, in index order.
    pub tasks: Vec<Task>,
    /// Pass to the next call; `None` when the listing is complete.
    pub next_cursor: Option<String>,
}

/// Counts of one tenant in one queue.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TenantStats {
    /// Tenant name.
    pub tenant: String,
    /// Current tasks per status.
    pub counts: BTreeMap<Status, i64>,
    /// Fair-share weight (1 unless set).
    pub weight: f64,
    /// Most live leases, when capped.
    pub max_inflight: Option<u64>,
    /// Most waiting (queued, scheduled, retrying) tasks, when capped.
    pub max_queued: Option<u64>,
    /// Rate limit, leases per second, when limited.
    pub rate_per_s: Option<f64>,
    /// Token bucket size of the rate limit.
    pub burst: Option<u64>,
    /// Leases served since the tenant first submitted (its service received).
    pub served: u64,
    /// Its share of the queue's leases served, 0..=1.
    pub share: f64,
    /// Completions per second over about the last minute (sliding one-minute window).
    pub completed_per_s: f64,
    /// Why the tenant's ready work is held back right now, if it is.
    pub held: Option<Held>,
}

/// Why a tenant's ready work is held back (the tenant is parked, DESIGN notes 17).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Held {
    /// At its `max_inflight`: until one of its leases ends.
    MaxInflight,
    /// Out of rate-limit tokens: until the next token is due.
    RateLimit {
        /// When the next token is due (store clock, ms since the Unix epoch).
        until_ms: u64,
    },
}

/// Counts of one queue.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueueStats {
    /// Queue name.
    pub queue: String,
    /// Current tasks per status.
    pub counts: BTreeMap<Status, i64>,
    /// Cumulative counters since the queue was created: `enqueued`, `completed`, `failed`
    /// (attempts), `dead`, `cancelled`, `reaped`, `replayed`, `purged`, and `repaired` (corrupt or foreign
    /// state the scripts met and dropped or reset; see `lua/scripts/lib/keys.lua`).
    pub totals: BTreeMap<String, i64>,
    /// Per tenant, in name order (at most [`STATS_TENANTS_MAX`](super::STATS_TENANTS_MAX)).
    pub tenants: Vec<TenantStats>,
    /// True when leasing is paused.
    pub paused: bool,
    /// The starvation bound step (ms); 0 = strict priority.
    pub aging_step_ms: u64,
    /// The queue's default task options (JSON text), when set.
    pub defaults: Option<String>,
    /// The store's time of the reading (ms).
    pub now_ms: u64,
    /// The tenants the queue knows (`tenants` holds the page asked for).
    pub tenants_total: u64,
    /// The oldest ready task among the heads of the tenants read for it
    /// ([`StatsQuery::oldest_among`]); `None` when none was read.
    pub oldest_ready: Option<OldestReady>,
}

/// What a [`Client::stats_with`](crate::Client::stats_with) call reads beyond the queue's
/// counters (the default: no tenant and no oldest-ready read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsQuery {
    /// Most tenants reported, in name order (at most [`STATS_TENANTS_MAX`](super::STATS_TENANTS_MAX)).
    pub tenants: u64,
    /// The position of the first tenant reported, in name order (at most
    /// [`STATS_OFFSET_MAX`](super::STATS_OFFSET_MAX)).
    pub offset: u64,
    /// Report only this tenant (when the queue knows it) instead of a page.
    pub only: Option<String>,
    /// Read the heads of the ready lists of this many tenants with ready work (at most
    /// [`STATS_OLDEST_AMONG_MAX`](super::STATS_OLDEST_AMONG_MAX)) for the oldest ready task.
    pub oldest_among: u64,
}

/// The oldest ready (queued, due) task of a queue, as far as a bounded read saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OldestReady {
    /// When it became ready (its run_at, or its created_at), ms since the Unix epoch, by the
    /// store's clock.
    pub since_ms: u64,
    /// Tenants whose ready lists' heads were read.
    pub tenants_read: u64,
    /// Tenants with ready work (not held back by a limit): when more than `tenants_read`, an
    /// older task may wait at a tenant that was not read.
    pub tenants_ready: u64,
}

/// A change to one tenant's share and limits. Each field: `None` keeps the current value,
/// `Some(None)` removes the setting (back to the default: weight 1, no cap, no rate limit),
/// `Some(Some(v))` sets it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenantLimits {
    /// Fair-share weight in (0, 1000] (default 1).
    pub weight: Option<Option<f64>>,
    /// Most live leases, 1..=1,000,000.
    pub max_inflight: Option<Option<u64>>,
    /// Most waiting tasks (queued, scheduled, retrying), 0..=1,000,000,000; a submit beyond it is
    /// refused with [`Error::Limited`](crate::Error::Limited).
    pub max_queued: Option<Option<u64>>,
    /// Leases per second, in (0, 1,000,000] (a token bucket).
    pub rate_per_s: Option<Option<f64>>,
    /// Token bucket size, 1..=1,000,000 (default: max(1, ceil(rate_per_s))).
    pub burst: Option<Option<u64>>,
}

/// One event of a queue's event stream (`orq:{q}:events`, written by every transition script;
/// a stream entry holds the events of one call, see [`crate::decode::stream_events`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QueueEvent {
    /// The event's id, a stream id `<ms>-<n>` (ms the time of the call that wrote it, n its
    /// number in the queue, see [`crate::decode::stream_events`]): pass it as `after` to read
    /// on.
    pub stream_id: String,
    /// What happened: a status the task entered (`queued`, `leased`, `completed`, ...) or a
    /// queue setting (`paused`, `resumed`, `configured`, `tenant_configured`).
    pub kind: String,
    /// The store's clock when it happened (ms since the Unix epoch).
    pub ts_ms: i64,
    /// The task concerned; empty for queue settings events.
    pub task_id: String,
    /// The task's tenant (or the configured tenant); empty for queue settings events.
    pub tenant: String,
    /// The task's attempt number at the time (0 before its first lease).
    pub attempt: u32,
    /// Kind-specific fields: `w` worker, `epoch`, `wait_ms` (leased: ms in the ready set),
    /// `run_ms` (completed: ms since the lease), `run_at` (ms), `m` error, `from` status.
    pub fields: BTreeMap<String, String>,
}

/// A lease as [`Client::workers`](super::Client::workers) reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WorkerLease {
    /// The leased task.
    pub task_id: String,
    /// Its type.
    pub task_type: String,
    /// Its tenant.
    pub tenant: String,
    /// When the lease began (store clock, ms since the Unix epoch).
    pub leased_at_ms: i64,
    /// The lease deadline (ms since the Unix epoch).
    pub lease_exp_ms: i64,
    /// The last heartbeat, or `leased_at_ms` when none came yet (ms since the Unix epoch).
    pub heartbeat_at_ms: i64,
}

/// A worker a queue has seen (by a lease or heartbeat call in the last hour).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WorkerInfo {
    /// The worker id it leases with.
    pub id: String,
    /// Its last lease or heartbeat call (store clock, ms since the Unix epoch).
    pub last_seen_ms: i64,
    /// The leases it holds now.
    pub leases: Vec<WorkerLease>,
}

/// Reply of [`Client::workers`](super::Client::workers).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Workers {
    /// The store's clock when read (ms since the Unix epoch).
    pub now_ms: i64,
    /// Workers, most recently seen first (at most [`WORKERS_MAX`](super::WORKERS_MAX)). A worker holding a lease
    /// but no longer in the seen set (silent for an hour) is listed with its last lease time.
    pub workers: Vec<WorkerInfo>,
    /// Live leases in the queue; more than the listed ones when above [`WORKERS_MAX`](super::WORKERS_MAX).
    pub leases_total: u64,
}

/// Result of a bulk DLQ replay.
#[derive(Debug, Clone, PartialEq)]
pub struct BulkReplay {
    /// Tasks put back in the queue.
    pub replayed: u64,
    /// True when the scan stopped at a bound with DLQ entries left unexamined.
    pub more: bool,
}
