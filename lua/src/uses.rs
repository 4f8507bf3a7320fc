//! Tests that the library's declarations are the code's: every script's `-- Uses:` line and every
//! lib file's `-- Needs:` line name exactly the lib modules its code refers to, and every lib
//! file defines its module and nothing else at its top level.

use crate::{all, LibFile, LIB_FILES};
use std::collections::BTreeSet;

/// The identifiers of Lua source `src` that are names in their own right (not a field after `.`
/// or a method after `:`), outside comments and strings, in order.
fn names(src: &str) -> Vec<&str> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    // Where a long bracket `[==[` opening at `at` ends (past its `]==]`), if it is one.
    let long = |at: usize| -> Option<usize> {
        let eq = b[at + 1..].iter().take_while(|&&c| c == b'=').count();
        if b.get(at + 1 + eq) != Some(&b'[') {
            return None;
        }
        let close = format!("]{}]", "=".repeat(eq));
        let end = src[at..]
            .find(&close)
            .map_or(b.len(), |e| at + e + close.len());
        Some(end)
    };
    while i < b.len() {
        let c = b[i];
        if src[i..].starts_with("--") {
            i = match (b.get(i + 2) == Some(&b'[')).then(|| long(i + 2)).flatten() {
                Some(end) => end,
                None => src[i..].find('\n').map_or(b.len(), |e| i + e),
            };
        } else if c == b'\'' || c == b'"' {
            i += 1;
            while i < b.len() && b[i] != c {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == b'[' && long(i).is_some() {
            i = long(i).unwrap_or(b.len());
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let before = src[..start].trim_end_matches([' ', '\t']);
            let field = (before.ends_with('.') && !before.ends_with("..")) || before.ends_with(':');
            if !field {
                out.push(&src[start..i]);
            }
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The lib files whose module `src` refers to, other than `own`, in the order of [`LIB_FILES`].
fn referenced(src: &str, own: Option<&str>) -> Vec<&'static str> {
    let used: BTreeSet<&str> = names(src).into_iter().collect();
    LIB_FILES
        .iter()
        .filter(|f| Some(f.name) != own && used.contains(f.module().as_str()))
        .map(|f| f.name)
        .collect()
}

/// What is wrong with a declaration `declared` against the files `code` refers to, or `None`.
fn mismatch(what: &str, line: &str, declared: &[&str], code: &[&str]) -> Option<String> {
    let missing: Vec<&&str> = code.iter().filter(|f| !declared.contains(f)).collect();
    let extra: Vec<&&str> = declared.iter().filter(|f| !code.contains(f)).collect();
    if missing.is_empty() && extra.is_empty() {
        return None;
    }
    Some(format!(
        "{what}: its `{line}` line says {declared:?} but its code refers to the modules of \
         {code:?}: add {missing:?}, remove {extra:?}"
    ))
}

// Goal: the tokenizer finds names and skips strings, comments and fields.
#[test]
fn the_tokenizer_skips_strings_comments_and_fields() {
    let src = "local a = Keys.b .. 'Events' .. \"Park\" -- Ready\n--[[ Task ]] x:Lease(y) --[==[ Z\n]==] [[Q]] c . d";
    assert_eq!(names(src), ["local", "a", "Keys", "x", "y", "c"]);
}

// Goal: each script declares exactly the lib files whose modules its code names, so its source
// holds what it needs and nothing it does not (smaller scripts pay less to run their top level).
#[test]
fn every_script_declares_the_lib_files_it_uses() {
    let mut errors = Vec::new();
    for s in all() {
        let declared = crate::library::declared(s.body, "-- Uses:").unwrap_or_default();
        let code = referenced(s.body, None);
        errors.extend(mismatch(
            &format!("{}.lua", s.name),
            "-- Uses:",
            &declared,
            &code,
        ));
    }
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

// Goal: each lib file declares exactly the lib files whose modules it names, and only files
// before it in the canonical order (so the closure, in that order, defines before it uses).
#[test]
fn every_lib_file_declares_the_lib_files_it_needs() {
    let mut errors = Vec::new();
    for (i, f) in LIB_FILES.iter().enumerate() {
        let code = referenced(f.source, Some(f.name));
        let what = format!("lib/{}.lua", f.name);
        errors.extend(mismatch(&what, "-- Needs:", &f.needs(), &code));
        for n in f.needs() {
            if !LIB_FILES[..i].iter().any(|g| g.name == n) {
                errors.push(format!(
                    "{what} needs {n}, which is not before it in LIB_FILES"
                ));
            }
        }
    }
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

/// The lines of `f` at its top level (not indented), without comments and blank lines.
fn top_level(f: &LibFile) -> Vec<&'static str> {
    f.source
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with([' ', '\t']) && !l.starts_with("--"))
        .collect()
}

// Goal: no lib file keeps state between calls or reads a call's KEYS or ARGV when it is loaded:
// its top level is `local <Module>` and one `do` block that defines constants and functions
// (the statements at the block's own level are `local` definitions and the module table) and
// reads KEYS and ARGV only as parameters of its functions. (The bounded pure memos of
// format.lua and events.lua are the exception, documented there.)
#[test]
fn lib_files_define_one_module_and_keep_no_call_state() {
    for f in LIB_FILES {
        let m = f.module();
        assert_eq!(
            top_level(f),
            [format!("local {m}").as_str(), "do", "end"],
            "lib/{}.lua: its top level must be `local {m}`, `do` ... `end`",
            f.name
        );
        let export = format!("  {m} = {{");
        assert!(
            f.source.contains(&export),
            "lib/{}.lua: no `{export}`",
            f.name
        );
        for l in f.source.lines() {
            let Some(stmt) = l.strip_prefix("  ") else {
                continue;
            };
            if stmt.starts_with([' ', '\t', '-']) || stmt.is_empty() {
                continue;
            }
            let ok = stmt.starts_with("local ")
                || stmt.starts_with("end")
                || stmt.starts_with('}')
                || stmt.starts_with(&format!("{m} = {{"));
            assert!(ok, "lib/{}.lua: a statement at load time: {l:?}", f.name);
        }
        for word in ["KEYS", "ARGV"] {
            if names(f.source).contains(&word) {
                assert!(
                    f.source.contains(&format!("({word}")),
                    "lib/{}.lua reads {word} other than as a function parameter",
                    f.name
                );
            }
        }
    }
}
