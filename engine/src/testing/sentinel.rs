//! A private Sentinel deployment for tests: one primary, one replica and three `redis-sentinel`
//! processes (quorum 2) on free loopback ports, stopped when dropped. Used to test that orq
//! finds the primary through Sentinel and follows a failover.

use super::{free_port, node_conn, spawn_server, START_TIMEOUT};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// The name the sentinels monitor the primary under.
pub const MASTER_NAME: &str = "orqmaster";

/// How long a failover may take before a fixture gives up (a Sentinel failover here takes a
/// few seconds: `down-after-milliseconds` 1 s, an election, a promotion).
pub const FAILOVER_TIMEOUT: Duration = Duration::from_secs(60);

/// Sentinels started: three, so that a failover needs a majority (2) as in production.
const SENTINELS: usize = 3;

/// One process of the deployment.
#[derive(Debug)]
struct Proc {
    child: Option<Child>,
    port: u16,
}

impl Proc {
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A primary, a replica and three sentinels monitoring them as [`MASTER_NAME`].
#[derive(Debug)]
pub struct RedisSentinel {
    servers: Vec<Proc>,
    sentinels: Vec<Proc>,
    dir: PathBuf,
}

/// Start `redis-server` with `args(port)` in `dir` on a free port ([`super::spawn_server`]).
fn spawn(dir: &Path, args: impl Fn(u16) -> Vec<String>) -> Proc {
    let (child, port) = spawn_server(dir, free_port, args);
    Proc {
        child: Some(child),
        port,
    }
}

/// The arguments of a data server on `port` with its files in `dir`: a private server's
/// ([`super::server_args`]), an RDB file of its own (the servers share `dir`), and a replica's
/// full sync starts at once (Redis 7.0 waits 5 s for more replicas to join a diskless transfer
/// by default).
fn server_args(port: u16, dir: &std::path::Path) -> Vec<String> {
    let mut args = super::server_args(port, dir);
    args.extend(
        [
            "--repl-diskless-sync-delay",
            "0",
            "--dbfilename",
            &format!("dump-{port}.rdb"),
        ]
        .map(String::from),
    );
    args
}

/// One command to the server on `port`; `None` when it cannot be reached or answers an error.
fn query<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> Option<T> {
    let mut cmd = redis::cmd(args[0]);
    cmd.arg(&args[1..]);
    cmd.query(&mut node_conn(port)?).ok()
}

/// Wait for `cond`, polling every 50 ms; panic with `what` after `timeout`.
fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "sentinel fixture: timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl RedisSentinel {
    /// Start the deployment and wait until every sentinel knows the primary, the replica and
    /// the other sentinels, and the replica is in sync. Panics (failing the test) when
    /// `redis-server` is missing or the deployment never forms.
    pub fn start() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "orq-sentinel-{}-{:08x}",
            std::process::id(),
            super::random_u64() as u32
        ));
        std::fs::create_dir_all(&dir).expect("create the sentinel fixture's directory");
        let primary = spawn(&dir, |port| server_args(port, &dir));
        let primary_port = primary.port;
        let replica = spawn(&dir, |port| {
            let mut a = server_args(port, &dir);
            a.extend([
                "--replicaof".to_string(),
                "127.0.0.1".to_string(),
                primary_port.to_string(),
            ]);
            a
        });
        let mut me = RedisSentinel {
            servers: vec![primary, replica],
            sentinels: Vec::new(),
            dir,
        };
        let replica_port = me.servers[1].port;
        wait_for("the replica to sync", START_TIMEOUT, || {
            query::<String>(replica_port, &["INFO", "replication"])
                .is_some_and(|i| i.contains("master_link_status:up"))
        });
        for i in 0..SENTINELS {
            let conf = me.dir.join(format!("sentinel-{i}.conf"));
            let dir = me.dir.clone();
            let sentinel = spawn(&me.dir, |port| {
                // Sentinel rewrites its config file, so each has its own, written per try.
                let text = format!(
                    "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {}\n\
                     sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} 2\n\
                     sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                     sentinel failover-timeout {MASTER_NAME} 10000\n\
                     sentinel parallel-syncs {MASTER_NAME} 1\n",
                    dir.display()
                );
                std::fs::write(&conf, text).expect("write a sentinel config");
                vec![conf.display().to_string(), "--sentinel".to_string()]
            });
            me.sentinels.push(sentinel);
        }
        for s in &me.sentinels {
            let port = s.port;
            wait_for(
                "every sentinel to know the replica and the other sentinels",
                START_TIMEOUT,
                || {
                    let replicas: Option<Vec<redis::Value>> =
                        query(port, &["SENTINEL", "REPLICAS", MASTER_NAME]);
                    let peers: Option<Vec<redis::Value>> =
                        query(port, &["SENTINEL", "SENTINELS", MASTER_NAME]);
                    replicas.is_some_and(|r| !r.is_empty())
                        && peers.is_some_and(|p| p.len() == SENTINELS - 1)
                },
            );
        }
        me
    }

    /// `redis+sentinel://127.0.0.1:<s1>,127.0.0.1:<s2>,127.0.0.1:<s3>/<MASTER_NAME>`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// The sentinels' ports.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|s| s.port).collect()
    }

    /// The ports of the two data servers (the first started as the primary).
    pub fn server_ports(&self) -> Vec<u16> {
        self.servers.iter().map(|s| s.port).collect()
    }

    /// The primary's port as the sentinels say (the first that answers), or `None` when none
    /// answers.
    pub fn primary_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| {
            let addr: Vec<String> = query(
                s.port,
                &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME],
            )?;
            addr.get(1)?.parse().ok()
        })
    }

    /// `redis://127.0.0.1:<primary>/`, as the sentinels say now.
    pub fn primary_url(&self) -> String {
        format!(
            "redis://127.0.0.1:{}/",
            self.primary_port().expect("no sentinel answers")
        )
    }

    /// Kill -9 the current primary (a crash); the sentinels fail over to the replica after
    /// `down-after-milliseconds`. Returns the killed port.
    pub fn kill_primary(&mut self) -> u16 {
        let port = self.primary_port().expect("no sentinel answers");
        for s in &mut self.servers {
            if s.port == port {
                s.kill();
            }
        }
        port
    }

    /// Start the data server on `port`, killed earlier, again (empty: it persists nothing) as a
    /// replica of the primary the sentinels name now, as an operator brings a crashed node back;
    /// returns once its link to the primary is up (its full sync done). Panics when `port` is
    /// not a killed server of this deployment or the sync does not happen within
    /// [`FAILOVER_TIMEOUT`].
    pub fn restart_as_replica(&mut self, port: u16) {
        let primary = self.primary_port().expect("no sentinel answers");
        assert_ne!(primary, port, "the sentinels still name {port} the primary");
        let dir = self.dir.clone();
        let server = self
            .servers
            .iter_mut()
            .find(|s| s.port == port && s.child.is_none())
            .unwrap_or_else(|| panic!("no killed server of this deployment on port {port}"));
        let (child, _) = spawn_server(
            &dir,
            || port,
            |port| {
                let mut a = server_args(port, &dir);
                a.extend([
                    "--replicaof".to_string(),
                    "127.0.0.1".to_string(),
                    primary.to_string(),
                ]);
                a
            },
        );
        server.child = Some(child);
        wait_for("the restarted server to sync", FAILOVER_TIMEOUT, || {
            query::<String>(port, &["INFO", "replication"])
                .is_some_and(|i| i.contains("master_link_status:up"))
        });
    }

    /// Wait until the data server on `port` says it is a replica (`ROLE`) with its link to its
    /// primary up: after a failover, the old primary demoted by the sentinels and following the
    /// new one (after a `SENTINEL FAILOVER` that takes Sentinel several seconds: it reconfigures
    /// an old primary that still answers as one only after it has reported so for a while).
    /// Panics after [`FAILOVER_TIMEOUT`].
    pub fn wait_until_replica(&self, port: u16) {
        wait_for("the server to be a replica", FAILOVER_TIMEOUT, || {
            query::<String>(port, &["INFO", "replication"]).is_some_and(|i| {
                i.lines().any(|l| l.trim_end() == "role:slave")
                    && i.contains("master_link_status:up")
            })
        });
    }

    /// Ask a sentinel for a manual failover (`SENTINEL FAILOVER`), as an operator would.
    pub fn failover(&self) {
        let port = self.sentinels[0].port;
        let ok: Option<String> = query(port, &["SENTINEL", "FAILOVER", MASTER_NAME]);
        assert!(ok.is_some(), "SENTINEL FAILOVER was refused");
    }

    /// Wait until every sentinel names a primary other than `old_port` and that server says it
    /// is a master. Returns the new primary's port.
    pub fn wait_for_new_primary(&self, old_port: u16) -> u16 {
        let mut new = 0;
        wait_for(
            "the sentinels to promote a new primary",
            FAILOVER_TIMEOUT,
            || {
                let ports: Vec<Option<u16>> = self
                    .sentinels
                    .iter()
                    .filter(|s| s.child.is_some())
                    .map(|s| {
                        let addr: Vec<String> = query(
                            s.port,
                            &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME],
                        )?;
                        addr.get(1)?.parse().ok()
                    })
                    .collect();
                let Some(Some(first)) = ports.first().copied() else {
                    return false;
                };
                new = first;
                first != old_port
                && ports.iter().all(|p| *p == Some(first))
                && query::<Vec<redis::Value>>(first, &["ROLE"]).is_some_and(|r| {
                    matches!(r.first(), Some(redis::Value::BulkString(b)) if b == b"master")
                })
            },
        );
        new
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        for p in self.sentinels.iter_mut().chain(self.servers.iter_mut()) {
            p.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
