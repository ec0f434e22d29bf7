//! Exit codes: what a CI job branches on. Documented in `--help` and docs/verdicts.md.
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | no FAIL and no ERROR (WARN, SKIP, INCONCLUSIVE allowed) |
//! | 1 | usage or configuration error |
//! | 2 | an input file (suite, target, body, report to compare) is missing or invalid |
//! | 3 | ERROR: the target could not be checked (unreachable, run could not complete), the reference server could not start, or a report could not be written |
//! | 4 | at least one FAIL |
//! | 130 | interrupted by Ctrl-C, after the reports of finished probes were written |
//!
//! When several apply, the run's verdict wins: a report that could not be written is reported on
//! stderr and turns a clean run's 0 into 3, but never hides the 4 (or 3, or 130) the run found.
//! Errors are typed ([`AppError`]) where they arise, so each failure maps to its code in one place.

use crate::diagnostic::FileError;
use crate::report::Summary;

/// The process outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ExitCode {
    Ok,
    Usage,
    BadFile,
    Fail,
    Error,
    Interrupted,
}

impl From<ExitCode> for i32 {
    fn from(code: ExitCode) -> i32 {
        match code {
            ExitCode::Ok => 0,
            ExitCode::Usage => 1,
            ExitCode::BadFile => 2,
            ExitCode::Error => 3,
            ExitCode::Fail => 4,
            ExitCode::Interrupted => 130,
        }
    }
}

/// What went wrong, by who can fix it: the command line (1), an input file (2), or the run
/// itself (3). Built where the error arises; `main` prints it once and exits with its code.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Options that cannot work together or values that do not parse.
    #[error("{0:#}")]
    Usage(anyhow::Error),
    /// A suite, target, body or report file that is missing or invalid.
    #[error("{0:#}")]
    InputFile(anyhow::Error),
    /// The run could not proceed: the reference server did not start, a report could not be
    /// written, the target could not be reached.
    #[error("{0:#}")]
    Runtime(anyhow::Error),
}

impl AppError {
    /// A runtime failure (exit 3).
    pub fn runtime(e: impl Into<anyhow::Error>) -> Self {
        AppError::Runtime(e.into())
    }

    /// A missing or unreadable input file (exit 2).
    pub fn input_file(e: impl Into<anyhow::Error>) -> Self {
        AppError::InputFile(e.into())
    }

    /// The exit code this error ends the process with.
    pub fn code(&self) -> ExitCode {
        match self {
            AppError::Usage(_) => ExitCode::Usage,
            AppError::InputFile(_) => ExitCode::BadFile,
            AppError::Runtime(_) => ExitCode::Error,
        }
    }
}

/// Untyped errors from configuration code: a located [`FileError`] or an unusable API
/// description anywhere in the chain makes it an input-file error, anything else is a usage
/// error.
impl From<anyhow::Error> for AppError {
    fn from(e: anyhow::Error) -> Self {
        if e.chain().any(|c| {
            c.downcast_ref::<FileError>().is_some()
                || c.downcast_ref::<crate::discover::SpecError>().is_some()
        }) {
            AppError::InputFile(e)
        } else {
            AppError::Usage(e)
        }
    }
}

impl From<FileError> for AppError {
    fn from(e: FileError) -> Self {
        AppError::InputFile(e.into())
    }
}

impl ExitCode {
    /// Combines the run's code with a failure to write reports: the verdict wins when there is
    /// one, otherwise the lost report makes the run an ERROR (3).
    pub fn with_report_failure(self, failed: bool) -> ExitCode {
        if failed && self == ExitCode::Ok {
            ExitCode::Error
        } else {
            self
        }
    }

    /// The code for a finished run: ERROR (3) wins over FAIL (4), as in hurl, because a run with
    /// errors did not check everything it was asked to.
    pub fn for_run(summary: &Summary, interrupted: bool) -> ExitCode {
        if interrupted {
            ExitCode::Interrupted
        } else if summary.errors > 0 {
            ExitCode::Error
        } else if summary.failed > 0 {
            ExitCode::Fail
        } else {
            ExitCode::Ok
        }
    }
}

/// The text for `--help` (after the options).
pub const HELP: &str = "\
Exit codes:
  0    no FAIL and no ERROR (WARN, SKIP, INCONCLUSIVE allowed)
  1    usage or configuration error
  2    an input file (suite, target, body, report) is missing or invalid
  3    ERROR: the target could not be checked, the reference server could not start, or a
       report could not be written
  4    at least one FAIL
  130  interrupted by Ctrl-C (reports of finished probes are still written)
When several apply, the run's verdict (4, 3 or 130) wins over a report that could not be
written; that report's error is printed on stderr and the other reports are still written.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_and_merge() {
        let mut s = Summary::default();
        assert_eq!(i32::from(ExitCode::for_run(&s, false)), 0);
        s.warned = 2;
        s.skipped = 1;
        s.inconclusive = 1;
        assert_eq!(i32::from(ExitCode::for_run(&s, false)), 0);
        s.failed = 1;
        assert_eq!(i32::from(ExitCode::for_run(&s, false)), 4);
        s.errors = 1;
        assert_eq!(i32::from(ExitCode::for_run(&s, false)), 3);
        assert_eq!(i32::from(ExitCode::for_run(&s, true)), 130);
        assert_eq!(i32::from(ExitCode::Usage), 1);
        assert_eq!(i32::from(ExitCode::BadFile), 2);
    }

    #[test]
    fn the_verdict_wins_over_a_lost_report() {
        assert_eq!(ExitCode::Ok.with_report_failure(true), ExitCode::Error);
        assert_eq!(ExitCode::Fail.with_report_failure(true), ExitCode::Fail);
        assert_eq!(
            ExitCode::Interrupted.with_report_failure(true),
            ExitCode::Interrupted
        );
        assert_eq!(ExitCode::Ok.with_report_failure(false), ExitCode::Ok);
    }

    #[test]
    fn errors_map_to_their_codes() {
        let file = FileError::at("t.toml", "x", None, "bad");
        assert_eq!(
            AppError::from(anyhow::Error::new(file)).code(),
            ExitCode::BadFile
        );
        assert_eq!(
            AppError::from(anyhow::anyhow!("no URL")).code(),
            ExitCode::Usage
        );
        assert_eq!(
            AppError::runtime(anyhow::anyhow!("down")).code(),
            ExitCode::Error
        );
    }
}
