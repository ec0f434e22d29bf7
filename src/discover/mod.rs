//! OpenAPI discovery: read an API description (OpenAPI 3.0, 3.1 or Swagger 2.0; JSON or YAML;
//! a file or a URL) and find every operation that takes an idempotency key, in a header or in
//! the request body, with what is needed to call it — its URL, where the key goes as declared,
//! a body, credentials.
//!
//! The document is walked as a `serde_json::Value` with a small local-`$ref` resolver rather
//! than deserialised into typed OpenAPI models: the typed crates each cover one version, and
//! published documents break their rules (tabs in YAML, extra fields, 3.0 and 3.1 features
//! mixed); a walker reads what is there, and points at the JSON pointer of what it cannot use.
//!
//! - [`load`] reads and parses; [`external`] follows references to other files and URLs;
//!   [`refs`] resolves local `$ref`s; [`header`] recognises the key header and [`key`] a key
//!   among the body's properties; [`body`] picks or generates a body; [`servers`] finds the
//!   base URL; [`security`] turns security schemes into credential placeholders.
//! - [`run`] checks every discovered operation with the ordinary single-operation run;
//!   [`init`] writes one target file per operation instead.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::carrier::Place;

pub mod body;
pub mod document;
pub mod external;
pub mod header;
pub mod init;
pub mod key;
pub mod load;
pub mod refs;
pub mod run;
pub mod security;
pub mod servers;

pub use document::Spec;

use body::{Body, Generator};
use refs::{escape, resolve};

/// The JSON schema id of `discover --format json`.
pub const SCHEMA: &str = "idem-check.discover/1";

/// HTTP methods an OpenAPI path item may hold, in the order operations are listed.
const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Where in a document an error is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// Line and column, from 1.
    Line(usize, usize),
}

/// A document that cannot be used, in one line naming the source and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SpecError {
    /// The path or URL of the document.
    pub document: String,
    pub location: Option<Location>,
    pub message: String,
}

impl SpecError {
    pub fn new(source: &str, location: Option<Location>, message: impl Into<String>) -> Self {
        SpecError {
            document: source.to_string(),
            location,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.location {
            Some(Location::Line(line, col)) => {
                write!(f, "{}:{line}:{col}: {}", self.document, self.message)
            }
            None => write!(f, "{}: {}", self.document, self.message),
        }
    }
}

/// What the user adds to the document.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// More header names that carry the key (`--key-header`).
    pub key_headers: Vec<String>,
    /// Path parameter values (`--path-param NAME=VALUE`), over the document's examples.
    pub path_params: BTreeMap<String, String>,
    /// The base URL, over the document's servers (`--base-url`).
    pub base_url: Option<String>,
}

/// An operation that takes an idempotency key.
#[derive(Debug, Clone)]
pub struct Operation {
    /// Upper case: `POST`.
    pub method: String,
    /// The path template as declared: `/v1/customers/{id}/charges`.
    pub path: String,
    /// The declared operationId, else one made from method and path.
    pub operation_id: String,
    /// Where the key goes as declared: a header, or a property of the request body.
    pub key: Place,
    pub required: bool,
    /// How the header or body property was recognised.
    pub matched: header::Match,
    pub body: Body,
    /// The operation's JSON pointer in the document.
    pub pointer: String,
    /// The full URL with path parameters filled, or why `run` and `stress` cannot call the
    /// operation: a path parameter without a value, no base URL, or a key in the body (their
    /// probes place keys in a header).
    pub url: Result<String, String>,
    /// The base URL (or why there is none) and path parameters without a value: what a target
    /// file leaves as `${…}` placeholders.
    pub base: Result<String, String>,
    pub unfilled: Vec<String>,
    /// The path with parameters filled, and `${NAME}` for those in `unfilled`.
    pub filled_path: String,
    /// `/id` when the 2xx response schema has an `id` property.
    pub id_pointer: Option<String>,
    /// Credentials the operation's security requirement asks for.
    pub credentials: Vec<security::Credential>,
    /// References to other documents the operation reaches that could not be followed, one
    /// line each naming the reference and why: what they name is left out of its body.
    pub notes: Vec<String>,
}

/// An operation that could not be examined, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Skipped {
    pub method: String,
    pub path: String,
    pub operation_id: String,
    pub pointer: String,
    pub reason: String,
}

impl Skipped {
    /// One line for the terminal: what was skipped, where, and why.
    pub fn line(&self) -> String {
        crate::redact::sanitize_line(&format!(
            "skipped {} {} ({}) at {}: {}",
            self.method, self.path, self.operation_id, self.pointer, self.reason
        ))
    }
}

/// Everything found in one document.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// "OpenAPI 3.1.0", "Swagger 2.0".
    pub version: String,
    pub operations: Vec<Operation>,
    pub skipped: Vec<Skipped>,
    /// Operations without an idempotency key header.
    pub without_key: usize,
}

impl Discovery {
    /// The operations named by `ids` (`--operation`; all when none is), in document order; an
    /// unknown id is an error listing the known ones.
    pub fn select(&self, ids: &[String]) -> anyhow::Result<Vec<&Operation>> {
        if let Some(id) = ids
            .iter()
            .find(|id| !self.operations.iter().any(|o| &o.operation_id == *id))
        {
            let known: Vec<&str> = self
                .operations
                .iter()
                .map(|o| o.operation_id.as_str())
                .collect();
            anyhow::bail!(
                "no operation {id:?} takes an idempotency key; those that do: {}",
                known.join(", ")
            );
        }
        Ok(self
            .operations
            .iter()
            .filter(|o| ids.is_empty() || ids.contains(&o.operation_id))
            .collect())
    }
}

/// Finds the operations of `spec` that take an idempotency key.
pub fn discover(spec: &Spec, opts: &Options) -> Result<Discovery, SpecError> {
    let root = &spec.root;
    let err = |loc: Option<Location>, m: String| SpecError::new(&spec.source, loc, m);
    let version = version(root).map_err(|m| err(None, m))?;
    let swagger = root.get("swagger").is_some();
    let paths = root
        .get("paths")
        .and_then(Value::as_object)
        .ok_or_else(|| err(None, format!("the {version} document has no paths")))?;
    let mut found = Discovery {
        version,
        operations: Vec::new(),
        skipped: Vec::new(),
        without_key: 0,
    };
    for (path, item) in paths {
        let item_pointer = format!("/paths/{}", escape(path));
        let item = match resolve(root, item) {
            Ok(i) => i,
            Err(e) => {
                found.skipped.push(Skipped {
                    method: "*".into(),
                    path: path.clone(),
                    operation_id: String::new(),
                    pointer: item_pointer,
                    reason: e.to_string(),
                });
                continue;
            }
        };
        for method in METHODS {
            let Some(op) = item.get(*method).filter(|o| o.is_object()) else {
                continue;
            };
            let pointer = format!("{item_pointer}/{method}");
            let operation_id = op
                .get("operationId")
                .and_then(Value::as_str)
                .map_or_else(|| derived_id(method, path), String::from);
            let skip = |reason: String| Skipped {
                method: method.to_ascii_uppercase(),
                path: path.clone(),
                operation_id: operation_id.clone(),
                pointer: pointer.clone(),
                reason,
            };
            match examine(spec, opts, swagger, path, item, op, &pointer) {
                Ok(Some(mut o)) => {
                    o.operation_id = operation_id.clone();
                    found.operations.push(o);
                }
                Ok(None) => found.without_key += 1,
                Err(reason) => found.skipped.push(skip(reason)),
            }
        }
    }
    if found.operations.is_empty() && found.skipped.is_empty() {
        let mut names = vec!["names containing \"idempot\"".to_string()];
        names.extend(header::KNOWN_ALIASES.iter().map(|a| a.to_string()));
        names.extend(opts.key_headers.iter().cloned());
        return Err(err(
            None,
            format!(
                "no operation takes an idempotency key header or body property ({} operation{} \
                 in this {} document; looked for headers with {}, body properties with names \
                 containing \"idempot\", and descriptions mentioning idempotency; name a header \
                 with --key-header)",
                found.without_key,
                if found.without_key == 1 { "" } else { "s" },
                found.version,
                names.join(", ")
            ),
        ));
    }
    Ok(found)
}

/// "OpenAPI 3.1.0" or "Swagger 2.0", or what the document is instead.
fn version(root: &Value) -> Result<String, String> {
    let Some(obj) = root.as_object() else {
        let what = match root {
            Value::Array(_) => "a list",
            Value::String(_) => "a string",
            Value::Null => "nothing",
            _ => "a scalar",
        };
        return Err(format!("not an OpenAPI or Swagger document (found {what})"));
    };
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match (obj.get("openapi"), obj.get("swagger")) {
        (Some(v), _) if text(v).starts_with("3.") => Ok(format!("OpenAPI {}", text(v))),
        (Some(v), _) => Err(format!(
            "OpenAPI version {} is not supported (3.0, 3.1, or Swagger 2.0)",
            text(v)
        )),
        (None, Some(v)) if text(v).starts_with('2') => Ok(format!("Swagger {}", text(v))),
        (None, Some(v)) => Err(format!(
            "Swagger version {} is not supported (2.0)",
            text(v)
        )),
        (None, None) => {
            let keys: Vec<&str> = obj.keys().take(5).map(String::as_str).collect();
            Err(format!(
                "not an OpenAPI or Swagger document: no \"openapi\" or \"swagger\" field (found {})",
                if keys.is_empty() {
                    "an empty object".to_string()
                } else {
                    format!("an object with keys {}", keys.join(", "))
                }
            ))
        }
    }
}

/// `post-v1-customers-id-charges` for an operation without an operationId.
fn derived_id(method: &str, path: &str) -> String {
    let mut id = method.to_string();
    for part in path.split(|c: char| !c.is_ascii_alphanumeric()) {
        if !part.is_empty() {
            id.push('-');
            id.push_str(part);
        }
    }
    id
}

/// The operation, when it takes an idempotency key in a header or in its body; `Err` with the
/// reason it cannot be examined (an unresolvable `$ref`, named with its pointer).
fn examine(
    spec: &Spec,
    opts: &Options,
    swagger: bool,
    path: &str,
    item: &Value,
    op: &Value,
    pointer: &str,
) -> Result<Option<Operation>, String> {
    let root = &spec.root;
    let params = parameters(root, item, op, pointer)?;
    let in_header = params.iter().find_map(|p| {
        if p.get("in").and_then(Value::as_str) != Some("header") {
            return None;
        }
        let name = p.get("name").and_then(Value::as_str)?;
        let description = p.get("description").and_then(Value::as_str);
        header::recognise(name, description, &opts.key_headers).map(|m| key::FoundKey {
            at: Place::Header(name.to_string()),
            required: p.get("required").and_then(Value::as_bool) == Some(true),
            matched: m,
        })
    });
    let found = in_header.or_else(|| {
        let (media_type, schema) = body::request_schema(root, op, &params)?;
        key::in_body(root, &media_type, schema)
    });
    let Some(found) = found else {
        // The key header may be declared in what could not be read.
        let missing = parameter_notes(spec, item, op);
        if !missing.is_empty() {
            return Err(format!(
                "no idempotency key header among the parameters that could be read; {}",
                missing.join("; ")
            ));
        }
        return Ok(None);
    };
    let body = if swagger {
        body::swagger(root, op, &params)
    } else {
        body::oas3(root, op)
    }
    .map_err(|e| format!("request body at {pointer}: {e}"))?;
    let base = servers::base_url(spec, item, op, opts.base_url.as_deref());
    let (filled, unfilled) = fill_path(root, path, &params, &opts.path_params);
    let url = match (&base, unfilled.is_empty()) {
        (Ok(b), true) => Ok(format!("{b}{filled}")),
        (Err(e), _) => Err(e.clone()),
        (Ok(_), false) => Err(format!(
            "path parameter{} {} ha{} no example; give --path-param {}=VALUE",
            if unfilled.len() == 1 { "" } else { "s" },
            unfilled.join(", "),
            if unfilled.len() == 1 { "s" } else { "ve" },
            unfilled[0]
        )),
    };
    Ok(Some(Operation {
        method: op_method(pointer),
        path: path.to_string(),
        operation_id: String::new(),
        key: found.at,
        required: found.required,
        matched: found.matched,
        body,
        pointer: pointer.to_string(),
        url,
        base,
        unfilled,
        filled_path: filled,
        id_pointer: id_pointer(root, op),
        credentials: security::credentials(root, op),
        notes: if spec.unresolved == 0 {
            Vec::new()
        } else {
            external::notes(root, &[op, item.get("parameters").unwrap_or(&Value::Null)])
        },
    }))
}

/// Whether the request body of the discovered operation `op` declares a field at `at` (a JSON
/// pointer, or a form field's name): `Err` with the properties declared where the path ends.
/// A body without a schema, or one left open there, declares anything.
pub fn body_declares(root: &Value, op: &Operation, at: &str) -> Result<(), Vec<String>> {
    let Some(node) = root.pointer(&op.pointer) else {
        return Ok(());
    };
    let item_pointer = op.pointer.rsplit_once('/').map_or("", |(p, _)| p);
    let item = root.pointer(item_pointer).unwrap_or(&Value::Null);
    let item = resolve(root, item).unwrap_or(item);
    let Ok(params) = parameters(root, item, node, &op.pointer) else {
        return Ok(());
    };
    match body::request_schema(root, node, &params) {
        Some((_, schema)) => key::declares(root, schema, at),
        None => Ok(()),
    }
}

/// The notes on the operation's parameters (path-level ones included) that could not be read.
fn parameter_notes(spec: &Spec, item: &Value, op: &Value) -> Vec<String> {
    if spec.unresolved == 0 {
        return Vec::new();
    }
    let none = Value::Null;
    let lists = [item, op].map(|n| n.get("parameters").unwrap_or(&none));
    external::notes(&spec.root, &lists)
}

fn op_method(pointer: &str) -> String {
    pointer
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_ascii_uppercase()
}

/// Path-level parameters merged with the operation's, which override them by name and
/// location (header names compared case-insensitively); every `$ref` resolved.
fn parameters<'a>(
    root: &'a Value,
    item: &'a Value,
    op: &'a Value,
    pointer: &str,
) -> Result<Vec<&'a Value>, String> {
    let mut out: Vec<&Value> = Vec::new();
    let item_pointer = pointer.rsplit_once('/').map_or(pointer, |(p, _)| p);
    for (owner, at) in [(item, item_pointer), (op, pointer)] {
        let list = owner.get("parameters").and_then(Value::as_array);
        for (i, p) in list.into_iter().flatten().enumerate() {
            let p = resolve(root, p).map_err(|e| format!("{e} (at {at}/parameters/{i})"))?;
            let key = |p: &Value| {
                let loc = p
                    .get("in")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                let name = if loc == "header" {
                    name.to_ascii_lowercase()
                } else {
                    name.to_string()
                };
                (loc, name)
            };
            let k = key(p);
            out.retain(|q| key(q) != k);
            out.push(p);
        }
    }
    Ok(out)
}

/// The path with `{name}` filled from `--path-param`, then the parameter's examples; the names
/// left without a value stay as `${NAME}` placeholders and are listed.
fn fill_path(
    root: &Value,
    path: &str,
    params: &[&Value],
    given: &BTreeMap<String, String>,
) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut unfilled = Vec::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        out.push_str(&rest[..open]);
        let name = &rest[open + 1..close];
        match given
            .get(name)
            .cloned()
            .or_else(|| path_example(root, params, name))
        {
            Some(v) => out.push_str(&v),
            None => {
                out.push_str(&format!("${{{}}}", env_name(name)));
                unfilled.push(name.to_string());
            }
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    (out, unfilled)
}

fn path_example(root: &Value, params: &[&Value], name: &str) -> Option<String> {
    let p = params.iter().find(|p| {
        p.get("in").and_then(Value::as_str) == Some("path")
            && p.get("name").and_then(Value::as_str) == Some(name)
    })?;
    let schema = p
        .get("schema")
        .and_then(|s| Generator::new(root).flatten(s, 0).ok())
        .map(Value::Object)
        .unwrap_or_else(|| (*p).clone());
    let examples = p
        .get("examples")
        .and_then(Value::as_object)
        .and_then(|m| m.values().next())
        .and_then(|e| resolve(root, e).ok())
        .and_then(|e| e.get("value"));
    let v = p
        .get("example")
        .or(p.get("x-example"))
        .or(examples)
        .or_else(|| schema.get("example"))
        .or_else(|| schema.get("examples").and_then(|e| e.get(0)))
        .or_else(|| schema.get("default"))
        .or_else(|| schema.get("enum").and_then(|e| e.get(0)))?;
    Some(match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

/// `payment_id` → `PAYMENT_ID`: an environment variable name.
pub fn env_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// `/id` when the first 2xx response's JSON schema has an `id` property: the resource id
/// counts executions when no effect counter is given.
fn id_pointer(root: &Value, op: &Value) -> Option<String> {
    let responses = op.get("responses")?.as_object()?;
    let preferred = ["201", "200", "202"];
    let (_, response) = preferred
        .iter()
        .find_map(|code| responses.get_key_value(*code))
        .or_else(|| responses.iter().find(|(code, _)| code.starts_with('2')))?;
    let response = resolve(root, response).ok()?;
    let schema = response.get("schema").or_else(|| {
        let content = response.get("content")?.as_object()?;
        content
            .iter()
            .find(|(m, _)| m.contains("json"))
            .and_then(|(_, media)| media.get("schema"))
    })?;
    let flat = Generator::new(root).flatten(schema, 0).ok()?;
    flat.get("properties")?.get("id").map(|_| "/id".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_and_env_names() {
        assert_eq!(
            derived_id("post", "/v1/customers/{id}/charges"),
            "post-v1-customers-id-charges"
        );
        assert_eq!(env_name("payment-id"), "PAYMENT_ID");
    }
}
