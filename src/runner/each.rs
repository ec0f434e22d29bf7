//! The one run loop of every mode: `run`'s probes, `webhook`'s checks and `client`'s probes run
//! through it one at a time (`run`'s and `webhook`'s share one effect counter, and two in flight
//! would count each other's executions; `client`'s share the scenarios they read). It owns what
//! the modes share, so it is written once:
//!
//! - the **calibration gate**: once a unit's report says the rest cannot be trusted (`run`'s
//!   pre-flight did not pass, or its credential was refused; `webhook`'s first delivery did not
//!   pass), every later unit gets the verdict the mode names instead of running;
//! - the **time limit** of each unit ([`super::PROBE_TIME_LIMIT`], plus what the mode allows);
//! - **Ctrl-C**: the unit it stopped is an ERROR ([`super::INTERRUPTED_INSIDE`]) and every one it
//!   kept from starting a SKIP ([`super::NOT_RUN_INTERRUPTED`]), so no report format reads as a
//!   complete run;
//! - the **late-effect rule** ([`super::charge_late_effects`]): executions a unit's first count
//!   finds above the count the previous unit ended on are that unit's.
//!
//! A mode says the rest through [`Mode`]: what keeps a unit from running, how it plays, and its
//! report.

use std::future::Future;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use super::{charge_late_effects, Observer, INTERRUPTED_INSIDE, NOT_RUN_INTERRUPTED};
use crate::outcome::{Outcome, Stop};
use crate::report::ProbeReport;

/// A mode's side of the run loop: its unit (a probe, a webhook check) and the state one unit
/// plays with (a probe's context, a check's trial).
pub trait Mode {
    type Unit;
    type Trial;

    /// What a unit is called, what it talks to and the flag that gives it more time, for the
    /// time-limit error: `("probe", "target", "--timeout")`.
    const NAMES: (&'static str, &'static str, &'static str);

    fn id(unit: &Self::Unit) -> &'static str;

    /// The report of `unit` with a verdict and nothing else: a unit that did not run.
    fn not_run(unit: &Self::Unit, outcome: Outcome, reason: String) -> ProbeReport;

    /// Why `unit` does not run, as its verdict (a need not met, a target that stopped
    /// answering); the gate and Ctrl-C are the loop's.
    fn blocked(&self, unit: &Self::Unit) -> Option<(Outcome, String)>;

    /// How long `unit` may play.
    fn limit(&self, unit: &Self::Unit) -> Duration;

    fn begin(&self, unit: &Self::Unit) -> Self::Trial;

    fn play<'a>(
        &'a self,
        unit: &'a Self::Unit,
        trial: &'a mut Self::Trial,
    ) -> BoxFuture<'a, Result<(), Stop>>;

    /// The counts a trial began and ended on, for the late-effect rule.
    fn ends(trial: &Self::Trial) -> Ends;

    /// The report of `unit` from its trial and how it stopped (`None`: it returned).
    fn finish(
        &mut self,
        unit: &Self::Unit,
        trial: Self::Trial,
        stop: Option<Stop>,
        started: Instant,
    ) -> ProbeReport;

    /// Whether `report` keeps every later unit from running, and the verdict each then gets.
    fn gate(&self, unit: &Self::Unit, report: &ProbeReport) -> Option<(Outcome, String)>;
}

/// The counter values a unit began and ended on.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ends {
    /// Its first count, when taken before it sent anything.
    pub opening: Option<u64>,
    /// Its last count, when it sent nothing after it.
    pub closing: Option<u64>,
    /// It sent nothing and counted nothing: the previous unit's closing count still holds.
    pub idle: bool,
}

/// The observer of a run whose progress nobody is shown (`client`'s, reported at its end; the
/// pre-flight of a stress run).
pub struct Quiet;

impl Observer for Quiet {
    fn started(&self, _: &str) {}
    fn finished(&self, _: &ProbeReport) {}
}

/// The reports of every unit, in order, and whether Ctrl-C ended the run.
pub struct Ran {
    pub reports: Vec<ProbeReport>,
    pub interrupted: bool,
}

/// Runs `units` one at a time; `interrupt` resolves on Ctrl-C.
pub async fn each<M: Mode>(
    mode: &mut M,
    units: impl IntoIterator<Item = M::Unit>,
    observer: &dyn Observer,
    interrupt: impl Future<Output = ()>,
) -> Ran {
    tokio::pin!(interrupt);
    let mut reports: Vec<ProbeReport> = Vec::new();
    let mut gate: Option<(Outcome, String)> = None;
    // The count the last unit that ran ended on, and its report's index.
    let mut last: Option<(u64, usize)> = None;
    let mut units = units.into_iter();
    while let Some(unit) = units.next() {
        let id = M::id(&unit);
        observer.started(id);
        let report = match gate.clone().or_else(|| mode.blocked(&unit)) {
            Some((outcome, why)) => M::not_run(&unit, outcome, why),
            None => {
                let started = Instant::now();
                let limit = mode.limit(&unit);
                let mut trial = mode.begin(&unit);
                let mut interrupted = false;
                let stop = tokio::select! {
                    biased;
                    () = &mut interrupt => {
                        interrupted = true;
                        None
                    }
                    played = tokio::time::timeout(limit, mode.play(&unit, &mut trial)) => match played {
                        Ok(r) => r.err(),
                        Err(_) => Some(Stop::Error(format!(
                            "the {} did not finish within {} s; the {} may be hanging (raise {}?)",
                            M::NAMES.0,
                            limit.as_secs(),
                            M::NAMES.1,
                            M::NAMES.2,
                        ).into())),
                    },
                };
                if interrupted {
                    reports.push(M::not_run(&unit, Outcome::Error, INTERRUPTED_INSIDE.into()));
                    reports.extend(
                        units.map(|rest| {
                            M::not_run(&rest, Outcome::Skip, NOT_RUN_INTERRUPTED.into())
                        }),
                    );
                    return Ran {
                        reports,
                        interrupted: true,
                    };
                }
                let ends = M::ends(&trial);
                if let (Some((count, i)), Some(first)) = (last, ends.opening) {
                    if first > count {
                        charge_late_effects(&mut reports[i], count, first, id);
                    }
                }
                if !ends.idle {
                    last = ends.closing.map(|c| (c, reports.len()));
                }
                let report = mode.finish(&unit, trial, stop, started);
                if gate.is_none() {
                    gate = mode.gate(&unit, &report);
                }
                report
            }
        };
        observer.finished(&report);
        reports.push(report);
    }
    Ran {
        reports,
        interrupted: false,
    }
}
