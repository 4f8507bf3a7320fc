//! The conversions between Lua values and RESP, as Redis 7.0's `script_lua.c` does them for a
//! RESP2 client: a script's return value out of Lua, and the arguments of the `redis` API's
//! functions other than `call` and `pcall` (those two convert on the Lua stack, in
//! [`super::raw_call`]).

use super::{commands, REPLY_DEPTH_MAX};
use crate::num::{c_double_to_i64, format_g17};
use mlua::{MultiValue, Table, Value};
use orq::Resp;

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
pub(super) fn lua_args(args: &MultiValue) -> Result<Vec<Vec<u8>>, &'static str> {
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
