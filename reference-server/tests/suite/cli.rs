//! The binary's manners: bad flags exit 2 with a message, the address line, graceful SIGTERM.

use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_idem-reference-server");

/// Each inconsistent or malformed flag set is refused with exit status 2 and a message that
/// names the fix, before anything is opened.
#[test]
fn bad_flags_exit_2_with_a_message() {
    let cases: &[(&[&str], &str)] = &[
        (&["--fault", "race"], "--test-hooks"),
        (&["--db", ":memory:"], "memory-store"),
        (
            &["--fault", "no-such-fault", "--test-hooks"],
            "known faults",
        ),
        (&["--token", "no-equals-sign"], "TENANT=SECRET"),
        (&["--lease", "5 parsecs"], "--lease"),
        (&["--lease", "1ms"], "30ms"),
        (&["--webhook-lease", "1ms"], "--webhook-lease"),
        (&["--max-connections", "0"], "--max-connections"),
        (&["--listen", "not-an-address"], "--listen"),
        (&["--webhook-secret", "s3cret"], "whsec_"),
        (
            &[
                "--webhook-secret-b",
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            ],
            "--webhook-secret",
        ),
        (
            &["--webhook-fault", "no-dedupe", "--test-hooks"],
            "--webhook-secret",
        ),
        (
            &["--webhook-fault", "no-such-fault"],
            "known: dedupe-in-memory",
        ),
        (
            &[
                "--webhook-secret",
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                "--webhook-fault",
                "no-dedupe",
            ],
            "--test-hooks",
        ),
    ];
    let provider_cases: &[(&[&str], &str)] = &[
        (&["--provider-url", "ftp://127.0.0.1:9"], "--provider-url"),
        (&["--provider-url", "not a url"], "--provider-url"),
        (
            &["--provider-profile", "strype"],
            "known profiles: stripe, adyen, square, paypal, checkout, gocardless, generic",
        ),
        (
            &[
                "--provider-url",
                "http://127.0.0.1:9",
                "--provider-attempts",
                "0",
            ],
            "--provider-attempts",
        ),
        (
            &[
                "--provider-url",
                "http://127.0.0.1:9",
                "--provider-timeout-ms",
                "0",
            ],
            "--provider-timeout-ms",
        ),
        (
            &["--fault", "prov-no-key", "--test-hooks"],
            "add --provider-url",
        ),
    ];
    for (args, hint) in cases.iter().chain(provider_cases) {
        let out = Command::new(BIN)
            .args(*args)
            .args(
                ["--listen", "127.0.0.1:0"]
                    .iter()
                    .filter(|_| !args.contains(&"--listen")),
            )
            .stdin(Stdio::null())
            .output()
            .expect("run the binary");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(hint), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// Starts the server on `--listen 127.0.0.1:0 --db DB` (plus `args`) and returns it with the
/// first line it printed, read within 10 s.
async fn start_listening(db: &std::path::Path, args: &[&str]) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(BIN)
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .arg("--db")
        .arg(db)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    tokio::time::timeout(
        Duration::from_secs(10),
        BufReader::new(stdout).read_line(&mut line),
    )
    .await
    .expect("address in time")
    .expect("read");
    (child, line)
}

/// Sends SIGTERM to `child` and returns its exit status, waited for at most 10 s.
async fn terminate(child: &mut tokio::process::Child) -> std::process::ExitStatus {
    let pid = child.id().expect("pid").to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits in time")
        .expect("wait")
}

/// `--listen 127.0.0.1:0` prints `listening on http://ADDR` first; SIGTERM drains and exits 0
/// with the database closed (SQLite removes the WAL file when its last connection closes).
#[tokio::test]
async fn prints_its_address_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("cli.db");
    let (mut child, line) = start_listening(&db, &["--token", "acme=s3cret"]).await;
    let addr = line
        .trim_end()
        .strip_prefix("listening on http://127.0.0.1:")
        .unwrap_or_else(|| panic!("first line {line:?}"));
    assert!(addr.parse::<u16>().is_ok_and(|port| port != 0), "{line:?}");
    // The address is printed once the store is open.
    let mut conn = tokio::net::TcpStream::connect(format!("127.0.0.1:{addr}"))
        .await
        .expect("connect");
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).await.expect("read");
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
    assert!(db.with_extension("db-wal").exists(), "the store is open");
    let status = terminate(&mut child).await;
    assert!(status.success(), "{status:?}");
    assert!(
        !db.with_extension("db-wal").exists(),
        "the store was closed"
    );
}

/// A SIGTERM that arrives as soon as the address is printed (before any
/// request answered) still drains and exits 0: the handlers are installed before the address
/// is printed, not when the accept loop first gets to them.
#[tokio::test]
async fn sigterm_right_after_the_address_still_exits_cleanly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut child, line) = start_listening(&dir.path().join("early.db"), &[]).await;
    assert!(line.starts_with("listening on "), "{line:?}");
    let status = terminate(&mut child).await;
    assert!(status.success(), "{status:?}");
}

/// The address is printed only once the store is open: a store that cannot be opened ends the
/// server with its error and no `listening on` line, so nobody waiting for that line sends
/// requests that would be reset.
#[test]
fn a_store_that_cannot_open_is_never_announced() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("no-such-folder").join("x.db");
    let out = Command::new(BIN)
        .args(["--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .stdin(Stdio::null())
        .output()
        .expect("run the binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stdout.contains("listening on"), "{stdout}");
    assert!(stderr.contains("opening the store"), "{stderr}");
}
