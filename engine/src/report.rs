//! How a worker delivers a finished task's outcome (complete, fail, release) when the store
//! refuses or does not answer: plain decisions of reply, tries and time, which the worker's async
//! shell follows and the simulator drives through the real worker.
//!
//! The rule (DESIGN.md, "The Store trait"): a transient failure ([`crate::failure`]) is retried
//! with the same lease token, which the scripts apply once however often it arrives, for as long
//! as the lease can still be live; meanwhile the worker goes on heartbeating, so a refusal shorter
//! than the lease never makes the task run twice. Only a permanent answer (`STALE`, `CANCELLED`,
//! `NOTFOUND`, ...) or a lease that has certainly expired ends it.

use crate::error::Error;

/// First wait before a transiently refused report is sent again (ms).
pub const REPORT_RETRY_FIRST_MS: u64 = 50;
/// Longest wait between two tries of a report (ms).
pub const REPORT_RETRY_MAX_MS: u64 = 2_000;

/// What the worker does after a report's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportStep {
    /// The outcome is recorded: stop.
    Recorded,
    /// The store refused it for good (the lease is stale, the task cancelled or gone): stop.
    Refused,
    /// Refused transiently while the lease can still be live: send it again after `after_ms`,
    /// heartbeating meanwhile.
    Retry {
        /// Wait before the next try (ms).
        after_ms: u64,
    },
    /// Refused transiently, and the lease has certainly expired by now: stop; the reaper will
    /// count the attempt as failed and the task will run again.
    Expired,
}

/// The wait before try `tries + 1` of a refused report: `REPORT_RETRY_FIRST_MS × 2^tries`, at
/// most [`REPORT_RETRY_MAX_MS`], scaled into `[½, 1]` by `jitter_unit` (in `[0, 1)`) so that many
/// workers refused together do not retry in step.
pub fn report_retry_ms(tries: u32, jitter_unit: f64) -> u64 {
    let base = REPORT_RETRY_FIRST_MS
        .saturating_mul(1 << tries.min(16))
        .min(REPORT_RETRY_MAX_MS);
    let scale = 0.5 + 0.5 * jitter_unit.clamp(0.0, 1.0);
    ((base as f64) * scale).round().max(1.0) as u64
}

/// The step after a report's `reply`, its `tries`-th retry (0 for the first send), at local time
/// `now_ms`, for a lease that expires at `lease_deadline_ms` by the local clock (reckoned from
/// the store's own clock in the last lease or heartbeat reply, so it is never earlier than the
/// store's deadline).
pub fn report_step(
    reply: Result<(), &Error>,
    tries: u32,
    now_ms: u64,
    lease_deadline_ms: u64,
    jitter_unit: f64,
) -> ReportStep {
    match reply {
        Ok(()) => ReportStep::Recorded,
        Err(e) if !e.is_unavailable() => ReportStep::Refused,
        Err(_) if now_ms >= lease_deadline_ms => ReportStep::Expired,
        Err(_) => ReportStep::Retry {
            after_ms: report_retry_ms(tries, jitter_unit).min(lease_deadline_ms - now_ms),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::Transient;

    fn oom() -> Error {
        Error::Unavailable {
            op: "complete",
            cause: Transient::OutOfMemory,
            message: "OOM command not allowed".into(),
        }
    }

    // Goal: a transient refusal is retried while the lease lasts, with waits that double up to
    // the cap, never past the deadline; permanent answers and an expired lease end it.
    #[test]
    fn refused_reports_are_retried_while_the_lease_can_be_live() {
        assert_eq!(report_step(Ok(()), 3, 10, 5, 0.0), ReportStep::Recorded);
        let stale = Error::Stale {
            op: "complete",
            message: "token".into(),
        };
        assert_eq!(
            report_step(Err(&stale), 0, 0, 1_000, 0.0),
            ReportStep::Refused
        );
        let cancelled = Error::Cancelled { op: "fail" };
        assert_eq!(
            report_step(Err(&cancelled), 0, 0, 1_000, 0.0),
            ReportStep::Refused
        );
        let corrupt = Error::protocol("complete", "CORRUPT x");
        assert_eq!(
            report_step(Err(&corrupt), 0, 0, 1_000, 0.0),
            ReportStep::Refused
        );
        let lost = Error::unreachable("complete", "connection reset");
        for e in [oom(), lost] {
            assert_eq!(
                report_step(Err(&e), 0, 0, 30_000, 0.999_999),
                ReportStep::Retry { after_ms: 50 }
            );
            assert_eq!(
                report_step(Err(&e), 2, 0, 30_000, 0.999_999),
                ReportStep::Retry { after_ms: 200 }
            );
            assert_eq!(
                report_step(Err(&e), 20, 0, 30_000, 0.999_999),
                ReportStep::Retry { after_ms: 2_000 }
            );
            // Never waits past the deadline, and stops once it has passed.
            assert_eq!(
                report_step(Err(&e), 20, 29_900, 30_000, 0.999_999),
                ReportStep::Retry { after_ms: 100 }
            );
            assert_eq!(
                report_step(Err(&e), 1, 30_000, 30_000, 0.5),
                ReportStep::Expired
            );
        }
    }

    // Goal: jitter keeps every wait within [half, all] of the doubling backoff.
    #[test]
    fn retry_waits_are_jittered_within_half_of_the_backoff() {
        for tries in 0..12 {
            let full = report_retry_ms(tries, 0.999_999);
            let half = report_retry_ms(tries, 0.0);
            assert!(
                half * 2 >= full && half * 2 <= full + 1,
                "{tries}: {half} {full}"
            );
            assert!(full <= REPORT_RETRY_MAX_MS);
        }
    }
}
