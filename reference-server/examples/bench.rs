//! Throughput and latency of the reference server on loopback.
//!
//! The server runs in-process on a runtime of its own (2 worker threads) and the load
//! generator on another (2 worker threads): one process, so the numbers include the client's
//! cost on the same cores. 64 keep-alive HTTP/1.1 connections each send requests back to back
//! for a fixed time, in two phases per store mode:
//!
//! - *first executions*: every request has a fresh key, so each one claims, executes and
//!   commits durably (WAL, synchronous=FULL);
//! - *replays*: every request repeats a key completed in the first phase.
//!
//! Both phases run with group commit on and off. `--runs N` repeats everything and reports
//! medians. Run with:
//!
//! ```text
//! cargo run --release -p idem-reference-server --example bench -- --runs 3 --secs 3
//! ```

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use clap::Parser;
use idem_reference_server::{run, Config, DbLocation};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Debug, Parser)]
struct Opts {
    /// Repetitions of the whole benchmark; medians are reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Seconds per phase.
    #[arg(long, default_value_t = 3)]
    secs: u64,
    /// Concurrent connections.
    #[arg(long, default_value_t = 64)]
    connections: usize,
}

#[derive(Debug, Clone, Copy)]
struct Stats {
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
}

fn main() -> anyhow::Result<()> {
    let opts = Opts::parse();
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("client runtime")?;
    let mut results: Vec<(&str, &str, Vec<Stats>)> = Vec::new();
    for run_no in 0..opts.runs {
        for group_commit in [true, false] {
            let mode = if group_commit {
                "group commit"
            } else {
                "no group commit"
            };
            let (first, replay) = bench_mode(&client_rt, &opts, group_commit)?;
            eprintln!(
                "run {} {mode}: first {first:?} replay {replay:?}",
                run_no + 1
            );
            for (phase, stats) in [("first executions", first), ("replays", replay)] {
                match results
                    .iter_mut()
                    .find(|(m, p, _)| *m == mode && *p == phase)
                {
                    Some((_, _, all)) => all.push(stats),
                    None => results.push((mode, phase, vec![stats])),
                }
            }
        }
    }
    println!(
        "| store mode | phase | requests/s | p50 ms | p99 ms |\n| --- | --- | ---: | ---: | ---: |"
    );
    for (mode, phase, all) in &results {
        let median = |f: fn(&Stats) -> f64| {
            let mut v: Vec<f64> = all.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        println!(
            "| {mode} | {phase} | {:.0} | {:.2} | {:.2} |",
            median(|s| s.rps),
            median(|s| s.p50_ms),
            median(|s| s.p99_ms)
        );
    }
    Ok(())
}

/// Starts a server on a fresh database, runs both phases against it, stops it.
fn bench_mode(
    client_rt: &tokio::runtime::Runtime,
    opts: &Opts,
    group_commit: bool,
) -> anyhow::Result<(Stats, Stats)> {
    let dir = tempfile::tempdir().context("temp dir")?;
    let mut config = Config::new(DbLocation::File(dir.path().join("bench.db")));
    config.group_commit = group_commit;
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("server runtime")?;
    let listener = server_rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .context("bind")?;
    let addr = listener.local_addr().context("addr")?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = server_rt.spawn(run(listener, config, async {
        let _ = stopped.await;
    }));
    let phase = Duration::from_secs(opts.secs);
    let result = client_rt.block_on(async {
        let first = load(addr, opts.connections, phase, None).await?;
        let keys = first.1;
        let replay = load(addr, opts.connections, phase, Some(keys)).await?;
        Ok::<_, anyhow::Error>((first.0, replay.0))
    });
    let _ = stop.send(());
    server_rt
        .block_on(server)
        .context("server task")?
        .context("server")?;
    result
}

/// Runs `connections` workers for `duration`. Without `replay`, every request uses a new key
/// and the created requests are returned (per connection) for the replay phase; with it, each
/// connection cycles through its own list.
async fn load(
    addr: SocketAddr,
    connections: usize,
    duration: Duration,
    replay: Option<Vec<Vec<Vec<u8>>>>,
) -> anyhow::Result<(Stats, Vec<Vec<Vec<u8>>>)> {
    let mut replay = replay.map(|r| r.into_iter());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..connections {
        let requests = match replay.as_mut() {
            Some(lists) => Some(lists.next().ok_or_else(|| anyhow!("no keys for {c}"))?),
            None => None,
        };
        tasks.push(tokio::spawn(worker(addr, c, started + duration, requests)));
    }
    let mut latencies = Vec::new();
    let mut created = Vec::new();
    for task in tasks {
        let (lat, reqs) = task.await.context("worker panicked")??;
        latencies.extend(lat);
        created.push(reqs);
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let pct = |p: f64| {
        let i = ((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1));
        latencies.get(i).copied().unwrap_or_default() as f64 / 1000.0
    };
    Ok((
        Stats {
            rps: latencies.len() as f64 / elapsed,
            p50_ms: pct(0.50),
            p99_ms: pct(0.99),
        },
        created,
    ))
}

async fn worker(
    addr: SocketAddr,
    c: usize,
    until: Instant,
    replay: Option<Vec<Vec<u8>>>,
) -> anyhow::Result<(Vec<u64>, Vec<Vec<u8>>)> {
    let mut conn = Conn::connect(addr).await?;
    let mut latencies = Vec::new();
    let mut sent = Vec::new();
    let mut n = 0usize;
    while Instant::now() < until {
        let request = match &replay {
            Some(list) if !list.is_empty() => list[n % list.len()].clone(),
            Some(_) => bail!("connection {c} has nothing to replay"),
            None => first_request(c, n),
        };
        let t = Instant::now();
        let status = conn.roundtrip(&request).await?;
        latencies.push(t.elapsed().as_micros() as u64);
        if status != 201 {
            bail!("unexpected status {status}");
        }
        if replay.is_none() {
            sent.push(request);
        }
        n += 1;
    }
    Ok((latencies, sent))
}

fn first_request(c: usize, n: usize) -> Vec<u8> {
    let body = format!(r#"{{"amountCents":1250,"currency":"EUR","reference":"bench-{c}-{n}"}}"#);
    format!(
        "POST /api/payments HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer token-a\r\n\
         Content-Type: application/json\r\nIdempotency-Key: \"{}\"\r\n\
         Content-Length: {}\r\n\r\n{body}",
        uuid::Uuid::new_v4(),
        body.len()
    )
    .into_bytes()
}

/// One keep-alive HTTP/1.1 connection that reads responses by `Content-Length`.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn connect(addr: SocketAddr) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr).await.context("connect")?;
        stream.set_nodelay(true).context("nodelay")?;
        Ok(Self {
            stream,
            buf: Vec::with_capacity(4096),
        })
    }

    async fn roundtrip(&mut self, request: &[u8]) -> anyhow::Result<u16> {
        self.stream.write_all(request).await.context("write")?;
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = std::str::from_utf8(&self.buf[..end]).context("head")?;
                let status: u16 = head
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| anyhow!("bad status line"))?;
                let length: usize = head
                    .lines()
                    .filter_map(|l| l.split_once(':'))
                    .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, v)| v.trim().parse().ok())
                    .unwrap_or(0);
                let total = end + 4 + length;
                while self.buf.len() < total {
                    self.fill().await?;
                }
                self.buf.drain(..total);
                return Ok(status);
            }
            self.fill().await?;
        }
    }

    async fn fill(&mut self) -> anyhow::Result<()> {
        if self.stream.read_buf(&mut self.buf).await.context("read")? == 0 {
            bail!("server closed the connection");
        }
        Ok(())
    }
}
