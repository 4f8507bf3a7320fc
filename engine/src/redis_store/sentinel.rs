//! The connection of a [`super::RedisStore`] on a Sentinel deployment (`redis+sentinel://`):
//! the primary is found through the sentinels, and found again after a failover.

use super::outage::Outage;
use super::resp::authentication_failed;
use super::server::{connection_lost, server_config};
use super::url::SentinelUrl;
use super::{CONNECTION_TIMEOUT, RESPONSE_TIMEOUT};
use crate::redact::redacted;
use crate::store::StoreError;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Cmd, ErrorKind, Pipeline, RedisError, RedisResult, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest wait for a connection to a sentinel, and for its answer: short, as the next
/// sentinel is tried after it.
const SENTINEL_TIMEOUT: Duration = Duration::from_secs(2);

/// How often, while calls go on, the store asks the sentinels whether the primary is still the
/// one it uses. A planned failover (`SENTINEL FAILOVER`) promotes the replica while the old
/// primary keeps answering, and accepting writes, until the sentinels demote it, which can take
/// ten seconds: without this check every write of that time would land on the old primary and
/// be lost when it is demoted. With it, at most this long plus a sentinel's answer.
const PRIMARY_CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// The primary found through the sentinels: a multiplexed connection to it, forgotten after an
/// I/O error or a `READONLY` reply (a failover), or when the sentinels name another primary
/// (checked every [`PRIMARY_CHECK_INTERVAL`] while calls go on), so that the next call looks
/// for the primary again.
pub(super) struct SentinelConn {
    url: SentinelUrl,
    state: Arc<tokio::sync::Mutex<State>>,
}

/// What a [`SentinelConn`] knows of the primary.
#[derive(Default)]
struct State {
    /// The connection to the primary and its generation (each new connection counts one more).
    current: Option<(u64, MultiplexedConnection)>,
    generation: u64,
    /// The current primary's `host:port`, and when the sentinels last confirmed it (or it was
    /// found); `checking` while a check runs.
    addr: String,
    checked_at: Option<Instant>,
    checking: bool,
    /// Failed searches for the primary in a row: after each, calls fail at once with its
    /// error for the outage's wait (so that many concurrent callers do not hammer the
    /// sentinels), and the episode is logged when it begins and ends.
    outage: Outage,
}

/// The server found as the primary: its client (for the wake-up subscriber), a connection to
/// it, and its address.
pub(super) struct Primary {
    pub client: redis::Client,
    pub conn: MultiplexedConnection,
    pub addr: String,
}

/// Whether `e` means the connection (or the server's role) can no longer be trusted: a lost
/// connection ([`connection_lost`]), or a replica's refusal to write.
fn forgets(e: &redis::RedisError) -> bool {
    connection_lost(e) || matches!(e.code(), Some("READONLY" | "MASTERDOWN"))
}

impl SentinelConn {
    pub fn new(url: SentinelUrl) -> Self {
        SentinelConn {
            url,
            state: Arc::default(),
        }
    }

    /// Ask the sentinels, in the URL's order, for the primary of the master name; connect to
    /// the first one named that says (`ROLE`) it is a master. Bounded by the timeouts: each
    /// sentinel [`SENTINEL_TIMEOUT`], each server [`CONNECTION_TIMEOUT`] and
    /// [`RESPONSE_TIMEOUT`]. Errors: an I/O error naming each sentinel asked and its answer;
    /// when a primary a sentinel named refused orq's credentials, an authentication failure
    /// ([`ErrorKind::AuthenticationFailed`]: the engine's `WRONGPASS`, transient).
    pub async fn resolve(&self) -> Result<Primary, RedisError> {
        let master = &self.url.master;
        let mut problems = Vec::new();
        let mut unknown = 0;
        let mut refused = false;
        for s in &self.url.sentinels {
            let s = &redacted(s);
            let addr = match ask(s, master).await {
                Ok(Some(a)) => a,
                Ok(None) => {
                    unknown += 1;
                    problems.push(format!("{s}: no master named {master:?}"));
                    continue;
                }
                Err(e) => {
                    problems.push(format!("{s}: {e}"));
                    continue;
                }
            };
            match Self::connect_primary(&self.url.server_url(&addr.0, addr.1)).await {
                Ok((client, conn)) => {
                    return Ok(Primary {
                        client,
                        conn,
                        addr: format!("{}:{}", addr.0, addr.1),
                    })
                }
                Err(e) => {
                    refused |= e.kind() == ErrorKind::AuthenticationFailed;
                    problems.push(format!(
                        "{s} names {}:{} as the primary, but {}",
                        addr.0,
                        addr.1,
                        e.detail().unwrap_or_default()
                    ));
                }
            }
        }
        if unknown == self.url.sentinels.len() {
            return Err(io_error(format!(
                "no Redis Sentinel knows a master named {master:?} (sentinels asked: {})",
                self.url
                    .sentinels
                    .iter()
                    .map(|s| redacted(s))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let message = format!(
            "cannot find the Redis primary {master:?} through the sentinels: {}",
            problems.join("; ")
        );
        Err(if refused {
            RedisError::from((
                ErrorKind::AuthenticationFailed,
                "the Redis primary refused orq's credentials",
                message,
            ))
        } else {
            io_error(message)
        })
    }

    /// Whether some sentinel answers and knows the master name (the primary it names need not
    /// be up: a failover may be under way). Errors: no sentinel answers, or none knows the
    /// name; the message names each sentinel asked (without credentials) and its answer.
    pub async fn knows_master(&self) -> Result<(), StoreError> {
        let master = &self.url.master;
        let mut problems = Vec::new();
        let mut answered = 0;
        for s in &self.url.sentinels {
            let shown = crate::redact::redacted(s);
            match ask(s, master).await {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => answered += 1,
                Err(e) => problems.push(format!("{shown}: {e}")),
            }
        }
        let shown: Vec<String> = self
            .url
            .sentinels
            .iter()
            .map(|s| crate::redact::redacted(s))
            .collect();
        if answered > 0 {
            return Err(StoreError(format!(
                "no Redis Sentinel knows a master named {master:?} (sentinels asked: {}); check \
                 the name after the last / of the URL (SENTINEL MASTERS lists the names)",
                shown.join(", ")
            )));
        }
        Err(StoreError(format!(
            "no Redis Sentinel of the URL answers ({}); name at least one sentinel that is up",
            problems.join("; ")
        )))
    }

    /// Connect to the server at `url` and check it is a master. Errors: the `redis` crate's
    /// (an authentication failure keeps its kind), with a detail that says what failed.
    async fn connect_primary(
        url: &str,
    ) -> Result<(redis::Client, MultiplexedConnection), RedisError> {
        let client = redis::Client::open(url)?;
        let failed = |what: &str, e: RedisError| {
            let refused =
                authentication_failed(&e) || matches!(e.code(), Some("WRONGPASS" | "NOAUTH"));
            let kind = if refused {
                ErrorKind::AuthenticationFailed
            } else {
                ErrorKind::Io
            };
            let text = e.to_string();
            RedisError::from((kind, "the named primary failed", format!("{what}: {text}")))
        };
        let work = async {
            let config = server_config();
            let mut conn = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .map_err(|e| failed("cannot connect to it", e))?;
            let role: Value = redis::cmd("ROLE")
                .query_async(&mut conn)
                .await
                .map_err(|e| failed("ROLE failed", e))?;
            match super::admin::role_word(role).as_deref() {
                Some("master") => Ok(conn),
                other => Err(io_error(format!("it is not a master (ROLE: {other:?})"))),
            }
        };
        match tokio::time::timeout(CONNECTION_TIMEOUT + RESPONSE_TIMEOUT, work).await {
            Ok(r) => r.map(|conn| (client, conn)),
            Err(_) => Err(io_error("it did not answer in time".into())),
        }
    }

    /// The connection to the primary, found through the sentinels if there is none. One search
    /// at a time: calls that arrive during one wait for it and use its outcome.
    async fn conn(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        let mut st = self.state.lock().await;
        if let Some(c) = st.current.clone() {
            let due = st
                .checked_at
                .is_none_or(|at| at.elapsed() >= PRIMARY_CHECK_INTERVAL);
            if due && !st.checking {
                st.checking = true;
                tokio::spawn(check_primary(
                    self.url.clone(),
                    self.state.clone(),
                    c.0,
                    st.addr.clone(),
                ));
            }
            return Ok(c);
        }
        if let Some(e) = st.outage.holding(Instant::now()) {
            return Err(e);
        }
        let what = format!("the Redis primary {:?} through Sentinel", self.url.master);
        match self.resolve().await {
            Ok(p) => {
                st.generation += 1;
                tracing::info!(primary = %p.addr, master = %self.url.master,
                    "connected to the Redis primary found through Sentinel");
                st.current = Some((st.generation, p.conn));
                st.addr = p.addr;
                st.checked_at = Some(Instant::now());
                st.outage.recovered(Instant::now(), &what);
                Ok(st.current.clone().expect("just set"))
            }
            Err(e) => {
                st.outage.failed(Instant::now(), &what, &e);
                Err(e)
            }
        }
    }

    /// Send `cmd` to the primary. After an error that means a failover may have happened
    /// ([`forgets`]), the connection is forgotten, and the next call looks for the primary
    /// again; the error is returned as it is.
    pub async fn query(&self, cmd: &Cmd) -> RedisResult<Value> {
        let (generation, mut conn) = self.conn().await?;
        let reply = cmd.query_async(&mut conn).await;
        self.after(generation, reply).await
    }

    /// [`SentinelConn::query`] of a pipeline (with `ignore_errors`: each command's reply in
    /// its own entry), on one connection to the primary.
    pub async fn query_pipeline(&self, p: &Pipeline) -> RedisResult<Vec<RedisResult<Value>>> {
        let (generation, mut conn) = self.conn().await?;
        let reply = p.query_async(&mut conn).await;
        self.after(generation, reply).await
    }

    /// Forget the connection of `generation` when `reply` is an error that means a failover
    /// may have happened ([`forgets`]); `reply` as it is.
    async fn after<T>(&self, generation: u64, reply: RedisResult<T>) -> RedisResult<T> {
        if let Err(e) = &reply {
            if forgets(e) {
                let mut st = self.state.lock().await;
                if st.current.as_ref().is_some_and(|(g, _)| *g == generation) {
                    tracing::warn!(error = %e, master = %self.url.master,
                        "lost the Redis primary; asking the sentinels again at the next call");
                    st.current = None;
                }
            }
        }
        reply
    }
}

/// Ask the sentinels, in the URL's order, which server is the primary; when the first that
/// answers names another one than `addr` (the primary of connection `generation`), forget that
/// connection, so the next call finds the new primary. No answer changes nothing.
async fn check_primary(
    url: SentinelUrl,
    state: Arc<tokio::sync::Mutex<State>>,
    generation: u64,
    addr: String,
) {
    let mut named = None;
    for s in &url.sentinels {
        if let Ok(Some((host, port))) = ask(s, &url.master).await {
            named = Some(format!("{host}:{port}"));
            break;
        }
    }
    let mut st = state.lock().await;
    st.checking = false;
    st.checked_at = Some(Instant::now());
    if let Some(named) = named {
        if named != addr && st.current.as_ref().is_some_and(|(g, _)| *g == generation) {
            tracing::warn!(old = %addr, new = %named, master = %url.master,
                "the sentinels name a new Redis primary; switching at the next call");
            st.current = None;
        }
    }
}

/// `SENTINEL GET-MASTER-ADDR-BY-NAME master` on the sentinel at `url`: the primary's `(host,
/// port)`, or `None` when the sentinel does not know the name.
async fn ask(url: &str, master: &str) -> Result<Option<(String, u16)>, String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(SENTINEL_TIMEOUT))
        .set_response_timeout(Some(SENTINEL_TIMEOUT));
    let work = async {
        let mut c = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(master)
            .query_async::<Option<(String, u16)>>(&mut c)
            .await
    };
    match tokio::time::timeout(SENTINEL_TIMEOUT * 2, work).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err("no answer in time".into()),
    }
}

/// An I/O error carrying `msg` (a failure to reach the primary: transient for the engine).
fn io_error(msg: String) -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(std::io::ErrorKind::NotConnected, msg))
}
