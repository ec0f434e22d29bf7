//! `run --reference --provider PROFILE`: the bundled server calls the fake provider, which
//! plays each profile; the whole suite PASSes (a profile whose documentation names no
//! in-progress answer SKIPs `prov-in-progress-conflict`, saying so), and without
//! `--provider-listen` every downstream probe SKIPs naming it.

use crate::common;

use idem_check::config::{Config, RunOptions, TargetSpec};
use idem_check::outcome::Outcome;
use idem_check::probes::{catalog, Group};
use idem_check::provider::profile::{self, InProgress};
use idem_check::provider::{FakeProvider, Settings};
use idem_check::reference::{Calling, Reference};
use idem_check::report::RunReport;
use idem_reference_server::{Config as ServerConfig, DbLocation, ProviderProfile};

/// A strict run of every probe against the reference server calling the fake `profile`.
async fn run_with(profile: &str) -> RunReport {
    let p = profile::find(profile).expect("a profile");
    run_calling(p.into()).await
}

/// A strict run of every probe against the reference server calling the fake as `calling`
/// says.
async fn run_calling(calling: Calling<'_>) -> RunReport {
    let reference = Reference::start_calling(None, None, None, Some(calling))
        .await
        .expect("reference server starts");
    let opts = RunOptions {
        strict: true,
        ..common::run_options()
    };
    let config = Config::build(reference.target(), &opts, Some(reference.restart_hook()))
        .expect("reference target is valid");
    let report = common::run_quietly(config, &[]).await;
    reference.stop().await.expect("reference server stops");
    report
}

/// Every probe PASSes, the downstream ones included; only a profile without an in-progress
/// answer SKIPs the probe that needs one.
async fn all_pass(profile: &str) {
    all_pass_in(profile, run_with(profile).await);
}

/// [`all_pass`] for a run already made.
fn all_pass_in(profile: &str, report: RunReport) {
    let waits = profile::find(profile).unwrap().in_progress == InProgress::WaitThenRepeat;
    for p in &report.probes {
        let skip_ok = waits && p.id == "prov-in-progress-conflict";
        let ok = p.outcome == Outcome::Pass || (skip_ok && p.outcome == Outcome::Skip);
        assert!(ok, "{profile}:\n{}", common::outcomes(&report));
    }
    let downstream = catalog()
        .iter()
        .filter(|d| d.meta.group == Group::Downstream)
        .count();
    let ran = report
        .probes
        .iter()
        .filter(|p| p.id.starts_with("prov-"))
        .count();
    assert_eq!(ran, downstream, "every downstream probe ran");
    // The provider's side is in the evidence, beside the client's.
    let key_present = report
        .probes
        .iter()
        .find(|p| p.id == "prov-key-present")
        .unwrap();
    assert!(
        key_present.exchanges.iter().any(|e| e.role.at_provider
            && e.request
                .url
                .contains(profile::find(profile).unwrap().charge.path)),
        "{profile}: the provider call is an exchange of the probe"
    );
}

macro_rules! every_profile {
    ($($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                all_pass(stringify!($name)).await;
            }
        )*
    };
}

every_profile!(stripe, adyen, square, paypal, checkout, gocardless, generic);

/// Without `--provider-listen` nothing calls a provider: each downstream probe SKIPs naming the
/// flag, and every other probe runs as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downstream_probes_skip_without_a_provider() {
    let reference = Reference::start(None)
        .await
        .expect("reference server starts");
    let config = Config::build(
        reference.target(),
        &common::run_options(),
        Some(reference.restart_hook()),
    )
    .expect("reference target is valid");
    let report = common::run_quietly(config, &["downstream"]).await;
    reference.stop().await.expect("reference server stops");
    for p in report.probes.iter().filter(|p| p.id.starts_with("prov-")) {
        assert_eq!(p.outcome, Outcome::Skip, "{}", common::outcomes(&report));
        assert!(p.reason.contains("--provider-listen"), "{}", p.reason);
    }
}

/// A port already taken and an unknown profile are one line naming the flag.
#[test]
fn bad_provider_flags_name_the_flag() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let o = common::binary::bin()
        .args(["run", "http://127.0.0.1:9/pay", "--provider-listen", &addr])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("--provider-listen {addr}: cannot listen there")),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let o = common::binary::bin()
        .args(["run", "--reference", "--provider", "strpe"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("did you mean \"stripe\""), "{err}");
}

/// `prov-crash-after-call` against `run --reference`: the in-process kill ends the server while
/// the fake holds its call, the held call commits, the restart brings the server back, and the
/// retry reaches the provider again. The correct server reuses its persisted provider key (one
/// charge); under `prov-key-not-persisted` the restarted server has forgotten it and sends
/// another, so the provider charges twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_call_is_survived_by_a_persisted_provider_key_only() {
    let probe = "prov-crash-after-call";
    let report = common::run_reference(None, &[probe], true).await;
    let p = report.probes.iter().find(|p| p.id == probe).unwrap();
    assert_eq!(p.outcome, Outcome::Pass, "{}", common::outcomes(&report));
    assert!(
        p.timeline
            .iter()
            .any(|l| l.starts_with("killed by an in-process kill") && l.contains("--crash-cmd")),
        "{:?}",
        p.timeline
    );
    // The client saw the server die: no answer on the original's own connection.
    let original = p.exchanges.iter().find(|e| !e.role.at_provider).unwrap();
    assert!(original.response().is_none(), "{original:?}");

    let fault = idem_reference_server::Fault::ProvKeyNotPersisted;
    let report = common::run_reference(Some(fault), &[probe], true).await;
    let p = report.probes.iter().find(|p| p.id == probe).unwrap();
    assert_eq!(p.outcome, Outcome::Fail, "{}", common::outcomes(&report));
    let failed: Vec<&str> = p
        .checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(failed, ["pre-crash-key", "one-charge"], "{p:?}");
}

/// `prov-refused-no-call` sends a tenant the API does not know (tenant B's header with a value
/// no tenant has): the correct server refuses it 401 before any provider call, and the probe
/// PASSes. Without a second tenant that request is not sent, and the timeline names the input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tenant_is_refused_without_a_provider_call() {
    let probe = "prov-refused-no-call";
    let generic = profile::find("generic");
    let reference = Reference::start_calling(None, None, None, generic.map(Calling::from))
        .await
        .expect("reference server starts");
    let run = |target| async {
        let config = Config::build(
            target,
            &common::run_options(),
            Some(reference.restart_hook()),
        )
        .expect("reference target is valid");
        let report = common::run_quietly(config, &[probe]).await;
        report.probes.into_iter().find(|p| p.id == probe).unwrap()
    };
    let p = run(reference.target()).await;
    assert_eq!(p.outcome, Outcome::Pass, "{p:?}");
    let unknown = p
        .exchanges
        .iter()
        .find(|e| e.role == "a tenant no one is")
        .expect("the unknown tenant was sent");
    assert_eq!(unknown.status(), Some(401), "{unknown:?}");
    assert!(
        p.timeline.iter().any(|l| l
            == &format!(
                "#{} (a tenant no one is) got 401 and caused 0 provider calls",
                unknown.n
            )),
        "{:?}",
        p.timeline
    );
    let mut one_tenant = reference.target();
    one_tenant.tenant_b_headers.clear();
    let p = run(one_tenant).await;
    assert_eq!(p.outcome, Outcome::Pass, "{p:?}");
    assert!(p.exchanges.iter().all(|e| e.role != "a tenant no one is"));
    assert!(
        p.timeline
            .iter()
            .any(|l| l.starts_with("the wrong tenant: not sent") && l.contains("--tenant-b-header")),
        "{:?}",
        p.timeline
    );
    reference.stop().await.expect("reference server stops");
}

/// `--provider-tls`: the reference server calls the fake over HTTPS, trusting the CA it wrote,
/// and every probe still PASSes; the provider calls in the evidence went to `https://`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("provider-ca.pem");
    let report = run_calling(Calling {
        profile: profile::find("stripe").unwrap(),
        tls_ca: Some(&ca),
    })
    .await;
    let pem = std::fs::read_to_string(&ca).expect("the CA was written");
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
    let key_present = report
        .probes
        .iter()
        .find(|p| p.id == "prov-key-present")
        .unwrap();
    assert!(
        key_present
            .exchanges
            .iter()
            .any(|e| e.role.at_provider && e.request.url.starts_with("https://127.0.0.1:")),
        "the provider was called over HTTPS"
    );
    assert!(
        report
            .context
            .iter()
            .any(|l| l.contains(&format!("CA certificate written to {}", ca.display()))),
        "{:?}",
        report.context
    );
    all_pass_in("stripe", report);
}

/// A plain-HTTP client on the HTTPS fake gets a 400 that names the scheme to use, at once;
/// nothing is charged, and the fake remembers why the connection was turned away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_to_the_tls_fake_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let fake = FakeProvider::bind_tls(
        "127.0.0.1:0",
        Settings::of(profile::find("stripe").unwrap()),
        &ca,
    )
    .unwrap();
    let since = std::time::Instant::now();
    let answer = reqwest::Client::new()
        .post(format!("http://{}/v1/payment_intents", fake.addr()))
        .header("Idempotency-Key", "k1")
        .form(&[("amount", "1250"), ("currency", "eur")])
        .timeout(std::time::Duration::from_secs(10))
        .send()
        .await
        .expect("an answer, not a hang or a reset");
    assert_eq!(answer.status(), 400);
    let body = answer.text().await.unwrap();
    assert!(
        body.contains(&format!("call https://{}", fake.addr())) && body.contains("--provider-tls"),
        "{body}"
    );
    assert!(fake.all_calls().is_empty(), "no call reached the ledger");
    let refused = fake.refused_since(since);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].why.contains("plain-HTTP"), "{refused:?}");
}

/// An API that does not trust the fake's CA (the reference server without `--provider-ca`)
/// fails every provider call in its TLS handshake and answers 503: the run says so, naming the
/// handshake's failure and the CA file to trust, rather than judging keys it never saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_that_does_not_trust_the_ca_is_told_so() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let fake = FakeProvider::bind_tls(
        "127.0.0.1:0",
        Settings::of(profile::find("stripe").unwrap()),
        &ca,
    )
    .unwrap();
    let mut server = ServerConfig::new(DbLocation::File(dir.path().join("api.db")));
    server.provider_url = Some(fake.url());
    server.provider_profile = "stripe".parse::<ProviderProfile>().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(idem_reference_server::run(listener, server, async {
        let _ = stopped.await;
    }));
    let target = TargetSpec {
        url: format!("{base}/api/payments"),
        method: Some("POST".into()),
        headers: vec![
            "Authorization: Bearer token-a".into(),
            "Content-Type: application/json".into(),
        ],
        body: Some(r#"{"amountCents":1250,"currency":"EUR","reference":"{{unique}}"}"#.into()),
        id_pointer: Some("/id".into()),
        provider_started: Some(fake.clone()),
        ..TargetSpec::default()
    };
    let config = Config::build(target, &common::run_options(), None).expect("a valid target");
    let report = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        common::run_quietly(config, &["prov-key-present"]),
    )
    .await
    .expect("the probe ends, it does not hang");
    let _ = stop.send(());
    serving.await.unwrap().unwrap();
    let p = report
        .probes
        .iter()
        .find(|p| p.id == "prov-key-present")
        .unwrap();
    // The API answers 503 (its provider is unreachable), so the pre-flight fails and the
    // downstream probes are not run: their reason carries the fake's side of it.
    assert_eq!(p.outcome, Outcome::Error, "{}", common::outcomes(&report));
    assert!(
        p.reason.contains("first-request did not pass")
            && p.reason.contains("TLS handshake failed")
            && p.reason
                .contains(&format!("trust the CA certificate in {}", ca.display())),
        "{}",
        p.reason
    );
    let first = report
        .probes
        .iter()
        .find(|p| p.id == "first-request")
        .unwrap();
    assert!(
        first.timeline.iter().any(|l| l.contains("turned away")),
        "{:?}",
        first.timeline
    );
    assert!(fake.all_calls().is_empty());
}

/// A CA file that cannot be written is one line naming `--provider-tls`, and nothing is sent;
/// `--provider-lost-answers` without a fake provider names what starts one.
#[test]
fn bad_tls_and_stress_provider_flags_name_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("missing").join("ca.pem");
    let ca = ca.to_str().unwrap();
    let o = common::binary::bin()
        .args([
            "run",
            "http://127.0.0.1:9/pay",
            "--provider-listen",
            "127.0.0.1:0",
        ])
        .args(["--provider-tls", ca])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "--provider-tls {ca}: cannot write the CA certificate there"
        )),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let o = common::binary::bin()
        .args([
            "stress",
            "--reference",
            "--provider-lost-answers",
            "--keys",
            "1",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--provider-lost-answers") && err.contains("--provider-listen"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
