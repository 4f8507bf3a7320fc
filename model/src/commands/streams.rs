//! The stream commands (XADD, XTRIM, XLEN, XRANGE, XREVRANGE), as Redis 7.0's `t_stream.c`.

use super::{arg_i64, arity_error, bulk, err, int, read_stream, Exec, INVALID_STREAM_ID, SYNTAX};
use crate::db::{Stream, StreamFields, StreamId, Value};
use crate::num::parse_i64;
use orq::Resp;

/// C `strtoull(s, &end, 10)` that must consume the whole (non-empty) string, as Redis's
/// `string2ull` falls back to: leading spaces and a sign are accepted, `-n` wraps around.
fn strtoull_all(s: &[u8]) -> Option<u64> {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let mut negative = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        negative = s[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut v: u64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        v = v.checked_mul(10)?.checked_add(u64::from(s[i] - b'0'))?;
        i += 1;
    }
    if i == start || i != s.len() {
        return None;
    }
    Some(if negative { v.wrapping_neg() } else { v })
}

/// Redis's `string2ull`.
fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(n) = parse_i64(s) {
        return u64::try_from(n).ok();
    }
    strtoull_all(s)
}

/// A parsed stream ID argument: the ID, and whether its sequence was given (`5-*` leaves it to
/// the stream).
struct IdArg {
    id: StreamId,
    seq_given: bool,
}

/// `streamGenericParseIDOrReply`: `-`, `+` (unless strict), `<ms>`, `<ms>-<seq>`, and (for XADD)
/// `<ms>-*`. `missing_seq` fills in a bare `<ms>`.
fn parse_stream_id(
    a: &[u8],
    missing_seq: u64,
    strict: bool,
    allow_star_seq: bool,
) -> Option<IdArg> {
    let a = &a[..a.iter().position(|&b| b == 0).unwrap_or(a.len())];
    if a.len() > 127 {
        return None;
    }
    if a == b"-" || a == b"+" {
        if strict {
            return None;
        }
        let id = if a == b"-" {
            StreamId { ms: 0, seq: 0 }
        } else {
            StreamId {
                ms: u64::MAX,
                seq: u64::MAX,
            }
        };
        return Some(IdArg {
            id,
            seq_given: true,
        });
    }
    let (ms_part, seq_part) = match a.iter().position(|&b| b == b'-') {
        Some(p) => (&a[..p], Some(&a[p + 1..])),
        None => (a, None),
    };
    let ms = string2ull(ms_part)?;
    let (seq, seq_given) = match seq_part {
        Some(b"*") if allow_star_seq => (0, false),
        Some(s) => (string2ull(s)?, true),
        None => (missing_seq, true),
    };
    Some(IdArg {
        id: StreamId { ms, seq },
        seq_given,
    })
}

/// The reply to the XADD trimming forms the model refuses.
const APPROX_TRIM: &str =
    "ERR orq-sim models only exact trimming (no '~' or LIMIT; MINID only with XTRIM)";

/// XADD key [NOMKSTREAM] [MAXLEN [=] n] <* | id> field value [field value ...]
/// (`streamParseAddOrTrimArgsOrReply` and `xaddCommand` in t_stream.c). Approximate trimming
/// (`MAXLEN ~ n`), MINID and LIMIT are refused with an error: what Redis trims then depends on
/// the byte sizes of its internal stream nodes.
pub(super) fn xadd(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let mut maxlen: Option<i64> = None;
    let mut no_mkstream = false;
    let mut id_arg: Option<IdArg> = None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let o = args[i].as_slice();
        let is = |s: &str| o.eq_ignore_ascii_case(s.as_bytes());
        if o == b"*" {
            break;
        } else if is("maxlen") && more > 0 {
            if maxlen.is_some() {
                return err(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                );
            }
            let next = args[i + 1].as_slice();
            if more >= 2 && next == b"~" {
                return err(APPROX_TRIM);
            }
            if more >= 2 && next == b"=" {
                i += 1;
            }
            let n = tri!(arg_i64(&args[i + 1]));
            if n < 0 {
                return err("ERR The MAXLEN argument must be >= 0.");
            }
            maxlen = Some(n);
            i += 1;
        } else if is("nomkstream") {
            no_mkstream = true;
        } else if is("minid") || is("limit") {
            return err(APPROX_TRIM);
        } else {
            match parse_stream_id(o, 0, true, true) {
                Some(id) => id_arg = Some(id),
                None => return err(INVALID_STREAM_ID),
            }
            break;
        }
        i += 1;
    }
    let field_pos = i + 1;
    if args.len() < field_pos + 2 || (args.len() - field_pos) % 2 == 1 {
        return arity_error("xadd");
    }
    if let Some(IdArg {
        id: StreamId { ms: 0, seq: 0 },
        seq_given: true,
    }) = id_arg
    {
        return err("ERR The ID specified in XADD must be greater than 0-0");
    }
    let key = &args[1];
    if tri!(read_stream(ex.db, key)).is_none() {
        if no_mkstream {
            return Resp::Nil;
        }
        ex.db.insert(key, Value::Stream(Stream::default()), None);
    }
    let now_ms = ex.db.now_ms();
    let Some(Value::Stream(s)) = ex.db.get_mut(key) else {
        unreachable!("checked type")
    };
    let last = s.last_id();
    if last.ms == u64::MAX && last.seq == u64::MAX {
        return err("ERR The stream has exhausted the last possible ID, unable to add more items");
    }
    let too_small =
        || err("ERR The ID specified in XADD is equal or smaller than the target stream top item");
    let id = match id_arg {
        Some(IdArg {
            id,
            seq_given: true,
        }) => id,
        Some(IdArg {
            id,
            seq_given: false,
        }) => {
            if last.ms == id.ms {
                if last.seq == u64::MAX {
                    return too_small();
                }
                StreamId {
                    ms: last.ms,
                    seq: last.seq + 1,
                }
            } else {
                id
            }
        }
        // `*`: the store's time, but never behind the last ID (`streamNextID`).
        None => {
            if now_ms > last.ms {
                StreamId { ms: now_ms, seq: 0 }
            } else if last.seq == u64::MAX {
                StreamId {
                    ms: last.ms + 1,
                    seq: 0,
                }
            } else {
                StreamId {
                    ms: last.ms,
                    seq: last.seq + 1,
                }
            }
        }
    };
    if id <= last {
        return too_small();
    }
    let fields = args[field_pos..]
        .chunks(2)
        .map(|fv| (fv[0].clone(), fv[1].clone()))
        .collect();
    s.push(id, fields);
    if let Some(n) = maxlen {
        s.trim_to(usize::try_from(n).unwrap_or(usize::MAX));
    }
    Resp::Bulk(id.to_string().into_bytes())
}

/// XTRIM key <MAXLEN [=] n | MINID [=] id> (`xtrimCommand` in t_stream.c): remove the oldest
/// entries until at most n remain, or every entry whose ID is below `id` (a bare `<ms>` means
/// `<ms>-0`; `-` and `+` are invalid IDs here, as in Redis's strict parse); replies with the count removed (0 for a missing key).
/// Approximate trimming (`~`) is refused, as for XADD; LIMIT without `~` is Redis's own syntax
/// error.
pub(super) fn xtrim(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    let o = args[2].as_slice();
    let minid = o.eq_ignore_ascii_case(b"minid");
    if !minid && !o.eq_ignore_ascii_case(b"maxlen") {
        return err("ERR syntax error");
    }
    // `~` and `=` are operators only when a count follows them (`streamParseAddOrTrimArgsOrReply`).
    let mut i = 3;
    if args.len() > 4 {
        match args[3].as_slice() {
            b"~" => return err(APPROX_TRIM),
            b"=" => i = 4,
            _ => {}
        }
    }
    let bound = if minid {
        match parse_stream_id(&args[i], 0, true, false) {
            Some(IdArg { id, .. }) => Trim::MinId(id),
            None => return err(INVALID_STREAM_ID),
        }
    } else {
        let n = tri!(arg_i64(&args[i]));
        if n < 0 {
            return err("ERR The MAXLEN argument must be >= 0.");
        }
        Trim::MaxLen(usize::try_from(n).unwrap_or(usize::MAX))
    };
    match &args[i + 1..] {
        [] => {}
        [limit, count] if limit.eq_ignore_ascii_case(b"limit") => {
            tri!(arg_i64(count));
            return err("ERR syntax error, LIMIT cannot be used without the special ~ option");
        }
        _ => return err("ERR syntax error"),
    }
    if tri!(read_stream(ex.db, &args[1])).is_none() {
        return int(0);
    }
    let Some(Value::Stream(s)) = ex.db.get_mut(&args[1]) else {
        unreachable!("checked type")
    };
    int(match bound {
        Trim::MaxLen(n) => s.trim_to(n),
        Trim::MinId(id) => s.trim_below(id),
    })
}

/// What an exact XTRIM keeps: at most n entries, or the entries from an ID on.
enum Trim {
    MaxLen(usize),
    MinId(StreamId),
}

pub(super) fn xlen(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    int(tri!(read_stream(ex.db, &args[1])).map_or(0, |s| s.len()))
}

/// XRANGE key start end [COUNT n] (`xrangeGenericCommand` in t_stream.c).
pub(super) fn xrange(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    xrange_generic(ex, args, false)
}

/// XREVRANGE key end start [COUNT n]: XRANGE's entries newest first (`xrangeGenericCommand`
/// with `rev`: the bounds are read from the swapped arguments, with the same rules).
pub(super) fn xrevrange(ex: &mut Exec<'_>, args: &[Vec<u8>]) -> Resp {
    xrange_generic(ex, args, true)
}

fn xrange_generic(ex: &mut Exec<'_>, args: &[Vec<u8>], rev: bool) -> Resp {
    let (start_arg, end_arg) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let interval = |a: &[u8], missing_seq: u64| -> Option<(StreamId, bool)> {
        if a.len() > 1 && a[0] == b'(' {
            parse_stream_id(&a[1..], missing_seq, true, false).map(|i| (i.id, true))
        } else {
            parse_stream_id(a, missing_seq, false, false).map(|i| (i.id, false))
        }
    };
    let Some((mut start, start_ex)) = interval(start_arg, 0) else {
        return err(INVALID_STREAM_ID);
    };
    if start_ex {
        if start.seq == u64::MAX {
            if start.ms == u64::MAX {
                return err("ERR invalid start ID for the interval");
            }
            start = StreamId {
                ms: start.ms + 1,
                seq: 0,
            };
        } else {
            start.seq += 1;
        }
    }
    let Some((mut end, end_ex)) = interval(end_arg, u64::MAX) else {
        return err(INVALID_STREAM_ID);
    };
    if end_ex {
        if end.seq == 0 {
            if end.ms == 0 {
                return err("ERR invalid end ID for the interval");
            }
            end = StreamId {
                ms: end.ms - 1,
                seq: u64::MAX,
            };
        } else {
            end.seq -= 1;
        }
    }
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        let more = args.len() - j - 1;
        if args[j].eq_ignore_ascii_case(b"count") && more >= 1 {
            count = tri!(arg_i64(&args[j + 1])).max(0);
            j += 1;
        } else {
            return err(SYNTAX);
        }
        j += 1;
    }
    let Some(s) = tri!(read_stream(ex.db, &args[1])) else {
        return Resp::Array(Vec::new());
    };
    if count == 0 {
        return Resp::Nil;
    }
    if start > end {
        return Resp::Array(Vec::new());
    }
    let take = if count < 0 {
        usize::MAX
    } else {
        count as usize
    };
    let entry = |(id, fields): (&StreamId, &StreamFields)| {
        let flat = fields
            .iter()
            .flat_map(|(f, v)| [bulk(f), bulk(v)])
            .collect();
        Resp::Array(vec![
            Resp::Bulk(id.to_string().into_bytes()),
            Resp::Array(flat),
        ])
    };
    let range = s.entries().range(start..=end);
    Resp::Array(if rev {
        range.rev().take(take).map(entry).collect()
    } else {
        range.take(take).map(entry).collect()
    })
}
