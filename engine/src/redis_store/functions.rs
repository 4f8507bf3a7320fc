//! Calling the scripts as Redis Functions (`FCALL`), with orq's library loaded where it is
//! missing (docs/design-notes.md, note 44; [`orq_lua::functions`]).
//!
//! A Redis keeps its function libraries in its RDB and AOF files and replicates them, so after a
//! restart with persistence or a failover the library is there. It is missing on a server that
//! never saw it, after a restart without persistence, after `FUNCTION FLUSH`, and on a cluster
//! node that joined later. The first call that meets `ERR Function not found` loads the library
//! on the server that answered it (on a cluster, the primary of the call's slot) and calls again:
//! one extra round trip, as EVALSHA's NOSCRIPT costs. Where the library cannot be loaded, the
//! call goes by EVALSHA/EVAL, so the scripts run either way: for that call when the refusal may
//! pass (out of memory, read-only, loading, a lost connection), for every later call of the store
//! when it will not (a server or proxy without `FUNCTION`, a library the server cannot run).

use super::{script_cmd, RedisStore, Route};
use orq_lua::functions::library;
use orq_lua::Script;
use redis::{ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};
use std::sync::atomic::Ordering;

/// Redis's reply to an FCALL of a function no loaded library registered.
const NOT_FOUND: &str = "Function not found";

/// True when `e` is Redis's `ERR Function not found`.
pub(super) fn is_missing(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::ResponseError) && e.detail() == Some(NOT_FOUND)
}

/// True when `r` is an FCALL's `ERR Function not found`.
pub(super) fn missing(r: &RedisResult<Value>) -> bool {
    matches!(r, Err(e) if is_missing(e))
}

impl RedisStore {
    /// FCALL of `script`'s function; after `Function not found`, the library is loaded on the
    /// primary of `keys[0]`'s slot and the call sent again; when it cannot be loaded, EVALSHA
    /// (then EVAL after NOSCRIPT).
    pub(super) async fn call_function(
        &self,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> RedisResult<Value> {
        if self.library_refused.load(Ordering::Relaxed) {
            return self.call_script(script, keys, args).await;
        }
        let name = library().function(script.name);
        let first = self.run("FCALL", name.as_bytes(), keys, args).await;
        if !missing(&first) {
            return first;
        }
        if self.load_library(&keys[0]).await {
            let again = self.run("FCALL", name.as_bytes(), keys, args).await;
            if !missing(&again) {
                return again;
            }
        }
        self.call_script(script, keys, args).await
    }

    /// `FUNCTION LOAD` of orq's library on the primary of `key`'s slot (the one server
    /// elsewhere): true when it is loaded there now (by this call or an earlier one). A refusal
    /// that will not pass ([`refused_for_good`]) is remembered: no later call tries again.
    pub(super) async fn load_library(&self, key: &str) -> bool {
        let mut cmd = redis::cmd("FUNCTION");
        cmd.arg("LOAD").arg(library().source.as_str());
        match self.query(&cmd, Route::Slot(key)).await {
            Ok(_) => true,
            // Another caller loaded it first.
            Err(e) if e.detail().is_some_and(|d| d.contains("already exists")) => true,
            Err(e) => {
                if refused_for_good(&e) {
                    tracing::warn!(
                        error = %e,
                        "Redis refused orq's function library; scripts are called by EVALSHA"
                    );
                    self.library_refused.store(true, Ordering::Relaxed);
                }
                false
            }
        }
    }

    /// EVALSHA of `script`, then EVAL of its source after NOSCRIPT.
    pub(super) async fn call_script(
        &self,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> RedisResult<Value> {
        match self
            .run("EVALSHA", script.sha1.as_bytes(), keys, args)
            .await
        {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.run("EVAL", script.source.as_bytes(), keys, args).await
            }
            other => other,
        }
    }
}

/// True when a `FUNCTION LOAD` refusal will not pass by itself: the command is unknown (a server
/// before Redis 7, a proxy) or the server could not compile or run the library.
fn refused_for_good(e: &RedisError) -> bool {
    let text = e.to_string();
    [
        "unknown command",
        "Error compiling function",
        "Error registering functions",
    ]
    .iter()
    .any(|t| text.contains(t))
}

/// The FCALL command of `script` (for a pipeline).
pub(super) fn fcall_cmd(script: &'static Script, keys: &[String], args: &[Vec<u8>]) -> redis::Cmd {
    script_cmd(
        "FCALL",
        library().function(script.name).as_bytes(),
        keys,
        args,
    )
}
