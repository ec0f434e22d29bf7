//! Each fault, on its own, breaks the behaviour its doc comment names — shown over HTTP. The
//! `demonstrate` match is exhaustive, so a new fault cannot be added without its proof, and the
//! tests are generated from the catalog (`for_each_fault!`), so each has tests of its own.

mod provider;

use std::sync::Arc;
use std::time::Duration;

use crate::common::{
    body, fresh_key, start_on, Req, StoreKind, TestDb, TestServer, RACE_HOLD_HEADER,
};
use idem_reference_server::config::ConfigError;
use idem_reference_server::{Config, Fault, ManualClock, Outage};

const A: &str = "token-a";
const B: &str = "token-b";

async fn server(db: &TestDb, fault: Fault, tune: impl FnOnce(&mut Config)) -> TestServer {
    start_on(db, |c| {
        c.test_hooks = true;
        c.fault = Some(fault);
        tune(c);
    })
    .await
}

async fn demonstrate(fault: Fault, kind: StoreKind) {
    let db = TestDb::new(kind);
    match fault {
        Fault::NoKeyRequired => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let resp = c
                .send(&Req::post("/api/payments").token(A).json(&body("nokey")))
                .await;
            assert_eq!(resp.status, 201, "a keyless request executes");
            assert_eq!(c.count(A).await, 1);
            s.stop().await;
        }
        Fault::PlainErrors => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let missing = c
                .send(&Req::post("/api/payments").token(A).json(&body("plain")))
                .await;
            assert_eq!(missing.status, 400);
            assert_eq!(
                missing.header("content-type"),
                Some("text/plain; charset=utf-8")
            );
            assert_eq!(missing.header("link"), None);
            let key = fresh_key();
            c.send(&Req::payment(A, &key, &body("p1"))).await;
            let mismatch = c.send(&Req::payment(A, &key, &body("p2"))).await;
            assert_eq!(mismatch.status, 422);
            assert_ne!(
                mismatch.header("content-type"),
                Some("application/problem+json")
            );
            s.stop().await;
        }
        Fault::Race => {
            // The first request waits inside the window, between its lookup and its claim,
            // until the test releases it: the duplicate sent meanwhile finds no claim and
            // executes too, however slowly the machine schedules either.
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("race"));
            let first = c.send_held_by(RACE_HOLD_HEADER, &req).await;
            assert_eq!(
                c.send(&req).await.status,
                201,
                "the duplicate found no claim"
            );
            assert_eq!(
                first.release().await.status,
                201,
                "the first claimed after it"
            );
            assert_eq!(c.count(A).await, 2, "both executed and stored");
            s.stop().await;
        }
        Fault::Concurrent500 => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("c500"));
            let owner = c.send_held(&req).await;
            assert_eq!(c.send(&req).await.status, 500);
            assert_eq!(owner.release().await.status, 201);
            s.stop().await;
        }
        Fault::NoRetryAfter => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("nra"));
            let owner = c.send_held(&req).await;
            let dup = c.send(&req).await;
            assert_eq!(dup.status, 409);
            assert_eq!(dup.header("retry-after"), None);
            owner.release().await;
            s.stop().await;
        }
        Fault::ExpiringLock => {
            // The lease runs out on the server's clock, which the test moves: nothing renews
            // it under the fault.
            let clock = Arc::new(ManualClock::starting_now());
            let lease = Duration::from_millis(500);
            let s = server(&db, fault, |c| {
                c.lease = lease;
                c.clock = clock.clone();
            })
            .await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("lock"));
            let owner = c.send_held(&req).await;
            assert_eq!(c.send(&req).await.status, 409, "the owner's lease is live");
            clock.advance(lease * 2);
            let dup = c.send(&req).await;
            assert_eq!(dup.status, 201, "the duplicate took over the expired lock");
            assert_eq!(owner.release().await.status, 201, "no fencing");
            assert_eq!(c.count(A).await, 2);
            s.stop().await;
        }
        Fault::NoFingerprint => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let key = fresh_key();
            let first = c.send(&Req::payment(A, &key, &body("nf1"))).await;
            let other = c.send(&Req::payment(A, &key, &body("nf2"))).await;
            assert_eq!(other.status, 201, "another payload gets the old replay");
            assert_eq!(other.body, first.body);
            s.stop().await;
        }
        Fault::ReserializedPayloadIsNew => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let key = fresh_key();
            c.send(&Req::payment(A, &key, &body("rs1"))).await;
            let reordered = r#"{ "reference" : "rs1", "currency" : "EUR", "amountCents" : 1250 }"#;
            assert_eq!(
                c.send(&Req::payment(A, &key, reordered)).await.status,
                422,
                "the same payment with its keys reordered is a mismatch"
            );
            assert_eq!(c.count(A).await, 1);
            s.stop().await;
        }
        Fault::ErrorAfterExecute => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let key = fresh_key();
            let crashed = c
                .send(&Req::payment(A, &key, &body("ea1")).header("x-test-crash", "1"))
                .await;
            assert_eq!(crashed.status, 500);
            assert_eq!(
                c.count(A).await,
                1,
                "the crashed request created its payment"
            );
            let key = fresh_key();
            let invalid = r#"{"amountCents":-1,"currency":"EUR","reference":"ea2"}"#;
            assert_eq!(c.send(&Req::payment(A, &key, invalid)).await.status, 400);
            let valid = c.send(&Req::payment(A, &key, &body("ea2"))).await;
            assert_eq!(valid.status, 400, "the stored 400 is replayed");
            assert_eq!(
                c.count(A).await,
                2,
                "and the valid request executed behind it"
            );
            s.stop().await;
        }
        Fault::Mismatch409 => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let key = fresh_key();
            c.send(&Req::payment(A, &key, &body("m1"))).await;
            assert_eq!(
                c.send(&Req::payment(A, &key, &body("m2"))).await.status,
                409
            );
            s.stop().await;
        }
        Fault::MismatchOverwrite => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let key = fresh_key();
            let first = c.send(&Req::payment(A, &key, &body("o1"))).await;
            assert_eq!(
                c.send(&Req::payment(A, &key, &body("o2"))).await.status,
                422
            );
            let retry = c.send(&Req::payment(A, &key, &body("o1"))).await;
            assert_ne!(retry.body, first.body, "the original no longer replays");
            s.stop().await;
        }
        Fault::ReplayNewId => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("newid"));
            let first = c.send(&req).await;
            let again = c.send(&req).await;
            assert_eq!(again.status, 201);
            assert_ne!(again.id(), first.id());
            assert_eq!(c.count(A).await, 1, "no new payment row");
            s.stop().await;
        }
        Fault::ReplayReexecute => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("reexec"));
            let first = c.send(&req).await;
            let again = c.send(&req).await;
            assert_ne!(again.id(), first.id());
            assert_eq!(c.count(A).await, 2);
            s.stop().await;
        }
        Fault::QuotesLiteral => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            for (i, raw) in [r#""unterminated"#, "42", "?1", "bare"].iter().enumerate() {
                let resp = c
                    .send(&Req::payment(A, raw, &body(&format!("ql{i}"))))
                    .await;
                assert_eq!(resp.status, 201, "malformed {raw:?} accepted");
            }
            s.stop().await;
        }
        Fault::RejectQuoted => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            assert_eq!(
                c.send(&Req::payment(A, &fresh_key(), &body("rq")))
                    .await
                    .status,
                400
            );
            assert_eq!(
                c.send(&Req::payment(A, "bare", &body("rq"))).await.status,
                201
            );
            s.stop().await;
        }
        Fault::SplitOnComma => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let resp = c
                .send(&Req::payment(A, r#""a, \"b\" \\c""#, &body("comma")))
                .await;
            assert_eq!(resp.status, 400);
            s.stop().await;
        }
        Fault::DuplicateHeaderFirst => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("dup")).key(&fresh_key());
            assert_eq!(c.send(&req).await.status, 201);
            s.stop().await;
        }
        Fault::AcceptEmpty => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            assert_eq!(
                c.send(&Req::payment(A, "\"\"", &body("empty")))
                    .await
                    .status,
                201
            );
            s.stop().await;
        }
        Fault::NoKeyLimit => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let huge = format!("\"{}\"", "k".repeat(8 * 1024));
            assert_eq!(
                c.send(&Req::payment(A, &huge, &body("huge"))).await.status,
                201
            );
            assert_eq!(c.count(A).await, 1);
            s.stop().await;
        }
        Fault::ParamsInKey => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let uuid = uuid::Uuid::new_v4();
            let with = c
                .send(&Req::payment(A, &format!("\"{uuid}\";v=1"), &body("pk")))
                .await;
            let without = c
                .send(&Req::payment(A, &format!("\"{uuid}\""), &body("pk")))
                .await;
            assert_eq!(without.header("idempotency-replayed"), Some("false"));
            assert_ne!(with.id(), without.id());
            s.stop().await;
        }
        Fault::UnscopedKeys => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let key = fresh_key();
            let a = c.send(&Req::payment(A, &key, &body("scope"))).await;
            let b = c.send(&Req::payment(B, &key, &body("scope"))).await;
            assert_eq!(b.body, a.body, "tenant B received tenant A's response");
            assert_eq!(c.count(B).await, 0);
            s.stop().await;
        }
        Fault::UnscopedOperation => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let key = fresh_key();
            c.send(&Req::payment(A, &key, &body("op"))).await;
            let payout = c.send(&Req::payout(A, &key, &body("op"))).await;
            assert_ne!(payout.status, 201, "the payout is not independent");
            s.stop().await;
        }
        Fault::MemoryStore if kind == StoreKind::Postgres => {
            // Its records live in a SQLite connection's private memory: refused on PostgreSQL.
            let mut config = Config::new(db.location.clone());
            config.test_hooks = true;
            config.fault = Some(fault);
            assert_eq!(config.validate(), Err(ConfigError::MemoryStoreOnPostgres));
        }
        Fault::MemoryStore => {
            let req = Req::payment(A, &fresh_key(), &body("mem"));
            let s = server(&db, fault, |_| {}).await;
            let first = s.client().send(&req).await;
            s.stop().await;
            let s = server(&db, fault, |_| {}).await;
            let after = s.client().send(&req).await;
            assert_eq!(after.status, 201);
            assert_ne!(after.body, first.body, "the record was lost on restart");
            let other = server(&db, fault, |_| {}).await;
            let replica = other.client().send(&req).await;
            assert_ne!(replica.body, after.body, "records are not shared");
            assert_eq!(s.client().count(A).await, 3);
            s.stop().await;
            other.stop().await;
        }
        Fault::FingerprintDedupe => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let first = c.send(&Req::payment(A, &fresh_key(), &body("fd"))).await;
            let second = c.send(&Req::payment(A, &fresh_key(), &body("fd"))).await;
            assert_eq!(
                second.body, first.body,
                "a new key got another key's result"
            );
            assert_eq!(c.count(A).await, 1);
            s.stop().await;
        }
        Fault::CaseInsensitiveKeys => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let upper = c.send(&Req::payment(A, "\"KEY-1\"", &body("ci"))).await;
            let lower = c.send(&Req::payment(A, "\"key-1\"", &body("ci"))).await;
            assert_eq!(lower.body, upper.body);
            assert_eq!(c.count(A).await, 1);
            s.stop().await;
        }
        Fault::CacheValidationError => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let key = fresh_key();
            let invalid = r#"{"amountCents":0,"currency":"EUR","reference":"x"}"#;
            assert_eq!(c.send(&Req::payment(A, &key, invalid)).await.status, 400);
            let valid = c.send(&Req::payment(A, &key, &body("cve"))).await;
            assert_eq!(valid.status, 400, "the stored 400 is replayed");
            assert_eq!(c.count(A).await, 0);
            s.stop().await;
        }
        Fault::WedgeOnCrash => {
            let clock = Arc::new(ManualClock::starting_now());
            let lease = Duration::from_millis(100);
            let s = server(&db, fault, |c| {
                c.lease = lease;
                c.clock = clock.clone();
            })
            .await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("wedge"));
            assert_eq!(
                c.send(&req.clone().header("X-Test-Crash", "1"))
                    .await
                    .status,
                500
            );
            clock.advance(lease * 3);
            assert_eq!(c.send(&req).await.status, 409, "stuck after the lease");
            s.stop().await;
        }
        Fault::LoserUnlocks => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("loser"));
            let owner = c.send_held(&req).await;
            assert_eq!(c.send(&req).await.status, 409);
            assert_eq!(c.send(&req).await.status, 201, "the loser unlocked the key");
            owner.release().await;
            assert_eq!(
                c.count(A).await,
                1,
                "the owner was fenced, but a duplicate executed"
            );
            s.stop().await;
        }
        Fault::ReleaseOnDisconnect => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("disc"));
            let hold = c.send_held_and_hang_up(&req).await;
            c.release(&hold).await;
            // The record is deleted once the abandoned execution has committed: until then a
            // retry is refused (409), then replayed, and once it is gone it executes again.
            let retry = c
                .send_until(&req, |r| {
                    r.status != 409 && r.header("idempotency-replayed") != Some("true")
                })
                .await;
            assert_eq!(retry.header("idempotency-replayed"), Some("false"));
            assert_eq!(c.count(A).await, 2, "the lost response was executed again");
            s.stop().await;
        }
        Fault::TrustReplayHeader => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("spoof"))
                .header("Idempotency-Replayed", "true");
            let resp = c.send(&req).await;
            assert_eq!((resp.status, resp.text().as_str()), (200, "{}"));
            assert_eq!(c.count(A).await, 0);
            s.stop().await;
        }
        Fault::RejectAll => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let resp = c.send(&Req::payment(A, &fresh_key(), &body("all"))).await;
            assert_eq!(resp.status, 500);
            s.stop().await;
        }
        Fault::LocalClaims => {
            // One instance: duplicates while the original runs are refused, retries replay.
            let one = server(&db, fault, |_| {}).await;
            let req = Req::payment(A, &fresh_key(), &body("local-1"));
            let held = one.client().send_held(&req).await;
            assert_eq!(one.client().send(&req).await.status, 409);
            let first = held.release().await;
            assert_eq!(first.status, 201);
            assert_eq!(one.client().send(&req).await.body, first.body);
            assert_eq!(one.client().count(A).await, 1);
            // Two replicas: a duplicate on the second while the first runs it executes again.
            let two = server(&db, fault, |_| {}).await;
            let req = Req::payment(A, &fresh_key(), &body("local-2"));
            let held = one.client().send_held(&req).await;
            let duplicate = two.client().send(&req).await;
            assert_eq!(duplicate.status, 201, "the other replica executes it");
            assert_eq!(held.release().await.status, 201);
            assert_eq!(one.client().count(A).await, 3);
            one.stop().await;
            two.stop().await;
        }
        Fault::NoExpiry => {
            let clock = Arc::new(ManualClock::starting_now());
            let ttl = Duration::from_millis(300);
            let s = server(&db, fault, |c| {
                c.lease = Duration::from_millis(100);
                c.key_ttl = ttl;
                c.clock = clock.clone();
            })
            .await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("expiry"));
            let first = c.send(&req).await;
            assert_eq!(first.status, 201);
            clock.advance(ttl * 2);
            let late = c.send(&req).await;
            assert_eq!(late.header("idempotency-replayed"), Some("true"));
            assert_eq!(late.body, first.body, "the expired key replays");
            assert_eq!(c.count(A).await, 1);
            s.stop().await;
        }
        Fault::ReplayKeyedReads => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let read = Req::get("/api/payments/count").token(A).key(&fresh_key());
            assert_eq!(c.send(&read).await.json()["count"], 0);
            c.send(&Req::payment(A, &fresh_key(), &body("read"))).await;
            assert_eq!(c.count(A).await, 1);
            assert_eq!(
                c.send(&read).await.json()["count"],
                0,
                "the keyed read replays"
            );
            s.stop().await;
        }
        Fault::KeyNameSpellings => {
            let s = server(&db, fault, |_| {}).await;
            let c = s.client();
            let keyed = |name: &str| {
                Req::post("/api/payments")
                    .token(A)
                    .header(name, fresh_key())
                    .json(&body(name))
            };
            assert_eq!(c.send(&keyed("idempotency-key")).await.status, 201);
            assert_eq!(c.send(&keyed("Idempotency-Key")).await.status, 201);
            c.send(&keyed("IDEMPOTENCY-KEY")).await.assert_problem(400);
            s.stop().await;
        }
        Fault::HangOnOutage => {
            let outage = Outage::default();
            let s = server(&db, fault, |c| c.outage = outage.clone()).await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("hang"));
            outage.set_down(true);
            let send = c.send(&req);
            tokio::pin!(send);
            let early = tokio::time::timeout(Duration::from_millis(200), &mut send).await;
            assert!(early.is_err(), "no 503: the request waits for the store");
            outage.set_down(false);
            assert_eq!(send.await.status, 201, "and executes once it is back");
            assert_eq!(c.count(A).await, 1);
            s.stop().await;
        }
        Fault::FailOpen => {
            let outage = Outage::default();
            let s = server(&db, fault, |c| c.outage = outage.clone()).await;
            let c = s.client();
            let req = Req::payment(A, &fresh_key(), &body("open"));
            outage.set_down(true);
            assert_eq!(c.send(&req).await.status, 201, "executed unprotected");
            outage.set_down(false);
            let retry = c.send(&req).await;
            assert_eq!(retry.header("idempotency-replayed"), Some("false"));
            assert_eq!(c.count(A).await, 2);
            s.stop().await;
        }
        Fault::ProvNoKey
        | Fault::ProvNewKeyPerAttempt
        | Fault::ProvKeyFromBody
        | Fault::ProvRawClientKey
        | Fault::ProvCallBeforeClaim
        | Fault::ProvKeyNotPersisted
        | Fault::ProvTimeoutIsFailure
        | Fault::Prov409IsFailure
        | Fault::ProvReplayRecallsProvider
        | Fault::ProvStaleOwnerNewKey
        | Fault::ProvNoReference
        | Fault::ProvCallBeforeValidate => provider::demonstrate(fault, db).await,
    }
}

/// Two tests per fault, one per store, in a module named after its variant.
macro_rules! fault_tests {
    ($($fault:ident),* $(,)?) => {
        $(
            #[allow(non_snake_case)]
            mod $fault {
                use super::*;

                #[doc = concat!("`", stringify!($fault), "` breaks the behaviour it names, on SQLite.")]
                #[tokio::test]
                async fn sqlite() {
                    demonstrate(Fault::$fault, StoreKind::Sqlite).await;
                }

                #[doc = concat!("`", stringify!($fault), "` breaks the behaviour it names, on PostgreSQL.")]
                #[tokio::test]
                async fn postgres() {
                    demonstrate(Fault::$fault, StoreKind::Postgres).await;
                }
            }
        )*
    };
}

idem_reference_server::for_each_fault!(fault_tests);

/// The README's fault table lists, for every fault, exactly the probes `Fault::breaks()` names
/// (a remark in parentheses after them names probes that break only under other settings).
#[test]
fn readme_fault_table_matches_breaks() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    for fault in idem_reference_server::Fault::ALL {
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", fault.name())))
            .unwrap_or_else(|| panic!("README has no row for {}", fault.name()));
        let last = row
            .trim_end_matches('|')
            .rsplit('|')
            .next()
            .unwrap_or_default();
        let listed: Vec<&str> = last
            .split('(')
            .next()
            .unwrap_or_default()
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|s| !s.starts_with("--"))
            .collect();
        assert_eq!(listed, fault.breaks(), "README row of {}", fault.name());
    }
}
