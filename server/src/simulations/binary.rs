//! Finding the `orq-sim` binary, building it in a source checkout, and asking it what a run can
//! be asked for (`orq-sim options`).
//!
//! Order: `--sim-binary PATH` (that file or nothing); `orq-sim` beside the running `orq`; `orq-sim`
//! on `PATH`. When none is found and `orq` runs from a checkout's `target/<profile>/` (the
//! directory above `target/` holds the workspace's `Cargo.toml` and `sim/`), the first request
//! for a run starts `cargo build [--release | --profile P] --bin orq-sim` there, in the
//! background; requests answer 503 with `Retry-After` until it is built.

use super::{SimArgs, SimulationLimits, SimulatorJson, SEED_MAX};
use crate::error::{ApiError, ErrorCode};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The simulator binary's file name.
pub const BINARY: &str = "orq-sim";

/// `Retry-After` (s) of a request for a run while the simulator is being built.
pub const BUILD_RETRY_AFTER_S: u64 = 10;

/// How long `orq-sim options` may take, and how long a finding (or a failed build) is kept
/// before the binary is looked for again.
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);
const RECHECK_AFTER: Duration = Duration::from_secs(5);
const REBUILD_AFTER: Duration = Duration::from_secs(60);

/// Bytes of a failed build's output kept for its reason.
const BUILD_OUTPUT_TAIL: usize = 2_000;

/// What a run can be asked for, from `orq-sim options` (the simulator's own lists).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Options {
    /// The fault families (`--faults`).
    pub families: Vec<String>,
    /// The planted bugs (`--planted`), `none` first.
    pub planted: Vec<String>,
    /// Most tasks (`--tasks`).
    pub tasks_max: u32,
}

/// A simulator binary found and probed.
#[derive(Debug, Clone)]
pub struct Ready {
    /// The binary.
    pub path: PathBuf,
    /// What it offers.
    pub options: Options,
}

#[derive(Debug, Default)]
struct Found {
    ready: Option<Ready>,
    /// Why there is none (when `ready` is `None` and no build runs).
    reason: Option<String>,
    checked: Option<Instant>,
    building: bool,
    build_failed: Option<Instant>,
}

/// The API's simulator: where its binary is, the build in progress, the run in progress.
#[derive(Debug)]
pub struct Simulator {
    pub(super) args: SimArgs,
    found: Arc<Mutex<Found>>,
    /// A run is in progress (one at a time).
    pub(super) running: Arc<AtomicBool>,
    /// Held while the binary is looked for and asked its options: one look at a time.
    looking: tokio::sync::Mutex<()>,
    /// The binary of the running `orq` (where `orq-sim` is looked for beside it).
    exe: Option<PathBuf>,
}

impl Simulator {
    /// A simulator set up by `args` (nothing is looked for yet).
    pub fn new(args: SimArgs) -> Self {
        Simulator {
            args,
            found: Arc::default(),
            running: Arc::default(),
            looking: tokio::sync::Mutex::new(()),
            exe: std::env::current_exe().ok(),
        }
    }

    /// [`Simulator::new`] with `exe` as the running binary (tests of the lookup).
    pub fn with_exe(args: SimArgs, exe: Option<PathBuf>) -> Self {
        Simulator {
            exe,
            ..Simulator::new(args)
        }
    }

    fn limits(&self, tasks_max: u32) -> SimulationLimits {
        SimulationLimits {
            seed_max: SEED_MAX,
            tasks_max,
            timeout_ms: self.args.sim_timeout_ms,
            memory_bytes: self.args.sim_memory_mb << 20,
        }
    }

    /// Whether a run can start, and its options (looks for the binary, never builds it).
    pub async fn status(&self) -> SimulatorJson {
        self.refresh().await;
        let f = self.found.lock().unwrap();
        let running = self.running.load(Ordering::Acquire);
        match &f.ready {
            Some(r) => SimulatorJson {
                available: true,
                building: false,
                buildable: false,
                reason: None,
                running,
                families: r.options.families.clone(),
                planted: r.options.planted.clone(),
                limits: self.limits(r.options.tasks_max.min(super::TASKS_MAX)),
            },
            None => SimulatorJson {
                available: false,
                building: f.building,
                buildable: !f.building && self.can_build(&f),
                reason: Some(if f.building {
                    building_reason()
                } else if self.can_build(&f) {
                    format!(
                        "the simulator ({BINARY}) is not built yet; the first run builds it from this \
                         source checkout, which takes a few minutes once"
                    )
                } else {
                    f.reason.clone().unwrap_or_else(|| not_found(&self.args))
                }),
                running,
                families: Vec::new(),
                planted: Vec::new(),
                limits: self.limits(0),
            },
        }
    }

    /// The binary for a run: found, or 503 (`Retry-After` while it is built; this call starts
    /// the build when the checkout allows one).
    pub async fn ready_for_run(&self) -> Result<Ready, ApiError> {
        self.refresh().await;
        let mut f = self.found.lock().unwrap();
        if let Some(r) = &f.ready {
            return Ok(r.clone());
        }
        if f.building {
            return Err(retry_later(building_reason()));
        }
        if self.can_build(&f) {
            if let Some(root) = self.exe.as_deref().and_then(checkout_of) {
                f.building = true;
                drop(f);
                self.spawn_build(root);
                return Err(retry_later(building_reason()));
            }
        }
        let reason = f.reason.clone().unwrap_or_else(|| not_found(&self.args));
        Err(ApiError::new(ErrorCode::Unavailable, reason))
    }

    /// A request for a run would build the simulator: no `--sim-binary`, a source checkout, and
    /// no build failed in the last minute.
    fn can_build(&self, f: &Found) -> bool {
        let recently_failed = f.build_failed.is_some_and(|t| t.elapsed() < REBUILD_AFTER);
        self.args.sim_binary.is_none()
            && !recently_failed
            && self.exe.as_deref().and_then(checkout_of).is_some()
    }

    /// Look for the binary again when the last look is old (or never happened).
    async fn refresh(&self) {
        let settled = || {
            let f = self.found.lock().unwrap();
            let fresh = f.checked.is_some_and(|t| t.elapsed() < RECHECK_AFTER);
            let still_there = f.ready.as_ref().is_some_and(|r| r.path.is_file());
            f.building || (fresh && (f.ready.is_none() || still_there))
        };
        if settled() {
            return;
        }
        // Concurrent requests wait for one look instead of starting one each.
        let _looking = self.looking.lock().await;
        if settled() {
            return;
        }
        let found = match self.locate() {
            Ok(path) => probe(&path).await.map(|options| Ready { path, options }),
            Err(e) => Err(e),
        };
        let mut f = self.found.lock().unwrap();
        if f.building {
            return;
        }
        f.checked = Some(Instant::now());
        match found {
            Ok(r) => {
                if f.ready.as_ref().map(|x| &x.path) != Some(&r.path) {
                    tracing::info!(binary = %r.path.display(), "simulator found");
                }
                f.ready = Some(r);
                f.reason = None;
            }
            Err(reason) => {
                f.ready = None;
                // A failed build's reason stays until the next build.
                if f.build_failed.is_none() {
                    f.reason = Some(reason);
                }
            }
        }
    }

    /// The binary's path, or why there is none.
    fn locate(&self) -> Result<PathBuf, String> {
        if let Some(p) = &self.args.sim_binary {
            return if p.is_file() {
                Ok(p.clone())
            } else if p.exists() {
                Err(format!("--sim-binary {}: not a file", p.display()))
            } else {
                Err(format!("--sim-binary {}: no such file", p.display()))
            };
        }
        let beside = self
            .exe
            .as_deref()
            .and_then(Path::parent)
            .map(|d| d.join(BINARY))
            .filter(|p| p.is_file());
        beside
            .or_else(|| on_path(BINARY))
            .ok_or_else(|| not_found(&self.args))
    }

    fn spawn_build(&self, root: Checkout) {
        let state = self.found.clone();
        tokio::spawn(async move {
            tracing::info!(
                dir = %root.dir.display(),
                command = %root.command().join(" "),
                "building the simulator for the dashboard's runs (first run only)"
            );
            let result = build(&root).await;
            let mut f = state.lock().unwrap();
            f.building = false;
            f.checked = None;
            match result {
                Ok(()) => {
                    tracing::info!("simulator built");
                    f.build_failed = None;
                    f.reason = None;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "building the simulator failed");
                    f.build_failed = Some(Instant::now());
                    f.reason = Some(e);
                }
            }
        });
    }
}

fn building_reason() -> String {
    format!(
        "building the simulator ({BINARY}) from this source checkout; the first run only, it \
         takes a few minutes: retry in {BUILD_RETRY_AFTER_S} s"
    )
}

fn not_found(args: &SimArgs) -> String {
    match &args.sim_binary {
        Some(p) => format!("--sim-binary {}: no such file", p.display()),
        None => format!(
            "the simulator binary {BINARY} was not found beside orq or on PATH: install it \
             beside orq (cargo build --release --bin {BINARY}) or start orq with --sim-binary PATH"
        ),
    }
}

fn retry_later(reason: String) -> ApiError {
    let mut e = ApiError::new(ErrorCode::Unavailable, reason);
    e.retry_after_s = Some(BUILD_RETRY_AFTER_S);
    e
}

/// `name` in a directory of `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Largest answer of `orq-sim options` read (bytes); orq-sim's is under 1 KiB.
const OPTIONS_MAX_BYTES: u64 = 64 * 1024;

/// Ask `path` what a run can be asked for (`orq-sim options`), reading at most
/// [`OPTIONS_MAX_BYTES`] of its answer and waiting at most [`PROBE_TIMEOUT`].
async fn probe(path: &Path) -> Result<Options, String> {
    use tokio::io::AsyncReadExt;
    let shown = path.display();
    let mut child = tokio::process::Command::new(path)
        .arg("options")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("{shown} options: cannot run it: {e}"))?;
    let pid = child.id();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let answered = tokio::time::timeout(PROBE_TIMEOUT, async {
        // Its answer first: one without end stops here (the child is killed when dropped).
        let _ = stdout.take(OPTIONS_MAX_BYTES).read_to_end(&mut out).await;
        if out.len() as u64 >= OPTIONS_MAX_BYTES {
            return None;
        }
        let _ = stderr.take(4096).read_to_end(&mut err).await;
        child.wait().await.ok()
    })
    .await;
    kill_group(pid).await;
    let status = match answered {
        Err(_) => return Err(format!("{shown} options: no answer in {PROBE_TIMEOUT:?}")),
        Ok(None) => {
            return Err(format!(
                "{shown} options: an answer of more than {OPTIONS_MAX_BYTES} bytes \
                 (is it orq's simulator?)"
            ))
        }
        Ok(Some(s)) => s,
    };
    if !status.success() {
        return Err(format!(
            "{shown} options failed ({status}): {} (is it orq's simulator, of this version?)",
            tail(&err, 300)
        ));
    }
    serde_json::from_slice(&out).map_err(|e| {
        format!("{shown} options: unexpected answer ({e}); is it orq's simulator, of this version?")
    })
}

/// A source checkout `orq` runs from: `<dir>/target/<profile>/orq`.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkout {
    /// The workspace's directory (holds `Cargo.toml` and `sim/`).
    pub dir: PathBuf,
    /// The cargo profile of the running binary (`debug` is the `dev` profile).
    pub profile: String,
}

impl Checkout {
    /// The build command (run in `dir`).
    pub fn command(&self) -> Vec<String> {
        let mut c = vec!["cargo".to_string(), "build".to_string()];
        match self.profile.as_str() {
            "debug" => {}
            "release" => c.push("--release".into()),
            p => c.extend(["--profile".to_string(), p.to_string()]),
        }
        c.extend(["--bin".to_string(), BINARY.to_string()]);
        c
    }
}

/// The checkout `exe` was built in, if it was: `exe` is `<dir>/target/<profile>/<name>` and
/// `<dir>` holds `Cargo.toml` and `sim/Cargo.toml`.
pub fn checkout_of(exe: &Path) -> Option<Checkout> {
    let profile_dir = exe.parent()?;
    let target = profile_dir.parent()?;
    if target.file_name()? != "target" {
        return None;
    }
    let dir = target.parent()?;
    if !dir.join("Cargo.toml").is_file() || !dir.join("sim").join("Cargo.toml").is_file() {
        return None;
    }
    Some(Checkout {
        dir: dir.to_path_buf(),
        profile: profile_dir.file_name()?.to_str()?.to_string(),
    })
}

async fn build(root: &Checkout) -> Result<(), String> {
    let cmd = root.command();
    let out = tokio::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .current_dir(&root.dir)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| {
            format!(
                "cannot run `{}` in {}: {e}",
                cmd.join(" "),
                root.dir.display()
            )
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "building the simulator failed (`{}` in {}, {}): {}",
            cmd.join(" "),
            root.dir.display(),
            out.status,
            tail(&out.stderr, BUILD_OUTPUT_TAIL)
        ))
    }
}

/// Kill (SIGKILL) the process group `pid` leads, with `kill(1)` (no `unsafe` here): a simulator
/// started as a group leader, and whatever it started. A group already gone is not an error.
pub(super) async fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid {
        let _ = tokio::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .await;
    }
}

/// The last `max` bytes of `bytes` as text, trimmed.
pub fn tail(bytes: &[u8], max: usize) -> String {
    let s = String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(max)..]);
    s.trim().to_string()
}
