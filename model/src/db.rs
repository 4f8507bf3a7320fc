//! The keyspace of the Redis model: values, key expiry, and the comparable dump of every key.
//!
//! Every container keeps the order Redis would show: sorted sets by (score, member), hashes in
//! insertion order (what Redis's compact listpack encoding returns from HGETALL), sets and the
//! keyspace itself in byte order. Nothing iterates a `HashMap`, so no order depends on a hasher.

use crate::num::format_g17;
use crate::touched::Touched;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::ops::Deref;

/// A Redis value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string (binary safe).
    String(Vec<u8>),
    /// A hash: field → value, remembering insertion order for HGETALL.
    Hash(Hash),
    /// A list, head first.
    List(VecDeque<Vec<u8>>),
    /// A set (members in byte order).
    Set(BTreeSet<Vec<u8>>),
    /// A sorted set.
    ZSet(ZSet),
    /// A stream.
    Stream(Stream),
}

impl Value {
    /// The Redis `TYPE` name: `string`, `hash`, `list`, `set`, `zset` or `stream`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }
}

/// A hash value. Reads go through `Deref` to a `BTreeMap<field, value>` (`get`, `len`, `iter` in
/// field order); [`Hash::iter_insertion`] gives HGETALL's order. Redis keeps small hashes in a
/// listpack, which preserves insertion order (an update keeps the field's place); the model always
/// does, and the differential tests configure Redis so that it always uses the listpack.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hash {
    map: BTreeMap<Vec<u8>, Vec<u8>>,
    order: Vec<Vec<u8>>,
}

impl Deref for Hash {
    type Target = BTreeMap<Vec<u8>, Vec<u8>>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl Hash {
    /// Fields and values in insertion order (the order HGETALL returns).
    pub fn iter_insertion(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.order.iter().map(|f| {
            let v = self.map.get(f).expect("hash order and map agree");
            (f.as_slice(), v.as_slice())
        })
    }

    /// Set `field` to `value`; true when the field is new (it goes last in insertion order).
    pub(crate) fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        match self.map.get_mut(field) {
            Some(v) => {
                *v = value.to_vec();
                false
            }
            None => {
                self.map.insert(field.to_vec(), value.to_vec());
                self.order.push(field.to_vec());
                true
            }
        }
    }

    /// Remove `field`; true when it was there.
    pub(crate) fn remove(&mut self, field: &[u8]) -> bool {
        if self.map.remove(field).is_some() {
            self.order.retain(|f| f != field);
            true
        } else {
            false
        }
    }
}

/// A sorted set score in the set's order: by value (so `-0` ties with `0`, as in Redis's skip
/// list, which compares with `<`), never NaN.
#[derive(Debug, Clone, Copy)]
struct Score(f64);

impl PartialEq for Score {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .partial_cmp(&other.0)
            .expect("sorted set scores are never NaN")
    }
}

/// A sorted set: members with a double score, ordered by (score, member bytes) like Redis.
#[derive(Debug, Clone, Default)]
pub struct ZSet {
    scores: BTreeMap<Vec<u8>, f64>,
    order: BTreeSet<(Score, Vec<u8>)>,
}

impl PartialEq for ZSet {
    fn eq(&self, other: &Self) -> bool {
        self.scores.len() == other.scores.len()
            && self
                .scores
                .iter()
                .zip(other.scores.iter())
                .all(|((a, x), (b, y))| a == b && x.to_bits() == y.to_bits())
    }
}

impl ZSet {
    /// Number of members (ZCARD).
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// True when the set has no member (Redis deletes such a key).
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// The score of `member` (ZSCORE).
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// (member, score) pairs in Redis order: by score, then member bytes.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> {
        self.order.iter().map(|(s, m)| (m.as_slice(), s.0))
    }

    /// Set `member`'s score (adding it when absent). The score must not be NaN. A score of `-0`
    /// is stored as `0`, as Redis's compact (listpack) encoding does: it stores integral scores
    /// as integers.
    pub(crate) fn insert(&mut self, member: &[u8], score: f64) {
        assert!(!score.is_nan(), "NaN score");
        let score = if score == 0.0 { 0.0 } else { score };
        if let Some(old) = self.scores.insert(member.to_vec(), score) {
            self.order.remove(&(Score(old), member.to_vec()));
        }
        self.order.insert((Score(score), member.to_vec()));
    }

    /// Remove `member`; true when it was there.
    pub(crate) fn remove(&mut self, member: &[u8]) -> bool {
        match self.scores.remove(member) {
            Some(old) => {
                self.order.remove(&(Score(old), member.to_vec()));
                true
            }
            None => false,
        }
    }

    /// Members whose score is within `[min, max]` (each bound optionally exclusive), in order
    /// (`rev`: from the highest score down).
    pub(crate) fn range_by_score(
        &self,
        min: f64,
        min_ex: bool,
        max: f64,
        max_ex: bool,
        rev: bool,
    ) -> Box<dyn Iterator<Item = (&[u8], f64)> + '_> {
        let in_min = move |s: f64| if min_ex { s > min } else { s >= min };
        let in_max = move |s: f64| if max_ex { s < max } else { s <= max };
        if rev {
            Box::new(
                self.iter()
                    .rev()
                    .skip_while(move |(_, s)| !in_max(*s))
                    .take_while(move |(_, s)| in_min(*s)),
            )
        } else {
            Box::new(
                self.iter()
                    .skip_while(move |(_, s)| !in_min(*s))
                    .take_while(move |(_, s)| in_max(*s)),
            )
        }
    }
}

/// The field/value pairs of one stream entry, in the order they were added.
pub type StreamFields = Vec<(Vec<u8>, Vec<u8>)>;

/// A stream entry ID: `<ms>-<seq>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct StreamId {
    /// Milliseconds part.
    pub ms: u64,
    /// Sequence within the millisecond.
    pub seq: u64,
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// A stream: entries by ID, and the last ID ever generated (kept when entries are trimmed, so
/// new IDs never go backwards).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stream {
    entries: BTreeMap<StreamId, StreamFields>,
    last_id: StreamId,
}

impl Stream {
    /// Number of entries (XLEN).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the stream has no entry (the key still exists, as in Redis).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The last ID the stream generated or accepted.
    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// Entries in ID order, each with its field/value pairs in the order they were added.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (StreamId, &StreamFields)> {
        self.entries.iter().map(|(id, f)| (*id, f))
    }

    pub(crate) fn entries(&self) -> &BTreeMap<StreamId, StreamFields> {
        &self.entries
    }

    /// Append an entry; `id` must be greater than the last ID.
    pub(crate) fn push(&mut self, id: StreamId, fields: StreamFields) {
        assert!(id > self.last_id, "stream IDs grow");
        self.entries.insert(id, fields);
        self.last_id = id;
    }

    /// Remove the oldest entries until at most `maxlen` remain; returns how many were removed.
    pub(crate) fn trim_to(&mut self, maxlen: usize) -> usize {
        let mut removed = 0;
        while self.entries.len() > maxlen {
            self.entries.pop_first();
            removed += 1;
        }
        removed
    }

    /// Remove every entry whose ID is below `min` (exact `MINID` trimming); returns the count.
    pub(crate) fn trim_below(&mut self, min: StreamId) -> usize {
        let mut removed = 0;
        while self
            .entries
            .first_key_value()
            .is_some_and(|(id, _)| *id < min)
        {
            self.entries.pop_first();
            removed += 1;
        }
        removed
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub(crate) value: Value,
    pub(crate) expire_at_ms: Option<u64>,
}

/// The keyspace: every key with its value and optional absolute expiry.
///
/// A key whose expiry time `t` is before the current time (`t < now_ms`, Redis's
/// `now > when`) is gone: [`Db::get`] and [`Db::iter`] never show it. `now_ms` is the time of the
/// script or command being run, or, inside [`crate::MemoryStore::read`], the clock's time then.
#[derive(Debug, Clone, Default)]
pub struct Db {
    entries: BTreeMap<Vec<u8>, Entry>,
    expiries: BTreeSet<(u64, Vec<u8>)>,
    now_ms: u64,
    /// Channels PUBLISHed to since the last [`Db::take_published`], in order (not data: a
    /// snapshot does not hold them).
    published: Vec<Vec<u8>>,
    /// The keys written since the last [`Db::take_touched`], while tracking is on.
    touched: Option<Touched>,
}

impl Db {
    /// Record a PUBLISH to `channel` (the store tells its subscribers after the call).
    pub fn publish(&mut self, channel: &[u8]) {
        self.published.push(channel.to_vec());
    }

    /// The channels published to since the last call, in order.
    pub fn take_published(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.published)
    }

    /// Start (`true`) or stop collecting the keys written ([`Db::take_touched`]).
    pub fn track_touched(&mut self, on: bool) {
        self.touched = on.then(Touched::default);
    }

    /// The keys written since the last call (None when tracking is off); starts a new list.
    pub fn take_touched(&mut self) -> Option<Touched> {
        self.touched.as_mut().map(std::mem::take)
    }

    fn note(&mut self, key: &[u8]) {
        if let Some(t) = self.touched.as_mut() {
            t.note(key);
        }
    }

    /// The time (ms since the epoch) at which expiry is judged.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    fn live(&self, e: &Entry) -> bool {
        e.expire_at_ms.is_none_or(|t| t >= self.now_ms)
    }

    /// The live value at `key`.
    pub fn get(&self, key: &[u8]) -> Option<&Value> {
        self.entries
            .get(key)
            .filter(|e| self.live(e))
            .map(|e| &e.value)
    }

    /// The absolute expiry time (ms since the epoch) of a live key that has one.
    pub fn expire_at_ms(&self, key: &[u8]) -> Option<u64> {
        self.entries
            .get(key)
            .filter(|e| self.live(e))
            .and_then(|e| e.expire_at_ms)
    }

    /// Every live key and its value, in key byte order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Value)> {
        self.entries
            .iter()
            .filter(|(_, e)| self.live(e))
            .map(|(k, e)| (k.as_slice(), &e.value))
    }

    /// Number of live keys (walks the keyspace).
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// True when no key is live.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// Set the current time and delete every key that expired before it (Redis's active expiry;
    /// invisible to readers, it only frees memory).
    pub(crate) fn set_now(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
        while let Some((t, _)) = self.expiries.first() {
            if *t >= now_ms {
                break;
            }
            let (_, key) = self.expiries.pop_first().expect("non-empty");
            self.note(&key);
            self.entries.remove(&key);
        }
    }

    /// The live value at `key`, for change.
    pub(crate) fn get_mut(&mut self, key: &[u8]) -> Option<&mut Value> {
        self.note(key);
        let now = self.now_ms;
        self.entries
            .get_mut(key)
            .filter(|e| e.expire_at_ms.is_none_or(|t| t >= now))
            .map(|e| &mut e.value)
    }

    /// Store `value` at `key` with `expire_at_ms` (None: no expiry), replacing any old value.
    pub(crate) fn insert(&mut self, key: &[u8], value: Value, expire_at_ms: Option<u64>) {
        self.note(key);
        self.remove(key);
        if let Some(t) = expire_at_ms {
            self.expiries.insert((t, key.to_vec()));
        }
        self.entries.insert(
            key.to_vec(),
            Entry {
                value,
                expire_at_ms,
            },
        );
    }

    /// Delete `key`; returns the live value it held.
    pub(crate) fn remove(&mut self, key: &[u8]) -> Option<Value> {
        let e = self.entries.remove(key)?;
        self.note(key);
        if let Some(t) = e.expire_at_ms {
            self.expiries.remove(&(t, key.to_vec()));
        }
        let live = e.expire_at_ms.is_none_or(|t| t >= self.now_ms);
        live.then_some(e.value)
    }

    /// Delete `key` when its value is an empty container (Redis never keeps empty hashes, lists,
    /// sets or sorted sets; an empty stream stays).
    pub(crate) fn remove_if_empty(&mut self, key: &[u8]) {
        let empty = match self.get(key) {
            Some(Value::Hash(h)) => h.is_empty(),
            Some(Value::List(l)) => l.is_empty(),
            Some(Value::Set(s)) => s.is_empty(),
            Some(Value::ZSet(z)) => z.is_empty(),
            _ => false,
        };
        if empty {
            self.remove(key);
        }
    }

    /// A copy of every entry (data only), for [`crate::MemoryStore::snapshot`].
    pub(crate) fn entries_clone(&self) -> BTreeMap<Vec<u8>, Entry> {
        self.entries.clone()
    }

    /// Replace every entry.
    pub(crate) fn restore(&mut self, entries: &BTreeMap<Vec<u8>, Entry>) {
        if let Some(t) = self.touched.as_mut() {
            t.all = true;
        }
        self.entries = entries.clone();
        self.expiries = entries
            .iter()
            .filter_map(|(k, e)| e.expire_at_ms.map(|t| (t, k.clone())))
            .collect();
    }

    /// Every live key as a comparable [`DumpValue`].
    pub fn dump(&self) -> Dump {
        self.iter()
            .map(|(k, v)| {
                let data = match v {
                    Value::String(s) => DumpData::String(s.clone()),
                    Value::Hash(h) => DumpData::Hash(
                        h.iter_insertion()
                            .map(|(f, v)| (f.to_vec(), v.to_vec()))
                            .collect(),
                    ),
                    Value::List(l) => DumpData::List(l.iter().cloned().collect()),
                    Value::Set(s) => DumpData::Set(s.iter().cloned().collect()),
                    Value::ZSet(z) => {
                        DumpData::ZSet(z.iter().map(|(m, s)| (m.to_vec(), s)).collect())
                    }
                    Value::Stream(s) => DumpData::Stream {
                        entries: s.iter().map(|(id, f)| (id, f.clone())).collect(),
                        last_id: s.last_id(),
                    },
                };
                let value = DumpValue {
                    data,
                    expire_at_ms: self.expire_at_ms(k),
                };
                (k.to_vec(), value)
            })
            .collect()
    }
}

/// Every live key of a store, in key byte order (see [`DumpValue`]).
pub type Dump = BTreeMap<Vec<u8>, DumpValue>;

/// One key of a [`Dump`]: its data and its absolute expiry.
#[derive(Debug, Clone, PartialEq)]
pub struct DumpValue {
    /// The value.
    pub data: DumpData,
    /// Absolute expiry, ms since the Unix epoch (Redis's `PEXPIRETIME`), or None.
    pub expire_at_ms: Option<u64>,
}

/// The data of one key in a comparable form.
#[derive(Debug, Clone, PartialEq)]
pub enum DumpData {
    /// A string.
    String(Vec<u8>),
    /// A hash as HGETALL returns it: (field, value) in insertion order.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    /// A list, head first.
    List(Vec<Vec<u8>>),
    /// A set, members in byte order.
    Set(Vec<Vec<u8>>),
    /// A sorted set: (member, score) sorted by (score, member).
    ZSet(Vec<(Vec<u8>, f64)>),
    /// A stream: (id, field/value pairs) in ID order, and the last ID generated.
    Stream {
        /// Entries in ID order.
        entries: Vec<(StreamId, StreamFields)>,
        /// The stream's last generated ID.
        last_id: StreamId,
    },
}

impl fmt::Display for DumpValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        match &self.data {
            DumpData::String(v) => write!(f, "string {:?}", s(v))?,
            DumpData::Hash(h) => {
                write!(f, "hash {{")?;
                for (k, v) in h {
                    write!(f, " {:?}: {:?}", s(k), s(v))?;
                }
                write!(f, " }}")?;
            }
            DumpData::List(l) => {
                write!(f, "list {:?}", l.iter().map(|v| s(v)).collect::<Vec<_>>())?
            }
            DumpData::Set(l) => write!(f, "set {:?}", l.iter().map(|v| s(v)).collect::<Vec<_>>())?,
            DumpData::ZSet(z) => {
                write!(f, "zset [")?;
                for (m, sc) in z {
                    write!(f, " {:?}={}", s(m), format_g17(*sc))?;
                }
                write!(f, " ]")?;
            }
            DumpData::Stream { entries, last_id } => {
                write!(f, "stream last={last_id} [")?;
                for (id, fields) in entries {
                    write!(f, " {id}:")?;
                    for (k, v) in fields {
                        write!(f, " {}={:?}", s(k), s(v))?;
                    }
                }
                write!(f, " ]")?;
            }
        }
        if let Some(t) = self.expire_at_ms {
            write!(f, " (expires at {t} ms)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a key is visible up to and including its expiry millisecond, like Redis (`now > when`).
    #[test]
    fn keys_expire_strictly_after_their_expiry_time() {
        let mut db = Db::default();
        db.set_now(100);
        db.insert(b"k", Value::String(b"v".to_vec()), Some(150));
        db.set_now(150);
        assert!(db.get(b"k").is_some());
        assert_eq!(db.expire_at_ms(b"k"), Some(150));
        db.set_now(151);
        assert!(db.get(b"k").is_none());
        assert!(db.is_empty());
    }

    // Goal: hash insertion order survives updates and deletions, as in a Redis listpack.
    #[test]
    fn hash_keeps_insertion_order() {
        let mut h = Hash::default();
        assert!(h.insert(b"b", b"1"));
        assert!(h.insert(b"a", b"2"));
        assert!(!h.insert(b"b", b"3"));
        assert!(h.insert(b"c", b"4"));
        assert!(h.remove(b"a"));
        let order: Vec<_> = h
            .iter_insertion()
            .map(|(f, v)| (f.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(
            order,
            vec![
                (b"b".to_vec(), b"3".to_vec()),
                (b"c".to_vec(), b"4".to_vec())
            ]
        );
        assert_eq!(h.get(b"b".as_slice()), Some(&b"3".to_vec()));
    }

    // Goal: sorted set order is (score, member), with -0 tying 0.
    #[test]
    fn zset_orders_by_score_then_member() {
        let mut z = ZSet::default();
        z.insert(b"b", 1.0);
        z.insert(b"a", 1.0);
        z.insert(b"c", -0.0);
        z.insert(b"d", 0.0);
        z.insert(b"b", -5.0);
        let order: Vec<_> = z.iter().map(|(m, _)| m.to_vec()).collect();
        assert_eq!(
            order,
            vec![b"b".to_vec(), b"c".to_vec(), b"d".to_vec(), b"a".to_vec()]
        );
        let r: Vec<_> = z
            .range_by_score(0.0, false, 1.0, true, false)
            .map(|(m, _)| m.to_vec())
            .collect();
        assert_eq!(r, vec![b"c".to_vec(), b"d".to_vec()]);
        let r: Vec<_> = z
            .range_by_score(0.0, true, 1.0, false, true)
            .map(|(m, _)| m.to_vec())
            .collect();
        assert_eq!(r, vec![b"a".to_vec()]);
    }
}
