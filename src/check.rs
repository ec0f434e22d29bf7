//! Checks and the shared verifiers that produce them.
//!
//! A probe never writes its own failure text: it calls a verifier here, which compares what was
//! observed with what the suite expects and returns a [`Check`] carrying `expected` (every
//! acceptable value), `actual`, and the numbers of the exchanges it looked at. This keeps the
//! evidence uniform across probes and renderers (h2spec's `verifier.go`, hurl's `AssertResult`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::effects::Executions;
use crate::http::exchange::Exchange;

/// How much a failed check matters (CONTRACT "Severity of a check").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Observation only; never fails.
    Info,
    /// Good practice: WARN, or FAIL under `--strict`.
    Recommended,
    /// The selected suite's contract: FAIL.
    Required,
    /// Safety (duplicated effect, data leak, lost record): FAIL, always.
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Recommended => "recommended",
            Severity::Required => "required",
            Severity::Critical => "critical",
        }
    }
}

/// What the suite says about one check of one probe: its severity and, for status checks, the
/// acceptable statuses. Probes get these from the suite, never from constants of their own, so
/// a user's suite can change them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckSpec {
    /// Stable id within the probe (`status`, `no-effect`, …), the key in suite files.
    pub id: &'static str,
    /// One line: what is checked.
    pub what: &'static str,
    pub severity: Severity,
    /// Acceptable statuses, for the checks that compare one.
    pub expect: Vec<u16>,
}

/// A check a probe makes: its id (the key in suite files) and one line saying what it checks.
/// Each is a constant in its check's file, listed in its declaration (a probe's
/// `ProbeMeta::checks`, a webhook or client check's judged points) and named by the body that
/// makes it, so a misspelt check is a compile error and declaration and body cannot drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckDecl {
    pub id: &'static str,
    pub what: &'static str,
    /// The requirement is about an answer arriving in time, so an exchange that timed out fails
    /// it; any other check that cites a timed-out exchange is left unjudged (INCONCLUSIVE).
    pub timely: bool,
}

impl CheckDecl {
    pub const fn new(id: &'static str, what: &'static str) -> Self {
        CheckDecl {
            id,
            what,
            timely: false,
        }
    }

    /// A check whose requirement includes answering within the timeout.
    pub const fn timely(self) -> Self {
        CheckDecl {
            timely: true,
            ..self
        }
    }
}

/// A declared check whose severity the declaration fixes: the modes with no suite file to take
/// severities from (`webhook`, `client`). `run`'s probes take theirs from the suite instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GradedCheck {
    pub decl: CheckDecl,
    pub severity: Severity,
}

impl CheckDecl {
    /// This check with a fixed severity.
    pub const fn graded(self, severity: Severity) -> GradedCheck {
        GradedCheck {
            decl: self,
            severity,
        }
    }
}

impl GradedCheck {
    pub const fn new(severity: Severity, id: &'static str, what: &'static str) -> Self {
        CheckDecl::new(id, what).graded(severity)
    }

    pub fn id(&self) -> &'static str {
        self.decl.id
    }

    pub fn what(&self) -> &'static str {
        self.decl.what
    }

    /// The spec the shared verifiers below take.
    pub fn spec(&self) -> CheckSpec {
        CheckSpec {
            id: self.decl.id,
            what: self.decl.what,
            severity: self.severity,
            expect: Vec::new(),
        }
    }

    /// A result judged by the caller: `expected` is every acceptable value, `actual` what was
    /// seen, `exchanges` the exchanges it looked at.
    pub fn judge(
        &self,
        passed: bool,
        expected: impl Into<String>,
        actual: impl Into<String>,
        exchanges: Vec<usize>,
    ) -> Check {
        Check::from_spec(
            &self.spec(),
            passed,
            vec![expected.into()],
            actual.into(),
            exchanges,
        )
    }
}

/// What kind of difference a failed check saw, so a failure is deferred to a failed
/// prerequisite only when it shows the same symptom (a 409 on every repeat after
/// `replay-identity` failed with 409s), never because the prerequisite failed for another reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Symptom {
    /// Answered with statuses the check did not accept (a refusal or conflict): those statuses.
    Status(BTreeSet<u16>),
    /// More (or fewer) executions than the check allows.
    Executions,
    /// A response header missing or different: its name, lower-case.
    Header(String),
    /// A body, or a resource id read from it, differs.
    Body,
    /// Anything else (no response, problem details, an overlap); shared with nothing.
    #[default]
    Other,
}

impl Symptom {
    /// The statuses of `exchanges` (those that got a response), as a status symptom.
    fn statuses<'a>(exchanges: impl IntoIterator<Item = &'a Exchange>) -> Self {
        let set: BTreeSet<u16> = exchanges.into_iter().filter_map(|e| e.status()).collect();
        if set.is_empty() {
            Symptom::Other
        } else {
            Symptom::Status(set)
        }
    }

    /// Whether two failures show the same symptom: a status in common, the same header, or the
    /// same kind of difference. [`Symptom::Other`] is never shared.
    pub fn shared_with(&self, other: &Symptom) -> bool {
        match (self, other) {
            (Symptom::Status(a), Symptom::Status(b)) => !a.is_disjoint(b),
            (Symptom::Header(a), Symptom::Header(b)) => a == b,
            (Symptom::Executions, Symptom::Executions) | (Symptom::Body, Symptom::Body) => true,
            _ => false,
        }
    }
}

/// The result of comparing one observation with its expectation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub id: String,
    pub what: String,
    pub severity: Severity,
    pub passed: bool,
    /// Every acceptable value; one line each in the evidence.
    pub expected: Vec<String>,
    pub actual: String,
    /// The exchanges this check compared (`#n`).
    pub exchanges: Vec<usize>,
    /// What kind of difference it saw when it failed (read by the runner's root causes).
    #[serde(skip)]
    pub symptom: Symptom,
}

impl Check {
    fn from_spec(
        spec: &CheckSpec,
        passed: bool,
        expected: Vec<String>,
        actual: String,
        exchanges: Vec<usize>,
    ) -> Self {
        Check {
            id: spec.id.to_string(),
            what: spec.what.to_string(),
            severity: spec.severity,
            passed,
            expected,
            actual,
            exchanges,
            symptom: Symptom::Other,
        }
    }

    /// The check with the symptom it shows when it fails.
    fn showing(mut self, symptom: Symptom) -> Self {
        if !self.passed {
            self.symptom = symptom;
        }
        self
    }
}

fn nums(exchanges: &[&Exchange]) -> Vec<usize> {
    exchanges.iter().map(|e| e.n).collect()
}

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

/// "#n status" for each exchange `pick` selects.
fn listed(exchanges: &[&Exchange], pick: impl Fn(&Exchange) -> bool) -> Vec<String> {
    exchanges
        .iter()
        .filter(|e| pick(e))
        .map(|e| format!("#{} {}", e.n, e.status_text()))
        .collect()
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

/// Every retry's body is byte-identical to the original's. On a difference, expected and
/// actual show the first differing retry around the first differing byte, since two JSON
/// bodies usually share a long prefix.
pub fn same_body(spec: &CheckSpec, original: &Exchange, retries: &[&Exchange]) -> Check {
    let body = |e: &Exchange| e.response().map(|r| r.body.clone());
    let a = body(original);
    let differing: Vec<&&Exchange> = retries
        .iter()
        .filter(|r| a.is_none() || body(r) != a)
        .collect();
    let mut cited = vec![original.n];
    cited.extend(retries.iter().map(|r| r.n));
    let Some(first) = differing.first() else {
        let n = retries.len();
        return Check::from_spec(
            spec,
            true,
            vec![body_line(original)],
            format!("identical on {n} replay{}", if n == 1 { "" } else { "s" }),
            cited,
        );
    };
    let (expected, actual) = match (&a, body(first)) {
        (Some(x), Some(y)) => {
            let (ex, ac) = diff_window(x, &y);
            (ex, format!("#{}: {ac}", first.n))
        }
        _ => (
            body_line(original),
            format!("#{}: {}", first.n, body_line(first)),
        ),
    };
    let others = differing.len() - 1;
    let actual = if others > 0 {
        format!(
            "{actual} (and {others} more replay{} differ)",
            if others == 1 { "" } else { "s" }
        )
    } else {
        actual
    };
    Check::from_spec(spec, false, vec![expected], actual, cited).showing(Symptom::Body)
}

/// The two bodies around their first differing byte: `byte 57: …"createdAt":"2026-11-30T0…`.
fn diff_window(a: &[u8], b: &[u8]) -> (String, String) {
    let at = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let show = |bytes: &[u8]| {
        let start = at.saturating_sub(24);
        let end = (at + 48).min(bytes.len());
        let text = String::from_utf8_lossy(&bytes[start.min(end)..end]);
        let text: String = text.chars().filter(|c| !c.is_control()).collect();
        format!(
            "byte {at}: {}{text}{} ({} bytes)",
            if start > 0 { "…" } else { "" },
            if end < bytes.len() { "…" } else { "" },
            bytes.len()
        )
    };
    (show(a), show(b))
}

/// The retry is a replay of the original: the same status and the same resource (`identity`
/// of each, labelled `label`: a resource id, or the body). A 409, an error or a response about
/// another resource is no replay, however few executions were counted.
pub fn replayed(
    spec: &CheckSpec,
    original: (&Exchange, Option<String>),
    retry: (&Exchange, Option<String>),
    label: &str,
) -> Check {
    let show = |(e, v): &(&Exchange, Option<String>)| match v {
        Some(v) => format!("{} with {label} {}", e.status_text(), cut(v, 80)),
        None => format!("{} without a {label}", e.status_text()),
    };
    let passed = retry.0.response().is_some()
        && retry.0.status() == original.0.status()
        && original.1.is_some()
        && retry.1 == original.1;
    Check::from_spec(
        spec,
        passed,
        vec![format!("the replay: {}", show(&original))],
        show(&retry),
        vec![original.0.n, retry.0.n],
    )
    .showing(if retry.0.status() != original.0.status() {
        Symptom::statuses([retry.0])
    } else {
        Symptom::Body
    })
}

/// `text` on one line, cut at `max` characters.
fn cut(text: &str, max: usize) -> String {
    let one_line: String = text.chars().filter(|c| *c != '\n' && *c != '\r').collect();
    if one_line.chars().count() > max {
        format!("{}…", one_line.chars().take(max).collect::<String>())
    } else if one_line.is_empty() {
        "(empty)".into()
    } else {
        one_line
    }
}

/// A response header has the same value (or is absent on both) on the two exchanges.
pub fn same_header(spec: &CheckSpec, name: &str, original: &Exchange, retry: &Exchange) -> Check {
    let a = original.response().and_then(|r| r.header(name));
    let b = retry.response().and_then(|r| r.header(name));
    let show = |v: &Option<String>| match v {
        Some(v) => format!("{name}: {v}"),
        None => format!("no {name}"),
    };
    Check::from_spec(
        spec,
        retry.response().is_some() && a == b,
        vec![show(&a)],
        show(&b),
        vec![original.n, retry.n],
    )
    .showing(Symptom::Header(name.to_ascii_lowercase()))
}

/// The values (e.g. resource ids) read from the exchanges are all the same, or all different.
pub fn values_relation(
    spec: &CheckSpec,
    label: &str,
    values: &[(usize, Option<String>)],
    all_equal: bool,
) -> Check {
    let present: Vec<&String> = values.iter().filter_map(|(_, v)| v.as_ref()).collect();
    let distinct: std::collections::BTreeSet<&String> = present.iter().copied().collect();
    let passed = present.len() == values.len()
        && if all_equal {
            distinct.len() == 1
        } else {
            distinct.len() == present.len()
        };
    let expected = if all_equal {
        format!("one {label} on every exchange")
    } else {
        format!("a different {label} on every exchange")
    };
    let actual = values
        .iter()
        .map(|(n, v)| format!("#{n} {}", v.as_deref().unwrap_or("(none)")))
        .collect::<Vec<_>>()
        .join(", ");
    Check::from_spec(
        spec,
        passed,
        vec![expected],
        actual,
        values.iter().map(|(n, _)| *n).collect(),
    )
    .showing(Symptom::Body)
}

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

/// The error body is RFC 9457 problem details, or the response links its documentation.
pub fn problem_details(spec: &CheckSpec, ex: &Exchange) -> Check {
    let (passed, actual) = match &ex.response() {
        None => (false, actual_with_error(ex)),
        Some(r) => {
            let media = r.media_type().unwrap_or_default();
            let link = r
                .header("link")
                .filter(|l| l.to_ascii_lowercase().contains("describedby"));
            let passed = media == "application/problem+json" || link.is_some();
            let actual = match (&link, media.is_empty()) {
                (Some(l), _) => format!("Content-Type: {media}, Link: {l}"),
                (None, true) => "no Content-Type, no Link".to_string(),
                (None, false) => format!("Content-Type: {media}, no Link"),
            };
            (passed, actual)
        }
    };
    Check::from_spec(
        spec,
        passed,
        vec![
            "Content-Type: application/problem+json".into(),
            "Link: <…>; rel=\"describedby\"".into(),
        ],
        actual,
        vec![ex.n],
    )
}

/// The response carries a header (e.g. `Retry-After` on a 409).
pub fn header_present(spec: &CheckSpec, name: &str, exchanges: &[&Exchange]) -> Check {
    let missing: Vec<String> = exchanges
        .iter()
        .filter(|e| e.response().and_then(|r| r.header(name)).is_none())
        .map(|e| format!("#{}", e.n))
        .collect();
    let actual = if missing.is_empty() {
        format!("{name} on all {}", exchanges.len())
    } else {
        format!("no {name} on {}", capped(&missing))
    };
    Check::from_spec(
        spec,
        missing.is_empty(),
        vec![format!("{name} present")],
        actual,
        nums(exchanges),
    )
    .showing(Symptom::Header(name.to_ascii_lowercase()))
}

/// The response body does not contain `secret` (e.g. another tenant's resource id).
pub fn body_excludes(spec: &CheckSpec, label: &str, secret: &str, ex: &Exchange) -> Check {
    let leaked = ex
        .response()
        .as_ref()
        .is_some_and(|r| contains(&r.body, secret.as_bytes()));
    Check::from_spec(
        spec,
        !leaked,
        vec![format!("no trace of {label} ({secret})")],
        if leaked {
            format!("body contains {secret}")
        } else {
            body_line(ex)
        },
        vec![ex.n],
    )
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

/// An observation that never fails by itself (severity info in the catalog): records what was
/// seen, with `passed` saying whether it was the preferable behaviour.
pub fn observe(spec: &CheckSpec, preferable: bool, seen: String, exchanges: Vec<usize>) -> Check {
    Check::from_spec(
        spec,
        preferable,
        vec![spec.what.to_string()],
        seen,
        exchanges,
    )
}

/// A timeline fact: at least one of `others` started while `owner` was still in flight.
pub fn overlapped(spec: &CheckSpec, owner: &Exchange, others: &[&Exchange]) -> Check {
    let inside: Vec<String> = others
        .iter()
        .filter(|e| e.start_ms < owner.end_ms())
        .map(|e| format!("#{}", e.n))
        .collect();
    let mut all = vec![owner];
    all.extend_from_slice(others);
    Check::from_spec(
        spec,
        !inside.is_empty(),
        vec![format!(
            "a duplicate sent while #{} was in flight (until +{:.0} ms)",
            owner.n,
            owner.end_ms()
        )],
        if inside.is_empty() {
            "none overlapped".to_string()
        } else {
            format!("{} overlapped", inside.join(" "))
        },
        nums(&all),
    )
}

/// Joins at most [`LIST_CAP`] items, then says how many more there were, so a 200-request
/// probe's evidence line stays readable.
fn capped(items: &[String]) -> String {
    if items.len() <= LIST_CAP {
        items.join(", ")
    } else {
        format!(
            "{} … and {} more",
            items[..LIST_CAP].join(", "),
            items.len() - LIST_CAP
        )
    }
}

/// How many items an expected/actual line lists before it abbreviates.
const LIST_CAP: usize = 8;

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// "201 409 409" for a few exchanges; "201×1 409×15" for many.
fn summary_statuses(exchanges: &[&Exchange]) -> String {
    if exchanges.len() <= LIST_CAP {
        return exchanges
            .iter()
            .map(|e| e.status_text())
            .collect::<Vec<_>>()
            .join(" ");
    }
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for e in exchanges {
        *counts.entry(e.status_text()).or_default() += 1;
    }
    counts
        .iter()
        .map(|(s, n)| format!("{s}×{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn actual_with_error(ex: &Exchange) -> String {
    match &ex.outcome {
        Ok(r) => r.status.to_string(),
        Err(e) => e.detail.clone(),
    }
}

/// A body on one line, cut at 160 characters, for expected/actual lines.
fn body_line(ex: &Exchange) -> String {
    match &ex.response() {
        None => actual_with_error(ex),
        Some(r) => {
            let text = String::from_utf8_lossy(&r.body);
            let one_line: String = text.chars().filter(|c| *c != '\n' && *c != '\r').collect();
            if one_line.chars().count() > 160 {
                format!("{}…", one_line.chars().take(160).collect::<String>())
            } else if one_line.is_empty() {
                "(empty body)".into()
            } else {
                one_line
            }
        }
    }
}

/// A recorded POST that got `status` with `body`, for the verifier and effect-count tests.
#[cfg(test)]
pub(crate) fn test_exchange(n: usize, status: u16, body: &str) -> Exchange {
    use crate::http::exchange::{ReceivedResponse, SentRequest};
    Exchange {
        n,
        role: "original".into(),
        start_ms: 0.0,
        duration_ms: 1.0,
        release_us: None,
        request: SentRequest {
            method: "POST".into(),
            url: "http://127.0.0.1/x".into(),
            headers: vec![],
            body: vec![],
        },
        outcome: Ok(ReceivedResponse {
            status,
            version: http::Version::HTTP_11,
            headers: vec![],
            body: body.as_bytes().to_vec(),
            body_truncated: false,
            problem: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::test_exchange as ex;
    use super::*;

    fn spec(expect: Vec<u16>) -> CheckSpec {
        CheckSpec {
            id: "status",
            what: "status",
            severity: Severity::Required,
            expect,
        }
    }

    #[test]
    fn status_in_compares_with_the_suite_expectation() {
        assert!(status_in(&spec(vec![400]), &ex(1, 400, "")).passed);
        let c = status_in(&spec(vec![422]), &ex(2, 409, ""));
        assert!(!c.passed);
        assert_eq!(c.expected, vec!["422"]);
        assert_eq!(c.actual, "409");
        assert_eq!(c.exchanges, vec![2]);
    }

    #[test]
    fn same_body_is_byte_exact_and_shows_the_first_difference() {
        let s = spec(vec![]);
        let a = ex(1, 201, "{\"a\":1}");
        assert!(same_body(&s, &a, &[&ex(2, 201, "{\"a\":1}")]).passed);
        let c = same_body(
            &s,
            &a,
            &[&ex(2, 201, "{\"a\":1}"), &ex(3, 201, "{\"a\": 1}")],
        );
        assert!(!c.passed);
        assert_eq!(c.expected, vec!["byte 5: {\"a\":1} (7 bytes)"]);
        assert_eq!(c.actual, "#3: byte 5: {\"a\": 1} (8 bytes)");
        assert_eq!(c.exchanges, vec![1, 2, 3]);
    }

    #[test]
    fn executions_within_fails_only_outside_the_range() {
        let s = spec(vec![]);
        assert!(executions_within(&s, "counter", (3, 5), 4, vec![]).passed);
        assert!(executions_within(&s, "counter", (3, 5), 5, vec![]).passed);
        let c = executions_within(&s, "counter", (3, 5), 6, vec![]);
        assert!(!c.passed);
        assert_eq!(c.expected, vec!["3 to 5 executions (counter)"]);
        assert!(!executions_within(&s, "counter", (3, 5), 2, vec![]).passed);
        let exact = executions_within(&s, "counter", (3, 3), 3, vec![]);
        assert_eq!(exact.expected, vec!["3 executions (counter)"]);
    }

    #[test]
    fn no_server_error_names_the_offending_exchange() {
        let a = ex(1, 409, "");
        let b = ex(2, 500, "");
        let c = no_server_error(&spec(vec![]), &[&a, &b]);
        assert!(!c.passed);
        assert_eq!(c.actual, "1 of 2 got 5xx: #2 500");
    }

    #[test]
    fn values_relation_distinguishes_equal_and_distinct() {
        let s = spec(vec![]);
        let same = [(1, Some("p1".to_string())), (2, Some("p1".to_string()))];
        assert!(values_relation(&s, "id", &same, true).passed);
        assert!(!values_relation(&s, "id", &same, false).passed);
        let missing = [(1, Some("p1".to_string())), (2, None)];
        assert!(!values_relation(&s, "id", &missing, true).passed);
    }
}
