//! Time and randomness, passed in so that the simulator can substitute a virtual clock and a
//! seeded random source.

use futures::future::BoxFuture;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha12Rng;
use std::sync::Mutex;
use std::time::Duration;

/// A worker-side clock. Decides only local things (ULID timestamps, when to heartbeat, when to
/// give up on a handler); the store's clock decides run-at times and lease deadlines.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch by this clock.
    fn now_ms(&self) -> u64;
    /// A future that completes after `ms` milliseconds by this clock.
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()>;
}

/// The machine's clock: `SystemTime` for timestamps, tokio's timer for sleeps.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }

    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(Duration::from_millis(ms)))
    }
}

/// A source of random values (ULID bits, lease-token bits, jitter draws): ChaCha12 seeded from the
/// OS in production or from a fixed seed in simulation.
#[derive(Debug)]
pub struct Entropy(Mutex<ChaCha12Rng>);

impl Entropy {
    /// Seeded from the operating system.
    pub fn from_os() -> Self {
        let mut seed = [0u8; 32];
        rand::fill(&mut seed);
        Entropy(Mutex::new(ChaCha12Rng::from_seed(seed)))
    }

    /// Seeded from `seed`: the same seed gives the same sequence.
    pub fn from_seed(seed: u64) -> Self {
        Entropy(Mutex::new(ChaCha12Rng::seed_from_u64(seed)))
    }

    fn with<T>(&self, f: impl FnOnce(&mut ChaCha12Rng) -> T) -> T {
        let mut rng = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut rng)
    }

    /// A uniform `u64`.
    pub fn next_u64(&self) -> u64 {
        self.with(|r| r.random())
    }

    /// A uniform `u128` (ULID random bits).
    pub fn next_u128(&self) -> u128 {
        self.with(|r| r.random())
    }

    /// A uniform draw in `[0, 1)` (jitter).
    pub fn unit(&self) -> f64 {
        self.with(|r| r.random::<f64>())
    }

    /// 16 lowercase hex digits (lease-token bits).
    pub fn token_bits(&self) -> String {
        format!("{:016x}", self.next_u64())
    }

    /// A new ULID with this clock's time and this source's random bits.
    pub fn ulid(&self, now_ms: u64) -> ulid::Ulid {
        ulid::Ulid::from_parts(now_ms, self.next_u128())
    }
}
