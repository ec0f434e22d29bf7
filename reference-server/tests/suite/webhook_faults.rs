//! Every webhook fault makes exactly the checks it names fail, and the correct consumer passes
//! them all. Each check of `idem-check webhook` is played here as a small scenario (strict: a
//! status the check would WARN about fails it; a check the scheme cannot run, such as a stale
//! timestamp where none is signed, passes as the checker's SKIP would), each on servers of its
//! own, so the scenarios of one fault run at once. One test per fault, generated from the fault
//! list so a new fault cannot go without one, against `standard` and against `github` (no
//! signed timestamp, one signature over the body: `breaks_for` differs most there); the correct
//! consumer against all six schemes; the correct consumer and the faults that change what the
//! store records on PostgreSQL too.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use crate::common::webhook::{
    delivery, event, handled, signed, unsigned, Event, SECRET, SECRET_B, WRONG_SECRET,
};
use crate::common::{start_with, Client, Req, Resp, StoreKind, TestDb, TestServer};
use idem_reference_server::{Clock, Config, ManualClock, WebhookFault, WebhookScheme as Scheme};

/// The acknowledgement budget `wh-ack-latency` judges with here, and the time the
/// `slow-sync-handler` fault's work takes, over it.
const BUDGET: Duration = Duration::from_secs(2);
const SLOW: Duration = Duration::from_secs(3);

/// How long after its first delivery `wh-late-redelivery` redelivers: past the `dedupe-ttl`
/// fault's default 5 minutes, on the servers' manual clock.
const LATE: Duration = Duration::from_secs(10 * 60);

/// One database, its servers (the target and a replica) and their clock.
struct Rig {
    scheme: Scheme,
    db: TestDb,
    clock: Arc<ManualClock>,
    fault: Option<WebhookFault>,
    servers: Vec<TestServer>,
}

impl Rig {
    async fn new(
        kind: StoreKind,
        scheme: Scheme,
        fault: Option<WebhookFault>,
        replicas: usize,
    ) -> Self {
        let mut rig = Rig {
            scheme,
            db: TestDb::new(kind),
            clock: Arc::new(ManualClock::starting_now()),
            fault,
            servers: Vec::new(),
        };
        rig.start(replicas).await;
        rig
    }

    fn config(&self) -> Config {
        let mut config = Config::new(self.db.location.clone());
        config.clock = self.clock.clone();
        config.test_hooks = true;
        config.webhook_secret = Some(SECRET.into());
        config.webhook_secret_b = Some(SECRET_B.into());
        config.webhook_fault = self.fault;
        config.webhook_slow_handler = SLOW;
        // The scenarios of a test run at once, each with its servers: PostgreSQL's 100
        // connections go round only with few per server.
        config.db_pool = 2;
        config
    }

    async fn start(&mut self, n: usize) {
        for _ in 0..n {
            self.servers.push(start_with(self.config()).await);
        }
    }

    fn client(&self, i: usize) -> Client {
        self.servers[i].client()
    }

    /// Seconds since the epoch on the servers' clock.
    fn now(&self) -> i64 {
        let since = self
            .clock
            .now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970");
        i64::try_from(since.as_secs()).expect("in range")
    }

    async fn restart(&mut self) {
        let n = self.servers.len();
        for server in self.servers.drain(..) {
            server.stop().await;
        }
        self.start(n).await;
    }

    async fn stop(self) {
        for server in self.servers {
            server.stop().await;
        }
    }

    async fn count(&self) -> u64 {
        self.client(0).webhook_count().await
    }
}

/// Why a scenario failed, or nothing.
type Verdict = Result<(), String>;

fn expect(ok: bool, why: impl FnOnce() -> String) -> Verdict {
    if ok {
        Ok(())
    } else {
        Err(why())
    }
}

fn is_2xx(resp: &Resp) -> bool {
    (200..300).contains(&resp.status)
}

fn is_4xx(resp: &Resp) -> bool {
    (400..500).contains(&resp.status)
}

/// A 409 that asks to retry: another delivery of the event is in flight.
fn in_flight(resp: &Resp) -> bool {
    resp.status == 409 && resp.header("retry-after").is_some()
}

/// `body` as a sender may write it and no JSON encoder would re-create it: spaces after colons
/// and commas, a `\u` escape, a trailing newline.
fn loosen(body: &[u8]) -> Vec<u8> {
    let text = std::str::from_utf8(body).expect("UTF-8");
    let spaced = text
        .replacen('{', "{\"note\":\"caf\\u00e9\",", 1)
        .replace("\":", "\": ")
        .replace(",\"", ", \"");
    format!("{spaced}\n").into_bytes()
}

/// `body` with a field added: other content, not only other whitespace (which a consumer that
/// re-encodes the body before verifying would not see).
fn tamper(body: &[u8]) -> Vec<u8> {
    [&b"{\"tampered\":1,"[..], &body[1..]].concat()
}

/// Plays the check `id` against servers with `fault`.
async fn play(kind: StoreKind, scheme: Scheme, id: &str, fault: Option<WebhookFault>) -> Verdict {
    let replicas = if id == "wh-cross-replica" { 2 } else { 1 };
    let mut rig = Rig::new(kind, scheme, fault, replicas).await;
    let verdict = scenario(id, &mut rig).await;
    rig.stop().await;
    verdict
}

async fn scenario(id: &str, rig: &mut Rig) -> Verdict {
    let client = rig.client(0);
    let s = rig.scheme;
    let e = handled(s);
    let t = rig.now();
    let before = rig.count().await;
    let moved = |after: u64| after - before;
    match id {
        "wh-first-delivery" => {
            let resp = client.send(&signed(s, &e, t)).await;
            let n = moved(rig.count().await);
            expect(is_2xx(&resp) && n == 1, || {
                format!("{} and +{n}", resp.status)
            })
        }
        "wh-redelivery" => {
            client.send(&signed(s, &e, t)).await;
            let again = client.send(&signed(s, &e, t + 1)).await;
            let n = moved(rig.count().await);
            expect(is_2xx(&again) && n == 1, || {
                format!("redelivery {} and +{n}", again.status)
            })
        }
        "wh-byte-replay" => {
            let req = signed(s, &e, t);
            client.send(&req).await;
            client.send(&req).await;
            let n = moved(rig.count().await);
            expect(n == 1, || format!("+{n}"))
        }
        "wh-concurrent-duplicates" => {
            let held = client.send_held(&signed(s, &e, t)).await;
            let copies: Vec<Req> = (1..=4).map(|i| signed(s, &e, t + i)).collect();
            futures::future::join_all(copies.iter().map(|c| client.send(c))).await;
            held.release().await;
            let n = moved(rig.count().await);
            expect(n == 1, || format!("+{n}"))
        }
        "wh-lost-ack" => {
            let hold = client.send_held_and_hang_up(&signed(s, &e, t)).await;
            client.release(&hold).await;
            let again = client
                .send_until(&signed(s, &e, t + 1), |r| !in_flight(r))
                .await;
            let n = moved(rig.count().await);
            expect(is_2xx(&again) && n == 1, || {
                format!("redelivery {} and +{n}", again.status)
            })
        }
        "wh-retry-after-failure" => {
            client
                .send(&signed(s, &e, t).header("X-Test-Crash", "1"))
                .await;
            let again = client.send(&signed(s, &e, t + 1)).await;
            let n = moved(rig.count().await);
            expect(is_2xx(&again) && n == 1, || {
                format!("redelivery {} and +{n}", again.status)
            })
        }
        "wh-late-redelivery" => {
            client.send(&signed(s, &e, t)).await;
            rig.clock.advance(LATE);
            rig.restart().await;
            let again = rig.client(0).send(&signed(s, &e, rig.now())).await;
            let n = moved(rig.count().await);
            expect(is_2xx(&again) && n == 1, || {
                format!("late redelivery {} and +{n}", again.status)
            })
        }
        "wh-cross-replica" => {
            client.send(&signed(s, &e, t)).await;
            rig.client(1).send(&signed(s, &e, t + 1)).await;
            let n = moved(rig.count().await);
            expect(n == 1, || format!("+{n}"))
        }
        "wh-distinct-events" => {
            // Where the id is in the body, two events cannot have identical bodies.
            let twin = if s.id_in_body() {
                handled(s)
            } else {
                Event {
                    id: format!("{}-twin", e.id),
                    ..e.clone()
                }
            };
            client.send(&signed(s, &e, t)).await;
            client.send(&signed(s, &twin, t)).await;
            let n = moved(rig.count().await);
            expect(n == 2, || format!("+{n}"))
        }
        "wh-raw-body" => {
            let raw = Event {
                body: loosen(&e.body),
                ..e
            };
            let resp = client.send(&signed(s, &raw, t)).await;
            let n = moved(rig.count().await);
            expect(is_2xx(&resp) && n == 1, || {
                format!("{} and +{n}", resp.status)
            })
        }
        "wh-bad-signature" => {
            // Each forgery of an event of its own, so that each is judged on its signature.
            let (e2, e3) = (handled(s), handled(s));
            let tampered = signed(s, &e, t).body(tamper(&e.body));
            let wrong = delivery(s, &e2, t, &[WRONG_SECRET]);
            let unsigned = unsigned(s, &e3, t);
            let mut statuses = Vec::new();
            for req in [tampered, wrong, unsigned] {
                statuses.push(client.send(&req).await);
            }
            let n = moved(rig.count().await);
            let refused = statuses.iter().all(is_4xx);
            expect(refused && n == 0, || {
                let s: Vec<u16> = statuses.iter().map(|r| r.status).collect();
                format!("{s:?} and +{n}")
            })
        }
        "wh-forgery-no-poison" => {
            client.send(&delivery(s, &e, t, &[WRONG_SECRET])).await;
            let genuine = client.send(&signed(s, &e, t)).await;
            let n = moved(rig.count().await);
            expect(is_2xx(&genuine) && n == 1, || {
                format!("genuine {} and +{n}", genuine.status)
            })
        }
        "wh-stale-timestamp" | "wh-future-timestamp" => {
            if !s.signs_timestamp() {
                return Ok(());
            }
            let off = if id == "wh-stale-timestamp" {
                -600
            } else {
                600
            };
            let resp = client.send(&signed(s, &e, t + off)).await;
            let n = moved(rig.count().await);
            expect(is_4xx(&resp) && n == 0, || {
                format!("{} and +{n}", resp.status)
            })
        }
        "wh-rotated-secret" => {
            if !s.signs_several() {
                return Ok(());
            }
            let resp = client
                .send(&delivery(s, &e, t, &[WRONG_SECRET, SECRET]))
                .await;
            let n = moved(rig.count().await);
            expect(is_2xx(&resp) && n == 1, || {
                format!("{} and +{n}", resp.status)
            })
        }
        "wh-unknown-type" => {
            let unknown = event(s, "idem_check.unknown");
            let resp = client.send(&signed(s, &unknown, t)).await;
            let n = moved(rig.count().await);
            expect(is_2xx(&resp) && n == 0, || {
                format!("{} and +{n}", resp.status)
            })
        }
        "wh-ack-latency" => {
            let started = Instant::now();
            let resp = client.send(&signed(s, &e, t)).await;
            let took = started.elapsed();
            expect(is_2xx(&resp) && took < BUDGET, || {
                format!("{} after {took:?}", resp.status)
            })
        }
        "wh-source-isolation" => {
            client.send(&signed(s, &e, t)).await;
            client.send(&delivery(s, &e, t, &[SECRET_B])).await;
            let n = moved(rig.count().await);
            expect(n == 2, || format!("+{n}"))
        }
        other => panic!("no scenario for {other}"),
    }
}

/// The check ids of `idem-check webhook`.
const CHECKS: &[&str] = &[
    "wh-first-delivery",
    "wh-redelivery",
    "wh-byte-replay",
    "wh-concurrent-duplicates",
    "wh-lost-ack",
    "wh-retry-after-failure",
    "wh-late-redelivery",
    "wh-cross-replica",
    "wh-distinct-events",
    "wh-raw-body",
    "wh-bad-signature",
    "wh-forgery-no-poison",
    "wh-stale-timestamp",
    "wh-future-timestamp",
    "wh-rotated-secret",
    "wh-unknown-type",
    "wh-ack-latency",
    "wh-source-isolation",
];

/// Plays every check against `fault` with `scheme` on `kind` and asserts that exactly the
/// checks `breaks_for(scheme)` names fail.
async fn fails_exactly(kind: StoreKind, scheme: Scheme, fault: Option<WebhookFault>) {
    let expected: BTreeSet<&str> = fault
        .map_or_else(Vec::new, |f| f.breaks_for(scheme))
        .into_iter()
        .collect();
    let unknown: Vec<&&str> = expected.iter().filter(|c| !CHECKS.contains(c)).collect();
    assert!(
        unknown.is_empty(),
        "{fault:?} names unknown checks {unknown:?}"
    );
    let verdicts = futures::future::join_all(
        CHECKS
            .iter()
            .map(|id| async move { (*id, play(kind, scheme, id, fault).await) }),
    )
    .await;
    let failed: BTreeSet<&str> = verdicts
        .iter()
        .filter(|(_, v)| v.is_err())
        .map(|(id, _)| *id)
        .collect();
    let table: Vec<String> = verdicts
        .iter()
        .map(|(id, v)| format!("{id}: {}", v.as_ref().err().map_or("PASS", String::as_str)))
        .collect();
    assert_eq!(
        failed,
        expected,
        "{fault:?}, {scheme}:\n{}",
        table.join("\n")
    );
}

/// The six schemes one after another: the scenarios of one scheme already run at once, and
/// `wh-ack-latency` times each against its budget, so six times as many at once would judge the
/// machine's load rather than the consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_correct_consumer_passes_every_check_of_every_scheme() {
    for &scheme in Scheme::ALL {
        fails_exactly(StoreKind::Sqlite, scheme, None).await;
    }
}

macro_rules! fault_tests {
    ($($variant:ident),*) => {
        #[allow(non_snake_case)]
        mod fault {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $variant() {
                    // Both schemes at once: their scenarios have servers of their own, and a
                    // fault whose handler is slow on purpose (3 s) waits once, not twice.
                    let fault = Some(WebhookFault::$variant);
                    tokio::join!(
                        fails_exactly(StoreKind::Sqlite, Scheme::Standard, fault),
                        fails_exactly(StoreKind::Sqlite, Scheme::Github, fault),
                    );
                }
            )*
        }
    };
}

idem_reference_server::for_each_webhook_fault!(fault_tests);

/// The correct consumer, and the faults that change what is recorded or where, with two
/// replicas on one PostgreSQL database.
mod postgres {
    use super::*;

    async fn on_postgres(fault: Option<WebhookFault>) {
        fails_exactly(StoreKind::Postgres, Scheme::Standard, fault).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn correct() {
        on_postgres(None).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn record_keeping_faults() {
        for fault in [
            WebhookFault::DedupeInMemory,
            WebhookFault::LocalDedupe,
            WebhookFault::DedupeTtl,
            WebhookFault::DedupeBeforeVerify,
            WebhookFault::SeenIsProcessed,
            WebhookFault::RecordAfterAck,
        ] {
            on_postgres(Some(fault)).await;
        }
    }
}

/// The README's webhook fault table lists, for every fault, exactly the checks
/// `WebhookFault::breaks()` names.
#[test]
fn readme_webhook_fault_table_matches_breaks() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    for fault in WebhookFault::ALL {
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", fault.name())))
            .unwrap_or_else(|| panic!("README has no row for {fault}"));
        let last = row
            .trim_end_matches('|')
            .rsplit('|')
            .next()
            .unwrap_or_default();
        let listed: Vec<&str> = last.split('`').skip(1).step_by(2).collect();
        assert_eq!(listed, fault.breaks(), "README row of {fault}");
    }
}
