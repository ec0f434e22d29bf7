//! The one place where checks become a verdict (CONTRACT "Severity of a check").
//!
//! Renderers and exit codes read the [`Outcome`] decided here and nothing else, so the terminal,
//! JUnit and JSON can never disagree about a probe.

use serde::Serialize;

use crate::check::{Check, Severity};

/// A probe's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Outcome {
    Pass,
    Warn,
    Skip,
    Inconclusive,
    Fail,
    Error,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Warn => "WARN",
            Outcome::Skip => "SKIP",
            Outcome::Inconclusive => "INCONCLUSIVE",
            Outcome::Fail => "FAIL",
            Outcome::Error => "ERROR",
        }
    }
}

/// Why a probe stopped before it could judge everything. Each variant requires its reason, so a
/// SKIP or INCONCLUSIVE can never reach the user without saying what to change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "reason", rename_all = "lowercase")]
pub enum Stop {
    /// A precondition is not configured ("needs a second tenant: pass --tenant-b-header").
    Skip(Reason),
    /// It ran but could not exercise the behaviour ("no duplicate overlapped the original; …").
    Inconclusive(Reason),
    /// It could not run (target unreachable, baseline request failed).
    Error(Reason),
}

impl Stop {
    /// This stop, its reason speaking of exchanges `ns` (`the baseline request #3 got 500`):
    /// the evidence shows those, with no number read back out of the sentence.
    pub fn citing(self, ns: impl IntoIterator<Item = usize>) -> Stop {
        let cite = |mut r: Reason| {
            r.cites.extend(ns);
            r
        };
        match self {
            Stop::Skip(r) => Stop::Skip(cite(r)),
            Stop::Inconclusive(r) => Stop::Inconclusive(cite(r)),
            Stop::Error(r) => Stop::Error(cite(r)),
        }
    }
}

/// Why a probe stopped: the sentence the reports show, and the exchanges it speaks of.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reason {
    pub text: String,
    /// The numbers of the exchanges the sentence names.
    pub cites: Vec<usize>,
}

impl From<String> for Reason {
    fn from(text: String) -> Reason {
        Reason {
            text,
            cites: Vec::new(),
        }
    }
}

impl From<&str> for Reason {
    fn from(text: &str) -> Reason {
        Reason::from(text.to_string())
    }
}

impl std::ops::Deref for Reason {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Serialised as its sentence, as reasons always were.
impl Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

/// The verdict and its one-line reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub outcome: Outcome,
    pub reason: String,
    /// The exchanges the reason speaks of, when a stop decided it.
    #[serde(skip)]
    pub cites: Vec<usize>,
}

/// Decides a probe's outcome from its checks and how it stopped.
///
/// Failed critical and required checks FAIL, as do recommended ones under `--strict`; failed
/// recommended checks otherwise WARN; info checks never count. A FAIL wins over a stop that came
/// after it (evidence of a double charge is never hidden behind "inconclusive"); otherwise the
/// stop decides.
pub fn decide(checks: &[Check], stop: Option<&Stop>, strict: bool) -> Verdict {
    let fails_hard = |c: &&Check| {
        !c.passed
            && match c.severity {
                Severity::Critical | Severity::Required => true,
                Severity::Recommended => strict,
                Severity::Info => false,
            }
    };
    // The first failed check of the worst severity, in the order the probe made them.
    let worst_failed = checks
        .iter()
        .filter(fails_hard)
        .rev()
        .max_by_key(|c| c.severity);
    if let Some(c) = worst_failed {
        return Verdict {
            outcome: Outcome::Fail,
            reason: first_line(c),
            cites: Vec::new(),
        };
    }
    match stop {
        Some(Stop::Error(r)) => {
            return Verdict {
                outcome: Outcome::Error,
                reason: r.text.clone(),
                cites: r.cites.clone(),
            }
        }
        Some(Stop::Skip(r)) => {
            return Verdict {
                outcome: Outcome::Skip,
                reason: r.text.clone(),
                cites: r.cites.clone(),
            }
        }
        Some(Stop::Inconclusive(r)) => {
            return Verdict {
                outcome: Outcome::Inconclusive,
                reason: r.text.clone(),
                cites: r.cites.clone(),
            }
        }
        None => {}
    }
    if let Some(c) = checks
        .iter()
        .find(|c| !c.passed && c.severity == Severity::Recommended)
    {
        return Verdict {
            outcome: Outcome::Warn,
            reason: first_line(c),
            cites: Vec::new(),
        };
    }
    let counted = checks
        .iter()
        .filter(|c| c.severity != Severity::Info)
        .count();
    Verdict {
        outcome: Outcome::Pass,
        reason: format!(
            "{counted} check{} passed",
            if counted == 1 { "" } else { "s" }
        ),
        cites: Vec::new(),
    }
}

/// "what: expected X, got Y" on one line: the JUnit `message` and the summary reason.
pub fn first_line(c: &Check) -> String {
    format!(
        "{}: expected {}, got {}",
        c.what,
        c.expected.join(" or "),
        c.actual
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(severity: Severity, passed: bool) -> Check {
        Check {
            id: "c".into(),
            what: "thing".into(),
            severity,
            passed,
            expected: vec!["1".into()],
            actual: if passed { "1" } else { "2" }.into(),
            exchanges: vec![1],
            symptom: Default::default(),
        }
    }

    #[test]
    fn every_severity_and_result_combination() {
        use Outcome::*;
        use Severity::*;
        // (severity, passed, strict) -> outcome
        let table = [
            (Critical, true, false, Pass),
            (Critical, false, false, Fail),
            (Critical, false, true, Fail),
            (Required, true, false, Pass),
            (Required, false, false, Fail),
            (Required, false, true, Fail),
            (Recommended, true, false, Pass),
            (Recommended, false, false, Warn),
            (Recommended, false, true, Fail),
            (Info, true, false, Pass),
            (Info, false, false, Pass),
            (Info, false, true, Pass),
        ];
        for (sev, passed, strict, want) in table {
            let v = decide(&[check(sev, passed)], None, strict);
            assert_eq!(v.outcome, want, "{sev:?} passed={passed} strict={strict}");
        }
    }

    #[test]
    fn a_failure_is_never_hidden_by_a_stop() {
        let stops = [
            Stop::Skip("s".into()),
            Stop::Inconclusive("i".into()),
            Stop::Error("e".into()),
        ];
        for stop in &stops {
            let v = decide(&[check(Severity::Critical, false)], Some(stop), false);
            assert_eq!(v.outcome, Outcome::Fail);
        }
    }

    #[test]
    fn stops_carry_their_reason_and_beat_warnings() {
        let checks = [check(Severity::Recommended, false)];
        let v = decide(
            &checks,
            Some(&Stop::Skip("needs --tenant-b-header".into())),
            false,
        );
        assert_eq!(v.outcome, Outcome::Skip);
        assert_eq!(v.reason, "needs --tenant-b-header");
        let v = decide(&[], Some(&Stop::Inconclusive("raise hold".into())), false);
        assert_eq!(v.outcome, Outcome::Inconclusive);
        let v = decide(&[], Some(&Stop::Error("refused".into())), false);
        assert_eq!(v.outcome, Outcome::Error);
    }

    #[test]
    fn the_worst_failed_check_gives_the_reason() {
        let mut a = check(Severity::Required, false);
        a.what = "status".into();
        let mut b = check(Severity::Critical, false);
        b.what = "effects".into();
        let v = decide(&[a, b], None, false);
        assert_eq!(v.reason, "effects: expected 1, got 2");
    }
}
