//! `idem-check stress`: does exactly-once still hold with many keys and many retries at once?
//!
//! K fresh keys run with at most C requests in flight, bounded by K and by a duration, and with
//! `--rate`, by a number of requests per second. Each key is sent D times: a synchronised burst
//! of duplicates (the race engine) followed by late retries once the burst has been answered.
//! Every key is judged on its own (at most one execution, every answer the original, a conflict
//! or the replay, no 5xx); the effect counter, when given, is read before and after the whole
//! run and must have grown by exactly the number of keys that completed. Memory stays bounded:
//! requests only feed status counts and latency histograms; exchanges are kept for the first
//! violating keys and a small sample.
//!
//! Many keys are in flight at once, and requests go on kept-alive connections, HTTP/1.1 or
//! HTTP/2 ([`crate::http::pool`]): a key takes one permit per duplicate of its burst, gives each
//! back as that duplicate's answer arrives (over HTTP/1.1; an HTTP/2 burst's when all are in),
//! all but one, and sends its late retries one after another on the last, so the C requests in
//! flight stay busy while each key's own sequence is unchanged.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::check::{CheckSpec, Severity};
use crate::config::Config;
use crate::effects::{CounterRead, Meter, Reading};
use crate::http::client::{Client, Renewable};
use crate::http::exchange::{Exchange, Role};
use crate::http::pool::Pool;
use crate::outcome::{Outcome, Stop};
use crate::quiet::{self, Settling};
use crate::report::terminal::Progress;
use crate::report::ProbeReport;

mod aggregate;
use aggregate::{timed, Aggregate};
mod key;
mod provider;
mod report;
pub mod segment;
mod stats;

pub use key::KeyOutcome;
pub use report::{render_terminal, ProviderTally, StressReport, Violation};
pub use stats::LatencyRow;

/// The stress report's schema id (same family as the run report).
pub const STRESS_SCHEMA: &str = "idem-check.stress/1";

/// Violating keys whose exchanges are kept as evidence; the rest are only counted and listed.
const KEPT_VIOLATIONS: usize = 5;
/// Keys listed by id in the report.
const LISTED_VIOLATIONS: usize = 100;
/// Passing keys whose exchanges are kept as a sample of normal behaviour.
const SAMPLE_KEYS: usize = 1;

/// What to send.
#[derive(Debug, Clone)]
pub struct StressOptions {
    pub keys: usize,
    pub duplicates: usize,
    pub concurrency: usize,
    pub duration: Duration,
    /// At most this many requests per second, on average over the run: keys start
    /// `duplicates / rate` seconds apart (each key's burst still lands at once).
    pub rate: Option<u32>,
    /// `--segment I/N --run-id ID`: only this segment's keys, the counter left to the merge.
    pub segment: Option<segment::Segment>,
    /// `--provider-lost-answers`: the fake provider commits each key's first call and loses
    /// its answer.
    pub provider_lost_answers: bool,
}

/// The largest `--rate`: far above what one machine sends, so a larger number is a typo.
pub const MAX_RATE: u32 = 1_000_000;

/// The counter's growth: one execution per completed key, plus at most one for each key that
/// did not complete but had a request go unanswered (it may have executed unseen). More is a
/// duplicated effect whatever went unanswered; fewer is a lost one.
const EFFECTS: CheckSpec = CheckSpec {
    id: "effects",
    what: "the effect counter grew by one per completed key (or per key left unanswered)",
    severity: Severity::Critical,
    expect: Vec::new(),
};

/// Runs the stress test. `interrupt` resolves on Ctrl-C: no new key starts, keys in flight
/// finish, and the report covers what ran.
pub async fn run(
    config: Arc<Config>,
    opts: &StressOptions,
    progress: Arc<Progress>,
    interrupt: impl Future<Output = ()>,
) -> Result<StressReport> {
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    tokio::pin!(interrupt);
    // `run`'s pre-flight first: a target that is not the API (a web page, a login redirect,
    // refused credentials, nothing listening) is reported as such before any load is sent,
    // never as keys that violated exactly-once. A segment skips it: its executions would land
    // in the other segments' counter windows, which `merge` judges together.
    if opts.segment.is_none() {
        if let Some(stopped) = preflight(&config, &mut interrupt).await? {
            return Ok(StressReport {
                interrupted: stopped.interrupted,
                ..StressReport::unsent(&config, opts, started_at, stopped.report)
            });
        }
    }
    let start = Instant::now();
    let client = Client::new(
        config.connector.clone(),
        config.timeout,
        key::STRESS_MAX_BODY,
    )?
    .with_credential(config.auth.clone().map(|a| a as Arc<dyn Renewable>));
    let meter = Meter::configured(
        config.counter.clone(),
        config.id_pointer.as_deref(),
        config.operation.headers.clone(),
        config.timeout,
    );
    let mut count_exchanges = Vec::new();
    let before_at = SystemTime::now();
    let before = read_counter(
        &meter,
        &client,
        start,
        "count before",
        &mut count_exchanges,
        0,
        None,
    )
    .await;
    let before = match before {
        Ok(reading) => reading,
        Err(stop) => {
            return Ok(failed_to_start(
                &config,
                &meter,
                opts,
                started_at,
                stop,
                count_exchanges,
            ))
        }
    };

    // The load runs on a thread of its own with a single-threaded runtime: every key's
    // requests, its judging and the aggregation stay on that one thread, so no request costs a
    // wake-up of another thread (on a small machine those hops were most of the checker's CPU;
    // BENCHMARKS.md). The caller's runtime only waits, and passes on Ctrl-C.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let (done, mut finished) = tokio::sync::oneshot::channel();
    let provider = provider::ProviderLoad::of(&config, opts.provider_lost_answers).map(Arc::new);
    let load = Load {
        config: config.clone(),
        opts: opts.clone(),
        progress,
        start,
        provider: provider.clone(),
    };
    std::thread::Builder::new()
        .name("stress-load".into())
        .spawn(move || {
            let result = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(anyhow::Error::from)
                .and_then(|runtime| runtime.block_on(load.run(stopped)));
            // The caller waits for this; should it have gone, nobody needs the result.
            let _ = done.send(result);
        })?;
    let loaded = tokio::select! {
        biased;
        r = &mut finished => r,
        _ = &mut interrupt => {
            let _ = stop.send(true);
            finished.await
        }
    };
    let Loaded {
        mut agg,
        interrupted,
        connections_opened,
        duplicates,
        unreachable,
    } = loaded.map_err(|_| anyhow::anyhow!("the stress load thread ended without a result"))??;
    if let Some(why) = unreachable {
        let stop = Stop::Error(why.into());
        return Ok(failed_to_start(
            &config,
            &meter,
            opts,
            started_at,
            stop,
            count_exchanges,
        ));
    }
    let elapsed = start.elapsed();
    // The provider's ledger is counted once its calls settled, as the counter is read after.
    let provider_verdict = match &provider {
        Some(p) => {
            let bounds = (config.quiet_window, config.timeout * 2);
            Some(p.judge(&agg.provider_keys, bounds, start).await)
        }
        None => None,
    };
    let sent = agg.stats.requests as usize;
    let after_at = SystemTime::now();
    let after = read_counter(
        &meter,
        &client,
        start,
        "count after",
        &mut count_exchanges,
        sent,
        // An execution that lands after its answer (a worker, a late retry's original) is
        // still this run's: the count after waits until the counter is quiet.
        Some(Settling {
            quiet: config.quiet_window,
            timeout: config.timeout,
        }),
    )
    .await;

    let segment = opts.segment.as_ref().map(|s| segment::SegmentRecord {
        run_id: s.run_id.clone(),
        index: s.index,
        count: s.count,
        keys_total: opts.keys,
        duplicates,
        keys_sent: agg.keys,
        keys_completed: agg.completed,
        violating_keys: agg.violating,
        counter_before: timed(before.value(), before_at),
        counter_after: after.as_ref().ok().and_then(|a| timed(a.value(), after_at)),
    });
    // A segment's window holds the other segments' executions too: the merge judges the counter.
    agg.counter_left_to_merge = segment.is_some();
    let provider_tally = provider_verdict.as_ref().map(|p| p.tally.clone());
    let mut result = agg.verdict(&meter, before, after, count_exchanges, provider_verdict);
    result.duration_ms = elapsed.as_secs_f64() * 1000.0;
    // A 401 that --auth-cmd could not answer is the credential's failure, not the API's (as
    // in `run`): the keys it refused say nothing of exactly-once. The 401s are left out of the
    // keys' checks, so a FAIL still standing was seen in the answers that came: it stays.
    let auth_failure = config.auth.as_ref().and_then(|a| a.take_failure());
    if let Some(why) = auth_failure.filter(|_| result.outcome != Outcome::Fail) {
        result.outcome = Outcome::Error;
        result.reason = crate::auth_cmd::refused_reason(&why);
    }
    Ok(StressReport {
        duration_ms: elapsed.as_secs_f64() * 1000.0,
        interrupted,
        keys: agg.keys,
        duplicates,
        keys_completed: agg.completed,
        connections_opened,
        requests: agg.stats.requests,
        sent_with_new_credential: agg.stats.renewed,
        requests_per_second: agg.stats.requests as f64 / elapsed.as_secs_f64().max(1e-9),
        statuses: agg.stats.statuses(),
        errors: agg.stats.errors(),
        latency: agg.stats.latency_rows(),
        bursts: agg.stats.bursts(),
        violating_keys: agg.violating,
        violations: agg.listed,
        segment,
        provider: provider_tally,
        provider_line: provider.as_ref().map(|p| p.line()),
        ..StressReport::unsent(&config, opts, started_at, result)
    })
}

/// What the load thread needs: the run's configuration and options, where finished keys are
/// shown, and when the run started (its deadline and rate are counted from there).
struct Load {
    config: Arc<Config>,
    opts: StressOptions,
    progress: Arc<Progress>,
    start: Instant,
    /// The fake provider each key's token is armed at, when the run has one.
    provider: Option<Arc<provider::ProviderLoad>>,
}

/// What the load thread hands back.
struct Loaded {
    agg: Aggregate,
    interrupted: bool,
    connections_opened: u64,
    duplicates: usize,
    /// Why no key was sent: an origin could not be connected to.
    unreachable: Option<String>,
}

impl Load {
    /// Sends every key (until `--keys`, `--duration` or `stop`) and gathers their outcomes.
    async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) -> Result<Loaded> {
        let Load {
            config,
            opts,
            progress,
            start,
            provider,
        } = self;
        let duplicates = opts.duplicates.max(1);
        let late = if duplicates >= 2 {
            (duplicates / 4).max(1)
        } else {
            0
        };
        let burst_size = (duplicates - late).clamp(1, opts.concurrency.max(1));
        let permits = Arc::new(Semaphore::new(opts.concurrency.max(burst_size)));
        let pool = Arc::new(Pool::new(
            config.connector.clone(),
            opts.concurrency.max(burst_size),
        ));
        // Every origin is connected to once before any key: a replica that cannot be reached
        // would otherwise leave every key's spread unjudged while the target's answers PASS.
        let warm = async {
            let target = std::iter::once(("the target", &config.operation.url));
            for (what, url) in target.chain(config.replicas.iter().map(|r| ("--replica", r))) {
                if let Err(why) = pool.warm(url, config.timeout, config.http2).await {
                    return Some(format!("{what} {url} could not be reached: {why}"));
                }
            }
            None
        };
        // A Ctrl-C while a slow target is connected to ends the run here: the loop below sees
        // it before any key.
        let unreachable = tokio::select! {
            biased;
            _ = stop.wait_for(|stop| *stop) => None,
            unreachable = warm => unreachable,
        };
        if unreachable.is_some() {
            return Ok(Loaded {
                agg: Aggregate::default(),
                interrupted: false,
                connections_opened: pool.opened(),
                duplicates,
                unreachable,
            });
        }
        let random_id = uuid::Uuid::new_v4().simple().to_string();
        let run_id = opts
            .segment
            .as_ref()
            .map_or(&random_id[..8], |s| s.run_id.as_str());
        let deadline = start + opts.duration;
        // With --rate, key i starts no earlier than i × (duplicates / rate) seconds into the run.
        let spacing = opts
            .rate
            .map(|rate| Duration::from_secs_f64(duplicates as f64 / f64::from(rate.max(1))));

        let mut agg = Aggregate {
            track_provider: provider.is_some(),
            ..Aggregate::default()
        };
        let mut tasks = JoinSet::new();
        let mut interrupted = false;
        let owned = (0..opts.keys).filter(|idx| opts.segment.as_ref().is_none_or(|s| s.owns(*idx)));
        for (position, idx) in owned.enumerate() {
            let due = spacing.map_or(start, |s| start + s.mul_f64(position as f64));
            if Instant::now().max(due) >= deadline {
                break;
            }
            let permit = tokio::select! {
                biased;
                _ = stop.wait_for(|stop| *stop) => { interrupted = true; break; }
                p = async {
                    tokio::time::sleep_until(due.into()).await;
                    permits.clone().acquire_many_owned(burst_size as u32).await
                } => p?,
            };
            let config = config.clone();
            let pool = pool.clone();
            let unique = format!("idem-check-stress-{run_id}-{idx}");
            if let Some(p) = &provider {
                p.arm(&unique);
            }
            let stopped = stop.clone();
            tasks.spawn(async move {
                let share = Share(Mutex::new(permit));
                // After Ctrl-C a key sends nothing more: its burst's answers are awaited, so
                // every request sent is settled before the counter is read, but no late retry
                // goes out.
                let go_on = || {
                    share.give_back(burst_size);
                    !*stopped.borrow()
                };
                let outcome = key::exercise(
                    &config,
                    &pool,
                    &unique,
                    burst_size,
                    late,
                    &|| share.give_back(1),
                    go_on,
                )
                .await;
                drop(share);
                (unique, outcome)
            });
            while let Some(done) = tasks.try_join_next() {
                let (unique, outcome) = done?;
                agg.add_keyed(unique, outcome, &progress);
            }
        }
        while let Some(done) = tasks.join_next().await {
            let (unique, outcome) = done?;
            agg.add_keyed(unique, outcome, &progress);
        }
        // A Ctrl-C after the last key started still cut keys short of their late retries.
        interrupted |= *stop.borrow();
        Ok(Loaded {
            agg,
            interrupted,
            connections_opened: pool.opened(),
            duplicates,
            unreachable: None,
        })
    }
}

/// A key's share of the requests in flight: a permit per duplicate of its burst. Each is given
/// back as its own answer arrives (a burst's conflicts are answered long before its original
/// execution is stored), down to the one its late retries go on, one at a time.
struct Share(Mutex<OwnedSemaphorePermit>);

impl Share {
    /// Gives back up to `n` permits, keeping one for the late retries.
    fn give_back(&self, n: usize) {
        let mut permit = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let spare = n.min(permit.num_permits().saturating_sub(1));
        drop(permit.split(spare));
    }
}

/// The stress run as one probe of a report: what it sends and requires, with `outcome` and its
/// evidence.
fn stress_probe(
    outcome: Outcome,
    checks: Vec<crate::check::Check>,
    timeline: Vec<String>,
    exchanges: Vec<Exchange>,
) -> ProbeReport {
    ProbeReport {
        id: "stress",
        group: "load",
        section: "draft-07 §2.6",
        stimulus: "Sends many fresh keys, each as a synchronised burst of duplicates followed by late retries, with many requests in flight",
        requirement: "Under load every key still executes exactly once, and every answer is the original, a conflict or the replay",
        outcome,
        reason: String::new(),
        reason_cites: Vec::new(),
        follows_from: None,
        effect_basis: None,
        duration_ms: 0.0,
        checks,
        timeline,
        exchanges,
    }
}

/// Reads the counter through the run's effects meter, once, or with `settling` once it is
/// quiet ([`quiet::until_quiet`], its bound and its ERROR when it never settles), recording the
/// read dated from the run's `start`; `sent` is how many requests had been sent, which bounds a
/// sane delta.
async fn read_counter(
    meter: &Meter,
    client: &Client,
    start: Instant,
    role: &str,
    out: &mut Vec<Exchange>,
    sent: usize,
    settling: Option<Settling>,
) -> Result<Reading, Stop> {
    let read = match settling {
        Some(s) if meter.has_counter() => match quiet::until_quiet(meter, client, s, None).await {
            Ok(settled) => Some(settled.read),
            Err(unsettled) => {
                // The read is evidence; why it failed is the stop's reason already.
                if let Some(read) = unsettled.last {
                    let _ = record_read(read, start, role, out);
                }
                return Err(Stop::Error(unsettled.why.to_string().into()));
            }
        },
        _ => meter.read(client).await,
    };
    let Some(read) = read else {
        return Ok(Reading::new(None, sent));
    };
    let unanswered = read.unanswered();
    let value = record_read(read, start, role, out);
    value
        .map(|v| Reading::new(Some(v), sent))
        .map_err(|e| Stop::Error(meter.unreadable(&e, unanswered).into()))
}

/// Records a counter read's exchange (a `--count-url` GET) dated from `start`; its value.
fn record_read(
    read: CounterRead,
    start: Instant,
    role: &str,
    out: &mut Vec<Exchange>,
) -> Result<u64, String> {
    if let Some((request, r)) = read.exchange {
        out.push(Exchange {
            n: out.len() + 1,
            role: Role {
                reads_counter: true,
                ..Role::new(role)
            },
            start_ms: r.started.saturating_duration_since(start).as_secs_f64() * 1000.0,
            duration_ms: r
                .finished
                .saturating_duration_since(r.started)
                .as_secs_f64()
                * 1000.0,
            release_us: None,
            request,
            outcome: r.result.clone(),
        });
    }
    read.value
}

/// A stress run that the pre-flight ended: its report, and whether Ctrl-C did.
struct Stopped {
    report: ProbeReport,
    interrupted: bool,
}

/// Runs `run`'s pre-flight probe (`first-request`) on its own: `None` unless it FAILed or
/// ERRORed; else the stress run's report, which is the pre-flight's verdict, checks and
/// exchanges (a FAIL stays a FAIL: one request executing twice is the API's), with its reason.
async fn preflight(
    config: &Arc<Config>,
    interrupt: impl Future<Output = ()>,
) -> Result<Option<Stopped>> {
    let run = crate::runner::run(
        config.clone(),
        vec![crate::probes::first_request::PROBE],
        &crate::runner::each::Quiet,
        interrupt,
    )
    .await?;
    let Some(probe) = run.probes.into_iter().next() else {
        return Ok(None);
    };
    // As in `run`, only a FAIL or an ERROR stops here: an INCONCLUSIVE pre-flight (no effect
    // basis given) leaves the keys to be judged by their responses.
    if !matches!(probe.outcome, Outcome::Fail | Outcome::Error) {
        return Ok(None);
    }
    let report = ProbeReport {
        reason: format!(
            "not run: the pre-flight first-request did not pass: {}",
            probe.reason
        ),
        reason_cites: probe.reason_cites,
        effect_basis: probe.effect_basis,
        ..stress_probe(probe.outcome, probe.checks, probe.timeline, probe.exchanges)
    };
    Ok(Some(Stopped {
        report,
        interrupted: run.interrupted,
    }))
}

fn failed_to_start(
    config: &Config,
    meter: &Meter,
    opts: &StressOptions,
    started_at: String,
    stop: Stop,
    exchanges: Vec<Exchange>,
) -> StressReport {
    let mut agg = Aggregate::default();
    let mut result = agg.verdict(meter, Reading::new(None, 0), Err(stop), exchanges, None);
    result.outcome = Outcome::Error;
    StressReport::unsent(config, opts, started_at, result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_key_gives_back_its_burst_permits_one_by_one_but_keeps_the_last() {
        let permits = Arc::new(Semaphore::new(8));
        let share = Share(Mutex::new(
            permits.clone().acquire_many_owned(6).await.unwrap(),
        ));
        for answered in 1..=5 {
            share.give_back(1);
            assert_eq!(permits.available_permits(), 2 + answered);
        }
        // The sixth answer, and the burst's end, leave the late retries their permit.
        share.give_back(1);
        share.give_back(6);
        assert_eq!(permits.available_permits(), 7);
        drop(share);
        assert_eq!(permits.available_permits(), 8);
    }
}
