//! An HTTP/1.1 client that writes exactly the bytes it is given, over TCP or TLS.
//!
//! Ordinary clients (reqwest, hyper) validate and normalise headers: they refuse control bytes,
//! merge or reorder fields, and pick the framing themselves. The key-syntax probes need the
//! opposite — a malformed `Idempotency-Key` (control byte, non-ASCII, two header lines) must reach
//! the server as written — and the evidence must show what was really sent. So this client:
//! [`prepare`] builds the [`SentRequest`] once (the record *is* the request), [`to_wire`] turns it
//! into bytes without judging them, and [`send_one`] / [`send_then_drop`] put those bytes on a
//! fresh connection. Each probe exchange gets its own connection, so one probe's broken request
//! can never poison the next; only `stress`, whose requests are all well-formed, sends on kept-alive
//! connections ([`exchange_on`], through [`super::pool`]), reused only after a cleanly framed
//! answer.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::FutureExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::exchange::{Header, ReceivedResponse, SentRequest};
use super::{net, tls};

/// The longest response head accepted: a server that sends more is broken or hostile.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The most header fields kept from one response head.
const MAX_HEADERS: usize = 128;
/// The longest chunk-size or trailer line accepted in a chunked body.
const MAX_LINE_BYTES: usize = 8 * 1024;
/// The room made in the read buffer before each read (and its first size): a small answer fits
/// in one allocation, and a large body grows the buffer by doubling.
const READ_ROOM: usize = 4 * 1024;

/// The error text of a [`send_then_drop`] exchange: it never reads, on purpose.
pub const DROPPED: &str = "dropped by idem-check before reading — lost-response probe";

/// Builds the request record that will also be the wire image.
///
/// Adds `Host` (first) and `Content-Length` (last; when the body is non-empty or the method is
/// POST, PUT or PATCH) unless the caller already supplied them — a probe that wants a missing or
/// doubled field passes its own. Everything else keeps the caller's order and bytes, so what the
/// report records is exactly what [`to_wire`] writes.
pub fn prepare(url: &url::Url, method: &str, headers: Vec<Header>, body: Vec<u8>) -> SentRequest {
    let has = |name: &str| headers.iter().any(|h| h.name.eq_ignore_ascii_case(name));
    let mut out = Vec::with_capacity(headers.len() + 2);
    if !has("host") {
        out.push(Header::new("Host", host_value(url)));
    }
    let needs_length = !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH");
    let add_length = needs_length && !has("content-length") && !has("transfer-encoding");
    out.extend(headers);
    if add_length {
        out.push(Header::new("Content-Length", body.len().to_string()));
    }
    SentRequest {
        method: method.to_string(),
        url: url.to_string(),
        headers: out,
        body,
    }
}

/// `host[:port]`, the port only when it is not the scheme's default (RFC 9110 §7.2).
fn host_value(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// The exact bytes of `req`: request line with path and query, each header line as
/// `name: value` with the value's raw bytes, CRLFs, then the body. Nothing is validated or
/// escaped, on purpose; only an unusable URL or an empty method is an error.
pub fn to_wire(req: &SentRequest) -> anyhow::Result<Vec<u8>> {
    let url = parse_url(req).map_err(anyhow::Error::msg)?;
    if req.method.is_empty() {
        anyhow::bail!("the request has no method");
    }
    let mut target = url.path().to_string();
    if let Some(q) = url.query() {
        target.push('?');
        target.push_str(q);
    }
    let mut wire = Vec::with_capacity(256 + req.body.len());
    wire.extend_from_slice(req.method.as_bytes());
    wire.push(b' ');
    wire.extend_from_slice(target.as_bytes());
    wire.extend_from_slice(b" HTTP/1.1\r\n");
    for h in &req.headers {
        wire.extend_from_slice(h.name.as_bytes());
        wire.extend_from_slice(b": ");
        wire.extend_from_slice(&h.value);
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b"\r\n");
    wire.extend_from_slice(&req.body);
    Ok(wire)
}

fn parse_url(req: &SentRequest) -> Result<url::Url, String> {
    let url = url::Url::parse(&req.url).map_err(|e| format!("invalid URL {:?}: {e}", req.url))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(format!("unsupported URL scheme {other:?} in {}", req.url)),
    }
}

/// The outcome of one raw exchange, with the instants a timeline needs.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// When the first byte of the request was written (when the attempt began, if it failed
    /// before writing anything).
    pub started: Instant,
    /// For bursts: when this request's final byte was written. `None` outside a burst.
    pub released: Option<Instant>,
    /// When the response was complete or the exchange failed.
    pub finished: Instant,
    /// The response, or the transport failure as one line of text for the report.
    pub result: Result<ReceivedResponse, String>,
}

/// Connects, writes `req` exactly, and reads one response (Content-Length, chunked or
/// close-delimited framing; interim 1xx responses skipped; body cut at `max_body` with
/// `body_truncated` set). `timeout` bounds the whole exchange; the error names the phase it ran
/// out in, because "timed out" alone does not tell a user whether the server accepted the request.
pub async fn send_one(req: &SentRequest, timeout: Duration, max_body: usize) -> RawResponse {
    let attempt = Instant::now();
    let deadline = attempt + timeout;
    let mut started = attempt;
    let result = async {
        let mut stream = connect_and_write(req, deadline, timeout, &mut started).await?;
        read_response(&mut stream, &req.method, deadline, timeout, max_body).await
    }
    .await;
    RawResponse {
        started,
        released: None,
        finished: Instant::now(),
        result,
    }
}

/// Connects and writes `req` whole; `started` becomes the moment the connection was up (what an
/// exchange's duration counts from).
async fn connect_and_write(
    req: &SentRequest,
    deadline: Instant,
    timeout: Duration,
    started: &mut Instant,
) -> Result<Stream, String> {
    let url = parse_url(req)?;
    let wire = to_wire(req).map_err(|e| format!("{e:#}"))?;
    let mut stream = connect(&url, deadline, timeout).await?;
    *started = Instant::now();
    write_request(&mut stream, &wire, deadline, timeout).await?;
    Ok(stream)
}

/// Simulates a client whose response was lost: writes the whole request, waits
/// `wait_before_drop`, then closes the connection without reading a byte. The result is always
/// an error — [`DROPPED`], or the failure that came first — because idem-check never saw an
/// answer. `timeout` bounds connecting and writing.
pub async fn send_then_drop(
    req: &SentRequest,
    wait_before_drop: Duration,
    timeout: Duration,
) -> RawResponse {
    let attempt = Instant::now();
    let deadline = attempt + timeout;
    let mut started = attempt;
    let result: Result<ReceivedResponse, String> = async {
        let stream = connect_and_write(req, deadline, timeout, &mut started).await?;
        tokio::time::sleep(wait_before_drop).await;
        drop(stream);
        Err(DROPPED.to_string())
    }
    .await;
    RawResponse {
        started,
        released: None,
        finished: Instant::now(),
        result,
    }
}

/// A keep-alive connection used for one request and then left idle. Whether the server closes
/// it later tells whether the server went down in between: `restart-persistence` opens one
/// before the restart hook and checks it afterwards, so a hook that restarts nothing is seen.
pub struct IdleConnection {
    stream: Stream,
}

impl IdleConnection {
    /// Connects to `url`'s origin, sends `GET <path>` with `headers` (tenant A's credentials)
    /// and reads the answer, whatever its status. `Err` when no keep-alive connection could be
    /// left open (the server closes after each answer, or does not answer).
    pub async fn open(
        url: &url::Url,
        headers: &[Header],
        timeout: Duration,
    ) -> Result<Self, String> {
        let deadline = Instant::now() + timeout;
        let mut stream = connect(url, deadline, timeout).await?;
        let mut headers: Vec<Header> = headers
            .iter()
            .filter(|h| !h.name.eq_ignore_ascii_case("content-type"))
            .cloned()
            .collect();
        headers.push(Header::new("Connection", "keep-alive"));
        let req = prepare(url, "GET", headers, Vec::new());
        let wire = to_wire(&req).map_err(|e| format!("{e:#}"))?;
        write_request(&mut stream, &wire, deadline, timeout).await?;
        let answer = read_response(&mut stream, "GET", deadline, timeout, 64 * 1024).await?;
        let closes = answer
            .header("connection")
            .is_some_and(|v| v.to_ascii_lowercase().contains("close"));
        let mut idle = IdleConnection { stream };
        if closes || idle.closed(Duration::from_millis(50)).await {
            return Err(format!(
                "the server closed the connection after answering GET {} ({})",
                url.path(),
                answer.status
            ));
        }
        Ok(idle)
    }

    /// Whether the server has closed the connection (end of stream, a reset, or unsolicited
    /// bytes such as a TLS close_notify), waiting at most `wait` for a sign.
    pub async fn closed(&mut self, wait: Duration) -> bool {
        let mut buf = [0u8; 512];
        match tokio::time::timeout(wait, self.stream.read(&mut buf)).await {
            Err(_) => false,
            Ok(Ok(_)) | Ok(Err(_)) => true,
        }
    }
}

/// A connection to the target, plain or TLS; the burst engine reaches through it to the TCP
/// socket to release pre-encrypted final bytes.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// The TCP socket under the connection.
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref().0,
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// "10 s", "250 ms": how a timeout reads in a report.
pub(crate) fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// Runs `fut` until `deadline`; on expiry the error says how long we waited and for what.
pub(crate) async fn within<T>(
    deadline: Instant,
    timeout: Duration,
    phase: &str,
    fut: impl Future<Output = Result<T, String>>,
) -> Result<T, String> {
    match tokio::time::timeout_at(deadline.into(), fut).await {
        Ok(r) => r,
        Err(_) => Err(format!("timed out after {} {phase}", human(timeout))),
    }
}

/// Opens a TCP connection (TCP_NODELAY, so a held-back final byte leaves the moment it is
/// written) and, for `https`, completes the TLS handshake.
pub(crate) async fn connect(
    url: &url::Url,
    deadline: Instant,
    timeout: Duration,
) -> Result<Stream, String> {
    let (tcp, host) = connect_tcp(url, deadline, timeout).await?;
    if url.scheme() == "https" {
        let tls = within(
            deadline,
            timeout,
            "in the TLS handshake",
            tls::handshake(tcp, host),
        )
        .await?;
        Ok(Stream::Tls(Box::new(tls)))
    } else {
        Ok(Stream::Plain(tcp))
    }
}

/// The TCP half of [`connect`]: the connected socket (TCP_NODELAY set) and the URL's host, for
/// callers that run their own TLS handshake. Through a proxy (see [`super::net`]) the socket
/// leads to the proxy, with a CONNECT tunnel to the target already open on it.
pub(crate) async fn connect_tcp(
    url: &url::Url,
    deadline: Instant,
    timeout: Duration,
) -> Result<(TcpStream, &str), String> {
    let host = url
        .host_str()
        .ok_or_else(|| format!("the URL {url} has no host"))?;
    let port = url
        .port_or_known_default()
        .ok_or_else(|| format!("the URL {url} has no port"))?;
    let authority = format!("{host}:{port}");
    let proxy = net::proxy_for(url);
    let phase = match &proxy {
        Some(p) => format!(
            "connecting to {authority} through the proxy {}",
            net::shown(p)
        ),
        None => format!("connecting to {authority}"),
    };
    let tcp = within(deadline, timeout, &phase, async {
        match &proxy {
            None => net::dial(host, port).await,
            Some(p) => {
                let (Some(proxy_host), Some(proxy_port)) =
                    (p.host_str(), p.port_or_known_default())
                else {
                    return Err(format!("the proxy URL {} has no host", net::shown(p)));
                };
                let mut tcp = net::dial(proxy_host, proxy_port)
                    .await
                    .map_err(|e| format!("{e} (the proxy)"))?;
                net::tunnel(&mut tcp, host, port, p).await?;
                Ok(tcp)
            }
        }
    })
    .await?;
    tcp.set_nodelay(true)
        .map_err(|e| format!("could not set TCP_NODELAY on {authority}: {e}"))?;
    Ok((tcp, host))
}

pub(crate) async fn write_request(
    stream: &mut Stream,
    bytes: &[u8],
    deadline: Instant,
    timeout: Duration,
) -> Result<(), String> {
    within(
        deadline,
        timeout,
        "writing the request",
        async {
            stream.write_all(bytes).await?;
            stream.flush().await
        }
        .map(|r| r.map_err(|e| format!("writing the request failed: {e}"))),
    )
    .await
}

/// Reads one response from `stream`. `method` matters because a response to HEAD has no body.
pub(crate) async fn read_response(
    stream: &mut Stream,
    method: &str,
    deadline: Instant,
    timeout: Duration,
    max_body: usize,
) -> Result<ReceivedResponse, String> {
    read_keeping(stream, method, deadline, timeout, max_body)
        .await
        .map(|(response, _)| response)
}

/// Like [`read_response`], and whether the connection can carry another request: the response
/// was HTTP/1.1 without `Connection: close`, its body was framed (length or chunks, not "until
/// the connection closes") and read whole, and nothing came after it.
pub(crate) async fn read_keeping(
    stream: &mut Stream,
    method: &str,
    deadline: Instant,
    timeout: Duration,
    max_body: usize,
) -> Result<(ReceivedResponse, bool), String> {
    let mut input = Incoming {
        stream,
        buf: Vec::with_capacity(READ_ROOM),
    };
    let head = within(
        deadline,
        timeout,
        "waiting for the response head",
        input.read_head(),
    )
    .await?;
    let (body, body_truncated, framed) = within(
        deadline,
        timeout,
        "reading the response body",
        input.read_body(&head, method, max_body),
    )
    .await?;
    let closes = head.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("connection")
            && h.value_str().to_ascii_lowercase().contains("close")
    });
    let reusable = framed
        && !body_truncated
        && input.buf.is_empty()
        && !closes
        && head.version == "HTTP/1.1"
        && head.status != 101;
    let response = ReceivedResponse {
        status: head.status,
        version: head.version,
        headers: head.headers,
        body,
        body_truncated,
        problem: head.problem,
    };
    Ok((response, reusable))
}

/// Writes `req` whole on an open connection and reads its response, by `deadline`; the flag
/// says whether the connection can carry another request (see [`read_keeping`]). `started` is
/// when the write began.
pub(crate) async fn exchange_on(
    stream: &mut Stream,
    req: &SentRequest,
    deadline: Instant,
    timeout: Duration,
    max_body: usize,
) -> (RawResponse, bool) {
    let started = Instant::now();
    let result = async {
        let wire = to_wire(req).map_err(|e| format!("{e:#}"))?;
        write_request(stream, &wire, deadline, timeout).await?;
        read_keeping(stream, &req.method, deadline, timeout, max_body).await
    }
    .await;
    let (result, reusable) = match result {
        Ok((response, reusable)) => (Ok(response), reusable),
        Err(e) => (Err(e), false),
    };
    let response = RawResponse {
        started,
        released: None,
        finished: Instant::now(),
        result,
    };
    (response, reusable)
}

struct Head {
    status: u16,
    version: String,
    headers: Vec<Header>,
    /// Why the head had to be read leniently.
    problem: Option<String>,
}

/// Reads a complete response head (`head` ends with the blank line) that a strict parser
/// refused: the status line must be sound, and each header line is kept as `name: value` bytes,
/// whatever they hold — a refusal that echoes a control byte in a header is still a refusal,
/// and its status must not be lost. `None` when even the status line is unusable.
fn lenient_head(head: &[u8], strict_error: &str) -> Option<Head> {
    let mut lines = head
        .split(|b| *b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let status_line = std::str::from_utf8(lines.next()?).ok()?;
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next()?;
    let minor = version.strip_prefix("HTTP/1.")?;
    if minor.len() != 1 || !minor.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let code = parts.next()?;
    let status: u16 = code
        .parse()
        .ok()
        .filter(|s| (100..=999).contains(s) && code.len() == 3)?;
    let mut headers = Vec::new();
    let mut dropped = 0;
    for line in lines.take_while(|l| !l.is_empty()).take(MAX_HEADERS) {
        match line.iter().position(|b| *b == b':') {
            Some(colon) => {
                let name = String::from_utf8_lossy(&line[..colon]).trim().to_string();
                let value = line[colon + 1..].trim_ascii().to_vec();
                headers.push(Header::new(name, value));
            }
            None => dropped += 1,
        }
    }
    let mut problem = format!("{strict_error}; read leniently, the status line and fields kept");
    if dropped > 0 {
        problem.push_str(&format!(
            " ({dropped} line{} without a colon dropped)",
            if dropped == 1 { "" } else { "s" }
        ));
    }
    Some(Head {
        status,
        version: version.to_string(),
        headers,
        problem: Some(problem),
    })
}

/// Bytes read from the connection but not consumed yet.
struct Incoming<'a> {
    stream: &'a mut Stream,
    buf: Vec<u8>,
}

impl Incoming<'_> {
    /// Reads more bytes into the buffer; `Ok(0)` at end of stream. The bytes go straight into
    /// the buffer's spare room: a chunk array here would live in every read's future, and the
    /// runtime copies futures whole as they are wrapped (timeouts, `join_all`).
    async fn fill(&mut self) -> Result<usize, String> {
        self.buf.reserve(READ_ROOM);
        self.stream
            .read_buf(&mut self.buf)
            .await
            .map_err(|e| format!("reading the response failed: {e}"))
    }

    async fn read_head(&mut self) -> Result<Head, String> {
        loop {
            let parsed = {
                let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut resp = httparse::Response::new(&mut slots);
                match resp.parse(&self.buf) {
                    Ok(httparse::Status::Complete(len)) => Some((
                        len,
                        Head {
                            status: resp.code.unwrap_or_default(),
                            version: format!("HTTP/1.{}", resp.version.unwrap_or(1)),
                            headers: resp
                                .headers
                                .iter()
                                .map(|h| Header::new(h.name, h.value))
                                .collect(),
                            problem: None,
                        },
                    )),
                    Ok(httparse::Status::Partial) => None,
                    Err(e) => match self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        // The head is complete but strict parsing refused it: keep what can be
                        // kept. Without a usable status line there is no response at all.
                        Some(end) => {
                            let strict = format!("malformed response head: {e}");
                            let head = lenient_head(&self.buf[..end + 2], &strict).ok_or(strict)?;
                            Some((end + 4, head))
                        }
                        // Wait for the rest of the head before judging it.
                        None => None,
                    },
                }
            };
            match parsed {
                // Interim responses (100 Continue, 103 Early Hints) precede the real one.
                Some((len, head)) if (100..200).contains(&head.status) && head.status != 101 => {
                    self.buf.drain(..len);
                }
                Some((len, head)) => {
                    self.buf.drain(..len);
                    return Ok(head);
                }
                None => {
                    if self.buf.len() > MAX_HEAD_BYTES {
                        return Err(format!(
                            "response head larger than {} KiB",
                            MAX_HEAD_BYTES / 1024
                        ));
                    }
                    if self.fill().await? == 0 {
                        return Err(if self.buf.is_empty() {
                            "connection closed before any response".to_string()
                        } else {
                            "connection closed in the middle of the response head".to_string()
                        });
                    }
                }
            }
        }
    }

    /// The body, whether it was cut at `max_body`, and whether it was framed (no body, a
    /// length or chunks) rather than delimited by the connection's end.
    async fn read_body(
        &mut self,
        head: &Head,
        method: &str,
        max_body: usize,
    ) -> Result<(Vec<u8>, bool, bool), String> {
        if method.eq_ignore_ascii_case("HEAD")
            || (100..200).contains(&head.status)
            || head.status == 204
            || head.status == 304
        {
            return Ok((Vec::new(), false, true));
        }
        let values = |name: &str| {
            head.headers
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| h.value_str())
                .collect::<Vec<_>>()
        };
        let chunked = values("transfer-encoding")
            .iter()
            .flat_map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
            .next_back()
            .is_some_and(|last| last == "chunked");
        if chunked {
            let (body, truncated) = self.read_chunked(max_body).await?;
            return Ok((body, truncated, true));
        }
        let lengths = values("content-length");
        if let Some(first) = lengths.first() {
            let len: usize = first
                .trim()
                .parse()
                .map_err(|_| format!("invalid Content-Length {first:?}"))?;
            if lengths.iter().any(|l| l.trim() != first.trim()) {
                return Err(format!("conflicting Content-Length values {lengths:?}"));
            }
            let (body, truncated) = self.read_sized(len, max_body).await?;
            return Ok((body, truncated, true));
        }
        let (body, truncated) = self.read_to_close(max_body).await?;
        Ok((body, truncated, false))
    }

    async fn read_sized(&mut self, len: usize, max_body: usize) -> Result<(Vec<u8>, bool), String> {
        let want = len.min(max_body);
        while self.buf.len() < want {
            if self.fill().await? == 0 {
                return Err(format!(
                    "connection closed after {} of {len} body bytes",
                    self.buf.len()
                ));
            }
        }
        let body: Vec<u8> = self.buf.drain(..want).collect();
        Ok((body, len > max_body))
    }

    async fn read_to_close(&mut self, max_body: usize) -> Result<(Vec<u8>, bool), String> {
        while self.buf.len() <= max_body {
            if self.fill().await? == 0 {
                return Ok((std::mem::take(&mut self.buf), false));
            }
        }
        self.buf.truncate(max_body);
        Ok((std::mem::take(&mut self.buf), true))
    }

    async fn read_line(&mut self) -> Result<Vec<u8>, String> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[..end].to_vec();
                self.buf.drain(..end + 2);
                return Ok(line);
            }
            if self.buf.len() > MAX_LINE_BYTES {
                return Err("chunked body: line longer than 8 KiB".to_string());
            }
            if self.fill().await? == 0 {
                return Err("connection closed in the middle of a chunked body".to_string());
            }
        }
    }

    async fn read_chunked(&mut self, max_body: usize) -> Result<(Vec<u8>, bool), String> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line().await?;
            let text = String::from_utf8_lossy(&line);
            let size_text = text.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| format!("chunked body: invalid chunk size {size_text:?}"))?;
            if size == 0 {
                // Trailer fields, then the empty line.
                while !self.read_line().await?.is_empty() {}
                return Ok((body, false));
            }
            let room = max_body - body.len();
            let take = size.min(room);
            while self.buf.len() < take {
                if self.fill().await? == 0 {
                    return Err("connection closed in the middle of a chunk".to_string());
                }
            }
            body.extend(self.buf.drain(..take));
            if size > room {
                return Ok((body, true));
            }
            while self.buf.len() < 2 {
                if self.fill().await? == 0 {
                    return Err("connection closed in the middle of a chunk".to_string());
                }
            }
            if &self.buf[..2] != b"\r\n" {
                return Err("chunked body: chunk not followed by CRLF".to_string());
            }
            self.buf.drain(..2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> url::Url {
        url::Url::parse(s).unwrap()
    }

    #[test]
    fn prepare_adds_host_first_and_length_last() {
        let req = prepare(
            &url("http://example.test:8080/a?b=c"),
            "POST",
            vec![Header::new("X-One", "1"), Header::new("X-One", "2")],
            Vec::new(),
        );
        let names: Vec<_> = req.headers.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["Host", "X-One", "X-One", "Content-Length"]);
        assert_eq!(req.headers[0].value, b"example.test:8080");
        assert_eq!(req.headers[3].value, b"0");
    }

    #[test]
    fn prepare_keeps_caller_host_and_length_and_skips_length_for_bodyless_get() {
        let req = prepare(
            &url("https://example.test/"),
            "POST",
            vec![
                Header::new("content-length", "99"),
                Header::new("HOST", "other"),
            ],
            b"x".to_vec(),
        );
        assert_eq!(req.headers.len(), 2, "nothing added: {:?}", req.headers);
        let get = prepare(&url("https://example.test/"), "GET", vec![], vec![]);
        assert_eq!(get.headers, vec![Header::new("Host", "example.test")]);
    }

    #[test]
    fn to_wire_is_the_record_byte_for_byte() {
        let req = prepare(
            &url("http://h/p?q=1"),
            "PUT",
            vec![Header::new("K", vec![0u8, 0xc3, 0x28, b'\r'])],
            b"body".to_vec(),
        );
        let wire = to_wire(&req).unwrap();
        assert_eq!(
            wire,
            b"PUT /p?q=1 HTTP/1.1\r\nHost: h\r\nK: \x00\xc3\x28\r\r\nContent-Length: 4\r\n\r\nbody"
        );
    }

    #[test]
    fn to_wire_rejects_unusable_requests() {
        let mut req = prepare(&url("http://h/"), "GET", vec![], vec![]);
        req.url = "ftp://h/".into();
        assert!(to_wire(&req).is_err());
        req.url = "not a url".into();
        assert!(to_wire(&req).is_err());
        req.url = "http://h/".into();
        req.method.clear();
        assert!(to_wire(&req).is_err());
    }

    #[test]
    fn a_bad_header_keeps_the_status_line_and_the_fields() {
        let head =
            b"HTTP/1.1 400 Bad Request\r\nX-Echo-Key: \"k\x01\"\r\nContent-Length: 2\r\n\r\n";
        let h = lenient_head(head, "malformed response head: invalid header value").unwrap();
        assert_eq!(h.status, 400);
        assert_eq!(h.headers[0].value, b"\"k\x01\"");
        assert_eq!(h.headers[1], Header::new("Content-Length", "2"));
        assert!(h.problem.unwrap().contains("invalid header value"));
        assert!(lenient_head(b"HTTP/1.1 4x0 Nope\r\n\r\n", "e").is_none());
        assert!(lenient_head(b"garbage\r\n\r\n", "e").is_none());
    }

    #[test]
    fn timeouts_read_like_a_person_wrote_them() {
        assert_eq!(human(Duration::from_secs(10)), "10 s");
        assert_eq!(human(Duration::from_millis(250)), "250 ms");
        assert_eq!(human(Duration::from_millis(1500)), "1500 ms");
    }
}
