//! What one simulation run does: the workload and the fault probabilities, all drawn from the
//! seed, so a seed alone names a run.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha12Rng;
use serde::Serialize;

/// Virtual time at which every run starts (ms since the Unix epoch): 2027-01-15T08:00:00Z.
/// Fixed so that timelines of the same seed are byte-identical.
pub const EPOCH_MS: u64 = 1_800_000_000_000;

/// A bug planted on purpose, to prove the simulator finds it (test-only switches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum PlantedBug {
    /// No planted bug: the product as shipped.
    #[default]
    None,
    /// `complete` accepts any token (the fencing check is removed).
    CompleteIgnoresToken,
    /// `lease` promotes scheduled tasks without checking their run_at.
    LeaseIgnoresRunAt,
    /// The reaper requeues an expired lease without counting the attempt.
    ReapDoesNotCountAttempt,
    /// The worker keeps running a handler after a heartbeat said its lease is gone.
    WorkerIgnoresLostLease,
    /// `lease` ignores tenants' `max_inflight` (caught only by seeds that draw caps).
    LeaseIgnoresMaxInflight,
    /// `lease` ignores tenants' rate limits (caught only by seeds that draw rate limits).
    LeaseIgnoresRateLimit,
    /// `lease` ignores a paused queue (caught only by seeds that pause).
    LeaseIgnoresPause,
    /// The worker gives up an outcome the first time the store refuses it transiently (caught
    /// by seeds that draw store refusals).
    WorkerDropsRefusedOutcome,
    /// After a heartbeat the store refused transiently, the worker waits its whole interval
    /// before the next one, so a refusal shorter than the lease can let it expire under a
    /// running handler (caught by seeds that draw store refusals).
    HeartbeatWaitsInterval,
    /// The store loads orq's function library once, at its first call, and never again: after a
    /// restart or `FUNCTION FLUSH` empties the library, every call answers `Function not found`
    /// (caught by seeds that draw script flushes).
    StoreLoadsLibraryOnce,
    /// A pull worker of the HTTP protocol keeps running a handler after a heartbeat answered
    /// that its lease is lost or the task cancelled (409 `lease_lost` / `cancelled`): the client
    /// library bug the protocol's codes exist to prevent (caught by seeds that draw pull
    /// workers).
    PullIgnoresLostLease,
    /// `lease` limited to some tenants serves every tenant (caught by seeds whose pull workers
    /// lease for some tenants only).
    LeaseIgnoresTenants,
}

impl PlantedBug {
    /// Every planted bug (not `None`).
    pub const ALL: [PlantedBug; 9] = [
        PlantedBug::CompleteIgnoresToken,
        PlantedBug::LeaseIgnoresRunAt,
        PlantedBug::ReapDoesNotCountAttempt,
        PlantedBug::WorkerIgnoresLostLease,
        PlantedBug::WorkerDropsRefusedOutcome,
        PlantedBug::HeartbeatWaitsInterval,
        PlantedBug::StoreLoadsLibraryOnce,
        PlantedBug::PullIgnoresLostLease,
        PlantedBug::LeaseIgnoresTenants,
    ];

    /// The planted bugs of tenancy: each is caught only by seeds that draw the setting it
    /// breaks, so the tenancy tests hunt them among those seeds (not in [`PlantedBug::ALL`]).
    pub const TENANCY: [PlantedBug; 3] = [
        PlantedBug::LeaseIgnoresMaxInflight,
        PlantedBug::LeaseIgnoresRateLimit,
        PlantedBug::LeaseIgnoresPause,
    ];

    /// The snake_case name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            PlantedBug::None => "none",
            PlantedBug::CompleteIgnoresToken => "complete_ignores_token",
            PlantedBug::LeaseIgnoresRunAt => "lease_ignores_run_at",
            PlantedBug::ReapDoesNotCountAttempt => "reap_does_not_count_attempt",
            PlantedBug::WorkerIgnoresLostLease => "worker_ignores_lost_lease",
            PlantedBug::LeaseIgnoresMaxInflight => "lease_ignores_max_inflight",
            PlantedBug::LeaseIgnoresRateLimit => "lease_ignores_rate_limit",
            PlantedBug::LeaseIgnoresPause => "lease_ignores_pause",
            PlantedBug::WorkerDropsRefusedOutcome => "worker_drops_refused_outcome",
            PlantedBug::HeartbeatWaitsInterval => "heartbeat_waits_interval",
            PlantedBug::StoreLoadsLibraryOnce => "store_loads_library_once",
            PlantedBug::PullIgnoresLostLease => "pull_ignores_lost_lease",
            PlantedBug::LeaseIgnoresTenants => "lease_ignores_tenants",
        }
    }

    /// Parse a name given by [`PlantedBug::name`].
    pub fn parse(s: &str) -> Option<PlantedBug> {
        std::iter::once(PlantedBug::None)
            .chain(PlantedBug::ALL)
            .chain(PlantedBug::TENANCY)
            .find(|b| b.name() == s)
    }
}

/// The simulated workers heartbeat every `lease_ms / HEARTBEAT_DIVISOR`
/// ([`orq::worker::WorkerConfig::heartbeat_divisor`]).
pub const HEARTBEAT_DIVISOR: u64 = 3;

/// Fault probabilities and sizes. Probabilities are per store call unless said otherwise.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Faults {
    /// Mean virtual time between supervisor faults (crash, stall, clock jump, script flush), ms.
    pub mean_fault_gap_ms: u64,
    /// Weight of a worker crash among supervisor faults.
    pub w_crash: u32,
    /// Weight of a worker stall (all its store calls wait) longer than a lease.
    pub w_stall: u32,
    /// Weight of a store clock jump (forward or backward).
    pub w_clock_jump: u32,
    /// Weight of a store restart that flushes the script cache.
    pub w_script_flush: u32,
    /// Probability that a handler asks for its worker to crash before its side effect.
    pub p_crash_before_effect: f64,
    /// Probability that a handler asks for its worker to crash after its side effect, before the
    /// worker reports.
    pub p_crash_after_effect: f64,
    /// Longest stall, ms.
    pub stall_ms_max: u64,
    /// Probability that one call is held in flight for longer than a lease before it reaches
    /// the store (a slow network path, a process paused mid-call); the hold is drawn in
    /// `lease_ms..=stall_ms_max`.
    pub p_slow_call: f64,
    /// Probability that a report call (complete, fail, release) is held that way: a worker
    /// paused between finishing the work and recording it, the case fencing tokens exist for.
    pub p_slow_report: f64,
    /// Longest downtime of a crashed worker before it restarts, ms.
    pub downtime_ms_max: u64,
    /// Probability that a call's reply is lost after the script ran.
    pub p_lost_reply: f64,
    /// Probability that a call fails before it reaches the store.
    pub p_fail_before: f64,
    /// Probability that a call is delivered twice (the second reply is dropped).
    pub p_duplicate: f64,
    /// Largest worker clock offset, ms (each worker draws one in ±this).
    pub clock_offset_ms_max: u64,
    /// Largest worker clock drift, parts per million (each worker draws one in ±this).
    pub drift_ppm_max: u64,
    /// Largest store clock jump, ms (forward or backward).
    pub clock_jump_ms_max: u64,
    /// Weight of a queue pause among supervisor faults (leasing stops, then resumes after a
    /// drawn time); 0 unless the seed draws tenancy settings.
    pub w_pause: u32,
    /// Longest pause, ms.
    pub pause_ms_max: u64,
    /// Probability that a call is refused before it runs with a transient error word (one
    /// refusal; see [`super::refusal`]).
    pub p_refusal: f64,
    /// Weight of a refusal episode among supervisor faults: the store refuses with one word
    /// for a drawn time.
    pub w_refusal: u32,
    /// Longest refusal episode, ms.
    pub refusal_ms_max: u64,
    /// Longest `LOADING` window after a store restart (a script flush), ms; 0 = none.
    pub loading_ms_max: u64,
    /// The fault families this seed turned on (swarm testing: see [`FAULT_FAMILIES`]).
    pub families: Vec<String>,
}

/// The fault families a seed turns on or off as a whole (swarm testing: Groce et al., "Swarm
/// Testing", ISSTA 2012). A seed with few families on pushes the ones it has harder, so some
/// seeds are all crashes, some all refusals, some quiet:
/// - `crash`: worker crashes, by the supervisor and by handlers before or after their effect;
/// - `stall`: an actor's store calls wait longer than a lease, or one of its reports does (a
///   worker paused between its work and its report);
/// - `clock`: worker clock offsets and drift, store clock jumps;
/// - `restart`: a store restart (script cache flushed), then a `LOADING` window;
/// - `network`: a call failed before the store, a reply lost, a call delivered twice, a call
///   held in flight for longer than a lease (reports more often);
/// - `refusal`: single refusals and refusal episodes (`OOM`, `READONLY`, `BUSY`, `WRONGPASS`,
///   ...).
pub const FAULT_FAMILIES: [&str; 6] = ["crash", "stall", "clock", "restart", "network", "refusal"];

/// Probability that a seed turns a fault family on.
const P_FAMILY_ON: f64 = 0.5;

impl Faults {
    /// The families ([`FAULT_FAMILIES`]) with at least one fault that can happen.
    pub fn families_on(&self) -> Vec<String> {
        let on = [
            self.w_crash > 0 || self.p_crash_before_effect > 0.0 || self.p_crash_after_effect > 0.0,
            self.w_stall > 0,
            self.w_clock_jump > 0 || self.clock_offset_ms_max > 0 || self.drift_ppm_max > 0,
            self.w_script_flush > 0,
            // A slow report alone is the stall family's (a worker paused between its work and
            // its report); network turns it on too, with slow calls.
            self.p_fail_before > 0.0
                || self.p_lost_reply > 0.0
                || self.p_duplicate > 0.0
                || self.p_slow_call > 0.0,
            self.p_refusal > 0.0 || self.w_refusal > 0,
        ];
        FAULT_FAMILIES
            .iter()
            .zip(on)
            .filter(|(_, on)| *on)
            .map(|(name, _)| name.to_string())
            .collect()
    }
}

/// A run's whole configuration.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SimConfig {
    /// The seed everything is drawn from.
    pub seed: u64,
    /// Tenants submitting.
    pub tenants: u32,
    /// Tasks submitted over the submit window.
    pub tasks: u32,
    /// Tasks per submit call (1 = single submits).
    pub batch_max: u32,
    /// Worker pools.
    pub workers: u32,
    /// Pull workers of the HTTP worker protocol (`p1`, `p2`, ...; [`super::pull`]), beside the
    /// pools, each with `concurrency` slots.
    pub pull_workers: u32,
    /// The tenants the pull workers lease for (the lease body's `tenants`, a worker key limited
    /// to them); empty: every tenant. The Rust pools serve every tenant, so all work drains.
    pub pull_tenants: Vec<String>,
    /// The pull workers send their completions through `POST /api/v1/leases/complete` (the
    /// batched route, one item a call) instead of `/leases/{id}/complete`.
    pub pull_batch: bool,
    /// Concurrency of each pool.
    pub concurrency: u32,
    /// Schedulers running at once.
    pub schedulers: u32,
    /// Submits spread over this much virtual time, ms.
    pub submit_window_ms: u64,
    /// Length of the safety phase (faults on), ms.
    pub safety_ms: u64,
    /// Budget of the liveness phase (faults off): every task must be finished within it, ms.
    pub liveness_budget_ms: u64,
    /// Lease length given to tasks, ms.
    pub lease_ms: u64,
    /// Longest handler run time, ms.
    pub handler_ms_max: u64,
    /// Probability that an attempt fails with a retryable error.
    pub p_transient: f64,
    /// Probability that an attempt fails with a permanent error.
    pub p_permanent: f64,
    /// Probability that a task is submitted with a delay.
    pub p_delayed: f64,
    /// Longest delay, ms.
    pub delay_ms_max: u64,
    /// Probability that the client cancels a task it submitted.
    pub p_cancel: f64,
    /// Most retries a task asks for (each task draws 0..=this).
    pub max_retries_max: u32,
    /// Faults of the safety phase.
    pub faults: Faults,
    /// A bug planted on purpose (tests of the simulator itself).
    pub planted: PlantedBug,
    /// Roll the store back to an earlier snapshot once during the safety phase (an unsynced
    /// Redis crash or an asynchronous failover). Weakens the invariants: see the checker.
    pub lossy_restart: bool,
    /// Per-tenant shares and limits the supervisor sets before any actor starts (empty for most
    /// seeds: see [`SimConfig::draw`]).
    pub tenant_limits: Vec<TenantSetting>,
    /// The queue's starvation-bound step set at the start (0 = strict priority, the default).
    pub aging_step_ms: u64,
    /// The checker checks what each call touched, and the whole queue every this many calls
    /// (comparing its kept copy of the indexes with a fresh one); 1 = the whole queue after
    /// every call. Not drawn: [`FULL_CHECK_EVERY`] unless set (`orq-sim --full-check-every`).
    pub full_check_every: u64,
    /// What the user chose instead of the seed's draw (`orq-sim run --faults`, `--tasks`; the
    /// dashboard's run form). Absent from the timeline header when nothing was chosen.
    #[serde(skip_serializing_if = "Choice::is_empty")]
    pub chosen: Choice,
}

/// Draws a user overrides: the run is still the seed's in everything else, so `--seed N` with
/// the same choices replays it.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Choice {
    /// The fault families switched on ([`FAULT_FAMILIES`]), instead of the seed's swarm draw;
    /// empty: none. Each family on keeps the sizes the seed draws for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub families: Option<Vec<String>>,
    /// Tasks submitted, instead of the seed's 20..=120 (at most [`TASKS_MAX`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<u32>,
}

/// Most tasks a run may be asked for (`orq-sim run --tasks`): a run's memory and time grow with
/// its tasks, and the API's runs are bounded by this too.
pub const TASKS_MAX: u32 = 1_000;

impl Choice {
    /// True when nothing is chosen: the seed alone names the run.
    pub fn is_empty(&self) -> bool {
        self.families.is_none() && self.tasks.is_none()
    }

    /// Parse `--faults`: `none`, or family names separated by commas (each once, each one of
    /// [`FAULT_FAMILIES`]); kept in [`FAULT_FAMILIES`]' order.
    pub fn parse_families(s: &str) -> Result<Vec<String>, String> {
        let s = s.trim();
        if s == "none" {
            return Ok(Vec::new());
        }
        let mut on = Vec::new();
        for f in s.split(',').map(str::trim) {
            if !FAULT_FAMILIES.contains(&f) {
                return Err(format!(
                    "unknown fault family {f:?}: expected `none` or some of {}",
                    FAULT_FAMILIES.join(",")
                ));
            }
            if on.iter().any(|o: &String| o == f) {
                return Err(format!("fault family {f:?} given twice"));
            }
            on.push(f.to_string());
        }
        Ok(FAULT_FAMILIES
            .iter()
            .filter(|f| on.iter().any(|o| o == *f))
            .map(|f| f.to_string())
            .collect())
    }

    /// Check `tasks`: 1..=[`TASKS_MAX`].
    pub fn check_tasks(tasks: u32) -> Result<u32, String> {
        if (1..=TASKS_MAX).contains(&tasks) {
            Ok(tasks)
        } else {
            Err(format!("tasks must be 1..={TASKS_MAX}, not {tasks}"))
        }
    }
}

/// Calls between two whole-queue checks by default (see [`SimConfig::full_check_every`]).
pub const FULL_CHECK_EVERY: u64 = 1_000;

/// One tenant's share and limits in a run (`None` = the default: weight 1, no cap, no rate
/// limit).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TenantSetting {
    /// Tenant name (`t0`, `t1`, ...).
    pub tenant: String,
    /// Fair-share weight.
    pub weight: Option<f64>,
    /// Most live leases.
    pub max_inflight: Option<u64>,
    /// Leases per second (token bucket).
    pub rate_per_s: Option<f64>,
    /// Token bucket size.
    pub burst: Option<u64>,
}

impl TenantSetting {
    /// The engine's form of this setting, for `Client::configure_tenant`.
    pub fn limits(&self) -> orq::TenantLimits {
        orq::TenantLimits {
            weight: self.weight.map(Some),
            max_inflight: self.max_inflight.map(Some),
            max_queued: None,
            rate_per_s: self.rate_per_s.map(Some),
            burst: self.burst.map(Some),
        }
    }
}

/// Salt of the tenancy draws' own stream: drawn after, and apart from, the rest of the
/// configuration, so that seeds without tenancy settings run exactly as before they existed.
const TENANCY_SALT: u64 = 0x7465_6e61_6e63_7900;
/// Salt of the swarm draws' own stream (which fault families a seed turns on).
const SWARM_SALT: u64 = 0x7377_6172_6d00_0000;
/// Salt of the pull workers' stream (`SimConfig::draw_pull`).
const PULL_SALT: u64 = 0x7075_6c6c_0000_0000;
/// Time added to a liveness budget sized by the drawn work, ms ([`SimConfig::draw`]).
const LIVENESS_SLACK_MS: u64 = 300_000;

/// Probability that a seed draws tenancy settings (limits, weights, aging, pauses).
const P_TENANCY: f64 = 0.5;
/// Capped or rate-limited tenants must still drain within this much of the liveness budget
/// (ms): caps and rates are drawn no lower than that allows.
const TENANCY_DRAIN_MS: u64 = 200_000;

impl SimConfig {
    /// Draw a configuration from `seed`. The same seed always gives the same configuration.
    pub fn draw(seed: u64) -> SimConfig {
        SimConfig::draw_chosen(seed, Choice::default())
    }

    /// Draw a configuration from `seed`, with `chosen` in place of the draws it overrides. The
    /// other draws are the seed's own: with nothing chosen this is [`SimConfig::draw`].
    pub fn draw_chosen(seed: u64, chosen: Choice) -> SimConfig {
        let mut r = ChaCha12Rng::seed_from_u64(seed ^ 0x6f72_715f_7369_6d00);
        let lease_ms = [1_000, 2_000, 5_000][r.random_range(0..3)];
        SimConfig {
            seed,
            tenants: r.random_range(1..=4),
            tasks: r.random_range(20..=120),
            batch_max: [1, 1, 5, 20][r.random_range(0..4)],
            workers: r.random_range(1..=4),
            pull_workers: 0,
            pull_tenants: Vec::new(),
            pull_batch: false,
            concurrency: r.random_range(1..=6),
            schedulers: r.random_range(0..=2),
            submit_window_ms: r.random_range(1_000..=20_000),
            safety_ms: 60_000,
            liveness_budget_ms: 600_000,
            lease_ms,
            handler_ms_max: r.random_range(1..=lease_ms * 2),
            p_transient: r.random_range(0.0..0.3),
            p_permanent: r.random_range(0.0..0.05),
            p_delayed: r.random_range(0.0..0.4),
            delay_ms_max: r.random_range(100..=30_000),
            p_cancel: r.random_range(0.0..0.05),
            max_retries_max: r.random_range(0..=5),
            faults: Faults {
                mean_fault_gap_ms: r.random_range(500..=10_000),
                w_crash: r.random_range(0..=4),
                w_stall: r.random_range(0..=3),
                w_clock_jump: r.random_range(0..=2),
                w_script_flush: r.random_range(0..=1),
                p_crash_before_effect: r.random_range(0.0..0.03),
                p_crash_after_effect: r.random_range(0.0..0.03),
                stall_ms_max: lease_ms * 3,
                p_slow_call: 0.0,
                p_slow_report: 0.0,
                downtime_ms_max: r.random_range(0..=10_000),
                p_lost_reply: r.random_range(0.0..0.05),
                p_fail_before: r.random_range(0.0..0.05),
                p_duplicate: r.random_range(0.0..0.03),
                clock_offset_ms_max: r.random_range(0..=2_000),
                drift_ppm_max: r.random_range(0..=50_000),
                clock_jump_ms_max: r.random_range(0..=5_000),
                w_pause: 0,
                pause_ms_max: 0,
                p_refusal: 0.0,
                w_refusal: 0,
                refusal_ms_max: 0,
                loading_ms_max: 0,
                families: Vec::new(),
            },
            planted: PlantedBug::None,
            lossy_restart: false,
            tenant_limits: Vec::new(),
            aging_step_ms: 0,
            full_check_every: FULL_CHECK_EVERY,
            chosen: Choice::default(),
        }
        .choose(chosen)
        .draw_tenancy()
        .draw_swarm()
        .draw_pull()
        .size_liveness_budget()
    }

    /// Apply the chosen task count before the draws that depend on it (tenancy caps, the
    /// liveness budget); the families are applied by [`SimConfig::draw_swarm`].
    fn choose(mut self, chosen: Choice) -> SimConfig {
        if let Some(t) = chosen.tasks {
            self.tasks = t;
        }
        self.chosen = chosen;
        self
    }

    /// The liveness budget: ten virtual minutes, or, when the drawn work needs more, the work
    /// itself at two attempts per task, each as long as the longest handler, over the worker
    /// slots, plus five minutes. (Seed 1381: 120 tasks of up to 9.9 s on one slot took longer
    /// than ten minutes with nothing stuck.) Computed, not drawn: the other draws are unchanged.
    fn size_liveness_budget(mut self) -> SimConfig {
        let slots = u64::from(self.workers * self.concurrency).max(1);
        let work = 2 * u64::from(self.tasks) * self.handler_ms_max / slots;
        self.liveness_budget_ms = self.liveness_budget_ms.max(work + LIVENESS_SLACK_MS);
        self
    }

    /// From the seed's own stream for them (the other draws unchanged): no pull worker for
    /// half of the seeds, one or two for the others.
    fn draw_pull(mut self) -> SimConfig {
        let mut r = ChaCha12Rng::seed_from_u64(self.seed ^ PULL_SALT);
        self.pull_workers = if r.random_bool(0.5) {
            r.random_range(1..=2)
        } else {
            0
        };
        // Half of those lease for some tenants only: a non-empty subset, each in or out at even
        // odds.
        if self.pull_workers > 0 && r.random_bool(0.5) {
            let all: Vec<String> = (0..self.tenants).map(|i| format!("t{i}")).collect();
            let mut some: Vec<String> =
                all.iter().filter(|_| r.random_bool(0.5)).cloned().collect();
            if some.is_empty() {
                some.push(all[r.random_range(0..all.len())].clone());
            }
            self.pull_tenants = some;
        }
        self.pull_batch = self.pull_workers > 0 && r.random_bool(0.5);
        self
    }

    /// From the seed's own swarm stream: which fault families are on ([`FAULT_FAMILIES`]), and
    /// the refusal faults' sizes. A family that is off has every probability and weight at 0; a
    /// family that is on has every weight at least 1, so it really happens.
    fn draw_swarm(mut self) -> SimConfig {
        let mut r = ChaCha12Rng::seed_from_u64(self.seed ^ SWARM_SALT);
        let mut on: Vec<bool> = FAULT_FAMILIES
            .iter()
            .map(|_| r.random_bool(P_FAMILY_ON))
            .collect();
        // Chosen families replace the draw; the sizes below are still drawn, so a family keeps
        // the sizes this seed gives it.
        if let Some(chosen) = &self.chosen.families {
            on = FAULT_FAMILIES
                .iter()
                .map(|f| chosen.iter().any(|c| c == f))
                .collect();
        }
        let lease_ms = self.lease_ms;
        let p_refusal = r.random_range(0.0..0.05);
        let w_refusal = r.random_range(1..=3);
        let refusal_ms_max = r.random_range(lease_ms / 2..=lease_ms * 3);
        let loading_ms_max = r.random_range(0..=3_000);
        let p_slow_call = r.random_range(0.0..0.05);
        let p_slow_report = r.random_range(0.05..0.3);
        let f = &mut self.faults;
        for (family, on) in FAULT_FAMILIES.iter().zip(&on) {
            match (*family, *on) {
                ("crash", true) => f.w_crash = f.w_crash.max(1),
                ("crash", false) => {
                    f.w_crash = 0;
                    f.p_crash_before_effect = 0.0;
                    f.p_crash_after_effect = 0.0;
                }
                ("stall", true) => {
                    f.w_stall = f.w_stall.max(1);
                    f.p_slow_report = p_slow_report;
                }
                ("stall", false) => f.w_stall = 0,
                ("clock", true) => f.w_clock_jump = f.w_clock_jump.max(1),
                ("clock", false) => {
                    f.w_clock_jump = 0;
                    f.clock_offset_ms_max = 0;
                    f.drift_ppm_max = 0;
                    f.clock_jump_ms_max = 0;
                }
                ("restart", true) => {
                    f.w_script_flush = f.w_script_flush.max(1);
                    f.loading_ms_max = loading_ms_max;
                }
                ("restart", false) => f.w_script_flush = 0,
                ("network", true) => {
                    f.p_slow_call = p_slow_call;
                    f.p_slow_report = p_slow_report;
                }
                ("network", false) => {
                    f.p_lost_reply = 0.0;
                    f.p_fail_before = 0.0;
                    f.p_duplicate = 0.0;
                }
                ("refusal", true) => {
                    f.p_refusal = p_refusal;
                    f.w_refusal = w_refusal;
                    f.refusal_ms_max = refusal_ms_max;
                }
                _ => {}
            }
        }
        f.families = f.families_on();
        self
    }

    /// For half the seeds, from the seed's own tenancy stream: per-tenant `max_inflight`,
    /// rate limits (`rate_per_s`, `burst`) and weights, a starvation-bound step, and pauses as
    /// a fault kind. Caps and rates are low enough to bind (at most a few leases at once, a few
    /// per second) and high enough that a tenant's tasks, at two attempts each on average, drain
    /// within [`TENANCY_DRAIN_MS`].
    fn draw_tenancy(mut self) -> SimConfig {
        let mut r = ChaCha12Rng::seed_from_u64(self.seed ^ TENANCY_SALT);
        if !r.random_bool(P_TENANCY) {
            return self;
        }
        // Tasks per tenant (the draw is uneven, so allow twice the mean), two attempts each.
        let per_tenant = (2 * self.tasks).div_ceil(self.tenants).min(self.tasks);
        let attempts = 2 * u64::from(per_tenant);
        let cap_min = (attempts * self.handler_ms_max / 2)
            .div_ceil(TENANCY_DRAIN_MS)
            .max(1);
        let rate_min = (attempts as f64 * 1000.0 / TENANCY_DRAIN_MS as f64).max(1.0);
        for t in 0..self.tenants {
            let mut s = TenantSetting {
                tenant: format!("t{t}"),
                weight: None,
                max_inflight: None,
                rate_per_s: None,
                burst: None,
            };
            if r.random_bool(0.6) {
                s.max_inflight = Some(r.random_range(cap_min..=cap_min + 2));
            }
            if r.random_bool(0.4) {
                // Whole and half tokens per second, so rounding in the bucket is exercised.
                let half_steps = r.random_range((rate_min * 2.0).ceil() as u64..=40);
                s.rate_per_s = Some(half_steps as f64 / 2.0);
                s.burst = Some(r.random_range(1..=5));
            }
            if r.random_bool(0.4) {
                s.weight = Some([0.5, 2.0, 3.0, 5.0][r.random_range(0..4)]);
            }
            let set = s.weight.is_some() || s.max_inflight.is_some() || s.rate_per_s.is_some();
            if set {
                self.tenant_limits.push(s);
            }
        }
        if r.random_bool(0.3) {
            self.aging_step_ms = r.random_range(10..=2_000);
        }
        if r.random_bool(0.5) {
            self.faults.w_pause = r.random_range(1..=2);
            self.faults.pause_ms_max = r.random_range(500..=5_000);
        }
        self
    }

    /// True when the run sets tenancy limits, weights, a starvation bound or pauses the queue.
    pub fn has_tenancy(&self) -> bool {
        !self.tenant_limits.is_empty() || self.aging_step_ms > 0 || self.faults.w_pause > 0
    }

    /// The same configuration with a lossy restart.
    pub fn with_lossy_restart(mut self) -> SimConfig {
        self.lossy_restart = true;
        self
    }

    /// The same configuration with the whole queue checked every `calls` calls (1 = after
    /// every call).
    pub fn with_full_check_every(mut self, calls: u64) -> SimConfig {
        self.full_check_every = calls.max(1);
        self
    }

    /// The same configuration with `bug` planted.
    pub fn with_planted(mut self, bug: PlantedBug) -> SimConfig {
        self.planted = bug;
        self
    }
}
