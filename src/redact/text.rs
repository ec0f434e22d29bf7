//! Making untrusted text safe to show: everything a server sends back can carry terminal escape
//! sequences, bidi overrides that reorder what a reader sees, NUL bytes that XML cannot hold
//! even escaped, or bytes that are not UTF-8 at all, and a body can be a megabyte. Every
//! renderer shows text through these functions, so no path forgets a rule.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

/// True for characters that must not reach a terminal or an XML document as they are: C0 and C1
/// controls, DEL, bidi embeddings/overrides/isolates and marks, zero-width characters, the BOM,
/// and the non-characters U+FFFE/U+FFFF (not allowed in XML).
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{FEFF}'
                | '\u{FFFE}'
                | '\u{FFFF}'
        )
}

fn push_escaped(out: &mut String, c: char) {
    if c.is_ascii() {
        let _ = write!(out, "\\x{:02X}", c as u32);
    } else {
        let _ = write!(out, "\\u{{{:X}}}", c as u32);
    }
}

/// Escapes unsafe characters but keeps line breaks and tabs, for multi-line text such as a body.
pub fn sanitize_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if is_unsafe(c) && c != '\n' && c != '\t' {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// Escapes unsafe characters including line breaks, for text that must stay on one line (a
/// header value, a JUnit `message` attribute, a table cell).
pub fn sanitize_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if is_unsafe(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// Bytes on one line: valid UTF-8 runs are sanitised, every other byte becomes `\xHH`. Used for
/// header values, which the key-syntax probes fill with non-ASCII and control bytes on purpose.
pub fn bytes_inline(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&sanitize_line(chunk.valid()));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02X}");
        }
    }
    out
}

/// A body as text for the terminal and JUnit: at most `max` bytes of it, then a line saying how
/// many bytes were left out and the SHA-256 of the whole body (so two long bodies can still be
/// compared by eye). UTF-8 is sanitised; anything else becomes a hex dump, since guessing an
/// encoding would show bytes that were never sent.
pub fn bytes_for_text(bytes: &[u8], max: usize) -> String {
    let (mut out, shown) = match std::str::from_utf8(bytes) {
        Ok(text) => {
            let mut end = max.min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            (sanitize_text(&text[..end]), end)
        }
        Err(_) => {
            let end = max.min(bytes.len());
            (hex_dump(&bytes[..end]), end)
        }
    };
    let cut = bytes.len() - shown;
    if cut > 0 {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        let _ = write!(out, "… {cut} bytes more, sha256 {}", sha256_hex(bytes));
    }
    out
}

/// At most `max` characters of `text`, then `… (N bytes, sha256 …)` when it was longer: for a
/// value quoted inside a line (a check's expected/actual), where a whole body would drown the
/// verdict. The size and digest let two long values be compared by eye.
pub fn cut_line(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((end, _)) => format!(
            "{}… ({} bytes, sha256 {})",
            &text[..end],
            group_thousands(text.len()),
            &sha256_hex(text.as_bytes())[..16]
        ),
    }
}

/// A one-line reason of at most `max` characters: one that is longer ends at the last word that
/// fits, then `…`. A reason is a sentence, not data: a size and digest after it (as
/// [`cut_line`] gives a value) say nothing a reader can use, and the evidence quotes the values
/// themselves.
pub fn cut_reason(text: &str, max: usize) -> String {
    let Some((end, _)) = text.char_indices().nth(max.saturating_sub(1)) else {
        return text.to_string();
    };
    if text[end..].chars().count() == 1 {
        return text.to_string();
    }
    let head = &text[..end];
    // A word boundary in the second half, else the characters that fit.
    let cut = match head.rfind(' ') {
        Some(i) if head[..i].chars().count() >= max / 2 => &head[..i],
        _ => head,
    };
    format!("{}…", cut.trim_end_matches([' ', ',', ';', ':']))
}

/// `1048576` → `1,048,576`.
pub fn group_thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The SHA-256 of `bytes` in lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(64);
    for b in Sha256::digest(bytes) {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// `xxd`-style lines: offset, 16 hex bytes, and the printable ASCII beside them.
fn hex_dump(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, row) in bytes.chunks(16).enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = write!(out, "{:08x} ", i * 16);
        for b in row {
            let _ = write!(out, " {b:02x}");
        }
        for _ in row.len()..16 {
            out.push_str("   ");
        }
        out.push_str("  |");
        out.extend(row.iter().map(|&b| {
            if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                '.'
            }
        }));
        out.push('|');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_reason_ends_at_a_word_without_a_digest() {
        use super::cut_reason;
        assert_eq!(cut_reason("short enough", 20), "short enough");
        assert_eq!(cut_reason("exactly ten", 11), "exactly ten");
        let long = "the next attempt carries the same key: expected one key, got another one";
        let cut = cut_reason(long, 40);
        assert_eq!(cut, "the next attempt carries the same key…");
        assert!(cut.chars().count() <= 40);
        let word = "x".repeat(50);
        assert_eq!(cut_reason(&word, 10), format!("{}…", "x".repeat(9)));
    }

    use super::*;

    #[test]
    fn controls_bidi_and_zero_width_are_escaped() {
        assert_eq!(
            sanitize_text("a\x1b[31mb\0c\u{202E}d\u{200B}e\nf\tg\r"),
            "a\\x1B[31mb\\x00c\\u{202E}d\\u{200B}e\nf\tg\\x0D"
        );
        assert_eq!(sanitize_line("a\nb\u{85}"), "a\\x0Ab\\u{85}");
    }

    #[test]
    fn invalid_utf8_in_a_header_is_shown_byte_by_byte() {
        assert_eq!(bytes_inline(b"\"caf\xe9\x01\""), "\"caf\\xE9\\x01\"");
    }

    #[test]
    fn long_bodies_are_cut_on_a_character_boundary_with_a_digest() {
        let text = bytes_for_text("aé".as_bytes(), 2);
        assert!(text.starts_with("a\n… 2 bytes more, sha256 "), "{text}");
        assert_eq!(bytes_for_text(b"short", 10), "short");
    }

    #[test]
    fn quoted_values_are_cut_with_size_and_digest() {
        let big = "x".repeat(1_048_576);
        let cut = cut_line(&big, 200);
        assert!(cut.starts_with(&"x".repeat(200)), "{cut}");
        assert!(cut.ends_with(&format!(
            "… (1,048,576 bytes, sha256 {})",
            &sha256_hex(big.as_bytes())[..16]
        )));
        assert_eq!(cut_line("short", 200), "short");
        assert_eq!(group_thousands(999), "999");
    }

    #[test]
    fn non_utf8_bodies_become_a_hex_dump() {
        let text = bytes_for_text(b"ok\xff\x00", 4096);
        assert_eq!(
            text,
            "00000000  6f 6b ff 00                                      |ok..|"
        );
        let long = bytes_for_text(&[0xffu8; 40], 16);
        assert!(long.contains("… 24 bytes more, sha256 "), "{long}");
    }
}
