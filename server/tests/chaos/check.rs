//! The checker: from what the client, the receiver and the nemesis recorded and the tasks'
//! final states, count each invariant's violations and explain every task that ran more than
//! once (and every lease that expired) by a fault window that overlaps it. On a cluster a fault
//! on a node explains only what happened to the queues that node served (its window's queues).

use crate::load::{Acked, ClientStats, Effect, Received};
use crate::nemesis::{Kind, Record, Window};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Everything the checker reads.
#[derive(Debug)]
pub struct Evidence<'a> {
    /// The tasks' lease (ms).
    pub lease_ms: u64,
    /// What the client saw.
    pub client: &'a ClientStats,
    /// What the receiver recorded.
    pub received: &'a Received,
    /// What the nemesis did.
    pub nemesis: &'a Record,
    /// The last read of every acknowledged task by id (`None`: 404), absent when never read.
    pub tasks: &'a BTreeMap<String, Option<Value>>,
    /// Tasks whose status or attempt changed across a last kill -9 and restart of Redis.
    pub changed_by_last_kill: Vec<String>,
}

/// Why an attempt's lease was lost (or its outcome never recorded).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cause {
    /// The worker incarnation that held it was killed.
    KilledWorker,
    /// The worker that held it was stopped across it.
    StoppedWorker,
    /// Redis was killed and restarted across it while it ran: down time plus AOF loading can
    /// span two heartbeats of a 6 s lease.
    RedisRestart,
    /// The primary of its queue was killed across it (cluster): the failover refuses its
    /// heartbeats for about the node timeout plus the election, and the promoted replica may
    /// miss the last lease or heartbeat (they do not wait for replicas).
    PrimaryKill,
    /// It never ran (no request) and a Redis restart or `CLIENT KILL` overlaps it: the reply of
    /// the call that leased it was lost, so its worker never learned of it.
    LostLeaseReply,
    /// Only an OOM episode, `CLIENT PAUSE`, `DEBUG SLEEP` or `CLIENT KILL` overlaps it: a
    /// failure (each lasts less than a heartbeat interval and is followed by a quiet period).
    ShortStoreFault,
    /// No fault overlaps it: a failure.
    Unexplained,
}

impl Cause {
    /// Every cause, in report order.
    pub const ALL: [Cause; 7] = [
        Cause::KilledWorker,
        Cause::StoppedWorker,
        Cause::RedisRestart,
        Cause::PrimaryKill,
        Cause::LostLeaseReply,
        Cause::ShortStoreFault,
        Cause::Unexplained,
    ];

    /// Whether the cause is a fault that may lose a lease.
    pub fn acceptable(&self) -> bool {
        !matches!(self, Cause::ShortStoreFault | Cause::Unexplained)
    }

    /// Its words in the report.
    pub fn words(&self) -> &'static str {
        match self {
            Cause::KilledWorker => "a killed worker",
            Cause::StoppedWorker => "a stopped worker",
            Cause::RedisRestart => "a Redis restart",
            Cause::PrimaryKill => "its queue's primary killed (failover)",
            Cause::LostLeaseReply => "a lease reply lost (never ran)",
            Cause::ShortStoreFault => "only a refusal shorter than the lease",
            Cause::Unexplained => "nothing (unexplained)",
        }
    }

    /// A short name for the summary line.
    pub fn short(&self) -> &'static str {
        match self {
            Cause::KilledWorker => "killed worker",
            Cause::StoppedWorker => "stopped worker",
            Cause::RedisRestart => "Redis restart",
            Cause::PrimaryKill => "primary kill",
            Cause::LostLeaseReply => "lost lease reply",
            Cause::ShortStoreFault => "short refusal only",
            Cause::Unexplained => "unexplained",
        }
    }
}

/// An attempt of a task that ended without success, from its `attempts` in the API (the
/// completed one is left out: the checks below explain lost attempts).
#[derive(Debug, Clone)]
struct HistoryLine {
    attempt: u32,
    at_ms: u64,
    worker: String,
    outcome: String,
}

fn history(t: &Value) -> Vec<HistoryLine> {
    t["attempts"]
        .as_array()
        .map(|attempts| {
            attempts
                .iter()
                .filter(|a| a["outcome"] != "completed")
                .filter_map(|a| {
                    Some(HistoryLine {
                        attempt: u32::try_from(a["attempt"].as_u64()?).ok()?,
                        at_ms: orq_server::model::parse_time_ms("at", a["at"].as_str()?).ok()?,
                        worker: a["worker"].as_str()?.to_string(),
                        outcome: a["outcome"].as_str()?.to_string(),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the window concerns `queue`: a fault on an orq process or on one Redis concerns every
/// queue; one on a cluster node only the queues that node served.
fn on_queue(w: &Window, queue: &str) -> bool {
    w.queues.is_empty() || w.queues.iter().any(|q| q == queue)
}

/// The cause of a lost attempt of a task of `queue` held by `worker` (if known) during
/// `lo..=hi` (wall ms); `ran`: its webhook was called. A kill of that very incarnation explains
/// it whenever it happened before `hi` (a killed incarnation never runs again); the other
/// faults must overlap (and, on a cluster, have hit that queue's primary).
fn explain(
    windows: &[Window],
    queue: &str,
    worker: Option<&str>,
    lo: u64,
    hi: u64,
    ran: bool,
) -> Cause {
    let overlaps = |w: &&Window| w.start_ms <= hi && w.end_ms >= lo && on_queue(w, queue);
    let on_worker = |w: &&Window| worker.is_none_or(|name| w.target == name);
    let any = |pred: &dyn Fn(&&Window) -> bool| windows.iter().any(|w| pred(&w));
    if any(&|w| {
        w.kind == Kind::WorkerKill
            && on_worker(w)
            && w.start_ms <= hi
            && (worker.is_some() || overlaps(w))
    }) {
        return Cause::KilledWorker;
    }
    if any(&|w| w.kind == Kind::WorkerStop && on_worker(w) && overlaps(w)) {
        return Cause::StoppedWorker;
    }
    let restart = any(&|w| w.kind == Kind::RedisKill && overlaps(w));
    let primary_kill = any(&|w| w.kind == Kind::PrimaryKill && overlaps(w));
    let client_kill = any(&|w| w.kind == Kind::ClientKill && overlaps(w));
    if !ran && (restart || primary_kill || client_kill) {
        return Cause::LostLeaseReply;
    }
    if restart {
        return Cause::RedisRestart;
    }
    if primary_kill {
        return Cause::PrimaryKill;
    }
    if any(&|w| w.kind.is_short_store_fault() && overlaps(w)) {
        return Cause::ShortStoreFault;
    }
    Cause::Unexplained
}

/// The faults that overlap `lo..=hi` on the store of `queue` or on `worker` (any worker when
/// `None`), as `kind target start..end` items: the evidence printed next to an explanation.
fn faults_near(windows: &[Window], queue: &str, worker: Option<&str>, lo: u64, hi: u64) -> String {
    let near: Vec<String> = windows
        .iter()
        .filter(|w| w.start_ms <= hi && w.end_ms >= lo && on_queue(w, queue))
        .filter(|w| match w.kind {
            Kind::WorkerKill | Kind::WorkerStop => worker.is_none_or(|n| n == w.target),
            Kind::SchedulerKill | Kind::ApiKill => false,
            _ => true,
        })
        .map(|w| {
            format!(
                "{} {} {}..{}",
                w.kind.name(),
                w.target,
                w.start_ms,
                w.end_ms
            )
        })
        .collect();
    if near.is_empty() {
        "no fault on the store or that worker".into()
    } else {
        near.join(", ")
    }
}

/// One row of the table: what is counted, the count, and what it must be (`None`: reported).
#[derive(Debug, Clone)]
pub struct Row {
    /// What.
    pub what: String,
    /// How many.
    pub found: u64,
    /// The required count, when it is an invariant.
    pub must: Option<u64>,
}

/// The checker's verdict.
#[derive(Debug, Default)]
pub struct Report {
    /// The table.
    pub rows: Vec<Row>,
    /// Details of violations and of every rerun (printed).
    pub details: Vec<String>,
    /// Tasks that ran more than once, by the worst cause among their reruns.
    pub reruns: BTreeMap<Cause, u64>,
    /// Expired leases by cause.
    pub expiries: BTreeMap<Cause, u64>,
    /// Figures for the summary line.
    pub figures: BTreeMap<&'static str, u64>,
}

impl Report {
    /// Whether every invariant holds.
    pub fn passed(&self) -> bool {
        self.rows
            .iter()
            .all(|r| r.must.is_none_or(|m| r.found == m))
    }

    fn row(&mut self, what: impl Into<String>, found: u64, must: Option<u64>) {
        self.rows.push(Row {
            what: what.into(),
            found,
            must,
        });
    }

    /// The table as text.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{:<62} {:>7}  must be", "check", "found");
        for r in &self.rows {
            let must = match r.must {
                Some(m) => m.to_string(),
                None => "-".into(),
            };
            let flag = if r.must.is_some_and(|m| m != r.found) {
                "   <-- FAILED"
            } else {
                ""
            };
            let _ = writeln!(s, "{:<62} {:>7}  {must}{flag}", r.what, r.found);
        }
        s
    }
}

/// Check the evidence.
pub fn check(ev: &Evidence) -> Report {
    let mut rep = Report::default();
    let windows = &ev.nemesis.windows;
    let acked: &BTreeMap<String, Acked> = &ev.client.acked;
    let by_id: BTreeMap<&str, &Acked> = acked.values().map(|a| (a.id.as_str(), a)).collect();
    let mut effects_of: BTreeMap<&str, Vec<&Effect>> = BTreeMap::new();
    for e in &ev.received.effects {
        effects_of.entry(e.task.as_str()).or_default().push(e);
    }

    // Lost, stuck, completed, dead.
    let (mut lost, mut stuck, mut completed, mut dead, mut cancelled) = (0, 0, 0, 0, 0);
    for a in acked.values() {
        match ev.tasks.get(&a.id) {
            Some(None) => {
                lost += 1;
                rep.details
                    .push(format!("LOST: task {} (acknowledged) is not found", a.id));
            }
            None => {
                stuck += 1;
                rep.details
                    .push(format!("STUCK: task {} could not be read", a.id));
            }
            Some(Some(t)) => match t["status"].as_str() {
                Some("completed") => completed += 1,
                Some("dead") => dead += 1,
                Some("cancelled") => cancelled += 1,
                _ => {
                    stuck += 1;
                    rep.details.push(format!("STUCK: {t}"));
                }
            },
        }
    }
    rep.figures.insert("acknowledged", acked.len() as u64);
    rep.figures.insert("completed", completed);
    rep.figures.insert("dead", dead);

    // Two requests under one (task, epoch); attempts beyond the budget; orphans.
    let mut per_epoch: BTreeMap<(&str, u64), Vec<u64>> = BTreeMap::new();
    let (mut over_budget, mut orphans) = (0u64, 0u64);
    for e in &ev.received.effects {
        per_epoch
            .entry((e.task.as_str(), e.epoch))
            .or_default()
            .push(e.at_ms);
        match by_id.get(e.task.as_str()) {
            Some(a) if e.attempt > a.max_retries + 1 => {
                over_budget += 1;
                rep.details.push(format!(
                    "OVER BUDGET: task {} attempt {} with max_retries {}",
                    e.task, e.attempt, a.max_retries
                ));
            }
            Some(_) => {}
            None => {
                orphans += 1;
                rep.details.push(format!(
                    "ORPHAN: a request for task {} (key {}), never acknowledged",
                    e.task, e.key
                ));
            }
        }
    }
    for (id, t) in ev.tasks {
        if let (Some(t), Some(a)) = (t, by_id.get(id.as_str())) {
            let attempt = t["attempt"].as_u64().unwrap_or(0);
            if attempt > u64::from(a.max_retries) + 1 {
                over_budget += 1;
                rep.details
                    .push(format!("OVER BUDGET: task {id} ended at attempt {attempt}"));
            }
        }
    }
    let epoch_dups = per_epoch.values().filter(|at| at.len() > 1).count() as u64;
    for ((task, epoch), at) in &per_epoch {
        if at.len() > 1 {
            let (lo, hi) = (at.iter().min().copied(), at.iter().max().copied());
            let (lo, hi) = (lo.unwrap_or(0).saturating_sub(10_000), hi.unwrap_or(0));
            let queue = by_id.get(task).map_or("", |a| a.queue.as_str());
            rep.details.push(format!(
                "EPOCH DUPLICATE: task {task} got {} requests under epoch {epoch} at {at:?} ms \
                 ({})",
                at.len(),
                faults_near(windows, queue, None, lo, hi)
            ));
        }
    }

    // Completed tasks whose receiver never answered 200 (an outcome without its effect).
    let mut completed_without_effect = 0;
    for a in acked.values() {
        if let Some(Some(t)) = ev.tasks.get(&a.id) {
            let effects = effects_of.get(a.id.as_str()).map_or(&[][..], |v| &v[..]);
            if t["status"] == "completed" && !effects.iter().any(|e| e.status == 200) {
                completed_without_effect += 1;
                rep.details
                    .push(format!("COMPLETED WITHOUT AN EFFECT: {t}"));
            }
        }
    }

    // Every expired lease, and every rerun of an effect, explained by a fault.
    let slack = 2_000;
    let queue_of = |id: &str| by_id.get(id).map_or("", |a| a.queue.as_str());
    for (id, t) in ev.tasks {
        let Some(t) = t else { continue };
        let queue = queue_of(id);
        let hist = history(t);
        let effects: Vec<&Effect> = effects_of.get(id.as_str()).cloned().unwrap_or_default();
        let effect_at = |attempt: u32| {
            effects
                .iter()
                .filter(|e| e.attempt == attempt)
                .map(|e| e.at_ms)
                .min()
        };
        for h in hist.iter().filter(|h| h.outcome == "expired") {
            let lo = effect_at(h.attempt)
                .map_or(h.at_ms.saturating_sub(ev.lease_ms + 10_000), |a| {
                    a.saturating_sub(slack)
                });
            let ran = effect_at(h.attempt).is_some();
            let cause = explain(windows, queue, Some(&h.worker), lo, h.at_ms, ran);
            *rep.expiries.entry(cause.clone()).or_default() += 1;
            if cause == Cause::LostLeaseReply {
                rep.details.push(format!(
                    "lost lease reply: task {id} attempt {} leased to {} never ran (no request) \
                     and expired at {} ms ({})",
                    h.attempt,
                    h.worker,
                    h.at_ms,
                    faults_near(windows, queue, Some(&h.worker), lo, h.at_ms)
                ));
            }
            if !cause.acceptable() {
                rep.details.push(format!(
                    "LEASE EXPIRY explained by {}: task {id} attempt {} held by {} expired at {} ms \
                     ({})",
                    cause.words(),
                    h.attempt,
                    h.worker,
                    h.at_ms,
                    faults_near(windows, queue, Some(&h.worker), lo, h.at_ms)
                ));
            }
        }
        let mut done: Vec<&&Effect> = effects.iter().filter(|e| e.status == 200).collect();
        done.sort_by_key(|e| e.at_ms);
        if done.len() < 2 {
            continue;
        }
        let mut worst = Cause::KilledWorker;
        let mut why = Vec::new();
        for pair in done.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let line = hist.iter().find(|h| h.attempt == a.attempt);
            let hi = line.map_or(b.at_ms, |h| h.at_ms.min(b.at_ms));
            let worker = line.map(|h| h.worker.as_str()).filter(|w| *w != "-");
            let lo = a.at_ms.saturating_sub(slack);
            let cause = explain(windows, queue, worker, lo, hi, true);
            why.push(format!(
                "attempt {} (epoch {}) at {} ms{} ran again as attempt {} at {} ms: {} ({})",
                a.attempt,
                a.epoch,
                a.at_ms,
                line.map_or(String::new(), |h| format!(
                    ", held by {}, {} at {} ms",
                    h.worker, h.outcome, h.at_ms
                )),
                b.attempt,
                b.at_ms,
                cause.words(),
                faults_near(windows, queue, worker, lo, hi)
            ));
            worst = worst.max(cause);
        }
        if !worst.acceptable() {
            rep.details
                .push(format!("RERUN explained by {}: task {id}", worst.words()));
        }
        rep.details
            .push(format!("rerun: task {id}: {}", why.join("; ")));
        *rep.reruns.entry(worst).or_default() += 1;
    }

    // Dead tasks: each must be explained (its last attempt's lease lost to a fault).
    let mut dead_unexplained = 0;
    for (id, t) in ev.tasks {
        let Some(t) = t else { continue };
        if t["status"] != "dead" {
            continue;
        }
        let queue = queue_of(id);
        let hist = history(t);
        let last = hist.iter().max_by_key(|h| h.attempt);
        let ran_last = |a: u32| {
            effects_of
                .get(id.as_str())
                .is_some_and(|v| v.iter().any(|e| e.attempt == a))
        };
        let (cause, near) = match last {
            Some(h) if h.outcome == "expired" => {
                let lo = h.at_ms.saturating_sub(ev.lease_ms + 10_000);
                (
                    explain(
                        windows,
                        queue,
                        Some(&h.worker),
                        lo,
                        h.at_ms,
                        ran_last(h.attempt),
                    ),
                    faults_near(windows, queue, Some(&h.worker), lo, h.at_ms),
                )
            }
            _ => (Cause::Unexplained, String::new()),
        };
        let effect = effects_of
            .get(id.as_str())
            .is_some_and(|v| v.iter().any(|e| e.status == 200));
        rep.details.push(format!(
            "dead: task {id} ({}), explained by {} ({near}): {}",
            if effect {
                "its webhook answered 200"
            } else {
                "no 200"
            },
            cause.words(),
            t["attempts"]
        ));
        if !cause.acceptable() {
            dead_unexplained += 1;
        }
    }

    let statuses = &ev.client.statuses;
    let api_500 = statuses.get(&500).copied().unwrap_or(0);
    let reruns: u64 = rep.reruns.values().sum();
    let bad_expiries: u64 = rep
        .expiries
        .iter()
        .filter(|(c, _)| !c.acceptable())
        .map(|(_, n)| n)
        .sum();
    rep.figures.insert("reruns", reruns);
    rep.figures.insert("api_500", api_500);
    rep.figures
        .insert("api_503", statuses.get(&503).copied().unwrap_or(0));
    rep.figures.insert("lost", lost);
    rep.figures.insert("stuck", stuck);
    rep.figures.insert("epoch_dups", epoch_dups);
    rep.figures.insert("over_budget", over_budget);

    rep.row("acknowledged tasks lost", lost, Some(0));
    rep.row("acknowledged tasks stuck (not final)", stuck, Some(0));
    rep.row(
        "acknowledged tasks cancelled (nobody cancels)",
        cancelled,
        Some(0),
    );
    rep.row("two requests under one (task, epoch)", epoch_dups, Some(0));
    rep.row("attempts beyond max_retries + 1", over_budget, Some(0));
    rep.row("API answers 500", api_500, Some(0));
    rep.row(
        "idempotency keys acknowledged with two ids",
        ev.client.conflicts.len() as u64,
        Some(0),
    );
    rep.row("requests for tasks never acknowledged", orphans, Some(0));
    rep.row(
        "malformed requests (no orq headers)",
        ev.received.malformed,
        Some(0),
    );
    rep.row(
        "keys never acknowledged",
        ev.client.unacked.len() as u64,
        Some(0),
    );
    rep.row(
        "completed tasks whose webhook never answered 200",
        completed_without_effect,
        Some(0),
    );
    rep.row(
        "tasks changed by a last kill -9 of Redis",
        ev.changed_by_last_kill.len() as u64,
        Some(0),
    );
    rep.row(
        "dead tasks not explained by a fault",
        dead_unexplained,
        Some(0),
    );
    rep.row(
        format!(
            "lease expiries (of {}) not explained by a fault",
            rep.expiries.values().sum::<u64>()
        ),
        bad_expiries,
        Some(0),
    );
    rep.row("tasks whose webhook ran more than once", reruns, None);
    for c in Cause::ALL {
        let n = rep.reruns.get(&c).copied().unwrap_or(0);
        let must = (!c.acceptable()).then_some(0);
        rep.row(format!("  explained by {}", c.words()), n, must);
    }
    rep.row(
        "processes that exited on their own",
        ev.nemesis.unexpected_exits.len() as u64,
        Some(0),
    );
    rep.row(
        "faults that could not be injected",
        ev.nemesis.failed.len() as u64,
        Some(0),
    );
    for c in &ev.client.conflicts {
        rep.details.push(format!("IDEMPOTENCY: {c}"));
    }
    for c in &ev.changed_by_last_kill {
        rep.details.push(format!("CHANGED BY THE LAST KILL: {c}"));
    }
    for e in &ev.nemesis.unexpected_exits {
        rep.details.push(format!("UNEXPECTED EXIT: {e}"));
    }
    for f in &ev.nemesis.failed {
        rep.details.push(format!("FAULT NOT INJECTED: {f}"));
    }
    for e in &ev.client.server_errors {
        rep.details.push(format!("API 500: {e}"));
    }
    rep
}
