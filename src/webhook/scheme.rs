//! The six signing schemes as their real senders sign: header names, signed content, key
//! derivation and encodings, written from the senders' documentation (Standard Webhooks, Svix,
//! Stripe, GitHub, Shopify, Slack) and cross-checked against their own libraries by
//! `scripts/webhook-sender-vendors`.

use std::time::Duration;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::http::exchange::Header;

/// A signing scheme, as `--scheme` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scheme {
    Standard,
    Svix,
    Stripe,
    Github,
    Shopify,
    Slack,
}

/// A secret the scheme's senders would not use, as `--secret` gave it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("--secret: {0}")]
pub struct BadSecret(String);

impl Scheme {
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Standard => "standard",
            Scheme::Svix => "svix",
            Scheme::Stripe => "stripe",
            Scheme::Github => "github",
            Scheme::Shopify => "shopify",
            Scheme::Slack => "slack",
        }
    }

    /// Whether a timestamp is signed (and so a stale or future one can be refused).
    pub fn signs_timestamp(self) -> bool {
        !matches!(self, Scheme::Github | Scheme::Shopify)
    }

    /// Whether one delivery carries several signatures (secret rotation).
    pub fn signs_several(self) -> bool {
        matches!(self, Scheme::Standard | Scheme::Svix | Scheme::Stripe)
    }

    /// Whether the event id is in the body (so the body template must hold `{{event_id}}`).
    pub fn id_in_body(self) -> bool {
        matches!(self, Scheme::Stripe | Scheme::Slack)
    }

    /// How far a signed timestamp may be from the consumer's clock: 5 minutes for every scheme
    /// that signs one (Standard Webhooks, Svix, Stripe, Slack all document 300 s).
    pub fn tolerance(self) -> Duration {
        Duration::from_secs(300)
    }

    /// How long the sender waits for the acknowledgement before it counts the delivery failed.
    pub fn ack_budget(self) -> Duration {
        Duration::from_secs(match self {
            Scheme::Slack => 3,
            Scheme::Shopify => 5,
            Scheme::Github => 10,
            Scheme::Standard | Scheme::Svix | Scheme::Stripe => 15,
        })
    }

    /// A new event id shaped as the scheme's senders shape theirs.
    pub fn new_event_id(self) -> String {
        let u = uuid::Uuid::new_v4();
        match self {
            Scheme::Standard | Scheme::Svix => format!("msg_{}", u.simple()),
            Scheme::Stripe => format!("evt_{}", u.simple()),
            Scheme::Github | Scheme::Shopify => u.to_string(),
            Scheme::Slack => format!("Ev{}", u.simple()),
        }
    }

    /// The HMAC key the scheme's senders derive from `secret`: Standard Webhooks and Svix
    /// decode the base64 after `whsec_`; Stripe (whose secrets also look `whsec_…`), GitHub,
    /// Shopify and Slack use the string's bytes as they are.
    pub fn key(self, secret: &str) -> Result<Vec<u8>, BadSecret> {
        if secret.is_empty() {
            return Err(BadSecret("the secret is empty".into()));
        }
        match self {
            Scheme::Standard | Scheme::Svix => {
                let Some(b64) = secret.strip_prefix("whsec_") else {
                    return Err(BadSecret(format!(
                        "{} secrets are whsec_ followed by base64 (whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw)",
                        self.name()
                    )));
                };
                match base64::engine::general_purpose::STANDARD.decode(b64) {
                    Ok(key) if !key.is_empty() => Ok(key),
                    _ => Err(BadSecret(format!(
                        "what follows whsec_ is not base64, as {} secrets are",
                        self.name()
                    ))),
                }
            }
            _ => Ok(secret.as_bytes().to_vec()),
        }
    }

    /// The headers of a delivery of `event` carrying `body`, signed at `timestamp` (seconds
    /// since the epoch) with each of `keys` in turn where the scheme carries several
    /// signatures (the others sign with the first). `retry` is the delivery's retry number
    /// (0 for the first), which Slack sends.
    pub fn headers(
        self,
        event: &EventMeta,
        body: &[u8],
        timestamp: i64,
        keys: &[&[u8]],
        retry: u32,
    ) -> Vec<Header> {
        let ts = timestamp.to_string();
        let first = keys.first().copied().unwrap_or_default();
        let mut h = vec![Header::new("Content-Type", "application/json")];
        match self {
            Scheme::Standard | Scheme::Svix => {
                let prefix = if self == Scheme::Svix {
                    "svix"
                } else {
                    "webhook"
                };
                let content = [format!("{}.{ts}.", event.id).as_bytes(), body].concat();
                let signatures: Vec<String> = keys
                    .iter()
                    .map(|k| format!("v1,{}", b64(&mac(k, &content))))
                    .collect();
                h.push(Header::new(format!("{prefix}-id"), event.id.clone()));
                h.push(Header::new(format!("{prefix}-timestamp"), ts));
                h.push(Header::new(
                    format!("{prefix}-signature"),
                    signatures.join(" "),
                ));
            }
            Scheme::Stripe => {
                let content = [format!("{ts}.").as_bytes(), body].concat();
                let v1: Vec<String> = keys
                    .iter()
                    .map(|k| format!("v1={}", hex::encode(mac(k, &content))))
                    .collect();
                h.push(Header::new(
                    "Stripe-Signature",
                    format!("t={ts},{}", v1.join(",")),
                ));
            }
            Scheme::Github => {
                h.push(Header::new(
                    "X-Hub-Signature-256",
                    format!("sha256={}", hex::encode(mac(first, body))),
                ));
                h.push(Header::new("X-GitHub-Delivery", event.id.clone()));
                h.push(Header::new("X-GitHub-Event", event.kind.clone()));
            }
            Scheme::Shopify => {
                h.push(Header::new("X-Shopify-Hmac-Sha256", b64(&mac(first, body))));
                h.push(Header::new("X-Shopify-Event-Id", event.id.clone()));
                h.push(Header::new(
                    "X-Shopify-Webhook-Id",
                    uuid::Uuid::new_v4().to_string(),
                ));
                h.push(Header::new("X-Shopify-Topic", event.kind.clone()));
                h.push(Header::new("X-Shopify-Triggered-At", rfc3339(timestamp)));
            }
            Scheme::Slack => {
                let content = [format!("v0:{ts}:").as_bytes(), body].concat();
                h.push(Header::new(
                    "X-Slack-Signature",
                    format!("v0={}", hex::encode(mac(first, &content))),
                ));
                h.push(Header::new("X-Slack-Request-Timestamp", ts));
                if retry > 0 {
                    h.push(Header::new("X-Slack-Retry-Num", retry.to_string()));
                    h.push(Header::new("X-Slack-Retry-Reason", "http_timeout"));
                }
            }
        }
        h
    }

    /// The header that carries the signed timestamp beside the signature (Stripe's is inside
    /// it; GitHub and Shopify sign none).
    pub fn timestamp_header(self) -> Option<&'static str> {
        match self {
            Scheme::Standard => Some("webhook-timestamp"),
            Scheme::Svix => Some("svix-timestamp"),
            Scheme::Slack => Some("X-Slack-Request-Timestamp"),
            Scheme::Stripe | Scheme::Github | Scheme::Shopify => None,
        }
    }

    /// The header whose event id the signature covers (Standard Webhooks and Svix sign the id
    /// header; the others sign the body, which holds it).
    pub fn signed_id_header(self) -> Option<&'static str> {
        match self {
            Scheme::Standard => Some("webhook-id"),
            Scheme::Svix => Some("svix-id"),
            Scheme::Stripe | Scheme::Github | Scheme::Shopify | Scheme::Slack => None,
        }
    }

    /// The names of the headers that carry the signature: what an unsigned delivery lacks.
    pub fn signature_headers(self) -> &'static [&'static str] {
        match self {
            Scheme::Standard => &["webhook-signature"],
            Scheme::Svix => &["svix-signature"],
            Scheme::Stripe => &["Stripe-Signature"],
            Scheme::Github => &["X-Hub-Signature-256"],
            Scheme::Shopify => &["X-Shopify-Hmac-Sha256"],
            Scheme::Slack => &["X-Slack-Signature"],
        }
    }

    /// A shell line that recomputes the signature of a delivery whose body is in `body.json`
    /// with `openssl`, the secret taken from `$IDEM_CHECK_WEBHOOK_SECRET`.
    pub fn recompute_line(self) -> &'static str {
        match self {
            Scheme::Standard | Scheme::Svix => {
                "printf '%s.%s.' \"$ID\" \"$TS\" | cat - body.json | openssl dgst -sha256 -mac HMAC -macopt hexkey:$(printf %s \"${IDEM_CHECK_WEBHOOK_SECRET#whsec_}\" | base64 -d | xxd -p -c 256) -binary | base64"
            }
            Scheme::Stripe => {
                "printf '%s.' \"$TS\" | cat - body.json | openssl dgst -sha256 -hmac \"$IDEM_CHECK_WEBHOOK_SECRET\" -r"
            }
            Scheme::Github => {
                "openssl dgst -sha256 -hmac \"$IDEM_CHECK_WEBHOOK_SECRET\" -r body.json"
            }
            Scheme::Shopify => {
                "openssl dgst -sha256 -hmac \"$IDEM_CHECK_WEBHOOK_SECRET\" -binary body.json | base64"
            }
            Scheme::Slack => {
                "printf 'v0:%s:' \"$TS\" | cat - body.json | openssl dgst -sha256 -hmac \"$IDEM_CHECK_WEBHOOK_SECRET\" -r"
            }
        }
    }
}

/// What a delivery's headers say of its event: the id and, for the schemes that name the type
/// in a header (GitHub, Shopify), the type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventMeta {
    pub id: String,
    pub kind: String,
}

/// HMAC-SHA256.
pub(super) fn mac(key: &[u8], content: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length: new_from_slice cannot fail for it.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        unreachable!("HMAC accepts keys of every length")
    };
    mac.update(content);
    mac.finalize().into_bytes().to_vec()
}

pub(super) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `timestamp` as RFC 3339, within what the format can write: 1970 to the end of 9999 (humantime
/// refuses to write a later year, which made its `Display` fail and `to_string` panic).
fn rfc3339(timestamp: i64) -> String {
    /// 9999-12-31T23:59:59Z.
    const LAST: u64 = 253_402_300_799;
    let secs = u64::try_from(timestamp).unwrap_or(0).min(LAST);
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(h: &[Header], name: &str) -> String {
        h.iter()
            .find(|x| x.name.eq_ignore_ascii_case(name))
            .map(Header::value_str)
            .unwrap_or_default()
    }

    /// A Shopify delivery's time is written whatever the timestamp: past the year 9999 it is
    /// the last second RFC 3339 can write, not a panic (found by the fuzz target
    /// `ref_webhook`).
    #[test]
    fn shopify_writes_any_timestamp() {
        let event = EventMeta {
            id: "e".into(),
            kind: "orders/create".into(),
        };
        for (at, shown) in [
            (i64::MAX, "9999-12-31T23:59:59Z"),
            (253_402_300_800, "9999-12-31T23:59:59Z"),
            (-1, "1970-01-01T00:00:00Z"),
            (1_700_000_000, "2023-11-14T22:13:20Z"),
        ] {
            let h = Scheme::Shopify.headers(&event, b"{}", at, &[b"k"], 0);
            assert_eq!(header(&h, "X-Shopify-Triggered-At"), shown);
        }
    }

    /// The Standard Webhooks specification's own example: its secret, id, timestamp and body
    /// give exactly its signature.
    #[test]
    fn standard_matches_the_specifications_example() {
        let key = Scheme::Standard
            .key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .unwrap();
        let event = EventMeta {
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek".into(),
            kind: String::new(),
        };
        let h =
            Scheme::Standard.headers(&event, br#"{"test": 2432232314}"#, 1614265330, &[&key], 0);
        assert_eq!(
            header(&h, "webhook-signature"),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn whsec_secrets_are_required_where_the_scheme_decodes_them() {
        assert!(Scheme::Standard.key("not-whsec").is_err());
        assert!(Scheme::Svix.key("whsec_!!!").is_err());
        assert!(Scheme::Github.key("anything").is_ok());
        assert!(Scheme::Stripe.key("").is_err());
    }
}
