//! The lease loop's stand-back wait: while the completer refills the slots, the loop leaves the
//! free slots to it, for at most one timer in a row. Once the timer has run out the loop leases
//! itself, until the completer hands over a refill (it is alive and refilling again: the wait
//! starts anew) or the loop no longer stands back.

use futures::future::BoxFuture;

/// The state of one lane's stand-back wait ([`super::lane::Lane`]).
#[derive(Default)]
pub(super) struct StandBack {
    /// The timer that bounds the wait, set when the loop began to stand back.
    timer: Option<BoxFuture<'static, ()>>,
    /// The timer ran out: the loop leases itself until a refill or the end of the wait.
    ran_out: bool,
}

impl StandBack {
    /// The timer to wait on this round, or `None` when the loop leases itself. `stands_back` is
    /// [`super::decide::stands_back`]'s answer for this round (false ends the wait); `arm` makes
    /// the timer when the wait begins (called at most once a wait).
    pub(super) fn timer(
        &mut self,
        stands_back: bool,
        arm: impl FnOnce() -> BoxFuture<'static, ()>,
    ) -> Option<&mut BoxFuture<'static, ()>> {
        if !stands_back {
            *self = StandBack::default();
            return None;
        }
        if self.ran_out {
            return None;
        }
        Some(self.timer.get_or_insert_with(arm))
    }

    /// The timer [`StandBack::timer`] gave ran out: the loop leases itself from now on.
    pub(super) fn ran_out(&mut self) {
        self.ran_out = true;
    }

    /// The completer handed over a refill: it is alive and refilling, so a wait whose timer ran
    /// out is over and the next one starts with a fresh timer. Without this, a lane whose timer
    /// once ran out (one slow completion call) kept leasing for itself while completions were
    /// always in flight, and its completer, finding no free slot, completed without leasing: two
    /// calls where one does (docs/measurements.md, 2026-12-04).
    pub(super) fn refilled(&mut self) {
        *self = StandBack::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// `sb.timer(stands_back, …)`: whether it gave a timer, and whether it armed a new one.
    fn round(sb: &mut StandBack, stands_back: bool) -> (bool, bool) {
        let armed = Cell::new(false);
        let waits = sb
            .timer(stands_back, || {
                armed.set(true);
                Box::pin(std::future::pending())
            })
            .is_some();
        (waits, armed.get())
    }

    #[test]
    fn the_wait_arms_one_timer_and_ends_when_the_loop_no_longer_stands_back() {
        let mut sb = StandBack::default();
        assert_eq!(round(&mut sb, false), (false, false), "no wait, no timer");
        assert_eq!(
            round(&mut sb, true),
            (true, true),
            "the wait begins: a timer"
        );
        assert_eq!(
            round(&mut sb, true),
            (true, false),
            "the same timer goes on"
        );
        assert_eq!(round(&mut sb, false), (false, false), "the wait is over");
        assert_eq!(
            round(&mut sb, true),
            (true, true),
            "a new wait, a new timer"
        );
    }

    #[test]
    fn a_timer_that_ran_out_lets_the_loop_lease_until_the_wait_ends() {
        let mut sb = StandBack::default();
        assert_eq!(round(&mut sb, true), (true, true));
        sb.ran_out();
        for _ in 0..3 {
            assert_eq!(
                round(&mut sb, true),
                (false, false),
                "leases itself, no timer"
            );
        }
        assert_eq!(round(&mut sb, false), (false, false));
        assert_eq!(round(&mut sb, true), (true, true), "stands back again");
    }

    #[test]
    fn a_refill_after_the_timer_ran_out_starts_a_new_wait() {
        let mut sb = StandBack::default();
        assert_eq!(round(&mut sb, true), (true, true));
        sb.ran_out();
        assert_eq!(round(&mut sb, true), (false, false), "the timer ran out");
        sb.refilled();
        assert_eq!(
            round(&mut sb, true),
            (true, true),
            "the completer refills again: the loop stands back, with a fresh timer"
        );
        assert_eq!(round(&mut sb, true), (true, false));
    }

    #[test]
    fn a_refill_during_a_wait_restarts_its_timer() {
        let mut sb = StandBack::default();
        assert_eq!(round(&mut sb, true), (true, true));
        sb.refilled();
        assert_eq!(
            round(&mut sb, true),
            (true, true),
            "bounded from the refill on"
        );
    }
}
