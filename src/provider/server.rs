//! The fake provider's HTTP side: hyper's connection API rather than a router, because some
//! steps close the connection without writing a byte (a service that returns an error makes
//! hyper drop the connection, which the API under test sees as a reset, not as a 5xx).
//!
//! Every call is recorded in the ledger when it arrives and again when it is answered, so a
//! probe waiting on the ledger sees held calls too.

use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::ledger::{Answered, Call, KeyState};
use super::profile::{InProgress, KeyCarrier, Mismatch, Operation, Params, Repeat};
use super::script::Step;
use super::Shared;
use crate::http::exchange::Header;

/// Bodies larger than this are refused with 413 (a provider call is a few hundred bytes).
const BODY_LIMIT: usize = 64 * 1024;

/// The longest the fake holds a call or waits for a key in flight: a probe that forgot to
/// release a hold still ends.
pub const HOLD_BOUND: Duration = Duration::from_secs(10);

/// The connection is closed without an answer.
#[derive(Debug, thiserror::Error)]
#[error("closed without an answer")]
pub struct Closed;

/// Serves until `stopped` resolves; dropping the set at the end aborts every open connection.
/// With `tls`, every connection is a TLS one first (plain HTTP is answered 400 naming the
/// scheme, a broken-off handshake recorded, so the calibration can say why nothing arrived).
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    state: Shared,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let state = state.clone();
                let tls = tls.clone();
                connections.spawn(async move {
                    match tls {
                        None => serve_connection(stream, state).await,
                        Some(acceptor) => serve_tls(stream, acceptor, state).await,
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// One HTTPS connection: the handshake, then HTTP/1.1 over it.
async fn serve_tls(stream: TcpStream, acceptor: TlsAcceptor, state: Shared) {
    let mut first = [0u8; 1];
    match stream.peek(&mut first).await {
        Ok(1) if !super::tls::starts_handshake(first[0]) => {
            let local = stream
                .local_addr()
                .map_or_else(|_| "…".to_string(), |a| a.to_string());
            state.refuse(format!(
                "a plain-HTTP request reached the HTTPS port: call https://{local}"
            ));
            let mut stream = stream;
            let _ = stream
                .write_all(&super::tls::plain_http_answer(&local))
                .await;
            let _ = stream.shutdown().await;
            return;
        }
        Ok(1) => {}
        _ => return,
    }
    match acceptor.accept(stream).await {
        Ok(tls) => serve_connection(tls, state).await,
        Err(e) => state.refuse(format!("TLS handshake failed: {e}")),
    }
}

/// HTTP/1.1 on one connection, each call handled by [`handle`].
async fn serve_connection<S>(stream: S, state: Shared)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let state = state.clone();
        async move { handle(&state, req).await }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// An answer: status, headers, body.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn json(status: u16, media: &str, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), media.into())],
            body: body.into(),
        }
    }
}

/// Handles one call in a task of its own: a provider goes on with a call whose caller hung up
/// (its deadline passed), so a held call still commits once released and is recorded as
/// answered, whether or not anyone read the answer.
async fn handle(state: &Shared, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Closed> {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let headers: Vec<Header> = req
        .headers()
        .iter()
        .map(|(k, v)| Header::new(k.as_str(), v.as_bytes()))
        .collect();
    let Some(body) = read_limited(req.into_body()).await else {
        return Ok(respond(&Reply::json(
            413,
            "application/json",
            r#"{"error":"body too large"}"#,
        )));
    };
    let n = arrive(state, method, path, headers, body);
    let state = state.clone();
    let worked = tokio::spawn(async move {
        let reply = answer(&state, n).await;
        finish(&state, n, &reply);
        reply
    });
    match worked.await {
        Ok(Ok(r)) => Ok(respond(&r)),
        _ => Err(Closed),
    }
}

/// Records how call `n` was answered.
fn finish(state: &Shared, n: usize, reply: &Result<Reply, &'static str>) {
    let mut inner = state.lock();
    if let Some(call) = inner.ledger.call_mut(n) {
        call.finished = Some(Instant::now());
        call.answered = match reply {
            Ok(r) => Answered::Status {
                status: r.status,
                headers: r.headers.clone(),
                body: r.body.clone(),
            },
            Err(why) => Answered::Closed { why },
        };
    }
    drop(inner);
    state.changed();
}

fn respond(r: &Reply) -> Response<Full<Bytes>> {
    let mut b = Response::builder().status(r.status);
    for (k, v) in &r.headers {
        b = b.header(k, v);
    }
    b.body(Full::new(Bytes::from(r.body.clone())))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

/// Reads a body up to [`BODY_LIMIT`]; `None` when it is longer.
async fn read_limited(body: Incoming) -> Option<Vec<u8>> {
    let limited = http_body_util::Limited::new(body, BODY_LIMIT);
    limited.collect().await.ok().map(|b| b.to_bytes().to_vec())
}

/// Records the call as it arrived: its key, operation, parameters and token.
fn arrive(
    state: &Shared,
    method: String,
    path: String,
    headers: Vec<Header>,
    body: Vec<u8>,
) -> usize {
    let settings = &state.settings;
    let profile = settings.profile;
    let operation = profile.operation(&method, &path);
    let (key, key_problem) = read_key(&settings.carrier, &headers, &body);
    let params = operation.map(|op| profile.params(op, &body));
    let mut inner = state.lock();
    let token = inner.attribute(&path, &body, settings.correlate.as_deref(), profile);
    let n = inner.ledger.calls.len() + 1;
    inner.ledger.calls.push(Call {
        n,
        at: Instant::now(),
        finished: None,
        method,
        path,
        headers,
        body,
        key,
        key_problem,
        operation,
        params,
        token,
        scripted: None,
        answered: Answered::Pending,
        committed: None,
    });
    drop(inner);
    state.changed();
    n
}

/// The key in its carrier: an RFC 8941 String is unquoted, a bare value taken as it is.
fn read_key(
    carrier: &KeyCarrier,
    headers: &[Header],
    body: &[u8],
) -> (Option<String>, Option<String>) {
    match carrier {
        KeyCarrier::Header { name, sf_string } => {
            let values = crate::http::exchange::header_values(headers, name);
            let Some(raw) = values.first() else {
                return (None, None);
            };
            let text = String::from_utf8_lossy(raw).trim().to_string();
            if *sf_string && text.starts_with('"') {
                match unquote(&text) {
                    Some(k) => (Some(k), None),
                    None => (
                        None,
                        Some(format!("{name}: {text} is not an RFC 8941 String")),
                    ),
                }
            } else if text.is_empty() {
                (None, Some(format!("{name} is empty")))
            } else {
                (Some(text), None)
            }
        }
        KeyCarrier::Body(pointer) => {
            let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
            match parsed.as_ref().and_then(|v| v.pointer(pointer)) {
                Some(serde_json::Value::String(s)) if !s.is_empty() => (Some(s.clone()), None),
                Some(other) => (None, Some(format!("{pointer} holds {other}, not a key"))),
                None => (None, None),
            }
        }
    }
}

/// An RFC 8941 String's value (`"a\"b"` → `a"b`).
fn unquote(text: &str) -> Option<String> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                c @ ('"' | '\\') => out.push(c),
                _ => return None,
            },
            '"' => return None,
            c if (' '..='~').contains(&c) => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

/// The account a credential stands for: one per distinct `Authorization` value, named by a
/// digest so no secret reaches the ledger.
fn account(headers: &[Header]) -> String {
    let auth = crate::http::exchange::header_values(headers, "authorization");
    match auth.first() {
        None => "acct_default".into(),
        Some(v) => {
            let digest = Sha256::digest(v);
            format!("acct_{}", &hex::encode(digest)[..10])
        }
    }
}

/// What the fake does to call `n`: its script's step, then the profile's rules.
async fn answer(state: &Shared, n: usize) -> Result<Reply, &'static str> {
    let profile = state.settings.profile;
    let (call, step) = {
        let mut inner = state.lock();
        let call = inner.ledger.call(n).cloned().expect("recorded");
        let step = inner.scripts.next(call.token.as_deref());
        if let Some(c) = inner.ledger.call_mut(n) {
            c.scripted = step.label();
        }
        (call, step)
    };
    let (Some(op), Some(params)) = (call.operation, call.params.clone()) else {
        if let Some(found) = read(state, &call.method, &call.path) {
            return Ok(found);
        }
        let body = serde_json::json!({
            "error": "not_found",
            "message": format!("the {} profile has no {} {}", profile.name, call.method, call.path),
        });
        return Ok(Reply::json(404, "application/json", body.to_string()));
    };
    match step {
        Step::Unavailable => Ok(Reply::json(
            503,
            profile.error_media_type(),
            profile.unavailable,
        )),
        Step::Throttled(s) => {
            let mut r = Reply::json(429, profile.error_media_type(), profile.throttled);
            r.headers.push(("retry-after".into(), s.to_string()));
            Ok(r)
        }
        Step::Reset => Err("reset before any byte"),
        Step::HoldPast(d) => {
            state.held(call.token.as_deref(), Instant::now() + d).await;
            Err("held past the caller's deadline, then closed")
        }
        Step::InProgress => Ok(in_progress(profile)),
        Step::CommitThenClose => {
            play(state, &call, op, params, false).await;
            Err("committed, then closed without an answer")
        }
        Step::HoldUntilReleased => Ok(play(state, &call, op, params, true).await),
        Step::Normal => Ok(play(state, &call, op, params, false).await),
        Step::NormalThenForget => {
            let r = play(state, &call, op, params, false).await;
            if let Some(key) = &call.key {
                state
                    .lock()
                    .ledger
                    .keys
                    .remove(&(account(&call.headers), key.clone()));
            }
            Ok(r)
        }
    }
}

/// A read of a committed charge or payout by its id (`GET /payments/PM…`): GoCardless's
/// libraries answer the 409 naming the resource a key created by reading it, and an API may
/// confirm an unknown outcome that way. The resource as its creation answered it; `None` for
/// anything else (answered 404).
fn read(state: &Shared, method: &str, path: &str) -> Option<Reply> {
    if method != "GET" {
        return None;
    }
    let profile = state.settings.profile;
    let inner = state.lock();
    inner.ledger.charges.iter().find_map(|c| {
        let id = path
            .strip_prefix(profile.endpoint(c.operation).path)?
            .strip_prefix('/')?;
        (id == c.id).then(|| {
            let body = profile.success_body(c.operation, &c.id, &c.params);
            Reply::json(200, "application/json", body.to_string())
        })
    })
}

/// The profile's answer to a key in flight, when it refuses at once; a generic 409 for the
/// profiles that wait (only a script asks for it there).
fn in_progress(profile: &super::profile::Profile) -> Reply {
    match profile.in_progress {
        InProgress::Refuse(status, body) => Reply::json(status, profile.error_media_type(), body),
        InProgress::WaitThenRepeat => Reply::json(
            409,
            "application/json",
            r#"{"error":"request_in_progress"}"#,
        ),
    }
}

/// Plays the profile for a call: a new key charges (after a hold, when asked), a completed key
/// repeats or refuses, a key in flight gets the profile's in-progress answer or waits.
async fn play(state: &Shared, call: &Call, op: Operation, params: Params, hold: bool) -> Reply {
    let profile = state.settings.profile;
    let account = account(&call.headers);
    let deadline = Instant::now() + HOLD_BOUND;
    let Some(key) = call.key.clone() else {
        // Without a key the provider charges, and remembers nothing.
        if hold {
            state.held(call.token.as_deref(), deadline).await;
        }
        return charge(state, call, op, params, &account);
    };
    let slot = (account.clone(), key);
    loop {
        let mut rx = state.subscribe();
        // Looked up and claimed under one lock: two calls with a new key arriving together
        // must not both find it free and both charge.
        let seen = {
            let mut inner = state.lock();
            let seen = inner.ledger.keys.get(&slot).cloned();
            if seen.is_none() {
                inner.ledger.keys.insert(
                    slot.clone(),
                    KeyState::InFlight {
                        operation: op,
                        params: params.body.clone(),
                    },
                );
            }
            seen
        };
        match seen {
            None => break,
            Some(KeyState::InFlight { .. }) => match profile.in_progress {
                InProgress::Refuse(..) => return in_progress(profile),
                InProgress::WaitThenRepeat => {
                    if tokio::time::timeout_at(deadline.into(), rx.changed())
                        .await
                        .is_err()
                    {
                        return in_progress(profile);
                    }
                }
            },
            Some(KeyState::Done {
                operation,
                params: first,
                status,
                body,
                charge,
            }) => {
                let same = operation == op && first == params.body;
                return repeat(
                    profile,
                    same,
                    status,
                    body,
                    charge.and_then(|c| state.charge_id(c)),
                );
            }
        }
    }
    state.changed();
    if hold {
        state.held(call.token.as_deref(), deadline).await;
    }
    let reply = charge(state, call, op, params.clone(), &account);
    let charge_n = state.lock().ledger.call(call.n).and_then(|c| c.committed);
    state.lock().ledger.keys.insert(
        slot,
        KeyState::Done {
            operation: op,
            params: params.body,
            status: reply.status,
            body: reply.body.clone(),
            charge: charge_n,
        },
    );
    state.changed();
    reply
}

/// A repeat of a completed key: `same` when the parameters match the first call's.
fn repeat(
    profile: &super::profile::Profile,
    same: bool,
    status: u16,
    body: Vec<u8>,
    id: Option<String>,
) -> Reply {
    if profile.repeat == Repeat::ConflictNaming {
        let id = id.unwrap_or_default();
        return Reply::json(
            409,
            "application/json",
            profile.conflict_naming(&id).to_string(),
        );
    }
    if !same {
        if let Mismatch::Refuse(s, b) = profile.mismatch {
            return Reply::json(s, profile.error_media_type(), b);
        }
    }
    let mut r = Reply::json(status, "application/json", body);
    if let Repeat::Replay(extra) = profile.repeat {
        r.headers
            .extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    }
    r
}

/// Commits a charge for `call` and answers it.
fn charge(state: &Shared, call: &Call, op: Operation, params: Params, account: &str) -> Reply {
    let profile = state.settings.profile;
    let mut inner = state.lock();
    let id = format!(
        "{}{}",
        profile.endpoint(op).id_prefix,
        &uuid::Uuid::new_v4().simple().to_string()[..16]
    );
    let body = profile.success_body(op, &id, &params);
    inner
        .ledger
        .commit(call.n, id, account.to_string(), op, params);
    drop(inner);
    state.changed();
    Reply::json(
        profile.created_status(),
        "application/json",
        body.to_string(),
    )
}
