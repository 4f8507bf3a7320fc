//! How a worker keeps a running task's lease live: the heartbeat cadence and what each
//! heartbeat's reply means, as plain decisions of reply, failures and time, which the worker's
//! async shell follows and the simulator drives through the real worker (its check 9 holds a
//! refused heartbeat to the same deadline as a refused outcome).
//!
//! The rule (DESIGN.md, "The Store trait"): a heartbeat the store refuses transiently
//! ([`crate::failure`]) is sent again soon, with the report's backoff
//! ([`crate::report::report_retry_ms`]) and never later than the regular interval, for as long as
//! the lease can still be live; so a refusal shorter than the lease never lets the lease expire
//! under a running handler. `STALE`, `CANCELLED` or `NOTFOUND`, or a deadline passed by the local
//! clock, means the lease is gone and the handler is aborted.

use crate::error::Error;
use crate::report::report_retry_ms;

/// Longest time between two heartbeats of a running task (ms). Heartbeats also carry
/// cancellation to the worker, so this bounds how long a cancelled task's handler keeps running.
pub const HEARTBEAT_INTERVAL_MAX_MS: u64 = 2_000;

/// Shortest wait before a refused heartbeat is sent again near the lease's deadline (ms): the
/// wait is at most half the lease's remaining time by the local clock, and not below this (or
/// the remaining time, when less).
pub const HEARTBEAT_RETRY_MIN_MS: u64 = 50;

/// The time between heartbeats for a lease of `lease_ms`: `lease_ms / divisor`, at least 100 ms
/// and at most [`HEARTBEAT_INTERVAL_MAX_MS`].
pub fn heartbeat_interval_ms(lease_ms: u64, divisor: u64) -> u64 {
    (lease_ms / divisor.max(1)).clamp(100, HEARTBEAT_INTERVAL_MAX_MS)
}

/// What a heartbeat's reply means for the running handler: `true` to keep running (the reply
/// is `(store_now_ms, lease_expires_at_ms)` on success).
pub fn lease_still_held(reply: &Result<(u64, u64), Error>) -> bool {
    !matches!(
        reply,
        Err(Error::Stale { .. } | Error::Cancelled { .. } | Error::NotFound { .. })
    )
}

/// What the worker does after a heartbeat's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeatStep {
    /// The lease is (or may still be) held: send the next heartbeat after `next_in_ms`.
    Held {
        /// Wait before the next heartbeat (ms).
        next_in_ms: u64,
    },
    /// The lease is gone (stale, cancelled, deleted, or past its deadline): stop the handler.
    Lost,
}

/// The step after a heartbeat's `reply`, the `refusals`-th transient failure in a row (0 when
/// the reply was not one), at local time `now_ms`, for a lease whose deadline by the local clock
/// is `lease_deadline_ms` (moved on by every heartbeat that succeeded), heartbeating every
/// `interval_ms`. `jitter_unit` (in `[0, 1)`) spreads the retries of many workers refused
/// together. A refused heartbeat is sent again after the report's backoff, at most the interval
/// and at most half the lease's remaining time by the local clock (at least
/// [`HEARTBEAT_RETRY_MIN_MS`]): the local deadline is off by the clock's drift over the lease,
/// so a retry aimed at it could come after the store's deadline (simulator seed 2215, a clock
/// 4.6 % slow); halving the remaining time puts the tries before it.
pub fn after_heartbeat(
    reply: &Result<(u64, u64), Error>,
    refusals: u32,
    now_ms: u64,
    lease_deadline_ms: u64,
    interval_ms: u64,
    jitter_unit: f64,
) -> BeatStep {
    if !lease_still_held(reply) || now_ms >= lease_deadline_ms {
        return BeatStep::Lost;
    }
    match reply {
        Err(e) if e.is_unavailable() => {
            let remaining = lease_deadline_ms - now_ms;
            BeatStep::Held {
                next_in_ms: report_retry_ms(refusals.saturating_sub(1), jitter_unit)
                    .min(interval_ms)
                    .min((remaining / 2).max(remaining.min(HEARTBEAT_RETRY_MIN_MS))),
            }
        }
        _ => BeatStep::Held {
            next_in_ms: interval_ms,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::Transient;

    fn loading() -> Error {
        Error::Unavailable {
            op: "heartbeat",
            cause: Transient::Loading,
            message: "LOADING Redis is loading the dataset in memory".into(),
        }
    }

    // Goal: the cadence is a third of the lease by default, within [100 ms, 2 s].
    #[test]
    fn interval_is_a_fraction_of_the_lease_within_bounds() {
        assert_eq!(heartbeat_interval_ms(30_000, 3), 2_000);
        assert_eq!(heartbeat_interval_ms(3_000, 3), 1_000);
        assert_eq!(heartbeat_interval_ms(60, 3), 100);
        assert_eq!(heartbeat_interval_ms(3_000, 0), 2_000);
    }

    // Goal: a heartbeat refused transiently is retried with the report's doubling backoff, never
    // later than the regular interval or half the time left before the local deadline (at least
    // 50 ms, or what is left when less); a success waits the interval.
    #[test]
    fn refused_heartbeats_are_retried_soon_while_the_lease_is_live() {
        let ok = Ok((1_000, 7_000));
        assert_eq!(
            after_heartbeat(&ok, 0, 0, 6_000, 2_000, 0.5),
            BeatStep::Held { next_in_ms: 2_000 }
        );
        let e = Err(loading());
        assert_eq!(
            after_heartbeat(&e, 1, 0, 6_000, 2_000, 0.999_999),
            BeatStep::Held { next_in_ms: 50 }
        );
        assert_eq!(
            after_heartbeat(&e, 4, 0, 6_000, 2_000, 0.999_999),
            BeatStep::Held { next_in_ms: 400 }
        );
        assert_eq!(
            after_heartbeat(&e, 9, 0, 6_000, 1_000, 0.999_999),
            BeatStep::Held { next_in_ms: 1_000 }
        );
        assert_eq!(
            after_heartbeat(&e, 9, 5_980, 6_000, 1_000, 0.999_999),
            BeatStep::Held { next_in_ms: 20 }
        );
        // Near the deadline: half the time left, then 50 ms steps.
        assert_eq!(
            after_heartbeat(&e, 9, 4_920, 6_000, 2_000, 0.999_999),
            BeatStep::Held { next_in_ms: 540 }
        );
        assert_eq!(
            after_heartbeat(&e, 9, 5_920, 6_000, 2_000, 0.999_999),
            BeatStep::Held { next_in_ms: 50 }
        );
        let lost = Err(Error::unreachable("heartbeat", "connection reset"));
        assert_eq!(
            after_heartbeat(&lost, 1, 0, 6_000, 2_000, 0.0),
            BeatStep::Held { next_in_ms: 25 }
        );
    }

    // Goal: stale, cancelled or deleted leases and a passed deadline stop the handler; a
    // permanent error that says nothing about the lease (a protocol error) keeps the cadence.
    #[test]
    fn lost_leases_stop_the_handler() {
        for e in [
            Error::Stale {
                op: "heartbeat",
                message: "token".into(),
            },
            Error::Cancelled { op: "heartbeat" },
            Error::NotFound {
                op: "heartbeat",
                id: "t1".into(),
            },
        ] {
            assert_eq!(
                after_heartbeat(&Err(e), 0, 0, 6_000, 2_000, 0.5),
                BeatStep::Lost
            );
        }
        assert_eq!(
            after_heartbeat(&Err(loading()), 3, 6_000, 6_000, 2_000, 0.5),
            BeatStep::Lost
        );
        assert_eq!(
            after_heartbeat(&Ok((0, 9_000)), 0, 6_000, 6_000, 2_000, 0.5),
            BeatStep::Lost
        );
        let corrupt = Err(Error::protocol("heartbeat", "CORRUPT x"));
        assert_eq!(
            after_heartbeat(&corrupt, 0, 0, 6_000, 2_000, 0.5),
            BeatStep::Held { next_in_ms: 2_000 }
        );
    }
}
