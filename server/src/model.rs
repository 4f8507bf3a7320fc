//! The API's JSON shapes: request bodies (strict: unknown fields are rejected, errors name the
//! field) here, the task representation (times as RFC 3339 UTC with milliseconds) and the other
//! answers in `answers.rs` (re-exported). Each derives its OpenAPI schema ([`crate::openapi`]); the constraints written in
//! `#[schema(...)]` are the ones the conversions below enforce (the `openapi` tests compare the
//! two for the shared limits).

use crate::error::ApiError;
use crate::names::Name;
use orq::task::{
    Backoff, Task, TaskSpec, DEFAULT_LEASE_MS, DEFAULT_MAX_RETRIES, DELAY_MS_MAX, LEASE_MS_MAX,
    LEASE_MS_MIN, MAX_RETRIES_MAX, PAYLOAD_MAX_BYTES, PRIORITY_MAX, TIMEOUT_MS_MAX,
};
use orq::Status;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::BTreeMap;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use utoipa::ToSchema;

mod answers;
mod leases;
pub use answers::*;
pub use leases::*;

/// Parse a JSON body strictly. A syntax error, a wrong type, a missing or unknown field is a 400
/// whose message names the field path (`backoff.jitter: invalid type ...`).
pub fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(ApiError::bad_request(
            "request body: expected a JSON object",
        ));
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." || path == "?" {
            ApiError::bad_request(format!("request body: {inner}"))
        } else {
            ApiError::bad_request(format!("{path}: {inner}"))
        }
    })?;
    de.end()
        .map_err(|e| ApiError::bad_request(format!("request body: {e}")))?;
    Ok(value)
}

/// `Option<Option<T>>` from JSON: a missing field is `None` (keep), `null` is `Some(None)`
/// (clear), a value is `Some(Some(v))` (set).
fn double_option<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A JSON integer as JSON Schema's `integer` defines it: any number without a fractional part,
/// so `5`, `5.0` and `5e0` are all 5 (clients whose language has no integer type write the
/// latter). Read through `i128`, then narrowed to the field's type by [`opt_int`].
struct JsonInt(i128);

impl<'de> Deserialize<'de> for JsonInt {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = JsonInt;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an integer")
            }
            fn visit_i64<E>(self, v: i64) -> Result<JsonInt, E> {
                Ok(JsonInt(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<JsonInt, E> {
                Ok(JsonInt(v.into()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<JsonInt, E> {
                // 1e38 < i128::MAX: the cast below is exact for every integral float under it.
                if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e38 {
                    Ok(JsonInt(v as i128))
                } else {
                    Err(E::invalid_type(serde::de::Unexpected::Float(v), &self))
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// An integer field, any size a JSON number holds exactly as an integer (`5`, `5.0`, `5e0`): the
/// handler checks its range, so a value out of it is a 422 naming the field, not a type error.
pub(crate) fn int_i128<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i128, D::Error> {
    JsonInt::deserialize(d).map(|JsonInt(v)| v)
}

/// An optional [`int_i128`].
pub(crate) fn opt_int_i128<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<i128>, D::Error> {
    Option::<JsonInt>::deserialize(d).map(|o| o.map(|JsonInt(v)| v))
}

/// An optional integer field (`null` is `None`), in the range of `T`; see [`JsonInt`].
fn opt_int<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<i128>,
{
    match Option::<JsonInt>::deserialize(d)? {
        None => Ok(None),
        Some(JsonInt(v)) => T::try_from(v)
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format_args!("integer {v} is out of range"))),
    }
}

/// [`double_option`] of an integer field: see [`opt_int`].
fn double_option_int<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<i128>,
{
    opt_int(d).map(Some)
}

/// The body of `PUT /api/v1/queues/{queue}/tenants/{tenant}`: each field optional; `null`
/// removes the setting (weight back to 1, no cap, no rate limit).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantBody {
    /// Fair-share weight in (0, 1000].
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<f64>, exclusive_minimum = 0, maximum = 1000)]
    pub weight: Option<Option<f64>>,
    /// Most live leases, 1..=1000000.
    #[serde(default, deserialize_with = "double_option_int")]
    #[schema(value_type = Option<u64>, minimum = 1, maximum = 1_000_000)]
    pub max_inflight: Option<Option<u64>>,
    /// Most waiting tasks, 0..=1000000000.
    #[serde(default, deserialize_with = "double_option_int")]
    #[schema(value_type = Option<u64>, minimum = 0, maximum = 1_000_000_000)]
    pub max_queued: Option<Option<u64>>,
    /// Leases per second, in (0, 1000000].
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<f64>, exclusive_minimum = 0, maximum = 1_000_000)]
    pub rate_per_s: Option<Option<f64>>,
    /// Token bucket size, 1..=1000000.
    #[serde(default, deserialize_with = "double_option_int")]
    #[schema(value_type = Option<u64>, minimum = 1, maximum = 1_000_000)]
    pub burst: Option<Option<u64>>,
}

impl TenantBody {
    /// Range-check every given field; the error names it.
    pub fn into_limits(self) -> Result<orq::TenantLimits, ApiError> {
        let pos = |name: &str, v: Option<Option<f64>>, max: f64| -> Result<_, ApiError> {
            if let Some(Some(x)) = v {
                if !(x.is_finite() && x > 0.0 && x <= max) {
                    return Err(ApiError::bad_request(format!(
                        "{name}: must be in (0, {max}]"
                    )));
                }
            }
            Ok(v)
        };
        let int = |name: &str, v: Option<Option<u64>>, lo: u64, hi: u64| -> Result<_, ApiError> {
            if let Some(Some(x)) = v {
                if x < lo || x > hi {
                    return Err(ApiError::bad_request(format!(
                        "{name}: must be {lo}..={hi}"
                    )));
                }
            }
            Ok(v)
        };
        Ok(orq::TenantLimits {
            weight: pos("weight", self.weight, 1000.0)?,
            max_inflight: int("max_inflight", self.max_inflight, 1, 1_000_000)?,
            max_queued: int("max_queued", self.max_queued, 0, 1_000_000_000)?,
            rate_per_s: pos("rate_per_s", self.rate_per_s, 1_000_000.0)?,
            burst: int("burst", self.burst, 1, 1_000_000)?,
        })
    }
}

/// A queue's default task options: applied to the fields a submit leaves out, before the
/// built-in defaults. Stored as JSON in the queue's config hash.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueDefaults {
    /// 0..9.
    #[serde(
        default,
        deserialize_with = "opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 0, maximum = 9)]
    pub priority: Option<i64>,
    /// 0..100.
    #[serde(
        default,
        deserialize_with = "opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 0, maximum = 100)]
    pub max_retries: Option<i64>,
    /// Retry backoff (each field optional).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<BackoffDefaults>,
    /// 1000..3600000.
    #[serde(
        default,
        deserialize_with = "opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 1000, maximum = 3_600_000)]
    pub lease_ms: Option<i64>,
    /// 1..86400000.
    #[serde(
        default,
        deserialize_with = "opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 1, maximum = 86_400_000)]
    pub timeout_ms: Option<i64>,
}

/// The backoff part of [`QueueDefaults`].
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackoffDefaults {
    /// First wait (ms), at most a day.
    #[serde(
        default,
        deserialize_with = "opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 0, maximum = 86_400_000)]
    pub initial_ms: Option<u64>,
    /// Growth factor, 1..=100.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100)]
    pub multiplier: Option<f64>,
    /// Cap (ms), at most a week.
    #[serde(
        default,
        deserialize_with = "opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 0, maximum = 604_800_000)]
    pub max_ms: Option<u64>,
    /// Jitter fraction 0..=1.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 1)]
    pub jitter: Option<f64>,
}

impl QueueDefaults {
    /// Check the ranges by applying the defaults to an empty submit; errors name the field
    /// under `defaults.`.
    pub fn validate(&self) -> Result<(), ApiError> {
        let probe = SubmitBody {
            queue: None,
            tenant: None,
            task_type: None,
            payload: RawValue::from_string("null".into()).expect("null is JSON"),
            priority: None,
            delay_ms: None,
            run_at: None,
            max_retries: None,
            backoff: None,
            lease_ms: None,
            timeout_ms: None,
            idempotency_key: None,
        };
        probe.into_spec(0, Some(self)).map(|_| ()).map_err(|mut e| {
            e.message = format!("defaults.{}", e.message);
            e
        })
    }
}

/// The body of `PUT /api/v1/queues/{queue}/settings`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueSettingsBody {
    /// The starvation bound: order each tenant's ready tasks by enqueue time minus
    /// priority × this step (ms), so a priority-0 task waits at most 9 steps behind later urgent
    /// work. 0 restores strict priority. Applies to tasks queued after the change.
    #[schema(minimum = 0, maximum = 3_600_000)]
    #[serde(default, deserialize_with = "opt_int")]
    pub aging_step_ms: Option<u64>,
    /// Default task options; `null` removes them.
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<QueueDefaults>)]
    pub defaults: Option<Option<QueueDefaults>>,
}

/// `backoff` of a submit body; every field optional (defaults: 1000 ms, ×2, 300000 ms, 0.2).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackoffBody {
    /// First wait (ms), at most a day.
    #[schema(minimum = 0, maximum = 86_400_000)]
    #[serde(default, deserialize_with = "opt_int")]
    pub initial_ms: Option<u64>,
    /// Growth factor, 1..=100.
    #[schema(minimum = 1, maximum = 100)]
    pub multiplier: Option<f64>,
    /// Cap (ms), at most a week.
    #[schema(minimum = 0, maximum = 604_800_000)]
    #[serde(default, deserialize_with = "opt_int")]
    pub max_ms: Option<u64>,
    /// Jitter fraction 0..=1.
    #[schema(minimum = 0, maximum = 1)]
    pub jitter: Option<f64>,
}

/// The body of `POST /api/v1/tasks` (and each item of a batch). Only `payload` is required.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitBody {
    /// Queue (default `default`).
    #[schema(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub queue: Option<String>,
    /// Tenant (default `default`).
    #[schema(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub tenant: Option<String>,
    /// Handler type (default `echo`).
    #[serde(rename = "type")]
    #[schema(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub task_type: Option<String>,
    /// Any JSON, stored byte for byte (at most 1 MiB).
    #[schema(value_type = Value)]
    pub payload: Box<RawValue>,
    /// 0..9 (default 0).
    #[schema(minimum = 0, maximum = 9)]
    #[serde(default, deserialize_with = "opt_int")]
    pub priority: Option<i64>,
    /// Delay before the first run, ms (default 0; at most one year).
    #[schema(minimum = 0, maximum = 31_622_400_000_i64)]
    #[serde(default, deserialize_with = "opt_int")]
    pub delay_ms: Option<i64>,
    /// First run time, RFC 3339, at most a year ahead (exclusive with `delay_ms`).
    #[schema(format = DateTime)]
    pub run_at: Option<String>,
    /// Retries after the first attempt, 0..100 (default 3).
    #[schema(minimum = 0, maximum = 100)]
    #[serde(default, deserialize_with = "opt_int")]
    pub max_retries: Option<i64>,
    /// Retry backoff.
    pub backoff: Option<BackoffBody>,
    /// Lease length ms, 1000..3600000 (default 30000).
    #[schema(minimum = 1000, maximum = 3_600_000)]
    #[serde(default, deserialize_with = "opt_int")]
    pub lease_ms: Option<i64>,
    /// Handler timeout ms, 1..86400000 (default none).
    #[schema(minimum = 1, maximum = 86_400_000)]
    #[serde(default, deserialize_with = "opt_int")]
    pub timeout_ms: Option<i64>,
    /// Idempotency key, `[A-Za-z0-9._:-]{1,128}`.
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub idempotency_key: Option<String>,
}

/// The body of `POST /api/v1/tasks/batch`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchBody {
    /// 1..=1000 submit bodies.
    #[schema(min_items = 1, max_items = 1000)]
    pub tasks: Vec<SubmitBody>,
}

/// The body of `POST /api/v1/dlq/replay` (every field optional: no body is `{}`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkReplayBody {
    /// Queue (default `default`).
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub queue: Option<Name>,
    /// Only this tenant's tasks.
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub tenant: Option<Name>,
    /// Only tasks of this type.
    #[serde(rename = "type")]
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub task_type: Option<Name>,
    /// Most tasks to replay (default 1000, at most 10000).
    #[schema(minimum = 1, maximum = 10_000)]
    #[serde(default, deserialize_with = "opt_int")]
    pub limit: Option<u64>,
}

fn int_field(name: &str, v: Option<i64>, lo: i64, hi: i64, default: i64) -> Result<i64, ApiError> {
    let v = v.unwrap_or(default);
    if v < lo || v > hi {
        return Err(ApiError::bad_request(format!(
            "{name}: must be between {lo} and {hi}"
        )));
    }
    Ok(v)
}

/// A task's W3C trace context as the answers show it (`Task`, `LeasedTask`, flattened into
/// them): each field null when absent.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = TraceContext)]
pub struct TraceJson {
    /// The W3C `traceparent` the task was submitted under (the API's `orq.submit` span when it
    /// exports traces, else the submit's own header), or null. Every attempt's `orq.task` span
    /// continues it; a handler of the worker protocol that traces continues it too.
    #[schema(
        required = true,
        example = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    )]
    pub traceparent: Option<String>,
    /// The `tracestate` that came with it, or null.
    #[schema(required = true)]
    pub tracestate: Option<String>,
}

impl From<Option<&orq::trace::TraceContext>> for TraceJson {
    fn from(trace: Option<&orq::trace::TraceContext>) -> Self {
        TraceJson {
            traceparent: trace.map(|c| c.traceparent().to_string()),
            tracestate: trace.and_then(|c| c.tracestate().map(str::to_string)),
        }
    }
}

/// A 400 naming `field` unless `json` is JSON that every reader can parse: numbers in range,
/// valid Unicode, nesting within serde_json's limit of 128. Payloads and results are stored byte
/// for byte; this is what keeps them readable (a body's raw value is not held to it).
pub fn readable_json(field: &str, json: &str) -> Result<(), ApiError> {
    serde_json::from_str::<serde_json::Value>(json)
        .map(|_| ())
        .map_err(|e| ApiError::bad_request(format!("{field}: {e}")))
}

/// A listing's `limit` query parameter: `default` when absent, else an integer in 1..=`max`
/// (400 otherwise).
pub fn parse_limit(limit: Option<&str>, default: u64, max: u64) -> Result<u64, ApiError> {
    let Some(l) = limit else {
        return Ok(default);
    };
    l.parse::<u64>()
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| ApiError::bad_request(format!("limit: must be an integer from 1 to {max}")))
}

/// Milliseconds since the Unix epoch of an RFC 3339 time.
pub fn parse_time_ms(field: &str, s: &str) -> Result<u64, ApiError> {
    let t = OffsetDateTime::parse(s, &Rfc3339)
        .map_err(|e| ApiError::bad_request(format!("{field}: not an RFC 3339 time: {e}")))?;
    let ms = t.unix_timestamp_nanos() / 1_000_000;
    u64::try_from(ms).map_err(|_| ApiError::bad_request(format!("{field}: before 1970")))
}

/// RFC 3339 UTC with milliseconds: `2026-11-29T08:00:00.123Z`.
pub fn format_time_ms(ms: u64) -> String {
    let t = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let fmt = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    t.format(&fmt).unwrap_or_default()
}

impl SubmitBody {
    /// Check and convert to a spec, taking fields the body leaves out from the queue's
    /// `defaults` first, then from the built-in defaults. `now_ms` bounds `run_at` (at most a
    /// year ahead). Errors: 400 naming the field; 413 when the payload exceeds 1 MiB.
    pub fn into_spec(
        mut self,
        now_ms: u64,
        defaults: Option<&QueueDefaults>,
    ) -> Result<TaskSpec, ApiError> {
        if let Some(d) = defaults {
            self.priority = self.priority.or(d.priority);
            self.max_retries = self.max_retries.or(d.max_retries);
            self.lease_ms = self.lease_ms.or(d.lease_ms);
            self.timeout_ms = self.timeout_ms.or(d.timeout_ms);
            if let Some(db) = &d.backoff {
                let b = self.backoff.get_or_insert(BackoffBody {
                    initial_ms: None,
                    multiplier: None,
                    max_ms: None,
                    jitter: None,
                });
                b.initial_ms = b.initial_ms.or(db.initial_ms);
                b.multiplier = b.multiplier.or(db.multiplier);
                b.max_ms = b.max_ms.or(db.max_ms);
                b.jitter = b.jitter.or(db.jitter);
            }
        }
        let payload = self.payload.get();
        if payload.len() > PAYLOAD_MAX_BYTES {
            return Err(ApiError::too_large(format!(
                "payload: {} bytes is more than the limit of {PAYLOAD_MAX_BYTES}",
                payload.len()
            )));
        }
        readable_json("payload", payload)?;
        let mut spec = TaskSpec::new(payload.to_string());
        if let Some(q) = self.queue {
            spec.queue = q;
        }
        if let Some(t) = self.tenant {
            spec.tenant = t;
        }
        if let Some(t) = self.task_type {
            spec.task_type = t;
        }
        let (priority_max, retries_max) = (i64::from(PRIORITY_MAX), i64::from(MAX_RETRIES_MAX));
        spec.priority = int_field("priority", self.priority, 0, priority_max, 0)? as u8;
        let retries_default = i64::from(DEFAULT_MAX_RETRIES);
        spec.max_retries = int_field(
            "max_retries",
            self.max_retries,
            0,
            retries_max,
            retries_default,
        )? as u32;
        let (lease_min, lease_max) = (LEASE_MS_MIN as i64, LEASE_MS_MAX as i64);
        let lease_default = DEFAULT_LEASE_MS as i64;
        spec.lease_ms = int_field(
            "lease_ms",
            self.lease_ms,
            lease_min,
            lease_max,
            lease_default,
        )? as u64;
        if let Some(t) = self.timeout_ms {
            let max = TIMEOUT_MS_MAX as i64;
            spec.timeout_ms = Some(int_field("timeout_ms", Some(t), 1, max, 0)? as u64);
        }
        let max_delay = DELAY_MS_MAX as i64;
        match (self.delay_ms, self.run_at) {
            (Some(_), Some(_)) => {
                return Err(ApiError::bad_request(
                    "delay_ms, run_at: give one or the other",
                ))
            }
            (Some(d), None) => {
                spec.delay_ms = int_field("delay_ms", Some(d), 0, max_delay, 0)? as u64
            }
            (None, Some(s)) => {
                let at = parse_time_ms("run_at", &s)?;
                if at > now_ms + DELAY_MS_MAX {
                    return Err(ApiError::bad_request("run_at: more than a year ahead"));
                }
                spec.run_at_ms = Some(at);
            }
            (None, None) => {}
        }
        if let Some(b) = self.backoff {
            let d = Backoff::default();
            spec.backoff = Backoff {
                initial_ms: b.initial_ms.unwrap_or(d.initial_ms),
                multiplier: b.multiplier.unwrap_or(d.multiplier),
                max_ms: b.max_ms.unwrap_or(d.max_ms),
                jitter: b.jitter.unwrap_or(d.jitter),
            };
        }
        spec.idempotency_key = self.idempotency_key;
        spec.validate().map_err(ApiError::bad_request)?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc_with_milliseconds_and_round_trip() {
        assert_eq!(
            format_time_ms(1_700_000_000_123),
            "2023-11-14T22:13:20.123Z"
        );
        assert_eq!(
            parse_time_ms("t", "2023-11-14T22:13:20.123Z").unwrap(),
            1_700_000_000_123
        );
        assert!(parse_time_ms("t", "yesterday").is_err());
    }

    #[test]
    fn body_errors_name_the_field() {
        let e = parse_body::<SubmitBody>(br#"{"payload":1,"backoff":{"jitter":"x"}}"#).unwrap_err();
        assert!(e.message.starts_with("backoff.jitter"), "{}", e.message);
        let e = parse_body::<SubmitBody>(br#"{"payload":1,"colour":"red"}"#).unwrap_err();
        assert!(e.message.contains("colour"), "{}", e.message);
        let e = parse_body::<SubmitBody>(br#"{"queue":"q"}"#).unwrap_err();
        assert!(e.message.contains("payload"), "{}", e.message);
    }
}
