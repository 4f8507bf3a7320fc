//! The connection of a [`super::RedisStore`] on one server (`redis://`, `rediss://`): one
//! multiplexed connection (concurrent calls pipeline on it), made at the first call, forgotten
//! when it is lost, and made again by the next call; a failed attempt is tried again after the
//! outage's wait ([`super::outage`]), whatever it failed with.
//!
//! This replaces the `redis` crate's `ConnectionManager`, which keeps a failed reconnection's
//! error for good unless it is an I/O error: after a password change and a dropped connection
//! it answered every later call with "authentication failed" and never connected again, even
//! once the password worked (issue 42, item 10).

use super::outage::Outage;
use super::{CONNECTION_TIMEOUT, RESPONSE_TIMEOUT};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisResult, Value};
use std::time::Instant;

/// A connection to one server, made again after any failure.
pub(super) struct ServerConn {
    client: redis::Client,
    /// What logs call the server: `the Redis server at host:port` (no credentials).
    what: String,
    state: std::sync::Mutex<State>,
    /// Held by the one call that connects; calls arriving meanwhile wait for its outcome.
    connecting: tokio::sync::Mutex<()>,
}

/// What a [`ServerConn`] has.
#[derive(Default)]
struct State {
    /// The connection and its generation (each new connection counts one more).
    current: Option<(u64, MultiplexedConnection)>,
    generation: u64,
    outage: Outage,
}

/// Whether `e` means the connection can no longer be used: an I/O error, a dropped connection,
/// a timeout, or what the `redis` crate judges unrecoverable (a reply it cannot parse).
pub(super) fn connection_lost(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_timeout() || e.is_unrecoverable_error()
}

/// The settings of a connection to a data server.
pub(super) fn server_config() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECTION_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
}

impl ServerConn {
    /// No connection yet: the first call makes it.
    pub fn new(client: redis::Client) -> Self {
        let what = format!(
            "the Redis server at {}",
            client.get_connection_info().addr()
        );
        ServerConn {
            client,
            what,
            state: std::sync::Mutex::default(),
            connecting: tokio::sync::Mutex::const_new(()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("server connection state poisoned")
    }

    /// The connection, made if there is none: one attempt at a time, and none while the wait
    /// after a failed one lasts (calls then fail at once with its error).
    async fn conn(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        if let Some(c) = self.state().current.clone() {
            return Ok(c);
        }
        let _one = self.connecting.lock().await;
        {
            let st = self.state();
            if let Some(c) = st.current.clone() {
                return Ok(c);
            }
            if let Some(e) = st.outage.holding(Instant::now()) {
                return Err(e);
            }
        }
        let made = connect(&self.client).await;
        let mut st = self.state();
        match made {
            Ok(conn) => {
                st.generation += 1;
                st.current = Some((st.generation, conn));
                st.outage.recovered(Instant::now(), &self.what);
                Ok(st.current.clone().expect("just set"))
            }
            Err(e) => {
                st.outage.failed(Instant::now(), &self.what, &e);
                Err(e)
            }
        }
    }

    /// Send `cmd`; after an error that means the connection is lost ([`connection_lost`]), the
    /// next call connects again. The error is returned as it is.
    pub async fn query(&self, cmd: &Cmd) -> RedisResult<Value> {
        let (generation, mut conn) = self.conn().await?;
        let reply = cmd.query_async(&mut conn).await;
        self.after(generation, reply)
    }

    /// [`ServerConn::query`] of a pipeline (with `ignore_errors`: each command's reply in its
    /// own entry), on one connection.
    pub async fn query_pipeline(&self, p: &Pipeline) -> RedisResult<Vec<RedisResult<Value>>> {
        let (generation, mut conn) = self.conn().await?;
        let reply = p.query_async(&mut conn).await;
        self.after(generation, reply)
    }

    /// Forget the connection of `generation` when `reply` says it is lost; `reply` as it is.
    fn after<T>(&self, generation: u64, reply: RedisResult<T>) -> RedisResult<T> {
        if let Err(e) = &reply {
            if connection_lost(e) {
                let mut st = self.state();
                if st.current.as_ref().is_some_and(|(g, _)| *g == generation) {
                    tracing::debug!(error = %e, at = %self.what, "lost the Redis connection");
                    st.current = None;
                }
            }
        }
        reply
    }
}

/// Connect to the server of `client`, within the timeouts.
async fn connect(client: &redis::Client) -> RedisResult<MultiplexedConnection> {
    let config = server_config();
    let work = client.get_multiplexed_async_connection_with_config(&config);
    match tokio::time::timeout(CONNECTION_TIMEOUT + RESPONSE_TIMEOUT, work).await {
        Ok(r) => r,
        Err(_) => Err(redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the Redis server did not answer in time",
        ))),
    }
}
