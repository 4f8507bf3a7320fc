//! `orq bench`: the load generator. Against a Redis (`--redis URL`) or the embedded store it runs
//! three phases on queues of its own, with a no-op handler, and reports what a user of a task
//! queue asks first. The phases and the JSON shape are shared with `bench/bullmq/bench.mjs`, so
//! the two engines can be compared side by side on the same Redis (`bench/README.md`):
//!
//! 1. **submit**: N tasks in batches of B (spread over T tenants and P priorities), no worker
//!    running → `submit_per_s`, and `mem_bytes_per_task` (Redis `INFO memory` `used_memory`
//!    delta / N; `null` on the embedded store).
//! 2. **end to end**: a worker pool of concurrency C runs while N more tasks are submitted →
//!    `complete_per_s` (N / first submit to last completion), `wait_ms` (handler start minus
//!    the task's `created_at`, i.e. submit → handler start), `script_calls_per_task` (every
//!    script call of the phase, idle polls included, / N) and `script_calls` (the same calls
//!    by script name: N / `script_calls.lease` is the tasks per lease call).
//! 3. **delayed** (with `--delayed D`): D tasks due `delay_ms` .. `delay_ms + spread` after
//!    submit, spread evenly, workers running → `lateness_ms` (handler start minus `run_at`).
//!
//! With `--queues Q` each phase's tasks go round robin to Q queues, which the worker pool
//! serves together; their names are chosen so their hash slots spread evenly over a Redis
//! Cluster's slots ([`queue_names`]). Against Redis the bench also reports the Redis work of the
//! end-to-end phase on each primary (`redis_work`, [`RedisWork`]): script calls and their time
//! from `INFO commandstats`, CPU from `INFO cpu`, as deltas (the counters are never reset).
//!
//! Latency figures are `{p50, p99, max}` in ms (nearest rank). Handler start times are read from
//! this process's clock and task times from the store's: on one machine they agree to about a
//! millisecond.
//!
//! With `--role producer` it only submits, to one queue, for an `orq worker` in another process
//! ([`produce`]): `bench/compare.py` runs it so, against BullMQ's producer in its own process.
//!
//! The modules, one concern each: [`BenchPlan`] (plan.rs), the run of all phases ([`run`],
//! run.rs) and of one phase with workers (phase.rs), the producer role ([`produce`],
//! producer.rs), the store that counts script calls ([`CountingStore`]), the queue names
//! ([`queue_names`]), the Redis work ([`RedisWork`]), the report and its table
//! ([`BenchReport`], [`table`]), progress bars ([`Progress`]) and the command line
//! ([`BenchArgs`], [`cli`]).

mod cli;
mod counting;
mod phase;
mod plan;
mod producer;
mod progress;
mod queues;
mod redis_work;
mod report;
mod run;

pub use cli::{cli, BenchArgs, Role};
pub use counting::CountingStore;
pub use plan::BenchPlan;
pub use producer::{produce, ProducerReport};
pub use progress::{Progress, Quiet};
pub use queues::{queue_names, QUEUES_MAX};
pub use redis_work::{
    CountersProbe, MemoryProbe, PrimaryProbe, PrimaryWork, RedisCounters, RedisProbes, RedisWork,
};
pub use report::{table, BenchReport, Latency};
pub use run::run;
