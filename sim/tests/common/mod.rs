//! Shared fixtures for the differential tests: a private real Redis with blocking helpers, reply
//! conversion, and full key dumps of both stores in one comparable form. The deployments other
//! than one server are in submodules: [`cluster`] (a Redis Cluster as one store) and
//! [`sentinel`] (the primary a sentinel names).

#![allow(dead_code)]

pub mod cluster;
pub mod sentinel;

use orq::testing::RedisServer;
use orq::Resp;
use orq_sim::{parse_f64_strict, Dump, DumpData, DumpValue, ManualClock, MemoryStore, StreamId};
use redis::Value;
use std::sync::{Arc, Mutex};

/// A private `redis-server` (started for this test binary, or a server of a deployment a test
/// started) and a connection to it, with blocking helpers so proptest bodies can call it.
pub struct RealRedis {
    /// The server this value started and stops, if any (`None` for a server of a cluster or of
    /// a Sentinel deployment, which its fixture stops).
    _server: Option<RedisServer>,
    rt: tokio::runtime::Runtime,
    conn: redis::aio::MultiplexedConnection,
}

impl RealRedis {
    /// Start a server and connect (see [`RealRedis::connect`]).
    pub fn start() -> Self {
        let server = RedisServer::start();
        let mut real = RealRedis::connect(&server.url());
        real._server = Some(server);
        real
    }

    /// Connect to the running server at `url`, which must be a test's own. Hashes are kept in
    /// Redis's compact encoding (listpack) at any size, so HGETALL returns insertion order, as
    /// the model does (see `orq_sim::Hash`).
    pub fn connect(url: &str) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let client = redis::Client::open(url).expect("client");
        let conn = rt
            .block_on(client.get_multiplexed_async_connection())
            .unwrap_or_else(|e| panic!("connect to the private redis-server at {url}: {e}"));
        let mut real = RealRedis {
            _server: None,
            rt,
            conn,
        };
        for (name, value) in [
            ("hash-max-listpack-entries", "1000000"),
            ("hash-max-listpack-value", "1000000"),
        ] {
            let r = real.command(&[b"CONFIG", b"SET", name.as_bytes(), value.as_bytes()]);
            assert_eq!(r, Resp::Status("OK".into()), "CONFIG SET {name}");
        }
        real
    }

    /// Run one command and return its reply (errors included) as the engine's `Resp`.
    pub fn command(&mut self, args: &[&[u8]]) -> Resp {
        let mut cmd = redis::cmd(std::str::from_utf8(args[0]).expect("command name"));
        for a in &args[1..] {
            cmd.arg(*a);
        }
        self.send(&cmd)
    }

    /// Send `cmd` and return the reply as it came: `query_async` would turn an error nested in
    /// an array into an error for the whole reply, so the raw connection call is used.
    fn send(&mut self, cmd: &redis::Cmd) -> Resp {
        use redis::aio::ConnectionLike;
        let mut conn = self.conn.clone();
        reply(self.rt.block_on(conn.req_packed_command(cmd)))
    }

    /// Send several commands in one round trip; replies in order.
    pub fn pipeline(&mut self, cmds: &[Vec<&[u8]>]) -> Vec<Resp> {
        use redis::aio::ConnectionLike;
        if cmds.is_empty() {
            return Vec::new();
        }
        let mut pipe = redis::pipe();
        for c in cmds {
            let mut cmd = redis::cmd(std::str::from_utf8(c[0]).expect("command name"));
            for a in &c[1..] {
                cmd.arg(*a);
            }
            pipe.add_command(cmd);
        }
        let mut conn = self.conn.clone();
        match self
            .rt
            .block_on(conn.req_packed_commands(&pipe, 0, cmds.len()))
        {
            Ok(values) => values.into_iter().map(to_resp).collect(),
            Err(e) => panic!("pipeline failed: {e}"),
        }
    }

    /// EVAL `source` with `keys` and `args`.
    pub fn eval(&mut self, source: &str, keys: &[String], args: &[Vec<u8>]) -> Resp {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(source).arg(keys.len()).arg(keys);
        for a in args {
            cmd.arg(a.as_slice());
        }
        self.send(&cmd)
    }

    /// EVALSHA of a registered script, with EVAL on NOSCRIPT (what `RedisStore` does).
    pub fn call(&mut self, script: &orq_lua::Script, keys: &[String], args: &[Vec<u8>]) -> Resp {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&script.sha1).arg(keys.len()).arg(keys);
        for a in args {
            cmd.arg(a.as_slice());
        }
        match self.send(&cmd) {
            Resp::Error(e) if e.starts_with("NOSCRIPT") => self.eval(&script.source, keys, args),
            other => other,
        }
    }

    /// FLUSHALL.
    pub fn flushall(&mut self) {
        assert_eq!(self.command(&[b"FLUSHALL"]), Resp::Status("OK".into()));
    }

    /// The server's clock (TIME) in milliseconds.
    pub fn time_ms(&mut self) -> u64 {
        let r = self.command(&[b"TIME"]);
        let items = r.as_array().expect("TIME array");
        let s = items[0].as_int().expect("seconds") as u64;
        let us = items[1].as_int().expect("micros") as u64;
        s * 1000 + us / 1000
    }

    /// Every key with its value and absolute expiry, read in one atomic call by [`DUMP_SCRIPT`].
    pub fn dump(&mut self) -> Dump {
        let Resp::Array(keys) = self.eval(DUMP_SCRIPT, &[], &[]) else {
            panic!("the dump script failed")
        };
        let mut out = Dump::new();
        for entry in keys {
            let Resp::Array(mut e) = entry else {
                panic!("dump entry {entry:?}")
            };
            let value = e.pop().expect("value");
            let expire = e.pop().and_then(|r| r.as_int()).expect("PEXPIRETIME");
            let ty = e.pop().expect("type");
            let key = bulk(e.pop().expect("key"));
            let data = match ty.as_str().expect("type") {
                "string" => DumpData::String(bulks(value).remove(0)),
                "hash" => DumpData::Hash(pairs(value)),
                "list" => DumpData::List(bulks(value)),
                "set" => {
                    let mut m = bulks(value);
                    m.sort();
                    DumpData::Set(m)
                }
                "zset" => DumpData::ZSet(
                    pairs(value)
                        .into_iter()
                        .map(|(m, s)| (m, parse_f64_strict(&s).expect("score")))
                        .collect(),
                ),
                "stream" => {
                    let Resp::Array(mut v) = value else {
                        panic!("stream {value:?}")
                    };
                    let entries = match v.pop().expect("entries") {
                        Resp::Array(items) => items
                            .into_iter()
                            .map(|e| {
                                let Resp::Array(mut e) = e else {
                                    panic!("entry {e:?}")
                                };
                                let fields = pairs(e.pop().expect("fields"));
                                let id = parse_id(&bulk(e.pop().expect("id")));
                                (id, fields)
                            })
                            .collect(),
                        other => panic!("XRANGE: {other:?}"),
                    };
                    let last_id = parse_id(&bulk(v.pop().expect("last id")));
                    DumpData::Stream { entries, last_id }
                }
                other => panic!("unexpected type {other}"),
            };
            let expire_at_ms = (expire >= 0).then_some(expire as u64);
            out.insert(key, DumpValue { data, expire_at_ms });
        }
        out
    }
}

/// Reads every key in one atomic call (no key can expire half way through the dump): for each
/// key `{key, type, PEXPIRETIME, value}`, the value as GET (in a one-item array), HGETALL,
/// LRANGE, SMEMBERS, ZRANGE WITHSCORES, or for a stream `{last-generated-id, XRANGE - +}`. The
/// flag lets it read a cluster node's keys of several slots (a script may otherwise touch only
/// one slot's keys); it changes nothing on a server outside a cluster.
const DUMP_SCRIPT: &str = r#"#!lua flags=allow-cross-slot-keys
local out = {}
for _, k in ipairs(redis.call('KEYS', '*')) do
  local t = redis.call('TYPE', k).ok
  local d
  if t == 'string' then d = {redis.call('GET', k)}
  elseif t == 'hash' then d = redis.call('HGETALL', k)
  elseif t == 'list' then d = redis.call('LRANGE', k, 0, -1)
  elseif t == 'set' then d = redis.call('SMEMBERS', k)
  elseif t == 'zset' then d = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
  elseif t == 'stream' then
    local info = redis.call('XINFO', 'STREAM', k)
    local last
    for i = 1, #info, 2 do
      if info[i] == 'last-generated-id' then last = info[i + 1] end
    end
    d = {last, redis.call('XRANGE', k, '-', '+')}
  end
  out[#out + 1] = {k, t, redis.call('PEXPIRETIME', k), d}
end
return out
"#;

/// The one private server of a test binary whose tests share it: started by the first test that
/// needs it and stopped when the last test holding a [`SharedRedis`] ends (a server in a plain
/// `static` would outlive the test process, since statics are never dropped).
struct Shared {
    users: usize,
    server: Option<RealRedis>,
}

static SHARED: Mutex<Shared> = Mutex::new(Shared {
    users: 0,
    server: None,
});

fn shared_state() -> std::sync::MutexGuard<'static, Shared> {
    // A test that panicked while holding the lock leaves consistent state behind (the server and
    // the count), so poisoning is ignored.
    SHARED.lock().unwrap_or_else(|e| e.into_inner())
}

/// A test's hold on the binary's shared server; hold it for the whole test.
pub struct SharedRedis(());

impl SharedRedis {
    /// Register a user of the shared server.
    pub fn acquire() -> Self {
        shared_state().users += 1;
        SharedRedis(())
    }

    /// Run `f` with the server (started on first use), excluding every other test meanwhile.
    pub fn with<R>(&self, f: impl FnOnce(&mut RealRedis) -> R) -> R {
        let mut state = shared_state();
        f(state.server.get_or_insert_with(RealRedis::start))
    }
}

impl Drop for SharedRedis {
    fn drop(&mut self) {
        let last = {
            let mut state = shared_state();
            state.users -= 1;
            if state.users == 0 {
                state.server.take()
            } else {
                None
            }
        };
        drop(last); // stops the server, outside the lock
    }
}

fn parse_id(b: &[u8]) -> StreamId {
    let s = std::str::from_utf8(b).expect("id");
    let (ms, seq) = s.split_once('-').expect("ms-seq");
    StreamId {
        ms: ms.parse().expect("ms"),
        seq: seq.parse().expect("seq"),
    }
}

fn bulk(r: Resp) -> Vec<u8> {
    match r {
        Resp::Bulk(b) => b,
        other => panic!("expected a bulk string, got {other:?}"),
    }
}

fn bulks(r: Resp) -> Vec<Vec<u8>> {
    match r {
        Resp::Array(items) => items.into_iter().map(bulk).collect(),
        other => panic!("expected an array, got {other:?}"),
    }
}

fn pairs(r: Resp) -> Vec<(Vec<u8>, Vec<u8>)> {
    let flat = bulks(r);
    flat.chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect()
}

fn server_error(code: &str, detail: Option<&str>) -> Resp {
    Resp::Error(match detail {
        Some(d) => format!("{code} {d}"),
        None => code.to_string(),
    })
}

/// A `redis` crate reply (or error reply) as the engine's `Resp`, the same conversion
/// `orq::RedisStore` makes.
pub fn reply(r: redis::RedisResult<Value>) -> Resp {
    match r {
        Ok(v) => to_resp(v),
        Err(e) => match e.code() {
            Some(code) => server_error(code, e.detail()),
            None => panic!("redis I/O error: {e}"),
        },
    }
}

fn to_resp(v: Value) -> Resp {
    match v {
        Value::Nil => Resp::Nil,
        Value::Int(n) => Resp::Int(n),
        Value::BulkString(b) => Resp::Bulk(b),
        Value::Array(items) | Value::Set(items) => {
            Resp::Array(items.into_iter().map(to_resp).collect())
        }
        Value::SimpleString(s) => Resp::Status(s),
        Value::Okay => Resp::Status("OK".into()),
        Value::ServerError(e) => server_error(e.code(), e.details()),
        other => panic!("unexpected RESP2 value {other:?}"),
    }
}

/// A model store on a manual clock, and the clock.
pub fn model() -> (Arc<ManualClock>, MemoryStore) {
    let clock = Arc::new(ManualClock::from_ms(1_700_000_000_000));
    let store = MemoryStore::new(clock.clone());
    (clock, store)
}

/// Text for a failed comparison: each differing key of two dumps.
pub fn dump_diff(real: &Dump, model: &Dump) -> String {
    let mut out = String::new();
    let keys: std::collections::BTreeSet<&Vec<u8>> = real.keys().chain(model.keys()).collect();
    for k in keys {
        let (a, b) = (real.get(k), model.get(k));
        if a != b {
            out.push_str(&format!(
                "key {:?}\n  real:  {}\n  model: {}\n",
                String::from_utf8_lossy(k),
                a.map_or("(none)".to_string(), |v| v.to_string()),
                b.map_or("(none)".to_string(), |v| v.to_string()),
            ));
        }
    }
    out
}

/// Shorthand for a list of byte-string arguments.
pub fn args(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// Compare two dumps key by key: data equal, expiry times within `slack_ms` (Redis sets an
/// expiry from its own clock a moment after the script's TIME).
pub fn compare_dumps(real: &Dump, model: &Dump, slack_ms: i64) -> Result<(), String> {
    let same = real.len() == model.len()
        && real.iter().zip(model.iter()).all(|((ka, a), (kb, b))| {
            ka == kb
                && a.data == b.data
                && match (a.expire_at_ms, b.expire_at_ms) {
                    (None, None) => true,
                    (Some(x), Some(y)) => (x as i64 - y as i64).abs() <= slack_ms,
                    _ => false,
                }
        });
    if same {
        Ok(())
    } else {
        Err(format!("dumps differ:\n{}", dump_diff(real, model)))
    }
}
