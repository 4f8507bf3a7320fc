//! orq's scripts as one Redis Functions library (docs/design-notes.md, note 44).
//!
//! The library's code is its metadata line `#!lua name=<library>`, the generated prelude, every
//! shared lib file once, then each script's body wrapped as
//! `function(KEYS, ARGV) <body> end` and registered as `<library>_<script>`: a script's body
//! reads `KEYS` and `ARGV` as it does under EVAL, now as the function's parameters. The library is
//! named `orq_` and the first 12 hex digits of the SHA1 of everything after its metadata line, so
//! two orq builds whose scripts differ can share one Redis (a rolling upgrade): each loads its own
//! library and calls its own functions, and neither replaces the other's.
//!
//! Redis runs a library's top level once, at `FUNCTION LOAD`, seeing only
//! `redis.register_function` (no `string`, `math`, `tonumber`, no `KEYS`): the lib files define
//! only constants, tables and functions at their top level, and keep a call's state in its context
//! (`lib/ctx.lua`), so calls share nothing mutable.
//!
//! Scripts that only read are registered with the `no-writes` flag ([`READ_ONLY`]): Redis refuses
//! any write inside them, and `FCALL_RO` may run them on a replica.

use std::sync::LazyLock;

/// Whether the stores call the scripts as functions (`FCALL`, with the library loaded on demand)
/// rather than by `EVALSHA`. One switch, so the paired benchmark can build both designs.
pub const BY_FUNCTION: bool = true;

/// The scripts that never write: registered `no-writes`.
pub const READ_ONLY: &[&str] = &["get", "list", "stats", "events", "workers"];

/// The scripts called by EVALSHA although [`BY_FUNCTION`] is on, and left out of the library:
/// `queues` writes in some modes (add, probe, a first format) and only reads in others (list, a
/// stored format). Redis refuses a function that may write up front under OOM, READONLY and
/// NOREPLICAS, but judges an EVAL script's writes as they happen, so by EVALSHA the list and a
/// stored format still answer on a full Redis or a replica, as workers and readers need.
pub const BY_EVAL: &[&str] = &["queues"];

/// Whether the stores call `script` as a function of the library (FCALL) rather than by EVALSHA.
pub fn by_function(script: &str) -> bool {
    BY_FUNCTION && !BY_EVAL.contains(&script)
}

/// The library: its name, its code for `FUNCTION LOAD`, and each script's function name.
#[derive(Debug)]
pub struct Library {
    /// `orq_<12 hex digits>`: the library's name in `FUNCTION LOAD` and `FUNCTION LIST`.
    pub name: String,
    /// The code sent with `FUNCTION LOAD`, metadata line first.
    pub source: String,
    /// `(script name, function name)`, in registry order ([`BY_EVAL`] left out).
    functions: Vec<(&'static str, String)>,
}

impl Library {
    /// The function name of `script` (`orq_<hash>_<script>`).
    ///
    /// # Panics
    /// When no function has that name: no script has it, or it is one of [`BY_EVAL`] (both are
    /// compile-time facts of the engine).
    pub fn function(&self, script: &str) -> &str {
        self.functions
            .iter()
            .find(|(s, _)| *s == script)
            .map(|(_, f)| f.as_str())
            .unwrap_or_else(|| panic!("no transition script named {script:?}"))
    }
}

static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    let libs: Vec<&str> = crate::LIB_FILES.iter().map(|f| f.source).collect();
    build(&crate::prelude(), &libs)
});

/// The library of every script.
pub fn library() -> &'static Library {
    &LIBRARY
}

/// The library of the scripts of [`crate::all`] over `prelude` and the lib files `libs`.
fn build(prelude: &str, libs: &[&str]) -> Library {
    let mut body = String::from(prelude);
    for lib in libs {
        body.push('\n');
        body.push_str(lib);
    }
    let mut registrations = String::new();
    let mut names = Vec::new();
    for s in crate::all().iter().filter(|s| !BY_EVAL.contains(&s.name)) {
        let flags = if READ_ONLY.contains(&s.name) {
            ", flags = {'no-writes'}"
        } else {
            ""
        };
        names.push((s.name, flags));
        registrations.push_str(&format!(
            "\nredis.register_function{{function_name = FUNCTION_PREFIX .. '{}'{flags}, \
             callback = function(KEYS, ARGV)\n{}\nend}}",
            s.name, s.body
        ));
    }
    body.push_str(&registrations);
    let hash = sha1_smol::Sha1::from(body.as_bytes()).digest().to_string();
    let name = format!("orq_{}", &hash[..12]);
    let source = format!("#!lua name={name}\nlocal FUNCTION_PREFIX = '{name}_'\n{body}");
    Library {
        functions: names
            .into_iter()
            .map(|(s, _)| (s, format!("{name}_{s}")))
            .collect(),
        name,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: every script has a function named after the library, and the library's name is of
    // its content.
    #[test]
    fn every_script_is_a_function_of_a_library_named_by_its_content() {
        let lib = library();
        assert!(
            lib.name.starts_with("orq_") && lib.name.len() == 16,
            "{}",
            lib.name
        );
        assert!(lib
            .source
            .starts_with(&format!("#!lua name={}\n", lib.name)));
        for s in crate::all() {
            if BY_EVAL.contains(&s.name) {
                assert!(!lib.source.contains(s.body), "{}: in the library", s.name);
                continue;
            }
            let f = lib.function(s.name);
            assert_eq!(f, format!("{}_{}", lib.name, s.name));
            assert!(
                lib.source.contains(s.body),
                "{}: body not in the library",
                s.name
            );
        }
        let other = build("local X = 1", &[]);
        assert_ne!(other.name, lib.name);
        for ro in READ_ONLY {
            assert!(
                crate::get(ro).is_some(),
                "READ_ONLY names {ro}, not a script"
            );
        }
    }
}
