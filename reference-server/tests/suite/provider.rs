//! Provider mode against a provider stand-in (`common::provider`): what reaches the provider for
//! each profile, and that one client request — however many attempts, lost answers, replays or
//! restarts it takes — reaches it with one key derived from tenant, operation and client key,
//! and that a request the server refuses never reaches it.

use crate::common::provider::{
    derived_key, ref_pointer, FakeProvider, Step, TlsFront, SHORT_ATTEMPT,
};
use crate::common::{body, fresh_key, start_on, Req, StoreKind, TestDb, TestServer};
use idem_reference_server::{Config, ProviderProfile};
use serde_json::{json, Value};

const A: &str = "token-a";
const B: &str = "token-b";

async fn server(
    db: &TestDb,
    provider: &FakeProvider,
    tune: impl FnOnce(&mut Config),
) -> TestServer {
    start_on(db, |c| {
        c.test_hooks = true;
        c.provider_url = Some(provider.url.clone());
        c.provider_profile = provider.profile;
        tune(c);
    })
    .await
}

/// The client key `"k"` as the server parses it: `k`.
fn unquoted(key: &str) -> String {
    key.trim_matches('"').to_owned()
}

/// The body each provider documents for a charge (`payout: false`) or a payout of 12.50 EUR
/// with reference `r` and key `k` (Square's carrier is the body).
fn expected_body(profile: ProviderProfile, payout: bool, r: &str, k: &str) -> Value {
    use ProviderProfile::*;
    match (profile, payout) {
        (Stripe, false) => json!({"amount": "1250", "currency": "eur", "confirm": "true",
            "payment_method": "pm_card_visa", "metadata[reference]": r}),
        (Stripe, true) => json!({"amount": "1250", "currency": "eur", "metadata[reference]": r}),
        (Adyen, false) => json!({"merchantAccount": "IdemCheck",
            "amount": {"value": 1250, "currency": "EUR"}, "reference": r,
            "paymentMethod": {"type": "scheme"}}),
        (Adyen, true) => json!({"amount": {"value": 1250, "currency": "EUR"}, "reference": r,
            "category": "bank"}),
        (Square, false) => json!({"idempotency_key": k, "source_id": "cnon:card-nonce-ok",
            "amount_money": {"amount": 1250, "currency": "EUR"}, "reference_id": r}),
        (Square, true) => json!({"idempotency_key": k, "payment_id": r,
            "amount_money": {"amount": 1250, "currency": "EUR"}}),
        (Paypal, false) => json!({"intent": "CAPTURE", "purchase_units": [{"reference_id": r,
            "amount": {"currency_code": "EUR", "value": "12.50"}}]}),
        (Paypal, true) => json!({"sender_batch_header": {"sender_batch_id": r},
            "items": [{"amount": {"value": "12.50", "currency": "EUR"},
                       "receiver": "payee@example.com", "recipient_type": "EMAIL"}]}),
        (Checkout, false) => json!({"amount": 1250, "currency": "EUR", "reference": r,
            "source": {"type": "token", "token": "tok_idemcheck"}}),
        (Checkout, true) => json!({"reference": r, "transfer_type": "commission",
            "source": {"id": "ent_src", "amount": 1250}, "destination": {"id": "ent_dst"}}),
        (Gocardless, false) => json!({"payments": {"amount": 1250, "currency": "EUR",
            "links": {"mandate": "MD000IDEM"}, "metadata": {"reference": r}}}),
        (Gocardless, true) => json!({"refunds": {"amount": 1250, "links": {"payment": r},
            "metadata": {"reference": r}}}),
        (Generic, _) => json!({"amount": 1250, "currency": "EUR", "reference": r}),
    }
}

/// The charge and payout paths of each profile.
fn paths(profile: ProviderProfile) -> [&'static str; 2] {
    use ProviderProfile::*;
    match profile {
        Stripe => ["/v1/payment_intents", "/v1/payouts"],
        Adyen => ["/v71/payments", "/btl/v4/transfers"],
        Square => ["/v2/payments", "/v2/refunds"],
        Paypal => ["/v2/checkout/orders", "/v1/payments/payouts"],
        Checkout => ["/payments", "/transfers"],
        Gocardless => ["/payments", "/refunds"],
        Generic => ["/charges", "/payouts"],
    }
}

/// One charge and one payout reach the provider at the profile's paths, with its body
/// encoding, the client's reference, and the derived key in the profile's carrier; the
/// provider's id comes back as `providerRef`, in the answer and in the stored payment.
async fn profile_wire(profile: ProviderProfile) {
    let db = TestDb::new(StoreKind::Sqlite);
    let p = FakeProvider::start(profile).await;
    let s = server(&db, &p, |_| {}).await;
    let c = s.client();
    let key = fresh_key();
    let charge = c.send(&Req::payment(A, &key, &body("wire-pay"))).await;
    assert_eq!(charge.status, 201, "{}", charge.text());
    let payout = c.send(&Req::payout(A, &key, &body("wire-po"))).await;
    assert_eq!(payout.status, 201, "{}", payout.text());
    let calls = p.wait_calls(2).await;
    for (i, (call, operation, reference)) in [
        (&calls[0], "payments.create", "wire-pay"),
        (&calls[1], "payouts.create", "wire-po"),
    ]
    .into_iter()
    .enumerate()
    {
        let k = derived_key("tenant-a", operation, &unquoted(&key));
        assert_eq!(call.path, paths(profile)[i], "{profile} {operation}");
        assert_eq!(call.key(profile).as_deref(), Some(k.as_str()), "{profile}");
        let expected = expected_body(profile, i == 1, reference, &k);
        if profile == ProviderProfile::Stripe {
            assert_eq!(
                call.header("content-type"),
                Some("application/x-www-form-urlencoded")
            );
            let form: serde_json::Map<String, Value> = call
                .form()
                .into_iter()
                .map(|(n, v)| (n, Value::String(v)))
                .collect();
            assert_eq!(Value::Object(form), expected, "{profile} {operation}");
        } else {
            assert_eq!(call.header("content-type"), Some("application/json"));
            assert_eq!(call.json(), expected, "{profile} {operation}");
        }
        assert!(ref_pointer(profile, &call.path).starts_with('/'));
    }
    match profile {
        ProviderProfile::Generic => {
            assert!(calls[0]
                .header("idempotency-key")
                .unwrap()
                .starts_with("\"ik_"))
        }
        ProviderProfile::Square => assert_eq!(calls[0].header("idempotency-key"), None),
        _ => {}
    }
    assert_eq!(charge.json()["providerRef"], "prov_1");
    assert_eq!(payout.json()["providerRef"], "prov_2");
    let shown = c
        .send(&Req::get(&format!("/api/payments/{}", charge.id())).token(A))
        .await;
    assert_eq!(shown.body, charge.body, "the row keeps providerRef");
    s.stop().await;
}

macro_rules! profile_tests {
    ($($name:ident => $profile:ident),* $(,)?) => {
        mod wire {
            $(
                #[tokio::test]
                async fn $name() {
                    super::profile_wire(idem_reference_server::ProviderProfile::$profile).await;
                }
            )*
        }
    };
}

profile_tests! {
    stripe => Stripe,
    adyen => Adyen,
    square => Square,
    paypal => Paypal,
    checkout => Checkout,
    gocardless => Gocardless,
    generic => Generic,
}

/// Failed attempts (503 twice) are retried with the same key and the same body, and the
/// request is one charge.
#[tokio::test]
async fn every_attempt_carries_the_same_key_and_parameters() {
    let db = TestDb::new(StoreKind::Sqlite);
    let p = FakeProvider::start(ProviderProfile::Stripe).await;
    p.script([Step::Unavailable, Step::Unavailable]);
    let s = server(&db, &p, |_| {}).await;
    let resp = s
        .client()
        .send(&Req::payment(A, &fresh_key(), &body("attempts")))
        .await;
    assert_eq!(resp.status, 201, "{}", resp.text());
    let calls = p.calls();
    assert_eq!(calls.len(), 3);
    assert!(calls
        .iter()
        .all(|c| c.key(p.profile) == calls[0].key(p.profile)));
    assert!(calls.iter().all(|c| c.body == calls[0].body));
    assert_eq!(p.charges(), 1);
    s.stop().await;
}

/// An attempt the provider never answers runs out of `provider_timeout` and the next attempt
/// carries the same key.
#[tokio::test]
async fn an_unanswered_attempt_times_out_and_is_retried_with_its_key() {
    let db = TestDb::new(StoreKind::Sqlite);
    let p = FakeProvider::start(ProviderProfile::Adyen).await;
    p.script([Step::Hang]);
    let s = server(&db, &p, |c| c.provider_timeout = SHORT_ATTEMPT).await;
    let resp = s
        .client()
        .send(&Req::payment(A, &fresh_key(), &body("hang")))
        .await;
    assert_eq!(resp.status, 201, "{}", resp.text());
    // Two attempts, or three if a loaded machine made the second one late too.
    let keys = p.keys();
    assert!(keys.len() >= 2, "{keys:?}");
    assert!(
        keys.iter().all(|k| k.is_some() && *k == keys[0]),
        "{keys:?}"
    );
    assert_eq!(p.charges(), 1);
    p.release_hangs();
    s.stop().await;
}

/// The provider commits the charge and every attempt's answer is lost: the client gets 503
/// with Retry-After (never a definitive error), the claim is released, and the retry calls
/// with the same key and gets the committed charge. One charge in all.
#[tokio::test]
async fn an_unknown_outcome_is_503_and_the_retry_reuses_the_key() {
    let db = TestDb::new(StoreKind::Sqlite);
    let p = FakeProvider::start(ProviderProfile::Generic).await;
    p.script([Step::CommitThenClose, Step::Reset]);
    let s = server(&db, &p, |c| c.provider_attempts = 2).await;
    let c = s.client();
    let req = Req::payment(A, &fresh_key(), &body("unknown"));
    let first = c.send(&req).await;
    first.assert_problem(503);
    assert_eq!(first.header("retry-after"), Some("1"));
    assert_eq!(c.count(A).await, 0, "nothing committed locally");
    let retry = c.send(&req).await;
    assert_eq!(retry.status, 201, "{}", retry.text());
    assert_eq!(
        retry.json()["providerRef"],
        "prov_1",
        "the committed charge"
    );
    let keys = p.keys();
    assert_eq!(keys.len(), 3);
    assert!(keys.iter().all(|k| *k == keys[0]));
    assert_eq!(p.charges(), 1);
    s.stop().await;
}

/// GoCardless answers a repeated key with 409 naming the resource it created: that resource
/// is the charge.
#[tokio::test]
async fn gocardless_names_the_charge_a_lost_answer_created() {
    let db = TestDb::new(StoreKind::Sqlite);
    let p = FakeProvider::start(ProviderProfile::Gocardless).await;
    p.script([Step::CommitThenClose]);
    let s = server(&db, &p, |_| {}).await;
    let resp = s
        .client()
        .send(&Req::payment(A, &fresh_key(), &body("gc")))
        .await;
    assert_eq!(resp.status, 201, "{}", resp.text());
    assert_eq!(resp.json()["providerRef"], "prov_1");
    assert_eq!((p.calls().len(), p.charges()), (2, 1));
    s.stop().await;
}

/// Each profile's in-progress conflict is waited out and the call made again with its key.
#[tokio::test]
async fn the_in_progress_conflict_is_waited_out() {
    for profile in [
        ProviderProfile::Stripe,
        ProviderProfile::Adyen,
        ProviderProfile::Checkout,
        ProviderProfile::Generic,
    ] {
        let db = TestDb::new(StoreKind::Sqlite);
        let p = FakeProvider::start(profile).await;
        p.script([Step::InProgress, Step::InProgress]);
        let s = server(&db, &p, |c| c.provider_attempts = 1).await;
        let resp = s
            .client()
            .send(&Req::payment(A, &fresh_key(), &body("busy")))
            .await;
        assert_eq!(resp.status, 201, "{profile}: {}", resp.text());
        let keys = p.keys();
        assert_eq!(keys.len(), 3, "{profile}: waits are not attempts");
        assert!(keys.iter().all(|k| *k == keys[0]), "{profile}");
        s.stop().await;
    }
}

/// A definitive refusal answers 502 naming the provider's status and releases the claim, so
/// the client's retry calls again (same key).
#[tokio::test]
async fn a_refusal_is_502_and_releases_the_claim() {
    let db = TestDb::new(StoreKind::Sqlite);
    let p = FakeProvider::start(ProviderProfile::Stripe).await;
    p.script([Step::Refuse]);
    let s = server(&db, &p, |_| {}).await;
    let c = s.client();
    let req = Req::payment(A, &fresh_key(), &body("refused"));
    let refused = c.send(&req).await;
    refused.assert_problem(502);
    let detail = refused.json()["detail"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(detail.contains("status 400"), "{detail}");
    assert_eq!(p.calls().len(), 1, "a refusal is not retried");
    assert_eq!(c.send(&req).await.status, 201);
    let keys = p.keys();
    assert_eq!(keys[0], keys[1]);
    s.stop().await;
}

/// A replay answers from the local record: no call.
#[tokio::test]
async fn a_replay_makes_no_call() {
    let db = TestDb::new(StoreKind::Sqlite);
    let p = FakeProvider::start(ProviderProfile::Paypal).await;
    let s = server(&db, &p, |_| {}).await;
    let c = s.client();
    let req = Req::payment(A, &fresh_key(), &body("replay"));
    let first = c.send(&req).await;
    let replay = c.send(&req).await;
    assert_eq!(replay.header("idempotency-replayed"), Some("true"));
    assert_eq!(replay.body, first.body);
    assert_eq!(p.calls().len(), 1);
    s.stop().await;
}

/// No request the server refuses reaches the provider: a missing or malformed key, an invalid
/// body, a wrong token, another payload under a used key, a duplicate of a request in flight.
#[tokio::test]
async fn refused_requests_make_no_call() {
    let db = TestDb::new(StoreKind::Sqlite);
    let p = FakeProvider::start(ProviderProfile::Generic).await;
    let s = server(&db, &p, |_| {}).await;
    let c = s.client();
    let key = fresh_key();
    let invalid = r#"{"amountCents":0,"currency":"EUR","reference":"bad"}"#;
    let refused = [
        (
            Req::post("/api/payments").token(A).json(&body("nokey")),
            400,
        ),
        (Req::payment(A, "not;a=key(", &body("malformed")), 400),
        (Req::payment(A, &key, invalid), 400),
        (Req::payment("token-x", &key, &body("who")), 401),
    ];
    for (req, status) in &refused {
        assert_eq!(c.send(req).await.status, *status);
    }
    assert_eq!(
        c.send(&Req::payment(A, &key, &body("ok"))).await.status,
        201
    );
    c.send(&Req::payment(A, &key, &body("other")))
        .await
        .assert_idempotency_problem(422);
    let inflight = Req::payment(A, &fresh_key(), &body("inflight"));
    p.script([Step::Hang]);
    let owner = tokio::spawn({
        let req = inflight.clone();
        async move { c.send(&req).await }
    });
    p.wait_calls(2).await;
    c.send(&inflight).await.assert_idempotency_problem(409);
    assert_eq!(p.calls().len(), 2, "only the two accepted requests called");
    p.release_hangs();
    assert_eq!(owner.await.unwrap().status, 201);
    s.stop().await;
}

/// Tenant and operation are part of the key: the same client key of tenant B, or on payouts,
/// gets another provider key, each the one the contract derives.
#[tokio::test]
async fn tenant_and_operation_give_other_keys() {
    let db = TestDb::new(StoreKind::Sqlite);
    let p = FakeProvider::start(ProviderProfile::Checkout).await;
    let s = server(&db, &p, |_| {}).await;
    let c = s.client();
    let key = fresh_key();
    c.send(&Req::payment(A, &key, &body("scope-a"))).await;
    c.send(&Req::payment(B, &key, &body("scope-b"))).await;
    c.send(&Req::payout(A, &key, &body("scope-po"))).await;
    let k = unquoted(&key);
    assert_eq!(
        p.keys(),
        vec![
            Some(derived_key("tenant-a", "payments.create", &k)),
            Some(derived_key("tenant-b", "payments.create", &k)),
            Some(derived_key("tenant-a", "payouts.create", &k)),
        ]
    );
    assert_eq!(p.charges(), 3);
    s.stop().await;
}

/// The key is derived, not remembered: after an unknown outcome and a restart, the retry calls
/// with the key of the first attempt. On both stores.
async fn the_key_survives_a_restart(kind: StoreKind) {
    let db = TestDb::new(kind);
    let p = FakeProvider::start(ProviderProfile::Square).await;
    p.script([Step::CommitThenClose]);
    let tune = |c: &mut Config| c.provider_attempts = 1;
    let req = Req::payment(A, &fresh_key(), &body("restart"));
    let s = server(&db, &p, tune).await;
    s.client().send(&req).await.assert_problem(503);
    s.stop().await;
    let s = server(&db, &p, tune).await;
    let retry = s.client().send(&req).await;
    assert_eq!(retry.status, 201, "{}", retry.text());
    assert_eq!(retry.json()["providerRef"], "prov_1");
    let keys = p.keys();
    assert_eq!(keys[0], keys[1]);
    assert_eq!(p.charges(), 1);
    s.stop().await;
}

on_both_stores!(
    #[tokio::test]
    the_key_survives_a_restart
);

/// The flags reach the provider: the binary started with `--provider-url` and
/// `--provider-profile` charges there.
#[tokio::test]
async fn the_binary_calls_the_provider_its_flags_name() {
    let (_dir, path) = crate::common::temp_db();
    let p = FakeProvider::start(ProviderProfile::Stripe).await;
    let flags = [
        "--provider-url",
        p.url.as_str(),
        "--provider-profile",
        "stripe",
        "--provider-timeout-ms",
        "500",
        "--provider-attempts",
        "2",
    ];
    let (mut child, c) = crate::common::spawn_server(&path, &flags).await;
    p.script([Step::Unavailable]);
    let resp = c.send(&Req::payment(A, &fresh_key(), &body("bin"))).await;
    assert_eq!(resp.status, 201, "{}", resp.text());
    assert_eq!(p.calls()[1].path, "/v1/payment_intents");
    child.kill().await.expect("kill");
}

/// A CA file that cannot be read stops the start with an error naming `--provider-ca`.
#[test]
fn an_unreadable_ca_names_the_flag() {
    let (_dir, path) = crate::common::temp_db();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_idem-reference-server"))
        .args(["--listen", "127.0.0.1:0", "--db"])
        .arg(&path)
        .args([
            "--provider-url",
            "https://127.0.0.1:9",
            "--provider-ca",
            "/nonexistent/ca.pem",
        ])
        .output()
        .expect("run the binary");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--provider-ca /nonexistent/ca.pem"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "it never listened");
}

/// An https provider is reached when `--provider-ca` names its CA, and not without it (the
/// certificate is not trusted, so no call is made and the outcome stays unknown: 503).
#[tokio::test]
async fn an_https_provider_is_trusted_through_provider_ca() {
    let db = TestDb::new(StoreKind::Sqlite);
    let p = FakeProvider::start(ProviderProfile::Generic).await;
    let front = TlsFront::start(&p).await;
    let untrusting = start_on(&db, |c| {
        c.provider_url = Some(front.url.clone());
        c.provider_attempts = 1;
    })
    .await;
    let req = Req::payment(A, &fresh_key(), &body("tls"));
    untrusting.client().send(&req).await.assert_problem(503);
    assert!(p.calls().is_empty());
    untrusting.stop().await;
    let trusting = start_on(&db, |c| {
        c.provider_url = Some(front.url.clone());
        c.provider_ca = Some(front.ca.clone());
    })
    .await;
    let resp = trusting.client().send(&req).await;
    assert_eq!(resp.status, 201, "{}", resp.text());
    assert_eq!(resp.json()["providerRef"], "prov_1");
    trusting.stop().await;
}
