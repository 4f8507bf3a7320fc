//! Decoding script replies into typed results: the one place that knows reply shapes.
//! Each function names the script whose `Returns:` header it follows.

use crate::attempt::{Attempt, AttemptOutcome};
use crate::client::QueueEvent;
use crate::error::{Error, Result};
use crate::resp::Resp;
use crate::task::{
    field_of_stored, Backoff, Lease, Status, Task, DEFAULT_LEASE_MS, DEFAULT_MAX_RETRIES,
};
use std::collections::{BTreeMap, HashMap};

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

/// A task of queue `queue` from its fields as lib/task.lua's `task_view` gives them: the compact
/// hash in its stored names ([`crate::task::STORED_NAMES`]), flat, then `id`. An absent setting
/// is its default ([`crate::task::DEFAULT_MAX_RETRIES`], [`crate::task::DEFAULT_LEASE_MS`],
/// [`Backoff::default`], priority, attempt and epoch 0); an absent `updated_at` or `run_at` is
/// `created_at`, and an absent `status` is queued. Fields of names orq does not store are
/// ignored.
pub fn task(op: &'static str, queue: &str, flat: &[Resp]) -> Result<Task> {
    let stored = field_map(op, flat)?;
    let mut f: HashMap<String, String> = HashMap::with_capacity(stored.len());
    for (name, value) in stored {
        if let Some(field) = field_of_stored(&name) {
            f.insert(field.to_string(), value);
        } else if name == "id" {
            f.insert(name, value);
        }
    }
    if !f.contains_key("status") && f.contains_key("created_at") {
        f.insert("status".into(), "queued".into());
    }
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
    let finished_at_ms = opt_num("finished_at").or_else(|| {
        // A completed task's `finished_at` is its `updated_at` (complete writes only that).
        (status == Status::Completed)
            .then(|| num_or("updated_at", created_at).ok())
            .flatten()
    });
    let attempt = num_or("attempt", 0)? as u32;
    let mut attempts: Vec<Attempt> = f
        .get("history")
        .map(|h| h.lines().map(Attempt::from_line).collect())
        .unwrap_or_default();
    if status == Status::Completed {
        // The successful attempt, which the completion records in the task's fields only.
        attempts.push(Attempt {
            attempt,
            at_ms: finished_at_ms.unwrap_or(created_at),
            worker: opt("worker").unwrap_or_else(|| "-".to_string()),
            outcome: AttemptOutcome::Completed,
            error: None,
        });
    }
    Ok(Task {
        id: text("id")?,
        queue: queue.to_string(),
        tenant: text("tenant")?,
        task_type: text("type")?,
        payload: text("payload")?,
        priority: num_or("priority", 0)?.min(9) as u8,
        status,
        attempt,
        max_retries: num_or("max_retries", u64::from(DEFAULT_MAX_RETRIES))? as u32,
        run_at_ms: num_or("run_at", created_at)?,
        created_at_ms: created_at,
        updated_at_ms: num_or("updated_at", created_at)?,
        finished_at_ms,
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
        attempts,
        trace: opt("trace").and_then(|t| crate::trace::TraceContext::from_stored(&t)),
    })
}

/// A stream ID `<ms>-<seq>` (two runs of ASCII digits, leading zeros allowed, each at most
/// `u64::MAX`, at most 41 bytes in all, as the `events` script accepts) as its two parts, for
/// ordering; `None` when it is not one.
pub fn stream_id(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-')?;
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if id.len() > 41 || !digits(ms) || !digits(seq) {
        return None;
    }
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// The events of one entry of a queue's event stream (`orq:{q}:events`), in order, as
/// lib/events.lua writes them (its "event stream" comment): `entry_id` is the entry's stream ID,
/// `flat` its fields. Two shapes, which may be mixed:
/// - plain fields: `ts`, then an event's `k`, `id`, `t`, `a` and kind-specific pairs;
/// - a batch: `ts`, then `e`, whose value is events joined by `" \n "`, each its kind, id,
///   tenant, attempt, then names and values, joined by single spaces.
///
/// Event IDs: an entry `<ms>-<n>` of m events holds the queue's events n - m + 1 ..= n, named
/// `<ms>-<n - m + 1>` ..= `<ms>-<n>`; a single event is named by the entry's ID. They are
/// unique, increasing stream IDs, so the last one read is the `after` of the next read. Never
/// fails: a field that is not text is read lossily, a malformed event keeps what it has (empty
/// or 0 for the rest).
pub fn stream_events(entry_id: &str, flat: &[Resp]) -> Vec<QueueEvent> {
    let text = |r: &Resp| {
        r.as_bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    let new_event = |kind: String, ts_ms: i64| QueueEvent {
        stream_id: String::new(),
        kind,
        ts_ms,
        task_id: String::new(),
        tenant: String::new(),
        attempt: 0,
        fields: BTreeMap::new(),
    };
    let mut ts_ms = 0i64;
    let mut out: Vec<QueueEvent> = Vec::new();
    // Whether the last event came from plain fields (the pairs that follow are its own).
    let mut plain = false;
    for pair in flat.chunks_exact(2) {
        let (name, value) = (text(&pair[0]), text(&pair[1]));
        match name.as_str() {
            "ts" => ts_ms = value.parse().unwrap_or(0),
            "k" => {
                out.push(new_event(value, ts_ms));
                plain = true;
            }
            "e" => {
                plain = false;
                for line in value.split(" \n ") {
                    let mut tokens = line.split(' ');
                    let mut e = new_event(tokens.next().unwrap_or_default().to_string(), ts_ms);
                    e.task_id = tokens.next().unwrap_or_default().to_string();
                    e.tenant = tokens.next().unwrap_or_default().to_string();
                    e.attempt = tokens.next().and_then(|a| a.parse().ok()).unwrap_or(0);
                    while let Some(name) = tokens.next() {
                        let value = tokens.next().unwrap_or_default();
                        e.fields.insert(name.to_string(), value.to_string());
                    }
                    out.push(e);
                }
            }
            _ => {
                let Some(e) = out.last_mut().filter(|_| plain) else {
                    continue;
                };
                match name.as_str() {
                    "id" => e.task_id = value,
                    "t" => e.tenant = value,
                    "a" => e.attempt = value.parse().unwrap_or(0),
                    _ => {
                        e.fields.insert(name, value);
                    }
                }
            }
        }
    }
    let m = out.len() as u64;
    match stream_id(entry_id) {
        Some((ms, n)) if m > 1 && n >= m - 1 => {
            for (j, e) in out.iter_mut().enumerate() {
                e.stream_id = format!("{ms}-{}", n - (m - 1) + j as u64);
            }
        }
        _ => {
            for e in &mut out {
                e.stream_id = entry_id.to_string();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Resp {
        Resp::Bulk(s.as_bytes().to_vec())
    }

    fn flat(pairs: &[(&str, &str)]) -> Vec<Resp> {
        pairs.iter().flat_map(|(k, v)| [b(k), b(v)]).collect()
    }

    // Goal: every shape of event stream entry reads as its events, each named by a unique,
    // increasing id, and a malformed entry reads as what it holds without panicking.
    #[test]
    fn stream_entries_read_as_their_events() {
        // A plain entry.
        let fields = flat(&[("ts", "7"), ("k", "cancelled"), ("id", "A"), ("t", "t1")]);
        let ev = stream_events("1733-4", &fields);
        assert_eq!(ev.len(), 1);
        assert_eq!(
            (ev[0].stream_id.as_str(), ev[0].kind.as_str(), ev[0].ts_ms),
            ("1733-4", "cancelled", 7)
        );
        assert_eq!((ev[0].task_id.as_str(), ev[0].tenant.as_str()), ("A", "t1"));
        assert_eq!(ev[0].attempt, 0);
        let fields = flat(&[
            ("ts", "9"),
            ("k", "retrying"),
            ("id", "A"),
            ("t", "t1"),
            ("a", "2"),
            ("m", "a b\nc"),
        ]);
        let ev = stream_events("5-0", &fields);
        assert_eq!(ev[0].attempt, 2);
        assert_eq!(ev[0].fields["m"], "a b\nc");

        // A batch of three events 8, 9, 10 in entry 5-10, one with an empty worker.
        let lines =
            "leased A t1 1 w w1 epoch 1 wait_ms 3 \n completed B t2 1 w  run_ms 5 \n queued C t1 0";
        let ev = stream_events("5-10", &flat(&[("ts", "11"), ("e", lines)]));
        let ids: Vec<_> = ev.iter().map(|e| e.stream_id.as_str()).collect();
        assert_eq!(ids, ["5-8", "5-9", "5-10"]);
        assert!(ev.iter().all(|e| e.ts_ms == 11));
        assert_eq!(ev[0].kind, "leased");
        assert_eq!(ev[0].fields["wait_ms"], "3");
        assert_eq!(ev[0].fields["epoch"], "1");
        assert_eq!((ev[1].task_id.as_str(), ev[1].tenant.as_str()), ("B", "t2"));
        assert_eq!(ev[1].fields["w"], "");
        assert_eq!(ev[1].fields["run_ms"], "5");
        assert_eq!((ev[2].kind.as_str(), ev[2].attempt), ("queued", 0));
        assert!(ev[2].fields.is_empty());
        let mut sorted = ids.clone();
        sorted.sort_by_key(|id| stream_id(id));
        assert_eq!(sorted, ids);

        // Malformed: a batch whose id is too small to number it, a dangling name, fields before
        // any event, a non-text field, an odd field list.
        let ev = stream_events("7-1", &flat(&[("ts", "x"), ("e", "a \n b \n c")]));
        assert_eq!(ev.len(), 3);
        assert!(ev.iter().all(|e| e.stream_id == "7-1" && e.ts_ms == 0));
        let ev = stream_events("3-0", &flat(&[("w", "x"), ("e", "leased A t1 x w")]));
        assert_eq!(ev.len(), 1);
        assert_eq!((ev[0].attempt, ev[0].fields["w"].as_str()), (0, ""));
        let ev = stream_events("3-0", &[b("k"), Resp::Int(4), b("id")]);
        assert_eq!((ev.len(), ev[0].kind.as_str()), (1, ""));
        assert_eq!(stream_events("bad", &[]), vec![]);
        assert_eq!(stream_id("12-3"), Some((12, 3)));
        assert_eq!(stream_id("12"), None);
        assert_eq!(stream_id("+1-2"), None);
        assert_eq!(stream_id("18446744073709551616-0"), None);
        assert_eq!(stream_id("000000000000000000001-0"), Some((1, 0)));
        assert_eq!(stream_id(&format!("1-{}", "0".repeat(40))), None);
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

    // Goal: a record in the stored names decodes whole: an absent status is queued, the
    // settings it does not store are the defaults, and a field orq does not store is ignored.
    #[test]
    fn a_record_in_the_stored_names_decodes_with_its_defaults() {
        let flat: Vec<Resp> = [
            "t", "acme", "y", "echo", "p", "{}", "c", "100", "pr", "7", "mr", "9", "zz", "?", "id",
            "A",
        ]
        .into_iter()
        .map(b)
        .collect();
        let t = task("get", "q", &flat).unwrap();
        assert_eq!(t.status, Status::Queued);
        assert_eq!((t.id.as_str(), t.queue.as_str()), ("A", "q"));
        assert_eq!((t.tenant.as_str(), t.task_type.as_str()), ("acme", "echo"));
        assert_eq!((t.priority, t.max_retries, t.attempt), (7, 9, 0));
        assert_eq!(
            (t.created_at_ms, t.updated_at_ms, t.run_at_ms),
            (100, 100, 100)
        );
        assert_eq!(t.lease_ms, DEFAULT_LEASE_MS);
        assert_eq!(t.backoff, Backoff::default());
        let mut leased = flat.clone();
        leased.splice(
            0..0,
            [b("s"), b("leased"), b("k"), b("1-ab"), b("x"), b("900")],
        );
        let t = task("get", "q", &leased).unwrap();
        let lease = t.lease.expect("a leased task carries its lease");
        assert_eq!((lease.token.as_str(), lease.expires_at_ms), ("1-ab", 900));
    }

    // Goal: a task hash with a missing or garbage field is a typed error, never a panic.
    #[test]
    fn corrupt_task_fields_are_protocol_errors() {
        let flat = vec![b("id"), b("x"), b("s"), b("bogus")];
        assert!(matches!(
            task("get", "q", &flat),
            Err(Error::Protocol { .. })
        ));
        // A record without its creation time is damaged, not queued.
        let flat = vec![
            b("t"),
            b("a"),
            b("y"),
            b("e"),
            b("p"),
            b("{}"),
            b("id"),
            b("x"),
        ];
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
