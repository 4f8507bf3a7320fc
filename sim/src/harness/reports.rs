//! Check 9 of the checker: an outcome the store refused transiently (or that failed before
//! reaching it) is sent again with the same token while its lease can be live, so an outcome
//! refused for less than its lease's remaining time is delivered and the handler ran once. A
//! heartbeat refused (or whose reply was lost) is held to the same rule, its wait capped by the
//! heartbeat's cadence ([`orq::heartbeat::after_heartbeat`]), so a refusal shorter than the
//! lease never lets a running handler's lease expire.
//!
//! The store wrapper tells this module when each call starts and ends. An outcome (a complete,
//! fail or release item) becomes *pending* when a try of it is refused, and stops being pending
//! when a try reaches the store (applied, or answered for good: `STALE`, `CANCELLED`), when its
//! lease ends (the task is no longer leased under its token), or when a fault excuses it. A
//! pending outcome is **overdue** when the worker's next try is later than the engine's own
//! backoff ([`orq::report::report_retry_ms`]) after the last try, or than the lease's deadline if
//! that comes first, by more than [`TRY_SLACK_MS`] and a tenth of the backoff (a worker clock
//! drifts by at most 5 %), while at the last try the lease was still live by the store's clock
//! with a margin for that drift. What the worker legitimately waits for moves the last try on:
//! a heartbeat of the same lease, and for a success the worker's completer calls (successes are
//! group-committed, and a retried one waits for a free completer call); while one of those is
//! in flight the outcome is not judged.
//!
//! Excused (what is pending is forgotten): the worker crashed or stalled (a call of a crashed
//! incarnation that ends in the tick of its crash is not heard), the store's clock jumped or the
//! store rolled back since the worker last learned its lease's deadline (the deadline moved under
//! it: a rollback undoes the heartbeats that extended the lease after its snapshot).

use super::checker::{task_key, token_items};
use super::config::HEARTBEAT_DIVISOR;
use super::world::World;
use crate::StoreClock;
use orq::heartbeat::heartbeat_interval_ms;
use orq::task::stored;
use std::collections::BTreeMap;

/// The scripts that report an outcome.
pub const REPORT_SCRIPTS: [&str; 4] = ["complete", "complete_batch", "fail", "release"];

/// The heartbeat script: a refused heartbeat is held to the same rule as a refused outcome,
/// with the heartbeat's own cadence as the longest wait.
const HEARTBEAT: &str = "heartbeat";

/// Slack on a report's next try beyond the engine's backoff (virtual ms): the calls the worker
/// makes meanwhile (each takes a virtual ms) and rounding.
pub const TRY_SLACK_MS: u64 = 30;

/// An outcome waiting for its next try.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The worker that sent it.
    pub actor: String,
    /// The script of its last try (`complete_batch` for a success).
    pub script: String,
    /// Tries so far, refused or not (the worker's backoff grows with them).
    pub tries: u32,
    /// Virtual ms the last try ended, or a call the worker waited for meanwhile.
    pub last_ms: u64,
    /// Calls of this lease in flight (a try, or a heartbeat).
    pub in_flight: u32,
}

/// Check 9's bookkeeping.
#[derive(Debug, Default)]
pub struct ReportLedger {
    /// Outcomes refused and not yet taken by the store, by (task, token).
    pub pending: BTreeMap<(String, String), Pending>,
    /// Tries of each outcome by (task, token), counted when sent.
    pub tries: BTreeMap<(String, String), u32>,
    /// Heartbeats of each lease (task, token) refused (or whose reply was lost) since its last
    /// heartbeat that reached the store: the refusal streak the worker backs off by. Kept apart
    /// from `pending`, which an outcome's entry takes over while the outcome waits, so a streak
    /// that runs through such a wait is not counted from 1 again after it.
    pub beat_streak: BTreeMap<(String, String), u32>,
    /// Per worker: its completer's calls in flight and the virtual ms the last one ended.
    pub completer: BTreeMap<String, (u32, u64)>,
    /// Calls (tries and heartbeats) of each lease (task, token) in flight now, counted whether
    /// or not an outcome of the lease is pending, so a pending outcome counts exactly the calls
    /// in flight (a heartbeat sent before the outcome's refusal and answered after it ends one
    /// of them, not the outcome's next try; found by the pull worker, seed 42).
    pub in_flight: BTreeMap<(String, String), u32>,
    /// Outcomes refused at least once and later taken by the store with the same token.
    pub delivered_after_refusal: u64,
    /// Per lease (task, token), the virtual ms its worker last reckoned its deadline from: the
    /// start of the call that leased it (the worker counts the lease from just before its call),
    /// or the end of a heartbeat of that lease that reached the store. The worker's own deadline
    /// is this plus the lease's length. (By lease, not by task: a late heartbeat of an earlier
    /// lease says nothing about the current one.)
    pub lease_seen: BTreeMap<(String, String), u64>,
    /// Virtual ms of the last event that made the workers' reckoning of their leases' deadlines
    /// wrong: a jump of the store's clock, or a lossy restart (a rollback undoes the heartbeats
    /// that extended a lease after the snapshot, so its worker believes it longer than it is).
    pub reckoning_reset_ms: Option<u64>,
}

impl ReportLedger {
    /// The worker of the lease `(task, token)` reckons its deadline from virtual `now_ms` on.
    pub fn lease_seen(&mut self, task: &str, token: &str, now_ms: u64) {
        self.lease_seen
            .insert((task.to_string(), token.to_string()), now_ms);
    }
}

/// How a call ended, for this check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallEnd {
    /// Refused before it ran (a transient refusal, or a failure before the store).
    Refused,
    /// It reached the store and its reply was delivered (whatever the reply).
    Reached,
    /// It reached the store and its reply was lost: the store took it, the caller does not know.
    ReplyLost,
    /// Dropped before it ended (its worker crashed).
    Dropped,
}

/// A call of `actor` started: count the try, and mark what the worker now waits for.
pub fn call_started(w: &World, actor: &str, script: &str, args: &[Vec<u8>]) {
    let report = REPORT_SCRIPTS.contains(&script);
    if !report && script != "heartbeat" {
        return;
    }
    let mut st = w.state.lock().unwrap();
    if st.crashed.contains(actor) {
        return;
    }
    let l = &mut st.ledger.reports;
    if script == "complete_batch" {
        l.completer.entry(actor.to_string()).or_default().0 += 1;
    }
    for item in token_items(script, args) {
        if report {
            *l.tries.entry(item.clone()).or_default() += 1;
        }
        let n = {
            let n = l.in_flight.entry(item.clone()).or_default();
            *n += 1;
            *n
        };
        if let Some(p) = l.pending.get_mut(&item) {
            p.in_flight = n;
        }
    }
}

/// A call of `actor` ended as `end`: a refused outcome becomes pending, a delivered one stops
/// being pending.
pub fn call_ended(w: &World, actor: &str, script: &str, args: &[Vec<u8>], end: CallEnd) {
    let report = REPORT_SCRIPTS.contains(&script);
    if !report && script != "heartbeat" {
        return;
    }
    let now = w.vt.elapsed_ms();
    let mut st = w.state.lock().unwrap();
    // A call of a crashed incarnation that ended in the tick of its crash: its worker is gone
    // and will never try again (its outcomes and heartbeats were forgotten at the crash).
    if st.crashed.contains(actor) {
        return;
    }
    let l = &mut st.ledger.reports;
    if script == "complete_batch" {
        let c = l.completer.entry(actor.to_string()).or_default();
        c.0 = c.0.saturating_sub(1);
        c.1 = now;
    }
    for item in token_items(script, args) {
        let in_flight = match l.in_flight.get_mut(&item) {
            Some(n) if *n > 1 => {
                *n -= 1;
                *n
            }
            _ => {
                l.in_flight.remove(&item);
                0
            }
        };
        if let Some(p) = l.pending.get_mut(&item) {
            p.in_flight = in_flight;
            p.last_ms = p.last_ms.max(now);
        }
        if !report {
            match end {
                // A heartbeat whose reply the worker got: it reckons its deadline from now on,
                // and a refused heartbeat of the lease is answered.
                CallEnd::Reached => {
                    l.beat_streak.remove(&item);
                    l.lease_seen(&item.0, &item.1, now);
                    if l.pending.get(&item).is_some_and(|p| p.script == HEARTBEAT) {
                        l.pending.remove(&item);
                    }
                }
                // Refused, or its reply lost: the worker must heartbeat again soon. While an
                // outcome of the lease is pending, the outcome's rule applies instead.
                CallEnd::Refused | CallEnd::ReplyLost => {
                    let streak = {
                        let n = l.beat_streak.entry(item.clone()).or_default();
                        *n += 1;
                        *n
                    };
                    let p = l.pending.entry(item).or_insert(Pending {
                        actor: actor.to_string(),
                        script: HEARTBEAT.to_string(),
                        tries: 0,
                        last_ms: now,
                        in_flight,
                    });
                    if p.script == HEARTBEAT {
                        p.tries = streak;
                        p.last_ms = now;
                    }
                }
                CallEnd::Dropped => {}
            }
            continue;
        }
        match end {
            CallEnd::Reached | CallEnd::ReplyLost => {
                if l.pending
                    .remove(&item)
                    .is_some_and(|p| p.script != HEARTBEAT)
                {
                    l.delivered_after_refusal += 1;
                }
            }
            CallEnd::Refused => {
                let tries = l.tries.get(&item).copied().unwrap_or(1);
                let p = l.pending.entry(item).or_insert(Pending {
                    actor: actor.to_string(),
                    script: script.to_string(),
                    tries,
                    last_ms: now,
                    in_flight,
                });
                p.script = script.to_string();
                p.tries = tries;
                p.last_ms = now;
            }
            CallEnd::Dropped => {}
        }
    }
}

/// The store's clock jumped, or the store rolled back (a lossy restart): every worker's reckoning
/// of its leases' deadlines is off (by the jump; by the heartbeats the rollback undid) until its
/// next lease or heartbeat, so outcomes and heartbeats of leases last seen before now are
/// excused.
pub fn reckoning_reset(w: &World) {
    let now = w.vt.elapsed_ms();
    w.state.lock().unwrap().ledger.reports.reckoning_reset_ms = Some(now);
    forget(w, None, false);
}

/// Excuses: forget the pending outcomes of the worker slot `name` (every incarnation: it
/// crashed) or, with `exact`, of the one actor `name` (it stalled); `None` forgets them all (the
/// store rolled back).
pub fn forget(w: &World, name: Option<&str>, exact: bool) {
    let mut st = w.state.lock().unwrap();
    st.ledger.reports.pending.retain(|_, p| match name {
        None => false,
        Some(n) if exact => p.actor != n,
        Some(n) => p.actor.split('.').next() != Some(n),
    });
}

/// Check 9 now: no pending outcome is overdue. Outcomes whose lease has ended are dropped.
pub fn check(w: &World) {
    if w.state.lock().unwrap().ledger.reports.pending.is_empty() {
        return;
    }
    let now = w.vt.elapsed_ms();
    let store_now_ms = (w.store_time.now_micros() / 1000) as i64;
    let lease_ms = w.config.lease_ms;
    let (pending, completer, seen, reset) = {
        let st = w.state.lock().unwrap();
        let l = &st.ledger.reports;
        (
            l.pending.clone(),
            l.completer.clone(),
            l.lease_seen.clone(),
            l.reckoning_reset_ms,
        )
    };
    let (status_f, token_f, exp_f) = (stored::status, stored::token, stored::lease_exp);
    for ((task, token), p) in pending {
        let key = task_key(&task);
        let r = w.store.command(&[
            b"HMGET",
            key.as_bytes(),
            status_f.as_bytes(),
            token_f.as_bytes(),
            exp_f.as_bytes(),
        ]);
        let vals = r.as_array().unwrap_or_default();
        let text = |i: usize| vals.get(i).and_then(|v| v.as_str()).unwrap_or_default();
        let lease = (task.clone(), token.clone());
        let seen_before_reset = reset.is_some_and(|r| seen.get(&lease).is_none_or(|s| *s <= r));
        if text(0) != "leased" || text(1) != token || seen_before_reset {
            let mut st = w.state.lock().unwrap();
            st.ledger.reports.pending.remove(&(task, token));
            continue;
        }
        let mut last_ms = p.last_ms;
        // A success waits for the completer without heartbeating: while the worker's completer
        // is busy, a refused heartbeat's task may be one of those waiting.
        if p.script == "complete_batch" || p.script == HEARTBEAT {
            let (busy, ended) = completer.get(&p.actor).copied().unwrap_or_default();
            if busy > 0 {
                continue;
            }
            last_ms = last_ms.max(ended);
        }
        if p.in_flight > 0 {
            continue;
        }
        // The lease's deadline in virtual ms: the store's, or the worker's own if earlier (it
        // counts from before a slow lease call), and the latest the next try may come.
        let exp: i64 = text(2).parse().unwrap_or(0);
        let mut deadline_ms = now as i64 + (exp - store_now_ms);
        if let Some(s) = seen.get(&lease) {
            deadline_ms = deadline_ms.min((s + lease_ms) as i64);
        }
        let mut backoff = orq::report::report_retry_ms(p.tries.saturating_sub(1), 0.999_999);
        if p.script == HEARTBEAT {
            backoff = backoff.min(heartbeat_interval_ms(lease_ms, HEARTBEAT_DIVISOR));
        }
        // A drifting clock's error over a lease (5 % of it): a slow worker clock reckons the
        // deadline up to this much later than the store's, and may wait until then (seed 835).
        let drift_ms = lease_ms / 20;
        let next_by = (last_ms + backoff).min((deadline_ms.max(0) as u64) + drift_ms);
        // The worker surely held the lease for live at its last try: more than that error plus
        // slack before the deadline.
        let margin = (drift_ms + TRY_SLACK_MS) as i64;
        let live_then = deadline_ms - last_ms as i64 > margin;
        if live_then && now > next_by + backoff / 10 + TRY_SLACK_MS {
            if p.script == HEARTBEAT {
                w.violate(format!(
                    "{}: the heartbeat of task {task} (token {token}) was refused ({} in a row), \
                     the worker waited for nothing after {last_ms} ms and had not heartbeated \
                     again by {now} ms although its lease was live until {deadline_ms} ms: a \
                     refusal shorter than the lease can let it expire under a running handler",
                    p.actor, p.tries
                ));
                continue;
            }
            w.violate(format!(
                "{}: the outcome of task {task} (token {token}) was refused (try {}), the \
                 worker waited for nothing after {last_ms} ms and had not sent it again by \
                 {now} ms although its lease was live until {deadline_ms} ms: the worker \
                 dropped an outcome it could still deliver",
                p.actor, p.tries
            ));
        }
    }
}
