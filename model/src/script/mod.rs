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
//!
//! This file holds the interpreter (the script cache, running a script, the run state); the
//! conversions between Lua values and RESP are in [`convert`], `redis.call` and `redis.pcall`
//! (the simulator's hottest path, written against the Lua C API) in [`raw_call`], and the
//! globals a script sees (the rest of the `redis` API, the read-only tables, `pcall`,
//! `math.random`, the top-level error handler) in [`sandbox`].

mod compiled;
mod convert;
mod functions;
mod raw_call;
mod sandbox;

use convert::lua_to_resp;
pub(crate) use functions::fcall_split;
use sandbox::{install_sandbox, RAND48_INITIAL};

use crate::commands::{self, Exec};
use crate::db::Db;
use crate::slot::key_slot;
use mlua::{
    Either, Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState,
};
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

/// Lua's collector pause, in percent (Lua's default: 200); see [`Interpreter::new`].
const GC_PAUSE: std::ffi::c_int = 400;

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

/// The error a command that writes gets inside a function flagged `no-writes`.
const READ_ONLY_WRITE: &str = "ERR Write commands are not allowed from read-only scripts.";

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
    /// SHA1 of the script body (or the function's name), for error texts.
    pub sha: String,
    /// A function flagged `no-writes`: commands that write are refused.
    pub read_only: bool,
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
    /// While FUNCTION LOAD runs a library's code: the functions it registered so far.
    pub loading: Option<Vec<functions::Registered>>,
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
        if run.read_only && cmd.access == commands::Access::Write {
            return Resp::Error(READ_ONLY_WRITE.into());
        }
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

/// The Lua state, with the sandbox and the `redis` API installed.
pub(crate) struct Interpreter {
    pub lua: Lua,
    /// The real globals (behind the read-only proxy scripts see), where KEYS and ARGV go.
    globals: Table,
    /// `function(f) return xpcall(f, handler) end`, the protected call every script runs in.
    runner: Function,
    /// Compiled scripts by SHA1 (Redis's script cache).
    scripts: BTreeMap<String, Function>,
    /// What FUNCTION LOAD runs a library's code with ([`functions`]).
    library_api: functions::LibraryApi,
    /// The loaded function libraries.
    functions: functions::Functions,
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
            loading: None,
        });
        let sandbox = install_sandbox(&lua).expect("install the Redis sandbox");
        let library_api =
            functions::LibraryApi::install(&lua, &sandbox).expect("install the library API");
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
        // A cycle starts when the heap has grown to GC_PAUSE % of what the last one kept. The
        // heap a script run leaves is mostly garbage (argument tables, replies, strings) and
        // what stays is small (the library's code), so a longer pause than Lua's 200 % halves
        // the collector's marking for a little more memory.
        lua.gc_set_pause(GC_PAUSE);
        Interpreter {
            lua,
            globals: sandbox.globals,
            runner: sandbox.runner,
            scripts: BTreeMap::new(),
            library_api,
            functions: functions::Functions::default(),
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
        self.finish(&sha, result)
    }

    /// The reply of a script or function run that returned `result`, from the runner's
    /// `(ok, value)` or the error text its handler stored in the run; ends the run.
    fn finish(&self, name: &str, result: mlua::Result<MultiValue>) -> Resp {
        let run = engine(&self.lua).run.take().expect("run context");
        match result {
            Ok(values) => {
                let mut it = values.into_iter();
                match it.next() {
                    Some(Value::Boolean(true)) => lua_to_resp(&it.next().unwrap_or(Value::Nil)),
                    _ => Resp::Error(run.error.unwrap_or_else(|| {
                        format!("ERR Error running script {name}: the error handler did not run")
                    })),
                }
            }
            Err(e) => commands::error_reply(format!("ERR Error running script {name}: {e}")),
        }
    }

    /// A call's keys and arguments as the Lua arrays a script sees as KEYS and ARGV (and a
    /// function as its two parameters).
    fn keys_and_args(&self, keys: &[String], args: &[Vec<u8>]) -> mlua::Result<(Table, Table)> {
        // create_sequence_from pushes each string straight into the new table (no handle per
        // string, which is most of the cost when done one raw_set at a time).
        let k = self
            .lua
            .create_sequence_from(keys.iter().map(|key| key.as_str()))?;
        // Arguments that are not UTF-8 (payloads may be any bytes) go through a string handle.
        let args = args
            .iter()
            .map(|arg| match std::str::from_utf8(arg) {
                Ok(text) => Ok(Either::Left(text)),
                Err(_) => self.lua.create_string(arg).map(Either::Right),
            })
            .collect::<mlua::Result<Vec<_>>>()?;
        let a = self.lua.create_sequence_from(args)?;
        Ok((k, a))
    }

    fn invoke(
        &self,
        func: Function,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> mlua::Result<MultiValue> {
        let (k, a) = self.keys_and_args(keys, args)?;
        self.globals.raw_set("KEYS", k)?;
        self.globals.raw_set("ARGV", a)?;
        self.runner.call::<MultiValue>(func)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
