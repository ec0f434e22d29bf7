//! The evidence is what was sent: an echo listener on 127.0.0.1 records the raw head of every
//! request it gets, and for every HTTP/1.1 transport (the ordinary client, the raw client, a
//! dropped request, the burst engine) the request line and every header line it received,
//! byte for byte in names and values and in order, are the recorded request's. Over HTTP/2 (the
//! ordinary client with ALPN `h2`, the single-packet burst) an h2 server's decoded fields are
//! the record's, in order; names are lower-case there by the protocol (RFC 9113 §8.2.1), and
//! the authority is recorded as `host`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem_check::http::burst::{burst, BurstOptions};
use idem_check::http::client::Client;
use idem_check::http::exchange::{Header, SentRequest};
use idem_check::http::{raw, Connector, Request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const LIMIT: Duration = Duration::from_secs(5);

/// The raw heads an echo listener received, in arrival order.
type Heads = Arc<Mutex<Vec<Vec<u8>>>>;

/// Serves `http://127.0.0.1:PORT/`: every request (keep-alive honoured) is answered 200 with its
/// own raw head as the body, and its head is kept in the returned list.
async fn echo() -> (url::Url, Heads) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = url::Url::parse(&format!(
        "http://{}/pay?x=1",
        listener.local_addr().unwrap()
    ))
    .unwrap();
    let heads: Heads = Arc::default();
    let kept = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match tokio::time::timeout(LIMIT, conn.read(&mut chunk)).await {
                            Ok(Ok(n)) if n > 0 => {
                                buf.extend_from_slice(&chunk[..n]);
                                continue;
                            }
                            _ => return,
                        }
                    };
                    let head = buf[..end].to_vec();
                    kept.lock().unwrap().push(head.clone());
                    let body_len = content_length(&head);
                    while buf.len() < end + 4 + body_len {
                        match tokio::time::timeout(LIMIT, conn.read(&mut chunk)).await {
                            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                            _ => return,
                        }
                    }
                    buf.drain(..end + 4 + body_len);
                    let mut answer =
                        format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", head.len())
                            .into_bytes();
                    answer.extend_from_slice(&head);
                    if conn.write_all(&answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, heads)
}

fn content_length(head: &[u8]) -> usize {
    String::from_utf8_lossy(head)
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The head's lines after the request line, as bytes.
fn received_lines(head: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l).to_vec());
    let request_line = lines.next().unwrap_or_default();
    (request_line, lines.collect())
}

/// The recorded request's header lines as `name: value`.
fn recorded_lines(sent: &SentRequest) -> Vec<Vec<u8>> {
    sent.headers
        .iter()
        .map(|h| [h.name.as_bytes(), b": ", &h.value].concat())
        .collect()
}

/// Asserts that the head received is the recorded request, line for line.
fn assert_as_sent(transport: &str, head: &[u8], sent: &SentRequest) {
    let (request_line, lines) = received_lines(head);
    let url = url::Url::parse(&sent.url).unwrap();
    let target = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    assert_eq!(
        String::from_utf8_lossy(&request_line),
        format!("{} {target} HTTP/1.1", sent.method),
        "{transport}: request line"
    );
    let show = |l: &[Vec<u8>]| {
        l.iter()
            .map(|x| String::from_utf8_lossy(x).into_owned())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        show(&lines),
        show(&recorded_lines(sent)),
        "{transport}: the header lines received (left) are the ones recorded (right)"
    );
}

/// A request with mixed-case names, a credential and a body, as probes build them.
fn request(url: &url::Url) -> Request {
    Request {
        method: "POST".into(),
        url: url.clone(),
        headers: vec![
            Header::new("Authorization", "Bearer secret-token-123456"),
            Header::new("Content-Type", "application/json"),
            Header::new(
                "Idempotency-Key",
                "\"8e03978e-40d5-43e8-bc93-6894a57f9324\"",
            ),
            Header::new("X-Custom", "Value With  Spaces"),
        ],
        body: br#"{"amountCents":1250}"#.to_vec(),
    }
}

fn take(heads: &Heads) -> Vec<Vec<u8>> {
    std::mem::take(&mut *heads.lock().unwrap())
}

/// The ordinary client records user-agent, accept, host and content-length as they reached the
/// server, names as they went out, for a POST with a body and a GET without one.
#[tokio::test]
async fn the_ordinary_client_records_every_header_it_sent() {
    let (url, heads) = echo().await;
    let client = Client::new(Arc::new(Connector::default()), LIMIT, 64 * 1024).unwrap();
    let get = Request::get(&url, &request(&url).headers);
    for req in [request(&url), get] {
        let (sent, response) = client.send(&req).await;
        let body = response.result.expect("the echo answers").body;
        let got = take(&heads);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0], body, "the echo answered with the head it recorded");
        assert_as_sent("ordinary client", &got[0], &sent);
        for name in ["user-agent", "accept", "host"] {
            assert!(
                sent.headers
                    .iter()
                    .any(|h| h.name.eq_ignore_ascii_case(name)),
                "{name} is in the record"
            );
        }
    }
}

/// The raw client writes exactly its record, whether it reads the answer or drops it.
#[tokio::test]
async fn the_raw_client_records_every_header_it_sent() {
    let (url, heads) = echo().await;
    let connector = Connector::default();
    let sent = request(&url).prepare();
    let r = raw::send_one(&connector, &sent, LIMIT, 64 * 1024).await;
    assert!(r.result.is_ok());
    assert_as_sent("raw", &take(&heads)[0], &sent);

    let r = raw::send_then_drop(&connector, &sent, Duration::from_millis(1), LIMIT).await;
    assert_eq!(r.result.unwrap_err(), idem_check::http::HttpError::Dropped);
    // The listener keeps the head before answering; wait for it, bounded.
    let deadline = tokio::time::Instant::now() + LIMIT;
    while heads.lock().unwrap().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_as_sent("raw, dropped", &take(&heads)[0], &sent);
}

/// Every member of an HTTP/1.1 burst reaches the server as recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_records_every_header_it_sent() {
    let (url, heads) = echo().await;
    let reqs: Vec<SentRequest> = (0..3).map(|_| request(&url).prepare()).collect();
    let report = burst(&Connector::default(), &reqs, &BurstOptions::default())
        .await
        .unwrap();
    assert!(report.responses.iter().all(|r| r.result.is_ok()));
    let got = take(&heads);
    assert_eq!(got.len(), 3);
    for (head, sent) in got.iter().zip(&report.requests) {
        assert_as_sent("burst", head, sent);
    }
}

/// The fields of each HTTP/2 request an h2 server got, the authority first as `host`.
type Fields = Arc<Mutex<Vec<Vec<(String, Vec<u8>)>>>>;

/// An HTTP/2 server over TLS (ALPN `h2`) on 127.0.0.1 that keeps the fields of every request
/// it decodes and answers 200; its `https://localhost:PORT/pay` URL.
async fn h2_echo() -> (url::Url, Fields) {
    use crate::common::tls::test_acceptor;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = test_acceptor(&[b"h2"]);
    let received: Fields = Arc::default();
    let kept = received.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let (acceptor, kept) = (acceptor.clone(), kept.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(s).await else {
                    return;
                };
                let Ok(mut conn) = h2::server::handshake(tls).await else {
                    return;
                };
                while let Some(Ok((req, mut respond))) = conn.accept().await {
                    let authority = req.uri().authority().map(|a| a.to_string());
                    let mut fields = vec![(
                        "host".to_string(),
                        authority.unwrap_or_default().into_bytes(),
                    )];
                    fields.extend(
                        req.headers()
                            .iter()
                            .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec())),
                    );
                    kept.lock().unwrap().push(fields);
                    let resp = http::Response::builder().status(200).body(()).unwrap();
                    let _ = respond.send_response(resp, true);
                }
            });
        }
    });
    let url = url::Url::parse(&format!("https://localhost:{port}/pay")).unwrap();
    (url, received)
}

/// The recorded fields of `sent`, as (name, value).
fn fields(sent: &SentRequest) -> Vec<(String, Vec<u8>)> {
    sent.headers
        .iter()
        .map(|h| (h.name.clone(), h.value.clone()))
        .collect()
}

/// Over TLS with ALPN `h2`, the ordinary client and the HTTP/2 burst speak HTTP/2: the record
/// is the fields the server decoded, the authority first as `host`, every name lower-cased as
/// HTTP/2 requires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_h2_the_record_is_every_field_sent() {
    use crate::common::tls::trusting_test_cert;
    let (url, received) = h2_echo().await;
    let connector = Arc::new(trusting_test_cert());
    let client = Client::new(connector.clone(), LIMIT, 64 * 1024).unwrap();
    let (sent, response) = client.send(&request(&url)).await;
    let response = response.result.expect("the h2 server answers");
    assert_eq!(response.version, http::Version::HTTP_2);
    let got = std::mem::take(&mut *received.lock().unwrap());
    assert_eq!(got, [fields(&sent)], "ordinary client over h2");

    let reqs: Vec<SentRequest> = (0..3).map(|_| request(&url).prepare()).collect();
    let opts = BurstOptions::default();
    let report = idem_check::http::h2burst::burst_for_target(&connector, &reqs, &opts, false)
        .await
        .unwrap();
    assert!(report.responses.iter().all(|r| r.result.is_ok()));
    let got = std::mem::take(&mut *received.lock().unwrap());
    assert_eq!(got.len(), 3);
    for (g, sent) in got.iter().zip(&report.requests) {
        assert_eq!(*g, fields(sent), "h2 burst");
    }
}
