//! The simulated world: virtual clocks, the store every actor shares (each through its own
//! fault-injecting wrapper), the handler that records side effects, and the run's bookkeeping.
//! Everything here is single-threaded under a paused tokio runtime, so the seed decides it all.

use super::checker::{self, Ledger};
use super::config::{PlantedBug, SimConfig, EPOCH_MS};
use super::refusal::{self, Episode};
use super::reports::{self, CallEnd};
use crate::{MemoryStore, StoreClock};
use async_trait::async_trait;
use futures::future::BoxFuture;
use orq::{Handler, HandlerError, Resp, Store, StoreError, TaskContext, Transient};
use orq_lua::Script;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha12Rng;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// The one queue every simulated task goes to.
pub const QUEUE: &str = "sim";
/// The handler type of simulated tasks.
pub const TASK_TYPE: &str = "sim";
/// Virtual latency of every store call, ms: lets other actors interleave between calls.
pub const CALL_LATENCY_MS: u64 = 1;

/// Virtual time: tokio's paused clock, read as milliseconds since [`EPOCH_MS`]'s run start.
#[derive(Debug, Clone, Copy)]
pub struct VirtualTime {
    start: tokio::time::Instant,
}

impl VirtualTime {
    /// Start counting now (inside the paused runtime).
    pub fn start() -> Self {
        VirtualTime {
            start: tokio::time::Instant::now(),
        }
    }

    /// Virtual ms since the run started.
    pub fn elapsed_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Virtual µs since the run started.
    pub fn elapsed_micros(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    /// Sleep until virtual ms `t` (since the run started).
    pub async fn sleep_until_ms(&self, t: u64) {
        tokio::time::sleep_until(self.start + Duration::from_millis(t)).await;
    }
}

/// The store's clock: virtual time plus the jumps the harness injects.
#[derive(Debug)]
pub struct StoreTime {
    vt: VirtualTime,
    offset_ms: AtomicI64,
}

impl StoreClock for StoreTime {
    fn now_micros(&self) -> u64 {
        let base = EPOCH_MS as i64 * 1000 + self.vt.elapsed_micros() as i64;
        (base + self.offset_ms.load(Ordering::Relaxed) * 1000).max(0) as u64
    }
}

/// A worker's own clock: virtual time with a fixed offset and a drift (ppm).
#[derive(Debug, Clone)]
pub struct SkewedClock {
    vt: VirtualTime,
    /// Offset from virtual time (ms).
    pub offset_ms: i64,
    /// Drift (parts per million of elapsed virtual time).
    pub drift_ppm: i64,
}

impl orq::Clock for SkewedClock {
    fn now_ms(&self) -> u64 {
        let e = self.vt.elapsed_ms() as i64;
        (EPOCH_MS as i64 + self.offset_ms + e + e * self.drift_ppm / 1_000_000).max(0) as u64
    }

    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        // A fast clock (positive drift) sees its ms pass sooner in real (virtual) time. Rounded
        // up: rounded down, a fast clock's 1 ms sleep took no time at all, so a caller waiting
        // for its clock to reach a time spun without letting virtual time move.
        let rate = 1_000_000 + self.drift_ppm as i128;
        let real = ((ms as i128 * 1_000_000 + rate - 1) / rate).max(0) as u64;
        Box::pin(tokio::time::sleep(Duration::from_millis(real)))
    }
}

/// A side effect a handler performed, with the lease that produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct SideEffect {
    /// Virtual ms.
    pub t_ms: u64,
    /// Task id.
    pub task: String,
    /// The lease token of the attempt.
    pub token: String,
    /// Worker id.
    pub worker: String,
}

/// Counters of a run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct RunStats {
    /// Script calls that reached the store (duplicates included).
    pub script_calls: u64,
    /// Virtual ms the run lasted.
    pub virtual_ms: u64,
    /// Tasks the client saw accepted.
    pub accepted: u64,
    /// Finished tasks by status at the end.
    pub completed: u64,
    /// Dead at the end.
    pub dead: u64,
    /// Cancelled at the end.
    pub cancelled: u64,
    /// Tasks lost to a lossy restart (accepted after the rollback point).
    pub lost_to_rollback: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Calls the store refused (single refusals and every call of an episode).
    pub refused_calls: u64,
    /// Outcomes refused at least once and later taken by the store with the same token.
    pub reports_delivered_after_refusal: u64,
    /// What the tenancy checks saw (all zero for seeds without tenancy settings).
    pub tenancy: TenancyStats,
}

/// What the tenancy checks of a run saw: evidence that the limits bound and the checks ran.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct TenancyStats {
    /// State checks that found a capped tenant exactly at its `max_inflight`.
    pub checks_at_cap: u64,
    /// Lease calls made while the queue was paused (each must lease nothing).
    pub lease_calls_paused: u64,
    /// Leases of rate-limited tenants checked against `burst + rate × t`.
    pub rate_leases_checked: u64,
    /// The tightest window of a rate-limited tenant: the largest
    /// `leases − (burst + rate × t)` seen (≤ 0; 0 means a window used every token).
    pub rate_excess_max: Option<f64>,
}

/// Everything the actors share. Locks are never held across an await.
pub struct World {
    /// The run's configuration.
    pub config: SimConfig,
    /// The store.
    pub store: Arc<MemoryStore>,
    /// Virtual time.
    pub vt: VirtualTime,
    /// The store's clock (jumps).
    pub store_time: Arc<StoreTime>,
    /// Faults are injected only while this is set (the safety phase).
    pub faults_on: AtomicBool,
    /// Script calls made.
    pub calls: AtomicU64,
    /// Set at the first call (the planted `store_loads_library_once` loads the library then
    /// only).
    library_loaded: AtomicBool,
    rng: Mutex<ChaCha12Rng>,
    patched: BTreeMap<&'static str, String>,
    crash_tx: UnboundedSender<String>,
    /// Mutable bookkeeping.
    pub state: Mutex<WorldState>,
}

/// The run's mutable bookkeeping.
#[derive(Default)]
pub struct WorldState {
    /// Timeline lines (JSON), header excluded.
    pub timeline: Vec<String>,
    /// The first invariant violation, if any.
    pub violation: Option<String>,
    /// Actors whose store calls wait until this virtual ms.
    pub stalls: BTreeMap<String, u64>,
    /// Worker incarnations (actor ids, `w1`, `w1.2`) that crashed. Aborting a worker drops its
    /// tasks (completer, handlers, heartbeats) only when the runtime next polls it, so a call
    /// of the crashed incarnation may still end in the tick of the crash: nobody hears its
    /// reply, and check 9 ([`super::reports`]) ignores it.
    pub crashed: BTreeSet<String>,
    /// What the checker compares the store against.
    pub ledger: Ledger,
    /// Last stream entry id seen.
    pub stream_last: String,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    /// The refusal episode the store is in (or was last in: it ends at its `until_ms`).
    pub refusal: Option<Episode>,
    /// Calls the store refused.
    pub refused_calls: u64,
    /// Virtual ms the call being applied was sent at (before its latency, stall or hold).
    pub call_started_ms: u64,
    /// The checker's copy of the queue's indexes (built at the first check).
    pub(super) shadow: Option<super::shadow::Shadow>,
}

/// SplitMix64: a fixed, well-mixed hash of a u64 (Steele, Lea, Flood: "Fast splittable
/// pseudorandom number generators", OOPSLA 2014).
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a of a string, for mixing names into draws.
pub fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A uniform draw in [0, 1) from a hash.
pub fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// The Lua source of each script as this run uses it: with the planted bug's patch applied.
fn patched_sources(bug: PlantedBug) -> BTreeMap<&'static str, String> {
    let mut out = BTreeMap::new();
    // Patches of one script apply one after the other.
    let mut patch = |name: &'static str, from: &str, to: &str| {
        let src = out
            .get(name)
            .cloned()
            .unwrap_or_else(|| orq_lua::script(name).source.clone());
        assert!(
            src.contains(from),
            "planted bug patch for {name} no longer applies"
        );
        out.insert(name, src.replace(from, to));
    };
    match bug {
        PlantedBug::None
        | PlantedBug::StoreLoadsLibraryOnce
        | PlantedBug::PullIgnoresLostLease
        | PlantedBug::WorkerIgnoresLostLease
        | PlantedBug::WorkerDropsRefusedOutcome
        | PlantedBug::HeartbeatWaitsInterval => {}
        PlantedBug::CompleteIgnoresToken => {
            for name in ["complete", "complete_batch"] {
                patch(
                    name,
                    "local state, t = check_lease(c, id, token, 'completed', COMPLETE_TENANT_FIELDS, \
                     COMPLETE_FIELDS)",
                    "local state, t = check_lease(c, id, redis.call('HGET', task_key(c, id), F.token) or token, \
                     'completed', COMPLETE_TENANT_FIELDS, COMPLETE_FIELDS)",
                );
            }
        }
        // The lease bugs are in the lease code (lib/lease.lua, lib/maintenance.lua), which
        // `complete_batch` runs too when it also leases: both scripts are patched.
        PlantedBug::LeaseIgnoresRunAt => {
            for name in ["lease", "complete_batch"] {
                patch(
                    name,
                    "redis.call('ZRANGEBYSCORE', c.K_SCHEDULED, '-inf', istr(now), 'LIMIT', '0', istr(bound))",
                    "redis.call('ZRANGEBYSCORE', c.K_SCHEDULED, '-inf', '+inf', 'LIMIT', '0', istr(bound))",
                );
                // The lease script promotes only when its first read found a due task.
                patch(
                    name,
                    "pre.sched_first < 0 or pre.sched_first > now",
                    "pre.sched_first < 0",
                );
            }
        }
        PlantedBug::LeaseIgnoresMaxInflight => {
            for name in ["lease", "complete_batch"] {
                patch(name, "if cap > 0 and inflight >= cap then", "if false then");
            }
        }
        PlantedBug::LeaseIgnoresRateLimit => {
            for name in ["lease", "complete_batch"] {
                patch(
                    name,
                    "if not parked_until and tokens and tokens < 1 then",
                    "if false then",
                );
            }
        }
        PlantedBug::LeaseIgnoresTenants => {
            for name in ["lease", "complete_batch"] {
                patch(
                    name,
                    "head = head_among(c, a.tenants)",
                    "head = redis.call('ZRANGE', c.K_TENANTS, '0', '1', 'WITHSCORES')",
                );
            }
        }
        PlantedBug::LeaseIgnoresPause => {
            for name in ["lease", "complete_batch"] {
                patch(name, "paused = cf[1] == '1'", "paused = false");
            }
        }
        PlantedBug::ReapDoesNotCountAttempt => {
            for name in ["lease", "reap", "complete_batch"] {
                patch(
                    name,
                    "fail_attempt(c, id, t, now, 'lease expired', true, r, 'expired')",
                    "redis.call('HINCRBY', task_key(c, id), F.attempt, -1) \
                     t.attempt = tostring((tonumber(t.attempt) or 1) - 1) \
                     fail_attempt(c, id, t, now, 'lease expired', true, r, 'expired')",
                );
            }
        }
    }
    out
}

impl World {
    /// A world for `config`, on a fresh store. `crash_tx` carries crash requests to the
    /// supervisor.
    pub fn new(config: SimConfig, crash_tx: UnboundedSender<String>) -> Arc<World> {
        let vt = VirtualTime::start();
        let store_time = Arc::new(StoreTime {
            vt,
            offset_ms: AtomicI64::new(0),
        });
        let store = Arc::new(MemoryStore::new(store_time.clone()).strict_cluster(true));
        store.track_touched(true);
        let rng = ChaCha12Rng::seed_from_u64(mix(config.seed ^ 0x00fa_0017));
        let patched = patched_sources(config.planted);
        Arc::new(World {
            store,
            vt,
            store_time,
            faults_on: AtomicBool::new(true),
            calls: AtomicU64::new(0),
            library_loaded: AtomicBool::new(false),
            rng: Mutex::new(rng),
            patched,
            crash_tx,
            state: Mutex::new(WorldState {
                stream_last: "0-0".into(),
                ..WorldState::default()
            }),
            config,
        })
    }

    /// A draw in [0, 1) from the run's fault stream.
    pub fn draw(&self) -> f64 {
        self.rng.lock().unwrap().random::<f64>()
    }

    /// A draw in `lo..=hi`.
    pub fn draw_range(&self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        self.rng.lock().unwrap().random_range(lo..=hi)
    }

    /// True with probability `p`, while faults are on.
    pub(crate) fn fault(&self, p: f64) -> bool {
        self.faults_on.load(Ordering::Relaxed) && p > 0.0 && self.draw() < p
    }

    /// Shift the store's clock by `delta_ms`. Forward jumps are summed in the ledger: they
    /// refill rate-limit buckets, so the rate check measures time with them included.
    pub fn jump_store_clock(&self, delta_ms: i64) {
        self.store_time
            .offset_ms
            .fetch_add(delta_ms, Ordering::Relaxed);
        if delta_ms > 0 {
            self.state.lock().unwrap().ledger.forward_jumps_ms += delta_ms as u64;
        }
    }

    /// Append a timeline event.
    pub fn event(&self, actor: &str, kind: &str, task: Option<&str>, details: Value) {
        let line = json!({
            "t_ms": self.vt.elapsed_ms(),
            "actor": actor,
            "kind": kind,
            "task": task,
            "tenant": Value::Null,
            "attempt": Value::Null,
            "details": details,
        });
        self.state.lock().unwrap().timeline.push(line.to_string());
    }

    /// Record an injected fault (counted and put on the timeline).
    pub fn fault_event(&self, actor: &str, kind: &str, task: Option<&str>, details: Value) {
        *self
            .state
            .lock()
            .unwrap()
            .faults
            .entry(kind.to_string())
            .or_default() += 1;
        self.event(actor, kind, task, details);
    }

    /// Start a refusal episode: the store refuses with `word` for `ms` of virtual time.
    pub fn start_refusal(&self, actor: &str, kind: &str, word: Transient, ms: u64) {
        let until_ms = self.vt.elapsed_ms() + ms;
        self.state.lock().unwrap().refusal = Some(Episode { word, until_ms });
        self.fault_event(actor, kind, None, json!({"word": word.word(), "ms": ms}));
    }

    /// The word the store refuses `actor`'s call of `script` with now, if it does: the
    /// episode in progress, or a single refusal drawn with `p_refusal` (among the words that
    /// refuse this script). Only while faults are on.
    fn refusal(&self, actor: &str, script: &str) -> Option<Transient> {
        if !self.faults_on.load(Ordering::Relaxed) {
            return None;
        }
        let now = self.vt.elapsed_ms();
        let episode = self.state.lock().unwrap().refusal;
        let word = match episode.and_then(|e| e.refusal(script, now)) {
            Some(word) => word,
            None if self.fault(self.config.faults.p_refusal) => {
                let words: Vec<Transient> = refusal::INJECTED
                    .into_iter()
                    .filter(|w| refusal::refuses(*w, script))
                    .collect();
                let word = words[self.draw_range(0, words.len() as u64 - 1) as usize];
                self.fault_event(
                    actor,
                    "refusal",
                    None,
                    json!({"script": script, "word": word.word()}),
                );
                word
            }
            None => return None,
        };
        self.state.lock().unwrap().refused_calls += 1;
        Some(word)
    }

    /// Record the first violation; later ones are ignored.
    pub fn violate(&self, what: String) {
        let mut st = self.state.lock().unwrap();
        if st.violation.is_none() {
            let line = json!({
                "t_ms": self.vt.elapsed_ms(), "actor": "checker", "kind": "violation",
                "task": Value::Null, "tenant": Value::Null, "attempt": Value::Null,
                "details": {"message": what},
            });
            st.timeline.push(line.to_string());
            st.violation = Some(what);
        }
    }

    /// The first violation so far.
    pub fn violation(&self) -> Option<String> {
        self.state.lock().unwrap().violation.clone()
    }

    /// Ask the supervisor to crash `worker` now.
    pub fn request_crash(&self, worker: &str) {
        let _ = self.crash_tx.send(worker.to_string());
    }

    /// Run one script call against the store with the run's patches, then do the bookkeeping
    /// and check every invariant. Called by [`ActorStore`] for each delivery of a call.
    pub fn apply(
        &self,
        actor: &str,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Resp {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let before = checker::pre_call(self, script.name, args);
        let reply = match self.patched.get(script.name) {
            Some(src) => self.store.eval_source(src, keys, args),
            None if self.config.planted == PlantedBug::StoreLoadsLibraryOnce
                && orq_lua::functions::by_function(script.name)
                && self.library_loaded.swap(true, Ordering::Relaxed) =>
            {
                let lib = orq_lua::functions::library();
                self.store
                    .fcall(lib.function(script.name), false, keys, args)
            }
            None => self.store.call_sync(script, keys, args),
        };
        self.record_stream(actor);
        checker::post_call(self, actor, script.name, args, &reply, before);
        let read_only = refusal::read_only(script.name);
        if !read_only && self.violation().is_none() {
            if let Err(v) = checker::check_state(self) {
                self.violate(v);
            }
        }
        reply
    }

    /// Put the stream entries appended by the last call on the timeline, attributed to `actor`.
    fn record_stream(&self, actor: &str) {
        let key = orq::keys::QueueKey::Events.of(QUEUE);
        let last = self.state.lock().unwrap().stream_last.clone();
        let reply = self
            .store
            .command(&[b"XRANGE", key.as_bytes(), last.as_bytes(), b"+"]);
        let Resp::Array(entries) = reply else { return };
        let mut lines = Vec::new();
        let mut new_last = last.clone();
        for e in &entries {
            let Some([id, fields]) = e.as_array().map(|a| [&a[0], &a[1]]) else {
                continue;
            };
            let id = id.as_str().unwrap_or_default().to_string();
            if id == last {
                continue;
            }
            let fields = fields.as_array().unwrap_or_default();
            for e in orq::decode::stream_events(&id, fields) {
                let mut details: Map<String, Value> = e
                    .fields
                    .into_iter()
                    .map(|(k, v)| (k, Value::String(v)))
                    .collect();
                details.insert("store_ms".into(), json!(e.ts_ms));
                lines.push(
                    json!({
                        "t_ms": self.vt.elapsed_ms(),
                        "actor": actor,
                        "kind": e.kind,
                        "task": e.task_id,
                        "tenant": e.tenant,
                        "attempt": e.attempt,
                        "details": details,
                    })
                    .to_string(),
                );
            }
            new_last = id;
        }
        let mut st = self.state.lock().unwrap();
        st.timeline.extend(lines);
        st.stream_last = new_last;
    }

    /// Forget the stream position (after a lossy restart rolled the stream back).
    pub fn reset_stream_position(&self) {
        let key = orq::keys::QueueKey::Events.of(QUEUE);
        let reply = self.store.command(&[b"XRANGE", key.as_bytes(), b"-", b"+"]);
        let last = reply
            .as_array()
            .and_then(|a| a.last())
            .and_then(|e| e.as_array())
            .and_then(|e| e.first())
            .and_then(|id| id.as_str())
            .unwrap_or("0-0")
            .to_string();
        self.state.lock().unwrap().stream_last = last;
    }
}

/// One actor's view of the store: every call goes through the fault injector.
pub struct ActorStore {
    /// The world.
    pub world: Arc<World>,
    /// Who is calling ("w1", "s1", "client").
    pub actor: String,
}

impl ActorStore {
    /// One call through the fault injector: what the caller gets, and how the call ended for
    /// check 9 ([`reports`]).
    async fn deliver(
        &self,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> (Result<Resp, StoreError>, CallEnd) {
        let w = &self.world;
        let started_ms = w.vt.elapsed_ms();
        tokio::time::sleep(Duration::from_millis(CALL_LATENCY_MS)).await;
        let stall = w.state.lock().unwrap().stalls.get(&self.actor).copied();
        if let Some(until) = stall {
            w.vt.sleep_until_ms(until).await;
        }
        let f = &w.config.faults;
        let p_slow = if reports::REPORT_SCRIPTS.contains(&script.name) {
            f.p_slow_call.max(f.p_slow_report)
        } else {
            f.p_slow_call
        };
        if w.fault(p_slow) {
            let lease_ms = w.config.lease_ms;
            let ms = w.draw_range(lease_ms, f.stall_ms_max.max(lease_ms));
            w.fault_event(
                &self.actor,
                "slow_call",
                None,
                json!({"script": script.name, "ms": ms}),
            );
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        reports::check(w);
        if let Some(word) = w.refusal(&self.actor, script.name) {
            // Refused before it runs, as Redis refuses it: the error reply of its word.
            let reply = Resp::Error(refusal::reply_text(word).into());
            return (Ok(reply), CallEnd::Refused);
        }
        if w.fault(f.p_fail_before) {
            w.fault_event(
                &self.actor,
                "fail_before",
                None,
                json!({"script": script.name}),
            );
            let e = StoreError("injected: connection refused".into());
            return (Err(e), CallEnd::Refused);
        }
        w.state.lock().unwrap().call_started_ms = started_ms;
        let reply = w.apply(&self.actor, script, keys, args);
        if w.fault(f.p_duplicate) {
            w.fault_event(
                &self.actor,
                "duplicate",
                None,
                json!({"script": script.name}),
            );
            let _ = w.apply(&self.actor, script, keys, args);
        }
        if w.fault(f.p_lost_reply) {
            w.fault_event(
                &self.actor,
                "lost_reply",
                None,
                json!({"script": script.name}),
            );
            let e = StoreError("injected: reply lost".into());
            return (Err(e), CallEnd::ReplyLost);
        }
        checker::delivered(w, script.name, args, &reply);
        (Ok(reply), CallEnd::Reached)
    }
}

#[async_trait]
impl Store for ActorStore {
    async fn eval(
        &self,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<Resp, StoreError> {
        let (w, actor) = (&self.world, self.actor.as_str());
        reports::call_started(w, actor, script.name, args);
        let (reply, end) = self.deliver(script, keys, args).await;
        reports::call_ended(w, actor, script.name, args, end);
        reply
    }
}

/// The handler of simulated tasks: runs for a drawn time, performs its side effect (recorded
/// with its lease token), may ask for its worker to crash before or after the effect, and
/// succeeds or fails as drawn. Every draw is a hash of (seed, task, epoch): the same lease of
/// the same task always behaves the same.
pub struct SimHandler {
    /// The world.
    pub world: Arc<World>,
}

#[async_trait]
impl Handler for SimHandler {
    async fn handle(&self, ctx: TaskContext) -> Result<Value, HandlerError> {
        let w = &self.world;
        let c = &w.config;
        let lease = ctx.task.lease.clone().unwrap_or(orq::Lease {
            worker: String::new(),
            expires_at_ms: 0,
            epoch: 0,
            token: String::new(),
        });
        let h = mix(c.seed ^ fnv(&ctx.task.id) ^ mix(ctx.epoch));
        let faults = || w.faults_on.load(Ordering::Relaxed);
        // Every attempt sees the trace context the task was submitted with.
        let k = serde_json::from_str::<Value>(&ctx.task.payload)
            .ok()
            .and_then(|p| p["n"].as_u64());
        if let Some(k) = k {
            let want = submitted_trace(c.seed, k);
            if ctx.task.trace != want {
                w.violate(format!(
                    "task {} (n {k}) attempt {}: trace context {:?}, submitted with {:?}",
                    ctx.task.id, ctx.attempt, ctx.task.trace, want
                ));
            }
        }
        if faults() && unit(mix(h ^ 1)) < c.faults.p_crash_before_effect {
            w.fault_event(
                &lease.worker,
                "crash_request",
                Some(&ctx.task.id),
                json!({"point": "before_effect"}),
            );
            w.request_crash(&lease.worker);
            std::future::pending::<()>().await;
        }
        let run_ms = mix(h ^ 2) % c.handler_ms_max.max(1);
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => return Err(HandlerError::retryable("cancelled")),
            _ = tokio::time::sleep(Duration::from_millis(run_ms)) => {}
        }
        checker::side_effect(w, &ctx.task.id, &lease.token, &lease.worker);
        if faults() && unit(mix(h ^ 3)) < c.faults.p_crash_after_effect {
            w.fault_event(
                &lease.worker,
                "crash_request",
                Some(&ctx.task.id),
                json!({"point": "after_effect"}),
            );
            w.request_crash(&lease.worker);
            std::future::pending::<()>().await;
        }
        let u = unit(mix(h ^ 4));
        if u < c.p_permanent {
            Err(HandlerError::permanent(format!(
                "planned permanent failure (epoch {})",
                ctx.epoch
            )))
        } else if u < c.p_permanent + c.p_transient {
            Err(HandlerError::retryable(format!(
                "planned transient failure (epoch {})",
                ctx.epoch
            )))
        } else {
            Ok(json!({"worker": lease.worker, "epoch": ctx.epoch}))
        }
    }
}

/// The trace context the client submits task `k` with (a third of the tasks; none for the rest):
/// a hash of (seed, k), so the handler knows what every attempt of the task must see. Its
/// tracestate has two members, so the stored form holds commas (enqueue.lua).
pub fn submitted_trace(seed: u64, k: u64) -> Option<orq::TraceContext> {
    let h = mix(seed ^ 0x7a5c ^ k);
    if mix(h ^ 6) % 3 != 0 {
        return None;
    }
    let (a, b, span) = (mix(h ^ 7) | 1, mix(h ^ 8), mix(h ^ 9) | 1);
    orq::TraceContext::parse(
        &format!("00-{a:016x}{b:016x}-{span:016x}-01"),
        Some(&format!("sim=k{k},seed={seed:x}")),
    )
}

/// The draws that fix a worker's clock: `(offset ms, drift ppm)`.
pub fn worker_clock(world: &Arc<World>, name: &str) -> SkewedClock {
    let f = &world.config.faults;
    let h = mix(world.config.seed ^ fnv(name));
    let span = |max: u64, h: u64| -> i64 {
        if max == 0 {
            0
        } else {
            (h % (2 * max + 1)) as i64 - max as i64
        }
    };
    SkewedClock {
        vt: world.vt,
        offset_ms: span(f.clock_offset_ms_max, mix(h ^ 1)),
        drift_ppm: span(f.drift_ppm_max, mix(h ^ 2)),
    }
}

/// The ids of tasks the client saw accepted, with the virtual ms of acceptance.
pub type Accepted = BTreeMap<String, u64>;

/// A set of task ids.
pub type Ids = BTreeSet<String>;
