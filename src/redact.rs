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
//! - [`cut_line`] keeps a quoted value readable at any size (a 1 MiB body quoted by a check
//!   becomes 200 characters, its size and its digest);
//! - [`Secrets`] knows every secret of a run by role (tenant A's and B's credentials, every
//!   cookie, headers whose name says key/token/secret/…, URL userinfo, secret query parameters,
//!   `--secret` values, `--redact-header` names) and masks them wherever they reappear.

use std::borrow::Cow;
use std::fmt::Write as _;

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// What a masked secret is replaced with, everywhere.
pub const REDACTED: &str = "[redacted]";

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

/// Words that make a header or query parameter name a secret's name, compared with the name
/// lower-cased and stripped of `-` and `_` (`X-Api-Key`, `x_auth_secret`, `accessToken`).
const SECRET_NAME_WORDS: [&str; 9] = [
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "session",
    "signature",
    "auth",
    "credential",
];

/// Short query parameter names that are secrets only when they are the whole name (as a
/// substring, `sig` would match `design`).
const SECRET_QUERY_NAMES: [&str; 2] = ["sig", "pwd"];

/// Names that contain a secret word but are the subject under test, never a credential: the key
/// must be shown in full, since a user searches server logs for it. The run's own key header is
/// exempt whatever its name ([`SecretSources::key_header`]); this covers the standard name and
/// its companions (`Idempotency-Key-Expires-At`) in every run.
fn is_idempotency_header(lower: &str) -> bool {
    lower.starts_with("idempotency-key")
}

fn squashed(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

/// True for a query parameter whose value is a credential (`sig`, `access_token`, `api_key`).
pub fn is_secret_query_name(name: &str) -> bool {
    let s = squashed(name);
    SECRET_QUERY_NAMES.contains(&s.as_str()) || SECRET_NAME_WORDS.iter().any(|w| s.contains(w))
}

/// One value that must never be shown, and what stands for it in a reproduce line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret {
    pub value: String,
    /// The environment variable a reproduce line uses instead (`IDEM_TOKEN_A`, `IDEM_SECRET_1`,
    /// or the target file's own `${VAR}` name).
    pub var: String,
    /// Where the value was found, for the legend under a reproduce line ("tenant A's
    /// Authorization credential").
    pub what: String,
}

/// Every secret of a run, plus the extra header names to mask (`--redact-header`).
///
/// Values are masked wherever they reappear (an echoed body, a header, a URL); header values are
/// masked by the role their name gives them even when their value is unknown (a `Set-Cookie` the
/// server chose). One instance is built per run and read by every renderer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    list: Vec<Secret>,
    headers: Vec<String>,
    /// The run's key header, lower-cased: never a secret, whatever its name says.
    key_header: Option<String>,
}

/// What a secret comes from, in the order variables are numbered.
#[derive(Debug, Clone, Default)]
pub struct SecretSources<'a> {
    /// Tenant A's header lines (`Name: value`): its first credential is `$IDEM_TOKEN_A`.
    pub tenant_a: &'a [String],
    /// Tenant B's header lines: its first credential is `$IDEM_TOKEN_B`.
    pub tenant_b: &'a [String],
    /// `--secret` values, in the order given: `$IDEM_SECRET_1`, …
    pub given: &'a [String],
    /// Every URL of the target (userinfo and secret query parameters).
    pub urls: &'a [&'a str],
    /// `${VAR}` substitutions of the target file, `(VAR, value)`: the user's names win.
    pub file_vars: &'a [(String, String)],
    /// `--redact-header` names.
    pub redact_headers: &'a [String],
    /// The header that carries the idempotency key (`X-Idempotency-Key`, `Idempotent-Key`, a
    /// target file's `key-header`): its values are shown, since they are what a reader looks
    /// up in the server's logs and what a reproduce line must send, and idem-check made them.
    pub key_header: &'a str,
}

impl Secrets {
    /// Values to mask with generic variable names (`IDEM_SECRET_1`, …), no extra header names.
    pub fn from_values<S: AsRef<str>>(values: &[S]) -> Secrets {
        let mut s = Secrets::default();
        for v in values {
            s.add_numbered(v.as_ref(), "a secret");
        }
        s
    }

    /// The secrets of a target, named by role: tenant A's first credential is `IDEM_TOKEN_A`,
    /// tenant B's `IDEM_TOKEN_B`, then `--secret` values and every other credential as
    /// `IDEM_SECRET_n`, and any value the target file took from `${VAR}` keeps the name `VAR`.
    pub fn for_target(src: &SecretSources) -> Secrets {
        let mut s = Secrets {
            list: Vec::new(),
            headers: src
                .redact_headers
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect(),
            key_header: Some(src.key_header.trim().to_ascii_lowercase()).filter(|h| !h.is_empty()),
        };
        let a = s.credentials(src.tenant_a);
        let b = s.credentials(src.tenant_b);
        // (value, role variable, what) in numbering order.
        let mut found: Vec<(String, Option<&str>, String)> = Vec::new();
        let role = |list: &[(String, String)], var, tenant: &str| {
            list.first()
                .map(|(v, w)| (v.clone(), Some(var), format!("tenant {tenant}'s {w}")))
        };
        found.extend(role(&a, "IDEM_TOKEN_A", "A"));
        found.extend(role(&b, "IDEM_TOKEN_B", "B"));
        found.extend(
            src.given
                .iter()
                .map(|v| (v.clone(), None, "--secret".to_string())),
        );
        for (list, tenant) in [(&a, "A"), (&b, "B")] {
            found.extend(
                list.iter()
                    .skip(1)
                    .map(|(v, w)| (v.clone(), None, format!("tenant {tenant}'s {w}"))),
            );
        }
        for url in src.urls {
            found.extend(url_credentials(url).into_iter().map(|(v, w)| (v, None, w)));
        }
        for (var, value) in src.file_vars {
            found.push((
                value.clone(),
                None,
                format!("${{{var}}} of the target file"),
            ));
        }
        let mut numbered = 0;
        for (value, role_var, what) in found {
            if value.trim().is_empty() || s.list.iter().any(|x| x.value == value) {
                continue;
            }
            let var = match (src.file_vars.iter().find(|(_, v)| *v == value), role_var) {
                (Some((var, _)), _) => var.clone(),
                (None, Some(var)) => var.to_string(),
                (None, None) => {
                    numbered += 1;
                    format!("IDEM_SECRET_{numbered}")
                }
            };
            s.add(&value, &var, &what);
        }
        s
    }

    /// These secrets plus `value`, shown as `$var` in reproduce lines and described as `what`
    /// (`idem-check webhook`'s signing secret is `$IDEM_CHECK_WEBHOOK_SECRET`).
    pub fn with_named(mut self, value: &str, var: &str, what: &str) -> Secrets {
        self.add(value, var, what);
        self
    }

    /// These secrets, with the values of header `name` masked too, as `--redact-header` does
    /// (a webhook signature header whose name says nothing of a secret).
    pub fn with_header(mut self, name: &str) -> Secrets {
        let lower = name.trim().to_ascii_lowercase();
        if !lower.is_empty() && !self.headers.contains(&lower) {
            self.headers.push(lower);
        }
        self
    }

    fn add(&mut self, value: &str, var: &str, what: &str) {
        if value.trim().is_empty() || self.list.iter().any(|x| x.value == value) {
            return;
        }
        self.list.push(Secret {
            value: value.to_string(),
            var: var.to_string(),
            what: what.to_string(),
        });
    }

    fn add_numbered(&mut self, value: &str, what: &str) {
        let n = 1 + self
            .list
            .iter()
            .filter(|x| x.var.starts_with("IDEM_SECRET_"))
            .count();
        self.add(value, &format!("IDEM_SECRET_{n}"), what);
    }

    /// The secrets, in the order their variables were given.
    pub fn list(&self) -> &[Secret] {
        &self.list
    }

    /// Longest first, so that a secret containing another is masked (or named) whole.
    pub fn ordered(&self) -> Vec<&Secret> {
        let mut v: Vec<&Secret> = self.list.iter().collect();
        v.sort_by_key(|s| std::cmp::Reverse(s.value.len()));
        v
    }

    /// True for headers whose value is a credential whatever it contains: `Authorization`,
    /// `Proxy-Authorization`, cookies, any name with a secret word in it (`X-Api-Key`,
    /// `X-Auth-Secret`, `Session-Id`), and the `--redact-header` names; never the key header.
    pub fn is_secret_header(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        if is_idempotency_header(&lower) || self.key_header.as_ref() == Some(&lower) {
            return false;
        }
        let s = squashed(name);
        lower == "cookie"
            || lower == "set-cookie"
            || SECRET_NAME_WORDS.iter().any(|w| s.contains(w))
            || self.headers.contains(&lower)
    }

    /// The credentials in header lines, by role, with what they are: the value after an
    /// `Authorization` scheme, every cookie's value, the whole value of any other secret header.
    fn credentials(&self, lines: &[String]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let headers = lines
            .iter()
            .filter_map(|l| l.split_once(':'))
            .map(|(name, value)| (name.trim(), value.trim()));
        for (name, v) in headers.filter(|(name, _)| self.is_secret_header(name)) {
            let lower = name.to_ascii_lowercase();
            if lower.ends_with("authorization") {
                let cred = match auth_scheme(v.as_bytes()) {
                    Some(scheme) => v[scheme.len()..].trim().to_string(),
                    None => v.to_string(),
                };
                out.push((cred, format!("{name} credential")));
            } else if lower == "cookie" {
                for pair in v.split(';') {
                    let (name, value) = pair.split_once('=').unwrap_or(("", pair));
                    out.push((value.trim().to_string(), format!("cookie {}", name.trim())));
                }
            } else {
                out.push((v.to_string(), name.to_string()));
            }
        }
        out
    }

    /// Replaces every occurrence of every secret with [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        match self.redact_bytes(text.as_bytes()) {
            // Secrets are whole strings and the mask is ASCII, so the result is still UTF-8.
            Cow::Owned(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Cow::Borrowed(_) => text.to_string(),
        }
    }

    /// [`Secrets::redact`] on raw bytes, applied to bodies *before* they are cut to size, so a
    /// secret that straddles the cut cannot leak its first half.
    pub fn redact_bytes<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        let mut out: Cow<'a, [u8]> = Cow::Borrowed(bytes);
        for s in self.ordered() {
            let needle = s.value.as_bytes();
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

    /// True when `value` contains a known secret.
    pub fn carries_secret(&self, value: &[u8]) -> bool {
        self.list
            .iter()
            .any(|s| find_secret(value, s.value.as_bytes()).is_some())
    }

    /// The header rule: `Some(masked)` when the value must not be shown, `None` when it may be.
    ///
    /// `*Authorization` keeps its scheme (`Bearer [redacted]`: "which scheme was sent" is often
    /// what a reader checks), cookies keep their names (`sid=[redacted]; theme=[redacted]`),
    /// `Set-Cookie` its attributes; any other secret header, or any value holding a known
    /// secret, is masked whole.
    pub fn mask_header(&self, name: &str, value: &[u8]) -> Option<String> {
        if !self.is_secret_header(name) && !self.carries_secret(value) {
            return None;
        }
        let lower = name.to_ascii_lowercase();
        if lower.ends_with("authorization") {
            if let Some(scheme) = auth_scheme(value) {
                return Some(format!("{scheme} {REDACTED}"));
            }
        }
        let text = String::from_utf8_lossy(value);
        let mask_pair = |pair: &str| match pair.split_once('=') {
            Some((n, _)) => format!("{}={REDACTED}", sanitize_line(n.trim())),
            None => REDACTED.to_string(),
        };
        if lower == "cookie" {
            return Some(
                text.split(';')
                    .map(mask_pair)
                    .collect::<Vec<_>>()
                    .join("; "),
            );
        }
        if lower == "set-cookie" {
            let mut parts = text.split(';');
            let first = mask_pair(parts.next().unwrap_or_default());
            let attrs: Vec<String> = parts
                .map(|a| self.redact(&sanitize_line(a.trim())))
                .collect();
            return Some(
                std::iter::once(first)
                    .chain(attrs)
                    .collect::<Vec<_>>()
                    .join("; "),
            );
        }
        Some(REDACTED.to_string())
    }

    /// A header value ready for text output: masked by [`Secrets::mask_header`], otherwise
    /// [`bytes_inline`].
    pub fn header_value_for_text(&self, name: &str, value: &[u8]) -> String {
        self.mask_header(name, value)
            .unwrap_or_else(|| bytes_inline(value))
    }

    /// A URL for text output: userinfo and the values of secret query parameters masked by
    /// role (even when the value is not a known secret, e.g. in a `Location` the server sent),
    /// then every known secret.
    pub fn url_for_text(&self, url: &str) -> String {
        self.redact(&mask_url(url))
    }
}

/// A text the run uses as it is but shows only masked: a shell command of the user's
/// (`--count-cmd`, `--restart-cmd`, the store-outage commands) holds the target file's `${VAR}`
/// values expanded, and may hold any other secret of the run. Its `Debug` is the masked text,
/// so a `{:?}` of what holds it (a log line, a panic message) shows no secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Masked {
    text: String,
    shown: String,
}

impl Masked {
    /// `text`, shown with every one of `secrets` masked.
    pub fn new(text: &str, secrets: &Secrets) -> Masked {
        Masked {
            text: text.to_string(),
            shown: secrets.redact(text),
        }
    }

    /// The text itself: what is run, and what evidence quotes (its renderers mask it).
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Debug for Masked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.shown, f)
    }
}

/// A URL with its userinfo and the values of its secret query parameters replaced by
/// [`REDACTED`], done on the text so that nothing else about the URL changes.
pub fn mask_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) if userinfo.contains(':') => {
            format!("{REDACTED}:{REDACTED}@{host}")
        }
        Some((_, host)) => format!("{REDACTED}@{host}"),
        None => authority.to_string(),
    };
    let (before_fragment, fragment) = tail.split_at(tail.find('#').unwrap_or(tail.len()));
    let tail = match before_fragment.split_once('?') {
        Some((path, query)) => {
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, _)) if is_secret_query_name(k) => format!("{k}={REDACTED}"),
                    _ => pair.to_string(),
                })
                .collect();
            format!("{path}?{}{fragment}", pairs.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}{authority}{tail}")
}

/// Credentials in a URL: userinfo and the values of secret query parameters.
fn url_credentials(url: &str) -> Vec<(String, String)> {
    let Ok(u) = url::Url::parse(url) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let decode = |s: &str| {
        url::form_urlencoded::parse(format!("x={s}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    if !u.username().is_empty() {
        out.push((u.username().to_string(), "the user name in a URL".into()));
        if decode(u.username()) != u.username() {
            out.push((decode(u.username()), "the user name in a URL".into()));
        }
    }
    if let Some(p) = u.password() {
        out.push((p.to_string(), "the password in a URL".into()));
        if decode(p) != p {
            out.push((decode(p), "the password in a URL".into()));
        }
        // HTTP clients send userinfo as `Authorization: Basic base64(user:password)`, which a
        // server may echo back.
        let basic = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            decode(u.username()),
            decode(p)
        ));
        out.push((basic, "the URL's userinfo as Basic credentials".into()));
    }
    for pair in u.query().unwrap_or_default().split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if is_secret_query_name(&decode(k)) && !v.is_empty() {
            let what = format!("query parameter {}", decode(k));
            out.push((v.to_string(), what.clone()));
            if decode(v) != v {
                out.push((decode(v), what));
            }
        }
    }
    out
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

    fn secrets() -> Secrets {
        Secrets::from_values(&["s3cr3t-token"])
    }

    #[test]
    fn short_secrets_are_masked_only_where_they_stand_alone() {
        let s = Secrets::from_values(&["ta"]);
        assert_eq!(s.redact("restart the target"), "restart the target");
        assert_eq!(s.redact("Bearer ta"), format!("Bearer {REDACTED}"));
        assert_eq!(
            s.redact("{\"t\":\"ta\"}"),
            format!("{{\"t\":\"{REDACTED}\"}}")
        );
        assert_eq!(secrets().redact("xs3cr3t-tokenx"), format!("x{REDACTED}x"));
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

    #[test]
    fn secrets_are_masked_in_text_and_bytes() {
        assert_eq!(secrets().redact("token=s3cr3t-token;"), "token=[redacted];");
        assert_eq!(
            secrets().redact_bytes(b"\xffs3cr3t-token\xff").as_ref(),
            b"\xff[redacted]\xff"
        );
        let longest_first = Secrets::from_values(&["abc", "abcdef"]);
        assert_eq!(longest_first.redact("abcdef abc"), "[redacted] [redacted]");
        assert_eq!(Secrets::from_values(&[""]).redact("x"), "x");
    }

    #[test]
    fn headers_are_masked_by_role() {
        let none = Secrets::default();
        let mask = |n: &str, v: &str| none.mask_header(n, v.as_bytes());
        assert_eq!(
            mask("Authorization", "Bearer abc").as_deref(),
            Some("Bearer [redacted]")
        );
        assert_eq!(
            mask("proxy-authorization", "Basic abc").as_deref(),
            Some("Basic [redacted]")
        );
        assert_eq!(
            mask("cookie", "sid=1; theme=x").as_deref(),
            Some("sid=[redacted]; theme=[redacted]")
        );
        assert_eq!(
            mask("Set-Cookie", "sid=1; Path=/").as_deref(),
            Some("sid=[redacted]; Path=/")
        );
        for name in [
            "X-Apikey",
            "X-Auth-Secret",
            "x_session_id",
            "X-Signature",
            "X-Passwd",
            "X-Credential",
        ] {
            assert_eq!(mask(name, "v").as_deref(), Some(REDACTED), "{name}");
        }
        assert_eq!(mask("Idempotency-Key", "\"k\""), None);
        assert_eq!(mask("Idempotency-Key-Expires-At", "x"), None);
        assert_eq!(mask("content-type", "text/plain"), None);
        assert_eq!(
            secrets()
                .mask_header("x-anything", b"s3cr3t-token")
                .as_deref(),
            Some(REDACTED)
        );
        let extra = Secrets::for_target(&SecretSources {
            redact_headers: &["X-Tenant".to_string()],
            ..SecretSources::default()
        });
        assert_eq!(
            extra.mask_header("x-tenant", b"acme").as_deref(),
            Some(REDACTED)
        );
    }

    #[test]
    fn the_key_header_is_never_a_secret() {
        let a = [
            "Authorization: Bearer zzz-tenant-a".to_string(),
            "X-Idempotency-Key: fixed-key-from-a-header".to_string(),
        ];
        let s = Secrets::for_target(&SecretSources {
            tenant_a: &a,
            key_header: "X-Idempotency-Key",
            ..SecretSources::default()
        });
        assert_eq!(s.mask_header("x-idempotency-key", b"\"k\""), None);
        assert_eq!(s.list().len(), 1, "{:?}", s.list());
        assert_eq!(
            s.mask_header("X-Api-Key", b"v").as_deref(),
            Some(REDACTED),
            "other names keep the rules"
        );
    }

    #[test]
    fn variables_are_named_by_role_not_by_value() {
        let a = [
            "Authorization: Bearer zzz-tenant-a".to_string(),
            "Cookie: sid=c00kie-value; t=theme-value".to_string(),
        ];
        let b = ["Authorization: Bearer aaa-tenant-b".to_string()];
        let vars = [("MY_TOKEN".to_string(), "theme-value".to_string())];
        let s = Secrets::for_target(&SecretSources {
            tenant_a: &a,
            tenant_b: &b,
            given: &["given-secret".to_string()],
            urls: &["https://user:pa%24s@h/x?sig=abc123&page=2"],
            file_vars: &vars,
            redact_headers: &[],
            key_header: "Idempotency-Key",
        });
        let named: Vec<(&str, &str)> = s
            .list()
            .iter()
            .map(|x| (x.var.as_str(), x.value.as_str()))
            .collect();
        assert_eq!(
            named,
            vec![
                ("IDEM_TOKEN_A", "zzz-tenant-a"),
                ("IDEM_TOKEN_B", "aaa-tenant-b"),
                ("IDEM_SECRET_1", "given-secret"),
                ("IDEM_SECRET_2", "c00kie-value"),
                ("MY_TOKEN", "theme-value"),
                ("IDEM_SECRET_3", "user"),
                ("IDEM_SECRET_4", "pa%24s"),
                ("IDEM_SECRET_5", "pa$s"),
                ("IDEM_SECRET_6", "dXNlcjpwYSRz"),
                ("IDEM_SECRET_7", "abc123"),
            ]
        );
        assert_eq!(s.list()[0].what, "tenant A's Authorization credential");
    }

    #[test]
    fn urls_lose_userinfo_and_secret_query_values() {
        let s = Secrets::default();
        assert_eq!(
            s.url_for_text("https://u:p@h/a?sig=1&page=2&access_token=x#f"),
            "https://[redacted]:[redacted]@h/a?sig=[redacted]&page=2&access_token=[redacted]#f"
        );
        assert_eq!(s.url_for_text("http://h/a?page=2"), "http://h/a?page=2");
    }
}
