//! The whole default suite PASSes against the correct reference server.

use crate::common;

use idem_check::outcome::Outcome;

/// Every probe of the default suite passes — no WARN, SKIP or INCONCLUSIVE either, since the
/// reference target provides every precondition — even under `--strict`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_suite_passes_against_the_reference_server() {
    let report = common::run_reference(None, &[], true).await;
    let summary = common::outcomes(&report);
    assert!(!report.probes.is_empty());
    for p in &report.probes {
        assert_eq!(p.outcome, Outcome::Pass, "{summary}");
        assert!(!p.exchanges.is_empty(), "{}: no exchanges", p.id);
        assert!(
            p.checks
                .iter()
                .all(|c| c.passed || c.severity == idem_check::check::Severity::Info),
            "{summary}"
        );
    }
}
