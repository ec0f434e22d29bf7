//! The reference consumer accepts what real senders send: deliveries signed by the senders' own
//! libraries (`standardwebhooks`, `svix`, `stripe`, `slack_sdk` from PyPI and
//! `@octokit/webhooks-methods` from npm, which `scripts/webhook-vendors` installs) are applied
//! once, and the same deliveries with their body changed are refused. The signers are
//! `tests/suite/vendors/sign.py` and `sign.mjs`; each library also verifies what it signed.
//!
//! The libraries are found in `$IDEM_CHECK_WEBHOOK_VENDORS`. Without it the test says so and
//! passes; `scripts/test` installs them and sets `IDEM_CHECK_REQUIRE_WEBHOOK_VENDORS`, which
//! turns their absence into a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::webhook::SECRET;
use crate::common::{start_on, Req, StoreKind, TestDb};

/// Where `scripts/webhook-vendors` installed the libraries.
const VENDORS: &str = "IDEM_CHECK_WEBHOOK_VENDORS";
/// Set by `scripts/test`: missing libraries are a failure, not a skip.
const REQUIRE: &str = "IDEM_CHECK_REQUIRE_WEBHOOK_VENDORS";

/// The installation folder, if there is one.
fn vendors() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os(VENDORS)?);
    let complete = dir.join("venv/bin/python").is_file()
        && dir
            .join("node/node_modules/@octokit/webhooks-methods")
            .is_dir();
    complete.then_some(dir)
}

/// The JSON lines a signer printed, or a panic with its stderr.
fn run_signer(command: &mut Command) -> Vec<serde_json::Value> {
    let out = command.output().expect("start the signer");
    assert!(
        out.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

fn signed_by_vendors(dir: &Path) -> Vec<serde_json::Value> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/suite/vendors");
    let mut deliveries = run_signer(
        Command::new(dir.join("venv/bin/python"))
            .arg(here.join("sign.py"))
            .arg(SECRET),
    );
    deliveries.extend(run_signer(
        Command::new("node")
            .arg(here.join("sign.mjs"))
            .arg(dir.join("node/node_modules"))
            .arg(SECRET),
    ));
    deliveries
}

fn request(delivery: &serde_json::Value, body: &[u8]) -> Req {
    let scheme = delivery["scheme"].as_str().expect("scheme");
    let mut req = Req::post(&format!("/webhooks/{scheme}"))
        .body(body.to_vec())
        .header("Content-Type", "application/json");
    for (name, value) in delivery["headers"].as_object().expect("headers") {
        req = req.header(name, value.as_str().expect("a header value"));
    }
    req
}

#[tokio::test]
async fn deliveries_signed_by_the_senders_libraries_are_accepted_once() {
    let Some(dir) = vendors() else {
        assert!(
            std::env::var_os(REQUIRE).is_none(),
            "{REQUIRE} is set but the libraries are not in ${VENDORS}: run scripts/webhook-vendors"
        );
        eprintln!(
            "skipped: no webhook vendor libraries (run scripts/webhook-vendors and set {VENDORS})"
        );
        return;
    };
    let deliveries = signed_by_vendors(&dir);
    let schemes: Vec<&str> = deliveries
        .iter()
        .map(|d| d["scheme"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(schemes, ["standard", "svix", "stripe", "slack", "github"]);

    let db = TestDb::new(StoreKind::Sqlite);
    let server = start_on(&db, |config| config.webhook_secret = Some(SECRET.into())).await;
    let client = server.client();
    for (n, delivery) in deliveries.iter().enumerate() {
        let library = delivery["library"].as_str().unwrap_or_default();
        let body = delivery["body"].as_str().expect("body").as_bytes();
        let mut tampered = body.to_vec();
        tampered.splice(1..1, br#""tampered":1,"#.iter().copied());
        let refused = client.send(&request(delivery, &tampered)).await;
        assert_eq!(
            refused.status,
            401,
            "{library}, tampered: {}",
            refused.text()
        );
        let accepted = client.send(&request(delivery, body)).await;
        assert_eq!(accepted.status, 200, "{library}: {}", accepted.text());
        let again = client.send(&request(delivery, body)).await;
        assert_eq!(again.status, 200, "{library}, again: {}", again.text());
        assert_eq!(client.webhook_count().await, n as u64 + 1, "{library}");
        eprintln!("{library}: accepted once, tampered refused");
    }
    server.stop().await;
}
