//! FAILs with one cause are told so once: the cause is read from the requests behind each
//! FAIL's duplicated effect (how they overlapped the key's first request), so FAILs whose
//! evidence shows no duplicated effect, or only one FAIL, are never grouped.

use idem_check::carrier::Place;
use idem_check::report::causes;
use idem_reference_server::Fault;

use crate::common;

const SHARE: &str = "critical FAILs share one cause";

/// `replay-reexecute` executes every retry after completion: each of its nine critical FAILs
/// cites a retry sent after the key's first answer that executed, so they are one cause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_after_completion_that_execute_are_one_cause() {
    let report = common::run_reference(Some(Fault::ReplayReexecute), &[], false).await;
    let lines = causes(&report.probes, &Place::ietf());
    let shared: Vec<&String> = lines.iter().filter(|l| l.contains(SHARE)).collect();
    assert_eq!(shared.len(), 1, "{lines:#?}\n{}", common::outcomes(&report));
    assert!(
        shared[0].starts_with(
            "9 critical FAILs share one cause: a retry after completion executes again (replay-identity #"
        ),
        "{}",
        shared[0]
    );
}

/// `concurrent-500` fails three probes with a 500 to the duplicate sent while the original
/// runs, but nothing executed twice: no duplicated effect, so no shared cause is claimed. Under
/// `race` one FAIL alone is never "shared".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_without_a_duplicated_effect_or_alone_are_not_grouped() {
    for (fault, fails) in [(Fault::Concurrent500, 3), (Fault::Race, 1)] {
        let report = common::run_reference(Some(fault), &[], false).await;
        assert_eq!(
            report.summary.failed,
            fails,
            "{}",
            common::outcomes(&report)
        );
        let lines = causes(&report.probes, &Place::ietf());
        assert!(
            !lines.iter().any(|l| l.contains(SHARE)),
            "{fault:?}: {lines:#?}"
        );
    }
}
