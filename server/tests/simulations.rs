//! Simulation runs from the API (`GET`/`POST /api/v1/simulations`), against live `orq serve`
//! processes: with the real `orq-sim` (the timeline streamed is the one the CLI writes, byte for
//! byte; the chosen fault families and a planted bug show in it; bad requests are refused before
//! any process starts), and with stand-in simulators (shell scripts) that misbehave on purpose:
//! one that never answers (killed at the deadline), one that stops mid-line, one that runs out of
//! memory, a client that goes away (the run is killed), a second run while one is in progress
//! (409), a binary that is missing (503), and a source checkout where the simulator is built on
//! the first run (503 with Retry-After, then the run).

mod roles;

use roles::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `orq-sim` beside the `orq` under test (`cargo test --workspace` builds both in one
/// directory).
fn real_simulator() -> PathBuf {
    let p = Path::new(env!("CARGO_BIN_EXE_orq")).with_file_name("orq-sim");
    assert!(
        p.is_file(),
        "{} is missing: build it with `cargo build --bin orq-sim` (cargo test --workspace does)",
        p.display()
    );
    p
}

/// `orq serve` on a free loopback address, no built-in worker, with `extra` arguments; the
/// process and its API's base URL, once it is ready.
async fn serve(http: &reqwest::Client, extra: &[&str]) -> (Proc, String) {
    let listen = free_listen_addr();
    let mut args = vec![
        "serve",
        "--listen",
        &listen,
        "--no-dashboard-build",
        "--concurrency",
        "0",
    ];
    args.extend_from_slice(extra);
    let p = Proc::spawn(&args);
    let base = format!("http://{listen}/api/v1");
    wait_ready(http, &base).await;
    (p, base)
}

fn lines(body: &str) -> Vec<Value> {
    body.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

async fn post(http: &reqwest::Client, base: &str, key: &str, body: Value) -> (u16, String) {
    let r = http
        .post(format!("{base}/simulations"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

// Goal: an admin runs a seed from the API and gets the timeline the simulator writes, with the
// fault families chosen and a planted bug caught; a tenant key, no key and bad values are
// refused before any process starts. Method: `orq serve` with API keys and the real orq-sim;
// the run's body is compared byte for byte with `orq-sim run --timeline FILE` of the same
// arguments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_runs_a_seed_and_gets_its_timeline() {
    let sim = real_simulator();
    let dir = tempfile::tempdir().unwrap();
    let (admin, a) = new_key(&["--admin"]);
    let (tenant, t) = new_key(&["--tenant", "acme"]);
    let keys = dir.path().join("keys.toml");
    std::fs::write(&keys, format!("{a}\n{t}\n")).unwrap();
    let http = reqwest::Client::new();
    let (_serve, base) = serve(
        &http,
        &[
            "--api-keys",
            keys.to_str().unwrap(),
            "--sim-binary",
            sim.to_str().unwrap(),
        ],
    )
    .await;

    let status: Value = http
        .get(format!("{base}/simulations"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["available"], true, "{status}");
    assert_eq!(status["running"], false);
    assert_eq!(
        status["families"],
        json!(["crash", "stall", "clock", "restart", "network", "refusal"])
    );
    assert_eq!(status["planted"][0], "none");
    assert!(status["planted"]
        .as_array()
        .unwrap()
        .contains(&json!("complete_ignores_token")));
    // The simulator's own bound is the API's (the OpenAPI document's maximum).
    assert_eq!(
        status["limits"]["tasks_max"],
        orq_server::simulations::TASKS_MAX
    );
    assert_eq!(status["limits"]["seed_max"], 9007199254740991_u64);

    // A run with chosen families and tasks: the CLI's timeline, byte for byte.
    let (code, body) = post(
        &http,
        &base,
        &admin,
        json!({"seed": 11, "faults": ["crash", "network"], "tasks": 25}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let file = dir.path().join("cli.jsonl");
    let cli = Command::new(&sim)
        .args([
            "run",
            "--seed",
            "11",
            "--faults",
            "crash,network",
            "--tasks",
            "25",
        ])
        .arg("--timeline")
        .arg(&file)
        .output()
        .unwrap();
    assert!(cli.status.success(), "{cli:?}");
    assert_eq!(body, std::fs::read_to_string(&file).unwrap());
    let l = lines(&body);
    assert_eq!(l[0]["kind"], "header");
    assert_eq!(
        l[0]["config"]["faults"]["families"],
        json!(["crash", "network"])
    );
    assert_eq!(l[0]["config"]["tasks"], 25);
    assert!(
        l[0]["replay"]
            .as_str()
            .unwrap()
            .ends_with("--seed 11 --faults crash,network --tasks 25"),
        "{}",
        l[0]["replay"]
    );
    let end = l.last().unwrap();
    assert_eq!(end["kind"], "end");
    assert_eq!(end["details"]["verdict"], "Pass");
    assert_eq!(end["details"]["stats"]["accepted"], 25);

    // No faults at all; the seed's own draw otherwise.
    let (code, body) = post(&http, &base, &admin, json!({"seed": 11, "faults": []})).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(lines(&body)[0]["config"]["faults"]["families"], json!([]));

    // A planted bug, caught: the run ends with a safety violation.
    let (code, body) = post(
        &http,
        &base,
        &admin,
        json!({"seed": 39, "faults": ["stall"], "planted": "complete_ignores_token"}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let l = lines(&body);
    assert!(l.iter().any(|e| e["kind"] == "violation"), "no violation");
    let verdict = l.last().unwrap()["details"]["verdict"].as_str().unwrap();
    assert!(verdict.starts_with("Safety("), "{verdict}");

    // Refused before anything runs.
    for (body, want) in [
        (json!({"seed": 1, "tasks": 1001}), 422),
        (json!({"seed": 1, "tasks": 0}), 422),
        (json!({"seed": -1}), 422),
        (json!({"seed": 9007199254740992_u64}), 422),
        (json!({"seed": 1, "faults": ["fire"]}), 422),
        (json!({"seed": 1, "faults": ["crash", "crash"]}), 422),
        (json!({"seed": 1, "planted": "rm -rf /"}), 422),
        (json!({"seed": 1.5}), 400),
        (json!({"faults": []}), 400),
        (json!({"seed": 1, "steps": 5}), 400),
        (json!([1]), 400),
    ] {
        let (code, answer) = post(&http, &base, &admin, body.clone()).await;
        assert_eq!(code, want, "{body}: {answer}");
        let e: Value = serde_json::from_str(&answer).unwrap();
        assert!(e["error"]["message"].as_str().is_some(), "{answer}");
    }
    let (code, answer) = post(&http, &base, &tenant, json!({"seed": 1})).await;
    assert_eq!(code, 403, "{answer}");
    let r = http
        .get(format!("{base}/simulations"))
        .bearer_auth(&tenant)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = http
        .post(format!("{base}/simulations"))
        .json(&json!({"seed": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}

/// A stand-in simulator: `options` answers like orq-sim's; `run` records its arguments and pid
/// and behaves as the file `mode` beside it says.
fn fake_simulator(dir: &Path) -> PathBuf {
    let script = dir.join("fake-sim");
    std::fs::write(
        &script,
        r#"#!/bin/sh
here=$(dirname "$0")
case "$1" in
options) echo '{"families":["crash","network"],"planted":["none","bug"],"tasks_max":10}' ;;
run)
  echo "$*" > "$here/args"
  echo $$ > "$here/pid"
  case $(cat "$here/mode") in
  silent) exec sleep 600 ;;
  header) echo '{"kind":"header","version":1,"seed":1}'; exec sleep 600 ;;
  partial) printf '{"kind":"header","version":1}\n{"t_ms":1,"kind":"lea'; exec sleep 600 ;;
  oom) echo '{"kind":"header","version":1}'
       echo 'memory allocation of 1048576 bytes failed' >&2
       kill -ABRT $$ ;;
  noend) echo '{"kind":"header","version":1}'; exit 0 ;;
  orphan) echo '{"kind":"header","version":1}'
          sleep 600 &
          echo $! > "$here/orphan"
          echo '{"t_ms":5,"actor":"harness","kind":"end","task":null,"details":{"verdict":"Pass"}}' ;;
  pass) echo '{"kind":"header","version":1}'
        echo '{"t_ms":5,"actor":"harness","kind":"end","task":null,"details":{"verdict":"Pass"}}' ;;
  esac ;;
*) exit 64 ;;
esac
"#,
    )
    .unwrap();
    let mut perm = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&script, perm).unwrap();
    script
}

fn set_mode(dir: &Path, mode: &str) {
    std::fs::write(dir.join("mode"), mode).unwrap();
    let _ = std::fs::remove_file(dir.join("pid"));
}

/// True while the process of the run recorded in `dir` lives.
fn run_alive(dir: &Path) -> bool {
    let Ok(pid) = std::fs::read_to_string(dir.join("pid")) else {
        return false;
    };
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) else {
        return false;
    };
    // A zombie (state Z) has ended.
    stat.rsplit(") ")
        .next()
        .is_some_and(|s| !s.starts_with('Z'))
}

async fn running(http: &reqwest::Client, base: &str) -> bool {
    let s = get_json(http, &format!("{base}/simulations"))
        .await
        .unwrap();
    s["running"].as_bool().unwrap()
}

// Goal: a run that misbehaves is stopped and said so, and never blocks the next one: killed at
// its deadline (503 before any output, an `aborted` line after), output cut mid-line, out of
// memory, its client gone, one run at a time. Method: `orq serve` with a stand-in simulator and
// a 2 s deadline; the stand-in's pid shows whether the process still lives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_misbehaves_is_stopped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_simulator(dir.path());
    let http = reqwest::Client::new();
    let (_serve, base) = serve(
        &http,
        &[
            "--sim-binary",
            fake.to_str().unwrap(),
            "--sim-timeout-ms",
            "2000",
            "--sim-memory-mb",
            "512",
        ],
    )
    .await;
    let d = dir.path();

    // The arguments: the request's, then the timeline to stdout and the memory limit.
    set_mode(d, "pass");
    let (code, body) = post(
        &http,
        &base,
        "",
        json!({"seed": 7, "faults": ["crash"], "planted": "bug", "lossy": true, "tasks": 10}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(lines(&body).last().unwrap()["kind"], "end");
    assert_eq!(
        std::fs::read_to_string(d.join("args")).unwrap().trim(),
        "run --seed 7 --faults crash --planted bug --lossy --tasks 10 --timeline - --max-memory-mb 512"
    );
    // The stand-in's own lists bound the request.
    let (code, answer) = post(&http, &base, "", json!({"seed": 7, "tasks": 11})).await;
    assert_eq!(code, 422, "{answer}");
    let (code, answer) = post(&http, &base, "", json!({"seed": 7, "faults": ["stall"]})).await;
    assert_eq!(code, 422, "{answer}");

    // Silent past its deadline: killed, and the answer is an error (nothing was sent yet).
    set_mode(d, "silent");
    let (code, answer) = post(&http, &base, "", json!({"seed": 1})).await;
    assert_eq!(code, 503, "{answer}");
    assert!(answer.contains("deadline of 2000 ms"), "{answer}");
    assert!(!run_alive(d), "the silent run still lives");

    // A header, then silence: the body ends with an `aborted` line.
    set_mode(d, "header");
    let (code, body) = post(&http, &base, "", json!({"seed": 1})).await;
    assert_eq!(code, 200, "{body}");
    let l = lines(&body);
    assert_eq!(l.len(), 2, "{body}");
    assert_eq!(l[1]["kind"], "aborted");
    assert_eq!(l[1]["actor"], "server");
    assert!(l[1]["details"]["reason"]
        .as_str()
        .unwrap()
        .contains("deadline of 2000 ms"));
    assert!(!run_alive(d));

    // Stopped mid-line: the `aborted` line is a line of its own.
    set_mode(d, "partial");
    let (code, body) = post(&http, &base, "", json!({"seed": 1})).await;
    assert_eq!(code, 200);
    let last = body.lines().last().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(last).unwrap()["kind"],
        "aborted"
    );
    assert_eq!(body.lines().count(), 3, "{body}");

    // Out of memory (the allocator's message, then SIGABRT).
    set_mode(d, "oom");
    let (code, body) = post(&http, &base, "", json!({"seed": 1})).await;
    assert_eq!(code, 200);
    let reason = lines(&body).last().unwrap()["details"]["reason"].clone();
    assert!(
        reason.as_str().unwrap().contains("more than its 512 MB"),
        "{reason}"
    );

    // A run that leaves a process behind holding its output open: the run ends when the
    // simulator does (not at the deadline), and what it left is killed.
    set_mode(d, "orphan");
    let (code, body) = post(&http, &base, "", json!({"seed": 1})).await;
    assert_eq!(code, 200);
    assert_eq!(lines(&body).last().unwrap()["kind"], "end", "{body}");
    let orphan = std::fs::read_to_string(d.join("orphan")).unwrap();
    wait_for("the process the run left to be killed", async || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", orphan.trim())).ok();
        let alive =
            stat.is_some_and(|s| s.rsplit(") ").next().is_some_and(|r| !r.starts_with('Z')));
        (!alive).then_some(Value::Null)
    })
    .await;

    // Ended without an `end` line.
    set_mode(d, "noend");
    let (_, body) = post(&http, &base, "", json!({"seed": 1})).await;
    let reason = lines(&body).last().unwrap()["details"]["reason"].clone();
    assert!(
        reason
            .as_str()
            .unwrap()
            .contains("before the end of the run"),
        "{reason}"
    );

    // One run at a time: while one streams, another is 409; then it ends at its deadline.
    set_mode(d, "header");
    let mut first = http
        .post(format!("{base}/simulations"))
        .json(&json!({"seed": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let chunk = first.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&chunk).contains("header"));
    assert!(running(&http, &base).await);
    let (code, answer) = post(&http, &base, "", json!({"seed": 2})).await;
    assert_eq!(code, 409, "{answer}");
    let rest = first.text().await.unwrap();
    assert!(rest.contains("aborted"), "{rest}");
    wait_for("the run to end", async || {
        (!running(&http, &base).await).then_some(Value::Null)
    })
    .await;
}

// Goal: a client that goes away stops its run at once (not at the deadline), and the next run
// can start. Method: a stand-in that prints a header and sleeps, a 10-minute deadline; the test
// reads the header and drops the answer, then waits for the process to be gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_client_goes_away_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_simulator(dir.path());
    let http = reqwest::Client::new();
    let (_serve, base) = serve(
        &http,
        &[
            "--sim-binary",
            fake.to_str().unwrap(),
            "--sim-timeout-ms",
            "600000",
        ],
    )
    .await;
    set_mode(dir.path(), "header");
    let mut r = http
        .post(format!("{base}/simulations"))
        .json(&json!({"seed": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.chunk().await.unwrap().unwrap();
    assert!(run_alive(dir.path()));
    drop(r);
    wait_for("the abandoned run to be killed", async || {
        (!run_alive(dir.path()) && !running(&http, &base).await).then_some(Value::Null)
    })
    .await;
    set_mode(dir.path(), "pass");
    let (code, body) = post(&http, &base, "", json!({"seed": 2})).await;
    assert_eq!(code, 200, "{body}");
}

// Goal: without a simulator the API says why, and an orq run from a source checkout builds one
// at the first run: 503 with Retry-After while it builds, then runs. Method: a missing
// --sim-binary; then a copy of the checkout's layout (target/debug/orq hard-linked, Cargo.toml,
// sim/Cargo.toml) with a stand-in `cargo` first on PATH that "builds" the stand-in simulator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_simulator_is_explained_or_built_from_the_checkout() {
    let http = reqwest::Client::new();
    {
        let (_serve, base) = serve(&http, &["--sim-binary", "/nonexistent/orq-sim"]).await;
        let s = get_json(&http, &format!("{base}/simulations"))
            .await
            .unwrap();
        assert_eq!(s["available"], false);
        assert_eq!(s["building"], false);
        assert_eq!(s["buildable"], false, "--sim-binary is never built");
        assert!(s["reason"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/orq-sim"));
        let r = http
            .post(format!("{base}/simulations"))
            .json(&json!({"seed": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 503);
        assert!(r.headers().get("retry-after").is_none());
    }

    // A binary that is not orq's simulator: `yes options` answers without end; the answer is
    // cut at its bound and the binary refused, not read into memory.
    {
        let (_serve, base) = serve(&http, &["--sim-binary", "/usr/bin/yes"]).await;
        let s = get_json(&http, &format!("{base}/simulations"))
            .await
            .unwrap();
        assert_eq!(s["available"], false, "{s}");
        assert!(
            s["reason"]
                .as_str()
                .unwrap()
                .contains("more than 65536 bytes"),
            "{s}"
        );
    }

    // A checkout: <root>/target/debug/orq, <root>/Cargo.toml, <root>/sim/Cargo.toml.
    let root = tempfile::tempdir_in(Path::new(env!("CARGO_TARGET_TMPDIR"))).unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join("target/debug")).unwrap();
    std::fs::create_dir_all(r.join("sim")).unwrap();
    std::fs::create_dir_all(r.join("bin")).unwrap();
    std::fs::write(r.join("Cargo.toml"), "[workspace]\n").unwrap();
    std::fs::write(r.join("sim/Cargo.toml"), "[package]\n").unwrap();
    let orq = r.join("target/debug/orq");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_orq"), &orq).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_orq"), &orq).unwrap();
    }
    let fake = fake_simulator(r);
    // The built copy reads its mode beside itself.
    set_mode(&r.join("target/debug"), "pass");
    // The stand-in cargo: records its arguments, waits for the test's go, "builds".
    let cargo = r.join("bin/cargo");
    std::fs::write(
        &cargo,
        format!(
            "#!/bin/sh\necho \"$(pwd) $*\" > {root}/cargo-args\nwhile [ ! -f {root}/go ]; do sleep 0.1; done\ncp {fake} {root}/target/debug/orq-sim\n",
            root = r.display(),
            fake = fake.display()
        ),
    )
    .unwrap();
    let mut perm = std::fs::metadata(&cargo).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&cargo, perm).unwrap();
    let listen = free_listen_addr();
    let path = format!(
        "{}:{}",
        r.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let _serve = Proc(Some(
        Command::new(&orq)
            .args([
                "serve",
                "--listen",
                &listen,
                "--no-dashboard-build",
                "--concurrency",
                "0",
            ])
            .env("PATH", &path)
            .env("ORQ_LOG", "warn")
            .env_remove("ORQ_SIM_BINARY")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    ));
    let base = format!("http://{listen}/api/v1");
    wait_ready(&http, &base).await;
    let s = get_json(&http, &format!("{base}/simulations"))
        .await
        .unwrap();
    assert_eq!(s["available"], false, "{s}");
    assert_eq!(s["building"], false, "a look never builds");
    assert_eq!(s["buildable"], true, "{s}");
    assert_eq!(
        s["reason"],
        "the simulator (orq-sim) is not built yet; the first run builds it from this source \
         checkout, which takes a few minutes once"
    );
    let r1 = http
        .post(format!("{base}/simulations"))
        .json(&json!({"seed": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r1.status(), 503);
    assert_eq!(r1.headers()["retry-after"], "10");
    let s = get_json(&http, &format!("{base}/simulations"))
        .await
        .unwrap();
    assert_eq!(s["building"], true, "{s}");
    assert!(s["reason"].as_str().unwrap().contains("building"), "{s}");
    let again = http
        .post(format!("{base}/simulations"))
        .json(&json!({"seed": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 503, "still building");
    std::fs::write(r.join("go"), "").unwrap();
    wait_for("the simulator to be built", async || {
        let s = get_json(&http, &format!("{base}/simulations")).await?;
        (s["available"] == true).then_some(s)
    })
    .await;
    let args = std::fs::read_to_string(r.join("cargo-args")).unwrap();
    assert_eq!(
        args.trim(),
        format!("{} build --bin orq-sim", r.display()),
        "built in the checkout with the binary's profile"
    );
    let (code, body) = post(&http, &base, "", json!({"seed": 1})).await;
    assert_eq!(code, 200, "{body}");
}
