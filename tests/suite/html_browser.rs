//! The HTML report in a real browser. The binary writes pages for a run against the reference
//! server with the race fault, a `run --openapi` over its two operations, a run against a server
//! that echoes control bytes back, a stress run and a client run; headless Chromium (Debian's
//! `chromium`, which `scripts/test` installs) opens each, and the test checks through the
//! DevTools protocol that the page renders with no console error and fetches nothing but
//! itself, runs no script, opens its FAIL probes, and lays out its SVG charts; then it takes a
//! full-page screenshot (kept in `$IDEM_CHECK_SCREENSHOTS` when that names a folder).
//!
//! The protocol goes over `--remote-debugging-pipe` (NUL-separated JSON on file descriptors 3
//! and 4, which a shell `exec` maps onto the child's stdin and stdout), so no WebSocket client
//! and no port are needed. Every wait has a deadline, and the browser's process group is killed
//! when the test ends, however it ends.

use crate::common;

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

use common::binary::{bin, text};

/// How long one page may take in the browser, start to screenshot.
const BROWSER_DEADLINE: Duration = Duration::from_secs(90);

/// Set by `scripts/test`, which installs Chromium: a missing browser is then a failure, not a
/// skip.
const REQUIRE: &str = "IDEM_CHECK_REQUIRE_BROWSER";

/// The Chromium binary: `$IDEM_CHECK_CHROMIUM`, else the first of the usual names on `PATH`.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("IDEM_CHECK_CHROMIUM") {
        return Some(p.into());
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// A headless Chromium driven over its DevTools pipe, killed (with its whole process group)
/// when dropped.
struct Browser {
    child: Child,
    to: ChildStdin,
    from: Receiver<Value>,
    next_id: u64,
    session: Option<String>,
    /// Events seen so far, in order.
    events: Vec<Value>,
    deadline: Instant,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Starts the browser on an empty page with a fresh profile and attaches to that page.
    /// Its scratch folders (`org.chromium.Chromium.*`, which a killed browser cannot remove)
    /// go under the profile through `TMPDIR`, so they go with it.
    fn start(binary: &Path) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let scratch = profile.path().join("tmp");
        std::fs::create_dir(&scratch).unwrap();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("exec \"$@\" 3<&0 4>&1 0</dev/null 1>/dev/null")
            .arg("sh")
            .arg(binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-pipe",
            ])
            .arg(format!(
                "--user-data-dir={}",
                profile.path().join("profile").display()
            ))
            .arg("about:blank")
            .env("TMPDIR", &scratch)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let to = child.stdin.take().unwrap();
        let mut from = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut message = Vec::new();
            while from.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                if message.last() == Some(&0) {
                    message.pop();
                }
                let Ok(v) = serde_json::from_slice::<Value>(&message) else {
                    return;
                };
                if tx.send(v).is_err() {
                    return;
                }
                message.clear();
            }
        });
        let mut b = Browser {
            child,
            to,
            from: rx,
            next_id: 0,
            session: None,
            events: Vec::new(),
            deadline: Instant::now() + BROWSER_DEADLINE,
            _profile: profile,
        };
        let targets = b.call("Target.getTargets", json!({}));
        let page = targets["targetInfos"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["type"] == "page"))
            .and_then(|t| t["targetId"].as_str())
            .unwrap_or_else(|| panic!("no page target: {targets}"))
            .to_string();
        let attached = b.call(
            "Target.attachToTarget",
            json!({"targetId": page, "flatten": true}),
        );
        b.session = Some(attached["sessionId"].as_str().unwrap().to_string());
        b
    }

    /// The next message, or a panic at the deadline.
    fn recv(&mut self) -> Value {
        let left = self.deadline.saturating_duration_since(Instant::now());
        self.from
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("no answer from the browser within the deadline ({e})"))
    }

    /// Sends a command (to the attached page once there is one) and returns its result;
    /// events that arrive meanwhile are kept.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        self.to.flush().unwrap();
        loop {
            let m = self.recv();
            if m["id"] == id {
                assert!(m.get("error").is_none(), "{method}: {m}");
                return m["result"].clone();
            }
            self.events.push(m);
        }
    }

    /// Waits for an event named `method`.
    fn wait_for(&mut self, method: &str) {
        while !self.events.iter().any(|e| e["method"] == method) {
            let m = self.recv();
            self.events.push(m);
        }
    }

    /// The value of a JavaScript expression evaluated in the page (the page has no script of
    /// its own; this is the test looking at it).
    fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{r}");
        r["result"]["value"].clone()
    }
}

/// What the test saw of a page.
struct Seen {
    /// (anchor, outcome, open) per probe.
    probes: Vec<(String, String, bool)>,
    /// (class, width, height) per chart outside a closed probe.
    charts: Vec<(String, f64, f64)>,
    /// The full-page screenshot.
    png: Vec<u8>,
    /// The page's size in CSS pixels.
    size: (f64, f64),
    /// Sections of probes (one per operation of `run --openapi`).
    sections: u64,
}

/// What a page lays out, as the test reads it from the DOM.
const LOOK: &str = r#"(() => {
  const probes = [...document.querySelectorAll('details.probe')]
    .map(d => [d.id, d.dataset.outcome, d.open]);
  const charts = [...document.querySelectorAll('svg.chart')]
    .filter(s => s.closest('details:not([open])') === null)
    .map(s => { const r = s.getBoundingClientRect(); return [s.getAttribute('class'), r.width, r.height]; });
  return {probes, charts, scripts: document.scripts.length,
          sections: document.querySelectorAll('section.probes').length};
})()"#;

/// Opens `page` in the browser and checks what every page must do: load with no console
/// error, request nothing but itself, run no script, and have every FAIL probe open.
fn open_page(page: &Path, shot_name: &str) -> Seen {
    let browser = chromium().unwrap_or_else(|| {
        panic!(
            "Chromium is needed to test the HTML report: apt-get install chromium (scripts/test \
             installs it)"
        )
    });
    let mut b = Browser::start(&browser);
    for domain in ["Runtime", "Log", "Page", "Network"] {
        b.call(&format!("{domain}.enable"), json!({}));
    }
    b.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
    );
    let url = format!("file://{}", page.display());
    b.call("Page.navigate", json!({"url": url}));
    b.wait_for("Page.loadEventFired");
    let look = b.eval(LOOK);
    let metrics = b.call("Page.getLayoutMetrics", json!({}));
    let (w, h) = (
        metrics["cssContentSize"]["width"].as_f64().unwrap(),
        metrics["cssContentSize"]["height"].as_f64().unwrap(),
    );
    let shot = b.call(
        "Page.captureScreenshot",
        json!({"format": "png", "captureBeyondViewport": true,
               "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}}),
    );
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data"].as_str().unwrap())
        .unwrap();
    let errors: Vec<&Value> = b
        .events
        .iter()
        .filter(|e| match e["method"].as_str() {
            Some("Runtime.exceptionThrown") => true,
            Some("Runtime.consoleAPICalled") => {
                matches!(e["params"]["type"].as_str(), Some("error" | "assert"))
            }
            Some("Log.entryAdded") => e["params"]["entry"]["level"] == "error",
            _ => false,
        })
        .collect();
    assert!(errors.is_empty(), "console errors: {errors:?}");
    let requests: Vec<&str> = b
        .events
        .iter()
        .filter(|e| e["method"] == "Network.requestWillBeSent")
        .filter_map(|e| e["params"]["request"]["url"].as_str())
        .collect();
    assert_eq!(requests, vec![url.as_str()], "the page fetched something");
    assert_eq!(look["scripts"], 0);
    let probes: Vec<(String, String, bool)> = look["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_str().unwrap().into(),
                p[1].as_str().unwrap().into(),
                p[2].as_bool().unwrap(),
            )
        })
        .collect();
    for (id, outcome, open) in &probes {
        if outcome == "FAIL" {
            assert!(open, "the FAIL probe {id} is closed");
        }
    }
    let charts = look["charts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c[0].as_str().unwrap().into(),
                c[1].as_f64().unwrap(),
                c[2].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let png_size = (
        u32::from_be_bytes(png[16..20].try_into().unwrap()),
        u32::from_be_bytes(png[20..24].try_into().unwrap()),
    );
    assert_eq!(
        png_size,
        (w.round() as u32, h.round() as u32),
        "the screenshot is not the whole page"
    );
    if let Some(dir) = std::env::var_os("IDEM_CHECK_SCREENSHOTS") {
        let path = Path::new(&dir).join(format!("{shot_name}.png"));
        std::fs::write(&path, &png).unwrap();
        eprintln!(
            "{shot_name}: {} bytes of HTML, {w}×{h} CSS px, screenshot {}",
            std::fs::metadata(page).unwrap().len(),
            path.display()
        );
    }
    Seen {
        probes,
        charts,
        png,
        size: (w, h),
        sections: look["sections"].as_u64().unwrap(),
    }
}

/// Whether the browser can be used; without it the test is skipped with a message, unless
/// `scripts/test` (which installs it) says it must be there.
fn browser_present() -> bool {
    if chromium().is_some() {
        return true;
    }
    assert!(
        std::env::var_os(REQUIRE).is_none(),
        "{REQUIRE} is set but no Chromium was found: apt-get install chromium"
    );
    eprintln!(
        "skipped: no Chromium on PATH to open the HTML report in (apt-get install chromium, or \
         run scripts/test, which installs it)"
    );
    false
}

/// Runs `idem-check ARGS --report-html PAGE AFTER` (PAGE in a fresh folder; AFTER is what must
/// come last, as the client command's `-- CMD`), expects the exit code of a FAIL (4), and opens
/// PAGE with the screenshot named `name`.
fn failing_page(name: &str, args: &[&str], after: &[&str]) -> Seen {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join(format!("{name}.html"));
    let o = bin()
        .args(args)
        .arg("--report-html")
        .arg(&page)
        .args(after)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    open_page(&page, name)
}

/// The ids of the probes that FAILed on the page.
fn failed_probes(seen: &Seen) -> Vec<&str> {
    seen.probes
        .iter()
        .filter(|p| p.1 == "FAIL")
        .map(|p| p.0.as_str())
        .collect()
}

/// The visible charts of `seen` whose class contains `kind`, each with a real size.
fn drawn(seen: &Seen, kind: &str) -> usize {
    seen.charts
        .iter()
        .filter(|(class, _, _)| class.split(' ').any(|c| c == kind))
        .inspect(|(class, w, h)| assert!(*w > 100.0 && *h > 10.0, "{class}: {w}×{h}"))
        .count()
}

/// The race fault's page: concurrent-duplicates FAILs and is open with its burst's arrival
/// spread and its timeline drawn; the passing probes stay closed.
#[test]
fn the_race_page_renders_in_chromium() {
    if !browser_present() {
        return;
    }
    let args = ["run", "--reference", "--reference-fault", "race"];
    let seen = failing_page("race", &args, &[]);
    let failed = failed_probes(&seen);
    assert_eq!(failed, ["concurrent-duplicates"], "{:?}", seen.probes);
    assert!(seen.probes.iter().filter(|p| p.1 == "PASS").all(|p| !p.2));
    assert!(drawn(&seen, "arrival") >= 1, "{:?}", seen.charts);
    assert!(drawn(&seen, "timeline") >= 1, "{:?}", seen.charts);
    assert!(seen.png.len() > 10_000 && seen.size.1 > 900.0);
}

/// `run --openapi` over the reference server's own document under the race fault: one section
/// per operation, each FAILing concurrent-duplicates open with its burst drawn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_page_renders_in_chromium() {
    if !browser_present() {
        return;
    }
    let reference =
        idem_check::reference::Reference::start(Some(idem_reference_server::Fault::Race))
            .await
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("openapi.html");
    let mut cmd = bin();
    cmd.args(["run", "--openapi"])
        .arg(format!("{}/openapi.json", reference.base))
        .arg("-H")
        .arg(format!("Authorization: Bearer {}", reference.token(0)))
        .args([
            "--probe",
            "first-request",
            "--probe",
            "concurrent-duplicates",
        ])
        .arg("--report-html")
        .arg(&page);
    let o = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    reference.stop().await.unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let seen = tokio::task::spawn_blocking(move || open_page(&page, "openapi"))
        .await
        .unwrap();
    assert_eq!(seen.sections, 2);
    let failed = failed_probes(&seen);
    assert!(
        failed.contains(&"o1-concurrent-duplicates"),
        "{:?}",
        seen.probes
    );
    assert!(drawn(&seen, "arrival") >= failed.len(), "{:?}", seen.charts);
}

/// A server that echoes every refused key, control bytes and all, in a response header
/// (tests/data/hostile.py --echo-key), under the key-syntax probes, which send such bytes on
/// purpose: the page holds no raw control character, shows the bytes as escapes, and renders
/// with no console error.
#[test]
fn a_page_of_echoed_control_bytes_renders_in_chromium() {
    if !browser_present() {
        return;
    }
    let server = common::python::start("tests/data/hostile.py", &["--echo-key"]);
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("echo.html");
    let o = bin()
        .arg("run")
        .arg(format!("{}/pay", server.base))
        .args(["-H", "Content-Type: application/json"])
        .args(["-d", r#"{"amount":5,"ref":"{{unique}}"}"#])
        .args(["--count-url", &format!("{}/count", server.base)])
        .args(["--probe", "key-syntax", "--timeout", "3s", "--strict"])
        .arg("--report-html")
        .arg(&page)
        .output()
        .unwrap();
    assert!(page.is_file(), "{}", text(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'),
        "a raw control character on the page"
    );
    assert!(html.contains("x-echo-key: "), "the echoed header is shown");
    let escaped = (0u8..0x20).any(|b| html.contains(&format!("\\x{b:02X}")));
    assert!(escaped, "no control byte shown as an escape");
    let seen = open_page(&page, "echo");
    assert!(seen.probes.len() >= 5, "{:?}", seen.probes);
}

/// A stress page over the race fault: the load charts (statuses, latency histograms, burst
/// spread) and the FAILed key's burst are drawn.
#[test]
fn the_stress_page_renders_in_chromium() {
    if !browser_present() {
        return;
    }
    let args = [
        "stress",
        "--reference",
        "--reference-fault",
        "race",
        "--keys",
        "40",
        "--duplicates",
        "8",
        "--concurrency",
        "16",
    ];
    let seen = failing_page("stress", &args, &[]);
    assert_eq!(seen.probes.len(), 1);
    for kind in ["statuses", "latency", "spread", "arrival", "timeline"] {
        assert!(
            drawn(&seen, kind) >= 1,
            "no {kind} chart: {:?}",
            seen.charts
        );
    }
}

/// A client page: a client that changes its key on retry FAILs client-lost-response, and each
/// scenario's attempts are drawn.
#[test]
fn the_client_page_renders_in_chromium() {
    if !browser_present() {
        return;
    }
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/clients/client.py");
    let args = [
        "client",
        "--scenario",
        "created",
        "--scenario",
        "lost-response",
    ];
    let command = [
        "--",
        "python3",
        client.to_str().unwrap(),
        "--defect",
        "new-key-per-retry",
    ];
    let seen = failing_page("client", &args, &command);
    assert!(
        seen.probes
            .iter()
            .any(|p| p.0 == "client-lost-response" && p.1 == "FAIL"),
        "{:?}",
        seen.probes
    );
    assert_eq!(drawn(&seen, "client"), 2, "{:?}", seen.charts);
}
