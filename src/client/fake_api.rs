//! The fake payments API a client is checked against: `POST /api/payments` with bearer auth and
//! an Idempotency-Key, a fresh in-memory store per scenario, and one injected behaviour for the
//! scenario's first attempt.
//!
//! It is built on hyper's connection API rather than on a router because the lost-response
//! scenario must commit the payment and then close the TCP connection without writing a single
//! byte of response: a service that returns an error makes hyper drop the connection, which a
//! client sees as "connection closed without response", not as a 5xx.
//!
//! The payload is JSON, or form-encoded with the same fields (Stripe's v1 SDKs send forms), so a
//! real SDK can be pointed at it unchanged.
//!
//! Everything that reaches it is recorded as an [`Attempt`] (time, key, payload, headers, and
//! what was answered), so the checks judge what the client really sent. Both key forms are
//! accepted (an RFC 8941 String and a bare value), so a client whose syntax is off can still be
//! judged on everything else.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use anyhow::{Context as _, Result};
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use crate::http::exchange::{Exchange, Header, ReceivedResponse, SentRequest};

/// The path of the one operation.
pub const PAYMENTS_PATH: &str = "/api/payments";

/// What the server's `Retry-After` says in the scenarios that send one, in seconds.
pub const RETRY_AFTER_SECS: u64 = 2;

/// Bodies larger than this are refused with 413 (a payment is a few dozen bytes).
const BODY_LIMIT: usize = 64 * 1024;

/// What the fake does with the scenario's first `POST /api/payments`; every later attempt is
/// served normally (create, replay, or 422 on a changed payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// No fault: every attempt is served normally.
    Normal,
    /// Commit the payment, then close the connection without answering.
    DropAfterCommit,
    /// 503 with `Retry-After`, nothing committed.
    Unavailable,
    /// 409 "a request with this key is in flight" with `Retry-After`, nothing committed.
    InFlight,
    /// 422 "key reused with another payload", nothing committed.
    Mismatch,
    /// 400 "invalid request", nothing committed.
    Invalid,
}

/// The key a request carried, as sent and as understood.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SentKey {
    /// The header value(s) as sent, joined with ", " when there were several lines.
    pub raw: String,
    /// The key itself: the String's content for an RFC 8941 String, else the raw value trimmed.
    pub value: String,
    /// True when the value parses as an RFC 8941 Item whose bare item is a String.
    pub sf_string: bool,
}

impl SentKey {
    fn parse(lines: &[&[u8]]) -> Option<SentKey> {
        if lines.is_empty() {
            return None;
        }
        let raw = lines
            .iter()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect::<Vec<_>>()
            .join(", ");
        let string = sfv::Parser::new(raw.as_bytes())
            .parse_item::<sfv::Item>()
            .ok()
            .and_then(|i| i.bare_item.as_string().map(|s| s.as_str().to_string()));
        Some(SentKey {
            value: string.clone().unwrap_or_else(|| raw.trim().to_string()),
            sf_string: string.is_some(),
            raw,
        })
    }
}

/// One request the client made, and what it got.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The request and the answer (or the closed connection), numbered in arrival order.
    pub exchange: Exchange,
    /// Which logical operation it belongs to: the run of the command (1-based) when idem-check
    /// runs it, else one more than the operations already answered with a final answer.
    pub op: usize,
    /// True for `POST /api/payments`, the operation under test.
    pub operation: bool,
    pub key: Option<SentKey>,
    /// The body parsed as JSON, when it is JSON.
    pub payload: Option<Value>,
}

impl Attempt {
    /// True when both carry the same key (as understood: `"k"` and `k` are the same key), or
    /// neither carries one.
    pub fn same_key_as(&self, other: &Attempt) -> bool {
        self.key.as_ref().map(|k| &k.value) == other.key.as_ref().map(|k| &k.value)
    }
}

/// What a scenario left behind: every attempt and the payments that exist at the end.
#[derive(Debug, Clone, Default)]
pub struct Recording {
    pub attempts: Vec<Attempt>,
    pub payments: usize,
}

/// How far the client got, for `--listen`, which has no process exit to wait for.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Operations that got a final answer (a 2xx, or the injected refusal).
    pub finals: usize,
    /// When the last request arrived.
    pub last_attempt: Option<Instant>,
}

struct Stored {
    payload: Value,
    body: Bytes,
}

struct State {
    origin: Instant,
    behaviour: Behaviour,
    header: String,
    token: String,
    base_url: String,
    /// The run being executed, when idem-check runs the command.
    run: Option<usize>,
    attempts: Vec<Attempt>,
    store: HashMap<String, Stored>,
    payments: usize,
    finals: usize,
    last_attempt: Option<Instant>,
}

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> MutexGuard<'_, State> {
    // A panic while holding the lock would be a bug in this file; the data stays usable.
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// A running fake API; stops when [`FakeApi::finish`] is called or it is dropped.
pub struct FakeApi {
    addr: SocketAddr,
    state: Shared,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

/// The error that makes hyper close the connection without a response.
#[derive(Debug, thiserror::Error)]
#[error("connection closed after the payment was committed (lost-response scenario)")]
struct DropConnection;

impl FakeApi {
    /// Binds `bind` (port 0 for an ephemeral one) and serves until stopped. `header` is the
    /// suite's key header, `token` the bearer token clients must send.
    pub async fn start(
        bind: SocketAddr,
        behaviour: Behaviour,
        header: &str,
        token: &str,
    ) -> Result<FakeApi> {
        let listener = TcpListener::bind(bind)
            .await
            .with_context(|| format!("cannot listen on {bind}"))?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State {
            origin: Instant::now(),
            behaviour,
            header: header.to_ascii_lowercase(),
            token: token.to_string(),
            base_url: format!("http://{addr}"),
            run: None,
            attempts: Vec::new(),
            store: HashMap::new(),
            payments: 0,
            finals: 0,
            last_attempt: None,
        }));
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(serve(listener, state.clone(), stopped));
        Ok(FakeApi {
            addr,
            state,
            stop: Some(stop),
            task,
        })
    }

    /// `http://127.0.0.1:PORT`, what the client gets as `IDEM_CHECK_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Tags the attempts that follow with run `n` (or with none).
    pub fn set_run(&self, n: Option<usize>) {
        lock(&self.state).run = n;
    }

    /// The instant every attempt's `start_ms` counts from.
    pub fn origin(&self) -> Instant {
        lock(&self.state).origin
    }

    pub fn progress(&self) -> Progress {
        let s = lock(&self.state);
        Progress {
            finals: s.finals,
            last_attempt: s.last_attempt,
        }
    }

    /// Stops serving (open connections are closed) and hands over what was recorded.
    pub async fn finish(mut self) -> Recording {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
        let s = lock(&self.state);
        Recording {
            attempts: s.attempts.clone(),
            payments: s.payments,
        }
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(listener: TcpListener, state: Shared, mut stopped: oneshot::Receiver<()>) {
    // Dropping the set at the end aborts every connection still open (keep-alive ones too).
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let state = state.clone();
                connections.spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let state = state.clone();
                        async move { handle(&state, req).await }
                    });
                    // The error is the connection ending (dropped on purpose, or by the client).
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// What [`answer`] decided: a response, or closing the connection.
enum Answer {
    Respond(u16, Vec<(&'static str, String)>, Bytes),
    Drop,
}

async fn handle(
    state: &Shared,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, DropConnection> {
    let arrived = Instant::now();
    let (parts, body) = req.into_parts();
    let body = match http_body_util::Limited::new(body, BODY_LIMIT)
        .collect()
        .await
    {
        Ok(b) => Some(b.to_bytes()),
        Err(_) => None,
    };
    let mut s = lock(state);
    let headers: Vec<Header> = parts
        .headers
        .iter()
        .map(|(n, v)| Header::new(n.as_str(), v.as_bytes()))
        .collect();
    let key = SentKey::parse(
        &parts
            .headers
            .get_all(s.header.as_str())
            .iter()
            .map(|v| v.as_bytes())
            .collect::<Vec<_>>(),
    );
    let operation = parts.method == hyper::Method::POST && parts.uri.path() == PAYMENTS_PATH;
    let form = parts.headers.get("content-type").is_some_and(|v| {
        v.as_bytes()
            .starts_with(b"application/x-www-form-urlencoded")
    });
    let payload = body.as_ref().and_then(|b| parse_payload(b, form));
    let first = operation && !s.attempts.iter().any(|a| a.operation);
    let answer = match &body {
        None => problem(413, "the body is larger than 64 KiB"),
        Some(_) if !operation => problem(404, "only POST /api/payments exists here"),
        Some(_) => answer(
            &mut s,
            &parts.headers,
            key.as_ref(),
            payload.as_ref(),
            first,
        ),
    };
    let op = s.run.unwrap_or(s.finals + 1);
    let request = SentRequest {
        method: parts.method.to_string(),
        url: format!("{}{}", s.base_url, parts.uri),
        headers,
        body: body.map(|b| b.to_vec()).unwrap_or_default(),
    };
    let start_ms = arrived.duration_since(s.origin).as_secs_f64() * 1000.0;
    let duration_ms = arrived.elapsed().as_secs_f64() * 1000.0;
    let (response, error, result) = match answer {
        Answer::Drop => (None, Some(DropConnection.to_string()), Err(DropConnection)),
        Answer::Respond(status, extra, bytes) => {
            let refusal = match s.behaviour {
                Behaviour::Mismatch => status == 422,
                Behaviour::Invalid => status == 400,
                _ => false,
            };
            let final_answer = operation && ((200..300).contains(&status) || (first && refusal));
            if final_answer {
                s.finals += 1;
            }
            let mut builder = Response::builder()
                .status(status)
                .header("content-type", content_type(status));
            let mut recorded = vec![Header::new("content-type", content_type(status))];
            for (name, value) in extra {
                builder = builder.header(name, value.as_str());
                recorded.push(Header::new(name, value.into_bytes()));
            }
            let response = builder
                .body(Full::new(bytes.clone()))
                .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())));
            let received = ReceivedResponse {
                status,
                version: "HTTP/1.1".into(),
                headers: recorded,
                body: bytes.to_vec(),
                body_truncated: false,
                problem: None,
            };
            (Some(received), None, Ok(response))
        }
    };
    let n = s.attempts.len() + 1;
    s.attempts.push(Attempt {
        exchange: Exchange {
            n,
            role: String::new(),
            start_ms,
            duration_ms,
            release_us: None,
            request,
            response,
            error,
        },
        op,
        operation,
        key,
        payload,
    });
    s.last_attempt = Some(Instant::now());
    result
}

fn content_type(status: u16) -> &'static str {
    if (200..300).contains(&status) {
        "application/json"
    } else {
        "application/problem+json"
    }
}

/// The payments API itself, with the scenario's fault on the first attempt.
fn answer(
    s: &mut State,
    headers: &hyper::HeaderMap,
    key: Option<&SentKey>,
    payload: Option<&Value>,
    first: bool,
) -> Answer {
    let authorised = headers
        .get("authorization")
        .is_some_and(|v| v.as_bytes() == format!("Bearer {}", s.token).as_bytes());
    if !authorised {
        return problem(401, "send Authorization: Bearer $IDEM_CHECK_TOKEN");
    }
    let retry_after = || vec![("retry-after", RETRY_AFTER_SECS.to_string())];
    if first {
        match s.behaviour {
            Behaviour::Normal | Behaviour::DropAfterCommit => {}
            Behaviour::Unavailable => {
                return problem_with(503, "temporarily unavailable, retry later", retry_after())
            }
            Behaviour::InFlight => {
                return problem_with(
                    409,
                    "a request with this Idempotency-Key is still being processed",
                    retry_after(),
                )
            }
            Behaviour::Mismatch => {
                return problem(
                    422,
                    "this Idempotency-Key was already used with a different payload",
                )
            }
            Behaviour::Invalid => return problem(400, "the payment request is invalid"),
        }
    }
    let Some(payload) = payload.filter(|p| valid_payment(p)) else {
        return problem(
            400,
            "expected {amountCents: integer > 0, currency: 3 letters, reference: string} as JSON or a form",
        );
    };
    let created = match key {
        Some(k) => match s.store.get(&k.value) {
            Some(stored) if &stored.payload == payload => {
                return Answer::Respond(
                    201,
                    vec![("idempotent-replayed", "true".into())],
                    stored.body.clone(),
                );
            }
            Some(_) => {
                return problem(
                    422,
                    "this Idempotency-Key was already used with a different payload",
                )
            }
            None => {
                let body = create(s, payload);
                s.store.insert(
                    k.value.clone(),
                    Stored {
                        payload: payload.clone(),
                        body: body.clone(),
                    },
                );
                body
            }
        },
        None => create(s, payload),
    };
    if first && s.behaviour == Behaviour::DropAfterCommit {
        return Answer::Drop;
    }
    Answer::Respond(201, vec![], created)
}

/// Commits a payment; returns its JSON body.
fn create(s: &mut State, payload: &Value) -> Bytes {
    s.payments += 1;
    let mut body = json!({ "id": format!("pay_{:04}", s.payments), "status": "succeeded" });
    if let (Some(b), Some(p)) = (body.as_object_mut(), payload.as_object()) {
        for (k, v) in p {
            b.insert(k.clone(), v.clone());
        }
    }
    Bytes::from(body.to_string())
}

/// The payload as JSON: the body itself, or for a form-encoded body (as Stripe's v1 SDKs send)
/// an object of its fields, `amountCents` as a number. Either way, two payloads compare equal
/// when they mean the same, whatever their byte order or spacing.
fn parse_payload(body: &[u8], form: bool) -> Option<Value> {
    if !form {
        return serde_json::from_slice(body).ok();
    }
    let fields = url::form_urlencoded::parse(body)
        .map(|(k, v)| {
            let value = match (k.as_ref(), v.parse::<u64>()) {
                ("amountCents", Ok(n)) => Value::from(n),
                _ => Value::from(v.into_owned()),
            };
            (k.into_owned(), value)
        })
        .collect();
    Some(Value::Object(fields))
}

fn valid_payment(p: &Value) -> bool {
    let amount = p.get("amountCents").and_then(Value::as_u64);
    let currency = p.get("currency").and_then(Value::as_str);
    let reference = p.get("reference").and_then(Value::as_str);
    amount.is_some_and(|a| a > 0)
        && currency.is_some_and(|c| c.len() == 3 && c.chars().all(|c| c.is_ascii_alphabetic()))
        && reference.is_some_and(|r| !r.is_empty())
}

fn problem(status: u16, detail: &str) -> Answer {
    problem_with(status, detail, vec![])
}

fn problem_with(status: u16, detail: &str, extra: Vec<(&'static str, String)>) -> Answer {
    let body = json!({ "type": "about:blank", "status": status, "detail": detail });
    Answer::Respond(status, extra, Bytes::from(body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn post(base: &str, key: Option<&str>, body: &str) -> std::io::Result<String> {
        match key {
            Some(k) => post_as(base, k, body, "application/json").await,
            None => send(base, "", body, "application/json").await,
        }
    }

    async fn post_as(base: &str, key: &str, body: &str, ct: &str) -> std::io::Result<String> {
        send(base, &format!("Idempotency-Key: {key}\r\n"), body, ct).await
    }

    async fn send(base: &str, key: &str, body: &str, ct: &str) -> std::io::Result<String> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let addr = base.trim_start_matches("http://");
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        let req = format!(
            "POST /api/payments HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer t\r\n{key}\
             Content-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await?;
        let mut out = String::new();
        s.read_to_string(&mut out).await?;
        Ok(out)
    }

    const BODY: &str = r#"{"amountCents":1250,"currency":"EUR","reference":"r1"}"#;
    const LOCAL: &str = "127.0.0.1:0";

    #[tokio::test]
    async fn lost_response_commits_then_closes_without_a_byte_then_replays() {
        let api = FakeApi::start(
            LOCAL.parse().unwrap(),
            Behaviour::DropAfterCommit,
            "Idempotency-Key",
            "t",
        )
        .await
        .unwrap();
        let base = api.base_url();
        let first = post(&base, Some("\"k1\""), BODY).await.unwrap();
        assert_eq!(
            first, "",
            "the connection must close without any response bytes"
        );
        let retry = post(&base, Some("\"k1\""), BODY).await.unwrap();
        assert!(retry.starts_with("HTTP/1.1 201"), "{retry}");
        assert!(retry
            .to_ascii_lowercase()
            .contains("idempotent-replayed: true"));
        let rec = api.finish().await;
        assert_eq!(rec.payments, 1);
        assert_eq!(rec.attempts.len(), 2);
        assert!(rec.attempts[0].exchange.response.is_none());
        assert_eq!(rec.attempts[1].key.as_ref().unwrap().value, "k1");
    }

    #[tokio::test]
    async fn both_key_forms_name_the_same_key_and_a_changed_payload_gets_422() {
        let api = FakeApi::start(
            LOCAL.parse().unwrap(),
            Behaviour::Normal,
            "Idempotency-Key",
            "t",
        )
        .await
        .unwrap();
        let base = api.base_url();
        assert!(post(&base, Some("k2"), BODY)
            .await
            .unwrap()
            .starts_with("HTTP/1.1 201"));
        let quoted = post(&base, Some("\"k2\""), BODY).await.unwrap();
        assert!(quoted.contains("idempotent-replayed"), "{quoted}");
        let other = BODY.replace("r1", "r2");
        assert!(post(&base, Some("k2"), &other)
            .await
            .unwrap()
            .starts_with("HTTP/1.1 422"));
        let rec = api.finish().await;
        assert_eq!(rec.payments, 1);
        assert!(!rec.attempts[0].key.as_ref().unwrap().sf_string);
        assert!(rec.attempts[1].key.as_ref().unwrap().sf_string);
    }

    #[tokio::test]
    async fn a_form_encoded_payment_is_the_same_payload_as_its_json() {
        let api = FakeApi::start(
            LOCAL.parse().unwrap(),
            Behaviour::Normal,
            "Idempotency-Key",
            "t",
        )
        .await
        .unwrap();
        let base = api.base_url();
        assert!(post(&base, Some("k"), BODY)
            .await
            .unwrap()
            .starts_with("HTTP/1.1 201"));
        let form = "reference=r1&currency=EUR&amountCents=1250";
        let r = post_as(&base, "k", form, "application/x-www-form-urlencoded")
            .await
            .unwrap();
        assert!(r.contains("idempotent-replayed"), "{r}");
        assert_eq!(api.finish().await.payments, 1);
    }

    #[tokio::test]
    async fn injected_refusals_commit_nothing_and_carry_retry_after() {
        for (behaviour, status, retry_after) in [
            (Behaviour::Unavailable, "503", true),
            (Behaviour::InFlight, "409", true),
            (Behaviour::Mismatch, "422", false),
            (Behaviour::Invalid, "400", false),
        ] {
            let api = FakeApi::start(LOCAL.parse().unwrap(), behaviour, "Idempotency-Key", "t")
                .await
                .unwrap();
            let r = post(&api.base_url(), Some("\"k\""), BODY).await.unwrap();
            assert!(r.starts_with(&format!("HTTP/1.1 {status}")), "{r}");
            assert_eq!(
                r.to_ascii_lowercase().contains("retry-after: 2"),
                retry_after
            );
            assert_eq!(api.finish().await.payments, 0);
        }
    }
}
