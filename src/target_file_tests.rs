//! Tests of the target-file reader (`target.rs`), kept apart so that file stays under 700 lines.

use super::*;

fn env() -> BTreeMap<String, String> {
    [("TOKEN".to_string(), "s3cr3t".to_string())].into()
}

#[test]
fn substitutes_and_collects_secrets() {
    let text = "url = \"http://127.0.0.1:1/p\"\nheaders = [\"Authorization: Bearer ${TOKEN}\"]\n";
    let t = parse("t.toml", text, &env(), Path::new(".")).unwrap();
    assert_eq!(t.headers, vec!["Authorization: Bearer s3cr3t"]);
    assert_eq!(
        t.secret_vars,
        vec![("TOKEN".to_string(), "s3cr3t".to_string())]
    );
}

/// A URL refused for what the environment put into it names `${TOKEN}`, never its value
/// (the input is in fuzz/seeds/target_file/, where the fuzz target found it).
#[test]
fn a_refused_value_shows_the_variable_not_the_secret() {
    for text in ["url = \"${TOKEN}\"\n", "url = \"http://[${TOKEN}\"\n"] {
        let e = parse("t.toml", text, &env(), Path::new(".")).unwrap_err();
        assert!(!e.to_string().contains("s3cr3t"), "{e}");
        assert!(e.message.contains("${TOKEN}"), "{e}");
    }
}

#[test]
fn missing_variable_is_located() {
    let text = "url = \"http://127.0.0.1:1/p\"\nheaders = [\"Authorization: Bearer ${NOPE}\"]\n";
    let e = parse("t.toml", text, &env(), Path::new(".")).unwrap_err();
    assert_eq!((e.line, e.col), (2, 12));
    assert!(e.message.contains("NOPE"));
}

#[test]
fn scope_and_crash_keys_are_read() {
    let text = "url = \"http://127.0.0.1:1/p\"\nsecond-url = \"http://127.0.0.1:1/q\"\nreplicas = [\"http://127.0.0.1:2/p\"]\ninvalid-body = '{}'\n[crash]\nheader = \"X-Test-Crash: 1\"\nlease-wait = \"2s\"\n";
    let t = parse("t.toml", text, &env(), Path::new(".")).unwrap();
    assert_eq!(t.second_url.as_deref(), Some("http://127.0.0.1:1/q"));
    assert_eq!(t.replicas, vec!["http://127.0.0.1:2/p"]);
    assert_eq!(t.invalid_body.as_deref(), Some("{}"));
    assert_eq!(t.crash_header.as_deref(), Some("X-Test-Crash: 1"));
    assert_eq!(t.lease_wait, Some(Duration::from_secs(2)));
    let bad = text.replace("\"2s\"", "\"soon\"");
    let e = parse("t.toml", &bad, &env(), Path::new(".")).unwrap_err();
    assert_eq!(e.line, 7);
}

#[test]
fn behaviour_probe_keys_are_read() {
    let text = "url = \"http://127.0.0.1:1/p\"\nread-url = \"http://127.0.0.1:1/p/count\"\nkey-ttl = \"3s\"\n[store-outage]\ndown-command = \"down\"\nup-command = \"up\"\n";
    let t = parse("t.toml", text, &env(), Path::new(".")).unwrap();
    assert_eq!(t.read_url.as_deref(), Some("http://127.0.0.1:1/p/count"));
    assert_eq!(t.key_ttl, Some(Duration::from_secs(3)));
    assert_eq!(t.store_down_cmd.as_deref(), Some("down"));
    assert_eq!(t.store_up_cmd.as_deref(), Some("up"));
    let bad = text.replace("up-command = \"up\"\n", "");
    assert!(parse("t.toml", &bad, &env(), Path::new(".")).is_err());
}

#[test]
fn the_crash_command_is_read_from_the_restart_table() {
    let text = "url = \"http://127.0.0.1:1/p\"\n[restart]\ncommand = \"up\"\ncrash-command = \"kill -9 7\"\n";
    let t = parse("t.toml", text, &env(), Path::new(".")).unwrap();
    assert_eq!(t.crash_cmd.as_deref(), Some("kill -9 7"));
    assert_eq!(t.restart_cmd.as_deref(), Some("up"));
    let alone = "url = \"http://127.0.0.1:1/p\"\n[restart]\ncrash-command = \"kill -9 7\"\n";
    let e = parse("t.toml", alone, &env(), Path::new(".")).unwrap_err();
    assert!(e.message.contains("command"), "{}", e.message);
}

#[test]
fn connection_keys_are_read() {
    let text = "url = \"https://api.test/p\"\nproxy = \"http://127.0.0.1:3128\"\nresolve = [\"api.test:443:127.0.0.1\"]\n[tls]\ncacert = \"ca.pem\"\ncert = \"c.pem\"\nkey = \"k.pem\"\ninsecure = true\n";
    let t = parse("t.toml", text, &env(), Path::new("dir")).unwrap();
    assert_eq!(t.net.proxy.as_deref(), Some("http://127.0.0.1:3128"));
    assert_eq!(t.net.resolve, vec!["api.test:443:127.0.0.1"]);
    assert_eq!(t.tls.cacert, Some(Path::new("dir").join("ca.pem")));
    assert_eq!(t.tls.key, Some(Path::new("dir").join("k.pem")));
    assert!(t.tls.insecure);
    let bad = text.replace(":443:127.0.0.1", ":443");
    let e = parse("t.toml", &bad, &env(), Path::new(".")).unwrap_err();
    assert_eq!(e.line, 3);
    assert!(e.message.contains("HOST:PORT:ADDR"), "{}", e.message);
}

#[test]
fn a_misplaced_key_is_pointed_to_its_table() {
    let text = "url = \"http://127.0.0.1:1/p\"\nready-url = \"http://127.0.0.1:1/healthz\"\n";
    let e = parse("t.toml", text, &env(), Path::new(".")).unwrap_err();
    assert!(
        e.message
            .contains("`ready-url` belongs in the [restart] table"),
        "{}",
        e.message
    );
    let text =
        "url = \"http://127.0.0.1:1/p\"\n[restart]\ncommand = \"true\"\nhold-header = \"X: 1\"\n";
    let e = parse("t.toml", text, &env(), Path::new(".")).unwrap_err();
    assert!(
        e.message.contains("belongs at the top level"),
        "{}",
        e.message
    );
    let text = "url = \"http://127.0.0.1:1/p\"\nmethd = \"POST\"\n";
    let e = parse("t.toml", text, &env(), Path::new(".")).unwrap_err();
    assert!(!e.message.contains("belongs"), "{}", e.message);
}

/// The keys the old hand-kept list missed are pointed home too, and the key carrier's keys
/// are read.
#[test]
fn every_declared_key_is_pointed_home() {
    for (key, home) in [
        ("read-url", "at the top level"),
        ("key-ttl", "at the top level"),
        ("key-header", "at the top level"),
        ("key-in-body", "at the top level"),
        ("down-command", "in the [store-outage] table"),
    ] {
        let text =
            format!("url = \"http://127.0.0.1:1/p\"\n[crash]\nheader = \"X: 1\"\n{key} = \"x\"\n");
        let e = parse("t.toml", &text, &env(), Path::new(".")).unwrap_err();
        assert!(
            e.message.contains(&format!("`{key}` belongs {home}")),
            "{}",
            e.message
        );
    }
    let text = "url = \"http://127.0.0.1:1/p\"\nkey-in-body = \"/k\"\nkey-syntax = \"token\"\nkey-shape = \"uuid\"\n";
    let t = parse("t.toml", text, &env(), Path::new(".")).unwrap();
    assert_eq!(t.key_in_body.as_deref(), Some("/k"));
    assert_eq!(t.key_syntax.as_deref(), Some("token"));
    assert_eq!(t.key_shape.as_deref(), Some("uuid"));
}

/// `Debug` shows each field as its row in the input table says: a command's secrets
/// masked where they stand, a header's credential by its name, a URL's password.
#[test]
fn debug_masks_each_input_as_its_row_says() {
    let spec = TargetSpec {
        auth_cmd: Some("get-token --key s3cr3t-1".into()),
        hold_header: Some("X-Api-Key: s3cr3t-2".into()),
        second_url: Some("https://u:s3cr3t-3@api.test/q".into()),
        secrets: vec!["s3cr3t-1".into()],
        ..TargetSpec::default()
    };
    let shown = format!("{spec:?}");
    for secret in ["s3cr3t-1", "s3cr3t-2", "s3cr3t-3"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("get-token --key [redacted]"), "{shown}");
    assert!(shown.contains("X-Api-Key: [redacted]"), "{shown}");
}

#[test]
fn unknown_key_is_located() {
    let text = "url = \"http://127.0.0.1:1/p\"\nmethd = \"POST\"\n";
    let e = parse("t.toml", text, &env(), Path::new(".")).unwrap_err();
    assert_eq!(e.line, 2);
}
