//! The body of every error the fake API answers, in the shape the client's SDK parses.
//!
//! SDKs read errors their own way: Stripe's take `{"error": {"type", "code", "message"}}` and
//! raise a typed exception from it, and one SDK seen in practice treats any body without an
//! `error` member as success. A correct SDK must not be judged on a shape it was never meant
//! to read, so the status code stays what the scenario needs and only the body changes:
//! problem+json (RFC 9457) by default, the Stripe envelope under `--suite stripe`, or any
//! shape from `--error-body FILE`.

use std::path::Path;

use anyhow::{Context as _, Result};
use serde_json::json;

/// How error bodies are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorBody {
    /// `application/problem+json`: `{"type": "about:blank", "status", "detail"}`.
    Problem,
    /// `{"error": {"type", "code", "message"}}`, as Stripe's API answers.
    StripeEnvelope,
    /// A template with `{{status}}`, `{{message}}`, `{{type}}` and `{{code}}`; served as JSON
    /// when it is JSON, else as text.
    Template(String),
}

impl ErrorBody {
    /// The shape for a suite, unless `--error-body FILE` gives one.
    pub fn choose(suite: &str, file: Option<&Path>) -> Result<ErrorBody> {
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --error-body {}", path.display()))?;
            return Ok(ErrorBody::Template(text));
        }
        Ok(if suite == "stripe" {
            ErrorBody::StripeEnvelope
        } else {
            ErrorBody::Problem
        })
    }

    /// "problem+json", "the stripe error envelope", "--error-body": for the report's context.
    pub fn describe(&self) -> &'static str {
        match self {
            ErrorBody::Problem => "problem+json errors",
            ErrorBody::StripeEnvelope => "stripe error envelopes",
            ErrorBody::Template(_) => "--error-body errors",
        }
    }

    /// The content type and body of an error with `status` saying `message`.
    pub fn render(&self, status: u16, message: &str) -> (&'static str, String) {
        let (kind, code) = stripe_type(status);
        match self {
            ErrorBody::Problem => (
                "application/problem+json",
                json!({ "type": "about:blank", "status": status, "detail": message }).to_string(),
            ),
            ErrorBody::StripeEnvelope => (
                "application/json",
                json!({ "error": { "type": kind, "code": code, "message": message } }).to_string(),
            ),
            ErrorBody::Template(t) => {
                // Values go in as JSON string contents, so a JSON template stays JSON.
                let quoted = |s: &str| {
                    let q = serde_json::to_string(s).unwrap_or_default();
                    q[1..q.len() - 1].to_string()
                };
                let text = t
                    .replace("{{status}}", &status.to_string())
                    .replace("{{message}}", &quoted(message))
                    .replace("{{type}}", kind)
                    .replace("{{code}}", code);
                let content_type = if serde_json::from_str::<serde_json::Value>(&text).is_ok() {
                    "application/json"
                } else {
                    "text/plain; charset=utf-8"
                };
                (content_type, text)
            }
        }
    }
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
        let t = ErrorBody::Template(
            r#"{"errors":[{"code":"{{code}}","msg":"{{message}}"}],"s":{{status}}}"#.into(),
        );
        let (ct, body) = t.render(429, "say \"later\"");
        assert_eq!(ct, "application/json", "{body}");
        assert!(body.contains(r#""msg":"say \"later\"""#), "{body}");
        let (ct, _) = ErrorBody::Template("oops {{status}}".into()).render(500, "x");
        assert!(ct.starts_with("text/plain"));
    }
}
