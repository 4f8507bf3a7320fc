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
/// A connection the server refused to authenticate is the reply `WRONGPASS ...`: the `redis`
/// crate turns the server's answer to `AUTH` into [`redis::ErrorKind::AuthenticationFailed`]
/// without its word, and a refused authentication ran nothing, like the refusals the engine
/// classifies as transient (engine/src/failure.rs).
pub(super) fn error_reply(e: &redis::RedisError) -> Option<Resp> {
    if authentication_failed(e) {
        return Some(Resp::Error(format!(
            "WRONGPASS the server refused orq's credentials ({e})"
        )));
    }
    let code = e.code()?;
    Some(Resp::Error(match e.detail() {
        Some(d) => format!("{code} {d}"),
        None => code.to_string(),
    }))
}

/// Whether `e` is the `redis` crate's failure to authenticate a new connection (the server
/// refused `AUTH`), also when the cluster client wraps it into its own error (whose text keeps
/// the kind's name).
pub(super) fn authentication_failed(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::AuthenticationFailed
        || e.to_string().contains("AuthenticationFailed")
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

    // Goal: a connection the server refused to authenticate reaches the engine as a WRONGPASS
    // reply (transient, naming the refusal), directly and as the cluster client wraps it, and
    // the server's own WRONGPASS, NOAUTH and NOPERM replies keep their words.
    #[test]
    fn authentication_refusals_become_transient_error_replies() {
        let direct = redis::RedisError::from((
            redis::ErrorKind::AuthenticationFailed,
            "Password authentication failed",
        ));
        let wrapped = redis::RedisError::from((
            redis::ErrorKind::Io,
            "Failed to create initial connections",
            direct.to_string(),
        ));
        for e in [direct, wrapped] {
            let Some(Resp::Error(text)) = error_reply(&e) else {
                panic!("{e}: not an error reply");
            };
            assert_eq!(
                Transient::of_reply(&text),
                Some(Transient::WrongPass),
                "{text}"
            );
        }
        for (wire, want) in [
            (
                "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
                Transient::WrongPass,
            ),
            ("-NOAUTH Authentication required.\r\n", Transient::NoAuth),
            (
                "-NOPERM User orq has no permissions to run the 'fcall' command\r\n",
                Transient::NoPerm,
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
        }
        let lost =
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(error_reply(&lost).is_none());
    }
}
