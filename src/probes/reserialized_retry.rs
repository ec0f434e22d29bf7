//! `reserialized-retry` — the retry carries the same JSON value as the original, serialised
//! another way (its object keys in another order, other whitespace) → it replays the original
//! and executes nothing (required; a second execution is critical). Draft-07 §2.4 fingerprints
//! the *payload*, and clients, SDKs and proxies re-serialise bodies between two attempts: a
//! server that fingerprints the raw bytes answers a legitimate retry 409 or 422, and the client,
//! told its key was misused, retries with a new key or gives up.

use futures::FutureExt;
use serde_json::Value;

use super::shared::keyed_original;
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::outcome::Stop;

const REPLAYED: CheckDecl = CheckDecl::new(
    "replayed",
    "the re-serialised retry gets the original's status and resource back",
);

const NO_NEW_EFFECT: CheckDecl =
    CheckDecl::new("no-new-effect", "the re-serialised retry executes nothing");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "reserialized-retry",
        group: Group::Enforcement,
        section: "draft-07 §2.4 §2.6",
        stimulus: "Sends the operation with a key, then the same key with the same JSON value serialised with its object keys in another order and other whitespace",
        requirement: "The payload is compared as a value, not as bytes: the re-serialised retry replays the original (never 409 or 422) and executes nothing",
        checks: &[REPLAYED, NO_NEW_EFFECT],
        needs: &[],
        prerequisites: &["replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    reserialize(&ctx.request().body).map_err(|e| Stop::Skip(e.into()))?;
    let (key, original) = keyed_original(ctx, None, "there is nothing to replay").await?;
    // Re-serialised with its key in place, wherever the key travels (setting a body key
    // afterwards would write the JSON compactly again).
    let keyed = ctx.keyed(&key);
    let reserialized = reserialize(&keyed.body).map_err(|e| Stop::Skip(e.into()))?;
    let before = ctx.count_before().await?;
    let retry = ctx
        .send(
            "retry, the same JSON re-serialised",
            keyed.with_body(reserialized),
        )
        .await;
    let after = ctx.count("count after").await?;
    ctx.expect_replay(&REPLAYED, &original, &retry);
    let e = ctx.executions(&before, &after, &[&original], &[&retry]);
    ctx.expect_executions(&NO_NEW_EFFECT, e, 0);
    Ok(())
}

/// The same JSON value as `body`, written with every object's keys in reverse order and with
/// spaces and line breaks between its tokens. `Err` (the SKIP reason) when `body` is not a JSON
/// object, or when no other serialisation differs from it.
fn reserialize(body: &[u8]) -> Result<Vec<u8>, String> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| "the body is not JSON, so it cannot be re-serialised (-d)".to_string())?;
    if !value.is_object() {
        return Err(
            "the body is not a JSON object, so its keys cannot be reordered (-d)".to_string(),
        );
    }
    let mut out = String::new();
    write_reversed(&value, 0, &mut out);
    out.push('\n');
    if out.as_bytes() == body {
        return Err("the body has no other serialisation to try (-d)".to_string());
    }
    Ok(out.into_bytes())
}

/// Writes `value` with object keys reversed, two-space indentation and `" : "` separators.
fn write_reversed(value: &Value, depth: usize, out: &mut String) {
    let indent = |d: usize| "  ".repeat(d);
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push_str("{\n");
            let n = map.len();
            for (i, (k, v)) in map.iter().rev().enumerate() {
                out.push_str(&indent(depth + 1));
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(" : ");
                write_reversed(v, depth + 1, out);
                if i + 1 < n {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(&indent(depth));
            out.push('}');
        }
        Value::Array(items) if !items.is_empty() => {
            out.push_str("[ ");
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(" , ");
                }
                write_reversed(v, depth + 1, out);
            }
            out.push_str(" ]");
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_value_in_another_order_and_spacing() {
        let body = br#"{"amount":5,"ref":"r-1","meta":{"a":[1,{"x":true,"y":null}],"b":"q"}}"#;
        let again = reserialize(body).unwrap();
        let text = String::from_utf8(again.clone()).unwrap();
        assert!(text.find("\"ref\"") < text.find("\"amount\""), "{text}");
        assert!(text.find("\"b\"") < text.find("\"a\""), "{text}");
        let a: Value = serde_json::from_slice(body).unwrap();
        let b: Value = serde_json::from_slice(&again).unwrap();
        assert_eq!(a, b);
        assert_ne!(again, body.to_vec());
    }

    #[test]
    fn anything_but_a_json_object_is_a_skip() {
        assert!(reserialize(b"amount=5").unwrap_err().contains("not JSON"));
        assert!(reserialize(b"[1,2]")
            .unwrap_err()
            .contains("not a JSON object"));
    }
}
