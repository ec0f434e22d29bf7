//! Slow and hostile clients all at once against the real binary: hundreds of connections that
//! trickle a head byte by byte (slowloris) or say nothing at all, heads and bodies far over the
//! limits, and a flood of distinct keys. Meanwhile well-behaved clients are answered within a
//! bound, the process's memory (RSS from /proc) stays bounded, every hostile connection is cut
//! off within its timeout, and every payment acknowledged before, during and after is still
//! there and replays byte for byte.

use std::time::{Duration, Instant};

use crate::common::{
    body, fresh_key, parse_response, spawn_server, Client, Req, Resp, StoreKind, TestDb,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

/// The server's limits in these tests: short, so that the test waits them out quickly.
const HEADER_READ: Duration = Duration::from_secs(2);
const IDLE: Duration = Duration::from_secs(2);
const FLAGS: [&str; 6] = [
    "--header-read-timeout",
    "2s",
    "--idle-timeout",
    "2s",
    "--body-read-timeout",
    "2s",
];

/// How much later than its timeout a connection may be closed, on a loaded 2-core machine.
const SLACK: Duration = Duration::from_secs(5);
/// The slowest answer a well-behaved client may get while the server is under attack.
const WELL_BEHAVED_BOUND: Duration = Duration::from_secs(2);
/// How much the server's resident memory may grow over its idle size under the attacks here
/// (a few MB was measured for each).
const RSS_GROWTH_BOUND_KB: u64 = 32 * 1024;
/// The same for 100 connections stalled in a head far over the limit: each holds at most
/// `MAX_HEAD_BYTES` (64 KiB) of it. Before that limit, hyper's own (400 KiB) let them add 36 MB.
const STALLED_HEADS_BOUND_KB: u64 = 16 * 1024;

/// The process's resident set and its peak so far, in KiB (`VmRSS`, `VmHWM`).
fn rss_kb(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// `n` payments from a well-behaved client, one after another, each with a fresh key: every
/// one is 201; returns each request with its answer, and the slowest answer's time.
async fn well_behaved(client: Client, n: usize) -> (Vec<(Req, Resp)>, Duration) {
    let mut done = Vec::new();
    let mut slowest = Duration::ZERO;
    for i in 0..n {
        let req = Req::payment(
            "token-a",
            &fresh_key(),
            &body(&format!("ok-{i}-{}", uuid::Uuid::new_v4())),
        );
        let start = Instant::now();
        let resp = client.send(&req).await;
        slowest = slowest.max(start.elapsed());
        assert_eq!(resp.status, 201, "{}", resp.text());
        done.push((req, resp));
    }
    (done, slowest)
}

/// Every acknowledged payment replays byte for byte, and the effect counter counts each once.
async fn assert_intact(client: Client, acked: &[(Req, Resp)]) {
    for (req, original) in acked {
        let replay = client.send(req).await;
        assert_eq!(replay.status, 201, "{}", replay.text());
        assert_eq!(replay.body, original.body, "a stored payment changed");
        assert_eq!(replay.header("idempotency-replayed"), Some("true"));
    }
    assert_eq!(client.count("token-a").await, acked.len() as u64);
}

/// Waits until the server closes `tcp` (end of stream or a reset), bounded by `within`;
/// returns how long that took.
async fn closed_within(mut tcp: TcpStream, within: Duration) -> Duration {
    let start = Instant::now();
    let mut sink = Vec::new();
    let _ = tokio::time::timeout(within, tcp.read_to_end(&mut sink))
        .await
        .unwrap_or_else(|_| panic!("a hostile connection was still open after {within:?}"));
    start.elapsed()
}

/// 200 connections that never send a byte, and 200 that trickle a request head one byte every
/// 100 ms (slowloris), all at once: well-behaved clients are answered within the bound the
/// whole time, every hostile connection is closed within its timeout, and memory stays bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slowloris_connections_do_not_starve_others() {
    const EACH: usize = 200;
    let db = TestDb::new(StoreKind::Sqlite);
    let (child, client) = spawn_server(db.arg(), &FLAGS).await;
    let pid = child.id().expect("pid");
    let (idle_rss, _) = rss_kb(pid);
    let (before, _) = well_behaved(client, 10).await;

    let mut hostile = JoinSet::new();
    for _ in 0..EACH {
        let tcp = TcpStream::connect(client.addr).await.expect("connect");
        hostile.spawn(async move { ("idle", closed_within(tcp, IDLE + SLACK).await) });
    }
    for _ in 0..EACH {
        let mut tcp = TcpStream::connect(client.addr).await.expect("connect");
        hostile.spawn(async move {
            let head = b"POST /api/payments HTTP/1.1\r\nHost: test\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
            let start = Instant::now();
            for byte in head {
                if tcp.write_all(&[*byte]).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                if start.elapsed() > HEADER_READ + SLACK {
                    panic!("a slowloris connection was still open after {:?}", start.elapsed());
                }
            }
            ("slowloris", start.elapsed() + closed_within(tcp, SLACK).await)
        });
    }
    let (during, slowest) = well_behaved(client, 40).await;
    let (_, peak) = rss_kb(pid);
    let mut closed = Vec::new();
    while let Some(joined) = hostile.join_next().await {
        closed.push(joined.expect("hostile connection"));
    }
    let latest = |kind| {
        closed
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, t)| *t)
            .max()
            .unwrap_or_default()
    };
    let (after, _) = well_behaved(client, 10).await;
    assert_intact(client, &[before, during, after].concat()).await;
    eprintln!(
        "{EACH} idle + {EACH} slowloris connections: well-behaved slowest {slowest:?}; idle \
         closed by {:?}, slowloris by {:?}; RSS {idle_rss} kB idle, peak {peak} kB",
        latest("idle"),
        latest("slowloris")
    );
    assert!(
        slowest < WELL_BEHAVED_BOUND,
        "a well-behaved request took {slowest:?}"
    );
    assert!(
        peak < idle_rss + RSS_GROWTH_BOUND_KB,
        "RSS grew from {idle_rss} kB to {peak} kB"
    );
}

/// Writes `bytes` (ignoring a write the server refused midway) and reads the answer until the
/// server closes, within `SLACK` of the header timeout.
async fn refused(client: Client, bytes: &[u8]) -> Option<Resp> {
    let mut tcp = TcpStream::connect(client.addr).await.expect("connect");
    let _ = tcp.write_all(bytes).await;
    let mut got = Vec::new();
    let _ = tokio::time::timeout(HEADER_READ + SLACK, tcp.read_to_end(&mut got))
        .await
        .expect("the server neither answered nor closed");
    parse_response(&got)
}

/// A head with one 1 MiB field, a head of 10,000 fields, a declared 1 TB body, a 1 MiB chunked
/// body: each is refused (431 or 413) or cut off, never buffered whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_heads_and_bodies_are_refused() {
    let db = TestDb::new(StoreKind::Sqlite);
    let (child, client) = spawn_server(db.arg(), &FLAGS).await;
    let pid = child.id().expect("pid");
    let (idle_rss, _) = rss_kb(pid);
    let (before, _) = well_behaved(client, 5).await;

    let long_field = [
        &b"POST /api/payments HTTP/1.1\r\nHost: test\r\nX-Big: "[..],
        &vec![b'a'; 1 << 20],
        b"\r\n\r\n",
    ]
    .concat();
    let answer = refused(client, &long_field).await;
    assert!(
        answer.as_ref().is_none_or(|r| r.status == 431),
        "a 1 MiB field: {answer:?}"
    );
    let many_fields = [
        &b"POST /api/payments HTTP/1.1\r\nHost: test\r\n"[..],
        &(0..10_000)
            .flat_map(|i| format!("X-F{i}: v\r\n").into_bytes())
            .collect::<Vec<_>>(),
        b"\r\n",
    ]
    .concat();
    let answer = refused(client, &many_fields).await;
    assert!(
        answer.as_ref().is_none_or(|r| r.status == 431),
        "10,000 fields: {answer:?}"
    );
    let declared = Req::payment("token-a", &fresh_key(), "{}")
        .header("Content-Length", "1000000000000")
        .to_bytes(false);
    // The helper adds its own Content-Length after ours; take ours only.
    let declared = String::from_utf8(declared)
        .expect("ascii")
        .replace("Content-Length: 2\r\n", "");
    let answer = refused(client, declared.as_bytes())
        .await
        .expect("an answer");
    answer.assert_problem(413);
    let chunk = format!("{:x}\r\n{}\r\n", 1 << 16, "a".repeat(1 << 16));
    let chunked = format!(
        "POST /api/payments HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer token-a\r\n\
         Idempotency-Key: {}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n{}0\r\n\r\n",
        fresh_key(),
        chunk.repeat(16)
    );
    let answer = refused(client, chunked.as_bytes())
        .await
        .expect("an answer");
    answer.assert_problem(413);

    // The same, 100 connections at a time, each stalling once its head is large: what the
    // server holds for them is bounded.
    let mut stalled = JoinSet::new();
    for _ in 0..100 {
        let mut tcp = TcpStream::connect(client.addr).await.expect("connect");
        let partial = long_field[..long_field.len() - 4].to_vec();
        stalled.spawn(async move {
            let _ = tcp.write_all(&partial).await;
            closed_within(tcp, HEADER_READ + SLACK).await
        });
    }
    let (during, slowest) = well_behaved(client, 20).await;
    let (_, peak) = rss_kb(pid);
    while let Some(joined) = stalled.join_next().await {
        joined.expect("stalled connection");
    }
    assert_intact(client, &[before, during].concat()).await;
    eprintln!(
        "oversized heads and bodies: refused; 100 stalled 1 MiB heads: well-behaved slowest \
         {slowest:?}; RSS {idle_rss} kB idle, peak {peak} kB"
    );
    assert!(
        slowest < WELL_BEHAVED_BOUND,
        "a well-behaved request took {slowest:?}"
    );
    assert!(
        peak < idle_rss + STALLED_HEADS_BOUND_KB,
        "RSS grew from {idle_rss} kB to {peak} kB"
    );
}

/// 4,000 distinct keys from 16 clients at once: every one is executed once and replays byte
/// for byte afterwards, the well-behaved client is answered within the bound meanwhile, and
/// memory grows by a bounded amount per key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_distinct_keys_loses_nothing() {
    const CLIENTS: usize = 16;
    const KEYS_EACH: usize = 250;
    let db = TestDb::new(StoreKind::Sqlite);
    let (child, client) = spawn_server(db.arg(), &FLAGS).await;
    let pid = child.id().expect("pid");
    let (idle_rss, _) = rss_kb(pid);
    let started = Instant::now();
    let mut flood = JoinSet::new();
    for c in 0..CLIENTS {
        flood.spawn(async move {
            let mut acked = Vec::new();
            for i in 0..KEYS_EACH {
                let req = Req::payment("token-a", &fresh_key(), &body(&format!("flood-{c}-{i}")));
                let resp = client.send(&req).await;
                assert_eq!(resp.status, 201, "{}", resp.text());
                acked.push((req, resp));
            }
            acked
        });
    }
    let (during, slowest) = well_behaved(client, 20).await;
    let mut acked = during;
    while let Some(joined) = flood.join_next().await {
        acked.extend(joined.expect("flood client"));
    }
    let flooded = started.elapsed();
    let (rss, peak) = rss_kb(pid);
    assert_intact(client, &acked).await;
    let ids: std::collections::HashSet<String> = acked.iter().map(|(_, r)| r.id()).collect();
    assert_eq!(ids.len(), acked.len(), "two keys got one payment");
    eprintln!(
        "{} distinct keys in {flooded:?}: well-behaved slowest {slowest:?}; RSS {idle_rss} kB \
         idle, {rss} kB after, peak {peak} kB",
        acked.len()
    );
    assert!(
        slowest < WELL_BEHAVED_BOUND,
        "a well-behaved request took {slowest:?}"
    );
    assert!(
        peak < idle_rss + RSS_GROWTH_BOUND_KB,
        "RSS grew from {idle_rss} kB to {peak} kB"
    );
}

/// At `--max-connections 32`, 100 clients connect and say nothing, under a 60 s idle timeout:
/// each newcomer takes the place of the connection idle the longest, so at most 32 stay open,
/// and a well-behaved client is answered at once rather than after the idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_limit_the_longest_idle_gives_way() {
    const MAX: usize = 32;
    const IDLE_CLIENTS: usize = 100;
    let db = TestDb::new(StoreKind::Sqlite);
    let flags = ["--idle-timeout", "60s", "--max-connections", "32"];
    let (_child, client) = spawn_server(db.arg(), &flags).await;
    let mut idle = Vec::new();
    for _ in 0..IDLE_CLIENTS {
        idle.push(TcpStream::connect(client.addr).await.expect("connect"));
    }
    let (acked, slowest) = well_behaved(client, 10).await;
    // Every idle connection but the last `MAX` was closed for a newcomer, long before its
    // idle timeout (bounded wait on each).
    let mut closed = 0;
    for tcp in idle.drain(..IDLE_CLIENTS - MAX) {
        closed_within(tcp, SLACK).await;
        closed += 1;
    }
    assert_intact(client, &acked).await;
    eprintln!(
        "{IDLE_CLIENTS} idle connections at --max-connections {MAX}: {closed} closed for \
         newcomers; well-behaved slowest {slowest:?}"
    );
    assert!(
        slowest < WELL_BEHAVED_BOUND,
        "a well-behaved request took {slowest:?}"
    );
}
