//! The structural invariants of the queue (the `checker` module's header numbers 1 and 3 and the
//! cap and parked rules of 8) after every call: on what the call touched, with the whole queue
//! checked at intervals, after a restore and at the end of a run. The rules are in
//! [`rules`](super::rules), the checker's copy of the indexes in [`shadow`](super::shadow). Split
//! from the checker because it reads the store itself rather than a call and its reply; the
//! checker re-exports it. [`view`] reads the queue for the end-of-run accounting.

use super::checker::Ledger;
use super::rules::{check_counters, check_orphan, check_task, check_tenant, Around};
use super::shadow::{Affected, Shadow};
use super::world::{World, QUEUE};
use crate::{Db, MemoryStore, Touched, Value as StoreValue};
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

/// Checks 1, 3 and the cap of check 8 after a call, on what it touched: the keys the store
/// reports written since the last check are re-read into the checker's copy of the queue's
/// indexes ([`Shadow`]) and the rules run for every task, tenant and counter they touch. Every
/// [`SimConfig::full_check_every`](super::SimConfig::full_check_every) calls, and after a restore, the whole queue is checked instead and the
/// copy compared with a fresh one. Returns the first violation.
pub fn check_state(w: &World) -> Result<(), String> {
    let calls = w.calls.load(std::sync::atomic::Ordering::Relaxed);
    let full = calls % w.config.full_check_every.max(1) == 0;
    let mut st = w.state.lock().unwrap();
    let st = &mut *st;
    let prefix = orq::keys::queue_prefix(QUEUE);
    let at_cap = w
        .store
        .read_touched(|db, touched| {
            check_touched(
                db,
                touched,
                &mut st.shadow,
                prefix.as_bytes(),
                Some(&st.ledger),
                full,
            )
        })
        .map_err(|e| e.replace("{calls}", &calls.to_string()))?;
    st.ledger.tenancy.checks_at_cap += at_cap;
    Ok(())
}

/// The check after a call on `db`, which wrote the keys `touched` since the last one: the rules
/// for what they touched, kept in `shadow`; or, when `full`, when there is no copy yet or the
/// data was replaced (or tracking is off), the whole queue under `prefix`, comparing the kept
/// copy with a fresh one. Returns the number of capped tenants found exactly at their cap.
pub(super) fn check_touched(
    db: &Db,
    touched: Option<Touched>,
    shadow: &mut Option<Shadow>,
    prefix: &[u8],
    ledger: Option<&Ledger>,
    full: bool,
) -> Result<u64, String> {
    let suffixes = |t: &Touched| -> Vec<Vec<u8>> {
        t.keys
            .iter()
            .filter_map(|k| k.strip_prefix(prefix))
            .map(<[u8]>::to_vec)
            .collect()
    };
    match (shadow.as_mut(), touched) {
        (Some(kept), Some(t)) if !t.all && !full => {
            let a = kept.update(db, suffixes(&t).iter().map(Vec::as_slice));
            check_affected(db, kept, &a, ledger)
        }
        (old, touched) => {
            let (fresh, a) = Shadow::build(db, prefix);
            // The kept copy, brought up to date, must equal the fresh one (unless the data was
            // replaced).
            let drift = match (old, touched) {
                (Some(old), Some(t)) if !t.all => {
                    old.update(db, suffixes(&t).iter().map(Vec::as_slice));
                    old.differences(&fresh)
                }
                _ => Vec::new(),
            };
            let at_cap = check_affected(db, &fresh, &a, ledger);
            *shadow = Some(fresh);
            if !drift.is_empty() {
                return Err(format!(
                    "the incremental checker's copy of the indexes differs from the store at \
                     call {{calls}} in its {} (a checker bug: a write it was not told of)",
                    drift.join(", ")
                ));
            }
            at_cap
        }
    }
}

/// The tenant hash's fields whose presence shows that the known tenants list the tenant (the
/// admission fields `enqueue` reads).
const LISTED_BY: [&[u8]; 4] = [b"max_queued", b"n:scheduled", b"n:retrying", b"rp"];

/// The rules for everything in `a`, on `db` and its copy `shadow`. Returns the number of capped
/// tenants found exactly at their cap.
fn check_affected(
    db: &Db,
    shadow: &Shadow,
    a: &Affected,
    ledger: Option<&Ledger>,
) -> Result<u64, String> {
    let mut key = shadow.prefix().to_vec();
    let base = key.len();
    let hash_at = |key: &mut Vec<u8>, parts: &[&[u8]]| {
        key.truncate(base);
        for p in parts {
            key.extend_from_slice(p);
        }
        match db.get(key) {
            Some(StoreValue::Hash(h)) => Some(h),
            _ => None,
        }
    };
    for id in &a.ids {
        match hash_at(&mut key, &[b"task:", id]) {
            Some(f) => check_task(shadow, id, f, shadow.holders(id), ledger)?,
            None => check_orphan(id, shadow.holders(id))?,
        }
    }
    let mut at_cap = 0;
    let mut capped = 0;
    for t in &a.tenants {
        let h = hash_at(&mut key, &[b"tenant:", t]);
        at_cap += u64::from(check_tenant(shadow, t, h, ledger)?);
        capped += u64::from(h.is_some_and(|h| h.get(b"max_queued".as_slice()).is_some()));
        // A submit skips the known tenants' ZSCORE for a tenant whose hash has one of these
        // fields, and reads nothing of a tenant whose ready lists it adds to all held ids
        // (lua/scripts/enqueue.lua): every call that writes such a field or fills a list of an
        // unlisted tenant lists the tenant first.
        let fields: Vec<String> = h.map_or_else(Vec::new, |h| {
            LISTED_BY
                .iter()
                .filter(|f| h.get(**f).is_some())
                .map(|f| text(f))
                .collect()
        });
        let ready = shadow.ready_mask(t) != 0;
        if !fields.is_empty() || ready {
            key.truncate(base);
            key.extend_from_slice(b"known_tenants");
            if !matches!(db.get(&key), Some(StoreValue::ZSet(z)) if z.score(t).is_some()) {
                let why = if fields.is_empty() {
                    "ready tasks".to_string()
                } else {
                    format!("a hash with {}", fields.join(", "))
                };
                return Err(format!(
                    "tenant {} has {why} but is not in the known tenants",
                    text(t)
                ));
            }
        }
    }
    if a.stats || capped > 0 {
        if let Some(h) = hash_at(&mut key, &[b"stats"]) {
            if a.stats {
                check_counters(shadow, b"", h, "stats")?;
            }
            // The count of capped tenants (lua/scripts/lib/capped.lua), when a whole number, is at
            // least the capped tenants found (all of them when the whole queue is checked): a
            // submit reads no tenant's cap while it is 0. (Damage may break it, as it may break
            // every rule here: the fuzz targets stop checking at their first planted damage.)
            let stored = h
                .get(b"capped".as_slice())
                .and_then(|v| text(v).parse::<u64>().ok());
            if let Some(n) = stored {
                if capped > n {
                    return Err(format!(
                        "the stats hash counts {n} capped tenants, but {capped} tenant hashes \
                         have a max_queued"
                    ));
                }
            }
        }
    }
    Ok(at_cap)
}

/// The structural checks of `queue` on a bare store, for callers without a harness (the fuzz
/// targets, tests): check 1 (every task in exactly the index its status names, with the right
/// score; no orphan index entries; the tenants and parked sets; the status counters), the budget
/// half of check 3 (`attempt <= max_retries + 1`) and the parked-at-cap rule of check 8, over the
/// whole queue ([`rules`](super::rules)).
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
        let (shadow, a) = Shadow::build(db, prefix.as_bytes());
        check_affected(db, &shadow, &a, ledger)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;
    use std::sync::Arc;

    const PREFIX: &[u8] = b"orq:{q}:";

    fn store() -> MemoryStore {
        let s = MemoryStore::new(Arc::new(ManualClock::new(1_700_000_000_000_000)));
        s.track_touched(true);
        s
    }

    fn check(store: &MemoryStore, shadow: &mut Option<Shadow>, full: bool) -> Result<u64, String> {
        store.read_touched(|db, t| check_touched(db, t, shadow, PREFIX, None, full))
    }

    // Goal: the incremental check sees what a call wrote. Method: an index entry without its
    // task, written after the copy was built, is reported at the next (incremental) check.
    #[test]
    fn an_orphan_written_since_the_last_check_is_found() {
        let s = store();
        let mut shadow = None;
        assert_eq!(check(&s, &mut shadow, false), Ok(0));
        s.command(&[b"ZADD", b"orq:{q}:dead", b"5", b"ghost"]);
        let err = check(&s, &mut shadow, false).unwrap_err();
        assert!(
            err.contains("dead holds ghost, which has no task hash"),
            "{err}"
        );
    }

    // Goal: the kept copy is checked, not trusted. Method: a write the store does not report
    // (tracking off) goes unseen by the incremental check, and the next whole-queue check
    // reports the copy out of step.
    #[test]
    fn a_write_the_checker_was_not_told_of_is_found_at_the_next_full_check() {
        let s = store();
        let mut shadow = None;
        assert_eq!(check(&s, &mut shadow, false), Ok(0));
        s.track_touched(false);
        s.command(&[b"ZADD", b"orq:{q}:dead", b"5", b"ghost"]);
        s.track_touched(true);
        assert_eq!(check(&s, &mut shadow, false), Ok(0));
        let err = check(&s, &mut shadow, true).unwrap_err();
        assert!(err.contains("differs from the store"), "{err}");
    }

    // Goal: a submit may trust a tenant hash to show that the known tenants list it. Method: a
    // tenant hash with a ready-list mask and no entry in the known tenants is reported; listed,
    // it passes.
    #[test]
    fn a_tenant_hash_outside_the_known_tenants_is_found() {
        let s = store();
        let mut shadow = None;
        assert_eq!(check(&s, &mut shadow, false), Ok(0));
        s.command(&[b"HSET", b"orq:{q}:tenant:t1", b"rp", b"0", b"weight", b"2"]);
        let err = check(&s, &mut shadow, false).unwrap_err();
        assert!(
            err.contains("tenant t1 has a hash with rp but is not in the known tenants"),
            "{err}"
        );
        s.command(&[b"ZADD", b"orq:{q}:known_tenants", b"0", b"t1"]);
        s.command(&[b"HSET", b"orq:{q}:tenant:t1", b"rp", b"0"]);
        assert_eq!(check(&s, &mut shadow, false), Ok(0));
    }

    /// A queue with one queued task of tenant t1, as `enqueue` leaves it (its first submit: the
    /// count of capped tenants starts at 0).
    fn one_task() -> MemoryStore {
        let s = store();
        let argv: Vec<Vec<u8>> = ["1", "A", "t1", "job", "{}", "0", ""]
            .iter()
            .map(|a| a.as_bytes().to_vec())
            .collect();
        let keys = orq::keys::queue_keys("q");
        let r = s.call_sync(orq_lua::script("enqueue"), &keys, &argv);
        assert!(r.as_array().is_some(), "{r:?}");
        s
    }

    // Goal: a submit may skip the tenant of a ready list that holds ids (design note 56): such a
    // tenant is known. Method: the known tenants losing a tenant with a queued task (and no hash)
    // is reported at the whole-queue check.
    #[test]
    fn a_tenant_with_ready_tasks_outside_the_known_tenants_is_found() {
        let s = one_task();
        let mut shadow = None;
        assert_eq!(check(&s, &mut shadow, true), Ok(0));
        // Without its hash too (whose mask would be reported first).
        s.command(&[b"ZREM", b"orq:{q}:known_tenants", b"t1"]);
        s.command(&[b"DEL", b"orq:{q}:tenant:t1"]);
        let err = check(&s, &mut shadow, true).unwrap_err();
        assert!(
            err.contains("tenant t1 has ready tasks but is not in the known tenants"),
            "{err}"
        );
    }

    // Goal: while the count of capped tenants is 0 a submit reads no cap, so the count may not
    // fall below the tenant hashes with a max_queued (lua/scripts/lib/capped.lua). Method: a
    // max_queued written without the count is reported, by the incremental check of the tenant
    // and by the whole-queue check; counted, it passes.
    #[test]
    fn a_cap_the_count_of_capped_tenants_misses_is_found() {
        let s = one_task();
        let mut shadow = None;
        assert_eq!(check(&s, &mut shadow, true), Ok(0));
        s.command(&[b"HSET", b"orq:{q}:tenant:t1", b"max_queued", b"5"]);
        for full in [false, true] {
            let err = check(&s, &mut shadow, full).unwrap_err();
            assert!(
                err.contains("counts 0 capped tenants, but 1 tenant hashes have a max_queued"),
                "{err}"
            );
        }
        s.command(&[b"HSET", b"orq:{q}:stats", b"capped", b"1"]);
        assert_eq!(check(&s, &mut shadow, true), Ok(0));
    }
}
