//! The Redis work of a bench phase (`redis_work` in the report): each primary's script calls,
//! script time and CPU, as deltas of `INFO commandstats` and `INFO cpu` (the counters are never
//! reset), and the probes that read them.

use crate::queues::tasks_of_queue;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The Redis work of the end-to-end phase: deltas of `INFO commandstats` and `INFO cpu` on each
/// primary between the phase's first submit and its last completion (the counters are never
/// reset). Script calls are EVALSHA and EVAL (the NOSCRIPT fall-back), the bench's stats polls
/// and the pool's idle lease calls included; CPU is the whole server's (`used_cpu_sys` +
/// `used_cpu_user`), so on a shared server it includes other clients' work.
#[derive(Debug, Clone, Serialize)]
pub struct RedisWork {
    /// Script calls on all primaries.
    pub script_calls: u64,
    /// Time Redis spent in scripts, all primaries, per task of the phase (µs).
    pub script_usec_per_task: f64,
    /// Commands of any kind on all primaries.
    pub calls: u64,
    /// CPU time of all primaries (s).
    pub cpu_s: f64,
    /// Each primary, sorted by address.
    pub primaries: Vec<PrimaryWork>,
}

/// The end-to-end phase's work on one primary ([`RedisWork`]).
#[derive(Debug, Clone, Serialize)]
pub struct PrimaryWork {
    /// `host:port` as the cluster names it; `""` for a single server or a Sentinel primary.
    pub node: String,
    /// The phase's queues whose slot it serves.
    pub queues: usize,
    /// The phase's tasks in those queues.
    pub tasks: u64,
    /// Script calls (EVALSHA + EVAL).
    pub script_calls: u64,
    /// Its share of all primaries' script calls (%).
    pub script_calls_share_pct: f64,
    /// Time in scripts (µs).
    pub script_usec: u64,
    /// Time in scripts per task of its queues (µs; `null` when it serves none).
    pub script_usec_per_task: Option<f64>,
    /// Commands of any kind.
    pub calls: u64,
    /// CPU time (s).
    pub cpu_s: f64,
    /// Its share of all primaries' CPU time (%).
    pub cpu_share_pct: f64,
}

/// The commands that run orq's scripts: as functions of its library, or by EVALSHA/EVAL where a
/// server refuses the library (docs/design-notes.md, note 44).
pub const SCRIPT_COMMANDS: [&str; 4] = ["fcall", "fcall_ro", "evalsha", "eval"];

/// The counters of one Redis server that [`RedisWork`] takes deltas of.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RedisCounters {
    /// Script calls: `cmdstat_fcall` + `cmdstat_fcall_ro` + `cmdstat_evalsha` + `cmdstat_eval`
    /// calls ([`SCRIPT_COMMANDS`]).
    pub script_calls: u64,
    /// The same commands' usec.
    pub script_usec: u64,
    /// Calls of every `cmdstat_*` line.
    pub calls: u64,
    /// `used_cpu_sys` + `used_cpu_user` (s).
    pub cpu_s: f64,
}

impl RedisCounters {
    /// Read the counters from the text of `INFO commandstats cpu`; None when the CPU fields are
    /// missing (commandstats lists only commands called since the last reset, so none may be
    /// missing).
    pub fn parse(info: &str) -> Option<RedisCounters> {
        let mut c = RedisCounters::default();
        let (mut sys, mut user) = (None, None);
        for line in info.lines() {
            let line = line.trim_end();
            if let Some(rest) = line.strip_prefix("cmdstat_") {
                let Some((command, fields)) = rest.split_once(':') else {
                    continue;
                };
                let field = |name: &str| {
                    fields
                        .split(',')
                        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0)
                };
                c.calls += field("calls");
                if SCRIPT_COMMANDS.contains(&command) {
                    c.script_calls += field("calls");
                    c.script_usec += field("usec");
                }
            } else if let Some(v) = line.strip_prefix("used_cpu_sys:") {
                sys = v.parse::<f64>().ok();
            } else if let Some(v) = line.strip_prefix("used_cpu_user:") {
                user = v.parse::<f64>().ok();
            }
        }
        c.cpu_s = sys? + user?;
        Some(c)
    }

    /// What happened from `before` to `self` (zero for a counter that went back, as after a
    /// restart or a `CONFIG RESETSTAT` by someone else).
    fn since(&self, before: &RedisCounters) -> RedisCounters {
        RedisCounters {
            script_calls: self.script_calls.saturating_sub(before.script_calls),
            script_usec: self.script_usec.saturating_sub(before.script_usec),
            calls: self.calls.saturating_sub(before.calls),
            cpu_s: (self.cpu_s - before.cpu_s).max(0.0),
        }
    }
}

impl RedisWork {
    /// The work from the `before` and `after` counters of each primary (by node; a node missing
    /// from either, as after a failover, is left out), for `tasks_by_node`: the phase's queues
    /// and tasks on each node; `tasks` in all.
    pub fn of(
        before: &[(String, RedisCounters)],
        after: &[(String, RedisCounters)],
        tasks_by_node: &BTreeMap<String, (usize, u64)>,
        tasks: u64,
    ) -> RedisWork {
        let deltas: Vec<(String, RedisCounters)> = after
            .iter()
            .filter_map(|(node, a)| {
                let (_, b) = before.iter().find(|(n, _)| n == node)?;
                Some((node.clone(), a.since(b)))
            })
            .collect();
        let script_calls: u64 = deltas.iter().map(|(_, d)| d.script_calls).sum();
        let script_usec: u64 = deltas.iter().map(|(_, d)| d.script_usec).sum();
        let cpu_s: f64 = deltas.iter().map(|(_, d)| d.cpu_s).sum();
        let pct = |part: f64, all: f64| if all > 0.0 { 100.0 * part / all } else { 0.0 };
        let primaries = deltas
            .iter()
            .map(|(node, d)| {
                let (queues, node_tasks) = tasks_by_node.get(node).copied().unwrap_or((0, 0));
                PrimaryWork {
                    node: node.clone(),
                    queues,
                    tasks: node_tasks,
                    script_calls: d.script_calls,
                    script_calls_share_pct: pct(d.script_calls as f64, script_calls as f64),
                    script_usec: d.script_usec,
                    script_usec_per_task: (node_tasks > 0)
                        .then(|| d.script_usec as f64 / node_tasks as f64),
                    calls: d.calls,
                    cpu_s: d.cpu_s,
                    cpu_share_pct: pct(d.cpu_s, cpu_s),
                }
            })
            .collect();
        RedisWork {
            script_calls,
            script_usec_per_task: script_usec as f64 / tasks as f64,
            calls: deltas.iter().map(|(_, d)| d.calls).sum(),
            cpu_s,
            primaries,
        }
    }
}

/// Reads Redis's `used_memory` (bytes), when the bench runs against Redis.
pub type MemoryProbe =
    Box<dyn Fn() -> futures_util::future::BoxFuture<'static, Option<u64>> + Send + Sync>;

/// Reads each primary's [`RedisCounters`] (None when Redis refuses `INFO`).
pub type CountersProbe = Box<
    dyn Fn() -> futures_util::future::BoxFuture<'static, Option<Vec<(String, RedisCounters)>>>
        + Send
        + Sync,
>;

/// Names the primary of a queue (`""` off a cluster; None when a node does not answer).
pub type PrimaryProbe =
    Box<dyn Fn(String) -> futures_util::future::BoxFuture<'static, Option<String>> + Send + Sync>;

/// What the bench reads from Redis besides running the scripts (all None on the embedded store).
#[derive(Default)]
pub struct RedisProbes {
    /// `used_memory`, for `mem_bytes_per_task`.
    pub memory: Option<MemoryProbe>,
    /// The counters of each primary, for `redis_work`.
    pub counters: Option<CountersProbe>,
    /// The primary of a queue, for `redis_work`.
    pub primary: Option<PrimaryProbe>,
}

/// How many of `queues` each primary serves, and how many of `n` tasks (spread round robin)
/// those queues get; empty when a node does not answer (the report then shows no per-task time
/// per primary).
pub async fn tasks_by_node(
    primary: &PrimaryProbe,
    queues: &[String],
    n: u64,
) -> BTreeMap<String, (usize, u64)> {
    let mut out: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for (i, q) in queues.iter().enumerate() {
        let Some(node) = primary(orq::keys::queue_keys(q)[0].clone()).await else {
            return BTreeMap::new();
        };
        let e = out.entry(node).or_default();
        e.0 += 1;
        e.1 += tasks_of_queue(n, queues.len(), i);
    }
    out
}

/// The probes of a bench on `redis`: its memory, each primary's counters, a key's primary.
pub fn redis_probes(redis: &Arc<orq::RedisStore>) -> RedisProbes {
    let r = redis.clone();
    let memory: MemoryProbe = Box::new(move || {
        let r = r.clone();
        Box::pin(async move { r.used_memory().await })
    });
    let r = redis.clone();
    let counters: CountersProbe = Box::new(move || {
        let r = r.clone();
        Box::pin(async move {
            r.info_each(&["commandstats", "cpu"])
                .await?
                .into_iter()
                .map(|(node, info)| Some((node, RedisCounters::parse(&info)?)))
                .collect()
        })
    });
    let r = redis.clone();
    let primary: PrimaryProbe = Box::new(move |key| {
        let r = r.clone();
        Box::pin(async move { r.primary_of(&key).await })
    });
    RedisProbes {
        memory: Some(memory),
        counters: Some(counters),
        primary: Some(primary),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO_BEFORE: &str = "# Commandstats\r\n\
        cmdstat_evalsha:calls=100,usec=2000,usec_per_call=20.00,rejected_calls=0,failed_calls=3\r\n\
        cmdstat_eval:calls=3,usec=300,usec_per_call=100.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_fcall:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=10,usec=50,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n\
        \r\n# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\n\
        used_cpu_sys_children:9.000000\r\nused_cpu_user_main_thread:2.000000\r\n";

    // Goal: the counters come from the documented INFO fields, children's CPU left out.
    #[test]
    fn counters_parse_commandstats_and_cpu() {
        let c = RedisCounters::parse(INFO_BEFORE).unwrap();
        assert_eq!(
            c,
            RedisCounters {
                script_calls: 110,
                script_usec: 2370,
                calls: 120,
                cpu_s: 3.75,
            }
        );
        assert_eq!(RedisCounters::parse("# Commandstats\r\n"), None);
    }

    // Goal: the work is the deltas, shared out per primary, per task of its queues.
    // Method: two primaries with known counters before and after; a third seen only after (a
    // failover) is left out.
    #[test]
    fn redis_work_is_the_deltas_per_primary() {
        let c = |script_calls, script_usec, calls, cpu_s| RedisCounters {
            script_calls,
            script_usec,
            calls,
            cpu_s,
        };
        let before = vec![
            ("a:1".to_string(), c(100, 1000, 200, 1.0)),
            ("b:2".to_string(), c(0, 0, 10, 5.0)),
        ];
        let after = vec![
            ("a:1".to_string(), c(400, 7000, 600, 4.0)),
            ("b:2".to_string(), c(100, 3000, 110, 6.0)),
            ("c:3".to_string(), c(9, 9, 9, 9.0)),
        ];
        let tasks = BTreeMap::from([("a:1".to_string(), (2, 60)), ("b:2".to_string(), (1, 40))]);
        let w = RedisWork::of(&before, &after, &tasks, 100);
        assert_eq!((w.script_calls, w.calls), (400, 500));
        assert_eq!(w.script_usec_per_task, 90.0);
        assert_eq!(w.cpu_s, 4.0);
        let a = &w.primaries[0];
        assert_eq!((a.node.as_str(), a.queues, a.tasks), ("a:1", 2, 60));
        assert_eq!((a.script_calls, a.script_calls_share_pct), (300, 75.0));
        assert_eq!(
            (a.script_usec_per_task, a.cpu_s, a.cpu_share_pct),
            (Some(100.0), 3.0, 75.0)
        );
        let b = &w.primaries[1];
        assert_eq!(
            (b.script_calls_share_pct, b.script_usec_per_task),
            (25.0, Some(75.0))
        );
        assert_eq!(w.primaries.len(), 2);
        assert!(crate::report::tests::table_of_work_lists_each_primary(&w));
    }
}
