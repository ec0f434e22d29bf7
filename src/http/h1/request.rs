//! The request record that is also the wire image: [`prepare`] builds the [`SentRequest`] once
//! (the record *is* the request) and [`to_wire`] turns it into bytes without judging them.

use crate::http::exchange::{Header, SentRequest};
use crate::http::HttpError;

/// Builds the request record that will also be the wire image.
///
/// Adds `Host` (first) and `Content-Length` (last; when the body is non-empty or the method is
/// POST, PUT or PATCH) unless the caller already supplied them — a probe that wants a missing or
/// doubled field passes its own. Everything else keeps the caller's order and bytes, so what the
/// report records is exactly what [`to_wire`] writes.
pub fn prepare(url: &url::Url, method: &str, headers: Vec<Header>, body: Vec<u8>) -> SentRequest {
    let has = |name: &str| headers.iter().any(|h| h.name.eq_ignore_ascii_case(name));
    let mut out = Vec::with_capacity(headers.len() + 2);
    if !has("host") {
        out.push(Header::new("Host", host_value(url)));
    }
    let needs_length = !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH");
    let add_length = needs_length && !has("content-length") && !has("transfer-encoding");
    out.extend(headers);
    if add_length {
        out.push(Header::new("Content-Length", body.len().to_string()));
    }
    SentRequest {
        method: method.to_string(),
        url: url.to_string(),
        headers: out,
        body,
    }
}

/// `host[:port]`, the port only when it is not the scheme's default (RFC 9110 §7.2): the `Host`
/// field, and HTTP/2's `:authority`.
pub(crate) fn host_value(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// The path and query of `url` (RFC 9112 §3.2.1 origin-form): the request line's target, and
/// HTTP/2's `:path`.
pub(crate) fn request_target(url: &url::Url) -> String {
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    }
}

/// The exact bytes of `req`: request line with path and query, each header line as
/// `name: value` with the value's raw bytes, CRLFs, then the body. Nothing is validated or
/// escaped, on purpose; only an unusable URL or an empty method is an error.
pub fn to_wire(req: &SentRequest) -> Result<Vec<u8>, HttpError> {
    let url = parse_url(req)?;
    wire_to(req, &url)
}

/// [`to_wire`] for a request whose URL the caller already parsed with [`parse_url`] (the stress
/// paths send hundreds of thousands of requests; parsing each URL once is measurable there).
pub(crate) fn wire_to(req: &SentRequest, url: &url::Url) -> Result<Vec<u8>, HttpError> {
    if req.method.is_empty() {
        return Err(HttpError::Unsendable("the request has no method".into()));
    }
    let mut wire = Vec::with_capacity(256 + req.body.len());
    wire.extend_from_slice(req.method.as_bytes());
    wire.push(b' ');
    wire.extend_from_slice(request_target(url).as_bytes());
    wire.extend_from_slice(b" HTTP/1.1\r\n");
    for h in &req.headers {
        wire.extend_from_slice(h.name.as_bytes());
        wire.extend_from_slice(b": ");
        wire.extend_from_slice(&h.value);
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b"\r\n");
    wire.extend_from_slice(&req.body);
    Ok(wire)
}

/// The URL `req` goes to, if it is one an HTTP client can reach.
pub(crate) fn parse_url(req: &SentRequest) -> Result<url::Url, HttpError> {
    let url = url::Url::parse(&req.url)
        .map_err(|e| HttpError::Unsendable(format!("invalid URL {:?}: {e}", req.url)))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(HttpError::Unsendable(format!(
            "unsupported URL scheme {other:?} in {}",
            req.url
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> url::Url {
        url::Url::parse(s).unwrap()
    }

    #[test]
    fn prepare_adds_host_first_and_length_last() {
        let req = prepare(
            &url("http://example.test:8080/a?b=c"),
            "POST",
            vec![Header::new("X-One", "1"), Header::new("X-One", "2")],
            Vec::new(),
        );
        let names: Vec<_> = req.headers.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["Host", "X-One", "X-One", "Content-Length"]);
        assert_eq!(req.headers[0].value, b"example.test:8080");
        assert_eq!(req.headers[3].value, b"0");
    }

    #[test]
    fn prepare_keeps_caller_host_and_length_and_skips_length_for_bodyless_get() {
        let req = prepare(
            &url("https://example.test/"),
            "POST",
            vec![
                Header::new("content-length", "99"),
                Header::new("HOST", "other"),
            ],
            b"x".to_vec(),
        );
        assert_eq!(req.headers.len(), 2, "nothing added: {:?}", req.headers);
        let get = prepare(&url("https://example.test/"), "GET", vec![], vec![]);
        assert_eq!(get.headers, vec![Header::new("Host", "example.test")]);
    }

    #[test]
    fn to_wire_is_the_record_byte_for_byte() {
        let req = prepare(
            &url("http://h/p?q=1"),
            "PUT",
            vec![Header::new("K", vec![0u8, 0xc3, 0x28, b'\r'])],
            b"body".to_vec(),
        );
        let wire = to_wire(&req).unwrap();
        assert_eq!(
            wire,
            b"PUT /p?q=1 HTTP/1.1\r\nHost: h\r\nK: \x00\xc3\x28\r\r\nContent-Length: 4\r\n\r\nbody"
        );
    }

    #[test]
    fn to_wire_rejects_unusable_requests() {
        let mut req = prepare(&url("http://h/"), "GET", vec![], vec![]);
        req.url = "ftp://h/".into();
        assert!(matches!(to_wire(&req), Err(HttpError::Unsendable(_))));
        req.url = "not a url".into();
        assert!(matches!(to_wire(&req), Err(HttpError::Unsendable(_))));
        req.url = "http://h/".into();
        req.method.clear();
        assert!(matches!(to_wire(&req), Err(HttpError::Unsendable(_))));
    }
}
