//! The webhook dedupe record against a temporary database, with a manual clock, on both stores:
//! a claim excludes others until its owner completes or releases it, or its lease runs out (a
//! dead consumer); completion is fenced by the owner and commits the record and the effect
//! together; the `dedupe-ttl` forgetting and the faults' separate writes do what they say.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use crate::common::{StoreKind, TestDb};
use idem_reference_server::store::webhooks::{Claim, EventKey};
use idem_reference_server::store::{self, Store};
use idem_reference_server::{Config, ManualClock};

/// A claim's lease (`CLAIM_LEASE`), and a moment past it.
const PAST_LEASE: Duration = Duration::from_secs(61);

async fn open(db: &TestDb, clock: &Arc<ManualClock>) -> Arc<dyn Store> {
    let mut config = Config::new(db.location.clone());
    config.clock = clock.clone();
    store::open(&config).await.expect("open store")
}

fn key(id: &str) -> EventKey {
    EventKey {
        scheme: "stripe".into(),
        source: "a".into(),
        event_id: id.into(),
    }
}

fn acquired(claim: Claim) -> idem_reference_server::store::Owner {
    match claim {
        Claim::Acquired(owner) => owner,
        other => panic!("expected to acquire, got {other:?}"),
    }
}

async fn a_claim_excludes_others_until_done_released_or_dead(kind: StoreKind) {
    let db = TestDb::new(kind);
    let clock = Arc::new(ManualClock::new(
        UNIX_EPOCH + Duration::from_secs(1_800_000_000),
    ));
    let store = open(&db, &clock).await;
    let w = store.webhooks();

    let first = acquired(w.claim_event(&key("evt_1"), None).await.unwrap());
    assert_eq!(
        w.claim_event(&key("evt_1"), None).await.unwrap(),
        Claim::Processing
    );
    let other_source = EventKey {
        source: "b".into(),
        ..key("evt_1")
    };
    acquired(w.claim_event(&other_source, None).await.unwrap());

    // The owner died: after its lease the next delivery takes over, and the dead owner's late
    // completion is fenced off.
    clock.advance(PAST_LEASE);
    let second = acquired(w.claim_event(&key("evt_1"), None).await.unwrap());
    assert!(!w
        .complete_event(&key("evt_1"), &first, Some("x"))
        .await
        .unwrap());
    assert!(w
        .complete_event(&key("evt_1"), &second, Some("x"))
        .await
        .unwrap());
    assert_eq!(w.count_effects().await.unwrap(), 1);
    assert_eq!(
        w.claim_event(&key("evt_1"), None).await.unwrap(),
        Claim::Processed
    );

    // A failed delivery releases its claim, and the retry applies the event.
    let failing = acquired(w.claim_event(&key("evt_2"), None).await.unwrap());
    assert!(w.release_event(&key("evt_2"), &failing).await.unwrap());
    let retry = acquired(w.claim_event(&key("evt_2"), None).await.unwrap());
    assert!(w
        .complete_event(&key("evt_2"), &retry, Some("x"))
        .await
        .unwrap());
    assert_eq!(w.count_effects().await.unwrap(), 2);

    // Processed ids are kept for good, unless told to forget them after a while (dedupe-ttl).
    clock.advance(Duration::from_secs(3600));
    let ttl = Some(Duration::from_secs(300));
    assert_eq!(
        w.claim_event(&key("evt_2"), None).await.unwrap(),
        Claim::Processed
    );
    acquired(w.claim_event(&key("evt_2"), ttl).await.unwrap());

    // The faults' separate writes.
    assert!(w.mark_event(&key("evt_3")).await.unwrap());
    assert!(!w.mark_event(&key("evt_3")).await.unwrap());
    w.apply_event(&key("evt_3"), "x").await.unwrap();
    let processed = w.processed_events().await.unwrap();
    assert!(processed.contains(&key("evt_1")) && processed.contains(&key("evt_3")));
    assert!(w.forget_event(&key("evt_3")).await.unwrap());
    acquired(w.claim_event(&key("evt_3"), None).await.unwrap());
    assert_eq!(w.count_effects().await.unwrap(), 3);
    store.close().await.unwrap();
}

/// Sixteen simultaneous claims of one event: exactly one acquires.
async fn simultaneous_claims_acquire_once(kind: StoreKind) {
    let db = TestDb::new(kind);
    let clock = Arc::new(ManualClock::starting_now());
    let store = open(&db, &clock).await;
    let race = key("evt_race");
    let claims =
        futures::future::join_all((0..16).map(|_| store.webhooks().claim_event(&race, None))).await;
    let won = claims
        .into_iter()
        .filter(|c| matches!(c, Ok(Claim::Acquired(_))))
        .count();
    assert_eq!(won, 1);
    store.close().await.unwrap();
}

on_both_stores! {
    #[tokio::test]
    a_claim_excludes_others_until_done_released_or_dead,
    simultaneous_claims_acquire_once,
}
