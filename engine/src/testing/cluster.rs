//! The Redis Cluster fixture ([`RedisCluster`]): `redis-server --cluster-enabled yes` children
//! created with `redis-cli --cluster create`, the topology reads a test asserts on (nodes,
//! primaries, slot owners), and the faults a test plants (kill, failover, restart, add a replica).

use super::{answers_as, node_conn, pings, random_u64, START_TIMEOUT};
use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One node of a [`RedisCluster`]: its port, process id, and role when asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// The client port (the cluster bus is this + 10000).
    pub port: u16,
    /// The `redis-server` process.
    pub pid: u32,
    /// Whether the node is a primary (`master` in CLUSTER NODES) at the time of the call.
    pub primary: bool,
    /// For a replica, the port of its primary at the time of the call.
    pub replica_of: Option<u16>,
}

/// One `redis-server --cluster-enabled yes` child of a [`RedisCluster`].
#[derive(Debug)]
struct NodeProc {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    /// Arguments after the fixture's own ([`RedisCluster::start_with`]), kept for a restart.
    extra: Vec<String>,
}

/// A Redis Cluster of `redis-server` children on 127.0.0.1 (each in its own directory, no
/// persistence, node timeout 2 s), created with `redis-cli --cluster create`; every child is
/// killed and every directory removed when dropped. Never touches a server it did not start.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<NodeProc>,
    /// Primaries serving slots when whole ([`RedisCluster::settled`]).
    primaries: usize,
}

/// How long [`RedisCluster::start`] waits for the cluster to be created and to settle.
pub const CLUSTER_TIMEOUT: Duration = Duration::from_secs(60);

/// A port in 20000..44000 that binds on 127.0.0.1 now, and whose cluster bus port (+10000, so
/// below 55000, outside the usual ephemeral range) binds too. Another process may take either
/// before the server binds them: the caller retries when its server exits.
fn free_cluster_port() -> u16 {
    for _ in 0..1000 {
        let port = 20_000 + (random_u64() % 24_000) as u16;
        let both = TcpListener::bind(("127.0.0.1", port))
            .and_then(|a| TcpListener::bind(("127.0.0.1", port + 10_000)).map(|b| (a, b)));
        if both.is_ok() {
            return port;
        }
    }
    panic!("no free port pair (port, port + 10000) in 20000..44000");
}

/// `CLUSTER <sub>` on the node on `port`, as text (None when it does not answer).
fn cluster_text(port: u16, sub: &str) -> Option<String> {
    let mut conn = node_conn(port)?;
    redis::cmd("CLUSTER").arg(sub).query(&mut conn).ok()
}

/// Whether the node on `port` has the whole cluster: state ok, 16384 slots assigned and served,
/// `known` nodes of which `primaries` are primaries serving slots and the others replicas, and,
/// when it is a replica itself, its link to its primary up (synced).
fn node_settled(port: u16, known: usize, primaries: usize) -> bool {
    let Some(mut conn) = node_conn(port) else {
        return false;
    };
    let mut text = |args: &[&str]| -> String {
        redis::cmd(args[0])
            .arg(&args[1..])
            .query(&mut conn)
            .unwrap_or_default()
    };
    let (info, nodes, replication) = (
        text(&["CLUSTER", "INFO"]),
        text(&["CLUSTER", "NODES"]),
        text(&["INFO", "replication"]),
    );
    let field = |text: &str, name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
            .unwrap_or_default()
            .to_string()
    };
    // CLUSTER NODES: `<id> <ip:port@bus> <flags> <primary id or -> ...`, flags like
    // `myself,master`.
    let with_flag = |flag: &str| {
        nodes
            .lines()
            .filter(|l| {
                l.split_whitespace()
                    .nth(2)
                    .is_some_and(|f| f.split(',').any(|x| x == flag))
            })
            .count()
    };
    field(&info, "cluster_state") == "ok"
        && field(&info, "cluster_slots_assigned") == "16384"
        && field(&info, "cluster_slots_ok") == "16384"
        && field(&info, "cluster_known_nodes") == known.to_string()
        && field(&info, "cluster_size") == primaries.to_string()
        && with_flag("master") == primaries
        && with_flag("slave") == known - primaries
        && (field(&replication, "role") == "master"
            || field(&replication, "master_link_status") == "up")
}

/// Start a cluster-enabled `redis-server` on a free port pair in its own directory; `None`
/// when it exits (a port was taken meanwhile) or never answers as itself.
fn start_cluster_node() -> Option<NodeProc> {
    start_cluster_node_with(&[], free_cluster_port)
}

/// [`start_cluster_node`] with `extra` arguments after the fixture's own (a later one wins) and
/// its port from `port`.
fn start_cluster_node_with(extra: &[String], port: fn() -> u16) -> Option<NodeProc> {
    let port = port();
    let dir = std::env::temp_dir().join(format!(
        "orq-redis-cluster-{}-{port}-{:x}",
        std::process::id(),
        random_u64() & 0xffff
    ));
    std::fs::create_dir_all(&dir).ok()?;
    let mut child = cluster_node_command(port, &dir, extra)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run redis-server (is it installed?): {e}"));
    let deadline = Instant::now() + START_TIMEOUT;
    while Instant::now() < deadline {
        if pings(port) && answers_as(port, child.id()) {
            return Some(NodeProc {
                child: Some(child),
                port,
                dir,
                extra: extra.to_vec(),
            });
        }
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    None
}

/// The command line of a cluster node on `port` with its files (`nodes.conf`, and the AOF when
/// `extra` turns it on) in `dir`: the fixture's arguments, then `extra`.
fn cluster_node_command(port: u16, dir: &std::path::Path, extra: &[String]) -> Command {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--cluster-enabled", "yes", "--cluster-config-file"])
        .arg(dir.join("nodes.conf"))
        .args(["--cluster-node-timeout", "2000"])
        .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
        // A replica's full sync starts at once (Redis 7.0 waits 5 s for more replicas to join a
        // diskless transfer by default), so a replica added after a failover syncs quickly.
        .args(["--repl-diskless-sync-delay", "0"])
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

impl RedisCluster {
    /// Start `primaries` primaries with `replicas` replicas each and create the cluster; return
    /// once every node reports `cluster_state:ok` with all 16384 slots assigned and knows every
    /// node. Panics (failing the test) when that does not happen within [`CLUSTER_TIMEOUT`].
    pub fn start(primaries: usize, replicas: usize) -> Self {
        Self::create(primaries, replicas, &[], free_cluster_port)
    }

    /// [`RedisCluster::start`] with `extra` arguments on every node's command line, after the
    /// fixture's own (a later one wins: `["--appendonly", "yes"]`), kept for
    /// [`RedisCluster::restart_node`]; the nodes' ports come from
    /// `free_restartable_cluster_port`, outside the kernel's ephemeral range, so that a node
    /// can be killed and restarted on its port.
    pub fn start_with(primaries: usize, replicas: usize, extra: &[&str]) -> Self {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        Self::create(primaries, replicas, &extra, free_restartable_cluster_port)
    }

    fn create(primaries: usize, replicas: usize, extra: &[String], port: fn() -> u16) -> Self {
        assert!(
            primaries >= 3,
            "redis-cli --cluster create needs 3 primaries or more"
        );
        let total = primaries * (1 + replicas);
        let mut cluster = RedisCluster {
            nodes: Vec::new(),
            primaries,
        };
        let mut failures = 0;
        while cluster.nodes.len() < total {
            match start_cluster_node_with(extra, port) {
                Some(n) => cluster.nodes.push(n),
                None => {
                    failures += 1;
                    assert!(failures < 20, "cannot start cluster nodes (ports taken?)");
                }
            }
        }
        let deadline = Instant::now() + CLUSTER_TIMEOUT;
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for n in &cluster.nodes {
            create.arg(format!("127.0.0.1:{}", n.port));
        }
        let mut create = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run redis-cli (is it installed?): {e}"));
        // Read its output on threads, so a full pipe never blocks it.
        let drain = |r: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut s = String::new();
                if let Some(mut r) = r {
                    let _ = r.read_to_string(&mut s);
                }
                s
            })
        };
        let out = drain(create.stdout.take().map(|r| Box::new(r) as _));
        let err = drain(create.stderr.take().map(|r| Box::new(r) as _));
        let status = loop {
            if let Ok(Some(status)) = create.try_wait() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = create.kill();
                let _ = create.wait();
                panic!("redis-cli --cluster create did not finish within {CLUSTER_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let (out, err) = (
            out.join().unwrap_or_default(),
            err.join().unwrap_or_default(),
        );
        assert!(
            status.success(),
            "redis-cli --cluster create failed ({status}):\n{out}\n{err}"
        );
        loop {
            if cluster
                .nodes
                .iter()
                .all(|n| node_settled(n.port, total, primaries))
            {
                return cluster;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not settle within {CLUSTER_TIMEOUT:?}:\n{out}\n{}",
                cluster
                    .nodes
                    .first()
                    .and_then(|n| cluster_text(n.port, "INFO"))
                    .unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,...`: the current primaries (those alive).
    pub fn url(&self) -> String {
        let nodes: Vec<String> = self
            .primaries()
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}", nodes.join(","))
    }

    /// Every node's port (killed nodes included), in start order.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// The nodes alive, with their roles as a live node's CLUSTER NODES says now (after a
    /// failover, the promoted replica is a primary). Panics when no node answers.
    pub fn nodes(&self) -> Vec<ClusterNode> {
        let alive: Vec<(u16, u32)> = self
            .nodes
            .iter()
            .filter_map(|n| Some((n.port, n.child.as_ref()?.id())))
            .collect();
        let table = alive
            .iter()
            .find_map(|&(port, _)| cluster_text(port, "NODES"))
            .expect("no cluster node answers CLUSTER NODES");
        // `<id> <ip:port@bus[,hostname]> <flags> <primary id or -> ...`, flags like
        // `myself,master`: (id, port, flags, primary id) of each line.
        let rows: Vec<(&str, u16, &str, &str)> = table
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let port = f
                    .get(1)?
                    .split('@')
                    .next()?
                    .rsplit_once(':')?
                    .1
                    .parse()
                    .ok()?;
                Some((*f.first()?, port, *f.get(2)?, *f.get(3)?))
            })
            .collect();
        alive
            .into_iter()
            .map(|(port, pid)| {
                let row = rows.iter().find(|r| r.1 == port);
                let primary = row.is_some_and(|r| r.2.split(',').any(|x| x == "master"));
                let replica_of = row
                    .filter(|r| r.2.split(',').any(|x| x == "slave"))
                    .and_then(|r| rows.iter().find(|p| p.0 == r.3))
                    .map(|p| p.1);
                ClusterNode {
                    port,
                    pid,
                    primary,
                    replica_of,
                }
            })
            .collect()
    }

    /// The primaries alive ([`RedisCluster::nodes`] with `primary`), by port.
    pub fn primaries(&self) -> Vec<ClusterNode> {
        let mut p: Vec<_> = self.nodes().into_iter().filter(|n| n.primary).collect();
        p.sort_by_key(|n| n.port);
        p
    }

    /// The port of the primary serving hash `slot`, as a live node's CLUSTER SLOTS says now.
    pub fn primary_of_slot(&self, slot: u16) -> u16 {
        for n in &self.nodes {
            if n.child.is_none() {
                continue;
            }
            let Some(mut conn) = node_conn(n.port) else {
                continue;
            };
            // [[start, end, [ip, port, id, ...], replicas...], ...]
            let Ok(ranges) = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query::<Vec<redis::Value>>(&mut conn)
            else {
                continue;
            };
            for r in ranges {
                let redis::Value::Array(items) = r else {
                    continue;
                };
                let (Some(redis::Value::Int(start)), Some(redis::Value::Int(end))) =
                    (items.first(), items.get(1))
                else {
                    continue;
                };
                let Some(redis::Value::Array(primary)) = items.get(2) else {
                    continue;
                };
                if let Some(redis::Value::Int(port)) = primary.get(1) {
                    if (*start..=*end).contains(&i64::from(slot)) {
                        return *port as u16;
                    }
                }
            }
        }
        panic!("no live node says which primary serves slot {slot}");
    }

    /// The hash slot of `key` (CLUSTER KEYSLOT on a live node).
    pub fn key_slot(&self, key: &str) -> u16 {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .find_map(|n| {
                let mut conn = node_conn(n.port)?;
                redis::cmd("CLUSTER")
                    .arg("KEYSLOT")
                    .arg(key)
                    .query(&mut conn)
                    .ok()
            })
            .expect("no live node answers CLUSTER KEYSLOT")
    }

    /// Kill the node on `port` with SIGKILL (a crash; its replica takes over after the node
    /// timeout). Panics when the fixture started no live node on that port.
    pub fn kill_node(&mut self, port: u16) {
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == port && n.child.is_some())
            .unwrap_or_else(|| panic!("no live node of this cluster on port {port}"));
        if let Some(mut c) = node.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl RedisCluster {
    /// The port of the live replica of the primary on `primary`, as CLUSTER NODES says now
    /// (the first by port when it has several), or `None` when it has none.
    pub fn replica_of(&self, primary: u16) -> Option<u16> {
        let mut replicas: Vec<u16> = self
            .nodes()
            .into_iter()
            .filter(|n| n.replica_of == Some(primary))
            .map(|n| n.port)
            .collect();
        replicas.sort_unstable();
        replicas.first().copied()
    }

    /// A planned failover: `CLUSTER FAILOVER` on the replica on `replica`, as an operator
    /// would (the primary stops its clients until the replica has caught up, then the replica
    /// takes over); returns once that node says it is a primary and the other live nodes agree.
    /// Panics when the node refuses or the switch does not happen within [`CLUSTER_TIMEOUT`].
    pub fn failover(&self, replica: u16) {
        let mut conn = node_conn(replica)
            .unwrap_or_else(|| panic!("the replica on port {replica} does not answer"));
        let ok: String = redis::cmd("CLUSTER")
            .arg("FAILOVER")
            .query(&mut conn)
            .unwrap_or_else(|e| panic!("CLUSTER FAILOVER on {replica} refused: {e}"));
        assert_eq!(ok, "OK", "CLUSTER FAILOVER on {replica}");
        self.wait_until_primary(replica);
    }

    /// Wait until the node on `port` says it is a primary (`ROLE`) and every live node's
    /// CLUSTER NODES agrees (after a failover or a promotion). Panics after [`CLUSTER_TIMEOUT`].
    pub fn wait_until_primary(&self, port: u16) {
        let deadline = Instant::now() + CLUSTER_TIMEOUT;
        loop {
            let says = node_conn(port)
                .and_then(|mut c| redis::cmd("ROLE").query::<Vec<redis::Value>>(&mut c).ok())
                .is_some_and(
                    |r| matches!(r.first(), Some(redis::Value::BulkString(b)) if b == b"master"),
                );
            let agreed = says
                && self.nodes.iter().filter(|n| n.child.is_some()).all(|n| {
                    cluster_text(n.port, "NODES").is_some_and(|t| {
                        t.lines().any(|l| {
                            let f: Vec<&str> = l.split_whitespace().collect();
                            f.get(1).is_some_and(|a| {
                                a.split('@').next() == Some(&format!("127.0.0.1:{port}"))
                            }) && f
                                .get(2)
                                .is_some_and(|fl| fl.split(',').any(|x| x == "master"))
                        })
                    })
                });
            if agreed {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the node on {port} did not become a primary within {CLUSTER_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Start a new node and make it a replica of the primary on `primary` (`CLUSTER MEET`,
    /// then `CLUSTER REPLICATE`), as an operator replaces a node lost in a crash; returns its
    /// port once its link to the primary is up (its full sync done). Panics when that does not
    /// happen within [`CLUSTER_TIMEOUT`].
    pub fn add_replica(&mut self, primary: u16) -> u16 {
        let node = (0..20)
            .find_map(|_| start_cluster_node())
            .expect("cannot start a cluster node (ports taken?)");
        let port = node.port;
        self.nodes.push(node);
        let deadline = Instant::now() + CLUSTER_TIMEOUT;
        let primary_id: String = node_conn(primary)
            .and_then(|mut c| redis::cmd("CLUSTER").arg("MYID").query(&mut c).ok())
            .unwrap_or_else(|| panic!("the primary on {primary} does not answer CLUSTER MYID"));
        let mut conn = node_conn(port).expect("the new node answers");
        let _: String = redis::cmd("CLUSTER")
            .arg("MEET")
            .arg("127.0.0.1")
            .arg(primary)
            .query(&mut conn)
            .expect("CLUSTER MEET");
        // REPLICATE needs the node to know the primary (gossip after the MEET).
        loop {
            let done: redis::RedisResult<String> = redis::cmd("CLUSTER")
                .arg("REPLICATE")
                .arg(&primary_id)
                .query(&mut conn);
            if done.is_ok() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the new node {port} cannot replicate {primary}: {done:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        loop {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut conn)
                .unwrap_or_default();
            if info
                .lines()
                .any(|l| l.trim_end() == "master_link_status:up")
            {
                return port;
            }
            assert!(
                Instant::now() < deadline,
                "the new replica {port} of {primary} did not sync within {CLUSTER_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A port in 20000..22768 that binds on 127.0.0.1 now, and whose cluster bus port (+10000:
/// 30000..32768) binds too: both below Linux's default ephemeral range (32768–60999), so that no
/// outgoing connection takes either while its node is down between a kill and a restart
/// ([`RedisCluster::restart_node`]). The caller retries when its server exits.
fn free_restartable_cluster_port() -> u16 {
    for _ in 0..1000 {
        let port = 20_000 + (random_u64() % 2_768) as u16;
        let both = TcpListener::bind(("127.0.0.1", port))
            .and_then(|a| TcpListener::bind(("127.0.0.1", port + 10_000)).map(|b| (a, b)));
        if both.is_ok() {
            return port;
        }
    }
    panic!("no free port pair (port, port + 10000) in 20000..22768");
}

impl RedisCluster {
    /// Start the killed node on `port` again with its port, directory, `nodes.conf` (its
    /// identity and the cluster as it last knew it) and arguments (with `--appendonly yes`
    /// among them, its data): a primary whose replica took over meanwhile comes back as a
    /// replica of it. Returns once the node answers as itself, not once it has synced (see
    /// [`RedisCluster::wait_settled`]). Retries while its port is taken; panics when the
    /// fixture has no killed node on `port`, or it does not start within [`CLUSTER_TIMEOUT`].
    pub fn restart_node(&mut self, port: u16) {
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == port)
            .unwrap_or_else(|| panic!("no node of this cluster on port {port}"));
        assert!(node.child.is_none(), "the node on {port} is running");
        let deadline = Instant::now() + CLUSTER_TIMEOUT;
        let mut last = String::new();
        while Instant::now() < deadline {
            let mut child = cluster_node_command(port, &node.dir, &node.extra)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run redis-server: {e}"));
            let started = Instant::now();
            while started.elapsed() < START_TIMEOUT {
                if pings(port) && answers_as(port, child.id()) {
                    node.child = Some(child);
                    return;
                }
                if let Ok(Some(status)) = child.try_wait() {
                    last = format!(
                        "exited with {status} (port {port} or {} taken?)",
                        port + 10_000
                    );
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!("cannot restart the cluster node on {port}: {last}");
    }

    /// Whether the cluster is whole again: every node alive, and each says state ok with all
    /// 16384 slots served, knows every node, counts as many primaries as at the start and the
    /// others as replicas, and (a replica) has its link to its primary up.
    pub fn settled(&self) -> bool {
        let known = self.nodes.len();
        self.nodes
            .iter()
            .all(|n| n.child.is_some() && node_settled(n.port, known, self.primaries))
    }

    /// Wait until [`RedisCluster::settled`], at most `within`; the error names a node that is
    /// not, with its CLUSTER INFO.
    pub fn wait_settled(&self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            if self.settled() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let known = self.nodes.len();
                let bad = self
                    .nodes
                    .iter()
                    .find(|n| n.child.is_none() || !node_settled(n.port, known, self.primaries));
                return Err(match bad {
                    Some(n) => format!(
                        "the cluster is not whole after {within:?}: node {} ({}): {}",
                        n.port,
                        if n.child.is_some() { "running" } else { "down" },
                        cluster_text(n.port, "INFO")
                            .unwrap_or_default()
                            .replace("\r\n", " ")
                    ),
                    None => format!("the cluster is not whole after {within:?}"),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The directory of the node on `port`: its `nodes.conf`, its AOF when on, and any file
    /// its arguments name relatively (`--logfile redis.log`). Removed when the fixture drops.
    pub fn node_dir(&self, port: u16) -> Option<PathBuf> {
        self.nodes
            .iter()
            .find(|n| n.port == port)
            .map(|n| n.dir.clone())
    }

    /// Reap the nodes that exited on their own (not killed by the fixture): the port and
    /// exit status of each. They stay down until [`RedisCluster::restart_node`].
    pub fn reap_exited(&mut self) -> Vec<(u16, std::process::ExitStatus)> {
        let mut out = Vec::new();
        for n in &mut self.nodes {
            let status = n.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = status {
                n.child = None;
                out.push((n.port, status));
            }
        }
        out
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            if let Some(mut c) = n.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
            let _ = std::fs::remove_dir_all(&n.dir);
        }
    }
}
