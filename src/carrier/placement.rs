//! Putting a key into a request at its [`Place`], taking it out, and reading it back from what
//! was sent: probes build every keyed request through [`Place::put`], and evidence, reproduce
//! lines and the client's checks read keys through [`Place::values_in`], so a body key is
//! handled exactly as a header key everywhere.
//!
//! A body field is a JSON pointer into a JSON body, or the field's name in a form body
//! (`name=value&…`); any other body has no field to carry a key, and the config refuses such a
//! carrier before anything is sent.

use serde_json::Value;

use super::Place;
use crate::http::exchange::{header_values, Header};
use crate::http::Request;

impl Place {
    /// `req` with the key set to exactly `value` (a header's bytes; a body field's string).
    pub fn put(&self, req: Request, value: &[u8]) -> Request {
        match self {
            Place::Header(name) => req.set_header(name, value.to_vec()),
            Place::Body(field) => {
                let value = String::from_utf8_lossy(value).into_owned();
                let body = edit_body(&req.body, field, Some(value));
                req.with_body(body)
            }
        }
    }

    /// `req` without any key: the header's lines removed, or the body field.
    pub fn remove(&self, req: Request) -> Request {
        match self {
            Place::Header(name) => req.without_header(name),
            Place::Body(field) => {
                let body = edit_body(&req.body, field, None);
                req.with_body(body)
            }
        }
    }

    /// Every key value a request carried, in wire order: each line of the header, or the body
    /// field (a JSON string's text; any other JSON value as written).
    pub fn values_in(&self, headers: &[Header], body: &[u8]) -> Vec<Vec<u8>> {
        match self {
            Place::Header(name) => header_values(headers, name)
                .into_iter()
                .map(<[u8]>::to_vec)
                .collect(),
            Place::Body(field) => read_body(body, field)
                .map(|v| vec![v.into_bytes()])
                .unwrap_or_default(),
        }
    }

    /// The key's single value in a request, when it carried exactly one.
    pub fn value_in(&self, headers: &[Header], body: &[u8]) -> Option<Vec<u8>> {
        let mut values = self.values_in(headers, body);
        (values.len() == 1).then(|| values.remove(0))
    }
}

/// The field at `field` in a parsed payload: a JSON pointer, or (for a form, whose fields are
/// the object's members) the bare name.
pub fn field_of<'a>(payload: &'a Value, field: &str) -> Option<&'a Value> {
    if field.starts_with('/') {
        payload.pointer(field)
    } else {
        payload.get(field)
    }
}

/// `payload` with `field` set to `value`, or removed when `value` is `None`.
pub fn set_field(payload: &mut Value, field: &str, value: Option<Value>) {
    let (parent, name) = match field.rsplit_once('/') {
        Some((parent, name)) => (parent, name.replace("~1", "/").replace("~0", "~")),
        None => ("", field.to_string()),
    };
    if let Some(Value::Object(fields)) = payload.pointer_mut(parent) {
        match value {
            Some(v) => {
                fields.insert(name, v);
            }
            None => {
                fields.remove(&name);
            }
        }
    }
}

/// The body with `field` set to the string `value`, or removed: a JSON body through its
/// pointer, a form body by field name.
fn edit_body(body: &[u8], field: &str, value: Option<String>) -> Vec<u8> {
    if let Ok(mut json) = serde_json::from_slice::<Value>(body) {
        set_field(&mut json, field, value.map(Value::String));
        return json.to_string().into_bytes();
    }
    let name = field.strip_prefix('/').unwrap_or(field);
    let mut pairs: Vec<(String, String)> = url::form_urlencoded::parse(body)
        .filter(|(n, _)| n != name)
        .map(|(n, v)| (n.into_owned(), v.into_owned()))
        .collect();
    if let Some(v) = value {
        pairs.push((name.to_string(), v));
    }
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
        .into_bytes()
}

/// The text of `field` in a JSON or form body.
fn read_body(body: &[u8], field: &str) -> Option<String> {
    if let Ok(json) = serde_json::from_slice::<Value>(body) {
        return field_of(&json, field).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
    }
    let name = field.strip_prefix('/').unwrap_or(field);
    url::form_urlencoded::parse(body)
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn post(body: &str) -> Request {
        Request {
            method: "POST".into(),
            url: "http://127.0.0.1/p".parse().unwrap(),
            headers: vec![Header::new("Content-Type", "application/json")],
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_json_body_key_is_put_read_and_removed_at_its_pointer() {
        let place = Place::Body("/idempotency_key".into());
        let req = place.put(post(r#"{"amount":5,"idempotency_key":"x"}"#), b"k-1");
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        assert_eq!(body, json!({"amount": 5, "idempotency_key": "k-1"}));
        assert_eq!(
            place.value_in(&req.headers, &req.body),
            Some(b"k-1".to_vec())
        );
        let bare = place.remove(req);
        assert!(place.values_in(&bare.headers, &bare.body).is_empty());
        let nested = Place::Body("/meta/key".into());
        let req = nested.put(post(r#"{"meta":{"key":"a"},"amount":1}"#), b"n");
        assert_eq!(
            nested.value_in(&req.headers, &req.body),
            Some(b"n".to_vec())
        );
    }

    #[test]
    fn a_form_body_key_is_put_by_name() {
        let place = Place::Body("idempotency_key".into());
        let req = place.put(post("amount=5&idempotency_key=x"), b"k 1");
        assert_eq!(
            place.value_in(&req.headers, &req.body),
            Some(b"k 1".to_vec())
        );
        assert!(String::from_utf8_lossy(&req.body).contains("amount=5"));
    }

    #[test]
    fn a_header_key_keeps_every_line() {
        let place = Place::Header("Idempotency-Key".into());
        let req = place.put(post("{}"), b"\"k\"");
        let req = req.with_header("idempotency-key", "\"j\"");
        assert_eq!(place.values_in(&req.headers, &req.body).len(), 2);
        assert_eq!(place.value_in(&req.headers, &req.body), None);
        assert_eq!(place.remove(req).headers.len(), 1);
    }
}
