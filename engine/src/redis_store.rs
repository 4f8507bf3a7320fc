//! `RedisStore`: the [`Store`] on a real Redis 7, through the `redis` crate.

use crate::resp::Resp;
use crate::store::{Store, StoreError, WakeHub};
use async_trait::async_trait;
use orq_lua::Script;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, ServerErrorKind, Value};
use std::time::Duration;

/// A store on one Redis server. EVALSHA with a fall-back to EVAL on NOSCRIPT (which also caches
/// the script again, so a Redis restart or `SCRIPT FLUSH` costs one extra round trip); one
/// multiplexed connection that reconnects by itself after a drop, so concurrent calls pipeline.
///
/// Wake-ups ([`Store::wake`]) come over one more connection, a pub/sub subscriber opened at the
/// first `wake` call: it SUBSCRIBEs to the channels listened for, reconnects by itself (with a
/// backoff of 100 ms doubling to 1 s), and after each (re)connection wakes every listener, as
/// wake-ups published while it was down are lost.
#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    url: String,
    client: redis::Client,
    wakes: std::sync::Arc<Wakes>,
}

/// The wake-up listeners of a [`RedisStore`] and the channel to its subscriber task.
#[derive(Default)]
struct Wakes {
    hub: WakeHub,
    subscriber: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedSender<String>>>,
}

/// Longest wait before the wake-up subscriber connects again (ms). Short: until it is back,
/// idle workers hear of new work only at their fallback poll (5 s), so after a Redis restart
/// the subscriber's backoff is how long new work may wait.
const SUBSCRIBER_BACKOFF_MAX_MS: u64 = 1_000;

/// The wake-up subscriber: SUBSCRIBE to every channel `wakes` has listeners for (and to those
/// sent on `new` later), wake the listeners of each message's channel. Ends when the store is
/// gone (`new` closed).
async fn subscriber(
    client: redis::Client,
    wakes: std::sync::Weak<Wakes>,
    mut new: tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    use futures::StreamExt;
    let mut backoff_ms = 100;
    loop {
        let pubsub = match client.get_async_pubsub().await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, backoff_ms, "wake-up subscriber cannot connect");
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
                        }
                        None => return,
                    },
                }
            }
        }
        tracing::warn!(
            backoff_ms,
            "wake-up subscriber lost its connection; reconnecting"
        );
        tokio::time::sleep(Duration::from_millis(backoff_ms)).await;
        backoff_ms = (backoff_ms * 2).min(SUBSCRIBER_BACKOFF_MAX_MS);
    }
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.url)
            .finish()
    }
}

impl RedisStore {
    /// Connect lazily to `url` (`redis://host:port/db`): the first call connects, so a server
    /// that starts later is picked up. Errors: a malformed URL.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let client =
            redis::Client::open(url).map_err(|e| StoreError(format!("bad Redis URL: {e}")))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(30)))
            .set_number_of_retries(3)
            .set_max_delay(Duration::from_secs(2));
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(|e| StoreError(format!("cannot create connection to {url}: {e}")))?;
        Ok(RedisStore {
            conn,
            url: url.to_string(),
            client,
            wakes: std::sync::Arc::default(),
        })
    }

    /// Connect to `url` and check the server answers PING.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let store = Self::open(url)?;
        store.ping().await?;
        Ok(store)
    }

    /// PING the server (readiness).
    pub async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .map(|_| ())
            .map_err(|e| StoreError(e.to_string()))
    }

    /// The server's role from `ROLE`: `"master"`, `"slave"` (a replica) or `"sentinel"`; `None`
    /// when the server refuses the command or cannot be reached.
    pub async fn role(&self) -> Option<String> {
        let mut conn = self.conn.clone();
        let v: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut conn).await.ok()?;
        match v.first()? {
            redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            redis::Value::SimpleString(s) => Some(s.clone()),
            _ => None,
        }
    }

    /// Redis's `used_memory` from `INFO memory` (bytes), for benchmarks (None when the server
    /// refuses or the field is missing).
    pub async fn used_memory(&self) -> Option<u64> {
        let mut conn = self.conn.clone();
        let info: String = redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut conn)
            .await
            .ok()?;
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
    }

    /// Delete every key matching the glob `pattern` (SCAN + UNLINK, 1000 at a time) and remove
    /// the queue names matching `queue_glob` from the queue registry (`orq:queues`). For the
    /// load generator's own queues; never call it with a pattern that could match other data.
    /// Returns the keys deleted.
    pub async fn delete_matching(
        &self,
        pattern: &str,
        queue_glob: &str,
    ) -> Result<u64, StoreError> {
        let mut conn = self.conn.clone();
        let err = |e: redis::RedisError| StoreError(e.to_string());
        let mut cursor = 0u64;
        let mut deleted = 0u64;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await
                .map_err(err)?;
            if !keys.is_empty() {
                deleted += redis::cmd("UNLINK")
                    .arg(&keys)
                    .query_async::<u64>(&mut conn)
                    .await
                    .map_err(err)?;
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        let (_, names): (u64, Vec<String>) = redis::cmd("SSCAN")
            .arg(crate::keys::QUEUES_KEY)
            .arg(0)
            .arg("MATCH")
            .arg(queue_glob)
            .arg("COUNT")
            .arg(100_000)
            .query_async(&mut conn)
            .await
            .map_err(err)?;
        if !names.is_empty() {
            redis::cmd("SREM")
                .arg(crate::keys::QUEUES_KEY)
                .arg(&names)
                .query_async::<u64>(&mut conn)
                .await
                .map_err(err)?;
        }
        Ok(deleted)
    }

    /// A `CONFIG GET` value, e.g. `maxmemory-policy` (None when the server refuses).
    pub async fn config_get(&self, name: &str) -> Option<String> {
        let mut conn = self.conn.clone();
        let v: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query_async(&mut conn)
            .await
            .ok()?;
        v.get(1).cloned()
    }

    async fn run(
        &self,
        cmd: &str,
        first: &[u8],
        keys: &[String],
        args: &[Vec<u8>],
    ) -> redis::RedisResult<Value> {
        let mut c = redis::cmd(cmd);
        c.arg(first).arg(keys.len()).arg(keys);
        for a in args {
            c.arg(a.as_slice());
        }
        let mut conn = self.conn.clone();
        c.query_async::<Value>(&mut conn).await
    }
}

/// Convert a `redis` value into the engine's RESP type.
fn to_resp(v: Value) -> Resp {
    match v {
        Value::Nil => Resp::Nil,
        Value::Int(n) => Resp::Int(n),
        Value::BulkString(b) => Resp::Bulk(b),
        Value::Array(items) | Value::Set(items) => {
            Resp::Array(items.into_iter().map(to_resp).collect())
        }
        Value::SimpleString(s) => Resp::Status(s),
        Value::Okay => Resp::Status("OK".into()),
        Value::Boolean(b) => Resp::Int(i64::from(b)),
        Value::Double(d) => Resp::Bulk(d.to_string().into_bytes()),
        Value::ServerError(e) => Resp::Error(match e.details() {
            Some(d) => format!("{} {d}", e.code()),
            None => e.code().to_string(),
        }),
        other => Resp::Error(format!("ERR unsupported reply {other:?}")),
    }
}

/// A server error reply as `Resp::Error`, or `None` when the error is not a reply (I/O, ...).
fn error_reply(e: &redis::RedisError) -> Option<Resp> {
    let code = e.code()?;
    Some(Resp::Error(match e.detail() {
        Some(d) => format!("{code} {d}"),
        None => code.to_string(),
    }))
}

#[async_trait]
impl Store for RedisStore {
    async fn eval(
        &self,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<Resp, StoreError> {
        match self
            .run("EVALSHA", script.sha1.as_bytes(), keys, args)
            .await
        {
            Ok(v) => Ok(to_resp(v)),
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                match self.run("EVAL", script.source.as_bytes(), keys, args).await {
                    Ok(v) => Ok(to_resp(v)),
                    Err(e) => error_reply(&e).ok_or_else(|| StoreError(e.to_string())),
                }
            }
            Err(e) => error_reply(&e).ok_or_else(|| StoreError(e.to_string())),
        }
    }

    fn wake(&self, channels: &[String]) -> Option<tokio::sync::watch::Receiver<u64>> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (rx, fresh) = self.wakes.hub.listen(channels);
        let mut sub = self
            .wakes
            .subscriber
            .lock()
            .expect("wake subscriber poisoned");
        match sub.as_ref() {
            Some(tx) if !tx.is_closed() => {
                for c in fresh {
                    let _ = tx.send(c);
                }
            }
            // The first listener, or the subscriber's runtime is gone: (re)start it; it
            // subscribes to every channel with a listener when it connects.
            _ => {
                let (tx, new) = tokio::sync::mpsc::unbounded_channel();
                runtime.spawn(subscriber(
                    self.client.clone(),
                    std::sync::Arc::downgrade(&self.wakes),
                    new,
                ));
                *sub = Some(tx);
            }
        }
        Some(rx)
    }
}
