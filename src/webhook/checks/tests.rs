//! Every webhook check, played alone (after the calibration) against the reference consumer
//! started in-process on 127.0.0.1: it passes against the correct consumer, fails against the
//! fault made for it, and SKIPs without what it needs. Windows settle in 50 ms, so each row
//! takes well under a second; the end-to-end tables in `tests/suite/webhook.rs` are left to
//! the whole binary against every fault and the design consumers.

use std::sync::Arc;
use std::time::Duration;

use idem_reference_server::WebhookFault;

use super::{Env, Extras, Hold, WebhookCheck, CATALOG};
use crate::effects::{Counter, Meter};
use crate::http::client::Client;
use crate::http::exchange::Header;
use crate::outcome::Outcome;
use crate::quiet::Settling;
use crate::reference::Reference;
use crate::report::ProbeReport;
use crate::webhook::counts::Counts;
use crate::webhook::event::Template;
use crate::webhook::run::{run, RunInfo};
use crate::webhook::scheme::Scheme;
use crate::webhook::sender::{Deliveries, Sender};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SECRET_B: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
const TIMEOUT: Duration = Duration::from_secs(10);
/// The reference consumer's `slow-sync-handler` works this long, over [`BUDGET`].
const SLOW: Duration = Duration::from_millis(1300);
const BUDGET: Duration = Duration::from_secs(1);

/// What a row takes away from the full set of options.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Without {
    Nothing,
    Hold,
    /// The hold is time-based: `X-Test-Delay-Ms` for [`SLOW`], nothing to release.
    HoldRelease,
    Crash,
    Replica,
    SourceB,
    /// Neither a restart hook nor a late redelivery.
    LateAndRestart,
    /// The consumer's secret: deliveries are signed with another one.
    TheSecret,
}

/// A secret of the right form the consumer was not given.
const OTHER_SECRET: &str = "whsec_dGhpcyBpcyBub3QgdGhlIGNvbnN1bWVyJ3Mga2V5";

/// Plays `check` (after the calibration, which must pass) with `scheme` against the reference
/// consumer with `fault`, with every option but `without`; its report.
async fn play(
    check: &'static WebhookCheck,
    scheme: Scheme,
    fault: Option<WebhookFault>,
    without: Without,
) -> ProbeReport {
    let mut probes = reports(check, scheme, fault, without).await;
    if !check.calibrates {
        assert_eq!(
            probes[0].outcome,
            Outcome::Pass,
            "calibration: {}",
            probes[0].reason
        );
    }
    probes.pop().unwrap()
}

/// The reports of a run of the calibration and `check`.
async fn reports(
    check: &'static WebhookCheck,
    scheme: Scheme,
    fault: Option<WebhookFault>,
    without: Without,
) -> Vec<ProbeReport> {
    reports_with(check, scheme, fault, without, None).await
}

/// [`reports`] with `--unknown-event`'s body.
async fn reports_with(
    check: &'static WebhookCheck,
    scheme: Scheme,
    fault: Option<WebhookFault>,
    without: Without,
    unknown_event: Option<Template>,
) -> Vec<ProbeReport> {
    let r = Reference::start_webhook(SECRET, SECRET_B, fault, SLOW, Duration::from_millis(400))
        .await
        .unwrap();
    let connector = Arc::new(crate::http::Connector::default());
    let client = Arc::new(Client::new(connector.clone(), TIMEOUT, 1 << 20).unwrap());
    let url = |base: &str| url::Url::parse(&format!("{base}/webhooks/{}", scheme.name())).unwrap();
    let counter = Counter::Url {
        url: url::Url::parse(&format!("{}/webhooks/count", r.base)).unwrap(),
        pointer: "/count".into(),
    };
    let sent = Deliveries::default();
    let key_b = (without != Without::SourceB).then(|| scheme.key(SECRET_B).unwrap());
    let hold = match without {
        Without::Hold => None,
        Without::HoldRelease => Some(Hold {
            header: Header::new("X-Test-Delay-Ms", SLOW.as_millis().to_string()),
            release: None,
        }),
        _ => Some(Hold {
            header: Header::new("X-Test-Hold", "{{hold}}"),
            release: Some(format!("{}/test-hooks/holds/{{{{hold}}}}/release", r.base)),
        }),
    };
    let env = Env {
        sender: Sender::new(
            client.clone(),
            connector,
            TIMEOUT,
            url(&r.base),
            scheme,
            Template::default_for(scheme),
            scheme
                .key(if without == Without::TheSecret {
                    OTHER_SECRET
                } else {
                    SECRET
                })
                .unwrap(),
            key_b,
            sent.clone(),
        ),
        counts: Counts::new(
            Meter::configured(Some(counter), None, Vec::new(), TIMEOUT),
            client,
            Settling {
                quiet: crate::reference::QUIET_WINDOW,
                timeout: TIMEOUT,
            },
            sent,
        ),
        extras: Extras {
            crash: (without != Without::Crash).then(|| Header::new("X-Test-Crash", "1")),
            replicas: if without == Without::Replica {
                Vec::new()
            } else {
                vec![url(&r.replica_base)]
            },
            hold,
            unknown_event,
            ack_budget: Some(BUDGET),
            late_after: if without == Without::LateAndRestart {
                Duration::ZERO
            } else {
                Duration::from_millis(500)
            },
            restart: (without != Without::LateAndRestart).then(|| r.restart_hook()),
        },
    };
    let info = RunInfo {
        label: "reference".into(),
        reference: true,
        target: "POST reference".into(),
        strict: true,
        context: Vec::new(),
        replay: None,
    };
    let report = run(
        &env,
        &[check],
        info,
        &crate::runner::each::Quiet,
        std::future::pending(),
    )
    .await;
    drop(env);
    r.stop().await.unwrap();
    report.probes
}

/// Each check's rows: the fault that fails it and, for the checks that need an option, what
/// it SKIPs without; with `standard` (a signed timestamp, several signatures).
const ROWS: &[(&str, Option<WebhookFault>, Without)] = &[
    ("wh-first-delivery", None, Without::Nothing),
    (
        "wh-redelivery",
        Some(WebhookFault::NoDedupe),
        Without::Nothing,
    ),
    (
        "wh-byte-replay",
        Some(WebhookFault::NoDedupe),
        Without::Nothing,
    ),
    (
        "wh-bad-signature",
        Some(WebhookFault::AcceptUnsigned),
        Without::Nothing,
    ),
    (
        "wh-distinct-events",
        Some(WebhookFault::BodyHashDedupe),
        Without::Nothing,
    ),
    (
        "wh-concurrent-duplicates",
        Some(WebhookFault::NoDedupe),
        Without::Nothing,
    ),
    (
        "wh-forgery-no-poison",
        Some(WebhookFault::DedupeBeforeVerify),
        Without::Nothing,
    ),
    (
        "wh-stale-timestamp",
        Some(WebhookFault::NoTimestampCheck),
        Without::Nothing,
    ),
    (
        "wh-future-timestamp",
        Some(WebhookFault::AgeOnlyTimestamp),
        Without::Nothing,
    ),
    (
        "wh-rotated-secret",
        Some(WebhookFault::FirstSignatureOnly),
        Without::Nothing,
    ),
    (
        "wh-raw-body",
        Some(WebhookFault::ReserializeBody),
        Without::Nothing,
    ),
    (
        "wh-unknown-type",
        Some(WebhookFault::UnknownType400),
        Without::Nothing,
    ),
    (
        "wh-lost-ack",
        Some(WebhookFault::RecordAfterAck),
        Without::Hold,
    ),
    (
        "wh-retry-after-failure",
        Some(WebhookFault::SeenIsProcessed),
        Without::Crash,
    ),
    (
        "wh-late-redelivery",
        Some(WebhookFault::DedupeInMemory),
        Without::LateAndRestart,
    ),
    (
        "wh-cross-replica",
        Some(WebhookFault::LocalDedupe),
        Without::Replica,
    ),
    (
        "wh-ack-latency",
        Some(WebhookFault::SlowSyncHandler),
        Without::Nothing,
    ),
    (
        "wh-source-isolation",
        Some(WebhookFault::GlobalDedupe),
        Without::SourceB,
    ),
];

/// One row: PASS against the correct consumer with every point declared judged, FAIL
/// against its fault, SKIP without its option.
async fn row(id: &str) {
    let check = super::find(id).unwrap();
    let &(_, fault, without) = ROWS.iter().find(|r| r.0 == id).unwrap();
    let scheme = Scheme::Standard;
    let passed = play(check, scheme, None, Without::Nothing).await;
    assert_eq!(passed.outcome, Outcome::Pass, "{id}: {}", passed.reason);
    for c in &passed.checks {
        let declared = check.point(&c.id).unwrap();
        assert_eq!(
            (c.severity, c.what.as_str()),
            (declared.severity, declared.what())
        );
    }
    if let Some(fault) = fault {
        let failed = play(check, scheme, Some(fault), Without::Nothing).await;
        assert_eq!(
            failed.outcome,
            Outcome::Fail,
            "{id} with {fault}: {}",
            failed.reason
        );
    }
    if without != Without::Nothing {
        let skipped = play(check, scheme, None, without).await;
        assert_eq!(skipped.outcome, Outcome::Skip, "{id}: {}", skipped.reason);
        assert!(skipped.exchanges.is_empty(), "{id} sent before it SKIPped");
    }
}

#[test]
fn every_check_has_its_row() {
    let ids: Vec<&str> = CATALOG.iter().map(|c| c.id).collect();
    let rows: Vec<&str> = ROWS.iter().map(|r| r.0).collect();
    assert_eq!(ids, rows);
}

macro_rules! rows {
    ($($name:ident = $id:literal;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            row($id).await;
        }
    )*};
}

rows! {
    first_delivery = "wh-first-delivery";
    redelivery = "wh-redelivery";
    byte_replay = "wh-byte-replay";
    bad_signature = "wh-bad-signature";
    distinct_events = "wh-distinct-events";
    concurrent_duplicates = "wh-concurrent-duplicates";
    forgery_no_poison = "wh-forgery-no-poison";
    stale_timestamp = "wh-stale-timestamp";
    future_timestamp = "wh-future-timestamp";
    rotated_secret = "wh-rotated-secret";
    raw_body = "wh-raw-body";
    unknown_type = "wh-unknown-type";
    lost_ack = "wh-lost-ack";
    retry_after_failure = "wh-retry-after-failure";
    late_redelivery = "wh-late-redelivery";
    cross_replica = "wh-cross-replica";
    ack_latency = "wh-ack-latency";
    source_isolation = "wh-source-isolation";
}

/// Without a signed timestamp or several signatures (GitHub), the checks that need one SKIP
/// saying why, before sending anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_scheme_cannot_carry_is_skipped() {
    for id in [
        "wh-stale-timestamp",
        "wh-future-timestamp",
        "wh-rotated-secret",
    ] {
        let check = super::find(id).unwrap();
        let report = play(check, Scheme::Github, None, Without::Nothing).await;
        assert_eq!(report.outcome, Outcome::Skip, "{id}: {}", report.reason);
        assert!(report.exchanges.is_empty(), "{id}");
    }
}

/// A consumer fast on an ordinary delivery but slow on synchronous work: `wh-ack-latency`
/// times the delivery a time-based `--hold-header` holds too, and fails it over the budget;
/// `wh-lost-ack` has no hold it can release and SKIPs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_based_hold_is_timed_and_is_no_released_hold() {
    let latency = super::find("wh-ack-latency").unwrap();
    let report = play(latency, Scheme::Standard, None, Without::HoldRelease).await;
    assert_eq!(report.outcome, Outcome::Fail, "{}", report.reason);
    let in_budget = report.checks.iter().find(|c| c.id == "in-budget").unwrap();
    assert_eq!(in_budget.exchanges.len(), 2, "{in_budget:?}");
    assert!(report
        .exchanges
        .iter()
        .any(|e| e.role.label == "delivery held by --hold-header"));
    let lost_ack = super::find("wh-lost-ack").unwrap();
    let report = play(lost_ack, Scheme::Standard, None, Without::HoldRelease).await;
    assert_eq!(report.outcome, Outcome::Skip, "{}", report.reason);
}

/// The calibration fails a consumer that refuses valid deliveries (here: signed with a secret
/// it was not given), and every other check then SKIPs naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_calibration_skips_the_rest() {
    let redelivery = super::find("wh-redelivery").unwrap();
    let seen = reports(redelivery, Scheme::Standard, None, Without::TheSecret).await;
    assert_eq!(seen[0].outcome, Outcome::Fail, "{}", seen[0].reason);
    assert_eq!(seen[1].outcome, Outcome::Skip, "{}", seen[1].reason);
    assert!(
        seen[1]
            .reason
            .starts_with("not run: the calibration wh-first-delivery did not pass"),
        "{}",
        seen[1].reason
    );
}

/// `--unknown-event`'s body is what `wh-unknown-type` sends, as it is: a body of a type no
/// consumer handles passes; a body of a type the reference consumer handles (it reads the type
/// from the body) is applied, and no-effect fails, which only the given body can cause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unknown_event_is_the_given_body() {
    let unknown = super::find("wh-unknown-type").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let body = |name: &str, text: &str| {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        Template::load_json(Scheme::Standard, &file, "--unknown-event").unwrap()
    };
    let unhandled = body(
        "unhandled.json",
        r#"{"type":"subscription.paused","data":{"id":"sub_{{unique}}"}}"#,
    );
    let seen = reports_with(
        unknown,
        Scheme::Standard,
        None,
        Without::Nothing,
        Some(unhandled),
    )
    .await;
    assert_eq!(seen[1].outcome, Outcome::Pass, "{}", seen[1].reason);
    let sent = &seen[1]
        .exchanges
        .iter()
        .find(|e| e.role.label == "unknown type");
    assert!(
        String::from_utf8_lossy(&sent.unwrap().request.body).contains("subscription.paused"),
        "{sent:?}"
    );
    let handled = body(
        "handled.json",
        r#"{"type":"invoice.paid","data":{"id":"in_{{unique}}","amount":1}}"#,
    );
    let seen = reports_with(
        unknown,
        Scheme::Standard,
        None,
        Without::Nothing,
        Some(handled),
    )
    .await;
    assert_eq!(seen[1].outcome, Outcome::Fail, "{}", seen[1].reason);
    assert!(
        seen[1]
            .checks
            .iter()
            .any(|c| c.id == "no-effect" && !c.passed),
        "{:?}",
        seen[1].checks
    );
}
