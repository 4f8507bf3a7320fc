//! The lease loop of one lane: [`Worker::run_lane`] is its outline, over the lane's state
//! ([`Lane`]) whose methods are its steps. It takes tasks from the completer's refills, stands
//! back while the completer refills, lingers for more free slots, reads the queue list, leases
//! from each queue in turn into free slots (the leasing pass, `lease_pass.rs`), waits idle for a
//! wake-up, a freed slot or its poll, and at shutdown lets handlers finish within the grace
//! before releasing the rest. What to do at each step is decided by `decide`; this file only
//! sequences the calls.

use super::completer::{complete_in_batches, PendingCompletion, Refill, Refilled};
use super::decide::{self, Refused};
use super::slots::{Slot, Slots};
use super::stand_back::StandBack;
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
fn wake_channels(queues: &[String]) -> Vec<String> {
    queues
        .iter()
        .map(|q| crate::keys::wake_channel(q))
        .collect()
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

/// One lane's lease loop between rounds: what [`Worker::run_lane`] sequences. The handlers it
/// runs, the completer beside it, the queues it serves and their wake-ups, and what the last
/// rounds left (idle, rotation, refused queues, a store outage, standing back).
pub(super) struct Lane<'w> {
    /// The pool.
    pub(super) worker: &'w Worker,
    /// This lane's number (0 is the first lane, which polls while the pool is idle).
    lane: usize,
    /// Cancelled when shutdown begins.
    shutdown: CancellationToken,
    /// Cancelled when the shutdown grace is over: the handlers still running are aborted.
    pub(super) hard_stop: CancellationToken,
    /// The tasks whose handler runs or whose outcome is being reported.
    pub(super) in_flight: JoinSet<()>,
    /// The completer lives in a set of its own, so that it stops when the lane's future is
    /// dropped.
    completer: JoinSet<()>,
    /// Outcomes to the completer.
    pub(super) done_tx: mpsc::UnboundedSender<PendingCompletion>,
    /// Tasks the completer leased for this lane.
    leased_rx: mpsc::UnboundedReceiver<Refilled>,
    /// The lane's handler slots.
    pub(super) slots: Arc<Slots>,
    /// What the completer needs to refill the slots it frees, and the queue it may refill from.
    pub(super) refill: Arc<Refill>,
    /// The queues served (the configured ones, or every known queue when none is configured).
    pub(super) queues: Vec<String>,
    /// When the queue list was last read (local ms; 0: read it at the next round).
    queues_refreshed_ms: u64,
    /// No queue configured: serve every known queue, and new ones.
    all_queues: bool,
    /// The store's wake-ups for the queues served (None: the store gives none), and the queue
    /// list they were asked for.
    wake_rx: Option<tokio::sync::watch::Receiver<u64>>,
    wake_for: Option<Vec<String>>,
    /// Serving every queue: the store's wake-ups about a new queue (the registry's channel),
    /// which make the queue list due. Apart from `wake_rx`, so that the wake-up of every
    /// submit does not make each idle lane read the list again.
    new_queue_rx: Option<tokio::sync::watch::Receiver<u64>>,
    /// Whether the last round leased nothing (the pool is idle).
    idle: bool,
    /// Which queue the next round asks first.
    pub(super) rotate: usize,
    /// Queues whose lease calls were refused (not a store outage).
    pub(super) refused: Refused,
    /// A run of transient store failures of this lane's lease calls (logged at its start and
    /// end; the lane retries after a doubling wait instead of its idle poll).
    pub(super) outage: Episode,
    /// While the loop leaves the free slots to the completer: the timer that bounds it, and
    /// whether it ran out (`stand_back.rs`).
    stand_back: StandBack,
}

/// What a leasing pass over the queues did ([`Lane::lease_round`]).
pub(super) struct Round {
    /// It leased at least one task.
    pub(super) leased_any: bool,
    /// Work may be left: a lease reply said ready work is left, or a queue was not asked
    /// (the free slots ran out first).
    pub(super) more: bool,
    /// How long to wait idle before the next round when it leased none (ms).
    pub(super) wait_ms: u64,
}

impl Worker {
    /// Lane `lane` of [`Worker::run`]: this pool's whole concurrency, one lease loop, one
    /// completer. Each round: run what the completer handed over; stand back while it refills
    /// the slots; wait for a free slot, or linger for more; read the queue list when due;
    /// lease from each queue in turn into the free slots; if nothing came, wait idle. At
    /// shutdown, [`Lane::stop`].
    pub(super) async fn run_lane(&self, lane: usize, shutdown: CancellationToken) {
        let mut l = Lane::start(self, lane, shutdown);
        tracing::debug!(worker = %self.inner.config.id, lane, concurrency = self.inner.config.concurrency, "lane started");
        while !l.shutdown.is_cancelled() {
            l.run_handed_over().await;
            if l.stand_back().await {
                continue;
            }
            let free = l.free();
            if free == 0 {
                l.wait_for_a_slot().await;
                continue;
            }
            let free = l.linger(free).await;
            if free == 0 {
                continue;
            }
            let now = self.inner.clock.now_ms();
            let wakeups = l.wake_rx.is_some() || l.new_queue_rx.is_some();
            let poll_ms = decide::poll_ms(self.inner.config.idle_poll_ms, wakeups);
            l.refresh_queues(now, poll_ms).await;
            l.listen();
            let round = l.lease_round(free, now, poll_ms).await;
            l.end_round(round).await;
        }
        l.stop().await;
        tracing::debug!(worker = %self.inner.config.id, lane, "lane stopped");
    }
}

impl<'w> Lane<'w> {
    /// Lane `lane` of `worker`'s pool, its completer started.
    fn start(worker: &'w Worker, lane: usize, shutdown: CancellationToken) -> Lane<'w> {
        let inner = &worker.inner;
        let mut completer: JoinSet<()> = JoinSet::new();
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let (leased_tx, leased_rx) = mpsc::unbounded_channel::<Refilled>();
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
        Lane {
            worker,
            lane,
            shutdown,
            hard_stop: CancellationToken::new(),
            in_flight: JoinSet::new(),
            completer,
            done_tx,
            leased_rx,
            slots,
            refill,
            queues: inner.config.queues.clone(),
            queues_refreshed_ms: 0,
            all_queues: inner.config.queues.is_empty(),
            wake_rx: None,
            wake_for: None,
            new_queue_rx: None,
            idle: true,
            rotate: 0,
            refused: Refused::default(),
            outage: Episode::default(),
            stand_back: StandBack::default(),
        }
    }

    /// Forget the finished tasks, and run the ones the completer leased meanwhile.
    async fn run_handed_over(&mut self) {
        while self.in_flight.try_join_next().is_some() {}
        while let Ok(r) = self.leased_rx.try_recv() {
            self.run_refilled(r).await;
        }
    }

    /// Run the tasks of a refill ([`Worker::spawn_refilled`]). A refill shows the completer
    /// alive and refilling, so it also ends a stand-back wait ([`StandBack::refilled`]).
    async fn run_refilled(&mut self, r: Refilled) {
        self.stand_back.refilled();
        self.worker
            .spawn_refilled(r, &mut self.in_flight, &self.hard_stop, &self.done_tx)
            .await;
    }

    /// While the completer refills the slots (one queue, ready work left), the loop stands back
    /// as long as completions are on their way to it (tasks whose handler returned and whose
    /// outcome is being reported); it leases again itself once none are, so slots freed by
    /// failures or long handlers never wait for a success. It stands back for at most the
    /// linger plus an idle poll in a row (one timer, so a clock that stands still cannot keep
    /// it waiting), so a completion call that hangs does not hold the free slots. True when it
    /// stood back (waited for the completer, a slot, shutdown or the timer): the round is over.
    async fn stand_back(&mut self) -> bool {
        let config = &self.worker.inner.config;
        let refilling = self
            .refill
            .queue
            .lock()
            .map(|q| q.is_some())
            .unwrap_or(false);
        let stands_back =
            decide::stands_back(self.in_flight.len(), self.slots.handlers(), refilling);
        let clock = &self.worker.inner.clock;
        let Some(timer) = self.stand_back.timer(stands_back, || {
            clock.sleep(decide::stand_back_ms(
                config.lease_linger_ms,
                config.idle_poll_ms,
            ))
        }) else {
            return false;
        };
        match wake(
            &mut self.in_flight,
            &mut self.leased_rx,
            &self.slots,
            &self.shutdown,
            Some(timer),
        )
        .await
        {
            Wake::Refilled(r) => self.run_refilled(r).await,
            Wake::Timer => self.stand_back.ran_out(),
            Wake::Other => {}
        }
        true
    }

    /// Free slots: handlers not running. Tasks whose handler returned but whose outcome is
    /// still being recorded hold none, but at most `concurrency` of them may wait.
    fn free(&self) -> usize {
        decide::free_slots(
            self.worker.inner.config.concurrency,
            self.slots.running.load(Ordering::SeqCst),
            self.in_flight.len(),
        )
    }

    /// No slot is free: wait until the completer hands over tasks (run them), a task finishes,
    /// a slot is freed or shutdown begins.
    async fn wait_for_a_slot(&mut self) {
        if let Wake::Refilled(r) = wake(
            &mut self.in_flight,
            &mut self.leased_rx,
            &self.slots,
            &self.shutdown,
            None,
        )
        .await
        {
            self.run_refilled(r).await;
        }
    }

    /// Lease batching (WorkerConfig::lease_linger_ms): busy, with handlers running, wait a
    /// moment for more slots to free so that the next call carries more tasks (tasks the
    /// completer leased meanwhile run at once). The free slots after it (`free` when it does
    /// not linger).
    async fn linger(&mut self, mut free: usize) -> usize {
        let inner = &self.worker.inner;
        let concurrency = inner.config.concurrency;
        let linger = inner.config.lease_linger_ms;
        let running = self.slots.running.load(Ordering::SeqCst);
        if !decide::lingers(self.idle, linger, free, concurrency, running) {
            return free;
        }
        let until = inner.clock.sleep(linger);
        tokio::pin!(until);
        while free < concurrency {
            let mut got = None;
            tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => break,
                _ = &mut until => break,
                // Tasks the completer leased meanwhile run at once.
                r = self.leased_rx.recv() => got = r,
                _ = self.slots.freed.notified() => {}
                _ = self.in_flight.join_next(), if !self.in_flight.is_empty() => {}
            }
            if let Some(r) = got {
                self.run_refilled(r).await;
            }
            free = self.free();
        }
        self.free()
    }

    /// Read the queue list again when due (serving every queue: when it is empty, or its
    /// refresh interval has passed; a wake-up about a new queue makes it due). A store outage
    /// is part of the lane's outage episode.
    async fn refresh_queues(&mut self, now: u64, poll_ms: u64) {
        let inner = &self.worker.inner;
        let refresh_ms = decide::queue_refresh_ms(self.idle, inner.config.idle_poll_ms, poll_ms);
        if !decide::refresh_queues(
            self.all_queues,
            self.queues.len(),
            now,
            self.queues_refreshed_ms,
            refresh_ms,
        ) {
            return;
        }
        match inner.client.queues().await {
            Ok(q) => {
                self.queues = q;
                self.queues_refreshed_ms = now;
            }
            // Part of the lane's outage episode: logged at its start only.
            Err(e) if e.is_unavailable() => {
                if self.outage.failed(now).started {
                    tracing::warn!(worker = %inner.config.id, error = %e,
                        "cannot list queues; backing off until the store answers");
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot list queues"),
        }
    }

    /// Listen for the store's wake-ups of the queues served (asked again when the list
    /// changed), and take the ones so far as seen: a wake-up published from here on (during
    /// this round's calls too) ends the idle wait of [`Lane::end_round`] at once.
    fn listen(&mut self) {
        if self.wake_for.as_ref() != Some(&self.queues) {
            self.wake_rx = self.worker.inner.store.wake(&wake_channels(&self.queues));
            self.wake_for = Some(self.queues.clone());
        }
        if self.all_queues && self.new_queue_rx.is_none() {
            self.new_queue_rx = self
                .worker
                .inner
                .store
                .wake(&[crate::keys::QUEUES_WAKE_CHANNEL.to_string()]);
        }
        if let Some(rx) = self.wake_rx.as_mut() {
            rx.borrow_and_update();
        }
    }

    /// After a leasing pass: the next round starts at the next queue. Work is left (a reply
    /// said so, or a queue was not asked): lease again at once, and the pool's idle lanes ask
    /// too. None left: wait idle until the round's wait is over, or a wake-up, a handed-over
    /// refill (run it), or shutdown; a freed slot or a finished task ends the wait only when
    /// the round left work or no slot free (a drained queue gets no new work from a slot
    /// freeing). At light
    /// load this makes one lease call per wake-up of the store, not one per lane and one more
    /// per finished task (issue 23; docs/design-notes.md, note 47).
    async fn end_round(&mut self, round: Round) {
        let inner = &self.worker.inner;
        self.rotate = self.rotate.wrapping_add(1);
        self.idle = !round.leased_any;
        let free = self.free();
        if self.lane == 0 {
            // The first lane waits for the store's wake-ups with free slots: the other lanes
            // leave the wake-ups to it (it wakes them when one round leaves work).
            inner.lanes.first_polling.store(
                decide::first_lane_listens(round.more, free),
                Ordering::SeqCst,
            );
        }
        if round.more {
            if round.leased_any {
                inner.lanes.wake.notify_waiters();
            }
            if round.leased_any || free == 0 {
                return;
            }
        }
        // An idle lane other than the first polls LANE_IDLE_FACTOR times less often while the
        // first one polls too and nothing is due sooner: the first lane's polls find new work
        // and wake it, so a pool of lanes asks an idle store about as often as one lane does.
        // (While the first lane is busy, the others poll as usual, so new work never waits for
        // a busy lane.)
        let first_polling = inner.lanes.first_polling.load(Ordering::SeqCst);
        let wait_ms = decide::idle_wait_ms(
            self.lane,
            round.wait_ms,
            inner.config.idle_poll_ms,
            first_polling,
        );
        let sleep = inner.clock.sleep(wait_ms);
        tokio::pin!(sleep);
        // A freed slot matters when work is left, or when the lane had none free: it then
        // asks again, and (the first lane) listens for the store's wake-ups once more.
        let slot_matters = round.more || free == 0;
        let mut got = None;
        loop {
            tokio::select! {
                biased;
                _ = &mut sleep => {}
                _ = self.shutdown.cancelled() => {}
                r = self.leased_rx.recv() => got = r,
                _ = self.slots.freed.notified(), if slot_matters => {}
                _ = inner.lanes.wake.notified() => {}
                // A new queue (serving every queue): the list is read again.
                _ = woken(&mut self.new_queue_rx) => self.queues_refreshed_ms = 0,
                // The store's wake-up: work was made ready. A lane other than the first leaves
                // it to the first while that one listens with free slots.
                _ = woken(&mut self.wake_rx) => {
                    let first = inner.lanes.first_polling.load(Ordering::SeqCst);
                    if decide::leaves_wake_up(self.lane, first) {
                        continue;
                    }
                }
                Some(_) = self.in_flight.join_next(), if slot_matters && !self.in_flight.is_empty() => {}
            }
            break;
        }
        if let Some(r) = got {
            self.run_refilled(r).await;
        }
    }

    /// The end of a lane once shutdown began: let its handlers (and those of tasks the
    /// completer leased meanwhile) finish within [`super::WorkerConfig::shutdown_grace_ms`], then
    /// abort the rest (their tasks are released); stop the completer, and release what its last
    /// call leased after the last handler finished.
    async fn stop(self) {
        let Lane {
            worker,
            mut in_flight,
            mut leased_rx,
            hard_stop,
            done_tx,
            mut completer,
            ..
        } = self;
        // Graceful shutdown: wait for in-flight handlers, then abort and release the rest.
        let grace = worker
            .inner
            .clock
            .sleep(worker.inner.config.shutdown_grace_ms);
        tokio::pin!(grace);
        // Tasks the completer leased in a call that was in flight when shutdown began run too.
        loop {
            while let Ok(r) = leased_rx.try_recv() {
                worker
                    .spawn_refilled(r, &mut in_flight, &hard_stop, &done_tx)
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
                worker.fail_corrupt(&r.queue, bad).await;
            }
            for task in r.leased.tasks {
                if let Some(lease) = &task.lease {
                    if let Err(e) =
                        ops::release(&*worker.inner.store, &r.queue, &task.id, &lease.token).await
                    {
                        tracing::warn!(task = %task.id, error = %e, "release at shutdown failed");
                    }
                }
            }
        }
    }
}

impl Worker {
    /// Run one leased task in `in_flight`, holding `slot`. Its lease deadline by the local clock
    /// is `local_ms` (just before the lease call) plus the lease's length by the store's clock.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn spawn_task(
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
        ops::fail_corrupt(&*self.inner.store, queue, bad).await;
    }
}
