//! Kept-alive HTTP/1.1 connections, reused from one request to the next.
//!
//! A stress run sends hundreds of thousands of requests to one origin (or a few, with replicas).
//! Opening a connection for each costs both sides a handshake, a socket and, on the server, a
//! connection task; on a small machine that, not the API, bounded the run (BENCHMARKS.md). The
//! pool keeps every connection whose answer ended cleanly (see [`super::h1::read_keeping`]) and hands
//! it to the next burst or late retry to the same origin. A connection found closed, or holding
//! bytes nobody asked for, when it is taken is dropped and the next one taken or a new one
//! opened, so a connection the server has given up on never carries a request. A close that
//! crosses the request on the wire (the server's idle timeout ran out as it was written) is
//! seen only after: a request whose kept connection ended before any byte of an answer is sent
//! again, once, on a new connection ([`Pool::send`], [`Pool::burst`]), as curl and browsers do.
//! One that failed on a new connection, timed out, or got any byte of an answer never is.
//!
//! HTTP/2 bursts ([`Pool::burst_for_target`]) are kept the same way: each burst takes one
//! idle HTTP/2 connection to its origin (or opens one) and gives it back when every stream was
//! answered and the server did not say GOAWAY. A burst on a kept connection that released
//! nothing (the server had closed it, or said GOAWAY, while it was idle) runs again on a new
//! connection: no request of it was complete, so none can have been processed. A request
//! whose stream ended without a frame of an answer because the kept connection ended under it,
//! or a GOAWAY said it was not processed, is sent again, once, alone, on a new connection.
//!
//! The pool holds at most `max_idle` idle connections per origin and protocol; how many are
//! open at once is bounded by the caller, which takes one per request in flight.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::future::join_all;
use socket2::SockRef;

use super::burst::{self, BurstOptions, BurstReport, Left, Open, Wires};
use super::connection::{Connector, Stream};
use super::exchange::SentRequest;
use super::h1;
use super::h2burst;
use super::raw::{self, RawResponse};
use super::HttpError;

mod h2;

/// Idle kept-alive connections by origin, how many were opened, and the quickest connect.
pub struct Pool {
    /// How new connections are opened.
    connector: Arc<Connector>,
    idle: Mutex<HashMap<url::Origin, Vec<Idle>>>,
    /// Idle HTTP/2 connections, each ready for its next burst.
    idle_h2: Mutex<HashMap<url::Origin, Vec<h2burst::Conn>>>,
    max_idle: usize,
    opened: AtomicU64,
    /// The shortest time any connection took to open, in µs: the round-trip estimate a burst's
    /// settle pause is based on for reused connections. One connection's own connect time would
    /// do for ever what one busy moment made it: 64 connections opened at once on a loaded
    /// machine can take tens of milliseconds each, and every burst on them would then pause
    /// twice that (up to 100 ms) instead of 1 ms. The minimum leaves out queueing, as TCP's own
    /// minimum-RTT estimate does.
    quickest_connect_us: AtomicU64,
}

/// A connection waiting for its next request.
struct Idle {
    stream: Stream,
}

impl Pool {
    /// An empty pool opening connections with `connector` and keeping at most `max_idle` idle
    /// connections per origin.
    pub fn new(connector: Arc<Connector>, max_idle: usize) -> Pool {
        Pool {
            connector,
            idle: Mutex::new(HashMap::new()),
            idle_h2: Mutex::new(HashMap::new()),
            max_idle: max_idle.max(1),
            opened: AtomicU64::new(0),
            quickest_connect_us: AtomicU64::new(u64::MAX),
        }
    }

    /// Opens one connection to `url`'s origin, alone, and keeps it, when bursts to it go over
    /// HTTP/1.1. Its connect time is then a round trip, where the connects of the first bursts,
    /// opened dozens at once, each also wait for the one thread that opens them: on a local
    /// target all of them took 0.5–1 ms, the quickest estimate stayed there, and every later
    /// burst paused a timer tick instead of one turn of the runtime (`stress --concurrency 96`
    /// fell from 44k to 28k requests/s, BENCHMARKS.md). The error says why the origin could
    /// not be reached; bursts over HTTP/2 open their own connections and are not warmed.
    pub async fn warm(
        &self,
        url: &url::Url,
        timeout: Duration,
        http2: bool,
    ) -> Result<(), HttpError> {
        if !h2burst::bursts_over_http1(&self.connector, url, http2) {
            return Ok(());
        }
        let conn = self.open(url, Instant::now() + timeout, timeout).await?;
        self.put(url, conn.stream);
        Ok(())
    }

    /// How many connections the pool has opened so far.
    pub fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// Sends `req` on a kept-alive connection to its origin (a new one when none is idle) and
    /// keeps the connection if it can carry another request. `timeout` bounds the whole
    /// exchange, connecting included, as in [`raw::send_one`]. A request whose kept connection
    /// ended before any byte of an answer (the server closed it while idle, as the request
    /// went out) is sent again, once, on a new connection, with a timeout of its own; the
    /// response says so.
    pub async fn send(&self, req: &SentRequest, timeout: Duration, max_body: usize) -> RawResponse {
        let attempt = Instant::now();
        let deadline = attempt + timeout;
        let taken = match h1::parse_url(req) {
            Ok(url) => self.take(&url, deadline, timeout).await.map(|c| (url, c)),
            Err(e) => Err(e),
        };
        let (url, conn) = match taken {
            Ok(taken) => taken,
            Err(e) => return RawResponse::ended_now(attempt, Err(e)),
        };
        let reused = conn.reused;
        let first = self
            .exchange(&url, conn, req, deadline, timeout, max_body)
            .await;
        let error = match &first.response.result {
            Err(error) if reused && error.closed_before_any_byte() => error.clone(),
            _ => return first.response,
        };
        let deadline = Instant::now() + timeout;
        let again = match self.open(&url, deadline, timeout).await {
            Ok(conn) => {
                self.exchange(&url, conn, req, deadline, timeout, max_body)
                    .await
                    .response
            }
            Err(e) => RawResponse::ended_now(Instant::now(), Err(e)),
        };
        again.sent_again(first.response.started, &error)
    }

    /// One exchange on `conn`, kept afterwards if it can carry another request.
    async fn exchange(
        &self,
        url: &url::Url,
        mut conn: Open,
        req: &SentRequest,
        deadline: Instant,
        timeout: Duration,
        max_body: usize,
    ) -> raw::OnConnection {
        let on = raw::exchange_on(&mut conn.stream, req, url, deadline, timeout, max_body).await;
        if on.reusable {
            self.put(url, conn.stream);
        }
        on
    }

    /// A synchronised burst ([`burst::burst`]) staged on kept-alive connections, one per
    /// request. As each request's answer is read, its connection goes back to the pool if it can
    /// carry another request and `answered` is called, so the caller can lend that request's
    /// share of the concurrency before the burst's slowest answer is in. A request whose kept
    /// connection ended before any byte of an answer (the server closed it while idle) is sent
    /// again, once, alone, on a new connection, and its response says so; `answered` is not
    /// called for it.
    pub async fn burst(
        &self,
        reqs: &[SentRequest],
        opts: &BurstOptions,
        answered: &(dyn Fn() + Sync),
    ) -> anyhow::Result<BurstReport> {
        let wires = Wires::new(reqs, opts)?;
        let begin = Instant::now();
        let deadline = begin + opts.timeout;
        let taken = join_all(
            wires
                .urls
                .iter()
                .map(|url| self.take(url, deadline, opts.timeout)),
        )
        .await;
        let reused: Vec<bool> = taken
            .iter()
            .map(|t| t.as_ref().is_ok_and(|o| o.reused))
            .collect();
        let again = Mutex::new(Vec::new());
        let read = |i: usize, left: Left| {
            match left {
                Left::Kept(stream) => self.put(&wires.urls[i], stream),
                Left::EndedUnanswered if reused[i] => {
                    again.lock().unwrap_or_else(PoisonError::into_inner).push(i);
                    return;
                }
                Left::EndedUnanswered | Left::Done => {}
            }
            answered();
        };
        let mut report =
            burst::burst_on(&self.connector, reqs, &wires, taken, begin, opts, &read).await;
        let mut again = again.into_inner().unwrap_or_else(PoisonError::into_inner);
        again.sort_unstable();
        let urls = &wires.urls;
        let resends = join_all(again.iter().map(|&i| async move {
            let deadline = Instant::now() + opts.timeout;
            let url = &urls[i];
            match self.open(url, deadline, opts.timeout).await {
                Ok(conn) => {
                    self.exchange(url, conn, &reqs[i], deadline, opts.timeout, opts.max_body)
                        .await
                        .response
                }
                Err(e) => RawResponse::ended_now(Instant::now(), Err(e)),
            }
        }))
        .await;
        for (i, response) in again.into_iter().zip(resends) {
            let first = &report.responses[i];
            if let Err(error) = &first.result {
                let resent = response.sent_again(first.started, error);
                report.responses[i] = resent;
            }
        }
        Ok(report)
    }

    /// An idle connection to `url`'s origin that is still open, or a new one.
    async fn take(
        &self,
        url: &url::Url,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Open, HttpError> {
        let origin = url.origin();
        // Bounded by the idle connections there were: nothing is put back in this loop.
        while let Some(idle) = self.lock().get_mut(&origin).and_then(Vec::pop) {
            if still_open(&idle.stream) {
                let quickest = self.quickest_connect_us.load(Ordering::Relaxed);
                return Ok(Open {
                    stream: idle.stream,
                    connect_time: Duration::from_micros(quickest),
                    reused: true,
                });
            }
        }
        self.open(url, deadline, timeout).await
    }

    /// A new connection to `url`'s origin.
    async fn open(
        &self,
        url: &url::Url,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Open, HttpError> {
        let t0 = Instant::now();
        let stream = self.connector.connect(url, deadline, timeout).await?;
        let connect_time = t0.elapsed();
        self.opened.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(connect_time.as_micros()).unwrap_or(u64::MAX);
        self.quickest_connect_us
            .fetch_min(micros, Ordering::Relaxed);
        Ok(Open {
            stream,
            connect_time,
            reused: false,
        })
    }

    fn put(&self, url: &url::Url, stream: Stream) {
        let mut idle = self.lock();
        let list = idle.entry(url.origin()).or_default();
        if list.len() < self.max_idle {
            list.push(Idle { stream });
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<url::Origin, Vec<Idle>>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What an idle connection holds, seen without reading it.
#[derive(PartialEq)]
enum Waiting {
    /// Nothing: a read would block.
    Nothing,
    /// Bytes nobody asked for.
    Bytes,
    /// End of stream, or an error such as a reset.
    End,
}

fn waiting(stream: &Stream) -> Waiting {
    let mut byte = [MaybeUninit::<u8>::uninit(); 1];
    match SockRef::from(stream.tcp()).peek(&mut byte) {
        Ok(0) => Waiting::End,
        Ok(_) => Waiting::Bytes,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Waiting::Nothing,
        Err(_) => Waiting::End,
    }
}

/// Whether an idle HTTP/1.1 connection can carry a request: nothing to read. End of stream, a
/// reset, or unsolicited bytes (a late error page, a TLS close_notify) mean the server is done
/// with it.
fn still_open(stream: &Stream) -> bool {
    waiting(stream) == Waiting::Nothing
}

/// Whether the server ended an idle HTTP/2 connection. Bytes waiting there are frames (a PING,
/// SETTINGS, a GOAWAY), read when the next burst runs.
fn closed(stream: &Stream) -> bool {
    waiting(stream) == Waiting::End
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::scripted::{self, Act};
    use std::io::{Read as _, Write as _};

    /// How the test server ends a connection.
    #[derive(Clone, Copy)]
    enum Ending {
        /// Never: every request on a connection is answered.
        KeepAlive,
        /// After the first answer, which says `Connection: close`.
        Announced,
        /// After the first answer, without a word (as an idle timeout does).
        Silent,
    }

    /// A listener that answers every request with a framed 200, counting the connections it
    /// accepted; each connection it ends is reported on the channel once closed.
    fn server(
        ending: Ending,
    ) -> (
        url::Url,
        std::sync::Arc<AtomicU64>,
        std::sync::mpsc::Receiver<()>,
    ) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = url::Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
        let accepted = std::sync::Arc::new(AtomicU64::new(0));
        let count = accepted.clone();
        let (closed_tx, closed) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for conn in listener.incoming().take(16) {
                let Ok(mut conn) = conn else { return };
                count.fetch_add(1, Ordering::Relaxed);
                let closed_tx = closed_tx.clone();
                std::thread::spawn(move || {
                    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while let Ok(n @ 1..) = conn.read(&mut chunk) {
                        buf.extend_from_slice(&chunk[..n]);
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            buf.drain(..end + 4);
                            let extra = match ending {
                                Ending::Announced => "Connection: close\r\n",
                                _ => "",
                            };
                            let answer =
                                format!("HTTP/1.1 200 OK\r\n{extra}Content-Length: 2\r\n\r\nok");
                            conn.write_all(answer.as_bytes()).unwrap();
                            if !matches!(ending, Ending::KeepAlive) {
                                drop(conn);
                                let _ = closed_tx.send(());
                                return;
                            }
                        }
                    }
                });
            }
        });
        (url, accepted, closed)
    }

    fn get(url: &url::Url) -> SentRequest {
        h1::prepare(url, "GET", vec![], vec![])
    }

    #[tokio::test]
    async fn one_connection_carries_request_after_request() {
        let (url, accepted, _) = server(Ending::KeepAlive);
        let pool = Pool::new(Arc::default(), 4);
        for _ in 0..5 {
            let r = pool.send(&get(&url), Duration::from_secs(5), 1024).await;
            assert_eq!(r.result.unwrap().status, 200);
        }
        assert_eq!(pool.opened(), 1);
        assert_eq!(accepted.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn a_warmed_connection_carries_the_first_request() {
        let (url, accepted, _) = server(Ending::KeepAlive);
        let pool = Pool::new(Arc::default(), 4);
        pool.warm(&url, Duration::from_secs(5), false)
            .await
            .unwrap();
        assert_eq!(pool.opened(), 1);
        assert!(pool.quickest_connect_us.load(Ordering::Relaxed) < u64::MAX);
        let r = pool.send(&get(&url), Duration::from_secs(5), 1024).await;
        assert_eq!(r.result.unwrap().status, 200);
        assert_eq!(accepted.load(Ordering::Relaxed), 1, "no second connection");
    }

    #[tokio::test]
    async fn a_connection_the_server_closes_is_not_reused() {
        let (url, _, _) = server(Ending::Announced);
        let pool = Pool::new(Arc::default(), 4);
        for _ in 0..3 {
            let r = pool.send(&get(&url), Duration::from_secs(5), 1024).await;
            assert_eq!(r.result.unwrap().status, 200);
        }
        assert_eq!(pool.opened(), 3, "Connection: close is honoured");
    }

    #[tokio::test]
    async fn a_connection_closed_while_idle_is_dropped_when_taken() {
        let (url, _, closed) = server(Ending::Silent);
        let pool = Pool::new(Arc::default(), 4);
        let first = pool.send(&get(&url), Duration::from_secs(5), 1024).await;
        assert_eq!(first.result.unwrap().status, 200);
        closed.recv_timeout(Duration::from_secs(5)).unwrap();
        // The end of stream reaches the idle socket soon after the server closed it.
        let end = Instant::now() + Duration::from_secs(5);
        while pool
            .lock()
            .values()
            .flatten()
            .any(|i| still_open(&i.stream))
        {
            assert!(
                Instant::now() < end,
                "the close never reached the idle connection"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let second = pool.send(&get(&url), Duration::from_secs(5), 1024).await;
        assert_eq!(second.result.unwrap().status, 200);
        assert_eq!(pool.opened(), 2);
    }

    #[tokio::test]
    async fn a_burst_reuses_the_connections_of_the_previous_one() {
        let (url, accepted, _) = server(Ending::KeepAlive);
        let pool = Pool::new(Arc::default(), 4);
        let reqs = vec![get(&url), get(&url), get(&url)];
        for _ in 0..3 {
            let report = pool
                .burst(&reqs, &BurstOptions::default(), &|| {})
                .await
                .unwrap();
            for r in &report.responses {
                assert_eq!(r.result.as_ref().unwrap().status, 200);
                assert!(r.released.is_some());
            }
        }
        assert_eq!(pool.opened(), 3);
        assert_eq!(accepted.load(Ordering::Relaxed), 3);
    }

    /// A listener that answers a request for `/slow` only once `go` says so, and every other
    /// at once, on connections it keeps open.
    fn holding_server(go: std::sync::mpsc::Receiver<()>) -> url::Url {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = url::Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
        let go = Arc::new(Mutex::new(go));
        std::thread::spawn(move || {
            for conn in listener.incoming().take(8) {
                let Ok(mut conn) = conn else { return };
                let go = go.clone();
                std::thread::spawn(move || {
                    conn.set_read_timeout(Some(Duration::from_secs(10)))
                        .unwrap();
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while let Ok(n @ 1..) = conn.read(&mut chunk) {
                        buf.extend_from_slice(&chunk[..n]);
                        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            if buf.starts_with(b"GET /slow ") {
                                let go = go.lock().unwrap();
                                go.recv_timeout(Duration::from_secs(10)).unwrap();
                            }
                            buf.clear();
                            conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                                .unwrap();
                        }
                    }
                });
            }
        });
        url
    }

    #[tokio::test]
    async fn a_burst_connection_is_lent_again_as_soon_as_its_own_answer_is_in() {
        let (go_tx, go) = std::sync::mpsc::channel();
        let url = holding_server(go);
        let pool = Pool::new(Arc::default(), 4);
        let reqs = [get(&url.join("slow").unwrap()), get(&url), get(&url)];
        let (answered_tx, mut answered_rx) = tokio::sync::mpsc::unbounded_channel();
        let answered = move || answered_tx.send(()).unwrap();
        let opts = BurstOptions::default();
        let burst = pool.burst(&reqs, &opts, &answered);
        // While the slow answer is held, the two quick ones have been answered and their
        // connections are idle in the pool, ready for another burst.
        let while_held = async {
            answered_rx.recv().await.unwrap();
            answered_rx.recv().await.unwrap();
            let idle: usize = pool.lock().values().map(Vec::len).sum();
            go_tx.send(()).unwrap();
            idle
        };
        let (report, idle_while_held) = tokio::join!(burst, while_held);
        assert_eq!(idle_while_held, 2);
        for r in &report.unwrap().responses {
            assert_eq!(r.result.as_ref().unwrap().status, 200);
        }
        assert!(
            answered_rx.try_recv().is_ok(),
            "the slow answer is counted too"
        );
        assert_eq!(pool.lock().values().map(Vec::len).sum::<usize>(), 3);
    }

    #[tokio::test]
    async fn a_request_the_idle_close_took_is_sent_again_once_on_a_new_connection() {
        // The first connection answers once, then closes under the next request.
        let (url, accepted) = scripted::server(|c, r| match (c, r) {
            (0, 0) => Act::Answer,
            (0, _) => Act::Close,
            _ => Act::Answer,
        });
        let pool = Pool::new(Arc::default(), 4);
        let first = pool.send(&get(&url), Duration::from_secs(5), 1024).await;
        assert_eq!(first.result.unwrap().status, 200);
        let second = pool.send(&get(&url), Duration::from_secs(5), 1024).await;
        assert_eq!(second.result.unwrap().status, 200, "the resend is answered");
        let why = second
            .resent
            .expect("the response says it was sent again")
            .why;
        assert_eq!(
            why,
            "sent again on a new connection: the kept-alive connection was closed by the server while idle (no byte received: connection closed before any response)"
        );
        assert_eq!(pool.opened(), 2);
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_burst_request_the_idle_close_took_is_sent_again_alone() {
        // The first connection answers once, then closes under the next request.
        let (url, accepted) = scripted::server(|c, r| match (c, r) {
            (0, 1..) => Act::Close,
            _ => Act::Answer,
        });
        let pool = Pool::new(Arc::default(), 4);
        let reqs = vec![get(&url), get(&url)];
        let first = pool
            .burst(&reqs, &BurstOptions::default(), &|| {})
            .await
            .unwrap();
        assert!(first.responses.iter().all(|r| r.result.is_ok()));
        let second = pool
            .burst(&reqs, &BurstOptions::default(), &|| {})
            .await
            .unwrap();
        for r in &second.responses {
            assert_eq!(r.result.as_ref().unwrap().status, 200);
        }
        let resent: Vec<&String> = second
            .responses
            .iter()
            .filter_map(|r| r.resent.as_ref().map(|r| &r.why))
            .collect();
        assert_eq!(
            resent.len(),
            1,
            "only the request the close took: {resent:?}"
        );
        assert_eq!(pool.opened(), 3);
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_request_closed_on_a_new_connection_is_not_sent_again() {
        let (url, accepted) = scripted::server(|_, _| Act::Close);
        let pool = Pool::new(Arc::default(), 4);
        let r = pool.send(&get(&url), Duration::from_secs(5), 1024).await;
        assert_eq!(
            r.result.unwrap_err(),
            HttpError::ClosedBeforeAnyByte("connection closed before any response".into())
        );
        assert!(r.resent.is_none());
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "no second connection");
    }

    #[tokio::test]
    async fn a_request_that_received_part_of_an_answer_is_not_sent_again() {
        // On a kept connection, the second answer stops in its body.
        let (url, accepted) = scripted::server(|_, r| match r {
            0 => Act::Answer,
            _ => Act::Partial,
        });
        let pool = Pool::new(Arc::default(), 4);
        let first = pool.send(&get(&url), Duration::from_secs(5), 1024).await;
        assert_eq!(first.result.unwrap().status, 200);
        let second = pool.send(&get(&url), Duration::from_secs(5), 1024).await;
        assert_eq!(
            second.result.unwrap_err(),
            HttpError::ClosedMidResponse("connection closed after 2 of 10 body bytes".into())
        );
        assert!(second.resent.is_none());
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "no second connection");
    }

    #[tokio::test]
    async fn a_refused_connection_is_an_error_in_the_response() {
        let url = url::Url::parse("http://127.0.0.1:9/").unwrap();
        let r = Pool::new(Arc::default(), 1)
            .send(&get(&url), Duration::from_secs(5), 1024)
            .await;
        assert_eq!(
            r.result.unwrap_err(),
            HttpError::Connect("connection refused to 127.0.0.1:9".into())
        );
    }
}
