//! Conversion of the `redis` crate's replies and errors into the engine's RESP type.

use crate::resp::Resp;
use redis::Value;

/// Convert a `redis` value into the engine's RESP type.
pub(super) fn to_resp(v: Value) -> Resp {
    match v {
        Value::Nil => Resp::Nil,
        Value::Int(n) => Resp::Int(n),
        Value::BulkString(b) => Resp::Bulk(b),
        Value::Array(items) | Value::Set(items) => {
            Resp::Array(items.into_iter().map(to_resp).collect())
        }
        Value::SimpleString(s) => Resp::Status(s),
        Value::Okay => Resp::Status("OK".into()),
        Value::Boolean(b) => Resp::Int(i64::from(b)),
        Value::Double(d) => Resp::Bulk(d.to_string().into_bytes()),
        Value::ServerError(e) => Resp::Error(match e.details() {
            Some(d) => format!("{} {d}", e.code()),
            None => e.code().to_string(),
        }),
        other => Resp::Error(format!("ERR unsupported reply {other:?}")),
    }
}

/// A server error reply as `Resp::Error`, or `None` when the error is not a reply (I/O, ...).
pub(super) fn error_reply(e: &redis::RedisError) -> Option<Resp> {
    let code = e.code()?;
    Some(Resp::Error(match e.detail() {
        Some(d) => format!("{code} {d}"),
        None => code.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::Transient;

    // Goal: what the cluster client hands back once its own retries are spent (the server's
    // TRYAGAIN or CLUSTERDOWN as a RedisError) reaches the engine as the error reply, which
    // failure.rs classifies as transient.
    #[test]
    fn cluster_refusals_become_transient_error_replies() {
        for (wire, want) in [
            (
                "-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
                Transient::TryAgain,
            ),
            (
                "-CLUSTERDOWN The cluster is down\r\n",
                Transient::ClusterDown,
            ),
            ("-MOVED 3999 127.0.0.1:6381\r\n", Transient::Moved),
            ("-ASK 3999 127.0.0.1:6381\r\n", Transient::Ask),
            (
                "-MASTERDOWN Link with MASTER is down\r\n",
                Transient::MasterDown,
            ),
        ] {
            let e = redis::parse_redis_value(wire.as_bytes())
                .unwrap()
                .extract_error()
                .expect_err(wire);
            let Some(Resp::Error(text)) = error_reply(&e) else {
                panic!("{wire}: not an error reply");
            };
            assert_eq!(Transient::of_reply(&text), Some(want), "{text}");
            assert!(text.len() > want.word().len() + 1, "detail kept: {text}");
        }
    }
}
