//! What a probe works with: the validated config, a recording client, its check specs, and the
//! exchanges and checks it has gathered so far.

use std::sync::Arc;
use std::time::Instant;

use crate::check::{Check, CheckSpec, Severity};
use crate::config::{Config, Counter};
use crate::effects::{self, Executions};
use crate::http::client::Client;
use crate::http::exchange::{Exchange, Header, SentRequest};
use crate::http::release::ReleaseMode;
use crate::http::{burst, h2burst, raw};
use crate::outcome::Stop;
use crate::probes::ProbeMeta;

/// The most duplicate waves [`ProbeCtx::held_with_waves`] sends while one original is held.
pub const MAX_WAVES: usize = 40;

/// How long [`ProbeCtx::held_with_waves`] lets the held original travel before the first wave.
pub const HEAD_START: std::time::Duration = std::time::Duration::from_millis(50);

/// A request a probe is about to send: starts as the configured operation for tenant A.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub url: url::Url,
    pub headers: Vec<Header>,
    pub body: Vec<u8>,
}

impl Request {
    /// Adds a header line after the existing ones (a second line of the same name stays a second
    /// line on the wire).
    pub fn with_header(mut self, name: &str, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push(Header::new(name, value));
        self
    }

    /// Replaces every line of this header with one line (appended if there was none).
    pub fn set_header(self, name: &str, value: impl Into<Vec<u8>>) -> Self {
        self.without_header(name).with_header(name, value)
    }

    pub fn without_header(mut self, name: &str) -> Self {
        self.headers.retain(|h| !h.name.eq_ignore_ascii_case(name));
        self
    }

    pub fn with_body(mut self, body: Vec<u8>) -> Self {
        self.body = body;
        self
    }

    pub fn with_url(mut self, url: url::Url) -> Self {
        self.url = url;
        self
    }

    /// A GET of the effect counter at `url`, with tenant A's headers (its credentials) but no
    /// Content-Type, since it carries no body.
    pub fn counter_read(config: &Config, url: &url::Url) -> Self {
        Request {
            method: "GET".into(),
            url: url.clone(),
            headers: config
                .operation
                .headers
                .iter()
                .filter(|h| !h.name.eq_ignore_ascii_case("content-type"))
                .cloned()
                .collect(),
            body: Vec::new(),
        }
    }

    /// The request as the raw client will write it (Host and Content-Length made explicit).
    pub fn prepare(&self) -> SentRequest {
        raw::prepare(
            &self.url,
            &self.method,
            self.headers.clone(),
            self.body.clone(),
        )
    }
}

/// One probe's working state. Probes read the config through it and record everything through
/// it, so no exchange can be left out of the report.
pub struct ProbeCtx {
    pub config: Arc<Config>,
    client: Arc<Client>,
    meta: ProbeMeta,
    started: Instant,
    unique: String,
    pub(crate) exchanges: Vec<Exchange>,
    pub(crate) checks: Vec<Check>,
    pub(crate) timeline: Vec<String>,
    pub(crate) basis: Option<String>,
}

impl ProbeCtx {
    pub fn new(config: Arc<Config>, client: Arc<Client>, meta: ProbeMeta) -> Self {
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
            exchanges: Vec::new(),
            checks: Vec::new(),
            timeline: Vec::new(),
            basis: None,
        }
    }

    /// The suite's setting for one of this probe's checks.
    pub fn spec(&self, check_id: &'static str) -> CheckSpec {
        let what = self
            .meta
            .checks
            .iter()
            .find(|c| c.id == check_id)
            .map_or(check_id, |c| c.what);
        let (severity, expect) = self
            .config
            .suite
            .check(self.meta.id, check_id)
            .map_or((Severity::Required, Vec::new()), |s| {
                (s.severity, s.expect.clone())
            });
        CheckSpec {
            id: check_id,
            what,
            severity,
            expect,
        }
    }

    /// Records a check.
    pub fn push(&mut self, check: Check) {
        self.checks.push(check);
    }

    /// Records a timeline fact for the evidence ("#3–#9 started while #2 was in flight").
    pub fn note(&mut self, line: impl Into<String>) {
        self.timeline.push(line.into());
    }

    /// A value unique to this probe run, for payloads.
    pub fn unique(&self) -> &str {
        &self.unique
    }

    /// A fresh key (UUIDv4), never used before.
    pub fn fresh_key(&self) -> String {
        uuid::Uuid::new_v4().to_string()
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

    /// The key header value for `key`, in the suite's syntax (`"key"` for an sf-string).
    pub fn key_value(&self, key: &str) -> Vec<u8> {
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

    /// The operation with `key` and the payload the operation refuses (`None` without one).
    pub fn keyed_invalid(&self, key: &str) -> Option<Request> {
        let invalid = self.config.invalid_body.as_ref()?;
        Some(
            self.keyed(key)
                .with_body(invalid.template.render(&self.unique, 0)),
        )
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

    fn offset_ms(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.started).as_secs_f64() * 1000.0
    }

    fn push_exchange(
        &mut self,
        role: String,
        request: SentRequest,
        r: &raw::RawResponse,
    ) -> Exchange {
        let ex = Exchange {
            n: self.exchanges.len() + 1,
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
        self.exchanges.push(ex.clone());
        ex
    }

    /// Sends through the ordinary client (HTTP/1.1 or HTTP/2) and records the exchange.
    pub async fn send(&mut self, role: impl Into<String>, req: Request) -> Exchange {
        let (sent, r) = self.client.send(&req).await;
        self.push_exchange(role.into(), sent, &r)
    }

    /// Sends exact bytes over HTTP/1.1 (key-syntax probes) and records the exchange.
    pub async fn send_raw(&mut self, role: impl Into<String>, req: Request) -> Exchange {
        let sent = req.prepare();
        let r = raw::send_one(&sent, self.config.timeout, self.config.max_body).await;
        self.push_exchange(role.into(), sent, &r)
    }

    /// Sends the request whole, then closes the connection without reading the answer, after
    /// `wait` (the lost-response probe).
    pub async fn send_then_drop(
        &mut self,
        role: impl Into<String>,
        req: Request,
        wait: std::time::Duration,
    ) -> Exchange {
        let sent = req.prepare();
        let r = raw::send_then_drop(&sent, wait, self.config.timeout).await;
        self.push_exchange(role.into(), sent, &r)
    }

    /// Releases `reqs` as one synchronised burst and records each exchange with its release
    /// time: in one packet when the target speaks HTTP/2 (ALPN, or `--http2` for h2c), else
    /// final bytes back to back over HTTP/1.1. The roles are `"{role} i/N"`. Also returns how the
    /// burst was released, which the evidence states next to the spread it achieved.
    pub async fn burst(
        &mut self,
        role: &str,
        reqs: &[Request],
    ) -> Result<(Vec<Exchange>, ReleaseMode), Stop> {
        let sent: Vec<SentRequest> = reqs.iter().map(Request::prepare).collect();
        let opts = burst::BurstOptions {
            timeout: self.config.timeout,
            max_body: self.config.max_body,
            final_bytes: 1,
            release_threads: self.config.release_threads,
            ..burst::BurstOptions::default()
        };
        let report = h2burst::burst_for_target(&sent, &opts, self.config.http2)
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
            out.push(self.push_exchange(format!("{role} {}/{total}", i + 1), s, r));
        }
        Ok((out, report.release))
    }

    /// Sends `original` and, while it is still in flight, a wave of all of `wave` (sent
    /// together; e.g. copies of one duplicate, or one per replica) every `interval`, until the
    /// original completes. Bounded by the request timeout and by `MAX_WAVES`. Returns the
    /// original's exchange and the duplicates', in send order.
    pub async fn held_with_waves(
        &mut self,
        original: Request,
        wave: &[Request],
        interval: std::time::Duration,
    ) -> (Exchange, Vec<Exchange>) {
        use std::sync::atomic::{AtomicBool, Ordering};
        let done = AtomicBool::new(false);
        let client = self.client.clone();
        let deadline = Instant::now() + self.config.timeout;
        let original_fut = async {
            let r = client.send(&original).await;
            done.store(true, Ordering::SeqCst);
            r
        };
        let waves_fut = async {
            let mut sent = Vec::new();
            // Give the original a head start so it is the one that claims the key; on a loaded
            // machine 20 ms was sometimes not enough (probes check who owned, see
            // loser-does-not-unlock).
            tokio::time::sleep(HEAD_START).await;
            for w in 1..=MAX_WAVES {
                if done.load(Ordering::SeqCst) || Instant::now() >= deadline {
                    break;
                }
                let batch = futures::future::join_all(wave.iter().map(|d| client.send(d))).await;
                sent.extend(batch.into_iter().map(|r| (w, r)));
                tokio::time::sleep(interval).await;
            }
            sent
        };
        let ((o_sent, o_resp), waves) = tokio::join!(original_fut, waves_fut);
        let original_ex = self.push_exchange("original (held)".into(), o_sent, &o_resp);
        let total_waves = waves.last().map_or(0, |(w, _)| *w);
        let mut dups = Vec::with_capacity(waves.len());
        for (i, (w, (s, r))) in waves.into_iter().enumerate() {
            let role = format!("duplicate {}, wave {w}/{total_waves}", i + 1);
            dups.push(self.push_exchange(role, s, &r));
        }
        (original_ex, dups)
    }

    /// Reads the effect counter, recording the read. `Ok(None)` when no counter is configured;
    /// `Err` (an ERROR stop) when it is configured but unreadable, since every effect check
    /// would then be guesswork.
    pub async fn count(&mut self, role: &str, tenant_b: bool) -> Result<Option<u64>, Stop> {
        let counter = match &self.config.counter {
            None => return Ok(None),
            Some(c) => c.clone(),
        };
        match counter {
            Counter::Url { url, pointer } => {
                let mut req = Request::counter_read(&self.config, &url);
                if tenant_b {
                    req = match self.as_tenant_b(req) {
                        Some(r) => r,
                        None => return Ok(None),
                    };
                }
                let ex = self.send(role, req).await;
                effects::read_counter(&ex, &pointer).map(Some).map_err(|e| {
                    Stop::Error(format!(
                        "the effect counter could not be read (#{}): {e}; check --count-url and --count-pointer",
                        ex.n
                    ))
                })
            }
            Counter::Command(cmd) => {
                if tenant_b {
                    return Ok(None);
                }
                let (value, line) = effects::run_count_cmd(&cmd, self.config.timeout).await;
                self.note(format!("{role}: {line}"));
                value
                    .map(Some)
                    .map_err(|e| Stop::Error(format!("--count-cmd failed: {e}")))
            }
        }
    }

    /// How many times the operation executed across `attempts`, using the strongest basis
    /// available: the counter delta (`before`/`after`), else distinct ids, else distinct bodies.
    /// The basis is recorded for the report.
    pub fn executions(
        &mut self,
        before: Option<u64>,
        after: Option<u64>,
        attempts: &[&Exchange],
    ) -> Executions {
        let e = effects::executions(
            self.config.counter.as_ref(),
            self.config.id_pointer.as_deref(),
            before,
            after,
            attempts,
        );
        self.basis = Some(e.basis.clone());
        e
    }

    /// The resource id in a response, via `--id-pointer`.
    pub fn resource_id(&self, ex: &Exchange) -> Option<String> {
        effects::resource_id(ex, self.config.id_pointer.as_deref())
    }

    /// A SKIP naming the option that provides `need`, when the target description lacks it.
    pub fn missing(&self, need: crate::probes::Need) -> Option<Stop> {
        use crate::probes::Need;
        let present = match need {
            Need::SecondTenant => self.config.tenant_b.is_some(),
            Need::RestartHook => self.config.restart.is_some(),
            Need::HoldHeader => self.config.hold_header.is_some(),
            Need::InvalidBody => self.config.invalid_body.is_some(),
            Need::CrashHook => self.config.crash.is_some(),
            Need::SecondOperation => self.config.second_url.is_some(),
            Need::Replica => !self.config.replicas.is_empty(),
        };
        (!present).then(|| Stop::Skip(format!("needs {}: pass {}", need.what(), need.option())))
    }

    /// Milliseconds since the probe started.
    pub fn elapsed_ms(&self) -> f64 {
        self.offset_ms(Instant::now())
    }
}
