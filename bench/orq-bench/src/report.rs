//! What a bench run measured ([`BenchReport`], written as JSON) and its table for a terminal.

use crate::redis_work::RedisWork;
use serde::Serialize;
use std::collections::BTreeMap;

/// Nearest-rank percentiles of a latency sample (ms).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    /// Median (ms).
    pub p50: f64,
    /// 99th percentile (ms).
    pub p99: f64,
    /// Largest (ms).
    pub max: f64,
}

impl Latency {
    /// The summary of `xs` (ms), or `None` when empty.
    pub fn of(xs: &[f64]) -> Option<Latency> {
        if xs.is_empty() {
            return None;
        }
        let mut s = xs.to_vec();
        s.sort_by(f64::total_cmp);
        let rank = |q: f64| s[((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
        Some(Latency {
            p50: rank(0.5),
            p99: rank(0.99),
            max: s[s.len() - 1],
        })
    }
}

/// The report: printed as a table and written as JSON (`--json FILE`).
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Always `"orq"` (BullMQ's script writes `"bullmq"`).
    pub engine: &'static str,
    /// orq's version.
    pub version: &'static str,
    /// `"redis"` or `"embedded"`.
    pub store: &'static str,
    /// N.
    pub tasks: u64,
    /// Q: the queues each phase's tasks were spread over.
    pub queues: usize,
    /// B.
    pub batch: u64,
    /// C.
    pub concurrency: usize,
    /// Lanes of the pool.
    pub lanes: usize,
    /// T.
    pub tenants: u64,
    /// P.
    pub priorities: u8,
    /// D.
    pub delayed: u64,
    /// Phase 1: tasks submitted per second.
    pub submit_per_s: f64,
    /// Phase 2: tasks completed per second, first submit to last completion.
    pub complete_per_s: f64,
    /// Phase 2: submit → handler start (ms).
    pub wait_ms: Option<Latency>,
    /// Phase 3: handler start − run_at (ms); `null` without delayed tasks.
    pub lateness_ms: Option<Latency>,
    /// Phase 1: Redis memory per queued task (bytes); `null` on the embedded store.
    pub mem_bytes_per_task: Option<f64>,
    /// Phase 2: script calls per task.
    pub script_calls_per_task: f64,
    /// Phase 2: script calls by script name (`lease`, `complete_batch`, `enqueue`, ...), so the
    /// tasks per lease call are `tasks / script_calls.lease`.
    pub script_calls: BTreeMap<&'static str, u64>,
    /// Phase 2: the Redis work it caused, per primary; `null` on the embedded store, or when
    /// Redis refuses `INFO`.
    pub redis_work: Option<RedisWork>,
}

/// The report as a table for a terminal.
pub fn table(r: &BenchReport) -> String {
    let lat = |l: &Option<Latency>| match l {
        Some(l) => format!("p50 {:.1}  p99 {:.1}  max {:.1}", l.p50, l.p99, l.max),
        None => "-".to_string(),
    };
    // One queue (the default) keeps the workload line of the runs before `--queues`.
    let queues = if r.queues > 1 {
        format!(", {} queues", r.queues)
    } else {
        String::new()
    };
    let mut rows = vec![
        ("store", r.store.to_string()),
        (
            "workload",
            format!(
                "{} tasks, batch {}, concurrency {} in {} lanes, {} tenants, {} priorities, {} delayed{queues}",
                r.tasks, r.batch, r.concurrency, r.lanes, r.tenants, r.priorities, r.delayed
            ),
        ),
        ("submit", format!("{:.0} tasks/s", r.submit_per_s)),
        ("end to end", format!("{:.0} tasks/s", r.complete_per_s)),
        ("queue wait (ms)", lat(&r.wait_ms)),
        ("delayed lateness (ms)", lat(&r.lateness_ms)),
        (
            "memory per queued task",
            r.mem_bytes_per_task
                .map_or("-".to_string(), |b| format!("{b:.0} bytes")),
        ),
        (
            "script calls per task",
            format!("{:.3}", r.script_calls_per_task),
        ),
        (
            "script calls (end to end)",
            r.script_calls
                .iter()
                .map(|(name, c)| format!("{name} {c}"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    ];
    if let Some(w) = &r.redis_work {
        rows.push((
            "redis work (end to end)",
            format!(
                "{:.1} script usec per task, {} script calls, CPU {:.2} s, {} primaries",
                w.script_usec_per_task,
                w.script_calls,
                w.cpu_s,
                w.primaries.len()
            ),
        ));
        for p in &w.primaries {
            let per_task = p
                .script_usec_per_task
                .map_or("-".to_string(), |u| format!("{u:.1}"));
            rows.push((
                if p.node.is_empty() {
                    "  the server"
                } else {
                    "  primary"
                },
                format!(
                    "{}{} queue{}, {} tasks: script calls {} ({:.1}%), {per_task} script usec per task, CPU {:.2} s ({:.1}%)",
                    if p.node.is_empty() { String::new() } else { format!("{}: ", p.node) },
                    p.queues,
                    if p.queues == 1 { "" } else { "s" },
                    p.tasks,
                    p.script_calls,
                    p.script_calls_share_pct,
                    p.cpu_s,
                    p.cpu_share_pct
                ),
            ));
        }
    }
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(k, v)| format!("{k:<width$}  {v}\n"))
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    // Goal: nearest-rank percentiles as documented.
    #[test]
    fn latency_percentiles_are_nearest_rank() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        let l = Latency::of(&xs).unwrap();
        assert_eq!((l.p50, l.p99, l.max), (50.0, 99.0, 100.0));
        assert_eq!(Latency::of(&[]), None);
        let one = Latency::of(&[7.0]).unwrap();
        assert_eq!((one.p50, one.p99, one.max), (7.0, 7.0, 7.0));
    }

    /// Whether the table of a report with the Redis work `w` (made by redis_work's test) has
    /// the lines that test expects.
    pub(crate) fn table_of_work_lists_each_primary(w: &RedisWork) -> bool {
        let r = BenchReport {
            engine: "orq",
            version: "0",
            store: "redis",
            tasks: 100,
            queues: 3,
            batch: 10,
            concurrency: 1,
            lanes: 1,
            tenants: 1,
            priorities: 1,
            delayed: 0,
            submit_per_s: 1.0,
            complete_per_s: 1.0,
            wait_ms: None,
            lateness_ms: None,
            mem_bytes_per_task: None,
            script_calls_per_task: 1.0,
            script_calls: BTreeMap::new(),
            redis_work: Some(w.clone()),
        };
        let t = table(&r);
        t.contains("3 queues")
            && t.contains("a:1: 2 queues, 60 tasks: script calls 300 (75.0%), 100.0 script usec per task, CPU 3.00 s (75.0%)")
            && t.contains("b:2: 1 queue, 40 tasks")
    }
}
