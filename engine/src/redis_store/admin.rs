//! Admin calls of a [`RedisStore`]: readiness, role, configuration, memory, `INFO` of each
//! primary, a key's primary, bulk delete.

use super::{Conn, RedisStore, Route};
use crate::store::StoreError;
use redis::Value;

/// The role word (`master`, `slave`, `sentinel`) of a `ROLE` reply.
pub(super) fn role_word(v: Value) -> Option<String> {
    let Value::Array(items) = v else { return None };
    match items.into_iter().next()? {
        Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

impl RedisStore {
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
            Conn::Single(_) | Conn::Sentinel(_) => vec![None],
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

    /// The `INFO` text of the given sections (`["commandstats", "cpu"]`; Redis 7 takes several)
    /// from each primary: `(node, text)` pairs sorted by node (`host:port`), one pair with node
    /// `""` on a single server or under Sentinel. For benchmarks, which take deltas of the
    /// counters (never `CONFIG RESETSTAT`, which would disturb the server's other users). None
    /// when a server refuses (managed services may rename INFO) or cannot be reached.
    pub async fn info_each(&self, sections: &[&str]) -> Option<Vec<(String, String)>> {
        let mut out = Vec::new();
        for (node, reply) in self
            .query_each(redis::cmd("INFO").arg(sections))
            .await
            .ok()?
        {
            out.push((node, redis::from_redis_value(reply.ok()?).ok()?));
        }
        (!out.is_empty()).then_some(out)
    }

    /// The node serving `key`'s hash slot, as [`RedisStore::info_each`] names it: `host:port` of
    /// its primary on a cluster (matched by `CLUSTER MYID`), `""` on a single server or under
    /// Sentinel. None when a node does not answer.
    pub async fn primary_of(&self, key: &str) -> Option<String> {
        if !matches!(self.conn, Conn::Cluster(_)) {
            return Some(String::new());
        }
        let myid = || redis::cmd("CLUSTER").arg("MYID").clone();
        let id = |v: Value| redis::from_redis_value::<String>(v).ok();
        let want = id(self.query(&myid(), Route::Slot(key)).await.ok()?)?;
        for (node, reply) in self.query_each(&myid()).await.ok()? {
            if id(reply.ok()?)? == want {
                return Some(node);
            }
        }
        None
    }
}
