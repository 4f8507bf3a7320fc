//! `RedisStore`: the [`Store`] on a real Redis 7, one server or a Redis Cluster, through the
//! `redis` crate.

use crate::resp::Resp;
use crate::store::{Store, StoreError, WakeHub};
use async_trait::async_trait;
use orq_lua::Script;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, ErrorKind, RedisResult, ServerErrorKind, Value};
use std::time::Duration;

/// The URL scheme of a Redis Cluster: `redis+cluster://[user:password@]host:port[,host:port...]`.
pub const CLUSTER_SCHEME: &str = "redis+cluster://";

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

/// A store on one Redis server or on a Redis Cluster. EVALSHA with a fall-back to EVAL on
/// NOSCRIPT (which also caches the script again, so a Redis restart or `SCRIPT FLUSH` costs one
/// extra round trip); multiplexed connections that reconnect by themselves after a drop, so
/// concurrent calls pipeline.
///
/// **One server** (`redis://`, `rediss://`): one multiplexed connection.
///
/// **A cluster** (`redis+cluster://host:port[,host:port...]`, any one reachable node is
/// enough): the `redis` crate's cluster client learns the slot map from the nodes, keeps a
/// connection per node, and routes each EVALSHA/EVAL by the hash slot of its first key. Every key
/// of a script call carries its queue's hash tag `{queue}` (or is `orq:queues`, alone), so each
/// call touches one slot, served by one primary; the NOSCRIPT fall-back's EVAL goes to the same
/// slot and so caches the script on that primary. The client follows MOVED and ASK, refreshes
/// its slot map when the topology changes, and retries TRYAGAIN and CLUSTERDOWN a few times
/// ([`CLUSTER_RETRIES`]); a refusal that outlasts the retries reaches the engine as the error
/// reply it is (`Resp::Error("TRYAGAIN ...")`), which engine/src/failure.rs classifies as
/// transient.
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
    /// The servers the wake-up subscriber may connect to: the one server, or each node of a
    /// cluster URL, tried in turn.
    subscribe_to: Vec<redis::Client>,
    wakes: std::sync::Arc<Wakes>,
}

/// The connection of a [`RedisStore`].
#[derive(Clone)]
enum Conn {
    /// One server.
    Single(ConnectionManager),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

/// Where [`RedisStore::query`] sends a command on a cluster (a single server takes them all).
#[derive(Debug, Clone, Copy)]
enum Route<'a> {
    /// The cluster client's own routing: by the first key's slot (EVALSHA and EVAL by their
    /// first key), or the redis crate's choice for a keyless command (PING: every primary).
    Default,
    /// Every primary; the reply is a map from node address (`host:port`) to its reply.
    EachPrimary,
    /// The node at this address.
    Node(&'a str, u16),
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
/// sent on `new` later), wake the listeners of each message's channel. Connects to `nodes[0]`,
/// and to the next node (round robin) after each failure to connect or lost connection. Ends
/// when the store is gone (`new` closed).
async fn subscriber(
    nodes: Vec<redis::Client>,
    wakes: std::sync::Weak<Wakes>,
    mut new: tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    use futures::StreamExt;
    let mut backoff_ms = 100;
    let mut next = 0;
    loop {
        let client = &nodes[next % nodes.len()];
        let node = client.get_connection_info().addr().to_string();
        let pubsub = match client.get_async_pubsub().await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, %node, backoff_ms, "wake-up subscriber cannot connect");
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

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.url)
            .finish()
    }
}

/// The node URLs (`redis://[userinfo@]host:port/`) of a cluster URL,
/// `redis+cluster://[user[:password]@]host[:port][,host[:port]...][/]` (port 6379 when left
/// out; an IPv6 host in brackets). Errors: no host, an empty entry, a port that is not
/// 1..=65535, a database other than 0 (a cluster has only database 0), query parameters.
fn cluster_node_urls(url: &str) -> Result<Vec<String>, StoreError> {
    let bad = |why: String| StoreError(format!("bad Redis Cluster URL: {why}"));
    let rest = url
        .strip_prefix(CLUSTER_SCHEME)
        .ok_or_else(|| bad(format!("it must start with {CLUSTER_SCHEME}")))?;
    if rest.contains(['?', '#']) {
        return Err(bad(
            "query parameters and fragments are not supported".into()
        ));
    }
    let (authority, db) = rest.split_once('/').unwrap_or((rest, ""));
    if !matches!(db, "" | "0") {
        return Err(bad(format!(
            "database {db:?}: a Redis Cluster has only database 0"
        )));
    }
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if hosts.is_empty() {
        return Err(bad(format!(
            "no node: expected {CLUSTER_SCHEME}host:port[,host:port...]"
        )));
    }
    hosts
        .split(',')
        .map(|entry| {
            let (host, port) = if let Some(v6) = entry.strip_prefix('[') {
                let (h, after) = v6
                    .split_once(']')
                    .ok_or_else(|| bad(format!("node {entry:?}: no closing ']'")))?;
                match after {
                    "" => (format!("[{h}]"), None),
                    p => match p.strip_prefix(':') {
                        Some(p) => (format!("[{h}]"), Some(p)),
                        None => return Err(bad(format!("node {entry:?}: expected [host]:port"))),
                    },
                }
            } else {
                match entry.rsplit_once(':') {
                    Some((h, p)) => (h.to_string(), Some(p)),
                    None => (entry.to_string(), None),
                }
            };
            if host.is_empty() || host == "[]" {
                return Err(bad(format!("node {entry:?}: no host")));
            }
            let port = match port {
                None => 6379,
                Some(p) => match p.parse::<u16>() {
                    Ok(p) if p > 0 => p,
                    _ => return Err(bad(format!("node {entry:?}: port {p:?} is not 1..=65535"))),
                },
            };
            Ok(match userinfo {
                Some(u) => format!("redis://{u}@{host}:{port}/"),
                None => format!("redis://{host}:{port}/"),
            })
        })
        .collect()
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

/// The role word (`master`, `slave`, `sentinel`) of a `ROLE` reply.
fn role_word(v: Value) -> Option<String> {
    let Value::Array(items) = v else { return None };
    match items.into_iter().next()? {
        Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

impl RedisStore {
    /// Connect lazily to `url`: `redis://host:port/db` or `rediss://...` (one server), or
    /// `redis+cluster://host:port[,host:port...]` (a Redis Cluster: any one reachable node is
    /// enough). The first call connects, so a server that starts later is picked up. Errors: a
    /// malformed URL. Must be called inside a Tokio runtime (the connection's task runs there).
    pub fn open(url: &str) -> Result<Self, StoreError> {
        if url.starts_with(CLUSTER_SCHEME) {
            return Self::open_cluster(url);
        }
        let client = redis::Client::open(url).map_err(|e| {
            StoreError(format!(
                "bad Redis URL: {e} (expected redis://host:port/db, rediss://host:port/db or \
                 {CLUSTER_SCHEME}host:port,host:port)"
            ))
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECTION_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(3)
            .set_max_delay(Duration::from_secs(2));
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(|e| StoreError(format!("cannot create connection to {url}: {e}")))?;
        Ok(RedisStore {
            conn: Conn::Single(conn),
            url: url.to_string(),
            subscribe_to: vec![client],
            wakes: std::sync::Arc::default(),
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
            subscribe_to,
            wakes: std::sync::Arc::default(),
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

    /// Send `cmd`, routed by `route` on a cluster. A reply that is an error (or, as the redis
    /// crate checks it, holds one) is `Err`, except in a [`Route::EachPrimary`] reply of a
    /// cluster, where each node's error stays in its entry ([`per_node`]).
    async fn query(&self, cmd: &Cmd, route: Route<'_>) -> RedisResult<Value> {
        match &self.conn {
            Conn::Single(c) => cmd.query_async(&mut c.clone()).await,
            Conn::Cluster(c) => {
                let mut c = c.clone();
                match route {
                    Route::Default => cmd.query_async(&mut c).await,
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
            Conn::Single(_) => Ok(vec![(String::new(), self.query(cmd, Route::Default).await)]),
            Conn::Cluster(_) => per_node(self.query(cmd, Route::EachPrimary).await?),
        }
    }

    /// PING the server, or every cluster primary (readiness).
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.query(&redis::cmd("PING"), Route::Default)
            .await
            .map(|_| ())
            .map_err(|e| StoreError(e.to_string()))
    }

    /// The server's role from `ROLE`: `"master"`, `"slave"` (a replica) or `"sentinel"`; `None`
    /// when the server refuses the command or cannot be reached. On a cluster, the role of the
    /// primaries the cluster client found (`"master"`; the first other answer, should one of
    /// them have been demoted meanwhile); `None` when one of them does not answer.
    pub async fn role(&self) -> Option<String> {
        let mut role: Option<String> = None;
        for (_, reply) in self.query_each(&redis::cmd("ROLE")).await.ok()? {
            let r = role_word(reply.ok()?)?;
            if role.as_deref().is_none_or(|seen| seen == "master") {
                role = Some(r);
            }
        }
        role
    }

    /// Redis's `used_memory` from `INFO memory` (bytes), summed over the primaries of a
    /// cluster, for benchmarks (None when a server refuses or the field is missing).
    pub async fn used_memory(&self) -> Option<u64> {
        let mut total = 0u64;
        for (_, reply) in self
            .query_each(redis::cmd("INFO").arg("memory"))
            .await
            .ok()?
        {
            let info: String = redis::from_redis_value(reply.ok()?).ok()?;
            total += info
                .lines()
                .find_map(|l| l.strip_prefix("used_memory:"))
                .and_then(|v| v.trim().parse::<u64>().ok())?;
        }
        Some(total)
    }

    /// Delete every key matching the glob `pattern` (SCAN + UNLINK, 1000 at a time; on a
    /// cluster, SCAN on every primary) and remove the queue names matching `queue_glob` from the
    /// queue registry (`orq:queues`). For the load generator's own queues; never call it with a
    /// pattern that could match other data. Returns the keys deleted.
    pub async fn delete_matching(
        &self,
        pattern: &str,
        queue_glob: &str,
    ) -> Result<u64, StoreError> {
        let err = |e: redis::RedisError| StoreError(e.to_string());
        // Where to SCAN: the server, or each primary by address.
        let nodes: Vec<Option<(String, u16)>> = match &self.conn {
            Conn::Single(_) => vec![None],
            Conn::Cluster(_) => self
                .query_each(&redis::cmd("PING"))
                .await
                .map_err(err)?
                .into_iter()
                .map(|(node, _)| {
                    node.rsplit_once(':')
                        .and_then(|(h, p)| Some((h.to_string(), p.parse().ok()?)))
                        .map(Some)
                        .ok_or_else(|| StoreError(format!("unexpected cluster node {node:?}")))
                })
                .collect::<Result<_, _>>()?,
        };
        let mut deleted = 0u64;
        for node in &nodes {
            let route = match node {
                Some((host, port)) => Route::Node(host, *port),
                None => Route::Default,
            };
            let mut cursor = 0u64;
            loop {
                let reply = self
                    .query(
                        redis::cmd("SCAN")
                            .arg(cursor)
                            .arg("MATCH")
                            .arg(pattern)
                            .arg("COUNT")
                            .arg(1000),
                        route,
                    )
                    .await
                    .map_err(err)?;
                let (next, keys): (u64, Vec<String>) =
                    redis::from_redis_value(reply).map_err(|e| err(e.into()))?;
                if !keys.is_empty() {
                    // On a cluster the client splits the keys by slot.
                    let n = self
                        .query(redis::cmd("UNLINK").arg(&keys), Route::Default)
                        .await
                        .map_err(err)?;
                    deleted += redis::from_redis_value::<u64>(n).map_err(|e| err(e.into()))?;
                }
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
        }
        let reply = self
            .query(
                redis::cmd("SSCAN")
                    .arg(crate::keys::QUEUES_KEY)
                    .arg(0)
                    .arg("MATCH")
                    .arg(queue_glob)
                    .arg("COUNT")
                    .arg(100_000),
                Route::Default,
            )
            .await
            .map_err(err)?;
        let (_, names): (u64, Vec<String>) =
            redis::from_redis_value(reply).map_err(|e| err(e.into()))?;
        if !names.is_empty() {
            self.query(
                redis::cmd("SREM").arg(crate::keys::QUEUES_KEY).arg(&names),
                Route::Default,
            )
            .await
            .map_err(err)?;
        }
        Ok(deleted)
    }

    /// A `CONFIG GET` value, e.g. `maxmemory-policy` (None when the server refuses). On a
    /// cluster, the first primary's (by address); [`RedisStore::config_get_each`] gives each
    /// primary's.
    pub async fn config_get(&self, name: &str) -> Option<String> {
        self.config_get_each(name)
            .await?
            .into_iter()
            .next()
            .map(|(_, v)| v)
    }

    /// A `CONFIG GET` value of each primary: `(node, value)` pairs sorted by node (`host:port`),
    /// one pair with node `""` on a single server. None when a server refuses (managed services
    /// may rename CONFIG) or cannot be reached.
    pub async fn config_get_each(&self, name: &str) -> Option<Vec<(String, String)>> {
        let mut out = Vec::new();
        for (node, reply) in self
            .query_each(redis::cmd("CONFIG").arg("GET").arg(name))
            .await
            .ok()?
        {
            let v: Vec<String> = redis::from_redis_value(reply.ok()?).ok()?;
            out.push((node, v.get(1)?.clone()));
        }
        (!out.is_empty()).then_some(out)
    }

    async fn run(
        &self,
        cmd: &str,
        first: &[u8],
        keys: &[String],
        args: &[Vec<u8>],
    ) -> RedisResult<Value> {
        let mut c = redis::cmd(cmd);
        c.arg(first).arg(keys.len()).arg(keys);
        for a in args {
            c.arg(a.as_slice());
        }
        self.query(&c, Route::Default).await
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
    use crate::failure::Transient;

    // Goal: a cluster URL gives the node URLs the cluster client and the subscriber connect to,
    // and every malformed one is a clear error (never a panic).
    #[test]
    fn cluster_urls_are_parsed_into_node_urls() {
        assert_eq!(
            cluster_node_urls("redis+cluster://127.0.0.1:7000,127.0.0.1:7001/").unwrap(),
            ["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"]
        );
        assert_eq!(
            cluster_node_urls("redis+cluster://u:p%40ss@h1:7000,[::1]:7001,h3").unwrap(),
            [
                "redis://u:p%40ss@h1:7000/",
                "redis://u:p%40ss@[::1]:7001/",
                "redis://u:p%40ss@h3:6379/"
            ]
        );
        assert_eq!(
            cluster_node_urls("redis+cluster://h:1/0").unwrap(),
            ["redis://h:1/"]
        );
        for bad in [
            "redis+cluster://",
            "redis+cluster:///",
            "redis+cluster://,",
            "redis+cluster://h:1,",
            "redis+cluster://h:port",
            "redis+cluster://h:0",
            "redis+cluster://h:65536",
            "redis+cluster://:7000",
            "redis+cluster://[::1",
            "redis+cluster://[::1]x",
            "redis+cluster://h:1/2",
            "redis+cluster://h:1?protocol=3",
            "redis://h:1",
        ] {
            let e = cluster_node_urls(bad).expect_err(bad);
            assert!(e.0.starts_with("bad Redis Cluster URL"), "{bad}: {e}");
        }
    }

    // Goal: `open` refuses bad URLs of either kind with a StoreError (the runtime is only needed
    // for good ones, which start a connection task).
    #[tokio::test]
    async fn open_refuses_bad_urls() {
        for bad in [
            "redis+cluster://",
            "redis+cluster://127.0.0.1:notaport",
            "http://127.0.0.1:6379",
            "",
        ] {
            let e = RedisStore::open(bad).expect_err(bad);
            assert!(e.0.starts_with("bad Redis"), "{bad}: {e}");
        }
        let s = RedisStore::open("redis+cluster://127.0.0.1:7000,127.0.0.1:7001").unwrap();
        assert!(s.is_cluster());
        assert_eq!(s.subscribe_to.len(), 2);
        assert!(!RedisStore::open("redis://127.0.0.1:6379/")
            .unwrap()
            .is_cluster());
    }

    // Goal: what the cluster client hands back once its own retries are spent (the server's
    // TRYAGAIN or CLUSTERDOWN as a RedisError) reaches the engine as the error reply, which
    // failure.rs classifies as transient.
    #[test]
    fn cluster_refusals_become_transient_error_replies() {
        for (wire, want) in [
            (
                "-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
                Transient::TryAgain,
            ),
            (
                "-CLUSTERDOWN The cluster is down\r\n",
                Transient::ClusterDown,
            ),
            ("-MOVED 3999 127.0.0.1:6381\r\n", Transient::Moved),
            ("-ASK 3999 127.0.0.1:6381\r\n", Transient::Ask),
            (
                "-MASTERDOWN Link with MASTER is down\r\n",
                Transient::MasterDown,
            ),
        ] {
            let e = redis::parse_redis_value(wire.as_bytes())
                .unwrap()
                .extract_error()
                .expect_err(wire);
            let Some(Resp::Error(text)) = error_reply(&e) else {
                panic!("{wire}: not an error reply");
            };
            assert_eq!(Transient::of_reply(&text), Some(want), "{text}");
            assert!(text.len() > want.word().len() + 1, "detail kept: {text}");
        }
    }
}
