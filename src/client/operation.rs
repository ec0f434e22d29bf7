//! The operations the fake API serves: the built-in payments operation, one described by
//! `--method`/`--path`, or the keyed operations of an API description found by
//! [`crate::discover`].
//!
//! An SDK's own create method only works unchanged when the fake answers it the way the real
//! API would: at the declared path (parameters filled by anything), with a 2xx body of the
//! declared shape. So the answer is the document's example of the 2xx response, or an instance
//! generated from its schema, with a fresh id each time: an SDK that reads `id` back, or one
//! that checks `object`, sees what it expects.

use anyhow::{bail, Result};
use serde_json::{Map, Value};

use crate::discover::body::Generator;
use crate::discover::refs::resolve;
use crate::discover::security::Credential;

use super::credential_rule::Auth;

/// The path of the built-in operation.
pub const PAYMENTS_PATH: &str = "/api/payments";

/// What makes a request body acceptable to an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Validation {
    /// The built-in payment: `amountCents` > 0, a 3-letter `currency`, a `reference`.
    Payment,
    /// A JSON object or a form carrying at least these top-level fields.
    Fields(Vec<String>),
}

/// The 2xx answer of an operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    /// The built-in payment: `{"id": "pay_0001", "status": "succeeded", …payload}`.
    Payment,
    /// The request's payload echoed with a fresh `id` (`--method`/`--path`).
    Echo,
    /// The document's example or generated instance; `id` (when it has one) made fresh.
    Template(Value),
}

/// One operation the fake API serves.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    /// The operationId, or a name for the built-in and `--method`/`--path` ones.
    pub id: String,
    /// Upper case.
    pub method: String,
    /// The path template, `{name}` for a parameter.
    pub path: String,
    pub validation: Validation,
    /// The 2xx status it answers with.
    pub status: u16,
    pub created: Created,
    /// The path template of the operation that reads back what this one creates
    /// (`/v2/payments/{payment_id}` for `POST /v2/payments`), its last segment the id: an SDK
    /// that fetches the resource after a conflict must find it.
    pub read: Option<String>,
    /// Where in the 2xx body the resource's fresh id goes (`--id-pointer`), besides the fresh
    /// values every `id` member gets.
    pub id_pointer: Option<String>,
}

/// A resource an operation created: the body it answered with and its id, by which the read
/// operation serves it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub body: Value,
    /// The id at `--id-pointer`, else the shallowest `id` member (`None` when the body has
    /// none to read it back by).
    pub id: Option<String>,
}

impl Operation {
    /// `POST /api/payments` with the payment payload: what clients were written against.
    pub fn payments() -> Operation {
        Operation {
            id: "payments".into(),
            method: "POST".into(),
            path: PAYMENTS_PATH.into(),
            validation: Validation::Payment,
            status: 201,
            created: Created::Payment,
            read: Some(format!("{PAYMENTS_PATH}/{{id}}")),
            id_pointer: None,
        }
    }

    /// `--method M --path P`: any body, echoed back with a fresh id.
    pub fn described(method: &str, path: &str) -> Result<Operation> {
        if !path.starts_with('/') {
            bail!("--path {path:?} must start with '/', e.g. /v1/payments");
        }
        let method = method.to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
            bail!("--method {method:?} is not an HTTP method, e.g. POST");
        }
        Ok(Operation {
            id: format!("{} {path}", method.to_ascii_lowercase()),
            status: if method == "POST" { 201 } else { 200 },
            method,
            path: path.to_string(),
            validation: Validation::Fields(Vec::new()),
            created: Created::Echo,
            read: None,
            id_pointer: None,
        })
    }

    /// A discovered operation: its declared 2xx answer, the request fields it requires, and
    /// the document's read operation of what it creates; the fresh id at `id_pointer` when
    /// given. An error names the operation and what to add when no 2xx answer can be built, or
    /// when the answer has no place for the id at `id_pointer`.
    pub fn from_document(
        root: &Value,
        op: &crate::discover::Operation,
        id_pointer: Option<&str>,
    ) -> Result<Operation> {
        let node = root.pointer(&op.pointer).unwrap_or(&Value::Null);
        let (status, created) = answer(root, node).ok_or_else(|| {
            anyhow::anyhow!(
                "operation {} ({} {}) cannot be served: its 2xx response has neither a JSON \
                 example nor a JSON schema; add one to the document, or describe the operation \
                 with --method and --path instead",
                op.operation_id,
                op.method,
                op.path
            )
        })?;
        if let Some(pointer) = id_pointer {
            if !pointer.starts_with('/') {
                bail!(
                    "--id-pointer {pointer:?}: expected a JSON pointer such as /id or /payment/id"
                );
            }
            id_slot(&created, pointer).map_err(|why| {
                anyhow::anyhow!(
                    "--id-pointer {pointer}: the 2xx answer of operation {} ({} {}) {why}",
                    op.operation_id,
                    op.method,
                    op.path
                )
            })?;
        }
        let base = server_path(root);
        Ok(Operation {
            id: op.operation_id.clone(),
            method: op.method.clone(),
            path: format!("{base}{}", op.path),
            validation: Validation::Fields(required_fields(root, node)),
            status,
            created: Created::Template(created),
            read: read_path(root, &op.path).map(|p| format!("{base}{p}")),
            id_pointer: id_pointer.map(String::from),
        })
    }

    /// The id a request with `method` and `path` reads back, when it is this operation's read
    /// operation: the path's last segment.
    pub fn read_id<'p>(&self, method: &str, path: &'p str) -> Option<&'p str> {
        let read = self.read.as_deref()?;
        if !method.eq_ignore_ascii_case("GET") || !path_matches(read, path) {
            return None;
        }
        path.trim_end_matches('/').rsplit('/').next()
    }

    /// `POST /v1/customers/{id}`, as shown in the evidence.
    pub fn describe(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// True when a request with `method` and `path` (no query) is this operation: literal
    /// segments equal, a `{parameter}` segment matching any non-empty one.
    pub fn matches(&self, method: &str, path: &str) -> bool {
        method.eq_ignore_ascii_case(&self.method) && path_matches(&self.path, path)
    }

    /// Why `payload` is not acceptable, or `None` when it is.
    pub fn refusal(&self, payload: Option<&Value>) -> Option<String> {
        match &self.validation {
            Validation::Payment => (!payload.is_some_and(valid_payment)).then(|| {
                "expected {amountCents: integer > 0, currency: 3 letters, reference: string} \
                 as JSON or a form"
                    .to_string()
            }),
            Validation::Fields(required) => {
                let fields = payload.and_then(Value::as_object);
                let missing: Vec<&str> = required
                    .iter()
                    .filter(|f| !fields.is_some_and(|o| o.contains_key(*f)))
                    .map(String::as_str)
                    .collect();
                if missing.is_empty() {
                    None
                } else {
                    Some(format!(
                        "the body lacks the required field{} {} of {}",
                        if missing.len() == 1 { "" } else { "s" },
                        missing.join(", "),
                        self.describe()
                    ))
                }
            }
        }
    }

    /// Resource number `n` created from `payload`.
    pub fn create(&self, n: usize, payload: &Value) -> Resource {
        let top = |mut body: Value| {
            merge_into(&mut body, payload);
            let id = body.get("id").and_then(Value::as_str).map(String::from);
            Resource { body, id }
        };
        match &self.created {
            Created::Payment => {
                top(serde_json::json!({ "id": format!("pay_{n:04}"), "status": "succeeded" }))
            }
            Created::Echo => top(serde_json::json!({ "id": fresh_id("obj_", n) })),
            Created::Template(t) => {
                let mut body = t.clone();
                let mut ids = Vec::new();
                refresh_ids(&mut body, n, 0, &mut ids);
                let shallowest = ids.into_iter().min_by_key(|(depth, _)| *depth);
                let id = match (self.id_pointer.as_deref(), shallowest) {
                    (Some(pointer), _) => place_id(&mut body, pointer, n),
                    (None, Some((_, id))) => Some(id),
                    (None, None) => place_id(&mut body, "/id", n),
                };
                Resource { body, id }
            }
        }
    }
}

/// True when `path` (no query) is an instance of the template `template`: literal segments
/// equal, a `{parameter}` segment matching any non-empty one.
fn path_matches(template: &str, path: &str) -> bool {
    let want: Vec<&str> = template.trim_end_matches('/').split('/').collect();
    let got: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    want.len() == got.len()
        && want.iter().zip(&got).all(|(w, g)| {
            if w.starts_with('{') && w.ends_with('}') {
                !g.is_empty()
            } else {
                w == g
            }
        })
}

/// The document's path that reads one resource of the collection `path` creates in: `path`
/// followed by one `{parameter}` segment, with a `get` operation (`/payments` →
/// `/payments/{payment_id}`).
fn read_path(root: &Value, path: &str) -> Option<String> {
    let prefix = format!("{}/{{", path.trim_end_matches('/'));
    root.get("paths")?
        .as_object()?
        .iter()
        .find(|(p, item)| {
            p.strip_prefix(&prefix)
                .is_some_and(|rest| rest.ends_with('}') && !rest.contains('/'))
                && resolve(root, item).is_ok_and(|i| i.get("get").is_some_and(Value::is_object))
        })
        .map(|(p, _)| p.clone())
}

/// Whether the fresh id can go at the JSON pointer `pointer` in `body`: its parent is an object
/// there.
fn id_slot(body: &Value, pointer: &str) -> std::result::Result<(), String> {
    let parent = pointer.rsplit_once('/').map_or("", |(parent, _)| parent);
    match body.pointer(parent) {
        Some(Value::Object(_)) => Ok(()),
        Some(_) => Err(format!("has no object at {parent:?} to hold the id")),
        None => Err(format!("has nothing at {parent:?}")),
    }
}

/// Puts a fresh id at `pointer` (the example's prefix kept when it held a string there) and
/// returns it; `None` when the body has no object to hold it.
fn place_id(body: &mut Value, pointer: &str, n: usize) -> Option<String> {
    let (parent, name) = pointer.rsplit_once('/')?;
    let name = name.replace("~1", "/").replace("~0", "~");
    let obj = body.pointer_mut(parent)?.as_object_mut()?;
    let example = obj.get(&name).and_then(Value::as_str).unwrap_or("obj_");
    let id = fresh_id(prefix(example), n);
    obj.insert(name, Value::String(id.clone()));
    Some(id)
}

/// The path part of the document's first server URL (OAS 3 `servers`, variables filled with
/// their defaults; Swagger 2.0 `basePath`), without a trailing slash: an SDK built for
/// `https://api.mollie.com/v2` posts to `/v2/payments`, so that is where the fake must serve.
fn server_path(root: &Value) -> String {
    let url = match root.pointer("/servers/0") {
        Some(server) => {
            let mut url = server
                .get("url")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if let Some(vars) = server.get("variables").and_then(Value::as_object) {
                for (name, var) in vars {
                    if let Some(default) = var.get("default").and_then(Value::as_str) {
                        url = url.replace(&format!("{{{name}}}"), default);
                    }
                }
            }
            url
        }
        None => root
            .get("basePath")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    };
    let path = match url.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("", |i| &rest[i..]),
        None => url.as_str(),
    };
    path.trim_end_matches('/').to_string()
}

/// The fake's credential rule for an API description: its first keyed operation's declared
/// scheme (an http bearer, basic, or API-key header), else none.
pub fn document_auth(credentials: &[Credential]) -> Auth {
    let Some(c) = credentials.first() else {
        return Auth::None;
    };
    match c.kind.as_str() {
        "http basic" => Auth::Basic,
        k if k.starts_with("apiKey in header") => c
            .header
            .as_deref()
            .and_then(|h| h.split_once(':'))
            .map_or(Auth::Any, |(name, _)| Auth::Header(name.trim().to_string())),
        k if k.starts_with("apiKey") => Auth::Any,
        _ => Auth::Bearer,
    }
}

/// Gives every `id` member of `body`, nested ones included (`{"payment": {"id": …}}`), a fresh
/// value of the same kind (the example's prefix kept): two operations must never answer with
/// the example's one id. Each new id is added to `ids` with its depth.
fn refresh_ids(body: &mut Value, n: usize, depth: usize, ids: &mut Vec<(usize, String)>) {
    match body {
        Value::Object(obj) => {
            for (name, value) in obj.iter_mut() {
                if name == "id" && (value.is_string() || value.is_number()) {
                    *value = match value {
                        Value::String(s) => Value::String(fresh_id(prefix(s), n)),
                        _ => Value::from(n),
                    };
                    let id = match value {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    ids.push((depth, id));
                } else {
                    refresh_ids(value, n, depth + 1, ids);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                refresh_ids(item, n, depth + 1, ids);
            }
        }
        _ => {}
    }
}

/// `pi_3MtwBw…` → `pi_`: the part of an example id before its last `_` or `-`.
fn prefix(example: &str) -> &str {
    example.rfind(['_', '-']).map_or("", |i| &example[..=i])
}

/// A fresh id: the prefix, the resource's number, and random hex so ids differ across runs.
fn fresh_id(prefix: &str, n: usize) -> String {
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}{n:04}{}", &random[..12])
}

fn merge_into(body: &mut Value, payload: &Value) {
    if let (Some(b), Some(p)) = (body.as_object_mut(), payload.as_object()) {
        for (k, v) in p {
            if k != "id" {
                b.insert(k.clone(), v.clone());
            }
        }
    }
}

fn valid_payment(p: &Value) -> bool {
    let amount = p.get("amountCents").and_then(Value::as_u64);
    let currency = p.get("currency").and_then(Value::as_str);
    let reference = p.get("reference").and_then(Value::as_str);
    amount.is_some_and(|a| a > 0)
        && currency.is_some_and(|c| c.len() == 3 && c.chars().all(|c| c.is_ascii_alphabetic()))
        && reference.is_some_and(|r| !r.is_empty())
}

/// The first 2xx response (201, 200, 202, then any) with a JSON example or schema: its status
/// and the body to serve.
fn answer(root: &Value, op: &Value) -> Option<(u16, Value)> {
    let responses = op.get("responses")?.as_object()?;
    let mut codes: Vec<&String> = responses.keys().filter(|c| c.starts_with('2')).collect();
    codes.sort_by_key(|c| match c.as_str() {
        "201" => 0,
        "200" => 1,
        "202" => 2,
        _ => 3,
    });
    codes.into_iter().find_map(|code| {
        let status = code.parse::<u16>().unwrap_or(200);
        let response = resolve(root, &responses[code.as_str()]).ok()?;
        body_of(root, response).map(|b| (status, b))
    })
}

/// A response's JSON body: the media type's example, the first of its examples, the schema's
/// example, or an instance generated from the schema (Swagger 2.0: `examples`, `schema`).
fn body_of(root: &Value, response: &Value) -> Option<Value> {
    let (media, schema) = match response.get("content").and_then(Value::as_object) {
        Some(content) => {
            let (_, media) = content
                .iter()
                .find(|(m, _)| m.to_ascii_lowercase().contains("json"))?;
            (Some(media), media.get("schema"))
        }
        None => (None, response.get("schema")),
    };
    let example = media
        .and_then(|m| {
            m.get("example").cloned().or_else(|| {
                let first = m.get("examples")?.as_object()?.values().next()?;
                resolve(root, first).ok()?.get("value").cloned()
            })
        })
        .or_else(|| {
            response
                .get("examples")
                .and_then(|e| e.get("application/json"))
                .cloned()
        });
    if example.is_some() {
        return example;
    }
    let schema = schema?;
    let mut gen = Generator::new(root);
    if let Some(e) = gen.flatten(schema, 0).ok()?.get("example") {
        return Some(e.clone());
    }
    gen.instance(schema, 0).ok().filter(|v| !v.is_null())
}

/// The top-level fields the request body schema requires (JSON or form), for refusing a
/// request the real API would refuse too.
fn required_fields(root: &Value, op: &Value) -> Vec<String> {
    let schema = op
        .get("requestBody")
        .and_then(|rb| resolve(root, rb).ok())
        .and_then(|rb| rb.get("content"))
        .and_then(Value::as_object)
        .and_then(|c| c.values().next())
        .and_then(|m| m.get("schema"))
        .or_else(|| {
            op.get("parameters")?
                .as_array()?
                .iter()
                .filter_map(|p| resolve(root, p).ok())
                .find(|p| p.get("in").and_then(Value::as_str) == Some("body"))?
                .get("schema")
        });
    let Some(flat) = schema.and_then(|s| Generator::new(root).flatten(s, 0).ok()) else {
        return Vec::new();
    };
    flat.get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|n| n.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The payload as JSON: the body itself, or for a form-encoded body (as Stripe's v1 SDKs send)
/// an object of its fields, integers as numbers. Either way, two payloads compare equal when
/// they mean the same, whatever their byte order or spacing.
pub fn parse_payload(body: &[u8], form: bool) -> Option<Value> {
    if !form {
        return serde_json::from_slice(body).ok();
    }
    let fields: Map<String, Value> = url::form_urlencoded::parse(body)
        .map(|(k, v)| {
            let value = match v.parse::<i64>() {
                Ok(n) if n.to_string() == v => Value::from(n),
                _ => Value::from(v.into_owned()),
            };
            (k.into_owned(), value)
        })
        .collect();
    Some(Value::Object(fields))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_server_urls_path_is_served_before_the_operations_path() {
        let cases = [
            (
                json!({"servers": [{"url": "https://api.mollie.com/v2"}]}),
                "/v2",
            ),
            (json!({"servers": [{"url": "https://api.stripe.com/"}]}), ""),
            (
                json!({"servers": [{"url": "https://{host}/{version}/",
                    "variables": {"host": {"default": "h"}, "version": {"default": "v3"}}}]}),
                "/v3",
            ),
            (json!({"servers": [{"url": "/api"}]}), "/api"),
            (json!({"swagger": "2.0", "basePath": "/v1"}), "/v1"),
            (json!({}), ""),
        ];
        for (root, want) in cases {
            assert_eq!(server_path(&root), want, "{root}");
        }
    }

    #[test]
    fn nested_ids_are_fresh_too() {
        let o = Operation {
            created: Created::Template(json!({"payment": {"id": "PM-1", "amount": 5}})),
            ..Operation::payments()
        };
        let a = o.create(1, &json!({})).body;
        let b = o.create(2, &json!({})).body;
        let id = |v: &Value| v["payment"]["id"].as_str().unwrap().to_string();
        assert!(id(&a).starts_with("PM-0001"), "{a}");
        assert_ne!(id(&a), id(&b));
        assert!(a.get("id").is_none(), "the shape is kept: {a}");
        assert_eq!(a["payment"]["amount"], 5);
    }

    #[test]
    fn path_templates_match_any_parameter_value() {
        let op = Operation::described("post", "/v1/customers/{id}/charges").unwrap();
        assert!(op.matches("POST", "/v1/customers/cus_1/charges"));
        assert!(!op.matches("GET", "/v1/customers/cus_1/charges"));
        assert!(!op.matches("POST", "/v1/customers/charges"));
        assert!(Operation::described("POST", "v1").is_err());
    }

    #[test]
    fn the_document_answer_gets_a_fresh_id_with_the_example_prefix() {
        let root = json!({});
        let op = json!({"responses": {"200": {"content": {"application/json": {
            "example": {"id": "pi_3MtwBw", "object": "payment_intent"}}}}}});
        let (status, body) = answer(&root, &op).unwrap();
        assert_eq!(status, 200);
        let o = Operation {
            id: "x".into(),
            method: "POST".into(),
            path: "/x".into(),
            validation: Validation::Fields(vec![]),
            status,
            created: Created::Template(body),
            read: None,
            id_pointer: None,
        };
        let a = o.create(1, &json!({})).body;
        let b = o.create(2, &json!({})).body;
        assert_eq!(a["object"], "payment_intent");
        assert!(a["id"].as_str().unwrap().starts_with("pi_0001"), "{a}");
        assert_ne!(a["id"], b["id"]);
        let none = json!({"responses": {"204": {"description": "no body"}}});
        assert!(answer(&root, &none).is_none());
    }

    #[test]
    fn required_fields_are_refused_by_name() {
        let root = json!({});
        let op = json!({"requestBody": {"content": {"application/x-www-form-urlencoded": {
            "schema": {"type": "object", "required": ["amount", "currency"]}}}}});
        let o = Operation {
            id: "x".into(),
            method: "POST".into(),
            path: "/x".into(),
            validation: Validation::Fields(required_fields(&root, &op)),
            status: 200,
            created: Created::Echo,
            read: None,
            id_pointer: None,
        };
        let form = parse_payload(b"amount=1250&currency=eur", true).unwrap();
        assert_eq!(form["amount"], 1250);
        assert_eq!(o.refusal(Some(&form)), None);
        let partial = parse_payload(b"amount=007", true).unwrap();
        assert_eq!(partial["amount"], "007");
        assert!(o.refusal(Some(&partial)).unwrap().contains("currency"));
    }

    #[test]
    fn the_read_operation_is_the_collection_path_and_one_parameter() {
        let root = json!({"paths": {
            "/payments": {"post": {}},
            "/payments/{payment_id}": {"get": {}},
            "/payments/{payment_id}/cancel": {"post": {}},
            "/refunds/{id}": {"post": {}},
        }});
        assert_eq!(
            read_path(&root, "/payments").as_deref(),
            Some("/payments/{payment_id}")
        );
        assert_eq!(read_path(&root, "/refunds"), None, "a post is no read");
        let o = Operation {
            read: Some("/v2/payments/{payment_id}".into()),
            ..Operation::payments()
        };
        assert_eq!(o.read_id("GET", "/v2/payments/pm_1"), Some("pm_1"));
        assert_eq!(o.read_id("POST", "/v2/payments/pm_1"), None);
        assert_eq!(o.read_id("GET", "/v2/payments"), None);
    }

    #[test]
    fn the_resource_id_is_the_shallowest_id_or_the_one_at_the_id_pointer() {
        let template = json!({"payment": {"id": "PM-1", "card": {"id": "card_1"}}});
        let o = Operation {
            created: Created::Template(template.clone()),
            ..Operation::payments()
        };
        let r = o.create(3, &json!({}));
        assert_eq!(r.id.as_deref(), r.body["payment"]["id"].as_str());
        let pointed = Operation {
            created: Created::Template(json!({"data": {"ref": "pr-1"}})),
            id_pointer: Some("/data/ref".into()),
            ..Operation::payments()
        };
        let r = pointed.create(1, &json!({}));
        assert!(r.id.as_deref().unwrap().starts_with("pr-0001"), "{r:?}");
        assert_eq!(r.id.as_deref(), r.body["data"]["ref"].as_str());
        let none = Operation {
            created: Created::Template(json!({"status": "ok"})),
            ..Operation::payments()
        };
        let r = none.create(1, &json!({}));
        assert_eq!(r.id.as_deref(), r.body["id"].as_str(), "an id is added");
        assert!(id_slot(&template, "/payment/id").is_ok());
        assert!(id_slot(&template, "/charge/id")
            .unwrap_err()
            .contains("/charge"));
    }
}
