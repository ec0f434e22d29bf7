//! The real binary: exit codes, clear errors on bad input, reports on disk, secrets kept out.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::binary::{bin, text, wait_bounded};

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("the binary runs")
}

/// A loopback server that answers every connection with `reply` (or nothing at all when it is
/// `None`, holding the connection open), for at most `lifetime`.
fn fake_server(reply: Option<&'static [u8]>, lifetime: Duration) -> String {
    fake_server_counted(reply, lifetime).0
}

/// [`fake_server`], also counting the requests it has read, so a test can wait until the
/// checker is really inside a probe.
fn fake_server_counted(
    reply: Option<&'static [u8]>,
    lifetime: Duration,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = seen.clone();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let end = Instant::now() + lifetime;
        let mut held = Vec::new();
        while Instant::now() < end {
            match listener.accept() {
                Ok((mut s, _)) => {
                    s.set_read_timeout(Some(Duration::from_millis(200))).ok();
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf);
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    match reply {
                        Some(r) => {
                            let _ = s.write_all(r);
                        }
                        None => held.push(s),
                    }
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    (format!("http://{addr}/api/payments"), seen)
}

/// `list` names every probe of the catalog.
#[test]
fn list_shows_every_probe() {
    let o = run(&["list"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for p in idem_check::probes::catalog() {
        assert!(out.contains(p.meta.id), "{} missing from list", p.meta.id);
    }
}

/// `explain` knows every downstream probe: its stimulus, its requirement, its checks and the
/// fake provider it needs; `list` shows each in the downstream group with that need.
#[test]
fn explain_and_list_know_every_downstream_probe() {
    let listed = run(&["list"]);
    let list = String::from_utf8_lossy(&listed.stdout);
    let catalog = idem_check::probes::catalog();
    let downstream: Vec<_> = catalog
        .iter()
        .filter(|p| p.meta.group == idem_check::probes::Group::Downstream)
        .collect();
    assert_eq!(downstream.len(), 16);
    for p in downstream {
        let id = p.meta.id;
        let line = list
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("{id} missing from list"));
        assert!(
            line.contains("downstream") && line.contains("--provider-listen"),
            "{line}"
        );
        let o = run(&["explain", id]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains(p.meta.stimulus), "{id}: {out}");
        assert!(out.contains(p.meta.requirement), "{id}: {out}");
        assert!(out.contains("--provider-listen"), "{id}: {out}");
        for c in p.meta.checks {
            assert!(out.contains(c.id) && out.contains(c.what), "{id}: {out}");
        }
    }
}

/// A bad flag is a usage error: exit 1, with clap's explanation.
#[test]
fn bad_flag_exits_1() {
    let o = run(&["run", "--no-such-flag"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--no-such-flag"));
}

/// A `--rate` that is not a usable number of requests per second is a usage error naming the
/// flag, before anything is sent.
#[test]
fn bad_rate_is_a_usage_error_naming_the_flag() {
    for (value, says) in [
        ("0", "0 would send nothing"),
        ("-5", "expected requests per second"),
        ("fast", "expected requests per second"),
        ("2.5", "expected requests per second"),
        ("99999999999", "more than 1000000 requests per second"),
    ] {
        let o = run(&["stress", "--reference", "--rate", value]);
        assert_eq!(o.status.code(), Some(1), "--rate {value}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("--rate") && err.contains(says),
            "--rate {value}: {err}"
        );
    }
}

/// An unknown probe id is a usage error that lists the known ones.
#[test]
fn unknown_probe_exits_1_and_lists_known_ids() {
    let o = run(&["run", "--reference", "--probe", "replay-identitty"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unknown probe \"replay-identitty\""), "{err}");
    assert!(err.contains("replay-identity"), "{err}");
}

/// Not a terminal (a CI log): the header line and each verdict are printed once, and what the
/// pre-flight settled after the header was printed comes as one line of its own.
#[test]
fn a_log_holds_the_header_and_each_verdict_once() {
    let o = run(&[
        "run",
        "--reference",
        "--probe",
        "replay-identity,missing-key",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines = |needle: &str| out.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(lines("· suite ietf-draft-07 ·"), 1, "{out}");
    assert_eq!(lines(" replay-identity "), 1, "{out}");
    assert_eq!(lines(" missing-key "), 1, "{out}");
    assert_eq!(
        lines("settled by the pre-flight: effects: counter"),
        1,
        "{out}"
    );
}

/// `--summary` (`-q`): the verdict lines and the summary, no evidence blocks, however many
/// probes fail; the report files keep the evidence.
#[test]
fn summary_prints_verdicts_without_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = run(&[
        "run",
        "--reference",
        "--reference-fault",
        "replay-reexecute",
        "-q",
        "--report-json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("FAIL          replay-identity"), "{out}");
    assert!(out.contains(" failed, "), "{out}");
    assert!(!out.contains("stimulus:"), "{out}");
    assert!(!out.contains("\nfailures\n"), "{out}");
    let verdicts = idem_check::probes::catalog().len();
    assert!(out.lines().count() < verdicts + 20, "{out}");
    let report = std::fs::read_to_string(&json).unwrap();
    assert!(
        report.contains("\"exchanges\""),
        "the file keeps the evidence"
    );
}

/// A lost response is reproduced as it was lost: the dropped original's curl line carries the
/// hold header it was sent with and a --max-time that drops its answer.
#[test]
fn the_dropped_original_is_reproduced_with_its_hold_and_a_max_time() {
    let o = run(&[
        "run",
        "--reference",
        "--reference-fault",
        "release-on-disconnect",
        "--probe",
        "lost-response",
        "--color",
        "never",
    ]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let mut lines = out.lines();
    lines
        .find(|l| l.starts_with("reproduce #2 (its answer dropped"))
        .unwrap_or_else(|| panic!("no reproduce line for the dropped original\n{out}"));
    let curl = lines.next().unwrap();
    assert!(curl.contains("-H 'X-Test-Hold: "), "{curl}");
    assert!(curl.contains(" --max-time 0."), "{curl}");
}

/// A misspelt probe id or group is answered with the name it is nearest to, and the list of
/// groups names each group once.
#[test]
fn a_misspelt_probe_or_group_gets_did_you_mean() {
    for (typed, meant) in [
        ("concurrent-duplicate", "concurrent-duplicates"),
        ("key-syntx", "key-syntax"),
    ] {
        let o = run(&["run", "--reference", "--probe", typed]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!(
                "unknown probe {typed:?} (did you mean {meant:?}?)"
            )),
            "{err}"
        );
        let groups = err.split("groups: ").nth(1).expect("the groups are listed");
        assert_eq!(
            groups.matches("enforcement").count(),
            1,
            "each group once: {err}"
        );
    }
    let o = run(&["run", "--reference", "--skip", "paymentz"]);
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("did you mean"),
        "{}",
        text(&o)
    );
}

/// A subcommand with two letters swapped gets a tip naming the one meant (clap alone finds
/// none for `rnu`), and is still a usage error.
#[test]
fn a_misspelt_subcommand_gets_a_tip() {
    for (typed, meant) in [("rnu", "run"), ("stres", "stress")] {
        let o = run(&[typed]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("a similar subcommand exists: '{meant}'")),
            "{err}"
        );
    }
}

/// A broken target file is exit 2 and points at file:line:col.
#[test]
fn bad_target_file_exits_2_with_location() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.toml");
    std::fs::write(&path, "url = \"http://127.0.0.1:1/p\"\nheaders = [\"Authorization: Bearer ${IDEM_NOT_SET_ANYWHERE}\"]\n").unwrap();
    let o = bin()
        .env_remove("IDEM_NOT_SET_ANYWHERE")
        .args(["run", "--target", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("t.toml:2:12"), "{err}");
    assert!(err.contains("IDEM_NOT_SET_ANYWHERE is not set"), "{err}");
}

/// A value that only the merged description can judge (a counter URL that is no URL, a quiet
/// window out of bounds) is still the file's fault when the file said it: exit 2, the file's
/// key and line, not the flag that was never given. The same value as a flag is exit 1 naming
/// the flag, and a flag given over the file's value takes the blame from it.
#[test]
fn a_bad_value_is_blamed_on_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.toml");
    let file = path.to_str().unwrap();
    std::fs::write(
        &path,
        "url = \"http://127.0.0.1:1/p\"\nquiet-window = \"2m\"\n[counter]\nurl = \"nope\"\n",
    )
    .unwrap();
    let counter = ["--count-url", "http://127.0.0.1:1/count"];
    // (arguments after `run`, exit code, what the error says, what it must not say)
    type Case<'a> = (Vec<&'a str>, i32, &'a [&'a str], &'a [&'a str]);
    let cases: [Case; 4] = [
        (
            vec!["--target", file, "--quiet-window", "1s"],
            2,
            &["[counter] url \"nope\" is not a URL", "t.toml:4:7"],
            &["--count-url"],
        ),
        (
            [["--target", file].as_slice(), &counter].concat(),
            2,
            &[
                "quiet-window 2m must be more than 0 and at most 1m",
                "t.toml:2:16",
            ],
            &["--quiet-window"],
        ),
        (
            vec!["http://127.0.0.1:1/p", "--count-url", "nope"],
            1,
            &["--count-url \"nope\" is not a URL"],
            &["-->"],
        ),
        (
            [
                ["--target", file].as_slice(),
                &counter,
                &["--quiet-window", "0s"],
            ]
            .concat(),
            1,
            &["--quiet-window 0s must be more than 0"],
            &["-->"],
        ),
    ];
    for (args, code, wanted, unwanted) in cases {
        let o = run(&[["run"].as_slice(), &args].concat());
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        for w in wanted {
            assert!(err.contains(w), "{args:?}: {w:?} missing from {err}");
        }
        for u in unwanted {
            assert!(!err.contains(u), "{args:?}: {u:?} in {err}");
        }
    }
}

/// The key carrier's inputs are checked before anything is sent, each error one line naming the
/// flag or the target file's line: a body field the body lacks, a body neither JSON nor a form,
/// a header and a body carrier at once, a shape no generated key meets, the draft's RFC 8941
/// syntax for a body key.
#[test]
fn key_carrier_inputs_are_checked_before_anything_is_sent() {
    let (url, seen) = fake_server_counted(None, Duration::from_secs(20));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.toml");
    let file = path.to_str().unwrap();
    std::fs::write(
        &path,
        format!("url = \"{url}\"\nbody = '[5]'\nkey-in-body = \"/idempotency_key\"\n"),
    )
    .unwrap();
    let json = r#"{"amount":5,"idempotency_key":"{{unique}}"}"#;
    // (arguments after the command, exit code, what the error says)
    let cases: [(Vec<&str>, i32, &str); 8] = [
        (
            vec![&url, "-d", json, "--key-in-body", "/amount/key"],
            1,
            "--key-in-body \"/amount/key\": the request body (-d) is JSON with no object at \"/amount\" to put the key's member into",
        ),
        (
            vec![&url, "-d", "{not json", "--key-in-body", "/key"],
            1,
            "is neither JSON nor a form",
        ),
        (
            vec![&url, "-d", "amount=5&ik=1", "--key-in-body", "key"],
            1,
            "is a form without a field \"key\" (it has amount, ik)",
        ),
        (
            vec![
                &url,
                "-d",
                json,
                "--key-in-body",
                "/idempotency_key",
                "--key-header",
                "X-Key",
            ],
            1,
            "give either --key-header or --key-in-body, not both",
        ),
        (
            vec![&url, "--key-shape", "token:20"],
            1,
            "--key-shape: \"token:20\": no generated key can meet it",
        ),
        (
            vec![
                &url,
                "-d",
                json,
                "--key-in-body",
                "/idempotency_key",
                "--key-syntax",
                "ietf",
            ],
            1,
            "--key-syntax ietf: an RFC 8941 String is the syntax of a header field",
        ),
        (
            vec!["--target", file],
            2,
            "key-in-body \"/idempotency_key\": the request body (body) is JSON with no object at \"/\"",
        ),
        (
            vec!["--target", file, "-d", json, "--key-syntax", "ietf"],
            1,
            "a key in the body (key-in-body /idempotency_key) is a token",
        ),
    ];
    for command in ["run", "stress"] {
        for (args, code, wanted) in &cases {
            let o = run(&[[command].as_slice(), args].concat());
            assert_eq!(o.status.code(), Some(*code), "{args:?}: {}", text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains(wanted),
                "{command} {args:?}: {wanted:?} missing from {err}"
            );
            if *code == 1 {
                assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
            } else {
                assert!(err.contains("t.toml:3:15"), "{args:?}: {err}");
            }
        }
    }
    assert_eq!(
        seen.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a request was sent"
    );
}

/// A broken suite file is exit 2 too.
#[test]
fn bad_suite_file_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.toml");
    std::fs::write(
        &path,
        "extends = \"ietf-draft-07\"\n[probes.missing-key]\nstatus = \"fatal\"\n",
    )
    .unwrap();
    let o = run(&["run", "--reference", "--suite", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("mine.toml:3:10"),
        "{}",
        text(&o)
    );
}

/// Nothing listening: one pre-flight ERROR that names the cause, exit 3.
#[test]
fn unreachable_target_exits_3() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/api/payments");
    let o = run(&["run", &url, "-d", "{\"a\":\"{{unique}}\"}"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("could not be reached"), "{}", text(&o));
    assert!(
        out.contains("not run: the pre-flight first-request did not pass"),
        "{}",
        text(&o)
    );
}

/// A server that answers garbage: ERROR, exit 3, never a panic.
#[test]
fn garbage_answer_exits_3() {
    let url = fake_server(Some(b"garbage\r\n\r\n"), Duration::from_secs(20));
    let o = run(&["run", &url, "--timeout", "2s"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("panicked"),
        "{}",
        text(&o)
    );
}

/// A server that never answers: the request timeout ends it, exit 3.
#[test]
fn silent_server_times_out_with_exit_3() {
    let url = fake_server(None, Duration::from_secs(20));
    let start = Instant::now();
    let o = run(&["run", &url, "--timeout", "1s"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("timed out after 1 s"),
        "{}",
        text(&o)
    );
    assert!(start.elapsed() < Duration::from_secs(15));
}

/// Waits until the fake server has seen `child` connect (at most 20 s), then presses Ctrl-C:
/// sends it SIGINT.
fn ctrl_c_once_seen(child: &std::process::Child, seen: &std::sync::atomic::AtomicUsize) {
    let arrived = Instant::now() + Duration::from_secs(20);
    while seen.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(Instant::now() < arrived, "the checker never connected");
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Ctrl-C while the API description is being fetched (from a server that never answers): the
/// command ends at once as interrupted, exit 130, saying that nothing was checked.
#[test]
fn ctrl_c_while_the_api_description_is_fetched_exits_130() {
    for command in ["run", "stress"] {
        let (url, seen) = fake_server_counted(None, Duration::from_secs(30));
        let document = url.replace("/api/payments", "/openapi.json");
        let mut checker = bin();
        checker.args([command, "--openapi", &document, "--timeout", "20s"]);
        interrupted_during_setup(checker, &seen, Duration::from_secs(10));
    }
}

/// Starts `checker`, presses Ctrl-C once the fake server has seen it connect, and checks that
/// it ends within `within` as interrupted before any probe ran (exit 130).
fn interrupted_during_setup(
    mut checker: Command,
    seen: &std::sync::atomic::AtomicUsize,
    within: Duration,
) {
    let mut child = checker
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    ctrl_c_once_seen(&child, seen);
    let code = wait_bounded(&mut child, within).code();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(code, Some(130), "{checker:?}: {stderr}");
    assert!(
        stderr.contains("interrupted by Ctrl-C before any probe ran"),
        "{checker:?}: {stderr}"
    );
}

/// A target that is not the API (a web page): stress runs `run`'s pre-flight first, so it is
/// an ERROR saying what answered, before any load; before, ten keys of web pages PASSed.
#[test]
fn stress_against_a_web_page_stops_at_the_preflight() {
    let page: &[u8] =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 13\r\n\r\n<html></html>";
    let (url, _) = fake_server_counted(Some(page), Duration::from_secs(60));
    let out = stress_stopped_before_any_key(&url, &["--keys", "10", "--duplicates", "4"]);
    assert!(
        out.contains("not run: the pre-flight first-request did not pass")
            && out.contains("text/html"),
        "{out}"
    );
}

/// Runs `stress URL` with a JSON payload and `extra`, and checks that it ended as an ERROR
/// before sending any key (exit 3); returns what it printed.
fn stress_stopped_before_any_key(url: &str, extra: &[&str]) -> String {
    let o = bin()
        .args([
            "stress",
            url,
            "-d",
            r#"{"ref":"{{unique}}"}"#,
            "--color",
            "never",
        ])
        .args(extra)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        out.contains("stress  ERROR") && out.contains("keys:        0 (0 completed)"),
        "{out}"
    );
    out
}

/// A `--replica` nothing listens on: stress says so before any key. Before, every duplicate
/// sent to it went unanswered and the target's own answers PASSed the run, the replica's store
/// never judged.
#[test]
fn stress_with_an_unreachable_replica_is_an_error_naming_it() {
    let created: &[u8] =
        b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
    let (url, _) = fake_server_counted(Some(created), Duration::from_secs(60));
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let replica = format!("http://{closed}/api/payments");
    let out = stress_stopped_before_any_key(&url, &["--keys", "4", "--replica", &replica]);
    assert!(
        out.contains(&format!("--replica {replica} could not be reached")),
        "{out}"
    );
}

/// A target that accepts and never answers. Stress's pre-flight says so, naming --timeout.
/// A segment, which has no pre-flight, sees nothing in its load and says so as an ERROR naming
/// the first failure, never a PASS of keys it could not judge (before, every check passed
/// vacuously). Ctrl-C during its load sends no late retry, waits only for the bursts already
/// sent, and the report says the run was interrupted (exit 130; before, the keys went on to
/// their late retries, a timeout each, and the run ended as if never interrupted).
#[test]
fn stress_against_a_silent_target_is_an_error_and_ctrl_c_stops_its_late_retries() {
    let (url, _) = fake_server_counted(None, Duration::from_secs(60));
    let stress = |timeout: &str, keys: &str, segment: bool| {
        let mut c = bin();
        c.args(["stress", &url, "--timeout", timeout, "--keys", keys])
            .args(["--duplicates", if segment { "8" } else { "4" }])
            .args(["--color", "never"]);
        if segment {
            c.args(["--segment", "1/1", "--run-id", "silent"]);
        }
        c
    };
    let o = stress("1s", "2", false).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        out.contains("not run: the pre-flight first-request did not pass")
            && out.contains("did not answer within --timeout"),
        "{out}"
    );

    let mut whole = stress("1s", "1", true);
    let o = whole.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        out.contains("stress  ERROR") && out.contains("none of the 8 requests got a response"),
        "{out}"
    );

    let (url, seen) = fake_server_counted(None, Duration::from_secs(60));
    let mut child = bin()
        .args([
            "stress",
            &url,
            "--timeout",
            "4s",
            "--keys",
            "5",
            "--duplicates",
            "8",
        ])
        .args(["--segment", "1/1", "--run-id", "silent", "--color", "never"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Every key has started its burst (the five fit in the concurrency at once) by the time
    // the server sees a connection.
    ctrl_c_once_seen(&child, &seen);
    let code = wait_bounded(&mut child, Duration::from_secs(30)).code();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(code, Some(130), "{out}");
    assert!(out.contains("(interrupted)"), "{out}");
    assert!(
        out.contains("requests:    30 in"),
        "the five bursts of 6, no late retry: {out}"
    );
}

/// Ctrl-C while the bundled reference server starts (its database accepts the connection and
/// never answers): exit 130, and its temporary folder is removed.
#[test]
fn ctrl_c_while_the_reference_server_starts_removes_its_folder() {
    let (url, seen) = fake_server_counted(None, Duration::from_secs(30));
    let database = url
        .replace("http://", "postgres://idem@")
        .replace("/api/payments", "/db");
    let tmp = tempfile::tempdir().unwrap();
    let mut checker = bin();
    checker
        .args(["run", "--reference", "--reference-db", &database])
        .env("TMPDIR", tmp.path());
    interrupted_during_setup(checker, &seen, Duration::from_secs(20));
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A bundled reference server that started for a run that then fails (a `--timeout` the run's
/// config refuses, a `--probe` nothing answers to) is stopped before the command ends: its
/// temporary folder is gone, however soon the process exits after the error.
#[test]
fn a_run_that_fails_after_the_reference_server_started_removes_its_folder() {
    let cases: [(&[&str], &str); 3] = [
        (&["run", "--timeout", "0s"], "--timeout must be more than 0"),
        (
            &["stress", "--timeout", "0s"],
            "--timeout must be more than 0",
        ),
        (&["run", "--probe", "no-such-probe"], "no-such-probe"),
    ];
    for (args, wanted) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let o = bin()
            .args(args)
            .arg("--reference")
            .env("TMPDIR", tmp.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(stderr.contains(wanted), "{args:?}: {stderr}");
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert!(left.is_empty(), "{args:?} left behind: {left:?}");
    }
}

/// Ctrl-C during a run: exit 130, and the reports are still written and say so.
#[test]
fn ctrl_c_exits_130_with_reports() {
    let (url, seen) = fake_server_counted(None, Duration::from_secs(30));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let junit = dir.path().join("r.xml");
    let mut child = bin()
        .args([
            "run",
            &url,
            "--timeout",
            "20s",
            "--report-json",
            json.to_str().unwrap(),
            "--report-junit",
            junit.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Interrupt only once the first probe's request has arrived: the run is then inside a
    // probe, however slow the machine.
    ctrl_c_once_seen(&child, &seen);
    let code = wait_bounded(&mut child, Duration::from_secs(10)).code();
    assert_eq!(code, Some(130));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["interrupted"], true);
    // Every selected probe is listed: the one Ctrl-C stopped as an ERROR, the rest skipped
    // with the reason, so the JUnit of an interrupted run is never green.
    let probes = report["probes"].as_array().unwrap();
    assert_eq!(
        probes.len(),
        idem_check::probes::catalog().len(),
        "{report}"
    );
    assert_eq!(probes[0]["outcome"], "ERROR", "{report}");
    assert!(probes[1..]
        .iter()
        .all(|p| p["outcome"] == "SKIP"
            && p["reason"] == "not run: the run was interrupted (Ctrl-C)"));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"errors="1""#), "{xml}");
    assert!(
        xml.contains(&format!(r#"skipped="{}""#, probes.len() - 1)),
        "{xml}"
    );
    common::junit_schema::assert_valid(&[junit]);
}

/// The main job: the bundled reference server is all green, exit 0, and every report is
/// written, parses, and holds no token.
#[test]
fn reference_run_is_green_and_writes_reports_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (json, junit, md) = (p("r.json"), p("r.xml"), p("r.md"));
    let o = run(&[
        "run",
        "--reference",
        "--provider",
        "generic",
        "--report-json",
        &json,
        "--report-junit",
        &junit,
        "--report-markdown",
        &md,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains(" 0 failed, "), "{out}");
    // Piped output carries no progress redraws or colour.
    for stream in [&o.stdout, &o.stderr] {
        assert!(
            !stream.iter().any(|b| *b == b'\r' || *b == 0x1b),
            "{}",
            text(&o)
        );
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["schema"], "idem-check.report/1");
    assert!(report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["outcome"] == "PASS"));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<testcase") && xml.contains("name=\"replay-identity\""));
    // The in-process server's tokens are random (`ref-<32 hex>`): none may survive anywhere, and
    // every bearer credential must show masked.
    for file in [&json, &junit, &md] {
        let body = std::fs::read_to_string(file).unwrap();
        // `Bearer ${IDEM_TOKEN_A}` (or `_B`) is a masked header's `value_template`: the
        // variable, not the token.
        let unmasked = body.match_indices("Bearer ").any(|(i, m)| {
            let rest = &body[i + m.len()..];
            !rest.starts_with("[redacted]") && !rest.starts_with("${IDEM_TOKEN_")
        });
        assert!(
            !body.contains("Bearer ref-") && !unmasked,
            "{file} leaks a token"
        );
    }
    assert!(!out.contains("Bearer ref-"));
}

/// A fault switched on: the matching probe FAILs and the exit code is 4.
#[test]
fn reference_fault_exits_4() {
    let o = run(&[
        "run",
        "--reference",
        "--reference-fault",
        "no-key-required",
        "--probe",
        "missing-key",
    ]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("FAIL"),
        "{}",
        text(&o)
    );
}

/// The usage page's block is the real `run -h`, so it cannot go stale
/// (`UPDATE_GOLDEN=1` rewrites it).
#[test]
fn usage_page_block_matches_help() {
    let o = run(&["run", "-h"]);
    let help = String::from_utf8_lossy(&o.stdout).replace('\r', "");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/usage.md");
    let page = std::fs::read_to_string(&path).unwrap();
    let (start_marker, end_marker) = ("<!-- run-help-start -->\n", "<!-- run-help-end -->");
    let start = page
        .find(start_marker)
        .expect("docs/usage.md has the help markers")
        + start_marker.len();
    let end = page.find(end_marker).unwrap();
    let wanted = format!("```text\n{}\n```\n", help.trim_end());
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let updated = format!("{}{wanted}{}", &page[..start], &page[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert_eq!(
        &page[start..end],
        wanted,
        "docs/usage.md's usage block is stale: run with UPDATE_GOLDEN=1"
    );
}

/// An https URL on a plain-HTTP server: a clear TLS error, exit 3.
#[test]
fn tls_error_is_clear() {
    let url = fake_server(
        Some(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        Duration::from_secs(20),
    )
    .replace("http://", "https://");
    let o = run(&["run", &url, "--timeout", "3s"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_lowercase();
    assert!(
        out.contains("tls") || out.contains("ssl") || out.contains("certificate"),
        "{}",
        text(&o)
    );
}

/// A 5 MB response body is cut at the capture limit, marked as cut, and nothing panics.
#[test]
fn huge_body_is_capped() {
    let mut reply = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\nConnection: close\r\n\r\n".to_vec();
    reply.extend(std::iter::repeat_n(b'a', 5_000_000));
    let reply: &'static [u8] = Box::leak(reply.into_boxed_slice());
    let url = fake_server(Some(reply), Duration::from_secs(30));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = run(&[
        "run",
        &url,
        "--probe",
        "first-request",
        "--timeout",
        "5s",
        "--report-json",
        json.to_str().unwrap(),
    ]);
    assert!(matches!(o.status.code(), Some(0 | 4)), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let ex = &report["probes"][0]["exchanges"];
    let posts: Vec<&serde_json::Value> = ex
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["request"]["method"] == "POST")
        .collect();
    assert_eq!(posts[0]["response"]["body_truncated"], true);
    assert!(posts[0]["response"]["body"].as_str().unwrap().len() <= 1024 * 1024);
}

/// Shell completions and man pages come from the same definition as `--help`, so they name the
/// options that exist (here the connection options).
#[test]
fn completions_and_man_pages_name_the_options() {
    for shell in ["bash", "zsh", "fish"] {
        let o = run(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let script = String::from_utf8_lossy(&o.stdout);
        assert!(
            script.contains("cacert") && script.contains("reference-fault"),
            "{shell}: {script}"
        );
    }
    let o = run(&["completions", "tcsh-like"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));

    let o = run(&["man"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with(".ie"),
        "{}",
        text(&o)
    );
    let dir = tempfile::tempdir().unwrap();
    let o = run(&["man", "--dir", &dir.path().display().to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let page = std::fs::read_to_string(dir.path().join("idem-check-run.1")).unwrap();
    assert!(
        page.contains(".TH idem-check-run 1") && page.contains("cacert"),
        "{page}"
    );
}

/// The README's CI workflow is the example file CI lints with actionlint.
#[test]
fn readme_workflow_is_the_linted_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/idempotency-workflow.yml")).unwrap();
    let ci = &readme[readme
        .find("\n## In CI\n")
        .expect("README has a CI section")..];
    let start = ci.find("```yaml\n").expect("a yaml block") + "```yaml\n".len();
    let end = start + ci[start..].find("```").unwrap();
    assert_eq!(
        &ci[start..end],
        example,
        "README's workflow differs from the example file"
    );
}

/// Every relative link in the README and in docs/ points at a file that exists, and a link to a
/// heading (`page.md#heading`) at a heading of that page: moving a page or renaming a section
/// cannot leave a dead link behind.
#[test]
fn documentation_links_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    let mut dead = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for (line, target) in markdown_links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let resolved = match file {
                "" => page.clone(),
                file => page.parent().unwrap().join(file),
            };
            let found = resolved.exists()
                && (anchor.is_empty()
                    || resolved.extension().is_none_or(|e| e != "md")
                    || heading_anchors(&std::fs::read_to_string(&resolved).unwrap())
                        .iter()
                        .any(|a| a == anchor));
            if !found {
                let name = page.strip_prefix(root).unwrap().display();
                dead.push(format!("{name}:{line}: {target}"));
            }
        }
    }
    assert!(dead.is_empty(), "dead links:\n{}", dead.join("\n"));
}

/// The lines of `text` outside fenced code blocks, numbered from 1.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((i + 1, line));
        }
    }
    lines
}

/// The targets of the inline links `[text](target)` in a Markdown page, outside code, with
/// their line numbers.
fn markdown_links(text: &str) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    for (n, line) in prose_lines(text) {
        // Every other piece between backticks is an inline code span.
        let prose: String = line.split('`').step_by(2).collect();
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            links.push((n, after[..end].to_owned()));
            rest = &after[end..];
        }
    }
    links
}

/// The anchors GitHub gives a page's headings: lower case, spaces as hyphens, punctuation other
/// than `-` and `_` left out, and `-1`, `-2`, … after a repeated heading.
fn heading_anchors(text: &str) -> Vec<String> {
    let mut anchors = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for (_, line) in prose_lines(text) {
        let title = line.trim_start_matches('#');
        if title.len() == line.len() || !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .flat_map(char::to_lowercase)
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let repeats = seen.entry(slug.clone()).or_insert(0);
        anchors.push(match *repeats {
            0 => slug,
            n => format!("{slug}-{n}"),
        });
        *repeats += 1;
    }
    anchors
}

/// The usual first mistakes get a message that says what to type instead (exit 1).
#[test]
fn first_mistakes_say_what_to_type() {
    let cases: [(&[&str], &str); 3] = [
        (&["run"], "--reference"),
        (
            &["run", "api.example.com/v1/payments"],
            "write https://api.example.com/v1/payments",
        ),
        (
            &["run", "--reference-fault", "race"],
            "idem-check run --reference --reference-fault race",
        ),
    ];
    for (args, wanted) in cases {
        let o = run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(wanted),
            "{args:?}: {}",
            text(&o)
        );
    }
    let o = run(&["run", "--target", "/nonexistent/none.toml"]);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("nothing to check"));
}

/// `-h` lists the options the documentation describes, the advanced ones included.
#[test]
fn short_help_lists_every_documented_option() {
    let o = run(&["run", "-h"]);
    let help = String::from_utf8_lossy(&o.stdout);
    for option in [
        "--reference-fault",
        "--http2",
        "--no-release-threads",
        "--cacert",
        "--proxy",
    ] {
        assert!(
            help.contains(option),
            "{option} missing from run -h:\n{help}"
        );
    }
}

/// Runs the checker with `args` plus a JSON report, checks it exits 0, and returns the report.
fn passing_json_report(args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let json_arg = json.display().to_string();
    let mut all = args.to_vec();
    all.extend(["--report-json", &json_arg]);
    let o = run(&all);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

/// `--probe GROUP` runs the group; `--skip` takes an id out of it.
#[test]
fn probe_accepts_a_group_name() {
    let report = passing_json_report(&[
        "run",
        "--reference",
        "--probe",
        "key-syntax",
        "--skip",
        "malformed-key",
    ]);
    let ids: Vec<&str> = report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"missing-key") && ids.contains(&"oversized-key"),
        "{ids:?}"
    );
    assert!(
        !ids.contains(&"malformed-key") && !ids.contains(&"replay-identity"),
        "{ids:?}"
    );
}

/// `run --reference --key-header NAME` starts the bundled server reading its key from NAME and
/// checks it under that name: every keyed request carries NAME and never Idempotency-Key, and
/// the correct server passes.
#[test]
fn the_reference_server_takes_the_key_header() {
    let report = passing_json_report(&[
        "run",
        "--reference",
        "--key-header",
        "X-Idempotency-Key",
        "--probe",
        "first-request",
        "--probe",
        "missing-key",
        "--probe",
        "replay-identity",
    ]);
    let outcomes: Vec<(String, String)> = common::json_report::probe_outcomes(&report);
    assert!(
        outcomes.len() == 3 && outcomes.iter().all(|(_, o)| o == "PASS"),
        "{outcomes:?}"
    );
    let names: Vec<String> = report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["exchanges"].as_array().unwrap().clone())
        .flat_map(|e| e["request"]["headers"].as_array().unwrap().clone())
        .map(|h| h["name"].as_str().unwrap().to_ascii_lowercase())
        .collect();
    assert!(names.iter().any(|n| n == "x-idempotency-key"), "{names:?}");
    assert!(!names.iter().any(|n| n == "idempotency-key"), "{names:?}");
}

/// The target flags the bundled reference server cannot take are refused by name (exit 1)
/// before it starts, never ignored; so is a --key-header the chosen fault cannot model.
#[test]
fn the_reference_server_refuses_the_flags_it_cannot_apply() {
    let cases: [(&[&str], &[&str]); 4] = [
        (
            &[
                "-H",
                "X-Trace: 1",
                "--count-url",
                "http://127.0.0.1:9/count",
            ],
            &["-H, --count-url cannot be applied to it", "Leave them out"],
        ),
        (
            &["--restart-timeout", "5s"],
            &["--restart-timeout cannot be applied to it", "Leave it out"],
        ),
        (
            &["--key-header", "A-Key", "--key-header", "B-Key"],
            &["--key-header is given 2 times"],
        ),
        (
            &[
                "--reference-fault",
                "key-name-spellings",
                "--key-header",
                "X-Idempotency-Key",
            ],
            &["key-name-spellings", "leave out --key-header"],
        ),
    ];
    for (extra, wanted) in cases {
        let mut args = vec!["run", "--reference", "--probe", "first-request"];
        args.extend(extra);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        for w in wanted {
            assert!(stderr.contains(w), "{args:?}: {w:?} not in {}", text(&o));
        }
        assert!(o.stdout.is_empty(), "{args:?}: nothing ran: {}", text(&o));
    }
}
