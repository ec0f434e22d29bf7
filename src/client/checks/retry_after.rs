//! `client-retry-after`: the next attempt waits what the server asked and carries the same key.

use crate::outcome::Stop;

use super::{
    next_attempt, ClientProbe, Findings, Judging, EXIT_STATUS, RETRY_AFTER_MS_WAITED,
    RETRY_AFTER_SAME_KEY, RETRY_AFTER_WAITED,
};

pub const PROBE: ClientProbe = ClientProbe {
    id: "client-retry-after",
        section: "RFC 9110 §10.2.3, draft-07 §2.7",
        stimulus: "Answers the first attempt with 503 (Retry-After: 1, Retry-After: 7, retry-after-ms: 1500) and, in another scenario, with 409 in flight (Retry-After: 2)",
        requirement: "The next attempt waits at least what the server asked and carries the same key",
        scenarios: &["retry-after-503", "retry-after-409", "retry-after-7s", "retry-after-ms"],
        checks: &[RETRY_AFTER_WAITED, RETRY_AFTER_MS_WAITED, RETRY_AFTER_SAME_KEY, EXIT_STATUS],
        judge,
};

fn judge(j: &Judging) -> Findings {
    let mut out = Findings::default();
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
