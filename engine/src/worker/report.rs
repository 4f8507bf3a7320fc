//! The report of one task's outcome ([`crate::report`] decides each step): a success goes
//! through the lane's completer, a failure or release is sent at once; a transient refusal is
//! retried with the same token while the lease can still be live, heartbeating meanwhile.

use super::completer::PendingCompletion;
use super::decide;
use super::{Inner, Outcome};
use crate::error::Error;
use crate::heartbeat::{after_heartbeat, heartbeat_interval_ms, BeatStep};
use crate::ops::{self, Completion};
use crate::report::{report_step, ReportStep};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

impl Inner {
    /// Report `outcome` ([`crate::report`]): a transient failure is retried with the same token
    /// (the scripts apply it once) for as long as the lease can still be live, heartbeating
    /// meanwhile so the lease stays live through a refusal shorter than it; a permanent answer,
    /// a lost lease, a certainly expired lease or a hard stop ends it. Successes go through the
    /// pool's completer (group commit); failures and releases are sent at once.
    pub(super) async fn report(
        &self,
        mut held: Finished<'_>,
        outcome: Outcome,
        hard_stop: &CancellationToken,
        done: &mpsc::UnboundedSender<PendingCompletion>,
    ) {
        let (queue, id, token) = (held.queue, held.id, held.token);
        let every_ms = heartbeat_interval_ms(held.lease_ms, self.config.heartbeat_divisor);
        let (mut next_beat_at_ms, mut beat_refusals) = (self.clock.now_ms() + every_ms, 0u32);
        let mut first_error: Option<Error> = None;
        for tries in 0u32.. {
            let result = match &outcome {
                Outcome::Succeeded(v) => {
                    let (tx, rx) = oneshot::channel();
                    let item = Completion {
                        id: id.to_string(),
                        token: token.to_string(),
                        result: v.clone(),
                    };
                    if done.send((queue.to_string(), item, tx)).is_err() {
                        return;
                    }
                    match rx.await {
                        Ok(r) => r.map(|_| ()),
                        // The completer stopped: the pool is being torn down.
                        Err(_) => return,
                    }
                }
                Outcome::Failed(e) => ops::fail(
                    &*self.store,
                    queue,
                    id,
                    token,
                    &e.message,
                    e.retryable,
                    self.entropy.unit(),
                )
                .await
                .map(|_| ()),
                Outcome::Release => ops::release(&*self.store, queue, id, token)
                    .await
                    .map(|_| ()),
                Outcome::LeaseLost => return,
            };
            let now = self.clock.now_ms();
            let step = report_step(
                result.as_ref().map(|_| ()),
                tries,
                now,
                held.local_deadline_ms,
                self.entropy.unit(),
            );
            let after_ms = match step {
                ReportStep::Recorded => {
                    if let Some(e) = first_error {
                        tracing::info!(task = %id, tries, first_error = %e,
                            "outcome recorded after the store refused it");
                    }
                    return;
                }
                ReportStep::Refused => {
                    // Stale or cancelled: another worker owns the task now, or nobody should.
                    if let Err(e) = result {
                        tracing::info!(task = %id, error = %e, "outcome refused");
                    }
                    return;
                }
                ReportStep::Expired => {
                    if let Err(e) = result {
                        tracing::warn!(task = %id, tries, error = %e,
                            "the lease expired before the store took the outcome; the task will run again");
                    }
                    return;
                }
                ReportStep::Retry { .. } if self.config.planted_drop_refused_outcome => return,
                ReportStep::Retry { after_ms } => after_ms,
            };
            if first_error.is_none() {
                if let Err(e) = result {
                    // Logged once per outcome; the recovery is logged when it comes.
                    tracing::warn!(task = %id, error = %e,
                        "the store refused the outcome for now; retrying with the same token while the lease lasts");
                    first_error = Some(e);
                }
            }
            // Wait, heartbeating whenever one is due, so the lease stays live meanwhile.
            let until_ms = now + after_ms;
            loop {
                let now = self.clock.now_ms();
                if now >= until_ms {
                    break;
                }
                if now >= next_beat_at_ms {
                    let reply = ops::heartbeat(&*self.store, queue, id, token, 0).await;
                    let now = self.clock.now_ms();
                    match &reply {
                        Ok((store_now, exp)) => {
                            held.local_deadline_ms =
                                decide::local_deadline_ms(now, *store_now, Some(*exp));
                            beat_refusals = 0;
                        }
                        Err(e) => beat_refusals += u32::from(e.is_unavailable()),
                    }
                    let step = after_heartbeat(
                        &reply,
                        beat_refusals,
                        now,
                        held.local_deadline_ms,
                        every_ms,
                        self.entropy.unit(),
                    );
                    match step {
                        BeatStep::Held { .. } if self.config.planted_heartbeat_waits_interval => {
                            next_beat_at_ms = now + every_ms
                        }
                        BeatStep::Held { next_in_ms } => next_beat_at_ms = now + next_in_ms,
                        // Past the deadline the next try of the outcome ends it as expired.
                        BeatStep::Lost if now >= held.local_deadline_ms => {
                            next_beat_at_ms = u64::MAX
                        }
                        BeatStep::Lost => {
                            tracing::info!(task = %id, "lease lost while its outcome waited for the store");
                            return;
                        }
                    }
                    continue;
                }
                let wake_ms = until_ms.min(next_beat_at_ms);
                tokio::select! {
                    _ = self.clock.sleep(wake_ms - now) => {}
                    _ = hard_stop.cancelled() => {
                        tracing::warn!(task = %id,
                            "stopping with an outcome the store has not taken; its lease will expire");
                        return;
                    }
                }
            }
        }
    }
}

/// A leased task whose outcome is being reported: where it is, its lease token, the lease's
/// length (ms) and its deadline by the local clock (ms, moved on by heartbeats).
pub(super) struct Finished<'a> {
    pub(super) queue: &'a str,
    pub(super) id: &'a str,
    pub(super) token: &'a str,
    pub(super) lease_ms: u64,
    pub(super) local_deadline_ms: u64,
}
