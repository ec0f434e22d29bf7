//! The client checks: one [`ClientProbe`] per report line, each made of typed [`ClientCheck`]
//! declarations with their severity, judged from the attempts the scenarios recorded.
//!
//! | probe | scenarios | what must hold |
//! | --- | --- | --- |
//! | `client-key-present` | created | the first attempt carries the key (required), the exit status says what happened |
//! | `client-key-syntax` | created | an RFC 8941 String under ietf-draft-07, either form under stripe (required) |
//! | `client-lost-response` | lost-response | retry with the same key and payload, exit 0 (required); one payment (critical) |
//! | `client-retry-after` | retry-after-* | no sooner than Retry-After, same key (recommended) |
//! | `client-throttled` | throttled-429, timeout-408 | retried, after Retry-After, same key (recommended) |
//! | `client-stops-on-4xx` | refused-422, refused-400 | no further attempt, exit non-zero (required) |
//! | `client-key-per-operation` | two-operations, operations-in-one-process | one key per operation (required) |
//!
//! A severity says what the check saw (as for the server probes): `critical` only for a
//! duplicated effect, a leak or a lost record, so only a second payment is critical. A retry
//! with another key or payload, no retry, a key reused across operations or a wrong exit status
//! is how a duplicate or a misreport comes about, but not one seen: those are `required`.
//!
//! A check about the key a retry carries is made only when the first attempt carried one: with
//! no key there is nothing to compare, and the probe says so (INCONCLUSIVE, see
//! `client-key-present`) instead of passing.

use serde_json::Value;

use super::carrier::{KeyCarrier, Place, Syntax};
use crate::check::{Check, Severity};
use crate::keys::KeySyntax;
use crate::outcome::Stop;

use super::command::Exit;
use super::fake_api::{Attempt, Wait};
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
            symptom: Default::default(),
        }
    }
}

pub const KEY_PRESENT: ClientCheck = ClientCheck {
    id: "key-on-first-attempt",
    what: "the first attempt carries the key",
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
    severity: Severity::Required,
};
pub const LOST_SAME_KEY: ClientCheck = ClientCheck {
    id: "same-key",
    what: "every retry carries the first attempt's key",
    severity: Severity::Required,
};
pub const LOST_SAME_PAYLOAD: ClientCheck = ClientCheck {
    id: "same-payload",
    what: "every retry carries the first attempt's payload (equal JSON)",
    severity: Severity::Required,
};
pub const LOST_ONE_PAYMENT: ClientCheck = ClientCheck {
    id: "one-payment",
    what: "exactly one payment exists at the end",
    severity: Severity::Critical,
};
pub const LOST_EXIT_SUCCESS: ClientCheck = ClientCheck {
    id: "exit-success",
    what: "the command exits 0: the payment was created",
    severity: Severity::Required,
};
pub const RETRY_AFTER_WAITED: ClientCheck = ClientCheck {
    id: "waited",
    what: "the next attempt comes no sooner than Retry-After",
    severity: Severity::Recommended,
};
pub const RETRY_AFTER_MS_WAITED: ClientCheck = ClientCheck {
    id: "waited-ms",
    what: "the next attempt comes no sooner than retry-after-ms (a non-standard header)",
    severity: Severity::Info,
};
pub const RETRY_AFTER_SAME_KEY: ClientCheck = ClientCheck {
    id: "same-key",
    what: "the next attempt carries the same key",
    severity: Severity::Recommended,
};
pub const THROTTLED_RETRIED: ClientCheck = ClientCheck {
    id: "retried",
    what: "the client tries again after a 429 or 408: nothing was executed",
    severity: Severity::Recommended,
};
pub const STOP_NO_RETRY: ClientCheck = ClientCheck {
    id: "no-retry",
    what: "no further attempt after the refusal",
    severity: Severity::Required,
};
pub const STOP_EXIT_FAILURE: ClientCheck = ClientCheck {
    id: "exit-failure",
    what: "the command's exit says what happened: non-zero when the refusal stood, 0 only if a payment was created",
    severity: Severity::Required,
};
pub const DISTINCT_KEYS: ClientCheck = ClientCheck {
    id: "distinct-keys",
    what: "each operation has its own key (one process per operation)",
    severity: Severity::Required,
};
pub const DISTINCT_KEYS_IN_PROCESS: ClientCheck = ClientCheck {
    id: "distinct-keys-in-process",
    what: "each operation has its own key (several operations in one process)",
    severity: Severity::Required,
};
pub const EXIT_STATUS: ClientCheck = ClientCheck {
    id: "exit-status",
    what: "the command exits 0 if and only if its operations were created",
    severity: Severity::Required,
};

/// What a judge works with: the probe's scenarios (attempts already numbered for the report)
/// and the suite's key syntax.
pub struct Judging<'a> {
    pub records: &'a [ScenarioRecord],
    pub key_syntax: KeySyntax,
    /// Where the key travels and how it is written.
    pub carrier: &'a KeyCarrier,
    /// The per-scenario timeout, to say how a killed run ended.
    pub timeout: std::time::Duration,
    /// The served operations, as the evidence names them ("POST /api/payments").
    pub served: &'a str,
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

    /// Records that a key check was not made because the first attempt had no key.
    fn no_key(&mut self, scenario: &str) {
        self.stop.get_or_insert(Stop::Inconclusive(format!(
            "no key was sent in {scenario}, so there is no key to compare on the retry (see client-key-present)"
        ).into()));
    }

    /// One [`EXIT_STATUS`] check per run of `r`: exit 0 exactly when every operation of the run
    /// got a 2xx.
    fn exit_status(&mut self, j: &Judging, r: &ScenarioRecord) {
        for run in &r.runs {
            let ops = r.operations_of_run(run.run);
            let attempts: Vec<&Attempt> = ops.iter().flat_map(|op| r.operation(*op)).collect();
            if attempts.is_empty() {
                continue;
            }
            let created = ops
                .iter()
                .filter(|op| r.operation(**op).iter().any(|a| a.succeeded()));
            let created = created.count();
            let all = created == ops.len();
            let what = if ops.len() == 1 {
                if all {
                    "the operation was created".to_string()
                } else {
                    "nothing was created".to_string()
                }
            } else {
                format!("{created} of {} operations were created", ops.len())
            };
            self.checks.push(EXIT_STATUS.judge(
                run.exit.success() == all,
                format!(
                    "{} ({what})",
                    if all { "exit 0" } else { "a non-zero exit" }
                ),
                format!("{}: {}", r.scenario.id, run.exit.describe(j.timeout)),
                attempts.iter().map(|a| a.exchange.n).collect(),
            ));
        }
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
    /// Every check it can make, for `idem-check list`.
    pub checks: &'static [ClientCheck],
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
        checks: &[KEY_PRESENT, EXIT_STATUS],
        judge: key_present,
    },
    ClientProbe {
        id: "client-key-syntax",
        section: "draft-07 §2.1, RFC 8941 §3.3.3",
        stimulus: "Runs the command once against a server that answers normally",
        requirement: "The key is written as its carrier requires: an RFC 8941 String in the draft's Idempotency-Key (bare values are fine under stripe), any non-empty value under a token carrier (a provider's header or a body field)",
        scenarios: &["created"],
        checks: &[KEY_SYNTAX],
        judge: key_syntax,
    },
    ClientProbe {
        id: "client-lost-response",
        section: "draft-07 §2.6",
        stimulus: "Commits the first attempt, then closes its connection without answering",
        requirement: "The client retries with the same key and payload, ends with exactly one payment and reports success",
        scenarios: &["lost-response"],
        checks: &[LOST_RETRIED, LOST_SAME_KEY, LOST_SAME_PAYLOAD, LOST_ONE_PAYMENT, LOST_EXIT_SUCCESS],
        judge: lost_response,
    },
    ClientProbe {
        id: "client-retry-after",
        section: "RFC 9110 §10.2.3, draft-07 §2.7",
        stimulus: "Answers the first attempt with 503 (Retry-After: 1, Retry-After: 7, retry-after-ms: 1500) and, in another scenario, with 409 in flight (Retry-After: 2)",
        requirement: "The next attempt waits at least what the server asked and carries the same key",
        scenarios: &["retry-after-503", "retry-after-409", "retry-after-7s", "retry-after-ms"],
        checks: &[RETRY_AFTER_WAITED, RETRY_AFTER_MS_WAITED, RETRY_AFTER_SAME_KEY, EXIT_STATUS],
        judge: retry_after,
    },
    ClientProbe {
        id: "client-throttled",
        section: "RFC 6585 §4, RFC 9110 §15.5.9",
        stimulus: "Answers the first attempt with 429 (Retry-After: 1), and in another scenario with 408",
        requirement: "Nothing was executed, so the client tries again, no sooner than Retry-After, with the same key",
        scenarios: &["throttled-429", "timeout-408"],
        checks: &[THROTTLED_RETRIED, RETRY_AFTER_WAITED, RETRY_AFTER_SAME_KEY, EXIT_STATUS],
        judge: throttled,
    },
    ClientProbe {
        id: "client-stops-on-4xx",
        section: "draft-07 §2.7, RFC 9110 §15.5",
        stimulus: "Answers the first attempt with 422 (key reused with another payload), and in another scenario with 400",
        requirement: "A definite refusal is final: no further attempt, and the command reports failure",
        scenarios: &["refused-422", "refused-400"],
        checks: &[STOP_NO_RETRY, STOP_EXIT_FAILURE],
        judge: stops_on_4xx,
    },
    ClientProbe {
        id: "client-key-per-operation",
        section: "draft-07 §2.1, §2.6",
        stimulus: "Runs the command twice, then once with IDEM_CHECK_OPERATIONS=2: two operations each time",
        requirement: "Each logical operation gets its own key (a reused key would replay the first payment instead of making the second)",
        scenarios: &["two-operations", "operations-in-one-process"],
        checks: &[DISTINCT_KEYS, DISTINCT_KEYS_IN_PROCESS, EXIT_STATUS],
        judge: key_per_operation,
    },
];

/// `idem-check list`'s section for the client checks: each probe, its scenarios and its checks
/// with their severities.
pub fn listing() -> String {
    let mut out = String::from(
        "\nclient checks (idem-check client -- CMD)\n\n\
         probe                      scenarios\n",
    );
    for p in CATALOG {
        out.push_str(&format!("{:<26} {}\n", p.id, p.scenarios.join(", ")));
        for c in p.checks {
            out.push_str(&format!("    {:<12} {}\n", c.severity.as_str(), c.what));
        }
    }
    out
}

/// The first attempt at a served operation for logical operation `op` in `r`, or the stop that
/// says why there is nothing to judge: no request came, or the fake API refused it for a
/// reason of the client's setup (credential, path, body) rather than the scenario's.
fn first_attempt<'r>(j: &Judging, r: &'r ScenarioRecord, op: usize) -> Result<&'r Attempt, Stop> {
    let first = r.operation(op).first().copied();
    let stray = || r.attempts.iter().find(|a| !a.operation);
    if let Some(refused) = first.or_else(stray).filter(|a| a.setup_refusal.is_some()) {
        let status = refused.exchange.status().unwrap_or_default();
        return Err(Stop::Error(format!(
            "the fake API refused #{} with {status} ({}), so scenario {} never happened: fix the client's request",
            refused.exchange.n,
            refused.setup_refusal.as_deref().unwrap_or_default(),
            r.scenario.id
        ).into()));
    }
    if let Some(first) = first {
        return Ok(first);
    }
    if op > 1 && r.operations_seen() > 0 {
        let seen = r.operations_seen();
        let asked = r.scenario.total_operations();
        let how = if r.runs.is_empty() {
            format!("run the client {asked} times against this scenario")
        } else if r.scenario.operations > 1 {
            format!(
                "the client must perform IDEM_CHECK_OPERATIONS={} operations",
                r.scenario.operations
            )
        } else {
            "every run must perform one".to_string()
        };
        return Err(Stop::Inconclusive(format!(
            "only {seen} of the {asked} operations of scenario {} came, so there is no second key to compare; {how}",
            r.scenario.id
        ).into()));
    }
    let exit = r
        .run(1)
        .map(|run| {
            let exit = run.exit.describe(j.timeout);
            format!(" ({exit} after {:.0} ms)", run.duration_ms)
        })
        .unwrap_or_default();
    Err(Stop::Error(
        format!(
            "the client made no request to {} in scenario {}{exit}; its output is in the timeline",
            j.served, r.scenario.id
        )
        .into(),
    ))
}

fn key_text(carrier: &KeyCarrier, key: Option<&super::fake_api::SentKey>) -> String {
    match (key, &carrier.place) {
        (Some(k), _) => format!("{}: {}", carrier.label(), k.raw),
        (None, Place::Header(name)) => format!("no {name} header"),
        (None, Place::Body(pointer)) => format!("no key at {pointer} in the body"),
    }
}

/// What the first attempt should carry: "an Idempotency-Key header", "a key at
/// /idempotency_key in the body".
fn key_wanted(carrier: &KeyCarrier) -> String {
    match &carrier.place {
        Place::Header(name) => format!("an {name} header"),
        Place::Body(pointer) => format!("a key at {pointer} in the body"),
    }
}

fn key_present(j: &Judging) -> Judged {
    let mut out = Judged::default();
    for r in j.records {
        if let Some(a) = out.first(j, r, 1) {
            out.checks.push(KEY_PRESENT.judge(
                a.key.is_some(),
                key_wanted(j.carrier),
                key_text(j.carrier, a.key.as_ref()),
                vec![a.exchange.n],
            ));
            out.exit_status(j, r);
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
        if j.carrier.syntax == Syntax::Token {
            // The provider's own rules: any non-empty value is a key, and quotes would be
            // part of it, so nothing here may ask for them.
            out.checks.push(KEY_SYNTAX.judge(
                !key.value.is_empty(),
                format!("a non-empty opaque key ({})", j.carrier),
                format!("{}: {}", j.carrier.label(), key.raw),
                vec![a.exchange.n],
            ));
            continue;
        }
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

/// The wait and key checks on the attempt after a transient refusal; `false` when the client
/// did not try again.
fn next_attempt(j: &Judging, out: &mut Judged, r: &ScenarioRecord, first: &Attempt) -> bool {
    let attempts = r.operation(1);
    let Some(next) = attempts.get(1) else {
        return false;
    };
    let status = first.exchange.status_text();
    let gap = (next.exchange.start_ms - first.exchange.end_ms()).max(0.0);
    let cited = vec![first.exchange.n, next.exchange.n];
    let wait = r.scenario.wait();
    if let Some(wait_ms) = wait.ms() {
        let (check, header) = match wait {
            Wait::Millis(ms) => (RETRY_AFTER_MS_WAITED, format!("retry-after-ms: {ms}")),
            _ => (
                RETRY_AFTER_WAITED,
                format!("Retry-After: {}", wait_ms / 1000),
            ),
        };
        out.checks.push(check.judge(
            gap >= wait_ms as f64,
            format!(
                "#{} at least {wait_ms} ms after the {status} ({header})",
                next.exchange.n
            ),
            format!(
                "{}: #{} came {gap:.0} ms after the {status}",
                r.scenario.id, next.exchange.n
            ),
            cited.clone(),
        ));
    }
    if first.key.is_some() {
        out.checks.push(RETRY_AFTER_SAME_KEY.judge(
            next.same_key_as(first),
            key_text(j.carrier, first.key.as_ref()),
            format!(
                "#{} {}",
                next.exchange.n,
                key_text(j.carrier, next.key.as_ref())
            ),
            vec![next.exchange.n],
        ));
    } else {
        out.no_key(r.scenario.id);
    }
    true
}

fn retry_after(j: &Judging) -> Judged {
    let mut out = Judged::default();
    let mut retried = false;
    for r in j.records {
        let Some(first) = out.first(j, r, 1) else {
            continue;
        };
        retried |= next_attempt(j, &mut out, r, first);
        out.exit_status(j, r);
    }
    if !retried && out.stop.is_none() {
        out.stop = Some(Stop::Inconclusive(
            "the client did not retry after the 503 or the 409, so there is no wait to judge"
                .into(),
        ));
    }
    out
}

fn throttled(j: &Judging) -> Judged {
    let mut out = Judged::default();
    for r in j.records {
        let Some(first) = out.first(j, r, 1) else {
            continue;
        };
        let status = first.exchange.status_text();
        let retried = next_attempt(j, &mut out, r, first);
        out.checks.push(THROTTLED_RETRIED.judge(
            retried,
            format!(
                "another attempt after the {status} of #{}",
                first.exchange.n
            ),
            match r.run(1) {
                Some(run) if !retried => format!(
                    "{}: no further attempt; {}",
                    r.scenario.id,
                    run.exit.describe(j.timeout)
                ),
                _ if !retried => format!("{}: no further attempt", r.scenario.id),
                _ => format!("{}: tried again", r.scenario.id),
            },
            vec![first.exchange.n],
        ));
        out.exit_status(j, r);
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
            let failed = matches!(run.exit, Exit::Code(c) if c != 0);
            // A client that went on after the refusal (already a no-retry FAIL) may have
            // created the payment after all; its exit is then judged against that.
            let created = attempts.iter().find(|a| a.succeeded());
            let (passed, expected, cited) = match created {
                None => (
                    failed,
                    format!("a non-zero exit: the {status} stood and nothing was created"),
                    vec![first.exchange.n],
                ),
                Some(a) => (
                    matches!(run.exit, Exit::Code(0)),
                    format!(
                        "exit 0: #{} created the payment after the {status}",
                        a.exchange.n
                    ),
                    vec![first.exchange.n, a.exchange.n],
                ),
            };
            out.checks.push(STOP_EXIT_FAILURE.judge(
                passed,
                expected,
                run.exit.describe(j.timeout),
                cited,
            ));
        }
    }
    out
}

fn key_per_operation(j: &Judging) -> Judged {
    let mut out = Judged::default();
    for r in j.records {
        let firsts: Vec<&Attempt> = match (1..=r.scenario.total_operations())
            .map(|op| first_attempt(j, r, op))
            .collect::<Result<_, _>>()
        {
            Ok(f) => f,
            Err(stop) => {
                out.stop = Some(stop);
                out.exit_status(j, r);
                continue;
            }
        };
        out.exit_status(j, r);
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
        let check = if r.scenario.operations > 1 {
            DISTINCT_KEYS_IN_PROCESS
        } else {
            DISTINCT_KEYS
        };
        out.checks.push(check.judge(
            distinct.len() == keys.len(),
            format!("{} different keys", keys.len()),
            format!(
                "{}: {}",
                r.scenario.id,
                keys.iter()
                    .zip(&firsts)
                    .map(|(k, a)| format!("#{} {k}", a.exchange.n))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            firsts.iter().map(|a| a.exchange.n).collect(),
        ));
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

    #[test]
    fn only_a_second_payment_is_critical() {
        let critical: Vec<&str> = CATALOG
            .iter()
            .flat_map(|p| p.checks.iter())
            .filter(|c| c.severity == Severity::Critical)
            .map(|c| c.what)
            .collect();
        assert_eq!(critical, [LOST_ONE_PAYMENT.what]);
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
