//! The scheduler: promotes due scheduled tasks and reaps expired leases on a cadence. Several
//! schedulers may run at once: each pass is a bounded atomic script, so two schedulers only
//! share the work.

use crate::client::{Client, RETENTION_MS};
use crate::clock::{Clock, Entropy};
use crate::episode::Episode;
use crate::error::Result;
use crate::ops;
use crate::store::Store;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Most tasks one promote or reap call handles.
pub const PASS_BOUND: u64 = 1000;
/// Most promote / reap calls per queue in one pass (so one pass is bounded too).
pub const PASS_ROUNDS_MAX: u32 = 20;

/// Scheduler settings.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Queues to serve; empty serves every known queue.
    pub queues: Vec<String>,
    /// Longest time between passes (ms); a pass starts earlier when a scheduled task or a lease
    /// deadline falls due sooner.
    pub interval_ms: u64,
    /// Retention of completed and cancelled tasks (ms).
    pub retention_ms: u64,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            queues: Vec::new(),
            interval_ms: 500,
            retention_ms: RETENTION_MS,
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    /// Scheduled / retrying tasks moved to ready.
    pub promoted: u64,
    /// Expired leases turned into retries or DLQ entries.
    pub reaped: u64,
    /// Finished tasks deleted after retention.
    pub trimmed: u64,
    /// Shortest wait until something else falls due (ms), when known.
    pub next_in_ms: Option<u64>,
}

/// Promotes and reaps.
#[derive(Clone)]
pub struct Scheduler {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    entropy: Arc<Entropy>,
    client: Client,
    config: SchedulerConfig,
}

impl Scheduler {
    /// A scheduler over `store`.
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        entropy: Arc<Entropy>,
        config: SchedulerConfig,
    ) -> Self {
        let client = Client::new(store.clone(), clock.clone(), entropy.clone());
        Scheduler {
            store,
            clock,
            entropy,
            client,
            config,
        }
    }

    /// One pass over every queue: promote and reap until nothing more is due (at most
    /// [`PASS_ROUNDS_MAX`] calls each per queue). Tests call this without timers.
    ///
    /// A queue whose calls fail (its keys hold corrupt or foreign data, or the store is
    /// unreachable) is logged and skipped, so one queue cannot stop the maintenance of the
    /// others; the pass fails only when every queue failed (with the first queue's error).
    pub async fn run_once(&self) -> Result<Pass> {
        let started = std::time::Instant::now();
        let queues = if self.config.queues.is_empty() {
            self.client.queues().await?
        } else {
            self.config.queues.clone()
        };
        let mut pass = Pass::default();
        let mut first_error = None;
        let mut passed = 0usize;
        for q in &queues {
            match self.maintain(q, &mut pass).await {
                Ok(()) => passed += 1,
                Err(e) => {
                    // A transient failure is the store's episode, logged by `run` at its start
                    // and end; a permanent one is this queue's own.
                    if e.is_unavailable() {
                        tracing::debug!(queue = %q, error = %e, "scheduler pass failed for a queue");
                    } else {
                        tracing::warn!(queue = %q, error = %e, "scheduler pass failed for a queue");
                    }
                    first_error.get_or_insert(e);
                }
            }
        }
        crate::metrics::metrics()
            .scheduler_pass
            .observe(started.elapsed().as_secs_f64());
        match first_error {
            Some(e) if passed == 0 => Err(e),
            _ => Ok(pass),
        }
    }

    /// Promote and reap one queue, adding to `pass`.
    async fn maintain(&self, q: &str, pass: &mut Pass) -> Result<()> {
        // Waits are computed from the store's clock (due time minus the store's now), never
        // from this process's clock.
        let mut note = |m: &ops::Maintained, extra_ms: u64| {
            if let Some(due) = m.next_ms {
                let wait = due.saturating_sub(m.now_ms) + extra_ms;
                pass.next_in_ms = Some(pass.next_in_ms.map_or(wait, |w| w.min(wait)));
            }
        };
        for _ in 0..PASS_ROUNDS_MAX {
            let m = ops::promote(&*self.store, q, PASS_BOUND).await?;
            pass.promoted += m.moved;
            if m.moved < PASS_BOUND {
                note(&m, 0);
                break;
            }
        }
        for _ in 0..PASS_ROUNDS_MAX {
            let m = ops::reap(
                &*self.store,
                q,
                PASS_BOUND,
                self.entropy.unit(),
                self.config.retention_ms,
            )
            .await?;
            pass.reaped += m.moved;
            pass.trimmed += m.trimmed;
            if m.moved < PASS_BOUND {
                // A lease expires strictly after its deadline: look again one ms later.
                note(&m, 1);
                break;
            }
        }
        Ok(())
    }

    /// Run passes until `shutdown` is cancelled.
    pub async fn run(&self, shutdown: CancellationToken) {
        tracing::info!("scheduler started");
        // A run of passes the store refused transiently: logged at its start and end, retried
        // after a doubling wait (crate::episode).
        let mut outage = Episode::default();
        while !shutdown.is_cancelled() {
            let result = self.run_once().await;
            let now = self.clock.now_ms();
            let wait = match result {
                Ok(pass) => {
                    if let Some((failures, lasted_ms)) = outage.recovered(now) {
                        tracing::info!(
                            failures,
                            lasted_ms,
                            "the store takes scheduler passes again"
                        );
                    }
                    if pass.promoted + pass.reaped + pass.trimmed > 0 {
                        tracing::debug!(?pass, "scheduler pass");
                    }
                    pass.next_in_ms
                        .unwrap_or(self.config.interval_ms)
                        .clamp(1, self.config.interval_ms)
                }
                Err(e) if e.is_unavailable() => {
                    let retry = outage.failed(now);
                    if retry.started {
                        tracing::warn!(error = %e, "the store refused a scheduler pass; backing off until it answers");
                    }
                    retry.wait_ms
                }
                Err(e) => {
                    tracing::warn!(error = %e, "scheduler pass failed");
                    self.config.interval_ms
                }
            };
            tokio::select! {
                biased;
                _ = self.clock.sleep(wait) => {}
                _ = shutdown.cancelled() => {}
            }
        }
        tracing::info!("scheduler stopped");
    }
}
