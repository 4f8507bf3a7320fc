//! The client: submit, read, list, cancel, and manage the DLQ. Every operation is one script call
//! (a by-id call without a queue asks every known queue, concurrently).

use crate::clock::{Clock, Entropy};
use crate::decode::{self, array_at, int_at, items, str_at};
use crate::error::{Error, Result};
use crate::keys::{is_valid_name, is_valid_task_id, queue_keys, QUEUES_KEY};
use crate::resp::Resp;
use crate::store::Store;
use crate::task::{
    Backoff, Status, Task, TaskSpec, BATCH_MAX, DEFAULT_LEASE_MS, DEFAULT_MAX_RETRIES,
    IDEMPOTENCY_TTL_MS,
};
use orq_lua::script;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

/// How long completed and cancelled tasks are kept before they are trimmed (ms): 24 h.
pub const RETENTION_MS: u64 = 24 * 3_600_000;
/// Most finished tasks deleted per index by one complete or reap call.
pub const TRIM_BOUND: u64 = 100;
/// Most index entries one list page examines (tenant / type filters may skip entries).
pub const LIST_SCAN_MAX: u64 = 10_000;
/// Largest list page.
pub const LIST_LIMIT_MAX: u32 = 1000;
/// Most tenants reported by one stats call.
pub const STATS_TENANTS_MAX: u64 = 1000;
/// Most DLQ entries one bulk replay examines.
pub const REPLAY_SCAN_MAX: u64 = 100_000;
/// Most tasks one bulk replay puts back.
pub const REPLAY_LIMIT_MAX: u64 = 10_000;

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
    /// (attempts), `dead`, `reaped`, `replayed`, `purged`, and `repaired` (corrupt or foreign
    /// state the scripts met and dropped or reset; see `lua/scripts/lib.lua`).
    pub totals: BTreeMap<String, i64>,
    /// Per tenant, in name order (at most [`STATS_TENANTS_MAX`]).
    pub tenants: Vec<TenantStats>,
    /// True when leasing is paused.
    pub paused: bool,
    /// The starvation bound step (ms); 0 = strict priority.
    pub aging_step_ms: u64,
    /// The queue's default task options (JSON text), when set.
    pub defaults: Option<String>,
    /// The store's time of the reading (ms).
    pub now_ms: u64,
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
    /// refused with [`Error::Limited`].
    pub max_queued: Option<Option<u64>>,
    /// Leases per second, in (0, 1,000,000] (a token bucket).
    pub rate_per_s: Option<Option<f64>>,
    /// Token bucket size, 1..=1,000,000 (default: max(1, ceil(rate_per_s))).
    pub burst: Option<Option<u64>>,
}

/// Score of a tenant parked at its `max_inflight` (2^53 - 1, the scripts' `FACTS.parked_capped`).
const PARKED_CAPPED: i64 = orq_lua::facts::PARKED_CAPPED as i64;

/// Most entries [`Client::events`] returns per call.
pub const EVENTS_PAGE_MAX: usize = 1000;
/// Most workers and leases [`Client::workers`] reports.
pub const WORKERS_MAX: u64 = 1000;

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

/// A lease as [`Client::workers`] reports it.
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

/// Reply of [`Client::workers`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Workers {
    /// The store's clock when read (ms since the Unix epoch).
    pub now_ms: i64,
    /// Workers, most recently seen first (at most [`WORKERS_MAX`]). A worker holding a lease
    /// but no longer in the seen set (silent for an hour) is listed with its last lease time.
    pub workers: Vec<WorkerInfo>,
    /// Live leases in the queue; more than the listed ones when above [`WORKERS_MAX`].
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

/// Submits and manages tasks. Cheap to clone (shared state behind `Arc`).
#[derive(Clone)]
pub struct Client {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    entropy: Arc<Entropy>,
    registered: Arc<Mutex<HashSet<String>>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

pub(crate) async fn call(
    store: &dyn Store,
    op: &'static str,
    queue: &str,
    args: Vec<Vec<u8>>,
) -> Result<Resp> {
    store
        .eval(script(op), &queue_keys(queue), &args)
        .await
        .map_err(|e| Error::unreachable(op, e.0))
}

fn check_queue(op: &'static str, queue: &str) -> Result<()> {
    if is_valid_name(queue) {
        Ok(())
    } else {
        Err(Error::invalid(op, "queue: must match [A-Za-z0-9._-]{1,64}"))
    }
}

fn check_id(op: &'static str, id: &str) -> Result<()> {
    if is_valid_task_id(id) {
        Ok(())
    } else {
        Err(Error::invalid(op, "id: must be a ULID"))
    }
}

fn arg(s: impl ToString) -> Vec<u8> {
    s.to_string().into_bytes()
}

/// `v` as a script argument, or the empty argument when it equals `default` (an enqueue setting
/// the script reads as its default).
fn opt_arg<T: PartialEq + ToString>(v: T, default: T) -> Vec<u8> {
    if v == default {
        Vec::new()
    } else {
        arg(v)
    }
}

impl Client {
    /// A client over `store`, using `clock` and `entropy` for task ids.
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, entropy: Arc<Entropy>) -> Self {
        Client {
            store,
            clock,
            entropy,
            registered: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    /// The store this client talks to.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Record `queue` in the queue registry: once per process per queue, or again when `force`
    /// (the store said the queue is new to it, so it lost its data since our last record).
    /// Returns whether a record was sent.
    async fn register_queue(&self, queue: &str, force: bool) -> Result<bool> {
        if !force && self.registered.lock().unwrap().contains(queue) {
            return Ok(false);
        }
        self.store
            .eval(
                script("queues"),
                &[QUEUES_KEY.to_string()],
                &[arg("add"), arg(queue)],
            )
            .await
            .map_err(|e| Error::unreachable("submit", e.0))?;
        self.registered.lock().unwrap().insert(queue.to_string());
        Ok(true)
    }

    /// Check that the store accepts writes now (readiness): a write that changes nothing, which
    /// Redis refuses as it refuses any write at `maxmemory`, on a replica or while loading.
    /// Errors: `Unavailable` with the refusal's cause, `Protocol` (foreign data in the registry).
    pub async fn probe_writes(&self) -> Result<()> {
        let op = "probe";
        let reply = self
            .store
            .eval(script("queues"), &[QUEUES_KEY.to_string()], &[arg("probe")])
            .await
            .map_err(|e| Error::unreachable(op, e.0))?;
        items(op, &reply, "").map(|_| ())
    }

    /// Every queue that ever received a task, sorted by name.
    pub async fn queues(&self) -> Result<Vec<String>> {
        let op = "queues";
        let reply = self
            .store
            .eval(script(op), &[QUEUES_KEY.to_string()], &[arg("list")])
            .await
            .map_err(|e| Error::unreachable(op, e.0))?;
        let it = items(op, &reply, "")?;
        array_at(op, it, 1)?
            .iter()
            .map(|r| {
                r.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| Error::protocol(op, "queue name is not text"))
            })
            .collect()
    }

    /// Submit one task. Errors: `Invalid` (a field out of range, naming it), `Unavailable`.
    pub async fn submit(&self, spec: TaskSpec) -> Result<Submitted> {
        let mut out = self.submit_batch(vec![spec]).await?;
        Ok(out.remove(0))
    }

    /// Submit up to [`BATCH_MAX`] tasks: all are validated before any is stored, then one script
    /// call per queue in the batch stores them (all tasks of one queue atomically). Results come
    /// back in input order.
    pub async fn submit_batch(&self, specs: Vec<TaskSpec>) -> Result<Vec<Submitted>> {
        let op = "enqueue";
        if specs.is_empty() || specs.len() > BATCH_MAX {
            return Err(Error::invalid(
                op,
                format!("tasks: between 1 and {BATCH_MAX} per batch"),
            ));
        }
        for (i, s) in specs.iter().enumerate() {
            s.validate().map_err(|m| {
                Error::invalid(
                    op,
                    if specs.len() > 1 {
                        format!("tasks[{i}].{m}")
                    } else {
                        m
                    },
                )
            })?;
        }
        // Group by queue, remembering each task's input position.
        let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, s) in specs.iter().enumerate() {
            groups.entry(s.queue.as_str()).or_default().push(i);
        }
        let mut out: Vec<Option<Submitted>> = vec![None; specs.len()];
        for (queue, positions) in groups {
            let registered_now = self.register_queue(queue, false).await?;
            let mut args = Vec::with_capacity(1 + positions.len() * 6);
            args.push(arg(positions.len()));
            let now = self.clock.now_ms();
            let mut ids = Vec::with_capacity(positions.len());
            for &i in &positions {
                let s = &specs[i];
                let id = match &s.id {
                    Some(id) => id.clone(),
                    None => self.entropy.ulid(now).to_string(),
                };
                args.push(arg(&id));
                ids.push(id);
                args.push(arg(&s.tenant));
                args.push(arg(&s.task_type));
                args.push(s.payload.as_bytes().to_vec());
                // A setting at its default goes as '' (enqueue.lua reads it as the default
                // without parsing or validating it). The priority is a value of its own; the
                // other eleven settings travel packed in one value, comma-separated, or as ''
                // when all are at their defaults: a default task is five values and an empty
                // one, which cost Redis less to receive than sixteen (docs/measurements.md).
                let b = &s.backoff;
                let d = Backoff::default();
                args.push(opt_arg(s.priority, 0));
                let settings = [
                    s.run_at_ms.map(arg).unwrap_or_default(),
                    opt_arg(s.delay_ms, 0),
                    opt_arg(s.max_retries, DEFAULT_MAX_RETRIES),
                    opt_arg(b.initial_ms, d.initial_ms),
                    opt_arg(b.multiplier, d.multiplier),
                    opt_arg(b.max_ms, d.max_ms),
                    opt_arg(b.jitter, d.jitter),
                    opt_arg(s.lease_ms, DEFAULT_LEASE_MS),
                    s.timeout_ms.map(arg).unwrap_or_default(),
                    s.idempotency_key.as_ref().map(arg).unwrap_or_default(),
                    s.idempotency_key
                        .as_ref()
                        .map(|_| arg(IDEMPOTENCY_TTL_MS))
                        .unwrap_or_default(),
                ];
                args.push(if settings.iter().all(Vec::is_empty) {
                    Vec::new()
                } else {
                    settings.join(&b","[..])
                });
            }
            let reply = call(&*self.store, op, queue, args).await?;
            let it = items(op, &reply, "")?;
            let stored_at = int_at(op, it, 0)? as u64;
            let results = array_at(op, it, 1)?;
            if results.len() != positions.len() {
                return Err(Error::protocol(op, "reply count differs from task count"));
            }
            for ((r, &i), id) in results.iter().zip(&positions).zip(ids) {
                let item = r
                    .as_array()
                    .ok_or_else(|| Error::protocol(op, "item is not an array"))?;
                let submitted = if int_at(op, item, 0)? == 1 {
                    // A new task: the store sends back only what it decided (the status and
                    // run_at); the rest is what was sent.
                    let status = str_at(op, item, 1)?;
                    let status = Status::parse(status)
                        .ok_or_else(|| Error::protocol(op, format!("unknown status {status:?}")))?;
                    let run_at_ms = int_at(op, item, 2)? as u64;
                    Submitted {
                        task: specs[i].stored(id, status, run_at_ms, stored_at),
                        created: true,
                    }
                } else {
                    Submitted {
                        task: decode::task(op, queue, array_at(op, item, 1)?)?,
                        created: false,
                    }
                };
                out[i] = Some(submitted);
            }
            // The queue is new to the store although this client recorded it before: the store
            // lost its data (a Redis restart without persistence), registry included. Record it
            // again, or workers serving every known queue would never see these tasks.
            if int_at(op, it, 2)? == 1 && !registered_now {
                self.register_queue(queue, true).await?;
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// The queues to search for a by-id operation: the one given, or every known queue.
    async fn queues_for(&self, op: &'static str, queue: Option<&str>) -> Result<Vec<String>> {
        match queue {
            Some(q) => {
                check_queue(op, q)?;
                Ok(vec![q.to_string()])
            }
            None => self.queues().await,
        }
    }

    /// Find which queue holds task `id` (checking `queue` only, when given).
    async fn locate(&self, op: &'static str, queue: Option<&str>, id: &str) -> Result<Task> {
        check_id(op, id)?;
        let queues = self.queues_for(op, queue).await?;
        let lookups = queues.iter().map(|q| {
            let store = self.store.clone();
            let id = id.to_string();
            async move { call(&*store, "get", q, vec![arg(id)]).await }
        });
        for (reply, q) in futures::future::join_all(lookups)
            .await
            .into_iter()
            .zip(&queues)
        {
            let reply = reply?;
            let it = items("get", &reply, id)?;
            let flat = array_at("get", it, 1)?;
            if !flat.is_empty() {
                return decode::task(op, q, flat);
            }
        }
        Err(Error::NotFound {
            op,
            id: id.to_string(),
        })
    }

    /// One task by id. `queue: None` searches every known queue. Errors: `NotFound`, `Invalid`.
    pub async fn get(&self, queue: Option<&str>, id: &str) -> Result<Task> {
        self.locate("get", queue, id).await
    }

    /// One page of tasks. Errors: `Invalid` (bad name, limit or cursor).
    pub async fn list(&self, q: &ListQuery) -> Result<Page> {
        let op = "list";
        check_queue(op, &q.queue)?;
        for (field, v) in [("tenant", &q.tenant), ("type", &q.task_type)] {
            if let Some(v) = v {
                if !is_valid_name(v) {
                    return Err(Error::invalid(
                        op,
                        format!("{field}: must match [A-Za-z0-9._-]{{1,64}}"),
                    ));
                }
            }
        }
        if q.limit == 0 || q.limit > LIST_LIMIT_MAX {
            return Err(Error::invalid(
                op,
                format!("limit: must be 1..={LIST_LIMIT_MAX}"),
            ));
        }
        let cursor = q.cursor.clone().unwrap_or_default();
        if cursor.len() > 64 {
            return Err(Error::invalid(op, "cursor: malformed"));
        }
        let args = vec![
            arg(q.status.map(Status::as_str).unwrap_or("")),
            arg(q.tenant.as_deref().unwrap_or("")),
            arg(q.task_type.as_deref().unwrap_or("")),
            arg(cursor),
            arg(q.limit),
            arg(LIST_SCAN_MAX),
        ];
        let reply = call(&*self.store, op, &q.queue, args).await?;
        let it = items(op, &reply, "")?;
        let tasks = array_at(op, it, 1)?
            .iter()
            .map(|t| {
                t.as_array()
                    .ok_or_else(|| Error::protocol(op, "task is not an array"))
                    .and_then(|flat| decode::task(op, &q.queue, flat))
            })
            .collect::<Result<Vec<_>>>()?;
        let next = str_at(op, it, 2)?;
        Ok(Page {
            tasks,
            next_cursor: (!next.is_empty()).then(|| next.to_string()),
        })
    }

    /// Cancel a task that has not finished. Cancelling a cancelled task returns it unchanged.
    /// Errors: `NotFound`; `Conflict` when it is completed or dead.
    pub async fn cancel(&self, queue: Option<&str>, id: &str) -> Result<Task> {
        let op = "cancel";
        let found = self.locate(op, queue, id).await?;
        let reply = call(&*self.store, op, &found.queue, vec![arg(id)]).await?;
        let it = items(op, &reply, id)?;
        decode::task(op, &found.queue, array_at(op, it, 2)?)
    }

    /// Put a dead task back in its queue with a fresh retry budget.
    /// Errors: `NotFound`; `Conflict` when it is not dead.
    pub async fn replay(&self, queue: Option<&str>, id: &str) -> Result<Task> {
        let op = "replay";
        let found = self.locate(op, queue, id).await?;
        let reply = call(&*self.store, op, &found.queue, vec![arg("ids"), arg(id)]).await?;
        let it = items(op, &reply, id)?;
        let outcome = array_at(op, it, 1)?
            .first()
            .and_then(Resp::as_str)
            .ok_or_else(|| Error::protocol(op, "no per-id result"))?;
        match outcome {
            "replayed" => self.get(Some(&found.queue), id).await,
            "notfound" => Err(Error::NotFound {
                op,
                id: id.to_string(),
            }),
            status => Err(Error::Conflict {
                op,
                status: status.to_string(),
            }),
        }
    }

    /// Replay up to `limit` dead tasks of `queue`, oldest first, optionally only one tenant's or
    /// one type's, examining at most [`REPLAY_SCAN_MAX`] DLQ entries.
    pub async fn replay_bulk(
        &self,
        queue: &str,
        tenant: Option<&str>,
        task_type: Option<&str>,
        limit: u64,
    ) -> Result<BulkReplay> {
        let op = "replay";
        check_queue(op, queue)?;
        for v in [tenant, task_type].into_iter().flatten() {
            if !is_valid_name(v) {
                return Err(Error::invalid(
                    op,
                    "tenant and type: must match [A-Za-z0-9._-]{1,64}",
                ));
            }
        }
        if limit == 0 || limit > REPLAY_LIMIT_MAX {
            return Err(Error::invalid(
                op,
                format!("limit: must be 1..={REPLAY_LIMIT_MAX}"),
            ));
        }
        let args = vec![
            arg("filter"),
            arg(tenant.unwrap_or("")),
            arg(task_type.unwrap_or("")),
            arg(limit),
            arg(REPLAY_SCAN_MAX),
        ];
        let reply = call(&*self.store, op, queue, args).await?;
        let it = items(op, &reply, "")?;
        Ok(BulkReplay {
            replayed: int_at(op, it, 1)? as u64,
            more: int_at(op, it, 2)? == 1,
        })
    }

    /// Delete a dead task for good. Errors: `NotFound`; `Conflict` when it is not dead.
    pub async fn purge(&self, queue: Option<&str>, id: &str) -> Result<()> {
        let op = "purge";
        let found = self.locate(op, queue, id).await?;
        let reply = call(&*self.store, op, &found.queue, vec![arg(id)]).await?;
        let it = items(op, &reply, id)?;
        let outcome = array_at(op, it, 1)?
            .first()
            .and_then(Resp::as_str)
            .ok_or_else(|| Error::protocol(op, "no per-id result"))?;
        match outcome {
            "purged" => Ok(()),
            "notfound" => Err(Error::NotFound {
                op,
                id: id.to_string(),
            }),
            status => Err(Error::Conflict {
                op,
                status: status.to_string(),
            }),
        }
    }

    /// Pause (`Some(true)`) or resume (`Some(false)`) leasing in `queue`, and/or set its
    /// starvation bound step (`aging_step_ms`, 0 = strict priority; applies at once, to the
    /// tasks already queued too). Submits, promotion and reaping go on while paused.
    pub async fn configure_queue(
        &self,
        queue: &str,
        paused: Option<bool>,
        aging_step_ms: Option<u64>,
    ) -> Result<()> {
        let op = "configure";
        check_queue(op, queue)?;
        self.register_queue(queue, false).await?;
        let args = vec![
            arg("queue"),
            arg(match paused {
                Some(true) => "1",
                Some(false) => "0",
                None => "",
            }),
            aging_step_ms.map(arg).unwrap_or_default(),
            Vec::new(),
        ];
        let reply = call(&*self.store, op, queue, args).await?;
        items(op, &reply, "")?;
        Ok(())
    }

    /// Set (`Some(json)`, at most 4,096 bytes, validated by the caller) or remove (`None`) the
    /// default task options of `queue`, which submitters apply to the fields a submit leaves out.
    pub async fn set_queue_defaults(&self, queue: &str, defaults: Option<&str>) -> Result<()> {
        let op = "configure";
        check_queue(op, queue)?;
        if defaults.is_some_and(|d| d.is_empty() || d == "-") {
            return Err(Error::invalid(op, "defaults: must be a JSON object"));
        }
        self.register_queue(queue, false).await?;
        let args = vec![
            arg("queue"),
            Vec::new(),
            Vec::new(),
            arg(defaults.unwrap_or("-")),
        ];
        let reply = call(&*self.store, op, queue, args).await?;
        items(op, &reply, "")?;
        Ok(())
    }

    /// Change one tenant's share and limits in `queue` (see [`TenantLimits`]).
    /// Errors: `Invalid` naming the field.
    pub async fn configure_tenant(
        &self,
        queue: &str,
        tenant: &str,
        l: &TenantLimits,
    ) -> Result<()> {
        let op = "configure";
        check_queue(op, queue)?;
        if !is_valid_name(tenant) {
            return Err(Error::invalid(
                op,
                "tenant: must match [A-Za-z0-9._-]{1,64}",
            ));
        }
        fn field<T: ToString>(v: &Option<Option<T>>) -> Vec<u8> {
            match v {
                None => Vec::new(),
                Some(None) => b"-".to_vec(),
                Some(Some(x)) => x.to_string().into_bytes(),
            }
        }
        self.register_queue(queue, false).await?;
        let args = vec![
            arg("tenant"),
            arg(tenant),
            field(&l.weight),
            field(&l.max_inflight),
            field(&l.max_queued),
            field(&l.rate_per_s),
            field(&l.burst),
        ];
        let reply = call(&*self.store, op, queue, args).await?;
        items(op, &reply, "")?;
        Ok(())
    }

    /// Wait until `queue` has no queued, scheduled, retrying or leased task, polling every
    /// `poll_ms`, for at most `timeout_ms`. Returns the tasks still waiting or running (0 when
    /// drained).
    pub async fn drain(&self, queue: &str, timeout_ms: u64, poll_ms: u64) -> Result<i64> {
        let start = self.clock.now_ms();
        loop {
            let st = self.stats(queue).await?;
            let left: i64 = [
                Status::Queued,
                Status::Scheduled,
                Status::Retrying,
                Status::Leased,
            ]
            .iter()
            .map(|s| st.counts.get(s).copied().unwrap_or(0))
            .sum();
            if left == 0 || self.clock.now_ms().saturating_sub(start) >= timeout_ms {
                return Ok(left);
            }
            self.clock.sleep(poll_ms.max(1)).await;
        }
    }

    /// Up to `count` (1..=[`EVENTS_PAGE_MAX`]) events of `queue`'s event stream strictly after
    /// the event id `after` (`None`: from the oldest event the stream still holds; it keeps at
    /// least the last 10,000), oldest first. A stream entry holds the events of one call
    /// ([`decode::stream_events`] names each event); a page may end inside one, and the next
    /// read, after the page's last id, goes on from there. Errors: `Invalid` (bad queue, id or
    /// count), `Unavailable`.
    pub async fn events(
        &self,
        queue: &str,
        after: Option<&str>,
        count: usize,
    ) -> Result<Vec<QueueEvent>> {
        let op = "events";
        check_queue(op, queue)?;
        if count == 0 || count > EVENTS_PAGE_MAX {
            return Err(Error::Invalid {
                op,
                message: format!("count must be in 1..={EVENTS_PAGE_MAX}"),
            });
        }
        let reply = call(
            &*self.store,
            op,
            queue,
            vec![arg(after.unwrap_or("")), arg(count)],
        )
        .await?;
        let it = items(op, &reply, "")?;
        let after_id = after.and_then(decode::stream_id);
        let mut out = Vec::new();
        for entry in array_at(op, it, 1)? {
            let e = entry
                .as_array()
                .ok_or_else(|| Error::protocol(op, "stream entry is not an array"))?;
            let fields = e
                .get(1)
                .and_then(Resp::as_array)
                .ok_or_else(|| Error::protocol(op, "stream entry has no field list"))?;
            // A batch entry read from its middle: the events up to `after` were read before.
            out.extend(
                decode::stream_events(str_at(op, e, 0)?, fields)
                    .into_iter()
                    .filter(|ev| after_id.is_none() || decode::stream_id(&ev.stream_id) > after_id),
            );
        }
        out.truncate(count);
        Ok(out)
    }

    /// The workers `queue` has seen in the last hour and the leases each holds (at most
    /// [`WORKERS_MAX`] of each). Errors: `Invalid` (bad queue), `Unavailable`.
    pub async fn workers(&self, queue: &str) -> Result<Workers> {
        let op = "workers";
        check_queue(op, queue)?;
        let reply = call(
            &*self.store,
            op,
            queue,
            vec![arg(WORKERS_MAX), arg(WORKERS_MAX)],
        )
        .await?;
        let it = items(op, &reply, "")?;
        let mut workers: Vec<WorkerInfo> = Vec::new();
        for w in array_at(op, it, 1)? {
            let w = w
                .as_array()
                .ok_or_else(|| Error::protocol(op, "worker entry is not an array"))?;
            workers.push(WorkerInfo {
                id: str_at(op, w, 0)?.to_string(),
                last_seen_ms: int_at(op, w, 1)?,
                leases: Vec::new(),
            });
        }
        for l in array_at(op, it, 2)? {
            let l = l
                .as_array()
                .ok_or_else(|| Error::protocol(op, "lease entry is not an array"))?;
            let lease = WorkerLease {
                task_id: str_at(op, l, 0)?.to_string(),
                task_type: str_at(op, l, 2)?.to_string(),
                tenant: str_at(op, l, 3)?.to_string(),
                leased_at_ms: int_at(op, l, 4)?,
                lease_exp_ms: int_at(op, l, 5)?,
                heartbeat_at_ms: int_at(op, l, 6)?,
            };
            let worker = str_at(op, l, 1)?;
            match workers.iter_mut().find(|w| w.id == worker) {
                Some(w) => w.leases.push(lease),
                None => workers.push(WorkerInfo {
                    id: worker.to_string(),
                    last_seen_ms: lease.heartbeat_at_ms,
                    leases: vec![lease],
                }),
            }
        }
        Ok(Workers {
            now_ms: int_at(op, it, 0)?,
            workers,
            leases_total: int_at(op, it, 3)?.max(0) as u64,
        })
    }

    /// Counts of one queue, overall and per tenant.
    pub async fn stats(&self, queue: &str) -> Result<QueueStats> {
        let op = "stats";
        check_queue(op, queue)?;
        let reply = call(&*self.store, op, queue, vec![arg(STATS_TENANTS_MAX)]).await?;
        let it = items(op, &reply, "")?;
        let fields = decode::field_map(op, array_at(op, it, 1)?)?;
        let counts = |f: &std::collections::HashMap<String, String>| {
            Status::ALL
                .into_iter()
                .map(|s| {
                    let n = f
                        .get(&format!("n:{s}"))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    (s, n)
                })
                .collect::<BTreeMap<_, _>>()
        };
        let totals = fields
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("total:")?.to_string(), v.parse().ok()?)))
            .collect();
        let now_ms = int_at(op, it, 0)? as u64;
        let served_total: f64 = fields
            .get("served")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        let mut tenants = Vec::new();
        for entry in array_at(op, it, 2)? {
            let e = entry
                .as_array()
                .ok_or_else(|| Error::protocol(op, "tenant entry is not an array"))?;
            let tf = decode::field_map(op, array_at(op, e, 1)?)?;
            let get = |k: &str| tf.get(k).and_then(|v| v.parse::<f64>().ok());
            let served = get("served").unwrap_or(0.0);
            // Sliding one-minute window: the previous window counts for what is left of it.
            let minute = (now_ms / 60_000) as f64;
            let elapsed = (now_ms % 60_000) as f64 / 60_000.0;
            let completed_per_s = match get("c_win") {
                Some(w) if w == minute => {
                    (get("c_prev").unwrap_or(0.0) * (1.0 - elapsed) + get("c_cur").unwrap_or(0.0))
                        / 60.0
                }
                Some(w) if w == minute - 1.0 => {
                    get("c_cur").unwrap_or(0.0) * (1.0 - elapsed) / 60.0
                }
                _ => 0.0,
            };
            tenants.push(TenantStats {
                tenant: str_at(op, e, 0)?.to_string(),
                counts: counts(&tf),
                weight: get("weight").unwrap_or(1.0),
                max_inflight: get("max_inflight").map(|v| v as u64),
                max_queued: get("max_queued").map(|v| v as u64),
                rate_per_s: get("rate_per_s"),
                burst: get("burst").map(|v| v as u64),
                served: served as u64,
                share: if served_total > 0.0 {
                    served / served_total
                } else {
                    0.0
                },
                completed_per_s,
                held: match e.get(3).and_then(Resp::as_int) {
                    Some(PARKED_CAPPED) => Some(Held::MaxInflight),
                    Some(at) if at >= 0 => Some(Held::RateLimit {
                        until_ms: at as u64,
                    }),
                    _ => None,
                },
            });
        }
        let config = decode::field_map(op, it.get(5).and_then(Resp::as_array).unwrap_or_default())?;
        Ok(QueueStats {
            queue: queue.to_string(),
            counts: counts(&fields),
            totals,
            tenants,
            paused: config.get("paused").is_some_and(|v| v == "1"),
            defaults: config.get("defaults").filter(|d| !d.is_empty()).cloned(),
            aging_step_ms: config
                .get("aging_step_ms")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            now_ms,
        })
    }
}
