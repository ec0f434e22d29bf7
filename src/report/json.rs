//! The JSON report: the whole [`RunReport`], every exchange in full, secrets masked.
//!
//! The shape is the serde form of the model (STYLE §4.4): `schema`, `tool`, `target`, `suite`,
//! `started_at`, `duration_ms`, `summary`, `probes[]` in catalog order, headers as ordered
//! `[{"name", "value"}]` lists, and bodies as strings, or `{"base64": …}` when not UTF-8.
//!
//! Redaction works on the `serde_json::Value` tree rather than on the model, so no field added to
//! the model later can escape it: every string is masked, header objects follow the header rule
//! of [`crate::redact::Secrets::mask_header`], and base64 bodies are decoded, masked and
//! re-encoded (a token inside a binary body would otherwise survive as base64). A masked header
//! gains `value_template`, the value with each secret written `${VAR}`, so `idem-check
//! reproduce` can send it again with the secret taken from the environment.
//!
//! Size is bounded the same way: a `body` longer than the JSON body cap (`--max-body-bytes`) is
//! cut, and the object gains `body_size` (bytes on the wire) and `body_sha256` (of the whole
//! body) beside it; any other string longer than the cap is cut with its size and digest.
//! Every exchange stays in the report.
//!
//! A webhook delivery's exchange gains `signing` ([`crate::report::replay_lines::Signing`]):
//! the scheme, the variable (or, for a forgery's wrong key, the literal key) behind each of its
//! signatures, and how far from the sender's clock it was signed, so `idem-check reproduce`
//! signs it afresh from the exported secrets; nothing in it is secret.

use base64::Engine as _;
use serde_json::Value;

use crate::http::curl::value_template;
use crate::http::exchange::{Header, SentRequest};
use crate::redact::{cut_line, sha256_hex, Secrets};
use crate::report::replay_lines::Resigner;
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
    if let Some(resigner) = &opts.resigner {
        sign_exchanges(&mut tree, resigner.as_ref());
    }
    template_requests(&mut tree, &opts.secrets);
    scrub(&mut tree, &opts.secrets, opts.max_body);
    let mut out = serde_json::to_string_pretty(&tree)?;
    out.push('\n');
    Ok(out)
}

/// Gives every exchange whose request carries a signature `signing`: how `idem-check reproduce`
/// signs it again ([`Resigner::signing`]). Read before masking, which hides the signatures.
fn sign_exchanges(v: &mut Value, resigner: &dyn Resigner) {
    match v {
        Value::Array(items) => items.iter_mut().for_each(|i| sign_exchanges(i, resigner)),
        Value::Object(map) => {
            let signing = map
                .get("request")
                .and_then(sent_request)
                .and_then(|req| resigner.signing(&req))
                .and_then(|s| serde_json::to_value(s).ok());
            match signing {
                Some(signing) => {
                    map.insert("signing".into(), signing);
                }
                None => map.values_mut().for_each(|i| sign_exchanges(i, resigner)),
            }
        }
        _ => {}
    }
}

/// The request a serialised `{"method", "url", "headers", "body"}` object is.
fn sent_request(v: &Value) -> Option<SentRequest> {
    let bytes = |v: &Value| match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Object(inner) => base64_body(inner),
        _ => None,
    };
    let headers = v
        .get("headers")?
        .as_array()?
        .iter()
        .map(|h| {
            Some(Header::new(
                h.get("name")?.as_str()?,
                bytes(h.get("value")?)?,
            ))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(SentRequest {
        method: v.get("method")?.as_str()?.to_string(),
        url: v.get("url")?.as_str()?.to_string(),
        headers,
        body: bytes(v.get("body")?)?,
    })
}

/// Gives every masked header of every request (an object with `method`, `url` and `headers`) a
/// `value_template`: what `idem-check reproduce` sends instead, its variables filled in. Only
/// requests: a response's masked header is nothing to send again.
fn template_requests(v: &mut Value, secrets: &Secrets) {
    match v {
        Value::Array(items) => items.iter_mut().for_each(|i| template_requests(i, secrets)),
        Value::Object(map) => {
            let is_request = map.contains_key("method") && map.contains_key("url");
            if let (true, Some(Value::Array(headers))) = (is_request, map.get_mut("headers")) {
                headers.iter_mut().for_each(|h| template_header(h, secrets));
            }
            map.values_mut().for_each(|i| template_requests(i, secrets));
        }
        _ => {}
    }
}

/// Adds `value_template` to one `{"name", "value"}` header whose value is masked.
fn template_header(header: &mut Value, secrets: &Secrets) {
    let Value::Object(map) = header else { return };
    let (Some(Value::String(name)), Some(value)) = (map.get("name"), map.get("value")) else {
        return;
    };
    let raw = match value {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Object(inner) => base64_body(inner),
        _ => None,
    };
    let template = raw.and_then(|raw| {
        secrets.mask_header(name, &raw)?;
        value_template(name, &raw, secrets)
    });
    if let Some(template) = template {
        map.insert("value_template".into(), Value::String(template));
    }
}

/// Masks secrets everywhere in `v`, and cuts what is longer than `max`.
fn scrub(v: &mut Value, secrets: &Secrets, max: usize) {
    match v {
        Value::String(s) => *s = cut_line(&secrets.redact(s), max),
        Value::Array(items) => items.iter_mut().for_each(|i| scrub(i, secrets, max)),
        Value::Object(map) => {
            if let Some(bytes) = base64_body(map) {
                let masked = secrets.redact_bytes(&bytes);
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
                if let Some(masked) = raw.and_then(|raw| secrets.mask_header(name, &raw)) {
                    map.insert("value".into(), Value::String(masked));
                }
            }
            cut_body(map, secrets, max);
            map.values_mut().for_each(|i| scrub(i, secrets, max));
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Cuts the `body` of a request or response object to `max` bytes (masked first, so no secret
/// is split by the cut), recording the whole body's size and digest beside it.
fn cut_body(map: &mut serde_json::Map<String, Value>, secrets: &Secrets, max: usize) {
    let cut = match map.get("body") {
        Some(Value::String(text)) if text.len() > max => {
            let masked = secrets.redact(text);
            let mut end = max.min(masked.len());
            while !masked.is_char_boundary(end) {
                end -= 1;
            }
            Some((
                Value::String(masked[..end].to_string()),
                text.len(),
                sha256_hex(text.as_bytes()),
            ))
        }
        Some(Value::Object(inner)) => base64_body(inner).filter(|b| b.len() > max).map(|bytes| {
            let masked = secrets.redact_bytes(&bytes);
            let kept = &masked[..max.min(masked.len())];
            let mut obj = serde_json::Map::new();
            obj.insert(
                "base64".into(),
                Value::String(base64::engine::general_purpose::STANDARD.encode(kept)),
            );
            (Value::Object(obj), bytes.len(), sha256_hex(&bytes))
        }),
        _ => None,
    };
    if let Some((body, size, digest)) = cut {
        map.insert("body".into(), body);
        map.insert("body_size".into(), Value::from(size));
        map.insert("body_sha256".into(), Value::String(digest));
        if map.contains_key("body_truncated") {
            map.insert("body_truncated".into(), Value::Bool(true));
        }
    }
}

/// The bytes of a `{"base64": …}` object (how the model serialises non-UTF-8 bytes).
fn base64_body(map: &serde_json::Map<String, Value>) -> Option<Vec<u8>> {
    match (map.len(), map.get("base64")) {
        (1, Some(Value::String(b64))) => base64::engine::general_purpose::STANDARD.decode(b64).ok(),
        _ => None,
    }
}
