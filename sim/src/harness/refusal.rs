//! The store's own refusals, as the simulator injects them: a call refused before it runs with
//! one of Redis's transient error words ([`orq::failure`]), either as a rare single refusal or as
//! an episode that lasts seconds of virtual time (an OOM, a failover's read-only window, a long
//! script), and a `LOADING` window after a store restart.
//!
//! Which calls a word refuses follows Redis 7 with orq's scripts called as functions
//! (docs/design-notes.md, note 44): `OOM`, `READONLY` and `NOREPLICAS` refuse up front every
//! function not flagged `no-writes`, so only the read-only scripts still run; `BUSY`, `LOADING`,
//! `MASTERDOWN`, `TRYAGAIN` and `CLUSTERDOWN` refuse every call. The authentication refusals
//! (`WRONGPASS`, `NOAUTH`, `NOPERM`: a password rotated in the wrong order, an ACL not loaded
//! yet) refuse every call too, as a connection Redis will not authenticate runs nothing. `MOVED`
//! and `ASK` are not refusals a store passes on (a cluster client follows them), so the
//! simulator never injects them.

use orq::Transient;

/// The scripts Redis runs under `OOM`, `READONLY` and `NOREPLICAS`: those that never write
/// (functions registered `no-writes`), and `queues`, called by EVALSHA, whose writes Redis judges
/// as they happen (most of its calls are the list mode, which reads; the simulator counts all of
/// them as reads, an approximation: its add and probe modes would be refused).
pub fn read_only(script: &str) -> bool {
    orq_lua::functions::READ_ONLY.contains(&script) || orq_lua::functions::BY_EVAL.contains(&script)
}

/// The transient words the simulator injects, in a fixed order (draws index into it).
pub const INJECTED: [Transient; 11] = [
    Transient::OutOfMemory,
    Transient::Busy,
    Transient::Loading,
    Transient::ReadOnly,
    Transient::MasterDown,
    Transient::NoReplicas,
    Transient::TryAgain,
    Transient::ClusterDown,
    Transient::WrongPass,
    Transient::NoAuth,
    Transient::NoPerm,
];

/// The error reply Redis 7.0 sends for `word`, as a script call relays it (first word first).
pub fn reply_text(word: Transient) -> &'static str {
    match word {
        Transient::OutOfMemory => "OOM command not allowed when used memory > 'maxmemory'.",
        Transient::Busy => {
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
        }
        Transient::Loading => "LOADING Redis is loading the dataset in memory",
        Transient::ReadOnly => "READONLY You can't write against a read only replica.",
        Transient::MasterDown => {
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
        }
        Transient::NoReplicas => "NOREPLICAS Not enough good replicas to write.",
        Transient::TryAgain => "TRYAGAIN Multiple keys request during rehashing of slot",
        Transient::ClusterDown => "CLUSTERDOWN The cluster is down",
        Transient::Moved => "MOVED 0 127.0.0.1:7000",
        Transient::Ask => "ASK 0 127.0.0.1:7000",
        Transient::Unreachable => "connection refused",
        Transient::WrongPass => "WRONGPASS invalid username-password pair or user is disabled.",
        Transient::NoAuth => "NOAUTH Authentication required.",
        Transient::NoPerm => "NOPERM User orq has no permissions to run the 'fcall' command",
    }
}

/// True when `word` refuses only the calls that write (Redis lets read-only scripts run).
pub fn refuses_writes_only(word: Transient) -> bool {
    matches!(
        word,
        Transient::OutOfMemory | Transient::ReadOnly | Transient::NoReplicas
    )
}

/// True when a store refusing with `word` refuses a call of `script`.
pub fn refuses(word: Transient, script: &str) -> bool {
    !(refuses_writes_only(word) && read_only(script))
}

/// An episode of refusals: every call `word` refuses is refused until virtual ms `until_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Episode {
    /// The error word.
    pub word: Transient,
    /// Virtual ms the episode ends at (exclusive).
    pub until_ms: u64,
}

impl Episode {
    /// The word this episode refuses a call of `script` with at virtual ms `now_ms`, if any.
    pub fn refusal(&self, script: &str, now_ms: u64) -> Option<Transient> {
        (now_ms < self.until_ms && refuses(self.word, script)).then_some(self.word)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: every injected word's reply classifies back to that word (the engine sees what
    // Redis would send), the write-only words spare read-only scripts, and an episode ends.
    #[test]
    fn injected_refusals_read_as_redis_sends_them() {
        // Every refusal Redis passes on is injected; MOVED and ASK, which a cluster client
        // follows, are not.
        for (_, word) in orq::failure::TRANSIENT_ERROR_WORDS {
            let followed = matches!(word, Transient::Moved | Transient::Ask);
            assert_eq!(INJECTED.contains(&word), !followed, "{word}");
        }
        for word in INJECTED {
            assert_eq!(Transient::of_reply(reply_text(word)), Some(word));
            assert!(refuses(word, "complete"));
            assert_eq!(refuses(word, "get"), !refuses_writes_only(word));
        }
        let e = Episode {
            word: Transient::OutOfMemory,
            until_ms: 10,
        };
        assert_eq!(e.refusal("enqueue", 9), Some(Transient::OutOfMemory));
        assert_eq!(e.refusal("stats", 9), None);
        assert_eq!(e.refusal("enqueue", 10), None);
    }
}
