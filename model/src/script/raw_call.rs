//! `redis.call` and `redis.pcall` as Lua C functions: the one place in orq that uses `unsafe`
//! (design note 50).
//!
//! Every command a script runs goes through here, and in the simulator that is most of the
//! work: through mlua's safe callbacks each argument and each reply value became a handle in
//! mlua's reference thread, taken and released under its lock, which cost about a fifth of a
//! simulated call. Here the arguments are read from the Lua stack and the reply is pushed onto
//! it directly; the behaviour is the safe version's, which the differential tests compare with
//! a real Redis (`sim/tests/scripting.rs`, `script_differential.rs`, `script_args.rs`).
//!
//! Conversions, as Redis 7.0's `script_lua.c` does them for a RESP2 client:
//! - arguments (`luaArgsToRedisArgv`): a string is its bytes, a number its `%.17g` text,
//!   anything else the error "Lua redis lib command arguments must be strings or integers";
//!   no argument at all is "Please specify at least one argument for this redis lib call";
//! - replies (`redisProtocolToLuaType`): integer → number, bulk → string, nil → false, status
//!   → `{ok = s}`, error → `{err = s}`, array → table.
//!
//! Errors: a command's error reply is an error table `{err = "<CODE> <message>",
//! ignore_error_stats_update = true}`; `redis.call` raises it, `redis.pcall` returns it.
//!
//! Why this is sound:
//! - Lua raises errors with `longjmp`, which must not cross a Rust frame that owns something to
//!   drop. [`call`] does all the Rust work and returns once every value it owns is dropped; only
//!   then does the C entry point, whose frame owns nothing, call `lua_error`.
//! - While [`call`] pushes values, Lua could raise only on a failed allocation. The model's Lua
//!   state has no memory limit, so allocation fails only when the process is out of memory,
//!   where Rust's allocator aborts too.
//! - A C function may use `LUA_MINSTACK` (20) stack slots; a nested reply checks for room at
//!   each level with `lua_checkstack`.

#![allow(unsafe_code)]

use super::{engine, error_buff, REPLY_DEPTH_MAX};
use crate::num::format_g17;
use mlua::ffi;
use mlua::Lua;
use orq::Resp;
use std::ffi::c_int;

/// The error when `redis.call` gets no argument.
const NO_ARGUMENTS: &str = "Please specify at least one argument for this redis lib call";
/// The error when an argument is neither a string nor a number.
const BAD_ARGUMENT: &str = "Lua redis lib command arguments must be strings or integers";

/// `redis.call` (`raise`) or `redis.pcall` as a Lua function.
pub(super) fn function(lua: &Lua, raise: bool) -> mlua::Result<mlua::Function> {
    let f: ffi::lua_CFunction = if raise { redis_call } else { redis_pcall };
    // SAFETY: both functions follow the Lua C API's rules (see the module's documentation).
    unsafe { lua.create_c_function(f) }
}

/// `redis.call`: run the command, raise its error.
unsafe extern "C-unwind" fn redis_call(state: *mut ffi::lua_State) -> c_int {
    match call(state, true) {
        Outcome::Return => 1,
        Outcome::Raise => ffi::lua_error(state),
    }
}

/// `redis.pcall`: run the command, return its error as an error table.
unsafe extern "C-unwind" fn redis_pcall(state: *mut ffi::lua_State) -> c_int {
    match call(state, false) {
        Outcome::Return | Outcome::Raise => 1,
    }
}

/// What the entry point does with the value [`call`] left on top of the stack.
enum Outcome {
    /// Return it.
    Return,
    /// Raise it (an error table).
    Raise,
}

/// Read the arguments, run the command, push the reply (or the error table). Owns nothing when
/// it returns.
unsafe fn call(state: *mut ffi::lua_State, raise: bool) -> Outcome {
    let reply = match arguments(state) {
        Ok(args) => {
            let lua = Lua::get_or_init_from_ptr(state);
            engine(lua).call(&args)
        }
        Err(msg) => {
            push_error_table(state, &error_buff(msg), raise);
            return if raise {
                Outcome::Raise
            } else {
                Outcome::Return
            };
        }
    };
    if let Resp::Error(e) = &reply {
        push_error_table(state, &error_buff(&format!("-{e}")), true);
        return if raise {
            Outcome::Raise
        } else {
            Outcome::Return
        };
    }
    push_reply(state, &reply, 0);
    Outcome::Return
}

/// The call's arguments (`luaArgsToRedisArgv`), or the error text.
unsafe fn arguments(state: *mut ffi::lua_State) -> Result<Vec<Vec<u8>>, &'static str> {
    let argc = ffi::lua_gettop(state);
    if argc == 0 {
        return Err(NO_ARGUMENTS);
    }
    let mut args = Vec::with_capacity(argc as usize);
    for i in 1..=argc {
        match ffi::lua_type(state, i) {
            ffi::LUA_TSTRING => {
                let mut len = 0usize;
                let data = ffi::lua_tolstring(state, i, &mut len);
                args.push(std::slice::from_raw_parts(data.cast::<u8>(), len).to_vec());
            }
            ffi::LUA_TNUMBER => args.push(format_g17(ffi::lua_tonumber(state, i)).into_bytes()),
            _ => return Err(BAD_ARGUMENT),
        }
    }
    Ok(args)
}

/// Push `bytes` as a Lua string.
unsafe fn push_bytes(state: *mut ffi::lua_State, bytes: &[u8]) {
    ffi::lua_pushlstring(state, bytes.as_ptr().cast(), bytes.len());
}

/// Push the error table `{err = text}`; `command_error` adds the flag Redis sets on the errors
/// of commands (`ignore_error_stats_update = true`).
unsafe fn push_error_table(state: *mut ffi::lua_State, text: &str, command_error: bool) {
    ffi::lua_createtable(state, 0, 2);
    push_bytes(state, text.as_bytes());
    ffi::lua_setfield(state, -2, c"err".as_ptr());
    if command_error {
        ffi::lua_pushboolean(state, 1);
        ffi::lua_setfield(state, -2, c"ignore_error_stats_update".as_ptr());
    }
}

/// Push a command's reply converted as `redisProtocolToLuaType` does (RESP2).
unsafe fn push_reply(state: *mut ffi::lua_State, r: &Resp, depth: usize) {
    // Room for this value, and for a table's element above it.
    if depth > REPLY_DEPTH_MAX || ffi::lua_checkstack(state, 3) == 0 {
        push_error_table(state, "ERR reached lua stack limit", true);
        return;
    }
    match r {
        Resp::Nil => ffi::lua_pushboolean(state, 0),
        Resp::Int(n) => ffi::lua_pushnumber(state, *n as f64),
        Resp::Bulk(b) => push_bytes(state, b),
        Resp::Status(s) => {
            ffi::lua_createtable(state, 0, 1);
            push_bytes(state, s.as_bytes());
            ffi::lua_setfield(state, -2, c"ok".as_ptr());
        }
        Resp::Error(e) => push_error_table(state, &error_buff(&format!("-{e}")), true),
        Resp::Array(items) => {
            ffi::lua_createtable(state, items.len().try_into().unwrap_or(0), 0);
            for (i, item) in items.iter().enumerate() {
                push_reply(state, item, depth + 1);
                ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
            }
        }
    }
}
