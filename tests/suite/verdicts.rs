//! Verdicts that hold on real APIs: each test points the real binary at a small server with one
//! of the flaws that misled the checker (tests/data/hostile.py) and asserts the verdict a correct
//! checker gives — never a PASS for what was not observed, never a FAIL for what the server did
//! not do, and an ERROR naming the option when the setup is wrong.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;

use common::binary::bin;
use common::python::{self, PythonServer};

fn start(flags: &[&str]) -> (PythonServer, String) {
    let server = python::start("tests/data/hostile.py", flags);
    let base = server.base.clone();
    (server, base)
}

/// What one run gave: the JSON report, the terminal output, the exit code.
struct Run {
    report: Value,
    stdout: String,
    code: Option<i32>,
}

impl Run {
    fn probe(&self, id: &str) -> (String, String) {
        let p = self.report["probes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == id)
            .unwrap_or_else(|| panic!("{id} did not run\n{}", self.stdout));
        (
            p["outcome"].as_str().unwrap().to_string(),
            p["reason"].as_str().unwrap().to_string(),
        )
    }

    fn outcome(&self, id: &str) -> String {
        self.probe(id).0
    }

    fn expect(&self, id: &str, outcome: &str, reason_has: &str) {
        let (o, r) = self.probe(id);
        assert!(
            o == outcome && r.contains(reason_has),
            "{id}: expected {outcome} with {reason_has:?}, got {o}: {r}\n{}",
            self.stdout
        );
    }
}

/// Runs the binary against `base`/pay as tenant A with a JSON body, plus `args`.
fn run(base: &str, args: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let url = format!("{base}/pay");
    let o = bin()
        .args(["run", &url, "-H", "Content-Type: application/json"])
        .args(["-d", r#"{"amount":5,"ref":"{{unique}}"}"#])
        .args(args.iter().map(|a| a.replace("{base}", base)))
        .args(if args.contains(&"--timeout") {
            &[][..]
        } else {
            &["--timeout", "3s"][..]
        })
        .args(["--report-json", json.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let report = std::fs::read(&json)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_else(|| {
            panic!(
                "no JSON report\n{stdout}\n{}",
                String::from_utf8_lossy(&o.stderr)
            )
        });
    Run {
        report,
        stdout,
        code: o.status.code(),
    }
}

const AUTH: [&str; 2] = ["-H", "Authorization: Bearer ta"];
const COUNTER: [&str; 2] = ["--count-url", "{base}/count"];

/// A 202 acceptor that executes every POST cannot be judged from its identical bodies: effect
/// checks are INCONCLUSIVE with the options to pass, and the header names the basis.
#[test]
fn a_blind_basis_never_passes_effect_checks() {
    let (_s, base) = start(&["--acceptor"]);
    let r = run(
        &base,
        &[
            "--probe",
            "replay-identity",
            "--probe",
            "quoted-key",
            "--probe",
            "lost-response",
        ],
    );
    for id in ["replay-identity", "quoted-key", "lost-response"] {
        r.expect(id, "INCONCLUSIVE", "--count-url");
    }
    assert!(r.stdout.contains("effects: blind"), "{}", r.stdout);
    let counted = run(
        &base,
        &["--probe", "replay-identity", COUNTER[0], COUNTER[1]],
    );
    counted.expect("replay-identity", "FAIL", "execution");
    assert!(
        counted.stdout.contains("effects: counter GET"),
        "{}",
        counted.stdout
    );
}

/// A basis that is configured but broken is a pre-flight ERROR naming the option.
#[test]
fn a_broken_basis_is_a_preflight_error_naming_the_option() {
    let (_s, base) = start(&[]);
    let r = run(
        &base,
        &["--id-pointer", "/uuid", "--probe", "replay-identity"],
    );
    r.expect("first-request", "ERROR", "--id-pointer");
    r.expect("replay-identity", "ERROR", "pre-flight");
    let r = run(
        &base,
        &["--count-cmd", "echo 5", "--probe", "first-request"],
    );
    r.expect("first-request", "ERROR", "--count-cmd");
    assert_eq!(r.code, Some(3), "{}", r.stdout);
    let r = run(&base, &["--id-pointer", "/id", "--probe", "first-request"]);
    assert!(r.stdout.contains("effects: ids at /id"), "{}", r.stdout);
    let r = run(&base, &["--probe", "first-request"]);
    assert!(r.stdout.contains("effects: bodies (weak)"), "{}", r.stdout);
}

/// A middleware that refuses a second key with an identical payload (fingerprint dedupe) and
/// keeps one record space for every tenant: tenant B gets tenant A's payment. With a payload
/// per logical request, tenant A's two keys both execute and the leak is reported.
#[test]
fn payloads_differ_per_logical_request() {
    let (_s, base) = start(&["--fingerprint-dedupe", "--unscoped"]);
    let r = run(
        &base,
        &[
            AUTH[0],
            AUTH[1],
            "--tenant-b-header",
            "Authorization: Bearer tb",
            "--id-pointer",
            "/id",
            "--probe",
            "tenant-isolation",
        ],
    );
    r.expect("tenant-isolation", "FAIL", "tenant");
}

/// A retry answered `409 Fingerprint conflict` is no replay: the checks that say "replays" or
/// "recognised as the same key" do not pass on it.
#[test]
fn a_conflict_is_no_replay() {
    let (_s, base) = start(&["--conflict-on-replay"]);
    let r = run(&base, &[COUNTER[0], COUNTER[1], "--probe", "quoted-key"]);
    r.expect("quoted-key", "FAIL", "409");
}

/// A refusal whose head echoes the key with a control byte is still a refusal: the status line
/// is kept, the parse problem recorded, and malformed-key passes.
#[test]
fn a_status_line_survives_an_invalid_header() {
    let (_s, base) = start(&["--echo-key"]);
    let r = run(&base, &[COUNTER[0], COUNTER[1], "--probe", "malformed-key"]);
    r.expect("malformed-key", "PASS", "");
    let exchanges = r.report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "malformed-key")
        .unwrap()["exchanges"]
        .to_string();
    assert!(exchanges.contains("invalid header"), "{exchanges}");
}

/// A counter that goes backwards, or jumps to 2^64-1, is not counting executions: the probes
/// that read it are INCONCLUSIVE with the readings, never a FAIL.
#[test]
fn an_insane_counter_is_inconclusive() {
    let (_s, base) = start(&["--counter-backwards"]);
    let args = [
        COUNTER[0],
        COUNTER[1],
        "--probe",
        "replay-identity",
        "--probe",
        "quoted-key",
    ];
    let r = run(&base, &args);
    for id in ["replay-identity", "quoted-key"] {
        r.expect(id, "INCONCLUSIVE", "the counter went from");
    }
    // The jump happens during quoted-key, the first probe after the pre-flight.
    let (_s, base) = start(&["--counter-jump"]);
    let r = run(&base, &args);
    r.expect("quoted-key", "INCONCLUSIVE", "18446744073709551615");
}

/// One stalled retry is not a violation: quoted-key is INCONCLUSIVE, not FAIL.
#[test]
fn a_timeout_is_not_a_failure() {
    let (_s, base) = start(&["--stall-once"]);
    let r = run(
        &base,
        &[
            COUNTER[0],
            COUNTER[1],
            "--timeout",
            "1s",
            "--probe",
            "quoted-key",
        ],
    );
    r.expect("quoted-key", "INCONCLUSIVE", "no response");
}

/// Where the requirement is about answering in time, a timeout is the violation: a request
/// with replay-marker headers that is never answered fails spoofed-marker-headers.
#[test]
fn a_timeout_fails_a_requirement_about_answering_in_time() {
    let (_s, base) = start(&["--stall-marked"]);
    let args = [COUNTER[0], COUNTER[1], "--timeout", "1s"];
    let r = run(
        &base,
        &[&args[..], &["--probe", "spoofed-marker-headers"]].concat(),
    );
    r.expect("spoofed-marker-headers", "FAIL", "marker headers");
}

/// A target that stops answering ends the run quickly: a few timeouts, then every remaining
/// probe is an ERROR saying so.
#[test]
fn a_dead_target_stops_the_run() {
    let (_s, base) = start(&["--die-after", "3"]);
    let t0 = Instant::now();
    let r = run(&base, &["--timeout", "1s"]);
    assert!(
        t0.elapsed() < Duration::from_secs(40),
        "took {:?}\n{}",
        t0.elapsed(),
        r.stdout
    );
    r.expect("cross-replica", "ERROR", "stopped answering");
    assert_eq!(r.code, Some(3), "{}", r.stdout);
}

/// A target that freezes mid-run is not a wrong counter option: the probes whose counter read
/// went unanswered say the target stopped answering and never blame --count-url.
#[test]
fn a_frozen_target_is_not_blamed_on_the_counter_options() {
    let (_s, base) = start(&["--die-after", "4"]);
    let probes = ["--probe", "replay-identity,concurrent-duplicates"];
    let counter = [COUNTER[0], COUNTER[1], "--count-pointer", "/count"];
    let r = run(
        &base,
        &[&probes[..], &counter, &["--timeout", "1s"]].concat(),
    );
    let reasons: Vec<String> = r.report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["reason"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|why| why.contains("the effect counter did not answer")),
        "{}",
        r.stdout
    );
    assert!(
        reasons.iter().all(|why| !why.contains("check --count-url")),
        "{}",
        r.stdout
    );
}

/// Refused credentials are a setup mistake: first-request is an ERROR naming -H, not a FAIL of
/// the API.
#[test]
fn refused_credentials_are_a_setup_error() {
    let (_s, base) = start(&["--auth"]);
    let r = run(&base, &["--probe", "replay-identity"]);
    r.expect("first-request", "ERROR", "-H");
    assert_eq!(r.code, Some(3), "{}", r.stdout);
    let ok = run(&base, &[AUTH[0], AUTH[1], "--probe", "first-request"]);
    assert_eq!(ok.outcome("first-request"), "PASS", "{}", ok.stdout);
}

/// A URL that is not the API is named as setup before anything is judged: an HTML page, a
/// redirect to a login page, a body the operation refuses, a wrong path, a target that never
/// answers. Each is the pre-flight's ERROR (exit 3) with one line naming what to change and,
/// where the server said something, quoting it; no later probe runs.
#[test]
fn a_target_that_is_not_the_api_is_a_setup_error() {
    let design = |mode: &str| python::start("fixtures/servers/not_the_api.py", &["--mode", mode]);
    let cases: [(&str, &str, &[&str], &[&str]); 5] = [
        (
            "html",
            "",
            &["--id-pointer", "/id"],
            &[
                "text/html body",
                "Welcome to nginx!",
                "not the API's answer",
                "check the URL",
            ],
        ),
        (
            "login",
            "",
            &[],
            &[
                "302",
                "redirected the request to https://login.example.com/sso",
                "check the URL",
            ],
        ),
        (
            "bad-body",
            "",
            &[],
            &["400", "amount_cents is required", "check -d", "-H"],
        ),
        (
            "bad-body",
            "/elsewhere",
            &[],
            &[
                "404",
                "/elsewhere/pay is not the operation",
                "check the URL and -X",
            ],
        ),
        (
            "hang",
            "",
            &["--timeout", "1s"],
            &["did not answer within --timeout (1s)", "raise --timeout"],
        ),
    ];
    for (mode, prefix, extra, says) in cases {
        let server = design(mode);
        let base = format!("{}{prefix}", server.base);
        let t0 = Instant::now();
        let r = run(&base, extra);
        let (outcome, reason) = r.probe("first-request");
        assert_eq!(outcome, "ERROR", "{mode}{prefix}: {reason}\n{}", r.stdout);
        for said in says {
            assert!(
                reason.contains(said),
                "{mode}{prefix}: {said:?} not in {reason:?}"
            );
        }
        assert!(!reason.contains("reference server"), "{mode}: {reason}");
        assert!(!reason.contains("--id-pointer"), "{mode}: {reason}");
        assert_eq!(r.code, Some(3), "{mode}{prefix}\n{}", r.stdout);
        let judged = r.report["probes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["id"] != "first-request")
            .filter(|p| !p["checks"].as_array().is_none_or(|c| c.is_empty()))
            .count();
        assert_eq!(
            judged, 0,
            "{mode}{prefix}: no probe is judged\n{}",
            r.stdout
        );
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{mode}: took {:?}",
            t0.elapsed()
        );
    }
}

/// A restart hook that restarts nothing proves nothing: restart-persistence is INCONCLUSIVE.
#[test]
fn a_restart_must_be_seen() {
    let (_s, base) = start(&[]);
    let r = run(
        &base,
        &[
            COUNTER[0],
            COUNTER[1],
            "--restart-cmd",
            "true",
            "--probe",
            "restart-persistence",
        ],
    );
    r.expect("restart-persistence", "INCONCLUSIVE", "not seen to go down");
}

/// A counter kept in memory starts again from zero at the restart, while the records survive:
/// with `--id-pointer` restart-persistence is judged by ids (the retry's id is the original's,
/// so it is the replay) and says so; without ids nothing else can judge it: INCONCLUSIVE.
#[test]
fn a_counter_reset_by_the_restart_is_judged_by_ids() {
    let (_s, base) = start(&["--memory-counter"]);
    let restart = format!(
        "{} -c \"import urllib.request as u; u.urlopen(u.Request('{base}/restart', data=b''))\"",
        python::interpreter_in_shell()
    );
    let ready = format!("{base}/ready");
    let args = |ids: bool| {
        let mut a = vec![
            COUNTER[0],
            COUNTER[1],
            "--restart-cmd",
            restart.as_str(),
            "--ready-url",
            ready.as_str(),
            "--probe",
            "restart-persistence",
        ];
        if ids {
            a.extend(["--id-pointer", "/id"]);
        }
        a
    };
    let r = run(&base, &args(true));
    r.expect("restart-persistence", "PASS", "");
    let probe = r.report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "restart-persistence")
        .unwrap();
    let basis = probe["effect_basis"].as_str().unwrap_or_default();
    assert!(
        basis.contains("judged by ids: the counter reset across the restart"),
        "{basis}\n{}",
        r.stdout
    );
    let r = run(&base, &args(false));
    r.expect(
        "restart-persistence",
        "INCONCLUSIVE",
        "the counter went from",
    );
}

/// An API that accepts only bare keys: quoted-key FAILs (draft-07 §2.1 makes the String the
/// rule), everything else runs with bare keys, and every report says so.
#[test]
fn bare_only_apis_get_verdicts_with_bare_keys() {
    let (_s, base) = start(&["--bare-only"]);
    let args = [
        COUNTER[0],
        COUNTER[1],
        "--id-pointer",
        "/id",
        "--probe",
        "quoted-key",
        "--probe",
        "replay-identity",
    ];
    let r = run(&base, &args);
    r.expect("first-request", "PASS", "");
    r.expect("quoted-key", "FAIL", "");
    r.expect("replay-identity", "PASS", "");
    assert!(r.stdout.contains("keys sent bare"), "{}", r.stdout);
    assert!(
        r.report["context"].to_string().contains("keys sent bare"),
        "{}",
        r.report["context"]
    );
    let mut quoted = args.to_vec();
    quoted.extend(["--key-form", "quoted"]);
    let r = run(&base, &quoted);
    r.expect("first-request", "FAIL", "");
}

/// Root causes do not depend on the catalog order: on a server whose only defect is executing
/// completed retries again, the key-syntax probes that run before replay-identity are
/// INCONCLUSIVE naming it, the output ends with the root cause, and critical double executions
/// stay FAIL, told as one shared cause.
#[test]
fn root_causes_are_settled_after_the_run() {
    let o = bin()
        .args([
            "run",
            "--reference",
            "--reference-fault",
            "replay-reexecute",
        ])
        .args(["--probe", "quoted-key", "--probe", "escaped-key"])
        .args(["--probe", "replay-identity", "--probe", "lost-response"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    // The last line of a probe is its final verdict: one streamed before its prerequisite ran
    // is repeated, settled, after the run.
    let line = |id: &str| {
        stdout
            .lines()
            .rev()
            .find(|l| l.split_whitespace().nth(2) == Some(id))
            .unwrap_or_else(|| panic!("no line for {id}\n{stdout}"))
            .to_string()
    };
    for id in ["quoted-key", "escaped-key"] {
        assert!(line(id).contains("INCONCLUSIVE"), "{}\n{stdout}", line(id));
    }
    assert!(line("replay-identity").contains("FAIL"), "{stdout}");
    assert!(line("lost-response").contains("FAIL"), "{stdout}");
    let causes = &stdout[stdout.rfind("root causes:").expect("root causes")..];
    assert!(
        causes.contains("replay-identity fails: 2 other FAILs follow from it"),
        "{stdout}"
    );
    // The two FAILs left each cite a retry after the first answer that executed again.
    let end = stdout.trim_end().lines().last().unwrap_or_default();
    assert!(
        end.contains("2 critical FAILs share one cause: a retry after completion executes again (replay-identity #")
            && end.contains(", lost-response #"),
        "{stdout}"
    );
}
