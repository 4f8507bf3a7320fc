//! The process's own metrics (Prometheus): what this process saw of the store and of the tasks it
//! leased, ran and reported. Every orq process keeps them (`orq serve`, `orq api`, `orq worker`,
//! `orq scheduler`) and serves them in the text format (`/metrics` of the API, or the address of
//! `--metrics-listen`). The figures of the queues themselves (tasks per status, totals, the age of
//! the oldest ready task), which the store holds for all processes, are read at each scrape by
//! the API (`orq_server::metrics`), not kept here.
//!
//! Labels are bounded: `script` by the scripts, `kind` by [`Transient`], `queue` by the queues an
//! operator runs, `type` by the handlers a worker registers, `reason` and `op` by the report
//! outcomes.

use crate::failure::Transient;
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::LazyLock;

/// Histogram buckets of a store call (seconds): 100 µs to 2.5 s.
const STORE_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Histogram buckets of a task's wait and run (seconds): 1 ms to 1 h.
const TASK_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

/// Histogram buckets of a scheduler pass (seconds): 100 µs to 10 s.
const PASS_BUCKETS: &[f64] = &[
    0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0,
];

/// The process's metrics and the registry that holds them.
pub struct Metrics {
    registry: Registry,
    /// `orq_store_call_duration_seconds{script}`: each script call, from send to reply.
    pub store_call: HistogramVec,
    /// `orq_store_errors_total{kind}`: store calls refused or unanswered, by kind (`unreachable`,
    /// `oom`, `loading`, `readonly`, `busy`, `masterdown`, `noreplicas`, `tryagain`,
    /// `clusterdown`, `moved`, `ask`, `wrongpass`, `noauth`, `noperm`).
    pub store_errors: IntCounterVec,
    /// `orq_reports_refused_total{queue, op, reason}`: heartbeats and outcomes the store refused
    /// because the lease had ended (`stale`: it expired or another worker holds it; `cancelled`;
    /// `not_found`).
    pub reports_refused: IntCounterVec,
    /// `orq_task_wait_seconds{queue}`: from a task's run_at to its lease, by the store's clock.
    pub task_wait: HistogramVec,
    /// `orq_task_run_seconds{type}`: a handler's run in this process's workers.
    pub task_run: HistogramVec,
    /// `orq_worker_slots{state}`: this process's worker slots, `busy` or `free`.
    pub worker_slots: IntGaugeVec,
    /// `orq_scheduler_pass_duration_seconds`: one scheduler pass (promote, reap, trim).
    pub scheduler_pass: Histogram,
    /// `worker_slots{state="busy"}` and `{state="free"}`, looked up once (every task moves the
    /// busy one; the free one is set from `slots_total` when gathered).
    slots_busy: IntGauge,
    slots_free: IntGauge,
    /// The slots of the pools alive in this process.
    slots_total: AtomicI64,
    /// The store-call histogram of each script, looked up once (a call observes without the
    /// label lookup).
    by_script: HashMap<&'static str, Histogram>,
}

fn histogram_vec(name: &str, help: &str, labels: &[&str], buckets: &[f64]) -> HistogramVec {
    HistogramVec::new(
        HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        labels,
    )
    .expect("a valid histogram")
}

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("a valid counter")
}

impl Metrics {
    fn new() -> Metrics {
        let store_call = histogram_vec(
            "orq_store_call_duration_seconds",
            "Script calls to the store, from send to reply, by script.",
            &["script"],
            STORE_BUCKETS,
        );
        let store_errors = counter_vec(
            "orq_store_errors_total",
            "Store calls refused (OOM, LOADING, READONLY, ...) or unanswered (unreachable), by kind.",
            &["kind"],
        );
        let reports_refused = counter_vec(
            "orq_reports_refused_total",
            "Heartbeats and outcomes refused because the lease had ended (stale, cancelled, not_found).",
            &["queue", "op", "reason"],
        );
        let task_wait = histogram_vec(
            "orq_task_wait_seconds",
            "Time from a task's run_at to its lease (the store's clock), by queue.",
            &["queue"],
            TASK_BUCKETS,
        );
        let task_run = histogram_vec(
            "orq_task_run_seconds",
            "Handler run time in this process's workers, by task type.",
            &["type"],
            TASK_BUCKETS,
        );
        let worker_slots = IntGaugeVec::new(
            Opts::new(
                "orq_worker_slots",
                "This process's worker slots (concurrency), busy or free.",
            ),
            &["state"],
        )
        .expect("a valid gauge");
        let scheduler_pass = Histogram::with_opts(
            HistogramOpts::new(
                "orq_scheduler_pass_duration_seconds",
                "One scheduler pass (promote due tasks, reap expired leases, trim), all queues.",
            )
            .buckets(PASS_BUCKETS.to_vec()),
        )
        .expect("a valid histogram");
        let registry = Registry::new();
        registry
            .register(Box::new(store_call.clone()))
            .and_then(|()| registry.register(Box::new(store_errors.clone())))
            .and_then(|()| registry.register(Box::new(reports_refused.clone())))
            .and_then(|()| registry.register(Box::new(task_wait.clone())))
            .and_then(|()| registry.register(Box::new(task_run.clone())))
            .and_then(|()| registry.register(Box::new(worker_slots.clone())))
            .and_then(|()| registry.register(Box::new(scheduler_pass.clone())))
            .expect("distinct metric names");
        let by_script = orq_lua::all()
            .iter()
            .map(|s| (s.name, store_call.with_label_values(&[s.name])))
            .collect();
        let slots_busy = worker_slots.with_label_values(&["busy"]);
        let slots_free = worker_slots.with_label_values(&["free"]);
        Metrics {
            slots_busy,
            slots_free,
            slots_total: AtomicI64::new(0),
            registry,
            store_call,
            store_errors,
            reports_refused,
            task_wait,
            task_run,
            worker_slots,
            scheduler_pass,
            by_script,
        }
    }

    /// Record one store call of `script` that took `seconds`; `refused` is the transient refusal
    /// or loss it met, if any.
    pub fn store_call(&self, script: &str, seconds: f64, refused: Option<Transient>) {
        match self.by_script.get(script) {
            Some(h) => h.observe(seconds),
            None => self
                .store_call
                .with_label_values(&[script])
                .observe(seconds),
        }
        if let Some(t) = refused {
            self.store_errors
                .with_label_values(&[&t.word().to_ascii_lowercase()])
                .inc();
        }
    }

    /// The metric families, for an exposition that adds its own.
    pub fn gather(&self) -> Vec<prometheus::proto::MetricFamily> {
        self.slots_free
            .set(self.slots_total.load(Ordering::Relaxed) - self.slots_busy.get());
        self.registry.gather()
    }

    /// The text exposition (format 0.0.4) of these metrics alone.
    pub fn render(&self) -> String {
        render(&self.gather())
    }
}

/// The text exposition (format 0.0.4) of `families`.
pub fn render(families: &[prometheus::proto::MetricFamily]) -> String {
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(families, &mut out)
        .expect("text encoding into memory");
    String::from_utf8(out).expect("the text format is UTF-8")
}

/// The content type of the text exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// This process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

/// A worker pool's slots in `orq_worker_slots`: `concurrency` slots while it lives (free unless
/// a [`BusySlot`] holds one).
pub struct PoolSlots(i64);

impl PoolSlots {
    /// Count a pool of `concurrency` slots.
    pub fn open(concurrency: usize) -> PoolSlots {
        let n = i64::try_from(concurrency).unwrap_or(i64::MAX);
        metrics().slots_total.fetch_add(n, Ordering::Relaxed);
        PoolSlots(n)
    }
}

impl Drop for PoolSlots {
    fn drop(&mut self) {
        metrics().slots_total.fetch_sub(self.0, Ordering::Relaxed);
    }
}

/// A slot running a handler in `orq_worker_slots`: busy while it lives (one atomic add when taken
/// and one when dropped; the free slots are the pools' slots less the busy ones, worked out when
/// the metrics are gathered).
pub struct BusySlot(());

impl BusySlot {
    /// Count one slot as busy.
    pub fn take() -> BusySlot {
        metrics().slots_busy.inc();
        BusySlot(())
    }
}

impl Drop for BusySlot {
    fn drop(&mut self) {
        metrics().slots_busy.dec();
    }
}
