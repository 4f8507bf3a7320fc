//! Decoding script replies into typed results: the one place that knows reply shapes.
//! Each function names the script whose `Returns:` header it follows.

use crate::error::{Error, Result};
use crate::resp::Resp;
use crate::task::{Backoff, Lease, Status, Task, DEFAULT_LEASE_MS, DEFAULT_MAX_RETRIES};
use std::collections::HashMap;

/// Split a reply into its items, turning an error reply into the typed error.
pub fn items<'a>(op: &'static str, reply: &'a Resp, id: &str) -> Result<&'a [Resp]> {
    match reply {
        Resp::Array(items) if !items.is_empty() => Ok(items),
        Resp::Error(text) => Err(Error::from_script(op, text, id)),
        other => Err(Error::protocol(
            op,
            format!("expected an array, got {other:?}"),
        )),
    }
}

/// Item `i` as an integer.
pub fn int_at(op: &'static str, items: &[Resp], i: usize) -> Result<i64> {
    items
        .get(i)
        .and_then(Resp::as_int)
        .ok_or_else(|| Error::protocol(op, format!("item {i} is not an integer")))
}

/// Item `i` as text.
pub fn str_at<'a>(op: &'static str, items: &'a [Resp], i: usize) -> Result<&'a str> {
    items
        .get(i)
        .and_then(Resp::as_str)
        .ok_or_else(|| Error::protocol(op, format!("item {i} is not text")))
}

/// Item `i` as an array.
pub fn array_at<'a>(op: &'static str, items: &'a [Resp], i: usize) -> Result<&'a [Resp]> {
    items
        .get(i)
        .and_then(Resp::as_array)
        .ok_or_else(|| Error::protocol(op, format!("item {i} is not an array")))
}

/// A flat name/value array (HGETALL) as a map of UTF-8 strings.
pub fn field_map(op: &'static str, flat: &[Resp]) -> Result<HashMap<String, String>> {
    if flat.len() % 2 != 0 {
        return Err(Error::protocol(op, "odd-length field list"));
    }
    let mut map = HashMap::with_capacity(flat.len() / 2);
    for pair in flat.chunks_exact(2) {
        let name = pair[0]
            .as_str()
            .ok_or_else(|| Error::protocol(op, "field name is not text"))?;
        let value = pair[1]
            .as_bytes()
            .ok_or_else(|| Error::protocol(op, format!("field {name} is not a string")))?;
        map.insert(
            name.to_string(),
            String::from_utf8_lossy(value).into_owned(),
        );
    }
    Ok(map)
}

/// A task of queue `queue` from its fields as lib.lua's `task_view` gives them: the compact
/// hash, flat, then `id`. An absent setting is its default ([`crate::task::DEFAULT_MAX_RETRIES`],
/// [`crate::task::DEFAULT_LEASE_MS`], [`Backoff::default`], priority, attempt and epoch 0); an
/// absent `updated_at` or `run_at` is `created_at`.
pub fn task(op: &'static str, queue: &str, flat: &[Resp]) -> Result<Task> {
    let f = field_map(op, flat)?;
    let text = |name: &str| -> Result<String> {
        f.get(name)
            .cloned()
            .ok_or_else(|| Error::protocol(op, format!("task lacks field {name}")))
    };
    let opt = |name: &str| f.get(name).filter(|v| !v.is_empty()).cloned();
    let num = |name: &str| -> Result<u64> {
        let v = text(name)?;
        v.parse::<u64>()
            .map_err(|_| Error::protocol(op, format!("task field {name}={v:?} is not a number")))
    };
    let num_or = |name: &str, default: u64| -> Result<u64> {
        if f.contains_key(name) {
            num(name)
        } else {
            Ok(default)
        }
    };
    let opt_num = |name: &str| opt(name).and_then(|v| v.parse::<u64>().ok());
    let created_at = num("created_at")?;
    let flt = |name: &str, default: f64| {
        f.get(name)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(default)
    };
    let status_text = text("status")?;
    let status = Status::parse(&status_text)
        .ok_or_else(|| Error::protocol(op, format!("unknown status {status_text:?}")))?;
    let lease = if status == Status::Leased {
        Some(Lease {
            worker: opt("worker").unwrap_or_default(),
            expires_at_ms: opt_num("lease_exp").unwrap_or(0),
            epoch: opt_num("epoch").unwrap_or(0),
            token: opt("token").unwrap_or_default(),
        })
    } else {
        None
    };
    let defaults = Backoff::default();
    Ok(Task {
        id: text("id")?,
        queue: queue.to_string(),
        tenant: text("tenant")?,
        task_type: text("type")?,
        payload: text("payload")?,
        priority: num_or("priority", 0)?.min(9) as u8,
        status,
        attempt: num_or("attempt", 0)? as u32,
        max_retries: num_or("max_retries", u64::from(DEFAULT_MAX_RETRIES))? as u32,
        run_at_ms: num_or("run_at", created_at)?,
        created_at_ms: created_at,
        updated_at_ms: num_or("updated_at", created_at)?,
        finished_at_ms: opt_num("finished_at"),
        lease,
        last_error: opt("last_error"),
        result: opt("result"),
        backoff: Backoff {
            initial_ms: opt_num("b_init").unwrap_or(defaults.initial_ms),
            multiplier: flt("b_mult", defaults.multiplier),
            max_ms: opt_num("b_max").unwrap_or(defaults.max_ms),
            jitter: flt("b_jitter", defaults.jitter),
        },
        lease_ms: opt_num("lease_ms").unwrap_or(DEFAULT_LEASE_MS),
        timeout_ms: opt_num("timeout_ms"),
        idempotency_key: opt("idem"),
        replays: opt_num("replays").unwrap_or(0) as u32,
        history: f
            .get("history")
            .map(|h| h.lines().map(str::to_string).collect())
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Resp {
        Resp::Bulk(s.as_bytes().to_vec())
    }

    // Goal: script error codes become typed errors that name the operation.
    #[test]
    fn error_replies_map_to_typed_errors() {
        let r = Resp::Error("STALE lease token superseded".into());
        assert!(matches!(
            items("complete", &r, "x"),
            Err(Error::Stale { op: "complete", .. })
        ));
        let r = Resp::Error("NOTFOUND task x".into());
        assert_eq!(
            items("get", &r, "x").unwrap_err(),
            Error::NotFound {
                op: "get",
                id: "x".into()
            }
        );
        let r = Resp::Error("CONFLICT task is completed".into());
        assert_eq!(
            items("cancel", &r, "x").unwrap_err(),
            Error::Conflict {
                op: "cancel",
                status: "completed".into()
            }
        );
        let r = Resp::Error("ERR user_script:1: boom".into());
        assert!(matches!(
            items("lease", &r, ""),
            Err(Error::Protocol { .. })
        ));
    }

    // Goal: a task hash with a missing or garbage field is a typed error, never a panic.
    #[test]
    fn corrupt_task_fields_are_protocol_errors() {
        let flat = vec![b("id"), b("x"), b("status"), b("bogus")];
        assert!(matches!(
            task("get", "q", &flat),
            Err(Error::Protocol { .. })
        ));
        let flat = vec![b("id")];
        assert!(matches!(
            task("get", "q", &flat),
            Err(Error::Protocol { .. })
        ));
    }
}
