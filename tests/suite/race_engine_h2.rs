//! The HTTP/2 single-packet burst against the in-process reference server (h2c), an
//! HTTP/1.1-only listener, and a TLS listener that picks `h2` by ALPN.
//!
//! Every listener binds 127.0.0.1:0 and every wait is bounded.

use crate::common;

use std::time::Duration;

use common::tls::{test_acceptor, trusting_test_cert};
use idem_check::config::Config;
use idem_check::http::burst::BurstOptions;
use idem_check::http::exchange::{Header, SentRequest};
use idem_check::http::pool::Pool;
use idem_check::http::{h1, h2burst, Connector, HttpError};
use idem_check::outcome::Outcome;
use idem_check::reference::Reference;
use idem_reference_server::Fault;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const LIMIT: Duration = Duration::from_secs(5);

fn opts() -> BurstOptions {
    BurstOptions {
        timeout: LIMIT,
        ..BurstOptions::default()
    }
}

/// A payment request; `token` is the tenant's bearer token (any value for servers that do not
/// check it).
fn payment(url: &str, key: &str, token: &str) -> SentRequest {
    let url = url::Url::parse(url).unwrap();
    h1::prepare(
        &url,
        "POST",
        vec![
            Header::new("Authorization", format!("Bearer {token}")),
            Header::new("Content-Type", "application/json"),
            Header::new("Idempotency-Key", format!("\"{key}\"")),
        ],
        format!(r#"{{"amountCents":1250,"currency":"EUR","reference":"{key}"}}"#).into_bytes(),
    )
}

async fn count(base: &str, token: &str) -> u64 {
    let resp = reqwest::Client::new()
        .get(format!("{base}/api/payments/count"))
        .header("Authorization", format!("Bearer {token}"))
        .timeout(LIMIT)
        .send()
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    v["count"].as_u64().unwrap()
}

/// 16 duplicates over h2c: one 201 that executed, the rest 409 or its replay; one execution;
/// every response HTTP/2, released at the same instant, recorded with a `host` authority.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_burst_executes_once_on_the_correct_server() {
    let reference = Reference::start(None).await.unwrap();
    let url = format!("{}/api/payments", reference.base);
    for _ in 0..3 {
        let before = count(&reference.base, &reference.token(0)).await;
        let key = uuid::Uuid::new_v4().to_string();
        let reqs = vec![payment(&url, &key, &reference.token(0)); 16];
        let report = h2burst::burst(&Connector::default(), &reqs, &opts())
            .await
            .unwrap();
        assert_eq!(report.responses.len(), 16);
        assert_eq!(report.spread_us, 0.0);
        let released = report.responses[0].released.expect("released");
        let mut ids = std::collections::HashSet::new();
        let mut created = 0;
        for r in &report.responses {
            assert_eq!(r.released, Some(released));
            let resp = r.result.as_ref().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(resp.version, http::Version::HTTP_2);
            match resp.status {
                201 => {
                    created += 1;
                    let v = resp.json().expect("json body");
                    assert_eq!(v["reference"], key.as_str());
                    ids.insert(v["id"].as_str().unwrap().to_string());
                }
                409 => assert!(resp.media_type().is_some_and(|m| m.contains("json"))),
                other => panic!("unexpected status {other}: {resp:?}"),
            }
        }
        assert!(created >= 1, "no 201");
        assert_eq!(ids.len(), 1, "one payment id across the 201s: {ids:?}");
        assert_eq!(
            count(&reference.base, &reference.token(0)).await,
            before + 1
        );
        let sent = &report.requests[0];
        assert_eq!(sent.headers[0].name, "host");
        assert!(sent.headers.iter().all(|h| h.name == h.name.to_lowercase()));
    }
    reference.stop().await.unwrap();
}

/// Runs `concurrent-duplicates` alone against the reference server over h2c.
async fn probe_over_h2c(fault: Option<Fault>) -> (Outcome, String) {
    let reference = Reference::start(fault).await.unwrap();
    let mut target = reference.target();
    target.http2 = true;
    let config = Config::build(
        target,
        &common::run_options(),
        Some(reference.restart_hook()),
    )
    .unwrap();
    let report = common::run_quietly(config, &["concurrent-duplicates"]).await;
    reference.stop().await.unwrap();
    let probe = report
        .probes
        .iter()
        .find(|p| p.id == "concurrent-duplicates")
        .expect("the probe ran");
    let versions: Vec<http::Version> = probe
        .exchanges
        .iter()
        .filter(|e| e.role.label.starts_with("burst"))
        .filter_map(|e| e.response().map(|r| r.version))
        .collect();
    assert!(
        !versions.is_empty() && versions.iter().all(|v| *v == http::Version::HTTP_2),
        "bursts went over {versions:?}"
    );
    (
        probe.outcome,
        format!("{} — {}", probe.outcome.as_str(), probe.reason),
    )
}

/// The 100 µs check-then-set window is caught in 20 of 20 probe runs over h2c, and the correct
/// server passes 20 of 20.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_probe_catches_the_race_every_time_and_never_accuses() {
    let mut lines = Vec::new();
    let mut caught = 0;
    let mut passed = 0;
    for run in 1..=20 {
        let (o, line) = probe_over_h2c(Some(Fault::Race)).await;
        caught += usize::from(o == Outcome::Fail);
        lines.push(format!("race run {run}: {line}"));
        let (o, line) = probe_over_h2c(None).await;
        passed += usize::from(o == Outcome::Pass);
        lines.push(format!("correct run {run}: {line}"));
    }
    assert_eq!((caught, passed), (20, 20), "{}", lines.join("\n"));
}

/// A listener that answers the preface the way an HTTP/1.1 server does: with a status line, or
/// (Python's `http.server`, for a request line it cannot parse) with an HTML page and no status
/// line at all, which used to read as "a frame of 3940676 bytes".
#[tokio::test]
async fn http1_only_listener_gives_one_clear_error() {
    for (answer, shown) in [
        (
            &b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"[..],
            "\"HTTP/1.1 400 Bad Request\"",
        ),
        (
            &b"<!DOCTYPE HTML>\n<html><head><title>Error response</title></head></html>\n"[..],
            "\"<!DOCTYPE HTML>\"",
        ),
    ] {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = tokio::time::timeout(LIMIT, s.read(&mut buf)).await;
            let _ = s.write_all(answer).await;
        });
        let reqs = vec![payment(&format!("http://{addr}/api/payments"), "k", "t"); 2];
        let report = h2burst::burst(&Connector::default(), &reqs, &opts())
            .await
            .unwrap();
        for r in &report.responses {
            let err = r.result.as_ref().unwrap_err();
            let HttpError::Http2(why) = err else {
                panic!("{err:?}")
            };
            assert!(
                why.contains(shown) && why.contains("HTTP/1.1 only"),
                "{why}"
            );
            assert!(!why.contains('\n'));
            assert!(r.released.is_none());
        }
    }
}

/// TLS with ALPN `h2`: an h2 server (the `h2` crate) answers every stream with its own body,
/// and the automatic choice uses the single-packet path.
#[tokio::test]
async fn tls_alpn_h2_burst_echoes_every_stream() {
    let connector = trusting_test_cert();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = test_acceptor(&[b"h2"]);
    tokio::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        let tls = acceptor.accept(s).await.unwrap();
        let mut conn = h2::server::handshake(tls).await.unwrap();
        while let Some(Ok((req, mut respond))) = conn.accept().await {
            tokio::spawn(async move {
                let mut body = req.into_body();
                let mut bytes = Vec::new();
                while let Some(Ok(chunk)) = body.data().await {
                    let _ = body.flow_control().release_capacity(chunk.len());
                    bytes.extend_from_slice(&chunk);
                }
                let resp = http::Response::builder()
                    .status(200)
                    .header("x-echo-len", bytes.len().to_string())
                    .body(())
                    .unwrap();
                let mut send = respond.send_response(resp, false).unwrap();
                let _ = send.send_data(bytes.into(), true);
            });
        }
    });
    let url = format!("https://localhost:{port}/echo");
    let reqs: Vec<SentRequest> = (0..4)
        .map(|i| payment(&url, &format!("key-{i}"), "t"))
        .collect();
    let report = h2burst::burst_for_target(&connector, &reqs, &opts(), false)
        .await
        .unwrap();
    for (req, r) in reqs.iter().zip(&report.responses) {
        let resp = r.result.as_ref().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(resp.version, http::Version::HTTP_2);
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body, req.body);
        assert_eq!(resp.header("x-echo-len"), Some(req.body.len().to_string()));
    }
}

/// A TLS server without `h2` in ALPN: the automatic choice falls back to the HTTP/1.1 engine,
/// and the forced HTTP/2 burst says why it cannot run.
#[tokio::test]
async fn tls_without_h2_falls_back_or_says_why() {
    let connector = trusting_test_cert();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = test_acceptor(&[b"http/1.1"]);
    tokio::spawn(async move {
        for _ in 0..4 {
            let Ok(Ok((s, _))) = tokio::time::timeout(LIMIT, listener.accept()).await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(s).await else {
                    return;
                };
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                while !seen.ends_with(b"}") {
                    match tokio::time::timeout(LIMIT, tls.read(&mut buf)).await {
                        Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let _ = tls
                    .write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
                    .await;
                let _ = tls.flush().await;
            });
        }
    });
    let url = format!("https://localhost:{port}/p");
    let reqs = vec![payment(&url, "k", "t"); 2];
    let report = h2burst::burst_for_target(&connector, &reqs, &opts(), false)
        .await
        .unwrap();
    for r in &report.responses {
        let resp = r.result.as_ref().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((resp.status, resp.version), (201, http::Version::HTTP_11));
    }
    let forced = h2burst::burst(&connector, &reqs, &opts()).await.unwrap();
    let err = forced.responses[0].result.as_ref().unwrap_err();
    assert!(
        matches!(err, HttpError::Http2(why) if why.contains("picked HTTP/1.1 in ALPN")),
        "{err:?}"
    );
}

/// An h2c server that answers every stream 200 once its body is in, counting the connections
/// it accepted; the first connection is dropped when `close_first` fires, and `first_closed`
/// says when it has been.
fn h2c_server(
    close_first: tokio::sync::oneshot::Receiver<()>,
    first_closed: tokio::sync::oneshot::Sender<()>,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/p", listener.local_addr().unwrap());
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        let listener = TcpListener::from_std(listener).unwrap();
        let mut close_first = Some((close_first, first_closed));
        while let Ok(Ok((tcp, _))) = tokio::time::timeout(LIMIT, listener.accept()).await {
            count.fetch_add(1, Ordering::SeqCst);
            let mut close = close_first.take();
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(tcp).await else {
                    return;
                };
                loop {
                    let stop = async {
                        match close.as_mut() {
                            Some((signal, _)) => {
                                let _ = signal.await;
                            }
                            None => std::future::pending().await,
                        }
                    };
                    let next = tokio::select! {
                        next = conn.accept() => next,
                        () = stop => break,
                    };
                    let Some(Ok((req, mut respond))) = next else {
                        break;
                    };
                    tokio::spawn(async move {
                        let mut body = req.into_body();
                        while let Some(Ok(chunk)) = body.data().await {
                            let _ = body.flow_control().release_capacity(chunk.len());
                        }
                        let resp = http::Response::builder().status(200).body(()).unwrap();
                        let _ = respond.send_response(resp, true);
                    });
                }
                drop(conn);
                if let Some((_, closed)) = close {
                    let _ = closed.send(());
                }
            });
        }
    });
    (url, accepted)
}

/// Sends one pooled HTTP/2 burst of `size` payments (keys `key-{round}-i`) and asserts that
/// every stream was answered 200 over HTTP/2.
async fn pooled_burst(pool: &Pool, url: &str, round: usize, size: usize) {
    let reqs: Vec<SentRequest> = (0..size)
        .map(|i| payment(url, &format!("key-{round}-{i}"), "t"))
        .collect();
    let report = pool
        .burst_for_target(&reqs, &opts(), true, &|| {})
        .await
        .unwrap();
    for r in &report.responses {
        let resp = r.result.as_ref().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((resp.status, resp.version), (200, http::Version::HTTP_2));
    }
}

/// Asserts that the pool opened `n` connections and the server accepted as many.
fn assert_connections(pool: &Pool, accepted: &std::sync::atomic::AtomicUsize, n: usize) {
    assert_eq!(pool.opened(), n as u64);
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), n);
}

/// Pooled bursts of `sizes` streams against a server that keeps its connections; returns the
/// pool and the count of connections the server accepted.
async fn pooled_bursts(sizes: &[usize]) -> (Pool, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let (_close, close_rx) = tokio::sync::oneshot::channel();
    let (closed_tx, _closed) = tokio::sync::oneshot::channel();
    let (url, accepted) = h2c_server(close_rx, closed_tx);
    let pool = Pool::new(Default::default(), 4);
    for (round, size) in sizes.iter().enumerate() {
        pooled_burst(&pool, &url, round, *size).await;
    }
    (pool, accepted)
}

/// HTTP/2 bursts through the pool keep their connection: three bursts, one connection, every
/// stream answered over HTTP/2 (the stream ids of each burst follow the last one's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pooled_h2_bursts_share_one_connection() {
    let (pool, accepted) = pooled_bursts(&[4, 4, 4]).await;
    assert_connections(&pool, &accepted, 1);
}

/// A kept HTTP/2 connection carries at most 100 streams, within the request limits servers put
/// on a connection: bursts of 40, 40 and 40 streams take two connections, every stream answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_h2_connection_carries_at_most_100_streams() {
    let (pool, accepted) = pooled_bursts(&[40, 40, 40]).await;
    assert_connections(&pool, &accepted, 2);
}

/// A kept HTTP/2 connection the server dropped while it was idle carries nothing: the next
/// burst runs on a new connection, and every stream is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_h2_connection_the_server_dropped_is_replaced() {
    let (close, close_rx) = tokio::sync::oneshot::channel();
    let (closed_tx, closed) = tokio::sync::oneshot::channel();
    let (url, accepted) = h2c_server(close_rx, closed_tx);
    let pool = Pool::new(Default::default(), 4);
    pooled_burst(&pool, &url, 0, 3).await;
    close.send(()).unwrap();
    tokio::time::timeout(LIMIT, closed)
        .await
        .expect("the server drops its first connection")
        .unwrap();
    pooled_burst(&pool, &url, 1, 3).await;
    assert_connections(&pool, &accepted, 2);
}

/// What the scripted h2c server does with one stream once its body is in.
#[derive(Clone, Copy)]
enum Act {
    /// Answers 200.
    Answer,
    /// Drops the connection without a frame for the stream, as an idle close crossing the
    /// request does.
    Close,
    /// Sends the response head, then drops the connection before the body.
    Partial,
}

/// An h2c server whose `act(connection, stream)` (both counted from 0) says what it does with
/// each stream; returns its URL and how many connections it accepted.
fn h2c_scripted(
    act: fn(usize, usize) -> Act,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/p", listener.local_addr().unwrap());
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        let listener = TcpListener::from_std(listener).unwrap();
        while let Ok(Ok((tcp, _))) = tokio::time::timeout(LIMIT, listener.accept()).await {
            let c = count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(tcp).await else {
                    return;
                };
                // A stream to close under comes here unanswered: dropped before the connection,
                // its handle would reset the stream, a frame of an answer.
                let (close, mut closing) =
                    tokio::sync::mpsc::channel::<Box<dyn std::any::Any + Send>>(8);
                let mut unanswered = None;
                for n in 0.. {
                    // Accepting first also writes what the streams queued (a head) before the
                    // connection is dropped.
                    let next = tokio::select! {
                        biased;
                        next = conn.accept() => next,
                        stream = closing.recv() => {
                            unanswered = stream;
                            break;
                        }
                    };
                    let Some(Ok((req, mut respond))) = next else {
                        break;
                    };
                    let close = close.clone();
                    tokio::spawn(async move {
                        let mut body = req.into_body();
                        while let Some(Ok(chunk)) = body.data().await {
                            let _ = body.flow_control().release_capacity(chunk.len());
                        }
                        match act(c, n) {
                            Act::Answer => {
                                let resp = http::Response::builder().status(200).body(()).unwrap();
                                let _ = respond.send_response(resp, true);
                            }
                            Act::Close => {
                                let _ = close.send(Box::new(respond)).await;
                            }
                            Act::Partial => {
                                let resp = http::Response::builder().status(200).body(()).unwrap();
                                let body = respond.send_response(resp, false);
                                let _ = close.send(Box::new((respond, body))).await;
                            }
                        }
                    });
                }
                drop(conn);
                drop(unanswered);
            });
        }
    });
    (url, accepted)
}

/// A burst on a kept HTTP/2 connection that the server drops under it, before any frame of an
/// answer (an idle close crossing the release), is no answer: each of its requests is sent
/// again, once, alone, on a new connection, answered there, and its response says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_h2_connection_closed_under_a_burst_sends_it_again_on_new_ones() {
    let (url, accepted) = h2c_scripted(|c, n| match (c, n) {
        (0, 2..) => Act::Close,
        _ => Act::Answer,
    });
    let pool = Pool::new(Default::default(), 4);
    pooled_burst(&pool, &url, 0, 2).await;
    let reqs = vec![payment(&url, "again-0", "t"), payment(&url, "again-1", "t")];
    let report = pool
        .burst_for_target(&reqs, &opts(), true, &|| {})
        .await
        .unwrap();
    for r in &report.responses {
        let resp = r.result.as_ref().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((resp.status, resp.version), (200, http::Version::HTTP_2));
        let why = &r
            .resent
            .as_ref()
            .expect("the response says it was sent again")
            .why;
        assert!(
            why.starts_with("sent again on a new connection: the kept-alive connection was closed by the server while idle (no byte received"),
            "{why}"
        );
    }
    assert_connections(&pool, &accepted, 3);
}

/// A burst on a new HTTP/2 connection that the server drops before answering is not sent
/// again: on a new connection that is the server's own doing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_h2_connection_closed_under_a_burst_is_not_sent_again() {
    let (url, accepted) = h2c_scripted(|_, _| Act::Close);
    let pool = Pool::new(Default::default(), 4);
    let reqs = vec![payment(&url, "once", "t")];
    let report = pool
        .burst_for_target(&reqs, &opts(), true, &|| {})
        .await
        .unwrap();
    let r = &report.responses[0];
    let err = r.result.as_ref().unwrap_err();
    assert_eq!(
        err,
        &HttpError::ClosedBeforeAnyByte(
            "the server closed the HTTP/2 connection before the response".into()
        )
    );
    assert!(r.resent.is_none());
    assert_connections(&pool, &accepted, 1);
}

/// A stream on a kept HTTP/2 connection that received its response head before the server
/// dropped the connection is not sent again: part of an answer came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_h2_stream_that_received_a_head_is_not_sent_again() {
    let (url, accepted) = h2c_scripted(|c, n| match (c, n) {
        (0, 1..) => Act::Partial,
        _ => Act::Answer,
    });
    let pool = Pool::new(Default::default(), 4);
    pooled_burst(&pool, &url, 0, 1).await;
    let reqs = vec![payment(&url, "partial", "t")];
    let report = pool
        .burst_for_target(&reqs, &opts(), true, &|| {})
        .await
        .unwrap();
    let r = &report.responses[0];
    let err = r.result.as_ref().unwrap_err();
    assert_eq!(
        err,
        &HttpError::ClosedMidResponse(
            "the server closed the HTTP/2 connection before the response".into()
        )
    );
    assert!(r.resent.is_none());
    assert_connections(&pool, &accepted, 1);
}
