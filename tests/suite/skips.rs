//! A target described without the optional preconditions: every probe that needs one SKIPs
//! with a one-line reason naming the option to pass, and everything else still runs and passes
//! (but `key-expiry`, whose keys outlive its wait without `--key-ttl-header`: INCONCLUSIVE).

use crate::common;

use idem_check::config::{Config, TargetSpec};
use idem_check::outcome::Outcome;
use idem_check::probes;
use idem_check::reference::Reference;

/// Runs `only` (all when empty) of the default suite against `target`, without a restart hook.
async fn run(target: TargetSpec, only: &[&str]) -> idem_check::report::RunReport {
    let config = Config::build(target, &common::run_options(), None).expect("valid target");
    common::run_quietly(config, only).await
}

/// Runs `only` (all when empty) against the reference server described by nothing but what
/// `idem-check run URL -H … -d …` gives (or a target file `target_file` with those keys): no
/// option for any precondition.
async fn run_bare(target_file: Option<&str>, only: &[&str]) -> idem_check::report::RunReport {
    let reference = Reference::start(None)
        .await
        .expect("reference server starts");
    let full = reference.target();
    let bare = TargetSpec {
        url: full.url.clone(),
        method: full.method.clone(),
        headers: full.headers.clone(),
        body: full.body.clone(),
        secrets: full.secrets.clone(),
        target_file: target_file.map(Into::into),
        ..TargetSpec::default()
    };
    let report = run(bare, only).await;
    reference.stop().await.expect("reference server stops");
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_preconditions_skip_with_the_option_to_pass() {
    let report = run_bare(None, &[]).await;

    let mut skipped = 0;
    for p in &report.probes {
        let needs = probes::find(p.id).expect("catalog probe").meta.needs;
        // Without --key-ttl-header the server keeps its keys a day, longer than key-expiry
        // waits: it is left unjudged, saying so, never passed.
        if p.id == "key-expiry" {
            assert_eq!(p.outcome, Outcome::Inconclusive, "{}", p.reason);
            assert!(p.reason.contains("lives"), "{}", p.reason);
            continue;
        }
        assert!(
            matches!(p.outcome, Outcome::Pass | Outcome::Skip),
            "{}: {:?} {}",
            p.id,
            p.outcome,
            p.reason
        );
        if p.outcome == Outcome::Skip {
            skipped += 1;
            assert!(!p.reason.contains('\n'), "{}: reason on one line", p.id);
            assert!(
                needs.iter().any(|n| p
                    .reason
                    .contains(n.option().split(' ').next().unwrap_or_default())),
                "{}: SKIP reason {:?} names none of its options",
                p.id,
                p.reason
            );
        }
    }
    assert!(
        skipped >= 5,
        "only {skipped} probes skipped:\n{:#?}",
        report
            .probes
            .iter()
            .map(|p| (p.id, p.outcome, &p.reason))
            .collect::<Vec<_>>()
    );
    for id in [
        "tenant-isolation",
        "restart-persistence",
        "cross-endpoint",
        "cross-replica",
        "wedged-key-recovery",
    ] {
        let p = report.probes.iter().find(|p| p.id == id).unwrap();
        assert_eq!(p.outcome, Outcome::Skip, "{id}: {}", p.reason);
    }
}

/// Described by a target file, a SKIP names the file's key, not a flag the user never typed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_file_skips_name_the_file_key() {
    let report = run_bare(
        Some("api.toml"),
        &["tenant-isolation", "restart-persistence"],
    )
    .await;
    let reason = |id: &str| {
        let p = report.probes.iter().find(|p| p.id == id).expect(id);
        assert_eq!(p.outcome, Outcome::Skip, "{id}: {}", p.reason);
        p.reason.clone()
    };
    assert_eq!(
        reason("tenant-isolation"),
        "needs a second tenant: add [tenant-b] headers to api.toml"
    );
    assert!(reason("restart-persistence").contains("[restart] command"));
}
