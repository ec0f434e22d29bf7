//! `idem-check client`'s side of the run loop ([`crate::runner::each`]): the unit is a client
//! probe whose scenarios intersect the selected ones, in catalog order, and playing it plays
//! each of its scenarios not played yet, then judges them. A scenario feeds several probes
//! (`created` feeds key-present and key-syntax): it plays once, and its record is kept here.
//!
//! A scenario is played one of two ways: the user's command run against a fresh fake API
//! ([`super::command`]), or under `--listen` one fake API served on an address for a client
//! idem-check does not start. Either way the loop owns Ctrl-C, as for `run` and `webhook`: the
//! probe it stopped is an ERROR and every probe it kept from starting a SKIP, so an interrupted
//! run's report lists every probe of the selection. Dropping the play future on Ctrl-C stops
//! the fake API and kills the command's process group.
//!
//! No calibration gate (each probe reads its own scenarios) and no late effects (each scenario
//! has a fresh fake API of its own, so nothing one probe did can land in the next one's count).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use futures::future::{BoxFuture, FutureExt as _};

use super::checks::{self, ClientProbe};
use super::command::{self, RunRecord, PAST_DEADLINE};
use super::fake_api::FakeApi;
use super::scenario::{Scenario, ScenarioRecord};
use super::{
    build, judge, verdict_only, ClientOptions, ClientReport, ENV_BASE_URL, ENV_OPERATIONS,
    ENV_TOKEN,
};
use crate::outcome::{Outcome, Stop};
use crate::report::ProbeReport;
use crate::runner::each::{each, Ends, Mode, Quiet, Ran};

/// Under `--listen`, how long no request may arrive after the scenario's last final answer
/// before it counts as complete (a retry after a refusal must have had time to show up), at
/// most `--listen-idle`.
const LISTEN_QUIET: Duration = Duration::from_secs(3);

/// What a scenario may take beyond its `--client-timeout` and its runs' [`PAST_DEADLINE`]:
/// starting and stopping its fake API.
const SCENARIO_SLACK: Duration = Duration::from_secs(5);

/// Runs the command once per operation of every selected scenario, probe by probe, judging
/// each probe once its scenarios have run. `interrupt` resolves on Ctrl-C.
pub async fn run(
    opts: &ClientOptions,
    interrupt: impl Future<Output = ()>,
) -> Result<ClientReport> {
    drive(opts, &opts.scenarios, Player::Command, interrupt).await
}

/// Serves one scenario on `addr` for a client idem-check does not run, until the scenario is
/// complete (its operations got their final answers and then 3 s passed without a request),
/// the client fell silent for `--listen-idle`, or the timeout passes; then judges what came.
/// `ready` is told the base URL once the server listens. Ctrl-C ends it as it ends a run.
pub async fn listen(
    opts: &ClientOptions,
    addr: SocketAddr,
    ready: &(dyn Fn(&str) + Sync),
    interrupt: impl Future<Output = ()>,
) -> Result<ClientReport> {
    let Some(first) = opts.scenarios.first() else {
        anyhow::bail!("--listen needs --scenario ID");
    };
    drive(
        opts,
        std::slice::from_ref(first),
        Player::Listen { addr, ready },
        interrupt,
    )
    .await
}

/// Runs the probes that read `scenarios` through the run loop and reports them.
async fn drive(
    opts: &ClientOptions,
    scenarios: &[&'static Scenario],
    player: Player<'_>,
    interrupt: impl Future<Output = ()>,
) -> Result<ClientReport> {
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let started = Instant::now();
    let mut mode = Probes {
        opts,
        scenarios,
        player,
        played: Mutex::new(Vec::new()),
        broken: None,
    };
    let units = checks::CATALOG
        .iter()
        .filter(|p| scenarios.iter().any(|s| p.scenarios.contains(&s.id)));
    let Ran {
        reports,
        interrupted,
    } = each(&mut mode, units, &Quiet, interrupt).await;
    if let Some(e) = mode.broken {
        return Err(e);
    }
    let mut records = mode
        .played
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    // In the order they were selected, whichever probe played them first.
    records.sort_by_key(|r| scenarios.iter().position(|s| s.id == r.scenario.id));
    Ok(build(
        opts,
        records,
        reports,
        started_at,
        started,
        interrupted,
    ))
}

/// How a scenario is played.
enum Player<'r> {
    /// The user's command, run against a fresh fake API on an ephemeral port.
    Command,
    /// A fake API served on `addr` for a client idem-check does not start; `ready` is told its
    /// base URL.
    Listen {
        addr: SocketAddr,
        ready: &'r (dyn Fn(&str) + Sync),
    },
}

/// The client's side of the run loop ([`Mode`]).
struct Probes<'r> {
    opts: &'r ClientOptions,
    /// The scenarios of this run: the selection, or under `--listen` its one scenario.
    scenarios: &'r [&'static Scenario],
    player: Player<'r>,
    /// Every scenario played so far, kept as soon as it ends (so a run Ctrl-C stops inside a
    /// probe still reports the scenarios that ended), and read by every probe it feeds.
    played: Mutex<Vec<ScenarioRecord>>,
    /// Why a scenario could not be played at all (the command would not start, the address
    /// was taken): the error of the whole command, not a verdict on the client.
    broken: Option<anyhow::Error>,
}

impl Probes<'_> {
    /// The scenarios of `p` in this run not played yet, in catalog order.
    fn pending(&self, p: &ClientProbe) -> Vec<&'static Scenario> {
        let played = self.played.lock().unwrap_or_else(PoisonError::into_inner);
        self.scenarios
            .iter()
            .copied()
            .filter(|s| p.scenarios.contains(&s.id))
            .filter(|s| !played.iter().any(|r| r.scenario.id == s.id))
            .collect()
    }

    /// Plays `s` as the run was asked to.
    async fn play_scenario(&self, s: &'static Scenario) -> Result<ScenarioRecord> {
        match &self.player {
            Player::Command => run_command(self.opts, s).await,
            Player::Listen { addr, ready } => serve(self.opts, s, *addr, *ready).await,
        }
    }
}

impl Mode for Probes<'_> {
    type Unit = &'static ClientProbe;
    /// What kept a scenario of the probe from being played at all.
    type Trial = Option<anyhow::Error>;
    const NAMES: (&'static str, &'static str, &'static str) =
        ("probe", "client", "--client-timeout");

    fn id(p: &&'static ClientProbe) -> &'static str {
        p.id
    }

    fn not_run(p: &&'static ClientProbe, outcome: Outcome, reason: String) -> ProbeReport {
        verdict_only(p, outcome, reason)
    }

    /// Once a scenario could not be played, the command ends with that error: nothing else is
    /// played (this report is never shown).
    fn blocked(&self, _: &&'static ClientProbe) -> Option<(Outcome, String)> {
        self.broken
            .as_ref()
            .map(|e| (Outcome::Error, format!("not run: {e:#}")))
    }

    /// `--client-timeout` and what a scenario may take past it, for each scenario still to
    /// play.
    fn limit(&self, p: &&'static ClientProbe) -> Duration {
        self.pending(p)
            .iter()
            .map(|s| match self.player {
                Player::Command => self.opts.timeout + PAST_DEADLINE * s.runs as u32,
                Player::Listen { .. } => self.opts.timeout,
            })
            .fold(SCENARIO_SLACK, |sum, t| sum + t + SCENARIO_SLACK)
    }

    fn begin(&self, _: &&'static ClientProbe) -> Option<anyhow::Error> {
        None
    }

    fn play<'a>(
        &'a self,
        p: &'a &'static ClientProbe,
        broken: &'a mut Option<anyhow::Error>,
    ) -> BoxFuture<'a, Result<(), Stop>> {
        async move {
            for s in self.pending(p) {
                match self.play_scenario(s).await {
                    Ok(record) => self
                        .played
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(record),
                    Err(e) => {
                        let stop = Stop::Error(format!("{e:#}").into());
                        *broken = Some(e);
                        return Err(stop);
                    }
                }
            }
            Ok(())
        }
        .boxed()
    }

    fn ends(_: &Option<anyhow::Error>) -> Ends {
        Ends {
            idle: true,
            ..Ends::default()
        }
    }

    fn finish(
        &mut self,
        p: &&'static ClientProbe,
        broken: Option<anyhow::Error>,
        stop: Option<Stop>,
        _: Instant,
    ) -> ProbeReport {
        if broken.is_some() {
            self.broken = broken;
        }
        let played = self
            .played
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        judge(p, played, self.opts, stop)
    }

    fn gate(&self, _: &&'static ClientProbe, _: &ProbeReport) -> Option<(Outcome, String)> {
        None
    }
}

/// Runs the command against a fresh fake API for scenario `s`: once per run, all runs within
/// `--client-timeout`.
async fn run_command(opts: &ClientOptions, s: &'static Scenario) -> Result<ScenarioRecord> {
    let api = FakeApi::start(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        s.behaviour,
        opts.api.clone(),
    )
    .await?;
    let env = [
        (ENV_BASE_URL, api.base_url()),
        (ENV_TOKEN, opts.api.token.clone()),
        (ENV_OPERATIONS, s.operations.to_string()),
    ];
    let mut runs = Vec::new();
    let deadline = Instant::now() + opts.timeout;
    for n in 1..=s.runs {
        api.set_run(Some(n), s.operations == 1);
        let left = deadline.saturating_duration_since(Instant::now());
        runs.push(command::run(&opts.command, &env, left, api.origin(), n).await?);
    }
    Ok(recorded(api, s, runs).await)
}

/// Serves scenario `s` on `addr` until it is complete, the client fell silent for
/// `--listen-idle`, or `--client-timeout` passes.
async fn serve(
    opts: &ClientOptions,
    s: &'static Scenario,
    addr: SocketAddr,
    ready: &(dyn Fn(&str) + Sync),
) -> Result<ScenarioRecord> {
    let api = FakeApi::start(addr, s.behaviour, opts.api.clone()).await?;
    api.set_run(None, false);
    ready(&api.base_url());
    let deadline = tokio::time::Instant::now() + opts.timeout;
    loop {
        let p = api.progress();
        let silent = p.last_attempt.map(|t| t.elapsed());
        let quiet = LISTEN_QUIET.min(opts.listen_idle);
        let complete = p.finals >= s.total_operations() && silent.is_some_and(|q| q >= quiet);
        if complete || silent.is_some_and(|q| q >= opts.listen_idle) {
            break;
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
            () = tokio::time::sleep_until(deadline) => break,
        }
    }
    Ok(recorded(api, s, Vec::new()).await)
}

/// Stops the fake API of scenario `s` and keeps what it saw, with the command's `runs`.
async fn recorded(api: FakeApi, s: &'static Scenario, runs: Vec<RunRecord>) -> ScenarioRecord {
    let base_url = api.base_url();
    let rec = api.finish().await;
    ScenarioRecord {
        scenario: s,
        base_url,
        attempts: rec.attempts,
        runs,
        payments: rec.payments,
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::client::command::tests::{running, until};
    use crate::client::scenario;
    use crate::runner::{INTERRUPTED_INSIDE, NOT_RUN_INTERRUPTED};

    fn options(command: Vec<String>, scenarios: &[&str]) -> ClientOptions {
        ClientOptions {
            command,
            suite: crate::catalog::load_suite(crate::suite::DEFAULT_SUITE).unwrap(),
            timeout: Duration::from_secs(60),
            listen_idle: Duration::from_secs(10),
            strict: false,
            scenarios: scenarios
                .iter()
                .map(|id| scenario::find(id).unwrap())
                .collect(),
            api: crate::client::fake_api::tests::payments(),
        }
    }

    /// Ctrl-C inside the second scenario: the probes `created` fed are judged (from one play of
    /// it), the probe it stopped is an ERROR, the probe after it a SKIP, none is missing, only
    /// the scenario that ended is reported, and the command's whole group is killed.
    #[tokio::test]
    async fn ctrl_c_inside_a_scenario_lists_every_probe() {
        let dir = tempfile::tempdir().unwrap();
        let count = dir.path().join("count");
        let grandchild = dir.path().join("grandchild");
        // The first run (scenario `created`) exits at once; the second starts a grandchild,
        // says its pid, and waits for it.
        let script = format!(
            "n=$(cat '{count}' 2>/dev/null || echo 0); echo $((n + 1)) > '{count}'; \
             [ \"$n\" = 0 ] && exit 0; \
             sleep 30 & echo $! > '{grandchild}.new'; mv '{grandchild}.new' '{grandchild}'; wait",
            count = count.display(),
            grandchild = grandchild.display(),
        );
        let opts = options(
            vec!["sh".into(), "-c".into(), script],
            &["created", "lost-response", "refused-422"],
        );
        let report = run(
            &opts,
            until("the second run's grandchild", || grandchild.exists()),
        )
        .await
        .unwrap();

        assert!(report.interrupted);
        let probes: Vec<(&str, Outcome, &str)> = report
            .probes
            .iter()
            .map(|p| (p.id, p.outcome, p.reason.as_str()))
            .collect();
        let ids: Vec<&str> = probes.iter().map(|p| p.0).collect();
        assert_eq!(
            ids,
            [
                "client-key-present",
                "client-key-syntax",
                "client-lost-response",
                "client-stops-on-4xx"
            ],
            "{probes:?}"
        );
        for judged in &probes[..2] {
            assert!(
                judged.2 != INTERRUPTED_INSIDE && judged.2 != NOT_RUN_INTERRUPTED,
                "{probes:?}"
            );
        }
        assert_eq!(
            probes[2],
            ("client-lost-response", Outcome::Error, INTERRUPTED_INSIDE)
        );
        assert_eq!(
            probes[3],
            ("client-stops-on-4xx", Outcome::Skip, NOT_RUN_INTERRUPTED)
        );
        let played: Vec<&str> = report.scenarios.iter().map(|s| s.id).collect();
        assert_eq!(played, ["created"]);
        // `created` played once for both of its probes, then lost-response's run.
        assert_eq!(std::fs::read_to_string(&count).unwrap().trim(), "2");
        let pid = std::fs::read_to_string(&grandchild).unwrap();
        until("the grandchild's end", || !running(pid.trim())).await;
    }
}
