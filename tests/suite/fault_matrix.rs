//! Every reference-server fault makes exactly the probes it is designed to break FAIL (under
//! `--strict`, so recommended checks count), and every other probe still PASSes or SKIPs. This
//! is the proof that no probe is a check that cannot fail.
//!
//! One test per fault, so the faults run in parallel. A fault that breaks the baseline request
//! itself (`reject-all`) stops a full run at the pre-flight `first-request`, which reports the
//! rest as ERROR, by design; its test then runs each listed probe on its own, so their target
//! probe is still seen failing.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use idem_check::carrier::Place;
use idem_check::config::RunOptions;
use idem_check::outcome::Outcome;
use idem_check::probes::{self, Need};
use idem_reference_server::Fault;

/// Whether a fault breaks the pre-flight, so a full run ends there.
fn stops_at_preflight(fault: Fault) -> bool {
    fault.breaks().contains(&"first-request")
}

/// The request timeout of a run under `fault`, when not the default 10 s. Under
/// `hang-on-outage` the request store-outage sends while the store is down is held until the
/// timeout, and, since it then executes once the store is back, store-outage repeats its outage
/// up to three times: the run waits out the timeout three times, which is what fails-fast
/// judges, whatever its length. Every other request of that run is answered by the in-process
/// reference server in milliseconds or released by the checker (no probe waits a timeout out
/// against a server that answers), and 3 s is what the design-server tables give each whole
/// run against slower Python servers on the same loaded machine.
fn request_timeout(fault: Fault) -> Option<Duration> {
    matches!(fault, Fault::HangOnOutage).then(|| Duration::from_secs(3))
}

/// The strict options of a run under `fault`.
fn strict_options(fault: Fault) -> RunOptions {
    let defaults = common::run_options();
    RunOptions {
        strict: true,
        timeout: request_timeout(fault).unwrap_or(defaults.timeout),
        ..defaults
    }
}

/// A full strict run under `fault` fails exactly the probes its `breaks()` lists, each with
/// its evidence; a pre-flight fault fails first-request in the full run and each listed probe
/// run alone.
async fn fails_exactly_its_probes(fault: Fault) {
    fails_exactly_its_probes_with(fault, None).await;
}

/// The probes a body key skips: those that test the draft's syntax or a key header's lines.
fn skipped_for_a_body_key() -> BTreeSet<&'static str> {
    probes::catalog()
        .iter()
        .filter(|p| {
            p.meta
                .needs
                .iter()
                .any(|n| matches!(n, Need::IetfSyntax | Need::KeyHeader))
        })
        .map(|p| p.meta.id)
        .collect()
}

/// The probes a fault breaks that rightly PASS or SKIP when the key is a body field (a token):
/// - `quotes-literal` and `params-in-key` change how the header's text is parsed; a body key is
///   a JSON string and never goes through that parser;
/// - under `no-key-required` a request without the key is an ordinary request, which a
///   provider's optional key allows, so `missing-key` SKIPs saying the key is optional;
/// - `plain-errors` breaks only the draft's problem+json, which a provider's carrier is not
///   asked for.
fn unseen_through_a_body_key(fault: Fault) -> &'static [&'static str] {
    match fault {
        Fault::QuotesLiteral | Fault::ParamsInKey => fault.breaks(),
        Fault::NoKeyRequired => &["missing-key"],
        Fault::PlainErrors => &["missing-key", "payload-mismatch"],
        _ => &[],
    }
}

/// The probes a provider fault breaks besides the ones its `breaks()` names, because the
/// defect really charges twice, or refuses, in their scenario too: without a key, a lost
/// provider answer, a restart or a lease takeover is a second charge; a fresh key per attempt
/// is one after an in-progress conflict, a restart or a takeover as well; a forwarded client
/// key makes the provider refuse the payout that reuses a payment's key (`cross-endpoint` gets
/// 502); calling the provider before validating calls it before claiming the key, and
/// the refused invalid body leaves a provider key the valid retry then mismatches; a replay
/// that calls the provider again does so after a restart too; the retry after a crash mid-call
/// takes the dead owner's claim over, which under a fresh key on takeover is a second charge.
fn also_broken_with_a_provider(fault: Fault) -> &'static [&'static str] {
    match fault {
        Fault::ProvNoKey => &[
            "prov-lost-provider-response",
            "prov-crash-after-call",
            "prov-lease-fencing",
        ],
        Fault::ProvNewKeyPerAttempt => &[
            "prov-in-progress-conflict",
            "prov-crash-after-call",
            "prov-lease-fencing",
        ],
        Fault::ProvRawClientKey => &["cross-endpoint"],
        Fault::ProvCallBeforeValidate => &["prov-concurrent-duplicates", "error-not-cached"],
        Fault::ProvReplayRecallsProvider => &["prov-restart-replay"],
        Fault::ProvStaleOwnerNewKey => &["prov-crash-after-call"],
        _ => &[],
    }
}

/// [`fails_exactly_its_probes`] with the reference server reading the key from `key`: with a
/// body key, the fault's probes that test a key header or the draft's syntax SKIP, and every
/// other one still FAILs through the body.
async fn fails_exactly_its_probes_with(fault: Fault, key: Option<Place>) {
    let catalog: BTreeSet<&str> = probes::catalog().iter().map(|p| p.meta.id).collect();
    let mut listed: BTreeSet<&str> = fault.breaks().iter().copied().collect();
    listed.extend(also_broken_with_a_provider(fault));
    if matches!(key, Some(Place::Body(_))) && listed.is_subset(&skipped_for_a_body_key()) {
        // Every probe the fault breaks tests a key header or the draft's syntax, so none runs
        // with a body key: the header matrix above shows the fault; a run here would show
        // only SKIPs and PASSes of probes the fault does not touch.
        return;
    }
    if matches!(key, Some(Place::Body(_))) {
        listed.retain(|p| {
            !skipped_for_a_body_key().contains(p) && !unseen_through_a_body_key(fault).contains(p)
        });
    }
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
    let report =
        common::run_reference_keyed(Some(fault), key.as_ref(), &[], strict_options(fault)).await;
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
            let report = common::run_reference_keyed(
                Some(fault),
                key.as_ref(),
                &[probe],
                strict_options(fault),
            )
            .await;
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

/// One test per fault, named after its variant.
macro_rules! fault_tests {
    ($($fault:ident),* $(,)?) => {
        $(
            #[allow(non_snake_case)]
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $fault() {
                fails_exactly_its_probes(Fault::$fault).await;
            }
        )*
    };
}

idem_reference_server::for_each_fault!(fault_tests);

/// The same matrix with the key in the body (`--key-in-body /idempotency_key`).
mod body_key {
    use super::*;

    macro_rules! body_key_tests {
        ($($fault:ident),* $(,)?) => {
            $(
                #[allow(non_snake_case)]
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $fault() {
                    let key = Place::Body("/idempotency_key".into());
                    fails_exactly_its_probes_with(Fault::$fault, Some(key)).await;
                }
            )*
        };
    }

    idem_reference_server::for_each_fault!(body_key_tests);
}

/// No probe is a check that cannot fail: some fault is designed to make each one FAIL (and the
/// tests above show that it does).
#[test]
fn every_probe_is_broken_by_some_fault() {
    let broken: BTreeSet<&str> = Fault::ALL
        .iter()
        .flat_map(|f| {
            f.breaks()
                .iter()
                .chain(also_broken_with_a_provider(*f))
                .copied()
        })
        .collect();
    let never: Vec<&str> = probes::catalog()
        .iter()
        .map(|p| p.meta.id)
        .filter(|id| !broken.contains(id))
        .collect();
    assert!(never.is_empty(), "probes no fault makes FAIL: {never:?}");
}

/// Severity follows what was seen: under `concurrent-500` the duplicates sent while the owner is
/// held get 500 while the key stays claimed, and the operation executes once. That is a wrong
/// answer, not a duplicated effect, so `loser-does-not-unlock` FAILs as required: its
/// `still-refused` check fails as required, `one-execution` (critical) passes, and the run exits
/// with the FAIL code.
#[test]
fn duplicates_answered_500_fail_as_required_not_critical() {
    let o = common::binary::bin()
        .args([
            "run",
            "--reference",
            "--reference-fault",
            "concurrent-500",
            "--probe",
            "loser-does-not-unlock",
        ])
        .output()
        .expect("idem-check runs");
    let all = common::binary::text(&o);
    assert_eq!(o.status.code(), Some(4), "{all}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("loser-does-not-unlock  FAIL (required)"),
        "{all}"
    );
    assert!(
        out.contains("✗ required  every duplicate sent while the owner is held is refused"),
        "{all}"
    );
    assert!(
        out.contains("✓ critical  the owner and its duplicates execute once"),
        "{all}"
    );
    assert!(!out.contains("FAIL (critical)"), "{all}");
}
