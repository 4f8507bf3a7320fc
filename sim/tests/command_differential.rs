//! Per-command differential test: random argument lists for every modelled command (valid and
//! invalid: wrong types, wrong arity, bad numbers, unknown flags) run on a private real Redis and
//! on the model; every reply must be equal, errors included, and after every case the full dump
//! of both keyspaces must be equal.
//!
//! Method: proptest draws a sequence of commands (a "case") from one command family; the case
//! runs on both stores from an empty keyspace. Two paths:
//! - through a pass-through script (`redis.pcall(unpack(cmd))` for each command in one EVAL), so
//!   the replies are the ones a transition script sees, script-side errors included;
//! - as plain commands, so the client-side error texts (unknown command, arity) are checked too.
//!
//! The model's clock is set to the time real Redis reported for the case. Three things are not
//! comparable byte for byte and are normalised, each for a stated reason:
//! - PTTL/TTL replies and key expiry times may differ by the few milliseconds between Redis's
//!   script start and the command (and, on the plain path, between commands);
//! - SMEMBERS order is Redis's hash table order (seeded per process): both replies are sorted;
//! - TIME is Redis's clock to the microsecond: only the reply's shape is compared;
//! - `XADD *` IDs come from Redis's wall clock: `*` is only used on the stream `s`, which every
//!   case first seeds with an ID far in the future, so the next ID is the last one plus one on
//!   both stores whatever the clocks say.
//!
//! The proptest configuration is fixed (seeded ChaCha, no persistence) so CI runs the same cases.
//!
//! `ORQ_SHOW=1 cargo test -p orq-sim --test <name> -- --nocapture` prints what each case got.
//!
//! Why this file is long (about 820 lines): the value pools and the command families (one generator
//! per modelled command family) are the test's table of cases; the runner and the comparison are
//! short.

mod common;

use common::{compare_dumps, RealRedis, SharedRedis};
use orq::Resp;
use orq_sim::{ManualClock, MemoryStore, Snapshot};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, RngAlgorithm, RngSeed, TestRunner};
use std::sync::Arc;

/// Cases per command family and path.
const CASES: u32 = 256;
/// Longest command sequence of one case.
const CASE_LEN_MAX: usize = 12;
/// Tolerance for expiry times and PTTL replies inside one script (ms): normally 0 or 1, more
/// only if the machine pauses redis-server in the middle of a script.
const SCRIPT_TTL_SLACK_MS: i64 = 100;
/// Tolerance for expiry times and PTTL replies across plain commands (ms).
const PLAIN_TTL_SLACK_MS: i64 = 1_000;

/// The pass-through script: ARGV holds commands as `<argc> <arg>...` groups; each runs with
/// redis.pcall and its reply (or error table) goes into the result array.
const PASS_THROUGH: &str = r#"
local out = {}
local i = 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local cmd = {}
  for j = 1, n do cmd[j] = ARGV[i + j] end
  out[#out + 1] = redis.pcall(unpack(cmd, 1, n))
  i = i + n + 1
end
return out
"#;

type Cmd = Vec<String>;

fn s(v: &[&str]) -> Cmd {
    v.iter().map(|x| x.to_string()).collect()
}

fn pick(pool: &'static [&'static str]) -> BoxedStrategy<String> {
    select(pool).prop_map(String::from).boxed()
}

// ----- value pools ------------------------------------------------------------------------------

/// Keys of every type; `s` is the stream seeded with a future ID (never deleted or overwritten).
const KEYS: &[&str] = &["a", "b", "h", "z", "l", "t", "x", "s"];
/// Keys a command may delete or overwrite.
const KEYS_W: &[&str] = &["a", "b", "h", "z", "l", "t", "x"];
const VALUES: &[&str] = &[
    "v",
    "1",
    "-7",
    "0.5",
    "",
    "hello world",
    "x\ny",
    "00",
    "9223372036854775807",
];
const FIELDS: &[&str] = &["f", "g", "n", "", "1"];
const MEMBERS: &[&str] = &["a", "b", "c", "m1", "", "10", "2"];
const INTS_GOOD: &[&str] = &["0", "1", "-1", "2", "-2", "3", "10", "-10", "5", "100"];
const INTS_BAD: &[&str] = &[
    "x",
    "",
    "1.5",
    "007",
    "-0",
    "+1",
    " 1",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
];
const INCRS_GOOD: &[&str] = &["1", "-1", "0", "5", "100", "-100"];
const INCRS_BAD: &[&str] = &[
    "x",
    "1.0",
    "9223372036854775807",
    "-9223372036854775808",
    "",
];
const SCORES_GOOD: &[&str] = &[
    "1",
    "-1",
    "0",
    "-0",
    "1.5",
    "0.1",
    "2",
    "3",
    "1e3",
    "-inf",
    "inf",
    "+inf",
    "Infinity",
    "5.",
    ".5",
    "-.5e1",
    "9007199254740993",
    "1e16",
    "123456789.123456789",
    "0x10",
    "3.0",
    "0.5",
];
const SCORES_BAD: &[&str] = &["1e400", "nan", "abc", "", " 1", "1 ", "(1", "1e-400"];
const BOUNDS_GOOD: &[&str] = &[
    "-inf", "+inf", "inf", "(1", "(inf", "(-inf", "1", "2", "2.5", "0", "-1", "(2", "3", "1e400",
    "0x10", " 1", "", "(", "(0.5", "10",
];
const BOUNDS_BAD: &[&str] = &["x", "nan", "(nan", "1x"];

/// A value from `good` four times in five, else from `bad`.
fn mix(good: &'static [&'static str], bad: &'static [&'static str]) -> BoxedStrategy<String> {
    prop_oneof![4 => pick(good), 1 => pick(bad)].boxed()
}

fn ints() -> BoxedStrategy<String> {
    mix(INTS_GOOD, INTS_BAD)
}

/// Relative expiries: long enough that nothing expires between a case and its dump, and never
/// within 1 ms of a TTL rounding boundary.
const PX: &[&str] = &[
    "100000",
    "123456",
    "3600000",
    "0",
    "-5",
    "x",
    "9223372036854775807",
];
const EX: &[&str] = &["100", "3600", "0", "-1", "x", "9223372036854775"];
/// Absolute expiries: far in the past (already expired) or far in the future.
const PXAT: &[&str] = &["1", "1000", "4102444800000", "0", "x"];
const EXAT: &[&str] = &["1", "4102444800", "-1", "x"];
const IDS_GOOD: &[&str] = &[
    "1-1",
    "1-2",
    "2-0",
    "5",
    "5-*",
    "0-1",
    "0-*",
    "3-5",
    "01-1",
    " 3-1",
    "+4-0",
    "6-1",
    "7",
    "9999999999999-*",
    "3-*",
];
const IDS_BAD: &[&str] = &[
    "0-0",
    "-",
    "+",
    "x",
    "1-x",
    "18446744073709551615-18446744073709551615",
    "18446744073709551616-0",
];
const RANGE_IDS: &[&str] = &[
    "-",
    "+",
    "0",
    "1",
    "1-1",
    "(1-1",
    "(5",
    "5-0",
    "(-",
    "(+",
    "x",
    "3",
    "(3-5",
    "18446744073709551615",
    "(18446744073709551615-18446744073709551615",
    "(0-0",
    "9999999999999",
];
const JUNK: &[&str] = &["x", "1", "", "nx", "withscores", "limit", "count"];

// ----- command families -------------------------------------------------------------------------

fn opt_case(word: &'static str) -> BoxedStrategy<String> {
    prop_oneof![
        Just(word.to_string()),
        Just(word.to_uppercase()),
        Just(word[..1].to_uppercase() + &word[1..])
    ]
    .boxed()
}

fn set_option() -> BoxedStrategy<Vec<String>> {
    prop_oneof![
        opt_case("nx").prop_map(|o| vec![o]),
        opt_case("xx").prop_map(|o| vec![o]),
        opt_case("get").prop_map(|o| vec![o]),
        opt_case("keepttl").prop_map(|o| vec![o]),
        (opt_case("px"), pick(PX)).prop_map(|(o, n)| vec![o, n]),
        (opt_case("ex"), pick(EX)).prop_map(|(o, n)| vec![o, n]),
        (opt_case("pxat"), pick(PXAT)).prop_map(|(o, n)| vec![o, n]),
        (opt_case("exat"), pick(EXAT)).prop_map(|(o, n)| vec![o, n]),
        opt_case("px").prop_map(|o| vec![o]),
        pick(JUNK).prop_map(|o| vec![o]),
    ]
    .boxed()
}

fn strings() -> BoxedStrategy<Cmd> {
    prop_oneof![
        pick(KEYS).prop_map(|k| s(&["GET", &k])),
        (
            pick(KEYS_W),
            pick(VALUES),
            prop::collection::vec(set_option(), 0..4)
        )
            .prop_map(|(k, v, opts)| {
                let mut c = s(&["SET", &k, &v]);
                c.extend(opts.into_iter().flatten());
                c
            }),
        prop::collection::vec(pick(KEYS_W), 0..4).prop_map(|ks| {
            let mut c = s(&["DEL"]);
            c.extend(ks);
            c
        }),
        prop::collection::vec(pick(KEYS), 0..4).prop_map(|ks| {
            let mut c = s(&["EXISTS"]);
            c.extend(ks);
            c
        }),
        pick(KEYS).prop_map(|k| s(&["TYPE", &k])),
        pick(KEYS).prop_map(|k| s(&["PTTL", &k])),
        pick(KEYS).prop_map(|k| s(&["TTL", &k])),
        // No client subscribes in these tests, so Redis answers 0 receivers, as the model does.
        prop::collection::vec(pick(VALUES), 0..4).prop_map(|a| {
            let mut c = s(&["PUBLISH"]);
            c.extend(a);
            c
        }),
    ]
    .boxed()
}

fn hashes() -> BoxedStrategy<Cmd> {
    let hkey = || pick(&["h", "h", "h2", "a"]);
    prop_oneof![
        (hkey(), pick(FIELDS)).prop_map(|(k, f)| s(&["HGET", &k, &f])),
        (
            hkey(),
            prop::collection::vec((pick(FIELDS), pick(VALUES)), 0..4),
            prop::bool::weighted(0.1)
        )
            .prop_map(|(k, fvs, odd)| {
                let mut c = s(&["HSET", &k]);
                for (f, v) in fvs {
                    c.push(f);
                    c.push(v);
                }
                if odd {
                    c.push("dangling".into());
                }
                c
            }),
        (hkey(), prop::collection::vec(pick(FIELDS), 0..4)).prop_map(|(k, fs)| {
            let mut c = s(&["HMGET", &k]);
            c.extend(fs);
            c
        }),
        hkey().prop_map(|k| s(&["HGETALL", &k])),
        (hkey(), pick(FIELDS), mix(INCRS_GOOD, INCRS_BAD))
            .prop_map(|(k, f, n)| s(&["HINCRBY", &k, &f, &n])),
        (hkey(), prop::collection::vec(pick(FIELDS), 0..3)).prop_map(|(k, fs)| {
            let mut c = s(&["HDEL", &k]);
            c.extend(fs);
            c
        }),
    ]
    .boxed()
}

fn zsets() -> BoxedStrategy<Cmd> {
    let zkey = || pick(&["z", "z", "z2", "a"]);
    let range_opts = || {
        prop::collection::vec(
            prop_oneof![
                4 => opt_case("withscores").prop_map(|o| vec![o]),
                2 => opt_case("rev").prop_map(|o| vec![o]),
                2 => opt_case("byscore").prop_map(|o| vec![o]),
                3 => (opt_case("limit"), ints(), ints()).prop_map(|(o, a, b)| vec![o, a, b]),
                1 => opt_case("limit").prop_map(|o| vec![o]),
                1 => pick(JUNK).prop_map(|o| vec![o]),
            ],
            0..3,
        )
    };
    prop_oneof![
        3 => (
            zkey(),
            prop::collection::vec(
                prop_oneof![
                    opt_case("nx"), opt_case("xx"), opt_case("gt"), opt_case("lt"),
                    opt_case("ch"), opt_case("incr")
                ],
                0..3
            ),
            prop::collection::vec((mix(SCORES_GOOD, SCORES_BAD), pick(MEMBERS)), 1..4),
            prop::bool::weighted(0.1)
        )
            .prop_map(|(k, flags, pairs, odd)| {
                let mut c = s(&["ZADD", &k]);
                c.extend(flags);
                for (sc, m) in pairs {
                    c.push(sc);
                    c.push(m);
                }
                if odd {
                    c.push("1".into());
                }
                c
            }),
        1 => (zkey(), prop::collection::vec(pick(MEMBERS), 0..3)).prop_map(|(k, ms)| {
            let mut c = s(&["ZREM", &k]);
            c.extend(ms);
            c
        }),
        1 => zkey().prop_map(|k| s(&["ZCARD", &k])),
        1 => (zkey(), pick(MEMBERS)).prop_map(|(k, m)| s(&["ZSCORE", &k, &m])),
        2 => (zkey(), ints(), ints(), range_opts()).prop_map(|(k, a, b, o)| {
            let mut c = s(&["ZRANGE", &k, &a, &b]);
            c.extend(o.into_iter().flatten());
            c
        }),
        2 => (zkey(), mix(BOUNDS_GOOD, BOUNDS_BAD), mix(BOUNDS_GOOD, BOUNDS_BAD), range_opts()).prop_map(|(k, a, b, o)| {
            let mut c = s(&["ZRANGE", &k, &a, &b, "BYSCORE"]);
            c.extend(o.into_iter().flatten());
            c
        }),
        1 => (zkey(), ints(), ints(), range_opts()).prop_map(|(k, a, b, o)| {
            let mut c = s(&["ZREVRANGE", &k, &a, &b]);
            c.extend(o.into_iter().flatten());
            c
        }),
        2 => (zkey(), mix(BOUNDS_GOOD, BOUNDS_BAD), mix(BOUNDS_GOOD, BOUNDS_BAD), range_opts()).prop_map(|(k, a, b, o)| {
            let mut c = s(&["ZRANGEBYSCORE", &k, &a, &b]);
            c.extend(o.into_iter().flatten());
            c
        }),
        1 => (zkey(), prop::collection::vec(ints(), 0..3)).prop_map(|(k, n)| {
            let mut c = s(&["ZPOPMIN", &k]);
            c.extend(n);
            c
        }),
    ]
    .boxed()
}

fn sets() -> BoxedStrategy<Cmd> {
    let skey = || pick(&["t", "t", "t2", "a"]);
    prop_oneof![
        (skey(), prop::collection::vec(pick(MEMBERS), 0..4)).prop_map(|(k, ms)| {
            let mut c = s(&["SADD", &k]);
            c.extend(ms);
            c
        }),
        (skey(), prop::collection::vec(pick(MEMBERS), 0..3)).prop_map(|(k, ms)| {
            let mut c = s(&["SREM", &k]);
            c.extend(ms);
            c
        }),
        skey().prop_map(|k| s(&["SMEMBERS", &k])),
        (skey(), pick(MEMBERS)).prop_map(|(k, m)| s(&["SISMEMBER", &k, &m])),
        skey().prop_map(|k| s(&["SCARD", &k])),
    ]
    .boxed()
}

fn streams() -> BoxedStrategy<Cmd> {
    let xkey = || pick(&["s", "s", "s2", "a"]);
    let id_for = |k: &str, id: String, star: bool| -> String {
        if star && k == "s" {
            "*".to_string()
        } else {
            id
        }
    };
    prop_oneof![
        3 => (
            xkey(),
            prop::option::of(opt_case("nomkstream")),
            prop::option::of((opt_case("maxlen"), prop::option::of(pick(&["="])), ints())),
            mix(IDS_GOOD, IDS_BAD),
            prop::bool::weighted(0.1),
            prop::collection::vec((pick(FIELDS), pick(VALUES)), 1..3),
            prop::bool::weighted(0.1)
        )
            .prop_map(move |(k, nomk, maxlen, id, star, fvs, odd)| {
                let mut c = s(&["XADD", &k]);
                c.extend(nomk);
                if let Some((m, op, n)) = maxlen {
                    c.push(m);
                    c.extend(op);
                    c.push(n);
                }
                c.push(id_for(&k, id, star));
                for (f, v) in fvs {
                    c.push(f);
                    c.push(v);
                }
                if odd {
                    c.push("dangling".into());
                }
                c
            }),
        1 => xkey().prop_map(|k| s(&["XLEN", &k])),
        1 => (xkey(), opt_case("maxlen"), prop::option::of(pick(&["="])), ints())
            .prop_map(|(k, m, op, n)| {
                let mut c = s(&["XTRIM", &k, &m]);
                c.extend(op);
                c.push(n);
                c
            }),
        1 => (
            xkey(),
            opt_case("minid"),
            prop::option::of(pick(&["="])),
            mix(RANGE_IDS, IDS_BAD)
        )
            .prop_map(|(k, m, op, id)| {
                let mut c = s(&["XTRIM", &k, &m]);
                c.extend(op);
                c.push(id);
                c
            }),
        2 => (
            xkey(),
            pick(RANGE_IDS),
            pick(RANGE_IDS),
            prop::option::of((opt_case("count"), mix(&["1", "2", "10", "0"], INTS_BAD))),
            prop::option::weighted(0.1, pick(JUNK)),
            prop::bool::ANY,
        )
            .prop_map(|(k, a, b, count, junk, rev)| {
                let mut c = s(&[if rev { "XREVRANGE" } else { "XRANGE" }, &k, &a, &b]);
                if let Some((o, n)) = count {
                    c.push(o);
                    c.push(n);
                }
                c.extend(junk);
                c
            }),
    ]
    .boxed()
}

fn lists() -> BoxedStrategy<Cmd> {
    let lkey = || pick(&["l", "l", "l2", "a"]);
    prop_oneof![
        (
            pick(&["LPUSH", "RPUSH"]),
            lkey(),
            prop::collection::vec(pick(VALUES), 0..4)
        )
            .prop_map(|(c0, k, vs)| {
                let mut c = s(&[&c0, &k]);
                c.extend(vs);
                c
            }),
        (
            pick(&["LPOP", "RPOP"]),
            lkey(),
            prop::collection::vec(ints(), 0..3)
        )
            .prop_map(|(c0, k, n)| {
                let mut c = s(&[&c0, &k]);
                c.extend(n);
                c
            }),
        (
            lkey(),
            ints(),
            ints(),
            prop::option::weighted(0.1, pick(JUNK))
        )
            .prop_map(|(k, a, b, j)| {
                let mut c = s(&["LRANGE", &k, &a, &b]);
                c.extend(j);
                c
            }),
        lkey().prop_map(|k| s(&["LLEN", &k])),
        (lkey(), ints(), pick(VALUES)).prop_map(|(k, n, v)| s(&["LREM", &k, &n, &v])),
    ]
    .boxed()
}

/// TIME, with and without (wrong) arguments.
fn time() -> BoxedStrategy<Cmd> {
    prop::collection::vec(pick(JUNK), 0..2)
        .prop_map(|rest| {
            let mut c = s(&["TIME"]);
            c.extend(rest);
            c
        })
        .boxed()
}

/// Commands the model does not implement, and broken names.
fn unknown() -> BoxedStrategy<Cmd> {
    (
        pick(&["nope", "HSETX", "zaddd", "G E T"]),
        prop::collection::vec(pick(JUNK), 0..3),
    )
        .prop_map(|(c0, rest)| {
            let mut c = vec![c0];
            c.extend(rest);
            c
        })
        .boxed()
}

/// Occasionally break a command's argument count: drop the last argument or add junk.
fn with_arity_noise(family: BoxedStrategy<Cmd>) -> BoxedStrategy<Cmd> {
    (family, 0u8..12, pick(JUNK))
        .prop_map(|(mut c, roll, junk)| {
            match roll {
                0 if c.len() > 1 => {
                    c.pop();
                }
                1 => c.push(junk),
                _ => {}
            }
            c
        })
        .boxed()
}

fn case(family: BoxedStrategy<Cmd>) -> BoxedStrategy<Vec<Cmd>> {
    prop::collection::vec(with_arity_noise(family), 1..=CASE_LEN_MAX).boxed()
}

// ----- running and comparing --------------------------------------------------------------------

fn bytes(cmd: &Cmd) -> Vec<&[u8]> {
    cmd.iter().map(|a| a.as_bytes()).collect()
}

/// Normalise one reply for comparison (see the module comment).
fn normalise(cmd: &Cmd, r: &Resp) -> Resp {
    let name = cmd[0].to_ascii_uppercase();
    match (name.as_str(), r) {
        // TIME is the server's clock to the microsecond; the model's clock is set to the
        // millisecond Redis reported, so only the shape is compared.
        ("TIME", Resp::Array(items))
            if items.len() == 2 && items.iter().all(|i| i.as_int().is_some()) =>
        {
            Resp::Array(vec![
                Resp::Bulk(b"<secs>".to_vec()),
                Resp::Bulk(b"<micros>".to_vec()),
            ])
        }
        ("SMEMBERS", Resp::Array(items)) => {
            let mut items = items.clone();
            items.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
            Resp::Array(items)
        }
        _ => r.clone(),
    }
}

fn ttl_close(cmd: &Cmd, real: &Resp, model: &Resp, slack_ms: i64) -> bool {
    let name = cmd[0].to_ascii_uppercase();
    let slack = match name.as_str() {
        "PTTL" => slack_ms,
        "TTL" => 1,
        _ => return false,
    };
    matches!((real, model), (Resp::Int(a), Resp::Int(b)) if *a >= 0 && *b >= 0 && (a - b).abs() <= slack)
}

fn compare_replies(
    cmds: &[Cmd],
    real: &[Resp],
    model: &[Resp],
    slack_ms: i64,
) -> Result<(), String> {
    if real.len() != model.len() {
        return Err(format!("reply count {} vs {}", real.len(), model.len()));
    }
    for ((cmd, r), m) in cmds.iter().zip(real).zip(model) {
        let (r, m) = (normalise(cmd, r), normalise(cmd, m));
        if r != m && !ttl_close(cmd, &r, &m, slack_ms) {
            return Err(format!("command {cmd:?}\n  real:  {r:?}\n  model: {m:?}"));
        }
    }
    Ok(())
}

struct Model {
    clock: Arc<ManualClock>,
    store: MemoryStore,
    empty: Snapshot,
}

impl Model {
    fn new() -> Self {
        let clock = Arc::new(ManualClock::from_ms(0));
        let store = MemoryStore::new(clock.clone());
        let empty = store.snapshot();
        Model {
            clock,
            store,
            empty,
        }
    }
}

/// The keyspace every case starts from: one key of each type (so ranges return data and
/// wrong-type errors meet every type), and the stream `s` whose last ID is far in the future.
const PRELUDE: &[&[&str]] = &[
    &["SET", "a", "1"],
    &["HSET", "h", "f", "1", "g", "x", "n", "-5"],
    &[
        "ZADD", "z", "1", "a", "2", "b", "2", "c", "-inf", "m1", "inf", "10", "0.5", "2",
    ],
    &["RPUSH", "l", "a", "b", "c", "d", "e"],
    &["SADD", "t", "a", "b", "c", "1", "2"],
    &["XADD", "s", "9999999999999-0", "f", "v"],
    &["XADD", "s2", "1-1", "f", "v"],
    &["XADD", "s2", "2-0", "g", "x"],
    &["XADD", "s2", "3-5", "f", "v2"],
];

/// Reset both stores to the prelude keyspace; returns the real server's time (ms).
fn reset(real: &mut RealRedis, model: &Model) -> u64 {
    model.store.restore(&model.empty);
    let mut cmds: Vec<Vec<&[u8]>> = vec![vec![b"FLUSHALL"], vec![b"TIME"]];
    cmds.extend(
        PRELUDE
            .iter()
            .map(|c| c.iter().map(|a| a.as_bytes()).collect::<Vec<_>>()),
    );
    let replies = real.pipeline(&cmds);
    let time = replies[1].as_array().expect("TIME");
    let now =
        time[0].as_int().expect("s") as u64 * 1000 + time[1].as_int().expect("us") as u64 / 1000;
    model.clock.set_ms(now);
    for (cmd, r) in cmds[2..].iter().zip(&replies[2..]) {
        assert_eq!(&model.store.command(cmd), r, "prelude {cmd:?}");
    }
    now
}

fn run_scripted(real: &mut RealRedis, model: &Model, cmds: &[Cmd]) -> Result<(), String> {
    reset(real, model);
    let mut argv: Vec<Vec<u8>> = Vec::new();
    for c in cmds {
        argv.push(c.len().to_string().into_bytes());
        argv.extend(c.iter().map(|a| a.as_bytes().to_vec()));
    }
    // Real first, then the model at the time Redis reported just before.
    let now = real.time_ms();
    let r = real.eval(PASS_THROUGH, &[], &argv);
    model.clock.set_ms(now);
    let m = model.store.eval_source(PASS_THROUGH, &[], &argv);
    if std::env::var_os("ORQ_SHOW").is_some() {
        if let Resp::Array(items) = &r {
            for (c, x) in cmds.iter().zip(items) {
                eprintln!("{c:?} => {x:?}");
            }
        }
    }
    match (&r, &m) {
        (Resp::Array(r), Resp::Array(m)) => compare_replies(cmds, r, m, SCRIPT_TTL_SLACK_MS)?,
        _ if r == m => {}
        _ => return Err(format!("script replies\n  real:  {r:?}\n  model: {m:?}")),
    }
    compare_dumps(&real.dump(), &model.store.dump(), SCRIPT_TTL_SLACK_MS)
}

fn run_plain(real: &mut RealRedis, model: &Model, cmds: &[Cmd]) -> Result<(), String> {
    reset(real, model);
    let (mut rs, mut ms) = (Vec::new(), Vec::new());
    for c in cmds {
        rs.push(real.command(&bytes(c)));
        ms.push(model.store.command(&bytes(c)));
    }
    compare_replies(cmds, &rs, &ms, PLAIN_TTL_SLACK_MS)?;
    compare_dumps(&real.dump(), &model.store.dump(), PLAIN_TTL_SLACK_MS)
}

fn config(seed: u64) -> Config {
    Config {
        cases: CASES,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(seed),
        max_shrink_iters: 2_000,
        ..Config::default()
    }
}

/// Run `CASES` cases of `family` on both paths; returns the number of cases run.
fn differential(name: &str, seed: u64, family: fn() -> BoxedStrategy<Cmd>) -> u32 {
    let shared = SharedRedis::acquire();
    let model = Model::new();
    let mut ran = 0;
    for (path, scripted) in [("script", true), ("plain", false)] {
        let mut runner = TestRunner::new(config(seed));
        let result = runner.run(&case(family()), |cmds| {
            shared.with(|real| {
                let outcome = if scripted {
                    run_scripted(real, &model, &cmds)
                } else {
                    run_plain(real, &model, &cmds)
                };
                outcome.map_err(|e| TestCaseError::fail(format!("{path} path: {e}")))
            })
        });
        if let Err(e) = result {
            panic!("{name} ({path} path) differs from Redis: {e}");
        }
        ran += CASES;
    }
    eprintln!("{name}: {ran} differential cases equal");
    ran
}

// Goal: string and keyspace commands (GET, SET with every option, DEL, EXISTS, TYPE, PTTL, TTL)
// and PUBLISH (no client subscribes: 0 receivers) reply and change the keyspace exactly as Redis
// 7.0 does.
#[test]
fn string_and_keyspace_commands_match_redis() {
    differential("strings", 1, strings);
}

// Goal: hash commands match Redis, including HSET's arity rule and HINCRBY's integer errors.
#[test]
fn hash_commands_match_redis() {
    differential("hashes", 2, hashes);
}

// Goal: sorted set commands match Redis: ZADD flags and float parsing, score formatting, every
// ZRANGE form, ZPOPMIN counts.
#[test]
fn sorted_set_commands_match_redis() {
    differential("zsets", 3, zsets);
}

// Goal: set commands match Redis (SMEMBERS compared as a set).
#[test]
fn set_commands_match_redis() {
    differential("sets", 4, sets);
}

// Goal: stream commands match Redis: XADD options and ID rules, exact MAXLEN trimming (XADD and
// XTRIM), XRANGE
// bounds and COUNT.
#[test]
fn stream_commands_match_redis() {
    differential("streams", 5, streams);
}

// Goal: list commands match Redis, including LPOP/RPOP counts and LREM's direction and count.
#[test]
fn list_commands_match_redis() {
    differential("lists", 6, lists);
}

// Goal: every family interleaved on shared keys (so wrong-type errors meet every type), plus
// TIME and unknown commands.
#[test]
fn mixed_commands_and_unknown_commands_match_redis() {
    fn mixed() -> BoxedStrategy<Cmd> {
        prop_oneof![
            strings(),
            hashes(),
            zsets(),
            sets(),
            streams(),
            lists(),
            time(),
            unknown()
        ]
        .boxed()
    }
    differential("mixed", 7, mixed);
}
