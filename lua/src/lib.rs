//! orq's transition scripts and their registry.
//!
//! Every state change of a task is one of the Lua scripts in `lua/scripts/`. They run unchanged in
//! real Redis and in the simulator's in-memory Redis model, as functions of one Redis Functions
//! library ([`functions`]: FCALL) or, where a server refuses FUNCTION, by EVALSHA of each script's
//! own source ([`Script::source`]). Each script file starts with
//! a header that is its contract: the keys (`KEYS[i]` with pattern and Redis type), the arguments
//! (`ARGV[i]` with type and unit), the reply shapes, the error codes and the events it emits.
//!
//! Shared helpers live in the library `lua/scripts/lib/`, one concern per file, each declaring
//! the names it provides on its first line of code (`lib/events.lua`: `local has_separator,
//! defer_events, emit, flush_events`) and keeping no state between calls: a script makes a
//! per-call context (`local c = new_ctx(KEYS)`, `lib/ctx.lua`) and passes it to the helpers
//! that read the queue keys or keep state for the call. Each script's header names
//! the lib files it uses (`-- Uses: ctx, format, keys`); see [`library`]. The source sent to
//! Redis (and hashed) is the facts line ([`facts::lua_table`]: the limits and sentinels written
//! once in `facts.rs`), the stored field names line ([`fields::lua_table`]), the lib files the
//! script uses (their closure under `-- Needs:`, in the order of [`LIB_FILES`]), then the
//! script, each followed by a newline but the last. Nothing else is added, so the SHA1 here is
//! the SHA1 Redis computes for `SCRIPT LOAD` of [`Script::source`].

pub mod codes;
pub mod facts;
pub mod fields;
pub mod functions;
pub mod library;
#[cfg(test)]
mod uses;

pub use library::{lib_file, LibFile, LIB_FILES};

use std::sync::LazyLock;

/// One transition (or read) script, ready to send to a store.
#[derive(Debug)]
pub struct Script {
    /// Short name, equal to the file name without `.lua` (`"lease"`).
    pub name: &'static str,
    /// The script's own file, header included, without the lib files.
    pub body: &'static str,
    /// The lib files its source holds ([`library::closure`] of its `-- Uses:` line), in order.
    pub lib: Vec<&'static str>,
    /// What is sent to the store: [`prelude`], then each of the `lib` files and `body`, each
    /// after a newline.
    pub source: String,
    /// Lowercase hex SHA1 of `source`, as Redis computes it for EVALSHA.
    pub sha1: String,
}

impl Script {
    fn new(name: &'static str, body: &'static str) -> Self {
        let files = library::closure(name, body);
        let mut source = prelude();
        for f in &files {
            source.push('\n');
            source.push_str(f.source);
        }
        source.push('\n');
        source.push_str(body);
        let sha1 = sha1_smol::Sha1::from(source.as_bytes())
            .digest()
            .to_string();
        Script {
            name,
            body,
            lib: files.iter().map(|f| f.name).collect(),
            source,
            sha1,
        }
    }

    /// The header: the leading block of `--` comment lines of the script's own file.
    pub fn header(&self) -> impl Iterator<Item = &'static str> {
        self.body.lines().take_while(|l| l.starts_with("--"))
    }
}

/// The generated lines before the lib files: the facts ([`facts::lua_table`]) and the stored field
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

/// The queue key set as `lib/keys.lua` documents it: `(index, pattern)` pairs such as
/// `(5, "orq:{q}:leases")`, read from the header of `lib/keys.lua` so the file stays the one
/// source.
pub fn queue_key_layout() -> Vec<(usize, String)> {
    lib_file("keys")
        .expect("lib/keys.lua")
        .source
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
        assert_eq!(layout.len(), 16, "lib/keys.lua documents 16 queue keys");
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
        assert_eq!(s.lib, ["ctx", "format", "args", "keys", "task"]);
        let mut want = prelude();
        for name in &s.lib {
            want = format!("{want}\n{}", lib_file(name).expect("a lib file").source);
        }
        assert_eq!(s.source, format!("{want}\n{}", s.body));
        assert_eq!(
            s.sha1,
            sha1_smol::Sha1::from(s.source.as_bytes())
                .digest()
                .to_string()
        );
        assert_eq!(s.sha1.len(), 40);
        assert_eq!(NAMES.len(), all().len());
    }

    // Goal: a script's source holds what it declares and everything that needs, once each, in
    // the canonical order, and nothing else.
    #[test]
    fn every_source_holds_the_closure_of_its_uses_in_order() {
        for s in all() {
            let uses = library::declared(s.body, "-- Uses:").expect("a Uses line");
            for u in &uses {
                assert!(s.lib.contains(u), "{}: declares {u} but lacks it", s.name);
            }
            for name in &s.lib {
                for n in lib_file(name).expect("a lib file").needs() {
                    assert!(s.lib.contains(&n), "{}: has {name} but not {n}", s.name);
                }
                let wanted = uses.contains(name)
                    || s.lib
                        .iter()
                        .any(|o| lib_file(o).is_some_and(|f| f.needs().contains(name)));
                assert!(
                    wanted,
                    "{}: holds {name}, which nothing it uses needs",
                    s.name
                );
            }
            let order: Vec<&str> = LIB_FILES
                .iter()
                .map(|f| f.name)
                .filter(|n| s.lib.contains(n))
                .collect();
            assert_eq!(s.lib, order, "{}: not in LIB_FILES order", s.name);
        }
        // The smallest closures stay small: a read needs neither events nor lease.
        assert!(!script("get").lib.contains(&"events"));
        assert!(script("complete_batch").lib.contains(&"lease"));
    }
}
