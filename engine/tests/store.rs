//! The Redis store's resilience: scripts evicted from Redis's cache (NOSCRIPT), orq's function
//! library missing or refused, and a Redis restart are absorbed by the store, so callers see a
//! working client.

mod common;

use common::{spec, Env};
use orq::{Error, Status};

/// Whether Redis's script cache holds the script called `name`.
async fn script_cached(env: &Env, name: &str) -> bool {
    let mut conn = env.raw().await;
    let found: Vec<i64> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(&orq_lua::script(name).sha1)
        .query_async(&mut conn)
        .await
        .expect("SCRIPT EXISTS");
    found == [1]
}

/// Whether the server holds orq's function library (`FUNCTION LIST LIBRARYNAME <name>`).
async fn library_loaded(env: &Env) -> bool {
    let mut conn = env.raw().await;
    let libs: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg(&orq_lua::functions::library().name)
        .query_async(&mut conn)
        .await
        .expect("FUNCTION LIST");
    matches!(libs, redis::Value::Array(a) if !a.is_empty())
}

// Goal: with the scripts called as functions, a server without orq's library (new, restarted
// without persistence, FUNCTION FLUSH) gets it loaded by the first call that misses it, and the
// calls answer as before.
// Method: submit (loads the library), FUNCTION FLUSH and SCRIPT FLUSH, then submit, get, lease
// and stats; each answers correctly and the library is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_calls_survive_a_function_flush() {
    assert!(
        orq_lua::functions::by_function("enqueue"),
        "enqueue is called as a function"
    );
    let env = Env::start().await;
    let first = env.client.submit(spec("q", "echo", "{}")).await.unwrap();
    assert!(
        library_loaded(&env).await,
        "the first call loaded the library"
    );
    let mut conn = env.raw().await;
    for what in ["FUNCTION", "SCRIPT"] {
        let _: () = redis::cmd(what)
            .arg("FLUSH")
            .query_async(&mut conn)
            .await
            .expect("FLUSH");
    }
    assert!(!library_loaded(&env).await);
    let second = env.client.submit(spec("q", "echo", "{}")).await.unwrap();
    assert!(second.created);
    assert!(
        library_loaded(&env).await,
        "the miss loaded the library again"
    );
    assert!(
        !script_cached(&env, "enqueue").await,
        "called as a function, not by EVAL"
    );
    assert_eq!(env.get("q", &first.task.id).await.status, Status::Queued);
    let leased = env.lease("q", "w-1", 10).await;
    assert_eq!(leased.tasks.len(), 2);
    assert_eq!(env.stats("q").await.counts[&Status::Leased], 2);
}

// Goal: a server that refuses FUNCTION (here renamed away, as some managed services and proxies
// do) still runs every call, by EVALSHA, and keeps doing so.
// Method: a private server started with `rename-command FUNCTION ""`; submit, lease, complete and
// read back; the scripts are in the EVAL cache and a SCRIPT FLUSH is absorbed as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_run_by_evalsha_where_functions_are_refused() {
    let env = Env::start_with(&["--rename-command", "FUNCTION", ""]).await;
    let sub = env.client.submit(spec("q", "echo", "{}")).await.unwrap();
    assert!(script_cached(&env, "enqueue").await, "enqueue went by EVAL");
    let leased = env.lease("q", "w-1", 10).await;
    assert_eq!(leased.tasks.len(), 1);
    let mut conn = env.raw().await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .expect("SCRIPT FLUSH");
    assert_eq!(env.get("q", &sub.task.id).await.status, Status::Leased);
    assert!(script_cached(&env, "get").await, "get went by EVAL again");
    assert_eq!(env.stats("q").await.counts[&Status::Leased], 1);
}

// Goal: after `SCRIPT FLUSH` empties Redis's script cache, the next calls still work: EVALSHA's
// NOSCRIPT falls back to EVAL, which also caches the script again.
// Method: submit (caches enqueue), SCRIPT FLUSH on the private server, then submit, get, lease
// and stats; check each answers correctly and enqueue is cached again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_calls_survive_a_script_flush() {
    // By EVALSHA: on a server without FUNCTION (the scripts' path there when they are called as
    // functions elsewhere).
    let env = Env::start_with(&["--rename-command", "FUNCTION", ""]).await;
    let first = env.client.submit(spec("q", "echo", "{}")).await.unwrap();
    assert!(script_cached(&env, "enqueue").await);

    let mut conn = env.raw().await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .expect("SCRIPT FLUSH");
    assert!(!script_cached(&env, "enqueue").await);
    assert!(!script_cached(&env, "get").await);

    let second = env.client.submit(spec("q", "echo", "{}")).await.unwrap();
    assert!(second.created);
    assert!(
        script_cached(&env, "enqueue").await,
        "EVAL cached the script again"
    );
    assert_eq!(env.get("q", &first.task.id).await.status, Status::Queued);
    let leased = env.lease("q", "w-1", 10).await;
    assert_eq!(leased.tasks.len(), 2);
    assert_eq!(env.stats("q").await.counts[&Status::Leased], 2);
}

// Goal: after Redis restarts (empty, its script cache gone, every connection dropped), the client
// reconnects by itself and a submit works again.
// Method: submit; restart the private server on the same port; poll submit until it succeeds
// (the connection manager reconnects lazily, so the first calls may fail as Unavailable); then
// the new task reads back, the old one is gone with the data, and the queue is listed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_reconnects_after_a_redis_restart() {
    let mut env = Env::start().await;
    let before = env.client.submit(spec("q", "echo", "{}")).await.unwrap();
    env.server_mut().restart();

    let after = common::eventually("a submit to succeed after the restart", || async {
        match env
            .client
            .submit(spec("q", "echo", r#"{"after":true}"#))
            .await
        {
            Ok(s) => Some(s),
            Err(e) => {
                assert!(
                    e.is_unavailable(),
                    "only Unavailable while reconnecting: {e}"
                );
                None
            }
        }
    })
    .await;
    assert!(after.created);
    let t = env.get("q", &after.task.id).await;
    assert_eq!(t.payload, r#"{"after":true}"#);
    assert!(matches!(
        env.client.get(Some("q"), &before.task.id).await,
        Err(Error::NotFound { .. })
    ));
    assert_eq!(env.stats("q").await.totals["enqueued"], 1);
    // Workers serving "every known queue" find queues through the registry, which the restart
    // emptied: a submit must record its queue there again.
    assert_eq!(env.client.queues().await.unwrap(), vec!["q".to_string()]);
    assert_eq!(
        env.client.get(None, &after.task.id).await.unwrap().id,
        after.task.id
    );
}
