//! `orq-sim`: run one seed (optionally writing its timeline) or check a range of seeds.
//!
//! Exit codes: 0 every run passed; 1 a safety violation; 2 a liveness failure; 3 a crash (panic)
//! of the engine or the harness. With several failing seeds, the highest code wins.

use clap::{Parser, Subcommand};
use orq_sim::harness::{replay_command, run, PlantedBug, SimConfig, Verdict};
use std::path::PathBuf;
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
        /// Write the timeline (JSON Lines, see docs/timeline.md) to FILE.
        #[arg(long, value_name = "FILE")]
        timeline: Option<PathBuf>,
        /// Plant a known bug (tests of the simulator): complete_ignores_token,
        /// lease_ignores_run_at, reap_does_not_count_attempt, worker_ignores_lost_lease,
        /// worker_drops_refused_outcome, heartbeat_waits_interval (these two show on seeds
        /// that draw store refusals),
        /// lease_ignores_max_inflight, lease_ignores_rate_limit, lease_ignores_pause (the last
        /// three only show on seeds that draw tenant limits or pauses).
        #[arg(long, default_value = "none")]
        planted: String,
        /// Roll the store back to an earlier snapshot once (weakened invariants).
        #[arg(long)]
        lossy: bool,
    },
    /// Run every seed in A..B (B exclusive) and report the failures.
    Check {
        /// Seed range, `A..B`.
        #[arg(long, value_name = "A..B")]
        seeds: String,
        /// Plant a known bug (see `run --help`).
        #[arg(long, default_value = "none")]
        planted: String,
        /// Roll the store back once per run.
        #[arg(long)]
        lossy: bool,
        /// Write the timeline of every failing seed into DIR as `seed-<N>.jsonl`.
        #[arg(long, value_name = "DIR")]
        timelines: Option<PathBuf>,
    },
}

fn config(seed: u64, planted: &str, lossy: bool) -> Result<SimConfig, String> {
    let bug = PlantedBug::parse(planted).ok_or_else(|| format!("unknown --planted {planted}"))?;
    let mut c = SimConfig::draw(seed).with_planted(bug);
    if lossy {
        c = c.with_lossy_restart();
    }
    Ok(c)
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Cmd::Run {
            seed,
            timeline,
            planted,
            lossy,
        } => {
            let c = match config(seed, &planted, lossy) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(64);
                }
            };
            println!("seed {seed}");
            println!("config {}", serde_json::to_string(&c).unwrap_or_default());
            let t0 = Instant::now();
            let r = run(&c);
            let wall = t0.elapsed();
            if let Some(path) = timeline {
                if let Err(e) = std::fs::write(&path, r.timeline_text()) {
                    eprintln!("error: cannot write {}: {e}", path.display());
                    std::process::exit(64);
                }
                println!("timeline written to {}", path.display());
            }
            println!(
                "stats {}",
                serde_json::to_string(&r.stats).unwrap_or_default()
            );
            println!(
                "verdict {:?} in {:.3} s wall, {} script calls ({:.0} calls/s)",
                r.verdict,
                wall.as_secs_f64(),
                r.stats.script_calls,
                r.stats.script_calls as f64 / wall.as_secs_f64().max(1e-9)
            );
            if r.verdict != Verdict::Pass {
                println!("replay: {}", replay_command(&c));
            }
            r.verdict.exit_code()
        }
        Cmd::Check {
            seeds,
            planted,
            lossy,
            timelines,
        } => {
            let Some((a, b)) = seeds
                .split_once("..")
                .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
            else {
                eprintln!("error: --seeds must be A..B");
                std::process::exit(64);
            };
            let t0 = Instant::now();
            let (mut worst, mut failed, mut calls) = (0, 0u64, 0u64);
            for seed in a..b {
                let c = match config(seed, &planted, lossy) {
                    Ok(c) => c,
                    Err(e) => {
                        eprintln!("error: {e}");
                        std::process::exit(64);
                    }
                };
                let r = run(&c);
                calls += r.stats.script_calls;
                if r.verdict != Verdict::Pass {
                    failed += 1;
                    worst = worst.max(r.verdict.exit_code());
                    println!(
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
                }
            }
            let n = b.saturating_sub(a);
            let wall = t0.elapsed().as_secs_f64();
            println!(
                "{n} seeds, {failed} failed, {:.3} s per seed, {:.0} script calls/s",
                wall / n.max(1) as f64,
                calls as f64 / wall.max(1e-9)
            );
            worst
        }
    };
    std::process::exit(code);
}
