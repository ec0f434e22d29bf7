//! Reading the key a client sent through its carrier ([`crate::carrier`]): the header's lines,
//! or the body field, under the carrier's syntax, so every client check judges a provider's
//! header or a body key by its own rules and never tells a user to quote a key the API refuses.

use serde_json::Value;

use crate::carrier::{field_of, set_field};
pub use crate::carrier::{KeyCarrier, Place, Syntax};

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

/// The key a request carried, as sent and as understood.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SentKey {
    /// The header value(s) as sent, joined with ", " when there were several lines, or the
    /// body field's value.
    pub raw: String,
    /// The key itself: the String's content for an RFC 8941 String, else the raw value trimmed.
    pub value: String,
    /// True when the value parses as an RFC 8941 Item whose bare item is a String.
    pub sf_string: bool,
}

impl SentKey {
    /// The key `raw` as `syntax` understands it: under `ietf` an RFC 8941 String's content (and
    /// `"k"` and `k` are the same key), under `token` the value itself, quotes included.
    pub fn parse(raw: &str, syntax: Syntax) -> SentKey {
        let string = sfv::Parser::new(raw.as_bytes())
            .parse_item::<sfv::Item>()
            .ok()
            .and_then(|i| i.bare_item.as_string().map(|s| s.as_str().to_string()));
        let value = match (syntax, &string) {
            (Syntax::Ietf, Some(s)) => s.clone(),
            _ => raw.trim().to_string(),
        };
        SentKey {
            value,
            sf_string: string.is_some(),
            raw: raw.to_string(),
        }
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
