//! Per-queue metrics of the live views: completions, failures, deaths and submits, with wait
//! and run latency quantiles, in [`BUCKETS`] buckets of [`BUCKET_MS`], folded from the queues'
//! event streams by the poller of [`super::Live`] and answered by `GET /queues/{queue}/metrics`.

use super::{BUCKETS, BUCKET_MS, SAMPLE_MAX, SCHEDULED_TRACK_MAX};
use orq::client::QueueEvent;
use serde::Serialize;
use std::collections::{HashSet, VecDeque};
use utoipa::ToSchema;

/// Latency quantiles of one bucket (ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub struct Quantiles {
    /// Median (nearest rank).
    pub p50: u64,
    /// 99th percentile (nearest rank).
    pub p99: u64,
    /// Largest value (exact).
    pub max: u64,
    /// Values observed (exact; the quantiles come from at most [`SAMPLE_MAX`] of them).
    pub count: u64,
}

/// Latency values of one bucket: a bounded uniform sample (reservoir), summarised for good once
/// the bucket is closed.
#[derive(Debug, Clone, Default)]
pub(super) struct Latency {
    pub(super) sample: Vec<u64>,
    seen: u64,
    max: u64,
    rng: u64,
    closed: Option<Option<Quantiles>>,
}

impl Latency {
    fn add(&mut self, v: u64, seed: u64) {
        if self.closed.is_some() {
            return; // a late value for a summarised bucket: counted nowhere (rare; see Bucket)
        }
        self.seen += 1;
        self.max = self.max.max(v);
        if self.sample.len() < SAMPLE_MAX {
            self.sample.push(v);
            return;
        }
        // Algorithm R: the n-th value replaces a random slot with probability SAMPLE_MAX / n.
        if self.rng == 0 {
            self.rng = seed | 1;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let j = self.rng % self.seen;
        if (j as usize) < SAMPLE_MAX {
            self.sample[j as usize] = v;
        }
    }

    fn quantiles(&self) -> Option<Quantiles> {
        if let Some(q) = self.closed {
            return q;
        }
        if self.sample.is_empty() {
            return None;
        }
        let mut s = self.sample.clone();
        s.sort_unstable();
        let rank = |p: f64| s[((p * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
        Some(Quantiles {
            p50: rank(0.50),
            p99: rank(0.99),
            max: self.max,
            count: self.seen,
        })
    }

    fn close(&mut self) {
        if self.closed.is_none() {
            self.closed = Some(self.quantiles());
            self.sample = Vec::new();
        }
    }
}

/// One [`BUCKET_MS`] bucket of a queue's metrics.
#[derive(Debug, Clone, Default)]
pub(super) struct Bucket {
    t_ms: i64,
    completed: u64,
    failed: u64,
    dead: u64,
    submitted: u64,
    pub(super) wait: Latency,
    run: Latency,
}

/// One bucket as `GET /queues/{queue}/metrics` answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = MetricsBucket)]
pub struct BucketSummary {
    /// Start of the bucket (store clock, ms since the Unix epoch; a multiple of [`BUCKET_MS`]).
    pub t_ms: i64,
    /// `completed` events.
    pub completed: u64,
    /// Failed attempts: `retrying` and `dead` events.
    pub failed: u64,
    /// `dead` events.
    pub dead: u64,
    /// Tasks submitted: `scheduled` events, and `queued` events of attempt 0 that are not the
    /// promotion of a task seen `scheduled`.
    pub submitted: u64,
    /// Time tasks leased in this bucket waited in their ready set (`wait_ms` of `leased`), ms;
    /// null when none.
    #[schema(required = true)]
    pub wait_ms: Option<Quantiles>,
    /// Time from lease to completion of tasks completed in this bucket (`run_ms` of
    /// `completed`), ms; null when none.
    #[schema(required = true)]
    pub run_ms: Option<Quantiles>,
}

/// A queue's metrics over the last hour: [`BUCKETS`] buckets of [`BUCKET_MS`], by the time of
/// each event (the store's clock). A bucket's latency sample is summarised once a bucket two
/// steps newer has begun; a late value for a summarised bucket still counts in its totals.
#[derive(Debug, Default)]
pub struct QueueMetrics {
    /// Oldest first, each `t_ms` a distinct multiple of [`BUCKET_MS`].
    pub(super) buckets: VecDeque<Bucket>,
    /// Tasks seen `scheduled` and not yet promoted (their promotion's `queued` event, attempt 0
    /// too, is not a submit), oldest first; at most [`SCHEDULED_TRACK_MAX`], beyond which the
    /// oldest are forgotten (their promotion then counts as a submit).
    scheduled: HashSet<String>,
    scheduled_order: VecDeque<String>,
}

fn field_ms(e: &QueueEvent, name: &str) -> Option<u64> {
    e.fields.get(name).and_then(|v| v.parse::<u64>().ok())
}

impl QueueMetrics {
    /// Count one stream entry.
    pub fn add(&mut self, e: &QueueEvent) {
        let submitted = match e.kind.as_str() {
            "scheduled" => {
                if self.scheduled.insert(e.task_id.clone()) {
                    self.scheduled_order.push_back(e.task_id.clone());
                    while self.scheduled_order.len() > SCHEDULED_TRACK_MAX {
                        if let Some(old) = self.scheduled_order.pop_front() {
                            self.scheduled.remove(&old);
                        }
                    }
                }
                true
            }
            "queued" if e.attempt == 0 => {
                // A promotion out of the scheduled set, or (when the stream says) a re-queue.
                let promoted = self.scheduled.remove(&e.task_id) || e.fields.contains_key("from");
                !promoted
            }
            _ => false,
        };
        let Some(b) = self.bucket(e.ts_ms) else {
            return;
        };
        let seed = e.ts_ms as u64;
        match e.kind.as_str() {
            "completed" => {
                b.completed += 1;
                if let Some(v) = field_ms(e, "run_ms") {
                    b.run.add(v, seed);
                }
            }
            "retrying" => b.failed += 1,
            "dead" => {
                b.failed += 1;
                b.dead += 1;
            }
            "leased" => {
                if let Some(v) = field_ms(e, "wait_ms") {
                    b.wait.add(v, seed);
                }
            }
            _ => {}
        }
        if submitted {
            b.submitted += 1;
        }
    }

    /// The bucket holding `ts_ms`, created when missing; `None` when older than the window.
    fn bucket(&mut self, ts_ms: i64) -> Option<&mut Bucket> {
        let t = ts_ms - ts_ms.rem_euclid(BUCKET_MS);
        let newest = self.buckets.back().map(|b| b.t_ms);
        if newest.is_none_or(|n| t > n) {
            self.buckets.push_back(Bucket {
                t_ms: t,
                ..Bucket::default()
            });
            let oldest_kept = t - (BUCKETS as i64 - 1) * BUCKET_MS;
            while self.buckets.front().is_some_and(|b| b.t_ms < oldest_kept) {
                self.buckets.pop_front();
            }
            for b in self.buckets.iter_mut() {
                if b.t_ms < t - BUCKET_MS {
                    b.wait.close();
                    b.run.close();
                }
            }
            debug_assert!(self.buckets.len() <= BUCKETS);
            return self.buckets.back_mut();
        }
        let newest = newest.expect("checked above");
        if t <= newest - BUCKETS as i64 * BUCKET_MS {
            return None;
        }
        let i = match self.buckets.binary_search_by_key(&t, |b| b.t_ms) {
            Ok(i) => i,
            Err(i) => {
                self.buckets.insert(
                    i,
                    Bucket {
                        t_ms: t,
                        ..Bucket::default()
                    },
                );
                i
            }
        };
        self.buckets.get_mut(i)
    }

    /// The [`BUCKETS`] buckets ending with the one holding `now_ms`, oldest first, zeros where
    /// nothing happened.
    pub fn summary(&self, now_ms: i64) -> Vec<BucketSummary> {
        let last = now_ms - now_ms.rem_euclid(BUCKET_MS);
        let first = last - (BUCKETS as i64 - 1) * BUCKET_MS;
        (0..BUCKETS as i64)
            .map(|i| {
                let t = first + i * BUCKET_MS;
                match self.buckets.binary_search_by_key(&t, |b| b.t_ms) {
                    Ok(j) => {
                        let b = &self.buckets[j];
                        BucketSummary {
                            t_ms: t,
                            completed: b.completed,
                            failed: b.failed,
                            dead: b.dead,
                            submitted: b.submitted,
                            wait_ms: b.wait.quantiles(),
                            run_ms: b.run.quantiles(),
                        }
                    }
                    Err(_) => BucketSummary {
                        t_ms: t,
                        completed: 0,
                        failed: 0,
                        dead: 0,
                        submitted: 0,
                        wait_ms: None,
                        run_ms: None,
                    },
                }
            })
            .collect()
    }
}
