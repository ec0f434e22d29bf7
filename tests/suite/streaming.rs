//! The terminal streams: each verdict is printed when its probe finishes, above the progress
//! bar, while later probes still run. The binary runs on a pseudo-terminal (so it draws the bar)
//! and every chunk it writes is timed.

use crate::common;

use std::fs::File;
use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::binary::{bin, wait_bounded};
use idem_check::reference::HOLD_AT_LEAST;
use nix::pty::{openpty, Winsize};

/// What the terminal received, chunk by chunk, with when.
fn run_on_pty(args: &[&str]) -> Vec<(Duration, String)> {
    let size = Winsize {
        ws_row: 40,
        ws_col: 160,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = openpty(&size, None).expect("a pseudo-terminal");
    let start = Instant::now();
    let mut child = {
        let slave = pty.slave;
        bin()
            .args(args)
            .env_remove("NO_COLOR")
            .env("TERM", "xterm")
            .stdin(Stdio::null())
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .spawn()
            .expect("the binary runs")
    };
    let mut master = File::from(pty.master);
    let reader = std::thread::spawn(move || {
        let mut chunks = Vec::new();
        let mut buf = [0u8; 4096];
        // Ends when the child's side closes (EIO on Linux); the child is bounded below.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            chunks.push((
                start.elapsed(),
                String::from_utf8_lossy(&buf[..n]).into_owned(),
            ));
        }
        chunks
    });
    wait_bounded(&mut child, Duration::from_secs(120));
    reader.join().unwrap()
}

/// When the text received so far first contains `needle`.
fn first_seen(chunks: &[(Duration, String)], needle: &str) -> Option<Duration> {
    let mut text = String::new();
    chunks.iter().find_map(|(t, c)| {
        text.push_str(c);
        text.contains(needle).then_some(*t)
    })
}

/// first-request's verdict is on the terminal while concurrent-duplicates is still running and
/// named on the bar; the summary comes last. concurrent-duplicates holds its original on the
/// reference server at least `HOLD_AT_LEAST`, so a streamed first verdict is at least that much
/// older than the second.
#[test]
fn verdicts_stream_while_later_probes_run() {
    let chunks = run_on_pty(&[
        "run",
        "--reference",
        "--probe",
        "first-request",
        "--probe",
        "concurrent-duplicates",
        "--color",
        "never",
    ]);
    let all: String = chunks.iter().map(|(_, c)| c.as_str()).collect();
    let verdict = first_seen(&chunks, "PASS          first-request").expect(&all);
    let summary = first_seen(&chunks, "2 probes:").expect(&all);
    let later = first_seen(&chunks, "PASS          concurrent-duplicates").expect(&all);
    assert!(
        verdict + HOLD_AT_LEAST < later && later <= summary,
        "first verdict at {verdict:?}, second at {later:?}, summary at {summary:?}:\n{all:?}"
    );
    // Between the two verdicts the bar names the running probe.
    let between: String = chunks
        .iter()
        .filter(|(t, _)| *t > verdict && *t < later)
        .map(|(_, c)| c.as_str())
        .collect();
    assert!(
        between.contains("[1/2] concurrent-duplicates"),
        "{between:?}"
    );
    // Nothing is left after the summary but the summary itself: the bar was cleared first.
    let tail = &all[all.rfind("2 probes:").unwrap()..];
    assert!(
        !tail.contains("[2/2]") && !tail.contains('\u{1b}'),
        "{tail:?}"
    );
}
