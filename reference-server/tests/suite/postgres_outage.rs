//! The database crashes under two replicas (`pg_ctl stop -m immediate` mid-traffic, then start
//! again): while it is down every request is 503 and nothing executes unprotected; once it is
//! back the replicas serve again on their own; no payment is lost or duplicated.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::pg::PgCluster;
use crate::common::{body, start_with, Client, Req, Resp};
use idem_reference_server::{Config, DbLocation};

const WORKERS: usize = 8;

/// Which phase a response was received in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Up,
    Down,
    Back,
}

#[derive(Default)]
struct Log {
    /// Every key sent, with the first 201 it got (if any).
    keys: Vec<(Req, Option<Resp>)>,
    statuses: HashMap<(Phase, u16), usize>,
}

async fn traffic(
    replicas: [Client; 2],
    phase: Arc<Mutex<Phase>>,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Log>>,
) {
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let (phase, stop, log) = (phase.clone(), stop.clone(), log.clone());
        workers.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let req = Req::payment(
                    "token-a",
                    &format!("\"{}\"", uuid::Uuid::new_v4()),
                    &body(&format!("outage-{w}-{n}")),
                );
                let sent_in = *phase.lock().expect("lock");
                let resp = replicas[n % 2].send(&req).await;
                let unavailable = resp.status == 503;
                let answered_in = *phase.lock().expect("lock");
                {
                    let mut log = log.lock().expect("lock");
                    if sent_in == answered_in {
                        *log.statuses.entry((sent_in, resp.status)).or_default() += 1;
                    }
                    match resp.status {
                        201 => log.keys.push((req, Some(resp))),
                        503 => {
                            assert_eq!(
                                resp.header("content-type"),
                                Some("application/problem+json")
                            );
                            log.keys.push((req, None));
                        }
                        other => panic!("unexpected {other}: {}", resp.text()),
                    }
                }
                if unavailable {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }));
    }
    for worker in workers {
        worker.await.expect("worker");
    }
}

/// Waits (bounded) until `log` has counted at least `n` answers with `status` sent and answered
/// in `phase`.
async fn wait_for(log: &Mutex<Log>, phase: Phase, status: u16, n: usize, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let seen = log
            .lock()
            .expect("lock")
            .statuses
            .get(&(phase, status))
            .copied()
            .unwrap_or(0);
        if seen >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {seen} answers {status} in phase {phase:?} after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Retries `req` until it gets a 201 (a claim left behind by the crash is taken over once its
/// lease runs out).
async fn settle(client: Client, req: &Req) -> Resp {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let resp = client.send(req).await;
        if resp.status == 201 || Instant::now() > deadline {
            return resp;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Up (until the replicas have acknowledged payments) → `pg_ctl stop -m immediate` → down
/// (until the replicas have refused requests with 503) → started again: 503s (problem+json)
/// while down and never a 201, 201s again without touching the replicas, and afterwards every
/// key (retried until done) has exactly one payment, the acknowledged ones with their original
/// bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_crash_is_503_then_recovers_without_losing_or_doubling_payments() {
    let cluster = PgCluster::start();
    let url = cluster.create_database();
    let config = || {
        let mut config = Config::new(DbLocation::Postgres(url.clone()));
        config.lease = Duration::from_secs(1);
        config
    };
    // Each returns once it serves, so the crash below finds both replicas running: one still
    // opening its store would fail to start instead, and reset what waited for it.
    let one = start_with(config()).await;
    let two = start_with(config()).await;
    let replicas = [one.client(), two.client()];

    let phase = Arc::new(Mutex::new(Phase::Up));
    let stop = Arc::new(AtomicBool::new(false));
    let log = Arc::new(Mutex::new(Log::default()));
    let load = tokio::spawn(traffic(replicas, phase.clone(), stop.clone(), log.clone()));
    wait_for(&log, Phase::Up, 201, WORKERS, Duration::from_secs(30)).await;
    cluster.crash();
    *phase.lock().expect("lock") = Phase::Down;
    wait_for(&log, Phase::Down, 503, WORKERS, Duration::from_secs(30)).await;
    // Back from the moment the server is told to start: until then it is certainly down.
    *phase.lock().expect("lock") = Phase::Back;
    cluster.start_again();
    cluster.wait_ready(Duration::from_secs(30));
    // The replicas notice on their own (no restart, no signal) and acknowledge payments again.
    wait_for(&log, Phase::Back, 201, WORKERS, Duration::from_secs(30)).await;
    stop.store(true, Ordering::Relaxed);
    tokio::time::timeout(Duration::from_secs(30), load)
        .await
        .expect("clients finished")
        .expect("traffic");

    let log = std::mem::take(&mut *log.lock().expect("lock"));
    eprintln!("statuses by phase: {:?}", log.statuses);
    assert!(log.statuses.get(&(Phase::Up, 201)).is_some_and(|n| *n > 0));
    assert!(
        log.statuses
            .get(&(Phase::Down, 503))
            .is_some_and(|n| *n > 0),
        "no 503 while the database was down"
    );
    assert_eq!(
        log.statuses.get(&(Phase::Down, 201)),
        None,
        "a request executed while the database was down"
    );

    // Every key, retried until it is done, has exactly one payment; an acknowledged one replays
    // its original bytes.
    let chunks: Vec<Vec<(Req, Option<Resp>)>> = log.keys.chunks(64).map(<[_]>::to_vec).collect();
    let mut settling = Vec::new();
    for (i, chunk) in chunks.into_iter().enumerate() {
        let client = replicas[i % 2];
        settling.push(tokio::spawn(async move {
            for (req, first) in chunk {
                let done = settle(client, &req).await;
                assert_eq!(done.status, 201, "{}", done.text());
                if let Some(first) = first {
                    assert_eq!(done.body, first.body, "an acknowledged payment changed");
                }
            }
        }));
    }
    for task in settling {
        task.await.expect("settling task");
    }
    let rows = cluster.query(
        &url,
        "SELECT count(*), count(DISTINCT idem_key) FROM payments",
    );
    assert_eq!(rows, [format!("{0}|{0}", log.keys.len())]);
    one.stop().await;
    two.stop().await;
}
