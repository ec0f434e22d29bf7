//! The real binary on OpenAPI documents: `discover` output, `init` target files, and the
//! one-line errors (exit 2) for documents that cannot be used.

use crate::common;

use std::collections::BTreeMap;
use std::process::Output;

use common::binary::bin;
use common::openapi_fixture as fixture;

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn discover_prints_a_table_and_json() {
    let o = run(&["discover", &fixture("oas30-ref-header.yaml")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "METHOD  PATH      OPERATION     KEY IN           KEY       BODY"
    );
    assert_eq!(
        lines[1],
        "POST    /charges  createCharge  Idempotency-Key  optional  example"
    );
    assert_eq!(
        lines[2],
        "POST    /refunds  createRefund  Idempotency-Key  optional  schema"
    );
    assert!(out.contains("2 operations take an idempotency key (OpenAPI 3.0.3); 1 without one"));

    let o = run(&[
        "discover",
        "--format",
        "json",
        &fixture("swagger2-path-level.yaml"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "idem-check.discover/1");
    assert_eq!(
        v["operations"],
        serde_json::json!([{"method": "POST", "path": "/transfers", "operation_id": "createTransfer",
                            "header": "x-idempotency-key", "carrier": "header x-idempotency-key",
                            "required": true, "body": "schema",
                            "notes": []}])
    );
}

#[test]
fn skipped_operations_are_reported_on_stderr_with_their_pointer() {
    let o = run(&["discover", &fixture("bad-ref.yaml")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("capture"));
    assert!(
        stderr(&o).contains("skipped POST /broken (broken) at /paths/~1broken/post: $ref \"#/components/parameters/Missing\""),
        "{}",
        stderr(&o)
    );
}

/// References to other files are read next to the file holding them; one that cannot be read
/// leaves its part out and the operation is still listed, or skipped when the key header may be
/// what is missing.
#[test]
fn other_files_are_read_and_a_missing_one_is_not_an_error() {
    let o = run(&["discover", &fixture("external-files.yaml")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("POST    /payments  createPayment  Idempotency-Key  required  schema")
            && out.contains("POST    /refunds   createRefund   Idempotency-Key  required  schema"),
        "{out}"
    );
    assert!(
        stderr(&o).contains("note on POST /refunds (createRefund): $ref \"external/missing.yaml#/Receipt\" left out"),
        "the unreadable ref is named on its operation: {}",
        stderr(&o)
    );
    let o = run(&[
        "discover",
        &fixture("external-files.yaml"),
        "--format",
        "json",
    ]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    let notes = &json["operations"][1]["notes"];
    assert_eq!(notes.as_array().map(Vec::len), Some(1), "{json}");
    let o = run(&["discover", &fixture("external-ref.yaml")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "skipped POST /a (post-a) at /paths/~1a/post: no idempotency key header among the \
             parameters that could be read; $ref \"common.yaml#/components/parameters/IdempotencyKey\" \
             left out: "
        ),
        "{}",
        stderr(&o)
    );
}

#[test]
fn unusable_documents_are_one_line_errors_with_exit_2() {
    for (name, expected) in [
        (
            "no-key.yaml",
            "no operation takes an idempotency key header",
        ),
        ("not-openapi.json", "not an OpenAPI or Swagger document"),
        ("unparseable.yaml", "unparseable.yaml:4:"),
        ("does-not-exist.yaml", "cannot read the API description"),
    ] {
        let o = run(&["discover", &fixture(name)]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{name}: one line: {err}");
        assert!(err.starts_with("idem-check: error: "), "{name}: {err}");
        assert!(err.contains(expected), "{name}: {err}");
    }
}

#[test]
fn options_for_a_document_need_one() {
    let o = run(&["run", "http://127.0.0.1:9/x", "--path-param", "a=b"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("need --openapi"), "{}", stderr(&o));
    // One --key-header names the run's key header; several are only for a document.
    let o = run(&[
        "run",
        "http://127.0.0.1:9/x",
        "--key-header",
        "A-Key",
        "--key-header",
        "B-Key",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("target file's key-header"),
        "{}",
        stderr(&o)
    );
    let o = run(&["discover", &fixture("aliases.yaml"), "--operation", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("those that do: idempotentKey, paypal, amazon, prose"));
}

#[test]
fn init_writes_one_target_file_per_operation_that_loads() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("targets");
    let o = run(&[
        "init",
        "--openapi",
        &fixture("oas30-ref-header.yaml"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let charge = out.join("createCharge.toml");
    let text = std::fs::read_to_string(&charge).unwrap();
    assert!(
        text.contains("# security scheme bearerAuth (http bearer): set BEARERAUTH_TOKEN"),
        "{text}"
    );
    assert!(out.join("createRefund.toml").exists());
    // The command it suggests names the file where it was written, and the commented-out
    // options use the operation's own base URL: no variable the file never explains.
    assert!(
        text.contains(&format!("#   idem-check run --target {}", charge.display())),
        "{text}"
    );
    assert!(!text.contains("${BASE_URL}"), "{text}");
    assert!(
        text.contains("# url = \"https://eu.api.example.com/v2/count\""),
        "{text}"
    );
    assert!(text.contains("set TENANT_B_TOKEN"), "{text}");
    let env = BTreeMap::from([("BEARERAUTH_TOKEN".to_string(), "tok-123".to_string())]);
    let t = idem_check::target::load(&charge, &env).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.url, "https://eu.api.example.com/v2/charges");
    assert_eq!(t.method.as_deref(), Some("POST"));
    assert_eq!(t.key_header.as_deref(), Some("Idempotency-Key"));
    assert_eq!(
        t.headers,
        [
            "Content-Type: application/json",
            "Authorization: Bearer tok-123"
        ]
    );
    assert_eq!(
        t.body.as_deref(),
        Some(r#"{"amount":500,"currency":"usd","description":"{{unique}}"}"#)
    );
    assert_eq!(t.id_pointer.as_deref(), Some("/id"));
    assert!(t
        .secret_vars
        .contains(&("BEARERAUTH_TOKEN".to_string(), "tok-123".to_string())));

    // What the document does not say becomes a placeholder the environment must fill.
    let o = run(&[
        "init",
        "--openapi",
        &fixture("bad-ref.yaml"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let capture = out.join("capture.toml");
    let missing = idem_check::target::load(&capture, &BTreeMap::new()).unwrap_err();
    assert!(missing.to_string().contains("CHARGE_ID"), "{missing}");
    let env = BTreeMap::from([("CHARGE_ID".to_string(), "ch_1".to_string())]);
    let t = idem_check::target::load(&capture, &env).unwrap();
    assert_eq!(
        t.url,
        "https://api.example.com/customers/cus_123/charges/ch_1/captures"
    );
}

/// `--key-in-body` with `--openapi` moves the key from the header the document names into the
/// body: the body carrier is judged on its own (its field checked against the document's body),
/// never reported as clashing with a `--key-header` the user did not give.
#[test]
fn key_in_body_replaces_the_documents_header() {
    let spec = fixture("oas30-ref-header.yaml");
    for (field, syntax, wanted) in [
        (
            "/amount",
            "ietf",
            "an RFC 8941 String is the syntax of a header field; a key in the body (--key-in-body /amount) is a token",
        ),
        ("/nope/key", "token", "is JSON with no object at \"/nope\""),
    ] {
        let o = run(&[
            "run",
            "--openapi",
            &spec,
            "--base-url",
            "http://127.0.0.1:1",
            "--key-in-body",
            field,
            "--key-syntax",
            syntax,
        ]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(wanted), "{wanted:?} missing from {err}");
        assert!(!err.contains("give either"), "{err}");
    }
}
