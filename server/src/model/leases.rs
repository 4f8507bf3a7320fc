//! The JSON of the worker protocol (`/api/v1/leases`, [`crate::api::leases`]): the bodies a
//! worker sends and the answers it gets. Limits are written once here and in
//! [`crate::pull`]; the OpenAPI schemas derive from these types.

use crate::model::format_time_ms;
use crate::names::Name;
use orq::heartbeat::heartbeat_interval_ms;
use orq::Task;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

/// Largest `result` of a completion (bytes of JSON): a payload's limit.
pub const RESULT_MAX_BYTES: usize = orq::task::PAYLOAD_MAX_BYTES;
/// Largest `error` of a failure report (bytes); the store keeps the first 2 KiB.
pub const ERROR_MAX_BYTES: usize = 64 * 1024;
/// Largest body of a report (bytes): a full `result` plus the other fields.
pub const REPORT_BODY_MAX_BYTES: usize = RESULT_MAX_BYTES + 64 * 1024;
/// Most completions in one `POST /api/v1/leases/complete` (the Rust worker's group commit,
/// `orq::ops::COMPLETE_BATCH_MAX`).
pub const COMPLETE_MANY_MAX: usize = orq::ops::COMPLETE_BATCH_MAX;
/// Largest body of a batched completion (bytes): 4 MiB in all (each result at most
/// [`RESULT_MAX_BYTES`]).
pub const COMPLETE_MANY_BODY_MAX_BYTES: usize = 4 * 1024 * 1024;
/// The divisor of a task's lease that gives the heartbeat interval a lease answer advises (the
/// Rust worker's default, `WorkerConfig::heartbeat_divisor`).
pub const HEARTBEAT_DIVISOR: u64 = 3;

/// The pattern of a lease token in the OpenAPI document (`orq::keys::is_valid_lease_token`'s
/// rule; `server/tests/openapi.rs` checks the two agree).
pub const LEASE_TOKEN_PATTERN: &str = "^(0|[1-9][0-9]{0,19})-[0-9a-f]{1,32}$";

/// A lease token of the shape the lease answered (`<epoch>-<hex>`), checked where it enters:
/// a malformed one is a 400 naming `token`. Only the store can tell whether it still holds.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct LeaseToken(String);

/// The error of a string that is not a lease token.
#[derive(Debug)]
pub struct MalformedToken;

impl std::fmt::Display for MalformedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("malformed (a lease token is <epoch>-<hex digits>, as the lease answered it)")
    }
}

impl TryFrom<String> for LeaseToken {
    type Error = MalformedToken;
    fn try_from(s: String) -> Result<Self, MalformedToken> {
        if orq::keys::is_valid_lease_token(&s) {
            Ok(LeaseToken(s))
        } else {
            Err(MalformedToken)
        }
    }
}

impl std::ops::Deref for LeaseToken {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl utoipa::PartialSchema for LeaseToken {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .pattern(Some(LEASE_TOKEN_PATTERN))
            .description(Some("A lease token, as the lease answered it."))
            .build()
            .into()
    }
}

impl ToSchema for LeaseToken {
    fn name() -> std::borrow::Cow<'static, str> {
        "LeaseToken".into()
    }
}

/// The body of `POST /api/v1/leases`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseBody {
    /// The worker's id, recorded on the leases, in the task's history and in the queue's
    /// workers view (`[A-Za-z0-9._-]{1,64}`; one per worker process).
    #[schema(value_type = String, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub worker: Name,
    /// The queues to lease from (1..=16 names, each an existing queue; a name given twice
    /// counts once).
    #[schema(min_items = 1, max_items = 16)]
    pub queues: Vec<Name>,
    /// Most tasks to lease (1..=100, default 1).
    #[schema(minimum = 1, maximum = 100)]
    #[serde(default, deserialize_with = "super::opt_int")]
    pub count: Option<u64>,
    /// How long to wait for work when none is ready (ms, 0..=30000, default 0: answer at once).
    /// The answer comes as soon as a task is leased.
    #[schema(minimum = 0, maximum = 30_000)]
    #[serde(default, deserialize_with = "super::opt_int")]
    pub wait_ms: Option<u64>,
    /// Lease only these tenants' tasks, served among themselves by fair share (1..=16 names;
    /// default: every tenant's, or those of a worker key limited to some tenants, which may
    /// name only those).
    #[schema(min_items = 1, max_items = 16)]
    #[serde(default)]
    pub tenants: Option<Vec<Name>>,
}

/// A task leased through the worker protocol.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = LeasedTask)]
pub struct LeasedTaskJson {
    /// ULID (upper case).
    #[schema(pattern = "^[0-9A-HJKMNP-TV-Z]{26}$")]
    pub id: String,
    /// Queue: send it with every report.
    pub queue: String,
    /// Tenant.
    pub tenant: String,
    /// Handler type.
    #[serde(rename = "type")]
    pub task_type: String,
    /// The payload, byte for byte as submitted.
    #[schema(value_type = Value)]
    pub payload: Box<RawValue>,
    /// 0..9.
    pub priority: u8,
    /// This attempt's number (1 for the first run).
    pub attempt: u32,
    /// Retries allowed after the first attempt.
    pub max_retries: u32,
    /// Fencing epoch: grows by one with every lease of the task. Pass it to the systems the
    /// handler writes to, so they can refuse a write of an older lease.
    pub epoch: u64,
    /// The lease token: send it with every heartbeat and report of this lease.
    pub token: String,
    /// The lease's deadline by the store's clock.
    #[schema(format = DateTime)]
    pub lease_expires_at: String,
    /// The lease's length (ms): each heartbeat extends the deadline to now plus this.
    pub lease_ms: u64,
    /// How often to heartbeat (ms): a third of the lease, at most 2000 (heartbeats also tell
    /// the worker that the task was cancelled).
    pub heartbeat_ms: u64,
    /// The handler's time limit (ms), or null.
    #[schema(required = true)]
    pub timeout_ms: Option<u64>,
    /// Submit time.
    #[schema(format = DateTime)]
    pub created_at: String,
    /// Its trace context: a handler that traces continues the submit's trace from it.
    #[serde(flatten)]
    pub trace: super::TraceJson,
}

impl LeasedTaskJson {
    /// The answer for `task`, which holds a lease (its fields come from the lease call). `None`
    /// when it has no lease or a payload that is not JSON (then it cannot be handed out).
    pub fn from_leased(task: Task) -> Option<Self> {
        let lease = task.lease?;
        let payload = RawValue::from_string(task.payload).ok()?;
        Some(LeasedTaskJson {
            trace: task.trace.as_ref().into(),
            id: task.id,
            queue: task.queue,
            tenant: task.tenant,
            task_type: task.task_type,
            payload,
            priority: task.priority,
            attempt: task.attempt,
            max_retries: task.max_retries,
            epoch: lease.epoch,
            token: lease.token,
            lease_expires_at: format_time_ms(lease.expires_at_ms),
            lease_ms: task.lease_ms,
            heartbeat_ms: heartbeat_interval_ms(task.lease_ms, HEARTBEAT_DIVISOR),
            timeout_ms: task.timeout_ms,
            created_at: format_time_ms(task.created_at_ms),
        })
    }
}

/// The answer of `POST /api/v1/leases`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Leases)]
pub struct LeasesJson {
    /// The leased tasks: empty when the wait ended with no work.
    pub tasks: Vec<LeasedTaskJson>,
}

/// The body of `POST /api/v1/leases/{id}/heartbeat`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatBody {
    /// The task's queue.
    #[schema(value_type = String, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub queue: Name,
    /// The lease token, as the lease answered it.
    pub token: LeaseToken,
    /// Extend the deadline to now plus this (ms, 1000..=3600000; default: the task's lease_ms).
    #[schema(minimum = 1000, maximum = 3_600_000)]
    #[serde(default, deserialize_with = "super::opt_int")]
    pub extend_ms: Option<u64>,
}

/// The answer of a heartbeat.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Heartbeat)]
pub struct HeartbeatJson {
    /// The lease's new deadline by the store's clock.
    #[schema(format = DateTime)]
    pub lease_expires_at: String,
    /// Time left until that deadline (ms), for a deadline by the worker's own clock.
    pub lease_left_ms: u64,
}

/// The body of `POST /api/v1/leases/{id}/complete`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteBody {
    /// The task's queue.
    #[schema(value_type = String, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub queue: Name,
    /// The lease token, as the lease answered it.
    pub token: LeaseToken,
    /// The handler's result: any JSON (at most 1 MiB; default null).
    #[schema(value_type = Value, required = false)]
    #[serde(default)]
    pub result: Option<Box<RawValue>>,
}

/// The body of `POST /api/v1/leases/{id}/fail`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailBody {
    /// The task's queue.
    #[schema(value_type = String, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub queue: Name,
    /// The lease token, as the lease answered it.
    pub token: LeaseToken,
    /// What went wrong (1..=65536 bytes; the task keeps the first 2048).
    #[schema(min_length = 1, max_length = 65536)]
    pub error: String,
    /// True: no retry, the task goes to the dead-letter queue now. False (the default): it is
    /// retried with its backoff while it has retries left.
    #[serde(default)]
    pub permanent: bool,
}

/// The body of `POST /api/v1/leases/{id}/release`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseBody {
    /// The task's queue.
    #[schema(value_type = String, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub queue: Name,
    /// The lease token, as the lease answered it.
    pub token: LeaseToken,
}

/// How a report ended.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReportedJson {
    /// This call applied it.
    Applied,
    /// An earlier call with the same token applied it (its answer was lost): nothing changed.
    AlreadyApplied,
}

impl From<orq::ops::Reported> for ReportedJson {
    fn from(r: orq::ops::Reported) -> Self {
        match r {
            orq::ops::Reported::Applied => ReportedJson::Applied,
            orq::ops::Reported::AlreadyApplied => ReportedJson::AlreadyApplied,
        }
    }
}

/// The answer of a complete, fail or release.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Report)]
pub struct ReportJson {
    /// The task id.
    pub id: String,
    /// Whether this call applied the report.
    pub reported: ReportedJson,
}

/// The body of `POST /api/v1/leases/complete`: several leases of one queue completed in one call
/// (one script call in the store), as a worker whose handlers finish together sends them.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteManyBody {
    /// The tasks' queue.
    #[schema(value_type = String, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub queue: Name,
    /// The completions (1..=100), each applied on its own: one refused does not hold back the
    /// others.
    #[schema(min_items = 1, max_items = 100)]
    pub completions: Vec<CompletionItem>,
}

/// One completion of a [`CompleteManyBody`].
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompletionItem {
    /// The task id (a ULID).
    #[schema(pattern = "^[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}$")]
    pub id: String,
    /// The lease token, as the lease answered it.
    pub token: LeaseToken,
    /// The handler's result: any JSON (at most 1 MiB; default null).
    #[schema(value_type = Value, required = false)]
    #[serde(default)]
    pub result: Option<Box<RawValue>>,
}

/// The answer of `POST /api/v1/leases/complete`: one report per completion, in order.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = CompleteManyAnswer)]
pub struct CompleteManyJson {
    /// One per completion sent, in the same order.
    pub reports: Vec<ItemReportJson>,
}

/// What became of one completion of a batch: `reported` when it was applied (now or by an
/// earlier call with its token), else `error` with the code its own `complete` call would have
/// answered (`lease_lost`, `cancelled`, `not_found`, `bad_request`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ItemReport)]
pub struct ItemReportJson {
    /// The task id.
    pub id: String,
    /// Set when the completion holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported: Option<ReportedJson>,
    /// Set when it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<crate::error::ErrorDetail>,
}
