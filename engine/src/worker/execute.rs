//! The run of one leased task: its handler in a task of its own, under heartbeats (which keep
//! the lease live and bring its loss or cancellation), its timeout and the lane's hard stop;
//! then the report of how it ended (`report`).

use super::completer::PendingCompletion;
use super::decide;
use super::report::Finished;
use super::slots::Slot;
use super::{HandlerError, Inner, Outcome, TaskContext, HANDLER_ABORT_WAIT_MS};
use crate::heartbeat::{after_heartbeat, heartbeat_interval_ms, BeatStep};
use crate::ops;
use crate::task::Task;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// A task handle that aborts the task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Inner {
    /// Run one leased task to its reported outcome, holding `slot` while its handler runs.
    pub(super) async fn run_task(
        self: Arc<Self>,
        task: Task,
        slot: Slot,
        local_deadline_ms: u64,
        hard_stop: CancellationToken,
        done: mpsc::UnboundedSender<PendingCompletion>,
    ) {
        let Some(lease) = task.lease.clone() else {
            return;
        };
        // Disabled (a no-op) unless the process exports traces (crate::trace).
        let span = tracing::info_span!(target: crate::trace::TARGET, "orq.task",
            orq.queue = %task.queue, orq.tenant = %task.tenant, orq.type = %task.task_type,
            orq.task_id = %task.id, orq.attempt = task.attempt, orq.epoch = lease.epoch,
            orq.worker = %self.config.id, otel.status_code = tracing::field::Empty,
            otel.status_description = tracing::field::Empty);
        crate::trace::continue_in(&span, task.trace.as_ref());
        tracing::info_span!(target: crate::trace::TARGET, parent: &span, "orq.lease",
            orq.lease_expires_at_ms = lease.expires_at_ms)
        .in_scope(|| {});
        let queue = task.queue.clone();
        let id = task.id.clone();
        let lease_ms = task.lease_ms;
        let (outcome, local_deadline_ms) = self
            .execute(task, lease.clone(), local_deadline_ms, hard_stop.clone())
            .instrument(span.clone())
            .await;
        drop(slot);
        let held = Finished {
            queue: &queue,
            id: &id,
            token: &lease.token,
            lease_ms,
            local_deadline_ms,
        };
        let reported = tracing::info_span!(target: crate::trace::TARGET, parent: &span,
            "orq.outcome", orq.outcome = outcome.name(), otel.status_code = tracing::field::Empty,
            otel.status_description = tracing::field::Empty);
        if let (Outcome::Failed(e), false) = (&outcome, span.is_disabled()) {
            // A failed attempt is an error in a trace viewer, with the handler's message.
            for s in [&span, &reported] {
                s.record("otel.status_code", "ERROR");
                s.record("otel.status_description", e.message.as_str());
            }
        }
        self.report(held, outcome, &hard_stop, &done)
            .instrument(reported)
            .await;
    }

    /// Run the handler under heartbeats, timeout and cancellation; return how it ended and the
    /// lease's deadline by the local clock as the last heartbeat left it.
    async fn execute(
        &self,
        task: Task,
        lease: crate::task::Lease,
        mut local_deadline_ms: u64,
        hard_stop: CancellationToken,
    ) -> (Outcome, u64) {
        let Some(handler) = self.handlers.get(&task.task_type) else {
            let missing = HandlerError::retryable(format!(
                "no handler for type {:?} on worker {}",
                task.task_type, self.config.id
            ));
            return (Outcome::Failed(missing), local_deadline_ms);
        };
        let _busy = crate::metrics::BusySlot::take();
        let started_ms = self.clock.now_ms();
        let cancel = CancellationToken::new();
        let ctx = TaskContext {
            attempt: task.attempt,
            epoch: lease.epoch,
            cancel: cancel.clone(),
            task: task.clone(),
        };
        // A spawned task turns a handler panic into a JoinError instead of killing the worker.
        // The guard aborts it when this future is dropped (the worker crashed or was stopped),
        // so a handler never outlives the worker that runs it.
        let handling = tracing::info_span!(target: crate::trace::TARGET, "orq.handler");
        let mut run = AbortOnDrop(tokio::spawn(
            async move { handler.handle(ctx).await }.instrument(handling),
        ));
        let every_ms = heartbeat_interval_ms(task.lease_ms, self.config.heartbeat_divisor);
        let timeout = match task.timeout_ms {
            Some(ms) => self.clock.sleep(ms),
            None => Box::pin(std::future::pending()),
        };
        tokio::pin!(timeout);
        let (mut next_beat_ms, mut refusals) = (every_ms, 0u32);
        let outcome = loop {
            let beat = self.clock.sleep(next_beat_ms);
            tokio::select! {
                biased;
                joined = &mut run.0 => {
                    break match joined {
                        Ok(Ok(value)) => Outcome::Succeeded(value.to_string()),
                        Ok(Err(e)) => Outcome::Failed(e),
                        Err(e) if e.is_panic() => Outcome::Failed(HandlerError::retryable("handler panicked")),
                        Err(_) => Outcome::LeaseLost,
                    };
                }
                _ = beat => {
                    let reply = ops::heartbeat(&*self.store, &task.queue, &task.id, &lease.token, 0).await;
                    let now = self.clock.now_ms();
                    match &reply {
                        Ok((store_now, exp)) => {
                            local_deadline_ms = decide::local_deadline_ms(now, *store_now, Some(*exp));
                            refusals = 0;
                        }
                        Err(e) => {
                            refusals += u32::from(e.is_unavailable());
                            tracing::debug!(task = %task.id, error = %e, "heartbeat failed");
                        }
                    }
                    match after_heartbeat(&reply, refusals, now, local_deadline_ms, every_ms, self.entropy.unit()) {
                        BeatStep::Held { .. } if self.config.planted_heartbeat_waits_interval => next_beat_ms = every_ms,
                        BeatStep::Held { next_in_ms } => next_beat_ms = next_in_ms,
                        BeatStep::Lost if self.config.planted_ignore_lost_lease => next_beat_ms = every_ms,
                        BeatStep::Lost => {
                            tracing::info!(task = %task.id, "lease lost; aborting handler");
                            break Outcome::LeaseLost;
                        }
                    }
                }
                _ = &mut timeout => {
                    break Outcome::Failed(HandlerError::retryable(format!(
                        "handler timed out after {} ms", task.timeout_ms.unwrap_or(0))));
                }
                _ = hard_stop.cancelled() => break Outcome::Release,
            }
        };
        if !run.0.is_finished() {
            cancel.cancel();
            run.0.abort();
            // An abort takes effect when the runtime next reaches the handler's task: wait for
            // it (bounded), so the release or retry below is not reported, and `stop` does not
            // return, while the handler still runs. A handler that blocks its thread instead of
            // yielding is left behind after the bound.
            tokio::select! {
                _ = &mut run.0 => {}
                _ = self.clock.sleep(HANDLER_ABORT_WAIT_MS) => {
                    tracing::warn!(task = %task.id, "handler still running {HANDLER_ABORT_WAIT_MS} ms after its abort");
                }
            }
        }
        if let Some(h) = self.run_seconds.get(&task.task_type) {
            let ran_ms = self.clock.now_ms().saturating_sub(started_ms);
            h.observe(ran_ms as f64 / 1000.0);
        }
        (outcome, local_deadline_ms)
    }
}
