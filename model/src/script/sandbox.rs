//! The globals a script sees, set up the way Redis 7.0 sets up its Lua state: the `redis` API,
//! `math.random` on Redis's own generator, the read-only global and library tables, `pcall` and
//! `xpcall` that cannot swallow a budget error, and the top-level error handler that builds the
//! final error text of a failed script.

use super::convert::lua_args;
use super::raw_call;
use super::{commands, engine, error_buff, error_table, find_raised, raise, Raised, REDIS_VERSION};
use mlua::{Function, Lua, MultiValue, Table, Value};
use orq::Resp;

/// The registry name of the base library's `tostring`.
const TOSTRING: &str = "orq_model_tostring";

/// The state of `redisLrand48` before any seeding (rand.c's X0, X1, X2).
pub(super) const RAND48_INITIAL: u64 = 0x1234_ABCD_330E;

/// One step of Redis's `redisLrand48` (the classic 48-bit `lrand48` generator).
fn lrand48(state: &mut u64) -> i32 {
    *state = (state.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB)) & 0xFFFF_FFFF_FFFF;
    (*state >> 17) as i32
}

/// What [`install_sandbox`] built.
pub(super) struct Sandbox {
    /// The real globals, behind the read-only proxy scripts see (KEYS and ARGV go here).
    pub globals: Table,
    /// `function(f) return xpcall(f, handler) end`, the protected call every script runs in.
    pub runner: Function,
    /// The metatable of the globals proxy: its `__index` is the real globals, which FUNCTION
    /// LOAD swaps for the library API while a library's code runs (as Redis does).
    pub proxy_mt: Table,
    /// The metatable of the real globals, whose `__index` raises "nonexistent global variable".
    pub missing_mt: Table,
    /// `make_proxy(real)`: a read-only proxy of `real`.
    pub make_proxy: Function,
}

/// Build the sandbox.
pub(super) fn install_sandbox(lua: &Lua) -> mlua::Result<Sandbox> {
    let globals = lua.globals();
    // Kept aside for error texts: while FUNCTION LOAD runs a library, `tostring` is not a global.
    lua.set_named_registry_value(TOSTRING, globals.raw_get::<Function>("tostring")?)?;
    for name in [
        "print", "getfenv", "setfenv", "newproxy", "dofile", "loadfile",
    ] {
        globals.raw_set(name, Value::Nil)?;
    }

    // ---- redis.* --------------------------------------------------------------------------
    let redis = lua.create_table()?;
    redis.raw_set("call", raw_call::function(lua, true)?)?;
    redis.raw_set("pcall", raw_call::function(lua, false)?)?;
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
    globals.set_metatable(Some(missing_mt.clone()))?;

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
    let proxy_mt = g_proxy
        .metatable()
        .expect("the globals proxy has a metatable");
    lua.set_globals(g_proxy)?;
    let make_proxy = {
        let sealed = sealed.clone();
        let ro_newindex = ro_newindex.clone();
        lua.create_function(move |lua, real: Table| {
            let mt = lua.create_table()?;
            mt.raw_set("__index", real)?;
            mt.raw_set("__newindex", ro_newindex.clone())?;
            mt.raw_set("__metatable", sealed.clone())?;
            let proxy = lua.create_table()?;
            proxy.set_metatable(Some(mt))?;
            Ok(proxy)
        })?
    };
    Ok(Sandbox {
        globals,
        runner,
        proxy_mt,
        missing_mt,
        make_proxy,
    })
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
    let f: Function = lua
        .named_registry_value(TOSTRING)
        .expect("tostring is kept in the registry");
    f.call::<mlua::String>(v.clone())
        .map(|s| String::from_utf8_lossy(&s.as_bytes()).into_owned())
        .unwrap_or_default()
}

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
}
