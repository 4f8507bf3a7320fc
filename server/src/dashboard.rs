//! The dashboard: the Next.js static export served at `/` from a directory (its regular files
//! only: `dashboard/dir.rs`) or from the copy embedded in the binary ([`Source`],
//! [`crate::dashboard_files`]), with cache headers, a page that
//! says how to build it when it is missing, and the npm build `orq serve` runs when the export is
//! missing but its sources are there.

use crate::dashboard_files::{self, Files};
use axum::extract::Request;
use axum::http::header::{self, CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

mod dir;

/// The source checkout's `dashboard/out` (a compile-time path, next to this crate): the directory
/// served when no `--dashboard` is given and the binary embeds no dashboard.
pub const DIR_DEFAULT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../dashboard/out");

/// `Cache-Control` of `/_next/static/*`: Next.js puts a content hash in every such file name, so a
/// file at one path never changes.
pub const CACHE_IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// `Cache-Control` of everything else (HTML pages, unhashed assets, the 404 page): the browser
/// revalidates each time (cheap: `If-Modified-Since` or `If-None-Match` answer 304), so a rebuilt
/// dashboard shows at the next load.
pub const CACHE_REVALIDATE: &str = "no-cache";

/// Longest one npm command of the dashboard build may run before it is killed.
pub const NPM_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Lines of npm's output logged when a build step fails (its tail says why).
pub const NPM_LOG_LINES_MAX: usize = 30;

/// The page answered when the dashboard directory holds no `index.html`. Its style is a `<style>`
/// element, which the page's Content-Security-Policy lists by its hash (`security_headers.rs`);
/// a `style` attribute would be blocked.
const MISSING_HTML: &str = "<!doctype html>
<html lang=\"en\"><head><meta charset=\"utf-8\"><title>orq: dashboard not built</title>
<style>body { font-family: sans-serif; max-width: 40em; margin: 3em auto }</style></head>
<body>
<h1>orq: the dashboard is not built</h1>
<p>The API is running at <a href=\"/api/v1/queues\"><code>/api/v1</code></a>; only the web
dashboard is missing. Build it from the repository's root with</p>
<pre>cd dashboard &amp;&amp; npm ci &amp;&amp; npm run build</pre>
<p>and reload this page (<code>orq serve</code> does this by itself at startup when
<code>npm</code> is on its PATH, unless it was started with <code>--no-dashboard-build</code>),
or start orq with <code>--dashboard DIR</code> pointing at a built export. A release
binary built after the dashboard carries it inside.</p>
</body></html>
";

/// Where the dashboard's files come from.
#[derive(Clone)]
pub enum Source {
    /// A directory on disk (`--dashboard DIR`, or the repository's `dashboard/out`).
    Dir(PathBuf),
    /// Files looked up by path, e.g. the export embedded in the binary
    /// ([`dashboard_files::embedded`]).
    Files(Arc<dyn Files>),
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Dir(d) => f.debug_tuple("Dir").field(d).finish(),
            Source::Files(_) => f.write_str("Files(..)"),
        }
    }
}

impl Source {
    /// Which source to serve: the directory given with `--dashboard` (`explicit`) when there is
    /// one; else `embedded` (the export in the binary, when it holds `index.html`); else the
    /// repository's `dashboard/out` ([`DIR_DEFAULT`], which `orq serve` may build with npm).
    pub fn choose(explicit: Option<&Path>, embedded: Option<Arc<dyn Files>>) -> Source {
        match (explicit, embedded) {
            (Some(dir), _) => Source::Dir(dir.to_path_buf()),
            (None, Some(files)) => Source::Files(files),
            (None, None) => Source::Dir(PathBuf::from(DIR_DEFAULT)),
        }
    }

    /// True when this source holds a built dashboard (its `index.html`).
    pub fn is_built(&self) -> bool {
        match self {
            Source::Dir(d) => is_built(d),
            Source::Files(f) => f.get("index.html").is_some(),
        }
    }

    /// For logs: the directory, or "embedded in the binary".
    pub fn describe(&self) -> String {
        match self {
            Source::Dir(d) => d.display().to_string(),
            Source::Files(_) => "embedded in the binary".to_owned(),
        }
    }
}

/// True when `dir` holds a built dashboard (its `index.html`).
pub fn is_built(dir: &Path) -> bool {
    dir.join("index.html").is_file()
}

/// Answer a request outside `/api` from the dashboard `source` (`None`: no dashboard).
///
/// Directories answer their `index.html` (the export uses trailing slashes: `/tasks/` is
/// `tasks/index.html`; `/tasks` redirects there); a missing file answers the export's
/// `404.html` with status 404; methods other than GET and HEAD answer a typed 405. When `dir` has no
/// `index.html`, `/` answers a page that says how to build the dashboard (and other paths the
/// same page with 404). Every answer carries `Cache-Control` ([`CACHE_IMMUTABLE`] under
/// `/_next/static/`, [`CACHE_REVALIDATE`] elsewhere). A directory serves only the regular files
/// inside it, no dotfiles and nothing a symbolic link leads out to (`dashboard/dir.rs`, with
/// `Last-Modified`); other files are served by [`dashboard_files::serve`] (with an `ETag`).
pub async fn serve(source: Option<&Source>, req: Request) -> Response {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        // A typed error like every other answer, not an empty 405.
        let mut r = crate::error::ApiError::new(
            crate::error_code::ErrorCode::MethodNotAllowed,
            "the dashboard's files answer GET and HEAD only",
        )
        .into_response();
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET,HEAD"));
        return r;
    }
    let immutable = req.uri().path().starts_with("/_next/static/");
    let mut resp = match source.filter(|s| s.is_built()) {
        None => missing(&req),
        Some(Source::Files(files)) => dashboard_files::serve(files.as_ref(), &req),
        Some(Source::Dir(dir)) => dir::serve(dir, req).await,
    };
    // A 304 carries the header too: it replaces the one the browser stored with the file.
    let cache =
        if immutable && (resp.status().is_success() || resp.status() == StatusCode::NOT_MODIFIED) {
            CACHE_IMMUTABLE
        } else {
            CACHE_REVALIDATE
        };
    resp.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static(cache));
    resp
}

/// The "not built" page: 200 at `/`, 404 elsewhere.
fn missing(req: &Request) -> Response {
    let status = if req.uri().path() == "/" {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    };
    (
        status,
        [(CONTENT_TYPE, "text/html; charset=utf-8")],
        MISSING_HTML,
    )
        .into_response()
}

/// The first `program` found in the directories of `PATH`, if any.
pub fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// What [`ensure_built`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildOutcome {
    /// `dir` already held a built dashboard; nothing was run.
    AlreadyBuilt,
    /// `dir`'s parent has no `package.json`: there are no sources to build from.
    NoSources,
    /// The dashboard sources are there but no `npm` was given (none on `PATH`).
    NoNpm,
    /// npm ran (`npm ci` first when `node_modules` was missing, then `npm run build`) and `dir`
    /// now holds `index.html`.
    Built,
    /// A build step failed, timed out or did not produce `dir/index.html`; the message says
    /// which (npm's output tail is logged).
    Failed(String),
}

/// Build the dashboard when `dir` (an export directory, e.g. `dashboard/out`) is missing and its
/// parent holds the sources (`package.json`): `npm ci` when `node_modules` is missing, then
/// `npm run build`, each in the parent directory, bounded by [`NPM_TIMEOUT`]. Logs each step with
/// `tracing`. The npm child is killed when the returned future is dropped (orq stopped meanwhile).
pub async fn ensure_built(dir: &Path, npm: Option<&Path>) -> BuildOutcome {
    if is_built(dir) {
        return BuildOutcome::AlreadyBuilt;
    }
    let Some(project) = dir.parent().filter(|p| p.join("package.json").is_file()) else {
        tracing::info!(dir = %dir.display(), "no built dashboard and no dashboard sources next to it; / will say how to build it");
        return BuildOutcome::NoSources;
    };
    let Some(npm) = npm else {
        tracing::warn!(dir = %dir.display(), "the dashboard is not built and npm is not on PATH; / will say how to build it");
        return BuildOutcome::NoNpm;
    };
    if !project.join("node_modules").is_dir() {
        if let Err(e) = run_npm(npm, project, &["ci", "--no-audit", "--no-fund"]).await {
            return BuildOutcome::Failed(e);
        }
    }
    if let Err(e) = run_npm(npm, project, &["run", "build"]).await {
        return BuildOutcome::Failed(e);
    }
    if is_built(dir) {
        tracing::info!(dir = %dir.display(), "dashboard built");
        BuildOutcome::Built
    } else {
        let e = format!(
            "npm run build succeeded but {} has no index.html",
            dir.display()
        );
        tracing::warn!("{e}");
        BuildOutcome::Failed(e)
    }
}

/// Run `npm <args>` in `project`; its output is captured and its tail logged when it fails.
async fn run_npm(npm: &Path, project: &Path, args: &[&str]) -> Result<(), String> {
    let what = format!("npm {}", args.join(" "));
    tracing::info!(dir = %project.display(), "building the dashboard: {what} (this can take a minute)");
    let child = tokio::process::Command::new(npm)
        .args(args)
        .current_dir(project)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            let e = format!("{what}: cannot start {}: {e}", npm.display());
            tracing::warn!("{e}");
            e
        })?;
    let out = match tokio::time::timeout(NPM_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => {
            let e = format!("{what}: {e}");
            tracing::warn!("{e}");
            return Err(e);
        }
        Err(_) => {
            let e = format!("{what}: still running after {NPM_TIMEOUT:?}; killed");
            tracing::warn!("{e}");
            return Err(e);
        }
    };
    if out.status.success() {
        tracing::info!("{what}: done");
        return Ok(());
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(NPM_LOG_LINES_MAX)..].join("\n");
    let e = format!("{what}: {}", out.status);
    tracing::warn!(output = %tail, "{e}");
    Err(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard_files::MemFiles;
    use axum::body::Body;

    #[test]
    fn an_explicit_dir_wins_then_the_embedded_export_then_the_default_dir() {
        let files: Arc<dyn Files> = Arc::new(MemFiles::new([("index.html", &b"x"[..])]));
        let dir = Path::new("/somewhere/out");
        let s = Source::choose(Some(dir), Some(files.clone()));
        assert!(matches!(&s, Source::Dir(d) if d == dir), "{s:?}");
        let s = Source::choose(None, Some(files));
        assert!(matches!(s, Source::Files(_)), "{s:?}");
        assert!(s.is_built());
        assert_eq!(s.describe(), "embedded in the binary");
        let s = Source::choose(None, None);
        assert!(
            matches!(&s, Source::Dir(d) if d == Path::new(DIR_DEFAULT)),
            "{s:?}"
        );
    }

    #[tokio::test]
    async fn embedded_files_get_the_same_cache_headers() {
        let files: Arc<dyn Files> = Arc::new(MemFiles::new([
            ("index.html", &b"x"[..]),
            ("_next/static/a.js", b"1"),
        ]));
        let s = Source::Files(files);
        let get = |uri: &str| Request::builder().uri(uri).body(Body::empty()).unwrap();
        let r = serve(Some(&s), get("/_next/static/a.js")).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[CACHE_CONTROL], CACHE_IMMUTABLE);
        let r = serve(Some(&s), get("/_next/static/b.js")).await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        assert_eq!(r.headers()[CACHE_CONTROL], CACHE_REVALIDATE);
        let r = serve(Some(&s), get("/")).await;
        assert_eq!(r.headers()[CACHE_CONTROL], CACHE_REVALIDATE);
        let empty = Source::Files(Arc::new(MemFiles::default()));
        let r = serve(Some(&empty), get("/")).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert!(!empty.is_built());
    }
}
