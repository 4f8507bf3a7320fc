//! `GET /metrics`: the Prometheus text exposition of the API process. Two kinds of figures:
//!
//! - the queues' own, which the store holds for every process and which are read at each scrape
//!   ([`queue_families`]): tasks per status per queue and per tenant, the cumulative totals the
//!   scripts keep (submitted, completed, failed attempts, dead, cancelled, lease expiries,
//!   replayed, purged), whether a queue is paused, and the age of its oldest ready task;
//! - this process's own ([`orq::metrics`]): store call latency per script, store errors by
//!   kind, refused reports, task wait (for the leases this process made), and, when it runs
//!   workers or a scheduler (`orq serve`), their slots, run times and passes.
//!
//! Reading is bounded so that a scrape cannot stall the data plane: one `stats` script call per
//! queue (at most [`QUEUES_MAX`] queues), each reading at most [`TENANTS_MAX`] tenants (in name
//! order; the others are summed under the tenant label [`OTHER_TENANTS`]) and the heads of the
//! ready lists of at most [`OLDEST_AMONG`] tenants with ready work.

use crate::api::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::NoQuery;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use orq::{QueueStats, Status};
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Opts, Registry};

/// Most queues one scrape reports (in name order).
pub const QUEUES_MAX: usize = 200;
/// Most tenants of a queue with their own `tenant` label in one scrape (in name order).
pub const TENANTS_MAX: u64 = 20;
/// The `tenant` label of the tenants past [`TENANTS_MAX`], summed.
pub const OTHER_TENANTS: &str = "_other";
/// Most tenants with ready work whose ready lists' heads a scrape reads for the oldest ready
/// task of a queue (10 list heads each).
pub const OLDEST_AMONG: u64 = 20;

/// The cumulative totals of a queue's stats hash (`total:<name>`) as counters: (total name,
/// metric name, help).
const TOTALS: [(&str, &str, &str); 8] = [
    (
        "enqueued",
        "orq_tasks_submitted_total",
        "Tasks submitted (created), by queue.",
    ),
    (
        "completed",
        "orq_tasks_completed_total",
        "Tasks completed, by queue.",
    ),
    (
        "failed",
        "orq_task_attempts_failed_total",
        "Attempts that failed (handler error, timeout or lease expiry), retried or not, by queue.",
    ),
    (
        "dead",
        "orq_tasks_dead_total",
        "Tasks moved to the dead-letter queue, by queue.",
    ),
    (
        "cancelled",
        "orq_tasks_cancelled_total",
        "Tasks cancelled, by queue.",
    ),
    (
        "reaped",
        "orq_lease_expiries_total",
        "Leases that expired without an outcome (reaped), by queue.",
    ),
    (
        "replayed",
        "orq_tasks_replayed_total",
        "Dead tasks replayed, by queue.",
    ),
    (
        "purged",
        "orq_tasks_purged_total",
        "Dead tasks purged, by queue.",
    ),
];

/// The exposition: this process's metrics and the queues' figures.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "health",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Prometheus text format 0.0.4.", content_type = "text/plain",
            body = String),
        crate::openapi_errors::QueueErrors,
    ),
)]
pub(crate) async fn prometheus(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
) -> Result<Response, ApiError> {
    caller.require_admin("reading the metrics")?;
    let mut names = s.client.queues().await?;
    names.truncate(QUEUES_MAX);
    let query = orq::StatsQuery {
        tenants: TENANTS_MAX,
        oldest_among: OLDEST_AMONG,
        ..orq::StatsQuery::default()
    };
    let stats = crate::api::queues::stats_of_queues(&s.client, &names, &query).await?;
    let mut families = orq::metrics::metrics().gather();
    families.extend(queue_families(&stats));
    families.sort_by(|a, b| a.name().cmp(b.name()));
    Ok((
        [(CONTENT_TYPE, orq::metrics::CONTENT_TYPE)],
        orq::metrics::render(&families),
    )
        .into_response())
}

/// The queues' figures as metric families.
pub fn queue_families(stats: &[QueueStats]) -> Vec<MetricFamily> {
    let tasks = IntGaugeVec::new(
        Opts::new("orq_tasks", "Tasks per status, by queue."),
        &["queue", "status"],
    )
    .expect("valid");
    let tenant_tasks = IntGaugeVec::new(
        Opts::new(
            "orq_tenant_tasks",
            "Tasks per status, by queue and tenant: the first 20 tenants of a queue by name, the rest summed as tenant=\"_other\".",
        ),
        &["queue", "tenant", "status"],
    )
    .expect("valid");
    let paused = IntGaugeVec::new(
        Opts::new(
            "orq_queue_paused",
            "1 when leasing from the queue is paused.",
        ),
        &["queue"],
    )
    .expect("valid");
    let oldest = GaugeVec::new(
        Opts::new(
            "orq_queue_oldest_ready_age_seconds",
            "Age of the oldest ready (due, not leased) task, by queue; 0 when none waits. Read among the heads of at most 20 tenants with ready work.",
        ),
        &["queue"],
    )
    .expect("valid");
    let totals: Vec<IntCounterVec> = TOTALS
        .iter()
        .map(|(_, name, help)| {
            IntCounterVec::new(Opts::new(*name, *help), &["queue"]).expect("valid")
        })
        .collect();
    for st in stats {
        let q = st.queue.as_str();
        for (status, n) in &st.counts {
            tasks.with_label_values(&[q, status.as_str()]).set(*n);
        }
        let mut rest: std::collections::BTreeMap<Status, i64> = st.counts.clone();
        for t in &st.tenants {
            for (status, n) in &t.counts {
                tenant_tasks
                    .with_label_values(&[q, t.tenant.as_str(), status.as_str()])
                    .set(*n);
                *rest.entry(*status).or_default() -= n;
            }
        }
        if st.tenants.len() as u64 >= TENANTS_MAX {
            for (status, n) in rest {
                tenant_tasks
                    .with_label_values(&[q, OTHER_TENANTS, status.as_str()])
                    .set(n.max(0));
            }
        }
        paused.with_label_values(&[q]).set(i64::from(st.paused));
        let age_ms = st
            .oldest_ready
            .map_or(0, |o| st.now_ms.saturating_sub(o.since_ms));
        oldest.with_label_values(&[q]).set(age_ms as f64 / 1000.0);
        for ((total, _, _), counter) in TOTALS.iter().zip(&totals) {
            let n = st.totals.get(*total).copied().unwrap_or(0).max(0) as u64;
            counter.with_label_values(&[q]).inc_by(n);
        }
    }
    let registry = Registry::new();
    let all: Vec<Box<dyn prometheus::core::Collector>> = [
        Box::new(tasks) as Box<dyn prometheus::core::Collector>,
        Box::new(tenant_tasks),
        Box::new(paused),
        Box::new(oldest),
    ]
    .into_iter()
    .chain(
        totals
            .into_iter()
            .map(|c| Box::new(c) as Box<dyn prometheus::core::Collector>),
    )
    .collect();
    for c in all {
        registry.register(c).expect("distinct metric names");
    }
    registry.gather()
}

/// `--metrics-listen` of `orq worker` and `orq scheduler`.
#[derive(Debug, clap::Args, Clone)]
pub struct MetricsArgs {
    /// Serve this process's Prometheus metrics at http://ADDR/metrics (no key: bind it to an
    /// address only your Prometheus reaches). Worker slots, handler run and wait times, store
    /// call latency and errors, refused reports, scheduler passes. The queues' own figures
    /// (tasks per status, totals, oldest ready task) are on the API's /metrics.
    #[arg(long, env = "ORQ_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<String>,
}

impl MetricsArgs {
    /// Bind the address, if one is given, and serve `GET /metrics` there until `shutdown`.
    /// Errors: the address cannot be bound (orq stops with exit code 2).
    pub async fn serve(
        &self,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> Result<Option<std::net::SocketAddr>, String> {
        let Some(listen) = &self.metrics_listen else {
            return Ok(None);
        };
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| format!("--metrics-listen: cannot listen on {listen}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(|| async {
                (
                    [(CONTENT_TYPE, orq::metrics::CONTENT_TYPE)],
                    orq::metrics::metrics().render(),
                )
            }),
        );
        tokio::spawn(async move {
            let stopped = shutdown.cancelled_owned();
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
            {
                tracing::warn!(error = %e, "the metrics listener stopped");
            }
        });
        tracing::info!(%addr, "metrics at http://{addr}/metrics");
        Ok(Some(addr))
    }
}
