//! `client-throttled`: after a 429 or a 408 nothing was executed, so the client tries again.

use crate::check::{GradedCheck, Severity};

use super::{
    next_attempt, ClientProbe, Findings, Judging, EXIT_STATUS, RETRY_AFTER_SAME_KEY,
    RETRY_AFTER_WAITED,
};

const THROTTLED_RETRIED: GradedCheck = GradedCheck::new(
    Severity::Recommended,
    "retried",
    "the client tries again after a 429 or 408: nothing was executed",
);

pub const PROBE: ClientProbe = ClientProbe {
    id: "client-throttled",
        section: "RFC 6585 §4, RFC 9110 §15.5.9",
        stimulus: "Answers the first attempt with 429 (Retry-After: 1), and in another scenario with 408",
        requirement: "Nothing was executed, so the client tries again, no sooner than Retry-After, with the same key",
        scenarios: &["throttled-429", "timeout-408"],
        checks: &[THROTTLED_RETRIED, RETRY_AFTER_WAITED, RETRY_AFTER_SAME_KEY, EXIT_STATUS],
        judge,
};

fn judge(j: &Judging) -> Findings {
    let mut out = Findings::default();
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
