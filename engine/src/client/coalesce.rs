//! Natural batching of single submits (group commit): [`Client::coalescing`].
//!
//! While one enqueue call of a queue is in flight, the single submits to that queue that arrive
//! wait, and go together in the next call (up to [`BATCH_MAX`] tasks). A submit that finds no
//! call in flight goes at once, alone, so light load pays no added latency; under concurrent
//! submits one script call carries many tasks, and the call's fixed cost in Redis (the FCALL, the
//! key checks, the counters, the event stream's trim, the wake-up) is paid once for all of them
//! (docs/design-notes.md, note 49).
//!
//! Each submit still gets its own answer: the batch's replies come back per task, in order. A
//! batch refused as a whole for a reason that may be one task's (invalid, a tenant's limit,
//! foreign data) is tried again task by task, so no submit is refused for another's fault; a
//! store outage is every task's answer.

use super::{Client, Submitted};
use crate::error::{Error, Result};
use crate::task::{TaskSpec, BATCH_MAX};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// A submit waiting for the next call of its queue, and where its answer goes.
type Waiter = (TaskSpec, oneshot::Sender<Result<Submitted>>);

/// The queues' waiting submits ([`Client::coalescing`]).
#[derive(Default)]
pub(super) struct Coalescer {
    queues: Mutex<HashMap<String, Pending>>,
}

/// One queue's waiting submits; `running` while a task drives its calls.
#[derive(Default)]
struct Pending {
    running: bool,
    waiting: Vec<Waiter>,
}

impl Client {
    /// This client with natural batching of [`Client::submit`]: single submits to one queue that
    /// arrive while a call of that queue is in flight go together in its next call (module
    /// `coalesce`). For a process that submits concurrently, such as `orq api`; its answers are
    /// those of separate submits. Must be used inside a Tokio runtime (each queue's calls run
    /// on a spawned task while submits wait).
    pub fn coalescing(mut self) -> Self {
        self.coalescer = Some(Arc::new(Coalescer::default()));
        self
    }

    /// How many submits to `queue` wait for its next call (always 0 without
    /// [`Client::coalescing`]).
    pub fn submits_waiting(&self, queue: &str) -> usize {
        self.coalescer.as_ref().map_or(0, |c| {
            let queues = c.queues.lock().unwrap_or_else(|p| p.into_inner());
            queues.get(queue).map_or(0, |p| p.waiting.len())
        })
    }

    /// [`Client::submit`] through the coalescer `c`: wait for this spec's turn in its queue's
    /// next call (starting that queue's driver when none runs).
    pub(super) async fn submit_coalesced(
        &self,
        c: &Arc<Coalescer>,
        spec: TaskSpec,
    ) -> Result<Submitted> {
        let (tx, rx) = oneshot::channel();
        let queue = spec.queue.clone();
        let start = {
            let mut queues = c.queues.lock().unwrap_or_else(|p| p.into_inner());
            let pending = queues.entry(queue.clone()).or_default();
            pending.waiting.push((spec, tx));
            !std::mem::replace(&mut pending.running, true)
        };
        if start {
            tokio::spawn(self.clone().drive(c.clone(), queue));
        }
        rx.await.unwrap_or_else(|_| {
            Err(Error::unreachable(
                "enqueue",
                "the submit's call ended without an answer",
            ))
        })
    }

    /// Make `queue`'s calls until no submit waits: each takes every waiting submit (up to
    /// [`BATCH_MAX`]).
    async fn drive(self, c: Arc<Coalescer>, queue: String) {
        loop {
            let batch: Vec<Waiter> = {
                let mut queues = c.queues.lock().unwrap_or_else(|p| p.into_inner());
                let Some(pending) = queues.get_mut(&queue) else {
                    return;
                };
                if pending.waiting.is_empty() {
                    queues.remove(&queue);
                    return;
                }
                let n = pending.waiting.len().min(BATCH_MAX);
                pending.waiting.drain(..n).collect()
            };
            self.submit_waiters(batch).await;
        }
    }

    /// One call for `batch`, each answer to its waiter; a whole-batch refusal that may be one
    /// task's is tried again task by task.
    async fn submit_waiters(&self, batch: Vec<Waiter>) {
        let (specs, answers): (Vec<TaskSpec>, Vec<_>) = batch.into_iter().unzip();
        if specs.len() == 1 {
            let answer = self.submit_batch(specs).await.and_then(first);
            if let Some(a) = answers.into_iter().next() {
                let _ = a.send(answer);
            }
            return;
        }
        match self.submit_batch(specs.clone()).await {
            Ok(done) => {
                for (a, d) in answers.into_iter().zip(done) {
                    let _ = a.send(Ok(d));
                }
            }
            Err(e) if e.is_unavailable() => {
                for a in answers {
                    let _ = a.send(Err(e.clone()));
                }
            }
            Err(_) => {
                for (spec, a) in specs.into_iter().zip(answers) {
                    let _ = a.send(self.submit_batch(vec![spec]).await.and_then(first));
                }
            }
        }
    }
}

/// The one result of a one-task batch.
pub(super) fn first(done: Vec<Submitted>) -> Result<Submitted> {
    done.into_iter()
        .next()
        .ok_or_else(|| Error::protocol("enqueue", "no result for the task"))
}
