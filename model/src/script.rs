//! The scripting engine: one Lua 5.1 state set up the way Redis 7.0 sets up its own, and the
//! conversions between Lua values and RESP replies.
//!
//! Sources: the Redis documentation on scripting (<https://redis.io/docs/interact/programmability/>,
//! "Lua API reference" and "Data type conversion"), and Redis 7.0's `script_lua.c` / `eval.c`,
//! whose behaviour the differential tests compare against a real server. What is reproduced:
//!
//! - the globals a script sees (`redis`, `KEYS`, `ARGV`, the base library without `print`,
//!   `getfenv`, `setfenv`, `newproxy`, `dofile`, `loadfile`; `string`, `table`, `math`,
//!   `coroutine`; no `os`, `io`, `package`, `require`, `debug`), all read-only: assigning a global
//!   fails with "Attempt to modify a readonly table" and reading an undefined one with "Script
//!   attempted to access nonexistent global variable";
//! - `redis.call` raising and `redis.pcall` returning the error table, the Redis 7 `pcall`
//!   that turns an error table into its `err` string, `redis.error_reply` / `status_reply`;
//! - the conversions both ways and the final error text of a failed script,
//!   `<message> script: <sha>, on @user_script:<line>.`;
//! - an instruction budget ([`SCRIPT_INSTRUCTIONS_MAX`]) in place of Redis's busy-script guard.
//!
//! Not modelled: the `cjson`, `cmsgpack`, `struct` and `bit` libraries (reading them is a
//! "nonexistent global" error), RESP3 (`redis.setresp(3)` is refused), and `pairs` / `#` over the
//! read-only library tables (they are proxies here, and look empty to `#`).

use crate::commands::{self, Exec};
use crate::db::Db;
use crate::num::{c_double_to_i64, format_g17};
use crate::slot::key_slot;
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};
use orq::Resp;
use std::collections::BTreeMap;
use std::fmt;

/// Most Lua VM instructions one script may execute before it is aborted with an error.
///
/// Redis has no instruction limit: after `busy-reply-threshold` (5 s by default) of script time
/// it answers other clients with `BUSY` until the script ends or is killed with `SCRIPT KILL`.
/// A model that runs on virtual time cannot wait for wall time, so it counts instructions
/// instead. 100 million is about a second of Lua, and ten times the longest legitimate orq
/// script (a `list` page that examines its full scan bound of 100 000 index entries).
pub const SCRIPT_INSTRUCTIONS_MAX: u64 = 100_000_000;

/// How often (in VM instructions) the budget hook runs; Redis's own hook runs every 100 000.
const HOOK_INTERVAL: u32 = 10_000;

/// Deepest nesting of tables a script reply may have before conversion stops with an error
/// (Redis fails when the Lua stack cannot grow; this bound keeps the conversion's recursion
/// small).
const REPLY_DEPTH_MAX: usize = 1_000;

/// The chunk name of every script: Redis loads script bodies as `@user_script`.
const CHUNK_NAME: &str = "@user_script";

/// The Redis version the model claims in `redis.REDIS_VERSION` (the one its tests compare with).
const REDIS_VERSION: &str = "7.0.15";

/// The reply when a script's KEYS do not share one cluster slot (strict mode): Redis Cluster's
/// text for a multi-key command across slots.
pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// The error a script gets in strict mode when a command touches a key outside the script's slot:
/// Redis 7's text for an undeclared key in another slot (`scriptVerifyClusterState`).
pub const SCRIPT_CROSS_SLOT: &str =
    "ERR Script attempted to access keys that do not hash to the same slot";

/// An error raised inside Lua by the model's own (Rust) functions.
#[derive(Debug, Clone)]
pub(crate) enum Raised {
    /// A Redis error table `{err = text}` (what `redis.call` raises).
    Reply(String),
    /// A Lua error string (a runtime error with its `user_script:<line>: ` prefix, if any).
    Text(String),
    /// The instruction budget ran out.
    Budget,
}

impl fmt::Display for Raised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Raised::Reply(t) | Raised::Text(t) => f.write_str(t),
            Raised::Budget => write!(
                f,
                "ERR Script exceeded the instruction budget of {SCRIPT_INSTRUCTIONS_MAX} \
                 Lua instructions (orq-sim's stand-in for Redis's busy-script guard)"
            ),
        }
    }
}

impl std::error::Error for Raised {}

fn raise<T>(r: Raised) -> mlua::Result<T> {
    Err(mlua::Error::external(r))
}

/// The [`Raised`] inside an error that crossed Lua, if it is one of ours.
fn find_raised(e: &mlua::Error) -> Option<&Raised> {
    match e {
        mlua::Error::CallbackError { cause, .. } => find_raised(cause),
        mlua::Error::WithContext { cause, .. } => find_raised(cause),
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<Raised>(),
        _ => None,
    }
}

/// The state of the script being run.
pub(crate) struct Run {
    /// The script's time, microseconds since the epoch (TIME and expiry use it).
    pub now_us: u64,
    /// SHA1 of the script body, for error texts.
    pub sha: String,
    /// Strict cluster mode: every key must hash to `slot`.
    pub strict: bool,
    /// The slot of the script's keys (None until a key is seen).
    pub slot: Option<u16>,
    /// Instructions executed so far (counted every [`HOOK_INTERVAL`]).
    pub instructions: u64,
    /// The budget ran out: every further hook and `pcall` raises again.
    pub killed: bool,
    /// The final error text, set by the error handler when the script fails.
    pub error: Option<String>,
}

/// Everything the Lua callbacks share, kept as the Lua state's app data.
pub(crate) struct Engine {
    /// The keyspace.
    pub db: Db,
    /// The running script, if any.
    pub run: Option<Run>,
    /// State of Redis's `redisLrand48` generator behind `math.random`.
    pub rand48: u64,
}

impl Engine {
    /// Run one command for `redis.call` / `redis.pcall`: Redis's script-side checks (unknown
    /// command, arity, strict-mode slot), then the command.
    fn call(&mut self, args: &[Vec<u8>]) -> Resp {
        let Some(cmd) = commands::lookup(&args[0]) else {
            return Resp::Error("ERR Unknown Redis command called from script".into());
        };
        if !cmd.arity_ok(args.len()) {
            return Resp::Error(
                "ERR Wrong number of args calling Redis command from script".into(),
            );
        }
        let Some(run) = self.run.as_mut() else {
            return Resp::Error(
                "ERR redis.call/pcall can only be called inside a script invocation".into(),
            );
        };
        if run.strict {
            for key in cmd.keys_of(args) {
                let slot = key_slot(key);
                match run.slot {
                    None => run.slot = Some(slot),
                    Some(s) if s != slot => return Resp::Error(SCRIPT_CROSS_SLOT.into()),
                    Some(_) => {}
                }
            }
        }
        let now_us = run.now_us;
        cmd.run(
            &mut Exec {
                db: &mut self.db,
                now_us,
            },
            args,
        )
    }
}

fn engine(lua: &Lua) -> mlua::AppDataRefMut<'_, Engine> {
    lua.app_data_mut::<Engine>()
        .expect("engine is installed and not borrowed across Lua calls")
}

/// `luaPushErrorBuff`: the `err` string Redis builds from `text`. A leading `-` marks a Redis
/// error reply (`-CODE message`): the code is the first word; otherwise the code is `ERR`.
/// CR/LF at either end of the message are trimmed.
pub(crate) fn error_buff(text: &str) -> String {
    let (code, msg) = match text.strip_prefix('-') {
        Some(rest) => match rest.split_once(' ') {
            Some((code, msg)) => (code, msg),
            None => ("ERR", rest),
        },
        None => ("ERR", text),
    };
    format!("{code} {}", msg.trim_matches(['\r', '\n']))
}

/// A Redis error table `{err = text}` (plus the flag Redis sets on errors of commands).
fn error_table(lua: &Lua, text: &str, command_error: bool) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(text)?)?;
    if command_error {
        t.raw_set("ignore_error_stats_update", true)?;
    }
    Ok(t)
}

/// RESP → Lua, as `redisProtocolToLuaType` does for RESP2: integer → number, bulk → string,
/// nil → false, status → `{ok = s}`, error → `{err = s}`, array → table.
pub(crate) fn resp_to_lua(lua: &Lua, r: &Resp) -> mlua::Result<Value> {
    Ok(match r {
        Resp::Nil => Value::Boolean(false),
        Resp::Int(n) => Value::Number(*n as f64),
        Resp::Bulk(b) => Value::String(lua.create_string(b)?),
        Resp::Status(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", lua.create_string(s)?)?;
            Value::Table(t)
        }
        Resp::Error(e) => Value::Table(error_table(lua, &error_buff(&format!("-{e}")), true)?),
        Resp::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, resp_to_lua(lua, item)?)?;
            }
            Value::Table(t)
        }
    })
}

/// Lua → RESP for a script's return value, as `luaReplyToRedisReply` does for a RESP2 client.
pub(crate) fn lua_to_resp(v: &Value) -> Resp {
    lua_to_resp_at(v, 0)
}

fn lua_string_bytes(s: &mlua::String) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn one_line(b: &[u8]) -> Vec<u8> {
    b.iter()
        .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
        .collect()
}

fn lua_to_resp_at(v: &Value, depth: usize) -> Resp {
    if depth > REPLY_DEPTH_MAX {
        return Resp::Error("ERR reached lua stack limit".into());
    }
    match v {
        Value::String(s) => Resp::Bulk(lua_string_bytes(s)),
        Value::Boolean(true) => Resp::Int(1),
        Value::Boolean(false) => Resp::Nil,
        Value::Integer(n) => Resp::Int(*n),
        Value::Number(n) => Resp::Int(c_double_to_i64(*n)),
        Value::Table(t) => table_to_resp(t, depth),
        _ => Resp::Nil,
    }
}

fn table_to_resp(t: &Table, depth: usize) -> Resp {
    let field = |name: &str| t.raw_get::<Value>(name).unwrap_or(Value::Nil);
    if let Value::String(e) = field("err") {
        let text = String::from_utf8_lossy(&e.as_bytes()).into_owned();
        return commands::error_reply(text);
    }
    if let Value::String(s) = field("ok") {
        return Resp::Status(String::from_utf8_lossy(&one_line(&s.as_bytes())).into_owned());
    }
    match field("double") {
        Value::Number(d) => return Resp::Bulk(format_g17(d).into_bytes()),
        Value::Integer(i) => return Resp::Bulk(format_g17(i as f64).into_bytes()),
        _ => {}
    }
    if let Value::String(s) = field("big_number") {
        return Resp::Bulk(one_line(&s.as_bytes()));
    }
    if let Value::Table(vt) = field("verbatim_string") {
        if let (Ok(Value::String(_)), Ok(Value::String(s))) =
            (vt.raw_get::<Value>("format"), vt.raw_get::<Value>("string"))
        {
            return Resp::Bulk(lua_string_bytes(&s));
        }
    }
    if let Value::Table(m) = field("map") {
        let mut out = Vec::new();
        for (k, v) in m.pairs::<Value, Value>().flatten() {
            out.push(lua_to_resp_at(&k, depth + 1));
            out.push(lua_to_resp_at(&v, depth + 1));
        }
        return Resp::Array(out);
    }
    if let Value::Table(s) = field("set") {
        let out = s
            .pairs::<Value, Value>()
            .flatten()
            .map(|(k, _)| lua_to_resp_at(&k, depth + 1))
            .collect();
        return Resp::Array(out);
    }
    let mut out = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => out.push(lua_to_resp_at(&v, depth + 1)),
        }
    }
    Resp::Array(out)
}

/// `luaArgsToRedisArgv`: numbers become `%.17g` strings, strings stay bytes, anything else is an
/// error.
fn lua_args(args: &MultiValue) -> Result<Vec<Vec<u8>>, &'static str> {
    if args.is_empty() {
        return Err("Please specify at least one argument for this redis lib call");
    }
    args.iter()
        .map(|v| match v {
            Value::String(s) => Ok(lua_string_bytes(s)),
            Value::Number(n) => Ok(format_g17(*n).into_bytes()),
            Value::Integer(i) => Ok(format_g17(*i as f64).into_bytes()),
            _ => Err("Lua redis lib command arguments must be strings or integers"),
        })
        .collect()
}

/// `luaL_where(L, level)`: `"<short_src>:<line>: "` of the function at `level`, or "".
fn lua_where(lua: &Lua, level: usize) -> String {
    lua.inspect_stack(level, |d| match d.current_line() {
        Some(line) if line > 0 => {
            let src = d
                .source()
                .short_src
                .map(|s| s.into_owned())
                .unwrap_or_default();
            format!("{src}:{line}: ")
        }
        _ => String::new(),
    })
    .unwrap_or_default()
}

/// Lua's `tostring` for the values an error message can name.
fn lua_tostring(lua: &Lua, v: &Value) -> String {
    let f: Function = lua.globals().get("tostring").expect("tostring");
    f.call::<mlua::String>(v.clone())
        .map(|s| String::from_utf8_lossy(&s.as_bytes()).into_owned())
        .unwrap_or_default()
}

/// The Lua state, with the sandbox and the `redis` API installed.
pub(crate) struct Interpreter {
    pub lua: Lua,
    /// The real globals (behind the read-only proxy scripts see), where KEYS and ARGV go.
    globals: Table,
    /// `function(f) return xpcall(f, handler) end`, the protected call every script runs in.
    runner: Function,
    /// Compiled scripts by SHA1 (Redis's script cache).
    scripts: BTreeMap<String, Function>,
}

impl Interpreter {
    /// A fresh Lua state like the one Redis 7.0 creates at startup.
    pub fn new() -> Self {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::new().catch_rust_panics(false),
        )
        .expect("create the Lua state");
        lua.set_app_data(Engine {
            db: Db::default(),
            run: None,
            rand48: RAND48_INITIAL,
        });
        let (globals, runner) = install_sandbox(&lua).expect("install the Redis sandbox");
        // A global hook, so that coroutines a script creates are counted too.
        lua.set_global_hook(
            HookTriggers::new().every_nth_instruction(HOOK_INTERVAL),
            |lua, _debug| {
                let mut eng = engine(lua);
                let Some(run) = eng.run.as_mut() else {
                    return Ok(VmState::Continue);
                };
                run.instructions += u64::from(HOOK_INTERVAL);
                if run.killed || run.instructions > SCRIPT_INSTRUCTIONS_MAX {
                    run.killed = true;
                    return raise(Raised::Budget);
                }
                Ok(VmState::Continue)
            },
        )
        .expect("install the budget hook");
        Interpreter {
            lua,
            globals,
            runner,
            scripts: BTreeMap::new(),
        }
    }

    /// The engine (keyspace and run state). Do not hold it across a call into Lua.
    pub fn engine(&self) -> mlua::AppDataRefMut<'_, Engine> {
        engine(&self.lua)
    }

    /// Empty the script cache (SCRIPT FLUSH, or a restart).
    pub fn flush_scripts(&mut self) {
        self.scripts.clear();
    }

    /// True when the script `sha` is compiled and cached.
    pub fn has_script(&self, sha: &str) -> bool {
        self.scripts.contains_key(sha)
    }

    /// Compile `source` and cache it under `sha`. Errors: Redis's compile error reply.
    pub fn compile(&mut self, sha: &str, source: &str) -> Result<(), Resp> {
        match self
            .lua
            .load(source)
            .set_name(CHUNK_NAME)
            .set_mode(mlua::ChunkMode::Text)
            .into_function()
        {
            Ok(f) => {
                self.scripts.insert(sha.to_string(), f);
                Ok(())
            }
            Err(e) => {
                let msg = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                Err(commands::error_reply(format!(
                    "ERR Error compiling script (new function): {msg}"
                )))
            }
        }
    }

    /// Run the cached script `run.sha` with KEYS and ARGV and return its reply; `run` is its
    /// context (time, strictness).
    pub fn run(&mut self, run: Run, keys: &[String], args: &[Vec<u8>]) -> Resp {
        let func = self.scripts.get(&run.sha).expect("script compiled").clone();
        let sha = run.sha.clone();
        engine(&self.lua).run = Some(run);
        let result = self.invoke(func, keys, args);
        let run = engine(&self.lua).run.take().expect("run context");
        let reply = match result {
            Ok(values) => {
                let mut it = values.into_iter();
                match it.next() {
                    Some(Value::Boolean(true)) => lua_to_resp(&it.next().unwrap_or(Value::Nil)),
                    _ => Resp::Error(run.error.unwrap_or_else(|| {
                        format!("ERR Error running script {sha}: the error handler did not run")
                    })),
                }
            }
            Err(e) => commands::error_reply(format!("ERR Error running script {sha}: {e}")),
        };
        reply
    }

    fn invoke(
        &self,
        func: Function,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> mlua::Result<MultiValue> {
        let lua = &self.lua;
        let k = lua.create_table_with_capacity(keys.len(), 0)?;
        for (i, key) in keys.iter().enumerate() {
            k.raw_set(i + 1, lua.create_string(key)?)?;
        }
        let a = lua.create_table_with_capacity(args.len(), 0)?;
        for (i, arg) in args.iter().enumerate() {
            a.raw_set(i + 1, lua.create_string(arg)?)?;
        }
        self.globals.raw_set("KEYS", k)?;
        self.globals.raw_set("ARGV", a)?;
        self.runner.call::<MultiValue>(func)
    }
}

/// The state of `redisLrand48` before any seeding (rand.c's X0, X1, X2).
const RAND48_INITIAL: u64 = 0x1234_ABCD_330E;

/// One step of Redis's `redisLrand48` (the classic 48-bit `lrand48` generator).
fn lrand48(state: &mut u64) -> i32 {
    *state = (state.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB)) & 0xFFFF_FFFF_FFFF;
    (*state >> 17) as i32
}

/// Build the sandbox; returns (real globals table, runner function).
fn install_sandbox(lua: &Lua) -> mlua::Result<(Table, Function)> {
    let globals = lua.globals();
    for name in [
        "print", "getfenv", "setfenv", "newproxy", "dofile", "loadfile",
    ] {
        globals.raw_set(name, Value::Nil)?;
    }

    // ---- redis.* --------------------------------------------------------------------------
    let redis = lua.create_table()?;
    redis.raw_set(
        "call",
        lua.create_function(|lua, args: MultiValue| redis_call(lua, args, true))?,
    )?;
    redis.raw_set(
        "pcall",
        lua.create_function(|lua, args: MultiValue| redis_call(lua, args, false))?,
    )?;
    redis.raw_set(
        "error_reply",
        lua.create_function(|lua, args: MultiValue| {
            let t = match single_string(&args) {
                Some(s) => {
                    let s = String::from_utf8_lossy(&s).into_owned();
                    let buff = if s.starts_with('-') {
                        s
                    } else {
                        format!("-{s}")
                    };
                    error_table(lua, &error_buff(&buff), false)?
                }
                None => error_table(lua, "ERR wrong number or type of arguments", false)?,
            };
            Ok(t)
        })?,
    )?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, args: MultiValue| {
            let t = lua.create_table()?;
            match single_string(&args) {
                Some(s) => t.raw_set("ok", lua.create_string(&s)?)?,
                None => t.raw_set("err", "ERR wrong number or type of arguments")?,
            }
            Ok(t)
        })?,
    )?;
    redis.raw_set(
        "sha1hex",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return raise::<String>(Raised::Reply("ERR wrong number of arguments".into()));
            }
            let bytes = lua
                .coerce_string(args[0].clone())?
                .map(|s| s.as_bytes().to_vec())
                .unwrap_or_default();
            Ok(sha1_smol::Sha1::from(bytes).digest().to_string())
        })?,
    )?;
    redis.raw_set(
        "log",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() < 2 {
                return raise::<()>(Raised::Reply(
                    "ERR redis.log() requires two arguments or more.".into(),
                ));
            }
            let Some(level) = lua.coerce_number(args[0].clone())? else {
                return raise(Raised::Reply(
                    "ERR First argument must be a number (log level).".into(),
                ));
            };
            if !(0.0..4.0).contains(&level.trunc()) {
                return raise(Raised::Reply("ERR Invalid debug level.".into()));
            }
            Ok(())
        })?,
    )?;
    redis.raw_set(
        "setresp",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return raise::<()>(Raised::Reply(
                    "ERR redis.setresp() requires one argument.".into(),
                ));
            }
            let v = lua.coerce_number(args[0].clone())?.unwrap_or(0.0).trunc();
            if v == 2.0 {
                Ok(())
            } else if v == 3.0 {
                raise(Raised::Reply(
                    "ERR orq-sim models RESP2 only: redis.setresp(3) is not supported".into(),
                ))
            } else {
                raise(Raised::Reply("ERR RESP version must be 2 or 3.".into()))
            }
        })?,
    )?;
    redis.raw_set(
        "set_repl",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return raise::<()>(Raised::Reply(
                    "ERR redis.set_repl() requires two arguments.".into(),
                ));
            }
            let flags = lua.coerce_number(args[0].clone())?.unwrap_or(0.0).trunc() as i64;
            if flags & !3 != 0 {
                return raise(Raised::Reply(
                    "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."
                        .into(),
                ));
            }
            Ok(())
        })?,
    )?;
    redis.raw_set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    redis.raw_set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    redis.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    redis.raw_set(
        "acl_check_cmd",
        lua.create_function(|_, args: MultiValue| {
            let args = match lua_args(&args) {
                Ok(a) => a,
                Err(msg) => return raise(Raised::Reply(format!("ERR {msg}"))),
            };
            if commands::lookup(&args[0]).is_none() {
                return raise(Raised::Reply(
                    "ERR Invalid command passed to redis.acl_check_cmd()".into(),
                ));
            }
            Ok(true)
        })?,
    )?;
    for (name, v) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
        ("REDIS_VERSION_NUM", 0x07_00_0f),
    ] {
        redis.raw_set(name, f64::from(v))?;
    }
    redis.raw_set("REDIS_VERSION", REDIS_VERSION)?;
    globals.raw_set("redis", redis)?;

    // ---- math.random: Redis's own generator ----------------------------------------------------
    let math: Table = globals.raw_get("math")?;
    math.raw_set(
        "random",
        lua.create_function(|lua, args: MultiValue| {
            let r = {
                let mut eng = engine(lua);
                let x = lrand48(&mut eng.rand48);
                f64::from(x % i32::MAX) / f64::from(i32::MAX)
            };
            let int_arg = |i: usize| -> mlua::Result<i32> {
                match lua.coerce_number(args[i].clone())? {
                    Some(n) => Ok(n as i32),
                    None => raise(Raised::Text(format!(
                        "{}bad argument #{} to 'random' (number expected, got {})",
                        lua_where(lua, 1),
                        i + 1,
                        args[i].type_name()
                    ))),
                }
            };
            let empty = |n: usize| -> mlua::Result<f64> {
                raise(Raised::Text(format!(
                    "{}bad argument #{n} to 'random' (interval is empty)",
                    lua_where(lua, 1)
                )))
            };
            match args.len() {
                0 => Ok(r),
                1 => {
                    let u = int_arg(0)?;
                    if u < 1 {
                        return empty(1);
                    }
                    Ok((r * f64::from(u)).floor() + 1.0)
                }
                2 => {
                    let (l, u) = (int_arg(0)?, int_arg(1)?);
                    if l > u {
                        return empty(2);
                    }
                    Ok((r * (f64::from(u) - f64::from(l) + 1.0)).floor() + f64::from(l))
                }
                _ => raise(Raised::Text(format!(
                    "{}wrong number of arguments",
                    lua_where(lua, 1)
                ))),
            }
        })?,
    )?;
    math.raw_set(
        "randomseed",
        lua.create_function(|lua, args: MultiValue| {
            let seed = match args.front().map(|v| lua.coerce_number(v.clone())) {
                Some(Ok(Some(n))) => n as i32,
                _ => {
                    return raise(Raised::Text(format!(
                        "{}bad argument #1 to 'randomseed' (number expected, got {})",
                        lua_where(lua, 1),
                        args.front().map_or("no value", |v| v.type_name())
                    )))
                }
            };
            engine(lua).rand48 = (u64::from(seed as u32) << 16) | 0x330E;
            Ok(())
        })?,
    )?;

    // ---- read-only tables ------------------------------------------------------------------
    // Redis marks the globals table and every table reachable from it read-only. Plain Lua has
    // no such flag, so scripts see empty proxies whose __index is the real table and whose
    // __newindex refuses; rawget/rawset/setmetatable/next/pairs see through the proxies.
    let ro_newindex = lua.create_function(|lua, _: MultiValue| -> mlua::Result<()> {
        raise(Raised::Text(format!(
            "{}Attempt to modify a readonly table",
            lua_where(lua, 1)
        )))
    })?;
    let sealed_mt = lua.create_table()?;
    sealed_mt.raw_set("__newindex", ro_newindex.clone())?;
    sealed_mt.raw_set("__metatable", false)?;
    let sealed = lua.create_table()?;
    sealed.set_metatable(Some(sealed_mt))?;

    let make_proxy = |real: &Table| -> mlua::Result<Table> {
        let mt = lua.create_table()?;
        mt.raw_set("__index", real.clone())?;
        mt.raw_set("__newindex", ro_newindex.clone())?;
        mt.raw_set("__metatable", sealed.clone())?;
        let proxy = lua.create_table()?;
        proxy.set_metatable(Some(mt))?;
        Ok(proxy)
    };
    let mut proxies: Vec<(Table, Table)> = Vec::new();
    for name in ["string", "table", "math", "coroutine", "redis"] {
        let real: Table = globals.raw_get(name)?;
        let proxy = make_proxy(&real)?;
        globals.raw_set(name, proxy.clone())?;
        proxies.push((proxy, real));
    }
    let string_proxy = proxies[0].0.clone();
    let g_proxy = make_proxy(&globals)?;
    proxies.push((g_proxy.clone(), globals.clone()));
    proxies.push((sealed.clone(), lua.create_table()?));
    globals.raw_set("_G", g_proxy.clone())?;
    let missing_mt = lua.create_table()?;
    missing_mt.raw_set(
        "__index",
        lua.create_function(|lua, (_t, k): (Value, Value)| -> mlua::Result<()> {
            let name = match &k {
                Value::String(_) | Value::Number(_) | Value::Integer(_) => lua_tostring(lua, &k),
                _ => {
                    return raise(Raised::Text(format!(
                        "{}Second argument to luaProtectedTableError must be a string or number",
                        lua_where(lua, 1)
                    )))
                }
            };
            raise(Raised::Text(format!(
                "{}Script attempted to access nonexistent global variable '{name}'",
                lua_where(lua, 1)
            )))
        })?,
    )?;
    missing_mt.raw_set("__metatable", sealed.clone())?;
    globals.set_metatable(Some(missing_mt))?;

    let real_of = {
        let proxies = proxies.clone();
        move |t: &Table| -> Option<Table> {
            proxies
                .iter()
                .find(|(p, _)| p.to_pointer() == t.to_pointer())
                .map(|(_, r)| r.clone())
        }
    };
    let is_proxy = {
        let real_of = real_of.clone();
        move |t: &Table| real_of(t).is_some()
    };
    let rawget = {
        let real_of = real_of.clone();
        lua.create_function(move |lua, args: MultiValue| -> mlua::Result<Value> {
            let t = table_arg(lua, &args, 0, "rawget")?;
            let k = args.get(1).cloned().unwrap_or(Value::Nil);
            real_of(&t).unwrap_or(t).raw_get(k)
        })?
    };
    let rawset = {
        let is_proxy = is_proxy.clone();
        lua.create_function(move |lua, args: MultiValue| -> mlua::Result<Table> {
            let t = table_arg(lua, &args, 0, "rawset")?;
            if is_proxy(&t) {
                return raise(Raised::Text("Attempt to modify a readonly table".into()));
            }
            let k = args.get(1).cloned().unwrap_or(Value::Nil);
            let v = args.get(2).cloned().unwrap_or(Value::Nil);
            match &k {
                Value::Nil => return raise(Raised::Text("table index is nil".into())),
                Value::Number(n) if n.is_nan() => {
                    return raise(Raised::Text("table index is NaN".into()))
                }
                _ => {}
            }
            t.raw_set(k, v)?;
            Ok(t)
        })?
    };
    let setmetatable = {
        let is_proxy = is_proxy.clone();
        lua.create_function(move |lua, args: MultiValue| -> mlua::Result<Table> {
            let t = table_arg(lua, &args, 0, "setmetatable")?;
            if is_proxy(&t) {
                return raise(Raised::Text("Attempt to modify a readonly table".into()));
            }
            let mt = match args.get(1) {
                Some(Value::Nil) => None,
                Some(Value::Table(mt)) => Some(mt.clone()),
                _ => {
                    return raise(Raised::Text(format!(
                        "{}bad argument #2 to 'setmetatable' (nil or table expected)",
                        lua_where(lua, 1)
                    )))
                }
            };
            if let Some(current) = t.metatable() {
                if !matches!(current.raw_get::<Value>("__metatable")?, Value::Nil) {
                    return raise(Raised::Text(format!(
                        "{}cannot change a protected metatable",
                        lua_where(lua, 1)
                    )));
                }
            }
            t.set_metatable(mt)?;
            Ok(t)
        })?
    };
    // The real table behind a proxy, for next/pairs (identity for every other value).
    let unproxy = {
        let real_of = real_of.clone();
        lua.create_function(move |_, v: Value| {
            Ok(match &v {
                Value::Table(t) => real_of(t).map(Value::Table).unwrap_or(v),
                _ => v,
            })
        })?
    };
    getmetatable_of_string(lua)?.raw_set("__index", string_proxy)?;

    // ---- pcall / xpcall and the protected runner ------------------------------------------
    let pcall_result = lua.create_function(|lua, mut values: MultiValue| {
        check_budget(lua)?;
        if let (Some(Value::Boolean(false)), Some(err)) = (values.front(), values.get(1)) {
            let replaced = match err {
                // Redis 7's pcall returns the `err` string of an error table.
                Value::Table(t) => match t.raw_get::<Value>("err")? {
                    v @ (Value::String(_) | Value::Number(_) | Value::Integer(_)) => Some(v),
                    _ => None,
                },
                Value::Error(e) => match find_raised(e) {
                    Some(Raised::Reply(s) | Raised::Text(s)) => {
                        Some(Value::String(lua.create_string(s)?))
                    }
                    _ => None,
                },
                _ => None,
            };
            if let Some(v) = replaced {
                values[1] = v;
            }
        }
        Ok(values)
    })?;
    let xpcall_result = lua.create_function(|lua, values: MultiValue| {
        check_budget(lua)?;
        Ok(values)
    })?;
    // What a user's xpcall handler sees: Redis's error table for command errors, the string for
    // other errors raised by the model's functions.
    let handler_value = lua.create_function(|lua, v: Value| -> mlua::Result<Value> {
        Ok(match &v {
            Value::Error(e) => match find_raised(e) {
                Some(Raised::Reply(s)) => Value::Table(error_table(lua, s, true)?),
                Some(Raised::Text(s)) => Value::String(lua.create_string(s)?),
                _ => v,
            },
            _ => v,
        })
    })?;
    let top_handler = lua.create_function(top_level_handler)?;

    let glue: Function = lua
        .load(SANDBOX_LUA)
        .set_name("=orq-sim sandbox")
        .into_function()?;
    let (pcall, xpcall, next, pairs, runner): (Function, Function, Function, Function, Function) =
        glue.call((
            globals.raw_get::<Function>("pcall")?,
            globals.raw_get::<Function>("xpcall")?,
            globals.raw_get::<Function>("next")?,
            pcall_result,
            xpcall_result,
            handler_value,
            unproxy,
            top_handler,
        ))?;
    globals.raw_set("pcall", pcall)?;
    globals.raw_set("xpcall", xpcall)?;
    globals.raw_set("next", next)?;
    globals.raw_set("pairs", pairs)?;
    globals.raw_set("rawget", rawget)?;
    globals.raw_set("rawset", rawset)?;
    globals.raw_set("setmetatable", setmetatable)?;
    globals.raw_set(
        "__redis__err__handler",
        lua.load(REDIS_ERR_HANDLER_LUA)
            .set_name("@err_handler_def")
            .into_function()?
            .call::<Function>(())?,
    )?;
    lua.set_globals(g_proxy)?;
    Ok((globals, runner))
}

/// The string metatable (shared by every string), whose `__index` is the `string` library.
fn getmetatable_of_string(lua: &Lua) -> mlua::Result<Table> {
    lua.load("return getmetatable('')")
        .set_name("=orq-sim sandbox")
        .call::<Table>(())
}

/// Argument `i` of a base-library function that needs a table, or Lua's argument error.
fn table_arg(lua: &Lua, args: &MultiValue, i: usize, fname: &str) -> mlua::Result<Table> {
    match args.get(i) {
        Some(Value::Table(t)) => Ok(t.clone()),
        other => raise(Raised::Text(format!(
            "{}bad argument #{} to '{fname}' (table expected, got {})",
            lua_where(lua, 1),
            i + 1,
            other.map_or("no value", |v| v.type_name())
        ))),
    }
}

/// After the budget ran out, nothing may swallow the error: pcall and xpcall raise it again.
fn check_budget(lua: &Lua) -> mlua::Result<()> {
    let killed = engine(lua).run.as_ref().is_some_and(|r| r.killed);
    if killed {
        return raise(Raised::Budget);
    }
    Ok(())
}

fn single_string(args: &MultiValue) -> Option<Vec<u8>> {
    match (args.len(), args.front()) {
        (1, Some(Value::String(s))) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

/// `redis.call` (raise = true) and `redis.pcall` (raise = false).
fn redis_call(lua: &Lua, args: MultiValue, raise_errors: bool) -> mlua::Result<Value> {
    let args = match lua_args(&args) {
        Ok(a) => a,
        Err(msg) => {
            let text = error_buff(msg);
            if raise_errors {
                return raise(Raised::Reply(text));
            }
            return Ok(Value::Table(error_table(lua, &text, false)?));
        }
    };
    let reply = engine(lua).call(&args);
    if let Resp::Error(e) = &reply {
        let text = error_buff(&format!("-{e}"));
        if raise_errors {
            return raise(Raised::Reply(text));
        }
        return Ok(Value::Table(error_table(lua, &text, true)?));
    }
    resp_to_lua(lua, &reply)
}

/// The message handler of every script run: Redis's `__redis__err__handler` plus the final error
/// text of `luaCallFunction` (`<err> script: <sha>, on <source>:<line>.`), stored in the run.
fn top_level_handler(lua: &Lua, err: Value) -> mlua::Result<()> {
    // Level 0 is this handler and level 1 the xpcall trampoline, so level 2 is the function that
    // raised, as in Redis's handler; when that is a C function, the caller at level 3 is used.
    let frame = |level: usize| {
        lua.inspect_stack(level, |d| {
            let src = d.source();
            (
                src.what,
                src.source.map(|s| s.into_owned()),
                d.current_line().map_or(-1, |l| l as i64),
            )
        })
    };
    let mut info = frame(2);
    if matches!(&info, Some((what, _, _)) if *what == "C") {
        info = frame(3);
    }
    let mut killed = false;
    let msg: String = match &err {
        Value::Table(t) => match t.raw_get::<Value>("err")? {
            v @ (Value::String(_) | Value::Number(_) | Value::Integer(_)) => lua_tostring(lua, &v),
            // Redis 7.0 crashes on an error table without an `err` string.
            _ => "ERR orq-sim: the script raised a table without an 'err' field".to_string(),
        },
        Value::Error(e) => match find_raised(e) {
            Some(Raised::Reply(s)) => s.clone(),
            Some(Raised::Text(s)) => format!("ERR {s}"),
            Some(Raised::Budget) => {
                killed = true;
                Raised::Budget.to_string()
            }
            None => format!("ERR {e}"),
        },
        other => format!("ERR {}", lua_tostring(lua, other)),
    };
    let mut text = msg;
    if let Some((_, Some(source), line)) = info {
        let sha = engine(lua)
            .run
            .as_ref()
            .map(|r| r.sha.clone())
            .unwrap_or_default();
        text.push_str(&format!(" script: {sha}, on {source}:{line}."));
    }
    let Resp::Error(text) = commands::error_reply(text) else {
        unreachable!("error_reply builds an error")
    };
    let mut eng = engine(lua);
    if let Some(run) = eng.run.as_mut() {
        run.killed |= killed;
        run.error = Some(text);
    }
    Ok(())
}

/// Lua glue for the sandbox. Only wrappers that never raise are written in Lua, so that error
/// positions (which Redis takes from the stack) are the same as with Redis's C functions.
const SANDBOX_LUA: &str = r#"
local raw_pcall, raw_xpcall, raw_next, pcall_result, xpcall_result, handler_value, unproxy,
  top_handler = ...
local function pcall(...)
  return pcall_result(raw_pcall(...))
end
local function xpcall(f, h)
  return xpcall_result(raw_xpcall(f, function(e) return h(handler_value(e)) end))
end
local function next(t, k)
  return raw_next(unproxy(t), k)
end
local function pairs(t)
  return raw_next, unproxy(t), nil
end
local function runner(f)
  return raw_xpcall(f, top_handler)
end
return pcall, xpcall, next, pairs, runner
"#;

/// Redis 7.0 leaves its error handler reachable as a global; this is its code, without the
/// `debug` library (so it reports no source and line).
const REDIS_ERR_HANDLER_LUA: &str = r#"
return function(err)
  if type(err) ~= 'table' then
    err = {err='ERR ' .. tostring(err)}
  end
  return err
end
"#;

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: redisLrand48 is the classic lrand48 (first outputs of the unseeded generator).
    #[test]
    fn lrand48_matches_the_classic_generator() {
        let mut s = RAND48_INITIAL;
        // glibc lrand48() without srand48 starts from the same state.
        let first: Vec<i32> = (0..3).map(|_| lrand48(&mut s)).collect();
        assert_eq!(first, vec![851401618, 1804928587, 758783491]);
    }

    // Goal: error texts built like luaPushErrorBuff.
    #[test]
    fn error_buff_splits_code_and_trims_newlines() {
        assert_eq!(error_buff("-MY err"), "MY err");
        assert_eq!(error_buff("-x"), "ERR x");
        assert_eq!(error_buff("-"), "ERR ");
        assert_eq!(error_buff("-\nab\n"), "ERR ab");
        assert_eq!(error_buff("Please specify"), "ERR Please specify");
        assert_eq!(error_buff("-WRONGTYPE Operation"), "WRONGTYPE Operation");
    }
}
