//! The one classification of store failures: **transient** (the store was unreachable, the reply
//! was lost, or Redis refused the call for a reason that passes; retry it, answer 503) or
//! **permanent** (the scripts' own codes and everything a retry cannot fix). DESIGN.md, "The
//! Store trait", states the contract; this file is the only place that decides it.
//!
//! Redis names a refusal by the first word of its error reply (the same word whether the command
//! was sent directly or called by a script: Redis 7 keeps it). The transient words and what they
//! mean, from Redis's documentation:
//!
//! | word | when Redis answers it |
//! |---|---|
//! | `OOM` | `used_memory` is over `maxmemory` and the policy cannot free memory (`noeviction`) |
//! | `BUSY` | another script or function runs longer than `busy-reply-threshold` |
//! | `LOADING` | the server is loading its dataset (AOF or RDB) after a restart |
//! | `READONLY` | the server is a replica (a failover has demoted it, or `--redis` names a replica) |
//! | `MASTERDOWN` | a replica with `replica-serve-stale-data no` lost its primary |
//! | `NOREPLICAS` | fewer good replicas than `min-replicas-to-write` |
//! | `TRYAGAIN` | a multi-key call on a cluster slot that is being migrated |
//! | `CLUSTERDOWN` | the cluster cannot serve the slot (a failover in progress, a hash slot unowned) |
//! | `MOVED`, `ASK` | the slot lives on another cluster node (a cluster client follows them) |
//! | `WRONGPASS` | the server refused orq's user name or password (`AUTH`, `HELLO`): a password was changed, or an ACL file is not loaded yet |
//! | `NOAUTH` | the server wants a password orq did not send (`requirepass` set since orq connected) |
//! | `NOPERM` | orq's ACL user may not run a command or touch a key (an ACL being changed) |
//!
//! The three authentication refusals pass when the operator puts the credentials right: a
//! password rotated in the wrong order, or a Redis that starts before its ACL file is loaded,
//! must not leave orq down until it is restarted. A refused authentication ran nothing. The
//! store turns a connection the server refused to authenticate into a `WRONGPASS` reply
//! (`redis_store/resp.rs`), as the `redis` crate keeps no word of it.
//!
//! Everything else is permanent: the scripts' codes (`NOTFOUND`, `STALE`, `CANCELLED`,
//! `CONFLICT`, `INVALID`, `LIMITED`, `CORRUPT`), `WRONGTYPE`, `NOSCRIPT` after the fall-back to
//! EVAL, and script errors. A call refused with a transient word did not run; a call whose reply
//! was lost ([`Transient::Unreachable`]) may have run, which the scripts' idempotence under a
//! retried token makes safe to retry.

/// Why a store call failed in a way that passes. See the module's table for the Redis words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transient {
    /// The store could not be reached, the connection dropped, or the reply timed out (the call
    /// may have run).
    Unreachable,
    /// `OOM`: out of memory under a `noeviction` policy.
    OutOfMemory,
    /// `BUSY`: a long script is running.
    Busy,
    /// `LOADING`: loading its dataset after a restart.
    Loading,
    /// `READONLY`: a replica (during a failover, or a misdirected URL).
    ReadOnly,
    /// `MASTERDOWN`: a replica that lost its primary.
    MasterDown,
    /// `NOREPLICAS`: not enough replicas for `min-replicas-to-write`.
    NoReplicas,
    /// `TRYAGAIN`: a slot in migration.
    TryAgain,
    /// `CLUSTERDOWN`: the cluster cannot serve the slot.
    ClusterDown,
    /// `MOVED`: the slot lives on another node.
    Moved,
    /// `ASK`: the slot is moving to another node.
    Ask,
    /// `WRONGPASS`: the server refused orq's user name or password.
    WrongPass,
    /// `NOAUTH`: the server wants a password orq did not send.
    NoAuth,
    /// `NOPERM`: orq's ACL user may not run the command.
    NoPerm,
}

/// The transient error words of Redis, each with its [`Transient`]. The one list: every caller
/// classifies through [`Transient::of_reply`].
pub const TRANSIENT_ERROR_WORDS: [(&str, Transient); 13] = [
    ("OOM", Transient::OutOfMemory),
    ("BUSY", Transient::Busy),
    ("LOADING", Transient::Loading),
    ("READONLY", Transient::ReadOnly),
    ("MASTERDOWN", Transient::MasterDown),
    ("NOREPLICAS", Transient::NoReplicas),
    ("TRYAGAIN", Transient::TryAgain),
    ("CLUSTERDOWN", Transient::ClusterDown),
    ("MOVED", Transient::Moved),
    ("ASK", Transient::Ask),
    ("WRONGPASS", Transient::WrongPass),
    ("NOAUTH", Transient::NoAuth),
    ("NOPERM", Transient::NoPerm),
];

impl Transient {
    /// The transient refusal an error reply names by its first word (`"OOM command not
    /// allowed..."`), or `None` for a permanent error.
    pub fn of_reply(text: &str) -> Option<Transient> {
        let word = text.split([' ', '\n']).next().unwrap_or_default();
        TRANSIENT_ERROR_WORDS
            .iter()
            .find(|(w, _)| *w == word)
            .map(|(_, t)| *t)
    }

    /// Redis's word for it (`"OOM"`), or `"UNREACHABLE"` for a store that did not answer.
    pub fn word(self) -> &'static str {
        TRANSIENT_ERROR_WORDS
            .iter()
            .find(|(_, t)| *t == self)
            .map_or("UNREACHABLE", |(w, _)| w)
    }

    /// What happened, for people: completes "the store ..." (`"is out of memory"`).
    pub fn describe(self) -> &'static str {
        match self {
            Transient::Unreachable => "is unreachable or did not answer",
            Transient::OutOfMemory => "is out of memory",
            Transient::Busy => "is busy running a long script",
            Transient::Loading => "is loading its data after a restart",
            Transient::ReadOnly => "is read-only (a replica, or a failover in progress)",
            Transient::MasterDown => "lost its primary",
            Transient::NoReplicas => "has too few replicas to accept writes",
            Transient::TryAgain => "is migrating the queue's hash slot",
            Transient::ClusterDown => "cluster cannot serve the queue's hash slot",
            Transient::Moved | Transient::Ask => "moved the queue's hash slot to another node",
            Transient::WrongPass => "refused orq's user name or password (authentication failed)",
            Transient::NoAuth => {
                "requires a password that orq did not send (authentication required)"
            }
            Transient::NoPerm => {
                "does not permit orq's ACL user to run the call (permission denied)"
            }
        }
    }

    /// True for the authentication refusals (`WRONGPASS`, `NOAUTH`, `NOPERM`).
    pub fn is_authentication(self) -> bool {
        matches!(
            self,
            Transient::WrongPass | Transient::NoAuth | Transient::NoPerm
        )
    }
}

impl std::fmt::Display for Transient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: each word Redis answers is classified by the first word only, as sent directly and as
    // a script relays it, and look-alikes (BUSYKEY, a script's own codes) stay permanent.
    #[test]
    fn error_replies_are_classified_by_their_first_word() {
        let oom = "OOM command not allowed when used memory > 'maxmemory'. script: 0a9f75e9, on @user_script:1.";
        assert_eq!(Transient::of_reply(oom), Some(Transient::OutOfMemory));
        assert_eq!(
            Transient::of_reply("LOADING Redis is loading the dataset in memory"),
            Some(Transient::Loading)
        );
        assert_eq!(
            Transient::of_reply("READONLY You can't write against a read only replica."),
            Some(Transient::ReadOnly)
        );
        assert_eq!(
            Transient::of_reply("MOVED 16303 127.0.0.1:7103"),
            Some(Transient::Moved)
        );
        assert_eq!(
            Transient::of_reply("WRONGPASS invalid username-password pair or user is disabled."),
            Some(Transient::WrongPass)
        );
        assert_eq!(
            Transient::of_reply("NOAUTH Authentication required."),
            Some(Transient::NoAuth)
        );
        assert_eq!(
            Transient::of_reply("NOPERM User orq has no permissions to run the 'fcall' command"),
            Some(Transient::NoPerm)
        );
        for (word, t) in TRANSIENT_ERROR_WORDS {
            assert_eq!(Transient::of_reply(&format!("{word} x")), Some(t));
            assert_eq!(t.word(), word);
            assert!(!t.describe().is_empty());
        }
        for permanent in [
            "BUSYKEY Target key name already exists.",
            "STALE lease token",
            "CORRUPT orq:{q}:task:x",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            "ERR Error running script",
            "oom lowercase",
            "",
        ] {
            assert_eq!(Transient::of_reply(permanent), None, "{permanent}");
        }
        assert_eq!(Transient::Unreachable.word(), "UNREACHABLE");
    }
}
