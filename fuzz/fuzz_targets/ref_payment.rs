//! The reference server's request bodies (reference-server/src/payments.rs): the payment a
//! `POST /api/payments` carries, validated and normalised into the canonical bytes its
//! fingerprint hashes.
//!
//! Input: the Content-Type value, a newline, the body. Checks: a refusal says why; an
//! accepted body's canonical form is accepted again and is its own canonical form (so a retry
//! of the normalised payload has the same fingerprint), and holds no whitespace around its
//! fields.
#![no_main]

use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue};
use idem_check_fuzz::assert_names;
use idem_reference_server::untrusted::payment_request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(newline) = data.iter().position(|b| *b == b'\n') else {
        return;
    };
    let (content_type, body) = (&data[..newline], &data[newline + 1..]);
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_bytes(content_type) {
        headers.insert(CONTENT_TYPE, value);
    }
    let canonical = match payment_request(&headers, body) {
        Ok(canonical) => canonical,
        Err(detail) => return assert_names(&detail, ""),
    };
    let mut json = HeaderMap::new();
    json.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let again = payment_request(&json, &canonical)
        .unwrap_or_else(|e| panic!("the canonical form is refused: {e}"));
    assert_eq!(again, canonical, "the canonical form is not canonical");
});
