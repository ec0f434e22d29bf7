//! Verifiers of the statuses the exchanges got: expected, within a range, none a 5xx, the same
//! on every retry, answered in time.

use super::*;

/// The status is one of the suite's expected statuses.
pub fn status_in(spec: &CheckSpec, ex: &Exchange) -> Check {
    let passed = ex.status().is_some_and(|s| spec.expect.contains(&s));
    Check::from_spec(
        spec,
        passed,
        spec.expect.iter().map(|s| s.to_string()).collect(),
        ex.status_text(),
        vec![ex.n],
    )
    .showing(Symptom::statuses([ex]))
}

/// Every exchange got a status within `lo..=hi` (e.g. 400..=499 for "a 4xx").
pub fn statuses_within(spec: &CheckSpec, exchanges: &[&Exchange], lo: u16, hi: u16) -> Check {
    every_status(
        spec,
        exchanges,
        |s| s.is_some_and(|s| (lo..=hi).contains(&s)),
        vec![format!("every status in {lo}–{hi}")],
        |bad| format!("outside: {}", capped(bad)),
    )
}

/// No exchange got a 5xx (a transport error is not a 5xx and is reported by other checks).
pub fn no_server_error(spec: &CheckSpec, exchanges: &[&Exchange]) -> Check {
    every_status(
        spec,
        exchanges,
        |s| s.is_none_or(|s| s < 500),
        vec!["no 5xx".into()],
        |bad| {
            format!(
                "{} of {} got 5xx: {}",
                bad.len(),
                exchanges.len(),
                capped(bad)
            )
        },
    )
}

/// Every exchange got one of the given statuses (e.g. "409 or the replay's 201").
pub fn statuses_in(spec: &CheckSpec, exchanges: &[&Exchange], allowed: &[u16]) -> Check {
    every_status(
        spec,
        exchanges,
        |s| s.is_some_and(|s| allowed.contains(&s)),
        allowed.iter().map(|s| s.to_string()).collect(),
        |bad| {
            format!(
                "{} of {} unexpected: {}",
                bad.len(),
                exchanges.len(),
                capped(bad)
            )
        },
    )
}

/// Every exchange's status (`None` without a response) is `ok`. The actual line is the statuses
/// when all are, else `offenders` of the "#n status" of those that are not.
fn every_status(
    spec: &CheckSpec,
    exchanges: &[&Exchange],
    ok: impl Fn(Option<u16>) -> bool,
    expected: Vec<String>,
    offenders: impl FnOnce(&[String]) -> String,
) -> Check {
    let bad = listed(exchanges, |e| !ok(e.status()));
    let actual = if bad.is_empty() {
        summary_statuses(exchanges)
    } else {
        offenders(&bad)
    };
    let symptom = Symptom::statuses(exchanges.iter().copied().filter(|e| !ok(e.status())));
    Check::from_spec(spec, bad.is_empty(), expected, actual, nums(exchanges)).showing(symptom)
}

/// The status is none of `forbidden` (e.g. a 422 that would reveal another tenant's key).
pub fn status_not_in(spec: &CheckSpec, ex: &Exchange, forbidden: &[u16]) -> Check {
    let passed = ex.response().is_some() && !ex.status().is_some_and(|s| forbidden.contains(&s));
    let list = forbidden
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(" or ");
    Check::from_spec(
        spec,
        passed,
        vec![format!("a response other than {list}")],
        actual_with_error(ex),
        vec![ex.n],
    )
    .showing(Symptom::statuses([ex]))
}

/// The exchange got an answer, whatever it was, within `timeout` (the request's bound): a
/// request held open until the client gives up is no answer.
pub fn answered_within(spec: &CheckSpec, ex: &Exchange, timeout: std::time::Duration) -> Check {
    let bound = format!("an answer within {:.1} s", timeout.as_secs_f64());
    let actual = match &ex.response() {
        Some(r) => format!("{} after {:.0} ms", r.status, ex.duration_ms),
        None => format!(
            "no answer after {:.0} ms ({})",
            ex.duration_ms,
            actual_with_error(ex)
        ),
    };
    Check::from_spec(
        spec,
        ex.response().is_some(),
        vec![bound],
        actual,
        vec![ex.n],
    )
}

/// The exchange got a 2xx: the operation was accepted.
pub fn success(spec: &CheckSpec, ex: &Exchange) -> Check {
    let passed = ex.response().is_some_and(|r| r.is_success());
    Check::from_spec(
        spec,
        passed,
        vec!["2xx".into()],
        actual_with_error(ex),
        vec![ex.n],
    )
    .showing(Symptom::statuses([ex]))
}

/// Both exchanges got the same status.
pub fn same_status(spec: &CheckSpec, original: &Exchange, retries: &[&Exchange]) -> Check {
    let want = original.status_text();
    let bad = listed(retries, |e| e.status() != original.status());
    let mut all = vec![original];
    all.extend_from_slice(retries);
    let actual = if bad.is_empty() {
        summary_statuses(&all)
    } else {
        capped(&bad)
    };
    let symptom = Symptom::statuses(
        retries
            .iter()
            .copied()
            .filter(|e| e.status() != original.status()),
    );
    Check::from_spec(spec, bad.is_empty(), vec![want], actual, nums(&all)).showing(symptom)
}
