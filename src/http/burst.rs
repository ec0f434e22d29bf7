//! The synchronised duplicate burst: N requests that reach the server as close together as the
//! machine allows.
//!
//! A check-then-set race only shows when duplicates land inside the server's gap between
//! "look the key up" and "store the key", often well under a millisecond. Sending N requests from
//! N tasks spreads their arrival over the scheduler's wake-ups, connection setup and header
//! writing. The burst removes all of that from the critical moment:
//!
//! 1. open all N connections (TCP and TLS handshakes done, TCP_NODELAY), or take kept-alive
//!    ones from a [`super::pool::Pool`];
//! 2. write every request except its final byte(s), on a fresh connection in [`STAGE_SEGMENTS`]
//!    small segments so the receiver's quick-ACK allowance is spent before the release (a reused
//!    one has spent it, see [`burst_on`]), and flush, so the server has
//!    parsed all but the last byte; over TLS the final bytes are sealed into their own TLS record *now*, so the
//!    release is a plain socket write with no crypto in it;
//! 3. pause briefly (see [`settle_time`]) so the server's threads read the staged prefixes and go
//!    back to sleep instead of competing with the release for the CPU;
//! 4. release: synchronous loops of non-blocking `send(2)` calls — no await, no task wake-up
//!    between two releases, buffers touched beforehand so no page fault lands inside the loop —
//!    from two dedicated release threads when they can run, else from this thread (see
//!    [`super::release`]); readers are not polled until every final byte is out;
//! 5. read the N responses concurrently on this task, each bounded by the per-request timeout.

use std::time::{Duration, Instant};

use futures::future::join_all;
use socket2::SockRef;

use super::connection::{write_request, Connector, Stream};
use super::exchange::SentRequest;
use super::h1;
use super::raw::RawResponse;
use super::release::{release_all, socket_of, Job, ReleaseMode, Releasers};
use super::HttpError;

/// How a burst is run.
#[derive(Debug, Clone)]
pub struct BurstOptions {
    /// Bounds connection setup, and separately each response from its release on.
    pub timeout: Duration,
    /// Body bytes kept per response; the rest is cut and marked `body_truncated`.
    pub max_body: usize,
    /// How many bytes of each request are held back until the release (at least 1). One byte is
    /// enough for an HTTP/1.1 server not to start processing.
    pub final_bytes: usize,
    /// How many TCP segments the staged prefix is written in. Linux acknowledges the first ~16
    /// data segments of a connection at once ("quick ACK" mode); on a local target that ACK is
    /// built and processed inside our release `send(2)`, costing ~1.5–2 µs per connection.
    /// Staging in [`STAGE_SEGMENTS`] segments uses that allowance up, so the release segment is
    /// acknowledged later (delayed or with the response) and each release costs ~4 µs instead
    /// of ~6 µs (BENCHMARKS.md). 1 writes the prefix at once.
    pub stage_segments: usize,
    /// Who writes the final bytes: the two dedicated release threads when they can run (the
    /// default; see [`super::release`]), or the calling thread.
    pub release_threads: Releasers,
    /// The shortest pause between staging and release (see [`settle_time`]). The default,
    /// 1 ms, lets a local server's threads read every prefix and go idle, so the release does
    /// not compete with them for the CPU: the tightest burst a probe can send. `stress` sends
    /// thousands of bursts a second and sets it to zero: on a local target the pause is then one
    /// turn of the runtime instead of a timer tick, which let it send 1.44 × the requests at
    /// 0.8 × the CPU per request, with bursts no less synchronised (BENCHMARKS.md).
    pub settle_floor: Duration,
}

/// The default [`BurstOptions::stage_segments`]: more than Linux's 16 quick ACKs.
pub const STAGE_SEGMENTS: usize = 20;

impl BurstOptions {
    /// Refuses options no burst can run with: at least one byte must be held back, or nothing
    /// is left to release.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        if self.final_bytes == 0 {
            anyhow::bail!("final_bytes must be at least 1");
        }
        Ok(())
    }
}

impl Default for BurstOptions {
    fn default() -> Self {
        BurstOptions {
            timeout: Duration::from_secs(10),
            max_body: 1024 * 1024,
            final_bytes: 1,
            stage_segments: STAGE_SEGMENTS,
            release_threads: Releasers::Threads,
            settle_floor: Duration::from_millis(1),
        }
    }
}

/// What a burst observed.
#[derive(Debug, Clone)]
pub struct BurstReport {
    /// The requests as they went out, in input order: the input itself for HTTP/1.1; for an
    /// HTTP/2 burst the fields as HTTP/2 sent them (see [`super::h2burst`]).
    pub requests: Vec<SentRequest>,
    /// One per input request, in input order; `released` is when its final byte was written.
    pub responses: Vec<RawResponse>,
    /// Last release minus first release, in microseconds: how tight the burst left this host.
    /// 0 when fewer than two requests were released.
    pub spread_us: f64,
    /// How the final bytes went out (one packet, or how many threads at which priority).
    pub release: ReleaseMode,
}

/// A request on its open connection, waiting for its release.
struct Staged {
    stream: Stream,
    started: Instant,
    /// The bytes to write at release time: the held-back plaintext, or over TLS the sealed
    /// record carrying it.
    release: Vec<u8>,
}

/// A connection handed to a burst: the stream, a round-trip estimate for the settle pause (how
/// long opening it took; for a reused one, the pool's estimate) and whether it already carried
/// an exchange.
pub(crate) struct Open {
    pub stream: Stream,
    pub connect_time: Duration,
    pub reused: bool,
}

/// The requests of a burst as bytes, and where each goes; building it is where an unusable
/// request (bad URL, zero `final_bytes`) is refused, before any connection is touched.
pub(crate) struct Wires {
    wires: Vec<Vec<u8>>,
    pub urls: Vec<url::Url>,
}

impl Wires {
    pub(crate) fn new(reqs: &[SentRequest], opts: &BurstOptions) -> anyhow::Result<Wires> {
        opts.check()?;
        let mut wires = Vec::with_capacity(reqs.len());
        let mut urls = Vec::with_capacity(reqs.len());
        for req in reqs {
            let url = h1::parse_url(req)?;
            wires.push(h1::wire_to(req, &url)?);
            urls.push(url);
        }
        Ok(Wires { wires, urls })
    }
}

/// Sends `reqs` as one synchronised burst (see the module documentation) and returns their
/// responses in input order. A request whose connection or staging fails gets its error in its
/// own [`RawResponse`] and the others still run; only an unusable request (bad URL, zero
/// `final_bytes`) is an `Err`.
pub async fn burst(
    connector: &Connector,
    reqs: &[SentRequest],
    opts: &BurstOptions,
) -> anyhow::Result<BurstReport> {
    let wires = Wires::new(reqs, opts)?;

    // 1. Connect all, concurrently; time it to estimate the round trip for the settle pause.
    let begin = Instant::now();
    let deadline = begin + opts.timeout;
    let connected = join_all(wires.urls.iter().map(|url| async move {
        let t0 = Instant::now();
        connector
            .connect(url, deadline, opts.timeout)
            .await
            .map(|stream| Open {
                stream,
                connect_time: t0.elapsed(),
                reused: false,
            })
    }))
    .await;
    // Fresh connections, closed with the burst.
    Ok(burst_on(connector, reqs, &wires, connected, begin, opts, &|_, _| {}).await)
}

/// Steps 2–5 of a burst on connections that are already open (fresh ones, or kept-alive ones
/// from [`super::pool`]); an `Err` connection is reported as that request's failure, dated
/// `begin`. What is left of each request's connection (see [`Left`]) goes to `read` with the
/// request's index as soon as its answer is read: a pool lends a kept connection to the next
/// burst while this one's slowest answer is still coming (`stress`'s original execution, after
/// its duplicates were answered 409).
///
/// A fresh connection's prefix is staged in [`BurstOptions::stage_segments`] segments to spend
/// the receiver's quick-ACK allowance; a reused one already spent it on its earlier exchanges
/// (and a server that answered on it is in Linux's interactive "pingpong" mode, which delays
/// ACKs), so its prefix goes in one write: one segment for the server to read instead of
/// twenty.
pub(crate) async fn burst_on(
    connector: &Connector,
    reqs: &[SentRequest],
    wires: &Wires,
    connected: Vec<Result<Open, HttpError>>,
    begin: Instant,
    opts: &BurstOptions,
    read: &(dyn Fn(usize, Left) + Sync),
) -> BurstReport {
    // Connecting and staging share one timeout, counted from `begin`.
    let deadline = begin + opts.timeout;
    let slowest_connect = connected
        .iter()
        .filter_map(|c| c.as_ref().ok().map(|o| o.connect_time))
        .max()
        .unwrap_or_default();

    // 2. Stage every request but its final bytes.
    let mut staged: Vec<Result<Staged, (Instant, HttpError)>> = Vec::with_capacity(reqs.len());
    for (open, wire) in connected.into_iter().zip(&wires.wires) {
        let entry = match open {
            Ok(open) => {
                let segments = if open.reused { 1 } else { opts.stage_segments };
                stage(open.stream, wire, segments, opts, deadline).await
            }
            Err(e) => Err((begin, e)),
        };
        staged.push(entry);
    }

    // 3. Let the server consume the prefixes and go idle.
    settle(settle_time(slowest_connect, opts.settle_floor)).await;

    // 4. Release.
    let (released, mode) = release(&staged, opts.release_threads);

    // 5. Read concurrently, each from its own release; each connection is handed on as soon as
    //    its own answer is read, not when the burst's slowest one is.
    let reads = staged
        .into_iter()
        .zip(released.iter())
        .zip(reqs)
        .enumerate()
        .map(|(i, ((entry, rel), req))| async move {
            let (started, result, left) = match (entry, rel) {
                (Ok(mut s), Ok(at)) => {
                    let result = h1::read_keeping(
                        &mut s.stream,
                        &req.method,
                        *at + opts.timeout,
                        opts.timeout,
                        opts.max_body,
                    )
                    .await;
                    match result {
                        Ok((response, true)) => (s.started, Ok(response), Left::Kept(s.stream)),
                        Ok((response, false)) => (s.started, Ok(response), Left::Done),
                        Err(e) => (s.started, Err(e), Left::Done),
                    }
                }
                (Ok(s), Err(e)) => (s.started, Err(e.clone()), Left::Done),
                (Err((t, e)), _) => (t, Err(e), Left::Done),
            };
            let left = match &result {
                Err(e) if e.closed_before_any_byte() => Left::EndedUnanswered,
                _ => left,
            };
            // Timed before the connection is handed on: the latency is the exchange's alone.
            let response = RawResponse {
                started,
                released: rel.as_ref().ok().copied(),
                finished: Instant::now(),
                result,
                resent: None,
            };
            read(i, left);
            response
        });
    let responses: Vec<RawResponse> = join_all(reads).await;

    let times: Vec<Instant> = responses.iter().filter_map(|r| r.released).collect();
    let spread_us = match (times.iter().min(), times.iter().max()) {
        (Some(first), Some(last)) => last.duration_since(*first).as_secs_f64() * 1e6,
        _ => 0.0,
    };
    let report = BurstReport {
        requests: reqs.to_vec(),
        responses,
        spread_us,
        release: mode.through(wires.urls.first().and_then(|u| connector.proxy_shown(u))),
    };
    report
}

/// What a burst left of one request's connection, handed to [`burst_on`]'s `read` as soon as
/// that request's answer was read (or failed).
pub(crate) enum Left {
    /// The connection can carry another request.
    Kept(Stream),
    /// The connection ended (end of stream, a reset, a failed write) before any byte of an
    /// answer to the request: its error is [`HttpError::ClosedBeforeAnyByte`].
    EndedUnanswered,
    /// The connection is done for any other reason.
    Done,
}

/// How long to wait between staging and release: two of the slowest connect round trips, so a
/// remote server has received the prefixes, and at least `floor` (see
/// [`BurstOptions::settle_floor`]); at most 100 ms.
pub fn settle_time(slowest_connect: Duration, floor: Duration) -> Duration {
    (slowest_connect * 2).clamp(floor.min(MAX_SETTLE), MAX_SETTLE)
}

/// The longest settle pause, however slow the connections were to open.
const MAX_SETTLE: Duration = Duration::from_millis(100);

/// The runtime's timer fires on whole milliseconds: a shorter sleep would end at the next tick,
/// up to 1 ms late.
const TIMER_TICK: Duration = Duration::from_millis(1);

/// Pauses for `pause`, or, when that is shorter than a timer tick, for one turn of the runtime:
/// the other tasks run (other keys' bursts, in `stress`) and the release follows as soon as
/// they yield, where a sleep would wait for the next tick and a spin would burn the CPU the
/// server needs.
pub(crate) async fn settle(pause: Duration) {
    if pause < TIMER_TICK {
        tokio::task::yield_now().await;
    } else {
        tokio::time::sleep(pause).await;
    }
}

/// Writes all but the final bytes of `wire`, in `segments` pieces, and prepares the release
/// bytes.
async fn stage(
    mut stream: Stream,
    wire: &[u8],
    segments: usize,
    opts: &BurstOptions,
    deadline: Instant,
) -> Result<Staged, (Instant, HttpError)> {
    let started = Instant::now();
    let cut = wire.len().saturating_sub(opts.final_bytes);
    let (prefix, last) = wire.split_at(cut);
    let pieces = segments.clamp(1, prefix.len().max(1));
    let piece_len = prefix.len().div_ceil(pieces).max(1);
    for piece in prefix.chunks(piece_len) {
        // Each piece is flushed on its own so it leaves as its own segment (TCP_NODELAY).
        write_request(&mut stream, piece, deadline, opts.timeout)
            .await
            .map_err(|e| (started, e))?;
    }
    let release = stream.seal(last).map_err(|e| (started, e))?;
    Ok(Staged {
        stream,
        started,
        release,
    })
}

/// Writes every staged connection's release bytes (see [`super::release`]) and returns each
/// one's release instant (or why it could not be released), and how the release was done.
///
/// Should the kernel take only part of a release (a full send buffer), the rest is written after
/// the loop, so one slow socket never delays the others.
fn release(
    staged: &[Result<Staged, (Instant, HttpError)>],
    release_threads: Releasers,
) -> (Vec<Result<Instant, HttpError>>, ReleaseMode) {
    let jobs: Vec<Job<'_>> = staged
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            e.as_ref()
                .ok()
                .map(|s| (i, socket_of(s.stream.tcp()), &s.release[..]))
        })
        .collect();
    let (outcomes, mode) = release_all(&jobs, release_threads);

    let mut times: Vec<Result<Instant, HttpError>> =
        vec![Err(HttpError::ReleaseFailed("not staged".into())); staged.len()];
    for (i, result, at) in outcomes {
        let sent = match result {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(e) => {
                times[i] = Err(HttpError::ReleaseFailed(format!(
                    "releasing the final bytes failed: {e}"
                )));
                continue;
            }
        };
        times[i] = match &staged[i] {
            Ok(s) if sent >= s.release.len() => Ok(at),
            // The tail the kernel did not take at once, with short retries (bounded to 1 s).
            Ok(s) => send_rest(s.stream.tcp(), &s.release, sent),
            Err((_, e)) => Err(e.clone()),
        };
    }
    (times, mode)
}

/// Writes `bytes[sent..]` with short non-blocking retries (bounded to 1 s) and returns when the
/// last byte went out: the tail of a release the kernel did not take at once.
pub(crate) fn send_rest(
    tcp: &tokio::net::TcpStream,
    bytes: &[u8],
    mut sent: usize,
) -> Result<Instant, HttpError> {
    let limit = Instant::now() + Duration::from_secs(1);
    let sock = SockRef::from(tcp);
    while sent < bytes.len() {
        match sock.send(&bytes[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > limit {
                    return Err(HttpError::ReleaseFailed(
                        "releasing the final bytes timed out after 1 s".into(),
                    ));
                }
                std::thread::sleep(Duration::from_micros(100));
            }
            Err(e) => {
                return Err(HttpError::ReleaseFailed(format!(
                    "releasing the final bytes failed: {e}"
                )))
            }
        }
    }
    Ok(Instant::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settle_time_is_bounded() {
        let ms = Duration::from_millis;
        assert_eq!(settle_time(Duration::ZERO, ms(1)), ms(1));
        assert_eq!(settle_time(ms(5), ms(1)), ms(10));
        assert_eq!(settle_time(Duration::from_secs(3), ms(1)), ms(100));
        // Without a floor a local round trip keeps the pause under a tick (one runtime turn);
        // a remote one still waits for the prefixes to arrive.
        let local = Duration::from_micros(30);
        assert_eq!(settle_time(local, Duration::ZERO), local * 2);
        assert_eq!(settle_time(ms(2), Duration::ZERO), ms(4));
    }

    #[tokio::test]
    async fn zero_final_bytes_is_an_error() {
        let url = url::Url::parse("http://127.0.0.1:9/").unwrap();
        let req = h1::prepare(&url, "GET", vec![], vec![]);
        let opts = BurstOptions {
            final_bytes: 0,
            ..BurstOptions::default()
        };
        assert!(burst(&Connector::default(), &[req], &opts).await.is_err());
    }

    #[tokio::test]
    async fn refused_connections_are_reported_per_request() {
        let url = url::Url::parse("http://127.0.0.1:9/").unwrap();
        let req = h1::prepare(&url, "GET", vec![], vec![]);
        let report = burst(
            &Connector::default(),
            &[req.clone(), req],
            &BurstOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(report.responses.len(), 2);
        for r in &report.responses {
            let err = r.result.as_ref().unwrap_err();
            assert_eq!(
                err,
                &HttpError::Connect("connection refused to 127.0.0.1:9".into())
            );
            assert!(r.released.is_none());
        }
        assert_eq!(report.spread_us, 0.0);
    }
}
