//! A recorded request as a curl command a user can paste into a shell to replay it.
//!
//! The line reproduces the bytes that were *sent* (hurl's `curl_cmd.rs` does the same), with two
//! exceptions that keep it safe to paste into a CI log:
//!
//! - each secret of the target file becomes an environment variable, the first `$IDEM_TOKEN_A`,
//!   the second `$IDEM_TOKEN_B`, …, so the reader sets it once and reruns;
//! - a credential header holding no known secret (`Authorization: Basic …` typed into the target
//!   file by hand) keeps its scheme and gets `$IDEM_AUTHORIZATION` / `$IDEM_COOKIE` / … instead
//!   of its value.
//!
//! Quoting: plain printable ASCII goes in single quotes; a word holding a variable goes in double
//! quotes (as in `-H "Authorization: Bearer $IDEM_TOKEN_A"`); bytes outside printable ASCII use
//! bash's `$'\x..'` quoting, since the key-syntax probes send such bytes on purpose. A body with a
//! NUL byte cannot be a shell argument at all, so it is piped in through `printf`.
//! `Host` and `Content-Length` are left to curl, which derives them from the URL and the body.

use std::fmt::Write as _;

use crate::http::exchange::SentRequest;
use crate::redact::{auth_scheme, find_secret, is_credential_header, secret_at};

/// One piece of a shell word: bytes to quote, or an environment variable to expand.
#[derive(Debug, PartialEq)]
enum Part {
    Bytes(Vec<u8>),
    Var(String),
}

/// The variable a secret becomes: `IDEM_TOKEN_A` for the first, …, `IDEM_TOKEN_AA` after `Z`.
pub fn token_var(index: usize) -> String {
    let mut letters = Vec::new();
    let mut i = index + 1;
    while i > 0 {
        i -= 1;
        letters.push(b'A' + (i % 26) as u8);
        i /= 26;
    }
    letters.reverse();
    format!("IDEM_TOKEN_{}", String::from_utf8_lossy(&letters))
}

/// Splits `bytes` at every occurrence of a secret, which becomes its variable.
fn split_secrets(bytes: &[u8], secrets: &[String]) -> Vec<Part> {
    // Longest secret first, so a secret containing another one is replaced whole.
    let mut order: Vec<usize> = (0..secrets.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(secrets[i].len()));
    let mut parts = Vec::new();
    let mut literal = Vec::new();
    let mut pos = 0;
    'scan: while pos < bytes.len() {
        for &i in &order {
            let s = secrets[i].as_bytes();
            if secret_at(bytes, pos, s) {
                if !literal.is_empty() {
                    parts.push(Part::Bytes(std::mem::take(&mut literal)));
                }
                parts.push(Part::Var(token_var(i)));
                pos += s.len();
                continue 'scan;
            }
        }
        literal.push(bytes[pos]);
        pos += 1;
    }
    if !literal.is_empty() {
        parts.push(Part::Bytes(literal));
    }
    parts
}

/// Characters that keep their literal meaning inside double quotes (`!` is excluded because an
/// interactive bash expands it there).
fn double_quote_safe(b: u8) -> bool {
    (0x20..0x7f).contains(&b) && !b"\"\\$`!".contains(&b)
}

fn printable(b: u8) -> bool {
    (0x20..0x7f).contains(&b)
}

/// Quotes a word for a POSIX shell (bash for `$'…'`).
fn quote(parts: &[Part]) -> String {
    let has_var = parts.iter().any(|p| matches!(p, Part::Var(_)));
    let all_bytes = || {
        parts.iter().filter_map(|p| match p {
            Part::Bytes(b) => Some(b),
            Part::Var(_) => None,
        })
    };
    if has_var && all_bytes().flatten().all(|&b| double_quote_safe(b)) {
        let mut out = String::from("\"");
        for (i, part) in parts.iter().enumerate() {
            match part {
                Part::Bytes(b) => out.push_str(&String::from_utf8_lossy(b)),
                Part::Var(v) => {
                    // Braces only when the next character would extend the name.
                    let glued = matches!(parts.get(i + 1), Some(Part::Bytes(n))
                        if n.first().is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_'));
                    if glued {
                        let _ = write!(out, "${{{v}}}");
                    } else {
                        let _ = write!(out, "${v}");
                    }
                }
            }
        }
        out.push('"');
        return out;
    }
    if parts.is_empty() {
        return "''".into();
    }
    parts
        .iter()
        .map(|part| match part {
            Part::Var(v) => format!("\"${v}\""),
            Part::Bytes(b) if b.iter().all(|&c| printable(c)) => single_quoted(b),
            Part::Bytes(b) => ansi_c_quoted(b),
        })
        .collect()
}

fn single_quoted(bytes: &[u8]) -> String {
    format!(
        "'{}'",
        String::from_utf8_lossy(bytes).replace('\'', "'\\''")
    )
}

/// bash's `$'…'`: every byte outside printable ASCII as `\xHH`.
fn ansi_c_quoted(bytes: &[u8]) -> String {
    escaped("$'", "\\'", bytes, |out, b| {
        let _ = write!(out, "\\x{b:02X}");
    })
}

/// `printf '%b'` input reproducing `bytes` exactly (octal escapes are the portable form).
fn printf_b_quoted(bytes: &[u8]) -> String {
    escaped("'", "'\\''", bytes, |out, b| {
        let _ = write!(out, "\\0{b:03o}");
    })
}

/// Single-quoted text opened by `open`: a backslash doubled, a quote written as `quote`,
/// printable ASCII as itself and every other byte through `byte`. The two shell forms above
/// differ only in those spellings.
fn escaped(open: &str, quote: &str, bytes: &[u8], byte: fn(&mut String, u8)) -> String {
    let mut out = String::from(open);
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\'' => out.push_str(quote),
            _ if printable(b) => out.push(b as char),
            _ => byte(&mut out, b),
        }
    }
    out.push('\'');
    out
}

/// The parts of one `-H` argument, credentials and secrets already swapped for variables.
fn header_parts(name: &str, value: &[u8], secrets: &[String]) -> Vec<Part> {
    let carries_secret = secrets
        .iter()
        .any(|s| find_secret(value, s.as_bytes()).is_some());
    let mut parts = vec![Part::Bytes(name.as_bytes().to_vec())];
    if value.is_empty() {
        // `Name;` is curl's syntax for an empty value (`Name:` would remove the header).
        parts.push(Part::Bytes(b";".to_vec()));
        return merge(parts);
    }
    parts.push(Part::Bytes(b": ".to_vec()));
    if is_credential_header(name) && !carries_secret {
        let var = format!("IDEM_{}", name.to_ascii_uppercase().replace('-', "_"));
        if let Some(scheme) = auth_scheme(value) {
            parts.push(Part::Bytes(format!("{scheme} ").into_bytes()));
        }
        parts.push(Part::Var(var));
    } else {
        parts.extend(split_secrets(value, secrets));
    }
    merge(parts)
}

/// Joins adjacent byte parts so each quoting decision sees a whole literal run.
fn merge(parts: Vec<Part>) -> Vec<Part> {
    let mut out: Vec<Part> = Vec::new();
    for part in parts {
        match (out.last_mut(), part) {
            (Some(Part::Bytes(prev)), Part::Bytes(b)) => prev.extend_from_slice(&b),
            (_, part) => out.push(part),
        }
    }
    out
}

/// The curl command line replaying `req`; secrets appear only as `$IDEM_TOKEN_*` variables.
pub fn curl_line(req: &SentRequest, secrets: &[String]) -> String {
    let has_nul = req.body.contains(&0);
    let mut line = String::new();
    if has_nul {
        line.push_str("printf '%b' ");
        for part in split_secrets(&req.body, secrets) {
            match part {
                Part::Bytes(b) => line.push_str(&printf_b_quoted(&b)),
                Part::Var(v) => {
                    let _ = write!(line, "\"${v}\"");
                }
            }
        }
        line.push_str(" | ");
    }
    line.push_str("curl -sS");
    if req.method != "GET" || !req.body.is_empty() {
        // Methods are tokens; an odd one (the probes never send one) is quoted like any word.
        let method = if req.method.bytes().all(|b| b.is_ascii_alphabetic()) {
            req.method.clone()
        } else {
            quote(&[Part::Bytes(req.method.as_bytes().to_vec())])
        };
        let _ = write!(line, " -X {method}");
    }
    let _ = write!(
        line,
        " {}",
        quote(&split_secrets(req.url.as_bytes(), secrets))
    );
    for h in &req.headers {
        if h.name.eq_ignore_ascii_case("host") || h.name.eq_ignore_ascii_case("content-length") {
            continue;
        }
        let _ = write!(
            line,
            " -H {}",
            quote(&header_parts(&h.name, &h.value, secrets))
        );
    }
    if has_nul {
        line.push_str(" --data-binary @-");
    } else if !req.body.is_empty() {
        let _ = write!(
            line,
            " --data-raw {}",
            quote(&merge(split_secrets(&req.body, secrets)))
        );
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::exchange::Header;

    fn req(headers: Vec<Header>, body: &[u8]) -> SentRequest {
        SentRequest {
            method: "POST".into(),
            url: "http://127.0.0.1:41873/api/payments".into(),
            headers,
            body: body.to_vec(),
        }
    }

    fn secrets() -> Vec<String> {
        vec!["s3cr3t-token".into(), "other".into()]
    }

    #[test]
    fn tokens_become_environment_variables() {
        let r = req(
            vec![
                Header::new("Host", "127.0.0.1:41873"),
                Header::new("Authorization", "Bearer s3cr3t-token"),
                Header::new("X-Second", "other"),
                Header::new("Content-Type", "application/json"),
                Header::new("Idempotency-Key", "\"5b0c1c9e\""),
                Header::new("Content-Length", "7"),
            ],
            b"{\"a\":1}",
        );
        assert_eq!(
            curl_line(&r, &secrets()),
            "curl -sS -X POST 'http://127.0.0.1:41873/api/payments' \
             -H \"Authorization: Bearer $IDEM_TOKEN_A\" -H \"X-Second: $IDEM_TOKEN_B\" \
             -H 'Content-Type: application/json' -H 'Idempotency-Key: \"5b0c1c9e\"' \
             --data-raw '{\"a\":1}'"
        );
    }

    #[test]
    fn single_quotes_and_odd_bytes_are_quoted_exactly() {
        let r = req(
            vec![
                Header::new("Idempotency-Key", b"\"caf\xe9\x01\"".to_vec()),
                Header::new("X-Empty", ""),
            ],
            b"it's",
        );
        assert_eq!(
            curl_line(&r, &[]),
            "curl -sS -X POST 'http://127.0.0.1:41873/api/payments' \
             -H $'Idempotency-Key: \"caf\\xE9\\x01\"' -H 'X-Empty;' --data-raw 'it'\\''s'"
        );
    }

    #[test]
    fn credentials_without_a_known_secret_still_never_appear() {
        let r = req(
            vec![
                Header::new("Authorization", "Basic dXNlcjpwYXNz"),
                Header::new("Cookie", "sid=abc"),
            ],
            b"",
        );
        let line = curl_line(&r, &[]);
        assert!(
            line.contains("-H \"Authorization: Basic $IDEM_AUTHORIZATION\""),
            "{line}"
        );
        assert!(line.contains("-H \"Cookie: $IDEM_COOKIE\""), "{line}");
        assert!(!line.contains("dXNlcjpwYXNz") && !line.contains("sid=abc"));
    }

    #[test]
    fn a_secret_next_to_unsafe_characters_is_concatenated() {
        let r = req(vec![Header::new("X-Key", "$s3cr3t-token!x")], b"");
        assert!(curl_line(&r, &secrets()).ends_with("-H 'X-Key: $'\"$IDEM_TOKEN_A\"'!x'"));
        let glued = req(vec![Header::new("X-Key", "s3cr3t-tokenabc")], b"");
        assert!(curl_line(&glued, &secrets()).ends_with("-H \"X-Key: ${IDEM_TOKEN_A}abc\""));
    }

    #[test]
    fn a_body_with_nul_is_piped_in() {
        let r = req(vec![], b"a\0'\\s3cr3t-token");
        assert_eq!(
            curl_line(&r, &secrets()),
            "printf '%b' 'a\\0000'\\''\\\\'\"$IDEM_TOKEN_A\" | curl -sS -X POST \
             'http://127.0.0.1:41873/api/payments' --data-binary @-"
        );
    }

    #[test]
    fn variable_names_continue_after_z() {
        assert_eq!(token_var(0), "IDEM_TOKEN_A");
        assert_eq!(token_var(25), "IDEM_TOKEN_Z");
        assert_eq!(token_var(26), "IDEM_TOKEN_AA");
    }
}
