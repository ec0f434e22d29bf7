//! Reaching a deployment the way staging APIs are reached: behind a private CA, with mutual TLS,
//! through a forward proxy, at a fixed address. The reference server runs in-process behind a
//! TLS front (certificates made here with rcgen) and the `idem-check` binary runs against it
//! with the connection options; a small forward proxy (CONNECT and absolute-form) logs what went
//! through it. Every test runs the ordinary client (first-request), the raw client
//! (malformed-key) and a burst (concurrent-duplicates).

use crate::common;

use std::path::Path;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::binary::bin_async;
use idem_check::config::{Config, TargetSpec};
use idem_check::outcome::Outcome;
use idem_check::reference::Reference;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const PROBES: [&str; 3] = ["first-request", "malformed-key", "concurrent-duplicates"];

/// A CA, a server certificate it signed, and a client certificate signed by a second CA, all
/// written as PEM files in `dir`.
struct Pki {
    dir: tempfile::TempDir,
    server_chain: String,
    server_key: String,
    client_ca: String,
}

impl Pki {
    fn new() -> Pki {
        let ca = |name: &str| {
            let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            p.distinguished_name
                .push(rcgen::DnType::CommonName, name.to_string());
            CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
        };
        let leaf = |names: &[&str], issuer: &CertifiedIssuer<'_, KeyPair>| {
            let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            let params = CertificateParams::new(names).unwrap();
            let key = KeyPair::generate().unwrap();
            let cert = params.signed_by(&key, issuer).unwrap();
            (cert.pem(), key.serialize_pem())
        };
        let server_ca = ca("idem-check test server CA");
        let client_ca = ca("idem-check test client CA");
        let (server_chain, server_key) = leaf(&["localhost", "api.test", "127.0.0.1"], &server_ca);
        let (client_cert, client_key) = leaf(&["idem-check client"], &client_ca);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), server_ca.pem()).unwrap();
        std::fs::write(dir.path().join("client.pem"), client_cert).unwrap();
        std::fs::write(dir.path().join("client-key.pem"), client_key).unwrap();
        Pki {
            dir,
            server_chain,
            server_key,
            client_ca: client_ca.pem(),
        }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// A TLS front for `backend` offering h2 and http/1.1; with `client_auth`, a client
    /// certificate from the client CA is required.
    async fn front(&self, backend: &str, client_auth: bool) -> u16 {
        let acceptor = common::tls::acceptor(
            self.server_chain.as_bytes(),
            self.server_key.as_bytes(),
            &[b"h2", b"http/1.1"],
            client_auth.then_some(self.client_ca.as_bytes()),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let backend = backend.to_string();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                let backend = backend.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut up) = TcpStream::connect(&backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                });
            }
        });
        port
    }
}

/// A forward proxy on 127.0.0.1: CONNECT opens a tunnel, an absolute-form request is passed on
/// in origin form. Every destination is reached on 127.0.0.1 (its port kept), so `api.test`
/// works without DNS. Each connection logs its first line.
struct Proxy {
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    async fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let shared = log.clone();
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(forward(client, shared.clone()));
            }
        });
        Proxy { port, log }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

async fn forward(mut client: TcpStream, log: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 * 1024 {
        match client.read_u8().await {
            Ok(b) => head.push(b),
            Err(_) => return,
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let line = text.lines().next().unwrap_or_default().to_string();
    let mut parts = line.split(' ');
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return;
    };
    log.lock().unwrap().push(format!("{method} {target}"));
    let (authority, rest) = if method == "CONNECT" {
        (target.to_string(), None)
    } else {
        let Some(after) = target.strip_prefix("http://") else {
            return;
        };
        let (authority, path) = after.split_at(after.find('/').unwrap_or(after.len()));
        let path = if path.is_empty() { "/" } else { path };
        (
            authority.to_string(),
            Some(text.replacen(target, path, 1).into_bytes()),
        )
    };
    let port = authority.rsplit(':').next().unwrap_or("80");
    let Ok(mut upstream) = TcpStream::connect(format!("127.0.0.1:{port}")).await else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
        return;
    };
    match rest {
        None => {
            if client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .is_err()
            {
                return;
            }
        }
        Some(head) => {
            if upstream.write_all(&head).await.is_err() {
                return;
            }
        }
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// The reference target's options as flags, with `base` in place of its own origin (but for the
/// hold release, a test hook), for the probes this file runs.
fn flags(spec: &TargetSpec, own_base: &str, base: &str) -> Vec<String> {
    let mut args = vec!["run".to_string()];
    args.extend(common::target_flags::flags(spec, |u| {
        u.replacen(own_base, base, 1)
    }));
    for p in PROBES {
        args.extend(["--probe".to_string(), p.to_string()]);
    }
    args.extend([
        "--color".into(),
        "never".into(),
        "--timeout".into(),
        "5s".into(),
    ]);
    args
}

struct Run {
    output: Output,
    json: serde_json::Value,
}

impl Run {
    fn code(&self) -> i32 {
        self.output.status.code().unwrap_or(-1)
    }

    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    fn outcomes(&self) -> Vec<(String, String)> {
        self.json["probes"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .map(|p| {
                        (
                            p["id"].as_str().unwrap_or_default().to_string(),
                            p["outcome"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn all_pass(&self) -> bool {
        let o = self.outcomes();
        o.len() == PROBES.len() && o.iter().all(|(_, outcome)| outcome == "PASS")
    }

    fn explain(&self) -> String {
        format!(
            "exit {}\n{:?}\nstdout:\n{}\nstderr:\n{}",
            self.code(),
            self.outcomes(),
            self.stdout(),
            String::from_utf8_lossy(&self.output.stderr)
        )
    }
}

/// Runs the binary with `args` and `env`, the machine's proxy variables removed.
async fn run(args: &[String], env: &[(&str, &str)], dir: &Path) -> Run {
    let json_path = dir.join(format!("report-{}.json", uuid::Uuid::new_v4()));
    let mut cmd = bin_async();
    cmd.args(args).arg("--report-json").arg(&json_path);
    for var in idem_check::http::net::PROXY_VARIABLES {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    let output = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("idem-check finishes within 2 minutes")
        .expect("idem-check runs");
    let json = std::fs::read_to_string(&json_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    Run { output, json }
}

fn with(mut args: Vec<String>, extra: &[&str]) -> Vec<String> {
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Certificates, the reference server, and a TLS front for it: (pki, server, its plain
/// `host:port`, the front's port).
async fn behind_tls(client_auth: bool) -> (Pki, Reference, String, u16) {
    let pki = Pki::new();
    let reference = Reference::start(None).await.unwrap();
    let backend = reference.base.trim_start_matches("http://").to_string();
    let port = pki.front(&backend, client_auth).await;
    (pki, reference, backend, port)
}

/// A private CA: refused without `--cacert` (ERROR naming the TLS handshake), trusted with it by
/// every client; `--insecure` also gets through, and the header and the report say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_ca_is_trusted_with_cacert_or_skipped_with_insecure() {
    let (pki, reference, _, port) = behind_tls(false).await;
    let base = format!("https://localhost:{port}");
    let args = flags(&reference.target(), &reference.base, &base);

    let refused = run(&args, &[], pki.dir.path()).await;
    assert_eq!(refused.code(), 3, "{}", refused.explain());
    assert!(
        refused.stdout().contains("TLS handshake failed"),
        "{}",
        refused.explain()
    );

    let cacert = pki.path("ca.pem");
    let trusted = run(
        &with(args.clone(), &["--cacert", &cacert]),
        &[],
        pki.dir.path(),
    )
    .await;
    assert!(trusted.all_pass(), "{}", trusted.explain());
    assert_eq!(trusted.code(), 0, "{}", trusted.explain());
    assert!(
        !trusted.stdout().contains("NOT verified"),
        "{}",
        trusted.explain()
    );

    let insecure = run(&with(args, &["--insecure"]), &[], pki.dir.path()).await;
    assert!(insecure.all_pass(), "{}", insecure.explain());
    assert!(insecure
        .stdout()
        .contains("TLS certificates NOT verified (--insecure)"));
    let context = insecure.json["context"].to_string();
    assert!(context.contains("NOT verified"), "{context}");
    reference.stop().await.unwrap();
}

/// A CA in the system's trust store is trusted without `--cacert`, as curl trusts it: the store
/// is pointed at a temporary file with `SSL_CERT_FILE`, and at a temporary folder with
/// `SSL_CERT_DIR`; a store that does not hold the CA still refuses, and a store file that cannot
/// be read is an error naming the variable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_in_the_system_trust_store_is_trusted_without_cacert() {
    let (pki, reference, _, port) = behind_tls(false).await;
    let base = format!("https://localhost:{port}");
    let args = flags(&reference.target(), &reference.base, &base);
    let cacert = pki.path("ca.pem");
    let store_dir = pki.dir.path().join("store");
    std::fs::create_dir(&store_dir).unwrap();
    std::fs::copy(&cacert, store_dir.join("internal-ca.crt")).unwrap();
    let store_dir = store_dir.display().to_string();

    for env in [
        ("SSL_CERT_FILE", cacert.as_str()),
        ("SSL_CERT_DIR", &store_dir),
    ] {
        let trusted = run(&args, &[env], pki.dir.path()).await;
        assert!(trusted.all_pass(), "{env:?}: {}", trusted.explain());
        assert!(
            !trusted.stdout().contains("NOT verified"),
            "{}",
            trusted.explain()
        );
    }

    let unrelated = pki.dir.path().join("empty-store");
    std::fs::create_dir(&unrelated).unwrap();
    let refused = run(
        &args,
        &[("SSL_CERT_DIR", &unrelated.display().to_string())],
        pki.dir.path(),
    )
    .await;
    assert_eq!(refused.code(), 3, "{}", refused.explain());
    assert!(
        refused.stdout().contains("TLS handshake failed"),
        "{}",
        refused.explain()
    );

    let missing = pki.dir.path().join("no-such-bundle.pem");
    let unreadable = run(
        &args,
        &[("SSL_CERT_FILE", &missing.display().to_string())],
        pki.dir.path(),
    )
    .await;
    let stderr = String::from_utf8_lossy(&unreadable.output.stderr);
    assert_ne!(unreadable.code(), 0, "{}", unreadable.explain());
    assert!(stderr.contains("SSL_CERT_FILE"), "{}", unreadable.explain());
    reference.stop().await.unwrap();
}

/// A server that requires a client certificate: refused without `--cert`, and with a
/// certificate its CA did not sign; accepted with `--cert` and `--key`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_presents_the_client_certificate() {
    let (pki, reference, _, port) = behind_tls(true).await;
    let base = format!("https://localhost:{port}");
    let cacert = pki.path("ca.pem");
    let args = with(
        flags(&reference.target(), &reference.base, &base),
        &["--cacert", &cacert],
    );

    let anonymous = run(&args, &[], pki.dir.path()).await;
    assert_eq!(anonymous.code(), 3, "{}", anonymous.explain());

    let (cert, key) = (pki.path("client.pem"), pki.path("client-key.pem"));
    let presented = run(
        &with(args, &["--cert", &cert, "--key", &key]),
        &[],
        pki.dir.path(),
    )
    .await;
    assert!(presented.all_pass(), "{}", presented.explain());
    reference.stop().await.unwrap();
}

/// An X.509 v1 client certificate (`openssl x509 -req` without extensions; the fixture's
/// commands are in tests/data/tls/README.md) is refused before any connection, naming the
/// version, what rustls accepts and the openssl lines that reissue it: not "the certificate and
/// key do not belong together", which is what rustls' own error said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1_client_certificate_is_named_with_the_lines_that_reissue_it() {
    let (pki, reference, _, port) = behind_tls(true).await;
    let base = format!("https://localhost:{port}");
    let cert = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls/client-v1.pem");
    let key = pki.path("client-key.pem");
    let args = with(
        flags(&reference.target(), &reference.base, &base),
        &[
            "--cacert",
            &pki.path("ca.pem"),
            "--cert",
            cert,
            "--key",
            &key,
        ],
    );
    let refused = run(&args, &[], pki.dir.path()).await;
    assert_eq!(refused.code(), 1, "{}", refused.explain());
    let stderr = String::from_utf8_lossy(&refused.output.stderr).into_owned();
    for needle in [
        &format!("--cert: {cert} is an X.509 v1 certificate"),
        "rustls, the TLS library here, accepts only v3",
        &format!("openssl x509 -x509toreq -in {cert} -signkey {key} -out client.csr"),
        "echo basicConstraints=CA:FALSE > v3.ext",
        "-extfile v3.ext -out client-v3.pem",
    ] {
        assert!(stderr.contains(needle), "{needle:?} not in\n{stderr}");
    }
    assert!(!stderr.contains("belong together"), "{stderr}");
    reference.stop().await.unwrap();
}

/// `--proxy`: every request goes through the proxy: CONNECT tunnels for the raw client and the
/// bursts (the HTTP/2 single packet over https, the HTTP/1.1 last-byte release over http),
/// absolute-form requests from the ordinary client over http; the burst evidence names the
/// proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_carries_every_client_and_both_burst_engines() {
    let (pki, reference, backend, port) = behind_tls(false).await;
    let cacert = pki.path("ca.pem");

    let proxy = Proxy::start().await;
    let base = format!("https://localhost:{port}");
    let args = with(
        flags(&reference.target(), &reference.base, &base),
        &["--cacert", &cacert, "--proxy", &proxy.url()],
    );
    let tls = run(&args, &[], pki.dir.path()).await;
    assert!(tls.all_pass(), "{}", tls.explain());
    let connects = proxy
        .lines()
        .iter()
        .filter(|l| *l == &format!("CONNECT localhost:{port}"))
        .count();
    assert!(connects >= 3, "{:?}", proxy.lines());
    assert!(tls
        .stdout()
        .contains(&format!("through the proxy {} (--proxy)", proxy.url())));
    let evidence = tls.json.to_string();
    assert!(
        evidence.contains("in one HTTP/2 packet at idem-check, then through the proxy"),
        "{evidence}"
    );

    let plain = Proxy::start().await;
    let args = with(
        flags(&reference.target(), &reference.base, &reference.base),
        &["--proxy", &plain.url()],
    );
    let http = run(&args, &[], pki.dir.path()).await;
    assert!(http.all_pass(), "{}", http.explain());
    let lines = plain.lines();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("POST {}/", reference.base))),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l == &format!("CONNECT {backend}")),
        "{lines:?}"
    );
    let evidence = http.json.to_string();
    assert!(
        evidence.contains("thread") && evidence.contains("at idem-check, then through the proxy"),
        "{evidence}"
    );
    reference.stop().await.unwrap();
}

/// `HTTPS_PROXY` from the environment carries a run to a name only the proxy knows; with the
/// name in `NO_PROXY` the proxy sees nothing and `--resolve` supplies the address instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_proxy_no_proxy_and_resolve() {
    let (pki, reference, _, port) = behind_tls(false).await;
    let cacert = pki.path("ca.pem");
    let base = format!("https://api.test:{port}");
    let args = with(
        flags(&reference.target(), &reference.base, &base),
        &["--cacert", &cacert],
    );

    let proxy = Proxy::start().await;
    let proxied = run(&args, &[("HTTPS_PROXY", &proxy.url())], pki.dir.path()).await;
    assert!(proxied.all_pass(), "{}", proxied.explain());
    assert!(
        proxied.stdout().contains("(HTTPS_PROXY)"),
        "{}",
        proxied.explain()
    );
    let seen = proxy.lines().len();
    assert!(
        proxy
            .lines()
            .iter()
            .all(|l| l == &format!("CONNECT api.test:{port}"))
            && seen >= 3,
        "{:?}",
        proxy.lines()
    );

    let resolve = format!("api.test:{port}:127.0.0.1");
    let direct = run(
        &with(args, &["--resolve", &resolve]),
        &[
            ("HTTPS_PROXY", &proxy.url()),
            ("NO_PROXY", "example.org,.test"),
        ],
        pki.dir.path(),
    )
    .await;
    assert!(direct.all_pass(), "{}", direct.explain());
    assert_eq!(proxy.lines().len(), seen, "{:?}", proxy.lines());
    assert!(direct
        .stdout()
        .contains("resolved to 127.0.0.1 (--resolve)"));
    reference.stop().await.unwrap();
}

/// The reference target at `base` (an origin in front of it), trusting `pki`'s CA, with
/// `resolve` entries: the settings one run of a test process is built with.
fn run_config(reference: &Reference, base: &str, pki: &Pki, resolve: &[String]) -> Config {
    let own = reference.target();
    let at = |u: &str| u.replacen(&reference.base, base, 1);
    let mut target = TargetSpec {
        url: at(&own.url),
        count_url: own.count_url.as_deref().map(at),
        ..own
    };
    target.tls.cacert = Some(pki.dir.path().join("ca.pem"));
    target.net.resolve = resolve.to_vec();
    Config::build(target, &common::run_options(), None).expect("a valid target")
}

/// Two runs in one process, each behind its own private CA, one of them reaching its server
/// by a name only its `--resolve` knows. All three runs are built before any of them starts and
/// then run at once: each trusts its own CA and no other (a third run with the first run's CA
/// is refused by the second server), and only the first resolves the name. Settings held by the
/// process would let the last run built decide for all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_in_one_process_keep_their_own_settings() {
    let (pki_a, reference_a, _, port_a) = behind_tls(false).await;
    let (pki_b, reference_b, _, port_b) = behind_tls(false).await;
    let resolve = vec![format!("api.test:{port_a}:127.0.0.1")];
    let run_a = run_config(
        &reference_a,
        &format!("https://api.test:{port_a}"),
        &pki_a,
        &resolve,
    );
    let run_b = run_config(
        &reference_b,
        &format!("https://localhost:{port_b}"),
        &pki_b,
        &[],
    );
    let mismatched = run_config(
        &reference_b,
        &format!("https://localhost:{port_b}"),
        &pki_a,
        &[],
    );
    assert!(idem_check::runner::context(&run_a).contains(&format!(
        "api.test:{port_a} resolved to 127.0.0.1 (--resolve)"
    )));
    assert!(!idem_check::runner::context(&run_b)
        .iter()
        .any(|l| l.contains("--resolve")));

    let (a, b, refused) = tokio::join!(
        common::run_quietly(run_a, &PROBES),
        common::run_quietly(run_b, &PROBES),
        common::run_quietly(mismatched, &["first-request"]),
    );
    for (name, report) in [("A", &a), ("B", &b)] {
        assert!(
            report.probes.len() == PROBES.len()
                && report.probes.iter().all(|p| p.outcome == Outcome::Pass),
            "run {name}:\n{}",
            common::outcomes(report)
        );
    }
    let evidence = serde_json::to_string(&refused).unwrap();
    assert!(
        refused.probes.iter().all(|p| p.outcome != Outcome::Pass)
            && evidence.contains("TLS handshake failed"),
        "{}",
        common::outcomes(&refused)
    );
    reference_a.stop().await.unwrap();
    reference_b.stop().await.unwrap();
}

/// Runs `idem-check` with `args` and `env` (the machine's proxy variables removed), for the
/// commands that write no report.
async fn output(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = bin_async();
    cmd.args(args);
    for var in idem_check::http::net::PROXY_VARIABLES {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("idem-check finishes within 2 minutes")
        .expect("idem-check runs")
}

/// The reference server's API description behind a private CA, at a name only `--resolve` or a
/// proxy knows, is fetched the way runs connect: refused without the CA, with an error naming
/// the TLS handshake and --cacert; read with `--cacert`, through `HTTPS_PROXY` and through
/// `--proxy`; and `run --openapi` checks its operation with the same settings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_description_is_fetched_with_the_connection_options() {
    let (pki, reference, _, port) = behind_tls(false).await;
    let cacert = pki.path("ca.pem");
    let document = format!("https://api.test:{port}/openapi.json");
    let resolve = format!("api.test:{port}:127.0.0.1");
    let explain = |o: &Output| common::binary::text(o);

    let refused = output(&["discover", &document, "--resolve", &resolve], &[]).await;
    assert_eq!(refused.status.code(), Some(2), "{}", explain(&refused));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("the TLS handshake failed") && stderr.contains("--cacert FILE"),
        "{}",
        explain(&refused)
    );

    let read = [
        "discover",
        &document,
        "--resolve",
        &resolve,
        "--cacert",
        &cacert,
    ];
    let read = output(&read, &[]).await;
    assert_eq!(read.status.code(), Some(0), "{}", explain(&read));
    assert!(String::from_utf8_lossy(&read.stdout).contains("createPayment"));

    let proxy = Proxy::start().await;
    let proxied = output(
        &["discover", &document, "--cacert", &cacert],
        &[("HTTPS_PROXY", &proxy.url())],
    )
    .await;
    assert_eq!(proxied.status.code(), Some(0), "{}", explain(&proxied));
    assert_eq!(proxy.lines(), [format!("CONNECT api.test:{port}")]);

    let explicit = Proxy::start().await;
    let local = format!("https://localhost:{port}/openapi.json");
    let through = ["discover", &local, "--cacert", &cacert, "--proxy"];
    let through = output(&with_str(&through, &explicit.url()), &[]).await;
    assert_eq!(through.status.code(), Some(0), "{}", explain(&through));
    assert_eq!(explicit.lines(), [format!("CONNECT localhost:{port}")]);

    let args: Vec<String> = [
        "run",
        "--openapi",
        &document,
        "--resolve",
        &resolve,
        "--cacert",
        &cacert,
        "--operation",
        "createPayment",
        "--probe",
        "first-request",
        "-H",
        &format!("Authorization: Bearer {}", reference.token(0)),
        "--color",
        "never",
    ]
    .map(String::from)
    .into();
    let checked = run(&args, &[], pki.dir.path()).await;
    assert_eq!(checked.code(), 0, "{}", checked.explain());
    let probes = &checked.json["operations"][0]["report"]["probes"];
    assert_eq!(probes[0]["outcome"], "PASS", "{}", checked.explain());
    reference.stop().await.unwrap();
}

/// A `$ref` in a local description to a document behind a private CA is fetched with the
/// connection options too: followed with `--cacert` and `--resolve`, left out with a note
/// naming the TLS handshake without the CA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_reference_is_fetched_with_the_connection_options() {
    let (pki, reference, _, port) = behind_tls(false).await;
    let mut doc = common::reference_description(&reference).await;
    let remote = format!("https://api.test:{port}/openapi.json#/components/schemas/PaymentRequest");
    doc["components"]["schemas"]["PaymentRequest"] = serde_json::json!({"$ref": remote});
    let path = pki.dir.path().join("openapi.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    let path = path.display().to_string();
    let resolve = format!("api.test:{port}:127.0.0.1");
    let args = [
        "discover",
        &path,
        "--resolve",
        &resolve,
        "--base-url",
        &reference.base,
        "--format",
        "json",
    ];
    let followed =
        discovered_notes(&with_str(&with_str(&args, "--cacert"), &pki.path("ca.pem"))).await;
    assert!(followed.is_empty(), "{followed:?}");
    let left_out = discovered_notes(&args).await;
    assert!(
        !left_out.is_empty()
            && left_out
                .iter()
                .all(|n| n.contains(&remote) && n.contains("the TLS handshake failed")),
        "{left_out:?}"
    );
    reference.stop().await.unwrap();
}

/// The notes of every operation `discover … --format json` lists.
async fn discovered_notes(args: &[&str]) -> Vec<String> {
    let o = output(args, &[]).await;
    assert_eq!(o.status.code(), Some(0), "{}", common::binary::text(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    json["operations"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|op| op["notes"].as_array().unwrap().clone())
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

/// `args` and then `last`.
fn with_str<'a>(args: &[&'a str], last: &'a str) -> Vec<&'a str> {
    let mut out = args.to_vec();
    out.push(last);
    out
}
