//! `idem-check reproduce`: a probe's scenario read back from a JSON report and sent again to the
//! same reference server, which stays up between the run and the replay. The counter rises by
//! more than one where the server double-executes (the `race` burst, the
//! `release-on-disconnect` lost response) and by one where it is correct.

use std::path::{Path, PathBuf};
use std::time::Duration;

use idem_check::carrier::Place;
use idem_check::reference::Reference;
use idem_reference_server::Fault;

use crate::common;
use common::binary::{bin_async, text};

/// The longest one binary invocation may take.
const LIMIT: Duration = Duration::from_secs(120);

async fn output(cmd: &mut tokio::process::Command) -> std::process::Output {
    tokio::time::timeout(LIMIT, cmd.output())
        .await
        .expect("idem-check finishes within its limit")
        .expect("the binary runs")
}

/// Runs `probes` against `reference` with a JSON report in `dir`.
async fn run(reference: &Reference, probes: &[&str], dir: &Path) -> PathBuf {
    let json = dir.join("report.json");
    let mut cmd = bin_async();
    cmd.arg("run")
        .args(common::target_flags::flags(
            &reference.target(),
            str::to_string,
        ))
        .args(probes.iter().flat_map(|p| ["--probe", p]))
        .arg("--report-json")
        .arg(&json)
        .arg("-q");
    let out = output(&mut cmd).await;
    assert!(matches!(out.status.code(), Some(0 | 4)), "{}", text(&out));
    json
}

/// `reproduce REPORT --probe ID ARGS` with tenant A's token given as the variable the report
/// names it by.
async fn reproduce(
    reference: &Reference,
    json: &Path,
    probe: &str,
    args: &[&str],
) -> std::process::Output {
    let mut cmd = bin_async();
    cmd.arg("reproduce")
        .arg(json)
        .args(["--probe", probe])
        .arg("--var")
        .arg(format!("IDEM_TOKEN_A={}", reference.token(0)))
        .args(args)
        .env_remove("IDEM_TOKEN_A");
    output(&mut cmd).await
}

/// How much the replay saw the counter rise.
fn rise(out: &std::process::Output) -> u64 {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("the counter rose by "))
        .unwrap_or_else(|| panic!("no counter rise printed\n{}", text(out)));
    line.split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number in {line:?}"))
}

/// Under `race` a replayed burst executes one key many times (exit 4); on the correct server
/// every one of the bursts executes once (exit 0). The token never appears in what reproduce
/// prints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_replayed_from_the_report_double_executes_only_under_race() {
    for (fault, expect_double) in [(Some(Fault::Race), true), (None, false)] {
        let reference = Reference::start(fault).await.expect("the reference starts");
        let dir = tempfile::tempdir().unwrap();
        let json = run(&reference, &["concurrent-duplicates"], dir.path()).await;
        let out = reproduce(&reference, &json, "concurrent-duplicates", &[]).await;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            stdout.contains("16 copies released together"),
            "{}",
            text(&out)
        );
        assert!(
            !stdout.contains(&reference.token(0)),
            "the token is masked\n{stdout}"
        );
        if expect_double {
            assert!(rise(&out) > 1, "{fault:?}: {}", text(&out));
            assert_eq!(out.status.code(), Some(4), "{}", text(&out));
        } else {
            assert_eq!(rise(&out), 1, "{}", text(&out));
            assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        }
        reference.stop().await.expect("the reference stops");
    }
}

/// `lost-response` replayed: the original held with a fresh hold, its connection closed as the
/// probe closed it, the retries sent at their offsets and the hold released after the first.
/// `release-on-disconnect` forgets the key of the dropped request, so its retry executes
/// again (the counter rises by 2, exit 4); the correct server executes it once. A report whose
/// keys travelled in the body is replayed with its fresh key in the body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_response_replayed_with_its_hold_and_drop() {
    let body = Place::Body("/idempotency_key".into());
    for (fault, key, expected) in [
        (Some(Fault::ReleaseOnDisconnect), None, 2),
        (None, None, 1),
        (Some(Fault::ReleaseOnDisconnect), Some(&body), 2),
    ] {
        let reference = Reference::start_with(fault, None, key)
            .await
            .expect("the reference starts");
        let dir = tempfile::tempdir().unwrap();
        let json = run(&reference, &["lost-response"], dir.path()).await;
        let out = reproduce(&reference, &json, "lost-response", &[]).await;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(stdout.contains("released the hold"), "{}", text(&out));
        if key.is_some() {
            assert!(
                stdout.contains("a fresh key (body /idempotency_key)"),
                "{}",
                text(&out)
            );
        }
        assert_eq!(rise(&out), expected, "{fault:?}: {}", text(&out));
        let code = if expected > 1 { 4 } else { 0 };
        assert_eq!(out.status.code(), Some(code), "{}", text(&out));
        reference.stop().await.expect("the reference stops");
    }
}

/// One exchange sent again exactly as recorded: replay-identity's original, whose key is used,
/// is replayed (no new execution). Without its variable, reproduce names it (exit 1); an
/// exchange the probe does not have is a usage error too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_exchange_is_sent_again_as_recorded() {
    let reference = Reference::start(None).await.expect("the reference starts");
    let dir = tempfile::tempdir().unwrap();
    let json = run(&reference, &["replay-identity"], dir.path()).await;
    let out = reproduce(&reference, &json, "replay-identity", &["--exchange", "2"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(stdout.contains("idempotency-replayed: true"), "{stdout}");
    assert!(stdout.contains("Bearer [redacted]"), "{stdout}");
    assert_eq!(rise(&out), 0, "{stdout}");

    let mut cmd = bin_async();
    cmd.arg("reproduce")
        .arg(&json)
        .args(["--probe", "replay-identity", "--exchange", "2"])
        .env_remove("IDEM_TOKEN_A");
    let out = output(&mut cmd).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("IDEM_TOKEN_A"),
        "{}",
        text(&out)
    );

    let out = reproduce(&reference, &json, "replay-identity", &["--exchange", "99"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--exchange"),
        "{}",
        text(&out)
    );
    reference.stop().await.expect("the reference stops");
}

/// A report of `run --reference` names a server that stopped with its run: reproduce says so
/// (exit 2) instead of failing to connect.
#[tokio::test]
async fn a_report_of_the_in_process_reference_is_refused_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut cmd = bin_async();
    cmd.args([
        "run",
        "--reference",
        "--probe",
        "replay-identity",
        "-q",
        "--report-json",
    ])
    .arg(&json);
    let out = output(&mut cmd).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let mut cmd = bin_async();
    cmd.arg("reproduce")
        .arg(&json)
        .args(["--probe", "replay-identity"]);
    let out = output(&mut cmd).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("stopped with that run"),
        "{}",
        text(&out)
    );
}

/// A report that cannot be read, or is not JSON, is one error line that names the file and
/// says why once (the cause used to be printed a second time by the error chain).
#[tokio::test]
async fn an_unreadable_report_is_one_error_saying_why_once() {
    let dir = tempfile::tempdir().unwrap();
    let not_json = dir.path().join("r.json");
    std::fs::write(&not_json, "not json").unwrap();
    let missing = dir.path().join("missing.json");
    for (path, why) in [
        (&not_json, "is not an idem-check run report"),
        (&missing, "cannot read"),
    ] {
        let o = output(
            bin_async()
                .arg("reproduce")
                .arg(path)
                .args(["--probe", "first-request"]),
        )
        .await;
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(why), "{err}");
        let cause = err.rsplit(": ").next().unwrap().trim();
        assert_eq!(err.matches(cause).count(), 1, "the cause once: {err}");
    }
}
