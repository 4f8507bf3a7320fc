//! The Redis commands the model implements, with Redis 7.0's semantics, replies and error texts.
//!
//! Each command is a row of [`COMMANDS`]: its name, its arity as in Redis's command table
//! (positive: exact argument count including the name; negative: at least that many), which
//! arguments are keys (for the cluster slot check), and the function that runs it. The behaviour
//! follows the Redis 7.0 sources (`t_string.c`, `t_hash.c`, `t_zset.c`, `t_set.c`, `t_list.c`,
//! `t_stream.c`, `expire.c`, `db.c`) and is checked against a real `redis-server` by
//! `sim/tests/command_differential.rs`.

use crate::db::{Db, Hash, Stream, StreamFields, StreamId, Value, ZSet};
use crate::num::{format_g17, parse_f64_strict, parse_i64, strtod};
use orq::Resp;
use std::collections::{BTreeSet, VecDeque};

/// `-WRONGTYPE` reply text.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// Reply text of a bad integer argument.
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// Reply text of a malformed command.
pub const SYNTAX: &str = "ERR syntax error";
/// Reply text of a bad ZADD score.
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
/// Reply text of a bad score range bound.
pub const MINMAX_NOT_FLOAT: &str = "ERR min or max is not a float";
/// Reply text of a negative or non-integer count (LPOP, ZPOPMIN).
pub const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";
/// Reply text of a malformed stream ID.
pub const INVALID_STREAM_ID: &str = "ERR Invalid stream ID specified as stream command argument";

/// Which arguments of a command are keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySpec {
    /// No key (TIME).
    None,
    /// The first argument after the name.
    First,
    /// Every argument after the name (DEL, EXISTS).
    All,
}

/// What a command sees while it runs.
pub struct Exec<'a> {
    /// The keyspace; its `now_ms` is the time of the command (or of the script that calls it).
    pub db: &'a mut Db,
    /// The same time in microseconds, for TIME.
    pub now_us: u64,
}

type Handler = fn(&mut Exec<'_>, &[Vec<u8>]) -> Resp;

/// One row of the command table.
pub struct Command {
    /// Lowercase name, as Redis prints it in arity errors.
    pub name: &'static str,
    /// Redis's arity: `n > 0` exactly n arguments (name included), `n < 0` at least `-n`.
    pub arity: i32,
    /// Which arguments are keys.
    pub keys: KeySpec,
    run: Handler,
}

impl Command {
    /// True when `argc` arguments (name included) satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = i64::from(self.arity);
        if arity > 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    /// The key arguments of `args` (name included in `args`).
    pub fn keys_of<'a>(&self, args: &'a [Vec<u8>]) -> Vec<&'a [u8]> {
        match self.keys {
            KeySpec::None => Vec::new(),
            KeySpec::First => args.get(1).map(|k| vec![k.as_slice()]).unwrap_or_default(),
            KeySpec::All => args[1..].iter().map(|k| k.as_slice()).collect(),
        }
    }

    /// Run the command; the arity must already be checked.
    pub fn run(&self, exec: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
        debug_assert!(self.arity_ok(args.len()));
        (self.run)(exec, args)
    }
}

macro_rules! cmd {
    ($name:literal, $arity:expr, $keys:ident, $f:ident) => {
        Command {
            name: $name,
            arity: $arity,
            keys: KeySpec::$keys,
            run: $f,
        }
    };
}

/// Every command the model implements, with Redis 7.0's arity.
pub static COMMANDS: &[Command] = &[
    cmd!("time", 1, None, time),
    cmd!("get", 2, First, get),
    cmd!("set", -3, First, set),
    cmd!("del", -2, All, del),
    cmd!("exists", -2, All, exists),
    cmd!("type", 2, First, type_of),
    cmd!("pttl", 2, First, pttl),
    cmd!("ttl", 2, First, ttl),
    cmd!("hget", 3, First, hget),
    cmd!("hset", -4, First, hset),
    cmd!("hmget", -3, First, hmget),
    cmd!("hgetall", 2, First, hgetall),
    cmd!("hincrby", 4, First, hincrby),
    cmd!("hdel", -3, First, hdel),
    cmd!("zadd", -4, First, zadd),
    cmd!("zrem", -3, First, zrem),
    cmd!("zcard", 2, First, zcard),
    cmd!("zscore", 3, First, zscore),
    cmd!("zrange", -4, First, zrange),
    cmd!("zrevrange", -4, First, zrevrange),
    cmd!("zrangebyscore", -4, First, zrangebyscore),
    cmd!("zpopmin", -2, First, zpopmin),
    cmd!("sadd", -3, First, sadd),
    cmd!("srem", -3, First, srem),
    cmd!("smembers", 2, First, smembers),
    cmd!("sismember", 3, First, sismember),
    cmd!("scard", 2, First, scard),
    cmd!("xadd", -5, First, xadd),
    cmd!("xlen", 2, First, xlen),
    cmd!("xtrim", -4, First, xtrim),
    cmd!("xrange", -4, First, xrange),
    cmd!("xrevrange", -4, First, xrevrange),
    cmd!("lpush", -3, First, lpush),
    cmd!("rpush", -3, First, rpush),
    cmd!("lpop", -2, First, lpop),
    cmd!("rpop", -2, First, rpop),
    cmd!("lrange", 4, First, lrange),
    cmd!("llen", 2, First, llen),
    cmd!("lrem", 4, First, lrem),
    cmd!("publish", 3, None, publish),
];

/// The command called `name` (case-insensitive), or None when the model does not implement it.
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    COMMANDS
        .iter()
        .find(|c| name.eq_ignore_ascii_case(c.name.as_bytes()))
}

/// The reply Redis gives a client for an unknown command (`processCommand` in server.c).
pub fn unknown_command_error(args: &[Vec<u8>]) -> Resp {
    let c_str = |b: &[u8]| -> String {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    };
    let name: String = c_str(&args[0]).chars().take(128).collect();
    let mut rest = String::new();
    for a in &args[1..] {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        let a = c_str(a);
        let mut cut = a.len().min(room);
        while !a.is_char_boundary(cut) {
            cut -= 1;
        }
        rest.push('\'');
        rest.push_str(&a[..cut]);
        rest.push_str("' ");
    }
    error_reply(format!(
        "ERR unknown command '{name}', with args beginning with: {rest}"
    ))
}

/// The reply Redis gives a client for a wrong argument count.
pub fn arity_error(name: &str) -> Resp {
    Resp::Error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// An error reply as Redis's `addReplyErrorFormat` shapes it: trailing CR/LF trimmed, inner CR/LF
/// turned into spaces (an error reply is one line).
pub fn error_reply(text: String) -> Resp {
    let trimmed = text.trim_end_matches(['\r', '\n']);
    Resp::Error(trimmed.replace(['\r', '\n'], " "))
}

fn err(text: &str) -> Resp {
    Resp::Error(text.to_string())
}

fn ok() -> Resp {
    Resp::Status("OK".to_string())
}

fn bulk(b: &[u8]) -> Resp {
    Resp::Bulk(b.to_vec())
}

fn double(x: f64) -> Resp {
    Resp::Bulk(format_g17(x).into_bytes())
}

fn int(n: usize) -> Resp {
    Resp::Int(i64::try_from(n).expect("count fits i64"))
}

/// `getLongLongFromObjectOrReply`.
fn arg_i64(a: &[u8]) -> Result<i64, Resp> {
    parse_i64(a).ok_or_else(|| err(NOT_INTEGER))
}

/// `getPositiveLongFromObjectOrReply` with Redis's default message.
fn arg_count(a: &[u8]) -> Result<i64, Resp> {
    match parse_i64(a) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(err(NOT_POSITIVE)),
    }
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(r) => return r,
        }
    };
}

// ----- typed lookups ------------------------------------------------------------------------

fn read_string<'a>(db: &'a Db, key: &[u8]) -> Result<Option<&'a [u8]>, Resp> {
    match db.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(err(WRONGTYPE)),
    }
}

fn read_hash<'a>(db: &'a Db, key: &[u8]) -> Result<Option<&'a Hash>, Resp> {
    match db.get(key) {
        None => Ok(None),
        Some(Value::Hash(h)) => Ok(Some(h)),
        Some(_) => Err(err(WRONGTYPE)),
    }
}

fn read_zset<'a>(db: &'a Db, key: &[u8]) -> Result<Option<&'a ZSet>, Resp> {
    match db.get(key) {
        None => Ok(None),
        Some(Value::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(err(WRONGTYPE)),
    }
}

fn read_set<'a>(db: &'a Db, key: &[u8]) -> Result<Option<&'a BTreeSet<Vec<u8>>>, Resp> {
    match db.get(key) {
        None => Ok(None),
        Some(Value::Set(s)) => Ok(Some(s)),
        Some(_) => Err(err(WRONGTYPE)),
    }
}

fn read_list<'a>(db: &'a Db, key: &[u8]) -> Result<Option<&'a VecDeque<Vec<u8>>>, Resp> {
    match db.get(key) {
        None => Ok(None),
        Some(Value::List(l)) => Ok(Some(l)),
        Some(_) => Err(err(WRONGTYPE)),
    }
}

fn read_stream<'a>(db: &'a Db, key: &[u8]) -> Result<Option<&'a Stream>, Resp> {
    match db.get(key) {
        None => Ok(None),
        Some(Value::Stream(s)) => Ok(Some(s)),
        Some(_) => Err(err(WRONGTYPE)),
    }
}

/// The value at `key` for change, created by `make` when absent; WRONGTYPE when `is` rejects it.
fn write_value<'a>(
    db: &'a mut Db,
    key: &[u8],
    is: fn(&Value) -> bool,
    make: fn() -> Value,
) -> Result<&'a mut Value, Resp> {
    match db.get(key) {
        Some(v) if !is(v) => return Err(err(WRONGTYPE)),
        Some(_) => {}
        None => db.insert(key, make(), None),
    }
    Ok(db.get_mut(key).expect("present"))
}

// ----- keyspace and strings -----------------------------------------------------------------

fn time(ex: &mut Exec<'_>, _args: &[Vec<u8>]) -> Resp {
    let secs = ex.now_us / 1_000_000;
    let micros = ex.now_us % 1_000_000;
    Resp::Array(vec![
        Resp::Bulk(secs.to_string().into_bytes()),
        Resp::Bulk(micros.to_string().into_bytes()),
    ])
}

fn get(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    match tri!(read_string(ex.db, &args[1])) {
        Some(s) => bulk(s),
        None => Resp::Nil,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Expire {
    None,
    Ex,
    Px,
    ExAt,
    PxAt,
    KeepTtl,
}

/// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]
/// (`parseExtendedStringArgumentsOrReply` and `setGenericCommand` in t_string.c).
fn set(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let (mut nx, mut xx, mut get_old) = (false, false, false);
    let mut expire = Expire::None;
    let mut expire_arg: Option<&[u8]> = None;
    let mut j = 3;
    while j < args.len() {
        let opt = args[j].as_slice();
        let has_next = j + 1 < args.len();
        let is = |s: &str| opt.eq_ignore_ascii_case(s.as_bytes());
        let ttl_free = |e: Expire, me: Expire| e == Expire::None || e == me;
        if is("nx") && !xx {
            nx = true;
        } else if is("xx") && !nx {
            xx = true;
        } else if is("get") {
            get_old = true;
        } else if is("keepttl") && ttl_free(expire, Expire::KeepTtl) {
            expire = Expire::KeepTtl;
        } else if let Some(kind) = [
            ("ex", Expire::Ex),
            ("px", Expire::Px),
            ("exat", Expire::ExAt),
            ("pxat", Expire::PxAt),
        ]
        .into_iter()
        .find(|(n, _)| is(n))
        .map(|(_, k)| k)
        .filter(|k| ttl_free(expire, *k) && has_next)
        {
            expire = kind;
            expire_arg = Some(&args[j + 1]);
            j += 1;
        } else {
            return err(SYNTAX);
        }
        j += 1;
    }
    let mut when_ms: Option<u64> = None;
    if let Some(a) = expire_arg {
        let mut ms = tri!(arg_i64(a));
        let seconds = matches!(expire, Expire::Ex | Expire::ExAt);
        let invalid = Resp::Error("ERR invalid expire time in 'set' command".to_string());
        if ms <= 0 || (seconds && ms > i64::MAX / 1000) {
            return invalid;
        }
        if seconds {
            ms *= 1000;
        }
        if matches!(expire, Expire::Ex | Expire::Px) {
            ms = ms.wrapping_add(i64::try_from(ex.db.now_ms()).expect("time fits i64"));
        }
        if ms <= 0 {
            return invalid;
        }
        when_ms = Some(ms as u64);
    }
    let key = &args[1];
    let old = if get_old {
        match tri!(read_string(ex.db, key)) {
            Some(s) => bulk(s),
            None => Resp::Nil,
        }
    } else {
        Resp::Nil
    };
    let found = ex.db.get(key).is_some();
    if (nx && found) || (xx && !found) {
        return old;
    }
    let keep = if expire == Expire::KeepTtl {
        ex.db.expire_at_ms(key)
    } else {
        None
    };
    ex.db
        .insert(key, Value::String(args[2].clone()), when_ms.or(keep));
    if get_old {
        old
    } else {
        ok()
    }
}

fn del(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    int(args[1..]
        .iter()
        .filter(|k| ex.db.remove(k).is_some())
        .count())
}

/// PUBLISH channel message: the model has no pub/sub clients, so it answers 0 (the receivers of
/// a Redis with none); the channel is recorded for [`crate::MemoryStore`], which wakes its
/// [`orq::Store::wake`] listeners after the call. The message is not kept.
fn publish(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    ex.db.publish(&args[1]);
    Resp::Int(0)
}

fn exists(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    int(args[1..].iter().filter(|k| ex.db.get(k).is_some()).count())
}

fn type_of(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let name = ex.db.get(&args[1]).map_or("none", Value::type_name);
    Resp::Status(name.to_string())
}

fn ttl_generic(ex: &mut Exec<'_>, key: &[u8], ms: bool) -> Resp {
    if ex.db.get(key).is_none() {
        return Resp::Int(-2);
    }
    match ex.db.expire_at_ms(key) {
        None => Resp::Int(-1),
        Some(t) => {
            let left = (t as i64 - ex.db.now_ms() as i64).max(0);
            Resp::Int(if ms { left } else { (left + 500) / 1000 })
        }
    }
}

fn pttl(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    ttl_generic(ex, &args[1], true)
}

fn ttl(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    ttl_generic(ex, &args[1], false)
}

// ----- hashes -------------------------------------------------------------------------------

fn is_hash(v: &Value) -> bool {
    matches!(v, Value::Hash(_))
}

fn new_hash() -> Value {
    Value::Hash(Hash::default())
}

fn hget(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    match tri!(read_hash(ex.db, &args[1])).and_then(|h| h.get(args[2].as_slice())) {
        Some(v) => bulk(v),
        None => Resp::Nil,
    }
}

fn hset(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    if args.len() % 2 == 1 {
        return arity_error("hset");
    }
    let Value::Hash(h) = tri!(write_value(ex.db, &args[1], is_hash, new_hash)) else {
        unreachable!("checked type")
    };
    let added = args[2..]
        .chunks(2)
        .filter(|fv| h.insert(&fv[0], &fv[1]))
        .count();
    int(added)
}

fn hmget(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let h = tri!(read_hash(ex.db, &args[1]));
    Resp::Array(
        args[2..]
            .iter()
            .map(|f| match h.and_then(|h| h.get(f.as_slice())) {
                Some(v) => bulk(v),
                None => Resp::Nil,
            })
            .collect(),
    )
}

fn hgetall(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let h = tri!(read_hash(ex.db, &args[1]));
    let mut out = Vec::new();
    if let Some(h) = h {
        for (f, v) in h.iter_insertion() {
            out.push(bulk(f));
            out.push(bulk(v));
        }
    }
    Resp::Array(out)
}

fn hincrby(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let incr = tri!(arg_i64(&args[3]));
    let Value::Hash(h) = tri!(write_value(ex.db, &args[1], is_hash, new_hash)) else {
        unreachable!("checked type")
    };
    let old = match h.get(args[2].as_slice()) {
        Some(v) => match parse_i64(v) {
            Some(n) => n,
            None => return err("ERR hash value is not an integer"),
        },
        None => 0,
    };
    let Some(new) = old.checked_add(incr) else {
        return err("ERR increment or decrement would overflow");
    };
    h.insert(&args[2], new.to_string().as_bytes());
    Resp::Int(new)
}

fn hdel(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    if tri!(read_hash(ex.db, &args[1])).is_none() {
        return Resp::Int(0);
    }
    let Some(Value::Hash(h)) = ex.db.get_mut(&args[1]) else {
        unreachable!("checked type")
    };
    let removed = args[2..].iter().filter(|f| h.remove(f)).count();
    ex.db.remove_if_empty(&args[1]);
    int(removed)
}

// ----- sorted sets --------------------------------------------------------------------------

/// ZADD key [NX | XX] [GT | LT] [CH] [INCR] score member [score member ...]
/// (`zaddGenericCommand` and `zsetAdd` in t_zset.c).
fn zadd(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, false);
    let mut idx = 2;
    while idx < args.len() {
        let o = args[idx].as_slice();
        let is = |s: &str| o.eq_ignore_ascii_case(s.as_bytes());
        if is("nx") {
            nx = true;
        } else if is("xx") {
            xx = true;
        } else if is("ch") {
            ch = true;
        } else if is("incr") {
            incr = true;
        } else if is("gt") {
            gt = true;
        } else if is("lt") {
            lt = true;
        } else {
            break;
        }
        idx += 1;
    }
    let rest = &args[idx..];
    if rest.is_empty() || rest.len() % 2 == 1 {
        return err(SYNTAX);
    }
    if nx && xx {
        return err("ERR XX and NX options at the same time are not compatible");
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return err("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if incr && rest.len() > 2 {
        return err("ERR INCR option supports a single increment-element pair");
    }
    let mut scores = Vec::with_capacity(rest.len() / 2);
    for pair in rest.chunks(2) {
        match parse_f64_strict(&pair[0]) {
            Some(s) => scores.push(s),
            None => return err(NOT_FLOAT),
        }
    }
    let key = &args[1];
    let exists = tri!(read_zset(ex.db, key)).is_some();
    let nothing = if incr { Resp::Nil } else { Resp::Int(0) };
    if !exists {
        if xx {
            return nothing;
        }
        ex.db.insert(key, Value::ZSet(ZSet::default()), None);
    }
    let Some(Value::ZSet(z)) = ex.db.get_mut(key) else {
        unreachable!("checked type")
    };
    let (mut added, mut updated, mut processed) = (0usize, 0usize, 0usize);
    let mut last = 0.0;
    for (pair, &score) in rest.chunks(2).zip(&scores) {
        let member = pair[1].as_slice();
        match z.score(member) {
            Some(cur) => {
                if nx {
                    continue;
                }
                let mut new = score;
                if incr {
                    new += cur;
                    if new.is_nan() {
                        return err("ERR resulting score is not a number (NaN)");
                    }
                }
                if (lt && new >= cur) || (gt && new <= cur) {
                    continue;
                }
                if new != cur {
                    z.insert(member, new);
                    updated += 1;
                }
                processed += 1;
                last = new;
            }
            None if !xx => {
                z.insert(member, score);
                added += 1;
                processed += 1;
                last = score;
            }
            None => {}
        }
    }
    if incr {
        if processed > 0 {
            double(last)
        } else {
            Resp::Nil
        }
    } else {
        int(if ch { added + updated } else { added })
    }
}

fn zrem(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    if tri!(read_zset(ex.db, &args[1])).is_none() {
        return Resp::Int(0);
    }
    let Some(Value::ZSet(z)) = ex.db.get_mut(&args[1]) else {
        unreachable!("checked type")
    };
    let removed = args[2..].iter().filter(|m| z.remove(m)).count();
    ex.db.remove_if_empty(&args[1]);
    int(removed)
}

fn zcard(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    int(tri!(read_zset(ex.db, &args[1])).map_or(0, |z| z.len()))
}

fn zscore(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    match tri!(read_zset(ex.db, &args[1])).and_then(|z| z.score(&args[2])) {
        Some(s) => double(s),
        None => Resp::Nil,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum RangeType {
    Auto,
    Rank,
    Score,
    Lex,
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Auto,
    Forward,
    Reverse,
}

/// One bound of a score range (`zslParseRange`): `(` makes it exclusive; the rest goes through
/// C `strtod` on the C string (so leading spaces, `inf` and overflow are accepted, NaN is not).
fn parse_score_bound(a: &[u8]) -> Option<(f64, bool)> {
    let a = &a[..a.iter().position(|&b| b == 0).unwrap_or(a.len())];
    let (text, exclusive) = match a.first() {
        Some(b'(') => (&a[1..], true),
        _ => (a, false),
    };
    let r = strtod(text);
    if r.consumed != text.len() || r.value.is_nan() {
        return None;
    }
    Some((r.value, exclusive))
}

/// The body shared by ZRANGE, ZREVRANGE and ZRANGEBYSCORE (`zrangeGenericCommand` in t_zset.c).
fn zrange_generic(
    ex: &mut Exec<'_>,
    args: &[Vec<u8>],
    mut rangetype: RangeType,
    mut direction: Direction,
) -> Resp {
    let key = &args[1];
    let mut withscores = false;
    let (mut offset, mut limit): (i64, i64) = (0, -1);
    let mut j = 4;
    while j < args.len() {
        let left = args.len() - j - 1;
        let o = args[j].as_slice();
        let is = |s: &str| o.eq_ignore_ascii_case(s.as_bytes());
        if is("withscores") {
            withscores = true;
        } else if is("limit") && left >= 2 {
            offset = tri!(arg_i64(&args[j + 1]));
            limit = tri!(arg_i64(&args[j + 2]));
            j += 2;
        } else if direction == Direction::Auto && is("rev") {
            direction = Direction::Reverse;
        } else if rangetype == RangeType::Auto && is("bylex") {
            rangetype = RangeType::Lex;
        } else if rangetype == RangeType::Auto && is("byscore") {
            rangetype = RangeType::Score;
        } else {
            return err(SYNTAX);
        }
        j += 1;
    }
    if direction == Direction::Auto {
        direction = Direction::Forward;
    }
    if rangetype == RangeType::Auto {
        rangetype = RangeType::Rank;
    }
    if limit != -1 && rangetype == RangeType::Rank {
        return err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if withscores && rangetype == RangeType::Lex {
        return err("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    let rev = direction == Direction::Reverse;
    let (mut min_arg, mut max_arg) = (&args[2], &args[3]);
    if rev && rangetype != RangeType::Rank {
        std::mem::swap(&mut min_arg, &mut max_arg);
    }
    enum Range {
        Rank(i64, i64),
        Score(f64, bool, f64, bool),
    }
    let range = match rangetype {
        RangeType::Rank => Range::Rank(tri!(arg_i64(min_arg)), tri!(arg_i64(max_arg))),
        RangeType::Score => match (parse_score_bound(min_arg), parse_score_bound(max_arg)) {
            (Some((min, min_ex)), Some((max, max_ex))) => Range::Score(min, min_ex, max, max_ex),
            _ => return err(MINMAX_NOT_FLOAT),
        },
        _ => return err("ERR orq-sim does not model ZRANGE BYLEX"),
    };
    let Some(z) = tri!(read_zset(ex.db, key)) else {
        return Resp::Array(Vec::new());
    };
    let picked: Vec<(&[u8], f64)> = match range {
        Range::Rank(start, end) => {
            let len = z.len() as i64;
            let mut start = if start < 0 { len + start } else { start };
            let mut end = if end < 0 { len + end } else { end };
            if start < 0 {
                start = 0;
            }
            if start > end || start >= len {
                Vec::new()
            } else {
                if end >= len {
                    end = len - 1;
                }
                let n = (end - start + 1) as usize;
                if rev {
                    z.iter().rev().skip(start as usize).take(n).collect()
                } else {
                    z.iter().skip(start as usize).take(n).collect()
                }
            }
        }
        Range::Score(min, min_ex, max, max_ex) => {
            let empty_range = min > max || (min == max && (min_ex || max_ex));
            if empty_range || (offset > 0 && offset >= z.len() as i64) || offset < 0 {
                // A negative offset skips every element in Redis (`while (ln && offset--)`).
                Vec::new()
            } else {
                let it = z.range_by_score(min, min_ex, max, max_ex, rev);
                let it = it.skip(offset as usize);
                if limit < 0 {
                    it.collect()
                } else {
                    it.take(limit as usize).collect()
                }
            }
        }
    };
    let mut out = Vec::with_capacity(picked.len() * if withscores { 2 } else { 1 });
    for (m, s) in picked {
        out.push(bulk(m));
        if withscores {
            out.push(double(s));
        }
    }
    Resp::Array(out)
}

fn zrange(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    zrange_generic(ex, args, RangeType::Auto, Direction::Auto)
}

fn zrevrange(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    zrange_generic(ex, args, RangeType::Rank, Direction::Reverse)
}

fn zrangebyscore(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    zrange_generic(ex, args, RangeType::Score, Direction::Forward)
}

fn zpopmin(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    if args.len() > 3 {
        return err(SYNTAX);
    }
    let mut count = 1;
    if args.len() == 3 {
        count = tri!(arg_count(&args[2]));
    }
    let key = &args[1];
    if tri!(read_zset(ex.db, key)).is_none() || count == 0 {
        return Resp::Array(Vec::new());
    }
    let Some(Value::ZSet(z)) = ex.db.get_mut(key) else {
        unreachable!("checked type")
    };
    let popped: Vec<(Vec<u8>, f64)> = z
        .iter()
        .take(count as usize)
        .map(|(m, s)| (m.to_vec(), s))
        .collect();
    let mut out = Vec::with_capacity(popped.len() * 2);
    for (m, s) in popped {
        z.remove(&m);
        out.push(Resp::Bulk(m));
        out.push(double(s));
    }
    ex.db.remove_if_empty(key);
    Resp::Array(out)
}

// ----- sets ---------------------------------------------------------------------------------

fn sadd(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let Value::Set(s) = tri!(write_value(
        ex.db,
        &args[1],
        |v| matches!(v, Value::Set(_)),
        || Value::Set(BTreeSet::new())
    )) else {
        unreachable!("checked type")
    };
    int(args[2..].iter().filter(|m| s.insert(m.to_vec())).count())
}

fn srem(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    if tri!(read_set(ex.db, &args[1])).is_none() {
        return Resp::Int(0);
    }
    let Some(Value::Set(s)) = ex.db.get_mut(&args[1]) else {
        unreachable!("checked type")
    };
    let removed = args[2..].iter().filter(|m| s.remove(m.as_slice())).count();
    ex.db.remove_if_empty(&args[1]);
    int(removed)
}

/// SMEMBERS in byte order. Redis returns its hash table's order (or an intset's numeric order),
/// which depends on a per-process hash seed; callers must not depend on it (queues.lua sorts).
fn smembers(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let s = tri!(read_set(ex.db, &args[1]));
    Resp::Array(s.into_iter().flatten().map(|m| bulk(m)).collect())
}

fn sismember(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let s = tri!(read_set(ex.db, &args[1]));
    Resp::Int(i64::from(s.is_some_and(|s| s.contains(args[2].as_slice()))))
}

fn scard(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    int(tri!(read_set(ex.db, &args[1])).map_or(0, |s| s.len()))
}

// ----- streams ------------------------------------------------------------------------------

/// C `strtoull(s, &end, 10)` that must consume the whole (non-empty) string, as Redis's
/// `string2ull` falls back to: leading spaces and a sign are accepted, `-n` wraps around.
fn strtoull_all(s: &[u8]) -> Option<u64> {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let mut negative = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        negative = s[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut v: u64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        v = v.checked_mul(10)?.checked_add(u64::from(s[i] - b'0'))?;
        i += 1;
    }
    if i == start || i != s.len() {
        return None;
    }
    Some(if negative { v.wrapping_neg() } else { v })
}

/// Redis's `string2ull`.
fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(n) = parse_i64(s) {
        return u64::try_from(n).ok();
    }
    strtoull_all(s)
}

/// A parsed stream ID argument: the ID, and whether its sequence was given (`5-*` leaves it to
/// the stream).
struct IdArg {
    id: StreamId,
    seq_given: bool,
}

/// `streamGenericParseIDOrReply`: `-`, `+` (unless strict), `<ms>`, `<ms>-<seq>`, and (for XADD)
/// `<ms>-*`. `missing_seq` fills in a bare `<ms>`.
fn parse_stream_id(
    a: &[u8],
    missing_seq: u64,
    strict: bool,
    allow_star_seq: bool,
) -> Option<IdArg> {
    let a = &a[..a.iter().position(|&b| b == 0).unwrap_or(a.len())];
    if a.len() > 127 {
        return None;
    }
    if a == b"-" || a == b"+" {
        if strict {
            return None;
        }
        let id = if a == b"-" {
            StreamId { ms: 0, seq: 0 }
        } else {
            StreamId {
                ms: u64::MAX,
                seq: u64::MAX,
            }
        };
        return Some(IdArg {
            id,
            seq_given: true,
        });
    }
    let (ms_part, seq_part) = match a.iter().position(|&b| b == b'-') {
        Some(p) => (&a[..p], Some(&a[p + 1..])),
        None => (a, None),
    };
    let ms = string2ull(ms_part)?;
    let (seq, seq_given) = match seq_part {
        Some(b"*") if allow_star_seq => (0, false),
        Some(s) => (string2ull(s)?, true),
        None => (missing_seq, true),
    };
    Some(IdArg {
        id: StreamId { ms, seq },
        seq_given,
    })
}

/// The reply to the XADD trimming forms the model refuses.
const APPROX_TRIM: &str =
    "ERR orq-sim models only exact trimming (no '~' or LIMIT; MINID only with XTRIM)";

/// XADD key [NOMKSTREAM] [MAXLEN [=] n] <* | id> field value [field value ...]
/// (`streamParseAddOrTrimArgsOrReply` and `xaddCommand` in t_stream.c). Approximate trimming
/// (`MAXLEN ~ n`), MINID and LIMIT are refused with an error: what Redis trims then depends on
/// the byte sizes of its internal stream nodes.
fn xadd(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let mut maxlen: Option<i64> = None;
    let mut no_mkstream = false;
    let mut id_arg: Option<IdArg> = None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let o = args[i].as_slice();
        let is = |s: &str| o.eq_ignore_ascii_case(s.as_bytes());
        if o == b"*" {
            break;
        } else if is("maxlen") && more > 0 {
            if maxlen.is_some() {
                return err(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                );
            }
            let next = args[i + 1].as_slice();
            if more >= 2 && next == b"~" {
                return err(APPROX_TRIM);
            }
            if more >= 2 && next == b"=" {
                i += 1;
            }
            let n = tri!(arg_i64(&args[i + 1]));
            if n < 0 {
                return err("ERR The MAXLEN argument must be >= 0.");
            }
            maxlen = Some(n);
            i += 1;
        } else if is("nomkstream") {
            no_mkstream = true;
        } else if is("minid") || is("limit") {
            return err(APPROX_TRIM);
        } else {
            match parse_stream_id(o, 0, true, true) {
                Some(id) => id_arg = Some(id),
                None => return err(INVALID_STREAM_ID),
            }
            break;
        }
        i += 1;
    }
    let field_pos = i + 1;
    if args.len() < field_pos + 2 || (args.len() - field_pos) % 2 == 1 {
        return arity_error("xadd");
    }
    if let Some(IdArg {
        id: StreamId { ms: 0, seq: 0 },
        seq_given: true,
    }) = id_arg
    {
        return err("ERR The ID specified in XADD must be greater than 0-0");
    }
    let key = &args[1];
    if tri!(read_stream(ex.db, key)).is_none() {
        if no_mkstream {
            return Resp::Nil;
        }
        ex.db.insert(key, Value::Stream(Stream::default()), None);
    }
    let now_ms = ex.db.now_ms();
    let Some(Value::Stream(s)) = ex.db.get_mut(key) else {
        unreachable!("checked type")
    };
    let last = s.last_id();
    if last.ms == u64::MAX && last.seq == u64::MAX {
        return err("ERR The stream has exhausted the last possible ID, unable to add more items");
    }
    let too_small =
        || err("ERR The ID specified in XADD is equal or smaller than the target stream top item");
    let id = match id_arg {
        Some(IdArg {
            id,
            seq_given: true,
        }) => id,
        Some(IdArg {
            id,
            seq_given: false,
        }) => {
            if last.ms == id.ms {
                if last.seq == u64::MAX {
                    return too_small();
                }
                StreamId {
                    ms: last.ms,
                    seq: last.seq + 1,
                }
            } else {
                id
            }
        }
        // `*`: the store's time, but never behind the last ID (`streamNextID`).
        None => {
            if now_ms > last.ms {
                StreamId { ms: now_ms, seq: 0 }
            } else if last.seq == u64::MAX {
                StreamId {
                    ms: last.ms + 1,
                    seq: 0,
                }
            } else {
                StreamId {
                    ms: last.ms,
                    seq: last.seq + 1,
                }
            }
        }
    };
    if id <= last {
        return too_small();
    }
    let fields = args[field_pos..]
        .chunks(2)
        .map(|fv| (fv[0].clone(), fv[1].clone()))
        .collect();
    s.push(id, fields);
    if let Some(n) = maxlen {
        s.trim_to(usize::try_from(n).unwrap_or(usize::MAX));
    }
    Resp::Bulk(id.to_string().into_bytes())
}

/// XTRIM key <MAXLEN [=] n | MINID [=] id> (`xtrimCommand` in t_stream.c): remove the oldest
/// entries until at most n remain, or every entry whose ID is below `id` (a bare `<ms>` means
/// `<ms>-0`; `-` and `+` are invalid IDs here, as in Redis's strict parse); replies with the count removed (0 for a missing key).
/// Approximate trimming (`~`) is refused, as for XADD; LIMIT without `~` is Redis's own syntax
/// error.
fn xtrim(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let o = args[2].as_slice();
    let minid = o.eq_ignore_ascii_case(b"minid");
    if !minid && !o.eq_ignore_ascii_case(b"maxlen") {
        return err("ERR syntax error");
    }
    // `~` and `=` are operators only when a count follows them (`streamParseAddOrTrimArgsOrReply`).
    let mut i = 3;
    if args.len() > 4 {
        match args[3].as_slice() {
            b"~" => return err(APPROX_TRIM),
            b"=" => i = 4,
            _ => {}
        }
    }
    let bound = if minid {
        match parse_stream_id(&args[i], 0, true, false) {
            Some(IdArg { id, .. }) => Trim::MinId(id),
            None => return err(INVALID_STREAM_ID),
        }
    } else {
        let n = tri!(arg_i64(&args[i]));
        if n < 0 {
            return err("ERR The MAXLEN argument must be >= 0.");
        }
        Trim::MaxLen(usize::try_from(n).unwrap_or(usize::MAX))
    };
    match &args[i + 1..] {
        [] => {}
        [limit, count] if limit.eq_ignore_ascii_case(b"limit") => {
            tri!(arg_i64(count));
            return err("ERR syntax error, LIMIT cannot be used without the special ~ option");
        }
        _ => return err("ERR syntax error"),
    }
    if tri!(read_stream(ex.db, &args[1])).is_none() {
        return int(0);
    }
    let Some(Value::Stream(s)) = ex.db.get_mut(&args[1]) else {
        unreachable!("checked type")
    };
    int(match bound {
        Trim::MaxLen(n) => s.trim_to(n),
        Trim::MinId(id) => s.trim_below(id),
    })
}

/// What an exact XTRIM keeps: at most n entries, or the entries from an ID on.
enum Trim {
    MaxLen(usize),
    MinId(StreamId),
}

fn xlen(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    int(tri!(read_stream(ex.db, &args[1])).map_or(0, |s| s.len()))
}

/// XRANGE key start end [COUNT n] (`xrangeGenericCommand` in t_stream.c).
fn xrange(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    xrange_generic(ex, args, false)
}

/// XREVRANGE key end start [COUNT n]: XRANGE's entries newest first (`xrangeGenericCommand`
/// with `rev`: the bounds are read from the swapped arguments, with the same rules).
fn xrevrange(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    xrange_generic(ex, args, true)
}

fn xrange_generic(ex: &mut Exec<'_>, args: &[Vec<u8>], rev: bool) -> Resp {
    let (start_arg, end_arg) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let interval = |a: &[u8], missing_seq: u64| -> Option<(StreamId, bool)> {
        if a.len() > 1 && a[0] == b'(' {
            parse_stream_id(&a[1..], missing_seq, true, false).map(|i| (i.id, true))
        } else {
            parse_stream_id(a, missing_seq, false, false).map(|i| (i.id, false))
        }
    };
    let Some((mut start, start_ex)) = interval(start_arg, 0) else {
        return err(INVALID_STREAM_ID);
    };
    if start_ex {
        if start.seq == u64::MAX {
            if start.ms == u64::MAX {
                return err("ERR invalid start ID for the interval");
            }
            start = StreamId {
                ms: start.ms + 1,
                seq: 0,
            };
        } else {
            start.seq += 1;
        }
    }
    let Some((mut end, end_ex)) = interval(end_arg, u64::MAX) else {
        return err(INVALID_STREAM_ID);
    };
    if end_ex {
        if end.seq == 0 {
            if end.ms == 0 {
                return err("ERR invalid end ID for the interval");
            }
            end = StreamId {
                ms: end.ms - 1,
                seq: u64::MAX,
            };
        } else {
            end.seq -= 1;
        }
    }
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        let more = args.len() - j - 1;
        if args[j].eq_ignore_ascii_case(b"count") && more >= 1 {
            count = tri!(arg_i64(&args[j + 1])).max(0);
            j += 1;
        } else {
            return err(SYNTAX);
        }
        j += 1;
    }
    let Some(s) = tri!(read_stream(ex.db, &args[1])) else {
        return Resp::Array(Vec::new());
    };
    if count == 0 {
        return Resp::Nil;
    }
    if start > end {
        return Resp::Array(Vec::new());
    }
    let take = if count < 0 {
        usize::MAX
    } else {
        count as usize
    };
    let entry = |(id, fields): (&StreamId, &StreamFields)| {
        let flat = fields
            .iter()
            .flat_map(|(f, v)| [bulk(f), bulk(v)])
            .collect();
        Resp::Array(vec![
            Resp::Bulk(id.to_string().into_bytes()),
            Resp::Array(flat),
        ])
    };
    let range = s.entries().range(start..=end);
    Resp::Array(if rev {
        range.rev().take(take).map(entry).collect()
    } else {
        range.take(take).map(entry).collect()
    })
}

// ----- lists --------------------------------------------------------------------------------

fn push(ex: &mut Exec<'_>, args: &[Vec<u8>], head: bool) -> Resp {
    let Value::List(l) = tri!(write_value(
        ex.db,
        &args[1],
        |v| matches!(v, Value::List(_)),
        || Value::List(VecDeque::new())
    )) else {
        unreachable!("checked type")
    };
    for v in &args[2..] {
        if head {
            l.push_front(v.clone());
        } else {
            l.push_back(v.clone());
        }
    }
    int(l.len())
}

fn lpush(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    push(ex, args, true)
}

fn rpush(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    push(ex, args, false)
}

/// LPOP / RPOP key [count] (`popGenericCommand` in t_list.c).
fn pop(ex: &mut Exec<'_>, args: &[Vec<u8>], head: bool, name: &str) -> Resp {
    if args.len() > 3 {
        return arity_error(name);
    }
    let count = if args.len() == 3 {
        Some(tri!(arg_count(&args[2])))
    } else {
        None
    };
    let key = &args[1];
    if tri!(read_list(ex.db, key)).is_none() {
        return Resp::Nil;
    }
    let Some(Value::List(l)) = ex.db.get_mut(key) else {
        unreachable!("checked type")
    };
    let reply = match count {
        None => {
            let v = if head { l.pop_front() } else { l.pop_back() };
            Resp::Bulk(v.expect("lists are never empty"))
        }
        Some(n) => {
            let mut out = Vec::new();
            for _ in 0..n {
                let v = if head { l.pop_front() } else { l.pop_back() };
                match v {
                    Some(v) => out.push(Resp::Bulk(v)),
                    None => break,
                }
            }
            Resp::Array(out)
        }
    };
    ex.db.remove_if_empty(key);
    reply
}

fn lpop(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    pop(ex, args, true, "lpop")
}

fn rpop(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    pop(ex, args, false, "rpop")
}

fn lrange(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let start = tri!(arg_i64(&args[2]));
    let end = tri!(arg_i64(&args[3]));
    let Some(l) = tri!(read_list(ex.db, &args[1])) else {
        return Resp::Array(Vec::new());
    };
    let len = l.len() as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return Resp::Array(Vec::new());
    }
    if end >= len {
        end = len - 1;
    }
    Resp::Array(
        l.iter()
            .skip(start as usize)
            .take((end - start + 1) as usize)
            .map(|v| bulk(v))
            .collect(),
    )
}

fn llen(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    int(tri!(read_list(ex.db, &args[1])).map_or(0, |l| l.len()))
}

/// LREM key count element (`lremCommand` in t_list.c): removes the first `count` occurrences
/// from the head (count > 0), the last `-count` from the tail (count < 0) or all (0); replies
/// the number removed, and deletes the key when the list is left empty.
fn lrem(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let count = tri!(arg_i64(&args[2]));
    let key = &args[1];
    if tri!(read_list(ex.db, key)).is_none() {
        return int(0);
    }
    let Some(Value::List(l)) = ex.db.get_mut(key) else {
        unreachable!("checked type")
    };
    let want = if count == 0 {
        usize::MAX
    } else {
        usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX)
    };
    let elem = &args[3];
    let mut removed = 0usize;
    if count >= 0 {
        let mut i = 0;
        while i < l.len() && removed < want {
            if l[i] == *elem {
                l.remove(i);
                removed += 1;
            } else {
                i += 1;
            }
        }
    } else {
        let mut i = l.len();
        while i > 0 && removed < want {
            i -= 1;
            if l[i] == *elem {
                l.remove(i);
                removed += 1;
            }
        }
    }
    ex.db.remove_if_empty(key);
    int(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(db: &mut Db, args: &[&str]) -> Resp {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let cmd = lookup(&args[0]).expect("known command");
        assert!(cmd.arity_ok(args.len()));
        let now_us = db.now_ms() * 1000;
        cmd.run(&mut Exec { db, now_us }, &args)
    }

    fn bulks(items: &[&str]) -> Resp {
        Resp::Array(
            items
                .iter()
                .map(|s| Resp::Bulk(s.as_bytes().to_vec()))
                .collect(),
        )
    }

    // Goal: the sorted set commands the scripts lean on behave like Redis on a small example.
    #[test]
    fn zset_commands_follow_redis() {
        let mut db = Db::default();
        assert_eq!(
            run(&mut db, &["zadd", "z", "1", "a", "2", "b", "3", "c"]),
            Resp::Int(3)
        );
        assert_eq!(run(&mut db, &["zadd", "z", "NX", "5", "a"]), Resp::Int(0));
        assert_eq!(
            run(&mut db, &["zadd", "z", "ch", "gt", "0.5", "a", "4", "b"]),
            Resp::Int(1)
        );
        assert_eq!(
            run(&mut db, &["zscore", "z", "b"]),
            Resp::Bulk(b"4".to_vec())
        );
        assert_eq!(
            run(
                &mut db,
                &["zrangebyscore", "z", "(1", "+inf", "LIMIT", "0", "1"]
            ),
            bulks(&["c"])
        );
        assert_eq!(
            run(&mut db, &["zrange", "z", "0", "0", "withscores"]),
            bulks(&["a", "1"])
        );
        assert_eq!(
            run(&mut db, &["zrevrange", "z", "0", "-1"]),
            bulks(&["b", "c", "a"])
        );
        assert_eq!(run(&mut db, &["zpopmin", "z"]), bulks(&["a", "1"]));
        assert_eq!(run(&mut db, &["zrem", "z", "b", "c", "x"]), Resp::Int(2));
        assert_eq!(run(&mut db, &["exists", "z"]), Resp::Int(0));
        assert_eq!(
            run(&mut db, &["zadd", "z", "x", "a"]),
            Resp::Error(NOT_FLOAT.into())
        );
        assert_eq!(
            run(&mut db, &["zadd", "z", "incr", "0.1", "a"]),
            Resp::Bulk(b"0.10000000000000001".to_vec())
        );
    }

    // Goal: XADD ids come from the store time and never go backwards.
    #[test]
    fn stream_ids_use_store_time_and_never_go_backwards() {
        let mut db = Db::default();
        db.set_now(1000);
        assert_eq!(
            run(&mut db, &["xadd", "s", "*", "k", "v"]),
            Resp::Bulk(b"1000-0".to_vec())
        );
        assert_eq!(
            run(&mut db, &["xadd", "s", "*", "k", "v"]),
            Resp::Bulk(b"1000-1".to_vec())
        );
        db.set_now(900);
        assert_eq!(
            run(&mut db, &["xadd", "s", "MAXLEN", "2", "*", "k", "v"]),
            Resp::Bulk(b"1000-2".to_vec())
        );
        assert_eq!(run(&mut db, &["xlen", "s"]), Resp::Int(2));
        db.set_now(2000);
        assert_eq!(
            run(&mut db, &["xadd", "s", "*", "k", "v"]),
            Resp::Bulk(b"2000-0".to_vec())
        );
    }
}
