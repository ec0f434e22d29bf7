//! Runs the selected webhook checks one at a time (they share one effect meter) and assembles
//! the run's [`RunReport`], the same model `run` reports with.

use std::time::{Instant, SystemTime};

use crate::check::{Check, Severity, Symptom};
use crate::outcome::{decide, Outcome, Stop};
use crate::report::{ProbeReport, RunReport, Summary, ToolInfo, SCHEMA};
use crate::runner::{Observer, PROBE_TIME_LIMIT};

use super::checks::{self, Env, WebhookCheck, GROUP};
use super::sender::Trial;

/// What the report says of the run besides its checks.
pub struct RunInfo {
    pub label: String,
    pub reference: bool,
    /// The consumer's URL, secrets already removed.
    pub target: String,
    pub strict: bool,
    pub context: Vec<String>,
}

/// Runs `selection` in catalog order and reports it. `wh-first-delivery` always runs first,
/// as the calibration: if it does not pass, the others SKIP naming it.
pub async fn run(
    env: &Env,
    selection: &[&'static WebhookCheck],
    info: RunInfo,
    observer: &dyn Observer,
    interrupt: impl std::future::Future<Output = ()>,
) -> RunReport {
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let start = Instant::now();
    tokio::pin!(interrupt);
    let mut probes: Vec<ProbeReport> = Vec::new();
    let mut stops: Vec<Option<Stop>> = Vec::new();
    let mut calibration: Option<String> = None;
    // The last settled count of the last check that counted, and its report's index.
    let mut last: Option<(u64, usize)> = None;
    let mut interrupted = false;
    for def in ordered(selection) {
        observer.started(def.id);
        let begun = Instant::now();
        let mut trial = Trial::new();
        let stop = if let Some(why) = &calibration {
            Some(Stop::Skip(why.clone().into()))
        } else {
            tokio::select! {
                biased;
                () = &mut interrupt => {
                    interrupted = true;
                    Some(Stop::Error("interrupted (Ctrl-C)".into()))
                }
                played = tokio::time::timeout(time_limit(def, env), checks::play(def.id, env, &mut trial)) => match played {
                    Ok(r) => r.err(),
                    Err(_) => Some(Stop::Error(format!(
                        "the check did not finish within {} s; the consumer may be hanging (raise --timeout?)",
                        time_limit(def, env).as_secs()
                    ).into())),
                },
            }
        };
        // Effects that landed after the previous check's last count are that check's.
        if let (Some((count, i)), Some(first)) = (last, trial.first_count) {
            if first != count {
                charge_late(
                    &mut probes[i],
                    stops[i].as_ref(),
                    count,
                    first,
                    def.id,
                    info.strict,
                );
            }
        }
        if let Some(c) = trial.last_count {
            last = Some((c, probes.len()));
        }
        let report = report(def, &trial, stop.as_ref(), info.strict, begun, env);
        if def.id == "wh-first-delivery" && report.outcome != Outcome::Pass {
            calibration = Some(format!(
                "not run: the calibration wh-first-delivery did not pass ({})",
                report.reason
            ));
        }
        observer.finished(&report);
        probes.push(report);
        stops.push(stop);
        if interrupted {
            break;
        }
    }
    RunReport {
        schema: SCHEMA,
        tool: ToolInfo::default(),
        label: info.label,
        reference: info.reference,
        target: info.target,
        suite: "webhook".into(),
        strict: info.strict,
        started_at,
        duration_ms: start.elapsed().as_secs_f64() * 1000.0,
        interrupted,
        context: info.context,
        summary: Summary::of(&probes),
        probes,
        replay: None,
    }
}

/// How long a check may run: `run`'s per-probe limit, plus the wait `wh-late-redelivery` is
/// asked for.
fn time_limit(def: &WebhookCheck, env: &Env) -> std::time::Duration {
    if def.id == "wh-late-redelivery" {
        PROBE_TIME_LIMIT + env.extras.late_after
    } else {
        PROBE_TIME_LIMIT
    }
}

/// The selection with the calibration first, in catalog order.
fn ordered(selection: &[&'static WebhookCheck]) -> Vec<&'static WebhookCheck> {
    let mut out: Vec<&'static WebhookCheck> = checks::CATALOG
        .iter()
        .filter(|c| selection.iter().any(|s| s.id == c.id))
        .collect();
    if !out.is_empty() && out[0].id != "wh-first-delivery" {
        out.insert(0, &checks::CATALOG[0]);
    }
    out
}

fn report(
    def: &WebhookCheck,
    trial: &Trial,
    stop: Option<&Stop>,
    strict: bool,
    begun: Instant,
    env: &Env,
) -> ProbeReport {
    let verdict = decide(&trial.checks, stop, strict);
    ProbeReport {
        id: def.id,
        group: GROUP,
        section: def.section,
        stimulus: def.stimulus,
        requirement: def.requirement,
        outcome: verdict.outcome,
        reason: verdict.reason,
        reason_cites: Vec::new(),
        follows_from: None,
        effect_basis: trial.first_count.map(|_| env.settler.describe()),
        duration_ms: begun.elapsed().as_secs_f64() * 1000.0,
        checks: trial.checks.clone(),
        timeline: trial.timeline.clone(),
        exchanges: trial.exchanges.clone(),
    }
}

/// Charges effects that landed after a check ended (between its last count and the next
/// check's first) to that check: a critical failed check, and its verdict decided again.
fn charge_late(
    report: &mut ProbeReport,
    stop: Option<&Stop>,
    was: u64,
    now: u64,
    next: &str,
    strict: bool,
) {
    report.checks.push(Check {
        id: "no-late-effects".into(),
        what: "no effect lands after the check ended".into(),
        severity: Severity::Critical,
        passed: false,
        expected: vec![format!("the counter still at {was} when {next} began")],
        actual: format!("{now} (effects that landed after its deliveries settled)"),
        exchanges: Vec::new(),
        symptom: Symptom::Executions,
    });
    let verdict = decide(&report.checks, stop, strict);
    report.outcome = verdict.outcome;
    report.reason = verdict.reason;
}
