//! `client-stops-on-4xx`: a definite refusal is final.

use crate::check::{GradedCheck, Severity};
use crate::client::command::Exit;

use super::{ClientProbe, Findings, Judging};

const STOP_NO_RETRY: GradedCheck = GradedCheck::new(
    Severity::Required,
    "no-retry",
    "no further attempt after the refusal",
);
const STOP_EXIT_FAILURE: GradedCheck = GradedCheck::new(
    Severity::Required,
    "exit-failure",
    "the command's exit says what happened: non-zero when the refusal stood, 0 only if a payment was created",
);

pub const PROBE: ClientProbe = ClientProbe {
    id: "client-stops-on-4xx",
        section: "draft-07 §2.7, RFC 9110 §15.5",
        stimulus: "Answers the first attempt with 422 (key reused with another payload), and in another scenario with 400",
        requirement: "A definite refusal is final: no further attempt, and the command reports failure",
        scenarios: &["refused-422", "refused-400"],
        checks: &[STOP_NO_RETRY, STOP_EXIT_FAILURE],
        judge,
};

fn judge(j: &Judging) -> Findings {
    let mut out = Findings::default();
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
