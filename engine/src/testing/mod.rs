//! Test fixtures (feature `testing`): a private `redis-server` per test, on a free port, stopped
//! when dropped ([`RedisServer`], in this file, with the helpers the other fixtures share); a
//! private Redis Cluster of such servers ([`RedisCluster`], in `cluster`); and a primary with
//! replicas watched by Sentinels ([`RedisSentinel`], in `sentinel`). Never touches a Redis the
//! test did not start.

mod cluster;
mod sentinel;

pub use cluster::{ClusterNode, RedisCluster, CLUSTER_TIMEOUT};
pub use sentinel::{RedisSentinel, FAILOVER_TIMEOUT, MASTER_NAME};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a fixture waits for its server to answer PING.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A `redis-server` child process on 127.0.0.1 and a free port, with no persistence.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    /// Configuration arguments after the defaults ([`RedisServer::start_with`]), kept for
    /// restarts.
    extra: Vec<String>,
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

fn pings(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// Whether the server answering on `port` is the process `pid`. PING alone is not enough: when
/// two fixtures draw the same free port, the loser's server exits, and until it does its PING
/// would be answered by the winner's server, so two tests would share one Redis.
fn answers_as(port: u16, pid: u32) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"INFO server\r\n").is_err() {
        return false;
    }
    // The reply is one bulk string: `$<len>\r\n<len bytes>\r\n`.
    let mut reader = BufReader::new(s);
    let mut head = String::new();
    if reader.read_line(&mut head).is_err() {
        return false;
    }
    let Some(len) = head
        .trim_end()
        .strip_prefix('$')
        .and_then(|n| n.parse::<usize>().ok())
    else {
        return false;
    };
    let mut body = vec![0u8; len];
    if reader.read_exact(&mut body).is_err() {
        return false;
    }
    let want = format!("process_id:{pid}");
    String::from_utf8_lossy(&body)
        .lines()
        .any(|l| l.trim_end() == want)
}

/// Start `redis-server` with `args(port)` (run in `dir`) on a free port from `port`, and wait
/// until it answers as itself; when the port was taken meanwhile (the server exits) or it never
/// answers, try another port, five times in all. Returns the child and its port. Panics (failing
/// the test) when `redis-server` is missing or never starts.
pub(crate) fn spawn_server(
    dir: &std::path::Path,
    port: impl Fn() -> u16,
    args: impl Fn(u16) -> Vec<String>,
) -> (Child, u16) {
    let mut last_err = String::new();
    for _ in 0..5 {
        let port = port();
        let spawned = Command::new("redis-server")
            .args(args(port))
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => panic!("cannot run redis-server (is it installed?): {e}"),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if pings(port) && answers_as(port, child.id()) {
                return (child, port);
            }
            if let Ok(Some(status)) = child.try_wait() {
                last_err = format!("redis-server exited with {status} (port {port} taken?)");
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        if last_err.is_empty() {
            last_err = format!("redis-server on port {port} did not answer PING");
        }
    }
    panic!("cannot start redis-server: {last_err}");
}

/// The arguments of a private server on `port` with no persistence, its files in `dir`.
fn server_args(port: u16, dir: &std::path::Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--protected-mode",
        "no",
        "--dir",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(dir.display().to_string());
    args
}

impl RedisServer {
    /// Start a server. Panics (failing the test) when `redis-server` is missing or never answers.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Start a server with `extra` configuration arguments after the defaults (e.g.
    /// `["--rename-command", "FUNCTION", ""]`), kept across [`RedisServer::restart`].
    pub fn start_with(extra: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "orq-redis-{}-{:016x}",
            std::process::id(),
            random_u64()
        ));
        let _ = std::fs::create_dir_all(&dir);
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let (child, port) = spawn_server(&dir, free_port, |port| {
            let mut args = server_args(port, &dir);
            args.extend(extra.iter().cloned());
            args
        });
        RedisServer {
            child: Some(child),
            port,
            dir,
            extra,
        }
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stop the server and start it again on the same port, empty (as after a crash of a Redis
    /// without persistence): its script cache is gone too.
    pub fn restart(&mut self) {
        self.stop();
        let port = self.port;
        let child = Command::new("redis-server")
            .args(server_args(port, &self.dir))
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("restart redis-server");
        let pid = child.id();
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        while !(pings(port) && answers_as(port, pid)) {
            assert!(
                Instant::now() < deadline,
                "restarted redis-server never answered"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A random number (std's randomly keyed hasher: no dependency, different on every call).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or_default(),
    );
    h.finish()
}

/// A sync connection to the node on `port`, for the fixture's own commands.
fn node_conn(port: u16) -> Option<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    let conn = client
        .get_connection_with_timeout(Duration::from_secs(2))
        .ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    conn.set_write_timeout(Some(Duration::from_secs(5))).ok()?;
    Some(conn)
}
