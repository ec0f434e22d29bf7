//! HTTP/2 bursts on kept-alive connections: each burst takes one idle HTTP/2 connection to its
//! origin (or opens one) and gives it back when every stream was answered and the server did
//! not say GOAWAY (see the [module documentation](super)).

use std::sync::atomic::Ordering;
use std::sync::PoisonError;
use std::time::Instant;

use futures::future::join_all;

use super::{closed, Pool};
use crate::http::burst::{BurstOptions, BurstReport};
use crate::http::exchange::SentRequest;
use crate::http::{h1, h2burst};

impl Pool {
    /// A synchronised burst with the tightest technique the target allows (see
    /// [`h2burst::burst_for_target`]), on kept-alive connections: HTTP/1.1 ones
    /// ([`Pool::burst`]), or one HTTP/2 connection, kept for the next burst to the origin.
    /// `answered` is called as each HTTP/1.1 answer is read (see [`Pool::burst`]); an HTTP/2
    /// burst's streams share one connection, which is free only when all are answered.
    pub async fn burst_for_target(
        &self,
        reqs: &[SentRequest],
        opts: &BurstOptions,
        http2: bool,
        answered: &(dyn Fn() + Sync),
    ) -> anyhow::Result<BurstReport> {
        let Some(first) = reqs.first() else {
            return self.burst(reqs, opts, answered).await;
        };
        let url = h1::parse_url(first)?;
        if h2burst::bursts_over_http1(&self.connector, &url, http2) {
            return self.burst(reqs, opts, answered).await;
        }
        if let Some(mut conn) = self.take_h2(&url) {
            let begin = Instant::now();
            let on =
                h2burst::run_on_conn(&self.connector, reqs, &url, opts, &mut conn, begin).await?;
            if on.report.responses.iter().any(|r| r.released.is_some()) {
                if on.reusable {
                    self.put_h2(&url, conn);
                }
                return self.send_unanswered_again(&url, reqs, opts, on).await;
            }
        }
        self.burst_on_new_h2(&url, reqs, opts, answered).await
    }

    /// The report of a burst on a kept HTTP/2 connection, where each request whose stream
    /// ended without a frame of an answer (the server closed the connection while it was idle,
    /// or said by GOAWAY that it did not process it) was sent again, once, alone, on a new
    /// connection, its response saying so.
    async fn send_unanswered_again(
        &self,
        url: &url::Url,
        reqs: &[SentRequest],
        opts: &BurstOptions,
        on: h2burst::OnConn,
    ) -> anyhow::Result<BurstReport> {
        let mut report = on.report;
        let again = join_all(
            on.unanswered
                .iter()
                .map(|&i| self.burst_on_new_h2(url, &reqs[i..=i], opts, &|| {})),
        )
        .await;
        for (i, alone) in on.unanswered.into_iter().zip(again) {
            let alone = alone?;
            let (Some(sent), Some(response)) = (
                alone.requests.into_iter().next(),
                alone.responses.into_iter().next(),
            ) else {
                continue;
            };
            let first = &report.responses[i];
            if let Err(error) = &first.result {
                let resent = response.sent_again(first.started, error);
                report.responses[i] = resent;
                report.requests[i] = sent;
            }
        }
        Ok(report)
    }

    /// `reqs` as a burst on a new HTTP/2 connection to `url`'s origin, kept afterwards if it
    /// can carry another; over HTTP/1.1 when an `https` server picks it in ALPN (`answered` as
    /// in [`Pool::burst`]).
    async fn burst_on_new_h2(
        &self,
        url: &url::Url,
        reqs: &[SentRequest],
        opts: &BurstOptions,
        answered: &(dyn Fn() + Sync),
    ) -> anyhow::Result<BurstReport> {
        let url = url.clone();
        let begin = Instant::now();
        match self
            .connector
            .connect_h2(&url, begin + opts.timeout, opts.timeout)
            .await
        {
            Ok((stream, true)) => {
                self.opened.fetch_add(1, Ordering::Relaxed);
                let mut conn = h2burst::Conn::new(stream);
                let on = h2burst::run_on_conn(&self.connector, reqs, &url, opts, &mut conn, begin)
                    .await?;
                if on.reusable {
                    self.put_h2(&url, conn);
                }
                Ok(on.report)
            }
            // An https server that picked HTTP/1.1 in ALPN: remembered, and this burst and the
            // next ones to it go over HTTP/1.1.
            Ok((_, false)) => {
                self.connector.remember_http1(&url);
                self.burst(reqs, opts, answered).await
            }
            Err(e) => Ok(h2burst::failed(reqs, begin, &e)),
        }
    }

    /// An idle HTTP/2 connection to `url`'s origin that the server has not closed.
    fn take_h2(&self, url: &url::Url) -> Option<h2burst::Conn> {
        let origin = url.origin();
        let mut idle = self.idle_h2.lock().unwrap_or_else(PoisonError::into_inner);
        let list = idle.get_mut(&origin)?;
        // Bounded by the idle connections there were: nothing is put back in this loop.
        while let Some(conn) = list.pop() {
            if !closed(conn.socket()) {
                return Some(conn);
            }
        }
        None
    }

    fn put_h2(&self, url: &url::Url, conn: h2burst::Conn) {
        let mut idle = self.idle_h2.lock().unwrap_or_else(PoisonError::into_inner);
        let list = idle.entry(url.origin()).or_default();
        if list.len() < self.max_idle {
            list.push(conn);
        }
    }
}
