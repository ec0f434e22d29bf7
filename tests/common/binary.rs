//! Running the real `idem-check` binary, for the tests that check what a user sees.

use std::process::{Command, Output};

/// The binary, with a clean environment for colour and the GitHub step summary.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_idem-check"));
    c.env_remove("GITHUB_STEP_SUMMARY").env("NO_COLOR", "1");
    c
}

/// The exit code, stdout and stderr of a run, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
