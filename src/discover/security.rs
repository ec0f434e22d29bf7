//! Security schemes as credential placeholders: a target file written by `init` says
//! `Authorization: Bearer ${BEARERAUTH_TOKEN}` where the document asks for a bearer token, so
//! the secret comes from the environment (and is masked in every report), never from the file.

use serde_json::Value;

use super::env_name;

/// One credential an operation asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The security scheme's name in the document.
    pub scheme: String,
    /// What kind it is: "http bearer", "apiKey in header", "oauth2", …
    pub kind: String,
    /// The environment variable that holds the secret.
    pub variable: String,
    /// A `Name: value` header line carrying it, when it goes in a header.
    pub header: Option<String>,
    /// `name=value` for the query string, when it goes there.
    pub query: Option<String>,
}

/// The credentials of the operation's first security alternative (the operation's
/// `security`, else the document's); empty when none is required.
pub fn credentials(root: &Value, op: &Value) -> Vec<Credential> {
    let requirement = op
        .get("security")
        .or_else(|| root.get("security"))
        .and_then(Value::as_array)
        .and_then(|alternatives| alternatives.first())
        .and_then(Value::as_object);
    let schemes = root
        .pointer("/components/securitySchemes")
        .or_else(|| root.get("securityDefinitions"));
    let Some(requirement) = requirement else {
        return Vec::new();
    };
    requirement
        .keys()
        .filter_map(|name| {
            let s = super::refs::resolve(root, schemes?.get(name)?).ok()?;
            Some(credential(name, s))
        })
        .collect()
}

fn credential(name: &str, s: &Value) -> Credential {
    let field = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("");
    let base = env_name(name);
    let mut c = Credential {
        scheme: name.to_string(),
        kind: field("type").to_string(),
        variable: base.clone(),
        header: None,
        query: None,
    };
    match (field("type"), field("scheme").to_ascii_lowercase().as_str()) {
        ("http", "basic") | ("basic", _) => {
            c.kind = "http basic".into();
            c.variable = format!("{base}_BASIC");
            c.header = Some(format!("Authorization: Basic ${{{}}}", c.variable));
        }
        ("apiKey", _) => {
            c.kind = format!("apiKey in {}", field("in"));
            let line = format!("{}: ${{{base}}}", field("name"));
            match field("in") {
                "header" => c.header = Some(line),
                "cookie" => c.header = Some(format!("Cookie: {}=${{{base}}}", field("name"))),
                _ => c.query = Some(format!("{}=${{{base}}}", field("name"))),
            }
        }
        (kind, scheme) => {
            // http bearer, oauth2, openIdConnect: a bearer token in Authorization.
            c.kind = if kind == "http" {
                format!("http {scheme}")
            } else {
                kind.to_string()
            };
            c.variable = format!("{base}_TOKEN");
            c.header = Some(format!("Authorization: Bearer ${{{}}}", c.variable));
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemes_become_placeholders() {
        let root = json!({
            "security": [{"bearerAuth": []}],
            "components": {"securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer"},
                "key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
                "basic": {"type": "http", "scheme": "basic"}
            }}
        });
        let c = credentials(&root, &json!({}));
        assert_eq!(
            c[0].header.as_deref(),
            Some("Authorization: Bearer ${BEARERAUTH_TOKEN}")
        );
        assert_eq!(c[0].kind, "http bearer");
        let c = credentials(&root, &json!({"security": [{"key": [], "basic": []}]}));
        assert_eq!(c[0].header.as_deref(), Some("X-Api-Key: ${KEY}"));
        assert_eq!(
            c[1].header.as_deref(),
            Some("Authorization: Basic ${BASIC_BASIC}")
        );
        assert!(credentials(&root, &json!({"security": []})).is_empty());
    }
}
