//! Header encoding for the burst's requests (RFC 7541): every field a literal that enters no
//! dynamic table, so each request's block can be staged, and recorded, on its own.

use crate::http::exchange::{Header, SentRequest};
use crate::http::h1;
use crate::http::HttpError;

/// One request ready to stage.
pub(super) struct Encoded {
    /// The HPACK header block.
    pub(super) block: Vec<u8>,
    pub(super) body: Vec<u8>,
    /// The record: `host` carries what went out as `:authority`, field names lower-cased,
    /// connection-specific fields (which HTTP/2 forbids) left out, as on the wire.
    pub(super) sent: SentRequest,
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

/// The request as HPACK literals and the record of what HTTP/2 sends; only an empty method is
/// refused.
pub(super) fn encode_request(req: &SentRequest, url: &url::Url) -> Result<Encoded, HttpError> {
    if req.method.is_empty() {
        return Err(HttpError::Unsendable("the request has no method".into()));
    }
    let authority = req
        .header_values("host")
        .first()
        .map(|v| v.to_vec())
        .unwrap_or_else(|| h1::host_value(url).into_bytes());
    let path = h1::request_target(url);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::exchange::Header;

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
        let req = h1::prepare(
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
}
