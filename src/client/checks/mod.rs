//! The client checks: one [`ClientProbe`] per report line, one file each, its checks typed
//! [`GradedCheck`] constants with their severity that its judge names, judged from the attempts the scenarios recorded.
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

use crate::check::{Check, GradedCheck, Severity};
use crate::keys::KeySyntax;
use crate::outcome::Stop;

use super::fake_api::{Attempt, Wait};
use super::scenario::ScenarioRecord;
use super::sent_key::{KeyCarrier, Place};

pub mod key_per_operation;
pub mod key_present;
pub mod key_syntax;
pub mod lost_response;
pub mod retry_after;
pub mod stops_on_4xx;
pub mod throttled;

pub const EXIT_STATUS: GradedCheck = GradedCheck::new(
    Severity::Required,
    "exit-status",
    "the command exits 0 if and only if its operations were created",
);
pub const RETRY_AFTER_WAITED: GradedCheck = GradedCheck::new(
    Severity::Recommended,
    "waited",
    "the next attempt comes no sooner than Retry-After",
);
pub const RETRY_AFTER_MS_WAITED: GradedCheck = GradedCheck::new(
    Severity::Info,
    "waited-ms",
    "the next attempt comes no sooner than retry-after-ms (a non-standard header)",
);
pub const RETRY_AFTER_SAME_KEY: GradedCheck = GradedCheck::new(
    Severity::Recommended,
    "same-key",
    "the next attempt carries the same key",
);

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
pub struct Findings {
    pub checks: Vec<Check>,
    pub stop: Option<Stop>,
}

impl Findings {
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
    /// The scenarios it is judged from; it is left out of a run that selects none of them.
    pub scenarios: &'static [&'static str],
    /// Every check it can make, for `idem-check list`.
    pub checks: &'static [GradedCheck],
    pub judge: fn(&Judging) -> Findings,
}

/// Every client probe, in report order.
pub const CATALOG: &[ClientProbe] = &[
    key_present::PROBE,
    key_syntax::PROBE,
    lost_response::PROBE,
    retry_after::PROBE,
    throttled::PROBE,
    stops_on_4xx::PROBE,
    key_per_operation::PROBE,
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
            out.push_str(&format!("    {:<12} {}\n", c.severity.as_str(), c.what()));
        }
    }
    out
}

/// The first attempt at a served operation for logical operation `op` in `r`, or the stop that
/// says why there is nothing to judge: no request came, or the fake API refused it for a
/// reason of the client's setup (credential, path, body) rather than the scenario's.
pub(super) fn first_attempt<'r>(
    j: &Judging,
    r: &'r ScenarioRecord,
    op: usize,
) -> Result<&'r Attempt, Stop> {
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

pub(super) fn key_text(carrier: &KeyCarrier, key: Option<&super::fake_api::SentKey>) -> String {
    match (key, &carrier.place) {
        (Some(k), _) => format!("{}: {}", carrier.label(), k.raw),
        (None, Place::Header(name)) => format!("no {name} header"),
        (None, Place::Body(pointer)) => format!("no key at {pointer} in the body"),
    }
}

/// What the first attempt should carry: "an Idempotency-Key header", "a key at
/// /idempotency_key in the body".
pub(super) fn key_wanted(carrier: &KeyCarrier) -> String {
    match &carrier.place {
        Place::Header(name) => format!("an {name} header"),
        Place::Body(pointer) => format!("a key at {pointer} in the body"),
    }
}

/// The wait and key checks on the attempt after a transient refusal; `false` when the client
/// did not try again.
pub(super) fn next_attempt(
    j: &Judging,
    out: &mut Findings,
    r: &ScenarioRecord,
    first: &Attempt,
) -> bool {
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

#[cfg(test)]
mod tests;

#[cfg(test)]
mod catalog_tests {
    use super::*;

    #[test]
    fn only_a_second_payment_is_critical() {
        let critical: Vec<(&str, &str)> = CATALOG
            .iter()
            .flat_map(|p| p.checks.iter().map(move |c| (p.id, c)))
            .filter(|(_, c)| c.severity == Severity::Critical)
            .map(|(p, c)| (p, c.id()))
            .collect();
        assert_eq!(critical, [("client-lost-response", "one-payment")]);
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
