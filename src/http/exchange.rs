//! The record of one request/response pair, as it really happened on the wire.
//!
//! Every probe verdict is backed by exchanges, so an `Exchange` keeps what was *sent* (not what a
//! template said), what came back or how the transport failed, and when, relative to the start of
//! the probe. Renderers read nothing else.

use serde::{Serialize, Serializer};

use super::error::{ErrorKind, HttpError};
pub use super::role::{Position, Role};

/// A header field exactly as sent or received. Values are bytes because the key-syntax probes put
/// non-ASCII and control bytes on the wire on purpose.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct Header {
    pub name: String,
    #[serde(serialize_with = "serialize_bytes")]
    pub value: Vec<u8>,
}

impl Header {
    pub fn new(name: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        Header {
            name: name.into(),
            value: value.into(),
        }
    }

    /// The value as text, lossily: for comparisons and one-line summaries only.
    pub fn value_str(&self) -> String {
        String::from_utf8_lossy(&self.value).into_owned()
    }
}

/// The value as text, masked when the name makes it a credential (`Authorization: Bearer
/// [redacted]`, as every report shows it): a `{:?}` can end up in a log or a panic message.
impl std::fmt::Debug for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value =
            crate::redact::Secrets::default().header_value_for_text(&self.name, &self.value);
        f.debug_struct("Header")
            .field("name", &self.name)
            .field("value", &value)
            .finish()
    }
}

/// The request as it went out: headers in wire order, duplicates kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SentRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<Header>,
    #[serde(serialize_with = "serialize_bytes")]
    pub body: Vec<u8>,
}

impl SentRequest {
    /// All values of a header (case-insensitive name), in wire order.
    pub fn header_values(&self, name: &str) -> Vec<&[u8]> {
        header_values(&self.headers, name)
    }
}

/// The response as it arrived (body already de-chunked).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReceivedResponse {
    pub status: u16,
    /// Shown in evidence (`HTTP/1.1`, `HTTP/2`) so users know which path was exercised.
    #[serde(serialize_with = "serialize_version")]
    pub version: http::Version,
    pub headers: Vec<Header>,
    #[serde(serialize_with = "serialize_bytes")]
    pub body: Vec<u8>,
    /// True when the body was longer than the capture limit and was cut.
    pub body_truncated: bool,
    /// What was wrong with the response head when it was read leniently (a header field no
    /// HTTP parser accepts): the status line and the fields were kept all the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl ReceivedResponse {
    /// The first value of a header, as text.
    pub fn header(&self, name: &str) -> Option<String> {
        header_values(&self.headers, name)
            .first()
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// The media type of the body without parameters, lower-cased.
    pub fn media_type(&self) -> Option<String> {
        self.header("content-type").map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
    }

    /// The body parsed as JSON, if it is JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }

    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// What came of a request: the response, or how the transport failed. Never both, never
/// neither.
pub type Outcome = Result<ReceivedResponse, HttpError>;

/// One numbered exchange of a probe.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// 1-based number within the probe; checks cite exchanges by it (`#3`).
    pub n: usize,
    /// What this exchange was for: "original", "duplicate 3/8", "count before", … ([`Role`]).
    pub role: Role,
    /// Offset of the first byte written, from the start of the probe.
    pub start_ms: f64,
    pub duration_ms: f64,
    /// For synchronised bursts: when the final byte was released, from the start of the probe.
    pub release_us: Option<f64>,
    pub request: SentRequest,
    pub outcome: Outcome,
}

/// The report's shape of an exchange (`response`, or `error` as text), unchanged since the
/// outcome became one value.
#[derive(Serialize)]
struct ExchangeJson<'a> {
    n: usize,
    role: &'a Role,
    start_ms: f64,
    duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    release_us: Option<f64>,
    request: &'a SentRequest,
    #[serde(skip_serializing_if = "Option::is_none")]
    response: Option<&'a ReceivedResponse>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Which [`HttpError`] it was (`timeout`, `closed-before-any-byte`, `dropped`, …): what
    /// `idem-check reproduce` reads, never the text.
    #[serde(skip_serializing_if = "Option::is_none")]
    error_kind: Option<ErrorKind>,
}

impl Serialize for Exchange {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ExchangeJson {
            n: self.n,
            role: &self.role,
            start_ms: self.start_ms,
            duration_ms: self.duration_ms,
            release_us: self.release_us,
            request: &self.request,
            response: self.response(),
            error: self.error().map(HttpError::to_string),
            error_kind: self.error().map(HttpError::kind),
        }
        .serialize(s)
    }
}

impl Exchange {
    /// The response, when there was one.
    pub fn response(&self) -> Option<&ReceivedResponse> {
        self.outcome.as_ref().ok()
    }

    /// The transport failure, when there was no response.
    pub fn error(&self) -> Option<&HttpError> {
        self.outcome.as_ref().err()
    }

    /// Whether idem-check dropped the connection unread on purpose.
    pub fn dropped(&self) -> bool {
        matches!(self.outcome, Err(HttpError::Dropped))
    }

    /// Whether the exchange ended unanswered by idem-check's own doing: a connection it
    /// dropped unread, or a provider call its fake closed. What came of it is known, so a check
    /// citing it is judged, where one citing a failure is not.
    pub fn closed_on_purpose(&self) -> bool {
        matches!(
            self.outcome,
            Err(HttpError::Dropped | HttpError::ClosedByFake(_))
        )
    }

    /// Whether the request went out and the target did not answer it.
    pub fn failed(&self) -> bool {
        self.error().is_some_and(HttpError::is_failure)
    }

    pub fn status(&self) -> Option<u16> {
        self.response().map(|r| r.status)
    }

    /// The status as shown in summaries: `201`, or `no response` when there was none.
    pub fn status_text(&self) -> String {
        status_text(self.status())
    }

    /// End of the exchange, from the start of the probe.
    pub fn end_ms(&self) -> f64 {
        self.start_ms + self.duration_ms
    }
}

/// Every value of header `name` (case-insensitive) in `headers`, in wire order.
pub fn header_values<'a>(headers: &'a [Header], name: &str) -> Vec<&'a [u8]> {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value.as_slice())
        .collect()
}

/// How evidence writes an HTTP version: `HTTP/1.1`, `HTTP/2`, as on a status line and in
/// every report written before versions were typed.
pub fn version_text(v: http::Version) -> &'static str {
    match v {
        http::Version::HTTP_09 => "HTTP/0.9",
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_2 => "HTTP/2",
        http::Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/1.1",
    }
}

fn serialize_version<S: Serializer>(v: &http::Version, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(version_text(*v))
}

/// Bytes go to JSON as a string when they are UTF-8 and as `{"base64": …}` otherwise, so a
/// report never silently changes what was on the wire.
fn serialize_bytes<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    use base64::Engine;
    use serde::ser::SerializeMap;
    match std::str::from_utf8(bytes) {
        Ok(text) => s.serialize_str(text),
        Err(_) => {
            let mut map = s.serialize_map(Some(1))?;
            map.serialize_entry(
                "base64",
                &base64::engine::general_purpose::STANDARD.encode(bytes),
            )?;
            map.end()
        }
    }
}

/// A status as reports count it: its number, or "no response".
pub fn status_text(status: Option<u16>) -> String {
    match status {
        Some(s) => s.to_string(),
        None => "no response".to_string(),
    }
}
