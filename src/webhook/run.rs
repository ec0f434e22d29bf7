//! Runs the selected webhook checks one at a time (they share one effect meter) and assembles
//! the run's [`RunReport`], the same model `run` reports with. What the loop decides comes
//! from each check's declaration ([`WebhookCheck`]: its needs, whether it calibrates, its
//! extra time), never from its id; the rules it shares with `run` (the time limit, Ctrl-C
//! marking what did not run, the late-effect rule) are [`crate::runner`]'s.

use std::time::{Instant, SystemTime};

use crate::outcome::{decide, Outcome, Stop};
use crate::report::{ProbeReport, RunReport, Summary, ToolInfo, SCHEMA};
use crate::runner::{
    charge_late_effects, Observer, INTERRUPTED_INSIDE, NOT_RUN_INTERRUPTED, PROBE_TIME_LIMIT,
};

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

/// Runs `selection` in catalog order and reports it, the calibrating checks first: if one
/// does not pass, the others SKIP naming it. Ctrl-C ends the run: the check it stopped is an
/// ERROR and every one it kept from starting a SKIP saying so, in every report format.
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
    let mut calibration: Option<String> = None;
    // The last settled count of the last check that counted, and its report's index.
    let mut last: Option<(u64, usize)> = None;
    let mut interrupted = false;
    let mut order = ordered(selection).into_iter();
    while let Some(def) = order.next() {
        observer.started(def.id);
        let begun = Instant::now();
        let mut trial = Trial::new();
        let missing = def.needs.iter().find(|n| !n.met(env));
        let stop = if let Some(why) = &calibration {
            Some(Stop::Skip(why.clone().into()))
        } else if let Some(need) = missing {
            Some(need.skip())
        } else {
            let limit = PROBE_TIME_LIMIT + (def.extra_time)(&env.extras);
            tokio::select! {
                biased;
                () = &mut interrupt => {
                    interrupted = true;
                    None
                }
                played = tokio::time::timeout(limit, (def.play)(env, &mut trial)) => match played {
                    Ok(r) => r.err(),
                    Err(_) => Some(Stop::Error(format!(
                        "the check did not finish within {} s; the consumer may be hanging (raise --timeout?)",
                        limit.as_secs()
                    ).into())),
                },
            }
        };
        if interrupted {
            probes.push(not_run(def, Outcome::Error, INTERRUPTED_INSIDE));
            probes.extend(
                order
                    .by_ref()
                    .map(|rest| not_run(rest, Outcome::Skip, NOT_RUN_INTERRUPTED)),
            );
            break;
        }
        // Effects that landed after the previous check's last count are that check's.
        if let (Some((count, i)), Some(first)) = (last, trial.first_count) {
            if first > count {
                charge_late_effects(&mut probes[i], count, first, def.id);
            }
        }
        if let Some(c) = trial.last_count {
            last = Some((c, probes.len()));
        }
        let report = report(def, trial, stop, info.strict, begun, env);
        if def.calibrates && report.outcome != Outcome::Pass {
            calibration = Some(format!(
                "not run: the calibration {} did not pass ({})",
                def.id, report.reason
            ));
        }
        observer.finished(&report);
        probes.push(report);
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

/// The selection in catalog order, with the calibrating checks whether selected or not.
fn ordered(selection: &[&'static WebhookCheck]) -> Vec<&'static WebhookCheck> {
    if selection.is_empty() {
        return Vec::new();
    }
    checks::CATALOG
        .iter()
        .filter(|c| c.calibrates || selection.iter().any(|s| s.id == c.id))
        .collect()
}

/// The check's report. A check that pushed a point its declaration does not list, or ended
/// with neither a check nor a stop, is a defect of the check: an ERROR, never a PASS.
fn report(
    def: &WebhookCheck,
    trial: Trial,
    stop: Option<Stop>,
    strict: bool,
    begun: Instant,
    env: &Env,
) -> ProbeReport {
    let undeclared = trial.checks.iter().find(|c| def.point(&c.id).is_none());
    let stop = match (undeclared, stop) {
        (Some(c), _) => Some(Stop::Error(
            format!(
                "{} judged {:?}, which it does not declare: a defect of the check",
                def.id, c.id
            )
            .into(),
        )),
        (None, None) if trial.checks.is_empty() => Some(Stop::Error(
            format!(
                "{} ended without judging anything (no check, no stop): a defect of the check",
                def.id
            )
            .into(),
        )),
        (None, stop) => stop,
    };
    let verdict = decide(&trial.checks, stop.as_ref(), strict);
    ProbeReport {
        outcome: verdict.outcome,
        reason: verdict.reason,
        reason_cites: verdict.cites,
        effect_basis: trial.first_count.map(|_| env.counts.describe()),
        duration_ms: begun.elapsed().as_secs_f64() * 1000.0,
        checks: trial.checks,
        timeline: trial.record.timeline,
        exchanges: trial.record.exchanges,
        ..not_run(def, Outcome::Skip, "")
    }
}

/// The report of `def` with its verdict and nothing else: a check that did not run, or the
/// identity a finished check's evidence is added to.
fn not_run(def: &WebhookCheck, outcome: Outcome, reason: &str) -> ProbeReport {
    ProbeReport {
        id: def.id,
        group: GROUP,
        section: def.section,
        stimulus: def.stimulus,
        requirement: def.requirement,
        outcome,
        reason: reason.into(),
        reason_cites: Vec::new(),
        follows_from: None,
        effect_basis: None,
        duration_ms: 0.0,
        checks: Vec::new(),
        timeline: Vec::new(),
        exchanges: Vec::new(),
    }
}
