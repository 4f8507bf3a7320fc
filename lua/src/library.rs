//! The shared helper library, `lua/scripts/lib/*.lua`, and which of its files a script gets.
//!
//! Each lib file holds one concern. Its header says what it provides, the files it needs
//! (`-- Needs: format, keys`, or `nothing`) and the per-call state it keeps in the context
//! (`lib/ctx.lua`); its first line of code declares the names it provides (`local emit,
//! defer_events, flush_events`), and one `do` block defines them, its other locals private.
//! Each script declares the files it uses in its header (`-- Uses: ctx, keys`). A script's
//! source holds exactly the closure of its declared files under `Needs`, in the canonical order
//! of [`LIB_FILES`]. The declarations are checked against the code by the tests of `crate::uses`
//! (a file or script naming what a file provides without declaring that file, or declaring a
//! file whose names it does not use, fails).

/// One file of the shared helper library, `lua/scripts/lib/<name>.lua`.
#[derive(Debug)]
pub struct LibFile {
    /// The file name without `.lua` (`"events"`).
    pub name: &'static str,
    /// The file's text, header included.
    pub source: &'static str,
}

impl LibFile {
    /// The names the file provides: those of its first `local` statement at the top level
    /// (which may go on over indented lines), before its `do` block.
    pub fn provides(&self) -> Vec<&'static str> {
        let mut lines = self.source.lines().skip_while(|l| !l.starts_with("local "));
        let mut names = Vec::new();
        if let Some(first) = lines.next() {
            let rest = lines.take_while(|l| l.starts_with(' '));
            for part in std::iter::once(&first["local ".len()..]).chain(rest) {
                names.extend(part.split(',').map(str::trim).filter(|n| !n.is_empty()));
            }
        }
        names
    }

    /// The lib files this file needs, from its `-- Needs:` header line.
    ///
    /// # Panics
    /// When the file has no such line (a test of this crate checks every file has one).
    pub fn needs(&self) -> Vec<&'static str> {
        declared(self.source, "-- Needs:")
            .unwrap_or_else(|| panic!("lib/{}.lua has no `-- Needs:` line", self.name))
    }
}

macro_rules! lib_files {
    ($($name:literal),* $(,)?) => {
        /// The library's files in their canonical order: a file comes after every file it needs,
        /// and a script's source holds its lib files in this order.
        pub const LIB_FILES: &[LibFile] = &[$(LibFile {
            name: $name,
            source: include_str!(concat!("../scripts/lib/", $name, ".lua")),
        }),*];
    };
}

lib_files!(
    "ctx",
    "format",
    "args",
    "keys",
    "counters",
    "events",
    "park",
    "status",
    "task",
    "ready",
    "retry",
    "workers",
    "maintenance",
    "limits",
    "capped",
    "outcome",
    "lease",
);

/// The lib file called `name`, or `None`.
pub fn lib_file(name: &str) -> Option<&'static LibFile> {
    LIB_FILES.iter().find(|f| f.name == name)
}

/// The names listed on the header line that starts with `prefix` (`-- Uses:`, `-- Needs:`) in
/// the leading comment block of `text`; `nothing` is the empty list. `None` without such a line.
pub fn declared(text: &'static str, prefix: &str) -> Option<Vec<&'static str>> {
    let line = text
        .lines()
        .take_while(|l| l.starts_with("--"))
        .find_map(|l| l.strip_prefix(prefix))?
        .trim();
    if line == "nothing" {
        return Some(Vec::new());
    }
    Some(line.split(',').map(str::trim).collect())
}

/// The lib files a script whose own file is `body` runs with: the files its `-- Uses:` line
/// names and, transitively, the files they need, in the order of [`LIB_FILES`].
///
/// # Panics
/// When the script declares no `-- Uses:` line or names a file that does not exist: both are
/// programmer errors, found by any test that builds the registry.
pub fn closure(script: &str, body: &'static str) -> Vec<&'static LibFile> {
    let uses = declared(body, "-- Uses:")
        .unwrap_or_else(|| panic!("{script}.lua has no `-- Uses:` line in its header"));
    let mut want: Vec<&str> = Vec::new();
    let mut todo = uses;
    while let Some(name) = todo.pop() {
        if want.contains(&name) {
            continue;
        }
        let file = lib_file(name)
            .unwrap_or_else(|| panic!("{script}: no lib file named {name:?} (lua/scripts/lib)"));
        want.push(name);
        todo.extend(file.needs());
    }
    LIB_FILES
        .iter()
        .filter(|f| want.contains(&f.name))
        .collect()
}
