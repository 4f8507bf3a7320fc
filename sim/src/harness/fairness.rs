//! The fairness scenario runner: a fixed pool of worker slots that lease and complete tasks on a
//! `MemoryStore` whose `ManualClock` the runner moves from one event to the next, plus the
//! measures the tenancy tests judge a run by (waits, shares over windows, Jain's index, token
//! bucket windows). No tokio and no sleeping: a 100,000-task scenario runs in about 15 s in a
//! debug build, nearly all of it the enqueue script itself running in the model (~0.1 ms a task).
//!
//! One step, at virtual time `t` (the earliest pending event):
//! 1. slots whose service ends at `t` complete their task (`complete`); a slot drawn to crash
//!    drops its task instead (the lease is left to expire, and a later `lease` call reaps it) and
//!    comes back after the scenario's downtime;
//! 2. actions scheduled at `t` run in the order they were added: submits (through
//!    `orq::Client`, in batches of up to 1,000), pause, resume, queue and tenant settings;
//! 3. if a slot is free, `lease` is called with n = the free slots (at most 100 per call, repeated
//!    while calls fill their n); each leased task takes a free slot and a service time drawn from
//!    the seed.
//!
//! A lease call that fills fewer slots than it asked for sets a wake-up: at its `next_ms` hint
//! (the next scheduled task or rate-limit token), or `poll_ms` later when it has none (paused, or
//! only in-flight caps hold work back). A dropped lease sets a wake-up just after its deadline.
//!
//! Determinism: one thread; every draw from one ChaCha12 stream seeded by the scenario's seed;
//! ordered maps only; the store's clock is set by the runner, never read from the machine.

use super::config::EPOCH_MS;
use crate::{ManualClock, MemoryStore};
use futures::executor::block_on;
use futures::future::BoxFuture;
use orq::task::stored;
use orq::{ops, Client, Entropy, Error, Store, TaskSpec, TenantLimits};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha12Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The queue every scenario uses.
pub const QUEUE: &str = "fair";
/// The handler type of scenario tasks (nothing runs them: a slot only waits its service time).
pub const TASK_TYPE: &str = "work";
/// The worker id the slots lease under.
pub const WORKER: &str = "slots";
/// Most steps one [`Runner::run_until`] takes: a bound on every scenario's length.
pub const STEPS_MAX: u64 = 10_000_000;

/// What a scenario's worker pool looks like. Times are virtual ms.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Seed of every draw (service times, crashes, token bits).
    pub seed: u64,
    /// Worker slots: the most tasks in service at once.
    pub slots: usize,
    /// Shortest service time.
    pub service_ms_min: u64,
    /// Longest service time (`S_max` in the tests' bounds).
    pub service_ms_max: u64,
    /// How long free slots wait before asking again when a lease call came back short without a
    /// hint; 0 = only at the next event.
    pub poll_ms: u64,
    /// Probability that a slot crashes while serving a task (it never reports; the lease
    /// expires).
    pub p_crash: f64,
    /// How long a crashed slot stays down.
    pub downtime_ms: u64,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            seed: 1,
            slots: 8,
            service_ms_min: 50,
            service_ms_max: 150,
            poll_ms: 100,
            p_crash: 0.0,
            downtime_ms: 0,
        }
    }
}

/// Something the runner does at a scheduled virtual time (before that time's lease calls).
#[derive(Debug, Clone)]
pub enum Action {
    /// Submit these tasks (their queue is forced to [`QUEUE`]); batches of up to 1,000.
    Submit(Vec<TaskSpec>),
    /// Pause leasing.
    Pause,
    /// Resume leasing.
    Resume,
    /// Set the queue's starvation-bound step (0 = strict priority).
    AgingStep(u64),
    /// Change a tenant's share and limits.
    Tenant(String, TenantLimits),
}

/// One lease call.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseCall {
    /// Virtual ms of the call.
    pub t_ms: u64,
    /// Tasks asked for (free slots, at most 100).
    pub asked: usize,
    /// Tasks leased.
    pub leased: usize,
    /// The reply's hint, in virtual ms: when to ask again.
    pub next_ms: Option<u64>,
    /// Whether the runner had paused the queue (and not resumed it) when it called.
    pub paused: bool,
}

/// One task leased.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseRecord {
    /// Virtual ms of the lease.
    pub t_ms: u64,
    /// Index of the lease call in [`Runner::calls`].
    pub call: usize,
    /// Task id.
    pub id: String,
    /// Tenant.
    pub tenant: String,
    /// Priority.
    pub priority: u8,
    /// Attempt this lease starts (1 for the first).
    pub attempt: u32,
    /// Position of the task's submit among all submits (0-based).
    pub submit_seq: u64,
    /// Virtual ms of the submit.
    pub submitted_ms: u64,
    /// Virtual ms of the first lease call at or after the submit: the first moment a slot was
    /// free for the task (the runner calls `lease` whenever a slot is free).
    pub free_at_ms: u64,
    /// The slot that took it.
    pub slot: usize,
}

impl LeaseRecord {
    /// The task's wait for a free worker: lease time minus the first moment at or after its
    /// submit when a slot was free.
    pub fn wait_for_free_slot_ms(&self) -> u64 {
        self.t_ms - self.free_at_ms
    }
}

#[derive(Debug, Clone)]
enum Slot {
    Idle,
    Busy {
        id: String,
        token: String,
        done_ms: u64,
        crash: bool,
    },
    Down {
        until_ms: u64,
    },
}

/// The client's clock: the runner's manual clock. The client only reads it (task ids).
struct RunnerClock(Arc<ManualClock>);

impl orq::Clock for RunnerClock {
    fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }

    fn sleep(&self, _ms: u64) -> BoxFuture<'static, ()> {
        panic!("the fairness runner's client must not sleep: virtual time moves between steps")
    }
}

/// A fairness scenario in progress. See the module documentation for what one step does.
pub struct Runner {
    scenario: Scenario,
    clock: Arc<ManualClock>,
    store: Arc<MemoryStore>,
    client: Client,
    rng: ChaCha12Rng,
    now_ms: u64,
    actions: BTreeMap<(u64, u64), Action>,
    action_seq: u64,
    slots: Vec<Slot>,
    wakes: BTreeSet<u64>,
    submitted: BTreeMap<String, (u64, u64)>,
    refused: u64,
    completed: u64,
    stale: u64,
    crashes: u64,
    paused: bool,
    calls: Vec<LeaseCall>,
    leases: Vec<LeaseRecord>,
    leased_by_tenant: BTreeMap<String, u64>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("now_ms", &self.now_ms)
            .field("calls", &self.calls.len())
            .field("leases", &self.leases.len())
            .finish_non_exhaustive()
    }
}

/// A task of `tenant` at `priority` for a scenario: retries enough for any number of crashed
/// slots (100), the shortest lease (1 s, so a crashed slot's lease expires soon) and a fixed
/// 100 ms backoff.
pub fn task(tenant: &str, priority: u8) -> TaskSpec {
    TaskSpec::new("{}")
        .queue(QUEUE)
        .tenant(tenant)
        .task_type(TASK_TYPE)
        .priority(priority)
        .max_retries(100)
        .lease_ms(orq::task::LEASE_MS_MIN)
        .backoff(orq::Backoff {
            initial_ms: 100,
            multiplier: 1.0,
            max_ms: 100,
            jitter: 0.0,
        })
}

/// `n` tasks of `tenant` at priority 0.
pub fn tasks(tenant: &str, n: usize) -> Vec<TaskSpec> {
    (0..n).map(|_| task(tenant, 0)).collect()
}

impl Runner {
    /// A runner at virtual time 0 on an empty store.
    pub fn new(scenario: Scenario) -> Runner {
        assert!(scenario.slots > 0, "a scenario needs a slot");
        assert!(scenario.service_ms_min <= scenario.service_ms_max);
        let clock = Arc::new(ManualClock::from_ms(EPOCH_MS));
        let store = Arc::new(MemoryStore::new(clock.clone()).strict_cluster(true));
        let entropy = Arc::new(Entropy::from_seed(scenario.seed ^ 0x6661_6972));
        let client = Client::new(
            store.clone() as Arc<dyn Store>,
            Arc::new(RunnerClock(clock.clone())),
            entropy,
        );
        Runner {
            rng: ChaCha12Rng::seed_from_u64(scenario.seed),
            slots: vec![Slot::Idle; scenario.slots],
            scenario,
            clock,
            store,
            client,
            now_ms: 0,
            actions: BTreeMap::new(),
            action_seq: 0,
            wakes: BTreeSet::new(),
            submitted: BTreeMap::new(),
            refused: 0,
            completed: 0,
            stale: 0,
            crashes: 0,
            paused: false,
            calls: Vec::new(),
            leases: Vec::new(),
            leased_by_tenant: BTreeMap::new(),
        }
    }

    /// Schedule `action` at virtual time `t_ms` (not in the past).
    pub fn at(&mut self, t_ms: u64, action: Action) {
        assert!(t_ms >= self.now_ms, "action scheduled in the past");
        self.actions.insert((t_ms, self.action_seq), action);
        self.action_seq += 1;
    }

    /// The scenario.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// The store (for audits between steps).
    pub fn store(&self) -> &Arc<MemoryStore> {
        &self.store
    }

    /// The client the runner submits with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Current virtual time (ms since the run started).
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// Every lease call so far, in order.
    pub fn calls(&self) -> &[LeaseCall] {
        &self.calls
    }

    /// Every lease so far, in order (within one call, in the order the call returned them).
    pub fn leases(&self) -> &[LeaseRecord] {
        &self.leases
    }

    /// Leases of `tenant` so far.
    pub fn leased(&self, tenant: &str) -> u64 {
        self.leased_by_tenant.get(tenant).copied().unwrap_or(0)
    }

    /// Tasks accepted so far.
    pub fn submitted(&self) -> u64 {
        self.submitted.len() as u64
    }

    /// Submit batches refused by `max_queued` (nothing of a refused batch is stored).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Tasks completed by a slot.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Completions refused as stale (the lease had expired first).
    pub fn stale_completes(&self) -> u64 {
        self.stale
    }

    /// Slots that crashed while serving.
    pub fn crashes(&self) -> u64 {
        self.crashes
    }

    /// True when every scheduled action has run and every accepted task was completed by a
    /// slot (scenarios whose tasks never run out of retries end this way).
    pub fn all_completed(&self) -> bool {
        self.actions.is_empty() && self.completed == self.submitted.len() as u64
    }

    /// Live leases per tenant as the store holds them: tasks whose status is `leased`, found
    /// through the queue's lease index (crashed slots' leases count until they are reaped).
    pub fn live_leases_by_tenant(&self) -> BTreeMap<String, u64> {
        let prefix = orq::keys::queue_prefix(QUEUE);
        self.store.read(|db| {
            let mut out = BTreeMap::new();
            let Some(crate::Value::ZSet(leases)) = db.get(format!("{prefix}leases").as_bytes())
            else {
                return out;
            };
            for (id, _) in leases.iter() {
                let mut key = format!("{prefix}task:").into_bytes();
                key.extend_from_slice(id);
                if let Some(crate::Value::Hash(h)) = db.get(&key) {
                    let field = |f: &[u8]| {
                        h.get(f)
                            .map(|v| String::from_utf8_lossy(v).into_owned())
                            .unwrap_or_default()
                    };
                    if field(stored::status.as_bytes()) == "leased" {
                        *out.entry(field(stored::tenant.as_bytes())).or_default() += 1;
                    }
                }
            }
            out
        })
    }

    /// The next event's virtual time, if anything is pending.
    fn next_event_ms(&self) -> Option<u64> {
        let mut next = self.actions.keys().next().map(|&(t, _)| t);
        let mut take = |t: u64| next = Some(next.map_or(t, |n: u64| n.min(t)));
        for s in &self.slots {
            match s {
                Slot::Busy { done_ms, .. } => take(*done_ms),
                Slot::Down { until_ms } => take(*until_ms),
                Slot::Idle => {}
            }
        }
        if let Some(&w) = self.wakes.iter().next() {
            take(w);
        }
        next
    }

    fn set_time(&mut self, t_ms: u64) {
        assert!(t_ms >= self.now_ms, "virtual time never goes back");
        self.now_ms = t_ms;
        self.clock.set_ms(EPOCH_MS + t_ms);
    }

    /// Run steps until `stop` says so (it sees the runner after every step), nothing is pending,
    /// or virtual time would pass `horizon_ms`. Returns true when `stop` ended it.
    pub fn run_until(&mut self, horizon_ms: u64, mut stop: impl FnMut(&Runner) -> bool) -> bool {
        for _ in 0..STEPS_MAX {
            if stop(self) {
                return true;
            }
            match self.next_event_ms() {
                Some(t) if t <= horizon_ms => self.step(t),
                _ => return false,
            }
        }
        panic!("scenario ran {STEPS_MAX} steps without ending");
    }

    /// One step at virtual time `t_ms`.
    fn step(&mut self, t_ms: u64) {
        self.set_time(t_ms);
        while self.wakes.first().is_some_and(|&w| w <= t_ms) {
            self.wakes.pop_first();
        }
        // 1. Service ends and restarts, in slot order.
        for i in 0..self.slots.len() {
            match self.slots[i].clone() {
                Slot::Busy {
                    id,
                    token,
                    done_ms,
                    crash,
                } if done_ms <= t_ms => {
                    if crash {
                        self.crashes += 1;
                        self.slots[i] = Slot::Down {
                            until_ms: t_ms + self.scenario.downtime_ms,
                        };
                    } else {
                        self.slots[i] = Slot::Idle;
                        match block_on(ops::complete(&*self.store, QUEUE, &id, &token, "null")) {
                            Ok(_) => self.completed += 1,
                            Err(Error::Stale { .. }) => self.stale += 1,
                            Err(e) => panic!("complete of {id} failed: {e}"),
                        }
                    }
                }
                Slot::Down { until_ms } if until_ms <= t_ms => self.slots[i] = Slot::Idle,
                _ => {}
            }
        }
        // 2. Actions due now, in the order they were added.
        while let Some(entry) = self.actions.first_entry() {
            if entry.key().0 > t_ms {
                break;
            }
            let action = entry.remove();
            self.act(action);
        }
        // 3. Lease for the free slots.
        self.lease_free_slots();
    }

    fn act(&mut self, action: Action) {
        match action {
            Action::Submit(specs) => {
                for chunk in specs.chunks(orq::task::BATCH_MAX) {
                    let chunk: Vec<TaskSpec> =
                        chunk.iter().map(|s| s.clone().queue(QUEUE)).collect();
                    match block_on(self.client.submit_batch(chunk)) {
                        Ok(done) => {
                            for d in done {
                                let seq = self.submitted.len() as u64;
                                self.submitted
                                    .entry(d.task.id)
                                    .or_insert((seq, self.now_ms));
                            }
                        }
                        Err(Error::Limited { .. }) => self.refused += 1,
                        Err(e) => panic!("submit failed: {e}"),
                    }
                }
            }
            Action::Pause | Action::Resume => {
                let pause = matches!(action, Action::Pause);
                block_on(self.client.configure_queue(QUEUE, Some(pause), None))
                    .expect("pause / resume");
                self.paused = pause;
            }
            Action::AgingStep(step) => {
                block_on(self.client.configure_queue(QUEUE, None, Some(step)))
                    .expect("set aging_step_ms");
            }
            Action::Tenant(tenant, limits) => {
                block_on(self.client.configure_tenant(QUEUE, &tenant, &limits))
                    .expect("configure tenant");
            }
        }
    }

    fn lease_free_slots(&mut self) {
        loop {
            let free: Vec<usize> = (0..self.slots.len())
                .filter(|&i| matches!(self.slots[i], Slot::Idle))
                .collect();
            if free.is_empty() {
                return;
            }
            let n = free.len().min(ops::LEASE_BATCH_MAX);
            let bits = format!("{:016x}", self.rng.random::<u64>());
            let seed: f64 = self.rng.random();
            let reply = block_on(ops::lease(&*self.store, QUEUE, WORKER, n, &bits, seed))
                .expect("lease never fails in a scenario");
            assert_eq!(
                reply.now_ms,
                EPOCH_MS + self.now_ms,
                "the store read the runner's clock"
            );
            let call = self.calls.len();
            let next_ms = reply.next_ms.map(|t| t.saturating_sub(EPOCH_MS));
            self.calls.push(LeaseCall {
                t_ms: self.now_ms,
                asked: n,
                leased: reply.tasks.len(),
                next_ms,
                paused: self.paused,
            });
            assert!(reply.tasks.len() <= n, "lease returned more than asked");
            for (task, &slot) in reply.tasks.iter().zip(&free) {
                let lease = task.lease.clone().expect("a leased task carries its lease");
                let (submit_seq, submitted_ms) = self
                    .submitted
                    .get(&task.id)
                    .copied()
                    .expect("leased a task the runner never submitted");
                // The first lease call at or after the submit: calls are in time order.
                let first = self.calls.partition_point(|c| c.t_ms < submitted_ms);
                let free_at_ms = self.calls[first].t_ms;
                let service = self
                    .rng
                    .random_range(self.scenario.service_ms_min..=self.scenario.service_ms_max);
                let crash =
                    self.scenario.p_crash > 0.0 && self.rng.random::<f64>() < self.scenario.p_crash;
                if crash {
                    // The lease is left to expire; a lease call just after its deadline reaps it.
                    self.wakes
                        .insert(lease.expires_at_ms.saturating_sub(EPOCH_MS) + 1);
                }
                self.slots[slot] = Slot::Busy {
                    id: task.id.clone(),
                    token: lease.token.clone(),
                    done_ms: self.now_ms + service,
                    crash,
                };
                *self
                    .leased_by_tenant
                    .entry(task.tenant.clone())
                    .or_default() += 1;
                self.leases.push(LeaseRecord {
                    t_ms: self.now_ms,
                    call,
                    id: task.id.clone(),
                    tenant: task.tenant.clone(),
                    priority: task.priority,
                    attempt: task.attempt,
                    submit_seq,
                    submitted_ms,
                    free_at_ms,
                    slot,
                });
            }
            if reply.tasks.len() < n {
                // Short: wake at the hint, or poll.
                let wake = match next_ms {
                    Some(t) if t > self.now_ms => Some(t),
                    Some(_) => Some(self.now_ms + 1),
                    None if self.scenario.poll_ms > 0 => Some(self.now_ms + self.scenario.poll_ms),
                    None => None,
                };
                if let Some(w) = wake {
                    self.wakes.insert(w);
                }
                return;
            }
        }
    }
}

/// Per window of `w` consecutive entries of `seq` (tenant indices), the largest deviation of a
/// tenant's fraction of the window from its share in `shares`. Returns the worst over all
/// windows, with the window's first index and the tenant. `None` when `seq` is shorter than `w`.
pub fn worst_share_deviation(
    seq: &[usize],
    shares: &[f64],
    w: usize,
) -> Option<(f64, usize, usize)> {
    if w == 0 || seq.len() < w {
        return None;
    }
    let mut counts = vec![0i64; shares.len()];
    for &t in &seq[..w] {
        counts[t] += 1;
    }
    let mut worst = (0.0f64, 0usize, 0usize);
    for start in 0..=seq.len() - w {
        if start > 0 {
            counts[seq[start - 1]] -= 1;
            counts[seq[start + w - 1]] += 1;
        }
        for (t, &c) in counts.iter().enumerate() {
            let d = (c as f64 / w as f64 - shares[t]).abs();
            if d > worst.0 {
                worst = (d, start, t);
            }
        }
    }
    Some(worst)
}

/// The smallest window `w` in `1..=w_max` such that every window size from `w` to `w_max` keeps
/// every tenant within `tolerance` of its share ([`worst_share_deviation`]).
pub fn smallest_fair_window(
    seq: &[usize],
    shares: &[f64],
    tolerance: f64,
    w_max: usize,
) -> Option<usize> {
    let mut smallest = None;
    for w in (1..=w_max).rev() {
        match worst_share_deviation(seq, shares, w) {
            Some((d, _, _)) if d <= tolerance => smallest = Some(w),
            _ => break,
        }
    }
    smallest
}

/// Jain's fairness index of `x`: (Σx)² / (n·Σx²), 1 when all are equal, 1/n when one has all.
pub fn jain_index(x: &[u64]) -> f64 {
    let sum: f64 = x.iter().map(|&v| v as f64).sum();
    let sq: f64 = x.iter().map(|&v| (v as f64) * (v as f64)).sum();
    if sq == 0.0 {
        return 1.0;
    }
    sum * sum / (x.len() as f64 * sq)
}

/// The lowest Jain's index over every window of `w` consecutive entries of `seq` (tenant indices
/// below `n`), with the window's first index.
pub fn worst_jain_index(seq: &[usize], n: usize, w: usize) -> Option<(f64, usize)> {
    if w == 0 || seq.len() < w {
        return None;
    }
    let mut counts = vec![0u64; n];
    for &t in &seq[..w] {
        counts[t] += 1;
    }
    let mut worst = (f64::INFINITY, 0);
    for start in 0..=seq.len() - w {
        if start > 0 {
            counts[seq[start - 1]] -= 1;
            counts[seq[start + w - 1]] += 1;
        }
        let j = jain_index(&counts);
        if j < worst.0 {
            worst = (j, start);
        }
    }
    Some(worst)
}

/// The token-bucket bound, checked one lease at a time: over every window `[t_i, t_j]` of a
/// tenant's leases, `leases ≤ burst + rate_per_s × (t_j − t_i) / 1000`.
///
/// With `f(k) = k − rate × t_k / 1000` for the k-th lease, the bound for leases i..=j is
/// `f(j) − f(i) ≤ burst − 1`, so keeping the running minimum of `f` checks every window in O(1)
/// per lease. Times must not decrease.
#[derive(Debug, Clone, PartialEq)]
pub struct RateWindow {
    /// Tokens per second.
    pub rate_per_s: f64,
    /// Bucket size.
    pub burst: f64,
    count: u64,
    last_ms: u64,
    f_min: f64,
    /// The largest `leases − (burst + rate × t)` over every window so far (≤ 0 within the bound).
    pub excess_max: f64,
    /// The window where it happened: (first lease ms, last lease ms, leases).
    pub excess_window: (u64, u64, u64),
    f_min_at: (u64, u64),
}

/// Slack for floating-point rounding in the token arithmetic (leases).
pub const RATE_EPSILON: f64 = 1e-6;

impl RateWindow {
    /// A check for a bucket of `burst` tokens refilled at `rate_per_s`.
    pub fn new(rate_per_s: f64, burst: f64) -> RateWindow {
        RateWindow {
            rate_per_s,
            burst,
            count: 0,
            last_ms: 0,
            f_min: f64::INFINITY,
            excess_max: f64::NEG_INFINITY,
            excess_window: (0, 0, 0),
            f_min_at: (0, 0),
        }
    }

    /// Record a lease at `t_ms`; returns the excess of the worst window ending at it (≤ 0 within
    /// the bound; > [`RATE_EPSILON`] is a violation).
    pub fn record(&mut self, t_ms: u64) -> f64 {
        assert!(
            self.count == 0 || t_ms >= self.last_ms,
            "lease times must not decrease"
        );
        self.last_ms = t_ms;
        self.count += 1;
        let f = |k: u64, t: u64| k as f64 - self.rate_per_s * t as f64 / 1000.0;
        // A window starting at this lease: f(i) for i = this lease.
        let fi = f(self.count, t_ms);
        if fi < self.f_min {
            self.f_min = fi;
            self.f_min_at = (self.count, t_ms);
        }
        let excess = fi - self.f_min + 1.0 - self.burst;
        if excess > self.excess_max {
            self.excess_max = excess;
            self.excess_window = (self.f_min_at.1, t_ms, self.count - self.f_min_at.0 + 1);
        }
        excess
    }

    /// Leases recorded.
    pub fn count(&self) -> u64 {
        self.count
    }
}
