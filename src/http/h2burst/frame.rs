//! HTTP/2 frames (RFC 9113 §4 and §6): the types and flags the burst uses, writing a frame, and
//! the checks on what the server's frames carry.

use crate::http::HttpError;

/// The client connection preface (RFC 9113 §3.4).
pub(super) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub(super) const DATA: u8 = 0x0;
pub(super) const HEADERS: u8 = 0x1;
pub(super) const RST_STREAM: u8 = 0x3;
pub(super) const SETTINGS: u8 = 0x4;
pub(super) const PUSH_PROMISE: u8 = 0x5;
pub(super) const PING: u8 = 0x6;
pub(super) const GOAWAY: u8 = 0x7;
pub(super) const WINDOW_UPDATE: u8 = 0x8;
pub(super) const CONTINUATION: u8 = 0x9;

pub(super) const END_STREAM: u8 = 0x1;
pub(super) const ACK: u8 = 0x1;
pub(super) const END_HEADERS: u8 = 0x4;
pub(super) const PADDED: u8 = 0x8;
pub(super) const PRIORITY: u8 = 0x20;

/// Appends one frame: the 9-byte header (length, type, flags, stream) and the payload.
pub(super) fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len() as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
}

/// A frame as read.
pub(super) struct Frame {
    pub(super) kind: u8,
    pub(super) flags: u8,
    pub(super) stream: u32,
    pub(super) payload: Vec<u8>,
}

pub(super) fn be32(b: &[u8]) -> Result<u32, HttpError> {
    b.get(..4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| HttpError::Http2("the server sent a frame too short for its type".into()))
}

/// The payload without its padding, for DATA and HEADERS frames with PADDED set.
pub(super) fn unpad(payload: &[u8], flags: u8) -> Result<&[u8], HttpError> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let pad = *payload
        .first()
        .ok_or_else(|| HttpError::Http2("padded frame without a pad length".into()))?
        as usize;
    payload
        .len()
        .checked_sub(1 + pad)
        .map(|end| &payload[1..1 + end])
        .ok_or_else(|| HttpError::Http2("the server's frame padding exceeds the frame".into()))
}

/// The RFC 9113 §7 name of an error code.
pub(super) fn error_name(code: u32) -> String {
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
    fn padding_is_stripped_and_checked() {
        assert_eq!(unpad(&[2, b'a', 0, 0], PADDED).unwrap(), b"a");
        assert!(unpad(&[5, b'a'], PADDED).is_err());
        assert_eq!(error_name(7), "REFUSED_STREAM");
        assert_eq!(error_name(99), "error code 0x63");
    }
}
