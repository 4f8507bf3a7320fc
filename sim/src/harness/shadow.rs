//! The checker's copy of one queue's indexes: which index keys hold each id, each task's tenant
//! and status, the counts by tenant and status, each tenant's non-empty ready lists. Built once
//! from the store, then kept in step from the keys each call wrote ([`crate::MemoryStore`]'s
//! touched keys), so that after a call only what it touched is read and checked
//! (`state_check.rs`), instead of the whole queue.
//!
//! Kept in step, not trusted: the whole-queue check rebuilds it at intervals and compares
//! ([`Shadow::build`] equals the kept copy, or the checker itself is wrong).

use super::rules::{is_tenant_or_worker_set, ready_list, status_of, tenant_of, Around};
use crate::{Db, Value};
use std::collections::{BTreeMap, BTreeSet};

type Bytes = Vec<u8>;

/// The queue's indexes as the checker last read them.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Shadow {
    /// Key prefix of the queue, `orq:{q}:`.
    prefix: Bytes,
    /// Ready lists by key suffix (`ready:<p>:<tenant>`): their ids in order.
    lists: BTreeMap<Bytes, Vec<Bytes>>,
    /// Index ZSETs (and the tenants and parked sets) by key suffix: member -> score.
    zsets: BTreeMap<Bytes, BTreeMap<Bytes, f64>>,
    /// Id -> the index keys holding it (suffixes in byte order; a list once per occurrence).
    holders: BTreeMap<Bytes, Vec<Bytes>>,
    /// Id -> (tenant, status) of its task record.
    tasks: BTreeMap<Bytes, (Bytes, Bytes)>,
    /// (owner, status) -> tasks; the empty owner counts the whole queue.
    counts: BTreeMap<(Bytes, Bytes), i64>,
    /// Tenant -> bit `p` set when its ready list of priority `p` holds ids.
    masks: BTreeMap<Bytes, u32>,
}

/// What a change touched: the ids, tenants and whether the queue's counters must be checked.
#[derive(Debug, Default)]
pub(super) struct Affected {
    /// Task ids whose record or index entries changed.
    pub ids: BTreeSet<Bytes>,
    /// Tenants whose hash, ready lists, set membership or counts changed.
    pub tenants: BTreeSet<Bytes>,
    /// The queue's `stats` hash or some task's status changed.
    pub stats: bool,
}

impl Shadow {
    /// Read every key of the queue with prefix `prefix` from `db`. Returns the shadow and
    /// everything in it as affected (for the whole-queue check).
    pub fn build(db: &Db, prefix: &[u8]) -> (Shadow, Affected) {
        let mut s = Shadow {
            prefix: prefix.to_vec(),
            ..Shadow::default()
        };
        let keys: Vec<Bytes> = db
            .iter()
            .filter_map(|(k, _)| k.strip_prefix(prefix).map(<[u8]>::to_vec))
            .collect();
        let mut affected = s.update(db, keys.iter().map(Vec::as_slice));
        affected.stats = true;
        // Tenants with a hash, or any task, are checked too.
        for (owner, _) in s.counts.keys() {
            if !owner.is_empty() {
                affected.tenants.insert(owner.clone());
            }
        }
        (s, affected)
    }

    /// The key prefix of the queue.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// Re-read the keys with suffixes `suffixes` (under the prefix) from `db` and return what
    /// changed.
    pub fn update<'a>(&mut self, db: &Db, suffixes: impl Iterator<Item = &'a [u8]>) -> Affected {
        let mut a = Affected::default();
        let mut key = self.prefix.clone();
        for suffix in suffixes {
            key.truncate(self.prefix.len());
            key.extend_from_slice(suffix);
            let value = db.get(&key);
            if let Some(id) = suffix.strip_prefix(b"task:") {
                self.update_task(id, value, &mut a);
            } else if let Some((p, tenant)) = ready_list(suffix) {
                self.update_list(suffix, p, tenant, value, &mut a);
            } else if suffix == b"stats" {
                a.stats = true;
            } else if let Some(t) = suffix.strip_prefix(b"tenant:") {
                a.tenants.insert(t.to_vec());
            } else if !matches!(suffix, b"known_tenants" | b"workers") {
                self.update_zset(suffix, value, &mut a);
            }
        }
        a
    }

    fn update_task(&mut self, id: &[u8], value: Option<&Value>, a: &mut Affected) {
        let new = match value {
            Some(Value::Hash(h)) => Some((tenant_of(h).to_vec(), status_of(h).to_vec())),
            _ => None,
        };
        let old = self.tasks.get(id);
        if old == new.as_ref() && old.is_some() {
            a.ids.insert(id.to_vec());
            return;
        }
        if let Some((t, s)) = old.cloned() {
            self.add_count(&t, &s, -1);
            a.tenants.insert(t);
        }
        match new {
            Some((t, s)) => {
                self.add_count(&t, &s, 1);
                a.tenants.insert(t.clone());
                self.tasks.insert(id.to_vec(), (t, s));
            }
            None => {
                self.tasks.remove(id);
            }
        }
        a.ids.insert(id.to_vec());
        a.stats = true;
    }

    fn add_count(&mut self, tenant: &[u8], status: &[u8], n: i64) {
        for owner in [&b""[..], tenant] {
            let c = self
                .counts
                .entry((owner.to_vec(), status.to_vec()))
                .or_default();
            *c += n;
            if *c == 0 {
                self.counts.remove(&(owner.to_vec(), status.to_vec()));
            }
        }
    }

    fn hold(&mut self, id: &[u8], index: &[u8]) {
        let h = self.holders.entry(id.to_vec()).or_default();
        let at = h.partition_point(|x| x.as_slice() <= index);
        h.insert(at, index.to_vec());
    }

    fn unhold(&mut self, id: &[u8], index: &[u8]) {
        if let Some(h) = self.holders.get_mut(id) {
            if let Some(at) = h.iter().position(|x| x == index) {
                h.remove(at);
            }
            if h.is_empty() {
                self.holders.remove(id);
            }
        }
    }

    fn update_list(
        &mut self,
        suffix: &[u8],
        p: u8,
        tenant: &[u8],
        value: Option<&Value>,
        a: &mut Affected,
    ) {
        let empty = std::collections::VecDeque::new();
        let new = match value {
            Some(Value::List(l)) => l,
            _ => &empty,
        };
        let old = self.lists.remove(suffix).unwrap_or_default();
        // Only the middle differs for a push at either end or a pop: skip the common ends.
        let front = old
            .iter()
            .zip(new.iter())
            .take_while(|(x, y)| x == y)
            .count();
        let back = old[front..]
            .iter()
            .rev()
            .zip(new.iter().skip(front).rev())
            .take_while(|(x, y)| x == y)
            .count();
        let changed = front + back != old.len() || old.len() != new.len();
        if changed {
            for id in &old[front..old.len() - back] {
                self.unhold(id, suffix);
                a.ids.insert(id.clone());
            }
            for id in new.iter().skip(front).take(new.len() - front - back) {
                self.hold(id, suffix);
                a.ids.insert(id.clone());
            }
            a.tenants.insert(tenant.to_vec());
        }
        let mask = self.masks.entry(tenant.to_vec()).or_default();
        if new.is_empty() {
            *mask &= !(1 << p);
        } else {
            *mask |= 1 << p;
        }
        if *mask == 0 {
            self.masks.remove(tenant);
        }
        if !new.is_empty() {
            self.lists
                .insert(suffix.to_vec(), new.iter().cloned().collect());
        }
    }

    fn update_zset(&mut self, suffix: &[u8], value: Option<&Value>, a: &mut Affected) {
        let tenants = is_tenant_or_worker_set(suffix);
        let z = match value {
            Some(Value::ZSet(z)) => Some(z),
            _ => None,
        };
        if z.is_none() && !self.zsets.contains_key(suffix) {
            return;
        }
        let mut shadow = self.zsets.remove(suffix).unwrap_or_default();
        let noted = |a: &mut Affected, m: &[u8]| {
            if tenants {
                a.tenants.insert(m.to_vec());
            } else {
                a.ids.insert(m.to_vec());
            }
        };
        // New members and changed scores, in place (most calls change a few members of a set
        // that may hold thousands).
        let mut added = Vec::new();
        for (m, score) in z.iter().flat_map(|z| z.iter()) {
            match shadow.get_mut(m) {
                Some(s) if s.to_bits() == score.to_bits() => {}
                Some(s) => {
                    *s = score;
                    noted(a, m);
                }
                None => {
                    shadow.insert(m.to_vec(), score);
                    added.push(m.to_vec());
                    noted(a, m);
                }
            }
        }
        // Members gone: the copy holds more than the set.
        if shadow.len() != z.map_or(0, |z| z.len()) {
            let gone: Vec<Bytes> = shadow
                .keys()
                .filter(|m| z.and_then(|z| z.score(m)).is_none())
                .cloned()
                .collect();
            for m in gone {
                shadow.remove(&m);
                noted(a, &m);
                if !tenants {
                    self.unhold(&m, suffix);
                }
            }
        }
        if !tenants {
            for m in &added {
                self.hold(m, suffix);
            }
        }
        if !shadow.is_empty() {
            self.zsets.insert(suffix.to_vec(), shadow);
        }
    }

    /// Which parts of two copies differ (for the drift report).
    pub fn differences(&self, other: &Shadow) -> Vec<&'static str> {
        let mut d = Vec::new();
        if self.lists != other.lists {
            d.push("ready lists");
        }
        if self.zsets != other.zsets {
            d.push("index sets");
        }
        if self.holders != other.holders {
            d.push("holders");
        }
        if self.tasks != other.tasks {
            d.push("task records");
        }
        if self.counts != other.counts {
            d.push("counts");
        }
        if self.masks != other.masks {
            d.push("ready masks");
        }
        d
    }

    /// The index keys holding `id` (suffixes in byte order).
    pub fn holders(&self, id: &[u8]) -> &[Bytes] {
        self.holders.get(id).map_or(&[], Vec::as_slice)
    }
}

impl Around for Shadow {
    fn score_in(&self, index: &[u8], id: &[u8]) -> Option<f64> {
        self.zsets.get(index)?.get(id).copied()
    }

    fn eligible(&self, tenant: &[u8]) -> bool {
        self.score_in(b"tenants", tenant).is_some()
    }

    fn parked(&self, tenant: &[u8]) -> Option<f64> {
        self.score_in(b"parked", tenant)
    }

    fn ready_mask(&self, tenant: &[u8]) -> u32 {
        self.masks.get(tenant).copied().unwrap_or(0)
    }

    fn count(&self, owner: &[u8], status: &[u8]) -> i64 {
        self.counts
            .get(&(owner.to_vec(), status.to_vec()))
            .copied()
            .unwrap_or(0)
    }
}
