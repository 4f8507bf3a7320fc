//! The structural invariants of one queue, as rules over one task or one tenant: check 1 (every
//! task in exactly the index its status names, with the right score; no orphan index entries; the
//! tenants and parked sets; the ready-list masks; the status counters), the budget half of check
//! 3 and the cap of check 8 (numbers of the `checker` module's header).
//!
//! Two callers give the rules their inputs: the whole-queue scan (`state_check.rs`, after a
//! restore, at intervals and at the end of a run; the fuzz targets and tests) and the incremental
//! check (`incremental.rs`, after every call, on what the call touched). One set of rules, so the
//! two cannot disagree on what an invariant is.

use super::checker::Ledger;
use crate::Hash;
use orq::task::stored as S;

/// Score of a tenant parked at its `max_inflight` in `orq:{q}:parked` (lib/park.lua's
/// PARKED_CAPPED).
pub(super) const PARKED_CAPPED: f64 = 9_007_199_254_740_991.0;

/// Priorities a ready list can have: `ready:<p>:<tenant>` with `p` in 0..PRIORITIES.
pub(super) const PRIORITIES: u8 = 10;

pub(super) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub(super) fn parse_i64(v: Option<&Vec<u8>>) -> i64 {
    v.and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|t| t.parse().ok())
        .unwrap_or(-1)
}

/// The priority and tenant of a ready list's key suffix `ready:<p>:<tenant>` (one digit `p`).
pub(super) fn ready_list(suffix: &[u8]) -> Option<(u8, &[u8])> {
    match suffix.strip_prefix(b"ready:")? {
        [d @ b'0'..=b'9', b':', tenant @ ..] => Some((d - b'0', tenant)),
        _ => None,
    }
}

/// ZSETs under the queue's prefix that are not task indexes (their members are tenants or
/// workers).
pub(super) fn is_tenant_or_worker_set(suffix: &[u8]) -> bool {
    matches!(
        suffix,
        b"tenants" | b"known_tenants" | b"parked" | b"workers"
    )
}

/// The status a task record stores (absent: `queued`).
pub(super) fn status_of(f: &Hash) -> &[u8] {
    f.get(S::status.as_bytes())
        .map_or(b"queued".as_slice(), Vec::as_slice)
}

/// The tenant a task record stores (absent: the empty name).
pub(super) fn tenant_of(f: &Hash) -> &[u8] {
    f.get(S::tenant.as_bytes())
        .map_or(b"".as_slice(), Vec::as_slice)
}

/// The index a task of `status`, `tenant` and stored `priority` field (absent: 0) belongs in, by
/// key suffix: a ready list `ready:<p>:<tenant>` (lib/task.lua's `priority_of`: a stored priority
/// that is not an integer 0..9 reads as 0) or a ZSET.
pub(super) fn index_of(status: &[u8], tenant: &[u8], priority: Option<&[u8]>) -> Vec<u8> {
    match status {
        b"queued" => {
            let p = match priority {
                Some([d @ b'0'..=b'9']) => d - b'0',
                _ => 0,
            };
            let mut k = format!("ready:{p}:").into_bytes();
            k.extend_from_slice(tenant);
            k
        }
        b"scheduled" | b"retrying" => b"scheduled".to_vec(),
        b"leased" => b"leases".to_vec(),
        b"dead" => b"dead".to_vec(),
        b"completed" => b"completed".to_vec(),
        b"cancelled" => b"cancelled".to_vec(),
        other => format!("<unknown status {}>", text(other)).into_bytes(),
    }
}

/// What the rules need to know of the queue around one task or tenant.
pub(super) trait Around {
    /// The score of `id` in the index ZSET with key suffix `index`.
    fn score_in(&self, index: &[u8], id: &[u8]) -> Option<f64>;
    /// True when `tenant` is in the tenants (eligible) set.
    fn eligible(&self, tenant: &[u8]) -> bool;
    /// `tenant`'s score in the parked set, when parked.
    fn parked(&self, tenant: &[u8]) -> Option<f64>;
    /// Bit `p` set when `tenant`'s ready list of priority `p` holds ids.
    fn ready_mask(&self, tenant: &[u8]) -> u32;
    /// Tasks of `owner` (the empty name: the whole queue) in `status`.
    fn count(&self, owner: &[u8], status: &[u8]) -> i64;
}

/// A tenant with ready work is either eligible (tenants) or held back by a limit (parked).
fn waiting(q: &impl Around, tenant: &[u8]) -> bool {
    q.eligible(tenant) || q.parked(tenant).is_some()
}

/// Checks 1 and 3 of the task `id` whose record is `f`, held by the index keys `holders` (key
/// suffixes in byte order, a ready list once per occurrence of the id in it).
pub(super) fn check_task(
    q: &impl Around,
    id: &[u8],
    f: &Hash,
    holders: &[Vec<u8>],
    ledger: Option<&Ledger>,
) -> Result<(), String> {
    let ids = text(id);
    // The stored names (orq::task::STORED_NAMES): a record holds no other, always its creation
    // time, and a status unless it is queued.
    if let Some(name) = f.iter_insertion().map(|(k, _)| k).find(|k| {
        std::str::from_utf8(k)
            .ok()
            .and_then(orq::task::field_of_stored)
            .is_none()
    }) {
        return Err(format!(
            "task {ids} stores a field {} that is no stored name",
            text(name)
        ));
    }
    if f.get(S::created_at.as_bytes()).is_none() {
        return Err(format!(
            "task {ids} has no creation time ({})",
            S::created_at
        ));
    }
    if f.get(S::status.as_bytes()).is_some_and(|s| s == b"queued") {
        return Err(format!("task {ids} stores its queued status"));
    }
    let status = status_of(f);
    let tenant = tenant_of(f);
    let status_s = text(status);
    let home = index_of(
        status,
        tenant,
        f.get(S::priority.as_bytes()).map(Vec::as_slice),
    );
    let home_s = text(&home);
    // Check 1: in its index, with the right score, and in no other.
    let in_lists: Vec<&Vec<u8>> = holders.iter().filter(|h| ready_list(h).is_some()).collect();
    let mut found = false;
    if status == b"queued" {
        if in_lists != [&home] {
            let names: Vec<String> = in_lists.iter().map(|n| text(n)).collect();
            return Err(format!(
                "task {ids} is queued but its ready lists are {names:?}, not [{home_s}]"
            ));
        }
        found = true;
    } else if let Some(name) = in_lists.first() {
        return Err(format!(
            "task {ids} is {status_s} but also in {}",
            text(name)
        ));
    }
    for name in holders.iter().filter(|h| ready_list(h).is_none()) {
        if *name != home {
            return Err(format!(
                "task {ids} is {status_s} but also in {}",
                text(name)
            ));
        }
        found = true;
        let want = match status {
            b"scheduled" | b"retrying" => Some(parse_i64(f.get(S::run_at.as_bytes()))),
            b"leased" => Some(parse_i64(f.get(S::lease_exp.as_bytes()))),
            _ => None,
        };
        if let (Some(want), Some(score)) = (want, q.score_in(name, id)) {
            if score as i64 != want {
                return Err(format!(
                    "task {ids} is {status_s} in {home_s} with score {score}, field says {want}"
                ));
            }
        }
    }
    if !found {
        return Err(format!("task {ids} is {status_s} but not in {home_s}"));
    }
    if status == b"queued" && !waiting(q, tenant) {
        return Err(format!(
            "task {ids} is queued but tenant {} is in neither the tenants nor the parked set",
            text(tenant)
        ));
    }
    // Check 3: attempt within budget, and equal to the leases the harness saw.
    // An absent field is its default (lib/task.lua's TASK_DEFAULTS: the compact record).
    let attempt = f
        .get(S::attempt.as_bytes())
        .map_or(0, |v| parse_i64(Some(v)));
    let max_retries = f
        .get(S::max_retries.as_bytes())
        .map_or(i64::from(orq::task::DEFAULT_MAX_RETRIES), |v| {
            parse_i64(Some(v))
        });
    if attempt > max_retries + 1 {
        return Err(format!(
            "task {ids} has attempt {attempt} > max_retries {max_retries} + 1"
        ));
    }
    if let Some(l) = ledger.filter(|l| !l.rolled_back) {
        let leases = i64::from(l.leases.get(&ids).copied().unwrap_or(0));
        if leases != attempt {
            return Err(format!(
                "task {ids} has attempt {attempt} but was leased {leases} times"
            ));
        }
        if status == b"dead" && attempt < max_retries + 1 && !l.permanent.contains(&ids) {
            return Err(format!(
                "task {ids} is dead after {attempt} of {} attempts without a permanent error",
                max_retries + 1
            ));
        }
    }
    Ok(())
}

/// No orphans: an id without a task record is in no index.
pub(super) fn check_orphan(id: &[u8], holders: &[Vec<u8>]) -> Result<(), String> {
    match holders.first() {
        Some(name) => Err(format!(
            "{} holds {}, which has no task hash",
            text(name),
            text(id)
        )),
        None => Ok(()),
    }
}

/// The rules of one tenant: with ready work it is eligible or parked, never both, and without
/// ready work neither; parked at its cap only when at its cap; its stored ready-list mask (`rp`,
/// lib/ready.lua) says which of its lists hold ids; its status counters equal the real counts;
/// its live leases within `max_inflight` (checked only with the harness's ledger: without it a
/// configure call may lower a cap below the live leases, which is allowed). `hash` is the
/// tenant's hash, when it has one. Returns whether the tenant is capped and exactly at its cap.
pub(super) fn check_tenant(
    q: &impl Around,
    tenant: &[u8],
    hash: Option<&Hash>,
    ledger: Option<&Ledger>,
) -> Result<bool, String> {
    let t = text(tenant);
    let mask = q.ready_mask(tenant);
    if mask != 0 && !waiting(q, tenant) {
        return Err(format!(
            "tenant {t} has ready work but is in neither the tenants nor the parked set"
        ));
    }
    if let Some(rp) = hash
        .and_then(|h| h.get(b"rp".as_slice()))
        .and_then(|v| text(v).parse::<u32>().ok())
    {
        for p in 0..u32::from(PRIORITIES) {
            let listed = mask >> p & 1 == 1;
            if listed != (rp >> p & 1 == 1) {
                return Err(format!(
                    "tenant {t} has ready-list mask {rp}, but its list of priority {p} {}",
                    if listed { "holds ids" } else { "is empty" }
                ));
            }
        }
    }
    let cap = hash.map_or(-1, |h| parse_i64(h.get(b"max_inflight".as_slice())));
    let live = q.count(tenant, b"leased");
    if mask == 0 && q.eligible(tenant) {
        return Err(format!(
            "tenant {t} is in the tenants set without ready work"
        ));
    }
    if let Some(score) = q.parked(tenant) {
        if mask == 0 {
            return Err(format!(
                "tenant {t} is in the parked set without ready work"
            ));
        }
        if q.eligible(tenant) {
            return Err(format!(
                "tenant {t} is in both the tenants and the parked set"
            ));
        }
        if score >= PARKED_CAPPED && (cap <= 0 || live < cap) {
            return Err(format!(
                "tenant {t} is parked at its cap but has {live} live leases of max_inflight {cap}"
            ));
        }
    }
    let Some(h) = hash else { return Ok(false) };
    if cap > 0 && live > cap && ledger.is_some() {
        return Err(format!(
            "tenant {t} has {live} live leases, above its max_inflight {cap}"
        ));
    }
    check_counters(q, tenant, h, &format!("tenant:{t}"))?;
    Ok(cap > 0 && live == cap)
}

/// The status counters `n:<status>` of `owner`'s hash `h` (named `name` in errors; the empty
/// owner is the queue's `stats`) equal the real counts. A tenant's hash counts no queued tasks
/// (they are its ready lists' entries, design note 55): a tenant's `n:queued` is not checked.
pub(super) fn check_counters(
    q: &impl Around,
    owner: &[u8],
    h: &Hash,
    name: &str,
) -> Result<(), String> {
    for s in orq::Status::ALL {
        if !owner.is_empty() && s == orq::Status::Queued {
            continue;
        }
        let real = q.count(owner, s.as_str().as_bytes());
        let counted = parse_i64(h.get(format!("n:{s}").as_bytes())).max(0);
        if real != counted {
            return Err(format!(
                "{name} count n:{s} is {counted}, real count {real}"
            ));
        }
    }
    Ok(())
}
