//! The evidence a live failure produces, pinned: for a few faults, the failing probe's text block
//! (the terminal recap and the JUnit failure body) is compared with a golden transcript after
//! volatile fields (ports, keys, ids, times, dates) are normalised. `UPDATE_GOLDEN=1` rewrites.

use crate::common;

use std::path::Path;

use idem_check::outcome::Outcome;
use idem_check::report::{evidence, RenderOptions};
use idem_reference_server::Fault;
use regex::Regex;

/// Replaces what changes from run to run with stable placeholders.
fn normalise(text: &str) -> String {
    let rules = [
        (r"127\.0\.0\.1:\d+", "127.0.0.1:PORT"),
        (
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "UUID",
        ),
        (r"[0-9a-f]{8}…", "UUID…"),
        (r"(pay|po)_[0-9a-f]{32}", "${1}_ID"),
        (
            r"idem-check-([a-z-]+)-[0-9a-f]{12}",
            "idem-check-${1}-UNIQUE",
        ),
        (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "TIMESTAMP"),
        (r"(?m)^< date: .*$", "< date: DATE"),
        (r"\+\d+(\.\d+)? ?ms", "+T ms"),
        (r"\b\d+(\.\d+)? ?ms\b", "T ms"),
        (r" {2,}", " "),
    ];
    rules.iter().fold(text.to_string(), |acc, (pattern, with)| {
        Regex::new(pattern)
            .expect("valid pattern")
            .replace_all(&acc, *with)
            .into_owned()
    })
}

async fn failing_block(fault: Fault, probe: &str) -> String {
    let (report, secrets) = common::run_reference_with_secrets(Some(fault), &[probe], false).await;
    let p = report
        .probes
        .iter()
        .find(|p| p.id == probe)
        .expect("the probe ran");
    assert_eq!(p.outcome, Outcome::Fail, "{}", common::outcomes(&report));
    // The reference server's tokens are random per run; the variables naming them are not.
    let opts = RenderOptions {
        secrets,
        ..RenderOptions::default()
    };
    normalise(&evidence::block(p, &report.suite, &opts))
}

fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/golden/evidence")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == actual,
        "{name} differs from its golden (UPDATE_GOLDEN=1 rewrites it):\n{}",
        similar::TextDiff::from_lines(expected.as_str(), actual).unified_diff()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_key_evidence_under_no_key_required() {
    golden(
        "missing-key.txt",
        &failing_block(Fault::NoKeyRequired, "missing-key").await,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_mismatch_evidence_under_no_fingerprint() {
    golden(
        "payload-mismatch.txt",
        &failing_block(Fault::NoFingerprint, "payload-mismatch").await,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_isolation_evidence_under_unscoped_keys() {
    golden(
        "tenant-isolation.txt",
        &failing_block(Fault::UnscopedKeys, "tenant-isolation").await,
    );
}
