//! OpenAPI discovery on small documents written for the purpose (fixtures/openapi/), one per
//! case: versions and formats, where and how the key header is declared, bodies from examples
//! and from schemas, servers, and the documents that must be refused; references to other
//! files, and to URLs served by a small server on 127.0.0.1.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem_check::discover::body::BodySource;
use idem_check::discover::header::Match;
use idem_check::discover::{discover, document, load, Discovery, Location, Operation, Options};
use serde_json::{json, Value};

use common::openapi_fixture as fixture;

fn found_with(name: &str, opts: &Options) -> Discovery {
    let path = fixture(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let spec = document::parse(name, &text).unwrap_or_else(|e| panic!("{e}"));
    discover(&spec, opts).unwrap_or_else(|e| panic!("{e}"))
}

fn found(name: &str) -> Discovery {
    found_with(name, &Options::default())
}

fn op<'a>(d: &'a Discovery, id: &str) -> &'a Operation {
    d.operations
        .iter()
        .find(|o| o.operation_id == id)
        .unwrap_or_else(|| panic!("no operation {id} in {:?}", ids(d)))
}

fn ids(d: &Discovery) -> Vec<&str> {
    d.operations
        .iter()
        .map(|o| o.operation_id.as_str())
        .collect()
}

fn body(o: &Operation) -> Value {
    serde_json::from_str(o.body.text.as_deref().expect("a body")).unwrap()
}

#[test]
fn oas30_yaml_header_by_ref_servers_with_variables_and_example_body() {
    let d = found("oas30-ref-header.yaml");
    assert_eq!(d.version, "OpenAPI 3.0.3");
    assert_eq!(ids(&d), ["createCharge", "createRefund"]);
    assert_eq!(d.without_key, 1, "listCharges takes no key");
    let c = op(&d, "createCharge");
    assert_eq!((c.method.as_str(), c.path.as_str()), ("POST", "/charges"));
    assert_eq!(
        (c.key.header().unwrap(), c.required),
        ("Idempotency-Key", false)
    );
    assert_eq!(
        c.url.as_deref(),
        Ok("https://eu.api.example.com/v2/charges")
    );
    assert_eq!(c.body.source, BodySource::Example);
    assert_eq!(c.body.content_type.as_deref(), Some("application/json"));
    // The enum field keeps its value; the free-form description carries the unique value.
    assert_eq!(
        body(c),
        json!({"amount": 500, "currency": "usd", "description": "{{unique}}"})
    );
    assert_eq!(c.id_pointer.as_deref(), Some("/id"));
    let r = op(&d, "createRefund");
    assert_eq!(r.body.source, BodySource::Schema);
    assert_eq!(body(r), json!({"charge": "{{unique}}"}));
    assert_eq!(r.id_pointer, None);
}

#[test]
fn oas31_json_inline_required_header_and_a_generated_body() {
    let d = found("oas31-inline.json");
    assert_eq!(d.version, "OpenAPI 3.1.0");
    let o = op(&d, "placeOrder");
    assert_eq!(
        (o.key.header().unwrap(), o.required),
        ("idempotency-key", true)
    );
    assert_eq!(o.matched, Match::Name);
    assert_eq!(o.url.as_deref(), Ok("http://127.0.0.1:9/api/orders"));
    assert_eq!(o.body.source, BodySource::Schema);
    // allOf merged (the $ref'd base too), the first non-null oneOf branch taken whole, enum
    // first value, formats, bounds, and the optional nullable string used for the unique value.
    assert_eq!(
        body(o),
        json!({
            "channel": "web",
            "placedAt": "2024-01-01T00:00:00Z",
            "contact": "user@example.com",
            "quantity": 1,
            "kind": "item",
            "sku": "ABC",
            "note": "{{unique}}"
        })
    );
}

#[test]
fn swagger2_path_level_header_overridden_by_the_operation_host_base_path_and_body_parameter() {
    let d = found("swagger2-path-level.yaml");
    assert_eq!(d.version, "Swagger 2.0");
    let o = op(&d, "createTransfer");
    assert_eq!(
        (o.key.header().unwrap(), o.required),
        ("x-idempotency-key", true),
        "the operation's declaration overrides the path-level one"
    );
    assert_eq!(
        o.url.as_deref(),
        Ok("http://payments.example.com/v1/transfers")
    );
    assert_eq!(o.body.source, BodySource::Schema);
    // The smallest amount above an exclusive 0 on the 0.25 step; `to` padded to its
    // minLength, too long to carry the unique value, which goes to the optional memo.
    assert_eq!(
        body(o),
        json!({"amount": 0.25, "to": format!("string{}", "x".repeat(34)), "memo": "{{unique}}"})
    );
    assert_eq!(o.id_pointer.as_deref(), Some("/id"));
}

#[test]
fn every_header_name_counts_and_tracing_ids_do_not() {
    let d = found("aliases.yaml");
    assert_eq!(ids(&d), ["idempotentKey", "paypal", "amazon", "prose"]);
    assert_eq!(op(&d, "idempotentKey").matched, Match::Name);
    assert_eq!(op(&d, "paypal").key.header(), Some("PayPal-Request-Id"));
    assert_eq!(op(&d, "amazon").matched, Match::Alias);
    assert_eq!(op(&d, "prose").matched, Match::Description);
    assert_eq!(
        d.without_key, 2,
        "X-Request-Id and the unnamed custom header"
    );
    let with_custom = found_with(
        "aliases.yaml",
        &Options {
            key_headers: vec!["x-dedup-token".into()],
            ..Options::default()
        },
    );
    assert_eq!(
        op(&with_custom, "custom").key.header(),
        Some("X-Dedup-Token")
    );
    assert_eq!(with_custom.without_key, 1);
}

#[test]
fn tab_indented_yaml_is_read() {
    let d = found("tabs.yaml");
    let o = op(&d, "pay");
    assert_eq!(
        (o.key.header().unwrap(), o.required),
        ("Idempotency-Key", true)
    );
    assert_eq!(o.body.source, BodySource::None);
}

#[test]
fn recursive_schemas_are_cut() {
    let d = found("recursive.json");
    let o = op(&d, "createFolder");
    assert_eq!(body(o), json!({"name": "{{unique}}", "parent": null}));
}

#[test]
fn an_unresolvable_ref_skips_its_operation_with_the_pointer_and_path_parameters_fill() {
    let d = found("bad-ref.yaml");
    assert_eq!(d.skipped.len(), 1);
    let s = &d.skipped[0];
    assert_eq!(s.operation_id, "broken");
    assert_eq!(s.pointer, "/paths/~1broken/post");
    assert!(
        s.reason.contains("#/components/parameters/Missing")
            && s.reason.contains("/paths/~1broken/post/parameters/0"),
        "{}",
        s.reason
    );
    let c = op(&d, "capture");
    assert_eq!(c.unfilled, ["charge_id"]);
    assert!(
        c.url
            .as_ref()
            .unwrap_err()
            .contains("--path-param charge_id=VALUE"),
        "{:?}",
        c.url
    );
    let given = found_with(
        "bad-ref.yaml",
        &Options {
            path_params: BTreeMap::from([("charge_id".to_string(), "ch_9".to_string())]),
            ..Options::default()
        },
    );
    assert_eq!(
        op(&given, "capture").url.as_deref(),
        Ok("https://api.example.com/customers/cus_123/charges/ch_9/captures")
    );
}

#[test]
fn base_url_overrides_servers() {
    let d = found_with(
        "oas30-ref-header.yaml",
        &Options {
            base_url: Some("http://127.0.0.1:8080/".into()),
            ..Options::default()
        },
    );
    assert_eq!(
        op(&d, "createCharge").url.as_deref(),
        Ok("http://127.0.0.1:8080/charges")
    );
}

/// The error a document is refused with.
fn refused(name: &str) -> idem_check::discover::SpecError {
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    match document::parse(name, &text) {
        Err(e) => e,
        Ok(spec) => discover(&spec, &Options::default()).expect_err("refused"),
    }
}

#[test]
fn documents_that_cannot_be_used_are_refused_in_one_line_naming_what_was_found() {
    let e = refused("no-key.yaml");
    assert!(
        e.message.starts_with(
            "no operation takes an idempotency key header or body property (1 operation"
        ),
        "{e}"
    );
    assert!(e.message.contains("--key-header"), "{e}");
    let e = refused("not-openapi.json");
    assert!(
        e.message
            .contains("no \"openapi\" or \"swagger\" field (found an object with keys name, version, dependencies)"),
        "{e}"
    );
    let e = refused("unparseable.yaml");
    assert!(matches!(e.location, Some(Location::Line(4, _))), "{e}");
    for e in [
        refused("no-key.yaml"),
        refused("not-openapi.json"),
        refused("unparseable.yaml"),
    ] {
        assert!(!e.to_string().contains('\n'), "one line: {e}");
    }
}

/// Loads a document as the commands do: read or fetched, its references to other documents
/// followed; bounded so that a hanging reference fails the test instead of stalling it.
async fn loaded(source: &str) -> Discovery {
    let spec = tokio::time::timeout(
        Duration::from_secs(60),
        load::load(source, Duration::from_secs(10), &Default::default()),
    )
    .await
    .expect("loading ends within a minute")
    .unwrap_or_else(|e| panic!("{e}"));
    discover(&spec, &Options::default()).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn relative_file_refs_are_read_next_to_the_file_that_holds_them() {
    let d = loaded(&fixture("external-files.yaml")).await;
    assert_eq!(ids(&d), ["createPayment", "createRefund"]);
    let p = op(&d, "createPayment");
    assert_eq!(
        (p.key.header().unwrap(), p.required),
        ("Idempotency-Key", true),
        "the key header is declared in external/common.yaml"
    );
    // payment.json's own #/definitions, party.yaml next to it, the Note back in the main
    // document; the cycles (Party → Party, Party → payment.json) cut.
    assert_eq!(
        body(p),
        json!({"amount": 1, "currency": "EUR", "payer": {
            "name": "{{unique}}", "note": "string", "parent": null, "last_payment": null}})
    );
    assert_eq!(p.id_pointer.as_deref(), Some("/id"));
    assert!(p.notes.is_empty(), "{:?}", p.notes);
    let r = op(&d, "createRefund");
    assert_eq!(
        body(r),
        json!({"reason": "{{unique}}"}),
        "the receipt left out"
    );
    assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
    assert!(
        r.notes[0].starts_with("$ref \"external/missing.yaml#/Receipt\" left out: ")
            && r.notes[0].contains("external/missing.yaml cannot be read: "),
        "{}",
        r.notes[0]
    );
}

#[tokio::test]
async fn a_key_header_in_a_file_that_cannot_be_read_skips_the_operation_naming_it() {
    let d = loaded(&fixture("external-ref.yaml")).await;
    assert!(d.operations.is_empty());
    let s = &d.skipped[0];
    assert_eq!(s.path, "/a");
    assert!(
        s.reason.starts_with(
            "no idempotency key header among the parameters that could be read; \
             $ref \"common.yaml#/components/parameters/IdempotencyKey\" left out: "
        ),
        "{}",
        s.reason
    );
}

/// What the test server answers on a path.
#[derive(Clone)]
enum Answer {
    /// A status and a body, announced with Content-Length.
    Body(u16, String),
    /// 200 with a body of this many bytes and no Content-Length (read until close).
    Unannounced(usize),
    /// Accepts and never answers.
    Hang,
    /// 302 to this path.
    Redirect(&'static str),
}

/// A small HTTP/1.1 server on an ephemeral 127.0.0.1 port, counting the requests per path.
struct Server {
    base: String,
    hits: Arc<Mutex<BTreeMap<String, usize>>>,
}

async fn serve(routes: impl Fn(&str) -> Answer + Send + Sync + 'static) -> Server {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(Mutex::new(BTreeMap::new()));
    let routes = Arc::new(routes);
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let (routes, hits) = (routes.clone(), counted.clone());
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head);
                let path = text.split(' ').nth(1).unwrap_or("/").to_string();
                *hits.lock().unwrap().entry(path.clone()).or_default() += 1;
                let mut out = String::new();
                let (status, body, announce) = match routes(&path) {
                    Answer::Body(status, body) => (status, body, true),
                    Answer::Redirect(to) => {
                        out = format!("Location: {to}\r\n");
                        (302, String::new(), true)
                    }
                    Answer::Unannounced(n) => (200, "x".repeat(n), false),
                    Answer::Hang => {
                        // Held open until the test's runtime ends.
                        std::future::pending::<()>().await;
                        return;
                    }
                };
                let mut out = format!("HTTP/1.1 {status} X\r\nConnection: close\r\n{out}");
                if announce {
                    out.push_str(&format!("Content-Length: {}\r\n", body.len()));
                }
                out.push_str("\r\n");
                out.push_str(&body);
                let _ = conn.write_all(out.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    Server { base, hits }
}

/// An operation whose body's `extra` property is the schema at `reference`.
fn keyed_operation(id: &str, reference: &str) -> String {
    format!(
        r#"  /{id}:
    post:
      operationId: {id}
      parameters: [{{name: Idempotency-Key, in: header, schema: {{type: string}}}}]
      requestBody:
        content:
          application/json:
            schema:
              type: object
              required: [memo, extra]
              properties:
                memo: {{type: string}}
                extra: {{$ref: '{reference}'}}
      responses: {{'201': {{description: created}}}}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_refs_are_fetched_once_and_those_that_fail_are_notes_on_their_operation() {
    // A port nothing listens on: bound, then released.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let unreachable = format!("http://{}/schemas/x.json", dead.local_addr().unwrap());
    drop(dead);
    let document = Arc::new(Mutex::new(String::new()));
    let served = document.clone();
    let server = serve(move |path| match path {
        "/api/openapi.yaml" => Answer::Body(200, served.lock().unwrap().clone()),
        "/api/schemas/receipt.json" => Answer::Body(
            200,
            r#"{"Receipt": {"type": "object", "required": ["currency"],
                "properties": {"currency": {"$ref": "common.json#/Currency"}}}}"#
                .into(),
        ),
        "/api/schemas/common.json" => Answer::Body(
            200,
            r#"{"Currency": {"type": "string", "enum": ["NOK"]}}"#.into(),
        ),
        "/huge.json" => Answer::Body(200, format!("{{\"a\": \"{}\"}}", "x".repeat(2 << 20))),
        "/huge-unannounced.json" => Answer::Unannounced(2 << 20),
        "/page.html" => Answer::Body(200, "<html><body>Not here</body></html>".into()),
        "/hangs.json" => Answer::Hang,
        "/loop.json" => Answer::Redirect("/loop.json"),
        _ => Answer::Body(404, "not found".into()),
    })
    .await;
    let base = &server.base;
    let mut text = String::from(
        "openapi: 3.1.0\ninfo: {title: remote, version: '1'}\nservers: [{url: http://127.0.0.1:9}]\npaths:\n",
    );
    for (id, reference) in [
        ("resolved", "schemas/receipt.json#/Receipt".to_string()),
        (
            "resolvedAgain",
            format!("{base}/api/schemas/receipt.json#/Receipt"),
        ),
        ("notFound", format!("{base}/gone.json")),
        ("missingPointer", "schemas/receipt.json#/Refund".to_string()),
        ("unreachable", unreachable.clone()),
        ("huge", format!("{base}/huge.json")),
        ("hugeUnannounced", format!("{base}/huge-unannounced.json")),
        ("notJson", format!("{base}/page.html")),
        ("redirectLoop", format!("{base}/loop.json")),
        ("hangs", format!("{base}/hangs.json")),
    ] {
        text.push_str(&keyed_operation(id, &reference));
    }
    *document.lock().unwrap() = text;

    let d = loaded(&format!("{base}/api/openapi.yaml")).await;
    assert_eq!(
        ids(&d),
        [
            "resolved",
            "resolvedAgain",
            "notFound",
            "missingPointer",
            "unreachable",
            "huge",
            "hugeUnannounced",
            "notJson",
            "redirectLoop",
            "hangs"
        ],
        "every operation is listed"
    );
    for id in ["resolved", "resolvedAgain"] {
        let o = op(&d, id);
        assert_eq!(
            body(o),
            json!({"memo": "{{unique}}", "extra": {"currency": "NOK"}}),
            "{id}"
        );
        assert!(o.notes.is_empty(), "{id}: {:?}", o.notes);
    }
    let hits = server.hits.lock().unwrap().clone();
    assert_eq!(hits.get("/api/schemas/receipt.json"), Some(&1), "{hits:?}");
    assert_eq!(hits.get("/api/schemas/common.json"), Some(&1), "{hits:?}");

    let note = |id: &str| {
        let o = op(&d, id);
        assert_eq!(
            body(o),
            json!({"memo": "{{unique}}"}),
            "{id}: extra left out"
        );
        assert_eq!(o.notes.len(), 1, "{id}: {:?}", o.notes);
        o.notes[0].clone()
    };
    let expect = |id: &str, reference: &str, why: &str| {
        let n = note(id);
        assert!(
            n.starts_with(&format!("$ref {reference:?} left out: ")) && n.contains(why),
            "{id}: {n}"
        );
    };
    expect(
        "notFound",
        &format!("{base}/gone.json"),
        "answered 404 Not Found",
    );
    expect(
        "missingPointer",
        "schemas/receipt.json#/Refund",
        &format!("points at nothing in {base}/api/schemas/receipt.json"),
    );
    expect("unreachable", &unreachable, "cannot be fetched");
    expect(
        "huge",
        &format!("{base}/huge.json"),
        "bytes, more than the 1048576 accepted",
    );
    expect(
        "hugeUnannounced",
        &format!("{base}/huge-unannounced.json"),
        "is more than the 1048576 bytes accepted",
    );
    expect(
        "notJson",
        &format!("{base}/page.html"),
        "is not a JSON or YAML document",
    );
    expect(
        "redirectLoop",
        &format!("{base}/loop.json"),
        "too many redirects",
    );
    expect(
        "hangs",
        &format!("{base}/hangs.json"),
        "gave no whole answer within 5 s",
    );
}

/// A key carried in the body is found by a property's name or description (one level down in
/// an envelope too; a form's field by its name), a key header wins over a body property, and
/// `run`/`stress` refuse a body key naming it: their probes place keys in a header.
#[test]
fn keys_in_the_body_are_found_and_named_by_their_carrier() {
    use idem_check::carrier::Place;
    let d = found("body-key.yaml");
    assert_eq!(
        ids(&d),
        [
            "createPayment",
            "sendCommand",
            "createCharge",
            "createRefund"
        ]
    );
    assert_eq!(d.without_key, 1, "request_id for tracing is no key");
    let p = op(&d, "createPayment");
    assert_eq!(p.key, Place::Body("/idempotency_key".into()));
    assert_eq!((p.required, p.matched), (true, Match::Name));
    assert_eq!(p.key.to_string(), "body /idempotency_key");
    assert_eq!(
        p.url.as_deref(),
        Ok("https://api.example.com/v2/payments"),
        "a body key is callable"
    );
    let c = op(&d, "sendCommand");
    assert_eq!(c.key, Place::Body("/meta/dedup".into()));
    assert_eq!((c.required, c.matched), (false, Match::Description));
    assert_eq!(
        op(&d, "createCharge").key,
        Place::Body("idempotencyKey".into())
    );
    let r = op(&d, "createRefund");
    assert_eq!(r.key, Place::Header("Idempotency-Key".into()));
    assert_eq!(
        r.url.as_deref(),
        Ok("https://api.example.com/v2/refunds"),
        "a header key is callable"
    );
}

#[test]
fn discover_says_which_carrier_and_run_sends_a_body_key() {
    let doc = fixture("body-key.yaml");
    let out = common::binary::bin()
        .args(["discover", &doc])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.contains("createPayment") && l.contains("body /idempotency_key")),
        "{table}"
    );
    assert!(table.lines().next().unwrap().contains("KEY IN"), "{table}");
    let out = common::binary::bin()
        .args(["discover", "--format", "json", &doc])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["operations"][0]["carrier"], "body /idempotency_key");
    assert_eq!(v["operations"][0]["header"], Value::Null);
    assert_eq!(v["operations"][3]["carrier"], "header Idempotency-Key");

    // run --openapi sends the key in the body, against a server with Square's layout.
    let server = common::python::start("fixtures/servers/square_body_key.py", &[]);
    let square = format!(
        "{}/fixtures/clients/openapi/square-payments.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let count = format!("{}/count", server.base);
    let out = common::binary::bin()
        .args(["run", "--openapi", &square, "--base-url", &server.base])
        .args(["-H", "Authorization: Bearer ta", "--id-pointer", "/payment/id"])
        .args(["--count-url", &count, "--probe", "replay-identity,missing-key"])
        .args([
            "-d",
            r#"{"source_id":"cnon:ok","amount_money":{"amount":5,"currency":"USD"},"idempotency_key":"k","note":"{{unique}}"}"#,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("key: body /idempotency_key, token"),
        "{stdout}"
    );
    assert!(
        stdout.contains("3 probes: 3 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}");

    // init writes the body carrier as a target file says it.
    let dir = tempfile::tempdir().unwrap();
    let out = common::binary::bin()
        .args([
            "init",
            "--openapi",
            &doc,
            "--operation",
            "createPayment",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let file = std::fs::read_to_string(dir.path().join("createPayment.toml")).unwrap();
    assert!(
        file.contains("key-in-body = \"/idempotency_key\"") && !file.contains("key-header"),
        "{file}"
    );
}
