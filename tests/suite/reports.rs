//! Golden tests of every renderer, from hand-made `RunReport`s (so no field is volatile).
//!
//! Two reports go through every renderer: `mixed` has one probe of each outcome, and `hostile`
//! carries what a misbehaving server can send back (a body with `]]>`, an ANSI escape, NUL, a
//! bidi override, invalid UTF-8, markup) plus the token `s3cr3t-token` in headers, URL and
//! bodies. The HTML page also has goldens for its `stress`, `client` and `--openapi` forms,
//! from hand-made aggregates.
//! Goldens live in `fixtures/golden/<format>/`; run with `UPDATE_GOLDEN=1` to rewrite them after
//! an intended change, and review the diff.

use crate::common;

use std::path::Path;

use base64::Engine as _;
use idem_check::check::{Check, Severity};
use idem_check::http::exchange::{Exchange, Header, ReceivedResponse, Role, SentRequest};
use idem_check::http::HttpError;
use idem_check::outcome::Outcome;
use idem_check::redact::{SecretSources, Secrets};
use idem_check::report::html::{self, Lane, LaneAttempt, LaneRun, Latency, Sameness, StressView};
use idem_check::report::{
    json, junit, markdown, terminal, FollowsFrom, Format, ProbeReport, RenderOptions, RunReport,
    Summary, ToolInfo, SCHEMA,
};

const SECRET: &str = "s3cr3t-token";
const BASE: &str = "http://127.0.0.1:41873";
const KEY: &str = "\"5b0c1c9e-4f0e-4b7a-9a55-0d1d3c2e7f10\"";

fn opts(color: bool) -> RenderOptions {
    let tenant_a = [format!("Authorization: Bearer {SECRET}")];
    RenderOptions {
        color,
        secrets: Secrets::for_target(&SecretSources {
            tenant_a: &tenant_a,
            ..SecretSources::default()
        }),
        ..RenderOptions::default()
    }
}

/// The options a report file of `format` is rendered with (its own body cap).
fn as_file(format: Format) -> RenderOptions {
    opts(false).for_format(format, None)
}

fn request(method: &str, path: &str, key: Option<&str>, body: &[u8]) -> SentRequest {
    let mut headers = vec![
        Header::new("host", "127.0.0.1:41873"),
        Header::new("authorization", format!("Bearer {SECRET}")),
    ];
    if !body.is_empty() {
        headers.push(Header::new("content-type", "application/json"));
    }
    if let Some(k) = key {
        headers.push(Header::new("idempotency-key", k));
    }
    SentRequest {
        method: method.into(),
        url: format!("{BASE}{path}"),
        headers,
        body: body.to_vec(),
    }
}

fn response(status: u16, content_type: &str, body: &[u8]) -> ReceivedResponse {
    ReceivedResponse {
        status,
        version: http::Version::HTTP_11,
        headers: vec![
            Header::new("content-type", content_type),
            Header::new("content-length", body.len().to_string()),
        ],
        body: body.to_vec(),
        body_truncated: false,
        problem: None,
    }
}

fn exchange(
    n: usize,
    role: &str,
    start_ms: f64,
    duration_ms: f64,
    request: SentRequest,
    response: Option<ReceivedResponse>,
) -> Exchange {
    Exchange {
        n,
        role: role.into(),
        start_ms,
        duration_ms,
        release_us: None,
        request,
        outcome: response.ok_or_else(|| HttpError::ClosedBeforeAnyByte("no response".into())),
    }
}

fn count(n: usize, role: &str, start_ms: f64, value: u32) -> Exchange {
    let mut e = exchange(
        n,
        role,
        start_ms,
        8.0,
        request("GET", "/api/payments/count", None, b""),
        Some(response(
            200,
            "application/json",
            format!("{{\"count\":{value}}}").as_bytes(),
        )),
    );
    e.role.reads_counter = true;
    e
}

/// The keyed payment POST answered `status` with the JSON `body`: most exchanges of a probe.
fn keyed_payment(
    n: usize,
    role: &str,
    start_ms: f64,
    duration_ms: f64,
    status: u16,
    body: &[u8],
) -> Exchange {
    exchange(
        n,
        role,
        start_ms,
        duration_ms,
        request("POST", "/api/payments", Some(KEY), PAYMENT),
        Some(response(status, "application/json", body)),
    )
}

fn check(
    id: &str,
    what: &str,
    severity: Severity,
    passed: bool,
    expected: &[&str],
    actual: &str,
    exchanges: &[usize],
) -> Check {
    Check {
        id: id.into(),
        what: what.into(),
        severity,
        passed,
        expected: expected.iter().map(|s| s.to_string()).collect(),
        actual: actual.into(),
        exchanges: exchanges.to_vec(),
        symptom: Default::default(),
    }
}

fn probe(id: &'static str, group: &'static str, outcome: Outcome, reason: &str) -> ProbeReport {
    ProbeReport {
        id,
        group,
        section: "draft-07 §2.6",
        stimulus: "sends the operation",
        requirement: "the server does what the draft says",
        outcome,
        reason: reason.into(),
        reason_cites: Vec::new(),
        follows_from: None,
        effect_basis: None,
        duration_ms: 0.0,
        checks: vec![],
        timeline: vec![],
        exchanges: vec![],
    }
}

fn run(probes: Vec<ProbeReport>) -> RunReport {
    RunReport {
        schema: SCHEMA,
        tool: ToolInfo {
            name: "idem-check",
            version: "0.1.0",
        },
        label: "payments-api".into(),
        reference: false,
        target: format!("POST {BASE}/api/payments"),
        suite: "ietf-draft-07".into(),
        strict: false,
        started_at: "2026-01-15T10:00:00Z".into(),
        duration_ms: 2345.0,
        interrupted: false,
        context: vec![
            "2 tenants".into(),
            "effects counted with GET /api/payments/count".into(),
        ],
        summary: Summary::of(&probes),
        probes,
        replay: None,
    }
}

const PAYMENT: &[u8] = br#"{"amountCents":1250,"currency":"EUR","reference":"idem-check-7f3a2c"}"#;

/// One probe of each outcome, with ordinary bodies.
fn mixed() -> RunReport {
    let mut first = probe(
        "first-request",
        "enforcement",
        Outcome::Pass,
        "2 checks passed",
    );
    first.duration_ms = 41.0;
    first.checks = vec![
        check(
            "status",
            "2xx for a new key",
            Severity::Required,
            true,
            &["2xx"],
            "201",
            &[1],
        ),
        check(
            "effect",
            "one execution",
            Severity::Critical,
            true,
            &["1 execution"],
            "1 execution",
            &[1],
        ),
    ];
    first.exchanges = vec![keyed_payment(
        1,
        "original",
        0.0,
        38.0,
        201,
        br#"{"id":"pay_01H8","amountCents":1250}"#,
    )];

    let mut missing = probe(
        "missing-key",
        "key-syntax",
        Outcome::Warn,
        "problem+json or Link describedby: expected Content-Type: application/problem+json or Link: <…>; rel=\"describedby\", got Content-Type: text/plain, no Link",
    );
    missing.section = "draft-07 §2.7";
    missing.stimulus = "sends the operation without an Idempotency-Key header";
    missing.requirement = "a missing key on an operation that requires one gets 400";
    missing.effect_basis = Some("counter GET /api/payments/count (/count)".into());
    missing.duration_ms = 20.5;
    missing.checks = vec![
        check(
            "status",
            "400 for a missing key",
            Severity::Required,
            true,
            &["400"],
            "400",
            &[2],
        ),
        check(
            "no-effect",
            "no execution",
            Severity::Critical,
            true,
            &["0 executions (counter)"],
            "0 executions",
            &[1, 3],
        ),
        check(
            "problem",
            "problem+json or Link describedby",
            Severity::Recommended,
            false,
            &[
                "Content-Type: application/problem+json",
                "Link: <…>; rel=\"describedby\"",
            ],
            "Content-Type: text/plain, no Link",
            &[2],
        ),
    ];
    missing.exchanges = vec![
        count(1, "count before", 0.0, 17),
        exchange(
            2,
            "without key",
            9.0,
            3.0,
            request("POST", "/api/payments", None, PAYMENT),
            Some(response(400, "text/plain", b"missing Idempotency-Key\n")),
        ),
        count(3, "count after", 12.0, 17),
    ];

    let mut replay = probe(
        "replay-identity",
        "enforcement",
        Outcome::Fail,
        "effect count unchanged by retries: expected 1 execution (counter), got 3 executions",
    );
    replay.stimulus = "sends the same POST with one key 3 times, one after another";
    replay.requirement =
        "a retry after completion gets the completed result and does not execute again";
    replay.effect_basis = Some("counter GET /api/payments/count (/count)".into());
    replay.duration_ms = 134.0;
    let created = |id: &str| {
        format!(
            r#"{{"id":"{id}","amountCents":1250,"currency":"EUR","reference":"idem-check-7f3a2c"}}"#
        )
    };
    replay.checks = vec![
        check(
            "effect",
            "effect count unchanged by retries",
            Severity::Critical,
            false,
            &["1 execution (counter)"],
            "3 executions",
            &[1, 5],
        ),
        check(
            "same-body",
            "replay body byte-identical to the original",
            Severity::Required,
            false,
            &[&created("pay_01H8")],
            &created("pay_01J2"),
            &[2, 3],
        ),
        check(
            "same-status",
            "same status on every attempt",
            Severity::Required,
            true,
            &["201"],
            "201 201 201",
            &[2, 3, 4],
        ),
        check(
            "marker",
            "replay marker header",
            Severity::Info,
            false,
            &["a replay marker"],
            "none",
            &[3],
        ),
    ];
    replay.exchanges = vec![
        count(1, "count before", 0.0, 17),
        keyed_payment(
            2,
            "original",
            11.0,
            38.0,
            201,
            created("pay_01H8").as_bytes(),
        ),
        keyed_payment(
            3,
            "retry 1/2",
            51.0,
            35.0,
            201,
            created("pay_01J2").as_bytes(),
        ),
        keyed_payment(
            4,
            "retry 2/2",
            88.0,
            36.0,
            201,
            created("pay_01J3").as_bytes(),
        ),
        count(5, "count after", 126.0, 20),
    ];

    let mut tenant = probe(
        "tenant-isolation",
        "scope",
        Outcome::Skip,
        "needs a second tenant: add [tenants.b] to the target file",
    );
    tenant.section = "draft-07 §5";

    let mut concurrent = probe(
        "concurrent-duplicates",
        "enforcement",
        Outcome::Inconclusive,
        "#1 completed at +35 ms, before the first duplicate started at +41 ms; raise `hold_ms` in the target file",
    );
    concurrent.duration_ms = 2410.0;
    concurrent.checks = vec![check(
        "at-most-once",
        "at most one execution",
        Severity::Critical,
        true,
        &["at most 1 execution (ids)"],
        "1 execution",
        &[1, 2, 3],
    )];
    concurrent.timeline = vec!["#1 completed at +35 ms, before #2 started at +41 ms".into()];
    concurrent.exchanges = (1..=3)
        .map(|n| {
            let mut e = keyed_payment(
                n,
                if n == 1 { "original" } else { "duplicate" },
                if n == 1 { 0.0 } else { 41.0 },
                if n == 1 { 35.0 } else { 4.0 },
                201,
                created("pay_01H8").as_bytes(),
            );
            if n > 1 {
                e.role = Role::nth("duplicate", n - 1, 2);
                e.release_us = Some(41_000.0);
            }
            e
        })
        .collect();

    let mut restart = probe(
        "restart-persistence",
        "durability",
        Outcome::Error,
        "the target did not come back after the restart hook: connection refused",
    );
    restart.section = "draft-07 §2.6";
    restart.duration_ms = 10_002.0;
    restart.exchanges = vec![Exchange {
        outcome: Err(HttpError::Connect("connection refused after 2 ms".into())),
        ..exchange(
            1,
            "after restart",
            10_000.0,
            2.0,
            request("POST", "/api/payments", Some(KEY), PAYMENT),
            None,
        )
    }];

    run(vec![first, missing, replay, tenant, concurrent, restart])
}

/// A server that echoes secrets and sends bytes no report format can hold as they are.
fn hostile() -> RunReport {
    let mut evil_text =
        b"{\"echo\":\"Bearer s3cr3t-token\",\"x\":\"]]>\x1b[31mred\0\xE2\x80\xAEtxt\"}".to_vec();
    evil_text.extend_from_slice(b"\n<![CDATA[ ]]> & </failure>");
    let mut evil_binary = b"\xff\xfe]]>\x1b[31m\0s3cr3t-token".to_vec();
    evil_binary.extend_from_slice(&[0x80; 4]);

    let mut original_req = request(
        "POST",
        "/api/payments?access_token=s3cr3t-token",
        Some(KEY),
        PAYMENT,
    );
    original_req.headers.push(Header::new("x-api-key", SECRET));
    original_req.headers.push(Header::new(
        "idempotency-key",
        b"\"caf\xe9\x1b[2J\"".to_vec(),
    ));

    let mut replay = probe(
        "replay-identity",
        "enforcement",
        Outcome::Fail,
        "replay body byte-identical to the original: expected {…}, got ]]>\x1b[31m s3cr3t-token",
    );
    replay.duration_ms = 77.0;
    replay.checks = vec![check(
        "same-body",
        "replay body byte-identical to the original",
        Severity::Required,
        false,
        &["{\"id\":\"pay_1\"}"],
        "{\"echo\":\"Bearer s3cr3t-token\",\"x\":\"]]>\x1b[31mred\0\u{202E}txt\"}",
        &[1, 2],
    )];
    replay.timeline = vec!["#2 started at +40 ms \x1b[1m".into()];
    replay.exchanges = vec![
        exchange(
            1,
            "original",
            0.0,
            30.0,
            original_req,
            Some(response(201, "application/octet-stream", &evil_binary)),
        ),
        exchange(
            2,
            "retry 1/1 \u{202E}",
            40.0,
            30.0,
            request("POST", "/api/payments", Some(KEY), PAYMENT),
            Some(ReceivedResponse {
                headers: vec![
                    Header::new("content-type", "application/json"),
                    Header::new("set-cookie", "session=abc; HttpOnly"),
                    Header::new("x-echo", format!("token {SECRET}")),
                    Header::new("x-evil", b"a\x1b[31mb\0c".to_vec()),
                ],
                ..response(201, "application/json", &evil_text)
            }),
        ),
    ];

    let mut warn = probe(
        "missing-key",
        "key-syntax",
        Outcome::Warn,
        "problem+json: got ]]> \x1b[0m",
    );
    warn.checks = vec![check(
        "problem",
        "problem+json",
        Severity::Recommended,
        false,
        &["application/problem+json"],
        "text/html ]]> \x1b[0m <script>",
        &[1],
    )];
    warn.exchanges = vec![exchange(
        1,
        "without key",
        0.0,
        5.0,
        request("POST", "/api/payments", None, PAYMENT),
        Some(response(400, "text/html", b"<b>]]></b>\x07")),
    )];

    let skip = probe(
        "tenant-isolation",
        "scope",
        Outcome::Skip,
        "needs a second tenant \u{202E}| `x` ]]>",
    );
    run(vec![replay, warn, skip])
}

/// Compares `actual` with the golden file, or rewrites it under `UPDATE_GOLDEN=1`.
fn golden(rel: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/golden")
        .join(rel);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    if expected != actual {
        let diff = similar::TextDiff::from_lines(expected.as_str(), actual)
            .unified_diff()
            .context_radius(3)
            .header(&format!("golden {rel}"), "rendered")
            .to_string();
        panic!(
            "{} does not match the rendering (rerun with UPDATE_GOLDEN=1 if the change is intended):\n{diff}",
            path.display()
        );
    }
}

/// Every rendering of `report` that a run can produce, with its golden file name.
fn renderings(name: &str, report: &RunReport) -> Vec<(String, String)> {
    vec![
        (
            format!("terminal/{name}.txt"),
            terminal::render(report, &opts(false), false),
        ),
        (
            format!("terminal/{name}-color.txt"),
            terminal::render(report, &opts(true), false),
        ),
        (
            format!("junit/{name}.xml"),
            junit::render(report, &[], &as_file(Format::Junit), false).unwrap(),
        ),
        (
            format!("junit/{name}-strict.xml"),
            junit::render(report, &[], &as_file(Format::Junit), true).unwrap(),
        ),
        (
            format!("json/{name}.json"),
            json::render(report, &as_file(Format::Json)).unwrap(),
        ),
        (
            format!("markdown/{name}.md"),
            markdown::render(report, &[], &as_file(Format::Markdown)),
        ),
        (
            format!("html/{name}.html"),
            html::render(report, &as_file(Format::Html)),
        ),
    ]
}

/// The mixed report renders exactly as its goldens, in every format.
#[test]
fn mixed_report_matches_goldens() {
    for (rel, text) in renderings("mixed", &mixed()) {
        golden(&rel, &text);
    }
}

/// The root-cause line counts each deferred verdict as what it was, in every format that ends
/// with it (terminal, Markdown, HTML), and the JSON report keeps the verdict beside the probe:
/// quoted-key's refusal made escaped-key FAIL and key-parameters WARN.
#[test]
fn root_causes_count_each_deferred_verdict_as_what_it_was() {
    let deferred = |id, verdict| {
        let mut p = probe(
            id,
            "key-syntax",
            Outcome::Inconclusive,
            "prerequisite quoted-key failed (see its entry), so this probe's failure says nothing new: expected 2xx, got 400",
        );
        p.follows_from = Some(FollowsFrom {
            probe: "quoted-key",
            verdict,
        });
        p
    };
    let report = run(vec![
        probe(
            "quoted-key",
            "key-syntax",
            Outcome::Fail,
            "expected 2xx, got 400",
        ),
        deferred("escaped-key", Outcome::Fail),
        deferred("key-parameters", Outcome::Warn),
    ]);
    let line = "quoted-key fails: 1 other FAIL and 1 WARN follow from it";
    for (rel, text) in renderings("deferred", &report) {
        if ["terminal/", "markdown/", "html/"]
            .iter()
            .any(|f| rel.starts_with(f))
        {
            assert!(text.contains(line), "{rel}:\n{text}");
        }
        assert!(!text.contains("2 other FAILs"), "{rel}:\n{text}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&json::render(&report, &as_file(Format::Json)).unwrap()).unwrap();
    assert_eq!(
        json["probes"][2]["follows_from"],
        serde_json::json!({"probe": "quoted-key", "verdict": "WARN"})
    );
    assert!(json["probes"][0].get("follows_from").is_none());
}

/// The hostile report renders exactly as its goldens, in every format.
#[test]
fn hostile_report_matches_goldens() {
    for (rel, text) in renderings("hostile", &hostile()) {
        golden(&rel, &text);
    }
}

/// The text a text event or an entity reference stands for (the reader hands `a &amp; b` over
/// as text, a reference and text).
fn xml_text(event: &quick_xml::events::Event) -> String {
    use quick_xml::escape::unescape;
    use quick_xml::events::Event;
    match event {
        Event::Text(t) => unescape(&t.decode().unwrap()).unwrap().into_owned(),
        Event::GeneralRef(r) => unescape(&format!("&{};", r.decode().unwrap()))
            .unwrap()
            .into_owned(),
        _ => String::new(),
    }
}

/// Testcases found in a JUnit document, as (name, classname); panics if it does not parse.
fn parse_junit(xml: &str) -> (Vec<(String, String)>, String) {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut cases = Vec::new();
    let mut cdata = String::new();
    loop {
        match reader.read_event() {
            Err(e) => panic!(
                "JUnit does not parse at {}: {e}\n{xml}",
                reader.buffer_position()
            ),
            Ok(Event::Eof) => break,
            Ok(Event::Start(t) | Event::Empty(t)) if t.name().as_ref() == b"testcase" => {
                let attr = |key: &[u8]| {
                    t.try_get_attribute(key)
                        .unwrap()
                        .map(|a| {
                            a.normalized_value(quick_xml::XmlVersion::default())
                                .unwrap()
                                .into_owned()
                        })
                        .unwrap_or_default()
                };
                cases.push((attr(b"name"), attr(b"classname")));
            }
            Ok(e @ (Event::Text(_) | Event::GeneralRef(_))) => cdata.push_str(&xml_text(&e)),
            Ok(_) => {}
        }
    }
    (cases, cdata)
}

/// The JUnit report is well-formed XML even with hostile bodies, and names every testcase.
#[test]
fn junit_parses_and_names_every_testcase() {
    for report in [mixed(), hostile()] {
        for strict in [false, true] {
            let xml = junit::render(&report, &[], &opts(false), strict).unwrap();
            let (cases, cdata) = parse_junit(&xml);
            let ids: Vec<&str> = report.probes.iter().map(|p| p.id).collect();
            assert_eq!(cases.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(), ids);
            for (name, classname) in &cases {
                assert!(!name.is_empty() && classname.starts_with("idem-check.ietf-draft-07."));
            }
            // XML 1.0 allows no C0 control but tab and newline, not even as a reference.
            assert!(
                !xml.chars()
                    .any(|c| c.is_control() && c != '\n' && c != '\t'),
                "raw control character in JUnit"
            );
            // The escaped text reads back as the sanitised original.
            if report.probes[0].id == "replay-identity" && report.probes.len() == 3 {
                assert!(
                    cdata.contains("\"x\":\"]]>\\x1B[31mred\\x00\\u{202E}txt\""),
                    "{cdata}"
                );
            }
        }
    }
}

/// Without colour, the terminal output holds no escape byte at all; with colour, only ours.
#[test]
fn terminal_output_has_no_raw_escape_from_the_server() {
    for report in [mixed(), hostile()] {
        let plain = terminal::render(&report, &opts(false), false);
        assert!(!plain.contains('\x1b'), "raw ESC without colour:\n{plain}");
        assert!(!plain.contains('\0') && !plain.contains('\u{202E}'));
        let coloured = terminal::render(&report, &opts(true), false);
        let mut rest = coloured.as_str();
        while let Some(i) = rest.find('\x1b') {
            let tail = &rest[i..];
            let ours = [
                "\x1b[0m",
                "\x1b[1m",
                "\x1b[2m",
                "\x1b[31m",
                "\x1b[32m",
                "\x1b[33m",
                "\x1b[35m",
                "\x1b[1;31m",
            ]
            .iter()
            .find(|code| tail.starts_with(*code))
            .unwrap_or_else(|| {
                panic!("foreign escape sequence: {:?}", &tail[..tail.len().min(12)])
            });
            rest = &tail[ours.len()..];
        }
    }
}

/// The token named by the target never reaches any output, not even base64-encoded.
#[test]
fn the_secret_appears_in_no_output() {
    let report = hostile();
    let encoded = base64::engine::general_purpose::STANDARD.encode(SECRET);
    for (rel, text) in renderings("hostile", &report) {
        assert!(!text.contains(SECRET), "{rel} leaks the token");
        assert!(
            !text.contains(&encoded[..12]),
            "{rel} leaks the token in base64"
        );
    }
    let json: serde_json::Value =
        serde_json::from_str(&json::render(&report, &opts(false)).unwrap()).unwrap();
    let body = &json["probes"][0]["exchanges"][0]["response"]["body"]["base64"];
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(body.as_str().unwrap())
        .unwrap();
    assert!(!String::from_utf8_lossy(&bytes).contains(SECRET));
    assert!(String::from_utf8_lossy(&bytes).contains("[redacted]"));
    for p in &report.probes {
        assert!(!terminal::probe_line(p, &opts(true)).contains(SECRET));
    }
}

/// The failure evidence can be replayed: the curl line uses a variable for the token.
#[test]
fn failure_evidence_carries_a_curl_line_with_the_token_as_a_variable() {
    let text = terminal::render(&hostile(), &opts(false), false);
    assert!(text.contains("reproduce #1:"), "{text}");
    assert!(
        text.contains("-H \"authorization: Bearer $IDEM_TOKEN_A\""),
        "{text}"
    );
    assert!(text.contains("access_token=$IDEM_TOKEN_A"), "{text}");
}

/// The JSON report keeps its schema id and field names (a consumer's contract).
#[test]
fn json_keeps_schema_and_field_order() {
    let text = json::render(&mixed(), &opts(false)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["schema"], "idem-check.report/1");
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys[0], "schema");
    assert_eq!(
        v["probes"][2]["exchanges"][1]["request"]["headers"][1]["value"],
        "Bearer [redacted]"
    );
}

/// Every golden JUnit file validates against `junit-10.xsd` with a real schema validator, and
/// the validator does reject what the schema forbids (a time with more than three decimals).
#[test]
fn golden_junit_files_validate_against_the_junit_10_schema() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/golden/junit");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "xml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 4, "{files:?}");
    common::junit_schema::assert_valid(&files);
    let bad = tempfile::tempdir().unwrap();
    let path = bad.path().join("bad.xml");
    std::fs::write(
        &path,
        r#"<testsuites><testsuite name="s" tests="0" failures="0" errors="0" time="12.6075000000000001"/></testsuites>"#,
    )
    .unwrap();
    assert!(!common::junit_schema::validate(&[path]).status.success());
}

/// The elements a page is made of: anything else would have come from a server.
const PAGE_ELEMENTS: &[&str] = &[
    "html",
    "head",
    "meta",
    "title",
    "style",
    "body",
    "header",
    "h1",
    "h2",
    "h3",
    "h4",
    "p",
    "section",
    "div",
    "b",
    "details",
    "summary",
    "span",
    "code",
    "dl",
    "dt",
    "dd",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "a",
    "ul",
    "li",
    "pre",
    "figure",
    "figcaption",
    "footer",
    "svg",
    "g",
    "line",
    "text",
    "rect",
    "circle",
    "polygon",
];

/// One element of a page: its name, its attributes, and whether it is a probe's `<details>`.
struct Element {
    name: String,
    attrs: Vec<(String, String)>,
}

impl Element {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Every element of `page` and its text; panics if the page is not well-formed.
fn parse_page(page: &str) -> (Vec<Element>, String) {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(page);
    let (mut elements, mut text) = (Vec::new(), String::new());
    loop {
        match reader.read_event() {
            Err(e) => panic!(
                "the page does not parse at {}: {e}",
                reader.buffer_position()
            ),
            Ok(Event::Eof) => break,
            Ok(Event::Start(t) | Event::Empty(t)) => elements.push(Element {
                name: String::from_utf8(t.name().as_ref().to_vec()).unwrap(),
                attrs: t
                    .attributes()
                    .map(|a| {
                        let a = a.unwrap();
                        (
                            String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                            a.normalized_value(quick_xml::XmlVersion::default())
                                .unwrap()
                                .into_owned(),
                        )
                    })
                    .collect(),
            }),
            Ok(e @ (Event::Text(_) | Event::GeneralRef(_))) => text.push_str(&xml_text(&e)),
            Ok(_) => {}
        }
    }
    (elements, text)
}

/// The page is well-formed, made only of its own elements with no handler, link or source
/// leaving it; it holds no raw control or bidi character; FAIL and WARN probes are open and the
/// others closed; and the server's bytes read back as the escapes every format shows.
#[test]
fn the_page_holds_only_its_own_markup() {
    for report in [mixed(), hostile()] {
        let page = html::render(&report, &as_file(Format::Html));
        let (elements, text) = parse_page(&page);
        for e in &elements {
            assert!(
                PAGE_ELEMENTS.contains(&e.name.as_str()),
                "<{}> on the page",
                e.name
            );
            for (k, v) in &e.attrs {
                assert!(
                    !k.starts_with("on") && k != "src" && k != "style",
                    "{k}={v:?}"
                );
                if k == "href" {
                    assert!(v.starts_with('#'), "a link out of the page: {v}");
                }
            }
        }
        assert!(
            !page
                .chars()
                .any(|c| (c.is_control() && c != '\n' && c != '\t')
                    || ('\u{202A}'..='\u{202E}').contains(&c)
                    || ('\u{2066}'..='\u{2069}').contains(&c)),
            "a raw control or bidi character"
        );
        let probes: Vec<&Element> = elements
            .iter()
            .filter(|e| e.name == "details" && e.attr("data-outcome").is_some())
            .collect();
        assert_eq!(probes.len(), report.probes.len());
        for (e, p) in probes.iter().zip(&report.probes) {
            let open = matches!(p.outcome, Outcome::Fail | Outcome::Warn);
            assert_eq!(e.attr("open").is_some(), open, "{}", p.id);
        }
        assert!(elements.iter().any(|e| e.name == "svg"));
        let csp = elements
            .iter()
            .find(|e| e.attr("http-equiv") == Some("Content-Security-Policy"))
            .expect("a Content-Security-Policy");
        assert_eq!(
            csp.attr("content"),
            Some("default-src 'none'; style-src 'unsafe-inline'")
        );
        if report.probes.len() == 3 {
            assert!(
                text.contains("\"x\":\"]]>\\x1B[31mred\\x00\\u{202E}txt\""),
                "{text}"
            );
            assert!(text.contains("text/html ]]> \\x1B[0m <script>"), "{text}");
        }
    }
}

/// Markup a server puts in a role, a reason or a header cannot open an element or an
/// attribute of its own.
#[test]
fn markup_from_the_server_stays_text() {
    let mut report = hostile();
    let evil = "\"><img src=x onerror=alert(1)><svg onload=alert(2)>'";
    report.probes[0].reason = evil.into();
    report.probes[0].exchanges[1].role = evil.into();
    report.probes[0].timeline.push(evil.into());
    report.probes[0].checks[0].actual = evil.into();
    report.probes[0].exchanges[1]
        .request
        .headers
        .push(Header::new("x-note", evil));
    let page = html::render(&report, &as_file(Format::Html));
    let (elements, text) = parse_page(&page);
    assert!(elements.iter().all(|e| e.name != "img"));
    assert!(elements
        .iter()
        .all(|e| e.attrs.iter().all(|(k, _)| !k.starts_with("on"))));
    assert!(text.contains("<img src=x onerror=alert(1)>"), "{text}");
}

/// A stress run's aggregates, as the stress report hands them to the page.
fn stress_view<'a>(
    statuses: &'a std::collections::BTreeMap<String, u64>,
    released: &'a std::collections::BTreeMap<String, u64>,
) -> StressView<'a> {
    let buckets = |peak: usize| -> Vec<(f64, u64)> {
        (0..10)
            .map(|i| {
                let n = 1u64 << (8 - (i as i64 - peak as i64).unsigned_abs().min(8));
                (0.032 * f64::from(1u32 << i), n)
            })
            .collect()
    };
    StressView {
        keys: 2000,
        keys_completed: 2000,
        duplicates: 8,
        concurrency: 64,
        requests: 16000,
        requests_per_second: 1290.3,
        duration_ms: 12_400.0,
        interrupted: false,
        statuses,
        latency: vec![
            Latency {
                class: "2xx",
                count: 2000,
                p50_ms: 4.1,
                p90_ms: 9.8,
                p99_ms: 15.2,
                max_ms: 16.4,
                buckets: buckets(7),
            },
            Latency {
                class: "409",
                count: 13990,
                p50_ms: 2.0,
                p90_ms: 4.4,
                p99_ms: 7.9,
                max_ms: 8.1,
                buckets: buckets(6),
            },
        ],
        released,
        spread_us: [21.0, 31.0, 56.0],
        violating_keys: 1,
        violations: vec![(
            "c0e76a12-f24a-4e48-8aef-7fbca005536d",
            "each key executes at most once: expected at most 1 execution, got 2 executions",
        )],
    }
}

/// The stress page: the load drawn above its one probe, whose kept key has a burst.
#[test]
fn stress_page_matches_its_golden() {
    let statuses = [("201", 2010), ("409", 13990)]
        .into_iter()
        .map(|(s, n)| (s.to_string(), n))
        .collect();
    let released = [("from 2 real-time threads".to_string(), 2000)].into();
    let mut result = probe(
        "stress",
        "load",
        Outcome::Fail,
        "1 of 2000 keys violated exactly-once",
    );
    result.duration_ms = 12_400.0;
    result.checks = vec![check(
        "one-execution",
        "key c0e76a12: each key executes at most once",
        Severity::Critical,
        false,
        &["at most 1 execution (distinct resource ids at /id in 2xx bodies)"],
        "2 executions",
        &[1, 2, 3, 4],
    )];
    result.timeline = vec!["key c0e76a12 = c0e76a12-f24a-4e48-8aef-7fbca005536d".into()];
    result.exchanges = (1..=5)
        .map(|n| {
            let mut e = exchange(
                n,
                "key c0e76a12",
                if n < 5 { 1.0 + n as f64 * 0.1 } else { 9.0 },
                if n < 5 { 4.0 } else { 1.5 },
                request("POST", "/api/payments", Some(KEY), PAYMENT),
                Some(response(
                    if n == 3 { 409 } else { 201 },
                    "application/json",
                    b"{\"id\":\"pay_1\"}",
                )),
            );
            e.role = if n < 5 {
                e.release_us = Some(2_000.0 + n as f64 * 7.0);
                Role::nth("key c0e76a12 burst", n, 4)
            } else {
                Role::nth("key c0e76a12 late retry", 1, 1)
            };
            e
        })
        .collect();
    let mut run = run(vec![result]);
    run.suite = "stress".into();
    run.context = vec!["2000 keys × 8 duplicates, 64 in flight".into()];
    let page = html::render_stress(
        &run,
        &stress_view(&statuses, &released),
        &[],
        &as_file(Format::Html),
    );
    parse_page(&page);
    golden("html/stress.html", &page);
}

/// The client page: each scenario's attempts with whether a retry kept the key and payload.
#[test]
fn client_page_matches_its_golden() {
    let attempt =
        |start_ms: f64, status: Option<u16>, key: Sameness, payload: Sameness| LaneAttempt {
            op: 1,
            operation: true,
            start_ms,
            duration_ms: 3.0,
            status,
            key,
            payload,
        };
    let run_of = |duration_ms: f64, exit: &str| LaneRun {
        run: 1,
        start_ms: 0.0,
        duration_ms,
        exit: exit.into(),
        success: exit == "exit 0",
    };
    let lanes = [
        Lane {
            scenario: "lost-response".into(),
            what: "the first attempt is committed, then its connection is closed without an answer"
                .into(),
            operations: 1,
            attempts: vec![
                attempt(40.0, None, Sameness::First, Sameness::First),
                attempt(250.0, Some(201), Sameness::Changed, Sameness::Same),
            ],
            runs: vec![run_of(270.0, "exit 0")],
            payments: 2,
        },
        Lane {
            scenario: "retry-after-503".into(),
            what: "the first attempt gets 503 with Retry-After: 2 (nothing committed)".into(),
            operations: 1,
            attempts: vec![
                attempt(40.0, Some(503), Sameness::First, Sameness::First),
                attempt(2050.0, Some(201), Sameness::Same, Sameness::Same),
            ],
            runs: vec![run_of(2080.0, "exit 0")],
            payments: 1,
        },
    ];
    let mut lost = probe(
        "client-lost-response",
        "client",
        Outcome::Fail,
        "every retry carries the first attempt's key: expected Idempotency-Key: \"k1\", got #2 Idempotency-Key: \"k2\"",
    );
    lost.checks = vec![check(
        "same-key",
        "every retry carries the first attempt's key",
        Severity::Critical,
        false,
        &["Idempotency-Key: \"k1\""],
        "#2 Idempotency-Key: \"k2\"",
        &[1, 2],
    )];
    let mut report = run(vec![
        lost,
        probe(
            "client-retry-after",
            "client",
            Outcome::Pass,
            "3 checks passed",
        ),
    ]);
    report.target = "client: python3 client.py".into();
    report.label = "client".into();
    let page = html::render_client(
        &report,
        &lanes.iter().collect::<Vec<_>>(),
        &as_file(Format::Html),
    );
    parse_page(&page);
    golden("html/client.html", &page);
}

/// The `--openapi` page: one section per operation, the operations that could not be checked
/// after them, and anchors kept apart by operation.
#[test]
fn operations_page_matches_its_golden() {
    let (a, b) = (
        run(vec![mixed().probes.remove(2)]),
        run(vec![mixed().probes.remove(0)]),
    );
    let summary = Summary::of(&[a.probes.clone(), b.probes.clone()].concat());
    let page = html::render_operations(
        "idem-check · payments.yaml",
        &["payments.yaml (OpenAPI 3.1.0) · 2 operations · idem-check 0.1.0".into()],
        &summary,
        4690.0,
        &[
            (
                "createPayment · POST /payments · Idempotency-Key (required)".into(),
                &a,
            ),
            (
                "createRefund · POST /refunds · Idempotency-Key (optional)".into(),
                &b,
            ),
        ],
        &[(
            "Not checked",
            vec!["createPayout POST /payouts — no request body example or schema".into()],
        )],
        &as_file(Format::Html),
    );
    let (elements, _) = parse_page(&page);
    let ids: Vec<&str> = elements.iter().filter_map(|e| e.attr("id")).collect();
    assert!(
        ids.contains(&"o1-replay-identity") && ids.contains(&"o2-first-request"),
        "{ids:?}"
    );
    golden("html/operations.html", &page);
}

/// A probe with 300 exchanges of 100 KB bodies: the page stays within its bound, says what it
/// left out, and keeps the transcripts the FAIL's checks cite (failures spend the budget first).
#[test]
fn the_page_stays_bounded_and_keeps_the_failure_s_evidence() {
    let mut report = mixed();
    let big = vec![b'x'; 100_000];
    let mut noisy = report.probes[0].clone();
    noisy.exchanges = (1..=300)
        .map(|n| {
            exchange(
                n,
                &format!("retry {n}/300"),
                n as f64,
                1.0,
                request("POST", "/api/payments", Some(KEY), &big),
                Some(response(201, "application/json", &big)),
            )
        })
        .collect();
    report.probes.insert(0, noisy);
    let page = html::render(&report, &as_file(Format::Html));
    assert!(page.len() < 1024 * 1024, "{} bytes", page.len());
    assert!(page.contains("transcript left out"));
    assert!(page.contains("of the evidence left out to keep the page within its size bound"));
    let (elements, _) = parse_page(&page);
    let dumped = |id: &str| {
        let at = elements
            .iter()
            .position(|e| e.attr("id") == Some(id))
            .unwrap();
        elements[at + 1..]
            .iter()
            .take_while(|e| e.name != "details")
            .any(|e| e.attr("class") == Some("dump"))
    };
    assert!(dumped("replay-identity-x2") && dumped("replay-identity-x3"));
}
