use super::parse::{body_has_field, BodyField};
use super::*;

fn default_options() -> RunOptions {
    RunOptions::new(crate::catalog::load_suite(crate::suite::DEFAULT_SUITE).unwrap())
}

/// `--crash-cmd` kills the target, which only `--restart-cmd` brings back: alone it is
/// refused naming both before anything is sent; with it, the run carries a kill.
#[test]
fn a_crash_command_needs_the_restart_command() {
    let target = |restart: Option<&str>| TargetSpec {
        url: "http://127.0.0.1:9/op".into(),
        crash_cmd: Some("kill -9 1234".into()),
        restart_cmd: restart.map(str::to_string),
        ..TargetSpec::default()
    };
    let err = Config::build(target(None), &default_options(), None)
        .err()
        .map(|e| format!("{e:#}"))
        .expect("refused");
    assert!(err.contains("--crash-cmd needs --restart-cmd"), "{err}");
    let config = Config::build(target(Some("true")), &default_options(), None).unwrap();
    let kill = config.kill.expect("a kill");
    assert_eq!(kill.describe(), "`kill -9 1234`");
}

/// A quiet window is waited out by every probe that left a request unfinished: 0 would
/// count before a late execution could land, an hour would be a hang.
#[test]
fn quiet_window_is_bounded() {
    let build = |ms: u64| {
        let target = TargetSpec {
            url: "http://127.0.0.1:9/op".into(),
            quiet_window: Some(Duration::from_millis(ms)),
            ..TargetSpec::default()
        };
        Config::build(target, &default_options(), None).map_err(|e| format!("{e:#}"))
    };
    assert_eq!(build(500).unwrap().quiet_window, Duration::from_millis(500));
    for ms in [0, 3_600_000] {
        let err = build(ms).err().expect("refused");
        assert!(
            err.contains(inputs::QUIET_WINDOW.flag) && err.contains("at most 1m"),
            "{err}"
        );
    }
}

/// A value refused for what the environment put into it does not show the secret: the
/// error names the key and its line, the value masked (the fuzz target `target_file`
/// checks every error for it).
#[test]
fn an_error_never_shows_a_secret_from_the_environment() {
    let env = [("TOKEN".to_string(), "s3cr3t-Tok3n".to_string())].into();
    for text in [
        "url = \"http://127.0.0.1:9/\"\nheaders = [\"Bad Header: ${TOKEN}\"]\n",
        "url = \"http://127.0.0.1:9/\"\n[counter]\nurl = \"ftp://h/${TOKEN}\"\n",
    ] {
        let base = std::path::Path::new(".");
        let target = crate::target::parse("t.toml", text, &env, base).unwrap();
        let err = format!(
            "{:#}",
            Config::build(target, &default_options(), None)
                .err()
                .unwrap()
        );
        assert!(!err.contains("s3cr3t"), "{err}");
        assert!(err.contains("t.toml:"), "{err}");
    }
}

/// A release needs a hold whose header and URL both name it, and a bounded minimum.
#[test]
fn hold_release_is_checked_against_the_hold() {
    let build = |hold: Option<&str>, release: Option<&str>, at_least: Option<u64>| {
        let target = TargetSpec {
            url: "http://127.0.0.1:9/op".into(),
            hold_header: hold.map(Into::into),
            hold_release: release.map(Into::into),
            hold_at_least: at_least.map(Duration::from_millis),
            ..TargetSpec::default()
        };
        Config::build(target, &default_options(), None).map_err(|e| format!("{e:#}"))
    };
    let release = Some("http://127.0.0.1:9/holds/{{hold}}/release");
    let named = Some("X-Hold: {{hold}}");
    let ok = build(named, release, Some(300)).unwrap();
    let hold = ok.hold_release.unwrap();
    assert_eq!(hold.at_least, Duration::from_millis(300));
    let timed = build(Some("X-Test-Delay-Ms: 1500"), None, None).unwrap();
    assert!(timed.hold_header.is_some() && timed.hold_release.is_none());
    assert_eq!(hold.url_for("h1"), "http://127.0.0.1:9/holds/h1/release");
    let refused = [
        (build(None, release, None), "needs --hold-header"),
        (
            build(Some("X-Hold: 1"), release, None),
            "in the --hold-header value",
        ),
        (
            build(named, Some("http://127.0.0.1:9/release"), None),
            "must contain {{hold}}",
        ),
        (
            build(named, None, Some(300)),
            "--hold-at-least needs --hold-release",
        ),
        (build(named, release, Some(60_000)), "at most 30s"),
        (
            build(named, None, None),
            "--hold-header with {{hold}} needs --hold-release",
        ),
    ];
    for (result, wanted) in refused {
        let err = result.err().expect("refused");
        assert!(err.contains(wanted), "{err}");
    }
}

/// The carrier follows the key header: ietf for the draft's header only, token for any
/// other, unless --key-syntax says; a shape is kept.
#[test]
fn the_key_carrier_defaults_by_header() {
    let build = |header: Option<&str>, syntax: Option<&str>, shape: Option<&str>| {
        let target = TargetSpec {
            url: "http://127.0.0.1:9/op".into(),
            key_header: header.map(Into::into),
            key_syntax: syntax.map(Into::into),
            key_shape: shape.map(Into::into),
            ..TargetSpec::default()
        };
        Config::build(target, &default_options(), None).map(|c| c.key_carrier.to_string())
    };
    assert_eq!(
        build(None, None, None).unwrap(),
        "header Idempotency-Key, ietf"
    );
    assert_eq!(
        build(Some("idempotency-key"), None, None).unwrap(),
        "header idempotency-key, ietf"
    );
    assert_eq!(
        build(Some("Cko-Idempotency-Key"), None, None).unwrap(),
        "header Cko-Idempotency-Key, token"
    );
    assert_eq!(
        build(Some("X-Key"), Some("ietf"), Some("uuid")).unwrap(),
        "header X-Key, ietf, uuid"
    );
    assert!(build(None, Some("quoted"), None).is_err());
}

#[test]
fn a_body_carrier_needs_its_field_in_the_body() {
    let has = |body: Option<&str>, pointer: &str| body_has_field(body, pointer, "-d");
    let json = Some(r#"{"amount":5,"meta":{"key":"{{unique}}"}}"#);
    assert_eq!(has(json, "/meta/key"), Ok(BodyField::Held));
    assert_eq!(has(json, "/key"), Ok(BodyField::Added));
    assert_eq!(has(json, "/meta/other"), Ok(BodyField::Added));
    assert!(has(json, "/amount/key")
        .unwrap_err()
        .contains("no object at \"/amount\""));
    assert!(has(json, "/none/key")
        .unwrap_err()
        .contains("no object at \"/none\""));
    assert!(has(json, "key").unwrap_err().contains("JSON pointer"));
    assert!(has(Some("amount=5&idempotency_key={{uuid}}"), "idempotency_key").is_ok());
    assert!(has(Some("amount=5&idempotency_key=x"), "/idempotency_key").is_ok());
    assert!(has(Some("amount=5"), "key")
        .unwrap_err()
        .contains("(it has amount)"));
    assert!(has(Some("just text"), "/k")
        .unwrap_err()
        .contains("neither JSON nor a form"));
    assert!(has(None, "/k").unwrap_err().contains("no request body"));
}

#[test]
fn placeholders_make_payloads_unique_per_variant() {
    let t = BodyTemplate::new(r#"{"ref":"{{unique}}"}"#);
    assert_ne!(t.render("u1", 0), t.render("u1", 1));
    assert_eq!(t.render("u1", 0), br#"{"ref":"u1"}"#.to_vec());
    assert!(t.varies());
}

#[test]
fn json_without_placeholder_is_still_varied() {
    let t = BodyTemplate::new(r#"{"amount":5,"ref":"x"}"#);
    let a: serde_json::Value = serde_json::from_slice(&t.render("u1", 0)).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&t.render("u1", 1)).unwrap();
    assert_eq!(a["ref"], "x-u1");
    assert_ne!(a, b);
    let plain = BodyTemplate::new("amount=5");
    assert!(!plain.varies());
}

#[test]
fn an_invalid_payload_is_derived_from_a_json_object_only() {
    let t = BodyTemplate::new(r#"{"amountCents":5,"reference":"{{unique}}"}"#);
    let bad = t.invalid_variant().unwrap();
    assert_eq!(
        bad.render("u1", 0),
        br#"{"amountCents":"not-a-number","reference":"u1"}"#.to_vec()
    );
    let first_string = BodyTemplate::new(r#"{"ref":"x","n":1}"#);
    assert_eq!(
        first_string.invalid_variant().unwrap().text,
        r#"{"ref":null,"n":1}"#
    );
    assert!(BodyTemplate::new("{}").invalid_variant().is_none());
    assert!(BodyTemplate::new("amount=5").invalid_variant().is_none());
}

#[test]
fn headers_parse_like_curl() {
    let flag = Origins::default();
    let h = parse_header(
        "Authorization: Bearer abc",
        flag.input(inputs::HEADERS.flag),
    )
    .unwrap();
    assert_eq!(h.name, "Authorization");
    assert_eq!(h.value, b"Bearer abc");
    assert!(parse_header("no colon", flag.input(inputs::HEADERS.flag)).is_err());
    assert!(parse_header("bad name: x", flag.input(inputs::HEADERS.flag)).is_err());
}
