//! Helpers for tests that run the `orq` binary's roles as real processes (`orq api`, `orq
//! worker`, `orq scheduler`): a child process killed with SIGKILL and reaped when dropped, a free
//! loopback address to listen on, and polling for a condition with a generous deadline.

#![allow(dead_code)]

use serde_json::Value;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long [`wait_for`] waits (generous: a loaded 2-core machine).
pub const WAIT: Duration = Duration::from_secs(90);

/// An `orq` child process, killed (SIGKILL) and reaped when dropped.
pub struct Proc(pub Option<Child>);

impl Proc {
    /// Start `orq <args>` with `ORQ_LOG=warn`, its stderr shown with the test's output.
    pub fn spawn(args: &[&str]) -> Proc {
        Proc::spawn_with(args, &[], &[])
    }

    /// [`Proc::spawn`] with the variables `remove` taken out of its environment and `env` set.
    pub fn spawn_with(args: &[&str], remove: &[&str], env: &[(&str, &str)]) -> Proc {
        let mut c = Command::new(env!("CARGO_BIN_EXE_orq"));
        for v in remove {
            c.env_remove(v);
        }
        let child = c
            .args(args)
            .envs(env.iter().copied())
            .env("ORQ_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn orq");
        Proc(Some(child))
    }

    /// Start `orq <args>` with `ORQ_LOG=log`, its stderr piped for the test to read (the
    /// child's `stderr`).
    pub fn spawn_piped(args: &[&str], log: &str) -> Child {
        Command::new(env!("CARGO_BIN_EXE_orq"))
            .args(args)
            .env("ORQ_LOG", log)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn orq")
    }

    /// Kill (SIGKILL) and reap it now.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Send SIGTERM and wait (at most [`WAIT`]) for the process to exit; its exit status.
    /// Panics naming `what` when it does not stop.
    pub async fn terminate(&mut self, what: &str) -> std::process::ExitStatus {
        let mut child = self.0.take().expect("the process was killed");
        let term = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(term.success());
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                return s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{what} did not stop on SIGTERM");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Panics when the process has exited (for example a role that refused its URL).
    pub fn assert_running(&mut self, role: &str) {
        let c = self.0.as_mut().expect("the process was killed");
        if let Some(status) = c.try_wait().expect("try_wait") {
            panic!("orq {role} exited with {status}");
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A key made by `orq key new ARGS`: the key (first line) and its entry for the keys file.
pub fn new_key(args: &[&str]) -> (String, String) {
    let mut all = vec!["key", "new"];
    all.extend_from_slice(args);
    let o = Command::new(env!("CARGO_BIN_EXE_orq"))
        .args(&all)
        .output()
        .unwrap();
    assert!(o.status.success(), "orq key new: {o:?}");
    let text = String::from_utf8(o.stdout).unwrap();
    let (key, entry) = text.split_once('\n').unwrap();
    (key.to_string(), entry.to_string())
}

/// A free port on 127.0.0.1 (another process may take it before the caller binds it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `127.0.0.1:<a free port>`, for `--listen`.
pub fn free_listen_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// Poll `f` every 50 ms until it answers `Some`, at most [`WAIT`]; panics naming `what`.
pub async fn wait_for(what: &str, mut f: impl AsyncFnMut() -> Option<Value>) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait until the API at `base` (`http://<addr>/api/v1`) answers `/readyz` with a success, at
/// most [`WAIT`].
pub async fn wait_ready(http: &reqwest::Client, base: &str) {
    wait_for("the API to be ready", async || {
        let r = http.get(format!("{base}/readyz")).send().await.ok()?;
        r.status().is_success().then_some(Value::Null)
    })
    .await;
}

/// POST `body` to `{base}/tasks` (`base`: `http://<addr>/api/v1`); asserts a 201 and returns the
/// new task's id.
pub async fn submit_task(http: &reqwest::Client, base: &str, body: Value) -> String {
    let r = http
        .post(format!("{base}/tasks"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let answer: Value = r.json().await.unwrap_or_default();
    assert_eq!(status, 201, "the submit was refused: {answer}");
    answer["id"].as_str().unwrap().to_string()
}

/// GET `url` as JSON; `None` when the call fails or the answer is not JSON.
pub async fn get_json(http: &reqwest::Client, url: &str) -> Option<Value> {
    http.get(url).send().await.ok()?.json().await.ok()
}
