//! Keeping secrets out of every output: [`Secrets`] knows every secret of a run by role and masks
//! it wherever it reappears, in text, bytes, headers and URLs.

use std::borrow::Cow;

use base64::Engine as _;

use super::text::{bytes_inline, sanitize_line};

/// What a masked secret is replaced with, everywhere.
pub const REDACTED: &str = "[redacted]";

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
