//! Two replicas (the real binary, twice) on one PostgreSQL database: one is killed with SIGKILL
//! mid-burst 20 times while the other keeps serving, and nothing acknowledged is lost or done
//! twice.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{body, spawn_server, Client, Req, Resp, StoreKind, TestDb};

const CYCLES: usize = 20;
const WORKERS: usize = 8;
/// Keys the surviving replica must execute alone after each kill.
const SURVIVOR_KEYS: usize = 16;

/// What the clients saw in one cycle.
#[derive(Default)]
struct Seen {
    /// Every 201, with the request that got it.
    acked: Vec<(Req, Resp)>,
    /// 201s from the surviving replica after the other was killed.
    survivor_after_kill: usize,
}

/// Each worker sends fresh keys, each key to both replicas at once (a burst of two duplicates),
/// until `stop`. The surviving replica must answer every request 201 or 409; the victim may
/// also fail at the transport level once it is dead.
async fn traffic(
    victim: Client,
    survivor: Client,
    cycle: usize,
    killed: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
) {
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let (killed, stop, seen) = (killed.clone(), stop.clone(), seen.clone());
        workers.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let req = Req::payment(
                    if n % 2 == 0 { "token-a" } else { "token-b" },
                    &format!("\"{}\"", uuid::Uuid::new_v4()),
                    &body(&format!("rep-{cycle}-{w}-{n}")),
                );
                let after_kill = killed.load(Ordering::Relaxed);
                let (on_victim, on_survivor) =
                    tokio::join!(victim.try_send(&req), survivor.try_send(&req));
                let on_survivor = on_survivor.expect("the surviving replica keeps serving");
                let mut seen = seen.lock().expect("lock");
                match on_survivor.status {
                    201 => {
                        seen.survivor_after_kill += usize::from(after_kill);
                        seen.acked.push((req.clone(), on_survivor));
                    }
                    409 => {}
                    other => panic!("survivor answered {other}: {}", on_survivor.text()),
                }
                match on_victim {
                    Ok(resp) if resp.status == 201 => seen.acked.push((req, resp)),
                    Ok(resp) if resp.status == 409 => {}
                    Ok(resp) => panic!("victim answered {}: {}", resp.status, resp.text()),
                    Err(_) => {}
                }
            }
        }));
    }
    for worker in workers {
        worker.await.expect("worker");
    }
}

/// Every acknowledged 201 replays byte-identically on both replicas.
async fn verify_replays(replicas: [Client; 2], acked: &[(Req, Resp)]) {
    let chunks: Vec<Vec<(Req, Resp)>> = acked.chunks(32).map(<[_]>::to_vec).collect();
    let mut tasks = Vec::new();
    for chunk in chunks {
        tasks.push(tokio::spawn(async move {
            for (req, original) in chunk {
                for replica in replicas {
                    let replay = replica.send(&req).await;
                    assert_eq!(replay.status, 201, "{}", replay.text());
                    assert_eq!(replay.body, original.body, "replay differs");
                    assert_eq!(replay.header("location"), original.header("location"));
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("verify task");
    }
}

/// 20 × (both replicas serve every key at once → replica 1 is killed with SIGKILL at a varying
/// moment, after 1 to 64 acknowledged payments → replica 2 goes on serving new keys → replica 1
/// restarts → every 201 either replica gave replays byte-identically on both). Then, in the
/// database: one payment per key, and every acknowledged payment is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_one_replica_loses_nothing_acknowledged() {
    let started = Instant::now();
    let db = TestDb::new(StoreKind::Postgres);
    let flags = ["--lease", "1s"];
    let (mut victim, mut victim_client) = spawn_server(db.arg(), &flags).await;
    let (_survivor, survivor_client) = spawn_server(db.arg(), &flags).await;
    let mut all_acked = Vec::new();
    for cycle in 0..CYCLES {
        let (killed, stop) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let seen = Arc::new(Mutex::new(Seen::default()));
        let load = tokio::spawn(traffic(
            victim_client,
            survivor_client,
            cycle,
            killed.clone(),
            stop.clone(),
            seen.clone(),
        ));
        // Kill at a varying point of the traffic: once 1 to 64 payments were acknowledged.
        let before_kill = 1 + (cycle * 37) % 64;
        let deadline = Instant::now() + Duration::from_secs(10);
        while seen.lock().expect("lock").acked.len() < before_kill {
            assert!(
                Instant::now() < deadline,
                "cycle {cycle}: no traffic before the kill"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        victim.start_kill().expect("kill -9");
        victim.wait().await.expect("reap");
        killed.store(true, Ordering::Relaxed);
        // The survivor goes on executing new keys alone (bounded wait, not a fixed sleep: the
        // machine may be busy).
        let deadline = Instant::now() + Duration::from_secs(10);
        while seen.lock().expect("lock").survivor_after_kill < SURVIVOR_KEYS {
            assert!(
                Instant::now() < deadline,
                "cycle {cycle}: the surviving replica stopped executing after the kill"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.store(true, Ordering::Relaxed);
        tokio::time::timeout(Duration::from_secs(30), load)
            .await
            .expect("clients finished")
            .expect("traffic");
        let seen = std::mem::take(&mut *seen.lock().expect("lock"));
        (victim, victim_client) = spawn_server(db.arg(), &flags).await;
        verify_replays([victim_client, survivor_client], &seen.acked).await;
        all_acked.extend(seen.acked);
    }
    assert!(
        all_acked.len() > CYCLES,
        "too little traffic to mean anything"
    );

    let counts =
        db.query("SELECT count(*), count(DISTINCT (tenant, operation, idem_key)) FROM payments");
    let (payments, keys) = counts[0].split_once('|').expect("two columns");
    assert_eq!(payments, keys, "a key has two payments");
    let ids: std::collections::HashSet<String> =
        db.query("SELECT id FROM payments").into_iter().collect();
    for (_, resp) in &all_acked {
        assert!(
            ids.contains(&resp.id()),
            "acknowledged {} is missing",
            resp.id()
        );
    }
    eprintln!(
        "{} acknowledged 201s ({payments} payments) over {CYCLES} kill -9 cycles in {:?}",
        all_acked.len(),
        started.elapsed()
    );
}
