//! Parsing of the URL forms of a [`super::RedisStore`].

use crate::store::StoreError;

/// The URL scheme of a Redis Cluster: `redis+cluster://[user:password@]host:port[,host:port...]`.
pub const CLUSTER_SCHEME: &str = "redis+cluster://";

/// The node URLs (`redis://[userinfo@]host:port/`) of a cluster URL,
/// `redis+cluster://[user[:password]@]host[:port][,host[:port]...][/]` (port 6379 when left
/// out; an IPv6 host in brackets). Errors: no host, an empty entry, a port that is not
/// 1..=65535, a database other than 0 (a cluster has only database 0), query parameters.
pub(super) fn cluster_node_urls(url: &str) -> Result<Vec<String>, StoreError> {
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
    Ok(host_list(hosts, 6379, "node", &bad)?
        .into_iter()
        .map(|(host, port)| match userinfo {
            Some(u) => format!("redis://{u}@{host}:{port}/"),
            None => format!("redis://{host}:{port}/"),
        })
        .collect())
}

/// The `(host, port)` pairs of `hosts`, `host[:port][,host[:port]...]` (`default_port` when
/// left out; an IPv6 host in brackets, kept in its brackets). Errors (`bad`, naming each entry
/// a `what`): an empty entry or host, a port that is not 1..=65535.
fn host_list(
    hosts: &str,
    default_port: u16,
    what: &str,
    bad: &dyn Fn(String) -> StoreError,
) -> Result<Vec<(String, u16)>, StoreError> {
    hosts
        .split(',')
        .map(|entry| {
            let (host, port) = if let Some(v6) = entry.strip_prefix('[') {
                let (h, after) = v6
                    .split_once(']')
                    .ok_or_else(|| bad(format!("{what} {entry:?}: no closing ']'")))?;
                match after {
                    "" => (format!("[{h}]"), None),
                    p => match p.strip_prefix(':') {
                        Some(p) => (format!("[{h}]"), Some(p)),
                        None => return Err(bad(format!("{what} {entry:?}: expected [host]:port"))),
                    },
                }
            } else {
                match entry.rsplit_once(':') {
                    Some((h, p)) => (h.to_string(), Some(p)),
                    None => (entry.to_string(), None),
                }
            };
            if host.is_empty() || host == "[]" {
                return Err(bad(format!("{what} {entry:?}: no host")));
            }
            let port = match port {
                None => default_port,
                Some(p) => match p.parse::<u16>() {
                    Ok(p) if p > 0 => p,
                    _ => {
                        return Err(bad(format!(
                            "{what} {entry:?}: port {p:?} is not 1..=65535"
                        )))
                    }
                },
            };
            Ok((host, port))
        })
        .collect()
}

/// The URL scheme of a Sentinel deployment:
/// `redis+sentinel://[user:password@]host:port[,host:port...]/<master-name>[/<db>]`.
pub const SENTINEL_SCHEME: &str = "redis+sentinel://";

/// A parsed `redis+sentinel://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SentinelUrl {
    /// The sentinels' URLs, `redis://host:port/`, in the URL's order.
    pub sentinels: Vec<String>,
    /// The name the sentinels monitor the primary under.
    pub master: String,
    /// The primary's database.
    pub db: i64,
    /// `user:password` (URL-encoded, as written) for the data servers; the sentinels are asked
    /// without credentials.
    pub userinfo: Option<String>,
}

impl SentinelUrl {
    /// The URL of the data server at `host:port` (as a sentinel names it), with this URL's
    /// credentials and database.
    pub fn server_url(&self, host: &str, port: u16) -> String {
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        match &self.userinfo {
            Some(u) => format!("redis://{u}@{host}:{port}/{}", self.db),
            None => format!("redis://{host}:{port}/{}", self.db),
        }
    }
}

/// Parse a Sentinel URL,
/// `redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/<master-name>[/<db>]`
/// (port 26379 when left out). Errors: no sentinel, an empty entry, a bad port, no master name,
/// a database that is not a number, query parameters.
pub(super) fn sentinel_url(url: &str) -> Result<SentinelUrl, StoreError> {
    let bad = |why: String| {
        StoreError(format!(
            "bad Redis Sentinel URL: {why} (expected {SENTINEL_SCHEME}host:port[,host:port...]/\
             <master-name>[/<db>])"
        ))
    };
    let rest = url
        .strip_prefix(SENTINEL_SCHEME)
        .ok_or_else(|| bad(format!("it must start with {SENTINEL_SCHEME}")))?;
    if rest.contains(['?', '#']) {
        return Err(bad(
            "query parameters and fragments are not supported".into()
        ));
    }
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u.to_string()), h),
        None => (None, authority),
    };
    if hosts.is_empty() {
        return Err(bad("no sentinel".into()));
    }
    let sentinels = host_list(hosts, 26379, "sentinel", &bad)?
        .into_iter()
        .map(|(host, port)| format!("redis://{host}:{port}/"))
        .collect();
    let path = path.strip_suffix('/').unwrap_or(path);
    let (master, db) = path.split_once('/').unwrap_or((path, ""));
    if master.is_empty() {
        return Err(bad("no master name".into()));
    }
    let db = match db {
        "" => 0,
        d => d
            .parse::<i64>()
            .ok()
            .filter(|d| *d >= 0)
            .ok_or_else(|| bad(format!("database {d:?} is not a number")))?,
    };
    Ok(SentinelUrl {
        sentinels,
        master: master.to_string(),
        db,
        userinfo,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
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

    // Goal: a Sentinel URL gives the sentinels to ask, the master name and the database, and
    // every malformed one is a clear error (never a panic).
    #[test]
    fn sentinel_urls_are_parsed() {
        let u = sentinel_url("redis+sentinel://127.0.0.1:26379,h2,[::1]:26380/mymaster").unwrap();
        assert_eq!(
            u.sentinels,
            [
                "redis://127.0.0.1:26379/",
                "redis://h2:26379/",
                "redis://[::1]:26380/"
            ]
        );
        assert_eq!(u.master, "mymaster");
        assert_eq!(u.db, 0);
        assert_eq!(u.userinfo, None);
        assert_eq!(u.server_url("10.0.0.1", 6380), "redis://10.0.0.1:6380/0");
        assert_eq!(u.server_url("::1", 6380), "redis://[::1]:6380/0");
        let u = sentinel_url("redis+sentinel://u:p@s1:1/m/3/").unwrap();
        assert_eq!((u.master.as_str(), u.db), ("m", 3));
        assert_eq!(u.server_url("h", 7), "redis://u:p@h:7/3");
        for bad in [
            "redis+sentinel://",
            "redis+sentinel:///m",
            "redis+sentinel://h:1",
            "redis+sentinel://h:1/",
            "redis+sentinel://h:1,/m",
            "redis+sentinel://h:port/m",
            "redis+sentinel://h:0/m",
            "redis+sentinel://h:65536/m",
            "redis+sentinel://h:1/m/x",
            "redis+sentinel://h:1/m/-1",
            "redis+sentinel://h:1/m?x=1",
            "redis://h:1/m",
        ] {
            let e = sentinel_url(bad).expect_err(bad);
            assert!(e.0.starts_with("bad Redis Sentinel URL"), "{bad}: {e}");
        }
    }
}
