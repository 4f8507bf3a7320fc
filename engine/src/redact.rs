//! The one redaction of credentials in URLs: every log line, error message and `Debug` output
//! that shows a URL (a `--redis` URL, a node or sentinel address, the admin CLI's `--url`, an
//! effective configuration) shows it through [`redacted`], so a password never leaves orq in
//! text (issue 42, item 10).

/// What stands for a redacted secret.
pub const REDACTED: &str = "***";

/// Names of query parameters whose values are secrets (compared in lower case).
const SECRET_PARAMS: [&str; 5] = ["password", "pass", "pwd", "secret", "token"];

/// `text` with the passwords of every URL in it replaced by [`REDACTED`]: the password of the
/// user information (`scheme://user:PASSWORD@host`, also before a comma-separated host list, as
/// Cluster and Sentinel URLs have it) and the value of a `password`, `pass`, `pwd`, `secret` or
/// `token` query parameter. The user information ends at the URL's *last* `@`, as orq's URL
/// parsers read it, so a password holding an unencoded `@`, `/`, `?`, `#` or `,` is hidden
/// whole (at worst more is hidden than needed, never less). A URL ends at white space or at one
/// of `)`, `"`, `'`, `<`, `>`, so URLs inside a message (`error for url (http://a:b@h/x)`) are
/// redacted too. Text without `://` is kept; so is a user name without a password.
pub fn redacted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, after) = rest.split_at(i + 3);
        out.push_str(head);
        let url_end = after
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '"' | '\'' | '<' | '>'))
            .unwrap_or(after.len());
        let (url, next) = after.split_at(url_end);
        let from = url.rfind('@').unwrap_or(0);
        let authority_end = url[from..]
            .find(['/', '?', '#'])
            .map_or(url.len(), |e| from + e);
        let (authority, tail) = url.split_at(authority_end);
        match authority.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => out.push_str(&format!("{user}:{REDACTED}@{host}")),
                None => out.push_str(authority),
            },
            None => out.push_str(authority),
        }
        out.push_str(&redacted_query(tail));
        rest = next;
    }
    out.push_str(rest);
    out
}

/// The query parameters named like secrets in `tail` (a URL's path, query and fragment) with
/// their values replaced by [`REDACTED`].
fn redacted_query(tail: &str) -> String {
    let Some(q) = tail.find('?') else {
        return tail.to_string();
    };
    let (path, query) = tail.split_at(q + 1);
    let (query, fragment) = match query.find('#') {
        Some(f) => query.split_at(f),
        None => (query, ""),
    };
    let params: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if SECRET_PARAMS.contains(&k.to_ascii_lowercase().as_str()) => {
                format!("{k}={REDACTED}")
            }
            _ => p.to_string(),
        })
        .collect();
    format!("{path}{}{fragment}", params.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a password never survives redaction, whatever the URL's shape or where it sits in a
    // message; the rest (scheme, users, hosts, database, other parameters) stays readable, and
    // text that holds no URL is kept as it is.
    #[test]
    fn passwords_in_urls_are_redacted() {
        for (text, want) in [
            ("redis://:s3cret@h:6379/0", "redis://:***@h:6379/0"),
            ("redis://u:s3cret@h:6379", "redis://u:***@h:6379"),
            ("redis://app:p@ss:w@h:1/", "redis://app:***@h:1/"),
            ("rediss://u:p%40ss@h/", "rediss://u:***@h/"),
            (
                "redis+cluster://u:x@a:1,b:2",
                "redis+cluster://u:***@a:1,b:2",
            ),
            // orq reads the user info up to the last `@`, so the first host is part of it.
            (
                "redis+cluster://u:pw@h1:1,u:pw2@h2:2/0",
                "redis+cluster://u:***@h2:2/0",
            ),
            ("redis://:p/w@h:1/", "redis://:***@h:1/"),
            ("redis://:p?w@h:1/", "redis://:***@h:1/"),
            ("redis://:p#w@h:1/", "redis://:***@h:1/"),
            (
                "redis+cluster://u:p,w@h1:1,h2:2",
                "redis+cluster://u:***@h1:1,h2:2",
            ),
            (
                "redis+sentinel://:pw@s1:26379,s2:26379/main",
                "redis+sentinel://:***@s1:26379,s2:26379/main",
            ),
            ("redis://h:6379/", "redis://h:6379/"),
            ("redis://user@h:6379/", "redis://user@h:6379/"),
            (
                "https://hooks.example/api/?a=b@c",
                "https://hooks.example/api/?a=b@c",
            ),
            ("127.0.0.1:8080", "127.0.0.1:8080"),
            ("not a url", "not a url"),
            (
                "redis://h:1/?password=s3cret&db=2",
                "redis://h:1/?password=***&db=2",
            ),
            (
                "redis+unix:///tmp/r.sock?db=1&pass=s3cret",
                "redis+unix:///tmp/r.sock?db=1&pass=***",
            ),
            ("redis://h:1/0?Token=x#frag", "redis://h:1/0?Token=***#frag"),
            (
                "error sending request for url (http://a:b@h:1/api/v1/x)",
                "error sending request for url (http://a:***@h:1/api/v1/x)",
            ),
            (
                "redis://:s1@a:1/: refused; redis://:s2@b:2/: refused",
                "redis://:***@a:1/: refused; redis://:***@b:2/: refused",
            ),
        ] {
            let r = redacted(text);
            assert_eq!(r, want, "{text}");
            for secret in ["s3cret", "pw", "p%40ss", "p/w", "p?w", "p#w", "p,w"] {
                assert!(!r.contains(secret), "{text}: {r}");
            }
        }
    }
}
