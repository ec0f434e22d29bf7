//! The Python test servers (fixtures/servers/, tests/data/): each listens on 127.0.0.1 with a
//! free port and announces it as its first line, `listening on http://…`. One starter for all of
//! them, so every test waits for that line the same bounded way and never leaves one running.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running server, killed when the test ends however it ends (its stdin is a pipe too, so a
/// server that watches stdin also exits when the test process dies).
pub struct PythonServer {
    child: Child,
    /// `http://127.0.0.1:PORT`, as the server announced it.
    pub base: String,
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `script` (relative to the repository root) with `args` and waits up to 20 s for its
/// address.
pub fn start(script: &str, args: &[&str]) -> PythonServer {
    start_with(std::path::Path::new("python3"), script, args)
}

/// [`start`] with another Python: one whose environment holds the libraries the script
/// imports (the webhook senders' own, for fixtures/consumers/vendor_consumer.py).
pub fn start_with(python: &std::path::Path, script: &str, args: &[&str]) -> PythonServer {
    let path = format!("{}/{script}", env!("CARGO_MANIFEST_DIR"));
    let mut command = Command::new(python);
    command.arg(&path).args(args);
    start_command(command, script)
}

/// Starts `command`, a server that speaks as the Python ones do (its first line announces its
/// address; it stops when its stdin closes) whatever its language: `label` names it in panics.
pub fn start_command(mut command: Command, label: &str) -> PythonServer {
    let mut child = command
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{label} does not start: {e}"));
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let mut server = PythonServer {
        child,
        base: String::new(),
    };
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{label} did not announce its address"));
    server.base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{label}: unexpected first line {line:?}"))
        .to_string();
    server
}
