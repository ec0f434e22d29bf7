//! The HTTP/2 side of the single-packet burst (src/http/h2burst/): the server's frames —
//! SETTINGS, PING, WINDOW_UPDATE, GOAWAY, RST_STREAM, HEADERS with HPACK blocks, CONTINUATION,
//! DATA — or a peer that is not HTTP/2 at all, through the public `h2burst::burst` over a real
//! h2c connection on 127.0.0.1.
//!
//! Input: byte 0 picks how many duplicates the burst sends (1 to 3) and the body cap; the rest
//! is every byte the server writes before it closes its side (it reads whatever the client
//! sends, so nothing is reset). Checks: one answer per request; an error says what went wrong; an
//! answer is HTTP/2, its body never longer than the cap and cut exactly at it when marked.
#![no_main]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use idem_check::http::burst::BurstOptions;
use idem_check::http::h1::prepare;
use idem_check::http::net::NetOptions;
use idem_check::http::release::Releasers;
use idem_check::http::tls::TlsOptions;
use idem_check::http::{h2burst, Connector};
use idem_check_fuzz::{assert_names, runtime};
use libfuzzer_sys::fuzz_target;

/// What the server writes on its next connection.
static SCRIPT: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// The server's address: one listener for the whole run, one thread per connection.
fn server() -> &'static url::Url {
    static URL: OnceLock<url::Url> = OnceLock::new();
    URL.get_or_init(|| {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let url = format!(
            "http://{}/pay",
            listener.local_addr().expect("local address")
        );
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let script = SCRIPT.lock().expect("script").clone();
                std::thread::spawn(move || {
                    let _ = conn.write_all(&script);
                    let _ = conn.shutdown(Shutdown::Write);
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(20)));
                    let mut sink = [0u8; 16 * 1024];
                    while matches!(conn.read(&mut sink), Ok(1..)) {}
                });
            }
        });
        url::Url::parse(&url).expect("a URL")
    })
}

fn connector() -> &'static Connector {
    static CONNECTOR: OnceLock<Connector> = OnceLock::new();
    CONNECTOR.get_or_init(|| {
        Connector::new(&TlsOptions::default(), &NetOptions::default()).expect("a connector")
    })
}

const CAPS: [usize; 4] = [0, 5, 100, 1024 * 1024];

fuzz_target!(|data: &[u8]| {
    let [mode, script @ ..] = data else {
        return;
    };
    let url = server();
    *SCRIPT.lock().expect("script") = script.to_vec();
    let n = usize::from(mode % 3) + 1;
    let cap = CAPS[usize::from(mode >> 2) % CAPS.len()];
    let reqs: Vec<_> = (0..n)
        .map(|_| {
            prepare(
                url,
                "POST",
                vec![idem_check::http::exchange::Header::new(
                    "Idempotency-Key",
                    "\"k\"",
                )],
                b"{\"amountCents\":1}".to_vec(),
            )
        })
        .collect();
    let opts = BurstOptions {
        timeout: Duration::from_secs(5),
        max_body: cap,
        release_threads: Releasers::Caller("fuzzing"),
        settle_floor: Duration::ZERO,
        ..BurstOptions::default()
    };
    let report = runtime()
        .block_on(h2burst::burst(connector(), &reqs, &opts))
        .expect("a burst of well-formed requests runs");
    assert_eq!(report.responses.len(), n, "one answer per request");
    for r in &report.responses {
        match &r.result {
            Ok(answer) => {
                assert_eq!(answer.version, http::Version::HTTP_2);
                assert!(answer.body.len() <= cap, "body over the cap");
                if answer.body_truncated {
                    assert_eq!(answer.body.len(), cap, "a cut body is cut at the cap");
                }
            }
            Err(error) => assert_names(&error.to_string(), ""),
        }
    }
});
