//! `idem-check stress` against the in-process reference server: exactly-once holds on the
//! correct server, and the race and re-execution faults are reported with bounded evidence.

use crate::common;

use std::time::Duration;

use idem_check::http::exchange::version_text;
use idem_check::outcome::Outcome;
use idem_check::reference::Reference;
use idem_check::stress::{self, StressOptions, StressReport};
use idem_reference_server::Fault;

const KEYS: usize = 200;
const DUPLICATES: usize = 8;

const CONCURRENCY: usize = 32;

async fn stress_reference(fault: Option<Fault>) -> StressReport {
    stress_with(
        fault,
        StressOptions {
            keys: KEYS,
            duplicates: DUPLICATES,
            concurrency: CONCURRENCY,
            duration: Duration::from_secs(60),
            rate: None,
            segment: None,
            provider_lost_answers: false,
        },
    )
    .await
}

async fn stress_with(fault: Option<Fault>, opts: StressOptions) -> StressReport {
    let reference = Reference::start(fault)
        .await
        .expect("reference server starts");
    common::stress::stress_reference(reference, &opts).await
}

/// Every key executes exactly once; the counter agrees; every request is accounted for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_holds_on_the_reference_server() {
    let r = stress_reference(None).await;
    assert_eq!(r.result.outcome, Outcome::Pass, "{}", r.result.reason);
    assert_eq!(r.keys, KEYS);
    assert_eq!(r.keys_completed, KEYS);
    assert_eq!(r.violating_keys, 0);
    assert_eq!(r.requests, (KEYS * DUPLICATES) as u64);
    assert_eq!(r.statuses.values().sum::<u64>(), r.requests);
    // One burst per key, each counted under how it was released, with a measured spread.
    assert_eq!(r.bursts.released.values().sum::<u64>(), KEYS as u64);
    assert!(
        r.bursts
            .released
            .keys()
            .all(|how| how.starts_with("from ") && how.contains("thread")),
        "{:?}",
        r.bursts.released
    );
    assert!(r.bursts.spread_p50_us > 0.0 && r.bursts.spread_p50_us <= r.bursts.spread_max_us);
    let effects = r
        .result
        .checks
        .iter()
        .find(|c| c.id == "effects")
        .expect("counter check");
    assert!(
        effects.passed && effects.actual == format!("{KEYS} executions"),
        "{effects:?}"
    );
    // Kept-alive connections carry request after request: a connection is only ever taken for
    // a request in flight, so no more are opened to each origin (the reference target and its
    // replica) than requests may be in flight.
    assert!(
        (1..=2 * CONCURRENCY as u64).contains(&r.connections_opened),
        "{} connections for {} requests",
        r.connections_opened,
        r.requests
    );
    // The counter reads are dated on the run's clock: the read after the keys starts after the
    // read before it has ended (both used to say 0 ms).
    let read = |role: &str| {
        r.result
            .exchanges
            .iter()
            .find(|e| e.role == role)
            .unwrap_or_else(|| panic!("no {role:?} exchange"))
    };
    let (before, after) = (read("count before"), read("count after"));
    assert!(
        after.start_ms >= before.end_ms() && after.start_ms > 0.0,
        "count before {} + {} ms, count after at {} ms",
        before.start_ms,
        before.duration_ms,
        after.start_ms
    );
}

/// With `--http2` every request of a key goes over HTTP/2 (h2c here), its late retries too: a
/// server asked for that way may speak nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_carries_the_late_retries_too() {
    let reference = Reference::start(None)
        .await
        .expect("reference server starts");
    let mut target = reference.target();
    target.http2 = true;
    let opts = StressOptions {
        keys: 20,
        duplicates: DUPLICATES,
        concurrency: CONCURRENCY,
        duration: Duration::from_secs(60),
        rate: None,
        segment: None,
        provider_lost_answers: false,
    };
    let r = common::stress::stress_reference_as(reference, target, &opts).await;
    assert_eq!(r.result.outcome, Outcome::Pass, "{}", r.result.reason);
    assert_eq!(r.requests, (20 * DUPLICATES) as u64);
    let versions: Vec<(&str, Option<&str>)> = r
        .result
        .exchanges
        .iter()
        .filter(|e| e.role.label.contains("burst") || e.role.label.contains("late retry"))
        .map(|e| {
            (
                e.role.label.as_str(),
                e.response().map(|r| version_text(r.version)),
            )
        })
        .collect();
    assert!(
        versions.iter().any(|(role, _)| role.contains("late retry")),
        "{versions:?}"
    );
    assert!(
        versions.iter().all(|(_, v)| *v == Some("HTTP/2")),
        "{versions:?}"
    );
    // HTTP/2 connections are kept too: each key uses one at a time (its burst, then its late
    // retries, to the target or its replica), so no origin needs more than there are keys,
    // where a connection per burst and per late retry opened three per key.
    assert!(
        r.connections_opened <= 2 * 20,
        "{} connections for 20 keys",
        r.connections_opened
    );
}

/// `--rate` caps the run: key i starts no earlier than i × D / rate seconds in, so the run lasts
/// at least until the last key started and its own report shows at most the cap (a slow
/// machine only lowers the rate; nothing here depends on how fast the server answers).
/// The reference server keeps a stress key far longer than its exchanges can last. With a 3 s
/// lifetime, a key's late retries that came more than 3 s after its execution on a loaded
/// machine found the key forgotten and executed it again (rightly: it had expired), and stress
/// over two PostgreSQL replicas counted keys "executed twice". The lifetime it publishes is a
/// day; a whole stress key is bounded by a few `--timeout`s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_remembers_a_key_longer_than_a_stress_key_lasts() {
    let reference = Reference::start(None)
        .await
        .expect("reference server starts");
    let key = uuid::Uuid::new_v4();
    let sent = std::time::SystemTime::now();
    let resp = reqwest::Client::new()
        .post(format!("{}/api/payments", reference.base))
        .header("Authorization", format!("Bearer {}", reference.token(0)))
        .header("Idempotency-Key", format!("\"{key}\""))
        .header("Content-Type", "application/json")
        .body(format!(
            r#"{{"amountCents":1250,"currency":"EUR","reference":"{key}"}}"#
        ))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("the reference answers");
    assert_eq!(resp.status(), 201);
    let published = resp
        .headers()
        .get("idempotency-key-expires-at")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| humantime::parse_rfc3339_weak(v).ok())
        .expect("an RFC 3339 Idempotency-Key-Expires-At");
    reference.stop().await.expect("reference server stops");
    let lifetime = published.duration_since(sent).unwrap_or_default();
    assert!(
        lifetime >= Duration::from_secs(60 * 60),
        "the key lives {lifetime:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_caps_the_requests_per_second() {
    const RATE: u32 = 400;
    const RATED_KEYS: usize = 40;
    const D: usize = 4;
    let r = stress_with(
        None,
        StressOptions {
            keys: RATED_KEYS,
            duplicates: D,
            concurrency: CONCURRENCY,
            duration: Duration::from_secs(60),
            rate: Some(RATE),
            segment: None,
            provider_lost_answers: false,
        },
    )
    .await;
    assert_eq!(r.result.outcome, Outcome::Pass, "{}", r.result.reason);
    assert_eq!(r.rate, Some(RATE));
    assert_eq!(r.keys, RATED_KEYS);
    assert_eq!(r.requests, (RATED_KEYS * D) as u64);
    let last_start_ms = ((RATED_KEYS - 1) * D) as f64 * 1000.0 / f64::from(RATE);
    assert!(
        r.duration_ms >= last_start_ms,
        "{} ms run, the last key was due at {last_start_ms} ms",
        r.duration_ms
    );
    // RATED_KEYS × D requests in at least (RATED_KEYS - 1) × D / RATE seconds.
    let cap = f64::from(RATE) * RATED_KEYS as f64 / (RATED_KEYS - 1) as f64;
    assert!(
        r.requests_per_second <= cap * 1.001,
        "{} requests/s over a cap of {RATE}",
        r.requests_per_second
    );
    assert!(
        stress::render_terminal(&r, &Default::default()).contains("at most 400 requests/s"),
        "the terminal report names the cap"
    );
}

/// The race fault doubles executions: FAIL, violating keys listed, evidence kept only for a few.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_fault_is_reported_with_bounded_evidence() {
    let r = stress_reference(Some(Fault::Race)).await;
    assert_eq!(r.result.outcome, Outcome::Fail);
    assert!(r.violating_keys > 0);
    assert!(!r.violations.is_empty());
    let effects = r.result.checks.iter().find(|c| c.id == "effects").unwrap();
    assert!(!effects.passed);
    // Counter reads plus at most 5 violating keys and 1 sample key, DUPLICATES exchanges each.
    assert!(
        r.result.exchanges.len() <= 2 + 6 * DUPLICATES,
        "{}",
        r.result.exchanges.len()
    );
}

/// A server that re-executes completed retries fails every key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_reexecute_fault_fails_every_key() {
    let r = stress_reference(Some(Fault::ReplayReexecute)).await;
    assert_eq!(r.result.outcome, Outcome::Fail);
    assert_eq!(r.violating_keys, KEYS);
}

/// A credential the API does not accept is the setup's fault, not the API's. Stress's
/// pre-flight says so before any load. A segment, which has no pre-flight, leaves the 401s out
/// of the per-key checks, and a run most of whose requests were refused is an ERROR that says
/// how to give the credential, never a FAIL of exactly-once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_credential_is_an_error_not_a_violation() {
    for segment in [None, Some(("1/1", "refused"))] {
        let reference = Reference::start(None)
            .await
            .expect("reference server starts");
        let mut target = reference.target();
        target.headers[0] = "Authorization: Bearer not-a-tenant".into();
        // The counter would refuse the credential before the load: the keys are what is judged.
        target.count_url = None;
        target.count_pointer = None;
        let opts = StressOptions {
            keys: 20,
            duplicates: 4,
            concurrency: 8,
            duration: Duration::from_secs(60),
            rate: None,
            segment: segment.map(|(_, run_id)| stress::segment::Segment {
                index: 1,
                count: 1,
                run_id: run_id.into(),
            }),
            provider_lost_answers: false,
        };
        let r = common::stress::stress_reference_as(reference, target, &opts).await;
        assert_eq!(r.result.outcome, Outcome::Error, "{}", r.result.reason);
        assert_eq!(r.violating_keys, 0, "no key is blamed for the 401s");
        let reason = &r.result.reason;
        if segment.is_none() {
            assert!(
                reason.starts_with("not run: the pre-flight first-request did not pass")
                    && reason.contains("the API refused our credentials"),
                "{reason}"
            );
            assert_eq!(r.keys, 0);
        } else {
            assert!(
                reason.starts_with("80 of 80 requests were refused (401)")
                    && reason.contains("--auth-cmd"),
                "{reason}"
            );
        }
    }
}

/// `stress --reference --provider`: the reference server calls the fake provider for every
/// key, and each key is charged exactly once at the provider; against a server that draws a
/// new provider key per attempt, lost provider answers make keys charged twice, each named with
/// its provider calls in the evidence.
async fn stress_calling(fault: Option<Fault>, lost_answers: bool) -> StressReport {
    let generic = idem_check::provider::profile::find("generic").unwrap();
    let reference = Reference::start_calling(fault, None, None, Some(generic.into()))
        .await
        .expect("reference server starts");
    let opts = StressOptions {
        keys: KEYS,
        duplicates: DUPLICATES,
        concurrency: CONCURRENCY,
        duration: Duration::from_secs(60),
        rate: None,
        segment: None,
        provider_lost_answers: lost_answers,
    };
    common::stress::stress_reference(reference, &opts).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_key_is_charged_once_at_the_provider() {
    for lost_answers in [false, true] {
        let r = stress_calling(None, lost_answers).await;
        assert_eq!(r.result.outcome, Outcome::Pass, "{}", r.result.reason);
        let p = r.provider.as_ref().expect("the provider side is reported");
        assert_eq!(p.keys_charged_once, KEYS, "{p:?}");
        assert_eq!(p.keys_charged_more + p.keys_never_charged, 0, "{p:?}");
        // A lost answer is retried with the same key: two calls, one charge.
        // (More only when the API's own attempt timed out on a loaded machine.)
        let at_least = if lost_answers { 2 * KEYS } else { KEYS };
        assert!(p.calls - p.unattributed_calls >= at_least, "{p:?}");
        let ids: Vec<&str> = r.result.checks.iter().map(|c| c.id.as_str()).collect();
        assert!(ids.contains(&"provider-at-most-once"), "{ids:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_provider_key_per_attempt_charges_keys_twice_under_load() {
    let r = stress_calling(Some(Fault::ProvNewKeyPerAttempt), true).await;
    assert_eq!(r.result.outcome, Outcome::Fail, "{}", r.result.reason);
    let p = r.provider.as_ref().unwrap();
    assert!(p.keys_charged_more > 0, "{p:?}");
    let twice = r
        .result
        .checks
        .iter()
        .find(|c| c.id == "provider-at-most-once")
        .unwrap();
    assert!(!twice.passed);
    assert!(
        twice.actual.contains("charged 2 times by provider calls"),
        "{}",
        twice.actual
    );
    // The calls that charged twice are in the evidence, at the provider.
    assert!(!twice.exchanges.is_empty());
    for n in &twice.exchanges {
        let e = r.result.exchanges.iter().find(|e| e.n == *n).unwrap();
        assert!(e.role.at_provider, "{:?}", e.role);
    }
    assert!(r.violating_keys >= p.keys_charged_more);
}

/// Calling the provider before the claim: every duplicate of a key reaches it, and the
/// provider's own key dedupes them. Exactly once to the provider still holds (PASS), and the
/// report shows the extra calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calling_the_provider_before_the_claim_shows_the_extra_calls() {
    let r = stress_calling(Some(Fault::ProvCallBeforeClaim), false).await;
    let p = r.provider.as_ref().unwrap();
    assert_eq!(p.keys_charged_more, 0, "{p:?}");
    assert!(p.keys_called_more > KEYS / 2, "{p:?}");
    assert!(
        r.result
            .timeline
            .iter()
            .any(|l| l.contains("keys reached the provider more than once")),
        "{:?}",
        r.result.timeline
    );
}
