//! A lane's leasing pass: one lease call per queue, in turn from the lane's rotation, into the
//! slots still free, until none is; a refused queue waits out its backoff, a store outage ends
//! the pass. What each reply means is decided by `decide`; this file only sequences the calls.

use super::decide;
use super::lane::{Lane, Round};
use super::slots::Slot;
use crate::ops;

impl Lane<'_> {
    /// Lease from each queue in turn (from the lane's rotation) into the `free` slots, as of
    /// local time `now` (ms); the round's idle wait starts at `poll_ms` and shortens to the next
    /// due task or the outage's retry. Each call's slots are reserved before it (and only what is
    /// still free then), so the completer cannot lease them too; what a call did not fill goes
    /// back.
    pub(super) async fn lease_round(&mut self, mut free: usize, now: u64, poll_ms: u64) -> Round {
        let worker = self.worker;
        let inner = &worker.inner;
        let concurrency = inner.config.concurrency;
        let mut round = Round {
            leased_any: false,
            more: false,
            wait_ms: poll_ms,
        };
        // Taken for the pass (the calls below borrow the lane mutably), put back after it.
        let queues = std::mem::take(&mut self.queues);
        for k in 0..queues.len() {
            if free == 0 {
                // The queues not asked may have work.
                round.more = true;
                break;
            }
            let queue = &queues[(self.rotate + k) % queues.len()];
            if self.refused.waiting(queue, now) {
                continue;
            }
            let mut reserved = Slot::reserve(&self.slots, decide::lease_ask(free), concurrency);
            let n = reserved.len();
            if n == 0 {
                round.more = true;
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
                    self.refused.answered(queue);
                    if let Some((failures, lasted_ms)) = self.outage.recovered(now) {
                        tracing::info!(worker = %inner.config.id, failures, lasted_ms,
                            "the store takes lease calls again");
                    }
                    // The completer refills this queue's slots while it has ready work and is
                    // the pool's only queue (with several, this rotation keeps them fair).
                    let more = decide::ready_work_left(batch.now_ms, batch.next_ms);
                    round.more |= more;
                    self.refill
                        .set(decide::refills(more, queues.len()).then(|| queue.clone()));
                    for bad in batch.corrupt {
                        worker.fail_corrupt(queue, bad).await;
                    }
                    round.wait_ms =
                        decide::wait_until_due(round.wait_ms, batch.now_ms, batch.next_ms);
                    for task in batch.tasks {
                        round.leased_any = true;
                        free -= 1;
                        let slot = match reserved.pop() {
                            Some(s) => s.assign(),
                            None => Slot::take(&self.slots),
                        };
                        worker.spawn_task(
                            &mut self.in_flight,
                            task,
                            slot,
                            now,
                            batch.now_ms,
                            &self.hard_stop,
                            &self.done_tx,
                        );
                    }
                }
                Err(e) if e.is_unavailable() => {
                    let retry = self.outage.failed(now);
                    if retry.started {
                        tracing::warn!(worker = %inner.config.id, queue = %queue, error = %e,
                            "the store refused a lease call; backing off until it answers");
                    }
                    round.wait_ms = round.wait_ms.min(retry.wait_ms);
                    // The store refuses now: the other queues wait for the next round.
                    reserved.into_iter().for_each(Slot::give_back);
                    break;
                }
                Err(e) => {
                    let (refusals, wait) =
                        self.refused.refused(queue, now, inner.config.idle_poll_ms);
                    tracing::warn!(queue = %queue, error = %e, refusals, wait_ms = wait,
                        "lease refused; asking this queue again later");
                }
            }
            reserved.into_iter().for_each(Slot::give_back);
        }
        self.queues = queues;
        round
    }
}
