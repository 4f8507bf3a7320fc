//! `orq-sim`: run one seed (optionally writing its timeline) or check a range of seeds.
//!
//! Exit codes: 0 every run passed; 1 a safety violation; 2 a liveness failure; 3 a crash (panic)
//! of the engine or the harness. With several failing seeds, the highest code wins.

use clap::{Parser, Subcommand};

/// mimalloc: the simulator allocates and frees small strings and tables on every simulated
/// call (Lua's allocator goes through this one too).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
use orq_sim::harness::{
    replay_command, run, run_streaming, Choice, PlantedBug, SimConfig, Verdict, FAULT_FAMILIES,
    FULL_CHECK_EVERY, TASKS_MAX,
};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// orq's deterministic simulator: the real engine and the real Lua scripts on a virtual clock,
/// with seeded faults and invariant checks after every step.
#[derive(Debug, Parser)]
#[command(name = "orq-sim", version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run one seed; print its configuration and verdict.
    Run {
        /// The seed (also ORQ_SIM_SEED).
        #[arg(long, env = "ORQ_SIM_SEED")]
        seed: u64,
        /// Write the timeline (JSON Lines, see docs/timeline.md) to FILE; `-` streams it to
        /// stdout as the run goes (line by line, the header first) and prints the summary on
        /// stderr.
        #[arg(long, value_name = "FILE")]
        timeline: Option<PathBuf>,
        #[command(flatten)]
        choice: ChoiceArgs,
        /// Limit the process's memory to MB megabytes (RLIMIT_DATA: heap and private
        /// mappings, not the stack): a run that needs
        /// more fails to allocate and aborts instead of taking the machine's memory.
        #[arg(long, value_name = "MB", value_parser = clap::value_parser!(u64).range(64..=1_048_576))]
        max_memory_mb: Option<u64>,
        /// Plant a known bug (tests of the simulator): complete_ignores_token,
        /// lease_ignores_run_at, reap_does_not_count_attempt, worker_ignores_lost_lease,
        /// worker_drops_refused_outcome, heartbeat_waits_interval (these two show on seeds
        /// that draw store refusals), store_loads_library_once (on seeds that draw script
        /// flushes), pull_ignores_lost_lease (on seeds that draw pull workers of the HTTP
        /// protocol), lease_ignores_tenants (on seeds whose pull workers lease for some tenants
        /// only), lease_ignores_max_inflight, lease_ignores_rate_limit, lease_ignores_pause (the
        /// last three only show on seeds that draw tenant limits or pauses).
        #[arg(long, default_value = "none")]
        planted: String,
        /// Roll the store back to an earlier snapshot once (weakened invariants).
        #[arg(long)]
        lossy: bool,
        /// Check the whole queue every N script calls (1: after every call); between, the
        /// checker checks what each call touched.
        #[arg(long, value_name = "N", default_value_t = FULL_CHECK_EVERY)]
        full_check_every: u64,
    },
    /// Run every seed in A..B (B exclusive) and report the failures.
    Check {
        /// Seed range, `A..B`.
        #[arg(long, value_name = "A..B")]
        seeds: String,
        #[command(flatten)]
        choice: ChoiceArgs,
        /// Plant a known bug (see `run --help`).
        #[arg(long, default_value = "none")]
        planted: String,
        /// Roll the store back once per run.
        #[arg(long)]
        lossy: bool,
        /// Write the timeline of every failing seed into DIR as `seed-<N>.jsonl`.
        #[arg(long, value_name = "DIR")]
        timelines: Option<PathBuf>,
        /// Check the whole queue every N script calls (see `run --help`).
        #[arg(long, value_name = "N", default_value_t = FULL_CHECK_EVERY)]
        full_check_every: u64,
        /// Seeds run at once, each on its own thread (default: the machine's cores).
        #[arg(long, value_name = "N")]
        jobs: Option<usize>,
    },
    /// Print what a run can be asked for, as JSON: the fault families, the planted bugs, the
    /// most tasks (what `orq api` offers in the dashboard's run form).
    Options,
}

/// Draws chosen instead of the seed's (the replay command repeats them).
#[derive(Debug, clap::Args)]
struct ChoiceArgs {
    /// Switch on these fault families only, instead of the seed's own draw: `none`, or some of
    /// crash,stall,clock,restart,network,refusal separated by commas.
    #[arg(long, value_name = "LIST", value_parser = parse_families)]
    faults: Option<Families>,
    /// Submit N tasks instead of the seed's own draw (1..=1000).
    #[arg(long, value_name = "N", value_parser = parse_tasks)]
    tasks: Option<u32>,
}

impl ChoiceArgs {
    fn choice(&self) -> Choice {
        Choice {
            families: self.faults.clone().map(|f| f.0),
            tasks: self.tasks,
        }
    }
}

/// The value of `--faults` (a list in one value, so clap sees one value, not several).
#[derive(Debug, Clone)]
struct Families(Vec<String>);

fn parse_families(s: &str) -> Result<Families, String> {
    Choice::parse_families(s).map(Families)
}

fn parse_tasks(s: &str) -> Result<u32, String> {
    let n: u32 = s.parse().map_err(|e| format!("{e}"))?;
    Choice::check_tasks(n)
}

fn config(
    seed: u64,
    choice: &Choice,
    planted: &str,
    lossy: bool,
    full_every: u64,
) -> Result<SimConfig, String> {
    let bug = PlantedBug::parse(planted).ok_or_else(|| format!("unknown --planted {planted}"))?;
    let mut c = SimConfig::draw_chosen(seed, choice.clone())
        .with_planted(bug)
        .with_full_check_every(full_every);
    if lossy {
        c = c.with_lossy_restart();
    }
    Ok(c)
}

/// What a seed sweep found.
#[derive(Default)]
struct Sweep {
    calls: u64,
    failed: u64,
    worst: i32,
}

/// One seed's script calls and, when it failed, its exit code and report lines.
type SeedResult = (u64, Option<(i32, String)>);

/// Run `one` for every seed of `seeds` on `jobs` threads. `one` returns the seed's script calls
/// and, when it failed, its exit code and report lines, which are printed in seed order as soon
/// as every earlier seed is done (so the output does not depend on the thread count).
fn check<F>(seeds: std::ops::Range<u64>, jobs: usize, one: F) -> Sweep
where
    F: Fn(u64) -> SeedResult + Sync,
{
    let next = AtomicU64::new(seeds.start);
    let done: Mutex<(u64, BTreeMap<u64, SeedResult>, Sweep)> =
        Mutex::new((seeds.start, BTreeMap::new(), Sweep::default()));
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= seeds.end {
                    break;
                }
                let result = one(seed);
                let mut d = done.lock().unwrap();
                let (printed, pending, sweep) = &mut *d;
                pending.insert(seed, result);
                while let Some((calls, failed)) = pending.remove(printed) {
                    sweep.calls += calls;
                    if let Some((code, line)) = failed {
                        sweep.failed += 1;
                        sweep.worst = sweep.worst.max(code);
                        // A closed stdout (`| head`) ends the output, not the sweep.
                        let _ = writeln!(std::io::stdout(), "{line}");
                    }
                    *printed += 1;
                }
            });
        }
    });
    done.into_inner().unwrap().2
}

/// `orq-sim run`: run `c`, write or stream its timeline, print the summary; the exit code.
fn run_one(c: &SimConfig, timeline: Option<&std::path::Path>) -> i32 {
    let streaming = timeline.is_some_and(|p| p.as_os_str() == "-");
    // The summary goes where the timeline does not.
    let say = |line: String| {
        if streaming {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    say(format!("seed {}", c.seed));
    say(format!(
        "config {}",
        serde_json::to_string(c).unwrap_or_default()
    ));
    let t0 = Instant::now();
    let r = if streaming {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let mut closed = false;
        let mut sink = |line: &str| {
            // A reader that went away (the API stopped the run, `| head`) ends the output, and
            // the run ends as it would have.
            if !closed && writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
                closed = true;
            }
        };
        let r = run_streaming(c, &mut sink);
        if r.verdict != Verdict::Pass && r.timeline.is_empty() {
            // A crash (panic) leaves no `end` line in the stream: write one.
            let end = serde_json::json!({"t_ms": null, "actor": "harness", "kind": "end",
                "task": null, "tenant": null, "attempt": null,
                "details": {"verdict": format!("{:?}", r.verdict), "stats": r.stats}});
            sink(&end.to_string());
        }
        r
    } else {
        run(c)
    };
    let wall = t0.elapsed();
    if let Some(path) = timeline.filter(|_| !streaming) {
        if let Err(e) = std::fs::write(path, r.timeline_text()) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return 64;
        }
        say(format!("timeline written to {}", path.display()));
    }
    say(format!(
        "stats {}",
        serde_json::to_string(&r.stats).unwrap_or_default()
    ));
    say(format!(
        "verdict {:?} in {:.3} s wall, {} script calls ({:.0} calls/s)",
        r.verdict,
        wall.as_secs_f64(),
        r.stats.script_calls,
        r.stats.script_calls as f64 / wall.as_secs_f64().max(1e-9)
    ));
    if r.verdict != Verdict::Pass {
        say(format!("replay: {}", replay_command(c)));
    }
    r.verdict.exit_code()
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Cmd::Run {
            seed,
            timeline,
            choice,
            max_memory_mb,
            planted,
            lossy,
            full_check_every,
        } => {
            let c = match config(seed, &choice.choice(), &planted, lossy, full_check_every) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(64);
                }
            };
            if let Some(mb) = max_memory_mb {
                let bytes = mb << 20;
                if let Err(e) = rlimit::setrlimit(rlimit::Resource::DATA, bytes, bytes) {
                    eprintln!("error: cannot limit memory to {mb} MB: {e}");
                    std::process::exit(64);
                }
            }
            run_one(&c, timeline.as_deref())
        }
        Cmd::Options => {
            let planted: Vec<&str> = std::iter::once(PlantedBug::None)
                .chain(PlantedBug::ALL)
                .chain(PlantedBug::TENANCY)
                .map(PlantedBug::name)
                .collect();
            println!(
                "{}",
                serde_json::json!({
                    "families": FAULT_FAMILIES,
                    "planted": planted,
                    "tasks_max": TASKS_MAX,
                })
            );
            0
        }
        Cmd::Check {
            seeds,
            choice,
            planted,
            lossy,
            timelines,
            full_check_every,
            jobs,
        } => {
            let Some((a, b)) = seeds
                .split_once("..")
                .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
            else {
                eprintln!("error: --seeds must be A..B");
                std::process::exit(64);
            };
            let choice = choice.choice();
            if let Err(e) = config(a, &choice, &planted, lossy, full_check_every) {
                eprintln!("error: {e}");
                std::process::exit(64);
            }
            let jobs = jobs
                .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
                .unwrap_or(1)
                .max(1);
            let t0 = Instant::now();
            let out = check(a..b, jobs, |seed| {
                let c = config(seed, &choice, &planted, lossy, full_check_every)
                    .expect("checked above");
                let r = run(&c);
                let failed = (r.verdict != Verdict::Pass).then(|| {
                    let line = format!(
                        "seed {seed}: {:?}\n  replay: {}",
                        r.verdict,
                        replay_command(&c)
                    );
                    if let Some(dir) = &timelines {
                        let _ = std::fs::create_dir_all(dir);
                        let _ = std::fs::write(
                            dir.join(format!("seed-{seed}.jsonl")),
                            r.timeline_text(),
                        );
                    }
                    (r.verdict.exit_code(), line)
                });
                (r.stats.script_calls, failed)
            });
            let n = b.saturating_sub(a);
            let wall = t0.elapsed().as_secs_f64();
            println!(
                "{n} seeds on {jobs} threads, {} failed, {:.3} s per seed, {:.0} script calls/s",
                out.failed,
                wall / n.max(1) as f64,
                out.calls as f64 / wall.max(1e-9)
            );
            out.worst
        }
    };
    std::process::exit(code);
}
