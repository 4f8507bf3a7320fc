//! The `Store` trait: the one operation the engine needs from Redis or its model.

use crate::resp::Resp;
use async_trait::async_trait;
use orq_lua::Script;

/// A store failed to run a script: it was unreachable, or the connection dropped mid-call (then
/// the script may or may not have run: a lost reply).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// Runs transition scripts atomically. Implemented by [`crate::RedisStore`] and by the
/// in-memory Redis model (`orq-model`, also the simulator's store).
///
/// Script errors (`redis.error_reply`, a failing `redis.call`) are replies, `Ok(Resp::Error(..))`;
/// `Err` means the store itself failed.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Run `script` with `keys` (KEYS) and `args` (ARGV) as one atomic unit and return its reply.
    async fn eval(
        &self,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<Resp, StoreError>;

    /// Listen for wake-ups on `channels` (docs/design-notes.md, note 27): the scripts PUBLISH on
    /// a queue's channel ([`crate::keys::wake_channel`]) when they make work ready, and on
    /// [`crate::keys::QUEUES_WAKE_CHANNEL`] when a queue is new. The receiver's value changes
    /// after each wake-up on any of them (and after the store reconnects, as wake-ups may have
    /// been missed meanwhile), so an idle worker waits for it instead of polling often.
    /// Delivery is best effort: callers still poll, rarely. `None` (the default): the store
    /// gives no wake-ups, and callers poll at their idle interval. Must be called inside a
    /// Tokio runtime.
    fn wake(&self, channels: &[String]) -> Option<tokio::sync::watch::Receiver<u64>> {
        let _ = channels;
        None
    }
}

/// The listeners of wake-up channels, for [`Store::wake`] implementations: each listener is a
/// watch channel whose value counts the wake-ups it was sent.
#[derive(Debug, Default)]
pub struct WakeHub {
    listeners: std::sync::Mutex<std::collections::HashMap<Vec<u8>, Vec<Listener>>>,
}

/// One listener's end of its watch channel, shared by the channels it listens on.
type Listener = std::sync::Arc<tokio::sync::watch::Sender<u64>>;

impl WakeHub {
    /// A new listener of `channels`; also returns the channels that had no listener before (a
    /// Redis store subscribes to those).
    pub fn listen(&self, channels: &[String]) -> (tokio::sync::watch::Receiver<u64>, Vec<String>) {
        let (tx, rx) = tokio::sync::watch::channel(0u64);
        let tx = std::sync::Arc::new(tx);
        let mut map = self.listeners.lock().expect("wake hub poisoned");
        let mut fresh = Vec::new();
        for c in channels {
            let l = map.entry(c.as_bytes().to_vec()).or_default();
            l.retain(|s| !s.is_closed());
            if l.is_empty() {
                fresh.push(c.clone());
            }
            l.push(tx.clone());
        }
        (rx, fresh)
    }

    /// Wake the listeners of `channel` (listeners whose receiver is gone are dropped).
    pub fn notify(&self, channel: &[u8]) {
        let mut map = self.listeners.lock().expect("wake hub poisoned");
        if let Some(l) = map.get_mut(channel) {
            l.retain(|s| !s.is_closed());
            for s in l.iter() {
                s.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }

    /// Wake every listener (after a reconnect).
    pub fn notify_all(&self) {
        let map = self.listeners.lock().expect("wake hub poisoned");
        for l in map.values() {
            for s in l {
                s.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }

    /// The channels that have a live listener.
    pub fn channels(&self) -> Vec<String> {
        let mut map = self.listeners.lock().expect("wake hub poisoned");
        map.retain(|_, l| {
            l.retain(|s| !s.is_closed());
            !l.is_empty()
        });
        map.keys()
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect()
    }
}
