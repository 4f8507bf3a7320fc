//! The hashes of an HTML page's inline scripts and styles, as Content-Security-Policy sources
//! (`'sha256-<base64>'`): what lets the dashboard's own inline scripts run without allowing every
//! inline script (`'unsafe-inline'`).
//!
//! A page is scanned as the browser's tokenizer reads it, as far as these elements go: a
//! `<script>` or `<style>` start tag (any case; its attributes read with their quotes, so a `>`
//! inside a value does not end it), then raw text up to the first `</script` or `</style` that
//! ends the element (followed by a space, `/` or `>`). A script with a `src` attribute is not
//! inline and is not hashed. The text is hashed as the browser sees it: CR LF and a lone CR read
//! as LF (HTML's input stream preprocessing). What this does not model (a `<!--` inside a script
//! that changes where it ends, NUL characters) only makes a hash miss, so the browser blocks that
//! script: the failure is closed, and the browser tests would see the violation. Next.js's
//! export writes none of it (its payloads escape `<` as `\u003c`).

use base64::prelude::{Engine as _, BASE64_STANDARD};
use sha2::{Digest, Sha256};

/// Most inline elements of one page whose hashes are listed (scripts and styles together); any
/// beyond are not listed, so the browser blocks them. The dashboard's pages have three.
pub const INLINE_MAX: usize = 64;

/// The hash sources of a page's inline elements, each listed once, in page order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct InlineHashes {
    /// `'sha256-…'` of each inline `<script>` (one without `src`).
    pub scripts: Vec<String>,
    /// `'sha256-…'` of each `<style>` element.
    pub styles: Vec<String>,
}

/// The inline elements this scan hashes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Script,
    Style,
}

impl Kind {
    fn name(self) -> &'static [u8] {
        match self {
            Kind::Script => b"script",
            Kind::Style => b"style",
        }
    }
}

/// The hash sources of `html`'s inline scripts and styles (module docs).
pub fn inline_hashes(html: &[u8]) -> InlineHashes {
    // One lower-case copy makes every match case-insensitive; hashes are of the original bytes.
    let lower = html.to_ascii_lowercase();
    let mut out = InlineHashes::default();
    let mut at = 0;
    let mut listed = 0;
    while let Some(lt) = find(&lower, b"<", at) {
        at = lt + 1;
        let Some(kind) = [Kind::Script, Kind::Style].into_iter().find(|k| {
            lower[at..].starts_with(k.name()) && ends_name(lower.get(at + k.name().len()))
        }) else {
            continue;
        };
        let Some((gt, src)) = start_tag_end(&lower, at + kind.name().len()) else {
            break; // the page ends inside the tag: no element
        };
        let text_at = gt + 1;
        let end = end_tag(&lower, kind.name(), text_at).unwrap_or(html.len());
        if !(kind == Kind::Script && src) && listed < INLINE_MAX {
            let list = match kind {
                Kind::Script => &mut out.scripts,
                Kind::Style => &mut out.styles,
            };
            let source = hash_source(&html[text_at..end]);
            if !list.contains(&source) {
                list.push(source);
                listed += 1;
            }
        }
        at = end;
    }
    out
}

/// `'sha256-<base64>'` of `text` as the browser reads it (CR LF and CR as LF).
fn hash_source(text: &[u8]) -> String {
    let digest = if text.contains(&b'\r') {
        let mut lf = Vec::with_capacity(text.len());
        let mut i = 0;
        while i < text.len() {
            if text[i] == b'\r' {
                lf.push(b'\n');
                if text.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
            } else {
                lf.push(text[i]);
            }
            i += 1;
        }
        Sha256::digest(&lf)
    } else {
        Sha256::digest(text)
    };
    format!("'sha256-{}'", BASE64_STANDARD.encode(digest))
}

/// HTML's whitespace between attributes.
fn space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')
}

/// Whether the byte after a tag name ends it (`<scripts>` is another element).
fn ends_name(b: Option<&u8>) -> bool {
    b.is_some_and(|&b| space(b) || b == b'/' || b == b'>')
}

/// The first `needle` in `hay` at or after `from`.
fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

/// From just after a start tag's name in `b` (lower case): the index of the `>` that ends the
/// tag and whether it has a `src` attribute; `None` when the page ends first.
fn start_tag_end(b: &[u8], mut i: usize) -> Option<(usize, bool)> {
    let mut src = false;
    loop {
        while space(*b.get(i)?) || b[i] == b'/' {
            i += 1;
        }
        if b[i] == b'>' {
            return Some((i, src));
        }
        let name_at = i;
        while !(space(*b.get(i)?) || matches!(b[i], b'/' | b'>' | b'=')) {
            i += 1;
        }
        src |= &b[name_at..i] == b"src";
        while space(*b.get(i)?) {
            i += 1;
        }
        if b[i] != b'=' {
            continue;
        }
        i += 1;
        while space(*b.get(i)?) {
            i += 1;
        }
        match b[i] {
            q @ (b'"' | b'\'') => {
                i += 1;
                while *b.get(i)? != q {
                    i += 1;
                }
                i += 1;
            }
            _ => {
                while !(space(*b.get(i)?) || b[i] == b'>') {
                    i += 1;
                }
            }
        }
    }
}

/// Where the element `name`'s raw text that starts at `from` ends: its end tag (`</name`
/// followed by a space, `/` or `>`), in `b` (lower case).
fn end_tag(b: &[u8], name: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let at = find(b, b"</", from)?;
        let after = at + 2 + name.len();
        if b[at + 2..].starts_with(name) && ends_name(b.get(after)) {
            return Some(at);
        }
        from = at + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Known hashes (Python: base64.b64encode(hashlib.sha256(text).digest())).
    const ALERT: &str = "'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='"; // alert(1)
    const A_LF_B: &str = "'sha256-fhj3NzEbLcOy8mndeDlrA1HxT7Zu+oefdoyyMYGIPHg='"; // "a\nb"

    #[test]
    fn inline_scripts_are_hashed_and_external_ones_are_not() {
        let page = br#"<html><head><script src="/a.js" async=""></script>
<SCRIPT>alert(1)</SCRIPT ><script id="x" data-v='a > b'>a
b</script><script type=module>alert(1)</script></head></html>"#;
        let h = inline_hashes(page);
        assert_eq!(h.scripts, [ALERT, A_LF_B], "each once, in order");
        assert!(h.styles.is_empty());
    }

    #[test]
    fn styles_are_hashed_and_line_ends_read_as_the_browser_reads_them() {
        let h = inline_hashes(b"<style media=all>a\r\nb</style><script>a\rb</script>");
        assert_eq!(h.styles, [A_LF_B]);
        assert_eq!(h.scripts, [A_LF_B]);
    }

    #[test]
    fn other_elements_and_false_ends_are_not_scripts() {
        // `<scripts>` and `<styled>` are other elements; `</scripts` does not end a script.
        let h =
            inline_hashes(b"<scripts>x</scripts><styled>y</styled><script>a</scripts>b</script>");
        assert_eq!(h.scripts, [hash_source(b"a</scripts>b")]);
        assert!(h.styles.is_empty());
        // A script whose page ends runs to the end; a tag the page cuts is none.
        assert_eq!(inline_hashes(b"<script>alert(1)").scripts, [ALERT]);
        assert_eq!(
            inline_hashes(b"<script src='a.js'").scripts,
            Vec::<String>::new()
        );
        assert_eq!(inline_hashes(b"").scripts, Vec::<String>::new());
    }

    #[test]
    fn at_most_inline_max_hashes_are_listed() {
        let page: String = (0..INLINE_MAX + 10)
            .map(|i| format!("<script>{i}</script>"))
            .collect();
        assert_eq!(inline_hashes(page.as_bytes()).scripts.len(), INLINE_MAX);
    }
}
