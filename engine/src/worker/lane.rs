//! The lease loop of one lane: it takes tasks from the completer's refills, stands back while
//! the completer refills, lingers for more free slots, reads the queue list, leases from each
//! queue in turn into free slots (backing off a refused queue and a store outage), waits idle for
//! a wake-up, a freed slot or its poll, and at shutdown lets handlers finish within the grace
//! before releasing the rest. What to do at each step is decided by `decide`; this file only
//! sequences the calls.

use super::completer::{complete_in_batches, PendingCompletion, Refill, Refilled};
use super::decide::{self, Refused};
use super::slots::{Slot, Slots};
use super::Worker;
use crate::episode::Episode;
use crate::ops;
use crate::task::Task;
use futures::future::BoxFuture;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// The wake-up channels of a pool serving `queues` (every known queue, and new ones, when
/// `all`).
fn wake_channels(queues: &[String], all: bool) -> Vec<String> {
    let mut c: Vec<String> = queues
        .iter()
        .map(|q| crate::keys::wake_channel(q))
        .collect();
    if all {
        c.push(crate::keys::QUEUES_WAKE_CHANNEL.to_string());
    }
    c
}

/// Until the wake-up receiver changes (never when there is none, or its sender is gone).
async fn woken(rx: &mut Option<tokio::sync::watch::Receiver<u64>>) {
    if let Some(r) = rx {
        if r.changed().await.is_ok() {
            return;
        }
    }
    std::future::pending::<()>().await
}

/// Why the run loop woke up (see [`wake`]).
enum Wake {
    /// The completer leased tasks for the pool.
    Refilled(Refilled),
    /// The timer given to [`wake`] ran out.
    Timer,
    /// A handler returned, a task finished, or shutdown began.
    Other,
}

/// Wait until the completer hands over leased tasks, a task of `in_flight` finishes, a slot is
/// freed, shutdown begins, or `timer` (when given) runs out.
async fn wake(
    in_flight: &mut JoinSet<()>,
    leased: &mut mpsc::UnboundedReceiver<Refilled>,
    slots: &Slots,
    shutdown: &CancellationToken,
    timer: Option<&mut BoxFuture<'static, ()>>,
) -> Wake {
    let timer = async {
        match timer {
            Some(t) => t.await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        r = leased.recv() => r.map_or(Wake::Other, Wake::Refilled),
        _ = in_flight.join_next(), if !in_flight.is_empty() => Wake::Other,
        _ = slots.freed.notified() => Wake::Other,
        _ = shutdown.cancelled() => Wake::Other,
        _ = timer => Wake::Timer,
    }
}

impl Worker {
    /// Lane `lane` of [`Worker::run`]: this pool's whole concurrency, one lease loop, one
    /// completer.
    pub(super) async fn run_lane(&self, lane: usize, shutdown: CancellationToken) {
        let inner = &self.inner;
        let hard_stop = CancellationToken::new();
        let mut in_flight: JoinSet<()> = JoinSet::new();
        // The completer lives in a set of its own, so that it stops when this future is dropped.
        let mut completer: JoinSet<()> = JoinSet::new();
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let (leased_tx, mut leased_rx) = mpsc::unbounded_channel::<Refilled>();
        let slots = Arc::new(Slots::default());
        let refill = Arc::new(Refill {
            slots: slots.clone(),
            concurrency: inner.config.concurrency,
            worker: inner.config.id.clone(),
            entropy: inner.entropy.clone(),
            clock: inner.clock.clone(),
            linger_ms: inner.config.lease_linger_ms,
            queue: std::sync::Mutex::new(None),
            shutdown: shutdown.clone(),
            leased: leased_tx,
        });
        completer.spawn(complete_in_batches(
            inner.store.clone(),
            done_rx,
            refill.clone(),
        ));
        let mut queues: Vec<String> = inner.config.queues.clone();
        let mut queues_refreshed_ms = 0u64;
        // The store's wake-ups for the queues served (None: the store gives none), and the queue
        // list they were asked for.
        let all_queues = inner.config.queues.is_empty();
        let mut wake_rx: Option<tokio::sync::watch::Receiver<u64>> = None;
        let mut wake_for: Option<Vec<String>> = None;
        // Whether the last round leased nothing (the pool is idle).
        let mut idle = true;
        let mut rotate = 0usize;
        // Queues whose lease calls were refused (not a store outage).
        let mut refused = Refused::default();
        // A run of transient store failures of this lane's lease calls (logged at its start and
        // end; the lane retries after a doubling wait instead of its idle poll).
        let mut outage = Episode::default();
        tracing::debug!(worker = %inner.config.id, lane, concurrency = inner.config.concurrency, "lane started");
        let concurrency = inner.config.concurrency;
        // While the loop leaves the free slots to the completer: the timer that bounds it, and
        // whether it has run out (the loop then leases itself until the wait is over).
        let mut stand_back: Option<BoxFuture<'static, ()>> = None;
        let mut stood_back = false;
        while !shutdown.is_cancelled() {
            while in_flight.try_join_next().is_some() {}
            while let Ok(r) = leased_rx.try_recv() {
                self.spawn_refilled(r, &mut in_flight, &hard_stop, &done_tx)
                    .await;
            }
            // While the completer refills the slots (one queue, ready work left), the loop
            // stands back as long as completions are on their way to it (tasks whose handler
            // returned and whose outcome is being reported); it leases again itself once none
            // are, so slots freed by failures or long handlers never wait for a success.
            // It stands back for at most the linger plus an idle poll in a row (one timer, so a
            // clock that stands still cannot keep it waiting), so a completion call that hangs
            // does not hold the free slots.
            let refilling = refill.queue.lock().map(|q| q.is_some()).unwrap_or(false);
            if decide::stands_back(in_flight.len(), slots.handlers(), refilling) {
                if stand_back.is_none() {
                    let ms = decide::stand_back_ms(
                        inner.config.lease_linger_ms,
                        inner.config.idle_poll_ms,
                    );
                    stand_back = Some(inner.clock.sleep(ms));
                }
            } else {
                stand_back = None;
                stood_back = false;
            }
            if let (Some(timer), false) = (stand_back.as_mut(), stood_back) {
                match wake(
                    &mut in_flight,
                    &mut leased_rx,
                    &slots,
                    &shutdown,
                    Some(timer),
                )
                .await
                {
                    Wake::Refilled(r) => {
                        self.spawn_refilled(r, &mut in_flight, &hard_stop, &done_tx)
                            .await
                    }
                    Wake::Timer => stood_back = true,
                    Wake::Other => {}
                }
                continue;
            }
            // Free slots: handlers not running. Tasks whose handler returned but whose outcome is
            // still being recorded hold none, but at most `concurrency` of them may wait.
            let free_now = |in_flight: &JoinSet<()>| {
                decide::free_slots(
                    concurrency,
                    slots.running.load(Ordering::SeqCst),
                    in_flight.len(),
                )
            };
            let mut free = free_now(&in_flight);
            if free == 0 {
                if let Wake::Refilled(r) =
                    wake(&mut in_flight, &mut leased_rx, &slots, &shutdown, None).await
                {
                    self.spawn_refilled(r, &mut in_flight, &hard_stop, &done_tx)
                        .await;
                }
                continue;
            }
            // Lease batching (WorkerConfig::lease_linger_ms): busy, with handlers running, wait
            // a moment for more slots to free so that the next call carries more tasks.
            let linger = inner.config.lease_linger_ms;
            let running = slots.running.load(Ordering::SeqCst);
            if decide::lingers(idle, linger, free, concurrency, running) {
                let until = inner.clock.sleep(linger);
                tokio::pin!(until);
                while free < concurrency {
                    let mut got = None;
                    tokio::select! {
                        biased;
                        _ = shutdown.cancelled() => break,
                        _ = &mut until => break,
                        // Tasks the completer leased meanwhile run at once.
                        r = leased_rx.recv() => got = r,
                        _ = slots.freed.notified() => {}
                        _ = in_flight.join_next(), if !in_flight.is_empty() => {}
                    }
                    if let Some(r) = got {
                        self.spawn_refilled(r, &mut in_flight, &hard_stop, &done_tx)
                            .await;
                    }
                    free = free_now(&in_flight);
                }
                free = free_now(&in_flight);
                if free == 0 {
                    continue;
                }
            }
            let now = inner.clock.now_ms();
            let poll_ms = decide::poll_ms(inner.config.idle_poll_ms, wake_rx.is_some());
            let refresh_ms = decide::queue_refresh_ms(idle, inner.config.idle_poll_ms, poll_ms);
            if decide::refresh_queues(
                all_queues,
                queues.len(),
                now,
                queues_refreshed_ms,
                refresh_ms,
            ) {
                match inner.client.queues().await {
                    Ok(q) => {
                        queues = q;
                        queues_refreshed_ms = now;
                    }
                    // Part of the lane's outage episode: logged at its start only.
                    Err(e) if e.is_unavailable() => {
                        if outage.failed(now).started {
                            tracing::warn!(worker = %inner.config.id, error = %e,
                                "cannot list queues; backing off until the store answers");
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot list queues"),
                }
            }
            if wake_for.as_ref() != Some(&queues) {
                wake_rx = inner.store.wake(&wake_channels(&queues, all_queues));
                wake_for = Some(queues.clone());
            }
            // Seen: a wake-up published from here on (during this round's calls too) ends the
            // idle wait below at once.
            if let Some(rx) = wake_rx.as_mut() {
                rx.borrow_and_update();
            }
            let mut wait_ms = poll_ms;
            let mut leased_any = false;
            for k in 0..queues.len() {
                if free == 0 {
                    break;
                }
                let queue = &queues[(rotate + k) % queues.len()];
                if refused.waiting(queue, now) {
                    continue;
                }
                // Reserved before the call (and only what is still free now), so the completer
                // cannot lease these slots too.
                let mut reserved = Slot::reserve(&slots, decide::lease_ask(free), concurrency);
                let n = reserved.len();
                if n == 0 {
                    break;
                }
                let bits = inner.entropy.token_bits();
                match ops::lease(
                    &*inner.store,
                    queue,
                    &inner.config.id,
                    n,
                    &bits,
                    inner.entropy.unit(),
                )
                .await
                {
                    Ok(batch) => {
                        refused.answered(queue);
                        if let Some((failures, lasted_ms)) = outage.recovered(now) {
                            tracing::info!(worker = %inner.config.id, failures, lasted_ms,
                                "the store takes lease calls again");
                        }
                        // The completer refills this queue's slots while it has ready work and
                        // is the pool's only queue (with several, this loop's rotation keeps
                        // them fair).
                        let more = decide::ready_work_left(batch.now_ms, batch.next_ms);
                        refill.set(decide::refills(more, queues.len()).then(|| queue.clone()));
                        for bad in batch.corrupt {
                            self.fail_corrupt(queue, bad).await;
                        }
                        wait_ms = decide::wait_until_due(wait_ms, batch.now_ms, batch.next_ms);
                        for task in batch.tasks {
                            leased_any = true;
                            free -= 1;
                            let slot = match reserved.pop() {
                                Some(s) => s.assign(),
                                None => Slot::take(&slots),
                            };
                            self.spawn_task(
                                &mut in_flight,
                                task,
                                slot,
                                now,
                                batch.now_ms,
                                &hard_stop,
                                &done_tx,
                            );
                        }
                    }
                    Err(e) if e.is_unavailable() => {
                        let retry = outage.failed(now);
                        if retry.started {
                            tracing::warn!(worker = %inner.config.id, queue = %queue, error = %e,
                                "the store refused a lease call; backing off until it answers");
                        }
                        wait_ms = wait_ms.min(retry.wait_ms);
                        // The store refuses now: the other queues wait for the next round.
                        reserved.into_iter().for_each(Slot::give_back);
                        break;
                    }
                    Err(e) => {
                        let (refusals, wait) =
                            refused.refused(queue, now, inner.config.idle_poll_ms);
                        tracing::warn!(queue = %queue, error = %e, refusals, wait_ms = wait,
                            "lease refused; asking this queue again later");
                    }
                }
                reserved.into_iter().for_each(Slot::give_back);
            }
            rotate = rotate.wrapping_add(1);
            idle = !leased_any;
            if lane == 0 {
                inner
                    .lanes
                    .first_polling
                    .store(!leased_any, Ordering::SeqCst);
            }
            if leased_any {
                // Work has come: the pool's idle lanes ask too.
                inner.lanes.wake.notify_waiters();
            } else {
                // An idle lane other than the first polls LANE_IDLE_FACTOR times less often
                // while the first one polls too and nothing is due sooner: the first lane's
                // polls find new work and wake it, so a pool of lanes asks an idle store about
                // as often as one lane does. (While the first lane is busy, the others poll as
                // usual, so new work never waits for a busy lane.)
                let first_polling = inner.lanes.first_polling.load(Ordering::SeqCst);
                let wait_ms =
                    decide::idle_wait_ms(lane, wait_ms, inner.config.idle_poll_ms, first_polling);
                let sleep = inner.clock.sleep(wait_ms);
                let mut got = None;
                tokio::select! {
                    biased;
                    _ = sleep => {}
                    _ = shutdown.cancelled() => {}
                    r = leased_rx.recv() => got = r,
                    _ = slots.freed.notified() => {}
                    _ = inner.lanes.wake.notified() => {}
                    // The store's wake-up: work was made ready, or (serving every queue) a
                    // queue is new, so the list is read again.
                    _ = woken(&mut wake_rx) => {
                        if all_queues {
                            queues_refreshed_ms = 0;
                        }
                    }
                    Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
                }
                if let Some(r) = got {
                    self.spawn_refilled(r, &mut in_flight, &hard_stop, &done_tx)
                        .await;
                }
            }
        }
        self.stop_lane(in_flight, leased_rx, hard_stop, done_tx, completer)
            .await;
        tracing::debug!(worker = %inner.config.id, lane, "lane stopped");
    }

    /// The end of a lane once shutdown began: let its handlers (and those of tasks the
    /// completer leased meanwhile) finish within [`super::WorkerConfig::shutdown_grace_ms`], then
    /// abort the rest (their tasks are released); stop the completer, and release what its last
    /// call leased after the last handler finished.
    async fn stop_lane(
        &self,
        mut in_flight: JoinSet<()>,
        mut leased_rx: mpsc::UnboundedReceiver<Refilled>,
        hard_stop: CancellationToken,
        done_tx: mpsc::UnboundedSender<PendingCompletion>,
        mut completer: JoinSet<()>,
    ) {
        // Graceful shutdown: wait for in-flight handlers, then abort and release the rest.
        let grace = self.inner.clock.sleep(self.inner.config.shutdown_grace_ms);
        tokio::pin!(grace);
        // Tasks the completer leased in a call that was in flight when shutdown began run too.
        loop {
            while let Ok(r) = leased_rx.try_recv() {
                self.spawn_refilled(r, &mut in_flight, &hard_stop, &done_tx)
                    .await;
            }
            if in_flight.is_empty() {
                break;
            }
            tokio::select! {
                biased;
                _ = in_flight.join_next() => {}
                _ = &mut grace => {
                    hard_stop.cancel();
                    while in_flight.join_next().await.is_some() {}
                    break;
                }
            }
        }
        drop(done_tx);
        completer.abort_all();
        // Leased after the last handler finished (the completer's last call): give them back.
        leased_rx.close();
        while let Ok(r) = leased_rx.try_recv() {
            for bad in r.leased.corrupt {
                self.fail_corrupt(&r.queue, bad).await;
            }
            for task in r.leased.tasks {
                if let Some(lease) = &task.lease {
                    if let Err(e) =
                        ops::release(&*self.inner.store, &r.queue, &task.id, &lease.token).await
                    {
                        tracing::warn!(task = %task.id, error = %e, "release at shutdown failed");
                    }
                }
            }
        }
    }

    /// Run one leased task in `in_flight`, holding `slot`. Its lease deadline by the local clock
    /// is `local_ms` (just before the lease call) plus the lease's length by the store's clock.
    #[allow(clippy::too_many_arguments)]
    fn spawn_task(
        &self,
        in_flight: &mut JoinSet<()>,
        task: Task,
        slot: Slot,
        local_ms: u64,
        store_now_ms: u64,
        hard_stop: &CancellationToken,
        done: &mpsc::UnboundedSender<PendingCompletion>,
    ) {
        let inner = self.inner.clone();
        let hard = hard_stop.clone();
        let done = done.clone();
        let expires_at_ms = task.lease.as_ref().map(|l| l.expires_at_ms);
        let local_deadline_ms = decide::local_deadline_ms(local_ms, store_now_ms, expires_at_ms);
        in_flight.spawn(async move {
            inner
                .run_task(task, slot, local_deadline_ms, hard, done)
                .await;
        });
    }

    /// Run the tasks the completer leased (each in its reserved slot; unused slots go back), and
    /// fail the corrupt ones.
    async fn spawn_refilled(
        &self,
        r: Refilled,
        in_flight: &mut JoinSet<()>,
        hard_stop: &CancellationToken,
        done: &mpsc::UnboundedSender<PendingCompletion>,
    ) {
        let Refilled {
            queue,
            leased,
            mut slots,
            pool,
            local_ms,
        } = r;
        for task in leased.tasks {
            let slot = match slots.pop() {
                Some(s) => s.assign(),
                None => Slot::take(&pool),
            };
            self.spawn_task(
                in_flight,
                task,
                slot,
                local_ms,
                leased.now_ms,
                hard_stop,
                done,
            );
        }
        slots.into_iter().for_each(Slot::give_back);
        for bad in leased.corrupt {
            self.fail_corrupt(&queue, bad).await;
        }
    }

    /// A leased task no handler can run (its fields could not be decoded): fail it permanently,
    /// so that it lands in the DLQ with the reason instead of expiring and retrying in vain. When
    /// the fields do not even name the task and its token, its lease is left to expire.
    pub(super) async fn fail_corrupt(&self, queue: &str, bad: ops::CorruptLease) {
        tracing::warn!(queue = %queue, task = %bad.id, error = %bad.error,
            "leased a task whose fields cannot be decoded; failing it");
        if bad.id.is_empty() || bad.token.is_empty() {
            return;
        }
        let message = format!("corrupt task: {}", bad.error);
        let r = ops::fail(
            &*self.inner.store,
            queue,
            &bad.id,
            &bad.token,
            &message,
            false,
            0.0,
        )
        .await;
        if let Err(e) = r {
            tracing::warn!(task = %bad.id, error = %e, "failing a corrupt task was refused");
        }
    }
}
