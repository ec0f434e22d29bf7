//! Reading an API description: a file or an http(s) URL, JSON or YAML, into one
//! `serde_json::Value` tree.
//!
//! JSON goes straight to serde_json (a 7 MB document parses in tens of milliseconds). Anything
//! else, or text starting with `{` that JSON refuses, is YAML, read with yaml-rust2 (pure Rust, maintained, YAML 1.2) and converted: mapping
//! keys become strings (`200:` is an integer key in YAML, a status code in OpenAPI).
//!
//! Published YAML documents sometimes indent with tab characters, which YAML forbids and strict
//! parsers refuse while lenient ones accept. When the strict parse fails and the text has tabs in
//! its indentation, the document is parsed once more with each indenting tab read as two
//! spaces; if that fails too, the original error is reported, with its line and column.

use serde_json::{Map, Number, Value};
use yaml_rust2::{Yaml, YamlLoader};

use super::{Location, SpecError};

/// The most a fetched document may weigh; the largest published ones are under 10 MB.
const MAX_FETCHED: usize = 64 * 1024 * 1024;

/// A parsed description and where it came from.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The path or URL as the user gave it; errors name it.
    pub source: String,
    /// The document, JSON or YAML, as one tree.
    pub root: Value,
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

/// Reads `source` (a path, or an http/https URL) and parses it.
pub async fn load(source: &str, timeout: std::time::Duration) -> Result<Spec, SpecError> {
    let text = if source.starts_with("http://") || source.starts_with("https://") {
        fetch(source, timeout).await?
    } else {
        std::fs::read_to_string(source).map_err(|e| {
            SpecError::new(
                source,
                None,
                format!("cannot read the API description: {e}"),
            )
        })?
    };
    parse(source, &text)
}

async fn fetch(source: &str, timeout: std::time::Duration) -> Result<String, SpecError> {
    let fail = |m: String| SpecError::new(source, None, m);
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| fail(format!("cannot build an HTTP client: {e}")))?;
    let response = client
        .get(source)
        .header(
            "Accept",
            "application/json, application/yaml;q=0.9, */*;q=0.5",
        )
        .send()
        .await
        .map_err(|e| fail(format!("cannot fetch the API description: {e}")))?;
    let status = response.status();
    if !status.is_success() {
        return Err(fail(format!(
            "fetching the API description answered {status}"
        )));
    }
    let bytes = response
        .bytes()
        .await
        .map_err(|e| fail(format!("cannot read the API description: {e}")))?;
    if bytes.len() > MAX_FETCHED {
        return Err(fail(format!(
            "the API description is {} bytes, more than the {MAX_FETCHED} accepted",
            bytes.len()
        )));
    }
    String::from_utf8(bytes.to_vec())
        .map_err(|_| fail("the API description is not UTF-8 text".into()))
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
