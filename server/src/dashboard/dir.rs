//! The dashboard's files from a directory (`--dashboard DIR`, or the checkout's `dashboard/out`):
//! only regular files inside DIR are served. A request path maps to a path in the export as it
//! does for the embedded export ([`export_path`]: no `..`, no segment that starts with a dot);
//! that path is then resolved with every symbolic link followed, and served only when the result
//! is a regular file under DIR's own resolved path, reached through no file or directory whose
//! name starts with a dot (a link inside DIR to its `.git/config` is refused like the name
//! itself). Everything else answers as a missing file does: the export's `404.html` with 404.
//! So a link to the system's `etc`, a linked directory, a copied `.env` or a `.git` directory is
//! never served, whoever asks (the dashboard's files need no key).
//!
//! What this does not guard against: someone who may write into DIR can swap a checked path for
//! a link between the check and the open; they could change the dashboard itself anyway.

use crate::dashboard_files::export_path;
use axum::body::Body;
use axum::extract::Request;
use axum::http::header::LOCATION;
use axum::http::{HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use std::path::{Path, PathBuf};
use tower::ServiceExt;
use tower_http::services::ServeFile;

/// The export's not-found page, answered with 404 for every path that names nothing servable.
const NOT_FOUND_PAGE: &str = "404.html";

/// What a request path names in a dashboard directory.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    /// A regular file inside the directory: its resolved path, and its path in the export (its
    /// extension gives the `Content-Type`, not the link target's).
    File { path: PathBuf, export: String },
    /// `/d` where `d/index.html` is a file: where to redirect (`/d/`, the query kept).
    Slash(String),
    /// Nothing servable: the resolved not-found page, if the directory has one.
    Missing { page: Option<PathBuf> },
}

/// Answer `req` (GET or HEAD; the caller checked the method) from the directory `dir`, as
/// `tower-http`'s `ServeDir` with `append_index_html_on_directories` and `404.html` as its
/// not-found page would, but for regular files inside `dir` only (module docs). Files are served
/// by `ServeFile` (`Last-Modified`, conditional and range requests, HEAD).
pub(super) async fn serve(dir: &Path, req: Request) -> Response {
    let (dir, uri) = (dir.to_path_buf(), req.uri().clone());
    // Resolving touches the file system: off the async threads, as ServeDir does.
    let found = tokio::task::spawn_blocking(move || find(&dir, &uri))
        .await
        .unwrap_or(Found::Missing { page: None });
    match found {
        Found::File { path, export } => file(&path, &export, req).await,
        Found::Slash(to) => match HeaderValue::from_str(&to) {
            Ok(v) => {
                let mut r = StatusCode::TEMPORARY_REDIRECT.into_response();
                r.headers_mut().insert(LOCATION, v);
                r
            }
            Err(_) => StatusCode::NOT_FOUND.into_response(),
        },
        Found::Missing { page: None } => StatusCode::NOT_FOUND.into_response(),
        Found::Missing { page: Some(page) } => {
            // The whole page whatever the request's conditions: a 304 or a range of it would
            // show no page.
            let mut plain = Request::new(Body::empty());
            *plain.method_mut() = req.method().clone();
            *plain.uri_mut() = req.uri().clone();
            let mut r = file(&page, NOT_FOUND_PAGE, plain).await;
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        }
    }
}

/// What `uri` names in `dir` (module docs).
fn find(dir: &Path, uri: &Uri) -> Found {
    let Ok(root) = dir.canonicalize() else {
        return Found::Missing { page: None };
    };
    let missing = || Found::Missing {
        page: regular_file_inside(&root, NOT_FOUND_PAGE),
    };
    let Some(export) = export_path(uri.path()) else {
        return missing();
    };
    if let Some(path) = regular_file_inside(&root, &export) {
        return Found::File { path, export };
    }
    let path = uri.path();
    if !path.ends_with('/') && regular_file_inside(&root, &format!("{export}/index.html")).is_some()
    {
        return Found::Slash(match uri.query() {
            Some(q) => format!("{path}/?{q}"),
            None => format!("{path}/"),
        });
    }
    missing()
}

/// The resolved path of `export` (a `/`-separated path in the export) under `root` (a resolved
/// directory) when it is a regular file inside `root` reached through no dot-named component.
fn regular_file_inside(root: &Path, export: &str) -> Option<PathBuf> {
    let resolved = root.join(export).canonicalize().ok()?;
    let inside = resolved.strip_prefix(root).ok()?;
    let dotted = inside
        .components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with('.'));
    let regular = std::fs::metadata(&resolved).is_ok_and(|m| m.is_file());
    (!dotted && regular).then_some(resolved)
}

/// `req` answered with the file at `path`, typed by the extension of `export`.
async fn file(path: &Path, export: &str, req: Request) -> Response {
    let mime = mime_guess::from_path(export).first_or_octet_stream();
    match ServeFile::new_with_mime(path, &mime).oneshot(req).await {
        Ok(r) => r.map(Body::new),
        Err(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: what a request path resolves to, for each way out of the directory and each dotted
    // name, with the not-found page found for all of them. Method: a temporary directory.
    #[test]
    fn only_regular_files_inside_the_directory_are_found() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("out");
        std::fs::create_dir_all(dir.join("tasks")).unwrap();
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        for (p, text) in [
            ("index.html", "home"),
            ("tasks/index.html", "tasks"),
            ("404.html", "lost"),
            (".env", "SECRET=1"),
            (".git/config", "[remote]"),
        ] {
            std::fs::write(dir.join(p), text).unwrap();
        }
        std::fs::write(root.path().join("secret.txt"), "outside").unwrap();
        std::os::unix::fs::symlink(root.path().join("secret.txt"), dir.join("out.txt")).unwrap();
        std::os::unix::fs::symlink(root.path(), dir.join("up")).unwrap();
        std::os::unix::fs::symlink(dir.join(".git/config"), dir.join("config.txt")).unwrap();
        std::os::unix::fs::symlink(dir.join("tasks/index.html"), dir.join("t.html")).unwrap();
        let uri = |s: &str| s.parse::<Uri>().unwrap();
        let canon = dir.canonicalize().unwrap();
        let page = Some(canon.join("404.html"));

        assert_eq!(
            find(&dir, &uri("/")),
            Found::File {
                path: canon.join("index.html"),
                export: "index.html".into()
            }
        );
        assert_eq!(
            find(&dir, &uri("/tasks?x=1")),
            Found::Slash("/tasks/?x=1".into())
        );
        // A link that stays inside is followed; the export path types the answer.
        assert_eq!(
            find(&dir, &uri("/t.html")),
            Found::File {
                path: canon.join("tasks/index.html"),
                export: "t.html".into()
            }
        );
        for p in [
            "/out.txt",
            "/up/secret.txt",
            "/config.txt",
            "/.env",
            "/.git/config",
            "/tasks",
            "/nope",
        ] {
            let want = if p == "/tasks" {
                Found::Slash("/tasks/".into())
            } else {
                Found::Missing { page: page.clone() }
            };
            assert_eq!(find(&dir, &uri(p)), want, "{p}");
        }
        assert_eq!(
            find(&root.path().join("nowhere"), &uri("/")),
            Found::Missing { page: None }
        );
    }
}
