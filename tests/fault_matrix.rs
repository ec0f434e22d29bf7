//! Every reference-server fault makes exactly the probes it is designed to break FAIL (under
//! `--strict`, so recommended checks count), and every other probe still PASSes or SKIPs. This
//! is the proof that no probe is a check that cannot fail.
//!
//! A fault that breaks the baseline request itself (`reject-all`) stops the run at the pre-flight
//! `first-request`, which reports the rest as ERROR, by design. For such faults, the second test
//! runs each listed probe on its own, so their target probe is still seen failing.

mod common;

use std::collections::BTreeSet;

use idem_check::outcome::Outcome;
use idem_check::probes;
use idem_reference_server::Fault;

/// Whether a fault breaks the pre-flight, so a full run ends there.
fn stops_at_preflight(fault: Fault) -> bool {
    fault.breaks().contains(&"first-request")
}

/// Every fault's `breaks()` list against a full strict run of the default suite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fault_fails_exactly_its_probes() {
    let catalog: BTreeSet<&str> = probes::catalog().iter().map(|p| p.meta.id).collect();
    let mut problems = Vec::new();
    let mut exercised = BTreeSet::new();
    for &fault in Fault::ALL {
        let listed: BTreeSet<&str> = fault.breaks().iter().copied().collect();
        if let Some(unknown) = listed.iter().find(|p| !catalog.contains(*p)) {
            problems.push(format!(
                "fault {fault}: breaks() names unknown probe {unknown}"
            ));
        }
        // A pre-flight fault shows only first-request failing here; the second test covers the
        // rest of its list.
        let expected: BTreeSet<&str> = if stops_at_preflight(fault) {
            exercised.extend(listed.iter().copied());
            ["first-request"].into()
        } else {
            listed
        };
        let report = common::run_reference(Some(fault), &[], true).await;
        let failed: BTreeSet<&str> = report
            .probes
            .iter()
            .filter(|p| p.outcome == Outcome::Fail)
            .map(|p| p.id)
            .collect();
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
    let never_failed: Vec<&&str> = catalog.iter().filter(|p| !exercised.contains(*p)).collect();
    if !never_failed.is_empty() {
        problems.push(format!("probes no fault made FAIL: {never_failed:?}"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// A fault that stops the full run at the pre-flight still fails each probe it lists when that
/// probe runs alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_faults_fail_their_probes_run_alone() {
    let mut problems = Vec::new();
    let faults: Vec<Fault> = Fault::ALL
        .iter()
        .copied()
        .filter(|f| stops_at_preflight(*f))
        .collect();
    assert!(
        !faults.is_empty(),
        "no fault stops at the pre-flight any more"
    );
    for fault in faults {
        for &probe in fault.breaks() {
            let report = common::run_reference(Some(fault), &[probe], true).await;
            let outcome = report.probes.iter().find(|p| p.id == probe);
            if outcome.map(|p| p.outcome) != Some(Outcome::Fail) {
                problems.push(format!(
                    "fault {fault}: {probe} alone did not FAIL\n{}",
                    common::outcomes(&report)
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}
