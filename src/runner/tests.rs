use super::*;
use crate::check::Symptom;
use crate::config::{RunOptions, TargetSpec};

/// Executions that landed after a probe ended are charged to it: its PASS built on counts
/// that missed them becomes INCONCLUSIVE saying what landed; a FAIL stays FAIL.
#[test]
fn late_effects_are_charged_to_the_probe_that_left_them() {
    let def = probes::lost_response::PROBE;
    let mut passed = verdict_only(&def, Outcome::Pass, "3 checks passed".into());
    charge_late_effects(&mut passed, 7, 8, "error-not-cached");
    assert_eq!(passed.outcome, Outcome::Inconclusive);
    assert!(passed.reason.starts_with("late effect: 1 execution landed after this probe ended (the counter read 7 at its last reading, 8 when error-not-cached began)"), "{}", passed.reason);
    assert!(
        passed.reason.contains("--quiet-window"),
        "{}",
        passed.reason
    );
    let mut failed = verdict_only(&def, Outcome::Fail, "got 2 executions".into());
    charge_late_effects(&mut failed, 7, 9, "error-not-cached");
    assert_eq!(failed.outcome, Outcome::Fail);
    assert_eq!(failed.reason, "got 2 executions");
    assert!(
        failed.timeline[0].contains("2 executions landed"),
        "{:?}",
        failed.timeline
    );
}

/// A probe that ends with neither a check nor a stop judged nothing: ERROR, never a PASS
/// of "0 checks passed".
#[test]
fn a_probe_that_judges_nothing_is_an_error() {
    let target = TargetSpec {
        url: "http://127.0.0.1:9/op".into(),
        ..TargetSpec::default()
    };
    let suite = crate::catalog::load_suite(crate::suite::DEFAULT_SUITE).unwrap();
    let config = Arc::new(Config::build(target, &RunOptions::new(suite), None).unwrap());
    let client =
        Arc::new(Client::new(config.connector.clone(), config.timeout, config.max_body).unwrap());
    let def = probes::first_request::PROBE;
    let ctx = ProbeCtx::new(config.clone(), client, def.meta, Session::new(&config));
    let report = finish(&def, &config, ctx, None, Instant::now());
    assert_eq!(report.outcome, Outcome::Error);
    assert!(
        report.reason.contains("without judging anything"),
        "{}",
        report.reason
    );
}

/// A failed check of `severity` showing `symptom`.
fn failed_check(severity: crate::check::Severity, symptom: Symptom) -> crate::check::Check {
    crate::check::Check {
        id: "c".into(),
        what: "w".into(),
        severity,
        passed: false,
        expected: vec![],
        actual: String::new(),
        exchanges: vec![],
        symptom,
    }
}

fn with_checks(def: &ProbeDef, outcome: Outcome, checks: Vec<crate::check::Check>) -> ProbeReport {
    let mut report = verdict_only(def, outcome, "own reason".into());
    report.checks = checks;
    report
}

/// A failure is deferred to a failed prerequisite only when it shows the prerequisite's
/// symptom: bare-token's WARN from a second execution and key-parameters' WARN from a
/// refusal stay WARN beside a replay-identity that failed on a missing Location; the same
/// refusal after a quoted-key refused with 400 is deferred, and only replay-identity's own
/// symptom (a 409) defers a failure to it.
#[test]
fn only_the_prerequisites_symptom_is_deferred() {
    use crate::check::Severity::{Recommended, Required};
    let defs = [
        probes::replay_identity::PROBE,
        probes::quoted_key::PROBE,
        probes::bare_token::PROBE,
        probes::key_parameters::PROBE,
        probes::concurrent_duplicates::PROBE,
    ];
    let status = |s: u16| Symptom::Status([s].into());
    let location = || Symptom::Header("location".into());
    let run = |quoted: Outcome, replay: Symptom| {
        let mut reports = vec![
            with_checks(
                &defs[0],
                Outcome::Fail,
                vec![failed_check(Required, replay)],
            ),
            with_checks(&defs[1], quoted, vec![failed_check(Required, status(400))]),
            with_checks(
                &defs[2],
                Outcome::Warn,
                vec![failed_check(Recommended, Symptom::Executions)],
            ),
            with_checks(
                &defs[3],
                Outcome::Warn,
                vec![failed_check(Recommended, status(400))],
            ),
            with_checks(
                &defs[4],
                Outcome::Fail,
                vec![failed_check(Required, status(409))],
            ),
        ];
        defer_to_prerequisites(&mut reports, &defs);
        reports
            .iter()
            .map(|r| (r.id, r.outcome, r.reason.clone()))
            .collect::<Vec<_>>()
    };
    let seen = run(Outcome::Fail, location());
    let outcomes: Vec<Outcome> = seen.iter().map(|r| r.1).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Fail,
            Outcome::Fail,
            Outcome::Warn,
            Outcome::Inconclusive,
            Outcome::Fail
        ],
        "{seen:?}"
    );
    assert!(
        seen[3].2.starts_with("prerequisite quoted-key failed"),
        "{seen:?}"
    );
    let seen = run(Outcome::Pass, status(409));
    assert_eq!(seen[4].1, Outcome::Inconclusive, "{seen:?}");
    assert!(
        seen[4].2.starts_with("prerequisite replay-identity failed"),
        "{seen:?}"
    );
    assert_eq!(seen[2].1, Outcome::Warn, "{seen:?}");
}

/// The root causes count each deferred verdict as what it was: escaped-key's required checks
/// FAIL and key-parameters' recommended ones WARN on the refusal that failed quoted-key, so
/// one FAIL and one WARN follow from it (not "2 other FAILs").
#[test]
fn root_causes_count_deferred_fails_and_warns_apart() {
    use crate::check::Severity::{Recommended, Required};
    let defs = [
        probes::quoted_key::PROBE,
        probes::escaped_key::PROBE,
        probes::key_parameters::PROBE,
    ];
    let refused = || Symptom::Status([400].into());
    let mut reports = vec![
        with_checks(
            &defs[0],
            Outcome::Fail,
            vec![failed_check(Required, refused())],
        ),
        with_checks(
            &defs[1],
            Outcome::Fail,
            vec![failed_check(Required, refused())],
        ),
        with_checks(
            &defs[2],
            Outcome::Warn,
            vec![failed_check(Recommended, refused())],
        ),
    ];
    defer_to_prerequisites(&mut reports, &defs);
    let follows: Vec<Option<FollowsFrom>> = reports.iter().map(|r| r.follows_from).collect();
    let from = |verdict| {
        Some(FollowsFrom {
            probe: "quoted-key",
            verdict,
        })
    };
    assert_eq!(
        follows,
        [None, from(Outcome::Fail), from(Outcome::Warn)],
        "{reports:?}"
    );
    assert_eq!(
        crate::report::root_causes(&reports),
        ["quoted-key fails: 1 other FAIL and 1 WARN follow from it"]
    );
    // Each deferred reason names what it had been.
    assert!(
        reports[1]
            .reason
            .contains("this probe's failure says nothing new"),
        "{reports:?}"
    );
    assert!(
        reports[2]
            .reason
            .contains("this probe's warning says nothing new"),
        "{reports:?}"
    );
    reports.truncate(2);
    assert_eq!(
        crate::report::root_causes(&reports),
        ["quoted-key fails: 1 other FAIL follows from it"]
    );
}
