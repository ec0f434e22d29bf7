//! The HTTP edge: slow clients are cut off within the configured timeouts, oversized and
//! malformed requests are refused before any body byte is read, every refusal as problem+json.

use std::time::{Duration, Instant};

use crate::common::{parse_response, start_on, Req, StoreKind, TestDb, TestServer, TIMEOUT};
use idem_reference_server::Limits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const LIMITS: Limits = Limits {
    header_read: Duration::from_millis(400),
    body_read: Duration::from_millis(400),
    idle: Duration::from_millis(800),
    max_connections: 1024,
};

/// How much later than its timeout a connection may be closed (scheduling on a loaded machine).
const SLACK: Duration = Duration::from_secs(3);

async fn server() -> (TestDb, TestServer) {
    let db = TestDb::new(StoreKind::Sqlite);
    let server = start_on(&db, |c| c.limits = LIMITS).await;
    (db, server)
}

/// Writes `bytes`, then reads until the server closes; returns what it sent and when it closed.
async fn send_and_wait_for_close(server: &TestServer, bytes: &[u8]) -> (Vec<u8>, Duration) {
    let mut tcp = TcpStream::connect(server.addr).await.expect("connect");
    let start = Instant::now();
    tcp.write_all(bytes).await.expect("write");
    let mut got = Vec::new();
    tokio::time::timeout(TIMEOUT, tcp.read_to_end(&mut got))
        .await
        .expect("the server never closed the connection")
        .expect("read");
    (got, start.elapsed())
}

#[tokio::test]
async fn an_incomplete_head_is_cut_off_after_the_header_read_timeout() {
    let (_dir, server) = server().await;
    let (got, took) = send_and_wait_for_close(
        &server,
        b"POST /api/payments HTTP/1.1\r\nHost: test\r\nX-A: ",
    )
    .await;
    assert!(
        got.is_empty() || got.starts_with(b"HTTP/1.1 408"),
        "{got:?}"
    );
    assert!(took >= LIMITS.header_read, "closed after {took:?}");
    assert!(took < LIMITS.header_read + SLACK, "closed after {took:?}");
    server.stop().await;
}

#[tokio::test]
async fn a_stalled_body_gets_408_and_is_cut_off_after_the_body_read_timeout() {
    let (_dir, server) = server().await;
    let head = b"POST /api/payments HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer token-a\r\n\
Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"amount";
    let (got, took) = send_and_wait_for_close(&server, head).await;
    let resp = parse_response(&got).expect("a response");
    resp.assert_problem(408);
    assert_eq!(resp.header("connection"), Some("close"));
    assert!(took >= LIMITS.body_read, "closed after {took:?}");
    assert!(took < LIMITS.body_read + SLACK, "closed after {took:?}");
    server.stop().await;
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_the_idle_timeout_and_kept_alive_before() {
    let (_dir, server) = server().await;
    let mut tcp = TcpStream::connect(server.addr).await.expect("connect");
    let start = Instant::now();
    // Two requests on one connection, the second after a pause shorter than the idle timeout.
    let mut last_sent = start;
    for pause in [LIMITS.idle / 4, Duration::ZERO] {
        last_sent = Instant::now();
        tcp.write_all(&Req::get("/healthz").to_bytes(false))
            .await
            .expect("write");
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(TIMEOUT, tcp.read(&mut buf))
            .await
            .expect("answer")
            .expect("read");
        assert!(
            buf[..n].starts_with(b"HTTP/1.1 200"),
            "{:?}",
            String::from_utf8_lossy(&buf[..n])
        );
        tokio::time::sleep(pause).await;
    }
    let mut rest = Vec::new();
    tokio::time::timeout(TIMEOUT, tcp.read_to_end(&mut rest))
        .await
        .expect("closed")
        .expect("read");
    // The idle clock starts once the last answer is ready, after the request was sent.
    let idle = last_sent.elapsed();
    assert!(rest.is_empty(), "{rest:?}");
    assert!(
        idle >= LIMITS.idle && idle < LIMITS.idle + SLACK,
        "closed {idle:?} after the last request"
    );
    assert!(start.elapsed() < TIMEOUT);
    server.stop().await;
}

#[tokio::test]
async fn a_declared_10_gib_body_gets_413_before_any_body_byte() {
    let (_dir, server) = server().await;
    let mut tcp = TcpStream::connect(server.addr).await.expect("connect");
    tcp.write_all(
        b"POST /api/payments HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer token-a\r\n\
Content-Type: application/json\r\nIdempotency-Key: \"k-10gib\"\r\nContent-Length: 10737418240\r\n\r\n",
    )
    .await
    .expect("write head");
    // No body byte is ever written: the answer must come anyway, well before any timeout.
    let mut got = Vec::new();
    tokio::time::timeout(LIMITS.body_read, tcp.read_to_end(&mut got))
        .await
        .expect("413 came only after the body timeout")
        .expect("read");
    let resp = parse_response(&got).expect("a response");
    resp.assert_problem(413);
    assert_eq!(resp.header("connection"), Some("close"));
    server.stop().await;
}

/// A valid payment request with its header lines replaced by `lines` (no Host added).
fn raw_payment(lines: &str) -> Vec<u8> {
    let body = r#"{"amountCents":100,"currency":"EUR","reference":"edge"}"#;
    format!(
        "POST /api/payments HTTP/1.1\r\n{lines}Authorization: Bearer token-a\r\n\
Idempotency-Key: \"edge-{}\"\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        uuid::Uuid::new_v4(),
        body.len()
    )
    .into_bytes()
}

#[tokio::test]
async fn host_and_content_type_must_appear_once_and_json_must_be_utf8() {
    let (_dir, server) = server().await;
    let json = "Content-Type: application/json\r\n";
    let cases = [
        (json.to_string(), 400, "no Host"),
        (
            format!("Host: a\r\nHost: b\r\n{json}"),
            400,
            "more than one Host",
        ),
        (
            format!("Host: a\r\n{json}Content-Type: text/plain\r\n"),
            400,
            "more than one Content-Type",
        ),
        (
            "Host: a\r\nContent-Type: application/json; charset=ISO-8859-1\r\n".to_string(),
            415,
            "UTF-8",
        ),
    ];
    for (lines, status, detail) in cases {
        let (got, _) = send_and_wait_for_close(&server, &raw_payment(&lines)).await;
        let resp = parse_response(&got).expect("a response");
        resp.assert_problem(status);
        assert!(resp.text().contains(detail), "{}", resp.text());
    }
    // The same request with one Host and a UTF-8 charset is created.
    let ok = raw_payment("Host: a\r\nContent-Type: application/json; charset=utf-8\r\n");
    let (got, _) = send_and_wait_for_close(&server, &ok).await;
    assert_eq!(parse_response(&got).expect("a response").status, 201);
    server.stop().await;
}
