//! Redis Functions (Redis 7.0): libraries loaded with `FUNCTION LOAD`, called with `FCALL` and
//! `FCALL_RO`.
//!
//! Sources: the Redis documentation ("Redis functions", the `FUNCTION LOAD` and `FCALL` command
//! pages) and Redis 7.0's `functions.c` / `function_lua.c`; `sim/tests/functions.rs` compares
//! the replies and error texts with a real server. What is reproduced:
//!
//! - the library's first line, `#!lua name=<library>`, and its errors (missing metadata, another
//!   engine, no name, an unknown metadata field, a bad name, a library that already exists
//!   without `REPLACE`, a function name another library holds);
//! - the library's code runs once, at load, seeing only `redis.register_function`, `redis.log`,
//!   the `redis.LOG_*` levels and `redis.REDIS_VERSION(_NUM)` (no `string`, `math`, `table`, no
//!   base functions, no `redis.call`: reading any other global is "nonexistent global
//!   variable"); its functions, called later, see the globals a script sees, without `KEYS` and
//!   `ARGV` (they get keys and arguments as their two parameters);
//! - `register_function(name, callback)` and the named-argument form
//!   `{function_name=, callback=, flags=, description=}`, with the flags Redis 7.0 knows;
//!   `no-writes` makes a function read-only (commands that write or publish are refused) and the
//!   only kind `FCALL_RO` runs;
//! - errors inside a function end as a script's do, with `script: <function>, on
//!   @user_function:<line>.`.
//!
//! The model runs functions in the same Lua state as EVAL scripts (Redis keeps a second one);
//! both see read-only globals, so neither can leave anything for the other. The load timeout
//! (500 ms in Redis) is the instruction budget.

use super::compiled;
use super::sandbox::Sandbox;
use super::{commands, engine, find_raised, Interpreter, Raised, Run, REDIS_VERSION};
use mlua::{Function, Lua, MultiValue, Table, Value};
use orq::Resp;
use std::collections::BTreeMap;

/// The chunk name of every library: Redis loads library code as `@user_function`.
const CHUNK_NAME: &str = "@user_function";

/// The flags `register_function` accepts (Redis 7.0's `scripts_flags_def`).
const FLAGS: &[&str] = &[
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// Redis reuses the library-name text for a bad function name.
const BAD_NAME: &str = "ERR Library names can only contain letters, numbers, or underscores(_) \
                        and must be at least one character long";

/// A function registered by a library's code.
pub(crate) struct Registered {
    name: String,
    callback: Function,
    no_writes: bool,
}

/// One loaded library: its code and the names of its functions.
struct Library {
    functions: Vec<String>,
}

/// A registered function with the library that holds it (kept under its lowercase name: Redis
/// looks functions up case-insensitively).
struct Entry {
    /// The name as registered (error texts name it so).
    name: String,
    library: String,
    callback: Function,
    no_writes: bool,
}

/// The loaded libraries and their functions (what `FUNCTION FLUSH` empties).
#[derive(Default)]
pub(crate) struct Functions {
    libraries: BTreeMap<String, Library>,
    functions: BTreeMap<String, Entry>,
}

/// What a library's code sees while FUNCTION LOAD runs it.
pub(crate) struct LibraryApi {
    /// The globals proxy's metatable (its `__index` is swapped while a library loads).
    proxy_mt: Table,
    /// The real globals (put back as `__index` after the load).
    globals: Table,
    /// The load-time globals: `redis` with the library API only.
    api: Table,
    /// `function() return f(keys, args) end` for a callback: binds a call's parameters.
    bind: Function,
}

impl LibraryApi {
    /// Build the load-time globals on `lua`'s sandbox.
    pub(super) fn install(lua: &Lua, sandbox: &Sandbox) -> mlua::Result<Self> {
        let redis = lua.create_table()?;
        redis.raw_set("register_function", lua.create_function(register_function)?)?;
        let real_redis: Table = sandbox.globals.raw_get("redis")?;
        let real_redis = real_of_proxy(&real_redis)?;
        for name in [
            "log",
            "LOG_DEBUG",
            "LOG_VERBOSE",
            "LOG_NOTICE",
            "LOG_WARNING",
            "REDIS_VERSION_NUM",
        ] {
            redis.raw_set(name, real_redis.raw_get::<Value>(name)?)?;
        }
        redis.raw_set("REDIS_VERSION", REDIS_VERSION)?;
        redis.set_metatable(Some(sandbox.missing_mt.clone()))?;
        let api = lua.create_table()?;
        api.raw_set("redis", sandbox.make_proxy.call::<Table>(redis)?)?;
        api.set_metatable(Some(sandbox.missing_mt.clone()))?;
        let bind = lua
            .load("return function(f, k, a) return function() return f(k, a) end end")
            .set_name("=orq-sim functions")
            .call::<Function>(())?;
        Ok(LibraryApi {
            proxy_mt: sandbox.proxy_mt.clone(),
            globals: sandbox.globals.clone(),
            api,
            bind,
        })
    }
}

/// The real table behind a read-only proxy (its metatable's `__index`).
fn real_of_proxy(proxy: &Table) -> mlua::Result<Table> {
    let mt = proxy.metatable().expect("a proxy has a metatable");
    mt.raw_get("__index")
}

/// A Lua string or number as Redis's `lua_tostring` reads a name; None for other types.
fn name_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Number(n) if n.fract() == 0.0 && n.abs() < 1e15 => Some(format!("{}", *n as i64)),
        Value::Number(n) => Some(format!("{n}")),
        _ => None,
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn refuse<T>(text: &str) -> mlua::Result<T> {
    Err(mlua::Error::external(Raised::Reply(format!("ERR {text}"))))
}

/// `redis.register_function`, during a library's load only.
fn register_function(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    let (name, callback, flags) = match args.len() {
        1 => {
            let Value::Table(t) = &args[0] else {
                return refuse(
                    "calling redis.register_function with a single argument is only applicable \
                     to Lua table (representing named arguments).",
                );
            };
            let (mut name, mut callback, mut flags) = (None, None, None);
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair?;
                match name_of(&k).as_deref() {
                    Some("function_name") => match name_of(&v) {
                        Some(n) => name = Some(n),
                        None => return refuse("function_name argument given to redis.register_function must be a string"),
                    },
                    Some("callback") => match v {
                        Value::Function(f) => callback = Some(f),
                        _ => return refuse("callback argument given to redis.register_function must be a function"),
                    },
                    Some("flags") => match v {
                        Value::Table(f) => flags = Some(f),
                        _ => return refuse("flags argument to redis.register_function must be a table representing function flags"),
                    },
                    Some("description") => match v {
                        Value::String(_) => {}
                        _ => return refuse("description argument given to redis.register_function must be a string"),
                    },
                    _ => return refuse("unknown argument given to redis.register_function"),
                }
            }
            let Some(name) = name else {
                return refuse("redis.register_function must get a function name argument");
            };
            let Some(callback) = callback else {
                return refuse("redis.register_function must get a callback argument");
            };
            (name, callback, flags)
        }
        2 => {
            let Some(name) = name_of(&args[0]) else {
                return refuse("first argument to redis.register_function must be a string");
            };
            let Value::Function(callback) = &args[1] else {
                return refuse("second argument to redis.register_function must be a function");
            };
            (name, callback.clone(), None)
        }
        _ => return refuse("wrong number of arguments to redis.register_function"),
    };
    let mut no_writes = false;
    if let Some(flags) = flags {
        for f in flags.sequence_values::<Value>() {
            match name_of(&f?).as_deref() {
                Some("no-writes") => no_writes = true,
                Some(f) if FLAGS.contains(&f) => {}
                _ => return refuse("unknown flag given"),
            }
        }
    }
    if !valid_name(&name) {
        return refuse(BAD_NAME.trim_start_matches("ERR "));
    }
    let mut eng = engine(lua);
    let Some(loading) = eng.loading.as_mut() else {
        return refuse("redis.register_function can only be called on FUNCTION LOAD command");
    };
    if loading.iter().any(|r| r.name.eq_ignore_ascii_case(&name)) {
        return refuse("Function already exists in the library");
    }
    loading.push(Registered {
        name,
        callback,
        no_writes,
    });
    Ok(())
}

/// The library name of `code`'s first line (`#!lua name=<library>`), or Redis's error reply.
fn library_name(code: &str) -> Result<(String, &str), Resp> {
    let bad = |t: String| Err(Resp::Error(t));
    let Some(rest) = code.strip_prefix("#!") else {
        return bad("ERR Missing library metadata".into());
    };
    let Some((line, body)) = rest.split_once('\n') else {
        return bad("ERR Invalid library metadata".into());
    };
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine_name = parts.next().unwrap_or("");
    let mut name = None;
    for part in parts {
        match part.strip_prefix("name=") {
            Some(n) => name = Some(n.to_string()),
            None => return bad(format!("ERR Invalid metadata value given: {part}")),
        }
    }
    let Some(name) = name else {
        return bad("ERR Library name was not given".into());
    };
    if !engine_name.eq_ignore_ascii_case("lua") {
        return bad(format!("ERR Engine '{engine_name}' not found"));
    }
    if !valid_name(&name) {
        return bad(BAD_NAME.into());
    }
    Ok((name, body))
}

impl Interpreter {
    /// `FUNCTION LOAD [REPLACE] code`: the library's name, or Redis's error reply.
    pub fn function_load(&mut self, code: &str, replace: bool) -> Resp {
        let (name, body) = match library_name(code) {
            Ok(v) => v,
            Err(e) => return e,
        };
        if self.functions.libraries.contains_key(&name) && !replace {
            return Resp::Error(format!("ERR Library '{name}' already exists"));
        }
        // Compiled with a leading newline for the metadata line, so errors name the lines of the
        // library as sent (Redis's own line numbers).
        let func = match compiled::load(&self.lua, CHUNK_NAME, &format!("\n{body}")) {
            Ok(f) => f,
            Err(e) => {
                let msg = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                return commands::error_reply(format!("ERR Error compiling function: {msg}"));
            }
        };
        let api = &self.library_api;
        api.proxy_mt
            .raw_set("__index", api.api.clone())
            .expect("swap the globals for the library API");
        {
            let mut eng = self.engine();
            eng.loading = Some(Vec::new());
            eng.run = Some(Run {
                now_us: 0,
                sha: String::new(),
                read_only: true,
                strict: false,
                slot: None,
                instructions: 0,
                killed: false,
                error: None,
            });
        }
        let result = func.call::<Value>(());
        api.proxy_mt
            .raw_set("__index", api.globals.clone())
            .expect("put the globals back");
        let registered = {
            let mut eng = self.engine();
            eng.run = None;
            eng.loading.take().unwrap_or_default()
        };
        if let Err(e) = result {
            let text = match find_raised(&e) {
                Some(Raised::Reply(s)) => s.clone(),
                Some(Raised::Text(s)) => format!("ERR {s}"),
                Some(Raised::Budget) => "ERR FUNCTION LOAD timeout".into(),
                None => match &e {
                    mlua::Error::RuntimeError(s) => format!("ERR {s}"),
                    other => format!("ERR {other}"),
                },
            };
            return commands::error_reply(format!("ERR Error registering functions: {text}"));
        }
        if registered.is_empty() {
            return Resp::Error("ERR No functions registered".into());
        }
        for r in &registered {
            if let Some(other) = self.functions.functions.get(&r.name.to_ascii_lowercase()) {
                if other.library != name {
                    return Resp::Error(format!("ERR Function {} already exists", r.name));
                }
            }
        }
        self.function_delete(&name);
        let mut names = Vec::new();
        for r in registered {
            let key = r.name.to_ascii_lowercase();
            names.push(key.clone());
            self.functions.functions.insert(
                key,
                Entry {
                    name: r.name,
                    library: name.clone(),
                    callback: r.callback,
                    no_writes: r.no_writes,
                },
            );
        }
        self.functions
            .libraries
            .insert(name.clone(), Library { functions: names });
        Resp::Bulk(name.into_bytes())
    }

    /// `FUNCTION DELETE library`: true when it existed.
    pub fn function_delete(&mut self, library: &str) -> bool {
        let Some(lib) = self.functions.libraries.remove(library) else {
            return false;
        };
        for f in lib.functions {
            self.functions.functions.remove(&f);
        }
        true
    }

    /// `FUNCTION FLUSH`, or a restart that kept no data.
    pub fn flush_functions(&mut self) {
        self.functions = Functions::default();
    }

    /// True when a library registered the function `name`.
    pub fn has_function(&self, name: &str) -> bool {
        self.functions
            .functions
            .contains_key(&name.to_ascii_lowercase())
    }

    /// Run the function `name` (it must exist) with `keys` and `args`, for `FCALL` or, with
    /// `ro`, `FCALL_RO`; `run` is the call's context (time, strictness).
    pub fn fcall(
        &mut self,
        mut run: Run,
        name: &str,
        ro: bool,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Resp {
        let entry = self
            .functions
            .functions
            .get(&name.to_ascii_lowercase())
            .expect("function exists");
        if ro && !entry.no_writes {
            return Resp::Error(
                "ERR Can not execute a script with write flag using *_ro command.".into(),
            );
        }
        run.read_only = entry.no_writes;
        run.sha = entry.name.clone();
        let callback = entry.callback.clone();
        let result = self.call_function(run, callback, keys, args);
        self.finish(name, result)
    }

    fn call_function(
        &self,
        run: Run,
        callback: Function,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> mlua::Result<MultiValue> {
        engine(&self.lua).run = Some(run);
        let (k, a) = self.keys_and_args(keys, args)?;
        // A function sees no KEYS or ARGV globals.
        self.globals.raw_set("KEYS", Value::Nil)?;
        self.globals.raw_set("ARGV", Value::Nil)?;
        let bound = self.library_api.bind.call::<Function>((callback, k, a))?;
        self.runner.call::<MultiValue>(bound)
    }
}

/// The keys and arguments of `FCALL name numkeys key... arg...` (`args` from `numkeys` on), or
/// Redis's error reply.
pub(crate) fn fcall_split(args: &[Vec<u8>]) -> Result<(Vec<String>, Vec<Vec<u8>>), Resp> {
    let n = crate::num::parse_i64(&args[0])
        .ok_or_else(|| Resp::Error("ERR Bad number of keys provided".into()))?;
    if n < 0 {
        return Err(Resp::Error("ERR Number of keys can't be negative".into()));
    }
    let n = n as usize;
    if n > args.len() - 1 {
        return Err(Resp::Error(
            "ERR Number of keys can't be greater than number of args".into(),
        ));
    }
    let keys = args[1..=n]
        .iter()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    Ok((keys, args[n + 1..].to_vec()))
}
