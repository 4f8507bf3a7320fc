//! The wake-up subscriber of a [`super::RedisStore`]: one pub/sub connection that hears the
//! scripts' wake-ups and wakes the store's listeners.

use super::outage::Outage;
use super::sentinel::SentinelConn;
use crate::store::WakeHub;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the wake-up subscriber connects.
#[derive(Clone)]
pub(super) enum SubscribeTo {
    /// One of these servers, in turn (the one server, or each node of a cluster URL).
    Nodes(Vec<redis::Client>),
    /// The primary the sentinels name, asked again at each (re)connection.
    Sentinel(Arc<SentinelConn>),
}

impl SubscribeTo {
    /// The server to subscribe on at the `next`-th try.
    async fn client(&self, next: usize) -> redis::RedisResult<redis::Client> {
        match self {
            SubscribeTo::Nodes(nodes) => Ok(nodes[next % nodes.len()].clone()),
            SubscribeTo::Sentinel(s) => s.resolve().await.map(|p| p.client),
        }
    }
}

/// The wake-up listeners of a [`super::RedisStore`] and the channel to its subscriber task.
#[derive(Default)]
pub(super) struct Wakes {
    pub(super) hub: WakeHub,
    pub(super) subscriber: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedSender<String>>>,
}

/// Longest wait before the wake-up subscriber connects again (ms). Short: until it is back,
/// idle workers hear of new work only at their fallback poll (5 s), so after a Redis restart
/// the subscriber's backoff is how long new work may wait.
const SUBSCRIBER_BACKOFF_MAX_MS: u64 = 1_000;

/// The wake-up subscriber: SUBSCRIBE to every channel `wakes` has listeners for (and to those
/// sent on `new` later), wake the listeners of each message's channel. Connects to `to`'s first
/// server, and to the next one (round robin) after each failure to connect or lost connection;
/// on Sentinel, to the primary the sentinels name at each (re)connection. Ends when the store
/// is gone (`new` closed). Failures to connect in a row are one outage, logged when it begins
/// and when it ends ([`Outage`]); each lost connection is logged.
pub(super) async fn subscriber(
    to: SubscribeTo,
    wakes: std::sync::Weak<Wakes>,
    mut new: tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    use futures::StreamExt;
    const WHAT: &str = "Redis for the wake-up subscriber";
    let mut backoff_ms = 100;
    let mut next = 0;
    let mut outage = Outage::default();
    loop {
        let client = match to.client(next).await {
            Ok(c) => c,
            Err(e) => {
                outage.failed(Instant::now(), WHAT, &e);
                tokio::time::sleep(Duration::from_millis(backoff_ms)).await;
                backoff_ms = (backoff_ms * 2).min(SUBSCRIBER_BACKOFF_MAX_MS);
                if new.is_closed() {
                    return;
                }
                continue;
            }
        };
        let node = client.get_connection_info().addr().to_string();
        let pubsub = match client.get_async_pubsub().await {
            Ok(p) => p,
            Err(e) => {
                outage.failed(Instant::now(), WHAT, &e);
                next += 1;
                tokio::time::sleep(Duration::from_millis(backoff_ms)).await;
                backoff_ms = (backoff_ms * 2).min(SUBSCRIBER_BACKOFF_MAX_MS);
                if new.is_closed() {
                    return;
                }
                continue;
            }
        };
        let (mut sink, mut stream) = pubsub.split();
        let Some(w) = wakes.upgrade() else { return };
        let mut subscribed = true;
        for c in w.hub.channels() {
            if sink.subscribe(&c).await.is_err() {
                subscribed = false;
                break;
            }
        }
        if subscribed {
            backoff_ms = 100;
            outage.recovered(Instant::now(), WHAT);
            // Wake-ups published while no subscription was up are lost: everyone looks again.
            w.hub.notify_all();
        }
        drop(w);
        if subscribed {
            // Until the connection is lost (`break`).
            loop {
                tokio::select! {
                    msg = stream.next() => match msg {
                        Some(m) => match wakes.upgrade() {
                            Some(w) => w.hub.notify(m.get_channel_name().as_bytes()),
                            None => return,
                        },
                        None => break,
                    },
                    c = new.recv() => match c {
                        Some(c) => {
                            if sink.subscribe(&c).await.is_err() {
                                break;
                            }
                            // A wake-up published between the listener's `wake` and this
                            // subscription is lost: the channel's listeners look again.
                            match wakes.upgrade() {
                                Some(w) => w.hub.notify(c.as_bytes()),
                                None => return,
                            }
                        }
                        None => return,
                    },
                }
            }
        }
        tracing::warn!(
            %node,
            backoff_ms,
            "wake-up subscriber lost its connection; reconnecting"
        );
        // The node may be gone (a cluster node that failed): the next one is tried first.
        next += 1;
        tokio::time::sleep(Duration::from_millis(backoff_ms)).await;
        backoff_ms = (backoff_ms * 2).min(SUBSCRIBER_BACKOFF_MAX_MS);
    }
}
