//! The stress result: its counts, latency and bursts, the violating keys, and the verdict as one
//! probe; as JSON, as the one-testcase run report JUnit, Markdown and HTML read, and as the
//! terminal summary.

use serde::Serialize;

use super::segment;
use super::stats::{self, LatencyRow};
use super::{StressOptions, STRESS_SCHEMA};
use crate::config::Config;
use crate::outcome::Outcome;
use crate::report::{ProbeReport, RunReport, Summary, ToolInfo, SCHEMA};

/// A violating key, listed by id.
#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    pub key: String,
    pub reason: String,
}

/// What the report says of the provider side.
#[derive(Debug, Clone, Serialize)]
pub struct ProviderTally {
    pub profile: &'static str,
    pub url: String,
    /// Where `--provider-tls` wrote the CA certificate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// Each key's first provider call was committed and its answer lost on purpose.
    pub lost_answers: bool,
    pub calls: usize,
    /// Calls that held no key's token: counted, charged to no key.
    pub unattributed_calls: usize,
    pub keys_charged_once: usize,
    pub keys_never_charged: usize,
    pub keys_charged_more: usize,
    /// Keys whose requests reached the provider more than once: a call per duplicate (the
    /// provider's own key is all that stood between them and a second charge), or a correct
    /// retry with the same key after the API's own timeout, which the count cannot tell apart:
    /// shown, not judged (`prov-concurrent-duplicates` judges it on one key).
    pub keys_called_more: usize,
    /// Keys answered 2xx that nothing was charged for.
    pub completed_without_charge: usize,
    /// Whether every call was answered and none arrived for the quiet window before counting.
    pub settled: bool,
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
    /// With a fake provider: each key's charges counted at its ledger.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderTally>,
    /// Where the fake provider listened (and its CA went), for the context lines.
    #[serde(skip)]
    pub provider_line: Option<String>,
}

impl StressReport {
    /// The report of a run of `opts` against `config` that has sent nothing yet: what a run
    /// that could not start reports, and what a finished run fills its counts into.
    pub(super) fn unsent(
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
            provider: None,
            provider_line: None,
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
            .chain(self.provider_line.iter().cloned())
            .collect(),
            summary: Summary::of(&probes),
            probes,
            replay: None,
        }
    }
}

/// Whether a count is zero: a field serde leaves out of the JSON then.
fn is_zero(n: &u64) -> bool {
    *n == 0
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
    if let Some(p) = &r.provider {
        let _ = writeln!(
            out,
            "provider:    {} calls to the {} fake at {}{}; keys charged once {}, never {}, more than once {}{}",
            p.calls,
            p.profile,
            p.url,
            p.ca_file
                .as_ref()
                .map_or(String::new(), |ca| format!(" (CA in {ca})")),
            p.keys_charged_once,
            p.keys_never_charged,
            p.keys_charged_more,
            match p.completed_without_charge {
                0 => String::new(),
                n => format!("; {n} completed without a charge"),
            }
        );
        if p.keys_called_more > 0 {
            let _ = writeln!(
                out,
                "             {} keys reached the provider more than once",
                p.keys_called_more
            );
        }
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
