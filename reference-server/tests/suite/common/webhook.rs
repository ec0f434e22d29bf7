//! A webhook sender for the tests: deliveries of each scheme signed as its real senders sign
//! them (header names, signed content, key derivation, encodings), written here from the
//! senders' documentation rather than from the server's code, so a misreading in either shows.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use idem_reference_server::WebhookScheme as Scheme;
use sha2::Sha256;

use super::{Client, Req};

/// Source A's secret.
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Source B's secret.
pub const SECRET_B: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
/// A secret the server does not know.
pub const WRONG_SECRET: &str = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

/// An event as its sender keeps it: the id and the body bytes every delivery of it carries.
#[derive(Clone, Debug)]
pub struct Event {
    pub id: String,
    pub kind: String,
    pub body: Vec<u8>,
}

/// A type the reference consumer handles, per scheme.
pub fn handled_kind(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::Standard | Scheme::Svix => "invoice.paid",
        Scheme::Stripe => "payment_intent.succeeded",
        Scheme::Github => "push",
        Scheme::Shopify => "orders/create",
        Scheme::Slack => "message",
    }
}

/// A new event of `kind` with a fresh id, its body as the scheme's senders shape it (compact).
pub fn event(scheme: Scheme, kind: &str) -> Event {
    let id = match scheme {
        Scheme::Stripe => format!("evt_{}", uuid::Uuid::new_v4().simple()),
        Scheme::Slack => format!("Ev{}", uuid::Uuid::new_v4().simple()),
        Scheme::Github | Scheme::Shopify => uuid::Uuid::new_v4().to_string(),
        _ => format!("msg_{}", uuid::Uuid::new_v4().simple()),
    };
    let body = match scheme {
        Scheme::Standard | Scheme::Svix => {
            format!(r#"{{"type":"{kind}","data":{{"amount":1250}}}}"#)
        }
        Scheme::Stripe => format!(
            r#"{{"id":"{id}","object":"event","type":"{kind}","data":{{"object":{{"amount":1250}}}}}}"#
        ),
        Scheme::Github => r#"{"ref":"refs/heads/main","after":"c0ffee"}"#.to_owned(),
        Scheme::Shopify => r#"{"id":820982911946154508,"total_price":"12.50"}"#.to_owned(),
        Scheme::Slack => format!(
            r#"{{"type":"event_callback","event_id":"{id}","event":{{"type":"{kind}","text":"hi"}}}}"#
        ),
    };
    Event {
        id,
        kind: kind.to_owned(),
        body: body.into_bytes(),
    }
}

/// A new event of a type the consumer handles.
pub fn handled(scheme: Scheme) -> Event {
    event(scheme, handled_kind(scheme))
}

/// HMAC-SHA256.
pub fn mac(key: &[u8], content: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
    mac.update(content);
    mac.finalize().into_bytes().to_vec()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The HMAC key `scheme`'s senders derive from `secret`.
pub fn key(scheme: Scheme, secret: &str) -> Vec<u8> {
    match scheme {
        Scheme::Standard | Scheme::Svix => base64::engine::general_purpose::STANDARD
            .decode(secret.trim_start_matches("whsec_"))
            .expect("a whsec_ secret"),
        _ => secret.as_bytes().to_vec(),
    }
}

/// A delivery of `event` at `timestamp` (seconds since the epoch) signed with each of
/// `secrets` in turn (several only where the scheme carries several signatures; the others
/// use the first).
pub fn delivery(scheme: Scheme, event: &Event, timestamp: i64, secrets: &[&str]) -> Req {
    let body = &event.body;
    let path = format!("/webhooks/{}", scheme.name());
    let req = Req::post(&path)
        .body(body.clone())
        .header("Content-Type", "application/json");
    let ts = timestamp.to_string();
    match scheme {
        Scheme::Standard | Scheme::Svix => {
            let prefix = if scheme == Scheme::Svix {
                "svix"
            } else {
                "webhook"
            };
            let content = [format!("{}.{ts}.", event.id).as_bytes(), body].concat();
            let signatures: Vec<String> = secrets
                .iter()
                .map(|s| format!("v1,{}", b64(&mac(&key(scheme, s), &content))))
                .collect();
            req.header(&format!("{prefix}-id"), &event.id)
                .header(&format!("{prefix}-timestamp"), &ts)
                .header(&format!("{prefix}-signature"), signatures.join(" "))
        }
        Scheme::Stripe => {
            let content = [format!("{ts}.").as_bytes(), body].concat();
            let v1: Vec<String> = secrets
                .iter()
                .map(|s| format!("v1={}", hex::encode(mac(s.as_bytes(), &content))))
                .collect();
            req.header("Stripe-Signature", format!("t={ts},{}", v1.join(",")))
        }
        Scheme::Github => req
            .header(
                "X-Hub-Signature-256",
                format!("sha256={}", hex::encode(mac(secrets[0].as_bytes(), body))),
            )
            .header("X-GitHub-Delivery", &event.id)
            .header("X-GitHub-Event", &event.kind),
        Scheme::Shopify => req
            .header(
                "X-Shopify-Hmac-Sha256",
                b64(&mac(secrets[0].as_bytes(), body)),
            )
            .header("X-Shopify-Event-Id", &event.id)
            .header("X-Shopify-Webhook-Id", uuid::Uuid::new_v4().to_string())
            .header("X-Shopify-Topic", &event.kind)
            .header("X-Shopify-Triggered-At", "2026-01-01T00:00:00Z"),
        Scheme::Slack => {
            let content = [format!("v0:{ts}:").as_bytes(), body].concat();
            req.header(
                "X-Slack-Signature",
                format!("v0={}", hex::encode(mac(secrets[0].as_bytes(), &content))),
            )
            .header("X-Slack-Request-Timestamp", &ts)
        }
    }
}

/// A delivery of `event` signed with source A's secret at `timestamp`.
pub fn signed(scheme: Scheme, event: &Event, timestamp: i64) -> Req {
    delivery(scheme, event, timestamp, &[SECRET])
}

/// A delivery of `event` like [`signed`], without any signature header.
pub fn unsigned(scheme: Scheme, event: &Event, timestamp: i64) -> Req {
    let mut req = signed(scheme, event, timestamp);
    req.headers.retain(|(name, _)| {
        let name = name.to_ascii_lowercase();
        !(name.contains("signature") || name.contains("hmac"))
    });
    req
}

/// Seconds since the epoch, by the system clock.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64
}

impl Client {
    /// The webhook consumer's effect counter.
    pub async fn webhook_count(&self) -> u64 {
        let resp = self.send(&Req::get("/webhooks/count")).await;
        assert_eq!(resp.status, 200, "{}", resp.text());
        resp.json()["count"].as_u64().expect("count")
    }
}
