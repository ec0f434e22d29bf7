//! RFC 9457 problem details: every error this server sends.
//!
//! Idempotency errors also carry `Link: <…>; rel="describedby"` (draft §2.7), pointing at the
//! part of the published idempotency specification the client broke. The `plain-errors` fault
//! renders the same errors as bare `text/plain`, which is what the checker's recommended checks
//! are there to catch.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Where the idempotency specification of this server is published (problem `type`s and `Link`
/// targets are fragments of it). The README documents the same fragments.
pub(crate) const SPEC_URL: &str = "https://idem-check.example/reference-server/idempotency";

/// How errors are rendered: the correct way, or the `plain-errors` fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorStyle {
    ProblemJson,
    PlainText,
}

/// One error response, built by the layer that detected it.
#[derive(Debug, Clone)]
pub(crate) struct Problem {
    status: StatusCode,
    slug: &'static str,
    title: &'static str,
    detail: String,
    describedby: bool,
    retry_after: bool,
}

#[derive(Serialize)]
struct Body<'a> {
    #[serde(rename = "type")]
    kind: String,
    title: &'a str,
    status: u16,
    detail: &'a str,
}

impl Problem {
    /// A problem whose `type` is `SPEC_URL#slug`.
    pub(crate) fn new(
        status: StatusCode,
        slug: &'static str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            status,
            slug,
            title,
            detail: detail.into(),
            describedby: false,
            retry_after: false,
        }
    }

    /// Marks an error about the idempotency contract: adds the `Link` to its specification.
    pub(crate) fn idempotency(mut self) -> Self {
        self.describedby = true;
        self
    }

    /// Adds `Retry-After: 1`: the conflict is temporary and the client should come back soon.
    pub(crate) fn retry_after(mut self) -> Self {
        self.retry_after = true;
        self
    }

    /// Removes `Retry-After` again (the `no-retry-after` fault).
    pub(crate) fn without_retry_after(mut self) -> Self {
        self.retry_after = false;
        self
    }

    /// What went wrong, for the client.
    pub(crate) fn detail(&self) -> &str {
        &self.detail
    }

    /// The HTTP status this problem is sent with.
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    /// Replaces the status (faults that answer the right error with the wrong code).
    pub(crate) fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// The exact bytes and content type this problem is sent as; the `cache-validation-error`
    /// fault stores them for replay.
    pub(crate) fn render(&self, style: ErrorStyle) -> (&'static str, Vec<u8>) {
        match style {
            ErrorStyle::PlainText => (
                "text/plain; charset=utf-8",
                format!("{}: {}\n", self.title, self.detail).into_bytes(),
            ),
            ErrorStyle::ProblemJson => {
                let body = Body {
                    kind: format!("{SPEC_URL}#{}", self.slug),
                    title: self.title,
                    status: self.status.as_u16(),
                    detail: &self.detail,
                };
                // Serialising a struct of strings and an integer cannot fail; fall back to the
                // title alone rather than panic if it ever did.
                let bytes = serde_json::to_vec(&body).unwrap_or_else(|_| self.title.into());
                ("application/problem+json", bytes)
            }
        }
    }

    /// The complete response.
    pub(crate) fn into_response(self, style: ErrorStyle) -> Response {
        let (content_type, body) = self.render(style);
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        if self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.describedby && style == ErrorStyle::ProblemJson {
            let link = format!("<{SPEC_URL}#{}>; rel=\"describedby\"", self.slug);
            if let Ok(value) = HeaderValue::from_str(&link) {
                headers.insert(header::LINK, value);
            }
        }
        response
    }
}

/// 503 for a storage failure: the client may retry with the same key.
pub(crate) fn storage_unavailable() -> Problem {
    Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "storage-unavailable",
        "Storage unavailable",
        "the request could not be stored; retry it with the same Idempotency-Key",
    )
    .retry_after()
}
