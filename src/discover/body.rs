//! A request body the API will accept, for each operation.
//!
//! In order: the media type's `example`, the first of its `examples`, else a minimal valid
//! instance generated from the JSON Schema — required properties only (read-only ones left
//! out), `const`/`enum`'s first value/a schema `example`/`default` where given, `format`s such
//! as date-time, uuid and email, numeric bounds and `multipleOf`, string lengths, `allOf`
//! merged and `oneOf`/`anyOf` resolved to their first non-null branch (merged with the
//! properties beside it, so the instance satisfies one consistent branch), `$ref` cycles cut.
//!
//! What a reference to another document that could not be followed named is left out: a
//! property whose schema it was is not set, an array of such items stays empty, a body that
//! was all of it is `{}`.
//!
//! Probes need payloads that differ from probe to probe, so one free-form string field (no
//! enum, format or pattern, room for a unique value) is set to `{{unique}}`; when the instance
//! has none, the first optional free-form string property is added for it.

use serde_json::{Map, Number, Value};

use super::external::{left_out, UNRESOLVED};
use super::refs::{lookup, reference, resolve};

/// Where an operation's body comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BodySource {
    /// An example given in the document.
    Example,
    /// Generated from the request schema.
    Schema,
    /// The operation takes no body.
    None,
}

impl BodySource {
    /// The name used in tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            BodySource::Example => "example",
            BodySource::Schema => "schema",
            BodySource::None => "none",
        }
    }
}

/// The body template of an operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Body {
    pub source: BodySource,
    /// The media type, e.g. `application/json`.
    pub content_type: Option<String>,
    /// The template text (with `{{unique}}` where a free-form field allowed it).
    pub text: Option<String>,
}

/// How deep generated instances and schema merges go before recursion is cut.
const MAX_DEPTH: usize = 24;

/// A value a unique per-probe string fits in (the checker's unique values are shorter).
const UNIQUE_ROOM: u64 = 64;

/// The longest `minLength` a unique value is sure to reach (`idem-check-<probe>-<12 hex>` is
/// 33 characters or more).
const UNIQUE_MIN: u64 = 32;

/// The body of an OAS 3 operation (`requestBody`).
pub fn oas3(root: &Value, op: &Value) -> Result<Body, String> {
    let Some(rb) = op.get("requestBody") else {
        return Ok(none());
    };
    let rb = resolve(root, rb).map_err(|e| e.to_string())?;
    let Some(content) = rb.get("content").and_then(Value::as_object) else {
        return Ok(none());
    };
    let Some((media_type, media)) = pick_media(content.iter().map(|(k, v)| (k.as_str(), v))) else {
        return Ok(none());
    };
    let schema = media.get("schema");
    let example = match media.get("example") {
        Some(e) => Some(e.clone()),
        None => first_example(root, media.get("examples"))?,
    };
    build(root, media_type, schema, example)
}

/// The body of a Swagger 2.0 operation: its `in: body` parameter, typed by `consumes`.
pub fn swagger(root: &Value, op: &Value, params: &[&Value]) -> Result<Body, String> {
    let Some(param) = params
        .iter()
        .find(|p| p.get("in").and_then(Value::as_str) == Some("body"))
    else {
        return Ok(none());
    };
    let consumes: Vec<&str> = op
        .get("consumes")
        .or_else(|| root.get("consumes"))
        .and_then(Value::as_array)
        .map(|c| c.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let media_type = pick_media(consumes.iter().map(|c| (*c, &Value::Null)))
        .map_or("application/json", |(m, _)| m);
    let example = param.get("x-example").cloned();
    build(root, media_type, param.get("schema"), example)
}

/// The request body's media type and schema: OAS 3's `requestBody` (the media type
/// [`oas3`] picks), Swagger 2.0's `in: body` parameter typed by `consumes`. Where a key
/// carried in the body is looked for.
pub fn request_schema<'a>(
    root: &'a Value,
    op: &'a Value,
    params: &[&'a Value],
) -> Option<(String, &'a Value)> {
    if let Some(rb) = op.get("requestBody") {
        let content = resolve(root, rb).ok()?.get("content")?.as_object()?;
        let (media_type, media) = pick_media(content.iter().map(|(k, v)| (k.as_str(), v)))?;
        return Some((media_type.to_string(), media.get("schema")?));
    }
    let param = params
        .iter()
        .find(|p| p.get("in").and_then(Value::as_str) == Some("body"))?;
    let consumes: Vec<&str> = op
        .get("consumes")
        .or_else(|| root.get("consumes"))
        .and_then(Value::as_array)
        .map(|c| c.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let media_type =
        pick_media(consumes.iter().map(|c| (*c, ()))).map_or("application/json", |(m, _)| m);
    Some((media_type.to_string(), param.get("schema")?))
}

fn none() -> Body {
    Body {
        source: BodySource::None,
        content_type: None,
        text: None,
    }
}

/// JSON first (`application/json`, then any `+json`), else the first media type listed.
fn pick_media<'a, T>(types: impl Iterator<Item = (&'a str, T)>) -> Option<(&'a str, T)> {
    let mut all: Vec<(&str, T)> = types.collect();
    let json = |m: &str| {
        let m = m.split(';').next().unwrap_or(m).trim().to_ascii_lowercase();
        if m == "application/json" {
            0
        } else if m.ends_with("+json") {
            1
        } else {
            2
        }
    };
    let best = (0..all.len()).min_by_key(|&i| json(all[i].0))?;
    Some(all.swap_remove(best))
}

/// The value of the first entry of an `examples` map (Example objects, maybe `$ref`s).
fn first_example(root: &Value, examples: Option<&Value>) -> Result<Option<Value>, String> {
    let Some((_, ex)) = examples
        .and_then(Value::as_object)
        .and_then(|m| m.iter().next())
    else {
        return Ok(None);
    };
    let ex = resolve(root, ex).map_err(|e| e.to_string())?;
    Ok(ex.get("value").cloned())
}

fn build(
    root: &Value,
    media_type: &str,
    schema: Option<&Value>,
    example: Option<Value>,
) -> Result<Body, String> {
    let mut gen = Generator::new(root);
    let (source, mut value) = match (example, schema) {
        (Some(e), _) => (BodySource::Example, e),
        (None, Some(s)) => match gen.flatten(s, 0)?.get("example") {
            Some(e) => (BodySource::Example, e.clone()),
            None => (BodySource::Schema, gen.instance(s, 0)?),
        },
        (None, None) => {
            return Ok(Body {
                source: BodySource::None,
                content_type: Some(media_type.to_string()),
                text: None,
            })
        }
    };
    if let Some(s) = schema {
        gen.place_unique(&mut value, s, 0, true);
    }
    let is_json = media_type.to_ascii_lowercase().contains("json");
    let text = match (&value, is_json) {
        (Value::String(s), false) => s.clone(),
        _ => value.to_string(),
    };
    Ok(Body {
        source,
        content_type: Some(media_type.to_string()),
        text: Some(text),
    })
}

/// Builds instances from schemas of one document.
pub struct Generator<'a> {
    root: &'a Value,
    /// The `$ref`s being generated, outermost first: meeting one again is a cycle.
    stack: Vec<&'a str>,
}

impl<'a> Generator<'a> {
    pub fn new(root: &'a Value) -> Self {
        Generator {
            root,
            stack: Vec::new(),
        }
    }

    /// `schema` as one object: its `$ref` followed, `allOf` merged in, and the first non-null
    /// branch of `oneOf`/`anyOf` merged in.
    pub fn flatten(&self, schema: &Value, depth: usize) -> Result<Map<String, Value>, String> {
        let s = resolve(self.root, schema).map_err(|e| e.to_string())?;
        let Some(obj) = s.as_object() else {
            return Ok(Map::new());
        };
        let mut out: Map<String, Value> = obj
            .iter()
            .filter(|(k, _)| {
                !matches!(
                    k.as_str(),
                    "allOf" | "oneOf" | "anyOf" | "$ref" | UNRESOLVED
                )
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if depth >= MAX_DEPTH {
            return Ok(out);
        }
        for sub in obj
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            merge(&mut out, self.flatten(sub, depth + 1)?);
        }
        let branches = obj
            .get("oneOf")
            .or_else(|| obj.get("anyOf"))
            .and_then(Value::as_array);
        for branch in branches.into_iter().flatten() {
            if left_out(self.root, branch) {
                continue;
            }
            let b = self.flatten(branch, depth + 1)?;
            if first_type(&b) != Some("null") {
                merge(&mut out, b);
                break;
            }
        }
        Ok(out)
    }

    /// A minimal instance of `schema`.
    pub fn instance(&mut self, schema: &'a Value, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Ok(Value::Null);
        }
        if let Some(r) = reference(schema) {
            if self.stack.contains(&r) {
                return Ok(Value::Null);
            }
            let target = lookup(self.root, r).map_err(|e| e.to_string())?;
            self.stack.push(r);
            let v = self.instance(target, depth + 1);
            self.stack.pop();
            return v;
        }
        if schema.get(UNRESOLVED).is_some() {
            return Ok(Value::Object(Map::new()));
        }
        let s = self.flatten(schema, 0)?;
        if let Some(v) = s
            .get("const")
            .or_else(|| s.get("enum").and_then(|e| e.get(0)))
            .or_else(|| s.get("example"))
            .or_else(|| s.get("examples").and_then(|e| e.get(0)))
            .or_else(|| s.get("default"))
        {
            return Ok(v.clone());
        }
        let kind = first_type(&s).or_else(|| {
            if s.contains_key("properties") {
                Some("object")
            } else if s.contains_key("items") {
                Some("array")
            } else {
                None
            }
        });
        Ok(match kind {
            Some("object") => {
                let mut out = Map::new();
                let required: Vec<String> = s
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| {
                        r.iter()
                            .filter_map(|n| n.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                for name in required {
                    let Some(p) = self.property(schema, &name) else {
                        out.insert(name, Value::String("string".into()));
                        continue;
                    };
                    if left_out(self.root, p) {
                        continue;
                    }
                    if self.flatten(p, 0)?.get("readOnly") == Some(&Value::Bool(true)) {
                        continue;
                    }
                    let v = self.instance(p, depth + 1)?;
                    out.insert(name, v);
                }
                Value::Object(out)
            }
            Some("array") => {
                let min = s.get("minItems").and_then(Value::as_u64).unwrap_or(0);
                let mut items = Vec::new();
                let item = self.item_schema(schema);
                if min > 0 && !item.is_some_and(|i| left_out(self.root, i)) {
                    for _ in 0..min.min(8) {
                        items.push(match item {
                            Some(i) => self.instance(i, depth + 1)?,
                            None => Value::String("string".into()),
                        });
                    }
                }
                Value::Array(items)
            }
            Some("integer") => number(&s, true),
            Some("number") => number(&s, false),
            Some("boolean") => Value::Bool(false),
            Some("null") => Value::Null,
            _ => string(&s),
        })
    }

    /// Sets the first free-form string field of `value` to `{{unique}}`; at the top level,
    /// adds the first optional free-form string property when none is present.
    fn place_unique(&self, value: &mut Value, schema: &'a Value, depth: usize, top: bool) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        let Ok(s) = self.flatten(schema, 0) else {
            return false;
        };
        match value {
            Value::Object(map) => {
                let props = s.get("properties").and_then(Value::as_object);
                for (k, v) in map.iter_mut() {
                    if v.is_string() && self.property(schema, k).is_some_and(|p| self.free_form(p))
                    {
                        *v = Value::String("{{unique}}".into());
                        return true;
                    }
                }
                for (k, v) in map.iter_mut() {
                    if let Some(p) = self.property(schema, k) {
                        if self.place_unique(v, p, depth + 1, false) {
                            return true;
                        }
                    }
                }
                if top {
                    if let Some((k, _)) = props
                        .into_iter()
                        .flatten()
                        .find(|(k, p)| !map.contains_key(*k) && self.free_form(p))
                    {
                        map.insert(k.clone(), Value::String("{{unique}}".into()));
                        return true;
                    }
                }
                false
            }
            Value::Array(items) => match (items.first_mut(), self.item_schema(schema)) {
                (Some(first), Some(item)) => self.place_unique(first, item, depth + 1, false),
                _ => false,
            },
            _ => false,
        }
    }

    /// A string property with no enum, const, format or pattern, and room for a unique value.
    fn free_form(&self, schema: &Value) -> bool {
        let Ok(s) = self.flatten(schema, 0) else {
            return false;
        };
        first_type(&s) == Some("string")
            && !["enum", "const", "format", "pattern"]
                .iter()
                .any(|k| s.contains_key(*k))
            && s.get("readOnly") != Some(&Value::Bool(true))
            && s.get("maxLength")
                .and_then(Value::as_u64)
                .is_none_or(|m| m >= UNIQUE_ROOM)
            && s.get("minLength")
                .and_then(Value::as_u64)
                .is_none_or(|m| m <= UNIQUE_MIN)
    }

    /// The schema of property `name` of `schema`, borrowed from the document (searched through
    /// `$ref`, `allOf` and the first non-null `oneOf`/`anyOf` branch).
    fn property(&self, schema: &'a Value, name: &str) -> Option<&'a Value> {
        self.find_in(schema, 0, &|s| {
            s.get("properties").and_then(|p| p.get(name))
        })
    }

    /// The `items` schema of an array schema, borrowed from the document.
    fn item_schema(&self, schema: &'a Value) -> Option<&'a Value> {
        self.find_in(schema, 0, &|s| s.get("items"))
    }

    fn find_in(
        &self,
        schema: &'a Value,
        depth: usize,
        pick: &dyn Fn(&'a Value) -> Option<&'a Value>,
    ) -> Option<&'a Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        let s = resolve(self.root, schema).ok()?;
        if let Some(found) = pick(s) {
            return Some(found);
        }
        for key in ["allOf", "oneOf", "anyOf"] {
            for sub in s.get(key).and_then(Value::as_array).into_iter().flatten() {
                if let Some(found) = self.find_in(sub, depth + 1, pick) {
                    return Some(found);
                }
            }
        }
        None
    }
}

/// Merges `other` into `out`: properties and required lists united, other keys kept where
/// `out` has none.
fn merge(out: &mut Map<String, Value>, other: Map<String, Value>) {
    for (k, v) in other {
        match (k.as_str(), out.get_mut(&k), v) {
            ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                for (name, p) in theirs {
                    mine.entry(name).or_insert(p);
                }
            }
            ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                for name in theirs {
                    if !mine.contains(&name) {
                        mine.push(name);
                    }
                }
            }
            (_, Some(_), _) => {}
            (_, None, v) => {
                out.insert(k, v);
            }
        }
    }
}

/// The schema's type, or the first non-null one of a type list (OAS 3.1).
fn first_type(s: &Map<String, Value>) -> Option<&str> {
    match s.get("type")? {
        Value::String(t) => Some(t),
        Value::Array(types) => {
            let names = types.iter().filter_map(Value::as_str);
            names
                .clone()
                .find(|t| *t != "null")
                .or_else(|| names.clone().next())
        }
        _ => None,
    }
}

/// The smallest number the bounds allow (1 when unbounded), on a `multipleOf` step.
fn number(s: &Map<String, Value>, integer: bool) -> Value {
    let f = |k: &str| s.get(k).and_then(Value::as_f64);
    let multiple = f("multipleOf").filter(|m| *m > 0.0);
    // OAS 3.0 marks exclusivity with a boolean beside the bound; 3.1 gives the bound itself.
    let bound = |inclusive: &str, exclusive: &str| match (f(inclusive), s.get(exclusive)) {
        (Some(m), Some(Value::Bool(true))) => Some((m, true)),
        (_, Some(Value::Number(n))) => n.as_f64().map(|m| (m, true)),
        (m, _) => m.map(|m| (m, false)),
    };
    let min = bound("minimum", "exclusiveMinimum");
    let max = bound("maximum", "exclusiveMaximum");
    let mut v = match (min, max) {
        (Some((lo, _)), _) => lo,
        (None, Some((hi, _))) if hi < 1.0 => hi,
        _ => 1.0,
    };
    if let Some(m) = multiple {
        v = (v / m).ceil() * m;
    }
    if integer {
        v = v.ceil();
    }
    let step = multiple.unwrap_or(if integer { 1.0 } else { 0.5 });
    if matches!(min, Some((lo, true)) if v <= lo) {
        v += step;
    }
    if matches!((min, max), (None, Some((hi, true))) if v >= hi) {
        v -= step;
    }
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        Value::Number((v as i64).into())
    } else {
        Number::from_f64(v).map_or(Value::Null, Value::Number)
    }
}

/// A string for the format, padded to `minLength` and cut to `maxLength`.
fn string(s: &Map<String, Value>) -> Value {
    let format = s.get("format").and_then(Value::as_str).unwrap_or("");
    let sample = match format {
        "date-time" => "2024-01-01T00:00:00Z",
        "date" => "2024-01-01",
        "time" => "12:00:00Z",
        "uuid" => "3fa85f64-5717-4562-b3fc-2c963f66afa6",
        "email" | "idn-email" => "user@example.com",
        "uri" | "url" | "iri" | "uri-reference" | "iri-reference" => "https://example.com/",
        "hostname" | "idn-hostname" => "example.com",
        "ipv4" => "192.0.2.1",
        "ipv6" => "2001:db8::1",
        "byte" => "aWRlbS1jaGVjaw==",
        _ => "string",
    };
    let mut out = sample.to_string();
    if format.is_empty() || format == "password" {
        let min = s.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
        while out.len() < min {
            out.push('x');
        }
        if let Some(max) = s.get("maxLength").and_then(Value::as_u64) {
            out.truncate(max as usize);
        }
    }
    Value::String(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn generated(root: &Value, schema: &Value) -> Value {
        let body = build(root, "application/json", Some(schema), None).unwrap();
        assert_eq!(body.source, BodySource::Schema);
        serde_json::from_str(body.text.as_deref().unwrap()).unwrap()
    }

    #[test]
    fn required_properties_enums_formats_and_bounds() {
        let schema = json!({
            "type": "object",
            "required": ["amount", "currency", "at", "id", "email", "rate", "kind", "ref", "server"],
            "properties": {
                "amount": {"type": "integer", "minimum": 0, "exclusiveMinimum": true, "multipleOf": 5},
                "currency": {"type": "string", "enum": ["EUR", "USD"]},
                "at": {"type": "string", "format": "date-time"},
                "id": {"type": "string", "format": "uuid"},
                "email": {"type": "string", "format": "email"},
                "rate": {"type": "number", "exclusiveMinimum": 2.5},
                "kind": {"type": ["string", "null"], "const": "card"},
                "ref": {"type": "string", "minLength": 3},
                "server": {"type": "string", "readOnly": true},
                "note": {"type": "string"}
            }
        });
        let v = generated(&json!({}), &schema);
        assert_eq!(
            v,
            json!({"amount": 5, "currency": "EUR", "at": "2024-01-01T00:00:00Z",
                   "id": "3fa85f64-5717-4562-b3fc-2c963f66afa6", "email": "user@example.com",
                   "rate": 3, "kind": "card", "ref": "{{unique}}"})
        );
    }

    #[test]
    fn all_of_merges_and_one_of_takes_one_consistent_branch() {
        let root = json!({"components": {"schemas": {
            "Base": {"type": "object", "required": ["currency"],
                     "properties": {"currency": {"type": "string", "pattern": "^[A-Z]{3}$", "example": "EUR"}}},
            "Card": {"type": "object", "required": ["type", "card"], "properties": {
                "type": {"const": "card"}, "card": {"type": "string", "maxLength": 19, "example": "4242"}}},
            "Bank": {"type": "object", "required": ["type", "iban"], "properties": {
                "type": {"const": "bank"}, "iban": {"type": "string"}}}
        }}});
        let schema = json!({
            "allOf": [{"$ref": "#/components/schemas/Base"},
                      {"type": "object", "required": ["amount"], "properties": {
                          "amount": {"type": "integer", "minimum": 100},
                          "memo": {"type": "string", "maxLength": 500}}}],
            "oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/Card"}, {"$ref": "#/components/schemas/Bank"}]
        });
        let v = generated(&root, &schema);
        assert_eq!(
            v,
            json!({"currency": "EUR", "amount": 100, "type": "card", "card": "4242", "memo": "{{unique}}"})
        );
    }

    #[test]
    fn recursion_is_cut() {
        let root = json!({"components": {"schemas": {"Node": {
        "type": "object", "required": ["name", "parent", "children"],
        "properties": {
            "name": {"type": "string"},
            "parent": {"$ref": "#/components/schemas/Node"},
            "children": {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/Node"}}
        }}}}});
        let v = generated(&root, &json!({"$ref": "#/components/schemas/Node"}));
        assert_eq!(
            v,
            json!({"name": "{{unique}}", "parent": null, "children": [null]})
        );
    }

    #[test]
    fn media_example_then_examples_then_schema() {
        let root = json!({"components": {"examples": {"E": {"value": {"ref": "from-examples"}}}}});
        let schema = json!({"type": "object", "properties": {"ref": {"type": "string"}}});
        let op = json!({"requestBody": {"content": {
            "text/plain": {"example": "no"},
            "application/json": {"schema": schema, "example": {"ref": "x", "n": 1}}}}});
        let b = oas3(&root, &op).unwrap();
        assert_eq!(
            (b.source, b.content_type.as_deref()),
            (BodySource::Example, Some("application/json"))
        );
        assert_eq!(b.text.as_deref(), Some(r#"{"ref":"{{unique}}","n":1}"#));
        let op = json!({"requestBody": {"content": {"application/json": {
            "schema": schema, "examples": {"first": {"$ref": "#/components/examples/E"}}}}}});
        assert_eq!(
            oas3(&root, &op).unwrap().text.as_deref(),
            Some(r#"{"ref":"{{unique}}"}"#)
        );
        assert_eq!(oas3(&root, &json!({})).unwrap().source, BodySource::None);
    }
}
