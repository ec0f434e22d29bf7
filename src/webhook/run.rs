//! Runs the selected webhook checks one at a time (they share one effect meter) and assembles
//! the run's [`RunReport`], the same model `run` reports with. What the loop decides comes
//! from each check's declaration ([`WebhookCheck`]: its needs, whether it calibrates, its
//! extra time), never from its id; the loop itself, with the rules it shares with `run` (the
//! calibration gate, the time limit, Ctrl-C marking what did not run, the late-effect rule),
//! is [`crate::runner::each`].

use std::time::{Duration, Instant, SystemTime};

use futures::future::BoxFuture;

use crate::outcome::{decide, Outcome, Stop};
use crate::report::{Identity, ProbeReport, ReplayInputs, RunReport, Summary, ToolInfo, SCHEMA};
use crate::runner::each::{each, Ends, Mode, Ran};
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
    /// What `idem-check reproduce` reads back: the counter, so it counts a replay's effects.
    pub replay: Option<ReplayInputs>,
}

/// Runs `selection` in catalog order through the run loop ([`crate::runner::each`]) and
/// reports it, the calibrating checks first: if one does not pass, the others SKIP naming it.
/// Ctrl-C ends the run: the check it stopped is an ERROR and every one it kept from starting a
/// SKIP saying so, in every report format.
pub async fn run(
    env: &Env,
    selection: &[&'static WebhookCheck],
    info: RunInfo,
    observer: &dyn Observer,
    interrupt: impl std::future::Future<Output = ()>,
) -> RunReport {
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let start = Instant::now();
    let mut mode = Checks {
        env,
        strict: info.strict,
    };
    let Ran {
        reports: probes,
        interrupted,
    } = each(&mut mode, ordered(selection), observer, interrupt).await;
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
        replay: info.replay,
    }
}

/// `webhook`'s side of the run loop ([`Mode`]): a check plays with a [`Trial`] over the
/// collaborators of `env`.
struct Checks<'e> {
    env: &'e Env,
    strict: bool,
}

impl Mode for Checks<'_> {
    type Unit = &'static WebhookCheck;
    type Trial = Trial;
    const NAMES: (&'static str, &'static str, &'static str) = ("check", "consumer", "--timeout");

    fn id(def: &&'static WebhookCheck) -> &'static str {
        def.id
    }

    fn not_run(def: &&'static WebhookCheck, outcome: Outcome, reason: String) -> ProbeReport {
        not_run(def, outcome, &reason)
    }

    /// A need its declaration lists and the options do not meet: a SKIP naming the option.
    fn blocked(&self, def: &&'static WebhookCheck) -> Option<(Outcome, String)> {
        let need = def.needs.iter().find(|n| !n.met(self.env))?;
        Some((Outcome::Skip, need.why_skipped().into()))
    }

    fn limit(&self, def: &&'static WebhookCheck) -> Duration {
        PROBE_TIME_LIMIT + (def.extra_time)(&self.env.extras)
    }

    fn begin(&self, _: &&'static WebhookCheck) -> Trial {
        Trial::new()
    }

    fn play<'a>(
        &'a self,
        def: &'a &'static WebhookCheck,
        trial: &'a mut Trial,
    ) -> BoxFuture<'a, Result<(), Stop>> {
        (def.play)(self.env, trial)
    }

    fn ends(trial: &Trial) -> Ends {
        trial.ends()
    }

    fn finish(
        &mut self,
        def: &&'static WebhookCheck,
        trial: Trial,
        stop: Option<Stop>,
        started: Instant,
    ) -> ProbeReport {
        report(def, trial, stop, self.strict, started, self.env)
    }

    /// A calibrating check that did not pass: every later check SKIPs naming it.
    fn gate(&self, def: &&'static WebhookCheck, report: &ProbeReport) -> Option<(Outcome, String)> {
        (def.calibrates && report.outcome != Outcome::Pass).then(|| {
            (
                Outcome::Skip,
                format!(
                    "not run: the calibration {} did not pass ({})",
                    def.id, report.reason
                ),
            )
        })
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
    let who = Identity {
        id: def.id,
        group: GROUP,
        section: def.section,
        stimulus: def.stimulus,
        requirement: def.requirement,
    };
    ProbeReport::verdict_only(who, outcome, reason)
}
