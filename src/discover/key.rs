//! Where an operation takes its idempotency key, as its document declares it: a header
//! parameter (recognised by [`super::header`]), or a property of the request body whose name
//! or description speaks of idempotency, as Square's `idempotency_key` (APIs that wrap a
//! command in an envelope carry it one level down, `/meta/idempotency_key`).
//!
//! A header wins when an operation declares both: it is what the draft standardises, and a
//! body property that mentions idempotency beside a key header is more likely to describe it.

use serde_json::Value;

use super::body::Generator;
use super::header::Match;
use super::refs::escape;
use crate::carrier::Place;

/// A key found in an operation: where, whether the document requires it, and how it was
/// recognised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundKey {
    pub at: Place,
    pub required: bool,
    pub matched: Match,
}

/// The property of a body of `media_type` described by `schema` that carries the idempotency
/// key: one whose name contains `idempot` (`idempotency_key`, `idempotencyKey`), else one
/// whose description mentions idempotency; top-level properties first, then (JSON only) those
/// of an object property.
pub fn in_body(root: &Value, media_type: &str, schema: &Value) -> Option<FoundKey> {
    let form = media_type
        .to_ascii_lowercase()
        .starts_with("application/x-www-form-urlencoded");
    let gen = Generator::new(root);
    let top = gen.flatten(schema, 0).ok()?;
    let found = find(&gen, &top, "", form);
    if found.is_some() || form {
        return found;
    }
    let properties = top.get("properties")?.as_object()?;
    properties.iter().find_map(|(name, prop)| {
        let inner = gen.flatten(prop, 1).ok()?;
        inner.get("properties")?;
        find(&gen, &inner, &format!("/{}", escape(name)), false)
    })
}

/// The key among `object`'s own properties, its pointer under `parent`.
fn find(
    gen: &Generator,
    object: &serde_json::Map<String, Value>,
    parent: &str,
    form: bool,
) -> Option<FoundKey> {
    let properties = object.get("properties")?.as_object()?;
    let required = |name: &str| {
        object
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|n| n.as_str() == Some(name)))
    };
    let by = |matched: Match| {
        properties.iter().find_map(|(name, prop)| {
            let seen = match matched {
                Match::Name => name.to_ascii_lowercase().contains("idempot"),
                _ => gen.flatten(prop, 1).ok().is_some_and(|p| {
                    p.get("description")
                        .and_then(Value::as_str)
                        .is_some_and(|d| d.to_ascii_lowercase().contains("idempoten"))
                }),
            };
            seen.then(|| FoundKey {
                at: Place::Body(if form {
                    name.clone()
                } else {
                    format!("{parent}/{}", escape(name))
                }),
                required: required(name),
                matched,
            })
        })
    };
    by(Match::Name).or_else(|| by(Match::Description))
}

/// Whether a body described by `schema` declares a field at `at` (a JSON pointer, or a form
/// field's name): `Err` with the properties declared where the path ends, `Ok` when it is
/// declared or the schema leaves the body open there (no `properties` to check against).
pub fn declares(root: &Value, schema: &Value, at: &str) -> Result<(), Vec<String>> {
    let gen = Generator::new(root);
    let segments: Vec<String> = match at.strip_prefix('/') {
        Some(pointer) => pointer
            .split('/')
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect(),
        None => vec![at.to_string()],
    };
    let mut node = schema.clone();
    for segment in segments {
        let Ok(flat) = gen.flatten(&node, 0) else {
            return Ok(());
        };
        let Some(properties) = flat.get("properties").and_then(Value::as_object) else {
            return Ok(());
        };
        match properties.get(&segment) {
            Some(next) => node = next.clone(),
            None => return Err(properties.keys().cloned().collect()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const JSON: &str = "application/json";

    #[test]
    fn squares_idempotency_key_is_found_by_its_name() {
        let schema = json!({"type": "object", "required": ["idempotency_key", "source_id"],
            "properties": {"source_id": {"type": "string"},
                "idempotency_key": {"type": "string", "maxLength": 45}}});
        let k = in_body(&json!({}), JSON, &schema).unwrap();
        assert_eq!(k.at, Place::Body("/idempotency_key".into()));
        assert!(k.required);
        assert_eq!(k.matched, Match::Name);
        assert_eq!(k.at.to_string(), "body /idempotency_key");
    }

    #[test]
    fn a_description_or_an_envelope_names_the_key_and_a_form_uses_the_field_name() {
        let root = json!({"components": {"schemas": {"Meta": {"type": "object",
            "properties": {"dedup": {"type": "string",
                "description": "Makes the command idempotent: resend it with the same value"}}}}}});
        let schema = json!({"type": "object", "properties": {
            "meta": {"$ref": "#/components/schemas/Meta"}, "amount": {"type": "integer"}}});
        let k = in_body(&root, JSON, &schema).unwrap();
        assert_eq!(k.at, Place::Body("/meta/dedup".into()));
        assert_eq!(k.matched, Match::Description);
        assert!(!k.required);
        let form = json!({"properties": {"idempotencyKey": {"type": "string"}}});
        let k = in_body(&root, "application/x-www-form-urlencoded", &form).unwrap();
        assert_eq!(k.at, Place::Body("idempotencyKey".into()));
    }

    #[test]
    fn a_pointer_is_declared_or_the_properties_there_are_named() {
        let schema = json!({"properties": {"meta": {"properties": {"key": {}}}, "open": {}}});
        assert_eq!(declares(&json!({}), &schema, "/meta/key"), Ok(()));
        assert_eq!(declares(&json!({}), &schema, "/open/anything"), Ok(()));
        assert_eq!(
            declares(&json!({}), &schema, "/meta/other"),
            Err(vec!["key".to_string()])
        );
        assert!(declares(&json!({}), &schema, "idempotency_key").is_err());
    }

    #[test]
    fn a_body_without_such_a_property_has_no_key() {
        let schema = json!({"properties": {"request_id": {"type": "string",
            "description": "for tracing"}}});
        assert_eq!(in_body(&json!({}), JSON, &schema), None);
        assert_eq!(in_body(&json!({}), JSON, &json!({"type": "string"})), None);
    }
}
