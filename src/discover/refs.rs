//! Local `$ref` resolution: `#/components/parameters/IdempotencyKey` → the node it names.
//!
//! A reference is resolved where it is used, by a JSON-pointer lookup into the one parsed tree,
//! never by inlining the document: large published descriptions reference one shared
//! parameter hundreds of times, and each use costs a few map lookups instead of a copy.
//! References to other files are refused up front ([`external_refs`]) so that a document that
//! needs bundling says so once, clearly, instead of failing operation by operation.

use serde_json::Value;

/// How many `$ref` hops one resolution may take before it counts as a cycle.
const MAX_HOPS: usize = 32;

/// Why a reference could not be followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefError {
    /// The `$ref` value.
    pub reference: String,
    pub why: &'static str,
}

impl std::fmt::Display for RefError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "$ref {:?} {}", self.reference, self.why)
    }
}

/// The `$ref` string of `node`, if it is a reference object.
pub fn reference(node: &Value) -> Option<&str> {
    node.get("$ref").and_then(Value::as_str)
}

/// Follows `node`'s `$ref` chain to the node it ends at (`node` itself when it is no reference).
pub fn resolve<'a>(root: &'a Value, node: &'a Value) -> Result<&'a Value, RefError> {
    let mut current = node;
    for _ in 0..MAX_HOPS {
        let Some(r) = reference(current) else {
            return Ok(current);
        };
        current = lookup(root, r)?;
    }
    Err(RefError {
        reference: reference(node).unwrap_or_default().to_string(),
        why: "is part of a reference cycle",
    })
}

/// The node a local reference (`#/a/b`) names.
pub fn lookup<'a>(root: &'a Value, r: &str) -> Result<&'a Value, RefError> {
    let err = |why| RefError {
        reference: r.to_string(),
        why,
    };
    let Some(fragment) = r.strip_prefix('#') else {
        return Err(err(
            "names another file; bundle the description into one file first",
        ));
    };
    let pointer = percent_encoding::percent_decode_str(fragment)
        .decode_utf8()
        .map_err(|_| err("is not valid UTF-8 once percent-decoded"))?;
    root.pointer(&pointer)
        .ok_or_else(|| err("points at nothing in this document"))
}

/// The first reference to another file, with the JSON pointer of where it is used.
pub fn external_refs(root: &Value) -> Option<(String, String)> {
    fn walk(v: &Value, path: &mut String) -> Option<(String, String)> {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    if !r.starts_with('#') {
                        return Some((r.clone(), path.clone()));
                    }
                }
                for (k, child) in map {
                    // Examples hold data, not schema: a `$ref` key inside one is just a field.
                    if k == "example" {
                        continue;
                    }
                    let len = path.len();
                    path.push('/');
                    path.push_str(&escape(k));
                    let found = walk(child, path);
                    path.truncate(len);
                    if found.is_some() {
                        return found;
                    }
                }
                None
            }
            Value::Array(items) => items.iter().enumerate().find_map(|(i, child)| {
                let len = path.len();
                path.push_str(&format!("/{i}"));
                let found = walk(child, path);
                path.truncate(len);
                found
            }),
            _ => None,
        }
    }
    walk(root, &mut String::new())
}

/// One JSON-pointer token (RFC 6901 escaping).
pub fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn follows_chains_and_decodes_pointers() {
        let root = json!({
            "components": {"parameters": {
                "A": {"$ref": "#/components/parameters/B"},
                "B": {"name": "Idempotency-Key"},
                "a/b": {"name": "slash"}
            }},
            "x": {"$ref": "#/components/parameters/A"},
            "y": {"$ref": "#/components/parameters/a~1b"},
            "z": {"$ref": "#/components/parameters/a%7E1b"}
        });
        assert_eq!(
            resolve(&root, &root["x"]).unwrap()["name"],
            "Idempotency-Key"
        );
        assert_eq!(resolve(&root, &root["y"]).unwrap()["name"], "slash");
        assert_eq!(resolve(&root, &root["z"]).unwrap()["name"], "slash");
    }

    #[test]
    fn cycles_missing_targets_and_other_files_are_errors() {
        let root = json!({
            "a": {"$ref": "#/b"}, "b": {"$ref": "#/a"},
            "m": {"$ref": "#/nowhere"},
            "paths": {"/p": {"post": {"parameters": [{"$ref": "common.yaml#/Key"}]}}}
        });
        assert_eq!(
            resolve(&root, &root["a"]).unwrap_err().why,
            "is part of a reference cycle"
        );
        assert!(resolve(&root, &root["m"])
            .unwrap_err()
            .to_string()
            .contains("#/nowhere"));
        assert_eq!(
            external_refs(&root),
            Some((
                "common.yaml#/Key".to_string(),
                "/paths/~1p/post/parameters/0".to_string()
            ))
        );
    }
}
