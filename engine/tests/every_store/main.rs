//! One engine suite, every deployment (issue 21, item 4): the integration tests of a task's
//! lifecycle, natural batching of submits, retries, recovery, cancel, tenancy, wake-ups, listing, events and graceful
//! shutdown are written once over the `Store` trait and run on the embedded store, a private
//! single Redis, a Redis Cluster of three primaries with one replica each, and Sentinel with one
//! primary and one replica — real `redis-server` and `redis-sentinel` processes on free
//! loopback ports.
//!
//! Each test is an `async fn(Env)`; each suite module lists its tests with [`cases!`], naming
//! the deployments a test needs when it is not all of them (a test that reads stored keys with
//! raw commands needs a single node). The harness (libtest-mimic, so `cargo test` filters and
//! prints as usual) makes one trial per test and deployment, named
//! `<deployment>::<suite>::<test>`: `cargo test -p orq-engine --test every_store -- cluster::`
//! runs the cluster's share.
//!
//! The embedded store and the single Redis are fresh per test (both start in milliseconds); a
//! cluster or a Sentinel deployment takes seconds to form, so each is started once per run,
//! its tests take turns on it, and every key is flushed before each test (see `deployment.rs`).

#[path = "../common/mod.rs"]
mod common;
mod deployment;

/// The tests of a suite module as [`deployment::Case`]s: `name` runs on every deployment,
/// `name => KINDS` on the deployments in `KINDS` (a `&[Kind]`).
macro_rules! cases {
    ($($name:ident $(=> $on:expr)?),* $(,)?) => {
        vec![$(
            $crate::deployment::Case {
                name: stringify!($name),
                on: cases!(@on $($on)?),
                run: |env| Box::pin($name(env)),
            }
        ),*]
    };
    (@on) => { $crate::deployment::EVERY };
    (@on $on:expr) => { $on };
}

mod cancel;
mod coalesce;
mod lifecycle;
mod list;
mod observe;
mod pool;
mod queues;
mod recovery;
mod retries;
mod shutdown;
mod tenancy;
mod wakeups;

fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let suites = [
        ("lifecycle", lifecycle::cases()),
        ("coalesce", coalesce::cases()),
        ("pool", pool::cases()),
        ("wakeups", wakeups::cases()),
        ("retries", retries::cases()),
        ("recovery", recovery::cases()),
        ("cancel", cancel::cases()),
        ("queues", queues::cases()),
        ("tenancy", tenancy::cases()),
        ("list", list::cases()),
        ("observe", observe::cases()),
        ("shutdown", shutdown::cases()),
    ];
    let deployments = std::sync::Arc::new(deployment::Deployments::default());
    let trials = deployment::trials(&suites, &deployments);
    let conclusion = libtest_mimic::run(&args, trials);
    // Stop the shared cluster and Sentinel processes before exiting (exit skips destructors).
    drop(deployments);
    conclusion.exit();
}
