//! `run --reference --provider PROFILE`: the bundled server calls the fake provider, which
//! plays each profile; the whole suite PASSes (a profile whose documentation names no
//! in-progress answer SKIPs `prov-in-progress-conflict`, saying so), and without
//! `--provider-listen` every downstream probe SKIPs naming it.

use crate::common;

use idem_check::config::{Config, RunOptions};
use idem_check::outcome::Outcome;
use idem_check::probes::{catalog, Group};
use idem_check::provider::profile::{self, InProgress};
use idem_check::reference::Reference;
use idem_check::report::RunReport;

/// A strict run of every probe against the reference server calling the fake `profile`.
async fn run_with(profile: &str) -> RunReport {
    let p = profile::find(profile).expect("a profile");
    let reference = Reference::start_calling(None, None, None, Some(p))
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
    let report = run_with(profile).await;
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
    let reference = Reference::start_calling(None, None, None, generic)
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
