//! DNS rebinding: a page on a name its owner points at 127.0.0.1 is, to the browser, on the same
//! origin as an orq listening there, so Fetch Metadata and CORS let it read and write. A keyless
//! orq (authentication off, loopback only) therefore answers only requests whose `Host` is a
//! loopback name ([`loopback_host`]): `localhost` or a name under `.localhost` (browsers resolve
//! those to loopback themselves, RFC 6761), an IPv4 address in 127.0.0.0/8, or `[::1]`, with any
//! port. Any other `Host` is refused with 403 `forbidden` (so is a second `Host` that is not,
//! and an absolute-form target naming another host); a request without `Host` is not a
//! browser's and passes. With `--api-keys` a page has no key to send; with `--insecure-no-auth`
//! something in front of orq answers for it; neither is checked.

use crate::error::ApiError;
use crate::error_code::ErrorCode;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Middleware: when `on` (a keyless loopback orq), refuse a request whose `Host` (every copy of
/// it, and the authority of an absolute-form target) is not a loopback name (module docs).
pub async fn refuse_other_hosts(State(on): State<bool>, req: Request, next: Next) -> Response {
    if on {
        let hosts = req.headers().get_all(header::HOST).iter();
        let named = hosts
            .map(|h| h.to_str().unwrap_or("").to_string())
            .chain(req.uri().authority().map(|a| a.to_string()));
        for host in named {
            if !loopback_host(&host) {
                let shown: String = host.chars().take(80).collect();
                tracing::info!(host = %shown, path = %req.uri().path(), "refused: not a loopback host name");
                return ApiError::new(
                    ErrorCode::Forbidden,
                    format!(
                        "Host {shown} refused: without API keys orq answers only to loopback names \
                         (localhost, 127.0.0.1, [::1]), so a web page cannot reach it through a \
                         name of its own (DNS rebinding); pass --api-keys, or --insecure-no-auth \
                         when something in front of orq authenticates, to serve other names"
                    ),
                )
                .into_response();
            }
        }
    }
    next.run(req).await
}

/// Whether a `Host` header's value names a loopback host (any port, or none).
pub fn loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        // `[v6]` or `[v6]:port`
        match rest.split_once(']') {
            Some((v6, port)) if port.is_empty() || port.starts_with(':') => v6,
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            Some(_) => return false,
            None => host,
        }
    };
    if let Ok(ip) = name.parse::<std::net::IpAddr>() {
        return ip.is_loopback();
    }
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_are_loopback_hosts() {
        for ok in [
            "localhost",
            "localhost:8080",
            "LOCALHOST:8080",
            "localhost.:8080",
            "orq.localhost:8080",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:8080",
        ] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in [
            "",
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example:8080",
            "127.0.0.1.nip.io:8080",
            "10.0.0.1:8080",
            "0.0.0.0:8080",
            "[::2]:8080",
            "[::1]x",
            "::1",
            "localhost:80a",
            "notlocalhost:8080",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }
}
