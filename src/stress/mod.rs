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
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::check::{self, CheckSpec, Severity};
use crate::config::Config;
use crate::effects::{Meter, Reading};
use crate::http::client::{Client, Renewable};
use crate::http::exchange::{Exchange, Role};
use crate::http::pool::Pool;
use crate::outcome::{decide, Outcome, Stop};
use crate::report::terminal::Progress;
use crate::report::{ProbeReport, RunReport, Summary, ToolInfo, SCHEMA};

mod key;
pub mod segment;
mod stats;

pub use key::KeyOutcome;
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
}

/// The largest `--rate`: far above what one machine sends, so a larger number is a typo.
pub const MAX_RATE: u32 = 1_000_000;

/// A violating key, listed by id.
#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    pub key: String,
    pub reason: String,
}

/// The whole stress result.
#[derive(Debug, Clone, Serialize)]
pub struct StressReport {
    pub schema: &'static str,
    pub tool: ToolInfo,
    pub label: String,
    pub target: String,
    /// Where the key travels and how it is written ("header Idempotency-Key, ietf").
    pub key: String,
    /// How the target was reached: a proxy, `--resolve` pins, `--insecure`.
    pub connection: Vec<String>,
    /// What the API description left out of the request (`stress --openapi`): each `$ref` that
    /// could not be read, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub started_at: String,
    pub duration_ms: f64,
    pub interrupted: bool,
    pub keys: usize,
    pub duplicates: usize,
    pub concurrency: usize,
    /// The `--rate` cap in requests per second, when one was set.
    pub rate: Option<u32>,
    pub keys_completed: usize,
    /// Connections opened (HTTP/1.1 or HTTP/2), each kept alive and reused.
    pub connections_opened: u64,
    pub requests: u64,
    /// Requests answered 401 and sent again with the credential `--auth-cmd` printed next;
    /// the statuses count their second answers. Left out of the JSON when none was.
    #[serde(skip_serializing_if = "is_zero")]
    pub sent_with_new_credential: u64,
    pub requests_per_second: f64,
    pub statuses: std::collections::BTreeMap<String, u64>,
    /// The requests without a response, by why (`timeout`, `closed-before-any-byte`, …: the
    /// exchanges' `error_kind`). Left out of the JSON when every request was answered.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub errors: std::collections::BTreeMap<crate::http::ErrorKind, u64>,
    pub latency: Vec<LatencyRow>,
    pub bursts: stats::BurstRows,
    pub violating_keys: usize,
    pub violations: Vec<Violation>,
    /// The verdict with its checks and the kept exchanges (violations first, then the sample).
    pub result: ProbeReport,
    /// What `idem-check merge` needs of a `--segment` run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment: Option<segment::SegmentRecord>,
}

impl StressReport {
    /// The report of a run of `opts` against `config` that has sent nothing yet: what a run
    /// that could not start reports, and what a finished run fills its counts into.
    fn unsent(
        config: &Config,
        opts: &StressOptions,
        started_at: String,
        result: ProbeReport,
    ) -> StressReport {
        StressReport {
            schema: STRESS_SCHEMA,
            tool: ToolInfo::default(),
            label: config.label.clone(),
            target: config.operation.line(),
            key: config.key_carrier.to_string(),
            connection: config.connector.context(),
            notes: config.notes.clone(),
            started_at,
            duration_ms: 0.0,
            interrupted: false,
            keys: 0,
            duplicates: opts.duplicates,
            concurrency: opts.concurrency,
            rate: opts.rate,
            segment: None,
            keys_completed: 0,
            connections_opened: 0,
            sent_with_new_credential: 0,
            requests: 0,
            requests_per_second: 0.0,
            statuses: Default::default(),
            errors: Default::default(),
            latency: Vec::new(),
            bursts: Default::default(),
            violating_keys: 0,
            violations: Vec::new(),
            result,
        }
    }

    /// The aggregates as the HTML page draws them.
    pub fn html_view(&self) -> crate::report::html::StressView<'_> {
        crate::report::html::StressView {
            keys: self.keys,
            keys_completed: self.keys_completed,
            duplicates: self.duplicates,
            concurrency: self.concurrency,
            requests: self.requests,
            requests_per_second: self.requests_per_second,
            duration_ms: self.duration_ms,
            interrupted: self.interrupted,
            statuses: &self.statuses,
            latency: self.latency.iter().map(LatencyRow::html_view).collect(),
            released: &self.bursts.released,
            spread_us: [
                self.bursts.spread_p50_us,
                self.bursts.spread_p90_us,
                self.bursts.spread_max_us,
            ],
            violating_keys: self.violating_keys,
            violations: self
                .violations
                .iter()
                .map(|v| (v.key.as_str(), v.reason.as_str()))
                .collect(),
        }
    }

    /// The result as a one-probe [`RunReport`], for the JUnit testcase `stress`.
    pub fn as_run_report(&self) -> RunReport {
        let probes = vec![self.result.clone()];
        RunReport {
            schema: SCHEMA,
            tool: ToolInfo::default(),
            label: self.label.clone(),
            reference: false,
            target: self.target.clone(),
            suite: "stress".into(),
            strict: false,
            started_at: self.started_at.clone(),
            duration_ms: self.duration_ms,
            interrupted: self.interrupted,
            context: std::iter::once(format!(
                "{} keys × {} duplicates, {} in flight{}",
                self.keys,
                self.duplicates,
                self.concurrency,
                self.rate
                    .map_or(String::new(), |r| format!(", at most {r} requests/s"))
            ))
            .chain(std::iter::once(format!("key: {}", self.key)))
            .chain(self.connection.iter().cloned())
            .collect(),
            summary: Summary::of(&probes),
            probes,
            replay: None,
        }
    }
}

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
    let load = Load {
        config: config.clone(),
        opts: opts.clone(),
        progress,
        start,
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
    let sent = agg.stats.requests as usize;
    let after_at = SystemTime::now();
    let after = read_counter(
        &meter,
        &client,
        start,
        "count after",
        &mut count_exchanges,
        sent,
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
    let mut result = agg.verdict(&meter, before, after, count_exchanges);
    result.duration_ms = elapsed.as_secs_f64() * 1000.0;
    // A 401 that --auth-cmd could not answer is the credential's failure, not the API's (as
    // in `run`): the keys it refused say nothing of exactly-once. The 401s are left out of the
    // keys' checks, so a FAIL still standing was seen in the answers that came: it stays.
    let auth_failure = config.auth.as_ref().and_then(|a| a.take_failure());
    if let Some(why) = auth_failure.filter(|_| result.outcome != Outcome::Fail) {
        result.outcome = Outcome::Error;
        result.reason = crate::auth::refused_reason(&why);
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

        let mut agg = Aggregate::default();
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
                outcome
            });
            while let Some(done) = tasks.try_join_next() {
                agg.add(done?, &progress);
            }
        }
        while let Some(done) = tasks.join_next().await {
            agg.add(done?, &progress);
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

fn is_zero(n: &u64) -> bool {
    *n == 0
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

/// A counter value with the wall-clock time it was read, for the merge of segments.
fn timed(value: Option<u64>, at: SystemTime) -> Option<segment::TimedReading> {
    let at_ms = at.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_millis() as u64;
    value.map(|value| segment::TimedReading { value, at_ms })
}

/// Everything gathered from finished keys.
#[derive(Default)]
struct Aggregate {
    stats: stats::Stats,
    keys: usize,
    completed: usize,
    /// Keys that got no 2xx but had a request go unanswered: each may have executed once.
    unknown: usize,
    executions: u64,
    violating: usize,
    listed: Vec<Violation>,
    kept: Vec<KeyOutcome>,
    sampled: Vec<KeyOutcome>,
    basis: String,
    /// A `--segment` run: the counter is judged by `idem-check merge`, not here.
    counter_left_to_merge: bool,
    /// The first transport failure of the run, to name when nothing was answered.
    first_failure: Option<String>,
}

impl Aggregate {
    fn add(&mut self, k: KeyOutcome, progress: &Progress) {
        progress.finish_probe();
        for e in &k.exchanges {
            self.stats.add(e);
            if self.first_failure.is_none() {
                self.first_failure = e.error().map(ToString::to_string);
            }
        }
        if let Some((release, spread_us)) = &k.release {
            self.stats.add_burst(release, *spread_us);
        }
        self.keys += 1;
        self.completed += usize::from(k.completed);
        self.unknown +=
            usize::from(!k.completed && k.exchanges.iter().any(|e| e.response().is_none()));
        self.executions += k.executions.count;
        self.basis.clone_from(&k.executions.basis);
        if k.violated() {
            self.violating += 1;
            if self.listed.len() < LISTED_VIOLATIONS {
                let reason = k
                    .checks
                    .iter()
                    .find(|c| !c.passed)
                    .map(crate::outcome::first_line)
                    .unwrap_or_default();
                self.listed.push(Violation {
                    key: k.key.clone(),
                    reason,
                });
            }
            if self.kept.len() < KEPT_VIOLATIONS {
                self.kept.push(k);
            }
        } else if self.sampled.len() < SAMPLE_KEYS {
            self.sampled.push(k);
        }
    }

    /// The run's checks and evidence: the counter check, then the kept keys' checks with their
    /// exchanges renumbered into one list.
    fn verdict(
        &mut self,
        meter: &Meter,
        before: Reading,
        after: Result<Reading, Stop>,
        count_exchanges: Vec<Exchange>,
    ) -> ProbeReport {
        let mut exchanges = Vec::new();
        let mut checks = Vec::new();
        let mut timeline = Vec::new();
        let mut stop = None;
        let renumber =
            |list: Vec<Exchange>, role: &str, exchanges: &mut Vec<Exchange>| -> Vec<usize> {
                let offset = exchanges.len();
                let mut nums = Vec::new();
                for mut e in list {
                    e.n += offset;
                    if !role.is_empty() {
                        e.role.label = format!("{role} {}", e.role.label);
                    }
                    nums.push(e.n);
                    exchanges.push(e);
                }
                nums
            };
        let counts = renumber(count_exchanges, "", &mut exchanges);
        match &after {
            Err(s) => stop = Some(s.clone()),
            Ok(_) if meter.has_counter() && self.counter_left_to_merge => timeline.push(
                "the counter is judged when the segments are merged (idem-check merge): other segments' executions land in this one's window".into(),
            ),
            Ok(a) if meter.has_counter() => match meter.count(&before, a, &[], &[]) {
                Ok(e) => checks.push(check::executions_within(
                    &EFFECTS,
                    &e.basis,
                    (
                        self.completed as u64,
                        (self.completed + self.unknown) as u64,
                    ),
                    e.count,
                    counts,
                )),
                Err(why) => stop = Some(Stop::Inconclusive(why.into())),
            },
            _ => timeline.push(format!(
                "no --count-url: executions were counted per key by {}",
                if self.basis.is_empty() {
                    "ids or bodies"
                } else {
                    &self.basis
                }
            )),
        }
        let kept: Vec<KeyOutcome> = self.kept.drain(..).chain(self.sampled.drain(..)).collect();
        for (i, k) in kept.into_iter().enumerate() {
            let offset = exchanges.len();
            let label = format!("key {}", &k.key[..8]);
            renumber(k.exchanges, &label, &mut exchanges);
            if k.checks.iter().any(|c| !c.passed) || i == 0 {
                for mut c in k.checks {
                    c.exchanges.iter_mut().for_each(|n| *n += offset);
                    c.what = format!("{label}: {}", c.what);
                    checks.push(c);
                }
            }
            timeline.push(format!("{label} = {}", k.key));
        }
        if self.violating > KEPT_VIOLATIONS {
            timeline.push(format!(
                "{} violating keys; the evidence of the first {KEPT_VIOLATIONS} is kept",
                self.violating
            ));
        }
        if self.stats.renewed > 0 {
            timeline.push(format!(
                "{} of {} requests were sent again with a new credential: the API answered 401, and --auth-cmd printed a new one",
                self.stats.renewed, self.stats.requests
            ));
        }
        let requests = self.stats.requests;
        for b in self.stats.bypassed() {
            if b.count == 0 {
                continue;
            }
            timeline.push(format!(
                "{} of {requests} requests were {} and are left out of the per-key checks: {}",
                b.count, b.what, b.why
            ));
            if b.count * 2 > requests && stop.is_none() {
                stop = Some((b.most)(format!(
                    "{} of {requests} requests were {}: {}",
                    b.count, b.what, b.advice
                )));
            }
        }
        let errors = self.stats.errors();
        if !errors.is_empty() {
            timeline.push(format!(
                "requests without a response: {}",
                stats::errors_line(&errors)
            ));
        }
        // Nothing answered is nothing seen: the target is not reachable as given.
        if requests > 0 && self.stats.unanswered() == requests {
            stop = Some(Stop::Error(format!(
                "none of the {requests} requests got a response (first: {}): check the URL, that the target is up, and --timeout",
                self.first_failure.as_deref().unwrap_or("no error was recorded")
            ).into()));
        }
        if self.keys == 0 && stop.is_none() {
            stop = Some(Stop::Error(
                "no key was sent (is --duration too short?)".into(),
            ));
        }
        let verdict = decide(&checks, stop.as_ref(), false);
        let reason = if verdict.outcome == Outcome::Fail && self.violating > 0 {
            format!(
                "{} of {} keys violated exactly-once; first: {}",
                self.violating, self.keys, verdict.reason
            )
        } else {
            verdict.reason
        };
        ProbeReport {
            reason,
            effect_basis: Some(self.basis.clone()),
            ..stress_probe(verdict.outcome, checks, timeline, exchanges)
        }
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

/// Reads the counter once through the run's effects meter, recording the read dated from the
/// run's `start`; `sent` is how many requests had been sent, which bounds a sane delta.
async fn read_counter(
    meter: &Meter,
    client: &Client,
    start: Instant,
    role: &str,
    out: &mut Vec<Exchange>,
    sent: usize,
) -> Result<Reading, Stop> {
    let Some(read) = meter.read(client).await else {
        return Ok(Reading::new(None, sent));
    };
    let unanswered = read.unanswered();
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
        .map(|v| Reading::new(Some(v), sent))
        .map_err(|e| Stop::Error(meter.unreadable(&e, unanswered).into()))
}

/// A stress run that the pre-flight ended: its report, and whether Ctrl-C did.
struct Stopped {
    report: ProbeReport,
    interrupted: bool,
}

/// The progress of a pre-flight run inside `stress`: none is shown.
struct Quiet;

impl crate::runner::Observer for Quiet {
    fn started(&self, _: &str) {}
    fn finished(&self, _: &ProbeReport) {}
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
        &Quiet,
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
    let mut result = agg.verdict(meter, Reading::new(None, 0), Err(stop), exchanges);
    result.outcome = Outcome::Error;
    StressReport::unsent(config, opts, started_at, result)
}

/// A stress run's files: its own JSON (`idem-check.stress/1`), JUnit and Markdown of the
/// one-testcase [`RunReport`] it amounts to, and an HTML page with the load drawn above it;
/// every one with the notes of its operation.
impl crate::report::Reportable for StressReport {
    fn render(
        &self,
        format: crate::report::Format,
        opts: &crate::report::RenderOptions,
    ) -> anyhow::Result<String> {
        use crate::report::Format;
        match format {
            Format::Json => crate::report::json::render_value(self, opts),
            Format::Junit => {
                crate::report::junit::render(&self.as_run_report(), &self.notes, opts, false)
            }
            Format::Markdown => Ok(crate::report::markdown::render(
                &self.as_run_report(),
                &self.notes,
                opts,
            )),
            Format::Html => Ok(crate::report::html::render_stress(
                &self.as_run_report(),
                &self.html_view(),
                &self.notes,
                opts,
            )),
            Format::Terminal => Ok(render_terminal(self, opts)),
        }
    }
}

/// The terminal rendering: the verdict line, throughput, statuses, the latency table, the
/// violating keys, and the evidence block when the run failed.
pub fn render_terminal(r: &StressReport, opts: &crate::report::RenderOptions) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "stress  {}  {} — {}",
        r.result.outcome.as_str(),
        r.label,
        crate::redact::sanitize_line(&r.result.reason)
    );
    let _ = writeln!(
        out,
        "keys:        {} ({} completed) × {} duplicates, at most {} in flight{}{}",
        r.keys,
        r.keys_completed,
        r.duplicates,
        r.concurrency,
        r.rate
            .map_or(String::new(), |rate| format!(", at most {rate} requests/s")),
        if r.interrupted { " (interrupted)" } else { "" }
    );
    let _ = writeln!(out, "key:         {}", r.key);
    if !r.connection.is_empty() {
        let _ = writeln!(out, "connection:  {}", r.connection.join(" · "));
    }
    for note in &r.notes {
        let _ = writeln!(out, "note:        {}", crate::redact::sanitize_line(note));
    }
    let _ = writeln!(
        out,
        "requests:    {} in {:.1} s = {:.0} requests/s{}",
        r.requests,
        r.duration_ms / 1000.0,
        r.requests_per_second,
        match r.connections_opened {
            0 => String::new(),
            1 => ", on 1 kept-alive connection".to_string(),
            n => format!(", on {n} kept-alive connections"),
        }
    );
    let statuses: Vec<String> = r.statuses.iter().map(|(s, n)| format!("{s}×{n}")).collect();
    let _ = writeln!(out, "statuses:    {}", statuses.join(" "));
    if !r.errors.is_empty() {
        let _ = writeln!(out, "errors:      {}", stats::errors_line(&r.errors));
    }
    if r.sent_with_new_credential > 0 {
        let _ = writeln!(
            out,
            "credential:  {} requests answered 401 were sent again with the new credential --auth-cmd printed",
            r.sent_with_new_credential
        );
    }
    let _ = writeln!(
        out,
        "latency ms   {:>8} {:>8} {:>8} {:>8} {:>8}",
        "count", "p50", "p90", "p99", "max"
    );
    for row in &r.latency {
        let _ = writeln!(
            out,
            "  {:<10} {:>8} {:>8.2} {:>8.2} {:>8.2} {:>8.2}",
            row.class, row.count, row.p50_ms, row.p90_ms, row.p99_ms, row.max_ms
        );
    }
    if !r.bursts.released.is_empty() {
        let ways: Vec<String> = r
            .bursts
            .released
            .iter()
            .map(|(how, n)| format!("{n} {how}"))
            .collect();
        let _ = writeln!(
            out,
            "bursts:      released within p50 {:.0} µs, p90 {:.0} µs, max {:.0} µs; {}",
            r.bursts.spread_p50_us,
            r.bursts.spread_p90_us,
            r.bursts.spread_max_us,
            ways.join(", ")
        );
    }
    let _ = writeln!(out, "violating keys: {}", r.violating_keys);
    for v in r.violations.iter().take(10) {
        let _ = writeln!(
            out,
            "  {}  {}",
            v.key,
            crate::redact::sanitize_line(&v.reason)
        );
    }
    if matches!(r.result.outcome, Outcome::Fail | Outcome::Error) && !opts.summary_only {
        out.push('\n');
        out.push_str(&crate::report::evidence::block(&r.result, "stress", opts));
        out.push('\n');
    }
    // The reasons above quote what the server sent, which may echo a secret.
    opts.secrets.redact(&out)
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
