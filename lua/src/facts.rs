//! The limits and sentinels that both the Lua scripts and the Rust code use, written once.
//!
//! Rust code uses the constants; every script sees them as the fields of one Lua table,
//! `FACTS`, declared on the first line of the source sent to Redis ([`lua_table`], prepended by
//! [`crate::Script`]), so a script never writes one of these numbers itself (a test in this
//! crate fails when one does). One table rather than one local per fact: Lua 5.1 allows a chunk
//! 200 locals per function.

/// Shortest lease a task may ask for (ms): one second.
pub const LEASE_MS_MIN: u64 = 1_000;
/// Longest lease a task may ask for (ms): one hour. A handler that runs longer heartbeats.
pub const LEASE_MS_MAX: u64 = 3_600_000;
/// Longest handler timeout a task may ask for (ms): one day.
pub const TIMEOUT_MS_MAX: u64 = 86_400_000;
/// Longest first backoff a task may ask for (ms): one day.
pub const BACKOFF_INITIAL_MS_MAX: u64 = 86_400_000;
/// Longest starvation-bound step a queue may set (`aging_step_ms`, ms): one hour.
pub const AGING_STEP_MS_MAX: u64 = 3_600_000;
/// The largest integer a double (Lua 5.1's number, a ZSET score) holds exactly: 2^53 − 1.
pub const EXACT_INT_MAX: u64 = (1 << 53) - 1;
/// Score of a tenant parked at its `max_inflight` in the queue's `parked` ZSET: it waits for one
/// of its leases to end (or its limits to change), not for a time. [`EXACT_INT_MAX`].
pub const PARKED_CAPPED: u64 = EXACT_INT_MAX;
/// Tasks `lease` hands a backlogged tenant per visit at least (its quantum, as in deficit round
/// robin; fewer only when the call wants fewer, a limit stops it, or the tenant runs out). Its
/// virtual time still advances by 1 / weight per task, so the shares stay those of the weights and
/// every backlogged tenant's virtual time stays below the smallest one + quantum / weight
/// (docs/design-notes.md, note 46).
pub const FAIR_QUANTUM: u64 = 8;
/// Values per leased task in a lease reply: the task's entries follow one another in one flat
/// array, `expires_at_ms, fields, epoch, attempt, payload` each (lua/scripts/lease.lua's header;
/// `orq::ops::leased_entries` reads them). One array rather than an array per task: Redis converts
/// every Lua table of a reply with seven probes for special fields, and the tables cost the script
/// their allocation (docs/design-notes.md, note 58).
pub const LEASED_ENTRY_LEN: u64 = 5;
/// Most tenants one lease may be limited to (`lease`'s ARGV[7..]; a worker key's `tenants`, the
/// lease body's `tenants`): the limited lease reads each one's place in the fair-share set.
pub const LEASE_TENANTS_MAX: u64 = 16;
/// How long a worker that has stopped reporting stays in a queue's worker list (ms): one hour.
pub const WORKER_FORGET_MS: u64 = 3_600_000;

/// Longest `tracestate` a task keeps (bytes): what W3C Trace Context asks every vendor to pass
/// on at least; a longer one loses list members as W3C says (`orq::trace::TraceContext`).
pub const TRACESTATE_MAX_BYTES: u64 = 512;
/// Longest trace context a task stores (bytes, its `trace` field): a version-00 `traceparent`
/// (55 bytes), a comma and a `tracestate` of at most [`TRACESTATE_MAX_BYTES`]. enqueue refuses a
/// longer one.
pub const TRACE_CONTEXT_MAX_BYTES: u64 = 55 + 1 + TRACESTATE_MAX_BYTES;

/// The version of the data format this orq reads and writes (the keys, their types and the
/// fields it stores). Redis holds the format of its data at `orq::keys::FORMAT_KEY` (written
/// by the `queues` script's mode `format`); a process that finds another one there refuses to
/// start (docs/design-notes.md, note 39). Bump it with any change of the stored data that an
/// orq of the previous format would misread: orq keeps no code to read earlier formats.
pub const DATA_FORMAT: u64 = 1;

/// Retries a task gets when its spec does not say (attempts total at most this + 1).
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// Lease length a task gets when its spec does not say, or when its stored one is not valid (ms).
pub const DEFAULT_LEASE_MS: u64 = 30_000;
/// First retry delay of the default backoff (ms).
pub const DEFAULT_BACKOFF_INITIAL_MS: u64 = 1_000;
/// Growth factor of the default backoff per attempt.
pub const DEFAULT_BACKOFF_MULTIPLIER: f64 = 2.0;
/// Longest retry delay of the default backoff (ms).
pub const DEFAULT_BACKOFF_MAX_MS: u64 = 300_000;
/// Jitter of the default backoff: each delay is drawn within ± this fraction.
pub const DEFAULT_BACKOFF_JITTER: f64 = 0.2;

/// The values a task hash does not store, as `(field name, value as stored)`: a task stores a
/// field only where it differs (docs/design-notes.md, note 21), and the scripts read an absent
/// one as this (`FACTS.task_defaults`, lib/task.lua's `TASK_DEFAULTS`). A new task's priority,
/// attempt and epoch are 0.
pub fn task_defaults() -> [(&'static str, String); 9] {
    [
        ("priority", "0".to_string()),
        ("attempt", "0".to_string()),
        ("epoch", "0".to_string()),
        ("max_retries", DEFAULT_MAX_RETRIES.to_string()),
        ("b_init", DEFAULT_BACKOFF_INITIAL_MS.to_string()),
        ("b_mult", DEFAULT_BACKOFF_MULTIPLIER.to_string()),
        ("b_max", DEFAULT_BACKOFF_MAX_MS.to_string()),
        ("b_jitter", DEFAULT_BACKOFF_JITTER.to_string()),
        ("lease_ms", DEFAULT_LEASE_MS.to_string()),
    ]
}

/// The retry-policy settings of a task, in the order enqueue stores them: a task hash holds one
/// only where it differs from its [`task_defaults`] value. Scripts see them as `FACTS.policy`
/// (the names) and `FACTS.policy_defaults` (name -> the default as a number), made here so that a
/// script need not convert them on every call (a library's top level may call no function).
pub const POLICY: [&str; 6] = [
    "max_retries",
    "b_init",
    "b_mult",
    "b_max",
    "b_jitter",
    "lease_ms",
];

/// Every fact as `(Lua field name, value)`, in the order of the table.
pub const ALL: [(&str, u64); 14] = [
    ("lease_ms_min", LEASE_MS_MIN),
    ("lease_ms_max", LEASE_MS_MAX),
    ("lease_ms_default", DEFAULT_LEASE_MS),
    ("timeout_ms_max", TIMEOUT_MS_MAX),
    ("backoff_initial_ms_max", BACKOFF_INITIAL_MS_MAX),
    ("aging_step_ms_max", AGING_STEP_MS_MAX),
    ("exact_int_max", EXACT_INT_MAX),
    ("parked_capped", PARKED_CAPPED),
    ("fair_quantum", FAIR_QUANTUM),
    ("leased_entry_len", LEASED_ENTRY_LEN),
    ("lease_tenants_max", LEASE_TENANTS_MAX),
    ("worker_forget_ms", WORKER_FORGET_MS),
    ("trace_context_max_bytes", TRACE_CONTEXT_MAX_BYTES),
    ("data_format", DATA_FORMAT),
];

/// The line that declares the facts to a script:
/// `local FACTS = {lease_ms_min = 1000, ..., task_defaults = {priority = '0', ...}, policy =
/// {'max_retries', ...}, policy_defaults = {max_retries = 3, ...}}` (no newline).
pub fn lua_table() -> String {
    let mut fields: Vec<String> = ALL.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    let defaults = task_defaults();
    let quoted: Vec<String> = defaults
        .iter()
        .map(|(k, v)| format!("{k} = '{v}'"))
        .collect();
    fields.push(format!("task_defaults = {{{}}}", quoted.join(", ")));
    let names: Vec<String> = POLICY.iter().map(|k| format!("'{k}'")).collect();
    fields.push(format!("policy = {{{}}}", names.join(", ")));
    // The defaults as Lua numbers: each stored string is a decimal number (checked by a test).
    let numbers: Vec<String> = POLICY
        .iter()
        .map(|k| {
            let (_, v) = defaults
                .iter()
                .find(|(d, _)| d == k)
                .unwrap_or_else(|| panic!("no task default for the policy setting {k}"));
            format!("{k} = {v}")
        })
        .collect();
    fields.push(format!("policy_defaults = {{{}}}", numbers.join(", ")));
    format!("local FACTS = {{{}}}", fields.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: no script or lib file writes a fact's number itself: each uses `FACTS.<name>`, so
    // the number lives here alone. Method: scan every script's own text for each value that is
    // distinctive (100,000 or more: a 1000 is also a default backoff, a divisor, ...).
    #[test]
    fn no_script_writes_a_facts_number() {
        for s in crate::all() {
            for (name, value) in ALL.into_iter().filter(|(_, v)| *v >= 100_000) {
                let found = s.body.contains(&value.to_string())
                    || crate::LIB_FILES
                        .iter()
                        .any(|f| f.source.contains(&value.to_string()));
                assert!(
                    !found,
                    "{value} ({name}) is written in {}.lua or a lib file: use FACTS.{name}",
                    s.name
                );
            }
        }
    }

    // Goal: the table line is valid-looking Lua with every fact once.
    #[test]
    fn the_table_names_every_fact() {
        let t = lua_table();
        assert!(t.starts_with("local FACTS = {") && t.ends_with('}'), "{t}");
        for (name, value) in ALL {
            assert_eq!(t.matches(&format!("{name} = {value}")).count(), 1, "{t}");
        }
        assert!(!t.contains('\n'));
    }

    // Goal: the task defaults reach the scripts as the strings Redis would store, and no script
    // writes its own table of them.
    #[test]
    fn the_task_defaults_are_generated_not_written() {
        let t = lua_table();
        assert!(t.contains("task_defaults = {priority = '0', attempt = '0', epoch = '0', max_retries = '3', b_init = '1000', b_mult = '2', b_max = '300000', b_jitter = '0.2', lease_ms = '30000'}"), "{t}");
        assert!(t.contains("policy = {'max_retries', 'b_init', 'b_mult', 'b_max', 'b_jitter', 'lease_ms'}, policy_defaults = {max_retries = 3, b_init = 1000, b_mult = 2, b_max = 300000, b_jitter = 0.2, lease_ms = 30000}"), "{t}");
        for (k, v) in task_defaults() {
            assert!(v.parse::<f64>().is_ok(), "{k} = {v:?} is not a number");
        }
        let lib = crate::LIB_FILES.iter().map(|f| f.source);
        assert!(lib
            .clone()
            .any(|s| s.contains("TASK_DEFAULTS = FACTS.task_defaults")));
        assert!(!lib.clone().any(|s| s.contains("TASK_DEFAULTS = {")));
    }
}
