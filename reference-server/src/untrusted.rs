//! The parsers of what a caller sends, callable without a server in between: the fuzz targets
//! (`fuzz/`) feed them arbitrary bytes, and each function here is exactly what the request path
//! runs for the correct server (no fault switched on). Nothing else outside the crate calls
//! them; the server's own handlers call the functions these wrap.

use axum::http::HeaderMap;

use crate::idempotency::key;
use crate::payments::Payload;
use crate::webhooks::schemes::Event;
use crate::webhooks::verify::{self, Rules, Source};
use crate::webhooks::Scheme;

pub use crate::idempotency::key::{KeyError, MAX_KEY_LEN};
pub use crate::webhooks::verify::{Refused, TOLERANCE_SECS};

/// The key the server claims for a request with `headers`, read from the key header `name`:
/// an RFC 8941 sf-string, at most [`MAX_KEY_LEN`] characters, not empty.
pub fn idempotency_key(headers: &HeaderMap, name: &str) -> Result<String, KeyError> {
    key::parse(headers, name, None)
}

/// The key a `--key-in-body` server takes out of the JSON `body` at `pointer`, and the body
/// without it.
pub fn idempotency_key_in_body(
    body: &mut serde_json::Value,
    pointer: &str,
) -> Result<String, KeyError> {
    key::take_from_body(body, pointer, None)
}

/// The canonical bytes of a payment request (what its fingerprint hashes), or why it is
/// refused (the problem's detail).
pub fn payment_request(headers: &HeaderMap, body: &[u8]) -> Result<Vec<u8>, String> {
    Payload::from_request(headers, body)
        .map(|payload| payload.canonical())
        .map_err(|problem| problem.detail().to_owned())
}

/// The event id of a webhook delivery of `scheme` carrying `body`, verified against `secret`
/// at `now` (seconds since the epoch) the way the correct consumer verifies it.
pub fn webhook_delivery(
    scheme: Scheme,
    headers: &HeaderMap,
    body: &[u8],
    secret: &str,
    now: i64,
) -> Result<String, Refused> {
    verify::verify(
        scheme,
        headers,
        body,
        &[(Source::A, secret)],
        now,
        Rules::CORRECT,
    )?;
    Event::read(scheme, headers, body)
        .map(|event| event.id)
        .map_err(Refused::malformed)
}
