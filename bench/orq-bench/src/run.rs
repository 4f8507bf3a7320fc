//! A whole run: the three phases, one after the other, and the report.

use crate::counting::CountingStore;
use crate::phase::{submit_all, Phase, Work, NOOP};
use crate::progress::Progress;
use crate::queues::{queue_names, QUEUES_MAX};
use crate::redis_work::{tasks_by_node, RedisProbes};
use crate::{BenchPlan, BenchReport};
use orq::{Clock, Entropy, Store};
use std::sync::Arc;
use std::time::Instant;

/// Run the plan against `store`. `queue_prefix` names this run's queues (`<prefix>-submit`,
/// `<prefix>-e2e`, `<prefix>-delayed`, each followed by `-<i>...` with several queues:
/// [`queue_names`]); `probes` read Redis's memory use and work.
/// Errors: the first failed submit or stats call, as text.
pub async fn run(
    plan: &BenchPlan,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    store_kind: &'static str,
    queue_prefix: &str,
    probes: RedisProbes,
    progress: &dyn Progress,
) -> Result<BenchReport, String> {
    assert!((1..=QUEUES_MAX).contains(&plan.queues), "queues");
    let counting = Arc::new(CountingStore::new(store));
    let entropy = Arc::new(Entropy::from_os());
    let client = orq::Client::new(counting.clone(), clock.clone(), entropy.clone());

    // 1. submit, no worker running.
    let q_submit = queue_names(&format!("{queue_prefix}-submit"), plan.queues);
    let memory = &probes.memory;
    let mem0 = match memory {
        Some(m) => m().await,
        None => None,
    };
    progress.phase("submit", plan.tasks);
    let t0 = Instant::now();
    submit_all(&client, plan, &NOOP, &q_submit, plan.tasks, None, progress).await?;
    let submit_s = t0.elapsed().as_secs_f64();
    let mem1 = match memory {
        Some(m) => m().await,
        None => None,
    };
    let mem_bytes_per_task = match (mem0, mem1) {
        (Some(a), Some(b)) => Some((b as f64 - a as f64) / plan.tasks as f64),
        _ => None,
    };

    // 2. end to end: the pool runs while tasks are submitted.
    let ctx = Phase {
        store: &counting,
        clock: &clock,
        entropy: &entropy,
        client: &client,
        plan,
        progress,
    };
    let q_e2e = queue_names(&format!("{queue_prefix}-e2e"), plan.queues);
    let work = match (&probes.counters, &probes.primary) {
        (Some(counters), Some(primary)) => Some(Work {
            counters,
            tasks_by_node: tasks_by_node(primary, &q_e2e, plan.tasks).await,
        }),
        _ => None,
    };
    let e2e = ctx
        .run("end to end", &q_e2e, plan.tasks, false, work.as_ref())
        .await?;

    // 3. delayed tasks, workers running.
    let lateness = if plan.delayed > 0 {
        ctx.run(
            "delayed",
            &queue_names(&format!("{queue_prefix}-delayed"), plan.queues),
            plan.delayed,
            true,
            None,
        )
        .await?
        .latency
    } else {
        None
    };

    Ok(BenchReport {
        engine: "orq",
        version: env!("CARGO_PKG_VERSION"),
        store: store_kind,
        tasks: plan.tasks,
        queues: plan.queues,
        batch: plan.batch,
        concurrency: plan.concurrency,
        // The lanes the pool ran (a pool never has more lanes than slots).
        lanes: plan.lanes.min(plan.concurrency),
        tenants: plan.tenants,
        priorities: plan.priorities,
        delayed: plan.delayed,
        submit_per_s: plan.tasks as f64 / submit_s,
        complete_per_s: plan.tasks as f64 / e2e.seconds,
        wait_ms: e2e.latency,
        lateness_ms: lateness,
        mem_bytes_per_task,
        script_calls_per_task: e2e.calls as f64 / plan.tasks as f64,
        script_calls: e2e.by_script,
        redis_work: e2e.redis_work,
    })
}
