//! A request about to be sent: what probes, the effects meter and stress build, before the
//! client turns it into the [`SentRequest`] record that is also its wire image.

use super::exchange::{Header, SentRequest};
use super::h1;

/// A request about to be sent; probes start from the configured operation and change it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub url: url::Url,
    pub headers: Vec<Header>,
    pub body: Vec<u8>,
}

impl Request {
    /// A GET of `url` with `headers` minus Content-Type, since it carries no body: how the
    /// effect counter is read with tenant A's credentials.
    pub fn get(url: &url::Url, headers: &[Header]) -> Self {
        Request {
            method: "GET".into(),
            url: url.clone(),
            headers: headers
                .iter()
                .filter(|h| !h.name.eq_ignore_ascii_case("content-type"))
                .cloned()
                .collect(),
            body: Vec::new(),
        }
    }

    /// Adds a header line after the existing ones (a second line of the same name stays a second
    /// line on the wire).
    pub fn with_header(mut self, name: &str, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push(Header::new(name, value));
        self
    }

    /// Replaces every line of this header with one line (appended if there was none).
    pub fn set_header(self, name: &str, value: impl Into<Vec<u8>>) -> Self {
        self.without_header(name).with_header(name, value)
    }

    pub fn without_header(mut self, name: &str) -> Self {
        self.headers.retain(|h| !h.name.eq_ignore_ascii_case(name));
        self
    }

    pub fn with_body(mut self, body: Vec<u8>) -> Self {
        self.body = body;
        self
    }

    pub fn with_url(mut self, url: url::Url) -> Self {
        self.url = url;
        self
    }

    /// The request as the raw client will write it (Host and Content-Length made explicit).
    pub fn prepare(&self) -> SentRequest {
        h1::prepare(
            &self.url,
            &self.method,
            self.headers.clone(),
            self.body.clone(),
        )
    }
}
