//! Runs the selected probes and assembles the [`RunReport`].
//!
//! Probes run one at a time, in catalog order: most of them count effects with a counter the
//! whole target shares, and two probes in flight at once would count each other's executions.
//! `first-request` always runs first, as the pre-flight: it calibrates the effect basis and the
//! key form every later probe uses, and if the baseline operation does not work (FAIL or
//! ERROR), every other probe is reported as one ERROR naming that cause instead of twenty
//! confusing FAILs. Once the target stops answering, the remaining probes are ERRORs saying so.
//! Root causes are settled after every probe has run, whatever the catalog order: a
//! non-critical FAIL that follows from a failed prerequisite becomes INCONCLUSIVE naming it.
//! Ctrl-C stops the run between or inside probes; the finished probes are still reported.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;

use crate::carrier::{Place, Syntax};
use crate::config::Config;
use crate::effects::Counter;
use crate::http::client::{Client, Renewable};
use crate::keys::{KeySyntax, FELL_BACK};
use crate::outcome::{decide, Outcome, Stop};
use crate::probes::{self, ProbeCtx, ProbeDef, Session};
use crate::report::{
    FollowsFrom, Identity, ProbeReport, ReplayInputs, RunReport, Summary, ToolInfo, SCHEMA,
};

pub mod each;

/// Longest a single probe may run before it is stopped and reported as ERROR.
pub const PROBE_TIME_LIMIT: Duration = Duration::from_secs(180);

/// The reason of the probe (or webhook check) Ctrl-C stopped: an ERROR, since what it saw was
/// cut short.
pub const INTERRUPTED_INSIDE: &str = "interrupted (Ctrl-C) before it finished: nothing was judged";

/// The reason of every probe (or webhook check) Ctrl-C kept from starting: a SKIP, listed so no
/// report format reads as a complete run.
pub const NOT_RUN_INTERRUPTED: &str = "not run: the run was interrupted (Ctrl-C)";

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
    let client = Arc::new(
        Client::new(config.connector.clone(), config.timeout, config.max_body)?
            .with_credential(config.auth.clone().map(|a| a as Arc<dyn Renewable>)),
    );
    let preflight = probes::first_request::PROBE;
    let mut selection = selection;
    if !selection.is_empty() && !selection.iter().any(|p| p.meta.id == preflight.meta.id) {
        selection.insert(0, preflight);
    }
    let defs = selection.clone();
    let mut mode = Probes {
        session: Session::new(&config),
        config: config.clone(),
        client,
        refused: None,
        unreachable_provider: None,
    };
    let each::Ran {
        reports: mut probes,
        interrupted,
    } = each::each(&mut mode, selection, observer, interrupt).await;
    let session = mode.session;

    defer_to_prerequisites(&mut probes, &defs);
    let summary = Summary::of(&probes);
    let mut context = context(&config);
    context.push(format!("effects: {}", session.meter.describe()));
    if !session.key_basis.is_empty() {
        context.push(format!("key shape: {}", session.key_basis));
    }
    // A token is sent as it is, which the header line already says.
    if config.key_carrier.syntax == Syntax::Ietf {
        context.push(match (session.fell_back, session.keys) {
            (true, _) => FELL_BACK.to_string(),
            (false, KeySyntax::SfString) => "keys sent as RFC 8941 Strings".to_string(),
            (false, KeySyntax::Bare) => "keys sent bare".to_string(),
        });
    }
    Ok(RunReport {
        schema: SCHEMA,
        tool: ToolInfo::default(),
        label: config.label.clone(),
        reference: config.reference,
        target: config.operation.line(),
        suite: config.suite.name.clone(),
        strict: config.strict,
        started_at,
        duration_ms: start.elapsed().as_secs_f64() * 1000.0,
        interrupted,
        context,
        summary,
        probes,
        replay: Some(replay_inputs(&config)),
    })
}

/// `run`'s side of the run loop ([`each::Mode`]): a probe plays with a [`ProbeCtx`] over the
/// session the previous probes left.
struct Probes {
    config: Arc<Config>,
    client: Arc<Client>,
    session: Session,
    /// A 401 that --auth-cmd could not answer: the credential's failure, not the API's.
    refused: Option<String>,
    /// Why the fake provider turned the API's connections away, when the pre-flight failed.
    unreachable_provider: Option<String>,
}

impl each::Mode for Probes {
    type Unit = ProbeDef;
    type Trial = ProbeCtx;
    const NAMES: (&'static str, &'static str, &'static str) = ("probe", "target", "--timeout");

    fn id(def: &ProbeDef) -> &'static str {
        def.meta.id
    }

    fn not_run(def: &ProbeDef, outcome: Outcome, reason: String) -> ProbeReport {
        verdict_only(def, outcome, reason)
    }

    /// Once the target stopped answering, an ERROR saying so; without an input the probe
    /// needs, a SKIP naming the flag or the target file's key.
    fn blocked(&self, def: &ProbeDef) -> Option<(Outcome, String)> {
        if let Some(why) = self.session.stopped() {
            return Some((Outcome::Error, format!("not run: {why}")));
        }
        missing_need(def, &self.config).map(|why| (Outcome::Skip, why))
    }

    fn limit(&self, _: &ProbeDef) -> Duration {
        PROBE_TIME_LIMIT
    }

    fn begin(&self, def: &ProbeDef) -> ProbeCtx {
        ProbeCtx::new(
            self.config.clone(),
            self.client.clone(),
            def.meta,
            self.session.clone(),
        )
    }

    fn play<'a>(
        &'a self,
        def: &'a ProbeDef,
        ctx: &'a mut ProbeCtx,
    ) -> futures::future::BoxFuture<'a, Result<(), Stop>> {
        (def.run)(ctx)
    }

    fn ends(ctx: &ProbeCtx) -> each::Ends {
        each::Ends {
            opening: ctx.counting.opening,
            closing: ctx.closing_count(),
            idle: ctx.record.sent() == 0 && !ctx.counting.read_counter(),
        }
    }

    /// The probe's report ([`finish`]); a 401 that --auth-cmd could not answer makes it an
    /// ERROR saying so, and nothing more is sent.
    fn finish(
        &mut self,
        def: &ProbeDef,
        ctx: ProbeCtx,
        stop: Option<Stop>,
        started: Instant,
    ) -> ProbeReport {
        self.session = ctx.session.clone();
        let auth_failure = self.config.auth.as_ref().and_then(|a| a.take_failure());
        let mut report = finish(def, &self.config, ctx, stop, started);
        if let Some(why) = auth_failure {
            report.outcome = Outcome::Error;
            report.reason = crate::auth_cmd::refused_reason(&why);
            self.refused = Some(format!("not run: {why}"));
        }
        if def.meta.id == probes::first_request::PROBE.meta.id
            && matches!(report.outcome, Outcome::Fail | Outcome::Error)
        {
            // An API failing because it cannot reach its provider (its TLS client refuses the
            // fake's CA) shows here first: the probes left out say why.
            self.unreachable_provider = self
                .config
                .provider
                .as_ref()
                .and_then(|d| d.fake.refusals_line(started));
            if let Some(line) = &self.unreachable_provider {
                report.timeline.push(line.clone());
            }
        }
        report
    }

    /// A refused credential, or a pre-flight that FAILed or ERRORed: every later probe is one
    /// ERROR naming that cause instead of twenty confusing FAILs.
    fn gate(&self, def: &ProbeDef, report: &ProbeReport) -> Option<(Outcome, String)> {
        if let Some(why) = &self.refused {
            return Some((Outcome::Error, why.clone()));
        }
        (def.meta.id == probes::first_request::PROBE.meta.id
            && matches!(report.outcome, Outcome::Fail | Outcome::Error))
        .then(|| {
            (
                Outcome::Error,
                format!(
                    "not run: the pre-flight first-request did not pass ({}){}",
                    report.reason,
                    self.unreachable_provider
                        .as_ref()
                        .map_or(String::new(), |line| format!("; {line}"))
                ),
            )
        })
    }
}

/// The inputs `idem-check reproduce` reads back from the JSON report (`run`'s and `webhook`'s).
pub fn replay_inputs(config: &Config) -> ReplayInputs {
    let (count_url, count_pointer, count_cmd) = match &config.counter {
        Some(Counter::Url { url, pointer }) => (Some(url.to_string()), Some(pointer.clone()), None),
        Some(Counter::Command(cmd)) => (None, None, Some(cmd.text().to_string())),
        None => (None, None, None),
    };
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    ReplayInputs {
        key_header: config.suite.header.clone(),
        key_in_body: match &config.key_carrier.place {
            Place::Body(field) => Some(field.clone()),
            Place::Header(_) => None,
        },
        count_url,
        count_pointer,
        count_cmd,
        hold_header: config
            .hold_header
            .as_ref()
            .map(|h| format!("{}: {}", h.name, h.value_str())),
        hold_release: config.hold_release.as_ref().map(|r| r.url.clone()),
        quiet_ms: millis(config.quiet_window),
        timeout_ms: millis(config.timeout),
    }
}

/// One-line facts about the run for headers and reports ("2 tenants", where the key travels,
/// the effect basis, the proxy or `--insecure`), known before the first probe so a streaming
/// terminal can print them first.
pub fn context(config: &Config) -> Vec<String> {
    let mut context = vec![
        format!(
            "{} tenant{}",
            1 + usize::from(config.tenant_b.is_some()),
            if config.tenant_b.is_some() { "s" } else { "" }
        ),
        format!("key: {}", config.key_carrier),
    ];
    context.extend(config.connector.context());
    if let Some(down) = &config.provider {
        context.push(provider_line(&down.fake));
    }
    context
}

/// Where the fake provider listens and, over HTTPS, where its CA went: the file the API under
/// test must trust.
pub fn provider_line(fake: &crate::provider::FakeProvider) -> String {
    let mut line = format!("provider: {} fake at {}", fake.profile().name, fake.url());
    if let Some(ca) = fake.ca_file() {
        line.push_str(&format!(
            ", its CA certificate written to {} (--provider-tls)",
            ca.display()
        ));
    }
    line
}

/// Why `def` SKIPs without running: the first of its needs the config does not provide, and
/// the input (flag, or target-file key) that provides it.
pub(crate) fn missing_need(def: &ProbeDef, config: &Config) -> Option<String> {
    let need = def.meta.needs.iter().find(|n| !n.provided_by(config))?;
    Some(
        need.not_this_key(config)
            .unwrap_or_else(|| match &config.target_file {
                Some(file) => format!("needs {}: add {} to {file}", need.what(), need.target_key()),
                None => format!("needs {}: pass {}", need.what(), need.option()),
            }),
    )
}

/// The probe's report. A probe whose target stopped answering is INCONCLUSIVE saying so when
/// the target had answered it before (it ran, and what it saw is judged), an ERROR when it
/// could not run at all; one that ended with unjudged checks and no other stop is INCONCLUSIVE
/// with the first reason; one that ended with neither a check nor a stop judged nothing, which
/// is a probe defect, never a PASS.
pub(crate) fn finish(
    def: &ProbeDef,
    config: &Config,
    ctx: ProbeCtx,
    stop: Option<Stop>,
    started: Instant,
) -> ProbeReport {
    let ProbeCtx {
        record,
        judge,
        counting,
        session,
        ..
    } = ctx;
    let (checks, unjudged) = (judge.checks, judge.unjudged);
    let ran = record.exchanges.iter().any(|e| e.response().is_some());
    let stop = match (stop, session.stopped()) {
        (_, Some(why)) if ran => Some(Stop::Inconclusive(why.into())),
        (_, Some(why)) => Some(Stop::Error(why.into())),
        (Some(stop), None) => Some(stop),
        (None, None) => match unjudged.first() {
            Some(why) if unjudged.len() == 1 => Some(Stop::Inconclusive(why.clone().into())),
            Some(why) => Some(Stop::Inconclusive(
                format!(
                    "{why} (and {} more check{} not judged)",
                    unjudged.len() - 1,
                    if unjudged.len() == 2 { "" } else { "s" }
                )
                .into(),
            )),
            None if checks.is_empty() => Some(Stop::Error(
                format!(
                    "{} ended without judging anything (no check, no stop): a defect of the probe",
                    def.meta.id
                )
                .into(),
            )),
            None => None,
        },
    };
    let verdict = decide(&checks, stop.as_ref(), config.strict);
    ProbeReport {
        effect_basis: counting.basis,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        checks,
        timeline: record.timeline,
        exchanges: record.exchanges,
        reason_cites: verdict.cites,
        ..verdict_only(def, verdict.outcome, verdict.reason)
    }
}

/// Settles root causes once every probe has run, whatever their order: a FAIL (or WARN) without
/// a failed critical check, one of whose prerequisites FAILs with the same symptom (every failed
/// check of the probe shares its [`crate::check::Symptom`] with a failed check of the
/// prerequisite), says nothing new and becomes INCONCLUSIVE naming it, keeping the verdict it
/// had in `follows_from` for the root causes. A failure with another cause stays, and critical
/// failures (a duplicated effect, a leak) always stay FAIL.
fn defer_to_prerequisites(reports: &mut [ProbeReport], defs: &[ProbeDef]) {
    let failed: Vec<&ProbeReport> = reports
        .iter()
        .filter(|p| p.outcome == Outcome::Fail)
        .collect();
    let deferrable: Vec<&'static str> = reports
        .iter()
        .filter(|p| matches!(p.outcome, Outcome::Fail | Outcome::Warn))
        .filter(|p| {
            !p.checks
                .iter()
                .any(|c| !c.passed && c.severity == crate::check::Severity::Critical)
        })
        .filter(|p| !failing(p).is_empty())
        .map(|p| p.id)
        .collect();
    // The failed prerequisite a probe's failure follows from, if any: one whose failed checks
    // show every symptom the probe's own failed checks show. A failure with another cause is
    // the probe's own, whatever else failed.
    let cause_of = |id: &str| -> Option<&'static str> {
        if !deferrable.contains(&id) {
            return None;
        }
        let def = defs.iter().find(|d| d.meta.id == id)?;
        let own = failing(reports.iter().find(|p| p.id == id)?);
        failed
            .iter()
            .filter(|f| def.meta.prerequisites.contains(&f.id))
            .find(|f| {
                let seen = failing(f);
                own.iter()
                    .all(|c| seen.iter().any(|s| c.symptom.shared_with(&s.symptom)))
            })
            .map(|f| f.id)
    };
    let causes: Vec<(usize, &'static str)> = reports
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let mut root = cause_of(r.id)?;
            // Follow the chain to a failure that does not itself follow from another one;
            // prerequisites form no cycle, and the catalog bounds the walk.
            for _ in 0..defs.len() {
                match cause_of(root) {
                    Some(next) => root = next,
                    None => break,
                }
            }
            Some((i, root))
        })
        .collect();
    for (i, root) in causes {
        let report = &mut reports[i];
        report.follows_from = Some(FollowsFrom {
            probe: root,
            verdict: report.outcome,
        });
        // The prerequisite's own entry has its message; repeating it here would double every
        // line that quotes a server's body.
        let what = if report.outcome == Outcome::Warn {
            "warning"
        } else {
            "failure"
        };
        report.reason = format!(
            "prerequisite {root} failed (see its entry), so this probe's {what} says nothing new: {}",
            report.reason
        );
        report.outcome = Outcome::Inconclusive;
    }
}

/// The checks whose failure made a probe FAIL or WARN (an info check never does).
fn failing(report: &ProbeReport) -> Vec<&crate::check::Check> {
    report
        .checks
        .iter()
        .filter(|c| !c.passed && c.severity > crate::check::Severity::Info)
        .collect()
}

/// The late-effect rule, one for every mode (applied by the run loop, [`each`]): executions that landed between a probe's
/// (or webhook check's) last counter reading and the next one's first (`last` → `next`) were
/// caused by it, never by the next one, whose window starts after them. Its own counts missed
/// them, so a PASS or WARN built on those counts cannot stand: it becomes INCONCLUSIVE saying
/// what landed; a FAIL stays, with the fact in its timeline. It is not a FAIL of its own: which
/// of the check's deliveries caused the late effect, and whether it was a duplicate or the
/// work of an asynchronous consumer still finishing, was not observed.
pub fn charge_late_effects(report: &mut ProbeReport, last: u64, next: u64, next_id: &str) {
    let n = next - last;
    let line = format!(
        "late effect: {n} execution{} landed after this probe ended (the counter read {last} at its last reading, {next} when {next_id} began)",
        if n == 1 { "" } else { "s" }
    );
    report.timeline.push(line.clone());
    if matches!(report.outcome, Outcome::Pass | Outcome::Warn) {
        report.outcome = Outcome::Inconclusive;
        report.reason = format!(
            "{line}: its counts missed them; raise --quiet-window, or check what executes asynchronously"
        );
    }
}

/// The report of `def` with its verdict and nothing else: a probe that did not run, or the
/// identity a finished probe's evidence is added to.
fn verdict_only(def: &ProbeDef, outcome: Outcome, reason: String) -> ProbeReport {
    let who = Identity {
        id: def.meta.id,
        group: def.meta.group.as_str(),
        section: def.meta.section,
        stimulus: def.meta.stimulus,
        requirement: def.meta.requirement,
    };
    ProbeReport::verdict_only(who, outcome, reason)
}

#[cfg(test)]
mod tests;
