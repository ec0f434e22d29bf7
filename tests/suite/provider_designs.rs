//! The `downstream` probes against small payment APIs not built like the reference server
//! (`fixtures/provider_apis/*.py`, Python's standard library), each calling idem-check's fake
//! provider (`generic` profile) over HTTP: two correct designs — atomic phases with a recovery
//! point in SQLite, and a transactional outbox whose worker calls the provider after the
//! request — PASS every probe, and each defect design FAILs exactly the probes its defect
//! breaks, through exactly the checks that see it.
//!
//! The designs run side by side (their runs mostly wait on the fake's holds and the APIs' own
//! provider timeouts); no verdict depends on a fixed sleep: the fake holds and releases calls
//! on what it observes, and the designs wait on their own conditions.

use std::collections::BTreeMap;

use crate::common;
use crate::design_servers::{check, Run};

use common::python;

/// A design API and the probes it FAILs, each with the checks that fail in it; every other
/// downstream probe (and `first-request`, the calibration) PASSes.
struct Design {
    file: &'static str,
    fails: &'static [(&'static str, &'static [&'static str])],
}

const ATOMIC_PHASES: Design = Design {
    file: "atomic_phases",
    fails: &[],
};

const OUTBOX_WORKER: Design = Design {
    file: "outbox_worker",
    fails: &[],
};

/// Each defect of the issue's list, and what it breaks.
const DEFECTS: [Design; 8] = [
    // A fresh key per attempt: every scenario in which one request calls the provider twice
    // (its own retry, the client's retry, the call after a restart or a lease) has two keys;
    // where the first attempt committed, the second is a second charge.
    Design {
        file: "key_per_attempt",
        fails: &[
            ("prov-same-key-on-provider-retry", &["same-key"]),
            (
                "prov-lost-provider-response",
                &["original-key", "one-charge", "resolved"],
            ),
            ("prov-in-progress-conflict", &["same-key"]),
            ("prov-crash-after-call", &["pre-crash-key", "one-charge"]),
            ("prov-lease-fencing", &["first-key", "one-charge"]),
        ],
    },
    // The client's key as it came: tenant B's charge and the payout meet the first charge's
    // key at the provider, which refuses them.
    Design {
        file: "raw_client_key",
        fails: &[
            ("prov-tenant-scope", &["distinct-keys", "two-charges"]),
            ("prov-operation-scope", &["distinct-keys", "both-effects"]),
        ],
    },
    // A digest of the provider body: equal payloads are one key, whichever client key, tenant
    // or operation sent them (the charge's and the payout's bodies are equal too).
    Design {
        file: "key_from_body",
        fails: &[
            ("prov-distinct-keys", &["distinct-keys", "two-charges"]),
            ("prov-tenant-scope", &["distinct-keys", "two-charges"]),
            ("prov-operation-scope", &["distinct-keys", "both-effects"]),
        ],
    },
    // The call before the claim: every duplicate of the burst calls the provider (under the
    // one derived key, so the provider still charges once).
    Design {
        file: "call_before_claim",
        fails: &[("prov-concurrent-duplicates", &["one-call"])],
    },
    // The key in memory: the retry after the restart sends another, a second charge.
    Design {
        file: "key_in_memory",
        fails: &[("prov-crash-after-call", &["pre-crash-key", "one-charge"])],
    },
    // The unknown outcome answered 402: a definitive refusal of a request the provider
    // charged, never resolved.
    Design {
        file: "timeout_is_failure",
        fails: &[("prov-lost-provider-response", &["not-refused", "resolved"])],
    },
    // The provider's in-progress 409 answered (and recorded) as a failure.
    Design {
        file: "conflict_is_failure",
        fails: &[("prov-in-progress-conflict", &["not-failed"])],
    },
    // The replay calls the provider again: a call for each replay, and a second charge once
    // the provider forgot the key.
    Design {
        file: "replay_recalls",
        fails: &[
            ("prov-client-replay", &["no-call"]),
            ("prov-restart-replay", &["no-call"]),
            ("prov-provider-forgets", &["one-charge"]),
        ],
    },
];

/// Starts `design` pointed at a fake provider on a free port and runs the downstream probes
/// (strict: the recommended checks count) with every option they need.
fn run(design: &Design) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("record.sqlite");
    let port = crate::common::port::unused();
    let provider_url = format!("http://127.0.0.1:{port}");
    let server = python::start(
        &format!("fixtures/provider_apis/{}.py", design.file),
        &[
            "--db",
            db.to_str().unwrap(),
            "--provider-url",
            &provider_url,
            "--lifetime",
            "300",
        ],
    );
    let restart = "python3 -c \"import urllib.request as u; u.urlopen(u.Request('{base}/restart', data=b''))\"";
    let listen = format!("127.0.0.1:{port}");
    check(
        &server,
        &[
            "-H",
            "Authorization: Bearer ta",
            "-H",
            "Content-Type: application/json",
            "-d",
            r#"{"amount":5,"ref":"{{unique}}"}"#,
            "--tenant-b-header",
            "Authorization: Bearer tb",
            "--second-url",
            "{base}/payout",
            "--invalid-body",
            r#"{"amount":0,"ref":"{{unique}}"}"#,
            "--restart-cmd",
            restart,
            "--ready-url",
            "{base}/ready",
            "--provider-listen",
            &listen,
            "--provider",
            "generic",
            "--probe",
            "downstream",
            "--strict",
        ],
    )
}

/// The verdict table a correct checker gives `design`: (probe, outcome, failed checks) for
/// `first-request` and every downstream probe, in catalog order.
fn expected(design: &Design) -> Vec<(String, String, Vec<String>)> {
    idem_check::probes::catalog()
        .iter()
        .map(|p| p.meta.id)
        .filter(|id| *id == "first-request" || common::downstream(id))
        .map(|id| match design.fails.iter().find(|(p, _)| *p == id) {
            Some((_, checks)) => (
                id.to_string(),
                "FAIL".to_string(),
                checks.iter().map(|c| c.to_string()).collect(),
            ),
            None => (id.to_string(), "PASS".to_string(), Vec::new()),
        })
        .collect()
}

/// The table `run` shows: (probe, outcome, failed checks) in report order.
fn observed(run: &Run) -> Vec<(String, String, Vec<String>)> {
    run.report["probes"]
        .as_array()
        .expect("probes in the JSON report")
        .iter()
        .map(|p| {
            let failed = p["checks"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["passed"] == false)
                .filter_map(|c| c["id"].as_str().map(str::to_owned))
                .collect();
            (
                p["id"].as_str().unwrap_or_default().to_string(),
                p["outcome"].as_str().unwrap_or_default().to_string(),
                failed,
            )
        })
        .collect()
}

/// Runs every design at once and returns, per design, what differs from its table.
fn mismatches(designs: &[&Design]) -> BTreeMap<&'static str, String> {
    std::thread::scope(|s| {
        let runs: Vec<_> = designs
            .iter()
            .map(|d| (d, s.spawn(move || run(d))))
            .collect();
        runs.into_iter()
            .filter_map(|(d, handle)| {
                let run = handle.join().expect("the design's run");
                let want = expected(d);
                let got = observed(&run);
                let exit = if d.fails.is_empty() { 0 } else { 4 };
                // Every provider call is tied to the probe that caused it, the outbox
                // worker's too: the client's reference travels into the provider request.
                let stray: Vec<&str> = run
                    .probes
                    .iter()
                    .map(|p| p.0.as_str())
                    .filter(|id| run.timeline(id).contains("holds no probe's token"))
                    .collect();
                (got != want || run.exit != Some(exit) || !stray.is_empty()).then(|| {
                    let lines: Vec<String> = run
                        .probes
                        .iter()
                        .map(|(id, outcome, reason)| format!("  {id}: {outcome} ({reason})"))
                        .collect();
                    let text = format!(
                        "expected {want:?}\ngot      {got:?}\nexit {:?} (expected {exit})\nunattributed provider calls in {stray:?}\n{}",
                        run.exit,
                        lines.join("\n")
                    );
                    (d.file, text)
                })
            })
            .collect()
    })
}

/// Asserts that every design of `designs` shows exactly its table.
fn assert_tables(designs: &[&Design]) {
    let wrong = mismatches(designs);
    let shown: Vec<String> = wrong.iter().map(|(d, t)| format!("{d}:\n{t}")).collect();
    assert!(wrong.is_empty(), "{}", shown.join("\n\n"));
}

/// Atomic phases and the outbox worker keep one key per operation through every stimulus:
/// every downstream probe PASSes, the recommended checks included.
#[test]
fn correct_designs_pass_every_downstream_probe() {
    assert_tables(&[&ATOMIC_PHASES, &OUTBOX_WORKER]);
}

/// Each defect FAILs the probes it breaks, through the checks that see it, and no other.
#[test]
fn each_defect_fails_exactly_its_probes() {
    assert_tables(&DEFECTS.iter().collect::<Vec<_>>());
}
