//! `client-key-per-operation`: each logical operation gets its own key.

use crate::check::{GradedCheck, Severity};
use crate::client::fake_api::Attempt;
use crate::outcome::Stop;

use super::{first_attempt, ClientProbe, Findings, Judging, EXIT_STATUS};

const DISTINCT_KEYS: GradedCheck = GradedCheck::new(
    Severity::Required,
    "distinct-keys",
    "each operation has its own key (one process per operation)",
);
const DISTINCT_KEYS_IN_PROCESS: GradedCheck = GradedCheck::new(
    Severity::Required,
    "distinct-keys-in-process",
    "each operation has its own key (several operations in one process)",
);

pub const PROBE: ClientProbe = ClientProbe {
    id: "client-key-per-operation",
        section: "draft-07 §2.1, §2.6",
        stimulus: "Runs the command twice, then once with IDEM_CHECK_OPERATIONS=2: two operations each time",
        requirement: "Each logical operation gets its own key (a reused key would replay the first payment instead of making the second)",
        scenarios: &["two-operations", "operations-in-one-process"],
        checks: &[DISTINCT_KEYS, DISTINCT_KEYS_IN_PROCESS, EXIT_STATUS],
        judge,
};

fn judge(j: &Judging) -> Findings {
    let mut out = Findings::default();
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
