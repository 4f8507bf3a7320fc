//! The completer: the group commit of a lane's successes (one `complete_batch` call per queue
//! carries every completion waiting), which may also lease for the slots its completions free
//! (`complete_and_lease`) and hand those tasks to the lease loop.

use super::decide::ready_work_left;
use super::slots::{Slot, Slots};
use crate::clock::{Clock, Entropy};
use crate::error::Error;
use crate::ops::{self, Completion, Reported, COMPLETE_BATCH_MAX, LEASE_BATCH_MAX};
use crate::store::Store;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Most rounds of completion calls the completer has in flight at once. One: the completions
/// that finish while a round is in the store wait for it and go together in the next, with the
/// slots they free leased in the same call. With two, a completion that finished alone (a
/// handler a little slower than its batch) went at once in a call of its own, leasing one task,
/// and the lane's slots stayed split in two out-of-phase groups: 0.048-0.050 script calls a task
/// in the paired benchmark against 0.045 with one (the lanes of a pool still overlap; design
/// note 58).
const COMPLETER_CALLS_MAX: usize = 1;

/// A success waiting for the completer: the queue, the completion, and where to send its result.
pub(super) type PendingCompletion = (String, Completion, oneshot::Sender<Result<Reported, Error>>);

/// Tasks the completer leased for the pool (a `complete_batch` that also leased): the queue, the
/// lease reply, the slots reserved for them (one per task, in order; those left over are given
/// back), and the local time (ms) just before the call, from which lease deadlines are reckoned.
pub(super) struct Refilled {
    pub(super) queue: String,
    pub(super) leased: ops::Leased,
    pub(super) slots: Vec<Slot>,
    pub(super) pool: Arc<Slots>,
    pub(super) local_ms: u64,
}

/// What the completer needs to refill the slots its completions free in the same call
/// (`ops::complete_and_lease`), and when it may: only for the queue the lease loop has put in
/// [`Refill::queue`] (a pool serving one queue whose last lease left ready work), never after
/// shutdown began.
pub(super) struct Refill {
    /// The lane's slots.
    pub(super) slots: Arc<Slots>,
    /// The lane's concurrency.
    pub(super) concurrency: usize,
    /// The worker id leases are recorded under.
    pub(super) worker: String,
    pub(super) entropy: Arc<Entropy>,
    pub(super) clock: Arc<dyn Clock>,
    /// [`super::WorkerConfig::lease_linger_ms`].
    pub(super) linger_ms: u64,
    /// The queue the completer may refill, set by the lease loop.
    pub(super) queue: std::sync::Mutex<Option<String>>,
    /// The lane's shutdown: no refill after it began.
    pub(super) shutdown: CancellationToken,
    /// Where leased tasks go to the lease loop.
    pub(super) leased: mpsc::UnboundedSender<Refilled>,
}

impl Refill {
    /// Whether the completer may lease for `queue` now.
    pub(super) fn allowed(&self, queue: &str) -> bool {
        !self.shutdown.is_cancelled()
            && self
                .queue
                .lock()
                .map(|q| q.as_deref() == Some(queue))
                .unwrap_or(false)
    }

    /// Let the completer refill `queue` (or no queue, with `None`).
    pub(super) fn set(&self, queue: Option<String>) {
        if let Ok(mut q) = self.queue.lock() {
            *q = queue;
        }
    }
}

/// The group commit of successes: takes every completion waiting when it is free, and records
/// them with one `complete_batch` call per queue (up to [`COMPLETE_BATCH_MAX`] items each), so
/// under load one call carries many tasks while a lone completion is sent at once. Up to
/// [`COMPLETER_CALLS_MAX`] such rounds are in flight at once. Each sender gets its item's own
/// result (or the call's error). Runs until every sender is gone, then lets its rounds finish.
///
/// With `refill` allowed for the queue, the last call of a queue's group also leases tasks for
/// every free slot of the pool (reserved before the call, so the lease loop cannot lease them
/// too), and hands them to the lease loop to run: the slots a batch of completions frees are
/// refilled in the same round trip. It then first lingers, as the lease loop does
/// ([`WorkerConfig::lease_linger_ms`]), until every handler has returned or the linger is over,
/// so that one call carries the completions of most of the pool.
pub(super) async fn complete_in_batches(
    store: Arc<dyn Store>,
    mut rx: mpsc::UnboundedReceiver<PendingCompletion>,
    refill: Arc<Refill>,
) {
    // Up to COMPLETER_CALLS_MAX rounds in flight: while a round's calls run, the completions
    // that arrive meanwhile wait for the next round.
    let permits = Arc::new(tokio::sync::Semaphore::new(COMPLETER_CALLS_MAX));
    let mut rounds: JoinSet<()> = JoinSet::new();
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        while rounds.try_join_next().is_some() {}
        let Some(first) = rx.recv().await else {
            break;
        };
        let mut pending = vec![first];
        while let Ok(next) = rx.try_recv() {
            pending.push(next);
        }
        if refill.linger_ms > 0 && refill.allowed(&pending[0].0) {
            let until = refill.clock.sleep(refill.linger_ms);
            tokio::pin!(until);
            while refill.slots.handlers() > 0 {
                tokio::select! {
                    biased;
                    _ = &mut until => break,
                    next = rx.recv() => match next {
                        Some(p) => pending.push(p),
                        None => break,
                    },
                }
            }
            while let Ok(next) = rx.try_recv() {
                pending.push(next);
            }
        }
        // Grouped by queue in first-seen order (deterministic under the simulator).
        let mut groups: Vec<(String, Vec<PendingCompletion>)> = Vec::new();
        for p in pending {
            match groups.iter_mut().find(|(q, _)| *q == p.0) {
                Some((_, g)) => g.push(p),
                None => groups.push((p.0.clone(), vec![p])),
            }
        }
        let store = store.clone();
        let refill = refill.clone();
        rounds.spawn(async move {
            for (queue, group) in groups {
                complete_group(&*store, &refill, &queue, group).await;
            }
            drop(permit);
        });
    }
    // Every sender is gone: let the rounds in flight answer their senders.
    while rounds.join_next().await.is_some() {}
}

/// One queue's completions of a round, in calls of up to [`COMPLETE_BATCH_MAX`]; the last call
/// also leases for the free slots when refilling `queue` is allowed.
async fn complete_group(
    store: &dyn Store,
    refill: &Refill,
    queue: &str,
    group: Vec<PendingCompletion>,
) {
    let mut group = group.into_iter().peekable();
    while group.peek().is_some() {
        let chunk: Vec<PendingCompletion> = group.by_ref().take(COMPLETE_BATCH_MAX).collect();
        let batch: Vec<Completion> = chunk.iter().map(|p| p.1.clone()).collect();
        let last = group.peek().is_none();
        let reply = match last.then(|| reserve(refill, queue)).flatten() {
            Some((slots, local_ms)) => {
                complete_and_refill(store, refill, queue, &batch, slots, local_ms).await
            }
            None => ops::complete_batch(store, queue, &batch).await,
        };
        match reply {
            Ok((_, results)) => {
                for (p, r) in chunk.into_iter().zip(results) {
                    let _ = p.2.send(r);
                }
            }
            Err(e) => {
                for p in chunk {
                    let _ = p.2.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Reserve every free slot of the pool (at most [`LEASE_BATCH_MAX`]) for a refill of `queue`;
/// `None` when refilling it is not allowed or no slot is free. Also returns the local time.
fn reserve(refill: &Refill, queue: &str) -> Option<(Vec<Slot>, u64)> {
    if !refill.allowed(queue) {
        return None;
    }
    let slots = Slot::reserve(&refill.slots, LEASE_BATCH_MAX, refill.concurrency);
    if slots.is_empty() {
        return None;
    }
    Some((slots, refill.clock.now_ms()))
}

/// One `complete_and_lease` call: the completions' results, the leased tasks sent to the lease
/// loop with their reserved slots. When the call is refused (not an outage), the completions are
/// sent again without the lease, so a lease-side refusal costs no completion.
async fn complete_and_refill(
    store: &dyn Store,
    refill: &Refill,
    queue: &str,
    batch: &[Completion],
    slots: Vec<Slot>,
    local_ms: u64,
) -> Result<(u64, Vec<Result<Reported, Error>>), Error> {
    let bits = refill.entropy.token_bits();
    let request = ops::LeaseRequest {
        worker: &refill.worker,
        n: slots.len(),
        token_bits: &bits,
        seed: refill.entropy.unit(),
    };
    match ops::complete_and_lease(store, queue, batch, &request).await {
        Ok((now, results, leased)) => {
            // No ready work left: the lease loop takes over (it waits for what is due next).
            if !ready_work_left(leased.now_ms, leased.next_ms) {
                refill.set(None);
            }
            let refilled = Refilled {
                queue: queue.to_string(),
                leased,
                slots,
                pool: refill.slots.clone(),
                local_ms,
            };
            if let Err(mpsc::error::SendError(r)) = refill.leased.send(refilled) {
                // The pool has stopped: nobody will run these; their leases expire.
                tracing::warn!(queue = %queue, tasks = r.leased.tasks.len(),
                    "leased tasks after the pool stopped; their leases will expire");
                r.slots.into_iter().for_each(Slot::give_back);
            }
            Ok((now, results))
        }
        // The reserved slots go back with a wake-up: the lease loop may be waiting for them.
        Err(e) if e.is_unavailable() => {
            drop(slots);
            Err(e)
        }
        Err(e) => {
            drop(slots);
            refill.set(None);
            tracing::warn!(queue = %queue, error = %e,
                "complete with lease refused; completing without it");
            ops::complete_batch(store, queue, batch).await
        }
    }
}
