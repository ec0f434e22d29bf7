//! A test server on 127.0.0.1 whose every answer is scripted per connection and request: how
//! the transports' tests make a server close a kept connection under a request, close a new
//! one, or stop in the middle of an answer, at a moment the test decides, without timers.

use std::io::{Read as _, Write as _};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the test server does with one request.
#[derive(Clone, Copy)]
pub(crate) enum Act {
    /// Answers 200 and keeps the connection.
    Answer,
    /// Closes the connection without a byte, as an idle timeout crossing the request does.
    Close,
    /// Sends a head and part of the body, then closes.
    Partial,
}

/// A listener on an ephemeral port whose `act(connection, request)` (both counted from 0)
/// says what it does with each request; returns its URL and how many connections it
/// accepted.
pub(crate) fn server(act: fn(usize, usize) -> Act) -> (url::Url, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = url::Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(8) {
            let Ok(mut conn) = conn else { return };
            let c = count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                let mut r = 0;
                while let Ok(n @ 1..) = conn.read(&mut chunk) {
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        let bytes: &[u8] = match act(c, r) {
                            Act::Answer => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                            Act::Close => return,
                            Act::Partial => b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok",
                        };
                        conn.write_all(bytes).unwrap();
                        if matches!(act(c, r), Act::Partial) {
                            return;
                        }
                        r += 1;
                    }
                }
            });
        }
    });
    (url, accepted)
}
