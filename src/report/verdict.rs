//! Which checks decided a probe's verdict, as every format names it: the failed checks that
//! count, the worst of them, and the outcome with its severity (`FAIL (critical)`).

use crate::check::{Check, Severity};
use crate::outcome::Outcome;
use crate::report::ProbeReport;

/// The severity that decided a FAIL or WARN: the worst failed check that counts (info never does).
pub fn deciding_severity(p: &ProbeReport) -> Option<Severity> {
    first_failed(p).map(|c| c.severity)
}

/// The first failed check of the worst severity: what a one-line summary of the probe names.
pub fn first_failed(p: &ProbeReport) -> Option<&Check> {
    let worst = failed(p).map(|c| c.severity).max()?;
    failed(p).find(|c| c.severity == worst)
}

/// Failed checks that count toward the outcome (info checks are observations).
pub(crate) fn failed(p: &ProbeReport) -> impl Iterator<Item = &Check> {
    p.checks
        .iter()
        .filter(|c| !c.passed && c.severity != Severity::Info)
}

/// The outcome with the severity that caused it: `FAIL (critical)`, `WARN (recommended)`, `SKIP`.
pub fn outcome_label(p: &ProbeReport) -> String {
    match (p.outcome, deciding_severity(p)) {
        (Outcome::Fail | Outcome::Warn, Some(s)) => {
            format!("{} ({})", p.outcome.as_str(), s.as_str())
        }
        (o, _) => o.as_str().to_string(),
    }
}
