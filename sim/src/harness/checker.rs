//! The invariant checker. It verifies, after every script call, the invariants of DESIGN.md
//! (Simulation) by reading the store's state directly, plus what only the harness can see: which
//! token each applied transition presented, how many leases each task had, which side effects
//! handlers performed. At the end of a run it checks the accounting.
//!
//! What it checks:
//! 1. every task is in exactly the index its status names, with the right score, and every index
//!    entry has its task (no orphans); the status counters equal the real counts;
//! 2. an applied heartbeat / complete / fail / release presented the task's current token while
//!    the task was leased; a task is completed at most once;
//! 3. `attempt` equals the leases the task had since it was (re)queued fresh, never exceeds
//!    `max_retries + 1`; a task is dead early only after a permanent error;
//! 4. no task is leased before its run_at by the store's clock (its highest reading so far: a
//!    clock that steps back does not make a due task undue);
//! 5. (end of run) every accepted task is completed, dead or cancelled;
//! 7. a handler never performs its side effect after a heartbeat told its worker the lease was
//!    lost; each completion's token produced a side effect;
//! 9. an outcome the store refused transiently (or that failed before reaching it) is sent again
//!    with the same token while its lease can be live, within the engine's own report backoff
//!    (in [`super::reports`]). A refusal never runs the call, so it loses no task and spends no
//!    attempt: checks 3 and 5 hold through refusals;
//! 8. tenancy: a tenant's live leases (tasks whose status is `leased`) never exceed its
//!    `max_inflight`, after every call; a `lease` call on a paused queue returns no task; a
//!    rate-limited tenant never gets more than `burst + rate_per_s × t / 1000` leases in any
//!    window of length t ms, every window checked as each lease happens.
//!
//! The rate check measures t as virtual time plus every forward jump of the store's clock so far
//! ("bucket time"). The bucket refills from the store's clock: a forward jump refills it at once
//! (so it counts as time), a backward step refills nothing until the clock moves again (so it
//! does not count), and after either the bucket refills at the clock's rate. Bucket time is
//! therefore monotone and the bound is exact under clock jumps.
//!
//! Checks 1, 3 (its budget half) and the cap of 8 are rules over one task or tenant
//! (`rules.rs`), run after each call for what it touched and over the whole queue every
//! [`FULL_CHECK_EVERY`](super::FULL_CHECK_EVERY) calls and at the end (`state_check.rs`,
//! re-exported here; design note 45); check 9 lives in [`super::reports`].
//!
//! What it skips: fair share (checked by the tenancy tests), and after a lossy restart the
//! harness-side ledgers (lease counts, completions, rate windows: the rolled-back bucket has
//! forgotten leases that happened) no longer describe the rolled-back store, so only the
//! structural checks (1, 4, the cap and the pause) and liveness of surviving tasks remain.

use super::fairness::{RateWindow, RATE_EPSILON};
use super::reports::ReportLedger;
pub use super::state_check::{check_state, check_store_state, view, QueueView};
use super::world::{TenancyStats, World, QUEUE};
use crate::Value as StoreValue;
use orq::task::stored as S;
use orq::Resp;
use std::collections::{BTreeMap, BTreeSet};

/// What the harness knows that the store does not.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Tasks the client saw accepted, with the virtual ms of acceptance.
    pub accepted: BTreeMap<String, u64>,
    /// Leases of each task since it was last queued with a fresh budget (= its expected attempt).
    pub leases: BTreeMap<String, u32>,
    /// The token of each task's applied completion.
    pub completions: BTreeMap<String, String>,
    /// Tasks whose last applied failure was permanent.
    pub permanent: BTreeSet<String>,
    /// (task, token) pairs a heartbeat or report told their worker were no longer valid. A token
    /// is unique per task, not across tasks: one lease call gives its tasks the same random bits.
    pub lost_tokens: BTreeSet<(String, String)>,
    /// (task, token) pairs whose handler performed its side effect.
    pub effect_tokens: BTreeSet<(String, String)>,
    /// Side effects performed.
    pub effects: u64,
    /// The highest store time any reply carried (ms): the store's clock may step back, but a
    /// task that was due stays due.
    pub store_now_max: i64,
    /// Set after a lossy restart: the ledgers above no longer describe the store.
    pub rolled_back: bool,
    /// Virtual ms of the rollback point: tasks accepted after it may be lost.
    pub rollback_point_ms: Option<u64>,
    /// Sum of the store clock's forward jumps so far (ms): bucket time is virtual time plus this.
    pub forward_jumps_ms: u64,
    /// Per rate-limited tenant, the window check of its leases in bucket time (check 8).
    pub rate_windows: BTreeMap<String, RateWindow>,
    /// Counters of the tenancy checks.
    pub tenancy: TenancyStats,
    /// What check 9 tracks: outcomes refused and waiting for their next try.
    pub reports: ReportLedger,
}

/// The task's status and token before a call, for each item of a call that presents a token.
#[derive(Debug, Clone)]
pub struct Pre {
    id: String,
    token: String,
    status: Option<String>,
    current_token: Option<String>,
}

pub(super) fn task_key(id: &str) -> String {
    orq::keys::task_key(QUEUE, id)
}

fn arg(args: &[Vec<u8>], i: usize) -> String {
    args.get(i)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .unwrap_or_default()
}

/// The (task id, lease token) pairs a call presents: one for heartbeat / complete / fail /
/// release (ARGV 1 and 2), one per item for complete_batch (triples after its three leading
/// arguments), none for the other scripts.
pub(super) fn token_items(script: &str, args: &[Vec<u8>]) -> Vec<(String, String)> {
    match script {
        "heartbeat" | "complete" | "fail" | "release" => vec![(arg(args, 0), arg(args, 1))],
        "complete_batch" => {
            let n: usize = arg(args, 2).parse().unwrap_or(0);
            (0..n.min(args.len() / 3))
                .map(|i| (arg(args, 3 + 3 * i), arg(args, 4 + 3 * i)))
                .collect()
        }
        _ => Vec::new(),
    }
}

/// How a call ended for each of its token items: `(error code, outcome text)`. A whole-call
/// error reply is every item's error.
fn item_replies<'a>(
    script: &str,
    reply: &'a Resp,
    n: usize,
) -> Vec<(Option<&'a str>, Option<&'a str>)> {
    if let Some(code) = error_code(reply) {
        return vec![(Some(code), None); n];
    }
    if script != "complete_batch" {
        return vec![(None, outcome(reply)); n];
    }
    let outcomes = reply
        .as_array()
        .and_then(|a| a.get(1))
        .and_then(Resp::as_array)
        .unwrap_or_default();
    (0..n)
        .map(|i| match outcomes.get(i).and_then(Resp::as_str) {
            Some("completed") => (None, Some("completed")),
            Some("again") => (None, Some("again")),
            Some(text) => (text.split(' ').next(), None),
            None => (None, None),
        })
        .collect()
}

/// Record that a reply telling its caller that a lease is gone (STALE or CANCELLED) was
/// delivered: from then on, that lease's handler must not perform its side effect. A reply that
/// was lost tells nobody anything, so the store wrapper calls this only for delivered replies.
pub fn delivered(w: &World, script: &str, args: &[Vec<u8>], reply: &Resp) {
    let items = token_items(script, args);
    let replies = item_replies(script, reply, items.len());
    for ((task, token), (code, _)) in items.into_iter().zip(replies) {
        if !matches!(code, Some("STALE" | "CANCELLED")) {
            continue;
        }
        w.state
            .lock()
            .unwrap()
            .ledger
            .lost_tokens
            .insert((task.clone(), token.clone()));
        w.event(
            "harness",
            "told_lost",
            Some(&task),
            serde_json::json!({"script": script, "token": token}),
        );
    }
}

/// Read each token item's task status and token before a call that presents tokens.
pub fn pre_call(w: &World, script: &str, args: &[Vec<u8>]) -> Vec<Pre> {
    token_items(script, args)
        .into_iter()
        .map(|(id, token)| {
            let key = task_key(&id);
            let r = w.store.command(&[
                b"HMGET",
                key.as_bytes(),
                S::status.as_bytes(),
                S::token.as_bytes(),
                S::created_at.as_bytes(),
            ]);
            let vals = r.as_array().unwrap_or_default();
            let text = |i: usize| vals.get(i).and_then(|v| v.as_str()).map(str::to_string);
            // A record without a status is queued.
            let status = text(0).or_else(|| text(2).map(|_| "queued".to_string()));
            Pre {
                id,
                token,
                status,
                current_token: text(1),
            }
        })
        .collect()
}

/// A reply's second item as text (`'completed'`, `'again'`, ...).
fn outcome(reply: &Resp) -> Option<&str> {
    reply.as_array()?.get(1)?.as_str()
}

fn error_code(reply: &Resp) -> Option<&str> {
    match reply {
        Resp::Error(e) => e.split(' ').next(),
        _ => None,
    }
}

/// Bookkeeping and the per-call checks after a call.
pub fn post_call(
    w: &World,
    actor: &str,
    script: &str,
    args: &[Vec<u8>],
    reply: &Resp,
    pre: Vec<Pre>,
) {
    let mut violations = Vec::new();
    {
        let mut st = w.state.lock().unwrap();
        let started_ms = st.call_started_ms;
        let l = &mut st.ledger;
        if let Some(code) = error_code(reply) {
            if !matches!(code, "STALE" | "CANCELLED" | "NOTFOUND" | "CONFLICT") {
                violations.push(format!(
                    "{actor}: {script} answered an unexpected error: {reply:?}"
                ));
            }
        }
        let replies = item_replies(script, reply, pre.len());
        for (p, (code, outcome)) in pre.iter().zip(replies) {
            if let Some(code) = code {
                if !matches!(code, "STALE" | "CANCELLED" | "NOTFOUND" | "CONFLICT") {
                    violations.push(format!(
                        "{actor}: {script} of task {} answered an unexpected error: {reply:?}",
                        p.id
                    ));
                }
            }
            // Check 2: an applied transition presented the current token of a leased task.
            let applied = match script {
                "heartbeat" => reply.as_array().is_some(),
                "complete" | "complete_batch" => outcome == Some("completed"),
                "fail" => matches!(outcome, Some("retrying" | "dead")),
                "release" => outcome == Some("released"),
                _ => false,
            };
            if !applied {
                continue;
            }
            let token = &p.token;
            if p.status.as_deref() != Some("leased") || p.current_token.as_deref() != Some(token) {
                violations.push(format!(
                    "{actor}: {script} of task {} was applied with token {token} while the task was \
                     {:?} with token {:?}",
                    p.id, p.status, p.current_token
                ));
            }
            match script {
                "complete" | "complete_batch" => {
                    if let Some(prev) = l.completions.insert(p.id.clone(), token.clone()) {
                        if !l.rolled_back {
                            violations.push(format!(
                                "task {} completed twice (tokens {prev} and {token})",
                                p.id
                            ));
                        }
                    }
                }
                "fail" => {
                    if arg(args, 3) == "0" {
                        l.permanent.insert(p.id.clone());
                    } else {
                        l.permanent.remove(&p.id);
                    }
                }
                "release" => {
                    if let Some(n) = l.leases.get_mut(&p.id) {
                        *n = n.saturating_sub(1);
                    }
                }
                _ => {}
            }
        }
        if let Some(now) = reply
            .as_array()
            .and_then(|a| a.first())
            .and_then(Resp::as_int)
        {
            l.store_now_max = l.store_now_max.max(now);
        }
        // The tasks a call leased: a lease's second item, or the third of a complete_batch
        // that also leased (four items).
        let items = reply.as_array().unwrap_or_default();
        // The leased tasks, one slice per task (orq::ops::leased_entries).
        let leased_by_call = match script {
            "lease" => Some(items.get(1)),
            "complete_batch" if items.len() == 4 => Some(items.get(2)),
            _ => None,
        }
        .map(|tasks| {
            tasks
                .and_then(Resp::as_array)
                .and_then(orq::ops::leased_entries)
                .map(|e| e.collect::<Vec<_>>())
                .unwrap_or_default()
        });
        if let Some(leased) = leased_by_call {
            {
                let now = l.store_now_max;
                // Check 8: a paused queue leases nothing. The call is atomic and nothing runs
                // between it and this read, so the flag read now is the one the script saw.
                let config = orq::keys::QueueKey::Config.of(QUEUE);
                let paused = w
                    .store
                    .command(&[b"HGET", config.as_bytes(), b"paused"])
                    .as_str()
                    == Some("1");
                if paused {
                    l.tenancy.lease_calls_paused += 1;
                    if !leased.is_empty() {
                        violations.push(format!(
                            "{actor}: {script} on a paused queue leased {} task(s)",
                            leased.len()
                        ));
                    }
                }
                let bucket_ms = w.vt.elapsed_ms() + l.forward_jumps_ms;
                for entry in leased {
                    let fields = orq::ops::leased_fields(entry).unwrap_or_default();
                    let f = flat_map(&fields);
                    let id = f.get("id").cloned().unwrap_or_default();
                    let run_at: i64 = f.get("run_at").and_then(|v| v.parse().ok()).unwrap_or(0);
                    // Check 4: never leased before run_at by the store's clock. The clock may
                    // step back after a task fell due; the task stays due, so the check uses the
                    // highest store time seen.
                    if now < run_at {
                        violations.push(format!(
                            "{actor}: task {id} leased at store time {now} before its run_at {run_at}"
                        ));
                    }
                    // Check 8: the token bucket's bound over every window of this tenant.
                    let tenant = f.get("tenant").map(String::as_str).unwrap_or_default();
                    if let (false, Some(rw)) = (l.rolled_back, l.rate_windows.get_mut(tenant)) {
                        let excess = rw.record(bucket_ms);
                        l.tenancy.rate_leases_checked += 1;
                        let worst = l.tenancy.rate_excess_max.get_or_insert(excess);
                        *worst = worst.max(excess);
                        if excess > RATE_EPSILON {
                            let (from, to, n) = rw.excess_window;
                            violations.push(format!(
                                "{actor}: tenant {tenant} got {n} leases in {} ms of bucket time \
                                 ({from}..={to}), above burst {} + rate {}/s",
                                to - from,
                                rw.burst,
                                rw.rate_per_s
                            ));
                        }
                    }
                    // The reply carries the record as it was before the lease (ops.rs,
                    // LeaseWrite): the new token is read back; nothing ran since the call.
                    let token_field = S::token;
                    let token = w.store.command(&[
                        b"HGET",
                        task_key(&id).as_bytes(),
                        token_field.as_bytes(),
                    ]);
                    let token = token.as_str().unwrap_or_default();
                    // The deadline a worker can know: the Rust worker counts its lease from just
                    // before its store call; a pull worker's HTTP call may wait for work before
                    // the store call that leases, and it counts from the answer, which comes as
                    // the store runs the call: the store's own deadline (design note 59).
                    let seen_ms = if super::pull::is_pull_actor(actor) {
                        w.vt.elapsed_ms()
                    } else {
                        started_ms
                    };
                    l.reports.lease_seen(&id, token, seen_ms);
                    *l.leases.entry(id).or_default() += 1;
                }
            }
        }
        match script {
            "reap" => {}
            "replay" => {
                let results = reply
                    .as_array()
                    .and_then(|a| a.get(1))
                    .and_then(Resp::as_array)
                    .unwrap_or_default();
                if arg(args, 0) == "ids" {
                    for (i, r) in results.iter().enumerate() {
                        if r.as_str() == Some("replayed") {
                            let id = arg(args, i + 1);
                            l.leases.insert(id.clone(), 0);
                            l.permanent.remove(&id);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    for v in violations {
        w.violate(v);
    }
}

/// Record a handler's side effect. Check 7: its token must not be one its worker was told is
/// lost (a worker must abort a handler whose lease is gone).
pub fn side_effect(w: &World, task: &str, token: &str, worker: &str) {
    let lost = {
        let mut st = w.state.lock().unwrap();
        st.ledger.effects += 1;
        let key = (task.to_string(), token.to_string());
        let lost = st.ledger.lost_tokens.contains(&key);
        st.ledger.effect_tokens.insert(key);
        lost
    };
    w.event(
        worker,
        "side_effect",
        Some(task),
        serde_json::json!({"token": token}),
    );
    if lost {
        w.violate(format!(
            "{worker}: handler of task {task} performed its side effect after its worker was told \
             lease {token} was lost"
        ));
    }
}

/// A task record, flat as replies carry it (stored names, then `id`), by field name.
fn flat_map(fields: &[Resp]) -> BTreeMap<String, String> {
    fields
        .chunks(2)
        .filter_map(|p| match p {
            [k, v] => Some((k.as_str()?, v.as_str().unwrap_or_default().to_string())),
            _ => None,
        })
        .map(|(k, v)| (orq::task::field_of_stored(k).unwrap_or(k).to_string(), v))
        .collect()
}

/// End-of-run accounting (check 5 and the completion side of check 7). Returns the counts by
/// final status and the number of accepted tasks lost to a rollback.
pub fn check_end(w: &World) -> Result<(u64, u64, u64, u64), String> {
    {
        let st = w.state.lock().unwrap();
        check_store_state(&w.store, QUEUE, Some(&st.ledger))?;
    }
    let v = view(w);
    let st = w.state.lock().unwrap();
    let l = &st.ledger;
    let (mut completed, mut dead, mut cancelled, mut lost) = (0, 0, 0, 0);
    for (id, accepted_ms) in &l.accepted {
        let Some(f) = v.tasks.get(id) else {
            match l.rollback_point_ms {
                Some(p) if *accepted_ms >= p => {
                    lost += 1;
                    continue;
                }
                _ => return Err(format!("accepted task {id} is gone from the store")),
            }
        };
        match f.get("status").map(String::as_str) {
            Some("completed") => {
                completed += 1;
                if !l.rolled_back {
                    let token = l.completions.get(id);
                    match token {
                        None => {
                            return Err(format!(
                                "task {id} is completed but no complete was applied"
                            ))
                        }
                        Some(t) if !l.effect_tokens.contains(&(id.clone(), t.clone())) => {
                            return Err(format!(
                                "task {id} was completed by token {t}, whose handler never ran"
                            ))
                        }
                        _ => {}
                    }
                }
            }
            Some("dead") => dead += 1,
            Some("cancelled") => cancelled += 1,
            other => {
                return Err(format!(
                    "task {id} is still {other:?} at the end of the run"
                ))
            }
        }
    }
    for id in v.tasks.keys() {
        if !l.accepted.contains_key(id) {
            return Err(format!(
                "task {id} is in the store but the client never saw it accepted"
            ));
        }
    }
    Ok((completed, dead, cancelled, lost))
}

/// The accepted tasks still in the store that are not completed, dead or cancelled, with their
/// status (at most 10). Polled through the liveness phase, so it reads each accepted task's
/// status in place rather than the whole queue.
pub fn unfinished(w: &World) -> Vec<(String, String)> {
    let accepted: Vec<String> = w
        .state
        .lock()
        .unwrap()
        .ledger
        .accepted
        .keys()
        .cloned()
        .collect();
    // One key buffer: the task key prefix, then each id (this runs every 100 virtual ms over
    // every accepted task, so no allocation per task that is done).
    let mut key = task_key("");
    let prefix = key.len();
    w.store.read(|db| {
        let mut left = Vec::new();
        for id in accepted {
            key.truncate(prefix);
            key.push_str(&id);
            let Some(StoreValue::Hash(h)) = db.get(key.as_bytes()) else {
                continue;
            };
            let status: &[u8] = h.get(S::status.as_bytes()).map_or(b"queued", |s| s);
            if matches!(status, b"completed" | b"dead" | b"cancelled") {
                continue;
            }
            left.push((id, String::from_utf8_lossy(status).into_owned()));
            if left.len() == 10 {
                break;
            }
        }
        left
    })
}
