//! criterion benches of orq's hot paths on the embedded store (`MemoryStore`):
//! each transition script, `lease` with 1, 100 and 10,000 backlogged tenants, decoding a lease
//! reply, and the simulator's script calls per second.
//!
//!     cargo bench -p orq-sim --bench transitions
//!
//! Figures are per call on this machine; compare ratios measured in one run (these machines are
//! shared and noisy). Real Redis costs are measured by `orq bench` and `bench/compare.py`.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use orq::{ops, Client, Entropy, Resp, Store, SystemClock, TaskSpec};
use orq_sim::harness::{run, SimConfig};
use orq_sim::{MemoryStore, WallClock};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

fn rt() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn store() -> Arc<dyn Store> {
    Arc::new(MemoryStore::new(Arc::new(WallClock)))
}

fn client(store: &Arc<dyn Store>) -> Client {
    Client::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_seed(7)),
    )
}

fn spec(tenant: u64) -> TaskSpec {
    TaskSpec::new(r#"{"n":1}"#)
        .queue("bench")
        .tenant(format!("t{tenant}"))
        .task_type("noop")
}

/// Submit `n` tasks over `tenants` tenants, in batches of 1,000.
async fn fill(c: &Client, n: u64, tenants: u64, from: u64) {
    let mut i = 0;
    while i < n {
        let end = (i + 1000).min(n);
        let specs = (i..end).map(|k| spec((from + k) % tenants)).collect();
        c.submit_batch(specs).await.expect("submit");
        i = end;
    }
}

/// Lease `n` tasks one call at a time; returns (id, token) pairs.
async fn lease_n(s: &dyn Store, n: u64) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(n as usize);
    while (out.len() as u64) < n {
        let got = ops::lease(
            s,
            "bench",
            "w",
            100.min(n as usize - out.len()),
            "ab12",
            0.5,
        )
        .await
        .expect("lease");
        assert!(!got.tasks.is_empty(), "work to lease");
        for t in got.tasks {
            let token = t.lease.as_ref().expect("a lease").token.clone();
            out.push((t.id, token));
        }
    }
    out
}

fn scripts(c: &mut Criterion) {
    let rt = rt();
    let mut g = c.benchmark_group("script");
    g.throughput(Throughput::Elements(1));

    g.bench_function("enqueue (submit of one task)", |b| {
        let s = store();
        let cl = client(&s);
        b.iter(|| rt.block_on(cl.submit(spec(0))).expect("submit"));
    });

    g.bench_function("enqueue (batch of 1000, per task)", |b| {
        let s = store();
        let cl = client(&s);
        b.iter_custom(|iters| {
            let batches = iters.div_ceil(1000);
            let start = Instant::now();
            rt.block_on(fill(&cl, batches * 1000, 1, 0));
            start
                .elapsed()
                .mul_f64(iters as f64 / (batches * 1000) as f64)
        });
    });

    g.bench_function("complete", |b| {
        let s = store();
        let cl = client(&s);
        b.iter_custom(|iters| {
            rt.block_on(fill(&cl, iters, 1, 0));
            let leased = rt.block_on(lease_n(&*s, iters));
            let start = Instant::now();
            for (id, token) in &leased {
                rt.block_on(ops::complete(&*s, "bench", id, token, "null"))
                    .expect("complete");
            }
            start.elapsed()
        });
    });

    g.bench_function("fail (retry scheduled)", |b| {
        let s = store();
        let cl = client(&s);
        b.iter_custom(|iters| {
            rt.block_on(fill(&cl, iters, 1, 0));
            let leased = rt.block_on(lease_n(&*s, iters));
            let start = Instant::now();
            for (id, token) in &leased {
                rt.block_on(ops::fail(&*s, "bench", id, token, "boom", true, 0.5))
                    .expect("fail");
            }
            start.elapsed()
        });
    });

    g.bench_function("release", |b| {
        let s = store();
        let cl = client(&s);
        b.iter_custom(|iters| {
            rt.block_on(fill(&cl, iters, 1, 0));
            let leased = rt.block_on(lease_n(&*s, iters));
            let start = Instant::now();
            for (id, token) in &leased {
                rt.block_on(ops::release(&*s, "bench", id, token))
                    .expect("release");
            }
            start.elapsed()
        });
    });

    g.bench_function("heartbeat", |b| {
        let s = store();
        let cl = client(&s);
        rt.block_on(fill(&cl, 1, 1, 0));
        let (id, token) = rt.block_on(lease_n(&*s, 1)).remove(0);
        b.iter(|| {
            rt.block_on(ops::heartbeat(&*s, "bench", &id, &token, 0))
                .expect("heartbeat")
        });
    });

    g.bench_function("get", |b| {
        let s = store();
        let cl = client(&s);
        let id = rt.block_on(cl.submit(spec(0))).expect("submit").task.id;
        b.iter(|| rt.block_on(cl.get(Some("bench"), &id)).expect("get"));
    });

    g.bench_function("stats (10 tenants)", |b| {
        let s = store();
        let cl = client(&s);
        rt.block_on(fill(&cl, 1000, 10, 0));
        b.iter(|| rt.block_on(cl.stats("bench")).expect("stats"));
    });
    g.finish();
}

fn lease_by_tenants(c: &mut Criterion) {
    let rt = rt();
    let mut g = c.benchmark_group("lease one task");
    g.throughput(Throughput::Elements(1));
    for tenants in [1u64, 100, 10_000] {
        g.bench_with_input(
            BenchmarkId::from_parameter(format!("{tenants} tenants")),
            &tenants,
            |b, &t| {
                let s = store();
                let cl = client(&s);
                // A standing backlog of 10 tasks per tenant keeps every tenant in the fair-share set.
                rt.block_on(fill(&cl, 10 * t, t, 0));
                let mut from = 0;
                b.iter_custom(|iters| {
                    rt.block_on(fill(&cl, iters, t, from));
                    from += iters;
                    let start = Instant::now();
                    for _ in 0..iters {
                        let got = rt
                            .block_on(ops::lease(&*s, "bench", "w", 1, "ab12", 0.5))
                            .expect("lease");
                        assert_eq!(got.tasks.len(), 1);
                    }
                    start.elapsed()
                });
            },
        );
    }
    g.finish();
}

fn decoding(c: &mut Criterion) {
    // A leased task as the client decodes it: the compact hash of a task submitted with the
    // default settings and a priority, with what the lease wrote applied (`ops::lease`), then
    // its id.
    let fields: Vec<(&str, &str)> = vec![
        ("tenant", "t1"),
        ("type", "noop"),
        (
            "payload",
            r#"{"order":42,"items":["a","b","c"],"note":"hello"}"#,
        ),
        ("created_at", "1764400000000"),
        ("priority", "5"),
        ("status", "leased"),
        ("epoch", "1"),
        ("attempt", "1"),
        ("token", "1-ab12"),
        ("worker", "w1"),
        ("lease_exp", "1764400030100"),
        ("updated_at", "1764400000100"),
        ("id", "01KB0000000000000000000000"),
    ];
    let flat: Vec<Resp> = fields
        .iter()
        .flat_map(|(k, v)| {
            [
                Resp::Bulk(k.as_bytes().to_vec()),
                Resp::Bulk(v.as_bytes().to_vec()),
            ]
        })
        .collect();
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(1));
    g.bench_function("a leased task's fields", |b| {
        b.iter(|| {
            orq::decode::task("lease", "bench", std::hint::black_box(&flat)).expect("decodes")
        })
    });
    g.finish();
}

fn simulator(c: &mut Criterion) {
    let mut g = c.benchmark_group("simulator");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    let config = SimConfig::draw(7);
    let calls = run(&config).stats.script_calls;
    g.throughput(Throughput::Elements(calls));
    g.bench_function(format!("seed 7 ({calls} script calls per run)"), |b| {
        b.iter(|| {
            let r = run(&config);
            assert!(
                matches!(r.verdict, orq_sim::harness::Verdict::Pass),
                "seed 7 passes"
            );
        })
    });
    g.finish();
}

criterion_group!(benches, scripts, lease_by_tenants, decoding, simulator);
criterion_main!(benches);
