//! The store conformance suite: state tables for the transition scripts, run through the same
//! function on `MemoryStore` and on every deployment of real Redis that orq supports: one
//! server, a Redis Cluster (three primaries with a replica each; each command and script call
//! routed by its key's slot, see `common::cluster`), and the primary of a Sentinel deployment
//! (found by asking a sentinel, see `common::sentinel`).
//!
//! Each case seeds keys with plain commands, runs one script, and compares the reply and every key
//! of the store afterwards with the expected table written below. Times are written relative to
//! two instants: `{t}`, the store time read just before seeding, and `{now}`, the time the script
//! reports in its reply (item 1); `{now+5000}` and `{t-1000}` are offsets. On the model both are
//! the manual clock's reading; on real Redis `{now}` is a few ms after `{t}`. Expiry times are
//! shown as `expires={...}` and compared within a few ms. Event stream IDs are not shown (Redis
//! takes them from its wall clock); entries are compared by order and fields.
//!
//! Table syntax, one key per line, keys in byte order:
//! `<key> string <value>`, `<key> hash <field>=<value> ...` (HGETALL order),
//! `<key> zset <member>=<score> ...` (by score), `<key> set <member> ...`,
//! `<key> list <item> ...`, `<key> stream {<field>=<value> ...} ...`. Values with spaces,
//! `=`, braces or nothing at all are quoted like Rust strings.
//!
//! `ORQ_SHOW=1 cargo test -p orq-sim --test <name> -- --nocapture` prints what each case got.
//!
//! Why this file is long (about 1,300 lines): most of it is `CASES`, one table of about 880 lines
//! with an entry per script and state; it reads as one specification of the scripts' contract, so
//! it stays whole beside the roughly 440 lines of harness that run it.

mod common;

use common::cluster::RealCluster;
use common::{args, RealRedis};
use orq::Resp;
use orq_sim::{format_g17, Dump, DumpData, ManualClock, MemoryStore};
use std::sync::Arc;

/// Tolerance for expiry times (ms): Redis adds a TTL to its clock at the SET, a little after the
/// script's TIME (or, for a seeded key, after the time `{t}` was read).
const EXPIRY_SLACK_MS: i64 = 100;

/// A store under test.
trait Subject {
    fn name(&self) -> &'static str;
    /// Empty the keyspace.
    fn reset(&mut self);
    /// The store's current time (ms).
    fn now_ms(&mut self) -> u64;
    fn command(&mut self, args: &[&[u8]]) -> Resp;
    fn call(&mut self, script: &orq_lua::Script, keys: &[String], args: &[Vec<u8>]) -> Resp;
    fn dump(&mut self) -> Dump;
}

struct Model {
    clock: Arc<ManualClock>,
    store: MemoryStore,
}

impl Subject for Model {
    fn name(&self) -> &'static str {
        "MemoryStore"
    }
    fn reset(&mut self) {
        self.clock.set_ms(1_700_000_000_000);
        self.store = MemoryStore::new(self.clock.clone());
    }
    fn now_ms(&mut self) -> u64 {
        self.clock.now_ms()
    }
    fn command(&mut self, args: &[&[u8]]) -> Resp {
        self.store.command(args)
    }
    fn call(&mut self, script: &orq_lua::Script, keys: &[String], args: &[Vec<u8>]) -> Resp {
        self.store.call_sync(script, keys, args)
    }
    fn dump(&mut self) -> Dump {
        self.store.dump()
    }
}

impl Subject for RealRedis {
    fn name(&self) -> &'static str {
        "Redis"
    }
    fn reset(&mut self) {
        self.flushall();
    }
    fn now_ms(&mut self) -> u64 {
        self.time_ms()
    }
    fn command(&mut self, args: &[&[u8]]) -> Resp {
        RealRedis::command(self, args)
    }
    fn call(&mut self, script: &orq_lua::Script, keys: &[String], args: &[Vec<u8>]) -> Resp {
        RealRedis::call(self, script, keys, args)
    }
    fn dump(&mut self) -> Dump {
        RealRedis::dump(self)
    }
}

impl Subject for RealCluster {
    fn name(&self) -> &'static str {
        "Redis Cluster"
    }
    fn reset(&mut self) {
        self.flushall();
    }
    fn now_ms(&mut self) -> u64 {
        self.time_ms()
    }
    fn command(&mut self, args: &[&[u8]]) -> Resp {
        RealCluster::command(self, args)
    }
    fn call(&mut self, script: &orq_lua::Script, keys: &[String], args: &[Vec<u8>]) -> Resp {
        RealCluster::call(self, script, keys, args)
    }
    fn dump(&mut self) -> Dump {
        RealCluster::dump(self)
    }
}

/// One state table.
struct Case {
    /// What the case shows.
    name: &'static str,
    /// Commands run before the script (placeholders allowed).
    seed: &'static [&'static str],
    /// Script name (queue `q`'s key set, or `orq:queues` for `queues`).
    script: &'static str,
    /// ARGV, space separated (placeholders allowed; `''` is an empty argument).
    argv: &'static str,
    /// The expected reply (see [`render_resp`]).
    reply: &'static str,
    /// The expected keyspace after the call, one key per line.
    keys: &'static str,
}

/// Replace `{t}`, `{now}`, `{now_minute}` and `{t+N}` / `{now-N}` placeholders.
fn fill(text: &str, t: u64, now: Option<u64>) -> String {
    let mut out = String::new();
    let mut rest = text;
    // Each placeholder is the innermost `{...}`: the last `{` before the first `}`.
    while let Some(close) = rest.find('}') {
        let Some(open) = rest[..close].rfind('{') else {
            out.push_str(&rest[..=close]);
            rest = &rest[close + 1..];
            continue;
        };
        let inner = &rest[open + 1..close];
        let (base, off) = match inner.find(['+', '-']) {
            Some(p) => (&inner[..p], inner[p..].parse::<i64>().ok()),
            None => (inner, Some(0)),
        };
        let value = match (base, off) {
            ("t", Some(off)) => Some(t as i64 + off),
            ("now", Some(off)) => {
                Some(now.expect("{now} in a case whose reply has no time") as i64 + off)
            }
            // The one-minute window number of `{now}` (a tenant's completion counter).
            ("now_minute", Some(off)) => {
                Some((now.expect("{now_minute} needs a time") / 60_000) as i64 + off)
            }
            _ => None,
        };
        out.push_str(&rest[..open]);
        match value {
            Some(v) => out.push_str(&v.to_string()),
            None => out.push_str(&rest[open..=close]),
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Split a seed command or ARGV line into arguments (`''` is an empty argument; `"..."` quotes).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c == ' ' {
            chars.next();
            continue;
        }
        let mut w = String::new();
        if c == '\'' || c == '"' {
            chars.next();
            for d in chars.by_ref() {
                if d == c {
                    break;
                }
                w.push(d);
            }
        } else {
            while let Some(&d) = chars.peek() {
                if d == ' ' {
                    break;
                }
                w.push(d);
                chars.next();
            }
        }
        out.push(w);
    }
    out
}

fn text(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b).into_owned();
    if s.is_empty() || s.contains([' ', '=', '{', '}', '"', '\n', '\0']) {
        format!("{s:?}")
    } else {
        s
    }
}

/// A reply as text: integers as numbers, bulk strings as text (quoted when needed), `nil`,
/// `+status`, `!error`, arrays in brackets.
fn render_resp(r: &Resp) -> String {
    match r {
        Resp::Nil => "nil".into(),
        Resp::Int(n) => n.to_string(),
        Resp::Bulk(b) => text(b),
        Resp::Status(s) => format!("+{s}"),
        Resp::Error(e) => format!("!{e:?}"),
        Resp::Array(items) => format!(
            "[{}]",
            items.iter().map(render_resp).collect::<Vec<_>>().join(" ")
        ),
    }
}

/// Every key as one line of the table syntax (expiry rendered by the caller).
fn render_key(key: &[u8], data: &DumpData) -> String {
    let k = text(key);
    match data {
        DumpData::String(v) => format!("{k} string {}", text(v)),
        DumpData::Hash(h) => format!(
            "{k} hash {}",
            h.iter()
                .map(|(f, v)| format!("{}={}", text(f), text(v)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        DumpData::ZSet(z) => format!(
            "{k} zset {}",
            z.iter()
                .map(|(m, s)| format!("{}={}", text(m), format_g17(*s)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        DumpData::Set(s) => format!(
            "{k} set {}",
            s.iter().map(|m| text(m)).collect::<Vec<_>>().join(" ")
        ),
        DumpData::List(l) => format!(
            "{k} list {}",
            l.iter().map(|m| text(m)).collect::<Vec<_>>().join(" ")
        ),
        DumpData::Stream { entries, .. } => format!(
            "{k} stream {}",
            entries
                .iter()
                .map(|(_, fields)| format!(
                    "{{{}}}",
                    fields
                        .iter()
                        .map(|(f, v)| format!("{}={}", text(f), text(v)))
                        .collect::<Vec<_>>()
                        .join(" ")
                ))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

/// Run one case on `s` and compare; returns the differences found.
fn check(s: &mut dyn Subject, case: &Case) -> Result<(), String> {
    s.reset();
    let t = s.now_ms();
    for line in case.seed {
        let w = words(&fill(line, t, None));
        let a: Vec<&[u8]> = w.iter().map(|x| x.as_bytes()).collect();
        let r = s.command(&a);
        if let Resp::Error(e) = r {
            return Err(format!("seed {line:?} failed: {e}"));
        }
    }
    let script = orq_lua::script(case.script);
    let keys = if case.script == "queues" && case.argv == "format" {
        vec![
            orq::keys::QUEUES_KEY.to_string(),
            orq::keys::FORMAT_KEY.to_string(),
        ]
    } else if case.script == "queues" {
        vec![orq::keys::QUEUES_KEY.to_string()]
    } else {
        orq::keys::queue_keys("q")
    };
    let argv: Vec<Vec<u8>> = words(&fill(case.argv, t, None))
        .into_iter()
        .map(String::into_bytes)
        .collect();
    let reply = s.call(script, &keys, &argv);
    let now = reply
        .as_array()
        .and_then(|items| items.first())
        .and_then(Resp::as_int)
        .map(|n| n as u64);
    let mut problems = Vec::new();
    let got = render_resp(&reply);
    let want = fill(case.reply, t, now);
    if got != want {
        problems.push(format!("reply\n    want: {want}\n    got:  {got}"));
    }
    let dump = s.dump();
    let mut got_lines = Vec::new();
    for (k, v) in &dump {
        got_lines.push((render_key(k, &v.data), v.expire_at_ms));
    }
    let want_lines: Vec<(String, Option<u64>)> = case
        .keys
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let l = fill(l, t, now);
            match l.rsplit_once(" expires=") {
                Some((body, at)) => (body.to_string(), Some(at.parse().expect("expiry"))),
                None => (l, None),
            }
        })
        .collect();
    let got_keys: Vec<&String> = got_lines.iter().map(|(l, _)| l).collect();
    let want_keys: Vec<&String> = want_lines.iter().map(|(l, _)| l).collect();
    if got_keys != want_keys {
        let missing: Vec<_> = want_keys.iter().filter(|l| !got_keys.contains(l)).collect();
        let extra: Vec<_> = got_keys.iter().filter(|l| !want_keys.contains(l)).collect();
        problems.push(format!(
            "keys\n    missing: {missing:#?}\n    unexpected: {extra:#?}"
        ));
    } else {
        for ((line, got), (_, want)) in got_lines.iter().zip(&want_lines) {
            let ok = match (got, want) {
                (None, None) => true,
                (Some(g), Some(w)) => (*g as i64 - *w as i64).abs() <= EXPIRY_SLACK_MS,
                _ => false,
            };
            if !ok {
                problems.push(format!("expiry of {line}: want {want:?}, got {got:?}"));
            }
        }
    }
    if std::env::var_os("ORQ_SHOW").is_some() {
        eprintln!("== {} ({})\nreply: {got}", case.name, s.name());
        for (l, e) in &got_lines {
            eprintln!(
                "{l}{}",
                e.map(|e| format!(" expires=+{}", e as i64 - now.unwrap_or(t) as i64))
                    .unwrap_or_default()
            );
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} on {}:\n  {}",
            case.name,
            s.name(),
            problems.join("\n  ")
        ))
    }
}

fn run_all(s: &mut dyn Subject) {
    let failures: Vec<String> = CASES.iter().filter_map(|c| check(s, c).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} conformance cases failed:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
}

// Goal: the model passes every state table.
#[test]
fn memory_store_passes_the_conformance_suite() {
    let clock = Arc::new(ManualClock::from_ms(1_700_000_000_000));
    let mut model = Model {
        store: MemoryStore::new(clock.clone()),
        clock,
    };
    run_all(&mut model);
}

// Goal: real Redis passes the same state tables (so they describe Redis, not the model).
#[test]
fn redis_passes_the_conformance_suite() {
    let mut real = RealRedis::start();
    run_all(&mut real);
}

// Goal: a Redis Cluster passes the same state tables: every call's keys are in one slot (the
// queue's hash tag), so each script runs whole on one primary and sees what one server would.
// Method: a cluster of three primaries with one replica each, started once; seeding commands
// and script calls go to the primary of their key's slot, the dump reads every primary.
#[test]
fn redis_cluster_passes_the_conformance_suite() {
    let mut cluster = RealCluster::start(3, 1);
    run_all(&mut cluster);
}

// Goal: under Sentinel, the primary that a sentinel names passes the same state tables.
// Method: a primary, a replica and three sentinels, started once; the primary is found with
// SENTINEL GET-MASTER-ADDR-BY-NAME (not from the fixture), and every case runs on it.
#[test]
fn sentinel_passes_the_conformance_suite() {
    let deployment = orq::testing::RedisSentinel::start();
    let mut primary = common::sentinel::primary(&deployment);
    run_all(&mut primary);
}

// Goal: the table helpers parse and render what the tables use.
#[test]
fn table_helpers_work() {
    assert_eq!(
        fill("a {t} {t-5} {now+10} {x}", 100, Some(200)),
        "a 100 95 210 {x}"
    );
    assert_eq!(fill("{k=v ts={now}} {}", 1, Some(2)), "{k=v ts=2} {}");
    assert_eq!(
        words("HSET k f '' g \"a b\""),
        vec!["HSET", "k", "f", "", "g", "a b"]
    );
    assert_eq!(
        render_resp(&Resp::Array(vec![
            Resp::Int(1),
            Resp::Bulk(b"a b".to_vec()),
            Resp::Nil
        ])),
        "[1 \"a b\" nil]"
    );
    assert_eq!(args(&["x"]), vec![b"x".to_vec()]);
}

/// The state tables.
const CASES: &[Case] = &[
    Case {
        name: "enqueue: a new task with no delay is queued in its tenant's ready set",
        seed: &[],
        script: "enqueue",
        argv: "1 A t1 echo {} 5 ,0,2,1000,2,60000,0,30000,,,86400000,",
        reply: r#"[{now} [1] 1]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="queued A t1 0"}
            "orq:{q}:known_tenants" zset t1=0
            "orq:{q}:ready:5:t1" list A
            "orq:{q}:stats" hash total:enqueued=1 n:queued=1 events={now}-1 capped=0
            "orq:{q}:task:A" hash t=t1 y=echo p="{}" c={now} pr=5 mr=2 bx=60000 bj=0
            "orq:{q}:tenant:t1" hash rp=32
            "orq:{q}:tenants" zset t1=0
        "#,
    },
    Case {
        name: "enqueue: a task with the default settings stores only what differs from them (the compact record)",
        seed: &[],
        script: "enqueue",
        argv: "1 A t1 echo {} 0 ,0,3,1000,2,300000,0.2,30000,,,86400000,",
        reply: r#"[{now} [1] 1]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="queued A t1 0"}
            "orq:{q}:known_tenants" zset t1=0
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:stats" hash total:enqueued=1 n:queued=1 events={now}-1 capped=0
            "orq:{q}:task:A" hash t=t1 y=echo p="{}" c={now}
            "orq:{q}:tenant:t1" hash rp=1
            "orq:{q}:tenants" zset t1=0
        "#,
    },
    Case {
        name: "enqueue: a setting sent as '' is its default, as the client sends a default task",
        seed: &[],
        script: "enqueue",
        argv: "1 A t1 echo {} '' ''",
        reply: r#"[{now} [1] 1]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="queued A t1 0"}
            "orq:{q}:known_tenants" zset t1=0
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:stats" hash total:enqueued=1 n:queued=1 events={now}-1 capped=0
            "orq:{q}:task:A" hash t=t1 y=echo p="{}" c={now}
            "orq:{q}:tenant:t1" hash rp=1
            "orq:{q}:tenants" zset t1=0
        "#,
    },
    Case {
        name: "enqueue: '' settings beside sent ones: only the sent ones that differ are stored",
        seed: &[],
        script: "enqueue",
        argv: "1 A t1 echo {} 2 ,5000,5,,3,,,30000,,,,",
        reply: r#"[{now} [1] 1]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="scheduled A t1 0 run_at {now+5000}"}
            "orq:{q}:known_tenants" zset t1=0
            "orq:{q}:scheduled" zset A={now+5000}
            "orq:{q}:stats" hash total:enqueued=1 n:scheduled=1 events={now}-1 capped=0
            "orq:{q}:task:A" hash t=t1 y=echo p="{}" c={now} r={now+5000} pr=2 mr=5 bm=3 s=scheduled
            "orq:{q}:tenant:t1" hash n:scheduled=1
        "#,
    },
    Case {
        name: "enqueue: an idempotency key needs its TTL ('' is not a default for it)",
        seed: &[],
        script: "enqueue",
        argv: "1 A t1 echo {} '' ,,,,,,,,,k,,",
        reply: r#"!"INVALID idem_ttl_ms must be an integer in [1, 31622400000]""#,
        keys: "",
    },
    Case {
        name: "enqueue: a setting that is not '' is still validated",
        seed: &[],
        script: "enqueue",
        argv: "1 A t1 echo {} '' ,,,,,,1.5,,,,,",
        reply: r#"!"INVALID backoff.jitter must be a number in [0, 1]""#,
        keys: "",
    },
    Case {
        name: "enqueue: an id repeated in the batch, and the id of a stored task, match that task and add nothing",
        seed: &["HSET orq:{q}:task:C s queued t t1 y echo"],
        script: "enqueue",
        argv: "3 A t1 echo {} 0 ,0,3,1000,2,300000,0.2,30000,,,86400000, A t1 echo {} 0 ,0,3,1000,2,300000,0.2,30000,,,86400000, C t1 echo {} 0 ,0,3,1000,2,300000,0.2,30000,,,86400000,",
        reply: r#"[{now} [1 [0 [t t1 y echo p "{}" c {now} id A]] [0 [s queued t t1 y echo id C]]] 1]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="queued A t1 0"}
            "orq:{q}:known_tenants" zset t1=0
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:stats" hash total:enqueued=1 n:queued=1 events={now}-1 capped=0
            "orq:{q}:task:A" hash t=t1 y=echo p="{}" c={now}
            "orq:{q}:task:C" hash s=queued t=t1 y=echo
            "orq:{q}:tenant:t1" hash rp=1
            "orq:{q}:tenants" zset t1=0
        "#,
    },
    Case {
        name: "enqueue: a task with a future run_at is scheduled",
        seed: &["HSET orq:{q}:stats total:enqueued 4"],
        script: "enqueue",
        argv: "1 A t1 echo {} 5 {t+60000},0,0,1000,2,60000,0.5,30000,5000,,86400000,",
        reply: r#"[{now} [1] 0]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="scheduled A t1 0 run_at {t+60000}"}
            "orq:{q}:known_tenants" zset t1=0
            "orq:{q}:scheduled" zset A={t+60000}
            "orq:{q}:stats" hash total:enqueued=5 n:scheduled=1 events={now}-1
            "orq:{q}:task:A" hash t=t1 y=echo p="{}" c={now} r={t+60000} pr=5 mr=0 bx=60000 bj=0.5 to=5000 s=scheduled
            "orq:{q}:tenant:t1" hash n:scheduled=1
        "#,
    },
    Case {
        name: "enqueue: an idempotency key that is live returns the existing task and writes nothing",
        seed: &[
            "HSET orq:{q}:task:A s queued t t1",
            "SET orq:{q}:idem:t1:k A PX 600000",
            "HSET orq:{q}:stats total:enqueued 1",
        ],
        script: "enqueue",
        argv: "1 B t1 echo {} 5 ,0,0,1000,2,60000,0,30000,,k,600000,",
        reply: r#"[{now} [[0 [s queued t t1 id A]]] 0]"#,
        keys: r#"
            "orq:{q}:idem:t1:k" string A expires={t+600000}
            "orq:{q}:stats" hash total:enqueued=1
            "orq:{q}:task:A" hash s=queued t=t1
        "#,
    },
    Case {
        name: "enqueue: an expired idempotency key is gone, so a new task is created",
        seed: &[
            "HSET orq:{q}:task:A s queued t t1",
            "SET orq:{q}:idem:t2:k A PXAT {t-1000}",
        ],
        script: "enqueue",
        argv: "1 B t2 echo {} 0 ,0,0,1000,2,60000,0,30000,,k,600000,",
        reply: r#"[{now} [1] 1]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="queued B t2 0"}
            "orq:{q}:idem:t2:k" string B expires={now+600000}
            "orq:{q}:known_tenants" zset t2=0
            "orq:{q}:ready:0:t2" list B
            "orq:{q}:stats" hash total:enqueued=1 n:queued=1 events={now}-1 capped=0
            "orq:{q}:task:A" hash s=queued t=t1
            "orq:{q}:task:B" hash t=t2 y=echo p="{}" c={now} mr=0 bx=60000 bj=0 i=k
            "orq:{q}:tenant:t2" hash rp=1
            "orq:{q}:tenants" zset t2=0
        "#,
    },
    Case {
        name: "enqueue: an invalid item rejects the whole batch before any write",
        seed: &[],
        script: "enqueue",
        argv: "2 A t1 echo {} 5 ,0,0,1000,2,60000,0,30000,,,1000, B t1 echo {} 10 ,0,0,1000,2,60000,0,30000,,,1000,",
        reply: r#"!"INVALID priority must be an integer in [0, 9]""#,
        keys: "",
    },
    Case {
        name: "enqueue: packed settings must be twelve comma-separated values",
        seed: &[],
        script: "enqueue",
        argv: "1 A t1 echo {} '' ,,,,,,,,,,",
        reply: r#"!"INVALID item 1: settings must be 12 comma-separated values""#,
        keys: "",
    },
    Case {
        name: "enqueue: a trace context after other settings keeps its commas too",
        seed: &[],
        script: "enqueue",
        argv: "1 A t1 echo {} '' ,,5,,,,,,,,,00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01,vendor=1,rojo=2",
        reply: r#"[{now} [1] 1]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="queued A t1 0"}
            "orq:{q}:known_tenants" zset t1=0
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:stats" hash total:enqueued=1 n:queued=1 events={now}-1 capped=0
            "orq:{q}:task:A" hash t=t1 y=echo p="{}" c={now} mr=5 tc="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01,vendor=1,rojo=2"
            "orq:{q}:tenant:t1" hash rp=1
            "orq:{q}:tenants" zset t1=0
        "#,
    },
    Case {
        name: "enqueue: the trace context is the last setting and keeps its commas",
        seed: &[],
        script: "enqueue",
        argv: "1 A t1 echo {} '' ,,,,,,,,,,,00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01,vendor=1,rojo=2",
        reply: r#"[{now} [1] 1]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="queued A t1 0"}
            "orq:{q}:known_tenants" zset t1=0
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:stats" hash total:enqueued=1 n:queued=1 events={now}-1 capped=0
            "orq:{q}:task:A" hash t=t1 y=echo p="{}" c={now} tc="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01,vendor=1,rojo=2"
            "orq:{q}:tenant:t1" hash rp=1
            "orq:{q}:tenants" zset t1=0
        "#,
    },
    Case {
        name: "enqueue: the argument count must match the item count",
        seed: &[],
        script: "enqueue",
        argv: "2 A t1 echo {} 5 ,0,0,1000,2,60000,0,30000,,,1000,",
        reply: r#"!"INVALID expected 13 arguments""#,
        keys: "",
    },
    Case {
        name: "lease: the tenant with the smallest virtual time goes first, its most urgent task is leased",
        seed: &[
            "ZADD orq:{q}:tenants 0 t1 0.5 t2",
            "RPUSH orq:{q}:ready:4:t1 A",
            "RPUSH orq:{q}:ready:9:t1 B",
            "RPUSH orq:{q}:ready:0:t2 C",
            "HSET orq:{q}:task:A s queued t t1 pr 4 l 5000 a 0 e 0",
            "HSET orq:{q}:task:B s queued t t1 pr 9 l 5000 a 0 e 0",
            "HSET orq:{q}:task:C s queued t t2 l 5000 a 0 e 0",
            "HSET orq:{q}:stats n:queued 3",
        ],
        script: "lease",
        argv: "w1 1 ab 0 10 10",
        reply: r#"[{now} [{now+5000} "s\0queued\0t\0t1\0pr\09\0l\05000\0a\00\0e\00\0id\0B" 1 1 nil] {now}]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="leased B t1 1 w w1 epoch 1 wait_ms 0"}
            "orq:{q}:leases" zset B={now+5000}
            "orq:{q}:ready:0:t2" list C
            "orq:{q}:ready:4:t1" list A
            "orq:{q}:stats" hash n:queued=2 n:leased=1 served=1 events={now}-1
            "orq:{q}:task:A" hash s=queued t=t1 pr=4 l=5000 a=0 e=0
            "orq:{q}:task:B" hash s=leased t=t1 pr=9 l=5000 a=1 e=1 k=1-ab w=w1 x={now+5000} u={now}
            "orq:{q}:task:C" hash s=queued t=t2 l=5000 a=0 e=0
            "orq:{q}:tenant:t1" hash rp=16 n:leased=1 served=1
            "orq:{q}:tenants" zset t2=0.5 t1=1
            "orq:{q}:workers" zset w1={now}
        "#,
    },
    Case {
        name: "lease: a record without free text comes back packed with its payload apart; one with a last error as an array",
        seed: &[
            "ZADD orq:{q}:tenants 0 t1",
            "RPUSH orq:{q}:ready:0:t1 A B",
            "HSET orq:{q}:task:A t t1 y echo p [1,2] c {t+100000}",
            "HSET orq:{q}:task:B t t1 y echo p [3] c {t+100000} le boom a 1 e 1",
            "HSET orq:{q}:tenant:t1 rp 1",
            "HSET orq:{q}:stats n:queued 2",
        ],
        script: "lease",
        argv: "w1 2 ab 0 10 10",
        reply: r#"[{now} [{now+30000} "t\0t1\0y\0echo\0p\0\0c\0{t+100000}\0id\0A" 1 1 [1,2] {now+30000} [t t1 y echo p [3] c {t+100000} le boom a 1 e 1 id B] 2 2 nil] -1]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="leased A t1 1 w w1 epoch 1 wait_ms 0 \n leased B t1 2 w w1 epoch 2 wait_ms 0"}
            "orq:{q}:leases" zset A={now+30000} B={now+30000}
            "orq:{q}:stats" hash n:queued=0 n:leased=2 served=2 events={now}-2
            "orq:{q}:task:A" hash t=t1 y=echo p=[1,2] c={t+100000} e=1 a=1 k=1-ab w=w1 x={now+30000} u={now} s=leased
            "orq:{q}:task:B" hash t=t1 y=echo p=[3] c={t+100000} le=boom a=2 e=2 k=2-ab w=w1 x={now+30000} u={now} s=leased
            "orq:{q}:tenant:t1" hash rp=0 n:leased=2 served=2
            "orq:{q}:workers" zset w1={now}
        "#,
    },
    Case {
        name: "lease: an idle lease records its worker, forgets eight silent others but never itself, and answers the next run_at",
        seed: &[
            "ZADD orq:{q}:workers {t-3800000} w1 {t} w0",
            "ZADD orq:{q}:workers {t-3700000} s1 {t-3700000} s2 {t-3700000} s3 {t-3700000} s4 {t-3700000} s5",
            "ZADD orq:{q}:workers {t-3700000} s6 {t-3700000} s7 {t-3700000} s8 {t-3700000} s9",
            "ZADD orq:{q}:scheduled {t+60000} A",
            "HSET orq:{q}:task:A s scheduled t t1 l 5000 a 0 e 0",
        ],
        script: "lease",
        argv: "w1 1 ab 0 10 10",
        reply: r#"[{now} [] {t+60000}]"#,
        keys: r#"
            "orq:{q}:scheduled" zset A={t+60000}
            "orq:{q}:task:A" hash s=scheduled t=t1 l=5000 a=0 e=0
            "orq:{q}:workers" zset s9={t-3700000} w0={t} w1={now}
        "#,
    },
    Case {
        name: "lease: an idle lease answers when a parked tenant's next token is due, not a capped one's",
        seed: &[
            "ZADD orq:{q}:parked {t+1000} t2 9007199254740991 t1",
            "RPUSH orq:{q}:ready:0:t1 A",
            "RPUSH orq:{q}:ready:0:t2 B",
            "HSET orq:{q}:task:A t t1 l 5000 a 0 e 0 c {t}",
            "HSET orq:{q}:task:B t t2 l 5000 a 0 e 0 c {t}",
        ],
        script: "lease",
        argv: "w1 1 ab 0 10 10",
        reply: r#"[{now} [] {t+1000}]"#,
        keys: r#"
            "orq:{q}:parked" zset t2={t+1000} t1=9007199254740991
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:ready:0:t2" list B
            "orq:{q}:task:A" hash t=t1 l=5000 a=0 e=0 c={t}
            "orq:{q}:task:B" hash t=t2 l=5000 a=0 e=0 c={t}
            "orq:{q}:workers" zset w1={now}
        "#,
    },
    Case {
        name: "lease: an idle lease with only capped tenants parked does not know when to ask again",
        seed: &[
            "ZADD orq:{q}:parked 9007199254740991 t1",
            "RPUSH orq:{q}:ready:0:t1 A",
            "HSET orq:{q}:task:A t t1 l 5000 a 0 e 0 c {t}",
        ],
        script: "lease",
        argv: "w1 1 ab 0 10 10",
        reply: r#"[{now} [] -1]"#,
        keys: r#"
            "orq:{q}:parked" zset t1=9007199254740991
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:task:A" hash t=t1 l=5000 a=0 e=0 c={t}
            "orq:{q}:workers" zset w1={now}
        "#,
    },
    Case {
        name: "lease: a tenant at its max_inflight and one out of tokens are parked, the next is leased",
        seed: &[
            "ZADD orq:{q}:tenants 0 t1 0.25 t2 0.5 t3",
            "RPUSH orq:{q}:ready:0:t1 A",
            "RPUSH orq:{q}:ready:0:t2 B",
            "RPUSH orq:{q}:ready:0:t3 C",
            "HSET orq:{q}:task:A s queued t t1 l 5000 a 0 e 0",
            "HSET orq:{q}:task:B s queued t t2 l 5000 a 0 e 0",
            "HSET orq:{q}:task:C s queued t t3 l 5000 a 0 e 0",
            "HSET orq:{q}:stats n:queued 3 vtime 0.5",
            "HSET orq:{q}:tenant:t1 max_inflight 2 n:leased 2",
            "HSET orq:{q}:tenant:t2 rate_per_s 1 burst 1 tokens 0 tokens_at {t}",
        ],
        script: "lease",
        argv: "w1 1 ab 0 10 10",
        reply: r#"[{now} [{now+5000} "s\0queued\0t\0t3\0l\05000\0a\00\0e\00\0id\0C" 1 1 nil] {t+1000}]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="leased C t3 1 w w1 epoch 1 wait_ms 0"}
            "orq:{q}:leases" zset C={now+5000}
            "orq:{q}:parked" zset t2={t+1000} t1=9007199254740991
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:ready:0:t2" list B
            "orq:{q}:stats" hash n:queued=2 vtime=0.5 n:leased=1 served=1 events={now}-1
            "orq:{q}:task:A" hash s=queued t=t1 l=5000 a=0 e=0
            "orq:{q}:task:B" hash s=queued t=t2 l=5000 a=0 e=0
            "orq:{q}:task:C" hash s=leased t=t3 l=5000 a=1 e=1 k=1-ab w=w1 x={now+5000} u={now}
            "orq:{q}:tenant:t1" hash max_inflight=2 n:leased=2
            "orq:{q}:tenant:t2" hash rate_per_s=1 burst=1 tokens=0 tokens_at={t}
            "orq:{q}:tenant:t3" hash rp=0 n:leased=1 served=1
            "orq:{q}:workers" zset w1={now}
        "#,
    },
    Case {
        name: "complete: a lease that ends unparks its tenant parked at max_inflight at the queue's virtual time",
        seed: &[
            "HSET orq:{q}:task:A s leased k 1-ab t t1 a 1 w w1 x {t+5000}",
            "ZADD orq:{q}:leases {t+5000} A",
            "ZADD orq:{q}:parked 9007199254740991 t1",
            "RPUSH orq:{q}:ready:0:t1 B",
            "HSET orq:{q}:task:B s queued t t1",
            "HSET orq:{q}:stats n:leased 1 n:queued 1 vtime 7.5",
            "HSET orq:{q}:tenant:t1 n:leased 1 max_inflight 1",
        ],
        script: "complete",
        argv: "A 1-ab ok 86400000 0",
        reply: r#"[{now} completed]"#,
        keys: r#"
            "orq:{q}:completed" zset A={now}
            "orq:{q}:events" stream {ts={now} k=completed id=A t=t1 a=1 w=w1 run_ms=0}
            "orq:{q}:ready:0:t1" list B
            "orq:{q}:stats" hash n:leased=0 n:queued=1 vtime=7.5 total:completed=1 n:completed=1 events={now}-1
            "orq:{q}:task:A" hash s=completed k=1-ab t=t1 a=1 w=w1 x={t+5000} rs=ok u={now}
            "orq:{q}:task:B" hash s=queued t=t1
            "orq:{q}:tenant:t1" hash n:leased=0 max_inflight=1 c_win={now_minute} c_prev=0 c_cur=1 n:completed=1
            "orq:{q}:tenants" zset t1=7.5
        "#,
    },
    Case {
        name: "lease: a due scheduled task is promoted, then leased",
        seed: &[
            "ZADD orq:{q}:scheduled {t-1000} A",
            "HSET orq:{q}:task:A s scheduled t t1 pr 5 l 1000 a 0 e 0 c {t}",
            "HSET orq:{q}:stats n:scheduled 1 seq 7",
            "HSET orq:{q}:tenant:t1 n:scheduled 1 weight 2",
        ],
        script: "lease",
        argv: "w1 2 0f 0 10 0",
        reply: r#"[{now} [{now+1000} "t\0t1\0pr\05\0l\01000\0a\00\0e\00\0c\0{t}\0u\0{now}\0id\0A" 1 1 nil] -1]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="queued A t1 0 from scheduled \n leased A t1 1 w w1 epoch 1 wait_ms 0"}
            "orq:{q}:leases" zset A={now+1000}
            "orq:{q}:stats" hash n:scheduled=0 seq=7 n:queued=0 n:leased=1 served=1 events={now}-2
            "orq:{q}:task:A" hash t=t1 pr=5 l=1000 a=1 e=1 c={t} u={now} k=1-0f w=w1 x={now+1000} s=leased
            "orq:{q}:tenant:t1" hash n:scheduled=0 weight=2 rp=0 n:leased=1 served=1
            "orq:{q}:workers" zset w1={now}
        "#,
    },
    Case {
        name: "heartbeat: the current token moves the deadline to now + lease_ms",
        seed: &[
            "HSET orq:{q}:task:A s leased k 2-ab l 5000 t t1 w w1 x {t+100}",
            "ZADD orq:{q}:leases {t+100} A",
        ],
        script: "heartbeat",
        argv: "A 2-ab 0",
        reply: r#"[{now} {now+5000}]"#,
        keys: r#"
            "orq:{q}:leases" zset A={now+5000}
            "orq:{q}:task:A" hash s=leased k=2-ab l=5000 t=t1 w=w1 x={now+5000} hb={now}
            "orq:{q}:workers" zset w1={now}
        "#,
    },
    Case {
        name: "heartbeat: a stale token changes nothing",
        seed: &[
            "HSET orq:{q}:task:A s leased k 2-ab l 5000 t t1",
            "ZADD orq:{q}:leases {t+100} A",
        ],
        script: "heartbeat",
        argv: "A 1-ab 0",
        reply: r#"!"STALE lease token superseded""#,
        keys: r#"
            "orq:{q}:leases" zset A={t+100}
            "orq:{q}:task:A" hash s=leased k=2-ab l=5000 t=t1
        "#,
    },
    Case {
        name: "complete: the current token completes the task and trims finished tasks past retention",
        seed: &[
            "HSET orq:{q}:task:A s leased k 2-ab t t1 a 1 w w1 x {t+5000}",
            "ZADD orq:{q}:leases {t+5000} A",
            "HSET orq:{q}:task:X s completed t t1",
            "ZADD orq:{q}:completed {t-100000} X",
            "HSET orq:{q}:stats n:leased 1 n:completed 1",
            "HSET orq:{q}:tenant:t1 n:leased 1 n:completed 1",
        ],
        script: "complete",
        argv: "A 2-ab '{\"ok\":1}' 1000 10",
        reply: r#"[{now} completed]"#,
        keys: r#"
            "orq:{q}:completed" zset A={now}
            "orq:{q}:events" stream {ts={now} k=completed id=A t=t1 a=1 w=w1 run_ms=0}
            "orq:{q}:stats" hash n:leased=0 n:completed=1 total:completed=1 events={now}-1
            "orq:{q}:task:A" hash s=completed k=2-ab t=t1 a=1 w=w1 x={t+5000} rs="{\"ok\":1}" u={now}
            "orq:{q}:tenant:t1" hash n:leased=0 n:completed=1 c_win={now_minute} c_prev=0 c_cur=1
        "#,
    },
    Case {
        name: "complete: a retried call with the same token answers again and changes nothing",
        seed: &[
            "HSET orq:{q}:task:A s completed k 2-ab o completed t t1",
            "ZADD orq:{q}:completed {t-10} A",
        ],
        script: "complete",
        argv: "A 2-ab '' 1000 10",
        reply: r#"[{now} again]"#,
        keys: r#"
            "orq:{q}:completed" zset A={t-10}
            "orq:{q}:task:A" hash s=completed k=2-ab o=completed t=t1
        "#,
    },
    Case {
        name: "complete: a completed record stores no outcome; a retried call with its token still answers again",
        seed: &[
            "HSET orq:{q}:task:A s completed k 2-ab t t1 x {t-100}",
            "ZADD orq:{q}:completed {t-10} A",
        ],
        script: "complete_batch",
        argv: "1000 10 1 A 2-ab ''",
        reply: r#"[{now} [again]]"#,
        keys: r#"
            "orq:{q}:completed" zset A={t-10}
            "orq:{q}:task:A" hash s=completed k=2-ab t=t1 x={t-100}
        "#,
    },
    Case {
        name: "complete_batch with a lease: completes first (unparking the tenant at its cap), then leases as lease would",
        seed: &[
            "HSET orq:{q}:task:A s leased k 2-ab t t1 a 1 w w1",
            "ZADD orq:{q}:leases {t+5000} A",
            "HSET orq:{q}:task:B s queued t t1 l 5000",
            "RPUSH orq:{q}:ready:0:t1 B",
            "ZADD orq:{q}:parked 9007199254740991 t1",
            "HSET orq:{q}:stats n:leased 1 n:queued 1",
            "HSET orq:{q}:tenant:t1 n:leased 1 max_inflight 1",
        ],
        script: "complete_batch",
        argv: "1000 10 1 A 2-ab '' w2 5 cd 0 10 10",
        reply: r#"[{now} [completed] [{now+5000} "s\0queued\0t\0t1\0l\05000\0id\0B" 1 1 nil] -1]"#,
        keys: r#"
            "orq:{q}:completed" zset A={now}
            "orq:{q}:events" stream {ts={now} e="completed A t1 1 w w1 run_ms 0 \n leased B t1 1 w w2 epoch 1 wait_ms 0"}
            "orq:{q}:leases" zset B={now+5000}
            "orq:{q}:stats" hash n:leased=1 n:queued=0 total:completed=1 n:completed=1 served=1 events={now}-2
            "orq:{q}:task:A" hash s=completed k=2-ab t=t1 a=1 w=w1 rs="" u={now}
            "orq:{q}:task:B" hash s=leased t=t1 l=5000 e=1 a=1 k=1-cd w=w2 x={now+5000} u={now}
            "orq:{q}:tenant:t1" hash n:leased=1 max_inflight=1 c_win={now_minute} c_prev=0 c_cur=1 n:completed=1 rp=0 served=1
            "orq:{q}:workers" zset w2={now}
        "#,
    },
    Case {
        name: "complete_batch with a lease: a task promoted by the lease part is counted (queued, then leased)",
        seed: &[
            "HSET orq:{q}:task:A s leased k 2-ab t t1 a 1 w w1",
            "ZADD orq:{q}:leases {t+5000} A",
            "HSET orq:{q}:task:B s scheduled t t1 l 5000 c {t}",
            "ZADD orq:{q}:scheduled {t-10} B",
            "HSET orq:{q}:stats n:leased 1 n:scheduled 1",
            "HSET orq:{q}:tenant:t1 n:leased 1 n:scheduled 1",
        ],
        script: "complete_batch",
        argv: "1000 10 1 A 2-ab '' w2 5 cd 0 10 10",
        reply: r#"[{now} [completed] [{now+5000} "t\0t1\0l\05000\0c\0{t}\0u\0{now}\0id\0B" 1 1 nil] -1]"#,
        keys: r#"
            "orq:{q}:completed" zset A={now}
            "orq:{q}:events" stream {ts={now} e="completed A t1 1 w w1 run_ms 0 \n queued B t1 0 from scheduled \n leased B t1 1 w w2 epoch 1 wait_ms 0"}
            "orq:{q}:leases" zset B={now+5000}
            "orq:{q}:stats" hash n:leased=1 n:scheduled=0 total:completed=1 n:completed=1 n:queued=0 served=1 events={now}-3
            "orq:{q}:task:A" hash s=completed k=2-ab t=t1 a=1 w=w1 rs="" u={now}
            "orq:{q}:task:B" hash t=t1 l=5000 c={t} u={now} e=1 a=1 k=1-cd w=w2 x={now+5000} s=leased
            "orq:{q}:tenant:t1" hash n:leased=1 n:scheduled=0 c_win={now_minute} c_prev=0 c_cur=1 n:completed=1 rp=0 served=1
            "orq:{q}:workers" zset w2={now}
        "#,
    },
    Case {
        name: "complete_batch with a lease: a bad lease argument is refused before anything is written",
        seed: &[
            "HSET orq:{q}:task:A s leased k 2-ab t t1 a 1 w w1",
            "ZADD orq:{q}:leases {t+5000} A",
        ],
        script: "complete_batch",
        argv: "1000 10 1 A 2-ab '' w2 0 cd 0 10 10",
        reply: r#"!"INVALID n must be an integer in [1, 100]""#,
        keys: r#"
            "orq:{q}:leases" zset A={t+5000}
            "orq:{q}:task:A" hash s=leased k=2-ab t=t1 a=1 w=w1
        "#,
    },
    Case {
        name: "complete_batch: arguments that are neither the items alone nor the items and a lease are refused",
        seed: &[
            "HSET orq:{q}:task:A s leased k 2-ab t t1 a 1 w w1",
            "ZADD orq:{q}:leases {t+5000} A",
        ],
        script: "complete_batch",
        argv: "1000 10 1 A 2-ab '' w2 5",
        reply: r#"!"INVALID expected 6 arguments, or 12 with a lease""#,
        keys: r#"
            "orq:{q}:leases" zset A={t+5000}
            "orq:{q}:task:A" hash s=leased k=2-ab t=t1 a=1 w=w1
        "#,
    },
    Case {
        name: "fail: a completed task's token is stale for fail, whatever outcome its record holds",
        seed: &[
            "HSET orq:{q}:task:A s completed k 2-ab t t1 o released",
            "ZADD orq:{q}:completed {t-10} A",
        ],
        script: "fail",
        argv: "A 2-ab boom 1 0.5",
        reply: r#"!"STALE lease ended (completed)""#,
        keys: r#"
            "orq:{q}:completed" zset A={t-10}
            "orq:{q}:task:A" hash s=completed k=2-ab t=t1 o=released
        "#,
    },
    Case {
        name: "complete: a task retrying after a failed lease answers that lease's outcome to its old token",
        seed: &[
            "HSET orq:{q}:task:A s retrying k 2-ab t t1 o failed",
            "ZADD orq:{q}:scheduled {t+1000} A",
        ],
        script: "complete_batch",
        argv: "1000 10 1 A 2-ab ''",
        reply: r#"[{now} ["STALE lease ended (failed)"]]"#,
        keys: r#"
            "orq:{q}:scheduled" zset A={t+1000}
            "orq:{q}:task:A" hash s=retrying k=2-ab t=t1 o=failed
        "#,
    },
    Case {
        name: "fail: a retryable failure with retries left schedules a retry after the backoff",
        seed: &[
            "HSET orq:{q}:task:A s leased k 2-ab t t1 a 1 mr 2 bi 1000 bm 2 bx 60000 bj 0 w w1",
            "ZADD orq:{q}:leases {t+5000} A",
        ],
        script: "fail",
        argv: "A 2-ab boom 1 0.5",
        reply: r#"[{now} retrying {now+1000}]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} k=retrying id=A t=t1 a=1 run_at={now+1000} m=boom}
            "orq:{q}:scheduled" zset A={now+1000}
            "orq:{q}:stats" hash total:failed=1 n:leased=-1 n:retrying=1 events={now}-1
            "orq:{q}:task:A" hash s=retrying k=2-ab t=t1 a=1 mr=2 bi=1000 bm=2 bx=60000 bj=0 w="" hi="1 {now} w1 failed boom" le=boom u={now} o=failed x="" r={now+1000}
            "orq:{q}:tenant:t1" hash n:leased=-1 n:retrying=1
        "#,
    },
    Case {
        name: "fail: a permanent failure goes to the DLQ",
        seed: &[
            "HSET orq:{q}:task:A s leased k 2-ab t t1 a 1 mr 5 w w1",
            "ZADD orq:{q}:leases {t+5000} A",
        ],
        script: "fail",
        argv: "A 2-ab 'bad input' 0 0",
        reply: r#"[{now} dead -1]"#,
        keys: r#"
            "orq:{q}:dead" zset A={now}
            "orq:{q}:events" stream {ts={now} k=dead id=A t=t1 a=1 m="bad input"}
            "orq:{q}:stats" hash total:failed=1 total:dead=1 n:leased=-1 n:dead=1 events={now}-1
            "orq:{q}:task:A" hash s=dead k=2-ab t=t1 a=1 mr=5 w="" hi="1 {now} w1 failed bad input" le="bad input" u={now} o=failed x="" f={now}
            "orq:{q}:tenant:t1" hash n:leased=-1 n:dead=1
        "#,
    },
    Case {
        name: "release: the task goes back to its ready set without spending an attempt",
        seed: &[
            "HSET orq:{q}:task:A s leased k 2-ab t t1 pr 9 a 2 w w1 c {t}",
            "ZADD orq:{q}:leases {t+5000} A",
            "HSET orq:{q}:stats vtime 3.5 seq 10",
        ],
        script: "release",
        argv: "A 2-ab",
        reply: r#"[{now} released]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} k=released id=A t=t1 a=1 w=w1}
            "orq:{q}:ready:9:t1" list A
            "orq:{q}:stats" hash vtime=3.5 seq=10 n:leased=-1 n:queued=1 events={now}-1
            "orq:{q}:task:A" hash k=2-ab t=t1 pr=9 a=1 w="" c={t} o=released x="" u={now}
            "orq:{q}:tenant:t1" hash n:leased=-1
            "orq:{q}:tenants" zset t1=3.5
        "#,
    },
    Case {
        name: "cancel: a queued task leaves its ready set, and its tenant leaves the fair-share set",
        seed: &[
            "HSET orq:{q}:task:A s queued t t1 a 0",
            "RPUSH orq:{q}:ready:0:t1 A",
            "ZADD orq:{q}:tenants 0 t1",
        ],
        script: "cancel",
        argv: "A",
        reply: r#"[{now} cancelled [s cancelled t t1 a 0 f {now} u {now} id A]]"#,
        keys: r#"
            "orq:{q}:cancelled" zset A={now}
            "orq:{q}:events" stream {ts={now} k=cancelled id=A t=t1 a=0 from=queued}
            "orq:{q}:stats" hash n:queued=-1 n:cancelled=1 total:cancelled=1 events={now}-1
            "orq:{q}:task:A" hash s=cancelled t=t1 a=0 f={now} u={now}
            "orq:{q}:tenant:t1" hash rp=0 n:cancelled=1
        "#,
    },
    Case {
        name: "cancel: a queued task leaves the middle of its ready list; its tenant keeps its other ready work",
        seed: &[
            "HSET orq:{q}:task:A s queued t t1",
            "HSET orq:{q}:task:B s queued t t1 pr 3",
            "HSET orq:{q}:task:C s queued t t1 pr 3",
            "HSET orq:{q}:task:D s queued t t1 pr 3",
            "RPUSH orq:{q}:ready:0:t1 A",
            "RPUSH orq:{q}:ready:3:t1 B C D",
            "ZADD orq:{q}:tenants 0 t1",
        ],
        script: "cancel",
        argv: "C",
        reply: r#"[{now} cancelled [s cancelled t t1 pr 3 f {now} u {now} id C]]"#,
        keys: r#"
            "orq:{q}:cancelled" zset C={now}
            "orq:{q}:events" stream {ts={now} k=cancelled id=C t=t1 a=0 from=queued}
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:ready:3:t1" list B D
            "orq:{q}:stats" hash n:queued=-1 n:cancelled=1 total:cancelled=1 events={now}-1
            "orq:{q}:task:A" hash s=queued t=t1
            "orq:{q}:task:B" hash s=queued t=t1 pr=3
            "orq:{q}:task:C" hash s=cancelled t=t1 pr=3 f={now} u={now}
            "orq:{q}:task:D" hash s=queued t=t1 pr=3
            "orq:{q}:tenant:t1" hash rp=9 n:cancelled=1
            "orq:{q}:tenants" zset t1=0
        "#,
    },
    Case {
        name: "enqueue: a batch of two priorities appends each task to the ready list of its priority, in batch order",
        seed: &[],
        script: "enqueue",
        argv: "3 A t1 echo {} 2 '' B t1 echo {} 0 '' C t1 echo {} 2 ''",
        reply: r#"[{now} [1 1 1] 1]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="queued A t1 0 \n queued B t1 0 \n queued C t1 0"}
            "orq:{q}:known_tenants" zset t1=0
            "orq:{q}:ready:0:t1" list B
            "orq:{q}:ready:2:t1" list A C
            "orq:{q}:stats" hash total:enqueued=3 n:queued=3 events={now}-3 capped=0
            "orq:{q}:task:A" hash t=t1 y=echo p="{}" c={now} pr=2
            "orq:{q}:task:B" hash t=t1 y=echo p="{}" c={now}
            "orq:{q}:task:C" hash t=t1 y=echo p="{}" c={now} pr=2
            "orq:{q}:tenant:t1" hash rp=5
            "orq:{q}:tenants" zset t1=0
        "#,
    },
    Case {
        name: "lease: with aging_step_ms, a priority-0 task ready more than 9 steps before a priority-9 task goes first (a task's last change is when it became ready)",
        seed: &[
            "HSET orq:{q}:config aging_step_ms 10",
            "HSET orq:{q}:task:A s queued t t1 c {t+100000}",
            "HSET orq:{q}:task:B s queued t t1 pr 9 c {t+100095}",
            "HSET orq:{q}:task:C s queued t t1 pr 9 c {t-200} u {t+100096}",
            "RPUSH orq:{q}:ready:0:t1 A",
            "RPUSH orq:{q}:ready:9:t1 B C",
            "ZADD orq:{q}:tenants 0 t1",
        ],
        script: "lease",
        argv: "w1 2 ab 0 0 0",
        reply: r#"[{now} [{now+30000} "s\0queued\0t\0t1\0c\0{t+100000}\0id\0A" 1 1 nil {now+30000} "s\0queued\0t\0t1\0pr\09\0c\0{t+100095}\0id\0B" 1 1 nil] {now}]"#,
        keys: r#"
            "orq:{q}:config" hash aging_step_ms=10
            "orq:{q}:events" stream {ts={now} e="leased A t1 1 w w1 epoch 1 wait_ms 0 \n leased B t1 1 w w1 epoch 1 wait_ms 0"}
            "orq:{q}:leases" zset A={now+30000} B={now+30000}
            "orq:{q}:ready:9:t1" list C
            "orq:{q}:stats" hash n:queued=-2 n:leased=2 served=2 events={now}-2
            "orq:{q}:task:A" hash s=leased t=t1 c={t+100000} e=1 a=1 k=1-ab w=w1 x={now+30000} u={now}
            "orq:{q}:task:B" hash s=leased t=t1 pr=9 c={t+100095} e=1 a=1 k=1-ab w=w1 x={now+30000} u={now}
            "orq:{q}:task:C" hash s=queued t=t1 pr=9 c={t-200} u={t+100096}
            "orq:{q}:tenant:t1" hash rp=512 n:leased=2 served=2
            "orq:{q}:tenants" zset t1=2
            "orq:{q}:workers" zset w1={now}
        "#,
    },
    Case {
        name: "cancel: a completed task cannot be cancelled",
        seed: &["HSET orq:{q}:task:A s completed t t1"],
        script: "cancel",
        argv: "A",
        reply: r#"!"CONFLICT task is completed""#,
        keys: r#"
            "orq:{q}:task:A" hash s=completed t=t1
        "#,
    },
    Case {
        name: "replay: a dead task is queued again with a fresh attempt count",
        seed: &[
            "HSET orq:{q}:task:A s dead t t1 pr 5 a 3 y echo le boom c {t}",
            "ZADD orq:{q}:dead {t-5000} A",
        ],
        script: "replay",
        argv: "ids A B",
        reply: r#"[{now} [replayed notfound]]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} k=replayed id=A t=t1 a=0}
            "orq:{q}:ready:5:t1" list A
            "orq:{q}:stats" hash n:dead=-1 n:queued=1 total:replayed=1 events={now}-1
            "orq:{q}:task:A" hash t=t1 pr=5 a=0 y=echo le=boom c={t} rn=1 f="" o=replayed r={now} u={now}
            "orq:{q}:tenant:t1" hash n:dead=-1
            "orq:{q}:tenants" zset t1=0
        "#,
    },
    Case {
        name: "purge: a dead task's hash and DLQ entry are deleted together",
        seed: &[
            "HSET orq:{q}:task:A s dead t t1 a 3",
            "ZADD orq:{q}:dead {t-5000} A",
            "HSET orq:{q}:task:B s queued t t1",
        ],
        script: "purge",
        argv: "A B C",
        reply: r#"[{now} [purged queued notfound]]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} k=purged id=A t=t1 a=3}
            "orq:{q}:stats" hash n:dead=-1 total:purged=1 events={now}-1
            "orq:{q}:task:B" hash s=queued t=t1
            "orq:{q}:tenant:t1" hash n:dead=-1
        "#,
    },
    Case {
        name: "reap: an expired lease counts as a failed attempt",
        seed: &[
            "HSET orq:{q}:task:A s leased k 1-aa t t1 a 1 mr 1 bi 100 bm 2 bx 1000 bj 0 w w1",
            "ZADD orq:{q}:leases {t-1000} A {t+60000} B",
            "HSET orq:{q}:task:B s leased t t1",
        ],
        script: "reap",
        argv: "10 0 86400000 10",
        reply: r#"[{now} 1 0 {t+60000}]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} k=retrying id=A t=t1 a=1 run_at={now+100} m="lease expired"}
            "orq:{q}:leases" zset B={t+60000}
            "orq:{q}:scheduled" zset A={now+100}
            "orq:{q}:stats" hash total:reaped=1 total:failed=1 n:leased=-1 n:retrying=1 events={now}-1
            "orq:{q}:task:A" hash s=retrying k=1-aa t=t1 a=1 mr=1 bi=100 bm=2 bx=1000 bj=0 w="" hi="1 {now} w1 expired lease expired" le="lease expired" u={now} o=expired x="" r={now+100}
            "orq:{q}:task:B" hash s=leased t=t1
            "orq:{q}:tenant:t1" hash n:leased=-1 n:retrying=1
        "#,
    },
    Case {
        name: "lease: a call's events share batch entries; a reaped lease's retry (its message holds a space) is a plain entry between them, in order",
        seed: &[
            "ZADD orq:{q}:scheduled {t-1000} A",
            "HSET orq:{q}:task:A s scheduled t t1 pr 0 a 0 c {t}",
            "ZADD orq:{q}:leases {t-1000} B",
            "HSET orq:{q}:task:B s leased k 1-bb t t1 a 1 mr 1 bi 100 bm 2 bx 1000 bj 0 w w0",
            "HSET orq:{q}:stats n:scheduled 1 n:leased 1",
            "HSET orq:{q}:tenant:t1 n:scheduled 1 n:leased 1",
        ],
        script: "lease",
        argv: "w1 1 0f 0 10 10",
        reply: r#"[{now} [{now+30000} "t\0t1\0pr\00\0a\00\0c\0{t}\0u\0{now}\0id\0A" 1 1 nil] {now+100}]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="queued A t1 0 from scheduled"} {ts={now} k=retrying id=B t=t1 a=1 run_at={now+100} m="lease expired"} {ts={now} e="leased A t1 1 w w1 epoch 1 wait_ms 0"}
            "orq:{q}:leases" zset A={now+30000}
            "orq:{q}:scheduled" zset B={now+100}
            "orq:{q}:stats" hash n:scheduled=0 n:leased=1 n:queued=0 total:reaped=1 total:failed=1 n:retrying=1 served=1 events={now}-3
            "orq:{q}:task:A" hash t=t1 pr=0 a=1 c={t} u={now} e=1 k=1-0f w=w1 x={now+30000} s=leased
            "orq:{q}:task:B" hash s=retrying k=1-bb t=t1 a=1 mr=1 bi=100 bm=2 bx=1000 bj=0 w="" hi="1 {now} w0 expired lease expired" le="lease expired" u={now} o=expired x="" r={now+100}
            "orq:{q}:tenant:t1" hash n:scheduled=0 n:leased=1 n:retrying=1 rp=0 served=1
            "orq:{q}:workers" zset w1={now}
        "#
    },
    Case {
        name: "enqueue: without a record of the last event id (a new or lost stats hash) the numbering goes on from the stream's last id",
        seed: &[
            "XADD orq:{q}:events 1700000000000-3 ts 1700000000000 k paused id '' t '' a 0",
        ],
        script: "enqueue",
        argv: "1 A t1 echo {} '' ''",
        reply: r#"[{now} [1] 1]"#,
        keys: r#"
            "orq:{q}:events" stream {ts=1700000000000 k=paused id="" t="" a=0} {ts={now} e="queued A t1 0"}
            "orq:{q}:known_tenants" zset t1=0
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:stats" hash total:enqueued=1 n:queued=1 events={now}-4 capped=0
            "orq:{q}:task:A" hash t=t1 y=echo p="{}" c={now}
            "orq:{q}:tenant:t1" hash rp=1
            "orq:{q}:tenants" zset t1=0
        "#
    },
    Case {
        name: "enqueue: a stream holding a later id than the stats hash's record (a stale stats hash) is written after it, counted as repaired",
        seed: &[
            "XADD orq:{q}:events 9999999999999-7 ts 1 k paused id '' t '' a 0",
            "HSET orq:{q}:stats events 5-2",
        ],
        script: "enqueue",
        argv: "1 A t1 echo {} '' ''",
        reply: r#"[{now} [1] 0]"#,
        keys: r#"
            "orq:{q}:events" stream {ts=1 k=paused id="" t="" a=0} {ts={now} e="queued A t1 0"}
            "orq:{q}:known_tenants" zset t1=0
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:stats" hash events=10000000000000-8 total:enqueued=1 n:queued=1 total:repaired=1 capped=0
            "orq:{q}:task:A" hash t=t1 y=echo p="{}" c={now}
            "orq:{q}:tenant:t1" hash rp=1
            "orq:{q}:tenants" zset t1=0
        "#,
    },
    Case {
        name: "enqueue: a garbage stats counter is reset to the increment and counted as repaired; the others are added to",
        seed: &["HSET orq:{q}:stats n:queued x total:enqueued 41"],
        script: "enqueue",
        argv: "1 A t1 echo {} '' ''",
        reply: r#"[{now} [1] 0]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="queued A t1 0"}
            "orq:{q}:known_tenants" zset t1=0
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:stats" hash n:queued=1 total:enqueued=42 total:repaired=1 events={now}-1
            "orq:{q}:task:A" hash t=t1 y=echo p="{}" c={now}
            "orq:{q}:tenant:t1" hash rp=1
            "orq:{q}:tenants" zset t1=0
        "#,
    },
    Case {
        name: "enqueue: a stats counter at the edge of Lua's exact integers is added to exactly",
        seed: &["HSET orq:{q}:stats total:enqueued 9007199254740990"],
        script: "enqueue",
        argv: "1 A t1 echo {} '' ''",
        reply: r#"[{now} [1] 0]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="queued A t1 0"}
            "orq:{q}:known_tenants" zset t1=0
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:stats" hash total:enqueued=9007199254740991 n:queued=1 events={now}-1
            "orq:{q}:task:A" hash t=t1 y=echo p="{}" c={now}
            "orq:{q}:tenant:t1" hash rp=1
            "orq:{q}:tenants" zset t1=0
        "#,
    },
    Case {
        name: "enqueue: an id or a tenant with a space or a newline is refused before any write",
        seed: &[],
        script: "enqueue",
        argv: "3 A t1 echo {} '' '' B 't 2' echo {} '' '' C t3 echo {} '' ''",
        reply: r#"!"INVALID item 2: id and tenant must not contain spaces or newlines""#,
        keys: ""
    },
    Case {
        name: "lease: a worker id with a space is refused before any write",
        seed: &["ZADD orq:{q}:scheduled {t-1000} A"],
        script: "lease",
        argv: "'w 1' 1 0f 0 10 10",
        reply: r#"!"INVALID worker id must not contain spaces or newlines""#,
        keys: r#"
            "orq:{q}:scheduled" zset A={t-1000}
        "#
    },
    Case {
        name: "promote: due tasks move to their ready sets, later ones stay",
        seed: &[
            "ZADD orq:{q}:scheduled {t-1000} A {t+60000} B",
            "HSET orq:{q}:task:A s retrying t t1 pr 0 a 1 c {t}",
            "HSET orq:{q}:task:B s scheduled t t1 pr 0 a 0",
        ],
        script: "promote",
        argv: "10",
        reply: r#"[{now} 1 {t+60000}]"#,
        keys: r#"
            "orq:{q}:events" stream {ts={now} e="queued A t1 1 from retrying"}
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:scheduled" zset B={t+60000}
            "orq:{q}:stats" hash n:retrying=-1 n:queued=1 events={now}-1
            "orq:{q}:task:A" hash t=t1 pr=0 a=1 c={t} u={now}
            "orq:{q}:task:B" hash s=scheduled t=t1 pr=0 a=0
            "orq:{q}:tenant:t1" hash n:retrying=-1
            "orq:{q}:tenants" zset t1=0
        "#,
    },
    Case {
        name: "get: a missing task is an empty field list",
        seed: &[],
        script: "get",
        argv: "NOPE",
        reply: r#"[{now} []]"#,
        keys: "",
    },
    Case {
        name: "list: one page of a tenant's queued tasks, with a cursor to continue",
        seed: &[
            "ZADD orq:{q}:known_tenants 0 t1",
            "RPUSH orq:{q}:ready:0:t1 A B",
            "HSET orq:{q}:task:A s queued t t1 y echo",
            "HSET orq:{q}:task:B s queued t t1 y echo",
        ],
        script: "list",
        argv: "queued '' '' '' 1 100",
        reply: r#"[{now} [[s queued t t1 y echo id A]] 1:9:1]"#,
        keys: r#"
            "orq:{q}:known_tenants" zset t1=0
            "orq:{q}:ready:0:t1" list A B
            "orq:{q}:task:A" hash s=queued t=t1 y=echo
            "orq:{q}:task:B" hash s=queued t=t1 y=echo
        "#,
    },
    Case {
        name: "stats: counters, per-tenant hashes and index sizes",
        seed: &[
            "HSET orq:{q}:stats n:queued 1 total:enqueued 2",
            "ZADD orq:{q}:known_tenants 0 t1 0 t2",
            "HSET orq:{q}:tenant:t1 weight 2",
            "RPUSH orq:{q}:ready:0:t1 A",
            "ZADD orq:{q}:scheduled 5 B",
        ],
        script: "stats",
        argv: "1",
        reply: r#"[{now} [n:queued 1 total:enqueued 2] [[t1 [weight 2] 1 -1]] [1 0 0 0 0] 2 [] [-1 0 0]]"#,
        keys: r#"
            "orq:{q}:known_tenants" zset t1=0 t2=0
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:scheduled" zset B=5
            "orq:{q}:stats" hash n:queued=1 total:enqueued=2
            "orq:{q}:tenant:t1" hash weight=2
        "#,
    },
    Case {
        name: "stats: the oldest ready task is the earliest run_at (else created_at) of the list heads of the tenants with ready work",
        seed: &[
            "ZADD orq:{q}:tenants 0 t1 1 t2",
            "RPUSH orq:{q}:ready:0:t1 A",
            "RPUSH orq:{q}:ready:3:t2 B",
            "RPUSH orq:{q}:ready:0:t2 C",
            "RPUSH orq:{q}:ready:0:t3 D",
            "HSET orq:{q}:task:A c 1000 r 5000",
            "HSET orq:{q}:task:B c 3000",
            "HSET orq:{q}:task:C c 4000",
            "HSET orq:{q}:task:D c 1000",
        ],
        script: "stats",
        argv: "0 10",
        reply: r#"[{now} [] [] [0 0 0 0 0] 0 [] [3000 2 2]]"#,
        keys: r#"
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:ready:0:t2" list C
            "orq:{q}:ready:0:t3" list D
            "orq:{q}:ready:3:t2" list B
            "orq:{q}:task:A" hash c=1000 r=5000
            "orq:{q}:task:B" hash c=3000
            "orq:{q}:task:C" hash c=4000
            "orq:{q}:task:D" hash c=1000
            "orq:{q}:tenants" zset t1=0 t2=1
        "#,
    },
    Case {
        name: "stats: the oldest ready task is read among the first tenants only (bounded)",
        seed: &[
            "ZADD orq:{q}:tenants 0 t1 1 t2",
            "RPUSH orq:{q}:ready:0:t1 A",
            "RPUSH orq:{q}:ready:0:t2 B",
            "HSET orq:{q}:task:A c 5000",
            "HSET orq:{q}:task:B c 3000",
        ],
        script: "stats",
        argv: "0 1",
        reply: r#"[{now} [] [] [0 0 0 0 0] 0 [] [5000 1 2]]"#,
        keys: r#"
            "orq:{q}:ready:0:t1" list A
            "orq:{q}:ready:0:t2" list B
            "orq:{q}:task:A" hash c=5000
            "orq:{q}:task:B" hash c=3000
            "orq:{q}:tenants" zset t1=0 t2=1
        "#,
    },
    Case {
        name: "stats: a page of tenants from an offset, by name, with the total",
        seed: &[
            "ZADD orq:{q}:known_tenants 0 a 0 b 0 c 0 d",
            "HSET orq:{q}:tenant:c weight 3",
        ],
        script: "stats",
        argv: "2 0 1",
        reply: r#"[{now} [] [[b [] 0 -1] [c [weight 3] 0 -1]] [0 0 0 0 0] 4 [] [-1 0 0]]"#,
        keys: r#"
            "orq:{q}:known_tenants" zset a=0 b=0 c=0 d=0
            "orq:{q}:tenant:c" hash weight=3
        "#,
    },
    Case {
        name: "stats: one named tenant, or none when the queue does not know it",
        seed: &[
            "ZADD orq:{q}:known_tenants 0 a 0 b",
            "HSET orq:{q}:tenant:b weight 2",
        ],
        script: "stats",
        argv: "1 0 0 b",
        reply: r#"[{now} [] [[b [weight 2] 0 -1]] [0 0 0 0 0] 2 [] [-1 0 0]]"#,
        keys: r#"
            "orq:{q}:known_tenants" zset a=0 b=0
            "orq:{q}:tenant:b" hash weight=2
        "#,
    },
    Case {
        name: "stats: an unknown named tenant reports none",
        seed: &["ZADD orq:{q}:known_tenants 0 a"],
        script: "stats",
        argv: "1 0 0 zz",
        reply: r#"[{now} [] [] [0 0 0 0 0] 1 [] [-1 0 0]]"#,
        keys: r#"
            "orq:{q}:known_tenants" zset a=0
        "#,
    },
    Case {
        name: "queues: add records a queue once, list returns the names sorted",
        seed: &["SADD orq:queues r b"],
        script: "queues",
        argv: "add q",
        reply: r#"[{now} 1]"#,
        keys: r#"
            orq:queues set b q r
        "#,
    },
    Case {
        name: "queues: probe writes and changes nothing",
        seed: &["SADD orq:queues r b"],
        script: "queues",
        argv: "probe",
        reply: r#"[{now} 1]"#,
        keys: r#"
            orq:queues set b r
        "#,
    },
    Case {
        name: "queues: format writes this orq's data format to a fresh store and answers it",
        seed: &[],
        script: "queues",
        argv: "format",
        reply: r#"[{now} 1]"#,
        keys: r#"
            "orq:format:{orq:queues}" string 1
        "#,
    },
    Case {
        name: "queues: format answers the format a store holds and writes nothing, whatever it is",
        seed: &["SET orq:format:{orq:queues} 2", "SADD orq:queues q"],
        script: "queues",
        argv: "format",
        reply: r#"[{now} 2]"#,
        keys: r#"
            "orq:format:{orq:queues}" string 2
            orq:queues set q
        "#,
    },
    Case {
        name: "queues: format refuses a format key of another type",
        seed: &["HSET orq:format:{orq:queues} v 1"],
        script: "queues",
        argv: "format",
        reply: r#"!"CORRUPT orq:format:{orq:queues} holds a hash, not a string""#,
        keys: r#"
            "orq:format:{orq:queues}" hash v=1
        "#,
    },
    Case {
        name: "queues: probe leaves no registry behind when there was none",
        seed: &[],
        script: "queues",
        argv: "probe",
        reply: r#"[{now} 1]"#,
        keys: "",
    },
];
