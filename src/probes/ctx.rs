//! What a probe works with: a thin front over the kit's parts ([`super::kit`]) — the recorder,
//! the transports under the 429 rule, the effect meter, and the judge — so a probe sends,
//! counts and judges in one call, and no exchange can be left out of the report.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::kit::meter::{settle, Counted, Counting, Settling, Span};
use super::kit::relation::KeyFactory;
use super::kit::resending::Transports;
use super::kit::session::Streak;
use super::kit::transport::DropAfter;
use super::kit::{judge::Judge, recorder::Recorder, requests::Requests, send::Outbox};
use crate::check::{Check, CheckSpec};
use crate::config::Config;
use crate::effects::{Meter, Reading};
use crate::http::client::Client;
use crate::http::exchange::{Exchange, Role};
use crate::http::release::ReleaseMode;
use crate::http::Request;
use crate::keys;
use crate::outcome::Stop;
use crate::probes::{CheckDecl, Precondition, ProbeMeta};

pub use super::kit::session::Session;

/// A burst's exchanges a rate limiter did not throttle, and how it was released.
type Burst = Result<(Vec<Exchange>, ReleaseMode), Stop>;

/// One probe's working state: probes read the config and record everything through it.
pub struct ProbeCtx {
    pub config: Arc<Config>,
    /// The client counter reads go through.
    client: Arc<Client>,
    meta: ProbeMeta,
    pub(crate) started: Instant,
    pub(crate) session: Session,
    pub(crate) record: Recorder,
    pub(crate) judge: Judge,
    pub(crate) counting: Counting,
    pub(crate) transports: Transports,
    /// This probe's payloads and keys in their carrier ([`Requests`]).
    pub(crate) requests: Requests,
}

impl ProbeCtx {
    pub fn new(
        config: Arc<Config>,
        client: Arc<Client>,
        meta: ProbeMeta,
        session: Session,
    ) -> Self {
        let started = Instant::now();
        ProbeCtx {
            transports: Transports::of(&config, &client),
            requests: Requests::new(config.clone(), meta.id),
            judge: Judge::new(meta, config.clone()),
            record: Recorder::new(started),
            counting: Counting::default(),
            config,
            client,
            meta,
            started,
            session,
        }
    }

    /// The same probe sending through `transports` instead (the kit's tests: no sockets).
    #[cfg(test)]
    pub(crate) fn with_transports(mut self, transports: Transports) -> Self {
        self.transports = transports;
        self
    }

    /// The counter value this probe ended on (see [`Counting::closing`]).
    pub(crate) fn closing_count(&self) -> Option<u64> {
        self.counting.closing(self.record.sent())
    }

    pub fn spec(&self, decl: &CheckDecl) -> CheckSpec {
        self.judge.spec(decl)
    }

    pub fn push(&mut self, check: Check) {
        self.judge.push(&mut self.record, check)
    }

    pub fn unjudged(&mut self, what: &str, why: &str) {
        self.judge.unjudged(&mut self.record, what, why)
    }

    pub fn note(&mut self, line: impl Into<String>) {
        self.record.note(line)
    }

    pub fn unique(&self) -> &str {
        self.requests.unique()
    }

    /// A fresh key (a UUIDv4, see [`keys::fresh`]), never used before.
    pub fn fresh_key(&self) -> String {
        keys::fresh()
    }

    /// The key factory for the shape the API accepts ([`super::kit::relation`]): every key a
    /// probe derives from another comes from it.
    pub fn key_factory(&self) -> KeyFactory {
        KeyFactory::new(self.session.key_shape)
    }

    /// The configured operation for tenant A, with payload variant 0 and no key.
    pub fn request(&self) -> Request {
        self.requests.operation(0)
    }

    /// Whether payload variants differ (false when the body template cannot be varied).
    pub fn payloads_vary(&self) -> bool {
        self.config.operation.body.varies()
    }

    /// The key header value for `key`, in this run's key form.
    pub fn key_value(&self, key: &str) -> Vec<u8> {
        self.session.keys.encode(key).into_bytes()
    }

    /// The key header value for `key` in the suite's own syntax, whatever the run fell back to.
    pub fn suite_key_value(&self, key: &str) -> Vec<u8> {
        self.config.suite.key_syntax.encode(key).into_bytes()
    }

    pub fn keyed(&self, key: &str) -> Request {
        self.requests.keyed(self.session.keys, key, 0)
    }

    pub fn keyed_with_payload(&self, key: &str, variant: u32) -> Request {
        self.requests.keyed(self.session.keys, key, variant)
    }

    pub fn with_key_value(&self, value: impl Into<Vec<u8>>, variant: u32) -> Request {
        self.requests.with_key_value(value, variant)
    }

    pub fn as_tenant_b(&self, req: Request) -> Option<Request> {
        self.requests.as_tenant_b(req)
    }

    /// When an exchange started, on the clock its offsets count from.
    pub fn instant_of(&self, ex: &Exchange) -> Instant {
        self.record.instant_of(ex)
    }

    /// Where requests are recorded and counted towards the answer streak.
    pub(crate) fn outbox(&mut self) -> Outbox<'_> {
        Outbox {
            record: &mut self.record,
            session: &mut self.session,
        }
    }

    /// Sends through the ordinary client (HTTP/1.1 or HTTP/2) and records the exchange; a 429
    /// is sent again ([`super::kit::resending`]), each attempt recorded.
    pub async fn send(&mut self, role: impl Into<Role>, req: Request) -> Exchange {
        let t = self.transports.ordinary.clone();
        self.outbox()
            .send(&t, Streak::Counts, &role.into(), req)
            .await
    }

    /// Sends exact bytes over HTTP/1.1 (key-syntax probes) and records the exchange; being
    /// malformed on purpose, only an answer counts towards the streak ([`Streak`]).
    pub async fn send_raw(&mut self, role: impl Into<Role>, req: Request) -> Exchange {
        let t = self.transports.exact.clone();
        self.outbox()
            .send(&t, Streak::AnswersOnly, &role.into(), req)
            .await
    }

    /// Sends the request whole, then closes the connection without reading the answer, after
    /// `wait`: a client whose response was lost.
    pub async fn send_then_drop(&mut self, role: &str, req: Request, wait: Duration) -> Exchange {
        let t = (self.transports.drop_after)(DropAfter::new(&self.config, wait));
        self.outbox()
            .send(&t, Streak::Counts, &role.into(), req)
            .await
    }

    /// Releases `reqs` as one synchronised burst ([`super::kit::transport::Burst`]), with the
    /// exchanges a rate limiter did not throttle and how the burst was released.
    pub async fn burst(&mut self, role: &str, reqs: &[Request]) -> Burst {
        let t = self.transports.burst.clone();
        self.outbox().burst(&t, role, reqs).await
    }

    /// Reads the effect counter after settling, recording the read ([`Counting::count`]).
    pub async fn count(&mut self, role: &str) -> Result<Reading, Stop> {
        let (settling, counting) = (self.settling(), &mut self.counting);
        let (record, session) = (&mut self.record, &self.session);
        counting
            .count(role, record, session, &self.client, settling)
            .await
    }

    /// "count before": the reading every effect check starts from.
    pub async fn count_before(&mut self) -> Result<Reading, Stop> {
        self.count("count before").await
    }

    /// Waits for unfinished requests to settle ([`super::kit::meter::settle`]); an ERROR
    /// when the counter never does.
    pub async fn settle(&mut self) -> Result<(), Stop> {
        let (settling, meter) = (self.settling(), &self.session.meter);
        settle(&mut self.record, meter, &self.client, settling)
            .await
            .map(drop)
    }

    fn settling(&self) -> Settling {
        Settling {
            quiet: self.config.quiet_window,
            timeout: self.config.timeout,
        }
    }

    /// How many times `attempts` executed between two readings ([`Counting::executions`]).
    pub fn executions(
        &mut self,
        before: &Reading,
        after: &Reading,
        earlier: &[&Exchange],
        attempts: &[&Exchange],
    ) -> Counted {
        self.executions_over(Span::Steady, (before, after), earlier, attempts)
    }

    /// [`ProbeCtx::executions`] over a `span` that may cross a restart of the target.
    pub fn executions_over(
        &mut self,
        span: Span,
        readings: (&Reading, &Reading),
        earlier: &[&Exchange],
        attempts: &[&Exchange],
    ) -> Counted {
        let meter = &self.session.meter;
        let counting = &mut self.counting;
        counting.executions(meter, span, readings, earlier, attempts)
    }

    fn judging(&mut self) -> (&mut Judge, &mut Recorder, &Meter) {
        (&mut self.judge, &mut self.record, &self.session.meter)
    }

    pub fn expect_executions(&mut self, decl: &CheckDecl, counted: Counted, expected: u64) {
        let (judge, record, meter) = self.judging();
        judge.expect_executions(record, meter, decl, counted, (expected, false))
    }

    pub fn expect_at_most(&mut self, decl: &CheckDecl, counted: Counted, limit: u64) {
        let (judge, record, meter) = self.judging();
        judge.expect_executions(record, meter, decl, counted, (limit, true))
    }

    pub fn expect_nothing_behind_errors(
        &mut self,
        d: &CheckDecl,
        c: Counted,
        errors: &[&Exchange],
    ) {
        let (judge, record, meter) = self.judging();
        judge.expect_nothing_behind_errors(record, meter, d, c, errors)
    }

    pub fn expect_identities(&mut self, d: &CheckDecl, label: &str, ex: &[&Exchange], same: bool) {
        let (judge, record, meter) = self.judging();
        judge.expect_identities(record, meter, (d, label), ex, same)
    }

    pub fn expect_replay(&mut self, decl: &CheckDecl, original: &Exchange, retry: &Exchange) {
        let (judge, record, meter) = self.judging();
        judge.expect_replay(record, meter, decl, (original, retry))
    }

    /// The resource id in a response, via `--id-pointer`.
    pub fn resource_id(&self, ex: &Exchange) -> Option<String> {
        self.session.meter.resource_id(ex)
    }

    /// Milliseconds since the probe started.
    pub fn elapsed_ms(&self) -> f64 {
        self.record.offset_ms(Instant::now())
    }

    /// What the probe declared it needs (`ctx.need::<SecondTenant>()`), typed. The runner
    /// checked it before `run` was called, so `Stop::Error` here is a catalog mistake: a need
    /// read without being declared in [`ProbeMeta::needs`].
    pub fn need<T: Precondition>(&self) -> Result<T::Value, Stop> {
        let need = T::NEED;
        let declared = self.meta.needs.contains(&need);
        match T::value(&self.config) {
            Some(value) if declared => Ok(value),
            _ => Err(Stop::Error(
                format!(
                    "{} was not checked before the probe ran: {} is {}",
                    self.meta.id,
                    need.what(),
                    if declared { "missing" } else { "not declared" }
                )
                .into(),
            )),
        }
    }
}
