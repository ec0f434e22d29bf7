//! idem-check against small independent servers, one per real-world design
//! (`fixtures/servers/*.py`, Python's standard library only), each run through the real binary.
//! Every test pins the whole verdict table a correct checker gives on that design: a false PASS
//! lets a double charge ship, a false FAIL costs its user a day, and what responses cannot show
//! is INCONCLUSIVE with what to change.
//!
//! The tables run side by side, one per test thread: the held originals are named holds the
//! checker releases (or fixed delays the checker learns), so no verdict depends on how busy the
//! machine is.

use std::process::Stdio;
use std::time::Duration;

use crate::common;

use common::binary::{bin, wait_bounded};
use common::python::{self, PythonServer};

/// Every probe of the default suite, in catalog order.
fn catalog() -> Vec<&'static str> {
    idem_check::probes::catalog()
        .iter()
        .map(|p| p.meta.id)
        .collect()
}

/// Probes whose option no design run passes (--crash-header, --second-url, --restart-cmd,
/// --replica, --key-ttl, --read-url, --store-down-cmd): they SKIP naming it.
const NOT_CONFIGURED: [&str; 7] = [
    "wedged-key-recovery",
    "cross-endpoint",
    "restart-persistence",
    "cross-replica",
    "key-expiry",
    "get-ignored",
    "store-outage",
];

/// The longest one checker run may take before the test gives up on it.
const RUN_LIMIT: Duration = Duration::from_secs(150);

/// A design server; it also exits after its --lifetime in any case.
pub(crate) fn start(design: &str, args: &[&str]) -> PythonServer {
    let mut args = args.to_vec();
    args.extend(["--lifetime", "300"]);
    python::start_stdlib(&format!("fixtures/servers/{design}.py"), &args)
}

/// What one checker run produced.
pub(crate) struct Run {
    pub(crate) exit: Option<i32>,
    pub(crate) stdout: String,
    /// (probe id, outcome, reason), in report order
    pub(crate) probes: Vec<(String, String, String)>,
    /// The JSON report.
    pub(crate) report: serde_json::Value,
}

impl Run {
    pub(crate) fn reason(&self, id: &str) -> &str {
        self.probes
            .iter()
            .find(|p| p.0 == id)
            .map_or("", |p| p.2.as_str())
    }

    /// A probe's timeline (its notes), one line each.
    pub(crate) fn timeline(&self, id: &str) -> String {
        self.report["probes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["id"] == id)
            .flat_map(|p| p["timeline"].as_array().cloned().unwrap_or_default())
            .filter_map(|line| line.as_str().map(str::to_owned))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Runs `idem-check run BASE/pay ARGS` against `server` (`{base}` in an argument becomes the
/// server's base URL), bounded by [`RUN_LIMIT`].
pub(crate) fn check(server: &PythonServer, args: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let (json, out) = (dir.path().join("r.json"), dir.path().join("out.txt"));
    let mut child = bin()
        .args(["run", &format!("{}/pay", server.base)])
        .args(args.iter().map(|a| a.replace("{base}", &server.base)))
        .args(["--report-json", json.to_str().unwrap()])
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_bounded(&mut child, RUN_LIMIT);
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&json).unwrap_or_else(|e| panic!("no JSON report ({e})\n{stdout}")),
    )
    .unwrap();
    let probes = report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let field = |k: &str| p[k].as_str().unwrap_or_default().to_string();
            (field("id"), field("outcome"), field("reason"))
        })
        .collect();
    Run {
        exit: status.code(),
        stdout,
        probes,
        report,
    }
}

/// A verdict table: every catalog probe PASS, except the unconfigured ones (SKIP) and those in
/// `except`.
fn table(except: &[(&str, &str)]) -> Vec<(&'static str, String)> {
    catalog()
        .into_iter()
        .map(|id| {
            let verdict = except
                .iter()
                .find(|(p, _)| *p == id)
                .map(|(_, v)| *v)
                .unwrap_or(if NOT_CONFIGURED.contains(&id) || common::downstream(id) {
                    "SKIP"
                } else {
                    "PASS"
                });
            (id, verdict.to_string())
        })
        .collect()
}

/// The same verdict for every probe.
fn all(verdict: &'static str) -> Vec<(&'static str, &'static str)> {
    catalog().into_iter().map(|id| (id, verdict)).collect()
}

/// Starts `design` with `server_args`, runs the checker with `args`, and asserts the whole
/// verdict table (every mismatch listed at once) and the exit code a correct checker gives.
/// Returns the run for the design's further assertions.
pub(crate) fn expect(
    design: &str,
    server_args: &[&str],
    args: &[&str],
    except: &[(&str, &str)],
    exit: i32,
) -> Run {
    let server = start(design, server_args);
    let run = check(&server, args);
    let ids: Vec<&str> = run.probes.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(ids, catalog(), "{design}: the report lists other probes");
    let mismatches: Vec<String> = table(except)
        .iter()
        .zip(&run.probes)
        .filter(|((_, want), (_, got, _))| got != want)
        .map(|((id, want), (_, got, reason))| {
            format!("  {id}: got {got} ({reason}), expected {want}")
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "{design}: {} verdicts differ\n{}\n\n{}",
        mismatches.len(),
        mismatches.join("\n"),
        run.stdout
    );
    assert_eq!(run.exit, Some(exit), "{design}: exit code\n{}", run.stdout);
    run
}

/// Asserts that `text` holds `needle`, saying what that shows.
pub(crate) fn assert_says(text: &str, needle: &str, what: &str) {
    assert!(text.contains(needle), "{what}: {needle:?} not in\n{text}");
}

/// Tenant A's credential and a JSON content type, as every design takes them.
const TENANT_A_JSON: [&str; 4] = [
    "-H",
    "Authorization: Bearer ta",
    "-H",
    "Content-Type: application/json",
];

/// The options of a full run against a design with tenants, a counter, ids and a hold header.
pub(crate) fn full() -> Vec<&'static str> {
    let mut args = TENANT_A_JSON.to_vec();
    args.extend([
        "-d",
        r#"{"amount":5,"ref":"{{unique}}"}"#,
        "--id-pointer",
        "/id",
        "--count-url",
        "{base}/count",
        "--tenant-b-header",
        "Authorization: Bearer tb",
        "--hold-header",
        "X-Hold: {{hold}}",
        "--hold-release",
        "{base}/holds/{{hold}}/release",
        "--invalid-body",
        r#"{"amount":-1}"#,
        "--timeout",
        "3s",
    ]);
    args
}

/// [`full`] with a hold the server ends alone after 600 ms, as most real middlewares' test
/// hooks do: the checker must learn how long it lasts.
fn fixed_hold() -> Vec<&'static str> {
    let mut args = full();
    let at = args.iter().position(|a| *a == "--hold-release").unwrap();
    args.drain(at..at + 2);
    let value = args.iter().position(|a| *a == "X-Hold: {{hold}}").unwrap();
    args[value] = "X-Delay-Ms: 600";
    args
}

/// The 202 acceptor has no tenants, ids or hold: only a JSON body, tenant B's header (which it
/// ignores) and, in one run, its job counter.
fn acceptor(counter: bool) -> Vec<&'static str> {
    let mut args = vec![
        "-H",
        "Content-Type: application/json",
        "-d",
        r#"{"amount":5,"ref":"{{unique}}"}"#,
        "--tenant-b-header",
        "Authorization: Bearer tb",
        "--timeout",
        "3s",
    ];
    if counter {
        args.extend(["--count-url", "{base}/count"]);
    }
    args
}

/// Fingerprint dedupe across keys, store not scoped by tenant: B reusing A's key with A's
/// payload is served A's payment — a critical leak tenant-isolation must FAIL (tenant A's two
/// keys carry two payloads, so the dedupe cannot turn it into an ERROR). Two keys with one
/// payload get 409 (distinct-keys-independent FAILs), and `"k";v=1` then `"k"` is answered
/// 409 "Fingerprint conflict", which is not a replay (key-parameters WARNs, recommended).
#[test]
fn fingerprint_dedupe_leaks_tenant_a_to_tenant_b() {
    expect(
        "fingerprint_dedupe",
        &[],
        &full(),
        &[
            ("key-parameters", "WARN"),
            ("distinct-keys-independent", "FAIL"),
            ("tenant-isolation", "FAIL"),
        ],
        4,
    );
}

/// A response cache written only once the handler returned, with no lock: a retry that arrives
/// while the first request still runs executes again, and the first request's payment lands
/// after the retry was answered. lost-response learns how long the hold lasts, waits past the
/// dropped original's hold and until the counter is quiet, so that late payment is counted in
/// its own window: FAIL, critical (before, it read the counter right after the retry and
/// PASSed). loser-does-not-unlock then counts its own two executions (the owner and the
/// duplicate nothing refused), not lost-response's late one (before: 3). The same with a named
/// hold the checker releases.
#[test]
fn cache_written_after_execute_pays_a_lost_response_twice() {
    let except = [
        ("concurrent-duplicates", "FAIL"),
        ("lost-response", "FAIL"),
        ("loser-does-not-unlock", "FAIL"),
    ];
    for args in [fixed_hold(), full()] {
        let run = expect("cache_after_execute", &[], &args, &except, 4);
        // Each FAIL cites a retry answered 2xx before the key's first request was: one cause.
        assert_says(
            &run.stdout,
            "3 critical FAILs share one cause: a retry executes while the original runs (concurrent-duplicates #",
            "the summary tells the shared cause once",
        );
        for id in ["lost-response", "loser-does-not-unlock"] {
            assert_says(
                run.reason(id),
                "got 2 executions",
                "counts its own executions",
            );
        }
    }
}

/// A correct API behind bearer auth with a counter per tenant: everything PASSes, including
/// tenant-isolation, whose tenant B executions never move tenant A's counter.
#[test]
fn per_tenant_counter_behind_auth_passes() {
    expect("tenant_counter", &[], &full(), &[], 0);
}

/// The same API run without credentials answers 401 to everything: a setup mistake, not a
/// contract failure. first-request is an ERROR that names the status and the option to check,
/// and nothing else is judged.
#[test]
fn missing_credentials_are_a_setup_error_not_an_api_failure() {
    let body = r#"{"amount":5,"ref":"{{unique}}"}"#;
    let args = ["-H", "Content-Type: application/json", "-d", body];
    let run = expect(
        "tenant_counter",
        &[],
        &[&args[..], &["--id-pointer", "/id"]].concat(),
        &all("ERROR"),
        3,
    );
    let reason = run.reason("first-request");
    assert_says(reason, "401", "first-request names the status");
    assert_says(reason, "-H", "first-request names the option to check");
}

/// A unique constraint answers every repeat of a key 409, completed or not: nothing executes
/// twice, but nothing is ever replayed. replay-identity FAILs once; the probes whose failure is
/// only "the retry did not replay" (quoted-key, escaped-key, key-parameters, the replay after
/// the bursts, mismatch-no-poison, reserialized-retry, lost-response, loser-does-not-unlock, spoofed-marker-headers,
/// header-name-case)
/// are INCONCLUSIVE naming it, whatever their place in the catalog.
#[test]
fn conflict_on_every_repeat_fails_replay_identity_once() {
    let derived = [
        "quoted-key",
        "escaped-key",
        "key-parameters",
        "concurrent-duplicates",
        "mismatch-no-poison",
        "reserialized-retry",
        "lost-response",
        "loser-does-not-unlock",
        "spoofed-marker-headers",
        "header-name-case",
    ];
    let mut except: Vec<(&str, &str)> = derived.iter().map(|&id| (id, "INCONCLUSIVE")).collect();
    except.push(("replay-identity", "FAIL"));
    let run = expect("conflict_on_replay", &[], &full(), &except, 4);
    for id in derived {
        assert_says(run.reason(id), "replay-identity", "names the root cause");
    }
}

/// Duplicates that wait for the original and get its replay are legal (no 409 at all): every
/// probe PASSes, except loser-does-not-unlock, which has no refused duplicate to build on and
/// says so (INCONCLUSIVE).
#[test]
fn duplicates_that_wait_then_replay_pass() {
    expect(
        "wait_then_replay",
        &[],
        &full(),
        &[("loser-does-not-unlock", "INCONCLUSIVE")],
        0,
    );
}

/// An API that accepts only bare keys: quoted-key FAILs (draft-07 §2.1 makes the String form
/// the rule), and every other probe runs with bare keys and judges the API on its merits.
/// key-parameters' `"k";v=1` is refused for the quotes alone: that follows from quoted-key, so
/// it is INCONCLUSIVE naming it. The pre-flight's trials show that only `[A-Za-z0-9_-]` keys
/// pass, so escaped-key, whose key holds quotes and spaces, SKIPs naming that shape.
#[test]
fn bare_keys_only_fail_quoted_key_and_the_rest_runs_bare() {
    let run = expect(
        "bare_key",
        &[],
        &full(),
        &[
            ("quoted-key", "FAIL"),
            ("escaped-key", "SKIP"),
            ("key-parameters", "INCONCLUSIVE"),
        ],
        4,
    );
    assert_says(
        run.reason("escaped-key"),
        "the API accepts only keys of shape token",
        "the SKIP names the shape",
    );
    assert_says(
        &run.stdout,
        "bare",
        "the header line says keys were sent bare",
    );
}

/// Two defects with two causes: quoted keys refused with 400, and replays without their
/// `Location`. quoted-key FAILs on the refusal and replay-identity on the missing header; neither
/// is deferred to the other, since they show different symptoms. key-parameters is refused for
/// the quotes alone (the same 400): it follows from quoted-key, and the root cause counts
/// exactly that one, as the verdict it deferred (its recommended checks a WARN). escaped-key's
/// key cannot have the shape the pre-flight learnt (`[A-Za-z0-9_-]`), so it SKIPs.
#[test]
fn quoted_keys_refused_and_replays_without_location_are_two_failures() {
    let run = expect(
        "replay_without_location",
        &[],
        &full(),
        &[
            ("quoted-key", "FAIL"),
            ("replay-identity", "FAIL"),
            ("escaped-key", "SKIP"),
            ("key-parameters", "INCONCLUSIVE"),
        ],
        4,
    );
    assert_says(
        run.reason("quoted-key"),
        "got 400",
        "quoted-key fails on the refusal",
    );
    assert_says(
        run.reason("replay-identity"),
        "no location",
        "replay-identity fails on the missing header",
    );
    assert_says(
        run.reason("key-parameters"),
        "prerequisite quoted-key",
        "names its own cause",
    );
    assert_says(
        &run.stdout,
        "quoted-key fails: 1 other WARN follows from it",
        "counts only what was deferred",
    );
    assert!(
        !run.stdout.contains("replay-identity fails:"),
        "nothing follows from the missing header\n{}",
        run.stdout
    );
}

/// A correct API that echoes the raw key in a response header, control characters and all:
/// the refusals of malformed keys are still read as refusals, so everything PASSes.
#[test]
fn raw_key_echoed_in_the_response_head_passes() {
    expect("echo_key", &[], &full(), &[], 0);
}

/// Verdicts on the 202 acceptor that are the same with and without its counter: the statuses
/// it gets wrong, the payload it never validates, the hold it does not offer.
const ACCEPTOR_SEEN: [(&str, &str); 6] = [
    ("missing-key", "FAIL"),
    ("malformed-key", "FAIL"),
    ("oversized-key", "FAIL"),
    ("payload-mismatch", "FAIL"),
    ("error-not-cached", "INCONCLUSIVE"),
    ("loser-does-not-unlock", "SKIP"),
];

/// Every POST executes and gets the same `202 {"status":"accepted"}`. Without a counter the
/// responses cannot tell one execution from five: no probe that counts executions may PASS
/// (INCONCLUSIVE, naming --count-url), and identical bodies are not a leak between tenants
/// either. What the statuses show (400 expected, 202 got) still FAILs.
#[test]
fn acceptor_without_counter_is_blind_not_green() {
    let blind = [
        "first-request",
        "quoted-key",
        "escaped-key",
        "bare-token",
        "duplicate-header",
        // The empty key is taken (202, a WARN on its own), and whether a second payment under
        // it executes cannot be seen without a counter.
        "empty-key",
        "key-parameters",
        "replay-identity",
        "concurrent-duplicates",
        "mismatch-no-poison",
        "reserialized-retry",
        "distinct-keys-independent",
        "lost-response",
        "spoofed-marker-headers",
        "tenant-isolation",
        "header-name-case",
    ];
    let mut except = ACCEPTOR_SEEN.to_vec();
    except.extend(blind.iter().map(|&id| (id, "INCONCLUSIVE")));
    let run = expect("accept_202", &[], &acceptor(false), &except, 4);
    for id in ["replay-identity", "concurrent-duplicates", "lost-response"] {
        assert_says(run.reason(id), "--count-url", "says what to change");
    }
    assert_says(&run.stdout, "blind", "the header line names the basis");
}

/// The same acceptor counted: every duplicate execution is now seen and FAILs (critical).
/// distinct-keys-independent PASSes: its requirement is that each key executes, and the counter
/// shows every execution even though the bodies are identical. Whether tenant B was handed
/// tenant A's response cannot be seen when every response is the same bytes (INCONCLUSIVE). The
/// key-syntax retries defer to replay-identity, those whose checks are only recommended too:
/// key-parameters, and bare-token, whose `abc` then `"abc"` is a retry under another spelling
/// and says nothing new once identical retries execute again.
#[test]
fn acceptor_with_counter_fails_every_duplicate() {
    let mut except = ACCEPTOR_SEEN.to_vec();
    except.extend([
        // The empty key is taken (202); counted, a second payment under it executes too.
        ("empty-key", "WARN"),
        ("quoted-key", "INCONCLUSIVE"),
        ("escaped-key", "INCONCLUSIVE"),
        ("bare-token", "INCONCLUSIVE"),
        ("duplicate-header", "FAIL"),
        ("key-parameters", "INCONCLUSIVE"),
        ("replay-identity", "FAIL"),
        ("concurrent-duplicates", "FAIL"),
        ("mismatch-no-poison", "FAIL"),
        // The re-serialised retry executes again, like every retry here.
        ("reserialized-retry", "FAIL"),
        ("lost-response", "FAIL"),
        ("spoofed-marker-headers", "INCONCLUSIVE"),
        ("tenant-isolation", "INCONCLUSIVE"),
        // The upper-case spelling executes again: a duplicated effect, critical whatever
        // replay-identity says.
        ("header-name-case", "FAIL"),
    ]);
    let run = expect("accept_202", &[], &acceptor(true), &except, 4);
    assert_says(&run.stdout, "counter", "the header line names the basis");
    for id in ["quoted-key", "escaped-key", "bare-token", "key-parameters"] {
        assert_says(run.reason(id), "replay-identity", "names the root cause");
    }
}

/// Pointing --id-pointer at an id the acceptor's bodies do not have is a setup mistake: the
/// pre-flight is an ERROR naming the option, not "0 executions" FAILs against the API.
#[test]
fn id_pointer_absent_from_the_body_is_a_setup_error() {
    let args = [&acceptor(false)[..], &["--id-pointer", "/id"]].concat();
    let run = expect("accept_202", &[], &args, &all("ERROR"), 3);
    assert_says(
        run.reason("first-request"),
        "--id-pointer",
        "names the option",
    );
}

/// A correct API whose counter trails its writes by 1.5 s: read right after a request, it has
/// not moved. Counting with it would turn into "0 executions" FAILs and hide real duplicates,
/// so the pre-flight refuses it, naming --count-url, and nothing is judged.
#[test]
fn lagging_counter_is_refused_at_preflight() {
    let lag = ["--lag-ms", "1500"];
    let run = expect("lagging_counter", &lag, &full(), &all("ERROR"), 3);
    assert_says(
        run.reason("first-request"),
        "--count-url",
        "names the option",
    );
}

/// The same API counted by resource ids instead: it is correct, and everything PASSes.
#[test]
fn lagging_counter_api_passes_when_counted_by_ids() {
    let args: Vec<&str> = full()
        .into_iter()
        .filter(|a| !a.contains("count"))
        .collect();
    expect("lagging_counter", &["--lag-ms", "1500"], &args, &[], 0);
}

/// [`full`] with the crash header of `close_after_5xx` and a lease wait long enough for it.
fn crashing() -> Vec<&'static str> {
    [
        &full()[..],
        &["--crash-header", "X-Crash: 1", "--lease-wait", "3s"],
    ]
    .concat()
}

/// A correct API that closes its keep-alive connection silently after every 5xx and never
/// answers the request written on it next: the crash's 500 must not leave the retry on that
/// dead connection, so wedged-key-recovery sees the retry execute once and PASSes, like
/// everything else.
#[test]
fn connection_closed_after_a_5xx_does_not_swallow_the_retry() {
    expect(
        "close_after_5xx",
        &[],
        &crashing(),
        &[("wedged-key-recovery", "PASS")],
        0,
    );
}

/// The same design whose crash never releases the claim: the retries on new connections get
/// 409 until the lease wait is over, and wedged-key-recovery FAILs on them.
#[test]
fn connection_closed_after_a_5xx_still_shows_a_wedged_key() {
    let run = expect(
        "close_after_5xx",
        &["--keep-claim"],
        &crashing(),
        &[("wedged-key-recovery", "FAIL")],
        4,
    );
    assert_says(
        run.reason("wedged-key-recovery"),
        "409",
        "the retries' refusal is the evidence",
    );
}

/// An API behind a server that closes a kept-alive connection idle for 100 ms (gunicorn does
/// after 2 s) without `Connection: close`, the request that crossed the close never read, and
/// whose crash leaves the key claimed for an hour. wedged-key-recovery's retries, 150 ms apart
/// on a kept connection, each cross the close; each is sent again once on a new connection, gets
/// 409, and the probe FAILs on the wedged key instead of stopping at the closed connection.
/// Every other probe meets the same closes and PASSes.
#[test]
fn connection_closed_while_idle_still_shows_a_wedged_key() {
    let run = expect(
        "idle_close",
        &["--idle-close", "0.1"],
        &crashing(),
        &[("wedged-key-recovery", "FAIL")],
        4,
    );
    assert_says(
        run.reason("wedged-key-recovery"),
        "409",
        "the retries' refusal is the evidence",
    );
    assert_says(
        &run.timeline("wedged-key-recovery"),
        "sent again on a new connection: the kept-alive connection was closed by the server while idle",
        "the evidence says which request went out twice, and why",
    );
}

/// The per-tenant API reading its key from `Idempotent-Token`, a name the secret rules would
/// mask, and parsing it as the draft's RFC 8941 String: `run --key-header --key-syntax ietf`
/// (no --openapi needed) sends every key, in every probe, there, and everything PASSes as with
/// the standard name.
#[test]
fn key_header_of_another_name_is_used_by_every_probe() {
    let header = ["--key-header", "Idempotent-Token"];
    let args = [&full()[..], &header[..], &["--key-syntax", "ietf"][..]].concat();
    expect("tenant_counter", &header, &args, &[], 0);
}

/// Every second keyed request reaches a broken replica and gets 500: the pre-flight's second
/// request fails, so nothing can be judged (all ERROR). The evidence shows that 500 in full and
/// reproduces it, not the counter read that followed it.
#[test]
fn an_error_cites_the_500_it_stopped_on() {
    let run = expect("every_second_500", &[], &full(), &all("ERROR"), 3);
    let reason = run.reason("first-request");
    assert_says(
        reason,
        "(#3) got 500",
        "the reason names the failed request",
    );
    let evidence = &run.stdout[run.stdout.find("\nexchanges\n").expect("evidence")..];
    assert_says(
        evidence,
        "reproduce #3:\n  curl -i -sS -X POST",
        "the curl line reproduces the failed request",
    );
    assert_says(evidence, "< HTTP/1.1 500", "the 500 is shown in full");
    assert!(
        !evidence.contains("count after (+"),
        "the counter read is not the evidence\n{evidence}"
    );
}

/// A correct API behind a rate limiter (a token bucket of 8 requests per tenant, refilled at
/// 40 a second, answering 429 with `Retry-After: 1` before the idempotency layer sees the
/// request, as API gateways and hosted APIs do): every probe PASSes. A request answered 429 on
/// its own is sent again after its Retry-After, and the throttled duplicates of a burst are
/// left out of the checks; the evidence says both. (Judged as the API's answers, the 429s
/// failed concurrent-duplicates, payload-mismatch and header-name-case, warned on three key
/// probes and left three in ERROR.)
#[test]
fn a_correct_api_behind_a_rate_limiter_passes() {
    let run = expect("rate_limited", &[], &full(), &[], 0);
    assert_says(
        &run.timeline("concurrent-duplicates"),
        "were throttled (429) and are left out of the checks",
        "the throttled duplicates are counted",
    );
    // The probes send far faster than 40 requests a second, so some request of the run finds
    // the bucket empty, whichever it is.
    let all: Vec<String> = catalog().iter().map(|id| run.timeline(id)).collect();
    assert_says(
        &all.join("\n"),
        "was throttled (429): sent again after 1.0 s",
        "a throttled request is sent again after its Retry-After",
    );
}

/// Runs `idem-check stress BASE/pay` with the options of a full run's request and `args`
/// against `server`, bounded by [`RUN_LIMIT`]; returns the exit code and the JSON report.
fn stress(server: &PythonServer, args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let base = format!("{}/count", server.base);
    let payload = [
        "-d",
        r#"{"amount":5,"ref":"{{unique}}"}"#,
        "--id-pointer",
        "/id",
        "--count-url",
        &base,
    ];
    stress_with(server, &[payload.as_slice(), args].concat())
}

/// `idem-check stress BASE/pay` as tenant A with a JSON body and `args`, bounded by
/// [`RUN_LIMIT`]: the exit code and the JSON report.
fn stress_with(server: &PythonServer, args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let mut child = bin()
        .args(["stress", &format!("{}/pay", server.base)])
        .args(TENANT_A_JSON)
        .args(args)
        .args(["--report-json", json.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_bounded(&mut child, RUN_LIMIT);
    let report = serde_json::from_slice(&std::fs::read(&json).expect("a JSON report")).unwrap();
    (status.code(), report)
}

/// stress behind a rate limiter: the 429s are counted and left out of each key's checks, so a
/// correct API whose limiter throttles part of the load PASSes (with a note), and one whose
/// limiter throttles most of it is INCONCLUSIVE, saying to lower the load.
#[test]
fn stress_behind_a_rate_limiter_leaves_the_429s_out() {
    // Keys 0.4 s apart; each burst of 6 finds 5 tokens, so about one request in eight or more
    // of them is throttled, never half.
    let server = start("rate_limited", &["--burst", "5"]);
    let (exit, report) = stress(
        &server,
        &["--keys", "6", "--duplicates", "8", "--rate", "20"],
    );
    let result = &report["result"];
    assert_eq!(exit, Some(0), "{result}");
    assert_eq!(result["outcome"], "PASS", "{result}");
    assert!(
        report["statuses"]["429"].as_u64().unwrap_or(0) > 0,
        "{report}"
    );
    assert!(
        result["timeline"].to_string().contains("throttled (429)"),
        "{result}"
    );
    // As fast as it can against 8 tokens refilled at 40 a second: most requests are throttled.
    let server = start("rate_limited", &[]);
    let (exit, report) = stress(
        &server,
        &["--keys", "40", "--duplicates", "4", "--concurrency", "8"],
    );
    let result = &report["result"];
    assert_eq!(result["outcome"], "INCONCLUSIVE", "{result}");
    assert!(
        result["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("lower --rate or --concurrency"),
        "{result}"
    );
    // INCONCLUSIVE is no failure of the API: the exit code says so, as for `run`.
    assert_eq!(exit, Some(0));
}

/// A server that claims a held request's key only after a slow step (250 ms here) and answers
/// a duplicate that finds its key in flight with 500: lost-response's first retry comes before
/// the original took its key and gets 201 at once, so the probe runs again with a fresh key and
/// twice the head start until its retry meets the held original, and FAILs on the 500. (It
/// used to judge the first try: a PASS that never saw a retry meet the original in flight.)
#[test]
fn lost_response_waits_for_the_original_to_take_its_key() {
    let server = start("slow_claim", &[]);
    let mut args = full();
    args.extend(["--probe", "lost-response"]);
    let run = check(&server, &args);
    let verdict = run.probes.iter().find(|p| p.0 == "lost-response");
    assert_eq!(
        verdict.map(|p| p.1.as_str()),
        Some("FAIL"),
        "{}",
        run.stdout
    );
    assert_says(
        run.reason("lost-response"),
        "500",
        "the retry that met the original",
    );
    assert_says(
        &run.timeline("lost-response"),
        "the held original had not taken its key yet",
        "the early retry is said, and the scenario ran again",
    );
}

/// An Express-style middleware that fingerprints the raw request bytes: the same JSON value
/// with its keys in another order and other spacing is taken for another payload. Answered 409,
/// the legitimate retry is refused: reserialized-retry FAILs (required), and payload-mismatch
/// FAILs on the 409 it gives a real mismatch (422 expected). With the hash in the lookup key
/// instead, the re-serialised retry executes again: a duplicated effect, critical, and the real
/// mismatch executes too (payload-mismatch FAILs, critical).
#[test]
fn raw_byte_fingerprint_refuses_a_reserialized_retry() {
    let except = [("payload-mismatch", "FAIL"), ("reserialized-retry", "FAIL")];
    let run = expect("raw_fingerprint", &[], &full(), &except, 4);
    assert_says(
        run.reason("reserialized-retry"),
        "got 409",
        "the refused retry is the evidence",
    );
    assert_says(
        &run.stdout,
        "reserialized-retry  FAIL (required)",
        "a refusal is no duplicated effect",
    );
    let run = expect(
        "raw_fingerprint",
        &["--fingerprint-in-key"],
        &full(),
        &except,
        4,
    );
    assert_says(
        &run.stdout,
        "reserialized-retry  FAIL (critical)",
        "a second execution is a duplicated effect",
    );
    assert_says(
        run.reason("reserialized-retry"),
        "got 1 execution",
        "the counter saw it",
    );
}

/// A response cache that saves whatever the handler answered: the crashing request inserted
/// its payment, then failed sending the receipt, and its 500 is saved and replayed for the key.
/// wedged-key-recovery FAILs as critical: the counter shows the execution behind the 500 the
/// client was given (before, only "the retry does not end with a 2xx", required). Everything
/// else PASSes: validation runs before the cache, so error-not-cached's refused payload claims
/// nothing.
#[test]
fn cached_500_for_an_executed_request_is_an_orphaned_payment() {
    let run = expect(
        "cached_error",
        &[],
        &crashing(),
        &[("wedged-key-recovery", "FAIL")],
        4,
    );
    assert_says(
        &run.stdout,
        "wedged-key-recovery  FAIL (critical)",
        "an execution behind an error is critical",
    );
    assert_says(
        &run.stdout,
        "✗ critical  a request answered with an error executed nothing",
        "the check that saw it",
    );
}

/// A shell command that POSTs to `{base}PATH` (Python is on every CI machine; curl may not be).
pub(crate) fn post_cmd(path: &str) -> String {
    format!(
        "{} -c \"import urllib.request as u; u.urlopen(u.Request('{{base}}{path}', method='POST'), timeout=5)\""
,
        python::interpreter_in_shell()
    )
}

/// An Express-style middleware whose store client queues commands while the store is down: a
/// keyed request during the outage is held open instead of refused, and when the store comes
/// back it executes unclaimed while the retry sent at once executes too. store-outage FAILs as
/// critical on the counter's two executions, and says the held request was never answered in
/// time (fails-fast). Before, the unanswered request made the probe an ERROR, "could not run".
#[test]
fn store_client_queueing_through_an_outage_pays_twice() {
    let (down, up) = (post_cmd("/store/down"), post_cmd("/store/up"));
    let mut args = full();
    args.extend(["--store-down-cmd", &down, "--store-up-cmd", &up]);
    let run = expect("queued_store", &[], &args, &[("store-outage", "FAIL")], 4);
    assert_says(
        &run.stdout,
        "store-outage  FAIL (critical)",
        "two executions for one key are a duplicated effect",
    );
    assert_says(
        &run.stdout,
        "✗ recommended  a keyed request while the store is down is answered, not held open",
        "the held request is the other finding",
    );
}

/// A form-encoded body has no JSON value to serialise another way: reserialized-retry SKIPs,
/// naming the body option, before it sends anything.
#[test]
fn a_body_that_is_not_json_skips_reserialized_retry() {
    let server = start("accept_202", &[]);
    let args = [
        "-H",
        "Content-Type: application/x-www-form-urlencoded",
        "-d",
        "amount=5&ref={{unique}}",
        "--count-url",
        "{base}/count",
        "--probe",
        "reserialized-retry",
    ];
    let run = check(&server, &args);
    let verdict = run.probes.iter().find(|p| p.0 == "reserialized-retry");
    assert_eq!(
        verdict.map(|p| p.1.as_str()),
        Some("SKIP"),
        "{}",
        run.stdout
    );
    assert_says(run.reason("reserialized-retry"), "not JSON", "says why");
    assert_says(run.reason("reserialized-retry"), "-d", "names the option");
}

/// The severity that decided a probe's FAIL or WARN in the JSON report: its worst failed check
/// that counts (info never does).
fn deciding_severity(run: &Run, id: &str) -> String {
    let rank = |s: &str| {
        ["recommended", "required", "critical"]
            .iter()
            .position(|r| *r == s)
    };
    run.report["probes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["id"] == id)
        .flat_map(|p| p["checks"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["passed"] == false)
        .filter_map(|c| c["severity"].as_str().map(str::to_owned))
        .filter(|s| rank(s).is_some())
        .max_by_key(|s| rank(s))
        .unwrap_or_default()
}

/// A hand-written API with no lock around check-then-act, whose connections are reset at
/// random (about 1 in 8 of the requests that find their key in flight): every duplicate that
/// is not reset executes. The reset requests say nothing, the executions that were seen say
/// enough: concurrent-duplicates, lost-response and loser-does-not-unlock FAIL on their
/// execution count, critical, whatever the resets hit.
#[test]
fn random_resets_do_not_hide_concurrent_executions() {
    let run = expect(
        "reset_burst",
        &[],
        &full(),
        &[
            ("concurrent-duplicates", "FAIL"),
            ("lost-response", "FAIL"),
            ("loser-does-not-unlock", "FAIL"),
        ],
        4,
    );
    for id in [
        "concurrent-duplicates",
        "lost-response",
        "loser-does-not-unlock",
    ] {
        assert_eq!(
            deciding_severity(&run, id),
            "critical",
            "{id}\n{}",
            run.stdout
        );
    }
}

/// The same evidence gives the same verdict and severity: five runs in a row against the
/// randomly resetting server, counted by ids alone (the basis that sees nothing of a reset
/// request), each FAIL critical on "at most one execution per key" — whether the resets hit
/// 0, 1 or 3 of the burst. (Before, a run with resets left the execution check "not judged"
/// and FAILed as required on the retry's body; one without FAILed as critical.)
#[test]
fn five_runs_with_random_resets_give_one_verdict_and_severity() {
    let server = start("reset_burst", &[]);
    let args = [
        "-H",
        "Authorization: Bearer ta",
        "-H",
        "Content-Type: application/json",
        "-d",
        r#"{"amount":5,"ref":"{{unique}}"}"#,
        "--id-pointer",
        "/id",
        "--timeout",
        "3s",
        "--probe",
        "concurrent-duplicates",
    ];
    for i in 1..=5 {
        let run = check(&server, &args);
        let verdict = run.probes.iter().find(|p| p.0 == "concurrent-duplicates");
        assert_eq!(
            verdict.map(|p| p.1.as_str()),
            Some("FAIL"),
            "run {i}\n{}",
            run.stdout
        );
        assert_eq!(
            deciding_severity(&run, "concurrent-duplicates"),
            "critical",
            "run {i}\n{}",
            run.stdout
        );
        assert_says(
            run.reason("concurrent-duplicates"),
            "at most one execution per key",
            "the execution count decides",
        );
        assert_eq!(run.exit, Some(4), "run {i}\n{}", run.stdout);
    }
}

/// Ids prove executions while other requests of the same key went unanswered: every third
/// request that finds its key in flight is reset, so each burst has both. The unanswered ones
/// could only add executions, so the count already decides: FAIL, critical, and the evidence
/// says which requests got no response.
#[test]
fn executions_proven_by_ids_are_judged_beside_unanswered_requests() {
    let server = start("reset_burst", &["--reset-every", "3"]);
    let args = [
        "-H",
        "Authorization: Bearer ta",
        "-H",
        "Content-Type: application/json",
        "-d",
        r#"{"amount":5,"ref":"{{unique}}"}"#,
        "--id-pointer",
        "/id",
        "--timeout",
        "3s",
        "--probe",
        "concurrent-duplicates",
    ];
    let run = check(&server, &args);
    let verdict = run.probes.iter().find(|p| p.0 == "concurrent-duplicates");
    assert_eq!(
        verdict.map(|p| p.1.as_str()),
        Some("FAIL"),
        "{}",
        run.stdout
    );
    assert_eq!(
        deciding_severity(&run, "concurrent-duplicates"),
        "critical",
        "{}",
        run.stdout
    );
    let timeline = run.timeline("concurrent-duplicates");
    assert_says(
        &timeline,
        "got no response",
        "the unanswered requests are named",
    );
    assert!(
        !timeline.contains("not judged: at most one execution per key"),
        "{timeline}"
    );
}

/// stress under the same rule: against the server with no lock that resets every third request
/// finding its key in flight, a key's ids prove several executions while other requests of the
/// key went unanswered, so that key is violating and the run FAILs; the counter check
/// allows one unseen execution per key left unanswered, never one more.
#[test]
fn stress_judges_keys_whose_ids_prove_executions_beside_resets() {
    let server = start("reset_burst", &["--reset-every", "3"]);
    let (exit, report) = stress(&server, &["--keys", "4", "--duplicates", "8"]);
    let result = &report["result"];
    assert_eq!(result["outcome"], "FAIL", "{result}");
    assert_eq!(exit, Some(4), "{result}");
    assert!(
        report["statuses"]["no response"].as_u64().unwrap_or(0) > 0,
        "the resets are seen: {}",
        report["statuses"]
    );
    // The server has no lock, so how many of a key's duplicates meet it in flight is the
    // machine's timing: on a loaded one a key's duplicates can arrive one after another and find
    // it done (a replay, no second execution). Every key whose ids prove a second execution is
    // violating, whichever keys those are; a run where none did proves nothing and fails here.
    let violating = report["violating_keys"].as_u64().unwrap_or(0);
    assert!((1..=4).contains(&violating), "{report}");
    assert_says(
        result["reason"].as_str().unwrap_or_default(),
        &format!("{violating} of 4 keys violated exactly-once"),
        "the keys whose ids prove a duplicate",
    );
}

/// The key-syntax probes of the draft's RFC 8941 field, which a token carrier skips.
const IETF_ONLY: [&str; 4] = ["quoted-key", "escaped-key", "bare-token", "key-parameters"];

/// [`full`] against a provider's own key header, `Cko-Idempotency-Key`.
fn provider() -> Vec<&'static str> {
    let mut args = full();
    args.extend(["--key-header", "Cko-Idempotency-Key"]);
    args
}

/// Checkout.com's layout: its own header with opaque tokens that refuse quotes, an optional
/// key, 422 on a mismatch, errors in its own shape. Judged as the draft's field, it FAILed
/// missing-key, quoted-key and malformed-key; as a token it is a correct API. The draft's
/// syntax probes SKIP naming the carrier, missing-key SKIPs because the key is optional (a
/// request without one is an ordinary request), and malformed-key sends the control character
/// no header value may hold.
#[test]
fn a_provider_header_is_judged_as_a_token() {
    let mut except: Vec<(&str, &str)> = IETF_ONLY.iter().map(|p| (*p, "SKIP")).collect();
    except.push(("missing-key", "SKIP"));
    let run = expect("provider_header", &[], &provider(), &except, 0);
    assert_says(
        &run.stdout,
        "key: header Cko-Idempotency-Key, token",
        "the header line names the carrier",
    );
    assert_says(
        run.reason("quoted-key"),
        "the key is header Cko-Idempotency-Key, token: this probe tests the draft's RFC 8941",
        "the SKIP names the carrier",
    );
    assert_says(
        run.reason("missing-key"),
        "the key is optional here",
        "a key the API does not require is not a FAIL",
    );
    for (id, _, reason) in &run.probes {
        assert!(
            !reason.contains("quot"),
            "{id}: nobody is told to quote a token: {reason}"
        );
    }
}

/// The same provider checking only its keys' length: a key holding a control character (the
/// one malformed key a token header gets) is taken and executes, so malformed-key FAILs —
/// nothing else moves.
#[test]
fn a_provider_header_taking_control_characters_fails_malformed_key() {
    let mut except: Vec<(&str, &str)> = IETF_ONLY.iter().map(|p| (*p, "SKIP")).collect();
    except.extend([("missing-key", "SKIP"), ("malformed-key", "FAIL")]);
    let run = expect("provider_header", &["--lax-keys"], &provider(), &except, 4);
    assert_says(
        run.reason("malformed-key"),
        "every malformed key is refused with a 4xx",
        "the control character was taken",
    );
}

/// Square's layout: the key in the JSON body (`idempotency_key`), required, 400 when reused
/// with other parameters, replays with 200. Every probe that needs a key header or the draft's
/// syntax SKIPs naming the carrier; every other probe sends its keys in the body and PASSes.
/// The evidence shows each request's body key, and a reproduce line replays the burst with a
/// fresh key spliced into `-d`.
fn square() -> Vec<&'static str> {
    let mut args = TENANT_A_JSON.to_vec();
    args.extend(SQUARE_PAYMENT);
    args.extend([
        "--count-url",
        "{base}/count",
        "--tenant-b-header",
        "Authorization: Bearer tb",
        "--hold-header",
        "X-Hold: {{hold}}",
        "--hold-release",
        "{base}/holds/{{hold}}/release",
        "--timeout",
        "3s",
    ]);
    args
}

/// A Square payment with its key in the body, and where its id is.
const SQUARE_PAYMENT: [&str; 6] = [
    "-d",
    r#"{"source_id":"cnon:ok","amount_money":{"amount":5,"currency":"USD"},"idempotency_key":"k","note":"{{unique}}"}"#,
    "--key-in-body",
    "/idempotency_key",
    "--id-pointer",
    "/payment/id",
];

/// The probes a body key skips: the draft's syntax and the key header's own lines.
fn body_key_skips() -> Vec<(&'static str, &'static str)> {
    let mut except: Vec<(&str, &str)> = IETF_ONLY.iter().map(|p| (*p, "SKIP")).collect();
    for header_only in ["malformed-key", "duplicate-header", "header-name-case"] {
        except.push((header_only, "SKIP"));
    }
    except
}

#[test]
fn a_body_key_is_sent_and_judged_in_the_body() {
    let run = expect("square_body_key", &[], &square(), &body_key_skips(), 0);
    assert_says(
        &run.stdout,
        "key: body /idempotency_key, token",
        "the header line names the carrier",
    );
    assert_says(
        run.reason("duplicate-header"),
        "the key is body /idempotency_key, token: this probe tests a key header",
        "the SKIP names the carrier",
    );
    let replay = &run.report["replay"];
    assert_eq!(replay["key_in_body"], "/idempotency_key", "{replay}");
}

/// The same layout with the key recorded only after the payment: the body key is sent and
/// read back like a header key, so the race is found (critical, one shared cause), and the
/// reproduce lines carry the key in the body.
#[test]
fn a_body_key_recorded_after_the_payment_fails_the_races() {
    let mut except = body_key_skips();
    for race in [
        "concurrent-duplicates",
        "lost-response",
        "loser-does-not-unlock",
    ] {
        except.push((race, "FAIL"));
    }
    let run = expect(
        "square_body_key",
        &["--record-after"],
        &square(),
        &except,
        4,
    );
    assert_says(&run.stdout, "critical FAILs share one cause", "one cause");
    assert!(
        run.stdout.lines().any(|l| l.contains("curl")
            && l.contains(r#"--data-raw '{"source_id""#)
            && l.contains(r#""idempotency_key":""#)),
        "the reproduce lines carry the key in -d\n{}",
        run.stdout
    );
}

/// stress with the key in the body: exactly once against the correct design, every key
/// violating against the one that records the key after the payment.
#[test]
fn stress_sends_and_judges_a_body_key() {
    for (server_args, outcome, exit) in [(&[][..], "PASS", 0), (&["--record-after"][..], "FAIL", 4)]
    {
        let server = start("square_body_key", server_args);
        let count = format!("{}/count", server.base);
        let mut args = SQUARE_PAYMENT.to_vec();
        args.extend(["--count-url", &count]);
        // Each payment takes 30 ms, so a burst's copies overlap the first one's work.
        args.extend(["-H", "X-Delay-Ms: 30", "--keys", "6", "--duplicates", "4"]);
        args.extend(["--timeout", "3s"]);
        let (code, report) = stress_with(&server, &args);
        let result = &report["result"];
        assert_eq!(result["outcome"], outcome, "{server_args:?}: {result}");
        assert_eq!(code, Some(exit), "{server_args:?}: {result}");
        assert_eq!(report["key"], "body /idempotency_key, token", "{report}");
    }
}

/// A UUID-typed key (drf-idempotency-key): only bare UUIDs pass, and a UUID's spellings are
/// one key. The pre-flight's first trial key (`K-<uuid>`) is refused with 400, so every later
/// key is a UUID, and every probe whose relation a UUID can hold runs with one: bare-token's
/// Token is the UUID itself (a UUID starting with a letter is a Token), and it PASSes. Key 4 of
/// distinct-keys-independent is key 3 lower-cased, so the folded case is seen: FAIL (it PASSed
/// when the pair was two unrelated UUIDs, one spelt upper-case, which compared nothing).
/// escaped-key, whose key cannot be a UUID, SKIPs naming the shape. Under the draft's syntax
/// the API still refuses the RFC 8941 String form: quoted-key FAILs, as the pre-flight's
/// fallback says, and key-parameters follows from it. With `--key-shape uuid` one trial key
/// outside the shape is sent, to check the flag, and one upper-cased, to learn the case.
#[test]
fn a_uuid_only_api_gets_keys_of_its_shape() {
    let except = [
        ("quoted-key", "FAIL"),
        ("escaped-key", "SKIP"),
        ("key-parameters", "INCONCLUSIVE"),
        ("distinct-keys-independent", "FAIL"),
    ];
    let run = expect("uuid_only", &[], &full(), &except, 4);
    assert_says(
        &run.timeline("first-request"),
        "keys: the API accepts only keys of shape uuid",
        "the pre-flight says what it learnt",
    );
    assert_says(
        run.reason("escaped-key"),
        "the API accepts only keys of shape uuid",
        "the SKIP names the shape",
    );
    assert_says(
        &run.timeline("distinct-keys-independent"),
        "key 4 = key 3 lower-cased",
        "the case pair is one key in two cases",
    );

    let server = start("uuid_only", &[]);
    let only = ["--key-shape", "uuid", "--probe", "first-request"];
    let said = check(&server, &[&full()[..], &only[..]].concat());
    let roles: Vec<String> = said.report["probes"][0]["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["role"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        roles.iter().filter(|r| r.starts_with("key trial")).count(),
        2,
        "--key-shape sends the one trial key its shape excludes, and one upper-cased: {roles:?}"
    );
    assert_says(
        &said.stdout,
        "key shape: uuid (--key-shape; #",
        "the header says the flag and the exchange that bore it out",
    );
    assert_eq!(said.probes[0].1, "PASS", "{}", said.stdout);
}
