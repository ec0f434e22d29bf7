//! The claim state machine against a temporary database, with a manual clock: lease takeover,
//! fencing, heartbeats, release and TTL expiry, without sleeping for any of them.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use crate::common::{StoreKind, TestDb};
use axum::body::Bytes;
use idem_reference_server::payments::PaymentRecord;
use idem_reference_server::store::{
    self, Claimed, Completion, Finish, NewPayment, Owner, Scope, Store, StoredResponse, TakeOver,
};
use idem_reference_server::{Clock, Config, DbLocation, ManualClock};

const LEASE: Duration = Duration::from_secs(30);
const TTL: Duration = Duration::from_secs(24 * 60 * 60);

async fn open(db: &TestDb, clock: &Arc<ManualClock>) -> Arc<dyn Store> {
    let mut config = Config::new(db.location.clone());
    config.lease = LEASE;
    config.key_ttl = TTL;
    config.clock = clock.clone();
    store::open(&config).await.expect("open store")
}

/// A manual clock on a whole millisecond (the store keeps milliseconds).
fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(
        UNIX_EPOCH + Duration::from_millis(1_800_000_000_000),
    ))
}

fn scope(key: &str) -> Scope {
    Scope {
        tenant: "tenant-a".into(),
        operation: "payments.create".into(),
        key: key.into(),
    }
}

fn response(body: &str) -> StoredResponse {
    StoredResponse {
        status: 201,
        content_type: "application/json".into(),
        location: Some("/api/payments/x".into()),
        body: Bytes::from(body.to_owned()),
    }
}

fn payment(id: &str) -> NewPayment {
    NewPayment {
        tenant: "tenant-a".into(),
        operation: "payments.create".into(),
        record: PaymentRecord {
            id: id.into(),
            amount_cents: 1,
            currency: "EUR".into(),
            reference: "r".into(),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            provider_ref: Some(format!("prov_{id}")),
        },
    }
}

/// What a claim saw, as the algorithm above the store reads it.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Acquired(Owner, bool),
    InProgress,
    Mismatch,
    Replay(Bytes),
}

async fn claim(store: &dyn Store, scope: &Scope, fingerprint: &str) -> Seen {
    match store
        .claim(scope, fingerprint, TakeOver::CORRECT)
        .await
        .expect("claim")
    {
        Claimed::Acquired { owner, taken_over } => Seen::Acquired(owner, taken_over),
        Claimed::Held(r) if r.fingerprint != fingerprint => Seen::Mismatch,
        Claimed::Held(r) if r.completed => Seen::Replay(r.response.expect("response").body.clone()),
        Claimed::Held(_) => Seen::InProgress,
    }
}

fn finish(
    scope: &Scope,
    owner: &Owner,
    fingerprint: &str,
    payment: Option<NewPayment>,
    response: StoredResponse,
) -> Finish {
    Finish {
        scope: scope.clone(),
        owner: owner.clone(),
        fingerprint: fingerprint.to_owned(),
        payment,
        response,
        fenced: true,
        ttl: None,
    }
}

async fn acquire(store: &dyn Store, scope: &Scope, fingerprint: &str) -> (Owner, bool) {
    match claim(store, scope, fingerprint).await {
        Seen::Acquired(owner, taken_over) => (owner, taken_over),
        other => panic!("expected to acquire, got {other:?}"),
    }
}

async fn count(store: &dyn Store) -> u64 {
    store
        .count("tenant-a", "payments.create")
        .await
        .expect("count")
}

/// A claim whose owner died (no heartbeat) is taken over once the lease has run out; the dead
/// owner's late completion is fenced off and writes nothing; the new owner's result replays.
async fn an_expired_lease_is_taken_over_and_the_stale_owner_is_fenced(kind: StoreKind) {
    let db = TestDb::new(kind);
    let clock = clock();
    let store = open(&db, &clock).await;
    let k = scope("k1");
    let (dead, taken_over) = acquire(&*store, &k, "fp").await;
    assert!(!taken_over);
    clock.advance(LEASE - Duration::from_millis(1));
    assert_eq!(claim(&*store, &k, "fp").await, Seen::InProgress);
    clock.advance(Duration::from_millis(1));
    let (successor, taken_over) = acquire(&*store, &k, "fp").await;
    assert!(taken_over);
    assert_ne!(dead, successor);

    let stale = store
        .complete(finish(
            &k,
            &dead,
            "fp",
            Some(payment("pay_dead")),
            response("dead"),
        ))
        .await
        .expect("complete");
    assert_eq!(stale, Completion::Fenced);
    assert!(!store.heartbeat(&k, &dead).await.expect("renew"));
    assert_eq!(
        count(&*store).await,
        0,
        "a fenced completion writes no payment"
    );

    let done = store
        .complete(finish(
            &k,
            &successor,
            "fp",
            Some(payment("pay_new")),
            response("new"),
        ))
        .await
        .expect("complete");
    assert!(matches!(done, Completion::Completed { .. }));
    match claim(&*store, &k, "fp").await {
        Seen::Replay(body) => assert_eq!(body, "new"),
        other => panic!("expected a replay, got {other:?}"),
    }
    assert_eq!(count(&*store).await, 1);
    store.close().await.expect("close");
}

/// Heartbeats extend the lease from the time of renewal, so a live owner is never taken over.
async fn heartbeats_extend_the_lease(kind: StoreKind) {
    let db = TestDb::new(kind);
    let clock = clock();
    let store = open(&db, &clock).await;
    let k = scope("k2");
    let (owner, _) = acquire(&*store, &k, "fp").await;
    for _ in 0..5 {
        clock.advance(LEASE / 3 * 2);
        assert!(store.heartbeat(&k, &owner).await.expect("renew"));
        assert_eq!(claim(&*store, &k, "fp").await, Seen::InProgress);
    }
    clock.advance(LEASE);
    let (_, taken_over) = acquire(&*store, &k, "fp").await;
    assert!(taken_over, "without heartbeats the lease runs out");
    store.close().await.expect("close");
}

/// Another payload under a used key is a mismatch, whether the key is processing or completed,
/// and the record is untouched.
async fn another_fingerprint_is_a_mismatch_in_every_state(kind: StoreKind) {
    let db = TestDb::new(kind);
    let clock = clock();
    let store = open(&db, &clock).await;
    let k = scope("k3");
    let (owner, _) = acquire(&*store, &k, "fp").await;
    assert_eq!(claim(&*store, &k, "other").await, Seen::Mismatch);
    store
        .complete(finish(
            &k,
            &owner,
            "fp",
            Some(payment("pay_3")),
            response("three"),
        ))
        .await
        .expect("complete");
    assert_eq!(claim(&*store, &k, "other").await, Seen::Mismatch);
    assert!(matches!(claim(&*store, &k, "fp").await, Seen::Replay(_)));
    store.close().await.expect("close");
}

/// Releasing a failed claim lets the next request execute immediately, without waiting for
/// the lease; only the owner can release.
async fn release_frees_the_key_for_its_owner_only(kind: StoreKind) {
    let db = TestDb::new(kind);
    let clock = clock();
    let store = open(&db, &clock).await;
    let k = scope("k4");
    let (owner, _) = acquire(&*store, &k, "fp").await;
    let (intruder, _) = acquire(&*store, &scope("k4-other"), "fp").await;
    assert!(!store.release(&k, &intruder).await.expect("release"));
    assert_eq!(claim(&*store, &k, "fp").await, Seen::InProgress);
    assert!(store.release(&k, &owner).await.expect("release"));
    let (_, taken_over) = acquire(&*store, &k, "fp").await;
    assert!(!taken_over);
    store.close().await.expect("close");
}

/// A completed key is replayed until its TTL, treated as absent after it (even before the
/// purge), and deleted by the purge; a live claim is never purged.
async fn completed_keys_expire_after_the_ttl(kind: StoreKind) {
    let db = TestDb::new(kind);
    let clock = clock();
    let store = open(&db, &clock).await;
    let k = scope("k5");
    let (owner, _) = acquire(&*store, &k, "fp").await;
    let completed_at = clock.now();
    let done = store
        .complete(finish(
            &k,
            &owner,
            "fp",
            Some(payment("pay_5")),
            response("five"),
        ))
        .await
        .expect("complete");
    assert_eq!(
        done,
        Completion::Completed {
            expires_at: completed_at + TTL
        }
    );
    clock.advance(TTL - Duration::from_millis(1));
    assert!(matches!(claim(&*store, &k, "fp").await, Seen::Replay(_)));
    let live = scope("k5-live");
    let (live_owner, _) = acquire(&*store, &live, "fp").await;
    clock.advance(Duration::from_millis(1));
    assert_eq!(store.purge().await.expect("purge"), 1);
    assert_eq!(claim(&*store, &live, "fp").await, Seen::InProgress);
    let (_, taken_over) = acquire(&*store, &k, "other-payload").await;
    assert!(
        !taken_over,
        "an expired key is a new key, whatever the payload"
    );
    assert!(store.heartbeat(&live, &live_owner).await.expect("renew"));
    store.close().await.expect("close");
}

/// Two stores on one database (two replicas' worth of connections) see each other's claims and
/// completions.
async fn two_stores_on_one_database_share_claims(kind: StoreKind) {
    let db = TestDb::new(kind);
    let clock = clock();
    let one = open(&db, &clock).await;
    let two = open(&db, &clock).await;
    let k = scope("k6");
    let (owner, _) = acquire(&*one, &k, "fp").await;
    assert_eq!(claim(&*two, &k, "fp").await, Seen::InProgress);
    one.complete(finish(
        &k,
        &owner,
        "fp",
        Some(payment("pay_6")),
        response("six"),
    ))
    .await
    .expect("complete");
    for store in [&one, &two, &one, &two] {
        match claim(&**store, &k, "fp").await {
            Seen::Replay(body) => assert_eq!(body, "six"),
            other => panic!("expected a replay, got {other:?}"),
        }
    }
    assert_eq!(count(&*two).await, 1);
    one.close().await.expect("close");
    two.close().await.expect("close");
}

/// Sixteen simultaneous claims of one key: exactly one acquires. On SQLite without group
/// commit (every operation its own transaction); on PostgreSQL pipelined on shared connections.
async fn simultaneous_claims_acquire_once(kind: StoreKind) {
    let db = TestDb::new(kind);
    let mut config = Config::new(db.location.clone());
    config.group_commit = false;
    config.clock = clock();
    let store = store::open(&config).await.expect("open");
    let k = scope("k7");
    let claims =
        futures::future::join_all((0..16).map(|_| store.claim(&k, "fp", TakeOver::CORRECT))).await;
    let acquired: Vec<_> = claims
        .into_iter()
        .map(|c| c.expect("claim"))
        .filter(|c| matches!(c, Claimed::Acquired { .. }))
        .collect();
    assert_eq!(acquired.len(), 1);
    store.close().await.expect("close");
    assert!(
        store.claim(&k, "fp", TakeOver::CORRECT).await.is_err(),
        "a closed store refuses work"
    );
}

/// Two stores opening one new file at the same moment (two replicas starting together) both
/// come up: switching the file to WAL waits for the other instead of failing.
#[test]
fn two_stores_opening_one_new_file_together_both_start() {
    for round in 0..40 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("shared-{round}.db"));
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let config = Config::new(DbLocation::File(path));
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .expect("runtime");
                    barrier.wait();
                    runtime
                        .block_on(store::open(&config))
                        .map(|_| ())
                        .map_err(|e| format!("{e:#}"))
                })
            })
            .collect();
        for h in handles {
            h.join()
                .unwrap()
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
    }
}

/// A payment row keeps the provider's reference, and a database whose payments table predates
/// that column gains it when a server opens it, its old rows without one.
async fn payments_keep_their_provider_reference(kind: StoreKind) {
    let db = TestDb::new(kind);
    let old_table = "CREATE TABLE payments (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, \
        operation TEXT NOT NULL, idem_key TEXT, amount_cents BIGINT NOT NULL, \
        currency TEXT NOT NULL, reference TEXT NOT NULL, created_at TEXT NOT NULL); \
        INSERT INTO payments VALUES ('pay_old', 'tenant-a', 'payments.create', 'k', 1, 'EUR', \
        'r', '2026-01-01T00:00:00.000Z')";
    match (&db.location, &db.cluster) {
        (DbLocation::File(path), _) => rusqlite::Connection::open(path)
            .and_then(|c| c.execute_batch(old_table))
            .expect("the old schema"),
        (DbLocation::Postgres(url), Some(cluster)) => {
            cluster.query(url, old_table);
        }
        (other, _) => panic!("no database at {other:?}"),
    }
    let clock = clock();
    let store = open(&db, &clock).await;
    let k = scope("k8");
    let (owner, _) = acquire(&*store, &k, "fp").await;
    store
        .complete(finish(
            &k,
            &owner,
            "fp",
            Some(payment("pay_8")),
            response("8"),
        ))
        .await
        .expect("complete");
    let row = store
        .payment("tenant-a", "payments.create", "pay_8")
        .await
        .expect("read")
        .expect("the row");
    assert_eq!(row.provider_ref.as_deref(), Some("prov_pay_8"));
    let old = store
        .payment("tenant-a", "payments.create", "pay_old")
        .await
        .expect("read")
        .expect("the old row");
    assert_eq!(old.provider_ref, None);
    assert!(!String::from_utf8(old.render())
        .unwrap()
        .contains("providerRef"));
    store.close().await.expect("close");
}

on_both_stores!(
    #[tokio::test]
    payments_keep_their_provider_reference,
    an_expired_lease_is_taken_over_and_the_stale_owner_is_fenced,
    heartbeats_extend_the_lease,
    another_fingerprint_is_a_mismatch_in_every_state,
    release_frees_the_key_for_its_owner_only,
    completed_keys_expire_after_the_ttl,
    two_stores_on_one_database_share_claims,
    simultaneous_claims_acquire_once,
);

/// Two replicas starting together on a new PostgreSQL database both come up: one creates the
/// schema under the advisory lock, the other then leaves it alone (running even
/// `CREATE … IF NOT EXISTS` while the first prepares its statements can deadlock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_opening_one_new_database_together_both_start() {
    for round in 0..10 {
        let db = TestDb::new(StoreKind::Postgres);
        let config = Config::new(db.location.clone());
        let (one, two) = tokio::join!(store::open(&config), store::open(&config));
        for opened in [one, two] {
            let store = opened.unwrap_or_else(|e| panic!("round {round}: {e:#}"));
            store.close().await.expect("close");
        }
    }
}
