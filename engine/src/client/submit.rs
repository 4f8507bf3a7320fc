//! Submitting tasks: [`Client::submit`] and [`Client::submit_batch`] (every spec validated
//! before any is stored, then one script call per queue).

use super::{arg, call, opt_arg, Client, Submitted};
use crate::decode::{self, array_at, int_at, items};
use crate::error::{Error, Result};
use crate::resp::Resp;
use crate::task::{
    Backoff, Status, TaskSpec, BATCH_MAX, DEFAULT_LEASE_MS, DEFAULT_MAX_RETRIES, IDEMPOTENCY_TTL_MS,
};
use std::collections::BTreeMap;

impl Client {
    /// Submit one task. Errors: `Invalid` (a field out of range, naming it), `Unavailable`.
    /// With [`Client::coalescing`], submits to one queue that arrive while its call is in
    /// flight go together in the next call, each with its own answer.
    pub async fn submit(&self, spec: TaskSpec) -> Result<Submitted> {
        match &self.coalescer {
            Some(c) => {
                spec.validate().map_err(|m| Error::invalid("enqueue", m))?;
                self.submit_coalesced(c, spec).await
            }
            None => self
                .submit_batch(vec![spec])
                .await
                .and_then(super::coalesce::first),
        }
    }

    /// Submit up to [`BATCH_MAX`] tasks: all are validated before any is stored, then one script
    /// call per queue in the batch stores them (all tasks of one queue atomically). Results come
    /// back in input order.
    pub async fn submit_batch(&self, specs: Vec<TaskSpec>) -> Result<Vec<Submitted>> {
        let op = "enqueue";
        if specs.is_empty() || specs.len() > BATCH_MAX {
            return Err(Error::invalid(
                op,
                format!("tasks: between 1 and {BATCH_MAX} per batch"),
            ));
        }
        for (i, s) in specs.iter().enumerate() {
            s.validate().map_err(|m| {
                Error::invalid(
                    op,
                    if specs.len() > 1 {
                        format!("tasks[{i}].{m}")
                    } else {
                        m
                    },
                )
            })?;
        }
        // Group by queue, remembering each task's input position.
        let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, s) in specs.iter().enumerate() {
            groups.entry(s.queue.as_str()).or_default().push(i);
        }
        let mut out: Vec<Option<Submitted>> = vec![None; specs.len()];
        for (queue, positions) in groups {
            let registered_now = self.register_queue(queue, false).await?;
            let mut args = Vec::with_capacity(1 + positions.len() * 6);
            args.push(arg(positions.len()));
            let now = self.clock.now_ms();
            let mut ids = Vec::with_capacity(positions.len());
            for &i in &positions {
                let s = &specs[i];
                let id = match &s.id {
                    Some(id) => id.clone(),
                    None => self.entropy.ulid(now).to_string(),
                };
                args.push(arg(&id));
                ids.push(id);
                args.push(arg(&s.tenant));
                args.push(arg(&s.task_type));
                args.push(s.payload.as_bytes().to_vec());
                // A setting at its default goes as '' (enqueue.lua reads it as the default
                // without parsing or validating it). The priority is a value of its own; the
                // other twelve settings travel packed in one value, comma-separated, or as ''
                // when all are at their defaults: a default task is five values and an empty
                // one, which cost Redis less to receive than seventeen (docs/measurements.md).
                let b = &s.backoff;
                let d = Backoff::default();
                args.push(opt_arg(s.priority, 0));
                let settings = [
                    s.run_at_ms.map(arg).unwrap_or_default(),
                    opt_arg(s.delay_ms, 0),
                    opt_arg(s.max_retries, DEFAULT_MAX_RETRIES),
                    opt_arg(b.initial_ms, d.initial_ms),
                    opt_arg(b.multiplier, d.multiplier),
                    opt_arg(b.max_ms, d.max_ms),
                    opt_arg(b.jitter, d.jitter),
                    opt_arg(s.lease_ms, DEFAULT_LEASE_MS),
                    s.timeout_ms.map(arg).unwrap_or_default(),
                    s.idempotency_key.as_ref().map(arg).unwrap_or_default(),
                    s.idempotency_key
                        .as_ref()
                        .map(|_| arg(IDEMPOTENCY_TTL_MS))
                        .unwrap_or_default(),
                    // Last: it may hold commas (enqueue.lua takes all after the eleventh).
                    s.trace
                        .as_ref()
                        .map(|t| arg(t.stored()))
                        .unwrap_or_default(),
                ];
                args.push(if settings.iter().all(Vec::is_empty) {
                    Vec::new()
                } else {
                    settings.join(&b","[..])
                });
            }
            let reply = call(&*self.store, op, queue, args).await?;
            let it = items(op, &reply, "")?;
            let stored_at = int_at(op, it, 0)? as u64;
            let results = array_at(op, it, 1)?;
            if results.len() != positions.len() {
                return Err(Error::protocol(op, "reply count differs from task count"));
            }
            for ((r, &i), id) in results.iter().zip(&positions).zip(ids) {
                let submitted = match r {
                    // A new task: the store answers 1 and the record is what was sent, stored at
                    // the store's time (its status and run_at follow from it, `first_run`).
                    Resp::Int(1) => {
                        let (status, run_at_ms) = first_run(&specs[i], stored_at);
                        Submitted {
                            task: specs[i].stored(id, status, run_at_ms, stored_at),
                            created: true,
                        }
                    }
                    Resp::Array(item) if int_at(op, item, 0)? == 0 => Submitted {
                        task: decode::task(op, queue, array_at(op, item, 1)?)?,
                        created: false,
                    },
                    _ => return Err(Error::protocol(op, "item is neither 1 nor [0, task]")),
                };
                out[i] = Some(submitted);
            }
            // The queue is new to the store although this client recorded it before: the store
            // lost its data (a Redis restart without persistence), registry included. Record it
            // again, or workers serving every known queue would never see these tasks.
            if int_at(op, it, 2)? == 1 && !registered_now {
                self.register_queue(queue, true).await?;
            }
        }
        Ok(out.into_iter().flatten().collect())
    }
}

/// A new task's status and first run (ms) when the store took it at `stored_at_ms`, by
/// enqueue.lua's rule: `run_at_ms` when set, else `stored_at_ms + delay_ms`; scheduled when that
/// is later than `stored_at_ms`, else queued.
fn first_run(spec: &TaskSpec, stored_at_ms: u64) -> (Status, u64) {
    let run_at_ms = spec
        .run_at_ms
        .unwrap_or_else(|| stored_at_ms.saturating_add(spec.delay_ms));
    let status = if run_at_ms > stored_at_ms {
        Status::Scheduled
    } else {
        Status::Queued
    };
    (status, run_at_ms)
}
