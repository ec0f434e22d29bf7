//! Every client check judged from recorded attempts made here (no client, no socket): it
//! passes on a client that behaves, fails on one that does not, and stops with its reason
//! (INCONCLUSIVE or ERROR, never a PASS) when there is nothing to judge.

use super::{ClientProbe, Findings, Judging, CATALOG};
use crate::carrier::{KeyCarrier, Syntax};
use crate::client::command::{Exit, Output, RunRecord};
use crate::client::fake_api::{Attempt, SentKey};
use crate::client::scenario::{self, ScenarioRecord};
use crate::keys::KeySyntax;
use crate::outcome::{decide, Outcome, Stop};

/// One attempt: exchange `n` at `start_ms`, answered `status` (0: closed unanswered), for
/// operation `op`, with `key` (as sent) and `body`.
fn attempt(
    n: usize,
    op: usize,
    start_ms: f64,
    status: u16,
    key: Option<&str>,
    body: &str,
) -> Attempt {
    let mut exchange = crate::check::test_exchange(n, status.max(200), "");
    exchange.start_ms = start_ms;
    if status == 0 {
        exchange.outcome = Err(crate::http::HttpError::ClosedBeforeAnyByte(
            "closed".to_string(),
        ));
    } else if let Ok(r) = &mut exchange.outcome {
        r.status = status;
    }
    exchange.request.body = body.as_bytes().to_vec();
    Attempt {
        exchange,
        op,
        operation: true,
        read: false,
        key: key.map(|k| SentKey::parse(k, Syntax::Ietf)),
        payload: serde_json::from_str(body).ok(),
        credential: "bearer".into(),
        setup_refusal: None,
    }
}

fn run(n: usize, code: i32) -> RunRecord {
    RunRecord {
        run: n,
        start_ms: 0.0,
        duration_ms: 10.0,
        exit: Exit::Code(code),
        stdout: Output::default(),
        stderr: Output::default(),
    }
}

fn record(
    id: &str,
    attempts: Vec<Attempt>,
    runs: Vec<RunRecord>,
    payments: usize,
) -> ScenarioRecord {
    ScenarioRecord {
        scenario: scenario::find(id).unwrap(),
        base_url: "http://127.0.0.1:9".into(),
        attempts,
        runs,
        payments,
    }
}

const BODY: &str = r#"{"amountCents":1250,"currency":"EUR","reference":"r1"}"#;
const K1: &str = "\"8e03978e-40d5-43e8-bc93-6894a57f9324\"";
const K2: &str = "\"1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed\"";

fn probe(id: &str) -> &'static ClientProbe {
    CATALOG.iter().find(|p| p.id == id).unwrap()
}

/// The verdict `probe` gives `records`, and its findings.
fn judged(id: &str, records: &[ScenarioRecord]) -> (Outcome, Findings) {
    let carrier = KeyCarrier::ietf_header();
    let j = Judging {
        records,
        key_syntax: KeySyntax::SfString,
        carrier: &carrier,
        timeout: std::time::Duration::from_secs(10),
        served: "POST /api/payments",
    };
    let p = probe(id);
    let found = (p.judge)(&j);
    for c in &found.checks {
        let declared = p.checks.iter().find(|d| d.id() == c.id);
        assert!(
            declared.is_some_and(|d| d.severity == c.severity && d.what() == c.what),
            "{id}: {} undeclared",
            c.id
        );
    }
    (
        decide(&found.checks, found.stop.as_ref(), true).outcome,
        found,
    )
}

fn stopped_without_a_pass(id: &str, records: &[ScenarioRecord]) {
    let (outcome, found) = judged(id, records);
    assert!(
        matches!(found.stop, Some(Stop::Inconclusive(_) | Stop::Error(_))),
        "{id}"
    );
    assert!(
        matches!(outcome, Outcome::Inconclusive | Outcome::Error),
        "{id}: {outcome:?}"
    );
}

#[test]
fn key_present() {
    let good = record(
        "created",
        vec![attempt(1, 1, 0.0, 201, Some(K1), BODY)],
        vec![run(1, 0)],
        1,
    );
    assert_eq!(judged("client-key-present", &[good]).0, Outcome::Pass);
    let keyless = record(
        "created",
        vec![attempt(1, 1, 0.0, 201, None, BODY)],
        vec![run(1, 0)],
        1,
    );
    assert_eq!(judged("client-key-present", &[keyless]).0, Outcome::Fail);
    stopped_without_a_pass(
        "client-key-present",
        &[record("created", vec![], vec![run(1, 1)], 0)],
    );
}

#[test]
fn key_syntax() {
    let good = record(
        "created",
        vec![attempt(1, 1, 0.0, 201, Some(K1), BODY)],
        vec![run(1, 0)],
        1,
    );
    assert_eq!(judged("client-key-syntax", &[good]).0, Outcome::Pass);
    let bare = record(
        "created",
        vec![attempt(1, 1, 0.0, 201, Some("abc"), BODY)],
        vec![run(1, 0)],
        1,
    );
    assert_eq!(judged("client-key-syntax", &[bare]).0, Outcome::Fail);
    let keyless = record(
        "created",
        vec![attempt(1, 1, 0.0, 201, None, BODY)],
        vec![run(1, 0)],
        1,
    );
    stopped_without_a_pass("client-key-syntax", &[keyless]);
}

#[test]
fn lost_response() {
    let lost = |retry_key: &str, payments| {
        record(
            "lost-response",
            vec![
                attempt(1, 1, 0.0, 0, Some(K1), BODY),
                attempt(2, 1, 500.0, 201, Some(retry_key), BODY),
            ],
            vec![run(1, 0)],
            payments,
        )
    };
    assert_eq!(
        judged("client-lost-response", &[lost(K1, 1)]).0,
        Outcome::Pass
    );
    assert_eq!(
        judged("client-lost-response", &[lost(K2, 2)]).0,
        Outcome::Fail
    );
    stopped_without_a_pass(
        "client-lost-response",
        &[record("lost-response", vec![], vec![run(1, 1)], 0)],
    );
}

#[test]
fn retry_after() {
    let waited = |gap: f64| {
        record(
            "retry-after-503",
            vec![
                attempt(1, 1, 0.0, 503, Some(K1), BODY),
                attempt(2, 1, 1.0 + gap, 201, Some(K1), BODY),
            ],
            vec![run(1, 0)],
            1,
        )
    };
    assert_eq!(
        judged("client-retry-after", &[waited(1200.0)]).0,
        Outcome::Pass
    );
    assert_eq!(
        judged("client-retry-after", &[waited(100.0)]).0,
        Outcome::Fail
    );
    let gave_up = record(
        "retry-after-503",
        vec![attempt(1, 1, 0.0, 503, Some(K1), BODY)],
        vec![run(1, 1)],
        0,
    );
    stopped_without_a_pass("client-retry-after", &[gave_up]);
}

#[test]
fn throttled() {
    let retried = record(
        "throttled-429",
        vec![
            attempt(1, 1, 0.0, 429, Some(K1), BODY),
            attempt(2, 1, 1200.0, 201, Some(K1), BODY),
        ],
        vec![run(1, 0)],
        1,
    );
    assert_eq!(judged("client-throttled", &[retried]).0, Outcome::Pass);
    let gave_up = record(
        "throttled-429",
        vec![attempt(1, 1, 0.0, 429, Some(K1), BODY)],
        vec![run(1, 1)],
        0,
    );
    assert_eq!(judged("client-throttled", &[gave_up]).0, Outcome::Fail);
    stopped_without_a_pass(
        "client-throttled",
        &[record("throttled-429", vec![], vec![run(1, 1)], 0)],
    );
}

#[test]
fn stops_on_4xx() {
    let stopped = record(
        "refused-422",
        vec![attempt(1, 1, 0.0, 422, Some(K1), BODY)],
        vec![run(1, 1)],
        0,
    );
    assert_eq!(judged("client-stops-on-4xx", &[stopped]).0, Outcome::Pass);
    let went_on = record(
        "refused-422",
        vec![
            attempt(1, 1, 0.0, 422, Some(K1), BODY),
            attempt(2, 1, 10.0, 422, Some(K1), BODY),
        ],
        vec![run(1, 0)],
        0,
    );
    assert_eq!(judged("client-stops-on-4xx", &[went_on]).0, Outcome::Fail);
    stopped_without_a_pass(
        "client-stops-on-4xx",
        &[record("refused-422", vec![], vec![run(1, 1)], 0)],
    );
}

#[test]
fn key_per_operation() {
    let two = |second: &str| {
        record(
            "two-operations",
            vec![
                attempt(1, 1, 0.0, 201, Some(K1), BODY),
                attempt(2, 2, 10.0, 201, Some(second), BODY),
            ],
            vec![run(1, 0), run(2, 0)],
            2,
        )
    };
    assert_eq!(
        judged("client-key-per-operation", &[two(K2)]).0,
        Outcome::Pass
    );
    assert_eq!(
        judged("client-key-per-operation", &[two(K1)]).0,
        Outcome::Fail
    );
    let one = record(
        "two-operations",
        vec![attempt(1, 1, 0.0, 201, Some(K1), BODY)],
        vec![run(1, 0), run(2, 0)],
        1,
    );
    stopped_without_a_pass("client-key-per-operation", &[one]);
}

#[test]
fn every_client_check_has_its_test() {
    let tested = [
        "client-key-present",
        "client-key-syntax",
        "client-lost-response",
        "client-retry-after",
        "client-throttled",
        "client-stops-on-4xx",
        "client-key-per-operation",
    ];
    let ids: Vec<&str> = CATALOG.iter().map(|p| p.id).collect();
    assert_eq!(ids, tested);
}
