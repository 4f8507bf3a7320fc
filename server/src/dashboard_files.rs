//! The dashboard's files when they do not come from a directory given with `--dashboard`: the
//! static export embedded in the binary (rust-embed, from `dashboard/out` at compile time), or any
//! other [`Files`] (tests use [`MemFiles`]), served with the semantics of `tower-http`'s
//! `ServeDir` as [`crate::dashboard::serve`] configures it.
//!
//! Release builds carry the export's bytes; debug builds (rust-embed without `debug-embed`) read
//! the same compile-time path from disk at each request, so `cargo run` serves the dashboard as
//! last built, and the embed never shows a stale export in development or in CI's debug binary.

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE, ETAG, IF_NONE_MATCH, LOCATION};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

/// One file of the dashboard's export.
#[derive(Debug, Clone)]
pub struct File {
    /// Its bytes.
    pub data: Cow<'static, [u8]>,
    /// SHA-256 of `data`: the file's `ETag`.
    pub sha256: [u8; 32],
}

/// Where the dashboard's files are looked up by their path in the export (`index.html`,
/// `tasks/index.html`, `_next/static/...`: `/`-separated, no leading `/`).
pub trait Files: Send + Sync + 'static {
    /// The file at `path`, if any (directories are not files).
    fn get(&self, path: &str) -> Option<File>;
}

/// The export embedded at compile time from `dashboard/out` (empty when it was missing).
#[derive(rust_embed::Embed)]
#[folder = "../dashboard/out"]
#[allow_missing = true]
struct Export;

/// [`Files`] of the export embedded in this binary.
#[derive(Debug, Clone, Copy, Default)]
pub struct Embedded;

impl Files for Embedded {
    fn get(&self, path: &str) -> Option<File> {
        Export::get(path).map(|f| File {
            sha256: f.metadata.sha256_hash(),
            data: f.data,
        })
    }
}

/// The embedded export when it holds a built dashboard (`index.html`); `None` when `dashboard/out`
/// was missing at compile time (in a debug build: when it is missing now).
pub fn embedded() -> Option<Arc<dyn Files>> {
    Embedded
        .get("index.html")
        .map(|_| Arc::new(Embedded) as Arc<dyn Files>)
}

/// [`Files`] held in memory: path → bytes.
#[derive(Debug, Clone, Default)]
pub struct MemFiles(HashMap<String, Vec<u8>>);

impl MemFiles {
    /// Files from `(path, bytes)` pairs.
    pub fn new<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Self {
        Self(
            files
                .into_iter()
                .map(|(p, d)| (p.to_owned(), d.to_vec()))
                .collect(),
        )
    }
}

impl Files for MemFiles {
    fn get(&self, path: &str) -> Option<File> {
        self.0.get(path).map(|d| File {
            sha256: Sha256::digest(d).into(),
            data: Cow::Owned(d.clone()),
        })
    }
}

/// The export's path of a request path (`/tasks/` → `tasks/index.html`, `/` → `index.html`),
/// percent-decoded; `None` for a path that cannot name a file in the export: a segment that
/// starts with a dot (`..`, `.`, and every dotfile or dot directory: `.env`, `.git/config`,
/// `.well-known/`, which a static export never holds and a directory given with `--dashboard`
/// may), empty segments inside it, a backslash or NUL, bad UTF-8. Shared by both sources, the
/// directory's ([`crate::dashboard`]) and [`Files`].
pub(crate) fn export_path(uri_path: &str) -> Option<String> {
    let decoded = percent_encoding::percent_decode_str(uri_path)
        .decode_utf8()
        .ok()?;
    let rel = decoded.strip_prefix('/')?;
    let (dir, name) = match rel.rsplit_once('/') {
        Some((d, n)) => (Some(d), n),
        None => (None, rel),
    };
    let ok = |s: &str| !s.is_empty() && !s.starts_with('.') && !s.contains(['\\', '\0']);
    if dir.is_some_and(|d| !d.split('/').all(ok)) || !(name.is_empty() || ok(name)) {
        return None;
    }
    Some(if name.is_empty() {
        format!("{rel}index.html")
    } else {
        rel.to_owned()
    })
}

/// Answer `req` from `files` as `ServeDir` with `append_index_html_on_directories` and the
/// export's `404.html` as its not-found page would: GET and HEAD only (405 with `Allow`
/// otherwise); `/d/` answers `d/index.html`; `/d` where only `d/index.html` exists answers 307 to
/// `/d/` (query kept); a missing file answers `404.html` with 404 (an empty 404 without it).
/// Files carry `Content-Type` by extension (`application/octet-stream` when unknown),
/// `Content-Length` and an `ETag`; a matching `If-None-Match` answers 304. `Cache-Control` is the
/// caller's.
pub fn serve(files: &dyn Files, req: &Request) -> Response {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = StatusCode::METHOD_NOT_ALLOWED.into_response();
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET,HEAD"));
        return r;
    }
    let head = req.method() == Method::HEAD;
    let Some(path) = export_path(req.uri().path()) else {
        return not_found(files, head);
    };
    if let Some(f) = files.get(&path) {
        return file(&path, f, StatusCode::OK, req, head);
    }
    if !req.uri().path().ends_with('/') && files.get(&format!("{path}/index.html")).is_some() {
        let mut to = format!("{}/", req.uri().path());
        if let Some(q) = req.uri().query() {
            to = format!("{to}?{q}");
        }
        if let Ok(v) = HeaderValue::from_str(&to) {
            let mut r = StatusCode::TEMPORARY_REDIRECT.into_response();
            r.headers_mut().insert(LOCATION, v);
            return r;
        }
    }
    not_found(files, head)
}

/// The export's `404.html` with status 404, or an empty 404 when it has none.
fn not_found(files: &dyn Files, head: bool) -> Response {
    match files.get("404.html") {
        Some(f) => {
            let mut r = body(f.data, head);
            *r.status_mut() = StatusCode::NOT_FOUND;
            typed(&mut r, "404.html");
            r
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// `f` (at export path `path`) with `status`, or 304 when `req`'s `If-None-Match` names its ETag.
fn file(path: &str, f: File, status: StatusCode, req: &Request, head: bool) -> Response {
    let hex: String = f.sha256.iter().map(|b| format!("{b:02x}")).collect();
    let etag = format!("\"{hex}\"");
    let matches = req
        .headers()
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .map(|t| t.trim().trim_start_matches("W/"))
                .any(|t| t == "*" || t == etag)
        });
    let mut r = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = body(f.data, head);
        *r.status_mut() = status;
        typed(&mut r, path);
        r
    };
    if let Ok(v) = HeaderValue::from_str(&etag) {
        r.headers_mut().insert(ETAG, v);
    }
    r
}

/// A response of `data` with its `Content-Length` (and no body for HEAD).
fn body(data: Cow<'static, [u8]>, head: bool) -> Response {
    let len = data.len();
    let mut r = if head {
        Response::new(Body::empty())
    } else {
        Response::new(Body::from(data))
    };
    r.headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(len));
    r
}

/// Set `Content-Type` by `path`'s extension.
fn typed(r: &mut Response, path: &str) {
    let mime = mime_guess::from_path(path)
        .first_raw()
        .unwrap_or("application/octet-stream");
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(mime));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export() -> MemFiles {
        MemFiles::new([
            ("index.html", &b"<html>home</html>"[..]),
            ("tasks/index.html", b"<html>tasks</html>"),
            ("404.html", b"<html>lost</html>"),
            ("_next/static/chunks/a1.js", b"let a = 1;"),
            ("favicon.ico", b"\0\0\x01\0"),
            ("data.unknownext", b"?"),
            // What a static export never holds and a copied directory may: never served.
            (".env", b"SECRET=1"),
            (".git/config", b"[remote]"),
            (".well-known/security.txt", b"Contact: x"),
            ("tasks/.hidden", b"x"),
        ])
    }

    fn req(method: Method, uri: &str) -> Request {
        Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::empty())
            .unwrap()
    }

    async fn text(r: Response) -> String {
        let b = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        String::from_utf8(b.to_vec()).unwrap()
    }

    fn header(r: &Response, h: axum::http::HeaderName) -> &str {
        r.headers().get(h).map_or("", |v| v.to_str().unwrap())
    }

    #[tokio::test]
    async fn directories_answer_their_index_and_files_their_type() {
        let f = export();
        let r = serve(&f, &req(Method::GET, "/"));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(header(&r, CONTENT_TYPE), "text/html");
        assert_eq!(text(r).await, "<html>home</html>");

        let r = serve(&f, &req(Method::GET, "/tasks/"));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(text(r).await, "<html>tasks</html>");

        let r = serve(&f, &req(Method::GET, "/tasks/index.html"));
        assert_eq!(text(r).await, "<html>tasks</html>");

        let r = serve(&f, &req(Method::GET, "/_next/static/chunks/a1.js"));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(header(&r, CONTENT_TYPE), "text/javascript");
        assert_eq!(header(&r, CONTENT_LENGTH), "10");

        let r = serve(&f, &req(Method::GET, "/data.unknownext"));
        assert_eq!(header(&r, CONTENT_TYPE), "application/octet-stream");
    }

    #[tokio::test]
    async fn a_directory_without_its_slash_redirects_keeping_the_query() {
        let f = export();
        let r = serve(&f, &req(Method::GET, "/tasks"));
        assert_eq!(r.status(), StatusCode::TEMPORARY_REDIRECT);
        assert_eq!(header(&r, LOCATION), "/tasks/");
        let r = serve(&f, &req(Method::GET, "/tasks?q=a%20b"));
        assert_eq!(header(&r, LOCATION), "/tasks/?q=a%20b");
    }

    #[tokio::test]
    async fn missing_and_hostile_paths_answer_the_404_page() {
        let f = export();
        for uri in [
            "/nope",
            "/nope/",
            "/tasks/nope",
            "/../index.html",
            "/%2e%2e/index.html",
            "/tasks/..",
            "/a//index.html",
            "/a%5cb",
            "/%00",
            "/%ff",
            "/.env",
            "/%2eenv",
            "/.git/config",
            "/.git/",
            "/.well-known/security.txt",
            "/tasks/.hidden",
        ] {
            let r = serve(&f, &req(Method::GET, uri));
            assert_eq!(r.status(), StatusCode::NOT_FOUND, "{uri}");
            assert_eq!(header(&r, CONTENT_TYPE), "text/html", "{uri}");
            assert_eq!(text(r).await, "<html>lost</html>", "{uri}");
        }
        let bare = MemFiles::new([("index.html", &b"x"[..])]);
        let r = serve(&bare, &req(Method::GET, "/nope"));
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        assert_eq!(text(r).await, "");
    }

    #[tokio::test]
    async fn only_get_and_head_and_head_has_no_body() {
        let f = export();
        for m in [Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS] {
            let r = serve(&f, &req(m.clone(), "/"));
            assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "{m}");
            assert_eq!(header(&r, ALLOW), "GET,HEAD");
        }
        let r = serve(&f, &req(Method::HEAD, "/"));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(header(&r, CONTENT_LENGTH), "17");
        assert_eq!(text(r).await, "");
    }

    #[tokio::test]
    async fn a_matching_etag_answers_304_and_another_the_file() {
        let f = export();
        let r = serve(&f, &req(Method::GET, "/"));
        let etag = header(&r, ETAG).to_owned();
        assert_eq!(etag.len(), 66, "{etag}");
        let mut again = req(Method::GET, "/");
        again
            .headers_mut()
            .insert(IF_NONE_MATCH, HeaderValue::from_str(&etag).unwrap());
        let r = serve(&f, &again);
        assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(header(&r, ETAG), etag);
        assert_eq!(text(r).await, "");
        let mut other = req(Method::GET, "/");
        other
            .headers_mut()
            .insert(IF_NONE_MATCH, HeaderValue::from_static("\"0\""));
        assert_eq!(serve(&f, &other).status(), StatusCode::OK);
    }

    // The embed follows `dashboard/out`: in a debug build (these tests) rust-embed reads it from
    // disk, so the embedded source exists exactly when the export is built.
    #[test]
    fn the_embedded_export_is_there_when_dashboard_out_is_built() {
        let built = std::path::Path::new(crate::dashboard::DIR_DEFAULT)
            .join("index.html")
            .is_file();
        assert_eq!(embedded().is_some(), built);
        assert!(Embedded.get("no/such/file.html").is_none());
    }
}
