//! The `Store` trait: the one operation the engine needs from Redis or its model.

use crate::resp::Resp;
use async_trait::async_trait;
use orq_lua::Script;

/// A store failed to run a script: it was unreachable, or the connection dropped mid-call (then
/// the script may or may not have run: a lost reply).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// Runs transition scripts atomically. Implemented by [`crate::RedisStore`] and by the
/// simulator's in-memory Redis model (`orq-sim`).
///
/// Script errors (`redis.error_reply`, a failing `redis.call`) are replies, `Ok(Resp::Error(..))`;
/// `Err` means the store itself failed.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Run `script` with `keys` (KEYS) and `args` (ARGV) as one atomic unit and return its reply.
    async fn eval(
        &self,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<Resp, StoreError>;
}
