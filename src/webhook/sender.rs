//! The sender: signs deliveries as the scheme's senders do, sends them, and records every
//! exchange in the [`Trial`] of the check that sent it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::check::Check;
use crate::http::burst::BurstOptions;
use crate::http::client::Client;
use crate::http::exchange::{Exchange, Role, SentRequest};
use crate::http::h2burst::burst_for_target;
use crate::http::raw::RawResponse;
use crate::http::Request;
use crate::probes::kit::recorder::{Recorder, Traffic};
use crate::runner::each::Ends;

use super::event::{Event, Template};
use super::resign::SignedAt;
use super::scheme::Scheme;

/// What one check sent and saw, and what it judged. Its exchanges and timeline are kept by
/// the probe kit's [`Recorder`], the one place every mode numbers and stores exchanges: a
/// delivery sent again after the consumer closed an idle connection is one exchange that says
/// so, and counter reads are marked as such.
#[derive(Debug)]
pub struct Trial {
    pub record: Recorder,
    pub checks: Vec<Check>,
    /// The first settled count the check read, and whether it sent nothing before it.
    pub first_count: Option<(u64, bool)>,
    /// The last settled count, with the deliveries the trial had sent by then.
    last_count: Option<(u64, usize)>,
}

impl Default for Trial {
    fn default() -> Self {
        Trial::new()
    }
}

impl Trial {
    pub fn new() -> Trial {
        Trial {
            record: Recorder::new(Instant::now()),
            checks: Vec::new(),
            first_count: None,
            last_count: None,
        }
    }

    /// Keeps a settled count the check read.
    pub fn counted(&mut self, value: u64) {
        let sent = self.record.sent();
        self.first_count.get_or_insert((value, sent == 0));
        self.last_count = Some((value, sent));
    }

    /// The counts the check began and ended on, for the run loop's late-effect rule: an
    /// effect that lands between this check's last count and the next check's first is this
    /// check's.
    pub fn ends(&self) -> Ends {
        let sent = self.record.sent();
        Ends {
            opening: self.first_count.filter(|(_, first)| *first).map(|(v, _)| v),
            closing: self.last_count.filter(|(_, s)| *s == sent).map(|(v, _)| v),
            idle: sent == 0 && self.first_count.is_none(),
        }
    }

    /// Records a timeline fact for the evidence.
    pub fn note(&mut self, line: impl Into<String>) {
        self.record.note(line);
    }

    /// Records a delivery (or another request to the consumer) and returns it, numbered.
    fn delivery(&mut self, role: impl Into<Role>, sent: SentRequest, r: &RawResponse) -> Exchange {
        self.record.record(role, sent, r, Traffic::Operation)
    }
}

/// How many deliveries the sender has sent: shared by the sender, which counts, and the
/// [`super::counts::Counts`], which may carry a quiet window over only while it has not moved.
#[derive(Debug, Default, Clone)]
pub struct Deliveries(Arc<AtomicU64>);

impl Deliveries {
    fn one_more(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    pub fn so_far(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Body bytes kept per answer, as the client keeps them.
const MAX_BODY: usize = 1 << 20;

/// Which key signs a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signer {
    /// `--secret`.
    Genuine,
    /// `--source-b-secret`: a second source.
    SourceB,
    /// A key the consumer does not know.
    Wrong,
}

/// Signs and sends deliveries to the consumer.
pub struct Sender {
    client: Arc<Client>,
    /// How raw connections are made: for the delivery whose connection is dropped.
    connector: Arc<crate::http::Connector>,
    timeout: std::time::Duration,
    url: url::Url,
    pub scheme: Scheme,
    pub template: Template,
    key: Vec<u8>,
    key_b: Option<Vec<u8>>,
    wrong: Vec<u8>,
    sent: Deliveries,
    /// How far from this sender's clock each delivery was signed, for the JSON report.
    signed_at: SignedAt,
}

impl Sender {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: Arc<Client>,
        connector: Arc<crate::http::Connector>,
        timeout: std::time::Duration,
        url: url::Url,
        scheme: Scheme,
        template: Template,
        key: Vec<u8>,
        key_b: Option<Vec<u8>>,
        sent: Deliveries,
    ) -> Sender {
        // A key of the same form as a real one, which no consumer was given.
        let wrong = if matches!(scheme, Scheme::Standard | Scheme::Svix) {
            b"idem-check: not the consumer's".to_vec()
        } else {
            b"whsec_idemcheckNotTheConsumersSecret".to_vec()
        };
        Sender {
            client,
            connector,
            timeout,
            url,
            scheme,
            template,
            key,
            key_b,
            wrong,
            sent,
            signed_at: SignedAt::default(),
        }
    }

    /// What recomputes this sender's signatures in a reproduce line: its keys, the secrets'
    /// as `var` and `var_b`, the wrong key as it is (no consumer knows it).
    pub fn resigner(
        &self,
        var: &'static str,
        var_b: &'static str,
    ) -> super::resign::WebhookResigner {
        let mut keys = vec![(self.key.clone(), Some(var))];
        keys.extend(self.key_b.clone().map(|k| (k, Some(var_b))));
        keys.push((self.wrong.clone(), None));
        super::resign::WebhookResigner::new(self.scheme, keys).signed_at(self.signed_at.clone())
    }

    pub fn has_source_b(&self) -> bool {
        self.key_b.is_some()
    }

    fn key(&self, signer: Signer) -> &[u8] {
        match signer {
            Signer::Genuine => &self.key,
            Signer::SourceB => self.key_b.as_deref().unwrap_or(&self.key),
            Signer::Wrong => &self.wrong,
        }
    }

    /// Seconds since the epoch by this machine's clock.
    pub fn now() -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
    }

    /// A new event, made now.
    pub fn event(&self) -> Event {
        self.template.event(self.scheme, Self::now())
    }

    /// A delivery of `event` with `body`, signed at `timestamp` with each of `signers`.
    pub fn delivery(
        &self,
        event: &Event,
        body: &[u8],
        timestamp: i64,
        signers: &[Signer],
        retry: u32,
    ) -> Request {
        let keys: Vec<&[u8]> = signers.iter().map(|s| self.key(*s)).collect();
        let headers = self
            .scheme
            .headers(&event.meta, body, timestamp, &keys, retry);
        let signature = self.scheme.signature_headers()[0];
        if let Some(h) = headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(signature))
        {
            self.signed_at.note(&h.value_str(), timestamp - Self::now());
        }
        Request {
            method: "POST".into(),
            url: self.url.clone(),
            headers,
            body: body.to_vec(),
        }
    }

    /// The `retry`-th delivery of `event`, signed genuinely `retry` seconds after `timestamp`
    /// (a real retry comes later, so its signature differs).
    pub fn signed(&self, event: &Event, timestamp: i64, retry: u32) -> Request {
        self.delivery(
            event,
            &event.body,
            timestamp + i64::from(retry),
            &[Signer::Genuine],
            retry,
        )
    }

    /// Sends `req` to `url` instead of the consumer's URL (a replica), recording the exchange.
    pub async fn send_to(
        &self,
        trial: &mut Trial,
        role: impl Into<Role>,
        req: &Request,
        url: &url::Url,
    ) -> Exchange {
        self.send(trial, role, &req.clone().with_url(url.clone()))
            .await
    }

    /// Sends `reqs` as one synchronised burst, the race engine `run`'s concurrent-duplicates
    /// uses (see [`crate::http::burst`]): every connection opened and every request written but
    /// its last byte, then the last bytes released back to back, so the copies reach the
    /// consumer inside microseconds of each other. Records the exchanges in order, each with
    /// its release time, and a timeline line with the spread achieved. `Err` only when the
    /// burst could not be staged at all.
    pub async fn burst(
        &self,
        trial: &mut Trial,
        role: &str,
        reqs: &[Request],
    ) -> Result<Vec<Exchange>, String> {
        reqs.iter().for_each(|_| self.sent.one_more());
        let sent: Vec<_> = reqs.iter().map(Request::prepare).collect();
        let opts = BurstOptions {
            timeout: self.timeout,
            max_body: MAX_BODY,
            final_bytes: 1,
            ..BurstOptions::default()
        };
        let report = burst_for_target(&self.connector, &sent, &opts, false)
            .await
            .map_err(|e| format!("the burst could not be staged: {e:#}"))?;
        let n = report.responses.len();
        let exchanges: Vec<Exchange> = report
            .requests
            .into_iter()
            .zip(report.responses.iter())
            .enumerate()
            .map(|(i, (s, raw))| trial.delivery(Role::nth(role, i + 1, n), s, raw))
            .collect();
        let releases: Vec<f64> = exchanges.iter().filter_map(|e| e.release_us).collect();
        let spread = match (
            releases.iter().copied().reduce(f64::min),
            releases.iter().copied().reduce(f64::max),
        ) {
            (Some(lo), Some(hi)) => format!("released within {:.0} µs {}", hi - lo, report.release),
            _ => "release times unknown".into(),
        };
        trial.note(format!(
            "#{}–#{} {spread}",
            exchanges.first().map_or(0, |e| e.n),
            exchanges.last().map_or(0, |e| e.n),
        ));
        Ok(exchanges)
    }

    /// Writes `req` whole, waits `wait`, and closes the connection without reading the answer:
    /// a sender whose acknowledgement was lost. Recorded with no response.
    pub async fn send_and_drop(
        &self,
        trial: &mut Trial,
        role: impl Into<Role>,
        req: &Request,
        wait: std::time::Duration,
    ) -> Exchange {
        self.sent.one_more();
        let sent = req.prepare();
        let raw =
            crate::http::raw::send_then_drop(&self.connector, &sent, wait, self.timeout).await;
        trial.record.record(role, sent, &raw, Traffic::Operation)
    }

    /// A keep-alive connection to the consumer, used once and left idle: whether the consumer
    /// closes it tells whether a restart took it down.
    pub async fn idle_connection(
        &self,
    ) -> Result<crate::http::raw::IdleConnection, crate::http::raw::NotKept> {
        crate::http::raw::IdleConnection::open(&self.connector, &self.url, &[], self.timeout).await
    }

    /// A POST with an empty body to `url` (releasing a hold), recorded.
    pub async fn post(&self, trial: &mut Trial, role: &str, url: &url::Url) -> Exchange {
        let req = Request {
            method: "POST".into(),
            url: url.clone(),
            headers: Vec::new(),
            body: Vec::new(),
        };
        self.send(trial, role, &req).await
    }

    /// Sends `req`, recording the exchange in `trial`.
    pub async fn send(&self, trial: &mut Trial, role: impl Into<Role>, req: &Request) -> Exchange {
        self.sent.one_more();
        let (sent, raw) = self.client.send(req).await;
        trial.delivery(role, sent, &raw)
    }
}
