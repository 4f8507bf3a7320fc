//! The lease-holder's operations: lease, heartbeat, complete, fail, release, promote and reap, as
//! typed calls of their scripts. The worker pool and the scheduler are built from these; tests and
//! the simulator call them directly to play a worker that crashes between two of them.

use crate::client::{call, RETENTION_MS, TRIM_BOUND};
use crate::decode::{self, array_at, int_at, items, str_at};
use crate::error::{Error, Result};
use crate::metrics::metrics;
use crate::store::Store;
use crate::task::{stored, Task};
use crate::Resp;

/// Most tasks one lease call may return.
pub const LEASE_BATCH_MAX: usize = 100;
/// Most due scheduled tasks a lease call promotes before leasing.
pub const LEASE_PROMOTE_BOUND: u64 = 100;
/// Most expired leases a lease call reaps before leasing.
pub const LEASE_REAP_BOUND: u64 = 10;

/// The reply of one lease call.
#[derive(Debug, Clone, PartialEq)]
pub struct Leased {
    /// The store's time of the call (ms).
    pub now_ms: u64,
    /// The leased tasks, each with `lease` set.
    pub tasks: Vec<Task>,
    /// Leased tasks whose fields could not be decoded (corrupt or foreign state). They are
    /// leased in the store, but no handler can run them: the worker fails them permanently.
    pub corrupt: Vec<CorruptLease>,
    /// When to ask again by the store's clock: `now_ms` when ready work is left, the earliest
    /// scheduled run_at otherwise, `None` when nothing is waiting.
    pub next_ms: Option<u64>,
}

/// A leased task whose hash could not be decoded into a [`Task`].
#[derive(Debug, Clone, PartialEq)]
pub struct CorruptLease {
    /// The task id, as its `id` field says (empty when it has none).
    pub id: String,
    /// The lease token, as its `token` field says (empty when it has none).
    pub token: String,
    /// What the decoder refused.
    pub error: Error,
}

/// How a complete / fail / release call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reported {
    /// The transition was applied by this call.
    Applied,
    /// A previous call with the same token already applied it (its reply was lost).
    AlreadyApplied,
}

/// What the `lease` script wrote to a task beside its reply (lease.lua's header): the reply
/// carries the record as it was before the lease, plus these numbers, to spare Redis the strings.
struct LeaseWrite {
    expires_at_ms: i64,
    epoch: i64,
    attempt: i64,
    now_ms: i64,
}

impl LeaseWrite {
    /// The flat field list of the leased task: `before` (field/value pairs, `id` last) with the
    /// fields the lease wrote replaced, or added before `id`, in the order the script writes them.
    fn apply(&self, before: &[Resp], worker: &str, token_bits: &str) -> Vec<Resp> {
        let written: [(&str, String); 7] = [
            (stored::epoch, self.epoch.to_string()),
            (stored::attempt, self.attempt.to_string()),
            (stored::token, format!("{}-{token_bits}", self.epoch)),
            (stored::worker, worker.to_string()),
            (stored::lease_exp, self.expires_at_ms.to_string()),
            (stored::updated_at, self.now_ms.to_string()),
            (stored::status, "leased".to_string()),
        ];
        let mut flat: Vec<Resp> = Vec::with_capacity(before.len() + 2 * written.len());
        let mut id: Option<&[Resp]> = None;
        for pair in before.chunks(2) {
            let name = pair[0].as_bytes().unwrap_or_default();
            if name == b"id" {
                id = Some(pair);
            } else if !written.iter().any(|(w, _)| w.as_bytes() == name) {
                flat.extend(pair.iter().cloned());
            }
        }
        for (name, value) in written {
            flat.push(Resp::Bulk(name.as_bytes().to_vec()));
            flat.push(Resp::Bulk(value.into_bytes()));
        }
        if let Some(pair) = id {
            flat.extend(pair.iter().cloned());
        }
        flat
    }
}

fn arg(s: impl ToString) -> Vec<u8> {
    s.to_string().into_bytes()
}

/// Lease up to `n` (1..=[`LEASE_BATCH_MAX`]) tasks of `queue` for `worker`. `token_bits` is
/// 1..=32 lowercase hex digits of randomness; `seed` in `[0, 1)` jitters reaped tasks' retries.
pub async fn lease(
    store: &dyn Store,
    queue: &str,
    worker: &str,
    n: usize,
    token_bits: &str,
    seed: f64,
) -> Result<Leased> {
    lease_among(store, queue, worker, n, token_bits, seed, &[]).await
}

/// Most tenants one lease may be limited to ([`lease_among`]).
pub const LEASE_TENANTS_MAX: usize = orq_lua::facts::LEASE_TENANTS_MAX as usize;

/// [`lease`] limited to the tasks of `tenants` (1..=[`LEASE_TENANTS_MAX`] names, each a valid
/// tenant name; empty: every tenant), served among themselves in their fair-share order. Errors:
/// [`Error::Invalid`] for more names than that or a malformed one (nothing written).
pub async fn lease_among(
    store: &dyn Store,
    queue: &str,
    worker: &str,
    n: usize,
    token_bits: &str,
    seed: f64,
    tenants: &[String],
) -> Result<Leased> {
    let op = "lease";
    let mut args = vec![
        arg(worker),
        arg(n.clamp(1, LEASE_BATCH_MAX)),
        arg(token_bits),
        arg(seed),
        arg(LEASE_PROMOTE_BOUND),
        arg(LEASE_REAP_BOUND),
    ];
    args.extend(tenants.iter().map(arg));
    let reply = call(store, op, queue, args).await?;
    let it = items(op, &reply, "")?;
    let now_ms = int_at(op, it, 0)?;
    leased(
        op,
        queue,
        worker,
        token_bits,
        now_ms,
        array_at(op, it, 1)?,
        int_at(op, it, 2)?,
    )
}

/// The leased tasks of a lease reply's flat array (lease.lua: [`LEASED_ENTRY_LEN`] values per
/// task, `expires_at_ms, fields, epoch, attempt, payload`), one slice per task; `None` when the
/// array's length is not a multiple of that.
pub fn leased_entries(tasks: &[Resp]) -> Option<std::slice::ChunksExact<'_, Resp>> {
    (tasks.len() % LEASED_ENTRY_LEN == 0).then(|| tasks.chunks_exact(LEASED_ENTRY_LEN))
}

/// Values per leased task in a lease reply (orq_lua::facts::LEASED_ENTRY_LEN).
const LEASED_ENTRY_LEN: usize = orq_lua::facts::LEASED_ENTRY_LEN as usize;

/// The fields of one leased task of a lease reply (one slice of [`leased_entries`]), flat
/// (stored name, value, ..., `id`, id), as the record was before the lease: `fields` is an
/// array, or one string of the names and values joined by NUL bytes whose payload value is empty
/// and sent apart as `payload` (nil when the record has none). `None` when the entry has neither
/// shape.
pub fn leased_fields(item: &[Resp]) -> Option<Vec<Resp>> {
    match item.get(1)? {
        Resp::Array(flat) => Some(flat.clone()),
        Resp::Bulk(packed) => Some(unpack(packed, item.get(4))),
        _ => None,
    }
}

/// A packed field string and the payload sent apart, flat ([`leased_fields`]).
fn unpack(packed: &[u8], payload: Option<&Resp>) -> Vec<Resp> {
    let mut flat: Vec<Resp> = packed
        .split(|b| *b == 0)
        .map(|part| Resp::Bulk(part.to_vec()))
        .collect();
    if let Some(Resp::Bulk(p)) = payload {
        for pair in flat.chunks_mut(2) {
            if let [Resp::Bulk(name), value] = pair {
                if name.as_slice() == stored::payload.as_bytes() {
                    *value = Resp::Bulk(p.clone());
                }
            }
        }
    }
    flat
}

/// Decode a lease reply's tasks (the flat array of [`leased_entries`], the fields of each an
/// array or one packed string, lease.lua) and its next_ms (-1: unknown) into a [`Leased`].
fn leased(
    op: &'static str,
    queue: &str,
    worker: &str,
    token_bits: &str,
    now_ms: i64,
    entries: &[Resp],
    next: i64,
) -> Result<Leased> {
    let mut tasks = Vec::new();
    let mut corrupt = Vec::new();
    let entries = leased_entries(entries)
        .ok_or_else(|| Error::protocol(op, "leased tasks are not whole entries"))?;
    let waited = (entries.len() > 0).then(|| metrics().task_wait.with_label_values(&[queue]));
    for item in entries {
        let lease = LeaseWrite {
            expires_at_ms: int_at(op, item, 0)?,
            epoch: int_at(op, item, 2)?,
            attempt: int_at(op, item, 3)?,
            now_ms,
        };
        let before =
            leased_fields(item).ok_or_else(|| Error::protocol(op, "leased item has no fields"))?;
        let flat = lease.apply(&before, worker, token_bits);
        // One task with garbage fields must not cost the others of the batch their lease.
        match decode::task(op, queue, &flat) {
            Ok(task) => {
                if let Some(h) = &waited {
                    // From due to leased, by the store's clock.
                    h.observe(now_ms.saturating_sub(task.run_at_ms as i64).max(0) as f64 / 1000.0);
                }
                tasks.push(task)
            }
            Err(error) => {
                let fields = decode::field_map(op, &flat).unwrap_or_default();
                let field = |name: &str| fields.get(name).cloned().unwrap_or_default();
                corrupt.push(CorruptLease {
                    id: field("id"),
                    token: field(stored::token),
                    error,
                });
            }
        }
    }
    Ok(Leased {
        now_ms: now_ms as u64,
        tasks,
        corrupt,
        next_ms: (next >= 0).then_some(next as u64),
    })
}

/// Extend the lease of task `id` by `extend_ms` (0 = its lease_ms). Returns
/// `(store now ms, new deadline ms)`. Errors: `Stale`, `Cancelled` (abort the handler), `NotFound`.
pub async fn heartbeat(
    store: &dyn Store,
    queue: &str,
    id: &str,
    token: &str,
    extend_ms: u64,
) -> Result<(u64, u64)> {
    let op = "heartbeat";
    let reply = call(store, op, queue, vec![arg(id), arg(token), arg(extend_ms)]).await?;
    let it = refused(queue, op, items(op, &reply, id))?;
    Ok((int_at(op, it, 0)? as u64, int_at(op, it, 1)? as u64))
}

/// Count `r` in `orq_reports_refused_total` when the store refused the report because the lease
/// had ended (stale, cancelled, not_found); `r` itself is returned.
fn refused<T>(queue: &str, op: &'static str, r: Result<T>) -> Result<T> {
    let reason = match &r {
        Err(Error::Stale { .. }) => "stale",
        Err(Error::Cancelled { .. }) => "cancelled",
        Err(Error::NotFound { .. }) => "not_found",
        _ => return r,
    };
    metrics()
        .reports_refused
        .with_label_values(&[queue, op, reason])
        .inc();
    r
}

fn reported(op: &'static str, it: &[crate::resp::Resp]) -> Result<Reported> {
    Ok(if str_at(op, it, 1)? == "again" {
        Reported::AlreadyApplied
    } else {
        Reported::Applied
    })
}

/// Record success with `result` (JSON text). Safe to retry with the same token.
pub async fn complete(
    store: &dyn Store,
    queue: &str,
    id: &str,
    token: &str,
    result: &str,
) -> Result<Reported> {
    let op = "complete";
    let args = vec![
        arg(id),
        arg(token),
        arg(result),
        arg(RETENTION_MS),
        arg(TRIM_BOUND),
    ];
    let reply = call(store, op, queue, args).await?;
    reported(op, refused(queue, op, items(op, &reply, id))?)
}

/// Most items one [`complete_batch`] call may carry.
pub const COMPLETE_BATCH_MAX: usize = 100;

/// One success to record with [`complete_batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The task id.
    pub id: String,
    /// The lease token the task was leased with.
    pub token: String,
    /// The handler's result (JSON text).
    pub result: String,
}

/// Record up to [`COMPLETE_BATCH_MAX`] successes in one script call (`complete_batch`: the
/// worker's group commit). Returns the store's time (ms) and one result per item, in order, each
/// what [`complete`] would answer for that item alone (`Stale`, `Cancelled`, `NotFound`, ...).
/// Safe to retry with the same tokens. Errors for the whole call: an unreachable store,
/// `Invalid` (no items, too many, an empty id or token), `Protocol` (a queue key holds foreign
/// data).
pub async fn complete_batch(
    store: &dyn Store,
    queue: &str,
    batch: &[Completion],
) -> Result<(u64, Vec<Result<Reported>>)> {
    let (now, results, _) = complete_batch_call(store, queue, batch, None).await?;
    Ok((now, results))
}

/// What a [`complete_and_lease`] call leases after its completions: the arguments of [`lease`].
#[derive(Debug, Clone, Copy)]
pub struct LeaseRequest<'a> {
    /// The worker id recorded on the leases.
    pub worker: &'a str,
    /// Most tasks to lease (1..=[`LEASE_BATCH_MAX`]).
    pub n: usize,
    /// 1..=32 lowercase hex digits of randomness for the lease tokens.
    pub token_bits: &'a str,
    /// In `[0, 1)`: jitters the retries of reaped tasks.
    pub seed: f64,
}

/// [`complete_batch`] and then [`lease`] in one script call (one round trip, one atomic step):
/// records the successes of `batch` and leases up to `lease.n` tasks of the same queue for the
/// slots they freed, exactly as a `lease` call made right after the completions would. Returns
/// the store's time (ms), one result per item, and the lease. Errors for the whole call: those
/// of [`complete_batch`] and of [`lease`]; `Invalid` arguments and a queue key of another type
/// write nothing, while a `Protocol` error about the reply comes after the script ran (its
/// completions are then answered `AlreadyApplied` by a retry, and the tasks it leased stay
/// leased until their leases expire and are reaped).
/// Retrying after a lost reply is safe for the completions (they answer `AlreadyApplied`); the
/// tasks leased by the lost call stay leased until their leases expire and are reaped, as with
/// a lost [`lease`] reply.
pub async fn complete_and_lease(
    store: &dyn Store,
    queue: &str,
    batch: &[Completion],
    lease: &LeaseRequest<'_>,
) -> Result<(u64, Vec<Result<Reported>>, Leased)> {
    let (now, results, leased) = complete_batch_call(store, queue, batch, Some(lease)).await?;
    let leased =
        leased.ok_or_else(|| Error::protocol("complete_batch", "the reply has no lease"))?;
    Ok((now, results, leased))
}

async fn complete_batch_call(
    store: &dyn Store,
    queue: &str,
    batch: &[Completion],
    lease: Option<&LeaseRequest<'_>>,
) -> Result<(u64, Vec<Result<Reported>>, Option<Leased>)> {
    let op = "complete_batch";
    if batch.is_empty() || batch.len() > COMPLETE_BATCH_MAX {
        return Err(Error::invalid(
            op,
            format!(
                "a completion batch holds 1..={COMPLETE_BATCH_MAX} items, not {}",
                batch.len()
            ),
        ));
    }
    let mut args = Vec::with_capacity(3 + 3 * batch.len() + 6);
    args.push(arg(RETENTION_MS));
    args.push(arg(TRIM_BOUND));
    args.push(arg(batch.len()));
    for c in batch {
        args.push(arg(&c.id));
        args.push(arg(&c.token));
        args.push(c.result.clone().into_bytes());
    }
    if let Some(l) = lease {
        args.extend([
            arg(l.worker),
            arg(l.n.clamp(1, LEASE_BATCH_MAX)),
            arg(l.token_bits),
            arg(l.seed),
            arg(LEASE_PROMOTE_BOUND),
            arg(LEASE_REAP_BOUND),
        ]);
    }
    let reply = call(store, op, queue, args).await?;
    let it = items(op, &reply, "")?;
    let now = int_at(op, it, 0)?;
    let outcomes = array_at(op, it, 1)?;
    if outcomes.len() != batch.len() {
        return Err(Error::protocol(
            op,
            format!("{} outcomes for {} items", outcomes.len(), batch.len()),
        ));
    }
    let results = outcomes
        .iter()
        .zip(batch)
        .map(|(o, c)| match o.as_str() {
            Some("completed") => Ok(Reported::Applied),
            Some("again") => Ok(Reported::AlreadyApplied),
            Some(text) => refused(queue, "complete", Err(Error::from_script(op, text, &c.id))),
            None => Err(Error::protocol(op, "an outcome is not text")),
        })
        .collect();
    let leased = match lease {
        Some(l) => Some(leased(
            op,
            queue,
            l.worker,
            l.token_bits,
            now,
            array_at(op, it, 2)?,
            int_at(op, it, 3)?,
        )?),
        None => None,
    };
    Ok((now as u64, results, leased))
}

/// Record a failed attempt. `retryable: false` sends the task straight to the DLQ; `jitter` in
/// `[0, 1)` is the backoff jitter draw. Safe to retry with the same token.
pub async fn fail(
    store: &dyn Store,
    queue: &str,
    id: &str,
    token: &str,
    error: &str,
    retryable: bool,
    jitter: f64,
) -> Result<Reported> {
    let op = "fail";
    let args = vec![
        arg(id),
        arg(token),
        arg(error),
        arg(u8::from(retryable)),
        arg(jitter),
    ];
    let reply = call(store, op, queue, args).await?;
    reported(op, refused(queue, op, items(op, &reply, id))?)
}

/// Fail a leased task whose record could not be decoded ([`CorruptLease`]) permanently: no
/// handler can run it. Logs what happened; a refusal is logged too (the lease then expires and
/// the reaper retries the task, which fails the same way until it is dead).
pub async fn fail_corrupt(store: &dyn Store, queue: &str, bad: CorruptLease) {
    tracing::warn!(queue = %queue, task = %bad.id, error = %bad.error,
        "leased a task whose fields cannot be decoded; failing it");
    if bad.id.is_empty() || bad.token.is_empty() {
        return;
    }
    let message = format!("corrupt task: {}", bad.error);
    if let Err(e) = fail(store, queue, &bad.id, &bad.token, &message, false, 0.0).await {
        tracing::warn!(task = %bad.id, error = %e, "failing a corrupt task was refused");
    }
}

/// Give a leased task back without spending an attempt. Safe to retry with the same token.
pub async fn release(store: &dyn Store, queue: &str, id: &str, token: &str) -> Result<Reported> {
    let op = "release";
    let reply = call(store, op, queue, vec![arg(id), arg(token)]).await?;
    reported(op, refused(queue, op, items(op, &reply, id))?)
}

/// What a promote or reap call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Maintained {
    /// The store's time of the call (ms).
    pub now_ms: u64,
    /// Tasks promoted (promote) or leases reaped (reap).
    pub moved: u64,
    /// Finished tasks trimmed after retention (reap only).
    pub trimmed: u64,
    /// When the next task falls due (promote) or the next lease expires (reap), by the store's
    /// clock (ms); `None` when nothing is waiting.
    pub next_ms: Option<u64>,
}

/// Promote up to `bound` due tasks.
pub async fn promote(store: &dyn Store, queue: &str, bound: u64) -> Result<Maintained> {
    let op = "promote";
    let reply = call(store, op, queue, vec![arg(bound)]).await?;
    let it = items(op, &reply, "")?;
    let next = int_at(op, it, 2)?;
    Ok(Maintained {
        now_ms: int_at(op, it, 0)? as u64,
        moved: int_at(op, it, 1)? as u64,
        trimmed: 0,
        next_ms: (next >= 0).then_some(next as u64),
    })
}

/// Reap up to `bound` expired leases and trim finished tasks past retention.
pub async fn reap(
    store: &dyn Store,
    queue: &str,
    bound: u64,
    seed: f64,
    retention_ms: u64,
) -> Result<Maintained> {
    let op = "reap";
    let args = vec![arg(bound), arg(seed), arg(retention_ms), arg(TRIM_BOUND)];
    let reply = call(store, op, queue, args).await?;
    let it = items(op, &reply, "")?;
    let next = int_at(op, it, 3)?;
    Ok(Maintained {
        now_ms: int_at(op, it, 0)? as u64,
        moved: int_at(op, it, 1)? as u64,
        trimmed: int_at(op, it, 2)? as u64,
        next_ms: (next >= 0).then_some(next as u64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(pairs: &[(&str, &str)]) -> Vec<Resp> {
        pairs
            .iter()
            .flat_map(|(k, v)| {
                [
                    Resp::Bulk(k.as_bytes().to_vec()),
                    Resp::Bulk(v.as_bytes().to_vec()),
                ]
            })
            .collect()
    }

    // Goal: the leased task a caller decodes is the record as it was with what the lease wrote
    // applied: written fields replaced (a stale token too), absent ones added, the others kept
    // (the last lease's outcome, which the lease does not write), `id` still last; the decoded
    // task carries the lease.
    #[test]
    fn lease_writes_apply_to_the_record_as_it_was() {
        let before = flat(&[
            ("t", "t1"),
            ("y", "echo"),
            ("p", "{}"),
            ("c", "100"),
            ("a", "1"),
            ("e", "2"),
            ("k", "2-old"),
            ("o", "released"),
            ("id", "A"),
        ]);
        let w = LeaseWrite {
            expires_at_ms: 5_300,
            epoch: 3,
            attempt: 2,
            now_ms: 300,
        };
        let got = w.apply(&before, "w1", "ab");
        let want = flat(&[
            ("t", "t1"),
            ("y", "echo"),
            ("p", "{}"),
            ("c", "100"),
            ("o", "released"),
            ("e", "3"),
            ("a", "2"),
            ("k", "3-ab"),
            ("w", "w1"),
            ("x", "5300"),
            ("u", "300"),
            ("s", "leased"),
            ("id", "A"),
        ]);
        assert_eq!(got, want);
        let task = decode::task("lease", "q", &got).unwrap();
        let lease = task.lease.expect("leased");
        assert_eq!(
            (task.attempt, lease.epoch, lease.token.as_str()),
            (2, 3, "3-ab")
        );
        assert_eq!((lease.worker.as_str(), lease.expires_at_ms), ("w1", 5_300));
        assert_eq!((task.id.as_str(), task.updated_at_ms), ("A", 300));
    }

    // Goal: a lease reply's packed fields decode to the same tasks as the array form, the
    // payload (sent apart) kept byte for byte even when it holds the separator, and a packed
    // record without a payload is refused as corrupt, naming the task, not the whole batch.
    // Method: one reply of three entries (packed with a NUL-holding payload, the array form of
    // the same record, packed without a payload), flat as lease.lua sends them, through
    // `leased`; and the same array less its last value, refused as a protocol error.
    #[test]
    fn packed_lease_fields_decode_like_the_array_form() {
        let payload = "{\"a\":\"x\u{0}y z\"}";
        let packed = |id: &str, p: &str| {
            let text = format!("t\x00t1\x00y\x00echo\x00p\x00{p}\x00c\x00100\x00id\x00{id}");
            Resp::Bulk(text.into_bytes())
        };
        let entry = |fields: Resp, payload: Resp| {
            vec![
                Resp::Int(5_300),
                fields,
                Resp::Int(1),
                Resp::Int(1),
                payload,
            ]
        };
        let array_form = Resp::Array(flat(&[
            ("t", "t1"),
            ("y", "echo"),
            ("p", payload),
            ("c", "100"),
            ("id", "B"),
        ]));
        let entries: Vec<Resp> = [
            entry(packed("A", ""), Resp::Bulk(payload.as_bytes().to_vec())),
            entry(array_form, Resp::Nil),
            entry(
                Resp::Bulk(b"t\x00t1\x00y\x00echo\x00c\x00100\x00id\x00C".to_vec()),
                Resp::Nil,
            ),
        ]
        .concat();
        let cut = leased("lease", "q", "w1", "ab", 300, &entries[..14], -1);
        assert!(
            matches!(cut, Err(Error::Protocol { .. })),
            "a partial entry: {cut:?}"
        );
        let got = leased("lease", "q", "w1", "ab", 300, &entries, -1).unwrap();
        assert_eq!(got.tasks.len(), 2, "{got:?}");
        let (a, b) = (&got.tasks[0], &got.tasks[1]);
        assert_eq!((a.id.as_str(), b.id.as_str()), ("A", "B"));
        assert_eq!(a.payload, payload);
        let same = |t: &Task| {
            (
                t.tenant.clone(),
                t.task_type.clone(),
                t.payload.clone(),
                t.created_at_ms,
                t.attempt,
                t.lease.clone().map(|l| (l.epoch, l.token, l.expires_at_ms)),
            )
        };
        assert_eq!(same(a), same(b));
        assert_eq!(got.corrupt.len(), 1);
        assert_eq!(got.corrupt[0].id, "C");
        assert_eq!(got.corrupt[0].token, "1-ab");
    }
}
