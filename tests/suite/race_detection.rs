//! `concurrent-duplicates` on its own must catch a 100 µs check-then-set window every time and
//! never accuse a correct server: 20 consecutive runs against the reference server with
//! `--fault race` (window 100 µs, set by `Reference::start`) must all FAIL, and 20 against the
//! correct server must all PASS. A single miss in either direction fails the test, with every
//! run's outcome and timeline in the message.

use crate::common;

use idem_check::outcome::Outcome;
use idem_reference_server::Fault;

const RUNS: usize = 20;
const PROBE: &str = "concurrent-duplicates";

/// Runs the probe alone `RUNS` times against the reference server (with `fault`) and returns
/// each run's outcome and a line describing it.
async fn runs(fault: Option<Fault>) -> Vec<(Outcome, String)> {
    let mut out = Vec::with_capacity(RUNS);
    for run in 1..=RUNS {
        let report = common::run_reference(fault, &[PROBE], false).await;
        let probe = report
            .probes
            .iter()
            .find(|p| p.id == PROBE)
            .unwrap_or_else(|| panic!("run {run}: no {PROBE} in\n{}", common::outcomes(&report)));
        let bursts = probe
            .timeline
            .iter()
            .filter(|l| l.starts_with("burst "))
            .count();
        out.push((
            probe.outcome,
            format!(
                "run {run}: {} after {bursts} burst(s) — {} | {}",
                probe.outcome.as_str(),
                probe.reason,
                probe.timeline.join(" | ")
            ),
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_window_of_100us_is_caught_in_every_run() {
    let results = runs(Some(Fault::Race)).await;
    let lines: Vec<&str> = results.iter().map(|(_, l)| l.as_str()).collect();
    println!("{}", lines.join("\n"));
    let caught = results.iter().filter(|(o, _)| *o == Outcome::Fail).count();
    assert_eq!(
        caught,
        RUNS,
        "caught the race in {caught}/{RUNS} runs:\n{}",
        lines.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn correct_server_passes_every_run() {
    let results = runs(None).await;
    let lines: Vec<&str> = results.iter().map(|(_, l)| l.as_str()).collect();
    println!("{}", lines.join("\n"));
    let passed = results.iter().filter(|(o, _)| *o == Outcome::Pass).count();
    assert_eq!(
        passed,
        RUNS,
        "passed {passed}/{RUNS} runs:\n{}",
        lines.join("\n")
    );
}
