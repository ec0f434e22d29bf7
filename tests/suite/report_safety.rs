//! The real binary against a server that echoes every request back: no secret reaches any
//! output, the printed curl lines can be pasted, reports stay small when bodies are 1 MiB, and
//! report paths, broken pipes and exit codes behave as documented.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::binary::{bin, text};

/// How the echo server answers.
#[derive(Clone)]
struct Echo {
    /// `Authorization` value required (401 otherwise), if any.
    require: Option<String>,
    /// Bytes of padding added to every 2xx body.
    pad: usize,
}

/// Reads one request (head and `Content-Length` body); `None` when the client went away.
fn read_request(stream: &mut BufReader<TcpStream>) -> Option<(Vec<String>, Vec<u8>)> {
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if stream.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end().to_string();
        if line.is_empty() {
            break;
        }
        lines.push(line);
    }
    let len = lines
        .iter()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).ok()?;
    Some((lines, body))
}

/// A loopback server (for at most two minutes) that answers every request with 201 and a JSON
/// body holding the whole request (so every secret sent comes back), a fresh `id`, and the
/// request's credentials echoed in `Set-Cookie`, `X-Echo-Authorization` and `Location`.
fn echo_server(echo: Echo) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let served = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(120);
        listener.set_nonblocking(true).unwrap();
        while Instant::now() < end {
            let Ok((s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let (echo, served) = (echo.clone(), served.clone());
            std::thread::spawn(move || serve(s, &echo, &served));
        }
    });
    format!("127.0.0.1:{}", addr.port())
}

fn serve(s: TcpStream, echo: &Echo, served: &AtomicUsize) {
    let mut writer = s.try_clone().unwrap();
    let mut reader = BufReader::new(s);
    while let Some((lines, body)) = read_request(&mut reader) {
        let header = |name: &str| {
            lines.iter().skip(1).find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
        };
        let auth = header("authorization").unwrap_or_default();
        let n = served.fetch_add(1, Ordering::SeqCst);
        let (status, json) = match &echo.require {
            Some(want) if *want != auth => {
                ("401 Unauthorized", serde_json::json!({"error": "auth"}))
            }
            _ => (
                "201 Created",
                serde_json::json!({
                    "id": format!("pay_{n}"),
                    "count": n,
                    "request": lines,
                    "body": String::from_utf8_lossy(&body),
                    "pad": "x".repeat(echo.pad),
                }),
            ),
        };
        let body = serde_json::to_vec(&json).unwrap();
        let cookie = header("cookie").unwrap_or_default();
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
X-Echo-Authorization: {auth}\r\nSet-Cookie: {cookie}; Path=/\r\nLocation: /api/payments/{n}?{}\r\n\r\n",
            body.len(),
            lines[0].split('?').nth(1).unwrap_or("").split(' ').next().unwrap_or("")
        );
        if writer.write_all(head.as_bytes()).is_err() || writer.write_all(&body).is_err() {
            return;
        }
    }
}

/// One secret in each place a user can put one.
const SECRETS: [(&str, &str); 11] = [
    ("bearer", "tok-a-7f3e9c1d2b"),
    ("tenant b", "tok-b-0c4d8e2f6a"),
    ("x-apikey", "apikey-5d1c9e7b3f"),
    ("x-auth-secret", "authsec-8a2b6c4d"),
    ("cookie session", "sess-9e1f3a5c7b"),
    ("cookie theme", "theme-2b4d6f8a0c"),
    ("proxy-authorization", "proxy-6c8e0a2b4d"),
    ("url password", "urlpass-3f5a7c9e"),
    ("query sig", "sig-4a6c8e0b2d"),
    ("--secret", "given-1b3d5f7a9c"),
    ("--redact-header", "tenantref-7e9a1c3b"),
];

fn secret(name: &str) -> &'static str {
    SECRETS.iter().find(|(n, _)| *n == name).unwrap().1
}

/// The run options that put every secret of [`SECRETS`] somewhere.
fn secret_args(addr: &str) -> Vec<String> {
    vec![
        format!(
            "http://user:{}@{addr}/api/payments?sig={}&page=1",
            secret("url password"),
            secret("query sig")
        ),
        "-H".into(),
        format!("Authorization: Bearer {}", secret("bearer")),
        "-H".into(),
        format!("X-Apikey: {}", secret("x-apikey")),
        "-H".into(),
        format!("X-Auth-Secret: {}", secret("x-auth-secret")),
        "-H".into(),
        format!(
            "Cookie: session={}; theme={}",
            secret("cookie session"),
            secret("cookie theme")
        ),
        "-H".into(),
        format!(
            "Proxy-Authorization: Basic {}",
            secret("proxy-authorization")
        ),
        "-H".into(),
        format!("X-Tenant-Ref: {}", secret("--redact-header")),
        "-H".into(),
        "Content-Type: application/json".into(),
        "--tenant-b-header".into(),
        format!("Authorization: Bearer {}", secret("tenant b")),
        "-d".into(),
        format!(
            r#"{{"amountCents":1250,"reference":"{{{{unique}}}}","note":"{}"}}"#,
            secret("--secret")
        ),
        "--secret".into(),
        secret("--secret").into(),
        "--redact-header".into(),
        "X-Tenant-Ref".into(),
        "--timeout".into(),
        "5s".into(),
    ]
}

fn report_args(dir: &Path, prefix: &str) -> Vec<String> {
    let p = |ext: &str| {
        dir.join(format!("{prefix}.{ext}"))
            .to_str()
            .unwrap()
            .to_string()
    };
    vec![
        "--report-json".into(),
        p("json"),
        "--report-junit".into(),
        p("xml"),
        "--report-markdown".into(),
        p("md"),
        "--report-html".into(),
        p("html"),
    ]
}

/// Every file under `dir`, with its text.
fn files(dir: &Path) -> Vec<(PathBuf, String)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let t = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
            (p, t)
        })
        .collect()
}

/// Secrets in every place, echoed back in bodies, headers and URLs: none reaches the terminal,
/// JUnit, JSON, Markdown, HTML, the step summary, the stress reports or the matrix.
#[test]
fn no_secret_reaches_any_output() {
    let addr = echo_server(Echo {
        require: None,
        pad: 0,
    });
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("step-summary.md");
    let mut outputs: Vec<(String, String)> = Vec::new();
    let probes = [
        "--probe",
        "first-request",
        "--probe",
        "replay-identity",
        "--probe",
        "payload-mismatch",
        "--probe",
        "tenant-isolation",
        "--probe",
        "missing-key",
    ];
    let o = bin()
        .arg("run")
        .args(secret_args(&addr))
        .args(probes)
        .args(report_args(dir.path(), "run"))
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    outputs.push(("run terminal".into(), text(&o)));
    let o = bin()
        .arg("stress")
        .args(secret_args(&addr))
        .args([
            "--keys",
            "3",
            "--duplicates",
            "2",
            "--concurrency",
            "4",
            "--duration",
            "20s",
        ])
        .args(report_args(dir.path(), "stress"))
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    outputs.push(("stress terminal".into(), text(&o)));
    let matrix = dir.path().join("matrix");
    std::fs::create_dir(&matrix).unwrap();
    std::fs::copy(dir.path().join("run.json"), matrix.join("run.json")).unwrap();
    let o = bin()
        .arg("matrix")
        .arg(&matrix)
        .arg("--html")
        .arg(dir.path().join("matrix.html"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    outputs.push(("matrix terminal".into(), text(&o)));
    for (path, t) in files(dir.path()) {
        outputs.push((path.display().to_string(), t));
    }
    assert!(
        outputs.len() >= 13,
        "{:?}",
        outputs.iter().map(|o| &o.0).collect::<Vec<_>>()
    );
    let everything: String = outputs.iter().map(|(_, t)| t.as_str()).collect();
    // The scan is only worth something if the echo came back and the evidence was printed.
    assert!(everything.contains("[redacted]") && everything.contains("curl -i"));
    for (name, value) in SECRETS {
        for (output, t) in &outputs {
            assert!(!t.contains(value), "the {name} secret leaks into {output}");
        }
    }
}

/// The first reproduce line of the evidence and its legend.
fn reproduce_line(stdout: &str) -> (String, String) {
    let mut lines = stdout.lines();
    lines
        .find(|l| l.starts_with("reproduce #"))
        .expect("a reproduce line");
    let curl = lines.next().expect("the curl line").trim().to_string();
    let legend = lines
        .find(|l| l.starts_with("variables: "))
        .expect("the legend")
        .to_string();
    (curl, legend)
}

/// The payment body with a fresh reference per request, as the tests below send it.
const UNIQUE_PAYMENT: &str = r#"{"amountCents":1,"reference":"{{unique}}"}"#;

/// The `run` arguments of a JSON payment target at `url` given by flags: `extra` flags, then
/// `Authorization: {authorization}`, the content type and [`UNIQUE_PAYMENT`].
fn target_flags(url: &str, extra: &[&str], authorization: &str) -> Vec<String> {
    let mut args = vec![url.to_string()];
    args.extend(extra.iter().map(|a| a.to_string()));
    args.extend([
        "-H".into(),
        format!("Authorization: {authorization}"),
        "-H".into(),
        "Content-Type: application/json".into(),
        "-d".into(),
        UNIQUE_PAYMENT.into(),
    ]);
    args
}

/// The same target as [`target_flags`], written to a target file in `dir` (`extra` lines after
/// the URL): the `run` arguments that name it.
fn target_file(dir: &Path, url: &str, extra: &str, authorization: &str) -> Vec<String> {
    let target = dir.join("t.toml");
    let headers = format!(
        "headers = [\"Authorization: {authorization}\", \"Content-Type: application/json\"]"
    );
    let file = format!("url = \"{url}\"\n{extra}{headers}\nbody = '{UNIQUE_PAYMENT}'\n");
    std::fs::write(&target, file).unwrap();
    vec!["--target".into(), target.to_str().unwrap().into()]
}

/// The printed curl line, with the variables its legend names exported, reproduces the status:
/// with flags (`$IDEM_TOKEN_A`) and with a target file (the file's own `${VAR}` name).
#[test]
fn the_printed_curl_line_reproduces_the_status() {
    let token = "pasteable-token-5c7e";
    let addr = echo_server(Echo {
        require: Some(format!("Bearer {token}")),
        pad: 0,
    });
    let url = format!("http://{addr}/api/payments");
    let dir = tempfile::tempdir().unwrap();
    let flag_args = target_flags(&url, &[], &format!("Bearer {token}"));
    let file_args = target_file(dir.path(), &url, "", "Bearer ${MY_TOKEN}");
    for (args, var) in [(flag_args, "IDEM_TOKEN_A"), (file_args, "MY_TOKEN")] {
        let o = bin()
            .arg("run")
            .args(&args)
            .args(["--probe", "replay-identity"])
            .env("MY_TOKEN", token)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(4), "{}", text(&o));
        let stdout = String::from_utf8_lossy(&o.stdout);
        let (curl, legend) = reproduce_line(&stdout);
        assert!(curl.starts_with("curl -i "), "{curl}");
        assert!(curl.contains(&format!("${var}")), "{curl}");
        assert!(legend.contains(&format!("${var} = ")), "{legend}");
        assert!(!curl.contains(token));
        let replay = Command::new("bash")
            .arg("-c")
            .arg(&curl)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env(var, token)
            .output()
            .expect("bash and curl run (.ci/run installs curl)");
        let out = String::from_utf8_lossy(&replay.stdout);
        assert!(out.starts_with("HTTP/1.1 201"), "{curl}\n{out}");
    }
}

/// The burst's reproduce script replays the race: with a fresh key, every copy at once, each
/// printing its status; against a server that checks then acts without a lock, the counter
/// rises by more than one.
#[test]
fn the_printed_burst_script_replays_the_race() {
    let server = common::python::start("tests/data/hostile.py", &["--racy-ms", "300"]);
    let url = format!("{}/pay", server.base);
    let o = bin()
        .arg("run")
        .args(target_flags(&url, &[], "Bearer ta"))
        .args(["--probe", "concurrent-duplicates", "--id-pointer", "/id"])
        .args(["--count-url", &format!("{}/count", server.base)])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let mut lines = stdout.lines();
    let title = lines
        .find(|l| l.starts_with("reproduce #") && l.contains(" together ("))
        .unwrap_or_else(|| panic!("a burst reproduce line in\n{stdout}"));
    assert!(title.contains("with a fresh key"), "{title}");
    let script = lines.next().unwrap().trim().to_string();
    let copies: usize = title
        .split(" together (")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the number of copies");
    let count = || -> u64 {
        let out = Command::new("curl")
            .args(["-sS", "-H", "Authorization: Bearer ta"])
            .arg(format!("{}/count", server.base))
            .output()
            .expect("curl runs");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["count"].as_u64().unwrap()
    };
    let before = count();
    let replay = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("IDEM_TOKEN_A", "ta")
        .output()
        .expect("bash and curl run (.ci/run installs curl)");
    let statuses = String::from_utf8_lossy(&replay.stdout);
    assert_eq!(statuses.lines().count(), copies, "{script}\n{statuses}");
    assert!(statuses.lines().all(|s| s == "201"), "{statuses}");
    let after = count();
    assert!(
        after > before + 1,
        "{before} → {after}: the race was not replayed\n{script}"
    );
}

/// The key header is never a secret, whatever its name: with `--key-header X-Idempotency-Key`
/// and with a target file's `key-header = "Idempotent-Token"` (names the secret rules mask),
/// the keys sent are shown in the terminal evidence, JUnit and JSON, and the curl line sends
/// the key itself instead of a variable nobody could fill in. The credential stays masked.
#[test]
fn the_key_header_is_shown_whatever_its_name() {
    let token = "bearer-kept-secret-4e1a";
    let addr = echo_server(Echo {
        require: None,
        pad: 0,
    });
    let url = format!("http://{addr}/api/payments");
    let dir = tempfile::tempdir().unwrap();
    let authorization = format!("Bearer {token}");
    let flag_args = target_flags(&url, &["--key-header", "X-Idempotency-Key"], &authorization);
    let key_header = "key-header = \"Idempotent-Token\"\n";
    let file_args = target_file(dir.path(), &url, key_header, &authorization);
    for (args, name) in [
        (flag_args, "X-Idempotency-Key"),
        (file_args, "Idempotent-Token"),
    ] {
        // The record is what went out, and hyper writes field names lower-cased.
        let name = name.to_ascii_lowercase();
        let name = name.as_str();
        let (json, junit) = (dir.path().join("r.json"), dir.path().join("r.xml"));
        let o = bin()
            .arg("run")
            .args(&args)
            .args(["--probe", "replay-identity"])
            .arg("--report-json")
            .arg(&json)
            .arg("--report-junit")
            .arg(&junit)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(4), "{name}: {}", text(&o));
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let replay = report["probes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == "replay-identity")
            .unwrap();
        let keys: Vec<&str> = replay["exchanges"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|e| e["request"]["headers"].as_array().unwrap())
            .filter(|h| h["name"] == name)
            .map(|h| h["value"].as_str().unwrap())
            .collect();
        assert!(!keys.is_empty(), "{name}: no key sent in the JSON report");
        let key = keys[0];
        assert!(
            keys.iter().all(|k| *k == key) && key.len() > 10,
            "{name}: the JSON report shows {keys:?}"
        );
        let stdout = String::from_utf8_lossy(&o.stdout);
        let junit = std::fs::read_to_string(&junit).unwrap();
        assert!(
            stdout.contains(&format!("> {name}: {key}")),
            "{name}: the terminal evidence hides the key\n{stdout}"
        );
        assert!(
            junit.contains(&format!("{name}: {key}")),
            "{name}: JUnit hides the key\n{junit}"
        );
        let (curl, legend) = reproduce_line(&stdout);
        assert!(
            curl.contains(&format!("-H '{name}: {key}'")),
            "{name}: the curl line does not send the key\n{curl}"
        );
        assert_eq!(
            legend, "variables: $IDEM_TOKEN_A = tenant A's Authorization credential",
            "{name}: only the credential is a variable"
        );
        for (output, t) in [("terminal", &*stdout), ("JUnit", &junit)] {
            assert!(
                !t.contains(token),
                "{name}: the credential leaks into {output}"
            );
        }
        assert!(!std::fs::read_to_string(&json).unwrap().contains(token));
    }
}

/// A server sending 1 MiB bodies: every report stays within its bound, and no line of any
/// report (a JUnit message, a quoted body) is longer than a screen can take in.
#[test]
fn reports_stay_bounded_with_1_mib_bodies() {
    let addr = echo_server(Echo {
        require: None,
        pad: 1024 * 1024,
    });
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("step-summary.md");
    let o = bin()
        .arg("run")
        .arg(format!("http://{addr}/api/payments"))
        .args(["-H", "Content-Type: application/json"])
        .args(["-d", UNIQUE_PAYMENT])
        .args(["--probe", "first-request", "--probe", "replay-identity"])
        .args([
            "--probe",
            "concurrent-duplicates",
            "--probe",
            "payload-mismatch",
        ])
        .args(["--probe", "distinct-keys-independent"])
        .args(report_args(dir.path(), "big"))
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let size = |ext: &str| {
        std::fs::metadata(dir.path().join(format!("big.{ext}")))
            .unwrap()
            .len()
    };
    let bounds = [
        ("terminal", o.stdout.len() as u64, 256 * 1024),
        ("JUnit", size("xml"), 1024 * 1024),
        ("JSON", size("json"), 8 * 1024 * 1024),
        ("Markdown", size("md"), 64 * 1024),
        ("HTML", size("html"), 1024 * 1024),
        (
            "step summary",
            std::fs::metadata(&summary).unwrap().len(),
            1024 * 1024,
        ),
    ];
    for (what, size, max) in bounds {
        assert!(size <= max, "{what}: {size} bytes, more than {max}");
    }
    let longest = |t: &str| t.lines().map(str::len).max().unwrap_or(0);
    assert!(longest(&String::from_utf8_lossy(&o.stdout)) < 8 * 1024);
    let xml = std::fs::read_to_string(dir.path().join("big.xml")).unwrap();
    assert!(longest(&xml) < 16 * 1024, "{}", longest(&xml));
    assert!(
        xml.contains(" bytes more, sha256 "),
        "a cut body names its size and digest"
    );
    let page = std::fs::read_to_string(dir.path().join("big.html")).unwrap();
    assert!(
        page.contains(" bytes more, sha256 "),
        "the page cuts bodies too"
    );
}

/// A report under folders that do not exist yet is written; an unwritable report path stops
/// the run before it starts, with exit 3 and a message naming the path.
#[test]
fn report_paths_are_prepared_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("new/deeper/r.json");
    let o = bin()
        .args([
            "run",
            "--reference",
            "--probe",
            "first-request",
            "--report-json",
        ])
        .arg(&nested)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(nested.is_file());
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "x").unwrap();
    let start = Instant::now();
    let o = bin()
        .args(["run", "--reference", "--report-junit"])
        .arg(blocker.join("r.xml"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("JUnit report"),
        "{}",
        text(&o)
    );
    assert!(o.stdout.is_empty(), "the run started: {}", text(&o));
    assert!(start.elapsed() < Duration::from_secs(20));
    let html = blocker.join("r.html");
    let html = html.to_str().unwrap();
    for args in [
        vec!["run", "--reference", "--report-html", html],
        vec!["stress", "--reference", "--report-html", html],
        vec!["client", "--report-html", html, "--", "true"],
    ] {
        let command = args[0];
        let o = bin().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(3), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("HTML report"),
            "{}",
            text(&o)
        );
        assert!(o.stdout.is_empty(), "the {command} started: {}", text(&o));
    }
}

/// A reader that goes away (`idem-check list | head -1`) ends the command quietly with 0.
#[test]
fn a_closed_stdout_ends_quietly() {
    let mut child = bin()
        .arg("list")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(o.stderr.is_empty(), "{}", text(&o));
}

/// Each class of error has its code: a missing body file is an input file (2).
#[test]
fn a_missing_body_file_exits_2() {
    let o = bin()
        .args([
            "run",
            "http://127.0.0.1:9/x",
            "-d",
            "@/nonexistent/body.json",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/body.json"));
}

/// A proxy URL that does not parse is refused naming where it came from, without its
/// credentials: neither a `--proxy` nor an `HTTPS_PROXY` password reaches the error, even one
/// holding a `/` that ends the URL's authority early.
#[test]
fn a_malformed_proxy_url_is_refused_without_its_password() {
    let cases = [
        (
            "--proxy",
            "http://proxyuser:proxy-pw-1234@:3128",
            "proxy-pw-1234",
        ),
        (
            "--proxy",
            "proxyuser:pw/slash-5678@proxy.test:3128",
            "slash-5678",
        ),
        (
            "HTTPS_PROXY",
            "http://envuser:env-pw-9012@proxy.test:99999",
            "env-pw-9012",
        ),
    ];
    for (from, proxy, password) in cases {
        let mut cmd = bin();
        cmd.args(["run", "http://127.0.0.1:9/x"]);
        for var in idem_check::http::net::PROXY_VARIABLES {
            cmd.env_remove(var);
        }
        if from == "--proxy" {
            cmd.args(["--proxy", proxy]);
        } else {
            cmd.env(from, proxy);
        }
        let o = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{from} {proxy}: {}", text(&o));
        assert!(
            stderr.contains(&format!("{from}: ")) && stderr.contains("is not a proxy URL"),
            "{from} {proxy}: {stderr}"
        );
        assert!(!stderr.contains(password), "{from} {proxy}: {stderr}");
        assert!(stderr.contains("[redacted]"), "{from} {proxy}: {stderr}");
    }
}

/// `{:?}` of a target description, of the connector built from it, of the operation it
/// validates to and of the run's hooks and counter shows no credential: not the Authorization
/// token written into the target file (nor the file's line that its origins point at), not a
/// `${VAR}` value standing in a command (restart, counter, store outage), not the password of a
/// proxy given or taken from the environment, not a secret query parameter or tenant B's API
/// key. What is not secret is still there to debug with.
#[test]
fn debug_output_masks_every_secret() {
    let file = "url = \"https://api.test/p?access_token=qs-tok-1234\"\n\
                headers = [\"Authorization: Bearer file-tok-5678\"]\n\
                proxy = \"http://proxyuser:proxy-pass-9@127.0.0.1:3128\"\n\
                [restart]\ncommand = \"deploy --token ${DEPLOY_TOKEN}\"\n\
                [counter]\ncommand = \"count-payments --token ${COUNT_TOKEN}\"\n\
                [store-outage]\ndown-command = \"store down --token ${STORE_TOKEN}\"\n\
                up-command = \"store up --token ${STORE_TOKEN}\"\n";
    let env = [
        ("DEPLOY_TOKEN", "deploy-tok-4321"),
        ("COUNT_TOKEN", "count-tok-8765"),
        ("STORE_TOKEN", "store-tok-2468"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .into();
    let mut spec = idem_check::target::parse("t.toml", file, &env, Path::new(".")).unwrap();
    spec.net.proxy_env = vec![(
        "HTTPS_PROXY".into(),
        "http://envuser:env-pass-77@127.0.0.1:8080".into(),
    )];
    spec.tenant_b_headers = vec!["X-Api-Key: tenant-b-key-55".into()];
    spec.secrets = vec!["given-secret-66".into()];
    let config =
        idem_check::config::Config::build(spec.clone(), &common::run_options(), None).unwrap();
    let shown = format!(
        "{spec:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
        config.operation,
        config.tenant_b,
        config.connector,
        config.restart,
        config.counter,
        config.store_outage
    );
    for secret in [
        "file-tok-5678",
        "proxy-pass-9",
        "deploy-tok-4321",
        "count-tok-8765",
        "store-tok-2468",
        "env-pass-77",
        "qs-tok-1234",
        "tenant-b-key-55",
        "given-secret-66",
    ] {
        assert!(!shown.contains(secret), "{secret} shown in\n{shown}");
    }
    for kept in [
        "Authorization: Bearer [redacted]",
        "127.0.0.1:3128",
        "DEPLOY_TOKEN",
        "https://api.test/p?access_token=[redacted]",
        "t.toml:2:",
        "\"deploy --token [redacted]\"",
        "\"count-payments --token [redacted]\"",
        "\"store down --token [redacted]\"",
        "\"store up --token [redacted]\"",
    ] {
        assert!(shown.contains(kept), "{kept} missing from\n{shown}");
    }
}

/// `--auth-cmd` (or a target file's `auth-command`) supplies tenant A's credential: the header
/// line it prints is sent (the echo server answers 401 without it, so first-request PASSes only
/// with it) and its value is masked in every output, though the server echoes it back. A
/// command that fails or prints no header line is one error naming the flag or the file's line,
/// before anything is sent.
#[test]
fn the_auth_command_supplies_a_masked_credential() {
    let token = "tokcmd-5e7a9c1b3d";
    let addr = echo_server(Echo {
        require: Some(format!("Bearer {token}")),
        pad: 0,
    });
    let url = format!("http://{addr}/api/payments");
    let dir = tempfile::tempdir().unwrap();
    let print = format!("printf 'Authorization: Bearer {token}\\n'");
    let o = bin()
        .args([
            "run",
            &url,
            "--auth-cmd",
            &print,
            "--probe",
            "first-request",
        ])
        .args([
            "-H",
            "Authorization: Bearer stale",
            "-d",
            r#"{"n":"{{unique}}"}"#,
        ])
        .args(report_args(dir.path(), "run"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mut outputs = vec![("terminal".to_string(), text(&o))];
    for (path, t) in files(dir.path()) {
        outputs.push((path.display().to_string(), t));
    }
    assert!(outputs.len() >= 5, "{outputs:?}");
    for (output, t) in &outputs {
        assert!(!t.contains(token), "the token leaks into {output}");
    }
    let target = dir.path().join("t.toml");
    std::fs::write(
        &target,
        format!("url = \"{url}\"\nauth-command = \"false\"\n"),
    )
    .unwrap();
    for (args, code, wanted) in [
        (
            vec![url.as_str(), "--auth-cmd", "false"],
            1,
            "--auth-cmd failed",
        ),
        (
            vec![url.as_str(), "--auth-cmd", "echo no header"],
            1,
            "--auth-cmd printed no 'Name: value' header line",
        ),
        (
            vec!["--target", target.to_str().unwrap()],
            2,
            "auth-command failed",
        ),
    ] {
        let o = bin().arg("run").args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(wanted),
            "{args:?}: {wanted:?} missing from {err}"
        );
    }
}

/// Two `--auth-cmd` commands for `expiring_token.py` at `base`, each token logged to
/// `issued`: one that fetches a new token every time, and one that works once, then fails (the
/// first refresh finds no new token).
fn token_commands(base: &str, dir: &Path, issued: &Path) -> [String; 2] {
    let fetch = format!(
        "import urllib.request; t = urllib.request.urlopen('{base}/token', data=b'').read().decode(); \
         open('{}', 'a').write(t + chr(10)); print('Authorization: Bearer ' + t)",
        issued.display()
    );
    let once = dir.join("fetched-once");
    [
        format!("python3 -c \"{fetch}\""),
        format!(
            "test -e {0} && exit 7; touch {0}; python3 -c \"{fetch}\"",
            once.display()
        ),
    ]
}

/// Every token `expiring_token.py`'s fetch command logged to `issued`, in order.
fn issued_tokens(issued: &Path) -> Vec<String> {
    std::fs::read_to_string(issued)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// No token appears in the report files under `dir` nor in what the command `o` printed.
fn assert_no_token_shown(dir: &Path, o: &std::process::Output, tokens: &[String]) {
    let mut outputs = files(dir);
    outputs.push((
        PathBuf::from("stdout"),
        String::from_utf8_lossy(&o.stdout).into(),
    ));
    outputs.push((
        PathBuf::from("stderr"),
        String::from_utf8_lossy(&o.stderr).into(),
    ));
    for (path, body) in &outputs {
        for t in tokens {
            assert!(
                !body.contains(t.as_str()),
                "{} shows the token {t}",
                path.display()
            );
        }
    }
}

/// `stress` with `--auth-cmd` against tokens that expire after 10 requests: the requests a
/// 401 refused go out once more with the new token (one run of the command for all the keys
/// that met the same expiry), so every key passes, the report counts the requests sent again,
/// and no token appears in any output. Before, every key with a 401 failed. A command that
/// gives no new token makes the run an ERROR naming --auth-cmd, not a FAIL.
#[test]
fn stress_renews_an_expiring_auth_cmd_credential() {
    let server = common::python::start("fixtures/servers/expiring_token.py", &["--uses", "10"]);
    let dir = tempfile::tempdir().unwrap();
    let issued = dir.path().join("issued.log");
    let commands = token_commands(&server.base, dir.path(), &issued);
    let stress = |cmd: &str, out: &Path| {
        std::fs::create_dir_all(out).unwrap();
        bin()
            .args(["stress", &format!("{}/pay", server.base)])
            .args(["-H", "Content-Type: application/json"])
            .args(["-d", r#"{"amount":5,"ref":"{{unique}}"}"#])
            .args(["--id-pointer", "/id"])
            .args(["--count-url", &format!("{}/count", server.base)])
            .args(["--keys", "24", "--duplicates", "4", "--concurrency", "4"])
            .args(["--auth-cmd", cmd, "--color", "never"])
            .args(report_args(out, "s"))
            .output()
            .unwrap()
    };

    let renewed = dir.path().join("renewed");
    let o = stress(&commands[0], &renewed);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(renewed.join("s.json")).unwrap()).unwrap();
    assert_eq!(report["result"]["outcome"], "PASS", "{stdout}");
    assert_eq!(report["keys_completed"], 24);
    let resent = report["sent_with_new_credential"].as_u64().unwrap_or(0);
    assert!(resent > 0, "some requests met an expired token: {stdout}");
    assert!(
        stdout.contains(&format!(
            "credential:  {resent} requests answered 401 were sent again"
        )),
        "{stdout}"
    );
    let tokens = issued_tokens(&issued);
    // The pre-flight's few requests, then 96 and 2 counter reads, at 10 per token: at least 10
    // tokens, each fetched once (one fetch per refused request would be dozens).
    assert!(tokens.len() >= 10, "{tokens:?}");
    assert!(
        tokens.len() <= 13,
        "one fetch per expiry, not one per refused request: {} tokens",
        tokens.len()
    );
    assert_no_token_shown(&renewed, &o, &tokens);

    let failing = dir.path().join("failing");
    let o = stress(&commands[1], &failing);
    assert_eq!(
        o.status.code(),
        Some(3),
        "an ERROR, not a FAIL: {}",
        text(&o)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(failing.join("s.json")).unwrap()).unwrap();
    assert_eq!(report["result"]["outcome"], "ERROR");
    let reason = report["result"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("--auth-cmd failed (exit status: 7)") && reason.contains("fix --auth-cmd"),
        "{reason}"
    );
}

/// `--auth-cmd` against tokens that expire after 12 requests (`expiring_token.py`, an OAuth
/// client-credentials API): each 401 runs the command again and the request goes out once more
/// with the new token, so the run PASSes, the timeline says which request was sent again and
/// why, and no token the command printed appears in any output. A command that cannot give a
/// new token makes the probe that met the 401 an ERROR naming --auth-cmd and stops the run:
/// the 401s say nothing of the API, so nothing FAILs.
#[test]
fn auth_cmd_fetches_a_new_token_when_the_api_answers_401() {
    let server = common::python::start("fixtures/servers/expiring_token.py", &["--uses", "12"]);
    let dir = tempfile::tempdir().unwrap();
    let issued = dir.path().join("issued.log");
    let commands = token_commands(&server.base, dir.path(), &issued);
    let probes = "replay-identity,payload-mismatch,mismatch-no-poison,tenant-isolation,distinct-keys-independent";
    let run = |cmd: &str, out: &Path| {
        std::fs::create_dir_all(out).unwrap();
        bin()
            .args(["run", &format!("{}/pay", server.base)])
            .args(["-H", "Content-Type: application/json"])
            .args(["-d", r#"{"amount":5,"ref":"{{unique}}"}"#])
            .args([
                "--id-pointer",
                "/id",
                "--count-url",
                &format!("{}/count", server.base),
            ])
            .args(["--tenant-b-header", "Authorization: Bearer tb"])
            .args(["--auth-cmd", cmd, "--probe", probes])
            .args(report_args(out, "r"))
            .output()
            .unwrap()
    };

    let refreshed = dir.path().join("refreshed");
    let o = run(&commands[0], &refreshed);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let tokens = issued_tokens(&issued);
    assert!(tokens.len() >= 3, "the token was fetched again: {tokens:?}");
    let json = std::fs::read_to_string(refreshed.join("r.json")).unwrap();
    assert!(
        json.contains("sent again with a new credential: the API answered 401"),
        "the timeline says which request went out twice, and why"
    );
    assert_no_token_shown(&refreshed, &o, &tokens);

    let failing = dir.path().join("failing");
    let o = run(&commands[1], &failing);
    assert_eq!(
        o.status.code(),
        Some(3),
        "an ERROR, not a FAIL: {}",
        text(&o)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(failing.join("r.json")).unwrap()).unwrap();
    let outcomes: Vec<(&str, &str, &str)> = report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap(),
                p["outcome"].as_str().unwrap(),
                p["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(
        outcomes.iter().all(|(_, o, _)| *o != "FAIL"),
        "{outcomes:?}"
    );
    assert!(
        outcomes
            .iter()
            .any(|(_, o, r)| *o == "ERROR" && r.contains("--auth-cmd failed (exit status: 7)")),
        "the ERROR names --auth-cmd and why: {outcomes:?}"
    );
}
