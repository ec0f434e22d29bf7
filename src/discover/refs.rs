//! Local `$ref` resolution: `#/components/parameters/IdempotencyKey` → the node it names.
//!
//! A reference is resolved where it is used, by a JSON-pointer lookup into the one parsed tree,
//! never by inlining the document: large published descriptions reference one shared
//! parameter hundreds of times, and each use costs a few map lookups instead of a copy.
//! References to other documents were already followed when the description was loaded
//! ([`super::external`]): each now points at a copy inside the tree, or was replaced by a
//! marker saying why it could not be followed.

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
        // Only a tree parsed without loading (tests, the library) still holds one.
        return Err(err("names another document, which was not read"));
    };
    let pointer = percent_encoding::percent_decode_str(fragment)
        .decode_utf8()
        .map_err(|_| err("is not valid UTF-8 once percent-decoded"))?;
    root.pointer(&pointer)
        .ok_or_else(|| err("points at nothing in this document"))
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
            "x": {"$ref": "common.yaml#/Key"}
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
            resolve(&root, &root["x"]).unwrap_err().why,
            "names another document, which was not read"
        );
    }
}
