//! Where a client puts its idempotency key and how the key is written. The IETF draft's
//! `Idempotency-Key` header holds an RFC 8941 String, but providers carry keys elsewhere:
//! their own header with an opaque token (`Cko-Idempotency-Key`, `PayPal-Request-Id`, whose
//! APIs refuse quotes), or a field of the body (Square's `idempotency_key`). Judging those by
//! the draft's rules would FAIL correct SDKs and tell their users to quote keys the API
//! refuses, so every client check reads the key through its carrier.

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use super::fake_api::SentKey;

/// The draft's header, the only carrier whose default syntax is `ietf`.
const IETF_HEADER: &str = "Idempotency-Key";

/// Where the key travels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A header, by name.
    Header(String),
    /// A field of the body: a JSON pointer (`/idempotency_key`) for JSON bodies, the field's
    /// name for form bodies.
    Body(String),
}

impl From<&crate::discover::key::DeclaredKey> for Place {
    /// Where an API description says the key goes.
    fn from(key: &crate::discover::key::DeclaredKey) -> Place {
        use crate::discover::key::DeclaredKey;
        match key {
            DeclaredKey::Header(name) => Place::Header(name.clone()),
            DeclaredKey::Body(pointer) => Place::Body(pointer.clone()),
        }
    }
}

/// How the key's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// An RFC 8941 String, the draft's field (the suite says whether bare values pass too).
    Ietf,
    /// An opaque value under the provider's own rules: quotes are neither needed nor wanted.
    Token,
}

impl FromStr for Syntax {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ietf" => Ok(Syntax::Ietf),
            "token" => Ok(Syntax::Token),
            other => Err(format!("{other:?} is not a key syntax (ietf or token)")),
        }
    }
}

impl fmt::Display for Syntax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Syntax::Ietf => "ietf",
            Syntax::Token => "token",
        })
    }
}

/// A key's carrier and syntax, the same for every operation the fake API serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyCarrier {
    pub place: Place,
    pub syntax: Syntax,
}

impl KeyCarrier {
    /// The carrier at `place`, written as `syntax` when the user said so, else `ietf` for the
    /// draft's header and `token` for every other carrier.
    pub fn new(place: Place, syntax: Option<Syntax>) -> KeyCarrier {
        let syntax = syntax.unwrap_or(match &place {
            Place::Header(name) if name.eq_ignore_ascii_case(IETF_HEADER) => Syntax::Ietf,
            _ => Syntax::Token,
        });
        KeyCarrier { place, syntax }
    }

    /// The draft's header with the draft's syntax.
    pub fn ietf_header() -> KeyCarrier {
        KeyCarrier::new(Place::Header(IETF_HEADER.into()), None)
    }

    /// What evidence calls the key's place: `Idempotency-Key`, `body /idempotency_key`.
    pub fn label(&self) -> String {
        match &self.place {
            Place::Header(name) => name.clone(),
            Place::Body(pointer) => format!("body {pointer}"),
        }
    }

    /// The header's name, when the key travels in one.
    pub fn header(&self) -> Option<&str> {
        match &self.place {
            Place::Header(name) => Some(name),
            Place::Body(_) => None,
        }
    }

    /// The key a request carried: the header's lines, or the body field (`payload` is the body
    /// parsed as JSON, a form as an object of its fields).
    pub fn key_in(&self, header_lines: &[&[u8]], payload: Option<&Value>) -> Option<SentKey> {
        let raw: Vec<String> = match &self.place {
            Place::Header(_) => header_lines
                .iter()
                .map(|l| String::from_utf8_lossy(l).into_owned())
                .collect(),
            Place::Body(pointer) => {
                let field = payload.and_then(|p| body_field(p, pointer))?;
                vec![match field {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                }]
            }
        };
        if raw.is_empty() {
            return None;
        }
        Some(SentKey::parse(&raw.join(", "), self.syntax))
    }
}

impl KeyCarrier {
    /// `payload` less the body key, for comparing what a retry sent besides its key.
    pub fn without_key(&self, mut payload: Value) -> Value {
        if let Place::Body(pointer) = &self.place {
            let (parent, name) = match pointer.rsplit_once('/') {
                Some((parent, name)) => (parent, name.replace("~1", "/").replace("~0", "~")),
                None => ("", pointer.clone()),
            };
            if let Some(Value::Object(fields)) = payload.pointer_mut(parent) {
                fields.remove(&name);
            }
        }
        payload
    }
}

/// The field at `pointer`: a JSON pointer, or (for a form, whose fields are the object's
/// members) the bare field name.
fn body_field<'a>(payload: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.starts_with('/') {
        payload.pointer(pointer)
    } else {
        payload.get(pointer)
    }
}

impl fmt::Display for KeyCarrier {
    /// The report's header line: `header Idempotency-Key, ietf`, `body /idempotency_key, token`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.place {
            Place::Header(name) => write!(f, "header {name}, {}", self.syntax),
            Place::Body(pointer) => write!(f, "body {pointer}, {}", self.syntax),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_drafts_header_defaults_to_ietf() {
        assert_eq!(KeyCarrier::ietf_header().syntax, Syntax::Ietf);
        let cko = KeyCarrier::new(Place::Header("Cko-Idempotency-Key".into()), None);
        assert_eq!(cko.syntax, Syntax::Token);
        let body = KeyCarrier::new(Place::Body("/idempotency_key".into()), None);
        assert_eq!(body.syntax, Syntax::Token);
        assert_eq!(body.to_string(), "body /idempotency_key, token");
        let forced = KeyCarrier::new(Place::Header("Idempotency-Key".into()), Some(Syntax::Token));
        assert_eq!(forced.to_string(), "header Idempotency-Key, token");
    }

    #[test]
    fn a_body_key_is_read_at_its_pointer_or_form_field() {
        let body = KeyCarrier::new(Place::Body("/idempotency_key".into()), None);
        let key = body
            .key_in(&[], Some(&json!({"idempotency_key": "k-1", "amount": 5})))
            .unwrap();
        assert_eq!((key.raw.as_str(), key.value.as_str()), ("k-1", "k-1"));
        assert!(body.key_in(&[], Some(&json!({"amount": 5}))).is_none());
        assert!(body.key_in(&[], None).is_none());
        let nested = KeyCarrier::new(Place::Body("/meta/key".into()), None);
        assert!(nested
            .key_in(&[], Some(&json!({"meta": {"key": "n"}})))
            .is_some());
        assert_eq!(
            body.without_key(json!({"idempotency_key": "k", "amount": 5})),
            json!({"amount": 5})
        );
        let form = KeyCarrier::new(Place::Body("idempotency_key".into()), None);
        assert!(form
            .key_in(&[], Some(&json!({"idempotency_key": "f"})))
            .is_some());
    }

    #[test]
    fn a_token_keeps_its_quotes_as_part_of_the_key() {
        let token = KeyCarrier::new(Place::Header("PayPal-Request-Id".into()), None);
        let quoted = token.key_in(&[b"\"abc\""], None).unwrap();
        assert_eq!(quoted.value, "\"abc\"");
        let ietf = KeyCarrier::ietf_header()
            .key_in(&[b"\"abc\""], None)
            .unwrap();
        assert_eq!(ietf.value, "abc");
    }
}
