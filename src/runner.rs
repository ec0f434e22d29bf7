//! Runs the selected probes and assembles the [`RunReport`].
//!
//! Probes run one at a time, in catalog order: most of them count effects with a counter the
//! whole target shares, and two probes in flight at once would count each other's executions.
//! `first-request` runs first as a pre-flight; if the baseline operation does not work, every
//! other probe is reported as one ERROR naming that cause instead of twenty confusing FAILs.
//! Ctrl-C stops the run between or inside probes; the finished probes are still reported.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;

use crate::config::Config;
use crate::http::client::Client;
use crate::outcome::{decide, Outcome, Stop};
use crate::probes::{ProbeCtx, ProbeDef, Session};
use crate::report::{ProbeReport, RunReport, Summary, ToolInfo, SCHEMA};

/// Longest a single probe may run before it is stopped and reported as ERROR.
pub const PROBE_TIME_LIMIT: Duration = Duration::from_secs(180);

/// Callbacks for live progress; the runner itself prints nothing.
pub trait Observer {
    fn started(&self, id: &str);
    fn finished(&self, report: &ProbeReport);
}

/// Runs `selection` (in catalog order, see [`crate::probes::select`]) and returns the report.
/// `interrupt` resolves on Ctrl-C.
pub async fn run(
    config: Arc<Config>,
    selection: Vec<ProbeDef>,
    observer: &dyn Observer,
    interrupt: impl Future<Output = ()>,
) -> Result<RunReport> {
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let start = Instant::now();
    let client = Arc::new(Client::new(config.timeout, config.max_body)?);
    let mut probes = Vec::new();
    let mut interrupted = false;
    let mut preflight_failure: Option<String> = None;
    let mut session = Session::new(&config);
    tokio::pin!(interrupt);

    for def in selection {
        observer.started(def.meta.id);
        let missing = def.meta.needs.iter().find(|n| !n.provided_by(&config));
        let report = if let Some(cause) = &preflight_failure {
            skipped_report(&def, Outcome::Error, cause.clone())
        } else if let Some(why) = session.stopped() {
            skipped_report(&def, Outcome::Error, format!("not run: {why}"))
        } else if let Some(need) = missing {
            skipped_report(
                &def,
                Outcome::Skip,
                match &config.target_file {
                    Some(file) => {
                        format!("needs {}: add {} to {file}", need.what(), need.target_key())
                    }
                    None => format!("needs {}: pass {}", need.what(), need.option()),
                },
            )
        } else {
            let mut ctx = ProbeCtx::new(config.clone(), client.clone(), def.meta, session.clone());
            let probe_start = Instant::now();
            let stop = tokio::select! {
                biased;
                _ = &mut interrupt => {
                    interrupted = true;
                    None
                }
                ran = tokio::time::timeout(PROBE_TIME_LIMIT, (def.run)(&mut ctx)) => match ran {
                    Ok(ran) => ran.err(),
                    Err(_) => Some(Stop::Error(format!(
                        "the probe did not finish within {} s; the target may be hanging (raise --timeout?)",
                        PROBE_TIME_LIMIT.as_secs()
                    ))),
                },
            };
            if interrupted {
                break;
            }
            session = ctx.session.clone();
            let mut report = finish(&def, &config, ctx, stop, probe_start);
            defer_to_prerequisites(&mut report, &def, &probes);
            if def.meta.id == "first-request" && report.outcome != Outcome::Pass {
                preflight_failure = Some(format!(
                    "not run: the pre-flight first-request did not pass ({})",
                    report.reason
                ));
            }
            report
        };
        observer.finished(&report);
        probes.push(report);
    }

    let summary = Summary::of(&probes);
    let op = &config.operation;
    let context = context(&config);
    Ok(RunReport {
        schema: SCHEMA,
        tool: ToolInfo::default(),
        label: config.label.clone(),
        reference: config.reference,
        target: format!("{} {}", op.method, op.url),
        suite: config.suite.name.clone(),
        strict: config.strict,
        started_at,
        duration_ms: start.elapsed().as_secs_f64() * 1000.0,
        interrupted,
        context,
        summary,
        probes,
    })
}

/// One-line facts about the run for headers and reports ("2 tenants", the effect basis, the
/// proxy or `--insecure`), known before the first probe so a streaming terminal can print them
/// first.
pub fn context(config: &Config) -> Vec<String> {
    let mut context = vec![format!(
        "{} tenant{}",
        1 + usize::from(config.tenant_b.is_some()),
        if config.tenant_b.is_some() { "s" } else { "" }
    )];
    if let Some(c) = &config.counter {
        context.push(format!("effects counted with {}", c.describe()));
    }
    context.extend(crate::http::net::context());
    context
}

/// The probe's report. A probe whose target stopped answering is an ERROR saying so; one that
/// ended with unjudged checks and no other stop is INCONCLUSIVE with the first reason; one that
/// ended with neither a check nor a stop judged nothing, which is a probe defect, never a PASS.
fn finish(
    def: &ProbeDef,
    config: &Config,
    ctx: ProbeCtx,
    stop: Option<Stop>,
    started: Instant,
) -> ProbeReport {
    let stop = match (stop, ctx.session.stopped()) {
        (_, Some(why)) => Some(Stop::Error(why)),
        (Some(stop), None) => Some(stop),
        (None, None) => match ctx.unjudged.first() {
            Some(why) if ctx.unjudged.len() == 1 => Some(Stop::Inconclusive(why.clone())),
            Some(why) => Some(Stop::Inconclusive(format!(
                "{why} (and {} more check{} not judged)",
                ctx.unjudged.len() - 1,
                if ctx.unjudged.len() == 2 { "" } else { "s" }
            ))),
            None if ctx.checks.is_empty() => Some(Stop::Error(format!(
                "{} ended without judging anything (no check, no stop): a defect of the probe",
                def.meta.id
            ))),
            None => None,
        },
    };
    let verdict = decide(&ctx.checks, stop.as_ref(), config.strict);
    ProbeReport {
        id: def.meta.id,
        group: def.meta.group.as_str(),
        section: def.meta.section,
        stimulus: def.meta.stimulus,
        requirement: def.meta.requirement,
        outcome: verdict.outcome,
        reason: verdict.reason,
        effect_basis: ctx.basis,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        checks: ctx.checks,
        timeline: ctx.timeline,
        exchanges: ctx.exchanges,
    }
}

/// A non-critical FAIL that follows from a failed prerequisite becomes INCONCLUSIVE.
fn defer_to_prerequisites(report: &mut ProbeReport, def: &ProbeDef, earlier: &[ProbeReport]) {
    if report.outcome != Outcome::Fail
        || report
            .checks
            .iter()
            .any(|c| !c.passed && c.severity == crate::check::Severity::Critical)
    {
        return;
    }
    if let Some(pre) = earlier
        .iter()
        .find(|p| p.outcome == Outcome::Fail && def.meta.prerequisites.contains(&p.id))
    {
        // The prerequisite's own entry has its message; repeating it here would double every
        // line that quotes a server's body.
        report.reason = format!(
            "prerequisite {} failed (see its entry), so this probe's failure says nothing new: {}",
            pre.id, report.reason
        );
        report.outcome = Outcome::Inconclusive;
    }
}

fn skipped_report(def: &ProbeDef, outcome: Outcome, reason: String) -> ProbeReport {
    ProbeReport {
        id: def.meta.id,
        group: def.meta.group.as_str(),
        section: def.meta.section,
        stimulus: def.meta.stimulus,
        requirement: def.meta.requirement,
        outcome,
        reason,
        effect_basis: None,
        duration_ms: 0.0,
        checks: Vec::new(),
        timeline: Vec::new(),
        exchanges: Vec::new(),
    }
}
