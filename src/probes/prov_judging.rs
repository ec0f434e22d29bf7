//! The downstream probes' judging, in milliseconds: each probe runs whole over the kit's fake
//! transport, whose answers play the API under test, and the provider calls that API makes are
//! written into a fake provider's ledger by hand ([`FakeProvider::seen_by_hand`]), attributed by
//! the probe's token as real ones are. Nothing is sent to either side; the verdict comes from
//! the runner's own `finish`, so what is judged here is what a run reports.
//!
//! The seam is the ledger itself, not a trait: a probe sees the provider only through
//! [`super::downstream::ProviderSide`], which reads the ledger, so filling the ledger is all an
//! API needs to do to be seen. The fake provider is bound to 127.0.0.1:0 only because that is
//! how one exists; no call reaches its socket.
//!
//! The probes whose stimulus is the provider's own script (a held, dropped or refused call:
//! lease fencing, a lost provider answer, the in-progress conflict, the provider's retries),
//! the burst of concurrent duplicates, a second operation and a restart with a replay are
//! judged by the fault matrix against the reference server, where the script and the race
//! really run; an API played by hand would only replay the script's assumptions. The crash is
//! here: the played API loses its memory when the probe's crash command kills it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::FutureExt;

use crate::check::Severity;
use crate::config::{BodyTemplate, Config, Downstream, InvalidBody, KillHook, RestartHook};
use crate::http::client::Client;
use crate::http::exchange::{Header, SentRequest};
use crate::http::HttpError;
use crate::outcome::Outcome;
use crate::probes::kit::fake::{self, Fake};
use crate::probes::kit::resending::Transports;
use crate::probes::{ProbeCtx, ProbeDef, Session};
use crate::provider::profile;
use crate::provider::{FakeProvider, Settings};
use crate::report::ProbeReport;

/// What the API played here gets wrong; `None` of them is the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    /// Calls the provider without a key.
    NoProviderKey,
    /// Derives the provider key from the body: equal payloads, one key.
    KeyFromBody,
    /// Leaves the tenant out of the provider key.
    TenantBlind,
    /// Charges, then refuses (an invalid body, a missing key, a mismatch).
    ChargeBehindRefusal,
    /// Calls the provider again on a replay, with a new key.
    ReplayCallsAgain,
    /// Answers without the provider's reference.
    NoReference,
    /// Keeps the provider key in memory: after a crash, another one.
    KeyInMemory,
}

/// A request's scope at the API: tenant and client key.
type Scope = (String, String);

/// What the API answered a scope with: the body, and the provider reference.
type Answered = (Vec<u8>, String);

/// The API under test, played by hand: it validates, claims, calls the provider (in the
/// ledger) and answers, getting wrong what `defect` says.
struct Api {
    provider: Arc<FakeProvider>,
    defect: Option<Defect>,
    /// Per (tenant, client key): the body and the provider reference it was answered with.
    done: Mutex<HashMap<Scope, Answered>>,
    /// The provider's own memory: per provider key, the charge it made.
    charged: Mutex<HashMap<String, String>>,
    /// How many times the API was restarted (its memory lost each time).
    lives: AtomicUsize,
}

impl Api {
    fn answer(&self, r: &SentRequest) -> (u16, Option<String>) {
        let tenant = match r.header_values("x-tenant").first().copied() {
            Some(b"a") => "a",
            Some(b"b") => "b",
            _ => return (401, None),
        };
        let key = r
            .header_values("idempotency-key")
            .first()
            .map(|k| String::from_utf8_lossy(k).into_owned());
        let refuses = key.is_none() || String::from_utf8_lossy(&r.body).contains("\"amount\":-1");
        let Some(key) = key.filter(|_| !refuses) else {
            if self.defect == Some(Defect::ChargeBehindRefusal) {
                self.call(&r.body, &format!("pk_refused_{}", self.calls()));
            }
            return (400, None);
        };
        let scope = (tenant.to_string(), key.clone());
        let done = self.done.lock().unwrap().get(&scope).cloned();
        if let Some((body, reference)) = done {
            if body != r.body {
                if self.defect == Some(Defect::ChargeBehindRefusal) {
                    self.call(&r.body, &format!("pk_mismatch_{}", self.calls()));
                }
                return (422, None);
            }
            if self.defect == Some(Defect::ReplayCallsAgain) {
                self.call(&r.body, &format!("pk_again_{}", self.calls()));
            }
            return (200, Some(reference));
        }
        let provider_key = match self.defect {
            Some(Defect::KeyFromBody) => format!("pk_{}", String::from_utf8_lossy(&r.body).len()),
            Some(Defect::TenantBlind) => format!("pk_{key}"),
            Some(Defect::KeyInMemory) => {
                format!("pk_{}_{tenant}_{key}", self.lives.load(Ordering::SeqCst))
            }
            _ => format!("pk_{tenant}_{key}"),
        };
        let reference = self.call(&r.body, &provider_key);
        self.done
            .lock()
            .unwrap()
            .insert(scope, (r.body.clone(), reference.clone()));
        (201, Some(reference))
    }

    /// One provider call with `key`; the provider charges a key once and replays it after.
    fn call(&self, body: &[u8], key: &str) -> String {
        let no_key = self.defect == Some(Defect::NoProviderKey);
        let mut charged = self.charged.lock().unwrap();
        if let Some(id) = charged.get(key).filter(|_| !no_key) {
            self.provider.seen_by_hand(body, Some(key), false);
            return id.clone();
        }
        let id = self
            .provider
            .seen_by_hand(body, (!no_key).then_some(key), true)
            .expect("charged");
        charged.insert(key.to_string(), id.clone());
        id
    }

    fn calls(&self) -> usize {
        self.provider.all_calls().len()
    }
}

/// The API's crash and restart: it died before committing its record, so the record is gone;
/// what is in memory is gone too.
#[derive(Debug)]
struct Lifecycle(Arc<Api>);

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Api({:?})", self.defect)
    }
}

impl KillHook for Lifecycle {
    fn describe(&self) -> String {
        "the played API's crash".into()
    }

    fn kill(&self) -> BoxFuture<'_, anyhow::Result<()>> {
        self.0.done.lock().unwrap().clear();
        self.0.lives.fetch_add(1, Ordering::SeqCst);
        futures::future::ready(Ok(())).boxed()
    }
}

impl RestartHook for Lifecycle {
    fn describe(&self) -> String {
        "the played API's restart".into()
    }

    fn restart(&self) -> BoxFuture<'_, anyhow::Result<Option<String>>> {
        futures::future::ready(Ok(None)).boxed()
    }
}

/// Runs `probe` against the API played with `defect`, as the runner would, and returns its
/// report.
async fn run(probe: ProbeDef, defect: Option<Defect>) -> ProbeReport {
    let provider = FakeProvider::bind(
        "127.0.0.1:0",
        Settings::of(profile::find("generic").unwrap()),
    )
    .expect("fake provider");
    let api = Arc::new(Api {
        provider: provider.clone(),
        defect,
        done: Mutex::default(),
        charged: Mutex::default(),
        lives: AtomicUsize::new(0),
    });
    let mut config = fake::config();
    config.operation.headers = vec![Header::new("X-Tenant", "a")];
    config.operation.body = BodyTemplate::new(r#"{"amount":1250,"reference":"{{unique}}"}"#);
    config.invalid_body = Some(InvalidBody {
        template: BodyTemplate::new(r#"{"amount":-1,"reference":"{{unique}}"}"#),
        origin: "the test",
    });
    config.tenant_b = Some(vec![Header::new("X-Tenant", "b")]);
    config.quiet_window = Duration::from_millis(5);
    let lifecycle = Arc::new(Lifecycle(api.clone()));
    config.restart = Some(lifecycle.clone());
    config.kill = Some(lifecycle);
    config.provider = Some(Downstream {
        fake: provider,
        ref_pointer: "/providerRef".into(),
    });
    let config = Arc::new(config);
    if let Some(why) = crate::runner::missing_need(&probe, &config) {
        panic!("{} would SKIP: {why}", probe.meta.id);
    }
    let transport = Fake::with(move |r| {
        let (status, reference) = api.answer(r);
        let mut response = fake::response(status);
        if let Some(reference) = reference.filter(|_| defect != Some(Defect::NoReference)) {
            response.body = format!(r#"{{"providerRef":"{reference}"}}"#).into_bytes();
        }
        (Duration::ZERO, Ok::<_, HttpError>(response))
    });
    let client =
        Arc::new(Client::new(config.connector.clone(), config.timeout, config.max_body).unwrap());
    let mut ctx = ProbeCtx::new(config.clone(), client, probe.meta, Session::new(&config))
        .with_transports(Transports::all(Arc::new(transport)));
    let started = Instant::now();
    let stop = (probe.run)(&mut ctx).await.err();
    crate::runner::finish(&probe, &config, ctx, stop, started)
}

/// The report PASSes.
fn passes(report: &ProbeReport) {
    assert_eq!(report.outcome, Outcome::Pass, "{report:#?}");
}

/// The report FAILs on exactly `checks`, each at `severity`.
fn fails(report: &ProbeReport, checks: &[&str], severity: Severity) {
    assert_eq!(report.outcome, Outcome::Fail, "{report:#?}");
    let failed: Vec<(&str, Severity)> = report
        .checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| (c.id.as_str(), c.severity))
        .collect();
    let expected: Vec<(&str, Severity)> = checks.iter().map(|c| (*c, severity)).collect();
    assert_eq!(failed, expected, "{report:#?}");
}

use super::{
    prov_client_replay, prov_correlation, prov_crash_after_call, prov_distinct_keys,
    prov_key_present, prov_mismatch_no_call, prov_provider_forgets, prov_refused_no_call,
    prov_tenant_scope,
};

#[tokio::test]
async fn key_present_passes_a_keyed_call_and_fails_a_keyless_one_critical() {
    passes(&run(prov_key_present::PROBE, None).await);
    let report = run(prov_key_present::PROBE, Some(Defect::NoProviderKey)).await;
    assert_eq!(report.outcome, Outcome::Fail, "{report:#?}");
    let keyed = report
        .checks
        .iter()
        .find(|c| c.id == "key-present")
        .unwrap();
    assert!(
        !keyed.passed && keyed.severity == Severity::Critical,
        "{keyed:?}"
    );
}

#[tokio::test]
async fn distinct_keys_fails_critical_when_equal_payloads_share_a_provider_key() {
    passes(&run(prov_distinct_keys::PROBE, None).await);
    let report = run(prov_distinct_keys::PROBE, Some(Defect::KeyFromBody)).await;
    fails(
        &report,
        &["distinct-keys", "two-charges"],
        Severity::Critical,
    );
}

#[tokio::test]
async fn tenant_scope_fails_critical_when_tenant_b_replays_tenant_a() {
    passes(&run(prov_tenant_scope::PROBE, None).await);
    let report = run(prov_tenant_scope::PROBE, Some(Defect::TenantBlind)).await;
    fails(
        &report,
        &["distinct-keys", "two-charges"],
        Severity::Critical,
    );
}

#[tokio::test]
async fn refused_no_call_fails_critical_on_a_charge_behind_a_4xx() {
    let report = run(prov_refused_no_call::PROBE, None).await;
    passes(&report);
    let roles: Vec<&str> = report
        .exchanges
        .iter()
        .map(|e| e.role.label.as_str())
        .collect();
    assert!(roles.contains(&"a tenant no one is"), "{roles:?}");
    let report = run(
        prov_refused_no_call::PROBE,
        Some(Defect::ChargeBehindRefusal),
    )
    .await;
    assert_eq!(report.outcome, Outcome::Fail, "{report:#?}");
    let no_charge = report.checks.iter().find(|c| c.id == "no-charge").unwrap();
    assert!(!no_charge.passed && no_charge.severity == Severity::Critical);
    // The keyless and the invalid request charged; the unknown tenant was refused first.
    assert_eq!(no_charge.actual, "2 executions", "{no_charge:?}");
}

#[tokio::test]
async fn mismatch_no_call_fails_critical_on_a_charge_behind_the_422() {
    passes(&run(prov_mismatch_no_call::PROBE, None).await);
    let report = run(
        prov_mismatch_no_call::PROBE,
        Some(Defect::ChargeBehindRefusal),
    )
    .await;
    let no_charge = report.checks.iter().find(|c| c.id == "no-charge").unwrap();
    assert!(
        !no_charge.passed && no_charge.severity == Severity::Critical,
        "{report:#?}"
    );
}

#[tokio::test]
async fn client_replay_fails_critical_when_a_replay_charges_under_a_new_key() {
    passes(&run(prov_client_replay::PROBE, None).await);
    let report = run(prov_client_replay::PROBE, Some(Defect::ReplayCallsAgain)).await;
    assert_eq!(report.outcome, Outcome::Fail, "{report:#?}");
    for id in ["one-charge", "original-key"] {
        let c = report.checks.iter().find(|c| c.id == id).unwrap();
        assert!(!c.passed && c.severity == Severity::Critical, "{c:?}");
    }
}

#[tokio::test]
async fn correlation_fails_without_the_reference_in_the_answer() {
    passes(&run(prov_correlation::PROBE, None).await);
    let report = run(prov_correlation::PROBE, Some(Defect::NoReference)).await;
    assert_eq!(report.outcome, Outcome::Fail, "{report:#?}");
}

#[tokio::test]
async fn provider_forgets_fails_critical_when_the_replay_charges_again() {
    passes(&run(prov_provider_forgets::PROBE, None).await);
    let report = run(prov_provider_forgets::PROBE, Some(Defect::ReplayCallsAgain)).await;
    fails(&report, &["one-charge"], Severity::Critical);
}

#[tokio::test]
async fn crash_after_call_fails_critical_when_the_key_did_not_survive_the_crash() {
    let report = run(prov_crash_after_call::PROBE, None).await;
    passes(&report);
    assert!(
        report
            .timeline
            .iter()
            .any(|l| l.starts_with("killed by the played API's crash (--crash-cmd)")),
        "{:?}",
        report.timeline
    );
    let report = run(prov_crash_after_call::PROBE, Some(Defect::KeyInMemory)).await;
    fails(
        &report,
        &["pre-crash-key", "one-charge"],
        Severity::Critical,
    );
}

/// Without `--provider-listen` every downstream probe SKIPs before it runs, naming the flag.
#[test]
fn without_a_provider_every_downstream_probe_skips_naming_the_flag() {
    let config: Config = fake::config();
    for probe in super::catalog()
        .into_iter()
        .filter(|p| p.meta.group == super::Group::Downstream)
    {
        let why = crate::runner::missing_need(&probe, &config).expect("skips");
        assert!(
            why.contains("--provider-listen"),
            "{}: {why}",
            probe.meta.id
        );
    }
}
