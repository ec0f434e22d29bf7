//! The provider faults, each shown on the wire: what the provider stand-in received (and
//! charged) under the fault, where the correct server (`provider.rs`) sends one stable
//! key, once, only for a request it accepted.

use std::sync::Arc;
use std::time::Duration;

use crate::common::provider::{derived_key, FakeProvider, Step};
use crate::common::{body, fresh_key, start_on, Req, TestDb, TestServer};
use idem_reference_server::{Config, Fault, ManualClock, ProviderProfile};

const A: &str = "token-a";
const B: &str = "token-b";

async fn server(
    db: &TestDb,
    fault: Fault,
    provider: &FakeProvider,
    tune: impl FnOnce(&mut Config),
) -> TestServer {
    start_on(db, |c| {
        c.test_hooks = true;
        c.fault = Some(fault);
        c.provider_url = Some(provider.url.clone());
        c.provider_profile = provider.profile;
        tune(c);
    })
    .await
}

/// The key of the client's quoted key `"k"` as the server parses it: `k`.
fn unquoted(key: &str) -> String {
    key.trim_matches('"').to_owned()
}

pub(super) async fn demonstrate(fault: Fault, db: TestDb) {
    let p = FakeProvider::start(ProviderProfile::Generic).await;
    match fault {
        Fault::ProvNoKey => {
            let s = server(&db, fault, &p, |_| {}).await;
            let resp = s
                .client()
                .send(&Req::payment(A, &fresh_key(), &body("nokey")))
                .await;
            assert_eq!(resp.status, 201, "{}", resp.text());
            let calls = p.wait_calls(1).await;
            assert_eq!(
                calls[0].header("idempotency-key"),
                None,
                "no key on the wire"
            );
            s.stop().await;
        }
        Fault::ProvNewKeyPerAttempt => {
            let s = server(&db, fault, &p, |_| {}).await;
            p.script([Step::Unavailable]);
            let resp = s
                .client()
                .send(&Req::payment(A, &fresh_key(), &body("perattempt")))
                .await;
            assert_eq!(resp.status, 201, "{}", resp.text());
            let keys = p.keys();
            assert_eq!(keys.len(), 2);
            assert_ne!(keys[0], keys[1], "the retry carried another key");
            p.script([Step::InProgress]);
            let busy = s
                .client()
                .send(&Req::payment(A, &fresh_key(), &body("busy")))
                .await;
            assert_eq!(busy.status, 201, "{}", busy.text());
            let keys = p.keys();
            assert_ne!(
                keys[2], keys[3],
                "the wait for the call in flight ended in another key"
            );
            s.stop().await;
        }
        Fault::ProvKeyFromBody => {
            let s = server(&db, fault, &p, |_| {}).await;
            let c = s.client();
            let first = c.send(&Req::payment(A, &fresh_key(), &body("same"))).await;
            let second = c.send(&Req::payment(A, &fresh_key(), &body("same"))).await;
            assert_eq!((first.status, second.status), (201, 201));
            let keys = p.keys();
            assert_eq!(keys[0], keys[1], "two orders, one provider key");
            assert_eq!(p.charges(), 1, "the second order was never charged");
            assert_eq!(first.json()["providerRef"], second.json()["providerRef"]);
            let key = fresh_key();
            c.send(&Req::payment(A, &key, &body("tenants"))).await;
            let b = c.send(&Req::payment(B, &key, &body("tenants"))).await;
            assert_eq!(b.status, 201, "{}", b.text());
            let keys = p.keys();
            assert_eq!(keys[2], keys[3], "tenant B's order under tenant A's key");
            assert_eq!(p.charges(), 2);
            s.stop().await;
        }
        Fault::ProvRawClientKey => {
            let s = server(&db, fault, &p, |_| {}).await;
            let c = s.client();
            let key = fresh_key();
            c.send(&Req::payment(A, &key, &body("raw-a"))).await;
            let b = c.send(&Req::payment(B, &key, &body("raw-b"))).await;
            c.send(&Req::payout(A, &key, &body("raw-po"))).await;
            assert_eq!(b.status, 201, "{}", b.text());
            let keys = p.keys();
            assert_eq!(
                keys,
                vec![Some(unquoted(&key)); 3],
                "the client's key, unscoped"
            );
            assert_eq!(p.charges(), 2, "tenant B's charge replayed tenant A's");
            s.stop().await;
        }
        Fault::ProvCallBeforeClaim => {
            // The first request's call hangs at the provider, its key claimed; the duplicate
            // sent meanwhile calls the provider before it finds the claim.
            let s = server(&db, fault, &p, |_| {}).await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("early"));
            p.script([Step::Hang]);
            let first = tokio::spawn({
                let req = req.clone();
                async move { c.send(&req).await }
            });
            p.wait_calls(1).await;
            let dup = c.send(&req).await;
            assert_eq!(p.calls().len(), 2, "the duplicate called the provider too");
            p.release_hangs();
            let first = first.await.unwrap();
            assert!(
                [dup.status, first.status].contains(&201),
                "{} {}",
                dup.status,
                first.status
            );
            s.stop().await;
        }
        Fault::ProvKeyNotPersisted => {
            // The outcome stays unknown (every attempt reset); after a restart the client's
            // retry calls with another key.
            p.script([Step::Reset, Step::Reset]);
            let tune = |c: &mut Config| c.provider_attempts = 2;
            let s = server(&db, fault, &p, tune).await;
            let req = Req::payment(A, &fresh_key(), &body("memory"));
            assert_eq!(s.client().send(&req).await.status, 503);
            s.stop().await;
            let s = server(&db, fault, &p, tune).await;
            assert_eq!(s.client().send(&req).await.status, 201);
            let keys = p.keys();
            assert_eq!(keys.len(), 3);
            assert_eq!(keys[0], keys[1], "one process, one key");
            assert_ne!(keys[1], keys[2], "the restarted process drew another");
            s.stop().await;
        }
        Fault::ProvTimeoutIsFailure => {
            // The provider commits the charge and the answer is lost: the client is told the
            // payment failed, for good.
            p.script([Step::CommitThenClose, Step::Reset]);
            let s = server(&db, fault, &p, |c| c.provider_attempts = 2).await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("failed"));
            let resp = c.send(&req).await;
            assert_eq!(resp.status, 402, "{}", resp.text());
            let retry = c.send(&req).await;
            assert_eq!(retry.status, 402, "the failure is the key's result");
            assert_eq!(p.calls().len(), 2, "the retry never reached the provider");
            assert_eq!(p.charges(), 1, "charged, though answered as failed");
            s.stop().await;
        }
        Fault::Prov409IsFailure => {
            let s = server(&db, fault, &p, |_| {}).await;
            p.script([Step::InProgress]);
            let resp = s
                .client()
                .send(&Req::payment(A, &fresh_key(), &body("busy")))
                .await;
            assert_eq!(resp.status, 502, "{}", resp.text());
            assert_eq!(p.calls().len(), 1, "no waiting for the call in flight");
            s.stop().await;
        }
        Fault::ProvReplayRecallsProvider => {
            let s = server(&db, fault, &p, |_| {}).await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("recall"));
            c.send(&req).await;
            let replay = c.send(&req).await;
            assert_eq!(replay.header("idempotency-replayed"), Some("true"));
            let keys = p.keys();
            assert_eq!(keys.len(), 2, "the replay called the provider");
            assert_eq!(keys[0], keys[1]);
            s.stop().await;
        }
        Fault::ProvStaleOwnerNewKey => {
            // The first owner's call hangs past its lease (on the server's clock, which the
            // test moves; nothing renews it under the fault): the duplicate takes the claim
            // over and calls with a fresh key, so the provider charges twice.
            let clock = Arc::new(ManualClock::starting_now());
            let lease = Duration::from_millis(500);
            let s = server(&db, fault, &p, |c| {
                c.lease = lease;
                c.clock = clock.clone();
            })
            .await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("stale"));
            p.script([Step::Hang]);
            let first = tokio::spawn({
                let req = req.clone();
                async move { c.send(&req).await }
            });
            p.wait_calls(1).await;
            clock.advance(lease * 2);
            p.script([Step::Unavailable]);
            let dup = c.send(&req).await;
            assert_eq!(dup.status, 201, "{}", dup.text());
            p.release_hangs();
            assert_eq!(
                first.await.unwrap().status,
                409,
                "the stale owner was fenced"
            );
            let keys = p.keys();
            assert_ne!(keys[0], keys[1], "the new owner drew a new key");
            assert_eq!(keys[1], keys[2], "and kept it over its own attempts");
            assert_eq!(p.charges(), 2, "two charges for one request");
            s.stop().await;
        }
        Fault::ProvNoReference => {
            let s = server(&db, fault, &p, |_| {}).await;
            let c = s.client();
            let resp = c.send(&Req::payment(A, &fresh_key(), &body("noref"))).await;
            assert_eq!(resp.status, 201);
            assert_eq!(p.charges(), 1);
            assert!(resp.json().get("providerRef").is_none(), "{}", resp.text());
            let shown = c
                .send(&Req::get(&format!("/api/payments/{}", resp.id())).token(A))
                .await;
            assert!(shown.json().get("providerRef").is_none());
            s.stop().await;
        }
        Fault::ProvCallBeforeValidate => {
            let s = server(&db, fault, &p, |_| {}).await;
            let c = s.client();
            let key = fresh_key();
            let invalid = r#"{"amountCents":0,"currency":"EUR","reference":"invalid"}"#;
            assert_eq!(c.send(&Req::payment(A, &key, invalid)).await.status, 400);
            let keyless = Req::post("/api/payments").token(A).json(&body("keyless"));
            assert_eq!(c.send(&keyless).await.status, 400);
            let garbled = Req::payment(A, &fresh_key(), "not json, token-7f3a");
            assert_eq!(c.send(&garbled).await.status, 400);
            c.send(&Req::payment(A, &key, &body("valid"))).await;
            let mismatch = c.send(&Req::payment(A, &key, &body("other"))).await;
            assert_eq!(mismatch.status, 422);
            let calls = p.calls();
            assert_eq!(calls.len(), 5, "every refused request called the provider");
            assert_eq!(calls[1].json()["reference"], "keyless");
            assert_eq!(
                calls[2].json()["reference"],
                "not json, token-7f3a",
                "a body without a reference is passed on in its place"
            );
            let replay = c.send(&Req::payment(A, &key, &body("valid"))).await;
            assert_eq!(replay.header("idempotency-replayed"), Some("true"));
            assert_eq!(p.calls().len(), 5, "an exact replay is answered first");
            // The first call is held at the provider before any claim: its duplicate calls too.
            let req = Req::payment(A, &fresh_key(), &body("burst"));
            p.script([Step::Hang]);
            let first = tokio::spawn({
                let req = req.clone();
                async move { c.send(&req).await }
            });
            p.wait_calls(6).await;
            let dup = tokio::spawn({
                let req = req.clone();
                async move { c.send(&req).await }
            });
            p.wait_calls(7).await;
            p.release_hangs();
            let statuses = [first.await.unwrap().status, dup.await.unwrap().status];
            assert!(statuses.contains(&201), "{statuses:?}");
            assert_eq!(
                p.keys()[0],
                Some(derived_key("tenant-a", "payments.create", &unquoted(&key)))
            );
            s.stop().await;
        }
        other => panic!("{other} is not a provider fault"),
    }
}
