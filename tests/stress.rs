//! `idem-check stress` against the in-process reference server: exactly-once holds on the
//! correct server, and the race and re-execution faults are reported with bounded evidence.

mod common;

use std::time::Duration;

use idem_check::outcome::Outcome;
use idem_check::reference::Reference;
use idem_check::stress::{StressOptions, StressReport};
use idem_reference_server::Fault;

const KEYS: usize = 200;
const DUPLICATES: usize = 8;

async fn stress_reference(fault: Option<Fault>) -> StressReport {
    let reference = Reference::start(fault)
        .await
        .expect("reference server starts");
    let opts = StressOptions {
        keys: KEYS,
        duplicates: DUPLICATES,
        concurrency: 32,
        duration: Duration::from_secs(60),
    };
    common::stress::stress_reference(reference, &opts).await
}

/// Every key executes exactly once; the counter agrees; every request is accounted for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_holds_on_the_reference_server() {
    let r = stress_reference(None).await;
    assert_eq!(r.result.outcome, Outcome::Pass, "{}", r.result.reason);
    assert_eq!(r.keys, KEYS);
    assert_eq!(r.keys_completed, KEYS);
    assert_eq!(r.violating_keys, 0);
    assert_eq!(r.requests, (KEYS * DUPLICATES) as u64);
    assert_eq!(r.statuses.values().sum::<u64>(), r.requests);
    // One burst per key, each counted under how it was released, with a measured spread.
    assert_eq!(r.bursts.released.values().sum::<u64>(), KEYS as u64);
    assert!(
        r.bursts
            .released
            .keys()
            .all(|how| how.starts_with("from ") && how.contains("thread")),
        "{:?}",
        r.bursts.released
    );
    assert!(r.bursts.spread_p50_us > 0.0 && r.bursts.spread_p50_us <= r.bursts.spread_max_us);
    let effects = r
        .result
        .checks
        .iter()
        .find(|c| c.id == "effects")
        .expect("counter check");
    assert!(
        effects.passed && effects.actual == format!("{KEYS} executions"),
        "{effects:?}"
    );
}

/// The race fault doubles executions: FAIL, violating keys listed, evidence kept only for a few.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_fault_is_reported_with_bounded_evidence() {
    let r = stress_reference(Some(Fault::Race)).await;
    assert_eq!(r.result.outcome, Outcome::Fail);
    assert!(r.violating_keys > 0);
    assert!(!r.violations.is_empty());
    let effects = r.result.checks.iter().find(|c| c.id == "effects").unwrap();
    assert!(!effects.passed);
    // Counter reads plus at most 5 violating keys and 1 sample key, DUPLICATES exchanges each.
    assert!(
        r.result.exchanges.len() <= 2 + 6 * DUPLICATES,
        "{}",
        r.result.exchanges.len()
    );
}

/// A server that re-executes completed retries fails every key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_reexecute_fault_fails_every_key() {
    let r = stress_reference(Some(Fault::ReplayReexecute)).await;
    assert_eq!(r.result.outcome, Outcome::Fail);
    assert_eq!(r.violating_keys, KEYS);
}
