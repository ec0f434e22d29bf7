//! The raw client and the burst engine against loopback listeners that record what arrived.
//!
//! Every listener binds 127.0.0.1:0 and every wait is bounded, so a broken engine fails a test
//! instead of hanging it.

use crate::common;

use std::time::{Duration, Instant};

use common::tls::{test_acceptor, trusting_test_cert};
use idem_check::http::burst::{burst, BurstOptions};
use idem_check::http::exchange::{Header, SentRequest};
use idem_check::http::release::{release_threads_available, ReleaseMode};
use idem_check::http::{h1, raw, Connector, HttpError, Phase};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

const LIMIT: Duration = Duration::from_secs(5);

/// What a test server saw on one connection: the bytes, when all but the last byte had arrived,
/// and when the request was complete.
#[derive(Debug, Clone)]
struct Seen {
    bytes: Vec<u8>,
    prefix_done: Option<Instant>,
    complete: Instant,
}

/// Reads one request (head plus Content-Length body), stamping when all but its last byte had
/// arrived and when it was complete.
async fn read_request<S: AsyncRead + Unpin>(s: &mut S) -> Seen {
    let mut bytes = Vec::new();
    let mut prefix_done = None;
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(total) = request_len(&bytes) {
            if prefix_done.is_none() && bytes.len() + 1 >= total {
                prefix_done = Some(Instant::now());
            }
            if bytes.len() >= total {
                break;
            }
        }
        match tokio::time::timeout(LIMIT, s.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => bytes.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    Seen {
        bytes,
        prefix_done,
        complete: Instant::now(),
    }
}

fn request_len(bytes: &[u8]) -> Option<usize> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
    let body = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    Some(end + body)
}

/// Reads until the end of a request head (no body expected).
async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    while !bytes.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout(LIMIT, s.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => bytes.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    bytes
}

/// A one-shot server: answers the first request with `response` and closes.
async fn canned(response: &'static [u8]) -> url::Url {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = url::Url::parse(&format!("http://{}/r", listener.local_addr().unwrap())).unwrap();
    tokio::spawn(async move {
        if let Ok(Ok((mut s, _))) = tokio::time::timeout(LIMIT, listener.accept()).await {
            read_head(&mut s).await;
            let _ = s.write_all(response).await;
        }
    });
    url
}

fn get(url: &url::Url) -> SentRequest {
    h1::prepare(url, "GET", vec![], vec![])
}

#[tokio::test]
async fn send_one_puts_exact_bytes_on_the_wire() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = url::Url::parse(&format!(
        "http://{}/api/payments?x=1",
        listener.local_addr().unwrap()
    ))
    .unwrap();
    let req = h1::prepare(
        &url,
        "POST",
        vec![
            Header::new("Idempotency-Key", b"\"a\x01b\"".to_vec()),
            Header::new("Idempotency-Key", "\"ключ\""),
            Header::new("X-Raw", vec![0xff, b'\t', 0x7f]),
        ],
        b"{}".to_vec(),
    );
    let wire = h1::to_wire(&req).unwrap();
    let expected_len = wire.len();
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let seen = read_request(&mut s).await;
        assert_eq!(seen.bytes.len(), expected_len);
        s.write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\nX-A: 1\r\nX-A: 2\r\n\r\nok")
            .await
            .unwrap();
        seen.bytes
    });
    let r = raw::send_one(&Connector::default(), &req, LIMIT, 1024).await;
    let resp = r.result.unwrap();
    assert_eq!(resp.status, 201);
    assert_eq!(resp.body, b"ok");
    assert_eq!(resp.version, http::Version::HTTP_11);
    let a: Vec<_> = resp.headers.iter().filter(|h| h.name == "X-A").collect();
    assert_eq!(a.len(), 2, "duplicate response headers are kept");
    let got = server.await.unwrap();
    assert_eq!(got, wire, "the server received exactly the recorded bytes");
    let mut expected = format!(
        "POST /api/payments?x=1 HTTP/1.1\r\nHost: {}\r\n",
        url.authority()
    )
    .into_bytes();
    expected.extend_from_slice(b"Idempotency-Key: \"a\x01b\"\r\n");
    expected.extend_from_slice("Idempotency-Key: \"ключ\"\r\n".as_bytes());
    expected.extend_from_slice(b"X-Raw: \xff\t\x7f\r\nContent-Length: 2\r\n\r\n{}");
    assert_eq!(got, expected);
    assert!(r.started <= r.finished);
}

#[tokio::test]
async fn chunked_response_is_dechunked() {
    let url = canned(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n",
    )
    .await;
    let resp = raw::send_one(&Connector::default(), &get(&url), LIMIT, 1024)
        .await
        .result
        .unwrap();
    assert_eq!(resp.body, b"hello world");
    assert!(!resp.body_truncated);
}

#[tokio::test]
async fn close_delimited_response_reads_to_eof() {
    let url = canned(b"HTTP/1.0 200 OK\r\n\r\nuntil the end").await;
    let resp = raw::send_one(&Connector::default(), &get(&url), LIMIT, 1024)
        .await
        .result
        .unwrap();
    assert_eq!(resp.body, b"until the end");
    assert_eq!(resp.version, http::Version::HTTP_10);
}

#[tokio::test]
async fn interim_responses_are_skipped() {
    let url = canned(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 409 Conflict\r\nContent-Length: 3\r\n\r\nnope",
    )
    .await;
    let resp = raw::send_one(&Connector::default(), &get(&url), LIMIT, 1024)
        .await
        .result
        .unwrap();
    assert_eq!(resp.status, 409);
    assert_eq!(resp.body, b"nop", "only Content-Length bytes are the body");
}

#[tokio::test]
async fn oversized_bodies_are_capped() {
    let url = canned(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789").await;
    let resp = raw::send_one(&Connector::default(), &get(&url), LIMIT, 4)
        .await
        .result
        .unwrap();
    assert_eq!(resp.body, b"0123");
    assert!(resp.body_truncated);

    let url = canned(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n",
    )
    .await;
    let resp = raw::send_one(&Connector::default(), &get(&url), LIMIT, 4)
        .await
        .result
        .unwrap();
    assert_eq!(resp.body, b"abcd");
    assert!(resp.body_truncated);

    let url = canned(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n0123456789").await;
    let resp = raw::send_one(&Connector::default(), &get(&url), LIMIT, 4)
        .await
        .result
        .unwrap();
    assert_eq!(resp.body, b"0123");
    assert!(resp.body_truncated);
}

#[tokio::test]
async fn head_and_no_content_have_no_body() {
    let url = canned(b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n").await;
    let resp = raw::send_one(&Connector::default(), &get(&url), LIMIT, 1024)
        .await
        .result
        .unwrap();
    assert_eq!(resp.status, 204);
    assert!(resp.body.is_empty());
}

#[tokio::test]
async fn refused_connection_gives_a_clear_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let url = url::Url::parse(&format!("http://{addr}/")).unwrap();
    let err = raw::send_one(&Connector::default(), &get(&url), LIMIT, 1024)
        .await
        .result
        .unwrap_err();
    assert_eq!(
        err,
        HttpError::Connect(format!("connection refused to {addr}"))
    );
}

#[tokio::test]
async fn silent_server_times_out_waiting_for_the_head() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = url::Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
    // The server reads the request and then says nothing until the client has given up: only
    // the client's own timeout can end the exchange.
    let (gave_up, given_up) = tokio::sync::oneshot::channel::<()>();
    let hold = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        read_head(&mut s).await;
        let _ = given_up.await;
    });
    let r = tokio::time::timeout(
        LIMIT,
        raw::send_one(
            &Connector::default(),
            &get(&url),
            Duration::from_millis(200),
            1024,
        ),
    )
    .await
    .expect("the client's timeout ended the exchange");
    let err = r.result.unwrap_err();
    assert_eq!(
        err,
        HttpError::Timeout {
            phase: Phase::FirstByte,
            after: Duration::from_millis(200)
        }
    );
    assert_eq!(
        err.to_string(),
        "timed out after 200 ms waiting for the response head"
    );
    drop(gave_up);
    hold.await.unwrap();
}

#[tokio::test]
async fn truncated_response_is_an_error_not_a_panic() {
    let url = canned(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc").await;
    let err = raw::send_one(&Connector::default(), &get(&url), LIMIT, 1024)
        .await
        .result
        .unwrap_err();
    assert_eq!(
        err,
        HttpError::ClosedMidResponse("connection closed after 3 of 10 body bytes".into())
    );
    let url = canned(b"garbage\r\n\r\n").await;
    let err = raw::send_one(&Connector::default(), &get(&url), LIMIT, 1024)
        .await
        .result
        .unwrap_err();
    assert!(
        matches!(&err, HttpError::MalformedHttp1(why) if why.starts_with("malformed response head")),
        "{err:?}"
    );
}

#[tokio::test]
async fn send_then_drop_closes_without_reading() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = url::Url::parse(&format!("http://{}/p", listener.local_addr().unwrap())).unwrap();
    let req = h1::prepare(&url, "POST", vec![], b"body".to_vec());
    let len = h1::to_wire(&req).unwrap().len();
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let seen = read_request(&mut s).await;
        // Answer, then see the client go away without ever reading it.
        let _ = s
            .write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
            .await;
        let mut rest = [0u8; 16];
        let closed = matches!(
            tokio::time::timeout(LIMIT, s.read(&mut rest)).await,
            Ok(Ok(0)) | Ok(Err(_))
        );
        (seen.bytes.len(), closed)
    });
    let r = raw::send_then_drop(
        &Connector::default(),
        &req,
        Duration::from_millis(50),
        LIMIT,
    )
    .await;
    assert!(
        matches!(r.result, Err(idem_check::http::HttpError::Dropped)),
        "{r:?}"
    );
    let (got, closed) = server.await.unwrap();
    assert_eq!(got, len, "the whole request was written before the drop");
    assert!(closed, "the connection was closed");
}

/// A plain HTTP/1.1 server for bursts: each connection reads one request of `len` bytes and
/// answers with its `X-N` header value as the body.
async fn burst_server(n: usize) -> (url::Url, tokio::task::JoinHandle<Vec<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = url::Url::parse(&format!("http://{}/pay", listener.local_addr().unwrap())).unwrap();
    let handle = tokio::spawn(async move {
        let mut conns = Vec::new();
        for _ in 0..n {
            let Ok(Ok((s, _))) = tokio::time::timeout(LIMIT, listener.accept()).await else {
                break;
            };
            conns.push(tokio::spawn(serve_one(s)));
        }
        let mut seen = Vec::new();
        for c in conns {
            seen.push(c.await.unwrap());
        }
        seen
    });
    (url, handle)
}

async fn serve_one<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) -> Seen {
    let seen = read_request(&mut s).await;
    let text = String::from_utf8_lossy(&seen.bytes).into_owned();
    let n = text
        .lines()
        .find_map(|l| l.strip_prefix("X-N: "))
        .unwrap_or("?")
        .to_string();
    let resp = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{n}", n.len());
    let _ = s.write_all(resp.as_bytes()).await;
    let _ = s.flush().await;
    seen
}

fn burst_requests(url: &url::Url, n: usize) -> Vec<SentRequest> {
    (0..n)
        .map(|i| {
            h1::prepare(
                url,
                "POST",
                vec![
                    Header::new("Idempotency-Key", "\"same-key\""),
                    Header::new("X-N", format!("{i:02}")),
                ],
                br#"{"amountCents":1250}"#.to_vec(),
            )
        })
        .collect()
}

fn assert_held_back(seen: &[Seen], n: usize) {
    assert_eq!(seen.len(), n);
    let last_staged = seen.iter().filter_map(|s| s.prefix_done).max().unwrap();
    let first_final = seen.iter().map(|s| s.complete).min().unwrap();
    assert!(
        last_staged < first_final,
        "a final byte arrived before every connection was staged"
    );
}

#[tokio::test]
async fn burst_holds_final_bytes_until_all_are_staged() {
    let n = 8;
    let (url, server) = burst_server(n).await;
    let reqs = burst_requests(&url, n);
    let report = burst(&Connector::default(), &reqs, &BurstOptions::default())
        .await
        .unwrap();
    for (i, r) in report.responses.iter().enumerate() {
        let resp = r.result.as_ref().unwrap();
        assert_eq!(
            resp.body,
            format!("{i:02}").as_bytes(),
            "responses keep input order"
        );
        assert!(r.released.is_some());
    }
    let seen = server.await.unwrap();
    for s in &seen {
        assert!(
            reqs.iter().any(|r| h1::to_wire(r).unwrap() == s.bytes),
            "every request arrived byte for byte"
        );
    }
    assert_held_back(&seen, n);
    assert!(report.spread_us >= 0.0 && report.spread_us < 1e6);
}

/// Where the release threads can be raised, the release runs on both and says how they were
/// scheduled; where they cannot, it runs on one thread and says why. Other tests' bursts can
/// hold the threads for a moment, so a few bursts are allowed to find them taken.
#[tokio::test]
async fn burst_releases_from_the_release_threads_when_they_run() {
    let opts = BurstOptions {
        final_bytes: 3,
        ..BurstOptions::default()
    };
    let mut modes = Vec::new();
    for _ in 0..10 {
        let (url, server) = burst_server(6).await;
        let report = burst(&Connector::default(), &burst_requests(&url, 6), &opts)
            .await
            .unwrap();
        assert!(report.responses.iter().all(|r| r.result.is_ok()));
        assert_eq!(server.await.unwrap().len(), 6, "every request arrived");
        let parallel = matches!(
            report.release,
            ReleaseMode::Threads {
                threads: 2,
                scheduling: Some(_),
                why_not: None
            }
        );
        modes.push(report.release.to_string());
        if parallel || release_threads_available().is_err() {
            break;
        }
    }
    let last = modes.last().unwrap();
    match release_threads_available() {
        Ok(s) => assert_eq!(last, &format!("from 2 {} threads", s.label()), "{modes:?}"),
        Err(why) => assert_eq!(last, &format!("from 1 thread ({why})")),
    }
}

#[tokio::test]
async fn burst_without_release_threads_releases_from_the_calling_thread() {
    let (url, server) = burst_server(4).await;
    let opts = BurstOptions {
        release_threads: false.into(),
        ..BurstOptions::default()
    };
    let report = burst(&Connector::default(), &burst_requests(&url, 4), &opts)
        .await
        .unwrap();
    assert!(report.responses.iter().all(|r| r.result.is_ok()));
    assert_eq!(server.await.unwrap().len(), 4);
    assert_eq!(
        report.release.to_string(),
        "from 1 thread (--no-release-threads)"
    );
}

#[tokio::test]
async fn burst_and_send_one_work_over_tls() {
    let connector = trusting_test_cert();
    let n = 4;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = url::Url::parse(&format!("https://{}/pay", listener.local_addr().unwrap())).unwrap();
    let len = h1::to_wire(&burst_requests(&url, 1)[0]).unwrap().len();
    let acceptor = test_acceptor(&[]);
    let server = tokio::spawn(async move {
        let mut conns = Vec::new();
        for _ in 0..n + 1 {
            let Ok(Ok((s, _))) = tokio::time::timeout(LIMIT, listener.accept()).await else {
                break;
            };
            let acceptor = acceptor.clone();
            conns.push(tokio::spawn(async move {
                let tls = acceptor.accept(s).await.unwrap();
                serve_one(tls).await
            }));
        }
        let mut seen = Vec::new();
        for c in conns {
            seen.push(c.await.unwrap());
        }
        seen
    });
    let reqs = burst_requests(&url, n);
    let report = burst(&connector, &reqs, &BurstOptions::default())
        .await
        .unwrap();
    for (i, r) in report.responses.iter().enumerate() {
        let resp = r.result.as_ref().unwrap();
        assert_eq!(resp.body, format!("{i:02}").as_bytes());
    }
    let single = raw::send_one(&connector, &burst_requests(&url, 1)[0], LIMIT, 1024).await;
    assert_eq!(single.result.unwrap().body, b"00");
    let seen = server.await.unwrap();
    assert_held_back(&seen[..n], n);
    for s in &seen {
        assert_eq!(s.bytes.len(), len, "the request arrived whole over TLS");
    }
}

/// The certificate names localhost and 127.0.0.1 only, so 127.0.0.2 fails verification even
/// for a connector that trusts it.
#[tokio::test]
async fn wrong_certificate_name_fails_the_handshake_clearly() {
    let listener = TcpListener::bind("127.0.0.2:0").await.unwrap();
    let url = url::Url::parse(&format!("https://{}/", listener.local_addr().unwrap())).unwrap();
    let acceptor = test_acceptor(&[]);
    tokio::spawn(async move {
        if let Ok(Ok((s, _))) = tokio::time::timeout(LIMIT, listener.accept()).await {
            let _ = acceptor.accept(s).await;
        }
    });
    let err = raw::send_one(&trusting_test_cert(), &get(&url), LIMIT, 1024)
        .await
        .result
        .unwrap_err();
    assert!(matches!(err, HttpError::Tls(_)), "{err:?}");
    assert!(
        err.to_string().starts_with("TLS handshake failed: "),
        "{err}"
    );
}
