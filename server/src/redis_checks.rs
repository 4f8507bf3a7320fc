//! What orq checks of a Redis deployment when a role starts with `--redis`: that it is a
//! primary (orq writes on every call; a replica answers READONLY), that its `maxmemory-policy`
//! cannot evict orq's keys, and that it persists something. The first refuses to start (exit
//! code 2); the others are loud warnings. `CONFIG GET` may be refused (managed services rename
//! it): then the check says it could not look, and orq starts.

use orq::RedisStore;

/// The warning for a Redis `maxmemory-policy` that can evict orq's keys, `None` for
/// `noeviction`. Any `allkeys-*` policy can drop task hashes, indexes and leases once Redis
/// reaches `maxmemory`; the `volatile-*` ones drop keys with a TTL, which includes orq's
/// idempotency keys (kept 24 h), so a retried submit could create a second task.
pub fn maxmemory_warning(policy: &str) -> Option<String> {
    match policy {
        "noeviction" => None,
        p if p.starts_with("volatile-") => Some(format!(
            "Redis maxmemory-policy is {p}: once Redis reaches maxmemory it evicts keys that have \
             a TTL, and orq's idempotency keys have one, so a retried submit could create a second \
             task; set maxmemory-policy noeviction"
        )),
        p => Some(format!(
            "Redis maxmemory-policy is {p}: once Redis reaches maxmemory it may evict any of orq's \
             keys (tasks, queue indexes, leases) and lose tasks without a trace; set \
             maxmemory-policy noeviction"
        )),
    }
}

/// Read `maxmemory-policy` from `store` and return [`maxmemory_warning`]'s warning, if any
/// (`None` too when the server refuses CONFIG GET, as some managed services do).
pub async fn check_maxmemory(store: &RedisStore) -> Option<String> {
    match store.config_get("maxmemory-policy").await {
        Some(policy) => maxmemory_warning(&policy),
        None => {
            tracing::info!("cannot read Redis maxmemory-policy (CONFIG GET refused); make sure it is noeviction");
            None
        }
    }
}

/// The warning for a Redis that keeps nothing on disk (`appendonly no` and an empty `save`): a
/// restart of Redis loses every task. `None` when AOF or RDB snapshots are on.
pub fn persistence_warning(appendonly: &str, save: &str) -> Option<String> {
    if appendonly == "yes" || !save.trim().is_empty() {
        return None;
    }
    Some(
        "Redis persists nothing (appendonly no, save \"\"): a restart of Redis loses every \
         task, lease and DLQ entry; turn on AOF (appendonly yes, appendfsync everysec or always) \
         or RDB snapshots (README, Durability)"
            .to_string(),
    )
}

/// The error for a `--redis` URL that names a replica (`ROLE` answered `slave`): every call
/// of orq writes, and a replica refuses writes.
pub fn replica_error(url: &str) -> String {
    format!(
        "--redis {url} is a read-only replica: orq writes on every call; point --redis at the \
         primary (or, with Sentinel, at the Sentinels)"
    )
}

/// Check the deployment behind `store` (reachable): Err (refuse to start) for a replica, else
/// the warnings to log.
pub async fn check_deployment(store: &RedisStore, url: &str) -> Result<Vec<String>, String> {
    if store.role().await.as_deref() == Some("slave") {
        return Err(replica_error(url));
    }
    let mut warnings = Vec::new();
    warnings.extend(check_maxmemory(store).await);
    match (
        store.config_get("appendonly").await,
        store.config_get("save").await,
    ) {
        (Some(aof), Some(save)) => warnings.extend(persistence_warning(&aof, &save)),
        _ => tracing::info!(
            "cannot read Redis persistence settings (CONFIG GET refused); make sure AOF or RDB is on"
        ),
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: only a Redis with neither AOF nor RDB snapshots is warned about.
    #[test]
    fn a_redis_that_persists_nothing_is_warned_about() {
        assert!(persistence_warning("no", "").is_some());
        assert!(persistence_warning("no", "  ").is_some());
        assert_eq!(persistence_warning("yes", ""), None);
        assert_eq!(persistence_warning("no", "3600 1 300 100"), None);
    }
}
