//! The RESP reply type that every store returns, and small accessors used by the decoders.

/// A script reply, as Redis sends it over RESP2 (and as the simulator produces it).
///
/// Lua → RESP conversions follow Redis: numbers become `Int` (truncated), strings `Bulk`,
/// tables `Array` (up to the first nil), `false` becomes `Nil`, `{ok=..}` `Status` and
/// `{err=..}` / `redis.error_reply(..)` `Error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resp {
    /// A nil bulk reply.
    Nil,
    /// An integer reply.
    Int(i64),
    /// A bulk string reply (binary safe).
    Bulk(Vec<u8>),
    /// A status reply (`+OK`).
    Status(String),
    /// An error reply, the full text including the leading code word (`"STALE lease ..."`).
    Error(String),
    /// An array reply.
    Array(Vec<Resp>),
}

impl Resp {
    /// The integer value of an `Int`, or of a `Bulk` holding a decimal integer.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Resp::Int(n) => Some(*n),
            Resp::Bulk(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        }
    }

    /// The bytes of a `Bulk` or `Status`.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Resp::Bulk(b) => Some(b),
            Resp::Status(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    /// The text of a `Bulk` or `Status` when it is UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(self.as_bytes()?).ok()
    }

    /// The items of an `Array`.
    pub fn as_array(&self) -> Option<&[Resp]> {
        match self {
            Resp::Array(items) => Some(items),
            _ => None,
        }
    }
}
