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

use std::io::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use socket2::SockRef;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::burst::{self, BurstOptions, BurstReport};
use super::exchange::{Header, ReceivedResponse, SentRequest};
use super::raw::{self, RawResponse, Stream};
use super::release::ReleaseMode;
use super::{net, tls};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// The receive window we grant per stream and for the connection: responses up to this size
/// never wait for our WINDOW_UPDATE (we still return credit for every DATA frame).
const RECV_WINDOW: u32 = 1 << 24;
/// The largest frame we accept: the protocol's default, which we never raise.
const MAX_FRAME: usize = 16_384;
/// The payload of the PING that confirms staging.
const STAGED_PING: [u8; 8] = *b"idemstag";

/// Runs `reqs` as one burst with the tightest technique the target allows: the single-packet
/// release when it speaks HTTP/2 (ALPN `h2` picked by an `https` server, or `http2` = the user
/// said an `http` target speaks h2c), else the HTTP/1.1 last-byte engine. An `https` origin that
/// picked `http/1.1` once is remembered for the rest of the process, so later bursts do not pay
/// for a second handshake.
pub async fn burst_for_target(
    reqs: &[SentRequest],
    opts: &BurstOptions,
    http2: bool,
) -> anyhow::Result<BurstReport> {
    let Some(first) = reqs.first() else {
        return burst::burst(reqs, opts).await;
    };
    let url = url::Url::parse(&first.url).with_context(|| format!("invalid URL {}", first.url))?;
    match url.scheme() {
        "https" if !is_http1_origin(&url) => {
            let begin = Instant::now();
            let deadline = begin + opts.timeout;
            match open(&url, deadline, opts.timeout).await {
                Ok((stream, true)) => run_on(reqs, opts, stream, begin).await,
                Ok((_, false)) => {
                    remember_http1_origin(&url);
                    burst::burst(reqs, opts).await
                }
                // The HTTP/1.1 engine reports the same failure per request.
                Err(_) => burst::burst(reqs, opts).await,
            }
        }
        "http" if http2 => burst(reqs, opts).await,
        _ => burst::burst(reqs, opts).await,
    }
}

/// Sends `reqs` (all to one origin) as an HTTP/2 single-packet burst and returns their responses
/// in input order: h2c with prior knowledge for `http`, ALPN `h2` for `https` (a server that
/// picks `http/1.1` is an error for every request). A failure of the connection or of the
/// HTTP/2 handshake is reported in every request's [`RawResponse`]; only unusable requests
/// (bad URL, several origins, zero `final_bytes`) are an `Err`.
pub async fn burst(reqs: &[SentRequest], opts: &BurstOptions) -> anyhow::Result<BurstReport> {
    let Some(first) = reqs.first() else {
        return burst::burst(reqs, opts).await;
    };
    let url = url::Url::parse(&first.url).with_context(|| format!("invalid URL {}", first.url))?;
    let begin = Instant::now();
    let deadline = begin + opts.timeout;
    match open(&url, deadline, opts.timeout).await {
        Ok((stream, true)) => run_on(reqs, opts, stream, begin).await,
        Ok((_, false)) => Ok(failed(
            reqs,
            begin,
            &format!(
                "the server at {} picked HTTP/1.1 in ALPN: it does not offer HTTP/2",
                origin(&url)
            ),
        )),
        Err(e) => Ok(failed(reqs, begin, &e)),
    }
}

/// Whether [`burst_for_target`] runs a burst to `url` over HTTP/1.1 connections: `http`
/// without `http2`, or an `https` origin whose server already picked `http/1.1` in ALPN. Such a
/// burst can be staged on kept-alive connections instead ([`super::pool::Pool::burst`]).
pub(crate) fn bursts_over_http1(url: &url::Url, http2: bool) -> bool {
    match url.scheme() {
        "http" => !http2,
        "https" => is_http1_origin(url),
        _ => false,
    }
}

/// Origins (`scheme://host:port`) whose TLS servers picked `http/1.1`.
static HTTP1_ORIGINS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn is_http1_origin(url: &url::Url) -> bool {
    let origin = origin(url);
    HTTP1_ORIGINS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&origin)
}

fn remember_http1_origin(url: &url::Url) {
    let mut known = HTTP1_ORIGINS.lock().unwrap_or_else(|e| e.into_inner());
    let origin = origin(url);
    if !known.contains(&origin) {
        known.push(origin);
    }
}

fn origin(url: &url::Url) -> String {
    url.origin().ascii_serialization()
}

/// Connects; the flag is whether the connection speaks HTTP/2 (always for `http`, where the
/// caller asserted prior knowledge; the ALPN pick for `https`).
async fn open(
    url: &url::Url,
    deadline: Instant,
    timeout: Duration,
) -> Result<(Stream, bool), String> {
    let (tcp, host) = raw::connect_tcp(url, deadline, timeout).await?;
    if url.scheme() == "https" {
        let (tls, h2) = raw::within(
            deadline,
            timeout,
            "in the TLS handshake",
            tls::handshake_h2(tcp, host),
        )
        .await?;
        Ok((Stream::Tls(Box::new(tls)), h2))
    } else {
        Ok((Stream::Plain(tcp), true))
    }
}

/// Every request failed with `error` before anything was released.
fn failed(reqs: &[SentRequest], at: Instant, error: &str) -> BurstReport {
    BurstReport {
        requests: reqs.iter().map(as_sent).collect(),
        responses: reqs
            .iter()
            .map(|_| RawResponse {
                started: at,
                released: None,
                finished: Instant::now(),
                result: Err(error.to_string()),
            })
            .collect(),
        spread_us: 0.0,
        release: ReleaseMode::OnePacket,
    }
}

async fn run_on(
    reqs: &[SentRequest],
    opts: &BurstOptions,
    stream: Stream,
    begin: Instant,
) -> anyhow::Result<BurstReport> {
    if opts.final_bytes == 0 {
        anyhow::bail!("final_bytes must be at least 1");
    }
    let mut encoded = Vec::with_capacity(reqs.len());
    let first = url::Url::parse(&reqs[0].url)?;
    for req in reqs {
        let url = url::Url::parse(&req.url).with_context(|| format!("invalid URL {}", req.url))?;
        if origin(&url) != origin(&first) {
            anyhow::bail!(
                "an HTTP/2 burst goes to one origin; {} and {} differ",
                origin(&first),
                origin(&url)
            );
        }
        encoded.push(encode_request(req, &url).map_err(anyhow::Error::msg)?);
    }
    let mut conn = Conn::new(stream, reqs.len(), opts.max_body);
    let released = conn.run(&encoded, opts, begin).await;
    let responses = conn
        .streams
        .into_iter()
        .map(|s| RawResponse {
            started: s.started.unwrap_or(begin),
            released: s.released,
            finished: s.finished.unwrap_or_else(Instant::now),
            result: match (s.result, released.as_ref()) {
                (Some(r), _) => r,
                (None, Err(e)) => Err(e.clone()),
                (None, Ok(())) => Err("no response (internal state)".to_string()),
            },
        })
        .collect();
    Ok(BurstReport {
        requests: encoded.into_iter().map(|e| e.sent).collect(),
        responses,
        // One write released every stream.
        spread_us: 0.0,
        release: ReleaseMode::OnePacket.through(net::proxy_for(&first).map(|p| net::shown(&p))),
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

/// One request ready to stage.
struct Encoded {
    /// The HPACK header block.
    block: Vec<u8>,
    body: Vec<u8>,
    /// The record: `host` carries what went out as `:authority`, field names lower-cased,
    /// connection-specific fields (which HTTP/2 forbids) left out, as on the wire.
    sent: SentRequest,
}

/// Fields that HTTP/2 forbids (RFC 9113 §8.2.2); `host` becomes `:authority`.
const NOT_SENT: [&str; 6] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

fn encode_request(req: &SentRequest, url: &url::Url) -> Result<Encoded, String> {
    if req.method.is_empty() {
        return Err("the request has no method".to_string());
    }
    let authority = req
        .header_values("host")
        .first()
        .map(|v| v.to_vec())
        .unwrap_or_else(|| {
            let host = url.host_str().unwrap_or_default();
            match url.port() {
                Some(p) => format!("{host}:{p}").into_bytes(),
                None => host.as_bytes().to_vec(),
            }
        });
    let mut path = url.path().to_string();
    if let Some(q) = url.query() {
        path.push('?');
        path.push_str(q);
    }
    let mut block = Vec::with_capacity(256);
    literal(&mut block, b":method", req.method.as_bytes());
    literal(&mut block, b":scheme", url.scheme().as_bytes());
    literal(&mut block, b":authority", &authority);
    literal(&mut block, b":path", path.as_bytes());
    let mut headers = vec![Header::new("host", authority)];
    for h in &req.headers {
        let name = h.name.to_ascii_lowercase();
        if NOT_SENT.contains(&name.as_str()) || (name == "te" && h.value != b"trailers") {
            continue;
        }
        literal(&mut block, name.as_bytes(), &h.value);
        headers.push(Header::new(name, h.value.clone()));
    }
    Ok(Encoded {
        block,
        body: req.body.clone(),
        sent: SentRequest {
            method: req.method.clone(),
            url: req.url.clone(),
            headers,
            body: req.body.clone(),
        },
    })
}

/// An HPACK "literal header field without indexing — new name" (RFC 7541 §6.2.2), strings not
/// Huffman-coded: nothing enters either side's dynamic table, so every request's block stands
/// alone.
fn literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0);
    hpack_int(out, 0, 7, name.len());
    out.extend_from_slice(name);
    hpack_int(out, 0, 7, value.len());
    out.extend_from_slice(value);
}

/// An HPACK integer with an `n`-bit prefix (RFC 7541 §5.1); `high` holds the bits above it.
fn hpack_int(out: &mut Vec<u8>, high: u8, n: u32, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(high | value as u8);
        return;
    }
    out.push(high | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len() as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
}

/// A frame as read.
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// One request's stream.
#[derive(Default)]
struct StreamState {
    started: Option<Instant>,
    released: Option<Instant>,
    finished: Option<Instant>,
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
    result: Option<Result<ReceivedResponse, String>>,
}

/// The connection: the socket, unparsed input, the HPACK decoder and both sides' settings.
struct Conn {
    stream: Stream,
    input: Vec<u8>,
    decoder: loona_hpack::Decoder<'static>,
    streams: Vec<StreamState>,
    max_body: usize,
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

/// Streams are 1, 3, 5, …: index `i` is stream `2i + 1`.
fn stream_id(i: usize) -> u32 {
    (2 * i + 1) as u32
}

impl Conn {
    fn new(stream: Stream, n: usize, max_body: usize) -> Self {
        Conn {
            stream,
            input: Vec::with_capacity(16 * 1024),
            decoder: loona_hpack::Decoder::new(),
            streams: (0..n).map(|_| StreamState::default()).collect(),
            max_body,
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

    fn index(&self, id: u32) -> Option<usize> {
        let i = (id as usize).checked_sub(1)? / 2;
        (id % 2 == 1 && i < self.streams.len()).then_some(i)
    }

    fn pending(&self) -> bool {
        self.streams.iter().any(|s| s.result.is_none())
    }

    /// Handshake, staging, release, responses. `Err` is a connection-level failure, which the
    /// caller gives to every stream that has no result yet.
    async fn run(
        &mut self,
        reqs: &[Encoded],
        opts: &BurstOptions,
        begin: Instant,
    ) -> Result<(), String> {
        let setup_deadline = begin + opts.timeout;
        let timeout = opts.timeout;
        raw::within(setup_deadline, timeout, "in the HTTP/2 handshake", async {
            self.handshake().await
        })
        .await?;
        let ping_sent = raw::within(setup_deadline, timeout, "staging the requests", async {
            self.stage(reqs, opts.final_bytes).await
        })
        .await?;
        let rtt = ping_sent.elapsed();
        tokio::time::sleep(burst::settle_time(rtt)).await;
        let at = self.release(reqs)?;
        let deadline = at + timeout;
        let waited = raw::within(deadline, timeout, "waiting for the response", async {
            while self.pending() {
                if !self.step().await? {
                    return Err(
                        "the server closed the HTTP/2 connection before the response".to_string(),
                    );
                }
            }
            Ok(())
        })
        .await;
        if let Err(e) = waited {
            let now = Instant::now();
            for s in self.streams.iter_mut().filter(|s| s.result.is_none()) {
                s.finished = Some(now);
                s.result = Some(Err(e.clone()));
            }
        }
        Ok(())
    }

    async fn handshake(&mut self) -> Result<(), String> {
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
            if !self.step().await? {
                return Err(
                    "the server closed the connection after the HTTP/2 preface: it does not speak HTTP/2 here (for http://, h2c with prior knowledge)"
                        .to_string(),
                );
            }
        }
        Ok(())
    }

    /// Writes every request but its held-back bytes, then a PING; returns when the PING was
    /// sent, once its ACK is in.
    async fn stage(&mut self, reqs: &[Encoded], final_bytes: usize) -> Result<Instant, String> {
        if let Some(max) = self.max_streams {
            if (max as usize) < reqs.len() {
                return Err(format!(
                    "the server allows {max} concurrent HTTP/2 streams; a burst of {} needs as many",
                    reqs.len()
                ));
            }
        }
        let mut out = Vec::new();
        for (i, req) in reqs.iter().enumerate() {
            let id = stream_id(i);
            let hold = final_bytes.min(req.body.len());
            // The whole body must fit the windows now: the release cannot wait for credit.
            while self.conn_window < req.body.len() as i64
                || self.initial_window + self.streams[i].window < req.body.len() as i64
            {
                self.write(&std::mem::take(&mut out)).await?;
                if !self.step().await? {
                    return Err("the server closed the connection while staging".to_string());
                }
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
        while !self.ping_acked {
            if !self.step().await? {
                return Err("the server closed the connection while staging".to_string());
            }
        }
        Ok(sent)
    }

    /// Writes every still-open stream's final DATA frame in one `send(2)`.
    fn release(&mut self, reqs: &[Encoded]) -> Result<Instant, String> {
        let mut frames = Vec::with_capacity(reqs.len() * 16);
        let mut open = Vec::with_capacity(reqs.len());
        for (i, req) in reqs.iter().enumerate() {
            let s = &self.streams[i];
            if s.result.is_none() {
                frame(
                    &mut frames,
                    DATA,
                    END_STREAM,
                    stream_id(i),
                    &req.body[req.body.len() - s.hold..],
                );
                open.push(i);
            }
        }
        let bytes = match &mut self.stream {
            Stream::Plain(_) => frames,
            Stream::Tls(tls) => {
                // Sealed now into one record, so the release is a plain socket write.
                let (_, conn) = tls.get_mut();
                let mut record = Vec::new();
                conn.writer()
                    .write_all(&frames)
                    .and_then(|()| {
                        while conn.wants_write() {
                            conn.write_tls(&mut record)?;
                        }
                        Ok(())
                    })
                    .map_err(|e| format!("sealing the final TLS record failed: {e}"))?;
                record
            }
        };
        std::hint::black_box(Instant::now());
        let sent = match SockRef::from(self.stream.tcp()).send(&bytes) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(format!("releasing the final frames failed: {e}")),
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

    async fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.stream
            .write_all(bytes)
            .await
            .map_err(|e| format!("writing to the HTTP/2 connection failed: {e}"))?;
        self.stream
            .flush()
            .await
            .map_err(|e| format!("writing to the HTTP/2 connection failed: {e}"))
    }

    /// Reads and handles one frame; false at end of stream.
    async fn step(&mut self) -> Result<bool, String> {
        let Some(f) = self.read_frame().await? else {
            return Ok(false);
        };
        self.handle(f)?;
        let out = std::mem::take(&mut self.out);
        self.write(&out).await?;
        Ok(true)
    }

    async fn read_frame(&mut self) -> Result<Option<Frame>, String> {
        loop {
            if self.input.len() >= 9 {
                if self.input.starts_with(b"HTTP/") {
                    let line = self.input.split(|b| *b == b'\r').next().unwrap_or_default();
                    return Err(format!(
                        "the server answered the HTTP/2 preface with {:?}: it speaks HTTP/1.1 only here (for http://, h2c with prior knowledge)",
                        String::from_utf8_lossy(line)
                    ));
                }
                let len =
                    u32::from_be_bytes([0, self.input[0], self.input[1], self.input[2]]) as usize;
                if len > MAX_FRAME {
                    return Err(format!(
                        "the server sent a frame of {len} bytes, more than the {MAX_FRAME} allowed"
                    ));
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
            let n = self
                .stream
                .read(&mut chunk)
                .await
                .map_err(|e| format!("reading the HTTP/2 connection failed: {e}"))?;
            if n == 0 {
                return Ok(None);
            }
            self.input.extend_from_slice(&chunk[..n]);
        }
    }

    fn handle(&mut self, f: Frame) -> Result<(), String> {
        if let Some((id, _, _)) = &self.block {
            if f.kind != CONTINUATION || f.stream != *id {
                return Err("the server interrupted a header block (CONTINUATION expected)".into());
            }
        }
        match f.kind {
            SETTINGS if f.flags & ACK != 0 => self.settings_acked = true,
            SETTINGS => {
                self.apply_settings(&f.payload)?;
                self.got_settings = true;
                frame(&mut self.out, SETTINGS, ACK, 0, &[]);
            }
            PING if f.flags & ACK != 0 => self.ping_acked |= f.payload == STAGED_PING,
            PING => frame(&mut self.out, PING, ACK, 0, &f.payload),
            WINDOW_UPDATE => {
                let inc = be32(&f.payload)? & 0x7fff_ffff;
                if f.stream == 0 {
                    self.conn_window += i64::from(inc);
                } else if let Some(i) = self.index(f.stream) {
                    self.streams[i].window += i64::from(inc);
                }
            }
            GOAWAY => {
                let last = be32(&f.payload)? & 0x7fff_ffff;
                let code = be32(f.payload.get(4..).unwrap_or_default())?;
                let debug = String::from_utf8_lossy(f.payload.get(8..).unwrap_or_default());
                let why = format!(
                    "the server sent GOAWAY ({}{}) without processing this request",
                    error_name(code),
                    if debug.is_empty() {
                        String::new()
                    } else {
                        format!(": {debug}")
                    }
                );
                for i in 0..self.streams.len() {
                    if stream_id(i) > last {
                        self.end(i, Err(why.clone()));
                    }
                }
            }
            RST_STREAM => {
                let code = be32(&f.payload)?;
                if let Some(i) = self.index(f.stream) {
                    self.end(
                        i,
                        Err(format!(
                            "the server reset the stream ({})",
                            error_name(code)
                        )),
                    );
                }
            }
            PUSH_PROMISE => {
                return Err("the server sent PUSH_PROMISE although push was disabled".into())
            }
            DATA => {
                let credit = f.payload.len() as u32;
                if credit > 0 {
                    frame(&mut self.out, WINDOW_UPDATE, 0, 0, &credit.to_be_bytes());
                    if f.flags & END_STREAM == 0 {
                        frame(
                            &mut self.out,
                            WINDOW_UPDATE,
                            0,
                            f.stream,
                            &credit.to_be_bytes(),
                        );
                    }
                }
                let data = unpad(&f.payload, f.flags)?;
                if let Some(i) = self.index(f.stream) {
                    let max_body = self.max_body;
                    let s = &mut self.streams[i];
                    let room = max_body.saturating_sub(s.body.len());
                    s.body.extend_from_slice(&data[..data.len().min(room)]);
                    s.truncated |= data.len() > room;
                    if f.flags & END_STREAM != 0 {
                        self.complete(i);
                    }
                }
            }
            HEADERS => {
                let mut fragment = unpad(&f.payload, f.flags)?;
                if f.flags & PRIORITY != 0 {
                    fragment = fragment.get(5..).ok_or("HEADERS frame too short")?;
                }
                let end_stream = f.flags & END_STREAM != 0;
                self.block = Some((f.stream, end_stream, fragment.to_vec()));
                if f.flags & END_HEADERS != 0 {
                    self.finish_block()?;
                }
            }
            CONTINUATION => {
                let Some((_, _, fragments)) = self.block.as_mut() else {
                    return Err("the server sent CONTINUATION outside a header block".into());
                };
                fragments.extend_from_slice(&f.payload);
                if f.flags & END_HEADERS != 0 {
                    self.finish_block()?;
                }
            }
            // PRIORITY and unknown frame types carry nothing a response needs.
            _ => {}
        }
        Ok(())
    }

    fn apply_settings(&mut self, payload: &[u8]) -> Result<(), String> {
        if payload.len() % 6 != 0 {
            return Err("the server sent a malformed SETTINGS frame".into());
        }
        for s in payload.chunks(6) {
            let id = u16::from_be_bytes([s[0], s[1]]);
            let value = be32(&s[2..])?;
            match id {
                0x3 => self.max_streams = Some(value),
                0x4 => self.initial_window = i64::from(value),
                0x5 => self.max_frame = (value as usize).clamp(MAX_FRAME, 16_777_215),
                _ => {}
            }
        }
        Ok(())
    }

    /// Decodes a complete header block (every block must be decoded, in order, to keep the
    /// HPACK table in step) and applies it to its stream.
    fn finish_block(&mut self) -> Result<(), String> {
        let Some((id, end_stream, block)) = self.block.take() else {
            return Ok(());
        };
        let fields = self
            .decoder
            .decode(&block)
            .map_err(|e| format!("the server's HPACK header block could not be decoded: {e:?}"))?;
        let Some(i) = self.index(id) else {
            return Ok(());
        };
        let mut status = None;
        let mut headers = Vec::with_capacity(fields.len());
        for (name, value) in fields {
            if name == b":status" {
                status = String::from_utf8_lossy(&value).parse::<u16>().ok();
            } else if !name.starts_with(b":") {
                headers.push(Header::new(String::from_utf8_lossy(&name), value));
            }
        }
        let s = &mut self.streams[i];
        match status {
            // Interim responses (103 Early Hints) precede the real one.
            Some(code) if (100..200).contains(&code) && !end_stream => {}
            Some(code) if s.status.is_none() => {
                s.status = Some(code);
                s.headers = headers;
            }
            None if s.status.is_none() => {
                self.end(i, Err("the response has no :status".into()));
                return Ok(());
            }
            // Trailers: nothing in them is judged.
            _ => {}
        }
        if end_stream {
            self.complete(i);
        }
        Ok(())
    }

    fn complete(&mut self, i: usize) {
        let s = &mut self.streams[i];
        let result = match s.status {
            Some(status) => Ok(ReceivedResponse {
                status,
                version: "HTTP/2".to_string(),
                headers: std::mem::take(&mut s.headers),
                body: std::mem::take(&mut s.body),
                body_truncated: s.truncated,
                problem: None,
            }),
            None => Err("the stream ended before any response headers".to_string()),
        };
        self.end(i, result);
    }

    fn end(&mut self, i: usize, result: Result<ReceivedResponse, String>) {
        let s = &mut self.streams[i];
        if s.result.is_none() {
            s.finished = Some(Instant::now());
            s.result = Some(result);
        }
    }
}

fn be32(b: &[u8]) -> Result<u32, String> {
    b.get(..4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| "the server sent a frame too short for its type".to_string())
}

/// The payload without its padding, for DATA and HEADERS frames with PADDED set.
fn unpad(payload: &[u8], flags: u8) -> Result<&[u8], String> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let pad = *payload.first().ok_or("padded frame without a pad length")? as usize;
    payload
        .len()
        .checked_sub(1 + pad)
        .map(|end| &payload[1..1 + end])
        .ok_or_else(|| "the server's frame padding exceeds the frame".to_string())
}

/// The RFC 9113 §7 name of an error code.
fn error_name(code: u32) -> String {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    NAMES
        .get(code as usize)
        .map_or_else(|| format!("error code {code:#x}"), |n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpack_integers_follow_rfc7541_c1() {
        let mut out = Vec::new();
        hpack_int(&mut out, 0, 5, 10);
        assert_eq!(out, [10]);
        out.clear();
        hpack_int(&mut out, 0, 5, 1337);
        assert_eq!(out, [31, 154, 10]);
    }

    #[test]
    fn request_blocks_decode_back_to_what_was_recorded() {
        let url = url::Url::parse("http://example.test:8080/p?q=1").unwrap();
        let req = raw::prepare(
            &url,
            "POST",
            vec![
                Header::new("Idempotency-Key", "\"k\""),
                Header::new("Connection", "close"),
            ],
            b"{}".to_vec(),
        );
        let enc = encode_request(&req, &url).unwrap();
        let fields = loona_hpack::Decoder::new().decode(&enc.block).unwrap();
        let names: Vec<String> = fields
            .iter()
            .map(|(n, _)| String::from_utf8_lossy(n).into_owned())
            .collect();
        assert_eq!(
            names,
            [
                ":method",
                ":scheme",
                ":authority",
                ":path",
                "idempotency-key",
                "content-length"
            ]
        );
        assert_eq!(fields[2].1, b"example.test:8080");
        assert_eq!(fields[3].1, b"/p?q=1");
        let recorded: Vec<&str> = enc.sent.headers.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(recorded, ["host", "idempotency-key", "content-length"]);
    }

    #[test]
    fn padding_is_stripped_and_checked() {
        assert_eq!(unpad(&[2, b'a', 0, 0], PADDED).unwrap(), b"a");
        assert!(unpad(&[5, b'a'], PADDED).is_err());
        assert_eq!(error_name(7), "REFUSED_STREAM");
        assert_eq!(error_name(99), "error code 0x63");
    }
}
