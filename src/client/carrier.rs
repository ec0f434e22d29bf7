//! Reading the key a client sent through its carrier ([`crate::carrier`]): the header's lines,
//! or the body field, under the carrier's syntax, so every client check judges a provider's
//! header or a body key by its own rules and never tells a user to quote a key the API refuses.

use serde_json::Value;

use crate::carrier::{field_of, set_field};
pub use crate::carrier::{KeyCarrier, Place, Syntax};

use super::fake_api::SentKey;

/// Reading the key out of what a client sent.
impl KeyCarrier {
    /// The key a request carried: the header's lines, or the body field (`payload` is the body
    /// parsed as JSON, a form as an object of its fields).
    pub fn key_in(&self, header_lines: &[&[u8]], payload: Option<&Value>) -> Option<SentKey> {
        let raw: Vec<String> = match &self.place {
            Place::Header(_) => header_lines
                .iter()
                .map(|l| String::from_utf8_lossy(l).into_owned())
                .collect(),
            Place::Body(pointer) => {
                let field = payload.and_then(|p| field_of(p, pointer))?;
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

    /// `payload` less the body key, for comparing what a retry sent besides its key.
    pub fn without_key(&self, mut payload: Value) -> Value {
        if let Place::Body(pointer) = &self.place {
            set_field(&mut payload, pointer, None);
        }
        payload
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
