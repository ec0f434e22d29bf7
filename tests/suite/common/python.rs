//! The Python test servers (fixtures/servers/, tests/data/): each listens on 127.0.0.1 with a
//! free port and announces it as its first line, `listening on http://…`. One starter for all of
//! them, so every test waits for that line the same bounded way and never leaves one running.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The Python 3 interpreter every test starts, resolved once per test process from `python3` on
/// the PATH. That name may be a version manager's shim (pyenv's is a shell script that works out
/// the version on every start), which costs twice the CPU of the interpreter it then runs; the
/// suite starts hundreds of Python clients and servers, so it names the interpreter itself.
/// Where `python3` is the interpreter, this is the same program.
pub fn interpreter() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let resolved = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
            .filter(|path| path.is_file());
        resolved.unwrap_or_else(|| PathBuf::from("python3"))
    })
}

/// [`interpreter`] as an argv word.
pub fn interpreter_word() -> String {
    interpreter().to_string_lossy().into_owned()
}

/// [`interpreter`] as one word of a shell line (single-quoted).
pub fn interpreter_in_shell() -> String {
    format!("'{}'", interpreter_word().replace('\'', r"'\''"))
}

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
    start_with(interpreter(), script, args)
}

/// [`start`] for a script that imports the standard library only (the design servers): `-S`
/// leaves out site-packages and its `.pth` hooks, which every start would otherwise pay for.
pub fn start_stdlib(script: &str, args: &[&str]) -> PythonServer {
    let mut command = Command::new(interpreter());
    command
        .arg("-S")
        .arg(format!("{}/{script}", env!("CARGO_MANIFEST_DIR")))
        .args(args);
    start_command(command, script)
}

/// [`start`] with another Python: one whose environment holds the libraries the script
/// imports (the webhook senders' own, for fixtures/consumers/vendor_consumer.py).
pub fn start_with(python: &Path, script: &str, args: &[&str]) -> PythonServer {
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
