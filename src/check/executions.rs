//! Verifiers of the executions the counter saw: exactly, at most or within a range, nothing
//! behind errors, and no violating key in a stress run.

use super::*;

/// The number of executions observed equals what was expected (`executions` comes from
/// [`crate::effects`], which names its basis in `basis`).
pub fn executions(
    spec: &CheckSpec,
    basis: &str,
    expected: u64,
    observed: u64,
    exchanges: Vec<usize>,
) -> Check {
    execution_check(
        spec,
        observed == expected,
        format!("{expected} execution{}", plural(expected)),
        basis,
        observed,
        exchanges,
    )
}

/// [`executions`] for a count from [`crate::effects`], citing the exchanges it was counted from.
pub fn executed(spec: &CheckSpec, e: &Executions, expected: u64) -> Check {
    executions(spec, &e.basis, expected, e.count, e.exchanges.clone())
}

/// At most `limit` executions were observed (used where a retry may legally have been refused).
pub fn executions_at_most(
    spec: &CheckSpec,
    basis: &str,
    limit: u64,
    observed: u64,
    exchanges: Vec<usize>,
) -> Check {
    execution_check(
        spec,
        observed <= limit,
        format!("at most {limit} execution{}", plural(limit)),
        basis,
        observed,
        exchanges,
    )
}

/// Between `lo` and `hi` executions were observed: where `hi - lo` requests went unanswered,
/// each may or may not have executed, so only a count outside the range is seen to be wrong.
pub fn executions_within(
    spec: &CheckSpec,
    basis: &str,
    (lo, hi): (u64, u64),
    observed: u64,
    exchanges: Vec<usize>,
) -> Check {
    if lo == hi {
        return executions(spec, basis, lo, observed, exchanges);
    }
    execution_check(
        spec,
        (lo..=hi).contains(&observed),
        format!("{lo} to {hi} executions"),
        basis,
        observed,
        exchanges,
    )
}

/// An execution count compared with `expected` ("1 execution"), which names the `basis` the
/// count was made on.
fn execution_check(
    spec: &CheckSpec,
    passed: bool,
    expected: String,
    basis: &str,
    observed: u64,
    exchanges: Vec<usize>,
) -> Check {
    Check::from_spec(
        spec,
        passed,
        vec![format!("{expected} ({basis})")],
        format!("{observed} execution{}", plural(observed)),
        exchanges,
    )
    .showing(Symptom::Executions)
}

/// [`executions_at_most`] for a count from [`crate::effects`], citing the exchanges it was
/// counted from.
pub fn executed_at_most(spec: &CheckSpec, e: &Executions, limit: u64) -> Check {
    executions_at_most(spec, &e.basis, limit, e.count, e.exchanges.clone())
}

/// No execution stands behind an error answer: `e` counts the executions of `errors`, requests
/// that were all answered 4xx or 5xx. A client that sees an error retries with a new key or
/// gives up, so anything those requests executed is orphaned or done twice.
pub fn nothing_behind_errors(spec: &CheckSpec, e: &Executions, errors: &[&Exchange]) -> Check {
    let answers = capped(&listed(errors, |_| true));
    execution_check(
        spec,
        e.count == 0,
        format!("no execution behind the error answers {answers}"),
        &e.basis,
        e.count,
        e.exchanges.clone(),
    )
}

/// No key of a stress run is `which` (e.g. "charged more than once at the provider"):
/// `named` are the first such keys with what was seen of each, `exchanges` their evidence.
pub fn no_keys(
    spec: &CheckSpec,
    which: &str,
    count: usize,
    named: &[String],
    exchanges: Vec<usize>,
) -> Check {
    let actual = match count {
        0 => format!("0 keys {which}"),
        n => format!("{n} keys {which}: {}", named.join("; ")),
    };
    Check::from_spec(
        spec,
        count == 0,
        vec![format!("0 keys {which}")],
        actual,
        exchanges,
    )
    .showing(Symptom::Executions)
}

/// No key violated exactly-once, as counted by whoever judged the keys (the segments of a
/// merged stress run): `named` are the first violating keys with their reasons, shown.
pub fn no_violating_keys(spec: &CheckSpec, violating: usize, named: &[String]) -> Check {
    let actual = match violating {
        0 => "0 violating keys".to_string(),
        n => format!("{n} violating keys: {}", named.join("; ")),
    };
    Check::from_spec(
        spec,
        violating == 0,
        vec!["0 violating keys".to_string()],
        actual,
        Vec::new(),
    )
    .showing(Symptom::Executions)
}
