//! End to end: the reference server describes itself at `/openapi.json`, and
//! `idem-check run --openapi URL/openapi.json -H 'Authorization: Bearer …'` checks both of its
//! idempotent operations from that document alone: all PASS against the correct server, and
//! the race found on the payments operation under the `race` fault.

use crate::common;

use std::time::Duration;

use common::binary::bin_async;
use idem_check::reference::Reference;
use idem_reference_server::Fault;
use serde_json::Value;

/// Runs the binary against `reference` with `extra` arguments; returns the exit code, the
/// JSON report, the JUnit report and the terminal output.
async fn run_openapi(reference: &Reference, extra: &[&str]) -> (i32, Value, String, String) {
    let document = format!("{}/openapi.json", reference.base);
    run_document(reference, &document, extra).await
}

/// [`run_openapi`] with another document describing `reference`.
async fn run_document(
    reference: &Reference,
    document: &str,
    extra: &[&str],
) -> (i32, Value, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let junit = dir.path().join("report.xml");
    let mut args: Vec<String> = vec![
        "run".into(),
        "--openapi".into(),
        document.into(),
        "-H".into(),
        format!("Authorization: Bearer {}", reference.token(0)),
        "--tenant-b-header".into(),
        format!("Authorization: Bearer {}", reference.token(1)),
        "--hold-header".into(),
        idem_check::reference::HOLD_HEADER.into(),
        "--hold-release".into(),
        format!("{}/test-hooks/holds/{{{{hold}}}}/release", reference.base),
        // The reference server keeps keys a day; key-expiry asks this one for 200 ms.
        "--key-ttl-header".into(),
        idem_check::reference::SHORT_KEY_TTL_HEADER.into(),
        "--report-json".into(),
        json.display().to_string(),
        "--report-junit".into(),
        junit.display().to_string(),
        "--color".into(),
        "never".into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let child = bin_async().args(&args).output();
    let out = tokio::time::timeout(Duration::from_secs(240), child)
        .await
        .expect("the run finishes within 4 minutes")
        .expect("the binary runs");
    let terminal = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("no JSON report ({e}); stdout:\n{terminal}\nstderr:\n{stderr}"));
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_str(&report).unwrap(),
        std::fs::read_to_string(&junit).unwrap(),
        terminal,
    )
}

fn outcomes(op: &Value) -> Vec<(String, String)> {
    common::json_report::probe_outcomes(&op["report"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_operations_pass_from_the_servers_own_document() {
    let reference = Reference::start(None).await.unwrap();
    let (code, report, junit, terminal) = run_openapi(&reference, &[]).await;
    reference.stop().await.unwrap();
    assert_eq!(code, 0, "{terminal}");
    assert_eq!(report["schema"], "idem-check.openapi-report/1");
    assert_eq!(report["version"], "OpenAPI 3.1.0");
    let ops = report["operations"].as_array().unwrap();
    let ids: Vec<&str> = ops
        .iter()
        .map(|o| o["operation_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["createPayment", "createPayout"]);
    assert_eq!(ops[0]["body"], "example");
    assert_eq!(ops[1]["body"], "schema", "payouts declare only a schema");
    for op in ops {
        assert_eq!(op["header"], "Idempotency-Key");
        let outcomes = outcomes(op);
        // Everything that can run with these options passes; what needs options not given
        // (a crash hook, a second URL, a restart hook, a replica, a read operation, a
        // store-outage hook) skips and says so.
        for (id, outcome) in &outcomes {
            let expected = match id.as_str() {
                "wedged-key-recovery"
                | "cross-endpoint"
                | "restart-persistence"
                | "cross-replica"
                | "get-ignored"
                | "store-outage" => "SKIP",
                id if common::downstream(id) => "SKIP",
                _ => "PASS",
            };
            assert_eq!(outcome, expected, "{} {id}\n{terminal}", op["operation_id"]);
        }
        assert!(outcomes.len() >= 20, "{outcomes:?}");
        // Executions were counted by the id the document's 201 schema declares.
        let first = &op["report"]["probes"][0];
        assert_eq!(first["id"], "first-request");
        assert!(
            first["effect_basis"]
                .as_str()
                .unwrap_or_default()
                .contains("distinct resource ids at /id"),
            "{first}"
        );
    }
    assert!(
        junit.contains(r#"name="ietf-draft-07.createPayment""#),
        "{junit}"
    );
    assert!(
        junit.contains(r#"name="ietf-draft-07.createPayout""#),
        "{junit}"
    );
    assert!(junit.contains(r#"classname="idem-check.ietf-draft-07.createPayout.enforcement""#));
    assert!(terminal.contains("━━ createPayment · POST /api/payments · Idempotency-Key (required)"));
    // Not a terminal (a CI log): each operation's header and each verdict once.
    let lines = |needle: &str| terminal.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(lines("· suite ietf-draft-07 ·"), 2, "{terminal}");
    assert_eq!(lines(" first-request "), 2, "{terminal}");
    assert_eq!(lines(" replay-identity "), 2, "{terminal}");
    let probes = 2 * idem_check::probes::catalog().len();
    assert!(
        terminal.contains(&format!("2 operations (OpenAPI 3.1.0): {probes} probes:")),
        "{terminal}"
    );
}

/// The server's own document, written to a file in `dir`, with a required `receipt` whose
/// schema is at a URL nothing answers; returns the file and that URL.
async fn document_with_a_dead_reference(
    reference: &Reference,
    dir: &std::path::Path,
) -> (String, String) {
    let mut doc = common::reference_description(reference).await;
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let receipt = format!("http://{}/receipt.json", dead.local_addr().unwrap());
    drop(dead);
    let request = &mut doc["components"]["schemas"]["PaymentRequest"];
    request["properties"]["receipt"] = serde_json::json!({"$ref": receipt});
    request["required"]
        .as_array_mut()
        .unwrap()
        .push("receipt".into());
    let path = dir.join("openapi.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    (path.display().to_string(), receipt)
}

/// A reference that cannot be fetched: both operations are still checked (the receipt left out
/// of the generated bodies), each with a note naming the reference, in the terminal, the JSON
/// report, the JUnit report (a `note` property on the operation's testsuite, and its
/// `<system-out>` line), which stays valid against the schema, the Markdown summary (under
/// the operation's header) and the HTML page (listed after the operations).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_that_cannot_be_fetched_is_a_note_and_the_operations_still_run() {
    let reference = Reference::start(None).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (path, receipt) = document_with_a_dead_reference(&reference, dir.path()).await;
    let (markdown, html) = (dir.path().join("report.md"), dir.path().join("report.html"));
    let (code, report, junit, terminal) = run_document(
        &reference,
        &path,
        &[
            "--base-url",
            &reference.base,
            "--probe",
            "replay-identity",
            "--report-markdown",
            markdown.to_str().unwrap(),
            "--report-html",
            html.to_str().unwrap(),
        ],
    )
    .await;
    reference.stop().await.unwrap();
    assert_eq!(code, 0, "{terminal}");
    let ops = report["operations"].as_array().unwrap();
    assert_eq!(ops.len(), 2, "{terminal}");
    let note = format!("$ref \"{receipt}\" left out: ");
    for op in ops {
        assert_eq!(
            outcomes(op),
            [
                ("first-request".to_string(), "PASS".to_string()),
                ("replay-identity".to_string(), "PASS".to_string())
            ],
            "{terminal}"
        );
        let notes = op["notes"].as_array().unwrap();
        assert!(
            notes.len() == 1 && notes[0].as_str().unwrap().starts_with(&note),
            "{notes:?}"
        );
    }
    assert_eq!(
        terminal.matches(&format!("note: {note}")).count(),
        2,
        "{terminal}"
    );
    let property = format!(
        "<property name=\"note\" value=\"{}",
        note.replace('"', "&quot;")
    );
    assert_eq!(junit.matches(&property).count(), 2, "{junit}");
    assert_eq!(
        junit.matches(&format!("· note: {note}")).count(),
        2,
        "{junit}"
    );
    let markdown = std::fs::read_to_string(&markdown).unwrap();
    assert_eq!(
        markdown.matches(&format!("\n- note: {note}")).count(),
        2,
        "{markdown}"
    );
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(
        html.contains("<h2>Left out of request bodies</h2>"),
        "{html}"
    );
    for id in ["createPayment", "createPayout"] {
        let item = format!("<li>{id} — {}", note.replace('"', "&quot;"));
        assert!(html.contains(&item), "{item} not in {html}");
    }
    let file = dir.path().join("report.xml");
    std::fs::write(&file, &junit).unwrap();
    common::junit_schema::assert_valid(&[file]);
}

/// `stress --openapi` on an operation with a note prints the note and keeps it in its JSON
/// (`notes`), JUnit (`note` property), Markdown (under the header) and HTML (listed after the
/// probe) reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_reports_the_notes_of_its_operation() {
    let reference = Reference::start(None).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (path, receipt) = document_with_a_dead_reference(&reference, dir.path()).await;
    let (json, junit) = (dir.path().join("s.json"), dir.path().join("s.xml"));
    let (markdown, html) = (dir.path().join("s.md"), dir.path().join("s.html"));
    let args = [
        "stress".to_string(),
        "--openapi".into(),
        path,
        "--base-url".into(),
        reference.base.clone(),
        "--operation".into(),
        "createPayment".into(),
        "-H".into(),
        format!("Authorization: Bearer {}", reference.token(0)),
        "--count-url".into(),
        format!("{}/api/payments/count", reference.base),
        "--keys".into(),
        "5".into(),
        "--duplicates".into(),
        "2".into(),
        "--report-json".into(),
        json.display().to_string(),
        "--report-junit".into(),
        junit.display().to_string(),
        "--report-markdown".into(),
        markdown.display().to_string(),
        "--report-html".into(),
        html.display().to_string(),
        "--color".into(),
        "never".into(),
    ];
    let out = tokio::time::timeout(Duration::from_secs(120), bin_async().args(args).output())
        .await
        .expect("stress finishes")
        .expect("the binary runs");
    reference.stop().await.unwrap();
    let explain = common::binary::text(&out);
    assert_eq!(out.status.code(), Some(0), "{explain}");
    let note = format!("$ref \"{receipt}\" left out: ");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("note:        {note}")),
        "{explain}"
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let notes = report["notes"].as_array().unwrap();
    assert!(
        notes.len() == 1 && notes[0].as_str().unwrap().starts_with(&note),
        "{report}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    let property = format!(
        "<property name=\"note\" value=\"{}",
        note.replace('"', "&quot;")
    );
    assert!(xml.contains(&property), "{xml}");
    let markdown = std::fs::read_to_string(&markdown).unwrap();
    assert!(
        markdown.contains(&format!("\n- note: {note}")),
        "{markdown}"
    );
    let html = std::fs::read_to_string(&html).unwrap();
    let item = format!(
        "<h2>Left out of the request body</h2><ul class=\"facts\"><li>{}",
        note.replace('"', "&quot;")
    );
    assert!(html.contains(&item), "{item} not in {html}");
    common::junit_schema::assert_valid(&[junit]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_race_is_found_on_the_payments_operation() {
    let reference = Reference::start(Some(Fault::Race)).await.unwrap();
    let (code, report, _, terminal) = run_openapi(
        &reference,
        &[
            "--operation",
            "createPayment",
            "--probe",
            "first-request",
            "--probe",
            "concurrent-duplicates",
        ],
    )
    .await;
    reference.stop().await.unwrap();
    assert_eq!(code, 4, "{terminal}");
    let ops = report["operations"].as_array().unwrap();
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0]["operation_id"], "createPayment");
    assert_eq!(
        outcomes(&ops[0]),
        [
            ("first-request".to_string(), "PASS".to_string()),
            ("concurrent-duplicates".to_string(), "FAIL".to_string())
        ],
        "{terminal}"
    );
}

/// A group name selects its probes under `--openapi` as it does for a single target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_group_selects_its_probes_on_every_operation() {
    let reference = Reference::start(None).await.unwrap();
    let (code, report, _, terminal) = run_openapi(
        &reference,
        &["--operation", "createPayment", "--probe", "key-syntax"],
    )
    .await;
    reference.stop().await.unwrap();
    assert_eq!(code, 0, "{terminal}");
    // first-request runs first in every run: it is the pre-flight.
    let group: Vec<String> = idem_check::probes::catalog()
        .iter()
        .filter(|p| p.meta.id == "first-request" || p.meta.group.as_str() == "key-syntax")
        .map(|p| p.meta.id.to_string())
        .collect();
    let ran: Vec<String> = outcomes(&report["operations"][0])
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert!(group.len() > 2, "{group:?}");
    assert_eq!(ran, group, "{terminal}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_takes_one_operation_from_the_document() {
    let reference = Reference::start(None).await.unwrap();
    let stress = |extra: &[&str]| {
        let mut args = vec![
            "stress".to_string(),
            "--openapi".into(),
            format!("{}/openapi.json", reference.base),
            "-H".into(),
            format!("Authorization: Bearer {}", reference.token(0)),
            "--keys".into(),
            "20".into(),
            "--duplicates".into(),
            "4".into(),
            "--duration".into(),
            "20s".into(),
            "--color".into(),
            "never".into(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let child = bin_async().args(args).output();
        async move {
            tokio::time::timeout(Duration::from_secs(120), child)
                .await
                .expect("stress finishes")
                .expect("the binary runs")
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("stress.json");
    let both = stress(&[]).await;
    let one = stress(&[
        "--operation",
        "createPayout",
        "--report-json",
        json.to_str().unwrap(),
    ])
    .await;
    let base = reference.base.clone();
    reference.stop().await.unwrap();
    assert_eq!(both.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&both.stderr)
            .contains("stress checks one operation; choose one of createPayment, createPayout"),
        "{}",
        String::from_utf8_lossy(&both.stderr)
    );
    let out = String::from_utf8_lossy(&one.stdout);
    assert_eq!(
        one.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&one.stderr)
    );
    assert!(out.contains("stress  PASS"), "{out}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["target"], format!("POST {base}/api/payouts"));
}

/// `--key-form` applies to every operation of the document as it does to a single target. The
/// reference server takes only RFC 8941 String keys, so with `bare` every operation's
/// pre-flight is refused, and its report says the keys went bare (without the flag they go as
/// Strings and pass).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_form_applies_to_every_operation() {
    let reference = Reference::start(None).await.unwrap();
    let (code, report, _, terminal) = run_openapi(
        &reference,
        &["--key-form", "bare", "--probe", "replay-identity"],
    )
    .await;
    reference.stop().await.unwrap();
    // The probes the refused pre-flight kept from running are errors: exit 3.
    assert_eq!(code, 3, "{terminal}");
    let ops = report["operations"].as_array().unwrap();
    assert_eq!(ops.len(), 2, "{terminal}");
    for op in ops {
        let context = op["report"]["context"].to_string();
        assert!(
            context.contains("keys sent bare"),
            "{}: {context}",
            op["operation_id"]
        );
        let first = &outcomes(op)[0];
        assert_eq!(
            (first.0.as_str(), first.1.as_str()),
            ("first-request", "FAIL"),
            "{terminal}"
        );
    }
}

/// `init` writes target files that run as written: the command its header suggests, run from
/// where `init` ran with the credential it names set, checks the operation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_writes_targets_that_run_as_written() {
    let reference = Reference::start(None).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let document = format!("{}/openapi.json", reference.base);
    let init = bin_async()
        .current_dir(dir.path())
        .args(["init", "--openapi", &document, "--out", "targets"])
        .output()
        .await
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    let text = std::fs::read_to_string(dir.path().join("targets/createPayment.toml")).unwrap();
    let suggested = text
        .lines()
        .find_map(|l| l.strip_prefix("#   idem-check "))
        .unwrap_or_else(|| panic!("no suggested command in\n{text}"));
    assert_eq!(suggested, "run --target targets/createPayment.toml");
    let run = bin_async()
        .current_dir(dir.path())
        .args(suggested.split(' '))
        .args(["--probe", "replay-identity", "--color", "never"])
        .env("BEARERAUTH_TOKEN", reference.token(0))
        .output();
    let run = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the run finishes within 2 minutes")
        .unwrap();
    reference.stop().await.unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("2 probes: 2 passed"), "{stdout}");
}
