//! The fake provider's profiles against the providers' own SDKs (fixtures/provider_sdks/),
//! installed by `scripts/provider-sdks`: each SDK, pointed at the fake through its own base-URL
//! override and given a key through its own idempotency option, creates a payment that the fake
//! commits and the SDK parses; its own retries meet the fake's scripted 503 and in-progress
//! answers as they would meet the provider's; the provider's idempotency errors surface as the
//! SDK's own error classes. The fake is started and scripted through the library, as the
//! `downstream` probes do, on an ephemeral port. PayPal's server SDK
//! (`@paypal/paypal-server-sdk` 2.5.0) is not among them: it knows only its Production and
//! Sandbox hosts and has no base-URL setting to point it at the fake.
//!
//! Then design APIs built on Stripe's SDK (fixtures/provider_sdks/stripe_api.*), a correct one
//! and one per classic defect, each with its whole `downstream` verdict table, run through the
//! binary with the fake on `--provider-listen`.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use idem_check::provider::ledger::Call;
use idem_check::provider::profile;
use idem_check::provider::script::{Script, Step};
use idem_check::provider::{FakeProvider, Settings};
use serde_json::Value;

/// Where `scripts/provider-sdks` installed the SDKs.
const SDKS: &str = "IDEM_CHECK_PROVIDER_SDKS";
/// Set by `scripts/test`: missing SDKs are a failure, not a skip.
const REQUIRE_SDKS: &str = "IDEM_CHECK_REQUIRE_PROVIDER_SDKS";

/// The SDKs' folder, or `None` (the test skips, saying why) when they are not installed and
/// `scripts/test` did not ask for them.
fn sdks() -> Option<PathBuf> {
    let dir = std::env::var_os(SDKS).map(PathBuf::from).filter(|d| {
        d.join("node/node_modules/stripe/package.json").is_file()
            && d.join("venv/bin/python").is_file()
    });
    if dir.is_none() {
        assert!(
            std::env::var_os(REQUIRE_SDKS).is_none(),
            "{REQUIRE_SDKS} is set but the SDKs are not in ${SDKS}: run scripts/provider-sdks"
        );
        eprintln!("skipped: no provider SDKs (run scripts/provider-sdks and set {SDKS})");
    }
    dir
}

/// The longest one SDK script may run: its own retries back off for a few seconds at most.
const SCRIPT_LIMIT: Duration = Duration::from_secs(60);

/// One SDK script of fixtures/provider_sdks/ and how it is run.
#[derive(Clone, Copy)]
struct Sdk {
    /// The package, as the table names it.
    name: &'static str,
    profile: &'static str,
    script: &'static str,
    /// The SDK speaks only HTTPS: it reaches the fake through [`tls_front`].
    tls: bool,
}

/// `script` of fixtures/provider_sdks/ as a command: under the SDKs' Python, or under Node
/// with the SDKs' node_modules.
fn interpreter(dir: &Path, script: &str) -> std::process::Command {
    let path = fixture(script);
    let mut c = if script.ends_with(".py") {
        std::process::Command::new(dir.join("venv/bin/python"))
    } else {
        let mut c = std::process::Command::new("node");
        c.env("NODE_PATH", dir.join("node/node_modules"));
        c
    };
    c.arg(path).env("PYTHONDONTWRITEBYTECODE", "1");
    c
}

fn fixture(script: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/provider_sdks")
        .join(script)
}

impl Sdk {
    fn command(&self, dir: &Path) -> tokio::process::Command {
        let mut c = tokio::process::Command::from(interpreter(dir, self.script));
        if self.tls {
            c.env("NODE_EXTRA_CA_CERTS", test_cert());
        }
        c.kill_on_drop(true);
        c
    }

    /// Runs one create call with `key`, `amount` and `reference`; the JSON line it printed.
    async fn create(
        &self,
        dir: &Path,
        base: &str,
        key: &str,
        amount: u32,
        reference: &str,
    ) -> Value {
        let mut c = self.command(dir);
        c.args([base, key, &amount.to_string(), reference]);
        let out = tokio::time::timeout(SCRIPT_LIMIT, c.output())
            .await
            .unwrap_or_else(|_| panic!("{} ran longer than {SCRIPT_LIMIT:?}", self.script))
            .expect("the SDK script runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .unwrap_or_else(|| {
                panic!(
                    "{}: no JSON line\nstdout:\n{stdout}\nstderr:\n{}",
                    self.script,
                    String::from_utf8_lossy(&out.stderr)
                )
            })
    }
}

/// The certificate [`tls_front`] presents, for the SDK to trust.
fn test_cert() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/race_engine/cert.pem")
}

/// A TLS terminator in front of the fake at `to`, for an SDK that refuses plain HTTP (the fake
/// has no `--provider-tls` yet): each connection is decrypted and piped to the fake as it is,
/// so a connection the fake closes is closed to the SDK too. Its base URL.
async fn tls_front(to: SocketAddr) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let port = listener.local_addr().unwrap().port();
    let acceptor = common::tls::test_acceptor(&[b"http/1.1"]);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut fake) = tokio::net::TcpStream::connect(to).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut fake).await;
            });
        }
    });
    format!("https://127.0.0.1:{port}")
}

/// What one scenario showed: the SDK's answer, and what reached the fake.
#[derive(Debug)]
struct Seen {
    answer: Value,
    calls: usize,
    /// Distinct keys among the calls.
    keys: usize,
    /// Calls without a key in the profile's carrier.
    keyless: usize,
    charges: usize,
}

impl Seen {
    fn of(answer: Value, calls: &[Call], charges: usize) -> Seen {
        let mut keys: Vec<_> = calls.iter().map(|c| c.key.clone()).collect();
        keys.sort();
        keys.dedup();
        Seen {
            answer,
            calls: calls.len(),
            keys: keys.len(),
            keyless: calls.iter().filter(|c| c.key.is_none()).count(),
            charges,
        }
    }

    /// `ok`, or the SDK's error class with the status and the code it read, e.g.
    /// `StripeAPIError 409 idempotency_key_in_use`.
    fn outcome(&self) -> String {
        if self.answer["ok"] == true {
            return "ok".into();
        }
        let mut o = format!(
            "{} {}",
            self.answer["class"].as_str().unwrap_or("?"),
            self.answer["status"]
        );
        if let Some(code) = self.answer["code"].as_str() {
            o = format!("{o} {code}");
        }
        o
    }
}

/// Every scenario of one SDK against a fresh fake playing its profile.
struct CrossCheck {
    sdk: Sdk,
    dir: PathBuf,
    fake: Arc<FakeProvider>,
    /// Where the SDK is pointed: the fake, or the TLS terminator in front of it.
    base: String,
}

impl CrossCheck {
    async fn start(sdk: Sdk, dir: PathBuf) -> CrossCheck {
        let p = profile::find(sdk.profile).expect("a profile");
        let fake = FakeProvider::bind("127.0.0.1:0", Settings::of(p)).expect("the fake starts");
        let base = if sdk.tls {
            tls_front(fake.addr()).await
        } else {
            fake.url()
        };
        CrossCheck {
            sdk,
            dir,
            fake,
            base,
        }
    }

    /// A token of its own for each scenario, armed with `script`, so calls are attributed.
    fn token(&self, scenario: &str, script: Script) -> String {
        let token = format!(
            "{}-{scenario}-{}",
            self.sdk.profile,
            uuid::Uuid::new_v4().simple()
        );
        self.fake.arm(&token, script);
        token
    }

    async fn create(&self, key: &str, amount: u32, token: &str) -> Value {
        self.sdk
            .create(&self.dir, &self.base, key, amount, token)
            .await
    }

    async fn seen(&self, answer: Value, token: &str) -> Seen {
        self.fake
            .settle(token, Duration::from_millis(100), Duration::from_secs(20))
            .await;
        Seen::of(
            answer,
            &self.fake.calls(token),
            self.fake.charges(token).len(),
        )
    }

    /// A plain create: the fake commits one charge and the SDK parses its id.
    async fn created(&self) -> Seen {
        let token = self.token("create", Script::normal());
        let k = key("create");
        let answer = self.create(&k, 1250, &token).await;
        assert_eq!(answer["ok"], true, "{}: {answer}", self.sdk.name);
        let seen = self.seen(answer, &token).await;
        let charge = self.fake.charges(&token);
        assert_eq!(
            seen.answer["id"].as_str(),
            charge.first().map(|c| c.id.as_str()),
            "{}: the SDK parsed the committed charge's id: {seen:?}",
            self.sdk.name
        );
        assert_eq!(
            self.fake.calls(&token)[0].key.as_deref(),
            Some(k.as_str()),
            "{}: the SDK's idempotency option reached the profile's carrier",
            self.sdk.name
        );
        seen
    }

    /// The first call answered 503, then the profile.
    async fn after_503(&self) -> Seen {
        let token = self.token("retry", Script::first(&[Step::Unavailable]));
        let answer = self.create(&key("retry"), 1250, &token).await;
        self.seen(answer, &token).await
    }

    /// Every call answered 503.
    async fn always_503(&self) -> Seen {
        let token = self.token("down", Script::always(Step::Unavailable));
        let answer = self.create(&key("down"), 1250, &token).await;
        self.seen(answer, &token).await
    }

    /// Every call answered the profile's in-progress conflict.
    async fn in_progress(&self) -> Seen {
        let token = self.token("busy", Script::always(Step::InProgress));
        let answer = self.create(&key("busy"), 1250, &token).await;
        self.seen(answer, &token).await
    }

    /// A completed key sent again with another amount.
    async fn mismatch(&self) -> Seen {
        let token = self.token("mismatch", Script::normal());
        let k = key("mismatch");
        let first = self.create(&k, 1250, &token).await;
        assert_eq!(first["ok"], true, "{}: {first}", self.sdk.name);
        let answer = self.create(&k, 999, &token).await;
        if answer["ok"] == true {
            assert_eq!(
                answer["id"], first["id"],
                "{}: an SDK that swallows the conflict returns the first payment",
                self.sdk.name
            );
        }
        self.seen(answer, &token).await
    }
}

/// A key of the shape an API derives, unique per run.
fn key(scenario: &str) -> String {
    format!(
        "pay-{scenario}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// What one SDK must show in each scenario: the outcome (`ok`, or the SDK's error class, the
/// status and the code it read) and the calls that reached the fake (all with one key). A
/// profile whose provider holds a second call until the first commits (InProgress::
/// WaitThenRepeat) has no in-progress answer to parse: `in_progress` is `None` there.
struct Expected {
    sdk: Sdk,
    after_503: (&'static str, usize),
    always_503: (&'static str, usize),
    in_progress: Option<(&'static str, usize)>,
    mismatch: &'static str,
}

/// Runs every scenario for `e.sdk` and compares; returns the table row.
async fn cross_check(dir: PathBuf, e: &Expected) -> String {
    let check = CrossCheck::start(e.sdk, dir).await;
    let created = check.created().await;
    let after_503 = check.after_503().await;
    let always_503 = check.always_503().await;
    let in_progress = match e.in_progress {
        Some(_) => Some(check.in_progress().await),
        None => None,
    };
    let mismatch = check.mismatch().await;
    let busy = in_progress
        .as_ref()
        .map_or("(the provider waits)".into(), |s| {
            format!("{} ({} calls)", s.outcome(), s.calls)
        });
    let row = format!(
        "| {} | {} | {} ({} calls) | {} ({} calls) | {busy} | {} |",
        e.sdk.name,
        created.outcome(),
        after_503.outcome(),
        after_503.calls,
        always_503.outcome(),
        always_503.calls,
        mismatch.outcome(),
    );
    println!("{row}");
    let name = e.sdk.name;
    assert_eq!((created.calls, created.charges), (1, 1), "{name}: {row}");
    let scenarios = [
        (Some(&after_503), Some(e.after_503)),
        (Some(&always_503), Some(e.always_503)),
        (in_progress.as_ref(), e.in_progress),
    ];
    for (seen, expected) in scenarios {
        let (Some(seen), Some((outcome, calls))) = (seen, expected) else {
            continue;
        };
        // Only a call answered normally charges.
        let charges = usize::from(outcome == "ok");
        assert_eq!(
            (
                seen.outcome().as_str(),
                seen.calls,
                seen.keys,
                seen.keyless,
                seen.charges
            ),
            (outcome, calls, 1, 0, charges),
            "{name}: {row}\n{seen:?}"
        );
    }
    assert_eq!(
        (mismatch.outcome().as_str(), mismatch.charges),
        (e.mismatch, 1),
        "{name}: {row}"
    );
    row
}

macro_rules! sdk_cross_checks {
    ($($test:ident => $expected:expr;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                let Some(dir) = sdks() else { return };
                cross_check(dir, &$expected).await;
            }
        )*
    };
}

sdk_cross_checks! {
    stripe_node => Expected {
        sdk: Sdk { name: "stripe (npm)", profile: "stripe", script: "stripe_sdk.mjs", tls: false },
        after_503: ("ok", 2),
        always_503: ("StripeAPIError 503", 3),
        in_progress: Some(("StripeAPIError 409 idempotency_key_in_use", 3)),
        mismatch: "StripeIdempotencyError 400",
    };
    stripe_python => Expected {
        sdk: Sdk { name: "stripe (PyPI)", profile: "stripe", script: "stripe_sdk.py", tls: false },
        after_503: ("ok", 2),
        always_503: ("APIError 503", 3),
        in_progress: Some(("APIError 409 idempotency_key_in_use", 3)),
        mismatch: "IdempotencyError 400",
    };
    square_node => Expected {
        sdk: Sdk { name: "square (npm)", profile: "square", script: "square_sdk.mjs", tls: false },
        after_503: ("ok", 2),
        always_503: ("SquareError 503 SERVICE_UNAVAILABLE", 3),
        in_progress: None,
        mismatch: "SquareError 400 IDEMPOTENCY_KEY_REUSED",
    };
    adyen_node => Expected {
        sdk: Sdk { name: "@adyen/api-library (npm)", profile: "adyen", script: "adyen_sdk.mjs", tls: true },
        after_503: ("HttpClientException 503 000", 1),
        always_503: ("HttpClientException 503 000", 1),
        in_progress: Some(("HttpClientException 422 704", 1)),
        mismatch: "HttpClientException 422 704",
    };
    // A repeated key, whatever its parameters, is GoCardless's 409 naming the payment it
    // created; the library reads that payment and returns it: the mismatch is `ok`, the first
    // payment.
    gocardless_python => Expected {
        sdk: Sdk { name: "gocardless_pro (PyPI)", profile: "gocardless", script: "gocardless_sdk.py", tls: false },
        after_503: ("GoCardlessInternalError 503 service_unavailable", 1),
        always_503: ("GoCardlessInternalError 503 service_unavailable", 1),
        in_progress: None,
        mismatch: "ok",
    };
    checkout_node => Expected {
        sdk: Sdk { name: "checkout-sdk-node (npm)", profile: "checkout", script: "checkout_sdk.mjs", tls: false },
        after_503: ("ApiError 503 service_unavailable", 1),
        always_503: ("ApiError 503 service_unavailable", 1),
        in_progress: Some(("UrlAlreadyRegistered 409 request_in_progress", 1)),
        mismatch: "UrlAlreadyRegistered 409 idempotency_key_reused",
    };
}

/// A design API of fixtures/provider_sdks/ built on Stripe's SDK, with the (probe, check)
/// pairs its defect must fail; every other downstream probe must PASS, except the two that
/// need a restart hook on a Node design, which keeps its claims in memory and is run without
/// one (they SKIP naming --restart-cmd). The Python designs keep theirs in SQLite and are
/// restarted for real.
struct Design {
    name: &'static str,
    script: &'static str,
    args: &'static [&'static str],
    fails: &'static [(&'static str, &'static str)],
}

const NEEDS_RESTART: [&str; 2] = ["prov-crash-after-call", "prov-restart-replay"];

/// The longest one checker run may take.
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// A free port on 127.0.0.1 for the fake provider: the API must be told the fake's address
/// before the checker starts the fake there.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().unwrap().port()
}

/// A Python design started through a launch script that records the running instance's pid,
/// with a restart script for `--restart-cmd`: it stops that instance, waits until it no longer
/// answers, and launches another on the same port and database (retrying while the port is not
/// yet free). Dropped, it stops the instance running then.
struct Restartable {
    dir: tempfile::TempDir,
    port: u16,
}

impl Restartable {
    fn new(python: &Path, script: &Path, provider: &str, args: &[&str]) -> Restartable {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let at = |name: &str| dir.path().join(name).display().to_string();
        let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
        let launch = format!(
            "echo $$ > '{pid}'\nexec '{python}' '{script}' {port} --db '{db}' --provider-url '{provider}' --lifetime 300 {args}\n",
            pid = at("api.pid"),
            python = python.display(),
            script = script.display(),
            db = at("claims.sqlite"),
            args = quoted.join(" "),
        );
        let restart = format!(
            "kill \"$(cat '{pid}')\"\nn=0\nwhile curl -sf -o /dev/null 'http://127.0.0.1:{port}/ready' && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done\n(n=0; until sh '{launch}'; do n=$((n+1)); [ $n -ge 100 ] && exit 1; sleep 0.1; done) </dev/null >/dev/null 2>&1 &\n",
            pid = at("api.pid"),
            launch = at("launch.sh"),
        );
        std::fs::write(at("launch.sh"), launch).unwrap();
        std::fs::write(at("restart.sh"), restart).unwrap();
        Restartable { dir, port }
    }

    fn launch(&self) -> std::process::Command {
        let mut c = std::process::Command::new("sh");
        c.arg(self.dir.path().join("launch.sh"));
        c
    }

    fn restart_cmd(&self) -> String {
        format!("sh '{}'", self.dir.path().join("restart.sh").display())
    }

    fn ready_url(&self) -> String {
        format!("http://127.0.0.1:{}/ready", self.port)
    }
}

impl Drop for Restartable {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.path().join("api.pid")) {
            let _ = std::process::Command::new("kill").arg(pid.trim()).status();
        }
    }
}

/// Starts `design` pointed at the fake on a free port, runs the downstream probes against it
/// with the fake playing `stripe` there (a Python design restartable through
/// `--restart-cmd`), and returns the JSON report.
fn run_design(dir: &Path, design: &Design) -> Value {
    let port = free_port();
    let provider = format!("http://127.0.0.1:{port}");
    let restartable = design.script.ends_with(".py").then(|| {
        let python = dir.join("venv/bin/python");
        Restartable::new(&python, &fixture(design.script), &provider, design.args)
    });
    let command = match &restartable {
        Some(r) => r.launch(),
        None => {
            let mut c = interpreter(dir, design.script);
            c.args(["--provider-url", &provider, "--lifetime", "300"])
                .args(design.args);
            c
        }
    };
    let api = common::python::start_command(command, design.name);
    let restart: Vec<String> = match &restartable {
        Some(r) => vec![
            "--restart-cmd".into(),
            r.restart_cmd(),
            "--ready-url".into(),
            r.ready_url(),
        ],
        None => Vec::new(),
    };
    let out = tempfile::tempdir().unwrap();
    let report = out.path().join("report.json");
    let mut child = common::binary::bin()
        .arg("run")
        .arg(format!("{}/payments", api.base))
        .args([
            "-H",
            "Authorization: Bearer ta",
            "-H",
            "Content-Type: application/json",
        ])
        .args([
            "-d",
            r#"{"amount":1250,"currency":"EUR","reference":"{{unique}}"}"#,
        ])
        .args(["--tenant-b-header", "Authorization: Bearer tb"])
        .arg("--second-url")
        .arg(format!("{}/payouts", api.base))
        .args(["--provider-listen", &format!("127.0.0.1:{port}")])
        .args(["--provider", "stripe", "--probe", "downstream"])
        .args(&restart)
        // The designs' SDK gives up on an attempt after 2 s and retries twice: one client
        // request may take 8 s before the API answers 503.
        .args(["--timeout", "15s", "--color", "never", "--report-json"])
        .arg(&report)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the binary runs");
    common::binary::wait_bounded(&mut child, RUN_LIMIT);
    let text = std::fs::read_to_string(&report).expect("a JSON report");
    serde_json::from_str(&text).unwrap()
}

/// Runs `design` and checks its whole downstream table; returns its row.
fn design_table(dir: &Path, design: &Design) -> String {
    let report = run_design(dir, design);
    let outcomes: std::collections::BTreeMap<String, String> =
        common::json_report::probe_outcomes(&report);
    let failed: std::collections::BTreeSet<(String, String)> = report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            let id = p["id"].as_str().unwrap().to_string();
            p["checks"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["passed"] == false && c["severity"] != "info")
                .map(move |c| (id.clone(), c["id"].as_str().unwrap().to_string()))
        })
        .collect();
    let row = format!("{}: {outcomes:?}", design.name);
    println!("{row}");
    let want_failed: std::collections::BTreeSet<(String, String)> = design
        .fails
        .iter()
        .map(|(p, c)| (p.to_string(), c.to_string()))
        .collect();
    assert_eq!(failed, want_failed, "{row}");
    let downstream = idem_check::probes::catalog()
        .into_iter()
        .filter(|d| d.meta.group == idem_check::probes::Group::Downstream)
        .map(|d| d.meta.id);
    for id in downstream {
        let want = if NEEDS_RESTART.contains(&id) && !design.script.ends_with(".py") {
            "SKIP"
        } else if design.fails.iter().any(|(p, _)| *p == id) {
            "FAIL"
        } else {
            "PASS"
        };
        assert_eq!(
            outcomes.get(id).map(String::as_str),
            Some(want),
            "{id}\n{row}"
        );
    }
    row
}

macro_rules! design_tables {
    ($($test:ident => $design:expr;)*) => {
        $(
            #[test]
            fn $test() {
                let Some(dir) = sdks() else { return };
                design_table(&dir, &$design);
            }
        )*
    };
}

design_tables! {
    design_python_correct => Design {
        name: "stripe_api.py", script: "stripe_api.py", args: &[], fails: &[],
    };
    // Tenant B's charge under A's client key replays A's at the provider (both tenants use
    // one provider account), and a payout under a payment's key is refused by the provider's
    // parameter check, so the payout never happens.
    design_python_raw_client_key => Design {
        name: "stripe_api.py --defect raw-client-key",
        script: "stripe_api.py",
        args: &["--defect", "raw-client-key"],
        fails: &[
            ("prov-tenant-scope", "distinct-keys"),
            ("prov-tenant-scope", "two-charges"),
            ("prov-operation-scope", "distinct-keys"),
            ("prov-operation-scope", "both-effects"),
        ],
    };
    // Within one process every attempt carries the claim's key; after the restart the
    // retry of the unknown outcome carries a new one, and the committed charge is made again.
    design_python_key_in_memory => Design {
        name: "stripe_api.py --defect key-in-memory",
        script: "stripe_api.py",
        args: &["--defect", "key-in-memory"],
        fails: &[
            ("prov-crash-after-call", "pre-crash-key"),
            ("prov-crash-after-call", "one-charge"),
        ],
    };
    design_node_correct => Design {
        name: "stripe_api.mjs", script: "stripe_api.mjs", args: &[], fails: &[],
    };
    // The SDK's own key holds across its own retries of one call only: every client retry
    // after the SDK gave up is a new create call with a new key, and the charge committed
    // behind the lost answer is made again.
    design_node_sdk_key => Design {
        name: "stripe_api.mjs --defect sdk-key",
        script: "stripe_api.mjs",
        args: &["--defect", "sdk-key"],
        fails: &[
            ("prov-same-key-on-provider-retry", "same-key"),
            ("prov-lost-provider-response", "original-key"),
            ("prov-lost-provider-response", "one-charge"),
            ("prov-lost-provider-response", "resolved"),
        ],
    };
}
