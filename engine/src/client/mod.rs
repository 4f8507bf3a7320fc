//! The client: submit, read, list, cancel, and manage the DLQ. Every operation is one script call
//! (a by-id call without a queue asks every known queue, concurrently).
//!
//! This file holds [`Client`] itself, the limits of its calls, the script call and argument
//! helpers its operations share, and the queue registry; the operations are one concern per file:
//!
//! - `submit`: submitting tasks (one, or a batch validated as a whole).
//! - `reads`: reading tasks, list pages, the event stream, workers and stats.
//! - `admin`: cancel, replay (one or in bulk), purge, queue and tenant settings, drain.
//! - `types`: the queries and replies of those operations (re-exported here).

mod admin;
mod coalesce;
mod lifecycle;
mod reads;
mod submit;
mod types;

pub use lifecycle::{Created, Deleted, CREATE_QUEUES_MAX, DROP_BOUND, DROP_ROUNDS_MAX};
pub use types::{
    BulkReplay, Held, ListQuery, OldestReady, Page, QueueEvent, QueueStats, StatsQuery, Submitted,
    TenantLimits, TenantStats, WorkerInfo, WorkerLease, Workers,
};

use crate::clock::{Clock, Entropy};
use crate::decode::{array_at, items};
use crate::error::{Error, Result};
use crate::failure::Transient;
use crate::keys::{is_valid_name, is_valid_task_id, queue_keys, QUEUES_KEY};
use crate::metrics::metrics;
use crate::resp::Resp;
use crate::store::Store;
use orq_lua::script;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

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
/// Most tenants whose ready lists one stats call reads for the oldest ready task.
pub const STATS_OLDEST_AMONG_MAX: u64 = 1000;
/// Largest position of a stats call's first tenant.
pub const STATS_OFFSET_MAX: u64 = 1_000_000_000;
/// Most DLQ entries one bulk replay examines.
pub const REPLAY_SCAN_MAX: u64 = 100_000;
/// Most tasks one bulk replay puts back.
pub const REPLAY_LIMIT_MAX: u64 = 10_000;

/// Score of a tenant parked at its `max_inflight` (2^53 - 1, the scripts' `FACTS.parked_capped`).
const PARKED_CAPPED: i64 = orq_lua::facts::PARKED_CAPPED as i64;

/// Most entries [`Client::events`] returns per call.
pub const EVENTS_PAGE_MAX: usize = 1000;
/// Most workers and leases [`Client::workers`] reports.
pub const WORKERS_MAX: u64 = 1000;

/// Submits and manages tasks. Cheap to clone (shared state behind `Arc`).
#[derive(Clone)]
pub struct Client {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    entropy: Arc<Entropy>,
    registered: Arc<Mutex<HashSet<String>>>,
    /// Natural batching of single submits ([`Client::coalescing`]); None: each submit is its
    /// own call.
    coalescer: Option<Arc<coalesce::Coalescer>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

/// Call the script `op` on `queue`'s keys (see [`eval`]).
pub(crate) async fn call(
    store: &dyn Store,
    op: &'static str,
    queue: &str,
    args: Vec<Vec<u8>>,
) -> Result<Resp> {
    eval(store, op, op, &queue_keys(queue), &args).await
}

/// Call the script `name` (errors name `op`), timed and counted in the process's metrics
/// ([`crate::metrics`]): the call's duration, and a refusal (`OOM`, `LOADING`, ...) or a lost
/// call by kind. Errors: `Unavailable` (unreachable) when the store did not answer; a script's
/// error reply is returned as [`Resp::Error`] for the caller to decode.
pub(crate) async fn eval(
    store: &dyn Store,
    name: &'static str,
    op: &'static str,
    keys: &[String],
    args: &[Vec<u8>],
) -> Result<Resp> {
    let started = Instant::now();
    let reply = store.eval(script(name), keys, args).await;
    let refused = match &reply {
        Err(_) => Some(Transient::Unreachable),
        Ok(Resp::Error(text)) => Transient::of_reply(text),
        Ok(_) => None,
    };
    metrics().store_call(name, started.elapsed().as_secs_f64(), refused);
    reply.map_err(|e| Error::unreachable(op, e.0))
}

/// Most queues a by-id lookup without a queue searches ([`Client::get`] with `queue: None`,
/// cancel, replay, purge): beyond, it is refused and asks for the queue. Each queue searched is
/// one script call, so an unbounded search let one caller's lookups slow every tenant's calls.
pub const LOOKUP_QUEUES_MAX: usize = 64;

/// `Invalid` asking for the queue when a lookup would search `n` queues, more than
/// [`LOOKUP_QUEUES_MAX`].
fn check_lookup_width(op: &'static str, n: usize) -> Result<()> {
    if n <= LOOKUP_QUEUES_MAX {
        return Ok(());
    }
    Err(Error::invalid(
        op,
        format!(
            "queue: required here: a lookup without a queue searches at most \
             {LOOKUP_QUEUES_MAX} queues, and more than that may hold this task; name the \
             task's queue (?queue=)"
        ),
    ))
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
            coalescer: None,
        }
    }

    /// The store this client talks to.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The randomness this client draws task ids from (also lease token bits and jitter for
    /// callers that lease through it, as the HTTP worker protocol does).
    pub fn entropy(&self) -> &Arc<Entropy> {
        &self.entropy
    }

    /// Record `queue` in the queue registry: once per process per queue, or again when `force`
    /// (the store said the queue is new to it, so it lost its data since our last record).
    /// Returns whether a record was sent.
    pub(super) async fn register_queue(&self, queue: &str, force: bool) -> Result<bool> {
        if !force && self.registered.lock().unwrap().contains(queue) {
            return Ok(false);
        }
        eval(
            &*self.store,
            "queues",
            "submit",
            &[QUEUES_KEY.to_string()],
            &[arg("add"), arg(queue)],
        )
        .await?;
        self.registered.lock().unwrap().insert(queue.to_string());
        Ok(true)
    }

    /// Check that the store accepts writes now (readiness): a write that changes nothing, which
    /// Redis refuses as it refuses any write at `maxmemory`, on a replica or while loading.
    /// Errors: `Unavailable` with the refusal's cause, `Protocol` (foreign data in the registry).
    pub async fn probe_writes(&self) -> Result<()> {
        let op = "probe";
        let reply = eval(
            &*self.store,
            "queues",
            op,
            &[QUEUES_KEY.to_string()],
            &[arg("probe")],
        )
        .await?;
        items(op, &reply, "").map(|_| ())
    }

    /// Every queue that ever received a task, sorted by name.
    pub async fn queues(&self) -> Result<Vec<String>> {
        let op = "queues";
        let reply = eval(
            &*self.store,
            op,
            op,
            &[QUEUES_KEY.to_string()],
            &[arg("list")],
        )
        .await?;
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
}
