//! Redis key names and the validation of every user-supplied part of them.
//!
//! Every key of a queue carries the hash tag `{<queue>}` so one script touches one Redis Cluster
//! slot. The order of [`queue_keys`] is the queue key set documented in
//! `lua/scripts/lib/keys.lua`; a test checks the two agree.

/// The registry, one of the two keys outside every queue's slot: SET of queue names.
pub const QUEUES_KEY: &str = "orq:queues";

/// The other key outside every queue's slot: STRING, the data-format version of the orq data
/// this Redis holds (`orq_lua::facts::DATA_FORMAT` when written; [`crate::format`]). Its hash
/// tag `{orq:queues}` puts it in the registry's slot (a key without a tag hashes whole), so one
/// script call declares both on Redis Cluster, and a node that loses the registry loses the
/// format with it.
pub const FORMAT_KEY: &str = "orq:format:{orq:queues}";

/// HASH in the registry's slot (hash tag `{orq:queues}`, as [`FORMAT_KEY`]): `q:<queue>` = the
/// tenant whose key created the queue, `t:<tenant>` = how many queues that tenant created that
/// still exist; written by `queues.lua` modes `create` and `remove` (the per-tenant queue
/// allowance of tenant keys, design note 67).
pub const CREATORS_KEY: &str = "orq:creators:{orq:queues}";

/// The Redis pub/sub channel `queues.lua` publishes a new queue's name on (design note 27).
pub const QUEUES_WAKE_CHANNEL: &str = "orq:queues:wake";

/// The Redis pub/sub channel of `queue`'s wake-ups, `orq:{<queue>}:wake` (lib/park.lua's `wake`:
/// the task key prefix without its `task:`). Not a key: nothing is stored under it.
pub fn wake_channel(queue: &str) -> String {
    format!("{}wake", queue_prefix(queue))
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

/// Most hex digits of a lease token's random part (lease.lua's ARGV[3]: 1..32).
pub const TOKEN_BITS_MAX: usize = 32;

/// True when `s` has the shape of a lease token, `<epoch>-<hex>` (docs/design-notes.md, note 7):
/// the epoch in decimal without leading zeros (at most 20 digits) and 1..=[`TOKEN_BITS_MAX`]
/// lowercase hex digits. Only a store's check can tell whether it is the task's current token.
pub fn is_valid_lease_token(s: &str) -> bool {
    let Some((epoch, bits)) = s.split_once('-') else {
        return false;
    };
    let epoch_ok = (1..=20).contains(&epoch.len())
        && epoch.bytes().all(|b| b.is_ascii_digit())
        && (epoch == "0" || !epoch.starts_with('0'));
    let bits_ok = (1..=TOKEN_BITS_MAX).contains(&bits.len())
        && bits.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    epoch_ok && bits_ok
}

/// The queue key set for `queue` (a valid name), in the order of `lib/keys.lua`:
///
/// | `KEYS[i]` | key | Redis type |
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
    let prefix = queue_prefix(queue);
    QUEUE_KEY_SUFFIXES
        .iter()
        .map(|suffix| [prefix.as_str(), suffix].concat())
        .collect()
}

/// One key (or key prefix) of a queue's key set, in the order of [`queue_keys`]: `KEYS[i]` is
/// the variant with [`QueueKey::index`] `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKey {
    /// Prefix of the task hashes, `orq:{q}:task:`.
    Task = 1,
    /// Prefix of the ready lists, `orq:{q}:ready:`.
    Ready,
    /// `orq:{q}:tenants`, the fair-share ZSET.
    Tenants,
    /// `orq:{q}:scheduled`.
    Scheduled,
    /// `orq:{q}:leases`.
    Leases,
    /// `orq:{q}:dead`, the DLQ.
    Dead,
    /// `orq:{q}:completed`.
    Completed,
    /// `orq:{q}:cancelled`.
    Cancelled,
    /// Prefix of the idempotency keys, `orq:{q}:idem:`.
    Idem,
    /// Prefix of the tenant hashes, `orq:{q}:tenant:`.
    Tenant,
    /// `orq:{q}:stats`.
    Stats,
    /// `orq:{q}:events`, the event stream.
    Events,
    /// `orq:{q}:known_tenants`.
    KnownTenants,
    /// `orq:{q}:config`.
    Config,
    /// `orq:{q}:parked`.
    Parked,
    /// `orq:{q}:workers`.
    Workers,
}

impl QueueKey {
    /// Its position in the queue key set: the `i` of the scripts' `KEYS[i]` (1-based).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The key (or prefix) of `queue`: `orq:{<queue>}:<suffix>`.
    pub fn of(self, queue: &str) -> String {
        [queue_prefix(queue).as_str(), self.suffix()].concat()
    }

    /// What follows the queue's prefix in the key.
    fn suffix(self) -> &'static str {
        QUEUE_KEY_SUFFIXES[self.index() - 1]
    }
}

/// The prefix every key of `queue` starts with, `orq:{<queue>}:` (the hash tag included).
pub fn queue_prefix(queue: &str) -> String {
    ["orq:{", queue, "}:"].concat()
}

/// The hash of task `id` of `queue`, `orq:{<queue>}:task:<id>`.
pub fn task_key(queue: &str, id: &str) -> String {
    [queue_prefix(queue).as_str(), QueueKey::Task.suffix(), id].concat()
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

    // Goal: the tokens the engine makes pass the shape check, and malformed ones do not.
    #[test]
    fn lease_tokens_are_an_epoch_and_hex_bits() {
        let e = crate::Entropy::from_seed(7);
        for epoch in [0u64, 1, 42, u64::MAX] {
            let t = format!("{epoch}-{}", e.token_bits());
            assert!(is_valid_lease_token(&t), "{t}");
        }
        let long = format!("1-{}", "a".repeat(TOKEN_BITS_MAX + 1));
        for bad in [
            "", "1", "1-", "-ab", "01-ab", "1-AB", "1-xyz", "a-ab", "1-ab-cd", " 1-ab", &long,
        ] {
            assert!(!is_valid_lease_token(bad), "{bad:?}");
        }
    }

    // Goal: the Rust key builder and the layout documented in lib/keys.lua are the same list.
    #[test]
    fn queue_keys_match_the_layout_in_lib_keys_lua() {
        let keys = queue_keys("q");
        let layout = orq_lua::queue_key_layout();
        assert_eq!(layout.len(), keys.len());
        for (i, pattern) in layout {
            assert_eq!(keys[i - 1], pattern, "KEYS[{i}]");
        }
    }

    // Goal: each QueueKey names the entry of the key set at its index.
    #[test]
    fn queue_key_variants_are_the_key_set_in_order() {
        let keys = queue_keys("q");
        let all = [
            QueueKey::Task,
            QueueKey::Ready,
            QueueKey::Tenants,
            QueueKey::Scheduled,
            QueueKey::Leases,
            QueueKey::Dead,
            QueueKey::Completed,
            QueueKey::Cancelled,
            QueueKey::Idem,
            QueueKey::Tenant,
            QueueKey::Stats,
            QueueKey::Events,
            QueueKey::KnownTenants,
            QueueKey::Config,
            QueueKey::Parked,
            QueueKey::Workers,
        ];
        assert_eq!(all.len(), keys.len());
        for (i, k) in all.into_iter().enumerate() {
            assert_eq!(k.index(), i + 1);
            assert_eq!(k.of("q"), keys[i], "{k:?}");
        }
        assert_eq!(task_key("q", "A"), "orq:{q}:task:A");
        assert_eq!(wake_channel("q"), "orq:{q}:wake");
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
