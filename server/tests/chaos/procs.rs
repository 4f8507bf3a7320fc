//! The processes of a chaos run and their fixtures: the store ([`Store`]: a private
//! `redis-server`, or in cluster mode a private Redis Cluster of three primaries with a replica
//! each), every server with AOF (`appendfsync always`) on a fixed port and data directory, so
//! that it can be killed and restarted with what it persisted; `orq api`, two `orq scheduler`
//! and three `orq worker`, each in a [`Slot`] that the nemesis kills, stops and restarts. Every
//! child is killed with SIGKILL and reaped when its fixture drops, and its pid is kept in a
//! registry ([`kill_all_live`]) so that the watchdog and the failure path can end every child
//! even when a fixture is out of reach (held by a fault thread).

use orq::testing::RedisCluster;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The queue every chaos task goes to on one Redis.
pub const QUEUE: &str = "chaos";
/// In cluster mode, queue names are `chaos-<n>`, the first whose slot is on each primary.
pub const CLUSTER_QUEUE_PREFIX: &str = "chaos-";
/// Primaries of the cluster mode's cluster (each with one replica).
pub const CLUSTER_PRIMARIES: usize = 3;
/// Every cluster node's arguments after the fixture's: AOF with `appendfsync always` (a node
/// killed and restarted keeps what it acknowledged), `DEBUG` allowed, `noeviction` (what orq
/// asks for), and its log in its directory (copied to the run's logs when the cluster drops).
const CLUSTER_NODE_ARGS: [&str; 10] = [
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    "--enable-debug-command",
    "yes",
    "--maxmemory-policy",
    "noeviction",
    "--logfile",
    "redis.log",
];
/// How long the cluster may take to be whole again after a node restart (a loaded machine).
pub const CLUSTER_SETTLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Handler slots of each worker process.
pub const WORKER_CONCURRENCY: u32 = 8;
/// How long a restarted process (Redis loading its AOF, the API binding its port) may take.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Wall-clock milliseconds since the Unix epoch: the clock of fault windows, of the receiver's
/// records, and of Redis's `TIME` (which the task histories carry), all on this machine.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Lock a mutex, ignoring poisoning (a fault thread that panicked leaves a usable fixture).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Pids of every child not yet reaped, with its name.
static LIVE: Mutex<BTreeMap<u32, String>> = Mutex::new(BTreeMap::new());

/// Send `sig` (`KILL`, `STOP`, `CONT`) to `pid` with kill(1); true when it was delivered.
pub fn signal(pid: u32, sig: &str) -> bool {
    Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// SIGKILL every child still registered (the watchdog's and the failure path's last resort;
/// the fixtures reap them when they drop).
pub fn kill_all_live() {
    let live: Vec<u32> = lock(&LIVE).keys().copied().collect();
    for pid in live {
        signal(pid, "KILL");
    }
}

/// A port on 127.0.0.1 that is free now, outside the kernel's ephemeral range (32768–60999 on
/// Linux), so that no outgoing connection takes it while its server is down between a kill and
/// a restart on the same port.
pub fn free_port() -> u16 {
    let mut x = now_ms() ^ (u64::from(std::process::id()) << 20);
    for _ in 0..1000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let port = 20_000 + ((x >> 33) % 12_000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in 20000..32000");
}

/// A child process with its output appended to a log file; SIGKILLed and reaped on drop.
#[derive(Debug)]
pub struct Proc {
    child: Option<Child>,
}

impl Proc {
    /// Spawn `cmd`, its stdout and stderr appended to `log` after a header line naming it.
    pub fn spawn(mut cmd: Command, name: &str, log: &Path) -> Proc {
        let mut out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("open {}: {e}", log.display()));
        let _ = writeln!(out, "==== {name} starts at {} ms", now_ms());
        let err = out.try_clone().expect("clone a log file handle");
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {name}: {e}"));
        lock(&LIVE).insert(child.id(), name.to_string());
        Proc { child: Some(child) }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Its exit status, if it has exited (reaped then).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let c = self.child.as_mut()?;
        match c.try_wait() {
            Ok(Some(status)) => {
                lock(&LIVE).remove(&c.id());
                self.child = None;
                Some(status)
            }
            _ => None,
        }
    }

    /// SIGKILL (a stopped process dies too) and reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            lock(&LIVE).remove(&c.id());
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The answer to PING on `port`: Ok for PONG, Err with the error (`LOADING ...`) or the reason
/// it could not ask.
pub fn ping(port: u16) -> Result<(), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    s.write_all(b"PING\r\n").map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(s)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    if line.trim_end() == "+PONG" {
        Ok(())
    } else {
        Err(line.trim_end().to_string())
    }
}

/// The private Redis: a fixed port and data directory, AOF with `appendfsync always`, `DEBUG`
/// allowed, its log in the run's log directory.
#[derive(Debug)]
pub struct Redis {
    port: u16,
    dir: PathBuf,
    log: PathBuf,
    proc: Option<Proc>,
    /// Times started (1 for the first start).
    pub generation: u32,
}

impl Redis {
    /// Start it and wait until it answers PING.
    pub fn start(logs: &Path) -> Redis {
        let dir = logs.join("redis-data");
        std::fs::create_dir_all(&dir).expect("create the Redis data directory");
        let mut r = Redis {
            port: free_port(),
            dir,
            log: logs.join("redis.log"),
            proc: None,
            generation: 0,
        };
        r.spawn().unwrap_or_else(|e| panic!("{e}"));
        r
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn spawn(&mut self) -> Result<(), String> {
        self.generation += 1;
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
            ])
            .args(["--protected-mode", "no", "--enable-debug-command", "yes"])
            .args(["--maxmemory-policy", "noeviction", "--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(&self.log);
        let name = format!("redis-server#{}", self.generation);
        let mut p = Proc::spawn(cmd, &name, &self.log);
        let deadline = Instant::now() + START_TIMEOUT;
        let mut last = String::new();
        while Instant::now() < deadline {
            match ping(self.port) {
                Ok(()) => {
                    self.proc = Some(p);
                    return Ok(());
                }
                Err(e) => last = e,
            }
            if let Some(status) = p.exited() {
                return Err(format!(
                    "{name} exited with {status} on port {} (taken?); see {}",
                    self.port,
                    self.log.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "{name} on port {} did not answer PING within {START_TIMEOUT:?}: {last}",
            self.port
        ))
    }

    /// SIGKILL it (what it had not written to its AOF is lost; with `appendfsync always`,
    /// nothing it acknowledged).
    pub fn kill(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
    }

    /// Start it again on the same port and directory (it loads its AOF); waits until it answers
    /// PING (not `LOADING`). Retries a start that fails, then panics.
    pub fn restart(&mut self) {
        self.kill();
        let mut last = String::new();
        for _ in 0..5 {
            match self.spawn() {
                Ok(()) => return,
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!("cannot restart Redis: {last}");
    }

    /// Its exit status when it exited on its own (reaped then).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.proc.as_mut()?.exited()
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

/// A plain connection to the server on `port` for the nemesis's commands, with timeouts.
pub fn admin(port: u16, read_timeout: Duration) -> Result<redis::Connection, String> {
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{port}/")).map_err(|e| e.to_string())?;
    let con = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    con.set_read_timeout(Some(read_timeout))
        .map_err(|e| e.to_string())?;
    con.set_write_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    Ok(con)
}

/// The cluster mode's store: a [`RedisCluster`] whose nodes keep an AOF, with each live node's
/// pid in the registry of [`kill_all_live`] and a generation per node for fault names.
#[derive(Debug)]
pub struct Nodes {
    /// The cluster (`CLUSTER_PRIMARIES` primaries, one replica each).
    pub cluster: RedisCluster,
    logs: PathBuf,
    /// Each node's pid as registered, by port.
    pids: BTreeMap<u16, u32>,
    /// Times each node was started, by port.
    generations: BTreeMap<u16, u32>,
}

impl Nodes {
    fn start(logs: &Path) -> Nodes {
        let cluster = RedisCluster::start_with(CLUSTER_PRIMARIES, 1, &CLUSTER_NODE_ARGS);
        let generations = cluster.ports().into_iter().map(|p| (p, 1)).collect();
        let mut n = Nodes {
            cluster,
            logs: logs.to_path_buf(),
            pids: BTreeMap::new(),
            generations,
        };
        n.register();
        n
    }

    /// Put every live node's pid in the registry (after a start or a restart).
    fn register(&mut self) {
        for node in self.cluster.nodes() {
            if self.pids.get(&node.port) != Some(&node.pid) {
                let mut live = lock(&LIVE);
                if let Some(old) = self.pids.insert(node.port, node.pid) {
                    live.remove(&old);
                }
                live.insert(node.pid, format!("redis-node:{}", node.port));
            }
        }
    }

    /// `redis+cluster://` with every node, so that a process (re)started while one is down
    /// finds the cluster through another.
    pub fn url(&self) -> String {
        let nodes: Vec<String> = self
            .cluster
            .ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis+cluster://{}", nodes.join(","))
    }

    /// The node's current incarnation: `node:<port>#<generation>`.
    pub fn name(&self, port: u16) -> String {
        format!(
            "node:{port}#{}",
            self.generations.get(&port).copied().unwrap_or(0)
        )
    }

    /// SIGKILL the node on `port` (its AOF keeps what it acknowledged).
    pub fn kill(&mut self, port: u16) {
        self.cluster.kill_node(port);
        if let Some(pid) = self.pids.remove(&port) {
            lock(&LIVE).remove(&pid);
        }
    }

    /// Start the killed node on `port` again (same port, `nodes.conf` and AOF).
    pub fn restart(&mut self, port: u16) {
        self.cluster.restart_node(port);
        *self.generations.entry(port).or_default() += 1;
        self.register();
    }

    /// Restart every node that exited on its own; their names and exit statuses.
    pub fn revive(&mut self) -> Vec<String> {
        let exited = self.cluster.reap_exited();
        let mut out = Vec::new();
        for (port, status) in exited {
            out.push(format!("{}: {status}", self.name(port)));
            if let Some(pid) = self.pids.remove(&port) {
                lock(&LIVE).remove(&pid);
            }
            self.restart(port);
        }
        if !out.is_empty() {
            if let Err(e) = self.cluster.wait_settled(CLUSTER_SETTLE_TIMEOUT) {
                panic!("after restarting nodes that exited: {e}");
            }
        }
        out
    }

    /// SIGKILL every node at once and start them all again (each loads its `nodes.conf` and
    /// AOF); returns once the cluster is whole. Panics when it is not within
    /// [`CLUSTER_SETTLE_TIMEOUT`].
    pub fn kill_all_and_restart(&mut self) {
        let ports = self.cluster.ports();
        for &p in &ports {
            self.kill(p);
        }
        for &p in &ports {
            self.restart(p);
        }
        if let Err(e) = self.cluster.wait_settled(CLUSTER_SETTLE_TIMEOUT) {
            panic!("after a kill -9 of every node: {e}");
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for port in self.cluster.ports() {
            if let Some(dir) = self.cluster.node_dir(port) {
                let _ = std::fs::copy(
                    dir.join("redis.log"),
                    self.logs.join(format!("redis-node-{port}.log")),
                );
            }
        }
        let mut live = lock(&LIVE);
        for pid in self.pids.values() {
            live.remove(pid);
        }
    }
}

/// What the orq processes keep their state in.
#[derive(Debug)]
pub enum Store {
    /// One private `redis-server` (single mode).
    One(Redis),
    /// A private Redis Cluster (cluster mode).
    Cluster(Nodes),
}

impl Store {
    /// The `--redis` URL.
    pub fn url(&self) -> String {
        match self {
            Store::One(r) => r.url(),
            Store::Cluster(n) => n.url(),
        }
    }

    /// SIGKILL every server and start it again from what it persisted; returns once it serves
    /// again (the chaos run's last check).
    pub fn kill_all_and_restart(&mut self) {
        match self {
            Store::One(r) => {
                r.kill();
                r.restart();
            }
            Store::Cluster(n) => n.kill_all_and_restart(),
        }
    }
}

/// Where the run keeps its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One private `redis-server`; one queue ([`QUEUE`]).
    Single,
    /// A Redis Cluster of [`CLUSTER_PRIMARIES`] primaries with a replica each; a queue on each
    /// primary; every orq process with `--wait-replicas 1`.
    Cluster,
}

/// Run one command on `con`; its reply or the error as text.
pub fn command(con: &mut redis::Connection, args: &[&str]) -> Result<redis::Value, String> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query::<redis::Value>(con)
        .map_err(|e| format!("{args:?}: {e}"))
}

/// The role of an orq process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `orq api`.
    Api,
    /// `orq scheduler`.
    Scheduler,
    /// `orq worker`.
    Worker,
}

/// What every orq process needs to start.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The `orq` binary.
    pub bin: PathBuf,
    /// The Redis URL.
    pub redis_url: String,
    /// The API's `host:port` (fixed across restarts).
    pub api_listen: String,
    /// The `--http-allow` prefix (the receiver).
    pub allow: String,
    /// Where logs go.
    pub logs: PathBuf,
    /// The queues every process serves (`--queues`).
    pub queues: Vec<String>,
    /// Arguments every orq process gets on top (`--wait-replicas 1` in cluster mode).
    pub extra: Vec<String>,
}

/// The mutable part of a [`Slot`]: the running process and how many times it was started.
#[derive(Debug)]
pub struct SlotState {
    proc: Option<Proc>,
    generation: u32,
}

/// One orq process position (the API, scheduler 0, worker 2, ...). A fault takes `busy` for
/// its whole length, so two faults never act on one slot at once; each start is a new
/// incarnation with its own name (a worker's `--worker-id`, `w2-3` for worker 2's third start),
/// which the task histories record, so that a lease lost with a killed worker can be traced to
/// that kill.
#[derive(Debug)]
pub struct Slot {
    /// The role.
    pub role: Role,
    /// Index among the slots of its role.
    pub index: usize,
    /// Held by the fault acting on it.
    pub busy: AtomicBool,
    state: Mutex<SlotState>,
}

impl Slot {
    fn new(role: Role, index: usize) -> Slot {
        Slot {
            role,
            index,
            busy: AtomicBool::new(false),
            state: Mutex::new(SlotState {
                proc: None,
                generation: 0,
            }),
        }
    }

    fn name_of(role: Role, index: usize, generation: u32) -> String {
        match role {
            Role::Api => format!("api-{generation}"),
            Role::Scheduler => format!("s{index}-{generation}"),
            Role::Worker => format!("w{index}-{generation}"),
        }
    }

    /// The current incarnation's name (`w1-3`).
    pub fn name(&self) -> String {
        Self::name_of(self.role, self.index, lock(&self.state).generation)
    }

    /// The running process's pid (0 when none).
    pub fn pid(&self) -> u32 {
        lock(&self.state).proc.as_ref().map_or(0, Proc::pid)
    }

    /// Start a new incarnation (after killing any running one); returns its name.
    pub fn start(&self, setup: &Setup) -> String {
        let mut st = lock(&self.state);
        if let Some(mut p) = st.proc.take() {
            p.kill();
        }
        st.generation += 1;
        let name = Self::name_of(self.role, self.index, st.generation);
        let mut cmd = Command::new(&setup.bin);
        let queues = setup.queues.join(",");
        match self.role {
            Role::Api => {
                cmd.args(["api", "--redis", &setup.redis_url, "--queues", &queues])
                    .args(["--listen", &setup.api_listen, "--http-allow", &setup.allow]);
            }
            Role::Scheduler => {
                cmd.args([
                    "scheduler",
                    "--redis",
                    &setup.redis_url,
                    "--queues",
                    &queues,
                ]);
            }
            Role::Worker => {
                cmd.args(["worker", "--redis", &setup.redis_url, "--queues", &queues])
                    .args(["--concurrency", &WORKER_CONCURRENCY.to_string()])
                    .args(["--worker-id", &name, "--http-allow", &setup.allow]);
            }
        }
        cmd.args(&setup.extra);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if k.starts_with("ORQ_") || k.to_ascii_lowercase().ends_with("_proxy") {
                cmd.env_remove(&k);
            }
        }
        cmd.env("ORQ_LOG", "info")
            .env("NO_PROXY", "127.0.0.1,localhost");
        let log = setup.logs.join(format!(
            "{}.log",
            Self::name_of(self.role, self.index, 0).trim_end_matches("-0")
        ));
        st.proc = Some(Proc::spawn(cmd, &name, &log));
        name
    }

    /// SIGKILL the running process (reaped); returns the incarnation's name.
    pub fn kill(&self) -> String {
        let mut st = lock(&self.state);
        if let Some(mut p) = st.proc.take() {
            p.kill();
        }
        Self::name_of(self.role, self.index, st.generation)
    }

    /// The exit status of a process that exited on its own (reaped then).
    pub fn exited(&self) -> Option<ExitStatus> {
        lock(&self.state).proc.as_mut()?.exited()
    }
}

/// Every process of a run.
#[derive(Debug)]
pub struct Cluster {
    /// Ports, URLs, paths, queues.
    pub setup: Setup,
    /// One Redis or the cluster mode's cluster.
    pub mode: Mode,
    /// The store's fixture; `store_busy` is its fault lock.
    pub store: Mutex<Store>,
    /// Held by the fault acting on the store (on any node of a cluster: one at a time).
    pub store_busy: AtomicBool,
    /// The hash slot of each queue of `setup.queues` (cluster mode; empty on one Redis).
    pub queue_slots: Vec<u16>,
    /// `orq api`.
    pub api: Slot,
    /// Two `orq scheduler`.
    pub schedulers: Vec<Slot>,
    /// Three `orq worker`.
    pub workers: Vec<Slot>,
}

impl Cluster {
    /// Start the store, then the API, two schedulers and three workers. `allow` is the
    /// receiver's URL prefix.
    pub fn start(logs: &Path, allow: String, mode: Mode) -> Cluster {
        let (store, queues, queue_slots, extra) = match mode {
            Mode::Single => (
                Store::One(Redis::start(logs)),
                vec![QUEUE.to_string()],
                Vec::new(),
                Vec::new(),
            ),
            Mode::Cluster => {
                let nodes = Nodes::start(logs);
                let (queues, slots) = queues_per_primary(&nodes.cluster);
                let extra = vec!["--wait-replicas".to_string(), "1".to_string()];
                (Store::Cluster(nodes), queues, slots, extra)
            }
        };
        let setup = Setup {
            bin: std::env::var_os("ORQ_CHAOS_BIN")
                .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_orq")), PathBuf::from),
            redis_url: store.url(),
            api_listen: format!("127.0.0.1:{}", free_port()),
            allow,
            logs: logs.to_path_buf(),
            queues,
            extra,
        };
        let c = Cluster {
            setup,
            mode,
            store: Mutex::new(store),
            store_busy: AtomicBool::new(false),
            queue_slots,
            api: Slot::new(Role::Api, 0),
            schedulers: (0..2).map(|i| Slot::new(Role::Scheduler, i)).collect(),
            workers: (0..3).map(|i| Slot::new(Role::Worker, i)).collect(),
        };
        c.api.start(&c.setup);
        c.wait_api_listening();
        for s in c.schedulers.iter().chain(&c.workers) {
            s.start(&c.setup);
        }
        c
    }

    /// Every orq slot.
    pub fn slots(&self) -> impl Iterator<Item = &Slot> {
        std::iter::once(&self.api)
            .chain(&self.schedulers)
            .chain(&self.workers)
    }

    /// Wait until the API's port accepts connections; panics after a minute.
    pub fn wait_api_listening(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        while TcpStream::connect(&self.setup.api_listen).is_err() {
            if let Some(status) = self.api.exited() {
                panic!(
                    "orq api exited with {status} before listening on {}; see {}",
                    self.setup.api_listen,
                    self.setup.logs.join("api.log").display()
                );
            }
            assert!(
                Instant::now() < deadline,
                "orq api never listened on {}",
                self.setup.api_listen
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Restart the API on the same port: a few tries, since a start can fail to bind while
    /// the killed process's port is being released.
    pub fn restart_api(&self) -> String {
        for _ in 0..10 {
            let name = self.api.start(&self.setup);
            let deadline = Instant::now() + START_TIMEOUT;
            loop {
                if TcpStream::connect(&self.setup.api_listen).is_ok() {
                    return name;
                }
                if self.api.exited().is_some() || Instant::now() > deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!(
            "orq api could not listen again on {}; see {}",
            self.setup.api_listen,
            self.setup.logs.join("api.log").display()
        );
    }
}

impl Cluster {
    /// The queues whose slots the primary on `port` serves now (cluster mode).
    pub fn queues_on(&self, store: &Nodes, port: u16) -> Vec<String> {
        self.setup
            .queues
            .iter()
            .zip(&self.queue_slots)
            .filter(|(_, slot)| store.cluster.primary_of_slot(**slot) == port)
            .map(|(q, _)| q.clone())
            .collect()
    }
}

/// One queue per primary: for each primary (by its slot range), the first name `chaos-<n>`
/// whose slot it serves; with their slots. The names depend only on the slot ranges, which
/// `redis-cli --cluster create` splits evenly, so a seed always has the same queues.
fn queues_per_primary(cluster: &RedisCluster) -> (Vec<String>, Vec<u16>) {
    let mut by_primary: BTreeMap<u16, (String, u16)> = BTreeMap::new();
    for n in 0..10_000 {
        let name = format!("{CLUSTER_QUEUE_PREFIX}{n}");
        let slot = cluster.key_slot(&orq::keys::queue_keys(&name)[0]);
        by_primary
            .entry(cluster.primary_of_slot(slot))
            .or_insert((name, slot));
        if by_primary.len() == CLUSTER_PRIMARIES {
            break;
        }
    }
    assert_eq!(by_primary.len(), CLUSTER_PRIMARIES, "{by_primary:?}");
    let mut picked: Vec<(String, u16)> = by_primary.into_values().collect();
    picked.sort_by_key(|(_, slot)| *slot);
    picked.into_iter().unzip()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for s in self.slots() {
            s.kill();
        }
        if let Store::One(r) = &mut *lock(&self.store) {
            r.kill();
        }
    }
}
