//! A transport that opens no socket, and the small values the kit's unit tests build on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::FutureExt;

use super::transport::{Sent, Transport};
use crate::config::{Config, RunOptions, TargetSpec};
use crate::http::exchange::{Header, ReceivedResponse, SentRequest};
use crate::http::raw::RawResponse;
use crate::http::HttpError;
use crate::http::Request;

/// The URL every fake request goes to; nothing listens there.
const URL: &str = "http://127.0.0.1:9/op";

/// A validated config for a target that is never contacted. (`cfg(test)` again, though the
/// whole module is: `scripts/check-import-cycles` sees test-only items, not test-only files.)
#[cfg(test)]
pub fn config() -> Config {
    let target = TargetSpec {
        url: URL.into(),
        ..TargetSpec::default()
    };
    let suite = crate::catalog::load_suite(crate::suite::DEFAULT_SUITE).expect("default suite");
    Config::build(target, &RunOptions::new(suite), None).expect("config")
}

pub fn request() -> Request {
    request_with_body(0)
}

/// A POST whose body is the number `i`: fakes answer by it.
pub fn request_with_body(i: u32) -> Request {
    Request {
        method: "POST".into(),
        url: url::Url::parse(URL).expect("url"),
        headers: Vec::new(),
        body: i.to_string().into_bytes(),
    }
}

pub fn sent() -> SentRequest {
    request().prepare()
}

/// A response with `status`; a 429 asks to be sent again at once (`Retry-After: 0`), so the
/// throttle's shortest pause is all a test waits.
pub fn response(status: u16) -> ReceivedResponse {
    let retry_after = (status == 429).then(|| Header::new("Retry-After", "0"));
    ReceivedResponse {
        status,
        version: http::Version::HTTP_11,
        headers: retry_after.into_iter().collect(),
        body: Vec::new(),
        body_truncated: false,
        problem: None,
    }
}

pub fn answered(status: u16) -> RawResponse {
    RawResponse::ended_now(Instant::now(), Ok(response(status)))
}

pub fn failed(error: HttpError) -> RawResponse {
    RawResponse::ended_now(Instant::now(), Err(error))
}

/// `raw` recorded as exchange #1.
pub fn exchange(raw: &RawResponse) -> crate::http::exchange::Exchange {
    let mut record = super::recorder::Recorder::new(Instant::now());
    record.record("r", sent(), raw, super::recorder::Traffic::Operation)
}

pub fn status(raw: &RawResponse) -> Option<u16> {
    raw.result.as_ref().ok().map(|r| r.status)
}

type Answer = dyn Fn(&SentRequest) -> (Duration, Result<ReceivedResponse, HttpError>) + Send + Sync;

/// A transport whose answers a closure decides from the request, after a delay it names.
#[derive(Clone)]
pub struct Fake(Arc<Answer>);

impl Fake {
    /// Answers at once with the status `status` gives.
    pub fn answering(status: impl Fn(&SentRequest) -> u16 + Send + Sync + 'static) -> Self {
        Fake(Arc::new(move |r| (Duration::ZERO, Ok(response(status(r))))))
    }

    /// Answers as `answer` says, after the delay it gives.
    pub fn with(
        answer: impl Fn(&SentRequest) -> (Duration, Result<ReceivedResponse, HttpError>)
            + Send
            + Sync
            + 'static,
    ) -> Self {
        Fake(Arc::new(answer))
    }
}

impl Transport for Fake {
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Sent> {
        async move {
            let sent = req.prepare();
            let started = Instant::now();
            let (delay, result) = (self.0)(&sent);
            tokio::time::sleep(delay).await;
            Sent::new(sent, RawResponse::ended_now(started, result))
        }
        .boxed()
    }
}
