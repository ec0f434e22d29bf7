//! OpenAPI discovery on small documents written for the purpose (fixtures/openapi/), one per
//! case: versions and formats, where and how the key header is declared, bodies from examples
//! and from schemas, servers, and the documents that must be refused.

mod common;

use std::collections::BTreeMap;

use idem_check::discover::body::BodySource;
use idem_check::discover::header::Match;
use idem_check::discover::{discover, load, Discovery, Location, Operation, Options};
use serde_json::{json, Value};

use common::openapi_fixture as fixture;

fn found_with(name: &str, opts: &Options) -> Discovery {
    let path = fixture(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let spec = load::parse(name, &text).unwrap_or_else(|e| panic!("{e}"));
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
    assert_eq!((c.header.as_str(), c.required), ("Idempotency-Key", false));
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
    assert_eq!((o.header.as_str(), o.required), ("idempotency-key", true));
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
        (o.header.as_str(), o.required),
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
    assert_eq!(op(&d, "paypal").header, "PayPal-Request-Id");
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
    assert_eq!(op(&with_custom, "custom").header, "X-Dedup-Token");
    assert_eq!(with_custom.without_key, 1);
}

#[test]
fn tab_indented_yaml_is_read() {
    let d = found("tabs.yaml");
    let o = op(&d, "pay");
    assert_eq!((o.header.as_str(), o.required), ("Idempotency-Key", true));
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
    match load::parse(name, &text) {
        Err(e) => e,
        Ok(spec) => discover(&spec, &Options::default()).expect_err("refused"),
    }
}

#[test]
fn documents_that_cannot_be_used_are_refused_in_one_line_naming_what_was_found() {
    let e = refused("no-key.yaml");
    assert!(
        e.message
            .starts_with("no operation takes an idempotency key header (1 operation"),
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
    let e = refused("external-ref.yaml");
    assert_eq!(
        e.location,
        Some(Location::Pointer("/paths/~1a/post/parameters/0".into()))
    );
    assert!(e.message.contains("common.yaml"), "{e}");
    for e in [
        refused("no-key.yaml"),
        refused("not-openapi.json"),
        refused("unparseable.yaml"),
        refused("external-ref.yaml"),
    ] {
        assert!(!e.to_string().contains('\n'), "one line: {e}");
    }
}
