//! The choice between the two burst engines: the HTTP/2 single-packet release when the target
//! speaks HTTP/2, else the HTTP/1.1 last-byte release, and the run's memory of the `https`
//! origins that answered `h2` with `http/1.1`.

use std::time::Instant;

use super::{first_url, run_on};
use crate::http::burst::{self, BurstOptions, BurstReport};
use crate::http::connection::Connector;
use crate::http::exchange::SentRequest;

/// Runs `reqs` as one burst with the tightest technique the target allows: the single-packet
/// release when it speaks HTTP/2 (ALPN `h2` picked by an `https` server, or `http2` = the user
/// said an `http` target speaks h2c), else the HTTP/1.1 last-byte engine. An `https` origin that
/// picked `http/1.1` once is remembered by `connector` for the rest of the run, so later bursts
/// do not pay for a second handshake.
pub async fn burst_for_target(
    connector: &Connector,
    reqs: &[SentRequest],
    opts: &BurstOptions,
    http2: bool,
) -> anyhow::Result<BurstReport> {
    let Some(url) = first_url(reqs)? else {
        return burst::burst(connector, reqs, opts).await;
    };
    match url.scheme() {
        "https" if !connector.picked_http1(&url) => {
            let begin = Instant::now();
            match connector
                .connect_h2(&url, begin + opts.timeout, opts.timeout)
                .await
            {
                Ok((stream, true)) => run_on(connector, reqs, &url, opts, stream, begin).await,
                Ok((_, false)) => {
                    connector.remember_http1(&url);
                    burst::burst(connector, reqs, opts).await
                }
                // The HTTP/1.1 engine reports the same failure per request.
                Err(_) => burst::burst(connector, reqs, opts).await,
            }
        }
        "http" if http2 => super::burst(connector, reqs, opts).await,
        _ => burst::burst(connector, reqs, opts).await,
    }
}

/// Whether [`burst_for_target`] runs a burst to `url` over HTTP/1.1 connections: `http`
/// without `http2`, or an `https` origin whose server already picked `http/1.1` in ALPN. Such a
/// burst can be staged on kept-alive connections instead ([`crate::http::pool::Pool::burst`]).
pub(crate) fn bursts_over_http1(connector: &Connector, url: &url::Url, http2: bool) -> bool {
    match url.scheme() {
        "http" => !http2,
        "https" => connector.picked_http1(url),
        _ => false,
    }
}
