//! Making untrusted text safe to show, and keeping secrets out of every output.
//!
//! Everything a server sends back is untrusted: a body can carry terminal escape sequences, bidi
//! overrides that reorder what a reader sees, NUL bytes that XML cannot hold even escaped, or bytes
//! that are not UTF-8 at all. Evidence also contains what idem-check itself sent, including the
//! tokens of the target file. Every renderer (terminal, JUnit, JSON, Markdown, curl lines) goes
//! through this one module so that no path forgets a rule:
//!
//! - [`sanitize_text`] / [`sanitize_line`] escape control, bidi and zero-width characters as
//!   `\x1B` / `\u{202E}` (the way fd's `sanitize.rs` does for file names);
//! - [`bytes_for_text`] shows a body capped in size, as hex when it is not UTF-8;
//! - [`redact`] / [`redact_bytes`] mask the secrets named by the target file;
//! - [`mask_header`] applies the header rule: `Authorization`, `Proxy-Authorization`, `Cookie` and
//!   `Set-Cookie` values are never shown, and nor is any value that contains a secret.

use std::borrow::Cow;
use std::fmt::Write as _;

use sha2::{Digest, Sha256};

/// What a masked secret is replaced with, everywhere.
pub const REDACTED: &str = "[redacted]";

/// Headers whose values are credentials whatever they contain.
const CREDENTIAL_HEADERS: [&str; 4] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
];

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
        let _ = write!(out, "… {cut} bytes more, sha256 ");
        for b in Sha256::digest(bytes) {
            let _ = write!(out, "{b:02x}");
        }
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

/// The secrets worth masking, longest first so that a secret containing another is masked whole.
fn ordered(secrets: &[String]) -> Vec<&str> {
    let mut v: Vec<&str> = secrets
        .iter()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    v.sort_by_key(|s| std::cmp::Reverse(s.len()));
    v
}

/// Secrets at least this long are masked wherever they occur. A shorter one (a test token such
/// as `ta`) would also match inside ordinary words ("res-ta-rt"), so it is masked only where it
/// stands alone: not touching a letter or digit on either side.
pub const SHORT_SECRET: usize = 8;

/// Whether `secret` occurs in `haystack` at `pos`, under the [`SHORT_SECRET`] rule.
pub fn secret_at(haystack: &[u8], pos: usize, secret: &[u8]) -> bool {
    if secret.is_empty() || !haystack[pos..].starts_with(secret) {
        return false;
    }
    if secret.len() >= SHORT_SECRET {
        return true;
    }
    let alnum = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    let before = pos.checked_sub(1).and_then(|i| haystack.get(i));
    !alnum(before) && !alnum(haystack.get(pos + secret.len()))
}

/// The first position of `secret` in `haystack`, under the [`SHORT_SECRET`] rule.
pub fn find_secret(haystack: &[u8], secret: &[u8]) -> Option<usize> {
    (0..haystack.len()).find(|&i| secret_at(haystack, i, secret))
}

/// Replaces every occurrence of every secret with [`REDACTED`].
pub fn redact(text: &str, secrets: &[String]) -> String {
    match redact_bytes(text.as_bytes(), secrets) {
        // Secrets are whole strings and the mask is ASCII, so the result is still UTF-8.
        Cow::Owned(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Cow::Borrowed(_) => text.to_string(),
    }
}

/// [`redact`] on raw bytes, applied to bodies *before* they are cut to size, so a secret that
/// straddles the cut cannot leak its first half.
pub fn redact_bytes<'a>(bytes: &'a [u8], secrets: &[String]) -> Cow<'a, [u8]> {
    let mut out: Cow<'a, [u8]> = Cow::Borrowed(bytes);
    for s in ordered(secrets) {
        let needle = s.as_bytes();
        if find_secret(&out, needle).is_none() {
            continue;
        }
        let mut replaced = Vec::with_capacity(out.len());
        let mut i = 0;
        while i < out.len() {
            if secret_at(&out, i, needle) {
                replaced.extend_from_slice(REDACTED.as_bytes());
                i += needle.len();
            } else {
                replaced.push(out[i]);
                i += 1;
            }
        }
        out = Cow::Owned(replaced);
    }
    out
}

/// True for headers whose value is a credential whatever it contains.
pub fn is_credential_header(name: &str) -> bool {
    CREDENTIAL_HEADERS
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h))
}

/// The header rule: `Some(masked)` when the value must not be shown, `None` when it may be.
///
/// Credential headers and any value containing a secret are masked whole. For the two
/// `*Authorization` headers the scheme is kept (`Bearer [redacted]`), since "which scheme was
/// sent" is often the very thing a reader needs to check.
pub fn mask_header(name: &str, value: &[u8], secrets: &[String]) -> Option<String> {
    let carries_secret = ordered(secrets)
        .into_iter()
        .any(|s| find_secret(value, s.as_bytes()).is_some());
    if !is_credential_header(name) && !carries_secret {
        return None;
    }
    if name.to_ascii_lowercase().ends_with("authorization") {
        if let Some(scheme) = auth_scheme(value) {
            return Some(format!("{scheme} {REDACTED}"));
        }
    }
    Some(REDACTED.to_string())
}

/// The auth scheme of an `Authorization` value (`Bearer`, `Basic`), if it has a well-formed one.
pub fn auth_scheme(value: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(value).ok()?;
    let (scheme, rest) = text.split_once(' ')?;
    let is_token = !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    (is_token && !rest.trim().is_empty()).then_some(scheme)
}

/// A header value ready for text output: masked by [`mask_header`], otherwise [`bytes_inline`].
pub fn header_value_for_text(name: &str, value: &[u8], secrets: &[String]) -> String {
    mask_header(name, value, secrets).unwrap_or_else(|| bytes_inline(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> Vec<String> {
        vec!["s3cr3t-token".into()]
    }

    #[test]
    fn short_secrets_are_masked_only_where_they_stand_alone() {
        let secrets = vec!["ta".to_string()];
        assert_eq!(redact("restart the target", &secrets), "restart the target");
        assert_eq!(redact("Bearer ta", &secrets), format!("Bearer {REDACTED}"));
        assert_eq!(
            redact("{\"t\":\"ta\"}", &secrets),
            format!("{{\"t\":\"{REDACTED}\"}}")
        );
        let long = vec!["s3cr3t-token".to_string()];
        assert_eq!(redact("xs3cr3t-tokenx", &long), format!("x{REDACTED}x"));
    }

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
    fn non_utf8_bodies_become_a_hex_dump() {
        let text = bytes_for_text(b"ok\xff\x00", 4096);
        assert_eq!(
            text,
            "00000000  6f 6b ff 00                                      |ok..|"
        );
        let long = bytes_for_text(&[0xffu8; 40], 16);
        assert!(long.contains("… 24 bytes more, sha256 "), "{long}");
    }

    #[test]
    fn secrets_are_masked_in_text_and_bytes() {
        assert_eq!(
            redact("token=s3cr3t-token;", &secrets()),
            "token=[redacted];"
        );
        assert_eq!(
            redact_bytes(b"\xffs3cr3t-token\xff", &secrets()).as_ref(),
            b"\xff[redacted]\xff"
        );
        let longest_first = vec!["abc".to_string(), "abcdef".to_string()];
        assert_eq!(
            redact("abcdef abc", &longest_first),
            "[redacted] [redacted]"
        );
        assert_eq!(redact("x", &["".to_string()]), "x");
    }

    #[test]
    fn credential_headers_keep_only_their_scheme() {
        let none: Vec<String> = vec![];
        assert_eq!(
            mask_header("Authorization", b"Bearer abc", &none).as_deref(),
            Some("Bearer [redacted]")
        );
        assert_eq!(
            mask_header("cookie", b"sid=1", &none).as_deref(),
            Some("[redacted]")
        );
        assert_eq!(
            mask_header("x-api-key", b"s3cr3t-token", &secrets()).as_deref(),
            Some("[redacted]")
        );
        assert_eq!(mask_header("content-type", b"text/plain", &secrets()), None);
        assert_eq!(
            mask_header("authorization", b"s3cr3t-token", &secrets()).as_deref(),
            Some("[redacted]")
        );
    }
}
