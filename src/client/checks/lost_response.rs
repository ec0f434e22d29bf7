//! `client-lost-response`: a retry after a lost answer, with the same key and payload, ends with one payment.

use crate::check::{GradedCheck, Severity};
use crate::client::fake_api::Attempt;
use serde_json::Value;

use super::{key_text, ClientProbe, Findings, Judging};

const LOST_RETRIED: GradedCheck = GradedCheck::new(
    Severity::Required,
    "retried",
    "the client retries when the connection closed without an answer",
);
const LOST_SAME_KEY: GradedCheck = GradedCheck::new(
    Severity::Required,
    "same-key",
    "every retry carries the first attempt's key",
);
const LOST_SAME_PAYLOAD: GradedCheck = GradedCheck::new(
    Severity::Required,
    "same-payload",
    "every retry carries the first attempt's payload (equal JSON)",
);
const LOST_ONE_PAYMENT: GradedCheck = GradedCheck::new(
    Severity::Critical,
    "one-payment",
    "exactly one payment exists at the end",
);
const LOST_EXIT_SUCCESS: GradedCheck = GradedCheck::new(
    Severity::Required,
    "exit-success",
    "the command exits 0: the payment was created",
);

pub const PROBE: ClientProbe = ClientProbe {
    id: "client-lost-response",
        section: "draft-07 §2.6",
        stimulus: "Commits the first attempt, then closes its connection without answering",
        requirement: "The client retries with the same key and payload, ends with exactly one payment and reports success",
        scenarios: &["lost-response"],
        checks: &[LOST_RETRIED, LOST_SAME_KEY, LOST_SAME_PAYLOAD, LOST_ONE_PAYMENT, LOST_EXIT_SUCCESS],
        judge,
};

fn judge(j: &Judging) -> Findings {
    let mut out = Findings::default();
    for r in j.records {
        let Some(first) = out.first(j, r, 1) else {
            continue;
        };
        let attempts = r.operation(1);
        let retries = &attempts[1..];
        let all: Vec<usize> = attempts.iter().map(|a| a.exchange.n).collect();
        let run = r.run(1);
        out.checks.push(LOST_RETRIED.judge(
            !retries.is_empty(),
            format!(
                "another attempt after #{} was closed unanswered",
                first.exchange.n
            ),
            match (retries.len(), run) {
                (0, Some(run)) => format!("no further attempt; {}", run.exit.describe(j.timeout)),
                (0, None) => "no further attempt".into(),
                (n, _) => format!("{n} further attempt{}", if n == 1 { "" } else { "s" }),
            },
            all.clone(),
        ));
        if !retries.is_empty() {
            if first.key.is_some() {
                let other: Vec<&&Attempt> =
                    retries.iter().filter(|a| !a.same_key_as(first)).collect();
                out.checks.push(LOST_SAME_KEY.judge(
                    other.is_empty(),
                    key_text(j.carrier, first.key.as_ref()),
                    if other.is_empty() {
                        "the same key on every retry".to_string()
                    } else {
                        other
                            .iter()
                            .map(|a| {
                                format!("#{} {}", a.exchange.n, key_text(j.carrier, a.key.as_ref()))
                            })
                            .collect::<Vec<_>>()
                            .join("; ")
                    },
                    if other.is_empty() {
                        all.clone()
                    } else {
                        other.iter().map(|a| a.exchange.n).collect()
                    },
                ));
            } else {
                out.no_key(r.scenario.id);
            }
            let changed: Vec<(usize, String)> = retries
                .iter()
                .filter_map(|a| payload_change(first, a).map(|c| (a.exchange.n, c)))
                .collect();
            out.checks.push(LOST_SAME_PAYLOAD.judge(
                changed.is_empty(),
                format!("the payload of #{}", first.exchange.n),
                if changed.is_empty() {
                    "the same payload on every retry".to_string()
                } else {
                    changed
                        .iter()
                        .map(|(n, c)| format!("#{n}: {c}"))
                        .collect::<Vec<_>>()
                        .join("; ")
                },
                if changed.is_empty() {
                    all.clone()
                } else {
                    changed.iter().map(|(n, _)| *n).collect()
                },
            ));
        }
        out.checks.push(
            LOST_ONE_PAYMENT.judge(
                r.payments == 1,
                "1 payment",
                format!(
                    "{} payment{}",
                    r.payments,
                    if r.payments == 1 { "" } else { "s" }
                ),
                attempts
                    .iter()
                    .filter(|a| a.succeeded() || a.exchange.response().is_none())
                    .map(|a| a.exchange.n)
                    .collect(),
            ),
        );
        if let Some(run) = run {
            out.checks.push(LOST_EXIT_SUCCESS.judge(
                run.exit.success(),
                "exit 0",
                run.exit.describe(j.timeout),
                all,
            ));
        }
    }
    out
}

/// How `retry`'s payload differs from `first`'s, if it does ("reference: "a" → "b"").
fn payload_change(first: &Attempt, retry: &Attempt) -> Option<String> {
    match (&first.payload, &retry.payload) {
        (Some(a), Some(b)) if a == b => None,
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
            names.sort();
            names.dedup();
            let diffs: Vec<String> = names
                .into_iter()
                .filter(|n| a.get(*n) != b.get(*n))
                .map(|n| format!("{n}: {} → {}", shown(a.get(n)), shown(b.get(n))))
                .collect();
            Some(diffs.join(", "))
        }
        _ if first.exchange.request.body == retry.exchange.request.body => None,
        _ => Some("a different body".into()),
    }
}

fn shown(v: Option<&Value>) -> String {
    v.map_or("(absent)".into(), Value::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(body: &str) -> Attempt {
        let mut exchange = crate::check::test_exchange(1, 201, "");
        exchange.request.body = body.as_bytes().to_vec();
        Attempt {
            exchange,
            op: 1,
            operation: true,
            read: false,
            key: None,
            payload: serde_json::from_str(body).ok(),
            credential: "bearer".into(),
            setup_refusal: None,
        }
    }

    #[test]
    fn a_retry_payload_is_compared_as_json_not_as_bytes() {
        let first = attempt(r#"{"amountCents":1250,"currency":"EUR","reference":"r1"}"#);
        let reordered = attempt(r#"{ "reference": "r1", "currency": "EUR", "amountCents": 1250 }"#);
        assert_eq!(payload_change(&first, &reordered), None);
        let changed = attempt(r#"{"amountCents":1250,"currency":"EUR","reference":"r2"}"#);
        assert_eq!(
            payload_change(&first, &changed).as_deref(),
            Some(r#"reference: "r1" → "r2""#)
        );
        let added = attempt(r#"{"amountCents":1250,"currency":"EUR","reference":"r1","at":7}"#);
        assert_eq!(
            payload_change(&first, &added).as_deref(),
            Some("at: (absent) → 7")
        );
    }
}
