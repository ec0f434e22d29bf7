//! Aggregates of a stress run that stay the same size however many requests are sent: status
//! counts, one latency histogram per outcome class, and how the bursts were released.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::http::exchange::Exchange;
use crate::http::release::ReleaseMode;
use crate::http::role::Resend;
use crate::http::ErrorKind;
use crate::outcome::Stop;

use super::key;

/// Counts and histograms.
#[derive(Default)]
pub struct Stats {
    pub requests: u64,
    /// By status, `None` for no response; named only when the report is built, so counting a
    /// request allocates nothing.
    statuses: BTreeMap<Option<u16>, u64>,
    /// The requests without a response, by why ([`ErrorKind`]): "7 timeouts, 3 closed before
    /// any byte".
    errors: BTreeMap<ErrorKind, u64>,
    latency: BTreeMap<&'static str, Histogram<u64>>,
    /// The few ways bursts were released, each described only when the report is built.
    releases: Vec<(ReleaseMode, u64)>,
    spread: Option<Histogram<u64>>,
    /// Requests sent again with a new `--auth-cmd` credential after a 401.
    pub renewed: u64,
}

/// How the bursts of a run were released: how many each way, and their release spread in µs.
/// The spread says how hard the run pressed on a check-then-set window; concurrent keys share
/// one set of real-time release threads, so under concurrency some bursts release alone.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BurstRows {
    pub released: BTreeMap<String, u64>,
    pub spread_p50_us: f64,
    pub spread_p90_us: f64,
    pub spread_max_us: f64,
}

/// Requests that got no answer from the idempotency layer, of one kind.
pub struct Bypassed {
    pub count: u64,
    /// How the report names them: "throttled (429)".
    pub what: &'static str,
    /// Why they say nothing of the keys.
    pub why: &'static str,
    /// The run's stop when they are most of its requests.
    pub most: fn(String) -> Stop,
    /// What most of the requests being so means, and what the user can do about it.
    pub advice: &'static str,
}

/// One row of the latency table, in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRow {
    pub class: String,
    pub count: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The histogram: buckets whose upper bounds double from [`FIRST_BUCKET_US`], up to the
    /// bucket holding the slowest request.
    pub buckets: Vec<LatencyBucket>,
}

/// Requests whose latency fell at or below `upper_ms` (and above the previous bucket's bound).
#[derive(Debug, Clone, Serialize)]
pub struct LatencyBucket {
    pub upper_ms: f64,
    pub count: u64,
}

/// The upper bound of the first histogram bucket: loopback answers take tens of µs.
pub const FIRST_BUCKET_US: u64 = 32;

impl LatencyRow {
    /// The row as the HTML page draws it.
    pub fn html_view(&self) -> crate::report::html::Latency<'_> {
        crate::report::html::Latency {
            class: &self.class,
            count: self.count,
            p50_ms: self.p50_ms,
            p90_ms: self.p90_ms,
            p99_ms: self.p99_ms,
            max_ms: self.max_ms,
            buckets: self.buckets.iter().map(|b| (b.upper_ms, b.count)).collect(),
        }
    }
}

impl Stats {
    /// Adds one exchange.
    pub fn add(&mut self, e: &Exchange) {
        self.requests += 1;
        *self.statuses.entry(e.status()).or_default() += 1;
        if let Some(error) = e.error() {
            *self.errors.entry(error.kind()).or_default() += 1;
        }
        self.renewed += u64::from(e.role.resent == Some(Resend::NewCredential));
        let micros = key::latency(e).as_micros().clamp(1, 3_600_000_000) as u64;
        let hist = self.latency.entry(key::class(e)).or_insert_with(|| {
            // 1 µs to an hour at 3 significant digits: a fixed few kilobytes per class.
            Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("static histogram bounds")
        });
        hist.saturating_record(micros);
    }

    /// Adds one key's burst: how it was released and its release spread.
    pub fn add_burst(&mut self, release: &ReleaseMode, spread_us: f64) {
        match self.releases.iter_mut().find(|(mode, _)| mode == release) {
            Some((_, n)) => *n += 1,
            None => self.releases.push((release.clone(), 1)),
        }
        let hist = self.spread.get_or_insert_with(|| {
            // 1 µs to 10 s at 3 significant digits.
            Histogram::new_with_bounds(1, 10_000_000, 3).expect("static histogram bounds")
        });
        hist.saturating_record(spread_us.round().max(1.0) as u64);
    }

    /// The bursts' release modes and spread percentiles (zeros without bursts).
    pub fn bursts(&self) -> BurstRows {
        let at = |q: f64| {
            self.spread
                .as_ref()
                .map_or(0.0, |h| h.value_at_quantile(q) as f64)
        };
        BurstRows {
            released: self
                .releases
                .iter()
                .map(|(mode, n)| (mode.to_string(), *n))
                .collect(),
            spread_p50_us: at(0.5),
            spread_p90_us: at(0.9),
            spread_max_us: self.spread.as_ref().map_or(0.0, |h| h.max() as f64),
        }
    }

    /// Status counts, e.g. {"201": 2000, "409": 14000}.
    pub fn statuses(&self) -> BTreeMap<String, u64> {
        self.statuses
            .iter()
            .map(|(status, n)| (crate::http::exchange::status_text(*status), *n))
            .collect()
    }

    /// The requests without a response, by kind, e.g. {timeout: 7, closed-before-any-byte: 3}.
    pub fn errors(&self) -> BTreeMap<ErrorKind, u64> {
        self.errors.clone()
    }

    /// The requests the per-key checks leave out (see `key::judge`) because no answer of the
    /// idempotency layer came back: throttled by a rate limiter (429), refused a credential
    /// (401), or unanswered; what each means for the run when it is most of the requests.
    pub fn bypassed(&self) -> [Bypassed; 3] {
        let answered = |status| self.statuses.get(&status).copied().unwrap_or(0);
        [
            Bypassed {
                count: answered(Some(crate::http::throttle::TOO_MANY_REQUESTS)),
                what: "throttled (429)",
                why: "a rate limiter answered them, not the idempotency layer",
                most: |why| Stop::Inconclusive(why.into()),
                advice: "most of the load never reached the idempotency layer; lower --rate or --concurrency, or raise the rate limit for this client",
            },
            Bypassed {
                count: answered(Some(crate::http::raw::UNAUTHORIZED)),
                what: "refused (401)",
                why: "the API did not accept their credential, and said nothing of the key",
                most: |why| Stop::Error(why.into()),
                advice: "most of the load never reached the idempotency layer; give the API's credential with -H, or --auth-cmd for one that expires",
            },
            Bypassed {
                count: self.unanswered(),
                what: "unanswered",
                why: "they timed out or failed before a response; each may still have executed, which the counter allows for",
                most: |why| Stop::Inconclusive(why.into()),
                advice: "most keys cannot be judged; is the target answering within --timeout at this --concurrency?",
            },
        ]
    }

    /// How many requests got no response at all (timed out, refused, reset).
    pub fn unanswered(&self) -> u64 {
        self.statuses.get(&None).copied().unwrap_or(0)
    }

    /// Percentiles per class.
    pub fn latency_rows(&self) -> Vec<LatencyRow> {
        let ms = |v: u64| Duration::from_micros(v).as_secs_f64() * 1000.0;
        self.latency
            .iter()
            .map(|(class, h)| LatencyRow {
                class: class.to_string(),
                count: h.len(),
                p50_ms: ms(h.value_at_quantile(0.50)),
                p90_ms: ms(h.value_at_quantile(0.90)),
                p99_ms: ms(h.value_at_quantile(0.99)),
                max_ms: ms(h.max()),
                // The i-th step of a log iteration ends at FIRST_BUCKET_US × 2^i.
                buckets: h
                    .iter_log(FIRST_BUCKET_US, 2.0)
                    .zip(0u32..)
                    .map(|(v, i)| LatencyBucket {
                        upper_ms: ms(FIRST_BUCKET_US.saturating_mul(1 << i.min(40))),
                        count: v.count_since_last_iteration(),
                    })
                    .collect(),
            })
            .collect()
    }
}

/// Counts by kind as a summary says them, most first: "7 timeouts, 3 closed before any byte".
pub fn errors_line(errors: &BTreeMap<ErrorKind, u64>) -> String {
    let mut counts: Vec<(ErrorKind, u64)> = errors.iter().map(|(k, n)| (*k, *n)).collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    counts
        .into_iter()
        .map(|(kind, n)| kind.counted(n))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::exchange::{Role, SentRequest};
    use crate::http::{HttpError, Phase};

    fn failed(error: HttpError) -> Exchange {
        Exchange {
            n: 1,
            role: Role::default(),
            start_ms: 0.0,
            duration_ms: 1.0,
            release_us: None,
            request: SentRequest {
                method: "POST".into(),
                url: "http://127.0.0.1:1/".into(),
                headers: Vec::new(),
                body: Vec::new(),
            },
            outcome: Err(error),
        }
    }

    #[test]
    fn unanswered_requests_are_counted_by_kind() {
        let mut stats = Stats::default();
        let timeout = HttpError::Timeout {
            phase: Phase::FirstByte,
            after: Duration::from_secs(10),
        };
        for _ in 0..7 {
            stats.add(&failed(timeout.clone()));
        }
        for _ in 0..3 {
            stats.add(&failed(HttpError::ClosedBeforeAnyByte("reset".into())));
        }
        assert_eq!(stats.unanswered(), 10);
        let errors = stats.errors();
        assert_eq!(errors[&ErrorKind::Timeout], 7);
        assert_eq!(errors[&ErrorKind::ClosedBeforeAnyByte], 3);
        assert_eq!(errors_line(&errors), "7 timeouts, 3 closed before any byte");
        assert_eq!(
            serde_json::to_value(&errors).unwrap(),
            serde_json::json!({"timeout": 7, "closed-before-any-byte": 3})
        );
    }
}
