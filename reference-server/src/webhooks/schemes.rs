//! The six signing schemes as their real senders use them: header names, what is signed, how
//! the secret becomes the HMAC key, where the event id and type are, and which event types this
//! consumer handles. Everything scheme-specific lives here; `verify` and `handler` only ask.

use std::fmt;
use std::str::FromStr;

use axum::http::HeaderMap;

use crate::config::decode_whsec;

/// A webhook signing scheme, named as in `POST /webhooks/{scheme}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>`.
    Standard,
    /// Svix: Standard Webhooks with `svix-` header names.
    Svix,
    /// Stripe: `Stripe-Signature: t=…,v1=<hex>`, the event id is `id` in the body.
    Stripe,
    /// GitHub: `X-Hub-Signature-256: sha256=<hex>` over the body, no signed timestamp.
    Github,
    /// Shopify: `X-Shopify-Hmac-Sha256: <base64>` over the body, no signed timestamp.
    Shopify,
    /// Slack: `X-Slack-Signature: v0=<hex>` over `v0:{timestamp}:{body}`, `event_id` in the body.
    Slack,
}

/// How a scheme encodes its MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    Base64,
    Hex,
}

impl Scheme {
    /// Every scheme, in the order of the interface.
    pub const ALL: &[Scheme] = &[
        Scheme::Standard,
        Scheme::Svix,
        Scheme::Stripe,
        Scheme::Github,
        Scheme::Shopify,
        Scheme::Slack,
    ];

    /// The path segment and `--scheme` name.
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

    /// Whether the signature covers a timestamp (and so a tolerance applies).
    pub fn signs_timestamp(self) -> bool {
        !matches!(self, Scheme::Github | Scheme::Shopify)
    }

    /// Whether one delivery may carry several signatures (secret rotation).
    pub fn signs_several(self) -> bool {
        matches!(self, Scheme::Standard | Scheme::Svix | Scheme::Stripe)
    }

    /// Whether the event id travels in the body (so two events cannot have identical bodies).
    pub fn id_in_body(self) -> bool {
        matches!(self, Scheme::Stripe | Scheme::Slack)
    }

    /// The HMAC key a sender uses for `secret` (`whsec_<base64>`): Standard Webhooks and Svix
    /// decode the base64 after the prefix; Stripe uses its `whsec_…` string as it is, and
    /// GitHub, Shopify and Slack take any string, so the whole string is the key.
    pub(crate) fn key(self, secret: &str) -> Vec<u8> {
        match self {
            Scheme::Standard | Scheme::Svix => decode_whsec(secret).unwrap_or_default(),
            _ => secret.as_bytes().to_vec(),
        }
    }

    /// The headers of Standard Webhooks or Svix: id, timestamp, signature.
    fn standard_headers(self) -> Option<[&'static str; 3]> {
        match self {
            Scheme::Standard => Some(["webhook-id", "webhook-timestamp", "webhook-signature"]),
            Scheme::Svix => Some(["svix-id", "svix-timestamp", "svix-signature"]),
            _ => None,
        }
    }

    /// The header that carries the signature(s).
    pub(crate) fn signature_header(self) -> &'static str {
        match self.standard_headers() {
            Some([_, _, signature]) => signature,
            None => match self {
                Scheme::Stripe => "stripe-signature",
                Scheme::Github => "x-hub-signature-256",
                Scheme::Shopify => "x-shopify-hmac-sha256",
                _ => "x-slack-signature",
            },
        }
    }

    /// The header that carries the signed timestamp, where it has one of its own (Stripe's is
    /// inside its signature header).
    pub(crate) fn timestamp_header(self) -> Option<&'static str> {
        match self.standard_headers() {
            Some([_, timestamp, _]) => Some(timestamp),
            None => (self == Scheme::Slack).then_some("x-slack-request-timestamp"),
        }
    }

    /// The header that carries the event id, for the schemes that keep it in a header.
    pub(crate) fn id_header(self) -> Option<&'static str> {
        match self.standard_headers() {
            Some([id, _, _]) => Some(id),
            None => match self {
                Scheme::Github => Some("x-github-delivery"),
                Scheme::Shopify => Some("x-shopify-event-id"),
                _ => None,
            },
        }
    }

    /// The header that carries the event type, for the schemes that keep it in a header.
    pub(crate) fn type_header(self) -> Option<&'static str> {
        match self {
            Scheme::Github => Some("x-github-event"),
            Scheme::Shopify => Some("x-shopify-topic"),
            _ => None,
        }
    }

    /// How the MAC is written.
    pub(crate) fn encoding(self) -> Encoding {
        match self {
            Scheme::Standard | Scheme::Svix | Scheme::Shopify => Encoding::Base64,
            Scheme::Stripe | Scheme::Github | Scheme::Slack => Encoding::Hex,
        }
    }

    /// The bytes the MAC covers.
    pub(crate) fn signed_content(self, id: &str, timestamp: &str, body: &[u8]) -> Vec<u8> {
        let prefix = match self {
            Scheme::Standard | Scheme::Svix => format!("{id}.{timestamp}."),
            Scheme::Stripe => format!("{timestamp}."),
            Scheme::Slack => format!("v0:{timestamp}:"),
            Scheme::Github | Scheme::Shopify => String::new(),
        };
        [prefix.as_bytes(), body].concat()
    }

    /// Whether this consumer does something with events of `kind`; any other type is
    /// acknowledged without effect, as a real consumer must (a 4xx makes the sender retry it
    /// and, in the end, disable the endpoint).
    pub(crate) fn handles(self, kind: &str) -> bool {
        let handled: &[&str] = match self {
            Scheme::Standard | Scheme::Svix => {
                &["invoice.paid", "payment.succeeded", "user.created"]
            }
            Scheme::Stripe => &[
                "payment_intent.succeeded",
                "invoice.paid",
                "charge.succeeded",
                "checkout.session.completed",
            ],
            Scheme::Github => &["push", "pull_request", "issues"],
            Scheme::Shopify => &["orders/create", "orders/paid"],
            Scheme::Slack => &["message", "app_mention"],
        };
        handled.contains(&kind)
    }
}

/// What a delivery says about its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// The sender's id of the event, the same on every redelivery.
    pub(crate) id: String,
    /// Its type, if it has one.
    pub(crate) kind: Option<String>,
    /// Slack's `url_verification` challenge, to be echoed instead of applying anything.
    pub(crate) challenge: Option<String>,
}

impl Event {
    /// Reads the event id and type where `scheme` keeps them. `Err` says what is missing.
    pub(crate) fn read(scheme: Scheme, headers: &HeaderMap, body: &[u8]) -> Result<Event, String> {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let json = || -> Result<serde_json::Value, String> {
            serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))
        };
        let text = |value: &serde_json::Value, pointer: &str| {
            value
                .pointer(pointer)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        let (id, kind, challenge) = match (scheme.id_header(), scheme.type_header()) {
            (Some(id), Some(kind)) => (
                header(id)
                    .map(str::to_owned)
                    .ok_or(format!("no {id} header"))?,
                header(kind).map(str::to_owned),
                None,
            ),
            (Some(id), None) => {
                let id = header(id)
                    .map(str::to_owned)
                    .ok_or(format!("no {id} header"))?;
                (id, json().ok().and_then(|body| text(&body, "/type")), None)
            }
            (None, _) => {
                let body = json()?;
                if scheme == Scheme::Slack
                    && text(&body, "/type").as_deref() == Some("url_verification")
                {
                    let challenge = text(&body, "/challenge").ok_or("no challenge")?;
                    return Ok(Event {
                        id: String::new(),
                        kind: None,
                        challenge: Some(challenge),
                    });
                }
                let (id, kind) = match scheme {
                    Scheme::Slack => ("/event_id", "/event/type"),
                    _ => ("/id", "/type"),
                };
                let id = text(&body, id).ok_or(format!("no {id} in the body"))?;
                (id, text(&body, kind), None)
            }
        };
        if id.is_empty() {
            return Err("the event id is empty".into());
        }
        Ok(Event {
            id,
            kind,
            challenge,
        })
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scheme name that is none of [`Scheme::ALL`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown webhook scheme {0:?}; known: standard, svix, stripe, github, shopify, slack")]
pub struct UnknownScheme(String);

impl FromStr for Scheme {
    type Err = UnknownScheme;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scheme::ALL
            .iter()
            .copied()
            .find(|scheme| scheme.name() == s)
            .ok_or_else(|| UnknownScheme(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_keys_follow_the_senders() {
        for scheme in Scheme::ALL {
            assert_eq!(scheme.name().parse::<Scheme>(), Ok(*scheme));
        }
        assert!("paypal".parse::<Scheme>().is_err());
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        assert_eq!(Scheme::Svix.key(secret).len(), 24);
        assert_eq!(Scheme::Stripe.key(secret), secret.as_bytes());
        assert_eq!(decode_whsec("whsec_!!"), None);
        assert_eq!(decode_whsec("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), None);
    }
}
