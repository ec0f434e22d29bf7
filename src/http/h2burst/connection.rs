//! An HTTP/2 connection for bursts: the handshake (once), staging every request of a burst but
//! its final bytes, the release in one write, and reading frames until every stream has its
//! answer ([`receive`] says what each frame does). A connection whose burst ended cleanly can
//! carry the next burst to its origin ([`Conn::reusable`]): its streams continue the stream ids,
//! and the HPACK decoder and the connection's flow-control window carry over.

mod receive;

use std::time::Instant;

use socket2::SockRef;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::frame::*;
use super::hpack::Encoded;
use crate::http::burst::{self, BurstOptions};
use crate::http::connection::{within, Stream};
use crate::http::exchange::{Header, ReceivedResponse};
use crate::http::{HttpError, Phase};

/// The receive window we grant per stream and for the connection: responses up to this size
/// never wait for our WINDOW_UPDATE (we still return credit for every DATA frame).
const RECV_WINDOW: u32 = 1 << 24;
/// The largest frame we accept: the protocol's default, which we never raise.
const MAX_FRAME: usize = 16_384;
/// The payload of the PING that confirms staging.
const STAGED_PING: [u8; 8] = *b"idemstag";
/// The error when the server hangs up before the staging PING is answered.
/// The end of the connection before the release, which nothing of an answer can precede.
fn closed_while_staging() -> HttpError {
    HttpError::ClosedBeforeAnyByte("the server closed the connection while staging".into())
}

/// One request's stream.
#[derive(Default)]
pub(super) struct StreamState {
    pub(super) started: Option<Instant>,
    pub(super) released: Option<Instant>,
    pub(super) finished: Option<Instant>,
    /// Bytes held back for the release.
    hold: usize,
    /// This stream's send window relative to the peer's initial window: WINDOW_UPDATE credit
    /// minus the body bytes staged and held.
    window: i64,
    status: Option<u16>,
    headers: Vec<Header>,
    body: Vec<u8>,
    truncated: bool,
    /// Set when the stream ended (response or error).
    pub(super) result: Option<Result<ReceivedResponse, HttpError>>,
    /// Whether any frame of this stream came from the server.
    pub(super) heard: bool,
}

/// How many streams a connection carries before it is no longer reused. Servers end a
/// connection after a number of requests (nginx after 1,000 by default, 100 before 1.19.10),
/// and a GOAWAY in the middle of a burst refuses the streams after it: a burst with fewer
/// duplicates than asked. Within the lowest of those limits, a new connection now and then
/// costs one handshake.
const STREAMS_PER_CONNECTION: usize = 100;

/// The connection: the socket, unparsed input, the HPACK decoder and both sides' settings.
pub(crate) struct Conn {
    stream: Stream,
    input: Vec<u8>,
    decoder: loona_hpack::Decoder<'static>,
    /// The current burst's streams: index `i` is stream `first_id + 2i`.
    pub(super) streams: Vec<StreamState>,
    first_id: u32,
    /// The first stream id of the next burst.
    next_id: u32,
    max_body: usize,
    /// Whether the preface and SETTINGS were exchanged.
    ready: bool,
    /// Whether the server said GOAWAY: the connection takes no new stream.
    goaway: bool,
    /// The peer's SETTINGS_MAX_FRAME_SIZE.
    max_frame: usize,
    /// The peer's SETTINGS_INITIAL_WINDOW_SIZE.
    initial_window: i64,
    max_streams: Option<u32>,
    conn_window: i64,
    got_settings: bool,
    settings_acked: bool,
    ping_acked: bool,
    /// A header block in progress: stream, END_STREAM of its HEADERS, fragments so far.
    block: Option<(u32, bool, Vec<u8>)>,
    /// Control frames to write (ACKs, WINDOW_UPDATEs), flushed after each frame is handled.
    out: Vec<u8>,
}

impl Conn {
    /// A connection on `stream`, before the HTTP/2 handshake.
    pub(crate) fn new(stream: Stream) -> Self {
        // We never raise SETTINGS_HEADER_TABLE_SIZE from its 4,096: a server may not grow our
        // HPACK table past it (RFC 7541 §4.2), and a decoder that let it would keep whatever
        // the server put there.
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(4096);
        Conn {
            stream,
            input: Vec::with_capacity(16 * 1024),
            decoder,
            streams: Vec::new(),
            first_id: 1,
            next_id: 1,
            max_body: 0,
            ready: false,
            goaway: false,
            max_frame: MAX_FRAME,
            initial_window: 65_535,
            max_streams: None,
            conn_window: 65_535,
            got_settings: false,
            settings_acked: false,
            ping_acked: false,
            block: None,
            out: Vec::new(),
        }
    }

    /// The socket, for a look at whether the server closed it while the connection was idle.
    pub(crate) fn socket(&self) -> &Stream {
        &self.stream
    }

    /// Makes room for a burst of `n` streams keeping `max_body` bytes of each response: new
    /// streams after the previous burst's. A connection that has carried streams refuses a
    /// burst that would take it past [`STREAMS_PER_CONNECTION`]; a new one takes any burst.
    pub(super) fn begin_burst(&mut self, n: usize, max_body: usize) -> Result<(), HttpError> {
        let used = self.used();
        if used > 0 && used + n > STREAMS_PER_CONNECTION {
            return Err(HttpError::Http2(format!(
                "the HTTP/2 connection has carried {used} streams, and takes at most {STREAMS_PER_CONNECTION}"
            )));
        }
        self.first_id = self.next_id;
        self.next_id += 2 * n as u32;
        self.streams = (0..n).map(|_| StreamState::default()).collect();
        self.max_body = max_body;
        self.ping_acked = false;
        Ok(())
    }

    /// How many streams the connection has carried.
    fn used(&self) -> usize {
        (self.next_id / 2) as usize
    }

    /// Whether the connection can carry another burst: handshake done, no GOAWAY, no header
    /// block half read, every stream of the last burst answered, and fewer than
    /// [`STREAMS_PER_CONNECTION`] streams carried.
    pub(crate) fn reusable(&self) -> bool {
        self.ready
            && !self.goaway
            && self.used() < STREAMS_PER_CONNECTION
            && self.block.is_none()
            && self.streams.iter().all(|s| matches!(s.result, Some(Ok(_))))
    }

    /// The stream id of the current burst's `i`-th stream.
    pub(super) fn stream_id(&self, i: usize) -> u32 {
        self.first_id + 2 * i as u32
    }

    fn index(&self, id: u32) -> Option<usize> {
        let i = (id.checked_sub(self.first_id)? / 2) as usize;
        ((id - self.first_id) % 2 == 0 && i < self.streams.len()).then_some(i)
    }

    fn pending(&self) -> bool {
        self.streams.iter().any(|s| s.result.is_none())
    }

    /// Handshake (on a new connection), staging, release, responses. `Err` is a
    /// connection-level failure before the release, which the caller gives to every stream
    /// that has no result yet.
    pub(super) async fn run(
        &mut self,
        reqs: &[Encoded],
        opts: &BurstOptions,
        begin: Instant,
    ) -> Result<(), HttpError> {
        let setup_deadline = begin + opts.timeout;
        let timeout = opts.timeout;
        if !self.ready {
            within(setup_deadline, timeout, Phase::Http2Handshake, async {
                self.handshake().await
            })
            .await?;
            self.ready = true;
        }
        let ping_sent = within(setup_deadline, timeout, Phase::Staging, async {
            self.stage(reqs, opts.final_bytes).await
        })
        .await?;
        // The pause lets the server read every staged stream before the release; a lone
        // request (a late retry) has nothing to be released together with.
        if reqs.len() > 1 {
            burst::settle(burst::settle_time(ping_sent.elapsed(), opts.settle_floor)).await;
        }
        let at = self.release(reqs)?;
        let deadline = at + timeout;
        let closed = HttpError::ClosedBeforeAnyByte(
            "the server closed the HTTP/2 connection before the response".into(),
        );
        let waited = within(deadline, timeout, Phase::FirstByte, async {
            while self.pending() {
                self.step_or(&closed).await?;
            }
            Ok(())
        })
        .await;
        if let Err(e) = waited {
            let now = Instant::now();
            for s in self.streams.iter_mut().filter(|s| s.result.is_none()) {
                s.finished = Some(now);
                s.result = Some(Err(for_stream(&e, s.heard)));
            }
        }
        Ok(())
    }

    async fn handshake(&mut self) -> Result<(), HttpError> {
        let mut hello = PREFACE.to_vec();
        let mut settings = Vec::new();
        for (id, value) in [(0x2u16, 0u32), (0x4, RECV_WINDOW)] {
            settings.extend_from_slice(&id.to_be_bytes());
            settings.extend_from_slice(&value.to_be_bytes());
        }
        frame(&mut hello, SETTINGS, 0, 0, &settings);
        frame(
            &mut hello,
            WINDOW_UPDATE,
            0,
            0,
            &(RECV_WINDOW - 65_535).to_be_bytes(),
        );
        self.write(&hello).await?;
        while !(self.got_settings && self.settings_acked) {
            self.step_or(&HttpError::Http2(
                "the server closed the connection after the HTTP/2 preface: it does not speak HTTP/2 here (for http://, h2c with prior knowledge)".into(),
            ))
            .await?;
        }
        Ok(())
    }

    /// Writes every request but its held-back bytes, then a PING; returns when the PING was
    /// sent, once its ACK is in.
    async fn stage(&mut self, reqs: &[Encoded], final_bytes: usize) -> Result<Instant, HttpError> {
        if let Some(max) = self.max_streams {
            if (max as usize) < reqs.len() {
                return Err(HttpError::Http2(format!(
                    "the server allows {max} concurrent HTTP/2 streams; a burst of {} needs as many",
                    reqs.len()
                )));
            }
        }
        let mut out = Vec::new();
        for (i, req) in reqs.iter().enumerate() {
            let id = self.stream_id(i);
            let hold = final_bytes.min(req.body.len());
            // The whole body must fit the windows now: the release cannot wait for credit.
            while self.conn_window < req.body.len() as i64
                || self.initial_window + self.streams[i].window < req.body.len() as i64
            {
                self.write(&std::mem::take(&mut out)).await?;
                self.step_or(&closed_while_staging()).await?;
            }
            self.conn_window -= req.body.len() as i64;
            self.streams[i].window -= req.body.len() as i64;
            self.streams[i].hold = hold;
            self.streams[i].started = Some(Instant::now());
            let mut chunks = req.block.chunks(self.max_frame);
            let first = chunks.next().unwrap_or_default();
            let more = req.block.len() > self.max_frame;
            frame(
                &mut out,
                HEADERS,
                if more { 0 } else { END_HEADERS },
                id,
                first,
            );
            let rest: Vec<&[u8]> = chunks.collect();
            for (k, chunk) in rest.iter().enumerate() {
                let flags = if k + 1 == rest.len() { END_HEADERS } else { 0 };
                frame(&mut out, CONTINUATION, flags, id, chunk);
            }
            let prefix = &req.body[..req.body.len() - hold];
            for chunk in prefix.chunks(self.max_frame) {
                frame(&mut out, DATA, 0, id, chunk);
            }
        }
        frame(&mut out, PING, 0, 0, &STAGED_PING);
        let sent = Instant::now();
        self.write(&out).await?;
        let closed = closed_while_staging();
        while !self.ping_acked {
            self.step_or(&closed).await?;
        }
        Ok(sent)
    }

    /// Writes every still-open stream's final DATA frame in one `send(2)`.
    fn release(&mut self, reqs: &[Encoded]) -> Result<Instant, HttpError> {
        let mut frames = Vec::with_capacity(reqs.len() * 16);
        let mut open = Vec::with_capacity(reqs.len());
        for (i, req) in reqs.iter().enumerate() {
            let s = &self.streams[i];
            if s.result.is_none() {
                frame(
                    &mut frames,
                    DATA,
                    END_STREAM,
                    self.stream_id(i),
                    &req.body[req.body.len() - s.hold..],
                );
                open.push(i);
            }
        }
        // Sealed now into one record over TLS, so the release is a plain socket write.
        let bytes = self.stream.seal(&frames)?;
        std::hint::black_box(Instant::now());
        let sent = match SockRef::from(self.stream.tcp()).send(&bytes) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(e) => {
                return Err(HttpError::ReleaseFailed(format!(
                    "releasing the final frames failed: {e}"
                )))
            }
        };
        let at = if sent == bytes.len() {
            Instant::now()
        } else {
            burst::send_rest(self.stream.tcp(), &bytes, sent)?
        };
        for i in open {
            self.streams[i].released = Some(at);
        }
        Ok(at)
    }

    /// A write that fails is the connection's end: [`HttpError::ClosedBeforeAnyByte`] until
    /// [`for_stream`] tells the streams that heard a frame.
    async fn write(&mut self, bytes: &[u8]) -> Result<(), HttpError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let failed = |e| {
            HttpError::ClosedBeforeAnyByte(format!("writing to the HTTP/2 connection failed: {e}"))
        };
        self.stream.write_all(bytes).await.map_err(failed)?;
        self.stream.flush().await.map_err(failed)
    }

    /// Reads and handles one frame; false at end of stream.
    async fn step(&mut self) -> Result<bool, HttpError> {
        let Some(f) = self.read_frame().await? else {
            return Ok(false);
        };
        self.handle(f)?;
        let out = std::mem::take(&mut self.out);
        self.write(&out).await?;
        Ok(true)
    }

    /// [`Conn::step`] for a caller that needs more frames: the end of stream is the error
    /// `closed`.
    async fn step_or(&mut self, closed: &HttpError) -> Result<(), HttpError> {
        if self.step().await? {
            Ok(())
        } else {
            Err(closed.clone())
        }
    }

    async fn read_frame(&mut self) -> Result<Option<Frame>, HttpError> {
        loop {
            if self.input.len() >= 9 {
                // A server's first frame is its SETTINGS (RFC 9113 §3.4): anything else (an
                // HTTP/1.1 status line, an HTML error page with no status line at all) is a
                // server that does not speak HTTP/2 here, not a protocol error to report as one.
                if !self.got_settings && self.input[3] != SETTINGS {
                    let line = self
                        .input
                        .split(|b| *b == b'\r' || *b == b'\n')
                        .next()
                        .unwrap_or_default();
                    let shown: String = String::from_utf8_lossy(line).chars().take(60).collect();
                    return Err(HttpError::Http2(format!(
                        "the server answered the HTTP/2 preface with {shown:?}, not HTTP/2 SETTINGS: it speaks HTTP/1.1 only here (for http://, h2c with prior knowledge)"
                    )));
                }
                let len =
                    u32::from_be_bytes([0, self.input[0], self.input[1], self.input[2]]) as usize;
                if len > MAX_FRAME {
                    return Err(HttpError::Http2(format!(
                        "the server sent a frame of {len} bytes, more than the {MAX_FRAME} allowed"
                    )));
                }
                if self.input.len() >= 9 + len {
                    let head: Vec<u8> = self.input.drain(..9).collect();
                    let payload = self.input.drain(..len).collect();
                    return Ok(Some(Frame {
                        kind: head[3],
                        flags: head[4],
                        stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]])
                            & 0x7fff_ffff,
                        payload,
                    }));
                }
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = match self.stream.read(&mut chunk).await {
                Ok(n) => n,
                Err(e) => {
                    return Err(HttpError::ClosedBeforeAnyByte(format!(
                        "reading the HTTP/2 connection failed: {e}"
                    )));
                }
            };
            if n == 0 {
                return Ok(None);
            }
            self.input.extend_from_slice(&chunk[..n]);
        }
    }
}

/// A connection-level failure after the release as one stream's error: the connection's end is
/// one before any byte of its answer only while no frame of the stream came, and a timeout ran
/// out waiting for the response head until one did, then in the body.
fn for_stream(e: &HttpError, heard: bool) -> HttpError {
    match e {
        HttpError::ClosedBeforeAnyByte(why) if heard => HttpError::ClosedMidResponse(why.clone()),
        HttpError::Timeout { after, .. } if heard => HttpError::Timeout {
            phase: Phase::Body,
            after: *after,
        },
        other => other.clone(),
    }
}
