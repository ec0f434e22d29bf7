//! The JSON reports idem-check reads back: a `stress --segment` report for `merge`
//! (src/stress/segment.rs) and a run's report for `reproduce` (src/reproduce/): schema, probes,
//! exchanges with their requests, bursts, dropped answers and the replay inputs.
//!
//! Input: the report's text, read as both. Checks: an error says what went wrong; merging a segment
//! with itself never panics; every probe's scenario plans, and every exchange either restores
//! into a request or says why, with no variable's value (a secret) in the reason.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use idem_check::carrier::Place;
use idem_check::reproduce::{plan, RecordedRun, Replayer};
use idem_check::stress::segment::{self, SegmentReport};
use idem_check_fuzz::{assert_names, assert_shown_safely};
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "s3cr3t-Var-77ad";

/// A file the report is written to, because `reproduce` reads a path.
fn report_path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("idem-fuzz-reports-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        dir.join("report.json")
    })
}

fn merge(text: &str) {
    let Ok(report) = serde_json::from_str::<SegmentReport>(text) else {
        return;
    };
    let one = [(PathBuf::from("a.json"), report.clone())];
    if let Err(e) = segment::merge(&one) {
        assert_names(&e.to_string(), "");
    }
    let two = [
        (PathBuf::from("a.json"), report.clone()),
        (PathBuf::from("b.json"), report),
    ];
    if let Err(e) = segment::merge(&two) {
        assert_names(&e.to_string(), "");
    }
}

fn reproduce(data: &[u8]) {
    // A report that holds the secret itself may quote it: not a leak.
    if data.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()) {
        return;
    }
    let path = report_path();
    std::fs::write(path, data).expect("the report is written");
    let run = match RecordedRun::read(path) {
        Ok(run) => run,
        Err(e) => return assert_names(&e.to_string(), "report.json"),
    };
    for probe in &run.probes {
        let inputs = run.replay.clone();
        let place = inputs.as_ref().map_or_else(Place::ietf, |i| i.key_place());
        let _ = plan(probe, None, &place).map_err(|e| assert_names(&e.to_string(), &probe.id));
        for ex in probe.exchanges.iter().take(4) {
            let _ = plan(probe, Some(ex.n), &place)
                .map_err(|e| assert_names(&e.to_string(), &probe.id));
        }
        let Some(inputs) = inputs else { continue };
        let Ok(replayer) = Replayer::new(inputs, Box::new(|_| Some(SECRET.to_string()))) else {
            continue;
        };
        for ex in probe.exchanges.iter().take(4) {
            if let Err(e) = replayer.restore(ex) {
                let shown = e.to_string();
                assert_names(&shown, "");
                assert_shown_safely(&shown, SECRET);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        merge(text);
    }
    reproduce(data);
});
