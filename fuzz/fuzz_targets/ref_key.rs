//! The reference server's key parsing (reference-server/src/idempotency/key.rs), differentially:
//! against the RFC 8941 parser it is built on (`sfv`), and against the ways idem-check writes
//! a key (src/keys.rs for the header, src/carrier/placement.rs for a JSON body field).
//!
//! Input: byte 0 picks the part. 0: the rest is an `Idempotency-Key` header value; the server
//! must accept exactly the sf-string Items sfv accepts whose string is 1 to 255 characters,
//! with the same key, and a key it accepts, written again by idem-check (plain and with a
//! parameter), reads back the same. 1: the rest is a key; written by idem-check as an
//! sf-string, the server reads it back unless it is empty or too long. 2: the rest is a JSON
//! pointer, a newline and a JSON body; a key idem-check puts at the pointer is the key the
//! server takes out of the body, whenever the server finds one there.
#![no_main]

use http::{HeaderMap, HeaderValue};
use idem_check::carrier::Place;
use idem_check::http::Request;
use idem_check::keys;
use idem_reference_server::untrusted::{idempotency_key, idempotency_key_in_body, MAX_KEY_LEN};
use libfuzzer_sys::fuzz_target;
use sfv::{BareItem, Item, Parser, Version};

const HEADER: &str = "idempotency-key";

fn server_reads(value: &[u8]) -> Option<Result<String, String>> {
    let value = HeaderValue::from_bytes(value).ok()?;
    let mut headers = HeaderMap::new();
    headers.insert(HEADER, value);
    Some(idempotency_key(&headers, HEADER).map_err(|e| e.to_string()))
}

/// What RFC 8941 and the contract's limits say the key in `value` is.
fn rfc_reads(value: &[u8]) -> Option<String> {
    let item: Item = Parser::new(value)
        .with_version(Version::Rfc8941)
        .parse()
        .ok()?;
    let BareItem::String(s) = item.bare_item else {
        return None;
    };
    let key = s.as_str().to_owned();
    (!key.is_empty() && key.chars().count() <= MAX_KEY_LEN).then_some(key)
}

fn header_value(value: &[u8]) {
    let Some(server) = server_reads(value) else {
        return;
    };
    let rfc = rfc_reads(value);
    assert_eq!(
        server.as_ref().ok(),
        rfc.as_ref(),
        "the server and RFC 8941 disagree on {value:?}: {server:?}"
    );
    if let Ok(key) = server {
        let written = keys::sf_string(&key).expect("a key the server read is an sf-string");
        assert_eq!(server_reads(written.as_bytes()), Some(Ok(key.clone())));
        let with = keys::with_parameter(&key);
        assert_eq!(server_reads(with.as_bytes()), Some(Ok(key)));
    }
}

fn key_written(key: &str) {
    let Some(written) = keys::sf_string(key) else {
        return;
    };
    let read = server_reads(written.as_bytes()).expect("an sf-string is a header value");
    if key.is_empty() || key.chars().count() > MAX_KEY_LEN {
        assert!(read.is_err(), "{key:?} accepted");
    } else {
        assert_eq!(read, Ok(key.to_owned()));
    }
}

fn body_field(text: &str) {
    let Some((pointer, body)) = text.split_once('\n') else {
        return;
    };
    let Ok(url) = "http://127.0.0.1/p".parse() else {
        return;
    };
    let req = Request {
        method: "POST".into(),
        url,
        headers: Vec::new(),
        body: body.as_bytes().to_vec(),
    };
    let key = "key-1 \"q\" / ~";
    let place = Place::Body(pointer.to_owned());
    let sent = place.put(req, key.as_bytes());
    let Ok(mut json) = serde_json::from_slice::<serde_json::Value>(&sent.body) else {
        return;
    };
    if let Ok(taken) = idempotency_key_in_body(&mut json, pointer) {
        assert_eq!(
            taken, key,
            "idem-check put {key:?} at {pointer:?}, the server took {taken:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let [part, rest @ ..] = data else {
        return;
    };
    match part % 3 {
        0 => header_value(rest),
        1 => {
            if let Ok(key) = std::str::from_utf8(rest) {
                key_written(key);
            }
        }
        _ => {
            if let Ok(text) = std::str::from_utf8(rest) {
                body_field(text);
            }
        }
    }
});
