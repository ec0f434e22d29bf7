//! kill -9 mid-traffic, restart on the same database, nothing acknowledged is lost: the real
//! binary, 20 cycles, on SQLite and on PostgreSQL.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{body, spawn_server, Client, Req, Resp, StoreKind, TestDb};

const CYCLES: usize = 20;
const WORKERS: usize = 16;

/// Sends requests with fresh keys until the server dies; returns every acknowledged 201.
async fn traffic(client: Client, cycle: usize, acked: Arc<Mutex<Vec<(Req, Resp)>>>) {
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let acked = Arc::clone(&acked);
        workers.push(tokio::spawn(async move {
            for n in 0.. {
                let reference = format!("dur-{cycle}-{w}-{n}");
                let req = Req::payment(
                    if n % 2 == 0 { "token-a" } else { "token-b" },
                    &format!("\"{}\"", uuid::Uuid::new_v4()),
                    &body(&reference),
                );
                match client.try_send(&req).await {
                    Ok(resp) if resp.status == 201 => {
                        acked.lock().expect("lock").push((req, resp));
                    }
                    Ok(resp) => panic!("unexpected {}: {}", resp.status, resp.text()),
                    Err(_) => return,
                }
            }
        }));
    }
    for worker in workers {
        worker.await.expect("worker");
    }
}

/// Every acknowledged 201 replays byte-identically after the restart.
async fn verify_replays(client: Client, acked: &[(Req, Resp)]) {
    let chunks: Vec<Vec<(Req, Resp)>> = acked.chunks(64).map(<[_]>::to_vec).collect();
    let mut tasks = Vec::new();
    for chunk in chunks {
        tasks.push(tokio::spawn(async move {
            for (req, original) in chunk {
                let replay = client.send(&req).await;
                assert_eq!(replay.status, 201, "{}", replay.text());
                assert_eq!(replay.body, original.body, "replay differs");
                assert_eq!(replay.header("location"), original.header("location"));
                assert_eq!(replay.header("idempotency-replayed"), Some("true"));
            }
        }));
    }
    for task in tasks {
        task.await.expect("verify task");
    }
}

/// 20 × (traffic from 16 clients with unique keys → kill -9 at a varying moment, after 1 to 128
/// acknowledged payments → restart on the same database → every 201 the clients saw replays
/// byte-identically). Then, in the database: no key has two payments, and every payment has its
/// completed record.
async fn acknowledged_requests_survive_kill_9(kind: StoreKind) {
    let started = Instant::now();
    let db = TestDb::new(kind);
    let mut all_acked = Vec::new();
    let (mut child, mut client) = spawn_server(db.arg(), &[]).await;
    for cycle in 0..CYCLES {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let load = tokio::spawn(traffic(client, cycle, Arc::clone(&acked)));
        // Kill at a varying point of the traffic: once 1 to 128 payments were acknowledged.
        let before_kill = 1 + (cycle * 37) % 128;
        let deadline = Instant::now() + Duration::from_secs(10);
        while acked.lock().expect("lock").len() < before_kill {
            assert!(
                Instant::now() < deadline,
                "cycle {cycle}: no payment acknowledged before the kill"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        child.start_kill().expect("kill -9");
        child.wait().await.expect("reap");
        tokio::time::timeout(Duration::from_secs(30), load)
            .await
            .expect("clients noticed the kill")
            .expect("traffic");
        (child, client) = spawn_server(db.arg(), &[]).await;
        let acked = std::mem::take(&mut *acked.lock().expect("lock"));
        verify_replays(client, &acked).await;
        all_acked.extend(acked);
    }
    child.start_kill().expect("kill -9");
    child.wait().await.expect("reap");
    assert!(
        all_acked.len() > CYCLES,
        "too little traffic to mean anything"
    );

    let duplicated = db.query(
        "SELECT COUNT(*) FROM (SELECT 1 FROM payments \
         GROUP BY tenant, operation, idem_key HAVING COUNT(*) > 1) AS d",
    );
    assert_eq!(duplicated, ["0"], "a key has two payments");
    let orphans = db.query(
        "SELECT COUNT(*) FROM payments p WHERE NOT EXISTS (\
           SELECT 1 FROM idempotency_records r WHERE r.tenant = p.tenant \
           AND r.operation = p.operation AND r.idem_key = p.idem_key \
           AND r.status = 'completed')",
    );
    assert_eq!(
        orphans,
        ["0"],
        "a payment exists without its completed record"
    );
    let ids: std::collections::HashSet<String> =
        db.query("SELECT id FROM payments").into_iter().collect();
    for (_, resp) in &all_acked {
        let id = resp.id();
        assert!(ids.contains(&id), "acknowledged payment {id} is missing");
    }
    eprintln!(
        "{} acknowledged payments over {CYCLES} kill -9 cycles in {:?}",
        all_acked.len(),
        started.elapsed()
    );
}

on_both_stores!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    acknowledged_requests_survive_kill_9,
);
