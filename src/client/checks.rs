//! The client checks: one [`ClientProbe`] per report line, each made of typed [`ClientCheck`]
//! declarations with their severity, judged from the attempts the scenarios recorded.
//!
//! | probe | scenarios | what must hold |
//! | --- | --- | --- |
//! | `client-key-present` | created | the first attempt carries the key (required) |
//! | `client-key-syntax` | created | an RFC 8941 String under ietf-draft-07, either form under stripe (required) |
//! | `client-lost-response` | lost-response | retry with the same key and payload, one payment, exit 0 (critical) |
//! | `client-retry-after` | retry-after-503, retry-after-409 | no sooner than Retry-After, same key (recommended) |
//! | `client-stops-on-4xx` | refused-422, refused-400 | no further attempt, exit non-zero (required) |
//! | `client-key-per-operation` | two-operations | two operations, two keys (critical) |

use serde_json::Value;

use crate::check::{Check, Severity};
use crate::keys::KeySyntax;
use crate::outcome::Stop;

use super::fake_api::{Attempt, Behaviour, SentKey, RETRY_AFTER_SECS};
use super::scenario::ScenarioRecord;

/// One check a client probe makes: a stable id, what it checks, and how much a failure matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientCheck {
    pub id: &'static str,
    pub what: &'static str,
    pub severity: Severity,
}

impl ClientCheck {
    /// The check's result: `expected` is every acceptable value, `actual` what was seen.
    fn judge(
        &self,
        passed: bool,
        expected: impl Into<String>,
        actual: impl Into<String>,
        exchanges: Vec<usize>,
    ) -> Check {
        Check {
            id: self.id.to_string(),
            what: self.what.to_string(),
            severity: self.severity,
            passed,
            expected: vec![expected.into()],
            actual: actual.into(),
            exchanges,
        }
    }
}

pub const KEY_PRESENT: ClientCheck = ClientCheck {
    id: "key-on-first-attempt",
    what: "the first attempt carries the key header",
    severity: Severity::Required,
};
pub const KEY_SYNTAX: ClientCheck = ClientCheck {
    id: "key-syntax",
    what: "the key is written as the suite requires",
    severity: Severity::Required,
};
pub const LOST_RETRIED: ClientCheck = ClientCheck {
    id: "retried",
    what: "the client retries when the connection closed without an answer",
    severity: Severity::Critical,
};
pub const LOST_SAME_KEY: ClientCheck = ClientCheck {
    id: "same-key",
    what: "every retry carries the first attempt's key",
    severity: Severity::Critical,
};
pub const LOST_SAME_PAYLOAD: ClientCheck = ClientCheck {
    id: "same-payload",
    what: "every retry carries the first attempt's payload (equal JSON)",
    severity: Severity::Critical,
};
pub const LOST_ONE_PAYMENT: ClientCheck = ClientCheck {
    id: "one-payment",
    what: "exactly one payment exists at the end",
    severity: Severity::Critical,
};
pub const LOST_EXIT_SUCCESS: ClientCheck = ClientCheck {
    id: "exit-success",
    what: "the command exits 0: the payment was created",
    severity: Severity::Critical,
};
pub const RETRY_AFTER_WAITED: ClientCheck = ClientCheck {
    id: "waited",
    what: "the next attempt comes no sooner than Retry-After",
    severity: Severity::Recommended,
};
pub const RETRY_AFTER_SAME_KEY: ClientCheck = ClientCheck {
    id: "same-key",
    what: "the next attempt carries the same key",
    severity: Severity::Recommended,
};
pub const STOP_NO_RETRY: ClientCheck = ClientCheck {
    id: "no-retry",
    what: "no further attempt after the refusal",
    severity: Severity::Required,
};
pub const STOP_EXIT_FAILURE: ClientCheck = ClientCheck {
    id: "exit-failure",
    what: "the command exits non-zero: no payment was created",
    severity: Severity::Required,
};
pub const DISTINCT_KEYS: ClientCheck = ClientCheck {
    id: "distinct-keys",
    what: "each operation has its own key",
    severity: Severity::Critical,
};

/// What a judge works with: the probe's scenarios (attempts already numbered for the report)
/// and the suite's key syntax.
pub struct Judging<'a> {
    pub records: &'a [ScenarioRecord],
    pub key_syntax: KeySyntax,
    /// The key header's name, as the suite spells it.
    pub header: &'a str,
    /// The per-scenario timeout, to say how a killed run ended.
    pub timeout: std::time::Duration,
}

/// The checks a judge made, and why it stopped early if it did.
#[derive(Default)]
pub struct Judged {
    pub checks: Vec<Check>,
    pub stop: Option<Stop>,
}

impl Judged {
    /// The first attempt of operation `op` in `r`, or `None` once the reason there is none to
    /// judge is recorded as the stop.
    fn first<'r>(&mut self, j: &Judging, r: &'r ScenarioRecord, op: usize) -> Option<&'r Attempt> {
        first_attempt(j, r, op)
            .map_err(|stop| self.stop = Some(stop))
            .ok()
    }
}

/// One line of the client report.
pub struct ClientProbe {
    pub id: &'static str,
    pub section: &'static str,
    pub stimulus: &'static str,
    pub requirement: &'static str,
    /// The scenarios it is judged from; it is left out when none of them ran.
    pub scenarios: &'static [&'static str],
    pub judge: fn(&Judging) -> Judged,
}

/// Every client probe, in report order.
pub const CATALOG: &[ClientProbe] = &[
    ClientProbe {
        id: "client-key-present",
        section: "draft-07 §2.1, §2.7",
        stimulus: "Runs the command once against a server that answers normally",
        requirement: "The client sends an Idempotency-Key on the first attempt of the operation",
        scenarios: &["created"],
        judge: key_present,
    },
    ClientProbe {
        id: "client-key-syntax",
        section: "draft-07 §2.1, RFC 8941 §3.3.3",
        stimulus: "Runs the command once against a server that answers normally",
        requirement: "The key is an RFC 8941 String (ietf-draft-07); bare values are fine under stripe",
        scenarios: &["created"],
        judge: key_syntax,
    },
    ClientProbe {
        id: "client-lost-response",
        section: "draft-07 §2.6",
        stimulus: "Commits the first attempt, then closes its connection without answering",
        requirement: "The client retries with the same key and payload, ends with exactly one payment and reports success",
        scenarios: &["lost-response"],
        judge: lost_response,
    },
    ClientProbe {
        id: "client-retry-after",
        section: "RFC 9110 §10.2.3, draft-07 §2.7",
        stimulus: "Answers the first attempt with 503, and in another scenario with 409 (in flight), each with Retry-After: 2",
        requirement: "The next attempt waits at least Retry-After and carries the same key",
        scenarios: &["retry-after-503", "retry-after-409"],
        judge: retry_after,
    },
    ClientProbe {
        id: "client-stops-on-4xx",
        section: "draft-07 §2.7, RFC 9110 §15.5",
        stimulus: "Answers the first attempt with 422 (key reused with another payload), and in another scenario with 400",
        requirement: "A definite refusal is final: no further attempt, and the command reports failure",
        scenarios: &["refused-422", "refused-400"],
        judge: stops_on_4xx,
    },
    ClientProbe {
        id: "client-key-per-operation",
        section: "draft-07 §2.1, §2.6",
        stimulus: "Runs the command twice: two operations",
        requirement: "Each logical operation gets its own key (a reused key would replay the first payment instead of making the second)",
        scenarios: &["two-operations"],
        judge: key_per_operation,
    },
];

/// The first attempt at the operation of `op` in `r`, or the ERROR that says why there is
/// nothing to judge: no request came, or the fake API refused it for a reason of the client's
/// setup (no token, a payload without the expected fields) rather than the scenario's.
fn first_attempt<'r>(j: &Judging, r: &'r ScenarioRecord, op: usize) -> Result<&'r Attempt, Stop> {
    let Some(first) = r.operation(op).first().copied() else {
        let exit = r
            .run(op)
            .map(|run| {
                let exit = run.exit.describe(j.timeout);
                format!(" ({exit} after {:.0} ms)", run.duration_ms)
            })
            .unwrap_or_default();
        return Err(Stop::Error(format!(
            "the client made no POST /api/payments in scenario {}{exit}; its output is in the timeline",
            r.scenario.id
        )));
    };
    let injected = match r.scenario.behaviour {
        Behaviour::Invalid => Some(400),
        Behaviour::Mismatch => Some(422),
        _ => None,
    };
    match first.exchange.response.as_ref() {
        Some(resp) if matches!(resp.status, 400 | 401 | 413) && injected != Some(resp.status) => {
            let detail = resp
                .json()
                .and_then(|b| b.get("detail").and_then(|d| d.as_str().map(str::to_string)))
                .unwrap_or_default();
            Err(Stop::Error(format!(
                "the fake API refused #{} with {} ({detail}), so scenario {} never happened: fix the client's request",
                first.exchange.n, resp.status, r.scenario.id
            )))
        }
        _ => Ok(first),
    }
}

fn key_text(header: &str, key: Option<&SentKey>) -> String {
    match key {
        Some(k) => format!("{header}: {}", k.raw),
        None => format!("no {header} header"),
    }
}

fn key_present(j: &Judging) -> Judged {
    let mut out = Judged::default();
    for r in j.records {
        if let Some(a) = out.first(j, r, 1) {
            out.checks.push(KEY_PRESENT.judge(
                a.key.is_some(),
                format!("an {} header", j.header),
                key_text(j.header, a.key.as_ref()),
                vec![a.exchange.n],
            ));
        }
    }
    out
}

fn key_syntax(j: &Judging) -> Judged {
    let mut out = Judged::default();
    for r in j.records {
        let Some(a) = out.first(j, r, 1) else {
            continue;
        };
        let Some(key) = &a.key else {
            out.stop = Some(Stop::Inconclusive(
                "no key was sent, so there is no syntax to judge (see client-key-present)".into(),
            ));
            continue;
        };
        let (passed, expected) = match j.key_syntax {
            KeySyntax::SfString => (
                key.sf_string,
                "an RFC 8941 String, e.g. \"8e03978e-40d5-43e8-bc93-6894a57f9324\"",
            ),
            KeySyntax::Bare => (
                !key.value.is_empty(),
                "a non-empty key, bare or as an RFC 8941 String",
            ),
        };
        let actual = if key.sf_string {
            format!("an RFC 8941 String: {}", key.raw)
        } else {
            format!("not an RFC 8941 String: {}", key.raw)
        };
        out.checks
            .push(KEY_SYNTAX.judge(passed, expected, actual, vec![a.exchange.n]));
    }
    out
}

fn lost_response(j: &Judging) -> Judged {
    let mut out = Judged::default();
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
            let other_key: Vec<String> = retries
                .iter()
                .filter(|a| !a.same_key_as(first))
                .map(|a| format!("#{} {}", a.exchange.n, key_text(j.header, a.key.as_ref())))
                .collect();
            out.checks.push(LOST_SAME_KEY.judge(
                other_key.is_empty(),
                key_text(j.header, first.key.as_ref()),
                if other_key.is_empty() {
                    "the same key on every retry".to_string()
                } else {
                    other_key.join("; ")
                },
                all.clone(),
            ));
            let changed: Vec<String> = retries
                .iter()
                .filter_map(|a| payload_change(first, a).map(|c| format!("#{}: {c}", a.exchange.n)))
                .collect();
            out.checks.push(LOST_SAME_PAYLOAD.judge(
                changed.is_empty(),
                format!("the payload of #{}", first.exchange.n),
                if changed.is_empty() {
                    "the same payload on every retry".to_string()
                } else {
                    changed.join("; ")
                },
                all.clone(),
            ));
        }
        out.checks.push(LOST_ONE_PAYMENT.judge(
            r.payments == 1,
            "1 payment",
            format!(
                "{} payment{}",
                r.payments,
                if r.payments == 1 { "" } else { "s" }
            ),
            all.clone(),
        ));
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

fn retry_after(j: &Judging) -> Judged {
    let mut out = Judged::default();
    let mut retried = false;
    for r in j.records {
        let Some(first) = out.first(j, r, 1) else {
            continue;
        };
        let attempts = r.operation(1);
        let Some(next) = attempts.get(1) else {
            continue;
        };
        retried = true;
        let status = first.exchange.status_text();
        let gap = next.exchange.start_ms - first.exchange.end_ms();
        let wait_ms = (RETRY_AFTER_SECS * 1000) as f64;
        let cited = vec![first.exchange.n, next.exchange.n];
        out.checks.push(RETRY_AFTER_WAITED.judge(
            gap >= wait_ms,
            format!(
                "#{} at least {wait_ms:.0} ms after the {status} (Retry-After: {RETRY_AFTER_SECS})",
                next.exchange.n
            ),
            format!("#{} came {gap:.0} ms after the {status}", next.exchange.n),
            cited.clone(),
        ));
        let same = next.same_key_as(first);
        out.checks.push(RETRY_AFTER_SAME_KEY.judge(
            same,
            key_text(j.header, first.key.as_ref()),
            format!(
                "#{} {}",
                next.exchange.n,
                key_text(j.header, next.key.as_ref())
            ),
            cited,
        ));
    }
    if !retried && out.stop.is_none() {
        out.stop = Some(Stop::Inconclusive(
            "the client did not retry after the 503 or the 409, so there is no wait to judge"
                .into(),
        ));
    }
    out
}

fn stops_on_4xx(j: &Judging) -> Judged {
    let mut out = Judged::default();
    for r in j.records {
        let Some(first) = out.first(j, r, 1) else {
            continue;
        };
        let attempts = r.operation(1);
        let status = first.exchange.status_text();
        let more: Vec<String> = attempts[1..]
            .iter()
            .map(|a| format!("#{} at +{:.0} ms", a.exchange.n, a.exchange.start_ms))
            .collect();
        let all: Vec<usize> = attempts.iter().map(|a| a.exchange.n).collect();
        out.checks.push(STOP_NO_RETRY.judge(
            more.is_empty(),
            format!("nothing after the {status} of #{}", first.exchange.n),
            if more.is_empty() {
                "no further attempt".to_string()
            } else {
                format!("after the {status}: {}", more.join(", "))
            },
            all.clone(),
        ));
        if let Some(run) = r.run(1) {
            let failed = matches!(run.exit, super::command::Exit::Code(c) if c != 0);
            out.checks.push(STOP_EXIT_FAILURE.judge(
                failed,
                format!("a non-zero exit after the {status}"),
                run.exit.describe(j.timeout),
                all,
            ));
        }
    }
    out
}

fn key_per_operation(j: &Judging) -> Judged {
    let mut out = Judged::default();
    for r in j.records {
        let firsts: Vec<&Attempt> = match (1..=r.scenario.runs)
            .map(|op| first_attempt(j, r, op))
            .collect::<Result<_, _>>()
        {
            Ok(f) => f,
            Err(stop) => {
                out.stop = Some(match stop {
                    // Under --listen the second operation may simply not have been run.
                    Stop::Error(e) if r.runs.is_empty() => Stop::Inconclusive(format!(
                        "{e}; run the client twice against this scenario"
                    )),
                    other => other,
                });
                continue;
            }
        };
        if firsts.iter().any(|a| a.key.is_none()) {
            out.stop = Some(Stop::Inconclusive(
                "an operation was sent without a key, so there are no keys to compare (see client-key-present)"
                    .into(),
            ));
            continue;
        }
        let keys: Vec<&str> = firsts
            .iter()
            .filter_map(|a| a.key.as_ref().map(|k| k.value.as_str()))
            .collect();
        let mut distinct = keys.clone();
        distinct.sort_unstable();
        distinct.dedup();
        out.checks.push(
            DISTINCT_KEYS.judge(
                distinct.len() == keys.len(),
                format!("{} different keys", keys.len()),
                keys.iter()
                    .zip(&firsts)
                    .map(|(k, a)| format!("#{} {k}", a.exchange.n))
                    .collect::<Vec<_>>()
                    .join(", "),
                firsts.iter().map(|a| a.exchange.n).collect(),
            ),
        );
    }
    out
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
            key: None,
            payload: serde_json::from_str(body).ok(),
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

    #[test]
    fn every_probe_reads_known_scenarios() {
        for p in CATALOG {
            for s in p.scenarios {
                assert!(super::super::scenario::find(s).is_ok(), "{}: {s}", p.id);
            }
        }
    }
}
