//! Reading a config file (`orq.toml`): its top-level keys and its role tables (`[worker]`, ...),
//! each value with the line it is on, so that every later error names the file, the line and the
//! key. Which keys exist is not known here: [`super::merge`] checks them against the command line.

use std::collections::BTreeMap;
use std::path::Path;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// Largest config file read (bytes): far above any real one, so that a wrong path (a log, a
/// device) is refused at once instead of read whole.
pub const FILE_BYTES_MAX: u64 = 1 << 20;

/// One `key = value` of the file, its value as the command-line words it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The key: a flag's long name without its dashes (`concurrency`, `wait-replicas`).
    pub key: String,
    /// The value as command-line words: a string or a number is one word, an array one word per
    /// element, `true` is the word `true` (a switch such as `insecure-no-auth` is given when
    /// true and left out when false, see [`super::merge`]).
    pub words: Vec<String>,
    /// Whether the value was a TOML boolean.
    pub boolean: bool,
    /// Whether the value was a TOML array (even of one element).
    pub array: bool,
    /// `FILE:LINE` of the key, for messages.
    pub at: String,
}

/// A parsed config file: the top-level entries and each role table's entries.
#[derive(Debug, Clone, Default)]
pub struct File {
    /// Entries outside any table: for every role that has the key.
    pub top: Vec<Entry>,
    /// `[role]` tables by name (`serve`, `api`, `worker`, `scheduler`), with the `FILE:LINE` of
    /// the table's header: entries for that role only, over the top-level ones.
    pub tables: BTreeMap<String, (String, Vec<Entry>)>,
}

/// Read and parse `path`. Errors (for the user, exit code 2): the file cannot be read, is too
/// big, is not TOML (`FILE:LINE:COLUMN: message`), or holds a value no command line can take
/// (a float, a date, a nested table, an array of arrays), named by `FILE:LINE: key`.
pub fn read(path: &Path) -> Result<File, String> {
    let shown = path.display().to_string();
    let cannot = |e: std::io::Error| format!("config file {shown}: cannot read it: {e}");
    if std::fs::metadata(path).map_err(cannot)?.is_dir() {
        return Err(format!("config file {shown}: a directory, not a file"));
    }
    // Read at most one byte more than allowed: a pipe (`--config <(...)`) has no size to check
    // first.
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(
            std::fs::File::open(path).map_err(cannot)?,
            FILE_BYTES_MAX + 1,
        ),
        &mut bytes,
    )
    .map_err(cannot)?;
    if bytes.len() as u64 > FILE_BYTES_MAX {
        return Err(format!(
            "config file {shown}: more than the {FILE_BYTES_MAX} bytes a config file may have"
        ));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("config file {shown}: not UTF-8 text (a TOML file is UTF-8)"))?;
    parse(&shown, &text)
}

/// Parse the text of a config file named `name` (see [`read`]).
pub fn parse(name: &str, text: &str) -> Result<File, String> {
    let lines = Lines::new(name, text);
    let doc = DeTable::parse(text).map_err(|e| {
        let at = e
            .span()
            .map(|s| lines.at_column(s.start))
            .unwrap_or_else(|| name.to_string());
        let message = e.message().trim_end();
        // The parser names no key: a duplicate's span is the key, so name it.
        let key = e
            .span()
            .and_then(|s| text.get(s))
            .map(str::trim)
            .filter(|k| message == "duplicate key" && !k.is_empty() && !k.contains('\n'));
        match key {
            Some(k) => format!("{at}: not valid TOML: duplicate key {k} (a key is set once)"),
            None => format!("{at}: not valid TOML: {message}"),
        }
    })?;
    let mut file = File::default();
    // In the file's order (the parsed table is sorted by key), so the first error reported is
    // the first in the file.
    for (key, value) in in_order(doc.get_ref()) {
        let at = lines.at(key.span().start);
        match value.get_ref() {
            DeValue::Table(table) => {
                let entries = in_order(table)
                    .into_iter()
                    .map(|(k, v)| entry(&lines, &format!("{}.", key.get_ref()), k, v))
                    .collect::<Result<Vec<_>, _>>()?;
                file.tables.insert(key.get_ref().to_string(), (at, entries));
            }
            _ => file.top.push(entry(&lines, "", key, value)?),
        }
    }
    Ok(file)
}

/// The keys and values of `t` in the file's order.
fn in_order<'t, 'i>(
    t: &'t DeTable<'i>,
) -> Vec<(
    &'t Spanned<std::borrow::Cow<'i, str>>,
    &'t Spanned<DeValue<'i>>,
)> {
    let mut v: Vec<_> = t.iter().collect();
    v.sort_by_key(|(k, _)| k.span().start);
    v
}

/// One entry; `prefix` is `"worker."` inside `[worker]`, for messages.
fn entry(
    lines: &Lines,
    prefix: &str,
    key: &Spanned<std::borrow::Cow<'_, str>>,
    value: &Spanned<DeValue<'_>>,
) -> Result<Entry, String> {
    let at = lines.at(key.span().start);
    let name = key.get_ref().to_string();
    let bad = |what: &str| format!("{at}: {prefix}{name}: {what}");
    let array = matches!(value.get_ref(), DeValue::Array(_));
    let (words, boolean) =
        match value.get_ref() {
            DeValue::Array(items) => {
                let mut words = Vec::with_capacity(items.len());
                for item in items.iter() {
                    match word(item.get_ref()) {
                        Some(w) => words.push(w),
                        None => return Err(bad(
                            "an array of strings, numbers or booleans is expected, not an array \
                             holding a table, an array, a float or a date",
                        )),
                    }
                }
                (words, false)
            }
            DeValue::Table(_) => return Err(bad(
                "a table inside a table: only [serve], [api], [worker] and [scheduler] tables of \
                 keys are read",
            )),
            v => match word(v) {
                Some(w) => (vec![w], matches!(v, DeValue::Boolean(_))),
                None => {
                    return Err(bad(
                        "a string, an integer, a boolean or an array is expected",
                    ))
                }
            },
        };
    Ok(Entry {
        key: name,
        words,
        boolean,
        array,
        at,
    })
}

/// A scalar as one command-line word: strings as they are, integers in decimal, booleans as
/// `true`/`false`; `None` for floats, dates, arrays and tables (no option takes them).
fn word(v: &DeValue<'_>) -> Option<String> {
    match v {
        DeValue::String(s) => Some(s.to_string()),
        DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix())
            .ok()
            .map(|n| n.to_string()),
        DeValue::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Byte offsets to `FILE:LINE` (1-based).
struct Lines<'a> {
    name: &'a str,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(name: &'a str, text: &str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Lines { name, starts }
    }

    fn line_of(&self, offset: usize) -> (usize, usize) {
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        (line, offset - self.starts[line - 1] + 1)
    }

    fn at(&self, offset: usize) -> String {
        format!("{}:{}", self.name, self.line_of(offset).0)
    }

    fn at_column(&self, offset: usize) -> String {
        let (line, column) = self.line_of(offset);
        format!("{}:{line}:{column}", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: every value kind an option takes becomes its words, with its line; tables are per
    // role; what no option takes is refused with the file, line and key.
    #[test]
    fn values_become_words_with_their_lines() {
        let f = parse(
            "orq.toml",
            "redis = \"redis://h:1/\"\nconcurrency = 0x10\n\nqueues = [\"a\", \"b\"]\n\
             insecure-no-auth = true\n[worker]\nlanes = 4\n",
        )
        .unwrap();
        let words: Vec<_> = f
            .top
            .iter()
            .map(|e| (e.key.as_str(), e.words.join(","), e.at.as_str()))
            .collect();
        assert_eq!(
            words,
            [
                ("redis", "redis://h:1/".to_string(), "orq.toml:1"),
                ("concurrency", "16".to_string(), "orq.toml:2"),
                ("queues", "a,b".to_string(), "orq.toml:4"),
                ("insecure-no-auth", "true".to_string(), "orq.toml:5"),
            ]
        );
        assert!(f.top[3].boolean && !f.top[1].boolean);
        let (at, worker) = &f.tables["worker"];
        assert_eq!(at, "orq.toml:6");
        assert_eq!(
            (worker[0].key.as_str(), worker[0].at.as_str()),
            ("lanes", "orq.toml:7")
        );

        for (text, want) in [
            (
                "a = 1\nlanes = 1.5\n",
                "orq.toml:2: lanes: a string, an integer",
            ),
            (
                "queues = [[\"a\"]]\n",
                "orq.toml:1: queues: an array of strings",
            ),
            (
                "[worker]\nx = { y = 1 }\n",
                "orq.toml:2: worker.x: a table inside a table",
            ),
            ("concurrency = \n", "orq.toml:1:"),
            ("a = 1\na = 2\n", "orq.toml:2:"),
        ] {
            let e = parse("orq.toml", text).unwrap_err();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }
}
