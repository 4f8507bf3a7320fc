//! The engine's error type: expected faults, each naming the operation that met it.

use crate::failure::Transient;

/// What went wrong in an engine operation. `op` names the operation (`"complete"`, `"submit"`).
///
/// Script error replies map to variants by their code word (`NOTFOUND`, `STALE`, `CANCELLED`,
/// `CONFLICT`, `INVALID`, `LIMITED`; see `lua/scripts/lib/keys.lua`). A refusal of Redis's own that
/// passes (`OOM`, `LOADING`, `READONLY`, ...: [`crate::failure`] decides) is
/// [`Error::Unavailable`], like an unreachable store. `CORRUPT` (a key holds foreign or damaged
/// data) and any other reply that is not a script's own error (a Redis error such as
/// `WRONGTYPE`) are [`Error::Protocol`]: nothing the caller did wrong, nothing a retry fixes.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum Error {
    /// The store could not run the call for a reason that passes: unreachable or no answer (the
    /// operation may or may not have run), or a transient refusal (it did not run). Retry it.
    #[error("{op}: the store {}: {message}", cause.describe())]
    Unavailable {
        /// The operation.
        op: &'static str,
        /// Why.
        cause: Transient,
        /// The store's error text.
        message: String,
    },
    /// No task with this id (in the queues searched).
    #[error("{op}: task {id} not found")]
    NotFound {
        /// The operation.
        op: &'static str,
        /// The task id asked for.
        id: String,
    },
    /// The lease token is not the task's current one: another worker holds (or held) the task.
    #[error("{op}: stale lease ({message})")]
    Stale {
        /// The operation.
        op: &'static str,
        /// The script's explanation.
        message: String,
    },
    /// The task was cancelled while this worker held its lease.
    #[error("{op}: task was cancelled")]
    Cancelled {
        /// The operation.
        op: &'static str,
    },
    /// The task's status does not allow the operation (cancel of a completed task, replay of a
    /// task that is not dead).
    #[error("{op}: task is {status}")]
    Conflict {
        /// The operation.
        op: &'static str,
        /// The task's current status.
        status: String,
    },
    /// An argument failed validation; nothing was written.
    #[error("{op}: {message}")]
    Invalid {
        /// The operation.
        op: &'static str,
        /// What is wrong, naming the field.
        message: String,
    },
    /// A tenant limit refused the call (nothing was stored): `max_queued` on submit.
    #[error("{op}: tenant {tenant} is at its {limit}; retry after {retry_after_ms} ms")]
    Limited {
        /// The operation.
        op: &'static str,
        /// The tenant whose limit refused it.
        tenant: String,
        /// Which limit (`max_queued`).
        limit: String,
        /// When a retry may succeed (ms).
        retry_after_ms: u64,
    },
    /// The store answered something the decoder did not expect, or a script found corrupt or
    /// foreign state (`CORRUPT`): a bug or foreign data in orq's keys.
    #[error("{op}: unexpected reply: {message}")]
    Protocol {
        /// The operation.
        op: &'static str,
        /// What was unexpected.
        message: String,
    },
}

impl Error {
    /// An `Invalid` error for `op`.
    pub fn invalid(op: &'static str, message: impl Into<String>) -> Self {
        Error::Invalid {
            op,
            message: message.into(),
        }
    }

    /// An `Unavailable` error for `op`: the store did not answer (`message` says how).
    pub fn unreachable(op: &'static str, message: impl Into<String>) -> Self {
        Error::Unavailable {
            op,
            cause: Transient::Unreachable,
            message: message.into(),
        }
    }

    /// A `Protocol` error for `op`.
    pub fn protocol(op: &'static str, message: impl Into<String>) -> Self {
        Error::Protocol {
            op,
            message: message.into(),
        }
    }

    /// Map a script error reply (`"CODE message"`) to a variant.
    pub fn from_script(op: &'static str, text: &str, id: &str) -> Self {
        let (code, message) = text.split_once(' ').unwrap_or((text, ""));
        match code {
            "NOTFOUND" => Error::NotFound {
                op,
                id: id.to_string(),
            },
            "STALE" => Error::Stale {
                op,
                message: message.to_string(),
            },
            "CANCELLED" => Error::Cancelled { op },
            "CONFLICT" => Error::Conflict {
                op,
                status: message.trim_start_matches("task is ").to_string(),
            },
            "INVALID" => Error::invalid(op, message),
            "LIMITED" => {
                let mut parts = message.split(' ');
                let tenant = parts.next().unwrap_or_default().to_string();
                let limit = parts.next().unwrap_or_default().to_string();
                let retry_after_ms = parts
                    .next()
                    .and_then(|p| p.strip_prefix("retry_after_ms="))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(1000);
                Error::Limited {
                    op,
                    tenant,
                    limit,
                    retry_after_ms,
                }
            }
            _ => match Transient::of_reply(text) {
                Some(cause) => Error::Unavailable {
                    op,
                    cause,
                    message: text.to_string(),
                },
                None => Error::protocol(op, text),
            },
        }
    }

    /// True when the failure is transient ([`crate::failure`]): the store was unreachable or
    /// refused the call for a reason that passes, and the same call can be retried.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Unavailable { .. })
    }

    /// The transient cause, when the failure is one.
    pub fn transient(&self) -> Option<Transient> {
        match self {
            Error::Unavailable { cause, .. } => Some(*cause),
            _ => None,
        }
    }
}

/// Result alias of the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: every code a script answers with (`orq_lua::codes`, the one list) has its meaning
    // here: none is taken for a transient refusal, and all but CORRUPT (a key of foreign data,
    // which the caller cannot act on) map to their own variant, not to `Protocol`.
    #[test]
    fn every_script_error_code_has_a_variant() {
        for code in orq_lua::codes::ERROR_CODES {
            let e = Error::from_script(
                "op",
                &format!("{code} t1 max_inflight retry_after_ms=5"),
                "id",
            );
            assert!(!e.is_unavailable(), "{code}: {e}");
            let protocol = matches!(e, Error::Protocol { .. });
            assert_eq!(protocol, code == "CORRUPT", "{code}: {e}");
        }
    }
}
