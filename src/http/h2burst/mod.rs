//! The HTTP/2 single-packet burst: N duplicates on one connection whose final DATA frames leave
//! in one `send(2)`, so they reach the server in one TCP segment.
//!
//! The HTTP/1.1 engine ([`super::burst`]) releases N connections with N `send(2)` calls; on a
//! local target each one runs the receiver's TCP path inline (a few µs each), so the last
//! duplicate lands tens of µs after the first. With HTTP/2 every request is a stream of one
//! connection, and the release is one write: the server's kernel receives all final frames at
//! the same instant and its HTTP/2 layer hands them to the handlers in one read.
//!
//! 1. open one connection: TCP, then for `https` TLS offering ALPN `h2` (`http/1.1` second, so
//!    [`burst_for_target`] can fall back), or for `http` h2c with prior knowledge;
//! 2. send the preface and our SETTINGS (no push, large receive windows), answer the server's
//!    SETTINGS and wait for the ACK of ours;
//! 3. stage each request as a stream: HEADERS (HPACK literals, never indexed) and DATA with all
//!    but the final byte(s) of the body, within the peer's flow-control windows and frame size;
//!    then a PING whose ACK proves the server has read everything staged, and the settle pause;
//! 4. release: the N final DATA frames (END_STREAM), concatenated — over TLS sealed into one
//!    record beforehand — written with one non-blocking `send(2)`;
//! 5. read frames until every stream has its response or the per-request timeout (counted from
//!    the release) ran out, answering PING and SETTINGS and returning flow-control credit.
//!
//! Each response is mapped to the same [`RawResponse`] as the HTTP/1.1 engine's, with the single
//! release instant as every request's `released` and `HTTP/2` as the response version.
//!
//! [`frame`] writes and checks frames, [`hpack`] encodes the requests' headers, [`connection`]
//! runs steps 2–5 on one connection, and [`fallback`] picks this engine or the HTTP/1.1 one.

mod connection;
mod fallback;
mod frame;
mod hpack;

use std::time::Instant;

use super::burst::{self, BurstOptions, BurstReport};
use super::connection::{origin, Connector, Stream};
use super::exchange::SentRequest;
use super::h1;
use super::raw::RawResponse;
use super::release::ReleaseMode;
use super::HttpError;
pub(crate) use connection::Conn;
use hpack::encode_request;

pub use fallback::burst_for_target;
pub(crate) use fallback::bursts_over_http1;

/// Sends `reqs` (all to one origin) as an HTTP/2 single-packet burst and returns their responses
/// in input order: h2c with prior knowledge for `http`, ALPN `h2` for `https` (a server that
/// picks `http/1.1` is an error for every request). A failure of the connection or of the
/// HTTP/2 handshake is reported in every request's [`RawResponse`]; only unusable requests
/// (bad URL, several origins, zero `final_bytes`) are an `Err`.
pub async fn burst(
    connector: &Connector,
    reqs: &[SentRequest],
    opts: &BurstOptions,
) -> anyhow::Result<BurstReport> {
    let Some(url) = first_url(reqs)? else {
        return burst::burst(connector, reqs, opts).await;
    };
    let begin = Instant::now();
    match connector
        .connect_h2(&url, begin + opts.timeout, opts.timeout)
        .await
    {
        Ok((stream, true)) => run_on(connector, reqs, &url, opts, stream, begin).await,
        Ok((_, false)) => Ok(failed(
            reqs,
            begin,
            &HttpError::Http2(format!(
                "the server at {} picked HTTP/1.1 in ALPN: it does not offer HTTP/2",
                origin(&url)
            )),
        )),
        Err(e) => Ok(failed(reqs, begin, &e)),
    }
}

/// Where the burst goes: the first request's URL; `None` for an empty burst.
fn first_url(reqs: &[SentRequest]) -> anyhow::Result<Option<url::Url>> {
    reqs.first()
        .map(h1::parse_url)
        .transpose()
        .map_err(anyhow::Error::from)
}

/// Every request failed with `error` before anything was released.
pub(crate) fn failed(reqs: &[SentRequest], at: Instant, error: &HttpError) -> BurstReport {
    BurstReport {
        requests: reqs.iter().map(as_sent).collect(),
        responses: reqs
            .iter()
            .map(|_| RawResponse::ended_now(at, Err(error.clone())))
            .collect(),
        spread_us: 0.0,
        release: ReleaseMode::OnePacket,
    }
}

/// Runs the burst on `stream`, a new HTTP/2 connection to `url`'s origin opened at `begin`.
async fn run_on(
    connector: &Connector,
    reqs: &[SentRequest],
    url: &url::Url,
    opts: &BurstOptions,
    stream: Stream,
    begin: Instant,
) -> anyhow::Result<BurstReport> {
    let mut conn = Conn::new(stream);
    Ok(run_on_conn(connector, reqs, url, opts, &mut conn, begin)
        .await?
        .report)
}

/// What a burst on an HTTP/2 connection left.
pub(crate) struct OnConn {
    pub(crate) report: BurstReport,
    /// Whether the connection can carry another burst.
    pub(crate) reusable: bool,
    /// The requests, by index, whose streams ended without a frame of an answer
    /// ([`HttpError::ClosedBeforeAnyByte`]): the connection ended (end of stream, a reset), or
    /// a GOAWAY said they were not processed.
    pub(crate) unanswered: Vec<usize>,
}

/// Runs the burst on `conn`, an HTTP/2 connection to `url`'s origin: a new one (opened at
/// `begin`), or one kept from an earlier burst (see [`crate::http::pool::Pool`]). Returns the
/// report, whether the connection can carry another burst, and which streams got no answer.
pub(crate) async fn run_on_conn(
    connector: &Connector,
    reqs: &[SentRequest],
    url: &url::Url,
    opts: &BurstOptions,
    conn: &mut Conn,
    begin: Instant,
) -> anyhow::Result<OnConn> {
    opts.check()?;
    let mut encoded = Vec::with_capacity(reqs.len());
    for req in reqs {
        let this = h1::parse_url(req)?;
        if origin(&this) != origin(url) {
            anyhow::bail!(
                "an HTTP/2 burst goes to one origin; {} and {} differ",
                origin(url),
                origin(&this)
            );
        }
        encoded.push(encode_request(req, &this)?);
    }
    if let Err(e) = conn.begin_burst(reqs.len(), opts.max_body) {
        return Ok(OnConn {
            report: failed(reqs, begin, &e),
            reusable: false,
            unanswered: Vec::new(),
        });
    }
    let released = conn.run(&encoded, opts, begin).await;
    let reusable = released.is_ok() && conn.reusable();
    let responses: Vec<RawResponse> = conn
        .streams
        .iter_mut()
        .map(|s| RawResponse {
            started: s.started.unwrap_or(begin),
            released: s.released,
            finished: s.finished.unwrap_or_else(Instant::now),
            result: match (s.result.take(), released.as_ref()) {
                (Some(r), _) => r,
                (None, Err(e)) => Err(e.clone()),
                (None, Ok(())) => Err(HttpError::Http2("no response (internal state)".into())),
            },
            resent: None,
        })
        .collect();
    let unanswered = (0..responses.len())
        .filter(|&i| {
            responses[i]
                .result
                .as_ref()
                .is_err_and(HttpError::closed_before_any_byte)
        })
        .collect();
    let report = BurstReport {
        requests: encoded.into_iter().map(|e| e.sent).collect(),
        responses,
        // One write released every stream.
        spread_us: 0.0,
        release: ReleaseMode::OnePacket.through(connector.proxy_shown(url)),
    };
    Ok(OnConn {
        report,
        reusable,
        unanswered,
    })
}

/// The request as it goes out over HTTP/2 (see [`encode_request`]), or as given when it cannot
/// be encoded.
fn as_sent(req: &SentRequest) -> SentRequest {
    match url::Url::parse(&req.url) {
        Ok(url) => encode_request(req, &url).map_or_else(|_| req.clone(), |e| e.sent),
        Err(_) => req.clone(),
    }
}
