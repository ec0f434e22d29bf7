//! `idem-check client` against the sample clients of fixtures/clients/: the correct client passes
//! every check, and each defect is flagged by exactly the checks listed in [`TABLE`]. The real
//! binary runs real client processes that speak HTTP to the fake API on 127.0.0.1.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::binary::{bin, wait_bounded};
use serde_json::Value;

fn client_py() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/clients/client.py")
        .to_string_lossy()
        .into_owned()
}

/// The sample client with `defect` switched on ("correct" for none), as a command line.
fn sample(defect: &str) -> Vec<String> {
    let mut argv = vec!["python3".to_string(), client_py()];
    if defect != "correct" {
        argv.extend(["--defect".to_string(), defect.to_string()]);
    }
    argv
}

struct Run {
    code: i32,
    json: Value,
    dir: tempfile::TempDir,
}

/// Runs `idem-check client [extra] --report-json … -- argv`.
fn check_client(extra: &[&str], argv: &[String]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("client.json");
    let out = bin()
        .arg("client")
        .args(extra)
        .args(["--color", "never", "--report-json"])
        .arg(&json_path)
        .args(["--report-junit"])
        .arg(dir.path().join("client.xml"))
        .args(["--report-markdown"])
        .arg(dir.path().join("client.md"))
        .arg("--")
        .args(argv)
        .output()
        .expect("the binary runs");
    let text = std::fs::read_to_string(&json_path).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}); stdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    Run {
        code: out.status.code().unwrap_or(-1),
        json: serde_json::from_str(&text).unwrap(),
        dir,
    }
}

/// One row of [`TABLE`]: the sample client, the (probe, check) pairs that fail, the probes that
/// are INCONCLUSIVE.
type Expected = (&'static str, &'static [Pair], &'static [&'static str]);
type Pair = (&'static str, &'static str);

/// For each sample client: the (probe, check) pairs that must fail, and the probes that must be
/// INCONCLUSIVE; every other probe must PASS. A defect can be flagged by more than its own check
/// only where another check states the same rule: a client without keys double-charges when a
/// response is lost, and a new key per retry breaks both checks that require the same key.
const TABLE: &[Expected] = &[
    ("correct", &[], &[]),
    (
        "no-key",
        &[
            ("client-key-present", "key-on-first-attempt"),
            ("client-lost-response", "one-payment"),
        ],
        &["client-key-syntax", "client-key-per-operation"],
    ),
    ("bare-key", &[("client-key-syntax", "key-syntax")], &[]),
    (
        "new-key-per-retry",
        &[
            ("client-lost-response", "same-key"),
            ("client-lost-response", "one-payment"),
            ("client-retry-after", "same-key"),
        ],
        &[],
    ),
    (
        "no-retry-on-lost-response",
        &[
            ("client-lost-response", "retried"),
            ("client-lost-response", "exit-success"),
        ],
        &[],
    ),
    (
        "changing-payload",
        &[
            ("client-lost-response", "same-payload"),
            ("client-lost-response", "exit-success"),
        ],
        &[],
    ),
    (
        "retries-on-4xx",
        &[
            ("client-stops-on-4xx", "no-retry"),
            ("client-stops-on-4xx", "exit-failure"),
        ],
        &[],
    ),
    (
        "ignores-retry-after",
        &[("client-retry-after", "waited")],
        &[],
    ),
    (
        "static-key",
        &[("client-key-per-operation", "distinct-keys")],
        &[],
    ),
];

const PROBES: [&str; 6] = [
    "client-key-present",
    "client-key-syntax",
    "client-lost-response",
    "client-retry-after",
    "client-stops-on-4xx",
    "client-key-per-operation",
];

fn outcomes(json: &Value) -> BTreeMap<String, String> {
    json["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap().to_string(),
                p["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn failed_checks(json: &Value) -> BTreeSet<(String, String)> {
    json["probes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            let id = p["id"].as_str().unwrap().to_string();
            p["checks"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["passed"] == false)
                .map(move |c| (id.clone(), c["id"].as_str().unwrap().to_string()))
        })
        .collect()
}

/// Every sample client against every scenario, in parallel (each run has its own fake APIs on
/// ephemeral ports). Prints the verdict table.
#[test]
fn each_defect_is_flagged_by_its_checks_and_the_correct_client_passes_everything() {
    let runs: Vec<(&str, Run)> = std::thread::scope(|s| {
        let handles: Vec<_> = TABLE
            .iter()
            .map(|(name, _, _)| (*name, s.spawn(move || check_client(&[], &sample(name)))))
            .collect();
        handles
            .into_iter()
            .map(|(n, h)| (n, h.join().unwrap()))
            .collect()
    });
    let mut table = format!(
        "| client | {} |\n|---|{}\n",
        PROBES.join(" | "),
        "---|".repeat(6)
    );
    for (name, run) in &runs {
        let o = outcomes(&run.json);
        let cells: Vec<String> = PROBES.iter().map(|p| o[*p].clone()).collect();
        table.push_str(&format!("| {name} | {} |\n", cells.join(" | ")));
    }
    println!("{table}");
    for ((name, run), (_, fails, inconclusive)) in runs.iter().zip(TABLE) {
        let want: BTreeSet<(String, String)> = fails
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect();
        assert_eq!(failed_checks(&run.json), want, "{name}\n{table}");
        let flagged: BTreeSet<&str> = fails.iter().map(|(p, _)| *p).collect();
        for (probe, outcome) in outcomes(&run.json) {
            let expected = if flagged.contains(probe.as_str()) {
                &["FAIL", "WARN"][..]
            } else if inconclusive.contains(&probe.as_str()) {
                &["INCONCLUSIVE"][..]
            } else {
                &["PASS"][..]
            };
            assert!(
                expected.contains(&outcome.as_str()),
                "{name}: {probe} is {outcome}\n{table}"
            );
        }
        // Only recommended checks failed for ignores-retry-after: a WARN, which exits 0.
        let want_code = if fails.is_empty() || *name == "ignores-retry-after" {
            0
        } else {
            4
        };
        assert_eq!(run.code, want_code, "{name}");
        assert_eq!(run.json["schema"], "idem-check.client/1");
    }
}

#[test]
fn the_lost_response_is_a_closed_connection_to_a_real_client_and_reports_hide_the_token() {
    let run = check_client(
        &["--scenario", "lost-response"],
        &sample("no-retry-on-lost-response"),
    );
    // The field names of schema idem-check.client/1, pinned.
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(
        keys(&run.json),
        [
            "schema",
            "tool",
            "command",
            "suite",
            "strict",
            "started_at",
            "duration_ms",
            "interrupted",
            "summary",
            "probes",
            "scenarios"
        ]
    );
    let scenario = &run.json["scenarios"][0];
    assert_eq!(
        keys(scenario),
        ["id", "what", "base_url", "attempts", "payments", "runs"]
    );
    assert_eq!(
        keys(&scenario["runs"][0]),
        ["run", "start_ms", "duration_ms", "exit", "stdout", "stderr"]
    );
    let stderr = scenario["runs"][0]["stderr"]["text"].as_str().unwrap();
    assert!(
        stderr.contains("connection error: RemoteDisconnected"),
        "the client must see a closed connection, not a status: {stderr}"
    );
    assert_eq!(scenario["payments"], 1, "the payment was committed first");
    let text = run.json.to_string();
    assert!(text.contains("Bearer [redacted]"));
    assert!(!regex::Regex::new("idem-check-[0-9a-f]{32}")
        .unwrap()
        .is_match(&text));
    let xml = std::fs::read_to_string(run.dir.path().join("client.xml")).unwrap();
    assert!(
        xml.contains(r#"<testcase name="client-lost-response""#) && xml.contains("<failure"),
        "{xml}"
    );
    let md = std::fs::read_to_string(run.dir.path().join("client.md")).unwrap();
    assert!(
        md.contains("| client-lost-response | ❌ FAIL | critical |"),
        "{md}"
    );
}

#[test]
fn bare_keys_pass_under_the_stripe_suite() {
    let run = check_client(
        &["--suite", "stripe", "--scenario", "created"],
        &sample("bare-key"),
    );
    let o = outcomes(&run.json);
    assert_eq!(o["client-key-syntax"], "PASS", "{o:?}");
    assert_eq!(o["client-key-present"], "PASS", "{o:?}");
    assert_eq!(run.code, 0);
}

/// A client that never returns is killed with its whole group at the deadline, its output is
/// kept (token masked), and the verdict is ERROR, not a guess.
#[test]
fn a_hanging_client_is_killed_at_the_timeout_with_its_output_kept() {
    let started = Instant::now();
    let script = r#"echo "token=$IDEM_CHECK_TOKEN" >&2; sleep 30 & wait"#;
    // Long enough for the shell to have written its line even on a loaded machine.
    let run = check_client(
        &["--scenario", "created", "--client-timeout", "5s"],
        &["sh".into(), "-c".into(), script.into()],
    );
    assert!(started.elapsed() < Duration::from_secs(25));
    assert_eq!(run.code, 3, "ERROR: the client could not be checked");
    let r = &run.json["scenarios"][0]["runs"][0];
    assert_eq!(r["exit"]["kind"], "timeout", "{r}");
    assert_eq!(r["stderr"]["text"], "token=[redacted]\n", "{r}");
    assert_eq!(outcomes(&run.json)["client-key-present"], "ERROR");
}

/// `--listen`: idem-check serves one scenario on the given address and judges whoever comes;
/// the base URL and token are printed for the user to export.
fn listen(defect: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let json_path: PathBuf = dir.path().join("listen.json");
    let mut server = bin()
        .args([
            "client",
            "--listen",
            "127.0.0.1:0",
            "--scenario",
            "lost-response",
            "--client-timeout",
            "30s",
            "--color",
            "never",
            "--report-json",
        ])
        .arg(&json_path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let export = lines
        .by_ref()
        .take(5)
        .map(Result::unwrap)
        .find(|l| l.contains("export "))
        .expect("the listen banner");
    let env: BTreeMap<&str, &str> = export
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect();
    let client = Command::new("python3")
        .arg(client_py())
        .args(if defect == "correct" {
            vec![]
        } else {
            vec!["--defect", defect]
        })
        .env("IDEM_CHECK_BASE_URL", env["IDEM_CHECK_BASE_URL"])
        .env("IDEM_CHECK_TOKEN", env["IDEM_CHECK_TOKEN"])
        .output()
        .unwrap();
    assert!(client.status.code().is_some());
    let status = wait_bounded(&mut server, Duration::from_secs(60));
    assert!(status.code().is_some());
    serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap()
}

#[test]
fn listen_mode_judges_an_external_client_and_can_fail_it() {
    let good = listen("correct");
    assert_eq!(outcomes(&good)["client-lost-response"], "PASS");
    assert!(failed_checks(&good).is_empty(), "{}", good["probes"]);
    let bad = listen("no-retry-on-lost-response");
    assert_eq!(outcomes(&bad)["client-lost-response"], "FAIL");
    assert!(failed_checks(&bad).contains(&("client-lost-response".into(), "retried".into())));
    // Under --listen idem-check does not run the client, so it judges no exit status.
    let checks = bad["probes"][0]["checks"].as_array().unwrap();
    assert!(checks.iter().all(|c| c["id"] != "exit-success"));
}

/// A request the fake API refuses for the client's own setup (here: no token) is an ERROR that
/// says what to fix, never a verdict on retries that the scenario could not provoke.
#[test]
fn a_client_that_sends_no_token_gets_an_error_naming_it() {
    let script = r#"
import http.client, os, urllib.parse
u = urllib.parse.urlsplit(os.environ["IDEM_CHECK_BASE_URL"])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
c.request("POST", "/api/payments", body='{"amountCents":1,"currency":"EUR","reference":"r"}',
          headers={"Idempotency-Key": '"k"', "Content-Type": "application/json"})
raise SystemExit(0 if c.getresponse().status < 300 else 1)
"#;
    let run = check_client(
        &["--scenario", "lost-response"],
        &["python3".into(), "-c".into(), script.into()],
    );
    assert_eq!(run.code, 3);
    let p = &run.json["probes"][0];
    assert_eq!(p["outcome"], "ERROR");
    assert!(
        p["reason"]
            .as_str()
            .unwrap()
            .contains("refused #1 with 401"),
        "{}",
        p["reason"]
    );
}
