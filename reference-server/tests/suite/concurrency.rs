//! Many keys, each hit by many simultaneous duplicates: exactly one execution per key.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{body, start_on, Req, StoreKind, TestDb};
use tokio::sync::{Barrier, Semaphore};

const KEYS: usize = 200;
const DUPLICATES: usize = 16;
/// Keys in flight at once (each with all its duplicates), so the listen backlog is never the
/// bottleneck.
const KEYS_IN_FLIGHT: usize = 16;

/// 200 keys × 16 concurrent duplicates → exactly 200 payments; every key's answers are 201 or
/// 409 (never 5xx), all 201s of a key carry the same id, and a later retry replays that id.
async fn each_key_executes_once_under_concurrent_duplicates(kind: StoreKind) {
    let db = TestDb::new(kind);
    let server = start_on(&db, |_| {}).await;
    let client = server.client();
    let started = Instant::now();
    let gate = Arc::new(Semaphore::new(KEYS_IN_FLIGHT));
    let mut keys = Vec::new();
    for k in 0..KEYS {
        let gate = Arc::clone(&gate);
        keys.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await.expect("semaphore");
            let req = Req::payment(
                "token-a",
                &format!("\"conc-{k}-{}\"", uuid::Uuid::new_v4()),
                &body(&format!("conc-{k}")),
            );
            let barrier = Arc::new(Barrier::new(DUPLICATES));
            let burst: Vec<_> = (0..DUPLICATES)
                .map(|_| {
                    let (req, barrier) = (req.clone(), Arc::clone(&barrier));
                    tokio::spawn(async move {
                        barrier.wait().await;
                        client.send(&req).await
                    })
                })
                .collect();
            let mut ids = Vec::new();
            for answer in burst {
                let resp = answer.await.expect("duplicate task");
                match resp.status {
                    201 => ids.push(resp.id()),
                    409 => assert_eq!(resp.header("retry-after"), Some("1")),
                    other => panic!("key {k}: unexpected {other}: {}", resp.text()),
                }
            }
            ids.dedup();
            assert!(ids.len() <= 1, "key {k} has several ids: {ids:?}");
            let retry = client.send(&req).await;
            assert_eq!(retry.status, 201);
            if let Some(id) = ids.first() {
                assert_eq!(&retry.id(), id);
            }
        }));
    }
    for key in keys {
        tokio::time::timeout(Duration::from_secs(60), key)
            .await
            .expect("bounded time")
            .expect("key task");
    }
    assert_eq!(client.count("token-a").await, KEYS as u64);
    eprintln!(
        "{} requests in {:?}",
        KEYS * (DUPLICATES + 1),
        started.elapsed()
    );
    server.stop().await;
}

on_both_stores!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    each_key_executes_once_under_concurrent_duplicates,
);
