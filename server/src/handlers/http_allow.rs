//! The `http` handler's allow-list (`--http-allow`) and the one normalisation of webhook URLs, so
//! that the URL that is checked is exactly the URL that is requested.
//!
//! [`webhook_url`] parses a URL once with the `url` crate (the parser reqwest sends with) and
//! normalises it: scheme and host case, default ports, IPv4 literals in any base or short form,
//! IPv6 literals, backslashes, dot segments in every spelling the parser resolves (`..`, `%2e%2e`,
//! `.%2E`, ...), percent-encodings of unreserved characters decoded and the rest in upper case,
//! the fragment dropped. It refuses what a receiving server (or a proxy before it) could read
//! differently from that text: user info (even empty), spaces and control characters, a `%` that
//! starts no encoding, and any path segment that, decoded up to [`DECODE_ROUNDS`] times, holds a
//! `/`, `\`, `?` or `#` (`%2f`, `%5C`, `..%3F`), a control or non-ASCII character (`%00`,
//! overlong UTF-8 `%C0%AE`, fullwidth `．`), or a piece between `;` and `:` made of dots (`..;`,
//! `;..`, `%252e%252e`, `..::$DATA`: Tomcat's path parameters, NTFS streams).
//!
//! Prefixes are normalised by the same function when orq starts ([`AllowedPrefix::parse`]); a URL
//! is allowed when its scheme, host and port equal a prefix's and its path continues the prefix's
//! path at a segment boundary: `/api/` allows `/api/x`, never `/apix` or `/api/../x` (which is
//! `/x` once normalised). The handler requests the normalised URL, never the submitted text.

use percent_encoding::percent_decode;
use reqwest::Url;
use std::fmt;

/// Longest URL an `http` task may call, as submitted (bytes).
pub const URL_MAX_BYTES: usize = 2048;

/// How many times a path segment is percent-decoded while looking for dots and separators: a
/// server decodes once, a proxy in front of it may decode before it, and a third round covers a
/// framework that decodes again. A segment still changing after these rounds is refused.
pub const DECODE_ROUNDS: usize = 3;

/// A normalised `--http-allow` prefix: scheme, host, port and a path that URLs must continue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedPrefix {
    /// The normalised prefix as a URL (no query, no fragment).
    url: Url,
}

impl AllowedPrefix {
    /// Parse and normalise one prefix (`http://127.0.0.1:9000/api/`). Errors say why: not an
    /// http(s) URL with a host, user info, a query or fragment (a prefix names a place, not a
    /// request), or a path that [`webhook_url`] refuses.
    pub fn parse(text: &str) -> Result<AllowedPrefix, String> {
        let raw = Url::parse(text).map_err(|e| format!("{text}: {e}"))?;
        if has_user_info(text) {
            return Err(format!(
                "{text}: a prefix cannot hold user info (user:password@)"
            ));
        }
        if raw.query().is_some() || raw.fragment().is_some() {
            return Err(format!(
                "{text}: a prefix is scheme, host, port and path, without '?' or '#'"
            ));
        }
        let url = webhook_url(text).map_err(|e| format!("{text}: {e}"))?;
        Ok(AllowedPrefix { url })
    }

    /// The normalised prefix, as it is compared.
    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }

    /// True when the normalised `url` is under this prefix: same scheme, host and port, and its
    /// path equals the prefix's path or continues it after a `/`.
    pub fn contains(&self, url: &Url) -> bool {
        let p = &self.url;
        if url.scheme() != p.scheme()
            || url.host_str() != p.host_str()
            || url.port_or_known_default() != p.port_or_known_default()
        {
            return false;
        }
        let prefix = p.path();
        match url.path().strip_prefix(prefix) {
            None => false,
            Some(rest) => prefix.ends_with('/') || rest.is_empty() || rest.starts_with('/'),
        }
    }
}

impl fmt::Display for AllowedPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.url.as_str())
    }
}

/// The allow-list of the `http` handler: normalised prefixes (`--http-allow`). Empty allows
/// nothing.
#[derive(Debug, Clone, Default)]
pub struct HttpAllow {
    prefixes: Vec<AllowedPrefix>,
}

impl HttpAllow {
    /// An allow-list of prefixes already parsed (by clap, with [`AllowedPrefix::parse`]).
    pub fn new(prefixes: Vec<AllowedPrefix>) -> Self {
        HttpAllow { prefixes }
    }

    /// Parse every prefix; the error names the first bad one.
    pub fn parse<S: AsRef<str>>(prefixes: impl IntoIterator<Item = S>) -> Result<Self, String> {
        let prefixes = prefixes
            .into_iter()
            .map(|p| AllowedPrefix::parse(p.as_ref()).map_err(|e| format!("--http-allow {e}")))
            .collect::<Result<_, _>>()?;
        Ok(HttpAllow { prefixes })
    }

    /// The normalised prefixes.
    pub fn prefixes(&self) -> &[AllowedPrefix] {
        &self.prefixes
    }

    /// Normalise `raw` with [`webhook_url`] and check it against the prefixes. Ok is the URL to
    /// request; the error says why not (the normalised URL is shown, never the prefixes).
    pub fn check(&self, raw: &str) -> Result<Url, String> {
        let url = webhook_url(raw)?;
        if self.prefixes.iter().any(|p| p.contains(&url)) {
            Ok(url)
        } else {
            Err(format!(
                "{url} (as normalised) is not under an allowed prefix (see --http-allow)"
            ))
        }
    }

    /// True when `raw` normalises to a URL under an allowed prefix.
    pub fn allows(&self, raw: &str) -> bool {
        self.check(raw).is_ok()
    }
}

/// Parse and normalise a webhook URL (see the module's doc). Errors say what was refused.
pub fn webhook_url(raw: &str) -> Result<Url, String> {
    if raw.len() > URL_MAX_BYTES {
        return Err(format!("longer than {URL_MAX_BYTES} bytes"));
    }
    // The parser silently drops tabs and newlines anywhere and trims spaces and control
    // characters at the ends: what was meant is unclear, so refuse instead of guessing.
    if raw.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err("holds a space or a control character (percent-encode it)".into());
    }
    let mut url = Url::parse(raw).map_err(|e| e.to_string())?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("must be http or https".into());
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must name a host".into());
    }
    if has_user_info(raw) || !url.username().is_empty() || url.password().is_some() {
        return Err(
            "user info (user:password@) is not allowed: send credentials in payload.headers".into(),
        );
    }
    if let Some(q) = url.query() {
        check_query(q)?;
    }
    let mut path = String::with_capacity(url.path().len());
    for segment in url.path().split('/').skip(1) {
        path.push('/');
        path.push_str(&canonical_segment(segment)?);
    }
    url.set_path(&path);
    url.set_fragment(None);
    // The normalised text must read back as itself, or the client could request something else.
    match Url::parse(url.as_str()) {
        Ok(again) if again == url && again.path() == path => Ok(url),
        _ => Err("cannot be normalised unambiguously".into()),
    }
}

/// True when the authority of `raw` (after `scheme://`, up to the path, query or fragment) holds
/// an `@`: user info, even an empty one (`http://@h/`).
fn has_user_info(raw: &str) -> bool {
    let rest = raw.split_once("://").map_or(raw, |(_, r)| r);
    let end = rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len());
    rest[..end].contains('@')
}

/// Refuse a query with a `%` that starts no encoding or an encoded control character: servers
/// decode queries too, and what they would make of those is unclear.
fn check_query(q: &str) -> Result<(), String> {
    let b = q.as_bytes();
    for (i, _) in q.match_indices('%') {
        let byte = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .ok_or("a '%' in the query that starts no percent-encoding")?;
        if byte < b' ' || byte == 0x7f {
            return Err("an encoded control character in the query".into());
        }
    }
    Ok(())
}

/// One path segment with unreserved characters decoded and other encodings in upper case, after
/// checking every decoded reading of it.
fn canonical_segment(segment: &str) -> Result<String, String> {
    let bytes = segment.as_bytes();
    let mut out = String::with_capacity(segment.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            out.push(bytes[i] as char);
            i += 1;
            continue;
        }
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        let byte = hex
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .ok_or("a '%' in the path that starts no percent-encoding")?;
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
        i += 3;
    }
    let mut view = out.clone().into_bytes();
    for _ in 0..DECODE_ROUNDS {
        check_reading(&view)?;
        let next: Vec<u8> = percent_decode(&view).collect();
        if next == view {
            return Ok(out);
        }
        view = next;
    }
    check_reading(&view)?;
    if percent_decode(&view).collect::<Vec<u8>>() != view {
        return Err(format!(
            "a path segment percent-encoded more than {DECODE_ROUNDS} times"
        ));
    }
    Ok(out)
}

/// Refuse one reading of a path segment that a server could take as a separator, a control
/// character, a look-alike of a dot or slash, or a dot segment.
fn check_reading(view: &[u8]) -> Result<(), String> {
    if view
        .iter()
        .any(|&b| matches!(b, b'/' | b'\\' | b'?' | b'#'))
    {
        return Err("an encoded '/', '\\', '?' or '#' in a path segment".into());
    }
    if view.iter().any(|&b| b < b' ' || b == 0x7f) {
        return Err("an encoded control character in the path".into());
    }
    if !view.is_ascii() {
        return Err(
            "a non-ASCII character in the path (servers and proxies read those differently)".into(),
        );
    }
    let dots =
        |piece: &&[u8]| piece.contains(&b'.') && piece.iter().all(|&b| b == b'.' || b == b' ');
    if view.split(|&b| b == b';' || b == b':').any(|p| dots(&p)) {
        return Err("a dot segment ('.', '..' or another spelling of one) in the path".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(prefixes: &[&str]) -> HttpAllow {
        HttpAllow::parse(prefixes).unwrap()
    }

    // Goal: prefixes allow only URLs under them, at a path boundary, after normalisation.
    #[test]
    fn prefixes_match_at_a_segment_boundary_only() {
        let a = allow(&["http://127.0.0.1:9000", "https://hooks.example/"]);
        assert!(a.allows("http://127.0.0.1:9000"));
        assert!(a.allows("http://127.0.0.1:9000/x?y"));
        assert!(a.allows("https://hooks.example/a"));
        assert!(!a.allows("http://127.0.0.1:90001/x"));
        assert!(!a.allows("http://127.0.0.1:9000@evil.example/"));
        assert!(!a.allows("http://127.0.0.1:9000.evil.example/"));
        assert!(!a.allows("https://hooks.example.evil/"));
        assert!(!a.allows("http://hooks.example/a"), "scheme must match");
        assert!(!HttpAllow::default().allows("http://127.0.0.1:9000/"));
        let api = allow(&["http://127.0.0.1:9000/api/", "http://h.example/v1"]);
        assert!(api.allows("http://127.0.0.1:9000/api/x"));
        assert!(!api.allows("http://127.0.0.1:9000/api"));
        assert!(!api.allows("http://127.0.0.1:9000/apix"));
        assert!(api.allows("http://h.example/v1"));
        assert!(api.allows("http://h.example/v1/x"));
        assert!(api.allows("http://h.example/v1?x"));
        assert!(!api.allows("http://h.example/v1x"));
        assert!(!api.allows("http://h.example/v2/../v1x"));
    }

    // Goal: the reproduction and its relatives are refused, whatever the spelling.
    #[test]
    fn dot_segments_and_encoded_separators_never_leave_the_prefix() {
        let a = allow(&["http://127.0.0.1:18631/api/"]);
        for bad in [
            "http://127.0.0.1:18631/api/../admin",
            "http://127.0.0.1:18631/api/%2e%2e/admin",
            "http://127.0.0.1:18631/api/.%2E/admin",
            "http://127.0.0.1:18631/api\\..\\admin",
            "http://127.0.0.1:18631/api/..;/admin",
            "http://127.0.0.1:18631/api/%2e%2e;x/admin",
            "http://127.0.0.1:18631/api/..%2fadmin",
            "http://127.0.0.1:18631/api/%2E%2E%2Fadmin",
            "http://127.0.0.1:18631/api/..%5cadmin",
            "http://127.0.0.1:18631/api/%252e%252e/admin",
            "http://127.0.0.1:18631/api/%25252e%25252e/admin",
            "http://127.0.0.1:18631/api/x%00/../../admin",
            "http://127.0.0.1:18631/api/.../admin",
            "http://127.0.0.1:18631/api/..%3F/admin",
            "http://127.0.0.1:18631/api/..%23/admin",
            "http://127.0.0.1:18631/api/x/..%3f",
            "http://127.0.0.1:18631/api/..%253F/admin",
            "http://127.0.0.1:18631/api/%C0%AE%C0%AE/admin",
            "http://127.0.0.1:18631/api/..%C0%AFadmin",
            "http://127.0.0.1:18631/api/\u{ff0e}\u{ff0e}/admin",
            "http://127.0.0.1:18631/api/..\u{ff0f}admin",
            "http://127.0.0.1:18631/api/\u{2025}/admin",
            "http://127.0.0.1:18631/api/..::$DATA/admin",
            "http://127.0.0.1:18631/api/;../admin",
            "http://@127.0.0.1:18631/api/x",
            "http://:@127.0.0.1:18631/api/x",
            "http://127.0.0.1:18631/api/x?a=%zz",
            "http://127.0.0.1:18631/api/x?a=%0d%0aX-Injected:%201",
            "http://127.0.0.1:18631/api/%zz",
            "http://127.0.0.1:18631/api/a b",
            "http://127.0.0.1:18631/api/.\t./admin",
            "http://u:p@127.0.0.1:18631/api/x",
            "http://127.0.0.1:18631@evil.example/api/x",
            "ftp://127.0.0.1:18631/api/x",
        ] {
            assert!(a.check(bad).is_err(), "{bad} was allowed");
        }
    }

    // Goal: equivalent spellings of an allowed URL are allowed and requested in one canonical form.
    #[test]
    fn equivalent_spellings_normalise_to_one_url() {
        let a = allow(&["http://127.0.0.1:18631/api/"]);
        for (good, want) in [
            (
                "HTTP://127.0.0.1:18631/api/x",
                "http://127.0.0.1:18631/api/x",
            ),
            (
                "http://127.0.0.1:018631/api/x",
                "http://127.0.0.1:18631/api/x",
            ),
            ("http://0x7f.1:18631/api/x", "http://127.0.0.1:18631/api/x"),
            (
                "http://2130706433:18631/api/x",
                "http://127.0.0.1:18631/api/x",
            ),
            (
                "http://127.0.0.1:18631/api/./x",
                "http://127.0.0.1:18631/api/x",
            ),
            (
                "http://127.0.0.1:18631/api/y/../x",
                "http://127.0.0.1:18631/api/x",
            ),
            (
                "http://127.0.0.1:18631/%61pi/%7e%2a",
                "http://127.0.0.1:18631/api/~%2A",
            ),
            (
                "http://127.0.0.1:18631/api/x?a=../b#/../c",
                "http://127.0.0.1:18631/api/x?a=../b",
            ),
            (
                "http://127.0.0.1:18631/api/x;v=1",
                "http://127.0.0.1:18631/api/x;v=1",
            ),
        ] {
            assert_eq!(
                a.check(good).map(String::from),
                Ok(want.to_string()),
                "{good}"
            );
        }
        let d = allow(&["HTTPS://Hooks.EXAMPLE:443"]);
        assert_eq!(d.prefixes()[0].as_str(), "https://hooks.example/");
        assert!(d.allows("https://HOOKS.example/x"));
        assert!(d.allows("https://hooks.example:443/x"));
        assert!(!d.allows("https://hooks.example:8443/x"));
    }

    // Goal: a prefix that is not a place (no host, user info, a query) stops orq at startup.
    #[test]
    fn bad_prefixes_are_refused_at_startup() {
        for bad in [
            "http://",
            "127.0.0.1:9000",
            "ftp://h.example/",
            "http://u@h.example/",
            "http://h.example/?x",
            "http://h.example/#x",
            "http://h.example/a/..;/b",
            "not a url",
        ] {
            assert!(HttpAllow::parse([bad]).is_err(), "{bad} was accepted");
        }
    }
}
