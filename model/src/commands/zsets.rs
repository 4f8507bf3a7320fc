//! The sorted set commands (ZADD, ZREM, ZCARD, ZSCORE, ZRANGE, ZREVRANGE, ZRANGEBYSCORE,
//! ZPOPMIN), as Redis 7.0's `t_zset.c`.

use super::{
    arg_count, arg_i64, bulk, double, err, int, read_zset, Exec, MINMAX_NOT_FLOAT, NOT_FLOAT,
    SYNTAX,
};
use crate::db::{Value, ZSet};
use crate::num::{parse_f64_strict, strtod};
use orq::Resp;

/// ZADD key [NX | XX] [GT | LT] [CH] [INCR] score member [score member ...]
/// (`zaddGenericCommand` and `zsetAdd` in t_zset.c).
pub(super) fn zadd(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, false);
    let mut idx = 2;
    while idx < args.len() {
        let o = args[idx].as_slice();
        let is = |s: &str| o.eq_ignore_ascii_case(s.as_bytes());
        if is("nx") {
            nx = true;
        } else if is("xx") {
            xx = true;
        } else if is("ch") {
            ch = true;
        } else if is("incr") {
            incr = true;
        } else if is("gt") {
            gt = true;
        } else if is("lt") {
            lt = true;
        } else {
            break;
        }
        idx += 1;
    }
    let rest = &args[idx..];
    if rest.is_empty() || rest.len() % 2 == 1 {
        return err(SYNTAX);
    }
    if nx && xx {
        return err("ERR XX and NX options at the same time are not compatible");
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return err("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if incr && rest.len() > 2 {
        return err("ERR INCR option supports a single increment-element pair");
    }
    let mut scores = Vec::with_capacity(rest.len() / 2);
    for pair in rest.chunks(2) {
        match parse_f64_strict(&pair[0]) {
            Some(s) => scores.push(s),
            None => return err(NOT_FLOAT),
        }
    }
    let key = &args[1];
    let exists = tri!(read_zset(ex.db, key)).is_some();
    let nothing = if incr { Resp::Nil } else { Resp::Int(0) };
    if !exists {
        if xx {
            return nothing;
        }
        ex.db.insert(key, Value::ZSet(ZSet::default()), None);
    }
    let Some(Value::ZSet(z)) = ex.db.get_mut(key) else {
        unreachable!("checked type")
    };
    let (mut added, mut updated, mut processed) = (0usize, 0usize, 0usize);
    let mut last = 0.0;
    for (pair, &score) in rest.chunks(2).zip(&scores) {
        let member = pair[1].as_slice();
        match z.score(member) {
            Some(cur) => {
                if nx {
                    continue;
                }
                let mut new = score;
                if incr {
                    new += cur;
                    if new.is_nan() {
                        return err("ERR resulting score is not a number (NaN)");
                    }
                }
                if (lt && new >= cur) || (gt && new <= cur) {
                    continue;
                }
                if new != cur {
                    z.insert(member, new);
                    updated += 1;
                }
                processed += 1;
                last = new;
            }
            None if !xx => {
                z.insert(member, score);
                added += 1;
                processed += 1;
                last = score;
            }
            None => {}
        }
    }
    if incr {
        if processed > 0 {
            double(last)
        } else {
            Resp::Nil
        }
    } else {
        int(if ch { added + updated } else { added })
    }
}

pub(super) fn zrem(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    if tri!(read_zset(ex.db, &args[1])).is_none() {
        return Resp::Int(0);
    }
    let Some(Value::ZSet(z)) = ex.db.get_mut(&args[1]) else {
        unreachable!("checked type")
    };
    let removed = args[2..].iter().filter(|m| z.remove(m)).count();
    ex.db.remove_if_empty(&args[1]);
    int(removed)
}

pub(super) fn zcard(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    int(tri!(read_zset(ex.db, &args[1])).map_or(0, |z| z.len()))
}

pub(super) fn zscore(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    match tri!(read_zset(ex.db, &args[1])).and_then(|z| z.score(&args[2])) {
        Some(s) => double(s),
        None => Resp::Nil,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum RangeType {
    Auto,
    Rank,
    Score,
    Lex,
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Auto,
    Forward,
    Reverse,
}

/// One bound of a score range (`zslParseRange`): `(` makes it exclusive; the rest goes through
/// C `strtod` on the C string (so leading spaces, `inf` and overflow are accepted, NaN is not).
fn parse_score_bound(a: &[u8]) -> Option<(f64, bool)> {
    let a = &a[..a.iter().position(|&b| b == 0).unwrap_or(a.len())];
    let (text, exclusive) = match a.first() {
        Some(b'(') => (&a[1..], true),
        _ => (a, false),
    };
    let r = strtod(text);
    if r.consumed != text.len() || r.value.is_nan() {
        return None;
    }
    Some((r.value, exclusive))
}

/// The body shared by ZRANGE, ZREVRANGE and ZRANGEBYSCORE (`zrangeGenericCommand` in t_zset.c).
fn zrange_generic(
    ex: &mut Exec<'_>,
    args: &[Vec<u8>],
    mut rangetype: RangeType,
    mut direction: Direction,
) -> Resp {
    let key = &args[1];
    let mut withscores = false;
    let (mut offset, mut limit): (i64, i64) = (0, -1);
    let mut j = 4;
    while j < args.len() {
        let left = args.len() - j - 1;
        let o = args[j].as_slice();
        let is = |s: &str| o.eq_ignore_ascii_case(s.as_bytes());
        if is("withscores") {
            withscores = true;
        } else if is("limit") && left >= 2 {
            offset = tri!(arg_i64(&args[j + 1]));
            limit = tri!(arg_i64(&args[j + 2]));
            j += 2;
        } else if direction == Direction::Auto && is("rev") {
            direction = Direction::Reverse;
        } else if rangetype == RangeType::Auto && is("bylex") {
            rangetype = RangeType::Lex;
        } else if rangetype == RangeType::Auto && is("byscore") {
            rangetype = RangeType::Score;
        } else {
            return err(SYNTAX);
        }
        j += 1;
    }
    if direction == Direction::Auto {
        direction = Direction::Forward;
    }
    if rangetype == RangeType::Auto {
        rangetype = RangeType::Rank;
    }
    if limit != -1 && rangetype == RangeType::Rank {
        return err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if withscores && rangetype == RangeType::Lex {
        return err("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    let rev = direction == Direction::Reverse;
    let (mut min_arg, mut max_arg) = (&args[2], &args[3]);
    if rev && rangetype != RangeType::Rank {
        std::mem::swap(&mut min_arg, &mut max_arg);
    }
    enum Range {
        Rank(i64, i64),
        Score(f64, bool, f64, bool),
    }
    let range = match rangetype {
        RangeType::Rank => Range::Rank(tri!(arg_i64(min_arg)), tri!(arg_i64(max_arg))),
        RangeType::Score => match (parse_score_bound(min_arg), parse_score_bound(max_arg)) {
            (Some((min, min_ex)), Some((max, max_ex))) => Range::Score(min, min_ex, max, max_ex),
            _ => return err(MINMAX_NOT_FLOAT),
        },
        _ => return err("ERR orq-sim does not model ZRANGE BYLEX"),
    };
    let Some(z) = tri!(read_zset(ex.db, key)) else {
        return Resp::Array(Vec::new());
    };
    let picked: Vec<(&[u8], f64)> = match range {
        Range::Rank(start, end) => {
            let len = z.len() as i64;
            let mut start = if start < 0 { len + start } else { start };
            let mut end = if end < 0 { len + end } else { end };
            if start < 0 {
                start = 0;
            }
            if start > end || start >= len {
                Vec::new()
            } else {
                if end >= len {
                    end = len - 1;
                }
                let n = (end - start + 1) as usize;
                if rev {
                    z.iter().rev().skip(start as usize).take(n).collect()
                } else {
                    z.iter().skip(start as usize).take(n).collect()
                }
            }
        }
        Range::Score(min, min_ex, max, max_ex) => {
            let empty_range = min > max || (min == max && (min_ex || max_ex));
            if empty_range || (offset > 0 && offset >= z.len() as i64) || offset < 0 {
                // A negative offset skips every element in Redis (`while (ln && offset--)`).
                Vec::new()
            } else {
                let it = z.range_by_score(min, min_ex, max, max_ex, rev);
                let it = it.skip(offset as usize);
                if limit < 0 {
                    it.collect()
                } else {
                    it.take(limit as usize).collect()
                }
            }
        }
    };
    let mut out = Vec::with_capacity(picked.len() * if withscores { 2 } else { 1 });
    for (m, s) in picked {
        out.push(bulk(m));
        if withscores {
            out.push(double(s));
        }
    }
    Resp::Array(out)
}

pub(super) fn zrange(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    zrange_generic(ex, args, RangeType::Auto, Direction::Auto)
}

pub(super) fn zrevrange(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    zrange_generic(ex, args, RangeType::Rank, Direction::Reverse)
}

pub(super) fn zrangebyscore(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    zrange_generic(ex, args, RangeType::Score, Direction::Forward)
}

pub(super) fn zpopmin(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    if args.len() > 3 {
        return err(SYNTAX);
    }
    let mut count = 1;
    if args.len() == 3 {
        count = tri!(arg_count(&args[2]));
    }
    let key = &args[1];
    if tri!(read_zset(ex.db, key)).is_none() || count == 0 {
        return Resp::Array(Vec::new());
    }
    let Some(Value::ZSet(z)) = ex.db.get_mut(key) else {
        unreachable!("checked type")
    };
    let popped: Vec<(Vec<u8>, f64)> = z
        .iter()
        .take(count as usize)
        .map(|(m, s)| (m.to_vec(), s))
        .collect();
    let mut out = Vec::with_capacity(popped.len() * 2);
    for (m, s) in popped {
        z.remove(&m);
        out.push(Resp::Bulk(m));
        out.push(double(s));
    }
    ex.db.remove_if_empty(key);
    Resp::Array(out)
}
