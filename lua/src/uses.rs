//! Tests that the library's declarations are the code's: every script's `-- Uses:` line and every
//! lib file's `-- Needs:` line name exactly the lib files whose names its code uses, and every
//! lib file defines what it provides and nothing else at its top level.

use crate::{all, LibFile, LIB_FILES};
use std::collections::BTreeSet;

/// One token of Lua source: a name, or any other character (spaces, numbers, comments and the
/// contents of strings are skipped).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tok<'a> {
    Name(&'a str),
    Punct(u8),
}

/// The tokens of Lua source `src`.
fn tokens(src: &str) -> Vec<Tok<'_>> {
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
        Some(
            src[at..]
                .find(&close)
                .map_or(b.len(), |e| at + e + close.len()),
        )
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
            out.push(Tok::Punct(b'"'));
        } else if let Some(end) = (c == b'[').then(|| long(i)).flatten() {
            i = end;
            out.push(Tok::Punct(b'"'));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Name(&src[start..i]));
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                i += 1;
            }
        } else {
            if !c.is_ascii_whitespace() {
                out.push(Tok::Punct(c));
            }
            i += 1;
        }
    }
    out
}

/// The names `src` uses in their own right: not a field after `.`, a method after `:` or a key
/// of a table constructor.
fn used(src: &str) -> Vec<&str> {
    let t = tokens(src);
    let mut out = Vec::new();
    for (k, tok) in t.iter().enumerate() {
        let Tok::Name(n) = *tok else { continue };
        let before = |d: usize| k.checked_sub(d).map(|j| t[j]);
        let after = |d: usize| t.get(k + d).copied();
        let field = before(1) == Some(Tok::Punct(b':'))
            || (before(1) == Some(Tok::Punct(b'.')) && before(2) != Some(Tok::Punct(b'.')));
        // A key of a table constructor, `{fields = ...}`.
        let key = matches!(before(1), Some(Tok::Punct(b'{' | b',')))
            && after(1) == Some(Tok::Punct(b'='))
            && after(2) != Some(Tok::Punct(b'='));
        if !field && !key {
            out.push(n);
        }
    }
    out
}

/// The names of the list `a, b, c` of `t` starting at token `k`, into `out`.
fn name_list<'a>(t: &[Tok<'a>], mut k: usize, out: &mut BTreeSet<&'a str>) {
    while let Some(Tok::Name(n)) = t.get(k) {
        out.insert(*n);
        if t.get(k + 1) != Some(&Tok::Punct(b',')) {
            break;
        }
        k += 2;
    }
}

/// The names `src` declares itself: after `local` (and `local function`), the parameters of its
/// functions, and the variables of its `for` loops.
fn declared_here(src: &str) -> BTreeSet<&str> {
    let t = tokens(src);
    let mut out = BTreeSet::new();
    for k in 0..t.len() {
        match t[k] {
            Tok::Name("local") if t.get(k + 1) == Some(&Tok::Name("function")) => {
                name_list(&t, k + 2, &mut out)
            }
            Tok::Name("local") | Tok::Name("for") => name_list(&t, k + 1, &mut out),
            Tok::Name("function") => {
                if let Some(open) = t[k..].iter().position(|x| *x == Tok::Punct(b'(')) {
                    name_list(&t, k + open + 1, &mut out);
                }
            }
            _ => {}
        }
    }
    out
}

/// The lib files other than `own` whose provided names `src` uses (and does not declare
/// itself), in the order of [`LIB_FILES`].
fn referenced(src: &str, own: Option<&str>) -> Vec<&'static str> {
    let mine = declared_here(src);
    let names: BTreeSet<&str> = used(src)
        .into_iter()
        .filter(|n| !mine.contains(n))
        .collect();
    LIB_FILES
        .iter()
        .filter(|f| Some(f.name) != own && f.provides().iter().any(|p| names.contains(p)))
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
        "{what}: its `{line}` line says {declared:?} but its code uses names of {code:?}: \
         add {missing:?}, remove {extra:?}"
    ))
}

// Goal: the tokenizer finds names and skips strings, comments and fields; a file's own
// declarations are found.
#[test]
fn the_tokenizer_skips_strings_comments_and_fields() {
    let src = "local a = k.b .. 'emit' .. \"wake\" -- istr\n--[[ fields ]] x:y(z) --[==[ w\n]==] [[q]] c . d";
    assert_eq!(used(src), ["local", "a", "k", "x", "z", "c"]);
    assert_eq!(used("t = {e = f, g, h == i}"), ["t", "f", "g", "h", "i"]);
    let src = "local function f(p, q) for i, v in pairs(q) do end end local m, n = 1";
    let d: Vec<&str> = declared_here(src).into_iter().collect();
    assert_eq!(d, ["f", "i", "m", "n", "p", "q", "v"]);
}

// Goal: each script declares exactly the lib files whose names its code uses, so its source
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

// Goal: each lib file declares exactly the lib files whose names it uses, and only files before
// it in the canonical order (so the closure, in that order, defines before it uses); no two
// files provide one name.
#[test]
fn every_lib_file_declares_the_lib_files_it_needs() {
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
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
        for p in f.provides() {
            if !seen.insert(p) {
                errors.push(format!(
                    "{what} provides {p}, which an earlier file provides"
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
// its top level is the `local` of the names it provides and one `do` block that defines them,
// constants and functions (the statements at the block's own level are `local` definitions and
// the definitions of the provided names), and it reads KEYS and ARGV only as parameters of its
// functions. (The bounded pure memos of format.lua, keys.lua and events.lua are the exception,
// documented there.)
#[test]
fn lib_files_define_what_they_provide_and_keep_no_call_state() {
    for f in LIB_FILES {
        let provides = f.provides();
        let top = top_level(f);
        assert!(
            top.len() == 3 && top[0].starts_with("local ") && top[1] == "do" && top[2] == "end",
            "lib/{}.lua: its top level must be `local <names>`, `do` ... `end`: {top:?}",
            f.name
        );
        for p in &provides {
            let defined = f.source.contains(&format!("\n  function {p}("))
                || f.source.contains(&format!("\n  {p} = "));
            assert!(
                defined,
                "lib/{}.lua provides {p} but does not define it",
                f.name
            );
        }
        for l in f.source.lines() {
            let Some(stmt) = l.strip_prefix("  ") else {
                continue;
            };
            if stmt.starts_with([' ', '\t', '-']) || stmt.is_empty() {
                continue;
            }
            let ok = ["local ", "function ", "end", "}"]
                .iter()
                .any(|s| stmt.starts_with(s))
                || provides
                    .iter()
                    .any(|p| stmt.starts_with(&format!("{p} = ")));
            assert!(ok, "lib/{}.lua: a statement at load time: {l:?}", f.name);
        }
        for word in ["KEYS", "ARGV"] {
            if used(f.source).contains(&word) {
                assert!(
                    f.source.contains(&format!("({word}")),
                    "lib/{}.lua reads {word} other than as a function parameter",
                    f.name
                );
            }
        }
    }
}
