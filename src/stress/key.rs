//! One key of a stress run: a synchronised burst of duplicates, then late retries, judged on its
//! own (at most one execution, every answer the original, a conflict or the replay, no 5xx).

use std::time::{Duration, Instant};

use crate::check::{self, Check, CheckSpec, Severity};
use crate::config::Config;
use crate::effects::{Executions, Meter, Reading};
use crate::http::burst::BurstOptions;
use crate::http::exchange::{Exchange, Role, SentRequest};
use crate::http::h1;
use crate::http::h2burst;
use crate::http::pool::Pool;
use crate::http::raw::{RawResponse, UNAUTHORIZED};
use crate::http::release::{ReleaseMode, Releasers};
use crate::http::throttle;
use crate::http::{HttpError, Request};

/// Bodies kept per response in a stress run: enough for ids and evidence, small enough that many
/// requests in flight stay cheap.
pub const STRESS_MAX_BODY: usize = 64 * 1024;

pub(super) const ONE_EXECUTION: CheckSpec = CheckSpec {
    id: "one-execution",
    what: "each key executes at most once",
    severity: Severity::Critical,
    expect: Vec::new(),
};

const NO_5XX: CheckSpec = CheckSpec {
    id: "no-5xx",
    what: "no duplicate causes a server error",
    severity: Severity::Required,
    expect: Vec::new(),
};

/// How one key went.
pub struct KeyOutcome {
    pub key: String,
    pub exchanges: Vec<Exchange>,
    pub executions: Executions,
    /// Whether any request got a 2xx (the key completed).
    pub completed: bool,
    pub checks: Vec<Check>,
    /// How the key's burst was released and its release spread in µs; `None` when the burst
    /// could not be staged.
    pub release: Option<(ReleaseMode, f64)>,
}

impl KeyOutcome {
    /// True when a check of this key failed.
    pub fn violated(&self) -> bool {
        self.checks.iter().any(|c| !c.passed)
    }
}

/// Sends `burst_size` duplicates released together, then `late` retries one after another,
/// all with one fresh key and a payload unique to the key; `answered` runs as each duplicate of
/// the burst gets its answer, and `burst_answered` once all have (or failed): the late retries
/// follow only when it returns true (not once the run is interrupted). With `--replica`, duplicate `i` goes to the target or replica `i mod n`, so a store
/// that is not shared shows as extra executions.
///
/// Bursts are staged on kept-alive connections from `pool` (HTTP/1.1 ones, or an HTTP/2 one
/// per burst: see [`Pool::burst_for_target`]), and the late retries go on them too, over the
/// protocol the bursts to their origin use.
pub async fn exercise(
    config: &Config,
    pool: &Pool,
    unique: &str,
    burst_size: usize,
    late: usize,
    answered: &(dyn Fn() + Sync),
    burst_answered: impl FnOnce() -> bool,
) -> KeyOutcome {
    let key = uuid::Uuid::new_v4().to_string();
    let op = &config.operation;
    let mut op_headers = op.headers.clone();
    if let Some(credential) = &config.auth {
        credential.apply(&mut op_headers);
    }
    let keyed = config.key_carrier.place.put(
        Request {
            method: op.method.clone(),
            url: op.url.clone(),
            headers: op_headers,
            body: op.body.render(unique, 0),
        },
        config.suite.key_syntax.encode(&key).as_bytes(),
    );
    let (headers, body) = (keyed.headers, keyed.body);
    let sent: Vec<SentRequest> = std::iter::once(&op.url)
        .chain(&config.replicas)
        .map(|url| h1::prepare(url, &op.method, headers.clone(), body.clone()))
        .collect();
    let nth = |i: usize| sent[i % sent.len()].clone();
    // A request goes over HTTP/2 wherever the burst to its origin does, late retries included:
    // a server asked for with --http2 may speak nothing else.
    let over_http1: Vec<bool> = std::iter::once(&op.url)
        .chain(&config.replicas)
        .map(|url| h2burst::bursts_over_http1(&config.connector, url, config.http2))
        .collect();
    // An HTTP/1.1 burst has a connection per request, so it can span origins; an HTTP/2 burst
    // is one connection to one origin, so there only the late retries are spread.
    let spread_burst = op.url.scheme() == "http" && !config.http2;
    let burst: Vec<SentRequest> = (0..burst_size)
        .map(|i| if spread_burst { nth(i) } else { nth(0) })
        .collect();
    let t0 = Instant::now();
    let opts = BurstOptions {
        timeout: config.timeout,
        max_body: STRESS_MAX_BODY,
        // Many bursts are in flight at once, and handing each to the release threads cost
        // more of the checker's CPU than the rest of the burst (BENCHMARKS.md): a stress burst
        // is released from the load thread, its final bytes still written back to back.
        release_threads: Releasers::Caller("stress releases from its load thread"),
        // A burst waits for its prefixes to reach a remote server, but not a timer tick for a
        // local one's threads to go idle: under load they never are.
        settle_floor: Duration::ZERO,
        ..BurstOptions::default()
    };
    let mut raws: Vec<(Role, SentRequest, RawResponse)> = Vec::with_capacity(burst_size + late);
    let mut release = None;
    let burst_report = pool
        .burst_for_target(&burst, &opts, config.http2, answered)
        .await;
    match burst_report {
        Ok(report) => {
            // A burst whose connections all failed released nothing: no release to count.
            if report.responses.iter().any(|r| r.released.is_some()) {
                release = Some((report.release, report.spread_us));
            }
            raws.extend(
                report
                    .requests
                    .into_iter()
                    .zip(report.responses)
                    .enumerate()
                    .map(|(i, (s, r))| (Role::nth("burst", i + 1, burst_size), s, r)),
            )
        }
        Err(e) => raws.push((
            "burst".into(),
            nth(0),
            RawResponse {
                started: t0,
                released: None,
                finished: Instant::now(),
                result: Err(HttpError::Unsendable(format!("{e:#}"))),
                resent: None,
            },
        )),
    }
    let late = if burst_answered() { late } else { 0 };
    // A burst request refused for an expired --auth-cmd credential goes once more on its own.
    if config.auth.is_some() {
        let mut renewed_raws = Vec::with_capacity(burst_size + late);
        for (i, (role, request, response)) in raws.into_iter().enumerate() {
            let origin = if spread_burst { i % sent.len() } else { 0 };
            let (request, response) =
                renewed(config, pool, over_http1[origin], &opts, request, response).await;
            renewed_raws.push((role, request, response));
        }
        raws = renewed_raws;
    }
    for i in 1..=late {
        let target = (burst_size + i - 1) % sent.len();
        let mut request = sent[target].clone();
        if let Some(credential) = &config.auth {
            credential.apply(&mut request.headers);
        }
        let (sent_as, r) = send_alone(config, pool, over_http1[target], &request, &opts).await;
        let (sent_as, r) = renewed(config, pool, over_http1[target], &opts, sent_as, r).await;
        raws.push((Role::nth("late retry", i, late), sent_as, r));
    }
    let exchanges = number(t0, raws);
    KeyOutcome {
        release,
        ..judge(config, key, exchanges)
    }
}

/// `request` alone: on a kept HTTP/1.1 connection, or over HTTP/2 where bursts to its origin
/// go (see [`alone_over_http2`]).
async fn send_alone(
    config: &Config,
    pool: &Pool,
    over_http1: bool,
    request: &SentRequest,
    opts: &BurstOptions,
) -> (SentRequest, RawResponse) {
    if over_http1 {
        let r = pool.send(request, config.timeout, STRESS_MAX_BODY).await;
        (request.clone(), r)
    } else {
        alone_over_http2(config, pool, request, opts).await
    }
}

/// The exchange of `request`, which got `response`: when that is a 401 to a request carrying
/// `--auth-cmd`'s credential and a newer one is current (renewed now, or by another key's 401
/// meanwhile), `request` sent once more, alone, with it, as one exchange that says so (as
/// [`crate::http::client::Client::send`] does); else as it was. A token that expires during a
/// long run is the credential's business, not the API's: no key fails for it.
async fn renewed(
    config: &Config,
    pool: &Pool,
    over_http1: bool,
    opts: &BurstOptions,
    request: SentRequest,
    response: RawResponse,
) -> (SentRequest, RawResponse) {
    let refused = response
        .result
        .as_ref()
        .is_ok_and(|r| r.status == UNAUTHORIZED);
    let Some(credential) = config.auth.as_ref().filter(|_| refused) else {
        return (request, response);
    };
    if !credential.renew_past(&request.headers).await {
        return (request, response);
    }
    let mut again = request;
    credential.apply(&mut again.headers);
    let (sent, answer) = send_alone(config, pool, over_http1, &again, opts).await;
    (sent, answer.sent_with_new_credential(response.started))
}

/// One request over HTTP/2, as a burst of one on a kept HTTP/2 connection, with the fields as
/// HTTP/2 sent them; an `https` server that picks HTTP/1.1 gets it over HTTP/1.1 instead.
async fn alone_over_http2(
    config: &Config,
    pool: &Pool,
    request: &SentRequest,
    opts: &BurstOptions,
) -> (SentRequest, RawResponse) {
    let started = Instant::now();
    let report = pool
        .burst_for_target(std::slice::from_ref(request), opts, config.http2, &|| {})
        .await;
    match report {
        Ok(report) => match (
            report.requests.into_iter().next(),
            report.responses.into_iter().next(),
        ) {
            (Some(sent), Some(response)) => (sent, response),
            _ => (
                request.clone(),
                RawResponse::ended_now(
                    started,
                    Err(HttpError::Unsendable("the request was not sent".into())),
                ),
            ),
        },
        Err(e) => (
            request.clone(),
            RawResponse::ended_now(started, Err(HttpError::Unsendable(format!("{e:#}")))),
        ),
    }
}

fn number(t0: Instant, raws: Vec<(Role, SentRequest, RawResponse)>) -> Vec<Exchange> {
    let ms = |t: Instant| t.saturating_duration_since(t0).as_secs_f64() * 1000.0;
    raws.into_iter()
        .enumerate()
        .map(|(i, (role, request, r))| Exchange {
            n: i + 1,
            // A request sent again after the server closed its idle connection under it is one
            // exchange, counted once; its role says why it went out twice.
            role: Role {
                resent: r.resent.as_ref().map(|r| r.kind),
                ..role
            },
            start_ms: ms(r.started),
            duration_ms: r
                .finished
                .saturating_duration_since(r.started)
                .as_secs_f64()
                * 1000.0,
            release_us: r.released.map(|t| ms(t) * 1000.0),
            request,
            outcome: r.result,
        })
        .collect()
}

/// The checks of one key, from its exchanges alone (the counter is judged for the whole run).
fn judge(config: &Config, key: String, exchanges: Vec<Exchange>) -> KeyOutcome {
    let refs: Vec<&Exchange> = exchanges.iter().collect();
    // Per key, executions are told apart by the responses; the counter is judged for the run.
    let none = Reading::new(None, 0);
    let executions = Meter::configured(
        None,
        config.id_pointer.as_deref(),
        Vec::new(),
        config.timeout,
    )
    .count(&none, &none, &[], &refs)
    .unwrap_or_else(|why| Executions {
        count: 0,
        basis: why,
        exchanges: Vec::new(),
    });
    let completed = exchanges
        .iter()
        .any(|e| e.response().is_some_and(|r| r.is_success()));
    let conflict = config
        .suite
        .check("concurrent-duplicates", "conflict-or-replay")
        .map(|s| s.expect.clone())
        .unwrap_or_else(|| vec![409]);
    let mut allowed = conflict;
    if let Some(s) = exchanges
        .iter()
        .filter_map(Exchange::status)
        .find(|s| (200..300).contains(s))
    {
        allowed.push(s);
    }
    // A rate limiter's 429 is not the idempotency layer's answer (see [`throttle`]), nor is a
    // 401 that refused the credential before the layer saw the request.
    let answered: Vec<&Exchange> = refs
        .iter()
        .copied()
        .filter(|e| e.response().is_some() && !throttle::throttled(e) && !refused(e))
        .collect();
    let answers = CheckSpec {
        id: "conflict-or-replay",
        what: "every answer is the original, a conflict or the replay",
        severity: Severity::Required,
        expect: allowed.clone(),
    };
    let checks = vec![
        check::executions_at_most(
            &ONE_EXECUTION,
            &executions.basis,
            1,
            executions.count,
            executions.exchanges.clone(),
        ),
        check::statuses_in(&answers, &answered, &allowed),
        check::no_server_error(&NO_5XX, &answered),
    ];
    KeyOutcome {
        key,
        exchanges,
        executions,
        completed,
        checks,
        release: None,
    }
}

/// Whether the API refused the exchange's credential (401): what `--auth-cmd` could not renew,
/// or a static credential the API does not accept.
pub fn refused(e: &Exchange) -> bool {
    e.status() == Some(UNAUTHORIZED)
}

/// The latency class of an exchange, for the percentile table.
pub fn class(e: &Exchange) -> &'static str {
    match e.status() {
        None => "no response",
        Some(s) if (200..300).contains(&s) => "2xx",
        Some(409) => "409",
        Some(throttle::TOO_MANY_REQUESTS) => "429",
        Some(s) if s >= 500 => "5xx",
        Some(_) => "other",
    }
}

/// The exchange's latency: from its release (bursts) or first byte to its end.
pub fn latency(e: &Exchange) -> Duration {
    let from = e.release_us.map_or(e.start_ms, |us| us / 1000.0);
    Duration::from_secs_f64(((e.end_ms() - from).max(0.0)) / 1000.0)
}
