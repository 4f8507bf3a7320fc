//! Real-process chaos, in the spirit of Jepsen (issue 20, item 5): `orq api`, two
//! `orq scheduler` and three `orq worker` as real processes on a private redis-server with
//! `appendonly yes` and `appendfsync always`, under a seeded nemesis, while a client submits
//! `http` tasks to a local receiver that records every side effect.
//!
//! **Cluster mode** (`--cluster`, issue 21 item 5): the same processes on a private Redis
//! Cluster of three primaries with a replica each (every node with `appendonly yes` and
//! `appendfsync always`), a queue on each primary (`chaos-<n>`, tasks spread over them), and
//! every orq process with `--wait-replicas 1`, the configuration we promise is lossless. One
//! more fault, `primary_kill`: kill -9 the primary of a busy queue's slot, let the cluster
//! promote its replica (node timeout 2 s, then the election: a few seconds), start the killed
//! node again on its port with its `nodes.conf` and AOF (it rejoins as the new primary's
//! replica) and wait until it has synced. And `replica_kill`: kill -9 a replica, restart it;
//! meanwhile its primary refuses the recorded writes (NOREPLICAS: API 503, workers resend), and
//! that must make no task run twice. The faults on the store act on one node, the primary of
//! the drawn queue (`CLIENT KILL`, `CLIENT PAUSE`, `DEBUG SLEEP` of at most 1 s so that no stall
//! comes near the node timeout, OOM by `CONFIG SET maxmemory` on that node); `redis_kill` of the
//! one server is left out. The last check kills -9 every node at once and restarts the whole
//! cluster from its AOFs. The invariants are the same, "lost 0" included: with
//! `--wait-replicas 1` a submit or an outcome is acknowledged only once the replica has it, so
//! the promoted replica has every acknowledged task. Without it (`--wait-replicas 0`,
//! replication asynchronous) a kill -9 of a primary may take the writes it acknowledged just
//! before with it, so acknowledged tasks may be lost (404) or completed ones run again: that
//! configuration is not lossless and this test does not run it. What `--wait-replicas` does not
//! cover either: leases and heartbeats do not wait, so the promoted replica may miss the last
//! lease of a task (it then runs again, explained by the primary kill; the epoch it gets again
//! is the one the lost lease had, which the checker would report as two requests under one
//! epoch).
//!
//! `cargo test -p orq-server --test chaos` runs two bounded CI entries, one after the other:
//! `chaos` (one Redis, 60 s of faults, seed 8) and `chaos_cluster` (the cluster mode, 30 s of
//! faults, seed 29). A long run is `cargo test --release -p orq-server --test chaos -- --seconds
//! 600 --seed 7` (one Redis: any of `--seconds`, `--seed`, `--rate` runs that mode alone) or
//! `... -- --cluster --seconds 600 --seed 7`. Options (after `--`): `--cluster`, `--seconds N`
//! (fault phase), `--seed N`, `--rate N` (tasks submitted per second, 50), `--keep-logs` (keep
//! the processes' logs of a passing run too). Flags of the test harness that `cargo test` passes
//! (`--quiet`, `--test-threads N`, ...) are ignored; a name filter skips the entries it does not
//! match (`chaos` matches both, `cluster` the cluster one, `--exact chaos` the single one).
//! `ORQ_CHAOS_BIN=<path>` runs another build of `orq` (one with a planted bug, to see the checks
//! catch it).

// Goal: under every fault orq must survive (processes killed or stopped, Redis killed and
// restarted from its AOF, connections dropped, Redis paused, asleep or out of memory), no
// acknowledged task is lost or stuck, no lease epoch calls a webhook twice, no task runs beyond
// its retry budget, the API never answers 500, and every task whose webhook was called more than
// once is explained by a fault that may cause that (the worker that held it killed or stopped,
// a Redis restart) — never by a refusal shorter than the lease (an OOM episode, CLIENT PAUSE,
// DEBUG SLEEP or CLIENT KILL).
// Method: a seeded nemesis (chaos/nemesis.rs) injects faults at random gaps for the fault
// phase and records each fault's window; faults on Redis come one at a time with 3 s of quiet
// after each, so that every refusal stands alone (back to back they would add up to an outage
// as long as a lease). Submitters post `http` tasks with idempotency keys, resubmitting a key
// after any error until acknowledged; the receiver records each request's task id, attempt and
// epoch (chaos/load.rs). Then the faults stop, every process runs again, every acknowledged task
// must reach a final status, Redis is killed -9 once more and every final state must survive
// it; the checker (chaos/check.rs) counts each invariant's violations and explains every rerun,
// every expired lease and every dead task by the fault windows and the task's attempt history
// (which names the worker incarnation that held each lost lease).

#[path = "chaos/check.rs"]
mod check;
#[path = "chaos/load.rs"]
mod load;
#[path = "chaos/nemesis.rs"]
mod nemesis;
#[path = "chaos/procs.rs"]
mod procs;

use load::{Load, Receiver};
use procs::{lock, Cluster, Mode};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The CI version's fault phase (s).
const CI_SECONDS: u64 = 60;
/// The CI version's seed.
const CI_SEED: u64 = 8;
/// The cluster mode's CI fault phase (s): with the cluster's start and its last restart, the
/// entry adds about 45 s to CI.
const CI_CLUSTER_SECONDS: u64 = 30;
/// The cluster mode's CI seed: its draws put a `primary_kill` 2 s into the run, when nothing
/// else holds the store, and a second one and a `replica_kill` later (when their turn does not
/// fall inside an earlier fault on the store: that depends on how long faults take).
const CI_CLUSTER_SEED: u64 = 29;
/// Tasks submitted per second by default (all submitters together, when the API answers).
const DEFAULT_RATE: u64 = 50;
/// Concurrent submitters.
const SUBMITTERS: u64 = 8;
/// Every task's lease (ms): longer than any refusal the nemesis causes (at most 1.5 s), shorter
/// than its SIGSTOPs.
pub const LEASE_MS: u64 = 6_000;
/// How long, after the faults stop, every key may take to be acknowledged and every task to
/// finish (generous: a loaded CI machine).
const LIVENESS: Duration = Duration::from_secs(300);
/// Time for starting the processes and the last Redis kill, on top of the phases.
const SETUP: Duration = Duration::from_secs(180);

/// One run to do: a mode, its fault phase and seed.
#[derive(Debug, Clone)]
struct Args {
    /// The entry's name (`chaos`, `chaos_cluster`).
    name: &'static str,
    mode: Mode,
    seconds: u64,
    seed: u64,
    rate: u64,
    keep_logs: bool,
}

/// The command line.
#[derive(Debug, Clone)]
struct Cli {
    /// `--cluster`.
    cluster: bool,
    seconds: Option<u64>,
    seed: Option<u64>,
    rate: Option<u64>,
    keep_logs: bool,
    /// `--list`: name the entries and exit.
    list: bool,
    /// `--ignored`: every entry is left out (none is ignored).
    ignored: bool,
    filters: Vec<String>,
    skips: Vec<String>,
    exact: bool,
}

impl Cli {
    /// The runs the command line asks for: `--cluster` the cluster mode alone; any of
    /// `--seconds`, `--seed`, `--rate` without it one Redis alone; else both CI entries. Each
    /// with its name, before the name filters.
    fn entries(&self) -> Vec<Args> {
        let entry = |name, mode, seconds: u64, seed: u64| Args {
            name,
            mode,
            seconds: self.seconds.unwrap_or(seconds),
            seed: self.seed.unwrap_or(seed),
            rate: self.rate.unwrap_or(DEFAULT_RATE),
            keep_logs: self.keep_logs,
        };
        let single = entry("chaos", Mode::Single, CI_SECONDS, CI_SEED);
        let cluster = entry(
            "chaos_cluster",
            Mode::Cluster,
            CI_CLUSTER_SECONDS,
            CI_CLUSTER_SEED,
        );
        if self.cluster {
            vec![cluster]
        } else if self.seconds.is_some() || self.seed.is_some() || self.rate.is_some() {
            vec![single]
        } else {
            vec![single, cluster]
        }
    }

    /// Whether the harness's name filters, `--skip` and `--ignored` keep the entry `name`.
    fn selects(&self, name: &str) -> bool {
        let matches = |f: &String| {
            if self.exact {
                f == name
            } else {
                name.contains(f.as_str())
            }
        };
        !self.ignored
            && (self.filters.is_empty() || self.filters.iter().any(matches))
            && !self.skips.iter().any(|s| name.contains(s.as_str()))
    }
}

/// Parse `--cluster --seconds N --seed N --rate N --keep-logs` (also `--flag=N`); ignore the
/// test harness's flags, keep its name filters.
fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Cli, String> {
    let mut a = Cli {
        cluster: false,
        seconds: None,
        seed: None,
        rate: None,
        keep_logs: false,
        list: false,
        ignored: false,
        filters: Vec::new(),
        skips: Vec::new(),
        exact: false,
    };
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or(format!("{flag} needs a value"))
        };
        let number = |v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: {v:?} is not a number"))
        };
        match flag.as_str() {
            "--cluster" => a.cluster = true,
            "--seconds" => a.seconds = Some(number(value()?)?),
            "--seed" => a.seed = Some(number(value()?)?),
            "--rate" => a.rate = Some(number(value()?)?.max(1)),
            "--keep-logs" => a.keep_logs = true,
            "--list" => a.list = true,
            "--exact" => a.exact = true,
            "--ignored" => a.ignored = true,
            "--skip" => a.skips.push(value()?),
            "--test-threads" | "--format" | "--color" | "--logfile" | "--shuffle-seed" | "-Z" => {
                if inline.is_none() {
                    value()?;
                }
            }
            f if f.starts_with('-') => {}
            f => a.filters.push(f.to_string()),
        }
    }
    Ok(a)
}

/// The command that replays a run.
fn replay_command(a: &Args) -> String {
    let release = if cfg!(debug_assertions) {
        ""
    } else {
        " --release"
    };
    let rate = if a.rate == DEFAULT_RATE {
        String::new()
    } else {
        format!(" --rate {}", a.rate)
    };
    let cluster = if a.mode == Mode::Cluster {
        " --cluster"
    } else {
        ""
    };
    format!(
        "cargo test{release} -p orq-server --test chaos --{cluster} --seconds {} --seed {}{rate}",
        a.seconds, a.seed
    )
}

/// After `budget`, unless the returned flag is set by then, print why, SIGKILL every child and
/// exit 1: the test never hangs.
fn watchdog(budget: Duration, logs: PathBuf) -> Arc<std::sync::atomic::AtomicBool> {
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + budget;
        while Instant::now() < deadline {
            if flag.load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        eprintln!(
            "chaos: FAILED: the run exceeded its overall deadline of {} s (a phase hung); \
             killing every process; logs kept in {}",
            budget.as_secs(),
            logs.display()
        );
        procs::kill_all_live();
        std::process::exit(1);
    });
    done
}

fn main() {
    let cli = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("chaos: {e}");
            std::process::exit(2);
        }
    };
    let entries = cli.entries();
    if cli.list {
        for e in entries.iter().filter(|e| cli.selects(e.name)) {
            println!("{}: test", e.name);
        }
        return;
    }
    let mut failed = Vec::new();
    for args in entries {
        if !cli.selects(args.name) {
            println!("{}: filtered out", args.name);
        } else if !run_entry(&args) {
            failed.push(args.name);
        }
    }
    if !failed.is_empty() {
        eprintln!("chaos: FAILED: {}", failed.join(", "));
        std::process::exit(1);
    }
}

/// One entry: the run under a watchdog, its verdict, its logs kept when it failed; true when
/// it passed.
fn run_entry(args: &Args) -> bool {
    let name = args.name;
    let logs = std::env::temp_dir().join(format!(
        "orq-chaos-{}-{}",
        std::process::id(),
        procs::now_ms()
    ));
    std::fs::create_dir_all(&logs).expect("create the log directory");
    let budget = Duration::from_secs(args.seconds) + LIVENESS + SETUP;
    let done = watchdog(budget, logs.clone());
    println!(
        "{name}: seed {}, {} s of faults, {} tasks/s{}; replay: {}",
        args.seed,
        args.seconds,
        args.rate,
        match args.mode {
            Mode::Single => "",
            Mode::Cluster => ", Redis Cluster 3 primaries x 1 replica, --wait-replicas 1",
        },
        replay_command(args)
    );
    println!("{name}: logs in {}", logs.display());
    let started = Instant::now();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(args, &logs)));
    procs::kill_all_live();
    done.store(true, std::sync::atomic::Ordering::Release);
    let took = started.elapsed().as_secs();
    match outcome {
        Ok(true) => {
            if args.keep_logs {
                println!("{name}: ok in {took} s (logs kept in {})", logs.display());
            } else {
                let _ = std::fs::remove_dir_all(&logs);
                println!("{name}: ok in {took} s");
            }
            true
        }
        Ok(false) => {
            eprintln!(
                "{name}: FAILED in {took} s (seed {}); replay: {}; logs of every process kept in {}",
                args.seed,
                replay_command(args),
                logs.display()
            );
            false
        }
        Err(_) => {
            eprintln!(
                "{name}: FAILED: the run panicked (above) (seed {}); replay: {}; logs kept in {}",
                args.seed,
                replay_command(args),
                logs.display()
            );
            false
        }
    }
}

/// Start everything, drive the phases, check and print; true when every invariant held.
fn run(args: &Args, logs: &Path) -> bool {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let receiver = rt.block_on(Receiver::start());
    let cluster = Arc::new(Cluster::start(
        logs,
        format!("http://127.0.0.1:{}/", receiver.port),
        args.mode,
    ));
    if args.mode == Mode::Cluster {
        println!(
            "{}: cluster {} up; queues {}",
            args.name,
            cluster.setup.redis_url,
            cluster.setup.queues.join(", ")
        );
    }
    let load = Arc::new(Load::new(
        &cluster.setup.api_listen,
        receiver.port,
        args.seed,
        cluster.setup.queues.clone(),
    ));
    let passed = rt.block_on(drive(args, cluster.clone(), load, &receiver, logs));
    rt.shutdown_timeout(Duration::from_secs(5));
    drop(cluster);
    passed
}

/// The phases: faults with load, liveness, a last Redis kill; then the checks.
async fn drive(
    args: &Args,
    cluster: Arc<Cluster>,
    load: Arc<Load>,
    rx: &Receiver,
    logs: &Path,
) -> bool {
    load.wait_ready(Duration::from_secs(120))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let period = Duration::from_millis(SUBMITTERS * 1000 / args.rate);
    let submitters = load.start_submitters(SUBMITTERS as usize, period);

    let (tx, mut nemesis_done) = tokio::sync::oneshot::channel();
    let (c2, seed, length) = (
        cluster.clone(),
        args.seed,
        Duration::from_secs(args.seconds),
    );
    std::thread::spawn(move || {
        let _ = tx.send(nemesis::run(c2, seed, length, LEASE_MS));
    });
    let record = loop {
        tokio::select! {
            r = &mut nemesis_done => break r.expect("the nemesis thread panicked"),
            _ = tokio::time::sleep(Duration::from_secs(10)) => {
                let acked = lock(&load.stats).acked.len();
                let requests = lock(&rx.received).effects.len();
                println!(
                    "chaos: {:>4} s: {acked} tasks acknowledged, {requests} webhook requests",
                    started.elapsed().as_secs()
                );
            }
        }
    };
    println!(
        "chaos: faults stopped after {} s ({} injected); every process runs again; liveness",
        started.elapsed().as_secs(),
        record.windows.len()
    );

    let faults_stopped = Instant::now();
    let deadline = faults_stopped + LIVENESS;
    load.stop_new_keys(deadline);
    Load::join(submitters).await;
    let ids: Vec<String> = lock(&load.stats)
        .acked
        .values()
        .map(|a| a.id.clone())
        .collect();
    let tasks = load.wait_final(&ids, deadline).await;
    let finals = ids
        .iter()
        .filter(|id| load::is_final_read(tasks.get(*id)))
        .count();
    println!(
        "chaos: {finals} of {} acknowledged tasks final {:.1} s after the faults stopped",
        ids.len(),
        faults_stopped.elapsed().as_secs_f64()
    );

    // A last kill -9 of Redis (of every cluster node at once): with `appendfsync always`, every
    // final state survives it.
    let c3 = cluster.clone();
    let last_kill = Instant::now();
    tokio::task::spawn_blocking(move || lock(&c3.store).kill_all_and_restart())
        .await
        .expect("restart Redis");
    load.wait_ready(Duration::from_secs(120))
        .await
        .unwrap_or_else(|e| panic!("after the last Redis restart: {e}"));
    let again = load
        .wait_final(&ids, Instant::now() + Duration::from_secs(120))
        .await;
    println!(
        "chaos: every final state read again {:.1} s after the last kill -9 of {}",
        last_kill.elapsed().as_secs_f64(),
        match args.mode {
            Mode::Single => "Redis",
            Mode::Cluster => "every cluster node",
        }
    );
    let state = |t: Option<&Option<serde_json::Value>>| {
        t.and_then(|t| t.as_ref())
            .map(|t| (t["status"].clone(), t["attempt"].clone()))
    };
    let changed_by_last_kill: Vec<String> = ids
        .iter()
        .filter(|id| load::is_final_read(tasks.get(*id)))
        .filter(|id| state(tasks.get(*id)) != state(again.get(*id)))
        .map(|id| {
            format!(
                "task {id}: {:?} then {:?}",
                state(tasks.get(id)),
                state(again.get(id))
            )
        })
        .collect();

    let received = lock(&rx.received).clone();
    let client = std::mem::take(&mut *lock(&load.stats));
    let report = check::check(&check::Evidence {
        lease_ms: LEASE_MS,
        client: &client,
        received: &received,
        nemesis: &record,
        tasks: &tasks,
        changed_by_last_kill,
    });
    print_report(args, &client, &received, &record, &report);
    write_evidence(logs, &received, &record, &report);
    report.passed()
}

/// Write the fault windows (`faults.tsv`), every webhook request (`requests.tsv`) and the
/// checker's details (`details.txt`) next to the processes' logs.
fn write_evidence(
    logs: &Path,
    received: &load::Received,
    record: &nemesis::Record,
    report: &check::Report,
) {
    let mut faults = String::from("kind\ttarget\tstart_ms\tend_ms\tdetail\n");
    for w in &record.windows {
        faults.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\n",
            w.kind.name(),
            w.target,
            w.start_ms,
            w.end_ms,
            w.detail
        ));
    }
    let mut requests = String::from("at_ms\ttask\tattempt\tepoch\tkey\tstatus\n");
    for e in &received.effects {
        requests.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\n",
            e.at_ms, e.task, e.attempt, e.epoch, e.key, e.status
        ));
    }
    let _ = std::fs::write(logs.join("faults.tsv"), faults);
    let _ = std::fs::write(logs.join("requests.tsv"), requests);
    let _ = std::fs::write(logs.join("details.txt"), report.details.join("\n"));
}

/// Print the figures, the fault windows' counts, the table, the details and the summary line.
fn print_report(
    args: &Args,
    client: &load::ClientStats,
    received: &load::Received,
    record: &nemesis::Record,
    report: &check::Report,
) {
    let fig = |k: &str| report.figures.get(k).copied().unwrap_or(0);
    let planned_500 = received.effects.iter().filter(|e| e.status == 500).count();
    let retried_keys = client.acked.values().filter(|a| a.retries > 0).count();
    let statuses: Vec<String> = client
        .statuses
        .iter()
        .map(|(s, n)| format!("{s} x{n}"))
        .collect();
    let counts = record.counts();
    let faults: Vec<String> = counts
        .iter()
        .map(|(k, n)| format!("{} {n}", k.name()))
        .collect();
    let skipped: u64 = record.skipped.values().sum();
    println!();
    println!(
        "== {} report: seed {}, {} s of faults",
        args.name, args.seed, args.seconds
    );
    println!(
        "tasks: {} keys submitted, {} acknowledged ({} after resubmitting their key), {} completed, {} dead",
        client.started,
        fig("acknowledged"),
        retried_keys,
        fig("completed"),
        fig("dead")
    );
    println!(
        "webhook requests: {} ({} answered 200, {} planned 500s)",
        received.effects.len(),
        received.effects.len() - planned_500,
        planned_500
    );
    println!(
        "API answers other than 2xx: {}; requests without an answer (API down): {}",
        if statuses.is_empty() {
            "none".to_string()
        } else {
            statuses.join(", ")
        },
        client.transport_errors
    );
    println!(
        "faults injected: {} ({}); {} drawn while their target was busy (skipped)",
        record.windows.len(),
        faults.join(", "),
        skipped
    );
    let expiries: Vec<String> = report
        .expiries
        .iter()
        .map(|(c, n)| format!("{} {n}", c.short()))
        .collect();
    println!(
        "expired leases by cause: {}",
        if expiries.is_empty() {
            "none".into()
        } else {
            expiries.join(", ")
        }
    );
    println!();
    print!("{}", report.table());
    println!();
    let shown = 25;
    for prefix in ["rerun:", "dead:", "lost lease reply:"] {
        let lines: Vec<&String> = report
            .details
            .iter()
            .filter(|d| d.starts_with(prefix))
            .collect();
        for d in lines.iter().take(shown) {
            println!("{d}");
        }
        if lines.len() > shown {
            println!("... and {} more \"{prefix}\" lines", lines.len() - shown);
        }
    }
    let violations: Vec<&String> = report
        .details
        .iter()
        .filter(|d| d.chars().next().is_some_and(|c| c.is_ascii_uppercase()))
        .collect();
    for d in violations.iter().take(100) {
        println!("{d}");
    }
    if !report.passed() {
        println!("fault windows (kind target start_ms end_ms detail):");
        for w in &record.windows {
            println!(
                "  {} {} {} {} {}",
                w.kind.name(),
                w.target,
                w.start_ms,
                w.end_ms,
                w.detail
            );
        }
    }
    let causes: Vec<String> = check::Cause::ALL
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                c.short(),
                report.reruns.get(c).copied().unwrap_or(0)
            )
        })
        .collect();
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!();
    println!(
        "{} summary: seed {}, {} s of faults ({build} build): {} tasks acknowledged ({} completed, {} dead); \
         {} faults ({}); {} tasks ran more than once ({}); lost {}, stuck {}, two requests under one epoch {}, \
         attempts over budget {}, API 500s {} (503s {}); {} leases expired ({} never ran: their lease reply was lost)",
        args.name,
        args.seed,
        args.seconds,
        fig("acknowledged"),
        fig("completed"),
        fig("dead"),
        record.windows.len(),
        faults.join(", "),
        fig("reruns"),
        causes.join(", "),
        fig("lost"),
        fig("stuck"),
        fig("epoch_dups"),
        fig("over_budget"),
        fig("api_500"),
        fig("api_503"),
        report.expiries.values().sum::<u64>(),
        report
            .expiries
            .get(&check::Cause::LostLeaseReply)
            .copied()
            .unwrap_or(0),
    );
    println!("chaos: replay with: {}", replay_command(args));
}
