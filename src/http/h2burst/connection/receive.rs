//! What each frame the server sends does to the burst's streams: settings and flow-control
//! credit applied, PING and SETTINGS answered, header blocks decoded into responses, DATA
//! collected, resets and GOAWAY turned into the affected requests' errors.

use std::time::Instant;

use super::{Conn, MAX_FRAME, STAGED_PING};

/// The most bytes of one header block (a HEADERS frame and its CONTINUATIONs), and of the
/// fields it decodes to (RFC 9113 §6.5.2 counts 32 bytes per field besides its name and
/// value): the 64 KiB an HTTP/1.1 response head may have. Without a bound, a server that never
/// ends a block (a CONTINUATION flood), or whose small block names large table entries again
/// and again, grows our memory for as long as the timeout lets it.
const MAX_HEADER_BLOCK: usize = 64 * 1024;
use crate::http::exchange::{Header, ReceivedResponse};
use crate::http::h2burst::frame::*;
use crate::http::HttpError;

impl Conn {
    /// Applies one frame; control frames to send in answer are queued in `out`.
    pub(super) fn handle(&mut self, f: Frame) -> Result<(), HttpError> {
        if let Some(i) = self.index(f.stream) {
            self.streams[i].heard = true;
        }
        if let Some((id, _, _)) = &self.block {
            if f.kind != CONTINUATION || f.stream != *id {
                return Err(HttpError::Http2(
                    "the server interrupted a header block (CONTINUATION expected)".into(),
                ));
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
                    if self.stream_id(i) > last {
                        // GOAWAY says the server did not process it: without a frame of an
                        // answer, it may be sent again.
                        let error = match self.streams[i].heard {
                            false => HttpError::ClosedBeforeAnyByte(why.clone()),
                            true => HttpError::Http2(why.clone()),
                        };
                        self.end(i, Err(error));
                    }
                }
                self.goaway = true;
            }
            RST_STREAM => {
                let code = be32(&f.payload)?;
                if let Some(i) = self.index(f.stream) {
                    self.end(
                        i,
                        Err(HttpError::Http2(format!(
                            "the server reset the stream ({})",
                            error_name(code)
                        ))),
                    );
                }
            }
            PUSH_PROMISE => {
                return Err(HttpError::Http2(
                    "the server sent PUSH_PROMISE although push was disabled".into(),
                ))
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
                    fragment = fragment
                        .get(5..)
                        .ok_or_else(|| HttpError::Http2("HEADERS frame too short".into()))?;
                }
                let end_stream = f.flags & END_STREAM != 0;
                self.block = Some((f.stream, end_stream, fragment.to_vec()));
                if f.flags & END_HEADERS != 0 {
                    self.finish_block()?;
                }
            }
            CONTINUATION => {
                let Some((_, _, fragments)) = self.block.as_mut() else {
                    return Err(HttpError::Http2(
                        "the server sent CONTINUATION outside a header block".into(),
                    ));
                };
                fragments.extend_from_slice(&f.payload);
                if fragments.len() > MAX_HEADER_BLOCK {
                    return Err(HttpError::Http2(format!(
                        "the server's header block is larger than {} KiB",
                        MAX_HEADER_BLOCK / 1024
                    )));
                }
                if f.flags & END_HEADERS != 0 {
                    self.finish_block()?;
                }
            }
            // PRIORITY and unknown frame types carry nothing a response needs.
            _ => {}
        }
        Ok(())
    }

    fn apply_settings(&mut self, payload: &[u8]) -> Result<(), HttpError> {
        if payload.len() % 6 != 0 {
            return Err(HttpError::Http2(
                "the server sent a malformed SETTINGS frame".into(),
            ));
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
    fn finish_block(&mut self) -> Result<(), HttpError> {
        let Some((id, end_stream, block)) = self.block.take() else {
            return Ok(());
        };
        let mut fields = Vec::new();
        let mut size = 0usize;
        self.decoder
            .decode_with_cb(&block, |name, value| {
                size += name.len() + value.len() + 32;
                if size <= MAX_HEADER_BLOCK {
                    fields.push((name.into_owned(), value.into_owned()));
                }
            })
            .map_err(|e| {
                HttpError::Http2(format!(
                    "the server's HPACK header block could not be decoded: {e:?}"
                ))
            })?;
        if size > MAX_HEADER_BLOCK {
            return Err(HttpError::Http2(format!(
                "the server's header fields take more than {} KiB",
                MAX_HEADER_BLOCK / 1024
            )));
        }
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
                self.end(
                    i,
                    Err(HttpError::Http2("the response has no :status".into())),
                );
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
                version: http::Version::HTTP_2,
                headers: std::mem::take(&mut s.headers),
                body: std::mem::take(&mut s.body),
                body_truncated: s.truncated,
                problem: None,
            }),
            None => Err(HttpError::Http2(
                "the stream ended before any response headers".into(),
            )),
        };
        self.end(i, result);
    }

    fn end(&mut self, i: usize, result: Result<ReceivedResponse, HttpError>) {
        let s = &mut self.streams[i];
        if s.result.is_none() {
            s.finished = Some(Instant::now());
            s.result = Some(result);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::connection::Stream;

    /// A connection after its handshake, with one stream (id 1) open for an answer; the
    /// listener is kept so the socket stays connected.
    async fn open() -> (Conn, tokio::net::TcpListener) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tcp = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let mut conn = Conn::new(Stream::Plain(tcp));
        conn.begin_burst(1, 1024).unwrap();
        (conn, listener)
    }

    fn on_stream_1(kind: u8, flags: u8, payload: Vec<u8>) -> Frame {
        Frame {
            kind,
            flags,
            stream: 1,
            payload,
        }
    }

    /// A header block continued forever is refused once it passes 64 KiB.
    #[tokio::test]
    async fn a_header_block_that_never_ends_is_refused() {
        let (mut conn, _listener) = open().await;
        conn.handle(on_stream_1(HEADERS, 0, vec![0x88; MAX_FRAME]))
            .unwrap();
        let refused = (0..8)
            .find_map(|_| {
                conn.handle(on_stream_1(CONTINUATION, 0, vec![0x88; MAX_FRAME]))
                    .err()
            })
            .expect("refused");
        assert!(
            matches!(&refused, HttpError::Http2(m) if m.contains("larger than 64 KiB")),
            "{refused}"
        );
    }

    /// A small block naming a 4,000-byte table entry a hundred times decodes to 400 KB: it is
    /// refused, not kept.
    #[tokio::test]
    async fn fields_that_expand_past_64_kib_are_refused() {
        let (mut conn, _listener) = open().await;
        // A literal with incremental indexing (name "x", a 4,000-byte value), then 100
        // references to it (index 62, the first entry of the dynamic table).
        let mut block = vec![0x40, 0x01, b'x', 0x7f, 0xa1, 0x1e];
        block.extend([b'v'; 4000]);
        block.extend([0xbe; 100]);
        let refused = conn
            .handle(on_stream_1(HEADERS, END_HEADERS, block))
            .unwrap_err();
        assert!(
            matches!(&refused, HttpError::Http2(m) if m.contains("more than 64 KiB")),
            "{refused}"
        );
    }

    /// A server may not grow our HPACK table past the 4,096 bytes we never raised.
    #[tokio::test]
    async fn the_hpack_table_stays_at_its_default_size() {
        let (mut conn, _listener) = open().await;
        // A dynamic table size update to 1 MiB, then :status 200.
        let block = vec![0x3f, 0xe1, 0xff, 0x3f, 0x88];
        let refused = conn
            .handle(on_stream_1(HEADERS, END_HEADERS | END_STREAM, block))
            .unwrap_err();
        assert!(
            matches!(&refused, HttpError::Http2(m) if m.contains("could not be decoded")),
            "{refused}"
        );
    }
}
