//! The headers that keep web pages from misusing orq's answers, on every answer of the HTTP
//! server (dashboard pages and files, API answers, errors, refusals, 404s): [`add`], layered
//! around the whole router in `app()`.
//!
//! - **No page may frame orq** ([`FRAME_OPTIONS`], and [`POLICY`]'s `frame-ancestors 'none'`). A
//!   page on another site put a keyless orq's dashboard in a transparent frame, and two clicks
//!   paused a queue: the frame's requests are orq's own origin's, so the cross-site write refusal
//!   (`cross_origin.rs`) cannot tell them apart.
//! - **No answer is read as another type than it says** ([`CONTENT_TYPE_OPTIONS`]).
//! - **No dashboard address goes to another site** ([`REFERRER`]).
//! - **A Content-Security-Policy the dashboard works under** ([`POLICY`]): its own scripts,
//!   styles, images and connections (`/api/v1` and the event stream) only, no plugins, no
//!   `<base>`, forms posted only to orq.
//!
//! Inline scripts: the Next.js static export puts a few inline scripts in every page (the React
//! Server Components payload, `self.__next_f.push(...)`, and Turbopack's chunk list: three a page).
//! Allowing every inline script (`'unsafe-inline'`) would let markup injected into a page run as
//! script; nonces need a server that renders each page. So each HTML answer's policy lists the
//! SHA-256 of the inline scripts and styles it carries ([`inline_hashes`]), hashed from the bytes
//! served: no build step or configuration, a rebuilt dashboard is covered at once, and a script
//! added to the page later (by an injection, an `on...` attribute, a `javascript:` link) is
//! blocked. It costs a page a buffered body and one hash a script (the pages are a few KiB).
//! Styles: the pages carry no `style` attributes and React sets styles through the CSSOM, which
//! CSP does not govern, so styles need no `'unsafe-inline'` either.

mod inline_hashes;

use crate::error::ApiError;
use crate::error_code::ErrorCode;
use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{
    CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
pub use inline_hashes::{inline_hashes, InlineHashes, INLINE_MAX};

/// `X-Frame-Options`: no page may show an answer in a frame (the older browsers' spelling of
/// `frame-ancestors 'none'`, which [`POLICY`] carries too).
pub const FRAME_OPTIONS: &str = "DENY";

/// `X-Content-Type-Options`: the browser takes each answer as its `Content-Type` says, never as a
/// script or style it guessed from the bytes.
pub const CONTENT_TYPE_OPTIONS: &str = "nosniff";

/// `Referrer-Policy`: `same-origin`, not `no-referrer`. Requests to another origin (a link out of
/// the dashboard) carry no `Referer`, so a dashboard address (a task id, a queue in the query)
/// never reaches another site; requests to orq itself keep theirs and, with it, their `Origin`:
/// under `no-referrer` a browser sends `Origin: null` on the dashboard's own POSTs, and one too
/// old for `Sec-Fetch-Site` would then see them refused as cross-site (`cross_origin.rs`).
pub const REFERRER: &str = "same-origin";

/// `Content-Security-Policy` of every answer, and of every page before the hashes of its inline
/// scripts and styles ([`SCRIPT_SOURCES`], [`STYLE_SOURCES`]) are added:
///
/// - `default-src 'self'`: scripts, styles, images, fonts and connections (`fetch` of `/api/v1`,
///   the `EventSource` of `/api/v1/events`, the pages' `.txt` payloads) from orq's origin only;
///   the dashboard uses nothing else (no `data:` images, no `blob:` but a download link, which CSP
///   does not govern).
/// - `object-src 'none'`: no plugins. `base-uri 'none'`: the pages have no `<base>`, so an
///   injected one cannot move their relative URLs elsewhere.
/// - `form-action 'self'`: a form posts to orq only.
/// - `frame-ancestors 'none'`: no page may frame orq (see [`FRAME_OPTIONS`]).
pub const POLICY: &str = "default-src 'self'; object-src 'none'; base-uri 'none'; \
                          form-action 'self'; frame-ancestors 'none'";

/// The `script-src` of a page, followed by the hashes of its inline scripts.
pub const SCRIPT_SOURCES: &str = "script-src 'self'";

/// The `style-src` of a page, followed by the hashes of its `<style>` elements.
pub const STYLE_SOURCES: &str = "style-src 'self'";

/// Largest HTML body whose inline scripts are hashed (bytes): the body is read whole to hash
/// it. The dashboard's pages are a few KiB; a larger one is answered with a 500.
pub const PAGE_BYTES_MAX: usize = 8 << 20;

/// Middleware: give the answer the headers of the module docs. An HTML answer's policy lists its
/// inline scripts' and styles' hashes ([`page_policy`]). A 304 gets no policy: it has no body to
/// hash, and the browser keeps the headers it stored with the page but takes a 304's in their
/// place, so [`POLICY`] there would block the page's inline scripts at its next load from cache.
pub async fn add(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    let (mut parts, body) = resp.into_parts();
    set_fixed(&mut parts.headers);
    if parts.status == StatusCode::NOT_MODIFIED {
        return Response::from_parts(parts, body);
    }
    if !is_html(&parts.headers) {
        parts
            .headers
            .insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
        return Response::from_parts(parts, body);
    }
    let page = match axum::body::to_bytes(body, PAGE_BYTES_MAX).await {
        Ok(page) => page,
        Err(e) => {
            tracing::warn!(error = %e, limit_bytes = PAGE_BYTES_MAX, "an HTML answer could not be read to hash its inline scripts");
            let mut r =
                ApiError::new(ErrorCode::Internal, "the page could not be read").into_response();
            set_fixed(r.headers_mut());
            r.headers_mut()
                .insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
            return r;
        }
    };
    let policy = page_policy(&inline_hashes(&page));
    // Only ASCII goes in: the constants and base64.
    let policy = HeaderValue::from_str(&policy).unwrap_or(HeaderValue::from_static(POLICY));
    parts.headers.insert(CONTENT_SECURITY_POLICY, policy);
    Response::from_parts(parts, Body::from(page))
}

/// The headers every answer carries, whatever its status and type.
fn set_fixed(h: &mut HeaderMap) {
    h.insert(X_FRAME_OPTIONS, HeaderValue::from_static(FRAME_OPTIONS));
    h.insert(
        X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static(CONTENT_TYPE_OPTIONS),
    );
    h.insert(REFERRER_POLICY, HeaderValue::from_static(REFERRER));
}

/// Whether the answer is an HTML page (its inline scripts need their hashes in its policy).
fn is_html(h: &HeaderMap) -> bool {
    h.get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.trim_start().to_ascii_lowercase().starts_with("text/html"))
}

/// The policy of a page with `hashes`: [`POLICY`], then [`SCRIPT_SOURCES`] and [`STYLE_SOURCES`]
/// with the hashes when there are any (without, `default-src 'self'` already says it).
pub fn page_policy(hashes: &InlineHashes) -> String {
    let mut policy = POLICY.to_string();
    for (sources, list) in [
        (SCRIPT_SOURCES, &hashes.scripts),
        (STYLE_SOURCES, &hashes.styles),
    ] {
        if !list.is_empty() {
            policy.push_str("; ");
            policy.push_str(sources);
            for h in list {
                policy.push(' ');
                policy.push_str(h);
            }
        }
    }
    policy
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use axum::Router;
    use tower::ServiceExt;

    fn router() -> Router {
        Router::new()
            .route(
                "/page",
                get(|| async {
                    (
                        [(CONTENT_TYPE, "text/html; charset=utf-8")],
                        "<script>alert(1)</script><script src=/a.js></script><p>hi</p>",
                    )
                }),
            )
            .route("/json", get(|| async { axum::Json(1) }))
            .route(
                "/cached",
                get(|| async { (StatusCode::NOT_MODIFIED, [(CONTENT_TYPE, "text/html")]) }),
            )
            .layer(axum::middleware::from_fn(add))
    }

    async fn call(uri: &str) -> (HeaderMap, String) {
        let req = Request::builder().uri(uri).body(Body::empty()).unwrap();
        let r = router().oneshot(req).await.unwrap();
        let h = r.headers().clone();
        let b = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        (h, String::from_utf8(b.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_page_lists_its_inline_scripts_and_keeps_its_body() {
        let (h, body) = call("/page").await;
        assert_eq!(
            h[CONTENT_SECURITY_POLICY],
            format!(
                "{POLICY}; script-src 'self' 'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='"
            )
        );
        assert_eq!(
            body,
            "<script>alert(1)</script><script src=/a.js></script><p>hi</p>"
        );
        assert_eq!(h[X_FRAME_OPTIONS], FRAME_OPTIONS);
    }

    #[tokio::test]
    async fn other_answers_get_the_policy_and_a_304_keeps_the_stored_one() {
        let (h, body) = call("/json").await;
        assert_eq!(body, "1");
        assert_eq!(h[CONTENT_SECURITY_POLICY], POLICY);
        assert_eq!(h[X_CONTENT_TYPE_OPTIONS], CONTENT_TYPE_OPTIONS);
        assert_eq!(h[REFERRER_POLICY], REFERRER);
        let (h, _) = call("/cached").await;
        assert!(h.get(CONTENT_SECURITY_POLICY).is_none(), "{h:?}");
        assert_eq!(h[X_FRAME_OPTIONS], FRAME_OPTIONS);
        let (h, _) = call("/nowhere").await;
        assert_eq!(h[CONTENT_SECURITY_POLICY], POLICY);
    }

    #[test]
    fn a_page_without_inline_elements_has_the_plain_policy() {
        assert_eq!(page_policy(&InlineHashes::default()), POLICY);
        let both = InlineHashes {
            scripts: vec!["'sha256-a'".into()],
            styles: vec!["'sha256-b'".into(), "'sha256-c'".into()],
        };
        assert_eq!(
            page_policy(&both),
            format!(
                "{POLICY}; script-src 'self' 'sha256-a'; style-src 'self' 'sha256-b' 'sha256-c'"
            )
        );
        assert!(POLICY.contains("frame-ancestors 'none'"));
    }
}
