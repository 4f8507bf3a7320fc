//! The API's answers: the task representation (times as RFC 3339 UTC with milliseconds) and the
//! other JSON shapes the handlers return, each with its OpenAPI schema.

use super::*;

/// A lease in task JSON.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Lease)]
pub struct LeaseJson {
    /// Worker id.
    pub worker: String,
    /// Deadline, RFC 3339.
    #[schema(format = DateTime)]
    pub expires_at: String,
    /// Fencing epoch.
    pub epoch: u64,
}

/// One ended attempt of a task in task JSON (`orq::Attempt`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Attempt)]
pub struct AttemptJson {
    /// The attempt's number in its life (1 first; a replay from the DLQ starts again at 1).
    pub attempt: u32,
    /// When it ended, RFC 3339.
    #[schema(format = DateTime)]
    pub at: String,
    /// The worker that ran it (`-` when unknown).
    pub worker: String,
    /// How it ended.
    #[schema(value_type = crate::openapi::AttemptOutcomeName)]
    pub outcome: orq::AttemptOutcome,
    /// The error message (at most 2 KiB); null for a completed attempt.
    #[schema(required = true)]
    pub error: Option<String>,
}

impl From<orq::Attempt> for AttemptJson {
    fn from(a: orq::Attempt) -> Self {
        AttemptJson {
            attempt: a.attempt,
            at: format_time_ms(a.at_ms),
            worker: a.worker,
            outcome: a.outcome,
            error: a.error,
        }
    }
}

/// A page of tasks (`GET /tasks`, `GET /dlq`) or the tasks of a batch submit (without cursor).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = TaskPage)]
pub struct TasksJson {
    /// The tasks.
    pub tasks: Vec<TaskJson>,
    /// Pass as `cursor` to get the next page; null when the listing is complete. Absent from
    /// the answer of a batch submit.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub next_cursor: Option<Option<String>>,
    /// Only in the answer of a batch submit: per task, in order, whether this call created it
    /// (false: its idempotency key or id matched an existing task, which is the one returned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<Vec<bool>>,
}

/// A task's retry backoff as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Backoff)]
pub struct BackoffJson {
    /// Wait after the first failure (ms).
    pub initial_ms: u64,
    /// Growth factor per attempt.
    pub multiplier: f64,
    /// Cap on the wait (ms).
    pub max_ms: u64,
    /// Jitter fraction in [0, 1].
    pub jitter: f64,
}

impl From<Backoff> for BackoffJson {
    fn from(b: Backoff) -> Self {
        let Backoff {
            initial_ms,
            multiplier,
            max_ms,
            jitter,
        } = b;
        BackoffJson {
            initial_ms,
            multiplier,
            max_ms,
            jitter,
        }
    }
}

/// A task as the API shows it. The lease token is not shown: only its holder knows it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Task)]
pub struct TaskJson {
    /// ULID (upper case).
    #[schema(pattern = "^[0-9A-HJKMNP-TV-Z]{26}$")]
    pub id: String,
    /// Queue.
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
    /// Status name.
    #[schema(value_type = crate::openapi::StatusName)]
    pub status: Status,
    /// Attempts started.
    pub attempt: u32,
    /// Retries allowed after the first attempt.
    pub max_retries: u32,
    /// When it became or becomes due.
    #[schema(format = DateTime)]
    pub run_at: String,
    /// Submit time.
    #[schema(format = DateTime)]
    pub created_at: String,
    /// Last transition.
    #[schema(format = DateTime)]
    pub updated_at: String,
    /// When it completed, died or was cancelled.
    #[schema(format = DateTime, required = true)]
    pub finished_at: Option<String>,
    /// The live lease, or null.
    #[schema(required = true)]
    pub lease: Option<LeaseJson>,
    /// The error of the last failed or expired attempt, or null. A completed task keeps the
    /// error of an earlier attempt here (its `attempts` end with the successful one).
    #[schema(required = true)]
    pub last_error: Option<String>,
    /// The handler's result (JSON), or null.
    #[schema(value_type = Value, required = true)]
    pub result: Option<Box<RawValue>>,
    /// Retry backoff.
    pub backoff: BackoffJson,
    /// Lease length ms.
    pub lease_ms: u64,
    /// Handler timeout ms.
    #[schema(required = true)]
    pub timeout_ms: Option<u64>,
    /// Idempotency key.
    #[schema(required = true)]
    pub idempotency_key: Option<String>,
    /// Times replayed from the DLQ.
    pub replays: u32,
    /// The attempts that ended, oldest first: each failed or expired one (the last 20 kept),
    /// then a completed task's successful one. A replay keeps them. A running attempt is in
    /// `lease`.
    pub attempts: Vec<AttemptJson>,
    /// Its trace context.
    #[serde(flatten)]
    pub trace: super::TraceJson,
}

fn raw(json: &str) -> Box<RawValue> {
    RawValue::from_string(json.to_string()).unwrap_or_else(|_| {
        // Not JSON (foreign or corrupt state): show it as a JSON string rather than fail.
        RawValue::from_string(serde_json::Value::String(json.to_string()).to_string())
            .expect("a JSON string is valid JSON")
    })
}

impl From<Task> for TaskJson {
    fn from(t: Task) -> Self {
        TaskJson {
            trace: t.trace.as_ref().into(),
            payload: raw(&t.payload),
            result: t.result.as_deref().map(raw),
            lease: t.lease.map(|l| LeaseJson {
                worker: l.worker,
                expires_at: format_time_ms(l.expires_at_ms),
                epoch: l.epoch,
            }),
            run_at: format_time_ms(t.run_at_ms),
            created_at: format_time_ms(t.created_at_ms),
            updated_at: format_time_ms(t.updated_at_ms),
            finished_at: t.finished_at_ms.map(format_time_ms),
            id: t.id,
            queue: t.queue,
            tenant: t.tenant,
            task_type: t.task_type,
            priority: t.priority,
            status: t.status,
            attempt: t.attempt,
            max_retries: t.max_retries,
            last_error: t.last_error,
            backoff: t.backoff.into(),
            lease_ms: t.lease_ms,
            timeout_ms: t.timeout_ms,
            idempotency_key: t.idempotency_key,
            replays: t.replays,
            attempts: t.attempts.into_iter().map(AttemptJson::from).collect(),
        }
    }
}

/// `{"status": "ok"}` of `GET /healthz`, `{"status": "ready"}` of `GET /readyz`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Health)]
pub struct HealthJson {
    /// `ok` (the process is up) or `ready` (the store answers).
    #[schema(value_type = String, example = "ok")]
    pub status: &'static str,
}

/// Tasks per status, every status present (0 when none).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(transparent)]
pub struct CountsJson(pub BTreeMap<&'static str, i64>);

impl CountsJson {
    /// Every status of [`Status::ALL`] with its count in `c` (0 when absent).
    pub fn of(c: &BTreeMap<Status, i64>) -> Self {
        CountsJson(
            Status::ALL
                .iter()
                .map(|s| (s.as_str(), c.get(s).copied().unwrap_or(0)))
                .collect(),
        )
    }
}

impl utoipa::PartialSchema for CountsJson {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Type};
        let mut o =
            ObjectBuilder::new().additional_properties(Some(AdditionalProperties::FreeForm(false)));
        for s in Status::ALL {
            let count = ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0));
            o = o.property(s.as_str(), count).required(s.as_str());
        }
        o.description(Some("Tasks per status.")).into()
    }
}

impl ToSchema for CountsJson {
    fn name() -> std::borrow::Cow<'static, str> {
        "Counts".into()
    }
}

/// Why a tenant's ready work is held back right now.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(tag = "by", rename_all = "snake_case")]
#[schema(as = Held)]
pub enum HeldJson {
    /// At its `max_inflight`: until one of its leases ends.
    MaxInflight,
    /// Out of rate-limit tokens: until the next token is due.
    RateLimit {
        /// When the next token is due (store clock, ms since the Unix epoch).
        until_ms: u64,
    },
}

impl From<orq::client::Held> for HeldJson {
    fn from(h: orq::client::Held) -> Self {
        match h {
            orq::client::Held::MaxInflight => HeldJson::MaxInflight,
            orq::client::Held::RateLimit { until_ms } => HeldJson::RateLimit { until_ms },
        }
    }
}

/// One tenant of a queue: its settings, counts and service.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = TenantStats)]
pub struct TenantJson {
    /// Tenant name.
    pub tenant: String,
    /// Fair-share weight (1 unless set).
    pub weight: f64,
    /// Most live leases, when capped.
    #[schema(required = true)]
    pub max_inflight: Option<u64>,
    /// Most waiting (queued, scheduled, retrying) tasks, when capped.
    #[schema(required = true)]
    pub max_queued: Option<u64>,
    /// Rate limit, leases per second, when limited.
    #[schema(required = true)]
    pub rate_per_s: Option<f64>,
    /// Token bucket size of the rate limit.
    #[schema(required = true)]
    pub burst: Option<u64>,
    /// Current tasks per status.
    pub counts: CountsJson,
    /// Leases served since the tenant first submitted.
    pub served: u64,
    /// Its share of the queue's leases served, 0..=1; null for a tenant key (it would reveal
    /// the other tenants' service).
    #[schema(required = true)]
    pub share: Option<f64>,
    /// Completions per second over about the last minute.
    pub completed_per_s: f64,
    /// Why its ready work is held back right now, or null.
    #[schema(required = true)]
    pub held: Option<HeldJson>,
}

impl From<&orq::TenantStats> for TenantJson {
    fn from(t: &orq::TenantStats) -> Self {
        TenantJson {
            tenant: t.tenant.clone(),
            weight: t.weight,
            max_inflight: t.max_inflight,
            max_queued: t.max_queued,
            rate_per_s: t.rate_per_s,
            burst: t.burst,
            counts: CountsJson::of(&t.counts),
            served: t.served,
            share: Some(t.share),
            completed_per_s: t.completed_per_s,
            held: t.held.map(HeldJson::from),
        }
    }
}

/// The answer of `PUT /queues/{queue}/tenants/{tenant}`: the tenant's entry, or only its name
/// when the queue lists no entry for it (its settings all removed and no tasks).
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = TenantEntry)]
pub enum TenantEntryJson {
    /// The tenant's entry.
    Listed(TenantJson),
    /// The tenant is not listed.
    Unlisted(TenantNameJson),
}

/// A tenant the queue does not list: only its name.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = UnlistedTenant)]
pub struct TenantNameJson {
    /// Tenant name.
    pub tenant: String,
}

/// A queue's counts and settings (`GET /queues/{queue}`, one entry of `GET /queues`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = QueueStats)]
pub struct QueueStatsJson {
    /// Queue name.
    pub queue: String,
    /// True while leasing is paused.
    pub paused: bool,
    /// The starvation bound (ms; 0 = strict priority).
    pub aging_step_ms: u64,
    /// The queue's default task options, or null.
    #[schema(value_type = Option<QueueDefaults>, required = true)]
    pub defaults: Option<Value>,
    /// Current tasks per status (a tenant key: its own only).
    pub counts: CountsJson,
    /// Cumulative counters: enqueued, completed, failed (attempts), dead, reaped, replayed,
    /// purged (a tenant key: empty).
    pub totals: BTreeMap<String, i64>,
    /// The first tenants by name (`GET /queues/{queue}`: up to 100; `GET /queues`: none; a
    /// tenant key: its own only). Page through all of them with `GET /queues/{queue}/tenants`.
    pub tenants: Vec<TenantJson>,
    /// The tenants the queue knows (a tenant key: 1 when its own is known, else 0).
    pub tenants_total: u64,
}

/// `GET /queues`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = QueueList)]
pub struct QueuesJson {
    /// The queues, by name.
    pub queues: Vec<QueueStatsJson>,
}

/// `GET /queues/{queue}/tenants`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = TenantList)]
pub struct TenantsJson {
    /// Queue name.
    pub queue: String,
    /// A page of its tenants, by name (a tenant key: its own entry only).
    pub tenants: Vec<TenantJson>,
    /// The tenants the queue knows (a tenant key: 1 when its own is known, else 0).
    pub tenants_total: u64,
    /// Pass as `cursor` to get the next page; null when the listing is complete.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// `POST /dlq/replay`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = BulkReplay)]
pub struct ReplayedJson {
    /// Queue name.
    pub queue: String,
    /// Tasks put back.
    pub replayed: u64,
    /// True when more dead tasks match (call again).
    pub more: bool,
}

/// `DELETE /dlq/{id}`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Purged)]
pub struct PurgedJson {
    /// The task id.
    pub id: String,
    /// Always true.
    pub purged: bool,
}

/// `POST /queues/{queue}/pause` and `/resume`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Paused)]
pub struct PausedJson {
    /// Queue name.
    pub queue: String,
    /// True after a pause, false after a resume.
    pub paused: bool,
}

/// `DELETE /queues/{queue}`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = DeletedQueue)]
pub struct DeletedQueueJson {
    /// Queue name.
    pub queue: String,
    /// True when the queue is gone; false when it still held more finished tasks than one
    /// call deletes (it holds no work: ask again to delete the rest).
    pub deleted: bool,
    /// Finished (completed, cancelled) tasks this call deleted with the queue.
    pub finished_deleted: u64,
}

/// `POST /queues/{queue}/drain`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Drained)]
pub struct DrainedJson {
    /// Queue name.
    pub queue: String,
    /// True when nothing is left to run.
    pub drained: bool,
    /// Tasks queued, scheduled, retrying or leased when the wait ended.
    pub remaining: i64,
}
