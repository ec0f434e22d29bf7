//! Running the real `idem-check` binary, for the tests that check what a user sees.

use std::process::{Child, Command, ExitStatus, Output};
use std::time::{Duration, Instant};

/// The binary, with a clean environment for colour and the GitHub step summary: a test run
/// inside a CI job must not append its reports to that job's summary.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_idem-check"));
    c.env_remove("GITHUB_STEP_SUMMARY").env("NO_COLOR", "1");
    c
}

/// [`bin`] for tests that wait for it on the async runtime; killed if dropped.
pub fn bin_async() -> tokio::process::Command {
    let mut c = tokio::process::Command::from(bin());
    c.kill_on_drop(true);
    c
}

/// Waits for `child` to exit, at most `limit`: past it the child is killed and the test fails.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait for the binary") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("idem-check ran longer than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
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
