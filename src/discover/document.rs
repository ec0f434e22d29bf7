//! An API description's text as one `serde_json::Value` tree: fetched over http(s) within a
//! byte limit, and parsed from JSON or YAML.
//!
//! JSON goes straight to serde_json (a 7 MB document parses in tens of milliseconds). Anything
//! else, or text starting with `{` that JSON refuses, is YAML, read with yaml-rust2 (pure Rust, maintained, YAML 1.2) and converted: mapping
//! keys become strings (`200:` is an integer key in YAML, a status code in OpenAPI).
//!
//! Published YAML documents sometimes indent with tab characters, which YAML forbids and strict
//! parsers refuse while lenient ones accept. When the strict parse fails and the text has tabs in
//! its indentation, the document is parsed once more with each indenting tab read as two
//! spaces; if that fails too, the original error is reported, with its line and column.

use std::sync::Arc;

use serde_json::{Map, Number, Value};
use yaml_rust2::{Yaml, YamlLoader};

use super::{Location, SpecError};
use crate::http::Connector;

/// The most a fetched document may weigh; the largest published ones are under 10 MB.
pub(super) const MAX_FETCHED: usize = 64 * 1024 * 1024;

/// A parsed description and where it came from.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The path or URL as the user gave it; errors name it.
    pub source: String,
    /// The document, JSON or YAML, as one tree; nodes that references to other documents
    /// name are copied in by [`super::load::load`] ([`super::external`]).
    pub root: Value,
    /// How many references to other documents could not be followed: when none, operations
    /// need no notes.
    pub unresolved: usize,
}

impl Spec {
    /// The source URL when the document was fetched over http(s): relative server URLs
    /// resolve against it.
    pub fn url(&self) -> Option<url::Url> {
        url::Url::parse(&self.source)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
    }
}

/// The HTTP client documents are fetched with, connecting as `connector` says; `timeout`
/// bounds each request.
pub fn client(
    connector: &Arc<Connector>,
    timeout: std::time::Duration,
) -> Result<reqwest::Client, String> {
    crate::http::client::builder(connector)
        .timeout(timeout)
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))
}

/// The text at `url`, read chunk by chunk so that no more than `limit` bytes are ever held;
/// `Err` says what went wrong, as a phrase that follows the document's name ("answered 404
/// Not Found").
pub async fn fetch_text(
    client: &reqwest::Client,
    url: &str,
    limit: usize,
) -> Result<String, String> {
    let mut response = client
        .get(url)
        .header(
            "Accept",
            "application/json, application/yaml;q=0.9, */*;q=0.5",
        )
        .send()
        .await
        .map_err(|e| {
            let tls = crate::http::client::failed_in_tls(&e);
            let why = causes(&e.without_url());
            if tls {
                format!(
                    "cannot be fetched: the TLS handshake failed: {why} (is its certificate \
                     signed by a CA this machine trusts? --cacert FILE adds one)"
                )
            } else {
                format!("cannot be fetched: {why}")
            }
        })?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("answered {status}"));
    }
    if let Some(n) = response.content_length().filter(|n| *n > limit as u64) {
        return Err(format!("is {n} bytes, more than the {limit} accepted"));
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("cannot be read: {}", causes(&e.without_url())))?
    {
        if bytes.len() + chunk.len() > limit {
            return Err(format!("is more than the {limit} bytes accepted"));
        }
        bytes.extend_from_slice(&chunk);
    }
    String::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_string())
}

/// An error and its causes in one line: reqwest's own message names only the request.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// Parses document text: JSON when it starts with `{`, YAML otherwise.
pub fn parse(source: &str, text: &str) -> Result<Spec, SpecError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let root = if text.trim_start().starts_with('{') {
        // A YAML flow mapping also starts with `{`: when JSON refuses, YAML may still read it,
        // and the JSON error (with its line) is what is reported if neither does.
        serde_json::from_str(text).or_else(|e| {
            parse_yaml(source, text).map_err(|_| {
                SpecError::new(
                    source,
                    Some(Location::Line(e.line(), e.column())),
                    format!("not valid JSON: {e}"),
                )
            })
        })?
    } else {
        parse_yaml(source, text)?
    };
    Ok(Spec {
        source: source.to_string(),
        root,
        unresolved: 0,
    })
}

fn parse_yaml(source: &str, text: &str) -> Result<Value, SpecError> {
    let docs = match YamlLoader::load_from_str(text) {
        Ok(docs) => docs,
        Err(strict) => {
            let relaxed = untab_indentation(text);
            match relaxed
                .as_deref()
                .map(YamlLoader::load_from_str)
                .and_then(Result::ok)
            {
                Some(docs) => docs,
                None => {
                    let m = strict.marker();
                    return Err(SpecError::new(
                        source,
                        Some(Location::Line(m.line(), m.col() + 1)),
                        format!("neither JSON nor valid YAML: {}", strict.info()),
                    ));
                }
            }
        }
    };
    match docs.into_iter().next() {
        Some(doc) => Ok(to_json(doc)),
        None => Err(SpecError::new(source, None, "the document is empty")),
    }
}

/// The text with every tab in a line's leading whitespace replaced by two spaces; `None` when
/// no line is indented with a tab.
fn untab_indentation(text: &str) -> Option<String> {
    let mut changed = false;
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
        let (lead, rest) = line.split_at(indent);
        if lead.contains('\t') {
            changed = true;
            out.push_str(&lead.replace('\t', "  "));
        } else {
            out.push_str(lead);
        }
        out.push_str(rest);
    }
    changed.then_some(out)
}

/// A YAML node as JSON. Keys that are not strings (status codes, `true`) become their text.
fn to_json(node: Yaml) -> Value {
    match node {
        Yaml::Real(text) => text
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map_or(Value::String(text), Value::Number),
        Yaml::Integer(i) => Value::Number(i.into()),
        Yaml::String(s) => Value::String(s),
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Array(items) => Value::Array(items.into_iter().map(to_json).collect()),
        Yaml::Hash(map) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map {
                let key = match k {
                    Yaml::String(s) | Yaml::Real(s) => s,
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    Yaml::Null => "null".into(),
                    other => format!("{other:?}"),
                };
                out.insert(key, to_json(v));
            }
            Value::Object(out)
        }
        Yaml::Alias(_) | Yaml::Null | Yaml::BadValue => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_status_code_keys_become_strings() {
        let spec = parse("t.yaml", "responses:\n  201:\n    description: ok\n").unwrap();
        assert_eq!(spec.root["responses"]["201"]["description"], "ok");
    }

    #[test]
    fn tab_indented_yaml_is_read_leniently() {
        let text = "openapi: 3.0.3\npaths:\n\t/a:\n\t\tpost:\n\t\t\toperationId: a\n";
        assert!(
            YamlLoader::load_from_str(text).is_err(),
            "strict parse refuses"
        );
        let spec = parse("t.yaml", text).unwrap();
        assert_eq!(spec.root["paths"]["/a"]["post"]["operationId"], "a");
    }

    #[test]
    fn errors_point_at_the_line() {
        let err = parse("t.yaml", "a: 1\nb: [1, 2\nc: 3\n").unwrap_err();
        assert!(matches!(err.location, Some(Location::Line(_, _))), "{err}");
        let flow = parse("t.yaml", "{openapi: 3.0.3, paths: {}}").unwrap();
        assert_eq!(flow.root["openapi"], "3.0.3");
        let err = parse("t.json", "{\"a\": 1,\n \"b\": [}").unwrap_err();
        assert!(matches!(err.location, Some(Location::Line(2, _))), "{err}");
        assert!(err.to_string().starts_with("t.json:2:"), "{err}");
        assert!(err.message.starts_with("not valid JSON"), "{err}");
    }
}
