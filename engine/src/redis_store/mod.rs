//! `RedisStore`: the [`Store`] on a real Redis 7, one server or a Redis Cluster, through the
//! `redis` crate.

mod admin;
mod discover;
mod functions;
mod outage;
mod resp;
mod sentinel;
mod server;
mod subscriber;
mod url;
mod wait;

pub use url::{CLUSTER_SCHEME, SENTINEL_SCHEME};
pub use wait::{WaitReplicas, WAITED_SCRIPTS};

use crate::resp::Resp;
use crate::store::{Store, StoreError};
use async_trait::async_trait;
use orq_lua::Script;
use redis::cluster::{ClusterClient, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, ErrorKind, RedisResult, ServerErrorKind, Value};
use resp::{error_reply, to_resp};
use sentinel::SentinelConn;
use server::ServerConn;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use subscriber::{subscriber, SubscribeTo, Wakes};
use url::{cluster_node_urls, sentinel_url};

/// Longest wait for a connection to a server (or to one cluster node).
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest wait for a reply; on a cluster, for a whole call with its redirections and retries.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// How many times the cluster client sends a call again after a redirection (MOVED, ASK), a
/// refusal that passes (TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN: after a wait of
/// [`CLUSTER_RETRY_WAIT_MIN_MS`] to [`CLUSTER_RETRY_WAIT_MAX_MS`], doubling) or a lost node
/// (after reconnecting). Six rounds wait at most about 3.5 s in all: enough to ride out a slot
/// migration's TRYAGAIN, short enough that a failover's CLUSTERDOWN (which lasts about the
/// cluster's node timeout) reaches the engine soon, as a transient refusal its callers back off
/// from and retry (engine/src/failure.rs).
const CLUSTER_RETRIES: u32 = 6;

/// Shortest wait before a cluster retry (ms).
const CLUSTER_RETRY_WAIT_MIN_MS: u64 = 50;

/// Longest wait before a cluster retry (ms).
const CLUSTER_RETRY_WAIT_MAX_MS: u64 = 1_000;

/// A store on one Redis server or on a Redis Cluster. Each script is an FCALL of its function in
/// orq's library, loaded where it is missing ([`functions`]: one extra round trip after a
/// restart without persistence or `FUNCTION FLUSH`); where a server refuses the library, EVALSHA
/// with a fall-back to EVAL on NOSCRIPT (which also caches the script again); multiplexed connections that reconnect by themselves after a drop, so
/// concurrent calls pipeline.
///
/// **One server** (`redis://`, `rediss://`): one multiplexed connection, made again after it is
/// lost and after any failed attempt to make it ([`server`]): a refused password is tried again
/// after a backoff (100 ms doubling to 2 s, jittered), like a server that is down, so the store
/// recovers as soon as the credentials work again; the episode is logged once when it begins
/// and once when it ends ([`outage`]).
///
/// **A cluster** (`redis+cluster://host:port[,host:port...]`, any one reachable node is
/// enough): the `redis` crate's cluster client learns the slot map from the nodes, keeps a
/// connection per node, and routes each FCALL (or EVALSHA/EVAL) by the hash slot of its first key. Every key
/// of a script call carries its queue's hash tag `{queue}` (or is `orq:queues`, alone), so each
/// call touches one slot, served by one primary; the library is loaded on the primary of the
/// call that missed it (each primary once; replicas get it by replication), and the NOSCRIPT
/// fall-back's EVAL goes to the same slot and so caches the script on that primary. The client follows MOVED and ASK, refreshes
/// its slot map when the topology changes, and retries TRYAGAIN and CLUSTERDOWN a few times
/// (`CLUSTER_RETRIES`); a refusal that outlasts the retries reaches the engine as the error
/// reply it is (`Resp::Error("TRYAGAIN ...")`), which engine/src/failure.rs classifies as
/// transient.
///
/// **Sentinel** (`redis+sentinel://host:port[,host:port...]/<master-name>[/<db>]`, the
/// sentinels' addresses, port 26379 by default; `user:password@` before the hosts is for the data
/// servers): the first call asks the sentinels in turn (`SENTINEL GET-MASTER-ADDR-BY-NAME`) for
/// the primary, connects to it and checks `ROLE` says master (a sentinel may briefly name a
/// stale primary). After an I/O error, a timeout or a `READONLY`/`MASTERDOWN` reply (the old
/// primary came back as a replica), the connection is forgotten and the next call asks the
/// sentinels again; the failing call's error is returned as it is (transient for the engine,
/// whose callers retry). One search at a time: calls arriving during it wait for its outcome,
/// and for 250 ms after a failed search calls fail at once with its error. The wake-up subscriber
/// asks the sentinels for the primary at each (re)connection; admin calls go to the primary.
///
/// Wake-ups ([`Store::wake`]) come over one more connection, a pub/sub subscriber opened at the
/// first `wake` call: it SUBSCRIBEs to the channels listened for, reconnects by itself (with a
/// backoff of 100 ms doubling to 1 s), and after each (re)connection wakes every listener, as
/// wake-ups published while it was down are lost.
///
/// On a cluster the subscriber connects to one node of the URL (the first; after a failure to
/// connect, or a lost connection, the next one, round robin). One node is enough because the
/// scripts publish with plain PUBLISH, which Redis Cluster forwards over the cluster bus to
/// every node, so a subscriber on any node hears every queue's wake-ups. Sharded pub/sub
/// (SPUBLISH/SSUBSCRIBE) was not used, for now: a shard channel's messages reach only the
/// nodes of its slot's shard, so the subscriber would need a connection per shard, the slot of
/// every channel, and to follow slot migrations and failovers (which unsubscribe shard
/// channels) by subscribing again elsewhere; and `orq:queues:wake` would need a name in the slot
/// of `orq:queues` for the `queues` script to SPUBLISH it. The cost of plain PUBLISH: every
/// wake-up crosses the cluster bus to every node (one message per node per publish; at most one
/// publish per script call that makes work ready).
#[derive(Clone)]
pub struct RedisStore {
    conn: Conn,
    url: String,
    /// Where the wake-up subscriber connects: the one server, each node of a cluster URL in
    /// turn, or the primary the sentinels name.
    subscribe_to: SubscribeTo,
    wakes: std::sync::Arc<Wakes>,
    /// `--wait-replicas`: the recorded writes wait for this many replicas ([`wait`]).
    wait: Option<WaitReplicas>,
    /// Set when a server refused orq's function library for good ([`functions`]): calls go by
    /// EVALSHA from then on.
    library_refused: Arc<std::sync::atomic::AtomicBool>,
}

/// The connection of a [`RedisStore`].
#[derive(Clone)]
enum Conn {
    /// One server.
    Single(Arc<ServerConn>),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
    /// The primary of a Sentinel deployment, found through the sentinels.
    Sentinel(Arc<SentinelConn>),
}

/// Where [`RedisStore::query`] sends a command on a cluster (a single server takes them all).
#[derive(Debug, Clone, Copy)]
enum Route<'a> {
    /// The cluster client's own routing: by the first key's slot (EVALSHA and EVAL by their
    /// first key), or the redis crate's choice for a keyless command (PING: every primary).
    Default,
    /// Every primary; the reply is a map from node address (`host:port`) to its reply.
    EachPrimary,
    /// The primary of `key`'s hash slot (on a cluster; elsewhere the one server).
    Slot(&'a str),
    /// The node at this address.
    Node(&'a str, u16),
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &crate::redact::redacted(&self.url))
            .finish()
    }
}

/// The `(node, reply)` pairs of a [`Route::EachPrimary`] reply from the cluster client, sorted
/// by node; a node's error reply is its `Err`.
fn per_node(reply: Value) -> RedisResult<Vec<(String, RedisResult<Value>)>> {
    let Value::Map(pairs) = reply else {
        return Err(redis::RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "a reply per primary",
            format!("{reply:?}"),
        )));
    };
    let mut out: Vec<_> = pairs
        .into_iter()
        .map(|(node, v)| {
            let node = match node {
                Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
                Value::SimpleString(s) => s,
                other => format!("{other:?}"),
            };
            (node, v.extract_error())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

impl RedisStore {
    /// Connect lazily to `url`: `redis://host:port/db` or `rediss://...` (one server), or
    /// `redis+cluster://host:port[,host:port...]` (a Redis Cluster: any one reachable node is
    /// enough), or `redis+sentinel://host:port[,host:port...]/<master-name>[/<db>]` (the
    /// primary the sentinels name, followed across failovers). The first call connects, so a server that starts later is picked up. Errors: a
    /// malformed URL. Must be called inside a Tokio runtime (the connection's task runs there).
    pub fn open(url: &str) -> Result<Self, StoreError> {
        if url.starts_with(CLUSTER_SCHEME) {
            return Self::open_cluster(url);
        }
        if url.starts_with(SENTINEL_SCHEME) {
            return Self::open_sentinel(url);
        }
        let client = redis::Client::open(url).map_err(|e| {
            StoreError(format!(
                "bad Redis URL: {e} (expected redis://host:port/db, rediss://host:port/db, \
                 {CLUSTER_SCHEME}host:port,host:port or \
                 {SENTINEL_SCHEME}host:port,host:port/master-name)"
            ))
        })?;
        Ok(RedisStore {
            conn: Conn::Single(Arc::new(ServerConn::new(client.clone()))),
            url: url.to_string(),
            subscribe_to: SubscribeTo::Nodes(vec![client]),
            wakes: std::sync::Arc::default(),
            wait: None,
            library_refused: Arc::default(),
        })
    }

    /// [`RedisStore::open`] of a `redis+cluster://` URL.
    fn open_cluster(url: &str) -> Result<Self, StoreError> {
        let nodes = cluster_node_urls(url)?;
        let client = ClusterClient::builder(nodes.iter().map(String::as_str))
            .connection_timeout(CONNECTION_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT)
            .overall_response_timeout(Some(RESPONSE_TIMEOUT))
            .retries(CLUSTER_RETRIES)
            .min_retry_wait(CLUSTER_RETRY_WAIT_MIN_MS)
            .max_retry_wait(CLUSTER_RETRY_WAIT_MAX_MS)
            // Before retry k: up to 25 ms × 2^k, within the bounds above.
            .retry_wait_formula(25, 2)
            .build()
            .map_err(|e| StoreError(format!("bad Redis Cluster URL: {e}")))?;
        let subscribe_to = nodes
            .iter()
            .map(|n| redis::Client::open(n.as_str()))
            .collect::<RedisResult<Vec<_>>>()
            .map_err(|e| StoreError(format!("bad Redis Cluster URL: {e}")))?;
        // Connects in the background: the first calls wait for it (or fail, and the next ones
        // try the URL's nodes again).
        let conn = client.get_pending_async_connection_with_config(
            ClusterConfig::new()
                .set_connection_timeout(CONNECTION_TIMEOUT)
                .set_response_timeout(RESPONSE_TIMEOUT),
        );
        Ok(RedisStore {
            conn: Conn::Cluster(conn),
            url: url.to_string(),
            subscribe_to: SubscribeTo::Nodes(subscribe_to),
            wakes: std::sync::Arc::default(),
            wait: None,
            library_refused: Arc::default(),
        })
    }

    /// [`RedisStore::open`] of a `redis+sentinel://` URL: no connection yet; the first call asks
    /// the sentinels for the primary.
    fn open_sentinel(url: &str) -> Result<Self, StoreError> {
        let conn = Arc::new(SentinelConn::new(sentinel_url(url)?));
        Ok(RedisStore {
            conn: Conn::Sentinel(conn.clone()),
            url: url.to_string(),
            subscribe_to: SubscribeTo::Sentinel(conn),
            wakes: std::sync::Arc::default(),
            wait: None,
            library_refused: Arc::default(),
        })
    }

    /// Connect to `url` and check the server (every cluster primary) answers PING.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let store = Self::open(url)?;
        store.ping().await?;
        Ok(store)
    }

    /// Whether this store is on a Redis Cluster (`redis+cluster://`).
    pub fn is_cluster(&self) -> bool {
        matches!(self.conn, Conn::Cluster(_))
    }

    /// Make every call of a [`WAITED_SCRIPTS`] script wait for `wait.replicas` replicas (at
    /// most `wait.timeout_ms`) before it answers (`--wait-replicas`); `None` (the default)
    /// answers as soon as the primary ran it.
    pub fn with_wait_replicas(mut self, wait: Option<WaitReplicas>) -> Self {
        self.wait = wait;
        self
    }

    /// Run `script` and `WAIT` for the replicas as one pipeline on one connection (FCALL, again
    /// after loading a missing library; where the library is refused, EVALSHA, then EVAL after
    /// NOSCRIPT), so the WAIT counts the replicas of the very server that ran the
    /// script: a WAIT sent on its own could reach another server after a failover (a new
    /// Sentinel primary, a cluster node the client falls back to) and count the wrong
    /// replicas. On a cluster the client routes the pipeline by the script's first key and, on
    /// MOVED, ASK, TRYAGAIN or CLUSTERDOWN, sends the whole pipeline again where it belongs.
    /// The script's own reply when `w.replicas` acknowledged in time, else the shortfall
    /// (`NOREPLICAS`: transient).
    async fn eval_replicated(
        &self,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
        w: WaitReplicas,
    ) -> Result<Resp, StoreError> {
        let mut by_function = None;
        if orq_lua::functions::by_function(script.name)
            && !self.library_refused.load(Ordering::Relaxed)
        {
            let fcall = functions::fcall_cmd(script, keys, args);
            let mut p = self.cmd_then_wait(fcall.clone(), w).await;
            if matches!(&p, Ok((r, _)) if functions::missing(r))
                && self.load_library(&keys[0]).await
            {
                p = self.cmd_then_wait(fcall, w).await;
            }
            if !matches!(&p, Ok((r, _)) if functions::missing(r)) {
                by_function = Some(p);
            }
        }
        let mut pair = match by_function {
            Some(p) => p,
            None => {
                self.run_then_wait("EVALSHA", script.sha1.as_bytes(), keys, args, w)
                    .await
            }
        };
        if matches!(&pair, Ok((Err(e), _)) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript))
        {
            pair = self
                .run_then_wait("EVAL", script.source.as_bytes(), keys, args, w)
                .await;
        }
        let (reply, waited) = match pair {
            Ok(pair) => pair,
            Err(e) => return error_reply(&e).ok_or_else(|| StoreError(e.to_string())),
        };
        let reply = match reply {
            Ok(v) => to_resp(v),
            Err(e) => error_reply(&e).ok_or_else(|| StoreError(e.to_string()))?,
        };
        Ok(match waited {
            Ok(Value::Int(n)) if n >= i64::from(w.replicas) => reply,
            Ok(Value::Int(n)) => Resp::Error(wait::shortfall(n, w.replicas, w.timeout_ms)),
            // Anything else is not known replicated, so not acknowledged.
            _ => Resp::Error(wait::shortfall(0, w.replicas, w.timeout_ms)),
        })
    }

    /// `cmd first numkeys keys... args...` then `WAIT replicas timeout`, pipelined on one
    /// connection: each one's reply (a server error stays in its own entry); `Err` when the
    /// pipeline could not be sent or answered.
    async fn run_then_wait(
        &self,
        cmd: &str,
        first: &[u8],
        keys: &[String],
        args: &[Vec<u8>],
        w: WaitReplicas,
    ) -> RedisResult<(RedisResult<Value>, RedisResult<Value>)> {
        self.cmd_then_wait(script_cmd(cmd, first, keys, args), w)
            .await
    }

    /// `cmd` then `WAIT replicas timeout`, pipelined on one connection ([`Self::run_then_wait`]).
    async fn cmd_then_wait(
        &self,
        cmd: Cmd,
        w: WaitReplicas,
    ) -> RedisResult<(RedisResult<Value>, RedisResult<Value>)> {
        let mut p = redis::pipe();
        p.ignore_errors();
        p.add_command(cmd);
        p.cmd("WAIT").arg(w.replicas).arg(w.timeout_ms.max(1));
        let replies: Vec<RedisResult<Value>> = match &self.conn {
            Conn::Single(c) => c.query_pipeline(&p).await?,
            Conn::Sentinel(c) => c.query_pipeline(&p).await?,
            Conn::Cluster(c) => p.query_async(&mut c.clone()).await?,
        };
        let mut replies = replies.into_iter();
        match (replies.next(), replies.next()) {
            (Some(reply), Some(waited)) => Ok((reply, waited)),
            _ => Err(redis::RedisError::from((
                ErrorKind::Client,
                "a pipeline of two commands answered fewer replies",
            ))),
        }
    }

    /// Send `cmd`, routed by `route` on a cluster. A reply that is an error (or, as the redis
    /// crate checks it, holds one) is `Err`, except in a [`Route::EachPrimary`] reply of a
    /// cluster, where each node's error stays in its entry ([`per_node`]).
    async fn query(&self, cmd: &Cmd, route: Route<'_>) -> RedisResult<Value> {
        match &self.conn {
            Conn::Single(c) => c.query(cmd).await,
            Conn::Sentinel(c) => c.query(cmd).await,
            Conn::Cluster(c) => {
                let mut c = c.clone();
                match route {
                    Route::Default => cmd.query_async(&mut c).await,
                    Route::Slot(key) => {
                        c.route_command(
                            cmd.clone(),
                            RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                                redis::cluster_routing::Route::with_key(
                                    key,
                                    redis::cluster_routing::SlotAddr::Master,
                                ),
                            )),
                        )
                        .await
                    }
                    Route::EachPrimary => {
                        c.route_command(
                            cmd.clone(),
                            RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None)),
                        )
                        .await
                    }
                    Route::Node(host, port) => c
                        .route_command(
                            cmd.clone(),
                            RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                                host: host.to_string(),
                                port,
                            }),
                        )
                        .await
                        .and_then(Value::extract_error),
                }
            }
        }
    }

    /// Send `cmd` to every primary: each one's `(node, reply)`, sorted by node (`host:port`);
    /// a single server's one reply, with node `""`. `Err` when the command could not be sent.
    async fn query_each(&self, cmd: &Cmd) -> RedisResult<Vec<(String, RedisResult<Value>)>> {
        match &self.conn {
            Conn::Single(_) | Conn::Sentinel(_) => {
                Ok(vec![(String::new(), self.query(cmd, Route::Default).await)])
            }
            Conn::Cluster(_) => per_node(self.query(cmd, Route::EachPrimary).await?),
        }
    }
    async fn run(
        &self,
        cmd: &str,
        first: &[u8],
        keys: &[String],
        args: &[Vec<u8>],
    ) -> RedisResult<Value> {
        self.query(&script_cmd(cmd, first, keys, args), Route::Default)
            .await
    }
}

/// `cmd first numkeys keys... args...`: an EVALSHA (`first` the SHA1) or an EVAL (`first` the
/// source).
fn script_cmd(cmd: &str, first: &[u8], keys: &[String], args: &[Vec<u8>]) -> Cmd {
    let mut c = redis::cmd(cmd);
    c.arg(first).arg(keys.len()).arg(keys);
    for a in args {
        c.arg(a.as_slice());
    }
    c
}

#[async_trait]
impl Store for RedisStore {
    async fn eval(
        &self,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<Resp, StoreError> {
        if let Some(w) = self.wait.filter(|_| wait::waits(script.name)) {
            return self.eval_replicated(script, keys, args, w).await;
        }
        let result = if orq_lua::functions::by_function(script.name) {
            self.call_function(script, keys, args).await
        } else {
            self.call_script(script, keys, args).await
        };
        match result {
            Ok(v) => Ok(to_resp(v)),
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
                    self.subscribe_to.clone(),
                    std::sync::Arc::downgrade(&self.wakes),
                    new,
                ));
                *sub = Some(tx);
            }
        }
        Some(rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: `open` refuses bad URLs of either kind with a StoreError (the runtime is only needed
    // for good ones, which start a connection task).
    #[tokio::test]
    async fn open_refuses_bad_urls() {
        for bad in [
            "redis+cluster://",
            "redis+cluster://127.0.0.1:notaport",
            "redis+sentinel://",
            "redis+sentinel://127.0.0.1:26379",
            "redis+sentinel://127.0.0.1:port/m",
            "http://127.0.0.1:6379",
            "",
        ] {
            let e = RedisStore::open(bad).expect_err(bad);
            assert!(e.0.starts_with("bad Redis"), "{bad}: {e}");
        }
        let s = RedisStore::open("redis+cluster://127.0.0.1:7000,127.0.0.1:7001").unwrap();
        assert!(s.is_cluster());
        assert!(matches!(&s.subscribe_to, SubscribeTo::Nodes(n) if n.len() == 2));
        let s = RedisStore::open("redis+sentinel://127.0.0.1:26379/m").unwrap();
        assert!(!s.is_cluster());
        assert!(matches!(s.conn, Conn::Sentinel(_)));
        assert!(!RedisStore::open("redis://127.0.0.1:6379/")
            .unwrap()
            .is_cluster());
    }
}
