//! Reading one HTTP/1.1 response off a connection: Content-Length, chunked or close-delimited
//! framing, interim 1xx responses skipped, the body cut at a limit, a head no strict parser
//! accepts read leniently, and whether the connection can carry another request.

use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::http::connection::within;
use crate::http::exchange::{Header, ReceivedResponse};
use crate::http::{HttpError, Phase};

/// The longest response head accepted: a server that sends more is broken or hostile.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The most header fields kept from one response head.
const MAX_HEADERS: usize = 128;
/// The longest chunk-size or trailer line accepted in a chunked body.
const MAX_LINE_BYTES: usize = 8 * 1024;
/// The room made in the read buffer before each read (and its first size): a small answer fits
/// in one allocation, and a large body grows the buffer by doubling.
const READ_ROOM: usize = 4 * 1024;

/// Reads one response from `stream`. `method` matters because a response to HEAD has no body.
pub(crate) async fn read_response(
    stream: &mut (impl AsyncRead + Unpin),
    method: &str,
    deadline: Instant,
    timeout: Duration,
    max_body: usize,
) -> Result<ReceivedResponse, HttpError> {
    read_keeping(stream, method, deadline, timeout, max_body)
        .await
        .map(|(response, _)| response)
}

/// Like [`read_response`], and whether the connection can carry another request: the response
/// was HTTP/1.1 without `Connection: close`, its body was framed (length or chunks, not "until
/// the connection closes") and read whole, and nothing came after it. A connection that ended
/// (end of stream, a reset) before any byte of a response arrived is
/// [`HttpError::ClosedBeforeAnyByte`]; a timeout never is, the server may still be working on
/// the request.
pub(crate) async fn read_keeping<S: AsyncRead + Unpin>(
    stream: &mut S,
    method: &str,
    deadline: Instant,
    timeout: Duration,
    max_body: usize,
) -> Result<(ReceivedResponse, bool), HttpError> {
    let mut input = Incoming {
        stream,
        buf: Vec::with_capacity(READ_ROOM),
        received: false,
    };
    let head = within(deadline, timeout, Phase::FirstByte, input.read_head()).await?;
    let (body, body_truncated, framed) = within(
        deadline,
        timeout,
        Phase::Body,
        input.read_body(&head, method, max_body),
    )
    .await?;
    let reusable = framed
        && !body_truncated
        && input.buf.is_empty()
        && !asks_to_close(&head.headers)
        && head.version == http::Version::HTTP_11
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

/// [`read_keeping`] on any byte source: public only so that the fuzz
/// target `h1_response` (fuzz/) can feed the reader arbitrary bytes in arbitrary splits without
/// a socket. The engines read their connections through [`read_keeping`] and [`read_response`].
pub async fn read_response_from(
    source: &mut (impl AsyncRead + Unpin),
    method: &str,
    timeout: Duration,
    max_body: usize,
) -> Result<(ReceivedResponse, bool), HttpError> {
    read_keeping(source, method, Instant::now() + timeout, timeout, max_body).await
}

/// Whether a response's fields say the server closes the connection after it.
pub(crate) fn asks_to_close(headers: &[Header]) -> bool {
    headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("connection")
            && h.value_str().to_ascii_lowercase().contains("close")
    })
}

struct Head {
    status: u16,
    version: http::Version,
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
    let version = match version.strip_prefix("HTTP/1.")? {
        "0" => http::Version::HTTP_10,
        minor if minor.len() == 1 && minor.bytes().all(|b| b.is_ascii_digit()) => {
            http::Version::HTTP_11
        }
        _ => return None,
    };
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
        version,
        headers,
        problem: Some(problem),
    })
}

/// Bytes read from the connection but not consumed yet.
struct Incoming<'a, S> {
    stream: &'a mut S,
    buf: Vec<u8>,
    /// Whether any byte arrived.
    received: bool,
}

impl<S: AsyncRead + Unpin> Incoming<'_, S> {
    /// Reads more bytes into the buffer; `Ok(0)` at end of stream. The bytes go straight into
    /// the buffer's spare room: a chunk array here would live in every read's future, and the
    /// runtime copies futures whole as they are wrapped (timeouts, `join_all`).
    /// A read error (a reset) is a close: before any byte arrived, or in the middle of the
    /// response.
    async fn fill(&mut self) -> Result<usize, HttpError> {
        self.buf.reserve(READ_ROOM);
        match self.stream.read_buf(&mut self.buf).await {
            Ok(n) => {
                self.received |= n > 0;
                Ok(n)
            }
            Err(e) => Err(self.closed(format!("reading the response failed: {e}"))),
        }
    }

    /// The connection's end, told `why`: before any byte of a response, or in the middle of
    /// one.
    fn closed(&self, why: String) -> HttpError {
        match self.received {
            false => HttpError::ClosedBeforeAnyByte(why),
            true => HttpError::ClosedMidResponse(why),
        }
    }

    /// Reads until the buffer holds at least `want` bytes; at end of stream the error is
    /// `closed(bytes buffered)`.
    async fn fill_to(
        &mut self,
        want: usize,
        closed: impl Fn(usize) -> String,
    ) -> Result<(), HttpError> {
        while self.buf.len() < want {
            if self.fill().await? == 0 {
                return Err(HttpError::ClosedMidResponse(closed(self.buf.len())));
            }
        }
        Ok(())
    }

    async fn read_head(&mut self) -> Result<Head, HttpError> {
        loop {
            let parsed = {
                let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut resp = httparse::Response::new(&mut slots);
                match resp.parse(&self.buf) {
                    Ok(httparse::Status::Complete(len)) => Some((
                        len,
                        Head {
                            status: resp.code.unwrap_or_default(),
                            version: match resp.version {
                                Some(0) => http::Version::HTTP_10,
                                _ => http::Version::HTTP_11,
                            },
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
                            let head = lenient_head(&self.buf[..end + 2], &strict)
                                .ok_or(HttpError::MalformedHttp1(strict))?;
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
                        return Err(HttpError::MalformedHttp1(format!(
                            "response head larger than {} KiB",
                            MAX_HEAD_BYTES / 1024
                        )));
                    }
                    if self.fill().await? == 0 {
                        return Err(self.closed(if self.buf.is_empty() {
                            "connection closed before any response".to_string()
                        } else {
                            "connection closed in the middle of the response head".to_string()
                        }));
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
    ) -> Result<(Vec<u8>, bool, bool), HttpError> {
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
            let len: usize = first.trim().parse().map_err(|_| {
                HttpError::MalformedHttp1(format!("invalid Content-Length {first:?}"))
            })?;
            if lengths.iter().any(|l| l.trim() != first.trim()) {
                return Err(HttpError::MalformedHttp1(format!(
                    "conflicting Content-Length values {lengths:?}"
                )));
            }
            let (body, truncated) = self.read_sized(len, max_body).await?;
            return Ok((body, truncated, true));
        }
        let (body, truncated) = self.read_to_close(max_body).await?;
        Ok((body, truncated, false))
    }

    async fn read_sized(
        &mut self,
        len: usize,
        max_body: usize,
    ) -> Result<(Vec<u8>, bool), HttpError> {
        let want = len.min(max_body);
        self.fill_to(want, |got| {
            format!("connection closed after {got} of {len} body bytes")
        })
        .await?;
        let body: Vec<u8> = self.buf.drain(..want).collect();
        Ok((body, len > max_body))
    }

    async fn read_to_close(&mut self, max_body: usize) -> Result<(Vec<u8>, bool), HttpError> {
        while self.buf.len() <= max_body {
            if self.fill().await? == 0 {
                return Ok((std::mem::take(&mut self.buf), false));
            }
        }
        self.buf.truncate(max_body);
        Ok((std::mem::take(&mut self.buf), true))
    }

    async fn read_line(&mut self) -> Result<Vec<u8>, HttpError> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[..end].to_vec();
                self.buf.drain(..end + 2);
                return Ok(line);
            }
            if self.buf.len() > MAX_LINE_BYTES {
                return Err(HttpError::MalformedHttp1(
                    "chunked body: line longer than 8 KiB".into(),
                ));
            }
            if self.fill().await? == 0 {
                return Err(HttpError::ClosedMidResponse(
                    "connection closed in the middle of a chunked body".into(),
                ));
            }
        }
    }

    async fn read_chunked(&mut self, max_body: usize) -> Result<(Vec<u8>, bool), HttpError> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line().await?;
            let text = String::from_utf8_lossy(&line);
            let size_text = text.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size_text, 16).map_err(|_| {
                HttpError::MalformedHttp1(format!("chunked body: invalid chunk size {size_text:?}"))
            })?;
            if size == 0 {
                // Trailer fields, then the empty line.
                while !self.read_line().await?.is_empty() {}
                return Ok((body, false));
            }
            let room = max_body - body.len();
            let take = size.min(room);
            self.fill_to(take, mid_chunk).await?;
            body.extend(self.buf.drain(..take));
            if size > room {
                return Ok((body, true));
            }
            self.fill_to(2, mid_chunk).await?;
            if &self.buf[..2] != b"\r\n" {
                return Err(HttpError::MalformedHttp1(
                    "chunked body: chunk not followed by CRLF".into(),
                ));
            }
            self.buf.drain(..2);
        }
    }
}

fn mid_chunk(_: usize) -> String {
    "connection closed in the middle of a chunk".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
