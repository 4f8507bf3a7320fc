//! The HTTP server loop: HTTP/1.1 connections on a listener, each with a bounded time to send
//! its request headers and its request body, a cap on connections open at once, and graceful
//! shutdown. `axum::serve` has no header timeout (its hyper builder has no timer), so a client
//! that trickles its headers byte by byte would hold a connection for ever; this loop is the
//! same thing with hyper's header read timeout set and the body deadline of [`DeadlineBody`].

use axum::body::Body;
use axum::Router;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// Default time a client has to send a request's headers, from the moment the server waits for
/// them (also the longest an idle keep-alive connection stays open), ms.
pub const HEADER_TIMEOUT_MS_DEFAULT: u64 = 15_000;
/// Default time a client has to send a whole request body, from the end of its headers, ms
/// (16 MiB, the largest body, at about 300 KB/s).
pub const BODY_TIMEOUT_MS_DEFAULT: u64 = 60_000;
/// Default most connections open at once; beyond, new connections wait in the listen backlog.
pub const CONNECTIONS_MAX_DEFAULT: usize = 10_000;
/// Longest graceful shutdown waits for open requests to finish, ms.
pub const SHUTDOWN_GRACE_MS: u64 = 30_000;

/// Time and connection limits of [`serve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeLimits {
    /// See [`HEADER_TIMEOUT_MS_DEFAULT`].
    pub header_timeout_ms: u64,
    /// See [`BODY_TIMEOUT_MS_DEFAULT`].
    pub body_timeout_ms: u64,
    /// See [`CONNECTIONS_MAX_DEFAULT`].
    pub connections_max: usize,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            header_timeout_ms: HEADER_TIMEOUT_MS_DEFAULT,
            body_timeout_ms: BODY_TIMEOUT_MS_DEFAULT,
            connections_max: CONNECTIONS_MAX_DEFAULT,
        }
    }
}

/// The error a request body gives once its deadline has passed; the API answers it with 408
/// (see `extract::ApiJson`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyTimeout {
    /// The deadline, ms after the headers.
    pub timeout_ms: u64,
}

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request body did not arrive within {} ms",
            self.timeout_ms
        )
    }
}

impl std::error::Error for BodyTimeout {}

/// A request body that fails with [`BodyTimeout`] when it is not complete by a deadline set
/// when it is made (a total bound, unlike tower-http's timeout between frames, which a client
/// sending one byte at a time never trips).
pub struct DeadlineBody {
    inner: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    timeout_ms: u64,
}

impl DeadlineBody {
    /// `inner`, to be complete within `timeout_ms` from now.
    pub fn new(inner: Incoming, timeout_ms: u64) -> Self {
        DeadlineBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(Duration::from_millis(timeout_ms))),
            timeout_ms,
        }
    }
}

impl http_body::Body for DeadlineBody {
    type Data = hyper::body::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(r) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(r.map(|f| f.map_err(Into::into)));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyTimeout {
                timeout_ms: this.timeout_ms,
            }))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Serve `router` on `listener` until `shutdown` is cancelled, then stop accepting, let open
/// requests finish (at most [`SHUTDOWN_GRACE_MS`]) and return. HTTP/1.1 only. A client that
/// has not sent its headers within `header_timeout_ms` is disconnected; a request body not
/// complete within `body_timeout_ms` fails (408).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ServeLimits,
    shutdown: CancellationToken,
) {
    let tracker = TaskTracker::new();
    let slots = Arc::new(Semaphore::new(limits.connections_max.max(1)));
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            p = slots.clone().acquire_owned() => p.expect("the semaphore is never closed"),
        };
        let stream = tokio::select! {
            _ = shutdown.cancelled() => break,
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let shutdown = shutdown.clone();
        tracker.spawn(async move {
            let _permit = permit;
            let body_ms = limits.body_timeout_ms;
            let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let req = req.map(|b| Body::new(DeadlineBody::new(b, body_ms)));
                router.clone().oneshot(req)
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_millis(limits.header_timeout_ms));
            let conn = builder.serve_connection(TokioIo::new(stream), svc);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                }
                _ = shutdown.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.as_mut().await;
                }
            }
        });
    }
    drop(listener);
    tracker.close();
    if tokio::time::timeout(Duration::from_millis(SHUTDOWN_GRACE_MS), tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("shutdown: some requests were still open after {SHUTDOWN_GRACE_MS} ms");
    }
}
