//! The ordinary client: HTTP/1.1 or HTTP/2 (ALPN) over reqwest, recording every exchange.
//!
//! Probes that need exact bytes on the wire use [`super::raw`]; everything else goes here so a
//! target that speaks only HTTP/2, or sits behind TLS, is exercised the way real clients reach
//! it. The recorded request is the one reqwest sends: our headers in order plus the Host and
//! Content-Length it derives, which [`super::h1::prepare`] makes explicit, and the Accept and
//! User-Agent it adds, with names lower-cased as hyper writes them (see [`as_sent`]). It connects with the
//! run's [`Connector`] settings (trust, proxy, fixed addresses), as the raw client does.
//!
//! Connections are pooled. A request that fails on a kept-alive connection before any byte of
//! its answer (the server closed the connection while it was idle, see [`super::kept`]) is sent
//! again, once, on a new connection, and its record says so; the pool's other connections,
//! idle as long, are retired with it. A request that failed on a new connection, or after any
//! byte of an answer, is never sent again.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::connection::Connector;
use super::exchange::{Header, ReceivedResponse, SentRequest};
use super::kept::{self, ForgetNew, Served};
use super::raw::{RawResponse, UNAUTHORIZED};
use super::{HttpError, Phase, Request};

/// A shared, pooled client; one per run.
pub struct Client {
    /// The run's connection settings, for every pool built.
    connector: Arc<Connector>,
    /// The pool requests go through; replaced by an empty one when a kept-alive connection
    /// was found closed under a request.
    pool: Mutex<reqwest::Client>,
    /// The connections that have carried a response.
    served: Served,
    timeout: Duration,
    max_body: usize,
    /// `--auth-cmd`'s credential: every request carries its current value, and a 401 fetches
    /// a new one and sends the request once more.
    credential: Option<Arc<dyn Renewable>>,
}

/// A credential the client keeps current (`--auth-cmd`, [`crate::auth_cmd`]): every request that
/// carries it gets its current value, and a 401 to such a request asks for a new one. A trait,
/// so the transport knows nothing of how a credential is fetched.
pub trait Renewable: Send + Sync + std::fmt::Debug {
    /// `req` with the current credential in place of an earlier one.
    fn applied(&self, req: &Request) -> Request;
    /// Whether `req` carries this credential (tenant A's, not B's).
    fn carried_by(&self, req: &Request) -> bool;
    /// After a 401 to a request sent with `refused` headers: `true` when a credential newer
    /// than theirs is now current (fetched by this call, or already by another's).
    fn renew<'a>(&'a self, refused: &'a [Header]) -> futures::future::BoxFuture<'a, bool>;
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
        let served = Served::default();
        Ok(Client {
            pool: Mutex::new(pool(&connector, timeout, &served)?),
            served,
            connector,
            timeout,
            max_body,
            credential: None,
        })
    }

    /// This client, carrying `credential` ([`crate::auth_cmd`]) when there is one.
    pub fn with_credential(mut self, credential: Option<Arc<dyn Renewable>>) -> Client {
        self.credential = credential;
        self
    }

    /// The pool to send the next request through.
    fn pool(&self) -> reqwest::Client {
        self.pool.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Retires every pooled connection: requests still in flight finish on their own
    /// connections, the next ones open new connections. Should the new pool fail to build (its
    /// settings built one before), the old one is kept.
    fn retire_connections(&self) {
        if let Ok(fresh) = pool(&self.connector, self.timeout, &self.served) {
            *self.pool.lock().unwrap_or_else(|e| e.into_inner()) = fresh;
        }
    }

    /// Sends `req` and returns it as sent with the response or the transport error. A request
    /// the server's idle close took before any byte of an answer is sent again, once, on a
    /// connection of its own (see the module documentation); the response says so.
    pub async fn send(&self, req: &Request) -> (SentRequest, RawResponse) {
        let Some(credential) = &self.credential else {
            return self.send_once(req).await;
        };
        let (sent, raw) = self.send_once(&credential.applied(req)).await;
        let refused = raw.result.as_ref().is_ok_and(|r| r.status == UNAUTHORIZED);
        if !refused || !credential.carried_by(req) || !credential.renew(&sent.headers).await {
            return (sent, raw);
        }
        let (sent, again) = self.send_once(&credential.applied(req)).await;
        (sent, again.sent_with_new_credential(raw.started))
    }

    /// [`Client::send`] without the credential's refresh.
    async fn send_once(&self, req: &Request) -> (SentRequest, RawResponse) {
        let mut sent = as_sent(req.prepare());
        let started = Instant::now();
        let response = match self.exchange(&self.pool(), &sent).await {
            Err(Failed {
                error,
                on_served: true,
            }) if error.closed_before_any_byte() => {
                self.retire_connections();
                match pool(&self.connector, self.timeout, &self.served) {
                    Ok(own) => {
                        let again = self.exchange(&own, &sent).await;
                        RawResponse::ended_now(started, again.map_err(|f| f.error))
                            .sent_again(started, &error)
                    }
                    Err(_) => RawResponse::ended_now(started, Err(error)),
                }
            }
            other => RawResponse::ended_now(started, other.map_err(|f| f.error)),
        };
        if response
            .result
            .as_ref()
            .is_ok_and(|r| r.version == http::Version::HTTP_2)
        {
            // HTTP/2 sends the authority first, as a pseudo-header; the record calls it `host`
            // there, as the HTTP/2 burst's does.
            if let Some(at) = sent.headers.iter().position(|h| h.name == "host") {
                let host = sent.headers.remove(at);
                sent.headers.insert(0, host);
            }
        }
        (sent, response)
    }

    async fn exchange(
        &self,
        pool: &reqwest::Client,
        sent: &SentRequest,
    ) -> Result<ReceivedResponse, Failed> {
        let method = reqwest::Method::from_bytes(sent.method.as_bytes()).map_err(|_| {
            HttpError::Unsendable(format!("{:?} is not an HTTP method", sent.method))
        })?;
        let mut builder = pool.request(method, &sent.url);
        for h in &sent.headers {
            // reqwest derives Host from the URL (and :authority on HTTP/2); sending ours too
            // would duplicate it on HTTP/2.
            if h.name.eq_ignore_ascii_case("host") {
                continue;
            }
            let value = reqwest::header::HeaderValue::from_bytes(&h.value).map_err(|_| {
                HttpError::Unsendable(format!(
                    "header {} holds bytes HTTP clients refuse; this probe must use the raw client",
                    h.name
                ))
            })?;
            builder = builder.header(h.name.as_str(), value);
        }
        let mut resp = builder
            .body(sent.body.clone())
            .send()
            .await
            .map_err(|e| Failed {
                error: self.classify(&e, Phase::FirstByte),
                on_served: self.served.went_out_on_served(&e),
            })?;
        self.served.carried(&resp);
        let status = resp.status().as_u16();
        let version = resp.version();
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
            .map_err(|e| self.classify(&e, Phase::Body))?
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

/// The `user-agent` every request of the ordinary client carries unless the target's headers
/// set one.
const USER_AGENT: &str = concat!("idem-check/", env!("CARGO_PKG_VERSION"));

/// `prepared` as the ordinary client puts it on the wire, so the record is what the server
/// received: hyper writes field names lower-cased, and after the request's own fields the
/// `accept: */*` and `user-agent` reqwest adds when they are missing (here made explicit, so
/// reqwest adds nothing), then `host` last (HTTP/1.1; [`Client::send`] moves it first for
/// HTTP/2). Several lines of one name go out together, where the first of them was.
fn as_sent(prepared: SentRequest) -> SentRequest {
    let mut headers: Vec<Header> = Vec::with_capacity(prepared.headers.len() + 2);
    let mut host = None;
    for h in prepared.headers {
        let name = h.name.to_ascii_lowercase();
        if name == "host" {
            host = Some(Header::new(name, h.value));
            continue;
        }
        // A later line of a name already sent joins its group, as a header map iterates.
        match headers.iter().rposition(|x| x.name == name) {
            Some(at) => headers.insert(at + 1, Header::new(name, h.value)),
            None => headers.push(Header::new(name, h.value)),
        }
    }
    for (name, value) in [("accept", "*/*"), ("user-agent", USER_AGENT)] {
        if !headers.iter().any(|h| h.name == name) {
            headers.push(Header::new(name, value));
        }
    }
    headers.extend(host);
    SentRequest {
        headers,
        ..prepared
    }
}

/// Why an exchange of the ordinary client has no response, and whether the request went out
/// on a connection that had carried a response before (see [`super::kept`]): with
/// [`HttpError::ClosedBeforeAnyByte`], the server's idle close.
struct Failed {
    error: HttpError,
    on_served: bool,
}

impl From<HttpError> for Failed {
    fn from(error: HttpError) -> Self {
        Failed {
            error,
            on_served: false,
        }
    }
}

/// A pool that never follows redirects (a 3xx is an answer to judge, not to chase), gives up
/// on any request after `timeout`, connects as [`builder`] says, and tells `served` about every
/// connection it opens.
fn pool(connector: &Arc<Connector>, timeout: Duration, served: &Served) -> Result<reqwest::Client> {
    builder(connector)
        .connector_layer(ForgetNew(served.clone()))
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(timeout)
        .timeout(timeout)
        .user_agent(USER_AGENT)
        .build()
        .context("could not build the HTTP client")
}

impl Client {
    /// What reqwest's `e` was, from the causes it wraps, in `phase` (waiting for the answer, or
    /// reading its body), with the innermost cause as the detail ("could not connect:
    /// Connection refused", "TLS handshake failed: invalid peer certificate: UnknownIssuer").
    /// The URL is not repeated: the evidence shows it next to the error.
    fn classify(&self, e: &reqwest::Error, phase: Phase) -> HttpError {
        let proxy = e.url().and_then(|u| self.connector.proxy_for(u));
        if e.is_timeout() {
            let phase = match (e.is_connect(), e.url()) {
                (true, Some(url)) => Phase::Connect {
                    authority: format!(
                        "{}:{}",
                        url.host_str().unwrap_or_default(),
                        url.port_or_known_default().unwrap_or_default()
                    ),
                    proxy: proxy.as_ref().map(super::net::shown),
                },
                _ => phase,
            };
            return HttpError::Timeout {
                phase,
                after: self.timeout,
            };
        }
        let mut root = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            root = s.to_string();
            source = s.source();
        }
        if failed_in_tls(e) {
            HttpError::Tls(format!("{root} (does the server speak TLS on this port, with a certificate this machine trusts?)"))
        } else if e.is_connect() && proxy.is_some() {
            HttpError::Proxy(format!("could not connect: {root}"))
        } else if e.is_connect() {
            HttpError::Connect(format!("could not connect: {root}"))
        } else if phase == Phase::Body {
            HttpError::ClosedMidResponse(format!("reading the body: {root}"))
        } else if kept::ended_before_any_byte(e) {
            HttpError::ClosedBeforeAnyByte(root)
        } else if kept::broke_http2(e) {
            HttpError::Http2(root)
        } else if kept::unparsable(e) {
            HttpError::MalformedHttp1(root)
        } else {
            HttpError::ClosedMidResponse(root)
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::scripted::{server, Act};
    use std::sync::atomic::Ordering;

    fn client() -> Client {
        Client::new(Arc::default(), Duration::from_secs(5), 1024).unwrap()
    }

    fn get(url: &url::Url) -> Request {
        Request::get(url, &[])
    }

    #[tokio::test]
    async fn a_request_the_idle_close_took_is_sent_again_once_on_a_new_connection() {
        // The first connection answers once, then closes under the next request.
        let (url, accepted) = server(|c, r| match (c, r) {
            (0, 0) => Act::Answer,
            (0, _) => Act::Close,
            _ => Act::Answer,
        });
        let client = client();
        let (_, first) = client.send(&get(&url)).await;
        assert_eq!(first.result.unwrap().status, 200);
        assert!(first.resent.is_none());
        let (_, second) = client.send(&get(&url)).await;
        assert_eq!(second.result.unwrap().status, 200, "the resend is answered");
        let why = second
            .resent
            .expect("the record says it was sent again")
            .why;
        assert!(
            why.starts_with("sent again on a new connection: the kept-alive connection was closed by the server while idle (no byte received"),
            "{why}"
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_request_closed_on_a_new_connection_is_not_sent_again() {
        let (url, accepted) = server(|_, _| Act::Close);
        let (_, r) = client().send(&get(&url)).await;
        assert_eq!(
            r.result.unwrap_err(),
            HttpError::ClosedBeforeAnyByte("connection closed before message completed".into())
        );
        assert!(r.resent.is_none());
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "no second connection");
    }

    #[tokio::test]
    async fn a_request_that_received_part_of_an_answer_is_not_sent_again() {
        // On a kept connection, the second answer stops in its body.
        let (url, accepted) = server(|_, r| match r {
            0 => Act::Answer,
            _ => Act::Partial,
        });
        let client = client();
        let (_, first) = client.send(&get(&url)).await;
        assert_eq!(first.result.unwrap().status, 200);
        let (_, second) = client.send(&get(&url)).await;
        let err = second.result.unwrap_err();
        assert!(
            matches!(&err, HttpError::ClosedMidResponse(why) if why.starts_with("reading the body")),
            "{err:?}"
        );
        assert!(second.resent.is_none());
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "no second connection");
    }
}
