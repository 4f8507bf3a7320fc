//! What a bench run does: its workload ([`BenchPlan`]).

/// What to run (the `orq bench` options).
#[derive(Debug, Clone)]
pub struct BenchPlan {
    /// N: tasks per phase (1..=10,000,000).
    pub tasks: u64,
    /// Q: queues each phase's tasks are spread over, round robin
    /// (1..=[`QUEUES_MAX`](crate::QUEUES_MAX)).
    pub queues: usize,
    /// B: tasks per submit call (1..=1000).
    pub batch: u64,
    /// C: handlers running at once in the worker pool (1..=10,000).
    pub concurrency: usize,
    /// Lanes the pool's slots are split into ([`orq::WorkerConfig::lanes`], 1..=16).
    pub lanes: usize,
    /// T: tenants the tasks are spread over, round robin (1..=100,000).
    pub tenants: u64,
    /// P: priorities the tasks are spread over, round robin: task k has priority k mod P
    /// (1..=10; 1 = all at priority 0).
    pub priorities: u8,
    /// D: delayed tasks in phase 3 (0 skips it).
    pub delayed: u64,
    /// Delay of the first delayed task (ms).
    pub delay_ms: u64,
    /// The delays are spread evenly over [delay_ms, delay_ms + spread] (ms).
    pub delay_spread_ms: u64,
}
