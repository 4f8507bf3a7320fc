//! The hash commands (HGET, HSET, HMGET, HGETALL, HINCRBY, HDEL), as Redis 7.0's `t_hash.c`.

use super::{arg_i64, arity_error, bulk, err, int, read_hash, write_value, Exec};
use crate::db::{Hash, Value};
use crate::num::parse_i64;
use orq::Resp;

fn is_hash(v: &Value) -> bool {
    matches!(v, Value::Hash(_))
}

fn new_hash() -> Value {
    Value::Hash(Hash::default())
}

pub(super) fn hget(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    match tri!(read_hash(ex.db, &args[1])).and_then(|h| h.get(args[2].as_slice())) {
        Some(v) => bulk(v),
        None => Resp::Nil,
    }
}

pub(super) fn hset(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
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

pub(super) fn hmget(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
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

pub(super) fn hgetall(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
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

pub(super) fn hincrby(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
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

pub(super) fn hdel(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
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
