//! Every reference-server fault makes exactly the probes it is designed to break FAIL (under
//! `--strict`, so recommended checks count), and every other probe still PASSes or SKIPs. This
//! is the proof that no probe is a check that cannot fail.
//!
//! One test per fault, so the faults run in parallel. A fault that breaks the baseline request
//! itself (`reject-all`) stops a full run at the pre-flight `first-request`, which reports the
//! rest as ERROR, by design; its test then runs each listed probe on its own, so their target
//! probe is still seen failing.

mod common;

use std::collections::BTreeSet;

use idem_check::outcome::Outcome;
use idem_check::probes;
use idem_reference_server::Fault;

/// Whether a fault breaks the pre-flight, so a full run ends there.
fn stops_at_preflight(fault: Fault) -> bool {
    fault.breaks().contains(&"first-request")
}

/// A full strict run under `fault` fails exactly the probes its `breaks()` lists, each with
/// its evidence; a pre-flight fault fails first-request in the full run and each listed probe
/// run alone.
async fn fails_exactly_its_probes(fault: Fault) {
    let catalog: BTreeSet<&str> = probes::catalog().iter().map(|p| p.meta.id).collect();
    let listed: BTreeSet<&str> = fault.breaks().iter().copied().collect();
    let unknown: Vec<&&str> = listed.iter().filter(|p| !catalog.contains(*p)).collect();
    assert!(
        unknown.is_empty(),
        "fault {fault}: breaks() names unknown probes {unknown:?}"
    );
    let mut problems = Vec::new();
    let expected: BTreeSet<&str> = if stops_at_preflight(fault) {
        ["first-request"].into()
    } else {
        listed.clone()
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
        .filter(|p| !(p.outcome == Outcome::Inconclusive && p.reason.starts_with("prerequisite")))
        .filter(|p| !(p.outcome == Outcome::Error && p.reason.contains("pre-flight first-request")))
        .map(|p| format!("{} {}: {}", p.id, p.outcome.as_str(), p.reason))
        .collect();
    if failed != expected || !unexpected.is_empty() {
        problems.push(format!(
            "fault {fault}: expected FAIL {expected:?}, got FAIL {failed:?}; others: {unexpected:?}\n{}",
            common::outcomes(&report)
        ));
    }
    for p in report.probes.iter().filter(|p| p.outcome == Outcome::Fail) {
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
    if stops_at_preflight(fault) {
        for probe in listed.iter().filter(|p| **p != "first-request") {
            let report = common::run_reference(Some(fault), &[probe], true).await;
            let outcome = report.probes.iter().find(|p| p.id == *probe);
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

/// One test per fault, and the list of faults they cover.
macro_rules! fault_tests {
    ($($test:ident => $fault:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                fails_exactly_its_probes(Fault::$fault).await;
            }
        )*
        const TESTED: &[Fault] = &[$(Fault::$fault),*];
    };
}

fault_tests! {
    no_key_required => NoKeyRequired,
    plain_errors => PlainErrors,
    race => Race,
    concurrent_500 => Concurrent500,
    no_retry_after => NoRetryAfter,
    expiring_lock => ExpiringLock,
    no_fingerprint => NoFingerprint,
    mismatch_409 => Mismatch409,
    mismatch_overwrite => MismatchOverwrite,
    replay_new_id => ReplayNewId,
    replay_reexecute => ReplayReexecute,
    quotes_literal => QuotesLiteral,
    reject_quoted => RejectQuoted,
    split_on_comma => SplitOnComma,
    duplicate_header_first => DuplicateHeaderFirst,
    accept_empty => AcceptEmpty,
    no_key_limit => NoKeyLimit,
    params_in_key => ParamsInKey,
    unscoped_keys => UnscopedKeys,
    unscoped_operation => UnscopedOperation,
    memory_store => MemoryStore,
    fingerprint_dedupe => FingerprintDedupe,
    case_insensitive_keys => CaseInsensitiveKeys,
    cache_validation_error => CacheValidationError,
    wedge_on_crash => WedgeOnCrash,
    loser_unlocks => LoserUnlocks,
    release_on_disconnect => ReleaseOnDisconnect,
    trust_replay_header => TrustReplayHeader,
    reject_all => RejectAll,
    local_claims => LocalClaims,
    no_expiry => NoExpiry,
    replay_keyed_reads => ReplayKeyedReads,
    key_name_spellings => KeyNameSpellings,
    fail_open => FailOpen
}

/// A new fault cannot go untested: the tests above cover every fault in the catalog.
#[test]
fn every_fault_has_its_test() {
    let tested: BTreeSet<String> = TESTED.iter().map(|f| f.to_string()).collect();
    let all: BTreeSet<String> = Fault::ALL.iter().map(|f| f.to_string()).collect();
    assert_eq!(tested, all, "add the missing faults to fault_tests!");
}

/// No probe is a check that cannot fail: some fault is designed to make each one FAIL (and the
/// tests above show that it does).
#[test]
fn every_probe_is_broken_by_some_fault() {
    let broken: BTreeSet<&str> = Fault::ALL
        .iter()
        .flat_map(|f| f.breaks().iter().copied())
        .collect();
    let never: Vec<&str> = probes::catalog()
        .iter()
        .map(|p| p.meta.id)
        .filter(|id| !broken.contains(id))
        .collect();
    assert!(never.is_empty(), "probes no fault makes FAIL: {never:?}");
}
