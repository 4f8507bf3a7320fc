//! The set commands (SADD, SREM, SMEMBERS, SISMEMBER, SCARD), as Redis 7.0's `t_set.c`.

use super::{bulk, int, read_set, write_value, Exec};
use crate::db::Value;
use orq::Resp;
use std::collections::BTreeSet;

pub(super) fn sadd(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let Value::Set(s) = tri!(write_value(
        ex.db,
        &args[1],
        |v| matches!(v, Value::Set(_)),
        || Value::Set(BTreeSet::new())
    )) else {
        unreachable!("checked type")
    };
    int(args[2..].iter().filter(|m| s.insert(m.to_vec())).count())
}

pub(super) fn srem(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    if tri!(read_set(ex.db, &args[1])).is_none() {
        return Resp::Int(0);
    }
    let Some(Value::Set(s)) = ex.db.get_mut(&args[1]) else {
        unreachable!("checked type")
    };
    let removed = args[2..].iter().filter(|m| s.remove(m.as_slice())).count();
    ex.db.remove_if_empty(&args[1]);
    int(removed)
}

/// SMEMBERS in byte order. Redis returns its hash table's order (or an intset's numeric order),
/// which depends on a per-process hash seed; callers must not depend on it (queues.lua sorts).
pub(super) fn smembers(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let s = tri!(read_set(ex.db, &args[1]));
    Resp::Array(s.into_iter().flatten().map(|m| bulk(m)).collect())
}

pub(super) fn sismember(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let s = tri!(read_set(ex.db, &args[1]));
    Resp::Int(i64::from(s.is_some_and(|s| s.contains(args[2].as_slice()))))
}

pub(super) fn scard(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    int(tri!(read_set(ex.db, &args[1])).map_or(0, |s| s.len()))
}
