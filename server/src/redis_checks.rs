//! What orq checks of a Redis deployment when a role starts with `--redis`: that it is a
//! primary (orq writes on every call; a replica answers READONLY), that its `maxmemory-policy`
//! cannot evict orq's keys, and that it persists something. The first refuses to start (exit
//! code 2); the others are loud warnings. `CONFIG GET` may be refused (managed services rename
//! it): then the check says it could not look, and orq starts.
//!
//! On a Redis Cluster (`redis+cluster://`) the first check does not apply: the cluster client
//! sends every call to the primary of its slot, whichever nodes the URL names (replicas
//! included). The warnings look at every primary, and name the primaries they concern.
//!
//! With Sentinel (`redis+sentinel://`) the checks look at the primary the sentinels name (the
//! store checks it says it is a master before using it, so the replica check passes unless it
//! was demoted in between).

use orq::redact::redacted;
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

/// Read `maxmemory-policy` from `store` (from every primary of a cluster) and return
/// [`maxmemory_warning`]'s warnings, if any (none too when the server refuses CONFIG GET, as
/// some managed services do).
pub async fn check_maxmemory(store: &RedisStore) -> Vec<String> {
    match store.config_get_each("maxmemory-policy").await {
        Some(policies) => per_primary(
            policies
                .into_iter()
                .map(|(node, policy)| (node, maxmemory_warning(&policy)))
                .collect(),
        ),
        None => {
            tracing::info!("cannot read Redis maxmemory-policy (CONFIG GET refused); make sure it is noeviction");
            Vec::new()
        }
    }
}

/// The distinct warnings of `(node, warning)` pairs (node `""` for a single server, `host:port`
/// for a cluster primary), each naming the cluster primaries it concerns.
pub fn per_primary(warnings: Vec<(String, Option<String>)>) -> Vec<String> {
    let mut nodes_of: Vec<(String, Vec<String>)> = Vec::new();
    for (node, warning) in warnings {
        let Some(w) = warning else { continue };
        match nodes_of.iter_mut().find(|(seen, _)| *seen == w) {
            Some((_, nodes)) => nodes.push(node),
            None => nodes_of.push((w, vec![node])),
        }
    }
    nodes_of
        .into_iter()
        .map(|(w, nodes)| {
            let nodes: Vec<String> = nodes.into_iter().filter(|n| !n.is_empty()).collect();
            if nodes.is_empty() {
                w
            } else {
                format!("{w} (Redis Cluster primaries: {})", nodes.join(", "))
            }
        })
        .collect()
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
        "--redis {} is a read-only replica: orq writes on every call; point --redis at the \
         primary (or, with Sentinel, at the Sentinels)",
        redacted(url)
    )
}

/// Check the deployment behind `store` (reachable): Err (refuse to start) for a replica (not
/// on a cluster, where the client finds the primaries itself), else the warnings to log.
pub async fn check_deployment(store: &RedisStore, url: &str) -> Result<Vec<String>, String> {
    if !store.is_cluster() && store.role().await.as_deref() == Some("slave") {
        return Err(replica_error(url));
    }
    let mut warnings = check_maxmemory(store).await;
    match (
        store.config_get_each("appendonly").await,
        store.config_get_each("save").await,
    ) {
        (Some(aof), Some(save)) => warnings.extend(per_primary(
            aof.into_iter()
                .map(|(node, aof)| {
                    let save = save.iter().find(|(n, _)| *n == node).map(|(_, s)| s.as_str());
                    // A primary whose `save` was not read (it joined between the two calls) is
                    // not judged.
                    let w = save.and_then(|save| persistence_warning(&aof, save));
                    (node, w)
                })
                .collect(),
        )),
        _ => tracing::info!(
            "cannot read Redis persistence settings (CONFIG GET refused); make sure AOF or RDB is on"
        ),
    }
    Ok(warnings)
}

/// One field (`name:value` line) of an `INFO` text.
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// What orq connected to, for the startup log: the address (password hidden), the kind of
/// deployment, and for each primary its Redis version, role and whether AOF is on, from
/// `INFO server replication persistence` (a Redis that persists nothing is also warned about,
/// [`persistence_warning`]). Says so when INFO is refused.
pub async fn describe_deployment(store: &RedisStore, url: &str) -> String {
    let kind = if store.is_cluster() {
        "Redis Cluster"
    } else if url.starts_with("redis+sentinel") {
        "Redis via Sentinel"
    } else {
        "Redis"
    };
    let at = redacted(url);
    let Some(nodes) = store
        .info_each(&["server", "replication", "persistence"])
        .await
    else {
        return format!(
            "connected to {kind} at {at} (INFO refused: version and persistence unknown)"
        );
    };
    let each: Vec<String> = nodes
        .iter()
        .map(|(node, info)| {
            let version = info_field(info, "redis_version").unwrap_or("?");
            let role = info_field(info, "role").unwrap_or("?");
            let aof = match info_field(info, "aof_enabled") {
                Some("1") => "on",
                Some(_) => "off",
                None => "?",
            };
            let name = if node.is_empty() {
                String::new()
            } else {
                format!("{node} ")
            };
            format!("{name}Redis {version}, role {role}, AOF {aof}")
        })
        .collect();
    format!("connected to {kind} at {at}: {}", each.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: the startup line reads INFO's fields (its URL goes through orq::redact, tested in the
    // engine).
    #[test]
    fn info_fields_are_read() {
        let info = "# Server\r\nredis_version:7.0.15\r\nrole:master\r\naof_enabled:1\r\n";
        assert_eq!(info_field(info, "redis_version"), Some("7.0.15"));
        assert_eq!(info_field(info, "role"), Some("master"));
        assert_eq!(info_field(info, "aof_enabled"), Some("1"));
        assert_eq!(info_field(info, "redis"), None);
    }

    // Goal: the replica error that stops orq at startup shows the URL without its password.
    #[test]
    fn the_replica_error_hides_the_password() {
        let e = replica_error("redis://:s3cret@h:6379/0");
        assert!(e.contains("redis://:***@h:6379/0"), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
    }

    // Goal: only a Redis with neither AOF nor RDB snapshots is warned about.
    #[test]
    fn a_redis_that_persists_nothing_is_warned_about() {
        assert!(persistence_warning("no", "").is_some());
        assert!(persistence_warning("no", "  ").is_some());
        assert_eq!(persistence_warning("yes", ""), None);
        assert_eq!(persistence_warning("no", "3600 1 300 100"), None);
    }

    // Goal: one warning per distinct problem; on a cluster it names the primaries it concerns,
    // on a single server (node "") nothing is added.
    #[test]
    fn warnings_name_the_cluster_primaries_they_concern() {
        let lru = maxmemory_warning("allkeys-lru");
        assert_eq!(
            per_primary(vec![("".into(), lru.clone()), ("".into(), None)]),
            vec![lru.clone().unwrap()]
        );
        let ttl = maxmemory_warning("volatile-ttl");
        let got = per_primary(vec![
            ("127.0.0.1:7000".into(), lru.clone()),
            ("127.0.0.1:7001".into(), None),
            ("127.0.0.1:7002".into(), lru.clone()),
            ("127.0.0.1:7003".into(), ttl.clone()),
        ]);
        assert_eq!(
            got,
            vec![
                format!(
                    "{} (Redis Cluster primaries: 127.0.0.1:7000, 127.0.0.1:7002)",
                    lru.unwrap()
                ),
                format!("{} (Redis Cluster primaries: 127.0.0.1:7003)", ttl.unwrap()),
            ]
        );
        assert!(per_primary(vec![("127.0.0.1:7000".into(), None)]).is_empty());
    }
}
