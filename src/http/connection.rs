//! How a run opens its connections: one [`Connector`] per run, handed to every engine (the
//! ordinary client, the raw client, both burst engines, the stress pool).
//!
//! A connection is TCP (to the `--resolve` address when one is given), a CONNECT tunnel when a
//! proxy applies (see [`super::net`]), then for `https` the TLS handshake with the run's trust
//! (see [`super::tls`]). The settings are a value rather than process state so that two runs in
//! one process (a test suite, `run --openapi` over several operations) each connect as they were
//! told. Every phase is bounded by the exchange's deadline, and a timeout names the phase it ran
//! out in ([`within`]), because "timed out" alone does not tell a user whether the server
//! accepted the request.

use std::collections::HashSet;
use std::future::Future;
use std::io::{self, Write as _};
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::error::{HttpError, Phase};
use super::net::{self, NetOptions, Resolve, Route};
use super::tls::{Alpn, TlsOptions, Trust};

/// What every connection of one run shares: trust and client certificate, the route (proxy and
/// fixed addresses), and what the run has learned about origins.
#[derive(Debug)]
pub struct Connector {
    trust: Trust,
    route: Route,
    /// Origins (`scheme://host:port`) whose TLS servers picked `http/1.1` when offered `h2`:
    /// later bursts to them go straight to the HTTP/1.1 engine instead of paying for a second
    /// handshake (see [`super::h2burst::burst_for_target`]).
    http1_origins: Mutex<HashSet<String>>,
}

impl Connector {
    /// The connector for a run with these settings: reads the certificate files and checks the
    /// proxies and `--resolve` entries, so a bad setting fails before any request.
    pub fn new(tls: &TlsOptions, net: &NetOptions) -> anyhow::Result<Connector> {
        Ok(Connector {
            trust: Trust::new(tls)?,
            route: Route::new(net)?,
            http1_origins: Mutex::new(HashSet::new()),
        })
    }

    /// One-line facts for the run's header and every report: certificates not verified, a proxy
    /// in use, fixed addresses.
    pub fn context(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if self.trust.insecure() {
            lines.push("TLS certificates NOT verified (--insecure)".to_string());
        }
        lines.extend(self.route.context());
        lines
    }

    /// The proxy `url` goes through, if any (see [`Route::proxy_for`]).
    pub(crate) fn proxy_for(&self, url: &url::Url) -> Option<url::Url> {
        self.route.proxy_for(url)
    }

    /// The proxy `url` goes through as a report shows it (no credentials), if any: what a
    /// burst's release mode names.
    pub(crate) fn proxy_shown(&self, url: &url::Url) -> Option<String> {
        self.proxy_for(url).map(|p| net::shown(&p))
    }

    /// The `--resolve` entries, for the ordinary client.
    pub(crate) fn overrides(&self) -> &[Resolve] {
        self.route.overrides()
    }

    /// The TLS configuration offering `h2` then `http/1.1`, for the ordinary client.
    pub(crate) fn h2_first_tls(&self) -> tokio_rustls::rustls::ClientConfig {
        self.trust.h2_first()
    }

    /// Whether `url`'s origin is known to pick `http/1.1` when offered `h2`.
    pub(crate) fn picked_http1(&self, url: &url::Url) -> bool {
        self.origins().contains(&origin(url))
    }

    /// Remembers that `url`'s origin picked `http/1.1` when offered `h2`.
    pub(crate) fn remember_http1(&self, url: &url::Url) {
        self.origins().insert(origin(url));
    }

    fn origins(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.http1_origins.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a connection to `url`'s origin that speaks HTTP/1.1: TCP (TCP_NODELAY, so a
    /// held-back final byte leaves the moment it is written) and, for `https`, a TLS handshake
    /// offering only `http/1.1`.
    pub(crate) async fn connect(
        &self,
        url: &url::Url,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Stream, HttpError> {
        self.connect_offering(url, Alpn::Http1, deadline, timeout)
            .await
            .map(|(stream, _)| stream)
    }

    /// Opens a connection for an HTTP/2 burst; the flag is whether it speaks HTTP/2: always for
    /// `http` (the caller asserted prior knowledge), the server's ALPN pick for `https`, where
    /// `h2` is offered before `http/1.1`.
    pub(crate) async fn connect_h2(
        &self,
        url: &url::Url,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(Stream, bool), HttpError> {
        self.connect_offering(url, Alpn::H2First, deadline, timeout)
            .await
    }

    async fn connect_offering(
        &self,
        url: &url::Url,
        alpn: Alpn,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(Stream, bool), HttpError> {
        let (tcp, host) = self.connect_tcp(url, deadline, timeout).await?;
        if url.scheme() != "https" {
            return Ok((Stream::Plain(tcp), true));
        }
        let handshake = self.trust.handshake(tcp, host, alpn);
        let (tls, h2) = within(deadline, timeout, Phase::Tls, handshake).await?;
        Ok((Stream::Tls(Box::new(tls)), h2))
    }

    /// The TCP part of a connection: the connected socket (TCP_NODELAY set) and the URL's host.
    /// Through a proxy the socket leads to the proxy, with a CONNECT tunnel to the target
    /// already open on it.
    async fn connect_tcp<'u>(
        &self,
        url: &'u url::Url,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(TcpStream, &'u str), HttpError> {
        let host = url
            .host_str()
            .ok_or_else(|| HttpError::Unsendable(format!("the URL {url} has no host")))?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| HttpError::Unsendable(format!("the URL {url} has no port")))?;
        let authority = format!("{host}:{port}");
        let proxy = self.proxy_for(url);
        let phase = Phase::Connect {
            authority: authority.clone(),
            proxy: proxy.as_ref().map(net::shown),
        };
        let tcp = within(deadline, timeout, phase, async {
            match &proxy {
                None => self.route.dial(host, port).await,
                Some(p) => {
                    let (Some(proxy_host), Some(proxy_port)) =
                        (p.host_str(), p.port_or_known_default())
                    else {
                        return Err(HttpError::Proxy(format!(
                            "the proxy URL {} has no host",
                            net::shown(p)
                        )));
                    };
                    let mut tcp = self
                        .route
                        .dial(proxy_host, proxy_port)
                        .await
                        .map_err(|e| HttpError::Proxy(format!("{e} (the proxy)")))?;
                    net::tunnel(&mut tcp, host, port, p).await?;
                    Ok(tcp)
                }
            }
        })
        .await?;
        tcp.set_nodelay(true).map_err(|e| {
            HttpError::Connect(format!("could not set TCP_NODELAY on {authority}: {e}"))
        })?;
        Ok((tcp, host))
    }
}

impl Default for Connector {
    /// Public roots, no client certificate, no proxy, no fixed address.
    fn default() -> Self {
        Connector::new(&TlsOptions::default(), &NetOptions::default())
            .expect("the default settings read no file and name no proxy: nothing can fail")
    }
}

/// `scheme://host:port`: what a connection, a pooled connection or an HTTP/2 burst is bound to.
pub(crate) fn origin(url: &url::Url) -> String {
    url.origin().ascii_serialization()
}

/// A connection to the target, plain or TLS; the burst engines reach through it to the TCP
/// socket to release pre-encrypted final bytes.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// The TCP socket under the connection.
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref().0,
        }
    }

    /// The bytes that carry `plain` on this connection: `plain` itself, or over TLS one record
    /// sealed *now*. A burst seals its final bytes while staging so the release is a plain
    /// socket write with no crypto in it; rustls advances its sequence number, so writing the
    /// record raw later keeps the TLS stream consistent.
    pub(crate) fn seal(&mut self, plain: &[u8]) -> Result<Vec<u8>, HttpError> {
        match self {
            Stream::Plain(_) => Ok(plain.to_vec()),
            Stream::Tls(tls) => {
                let (_, conn) = tls.get_mut();
                let mut record = Vec::new();
                conn.writer()
                    .write_all(plain)
                    .and_then(|()| {
                        while conn.wants_write() {
                            conn.write_tls(&mut record)?;
                        }
                        Ok(())
                    })
                    .map_err(|e| {
                        HttpError::ReleaseFailed(format!(
                            "sealing the final TLS record failed: {e}"
                        ))
                    })?;
                Ok(record)
            }
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Writes `bytes` whole and flushes them, by `deadline`. A write that fails is a connection
/// that ended before any byte of an answer: nothing was read yet.
pub(crate) async fn write_request(
    stream: &mut Stream,
    bytes: &[u8],
    deadline: Instant,
    timeout: Duration,
) -> Result<(), HttpError> {
    let write = async {
        stream.write_all(bytes).await?;
        stream.flush().await
    };
    within(deadline, timeout, Phase::Write, async {
        write
            .await
            .map_err(|e| HttpError::ClosedBeforeAnyByte(format!("writing the request failed: {e}")))
    })
    .await
}

/// Runs `fut` until `deadline`; on expiry the error is a timeout of `timeout` in `phase`.
pub(crate) async fn within<T>(
    deadline: Instant,
    timeout: Duration,
    phase: Phase,
    fut: impl Future<Output = Result<T, HttpError>>,
) -> Result<T, HttpError> {
    match tokio::time::timeout_at(deadline.into(), fut).await {
        Ok(r) => r,
        Err(_) => Err(HttpError::Timeout {
            phase,
            after: timeout,
        }),
    }
}
