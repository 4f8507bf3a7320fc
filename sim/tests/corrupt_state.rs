//! Corrupt or foreign state (issue 6, part 4), on both stores: a task hash with missing or
//! garbage fields, an index entry whose task hash is gone, a key of the wrong Redis type.
//!
//! What the scripts promise (lua/scripts/lib/keys.lua, "Corrupt or foreign state"): a by-id call
//! answers a typed error (`CORRUPT`, or the documented code it would answer anyway) and writes
//! nothing; a script walking an index drops the entry it cannot act on and counts it in the
//! stats hash's `total:repaired`; garbage counters are reset and counted; no reply is ever a raw Redis
//! or Lua error. The script-level cases run on `MemoryStore` and on a private real Redis through
//! one function each. The last test runs a real worker pool and scheduler on `MemoryStore` beside
//! planted corruption (engine/tests/corrupt_state.rs runs the same on real Redis).

mod common;

use async_trait::async_trait;
use common::RealRedis;
use orq::keys::queue_keys;
use orq::{
    Client, Entropy, Handler, HandlerError, Handlers, Resp, Scheduler, SchedulerConfig, Store,
    StoreError, SystemClock, TaskContext, TaskSpec, Worker, WorkerConfig,
};
use orq_sim::{Dump, ManualClock, MemoryStore, WallClock};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The error codes a script may answer with.
const CODES: [&str; 7] = orq_lua::codes::ERROR_CODES;

/// A store under test, seeded and read with plain commands.
trait Subject {
    fn name(&self) -> &'static str;
    fn reset(&mut self);
    fn command(&mut self, args: &[&str]) -> Resp;
    fn call(&mut self, script: &str, args: &[&str]) -> Resp;
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
        self.clock.set_ms(1_800_000_000_000);
        self.store = MemoryStore::new(self.clock.clone());
    }
    fn command(&mut self, args: &[&str]) -> Resp {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.store.command(&args)
    }
    fn call(&mut self, script: &str, args: &[&str]) -> Resp {
        let keys = keys_of(script);
        let argv: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        self.store.call_sync(orq_lua::script(script), &keys, &argv)
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
    fn command(&mut self, args: &[&str]) -> Resp {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        RealRedis::command(self, &args)
    }
    fn call(&mut self, script: &str, args: &[&str]) -> Resp {
        let keys = keys_of(script);
        let argv: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        RealRedis::call(self, orq_lua::script(script), &keys, &argv)
    }
    fn dump(&mut self) -> Dump {
        RealRedis::dump(self)
    }
}

fn keys_of(script: &str) -> Vec<String> {
    if script == "queues" {
        vec![orq::keys::QUEUES_KEY.to_string()]
    } else {
        queue_keys("q")
    }
}

/// Run `case` on the model and on a private real Redis.
fn on_both_stores(case: fn(&mut dyn Subject)) {
    let clock = Arc::new(ManualClock::from_ms(1_800_000_000_000));
    let mut model = Model {
        store: MemoryStore::new(clock.clone()),
        clock,
    };
    model.reset();
    case(&mut model);
    let mut real = RealRedis::start();
    real.reset();
    case(&mut real);
}

/// Call a script and check the reply's error code is a documented one.
fn call(s: &mut dyn Subject, script: &str, args: &[&str]) -> Resp {
    let r = s.call(script, args);
    if let Resp::Error(e) = &r {
        let code = e.split(' ').next().unwrap_or_default();
        assert!(
            CODES.contains(&code),
            "{}: {script} answered an undocumented error: {e}",
            s.name()
        );
    }
    r
}

/// The error text of a reply that must be an error starting with `code`.
fn error(s: &mut dyn Subject, r: &Resp, code: &str) -> String {
    match r {
        Resp::Error(e) if e.starts_with(code) => e.clone(),
        other => panic!("{}: expected a {code} error, got {other:?}", s.name()),
    }
}

const STATS: &str = "orq:{q}:stats";

/// Assert that `r` is a CORRUPT reply naming `key` as holding a string.
fn refused_for_a_string(s: &mut dyn Subject, r: &Resp, key: &str) {
    let e = error(s, r, "CORRUPT");
    assert!(
        e.contains(&format!("{key} holds a string")),
        "{}: {e}",
        s.name()
    );
}

fn task_key(id: &str) -> String {
    format!("orq:{{q}}:task:{id}")
}

/// A stats field as an integer (0 when absent).
fn stat(s: &mut dyn Subject, field: &str) -> i64 {
    s.command(&["HGET", STATS, field]).as_int().unwrap_or(0)
}

/// Enqueue task `id` of `tenant` (due now, lease 30 s, one retry).
fn enqueue(s: &mut dyn Subject, id: &str, tenant: &str) -> Resp {
    call(
        s,
        "enqueue",
        &[
            "1",
            id,
            tenant,
            "job",
            "{}",
            "0",
            ",0,1,100,2,1000,0,30000,,,86400000,",
        ],
    )
}

/// Enqueue task `id` of `tenant` at `priority` (every other setting its default), and check it
/// was accepted.
fn enqueue_at_priority(s: &mut dyn Subject, id: &str, tenant: &str, priority: &str) {
    let r = call(s, "enqueue", &["1", id, tenant, "job", "{}", priority, ""]);
    assert!(
        r.as_array().is_some(),
        "{}: enqueue answered {r:?}",
        s.name()
    );
}

/// The ids of up to `n` tasks leased.
fn lease_ids(s: &mut dyn Subject, n: usize) -> Vec<String> {
    lease(s, n).into_iter().map(|(id, _)| id).collect()
}

/// Lease up to `n` tasks; returns (id, token) of each.
fn lease(s: &mut dyn Subject, n: usize) -> Vec<(String, String)> {
    let r = call(
        s,
        "lease",
        &["w1", &n.to_string(), "00ff", "0.5", "100", "10"],
    );
    let items = r
        .as_array()
        .unwrap_or_else(|| panic!("{}: lease answered {r:?}", s.name()));
    orq::ops::leased_entries(items[1].as_array().unwrap())
        .unwrap()
        .map(|item| {
            // expires_at, the record before the lease, epoch, attempt, payload
            // (orq::ops::leased_entries, leased_fields): the token is "<epoch>-<the bits sent>".
            let flat = orq::ops::leased_fields(item).unwrap();
            let id = flat
                .chunks(2)
                .find(|p| p[0].as_str() == Some("id"))
                .and_then(|p| p[1].as_str())
                .unwrap_or_default()
                .to_string();
            (id, format!("{}-00ff", item[2].as_int().unwrap()))
        })
        .collect()
}

const A: &str = "01AAAAAAAAAAAAAAAAAAAAAAAA";
const B: &str = "01BBBBBBBBBBBBBBBBBBBBBBBB";
const C: &str = "01CCCCCCCCCCCCCCCCCCCCCCCC";
const D: &str = "01DDDDDDDDDDDDDDDDDDDDDDDD";
const E: &str = "01EEEEEEEEEEEEEEEEEEEEEEEE";
const GHOST: &str = "01GGGGGGGGGGGGGGGGGGGGGGGG";

// Goal: an index entry whose task hash is gone is dropped by the script that meets it and counted
// in stats `total:repaired`, in every index a script walks: a ready set (lease), the scheduled set
// (promote), the leases set (reap), the completed set (the retention trim); the DLQ's
// `notfound` answers drop theirs as before.
// Method: plant the entries with raw commands, run each script, read the index and the counter.
#[test]
fn dangling_index_entries_are_dropped_and_counted() {
    on_both_stores(|s| {
        enqueue(s, A, "t1");
        enqueue(s, B, "t1");
        s.command(&["DEL", &task_key(A)]);
        let leased = lease(s, 2);
        assert_eq!(
            leased.len(),
            1,
            "{}: only the healthy task is leased",
            s.name()
        );
        assert_eq!(leased[0].0, B);
        assert_eq!(s.command(&["LLEN", "orq:{q}:ready:0:t1"]), Resp::Int(0));
        assert_eq!(stat(s, "total:repaired"), 1, "{}: ready entry", s.name());

        s.command(&["ZADD", "orq:{q}:scheduled", "0", GHOST]);
        let r = call(s, "promote", &["10"]);
        assert_eq!(r.as_array().unwrap()[1], Resp::Int(1));
        assert_eq!(s.command(&["ZCARD", "orq:{q}:scheduled"]), Resp::Int(0));
        assert_eq!(
            stat(s, "total:repaired"),
            2,
            "{}: scheduled entry",
            s.name()
        );

        s.command(&["ZADD", "orq:{q}:leases", "0", GHOST]);
        s.command(&["ZADD", "orq:{q}:completed", "0", C]);
        let r = call(s, "reap", &["10", "0.5", "0", "10"]);
        let r = r.as_array().unwrap();
        assert_eq!(
            (&r[1], &r[2]),
            (&Resp::Int(1), &Resp::Int(1)),
            "{}",
            s.name()
        );
        assert_eq!(s.command(&["ZSCORE", "orq:{q}:leases", GHOST]), Resp::Nil);
        assert_eq!(s.command(&["ZCARD", "orq:{q}:completed"]), Resp::Int(0));
        assert_eq!(
            stat(s, "total:repaired"),
            4,
            "{}: lease and completed entries",
            s.name()
        );
        // The healthy leased task is untouched.
        assert!(s
            .command(&["ZSCORE", "orq:{q}:leases", B])
            .as_int()
            .is_some());
        assert_eq!(
            s.command(&["HGET", &task_key(B), "s"]).as_str(),
            Some("leased")
        );
    });
}

// Goal: a task key holding another Redis type answers CORRUPT to every by-id call and nothing is
// written; when an index walk meets it, only the index entry goes (the foreign value stays).
// Method: lease a task, replace its hash with a string, call every by-id script and compare the
// full dump before and after; then make its lease entry due and reap.
#[test]
fn task_key_of_another_type_is_corrupt_and_left_alone() {
    on_both_stores(|s| {
        enqueue(s, A, "t1");
        let (id, token) = lease(s, 1).remove(0);
        assert_eq!(id, A);
        let key = task_key(A);
        s.command(&["DEL", &key]);
        s.command(&["SET", &key, "foreign"]);
        let before = s.dump();
        for (script, args) in [
            ("get", vec![A]),
            ("heartbeat", vec![A, &token, "0"]),
            ("complete", vec![A, &token, "{}", "86400000", "10"]),
            ("fail", vec![A, &token, "boom", "1", "0.5"]),
            ("release", vec![A, &token]),
            ("cancel", vec![A]),
        ] {
            let r = call(s, script, &args);
            let e = error(s, &r, "CORRUPT");
            assert!(e.contains("holds a string"), "{}: {script}: {e}", s.name());
        }
        for (script, args) in [("replay", vec!["ids", A]), ("purge", vec![A])] {
            let r = call(s, script, &args);
            assert_eq!(
                r.as_array().unwrap()[1],
                Resp::Array(vec![Resp::Bulk(b"corrupt".to_vec())]),
                "{}: {script}",
                s.name()
            );
        }
        assert_eq!(before, s.dump(), "{}: a refused call wrote", s.name());

        s.command(&["ZADD", "orq:{q}:leases", "0", A]);
        call(s, "reap", &["10", "0.5", "86400000", "10"]);
        assert_eq!(s.command(&["ZSCORE", "orq:{q}:leases", A]), Resp::Nil);
        assert_eq!(s.command(&["GET", &key]).as_str(), Some("foreign"));
        assert_eq!(stat(s, "total:repaired"), 1, "{}", s.name());
    });
}

// Goal: a queue key holding another Redis type is refused with CORRUPT naming the key, by every
// script that writes it, before anything is written (Redis does not roll back: a WRONGTYPE
// half-way through would leave a half-applied transition).
// Method: replace the stats hash with a list and call every writing script; compare dumps. Then
// replace each other queue key the lease script checks with a string (its old value is
// dropped) and call lease. A's lease has expired, so the lease has work to do (a reap, which may
// write every key it checks).
#[test]
fn queue_keys_of_another_type_are_refused_before_any_write() {
    on_both_stores(|s| {
        enqueue(s, A, "t1");
        let (_, token) = lease(s, 1).remove(0);
        s.command(&["ZADD", "orq:{q}:leases", "0", A]);
        // A due entry, so that promote has work too (a ghost: the refusal comes first).
        s.command(&["ZADD", "orq:{q}:scheduled", "0", "ghost"]);
        s.command(&["DEL", STATS]);
        s.command(&["RPUSH", STATS, "foreign"]);
        let before = s.dump();
        let enqueue_args = [
            "1",
            B,
            "t1",
            "job",
            "{}",
            "0",
            ",0,1,100,2,1000,0,30000,,,86400000,",
        ];
        for (script, args) in [
            ("enqueue", enqueue_args.to_vec()),
            ("lease", vec!["w1", "1", "00ff", "0.5", "100", "10"]),
            ("complete", vec![A, &token, "{}", "86400000", "10"]),
            ("fail", vec![A, &token, "boom", "1", "0.5"]),
            ("release", vec![A, &token]),
            ("promote", vec!["10"]),
            ("reap", vec!["10", "0.5", "0", "10"]),
            ("cancel", vec![A]),
            ("replay", vec!["ids", A]),
            ("purge", vec![A]),
            ("configure", vec!["queue", "1", "", ""]),
            ("configure", vec!["tenant", "t1", "2", "", "", "", ""]),
            ("stats", vec!["10"]),
        ] {
            let r = call(s, script, &args);
            let e = error(s, &r, "CORRUPT");
            assert!(
                e.contains("orq:{q}:stats holds a list, not a hash"),
                "{}: {script}: {e}",
                s.name()
            );
        }
        assert_eq!(before, s.dump(), "{}: a refused call wrote", s.name());

        s.command(&["DEL", STATS]);
        for key in [
            "tenants",
            "scheduled",
            "leases",
            "dead",
            "events",
            "config",
            "parked",
            "workers",
        ] {
            let key = format!("orq:{{q}}:{key}");
            s.command(&["DEL", &key]);
            s.command(&["SET", &key, "foreign"]);
            s.command(&["ZADD", "orq:{q}:leases", "0", A]);
            let before = s.dump();
            let r = call(s, "lease", &["w1", "1", "00ff", "0.5", "100", "10"]);
            let e = error(s, &r, "CORRUPT");
            assert!(e.contains(&key), "{}: {e}", s.name());
            assert_eq!(
                before,
                s.dump(),
                "{}: lease wrote with {key} foreign",
                s.name()
            );
            s.command(&["DEL", &key]);
        }
    });
}

// Goal: a call checks the keys it writes (lib/keys.lua); an idle lease (nothing ready, due or
// expired) writes only the workers set, which it reads first, and an idle promote or reap
// writes nothing, so keys of another type that they do not touch do not stop them, and they
// change nothing else. The lease that has work refuses.
// Method: make the stream, the dead set and the stats hash strings with one leased task (lease
// not expired); call lease, promote and reap; compare dumps apart from the workers set; then
// expire the lease and lease again.
#[test]
fn idle_lease_promote_and_reap_write_only_what_they_read() {
    on_both_stores(|s| {
        enqueue(s, A, "t1");
        lease(s, 1);
        for key in ["events", "dead", "stats"] {
            let key = format!("orq:{{q}}:{key}");
            s.command(&["DEL", &key]);
            s.command(&["SET", &key, "foreign"]);
        }
        s.command(&["DEL", "orq:{q}:workers"]);
        let before = s.dump();
        let r = call(s, "lease", &["w2", "1", "00ff", "0.5", "100", "10"]);
        let Resp::Array(parts) = &r else {
            panic!("{}: lease answered {r:?}", s.name())
        };
        assert_eq!(parts[1], Resp::Array(vec![]), "{}: {r:?}", s.name());
        assert_eq!(
            s.command(&["ZCARD", "orq:{q}:workers"]),
            Resp::Int(1),
            "{}: the worker is recorded",
            s.name()
        );
        s.command(&["DEL", "orq:{q}:workers"]);
        assert_eq!(before, s.dump(), "{}: an idle lease wrote", s.name());
        for (script, args) in [
            ("promote", vec!["10"]),
            ("reap", vec!["10", "0.5", "86400000", "10"]),
        ] {
            let r = call(s, script, &args);
            assert!(
                matches!(r, Resp::Array(_)),
                "{}: idle {script} answered {r:?}",
                s.name()
            );
            assert_eq!(before, s.dump(), "{}: an idle {script} wrote", s.name());
        }

        s.command(&["ZADD", "orq:{q}:leases", "0", A]);
        let before = s.dump();
        let r = call(s, "lease", &["w2", "1", "00ff", "0.5", "100", "10"]);
        refused_for_a_string(s, &r, "orq:{q}:events");
        assert_eq!(before, s.dump(), "{}: a refused lease wrote", s.name());
    });
}

// Goal: garbage in the fields a transition needs is tolerated where a default is safe (a
// non-integer attempt or epoch is reset, and counted) and refused where it is not (a leased
// task without a tenant cannot be completed: CORRUPT; its expired lease entry is dropped by reap
// and counted); a ready-set entry whose status is not queued is dropped and counted.
#[test]
fn garbage_task_fields_are_reset_refused_or_dropped() {
    on_both_stores(|s| {
        enqueue(s, A, "t1");
        enqueue(s, B, "t1");
        s.command(&["HSET", &task_key(A), "a", "x", "e", "nan"]);
        let (id, token) = lease(s, 1).remove(0);
        assert_eq!(id, A);
        assert_eq!(token, "1-00ff", "{}: epoch restarts at 1", s.name());
        let f = s.command(&["HMGET", &task_key(A), "a", "e", "s"]);
        assert_eq!(
            f,
            Resp::Array(vec![
                Resp::Bulk(b"1".to_vec()),
                Resp::Bulk(b"1".to_vec()),
                Resp::Bulk(b"leased".to_vec())
            ]),
            "{}",
            s.name()
        );
        assert_eq!(
            stat(s, "total:repaired"),
            2,
            "{}: two fields reset",
            s.name()
        );

        s.command(&["HSET", &task_key(B), "s", "bogus"]);
        assert!(lease(s, 1).is_empty(), "{}: B is not queued", s.name());
        assert_eq!(s.command(&["LLEN", "orq:{q}:ready:0:t1"]), Resp::Int(0));
        assert_eq!(
            stat(s, "total:repaired"),
            3,
            "{}: B's ready entry",
            s.name()
        );

        s.command(&["HDEL", &task_key(A), "t"]);
        let before = s.dump();
        let r = call(s, "complete", &[A, &token, "{}", "86400000", "10"]);
        let e = error(s, &r, "CORRUPT");
        assert!(e.contains("no tenant"), "{}: {e}", s.name());
        assert_eq!(before, s.dump(), "{}: complete wrote", s.name());
        s.command(&["ZADD", "orq:{q}:leases", "0", A]);
        call(s, "reap", &["10", "0.5", "86400000", "10"]);
        assert_eq!(s.command(&["ZSCORE", "orq:{q}:leases", A]), Resp::Nil);
        assert_eq!(
            stat(s, "total:repaired"),
            4,
            "{}: A's lease entry",
            s.name()
        );
    });
}

// Goal: counters holding garbage never stop a transition: they restart at the increment, and
// each reset is counted in `total:repaired`; float fields (the virtual time) read garbage as 0.
#[test]
fn garbage_counters_are_reset_and_counted() {
    on_both_stores(|s| {
        s.command(&["HSET", STATS, "n:queued", "x", "vtime", "nan"]);
        s.command(&[
            "HSET",
            "orq:{q}:tenant:t1",
            "n:leased",
            "y",
            "weight",
            "-inf",
        ]);
        let r = enqueue(s, A, "t1");
        assert!(
            r.as_array().is_some(),
            "{}: enqueue answered {r:?}",
            s.name()
        );
        assert_eq!(stat(s, "n:queued"), 1, "{}", s.name());
        assert_eq!(stat(s, "total:repaired"), 1, "{}", s.name());
        assert_eq!(lease(s, 1).len(), 1, "{}", s.name());
        // The tenant's garbage n:leased restarts at the lease's increment.
        assert_eq!(
            s.command(&["HGET", "orq:{q}:tenant:t1", "n:leased"]),
            Resp::Bulk(b"1".to_vec()),
            "{}",
            s.name()
        );
        assert_eq!(stat(s, "total:repaired"), 2, "{}", s.name());
    });
}

// Goal: a completion and a lease visit write their tenant's counters in one HSET of the values
// they read (design note 58); a counter among them that holds garbage takes the repairing path
// instead: the transition goes through, the counter restarts at the increment and the reset is
// counted in `total:repaired`, and the other counters keep their sums.
#[test]
fn garbage_tenant_counters_at_completion_and_lease_are_reset_and_counted() {
    on_both_stores(|s| {
        enqueue(s, A, "t1");
        enqueue(s, B, "t1");
        let leased = lease(s, 1);
        assert_eq!(leased.len(), 1, "{}", s.name());
        let (id, token) = leased[0].clone();
        s.command(&[
            "HSET",
            "orq:{q}:tenant:t1",
            "n:completed",
            "z",
            "served",
            "q",
        ]);
        let repaired = stat(s, "total:repaired");
        let r = call(
            s,
            "complete_batch",
            &["86400000", "10", "1", &id, &token, "{}"],
        );
        assert_eq!(
            r.as_array()
                .and_then(|a| a.get(1))
                .and_then(Resp::as_array)
                .map(|o| o.to_vec()),
            Some(vec![Resp::Bulk(b"completed".to_vec())]),
            "{}: complete_batch answered {r:?}",
            s.name()
        );
        let field = |s: &mut dyn Subject, f: &str| s.command(&["HGET", "orq:{q}:tenant:t1", f]);
        assert_eq!(
            field(s, "n:completed"),
            Resp::Bulk(b"1".to_vec()),
            "{}",
            s.name()
        );
        assert_eq!(
            field(s, "n:leased"),
            Resp::Bulk(b"0".to_vec()),
            "{}",
            s.name()
        );
        assert_eq!(stat(s, "total:repaired"), repaired + 1, "{}", s.name());
        assert_eq!(stat(s, "n:completed"), 1, "{}", s.name());
        // The lease visit: `served` holds garbage, `n:leased` a plain 0.
        assert_eq!(lease(s, 1).len(), 1, "{}", s.name());
        assert_eq!(
            field(s, "served"),
            Resp::Bulk(b"1".to_vec()),
            "{}",
            s.name()
        );
        assert_eq!(
            field(s, "n:leased"),
            Resp::Bulk(b"1".to_vec()),
            "{}",
            s.name()
        );
        assert_eq!(stat(s, "total:repaired"), repaired + 2, "{}", s.name());
        assert_eq!(stat(s, "n:leased"), 1, "{}", s.name());
    });
}

// Goal: a tenant whose own keys hold another Redis type is refused at a submit that reads its
// hash (CORRUPT naming the key, nothing written: here its list of the task's priority is empty,
// so the pushes made are taken back) and, at lease, leaves the fair-share set (counted) so that
// the other tenants are still served. A submit that only appends to a list of the tenant that
// holds ids reads nothing of the tenant while the queue has no capped tenant (design note 56):
// it is taken, and waits with the tenant's other tasks.
#[test]
fn tenant_keys_of_another_type_do_not_block_other_tenants() {
    on_both_stores(|s| {
        enqueue(s, A, "t1");
        enqueue(s, B, "t2");
        s.command(&["DEL", "orq:{q}:tenant:t1"]);
        s.command(&["SET", "orq:{q}:tenant:t1", "foreign"]);
        let before = s.dump();
        let r = call(s, "enqueue", &["1", C, "t1", "job", "{}", "4", ""]);
        refused_for_a_string(s, &r, "orq:{q}:tenant:t1");
        assert_eq!(before, s.dump(), "{}: refused enqueue wrote", s.name());
        let r = enqueue(s, D, "t1");
        assert!(r.as_array().is_some(), "{}: {r:?}", s.name());
        assert_eq!(
            s.command(&["LRANGE", "orq:{q}:ready:0:t1", "0", "-1"]),
            Resp::Array(vec![Resp::Bulk(A.into()), Resp::Bulk(D.into())]),
            "{}",
            s.name()
        );
        let leased = lease(s, 2);
        assert_eq!(leased.len(), 1, "{}", s.name());
        assert_eq!(leased[0].0, B);
        assert_eq!(s.command(&["ZSCORE", "orq:{q}:tenants", "t1"]), Resp::Nil);
        assert_eq!(stat(s, "total:repaired"), 1, "{}", s.name());
    });
}

// Goal: a ready list of another Redis type refuses a submit that would append to it (CORRUPT
// naming the key, nothing written), refuses the cancel of a queued task that would remove from it,
// and at lease counts as empty (counted in total:repaired, once) while the tenant's other
// priorities and the other tenants are served.
#[test]
fn a_ready_list_of_another_type_is_refused_and_counts_as_empty_at_lease() {
    on_both_stores(|s| {
        enqueue(s, A, "t1");
        enqueue(s, B, "t2");
        s.command(&["SET", "orq:{q}:ready:0:t1", "foreign"]);
        let before = s.dump();
        let r = enqueue(s, C, "t1");
        refused_for_a_string(s, &r, "orq:{q}:ready:0:t1");
        let r = call(s, "cancel", &[A]);
        error(s, &r, "CORRUPT");
        // A batch whose earlier items push to healthy lists (t2's, which holds B, and a new
        // tenant's) before the damaged one: the pushes are the first write, and those made are
        // taken back.
        let default = ",0,1,100,2,1000,0,30000,,,86400000,";
        let r = call(
            s,
            "enqueue",
            &[
                "3", D, "t2", "job", "{}", "0", default, E, "t9", "job", "{}", "0", default, C,
                "t1", "job", "{}", "0", default,
            ],
        );
        refused_for_a_string(s, &r, "orq:{q}:ready:0:t1");
        assert_eq!(before, s.dump(), "{}: refused calls wrote", s.name());
        // Another priority of the same tenant has a healthy list.
        enqueue_at_priority(s, C, "t1", "4");
        let leased = lease_ids(s, 3);
        assert_eq!(leased, [C, B], "{}", s.name());
        assert_eq!(s.command(&["ZSCORE", "orq:{q}:tenants", "t1"]), Resp::Nil);
        assert_eq!(stat(s, "total:repaired"), 1, "{}", s.name());
        // Another task of priority 4: served, and the damaged list is not counted again.
        enqueue_at_priority(s, D, "t1", "4");
        let leased = lease_ids(s, 3);
        assert_eq!(leased, [D], "{}", s.name());
        assert_eq!(stat(s, "total:repaired"), 1, "{}", s.name());
    });
}

// Goal: a priority sent as "-0" is priority 0: its task lands in the list lease reads (a review
// finding: Lua printed the key as `ready:-0:`, and the task was never leased).
#[test]
fn a_priority_of_minus_zero_is_priority_zero() {
    on_both_stores(|s| {
        enqueue_at_priority(s, A, "t1", "-0");
        assert_eq!(
            s.command(&["LLEN", "orq:{q}:ready:0:t1"]),
            Resp::Int(1),
            "{}",
            s.name()
        );
        let leased = lease_ids(s, 10);
        assert_eq!(leased, [A], "{}", s.name());
    });
}

// ----- a worker pool and a scheduler beside corrupt state, on MemoryStore ------------------------

/// Counts the lease calls on one queue (to show a refused queue is not asked in a hot loop).
struct Counting {
    inner: Arc<MemoryStore>,
    queue_tag: String,
    leases: AtomicU64,
}

#[async_trait]
impl Store for Counting {
    async fn eval(
        &self,
        script: &'static orq_lua::Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<Resp, StoreError> {
        if script.name == "lease" && keys.first().is_some_and(|k| k.contains(&self.queue_tag)) {
            self.leases.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.eval(script, keys, args).await
    }
}

struct Echo;

#[async_trait]
impl Handler for Echo {
    async fn handle(&self, ctx: TaskContext) -> Result<serde_json::Value, HandlerError> {
        serde_json::from_str(&ctx.task.payload).map_err(|e| HandlerError::permanent(e.to_string()))
    }
}

fn raw(store: &MemoryStore, args: &[&str]) -> Resp {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    store.command(&args)
}

/// Wait (real time) until `check` holds, at most 30 s.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// Goal: a worker pool and a scheduler keep serving the healthy tasks of a queue that also holds
// corrupt state, and of a second queue beside a queue whose stats key is foreign; a leased task
// whose fields cannot be decoded goes to the DLQ with the reason; nothing panics and the refused
// queue is not asked in a hot loop.
// Method: on the embedded store (wall clock), submit healthy tasks to `q` and plant: a deleted
// hash (dangling ready entry), a status of `bogus`, a priority of `x` (the decoder refuses it),
// dangling scheduled and lease entries; make queue `bad`'s stats a list. Run one worker pool over
// both queues and a scheduler; wait for the healthy tasks to complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_and_scheduler_keep_serving_healthy_tasks_beside_corrupt_state() {
    let memory = Arc::new(MemoryStore::new(Arc::new(WallClock)));
    let store = Arc::new(Counting {
        inner: memory.clone(),
        queue_tag: "{bad}".into(),
        leases: AtomicU64::new(0),
    });
    let client = Client::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_seed(1)),
    );
    let spec = |queue: &str, n: usize| {
        TaskSpec::new(format!("{{\"n\":{n}}}"))
            .queue(queue)
            .task_type("echo")
            .max_retries(0)
    };
    let mut healthy = Vec::new();
    for n in 0..10 {
        healthy.push(client.submit(spec("q", n)).await.unwrap().task.id);
    }
    let mut planted = Vec::new();
    for n in 10..13 {
        planted.push(client.submit(spec("q", n)).await.unwrap().task.id);
    }
    client.submit(spec("bad", 0)).await.unwrap();
    let key = |id: &str| format!("orq:{{q}}:task:{id}");
    raw(&memory, &["DEL", &key(&planted[0])]);
    raw(&memory, &["HSET", &key(&planted[1]), "s", "bogus"]);
    raw(&memory, &["HSET", &key(&planted[2]), "pr", "x"]);
    raw(&memory, &["ZADD", "orq:{q}:scheduled", "0", GHOST]);
    raw(&memory, &["ZADD", "orq:{q}:leases", "0", C]);
    raw(&memory, &["DEL", "orq:{bad}:stats"]);
    raw(&memory, &["RPUSH", "orq:{bad}:stats", "foreign"]);

    let worker = Worker::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_seed(2)),
        Handlers::new().register("echo", Echo),
        WorkerConfig {
            id: "w1".into(),
            queues: vec!["bad".into(), "q".into()],
            concurrency: 4,
            idle_poll_ms: 50,
            ..WorkerConfig::default()
        },
    );
    let scheduler = Scheduler::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_seed(3)),
        SchedulerConfig {
            queues: vec!["bad".into(), "q".into()],
            interval_ms: 50,
            ..SchedulerConfig::default()
        },
    );
    let pass = scheduler
        .run_once()
        .await
        .expect("q is maintained although bad fails");
    assert_eq!(
        pass.reaped + pass.promoted,
        2,
        "the two dangling entries were met"
    );
    let stop = CancellationToken::new();
    let w = tokio::spawn({
        let stop = stop.clone();
        async move { worker.run(stop).await }
    });
    let sch = tokio::spawn({
        let stop = stop.clone();
        async move { scheduler.run(stop).await }
    });
    let status = |id: &str| {
        raw(&memory, &["HGET", &key(id), "s"])
            .as_str()
            .map(str::to_string)
    };
    eventually("the healthy tasks to complete", || {
        healthy
            .iter()
            .all(|id| status(id).as_deref() == Some("completed"))
    })
    .await;
    eventually("the undecodable task to be dead", || {
        status(&planted[2]).as_deref() == Some("dead")
    })
    .await;
    let last_error = raw(&memory, &["HGET", &key(&planted[2]), "le"]);
    assert!(
        last_error
            .as_str()
            .is_some_and(|e| e.starts_with("corrupt task:")),
        "{last_error:?}"
    );
    // Refused lease calls on `bad` back off (50 ms doubling to 5 s), in each of the pool's
    // lanes on its own: over 2 s a hot loop would make about 40 of them a lane.
    let lanes = WorkerConfig::default().lanes as u64;
    let before = store.leases.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let asked = store.leases.load(Ordering::Relaxed) - before;
    assert!(
        asked <= 6 * lanes,
        "the refused queue was asked {asked} times in 2 s by {lanes} lanes"
    );
    stop.cancel();
    w.await.expect("the worker did not panic");
    sch.await.expect("the scheduler did not panic");
    let repaired = raw(&memory, &["HGET", "orq:{q}:stats", "total:repaired"]).as_int();
    assert_eq!(
        repaired,
        Some(4),
        "deleted hash, bogus status, scheduled and lease entries"
    );
}
