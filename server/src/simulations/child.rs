//! One run: `orq-sim run ... --timeline - --max-memory-mb M` in a child process, its standard
//! output streamed as the answer's body.
//!
//! Bounds: one run at a time per API process (409 otherwise); the child is killed at its
//! deadline (`--sim-timeout-ms`), when its output passes [`crate::timelines::FILE_MAX_BYTES`],
//! when the client goes away and when the server shuts down; its memory (the data segment: heap
//! and private mappings) is limited by the simulator itself (`--max-memory-mb`, RLIMIT_DATA). A run stopped before any output is an
//! error answer (503); a run stopped after it began ends its body with an `aborted` line (a
//! streamed answer cannot change its status).

use super::binary::{tail, Ready, Simulator};
use super::request::RunArgs;
use crate::error::{ApiError, ErrorCode};
use axum::body::{Body, Bytes};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Bytes of the simulator's standard error kept for a failure's reason.
const STDERR_TAIL: usize = 4_096;

/// Largest line the end-of-run check keeps (bytes); a longer last line is not an `end` line.
const LAST_LINE_MAX: usize = 1 << 20;

/// Clears the "a run is in progress" flag when the run's task ends, however it ends.
struct RunningGuard(Arc<AtomicBool>);

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// What the pump hands the answer.
enum Msg {
    /// Timeline bytes.
    Data(Bytes),
    /// The run ended before writing anything, for this reason.
    Failed(String),
}

impl Simulator {
    /// Start a run of `ready`'s binary with `run`; the answer streams its timeline. 409 when a
    /// run is in progress; 503 when the process cannot start or ends before writing anything.
    pub async fn start(
        &self,
        ready: &Ready,
        run: RunArgs,
        shutdown: CancellationToken,
    ) -> Result<Response, ApiError> {
        if self
            .running
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(ApiError::conflict(
                "a simulation is already running, and one runs at a time: retry when it ends",
            ));
        }
        let guard = RunningGuard(self.running.clone());
        let mut child = tokio::process::Command::new(&ready.path)
            .arg("run")
            .args(&run.args)
            .args(["--timeline", "-", "--max-memory-mb"])
            .arg(self.args.sim_memory_mb.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own process group, so that what it started dies with it (kill_group).
            .process_group(0)
            .spawn()
            .map_err(|e| {
                ApiError::new(
                    ErrorCode::Unavailable,
                    format!("cannot start the simulator {}: {e}", ready.path.display()),
                )
            })?;
        tracing::info!(seed = run.seed, args = ?run.args, "simulation run started");
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let stderr_tail = tokio::spawn(read_tail(stderr, STDERR_TAIL));
        let (tx, mut rx) = mpsc::channel::<Msg>(8);
        let pump = Pump {
            deadline: Instant::now() + std::time::Duration::from_millis(self.args.sim_timeout_ms),
            timeout_ms: self.args.sim_timeout_ms,
            memory_mb: self.args.sim_memory_mb,
            seed: run.seed,
        };
        tokio::spawn(async move {
            let _guard = guard;
            pump.run(child, stdout, stderr_tail, tx, shutdown).await;
        });
        match rx.recv().await {
            Some(Msg::Data(first)) => {
                let rest = futures_util::stream::unfold(rx, |mut rx| async move {
                    rx.recv()
                        .await
                        .map(|m| (Ok::<Bytes, Infallible>(m.into_bytes()), rx))
                });
                let body = futures_util::StreamExt::chain(
                    futures_util::stream::once(async move { Ok::<Bytes, Infallible>(first) }),
                    rest,
                );
                Ok((
                    [
                        (CONTENT_TYPE, "application/x-ndjson"),
                        (CACHE_CONTROL, "no-store"),
                    ],
                    Body::from_stream(body),
                )
                    .into_response())
            }
            Some(Msg::Failed(reason)) => Err(ApiError::new(ErrorCode::Unavailable, reason)),
            None => Err(ApiError::new(
                ErrorCode::Unavailable,
                "the simulation run ended without an answer",
            )),
        }
    }
}

impl Msg {
    fn into_bytes(self) -> Bytes {
        match self {
            Msg::Data(b) => b,
            Msg::Failed(reason) => Bytes::from(aborted_line(&reason, false)),
        }
    }
}

/// The line that ends a run the server stopped (docs/timeline.md, `aborted`), with a newline
/// before it when the output stopped mid-line.
pub fn aborted_line(reason: &str, mid_line: bool) -> String {
    let line = serde_json::json!({"t_ms": null, "actor": "server", "kind": "aborted",
        "task": null, "tenant": null, "attempt": null, "details": {"reason": reason}});
    format!("{}{line}\n", if mid_line { "\n" } else { "" })
}

struct Pump {
    deadline: Instant,
    timeout_ms: u64,
    memory_mb: u64,
    seed: u64,
}

/// Why the output stopped before the process ended on its own.
enum Stop {
    /// The process closed its output.
    Eof,
    /// The server stops it, for this reason.
    Kill(String),
    /// Nobody reads the answer any more.
    Gone,
}

impl Pump {
    async fn run(
        self,
        mut child: Child,
        mut stdout: impl AsyncRead + Unpin,
        stderr_tail: tokio::task::JoinHandle<Vec<u8>>,
        tx: mpsc::Sender<Msg>,
        shutdown: CancellationToken,
    ) {
        let cap = crate::timelines::FILE_MAX_BYTES;
        let mut buf = vec![0u8; 64 * 1024];
        let mut sent: u64 = 0;
        let mut last = LastLine::default();
        let pid = child.id();
        // The process's exit, once seen; after it, what is left in the pipe is read for a
        // moment (a process it left behind may hold the pipe open).
        let (mut exited, mut status) = (false, None);
        let mut drain_until: Option<Instant> = None;
        let stop = loop {
            tokio::select! {
                s = child.wait(), if !exited => {
                    exited = true;
                    status = s.ok();
                    drain_until = Some(Instant::now() + std::time::Duration::from_secs(1));
                }
                _ = tokio::time::sleep_until(drain_until.unwrap_or(self.deadline)),
                    if drain_until.is_some() => break Stop::Eof,
                r = stdout.read(&mut buf) => match r {
                    Ok(0) => break Stop::Eof,
                    Ok(n) => {
                        sent += n as u64;
                        if sent > cap {
                            break Stop::Kill(format!(
                                "the run's timeline passed {cap} bytes and the run was stopped"
                            ));
                        }
                        last.feed(&buf[..n]);
                        if tx.send(Msg::Data(Bytes::copy_from_slice(&buf[..n]))).await.is_err() {
                            break Stop::Gone;
                        }
                    }
                    Err(e) => break Stop::Kill(format!("reading the simulator's output failed: {e}")),
                },
                _ = tokio::time::sleep_until(self.deadline) => break Stop::Kill(format!(
                    "the run passed its deadline of {} ms (--sim-timeout-ms) and was stopped",
                    self.timeout_ms
                )),
                _ = tx.closed() => break Stop::Gone,
                _ = shutdown.cancelled() => break Stop::Kill(
                    "the server is shutting down; the run was stopped".to_string()
                ),
            }
        };
        // Whatever happened, nothing the run started outlives it.
        super::binary::kill_group(pid).await;
        let reason = match stop {
            Stop::Gone => {
                let _ = child.kill().await;
                tracing::info!(
                    seed = self.seed,
                    "simulation run stopped: its client went away"
                );
                return;
            }
            Stop::Kill(reason) => {
                let _ = child.kill().await;
                Some(reason)
            }
            Stop::Eof => {
                let status = if exited {
                    status
                } else {
                    tokio::select! {
                        s = child.wait() => s.ok(),
                        _ = tokio::time::sleep_until(self.deadline) => None,
                    }
                };
                match status {
                    Some(s) if matches!(s.code(), Some(0..=3)) && last.is_end() => None,
                    Some(s) => {
                        let err = stderr_tail.await.unwrap_or_default();
                        Some(self.exit_reason(s, &err))
                    }
                    None => {
                        let _ = child.kill().await;
                        Some(format!(
                            "the run passed its deadline of {} ms (--sim-timeout-ms) and was stopped",
                            self.timeout_ms
                        ))
                    }
                }
            }
        };
        match reason {
            None => tracing::info!(seed = self.seed, bytes = sent, "simulation run ended"),
            Some(reason) => {
                tracing::warn!(seed = self.seed, %reason, "simulation run stopped");
                let msg = if sent == 0 {
                    Msg::Failed(reason)
                } else {
                    Msg::Data(Bytes::from(aborted_line(&reason, last.mid_line())))
                };
                let _ = tx.send(msg).await;
            }
        }
    }

    fn exit_reason(&self, status: std::process::ExitStatus, stderr: &[u8]) -> String {
        let err = tail(stderr, 500);
        if err.contains("memory allocation") {
            return format!(
                "the run needed more than its {} MB of memory (--sim-memory-mb) and was stopped",
                self.memory_mb
            );
        }
        if err.is_empty() {
            format!("the simulator ended ({status}) before the end of the run")
        } else {
            format!("the simulator ended ({status}) before the end of the run: {err}")
        }
    }
}

/// The last line of a stream seen in chunks: whether it is the simulator's `end` line, and
/// whether the stream stopped mid-line.
#[derive(Default)]
struct LastLine {
    /// The line being received (after the last newline).
    current: Vec<u8>,
    /// The last complete line.
    complete: Vec<u8>,
    too_long: bool,
}

impl LastLine {
    fn feed(&mut self, chunk: &[u8]) {
        for part in chunk.split_inclusive(|&b| b == b'\n') {
            let (text, ends) = match part.strip_suffix(b"\n") {
                Some(t) => (t, true),
                None => (part, false),
            };
            if self.current.len() + text.len() <= LAST_LINE_MAX {
                self.current.extend_from_slice(text);
            } else {
                self.too_long = true;
            }
            if ends {
                self.complete = if self.too_long {
                    Vec::new()
                } else {
                    std::mem::take(&mut self.current)
                };
                self.current.clear();
                self.too_long = false;
            }
        }
    }

    fn mid_line(&self) -> bool {
        !self.current.is_empty() || self.too_long
    }

    /// The stream ended with a complete `end` line.
    fn is_end(&self) -> bool {
        !self.mid_line()
            && serde_json::from_slice::<serde_json::Value>(&self.complete)
                .is_ok_and(|v| v["kind"] == "end")
    }
}

/// Read `r` to its end, keeping its last `max` bytes.
async fn read_tail(mut r: impl AsyncRead + Unpin, max: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 8 * 1024];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > max {
            kept.drain(..kept.len() - max);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_line_is_followed_across_chunks() {
        let mut l = LastLine::default();
        l.feed(b"{\"kind\":\"header\"}\n{\"kind\":\"le");
        assert!(l.mid_line() && !l.is_end());
        l.feed(b"ased\"}\n{\"t_ms\":1,\"kind\":\"end\"}");
        assert!(l.mid_line(), "the end line has no newline yet");
        l.feed(b"\n");
        assert!(l.is_end());
        l.feed(b"{\"kind\":\"x\"}\n");
        assert!(!l.is_end());
    }

    #[test]
    fn an_aborted_line_is_one_json_line_of_its_own() {
        let s = aborted_line("stopped \"now\"", true);
        assert!(s.starts_with('\n') && s.ends_with('\n'));
        let v: serde_json::Value = serde_json::from_str(s.trim()).unwrap();
        assert_eq!(v["kind"], "aborted");
        assert_eq!(v["details"]["reason"], "stopped \"now\"");
        assert_eq!(v["t_ms"], serde_json::Value::Null);
    }
}
