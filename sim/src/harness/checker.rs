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
//! What it skips: fair share (checked by the tenancy tests), and after a lossy restart the
//! harness-side ledgers (lease counts, completions, rate windows: the rolled-back bucket has
//! forgotten leases that happened) no longer describe the rolled-back store, so only the
//! structural checks (1, 4, the cap and the pause) and liveness of surviving tasks remain.

use super::fairness::{RateWindow, RATE_EPSILON};
use super::reports::ReportLedger;
use super::world::{TenancyStats, World, QUEUE};
use crate::{MemoryStore, Value as StoreValue};
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
        let leased_by_call = match script {
            "lease" => Some(items.get(1).and_then(Resp::as_array).unwrap_or_default()),
            "complete_batch" if items.len() == 4 => {
                Some(items.get(2).and_then(Resp::as_array).unwrap_or_default())
            }
            _ => None,
        };
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
                    let fields = entry
                        .as_array()
                        .and_then(|e| e.get(1))
                        .and_then(Resp::as_array)
                        .unwrap_or_default();
                    let f = flat_map(fields);
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
                    l.reports.lease_seen(&id, token, started_ms);
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

/// The queue's state, read in one pass over the store.
#[derive(Debug, Default)]
pub struct QueueView {
    /// Task hashes by id, by field name (the stored names mapped back; an absent status of a
    /// record with a creation time is `queued`).
    pub tasks: BTreeMap<String, BTreeMap<String, String>>,
    /// ZSETs by key suffix after `orq:{q}:` (`leases`, `scheduled`, ...): member → score.
    pub zsets: BTreeMap<String, BTreeMap<String, f64>>,
    /// Other hashes by key suffix (`stats`, `tenant:t1`).
    pub hashes: BTreeMap<String, BTreeMap<String, String>>,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Read the queue's keys from the store.
pub fn view(w: &World) -> QueueView {
    let prefix = orq::keys::queue_prefix(QUEUE);
    w.store.read(|db| {
        let mut v = QueueView::default();
        for (key, value) in db.iter() {
            let key = text(key);
            let Some(suffix) = key.strip_prefix(&prefix) else {
                continue;
            };
            match value {
                StoreValue::Hash(h) => {
                    let map: BTreeMap<String, String> =
                        h.iter().map(|(k, v)| (text(k), text(v))).collect();
                    match suffix.strip_prefix("task:") {
                        Some(id) => {
                            let mut task: BTreeMap<String, String> = map
                                .into_iter()
                                .map(|(k, v)| {
                                    (orq::task::field_of_stored(&k).map_or(k, str::to_string), v)
                                })
                                .collect();
                            if task.contains_key("created_at") && !task.contains_key("status") {
                                task.insert("status".into(), "queued".into());
                            }
                            v.tasks.insert(id.to_string(), task);
                        }
                        None => {
                            v.hashes.insert(suffix.to_string(), map);
                        }
                    }
                }
                StoreValue::ZSet(z) => {
                    let members = z.iter().map(|(m, s)| (text(m), s)).collect();
                    v.zsets.insert(suffix.to_string(), members);
                }
                _ => {}
            }
        }
        v
    })
}

/// The index a task of `status`, `tenant` and stored `priority` field (absent: 0) belongs in, by
/// key suffix: a ready list `ready:<p>:<tenant>` (lib.lua's `priority_of`: a stored priority
/// that is not an integer 0..9 reads as 0) or a ZSET.
fn index_of(status: &str, tenant: &str, priority: Option<&[u8]>) -> String {
    match status {
        "queued" => {
            let p = match priority {
                Some([d @ b'0'..=b'9']) => d - b'0',
                _ => 0,
            };
            format!("ready:{p}:{tenant}")
        }
        "scheduled" | "retrying" => "scheduled".into(),
        "leased" => "leases".into(),
        "dead" => "dead".into(),
        "completed" => "completed".into(),
        "cancelled" => "cancelled".into(),
        other => format!("<unknown status {other}>"),
    }
}

fn parse_i64(v: Option<&Vec<u8>>) -> i64 {
    v.and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|t| t.parse().ok())
        .unwrap_or(-1)
}

/// Score of a tenant parked at its `max_inflight` in `orq:{q}:parked` (lib.lua's PARKED_CAPPED).
const PARKED_CAPPED: f64 = 9_007_199_254_740_991.0;

/// Checks 1, 3 and the cap of check 8 on the current state. Returns the first violation. Runs
/// after every call, so it reads the store in place without copying.
pub fn check_state(w: &World) -> Result<(), String> {
    let mut st = w.state.lock().unwrap();
    let at_cap = check_store_state(&w.store, QUEUE, Some(&st.ledger))?;
    st.ledger.tenancy.checks_at_cap += at_cap;
    Ok(())
}

/// The structural checks of `queue` on a bare store, for callers without a harness (the fuzz
/// targets, tests): check 1 (every task in exactly the index its status names, with the right
/// score; no orphan index entries; the tenants and parked sets; the status counters), the budget
/// half of check 3 (`attempt <= max_retries + 1`) and the parked-at-cap rule of check 8.
///
/// With the harness's `ledger` it also checks what only the harness knows: that `attempt` equals
/// the leases the task had, that a task died early only after a permanent error, and that no
/// tenant is above its `max_inflight` (the harness sets caps before any lease; without a ledger a
/// configure call may lower a cap below the live leases, which is allowed). Returns the number of
/// capped tenants found exactly at their cap.
pub fn check_store_state(
    store: &MemoryStore,
    queue: &str,
    ledger: Option<&Ledger>,
) -> Result<u64, String> {
    let prefix = orq::keys::queue_prefix(queue);
    store.read(|db| {
        let mut tasks: Vec<(&[u8], &crate::Hash)> = Vec::new();
        let mut zsets: Vec<(&[u8], &crate::ZSet)> = Vec::new();
        let mut lists: Vec<(&[u8], &std::collections::VecDeque<Vec<u8>>)> = Vec::new();
        let mut hashes: Vec<(&[u8], &crate::Hash)> = Vec::new();
        for (key, value) in db.iter() {
            let Some(suffix) = key.strip_prefix(prefix.as_bytes()) else {
                continue;
            };
            match value {
                StoreValue::Hash(h) => match suffix.strip_prefix(b"task:") {
                    Some(id) => tasks.push((id, h)),
                    None => hashes.push((suffix, h)),
                },
                StoreValue::ZSet(z)
                    if !matches!(
                        suffix,
                        b"tenants" | b"known_tenants" | b"parked" | b"workers"
                    ) =>
                {
                    zsets.push((suffix, z))
                }
                StoreValue::List(l) if suffix.starts_with(b"ready:") => lists.push((suffix, l)),
                _ => {}
            }
        }
        // Ready-list entries: id -> the lists holding it, once per occurrence.
        let mut listed: BTreeMap<&[u8], Vec<&[u8]>> = BTreeMap::new();
        for &(name, l) in &lists {
            for m in l.iter() {
                listed.entry(m.as_slice()).or_default().push(name);
            }
        }
        // The tenant of a ready list's key suffix `ready:<p>:<tenant>`.
        let list_tenant = |name: &[u8]| -> Vec<u8> { name.get(b"ready:0:".len()..).unwrap_or(b"").to_vec() };
        let zset = |name: &str| match db.get(format!("{prefix}{name}").as_bytes()) {
            Some(StoreValue::ZSet(z)) => Some(z),
            _ => None,
        };
        let tenants = zset("tenants");
        let parked = zset("parked");
        // A tenant with ready work is either eligible (tenants) or held back by a limit (parked).
        let waiting = |t: &[u8]| {
            tenants.is_some_and(|z| z.score(t).is_some()) || parked.is_some_and(|z| z.score(t).is_some())
        };
        let mut counts: BTreeMap<(&[u8], &[u8]), i64> = BTreeMap::new();
        for &(id, f) in &tasks {
            let ids = text(id);
            // The stored names (orq::task::STORED_NAMES): a record holds no other, always its
            // creation time, and a status unless it is queued.
            if let Some(name) = f.iter_insertion().map(|(k, _)| k).find(|k| {
                std::str::from_utf8(k).ok().and_then(orq::task::field_of_stored).is_none()
            }) {
                return Err(format!("task {} stores a field {} that is no stored name", text(id), text(name)));
            }
            if f.get(S::created_at.as_bytes()).is_none() {
                return Err(format!("task {} has no creation time ({})", text(id), S::created_at));
            }
            let status = f.get(S::status.as_bytes()).map_or(b"queued".as_slice(), Vec::as_slice);
            if f.get(S::status.as_bytes()).is_some_and(|s| s == b"queued") {
                return Err(format!("task {} stores its queued status", text(id)));
            }
            let tenant = f.get(S::tenant.as_bytes()).map(Vec::as_slice).unwrap_or(b"");
            *counts.entry((b"", status)).or_default() += 1;
            *counts.entry((tenant, status)).or_default() += 1;
            let status_s = text(status);
            let home = index_of(&status_s, &text(tenant), f.get(S::priority.as_bytes()).map(Vec::as_slice));
            // Check 1: in its index, with the right score, and in no other.
            let in_lists = listed.get(id).map_or(&[][..], Vec::as_slice);
            let mut found = false;
            if status == b"queued" {
                if in_lists != [home.as_bytes()] {
                    let names: Vec<String> = in_lists.iter().map(|n| text(n)).collect();
                    return Err(format!("task {ids} is queued but its ready lists are {names:?}, not [{home}]"));
                }
                found = true;
            } else if let Some(name) = in_lists.first() {
                return Err(format!("task {ids} is {status_s} but also in {}", text(name)));
            }
            for &(name, z) in &zsets {
                let here = z.score(id);
                if name == home.as_bytes() {
                    let Some(score) = here else { continue };
                    found = true;
                    let want = match status {
                        b"scheduled" | b"retrying" => Some(parse_i64(f.get(S::run_at.as_bytes()))),
                        b"leased" => Some(parse_i64(f.get(S::lease_exp.as_bytes()))),
                        _ => None,
                    };
                    if let Some(want) = want {
                        if score as i64 != want {
                            return Err(format!(
                                "task {ids} is {status_s} in {home} with score {score}, field says {want}"
                            ));
                        }
                    }
                } else if here.is_some() {
                    return Err(format!("task {ids} is {status_s} but also in {}", text(name)));
                }
            }
            if !found {
                return Err(format!("task {ids} is {status_s} but not in {home}"));
            }
            if status == b"queued" && !waiting(tenant) {
                return Err(format!(
                    "task {ids} is queued but tenant {} is in neither the tenants nor the parked set",
                    text(tenant)
                ));
            }
            // Check 3: attempt within budget, and equal to the leases the harness saw.
            // An absent field is its default (lib.lua's TASK_DEFAULTS: the compact record).
            let attempt = f.get(S::attempt.as_bytes()).map_or(0, |v| parse_i64(Some(v)));
            let max_retries = f
                .get(S::max_retries.as_bytes())
                .map_or(i64::from(orq::task::DEFAULT_MAX_RETRIES), |v| parse_i64(Some(v)));
            if attempt > max_retries + 1 {
                return Err(format!("task {ids} has attempt {attempt} > max_retries {max_retries} + 1"));
            }
            if let Some(l) = ledger.filter(|l| !l.rolled_back) {
                let leases = i64::from(l.leases.get(&ids).copied().unwrap_or(0));
                if leases != attempt {
                    return Err(format!("task {ids} has attempt {attempt} but was leased {leases} times"));
                }
                if status == b"dead" && attempt < max_retries + 1 && !l.permanent.contains(&ids) {
                    return Err(format!(
                        "task {ids} is dead after {attempt} of {} attempts without a permanent error",
                        max_retries + 1
                    ));
                }
            }
        }
        // No orphans: every index entry has its task, with the matching status.
        let by_id: BTreeMap<&[u8], &crate::Hash> = tasks.iter().copied().collect();
        for &(name, z) in &zsets {
            for (m, _) in z.iter() {
                let Some(f) = by_id.get(m) else {
                    return Err(format!("{} holds {}, which has no task hash", text(name), text(m)));
                };
                let status = text(f.get(S::status.as_bytes()).map_or(b"queued".as_slice(), Vec::as_slice));
                let tenant = text(f.get(S::tenant.as_bytes()).map(Vec::as_slice).unwrap_or(b""));
                let priority = f.get(S::priority.as_bytes()).map(Vec::as_slice);
                if index_of(&status, &tenant, priority).as_bytes() != name {
                    return Err(format!("{} holds {}, which is {status}", text(name), text(m)));
                }
            }
        }
        for (m, names) in &listed {
            if !by_id.contains_key(m) {
                return Err(format!("{} holds {}, which has no task hash", text(names[0]), text(m)));
            }
        }
        // The tenants and parked sets together hold exactly the tenants with ready work, each in
        // one of them; a tenant parked at its cap is at its cap.
        for &(name, l) in &lists {
            let t = list_tenant(name);
            if !l.is_empty() && !waiting(&t) {
                return Err(format!(
                    "tenant {} has ready work but is in neither the tenants nor the parked set",
                    text(&t)
                ));
            }
        }
        // A tenant's ready-list mask (its hash's `rp`, lib.lua), when stored, says exactly which
        // of its ready lists hold ids.
        for &(name, h) in &hashes {
            let Some(t) = name.strip_prefix(b"tenant:") else {
                continue;
            };
            let Some(mask) = h.get(b"rp".as_slice()).and_then(|v| text(v).parse::<u32>().ok()) else {
                continue;
            };
            for p in 0..10u32 {
                let key = format!("ready:{p}:{}", text(t));
                let listed = lists.iter().any(|(n, l)| *n == key.as_bytes() && !l.is_empty());
                if listed != (mask >> p & 1 == 1) {
                    return Err(format!(
                        "tenant {} has ready-list mask {mask}, but its list of priority {p} {}",
                        text(t),
                        if listed { "holds ids" } else { "is empty" }
                    ));
                }
            }
        }
        for (set, name) in [(tenants, "tenants"), (parked, "parked")] {
            for (t, score) in set.iter().flat_map(|z| z.iter()) {
                let ready = lists.iter().find(|(n, l)| list_tenant(n) == t && !l.is_empty());
                if ready.is_none() {
                    return Err(format!("tenant {} is in the {name} set without ready work", text(t)));
                }
                if name == "parked" && tenants.is_some_and(|z| z.score(t).is_some()) {
                    return Err(format!("tenant {} is in both the tenants and the parked set", text(t)));
                }
                if name == "parked" && score >= PARKED_CAPPED {
                    let h = hashes.iter().find(|(n, _)| n.strip_prefix(b"tenant:") == Some(t));
                    let cap = h.map_or(-1, |(_, h)| parse_i64(h.get(b"max_inflight".as_slice())));
                    let live = counts.get(&(t, b"leased".as_slice())).copied().unwrap_or(0);
                    if cap <= 0 || live < cap {
                        return Err(format!(
                            "tenant {} is parked at its cap but has {live} live leases of max_inflight {cap}",
                            text(t)
                        ));
                    }
                }
            }
        }
        // Counters equal the real counts; no tenant above its max_inflight.
        let mut at_cap = 0;
        for &(name, h) in &hashes {
            let owner: &[u8] = if name == b"stats" {
                b""
            } else if let Some(t) = name.strip_prefix(b"tenant:") {
                t
            } else {
                continue;
            };
            let cap = parse_i64(h.get(b"max_inflight".as_slice()));
            if !owner.is_empty() && cap > 0 {
                let live = counts.get(&(owner, b"leased".as_slice())).copied().unwrap_or(0);
                if live > cap && ledger.is_some() {
                    return Err(format!(
                        "tenant {} has {live} live leases, above its max_inflight {cap}",
                        text(owner)
                    ));
                }
                if live == cap {
                    at_cap += 1;
                }
            }
            for s in orq::Status::ALL {
                let real = counts.get(&(owner, s.as_str().as_bytes())).copied().unwrap_or(0);
                let counted = parse_i64(h.get(format!("n:{s}").as_bytes())).max(0);
                if real != counted {
                    return Err(format!(
                        "{} count n:{s} is {counted}, real count {real}",
                        text(name)
                    ));
                }
            }
        }
        Ok(at_cap)
    })
}

/// End-of-run accounting (check 5 and the completion side of check 7). Returns the counts by
/// final status and the number of accepted tasks lost to a rollback.
pub fn check_end(w: &World) -> Result<(u64, u64, u64, u64), String> {
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
/// status (at most 10).
pub fn unfinished(w: &World) -> Vec<(String, String)> {
    let v = view(w);
    let st = w.state.lock().unwrap();
    st.ledger
        .accepted
        .keys()
        .filter_map(|id| {
            let status = v.tasks.get(id)?.get("status").cloned().unwrap_or_default();
            (!matches!(status.as_str(), "completed" | "dead" | "cancelled"))
                .then(|| (id.clone(), status))
        })
        .take(10)
        .collect()
}
