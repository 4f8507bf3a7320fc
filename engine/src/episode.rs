//! A run of transient store failures ([`crate::failure`]) met by one loop — a worker lane's lease
//! calls, the scheduler's passes: logged once when it starts and once when it ends (not once per
//! call), with a wait before the next try that doubles while it lasts, so an OOM episode or a
//! failover neither floods the log nor hammers a store that is refusing, and work resumes within
//! [`EPISODE_RETRY_MAX_MS`] of its end.

/// First wait after a transient failure (ms).
pub const EPISODE_RETRY_FIRST_MS: u64 = 100;
/// Longest wait between tries during an episode (ms): the most a loop lags behind the store's
/// recovery.
pub const EPISODE_RETRY_MAX_MS: u64 = 2_000;

/// The episode a loop is in, if any: failures in a row and when the first came (ms, local).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Episode {
    failures: u32,
    started_ms: u64,
}

/// What [`Episode::failed`] tells the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Wait before the next try (ms).
    pub wait_ms: u64,
    /// This failure began the episode: log it (later ones are quiet).
    pub started: bool,
}

impl Episode {
    /// A transient failure at local time `now_ms`: the wait doubles from
    /// [`EPISODE_RETRY_FIRST_MS`] with each failure in a row, up to [`EPISODE_RETRY_MAX_MS`].
    pub fn failed(&mut self, now_ms: u64) -> Retry {
        let started = self.failures == 0;
        if started {
            self.started_ms = now_ms;
        }
        let wait_ms = EPISODE_RETRY_FIRST_MS
            .saturating_mul(1 << self.failures.min(16))
            .min(EPISODE_RETRY_MAX_MS);
        self.failures = self.failures.saturating_add(1);
        Retry { wait_ms, started }
    }

    /// A success at `now_ms`: when it ends an episode, the failures it held and how long it
    /// lasted (ms), to log once.
    pub fn recovered(&mut self, now_ms: u64) -> Option<(u32, u64)> {
        if self.failures == 0 {
            return None;
        }
        let ended = (self.failures, now_ms.saturating_sub(self.started_ms));
        *self = Episode::default();
        Some(ended)
    }

    /// Failures in a row so far (0: no episode).
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: an episode is reported at its first failure only, waits double to the cap, and a
    // success ends it once with its length.
    #[test]
    fn an_episode_is_logged_at_its_start_and_end_only() {
        let mut e = Episode::default();
        assert_eq!(e.recovered(5), None);
        let waits: Vec<Retry> = (0..7).map(|i| e.failed(1_000 + i * 10)).collect();
        assert!(waits[0].started);
        assert!(waits[1..].iter().all(|b| !b.started));
        let ms: Vec<u64> = waits.iter().map(|b| b.wait_ms).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1_600, 2_000, 2_000]);
        assert_eq!(e.failures(), 7);
        assert_eq!(e.recovered(3_500), Some((7, 2_500)));
        assert_eq!(e.recovered(3_600), None);
        assert!(
            e.failed(4_000).started,
            "a new episode starts after a recovery"
        );
    }
}
