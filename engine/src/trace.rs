//! The spans a worker opens for a task, for distributed tracing (OpenTelemetry, when the process
//! exports traces; `orq worker --otlp-endpoint`).
//!
//! Every such span has the target [`TARGET`], which the logs leave out and only an exporting
//! layer enables: without one, the spans are disabled at their call sites and cost a load and a
//! branch. Per task: `orq.task` (attributes `orq.queue`, `orq.tenant`, `orq.type`, `orq.task_id`,
//! `orq.attempt`, `orq.epoch`, `orq.worker`), with the children `orq.lease` (the lease this attempt
//! runs under: `orq.lease_expires_at_ms`), `orq.handler` (the handler's run) and `orq.outcome`
//! (its report: `orq.outcome` = `completed`, `failed`, `released`, `lease_lost`).

/// The target of the tracing spans meant for trace export.
pub const TARGET: &str = "orq_trace";
