//! The reference webhook consumer's verification (reference-server/src/webhooks/verify.rs and
//! schemes.rs) for all six schemes: signature and timestamp headers, several signatures,
//! event ids in headers or bodies.
//!
//! Input: byte 0 picks the scheme, byte 1 the part. Part 0, the round trip: the next 8 bytes
//! are how far the signing time is from the consumer's clock, then the secret's key bytes, a
//! newline, the event id, a newline and the body; idem-check's sender (src/webhook/scheme.rs)
//! signs the delivery and the consumer must accept its signature whenever the time is within
//! the tolerance (or the scheme signs no time), and refuse it otherwise. Part 1, hostile
//! headers: `name: value` lines, an empty line and the body, verified against a fixed secret.
//! Both: no error shows the secret.
#![no_main]

use base64::Engine as _;
use http::{HeaderMap, HeaderName, HeaderValue};
use idem_check::webhook::scheme::{EventMeta, Scheme};
use idem_check_fuzz::assert_shown_safely;
use idem_reference_server::untrusted::{webhook_delivery, TOLERANCE_SECS};
use idem_reference_server::WebhookScheme;
use libfuzzer_sys::fuzz_target;

const SCHEMES: [(Scheme, WebhookScheme); 6] = [
    (Scheme::Standard, WebhookScheme::Standard),
    (Scheme::Svix, WebhookScheme::Svix),
    (Scheme::Stripe, WebhookScheme::Stripe),
    (Scheme::Github, WebhookScheme::Github),
    (Scheme::Shopify, WebhookScheme::Shopify),
    (Scheme::Slack, WebhookScheme::Slack),
];

const NOW: i64 = 1_700_000_000;
const FIXED_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// What the consumer says when no signature verifies.
const NO_MATCH: &str = "no signature matches a configured secret";

fn round_trip(schemes: (Scheme, WebhookScheme), data: &[u8]) {
    let Some((offset, rest)) = data.split_first_chunk::<8>() else {
        return;
    };
    let offset = i64::from_le_bytes(*offset);
    let mut parts = rest.splitn(3, |b| *b == b'\n');
    let (Some(key), Some(id), Some(body)) = (parts.next(), parts.next(), parts.next()) else {
        return;
    };
    let Ok(id) = std::str::from_utf8(id) else {
        return;
    };
    // The reference consumer takes `whsec_<base64>` secrets only, for every scheme.
    let secret = format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    );
    let (sender, consumer) = schemes;
    let Ok(hmac_key) = sender.key(&secret) else {
        return;
    };
    let signed_at = NOW.saturating_add(offset);
    let meta = EventMeta {
        id: id.to_owned(),
        kind: "push".into(),
    };
    let mut headers = HeaderMap::new();
    for h in sender.headers(&meta, body, signed_at, &[&hmac_key], 0) {
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(h.name.as_bytes()),
            HeaderValue::from_bytes(&h.value),
        ) else {
            return;
        };
        headers.append(name, value);
    }
    let verdict = webhook_delivery(consumer, &headers, body, &secret, NOW);
    let within = !sender.signs_timestamp() || offset.unsigned_abs() <= TOLERANCE_SECS as u64;
    match &verdict {
        Ok(_) => assert!(within, "a delivery signed {offset} s away was accepted"),
        Err(e) => {
            let shown = e.to_string();
            assert_shown_safely(&shown, &secret);
            assert!(
                shown != NO_MATCH,
                "the consumer refused idem-check's signature: {shown}"
            );
            assert!(
                !within || !shown.contains("tolerance"),
                "a delivery {offset} s away was refused for its time: {shown}"
            );
        }
    }
}

fn hostile(consumer: WebhookScheme, data: &[u8]) {
    let (head, body) = match data.windows(2).position(|w| w == b"\n\n") {
        Some(end) => (&data[..end], &data[end + 2..]),
        None => (data, &b""[..]),
    };
    let mut headers = HeaderMap::new();
    for line in head.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(line[colon + 1..].trim_ascii()),
        ) else {
            continue;
        };
        headers.append(name, value);
    }
    if let Err(e) = webhook_delivery(consumer, &headers, body, FIXED_SECRET, NOW) {
        assert_shown_safely(&e.to_string(), FIXED_SECRET);
    }
}

fuzz_target!(|data: &[u8]| {
    let [pick, part, rest @ ..] = data else {
        return;
    };
    let schemes = SCHEMES[usize::from(*pick) % SCHEMES.len()];
    if part % 2 == 0 {
        round_trip(schemes, rest);
    } else {
        hostile(schemes.1, rest);
    }
});
