//! TIME, the keyspace commands (DEL, EXISTS, TYPE, PTTL, TTL), the string commands (GET, SET)
//! and PUBLISH, with Redis 7.0's semantics (`t_string.c`, `expire.c`, `db.c`, `pubsub.c`).

use super::{arg_i64, bulk, err, int, ok, read_string, Exec, SYNTAX};
use crate::db::Value;
use orq::Resp;

pub(super) fn time(ex: &mut Exec<'_>, _args: &[Vec<u8>]) -> Resp {
    let secs = ex.now_us / 1_000_000;
    let micros = ex.now_us % 1_000_000;
    Resp::Array(vec![
        Resp::Bulk(secs.to_string().into_bytes()),
        Resp::Bulk(micros.to_string().into_bytes()),
    ])
}

pub(super) fn get(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    match tri!(read_string(ex.db, &args[1])) {
        Some(s) => bulk(s),
        None => Resp::Nil,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Expire {
    None,
    Ex,
    Px,
    ExAt,
    PxAt,
    KeepTtl,
}

/// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]
/// (`parseExtendedStringArgumentsOrReply` and `setGenericCommand` in t_string.c).
pub(super) fn set(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let (mut nx, mut xx, mut get_old) = (false, false, false);
    let mut expire = Expire::None;
    let mut expire_arg: Option<&[u8]> = None;
    let mut j = 3;
    while j < args.len() {
        let opt = args[j].as_slice();
        let has_next = j + 1 < args.len();
        let is = |s: &str| opt.eq_ignore_ascii_case(s.as_bytes());
        let ttl_free = |e: Expire, me: Expire| e == Expire::None || e == me;
        if is("nx") && !xx {
            nx = true;
        } else if is("xx") && !nx {
            xx = true;
        } else if is("get") {
            get_old = true;
        } else if is("keepttl") && ttl_free(expire, Expire::KeepTtl) {
            expire = Expire::KeepTtl;
        } else if let Some(kind) = [
            ("ex", Expire::Ex),
            ("px", Expire::Px),
            ("exat", Expire::ExAt),
            ("pxat", Expire::PxAt),
        ]
        .into_iter()
        .find(|(n, _)| is(n))
        .map(|(_, k)| k)
        .filter(|k| ttl_free(expire, *k) && has_next)
        {
            expire = kind;
            expire_arg = Some(&args[j + 1]);
            j += 1;
        } else {
            return err(SYNTAX);
        }
        j += 1;
    }
    let mut when_ms: Option<u64> = None;
    if let Some(a) = expire_arg {
        let mut ms = tri!(arg_i64(a));
        let seconds = matches!(expire, Expire::Ex | Expire::ExAt);
        let invalid = Resp::Error("ERR invalid expire time in 'set' command".to_string());
        if ms <= 0 || (seconds && ms > i64::MAX / 1000) {
            return invalid;
        }
        if seconds {
            ms *= 1000;
        }
        if matches!(expire, Expire::Ex | Expire::Px) {
            ms = ms.wrapping_add(i64::try_from(ex.db.now_ms()).expect("time fits i64"));
        }
        if ms <= 0 {
            return invalid;
        }
        when_ms = Some(ms as u64);
    }
    let key = &args[1];
    let old = if get_old {
        match tri!(read_string(ex.db, key)) {
            Some(s) => bulk(s),
            None => Resp::Nil,
        }
    } else {
        Resp::Nil
    };
    let found = ex.db.get(key).is_some();
    if (nx && found) || (xx && !found) {
        return old;
    }
    let keep = if expire == Expire::KeepTtl {
        ex.db.expire_at_ms(key)
    } else {
        None
    };
    ex.db
        .insert(key, Value::String(args[2].clone()), when_ms.or(keep));
    if get_old {
        old
    } else {
        ok()
    }
}

pub(super) fn del(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    int(args[1..]
        .iter()
        .filter(|k| ex.db.remove(k).is_some())
        .count())
}

/// PUBLISH channel message: the model has no pub/sub clients, so it answers 0 (the receivers of
/// a Redis with none); the channel is recorded for [`crate::MemoryStore`], which wakes its
/// [`orq::Store::wake`] listeners after the call. The message is not kept.
pub(super) fn publish(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    ex.db.publish(&args[1]);
    Resp::Int(0)
}

pub(super) fn exists(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    int(args[1..].iter().filter(|k| ex.db.get(k).is_some()).count())
}

pub(super) fn type_of(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let name = ex.db.get(&args[1]).map_or("none", Value::type_name);
    Resp::Status(name.to_string())
}

fn ttl_generic(ex: &mut Exec<'_>, key: &[u8], ms: bool) -> Resp {
    if ex.db.get(key).is_none() {
        return Resp::Int(-2);
    }
    match ex.db.expire_at_ms(key) {
        None => Resp::Int(-1),
        Some(t) => {
            let left = (t as i64 - ex.db.now_ms() as i64).max(0);
            Resp::Int(if ms { left } else { (left + 500) / 1000 })
        }
    }
}

pub(super) fn pttl(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    ttl_generic(ex, &args[1], true)
}

pub(super) fn ttl(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    ttl_generic(ex, &args[1], false)
}
