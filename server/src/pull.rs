//! The worker protocol's lease call as a long poll: lease up to `count` tasks from some queues
//! for an HTTP worker, and when none is ready wait for the store's wake-ups (the ones the Rust
//! worker waits for, `Store::wake`) up to `wait_ms`, leasing again after each. The transitions
//! are the engine's (`orq::ops`): one code path in the store for both kinds of worker.
//!
//! A lease whose answer never reaches the worker (it hung up, the connection broke) is not lost:
//! the task stays leased until its deadline, is then reaped and retried, with the attempt spent,
//! exactly as a Rust worker's lost lease reply (docs/design-notes.md, note 33).

use crate::error::ApiError;
use crate::names::Name;
use orq::ops::{self, Leased};
use orq::{Client, Clock, Task};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Longest wait of one lease call for work (ms).
pub const LEASE_WAIT_MS_MAX: u64 = 30_000;
/// Most queues one lease call names.
pub const LEASE_QUEUES_MAX: usize = 16;
/// Longest time between two lease tries of a waiting call (ms): a wake-up the store lost (a
/// reconnect, a store without wake-ups) delays work by at most this.
pub const LEASE_RETRY_MS: u64 = 1_000;
/// How long the known queues are cached (ms): a queue created meanwhile is looked up again
/// before a lease naming it is refused.
pub const QUEUES_CACHE_MS: u64 = 1_000;

/// The queue registry as read at a local time (ms).
type QueuesRead = (u64, BTreeSet<String>);

/// The queue registry as last read, shared by the API's lease calls.
#[derive(Clone, Default)]
pub struct QueuesCache(Arc<Mutex<Option<QueuesRead>>>);

impl QueuesCache {
    /// The registry as cached, read again when the copy is older than [`QUEUES_CACHE_MS`] or
    /// lacks one of `want` (so a queue created meanwhile is looked up before it is refused).
    async fn known_with(
        &self,
        client: &Client,
        clock: &dyn Clock,
        want: &[&str],
    ) -> Result<BTreeSet<String>, ApiError> {
        let now = clock.now_ms();
        if let Some((at, known)) = &*self.0.lock().unwrap() {
            if now.saturating_sub(*at) < QUEUES_CACHE_MS && want.iter().all(|q| known.contains(*q))
            {
                return Ok(known.clone());
            }
        }
        let known: BTreeSet<String> = client.queues().await?.into_iter().collect();
        *self.0.lock().unwrap() = Some((now, known.clone()));
        Ok(known)
    }

    /// Whether the registry holds `queue` (read as [`QueuesCache::check`] reads it).
    pub async fn knows(
        &self,
        client: &Client,
        clock: &dyn Clock,
        queue: &str,
    ) -> Result<bool, ApiError> {
        let now = clock.now_ms();
        if let Some((at, known)) = &*self.0.lock().unwrap() {
            if now.saturating_sub(*at) < QUEUES_CACHE_MS && known.contains(queue) {
                return Ok(true); // the common case: no copy, no store call
            }
        }
        Ok(self
            .known_with(client, clock, &[queue])
            .await?
            .contains(queue))
    }

    /// Forget the cached copy (after a queue was deleted).
    pub fn forget(&self) {
        *self.0.lock().unwrap() = None;
    }

    /// 404 naming the first of `queues` the registry does not hold. Reads the registry when the
    /// cached copy is older than [`QUEUES_CACHE_MS`] or lacks one of them.
    pub async fn check(
        &self,
        client: &Client,
        clock: &dyn Clock,
        queues: &[Name],
    ) -> Result<(), ApiError> {
        let now = clock.now_ms();
        if let Some((at, known)) = &*self.0.lock().unwrap() {
            if now.saturating_sub(*at) < QUEUES_CACHE_MS
                && queues.iter().all(|q| known.contains(q.as_str()))
            {
                return Ok(()); // the common case: no copy, no store call
            }
        }
        let want: Vec<&str> = queues.iter().map(|q| q.as_str()).collect();
        let known = self.known_with(client, clock, &want).await?;
        match queues.iter().find(|q| !known.contains(q.as_str())) {
            None => Ok(()),
            Some(q) => Err(ApiError::not_found(format!(
                "queues: no queue named {q} (a queue exists once a task was submitted to it)"
            ))),
        }
    }
}

/// One lease call of an HTTP worker.
pub struct PullRequest<'a> {
    /// The worker's id.
    pub worker: &'a str,
    /// The queues, checked (valid, distinct, known).
    pub queues: &'a [Name],
    /// The tenants whose tasks to lease (valid, distinct, at most `ops::LEASE_TENANTS_MAX`;
    /// empty: every tenant's).
    pub tenants: &'a [String],
    /// Most tasks (1..=`ops::LEASE_BATCH_MAX`).
    pub count: usize,
    /// Longest wait for work (ms, at most [`LEASE_WAIT_MS_MAX`]).
    pub wait_ms: u64,
}

/// Lease for `req`: tasks as soon as some are leased, or none once `req.wait_ms` has passed (by
/// `clock`) or `shutdown` is cancelled. Each pass asks the queues in turn from a random one, so
/// a worker of several queues is fair to them. A leased task whose record cannot be decoded is
/// failed permanently, as the Rust worker does. Errors: the store's, when nothing was leased
/// (after a lease, the error is logged and the tasks are answered).
pub async fn lease(
    client: &Client,
    clock: &dyn Clock,
    req: PullRequest<'_>,
    shutdown: &CancellationToken,
) -> Result<Vec<Task>, orq::Error> {
    let store = client.store();
    let channels: Vec<String> = req
        .queues
        .iter()
        .map(|q| orq::keys::wake_channel(q))
        .collect();
    // Listen before the first try: a wake-up published during it ends the wait at once.
    let mut wake = if req.wait_ms > 0 {
        store.wake(&channels)
    } else {
        None
    };
    let deadline = clock.now_ms().saturating_add(req.wait_ms);
    let start = (client.entropy().next_u64() % req.queues.len() as u64) as usize;
    loop {
        if let Some(rx) = &mut wake {
            rx.borrow_and_update();
        }
        let (tasks, due_in_ms) = lease_pass(client, &req, start).await?;
        let now = clock.now_ms();
        if !tasks.is_empty() || now >= deadline || shutdown.is_cancelled() {
            return Ok(tasks);
        }
        let pause = (deadline - now).min(LEASE_RETRY_MS).min(due_in_ms.max(1));
        let woken = async {
            match &mut wake {
                Some(rx) => {
                    if rx.changed().await.is_err() {
                        std::future::pending::<()>().await
                    }
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = woken => {}
            _ = tokio::time::sleep(Duration::from_millis(pause)) => {}
            _ = shutdown.cancelled() => {}
        }
    }
}

/// One lease call per queue, from `start` in turn, until `req.count` tasks are leased. Returns
/// the tasks and how soon (store ms) a scheduled task falls due (`u64::MAX`: none waiting).
async fn lease_pass(
    client: &Client,
    req: &PullRequest<'_>,
    start: usize,
) -> Result<(Vec<Task>, u64), orq::Error> {
    let store = &**client.store();
    let entropy = client.entropy();
    let mut tasks: Vec<Task> = Vec::new();
    let mut due_in = u64::MAX;
    let n = req.queues.len();
    for k in 0..n {
        let want = req.count - tasks.len();
        if want == 0 {
            break;
        }
        let queue = &req.queues[(start + k) % n];
        let bits = entropy.token_bits();
        let batch: Leased = match ops::lease_among(
            store,
            queue,
            req.worker,
            want,
            &bits,
            entropy.unit(),
            req.tenants,
        )
        .await
        {
            Ok(b) => b,
            Err(e) if tasks.is_empty() => return Err(e),
            Err(e) => {
                // The tasks leased so far go to the worker; the other queues wait for its
                // next call.
                tracing::warn!(worker = %req.worker, queue = %queue, error = %e,
                        "a lease call of an HTTP worker was refused after others leased");
                break;
            }
        };
        if let Some(next) = batch.next_ms {
            due_in = due_in.min(next.saturating_sub(batch.now_ms));
        }
        for bad in batch.corrupt {
            ops::fail_corrupt(store, queue, bad).await;
        }
        tasks.extend(batch.tasks);
    }
    Ok((tasks, due_in))
}
