//! idem-check against a second, independent implementation (fixtures/servers/naive_python.py,
//! Python's standard library only): every probe PASSes or SKIPs for a missing option, except
//! `escaped-key`, which catches that server's naive parameter split. This keeps the probes honest
//! about the contract instead of about the reference server's particular answers.

use crate::common;

use std::process::Command;

use common::binary::bin;
use common::python::{self, PythonServer};

fn start() -> (PythonServer, String) {
    let server = python::start("fixtures/servers/naive_python.py", &[]);
    let base = server.base.clone();
    (server, base)
}

/// `idem-check run` against that server at `base`, described as both tests describe it: tenant
/// A's token, a JSON payment with a fresh reference, ids at `/id`, and the counter.
fn run(base: &str) -> Command {
    let mut cmd = bin();
    cmd.args(["run", &format!("{base}/pay")])
        .args(["-H", "Authorization: Bearer ta"])
        .args(["-H", "Content-Type: application/json"])
        .args(["-d", r#"{"amount":5,"ref":"{{unique}}"}"#])
        .args(["--id-pointer", "/id"])
        .args(["--count-url", &format!("{base}/count")]);
    cmd
}

#[test]
fn only_escaped_key_fails_on_the_python_implementation() {
    let (_server, base) = start();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = run(&base)
        .args(["--read-url", &format!("{base}/count")])
        .args(["--tenant-b-header", "Authorization: Bearer tb"])
        .args([
            "--hold-header",
            "X-Delay-Ms: 600",
            "--invalid-body",
            r#"{"amount":-1}"#,
        ])
        .args(["--report-json", json.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{stdout}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for p in report["probes"].as_array().unwrap() {
        let (id, outcome) = (p["id"].as_str().unwrap(), p["outcome"].as_str().unwrap());
        let expected: &[&str] = match id {
            "escaped-key" => &["FAIL"],
            // That server publishes no key lifetime, and its store cannot be taken down.
            "wedged-key-recovery"
            | "cross-endpoint"
            | "restart-persistence"
            | "cross-replica"
            | "key-expiry"
            | "store-outage" => &["SKIP"],
            // It calls no payment provider.
            id if common::downstream(id) => &["SKIP"],
            _ => &["PASS"],
        };
        assert!(
            expected.contains(&outcome),
            "{id}: {outcome} — {}\n{stdout}",
            p["reason"]
        );
    }
}

/// Without `Idempotency-Key-Expires-At`, `key-expiry` takes the lifetime from `--key-ttl`; that
/// server never forgets a key, so the retry after the given lifetime replays and the probe FAILs.
#[test]
fn key_ttl_catches_a_key_that_never_expires() {
    let (_server, base) = start();
    let o = run(&base)
        .args(["--key-ttl", "1s", "--probe", "key-expiry"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.contains("key-expiry"))
        .unwrap_or_default();
    assert!(line.contains("FAIL"), "{stdout}");
}
