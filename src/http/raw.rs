//! The raw client: HTTP/1.1 exchanges that write exactly the bytes of their record, each on a
//! fresh connection, over TCP or TLS.
//!
//! The key-syntax probes send a malformed `Idempotency-Key` (control byte, non-ASCII, two header
//! lines) that must reach the server as written, and the evidence must show what was really
//! sent: the record comes from [`super::h1::prepare`], its bytes from [`super::h1::to_wire`],
//! and [`send_one`] / [`send_then_drop`] put them on a connection of the run's
//! [`Connector`]. Each probe exchange gets its own connection, so one probe's broken request can
//! never poison the next; only `stress`, whose requests are all well-formed, sends on kept-alive
//! connections ([`exchange_on`], through [`super::pool`]), reused only after a cleanly framed
//! answer.

use super::role::Resend;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

use super::connection::{write_request, Connector, Stream};
use super::exchange::{Header, ReceivedResponse, SentRequest};
use super::h1;
use super::HttpError;

/// The outcome of one raw exchange, with the instants a timeline needs.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// When the first byte of the request was written (when the attempt began, if it failed
    /// before writing anything).
    pub started: Instant,
    /// For bursts: when this request's final byte was written. `None` outside a burst.
    pub released: Option<Instant>,
    /// When the response was complete or the exchange failed.
    pub finished: Instant,
    /// The response, or why there was none.
    pub result: Result<ReceivedResponse, HttpError>,
    /// Why the request was sent a second time. `None` for a request sent once.
    pub resent: Option<Resent>,
}

/// Why one request went out twice and is still one exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resent {
    pub kind: Resend,
    /// The sentence the timeline shows: `sent again on a new connection: …`.
    pub why: String,
}

impl RawResponse {
    /// An exchange outside a burst that began at `started` and is over now.
    pub(crate) fn ended_now(started: Instant, result: Result<ReceivedResponse, HttpError>) -> Self {
        RawResponse {
            started,
            released: None,
            finished: Instant::now(),
            result,
            resent: None,
        }
    }

    /// This response, to a request sent again after its first attempt, which began at
    /// `first_started`, went out on a kept-alive connection that ended with `first_error`
    /// before any byte of an answer: one exchange, spanning both attempts, that says so.
    pub(crate) fn sent_again(self, first_started: Instant, first_error: &HttpError) -> Self {
        RawResponse {
            started: first_started,
            resent: Some(Resent {
                kind: Resend::NewConnection,
                why: format!(
                    "sent again on a new connection: the kept-alive connection was closed by the server while idle (no byte received: {first_error})"
                ),
            }),
            ..self
        }
    }

    /// This response, to a request sent again with a new credential after its first attempt,
    /// which began at `first_started`, was answered 401: one exchange that says so.
    pub(crate) fn sent_with_new_credential(self, first_started: Instant) -> Self {
        RawResponse {
            started: first_started,
            resent: Some(Resent {
                kind: Resend::NewCredential,
                why: "sent again with a new credential: the API answered 401, and --auth-cmd printed a new one".into(),
            }),
            ..self
        }
    }
}

/// The status that says the credential was refused, which `--auth-cmd` answers with a new one.
pub const UNAUTHORIZED: u16 = 401;

/// Connects, writes `req` exactly, and reads one response (see [`super::h1`]; body cut at
/// `max_body` with `body_truncated` set). `timeout` bounds the whole exchange; the error names
/// the phase it ran out in.
pub async fn send_one(
    connector: &Connector,
    req: &SentRequest,
    timeout: Duration,
    max_body: usize,
) -> RawResponse {
    let attempt = Instant::now();
    let deadline = attempt + timeout;
    let mut started = attempt;
    let result = async {
        let mut stream = connect_and_write(connector, req, deadline, timeout, &mut started).await?;
        h1::read_response(&mut stream, &req.method, deadline, timeout, max_body).await
    }
    .await;
    RawResponse::ended_now(started, result)
}

/// Simulates a client whose response was lost: writes the whole request, waits
/// `wait_before_drop`, then closes the connection without reading a byte. The result is always
/// an error — [`HttpError::Dropped`] when the drop happened, or the failure that came first —
/// because idem-check never saw an answer. `timeout` bounds connecting and writing.
pub async fn send_then_drop(
    connector: &Connector,
    req: &SentRequest,
    wait_before_drop: Duration,
    timeout: Duration,
) -> RawResponse {
    let attempt = Instant::now();
    let deadline = attempt + timeout;
    let mut started = attempt;
    let written = connect_and_write(connector, req, deadline, timeout, &mut started).await;
    match written {
        Ok(stream) => {
            tokio::time::sleep(wait_before_drop).await;
            drop(stream);
            RawResponse::ended_now(started, Err(HttpError::Dropped))
        }
        Err(e) => RawResponse::ended_now(started, Err(e)),
    }
}

/// Connects and writes `req` whole; `started` becomes the moment the connection was up (what an
/// exchange's duration counts from).
async fn connect_and_write(
    connector: &Connector,
    req: &SentRequest,
    deadline: Instant,
    timeout: Duration,
    started: &mut Instant,
) -> Result<Stream, HttpError> {
    let url = h1::parse_url(req)?;
    let wire = h1::wire_to(req, &url)?;
    let mut stream = connector.connect(&url, deadline, timeout).await?;
    *started = Instant::now();
    write_request(&mut stream, &wire, deadline, timeout).await?;
    Ok(stream)
}

/// What one exchange on an open connection left.
pub(crate) struct OnConnection {
    /// The response (`started` is when the write began).
    pub(crate) response: RawResponse,
    /// Whether the connection can carry another request (see [`h1::read_keeping`]).
    pub(crate) reusable: bool,
}

/// Writes `req` whole on an open connection and reads its response, by `deadline`.
pub(crate) async fn exchange_on(
    stream: &mut Stream,
    req: &SentRequest,
    url: &url::Url,
    deadline: Instant,
    timeout: Duration,
    max_body: usize,
) -> OnConnection {
    let started = Instant::now();
    let result = async {
        let wire = h1::wire_to(req, url)?;
        write_request(stream, &wire, deadline, timeout).await?;
        h1::read_keeping(stream, &req.method, deadline, timeout, max_body).await
    }
    .await;
    let (result, reusable) = match result {
        Ok((response, reusable)) => (Ok(response), reusable),
        Err(e) => (Err(e), false),
    };
    OnConnection {
        response: RawResponse::ended_now(started, result),
        reusable,
    }
}

/// Why no idle keep-alive connection could be left open.
#[derive(Debug, thiserror::Error)]
pub enum NotKept {
    /// The request to open it got no answer.
    #[error(transparent)]
    Failed(#[from] HttpError),
    /// The server answered and closed the connection (it keeps none alive).
    #[error("the server closed the connection after answering GET {path} ({status})")]
    ClosedAfterAnswer { path: String, status: u16 },
}

/// A keep-alive connection used for one request and then left idle. Whether the server closes
/// it later tells whether the server went down in between: `restart-persistence` opens one
/// before the restart hook and checks it afterwards, so a hook that restarts nothing is seen.
pub struct IdleConnection {
    stream: Stream,
}

impl IdleConnection {
    /// Connects to `url`'s origin, sends `GET <path>` with `headers` (tenant A's credentials)
    /// and reads the answer, whatever its status. `Err` when no keep-alive connection could be
    /// left open (the server closes after each answer, or does not answer).
    pub async fn open(
        connector: &Connector,
        url: &url::Url,
        headers: &[Header],
        timeout: Duration,
    ) -> Result<Self, NotKept> {
        let deadline = Instant::now() + timeout;
        let mut stream = connector.connect(url, deadline, timeout).await?;
        let mut headers: Vec<Header> = headers
            .iter()
            .filter(|h| !h.name.eq_ignore_ascii_case("content-type"))
            .cloned()
            .collect();
        headers.push(Header::new("Connection", "keep-alive"));
        let req = h1::prepare(url, "GET", headers, Vec::new());
        let wire = h1::to_wire(&req)?;
        write_request(&mut stream, &wire, deadline, timeout).await?;
        let answer = h1::read_response(&mut stream, "GET", deadline, timeout, 64 * 1024).await?;
        let mut idle = IdleConnection { stream };
        if h1::asks_to_close(&answer.headers) || idle.closed(Duration::from_millis(50)).await {
            return Err(NotKept::ClosedAfterAnswer {
                path: url.path().to_string(),
                status: answer.status,
            });
        }
        Ok(idle)
    }

    /// Whether the server has closed the connection (end of stream, a reset, or unsolicited
    /// bytes such as a TLS close_notify), waiting at most `wait` for a sign.
    pub async fn closed(&mut self, wait: Duration) -> bool {
        let mut buf = [0u8; 512];
        match tokio::time::timeout(wait, self.stream.read(&mut buf)).await {
            Err(_) => false,
            Ok(Ok(_)) | Ok(Err(_)) => true,
        }
    }
}
