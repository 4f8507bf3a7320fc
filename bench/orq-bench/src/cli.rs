//! `orq bench` on the command line: its options ([`BenchArgs`], part of the `orq` binary's
//! command line) and the run they ask for, printed as a table and written as JSON.
//!
//! The doc comments of [`BenchArgs`] are the command line's `--help` text, written for a
//! terminal: `<master-name>` there is literal text, not HTML.
#![allow(rustdoc::invalid_html_tags)]

use crate::progress::{Bar, Progress, Quiet};
use crate::redis_work::{redis_probes, RedisProbes};
use crate::report::table;
use crate::{run, BenchPlan};
use clap::{Args, ValueEnum};
use orq::{Clock, Entropy, Store};
use std::path::PathBuf;
use std::sync::Arc;

/// What an `orq bench` process does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    /// The three phases, producer and worker pool in this process.
    All,
    /// Only submit, to `--queue`, through the Rust client (`echo` tasks, for `orq worker` in
    /// another process); prints one JSON line (first_submit_ms, last_submit_ms, submit_s).
    Producer,
}

/// `orq bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// all: the three phases in this process; producer: only submit --tasks N (or, with
    /// --delayed D, D delayed) `echo` tasks in batches to --queue on --redis, for an `orq worker`
    /// in another process (bench/compare.py), and print one JSON line.
    #[arg(long, value_enum, default_value_t = Role::All)]
    pub role: Role,
    /// The queue of `--role producer`.
    #[arg(long, value_name = "NAME", required_if_eq("role", "producer"))]
    pub queue: Option<String>,
    /// Redis URL (redis://host:port/, redis+cluster://host:port[,host:port...] for a Redis
    /// Cluster, or redis+sentinel://host:port[,host:port...]/<master-name> for a primary found
    /// through Sentinel); without it the bench runs on the embedded store (in this process).
    #[arg(long, value_name = "URL")]
    pub redis: Option<String>,
    /// Tasks per phase (N).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub tasks: u64,
    /// Queues each phase's tasks are spread over, round robin (Q, 1..=64); the worker pool
    /// serves them all. Their names are chosen so their hash slots spread evenly over a Redis
    /// Cluster's slots: with Q a multiple of the primaries, each primary serves Q / primaries.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=crate::QUEUES_MAX as u64))]
    pub queues: u64,
    /// Tasks per submit call (B).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub batch: u64,
    /// Handlers running at once in the worker pool (C).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub concurrency: u64,
    /// Lanes the pool's slots are split into, each with its own lease loop and completer (as
    /// `orq worker --lanes`).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=16))]
    pub lanes: u64,
    /// Tenants the tasks are spread over, round robin (T).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub tenants: u64,
    /// Priorities the tasks are spread over, round robin: task k gets priority k mod P (P; 1 =
    /// every task at the default priority 0, as plain BullMQ jobs in bench/compare.py).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u8).range(1..=10))]
    pub priorities: u8,
    /// Delayed tasks in the delayed phase (D; 0 skips the phase).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub delayed: u64,
    /// Delay of the first delayed task (ms).
    #[arg(long = "delay-ms", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    pub delay_ms: u64,
    /// The delays are spread evenly from --delay-ms to --delay-ms + this (ms).
    #[arg(long = "delay-spread-ms", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    pub delay_spread_ms: u64,
    /// Write the report as JSON to FILE (submit_per_s, complete_per_s, wait_ms and lateness_ms
    /// as {p50, p99, max}, mem_bytes_per_task, script_calls_per_task, redis_work, ...).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No progress bar (for logs and CI).
    #[arg(long = "no-progress")]
    pub no_progress: bool,
}

/// `orq bench`: run the plan from the command line, print the table, write the JSON. Against
/// Redis the run's queues (`ob-<id>-*`) are deleted at the end, whatever happened.
/// Errors are for the user (exit code 2).
pub async fn cli(a: &BenchArgs) -> Result<(), String> {
    let plan = BenchPlan {
        tasks: a.tasks,
        queues: a.queues as usize,
        batch: a.batch,
        concurrency: a.concurrency as usize,
        lanes: a.lanes as usize,
        tenants: a.tenants,
        priorities: a.priorities,
        delayed: a.delayed,
        delay_ms: a.delay_ms,
        delay_spread_ms: a.delay_spread_ms,
    };
    if a.role == Role::Producer {
        return producer_cli(a, &plan).await;
    }
    let clock: Arc<dyn Clock> = Arc::new(orq::SystemClock);
    // The run's queues are `ob-<8 random base32 digits>-<phase>`: unique per run, and about as
    // long as BullMQ's `orqbench` (bench/bullmq). Every task key holds its queue's name, and
    // jemalloc rounds a key up to its size class (16-byte steps here): the earlier names,
    // `orqbench-<ulid>-submit`, cost orq 32 bytes of `mem_bytes_per_task` per task that
    // BullMQ's short name does not.
    let id = Entropy::from_os()
        .ulid(clock.now_ms())
        .to_string()
        .to_lowercase();
    let prefix = format!("ob-{}", &id[id.len() - 8..]);
    let progress: Box<dyn Progress> = if a.no_progress {
        Box::new(Quiet)
    } else {
        let bar = indicatif::ProgressBar::new(plan.tasks);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg:>12} [{bar:40}] {pos}/{len} {per_sec} eta {eta}",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        Box::new(Bar(bar))
    };
    let report = match &a.redis {
        Some(url) => {
            let redis = Arc::new(orq::RedisStore::open(url).map_err(|e| e.to_string())?);
            redis
                .ping()
                .await
                .map_err(|e| format!("cannot reach Redis at {url}: {e}"))?;
            let store: Arc<dyn Store> = redis.clone();
            let r = run(
                &plan,
                store,
                clock,
                "redis",
                &prefix,
                redis_probes(&redis),
                &*progress,
            )
            .await;
            let pattern = format!("orq:{{{prefix}-*");
            if let Err(e) = redis
                .delete_matching(&pattern, &format!("{prefix}-*"))
                .await
            {
                eprintln!("orq bench: could not delete the bench queues ({pattern}): {e}");
            }
            r?
        }
        None => {
            let store: Arc<dyn Store> =
                Arc::new(orq_model::MemoryStore::new(Arc::new(orq_model::WallClock)));
            let probes = RedisProbes::default();
            run(&plan, store, clock, "embedded", &prefix, probes, &*progress).await?
        }
    };
    progress.finish();
    {
        use std::io::Write as _;
        // stdout may be a closed pipe (`orq bench | head`): the JSON file still gets written.
        let _ = write!(std::io::stdout(), "{}", table(&report));
    }
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&report).expect("the report serialises");
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// `orq bench --role producer`: submit, print the report as one JSON line.
async fn producer_cli(a: &BenchArgs, plan: &BenchPlan) -> Result<(), String> {
    let (Some(url), Some(queue)) = (&a.redis, &a.queue) else {
        return Err("--role producer needs --redis URL and --queue NAME".into());
    };
    let redis = Arc::new(orq::RedisStore::open(url).map_err(|e| e.to_string())?);
    redis
        .ping()
        .await
        .map_err(|e| format!("cannot reach Redis at {url}: {e}"))?;
    let report = crate::producer::produce(plan, redis, queue).await?;
    let line = serde_json::to_string(&report).expect("the report serialises");
    println!("{line}");
    if let Some(path) = &a.json {
        std::fs::write(path, line + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}
