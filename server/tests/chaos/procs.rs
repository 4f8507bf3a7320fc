//! The processes of a chaos run and their fixtures: a private `redis-server` with AOF
//! (`appendfsync always`) on a fixed port and data directory, so that it can be killed and
//! restarted with what it persisted; `orq api`, two `orq scheduler` and three `orq worker`, each
//! in a [`Slot`] that the nemesis kills, stops and restarts. Every child is killed with SIGKILL
//! and reaped when its fixture drops, and its pid is kept in a registry ([`kill_all_live`]) so
//! that the watchdog and the failure path can end every child even when a fixture is out of
//! reach (held by a fault thread).

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The queue every chaos task goes to.
pub const QUEUE: &str = "chaos";
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

    /// A plain connection for the nemesis's commands, with timeouts.
    pub fn admin(&self, read_timeout: Duration) -> Result<redis::Connection, String> {
        let client = redis::Client::open(self.url()).map_err(|e| e.to_string())?;
        let con = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .map_err(|e| e.to_string())?;
        con.set_read_timeout(Some(read_timeout))
            .map_err(|e| e.to_string())?;
        con.set_write_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        Ok(con)
    }
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
        match self.role {
            Role::Api => {
                cmd.args(["api", "--redis", &setup.redis_url, "--queues", QUEUE])
                    .args(["--listen", &setup.api_listen, "--http-allow", &setup.allow]);
            }
            Role::Scheduler => {
                cmd.args(["scheduler", "--redis", &setup.redis_url, "--queues", QUEUE]);
            }
            Role::Worker => {
                cmd.args(["worker", "--redis", &setup.redis_url, "--queues", QUEUE])
                    .args(["--concurrency", &WORKER_CONCURRENCY.to_string()])
                    .args(["--worker-id", &name, "--http-allow", &setup.allow]);
            }
        }
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
    /// Ports, URLs, paths.
    pub setup: Setup,
    /// The Redis fixture; `redis_busy` is its fault lock.
    pub redis: Mutex<Redis>,
    /// Held by the fault acting on Redis (kill, CLIENT KILL/PAUSE, DEBUG SLEEP, OOM).
    pub redis_busy: AtomicBool,
    /// `orq api`.
    pub api: Slot,
    /// Two `orq scheduler`.
    pub schedulers: Vec<Slot>,
    /// Three `orq worker`.
    pub workers: Vec<Slot>,
}

impl Cluster {
    /// Start Redis, then the API, two schedulers and three workers. `allow` is the receiver's
    /// URL prefix.
    pub fn start(logs: &Path, allow: String) -> Cluster {
        let redis = Redis::start(logs);
        let setup = Setup {
            bin: std::env::var_os("ORQ_CHAOS_BIN")
                .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_orq")), PathBuf::from),
            redis_url: redis.url(),
            api_listen: format!("127.0.0.1:{}", free_port()),
            allow,
            logs: logs.to_path_buf(),
        };
        let c = Cluster {
            setup,
            redis: Mutex::new(redis),
            redis_busy: AtomicBool::new(false),
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

impl Drop for Cluster {
    fn drop(&mut self) {
        for s in self.slots() {
            s.kill();
        }
        lock(&self.redis).kill();
    }
}
