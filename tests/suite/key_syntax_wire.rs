//! The key-syntax probes put exactly the specified bytes on the wire. A raw TCP listener on
//! 127.0.0.1:0 records every request head that arrives and answers 201 with a fresh id; the
//! test then reads the `Idempotency-Key` field lines out of those heads and checks each case of
//! the catalog byte for byte — and that the report's evidence shows the same bytes that arrived.

use crate::common;

use std::sync::{Arc, Mutex};

use idem_check::config::{Config, RunOptions, TargetSpec};
use idem_check::http::exchange::Exchange;
use idem_check::report::RunReport;
use idem_check::suite::Suite;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Request heads in arrival order, bytes exactly as received.
type Heads = Arc<Mutex<Vec<Vec<u8>>>>;

/// Accepts connections forever; records each request head and answers 201 `{"id":"r<n>"}`.
async fn recorder() -> (String, Heads) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let heads: Heads = Arc::default();
    let seen = heads.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let head_end = loop {
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                };
                let head = buf[..head_end].to_vec();
                let length = field_lines(&head, "content-length")
                    .first()
                    .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                while buf.len() < head_end + length {
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let n = {
                    let mut heads = seen.lock().expect("lock");
                    heads.push(head);
                    heads.len()
                };
                let body = format!("{{\"id\":\"r{n}\"}}");
                let response = format!(
                    "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(response.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    (base, heads)
}

/// The values of every field line named `name` in a request head, in order, bytes exact (the
/// single space after the colon that both clients write is not part of the value).
fn field_lines(head: &[u8], name: &str) -> Vec<Vec<u8>> {
    head.split(|b| *b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter_map(|line| {
            let colon = line.iter().position(|b| *b == b':')?;
            let (n, v) = line.split_at(colon);
            n.eq_ignore_ascii_case(name.as_bytes()).then(|| {
                let v = &v[1..];
                v.strip_prefix(b" ").unwrap_or(v).to_vec()
            })
        })
        .collect()
}

/// Every probe of the key-syntax group, in catalog order.
async fn run_key_syntax_probes() -> (RunReport, Vec<Vec<u8>>) {
    let ids: Vec<&str> = idem_check::probes::catalog()
        .iter()
        .filter(|p| p.meta.group == idem_check::probes::Group::KeySyntax)
        .map(|p| p.meta.id)
        .collect();
    run_probes(common::run_options().suite, &ids).await
}

async fn run_probes(suite: Suite, probes: &[&str]) -> (RunReport, Vec<Vec<u8>>) {
    let (base, heads) = recorder().await;
    let target = TargetSpec {
        url: format!("{base}/api/payments"),
        headers: vec!["Content-Type: application/json".into()],
        body: Some(r#"{"amountCents":1250,"currency":"EUR","reference":"{{unique}}"}"#.into()),
        id_pointer: Some("/id".into()),
        ..TargetSpec::default()
    };
    let config = Config::build(target, &RunOptions::new(suite), None).expect("valid target");
    let report = common::run_quietly(config, probes).await;
    let heads = heads.lock().expect("lock").clone();
    (report, heads)
}

/// The key lines one exchange sent, as recorded in the report.
fn sent_key_lines(ex: &Exchange) -> Vec<Vec<u8>> {
    ex.request
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("idempotency-key"))
        .map(|h| h.value.clone())
        .collect()
}

fn is_uuid(s: &[u8]) -> bool {
    s.len() == 36
        && s.iter().enumerate().all(|(i, b)| {
            matches!(i, 8 | 13 | 18 | 23) == (*b == b'-') && (*b == b'-' || b.is_ascii_hexdigit())
        })
}

/// `"…"` around `inner`.
fn quoted(inner: &[u8]) -> Vec<u8> {
    [b"\"".as_slice(), inner, b"\"".as_slice()].concat()
}

/// Every key-syntax case of the catalog arrives exactly as specified, and the report's evidence
/// holds the bytes that arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_syntax_probes_put_the_specified_bytes_on_the_wire() {
    let (report, heads) = run_key_syntax_probes().await;
    let exchanges: Vec<(&str, &Exchange)> = report
        .probes
        .iter()
        .flat_map(|p| p.exchanges.iter().map(move |e| (p.id, e)))
        .collect();
    assert_eq!(
        exchanges.len(),
        heads.len(),
        "every recorded exchange reached the listener, and nothing else did"
    );
    let mut arrived = std::collections::BTreeMap::<(&str, &str), Vec<Vec<Vec<u8>>>>::new();
    for ((probe, ex), head) in exchanges.iter().zip(&heads) {
        let lines = field_lines(head, "idempotency-key");
        assert_eq!(
            lines,
            sent_key_lines(ex),
            "{probe} #{} ({}): the evidence differs from the wire",
            ex.n,
            ex.role
        );
        arrived
            .entry((probe, ex.role.label.as_str()))
            .or_default()
            .push(lines);
    }
    let one = |probe: &str, role: &str| -> Vec<Vec<u8>> {
        arrived
            .get(&(probe, role))
            .and_then(|v| v.first())
            .cloned()
            .unwrap_or_else(|| panic!("{probe}: no {role:?} request arrived"))
    };
    let single = |probe: &str, role: &str| -> Vec<u8> {
        let lines = one(probe, role);
        assert_eq!(lines.len(), 1, "{probe} {role}: one key line");
        lines[0].clone()
    };

    assert!(one("missing-key", "without key").is_empty());

    let q = single("quoted-key", "original");
    assert!(q.len() == 38 && q[0] == b'"' && q[37] == b'"' && is_uuid(&q[1..37]));
    assert_eq!(single("quoted-key", "retry"), q);

    let e = single("escaped-key", "original");
    assert!(
        e.starts_with(br#""pay, \"ref\"; v=\\ "#) && e.ends_with(b"\""),
        "{e:?}"
    );
    assert!(is_uuid(&e[e.len() - 37..e.len() - 1]));

    let bare = single("bare-token", "bare token");
    assert!(
        bare.starts_with(b"idem-") && is_uuid(&bare[5..]),
        "{bare:?}"
    );
    assert_eq!(single("bare-token", "quoted String"), quoted(&bare));

    let m = |role| single("malformed-key", role);
    let unterminated = m("unterminated quote");
    assert!(unterminated[0] == b'"' && is_uuid(&unterminated[1..]));
    assert!(m("bad escape").ends_with(b"\\q\""));
    assert!(m("non-ASCII").ends_with("-clé\"".as_bytes()));
    let control = m("control character");
    assert!(control.ends_with(b"\x01\"") && is_uuid(&control[1..37]));
    let list = m("inner list");
    assert!(list.starts_with(b"(\"") && list.ends_with(b"\")"));
    assert!(m("integer").iter().all(u8::is_ascii_digit));
    assert!(m("boolean").starts_with(b"?1;n=\""));
    let bytes = m("byte sequence");
    assert!(bytes.len() > 2 && bytes[0] == b':' && bytes.ends_with(b":"));

    let same = one("duplicate-header", "the same key on two lines");
    assert_eq!(same.len(), 2, "two field lines");
    assert_eq!(same[0], same[1]);
    let two = one("duplicate-header", "two keys on two lines");
    assert_eq!(two.len(), 2, "two field lines");
    assert_ne!(two[0], two[1]);
    for v in same.iter().chain(&two) {
        assert!(v.len() == 38 && is_uuid(&v[1..37]), "{v:?}");
    }

    assert_eq!(single("empty-key", "empty key"), b"\"\"".to_vec());

    let big = single("oversized-key", "8 KiB key");
    assert_eq!(big.len(), 8 * 1024 + 2);
    assert!(big[0] == b'"' && big[big.len() - 1] == b'"');
    assert!(is_uuid(&big[1..37]));
    assert!(big[37..big.len() - 1].iter().all(|b| *b == b'k'));

    let with_param = single("key-parameters", "original");
    assert!(with_param.ends_with(b"\";v=1"), "{with_param:?}");
    let retry = single("key-parameters", "retry");
    assert_eq!(with_param, [retry.as_slice(), b";v=1"].concat());
}

/// A suite that renames the header (`X-Idempotency-Key`) and writes keys bare gets exactly that
/// on the wire, and no `Idempotency-Key` line at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suite_renames_the_header_and_chooses_the_syntax() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("renamed.toml");
    std::fs::write(
        &path,
        "extends = \"ietf-draft-07\"\nheader = \"X-Idempotency-Key\"\nkey-syntax = \"bare\"\n",
    )
    .expect("write suite");
    let suite = idem_check::catalog::load_suite(&path.to_string_lossy()).expect("suite loads");
    let (report, heads) = run_probes(suite, &["quoted-key", "empty-key"]).await;
    let ids: Vec<&str> = report.probes.iter().map(|p| p.id).collect();
    assert_eq!(ids, ["first-request", "quoted-key", "empty-key"]);
    assert_eq!(
        heads.len(),
        9,
        "the pre-flight's two and its three key trials, original, retry, empty key, and a \
         second payment under the empty key the listener accepted"
    );
    for head in &heads {
        assert!(field_lines(head, "idempotency-key").is_empty());
    }
    let heads = &heads[5..8];
    let keys: Vec<Vec<u8>> = heads
        .iter()
        .map(|h| {
            let lines = field_lines(h, "x-idempotency-key");
            assert_eq!(lines.len(), 1);
            lines[0].clone()
        })
        .collect();
    assert!(is_uuid(&keys[0]), "bare: {:?}", keys[0]);
    assert_eq!(keys[1], keys[0]);
    assert!(keys[2].is_empty(), "an empty bare key is an empty value");
}
