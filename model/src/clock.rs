//! The store's clock: where `TIME`, key expiry and stream IDs get the current time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The time source of a [`crate::MemoryStore`]: microseconds since the Unix epoch.
///
/// A script reads it once, when it starts: `TIME`, key expiry and `XADD *` IDs inside that script
/// all use that one reading (see [`crate::MemoryStore`]).
pub trait StoreClock: Send + Sync + 'static {
    /// Microseconds since the Unix epoch (the value Redis's `TIME` splits into seconds and
    /// microseconds).
    fn now_micros(&self) -> u64;
}

/// The operating system's wall clock (`SystemTime`), for the embedded store in production.
#[derive(Debug, Clone, Copy, Default)]
pub struct WallClock;

impl StoreClock for WallClock {
    fn now_micros(&self) -> u64 {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("system clock is before 1970");
        u64::try_from(since.as_micros()).expect("time fits u64 microseconds")
    }
}

/// A clock that moves only when told to: the simulator's virtual time, and the differential
/// tests' way of giving the model the exact time real Redis used. It may be set backwards (a
/// store clock jump); the store copes the way Redis does (stream IDs never go backwards).
#[derive(Debug, Default)]
pub struct ManualClock {
    micros: AtomicU64,
}

impl ManualClock {
    /// A clock reading `micros` microseconds since the Unix epoch.
    pub fn new(micros: u64) -> Self {
        ManualClock {
            micros: AtomicU64::new(micros),
        }
    }

    /// A clock reading `ms` milliseconds since the Unix epoch.
    pub fn from_ms(ms: u64) -> Self {
        Self::new(ms * 1000)
    }

    /// Set the time to `micros` microseconds since the Unix epoch.
    pub fn set_micros(&self, micros: u64) {
        self.micros.store(micros, Ordering::SeqCst);
    }

    /// Set the time to `ms` milliseconds since the Unix epoch (microseconds part 0).
    pub fn set_ms(&self, ms: u64) {
        self.set_micros(ms * 1000);
    }

    /// Move the time forward by `ms` milliseconds.
    pub fn advance_ms(&self, ms: u64) {
        self.micros.fetch_add(ms * 1000, Ordering::SeqCst);
    }

    /// The current reading in milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.now_micros() / 1000
    }
}

impl StoreClock for ManualClock {
    fn now_micros(&self) -> u64 {
        self.micros.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::from_ms(1_000);
        assert_eq!(c.now_micros(), 1_000_000);
        c.advance_ms(5);
        assert_eq!(c.now_ms(), 1_005);
        c.set_ms(10);
        assert_eq!(c.now_micros(), 10_000);
        c.set_micros(7);
        assert_eq!(c.now_micros(), 7);
    }

    #[test]
    fn wall_clock_is_after_2020() {
        assert!(WallClock.now_micros() > 1_577_836_800_000_000);
    }
}
