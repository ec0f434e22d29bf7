//! The reference server as two replicas on one real PostgreSQL database: the whole probe
//! catalog passes (cross-replica included), the multi-replica fault makes cross-replica fail,
//! and `stress` with each key's duplicates spread over both replicas keeps exactly-once.

use crate::common;
use crate::pg;

use std::collections::BTreeSet;
use std::time::Duration;

use common::binary::bin;
use common::outcomes;
use common::stress::stress_reference;
use idem_check::config::{Config, RunOptions};
use idem_check::outcome::Outcome;
use idem_check::reference::Reference;
use idem_check::report::RunReport;
use idem_check::stress::{StressOptions, StressReport};
use idem_reference_server::Fault;

async fn run_on_postgres(url: &str, fault: Option<Fault>) -> RunReport {
    let reference = Reference::start_with(fault, Some(url), None)
        .await
        .expect("two replicas start on PostgreSQL");
    let target = reference.target();
    assert_eq!(
        target.replicas.len(),
        1,
        "the replica is wired as --replica"
    );
    let opts = RunOptions {
        strict: true,
        ..common::run_options()
    };
    let config = Config::build(target, &opts, Some(reference.restart_hook()))
        .expect("reference target is valid");
    let report = common::run_quietly(config, &[]).await;
    reference.stop().await.expect("replicas stop");
    report
}

/// Every probe passes against two replicas on one database, cross-replica included (it ran:
/// PASS, not SKIP); with `local-claims` cross-replica FAILs and nothing else does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_pass_everything_and_local_claims_fail_cross_replica() {
    let cluster = pg::shared();
    let correct = run_on_postgres(&cluster.create_database(), None).await;
    let not_passed: Vec<_> = correct
        .probes
        .iter()
        .filter(|p| p.outcome != Outcome::Pass)
        // No payment provider is called here.
        .filter(|p| !(p.outcome == Outcome::Skip && common::downstream(p.id)))
        .map(|p| p.id)
        .collect();
    assert!(not_passed.is_empty(), "{}", outcomes(&correct));
    assert!(correct.probes.iter().any(|p| p.id == "cross-replica"));

    let faulty = run_on_postgres(&cluster.create_database(), Some(Fault::LocalClaims)).await;
    let failed: BTreeSet<&str> = faulty
        .probes
        .iter()
        .filter(|p| p.outcome == Outcome::Fail)
        .map(|p| p.id)
        .collect();
    assert_eq!(
        failed,
        BTreeSet::from(["cross-replica"]),
        "{}",
        outcomes(&faulty)
    );
}

/// `idem-check run --reference --reference-db URL` wires the option through to two replicas.
#[test]
fn the_cli_runs_the_reference_on_postgres() {
    let cluster = pg::shared();
    let url = cluster.create_database();
    let out = bin()
        .args(["run", "--reference", "--reference-db", &url])
        .args(["--probe", "cross-replica", "--color", "never"])
        .output()
        .expect("run idem-check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("cross-replica"), "{stdout}");
    let payments = cluster.query(&url, "SELECT count(*) FROM payments");
    assert_ne!(payments, ["0"], "the replicas wrote to that database");

    let bad = bin()
        .args(["run", "--reference", "--reference-db", "not-a-url.db"])
        .output()
        .expect("run idem-check");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("PostgreSQL URL"));
}

async fn stress_on_postgres(url: &str, fault: Option<Fault>, keys: usize) -> StressReport {
    let reference = Reference::start_with(fault, Some(url), None)
        .await
        .expect("two replicas start on PostgreSQL");
    let opts = StressOptions {
        keys,
        duplicates: 8,
        concurrency: 64,
        duration: Duration::from_secs(240),
        rate: None,
        segment: None,
        provider_lost_answers: false,
    };
    stress_reference(reference, &opts).await
}

/// 2,000 keys × 8 duplicates, each key's duplicates spread over the two replicas: every key
/// executes once and the counter grew by exactly 2,000. The same spread over `local-claims`
/// replicas finds keys executed twice, so the spreading is what is being tested.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_over_two_replicas_is_exactly_once() {
    const KEYS: usize = 2000;
    let cluster = pg::shared();
    let url = cluster.create_database();
    let r = stress_on_postgres(&url, None, KEYS).await;
    assert_eq!(r.result.outcome, Outcome::Pass, "{}", r.result.reason);
    assert_eq!(r.keys, KEYS);
    assert_eq!(r.keys_completed, KEYS);
    assert_eq!(r.violating_keys, 0);
    assert_eq!(r.requests, (KEYS * 8) as u64);
    // The load's payments: the pre-flight's own (first-request's) have other references.
    let rows = cluster.query(
        &url,
        "SELECT count(*), count(DISTINCT (tenant, operation, idem_key)) FROM payments \
         WHERE reference LIKE 'idem-check-stress-%'",
    );
    assert_eq!(rows, [format!("{KEYS}|{KEYS}")]);
    eprintln!(
        "stress over two PostgreSQL replicas: {} requests in {:.1} s",
        r.requests,
        r.duration_ms / 1000.0
    );

    let faulty = stress_on_postgres(&cluster.create_database(), Some(Fault::LocalClaims), 50).await;
    assert_eq!(
        faulty.result.outcome,
        Outcome::Fail,
        "{}",
        faulty.result.reason
    );
    assert!(faulty.violating_keys > 0);
}

/// Three `stress --segment I/3` processes, side by side, against two replicas on one
/// database, merged by `idem-check merge`: PASS on the correct server (every key once, the
/// counter over the union of the windows), FAIL naming the violating keys under `race`, and
/// the merge refuses a segment given twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_segments_merge_into_one_judged_run() {
    let cluster = pg::shared();
    for fault in [None, Some(Fault::Race)] {
        let reference = Reference::start_with(fault, Some(&cluster.create_database()), None)
            .await
            .expect("two replicas start on PostgreSQL");
        let dir = tempfile::tempdir().unwrap();
        let spec = common::target_flags::flags(&reference.target(), str::to_string);
        let segments: Vec<_> = (1..=3)
            .map(|i| {
                let json = dir.path().join(format!("segment-{i}.json"));
                let child = common::binary::bin_async()
                    .arg("stress")
                    .args(&spec)
                    .args(["--keys", "60", "--duplicates", "6", "--concurrency", "12"])
                    .args(["--segment", &format!("{i}/3"), "--run-id", "pg-merge"])
                    .arg("--report-json")
                    .arg(&json)
                    .output();
                (json, child)
            })
            .collect();
        let mut files = Vec::new();
        for (json, child) in segments {
            let out = tokio::time::timeout(Duration::from_secs(120), child)
                .await
                .expect("a segment finishes within 2 minutes")
                .expect("the binary runs");
            assert!(
                matches!(out.status.code(), Some(0 | 4)),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            files.push(json);
        }
        reference.stop().await.expect("replicas stop");
        let merged = bin()
            .arg("merge")
            .args(&files)
            .arg("--color")
            .arg("never")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&merged.stdout);
        match fault {
            None => {
                assert_eq!(merged.status.code(), Some(0), "{stdout}");
                assert!(
                    stdout.contains("3 segments of run pg-merge: 60 keys"),
                    "{stdout}"
                );
                assert!(stdout.contains("PASS          stress"), "{stdout}");
            }
            Some(_) => {
                assert_eq!(merged.status.code(), Some(4), "{stdout}");
                assert!(stdout.contains("violating key "), "{stdout}");
                assert!(stdout.contains("critical"), "{stdout}");
            }
        }
        let overlapping = bin()
            .arg("merge")
            .args([&files[0], &files[0], &files[2]])
            .output()
            .unwrap();
        assert_eq!(overlapping.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&overlapping.stderr).contains("their keys overlap"));
    }
}
