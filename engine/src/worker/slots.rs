//! The handler slots of a lane: how many handlers run and how many slots lease calls in flight
//! have reserved, shared by the lease loop and the completer, with a wake-up for the lease loop
//! when a slot is given back.

use super::decide::reservable;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// The handler slots of a pool: how many handlers run, and a wake-up for the lease loop when one
/// returns. A task holds its slot from its lease until its handler returns, not until its outcome
/// is recorded, so the lease call that refills a slot overlaps the completion call of the task
/// that left it (both go over one multiplexed connection) instead of waiting for its reply. A
/// lease call reserves its slots before it is sent (`reserved` of the `running` ones), so the
/// lease loop and the completer never lease the same free slot twice.
#[derive(Default)]
pub(super) struct Slots {
    /// Slots taken: by running handlers and by reservations.
    pub(super) running: AtomicUsize,
    /// Of the taken slots, those reserved for lease calls in flight.
    reserved: AtomicUsize,
    /// Notified when a slot is given back (not quietly).
    pub(super) freed: Notify,
}

impl Slots {
    /// Handlers running: taken slots that are not reservations.
    pub(super) fn handlers(&self) -> usize {
        self.running
            .load(Ordering::SeqCst)
            .saturating_sub(self.reserved.load(Ordering::SeqCst))
    }
}

/// One taken slot; dropping it gives the slot back and wakes the lease loop. A reserved slot
/// (for a lease call in flight) becomes a handler's with [`Slot::assign`], or goes back quietly
/// with [`Slot::give_back`].
pub(super) struct Slot {
    slots: Arc<Slots>,
    reserved: bool,
    quiet: bool,
}

impl Slot {
    /// Take a slot for a handler, whether or not one is free (a task the store leased beyond
    /// the reservation still runs).
    pub(super) fn take(slots: &Arc<Slots>) -> Slot {
        slots.running.fetch_add(1, Ordering::SeqCst);
        Slot {
            slots: slots.clone(),
            reserved: false,
            quiet: false,
        }
    }

    /// Reserve up to `max` of the slots still free below `concurrency`, in one atomic step (so
    /// that the lease loop and the completer's rounds, which may run on different threads,
    /// never take the same free slot). May return none.
    pub(super) fn reserve(slots: &Arc<Slots>, max: usize, concurrency: usize) -> Vec<Slot> {
        let mut got = 0;
        let _ = slots
            .running
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |running| {
                got = reservable(concurrency, running, max);
                Some(running + got)
            });
        slots.reserved.fetch_add(got, Ordering::SeqCst);
        (0..got)
            .map(|_| Slot {
                slots: slots.clone(),
                reserved: true,
                quiet: false,
            })
            .collect()
    }

    /// A reserved slot now held by a running handler.
    pub(super) fn assign(mut self) -> Slot {
        if self.reserved {
            self.slots.reserved.fetch_sub(1, Ordering::SeqCst);
            self.reserved = false;
        }
        self
    }

    /// Give a slot back without waking the lease loop (a reservation the lease did not fill:
    /// the queue had no more ready work, so waking the loop would only poll it again).
    pub(super) fn give_back(mut self) {
        self.quiet = true;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.reserved {
            self.slots.reserved.fetch_sub(1, Ordering::SeqCst);
        }
        self.slots.running.fetch_sub(1, Ordering::SeqCst);
        if !self.quiet {
            self.slots.freed.notify_one();
        }
    }
}
