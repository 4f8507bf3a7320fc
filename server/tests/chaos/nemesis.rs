//! The nemesis: from a seed, a sequence of faults drawn at random gaps (0.3–2.5 s) during the
//! fault phase, each run in its own thread on a target no other fault holds (else it is
//! skipped; the draws do not depend on that, so a seed always draws the same sequence). Faults
//! on the store come one at a time (on a cluster: one at a time on all nodes together), each
//! followed by [`STORE_QUIET`]. Every fault that was injected leaves a [`Window`]: kind, target
//! incarnation, start and end (wall ms), and on a cluster the queues whose primary it hit, which
//! the checker uses to explain a task that ran twice. Between faults the nemesis restarts any
//! process (or cluster node) that exited on its own and records that as an unexpected exit.
//!
//! On a cluster (cluster mode) the faults on the store act on one node: the primary of the slot
//! of the queue the draw names (`CLIENT KILL`, `CLIENT PAUSE`, `DEBUG SLEEP` of at most
//! [`DEBUG_SLEEP_MS_MAX_CLUSTER`], OOM), plus `primary_kill` and `replica_kill`; `redis_kill`
//! (one server killed and restarted before anyone notices) is left out: on a cluster a primary
//! down for long is `primary_kill`, and one back within the node timeout adds nothing to it.

use crate::procs::{self, lock, now_ms, Cluster, Mode, Nodes, Slot, Store, CLUSTER_SETTLE_TIMEOUT};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// SplitMix64 (Steele, Lea and Flood): a small seeded generator, enough to draw faults.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in `lo..hi` (`hi > lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo)
    }
}

/// SplitMix64's output function: a bijective mix of 64 bits.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// SIGKILL a worker, restart it (a new incarnation) after 0.1–1.5 s.
    WorkerKill,
    /// SIGSTOP a worker for longer than a lease, then SIGCONT.
    WorkerStop,
    /// SIGKILL a scheduler, restart it after 0.1–2 s.
    SchedulerKill,
    /// SIGKILL the API, restart it on the same port after 0.1–1 s.
    ApiKill,
    /// SIGKILL Redis, restart it after 0.1–1 s on the same port and AOF directory.
    RedisKill,
    /// Cluster: SIGKILL the primary of a queue's slot; once the cluster has promoted its
    /// replica, start it again (same port, `nodes.conf` and AOF: it rejoins as a replica of the
    /// promoted one); ends when the cluster is whole again (the new replica synced).
    PrimaryKill,
    /// Cluster: SIGKILL the replica of a queue's primary, restart it after 0.1–1 s; ends when
    /// it has synced again. Meanwhile, under `--wait-replicas 1`, that primary's recorded writes
    /// are refused (NOREPLICAS) and resent; leases and heartbeats go on.
    ReplicaKill,
    /// `CLIENT KILL TYPE normal`: every client connection is dropped.
    ClientKill,
    /// `CLIENT PAUSE` for 0.2–1.5 s.
    ClientPause,
    /// `DEBUG SLEEP` for 0.2–1.5 s: Redis answers nobody.
    DebugSleep,
    /// `maxmemory` at the memory in use (or 1 byte) under `noeviction` for 1.5 s: writes are
    /// refused with OOM.
    Oom,
}

impl Kind {
    /// Every kind, in report order.
    pub const ALL: [Kind; 11] = [
        Kind::WorkerKill,
        Kind::WorkerStop,
        Kind::SchedulerKill,
        Kind::ApiKill,
        Kind::RedisKill,
        Kind::PrimaryKill,
        Kind::ReplicaKill,
        Kind::ClientKill,
        Kind::ClientPause,
        Kind::DebugSleep,
        Kind::Oom,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::WorkerKill => "worker_kill",
            Kind::WorkerStop => "worker_stop",
            Kind::SchedulerKill => "scheduler_kill",
            Kind::ApiKill => "api_kill",
            Kind::RedisKill => "redis_kill",
            Kind::PrimaryKill => "primary_kill",
            Kind::ReplicaKill => "replica_kill",
            Kind::ClientKill => "client_kill",
            Kind::ClientPause => "client_pause",
            Kind::DebugSleep => "debug_sleep",
            Kind::Oom => "oom",
        }
    }

    /// Relative frequency of the kind in the draw of `mode` (0: never drawn). The single
    /// mode's weights are those of the run before the cluster mode existed, so its seeds draw
    /// the same sequences.
    fn weight(self, mode: Mode) -> u64 {
        match (self, mode) {
            (Kind::WorkerKill, _) => 4,
            (Kind::WorkerStop, _) => 1,
            (Kind::SchedulerKill | Kind::ApiKill, _) => 2,
            (Kind::RedisKill, Mode::Single) => 2,
            (Kind::RedisKill, Mode::Cluster) => 0,
            (Kind::PrimaryKill | Kind::ReplicaKill, Mode::Single) => 0,
            (Kind::PrimaryKill, Mode::Cluster) => 4,
            (Kind::ReplicaKill, Mode::Cluster) => 2,
            (Kind::ClientKill | Kind::ClientPause | Kind::DebugSleep, _) => 2,
            (Kind::Oom, _) => 3,
        }
    }

    /// The kinds `mode` draws, in report order.
    pub fn of(mode: Mode) -> Vec<Kind> {
        Kind::ALL
            .into_iter()
            .filter(|k| k.weight(mode) > 0)
            .collect()
    }

    /// A fault of the store that may delay work but must never make a task run twice: a
    /// refusal, stall or dropped connection shorter than a heartbeat interval, or (cluster) a
    /// replica down, which refuses only the writes that wait for it, never a heartbeat.
    pub fn is_short_store_fault(self) -> bool {
        matches!(
            self,
            Kind::ClientKill | Kind::ClientPause | Kind::DebugSleep | Kind::Oom | Kind::ReplicaKill
        )
    }

    /// A fault on the store (one at a time, each followed by [`STORE_QUIET`]).
    pub fn on_store(self) -> bool {
        matches!(self, Kind::RedisKill | Kind::PrimaryKill) || self.is_short_store_fault()
    }
}

/// The longest `DEBUG SLEEP` on a cluster node (ms): well under the fixture's node timeout
/// (2 s), so that a stalled primary is never failed over (that would be a `primary_kill`).
pub const DEBUG_SLEEP_MS_MAX_CLUSTER: u64 = 1_000;

/// How long a cluster may take to promote the replica of a killed primary (node timeout 2 s,
/// then the election; generous for a loaded machine).
const PROMOTION_TIMEOUT: Duration = Duration::from_secs(60);

/// After each fault on Redis, no other fault on Redis for this long: longer than the workers'
/// heartbeat interval (at most 2 s), so that each refusal stands alone and a heartbeat or an
/// outcome retry gets through between two of them. Back to back, short refusals would add up
/// to an outage as long as a lease, which may legitimately make a task run again.
pub const STORE_QUIET: Duration = Duration::from_secs(3);

/// One injected fault.
#[derive(Debug, Clone)]
pub struct Window {
    /// What.
    pub kind: Kind,
    /// On what: the incarnation (`w1-3`, `s0-2`, `api-4`), `redis#<generation>`, or a cluster
    /// node `node:<port>#<generation>`.
    pub target: String,
    /// On a cluster, the queues whose primary the fault hit (a replica's: its primary's); empty
    /// when it concerns every queue (one Redis) or none (an orq process).
    pub queues: Vec<String>,
    /// When it started (wall ms).
    pub start_ms: u64,
    /// When the target was whole again (wall ms): restarted, resumed, memory back.
    pub end_ms: u64,
    /// Its parameters (`down 340 ms`, `maxmemory 1`).
    pub detail: String,
}

/// What the nemesis did.
#[derive(Debug)]
pub struct Record {
    /// The mode whose kinds were drawn.
    pub mode: Mode,
    /// Every injected fault.
    pub windows: Vec<Window>,
    /// Faults drawn while their target was held by another fault, by kind.
    pub skipped: BTreeMap<Kind, u64>,
    /// Faults that could not be injected (the command failed), and fault threads that panicked.
    pub failed: Vec<String>,
    /// Processes that exited on their own (then restarted): `name: status at ms`.
    pub unexpected_exits: Vec<String>,
}

impl Record {
    /// An empty record of a run in `mode`.
    pub fn new(mode: Mode) -> Record {
        Record {
            mode,
            windows: Vec::new(),
            skipped: BTreeMap::new(),
            failed: Vec::new(),
            unexpected_exits: Vec::new(),
        }
    }

    /// Injected faults by kind (every kind the mode draws, zeros included).
    pub fn counts(&self) -> BTreeMap<Kind, u64> {
        let mut m: BTreeMap<Kind, u64> = Kind::of(self.mode).iter().map(|k| (*k, 0)).collect();
        for w in &self.windows {
            *m.entry(w.kind).or_default() += 1;
        }
        m
    }
}

/// One drawn fault.
#[derive(Debug, Clone, Copy)]
struct Plan {
    kind: Kind,
    /// Which worker or scheduler.
    target: usize,
    /// Its length or the down time (ms).
    ms: u64,
    /// OOM: `maxmemory 1` rather than the memory in use.
    hard: bool,
}

fn draw(rng: &mut SplitMix64, lease_ms: u64, mode: Mode) -> Plan {
    let total: u64 = Kind::ALL.iter().map(|k| k.weight(mode)).sum();
    let mut pick = rng.range(0, total);
    let mut kind = Kind::ALL[0];
    for k in Kind::ALL {
        if pick < k.weight(mode) {
            kind = k;
            break;
        }
        pick -= k.weight(mode);
    }
    let target = rng.range(0, 3) as usize;
    let ms = match kind {
        Kind::WorkerKill => rng.range(100, 1500),
        Kind::WorkerStop => rng.range(lease_ms + 1000, lease_ms + 3000),
        Kind::SchedulerKill => rng.range(100, 2000),
        Kind::ApiKill | Kind::RedisKill | Kind::ReplicaKill => rng.range(100, 1000),
        Kind::ClientKill | Kind::PrimaryKill => 0,
        Kind::ClientPause | Kind::DebugSleep => rng.range(200, 1500),
        Kind::Oom => 1500,
    };
    let hard = rng.range(0, 2) == 0;
    Plan {
        kind,
        target,
        ms,
        hard,
    }
}

/// Gives a slot (or Redis) back when the fault ends, also when its thread panics.
struct Held<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.store(false, std::sync::atomic::Ordering::Release);
    }
}

fn take(flag: &std::sync::atomic::AtomicBool) -> bool {
    flag.compare_exchange(
        false,
        true,
        std::sync::atomic::Ordering::AcqRel,
        std::sync::atomic::Ordering::Acquire,
    )
    .is_ok()
}

/// The slot a plan acts on, or `None` for the store.
fn slot_of<'a>(c: &'a Cluster, p: &Plan) -> Option<&'a Slot> {
    match p.kind {
        Kind::WorkerKill | Kind::WorkerStop => Some(&c.workers[p.target % c.workers.len()]),
        Kind::SchedulerKill => Some(&c.schedulers[p.target % c.schedulers.len()]),
        Kind::ApiKill => Some(&c.api),
        _ => None,
    }
}

fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// The server a fault on the store acts on.
struct Server {
    port: u16,
    /// Its name in the window: `redis`, or `node:<port>#<generation>`.
    name: String,
    /// The queues it serves (cluster; empty on one Redis).
    queues: Vec<String>,
    /// The slot of the plan's queue (cluster).
    slot: Option<u16>,
}

/// On one Redis, Redis; on a cluster, the primary of the slot of the plan's queue.
fn store_target(c: &Cluster, p: &Plan) -> Server {
    match &*lock(&c.store) {
        Store::One(r) => Server {
            port: r.port(),
            name: "redis".into(),
            queues: Vec::new(),
            slot: None,
        },
        Store::Cluster(n) => {
            let slot = c.queue_slots[p.target % c.queue_slots.len()];
            let port = n.cluster.primary_of_slot(slot);
            Server {
                port,
                name: n.name(port),
                queues: c.queues_on(n, port),
                slot: Some(slot),
            }
        }
    }
}

/// After a short fault on a cluster primary: it must still be the primary (a stall past the
/// node timeout would have made the cluster fail it over, which is no short refusal).
fn still_primary(c: &Cluster, s: &Server, p: &Plan) -> Result<(), String> {
    let Some(slot) = s.slot else { return Ok(()) };
    let now = match &*lock(&c.store) {
        Store::Cluster(n) => n.cluster.primary_of_slot(slot),
        Store::One(_) => return Ok(()),
    };
    if now == s.port {
        Ok(())
    } else {
        Err(format!(
            "{} on {} made the cluster fail it over (node:{now} serves slot {slot} now): a \
             stall of {} ms came near the node timeout",
            p.kind.name(),
            s.name,
            p.ms
        ))
    }
}

/// Inject one fault; its target is already held by this thread.
fn inject(c: &Cluster, p: Plan) -> Result<Window, String> {
    let window = |target: String, start_ms: u64, detail: String| Window {
        kind: p.kind,
        target,
        queues: Vec::new(),
        start_ms,
        end_ms: now_ms(),
        detail,
    };
    match p.kind {
        Kind::WorkerKill | Kind::SchedulerKill => {
            let slot = slot_of(c, &p).expect("a slot");
            let start = now_ms();
            let name = slot.kill();
            sleep_ms(p.ms);
            slot.start(&c.setup);
            Ok(window(name, start, format!("down {} ms", p.ms)))
        }
        Kind::ApiKill => {
            let start = now_ms();
            let name = c.api.kill();
            sleep_ms(p.ms);
            c.restart_api();
            Ok(window(name, start, format!("down {} ms", p.ms)))
        }
        Kind::WorkerStop => {
            let slot = slot_of(c, &p).expect("a slot");
            let (name, pid) = (slot.name(), slot.pid());
            if pid == 0 {
                return Err(format!("{name} has no process to stop"));
            }
            let start = now_ms();
            if !procs::signal(pid, "STOP") {
                return Err(format!("SIGSTOP {name} failed"));
            }
            sleep_ms(p.ms);
            procs::signal(pid, "CONT");
            Ok(window(name, start, format!("stopped {} ms", p.ms)))
        }
        Kind::RedisKill => {
            let mut store = lock(&c.store);
            let Store::One(r) = &mut *store else {
                return Err("redis_kill is a fault of one Redis".into());
            };
            let name = format!("redis#{}", r.generation);
            let start = now_ms();
            r.kill();
            sleep_ms(p.ms);
            r.restart();
            Ok(window(name, start, format!("down {} ms", p.ms)))
        }
        Kind::PrimaryKill => primary_kill(c, p),
        Kind::ReplicaKill => replica_kill(c, p),
        Kind::ClientKill => {
            let s = store_target(c, &p);
            let mut con = procs::admin(s.port, Duration::from_secs(10))?;
            let start = now_ms();
            let killed = procs::command(&mut con, &["CLIENT", "KILL", "TYPE", "normal"])?;
            let n = match killed {
                redis::Value::Int(n) => n,
                _ => -1,
            };
            let mut w = window(s.name.clone(), start, format!("{n} connections dropped"));
            w.queues = s.queues.clone();
            still_primary(c, &s, &p)?;
            Ok(w)
        }
        Kind::ClientPause => {
            let s = store_target(c, &p);
            let mut con = procs::admin(s.port, Duration::from_secs(10))?;
            let start = now_ms();
            procs::command(&mut con, &["CLIENT", "PAUSE", &p.ms.to_string()])?;
            sleep_ms(p.ms);
            let mut w = window(s.name.clone(), start, format!("paused {} ms", p.ms));
            w.end_ms = w.end_ms.max(start + p.ms);
            w.queues = s.queues.clone();
            still_primary(c, &s, &p)?;
            Ok(w)
        }
        Kind::DebugSleep => {
            let s = store_target(c, &p);
            let ms = match c.mode {
                Mode::Single => p.ms,
                Mode::Cluster => p.ms.min(DEBUG_SLEEP_MS_MAX_CLUSTER),
            };
            let secs = format!("{:.3}", ms as f64 / 1000.0);
            let mut con = procs::admin(s.port, Duration::from_millis(ms + 10_000))?;
            let start = now_ms();
            procs::command(&mut con, &["DEBUG", "SLEEP", &secs])?;
            let mut w = window(s.name.clone(), start, format!("slept {secs} s"));
            w.queues = s.queues.clone();
            still_primary(c, &s, &Plan { ms, ..p })?;
            Ok(w)
        }
        Kind::Oom => oom(c, p),
    }
}

/// The cluster's store, or the error of a cluster fault drawn on one Redis.
fn nodes_of(store: &mut Store) -> Result<&mut Nodes, String> {
    match store {
        Store::Cluster(n) => Ok(n),
        Store::One(_) => Err("a cluster fault on one Redis".into()),
    }
}

/// `primary_kill`: SIGKILL the primary of the slot of the plan's queue; wait until the cluster
/// has promoted its replica; start the killed node again (it rejoins as a replica of the
/// promoted one and syncs); the window ends when the cluster is whole.
fn primary_kill(c: &Cluster, p: Plan) -> Result<Window, String> {
    let mut store = lock(&c.store);
    let nodes = nodes_of(&mut store)?;
    let slot = c.queue_slots[p.target % c.queue_slots.len()];
    let port = nodes.cluster.primary_of_slot(slot);
    let (name, queues) = (nodes.name(port), c.queues_on(nodes, port));
    let start = now_ms();
    nodes.kill(port);
    let deadline = Instant::now() + PROMOTION_TIMEOUT;
    let promoted = loop {
        let now = nodes.cluster.primary_of_slot(slot);
        if now != port {
            break Some(now);
        }
        if Instant::now() > deadline {
            break None;
        }
        sleep_ms(50);
    };
    let promoted_ms = now_ms() - start;
    nodes.restart(port);
    let settled = nodes.cluster.wait_settled(CLUSTER_SETTLE_TIMEOUT);
    let Some(to) = promoted else {
        return Err(format!(
            "killed {name}: no replica of slot {slot} promoted within {PROMOTION_TIMEOUT:?}"
        ));
    };
    settled.map_err(|e| format!("after killing {name}: {e}"))?;
    let end = now_ms();
    Ok(Window {
        kind: p.kind,
        target: name,
        queues,
        start_ms: start,
        end_ms: end,
        detail: format!(
            "replica node:{to} promoted after {promoted_ms} ms; back as its replica, cluster \
             whole after {} ms",
            end - start
        ),
    })
}

/// `replica_kill`: SIGKILL the replica of the primary of the slot of the plan's queue, start it
/// again after `p.ms`; the window ends when the cluster is whole (the replica synced).
fn replica_kill(c: &Cluster, p: Plan) -> Result<Window, String> {
    let mut store = lock(&c.store);
    let nodes = nodes_of(&mut store)?;
    let slot = c.queue_slots[p.target % c.queue_slots.len()];
    let primary = nodes.cluster.primary_of_slot(slot);
    let replica = nodes
        .cluster
        .nodes()
        .into_iter()
        .find(|n| n.replica_of == Some(primary))
        .map(|n| n.port)
        .ok_or(format!("node:{primary} has no live replica"))?;
    let (name, queues) = (nodes.name(replica), c.queues_on(nodes, primary));
    let start = now_ms();
    nodes.kill(replica);
    sleep_ms(p.ms);
    nodes.restart(replica);
    nodes
        .cluster
        .wait_settled(CLUSTER_SETTLE_TIMEOUT)
        .map_err(|e| format!("after killing {name}: {e}"))?;
    let end = now_ms();
    Ok(Window {
        kind: p.kind,
        target: name,
        queues,
        start_ms: start,
        end_ms: end,
        detail: format!(
            "replica of node:{primary} down {} ms, synced again after {} ms",
            p.ms,
            end - start
        ),
    })
}

/// An OOM episode: `maxmemory` at the memory in use (or 1 byte) under `noeviction` for `p.ms`,
/// then `maxmemory 0`, insisting until Redis takes it. On a cluster, on the primary of the
/// plan's queue.
fn oom(c: &Cluster, p: Plan) -> Result<Window, String> {
    let s = store_target(c, &p);
    let mut con = procs::admin(s.port, Duration::from_secs(10))?;
    let limit = if p.hard {
        "1".to_string()
    } else {
        let info = procs::command(&mut con, &["INFO", "memory"])?;
        let text = match info {
            redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            redis::Value::VerbatimString { text, .. } => text,
            other => return Err(format!("INFO memory: {other:?}")),
        };
        text.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .map(|v| v.trim().to_string())
            .ok_or("INFO memory without used_memory")?
    };
    procs::command(
        &mut con,
        &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
    )?;
    let start = now_ms();
    procs::command(&mut con, &["CONFIG", "SET", "maxmemory", &limit])?;
    sleep_ms(p.ms);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reset = procs::admin(s.port, Duration::from_secs(10))
            .and_then(|mut con| procs::command(&mut con, &["CONFIG", "SET", "maxmemory", "0"]));
        match reset {
            Ok(_) => break,
            Err(e) if Instant::now() > deadline => {
                panic!("cannot set maxmemory back to 0 after an OOM episode: {e}")
            }
            Err(_) => sleep_ms(100),
        }
    }
    let w = Window {
        kind: p.kind,
        target: s.name.clone(),
        queues: s.queues.clone(),
        start_ms: start,
        end_ms: now_ms(),
        detail: format!("maxmemory {limit} for {} ms", p.ms),
    };
    still_primary(c, &s, &p)?;
    Ok(w)
}

/// Restart every process (and cluster node) that exited on its own (and is held by no
/// fault), recording it.
pub fn revive(c: &Cluster, rec: &Mutex<Record>) {
    for slot in c.slots() {
        if !take(&slot.busy) {
            continue;
        }
        let _held = Held(&slot.busy);
        if let Some(status) = slot.exited() {
            let name = slot.name();
            lock(rec)
                .unexpected_exits
                .push(format!("{name}: {status} at {} ms", now_ms()));
            if std::ptr::eq(slot, &c.api) {
                c.restart_api();
            } else {
                slot.start(&c.setup);
            }
        }
    }
    if take(&c.store_busy) {
        let _held = Held(&c.store_busy);
        let mut store = lock(&c.store);
        match &mut *store {
            Store::One(r) => {
                if let Some(status) = r.exited() {
                    lock(rec).unexpected_exits.push(format!(
                        "redis#{}: {status} at {} ms",
                        r.generation,
                        now_ms()
                    ));
                    r.restart();
                }
            }
            Store::Cluster(n) => {
                for e in n.revive() {
                    lock(rec)
                        .unexpected_exits
                        .push(format!("{e} at {} ms", now_ms()));
                }
            }
        }
    }
}

/// Run the nemesis for `length` from `seed`; returns when every fault it started has ended
/// (its target restarted or resumed, memory back, the cluster whole) and every process runs
/// again.
pub fn run(c: Arc<Cluster>, seed: u64, length: Duration, lease_ms: u64) -> Record {
    let rec = Arc::new(Mutex::new(Record::new(c.mode)));
    let mut rng = SplitMix64::new(seed);
    let end = Instant::now() + length;
    let mut threads = Vec::new();
    loop {
        let gap = rng.range(300, 2500);
        let plan = draw(&mut rng, lease_ms, c.mode);
        let now = Instant::now();
        if now >= end {
            break;
        }
        std::thread::sleep(Duration::from_millis(gap).min(end - now));
        if Instant::now() >= end {
            break;
        }
        revive(&c, &rec);
        let flag = match slot_of(&c, &plan) {
            Some(s) => &s.busy,
            None => &c.store_busy,
        };
        if !take(flag) {
            *lock(&rec).skipped.entry(plan.kind).or_default() += 1;
            continue;
        }
        let (c2, rec2) = (c.clone(), rec.clone());
        threads.push(std::thread::spawn(move || {
            let flag = match slot_of(&c2, &plan) {
                Some(s) => &s.busy,
                None => &c2.store_busy,
            };
            let _held = Held(flag);
            match inject(&c2, plan) {
                Ok(w) => lock(&rec2).windows.push(w),
                Err(e) => lock(&rec2)
                    .failed
                    .push(format!("{}: {e}", plan.kind.name())),
            }
            if plan.kind.on_store() {
                std::thread::sleep(STORE_QUIET);
            }
        }));
    }
    for t in threads {
        if let Err(panic) = t.join() {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            lock(&rec)
                .failed
                .push(format!("a fault thread panicked: {msg}"));
        }
    }
    revive(&c, &rec);
    let mut out = std::mem::replace(&mut *lock(&rec), Record::new(c.mode));
    out.windows.sort_by_key(|w| w.start_ms);
    out
}
