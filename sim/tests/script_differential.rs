//! Per-script differential test: random sequences of transition calls (enqueue batches, lease,
//! heartbeat, complete, complete_batch, fail, release, cancel, replay, purge, promote, reap, get,
//! list, stats, queues) with random ARGV, valid and invalid, run on a private real Redis and on the model at
//! the same store time. After every step the replies must be equal, and so must a full dump of
//! every key.
//!
//! Method. proptest draws a sequence of abstract operations; values that only exist at run time
//! (task ids, lease tokens, list cursors, run_at times) are chosen by index or by role (current
//! token, stale token, garbage) and resolved when the step runs. Each step runs on real Redis
//! first; its reply carries the store time it used (`now_ms`, item 1 of every transition reply),
//! and the model's manual clock is set to exactly that time before the model runs the same call.
//! Error replies carry no time: the model then runs at the time of a TIME read made just before
//! the step (errors are decided before anything time-dependent). Leases of 1-10 ms, delays and
//! run_at values relative to the last `now_ms`, and short sleeps make the time-dependent paths
//! (promotion, lease expiry and reaping, retention trimming, backoff) run.
//!
//! Normalised in the comparison, with the reason:
//! - Event stream IDs (`orq:{q}:events`): XADD `*` takes the ID from Redis's wall clock at the
//!   moment of the XADD, not from the script's TIME, so IDs are compared by entry order and
//!   fields only.
//! - Key expiry times (idempotency keys): Redis adds the TTL to its clock at the SET, which may be
//!   a millisecond after the script's TIME; expiry times may differ by a few ms. So that the two
//!   stores never disagree on whether such a key is live, the test waits after a step until any
//!   key due to expire within the next second has expired on both.
//!
//! The proptest configuration is fixed (seeded ChaCha, no persistence) so CI runs the same
//! sequences.
//!
//! `ORQ_SHOW=1 cargo test -p orq-sim --test <name> -- --nocapture` prints what each case got.
//!
//! Why this file is long (about 870 lines): the op set (`Op`, with valid and invalid ARGV for every
//! script) and `resolve_op`, which turns each op into a call, are one table of cases in two halves
//! that change together; the runner and the normalisation are short.

mod common;

use common::RealRedis;
use orq::Resp;
use orq_sim::{Dump, DumpData, ManualClock, MemoryStore, Snapshot, StreamId};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, RngAlgorithm, RngSeed, TestRunner};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Compare two dumps after normalising what real Redis decides by itself (see the header).
fn compare_normalised(real: &Dump, model: &Dump) -> Result<(), String> {
    common::compare_dumps(
        &normalise(real.clone()),
        &normalise(model.clone()),
        TTL_SLACK_MS,
    )
}

/// Sequences drawn.
const SEQUENCES: u32 = 64;
/// Steps per sequence (range).
const STEPS_MIN: usize = 10;
const STEPS_MAX: usize = 50;
/// Tolerance for key expiry times between the stores (ms): normally 0 or 1, more only if the
/// machine pauses redis-server in the middle of a script.
const TTL_SLACK_MS: i64 = 100;
/// Keys expiring sooner than this after a step are waited out (ms).
const SHORT_TTL_MS: u64 = 1_000;
/// Longest single sleep a sequence may ask for (ms).
const SLEEP_MAX_MS: u64 = 12;

const QUEUE: &str = "q";

// ----- operations ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum IdChoice {
    New,
    Existing(usize),
    Empty,
}

#[derive(Debug, Clone)]
enum RunAt {
    /// '' (use delay)
    Delay,
    /// last now_ms + offset (may be negative)
    Relative(i64),
    Garbage,
}

#[derive(Debug, Clone)]
struct Item {
    id: IdChoice,
    tenant: String,
    ttype: String,
    payload: String,
    priority: String,
    run_at: RunAt,
    delay: String,
    max_retries: String,
    b_init: String,
    b_mult: String,
    b_max: String,
    b_jitter: String,
    lease_ms: String,
    timeout: String,
    idem: String,
    idem_ttl: String,
}

/// Which task a step names: one that has been leased (by index among those), or any known one.
#[derive(Debug, Clone, Copy)]
enum TaskRef {
    Leased(usize),
    Any(usize),
}

fn task_ref() -> BoxedStrategy<TaskRef> {
    prop_oneof![8 => (0usize..4).prop_map(TaskRef::Leased), 1 => (0usize..50).prop_map(TaskRef::Any)].boxed()
}

#[derive(Debug, Clone, Copy)]
enum Tok {
    Current,
    Stale,
    Garbage,
}

#[derive(Debug, Clone, Copy)]
enum Cursor {
    First,
    Next,
    Garbage,
}

#[derive(Debug, Clone)]
enum Op {
    Enqueue {
        items: Vec<Item>,
        extra_arg: bool,
        count: Option<String>,
    },
    Lease {
        n: String,
        bits: String,
        seed: String,
        promote: String,
        reap: String,
        worker: String,
    },
    Heartbeat {
        task: TaskRef,
        tok: Tok,
        ext: String,
    },
    Complete {
        task: TaskRef,
        tok: Tok,
        result: String,
        retention: String,
        trim: String,
    },
    CompleteBatch {
        items: Vec<(TaskRef, Tok, String)>,
        retention: String,
        trim: String,
        count: Option<String>,
        /// `lease`'s six arguments (worker, n, bits, seed, promote, reap), to lease after.
        lease: Option<[String; 6]>,
    },
    Fail {
        task: TaskRef,
        tok: Tok,
        msg: String,
        retryable: String,
        r: String,
    },
    Release {
        task: TaskRef,
        tok: Tok,
    },
    Cancel {
        task: usize,
    },
    ReplayIds {
        tasks: Vec<usize>,
    },
    ReplayFilter {
        tenant: String,
        ttype: String,
        limit: String,
        scan: String,
    },
    Purge {
        tasks: Vec<usize>,
    },
    Promote {
        bound: String,
    },
    Reap {
        bound: String,
        seed: String,
        retention: String,
        trim: String,
    },
    Get {
        task: usize,
    },
    List {
        status: String,
        tenant: String,
        ttype: String,
        cursor: Cursor,
        limit: String,
        scan: String,
    },
    Stats {
        max: String,
    },
    Queues {
        add: Option<String>,
    },
    Garbage {
        script: String,
        argv: Vec<String>,
    },
    Sleep {
        ms: u64,
    },
}

fn pick(pool: &'static [&'static str]) -> BoxedStrategy<String> {
    select(pool).prop_map(String::from).boxed()
}

/// A value from `good` (the `bad` pool documents what invalid values the argument gets when a
/// step is corrupted; see [`Step`]).
fn mostly(good: &'static [&'static str], _bad: &'static [&'static str]) -> BoxedStrategy<String> {
    pick(good)
}

/// Invalid values one argument of a corrupted step gets.
const CORRUPT: &[&str] = &[
    "x", "", "-1", "1.5", "1e999", "0", "1001", "101", "10", "XYZ", "2",
];

/// One step: an operation, and (rarely) one argument replaced by an invalid value.
#[derive(Debug, Clone)]
struct Step {
    op: Op,
    corrupt: Option<(usize, String)>,
}

fn step() -> BoxedStrategy<Step> {
    (
        op(),
        prop::option::weighted(0.12, (0usize..64, pick(CORRUPT))),
    )
        .prop_map(|(op, corrupt)| Step { op, corrupt })
        .boxed()
}

const BAD: &[&str] = &["x", "", "-1", "1.5", "1e999"];
const TENANTS: &[&str] = &["t1", "t2", "t3"];
const TYPES: &[&str] = &["echo", "fail"];

fn item() -> BoxedStrategy<Item> {
    let id = prop_oneof![
        20 => Just(IdChoice::New),
        2 => (0usize..50).prop_map(IdChoice::Existing),
        1 => Just(IdChoice::Empty),
    ];
    let run_at = prop_oneof![
        12 => Just(RunAt::Delay),
        6 => select(&[-10i64, 0, 2, 8, 30, 100_000][..]).prop_map(RunAt::Relative),
        1 => Just(RunAt::Garbage),
    ];
    (
        (id, pick(TENANTS), pick(TYPES), pick(&["{\"n\":1}", "{}", "a payload that is longer than sixty-four bytes so that Redis would leave its listpack"])),
        (mostly(&["0", "5", "9", "3"], &["10", "x"]), run_at, mostly(&["0", "0", "1", "4", "15", "100000"], BAD)),
        (mostly(&["0", "1", "2", "3"], &["101", "x"]), mostly(&["0", "1", "3", "10"], BAD), mostly(&["1", "2", "1.5"], &["0.5", "x"])),
        (mostly(&["0", "5", "50", "300000"], BAD), mostly(&["0", "0.5", "1"], &["2", "x"]), mostly(&["1", "3", "10", "60000"], &["0", "x"])),
        (mostly(&["", "1000"], &["0", "x"]), prop_oneof![3 => Just(String::new()), 1 => pick(&["k1", "k2"])], mostly(&["1", "2", "600000"], &["0", "x"])),
    )
        .prop_map(|((id, tenant, ttype, payload), (priority, run_at, delay), (max_retries, b_init, b_mult), (b_max, b_jitter, lease_ms), (timeout, idem, idem_ttl))| Item {
            id, tenant, ttype, payload: payload.to_string(), priority, run_at, delay, max_retries,
            b_init, b_mult, b_max, b_jitter, lease_ms, timeout, idem, idem_ttl,
        })
        .boxed()
}

fn tok() -> BoxedStrategy<Tok> {
    prop_oneof![10 => Just(Tok::Current), 2 => Just(Tok::Stale), 1 => Just(Tok::Garbage)].boxed()
}

fn op() -> BoxedStrategy<Op> {
    let task = || 0usize..50;
    prop_oneof![
        6 => (prop::collection::vec(item(), 1..4), prop::bool::weighted(0.03), prop::option::weighted(0.03, pick(&["0", "1001", "x", "2"])))
            .prop_map(|(items, extra_arg, count)| Op::Enqueue { items, extra_arg, count }),
        8 => (mostly(&["1", "2", "3"], &["0", "101", "x"]), mostly(&["ab12", "0f", "deadbeef"], &["XYZ", "", "0123456789abcdef0123456789abcdef0"]),
              mostly(&["0", "0.5", "0.99"], &["1.5", "x"]), mostly(&["0", "10", "100"], &["1001", "x"]), mostly(&["0", "10", "100"], &["-1", "x"]),
              mostly(&["w1", "w2"], &[""]))
            .prop_map(|(n, bits, seed, promote, reap, worker)| Op::Lease { n, bits, seed, promote, reap, worker }),
        3 => (task_ref(), tok(), mostly(&["0", "5", "50", "60000"], &["-1", "x"]))
            .prop_map(|(task, tok, ext)| Op::Heartbeat { task, tok, ext }),
        6 => (task_ref(), tok(), pick(&["", "{\"ok\":true}"]), mostly(&["0", "5", "100000"], &["x", "-1"]), mostly(&["0", "10"], &["1001", "x"]))
            .prop_map(|(task, tok, result, retention, trim)| Op::Complete { task, tok, result, retention, trim }),
        4 => (prop::collection::vec((task_ref(), tok(), pick(&["", "{\"ok\":true}"])), 1..5), mostly(&["0", "100000"], &["x"]), mostly(&["0", "10"], &["1001"]), prop::option::weighted(0.1, pick(&["0", "101", "x", "9"])),
              prop::option::weighted(0.4, (mostly(&["w1", "w2"], &[""]), mostly(&["1", "2", "3"], &["0", "101", "x"]), mostly(&["ab12", "0f"], &["XYZ", ""]),
                  mostly(&["0", "0.5"], &["1.5"]), mostly(&["0", "10"], &["1001"]), mostly(&["0", "10"], &["-1"]))))
            .prop_map(|(items, retention, trim, count, lease)| Op::CompleteBatch { items, retention, trim, count,
                lease: lease.map(|(w, n, b, s, p, r)| [w, n, b, s, p, r]) }),
        4 => (task_ref(), tok(), pick(&["boom", "line1\nline2", ""]), mostly(&["1", "0"], &["2", "x"]), mostly(&["0", "0.3", "0.99"], &["1.5", "x"]))
            .prop_map(|(task, tok, msg, retryable, r)| Op::Fail { task, tok, msg, retryable, r }),
        2 => (task_ref(), tok()).prop_map(|(task, tok)| Op::Release { task, tok }),
        1 => task().prop_map(|task| Op::Cancel { task }),
        1 => prop::collection::vec(task(), 0..3).prop_map(|tasks| Op::ReplayIds { tasks }),
        1 => (pick(&["", "t1"]), pick(&["", "fail"]), mostly(&["1", "10"], &["0", "x"]), mostly(&["1", "5", "100"], &["0", "x"]))
            .prop_map(|(tenant, ttype, limit, scan)| Op::ReplayFilter { tenant, ttype, limit, scan }),
        1 => prop::collection::vec(task(), 0..3).prop_map(|tasks| Op::Purge { tasks }),
        1 => mostly(&["1", "10"], &["0", "x"]).prop_map(|bound| Op::Promote { bound }),
        2 => (mostly(&["1", "10"], &["0", "x"]), mostly(&["0", "0.5"], &["1", "x"]), mostly(&["0", "3", "100000"], &["x"]), mostly(&["0", "10"], &["1001"]))
            .prop_map(|(bound, seed, retention, trim)| Op::Reap { bound, seed, retention, trim }),
        2 => task().prop_map(|task| Op::Get { task }),
        2 => (
            mostly(&["", "queued", "scheduled", "retrying", "leased", "dead", "completed", "cancelled"], &["bogus"]),
            pick(&["", "", "t1", "t2"]),
            pick(&["", "", "echo"]),
            prop_oneof![3 => Just(Cursor::First), 3 => Just(Cursor::Next), 1 => Just(Cursor::Garbage)],
            mostly(&["1", "2", "5", "100"], &["0", "x"]),
            mostly(&["1", "3", "100"], &["0", "x"]),
        )
            .prop_map(|(status, tenant, ttype, cursor, limit, scan)| Op::List { status, tenant, ttype, cursor, limit, scan }),
        1 => mostly(&["0", "2", "10"], &["x", "-1"]).prop_map(|max| Op::Stats { max }),
        1 => prop::option::of(pick(&["q", "r", ""])).prop_map(|add| Op::Queues { add }),
        1 => (select(orq_lua::NAMES).prop_map(String::from), prop::collection::vec(pick(&["x", "", "1", "0", "ids", "filter", "add", "list", "-1"]), 0..6))
            .prop_map(|(script, argv)| Op::Garbage { script, argv }),
        2 => (1u64..=SLEEP_MAX_MS).prop_map(|ms| Op::Sleep { ms }),
    ]
    .boxed()
}

// ----- running --------------------------------------------------------------------------------

/// What the test knows about the run so far (the same for both stores while they agree).
#[derive(Default)]
struct Known {
    ids: Vec<String>,
    next_id: u32,
    tokens: BTreeMap<String, Vec<String>>,
    /// Ids in the order they were leased (latest last).
    leased: Vec<String>,
    cursor: String,
    last_now_ms: u64,
}

impl Known {
    fn task(&self, i: usize) -> String {
        if self.ids.is_empty() {
            "01HNOTASK000000000000000000".into()
        } else {
            self.ids[i % self.ids.len()].clone()
        }
    }

    /// The task a [`TaskRef`] names: leased tasks are the ones with a token, most recent first.
    fn task_by(&self, r: TaskRef) -> String {
        match r {
            TaskRef::Leased(i) if !self.leased.is_empty() => {
                self.leased[self.leased.len() - 1 - i % self.leased.len()].clone()
            }
            TaskRef::Leased(i) | TaskRef::Any(i) => self.task(i),
        }
    }

    fn token(&self, id: &str, tok: Tok) -> String {
        let seen = self.tokens.get(id);
        match tok {
            Tok::Current => seen
                .and_then(|t| t.last())
                .cloned()
                .unwrap_or_else(|| "1-ab12".into()),
            Tok::Stale => seen
                .filter(|t| t.len() > 1)
                .and_then(|t| t.first())
                .cloned()
                .unwrap_or_else(|| "0-0f".into()),
            Tok::Garbage => "x".into(),
        }
    }

    fn new_id(&mut self) -> String {
        self.next_id += 1;
        // ULID-shaped and increasing; the scripts do not parse ids.
        format!("01HZZZZZZZZZZZZZZZZZZZ{:04}", self.next_id)
    }

    /// Learn ids, tokens and cursors from a real reply to a call with `argv`.
    fn learn(&mut self, script: &str, argv: &[Vec<u8>], reply: &Resp) {
        let Some(items) = reply.as_array() else {
            return;
        };
        if let Some(now) = items.first().and_then(Resp::as_int) {
            self.last_now_ms = now as u64;
        }
        // The leased tasks and the token bits: a lease's second item and ARGV[3]; a
        // complete_batch that also leased (four items): its third, and the bits two from the end.
        let text = |i: usize| argv.get(i).map(|b| String::from_utf8_lossy(b).into_owned());
        let leased = match script {
            "lease" => Some((items.get(1), text(2))),
            "complete_batch" if items.len() == 4 => {
                Some((items.get(2), text(argv.len().saturating_sub(4))))
            }
            _ => None,
        };
        if let Some((tasks, bits)) = leased {
            // Each task is expires_at, the record before the lease, epoch, attempt, payload
            // (orq::ops::leased_entries, leased_fields reads the record); its token is
            // "<epoch>-<bits>".
            let tasks = tasks.and_then(Resp::as_array).unwrap_or(&[]);
            for item in orq::ops::leased_entries(tasks).into_iter().flatten() {
                let Some(fields) = orq::ops::leased_fields(item) else {
                    continue;
                };
                let id = fields
                    .chunks(2)
                    .find(|p| p[0].as_str() == Some("id"))
                    .and_then(|p| p[1].as_str())
                    .map(String::from);
                let token = match (item.get(2).and_then(Resp::as_int), &bits) {
                    (Some(epoch), Some(bits)) => Some(format!("{epoch}-{bits}")),
                    _ => None,
                };
                if let (Some(id), Some(token)) = (id, token) {
                    self.tokens.entry(id.clone()).or_default().push(token);
                    self.leased.retain(|x| *x != id);
                    self.leased.push(id);
                }
            }
        }
        if script == "list" {
            if let Some(c) = items.get(2).and_then(Resp::as_str) {
                self.cursor = c.to_string();
            }
        }
    }
}

/// An enqueue item's packed settings (enqueue.lua): '' when all are '', else comma-joined.
fn packed_settings(v: &[String]) -> String {
    if v.iter().all(String::is_empty) {
        String::new()
    } else {
        v.join(",")
    }
}

/// The (script, KEYS, ARGV) of a step, with its corruption applied, or None for a sleep.
fn resolve(
    step: &Step,
    known: &mut Known,
) -> Option<(&'static orq_lua::Script, Vec<String>, Vec<String>)> {
    let (script, keys, mut argv) = resolve_op(&step.op, known)?;
    if let Some((i, bad)) = &step.corrupt {
        if !argv.is_empty() {
            let n = argv.len();
            argv[i % n] = bad.clone();
        }
    }
    Some((script, keys, argv))
}

fn resolve_op(
    op: &Op,
    known: &mut Known,
) -> Option<(&'static orq_lua::Script, Vec<String>, Vec<String>)> {
    let keys = orq::keys::queue_keys(QUEUE);
    let script = orq_lua::script;
    Some(match op {
        Op::Enqueue {
            items,
            extra_arg,
            count,
        } => {
            let mut argv = vec![count.clone().unwrap_or_else(|| items.len().to_string())];
            for it in items {
                let id = match it.id {
                    IdChoice::New => {
                        let id = known.new_id();
                        known.ids.push(id.clone());
                        id
                    }
                    IdChoice::Existing(i) => known.task(i),
                    IdChoice::Empty => String::new(),
                };
                let run_at = match it.run_at {
                    RunAt::Delay => String::new(),
                    RunAt::Relative(off) => (known.last_now_ms as i64 + off).to_string(),
                    RunAt::Garbage => "soon".into(),
                };
                argv.extend([
                    id,
                    it.tenant.clone(),
                    it.ttype.clone(),
                    it.payload.clone(),
                    it.priority.clone(),
                    packed_settings(&[
                        run_at,
                        it.delay.clone(),
                        it.max_retries.clone(),
                        it.b_init.clone(),
                        it.b_mult.clone(),
                        it.b_max.clone(),
                        it.b_jitter.clone(),
                        it.lease_ms.clone(),
                        it.timeout.clone(),
                        it.idem.clone(),
                        it.idem_ttl.clone(),
                    ]),
                ]);
            }
            if *extra_arg {
                argv.push("extra".into());
            }
            (script("enqueue"), keys, argv)
        }
        Op::Lease {
            n,
            bits,
            seed,
            promote,
            reap,
            worker,
        } => (
            script("lease"),
            keys,
            vec![
                worker.clone(),
                n.clone(),
                bits.clone(),
                seed.clone(),
                promote.clone(),
                reap.clone(),
            ],
        ),
        Op::Heartbeat { task, tok, ext } => {
            let id = known.task_by(*task);
            let token = known.token(&id, *tok);
            (script("heartbeat"), keys, vec![id, token, ext.clone()])
        }
        Op::Complete {
            task,
            tok,
            result,
            retention,
            trim,
        } => {
            let id = known.task_by(*task);
            let token = known.token(&id, *tok);
            (
                script("complete"),
                keys,
                vec![id, token, result.clone(), retention.clone(), trim.clone()],
            )
        }
        Op::CompleteBatch {
            items,
            retention,
            trim,
            count,
            lease,
        } => {
            let mut argv = vec![
                retention.clone(),
                trim.clone(),
                count.clone().unwrap_or_else(|| items.len().to_string()),
            ];
            for (task, tok, result) in items {
                let id = known.task_by(*task);
                argv.push(known.token(&id, *tok));
                argv.insert(argv.len() - 1, id);
                argv.push(result.clone());
            }
            argv.extend(lease.iter().flatten().cloned());
            (script("complete_batch"), keys, argv)
        }
        Op::Fail {
            task,
            tok,
            msg,
            retryable,
            r,
        } => {
            let id = known.task_by(*task);
            let token = known.token(&id, *tok);
            (
                script("fail"),
                keys,
                vec![id, token, msg.clone(), retryable.clone(), r.clone()],
            )
        }
        Op::Release { task, tok } => {
            let id = known.task_by(*task);
            let token = known.token(&id, *tok);
            (script("release"), keys, vec![id, token])
        }
        Op::Cancel { task } => (script("cancel"), keys, vec![known.task(*task)]),
        Op::ReplayIds { tasks } => {
            let mut argv = vec!["ids".to_string()];
            argv.extend(tasks.iter().map(|t| known.task(*t)));
            (script("replay"), keys, argv)
        }
        Op::ReplayFilter {
            tenant,
            ttype,
            limit,
            scan,
        } => (
            script("replay"),
            keys,
            vec![
                "filter".into(),
                tenant.clone(),
                ttype.clone(),
                limit.clone(),
                scan.clone(),
            ],
        ),
        Op::Purge { tasks } => (
            script("purge"),
            keys,
            tasks.iter().map(|t| known.task(*t)).collect(),
        ),
        Op::Promote { bound } => (script("promote"), keys, vec![bound.clone()]),
        Op::Reap {
            bound,
            seed,
            retention,
            trim,
        } => (
            script("reap"),
            keys,
            vec![bound.clone(), seed.clone(), retention.clone(), trim.clone()],
        ),
        Op::Get { task } => (script("get"), keys, vec![known.task(*task)]),
        Op::List {
            status,
            tenant,
            ttype,
            cursor,
            limit,
            scan,
        } => {
            let cursor = match cursor {
                Cursor::First => String::new(),
                Cursor::Next => known.cursor.clone(),
                Cursor::Garbage => "9:9".into(),
            };
            (
                script("list"),
                keys,
                vec![
                    status.clone(),
                    tenant.clone(),
                    ttype.clone(),
                    cursor,
                    limit.clone(),
                    scan.clone(),
                ],
            )
        }
        Op::Stats { max } => (script("stats"), keys, vec![max.clone()]),
        Op::Queues { add } => {
            let argv = match add {
                Some(name) => vec!["add".to_string(), name.clone()],
                None => vec!["list".to_string()],
            };
            (
                script("queues"),
                vec![orq::keys::QUEUES_KEY.to_string()],
                argv,
            )
        }
        Op::Garbage { script: name, argv } => {
            let keys = if name == "queues" {
                vec![orq::keys::QUEUES_KEY.to_string()]
            } else {
                keys
            };
            (script(name), keys, argv.clone())
        }
        Op::Sleep { .. } => return None,
    })
}

/// Event stream IDs come from Redis's wall clock: compare entries by order and fields only.
fn normalise(mut d: Dump) -> Dump {
    for v in d.values_mut() {
        if let DumpData::Stream { entries, last_id } = &mut v.data {
            *last_id = StreamId::default();
            for (id, _) in entries.iter_mut() {
                *id = StreamId::default();
            }
        }
    }
    d
}

/// Steps every sequence starts with, so that the random steps find tasks to work on: a batch of
/// four ready tasks over three tenants (short leases, one retry), and a lease of two of them.
fn warm_up() -> Vec<Step> {
    let item = |tenant: &str, priority: &str, lease_ms: &str| Item {
        id: IdChoice::New,
        tenant: tenant.into(),
        ttype: "echo".into(),
        payload: "{}".into(),
        priority: priority.into(),
        run_at: RunAt::Delay,
        delay: "0".into(),
        max_retries: "1".into(),
        b_init: "3".into(),
        b_mult: "2".into(),
        b_max: "50".into(),
        b_jitter: "0.5".into(),
        lease_ms: lease_ms.into(),
        timeout: String::new(),
        idem: String::new(),
        idem_ttl: "600000".into(),
    };
    let enqueue = Op::Enqueue {
        items: vec![
            item("t1", "5", "3"),
            item("t2", "9", "60000"),
            item("t1", "0", "10"),
            item("t3", "5", "1"),
        ],
        extra_arg: false,
        count: None,
    };
    let lease = Op::Lease {
        n: "2".into(),
        bits: "ab12".into(),
        seed: "0.5".into(),
        promote: "10".into(),
        reap: "10".into(),
        worker: "w1".into(),
    };
    [enqueue, lease]
        .into_iter()
        .map(|op| Step { op, corrupt: None })
        .collect()
}

struct Model {
    clock: Arc<ManualClock>,
    store: MemoryStore,
    empty: Snapshot,
}

fn run_sequence(
    real: &mut RealRedis,
    model: &Model,
    ops: &[Step],
    steps: &mut u64,
) -> Result<(), String> {
    real.flushall();
    model.store.restore(&model.empty);
    let mut known = Known {
        last_now_ms: real.time_ms(),
        ..Known::default()
    };
    let warm_up = warm_up();
    for (i, op) in warm_up.iter().chain(ops).enumerate() {
        let before_ms = real.time_ms();
        let Some((script, keys, argv)) = resolve(op, &mut known) else {
            if let Op::Sleep { ms } = op.op {
                std::thread::sleep(Duration::from_millis(ms));
            }
            continue;
        };
        let argv: Vec<Vec<u8>> = argv.into_iter().map(String::into_bytes).collect();
        let r = real.call(script, &keys, &argv);
        let now_ms = match &r {
            Resp::Array(items) => items.first().and_then(Resp::as_int).map(|n| n as u64),
            _ => None,
        };
        model.clock.set_ms(now_ms.unwrap_or(before_ms));
        let m = model.store.call_sync(script, &keys, &argv);
        *steps += 1;
        let context = || {
            let args: Vec<String> = argv
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            format!("step {i}: {} {args:?}", script.name)
        };
        if std::env::var_os("ORQ_SHOW").is_some() {
            let shown = format!("{r:?}");
            eprintln!("{} => {}", context(), &shown[..shown.len().min(300)]);
        }
        if r != m {
            return Err(format!("{}\n  real:  {r:?}\n  model: {m:?}", context()));
        }
        known.learn(script.name, &argv, &r);
        // Wait out keys about to expire, so that both stores agree on whether they are live, then
        // compare the dumps at one time. Redis set each expiry from its own clock, a little after
        // the script's TIME, so its expiry times are read back.
        let now = model.clock.now_ms();
        let short: Vec<(Vec<u8>, u64)> = model
            .store
            .dump()
            .into_iter()
            .filter_map(|(k, v)| v.expire_at_ms.map(|t| (k, t)))
            .filter(|&(_, t)| t < now + SHORT_TTL_MS)
            .collect();
        if !short.is_empty() {
            let mut due = 0;
            for (key, model_due) in &short {
                let real_due = real.command(&[b"PEXPIRETIME", key]).as_int().unwrap_or(-2);
                due = due
                    .max(*model_due)
                    .max(u64::try_from(real_due).unwrap_or(0));
            }
            while real.time_ms() <= due + 1 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let real_dump = real.dump();
        model.clock.set_ms(real.time_ms());
        compare_normalised(&real_dump, &model.store.dump())
            .map_err(|e| format!("{}\n{e}", context()))?;
    }
    Ok(())
}

// Goal: every transition script replies and changes the keyspace exactly as real Redis does, for
// random sequences of valid and invalid calls at the same store times.
#[test]
fn transition_scripts_match_redis_step_by_step() {
    let mut real = RealRedis::start();
    let clock = Arc::new(ManualClock::from_ms(0));
    let store = MemoryStore::new(clock.clone());
    let model = Model {
        clock,
        empty: store.snapshot(),
        store,
    };
    let config = Config {
        cases: SEQUENCES,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(0x0051_7e05),
        max_shrink_iters: 500,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let mut steps = 0u64;
    let real_cell = std::cell::RefCell::new(&mut real);
    let steps_cell = std::cell::RefCell::new(&mut steps);
    let result = runner.run(
        &prop::collection::vec(step(), STEPS_MIN..=STEPS_MAX),
        |ops| {
            let mut real = real_cell.borrow_mut();
            let mut steps = steps_cell.borrow_mut();
            run_sequence(&mut real, &model, &ops, &mut steps).map_err(TestCaseError::fail)
        },
    );
    if let Err(e) = result {
        panic!("the model differs from Redis: {e}");
    }
    eprintln!("{SEQUENCES} sequences, {steps} script calls: replies and dumps equal");
    assert!(
        steps >= u64::from(SEQUENCES) * STEPS_MIN as u64 / 2,
        "too few steps ran"
    );
}
