//! "Acknowledged means replicated, when asked" (`--wait-replicas N`): after a script that
//! records something a caller is told about (a submit, an outcome, a cancel, a replay, ...), the
//! store sends `WAIT N timeout` in one pipeline with the script, on one connection to the server
//! that runs it, and answers the call only when N replicas have its writes. When fewer acknowledge within the timeout, the call's
//! reply becomes Redis's own `NOREPLICAS` refusal: transient (engine/src/failure.rs), so the API
//! answers 503 and the caller resends (a submit with its idempotency key, an outcome with its
//! lease token; the scripts apply either once), and the resent call waits again.
//!
//! Leases, heartbeats and the scheduler's passes do not wait: losing one to a failover makes a
//! task run again or a pass repeat, which at-least-once delivery already allows, and waiting on
//! them would slow every task for nothing.

/// How many replicas must acknowledge, and how long to wait for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitReplicas {
    /// Replicas that must have the writes (`WAIT`'s first argument), at least 1.
    pub replicas: u32,
    /// How long to wait for them (ms, `WAIT`'s second argument), at least 1 (0 would wait
    /// forever).
    pub timeout_ms: u64,
}

/// The scripts whose writes a caller is told are recorded: they wait for the replicas. The one
/// list; a script not named here never waits.
pub const WAITED_SCRIPTS: [&str; 10] = [
    "enqueue",
    "complete",
    "complete_batch",
    "fail",
    "release",
    "cancel",
    "replay",
    "purge",
    "configure",
    "queues",
];

/// Whether a call of `script` waits for the replicas.
pub fn waits(script: &str) -> bool {
    WAITED_SCRIPTS.contains(&script)
}

/// The reply that replaces a call's own when only `acked` of `wanted` replicas acknowledged:
/// Redis's `NOREPLICAS` word, so it is classified as transient like Redis's own refusal.
pub fn shortfall(acked: i64, wanted: u32, timeout_ms: u64) -> String {
    format!(
        "NOREPLICAS {acked} of {wanted} replicas acknowledged the write within {timeout_ms} ms \
         (--wait-replicas); it is recorded on the primary and may be lost on a failover: send \
         it again (with its idempotency key or lease token)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::Transient;

    // Goal: the shortfall reply is Redis's own transient word; reads and leases never wait.
    #[test]
    fn shortfalls_are_transient_and_only_recorded_writes_wait() {
        assert_eq!(
            Transient::of_reply(&shortfall(0, 1, 500)),
            Some(Transient::NoReplicas)
        );
        for s in ["enqueue", "complete_batch", "fail", "cancel", "replay"] {
            assert!(waits(s), "{s}");
        }
        for s in [
            "lease",
            "heartbeat",
            "promote",
            "reap",
            "get",
            "list",
            "stats",
        ] {
            assert!(!waits(s), "{s}");
        }
        for s in WAITED_SCRIPTS {
            assert!(orq_lua::get(s).is_some(), "{s} is not a script");
        }
    }
}
