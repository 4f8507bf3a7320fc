//! Whether a `--redis` URL's deployment can be found at all ([`RedisStore::find_deployment`]),
//! which the roles ask once at startup: a cluster URL none of whose nodes answers, or a
//! Sentinel URL whose sentinels do not answer or do not know the master name, is a
//! configuration error to stop on with a clear message, not an outage to wait out.

use super::url::cluster_node_urls;
use super::{Conn, RedisStore, CONNECTION_TIMEOUT};
use crate::redact::redacted;
use crate::store::StoreError;
use redis::AsyncConnectionConfig;

impl RedisStore {
    /// Whether the deployment the URL names can be found.
    ///
    /// - A cluster URL (`redis+cluster://`): some node it names answers PING (any one is
    ///   enough; the others are learnt from it).
    /// - A Sentinel URL (`redis+sentinel://`): some sentinel answers and knows the master name.
    /// - A single-server URL: always `Ok` (the server may come up later; every call retries).
    ///
    /// Errors: a message naming each node or sentinel asked (without credentials) and what it
    /// answered. Bounded: each node gets `CONNECTION_TIMEOUT` (5 s) to connect and as long
    /// to answer; each sentinel the sentinel timeout (2 s). A found deployment may still be
    /// unable to serve for a while (CLUSTERDOWN, a primary being failed over): those are
    /// transient, and the store's calls retry them.
    pub async fn find_deployment(&self) -> Result<(), StoreError> {
        match &self.conn {
            Conn::Single(_) => Ok(()),
            Conn::Sentinel(s) => s.knows_master().await,
            Conn::Cluster(_) => {
                let mut problems = Vec::new();
                for node in cluster_node_urls(&self.url)? {
                    match ping(&node).await {
                        Ok(()) => return Ok(()),
                        Err(e) => problems.push(format!("{}: {e}", redacted(&node))),
                    }
                }
                Err(StoreError(format!(
                    "no node of the Redis Cluster URL answers ({}); name at least one node that \
                     is up",
                    problems.join("; ")
                )))
            }
        }
    }
}

/// Connect to the server at `url` and PING it, within the timeouts.
async fn ping(url: &str) -> Result<(), String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECTION_TIMEOUT))
        .set_response_timeout(Some(CONNECTION_TIMEOUT));
    let work = async {
        let mut c = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        redis::cmd("PING").query_async::<String>(&mut c).await
    };
    match tokio::time::timeout(CONNECTION_TIMEOUT * 2, work).await {
        Ok(r) => r.map(drop).map_err(|e| e.to_string()),
        Err(_) => Err("no answer in time".into()),
    }
}
