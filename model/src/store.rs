//! `MemoryStore`: the in-memory Redis model behind the engine's [`orq::Store`] trait.

use crate::clock::StoreClock;
use crate::commands::{self, Exec};
use crate::db::{Db, Dump, Entry};
use crate::script::{Interpreter, Run, CROSSSLOT};
use crate::slot::key_slot;
use crate::touched::Touched;
use async_trait::async_trait;
use orq::store::WakeHub;
use orq::{Resp, Store, StoreError};
use orq_lua::Script;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// An in-memory Redis 7.0 that runs orq's transition scripts.
///
/// It holds one Lua 5.1 state (the language version Redis embeds) behind a mutex, so scripts run
/// one at a time and atomically, as in Redis. Each script is compiled once into a SHA1 → function
/// cache; [`MemoryStore::flush_scripts`] empties it (a `SCRIPT FLUSH` or a restart), after which
/// the next call of a script counts as a NOSCRIPT miss ([`MemoryStore::noscript_misses`]) and
/// compiles it again, as `RedisStore`'s EVALSHA → NOSCRIPT → EVAL does. Scripts called as
/// functions ([`orq_lua::functions::BY_FUNCTION`]) run from orq's function library, loaded by the
/// first call that misses it (a miss counted the same way) and flushed with the script cache.
///
/// Time comes from the [`StoreClock`] it is given, read once when a script starts: `TIME`, key
/// expiry and `XADD *` IDs inside the script all use that reading (Redis freezes expiry at the
/// script's start the same way; its `TIME` would advance by the script's own run time). Writes a
/// script made before it failed stay applied: there is no rollback, in Redis or here.
///
/// Commands and scripting rules are those of Redis 7.0, checked against a real server by the
/// tests in `sim/tests/`; see the crate documentation for what is modelled and what is not.
/// Cheap to share: wrap it in an `Arc`.
pub struct MemoryStore {
    interp: Mutex<Interpreter>,
    clock: Arc<dyn StoreClock>,
    strict: bool,
    noscript_misses: AtomicU64,
    script_calls: AtomicU64,
    /// The model could not load orq's function library: scripts go by their source.
    library_refused: std::sync::atomic::AtomicBool,
    /// The [`Store::wake`] listeners, woken after each call that PUBLISHed on their channel.
    wakes: WakeHub,
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("strict", &self.strict)
            .field("script_calls", &self.script_calls())
            .field("noscript_misses", &self.noscript_misses())
            .finish_non_exhaustive()
    }
}

/// A copy of a store's data (keys, values and expiry times; not the script cache), taken by
/// [`MemoryStore::snapshot`] and put back by [`MemoryStore::restore`] to simulate a restart that
/// loses the writes made after the snapshot.
#[derive(Debug, Clone)]
pub struct Snapshot {
    entries: BTreeMap<Vec<u8>, Entry>,
}

impl Snapshot {
    /// Number of keys in the snapshot (expired ones included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the snapshot holds no key.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl MemoryStore {
    /// An empty store reading time from `clock`.
    pub fn new(clock: Arc<dyn StoreClock>) -> Self {
        MemoryStore {
            interp: Mutex::new(Interpreter::new()),
            clock,
            strict: false,
            noscript_misses: AtomicU64::new(0),
            script_calls: AtomicU64::new(0),
            library_refused: std::sync::atomic::AtomicBool::new(false),
            wakes: WakeHub::default(),
        }
    }

    /// Wake the listeners of the channels the last call published on.
    fn deliver(&self, db: &mut Db) {
        for channel in db.take_published() {
            self.wakes.notify(&channel);
        }
    }

    /// Strict cluster mode (off by default). When on, every script call must name KEYS that all
    /// hash to one Redis Cluster slot (otherwise the reply is
    /// `CROSSSLOT Keys in request don't hash to the same slot`, as a cluster answers such an
    /// EVALSHA), and every key a command inside the script touches must hash to that slot too
    /// (otherwise that command fails with
    /// `ERR Script attempted to access keys that do not hash to the same slot`, Redis 7's error
    /// for an undeclared key in another slot). Slots are computed as in the Redis Cluster
    /// specification (CRC16 of the key or its `{hash tag}`, modulo 16384).
    pub fn strict_cluster(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }

    fn lock(&self) -> MutexGuard<'_, Interpreter> {
        self.interp
            .lock()
            .expect("MemoryStore mutex poisoned by an earlier panic")
    }

    /// Empty the SHA1 → function script cache and the function libraries (`SCRIPT FLUSH` and
    /// `FUNCTION FLUSH`, or what a restart without persistence does).
    pub fn flush_scripts(&self) {
        let mut interp = self.lock();
        interp.flush_scripts();
        interp.flush_functions();
    }

    /// How many [`MemoryStore::call_sync`] calls found their script missing from the cache (the
    /// NOSCRIPT replies a real Redis would have given EVALSHA) and compiled it.
    pub fn noscript_misses(&self) -> u64 {
        self.noscript_misses.load(Ordering::Relaxed)
    }

    /// How many scripts this store has run (through any entry point).
    pub fn script_calls(&self) -> u64 {
        self.script_calls.load(Ordering::Relaxed)
    }

    /// Run `script` with `keys` (KEYS) and `args` (ARGV), atomically, and return its reply as
    /// Redis would send it over RESP2 (script errors are `Resp::Error`).
    /// When the scripts are called as functions ([`orq_lua::functions::BY_FUNCTION`]), this is
    /// an FCALL of the script's function, after loading orq's library when it is missing (a
    /// miss counted as a NOSCRIPT miss), as `RedisStore` does.
    pub fn call_sync(&self, script: &Script, keys: &[String], args: &[Vec<u8>]) -> Resp {
        if orq_lua::functions::by_function(script.name) {
            return self.call_function(script, keys, args);
        }
        self.execute(&script.sha1, &script.source, keys, args, true)
    }

    fn call_function(&self, script: &Script, keys: &[String], args: &[Vec<u8>]) -> Resp {
        let lib = orq_lua::functions::library();
        let name = lib.function(script.name);
        if self.library_refused.load(Ordering::Relaxed) {
            return self.execute(&script.sha1, &script.source, keys, args, true);
        }
        {
            let mut interp = self.lock();
            if !interp.has_function(name) {
                self.noscript_misses.fetch_add(1, Ordering::Relaxed);
                // The model refuses the library only if it cannot compile or run it, which no
                // later call changes: remembered, as RedisStore does.
                if let Resp::Error(_) = interp.function_load(&lib.source, false) {
                    self.library_refused.store(true, Ordering::Relaxed);
                    drop(interp);
                    return self.execute(&script.sha1, &script.source, keys, args, true);
                }
            }
        }
        self.fcall(name, false, keys, args)
    }

    /// Run an ad-hoc script body (EVAL semantics: compiled and cached by its SHA1, never a
    /// NOSCRIPT miss). For tests.
    pub fn eval_source(&self, source: &str, keys: &[String], args: &[Vec<u8>]) -> Resp {
        let sha = sha1_smol::Sha1::from(source.as_bytes())
            .digest()
            .to_string();
        self.execute(&sha, source, keys, args, false)
    }

    fn execute(
        &self,
        sha: &str,
        source: &str,
        keys: &[String],
        args: &[Vec<u8>],
        by_sha: bool,
    ) -> Resp {
        let slot = match self.call_slot(keys) {
            Ok(slot) => slot,
            Err(crossslot) => return crossslot,
        };
        let mut interp = self.lock();
        self.script_calls.fetch_add(1, Ordering::Relaxed);
        if !interp.has_script(sha) {
            if by_sha {
                self.noscript_misses.fetch_add(1, Ordering::Relaxed);
            }
            if let Err(reply) = interp.compile(sha, source) {
                return reply;
            }
        }
        let run = self.start_run(&mut interp, sha, slot);
        let reply = interp.run(run, keys, args);
        self.deliver(&mut interp.engine().db);
        reply
    }

    /// The one cluster slot of a call's `keys` in strict mode (`None` otherwise, or with no key);
    /// `Err` with Redis's CROSSSLOT reply when they span slots.
    fn call_slot(&self, keys: &[String]) -> Result<Option<u16>, Resp> {
        if !self.strict {
            return Ok(None);
        }
        let mut slots = keys.iter().map(|k| key_slot(k.as_bytes()));
        let slot = slots.next();
        if slots.any(|s| Some(s) != slot) {
            return Err(Resp::Error(CROSSSLOT.to_string()));
        }
        Ok(slot)
    }

    /// The run context of a call starting now (the clock read once; the keyspace's time set to
    /// it), named `name` in error texts (a script's SHA1; a function's name is set by the call).
    fn start_run(&self, interp: &mut Interpreter, name: &str, slot: Option<u16>) -> Run {
        let now_us = self.clock.now_micros();
        interp.engine().db.set_now(now_us / 1000);
        Run {
            now_us,
            sha: name.to_string(),
            read_only: false,
            strict: self.strict,
            slot,
            instructions: 0,
            killed: false,
            error: None,
        }
    }

    /// Empty the function libraries (`FUNCTION FLUSH`, or a restart that kept no data).
    pub fn flush_functions(&self) {
        self.lock().flush_functions();
    }

    /// `FCALL name numkeys key... arg...` (or, with `ro`, `FCALL_RO`): run the function `name`
    /// of a loaded library, atomically, and return its reply as Redis sends it over RESP2;
    /// `ERR Function not found` when no library registered it.
    pub fn fcall(&self, name: &str, ro: bool, keys: &[String], args: &[Vec<u8>]) -> Resp {
        let slot = match self.call_slot(keys) {
            Ok(slot) => slot,
            Err(crossslot) => return crossslot,
        };
        let mut interp = self.lock();
        if !interp.has_function(name) {
            return Resp::Error("ERR Function not found".to_string());
        }
        self.script_calls.fetch_add(1, Ordering::Relaxed);
        let run = self.start_run(&mut interp, "", slot);
        let reply = interp.fcall(run, name, ro, keys, args);
        self.deliver(&mut interp.engine().db);
        reply
    }

    /// FUNCTION (LOAD [REPLACE], DELETE, FLUSH), FCALL and FCALL_RO as a client sends them.
    fn function_command(&self, args: &[Vec<u8>]) -> Resp {
        let is = |i: usize, w: &str| {
            args.get(i)
                .is_some_and(|a| a.eq_ignore_ascii_case(w.as_bytes()))
        };
        if is(0, "fcall") || is(0, "fcall_ro") {
            if args.len() < 3 {
                let name = String::from_utf8_lossy(&args[0]).to_lowercase();
                return commands::arity_error(&name);
            }
            let name = String::from_utf8_lossy(&args[1]).into_owned();
            if !self.lock().has_function(&name) {
                return Resp::Error("ERR Function not found".to_string());
            }
            let (keys, argv) = match crate::script::fcall_split(&args[2..]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            return self.fcall(&name, is(0, "fcall_ro"), &keys, &argv);
        }
        let given = args
            .get(1)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .unwrap_or_default();
        let sub = given.to_lowercase();
        let mut interp = self.lock();
        match (sub.as_str(), args.len()) {
            ("load", 3) => interp.function_load(&String::from_utf8_lossy(&args[2]), false),
            ("load", 4) if is(2, "replace") => {
                interp.function_load(&String::from_utf8_lossy(&args[3]), true)
            }
            ("load", 4) => Resp::Error(format!(
                "ERR Unknown option given: {}",
                String::from_utf8_lossy(&args[2])
            )),
            ("load", _) => commands::arity_error("function|load"),
            ("delete", 3) => {
                if interp.function_delete(&String::from_utf8_lossy(&args[2])) {
                    Resp::Status("OK".into())
                } else {
                    Resp::Error("ERR Library not found".into())
                }
            }
            ("flush", 2) => {
                interp.flush_functions();
                Resp::Status("OK".into())
            }
            ("", _) => commands::arity_error("function"),
            _ => Resp::Error(format!(
                "ERR unknown subcommand '{given}'. Try FUNCTION HELP."
            )),
        }
    }

    /// Run one command outside any script (seeding and reading in tests), with Redis's client
    /// semantics and error texts (`ERR unknown command ...`, `ERR wrong number of arguments for
    /// 'get' command`). Time is the clock's reading now. FUNCTION (LOAD, DELETE, FLUSH), FCALL
    /// and FCALL_RO are served too.
    pub fn command(&self, args: &[&[u8]]) -> Resp {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        if args.is_empty() {
            return Resp::Error("ERR orq-sim: empty command".to_string());
        }
        if [&b"function"[..], b"fcall", b"fcall_ro"]
            .iter()
            .any(|c| args[0].eq_ignore_ascii_case(c))
        {
            return self.function_command(&args);
        }
        let Some(cmd) = commands::lookup(&args[0]) else {
            return commands::unknown_command_error(&args);
        };
        if !cmd.arity_ok(args.len()) {
            return commands::arity_error(cmd.name);
        }
        let now_us = self.clock.now_micros();
        let interp = self.lock();
        let mut eng = interp.engine();
        eng.db.set_now(now_us / 1000);
        let reply = cmd.run(
            &mut Exec {
                db: &mut eng.db,
                now_us,
            },
            &args,
        );
        self.deliver(&mut eng.db);
        reply
    }

    /// Read the keyspace directly (invariant checkers): `f` sees every key live at the clock's
    /// current time, and nothing runs meanwhile.
    pub fn read<R>(&self, f: impl FnOnce(&Db) -> R) -> R {
        let now_ms = self.clock.now_micros() / 1000;
        let interp = self.lock();
        let mut eng = interp.engine();
        eng.db.set_now(now_ms);
        f(&eng.db)
    }

    /// Start (`true`) or stop collecting the keys every command and script writes, for
    /// [`MemoryStore::read_touched`] (the simulator's incremental checker; off by default, so the
    /// embedded store pays nothing).
    pub fn track_touched(&self, on: bool) {
        self.lock().engine().db.track_touched(on);
    }

    /// [`MemoryStore::read`], also handing `f` the keys written since the last call (None when
    /// tracking is off), keys that expired up to now included.
    pub fn read_touched<R>(&self, f: impl FnOnce(&Db, Option<Touched>) -> R) -> R {
        let now_ms = self.clock.now_micros() / 1000;
        let interp = self.lock();
        let mut eng = interp.engine();
        eng.db.set_now(now_ms);
        let touched = eng.db.take_touched();
        f(&eng.db, touched)
    }

    /// A copy of the data (not the script cache).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            entries: self.lock().engine().db.entries_clone(),
        }
    }

    /// Replace the data with `s` (the script cache is untouched; call
    /// [`MemoryStore::flush_scripts`] too to simulate a full restart).
    pub fn restore(&self, s: &Snapshot) {
        self.lock().engine().db.restore(&s.entries);
    }

    /// Every live key (at the clock's current time) with its value and expiry, in key order.
    pub fn dump(&self) -> Dump {
        self.read(|db| db.dump())
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn eval(
        &self,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<Resp, StoreError> {
        Ok(self.call_sync(script, keys, args))
    }

    /// Wake-ups from the scripts' PUBLISH calls, delivered after each call (the embedded store
    /// loses none).
    fn wake(&self, channels: &[String]) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.wakes.listen(channels).0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn assert_send_sync<T: Send + Sync>() {}

    // Goal: the store can be shared across threads and tasks (the engine holds it in an Arc).
    #[test]
    fn memory_store_is_send_and_sync() {
        assert_send_sync::<MemoryStore>();
        assert_send_sync::<Arc<MemoryStore>>();
    }

    // Goal: the engine's Store trait runs scripts on the model, and commands and reads see what
    // they wrote.
    #[tokio::test]
    async fn store_trait_runs_transition_scripts() {
        let clock = Arc::new(ManualClock::from_ms(1_700_000_000_000));
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(clock));
        let reply = store
            .eval(
                orq_lua::script("queues"),
                &[orq::keys::QUEUES_KEY.to_string()],
                &[b"add".to_vec(), b"q".to_vec()],
            )
            .await
            .expect("the model never fails as a store");
        assert_eq!(
            reply,
            Resp::Array(vec![Resp::Int(1_700_000_000_000), Resp::Int(1)])
        );
    }

    // Goal: a snapshot restores the data it copied, expiry times included, and nothing written
    // after it.
    #[test]
    fn restore_rolls_back_to_the_snapshot() {
        let clock = Arc::new(ManualClock::from_ms(1_000));
        let store = MemoryStore::new(clock.clone());
        store.command(&[b"SET", b"a", b"1", b"PX", b"500"]);
        let snap = store.snapshot();
        store.command(&[b"SET", b"b", b"2"]);
        store.command(&[b"DEL", b"a"]);
        store.restore(&snap);
        assert_eq!(store.command(&[b"GET", b"a"]), Resp::Bulk(b"1".to_vec()));
        assert_eq!(store.command(&[b"EXISTS", b"b"]), Resp::Int(0));
        assert_eq!(store.command(&[b"PTTL", b"a"]), Resp::Int(500));
        clock.advance_ms(501);
        assert!(store.dump().is_empty());
        assert_eq!(store.read(|db| db.len()), 0);
    }
}
