//! The Redis commands the model implements, with Redis 7.0's semantics, replies and error texts.
//!
//! Each command is a row of [`COMMANDS`]: its name, its arity as in Redis's command table
//! (positive: exact argument count including the name; negative: at least that many), which
//! arguments are keys (for the cluster slot check), and the function that runs it. The behaviour
//! follows the Redis 7.0 sources (`t_string.c`, `t_hash.c`, `t_zset.c`, `t_set.c`, `t_list.c`,
//! `t_stream.c`, `expire.c`, `db.c`) and is checked against a real `redis-server` by
//! `sim/tests/command_differential.rs`.
//!
//! This file holds the table, the argument and reply helpers and the typed key lookups; the
//! commands themselves are one file per family: [`keys`] (TIME, keyspace, strings, PUBLISH),
//! [`hashes`], [`zsets`], [`sets`], [`streams`] and [`lists`].

use crate::db::{Db, Hash, Stream, Value, ZSet};
use crate::num::{format_g17, parse_i64};
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

/// Whether a command changes data, as a read-only script sees it: Redis refuses commands flagged
/// `write` or `may-replicate` (PUBLISH) inside a script that declared `no-writes`
/// (`scriptVerifyWriteCommandAllow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads only.
    Read,
    /// Writes, or may be replicated (PUBLISH).
    Write,
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
    /// Whether a read-only script (a function flagged `no-writes`, called by FCALL or FCALL_RO)
    /// may run it.
    pub access: Access,
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
    ($name:literal, $arity:expr, $keys:ident, $f:ident, $access:ident) => {
        Command {
            name: $name,
            arity: $arity,
            keys: KeySpec::$keys,
            access: Access::$access,
            run: $f,
        }
    };
}

/// Every command the model implements, with Redis 7.0's arity.
pub static COMMANDS: &[Command] = &[
    cmd!("time", 1, None, time, Read),
    cmd!("get", 2, First, get, Read),
    cmd!("set", -3, First, set, Write),
    cmd!("del", -2, All, del, Write),
    cmd!("exists", -2, All, exists, Read),
    cmd!("type", 2, First, type_of, Read),
    cmd!("pttl", 2, First, pttl, Read),
    cmd!("ttl", 2, First, ttl, Read),
    cmd!("hget", 3, First, hget, Read),
    cmd!("hset", -4, First, hset, Write),
    cmd!("hmget", -3, First, hmget, Read),
    cmd!("hgetall", 2, First, hgetall, Read),
    cmd!("hincrby", 4, First, hincrby, Write),
    cmd!("hdel", -3, First, hdel, Write),
    cmd!("zadd", -4, First, zadd, Write),
    cmd!("zrem", -3, First, zrem, Write),
    cmd!("zcard", 2, First, zcard, Read),
    cmd!("zscore", 3, First, zscore, Read),
    cmd!("zrange", -4, First, zrange, Read),
    cmd!("zrevrange", -4, First, zrevrange, Read),
    cmd!("zrangebyscore", -4, First, zrangebyscore, Read),
    cmd!("zpopmin", -2, First, zpopmin, Write),
    cmd!("sadd", -3, First, sadd, Write),
    cmd!("srem", -3, First, srem, Write),
    cmd!("smembers", 2, First, smembers, Read),
    cmd!("sismember", 3, First, sismember, Read),
    cmd!("scard", 2, First, scard, Read),
    cmd!("xadd", -5, First, xadd, Write),
    cmd!("xlen", 2, First, xlen, Read),
    cmd!("xtrim", -4, First, xtrim, Write),
    cmd!("xrange", -4, First, xrange, Read),
    cmd!("xrevrange", -4, First, xrevrange, Read),
    cmd!("lpush", -3, First, lpush, Write),
    cmd!("rpush", -3, First, rpush, Write),
    cmd!("lpop", -2, First, lpop, Write),
    cmd!("rpop", -2, First, rpop, Write),
    cmd!("lrange", 4, First, lrange, Read),
    cmd!("llen", 2, First, llen, Read),
    cmd!("lrem", 4, First, lrem, Write),
    cmd!("publish", 3, None, publish, Write),
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

mod hashes;
mod keys;
mod lists;
mod sets;
mod streams;
mod zsets;

use hashes::{hdel, hget, hgetall, hincrby, hmget, hset};
use keys::{del, exists, get, pttl, publish, set, time, ttl, type_of};
use lists::{llen, lpop, lpush, lrange, lrem, rpop, rpush};
use sets::{sadd, scard, sismember, smembers, srem};
use streams::{xadd, xlen, xrange, xrevrange, xtrim};
use zsets::{zadd, zcard, zpopmin, zrange, zrangebyscore, zrem, zrevrange, zscore};

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
