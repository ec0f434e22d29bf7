//! The `key-name-spellings` fault, which has to act below HTTP parsing: hyper lowercases every
//! header name, so by the time a handler runs, `IDEMPOTENCY-KEY` and `idempotency-key` are
//! indistinguishable (as HTTP says they are). A server that keeps raw header names in a
//! case-sensitive map and looks the key up under its two usual spellings is modelled here by
//! renaming, in the bytes read from each connection, any other spelling of the key header's
//! name to a header nobody reads, before hyper parses the request. The connection's socket
//! (`crate::connection`) hands each read to [`KeyNames::after_read`].
//!
//! A name is recognised at the start of a line within one read; request heads on loopback
//! arrive whole in one read, which is what the fault is used with. Without the fault the
//! bytes are left untouched.

/// The name the key header has on the wire, case-insensitively.
const KEY_NAME: &[u8] = b"idempotency-key";

/// The spellings the faulty lookup knows.
const KNOWN_SPELLINGS: [&[u8]; 2] = [b"Idempotency-Key", b"idempotency-key"];

/// What another spelling becomes: a header of the same length that nothing reads.
const UNREAD: &[u8; 15] = b"X-Unread-Header";

/// The rewriting state of one accepted connection; it rewrites only under the fault.
#[derive(Debug)]
pub(crate) struct KeyNames {
    active: bool,
    /// The last byte read ended a line.
    line_start: bool,
}

impl KeyNames {
    /// A new connection's state: it starts at a line start.
    pub(crate) fn new(active: bool) -> Self {
        Self {
            active,
            line_start: true,
        }
    }

    /// Rewrites what one read appended to `filled` (the bytes from `before` on).
    pub(crate) fn after_read(&mut self, filled: &mut [u8], before: usize) {
        if self.active {
            self.line_start = hide_other_spellings(filled, before, self.line_start);
        }
    }
}

/// Renames the key header written in any but the known spellings at each line start in
/// `bytes[from..]`; returns whether the bytes end a line.
fn hide_other_spellings(bytes: &mut [u8], from: usize, line_start: bool) -> bool {
    let n = KEY_NAME.len();
    for at in from..bytes.len() {
        let starts_line = if at == from {
            line_start
        } else {
            bytes[at - 1] == b'\n'
        };
        let Some(name) = bytes.get(at..at + n) else {
            break;
        };
        if starts_line
            && bytes.get(at + n) == Some(&b':')
            && name.eq_ignore_ascii_case(KEY_NAME)
            && !KNOWN_SPELLINGS.contains(&name)
        {
            bytes[at..at + n].copy_from_slice(UNREAD);
        }
    }
    bytes.last().map_or(line_start, |b| *b == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unusual_spellings_at_a_line_start_are_hidden() {
        let mut head = b"POST / HTTP/1.1\r\nIDEMPOTENCY-KEY: \"a\"\r\nidempotency-key: \"b\"\r\nIdempotency-Key: \"c\"\r\nX-Note: iDempotency-key: d\r\n\r\n".to_vec();
        assert!(hide_other_spellings(&mut head, 0, true));
        let text = String::from_utf8(head).unwrap();
        assert!(text.contains("\r\nX-Unread-Header: \"a\"\r\n"));
        assert!(text.contains("\r\nidempotency-key: \"b\"\r\n"));
        assert!(text.contains("\r\nIdempotency-Key: \"c\"\r\n"));
        assert!(text.contains("X-Note: iDempotency-key: d"));
        let mut next = b"IdemPotency-Key: x\r\n".to_vec();
        hide_other_spellings(&mut next, 0, true);
        assert!(next.starts_with(UNREAD));
    }
}
