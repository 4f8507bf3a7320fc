//! orq's in-memory Redis model: the keyspace, commands and Lua scripting that run the production
//! transition scripts, and [`MemoryStore`], the store built on them.
//!
//! Three users: `orq serve` without `--redis` (the embedded store, on [`WallClock`]), the
//! simulator (`orq-sim`, on [`ManualClock`]) and the fuzz targets. The crate holds only the model,
//! so the product binary links none of the simulator's harness, checker or test utilities
//! (design note 41).
//!
//! [`MemoryStore`] implements [`orq::Store`] with one Lua 5.1 state (through `mlua`, the Lua
//! version Redis embeds) and a model of the Redis 7.0 keyspace. It reproduces exactly the commands
//! the scripts in `lua/scripts/` call, with Redis's replies and error texts, and Redis's scripting
//! rules (conversions between Lua and RESP, `redis.call` versus `redis.pcall`, read-only globals,
//! error texts with `script: <sha>, on @user_script:<line>.`, no rollback, time frozen at the
//! script's start). The differential tests in `sim/tests/` run every modelled command and every
//! transition script against a private `redis-server` and compare replies and full key dumps.
//!
//! Modelled commands: TIME; GET, SET (NX, XX, GET, EX, PX, EXAT, PXAT, KEEPTTL), DEL, EXISTS,
//! TYPE, PTTL, TTL; HGET, HSET, HMGET, HGETALL, HINCRBY, HDEL; ZADD (NX, XX, GT, LT, CH, INCR), ZREM,
//! ZCARD, ZSCORE, ZRANGE (by rank, BYSCORE, REV, LIMIT, WITHSCORES), ZREVRANGE, ZRANGEBYSCORE,
//! ZPOPMIN; SADD, SREM, SMEMBERS, SISMEMBER, SCARD; XADD (NOMKSTREAM, MAXLEN [=] n, `*`,
//! `<ms>-*` and explicit IDs), XTRIM (MAXLEN [=] n, MINID [=] id), XLEN, XRANGE and XREVRANGE
//! (exclusive `(` bounds, COUNT); LPUSH, RPUSH, LPOP, RPOP, LRANGE, LLEN, LREM; PUBLISH (answers 0:
//! the model has no pub/sub clients; [`MemoryStore`] wakes its `Store::wake` listeners instead).
//! Any other command is Redis's unknown-command error.
//!
//! Known differences from Redis 7.0 (none changes what orq's engine decodes):
//! - SMEMBERS returns members in byte order; Redis's order depends on a per-process hash seed
//!   (`queues.lua` sorts the names).
//! - HGETALL returns fields in insertion order, which is what Redis returns for hashes in its
//!   compact encoding (up to 128 fields of at most 64 bytes by default); bigger hashes come back
//!   in hash-table order from Redis (the engine reads field lists into maps).
//! - `XADD`/`XTRIM ... MAXLEN ~ n` and LIMIT, XADD's MINID, and ZRANGE BYLEX, are refused with an
//!   error.
//! - A score of `-0` is stored as `0` (Redis's compact encoding does this; its skip list keeps
//!   `-0` in sorted sets of more than 128 members).
//! - `*` stream IDs use the script's time; Redis uses its wall clock at the moment of the XADD.
//! - The `cjson`, `cmsgpack`, `struct` and `bit` Lua libraries and RESP3 are absent.
//! - A script may run at most [`SCRIPT_INSTRUCTIONS_MAX`] Lua instructions; Redis has no such
//!   limit (it answers BUSY to other clients while a long script runs).

mod clock;
mod commands;
mod db;
mod num;
mod script;
mod slot;
mod store;
mod touched;

pub use clock::{ManualClock, StoreClock, WallClock};
pub use db::{Db, Dump, DumpData, DumpValue, Hash, Stream, StreamFields, StreamId, Value, ZSet};
pub use num::{format_g17, parse_f64_strict, parse_i64};
pub use script::{CROSSSLOT, SCRIPT_CROSS_SLOT, SCRIPT_INSTRUCTIONS_MAX};
pub use slot::{crc16, key_slot, SLOT_COUNT};
pub use store::{MemoryStore, Snapshot};
pub use touched::Touched;
