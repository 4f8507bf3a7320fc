//! Redis key names and the validation of every user-supplied part of them.
//!
//! Every key of a queue carries the hash tag `{<queue>}` so one script touches one Redis Cluster
//! slot. The order of [`queue_keys`] is the queue key set documented in `lua/scripts/lib.lua`; a
//! test checks the two agree.

/// The one key outside every queue's slot: SET of queue names.
pub const QUEUES_KEY: &str = "orq:queues";

/// The Redis pub/sub channel `queues.lua` publishes a new queue's name on (design note 27).
pub const QUEUES_WAKE_CHANNEL: &str = "orq:queues:wake";

/// The Redis pub/sub channel of `queue`'s wake-ups, `orq:{<queue>}:wake` (lib.lua's `wake`:
/// the task key prefix without its `task:`). Not a key: nothing is stored under it.
pub fn wake_channel(queue: &str) -> String {
    format!("orq:{{{queue}}}:wake")
}

/// Longest queue, tenant or type name (bytes).
pub const NAME_MAX: usize = 64;

/// Longest idempotency key (bytes).
pub const IDEMPOTENCY_KEY_MAX: usize = 128;

/// True when `s` is a valid queue, tenant or task type name: `[A-Za-z0-9._-]{1,64}`.
/// Such a name can never contain a hash tag brace, a key separator or whitespace.
pub fn is_valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= NAME_MAX
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// True when `s` is a valid idempotency key: 1..=128 bytes of `[A-Za-z0-9._:-]`.
pub fn is_valid_idempotency_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= IDEMPOTENCY_KEY_MAX
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':'))
}

/// True when `s` is a task id: a ULID in its canonical 26-character Crockford base32 form.
pub fn is_valid_task_id(s: &str) -> bool {
    s.len() == 26 && ulid::Ulid::from_string(s).is_ok()
}

/// The queue key set for `queue` (a valid name), in the order of `lib.lua`:
///
/// | KEYS[i] | key | Redis type |
/// |---|---|---|
/// | 1 | `orq:{q}:task:` | prefix of HASH `orq:{q}:task:<id>` |
/// | 2 | `orq:{q}:ready:` | prefix of LIST `orq:{q}:ready:<priority>:<tenant>` (ids, oldest first) |
/// | 3 | `orq:{q}:tenants` | ZSET, score = virtual time |
/// | 4 | `orq:{q}:scheduled` | ZSET, score = run_at ms |
/// | 5 | `orq:{q}:leases` | ZSET, score = lease deadline ms |
/// | 6 | `orq:{q}:dead` | ZSET, score = time of death ms |
/// | 7 | `orq:{q}:completed` | ZSET, score = finish time ms |
/// | 8 | `orq:{q}:cancelled` | ZSET, score = cancel time ms |
/// | 9 | `orq:{q}:idem:` | prefix of STRING `orq:{q}:idem:<tenant>:<key>` (with TTL) |
/// | 10 | `orq:{q}:tenant:` | prefix of HASH `orq:{q}:tenant:<tenant>` |
/// | 11 | `orq:{q}:stats` | HASH |
/// | 12 | `orq:{q}:events` | STREAM |
/// | 13 | `orq:{q}:known_tenants` | ZSET, score = 0 |
/// | 14 | `orq:{q}:config` | HASH: paused, aging_step_ms |
/// | 15 | `orq:{q}:parked` | ZSET tenants held back by a limit, score = ms when eligible again |
/// | 16 | `orq:{q}:workers` | ZSET workers seen, score = last lease or heartbeat call ms |
///
/// # Panics
/// When `queue` is not a valid name: callers validate user input first.
pub fn queue_keys(queue: &str) -> Vec<String> {
    assert!(
        is_valid_name(queue),
        "queue name {queue:?} was not validated"
    );
    QUEUE_KEY_SUFFIXES
        .iter()
        .map(|suffix| format!("orq:{{{queue}}}:{suffix}"))
        .collect()
}

const QUEUE_KEY_SUFFIXES: [&str; 16] = [
    "task:",
    "ready:",
    "tenants",
    "scheduled",
    "leases",
    "dead",
    "completed",
    "cancelled",
    "idem:",
    "tenant:",
    "stats",
    "events",
    "known_tenants",
    "config",
    "parked",
    "workers",
];

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: the Rust key builder and the layout documented in lib.lua are the same list.
    #[test]
    fn queue_keys_match_the_layout_in_lib_lua() {
        let keys = queue_keys("q");
        let layout = orq_lua::queue_key_layout();
        assert_eq!(layout.len(), keys.len());
        for (i, pattern) in layout {
            assert_eq!(keys[i - 1], pattern, "KEYS[{i}]");
        }
    }

    #[test]
    fn names_reject_key_syntax_and_accept_the_documented_alphabet() {
        for ok in ["default", "a.b_c-1", &"x".repeat(64)] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in ["", "a b", "{q}", "a:b", "a*", "é", "a\n", &"x".repeat(65)] {
            assert!(!is_valid_name(bad), "{bad:?}");
        }
        assert!(is_valid_idempotency_key("order:42"));
        assert!(!is_valid_idempotency_key("{order}"));
        assert!(is_valid_task_id("01ARZ3NDEKTSV4RRFFQ69G5FAV"));
        assert!(!is_valid_task_id("not-a-ulid"));
    }
}
