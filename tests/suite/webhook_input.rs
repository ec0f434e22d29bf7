//! `idem-check webhook`'s inputs, interruption and reports through the real binary: bad input
//! ends with one line naming the flag, before anything is sent; a consumer that never answers
//! is an ERROR, not a hang; Ctrl-C marks what did not run in every report; `reproduce` signs a
//! webhook report's deliveries again. The verdict tables are in `webhook.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};

use idem_check::webhook::checks::CATALOG;

use crate::common;
use common::binary::{bin, text};
use common::python;

use super::webhook::SECRET;

fn refused(args: &[&str]) -> (Option<i32>, String) {
    let out = bin().arg("webhook").args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_input_is_one_line_naming_the_flag() {
    let base = [
        "http://127.0.0.1:9/w",
        "--count-url",
        "http://127.0.0.1:9/c",
        "--count-pointer",
        "/count",
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let (code, err) = refused(
        &with(&["--scheme", "paypal", "--secret", SECRET])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--scheme"), "{err}");
    let (code, err) = refused(
        &with(&["--scheme", "standard", "--secret", "not-a-whsec"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--secret: standard secrets are whsec_"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("event.json");
    std::fs::write(&template, r#"{"type":"payment_intent.succeeded"}"#).unwrap();
    let (code, err) = refused(
        &with(&[
            "--scheme",
            "stripe",
            "--secret",
            "whsec_x",
            "--event",
            template.to_str().unwrap(),
        ])
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>(),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(":1: no {{event_id}}"), "{err}");
    // --unknown-event is read and checked as JSON at start: one line naming the flag.
    let not_json = dir.path().join("unknown.json");
    std::fs::write(&not_json, "{\"type\": \"x\",\n oops}").unwrap();
    let missing = dir.path().join("missing.json");
    for (file, wanted) in [
        (&not_json, ":2: not JSON once its placeholders are filled"),
        (&missing, ": cannot read it"),
    ] {
        let (code, err) = refused(
            &with(&[
                "--scheme",
                "standard",
                "--secret",
                SECRET,
                "--unknown-event",
                file.to_str().unwrap(),
            ])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        );
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.starts_with("idem-check: --unknown-event ") || err.contains("--unknown-event "),
            "{err}"
        );
        assert!(err.contains(wanted), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    // The hold and the selection are checked as `run` checks them, before anything is sent.
    let standard = ["--scheme", "standard", "--secret", SECRET];
    for (extra, wanted) in [
        (
            &["--hold-header", "X-Hold: {{hold}}"][..],
            "--hold-header with {{hold}} needs --hold-release",
        ),
        (
            &[
                "--hold-header",
                "X-Hold: {{hold}}",
                "--hold-release",
                "ftp://h/{{hold}}",
            ][..],
            "--hold-release",
        ),
        (
            &["--hold-release", "http://127.0.0.1:9/{{hold}}"][..],
            "--hold-release needs --hold-header",
        ),
        (
            &["--probe", "wh-redelivry"][..],
            "--probe: no webhook check \"wh-redelivry\" (did you mean \"wh-redelivery\"?)",
        ),
    ] {
        let args = with(&[&standard[..], extra].concat());
        let (code, err) = refused(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(code, Some(1), "{extra:?}: {err}");
        assert!(err.contains(wanted), "{extra:?}: {err}");
    }
    // A target file is read as `run` reads one: its errors name FILE:LINE, and a flag laid
    // over it is named as the flag.
    let file = dir.path().join("consumer.toml");
    std::fs::write(
        &file,
        "url = \"http://127.0.0.1:9/w\"\nquiet-window = \"2m\"\n\n[counter]\nurl = \"http://127.0.0.1:9/c\"\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let (code, err) = refused(&[&["--target", file][..], &standard[..]].concat());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("consumer.toml:2:"), "{err}");
    let flagged = [
        &["--target", file, "--quiet-window", "70s"][..],
        &standard[..],
    ]
    .concat();
    let (code, err) = refused(&flagged);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--quiet-window 1m 10s must be more than 0 and at most 1m"),
        "{err}"
    );
}

/// A consumer that accepts connections and never answers: the calibration says so within
/// --timeout, the other checks SKIP naming it, and the run ends (exit 3).
#[test]
fn a_consumer_that_never_answers_is_an_error_not_a_hang() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let counter = python::start(
        "fixtures/consumers/queue_consumer.py",
        &["--secret", SECRET, "--lifetime", "60"],
    );
    let count = format!("{}/count", counter.base);
    let out = bin()
        .args([
            "webhook",
            &format!("{base}/w"),
            "--scheme",
            "standard",
            "--secret",
            SECRET,
        ])
        .args([
            "--count-url",
            &count,
            "--count-pointer",
            "/count",
            "--timeout",
            "1s",
        ])
        .output()
        .unwrap();
    drop(listener);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        stdout.contains("the consumer did not answer a valid delivery"),
        "{}",
        text(&out)
    );
}

/// Ctrl-C while the calibration's delivery is in flight (to a consumer that never answers):
/// exit 130, and every report lists every selected check, the one stopped as an ERROR and the
/// ones it kept from starting as SKIPs saying so, so an interrupted JUnit never looks complete.
#[test]
fn ctrl_c_marks_the_unrun_checks_in_every_report() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(AtomicUsize::new(0));
    let accepted = seen.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            accepted.fetch_add(1, Ordering::SeqCst);
            held.push(conn);
        }
    });
    let counter = python::start(
        "fixtures/consumers/queue_consumer.py",
        &["--secret", SECRET, "--lifetime", "60"],
    );
    let count = format!("{}/count", counter.base);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let junit = dir.path().join("r.xml");
    let mut child = bin()
        .args(["webhook", &format!("{base}/w"), "--scheme", "standard"])
        .args([
            "--secret",
            SECRET,
            "--count-url",
            &count,
            "--count-pointer",
            "/count",
        ])
        .args(["--timeout", "20s", "--report-json"])
        .arg(&json)
        .arg("--report-junit")
        .arg(&junit)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let arrived = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while seen.load(Ordering::SeqCst) == 0 {
        assert!(std::time::Instant::now() < arrived, "no delivery arrived");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let code = common::binary::wait_bounded(&mut child, std::time::Duration::from_secs(10));
    assert_eq!(code.code(), Some(130));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["interrupted"], true, "{report}");
    let probes = report["probes"].as_array().unwrap();
    assert_eq!(probes.len(), CATALOG.len(), "{report}");
    assert_eq!(probes[0]["id"], "wh-first-delivery", "{report}");
    assert_eq!(probes[0]["outcome"], "ERROR", "{report}");
    assert!(
        probes[1..]
            .iter()
            .all(|p| p["outcome"] == "SKIP"
                && p["reason"] == idem_check::runner::NOT_RUN_INTERRUPTED),
        "{report}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"errors="1""#), "{xml}");
    assert!(
        xml.contains(&format!(r#"skipped="{}""#, CATALOG.len() - 1)),
        "{xml}"
    );
    common::junit_schema::assert_valid(&[junit]);
}

/// The answer a reproduce line shows for the exchange numbered `n`: what follows `): `.
fn answer_to(stdout: &str, n: usize) -> String {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("#{n} ")))
        .unwrap_or_else(|| panic!("no line for #{n}\n{stdout}"));
    line.split_once("): ")
        .map(|(_, a)| a.to_string())
        .unwrap_or_else(|| line.to_string())
}

/// `idem-check reproduce` sends a webhook report's check again: every delivery signed afresh
/// from `$IDEM_CHECK_WEBHOOK_SECRET` (the report keeps which key signed it, never the secret),
/// so the consumer accepts the genuine ones now as it did then, while a forgery goes out still
/// forged and is refused; the counter is read around them as the run read it. Without the variable it is one line naming it, exit 2, and nothing is
/// sent; a `webhook --reference` report, whose consumer is gone, is refused in one line.
#[test]
fn reproduce_signs_a_webhook_reports_deliveries_again() {
    let consumer = python::start(
        "fixtures/consumers/queue_consumer.py",
        &["--secret", SECRET],
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("webhook.json");
    let count = format!("{}/count", consumer.base);
    let out = bin()
        .arg("webhook")
        .arg(format!("{}/webhooks", consumer.base))
        .args(["--scheme", "standard", "--secret", SECRET])
        .args(["--count-url", &count, "--count-pointer", "/count"])
        .args(["--probe", "wh-redelivery", "--probe", "wh-bad-signature"])
        .arg("--report-json")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report = std::fs::read_to_string(&json).unwrap();
    assert!(!report.contains(SECRET), "{report}");
    let reproduce = |probe: &str, secret: Option<&str>| {
        let mut cmd = bin();
        cmd.arg("reproduce").arg(&json).args(["--probe", probe]);
        cmd.env_remove("IDEM_CHECK_WEBHOOK_SECRET");
        if let Some(secret) = secret {
            cmd.env("IDEM_CHECK_WEBHOOK_SECRET", secret);
        }
        cmd.output().unwrap()
    };

    let out = reproduce("wh-redelivery", Some(SECRET));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!stdout.contains(SECRET), "{stdout}");
    for n in [2, 3] {
        let answer = answer_to(&stdout, n);
        assert!(answer.starts_with('2'), "#{n}: {answer}\n{stdout}");
    }
    assert!(
        stdout.contains("signed afresh with $IDEM_CHECK_WEBHOOK_SECRET, timestamp now"),
        "{stdout}"
    );
    // The recorded event ids, already applied: the consumer applies nothing again.
    assert!(
        stdout.contains("count before: ") && stdout.contains("the counter rose by 0"),
        "{stdout}"
    );

    let out = reproduce("wh-bad-signature", Some(SECRET));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let wrong = answer_to(&stdout, 3);
    assert!(
        stdout.contains("signed afresh with a key the consumer does not know")
            && wrong.starts_with('4'),
        "{stdout}"
    );
    assert!(answer_to(&stdout, 4).starts_with('4'), "{stdout}");
    assert!(answer_to(&stdout, 2).contains("not sent"), "{stdout}");
    assert!(stdout.contains("the counter rose by 0"), "{stdout}");

    let out = reproduce("wh-redelivery", None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("$IDEM_CHECK_WEBHOOK_SECRET"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(out.stdout.is_empty(), "{}", text(&out));

    let reference = dir.path().join("reference.json");
    let out = bin()
        .args(["webhook", "--reference", "--scheme", "standard"])
        .args(["--probe", "wh-redelivery", "--report-json"])
        .arg(&reference)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = bin()
        .arg("reproduce")
        .arg(&reference)
        .args(["--probe", "wh-redelivery"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("a report of `webhook --reference`"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}
