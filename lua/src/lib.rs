//! orq's transition scripts and their registry.
//!
//! Every state change of a task is one of the Lua scripts in `lua/scripts/`. They run unchanged in
//! real Redis (EVALSHA) and in the simulator's in-memory Redis model. Each script file starts with
//! a header that is its contract: the keys (`KEYS[i]` with pattern and Redis type), the arguments
//! (`ARGV[i]` with type and unit), the reply shapes, the error codes and the events it emits.
//!
//! Shared helpers live in `lua/scripts/lib.lua`, which is prepended to every script: the source
//! sent to Redis (and hashed) is the facts line ([`facts::lua_table`]: the limits and sentinels
//! written once in `facts.rs`), the stored field names line ([`fields::lua_table`]), `lib.lua`,
//! then the script, each followed by a newline but the last. Nothing else is added, so the SHA1
//! here is the SHA1 Redis computes for `SCRIPT LOAD` of [`Script::source`].

pub mod codes;
pub mod facts;
pub mod fields;
pub mod functions;

use std::sync::LazyLock;

/// The shared helper chunk prepended to every script.
pub const LIB_SOURCE: &str = include_str!("../scripts/lib.lua");

/// One transition (or read) script, ready to send to a store.
#[derive(Debug)]
pub struct Script {
    /// Short name, equal to the file name without `.lua` (`"lease"`).
    pub name: &'static str,
    /// The script's own file, header included, without `lib.lua`.
    pub body: &'static str,
    /// What is sent to the store: [`prelude`], a newline, `lib.lua`, a newline, then `body`.
    pub source: String,
    /// Lowercase hex SHA1 of `source`, as Redis computes it for EVALSHA.
    pub sha1: String,
}

impl Script {
    fn new(name: &'static str, body: &'static str) -> Self {
        let source = format!("{}\n{LIB_SOURCE}\n{body}", prelude());
        let sha1 = sha1_smol::Sha1::from(source.as_bytes())
            .digest()
            .to_string();
        Script {
            name,
            body,
            source,
            sha1,
        }
    }

    /// The header: the leading block of `--` comment lines of the script's own file.
    pub fn header(&self) -> impl Iterator<Item = &'static str> {
        self.body.lines().take_while(|l| l.starts_with("--"))
    }
}

/// The generated lines before `lib.lua`: the facts ([`facts::lua_table`]) and the stored field
/// names ([`fields::lua_table`]), one line each.
pub fn prelude() -> String {
    format!("{}\n{}", facts::lua_table(), fields::lua_table())
}

macro_rules! scripts {
    ($($name:literal),* $(,)?) => {
        /// Names of every script, in registry order.
        pub const NAMES: &[&str] = &[$($name),*];
        static SCRIPTS: LazyLock<Vec<Script>> = LazyLock::new(|| {
            vec![$(Script::new($name, include_str!(concat!("../scripts/", $name, ".lua")))),*]
        });
    };
}

scripts!(
    "enqueue",
    "lease",
    "heartbeat",
    "complete",
    "complete_batch",
    "fail",
    "release",
    "promote",
    "reap",
    "cancel",
    "replay",
    "purge",
    "get",
    "list",
    "stats",
    "queues",
    "configure",
    "events",
    "workers",
);

/// Every script, in registry order.
pub fn all() -> &'static [Script] {
    &SCRIPTS
}

/// The script called `name`, or `None` when there is none.
pub fn get(name: &str) -> Option<&'static Script> {
    SCRIPTS.iter().find(|s| s.name == name)
}

/// The script called `name`.
///
/// # Panics
/// When no script has that name: script names are compile-time facts of the engine, so an
/// unknown name is a programmer error.
pub fn script(name: &str) -> &'static Script {
    get(name).unwrap_or_else(|| panic!("no transition script named {name:?}"))
}

/// The queue key set as `lib.lua` documents it: `(index, pattern)` pairs such as
/// `(5, "orq:{q}:leases")`, read from the header of `lib.lua` so the file stays the one source.
pub fn queue_key_layout() -> Vec<(usize, String)> {
    LIB_SOURCE
        .lines()
        .take_while(|l| l.starts_with("--"))
        .filter_map(parse_key_line)
        .map(|(i, pattern, _)| (i, pattern))
        .collect()
}

/// Parse a header line `--   KEYS[5]  orq:{q}:leases  ZSET ...` into (5, pattern, rest).
fn parse_key_line(line: &str) -> Option<(usize, String, String)> {
    let rest = line.trim_start_matches('-').trim_start();
    let rest = rest.strip_prefix("KEYS[")?;
    let (idx, rest) = rest.split_once(']')?;
    let idx: usize = idx.parse().ok()?;
    let mut parts = rest.split_whitespace();
    let pattern = parts.next()?.to_string();
    let desc = parts.collect::<Vec<_>>().join(" ");
    Some((idx, pattern, desc))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: every script file has the documented header sections, and every KEYS[i] a header
    // names is the same pattern the shared queue key layout gives for i.
    #[test]
    fn every_header_documents_keys_argv_returns_errors_emits() {
        let layout = queue_key_layout();
        assert_eq!(layout.len(), 16, "lib.lua documents 16 queue keys");
        for s in all() {
            let header: Vec<&str> = s.header().collect();
            let text = header.join("\n");
            for section in ["KEYS", "ARGV", "Returns", "Errors:", "Emits:"] {
                assert!(text.contains(section), "{}: header lacks {section}", s.name);
            }
            if s.name == "queues" {
                continue; // the only script outside the queue key set
            }
            let mut documented = 0;
            for line in &header {
                if let Some((i, pattern, desc)) = parse_key_line(line) {
                    documented += 1;
                    let want = layout.iter().find(|(j, _)| *j == i).map(|(_, p)| p);
                    assert_eq!(want, Some(&pattern), "{}: KEYS[{i}]", s.name);
                    assert!(!desc.is_empty(), "{}: KEYS[{i}] has no type", s.name);
                }
            }
            assert!(documented > 0, "{}: documents no KEYS", s.name);
        }
    }

    // Goal: the SHA1 is of the exact source sent, so EVALSHA finds what SCRIPT LOAD stored.
    #[test]
    fn sha1_is_of_the_full_source() {
        let s = script("get");
        assert!(s
            .source
            .starts_with(&format!("{}\n{LIB_SOURCE}", prelude())));
        assert!(s.source.ends_with(s.body));
        assert_eq!(
            s.sha1,
            sha1_smol::Sha1::from(s.source.as_bytes())
                .digest()
                .to_string()
        );
        assert_eq!(s.sha1.len(), 40);
        assert_eq!(NAMES.len(), all().len());
    }
}
