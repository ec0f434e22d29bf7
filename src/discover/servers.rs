//! Where the operations live: the base URL from OAS 3 `servers` (variables filled with their
//! defaults) or Swagger 2.0 `schemes`/`host`/`basePath`, unless `--base-url` says otherwise.
//!
//! Relative server URLs (`/v1`, or none at all, which OAS 3 defines as `/`) resolve against
//! the document's own URL when it was fetched; for a local file they need `--base-url`.

use serde_json::Value;

use super::Spec;

/// The base URL of `op` (an operation under `path_item`), without a trailing slash.
pub fn base_url(
    spec: &Spec,
    path_item: &Value,
    op: &Value,
    given: Option<&str>,
) -> Result<String, String> {
    if let Some(b) = given {
        return Ok(b.trim_end_matches('/').to_string());
    }
    let root = &spec.root;
    let raw = if root.get("swagger").is_some() {
        swagger_base(root)
    } else {
        [op, path_item, root]
            .iter()
            .find_map(|n| {
                n.get("servers")
                    .and_then(Value::as_array)
                    .and_then(|s| s.first())
            })
            .map_or_else(|| "/".to_string(), fill_variables)
    };
    absolute(spec, &raw).map(|u| u.trim_end_matches('/').to_string())
}

fn swagger_base(root: &Value) -> String {
    let base_path = root.get("basePath").and_then(Value::as_str).unwrap_or("");
    match root.get("host").and_then(Value::as_str) {
        Some(host) => {
            let schemes: Vec<&str> = root
                .get("schemes")
                .and_then(Value::as_array)
                .map(|s| s.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let scheme = if schemes.is_empty() || schemes.contains(&"https") {
                "https"
            } else {
                schemes[0]
            };
            format!("{scheme}://{host}{base_path}")
        }
        None => base_path.to_string(),
    }
}

/// A server object's URL with `{variable}`s replaced by their default (else first enum value).
fn fill_variables(server: &Value) -> String {
    let mut url = server
        .get("url")
        .and_then(Value::as_str)
        .unwrap_or("/")
        .to_string();
    if let Some(vars) = server.get("variables").and_then(Value::as_object) {
        for (name, var) in vars {
            let value = var
                .get("default")
                .and_then(Value::as_str)
                .or_else(|| {
                    var.get("enum")
                        .and_then(|e| e.get(0))
                        .and_then(Value::as_str)
                })
                .unwrap_or("");
            url = url.replace(&format!("{{{name}}}"), value);
        }
    }
    url
}

fn absolute(spec: &Spec, raw: &str) -> Result<String, String> {
    if raw.starts_with("http://") || raw.starts_with("https://") {
        return Ok(raw.to_string());
    }
    match spec.url() {
        Some(doc) => doc
            .join(if raw.is_empty() { "/" } else { raw })
            .map(|u| u.to_string())
            .map_err(|e| format!("server URL {raw:?} does not resolve against {doc}: {e}")),
        None => Err(format!(
            "the document gives no absolute server URL (found {raw:?}); give --base-url"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(source: &str, root: Value) -> Spec {
        Spec {
            source: source.into(),
            root,
            unresolved: 0,
        }
    }

    #[test]
    fn oas3_servers_with_variables_and_overrides() {
        let s = spec(
            "api.json",
            json!({"openapi": "3.0.3", "servers": [{
                "url": "https://{region}.api.example.com/{version}/",
                "variables": {"region": {"default": "eu"}, "version": {"enum": ["v2", "v1"]}}
            }]}),
        );
        let none = json!({});
        assert_eq!(
            base_url(&s, &none, &none, None).unwrap(),
            "https://eu.api.example.com/v2"
        );
        let op = json!({"servers": [{"url": "https://other.example.com"}]});
        assert_eq!(
            base_url(&s, &none, &op, None).unwrap(),
            "https://other.example.com"
        );
        assert_eq!(
            base_url(&s, &none, &op, Some("http://127.0.0.1:9/")).unwrap(),
            "http://127.0.0.1:9"
        );
    }

    #[test]
    fn swagger_host_and_base_path() {
        let s = spec(
            "api.yaml",
            json!({"swagger": "2.0", "host": "api.example.com", "basePath": "/v1", "schemes": ["http"]}),
        );
        let none = json!({});
        assert_eq!(
            base_url(&s, &none, &none, None).unwrap(),
            "http://api.example.com/v1"
        );
    }

    #[test]
    fn relative_servers_resolve_against_a_fetched_document_only() {
        let none = json!({});
        let fetched = spec(
            "http://127.0.0.1:8080/openapi.json",
            json!({"openapi": "3.1.0"}),
        );
        assert_eq!(
            base_url(&fetched, &none, &none, None).unwrap(),
            "http://127.0.0.1:8080"
        );
        let file = spec(
            "openapi.json",
            json!({"openapi": "3.1.0", "servers": [{"url": "/v1"}]}),
        );
        assert!(base_url(&file, &none, &none, None)
            .unwrap_err()
            .contains("--base-url"));
    }
}
