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

mod executions;
mod responses;
mod statuses;
pub use executions::*;
pub use responses::*;
pub use statuses::*;

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

/// Every value is at most `limit` characters long (a provider's limit on its keys): `values`
/// are the exchange numbers with the lengths seen there.
pub fn lengths_at_most(
    spec: &CheckSpec,
    label: &str,
    values: &[(usize, usize)],
    limit: usize,
) -> Check {
    let over: Vec<String> = values
        .iter()
        .filter(|(_, len)| *len > limit)
        .map(|(n, len)| format!("#{n} {len} characters"))
        .collect();
    let actual = match over.is_empty() {
        true => format!("every {label} within {limit} characters"),
        false => capped(&over),
    };
    Check::from_spec(
        spec,
        over.is_empty(),
        vec![format!("every {label} at most {limit} characters")],
        actual,
        values.iter().map(|(n, _)| *n).collect(),
    )
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
/// "#n status" for each exchange `pick` selects.
fn listed(exchanges: &[&Exchange], pick: impl Fn(&Exchange) -> bool) -> Vec<String> {
    exchanges
        .iter()
        .filter(|e| pick(e))
        .map(|e| format!("#{} {}", e.n, e.status_text()))
        .collect()
}

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
        Err(e) => e.to_string(),
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
