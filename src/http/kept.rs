//! Which connections of the ordinary client have carried a response, so that a request failing
//! on one of them before any byte of its answer is told from one failing on a new connection.
//!
//! Servers close a kept-alive connection once it has been idle for a while (gunicorn after 2 s,
//! many proxies after a few seconds) without `Connection: close`: they answered on it and say
//! nothing more. A request written on it as the close happens meets the end of the stream or a
//! reset before any byte of an answer; the server closed between two requests and never took
//! it, so it is sent again, once, on a new connection, as curl and browsers do. On a new
//! connection the same failure is the server's own doing (it crashed, or refused the request)
//! and stays the exchange's outcome.
//!
//! reqwest does not say which connection a request went out on, but its errors carry
//! hyper-util's, with that connection's addresses ([`HttpInfo`]). [`Served`] remembers the local
//! address of every connection that carried a response, and [`ForgetNew`] forgets it again when
//! a new connection gets the same address (ports are reused).
//!
//! One case this cannot tell: hyper reports a response head cut off in the middle, then the
//! end of the stream, as it reports no byte at all, so a kept connection closed inside a
//! status line or header would see its request again. The raw engines ([`super::pool`]) count
//! the bytes themselves and never do.

use std::collections::HashSet;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::{Connection, HttpInfo};

/// The local addresses of the client's connections that have carried a response.
#[derive(Clone, Default)]
pub(crate) struct Served(Arc<Mutex<HashSet<SocketAddr>>>);

impl Served {
    /// Notes that the connection `response` came on has carried a response.
    pub(crate) fn carried(&self, response: &reqwest::Response) {
        if let Some(info) = response.extensions().get::<HttpInfo>() {
            self.lock().insert(info.local_addr());
        }
    }

    /// Whether the request that failed with `e` went out on a connection that had carried a
    /// response: if that connection ended before any byte of the answer
    /// ([`super::HttpError::ClosedBeforeAnyByte`]), the server closed it while it was idle.
    pub(crate) fn went_out_on_served(&self, e: &reqwest::Error) -> bool {
        connection_of(e).is_some_and(|addr| self.lock().contains(&addr))
    }

    fn lock(&self) -> MutexGuard<'_, HashSet<SocketAddr>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The local address of the connection a failed request went out on, when it got one.
fn connection_of(e: &reqwest::Error) -> Option<SocketAddr> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(failed) = s.downcast_ref::<hyper_util::client::legacy::Error>() {
            let mut extras = http::Extensions::new();
            failed.connect_info()?.get_extras(&mut extras);
            return extras.get::<HttpInfo>().map(HttpInfo::local_addr);
        }
        source = s.source();
    }
    None
}

/// Whether the connection ended before the response head was read: hyper's "connection closed
/// before message completed", a request hyper could no longer hand to the connection, or a
/// reset, broken pipe or unexpected end of stream. A timeout or a failed connect is never
/// that: the server may still be working on the request, or never had it.
pub(crate) fn ended_before_any_byte(e: &reqwest::Error) -> bool {
    if e.is_timeout() || e.is_connect() {
        return false;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(h) = s.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() {
                return true;
            }
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(
                io.kind(),
                ConnectionReset | BrokenPipe | ConnectionAborted | UnexpectedEof
            ) {
                return true;
            }
        }
        source = s.source();
    }
    false
}

/// Whether an HTTP/2 stream or connection error is among `e`'s causes.
pub(crate) fn broke_http2(e: &reqwest::Error) -> bool {
    causes(e).any(|s| s.is::<h2::Error>())
}

/// Whether hyper could not parse the HTTP/1.1 answer (`e`'s causes hold a parse error or an
/// unexpected message).
pub(crate) fn unparsable(e: &reqwest::Error) -> bool {
    causes(e).any(|s| {
        s.downcast_ref::<hyper::Error>()
            .is_some_and(|h| h.is_parse() || h.is_parse_status() || h.is_parse_too_large())
    })
}

/// The errors `e` wraps, outermost first.
fn causes(e: &reqwest::Error) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    std::iter::successors(std::error::Error::source(e), |s| s.source())
}

/// The connector layer that forgets a new connection's address in [`Served`]: the connection
/// that had it before is gone, and the new one has carried nothing yet.
#[derive(Clone)]
pub(crate) struct ForgetNew(pub(crate) Served);

impl<S> tower::Layer<S> for ForgetNew {
    type Service = Forgetting<S>;

    fn layer(&self, inner: S) -> Forgetting<S> {
        Forgetting {
            inner,
            served: self.0.clone(),
        }
    }
}

/// The connector wrapped by [`ForgetNew`].
#[derive(Clone)]
pub(crate) struct Forgetting<S> {
    inner: S,
    served: Served,
}

impl<S, R> tower::Service<R> for Forgetting<S>
where
    S: tower::Service<R>,
    S::Response: Connection + Send + 'static,
    S::Error: 'static,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let opening = self.inner.call(req);
        let served = self.served.clone();
        Box::pin(async move {
            let conn = opening.await?;
            let mut extras = http::Extensions::new();
            conn.connected().get_extras(&mut extras);
            if let Some(info) = extras.get::<HttpInfo>() {
                served.lock().remove(&info.local_addr());
            }
            Ok(conn)
        })
    }
}
