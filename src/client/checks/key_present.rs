//! `client-key-present`: the first attempt carries the key; the exit status says what happened.

use crate::check::{GradedCheck, Severity};

use super::{key_text, key_wanted, ClientProbe, Findings, Judging, EXIT_STATUS};

const KEY_PRESENT: GradedCheck = GradedCheck::new(
    Severity::Required,
    "key-on-first-attempt",
    "the first attempt carries the key",
);

pub const PROBE: ClientProbe = ClientProbe {
    id: "client-key-present",
    section: "draft-07 §2.1, §2.7",
    stimulus: "Runs the command once against a server that answers normally",
    requirement: "The client sends an Idempotency-Key on the first attempt of the operation",
    scenarios: &["created"],
    checks: &[KEY_PRESENT, EXIT_STATUS],
    judge,
};

fn judge(j: &Judging) -> Findings {
    let mut out = Findings::default();
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
