//! Why a request got no response, as one typed value every engine returns and every exchange
//! keeps.
//!
//! What came of a request decides things: whether it may be sent again (only when the
//! connection ended before any byte of an answer, see [`super::kept`]), whether the target
//! failed to answer or idem-check dropped the request on purpose, and how a report and
//! `stress`'s statistics count it. Each of those questions is a `match` on [`HttpError`];
//! the text ([`std::fmt::Display`]) is what a report shows, and nothing reads it back.

use std::time::Duration;

use serde::Serialize;

/// Why a request got no response: the kind, with the detail the report shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// The request cannot go on the wire as recorded: not an `http`/`https` URL, no method, a
    /// header field the ordinary client refuses.
    #[error("{0}")]
    Unsendable(String),
    /// No connection to the target: its name did not resolve, or the connection was refused
    /// or failed ("connection refused to 127.0.0.1:9").
    #[error("{0}")]
    Connect(String),
    /// The proxy could not be reached, or refused or broke the CONNECT tunnel.
    #[error("{0}")]
    Proxy(String),
    /// The TLS handshake failed (an untrusted certificate, a server that does not speak TLS).
    #[error("TLS handshake failed: {0}")]
    Tls(String),
    /// The exchange ran out of time in `phase`, `after` its timeout.
    #[error("timed out after {} {phase}", human(*after))]
    Timeout { phase: Phase, after: Duration },
    /// The connection ended (end of stream, a reset, a failed write) before any byte of an
    /// answer, or an HTTP/2 GOAWAY said the request was not processed: the one failure after
    /// which a request on a kept-alive connection may be sent again.
    #[error("{0}")]
    ClosedBeforeAnyByte(String),
    /// The connection ended after part of the answer (in its head or its body).
    #[error("{0}")]
    ClosedMidResponse(String),
    /// The HTTP/1.1 answer could not be read: a head no parser accepts, bad framing.
    #[error("{0}")]
    MalformedHttp1(String),
    /// The HTTP/2 connection broke its protocol, reset the stream, said GOAWAY, or the server
    /// does not speak HTTP/2 there.
    #[error("{0}")]
    Http2(String),
    /// A burst's held-back final bytes could not be prepared or written.
    #[error("{0}")]
    ReleaseFailed(String),
    /// idem-check wrote the request whole and closed the connection without reading, on
    /// purpose (a lost response).
    #[error("dropped by idem-check before reading — lost-response probe")]
    Dropped,
    /// A call the API under test made to idem-check's fake provider, which closed it without
    /// answering on purpose (a lost provider answer): what came of it is known, so it is no
    /// failure of the target's.
    #[error("the fake provider closed the connection on purpose: {0}")]
    ClosedByFake(String),
    /// Never sent: the target had stopped answering.
    #[error("{0}")]
    NotSent(String),
}

/// Where an exchange ran out of time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Opening the TCP connection to `authority` (`host:port`), through `proxy` (as a report
    /// shows it, no credentials) when one applies.
    Connect {
        authority: String,
        proxy: Option<String>,
    },
    /// The TLS handshake.
    Tls,
    /// The HTTP/2 connection preface and settings.
    Http2Handshake,
    /// Writing the request.
    Write,
    /// Staging an HTTP/2 burst's requests, all but their final bytes.
    Staging,
    /// Waiting for the first byte of the answer: the response head.
    FirstByte,
    /// Reading the response body.
    Body,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Phase::Connect {
                authority,
                proxy: None,
            } => write!(f, "connecting to {authority}"),
            Phase::Connect {
                authority,
                proxy: Some(proxy),
            } => write!(f, "connecting to {authority} through the proxy {proxy}"),
            Phase::Tls => f.write_str("in the TLS handshake"),
            Phase::Http2Handshake => f.write_str("in the HTTP/2 handshake"),
            Phase::Write => f.write_str("writing the request"),
            Phase::Staging => f.write_str("staging the requests"),
            Phase::FirstByte => f.write_str("waiting for the response head"),
            Phase::Body => f.write_str("reading the response body"),
        }
    }
}

/// The kind of an [`HttpError`] without its detail: what the JSON report's `error_kind` says
/// and what `stress` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    Unsendable,
    Connect,
    Proxy,
    Tls,
    Timeout,
    ClosedBeforeAnyByte,
    ClosedMidResponse,
    #[serde(rename = "malformed-http1")]
    MalformedHttp1,
    #[serde(rename = "http2")]
    Http2,
    ReleaseFailed,
    Dropped,
    ClosedByFake,
    NotSent,
}

impl ErrorKind {
    /// The name the JSON report gives it: `timeout`, `closed-before-any-byte`, … (`dropped` and
    /// `not-sent` as every report has written them).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Unsendable => "unsendable",
            ErrorKind::Connect => "connect",
            ErrorKind::Proxy => "proxy",
            ErrorKind::Tls => "tls",
            ErrorKind::Timeout => "timeout",
            ErrorKind::ClosedBeforeAnyByte => "closed-before-any-byte",
            ErrorKind::ClosedMidResponse => "closed-mid-response",
            ErrorKind::MalformedHttp1 => "malformed-http1",
            ErrorKind::Http2 => "http2",
            ErrorKind::ReleaseFailed => "release-failed",
            ErrorKind::Dropped => "dropped",
            ErrorKind::ClosedByFake => "closed-by-fake",
            ErrorKind::NotSent => "not-sent",
        }
    }

    /// `n` of this kind as a summary says it: "7 timeouts", "1 TLS failure", "3 closed before
    /// any byte".
    pub fn counted(self, n: u64) -> String {
        let (one, many) = match self {
            ErrorKind::Unsendable => ("unsendable request", "unsendable requests"),
            ErrorKind::Connect => ("connect failure", "connect failures"),
            ErrorKind::Proxy => ("proxy failure", "proxy failures"),
            ErrorKind::Tls => ("TLS failure", "TLS failures"),
            ErrorKind::Timeout => ("timeout", "timeouts"),
            ErrorKind::ClosedBeforeAnyByte => ("closed before any byte", "closed before any byte"),
            ErrorKind::ClosedMidResponse => ("closed mid-response", "closed mid-response"),
            ErrorKind::MalformedHttp1 => {
                ("malformed HTTP/1.1 answer", "malformed HTTP/1.1 answers")
            }
            ErrorKind::Http2 => ("HTTP/2 error", "HTTP/2 errors"),
            ErrorKind::ReleaseFailed => ("release failure", "release failures"),
            ErrorKind::Dropped => ("dropped on purpose", "dropped on purpose"),
            ErrorKind::ClosedByFake => (
                "closed by the fake on purpose",
                "closed by the fake on purpose",
            ),
            ErrorKind::NotSent => ("not sent", "not sent"),
        };
        format!("{n} {}", if n == 1 { one } else { many })
    }
}

impl HttpError {
    /// The kind, without the detail.
    pub fn kind(&self) -> ErrorKind {
        match self {
            HttpError::Unsendable(_) => ErrorKind::Unsendable,
            HttpError::Connect(_) => ErrorKind::Connect,
            HttpError::Proxy(_) => ErrorKind::Proxy,
            HttpError::Tls(_) => ErrorKind::Tls,
            HttpError::Timeout { .. } => ErrorKind::Timeout,
            HttpError::ClosedBeforeAnyByte(_) => ErrorKind::ClosedBeforeAnyByte,
            HttpError::ClosedMidResponse(_) => ErrorKind::ClosedMidResponse,
            HttpError::MalformedHttp1(_) => ErrorKind::MalformedHttp1,
            HttpError::Http2(_) => ErrorKind::Http2,
            HttpError::ReleaseFailed(_) => ErrorKind::ReleaseFailed,
            HttpError::Dropped => ErrorKind::Dropped,
            HttpError::ClosedByFake(_) => ErrorKind::ClosedByFake,
            HttpError::NotSent(_) => ErrorKind::NotSent,
        }
    }

    /// Whether the target failed to answer, as opposed to a request dropped on purpose or
    /// never sent, which say nothing about it.
    pub fn is_failure(&self) -> bool {
        !matches!(
            self,
            HttpError::Dropped | HttpError::ClosedByFake(_) | HttpError::NotSent(_)
        )
    }

    /// Whether the connection ended before any byte of an answer: on a kept-alive
    /// connection, the server's idle close, after which the request may be sent again.
    pub fn closed_before_any_byte(&self) -> bool {
        matches!(self, HttpError::ClosedBeforeAnyByte(_))
    }
}

/// "10 s", "250 ms": how a timeout reads in a report.
pub(crate) fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_read_like_a_person_wrote_them() {
        assert_eq!(human(Duration::from_secs(10)), "10 s");
        assert_eq!(human(Duration::from_millis(250)), "250 ms");
        assert_eq!(human(Duration::from_millis(1500)), "1500 ms");
        let e = HttpError::Timeout {
            phase: Phase::Connect {
                authority: "api.test:443".into(),
                proxy: Some("http://proxy.test:3128".into()),
            },
            after: Duration::from_secs(10),
        };
        assert_eq!(
            e.to_string(),
            "timed out after 10 s connecting to api.test:443 through the proxy http://proxy.test:3128"
        );
    }

    #[test]
    fn the_json_name_is_the_serialized_kind() {
        for kind in [
            ErrorKind::Unsendable,
            ErrorKind::Connect,
            ErrorKind::Proxy,
            ErrorKind::Tls,
            ErrorKind::Timeout,
            ErrorKind::ClosedBeforeAnyByte,
            ErrorKind::ClosedMidResponse,
            ErrorKind::MalformedHttp1,
            ErrorKind::Http2,
            ErrorKind::ReleaseFailed,
            ErrorKind::Dropped,
            ErrorKind::NotSent,
        ] {
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::json!(kind.name())
            );
        }
    }

    #[test]
    fn counts_read_as_a_summary() {
        assert_eq!(ErrorKind::Timeout.counted(7), "7 timeouts");
        assert_eq!(ErrorKind::Timeout.counted(1), "1 timeout");
        assert_eq!(
            ErrorKind::ClosedBeforeAnyByte.counted(3),
            "3 closed before any byte"
        );
    }

    #[test]
    fn only_a_close_before_any_byte_lets_a_request_go_again() {
        assert!(HttpError::ClosedBeforeAnyByte("reset".into()).closed_before_any_byte());
        assert!(!HttpError::ClosedMidResponse("reset".into()).closed_before_any_byte());
        assert!(!HttpError::Dropped.is_failure());
        assert!(!HttpError::NotSent("x".into()).is_failure());
        assert!(HttpError::Connect("refused".into()).is_failure());
    }
}
