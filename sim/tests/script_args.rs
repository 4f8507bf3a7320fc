//! Every transition script answers a missing argument with a typed INVALID error (never a Lua
//! runtime error), before it writes anything.

use orq::keys::queue_keys;
use orq::Resp;
use orq_sim::{ManualClock, MemoryStore};
use std::sync::Arc;

// Goal: scripts validate before they write. Method: call each script with no ARGV at all, and
// with empty ids, on a fresh model; each answers INVALID (or its documented error) and the
// store stays empty.
#[test]
fn scripts_answer_missing_arguments_with_invalid() {
    let store = MemoryStore::new(Arc::new(ManualClock::from_ms(1_800_000_000_000)));
    let keys = queue_keys("q");
    for name in orq_lua::NAMES {
        if *name == "queues" {
            continue;
        }
        let script = orq_lua::script(name);
        for args in [vec![], vec![Vec::new(), Vec::new()]] {
            let reply = store.call_sync(script, &keys, &args);
            if *name == "purge" && !args.is_empty() {
                // purge reports per id: an empty id names no task.
                let results = reply
                    .as_array()
                    .and_then(|a| a.get(1))
                    .and_then(|r| r.as_array());
                let all_notfound =
                    results.is_some_and(|r| r.iter().all(|x| x.as_str() == Some("notfound")));
                assert!(all_notfound, "purge of empty ids: {reply:?}");
                continue;
            }
            match &reply {
                Resp::Error(e) => assert!(e.starts_with("INVALID"), "{name}: {e}"),
                other => panic!("{name} with {args:?} answered {other:?}"),
            }
        }
    }
    assert!(store.dump().is_empty(), "a refused call wrote something");
}

// Goal: `enqueue` accepts a lease length exactly in the API's documented range
// (`orq_lua::facts::LEASE_MS_MIN..=LEASE_MS_MAX`, the one source the script reads as `FACTS`),
// so a caller that skips the client's check meets the same limits.
// Method: a task whose settings give lease_ms one below the minimum, the minimum, the maximum and
// one above; the two outside answer INVALID naming lease_ms and write nothing.
#[test]
fn enqueue_accepts_exactly_the_documented_lease_range() {
    use orq_lua::facts::{LEASE_MS_MAX, LEASE_MS_MIN};
    let keys = queue_keys("q");
    let script = orq_lua::script("enqueue");
    for (lease_ms, ok) in [
        (LEASE_MS_MIN - 1, false),
        (LEASE_MS_MIN, true),
        (LEASE_MS_MAX, true),
        (LEASE_MS_MAX + 1, false),
    ] {
        let store = MemoryStore::new(Arc::new(ManualClock::from_ms(1_800_000_000_000)));
        let settings = format!(",,,,,,,{lease_ms},,,,");
        let args: Vec<Vec<u8>> = ["1", "01J0000000000000000000000A", "t1", "echo", "{}", "0"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .chain([settings.into_bytes()])
            .collect();
        let reply = store.call_sync(script, &keys, &args);
        match (&reply, ok) {
            (Resp::Error(e), false) => {
                assert!(e.starts_with("INVALID") && e.contains("lease_ms"), "{e}");
                assert!(store.dump().is_empty(), "a refused enqueue wrote something");
            }
            (Resp::Array(_), true) => {}
            _ => panic!("lease_ms {lease_ms}: {reply:?}"),
        }
    }
}

// Goal: `enqueue` stores a trace context only when it is printable ASCII within
// `orq_lua::facts::TRACE_CONTEXT_MAX_BYTES` (so the lease reply may join it with NUL bytes), and
// refuses any other before it writes. Method: the trace setting at the limit, one byte over, with
// a newline, a NUL and a byte above 126; only the first is stored (as the task's `tc`).
#[test]
fn enqueue_refuses_a_trace_context_that_is_not_printable_or_too_long() {
    use orq_lua::facts::TRACE_CONTEXT_MAX_BYTES;
    let keys = queue_keys("q");
    let script = orq_lua::script("enqueue");
    let max = TRACE_CONTEXT_MAX_BYTES as usize;
    let at_limit = format!(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01,{}",
        "a".repeat(max - 56)
    );
    let cases: Vec<(Vec<u8>, bool)> = vec![
        (at_limit.clone().into_bytes(), true),
        (format!("{at_limit}b").into_bytes(), false),
        (
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01,a=b\n".to_vec(),
            false,
        ),
        (
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01,a=\0".to_vec(),
            false,
        ),
        (
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01,a=\xc3\xa9".to_vec(),
            false,
        ),
    ];
    for (trace, ok) in cases {
        let store = MemoryStore::new(Arc::new(ManualClock::from_ms(1_800_000_000_000)));
        let mut settings = b",,,,,,,,,,,".to_vec();
        settings.extend_from_slice(&trace);
        let args: Vec<Vec<u8>> = vec![
            b"1".to_vec(),
            b"A".to_vec(),
            b"t1".to_vec(),
            b"echo".to_vec(),
            b"{}".to_vec(),
            Vec::new(),
            settings,
        ];
        let reply = store.call_sync(script, &keys, &args);
        let shown = String::from_utf8_lossy(&trace).to_string();
        if ok {
            assert!(!matches!(reply, Resp::Error(_)), "{shown:?}: {reply:?}");
            let dump = store.dump();
            let task = dump.get(&b"orq:{q}:task:A"[..]).expect("the task stored");
            let orq_sim::DumpData::Hash(fields) = &task.data else {
                panic!("{task:?}");
            };
            assert!(
                fields.contains(&(b"tc".to_vec(), at_limit.clone().into_bytes())),
                "{fields:?}"
            );
        } else {
            match &reply {
                Resp::Error(e) => assert!(
                    e.starts_with("INVALID item 1: trace must be printable ASCII"),
                    "{shown:?}: {e}"
                ),
                other => panic!("{shown:?} answered {other:?}"),
            }
            assert!(
                store.dump().is_empty(),
                "{shown:?}: a refused call wrote something"
            );
        }
    }
}
