//! kill -9 of the webhook consumer mid-delivery, over and over, on SQLite and on PostgreSQL: two
//! replicas (the real binary, twice, on one database) receive several concurrent copies of
//! every event, one or both are killed with SIGKILL at a random point and restarted on the same
//! database, and every copy is redelivered until it is acknowledged. At the end each event has
//! exactly one effect: none lost, none doubled.
//!
//! The points of the kills and their victims come from a seeded generator; the seed is printed
//! and `WEBHOOK_KILL_SEED=N` replays it. A claim left by a killed replica holds for the lease
//! (`--webhook-lease`, shortened here so that a cycle does not wait a minute), after which a
//! redelivery takes it over.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::webhook::{handled, now, signed, Event, SECRET};
use crate::common::{spawn_server, Client, StoreKind, TestDb};
use idem_reference_server::WebhookScheme as Scheme;
use tokio::process::Child;

const CYCLES: usize = 15;
const EVENTS_PER_CYCLE: usize = 32;
/// Copies of each event sent at once, spread over both replicas.
const COPIES: usize = 3;
/// How long a dead replica's claims hold.
const LEASE: &str = "1s";
/// How long a sender waits before redelivering a copy that was not acknowledged (a 409 while
/// another copy is being applied, a 5xx, or a replica that is gone).
const RETRY_AFTER: Duration = Duration::from_millis(20);
/// Every copy of a cycle is acknowledged within this, kills and lease included (well over a
/// second when healthy; generous for a loaded machine).
const CYCLE_BOUND: Duration = Duration::from_secs(60);

/// The two replicas: their processes and where they listen now (a restart gets a new port).
struct Replicas {
    db: String,
    children: [Option<Child>; 2],
    addrs: Arc<Mutex<[SocketAddr; 2]>>,
}

impl Replicas {
    async fn start(db: &TestDb) -> Self {
        let db = db.arg();
        let (one, a) = spawn_server(&db, &flags()).await;
        let (two, b) = spawn_server(&db, &flags()).await;
        Replicas {
            db,
            children: [Some(one), Some(two)],
            addrs: Arc::new(Mutex::new([a.addr, b.addr])),
        }
    }

    /// SIGKILLs replica `i` and starts it again on the same database.
    async fn kill_and_restart(&mut self, i: usize) {
        let mut child = self.children[i].take().expect("running");
        child.start_kill().expect("kill -9");
        child.wait().await.expect("reap");
        let (child, client) = spawn_server(&self.db, &flags()).await;
        self.children[i] = Some(child);
        self.addrs.lock().expect("lock")[i] = client.addr;
    }

    fn client(&self, i: usize) -> Client {
        Client {
            addr: self.addrs.lock().expect("lock")[i],
        }
    }
}

fn flags() -> Vec<&'static str> {
    vec![
        "--webhook-secret",
        SECRET,
        "--webhook-lease",
        LEASE,
        "--db-pool",
        "4",
    ]
}

/// What the senders did.
#[derive(Default)]
struct Tally {
    /// Deliveries sent (every attempt of every copy).
    deliveries: AtomicUsize,
    /// Deliveries answered, whatever the answer.
    answered: AtomicUsize,
    /// Copies acknowledged with 200.
    acknowledged: AtomicUsize,
}

/// One copy of `event`, delivered until a replica acknowledges it, starting with replica
/// `first` and alternating: a sender retries a 409 (another copy is being applied), a 5xx, and a
/// connection that failed (the replica was killed under it, or is not back yet).
async fn deliver(
    scheme: Scheme,
    event: Event,
    first: usize,
    addrs: Arc<Mutex<[SocketAddr; 2]>>,
    tally: Arc<Tally>,
) {
    let deadline = Instant::now() + CYCLE_BOUND;
    for attempt in first.. {
        let client = Client {
            addr: addrs.lock().expect("lock")[attempt % 2],
        };
        tally.deliveries.fetch_add(1, Ordering::Relaxed);
        let answer = client.try_send(&signed(scheme, &event, now())).await;
        if answer.is_ok() {
            tally.answered.fetch_add(1, Ordering::Relaxed);
        }
        match answer {
            Ok(resp) if resp.status == 200 => {
                tally.acknowledged.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Ok(resp) if resp.status == 409 || resp.status >= 500 => {}
            Ok(resp) => panic!(
                "{scheme} {}: answered {} {}",
                event.id,
                resp.status,
                resp.text()
            ),
            Err(_) => {}
        }
        assert!(
            Instant::now() < deadline,
            "{scheme} {}: not acknowledged within {CYCLE_BOUND:?}",
            event.id
        );
        tokio::time::sleep(RETRY_AFTER).await;
    }
}

/// The seed of the kill points: `WEBHOOK_KILL_SEED`, else the clock's.
fn seed() -> u64 {
    std::env::var("WEBHOOK_KILL_SEED")
        .ok()
        .map(|s| s.parse().expect("WEBHOOK_KILL_SEED is a number"))
        .unwrap_or_else(|| now().unsigned_abs())
}

/// `CYCLES` × (`EVENTS_PER_CYCLE` events of every scheme, `COPIES` concurrent copies each over
/// both replicas → once a random number of them were answered, replica 1, replica 2 or both are
/// SIGKILLed and restarted → every copy redelivered until acknowledged). Then, in the database:
/// one effect per event, and the consumer's counter says the same.
async fn every_event_applies_once_across_kill_9(kind: StoreKind) {
    let started = Instant::now();
    let seed = seed();
    eprintln!("{kind:?}: kill points from seed {seed} (replay: WEBHOOK_KILL_SEED={seed})");
    let mut rng = fastrand::Rng::with_seed(seed);
    let db = TestDb::new(kind);
    let mut replicas = Replicas::start(&db).await;
    let tally = Arc::new(Tally::default());
    let mut events = Vec::new();
    let mut kills = 0;
    for cycle in 0..CYCLES {
        let mut senders = Vec::new();
        for i in 0..EVENTS_PER_CYCLE {
            let scheme = Scheme::ALL[(cycle + i) % Scheme::ALL.len()];
            let event = handled(scheme);
            for copy in 0..COPIES {
                senders.push(tokio::spawn(deliver(
                    scheme,
                    event.clone(),
                    i + copy,
                    Arc::clone(&replicas.addrs),
                    Arc::clone(&tally),
                )));
            }
            events.push(event);
        }
        // Killed once a random number of this cycle's deliveries were answered: the others
        // are in flight then, some claimed and not yet applied.
        let kill_at =
            tally.answered.load(Ordering::Relaxed) + rng.usize(1..EVENTS_PER_CYCLE * COPIES);
        let victims: &[usize] = match rng.u8(0..3) {
            0 => &[0],
            1 => &[1],
            _ => &[0, 1],
        };
        let deadline = Instant::now() + CYCLE_BOUND;
        while tally.answered.load(Ordering::Relaxed) < kill_at
            && !senders.iter().all(|s| s.is_finished())
        {
            assert!(Instant::now() < deadline, "cycle {cycle}: no deliveries");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        for &victim in victims {
            replicas.kill_and_restart(victim).await;
            kills += 1;
        }
        for sender in senders {
            sender.await.expect("sender");
        }
    }

    let effects: HashMap<String, usize> = db
        .query("SELECT event_id, count(*) FROM webhook_effects GROUP BY scheme, source, event_id")
        .into_iter()
        .map(|row| {
            let (id, n) = row.split_once('|').expect("two columns");
            (id.to_owned(), n.parse().expect("a count"))
        })
        .collect();
    let applied: usize = effects.values().sum();
    let lost = events
        .iter()
        .filter(|e| !effects.contains_key(&e.id))
        .count();
    let doubled: usize = effects.values().map(|n| n - 1).sum();
    let stray = effects
        .keys()
        .filter(|id| !events.iter().any(|e| &e.id == *id))
        .count();
    eprintln!(
        "{kind:?}: {CYCLES} cycles, {kills} kill -9, {} events, {} deliveries ({} copies \
         acknowledged), {applied} applied, {lost} lost, {doubled} doubled, in {:.1?}",
        events.len(),
        tally.deliveries.load(Ordering::Relaxed),
        tally.acknowledged.load(Ordering::Relaxed),
        started.elapsed()
    );
    assert_eq!((lost, doubled, stray), (0, 0, 0), "lost, doubled, stray");
    assert_eq!(applied, events.len());
    assert_eq!(
        replicas.client(0).webhook_count().await,
        events.len() as u64,
        "the consumer's counter"
    );
}

on_both_stores!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    every_event_applies_once_across_kill_9,
);
