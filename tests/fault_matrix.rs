//! Every reference-server fault makes exactly the probes it is designed to break FAIL (under
//! `--strict`, so recommended checks count), and every other probe still PASSes or SKIPs. This
//! is the proof that no probe is a check that cannot fail.

mod common;

use std::collections::BTreeSet;

use idem_check::outcome::Outcome;
use idem_check::probes;
use idem_reference_server::Fault;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fault_fails_exactly_its_probes() {
    let implemented: BTreeSet<&str> = probes::catalog().iter().map(|p| p.meta.id).collect();
    let mut problems = Vec::new();
    let mut exercised = BTreeSet::new();
    for &fault in Fault::ALL {
        let expected: BTreeSet<&str> = fault
            .breaks()
            .iter()
            .copied()
            .filter(|p| implemented.contains(p))
            .collect();
        let report = common::run_reference(Some(fault), &[], true).await;
        let failed: BTreeSet<&str> = report
            .probes
            .iter()
            .filter(|p| p.outcome == Outcome::Fail)
            .map(|p| p.id)
            .collect();
        // first-request failing stops the run: the rest are ERROR "not run", by design.
        let unexpected: Vec<String> = report
            .probes
            .iter()
            .filter(|p| !expected.contains(p.id))
            .filter(|p| !matches!(p.outcome, Outcome::Pass | Outcome::Skip))
            .filter(|p| {
                !(p.outcome == Outcome::Inconclusive && p.reason.starts_with("prerequisite"))
            })
            .filter(|p| {
                !(p.outcome == Outcome::Error && p.reason.contains("pre-flight first-request"))
            })
            .map(|p| format!("{} {}: {}", p.id, p.outcome.as_str(), p.reason))
            .collect();
        if failed != expected || !unexpected.is_empty() {
            problems.push(format!(
                "fault {fault}: expected FAIL {expected:?}, got FAIL {failed:?}; others: {unexpected:?}\n{}",
                common::outcomes(&report)
            ));
        }
        for p in report.probes.iter().filter(|p| p.outcome == Outcome::Fail) {
            exercised.insert(p.id);
            let cited: Vec<usize> = p
                .checks
                .iter()
                .filter(|c| !c.passed)
                .flat_map(|c| c.exchanges.iter().copied())
                .collect();
            if p.exchanges.is_empty() || cited.iter().any(|n| p.exchange(*n).is_none()) {
                problems.push(format!(
                    "fault {fault}: {} FAILs without its evidence",
                    p.id
                ));
            }
        }
    }
    let never_failed: Vec<&&str> = implemented
        .iter()
        .filter(|p| !exercised.contains(*p))
        .collect();
    if !never_failed.is_empty() {
        problems.push(format!("probes no fault made FAIL: {never_failed:?}"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}
