//! The JSON report: the whole [`RunReport`], every exchange in full, secrets masked.
//!
//! The shape is the serde form of the model (STYLE §4.4): `schema`, `tool`, `target`, `suite`,
//! `started_at`, `duration_ms`, `summary`, `probes[]` in catalog order, headers as ordered
//! `[{"name", "value"}]` lists, and bodies as strings, or `{"base64": …}` when not UTF-8.
//!
//! Redaction works on the `serde_json::Value` tree rather than on the model, so no field added to
//! the model later can escape it: every string is masked, header objects follow the header rule
//! of [`crate::redact::mask_header`], and base64 bodies are decoded, masked and re-encoded (a
//! token inside a binary body would otherwise survive as base64).

use base64::Engine as _;
use serde_json::Value;

use crate::redact::{mask_header, redact, redact_bytes};
use crate::report::{RenderOptions, RunReport};

/// The report as pretty JSON with a trailing newline.
pub fn render(report: &RunReport, opts: &RenderOptions) -> anyhow::Result<String> {
    render_value(report, opts)
}

/// Any report of the `idem-check.*` schema family (the stress report too) as pretty JSON, with
/// the same redaction.
pub fn render_value<T: serde::Serialize>(
    report: &T,
    opts: &RenderOptions,
) -> anyhow::Result<String> {
    let mut tree = serde_json::to_value(report)?;
    scrub(&mut tree, &opts.secrets);
    let mut out = serde_json::to_string_pretty(&tree)?;
    out.push('\n');
    Ok(out)
}

/// Masks secrets everywhere in `v`.
fn scrub(v: &mut Value, secrets: &[String]) {
    match v {
        Value::String(s) => *s = redact(s, secrets),
        Value::Array(items) => items.iter_mut().for_each(|i| scrub(i, secrets)),
        Value::Object(map) => {
            if let Some(bytes) = base64_body(map) {
                let masked = redact_bytes(&bytes, secrets);
                if masked.as_ref() != bytes.as_slice() {
                    map.insert(
                        "base64".into(),
                        Value::String(base64::engine::general_purpose::STANDARD.encode(masked)),
                    );
                }
                return;
            }
            if let (Some(Value::String(name)), Some(value)) = (map.get("name"), map.get("value")) {
                let raw = match value {
                    Value::String(s) => Some(s.as_bytes().to_vec()),
                    Value::Object(inner) => base64_body(inner),
                    _ => None,
                };
                if let Some(masked) = raw.and_then(|raw| mask_header(name, &raw, secrets)) {
                    map.insert("value".into(), Value::String(masked));
                }
            }
            map.values_mut().for_each(|i| scrub(i, secrets));
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// The bytes of a `{"base64": …}` object (how the model serialises non-UTF-8 bytes).
fn base64_body(map: &serde_json::Map<String, Value>) -> Option<Vec<u8>> {
    match (map.len(), map.get("base64")) {
        (1, Some(Value::String(b64))) => base64::engine::general_purpose::STANDARD.decode(b64).ok(),
        _ => None,
    }
}
