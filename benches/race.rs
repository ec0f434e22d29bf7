//! Race-engine benchmark: how tightly do duplicates arrive, and how often is a race caught?
//!
//! Part 1 (`spread`): 16 duplicates per burst at a loopback listener that stamps each request
//! with the kernel receive time (SO_TIMESTAMPNS) of the segment that completed it; the spread of
//! a burst is last completion − first completion. The HTTP/1.1 engine ([`burst`]) and the
//! HTTP/2 single-packet burst ([`h2burst::burst`], h2c: the listener speaks enough HTTP/2 to
//! stamp each stream's END_STREAM) run against a naive baseline: 16 tokio tasks that send with
//! reqwest on pre-opened keep-alive connections, started together by a barrier.
//!
//! Part 2 (`detect`): the same three clients against `idem-reference-server --fault race
//! --race-window-us N`; a burst detects the race when its 201 responses carry more than one
//! payment id or the effect counter rises by more than one; every missed burst is listed with
//! its release spread and statuses.
//!
//! The run ends with the table of `BENCHMARKS.md`: each figure is the median over `--runs`, with
//! every run's value beside it.
//!
//! Run: `cargo bench --bench race -- [--part spread|detect|all] [--bursts 200] [--runs 1]
//! [--server PATH] [--stage-segments N]`. Everything stays on 127.0.0.1 and every loop is bounded.

use std::collections::HashSet;
use std::io::{IoSliceMut, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idem_check::http::burst::{burst, BurstOptions, BurstReport};
use idem_check::http::exchange::{Header, SentRequest};
use idem_check::http::{h1, h2burst, Connector};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags};

const DUPLICATES: usize = 16;

struct Args {
    part: String,
    bursts: usize,
    runs: usize,
    server: Option<String>,
    stage_segments: usize,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        part: "all".into(),
        bursts: 200,
        runs: 1,
        server: None,
        stage_segments: BurstOptions::default().stage_segments,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--bench" => {}
            "--part" => args.part = it.next().unwrap_or_default(),
            "--bursts" => args.bursts = it.next().unwrap_or_default().parse()?,
            "--runs" => args.runs = it.next().unwrap_or_default().parse()?,
            "--server" => args.server = it.next(),
            "--stage-segments" => args.stage_segments = it.next().unwrap_or_default().parse()?,
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    Ok(args)
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    println!("load average at start: {}", loadavg());
    let mut spreads = Vec::new();
    if args.part == "spread" || args.part == "all" {
        for run in 1..=args.runs {
            println!("## spread, run {run}/{}", args.runs);
            spreads.push(rt.block_on(spread(args.bursts, args.stage_segments))?);
        }
    }
    let mut detections = Vec::new();
    if args.part == "detect" || args.part == "all" {
        let server = match &args.server {
            Some(s) => s.clone(),
            None => build_server()?,
        };
        for run in 1..=args.runs {
            println!("## detection, run {run}/{}", args.runs);
            let mut per_window = Vec::new();
            for window in WINDOWS_US {
                per_window.push(rt.block_on(detect(
                    &server,
                    window,
                    args.bursts,
                    args.stage_segments,
                ))?);
            }
            detections.push(per_window);
        }
    }
    println!("load average at end: {}", loadavg());
    summary(&args, &spreads, &detections);
    Ok(())
}

/// The race windows of part 2, in microseconds.
const WINDOWS_US: [u64; 3] = [20, 100, 1000];

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Median of a few run values (the middle one, or the mean of the two middle ones).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The issue's table: each figure is the median over runs, with every run's value after it.
fn summary(args: &Args, spreads: &[SpreadRun], detections: &[Vec<Detection>]) {
    let runs = |v: &[f64], unit: &str| {
        let each: Vec<String> = v.iter().map(|x| format!("{x:.1}")).collect();
        format!("**{:.1}**{unit} ({})", median(v.to_vec()), each.join(", "))
    };
    println!();
    println!(
        "## Summary: {} run(s) of {} bursts of {DUPLICATES} duplicates (median over runs, then each run)",
        args.runs.max(1),
        args.bursts
    );
    println!();
    println!("| measure | engine (HTTP/1.1) | engine, --no-release-threads | engine-h2 (single packet, h2c) | baseline (reqwest, 16 tasks) |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    if !spreads.is_empty() {
        let pick = |f: fn(&SpreadRun) -> f64| spreads.iter().map(f).collect::<Vec<_>>();
        println!(
            "| arrival spread, median µs | {} | {} | {} | {} |",
            runs(&pick(|r| r.engine.0), ""),
            runs(&pick(|r| r.engine_single.0), ""),
            runs(&pick(|r| r.engine_h2.0), ""),
            runs(&pick(|r| r.baseline.0), "")
        );
        println!(
            "| arrival spread, p90 µs | {} | {} | {} | {} |",
            runs(&pick(|r| r.engine.1), ""),
            runs(&pick(|r| r.engine_single.1), ""),
            runs(&pick(|r| r.engine_h2.1), ""),
            runs(&pick(|r| r.baseline.1), "")
        );
    }
    for (i, window) in WINDOWS_US.iter().enumerate() {
        let of = |f: fn(&Detection) -> usize| {
            detections
                .iter()
                .filter_map(|run| run.get(i))
                .map(|d| 100.0 * f(d) as f64 / d.bursts.max(1) as f64)
                .collect::<Vec<_>>()
        };
        let hits = |f: fn(&Detection) -> usize| {
            let total: usize = detections.iter().filter_map(|r| r.get(i)).map(f).sum();
            let bursts: usize = detections
                .iter()
                .filter_map(|r| r.get(i))
                .map(|d| d.bursts)
                .sum();
            format!("{total}/{bursts}")
        };
        if detections.is_empty() {
            break;
        }
        println!(
            "| detection, {window} µs window, % | {} — {} | {} — {} | {} — {} | {} — {} |",
            runs(&of(|d| d.engine_hits), " %"),
            hits(|d| d.engine_hits),
            runs(&of(|d| d.single_hits), " %"),
            hits(|d| d.single_hits),
            runs(&of(|d| d.h2_hits), " %"),
            hits(|d| d.h2_hits),
            runs(&of(|d| d.base_hits), " %"),
            hits(|d| d.base_hits)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Part 1: arrival spread at a timestamping listener.

/// A one-thread poll(2) HTTP/1.1 and h2c sink on 127.0.0.1 that answers `200` to every request
/// and records the kernel receive time of the segment that completed each one (for h2c: the
/// segment that carried the stream's END_STREAM).
struct Sink {
    url: url::Url,
    stamps: Arc<Mutex<Vec<i128>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sink {
    fn start() -> anyhow::Result<Sink> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let url = url::Url::parse(&format!("http://{}/api/payments", listener.local_addr()?))?;
        let stamps = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s2, stop2) = (stamps.clone(), stop.clone());
        let thread = std::thread::spawn(move || sink_loop(listener, s2, stop2));
        Ok(Sink {
            url,
            stamps,
            stop,
            thread: Some(thread),
        })
    }

    fn take(&self) -> Vec<i128> {
        std::mem::take(&mut *self.stamps.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Waits (at most 5 s) until `n` completions were stamped and returns them.
    fn wait_for(&self, n: usize) -> Vec<i128> {
        let limit = Instant::now() + Duration::from_secs(5);
        while self.stamps.lock().map(|s| s.len()).unwrap_or(0) < n && Instant::now() < limit {
            std::thread::sleep(Duration::from_micros(200));
        }
        self.take()
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// The connection opened with the HTTP/2 preface.
    h2: bool,
}

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Handles the complete HTTP/2 frames in `c.buf`: SETTINGS and PING are acknowledged, and each
/// stream that ends (END_STREAM on DATA or HEADERS) is stamped with `at` and answered with a
/// bare `:status 200` (HPACK static index 8).
fn h2_frames(c: &mut Conn, at: i128, stamps: &Mutex<Vec<i128>>) {
    let mut out = Vec::new();
    while c.buf.len() >= 9 {
        let len = u32::from_be_bytes([0, c.buf[0], c.buf[1], c.buf[2]]) as usize;
        if c.buf.len() < 9 + len {
            break;
        }
        let (kind, flags) = (c.buf[3], c.buf[4]);
        let stream = [c.buf[5] & 0x7f, c.buf[6], c.buf[7], c.buf[8]];
        let payload: Vec<u8> = c.buf[9..9 + len].to_vec();
        c.buf.drain(..9 + len);
        let mut frame = |kind: u8, flags: u8, stream: [u8; 4], payload: &[u8]| {
            out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
            out.extend_from_slice(&[kind, flags]);
            out.extend_from_slice(&stream);
            out.extend_from_slice(payload);
        };
        match kind {
            // SETTINGS / PING without ACK: acknowledge.
            0x4 | 0x6 if flags & 0x1 == 0 => frame(kind, 0x1, stream, &payload),
            // DATA or HEADERS ending the stream: the request is complete.
            0x0 | 0x1 if flags & 0x1 != 0 => {
                stamps.lock().unwrap_or_else(|e| e.into_inner()).push(at);
                frame(0x1, 0x5, stream, &[0x88]);
            }
            _ => {}
        }
    }
    let _ = c.stream.write_all(&out);
}

fn sink_loop(
    listener: TcpListener,
    stamps: Arc<Mutex<Vec<i128>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    let mut conns: Vec<Conn> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut cmsg = nix::cmsg_space!(nix::sys::time::TimeSpec);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let ready: Vec<bool> = {
            let mut fds = vec![PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
            fds.extend(
                conns
                    .iter()
                    .map(|c| PollFd::new(c.stream.as_fd(), PollFlags::POLLIN)),
            );
            if poll(&mut fds, PollTimeout::from(50u16)).is_err() {
                continue;
            }
            fds.iter()
                .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
                .collect()
        };
        if ready[0] {
            while let Ok((s, _)) = listener.accept() {
                let _ = s.set_nonblocking(true);
                let _ = s.set_nodelay(true);
                let _ = setsockopt(&s, sockopt::ReceiveTimestampns, &true);
                conns.push(Conn {
                    stream: s,
                    buf: Vec::new(),
                    h2: false,
                });
            }
        }
        let mut closed = Vec::new();
        for (i, c) in conns.iter_mut().enumerate() {
            if ready.get(i + 1) != Some(&true) {
                continue;
            }
            let (n, stamp) = {
                let mut iov = [IoSliceMut::new(&mut chunk)];
                match recvmsg::<()>(
                    c.stream.as_raw_fd(),
                    &mut iov,
                    Some(&mut cmsg),
                    MsgFlags::MSG_DONTWAIT,
                ) {
                    Ok(msg) => {
                        let mut stamp = None;
                        if let Ok(cm) = msg.cmsgs() {
                            for m in cm {
                                if let ControlMessageOwned::ScmTimestampns(ts) = m {
                                    stamp = Some(
                                        ts.tv_sec() as i128 * 1_000_000_000 + ts.tv_nsec() as i128,
                                    );
                                }
                            }
                        }
                        (msg.bytes, stamp)
                    }
                    Err(nix::errno::Errno::EAGAIN) => continue,
                    Err(_) => (0, None),
                }
            };
            if n == 0 {
                closed.push(i);
                continue;
            }
            c.buf.extend_from_slice(&chunk[..n]);
            if !c.h2 && c.buf.len() >= H2_PREFACE.len() && c.buf.starts_with(H2_PREFACE) {
                c.buf.drain(..H2_PREFACE.len());
                c.h2 = true;
                // Our (empty) SETTINGS.
                let _ = c.stream.write_all(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]);
            }
            if c.h2 {
                h2_frames(c, stamp.unwrap_or_else(userspace_now), &stamps);
                continue;
            }
            while let Some(len) = complete_request(&c.buf) {
                c.buf.drain(..len);
                let at = stamp.unwrap_or_else(userspace_now);
                stamps.lock().unwrap_or_else(|e| e.into_inner()).push(at);
                let _ = c
                    .stream
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
        }
        for i in closed.into_iter().rev() {
            conns.swap_remove(i);
        }
    }
}

fn userspace_now() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or_default()
}

/// The length of the first complete request in `buf` (head + Content-Length body), if any.
fn complete_request(buf: &[u8]) -> Option<usize> {
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    (buf.len() >= head_end + len).then_some(head_end + len)
}

fn payment(url: &url::Url, key: &str, reference: &str) -> SentRequest {
    let body = format!(r#"{{"amountCents":1250,"currency":"EUR","reference":"{reference}"}}"#);
    h1::prepare(
        url,
        "POST",
        vec![
            Header::new("Authorization", "Bearer token-a"),
            Header::new("Content-Type", "application/json"),
            Header::new("Idempotency-Key", format!("\"{key}\"")),
        ],
        body.into_bytes(),
    )
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN, f64::NAN);
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.0), at(0.5), at(0.9), at(1.0))
}

fn row(name: &str, v: Vec<f64>) {
    let n = v.len();
    let (min, med, p90, max) = stats(v);
    println!("| {name} | {n} | {min:.1} | {med:.1} | {p90:.1} | {max:.1} |");
}

/// One run of part 1: (median, p90) arrival spread of the engine (default options, or
/// `--stage-segments`), of the HTTP/2 single-packet burst and of the baseline.
struct SpreadRun {
    engine: (f64, f64),
    engine_single: (f64, f64),
    engine_h2: (f64, f64),
    baseline: (f64, f64),
}

async fn spread(bursts: usize, stage_segments: usize) -> anyhow::Result<SpreadRun> {
    let sink = Sink::start()?;
    let connector = Connector::default();

    let mut rows = Vec::new();
    let (mut engine, mut engine_single) = ((f64::NAN, f64::NAN), (f64::NAN, f64::NAN));
    // The engine as configured (its release threads where they can be raised) and on the calling
    // thread (what a process gets where they cannot), both in the summary; then the prefix in one
    // write, for comparison.
    let variants = [
        (
            format!("{stage_segments} staging segment(s)"),
            stage_segments,
            true,
        ),
        (
            format!("{stage_segments} staging segment(s), --no-release-threads"),
            stage_segments,
            false,
        ),
        (
            "prefix in 1 write, --no-release-threads".to_string(),
            1,
            false,
        ),
    ];
    for (v, (label, segments, release_threads)) in variants.into_iter().enumerate() {
        let opts = BurstOptions {
            release_threads: release_threads.into(),
            stage_segments: segments,
            ..BurstOptions::default()
        };
        let mut modes = std::collections::BTreeSet::new();
        let (mut arrival, mut release, mut gaps) = (Vec::new(), Vec::new(), Vec::new());
        for b in 0..bursts {
            let key = uuid::Uuid::new_v4().to_string();
            let reqs: Vec<_> = (0..DUPLICATES)
                .map(|_| payment(&sink.url, &key, &format!("spread-{b}")))
                .collect();
            sink.take();
            let report = burst(&connector, &reqs, &opts).await?;
            modes.insert(report.release.to_string());
            let stamps = sink.wait_for(DUPLICATES);
            if stamps.len() == DUPLICATES {
                arrival.push(spread_of(&stamps));
            }
            release.push(report.spread_us);
            let mut rel: Vec<Instant> =
                report.responses.iter().filter_map(|r| r.released).collect();
            rel.sort();
            gaps.extend(
                rel.windows(2)
                    .map(|w| w[1].duration_since(w[0]).as_secs_f64() * 1e6),
            );
        }
        let (_, med, p90, _) = stats(arrival.clone());
        match v {
            0 => engine = (med, p90),
            1 => engine_single = (med, p90),
            _ => {}
        }
        let label = format!(
            "{label}, released {}",
            modes.into_iter().collect::<Vec<_>>().join(" or ")
        );
        rows.push((
            format!("engine, {label}: arrival spread (kernel rx stamps)"),
            arrival,
        ));
        rows.push((
            format!("engine, {label}: release spread (sender clock)"),
            release,
        ));
        rows.push((
            format!("engine, {label}: gap between consecutive releases"),
            gaps,
        ));
    }

    // The HTTP/2 single-packet burst over h2c.
    let h2_opts = BurstOptions::default();
    let mut h2_arrival = Vec::new();
    let mut h2_errors = 0usize;
    for b in 0..bursts {
        let key = uuid::Uuid::new_v4().to_string();
        let reqs: Vec<_> = (0..DUPLICATES)
            .map(|_| payment(&sink.url, &key, &format!("h2-{b}")))
            .collect();
        sink.take();
        let report = h2burst::burst(&connector, &reqs, &h2_opts).await?;
        h2_errors += report
            .responses
            .iter()
            .filter(|r| r.result.is_err())
            .count();
        let stamps = sink.wait_for(DUPLICATES);
        if stamps.len() == DUPLICATES {
            h2_arrival.push(spread_of(&stamps));
        }
    }
    if h2_errors > 0 {
        println!("engine-h2: {h2_errors} transport error(s)");
    }
    let (_, h2_med, h2_p90, _) = stats(h2_arrival.clone());
    rows.push((
        "engine-h2, single packet (h2c): arrival spread (kernel rx stamps)".to_string(),
        h2_arrival,
    ));

    // Baseline: reqwest, 16 tasks, pre-opened keep-alive connections, released by a barrier.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(DUPLICATES)
        .tcp_nodelay(true)
        .build()?;
    let warm: Vec<_> = (0..DUPLICATES)
        .map(|i| {
            let c = client.clone();
            let u = sink.url.clone();
            tokio::spawn(async move {
                c.post(u)
                    .body(format!("warm-{i}"))
                    .send()
                    .await?
                    .bytes()
                    .await
            })
        })
        .collect();
    for w in warm {
        w.await??;
    }
    sink.take();
    let mut base = Vec::new();
    for b in 0..bursts {
        let key = uuid::Uuid::new_v4().to_string();
        baseline_burst(&client, &sink.url, &key, &format!("base-{b}")).await;
        let stamps = sink.wait_for(DUPLICATES);
        if stamps.len() == DUPLICATES {
            base.push(spread_of(&stamps));
        }
    }

    println!("| client | bursts | min µs | median µs | p90 µs | max µs |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for (name, v) in rows {
        row(&name, v);
    }
    let (_, med, p90, _) = stats(base.clone());
    row("baseline reqwest ×16 tasks: arrival spread", base);
    Ok(SpreadRun {
        engine,
        engine_single,
        engine_h2: (h2_med, h2_p90),
        baseline: (med, p90),
    })
}

fn spread_of(stamps: &[i128]) -> f64 {
    let min = stamps.iter().min().copied().unwrap_or_default();
    let max = stamps.iter().max().copied().unwrap_or_default();
    (max - min) as f64 / 1e3
}

/// 16 tasks, started together by a barrier, each sending one duplicate with reqwest.
/// Returns the 2xx bodies' status and body text.
async fn baseline_burst(
    client: &reqwest::Client,
    url: &url::Url,
    key: &str,
    reference: &str,
) -> Vec<Option<(u16, String)>> {
    let barrier = Arc::new(tokio::sync::Barrier::new(DUPLICATES));
    let body = format!(r#"{{"amountCents":1250,"currency":"EUR","reference":"{reference}"}}"#);
    let tasks: Vec<_> = (0..DUPLICATES)
        .map(|_| {
            let (c, u, b, k, body) = (
                client.clone(),
                url.clone(),
                barrier.clone(),
                key.to_string(),
                body.clone(),
            );
            tokio::spawn(async move {
                b.wait().await;
                let resp = c
                    .post(u)
                    .header("Authorization", "Bearer token-a")
                    .header("Content-Type", "application/json")
                    .header("Idempotency-Key", format!("\"{k}\""))
                    .body(body)
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await
                    .ok()?;
                let status = resp.status().as_u16();
                Some((status, resp.text().await.ok()?))
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.ok().flatten());
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Part 2: detection against the reference server's race fault.

fn build_server() -> anyhow::Result<String> {
    let status = std::process::Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "-p",
            "idem-reference-server",
            "--bin",
            "idem-reference-server",
        ])
        .status()?;
    anyhow::ensure!(status.success(), "building idem-reference-server failed");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    Ok(target
        .join("release/idem-reference-server")
        .to_string_lossy()
        .into_owned())
}

struct Server {
    child: std::process::Child,
    base: url::Url,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(bin: &str, window_us: u64) -> anyhow::Result<Server> {
    let dir = tempfile::tempdir()?;
    let mut child = std::process::Command::new(bin)
        .args(["--listen", "127.0.0.1:0", "--db"])
        .arg(dir.path().join("bench.db"))
        .args([
            "--test-hooks",
            "--fault",
            "race",
            "--race-window-us",
            &window_us.to_string(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let mut out = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let mut seen = String::new();
    let limit = Instant::now() + Duration::from_secs(20);
    let mut byte = [0u8; 1];
    while Instant::now() < limit {
        if out.read(&mut byte)? == 0 {
            break;
        }
        seen.push(byte[0] as char);
        if let Some(line) = seen.lines().find(|l| l.contains("listening on http://")) {
            if seen.ends_with('\n') {
                let addr = line
                    .split("listening on ")
                    .nth(1)
                    .unwrap_or_default()
                    .trim();
                let base = url::Url::parse(addr)?;
                // Keep draining stdout so the server never blocks on a full pipe.
                std::thread::spawn(move || {
                    let mut sink = [0u8; 4096];
                    while matches!(out.read(&mut sink), Ok(n) if n > 0) {}
                });
                return Ok(Server {
                    child,
                    base,
                    _dir: dir,
                });
            }
        }
    }
    let _ = child.kill();
    anyhow::bail!("the reference server did not print its address: {seen:?}")
}

fn ids_of<'a>(bodies: impl Iterator<Item = (u16, &'a [u8])>) -> HashSet<String> {
    bodies
        .filter(|(s, _)| *s == 201)
        .filter_map(|(_, b)| serde_json::from_slice::<serde_json::Value>(b).ok())
        .filter_map(|v| v.get("id").map(|id| id.to_string()))
        .collect()
}

async fn count(client: &reqwest::Client, base: &url::Url) -> anyhow::Result<i64> {
    let body = client
        .get(base.join("/api/payments/count")?)
        .header("Authorization", "Bearer token-a")
        .send()
        .await?
        .bytes()
        .await?;
    let v: serde_json::Value = serde_json::from_slice(&body)?;
    v.get("count")
        .and_then(|c| c.as_i64())
        .ok_or_else(|| anyhow::anyhow!("no count in {v}"))
}

/// One window of part 2 in one run.
struct Detection {
    bursts: usize,
    engine_hits: usize,
    single_hits: usize,
    h2_hits: usize,
    base_hits: usize,
}

/// What one client's bursts of one window caught.
#[derive(Default)]
struct Tally {
    hits: usize,
    transport_errors: usize,
    release_spreads: Vec<f64>,
    modes: std::collections::BTreeSet<String>,
    misses: Vec<String>,
}

impl Tally {
    /// Runs one burst of an engine client with a fresh key and counts whether it caught the race.
    async fn round<F, Fut>(
        &mut self,
        server: &Server,
        client: &reqwest::Client,
        b: usize,
        send: F,
    ) -> anyhow::Result<()>
    where
        F: FnOnce(Vec<SentRequest>) -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<BurstReport>>,
    {
        let url = server.base.join("/api/payments")?;
        let key = uuid::Uuid::new_v4().to_string();
        let reqs: Vec<_> = (0..DUPLICATES)
            .map(|_| payment(&url, &key, &format!("{b}-{key}")))
            .collect();
        let before = count(client, &server.base).await?;
        let report = send(reqs).await?;
        let after = count(client, &server.base).await?;
        self.transport_errors += report
            .responses
            .iter()
            .filter(|r| r.result.is_err())
            .count();
        let ids = ids_of(
            report
                .responses
                .iter()
                .filter_map(|r| r.result.as_ref().ok())
                .map(|r| (r.status, r.body.as_slice())),
        );
        self.modes.insert(report.release.to_string());
        self.release_spreads.push(report.spread_us);
        if ids.len() > 1 || after - before > 1 {
            self.hits += 1;
        } else {
            self.misses.push(format!(
                "burst {b}: release spread {:.0} µs, {}, {} execution(s)",
                report.spread_us,
                statuses(&report),
                after - before
            ));
        }
        Ok(())
    }

    fn print(&self, window_us: u64, name: &str, bursts: usize) {
        let (_, med, _, _) = stats(self.release_spreads.clone());
        println!(
            "| {window_us} µs | {name} | {}/{bursts} ({:.1} %) | released {}, release spread median {med:.1} µs | transport errors {} |",
            self.hits,
            100.0 * self.hits as f64 / bursts as f64,
            self.modes.iter().cloned().collect::<Vec<_>>().join(" or "),
            self.transport_errors
        );
        for m in &self.misses {
            println!("  {name} missed {m}");
        }
    }
}

async fn detect(
    bin: &str,
    window_us: u64,
    bursts: usize,
    stage_segments: usize,
) -> anyhow::Result<Detection> {
    let server = start_server(bin, window_us)?;
    let url = server.base.join("/api/payments")?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(DUPLICATES)
        .tcp_nodelay(true)
        .build()?;
    let opts = BurstOptions {
        stage_segments,
        ..BurstOptions::default()
    };
    let single_opts = BurstOptions {
        release_threads: false.into(),
        ..opts.clone()
    };
    let (mut engine, mut single, mut h2) = (Tally::default(), Tally::default(), Tally::default());
    let (mut base_hits, mut base_errors) = (0usize, 0usize);
    // Pre-open the baseline's connections.
    let _ = baseline_burst(&client, &server.base.join("/healthz")?, "warm", "warm").await;
    let connector = Connector::default();
    let (opts, single_opts, connector) = (&opts, &single_opts, &connector);
    for b in 0..bursts {
        engine
            .round(&server, &client, b, |reqs| async move {
                burst(connector, &reqs, opts).await
            })
            .await?;
        single
            .round(&server, &client, b, |reqs| async move {
                burst(connector, &reqs, single_opts).await
            })
            .await?;
        h2.round(&server, &client, b, |reqs| async move {
            h2burst::burst(connector, &reqs, opts).await
        })
        .await?;

        let key = uuid::Uuid::new_v4().to_string();
        let before = count(&client, &server.base).await?;
        let got = baseline_burst(&client, &url, &key, &format!("base-{window_us}-{b}-{key}")).await;
        let after = count(&client, &server.base).await?;
        base_errors += got.iter().filter(|g| g.is_none()).count();
        let ids = ids_of(got.iter().flatten().map(|(s, b)| (*s, b.as_bytes())));
        if ids.len() > 1 || after - before > 1 {
            base_hits += 1;
        }
    }
    engine.print(window_us, "engine", bursts);
    single.print(window_us, "engine --no-release-threads", bursts);
    h2.print(window_us, "engine-h2", bursts);
    println!(
        "| {window_us} µs | baseline | {base_hits}/{bursts} ({:.1} %) | | transport errors {base_errors} |",
        100.0 * base_hits as f64 / bursts as f64
    );
    Ok(Detection {
        bursts,
        engine_hits: engine.hits,
        single_hits: single.hits,
        h2_hits: h2.hits,
        base_hits,
    })
}

/// "201×1 409×15": the statuses of a burst (transport errors by their kind: "timeout×2").
fn statuses(report: &BurstReport) -> String {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for r in &report.responses {
        let key = match &r.result {
            Ok(resp) => resp.status.to_string(),
            Err(e) => e.kind().name().to_string(),
        };
        *counts.entry(key).or_default() += 1;
    }
    counts
        .iter()
        .map(|(s, n)| format!("{s}×{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}
