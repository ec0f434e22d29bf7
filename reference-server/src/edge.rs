//! The checks every request passes before a handler sees it, answered as problem+json like
//! every other error of this server:
//!
//! - `400` unless an HTTP/1.1 request has exactly one `Host` (RFC 9112 §3.2; HTTP/2 carries
//!   `:authority` and may have at most one `Host`);
//! - `400` for two `Content-Type` lines, which leave the body's meaning ambiguous;
//! - `415` for a JSON body declared in a charset other than UTF-8 (RFC 8259 §8.1);
//! - `413` as soon as a declared `Content-Length` exceeds the body limit, before any body byte
//!   is read, with `Connection: close` so the client does not send it;
//! - `408` when the body does not arrive within [`Limits::body_read`], and the connection is
//!   closed (a stalled body is the other half of slowloris; [`crate::connection`] handles
//!   heads and idle connections).

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode, Version};
use axum::middleware::Next;
use axum::response::Response;
use http_body_util::{BodyExt as _, LengthLimitError, Limited};

use crate::idempotency::MAX_BODY;
use crate::limits::Limits;
use crate::problem::{ErrorStyle, Problem};

/// The middleware: refuses what it must, otherwise reads the body within its time limit and
/// hands the request on with the body buffered.
pub(crate) async fn check(
    limits: Limits,
    style: ErrorStyle,
    request: Request,
    next: Next,
) -> Response {
    match admit(limits, request).await {
        Ok(request) => next.run(request).await,
        Err((problem, close)) => {
            let mut response = problem.into_response(style);
            if close {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            response
        }
    }
}

/// The request with its body read, or the problem to answer and whether to close.
async fn admit(limits: Limits, request: Request) -> Result<Request, (Problem, bool)> {
    let bad = |detail: &str| {
        (
            Problem::new(
                StatusCode::BAD_REQUEST,
                "invalid-request",
                "Invalid request",
                detail,
            ),
            false,
        )
    };
    let headers = request.headers();
    let hosts = headers.get_all(header::HOST).iter().count();
    match (request.version(), hosts) {
        (Version::HTTP_2 | Version::HTTP_3, 0 | 1) | (_, 1) => {}
        (_, 0) => return Err(bad("the request has no Host header")),
        _ => return Err(bad("the request has more than one Host header")),
    }
    let types: Vec<&HeaderValue> = headers.get_all(header::CONTENT_TYPE).iter().collect();
    if types.len() > 1 {
        return Err(bad("the request has more than one Content-Type header"));
    }
    if let Some(charset) = types.first().and_then(|v| json_charset(v)) {
        if !charset.eq_ignore_ascii_case("utf-8") {
            return Err((
                Problem::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "unsupported-media-type",
                    "Unsupported media type",
                    format!("JSON must be sent as UTF-8, not {charset}"),
                ),
                false,
            ));
        }
    }
    let too_large = || {
        (
            Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body-too-large",
                "Request body too large",
                format!("the request body must be at most {MAX_BODY} bytes"),
            ),
            true,
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_large());
    }
    let (parts, body) = request.into_parts();
    let read = tokio::time::timeout(limits.body_read, Limited::new(body, MAX_BODY).collect());
    match read.await {
        Ok(Ok(collected)) => Ok(Request::from_parts(parts, Body::from(collected.to_bytes()))),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Ok(Err(e)) => Err(bad(&format!("the request body could not be read: {e}"))),
        Err(_) => Err((
            Problem::new(
                StatusCode::REQUEST_TIMEOUT,
                "request-timeout",
                "Request timeout",
                format!(
                    "the request body did not arrive within {}",
                    humantime::format_duration(limits.body_read)
                ),
            ),
            true,
        )),
    }
}

/// The `charset` parameter of a JSON media type (`application/json`, `…+json`), unquoted.
fn json_charset(value: &HeaderValue) -> Option<String> {
    let text = value.to_str().ok()?;
    let mut parts = text.split(';');
    let media = parts.next()?.trim().to_ascii_lowercase();
    if media != "application/json" && !media.ends_with("+json") {
        return None;
    }
    parts.find_map(|p| {
        let (name, value) = p.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches('"').to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_charset_is_read_from_its_parameter() {
        let cs = |v: &'static str| json_charset(&HeaderValue::from_static(v));
        assert_eq!(
            cs("application/json; charset=\"ISO-8859-1\"").as_deref(),
            Some("ISO-8859-1")
        );
        assert_eq!(
            cs("application/problem+json;charset=utf-8").as_deref(),
            Some("utf-8")
        );
        assert_eq!(cs("application/json"), None);
        assert_eq!(cs("text/plain; charset=latin1"), None);
    }
}
