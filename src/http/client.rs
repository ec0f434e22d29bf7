//! The ordinary client: HTTP/1.1 or HTTP/2 (ALPN) over reqwest, recording every exchange.
//!
//! Probes that need exact bytes on the wire use [`super::raw`]; everything else goes here so a
//! target that speaks only HTTP/2, or sits behind TLS, is exercised the way real clients reach
//! it. The recorded request is the one reqwest sends: our headers in order plus the Host and
//! Content-Length it derives, which [`super::h1::prepare`] makes explicit. It connects with the
//! run's [`Connector`] settings (trust, proxy, fixed addresses), as the raw client does.
//!
//! Connections are pooled, except after a 5xx: some servers close a keep-alive connection after
//! an error without saying `Connection: close` (uvicorn after an unhandled exception), and a
//! request written on it is reset before it reaches the application. That reset is no answer of
//! the server's, and a retry after a crash is exactly the request a probe must see answered, so
//! after any 5xx the next requests go out on new connections.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::connection::Connector;
use super::exchange::{Header, ReceivedResponse, SentRequest};
use super::raw::RawResponse;
use super::Request;

/// A shared, pooled client; one per run.
pub struct Client {
    /// The run's connection settings, for every pool built.
    connector: Arc<Connector>,
    /// The pool requests go through; replaced by an empty one after every 5xx.
    pool: Mutex<reqwest::Client>,
    timeout: Duration,
    max_body: usize,
}

/// A reqwest builder with `connector`'s TLS settings, proxy and fixed addresses, the same the
/// raw client uses; for every other HTTP client of a run (the restart hook's readiness poll).
pub fn builder(connector: &Arc<Connector>) -> reqwest::ClientBuilder {
    let routed = connector.clone();
    let mut builder = reqwest::Client::builder()
        .use_preconfigured_tls(connector.h2_first_tls())
        .proxy(reqwest::Proxy::custom(move |url| routed.proxy_for(url)));
    for r in connector.overrides() {
        builder = builder.resolve(&r.host, std::net::SocketAddr::new(r.addr, r.port));
    }
    builder
}

impl Client {
    /// A client connecting with `connector` whose requests go through a [`pool`] with these
    /// settings.
    pub fn new(connector: Arc<Connector>, timeout: Duration, max_body: usize) -> Result<Client> {
        Ok(Client {
            pool: Mutex::new(pool(&connector, timeout)?),
            connector,
            timeout,
            max_body,
        })
    }

    /// The pool to send the next request through.
    fn pool(&self) -> reqwest::Client {
        self.pool.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Retires every pooled connection, the one that just carried a 5xx among them: requests
    /// still in flight finish on their own connections, the next ones open new connections.
    /// Should the new pool fail to build (its settings built one before), the old one is kept.
    fn retire_connections(&self) {
        if let Ok(fresh) = pool(&self.connector, self.timeout) {
            *self.pool.lock().unwrap_or_else(|e| e.into_inner()) = fresh;
        }
    }

    /// Sends `req` and returns it as sent with the response or the transport error.
    pub async fn send(&self, req: &Request) -> (SentRequest, RawResponse) {
        let sent = req.prepare();
        let started = Instant::now();
        let result = self.exchange(&sent).await;
        let finished = Instant::now();
        if result.as_ref().is_ok_and(|r| r.status >= 500) {
            self.retire_connections();
        }
        (
            sent,
            RawResponse {
                started,
                released: None,
                finished,
                result,
            },
        )
    }

    async fn exchange(&self, sent: &SentRequest) -> Result<ReceivedResponse, String> {
        let method = reqwest::Method::from_bytes(sent.method.as_bytes())
            .map_err(|_| format!("{:?} is not an HTTP method", sent.method))?;
        let mut builder = self.pool().request(method, &sent.url);
        for h in &sent.headers {
            // reqwest derives Host from the URL (and :authority on HTTP/2); sending ours too
            // would duplicate it on HTTP/2.
            if h.name.eq_ignore_ascii_case("host") {
                continue;
            }
            let value = reqwest::header::HeaderValue::from_bytes(&h.value).map_err(|_| {
                format!(
                    "header {} holds bytes HTTP clients refuse; this probe must use the raw client",
                    h.name
                )
            })?;
            builder = builder.header(h.name.as_str(), value);
        }
        let mut resp = builder
            .body(sent.body.clone())
            .send()
            .await
            .map_err(|e| describe(&e, self.timeout))?;
        let status = resp.status().as_u16();
        let version = format!("{:?}", resp.version());
        let headers = resp
            .headers()
            .iter()
            .map(|(n, v)| Header::new(n.as_str(), v.as_bytes().to_vec()))
            .collect();
        let mut body = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| format!("reading the body: {}", describe(&e, self.timeout)))?
        {
            let room = self.max_body.saturating_sub(body.len());
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(ReceivedResponse {
            status,
            version,
            headers,
            body,
            body_truncated: truncated,
            problem: None,
        })
    }
}

/// A pool that never follows redirects (a 3xx is an answer to judge, not to chase) and gives up
/// on any request after `timeout`, connecting as [`builder`] says.
fn pool(connector: &Arc<Connector>, timeout: Duration) -> Result<reqwest::Client> {
    builder(connector)
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(timeout)
        .timeout(timeout)
        .user_agent(concat!("idem-check/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("could not build the HTTP client")
}

/// One line naming what went wrong, from the innermost cause reqwest wraps ("could not connect:
/// Connection refused", "TLS handshake failed: invalid peer certificate: UnknownIssuer", "timed
/// out after 10 s"). The URL is not repeated: the evidence shows it next to the error.
fn describe(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        return format!("timed out after {} s", timeout.as_secs_f64());
    }
    let mut root = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        root = s.to_string();
        source = s.source();
    }
    if failed_in_tls(e) {
        format!("TLS handshake failed: {root} (does the server speak TLS on this port, with a certificate this machine trusts?)")
    } else if e.is_connect() {
        format!("could not connect: {root}")
    } else {
        root
    }
}

/// Whether the request failed in the TLS handshake: a rustls error among its causes.
pub(crate) fn failed_in_tls(e: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if is_tls(s) {
            return true;
        }
        source = s.source();
    }
    false
}

/// Whether `e` is a rustls error, directly or inside (nested) `io::Error`s, whose `source()`
/// skips the wrapped error.
fn is_tls(e: &(dyn std::error::Error + 'static)) -> bool {
    if e.is::<tokio_rustls::rustls::Error>() {
        return true;
    }
    match e
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
    {
        Some(inner) => is_tls(inner),
        None => false,
    }
}
