//! The data-format version a store holds, checked once when a process starts (design note 39).
//!
//! orq keeps no code to read data an orq of another format wrote. Instead Redis holds the
//! version of its orq data at [`FORMAT_KEY`], written by the first process that finds it absent
//! (a fresh Redis), and a process that finds another version there refuses to start
//! ([`check_data_format`]). The scripts do not check it: the check costs one call at startup
//! and nothing on the hot path.

use crate::failure::Transient;
use crate::keys::{FORMAT_KEY, QUEUES_KEY};
use crate::resp::Resp;
use crate::store::{Store, StoreError};
pub use orq_lua::facts::DATA_FORMAT;

/// Why a process must not run on a store, or could not learn whether it may.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The store holds orq data of another format. Stop: this orq would misread it.
    #[error(
        "this Redis holds orq data format {found}; this orq reads format {DATA_FORMAT}: run an \
         orq that reads format {found}, or point orq at another Redis (or empty this one with \
         FLUSHALL if its data is disposable)"
    )]
    Other {
        /// The version found.
        found: u64,
    },
    /// [`FORMAT_KEY`] holds something that is no format version: a value that is not a
    /// decimal integer, or a key of another Redis type (`what` says which). Stop: whatever wrote
    /// it was not this orq.
    #[error(
        "this Redis's {FORMAT_KEY} holds {what}, which is no orq data format (this orq reads \
         format {DATA_FORMAT}): something other than orq wrote it; point orq at another Redis, \
         or delete the key if you know the rest of this Redis holds orq data of format \
         {DATA_FORMAT} or none"
    )]
    Foreign {
        /// What the key holds, for the message.
        what: String,
    },
    /// The store did not answer, or refused the call for a reason that passes (a replica, out
    /// of memory, loading): the check is still to be made. Try again.
    #[error("the data format could not be checked yet: {0}")]
    Unavailable(String),
}

/// Check that the store holds orq data of this orq's format ([`DATA_FORMAT`]), writing the
/// version first when the store has none (a fresh Redis, or one that lost its data), in the
/// same atomic script call. A store that holds a version is only read, so a replica or a full
/// Redis answers it too.
///
/// Every process that runs a role calls this once before it starts (`orq serve`, `orq api`,
/// `orq worker`, `orq scheduler`); a program that embeds the engine should too. One call of the
/// `queues` script (mode `format`), which declares [`QUEUES_KEY`] and [`FORMAT_KEY`], both in
/// the registry's slot, so it works on a single server, Sentinel and Redis Cluster alike. An
/// in-memory store just gets the version written.
///
/// Errors: [`FormatError::Other`] and [`FormatError::Foreign`] mean "do not start";
/// [`FormatError::Unavailable`] means the answer is still to come (the store is unreachable,
/// or refused the write for a reason that passes).
pub async fn check_data_format(store: &dyn Store) -> Result<(), FormatError> {
    let reply = store
        .eval(
            orq_lua::script("queues"),
            &[QUEUES_KEY.to_string(), FORMAT_KEY.to_string()],
            &[b"format".to_vec()],
        )
        .await
        .map_err(|StoreError(e)| FormatError::Unavailable(e))?;
    verdict(&reply)
}

/// The verdict on the `queues` script's mode `format` reply.
fn verdict(reply: &Resp) -> Result<(), FormatError> {
    match reply {
        Resp::Error(e) if Transient::of_reply(e).is_some() => {
            Err(FormatError::Unavailable(e.clone()))
        }
        Resp::Error(e) => Err(FormatError::Foreign {
            what: format!("data orq cannot read ({e})"),
        }),
        _ => {
            let stored = reply
                .as_array()
                .and_then(|items| items.get(1))
                .and_then(Resp::as_bytes)
                .ok_or_else(|| FormatError::Foreign {
                    what: format!("nothing orq can read (the store answered {reply:?})"),
                })?;
            let text = String::from_utf8_lossy(stored);
            let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
            match text.parse::<u64>() {
                Ok(v) if digits && v == DATA_FORMAT => Ok(()),
                Ok(found) if digits => Err(FormatError::Other { found }),
                _ => Err(FormatError::Foreign {
                    what: format!("{:?}", text.chars().take(64).collect::<String>()),
                }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(v: &str) -> Resp {
        Resp::Array(vec![Resp::Int(1), Resp::Bulk(v.as_bytes().to_vec())])
    }

    // Goal: only this orq's format passes; another number, a value that is no number, a key of
    // another type and a malformed reply refuse to start, each with a message that says what to
    // do; a refusal that passes (a replica, out of memory) asks to try again.
    #[test]
    fn only_this_format_passes_and_every_refusal_says_what_to_do() {
        assert_eq!(verdict(&stored(&DATA_FORMAT.to_string())), Ok(()));
        let other = verdict(&stored(&(DATA_FORMAT + 1).to_string())).unwrap_err();
        assert_eq!(
            other,
            FormatError::Other {
                found: DATA_FORMAT + 1
            }
        );
        let msg = other.to_string();
        assert!(
            msg.contains(&format!("holds orq data format {}", DATA_FORMAT + 1))
                && msg.contains(&format!("this orq reads format {DATA_FORMAT}"))
                && msg.contains("another Redis")
                && msg.contains("FLUSHALL"),
            "{msg}"
        );
        for garbage in ["", "x", "+1", "1.0", " 1", "99999999999999999999999", "-1"] {
            let e = verdict(&stored(garbage)).unwrap_err();
            assert!(
                matches!(&e, FormatError::Foreign { .. }),
                "{garbage:?}: {e:?}"
            );
            assert!(e.to_string().contains("no orq data format"), "{e}");
            assert!(e.to_string().contains(FORMAT_KEY), "{e}");
        }
        let corrupt = Resp::Error(format!("CORRUPT {FORMAT_KEY} holds a hash, not a string"));
        let e = verdict(&corrupt).unwrap_err();
        assert!(
            matches!(&e, FormatError::Foreign { what } if what.contains("holds a hash")),
            "{e:?}"
        );
        assert!(matches!(
            verdict(&Resp::Error(
                "READONLY You can't write against a read only replica.".into()
            )),
            Err(FormatError::Unavailable(_))
        ));
        assert!(matches!(
            verdict(&Resp::Int(3)),
            Err(FormatError::Foreign { .. })
        ));
    }
}
