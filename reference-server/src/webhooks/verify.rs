//! Signature verification over the raw body bytes, as each scheme's own libraries do it: every
//! signature the delivery carries is tried against every configured secret (rotation, and two
//! sources), the MAC is compared in constant time (`Mac::verify_slice`), and a signed timestamp
//! must be within [`TOLERANCE_SECS`] of now, in the past and in the future.

use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::schemes::{Encoding, Scheme};

/// How far a signed timestamp may be from now, either way (the senders' libraries use 5 min).
pub const TOLERANCE_SECS: i64 = 300;

/// Which configured secret verified a delivery: dedupe is scoped by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    A,
    B,
}

impl Source {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Source::A => "a",
            Source::B => "b",
        }
    }
}

/// What verification enforces; the correct consumer enforces all of it, and the faults that
/// weaken verification switch a part off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rules {
    /// A timestamp older than the tolerance is refused.
    pub(crate) past: bool,
    /// A timestamp further in the future than the tolerance is refused.
    pub(crate) future: bool,
    /// Every signature the delivery carries is tried, not only the first.
    pub(crate) every_signature: bool,
    /// A delivery without a signature header is refused.
    pub(crate) signature_required: bool,
}

impl Rules {
    pub(crate) const CORRECT: Rules = Rules {
        past: true,
        future: true,
        every_signature: true,
        signature_required: true,
    };
}

/// Why a delivery was refused: the status says whether it was malformed or not authentic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct Refused {
    pub(crate) status: StatusCode,
    pub(crate) detail: String,
}

impl Refused {
    pub(crate) fn malformed(detail: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            detail: detail.into(),
        }
    }

    fn unauthentic(detail: impl Into<String>) -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            detail: detail.into(),
        }
    }
}

/// Verifies a delivery of `scheme` whose body is `body` against `secrets` (source A first),
/// at `now` (seconds since the epoch). Returns the source whose secret signed it.
pub(crate) fn verify(
    scheme: Scheme,
    headers: &HeaderMap,
    body: &[u8],
    secrets: &[(Source, &str)],
    now: i64,
    rules: Rules,
) -> Result<Source, Refused> {
    let Some(signature_header) = header(headers, scheme.signature_header()) else {
        return if rules.signature_required {
            Err(Refused::unauthentic(format!(
                "no {} header",
                scheme.signature_header()
            )))
        } else {
            Ok(Source::A)
        };
    };
    let signed = parse_signature_header(scheme, signature_header, headers)?;
    // Standard Webhooks and Svix sign the id too.
    let id = match scheme.id_header() {
        Some(name) if matches!(scheme, Scheme::Standard | Scheme::Svix) => {
            header(headers, name).ok_or_else(|| Refused::malformed(format!("no {name} header")))?
        }
        _ => "",
    };
    let timestamp = signed.timestamp.unwrap_or_default();
    let content = scheme.signed_content(id, timestamp, body);
    let tried = if rules.every_signature {
        &signed.macs[..]
    } else {
        &signed.macs[..signed.macs.len().min(1)]
    };
    let source = secrets
        .iter()
        .find(|(_, secret)| {
            let key = scheme.key(secret);
            tried.iter().any(|mac| matches(&key, &content, mac))
        })
        .map(|(source, _)| *source)
        .ok_or_else(|| Refused::unauthentic("no signature matches a configured secret"))?;
    if let Some(timestamp) = signed.timestamp {
        let at: i64 = timestamp.trim().parse().map_err(|_| {
            Refused::malformed(format!("timestamp {timestamp:?} is not an integer"))
        })?;
        // Saturating: a signed timestamp can be any integer, and a difference that does not
        // fit is still far outside the tolerance.
        let age = now.saturating_sub(at);
        if rules.past && age > TOLERANCE_SECS {
            return Err(Refused::unauthentic(format!(
                "timestamp {at} is {age} s old; the tolerance is {TOLERANCE_SECS} s"
            )));
        }
        let ahead = at.saturating_sub(now);
        if rules.future && ahead > TOLERANCE_SECS {
            return Err(Refused::unauthentic(format!(
                "timestamp {at} is {ahead} s in the future; the tolerance is {TOLERANCE_SECS} s"
            )));
        }
    }
    Ok(source)
}

/// The signatures of one delivery and the timestamp they sign (if the scheme signs one).
struct Signed<'a> {
    timestamp: Option<&'a str>,
    /// Each MAC as sent, decoded; an entry that does not decode can match nothing.
    macs: Vec<Vec<u8>>,
}

/// Reads the signature header (and the timestamp header) the way the scheme writes them.
fn parse_signature_header<'a>(
    scheme: Scheme,
    value: &'a str,
    headers: &'a HeaderMap,
) -> Result<Signed<'a>, Refused> {
    let decode = |text: &str| decode(scheme.encoding(), text);
    let timestamp = match scheme.timestamp_header() {
        Some(name) => Some(
            header(headers, name).ok_or_else(|| Refused::malformed(format!("no {name} header")))?,
        ),
        None => None,
    };
    let macs = match scheme {
        // `v1,<base64> v1,<base64>`: one entry per secret in rotation; other versions skipped.
        Scheme::Standard | Scheme::Svix => value
            .split(' ')
            .filter_map(|entry| entry.strip_prefix("v1,"))
            .map(decode)
            .collect(),
        // `t=<ts>,v1=<hex>,v1=<hex>,v0=…`: the timestamp is inside.
        Scheme::Stripe => {
            let pairs: Vec<(&str, &str)> = value
                .split(',')
                .filter_map(|pair| pair.trim().split_once('='))
                .collect();
            let t = pairs
                .iter()
                .find(|(k, _)| *k == "t")
                .map(|(_, v)| *v)
                .ok_or_else(|| Refused::malformed("Stripe-Signature has no t="))?;
            return Ok(Signed {
                timestamp: Some(t),
                macs: pairs
                    .iter()
                    .filter(|(k, _)| *k == "v1")
                    .map(|(_, v)| decode(v))
                    .collect(),
            });
        }
        Scheme::Github => value
            .strip_prefix("sha256=")
            .map(decode)
            .into_iter()
            .collect(),
        Scheme::Slack => value.strip_prefix("v0=").map(decode).into_iter().collect(),
        Scheme::Shopify => vec![decode(value)],
    };
    Ok(Signed { timestamp, macs })
}

/// `text` decoded, or nothing (which matches no MAC) if it does not decode.
fn decode(encoding: Encoding, text: &str) -> Vec<u8> {
    match encoding {
        Encoding::Base64 => base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .unwrap_or_default(),
        Encoding::Hex => hex::decode(text.trim()).unwrap_or_default(),
    }
}

/// Whether `mac` is HMAC-SHA256(`key`, `content`), compared in constant time.
fn matches(key: &[u8], content: &[u8], mac: &[u8]) -> bool {
    let Ok(mut hmac) = Hmac::<Sha256>::new_from_slice(key) else {
        return false;
    };
    hmac.update(content);
    !mac.is_empty() && hmac.verify_slice(mac).is_ok()
}

/// The value of header `name` as text, if present and visible ASCII.
pub(crate) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(key: &[u8], content: &[u8]) -> Vec<u8> {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
        mac.update(content);
        mac.finalize().into_bytes().to_vec()
    }

    /// GitHub's documented example: secret "It's a Secret to Everybody", body "Hello, World!".
    #[test]
    fn github_documented_example_verifies() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-hub-signature-256",
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
                .parse()
                .unwrap(),
        );
        let secrets = [(Source::A, "It's a Secret to Everybody")];
        let verified = verify(
            Scheme::Github,
            &headers,
            b"Hello, World!",
            &secrets,
            0,
            Rules::CORRECT,
        );
        assert_eq!(verified, Ok(Source::A));
        let tampered = verify(
            Scheme::Github,
            &headers,
            b"Hello, World?",
            &secrets,
            0,
            Rules::CORRECT,
        );
        assert_eq!(tampered.unwrap_err().status, StatusCode::UNAUTHORIZED);
    }

    /// A signed timestamp at either end of the integers is refused for its time, not a
    /// panic on the difference (the fuzz target `ref_webhook` signs deliveries at any time).
    #[test]
    fn timestamps_far_from_now_are_refused_without_overflow() {
        let secret = "whsec_test";
        for at in [i64::MIN, i64::MAX] {
            let body = br#"{"id":"evt_1"}"#;
            let content = [format!("{at}.").as_bytes(), body].concat();
            let value = format!(
                "t={at},v1={}",
                hex::encode(sign(secret.as_bytes(), &content))
            );
            let mut headers = HeaderMap::new();
            headers.insert("stripe-signature", value.parse().unwrap());
            for now in [0, 1_700_000_000] {
                let refused = verify(
                    Scheme::Stripe,
                    &headers,
                    body,
                    &[(Source::A, secret)],
                    now,
                    Rules::CORRECT,
                );
                assert_eq!(
                    refused.unwrap_err().status,
                    StatusCode::UNAUTHORIZED,
                    "{at} at {now}"
                );
            }
        }
    }

    #[test]
    fn stripe_tries_every_v1_and_checks_both_directions() {
        let secret = "whsec_test";
        let body = br#"{"id":"evt_1"}"#;
        let good = hex::encode(sign(secret.as_bytes(), b"1000.{\"id\":\"evt_1\"}"));
        let value = format!("t=1000,v1={},v1={good}", "00".repeat(32));
        let mut headers = HeaderMap::new();
        headers.insert("stripe-signature", value.parse().unwrap());
        let secrets = [(Source::A, "whsec_other"), (Source::B, secret)];
        let at = |now, rules| verify(Scheme::Stripe, &headers, body, &secrets, now, rules);
        assert_eq!(at(1000, Rules::CORRECT), Ok(Source::B));
        assert!(at(1301, Rules::CORRECT).is_err());
        assert!(at(699, Rules::CORRECT).is_err());
        let age_only = Rules {
            future: false,
            ..Rules::CORRECT
        };
        assert_eq!(at(699, age_only), Ok(Source::B));
        let first_only = Rules {
            every_signature: false,
            ..Rules::CORRECT
        };
        assert!(at(1000, first_only).is_err());
    }
}
