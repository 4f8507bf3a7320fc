//! Failed attempts in a row to connect to one place (a server, the primary the sentinels name,
//! the wake-up subscriber's node), as one episode ([`crate::episode`]): a warning when it begins
//! and an info line when it ends, never one per attempt; between attempts a wait that doubles
//! from [`crate::episode::EPISODE_RETRY_FIRST_MS`] to [`EPISODE_RETRY_MAX_MS`], jittered into `[½, 1]` so that
//! many processes do not reconnect in step; and during the wait, calls fail at once with the
//! last attempt's error instead of connecting again. No failure is kept for good: a refused
//! password, a server that is down and a timeout are all tried again after the wait, so the
//! store recovers as soon as the server (or its credentials) work again (issue 42, item 10).

use super::resp::error_reply;
use crate::episode::{Episode, EPISODE_RETRY_MAX_MS};
use crate::failure::Transient;
use crate::resp::Resp;
use redis::RedisError;
use std::time::{Duration, Instant};

/// An episode of failed connection attempts (none: the last attempt worked, or none failed).
#[derive(Default)]
pub(super) struct Outage {
    episode: Episode,
    /// When the episode began.
    since: Option<Instant>,
    /// The last attempt's error, and until when calls fail with it instead of trying again.
    hold: Option<(RedisError, Instant)>,
}

impl Outage {
    /// The error to fail a call with at once, while the wait after a failed attempt lasts.
    pub fn holding(&self, now: Instant) -> Option<RedisError> {
        self.hold
            .as_ref()
            .filter(|(_, until)| now < *until)
            .map(|(e, _)| e.clone())
    }

    /// An attempt to connect to `what` (a name for people, never a URL) failed with `e` at
    /// `now`: the wait before the next attempt. Logs a warning when this begins the episode.
    pub fn failed(&mut self, now: Instant, what: &str, e: &RedisError) -> Duration {
        let since = *self.since.get_or_insert(now);
        let retry = self
            .episode
            .failed(now.duration_since(since).as_millis() as u64);
        let wait = Duration::from_millis(jittered(retry.wait_ms, rand::random::<f64>()));
        if retry.started {
            let cause = cause(e);
            tracing::warn!(
                at = what,
                error = %e,
                "cannot connect to {what}: the store {} ({cause}); trying again every {} ms at \
                 most, and saying so once it works",
                cause.describe(),
                EPISODE_RETRY_MAX_MS
            );
        }
        self.hold = Some((e.clone(), now + wait));
        wait
    }

    /// An attempt to connect to `what` worked at `now`: ends the episode, logging its length.
    pub fn recovered(&mut self, now: Instant, what: &str) {
        self.hold = None;
        let since = self.since.take();
        if let Some((attempts, ms)) = self
            .episode
            .recovered(since.map_or(0, |s| now.duration_since(s).as_millis() as u64))
        {
            tracing::info!(
                at = what,
                failed_attempts = attempts,
                outage_ms = ms,
                "connected to {what} again"
            );
        }
    }

    /// Failed attempts in a row so far (0: no episode).
    #[cfg(test)]
    pub fn failures(&self) -> u32 {
        self.episode.failures()
    }
}

/// `wait_ms` scaled into `[½, 1]` by `unit` (in `[0, 1)`).
fn jittered(wait_ms: u64, unit: f64) -> u64 {
    let scale = 0.5 + 0.5 * unit.clamp(0.0, 1.0);
    ((wait_ms as f64) * scale).round() as u64
}

/// What a failed connection attempt's error means, in the engine's one classification
/// ([`crate::failure`]): the refusal it names (`WRONGPASS` for a refused password), else
/// [`Transient::Unreachable`].
pub(super) fn cause(e: &RedisError) -> Transient {
    match error_reply(e) {
        Some(Resp::Error(text)) => Transient::of_reply(&text).unwrap_or(Transient::Unreachable),
        _ => Transient::Unreachable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> RedisError {
        RedisError::from((
            redis::ErrorKind::AuthenticationFailed,
            "Password authentication failed",
        ))
    }

    // Goal: an outage holds calls only for its wait, the waits double within their jitter up to
    // the cap, it is classified by the engine's one classification (a refused password is
    // WRONGPASS, a lost server UNREACHABLE), and a success ends it.
    #[test]
    fn an_outage_holds_calls_for_a_jittered_doubling_wait_and_ends_on_success() {
        let mut o = Outage::default();
        let t0 = Instant::now();
        assert!(o.holding(t0).is_none());
        let mut now = t0;
        let mut waits = Vec::new();
        for _ in 0..7 {
            let w = o.failed(now, "the Redis server at h:1", &refused());
            assert!(o.holding(now).is_some());
            assert!(o.holding(now + w).is_none(), "the hold ends with the wait");
            waits.push(w.as_millis() as u64);
            now += w;
        }
        for (w, full) in waits.iter().zip([100, 200, 400, 800, 1_600, 2_000, 2_000]) {
            assert!(*w >= full / 2 && *w <= full, "{waits:?}");
        }
        assert_eq!(o.failures(), 7);
        o.recovered(now, "the Redis server at h:1");
        assert_eq!(o.failures(), 0);
        assert!(o.holding(now).is_none());
        assert_eq!(jittered(1_000, 0.0), 500);
        assert_eq!(jittered(1_000, 0.999_999), 1_000);
        assert_eq!(cause(&refused()), Transient::WrongPass);
        let lost = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(cause(&lost), Transient::Unreachable);
    }
}
