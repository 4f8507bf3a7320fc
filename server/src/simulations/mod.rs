//! Simulation runs from the dashboard: `GET /api/v1/simulations` says whether a run can start
//! and what it can be asked for; `POST /api/v1/simulations` runs one seed of orq's simulator and
//! streams its timeline (JSON Lines, `docs/timeline.md`) as the answer's body.
//!
//! A run is the `orq-sim` binary in a child process (design note 63): the product binary does not
//! link the simulator (design note 41), and a child can be bounded as a thread cannot: killed at
//! its deadline, its memory limited (`orq-sim run --max-memory-mb`), its output capped.
//! One run at a time per API process. The binary is `--sim-binary`, else `orq-sim` beside `orq`,
//! else on `PATH`; an `orq` run from a source checkout's `target/<profile>/` that finds none
//! builds it there with cargo at the first request for a run ([`binary`]).
//!
//! - [`binary`]: finding or building `orq-sim`, and what it offers (`orq-sim options`);
//! - [`request`]: the request body and its checks (422 beyond the bounds);
//! - [`child`]: the child process, its limits and the streamed answer.

pub mod binary;
pub mod child;
pub mod request;

use crate::api::AppState;
use crate::auth::Caller;
use crate::error::{ApiError, ErrorCode};
use crate::extract::{ApiJson, NoQuery, SMALL_BODY_MAX_BYTES};
use crate::openapi_errors::{QueueErrors, SimulationErrors};
use axum::extract::State;
use axum::response::Response;
use axum::Json;
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use utoipa::ToSchema;

pub use binary::Simulator;
pub use request::SimulationRequest;

/// Largest seed a run takes from the API: 2^53 - 1, the largest integer a JavaScript number (the
/// dashboard's) holds exactly. `orq-sim run --seed` takes any u64.
pub const SEED_MAX: u64 = (1 << 53) - 1;

/// Most tasks a run from the API may ask for: the API's own bound, in its OpenAPI document (the
/// simulator's, `orq-sim options`' `tasks_max`, wins when lower; a test checks they agree).
pub const TASKS_MAX: u32 = 1_000;

/// Default and bounds of `--sim-timeout-ms`.
pub const TIMEOUT_MS_DEFAULT: u64 = 60_000;
/// Default of `--sim-memory-mb`.
pub const MEMORY_MB_DEFAULT: u64 = 1024;

/// How the API runs simulations (`orq api`, `orq serve`).
#[derive(Debug, Args, Clone)]
pub struct SimArgs {
    /// The simulator binary the dashboard's "Run a simulation" starts, one child process per
    /// run. Default: `orq-sim` beside this orq, else on PATH; an orq run from a source checkout
    /// (target/<profile>/orq) without one builds it there with cargo at the first run.
    #[arg(long, env = "ORQ_SIM_BINARY", value_name = "PATH")]
    pub sim_binary: Option<PathBuf>,
    /// A simulation run from the API is stopped after this long (ms); its answer then ends
    /// with an `aborted` line.
    #[arg(long, env = "ORQ_SIM_TIMEOUT_MS", value_name = "MS", default_value_t = TIMEOUT_MS_DEFAULT,
        value_parser = clap::value_parser!(u64).range(1_000..=3_600_000))]
    pub sim_timeout_ms: u64,
    /// Memory of a simulation run's process (MB of heap and private mappings, RLIMIT_DATA): a
    /// run that needs more
    /// fails to allocate and is reported as stopped.
    #[arg(long, env = "ORQ_SIM_MEMORY_MB", value_name = "MB", default_value_t = MEMORY_MB_DEFAULT,
        value_parser = clap::value_parser!(u64).range(64..=1_048_576))]
    pub sim_memory_mb: u64,
}

/// The bounds of a run, as `GET /simulations` reports them.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SimulationLimits {
    /// Largest `seed`.
    pub seed_max: u64,
    /// Largest `tasks` (0 when the simulator is not available).
    pub tasks_max: u32,
    /// A run is stopped after this long, ms.
    pub timeout_ms: u64,
    /// Address space of a run's process, bytes.
    pub memory_bytes: u64,
}

/// `GET /api/v1/simulations`: whether a run can start, and what it can be asked for.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SimulatorJson {
    /// The simulator is here: a run can start, unless one is `running`.
    pub available: bool,
    /// The server is building the simulator from its source checkout (the first run only).
    pub building: bool,
    /// The simulator is missing but this orq runs from a source checkout, so a request for a run
    /// builds it (`POST` answers 503 with `Retry-After` while it builds).
    pub buildable: bool,
    /// Why no run can start, when `available` is false.
    pub reason: Option<String>,
    /// A run is in progress (one at a time per API process).
    pub running: bool,
    /// The fault families a run can switch on (empty when not available).
    pub families: Vec<String>,
    /// The bugs a run can plant on purpose, `none` first (empty when not available).
    pub planted: Vec<String>,
    /// The bounds of a run.
    pub limits: SimulationLimits,
}

/// `GET /api/v1/simulations` → [`SimulatorJson`]. Looks for the simulator binary (not more than
/// once a few seconds); never builds it (`buildable` says whether a run would). 403 for a tenant
/// key.
#[utoipa::path(
    get,
    path = "/api/v1/simulations",
    tag = "simulations",
    operation_id = "get_simulator",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Whether a run can start, and its options.", body = SimulatorJson),
        QueueErrors,
    ),
)]
pub async fn status(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
) -> Result<Json<SimulatorJson>, ApiError> {
    caller.require_admin("running simulations")?;
    Ok(Json(simulator(&s)?.status().await))
}

/// `POST /api/v1/simulations` with a [`SimulationRequest`] → 200 `application/x-ndjson`: the
/// run's timeline as the simulator writes it (header line first, `end` line last); a run the
/// server stops (deadline, memory, the process died) ends with an `aborted` line instead. 422
/// for values beyond the bounds ([`SimulatorJson::limits`], unknown families or bugs), 409
/// while another run is in progress, 503 `unavailable` with `Retry-After` while the simulator
/// is being built (the first such request on a source checkout starts the build) and without
/// one when it cannot be found; 403 for a tenant key.
#[utoipa::path(
    post,
    path = "/api/v1/simulations",
    tag = "simulations",
    operation_id = "run_simulation",
    security(("bearer" = [])),
    request_body = SimulationRequest,
    responses(
        (
            status = 200,
            description = "The run's timeline, streamed as it is written (format: docs/timeline.md).",
            content_type = "application/x-ndjson",
            body = String,
        ),
        SimulationErrors,
    ),
)]
pub async fn run(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    ApiJson(req): ApiJson<SimulationRequest, SMALL_BODY_MAX_BYTES>,
) -> Result<Response, ApiError> {
    caller.require_admin("running simulations")?;
    let sim = simulator(&s)?;
    let ready = sim.ready_for_run().await?;
    let args = req.check(&ready.options)?;
    sim.start(&ready, args, s.shutdown.clone()).await
}

fn simulator(s: &AppState) -> Result<Arc<Simulator>, ApiError> {
    s.simulator.clone().ok_or_else(|| {
        ApiError::new(
            ErrorCode::Unavailable,
            "this orq runs no simulations (its API was built without a simulator)",
        )
    })
}
