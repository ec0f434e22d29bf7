//! Transports: the ways a probe puts requests on the wire, behind one trait so the parts above
//! them (the 429 rule in [`super::resending`], holds, the recorder) neither know nor care which
//! one sent, and unit tests can swap in a fake that opens no socket.
//!
//! - [`Ordinary`]: the ordinary client (HTTP/1.1 or HTTP/2, kept-alive connections);
//! - [`Exact`]: exact bytes over HTTP/1.1 on a fresh connection (the key-syntax probes);
//! - [`DropAfter`]: writes the request whole, then closes the connection unread (a lost
//!   response);
//! - [`Burst`]: a synchronised burst, released in one packet over HTTP/2 or back to back over
//!   HTTP/1.1.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;

use crate::config::Config;
use crate::http::burst::BurstOptions;
use crate::http::client::Client;
use crate::http::exchange::SentRequest;
use crate::http::raw::{self, RawResponse};
use crate::http::release::ReleaseMode;
use crate::http::HttpError;
use crate::http::{h2burst, Request};

/// A shared transport.
pub type Shared = Arc<dyn Transport>;

impl<T: Transport + ?Sized> Transport for Arc<T> {
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Sent> {
        (**self).send(req)
    }

    fn deliver<'a>(&'a self, reqs: &'a [Request]) -> BoxFuture<'a, Result<Delivery, NotStaged>> {
        (**self).deliver(reqs)
    }
}

/// One request as it went out, and what came of it.
#[derive(Debug)]
pub struct Sent {
    pub request: SentRequest,
    /// What came of it; its error says what kind ([`HttpError::Dropped`] for a drop
    /// idem-check made on purpose).
    pub raw: RawResponse,
}

impl Sent {
    pub fn new(request: SentRequest, raw: RawResponse) -> Self {
        Sent { request, raw }
    }
}

/// What a transport delivered for a batch of requests, in input order.
#[derive(Debug)]
pub struct Delivery {
    pub sent: Vec<Sent>,
    /// How a synchronised burst was released; `None` for requests sent each on its own.
    pub release: Option<ReleaseMode>,
}

/// A batch that could not be put on the wire at all (a burst whose connections could not be
/// staged): nothing of it reached the server.
#[derive(Debug, thiserror::Error)]
#[error("burst could not be staged: {0:#}")]
pub struct NotStaged(#[from] anyhow::Error);

/// A way of sending requests.
pub trait Transport: Send + Sync {
    /// Sends one request and returns it as sent with its outcome.
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Sent>;

    /// Sends `reqs` together and returns each as sent with its outcome, in input order: each
    /// on its own and concurrently, unless the transport releases them as one.
    fn deliver<'a>(&'a self, reqs: &'a [Request]) -> BoxFuture<'a, Result<Delivery, NotStaged>> {
        async move {
            let sent = futures::future::join_all(reqs.iter().map(|r| self.send(r))).await;
            Ok(Delivery {
                sent,
                release: None,
            })
        }
        .boxed()
    }
}

/// The ordinary client.
pub struct Ordinary(pub Arc<Client>);

impl Transport for Ordinary {
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Sent> {
        async move {
            let (request, raw) = self.0.send(req).await;
            Sent::new(request, raw)
        }
        .boxed()
    }
}

/// Exact bytes over HTTP/1.1, each request on a fresh connection.
pub struct Exact(pub Arc<Config>);

impl Transport for Exact {
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Sent> {
        async move {
            let sent = req.prepare();
            let c = &self.0;
            let raw = raw::send_one(&c.connector, &sent, c.timeout, c.max_body).await;
            Sent::new(sent, raw)
        }
        .boxed()
    }
}

/// Writes each request whole, waits, and closes its connection without reading the answer.
pub struct DropAfter {
    pub config: Arc<Config>,
    pub wait: Duration,
}

impl DropAfter {
    pub fn new(config: &Arc<Config>, wait: Duration) -> Self {
        DropAfter {
            config: config.clone(),
            wait,
        }
    }
}

impl Transport for DropAfter {
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Sent> {
        async move {
            let sent = req.prepare();
            let c = &self.config;
            let raw = raw::send_then_drop(&c.connector, &sent, self.wait, c.timeout).await;
            Sent::new(sent, raw)
        }
        .boxed()
    }
}

/// One synchronised burst per batch: in one packet when the target speaks HTTP/2 (ALPN, or
/// `--http2` for h2c), else final bytes back to back over HTTP/1.1.
pub struct Burst(pub Arc<Config>);

impl Transport for Burst {
    /// A burst of one: a request that could not be staged failed in transport.
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Sent> {
        async move {
            let started = std::time::Instant::now();
            let failed = |e: String| {
                Sent::new(
                    req.prepare(),
                    RawResponse::ended_now(started, Err(HttpError::Unsendable(e))),
                )
            };
            match self.deliver(std::slice::from_ref(req)).await {
                Ok(mut d) => d.sent.pop().unwrap_or_else(|| failed("no response".into())),
                Err(e) => failed(e.to_string()),
            }
        }
        .boxed()
    }

    fn deliver<'a>(&'a self, reqs: &'a [Request]) -> BoxFuture<'a, Result<Delivery, NotStaged>> {
        async move {
            let c = &self.0;
            let sent: Vec<SentRequest> = reqs.iter().map(Request::prepare).collect();
            let opts = BurstOptions {
                timeout: c.timeout,
                max_body: c.max_body,
                final_bytes: 1,
                release_threads: c.release_threads.into(),
                ..BurstOptions::default()
            };
            let report = h2burst::burst_for_target(&c.connector, &sent, &opts, c.http2).await?;
            Ok(Delivery {
                sent: (report.requests.into_iter().zip(report.responses))
                    .map(|(request, raw)| Sent::new(request, raw))
                    .collect(),
                release: Some(report.release),
            })
        }
        .boxed()
    }
}
