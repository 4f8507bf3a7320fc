//! Redis Functions, checked against a real Redis 7.0: each case is a sequence of client commands
//! (FUNCTION LOAD / DELETE / FLUSH, FCALL, FCALL_RO, and plain commands) sent to a private
//! `redis-server` and to the model's `MemoryStore::command`, from no library and an empty
//! keyspace; every reply must be equal byte for byte, error texts included.
//!
//! The cases cover the library metadata line and its errors, what a library's code may touch
//! while it loads (only `redis.register_function`, `redis.log` and the version and log-level
//! constants), both forms of `register_function` and its errors, FCALL's key-count rules, errors
//! inside a function (with `script: <name>, on @user_function:<line>.`), `no-writes` and
//! FCALL_RO, REPLACE / DELETE / FLUSH, and the state a library keeps between calls (why orq's
//! scripts keep theirs in a per-call context, docs/design-notes.md note 44).
//!
//! `ORQ_SHOW=1 cargo test -p orq-sim --test functions -- --nocapture` prints every reply.

mod common;

use common::{model, SharedRedis};
use orq::Resp;

/// Send each command of `steps` to both stores, in order, from no library and no key; panics at
/// the first reply that differs.
fn same(redis: &SharedRedis, steps: &[&[&str]]) {
    redis.with(|real| {
        real.flushall();
        assert_eq!(
            real.command(&[b"FUNCTION", b"FLUSH"]),
            Resp::Status("OK".into())
        );
        let (_clock, store) = model();
        for step in steps {
            let args: Vec<&[u8]> = step.iter().map(|a| a.as_bytes()).collect();
            let r = real.command(&args);
            let m = store.command(&args);
            if std::env::var_os("ORQ_SHOW").is_some() {
                eprintln!("{step:?}\n    => {r:?}");
            }
            assert_eq!(r, m, "command {step:?}\nreal:  {r:?}\nmodel: {m:?}");
        }
    });
}

/// `FUNCTION LOAD` of a library called `name` with `body` after its metadata line.
fn lib(name: &str, body: &str) -> String {
    format!("#!lua name={name}\n{body}")
}

// Goal: a library's functions run with their keys and arguments as parameters, in both
// registration forms, and their replies convert as a script's do.
#[test]
fn functions_load_and_run_like_redis() {
    let redis = SharedRedis::acquire();
    let code = lib(
        "lib1",
        "local function f(keys, args) return {keys[1], args[1], #keys, #args} end\n\
         redis.register_function('f1', f)\n\
         redis.register_function{function_name='f2', callback=function(k, a) return redis.call('SET', k[1], a[1]) end}\n\
         redis.register_function{function_name='f3', callback=function(k, a) return redis.call('GET', k[1]) end, flags={'no-writes'}, description='reads'}\n\
         redis.register_function(7, function() return redis.REDIS_VERSION end)\n\
         redis.register_function('p', function(k, a) return redis.pcall('INCR', 'x') end)",
    );
    same(
        &redis,
        &[
            &["FUNCTION", "LOAD", &code],
            &["FCALL", "f1", "1", "k", "a", "b"],
            &["FCALL", "f1", "0"],
            &["FCALL", "f2", "1", "k", "v"],
            &["FCALL", "f3", "1", "k"],
            &["FCALL_RO", "f3", "1", "k"],
            &["fcall", "7", "0"],
            &["FCALL", "F1", "0"],
            &["GET", "k"],
        ],
    );
}

// Goal: the metadata line and the library's name are checked as Redis checks them.
#[test]
fn library_metadata_errors_match_redis() {
    let redis = SharedRedis::acquire();
    let ok = "redis.register_function('g', function() return 1 end)";
    same(
        &redis,
        &[
            &["FUNCTION", "LOAD", ok],
            &["FUNCTION", "LOAD", "#!lua name=x"],
            &["FUNCTION", "LOAD", &format!("#!lua\n{ok}")],
            &["FUNCTION", "LOAD", &format!("#!js name=x\n{ok}")],
            &["FUNCTION", "LOAD", &format!("#!lua name=x foo=bar\n{ok}")],
            &["FUNCTION", "LOAD", &format!("#!lua name=a-b\n{ok}")],
            &["FUNCTION", "LOAD", &format!("#!lua name=\n{ok}")],
            &["FUNCTION", "LOAD", &lib("l1", ok)],
            &["FUNCTION", "LOAD", &lib("l1", ok)],
            &["FUNCTION", "LOAD", &lib("l2", ok)],
            &["FUNCTION", "LOAD", "BOGUS", &lib("l1", ok)],
            &["FUNCTION", "LOAD"],
            &["FUNCTION", "BOGUS"],
        ],
    );
}

// Goal: while a library loads, its code sees only the library API: every other global, the
// standard libraries and redis.call included, is a "nonexistent global variable".
#[test]
fn load_time_globals_match_redis() {
    let redis = SharedRedis::acquire();
    for expr in [
        "string.format('%d', 1)",
        "math.floor(1)",
        "table.concat({})",
        "tonumber('1')",
        "type(1)",
        "pairs({})",
        "redis.call('GET', 'a')",
        "redis.sha1hex('a')",
        "redis.setresp(2)",
        "redis.error_reply('x')",
        "KEYS",
        "redis.LOG_NOTICE + redis.REDIS_VERSION_NUM",
        "redis.log(redis.LOG_NOTICE, 'loading')",
        "{1, 2, {a = 'b'}}",
    ] {
        let code = lib(
            "t",
            &format!("local v = {expr}\nredis.register_function('t', function() return 1 end)"),
        );
        same(
            &redis,
            &[&["FUNCTION", "LOAD", &code], &["FCALL", "t", "0"]],
        );
    }
    for body in [
        "x = 1\nredis.register_function('t', function() return 1 end)",
        "error('at load')",
        "local x = 1",
        "return 1 +",
        "redis.register_function('t', function() return 1 end)\n\
         redis.register_function('t', function() return 2 end)",
        "redis.register_function('bad name', function() end)",
        "redis.register_function('t', 'not a function')",
        "redis.register_function('t')",
        "redis.register_function('t', function() end, 'extra')",
        "redis.register_function{function_name='t', callback=5}",
        "redis.register_function{function_name='t', callback=function() end, foo=1}",
        "redis.register_function{function_name='t', callback=function() end, flags={'bogus'}}",
        "redis.register_function{function_name='t', callback=function() end, flags={'allow-oom', 'allow-stale', 'no-cluster', 'allow-cross-slot-keys'}}",
        "redis.register_function{callback=function() end}",
    ] {
        same(
            &redis,
            &[&["FUNCTION", "LOAD", &lib("t", body)], &["FCALL", "t", "0"]],
        );
    }
}

// Goal: FCALL's function and key-count checks, and errors inside a function, read as Redis's.
#[test]
fn call_errors_match_redis() {
    let redis = SharedRedis::acquire();
    let code = lib(
        "e",
        "redis.register_function('g', function(k, a) return nosuch.x end)\n\
         redis.register_function('r', function(k, a) return redis.error_reply('INVALID bad') end)\n\
         redis.register_function('b', function(k, a) error('boom') end)\n\
         redis.register_function('u', function(k, a) return redis.call('NOPE') end)\n\
         redis.register_function('k', function(k, a) return KEYS end)\n\
         redis.register_function('w', function(k, a) return redis.call('SET', k[1]) end)\n\
         redis.register_function('t', function(k, a) return redis.call('INCR', 'x') end)",
    );
    same(
        &redis,
        &[
            &["FUNCTION", "LOAD", &code],
            &["FCALL", "g", "0"],
            &["FCALL", "r", "0"],
            &["FCALL", "b", "0"],
            &["FCALL", "u", "0"],
            &["FCALL", "k", "0"],
            &["FCALL", "w", "1", "a"],
            &["FCALL", "nosuch", "0"],
            &["FCALL", "nosuch", "x"],
            &["FCALL", "g", "x"],
            &["FCALL", "g", "-1"],
            &["FCALL", "g", "3", "a"],
            &["FCALL", "g"],
        ],
    );
}

// Goal: a `no-writes` function may read but not write or publish, and FCALL_RO runs only such
// functions.
#[test]
fn no_writes_and_fcall_ro_match_redis() {
    let redis = SharedRedis::acquire();
    let code = lib(
        "ro",
        "redis.register_function{function_name='get', callback=function(k) return redis.call('GET', k[1]) end, flags={'no-writes'}}\n\
         redis.register_function{function_name='set', callback=function(k) return redis.call('SET', k[1], 'x') end, flags={'no-writes'}}\n\
         redis.register_function{function_name='pub', callback=function(k) return redis.call('PUBLISH', 'c', 'm') end, flags={'no-writes'}}\n\
         redis.register_function{function_name='pset', callback=function(k) return redis.pcall('SET', k[1], 'x') end, flags={'no-writes'}}\n\
         redis.register_function('rw', function(k) return redis.call('SET', k[1], 'y') end)",
    );
    same(
        &redis,
        &[
            &["FUNCTION", "LOAD", &code],
            &["SET", "a", "1"],
            &["FCALL", "get", "1", "a"],
            &["FCALL_RO", "get", "1", "a"],
            &["FCALL", "set", "1", "a"],
            &["FCALL", "pub", "1", "a"],
            &["FCALL", "pset", "1", "a"],
            &["FCALL_RO", "rw", "1", "a"],
            &["FCALL", "rw", "1", "a"],
            &["GET", "a"],
        ],
    );
}

// Goal: REPLACE swaps a library's functions, DELETE and FLUSH remove them, and a function name
// held by another library is refused.
#[test]
fn replace_delete_and_flush_match_redis() {
    let redis = SharedRedis::acquire();
    let one = lib("a", "redis.register_function('f', function() return 1 end)\nredis.register_function('g', function() return 1 end)");
    let two = lib("a", "redis.register_function('f', function() return 2 end)");
    let clash = lib("b", "redis.register_function('f', function() return 3 end)");
    let bad = lib(
        "a",
        "redis.register_function('f', function() return 4 end)\nerror('no')",
    );
    same(
        &redis,
        &[
            &["FUNCTION", "LOAD", &one],
            &["FUNCTION", "LOAD", &clash],
            &["FUNCTION", "LOAD", "REPLACE", &two],
            &["FCALL", "f", "0"],
            &["FCALL", "g", "0"],
            &["FUNCTION", "LOAD", "REPLACE", &bad],
            &["FCALL", "f", "0"],
            &["FUNCTION", "DELETE", "a"],
            &["FUNCTION", "DELETE", "a"],
            &["FCALL", "f", "0"],
            &["FUNCTION", "LOAD", &clash],
            &["FUNCTION", "FLUSH"],
            &["FCALL", "f", "0"],
        ],
    );
}

// Goal: a library's top level runs once, so state it keeps in a local outlives a call: the
// hazard a per-call context avoids (the counter goes 1, 2, 3 on both stores).
#[test]
fn library_locals_outlive_a_call_as_in_redis() {
    let redis = SharedRedis::acquire();
    let code = lib(
        "c",
        "local n = 0\nredis.register_function('inc', function() n = n + 1 return n end)",
    );
    same(
        &redis,
        &[
            &["FUNCTION", "LOAD", &code],
            &["FCALL", "inc", "0"],
            &["FCALL", "inc", "0"],
            &["FCALL", "inc", "0"],
            &["FUNCTION", "LOAD", "REPLACE", &code],
            &["FCALL", "inc", "0"],
        ],
    );
}

// Goal: orq's own library (`orq_lua::functions`) loads on Redis 7.0 and on the model alike, with
// a function per script: its top level touches nothing Redis forbids at load time, and no
// function has more than Lua's 60 upvalues.
#[test]
fn orq_library_loads_on_redis_and_the_model() {
    let redis = SharedRedis::acquire();
    let lib = orq_lua::functions::library();
    same(&redis, &[&["FUNCTION", "LOAD", &lib.source]]);
    let (_clock, store) = model();
    assert_eq!(
        store.command(&[b"FUNCTION", b"LOAD", lib.source.as_bytes()]),
        Resp::Bulk(lib.name.clone().into_bytes()),
        "the model loads orq's library"
    );
    for s in orq_lua::all() {
        if !orq_lua::functions::by_function(s.name) {
            continue; // called by EVALSHA (orq_lua::functions::BY_EVAL): not in the library
        }
        // Every function exists: a call with no keys reaches the script (which refuses them).
        let r = store.command(&[b"FCALL", lib.function(s.name).as_bytes(), b"0"]);
        assert_ne!(
            r,
            Resp::Error("ERR Function not found".into()),
            "{}",
            s.name
        );
    }
    // And a real call answers alike: `stats` of an empty queue (its first element is each
    // store's clock).
    let keys = orq::keys::queue_keys("q");
    let mut fcall: Vec<&[u8]> = vec![b"FCALL", lib.function("stats").as_bytes(), b"16"];
    fcall.extend(keys.iter().map(|k| k.as_bytes()));
    fcall.push(b"10"); // ARGV[1]: most tenants reported
    let args = fcall;
    // One turn of the shared server: the load and the call, so no other test flushes between.
    let real = redis.with(|real| {
        real.flushall();
        real.command(&[b"FUNCTION", b"LOAD", b"REPLACE", lib.source.as_bytes()]);
        real.command(&args)
    });
    let model = store.command(&args);
    let rest = |r: &Resp| r.as_array().map(|a| a[1..].to_vec());
    assert_eq!(rest(&real), rest(&model), "real {real:?}, model {model:?}");
    assert!(rest(&real).is_some(), "{real:?}");
}
