//! The webhook consumer over HTTP, for each of the six schemes, on SQLite and on PostgreSQL:
//! a valid delivery applies once, a redelivery is acknowledged without effect, forgeries and
//! stale or future timestamps are refused, a rotated secret's second signature is accepted, a
//! failed delivery is applied by its redelivery, concurrent duplicates apply once, a dropped
//! connection loses nothing, and two servers on one database (replicas) share the record.

use crate::common::webhook::{
    delivery, event, handled, now, signed, Event, SECRET, SECRET_B, WRONG_SECRET,
};
use crate::common::{start_on, Client, Req, StoreKind, TestDb, TestServer};
use idem_reference_server::{Config, WebhookScheme as Scheme};

fn consumer(config: &mut Config) {
    config.test_hooks = true;
    config.webhook_secret = Some(SECRET.into());
    config.webhook_secret_b = Some(SECRET_B.into());
}

async fn start(db: &TestDb) -> TestServer {
    start_on(db, consumer).await
}

/// Sends `req` and returns its status and how much the effect counter moved.
async fn effect(client: &Client, req: &Req) -> (u16, u64) {
    let before = client.webhook_count().await;
    let resp = client.send(req).await;
    (resp.status, client.webhook_count().await - before)
}

/// Every scheme: first delivery, redelivery, tampering, wrong secret, missing signature,
/// stale and future timestamps, rotation, unknown type, crash and redelivery.
async fn each_scheme_applies_once_and_refuses_forgeries(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start(&db).await;
    let client = server.client();
    for &scheme in Scheme::ALL {
        let at = now();
        let e = handled(scheme);
        let first = effect(&client, &signed(scheme, &e, at)).await;
        assert_eq!(first, (200, 1), "{scheme}: first delivery");
        let again = effect(&client, &signed(scheme, &e, at + 1)).await;
        assert_eq!(again, (200, 0), "{scheme}: redelivery re-signed");
        let replay = effect(&client, &signed(scheme, &e, at)).await;
        assert_eq!(replay, (200, 0), "{scheme}: byte-for-byte replay");

        let fresh = handled(scheme);
        let tampered = signed(scheme, &fresh, at).body([&fresh.body[..], b" "].concat());
        assert_eq!(
            effect(&client, &tampered).await,
            (401, 0),
            "{scheme}: tampered"
        );
        let wrong = delivery(scheme, &fresh, at, &[WRONG_SECRET]);
        assert_eq!(
            effect(&client, &wrong).await,
            (401, 0),
            "{scheme}: wrong secret"
        );
        let unsigned = Req::post(&format!("/webhooks/{scheme}")).body(fresh.body.clone());
        let (status, moved) = effect(&client, &unsigned).await;
        assert!(
            (400..500).contains(&status) && moved == 0,
            "{scheme}: unsigned {status}"
        );

        if scheme.signs_timestamp() {
            for (what, ts) in [("stale", now() - 360), ("future", now() + 360)] {
                let (status, moved) = effect(&client, &signed(scheme, &fresh, ts)).await;
                assert_eq!((status, moved), (401, 0), "{scheme}: {what} timestamp");
            }
        }
        if scheme.signs_several() {
            let rotated = delivery(scheme, &fresh, at, &[WRONG_SECRET, SECRET]);
            assert_eq!(
                effect(&client, &rotated).await,
                (200, 1),
                "{scheme}: rotated"
            );
        }

        let unknown = event(scheme, "idem_check.unknown");
        let ignored = effect(&client, &signed(scheme, &unknown, at)).await;
        assert_eq!(ignored, (200, 0), "{scheme}: unknown type");

        let failing = handled(scheme);
        let crashed = signed(scheme, &failing, at).header("X-Test-Crash", "1");
        assert_eq!(effect(&client, &crashed).await, (500, 0), "{scheme}: crash");
        let retried = effect(&client, &signed(scheme, &failing, at + 5)).await;
        assert_eq!(retried, (200, 1), "{scheme}: redelivery after a failure");
    }
    server.stop().await;
}

/// The same event id from the two sources is two events; each source's redelivery is one.
async fn sources_are_deduplicated_apart(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start(&db).await;
    let client = server.client();
    for &scheme in Scheme::ALL {
        let e = handled(scheme);
        let from_b = delivery(scheme, &e, now(), &[SECRET_B]);
        assert_eq!(effect(&client, &signed(scheme, &e, now())).await, (200, 1));
        assert_eq!(
            effect(&client, &from_b).await,
            (200, 1),
            "{scheme}: source b"
        );
        assert_eq!(
            effect(&client, &from_b).await,
            (200, 0),
            "{scheme}: b again"
        );
    }
    server.stop().await;
}

/// Duplicates sent while the first delivery is held (after its claim) get 409 and apply
/// nothing; once it is released it applies once, and every later delivery is a duplicate.
async fn concurrent_duplicates_apply_once(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start(&db).await;
    let client = server.client();
    for &scheme in Scheme::ALL {
        let e = handled(scheme);
        let before = client.webhook_count().await;
        let held = client.send_held(&signed(scheme, &e, now())).await;
        let copies: Vec<Req> = (1..=4).map(|i| signed(scheme, &e, now() + i)).collect();
        let duplicates =
            futures::future::join_all(copies.iter().map(|copy| client.send(copy))).await;
        for d in &duplicates {
            assert_eq!(d.status, 409, "{scheme}: duplicate in flight: {}", d.text());
            assert_eq!(d.header("retry-after"), Some("1"));
        }
        assert_eq!(held.release().await.status, 200);
        assert_eq!(client.webhook_count().await - before, 1, "{scheme}");
        let later = client.send(&signed(scheme, &e, now() + 9)).await;
        assert_eq!(later.status, 200, "{}", later.text());
        assert_eq!(client.webhook_count().await - before, 1, "{scheme}");
    }
    server.stop().await;
}

/// A sender that hangs up before the answer does not cancel the work: the redelivery after it
/// is acknowledged without a second effect.
async fn a_lost_acknowledgement_loses_nothing(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start(&db).await;
    let client = server.client();
    let scheme = Scheme::Standard;
    let e = handled(scheme);
    let before = client.webhook_count().await;
    let hold = client
        .send_held_and_hang_up(&signed(scheme, &e, now()))
        .await;
    client.release(&hold).await;
    let redelivery = client
        .send_until(&signed(scheme, &e, now() + 1), |r| r.status != 409)
        .await;
    assert_eq!(redelivery.status, 200, "{}", redelivery.text());
    assert_eq!(client.webhook_count().await - before, 1);
    server.stop().await;
}

/// Two servers on one database (replicas) share the record: a redelivery to the other is a
/// duplicate, and a duplicate sent to the other while the first is held gets 409. After a
/// restart every id is still known.
async fn replicas_and_restarts_share_the_record(kind: StoreKind) {
    let db = TestDb::new(kind);
    let one = start(&db).await;
    let two = start(&db).await;
    let (a, b) = (one.client(), two.client());
    let scheme = Scheme::Stripe;
    let e: Event = handled(scheme);
    assert_eq!(effect(&a, &signed(scheme, &e, now())).await, (200, 1));
    assert_eq!(effect(&b, &signed(scheme, &e, now() + 1)).await, (200, 0));

    let racing = handled(scheme);
    let held = a.send_held(&signed(scheme, &racing, now())).await;
    assert_eq!(
        b.send(&signed(scheme, &racing, now() + 1)).await.status,
        409
    );
    assert_eq!(held.release().await.status, 200);
    assert_eq!(b.webhook_count().await, 2);

    one.stop().await;
    two.stop().await;
    let again = start(&db).await;
    let c = again.client();
    assert_eq!(effect(&c, &signed(scheme, &e, now() + 2)).await, (200, 0));
    assert_eq!(
        effect(&c, &signed(scheme, &racing, now() + 2)).await,
        (200, 0)
    );
    again.stop().await;
}

/// Two server processes on one database, every event of a burst delivered to both at once,
/// three times over: each applies exactly once, whichever replica won it.
async fn replica_processes_apply_a_burst_once(kind: StoreKind) {
    const EVENTS: usize = 40;
    let db = TestDb::new(kind);
    let flags = ["--webhook-secret", SECRET];
    let (_one, a) = crate::common::spawn_server(db.arg(), &flags).await;
    let (_two, b) = crate::common::spawn_server(db.arg(), &flags).await;
    let scheme = Scheme::Svix;
    let events: Vec<Event> = (0..EVENTS).map(|_| handled(scheme)).collect();
    let mut sends = Vec::new();
    for (i, e) in events.iter().enumerate() {
        for round in 0..3 {
            let req = signed(scheme, e, now() + round);
            let client = if (i + round as usize) % 2 == 0 { a } else { b };
            let other = if client.addr == a.addr { b } else { a };
            sends.push(async move {
                let (x, y) = tokio::join!(client.send(&req), other.send(&req));
                [x.status, y.status]
            });
        }
    }
    let statuses: Vec<[u16; 2]> = futures::future::join_all(sends).await;
    for status in statuses.iter().flatten() {
        assert!(matches!(status, 200 | 409), "answered {status}");
    }
    assert_eq!(a.webhook_count().await, EVENTS as u64);
    // Every event is known to both now: one more round is all duplicates.
    for e in &events {
        let (late_a, late_b) = (signed(scheme, e, now() + 5), signed(scheme, e, now() + 6));
        let (x, y) = tokio::join!(a.send(&late_a), b.send(&late_b));
        assert_eq!((x.status, y.status), (200, 200));
    }
    assert_eq!(b.webhook_count().await, EVENTS as u64);
}

/// Slack's URL verification is answered with its challenge, once signed; nothing is applied.
async fn slack_url_verification_is_answered(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start(&db).await;
    let client = server.client();
    let challenge = Event {
        id: String::new(),
        kind: String::new(),
        body: br#"{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#.to_vec(),
    };
    let resp = client.send(&signed(Scheme::Slack, &challenge, now())).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        resp.json()["challenge"],
        "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    );
    assert_eq!(client.webhook_count().await, 0);
    server.stop().await;
}

/// Without a secret the consumer is off; with a badly formed one the server does not start.
#[tokio::test]
async fn the_consumer_is_off_without_a_secret_and_refuses_a_malformed_one() {
    let db = TestDb::new(StoreKind::Sqlite);
    let server = start_on(&db, |_| {}).await;
    let client = server.client();
    let e = handled(Scheme::Github);
    assert_eq!(
        client.send(&signed(Scheme::Github, &e, now())).await.status,
        404
    );
    assert_eq!(client.send(&Req::get("/webhooks/count")).await.status, 404);
    server.stop().await;
    let mut config = Config::new(db.location.clone());
    config.webhook_secret = Some("not-a-whsec".into());
    let refused = config.validate().expect_err("a malformed secret");
    assert!(
        refused.to_string().contains("--webhook-secret"),
        "{refused}"
    );
}

on_both_stores! {
    #[tokio::test]
    each_scheme_applies_once_and_refuses_forgeries,
    sources_are_deduplicated_apart,
    concurrent_duplicates_apply_once,
    a_lost_acknowledgement_loses_nothing,
    replicas_and_restarts_share_the_record,
    replica_processes_apply_a_burst_once,
    slack_url_verification_is_answered,
}
