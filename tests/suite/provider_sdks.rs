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
//! Then design APIs built on Stripe's SDK ([`designs`]).

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
    /// The SDK speaks only HTTPS: the fake serves it with `--provider-tls`'s CA, which the SDK
    /// is told to trust.
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
    fn command(&self, dir: &Path, ca: Option<&Path>) -> tokio::process::Command {
        let mut c = tokio::process::Command::from(interpreter(dir, self.script));
        if let Some(ca) = ca {
            c.env("NODE_EXTRA_CA_CERTS", ca);
        }
        c.kill_on_drop(true);
        c
    }

    /// Runs one create call with `key`, `amount` and `reference`; the JSON line it printed.
    async fn create(
        &self,
        dir: &Path,
        ca: Option<&Path>,
        base: &str,
        key: &str,
        amount: u32,
        reference: &str,
    ) -> Value {
        let mut c = self.command(dir, ca);
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
    /// The folder the fake wrote its CA certificate to, when it serves HTTPS: kept for as long
    /// as the fake, which the SDK is told to trust through it.
    _ca_folder: Option<tempfile::TempDir>,
}

impl CrossCheck {
    async fn start(sdk: Sdk, dir: PathBuf) -> CrossCheck {
        let p = profile::find(sdk.profile).expect("a profile");
        let ca = sdk
            .tls
            .then(|| tempfile::tempdir().expect("a temporary folder"));
        let fake = match &ca {
            Some(folder) => FakeProvider::bind_tls(
                "127.0.0.1:0",
                Settings::of(p),
                &folder.path().join("provider-ca.pem"),
            ),
            None => FakeProvider::bind("127.0.0.1:0", Settings::of(p)),
        }
        .expect("the fake starts");
        CrossCheck {
            sdk,
            dir,
            fake,
            _ca_folder: ca,
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
        let ca = self.fake.ca_file();
        self.sdk
            .create(&self.dir, ca, &self.fake.url(), key, amount, token)
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

/// The design APIs on Stripe's SDK and their verdict tables.
mod designs;
