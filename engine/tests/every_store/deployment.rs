//! The deployments the suite runs on, and one trial per test and deployment.
//!
//! The embedded store and the single Redis are made fresh for each test, so their trials run in
//! parallel. A cluster (3 primaries × 1 replica) or a Sentinel deployment (1 primary, 1 replica,
//! 3 sentinels) takes 6–7 s to form, so each is started once, by the first trial that needs it,
//! and its trials take turns: a trial holds the deployment's turn while it runs, flushes every
//! key first (FLUSHALL on every primary), and runs the test on a runtime of its own that is shut
//! down before the turn passes on, so no worker or subscriber of one test outlives it. On the
//! cluster, queue `q` (most tests' queue) lives on another primary than the queue registry.

use crate::common::Env;
use libtest_mimic::{Failed, Trial};
use orq::testing::{RedisCluster, RedisSentinel};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// A deployment a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `orq_model::MemoryStore`, what `orq serve` runs without `--redis`.
    Embedded,
    /// A private `redis-server` per test.
    Redis,
    /// A Redis Cluster of three primaries with one replica each (`redis+cluster://`).
    Cluster,
    /// Sentinel watching one primary with one replica (`redis+sentinel://`).
    Sentinel,
}

impl Kind {
    /// The trial name's first part.
    fn name(self) -> &'static str {
        match self {
            Kind::Embedded => "embedded",
            Kind::Redis => "redis",
            Kind::Cluster => "cluster",
            Kind::Sentinel => "sentinel",
        }
    }
}

/// Every deployment.
pub const EVERY: &[Kind] = &[Kind::Embedded, Kind::Redis, Kind::Cluster, Kind::Sentinel];

/// The deployments whose keys all live on one Redis node that a test can read with raw
/// commands ([`Env::raw`]).
pub const ONE_NODE: &[Kind] = &[Kind::Redis, Kind::Sentinel];

/// A test body: runs against the store of the [`Env`] it is given.
pub type Run = fn(Env) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// One test of a suite and the deployments it runs on (made by the `cases!` macro).
pub struct Case {
    /// The test function's name.
    pub name: &'static str,
    /// The deployments it runs on.
    pub on: &'static [Kind],
    /// The test.
    pub run: Run,
}

/// A deployment started once and shared by its trials in turn.
struct Shared<T> {
    fixture: OnceLock<T>,
    turn: Mutex<()>,
}

impl<T> Default for Shared<T> {
    fn default() -> Self {
        Shared {
            fixture: OnceLock::new(),
            turn: Mutex::new(()),
        }
    }
}

/// The shared deployments of one run; dropping it stops their processes.
#[derive(Default)]
pub struct Deployments {
    cluster: Shared<RedisCluster>,
    sentinel: Shared<RedisSentinel>,
}

/// One trial per case and deployment, named `<deployment>::<suite>::<test>`, ordered so that
/// the cluster's and Sentinel's turns interleave with the fresh-store trials.
pub fn trials(suites: &[(&'static str, Vec<Case>)], deployments: &Arc<Deployments>) -> Vec<Trial> {
    let mut by_kind: Vec<Vec<Trial>> = EVERY.iter().map(|_| Vec::new()).collect();
    for (suite, cases) in suites {
        for case in cases {
            for &kind in case.on {
                let name = format!("{}::{suite}::{}", kind.name(), case.name);
                let deployments = deployments.clone();
                let run = case.run;
                let i = EVERY.iter().position(|k| *k == kind).expect("a known kind");
                by_kind[i].push(Trial::test(name, move || run_on(kind, &deployments, run)));
            }
        }
    }
    // Round-robin over the deployments: a thread waiting for the cluster's turn leaves the
    // others busy with trials of other deployments.
    let mut out = Vec::new();
    let mut queues: Vec<_> = by_kind.into_iter().map(Vec::into_iter).collect();
    loop {
        let before = out.len();
        for q in &mut queues {
            out.extend(q.next());
        }
        if out.len() == before {
            return out;
        }
    }
}

/// Run `run` on a fresh store of `kind`, or on the shared deployment in its turn.
fn run_on(kind: Kind, deployments: &Deployments, run: Run) -> Result<(), Failed> {
    match kind {
        Kind::Embedded => block_on(async move { run(Env::embedded()).await }),
        Kind::Redis => block_on(async move { run(Env::start().await).await }),
        Kind::Cluster => {
            let shared = &deployments.cluster;
            let _turn = shared.turn.lock().unwrap_or_else(|e| e.into_inner());
            let cluster = shared.fixture.get_or_init(|| RedisCluster::start(3, 1));
            for node in cluster.primaries() {
                flushall(node.port);
            }
            let url = cluster.url();
            block_on(async move { run(Env::shared(&url, None).await).await })
        }
        Kind::Sentinel => {
            let shared = &deployments.sentinel;
            let _turn = shared.turn.lock().unwrap_or_else(|e| e.into_inner());
            let sentinel = shared.fixture.get_or_init(RedisSentinel::start);
            let primary = sentinel
                .primary_port()
                .expect("a sentinel names the primary");
            flushall(primary);
            let (url, raw) = (sentinel.url(), sentinel.primary_url());
            block_on(async move { run(Env::shared(&url, Some(raw)).await).await })
        }
    }
    Ok(())
}

/// Run `test` on a runtime of its own (two worker threads, as `#[tokio::test]` with
/// `flavor = "multi_thread"` gave) and shut the runtime down before returning, cancelling every
/// task the test spawned.
fn block_on(test: impl Future<Output = ()>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(test);
    runtime.shutdown_timeout(Duration::from_secs(5));
}

/// FLUSHALL on the node on `port`: the shared deployment starts each test empty.
fn flushall(port: u16) {
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("node url")
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("connect to the node on {port}: {e}"));
    let _: () = redis::cmd("FLUSHALL")
        .query(&mut conn)
        .unwrap_or_else(|e| panic!("FLUSHALL on {port}: {e}"));
}
