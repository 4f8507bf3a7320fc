//! orq's engine: the task model, the `Store` trait and its Redis implementation, the client,
//! the worker pool and the scheduler. See DESIGN.md for the contract.
//!
//! Data flows one way: callers → [`Client`] / [`Worker`] / [`Scheduler`] → [`Store`] →
//! (`RedisStore` | the simulator's `MemoryStore`) → the Lua scripts of `orq-lua`. Time and
//! randomness come in as [`Clock`] and [`Entropy`], never from globals, so the simulator can
//! substitute them.

pub mod attempt;
pub mod client;
pub mod clock;
pub mod decode;
pub mod episode;
pub mod error;
pub mod failure;
pub mod format;
pub mod heartbeat;
pub mod keys;
pub mod metrics;
pub mod ops;
pub mod redact;
pub mod redis_store;
pub mod report;
pub mod resp;
pub mod scheduler;
pub mod store;
pub mod task;
#[cfg(feature = "testing")]
pub mod testing;
pub mod trace;
pub mod worker;

pub use attempt::{Attempt, AttemptOutcome};
pub use client::{
    BulkReplay, Client, Held, ListQuery, OldestReady, Page, QueueEvent, QueueStats, StatsQuery,
    Submitted, TenantLimits, TenantStats, WorkerInfo, WorkerLease, Workers,
};
pub use clock::{Clock, Entropy, SystemClock};
pub use error::{Error, Result};
pub use failure::Transient;
pub use redis_store::{RedisStore, WaitReplicas};
pub use resp::Resp;
pub use scheduler::{Scheduler, SchedulerConfig};
pub use store::{Store, StoreError};
pub use task::{Backoff, Lease, Status, Task, TaskSpec};
pub use trace::TraceContext;
pub use worker::{Handler, HandlerError, Handlers, TaskContext, Worker, WorkerConfig};
