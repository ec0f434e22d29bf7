//! What a probe works with: the validated config, a recording client, its check specs, and the
//! exchanges and checks it has gathered so far.

use std::sync::Arc;
use std::time::Instant;

use crate::check::{self, Check, CheckSpec, Severity};
use crate::config::{Config, HOLD_NAME};
use crate::effects::{Executions, Meter, Reading};
use crate::http::client::Client;
use crate::http::exchange::{Exchange, SentRequest};
use crate::http::release::ReleaseMode;
use crate::http::{burst, h2burst, raw, throttle, Request};
use crate::keys::{self, KeySyntax};
use crate::outcome::Stop;
use crate::probes::{CheckDecl, Precondition, ProbeMeta};

/// The most duplicate waves [`ProbeCtx::held_with_waves`] sends while one original is held.
pub const MAX_WAVES: usize = 40;

/// How long [`ProbeCtx::held_with_waves`] lets the held original travel before the first wave.
pub const HEAD_START: std::time::Duration = std::time::Duration::from_millis(50);

/// How many waves must be answered while a releasable hold is in flight before it is
/// released: two, so a refusal is followed by another duplicate (loser-does-not-unlock).
pub const RELEASE_AFTER: usize = 2;

/// The pause between waves while a releasable hold is in flight.
const RELEASED_WAVE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(5);

/// How long past the estimated end of a hold its request is given before the basis is watched.
const SETTLE_MARGIN: std::time::Duration = std::time::Duration::from_millis(50);

/// Reads the counter (unrecorded) until it has not changed for `quiet`; `Ok(None)` when it was
/// still changing at `bound`.
async fn watch_quiet(
    meter: &Meter,
    client: &Client,
    quiet: std::time::Duration,
    bound: Instant,
) -> Result<Option<u64>, String> {
    let poll = (quiet / 5).max(std::time::Duration::from_millis(5));
    let mut last: Option<(u64, Instant)> = None;
    loop {
        let Some(read) = meter.read(client).await else {
            return Ok(None);
        };
        let v = read.value?;
        let now = Instant::now();
        match last {
            Some((seen, since)) if seen == v => {
                if now.duration_since(since) >= quiet {
                    return Ok(Some(v));
                }
            }
            _ => last = Some((v, now)),
        }
        if now >= bound {
            return Ok(None);
        }
        tokio::time::sleep(poll.min(bound.saturating_duration_since(now))).await;
    }
}

/// How long a request may wait for an answer while a releasable hold is in flight before the
/// hold is released: a server that makes duplicates wait for the original (legal, draft-07
/// §2.6) answers none of them until the original completes.
const STALLED: std::time::Duration = std::time::Duration::from_millis(200);

/// Awaits `work` (requests sent while the hold `name` is in flight); if it has not finished
/// within [`STALLED`], releases the hold meanwhile, so a server that holds duplicates until
/// the original completes can answer them. Returns the result and, when it released, the
/// release's timeline line and moment.
async fn release_if_stalled<T>(
    work: impl std::future::Future<Output = T>,
    client: &Client,
    config: &Config,
    name: &str,
    start: Instant,
) -> (T, Option<(String, Instant)>) {
    tokio::pin!(work);
    tokio::select! {
        done = &mut work => (done, None),
        _ = tokio::time::sleep(STALLED) => {
            let at = Instant::now();
            let line = release(client, config, name, start).await.map(|l| {
                (format!("{l}, as requests sent while it was in flight waited for it"), at)
            });
            (work.await, line)
        }
    }
}

/// POSTs the release URL of the hold `name`; the timeline line that says how it went, `None`
/// without `--hold-release`. A test hook's URL needs none of the operation's headers.
async fn release(client: &Client, config: &Config, name: &str, start: Instant) -> Option<String> {
    let url = config.hold_release.as_ref()?.url_for(name);
    let at = start.elapsed().as_secs_f64() * 1000.0;
    let req = match url::Url::parse(&url) {
        Ok(url) => Request {
            method: "POST".into(),
            url,
            headers: Vec::new(),
            body: Vec::new(),
        },
        Err(e) => return Some(format!("could not release the hold at {url}: {e}")),
    };
    let (_, r) = client.send(&req).await;
    Some(match r.result {
        Ok(resp) if resp.is_success() => format!(
            "released the hold at +{at:.0} ms (POST {url} → {})",
            resp.status
        ),
        Ok(resp) => format!(
            "the hold release POST {url} got {}: the hold lasts as long as the server keeps it",
            resp.status
        ),
        Err(e) => format!(
            "could not release the hold (POST {url}: {e}): it lasts as long as the server keeps it"
        ),
    })
}

/// After this many requests in a row got no answer at all, the target counts as gone: nothing
/// more is sent, and the remaining probes ERROR instead of each waiting out its timeouts.
pub const STOP_AFTER_FAILURES: usize = 3;

/// The error of a request that was not sent because the target had stopped answering.
pub const NOT_SENT: &str = "not sent: the target stopped answering";

/// What the run has learnt so far and every probe works with: the calibrated effects meter,
/// how keys are written, and whether the target still answers. The pre-flight sets the first
/// two; each probe carries the answer streak on to the next.
#[derive(Debug, Clone)]
pub struct Session {
    pub meter: Meter,
    /// How keys are written in this run (the suite's form, or bare after a fallback).
    pub keys: KeySyntax,
    /// The pre-flight fell back to bare keys ([`crate::keys::FELL_BACK`]).
    pub fell_back: bool,
    /// Consecutive requests that got no answer, and the last transport error.
    failures: usize,
    last_failure: String,
    /// The counter value the last probe ended on (see [`ProbeCtx::closing_count`]):
    /// executions that land before the next probe's first reading belong to that probe.
    pub last_count: Option<u64>,
    /// How long a held request lasts when the server alone ends its hold (learnt from held
    /// originals, see [`ProbeCtx::hold_length`]).
    hold_length: Option<std::time::Duration>,
}

impl Session {
    /// The session a run starts with: the configured basis, the configured key form.
    pub fn new(config: &Config) -> Self {
        Session {
            meter: Meter::configured(
                config.counter.clone(),
                config.id_pointer.as_deref(),
                config.operation.headers.clone(),
                config.timeout,
            ),
            keys: config.key_form.initial(config.suite.key_syntax),
            fell_back: false,
            failures: 0,
            last_failure: String::new(),
            last_count: None,
            hold_length: None,
        }
    }

    /// Why the run stops probing, once the target stopped answering.
    pub fn stopped(&self) -> Option<String> {
        (self.failures >= STOP_AFTER_FAILURES).then(|| {
            format!(
                "the target stopped answering: {} requests in a row got no response (last: {})",
                self.failures, self.last_failure
            )
        })
    }

    /// Counts a request that was answered (or not) towards the streak.
    fn saw(&mut self, answered: bool, error: Option<&str>) {
        if answered {
            self.failures = 0;
        } else if let Some(e) = error.filter(|e| *e != raw::DROPPED && *e != NOT_SENT) {
            self.failures += 1;
            self.last_failure = e.to_string();
        }
    }
}

/// Whether an exchange failed in transport (no answer), as opposed to a deliberate drop.
fn transport_failed(ex: &Exchange) -> bool {
    ex.response.is_none() && ex.error.as_deref() != Some(raw::DROPPED)
}

/// One probe's working state. Probes read the config through it and record everything through
/// it, so no exchange can be left out of the report.
pub struct ProbeCtx {
    pub config: Arc<Config>,
    client: Arc<Client>,
    meta: ProbeMeta,
    started: Instant,
    unique: String,
    pub(crate) session: Session,
    /// Requests to the operation sent so far (counter reads excluded): the traffic a counter
    /// delta is checked against.
    sent: usize,
    pub(crate) exchanges: Vec<Exchange>,
    pub(crate) checks: Vec<Check>,
    pub(crate) timeline: Vec<String>,
    pub(crate) basis: Option<String>,
    /// Checks that could not be judged, each with why: they make the probe INCONCLUSIVE unless
    /// another check FAILs.
    pub(crate) unjudged: Vec<String>,
    /// Requests whose fate the probe did not see (dropped, held past their answer, no answer
    /// at all): their effect may still land, so the next counter reading settles first.
    unfinished: Vec<Unfinished>,
    /// Whether this probe has read the counter yet (a first reading before any request of its
    /// own tells whether executions landed after the previous probe ended).
    read_counter: bool,
    /// Executions that landed between the previous probe's last counter reading and this
    /// probe's first: (the previous reading, this one). The runner charges them to the
    /// previous probe.
    pub(crate) landed_before: Option<(u64, u64)>,
    /// The probe's last counter value, with the requests it had sent by then.
    last_read: Option<(u64, usize)>,
}

/// A request the probe left unfinished.
#[derive(Debug, Clone)]
struct Unfinished {
    /// The exchange number.
    n: usize,
    /// When its hold ends, when the probe knows (it released it, or knows how long holds last).
    hold_ends: Option<Instant>,
}

impl ProbeCtx {
    pub fn new(
        config: Arc<Config>,
        client: Arc<Client>,
        meta: ProbeMeta,
        session: Session,
    ) -> Self {
        let unique = format!(
            "idem-check-{}-{}",
            meta.id,
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        ProbeCtx {
            config,
            client,
            meta,
            started: Instant::now(),
            unique,
            session,
            sent: 0,
            exchanges: Vec::new(),
            checks: Vec::new(),
            timeline: Vec::new(),
            basis: None,
            unjudged: Vec::new(),
            unfinished: Vec::new(),
            read_counter: false,
            landed_before: None,
            last_read: None,
        }
    }

    /// The counter value this probe ended on: its last reading, if it sent nothing after it.
    /// Executions the next probe finds above it landed after this probe ended.
    pub(crate) fn closing_count(&self) -> Option<u64> {
        self.last_read
            .filter(|(_, sent)| *sent == self.sent)
            .map(|(v, _)| v)
    }

    /// The suite's setting for one of this probe's checks.
    pub fn spec(&self, decl: &CheckDecl) -> CheckSpec {
        debug_assert!(
            self.meta.checks.contains(decl),
            "{} does not declare check {}",
            self.meta.id,
            decl.id
        );
        let (severity, expect) = self
            .config
            .suite
            .check(self.meta.id, decl.id)
            .map_or((Severity::Required, Vec::new()), |s| {
                (s.severity, s.expect.clone())
            });
        CheckSpec {
            id: decl.id,
            what: decl.what,
            severity,
            expect,
        }
    }

    /// Records a check. A failed check that cites an exchange which got no answer (a timeout,
    /// a reset) is not a violation the server was seen to commit: unless its requirement is
    /// about answering in time, it is recorded as unjudged instead.
    pub fn push(&mut self, check: Check) {
        let timely = self
            .meta
            .checks
            .iter()
            .any(|d| d.id == check.id && d.timely);
        if !check.passed && check.severity != Severity::Info && !timely {
            let failed = check
                .exchanges
                .iter()
                .filter_map(|n| self.exchanges.iter().find(|e| e.n == *n))
                .find(|e| transport_failed(e))
                .map(|e| (e.n, e.error.clone().unwrap_or_default()));
            if let Some((n, error)) = failed {
                self.unjudged(&check.what, &format!("#{n} got no response ({error})"));
                return;
            }
        }
        self.checks.push(check);
    }

    /// Records that the check `what` could not be judged, and why.
    pub fn unjudged(&mut self, what: &str, why: &str) {
        self.timeline.push(format!("not judged: {what} — {why}"));
        self.unjudged.push(format!("{what}: not judged, {why}"));
    }

    /// Records a timeline fact for the evidence ("#3–#9 started while #2 was in flight").
    pub fn note(&mut self, line: impl Into<String>) {
        self.timeline.push(line.into());
    }

    /// A value unique to this probe run, for payloads.
    pub fn unique(&self) -> &str {
        &self.unique
    }

    /// A fresh key (a UUIDv4, see [`keys::fresh`]), never used before.
    pub fn fresh_key(&self) -> String {
        keys::fresh()
    }

    /// The configured operation for tenant A, with payload variant 0 and no key.
    pub fn request(&self) -> Request {
        self.request_with_payload(0)
    }

    /// The configured operation with payload `variant` (each variant is a different payload,
    /// all unique to this probe).
    pub fn request_with_payload(&self, variant: u32) -> Request {
        let op = &self.config.operation;
        Request {
            method: op.method.clone(),
            url: op.url.clone(),
            headers: op.headers.clone(),
            body: op.body.render(&self.unique, variant),
        }
    }

    /// Whether payload variants differ (false when the body template cannot be varied).
    pub fn payloads_vary(&self) -> bool {
        self.config.operation.body.varies()
    }

    /// The key header value for `key`, in this run's key form (`"key"` for an sf-string; bare
    /// after a fallback, see [`crate::keys::KeyForm`]).
    pub fn key_value(&self, key: &str) -> Vec<u8> {
        self.session.keys.encode(key).into_bytes()
    }

    /// The key header value for `key` in the suite's own syntax, whatever the run fell back to:
    /// for the probes that test that syntax itself (`quoted-key`, `escaped-key`).
    pub fn suite_key_value(&self, key: &str) -> Vec<u8> {
        self.config.suite.key_syntax.encode(key).into_bytes()
    }

    /// The key header's name in the selected suite.
    pub fn key_header(&self) -> &str {
        &self.config.suite.header
    }

    /// The operation with `key` set, payload variant 0.
    pub fn keyed(&self, key: &str) -> Request {
        let value = self.key_value(key);
        self.request().set_header(&self.config.suite.header, value)
    }

    /// The operation with `key` and payload `variant`.
    pub fn keyed_with_payload(&self, key: &str, variant: u32) -> Request {
        let value = self.key_value(key);
        self.request_with_payload(variant)
            .set_header(&self.config.suite.header, value)
    }

    /// The operation with payload `variant` and the key header set to exactly `value`, for the
    /// key-syntax probes that write values no encoder would produce.
    pub fn with_key_value(&self, value: impl Into<Vec<u8>>, variant: u32) -> Request {
        self.request_with_payload(variant)
            .set_header(&self.config.suite.header, value)
    }

    /// Rewrites a request as tenant B (the `--tenant-b-header` lines replace A's same-named
    /// ones). `None` without a second tenant.
    pub fn as_tenant_b(&self, req: Request) -> Option<Request> {
        let b = self.config.tenant_b.as_ref()?;
        let mut req = req;
        for h in b {
            req = req.without_header(&h.name);
        }
        let mut headers = b.clone();
        headers.extend(req.headers);
        req.headers = headers;
        Some(req)
    }

    /// When an exchange started, on the clock its offsets count from.
    pub fn instant_of(&self, ex: &Exchange) -> Instant {
        self.started + std::time::Duration::from_secs_f64(ex.start_ms / 1000.0)
    }

    fn offset_ms(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.started).as_secs_f64() * 1000.0
    }

    fn push_exchange(
        &mut self,
        role: String,
        request: SentRequest,
        r: &raw::RawResponse,
    ) -> Exchange {
        let n = self.exchanges.len() + 1;
        // One request, one exchange: a request sent again after the server closed its idle
        // connection under it is recorded (and counted) once, with why it went out twice.
        let role = match &r.resent {
            Some(why) => {
                self.note(format!("#{n} was {why}"));
                format!("{role} (sent again on a new connection)")
            }
            None => role,
        };
        let ex = Exchange {
            n,
            role,
            start_ms: self.offset_ms(r.started),
            duration_ms: r
                .finished
                .saturating_duration_since(r.started)
                .as_secs_f64()
                * 1000.0,
            release_us: r.released.map(|t| self.offset_ms(t) * 1000.0),
            request,
            response: r.result.as_ref().ok().cloned(),
            error: r.result.as_ref().err().cloned(),
        };
        if ex.response.is_none() && ex.error.as_deref() != Some(NOT_SENT) {
            self.unfinished.push(Unfinished {
                n: ex.n,
                hold_ends: None,
            });
        }
        self.exchanges.push(ex.clone());
        ex
    }

    /// Records one request to the operation and counts its answer towards the session's
    /// streak.
    fn push_sent(&mut self, role: String, request: SentRequest, r: &raw::RawResponse) -> Exchange {
        self.sent += 1;
        let ex = self.push_exchange(role, request, r);
        self.session.saw(ex.response.is_some(), ex.error.as_deref());
        ex
    }

    /// The exchange recorded instead of sending, once the target stopped answering.
    fn not_sent(&mut self, role: String, req: &Request) -> Option<Exchange> {
        self.session.stopped()?;
        let now = Instant::now();
        let r = raw::RawResponse {
            started: now,
            released: None,
            finished: now,
            result: Err(NOT_SENT.to_string()),
            resent: None,
        };
        Some(self.push_exchange(role, req.prepare(), &r))
    }

    /// Sends through the ordinary client (HTTP/1.1 or HTTP/2) and records the exchange; a
    /// request a rate limiter answered 429 is sent again (see [`ProbeCtx::resend_throttled`]).
    pub async fn send(&mut self, role: impl Into<String>, req: Request) -> Exchange {
        let role = role.into();
        if let Some(ex) = self.not_sent(role.clone(), &req) {
            return ex;
        }
        let mut resends = 0;
        loop {
            let (sent, r) = self.client.send(&req).await;
            let ex = self.push_sent(role.clone(), sent, &r);
            if !self.resend_throttled(&ex, &mut resends).await {
                return ex;
            }
        }
    }

    /// After `ex` was sent: when a rate limiter answered it (429, see [`throttle`]) and it has
    /// been sent again fewer than [`throttle::RESENDS`] times, marks it throttled in the
    /// evidence, waits out its `Retry-After` and says to send it again. Its 429 was not the
    /// idempotency layer's answer, so the request's fate is still to be seen.
    async fn resend_throttled(&mut self, ex: &Exchange, resends: &mut usize) -> bool {
        let Some(response) = ex.response.as_ref().filter(|_| throttle::throttled(ex)) else {
            return false;
        };
        if *resends >= throttle::RESENDS {
            return false;
        }
        *resends += 1;
        let pause = throttle::pause(response);
        self.mark_throttled(ex.n);
        self.note(format!(
            "#{} was throttled (429): sent again after {:.1} s",
            ex.n,
            pause.as_secs_f64()
        ));
        tokio::time::sleep(pause).await;
        true
    }

    /// Marks exchange `n` as answered by a rate limiter in the evidence.
    fn mark_throttled(&mut self, n: usize) {
        if let Some(ex) = self.exchanges.iter_mut().find(|e| e.n == n) {
            ex.role.push_str(" (throttled)");
        }
    }

    /// Leaves the throttled exchanges of `sent` (a burst or a wave, which cannot be sent again
    /// as concurrent duplicates) out of what the probe judges, marked in the evidence and
    /// counted in a note.
    fn admitted(&mut self, what: &str, sent: Vec<Exchange>) -> Vec<Exchange> {
        let throttled: Vec<usize> = sent
            .iter()
            .filter(|e| throttle::throttled(e))
            .map(|e| e.n)
            .collect();
        if throttled.is_empty() {
            return sent;
        }
        for n in &throttled {
            self.mark_throttled(*n);
        }
        self.note(format!(
            "{what}: {} of {} requests were throttled (429) and are left out of the checks: a rate limiter answered them, not the idempotency layer",
            throttled.len(),
            sent.len()
        ));
        sent.into_iter()
            .filter(|e| !throttle::throttled(e))
            .collect()
    }

    /// Sends exact bytes over HTTP/1.1 (key-syntax probes) and records the exchange.
    pub async fn send_raw(&mut self, role: impl Into<String>, req: Request) -> Exchange {
        let role = role.into();
        if let Some(ex) = self.not_sent(role.clone(), &req) {
            return ex;
        }
        let sent = req.prepare();
        let mut resends = 0;
        loop {
            let r = raw::send_one(
                &self.config.connector,
                &sent,
                self.config.timeout,
                self.config.max_body,
            )
            .await;
            // Exact bytes are often deliberately malformed, and a server may drop the
            // connection over them: that says nothing about whether it still answers, so only
            // an answer counts towards the streak.
            self.sent += 1;
            let ex = self.push_exchange(role.clone(), sent.clone(), &r);
            if ex.response.is_some() {
                self.session.saw(true, None);
            }
            if !self.resend_throttled(&ex, &mut resends).await {
                return ex;
            }
        }
    }

    /// Sends the request whole, then closes the connection without reading the answer, after
    /// `wait` (the lost-response probe).
    pub async fn send_then_drop(
        &mut self,
        role: impl Into<String>,
        req: Request,
        wait: std::time::Duration,
    ) -> Exchange {
        let role = role.into();
        if let Some(ex) = self.not_sent(role.clone(), &req) {
            return ex;
        }
        let sent = req.prepare();
        let r = raw::send_then_drop(&self.config.connector, &sent, wait, self.config.timeout).await;
        self.push_sent(role, sent, &r)
    }

    /// Releases `reqs` as one synchronised burst and records each exchange with its release
    /// time: in one packet when the target speaks HTTP/2 (ALPN, or `--http2` for h2c), else
    /// final bytes back to back over HTTP/1.1. The roles are `"{role} i/N"`. Returns the
    /// exchanges a rate limiter did not throttle (see [`throttle`]), and how the burst was
    /// released, which the evidence states next to the spread it achieved.
    pub async fn burst(
        &mut self,
        role: &str,
        reqs: &[Request],
    ) -> Result<(Vec<Exchange>, ReleaseMode), Stop> {
        if let Some(why) = self.session.stopped() {
            return Err(Stop::Error(why));
        }
        let sent: Vec<SentRequest> = reqs.iter().map(Request::prepare).collect();
        let opts = burst::BurstOptions {
            timeout: self.config.timeout,
            max_body: self.config.max_body,
            final_bytes: 1,
            release_threads: self.config.release_threads,
            ..burst::BurstOptions::default()
        };
        let report =
            h2burst::burst_for_target(&self.config.connector, &sent, &opts, self.config.http2)
                .await
                .map_err(|e| Stop::Error(format!("burst could not be staged: {e:#}")))?;
        let total = sent.len();
        let mut out = Vec::with_capacity(total);
        for (i, (s, r)) in report
            .requests
            .into_iter()
            .zip(report.responses.iter())
            .enumerate()
        {
            self.sent += 1;
            out.push(self.push_exchange(format!("{role} {}/{total}", i + 1), s, r));
        }
        // A burst answered at all shows the target alive, whatever happened to some duplicates.
        let answered = out.iter().any(|e| e.response.is_some());
        let error = out.iter().find_map(|e| e.error.clone());
        self.session.saw(answered, error.as_deref());
        Ok((self.admitted(role, out), report.release))
    }

    /// `req` with the run's hold header; `{{hold}}` in its value becomes a fresh name, returned
    /// when the hold can be released early (`--hold-release`). `None` without `--hold-header`.
    pub fn held(&self, req: Request) -> Option<(Request, Option<String>)> {
        let hold = self.config.hold_header.as_ref()?;
        let name = format!("hold-{}", uuid::Uuid::new_v4().simple());
        let value = String::from_utf8_lossy(&hold.value).replace(HOLD_NAME, &name);
        let releasable = self.config.hold_release.is_some();
        Some((
            req.with_header(&hold.name, value),
            releasable.then_some(name),
        ))
    }

    /// Ends the hold `name` of exchange `n` early (`--hold-release`) and notes how that went; a
    /// release that fails leaves the hold to the server's own limit, which the notes say.
    pub async fn release(&mut self, name: &str, n: usize) {
        let Some(line) = release(&self.client, self.config.as_ref(), name, self.started).await
        else {
            return;
        };
        self.hold_ended(n, Instant::now(), false);
        self.note(line);
    }

    /// Sends `req` while exchange `held` is held under `name`, then releases the hold; when
    /// the server makes the request wait for the held one, releases it meanwhile (see
    /// [`release_if_stalled`]). Returns the exchange, and whether the hold was released because
    /// the request waited for the held one. An answer a rate limiter gave (429) is marked so in
    /// the evidence, for the probe to leave out.
    pub async fn send_then_release(
        &mut self,
        role: &str,
        req: Request,
        name: &str,
        held: usize,
    ) -> (Exchange, bool) {
        if let Some(ex) = self.not_sent(role.into(), &req) {
            self.release(name, held).await;
            return (ex, false);
        }
        let client = self.client.clone();
        let config = self.config.clone();
        let ((sent, r), line) =
            release_if_stalled(client.send(&req), &client, &config, name, self.started).await;
        let ex = self.push_sent(role.into(), sent, &r);
        let waited = line.is_some();
        match line {
            Some((line, at)) => {
                self.hold_ended(held, at, false);
                self.note(line);
            }
            None => self.release(name, held).await,
        }
        // It cannot be sent again while the hold lasts: the probe leaves it out.
        if throttle::throttled(&ex) {
            self.mark_throttled(ex.n);
            self.note(format!(
                "#{} was throttled (429) while #{held} was held, and is left out of the checks",
                ex.n
            ));
        }
        (ex, waited)
    }

    /// How long the server holds a request with the hold header, when it decides alone (no
    /// `--hold-release`): the longest held original seen so far in the run, else measured now
    /// with one held request of a fresh key, which completes before this returns.
    pub async fn hold_length(&mut self) -> Option<std::time::Duration> {
        if let Some(known) = self.session.hold_length {
            return Some(known);
        }
        let (held, _) = self.held(self.keyed(&self.fresh_key()))?;
        let ex = self.send("hold measurement", held).await;
        ex.response.as_ref()?;
        let length = std::time::Duration::from_secs_f64(ex.duration_ms / 1000.0);
        self.note(format!(
            "the hold lasts {:.0} ms (#{}, a held request of its own key)",
            ex.duration_ms, ex.n
        ));
        self.session.hold_length = Some(length);
        Some(length)
    }

    /// Sends `original` with the run's hold (see [`ProbeCtx::held`]) and, after a head start,
    /// waves of `wave` every `interval` until it completes (at most [`MAX_WAVES`] waves, and
    /// within the timeout). Returns the original's exchange and the duplicates' (roles
    /// "duplicate i, wave w/N") that a rate limiter did not throttle. An original it throttled
    /// before any wave went out is sent again after its `Retry-After` (nothing of the scenario
    /// reached the server); one throttled later is INCONCLUSIVE, since the scenario never ran
    /// as meant. A hold that can be released ends once
    /// [`RELEASE_AFTER`] waves were answered while the original was in flight, and, with
    /// `at_least`, not before `--hold-at-least`: then the waves come faster, since no fixed
    /// hold has to be spread over.
    pub async fn held_with_waves(
        &mut self,
        original: Request,
        wave: &[Request],
        interval: std::time::Duration,
        at_least: bool,
    ) -> Result<(Exchange, Vec<Exchange>), Stop> {
        let (original, name) = self.held(original.clone()).unwrap_or((original, None));
        if let Some(ex) = self.not_sent("original (held)".into(), &original) {
            return Ok((ex, Vec::new()));
        }
        let minimum = match (&self.config.hold_release, at_least) {
            (Some(r), true) => r.at_least,
            _ => std::time::Duration::ZERO,
        };
        let interval = match name {
            Some(_) if minimum.is_zero() => interval.min(RELEASED_WAVE_INTERVAL),
            _ => interval,
        };
        let mut resends = 0;
        loop {
            let (original_ex, dups) = self
                .held_once(&original, name.as_deref(), wave, interval, minimum)
                .await;
            if !throttle::throttled(&original_ex) {
                return Ok((original_ex, self.admitted("waves", dups)));
            }
            if !(dups.is_empty() && self.resend_throttled(&original_ex, &mut resends).await) {
                self.mark_throttled(original_ex.n);
                return Err(Stop::Inconclusive(format!(
                    "the held original #{} was throttled (429) by a rate limiter, so the scenario never ran; raise the rate limit for this client",
                    original_ex.n
                )));
            }
        }
    }

    /// One try of [`ProbeCtx::held_with_waves`]: the held original and its waves, recorded.
    async fn held_once(
        &mut self,
        original: &Request,
        name: Option<&str>,
        wave: &[Request],
        interval: std::time::Duration,
        minimum: std::time::Duration,
    ) -> (Exchange, Vec<Exchange>) {
        use std::sync::atomic::{AtomicBool, Ordering};
        let done = AtomicBool::new(false);
        let client = self.client.clone();
        let config = self.config.clone();
        let run_start = self.started;
        let deadline = Instant::now() + self.config.timeout;
        let original_fut = async {
            let r = client.send(original).await;
            done.store(true, Ordering::SeqCst);
            r
        };
        let waves_fut = async {
            let held_at = Instant::now();
            let mut sent = Vec::new();
            let mut answered = 0;
            let mut released = None;
            // Give the original a head start so it is the one that claims the key; on a loaded
            // machine 20 ms was sometimes not enough (probes check who owned, see
            // loser-does-not-unlock).
            tokio::time::sleep(HEAD_START).await;
            for w in 1..=MAX_WAVES {
                if done.load(Ordering::SeqCst) || Instant::now() >= deadline {
                    break;
                }
                let batch = futures::future::join_all(wave.iter().map(|d| client.send(d)));
                let batch = match (&name, &released) {
                    (Some(name), None) => {
                        let (batch, line) =
                            release_if_stalled(batch, &client, &config, name, run_start).await;
                        released = line.map(|(l, _)| l);
                        batch
                    }
                    _ => batch.await,
                };
                if !done.load(Ordering::SeqCst) && batch.iter().all(|(_, r)| r.result.is_ok()) {
                    answered += 1;
                }
                sent.extend(batch.into_iter().map(|r| (w, r)));
                if let (Some(name), None) = (&name, &released) {
                    if answered >= RELEASE_AFTER && held_at.elapsed() >= minimum {
                        released = release(&client, &config, name, run_start).await;
                    }
                }
                tokio::time::sleep(interval).await;
            }
            (sent, released)
        };
        let ((o_sent, o_resp), (waves, released)) = tokio::join!(original_fut, waves_fut);
        let original_ex = self.push_sent("original (held)".into(), o_sent, &o_resp);
        if released.is_none() && original_ex.response.is_some() {
            let held = std::time::Duration::from_secs_f64(original_ex.duration_ms / 1000.0);
            let longest = self.session.hold_length.map_or(held, |h| h.max(held));
            self.session.hold_length = Some(longest);
        }
        if let Some(line) = released {
            self.note(line);
        }
        let total_waves = waves.last().map_or(0, |(w, _)| *w);
        let mut dups = Vec::with_capacity(waves.len());
        for (i, (w, (s, r))) in waves.into_iter().enumerate() {
            let role = format!("duplicate {}, wave {w}/{total_waves}", i + 1);
            self.sent += 1;
            dups.push(self.push_exchange(role, s, &r));
        }
        (original_ex, dups)
    }

    /// Reads the effect counter, recording the read. Without a counter the reading holds no
    /// value and the meter counts from the responses. An unreadable counter is an ERROR stop,
    /// since every effect check would then be guesswork.
    pub async fn count(&mut self, role: &str) -> Result<Reading, Stop> {
        self.settle().await;
        let Some(read) = self.session.meter.read(&self.client).await else {
            return Ok(Reading::new(None, self.sent));
        };
        let mut cited = String::new();
        let unanswered = read.unanswered();
        if let Some((sent, raw)) = read.exchange {
            let ex = self.push_exchange(role.to_string(), sent, &raw);
            cited = format!("#{}: ", ex.n);
        }
        if let Some(line) = read.note {
            self.note(format!("{role}: {line}"));
        }
        match read.value {
            Ok(v) => {
                // Only a first reading taken before this probe sent anything can tell that
                // executions landed after the previous probe ended.
                if !self.read_counter && self.sent == 0 {
                    self.landed_before = self
                        .session
                        .last_count
                        .filter(|last| v > *last)
                        .map(|last| (last, v));
                }
                self.read_counter = true;
                self.last_read = Some((v, self.sent));
                Ok(Reading::new(Some(v), self.sent))
            }
            Err(e) => Err(Stop::Error(
                self.session
                    .meter
                    .unreadable(&format!("{cited}{e}"), unanswered),
            )),
        }
    }

    /// Marks exchange `n` as held until `ends`, a moment known (the probe released it) or
    /// `estimated` (its send time plus the hold's length, given [`SETTLE_MARGIN`] on top):
    /// settling waits for it before it watches the basis.
    pub fn hold_ended(&mut self, n: usize, ends: Instant, estimated: bool) {
        let ends = if estimated {
            ends + SETTLE_MARGIN
        } else {
            ends
        };
        for u in self.unfinished.iter_mut().filter(|u| u.n == n) {
            u.hold_ends = Some(ends);
        }
    }

    /// Before a counter reading that follows unfinished requests: waits until their holds have
    /// ended (plus [`SETTLE_MARGIN`]), then until the counter is unchanged for the quiet window
    /// (`--quiet-window`), bounded by the request timeout, so an execution that lands after the
    /// response the checker saw or dropped is counted in this probe's window and no other. The
    /// evidence says how long it took and why.
    pub async fn settle(&mut self) {
        if self.unfinished.is_empty() {
            return;
        }
        let unfinished = std::mem::take(&mut self.unfinished);
        let start = Instant::now();
        let quiet = self.config.quiet_window;
        let bound = start + self.config.timeout.max(quiet * 2);
        let held_until = unfinished.iter().filter_map(|u| u.hold_ends).max();
        if let Some(until) = held_until {
            tokio::time::sleep_until(until.min(bound).into()).await;
        }
        let which = unfinished
            .iter()
            .map(|u| format!("#{}", u.n))
            .collect::<Vec<_>>()
            .join(" ");
        let basis = if self.session.meter.has_counter() {
            match watch_quiet(&self.session.meter, &self.client, quiet, bound).await {
                Ok(Some(v)) => format!("the counter stayed at {v} for {} ms", quiet.as_millis()),
                Ok(None) => format!(
                    "the counter was still changing {:.1} s after; counted anyway",
                    bound.saturating_duration_since(start).as_secs_f64()
                ),
                Err(e) => format!("the counter could not be watched ({e})"),
            }
        } else {
            tokio::time::sleep(quiet).await;
            format!(
                "waited the {} ms quiet window (no counter to watch)",
                quiet.as_millis()
            )
        };
        let held = if held_until.is_some() {
            " after the hold ended"
        } else {
            ""
        };
        self.note(format!(
            "settled {} ms before counting: {which} left unfinished{held}; {basis}",
            start.elapsed().as_millis()
        ));
    }

    /// "count before": the reading every effect check starts from.
    pub async fn count_before(&mut self) -> Result<Reading, Stop> {
        self.count("count before").await
    }

    /// How many times `attempts` executed between `before` and `after`, on top of `earlier`
    /// exchanges that had already executed; the basis is recorded for the report. `Err` says
    /// why the count cannot be trusted.
    pub fn executions(
        &mut self,
        before: &Reading,
        after: &Reading,
        earlier: &[&Exchange],
        attempts: &[&Exchange],
    ) -> Result<Executions, String> {
        let e = self.session.meter.count(before, after, earlier, attempts)?;
        self.basis = Some(e.basis.clone());
        Ok(e)
    }

    /// [`ProbeCtx::executions`] across a restart of the target: a counter that reset falls back
    /// to ids for this probe ([`crate::effects::Meter::count_across_restart`]).
    pub fn executions_across_restart(
        &mut self,
        before: &Reading,
        after: &Reading,
        attempts: &[&Exchange],
    ) -> Result<Executions, String> {
        let e = self
            .session
            .meter
            .count_across_restart(before, after, &[], attempts)?;
        self.basis = Some(e.basis.clone());
        Ok(e)
    }

    /// The check that `counted` is exactly `expected` executions; unjudged when the count
    /// cannot be trusted. A count read from the counter is judged even when a cited exchange
    /// timed out: the counter saw what really executed. So is a count above `expected`, on any
    /// basis (see [`ProbeCtx::push_counted`]).
    pub fn expect_executions(
        &mut self,
        decl: &CheckDecl,
        counted: Result<Executions, String>,
        expected: u64,
    ) {
        match counted {
            Ok(e) => {
                let c = check::executed(&self.spec(decl), &e, expected);
                self.push_counted(c, e.count > expected);
            }
            Err(why) => self.unjudged(decl.what, &why),
        }
    }

    /// The check that `counted` is at most `limit` executions; unjudged when the count cannot
    /// be trusted. Executions already proven above `limit` are judged whatever went unanswered.
    pub fn expect_at_most(
        &mut self,
        decl: &CheckDecl,
        counted: Result<Executions, String>,
        limit: u64,
    ) {
        match counted {
            Ok(e) => {
                let c = check::executed_at_most(&self.spec(decl), &e, limit);
                self.push_counted(c, e.count > limit);
            }
            Err(why) => self.unjudged(decl.what, &why),
        }
    }

    /// The check that `errors`, requests all answered with a 4xx or 5xx, executed nothing
    /// (`counted` between the readings around them). Only a counter can see it: an error body
    /// names no resource to count (and an id in one may be a request id), so without a counter
    /// it is left to the counter with a note. A window holding a 2xx or an unanswered request
    /// is no error-only window and is not judged here.
    pub fn expect_nothing_behind_errors(
        &mut self,
        decl: &CheckDecl,
        counted: Result<Executions, String>,
        errors: &[&Exchange],
    ) {
        let refused = |e: &&Exchange| e.status().is_some_and(|s| s >= 400);
        if errors.is_empty() || !errors.iter().all(refused) {
            return;
        }
        if !self.session.meter.has_counter() {
            self.note(format!(
                "left to the counter: {} — only a counter (--count-url, --count-cmd) shows an execution behind an error answer",
                decl.what
            ));
            return;
        }
        match counted {
            Ok(e) => {
                let c = check::nothing_behind_errors(&self.spec(decl), &e, errors);
                self.checks.push(c);
            }
            Err(why) => self.unjudged(decl.what, &why),
        }
    }

    /// Records an execution check. Unanswered requests leave it unjudged only when their
    /// answers could change it: a counter already saw what executed, and ids or bodies counted
    /// from the answered requests are a lower bound, so `exceeded` (more executions proven than
    /// allowed) is a duplicated effect however many requests went unanswered. Judging it either
    /// way keeps one verdict and severity for the same evidence.
    fn push_counted(&mut self, c: Check, exceeded: bool) {
        if self.session.meter.has_counter() || exceeded {
            self.checks.push(c);
        } else {
            self.push(c);
        }
    }

    /// The check that the resources behind `exchanges` are all one (`same`) or all different,
    /// by id or, without ids, by body. When responses cannot tell resources apart it is
    /// unjudged — or, where the counter judges executions, left to the counter with a note.
    pub fn expect_identities(
        &mut self,
        decl: &CheckDecl,
        label: &str,
        exchanges: &[&Exchange],
        same: bool,
    ) {
        let values: Result<Vec<(usize, Option<String>)>, String> = exchanges
            .iter()
            .map(|e| Ok((e.n, self.session.meter.identity(e)?)))
            .collect();
        match values {
            Ok(values) => {
                let c = check::values_relation(&self.spec(decl), label, &values, same);
                // Two answers already about different resources (or one resource twice, where
                // each must be its own) decide it, whatever the unanswered ones would say.
                let present: Vec<&String> = values.iter().filter_map(|(_, v)| v.as_ref()).collect();
                let distinct: std::collections::BTreeSet<&String> =
                    present.iter().copied().collect();
                let decided = if same {
                    distinct.len() > 1
                } else {
                    distinct.len() < present.len()
                };
                if decided {
                    self.checks.push(c);
                } else {
                    self.push(c);
                }
            }
            Err(why) if self.session.meter.has_counter() => {
                self.note(format!("left to the counter: {} — {why}", decl.what))
            }
            Err(why) => self.unjudged(decl.what, &why),
        }
    }

    /// The check that `retry` replayed `original`: same status, same resource (id, or body).
    pub fn expect_replay(&mut self, decl: &CheckDecl, original: &Exchange, retry: &Exchange) {
        let meter = &self.session.meter;
        let (a, label) = meter.replay_identity(original);
        let (b, _) = meter.replay_identity(retry);
        let c = check::replayed(&self.spec(decl), (original, a), (retry, b), label);
        self.push(c);
    }

    /// The resource id in a response, via `--id-pointer`.
    pub fn resource_id(&self, ex: &Exchange) -> Option<String> {
        self.session.meter.resource_id(ex)
    }

    /// Milliseconds since the probe started.
    pub fn elapsed_ms(&self) -> f64 {
        self.offset_ms(Instant::now())
    }

    /// What the probe declared it needs (`ctx.need::<SecondTenant>()`), typed. The runner
    /// checked it before `run` was called, so `Stop::Error` here is a catalog mistake: a need
    /// read without being declared in [`ProbeMeta::needs`].
    pub fn need<T: Precondition>(&self) -> Result<T::Value, Stop> {
        let need = T::NEED;
        let declared = self.meta.needs.contains(&need);
        match T::value(&self.config) {
            Some(value) if declared => Ok(value),
            _ => Err(Stop::Error(format!(
                "{} was not checked before the probe ran: {} is {}",
                self.meta.id,
                need.what(),
                if declared { "missing" } else { "not declared" }
            ))),
        }
    }
}
