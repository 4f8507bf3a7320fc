//! The list commands (LPUSH, RPUSH, LPOP, RPOP, LRANGE, LLEN, LREM), as Redis 7.0's `t_list.c`.

use super::{arg_count, arg_i64, arity_error, bulk, int, read_list, write_value, Exec};
use crate::db::Value;
use orq::Resp;
use std::collections::VecDeque;

fn push(ex: &mut Exec<'_>, args: &[Vec<u8>], head: bool) -> Resp {
    let Value::List(l) = tri!(write_value(
        ex.db,
        &args[1],
        |v| matches!(v, Value::List(_)),
        || Value::List(VecDeque::new())
    )) else {
        unreachable!("checked type")
    };
    for v in &args[2..] {
        if head {
            l.push_front(v.clone());
        } else {
            l.push_back(v.clone());
        }
    }
    int(l.len())
}

pub(super) fn lpush(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    push(ex, args, true)
}

pub(super) fn rpush(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    push(ex, args, false)
}

/// LPOP / RPOP key [count] (`popGenericCommand` in t_list.c).
fn pop(ex: &mut Exec<'_>, args: &[Vec<u8>], head: bool, name: &str) -> Resp {
    if args.len() > 3 {
        return arity_error(name);
    }
    let count = if args.len() == 3 {
        Some(tri!(arg_count(&args[2])))
    } else {
        None
    };
    let key = &args[1];
    if tri!(read_list(ex.db, key)).is_none() {
        return Resp::Nil;
    }
    let Some(Value::List(l)) = ex.db.get_mut(key) else {
        unreachable!("checked type")
    };
    let reply = match count {
        None => {
            let v = if head { l.pop_front() } else { l.pop_back() };
            Resp::Bulk(v.expect("lists are never empty"))
        }
        Some(n) => {
            let mut out = Vec::new();
            for _ in 0..n {
                let v = if head { l.pop_front() } else { l.pop_back() };
                match v {
                    Some(v) => out.push(Resp::Bulk(v)),
                    None => break,
                }
            }
            Resp::Array(out)
        }
    };
    ex.db.remove_if_empty(key);
    reply
}

pub(super) fn lpop(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    pop(ex, args, true, "lpop")
}

pub(super) fn rpop(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    pop(ex, args, false, "rpop")
}

pub(super) fn lrange(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let start = tri!(arg_i64(&args[2]));
    let end = tri!(arg_i64(&args[3]));
    let Some(l) = tri!(read_list(ex.db, &args[1])) else {
        return Resp::Array(Vec::new());
    };
    let len = l.len() as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return Resp::Array(Vec::new());
    }
    if end >= len {
        end = len - 1;
    }
    Resp::Array(
        l.iter()
            .skip(start as usize)
            .take((end - start + 1) as usize)
            .map(|v| bulk(v))
            .collect(),
    )
}

pub(super) fn llen(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    int(tri!(read_list(ex.db, &args[1])).map_or(0, |l| l.len()))
}

/// LREM key count element (`lremCommand` in t_list.c): removes the first `count` occurrences
/// from the head (count > 0), the last `-count` from the tail (count < 0) or all (0); replies
/// the number removed, and deletes the key when the list is left empty.
pub(super) fn lrem(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let count = tri!(arg_i64(&args[2]));
    let key = &args[1];
    if tri!(read_list(ex.db, key)).is_none() {
        return int(0);
    }
    let Some(Value::List(l)) = ex.db.get_mut(key) else {
        unreachable!("checked type")
    };
    let want = if count == 0 {
        usize::MAX
    } else {
        usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX)
    };
    let elem = &args[3];
    let mut removed = 0usize;
    if count >= 0 {
        let mut i = 0;
        while i < l.len() && removed < want {
            if l[i] == *elem {
                l.remove(i);
                removed += 1;
            } else {
                i += 1;
            }
        }
    } else {
        let mut i = l.len();
        while i > 0 && removed < want {
            i -= 1;
            if l[i] == *elem {
                l.remove(i);
                removed += 1;
            }
        }
    }
    ex.db.remove_if_empty(key);
    int(removed)
}
