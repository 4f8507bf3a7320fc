//! Cross-site request forgery: a web page on another site must not make a visitor's browser
//! write to orq. Without API keys orq listens on loopback with every request acting as an admin,
//! and a page anywhere could have the browser of someone running orq POST a task, replay or purge
//! the DLQ, or start a simulation (a form or `fetch(..., {mode: "no-cors"})` sends such a request
//! without asking; the answer is hidden from the page, the effect is not). With keys a browser
//! sends no `Authorization` on its own, so this changes nothing there.
//!
//! The rule ([`refuse_cross_site`], as browsers' Fetch Metadata allow): a request that may write
//! (any method but GET, HEAD and OPTIONS) is refused with 403 `forbidden` when its
//! `Sec-Fetch-Site` says it comes from another site or origin; a browser too old to send that
//! header is judged by `Origin`, which must name the host the request was sent to (`Host`).
//! Requests with neither header (curl, the SDKs, the admin CLI, workers) are not browsers' and
//! pass; the dashboard's own calls are same-origin and pass.

use crate::error::ApiError;
use crate::error_code::ErrorCode;
use axum::extract::Request;
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Middleware: refuse a cross-site request that may write (module docs); pass every other.
pub async fn refuse_cross_site(req: Request, next: Next) -> Response {
    let reads = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !reads {
        if let Err(why) = same_origin(req.headers()) {
            tracing::info!(method = %req.method(), path = %req.uri().path(), %why, "refused: a cross-site write");
            return ApiError::new(
                ErrorCode::Forbidden,
                format!(
                    "cross-site request refused ({why}): orq takes writes from its own pages and \
                     from clients that are not browsers"
                ),
            )
            .into_response();
        }
    }
    next.run(req).await
}

/// Whether the request's browser headers show it comes from orq's own origin, or it has none
/// (not a browser): `Err` says which header says otherwise.
fn same_origin(h: &HeaderMap) -> Result<(), String> {
    // Browsers send each header once; a request with several must pass on every copy.
    let sites: Vec<_> = h.get_all("sec-fetch-site").iter().collect();
    if !sites.is_empty() {
        for site in sites {
            match site.as_bytes() {
                // `none`: the user's own act (typed into the address bar, a bookmark).
                b"same-origin" | b"none" => {}
                other => {
                    return Err(format!(
                        "Sec-Fetch-Site: {}",
                        String::from_utf8_lossy(other)
                            .chars()
                            .take(32)
                            .collect::<String>()
                    ))
                }
            }
        }
        return Ok(());
    }
    let hosts: Vec<&str> = h
        .get_all(header::HOST)
        .iter()
        .map(|v| v.to_str().unwrap_or(""))
        .collect();
    for origin in h.get_all(header::ORIGIN) {
        let origin = String::from_utf8_lossy(origin.as_bytes());
        // `scheme://host[:port]`; "null" (a sandboxed or file page) has no host and never
        // matches.
        let origin_host = origin.split_once("://").map(|(_, rest)| rest).unwrap_or("");
        let matches =
            hosts.len() == 1 && !hosts[0].is_empty() && origin_host.eq_ignore_ascii_case(hosts[0]);
        if !matches {
            let shown: String = origin.chars().take(80).collect();
            return Err(format!("Origin {shown} is not this host"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    // Goal: a browser's cross-site or cross-origin request is told from orq's own pages and from
    // clients that are not browsers, by Fetch Metadata first, else by Origin against Host.
    #[test]
    fn only_cross_site_browser_requests_are_refused() {
        let host = ("host", "127.0.0.1:8080");
        for ok in [
            vec![],
            vec![host],
            vec![host, ("sec-fetch-site", "same-origin")],
            vec![host, ("sec-fetch-site", "none")],
            vec![host, ("origin", "http://127.0.0.1:8080")],
            vec![
                ("host", "LOCALHOST:8080"),
                ("origin", "http://localhost:8080"),
            ],
            // Fetch Metadata decides when present, whatever Origin says.
            vec![
                host,
                ("sec-fetch-site", "same-origin"),
                ("origin", "http://proxy:3000"),
            ],
        ] {
            assert_eq!(same_origin(&headers(&ok)), Ok(()), "{ok:?}");
        }
        for bad in [
            vec![host, ("sec-fetch-site", "cross-site")],
            vec![host, ("sec-fetch-site", "same-site")],
            vec![host, ("sec-fetch-site", "unknown")],
            vec![host, ("origin", "https://evil.example")],
            vec![host, ("origin", "http://127.0.0.1:9999")],
            vec![host, ("origin", "null")],
            vec![("origin", "http://127.0.0.1:8080")],
            vec![
                host,
                ("sec-fetch-site", "cross-site"),
                ("origin", "http://127.0.0.1:8080"),
            ],
        ] {
            assert!(same_origin(&headers(&bad)).is_err(), "{bad:?}");
        }
        // Two copies of a header: every one must pass, in either order.
        for (name, good, evil) in [
            ("sec-fetch-site", "same-origin", "cross-site"),
            ("origin", "http://127.0.0.1:8080", "https://evil.example"),
        ] {
            for pair in [[good, evil], [evil, good]] {
                let mut h = headers(&[host]);
                for v in pair {
                    h.append(name, v.parse().unwrap());
                }
                assert!(same_origin(&h).is_err(), "{name}: {pair:?}");
            }
        }
    }
}
