//! The task model: what a client submits ([`TaskSpec`]), what the store holds ([`Task`]) and the
//! status machine ([`Status`]).

use crate::attempt::Attempt;
pub use crate::trace::TraceContext;
pub use orq_lua::facts::{BACKOFF_INITIAL_MS_MAX, LEASE_MS_MAX, LEASE_MS_MIN, TIMEOUT_MS_MAX};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Most tasks in one batch submit (one script call per queue in the batch).
pub const BATCH_MAX: usize = 1000;
/// Highest priority (most urgent). Priorities run from 0 to `PRIORITY_MAX`.
pub const PRIORITY_MAX: u8 = 9;
/// Most retries a task may ask for.
pub const MAX_RETRIES_MAX: u32 = 100;
/// Longest delay before a task's first run (ms): one year.
pub const DELAY_MS_MAX: u64 = 366 * 24 * 3_600_000;
/// How long an idempotency key is remembered after its submit (ms): 24 h.
pub const IDEMPOTENCY_TTL_MS: u64 = 24 * 3_600_000;
/// Default payload size limit (bytes): 1 MiB.
pub const PAYLOAD_MAX_BYTES: usize = 1 << 20;

/// Where a task is in its life. See DESIGN.md, Task model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Waiting for its `run_at`.
    Scheduled,
    /// Ready to be leased.
    Queued,
    /// Held by a worker under a lease.
    Leased,
    /// Failed, waiting for its backoff before the next attempt.
    Retrying,
    /// Finished successfully (terminal).
    Completed,
    /// Retries spent or a permanent error: in the dead-letter queue (terminal until replayed).
    Dead,
    /// Cancelled (terminal).
    Cancelled,
}

impl Status {
    /// Every status, in listing order.
    pub const ALL: [Status; 7] = [
        Status::Scheduled,
        Status::Queued,
        Status::Leased,
        Status::Retrying,
        Status::Completed,
        Status::Dead,
        Status::Cancelled,
    ];

    /// The lowercase name used in the store and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Scheduled => "scheduled",
            Status::Queued => "queued",
            Status::Leased => "leased",
            Status::Retrying => "retrying",
            Status::Completed => "completed",
            Status::Dead => "dead",
            Status::Cancelled => "cancelled",
        }
    }

    /// Parse a lowercase name.
    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// True for statuses no transition leaves on its own (completed, dead, cancelled).
    pub fn is_finished(self) -> bool {
        matches!(self, Status::Completed | Status::Dead | Status::Cancelled)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Retry backoff: the wait after attempt `a` fails is
/// `min(max_ms, initial_ms * multiplier^(a-1))`, then scaled by a uniform factor in
/// `[1 - jitter, 1 + jitter]` ("full jitter" variants are discussed in the AWS Architecture Blog,
/// "Exponential Backoff And Jitter"; this is the bounded ± form).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Backoff {
    /// Wait after the first failure (ms).
    pub initial_ms: u64,
    /// Growth factor per attempt (≥ 1).
    pub multiplier: f64,
    /// Cap on the wait (ms).
    pub max_ms: u64,
    /// Jitter fraction in `[0, 1]`.
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial_ms: orq_lua::facts::DEFAULT_BACKOFF_INITIAL_MS,
            multiplier: orq_lua::facts::DEFAULT_BACKOFF_MULTIPLIER,
            max_ms: orq_lua::facts::DEFAULT_BACKOFF_MAX_MS,
            jitter: orq_lua::facts::DEFAULT_BACKOFF_JITTER,
        }
    }
}

// The task record stores a setting only where it differs from these defaults and
// [`Backoff::default`]; the scripts get the same values (orq_lua::facts::task_defaults).
pub use orq_lua::facts::{DEFAULT_LEASE_MS, DEFAULT_MAX_RETRIES};

pub use orq_lua::fields::{stored, STORED_NAMES};

/// The stored name of task field `name` (`"status"` → `"s"`); `None` for a name that is no task
/// field.
pub fn stored_name(name: &str) -> Option<&'static str> {
    STORED_NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| *s)
}

/// The task field a stored name holds (`"s"` → `"status"`); `None` for a name orq does not
/// store.
pub fn field_of_stored(stored: &str) -> Option<&'static str> {
    STORED_NAMES
        .iter()
        .find(|(_, s)| *s == stored)
        .map(|(n, _)| *n)
}

/// A task to submit. Only `payload` has no default; [`TaskSpec::new`] fills the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSpec {
    /// Queue name (`[A-Za-z0-9._-]{1,64}`).
    pub queue: String,
    /// Tenant name (`[A-Za-z0-9._-]{1,64}`).
    pub tenant: String,
    /// Handler name (`[A-Za-z0-9._-]{1,64}`).
    pub task_type: String,
    /// The payload: JSON text, at most [`PAYLOAD_MAX_BYTES`] by default.
    pub payload: String,
    /// 0..=9, 9 most urgent.
    pub priority: u8,
    /// Wait before the first run, by the store's clock (ms). Ignored when `run_at_ms` is set.
    pub delay_ms: u64,
    /// Absolute time of the first run (ms since the Unix epoch), by the store's clock.
    pub run_at_ms: Option<u64>,
    /// Retries after the first attempt (0..=100); attempts total at most `max_retries + 1`.
    pub max_retries: u32,
    /// Retry backoff.
    pub backoff: Backoff,
    /// Lease length (ms), renewed by heartbeats.
    pub lease_ms: u64,
    /// Handler timeout (ms); `None` lets the handler run as long as it heartbeats.
    pub timeout_ms: Option<u64>,
    /// Idempotency key: a second submit with the same key (within 24 h) returns the first task.
    pub idempotency_key: Option<String>,
    /// The id to use; `None` makes a fresh ULID.
    pub id: Option<String>,
    /// The W3C trace context the task's attempts continue (their `orq.task` spans); `None`: each
    /// attempt starts a trace of its own.
    pub trace: Option<TraceContext>,
}

impl TaskSpec {
    /// The task as `enqueue` stores it from this spec: id `id`, the status and run_at the store
    /// decided, created and updated at `now_ms` (the store's time), no attempt yet.
    pub fn stored(&self, id: String, status: Status, run_at_ms: u64, now_ms: u64) -> Task {
        Task {
            id,
            queue: self.queue.clone(),
            tenant: self.tenant.clone(),
            task_type: self.task_type.clone(),
            payload: self.payload.clone(),
            priority: self.priority,
            status,
            attempt: 0,
            max_retries: self.max_retries,
            run_at_ms,
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            finished_at_ms: None,
            lease: None,
            last_error: None,
            result: None,
            backoff: self.backoff,
            lease_ms: self.lease_ms,
            timeout_ms: self.timeout_ms,
            idempotency_key: self.idempotency_key.clone(),
            replays: 0,
            attempts: Vec::new(),
            trace: self.trace.clone(),
        }
    }

    /// A spec with the documented defaults: queue and tenant `default`, type `echo`, priority 0,
    /// no delay, [`DEFAULT_MAX_RETRIES`] retries, [`Backoff::default`], a [`DEFAULT_LEASE_MS`]
    /// lease, no timeout.
    pub fn new(payload: impl Into<String>) -> Self {
        TaskSpec {
            queue: "default".into(),
            tenant: "default".into(),
            task_type: "echo".into(),
            payload: payload.into(),
            priority: 0,
            delay_ms: 0,
            run_at_ms: None,
            max_retries: DEFAULT_MAX_RETRIES,
            backoff: Backoff::default(),
            lease_ms: DEFAULT_LEASE_MS,
            timeout_ms: None,
            idempotency_key: None,
            id: None,
            trace: None,
        }
    }

    /// Builder: the queue.
    pub fn queue(mut self, q: impl Into<String>) -> Self {
        self.queue = q.into();
        self
    }
    /// Builder: the tenant.
    pub fn tenant(mut self, t: impl Into<String>) -> Self {
        self.tenant = t.into();
        self
    }
    /// Builder: the handler type.
    pub fn task_type(mut self, t: impl Into<String>) -> Self {
        self.task_type = t.into();
        self
    }
    /// Builder: the priority.
    pub fn priority(mut self, p: u8) -> Self {
        self.priority = p;
        self
    }
    /// Builder: the delay (ms).
    pub fn delay_ms(mut self, ms: u64) -> Self {
        self.delay_ms = ms;
        self
    }
    /// Builder: retries after the first attempt.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }
    /// Builder: the backoff.
    pub fn backoff(mut self, b: Backoff) -> Self {
        self.backoff = b;
        self
    }
    /// Builder: the lease length (ms).
    pub fn lease_ms(mut self, ms: u64) -> Self {
        self.lease_ms = ms;
        self
    }
    /// Builder: the handler timeout (ms).
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }
    /// Builder: the idempotency key.
    pub fn idempotency_key(mut self, k: impl Into<String>) -> Self {
        self.idempotency_key = Some(k.into());
        self
    }

    /// Builder: the trace context the task's attempts continue.
    pub fn trace(mut self, context: TraceContext) -> Self {
        self.trace = Some(context);
        self
    }

    /// Check every field against its documented range and alphabet; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        use crate::keys::{is_valid_idempotency_key, is_valid_name, is_valid_task_id};
        for (field, v) in [
            ("queue", &self.queue),
            ("tenant", &self.tenant),
            ("type", &self.task_type),
        ] {
            if !is_valid_name(v) {
                return Err(format!("{field}: must match [A-Za-z0-9._-]{{1,64}}"));
            }
        }
        if self.priority > PRIORITY_MAX {
            return Err(format!("priority: must be 0..={PRIORITY_MAX}"));
        }
        if self.delay_ms > DELAY_MS_MAX {
            return Err(format!(
                "delay_ms: must be at most {DELAY_MS_MAX} (one year)"
            ));
        }
        if self.max_retries > MAX_RETRIES_MAX {
            return Err(format!("max_retries: must be 0..={MAX_RETRIES_MAX}"));
        }
        if !(LEASE_MS_MIN..=LEASE_MS_MAX).contains(&self.lease_ms) {
            return Err(format!(
                "lease_ms: must be {LEASE_MS_MIN}..={LEASE_MS_MAX} (1 s to 1 h)"
            ));
        }
        if let Some(t) = self.timeout_ms {
            if !(1..=TIMEOUT_MS_MAX).contains(&t) {
                return Err(format!("timeout_ms: must be 1..={TIMEOUT_MS_MAX}"));
            }
        }
        let b = &self.backoff;
        if b.initial_ms > BACKOFF_INITIAL_MS_MAX {
            return Err(format!(
                "backoff.initial_ms: must be at most {BACKOFF_INITIAL_MS_MAX} (one day)"
            ));
        }
        if !(b.multiplier.is_finite() && (1.0..=100.0).contains(&b.multiplier)) {
            return Err("backoff.multiplier: must be in [1, 100]".into());
        }
        if b.max_ms > 604_800_000 {
            return Err("backoff.max_ms: must be at most 604800000 (one week)".into());
        }
        if !(b.jitter.is_finite() && (0.0..=1.0).contains(&b.jitter)) {
            return Err("backoff.jitter: must be in [0, 1]".into());
        }
        if let Some(k) = &self.idempotency_key {
            if !is_valid_idempotency_key(k) {
                return Err("idempotency_key: must match [A-Za-z0-9._:-]{1,128}".into());
            }
        }
        if let Some(id) = &self.id {
            if !is_valid_task_id(id) {
                return Err("id: must be a ULID".into());
            }
        }
        if self.payload.len() > PAYLOAD_MAX_BYTES {
            return Err(format!("payload: larger than {PAYLOAD_MAX_BYTES} bytes"));
        }
        Ok(())
    }
}

/// A live lease as the task records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The worker holding it.
    pub worker: String,
    /// Deadline by the store's clock (ms since the Unix epoch).
    pub expires_at_ms: u64,
    /// Fencing epoch: grows by one with every lease of the task.
    pub epoch: u64,
    /// The full token (`<epoch>-<random hex>`) that heartbeat / complete / fail / release present.
    pub token: String,
}

/// A task as the store holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// ULID.
    pub id: String,
    /// Queue name.
    pub queue: String,
    /// Tenant name.
    pub tenant: String,
    /// Handler name.
    pub task_type: String,
    /// Payload, JSON text as submitted (byte for byte).
    pub payload: String,
    /// 0..=9.
    pub priority: u8,
    /// Current status.
    pub status: Status,
    /// Attempts started (the current one included while leased).
    pub attempt: u32,
    /// Retries allowed after the first attempt.
    pub max_retries: u32,
    /// When the task became (or becomes) due, by the store's clock (ms).
    pub run_at_ms: u64,
    /// Submit time (ms).
    pub created_at_ms: u64,
    /// Last transition (ms).
    pub updated_at_ms: u64,
    /// When it completed, died or was cancelled (ms).
    pub finished_at_ms: Option<u64>,
    /// The live lease, when leased.
    pub lease: Option<Lease>,
    /// The last attempt's error.
    pub last_error: Option<String>,
    /// The handler's result, JSON text.
    pub result: Option<String>,
    /// Retry backoff.
    pub backoff: Backoff,
    /// Lease length (ms).
    pub lease_ms: u64,
    /// Handler timeout (ms).
    pub timeout_ms: Option<u64>,
    /// The idempotency key it was submitted with.
    pub idempotency_key: Option<String>,
    /// Times it was replayed from the DLQ.
    pub replays: u32,
    /// The attempts that ended, oldest first: each failed or expired one (the last 20 kept), then
    /// a completed task's successful one. A replay keeps them.
    pub attempts: Vec<Attempt>,
    /// The trace context it was submitted with ([`TaskSpec::trace`]).
    pub trace: Option<TraceContext>,
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: no two fields share a stored name, and the lookups map both ways. (The scripts'
    // `F` table is generated from the same list: orq_lua::fields.)
    #[test]
    fn stored_names_are_distinct_and_map_both_ways() {
        let mut stored: Vec<&str> = STORED_NAMES.iter().map(|(_, s)| *s).collect();
        stored.sort_unstable();
        stored.dedup();
        assert_eq!(
            stored.len(),
            STORED_NAMES.len(),
            "a stored name is used twice"
        );
        for (name, s) in STORED_NAMES {
            assert_eq!(stored_name(name), Some(s));
            assert_eq!(field_of_stored(s), Some(name));
            assert_eq!(
                field_of_stored(name),
                None,
                "{name} is both a name and a stored name"
            );
        }
        assert_eq!(stored_name("id"), None);
    }
}
