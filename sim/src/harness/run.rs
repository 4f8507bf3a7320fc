//! One simulation run: the supervisor that starts the actors (client, worker pools, schedulers —
//! the engine's real code), injects faults during the safety phase, then turns faults off and
//! requires every task to finish within the liveness budget.

use super::checker;
use super::config::{PlantedBug, SimConfig};
use super::fairness::RateWindow;
use super::refusal;
use super::reports;
use super::world::{mix, worker_clock, ActorStore, SimHandler, World, QUEUE, TASK_TYPE};
use orq::{
    Backoff, Client, Entropy, Error, Handlers, Scheduler, SchedulerConfig, TaskSpec, Worker,
    WorkerConfig,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The version written in timeline headers.
pub const TIMELINE_VERSION: u32 = 1;

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every invariant held and every task finished in time.
    Pass,
    /// An invariant was violated (the message says which).
    Safety(String),
    /// Faults stopped but a task did not finish within the liveness budget.
    Liveness(String),
    /// The engine or the harness panicked.
    Crash(String),
}

impl Verdict {
    /// The process exit code for this verdict: 0 pass, 1 safety, 2 liveness, 3 crash.
    pub fn exit_code(&self) -> i32 {
        match self {
            Verdict::Pass => 0,
            Verdict::Safety(_) => 1,
            Verdict::Liveness(_) => 2,
            Verdict::Crash(_) => 3,
        }
    }
}

/// The result of one run.
#[derive(Debug, Clone)]
pub struct Report {
    /// The configuration drawn from the seed.
    pub config: SimConfig,
    /// How it ended.
    pub verdict: Verdict,
    /// The timeline: header line, then one JSON event per line.
    pub timeline: Vec<String>,
    /// Counters.
    pub stats: super::world::RunStats,
}

impl Report {
    /// The timeline as JSON Lines text (each line ends with a newline).
    pub fn timeline_text(&self) -> String {
        let mut s = String::new();
        for l in &self.timeline {
            s.push_str(l);
            s.push('\n');
        }
        s
    }
}

/// The command that replays a seed.
pub fn replay_command(config: &SimConfig) -> String {
    let mut cmd = format!("cargo run -p orq-sim -- run --seed {}", config.seed);
    if config.planted != PlantedBug::None {
        cmd.push_str(&format!(" --planted {}", config.planted.name()));
    }
    if config.lossy_restart {
        cmd.push_str(" --lossy");
    }
    if config.full_check_every != super::config::FULL_CHECK_EVERY {
        cmd.push_str(&format!(" --full-check-every {}", config.full_check_every));
    }
    if let Some(families) = &config.chosen.families {
        let list = if families.is_empty() {
            "none".to_string()
        } else {
            families.join(",")
        };
        cmd.push_str(&format!(" --faults {list}"));
    }
    if let Some(tasks) = config.chosen.tasks {
        cmd.push_str(&format!(" --tasks {tasks}"));
    }
    cmd
}

/// Where a streamed run's timeline lines go, each without its newline, in timeline order.
pub type Sink<'a> = &'a mut dyn FnMut(&str);

/// Hands the timeline's lines to a [`Sink`] as the run records them: the supervisor calls
/// [`Stream::flush`] each time it wakes, so a watcher sees the run progress in virtual time.
struct Stream<'a> {
    sink: Option<Sink<'a>>,
    /// Lines of `World`'s timeline already handed over.
    sent: usize,
}

impl Stream<'_> {
    fn line(&mut self, line: &str) {
        if let Some(sink) = self.sink.as_mut() {
            sink(line);
        }
    }

    fn flush(&mut self, world: &World) {
        if self.sink.is_none() {
            return;
        }
        let st = world.state.lock().unwrap();
        let new: Vec<String> = st.timeline[self.sent..].to_vec();
        self.sent = st.timeline.len();
        drop(st);
        for l in &new {
            self.line(l);
        }
    }
}

struct Slot {
    handle: Option<JoinHandle<()>>,
    incarnation: u32,
    restart_at_ms: Option<u64>,
}

/// Start worker `name`: a pull worker of the HTTP protocol when its name says so (`p<i>`,
/// [`super::pull`]), a Rust worker pool otherwise (`w<i>`).
fn start_any_worker(world: &Arc<World>, name: &str, incarnation: u32) -> JoinHandle<()> {
    if name.starts_with(PULL_PREFIX) {
        super::pull::start_pull_worker(world, name, incarnation)
    } else {
        start_worker(world, name, incarnation)
    }
}

/// The name prefix of pull workers.
const PULL_PREFIX: &str = "p";

fn start_worker(world: &Arc<World>, name: &str, incarnation: u32) -> JoinHandle<()> {
    let id = if incarnation == 0 {
        name.to_string()
    } else {
        format!("{name}.{incarnation}")
    };
    let store = Arc::new(ActorStore {
        world: world.clone(),
        actor: id.clone(),
    });
    let handlers = Handlers::new().register(
        TASK_TYPE,
        SimHandler {
            world: world.clone(),
        },
    );
    let config = WorkerConfig {
        id: id.clone(),
        queues: vec![QUEUE.into()],
        concurrency: world.config.concurrency as usize,
        idle_poll_ms: 50,
        lease_linger_ms: WorkerConfig::default().lease_linger_ms,
        lanes: WorkerConfig::default().lanes,
        heartbeat_divisor: super::config::HEARTBEAT_DIVISOR,
        shutdown_grace_ms: 100,
        planted_ignore_lost_lease: world.config.planted == PlantedBug::WorkerIgnoresLostLease,
        planted_drop_refused_outcome: world.config.planted == PlantedBug::WorkerDropsRefusedOutcome,
        planted_heartbeat_waits_interval: world.config.planted
            == PlantedBug::HeartbeatWaitsInterval,
    };
    let entropy = Arc::new(Entropy::from_seed(mix(
        world.config.seed ^ super::world::fnv(&id)
    )));
    let clock = worker_clock(world, name);
    let skew = json!({
        "incarnation": incarnation,
        "clock_offset_ms": clock.offset_ms,
        "drift_ppm": clock.drift_ppm,
    });
    let worker = Worker::new(store, Arc::new(clock), entropy, handlers, config);
    world.event(&id, "worker_start", None, skew);
    tokio::spawn(async move { worker.run(CancellationToken::new()).await })
}

fn start_scheduler(world: &Arc<World>, name: &str) -> JoinHandle<()> {
    let store = Arc::new(ActorStore {
        world: world.clone(),
        actor: name.to_string(),
    });
    let entropy = Arc::new(Entropy::from_seed(mix(
        world.config.seed ^ super::world::fnv(name)
    )));
    let s = Scheduler::new(
        store,
        Arc::new(worker_clock(world, name)),
        entropy,
        SchedulerConfig {
            queues: vec![QUEUE.into()],
            interval_ms: 500,
            ..SchedulerConfig::default()
        },
    );
    tokio::spawn(async move { s.run(CancellationToken::new()).await })
}

/// True when `id` was accepted at or after the rollback point of a lossy restart, so the store
/// may have lost it (the same rule as the end-of-run accounting in the checker).
fn lost_to_rollback(world: &World, id: &str) -> bool {
    let st = world.state.lock().unwrap();
    let l = &st.ledger;
    matches!((l.rollback_point_ms, l.accepted.get(id)), (Some(p), Some(&at)) if at >= p)
}

/// The client actor: submits the workload over the submit window (retrying with the same
/// idempotency key after a store error), and cancels a few tasks.
async fn client(world: Arc<World>) {
    let c = world.config.clone();
    let store = Arc::new(ActorStore {
        world: world.clone(),
        actor: "client".into(),
    });
    let entropy = Arc::new(Entropy::from_seed(mix(c.seed ^ 0xc1)));
    let client = Client::new(store, Arc::new(worker_clock(&world, "client")), entropy);
    let mut next = 0u32;
    let mut accepted: Vec<String> = Vec::new();
    while next < c.tasks {
        let at = c.submit_window_ms * u64::from(next) / u64::from(c.tasks);
        world.vt.sleep_until_ms(at).await;
        let n = (world.draw_range(1, u64::from(c.batch_max)) as u32).min(c.tasks - next);
        let specs: Vec<TaskSpec> = (next..next + n)
            .map(|k| {
                let h = mix(c.seed ^ 0x7a5c ^ u64::from(k));
                let delayed = super::world::unit(mix(h ^ 1)) < c.p_delayed;
                let spec = TaskSpec::new(json!({"n": k}).to_string())
                    .queue(QUEUE)
                    .tenant(format!("t{}", h % u64::from(c.tenants)))
                    .task_type(TASK_TYPE)
                    .priority((mix(h ^ 2) % 10) as u8)
                    .delay_ms(if delayed {
                        mix(h ^ 3) % c.delay_ms_max
                    } else {
                        0
                    })
                    .max_retries((mix(h ^ 4) % (u64::from(c.max_retries_max) + 1)) as u32)
                    .backoff(Backoff {
                        initial_ms: 100 + mix(h ^ 5) % 900,
                        multiplier: 2.0,
                        max_ms: 10_000,
                        jitter: 0.2,
                    })
                    .lease_ms(c.lease_ms)
                    .idempotency_key(format!("k{k}"));
                match super::world::submitted_trace(c.seed, u64::from(k)) {
                    Some(cx) => spec.trace(cx),
                    None => spec,
                }
            })
            .collect();
        next += n;
        loop {
            match client.submit_batch(specs.clone()).await {
                Ok(done) => {
                    let now = world.vt.elapsed_ms();
                    let mut st = world.state.lock().unwrap();
                    for d in done {
                        st.ledger.accepted.entry(d.task.id.clone()).or_insert(now);
                        accepted.push(d.task.id);
                    }
                    break;
                }
                Err(Error::Unavailable { .. }) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => {
                    world.violate(format!("client: submit refused: {e}"));
                    return;
                }
            }
        }
        if world.draw() < c.p_cancel && !accepted.is_empty() {
            let id = accepted[world.draw_range(0, accepted.len() as u64 - 1) as usize].clone();
            for _ in 0..100 {
                match client.cancel(Some(QUEUE), &id).await {
                    Err(Error::Unavailable { .. }) => {
                        tokio::time::sleep(Duration::from_millis(20)).await
                    }
                    Ok(_) | Err(Error::Conflict { .. }) => break,
                    // A lossy restart may lose a task accepted after its rollback point (the
                    // checker allows it): cancelling it then finds nothing.
                    Err(Error::NotFound { .. }) if lost_to_rollback(&world, &id) => break,
                    Err(e) => {
                        world.violate(format!("client: cancel of {id} failed: {e}"));
                        return;
                    }
                }
            }
        }
    }
}

/// Most attempts of one supervisor setting (tenant limits, aging, pause, resume) interrupted by
/// injected store faults; the settings are idempotent, so a retry is safe. The waits between
/// attempts double from 20 ms up to 1 s, so the attempts outlast any refusal episode.
const SETTING_ATTEMPTS_MAX: u32 = 200;

/// Apply one supervisor setting through the engine's client, retrying what an injected fault
/// interrupted (a lost reply may have applied it already: settings are idempotent).
async fn settle<F, Fut>(world: &World, what: &str, mut call: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = orq::Result<()>>,
{
    for n in 0..SETTING_ATTEMPTS_MAX {
        match call().await {
            Ok(()) => return,
            Err(Error::Unavailable { .. }) => {
                tokio::time::sleep(Duration::from_millis((20u64 << n.min(6)).min(1_000))).await
            }
            Err(e) => {
                world.violate(format!("supervisor: {what} refused: {e}"));
                return;
            }
        }
    }
    world.violate(format!(
        "supervisor: {what} failed {SETTING_ATTEMPTS_MAX} times"
    ));
}

/// The supervisor's client, for the run's tenancy settings: it goes through the fault-injecting
/// store like every actor.
fn supervisor_client(world: &Arc<World>) -> Client {
    let store = Arc::new(ActorStore {
        world: world.clone(),
        actor: "supervisor".into(),
    });
    let entropy = Arc::new(Entropy::from_seed(mix(world.config.seed ^ 0x5e7)));
    Client::new(store, Arc::new(worker_clock(world, "supervisor")), entropy)
}

/// Set the run's tenant limits and starvation bound before any actor starts, and give the
/// checker each rate-limited tenant's bucket.
async fn configure_tenancy(world: &Arc<World>, client: &Client) {
    for t in &world.config.tenant_limits {
        let limits = t.limits();
        settle(world, "configure_tenant", || {
            client.configure_tenant(QUEUE, &t.tenant, &limits)
        })
        .await;
        if let Some(rate) = t.rate_per_s {
            let burst = t.burst.unwrap_or_else(|| (rate.ceil() as u64).max(1));
            world
                .state
                .lock()
                .unwrap()
                .ledger
                .rate_windows
                .insert(t.tenant.clone(), RateWindow::new(rate, burst as f64));
        }
    }
    let step = world.config.aging_step_ms;
    if step > 0 {
        settle(world, "configure_queue", || {
            client.configure_queue(QUEUE, None, Some(step))
        })
        .await;
    }
}

/// Pause or resume leasing (the pause fault).
async fn set_paused(world: &Arc<World>, client: &Client, paused: bool) {
    settle(world, if paused { "pause" } else { "resume" }, || {
        client.configure_queue(QUEUE, Some(paused), None)
    })
    .await;
}

/// The supervisor: the run's main future.
async fn supervise(config: SimConfig, sink: Option<Sink<'_>>) -> Report {
    let (crash_tx, mut crash_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let world = World::new(config.clone(), crash_tx);
    let header = json!({
        "kind": "header",
        "version": TIMELINE_VERSION,
        "seed": config.seed,
        "config": config,
        "replay": replay_command(&config),
    });
    let mut stream = Stream { sink, sent: 0 };
    stream.line(&header.to_string());
    // Seeds without tenancy settings make no call here, so they run exactly as before.
    let sup_client = supervisor_client(&world);
    if config.has_tenancy() {
        configure_tenancy(&world, &sup_client).await;
    }
    let mut workers: BTreeMap<String, Slot> = BTreeMap::new();
    let pools = (1..=config.workers).map(|i| format!("w{i}"));
    let pulls = (1..=config.pull_workers).map(|i| format!("{PULL_PREFIX}{i}"));
    for name in pools.chain(pulls) {
        let handle = start_any_worker(&world, &name, 0);
        workers.insert(
            name,
            Slot {
                handle: Some(handle),
                incarnation: 0,
                restart_at_ms: None,
            },
        );
    }
    let mut others: Vec<JoinHandle<()>> = (1..=config.schedulers)
        .map(|i| start_scheduler(&world, &format!("s{i}")))
        .collect();
    let client_handle = tokio::spawn(client(world.clone()));

    let f = &config.faults;
    let weights = [
        f.w_crash,
        f.w_stall,
        f.w_clock_jump,
        f.w_script_flush,
        f.w_pause,
        f.w_refusal,
    ];
    let total_weight: u32 = weights.iter().sum();
    let gap = |w: &World| -> u64 {
        // Exponential inter-arrival times with the configured mean.
        let u = w.draw();
        (-(f.mean_fault_gap_ms as f64) * (1.0 - u).ln()).max(1.0) as u64
    };
    let mut next_fault = world.vt.elapsed_ms() + gap(&world);
    // A lossy restart: snapshot at `snap_at`, roll back to it at `restore_at`.
    let (mut snap_at, mut restore_at) = (u64::MAX, u64::MAX);
    if config.lossy_restart {
        snap_at = world.draw_range(config.safety_ms / 8, config.safety_ms / 3);
        restore_at = world.draw_range(snap_at + 1, config.safety_ms / 2);
    }
    let mut snapshot = None;
    let mut snapshot_ms = 0;
    // The pause fault: when the queue resumes (virtual ms), and whether it was ever paused.
    let mut resume_at: Option<u64> = None;
    let mut ever_paused = false;
    let crash = |world: &Arc<World>, workers: &mut BTreeMap<String, Slot>, id: &str, why: &str| {
        // `id` is a worker id: the slot name, with `.<incarnation>` after a restart.
        let name = id.split('.').next().unwrap_or(id);
        if let Some(slot) = workers.get_mut(name) {
            if let Some(h) = slot.handle.take() {
                h.abort();
                let actor = match slot.incarnation {
                    0 => name.to_string(),
                    n => format!("{name}.{n}"),
                };
                world.state.lock().unwrap().crashed.insert(actor);
                reports::forget(world, Some(name), false);
                let down = world.draw_range(0, world.config.faults.downtime_ms_max);
                slot.restart_at_ms = Some(world.vt.elapsed_ms() + down);
                world.fault_event(name, "crash", None, json!({"why": why, "down_ms": down}));
            }
        }
    };

    // Safety phase: faults on.
    loop {
        stream.flush(&world);
        let now = world.vt.elapsed_ms();
        if world.violation().is_some() || now >= config.safety_ms {
            break;
        }
        if resume_at.is_some_and(|t| t <= now) {
            resume_at = None;
            set_paused(&world, &sup_client, false).await;
        }
        for (name, slot) in workers.iter_mut() {
            if slot.restart_at_ms.is_some_and(|t| t <= now) {
                slot.restart_at_ms = None;
                slot.incarnation += 1;
                slot.handle = Some(start_any_worker(&world, name, slot.incarnation));
            }
        }
        if now >= snap_at && snapshot.is_none() {
            snapshot = Some(world.store.snapshot());
            snapshot_ms = now;
            world.event("store", "snapshot", None, json!({}));
            snap_at = u64::MAX;
        }
        if now >= restore_at {
            if let Some(snap) = snapshot.take() {
                world.store.restore(&snap);
                world.store.flush_scripts();
                {
                    let mut st = world.state.lock().unwrap();
                    st.ledger.rolled_back = true;
                    st.ledger.rollback_point_ms = Some(snapshot_ms);
                }
                world.reset_stream_position();
                reports::reckoning_reset(&world);
                world.fault_event(
                    "store",
                    "lossy_restart",
                    None,
                    json!({"rolled_back_to_ms": snapshot_ms}),
                );
            }
            restore_at = u64::MAX;
        }
        if now >= next_fault && total_weight > 0 {
            let mut pick = world.draw_range(0, u64::from(total_weight) - 1) as u32;
            let mut kind = 0;
            for (i, w) in weights.iter().enumerate() {
                if pick < *w {
                    kind = i;
                    break;
                }
                pick -= w;
            }
            let names: Vec<String> = workers.keys().cloned().collect();
            let victim = names[world.draw_range(0, names.len() as u64 - 1) as usize].clone();
            match kind {
                0 => crash(&world, &mut workers, &victim, "supervisor"),
                1 => {
                    let ms = world.draw_range(config.lease_ms, f.stall_ms_max.max(config.lease_ms));
                    let actor = match workers.get(&victim) {
                        Some(s) if s.incarnation > 0 => format!("{victim}.{}", s.incarnation),
                        _ => victim.clone(),
                    };
                    world
                        .state
                        .lock()
                        .unwrap()
                        .stalls
                        .insert(actor.clone(), now + ms);
                    reports::forget(&world, Some(&actor), true);
                    world.fault_event(&actor, "stall", None, json!({"ms": ms}));
                }
                2 => {
                    let max = f.clock_jump_ms_max as i64;
                    let delta = world.draw_range(0, 2 * max as u64) as i64 - max;
                    world.jump_store_clock(delta);
                    reports::reckoning_reset(&world);
                    world.fault_event("store", "clock_jump", None, json!({"delta_ms": delta}));
                }
                3 => {
                    // A restart: the script cache is gone, and the store may load its data for
                    // a while (every call refused with LOADING).
                    world.store.flush_scripts();
                    world.fault_event("store", "script_flush", None, json!({}));
                    let ms = world.draw_range(0, f.loading_ms_max);
                    if ms > 0 {
                        world.start_refusal("store", "loading", orq::Transient::Loading, ms);
                    }
                }
                5 => {
                    let words = refusal::INJECTED;
                    let word = words[world.draw_range(0, words.len() as u64 - 1) as usize];
                    let ms = world.draw_range(100, f.refusal_ms_max.max(100));
                    world.start_refusal("store", "refusal_episode", word, ms);
                }
                _ => {
                    if resume_at.is_none() {
                        let ms = world.draw_range(100, f.pause_ms_max.max(100));
                        world.fault_event("supervisor", "pause", None, json!({"ms": ms}));
                        set_paused(&world, &sup_client, true).await;
                        resume_at = Some(now + ms);
                        ever_paused = true;
                    }
                }
            }
            next_fault = now + gap(&world);
        }
        let mut wake = next_fault
            .min(config.safety_ms)
            .min(snap_at)
            .min(restore_at)
            .min(resume_at.unwrap_or(u64::MAX));
        for slot in workers.values() {
            if let Some(t) = slot.restart_at_ms {
                wake = wake.min(t);
            }
        }
        tokio::select! {
            biased;
            Some(name) = crash_rx.recv() => crash(&world, &mut workers, &name, "handler"),
            _ = world.vt.sleep_until_ms(wake.max(now + 1)) => {}
        }
    }

    // Liveness phase: no new faults; crashed workers come back; stalls end.
    let mut verdict = Verdict::Pass;
    if let Some(v) = world.violation() {
        verdict = Verdict::Safety(v);
    } else {
        world.faults_on.store(false, Ordering::Relaxed);
        world.state.lock().unwrap().stalls.clear();
        world.event("harness", "faults_off", None, json!({}));
        if ever_paused {
            // Resume even if the queue looks resumed: a lossy restart may have rolled the store
            // back to a moment when it was paused.
            set_paused(&world, &sup_client, false).await;
        }
        while let Ok(name) = crash_rx.try_recv() {
            crash(&world, &mut workers, &name, "handler");
        }
        for (name, slot) in workers.iter_mut() {
            if slot.handle.is_none() {
                slot.restart_at_ms = None;
                slot.incarnation += 1;
                slot.handle = Some(start_any_worker(&world, name, slot.incarnation));
            }
        }
        let deadline = world.vt.elapsed_ms() + config.liveness_budget_ms;
        loop {
            stream.flush(&world);
            if let Some(v) = world.violation() {
                verdict = Verdict::Safety(v);
                break;
            }
            let left = checker::unfinished(&world);
            if client_handle.is_finished() && left.is_empty() {
                break;
            }
            if world.vt.elapsed_ms() >= deadline {
                verdict = Verdict::Liveness(format!(
                    "tasks still unfinished {} ms after faults stopped (client done: {}): {left:?}",
                    config.liveness_budget_ms,
                    client_handle.is_finished()
                ));
                world.violate(format!("liveness: {left:?}"));
                break;
            }
            tokio::select! {
                biased;
                Some(name) = crash_rx.recv() => {
                    // Asked just before faults stopped: crash it and bring it straight back.
                    crash(&world, &mut workers, &name, "handler");
                    let base = name.split('.').next().unwrap_or(&name).to_string();
                    if let Some(slot) = workers.get_mut(&base) {
                        slot.restart_at_ms = None;
                        slot.incarnation += 1;
                        slot.handle = Some(start_any_worker(&world, &base, slot.incarnation));
                    }
                }
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    }
    for slot in workers.values_mut() {
        if let Some(h) = slot.handle.take() {
            h.abort();
        }
    }
    client_handle.abort();
    for h in others.drain(..) {
        h.abort();
    }
    let mut stats = super::world::RunStats {
        script_calls: world.calls.load(Ordering::Relaxed),
        virtual_ms: world.vt.elapsed_ms(),
        ..Default::default()
    };
    if verdict == Verdict::Pass {
        match checker::check_end(&world) {
            Ok((c, d, x, lost)) => {
                stats.completed = c;
                stats.dead = d;
                stats.cancelled = x;
                stats.lost_to_rollback = lost;
            }
            Err(e) => {
                world.violate(e.clone());
                verdict = Verdict::Safety(e);
            }
        }
    }
    let st = world.state.lock().unwrap();
    stats.accepted = st.ledger.accepted.len() as u64;
    stats.tenancy = st.ledger.tenancy.clone();
    stats.faults = st.faults.clone();
    stats.refused_calls = st.refused_calls;
    stats.reports_delivered_after_refusal = st.ledger.reports.delivered_after_refusal;
    let mut timeline = Vec::with_capacity(st.timeline.len() + 2);
    timeline.push(header.to_string());
    timeline.extend(st.timeline.iter().cloned());
    timeline.push(
        json!({"t_ms": stats.virtual_ms, "actor": "harness", "kind": "end", "task": null,
            "tenant": null, "attempt": null,
            "details": {"verdict": format!("{verdict:?}"), "stats": stats}})
        .to_string(),
    );
    drop(st);
    stream.flush(&world);
    if let Some(end) = timeline.last() {
        stream.line(end);
    }
    Report {
        config,
        verdict,
        timeline,
        stats,
    }
}

/// Run one simulation of `config` on a fresh single-threaded runtime with paused (virtual) time.
/// A panic anywhere in the engine or the harness becomes [`Verdict::Crash`].
pub fn run(config: &SimConfig) -> Report {
    run_with(config, None)
}

/// [`run`], handing each timeline line to `sink` as the run records it (the header first, the
/// `end` line last): the same lines as [`Report::timeline`], in the same order. After a crash
/// (a panic) the sink has had the lines recorded until the supervisor last woke, and no `end`
/// line; the report says [`Verdict::Crash`].
pub fn run_streaming(config: &SimConfig, sink: Sink<'_>) -> Report {
    run_with(config, Some(sink))
}

fn run_with(config: &SimConfig, sink: Option<Sink<'_>>) -> Report {
    let cfg = config.clone();
    // The sink is only written to, so a panic cannot leave it half-updated in a way that
    // matters: the caller sees the lines written so far.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("build the simulation runtime");
        rt.block_on(supervise(cfg, sink))
    }));
    match result {
        Ok(report) => report,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            Report {
                config: config.clone(),
                verdict: Verdict::Crash(msg),
                timeline: Vec::new(),
                stats: Default::default(),
            }
        }
    }
}
