//! `idem-check client` against the sample clients of fixtures/clients/: the correct client passes
//! every check, and each defect is flagged by exactly the checks listed in [`TABLE`]. The real
//! binary runs real client processes that speak HTTP to the fake API on 127.0.0.1.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::binary::{bin, wait_bounded};
use common::python;
use serde_json::Value;

fn client_py() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/clients/client.py")
        .to_string_lossy()
        .into_owned()
}

/// A Python client that uses the standard library only, as a command line: the interpreter with
/// `-S`, so none of the hundreds of client starts in this module scans site-packages or runs its
/// `.pth` hooks, then `args`.
fn python_client(args: &[&str]) -> Vec<String> {
    let mut argv = vec![python::interpreter_word(), "-S".to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    argv
}

/// The sample client with `defect` switched on ("correct" for none), as a command line.
fn sample(defect: &str) -> Vec<String> {
    let mut argv = python_client(&[&client_py()]);
    if defect != "correct" {
        argv.extend(["--defect".to_string(), defect.to_string()]);
    }
    argv
}

struct Run {
    code: i32,
    json: Value,
    /// What the terminal showed (stdout).
    terminal: String,
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
        terminal: String::from_utf8_lossy(&out.stdout).into_owned(),
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
/// response is lost, a new key per retry breaks every check that requires the same key, one
/// fixed key is reused across processes and within one, and a client that ignores Retry-After
/// ignores it on a 429 too. Info checks (retry-after-ms) are left out: they never decide.
const TABLE: &[Expected] = &[
    ("correct", &[], &[]),
    (
        "no-key",
        &[
            ("client-key-present", "key-on-first-attempt"),
            ("client-lost-response", "one-payment"),
        ],
        &[
            "client-key-syntax",
            "client-key-per-operation",
            "client-retry-after",
            "client-throttled",
        ],
    ),
    ("bare-key", &[("client-key-syntax", "key-syntax")], &[]),
    (
        "new-key-per-retry",
        &[
            ("client-lost-response", "same-key"),
            ("client-lost-response", "one-payment"),
            ("client-retry-after", "same-key"),
            ("client-throttled", "same-key"),
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
        // Its retry creates the payment and it exits 0: the retry is the failure, the exit
        // says truly what happened.
        &[("client-stops-on-4xx", "no-retry")],
        &[],
    ),
    (
        "ignores-retry-after",
        &[
            ("client-retry-after", "waited"),
            ("client-throttled", "waited"),
        ],
        &[],
    ),
    (
        "static-key",
        &[
            ("client-key-per-operation", "distinct-keys"),
            ("client-key-per-operation", "distinct-keys-in-process"),
        ],
        &[],
    ),
    (
        "key-reused-across-operations",
        &[("client-key-per-operation", "distinct-keys-in-process")],
        &[],
    ),
    ("ignores-429", &[("client-throttled", "retried")], &[]),
    (
        "retries-on-400",
        &[("client-stops-on-4xx", "no-retry")],
        &[],
    ),
    (
        "needs-error-envelope",
        &[("client-stops-on-4xx", "exit-failure")],
        &[],
    ),
];

/// Lines a run's terminal output may take: two screens. The attempts in full are in the reports.
const TERMINAL_LINES: usize = 100;

/// Sample clients whose only failed checks are recommended ones: a WARN, which exits 0.
const WARN_ONLY: &[&str] = &["ignores-retry-after", "ignores-429"];

const PROBES: [&str; 7] = [
    "client-key-present",
    "client-key-syntax",
    "client-lost-response",
    "client-retry-after",
    "client-throttled",
    "client-stops-on-4xx",
    "client-key-per-operation",
];

/// The scenario whose Retry-After is 7 s: run once per client it can tell apart (the correct
/// one and the one that ignores Retry-After), beside the table, not in every row of it.
const LONG_WAIT: &str = "retry-after-7s";

/// Every scenario but [`LONG_WAIT`], as `--scenario` options.
fn short_scenarios() -> Vec<String> {
    let list = [
        "created",
        "two-operations",
        "operations-in-one-process",
        "lost-response",
        "retry-after-503",
        "retry-after-409",
        "retry-after-ms",
        "throttled-429",
        "timeout-408",
        "refused-422",
        "refused-400",
    ];
    list.iter()
        .flat_map(|s| ["--scenario".to_string(), s.to_string()])
        .collect()
}

/// The argv of a client (`python3 -c`) that sends one POST to `path` of the base URL with the
/// JSON `body` and the headers of the Python dict expression `headers`, once, and exits 0 on a
/// 2xx.
fn one_post(path: &str, body: &str, headers: &str) -> Vec<String> {
    let script = format!(
        r#"
import http.client, os, urllib.parse, uuid
u = urllib.parse.urlsplit(os.environ["IDEM_CHECK_BASE_URL"])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
c.request("POST", "{path}", body='{body}', headers={headers})
raise SystemExit(0 if c.getresponse().status < 300 else 1)
"#
    );
    python_client(&["-c", &script])
}

fn outcomes(json: &Value) -> BTreeMap<String, String> {
    common::json_report::probe_outcomes(json)
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
                .filter(|c| c["passed"] == false && c["severity"] != "info")
                .map(move |c| (id.clone(), c["id"].as_str().unwrap().to_string()))
        })
        .collect()
}

/// The verdict table of `runs`, one row per sample client, one column per probe.
fn verdict_table(runs: &[(&str, Run)]) -> String {
    let mut table = format!(
        "| client | {} |\n|---|{}\n",
        PROBES.join(" | "),
        "---|".repeat(PROBES.len())
    );
    for (name, run) in runs {
        let o = outcomes(&run.json);
        let cells: Vec<String> = PROBES.iter().map(|p| o[*p].clone()).collect();
        table.push_str(&format!("| {name} | {} |\n", cells.join(" | ")));
    }
    table
}

/// Asserts that `run` of sample client `name` failed exactly the checks of its `row`, had the
/// row's INCONCLUSIVE probes, passed every other probe, and exited accordingly.
fn assert_row(name: &str, run: &Run, row: &Expected, table: &str) {
    let (_, fails, inconclusive) = row;
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
    let want_code = if fails.is_empty() || WARN_ONLY.contains(&name) {
        0
    } else {
        4
    };
    assert_eq!(run.code, want_code, "{name}");
    assert_eq!(run.json["schema"], "idem-check.client/1");
}

/// Every sample client against every scenario, in parallel (each run has its own fake APIs on
/// ephemeral ports); the 7 s Retry-After runs once each for the two clients it tells apart, in
/// the same parallel batch. Prints the verdict table.
#[test]
fn each_defect_is_flagged_by_its_checks_and_the_correct_client_passes_everything() {
    let short = short_scenarios();
    let long = ["--scenario", LONG_WAIT];
    let (runs, long_runs): (Vec<(&str, Run)>, Vec<Run>) = std::thread::scope(|s| {
        let long_handles: Vec<_> = ["correct", "ignores-retry-after"]
            .into_iter()
            .map(|name| s.spawn(move || check_client(&long, &sample(name))))
            .collect();
        let handles: Vec<_> = TABLE
            .iter()
            .map(|(name, _, _)| {
                let short: Vec<&str> = short.iter().map(String::as_str).collect();
                (*name, s.spawn(move || check_client(&short, &sample(name))))
            })
            .collect();
        (
            handles
                .into_iter()
                .map(|(n, h)| (n, h.join().unwrap()))
                .collect(),
            long_handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect(),
        )
    });
    let waited = |run: &Run| {
        run.json["probes"][0]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "waited")
            .map(|c| c["passed"].clone())
    };
    assert_eq!(
        waited(&long_runs[0]),
        Some(Value::Bool(true)),
        "{}",
        long_runs[0].json["probes"]
    );
    assert_eq!(
        waited(&long_runs[1]),
        Some(Value::Bool(false)),
        "{}",
        long_runs[1].json["probes"]
    );
    let table = verdict_table(&runs);
    println!("{table}");
    for ((name, run), row) in runs.iter().zip(TABLE) {
        assert_row(name, run, row, &table);
    }
    for (name, run) in runs.iter().map(|(n, r)| (*n, r)).chain(
        ["correct (7 s)", "ignores-retry-after (7 s)"]
            .into_iter()
            .zip(&long_runs),
    ) {
        let lines = run.terminal.lines().count();
        assert!(
            lines <= TERMINAL_LINES,
            "{name}: {lines} lines in the terminal\n{}",
            run.terminal
        );
        assert!(
            !run.terminal.contains("\n> POST ") && !run.terminal.contains("curl "),
            "{name}: no dumps in the terminal\n{}",
            run.terminal
        );
        if run.code != 0 || run.terminal.contains("warnings\n") {
            assert!(
                run.terminal
                    .contains("in full in the JSON and HTML reports)"),
                "{name}: says where the attempts are\n{}",
                run.terminal
            );
        }
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
            "operations",
            "reads",
            "key",
            "errors",
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
        [
            "id",
            "what",
            "base_url",
            "attempts",
            "payments",
            "credentials",
            "runs"
        ]
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
        md.contains("| client-lost-response | ❌ FAIL | required |"),
        "giving up is not a duplicate payment: {md}"
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

/// The sample clients that send their key as the body's `idempotency_key`, judged with
/// `--key-in-body /idempotency_key`: a body key is judged exactly as a header key, so each row
/// is its header twin's row of [`TABLE`] (a regenerated body key fails the same-key checks and
/// nothing that compares payloads).
const BODY_TABLE: &[Expected] = &[
    ("correct", &[], &[]),
    (
        "no-key",
        &[
            ("client-key-present", "key-on-first-attempt"),
            ("client-lost-response", "one-payment"),
        ],
        &[
            "client-key-syntax",
            "client-key-per-operation",
            "client-retry-after",
            "client-throttled",
        ],
    ),
    (
        "new-key-per-retry",
        &[
            ("client-lost-response", "same-key"),
            ("client-lost-response", "one-payment"),
            ("client-retry-after", "same-key"),
            ("client-throttled", "same-key"),
        ],
        &[],
    ),
];

#[test]
fn body_keys_are_judged_as_header_keys() {
    let mut args = short_scenarios();
    args.extend(["--key-in-body".into(), "/idempotency_key".into()]);
    let runs: Vec<(&str, Run)> = std::thread::scope(|s| {
        let handles: Vec<_> = BODY_TABLE
            .iter()
            .map(|(name, _, _)| {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let mut argv = sample(name);
                argv.push("--key-in-body".into());
                (*name, s.spawn(move || check_client(&args, &argv)))
            })
            .collect();
        handles
            .into_iter()
            .map(|(n, h)| (n, h.join().unwrap()))
            .collect()
    });
    let table = verdict_table(&runs);
    println!("{table}");
    for ((name, run), row) in runs.iter().zip(BODY_TABLE) {
        assert_row(name, run, row, &table);
        assert_eq!(run.json["key"], "body /idempotency_key, token", "{name}");
        assert!(
            run.terminal.contains("key: body /idempotency_key, token"),
            "{name}: the header line names the carrier\n{}",
            run.terminal
        );
    }
    let timeline = |run: &Run| -> Vec<String> {
        run.json["probes"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["timeline"].as_array().unwrap().iter())
            .map(|l| l.as_str().unwrap().to_string())
            .collect()
    };
    let no_key = timeline(&runs[1].1);
    assert!(
        no_key.iter().any(|l| l.contains("no key, same payload"))
            && !no_key.iter().any(|l| l.contains("same key")),
        "no key seen is never the same key: {no_key:#?}"
    );
    let regenerated = timeline(&runs[2].1);
    assert!(
        regenerated
            .iter()
            .any(|l| l.contains("(no response), another key, same payload")),
        "the body key is judged on its own, not as a payload change: {regenerated:#?}"
    );
}

/// Under a `token` carrier a bare key is a key like any other: client-key-syntax passes it, and
/// no message asks for an RFC 8941 String (a provider whose header takes opaque tokens would
/// refuse the quotes). The draft's header keeps its rule.
#[test]
fn a_token_carrier_takes_a_bare_key_and_never_asks_for_quotes() {
    let (token, ietf) = std::thread::scope(|s| {
        let token = s.spawn(|| {
            check_client(
                &["--key-syntax", "token", "--scenario", "created"],
                &sample("bare-key"),
            )
        });
        let ietf = s.spawn(|| check_client(&["--scenario", "created"], &sample("bare-key")));
        (token.join().unwrap(), ietf.join().unwrap())
    });
    let o = outcomes(&token.json);
    assert_eq!(o["client-key-syntax"], "PASS", "{o:?}");
    assert_eq!(token.code, 0);
    assert_eq!(token.json["key"], "header Idempotency-Key, token");
    let checks = token.json["probes"].to_string();
    assert!(!checks.contains("an RFC 8941 String, e.g."), "{checks}");
    assert_eq!(outcomes(&ietf.json)["client-key-syntax"], "FAIL");
    assert_eq!(ietf.json["key"], "header Idempotency-Key, ietf");
}

/// A body key that cannot be served, or two carriers at once: one line naming the flag, before
/// the client runs.
#[test]
fn a_bad_key_carrier_is_an_error_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let touch = vec!["touch".to_string(), marker.to_string_lossy().into_owned()];
    let square = client_fixture("openapi/square-payments.yaml");
    let cases: [(&[&str], &str); 4] = [
        (&["--key-in-body", ""], "--key-in-body"),
        (&["--key-in-body", "/"], "--key-in-body"),
        (
            &["--openapi", &square, "--key-in-body", "/amount_money/key"],
            "--key-in-body /amount_money/key: the request body of CreatePayment (POST /v2/payments) declares no such field (it declares amount, currency)",
        ),
        (
            &[
                "--openapi",
                "doc.yaml",
                "--key-header",
                "X-Key",
                "--key-in-body",
                "/k",
            ],
            "--key-in-body",
        ),
    ];
    for (args, flag) in cases {
        let out = bin()
            .arg("client")
            .args(args)
            .arg("--")
            .args(&touch)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.contains(flag), "{args:?}: {stderr}");
        assert!(
            matches!(out.status.code(), Some(1 | 2)),
            "{args:?}: {stderr}"
        );
        assert!(!marker.exists(), "{args:?}: the client ran");
    }
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
    // The terminal shows each ERROR with the timeline its reason points at, output included.
    assert!(
        run.terminal.contains("client-key-present  ERROR")
            && run.terminal.contains("run 1 stderr| token=[redacted]"),
        "{}",
        run.terminal
    );
    assert!(!run.terminal.contains("more probes"), "{}", run.terminal);
}

/// Polls (every 10 ms, at most 20 s) until `done` holds.
fn until(what: &str, done: impl Fn() -> bool) {
    let bound = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < bound, "{what}: not within 20 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Ctrl-C while the client command runs: exit 130, and the JUnit lists every probe of the
/// selection, the one it stopped as an error and the ones it kept from starting as skipped
/// (before, they were left out and the JUnit read as a complete run); the command's whole
/// group is killed.
#[test]
fn ctrl_c_marks_the_probes_that_did_not_run_in_the_junit() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("client.json");
    let junit = dir.path().join("client.xml");
    let grandchild = dir.path().join("grandchild");
    // The client starts a grandchild, says its pid (written whole, then renamed), and waits.
    let script = format!(
        "sleep 60 & echo $! > '{g}.new'; mv '{g}.new' '{g}'; wait",
        g = grandchild.display()
    );
    let mut child = bin()
        .args([
            "client",
            "--scenario",
            "created",
            "--scenario",
            "lost-response",
        ])
        .args(["--color", "never", "--report-json"])
        .arg(&json)
        .arg("--report-junit")
        .arg(&junit)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Interrupt only once the client runs: the run is then inside the first probe's scenario.
    until("the client's grandchild", || grandchild.exists());
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        wait_bounded(&mut child, Duration::from_secs(20)).code(),
        Some(130)
    );

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["interrupted"], true, "{report}");
    let probes: Vec<(&str, &str, &str)> = report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let field = |k: &str| p[k].as_str().unwrap();
            (field("id"), field("outcome"), field("reason"))
        })
        .collect();
    assert_eq!(
        probes,
        [
            (
                "client-key-present",
                "ERROR",
                idem_check::runner::INTERRUPTED_INSIDE
            ),
            (
                "client-key-syntax",
                "SKIP",
                idem_check::runner::NOT_RUN_INTERRUPTED
            ),
            (
                "client-lost-response",
                "SKIP",
                idem_check::runner::NOT_RUN_INTERRUPTED
            ),
        ]
    );
    assert_eq!(report["scenarios"], serde_json::json!([]), "{report}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"tests="3""#), "{xml}");
    assert!(xml.contains(r#"errors="1""#), "{xml}");
    assert!(xml.contains(r#"skipped="2""#), "{xml}");
    assert!(
        xml.contains(r#"name="client-lost-response""#) && xml.contains("<skipped "),
        "{xml}"
    );
    common::junit_schema::assert_valid(&[junit]);
    let pid = std::fs::read_to_string(&grandchild).unwrap();
    until("the grandchild's end", || {
        std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).map_or(true, |stat| {
            stat.rsplit(") ").next().is_some_and(|s| s.starts_with('Z'))
        })
    });
}

/// `--listen`: idem-check serves one scenario on the given address and judges whoever comes;
/// the base URL and token are printed for the user to export.
fn listen(scenario: &str, defect: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let json_path: PathBuf = dir.path().join("listen.json");
    let mut server = bin()
        .args([
            "client",
            "--listen",
            "127.0.0.1:0",
            "--scenario",
            scenario,
            "--client-timeout",
            "30s",
            // The client runs to its end before the test waits for the verdict, and waits at
            // most 0.4 s between its attempts: 2 s of silence means it is done.
            "--listen-idle",
            "2s",
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
    let client = Command::new(python::interpreter())
        .args(["-S", &client_py()])
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

/// The correct client and the defective one, each against its own listener (on its own port),
/// side by side: each session ends only after its quiet `--listen-idle`, which they wait out
/// together.
#[test]
fn listen_mode_judges_an_external_client_and_can_fail_it() {
    let (good, bad) = std::thread::scope(|s| {
        let good = s.spawn(|| listen("lost-response", "correct"));
        let bad = s.spawn(|| listen("lost-response", "no-retry-on-lost-response"));
        let join = |h: std::thread::ScopedJoinHandle<'_, Value>| {
            h.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        };
        (join(good), join(bad))
    });
    assert_eq!(outcomes(&good)["client-lost-response"], "PASS");
    assert!(failed_checks(&good).is_empty(), "{}", good["probes"]);
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
    let client = one_post(
        "/api/payments",
        r#"{"amountCents":1,"currency":"EUR","reference":"r"}"#,
        r#"{"Idempotency-Key": '"k"', "Content-Type": "application/json"}"#,
    );
    let run = check_client(&["--scenario", "lost-response"], &client);
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

/// An SDK-style client creates through an API description: the fake API serves the declared
/// path with the document's answer (a fresh `pi_` id, `object` kept) and, under the stripe
/// suite, errors in Stripe's envelope, so a client that reads only that envelope is right.
#[test]
fn an_api_description_is_served_with_its_answer_and_the_suite_error_envelope() {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/clients/openapi/stripe-payment-intents.yaml")
        .to_string_lossy()
        .into_owned();
    let mut argv = sample("needs-error-envelope");
    argv.push("--stripe".into());
    let run = check_client(
        &[
            "--openapi",
            &spec,
            "--suite",
            "stripe",
            "--scenario",
            "created",
            "--scenario",
            "refused-400",
        ],
        &argv,
    );
    assert!(
        failed_checks(&run.json).is_empty(),
        "{}",
        run.json["probes"]
    );
    assert_eq!(run.code, 0);
    assert_eq!(run.json["operations"][0], "POST /v1/payment_intents");
    let created = &run.json["scenarios"][0];
    let stdout = created["runs"][0]["stdout"]["text"].as_str().unwrap();
    assert!(stdout.starts_with("created pi_0001"), "{stdout}");
    assert_eq!(created["credentials"][0], "bearer");
    let refused = &run.json["probes"][2]["exchanges"][0]["response"];
    let body = String::from_utf8(
        refused["body"]
            .as_str()
            .map(|b| b.as_bytes().to_vec())
            .unwrap_or_default(),
    )
    .unwrap();
    assert!(body.contains("invalid_request_error"), "{refused}");
}

/// The path part of the document's server URL is served: Mollie's API lives under
/// `https://api.mollie.com/v2`, so its SDK posts `/v2/payments` for the path `/payments`.
#[test]
fn the_server_urls_path_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("mollie.yaml");
    std::fs::write(
        &spec,
        "openapi: 3.0.3\ninfo: {title: t, version: '1'}\nservers:\n  - url: https://api.mollie.com/v2\n\
         paths:\n  /payments:\n    post:\n      operationId: create-payment\n      parameters:\n\
         \x20       - {name: Idempotency-Key, in: header, schema: {type: string}}\n      responses:\n\
         \x20       '201':\n          description: created\n          content:\n\
         \x20           application/json:\n              example: {resource: payment, id: tr_WDqYK6vllg}\n",
    )
    .unwrap();
    let run = check_client(
        &["--openapi", spec.to_str().unwrap(), "--scenario", "created"],
        &one_post(
            "/v2/payments",
            r#"{"amount": {"value": "10.00", "currency": "EUR"}}"#,
            r#"{"Idempotency-Key": '"%s"' % uuid.uuid4(), "Content-Type": "application/json"}"#,
        ),
    );
    assert_eq!(run.json["operations"][0], "POST /v2/payments");
    assert!(
        failed_checks(&run.json).is_empty(),
        "{}",
        run.json["probes"]
    );
    assert_eq!(outcomes(&run.json)["client-key-present"], "PASS");
    assert_eq!(run.code, 0);
}

/// Any credential is accepted under --path (here an API-key header), recorded by kind, and
/// its secret masked; a client that ignores IDEM_CHECK_OPERATIONS performs one operation, which
/// is INCONCLUSIVE for key-per-operation, never a PASS.
#[test]
fn any_credential_is_recorded_and_one_operation_is_not_a_pass_of_key_per_operation() {
    let client = one_post(
        "/v2/orders/o-1/charges",
        r#"{"total": 5}"#,
        r#"{"Idempotency-Key": '"%s"' % uuid.uuid4(), "X-Api-Key": os.environ["IDEM_CHECK_TOKEN"],
            "Content-Type": "application/json"}"#,
    );
    let run = check_client(
        &[
            "--path",
            "/v2/orders/{id}/charges",
            "--scenario",
            "created",
            "--scenario",
            "operations-in-one-process",
        ],
        &client,
    );
    let o = outcomes(&run.json);
    assert_eq!(o["client-key-present"], "PASS", "{}", run.json["probes"]);
    assert_eq!(o["client-key-per-operation"], "INCONCLUSIVE");
    let reason = run.json["probes"][2]["reason"].as_str().unwrap();
    assert!(reason.contains("IDEM_CHECK_OPERATIONS=2"), "{reason}");
    assert_eq!(
        run.json["scenarios"][0]["credentials"][0],
        "header x-api-key"
    );
    assert!(!regex::Regex::new("idem-check-[0-9a-f]{32}")
        .unwrap()
        .is_match(&run.json.to_string()));
}

/// Bad input ends with one clear line before any client runs: a document without a keyed
/// operation, one whose operation has no 2xx answer to serve.
#[test]
fn documents_that_cannot_be_served_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "openapi: 3.0.3\npaths:\n  /a:\n    post:\n      responses:\n        '200': {description: ok}\n",
            "no operation takes an idempotency key header",
        ),
        (
            "openapi: 3.0.3\npaths:\n  /a:\n    post:\n      operationId: makeA\n      parameters:\n        - {name: Idempotency-Key, in: header, schema: {type: string}}\n      responses:\n        '204': {description: nothing}\n",
            "operation makeA (POST /a) cannot be served",
        ),
    ];
    for (i, (doc, want)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("doc{i}.yaml"));
        std::fs::write(&path, doc).unwrap();
        let out = bin()
            .args(["client", "--openapi"])
            .arg(&path)
            .args(["--", "true"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert_ne!(out.status.code(), Some(0));
    }
}

/// `idem-check list` shows the client checks beside the probes, with their severities.
#[test]
fn list_shows_the_client_checks_with_severities() {
    let out = bin().arg("list").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "client-throttled",
        "throttled-429, timeout-408",
        "recommended  the client tries again after a 429 or 408",
        "required     each operation has its own key (several operations in one process)",
        "critical     exactly one payment exists at the end",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
}

/// `--error-body FILE` gives every injected error the shape an SDK parses, with the status,
/// message and Stripe-like type filled in; the status code stays the scenario's.
#[test]
fn an_error_body_file_shapes_every_injected_error() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("error.json");
    std::fs::write(
        &template,
        r#"{"errors": [{"status": {{status}}, "kind": "{{type}}", "text": "{{message}}"}]}"#,
    )
    .unwrap();
    let run = check_client(
        &[
            "--error-body",
            template.to_str().unwrap(),
            "--scenario",
            "throttled-429",
        ],
        &sample("correct"),
    );
    let first = &run.json["probes"][0]["exchanges"][0]["response"];
    assert_eq!(first["status"], 429, "{first}");
    let body: Value = serde_json::from_str(first["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["errors"][0]["status"], 429, "{body}");
    assert_eq!(body["errors"][0]["kind"], "invalid_request_error");
    assert_eq!(run.json["errors"], "--error-body errors");
    assert!(
        failed_checks(&run.json).is_empty(),
        "{}",
        run.json["probes"]
    );
}

/// Under `--listen`, a client run once against two-operations made one operation: that is
/// INCONCLUSIVE and says to run it again (not "made no request"), with a real duration.
#[test]
fn listen_mode_with_one_of_two_operations_says_to_run_the_client_again() {
    let report = listen("two-operations", "correct");
    let p = &report["probes"][0];
    assert_eq!(p["id"], "client-key-per-operation");
    assert_eq!(p["outcome"], "INCONCLUSIVE", "{p}");
    let reason = p["reason"].as_str().unwrap();
    assert!(
        reason.contains("only 1 of the 2 operations") && reason.contains("run the client 2 times"),
        "{reason}"
    );
    assert!(p["duration_ms"].as_f64().unwrap() >= 0.0, "{p}");
}

fn client_fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/clients")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The sample clients that speak Square's CreatePayment (`--square`: the key in the body's
/// `idempotency_key`), served from Square's API description with no carrier flag: the carrier
/// comes from the document. Each row is its twin's in [`BODY_TABLE`].
const SQUARE_TABLE: &[Expected] = &[
    ("correct", &[], &[]),
    (
        "new-key-per-retry",
        &[
            ("client-lost-response", "same-key"),
            ("client-lost-response", "one-payment"),
            ("client-retry-after", "same-key"),
            ("client-throttled", "same-key"),
        ],
        &[],
    ),
];

#[test]
fn a_body_key_declared_by_the_document_is_judged_through_it() {
    let spec = client_fixture("openapi/square-payments.yaml");
    let mut args = short_scenarios();
    args.extend(["--openapi".into(), spec]);
    let runs: Vec<(&str, Run)> = std::thread::scope(|s| {
        let handles: Vec<_> = SQUARE_TABLE
            .iter()
            .map(|(name, _, _)| {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let mut argv = sample(name);
                argv.push("--square".into());
                (*name, s.spawn(move || check_client(&args, &argv)))
            })
            .collect();
        handles
            .into_iter()
            .map(|(n, h)| (n, h.join().unwrap()))
            .collect()
    });
    let table = verdict_table(&runs);
    println!("{table}");
    for ((name, run), row) in runs.iter().zip(SQUARE_TABLE) {
        assert_row(name, run, row, &table);
        assert_eq!(run.json["key"], "body /idempotency_key, token", "{name}");
        assert_eq!(run.json["operations"][0], "POST /v2/payments", "{name}");
    }
}

/// A created resource is served back by the document's read operation at the id the answer
/// gave it (the shallowest `id`, here the wrapped `payment.id`, or the one at `--id-pointer`),
/// an unknown id is 404, and each read is in the timeline. A `--id-pointer` the answer has no
/// place for is one line naming the flag, before the client runs.
#[test]
fn created_resources_are_read_back_by_the_read_operation() {
    let client = |create: &str, id_path: &str, read: &str| {
        let script = format!(
            r#"
import http.client, json, os, urllib.parse, uuid
u = urllib.parse.urlsplit(os.environ["IDEM_CHECK_BASE_URL"])
def call(method, path, body=None):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    c.request(method, path, body=body, headers={{"Authorization": "Bearer " + os.environ["IDEM_CHECK_TOKEN"], "Content-Type": "application/json"}})
    r = c.getresponse()
    return r.status, r.read()
status, body = call("POST", "{create}", json.dumps({{"source_id": "s", "idempotency_key": str(uuid.uuid4()), "amount_money": {{"amount": 5, "currency": "USD"}}}}))
created = json.loads(body)
ident = created{id_path}
read, again = call("GET", "{read}" + ident)
missing, _ = call("GET", "{read}" + "no-such-id")
print(read, missing)
raise SystemExit(0 if (status, read, missing) == (200, 200, 404) and json.loads(again) == created else 1)
"#
        );
        python_client(&["-c", &script])
    };
    let spec = client_fixture("openapi/square-payments.yaml");
    let run = check_client(
        &["--openapi", &spec, "--scenario", "created"],
        &client("/v2/payments", r#"["payment"]["id"]"#, "/v2/payments/"),
    );
    assert_eq!(run.code, 0, "{}", run.json["scenarios"]);
    let timeline = run.json["probes"][0]["timeline"].to_string();
    assert!(
        timeline.contains("#2 GET /v2/payments/") && timeline.contains(": 200 (reads back"),
        "{timeline}"
    );
    assert!(
        timeline.contains("/v2/payments/no-such-id: 404"),
        "{timeline}"
    );
    assert_eq!(run.json["scenarios"][0]["payments"], 1);

    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("refs.yaml");
    std::fs::write(
        &doc,
        "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /things:\n    post:\n\
         \x20     operationId: makeThing\n      requestBody:\n        content:\n\
         \x20         application/json:\n            schema:\n              type: object\n\
         \x20             properties: {idempotency_key: {type: string}}\n      responses:\n\
         \x20       '201':\n          description: made\n          content:\n\
         \x20           application/json:\n              example: {data: {ref: th-1, kind: thing}}\n\
         \x20 /things/{ref}:\n    get:\n      responses:\n        '200': {description: ok}\n",
    )
    .unwrap();
    let doc = doc.to_string_lossy().into_owned();
    let mut pointed = client("/things", r#"["data"]["ref"]"#, "/things/");
    let script = pointed.last_mut().expect("the script");
    *script = script.replace(
        "(status, read, missing) == (200,",
        "(status, read, missing) == (201,",
    );
    let run = check_client(
        &[
            "--openapi",
            &doc,
            "--id-pointer",
            "/data/ref",
            "--scenario",
            "created",
        ],
        &pointed,
    );
    assert_eq!(run.code, 0, "{}", run.json["scenarios"]);
    assert_eq!(run.json["key"], "body /idempotency_key, token");
    let stdout = run.json["scenarios"][0]["runs"][0]["stdout"]["text"].to_string();
    assert!(stdout.contains("200 404"), "{stdout}");

    for (pointer, says) in [
        ("/nothing/here", "has nothing at \"/nothing\""),
        ("data/ref", "expected a JSON pointer"),
    ] {
        let out = bin()
            .args(["client", "--openapi", &doc, "--id-pointer", pointer])
            .args(["--", "true"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("--id-pointer") && stderr.contains(says),
            "{stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert_ne!(out.status.code(), Some(0));
    }
}

/// `--conflict-on-replay` answers a retry whose key already created the payment with 409
/// naming it (here in GoCardless's error shape, `{{id}}` filled), and a client that fetches what
/// the conflict names, as GoCardless's SDKs do, gets the payment from the read operation: the
/// lost response ends with one payment and exit 0, and the fetch is in the timeline.
#[test]
fn a_conflict_names_the_payment_and_a_client_that_fetches_it_passes() {
    let dir = tempfile::tempdir().unwrap();
    let conflict = dir.path().join("409.json");
    std::fs::write(
        &conflict,
        r#"{"error": {"code": 409, "type": "invalid_state", "message": "{{message}}",
            "errors": [{"reason": "idempotent_creation_conflict",
                        "links": {"conflicting_resource_id": "{{id}}"}}]}}"#,
    )
    .unwrap();
    let script = r#"
import http.client, json, os, sys, time, urllib.parse, uuid
u = urllib.parse.urlsplit(os.environ["IDEM_CHECK_BASE_URL"])
auth = {"Authorization": "Bearer " + os.environ["IDEM_CHECK_TOKEN"]}
def call(method, path, body=None, headers={}):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    c.request(method, path, body=body, headers=dict(auth, **headers))
    r = c.getresponse()
    return r.status, json.loads(r.read() or b"{}")
key = '"%s"' % uuid.uuid4()
body = json.dumps({"amountCents": 1250, "currency": "EUR", "reference": "r-" + key[1:9]})
for attempt in range(3):
    try:
        status, doc = call("POST", "/api/payments", body, {"Idempotency-Key": key, "Content-Type": "application/json"})
    except (OSError, http.client.HTTPException):
        time.sleep(0.2)
        continue
    if status == 409:
        ident = doc["error"]["errors"][0]["links"]["conflicting_resource_id"]
        status, doc = call("GET", "/api/payments/" + ident)
    print(status, doc.get("id"))
    sys.exit(0 if status < 300 else 1)
sys.exit(1)
"#;
    let error_body = format!("409={}", conflict.display());
    let run = check_client(
        &[
            "--conflict-on-replay",
            "--error-body",
            &error_body,
            "--scenario",
            "created",
            "--scenario",
            "lost-response",
        ],
        &python_client(&["-c", script]),
    );
    let o = outcomes(&run.json);
    assert_eq!(o["client-lost-response"], "PASS", "{}", run.json["probes"]);
    assert_eq!(run.code, 0);
    let lost = &run.json["scenarios"][1];
    assert_eq!(lost["payments"], 1);
    let timeline = run.json["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "client-lost-response")
        .unwrap()["timeline"]
        .to_string();
    assert!(
        timeline.contains("(no response), same key, same payload")
            && timeline.contains("GET /api/payments/pay_0001")
            && timeline.contains(": 200 (reads back a created resource)"),
        "{timeline}"
    );
    let conflict_answer = run.json["probes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["exchanges"].as_array().unwrap().iter())
        .find(|e| e["response"]["status"] == 409)
        .map(|e| e["response"]["body"].to_string())
        .unwrap_or_default();
    assert!(
        conflict_answer.contains("conflicting_resource_id"),
        "{conflict_answer}"
    );
}

/// Where `scripts/client-sdks` installed the SDKs.
const SDKS: &str = "IDEM_CHECK_CLIENT_SDKS";
/// Set by `scripts/test`: missing SDKs are a failure, not a skip.
const REQUIRE_SDKS: &str = "IDEM_CHECK_REQUIRE_CLIENT_SDKS";

/// Square's Node SDK (the key in the body) and Checkout.com's (the key in its own
/// `Cko-Idempotency-Key` header), each through its own create method against its trimmed API
/// description, every scenario: the carrier and its syntax come from the document, neither is
/// told to quote its key, and each verdict is what the SDK's source does (docs/client.md quotes
/// it). Square's retries (408, 429, ≥ 500, after Retry-After) keep the body key; neither SDK
/// retries a connection closed without an answer.
#[test]
fn provider_sdks_are_judged_through_their_own_carriers() {
    let dir = std::env::var_os(SDKS)
        .map(PathBuf::from)
        .filter(|d| d.join("node/node_modules/square/package.json").is_file());
    let Some(dir) = dir else {
        assert!(
            std::env::var_os(REQUIRE_SDKS).is_none(),
            "{REQUIRE_SDKS} is set but the SDKs are not in ${SDKS}: run scripts/client-sdks"
        );
        eprintln!("skipped: no client SDKs (run scripts/client-sdks and set {SDKS})");
        return;
    };
    let node_path = format!("NODE_PATH={}", dir.join("node/node_modules").display());
    let sdk = |adapter: &str, extra: &[&str]| {
        let mut argv = vec!["env".to_string(), node_path.clone(), "node".to_string()];
        argv.push(client_fixture(adapter));
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv
    };
    let (square, checkout) = std::thread::scope(|s| {
        let square = s.spawn(|| {
            check_client(
                &["--openapi", &client_fixture("openapi/square-payments.yaml")],
                &sdk("square_payment.mjs", &["--fetch"]),
            )
        });
        let checkout = s.spawn(|| {
            check_client(
                &[
                    "--openapi",
                    &client_fixture("openapi/checkout-payments.yaml"),
                ],
                &sdk("checkout_payment.mjs", &[]),
            )
        });
        (square.join().unwrap(), checkout.join().unwrap())
    });
    let runs = [("square", square), ("checkout", checkout)];
    let table = verdict_table(&runs);
    println!("{table}");
    // In PROBES order: key-present, key-syntax, lost-response, retry-after, throttled,
    // stops-on-4xx, key-per-operation.
    let rows = [
        (
            "body /idempotency_key, token",
            ["PASS", "PASS", "FAIL", "PASS", "PASS", "PASS", "PASS"],
            &[][..],
        ),
        (
            "header Cko-Idempotency-Key, token",
            [
                "PASS",
                "PASS",
                "FAIL",
                "INCONCLUSIVE",
                "WARN",
                "PASS",
                "PASS",
            ],
            // No retry after a 429 or a 408 either: recommended, a WARN.
            &[("client-throttled", "retried")][..],
        ),
    ];
    for ((name, run), (key, verdicts, more)) in runs.iter().zip(rows) {
        assert_eq!(run.json["key"], key, "{name}");
        let o = outcomes(&run.json);
        let got: Vec<&str> = PROBES.iter().map(|p| o[*p].as_str()).collect();
        assert_eq!(got, verdicts, "{name}\n{table}");
        // The required failure is the retry that never came, not a duplicate: one payment.
        let lost = [
            ("client-lost-response", "retried"),
            ("client-lost-response", "exit-success"),
        ];
        let want: BTreeSet<(String, String)> = lost
            .iter()
            .chain(more)
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect();
        assert_eq!(failed_checks(&run.json), want, "{name}");
        assert!(
            !run.json["probes"]
                .to_string()
                .contains("RFC 8941 String, e.g."),
            "{name}: no message asks for quotes"
        );
    }
    let reads = runs[0].1.json["probes"][0]["timeline"].to_string();
    assert!(
        reads.contains("GET /v2/payments/") && reads.contains(": 200 (reads back"),
        "Square's payments.get is served: {reads}"
    );
}
