//! A server that streams a body without end: what each client keeps of it is the run's kept
//! cap, marked cut, and the exchange ends once that much arrived, whatever the framing (a 1 GiB
//! `Content-Length`, endless chunks, a length of a petabyte). The counts are of kept bytes, not
//! of time, so the test is the same on a loaded machine.

use std::sync::Arc;
use std::time::Duration;

use idem_check::config::RunOptions;
use idem_check::http::{client::Client, raw, Connector, Request};
use idem_check::report::format::kept_body_bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How the server frames its endless body.
#[derive(Clone, Copy, Debug)]
enum Framing {
    /// `Content-Length: 1073741824`, then that many bytes.
    GibLength,
    /// `Transfer-Encoding: chunked`, 64 KiB chunks forever.
    EndlessChunks,
    /// `Content-Length: 1000000000000000`, bytes forever.
    HugeLength,
}

/// A server that answers every request with `framing`'s endless body until the client hangs
/// up.
async fn endless(framing: Framing) -> url::Url {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if tcp.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let (head, chunk): (&[u8], Vec<u8>) = match framing {
                    Framing::GibLength => (
                        b"HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n",
                        vec![b'x'; 64 * 1024],
                    ),
                    Framing::EndlessChunks => (
                        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                        [&b"10000\r\n"[..], &[b'x'; 64 * 1024], b"\r\n"].concat(),
                    ),
                    Framing::HugeLength => (
                        b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000000\r\n\r\n",
                        vec![b'x'; 64 * 1024],
                    ),
                };
                if tcp.write_all(head).await.is_err() {
                    return;
                }
                // 1 GiB at most: the client must have stopped long before.
                for _ in 0..16 * 1024 {
                    if tcp.write_all(&chunk).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}/payments").parse().expect("url")
}

const FRAMINGS: [Framing; 3] = [
    Framing::GibLength,
    Framing::EndlessChunks,
    Framing::HugeLength,
];

/// A run keeps as much of a body as the report that shows most: 16 KiB by default, more only
/// when `--max-body-bytes` asks for more.
#[test]
fn a_run_keeps_what_the_largest_report_shows() {
    assert_eq!(kept_body_bytes(None), 16 * 1024);
    assert_eq!(kept_body_bytes(Some(100)), 16 * 1024);
    assert_eq!(kept_body_bytes(Some(1 << 20)), 1 << 20);
    let suite = idem_check::catalog::load_suite(idem_check::suite::DEFAULT_SUITE)
        .expect("the default suite");
    assert_eq!(RunOptions::new(suite).kept_body, 16 * 1024);
}

#[tokio::test]
async fn the_ordinary_client_keeps_the_cap_of_an_endless_body() {
    let kept = kept_body_bytes(None);
    let client = Client::new(Arc::default(), Duration::from_secs(20), kept).expect("client");
    for framing in FRAMINGS {
        let url = endless(framing).await;
        let (_, raw) = client.send(&Request::get(&url, &[])).await;
        let response = raw.result.expect("a response");
        assert_eq!(response.status, 200, "{framing:?}");
        assert_eq!(response.body.len(), kept, "{framing:?}: bytes kept");
        assert!(response.body_truncated, "{framing:?}: the cut is recorded");
    }
}

#[tokio::test]
async fn the_raw_client_keeps_the_cap_of_an_endless_body() {
    let kept = kept_body_bytes(None);
    let connector = Connector::default();
    for framing in FRAMINGS {
        let url = endless(framing).await;
        let sent = Request::get(&url, &[]).prepare();
        let raw = raw::send_one(&connector, &sent, Duration::from_secs(20), kept).await;
        let response = raw.result.expect("a response");
        assert_eq!(response.status, 200, "{framing:?}");
        assert_eq!(response.body.len(), kept, "{framing:?}: bytes kept");
        assert!(response.body_truncated, "{framing:?}: the cut is recorded");
    }
}
