//! The whole-queue invariant scan: one pass over the store's keys of a queue, checking the
//! structural invariants the `checker` module's header numbers 1 and 3 and the cap and parked
//! rules of 8, after every call. Split from the checker because it reads the store itself rather
//! than a call and its reply; the checker re-exports it.

use super::checker::Ledger;
use super::world::{World, QUEUE};
use crate::{MemoryStore, Value as StoreValue};
use orq::task::stored as S;
use std::collections::BTreeMap;

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
/// key suffix: a ready list `ready:<p>:<tenant>` (lib/task.lua's `priority_of`: a stored priority
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

/// Score of a tenant parked at its `max_inflight` in `orq:{q}:parked` (lib/park.lua's
/// PARKED_CAPPED).
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
            // An absent field is its default (lib/task.lua's TASK_DEFAULTS: the compact record).
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
        // A tenant's ready-list mask (its hash's `rp`, lib/ready.lua), when stored, says exactly
        // which of its ready lists hold ids.
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
