//! The per-tenant submit rate limit of one API process: a token bucket per tenant, across every
//! queue (a bucket per queue and tenant let a tenant multiply its rate by naming new queues), so
//! a flood of submits from one tenant is answered 429 with `Retry-After` before it reaches the
//! store, and other tenants' submits go on.
//!
//! This is a process-local guard against floods, not a quota: with several API processes each
//! applies it on its own. The store's own admission limit (a tenant's `max_queued`) is the
//! shared one. Hand-written rather than `governor` (0.10, evaluated): a batch that spans tenants
//! takes from several buckets all or none ([`SubmitLimiter::take_all`]), and `governor` can
//! neither check several keys at once nor give back what a check took, so a batch refused for
//! one tenant would still spend another's tokens. Its keyed table also grows until swept with
//! `retain_recent`, where this one is bounded at insertion ([`BUCKETS_MAX`]); and it reads time
//! from the state's [`Clock`], so tests drive it without sleeping.

use orq::Clock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Default sustained submit rate per tenant (all its queues together), tasks per second: above what one Redis
/// runs end to end (see docs/measurements.md), so it only stops floods.
pub const RATE_PER_S_DEFAULT: u64 = 10_000;
/// Default bucket size per tenant, tasks: twenty full batches at once.
pub const BURST_DEFAULT: u64 = 20_000;
/// Most tenant buckets kept. Beyond, full buckets (idle tenants) are dropped first; if every
/// bucket is in use, a new tenant is let through unmetered rather than evict a limited one.
pub const BUCKETS_MAX: usize = 100_000;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at_ms: u64,
}

/// Token buckets keyed by tenant. Cheap to clone (shared).
#[derive(Clone)]
pub struct SubmitLimiter {
    rate_per_s: u64,
    burst: u64,
    clock: Arc<dyn Clock>,
    buckets: Arc<Mutex<HashMap<String, Bucket>>>,
}

impl std::fmt::Debug for SubmitLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubmitLimiter")
            .field("rate_per_s", &self.rate_per_s)
            .field("burst", &self.burst)
            .finish()
    }
}

impl SubmitLimiter {
    /// A limiter of `rate_per_s` tasks per second with buckets of `burst` tasks, on `clock`.
    ///
    /// # Panics
    /// When `rate_per_s` or `burst` is 0 (the command line checks them first).
    pub fn new(rate_per_s: u64, burst: u64, clock: Arc<dyn Clock>) -> Self {
        assert!(
            rate_per_s > 0 && burst > 0,
            "rate and burst must be positive"
        );
        SubmitLimiter {
            rate_per_s,
            burst,
            clock,
            buckets: Arc::default(),
        }
    }

    /// The sustained rate, tasks per second.
    pub fn rate_per_s(&self) -> u64 {
        self.rate_per_s
    }

    /// The bucket size, tasks.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// Take `n` tokens from the bucket of `tenant`: `Ok` when they were there (and are now
    /// spent), else `Err(ms)` until they will be, with nothing spent. A request of more than the
    /// burst can never pass: `Err` with the time a full bucket takes.
    pub fn take(&self, tenant: &str, n: u64) -> Result<(), u64> {
        self.take_all(&[(tenant, n)])
    }

    /// Take tokens from several buckets at once, all or none (a batch that spans tenants):
    /// `Err` with the longest wait among the buckets short of tokens.
    pub fn take_all(&self, wants: &[(&str, u64)]) -> Result<(), u64> {
        let now = self.clock.now_ms();
        let (rate, burst) = (self.rate_per_s as f64, self.burst as f64);
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let mut wait_ms = 0u64;
        let mut keys = Vec::with_capacity(wants.len());
        for &(tenant, n) in wants {
            let key = tenant.to_string();
            if !buckets.contains_key(&key) && buckets.len() >= BUCKETS_MAX {
                buckets.retain(|_, b| refilled(b, now, rate, burst) < burst);
                if buckets.len() >= BUCKETS_MAX {
                    continue; // unmetered: see BUCKETS_MAX
                }
            }
            let b = buckets.entry(key.clone()).or_insert(Bucket {
                tokens: burst,
                at_ms: now,
            });
            // Refilling is the same whenever it is done, so it is stored even when the take
            // is refused.
            b.tokens = refilled(b, now, rate, burst);
            b.at_ms = b.at_ms.max(now);
            let want = n as f64;
            if b.tokens < want {
                let missing = if want > burst { burst } else { want - b.tokens };
                wait_ms = wait_ms.max(((missing / rate * 1000.0).ceil() as u64).max(1));
            }
            keys.push((key, want));
        }
        if wait_ms > 0 {
            return Err(wait_ms);
        }
        for (key, want) in keys {
            if let Some(b) = buckets.get_mut(&key) {
                b.tokens -= want;
            }
        }
        Ok(())
    }
}

/// The tokens of `b` at `now_ms` (a clock that steps back refills nothing).
fn refilled(b: &Bucket, now_ms: u64, rate_per_s: f64, burst: f64) -> f64 {
    let elapsed_ms = now_ms.saturating_sub(b.at_ms) as f64;
    (b.tokens + elapsed_ms * rate_per_s / 1000.0).min(burst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[derive(Debug, Default)]
    struct ManualClock(AtomicU64);
    impl Clock for ManualClock {
        fn now_ms(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
        fn sleep(&self, _ms: u64) -> futures_util::future::BoxFuture<'static, ()> {
            Box::pin(std::future::ready(()))
        }
    }

    // Goal: a bucket lets `burst` through at once, then refills at the rate; other tenants have
    // their own buckets; the wait it answers is when the tokens will be there.
    #[test]
    fn bucket_allows_burst_then_rate_per_tenant() {
        let clock = Arc::new(ManualClock::default());
        clock.0.store(1_000_000, Ordering::SeqCst);
        let l = SubmitLimiter::new(10, 5, clock.clone());
        for _ in 0..5 {
            assert_eq!(l.take("a", 1), Ok(()));
        }
        assert_eq!(l.take("a", 1), Err(100), "one token every 100 ms");
        assert_eq!(l.take("a", 3), Err(300));
        assert_eq!(l.take("b", 5), Ok(()), "another tenant");
        clock.0.fetch_add(250, Ordering::SeqCst);
        assert_eq!(l.take("a", 2), Ok(()));
        assert_eq!(l.take("a", 1), Err(50), "half a token left");
        assert_eq!(l.take("a", 6), Err(500), "more than the burst");
        clock.0.fetch_add(10_000, Ordering::SeqCst);
        assert_eq!(l.take("a", 5), Ok(()), "refilled to the burst, not beyond");
        assert_eq!(l.take("a", 1), Err(100));
        // All or none across buckets.
        assert_eq!(l.take_all(&[("c", 5), ("a", 1)]), Err(100));
        assert_eq!(l.take("c", 5), Ok(()), "nothing was spent from c");
    }

    // Goal: a refused take spends nothing, and a clock stepping back refills nothing.
    #[test]
    fn refused_takes_spend_nothing_and_time_going_back_refills_nothing() {
        let clock = Arc::new(ManualClock::default());
        clock.0.store(5_000, Ordering::SeqCst);
        let l = SubmitLimiter::new(1, 2, clock.clone());
        assert_eq!(l.take("a", 2), Ok(()));
        clock.0.store(1_000, Ordering::SeqCst);
        assert!(l.take("a", 1).is_err());
        clock.0.store(6_000, Ordering::SeqCst);
        assert_eq!(l.take("a", 1), Ok(()));
        assert!(l.take("a", 1).is_err());
    }
}
