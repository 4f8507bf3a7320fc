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
        let settings = format!(",,,,,,,{lease_ms},,,");
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
