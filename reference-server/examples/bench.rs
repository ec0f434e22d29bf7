//! Throughput and latency of the reference server on loopback.
//!
//! The server runs in-process on a runtime of its own (2 worker threads) and the load
//! generator on another (2 worker threads): one process, so the numbers include the client's
//! cost on the same cores. 64 keep-alive HTTP/1.1 connections each send requests back to back
//! for a fixed time, in two phases per setup:
//!
//! - *first executions*: every request has a fresh key, so each one claims, executes and
//!   commits durably (SQLite: WAL, synchronous=FULL; PostgreSQL: synchronous_commit=on);
//! - *replays*: every request repeats a key completed in the first phase.
//!
//! Four setups, each on a fresh database: SQLite with group commit on and off (one instance),
//! and PostgreSQL with one and with two replicas (both servers on the server runtime, the
//! connections split between them; in the replay phase every connection asks the replica that
//! did NOT execute its keys). PostgreSQL is a throwaway cluster started for the run (the tests'
//! `initdb` + `pg_ctl` helper) with its default settings and `synchronous_commit = on`, on the
//! same machine. `--runs N` repeats everything and reports medians. Run with:
//!
//! ```text
//! cargo run --release -p idem-reference-server --example bench -- --runs 3 --secs 3
//! ```

#[path = "../tests/suite/common/pg.rs"]
mod pg;

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

/// What serves the requests.
#[derive(Debug, Clone, Copy)]
enum Setup {
    Sqlite { group_commit: bool },
    Postgres { replicas: usize },
}

impl Setup {
    const ALL: [Setup; 4] = [
        Setup::Sqlite { group_commit: true },
        Setup::Sqlite {
            group_commit: false,
        },
        Setup::Postgres { replicas: 1 },
        Setup::Postgres { replicas: 2 },
    ];

    fn name(self) -> &'static str {
        match self {
            Setup::Sqlite { group_commit: true } => "SQLite, group commit",
            Setup::Sqlite {
                group_commit: false,
            } => "SQLite, no group commit",
            Setup::Postgres { replicas: 1 } => "PostgreSQL, 1 replica",
            Setup::Postgres { .. } => "PostgreSQL, 2 replicas",
        }
    }
}

fn main() -> anyhow::Result<()> {
    let opts = Opts::parse();
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("client runtime")?;
    let cluster = pg::PgCluster::start_durable();
    let mut results: Vec<(&str, &str, Vec<Stats>)> = Vec::new();
    for run_no in 0..opts.runs {
        for setup in Setup::ALL {
            let mode = setup.name();
            let (first, replay) = bench_mode(&client_rt, &opts, setup, &cluster)?;
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
        "| setup | phase | requests/s | p50 ms | p99 ms |\n| --- | --- | ---: | ---: | ---: |"
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

/// Starts the setup's servers on a fresh database, runs both phases against them, stops them.
fn bench_mode(
    client_rt: &tokio::runtime::Runtime,
    opts: &Opts,
    setup: Setup,
    cluster: &pg::PgCluster,
) -> anyhow::Result<(Stats, Stats)> {
    let dir = tempfile::tempdir().context("temp dir")?;
    let (location, group_commit, replicas) = match setup {
        Setup::Sqlite { group_commit } => (
            DbLocation::File(dir.path().join("bench.db")),
            group_commit,
            1,
        ),
        Setup::Postgres { replicas } => (
            DbLocation::Postgres(cluster.create_database()),
            true,
            replicas,
        ),
    };
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("server runtime")?;
    let mut servers = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..replicas {
        let mut config = Config::new(location.clone());
        config.group_commit = group_commit;
        let listener = server_rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .context("bind")?;
        addrs.push(listener.local_addr().context("addr")?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = server_rt.spawn(run(listener, config, async {
            let _ = stopped.await;
        }));
        servers.push((stop, server));
    }
    let phase = Duration::from_secs(opts.secs);
    let result = client_rt.block_on(async {
        let first = load(&addrs, 0, opts.connections, phase, None).await?;
        let keys = first.1;
        let replay = load(&addrs, 1, opts.connections, phase, Some(keys)).await?;
        Ok::<_, anyhow::Error>((first.0, replay.0))
    });
    for (stop, server) in servers {
        let _ = stop.send(());
        server_rt
            .block_on(server)
            .context("server task")?
            .context("server")?;
    }
    result
}

/// Runs `connections` workers for `duration`, connection `c` on `addrs[(c + shift) % n]`.
/// Without `replay`, every request uses a new key and the created requests are returned (per
/// connection) for the replay phase; with it, each connection cycles through its own list.
async fn load(
    addrs: &[SocketAddr],
    shift: usize,
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
        let addr = addrs[(c + shift) % addrs.len()];
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
