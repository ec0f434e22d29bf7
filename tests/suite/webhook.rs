//! `idem-check webhook` through the real binary: the bundled reference consumer passes every
//! check with each of the six schemes, each of its faults fails exactly the checks it names
//! (of those the checker has), a queue-and-worker consumer in Python (fixtures/consumers/)
//! fails exactly its own checks per defect; bad input, Ctrl-C and a consumer that never answers
//! are in `webhook_input.rs`.

use std::collections::BTreeSet;
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};

use idem_check::webhook::checks::CATALOG;
use idem_reference_server::{WebhookFault, WebhookScheme};

use crate::common;
use common::binary::{bin, text};
use common::python;

pub(crate) const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Runs `idem-check webhook ARGS --strict` with a JSON report; returns the output and the
/// checks that did not PASS or SKIP, each with its outcome.
fn run(args: &[&str]) -> (Output, BTreeSet<String>) {
    let (out, bad, _) = run_report(args);
    (out, bad)
}

/// [`run`], and the JSON report.
fn run_report(args: &[&str]) -> (Output, BTreeSet<String>, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let out = bin()
        .arg("webhook")
        .args(args)
        .args(["--strict", "--report-json"])
        .arg(&json)
        .output()
        .expect("run idem-check");
    let report: serde_json::Value = match std::fs::read(&json) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap(),
        Err(_) => panic!("no JSON report\n{}", text(&out)),
    };
    let outcomes: Vec<(String, String)> = common::json_report::probe_outcomes(&report);
    let bad = outcomes
        .into_iter()
        .filter(|(_, o)| o != "PASS" && o != "SKIP")
        .map(|(id, o)| format!("{id} {o}"))
        .collect();
    (out, bad, report)
}

/// Every point a report judged is listed in the catalog (what `idem-check list` and `explain`
/// print) with the severity the report gave it; only the run's own late-effect charge is not.
fn assert_catalogued(report: &serde_json::Value) {
    for probe in report["probes"].as_array().unwrap() {
        let id = probe["id"].as_str().unwrap();
        let def = CATALOG.iter().find(|c| c.id == id).unwrap();
        for c in probe["checks"].as_array().unwrap() {
            let (cid, sev, what) = (
                c["id"].as_str().unwrap(),
                c["severity"].as_str().unwrap(),
                c["what"].as_str().unwrap(),
            );
            if cid == "no-late-effects" {
                continue;
            }
            assert!(
                def.judged
                    .iter()
                    .any(|j| j.id() == cid && j.severity.as_str() == sev && j.what() == what),
                "{id}: {sev} {cid} {what:?} is not in the catalog"
            );
        }
    }
}

fn fails(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|id| format!("{id} FAIL")).collect()
}

/// How many runs a table keeps going at once. A run mostly waits (settle windows, the late
/// redelivery's wait), so its rows side by side take about a quarter of the time in a row.
const SIDE_BY_SIDE: usize = 6;

/// Calls `row` on each of `rows`, [`SIDE_BY_SIDE`] at a time; a row that panics (its message
/// printed as it happens) fails the test once every row has run.
fn side_by_side<T: Sync>(rows: &[T], row: impl Fn(&T) + Sync) {
    let next = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..SIDE_BY_SIDE.min(rows.len()) {
            s.spawn(|| {
                while let Some(r) = rows.get(next.fetch_add(1, Ordering::SeqCst)) {
                    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| row(r))).is_err() {
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    let failed = failed.into_inner();
    assert_eq!(failed, 0, "{failed} of {} rows failed (above)", rows.len());
}

/// `wh-late-redelivery`'s wait in these runs: against the reference consumer its
/// `dedupe-ttl` fault then forgets an id after 5/6 of it.
const LATE_AFTER: &str = "1s";

#[test]
fn the_reference_consumer_passes_every_check_with_each_scheme() {
    side_by_side(WebhookScheme::ALL, |scheme| {
        let (out, bad, report) = run_report(&[
            "--reference",
            "--scheme",
            scheme.name(),
            "--late-after",
            LATE_AFTER,
        ]);
        assert!(bad.is_empty(), "{}: {bad:?}\n{}", scheme.name(), text(&out));
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert_catalogued(&report);
    });
}

/// `idem-check list` shows every webhook check with the severity of each point it judges, and
/// `idem-check explain` knows every webhook check id.
#[test]
fn list_and_explain_show_every_webhook_check() {
    let out = bin().arg("list").output().unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    for c in CATALOG {
        let row = format!("\n{:<26} {}\n", c.id, c.needs_line());
        assert!(listed.contains(&row), "{row:?} not listed\n{listed}");
        for j in c.judged {
            let line = format!("    {:<12} {}\n", j.severity.as_str(), j.what());
            assert!(listed.contains(&line), "{}: {line:?} not listed", c.id);
        }
        let out = bin().args(["explain", c.id]).output().unwrap();
        let explained = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(
            explained.starts_with(&format!("{}  (webhook", c.id)),
            "{explained}"
        );
        assert!(explained.contains(c.requirement), "{explained}");
    }
}

/// Every reference fault fails exactly the checks `breaks_for` names, with `standard` (a
/// signed timestamp, several signatures) and `github` (neither): one test per scheme, so the
/// two run side by side.
fn each_reference_fault_fails_exactly_its_checks(scheme: WebhookScheme) {
    let built: BTreeSet<&str> = CATALOG.iter().map(|c| c.id).collect();
    side_by_side(WebhookFault::ALL, |&fault| {
        let expected: Vec<&str> = fault.breaks_for(scheme);
        if let Some(missing) = expected.iter().find(|id| !built.contains(*id)) {
            panic!("{fault} breaks {missing}, which idem-check webhook does not have");
        }
        let (out, bad) = run(&[
            "--reference",
            "--reference-fault",
            fault.name(),
            "--scheme",
            scheme.name(),
            "--late-after",
            LATE_AFTER,
        ]);
        assert_eq!(
            bad,
            fails(&expected),
            "{} with {}\n{}",
            fault.name(),
            scheme.name(),
            text(&out)
        );
        let code = if expected.is_empty() { 0 } else { 4 };
        assert_eq!(out.status.code(), Some(code), "{}", text(&out));
    });
}

#[test]
fn each_reference_fault_fails_exactly_its_checks_with_standard() {
    each_reference_fault_fails_exactly_its_checks(WebhookScheme::Standard);
}

#[test]
fn each_reference_fault_fails_exactly_its_checks_with_github() {
    each_reference_fault_fails_exactly_its_checks(WebhookScheme::Github);
}

/// The queue-and-worker consumer answers 202 before its worker applies the event: the counts
/// are read settled, so each defect fails its own checks and the correct one none. Its
/// restart (`POST /restart`, GET /ready failing twice after it) is the `--restart-cmd`.
#[test]
fn the_queue_consumer_fails_exactly_the_checks_of_its_defect() {
    queue_consumer_rows(0..7);
}

/// The second half of [`the_queue_consumer_fails_exactly_the_checks_of_its_defect`]'s table,
/// so the two halves run side by side.
#[test]
fn the_queue_consumer_fails_exactly_the_checks_of_its_defect_continued() {
    queue_consumer_rows(7..QUEUE_TABLE.len());
}

/// The queue consumer's verdict table: each defect and the checks it fails.
const QUEUE_TABLE: &[(&str, &[&str])] = &[
    ("none", &[]),
    (
        "no-dedupe",
        &[
            "wh-redelivery",
            "wh-byte-replay",
            "wh-concurrent-duplicates",
            "wh-late-redelivery",
        ],
    ),
    ("body-hash-dedupe", &["wh-distinct-events"]),
    (
        "signature-dedupe",
        &[
            "wh-redelivery",
            "wh-concurrent-duplicates",
            "wh-late-redelivery",
        ],
    ),
    ("accept-unsigned", &["wh-bad-signature"]),
    (
        "accept-everything",
        &[
            "wh-bad-signature",
            "wh-stale-timestamp",
            "wh-future-timestamp",
        ],
    ),
    ("reserialize", &["wh-raw-body"]),
    (
        "no-timestamp-check",
        &["wh-stale-timestamp", "wh-future-timestamp"],
    ),
    // Its mark is never undone: a forgery's id, and a crashed delivery's, stay "seen".
    (
        "dedupe-before-verify",
        &["wh-forgery-no-poison", "wh-retry-after-failure"],
    ),
    ("seen-is-processed", &["wh-retry-after-failure"]),
    ("unknown-type-400", &["wh-unknown-type"]),
    ("dedupe-in-memory", &["wh-late-redelivery"]),
    ("dedupe-ttl", &["wh-late-redelivery"]),
];

/// The rows `rows` of [`QUEUE_TABLE`], each against its own consumer.
fn queue_consumer_rows(rows: std::ops::Range<usize>) {
    side_by_side(&QUEUE_TABLE[rows], |&(defect, expected)| {
        let consumer = python::start(
            "fixtures/consumers/queue_consumer.py",
            &[
                "--secret",
                SECRET,
                "--defect",
                defect,
                "--dedupe-ttl",
                "0.5",
                "--lifetime",
                "120",
            ],
        );
        let url = format!("{}/webhooks", consumer.base);
        let count = format!("{}/count", consumer.base);
        let restart = format!(
            "{} -c \"import urllib.request as u; u.urlopen(u.Request('{}/restart', data=b''))\"",
            python::interpreter_in_shell(),
            consumer.base
        );
        let ready = format!("{}/ready", consumer.base);
        let (out, bad) = run(&[
            &url,
            "--scheme",
            "standard",
            "--secret",
            SECRET,
            "--count-url",
            &count,
            "--count-pointer",
            "/count",
            "--crash-header",
            "X-Crash: 1",
            "--late-after",
            LATE_AFTER,
            "--restart-cmd",
            &restart,
            "--ready-url",
            &ready,
        ]);
        assert_eq!(bad, fails(expected), "{defect}\n{}", text(&out));
        if defect == "accept-everything" {
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout.contains("every forgery is refused 4xx (a 2xx is an accepted forgery)"),
                "{}",
                text(&out)
            );
        }
        // The secret never shows, in the terminal or the report.
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains(SECRET),
            "{}",
            text(&out)
        );
    });
}

/// Where `scripts/webhook-vendors` installed the senders' libraries.
const VENDORS: &str = "IDEM_CHECK_WEBHOOK_VENDORS";
/// Set by `scripts/test`: missing libraries are a failure, not a skip.
const REQUIRE_VENDORS: &str = "IDEM_CHECK_REQUIRE_WEBHOOK_VENDORS";

/// Every scheme's deliveries as idem-check signs them verify with the sender's own library
/// (fixtures/consumers/vendor_consumer.py verifies with standardwebhooks, svix, stripe,
/// slack_sdk and @octokit/webhooks-methods), and its forgeries (a tampered body, a wrong
/// secret, no signature) do not: every check passes, the calibration and wh-bad-signature
/// among them. Stripe's `construct_event` checks only a timestamp's age, so a delivery signed
/// in the future is accepted: wh-future-timestamp says so (a WARN, FAIL under --strict).
#[test]
fn every_scheme_verifies_with_the_senders_own_library() {
    let dir = std::env::var_os(VENDORS)
        .map(std::path::PathBuf::from)
        .filter(|d| d.join("venv/bin/python").is_file());
    let Some(dir) = dir else {
        assert!(
            std::env::var_os(REQUIRE_VENDORS).is_none(),
            "{REQUIRE_VENDORS} is set but the libraries are not in ${VENDORS}: run scripts/webhook-vendors"
        );
        eprintln!(
            "skipped: no webhook vendor libraries (run scripts/webhook-vendors and set {VENDORS})"
        );
        return;
    };
    let modules = dir.join("node/node_modules");
    side_by_side(WebhookScheme::ALL, |scheme| {
        let secret = match scheme {
            WebhookScheme::Standard | WebhookScheme::Svix | WebhookScheme::Stripe => SECRET,
            _ => "a-plain-shared-secret",
        };
        let consumer = python::start_with(
            &dir.join("venv/bin/python"),
            "fixtures/consumers/vendor_consumer.py",
            &[
                "--scheme",
                scheme.name(),
                "--secret",
                secret,
                "--node-modules",
                modules.to_str().unwrap(),
                "--lifetime",
                "120",
            ],
        );
        let count = format!("{}/count", consumer.base);
        let (out, bad) = run(&[
            &format!("{}/webhooks", consumer.base),
            "--scheme",
            scheme.name(),
            "--secret",
            secret,
            "--count-url",
            &count,
            "--count-pointer",
            "/count",
            "--late-after",
            LATE_AFTER,
        ]);
        let expected = if *scheme == WebhookScheme::Stripe {
            fails(&["wh-future-timestamp"])
        } else {
            BTreeSet::new()
        };
        assert_eq!(bad, expected, "{}\n{}", scheme.name(), text(&out));
    });
}

/// A reproduce line recomputes the signature from `$IDEM_CHECK_WEBHOOK_SECRET` (with openssl)
/// instead of naming a masked value: pasted into a shell with the secret exported it replays
/// the delivery, which the consumer accepts; with another secret the consumer refuses it; the
/// secret itself is in no output.
#[test]
fn a_reproduce_line_signs_with_the_exported_secret() {
    let consumer = python::start(
        "fixtures/consumers/queue_consumer.py",
        &[
            "--secret",
            SECRET,
            "--defect",
            "no-dedupe",
            "--lifetime",
            "60",
        ],
    );
    let count = format!("{}/count", consumer.base);
    let (out, bad) = run(&[
        &format!("{}/webhooks", consumer.base),
        "--scheme",
        "standard",
        "--secret",
        SECRET,
        "--count-url",
        &count,
        "--count-pointer",
        "/count",
        "--probe",
        "wh-redelivery",
        "--late-after",
        "0s",
    ]);
    assert_eq!(bad, fails(&["wh-redelivery"]), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains(SECRET), "{stdout}");
    assert!(
        stdout.contains("$IDEM_CHECK_WEBHOOK_SECRET = the webhook signing secret"),
        "{stdout}"
    );
    let line = stdout
        .lines()
        .skip_while(|l| !l.starts_with("reproduce #2"))
        .nth(1)
        .unwrap_or_else(|| panic!("no reproduce line\n{stdout}"))
        .trim();
    assert!(line.contains("openssl dgst"), "{line}");
    let replay = |secret: &str| {
        let out = std::process::Command::new("bash")
            .args(["-c", line])
            .env("IDEM_CHECK_WEBHOOK_SECRET", secret)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(
        replay(SECRET).starts_with("HTTP/1.1 202"),
        "{}",
        replay(SECRET)
    );
    let other = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    assert!(
        replay(other).starts_with("HTTP/1.1 401"),
        "{}",
        replay(other)
    );
}

/// The script of action.yml's step that runs idem-check, as GitHub runs it.
fn action_step() -> String {
    let path = format!("{}/action.yml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let docs = yaml_rust2::YamlLoader::load_from_str(&text).unwrap();
    let steps = docs[0]["runs"]["steps"].as_vec().unwrap();
    let step = steps
        .iter()
        .find(|s| !s["env"]["IDEM_COMMAND"].is_badvalue())
        .expect("a step with IDEM_COMMAND");
    step["run"].as_str().unwrap().to_string()
}

/// The GitHub Action accepts `command: webhook`: its step runs `idem-check webhook` with the
/// target and args given and writes the reports; an unknown command is one error line.
#[test]
fn the_github_action_runs_the_webhook_command() {
    let script = action_step();
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_idem-check"))
        .parent()
        .unwrap()
        .to_owned();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let step = |command: &str| {
        std::process::Command::new("bash")
            .args(["-c", &script])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("IDEM_COMMAND", command)
            .env("IDEM_TARGET", "")
            .env(
                "IDEM_ARGS",
                "--reference --scheme github --probe wh-redelivery --late-after 0s",
            )
            .env("IDEM_JUNIT", "idem-check.xml")
            .env("IDEM_JSON", "report.json")
            .env("IDEM_HTML", "idem-check.html")
            .output()
            .unwrap()
    };
    let out = step("webhook");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(report["suite"], "webhook", "{report}");
    assert!(dir.path().join("idem-check.xml").is_file());
    assert!(dir.path().join("idem-check.html").is_file());
    let out = step("stress");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("::error::command: expected run or webhook, got 'stress'"),
        "{}",
        text(&out)
    );
}

/// The sender connects as `run` does, through the run's Connector and its flags: with
/// `--resolve` a consumer named by a host no DNS knows is reached, the counter, the plain
/// deliveries and the burst alike, and the header says so.
#[test]
fn the_connection_flags_reach_the_consumer() {
    let consumer = python::start(
        "fixtures/consumers/queue_consumer.py",
        &["--secret", SECRET, "--lifetime", "60"],
    );
    let port = consumer.base.rsplit(':').next().unwrap();
    let base = format!("http://consumer.idem-check.invalid:{port}");
    let resolve = format!("consumer.idem-check.invalid:{port}:127.0.0.1");
    let (out, bad, report) = run_report(&[
        &format!("{base}/webhooks"),
        "--scheme",
        "standard",
        "--secret",
        SECRET,
        "--count-url",
        &format!("{base}/count"),
        "--count-pointer",
        "/count",
        "--resolve",
        &resolve,
        "--probe",
        "wh-redelivery,wh-concurrent-duplicates",
    ]);
    assert!(bad.is_empty(), "{bad:?}\n{}", text(&out));
    let outcomes: Vec<(String, String)> = common::json_report::probe_outcomes(&report);
    assert_eq!(outcomes.len(), 3, "{outcomes:?}");
    assert!(outcomes.iter().all(|(_, o)| o == "PASS"), "{outcomes:?}");
    let context = report["context"].to_string();
    assert!(context.contains("consumer.idem-check.invalid"), "{context}");
}
