//! The simulation harness: the engine's real client, worker pools and schedulers run against
//! `MemoryStore` on a single-threaded tokio runtime with paused (virtual) time, driven by one
//! `u64` seed. Faults are injected during a safety phase; then faults stop and every task must
//! finish within a liveness budget. Invariants are checked after every script call.
//!
//! Determinism comes from: one thread; `biased` selects in the engine; ordered maps only; every
//! random draw from a ChaCha stream seeded from the run's seed (or a hash of the seed and a name);
//! virtual time that only moves when every task waits. The determinism test runs seeds twice and
//! compares the timelines byte for byte.
//!
//! [`fairness`] is the other driver: the engine's client and lease operations played by a fixed
//! pool of worker slots on a bare `MemoryStore`, with virtual time moved by the runner (no tokio,
//! no worker pool), fast enough for the tenancy tests' 100,000-task scenarios; plus the measures
//! those tests judge a run by.

pub mod checker;
pub mod config;
pub mod fairness;
mod pull;
pub mod refusal;
pub mod reports;
mod rules;
pub mod run;
mod shadow;
mod state_check;
pub mod world;

pub use config::{
    Choice, Faults, PlantedBug, SimConfig, EPOCH_MS, FAULT_FAMILIES, FULL_CHECK_EVERY, TASKS_MAX,
};
pub use run::{replay_command, run, run_streaming, Report, Verdict, TIMELINE_VERSION};
pub use world::{RunStats, TenancyStats};
