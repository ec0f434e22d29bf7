//! A recorded request as a curl command a user can paste into a shell to replay it.
//!
//! The line reproduces the bytes that were *sent* (hurl's `curl_cmd.rs` does the same), with two
//! exceptions that keep it safe to paste into a CI log:
//!
//! - each secret becomes the environment variable [`crate::redact::Secrets`] named by its role:
//!   `$IDEM_SECRET_1` is always tenant A's credential, `$IDEM_SECRET_2` tenant B's, other secrets
//!   `$IDEM_SECRET_1`, … in the order given, and a target file's `${VAR}` keeps its own name, so
//!   the reader exports them once (the legend under the line says which is which) and reruns;
//! - a credential header holding no known secret keeps its scheme and gets `$IDEM_AUTHORIZATION`
//!   / `$IDEM_COOKIE` / … instead of its value.
//!
//! `curl -i` prints the status line, which is usually what the reader wants to see again.
//!
//! Quoting: plain printable ASCII goes in single quotes; a word holding a variable goes in double
//! quotes (as in `-H "Authorization: Bearer $IDEM_SECRET_1"`); bytes outside printable ASCII use
//! bash's `$'\x..'` quoting, since the key-syntax probes send such bytes on purpose. A body with a
//! NUL byte cannot be a shell argument at all, so it is piped in through `printf`.
//! `Host` and `Content-Length` are left to curl, which derives them from the URL and the body.

use std::fmt::Write as _;

use crate::http::exchange::SentRequest;
use crate::redact::{auth_scheme, secret_at, Secrets};

/// One piece of a shell word: bytes to quote, or an environment variable to expand.
#[derive(Debug, PartialEq)]
enum Part {
    Bytes(Vec<u8>),
    Var(String),
}

/// Splits `bytes` at every occurrence of a secret, which becomes its variable.
fn split_secrets(bytes: &[u8], secrets: &Secrets) -> Vec<Part> {
    // Longest secret first, so a secret containing another one is replaced whole.
    let order = secrets.ordered();
    let mut parts = Vec::new();
    let mut literal = Vec::new();
    let mut pos = 0;
    'scan: while pos < bytes.len() {
        for secret in &order {
            let s = secret.value.as_bytes();
            if secret_at(bytes, pos, s) {
                if !literal.is_empty() {
                    parts.push(Part::Bytes(std::mem::take(&mut literal)));
                }
                parts.push(Part::Var(secret.var.clone()));
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
fn header_parts(name: &str, value: &[u8], secrets: &Secrets) -> Vec<Part> {
    let carries_secret = secrets.carries_secret(value);
    let mut parts = vec![Part::Bytes(name.as_bytes().to_vec())];
    if value.is_empty() {
        // `Name;` is curl's syntax for an empty value (`Name:` would remove the header).
        parts.push(Part::Bytes(b";".to_vec()));
        return merge(parts);
    }
    parts.push(Part::Bytes(b": ".to_vec()));
    if secrets.is_secret_header(name) && !carries_secret {
        let var = header_var(name);
        if let Some(scheme) = auth_scheme(value) {
            parts.push(Part::Bytes(format!("{scheme} ").into_bytes()));
        }
        parts.push(Part::Var(var));
    } else {
        parts.extend(split_secrets(value, secrets));
    }
    merge(parts)
}

/// A header value with each secret in it written `${VAR}` (its reproduce variable), as
/// `idem-check reproduce` fills it in again from the environment: `Bearer ${IDEM_TOKEN_A}`.
/// `None` when the value shows no secret. A credential header whose value is no known secret
/// gets the variable a curl line uses for it (`${IDEM_AUTHORIZATION}`).
pub fn value_template(name: &str, value: &[u8], secrets: &Secrets) -> Option<String> {
    let parts = header_parts(name, value, secrets);
    if !parts.iter().any(|p| matches!(p, Part::Var(_))) {
        return None;
    }
    let mut out = String::new();
    for part in parts.iter().skip(1) {
        match part {
            Part::Bytes(b) => out.push_str(&String::from_utf8_lossy(b)),
            Part::Var(v) => {
                let _ = write!(out, "${{{v}}}");
            }
        }
    }
    // The first part is `Name: `; the template is the value alone.
    Some(match parts.first() {
        Some(Part::Bytes(head)) => {
            let head = String::from_utf8_lossy(head);
            let prefix = format!("{name}: ");
            let rest = head.strip_prefix(&prefix).unwrap_or_default();
            format!("{rest}{out}")
        }
        _ => out,
    })
}

/// The variable a curl line sends instead of the value of the credential header `name`
/// (`webhook-signature` → `IDEM_WEBHOOK_SIGNATURE`).
pub fn header_var(name: &str) -> String {
    format!("IDEM_{}", name.to_ascii_uppercase().replace('-', "_"))
}

/// `bytes` as one shell word, quoted as the curl lines quote a literal (single quotes, or
/// bash's `$'…'` for bytes outside printable ASCII).
pub fn shell_word(bytes: &[u8]) -> String {
    quote(&[Part::Bytes(bytes.to_vec())])
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

/// A curl command and the variables it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurlLine {
    /// The command, ready to paste once the variables are exported.
    pub text: String,
    /// The environment variables the command reads, in order of first use.
    pub vars: Vec<String>,
}

/// The curl command line replaying `req`; secrets appear only as environment variables.
pub fn curl_line(req: &SentRequest, secrets: &Secrets) -> CurlLine {
    let mut vars = Vec::new();
    let mut note = |parts: &[Part]| {
        for p in parts {
            if let Part::Var(v) = p {
                if !vars.contains(v) {
                    vars.push(v.clone());
                }
            }
        }
    };
    let has_nul = req.body.contains(&0);
    let mut line = String::new();
    if has_nul {
        line.push_str("printf '%b' ");
        let parts = split_secrets(&req.body, secrets);
        note(&parts);
        for part in parts {
            match part {
                Part::Bytes(b) => line.push_str(&printf_b_quoted(&b)),
                Part::Var(v) => {
                    let _ = write!(line, "\"${v}\"");
                }
            }
        }
        line.push_str(" | ");
    }
    line.push_str("curl -i -sS");
    if req.method != "GET" || !req.body.is_empty() {
        // Methods are tokens; an odd one (the probes never send one) is quoted like any word.
        let method = if req.method.bytes().all(|b| b.is_ascii_alphabetic()) {
            req.method.clone()
        } else {
            quote(&[Part::Bytes(req.method.as_bytes().to_vec())])
        };
        let _ = write!(line, " -X {method}");
    }
    let url = split_secrets(req.url.as_bytes(), secrets);
    note(&url);
    let _ = write!(line, " {}", quote(&url));
    for h in &req.headers {
        if h.name.eq_ignore_ascii_case("host") || h.name.eq_ignore_ascii_case("content-length") {
            continue;
        }
        let parts = header_parts(&h.name, &h.value, secrets);
        note(&parts);
        let _ = write!(line, " -H {}", quote(&parts));
    }
    if has_nul {
        line.push_str(" --data-binary @-");
    } else if !req.body.is_empty() {
        let parts = merge(split_secrets(&req.body, secrets));
        note(&parts);
        let _ = write!(line, " --data-raw {}", quote(&parts));
    }
    CurlLine { text: line, vars }
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

    fn secrets() -> Secrets {
        Secrets::from_values(&["s3cr3t-token", "other"])
    }

    fn line(r: &SentRequest, s: &Secrets) -> String {
        curl_line(r, s).text
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
            line(&r, &secrets()),
            "curl -i -sS -X POST 'http://127.0.0.1:41873/api/payments' \
             -H \"Authorization: Bearer $IDEM_SECRET_1\" -H \"X-Second: $IDEM_SECRET_2\" \
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
            line(&r, &Secrets::default()),
            "curl -i -sS -X POST 'http://127.0.0.1:41873/api/payments' \
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
        let line = line(&r, &Secrets::default());
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
        assert!(line(&r, &secrets()).ends_with("-H 'X-Key: $'\"$IDEM_SECRET_1\"'!x'"));
        let glued = req(vec![Header::new("X-Key", "s3cr3t-tokenabc")], b"");
        assert!(line(&glued, &secrets()).ends_with("-H \"X-Key: ${IDEM_SECRET_1}abc\""));
    }

    #[test]
    fn a_body_with_nul_is_piped_in() {
        let r = req(vec![], b"a\0'\\s3cr3t-token");
        assert_eq!(
            line(&r, &secrets()),
            "printf '%b' 'a\\0000'\\''\\\\'\"$IDEM_SECRET_1\" | curl -i -sS -X POST \
             'http://127.0.0.1:41873/api/payments' --data-binary @-"
        );
    }

    #[test]
    fn the_variables_used_are_listed_once() {
        let r = req(
            vec![
                Header::new("Cookie", "a=s3cr3t-token; b=other"),
                Header::new("X-Again", "s3cr3t-token"),
            ],
            b"",
        );
        let c = curl_line(&r, &secrets());
        assert_eq!(c.vars, vec!["IDEM_SECRET_1", "IDEM_SECRET_2"]);
        assert!(
            c.text
                .contains("-H \"Cookie: a=$IDEM_SECRET_1; b=$IDEM_SECRET_2\""),
            "{}",
            c.text
        );
    }
}
