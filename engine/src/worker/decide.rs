//! The lease loop's decisions, as plain functions of counts, times and settings: how a pool's
//! slots are split into lanes, how many slots are free, whether a lane stands back for the
//! completer or lingers for more free slots, when the queue list is read again, how long an idle
//! lane waits, when a refused queue is asked again, and a lease's deadline by the local clock.
//! The async loop (`lane`) only sequences I/O around them; the tests below pin each one down as a
//! table of inputs and decisions.

use super::{LANES_MAX, LANE_IDLE_FACTOR, LEASE_REFUSED_BACKOFF_MS_MAX, WAKE_IDLE_POLL_MS};
use crate::ops::LEASE_BATCH_MAX;
use std::collections::HashMap;

/// How many lanes a pool runs: `lanes` within 1..=[`LANES_MAX`], and at most `concurrency` (so
/// each lane has a slot).
pub(super) fn lane_count(lanes: usize, concurrency: usize) -> usize {
    lanes.clamp(1, LANES_MAX).min(concurrency.max(1))
}

/// Lane `lane`'s share of a pool's `concurrency` slots split over `lanes` lanes:
/// `concurrency / lanes`, the first `concurrency % lanes` lanes one more.
pub(super) fn lane_concurrency(concurrency: usize, lanes: usize, lane: usize) -> usize {
    concurrency / lanes + usize::from(lane < concurrency % lanes)
}

/// The slots a lane of `concurrency` may lease for now, with `running` slots taken (handlers and
/// reservations) and `in_flight` tasks not yet finished (running, or reporting their outcome):
/// the free slots, but no more than keeps the tasks in flight at `2 × concurrency`, so a store
/// that stops taking outcomes cannot pile up leased work.
pub(super) fn free_slots(concurrency: usize, running: usize, in_flight: usize) -> usize {
    concurrency
        .saturating_sub(running)
        .min((2 * concurrency).saturating_sub(in_flight))
}

/// How many of `max` slots a reservation takes when `running` of `concurrency` are taken.
pub(super) fn reservable(concurrency: usize, running: usize, max: usize) -> usize {
    concurrency.saturating_sub(running).min(max)
}

/// How many tasks one lease call asks for with `free` slots: at most [`LEASE_BATCH_MAX`].
pub(super) fn lease_ask(free: usize) -> usize {
    free.min(LEASE_BATCH_MAX)
}

/// Whether the lane leaves its free slots to the completer for now: the completer refills them
/// (`refilling`: one queue with ready work) and completions are on their way to it (`in_flight`
/// tasks beyond the `handlers` running are reporting their outcome). Once none are, the lane
/// leases itself, so slots freed by failures or long handlers never wait for a success.
pub(super) fn stands_back(in_flight: usize, handlers: usize, refilling: bool) -> bool {
    in_flight.saturating_sub(handlers) > 0 && refilling
}

/// The longest a lane stands back in a row (ms): the linger plus an idle poll (at least 1 ms), so
/// a completion call that hangs does not hold the free slots.
pub(super) fn stand_back_ms(linger_ms: u64, idle_poll_ms: u64) -> u64 {
    linger_ms + idle_poll_ms.max(1)
}

/// Whether the lane lingers before it leases ([`super::WorkerConfig::lease_linger_ms`]): it is
/// busy (its last round leased work, `idle` false), lingering is on, and some of its
/// `concurrency` slots are still taken (`running` > 0, `free` < `concurrency`), so waiting a
/// moment lets the next call carry more tasks.
pub(super) fn lingers(
    idle: bool,
    linger_ms: u64,
    free: usize,
    concurrency: usize,
    running: usize,
) -> bool {
    !idle && linger_ms > 0 && free < concurrency && running > 0
}

/// The idle poll (ms): `idle_poll_ms`, or at least [`WAKE_IDLE_POLL_MS`] when the store gives
/// wake-ups (`wakeups`), since a wake-up makes the lane ask at once.
pub(super) fn poll_ms(idle_poll_ms: u64, wakeups: bool) -> u64 {
    if wakeups {
        idle_poll_ms.max(WAKE_IDLE_POLL_MS)
    } else {
        idle_poll_ms
    }
}

/// How old (ms) the list of queues may get before a pool serving every queue reads it again:
/// one poll (`poll_ms`) while `idle`, `idle_poll_ms × 20` while busy.
pub(super) fn queue_refresh_ms(idle: bool, idle_poll_ms: u64, poll_ms: u64) -> u64 {
    if idle {
        poll_ms
    } else {
        idle_poll_ms.saturating_mul(20)
    }
}

/// Whether the lane reads the list of queues now (local time `now_ms`): only a pool serving
/// every queue (`serve_all`) does, when it knows none (`known` = 0) or the list it read at
/// `refreshed_ms` is `refresh_ms` old.
pub(super) fn refresh_queues(
    serve_all: bool,
    known: usize,
    now_ms: u64,
    refreshed_ms: u64,
    refresh_ms: u64,
) -> bool {
    serve_all && (known == 0 || now_ms.saturating_sub(refreshed_ms) >= refresh_ms)
}

/// Whether a lease reply (store time `store_now_ms`, next due `next_ms`) left ready work.
pub(super) fn ready_work_left(store_now_ms: u64, next_ms: Option<u64>) -> bool {
    next_ms == Some(store_now_ms)
}

/// Whether the completer refills the slots of a queue whose lease reply left ready work
/// (`ready`): only when it is the pool's only queue (`queues` = 1); with several, the lease
/// loop's rotation keeps them fair.
pub(super) fn refills(ready: bool, queues: usize) -> bool {
    ready && queues == 1
}

/// The idle wait `wait_ms` shortened to when a lease reply (store time `store_now_ms`) says the
/// next task is due (`next_ms`, by the store's clock).
pub(super) fn wait_until_due(wait_ms: u64, store_now_ms: u64, next_ms: Option<u64>) -> u64 {
    match next_ms {
        Some(next) => wait_ms.min(next.saturating_sub(store_now_ms)),
        None => wait_ms,
    }
}

/// How long lane `lane` sleeps after a round that leased nothing (ms, at least 1), given the
/// round's `wait_ms`: a lane other than the first waits [`LANE_IDLE_FACTOR`] idle polls while the
/// first lane polls too (`first_polling`) and nothing is due sooner than an idle poll, since the
/// first lane's polls find new work and wake it; so a pool of lanes asks an idle store about as
/// often as one lane does.
pub(super) fn idle_wait_ms(
    lane: usize,
    wait_ms: u64,
    idle_poll_ms: u64,
    first_polling: bool,
) -> u64 {
    let wait = if lane > 0 && wait_ms >= idle_poll_ms && first_polling {
        wait_ms.max(idle_poll_ms.saturating_mul(LANE_IDLE_FACTOR))
    } else {
        wait_ms
    };
    wait.max(1)
}

/// Whether the first lane, after a round that left work (`more`) or not with `free` slots free,
/// waits for the store's wake-ups with free slots: a round that left no work ends in the idle
/// wait, and its free slots stay free (the completer refills only a queue with work left).
pub(super) fn first_lane_listens(more: bool, free: usize) -> bool {
    !more && free > 0
}

/// Whether lane `lane` lets a wake-up of the store pass while the first lane listens for it
/// (`first_listens`, [`first_lane_listens`]): the first lane leases on it and, if its round
/// leaves work, wakes the others; so one wake-up costs one lease call, not one per lane.
pub(super) fn leaves_wake_up(lane: usize, first_listens: bool) -> bool {
    lane > 0 && first_listens
}

/// A lease's deadline by the local clock (ms): `local_ms` (taken just before the call that leased
/// or extended it) plus the time left by the store's clock (`expires_at_ms − store_now_ms`);
/// `local_ms` when there is no lease.
pub(super) fn local_deadline_ms(
    local_ms: u64,
    store_now_ms: u64,
    expires_at_ms: Option<u64>,
) -> u64 {
    expires_at_ms
        .map(|e| local_ms + e.saturating_sub(store_now_ms))
        .unwrap_or(local_ms)
}

/// The wait before the next lease call on a queue whose last `refusals` calls in a row were
/// refused: `idle_poll_ms × 2^(refusals − 1)`, at most [`LEASE_REFUSED_BACKOFF_MS_MAX`].
pub fn lease_refused_backoff_ms(idle_poll_ms: u64, refusals: u32) -> u64 {
    let doublings = refusals.saturating_sub(1).min(16);
    idle_poll_ms
        .max(1)
        .saturating_mul(1 << doublings)
        .min(LEASE_REFUSED_BACKOFF_MS_MAX)
}

/// The queues of a lane whose lease calls were refused (not a store outage: corrupt or foreign
/// state in their keys): refusals in a row, and the local time (ms) before which the queue is
/// not asked again. Only looked up, never iterated (so its order cannot reach the simulator).
#[derive(Debug, Default)]
pub(super) struct Refused(HashMap<String, (u32, u64)>);

impl Refused {
    /// Whether `queue` is still waiting out a refusal at local time `now_ms`.
    pub(super) fn waiting(&self, queue: &str, now_ms: u64) -> bool {
        self.0.get(queue).is_some_and(|&(_, until)| now_ms < until)
    }

    /// A lease call on `queue` was answered: its refusals are forgotten.
    pub(super) fn answered(&mut self, queue: &str) {
        self.0.remove(queue);
    }

    /// A lease call on `queue` was refused at local time `now_ms`: returns the refusals in a row
    /// and the wait before it is asked again ([`lease_refused_backoff_ms`]).
    pub(super) fn refused(&mut self, queue: &str, now_ms: u64, idle_poll_ms: u64) -> (u32, u64) {
        let refusals = self.0.get(queue).map_or(0, |r| r.0) + 1;
        let wait = lease_refused_backoff_ms(idle_poll_ms, refusals);
        self.0.insert(queue.to_string(), (refusals, now_ms + wait));
        (refusals, wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a queue whose lease calls are refused is asked again after a wait that doubles from
    // the idle poll and stops growing at the cap, so a corrupt queue is never polled in a loop.
    #[test]
    fn refused_lease_backoff_doubles_up_to_its_cap() {
        let waits: Vec<u64> = (1..=9).map(|n| lease_refused_backoff_ms(100, n)).collect();
        assert_eq!(
            waits,
            [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000],
            "doubling from idle_poll_ms, capped"
        );
        assert_eq!(lease_refused_backoff_ms(0, 1), 1, "never zero");
        assert_eq!(
            lease_refused_backoff_ms(100, u32::MAX),
            LEASE_REFUSED_BACKOFF_MS_MAX
        );
    }

    // Goal: a pool's slots are split over its lanes without losing or inventing one, the lane
    // count stays within 1..=LANES_MAX and never exceeds the slots.
    #[test]
    fn lanes_split_the_pool_slots() {
        // (lanes asked, concurrency) -> lanes run
        for (lanes, concurrency, want) in [
            (0, 8, 1),
            (1, 8, 1),
            (2, 8, 2),
            (3, 2, 2),
            (2, 0, 1),
            (100, 100, LANES_MAX),
        ] {
            assert_eq!(
                lane_count(lanes, concurrency),
                want,
                "lane_count({lanes}, {concurrency})"
            );
        }
        // (concurrency, lanes) -> each lane's share
        for (concurrency, lanes, want) in [
            (8, 2, vec![4, 4]),
            (7, 3, vec![3, 2, 2]),
            (2, 2, vec![1, 1]),
            (50, 16, [vec![4, 4], vec![3; 14]].concat()),
        ] {
            let shares: Vec<usize> = (0..lanes)
                .map(|i| lane_concurrency(concurrency, lanes, i))
                .collect();
            assert_eq!(shares, want, "lane_concurrency({concurrency}, {lanes}, _)");
            assert_eq!(shares.iter().sum::<usize>(), concurrency);
        }
    }

    // Goal: a lane leases only into slots no handler or reservation holds, and stops leasing
    // while twice its concurrency of tasks are in flight (a store that takes no outcomes).
    #[test]
    fn free_slots_bound_running_and_reporting_tasks() {
        // (concurrency, running, in_flight) -> free
        for (c, running, in_flight, want) in [
            (8, 0, 0, 8),
            (8, 3, 3, 5),
            (8, 8, 8, 0),
            (8, 9, 9, 0),
            (8, 0, 16, 0),
            (8, 2, 14, 2),
            (8, 2, 12, 4),
            (8, 2, 11, 5),
            (0, 0, 0, 0),
        ] {
            assert_eq!(
                free_slots(c, running, in_flight),
                want,
                "free_slots({c}, {running}, {in_flight})"
            );
        }
        // (concurrency, running, max) -> reserved
        for (c, running, max, want) in
            [(8, 0, 100, 8), (8, 6, 100, 2), (8, 9, 100, 0), (8, 0, 3, 3)]
        {
            assert_eq!(
                reservable(c, running, max),
                want,
                "reservable({c}, {running}, {max})"
            );
        }
        assert_eq!(lease_ask(3), 3);
        assert_eq!(lease_ask(LEASE_BATCH_MAX + 5), LEASE_BATCH_MAX);
    }

    // Goal: the lane stands back for the completer only while it refills and completions are
    // on their way, for a bounded time; it lingers only when busy with some slots still taken.
    #[test]
    fn standing_back_and_lingering() {
        // (in_flight, handlers, refilling) -> stands back
        for (in_flight, handlers, refilling, want) in [
            (5, 3, true, true),
            (5, 3, false, false),
            (3, 3, true, false),
            (2, 3, true, false),
            (0, 0, true, false),
        ] {
            assert_eq!(
                stands_back(in_flight, handlers, refilling),
                want,
                "stands_back({in_flight}, {handlers}, {refilling})"
            );
        }
        assert_eq!(stand_back_ms(1, 100), 101);
        assert_eq!(stand_back_ms(0, 0), 1, "never zero");
        // (idle, linger_ms, free, concurrency, running) -> lingers
        for (idle, linger, free, c, running, want) in [
            (false, 1, 3, 8, 5, true),
            (true, 1, 3, 8, 5, false),
            (false, 0, 3, 8, 5, false),
            (false, 1, 8, 8, 0, false),
            (false, 1, 3, 8, 0, false),
        ] {
            assert_eq!(
                lingers(idle, linger, free, c, running),
                want,
                "lingers({idle}, {linger}, {free}, {c}, {running})"
            );
        }
    }

    // Goal: the idle poll stretches to WAKE_IDLE_POLL_MS with wake-ups, the queue list is read
    // again when none is known or it is a poll old (idle) or twenty idle polls old (busy), and
    // only by a pool serving every queue.
    #[test]
    fn idle_poll_and_queue_list_refresh() {
        assert_eq!(poll_ms(100, false), 100);
        assert_eq!(poll_ms(100, true), WAKE_IDLE_POLL_MS);
        assert_eq!(poll_ms(WAKE_IDLE_POLL_MS + 1, true), WAKE_IDLE_POLL_MS + 1);
        assert_eq!(queue_refresh_ms(true, 100, 5_000), 5_000);
        assert_eq!(queue_refresh_ms(false, 100, 5_000), 2_000);
        assert_eq!(queue_refresh_ms(false, u64::MAX, 5_000), u64::MAX);
        // (serve_all, known, now, refreshed, refresh_ms) -> read again
        for (all, known, now, at, every, want) in [
            (false, 0, 0, 0, 100, false),
            (true, 0, 0, 0, 100, true),
            (true, 2, 50, 0, 100, false),
            (true, 2, 100, 0, 100, true),
            (true, 2, 0, 50, 100, false),
        ] {
            assert_eq!(
                refresh_queues(all, known, now, at, every),
                want,
                "refresh_queues({all}, {known}, {now}, {at}, {every})"
            );
        }
    }

    // Goal: a lease reply that says when work is due shortens the idle wait to it; the
    // completer refills only a lone queue with ready work left.
    #[test]
    fn lease_reply_decides_refill_and_wait() {
        assert!(ready_work_left(10, Some(10)));
        assert!(!ready_work_left(10, Some(11)));
        assert!(!ready_work_left(10, None));
        assert!(refills(true, 1));
        assert!(
            !refills(true, 2),
            "several queues: the rotation keeps them fair"
        );
        assert!(!refills(false, 1));
        // (wait, store_now, next) -> wait
        for (wait, now, next, want) in [
            (100, 10, None, 100),
            (100, 10, Some(50), 40),
            (100, 10, Some(500), 100),
            (100, 10, Some(10), 0),
            (100, 10, Some(5), 0),
        ] {
            assert_eq!(
                wait_until_due(wait, now, next),
                want,
                "wait_until_due({wait}, {now}, {next:?})"
            );
        }
    }

    // Goal: only a lane other than the first, while the first polls and nothing is due sooner,
    // waits LANE_IDLE_FACTOR idle polls; no wait is zero.
    #[test]
    fn idle_lanes_other_than_the_first_poll_less() {
        // (lane, wait, idle_poll, first_polling) -> sleep
        for (lane, wait, poll, first, want) in [
            (0, 100, 100, true, 100),
            (1, 100, 100, true, 100 * LANE_IDLE_FACTOR),
            (1, 100, 100, false, 100),
            (1, 40, 100, true, 40),
            (1, 5_000, 100, true, 5_000),
            (0, 0, 100, true, 1),
            (1, 0, 0, true, 1),
        ] {
            assert_eq!(
                idle_wait_ms(lane, wait, poll, first),
                want,
                "idle_wait_ms({lane}, {wait}, {poll}, {first})"
            );
        }
    }

    // Goal: one wake-up of the store costs one lease call: while the first lane listens (its
    // last round left no work), the other lanes let wake-ups pass; while it is busy, they lease
    // on them themselves.
    #[test]
    fn only_the_first_lane_answers_a_wake_up_while_it_listens() {
        assert!(first_lane_listens(false, 1));
        assert!(
            !first_lane_listens(true, 1),
            "a round that left work leases again"
        );
        assert!(
            !first_lane_listens(false, 0),
            "a full first lane cannot take the next task: the others must"
        );
        assert!(leaves_wake_up(1, first_lane_listens(false, 1)));
        assert!(!leaves_wake_up(1, first_lane_listens(true, 1)));
        assert!(!leaves_wake_up(1, first_lane_listens(false, 0)));
        assert!(
            !leaves_wake_up(0, true),
            "the first lane answers its wake-ups"
        );
        assert!(!leaves_wake_up(0, false));
    }

    // Goal: the local deadline is the local time of the call plus what the store says is left,
    // never less than the local time (a lease that expired by the store's clock).
    #[test]
    fn local_deadline_from_store_times() {
        assert_eq!(local_deadline_ms(1_000, 50, Some(30_050)), 31_000);
        assert_eq!(local_deadline_ms(1_000, 50, Some(40)), 1_000);
        assert_eq!(local_deadline_ms(1_000, 50, None), 1_000);
    }

    // Goal: a refused queue is skipped until its backoff is over, the backoff doubles with
    // refusals in a row, and an answered call forgets them.
    #[test]
    fn refused_queues_wait_out_their_backoff() {
        let mut r = Refused::default();
        assert!(!r.waiting("q", 0));
        assert_eq!(r.refused("q", 1_000, 100), (1, 100));
        assert!(r.waiting("q", 1_099));
        assert!(!r.waiting("q", 1_100));
        assert!(!r.waiting("other", 1_000), "per queue");
        assert_eq!(r.refused("q", 1_100, 100), (2, 200));
        assert!(r.waiting("q", 1_299));
        r.answered("q");
        assert!(!r.waiting("q", 1_100));
        assert_eq!(r.refused("q", 2_000, 100), (1, 100), "counted from 1 again");
    }
}
