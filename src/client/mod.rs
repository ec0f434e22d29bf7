//! `idem-check client`: the other half of the contract. An Idempotency-Key protects a payment
//! only if the client uses it right, so this plays the server's part and watches the client.
//!
//! The pipeline: the [`operation`]s to serve are chosen (the built-in payments operation, one
//! given by `--method`/`--path`, or the keyed operations of an API description), with the
//! credential rule of [`credential_rule`] and the error shape of [`error_body`]; the probes of [`checks`]
//! run one at a time through the run loop `run` and `webhook` use ([`crate::runner::each`], the
//! client's side of it in `run.rs`), each playing the [`scenario`]s it reads that have not been
//! played yet: a fresh [`fake_api`] (an empty store, one injected behaviour) started on
//! 127.0.0.1, the user's command run against it by [`command`] (`IDEM_CHECK_BASE_URL`,
//! `IDEM_CHECK_TOKEN` and `IDEM_CHECK_OPERATIONS` in its environment, its process group killed
//! at the deadline or on Ctrl-C), every attempt recorded; then the probe judges the recordings.
//! The result is a [`ClientReport`] (JSON schema `idem-check.client/1`), which also converts to
//! the [`RunReport`] the terminal, JUnit and Markdown renderers read, so a client report looks
//! exactly like a server one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::check::Severity;
use crate::outcome::{self, Outcome, Stop};
use crate::report::{Identity, ProbeReport, RunReport, Summary, ToolInfo};
use crate::suite::Suite;

pub mod checks;
pub mod command;
pub mod credential_rule;
pub mod error_body;
pub mod fake_api;
pub mod operation;
mod report;
mod run;
pub mod scenario;
pub mod sent_key;

pub use run::{listen, run};

use checks::{ClientProbe, Findings, Judging};
use command::RunRecord;
use fake_api::ApiConfig;
use scenario::{Scenario, ScenarioRecord};

/// The JSON schema id of a client report.
pub const SCHEMA: &str = "idem-check.client/1";

/// The environment variable that carries the fake API's base URL.
pub const ENV_BASE_URL: &str = "IDEM_CHECK_BASE_URL";
/// The environment variable that carries the credential's secret.
pub const ENV_TOKEN: &str = "IDEM_CHECK_TOKEN";
/// The environment variable that says how many operations one run performs.
pub const ENV_OPERATIONS: &str = "IDEM_CHECK_OPERATIONS";

/// What `idem-check client` was asked to do.
pub struct ClientOptions {
    /// The client command and its arguments (empty under `--listen`).
    pub command: Vec<String>,
    pub suite: Suite,
    /// The longest one scenario (all its runs of the command, or under `--listen` all it
    /// serves) may take.
    pub timeout: Duration,
    /// Under `--listen`, how long no request may arrive at all, final answer or not, before
    /// the client counts as done (one that gave up after a lost response never sends a final
    /// request).
    pub listen_idle: Duration,
    pub strict: bool,
    /// The scenarios to run, in catalog order.
    pub scenarios: Vec<&'static Scenario>,
    /// What the fake API serves, and the credential it takes.
    pub api: Arc<ApiConfig>,
}

/// One scenario as reported in JSON: what was done and what the command did.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioReport {
    pub id: &'static str,
    pub what: &'static str,
    pub base_url: String,
    pub attempts: usize,
    pub payments: usize,
    /// The credentials the attempts carried ("bearer", "basic", "header X-Api-Key", "none").
    pub credentials: Vec<String>,
    /// Empty under `--listen`.
    pub runs: Vec<RunRecord>,
    /// The attempts on a time axis, for the HTML page (the JSON report has them in full under
    /// the checks).
    #[serde(skip)]
    pub lane: crate::report::html::Lane,
}

/// Everything `idem-check client` found.
#[derive(Debug, Clone, Serialize)]
pub struct ClientReport {
    pub schema: &'static str,
    pub tool: ToolInfo,
    /// The client command as given (secrets masked on rendering).
    pub command: Vec<String>,
    pub suite: String,
    /// The operations the fake API served ("POST /api/payments").
    pub operations: Vec<String>,
    /// The read operations that served created resources back ("GET /api/payments/{id}").
    pub reads: Vec<String>,
    /// Where the key was read and how it was judged ("header Idempotency-Key, ietf",
    /// "body /idempotency_key, token").
    pub key: String,
    /// "problem+json errors", "stripe error envelopes", "--error-body errors".
    pub errors: &'static str,
    pub strict: bool,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub duration_ms: f64,
    /// True when Ctrl-C stopped the run: the probe it stopped is an ERROR, every probe it kept
    /// from starting a SKIP, and only the scenarios that ended are reported.
    pub interrupted: bool,
    pub summary: Summary,
    /// The client checks that read a selected scenario, in catalog order, each with the
    /// attempts it judged.
    pub probes: Vec<ProbeReport>,
    pub scenarios: Vec<ScenarioReport>,
}

impl ClientReport {
    /// The report in the shape the terminal, JUnit and Markdown renderers read.
    pub fn as_run_report(&self) -> RunReport {
        let target = if self.command.is_empty() {
            "client under --listen".to_string()
        } else {
            format!("client: {}", self.command.join(" "))
        };
        RunReport {
            schema: SCHEMA,
            tool: self.tool.clone(),
            label: "client".into(),
            reference: false,
            target,
            suite: self.suite.clone(),
            strict: self.strict,
            started_at: self.started_at.clone(),
            duration_ms: self.duration_ms,
            interrupted: self.interrupted,
            context: vec![
                format!(
                    "{} scenario{} against a fake API on 127.0.0.1 serving {}{} with {}",
                    self.scenarios.len(),
                    if self.scenarios.len() == 1 { "" } else { "s" },
                    self.operations.join(", "),
                    if self.reads.is_empty() {
                        String::new()
                    } else {
                        format!(" (read back by {})", self.reads.join(", "))
                    },
                    self.errors
                ),
                format!("key: {}", self.key),
            ],
            summary: self.summary.clone(),
            probes: self.probes.clone(),
            replay: None,
        }
    }
}

impl ClientReport {
    /// The run report for the terminal: a full run with many scenarios must fit on two
    /// screens, so a probe that failed keeps only its failed checks (each with its expected and
    /// actual values: the evidence, in two lines) and the timeline facts about the attempts they
    /// cite; the attempts themselves, the effect basis every client check shares, and the runs'
    /// output are left to the file reports, which keep everything (the evidence block says
    /// where the cited attempts are). A probe that could not judge the client (ERROR: it made
    /// no request, or was killed) keeps the runs' output: it is the only clue to why.
    pub fn as_terminal_report(&self) -> RunReport {
        let mut run = self.as_run_report();
        for p in &mut run.probes {
            if p.outcome != crate::outcome::Outcome::Error {
                p.timeline
                    .retain(|line| !line.contains(" stdout| ") && !line.contains(" stderr| "));
            }
            p.timeline
                .retain(|line| !line.contains("earlier lines in the JSON report"));
            if !p
                .checks
                .iter()
                .any(|c| !c.passed && c.severity != Severity::Info)
            {
                continue;
            }
            p.checks
                .retain(|c| !c.passed && c.severity != Severity::Info);
            let cited: Vec<usize> = p
                .checks
                .iter()
                .flat_map(|c| c.exchanges.iter().copied())
                .collect();
            p.timeline
                .retain(|line| exchange_refs(line).any(|n| cited.contains(&n)));
            p.exchanges.clear();
            p.effect_basis = None;
        }
        run.context
            .push("every attempt and all output in --report-json and --report-html".into());
        run
    }
}

/// The report of a run: the probes' reports (in catalog order) and the scenarios that were
/// played.
fn build(
    opts: &ClientOptions,
    records: Vec<ScenarioRecord>,
    probes: Vec<ProbeReport>,
    started_at: String,
    started: Instant,
    interrupted: bool,
) -> ClientReport {
    ClientReport {
        schema: SCHEMA,
        tool: ToolInfo::default(),
        command: opts.command.clone(),
        suite: opts.suite.name.clone(),
        operations: opts.api.operations.iter().map(|o| o.describe()).collect(),
        reads: opts
            .api
            .operations
            .iter()
            .filter_map(|o| o.read.as_ref().map(|r| format!("GET {r}")))
            .collect(),
        key: opts.api.carrier.to_string(),
        errors: opts.api.errors.describe(),
        strict: opts.strict,
        started_at,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        interrupted,
        summary: Summary::of(&probes),
        probes,
        scenarios: records
            .into_iter()
            .map(|r| ScenarioReport {
                lane: lane(&r, opts.timeout),
                id: r.scenario.id,
                what: r.scenario.what,
                base_url: r.base_url,
                attempts: r.attempts.len(),
                payments: r.payments,
                credentials: {
                    let mut seen: Vec<String> =
                        r.attempts.iter().map(|a| a.credential.clone()).collect();
                    seen.sort();
                    seen.dedup();
                    seen
                },
                runs: r.runs,
            })
            .collect(),
    }
}

/// A scenario as the HTML page draws it: each attempt with whether it kept the key and the
/// payload of the attempt before it of the same operation (the rule of the client checks), and
/// each run of the command.
fn lane(r: &ScenarioRecord, timeout: Duration) -> crate::report::html::Lane {
    use crate::report::html::{Lane, LaneAttempt, LaneRun, Sameness};
    let attempts = r
        .attempts
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let previous = r.attempts[..i]
                .iter()
                .rev()
                .find(|p| p.operation == a.operation && p.op == a.op);
            let same = |same: bool| {
                if same {
                    Sameness::Same
                } else {
                    Sameness::Changed
                }
            };
            LaneAttempt {
                op: a.op,
                operation: a.operation,
                start_ms: a.exchange.start_ms,
                duration_ms: a.exchange.duration_ms,
                status: a.exchange.status(),
                key: match (&a.key, previous) {
                    (None, _) => Sameness::Absent,
                    (Some(_), None) => Sameness::First,
                    (Some(_), Some(p)) => same(a.same_key_as(p)),
                },
                payload: previous.map_or(Sameness::First, |p| same(a.payload == p.payload)),
            }
        })
        .collect();
    Lane {
        scenario: r.scenario.id.to_string(),
        what: r.scenario.what.to_string(),
        operations: r.scenario.runs,
        attempts,
        runs: r
            .runs
            .iter()
            .map(|run| LaneRun {
                run: run.run,
                start_ms: run.start_ms,
                duration_ms: run.duration_ms,
                exit: run.exit.describe(timeout),
                success: run.exit.success(),
            })
            .collect(),
        payments: r.payments,
    }
}

/// One probe's report from the scenarios it reads that were played. `stop` is why its play
/// ended early (a scenario could not be played, the time limit): then nothing is judged, and
/// the scenarios that were played are its evidence.
fn judge(
    p: &ClientProbe,
    records: &[ScenarioRecord],
    opts: &ClientOptions,
    stop: Option<Stop>,
) -> ProbeReport {
    let mut mine: Vec<ScenarioRecord> = records
        .iter()
        .filter(|r| p.scenarios.contains(&r.scenario.id))
        .cloned()
        .collect();
    // Number the attempts across the probe's scenarios, as the evidence cites them. (Keys that
    // all start alike are told apart where they are shown: see `report::exchange_line::Keys`.)
    let mut n = 0;
    for r in &mut mine {
        let mut per_op = std::collections::HashMap::<usize, usize>::new();
        for a in &mut r.attempts {
            n += 1;
            a.exchange.n = n;
            a.exchange.role = crate::http::exchange::Role::new(if a.operation {
                let i = per_op.entry(a.op).or_default();
                *i += 1;
                format!("{} op {} attempt {i}", r.scenario.id, a.op)
            } else if a.read {
                format!("{} read back", r.scenario.id)
            } else {
                format!("{} other request", r.scenario.id)
            });
        }
    }
    let served: Vec<String> = opts.api.operations.iter().map(|o| o.describe()).collect();
    let judged = match stop {
        None => (p.judge)(&Judging {
            records: &mine,
            key_syntax: opts.suite.key_syntax,
            carrier: &opts.api.carrier,
            timeout: opts.timeout,
            served: &served.join(" or "),
        }),
        Some(stop) => Findings {
            checks: Vec::new(),
            stop: Some(stop),
        },
    };
    let mut verdict = outcome::decide(&judged.checks, judged.stop.as_ref(), opts.strict);
    verdict.reason = one_line_reason(&verdict.reason, &judged.checks);
    ProbeReport {
        outcome: verdict.outcome,
        reason: verdict.reason,
        effect_basis: Some("resources in the fake API's store".into()),
        duration_ms: mine.iter().map(ScenarioRecord::duration_ms).sum(),
        checks: judged.checks,
        timeline: mine
            .iter()
            .flat_map(|r| timeline(r, opts.timeout))
            .collect(),
        exchanges: mine
            .into_iter()
            .flat_map(|r| r.attempts.into_iter().map(|a| a.exchange))
            .collect(),
        ..verdict_only(p, Outcome::Skip, String::new())
    }
}

/// The report of `p` with its verdict and nothing else: a probe that did not run, or the
/// identity a judged probe's evidence is added to.
fn verdict_only(p: &ClientProbe, outcome: Outcome, reason: String) -> ProbeReport {
    let who = Identity {
        id: p.id,
        group: "client",
        section: p.section,
        stimulus: p.stimulus,
        requirement: p.requirement,
    };
    ProbeReport::verdict_only(who, outcome, reason)
}

/// The reason a verdict gives, on one line that no renderer needs to cut: the failed check's
/// `what`, and what was seen when that still fits.
fn one_line_reason(reason: &str, checks: &[crate::check::Check]) -> String {
    if reason.chars().count() <= crate::report::evidence::QUOTE_MAX {
        return reason.to_string();
    }
    let Some(c) = checks.iter().find(|c| reason.starts_with(c.what.as_str())) else {
        return crate::redact::cut_reason(reason, crate::report::evidence::QUOTE_MAX);
    };
    let short = format!("{}: {}", c.what, c.actual);
    if short.chars().count() <= crate::report::evidence::QUOTE_MAX {
        short
    } else {
        format!("{} (see the check below)", c.what)
    }
}

/// Output lines of a stream shown in the text evidence (the JSON report has all of it).
const OUTPUT_LINES: usize = 3;

/// The scenario in a few lines: what was injected, then in order of arrival every attempt after
/// the first of its operation (how long after the previous answer, same key or not, same
/// payload or not) and every read of a created resource (an SDK may fetch what it created, or
/// what a conflict names), how each run ended and the tail of its output.
fn timeline(r: &ScenarioRecord, timeout: Duration) -> Vec<String> {
    let id = r.scenario.id;
    let mut out = vec![format!("{id}: {}", r.scenario.what)];
    for (i, next) in r.attempts.iter().enumerate() {
        if next.read {
            let url = &next.exchange.request.url;
            let path = url.strip_prefix(r.base_url.as_str()).unwrap_or(url);
            out.push(format!(
                "{id}: #{} {} {path}: {} (reads back a created resource)",
                next.exchange.n,
                next.exchange.request.method,
                next.exchange.status_text(),
            ));
            continue;
        }
        let previous = r.attempts[..i]
            .iter()
            .rev()
            .find(|p| p.operation && p.op == next.op);
        let Some(prev) = previous.filter(|_| next.operation) else {
            continue;
        };
        let key = match (&prev.key, &next.key) {
            (_, None) => "no key",
            (None, Some(_)) => "a key (none before)",
            _ if next.same_key_as(prev) => "same key",
            _ => "another key",
        };
        let payload = if next.payload == prev.payload {
            "same payload"
        } else {
            "another payload"
        };
        out.push(format!(
            "{id}: #{} {:.0} ms after #{} ended ({}), {key}, {payload}",
            next.exchange.n,
            (next.exchange.start_ms - prev.exchange.end_ms()).max(0.0),
            prev.exchange.n,
            prev.exchange.status_text(),
        ));
    }
    for run in &r.runs {
        out.push(format!(
            "{id}: run {} {} after {:.0} ms",
            run.run,
            run.exit.describe(timeout),
            run.duration_ms
        ));
        for (name, stream) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
            let lines: Vec<&str> = stream.text.lines().collect();
            let skip = lines.len().saturating_sub(OUTPUT_LINES);
            if skip > 0 {
                out.push(format!(
                    "{id}: run {} {name}: ({skip} earlier lines in the JSON report)",
                    run.run
                ));
            }
            for line in &lines[skip..] {
                out.push(format!("{id}: run {} {name}| {line}", run.run));
            }
        }
    }
    if r.runs.is_empty() {
        out.push(format!("{id}: exit status not observed (--listen)"));
    }
    out.push(format!(
        "{id}: {} payment{} at the end",
        r.payments,
        if r.payments == 1 { "" } else { "s" }
    ));
    out
}
/// The exchange numbers a timeline line names: every `#N` in it (`#3`, both ends of `#2–#5`).
/// Timeline lines are the recorder's prose notes, kept in a client summary only when they
/// speak of a cited exchange.
fn exchange_refs(text: &str) -> impl Iterator<Item = usize> + '_ {
    text.split('#').skip(1).filter_map(|after| {
        let end = after
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after.len());
        after[..end].parse().ok()
    })
}
