//! Reproduce lines that sign: a delivery's signature headers are recomputed in the shell from
//! the secret the reader exports (`$IDEM_CHECK_WEBHOOK_SECRET`, `$IDEM_CHECK_WEBHOOK_SECRET_B`)
//! with `openssl`, so a reviewer replays a delivery by hand, or changes its body and signs it
//! again, without the report ever holding the secret or a signature valid for anything but
//! what was sent.

use crate::http::curl::{header_var, shell_word};
use crate::http::exchange::SentRequest;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::report::replay_lines::{Resigned, Resigner, Signing, SigningKey};

use super::scheme::{b64, mac, Scheme};

/// How a key reaches the shell: a variable the reader exports, or a literal for the key no
/// consumer knows (the forgeries' wrong secret is no secret).
#[derive(Clone, PartialEq, Eq)]
enum KeyWord {
    Var(&'static str),
    Literal(Vec<u8>),
}

/// A key as the sender signs with it, and how the shell gets it.
#[derive(Clone)]
struct Key {
    bytes: Vec<u8>,
    word: KeyWord,
}

/// The timestamp offset of every delivery the sender signed, by its signature header's value:
/// the JSON report's [`Signing`] says how far from its clock each delivery was signed, which the
/// delivery's bytes cannot tell.
#[derive(Debug, Clone, Default)]
pub struct SignedAt(Arc<Mutex<HashMap<String, i64>>>);

impl SignedAt {
    /// Notes that the delivery whose signature header is `value` was signed `offset_s` seconds
    /// from the sender's clock.
    pub fn note(&self, value: &str, offset_s: i64) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(value.to_string(), offset_s);
    }

    fn offset(&self, value: &str) -> Option<i64> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(value)
            .copied()
    }
}

/// The webhook run's [`Resigner`]: its scheme, the keys it signs with, and when it signed.
#[derive(Clone)]
pub struct WebhookResigner {
    scheme: Scheme,
    keys: Vec<Key>,
    signed_at: SignedAt,
}

/// A delivery's signature header taken apart: what is signed, the signatures, and how the
/// header joins them back (`prefix`, then each signature after `each`, joined by `sep`).
struct Parsed<'a> {
    name: &'static str,
    value: &'a str,
    content: Vec<u8>,
    sigs: Vec<&'a str>,
    prefix: String,
    each: &'static str,
    sep: &'static str,
}

/// Names the scheme only: the keys are secrets.
impl std::fmt::Debug for WebhookResigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WebhookResigner({})", self.scheme.name())
    }
}

impl WebhookResigner {
    /// `keys`: each derived key with the variable its secret is exported as, or `None` for
    /// a key that is no secret (shown as it is).
    pub fn new(scheme: Scheme, keys: Vec<(Vec<u8>, Option<&'static str>)>) -> Self {
        let keys = keys
            .into_iter()
            .map(|(bytes, var)| Key {
                word: var.map_or_else(|| KeyWord::Literal(bytes.clone()), KeyWord::Var),
                bytes,
            })
            .collect();
        WebhookResigner {
            scheme,
            keys,
            signed_at: SignedAt::default(),
        }
    }

    /// The same, reading each delivery's timestamp offset from what the sender noted.
    pub fn signed_at(self, signed_at: SignedAt) -> Self {
        WebhookResigner { signed_at, ..self }
    }

    /// The `openssl` options that make the HMAC key of `key`: Standard Webhooks and Svix
    /// secrets are `whsec_` and base64 of the key; the others' are the key.
    fn key_option(&self, key: &Key) -> String {
        match (&key.word, self.scheme) {
            (KeyWord::Var(v), Scheme::Standard | Scheme::Svix) => format!(
                "-mac HMAC -macopt hexkey:$(printf %s \"${{{v}#whsec_}}\" | base64 -d | od -An -tx1 | tr -d ' \\n')"
            ),
            (KeyWord::Var(v), _) => format!("-hmac \"${v}\""),
            (KeyWord::Literal(bytes), _) => format!("-hmac {}", shell_word(bytes)),
        }
    }

    /// A command substitution printing the signature of `content` with `key`, encoded as the
    /// scheme encodes it.
    fn signature_cmd(&self, content: &[u8], key: &Key) -> String {
        let encode = match self.scheme {
            Scheme::Standard | Scheme::Svix | Scheme::Shopify => "base64",
            Scheme::Stripe | Scheme::Github | Scheme::Slack => "od -An -tx1 | tr -d ' \\n'",
        };
        format!(
            "$(printf %s {} | openssl dgst -sha256 {} -binary | {encode})",
            shell_word(content),
            self.key_option(key)
        )
    }

    /// The key whose signature of `content` is `sig` (encoded as the scheme encodes it).
    fn signer(&self, content: &[u8], sig: &str) -> Option<&Key> {
        self.keys.iter().find(|k| {
            let m = mac(&k.bytes, content);
            match self.scheme {
                Scheme::Standard | Scheme::Svix | Scheme::Shopify => b64(&m) == sig,
                Scheme::Stripe | Scheme::Github | Scheme::Slack => hex::encode(m) == sig,
            }
        })
    }
}

fn header<'a>(req: &'a SentRequest, name: &str) -> Option<&'a str> {
    req.header_values(name)
        .first()
        .and_then(|v| std::str::from_utf8(v).ok())
}

impl WebhookResigner {
    fn parse<'a>(&self, req: &'a SentRequest) -> Option<Parsed<'a>> {
        let name = self.scheme.signature_headers()[0];
        let value = header(req, name)?;
        let body = &req.body;
        let (content, sigs, prefix, each, sep): (Vec<u8>, Vec<&str>, String, &str, &str) =
            match self.scheme {
                Scheme::Standard | Scheme::Svix => {
                    let p = self.scheme.name().replace("standard", "webhook");
                    let id = header(req, &format!("{p}-id"))?;
                    let ts = header(req, &format!("{p}-timestamp"))?;
                    let sigs = value
                        .split(' ')
                        .map(|s| s.strip_prefix("v1,"))
                        .collect::<Option<Vec<_>>>()?;
                    let content = [format!("{id}.{ts}.").as_bytes(), body].concat();
                    (content, sigs, String::new(), "v1,", " ")
                }
                Scheme::Stripe => {
                    let mut parts = value.split(',');
                    let ts = parts.next()?.strip_prefix("t=")?;
                    let sigs = parts
                        .map(|s| s.strip_prefix("v1="))
                        .collect::<Option<Vec<_>>>()?;
                    let content = [format!("{ts}.").as_bytes(), body].concat();
                    (content, sigs, format!("t={ts},"), "v1=", ",")
                }
                Scheme::Github => (
                    body.clone(),
                    vec![value.strip_prefix("sha256=")?],
                    String::new(),
                    "sha256=",
                    "",
                ),
                Scheme::Shopify => (body.clone(), vec![value], String::new(), "", ""),
                Scheme::Slack => {
                    let ts = header(req, "X-Slack-Request-Timestamp")?;
                    let content = [format!("v0:{ts}:").as_bytes(), body].concat();
                    (
                        content,
                        vec![value.strip_prefix("v0=")?],
                        String::new(),
                        "v0=",
                        "",
                    )
                }
            };
        Some(Parsed {
            name,
            value,
            content,
            sigs,
            prefix,
            each,
            sep,
        })
    }
}

impl Resigner for WebhookResigner {
    fn resign(&self, req: &SentRequest) -> Option<Resigned> {
        // A NUL byte cannot be a shell argument: such a body is not signed by hand.
        if req.body.contains(&0) {
            return None;
        }
        let p = self.parse(req)?;
        let mut reads = Vec::new();
        let mut signed = Vec::new();
        for sig in p.sigs {
            let key = self.signer(&p.content, sig)?;
            if let KeyWord::Var(v) = key.word {
                if !reads.iter().any(|r| r == v) {
                    reads.push(v.to_string());
                }
            }
            signed.push(format!("{}{}", p.each, self.signature_cmd(&p.content, key)));
        }
        let var = header_var(p.name);
        Some(Resigned {
            assignments: format!("{var}=\"{}{}\"", p.prefix, signed.join(p.sep)),
            sets: vec![var],
            reads,
        })
    }

    fn signing(&self, req: &SentRequest) -> Option<Signing> {
        let p = self.parse(req)?;
        let keys = p
            .sigs
            .iter()
            .map(|sig| {
                self.signer(&p.content, sig).map(|k| match &k.word {
                    KeyWord::Var(v) => SigningKey::Var(v.to_string()),
                    KeyWord::Literal(b) => {
                        SigningKey::Literal(String::from_utf8_lossy(b).into_owned())
                    }
                })
            })
            .collect::<Option<Vec<_>>>()
            .unwrap_or_default();
        Some(Signing {
            scheme: self.scheme.name().to_string(),
            keys,
            timestamp_offset_s: self.signed_at.offset(p.value).unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::exchange::Header;
    use crate::webhook::scheme::EventMeta;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const VAR: &str = "IDEM_CHECK_WEBHOOK_SECRET";
    const WRONG: &[u8] = b"idem-check: not the consumer's";

    fn request(scheme: Scheme, keys: &[&[u8]], body: &[u8]) -> SentRequest {
        let meta = EventMeta {
            id: "msg_1".into(),
            kind: "invoice.paid".into(),
        };
        let mut headers = vec![Header::new("Host", "127.0.0.1")];
        headers.extend(scheme.headers(&meta, body, 1_700_000_000, keys, 0));
        SentRequest {
            method: "POST".into(),
            url: "http://127.0.0.1/w".into(),
            headers,
            body: body.to_vec(),
        }
    }

    /// Runs the assignments in bash with the secret exported and prints the header's value.
    fn in_shell(assignments: &str, var: &str, secret: &str) -> String {
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!("{assignments}; printf %s \"${var}\""))
            .env(VAR, secret)
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Every scheme's signature header, recomputed by the shell line from the exported secret
    /// (and the wrong key's signature from its literal), is the header idem-check sent; the
    /// line never holds the secret.
    #[test]
    fn the_shell_recomputes_every_schemes_signature_header() {
        let body = br#"{"id":"evt_1","type":"invoice.paid","note":"it's 100% \u00e9"}"#;
        for scheme in [
            Scheme::Standard,
            Scheme::Svix,
            Scheme::Stripe,
            Scheme::Github,
            Scheme::Shopify,
            Scheme::Slack,
        ] {
            let secret = if matches!(scheme, Scheme::Standard | Scheme::Svix | Scheme::Stripe) {
                SECRET
            } else {
                "a-plain-shared-secret"
            };
            let key = scheme.key(secret).unwrap();
            let r = WebhookResigner::new(
                scheme,
                vec![(key.clone(), Some(VAR)), (WRONG.to_vec(), None)],
            );
            let keys: Vec<&[u8]> = if scheme.signs_several() {
                vec![WRONG, &key]
            } else {
                vec![&key]
            };
            let req = request(scheme, &keys, body);
            let resigned = r.resign(&req).expect("resigned");
            assert!(
                !resigned.assignments.contains(secret),
                "{}",
                resigned.assignments
            );
            assert_eq!(resigned.reads, [VAR]);
            let name = scheme.signature_headers()[0];
            let sent = header(&req, name).unwrap();
            assert_eq!(
                in_shell(&resigned.assignments, &resigned.sets[0], secret),
                sent,
                "{}: {}",
                scheme.name(),
                resigned.assignments
            );
        }
    }

    /// A signature over other bytes than those sent (a tampered body) is not recomputed: the
    /// line keeps the masked variable.
    #[test]
    fn a_tampered_body_is_not_resigned() {
        let key = Scheme::Github.key("s").unwrap();
        let r = WebhookResigner::new(Scheme::Github, vec![(key.clone(), Some(VAR))]);
        let mut req = request(Scheme::Github, &[&key], b"{}");
        req.body = b"{\"x\":1}".to_vec();
        assert_eq!(r.resign(&req), None);
    }
}
