//! Exit codes: what a CI job branches on. Documented in `--help` and the README.
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | no FAIL and no ERROR (WARN, SKIP, INCONCLUSIVE allowed) |
//! | 1 | usage or configuration error |
//! | 2 | suite or target file invalid |
//! | 3 | ERROR: the target could not be checked (unreachable, run could not complete) |
//! | 4 | at least one FAIL |
//! | 130 | interrupted by Ctrl-C, after the reports of finished probes were written |

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

impl ExitCode {
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
  2    suite or target file invalid
  3    ERROR: the target could not be checked (unreachable, run could not complete)
  4    at least one FAIL
  130  interrupted by Ctrl-C (reports of finished probes are still written)";

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
}
