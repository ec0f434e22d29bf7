//! The body of every error the fake API answers, in the shape the client's SDK parses.
//!
//! SDKs read errors their own way: Stripe's take `{"error": {"type", "code", "message"}}` and
//! raise a typed exception from it, and one SDK seen in practice treats any body without an
//! `error` member as success. A correct SDK must not be judged on a shape it was never meant
//! to read, so the status code stays what the scenario needs and only the body changes:
//! problem+json (RFC 9457) by default, the Stripe envelope under `--suite stripe`, or any
//! shape from `--error-body FILE`, for every status or (`--error-body 409=FILE`) for one: a
//! provider's conflict body is not its 503 body, and an SDK may tell them apart by shape.

use std::collections::BTreeMap;

use anyhow::{bail, Context as _, Result};
use serde_json::json;

/// How error bodies are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorBody {
    /// `application/problem+json`: `{"type": "about:blank", "status", "detail"}`.
    Problem,
    /// `{"error": {"type", "code", "message"}}`, as Stripe's API answers.
    StripeEnvelope,
    /// Templates with `{{status}}`, `{{message}}`, `{{type}}`, `{{code}}` and `{{id}}` (the
    /// resource a conflict is about, else empty), served as JSON
    /// when they are JSON, else as text: one per status, one for every other status, and the
    /// suite's shape for the statuses no template covers.
    Templates {
        by_status: BTreeMap<u16, String>,
        all: Option<String>,
        otherwise: Box<ErrorBody>,
    },
}

impl ErrorBody {
    /// The shape for a suite, unless `--error-body [STATUS=]FILE` (repeatable) gives some.
    pub fn choose(suite: &str, files: &[String]) -> Result<ErrorBody> {
        let suite_shape = if suite == "stripe" {
            ErrorBody::StripeEnvelope
        } else {
            ErrorBody::Problem
        };
        if files.is_empty() {
            return Ok(suite_shape);
        }
        let mut by_status = BTreeMap::new();
        let mut all = None;
        for spec in files {
            let (status, path) = match spec.split_once('=') {
                Some((s, path)) if s.len() == 3 && s.bytes().all(|b| b.is_ascii_digit()) => {
                    let status: u16 = s.parse().unwrap_or(0);
                    if !(400..600).contains(&status) {
                        bail!("--error-body {spec}: {status} is not an error status (400 to 599)");
                    }
                    (Some(status), path)
                }
                _ => (None, spec.as_str()),
            };
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --error-body {path}"))?;
            let replaced = match status {
                Some(status) => by_status.insert(status, text).is_some(),
                None => all.replace(text).is_some(),
            };
            if replaced {
                bail!("--error-body {spec}: a second body for the same statuses");
            }
        }
        Ok(ErrorBody::Templates {
            by_status,
            all,
            otherwise: Box::new(suite_shape),
        })
    }

    /// "problem+json", "the stripe error envelope", "--error-body": for the report's context.
    pub fn describe(&self) -> &'static str {
        match self {
            ErrorBody::Problem => "problem+json errors",
            ErrorBody::StripeEnvelope => "stripe error envelopes",
            ErrorBody::Templates { .. } => "--error-body errors",
        }
    }

    /// The content type and body of an error with `status` saying `message`.
    pub fn render(&self, status: u16, message: &str) -> (&'static str, String) {
        self.render_about(status, message, None)
    }

    /// [`ErrorBody::render`] for an error about an existing resource (a conflict naming what
    /// the key already created): its id is the problem's `resource` member and a template's
    /// `{{id}}`, so an SDK can fetch it.
    pub fn render_about(
        &self,
        status: u16,
        message: &str,
        resource: Option<&str>,
    ) -> (&'static str, String) {
        let (kind, code) = stripe_type(status);
        match self {
            ErrorBody::Problem => {
                let mut doc = json!({ "type": "about:blank", "status": status, "detail": message });
                if let Some(id) = resource {
                    doc["resource"] = json!(id);
                }
                ("application/problem+json", doc.to_string())
            }
            ErrorBody::StripeEnvelope => (
                "application/json",
                json!({ "error": { "type": kind, "code": code, "message": message } }).to_string(),
            ),
            ErrorBody::Templates {
                by_status,
                all,
                otherwise,
            } => match by_status.get(&status).or(all.as_ref()) {
                Some(t) => fill(t, status, message, kind, code, resource.unwrap_or("")),
                None => otherwise.render_about(status, message, resource),
            },
        }
    }
}

/// `template` with its placeholders filled, and its content type.
fn fill(
    template: &str,
    status: u16,
    message: &str,
    kind: &str,
    code: &str,
    id: &str,
) -> (&'static str, String) {
    // Values go in as JSON string contents, so a JSON template stays JSON.
    let quoted = |s: &str| {
        let q = serde_json::to_string(s).unwrap_or_default();
        q[1..q.len() - 1].to_string()
    };
    let text = template
        .replace("{{status}}", &status.to_string())
        .replace("{{message}}", &quoted(message))
        .replace("{{type}}", kind)
        .replace("{{code}}", code)
        .replace("{{id}}", &quoted(id));
    let content_type = if serde_json::from_str::<serde_json::Value>(&text).is_ok() {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    (content_type, text)
}

/// The error type and code Stripe's API gives for a status.
fn stripe_type(status: u16) -> (&'static str, &'static str) {
    match status {
        400 => ("invalid_request_error", "parameter_invalid"),
        401 => ("invalid_request_error", "api_key_invalid"),
        404 => ("invalid_request_error", "resource_missing"),
        408 => ("api_error", "request_timeout"),
        409 => ("idempotency_error", "idempotency_key_in_use"),
        413 => ("invalid_request_error", "request_too_large"),
        422 => ("idempotency_error", "idempotency_key_reused"),
        429 => ("invalid_request_error", "rate_limit"),
        _ => ("api_error", "api_error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shape_keeps_the_status_and_says_the_message() {
        let (ct, body) = ErrorBody::StripeEnvelope.render(409, "in flight");
        assert_eq!(ct, "application/json");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["error"]["type"], "idempotency_error");
        assert_eq!(v["error"]["message"], "in flight");
        let (ct, body) = ErrorBody::Problem.render(400, "bad");
        assert_eq!(ct, "application/problem+json");
        assert!(body.contains("\"status\":400"), "{body}");
        let template = |t: &str| ErrorBody::Templates {
            by_status: BTreeMap::new(),
            all: Some(t.into()),
            otherwise: Box::new(ErrorBody::Problem),
        };
        let t = template(r#"{"errors":[{"code":"{{code}}","msg":"{{message}}"}],"s":{{status}}}"#);
        let (ct, body) = t.render(429, "say \"later\"");
        assert_eq!(ct, "application/json", "{body}");
        assert!(body.contains(r#""msg":"say \"later\"""#), "{body}");
        let (ct, _) = template("oops {{status}}").render(500, "x");
        assert!(ct.starts_with("text/plain"));
    }

    #[test]
    fn a_status_template_shapes_its_status_only() {
        let dir = tempfile::tempdir().unwrap();
        let conflict = dir.path().join("409.json");
        std::fs::write(&conflict, r#"{"conflict": "{{message}}"}"#).unwrap();
        let spec = format!("409={}", conflict.display());
        let body = ErrorBody::choose("stripe", std::slice::from_ref(&spec)).unwrap();
        assert!(body.render(409, "m").1.contains("\"conflict\""));
        let (_, other) = body.render(503, "m");
        assert!(
            other.contains("\"error\""),
            "the suite's shape elsewhere: {other}"
        );
        let twice = ErrorBody::choose("ietf-draft-07", &[spec.clone(), spec]).unwrap_err();
        assert!(twice.to_string().contains("--error-body 409="), "{twice}");
        let bad = ErrorBody::choose("ietf-draft-07", &["200=x".into()]).unwrap_err();
        assert!(bad.to_string().contains("not an error status"), "{bad}");
    }
}
