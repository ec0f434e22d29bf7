//! The HTTP/1.1 response reader (src/http/h1/response.rs): status line, headers,
//! Content-Length, chunked bodies, interim responses and early close, fed in the splits the
//! input chooses.
//!
//! Input: byte 0 picks the method (odd: HEAD) and the body cap; byte 1 is how many of the next
//! bytes choose the read sizes; the rest is what the server sends before it closes.
//! Checks: an error says what went wrong; a body is never longer than the cap, and cut exactly at it
//! when marked truncated; a connection said reusable had an HTTP/1.1 answer read whole; and a
//! response read strictly, written again with a Content-Length, reads back the same.
#![no_main]

use std::time::Duration;

use idem_check::http::exchange::{Header, ReceivedResponse};
use idem_check::http::h1::read_response_from;
use idem_check_fuzz::{assert_names, runtime, Split};
use libfuzzer_sys::fuzz_target;

const CAPS: [usize; 4] = [0, 7, 64, 1024 * 1024];

fn read(
    bytes: &[u8],
    seed: &[u8],
    method: &str,
    cap: usize,
) -> Result<(ReceivedResponse, bool), String> {
    let mut source = Split::new(bytes, seed);
    runtime()
        .block_on(read_response_from(
            &mut source,
            method,
            Duration::from_secs(10),
            cap,
        ))
        .map_err(|e| e.to_string())
}

/// The response as a server would write it with a Content-Length.
fn rewrite(r: &ReceivedResponse) -> Vec<u8> {
    let minor = if r.version == http::Version::HTTP_10 {
        0
    } else {
        1
    };
    let mut out = format!("HTTP/1.{minor} {:03} X\r\n", r.status).into_bytes();
    for h in framing_free(&r.headers) {
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(&h.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", r.body.len()).as_bytes());
    out.extend_from_slice(&r.body);
    out
}

fn framing_free(headers: &[Header]) -> Vec<&Header> {
    headers
        .iter()
        .filter(|h| {
            !h.name.eq_ignore_ascii_case("content-length")
                && !h.name.eq_ignore_ascii_case("transfer-encoding")
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let [mode, seeds, rest @ ..] = data else {
        return;
    };
    let seeds = usize::from(*seeds % 16).min(rest.len());
    let (seed, bytes) = rest.split_at(seeds);
    let method = if mode & 1 == 1 { "HEAD" } else { "GET" };
    let cap = CAPS[usize::from(mode >> 1) % CAPS.len()];
    let (response, reusable) = match read(bytes, seed, method, cap) {
        Ok(read) => read,
        Err(error) => return assert_names(&error, ""),
    };
    assert!(response.body.len() <= cap, "body over the cap");
    if response.body_truncated {
        assert_eq!(response.body.len(), cap, "a cut body is cut at the cap");
    }
    if reusable {
        assert!(!response.body_truncated && response.version == http::Version::HTTP_11);
    }
    if response.problem.is_some() || response.body_truncated {
        return;
    }
    let again = rewrite(&response);
    let (back, _) = read(&again, seed, method, cap)
        .unwrap_or_else(|e| panic!("a response read strictly does not read back: {e}"));
    assert_eq!(back.status, response.status);
    assert_eq!(back.version, response.version);
    assert_eq!(back.body, response.body);
    assert_eq!(framing_free(&back.headers), framing_free(&response.headers));
});
