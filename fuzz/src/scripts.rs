//! The `scripts` target: sequences of transition-script calls against `orq_model::MemoryStore`.
//!
//! Three kinds of step: calls the engine makes (through `orq::Client` and `orq::ops`, so the
//! ARGV are exactly the engine's), raw calls of any script with arbitrary ARGV (and sometimes
//! arbitrary KEYS), and planted corrupt or foreign state (a task hash with garbage fields, an
//! index entry whose hash is gone, a key of the wrong type).
//!
//! Properties, checked after every step:
//! 1. nothing panics (the engine's decoders, the model, this harness);
//! 2. every reply is a normal reply or an error reply whose text starts with one of the
//!    documented codes ([`ALLOWED_CODES`]): a raw Lua runtime error (`ERR user_script...`), a
//!    Redis command error escaping a script (`WRONGTYPE`, `ERR hash value is not an integer`) or
//!    anything else is a bug in the script;
//! 3. until the first planted corruption or call with arbitrary KEYS, the state invariants of the
//!    simulator's checker hold after every step
//!    (`orq_sim::harness::checker::check_store_state`), and no engine call answers
//!    `Error::Protocol` (an unexpected reply).
//!
//! Why this file is long (about 1,200 lines): it holds the target's op set whole: the `Step` type,
//! its byte encoding (`read_step` and `write_step`, which must change with every variant) and the
//! runner that executes each step and checks the properties. Split apart, adding a step would mean
//! editing three files in step.

use crate::codec::{Reader, Writer};
use crate::ready;
use arbitrary::{Arbitrary, Result, Unstructured};
use orq::keys::{queue_keys, QUEUES_KEY};
use orq::ops;
use orq::{
    Backoff, Client, Clock, Entropy, Error, ListQuery, Resp, Status, Store, StoreError, TaskSpec,
    TenantLimits,
};
use orq_lua::Script;
use orq_model::{ManualClock, MemoryStore, Snapshot};
use orq_sim::harness::checker::check_store_state;
use std::fmt;
use std::sync::{Arc, Mutex};

/// The queue every step works on.
pub const QUEUE: &str = "fz";
/// Tenants of the well-formed calls.
pub const TENANTS: [&str; 3] = ["t0", "t1", "t2"];
/// The store's clock at the start of every input (ms since the Unix epoch).
pub const START_MS: u64 = 1_800_000_000_000;
/// Most steps run from one input.
pub const STEPS_MAX: usize = 48;
/// Most raw ARGV or KEYS entries of one raw call.
pub const RAW_ARGS_MAX: usize = 24;
/// Error codes a script may answer with (written once in `orq_lua::codes`).
pub const ALLOWED_CODES: [&str; 7] = orq_lua::codes::ERROR_CODES;

/// Words that reach deep paths of the scripts' argument parsing.
pub const WORDS: [&str; 28] = [
    "ids",
    "filter",
    "queue",
    "tenant",
    "add",
    "list",
    "-",
    "0",
    "1",
    "",
    "queued",
    "scheduled",
    "retrying",
    "leased",
    "dead",
    "completed",
    "cancelled",
    "w1",
    "0.5",
    "1:0:0",
    "nan",
    "inf",
    "-1",
    "1e400",
    "0x10",
    " 1",
    "1.5",
    "9007199254740993",
];

/// One raw ARGV or KEYS value.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// Any bytes.
    Bytes(Vec<u8>),
    /// An integer, in decimal.
    Int(i64),
    /// A float from its bits, printed by Rust (`NaN`, `inf`, `1e300` ...).
    Num(u64),
    /// The id of a task this input created (by index).
    TaskId(u8),
    /// A lease token this input received (by index).
    Token(u8),
    /// A tenant name.
    Tenant(u8),
    /// One of [`WORDS`].
    Word(u8),
}

/// A Redis type to plant where orq expects another.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// `SET key x`.
    String,
    /// `RPUSH key x`.
    List,
    /// `SADD key x`.
    Set,
    /// `ZADD key 1 x`.
    ZSet,
    /// `HSET key x y`.
    Hash,
    /// `XADD key 1-1 x y`.
    Stream,
}

/// Planted corrupt or foreign state.
#[derive(Debug, Clone, PartialEq)]
pub enum Corruption {
    /// Delete a task's hash (its index entries dangle).
    DeleteTask(u8),
    /// Set a task field to garbage: field from [`TASK_FIELDS`], value from [`GARBAGE`].
    TaskField { task: u8, field: u8, value: u8 },
    /// Delete a task field.
    DeleteTaskField { task: u8, field: u8 },
    /// Replace a task's hash with another type.
    TaskType { task: u8, kind: Kind },
    /// Replace a queue key (KEYS[3..=16], not the prefixes) with another type.
    QueueKeyType { key: u8, kind: Kind },
    /// Replace a tenant's ready set (0), tenant hash (1) or an idempotency key (2).
    TenantKeyType { tenant: u8, which: u8, kind: Kind },
    /// Add an index entry (ready set, scheduled, leases, dead, completed, cancelled, tenants,
    /// parked) for a task or a ghost id, with a score from [`SCORES`].
    Dangling { index: u8, member: u8, score: u8 },
    /// Set a field of the stats, config or a tenant hash to garbage.
    QueueField { key: u8, field: u8, value: u8 },
}

/// One step of an input.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Submit 1..=3 tasks in one call.
    Submit {
        tenant: u8,
        priority: u8,
        delay: u8,
        retries: u8,
        lease: u8,
        idem: u8,
        batch: u8,
    },
    /// Lease up to 1..=4 tasks as worker w0..w2.
    Lease { worker: u8, n: u8 },
    /// Heartbeat a lease this input received.
    Heartbeat { lease: u8, extend: u8 },
    /// Complete a lease.
    Complete { lease: u8 },
    /// Complete up to 4 leases in one call (the worker's group commit; repeats allowed).
    CompleteBatch { leases: Vec<u8> },
    /// Complete up to 4 leases and lease up to 1..=4 tasks as worker w0..w2 in the same call.
    CompleteAndLease { leases: Vec<u8>, worker: u8, n: u8 },
    /// Fail a lease.
    Fail { lease: u8, retryable: bool },
    /// Release a lease.
    Release { lease: u8 },
    /// Promote due tasks.
    Promote { bound: u8 },
    /// Reap expired leases and trim finished tasks.
    Reap { bound: u8, retention: u8 },
    /// Cancel a task.
    Cancel { task: u8 },
    /// Replay a task from the DLQ.
    Replay { task: u8 },
    /// Replay by filter.
    ReplayBulk { tenant: u8, limit: u8 },
    /// Purge a task from the DLQ.
    Purge { task: u8 },
    /// Change a tenant's share and limits (each field: keep, clear, or one of two values).
    ConfigureTenant {
        tenant: u8,
        weight: u8,
        max_inflight: u8,
        max_queued: u8,
        rate: u8,
        burst: u8,
    },
    /// Pause / resume / change the starvation bound.
    ConfigureQueue { paused: u8, aging: u8 },
    /// A read: get, list, stats, events, workers or queues.
    Read { what: u8, arg: u8 },
    /// The store's clock moves forward by `ms`.
    Tick { ms: u16 },
    /// The store's clock steps back by `ms` (an NTP step or a failover).
    ClockBack { ms: u16 },
    /// Any script with the engine's KEYS and raw ARGV.
    Raw { script: u8, args: Vec<Arg> },
    /// Any script with raw KEYS and ARGV.
    RawKeys {
        script: u8,
        keys: Vec<Arg>,
        args: Vec<Arg>,
    },
    /// Plant corrupt state.
    Corrupt(Corruption),
}

/// A whole input: the steps, in order.
#[derive(Clone, PartialEq)]
pub struct Input {
    /// At most [`STEPS_MAX`].
    pub steps: Vec<Step>,
}

impl fmt::Debug for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.steps).finish()
    }
}

/// Task fields a corruption may hit: stored names (orq::task::STORED_NAMES; `c` is created_at,
/// without which a record is damaged), and names no orq stores (`leased_at`, `id`, and two
/// long field names), which a record must carry without harm.
pub const TASK_FIELDS: [&str; 19] = [
    "s",
    "t",
    "a",
    "e",
    "pr",
    "mr",
    "l",
    "r",
    "k",
    "bi",
    "bm",
    "u",
    "leased_at",
    "rn",
    "hi",
    "id",
    "c",
    "created_at",
    "status",
];

/// Garbage values for fields.
pub const GARBAGE: [&str; 14] = [
    "x",
    "",
    "-1",
    "1e400",
    "nan",
    "99999999999999999999",
    "queued",
    "leased",
    "dead",
    "bogus",
    "1.5",
    "-inf",
    "9223372036854775807",
    "\n",
];

/// Fields of the queue's stats (0), config (1) and tenant (2) hashes a corruption may hit.
pub const QUEUE_FIELDS: [&[&str]; 3] = [
    &[
        "n:queued",
        "n:leased",
        "seq",
        "vtime",
        "served",
        "total:failed",
        "total:repaired",
    ],
    &["paused", "aging_step_ms"],
    &[
        "weight",
        "max_inflight",
        "max_queued",
        "rate_per_s",
        "burst",
        "tokens",
        "tokens_at",
        "n:leased",
        "n:scheduled",
        "served",
        "c_win",
        "c_cur",
    ],
];

/// Scores of planted index entries.
pub const SCORES: [&str; 5] = ["0", "1800000000000", "-1", "9007199254740991", "1e300"];

fn read_kind(r: &mut Reader) -> Result<Kind> {
    Ok(match r.pick(6)? {
        0 => Kind::String,
        1 => Kind::List,
        2 => Kind::Set,
        3 => Kind::ZSet,
        4 => Kind::Hash,
        _ => Kind::Stream,
    })
}

fn write_kind(w: &mut Writer, k: Kind) {
    w.pick(match k {
        Kind::String => 0,
        Kind::List => 1,
        Kind::Set => 2,
        Kind::ZSet => 3,
        Kind::Hash => 4,
        Kind::Stream => 5,
    });
}

fn read_arg(r: &mut Reader) -> Result<Arg> {
    Ok(match r.pick(7)? {
        0 => Arg::Bytes(r.short()?),
        1 => Arg::Int(r.i64()?),
        2 => Arg::Num(r.i64()? as u64),
        3 => Arg::TaskId(r.byte()?),
        4 => Arg::Token(r.byte()?),
        5 => Arg::Tenant(r.byte()?),
        _ => Arg::Word(r.byte()?),
    })
}

fn write_arg(w: &mut Writer, a: &Arg) {
    match a {
        Arg::Bytes(b) => {
            w.pick(0);
            w.short(b);
        }
        Arg::Int(n) => {
            w.pick(1);
            w.i64(*n);
        }
        Arg::Num(bits) => {
            w.pick(2);
            w.i64(*bits as i64);
        }
        Arg::TaskId(b) => {
            w.pick(3);
            w.byte(*b);
        }
        Arg::Token(b) => {
            w.pick(4);
            w.byte(*b);
        }
        Arg::Tenant(b) => {
            w.pick(5);
            w.byte(*b);
        }
        Arg::Word(b) => {
            w.pick(6);
            w.byte(*b);
        }
    }
}

fn read_args(r: &mut Reader) -> Result<Vec<Arg>> {
    let n = usize::from(r.byte()?) % (RAW_ARGS_MAX + 1);
    (0..n).map(|_| read_arg(r)).collect()
}

fn write_args(w: &mut Writer, args: &[Arg]) {
    assert!(args.len() <= RAW_ARGS_MAX);
    w.byte(args.len() as u8);
    for a in args {
        write_arg(w, a);
    }
}

/// Number of step kinds (the first byte of a step, modulo this). Kinds are only ever added at
/// the end, so the checked-in seeds keep their meaning.
const STEP_KINDS: usize = 22;

fn read_step(r: &mut Reader) -> Result<Step> {
    Ok(match r.pick(STEP_KINDS)? {
        0 => Step::Submit {
            tenant: r.byte()?,
            priority: r.byte()?,
            delay: r.byte()?,
            retries: r.byte()?,
            lease: r.byte()?,
            idem: r.byte()?,
            batch: r.byte()?,
        },
        1 => Step::Lease {
            worker: r.byte()?,
            n: r.byte()?,
        },
        2 => Step::Heartbeat {
            lease: r.byte()?,
            extend: r.byte()?,
        },
        3 => Step::Complete { lease: r.byte()? },
        4 => Step::Fail {
            lease: r.byte()?,
            retryable: r.flag()?,
        },
        5 => Step::Release { lease: r.byte()? },
        6 => Step::Promote { bound: r.byte()? },
        7 => Step::Reap {
            bound: r.byte()?,
            retention: r.byte()?,
        },
        8 => Step::Cancel { task: r.byte()? },
        9 => Step::Replay { task: r.byte()? },
        10 => Step::ReplayBulk {
            tenant: r.byte()?,
            limit: r.byte()?,
        },
        11 => Step::Purge { task: r.byte()? },
        12 => Step::ConfigureTenant {
            tenant: r.byte()?,
            weight: r.byte()?,
            max_inflight: r.byte()?,
            max_queued: r.byte()?,
            rate: r.byte()?,
            burst: r.byte()?,
        },
        13 => Step::ConfigureQueue {
            paused: r.byte()?,
            aging: r.byte()?,
        },
        14 => Step::Read {
            what: r.byte()?,
            arg: r.byte()?,
        },
        15 => Step::Tick { ms: r.u16()? },
        16 => Step::ClockBack { ms: r.u16()? },
        17 => Step::Raw {
            script: r.byte()?,
            args: read_args(r)?,
        },
        18 => Step::RawKeys {
            script: r.byte()?,
            keys: read_args(r)?,
            args: read_args(r)?,
        },
        20 => {
            let n = usize::from(r.byte()?) % 5;
            Step::CompleteBatch {
                leases: (0..n).map(|_| r.byte()).collect::<Result<_>>()?,
            }
        }
        21 => {
            let k = usize::from(r.byte()?) % 5;
            Step::CompleteAndLease {
                leases: (0..k).map(|_| r.byte()).collect::<Result<_>>()?,
                worker: r.byte()?,
                n: r.byte()?,
            }
        }
        _ => Step::Corrupt(match r.pick(8)? {
            0 => Corruption::DeleteTask(r.byte()?),
            1 => Corruption::TaskField {
                task: r.byte()?,
                field: r.byte()?,
                value: r.byte()?,
            },
            2 => Corruption::DeleteTaskField {
                task: r.byte()?,
                field: r.byte()?,
            },
            3 => Corruption::TaskType {
                task: r.byte()?,
                kind: read_kind(r)?,
            },
            4 => Corruption::QueueKeyType {
                key: r.byte()?,
                kind: read_kind(r)?,
            },
            5 => Corruption::TenantKeyType {
                tenant: r.byte()?,
                which: r.byte()?,
                kind: read_kind(r)?,
            },
            6 => Corruption::Dangling {
                index: r.byte()?,
                member: r.byte()?,
                score: r.byte()?,
            },
            _ => Corruption::QueueField {
                key: r.byte()?,
                field: r.byte()?,
                value: r.byte()?,
            },
        }),
    })
}

fn write_step(w: &mut Writer, s: &Step) {
    let bytes = |w: &mut Writer, tag: u8, bs: &[u8]| {
        w.pick(tag);
        for b in bs {
            w.byte(*b);
        }
    };
    match s {
        Step::Submit {
            tenant,
            priority,
            delay,
            retries,
            lease,
            idem,
            batch,
        } => bytes(
            w,
            0,
            &[*tenant, *priority, *delay, *retries, *lease, *idem, *batch],
        ),
        Step::Lease { worker, n } => bytes(w, 1, &[*worker, *n]),
        Step::Heartbeat { lease, extend } => bytes(w, 2, &[*lease, *extend]),
        Step::Complete { lease } => bytes(w, 3, &[*lease]),
        Step::CompleteAndLease { leases, worker, n } => {
            assert!(leases.len() <= 4);
            w.pick(21);
            w.byte(leases.len() as u8);
            for l in leases {
                w.byte(*l);
            }
            w.byte(*worker);
            w.byte(*n);
        }
        Step::CompleteBatch { leases } => {
            assert!(leases.len() <= 4);
            w.pick(20);
            w.byte(leases.len() as u8);
            for l in leases {
                w.byte(*l);
            }
        }
        Step::Fail { lease, retryable } => bytes(w, 4, &[*lease, u8::from(*retryable)]),
        Step::Release { lease } => bytes(w, 5, &[*lease]),
        Step::Promote { bound } => bytes(w, 6, &[*bound]),
        Step::Reap { bound, retention } => bytes(w, 7, &[*bound, *retention]),
        Step::Cancel { task } => bytes(w, 8, &[*task]),
        Step::Replay { task } => bytes(w, 9, &[*task]),
        Step::ReplayBulk { tenant, limit } => bytes(w, 10, &[*tenant, *limit]),
        Step::Purge { task } => bytes(w, 11, &[*task]),
        Step::ConfigureTenant {
            tenant,
            weight,
            max_inflight,
            max_queued,
            rate,
            burst,
        } => bytes(
            w,
            12,
            &[*tenant, *weight, *max_inflight, *max_queued, *rate, *burst],
        ),
        Step::ConfigureQueue { paused, aging } => bytes(w, 13, &[*paused, *aging]),
        Step::Read { what, arg } => bytes(w, 14, &[*what, *arg]),
        Step::Tick { ms } => {
            w.pick(15);
            w.u16(*ms);
        }
        Step::ClockBack { ms } => {
            w.pick(16);
            w.u16(*ms);
        }
        Step::Raw { script, args } => {
            bytes(w, 17, &[*script]);
            write_args(w, args);
        }
        Step::RawKeys { script, keys, args } => {
            bytes(w, 18, &[*script]);
            write_args(w, keys);
            write_args(w, args);
        }
        Step::Corrupt(c) => {
            w.pick(19);
            match c {
                Corruption::DeleteTask(t) => bytes(w, 0, &[*t]),
                Corruption::TaskField { task, field, value } => {
                    bytes(w, 1, &[*task, *field, *value])
                }
                Corruption::DeleteTaskField { task, field } => bytes(w, 2, &[*task, *field]),
                Corruption::TaskType { task, kind } => {
                    bytes(w, 3, &[*task]);
                    write_kind(w, *kind);
                }
                Corruption::QueueKeyType { key, kind } => {
                    bytes(w, 4, &[*key]);
                    write_kind(w, *kind);
                }
                Corruption::TenantKeyType {
                    tenant,
                    which,
                    kind,
                } => {
                    bytes(w, 5, &[*tenant, *which]);
                    write_kind(w, *kind);
                }
                Corruption::Dangling {
                    index,
                    member,
                    score,
                } => bytes(w, 6, &[*index, *member, *score]),
                Corruption::QueueField { key, field, value } => {
                    bytes(w, 7, &[*key, *field, *value])
                }
            }
        }
    }
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let mut r = Reader::new(u);
        let mut steps = Vec::new();
        while !r.is_empty() && steps.len() < STEPS_MAX {
            steps.push(read_step(&mut r)?);
        }
        Ok(Input { steps })
    }
}

impl Input {
    /// The bytes that decode to this input.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        for s in &self.steps {
            write_step(&mut w, s);
        }
        w.out
    }
}

/// The engine's clock, read from the store's manual clock (sleeps end at once: no step waits).
struct FuzzClock(Arc<ManualClock>);

impl Clock for FuzzClock {
    fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }

    fn sleep(&self, _ms: u64) -> futures_sleep::BoxFuture {
        Box::pin(std::future::ready(()))
    }
}

mod futures_sleep {
    /// The future type `orq::Clock::sleep` returns.
    pub type BoxFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
}

/// Property 2 on one reply: every error in it (nested ones included) has an allowed code.
pub fn reply_problem(reply: &Resp) -> Option<String> {
    match reply {
        Resp::Error(text) => {
            let code = text.split(' ').next().unwrap_or_default();
            (!ALLOWED_CODES.contains(&code)).then(|| format!("undocumented error reply: {text:?}"))
        }
        Resp::Array(items) => items.iter().find_map(reply_problem),
        _ => None,
    }
}

/// The store the engine's calls go through: `MemoryStore`, with every reply checked.
struct Watch {
    store: Arc<MemoryStore>,
    problems: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl Store for Watch {
    async fn eval(
        &self,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> std::result::Result<Resp, StoreError> {
        let reply = self.store.call_sync(script, keys, args);
        if let Some(p) = reply_problem(&reply) {
            self.problems
                .lock()
                .unwrap()
                .push(format!("{}: {p}", script.name));
        }
        Ok(reply)
    }
}

/// The running state of one input.
struct Run {
    clock: Arc<ManualClock>,
    store: Arc<MemoryStore>,
    watch: Arc<Watch>,
    client: Client,
    entropy: Entropy,
    keys: Vec<String>,
    /// Ids of the tasks this input submitted.
    ids: Vec<String>,
    /// (task id, token) of every lease this input received.
    leases: Vec<(String, String)>,
    /// Set by the first planted corruption or call with arbitrary KEYS: from then on only
    /// properties 1 and 2 are checked.
    tainted: bool,
    /// Violations of property 3 in the current step.
    problems: Vec<String>,
    submitted: u64,
}

/// A task id that no task has.
const GHOST_ID: &str = "01ARZ3NDEKTSV4RRFFQ69G5FAV";

fn pick<T: Clone>(v: &[T], b: u8) -> Option<T> {
    (!v.is_empty()).then(|| v[usize::from(b) % v.len()].clone())
}

/// One store (and clock) per process, emptied before each input: compiling the scripts again for
/// every input would cost more than running them.
fn fresh_store() -> (Arc<ManualClock>, Arc<MemoryStore>) {
    type Shared = (Arc<ManualClock>, Arc<MemoryStore>, Snapshot);
    static SHARED: std::sync::OnceLock<Shared> = std::sync::OnceLock::new();
    let (clock, store, empty) = SHARED.get_or_init(|| {
        let clock = Arc::new(ManualClock::from_ms(START_MS));
        let store = Arc::new(MemoryStore::new(clock.clone()));
        let empty = store.snapshot();
        (clock, store, empty)
    });
    clock.set_ms(START_MS);
    store.restore(empty);
    (clock.clone(), store.clone())
}

impl Run {
    fn new() -> Run {
        let (clock, store) = fresh_store();
        let watch = Arc::new(Watch {
            store: store.clone(),
            problems: Mutex::new(Vec::new()),
        });
        let client = Client::new(
            watch.clone(),
            Arc::new(FuzzClock(clock.clone())),
            Arc::new(Entropy::from_seed(1)),
        );
        Run {
            clock,
            store,
            watch,
            client,
            entropy: Entropy::from_seed(2),
            keys: queue_keys(QUEUE),
            ids: Vec::new(),
            leases: Vec::new(),
            tainted: false,
            problems: Vec::new(),
            submitted: 0,
        }
    }

    /// Property 3's half about engine calls: no `Protocol` error on healthy state.
    fn engine<T>(&mut self, what: &str, r: orq::Result<T>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e @ Error::Protocol { .. }) if !self.tainted => {
                self.problems.push(format!("{what}: {e}"));
                None
            }
            Err(_) => None,
        }
    }

    fn task(&self, b: u8) -> String {
        pick(&self.ids, b).unwrap_or_else(|| GHOST_ID.to_string())
    }

    /// Successes of up to four of the leases this input received (repeats allowed).
    fn completions(&self, leases: &[u8]) -> Vec<ops::Completion> {
        leases
            .iter()
            .take(4)
            .map(|b| {
                let (id, token) = self.lease(*b);
                ops::Completion {
                    id,
                    token,
                    result: "{}".into(),
                }
            })
            .collect()
    }

    fn lease(&self, b: u8) -> (String, String) {
        pick(&self.leases, b).unwrap_or_else(|| (GHOST_ID.to_string(), "1-00".to_string()))
    }

    fn arg_bytes(&self, a: &Arg) -> Vec<u8> {
        match a {
            Arg::Bytes(b) => b.clone(),
            Arg::Int(n) => n.to_string().into_bytes(),
            Arg::Num(bits) => f64::from_bits(*bits).to_string().into_bytes(),
            Arg::TaskId(b) => self.task(*b).into_bytes(),
            Arg::Token(b) => self.lease(*b).1.into_bytes(),
            Arg::Tenant(b) => TENANTS[usize::from(*b) % TENANTS.len()].as_bytes().to_vec(),
            Arg::Word(b) => WORDS[usize::from(*b) % WORDS.len()].as_bytes().to_vec(),
        }
    }

    /// A raw KEYS entry: a queue key of this or another queue (by index), or the bytes given.
    fn key_of(&self, a: &Arg) -> String {
        match a {
            Arg::Int(n) => self.keys[(n.unsigned_abs() % 16) as usize].clone(),
            Arg::TaskId(b) => queue_keys("other")[usize::from(*b) % 16].clone(),
            other => String::from_utf8_lossy(&self.arg_bytes(other)).into_owned(),
        }
    }

    fn raw(&mut self, script: u8, keys: Option<&[Arg]>, args: &[Arg]) {
        let name = orq_lua::NAMES[usize::from(script) % orq_lua::NAMES.len()];
        let keys: Vec<String> = match keys {
            Some(k) => k.iter().map(|a| self.key_of(a)).collect(),
            None if name == "queues" => vec![QUEUES_KEY.to_string()],
            None => self.keys.clone(),
        };
        let argv: Vec<Vec<u8>> = args.iter().map(|a| self.arg_bytes(a)).collect();
        let reply = self.store.call_sync(orq_lua::script(name), &keys, &argv);
        if let Some(p) = reply_problem(&reply) {
            self.watch
                .problems
                .lock()
                .unwrap()
                .push(format!("{name}: {p}"));
        }
    }

    fn cmd(&self, args: &[&[u8]]) {
        self.store.command(args);
    }

    /// Replace `key` by a value of `kind`.
    fn plant(&self, key: &str, kind: Kind) {
        let k = key.as_bytes();
        self.cmd(&[b"DEL", k]);
        match kind {
            Kind::String => self.cmd(&[b"SET", k, b"x"]),
            Kind::List => self.cmd(&[b"RPUSH", k, b"x"]),
            Kind::Set => self.cmd(&[b"SADD", k, b"x"]),
            Kind::ZSet => self.cmd(&[b"ZADD", k, b"1", b"x"]),
            Kind::Hash => self.cmd(&[b"HSET", k, b"x", b"y"]),
            Kind::Stream => self.cmd(&[b"XADD", k, b"1-1", b"x", b"y"]),
        }
    }

    fn corrupt(&mut self, c: &Corruption) {
        self.tainted = true;
        let task_key = |id: &str| format!("{}{id}", self.keys[0]);
        match c {
            Corruption::DeleteTask(t) => self.cmd(&[b"DEL", task_key(&self.task(*t)).as_bytes()]),
            Corruption::TaskField { task, field, value } => {
                let f = TASK_FIELDS[usize::from(*field) % TASK_FIELDS.len()];
                let v = GARBAGE[usize::from(*value) % GARBAGE.len()];
                let key = task_key(&self.task(*task));
                self.cmd(&[b"HSET", key.as_bytes(), f.as_bytes(), v.as_bytes()]);
            }
            Corruption::DeleteTaskField { task, field } => {
                let f = TASK_FIELDS[usize::from(*field) % TASK_FIELDS.len()];
                let key = task_key(&self.task(*task));
                self.cmd(&[b"HDEL", key.as_bytes(), f.as_bytes()]);
            }
            Corruption::TaskType { task, kind } => self.plant(&task_key(&self.task(*task)), *kind),
            Corruption::QueueKeyType { key, kind } => {
                // KEYS[3..=8] and KEYS[11..=16]: the keys that are not prefixes.
                const FIXED: [usize; 12] = [3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 16];
                let i = FIXED[usize::from(*key) % FIXED.len()];
                self.plant(&self.keys[i - 1].clone(), *kind);
            }
            Corruption::TenantKeyType {
                tenant,
                which,
                kind,
            } => {
                let t = TENANTS[usize::from(*tenant) % TENANTS.len()];
                let key = match which % 3 {
                    0 => format!("{}{t}", self.keys[1]),
                    1 => format!("{}{t}", self.keys[9]),
                    _ => format!("{}{t}:k1", self.keys[8]),
                };
                self.plant(&key, *kind);
            }
            Corruption::Dangling {
                index,
                member,
                score,
            } => {
                let key = match index % 8 {
                    0 => format!("{}{}", self.keys[1], TENANTS[usize::from(*member) % 3]),
                    1 => self.keys[3].clone(),
                    2 => self.keys[4].clone(),
                    3 => self.keys[5].clone(),
                    4 => self.keys[6].clone(),
                    5 => self.keys[7].clone(),
                    6 => self.keys[2].clone(),
                    _ => self.keys[14].clone(),
                };
                let m = if index % 8 >= 6 {
                    TENANTS[usize::from(*member) % 3].to_string()
                } else if member % 2 == 0 {
                    GHOST_ID.to_string()
                } else {
                    self.task(member / 2)
                };
                let s = SCORES[usize::from(*score) % SCORES.len()];
                self.cmd(&[b"ZADD", key.as_bytes(), s.as_bytes(), m.as_bytes()]);
            }
            Corruption::QueueField { key, field, value } => {
                let which = usize::from(*key) % 3;
                let fields = QUEUE_FIELDS[which];
                let f = fields[usize::from(*field) % fields.len()];
                let v = GARBAGE[usize::from(*value) % GARBAGE.len()];
                let k = match which {
                    0 => self.keys[10].clone(),
                    1 => self.keys[13].clone(),
                    _ => format!("{}{}", self.keys[9], TENANTS[usize::from(*key / 3) % 3]),
                };
                self.cmd(&[b"HSET", k.as_bytes(), f.as_bytes(), v.as_bytes()]);
            }
        }
    }

    fn step(&mut self, s: &Step) {
        let client = self.client.clone();
        let store: Arc<dyn Store> = self.watch.clone();
        match s {
            Step::Submit {
                tenant,
                priority,
                delay,
                retries,
                lease,
                idem,
                batch,
            } => {
                let n = 1 + usize::from(*batch) % 3;
                let specs = (0..n)
                    .map(|i| {
                        self.submitted += 1;
                        let mut spec = TaskSpec::new(format!("{{\"n\":{}}}", self.submitted))
                            .queue(QUEUE)
                            .tenant(TENANTS[(usize::from(*tenant) + i) % TENANTS.len()])
                            .task_type("job")
                            .priority(priority % 10)
                            .delay_ms([0, 0, 500, 5_000][usize::from(*delay) % 4])
                            .max_retries(u32::from(retries % 4))
                            .lease_ms([1_000, 5_000, 30_000][usize::from(*lease) % 3])
                            .backoff(Backoff {
                                initial_ms: 100,
                                multiplier: 2.0,
                                max_ms: 10_000,
                                jitter: 0.2,
                            });
                        if idem % 4 != 0 {
                            spec = spec.idempotency_key(format!("k{}", idem % 4));
                        }
                        spec
                    })
                    .collect();
                let r = ready(client.submit_batch(specs));
                if let Some(done) = self.engine("submit", r) {
                    for d in done {
                        if !self.ids.contains(&d.task.id) {
                            self.ids.push(d.task.id);
                        }
                    }
                }
            }
            Step::Lease { worker, n } => {
                let bits = self.entropy.token_bits();
                let r = ready(ops::lease(
                    &*store,
                    QUEUE,
                    &format!("w{}", worker % 3),
                    1 + usize::from(*n) % 4,
                    &bits,
                    self.entropy.unit(),
                ));
                if let Some(batch) = self.engine("lease", r) {
                    for t in batch.tasks {
                        if let Some(l) = t.lease {
                            self.leases.push((t.id, l.token));
                        }
                    }
                }
            }
            Step::Heartbeat { lease, extend } => {
                let (id, token) = self.lease(*lease);
                let ext = [0, 1_000, 60_000][usize::from(*extend) % 3];
                let r = ready(ops::heartbeat(&*store, QUEUE, &id, &token, ext));
                self.engine("heartbeat", r);
            }
            Step::Complete { lease } => {
                let (id, token) = self.lease(*lease);
                let r = ready(ops::complete(&*store, QUEUE, &id, &token, "{}"));
                self.engine("complete", r);
            }
            Step::CompleteBatch { leases } => {
                let batch = self.completions(leases);
                if !batch.is_empty() {
                    let r = ready(ops::complete_batch(&*store, QUEUE, &batch));
                    self.engine("complete_batch", r);
                }
            }
            Step::CompleteAndLease { leases, worker, n } => {
                let batch = self.completions(leases);
                if !batch.is_empty() {
                    let bits = self.entropy.token_bits();
                    let worker = format!("w{}", worker % 3);
                    let request = ops::LeaseRequest {
                        worker: &worker,
                        n: 1 + usize::from(*n) % 4,
                        token_bits: &bits,
                        seed: self.entropy.unit(),
                    };
                    let r = ready(ops::complete_and_lease(&*store, QUEUE, &batch, &request));
                    if let Some((_, _, leased)) = self.engine("complete_and_lease", r) {
                        for t in leased.tasks {
                            if let Some(l) = t.lease {
                                self.leases.push((t.id, l.token));
                            }
                        }
                    }
                }
            }
            Step::Fail { lease, retryable } => {
                let (id, token) = self.lease(*lease);
                let jitter = self.entropy.unit();
                let r = ready(ops::fail(
                    &*store, QUEUE, &id, &token, "boom", *retryable, jitter,
                ));
                self.engine("fail", r);
            }
            Step::Release { lease } => {
                let (id, token) = self.lease(*lease);
                let r = ready(ops::release(&*store, QUEUE, &id, &token));
                self.engine("release", r);
            }
            Step::Promote { bound } => {
                let r = ready(ops::promote(&*store, QUEUE, 1 + u64::from(bound % 8)));
                self.engine("promote", r);
            }
            Step::Reap { bound, retention } => {
                let retention_ms =
                    [0, 1_000, orq::client::RETENTION_MS][usize::from(*retention) % 3];
                let seed = self.entropy.unit();
                let r = ready(ops::reap(
                    &*store,
                    QUEUE,
                    1 + u64::from(bound % 8),
                    seed,
                    retention_ms,
                ));
                self.engine("reap", r);
            }
            Step::Cancel { task } => {
                let id = self.task(*task);
                let r = ready(client.cancel(Some(QUEUE), &id));
                self.engine("cancel", r);
            }
            Step::Replay { task } => {
                let id = self.task(*task);
                let r = ready(client.replay(Some(QUEUE), &id));
                self.engine("replay", r);
            }
            Step::ReplayBulk { tenant, limit } => {
                let t = (tenant % 4 != 3).then(|| TENANTS[usize::from(tenant % 4) % 3]);
                let r = ready(client.replay_bulk(QUEUE, t, None, 1 + u64::from(limit % 5)));
                self.engine("replay_bulk", r);
            }
            Step::Purge { task } => {
                let id = self.task(*task);
                let r = ready(client.purge(Some(QUEUE), &id));
                self.engine("purge", r);
            }
            Step::ConfigureTenant {
                tenant,
                weight,
                max_inflight,
                max_queued,
                rate,
                burst,
            } => {
                fn opt<T: Copy>(b: u8, a: T, c: T) -> Option<Option<T>> {
                    match b % 4 {
                        0 => None,
                        1 => Some(None),
                        2 => Some(Some(a)),
                        _ => Some(Some(c)),
                    }
                }
                let limits = TenantLimits {
                    weight: opt(*weight, 0.5, 3.0),
                    max_inflight: opt(*max_inflight, 1, 2),
                    max_queued: opt(*max_queued, 0, 3),
                    rate_per_s: opt(*rate, 1.0, 0.5),
                    burst: opt(*burst, 1, 3),
                };
                let t = TENANTS[usize::from(*tenant) % TENANTS.len()];
                let r = ready(client.configure_tenant(QUEUE, t, &limits));
                self.engine("configure_tenant", r);
            }
            Step::ConfigureQueue { paused, aging } => {
                let p = [None, Some(true), Some(false)][usize::from(*paused) % 3];
                let a = [None, Some(0), Some(50)][usize::from(*aging) % 3];
                let r = ready(client.configure_queue(QUEUE, p, a));
                self.engine("configure_queue", r);
            }
            Step::Read { what, arg } => match what % 6 {
                0 => {
                    let id = self.task(*arg);
                    let r = ready(client.get(Some(QUEUE), &id));
                    self.engine("get", r);
                }
                1 => {
                    let status = match arg % 8 {
                        7 => None,
                        k => Some(Status::ALL[usize::from(k) % Status::ALL.len()]),
                    };
                    let q = ListQuery {
                        queue: QUEUE.to_string(),
                        status,
                        tenant: (arg % 3 == 0).then(|| "t1".to_string()),
                        task_type: None,
                        limit: 1 + u32::from(arg % 5),
                        cursor: None,
                    };
                    let r = ready(client.list(&q));
                    if let Some(page) = self.engine("list", r) {
                        if let Some(cursor) = page.next_cursor {
                            let r = ready(client.list(&ListQuery {
                                cursor: Some(cursor),
                                ..q
                            }));
                            self.engine("list", r);
                        }
                    }
                }
                2 => {
                    let r = ready(client.stats(QUEUE));
                    self.engine("stats", r);
                }
                3 => {
                    let r = ready(client.events(QUEUE, None, 10));
                    self.engine("events", r);
                }
                4 => {
                    let r = ready(client.workers(QUEUE));
                    self.engine("workers", r);
                }
                _ => {
                    let r = ready(client.queues());
                    self.engine("queues", r);
                }
            },
            Step::Tick { ms } => self.clock.advance_ms(u64::from(*ms)),
            Step::ClockBack { ms } => {
                let now = self.clock.now_ms();
                self.clock.set_ms(now - u64::from(*ms % 5_000));
            }
            Step::Raw { script, args } => self.raw(*script, None, args),
            Step::RawKeys { script, keys, args } => {
                self.tainted = true;
                self.raw(*script, Some(keys), args);
            }
            Step::Corrupt(c) => self.corrupt(c),
        }
    }
}

/// Run one input and check the properties after every step.
///
/// # Panics
/// On the first violated property, naming the step.
///
/// With `ORQ_FUZZ_HEALTHY=1` in the environment, planted corruption and calls with arbitrary
/// KEYS are skipped (for triage: what the well-formed and raw-ARGV steps alone find).
pub fn run(input: &Input) {
    static HEALTHY: std::sync::LazyLock<bool> =
        std::sync::LazyLock::new(|| std::env::var_os("ORQ_FUZZ_HEALTHY").is_some());
    let mut run = Run::new();
    for (i, step) in input.steps.iter().enumerate() {
        if *HEALTHY && matches!(step, Step::Corrupt(_) | Step::RawKeys { .. }) {
            continue;
        }
        run.step(step);
        let mut problems = std::mem::take(&mut run.problems);
        problems.append(&mut run.watch.problems.lock().unwrap());
        if !run.tainted {
            if let Err(e) = check_store_state(&run.store, QUEUE, None) {
                problems.push(format!("state invariant: {e}"));
            }
        }
        if !problems.is_empty() {
            panic!(
                "step {i} {step:?} (tainted: {}): {}",
                run.tainted,
                problems.join("; ")
            );
        }
    }
}
