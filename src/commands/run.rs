//! `idem-check run`: the probes against one target (a URL, a target file, the bundled reference
//! server), or against every keyed operation of an API description (`--openapi`), with each
//! verdict streamed to the terminal as soon as it is known.

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use anyhow::Context as _;
use clap::Args;

use super::target::{openapi_targets, run_options, with_target};
use super::{
    finish, interrupted_in_setup, render_options, report_files, with_credentials, Interrupt, Result,
};
use crate::cli::{ReportArgs, TargetArgs};
use idem_check::carrier::Place;
use idem_check::config::{Config, RunOptions};
use idem_check::discover::run::{OpenApiReport, OperationReport};
use idem_check::exit::{AppError, ExitCode};
use idem_check::outcome::Outcome;
use idem_check::probes;
use idem_check::redact::Secrets;
use idem_check::report::terminal::{self, Progress};
use idem_check::report::{ProbeReport, RenderOptions, RunReport};
use idem_check::runner::{self, Observer};

/// `idem-check run`.
#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,

    /// Run only this probe, or this group: key-syntax, enforcement, scope, durability
    /// (repeatable, or a comma-separated list).
    #[arg(long, value_name = "ID|GROUP", value_delimiter = ',')]
    pub probe: Vec<String>,

    /// Do not run this probe or group (repeatable, or a comma-separated list).
    #[arg(long, value_name = "ID|GROUP", value_delimiter = ',')]
    pub skip: Vec<String>,

    /// Fail on recommended checks too (WARN becomes FAIL).
    #[arg(long)]
    pub strict: bool,

    /// How keys are written: quoted (RFC 8941 Strings), bare, or auto — the suite's form, falling
    /// back to bare keys when the API refuses the quoted form at the pre-flight (quoted-key then
    /// FAILs and every report says so)
    #[arg(long, value_name = "FORM", default_value = "auto")]
    pub key_form: idem_check::keys::KeyForm,

    #[command(flatten)]
    pub report: ReportArgs,
}

pub(super) async fn run(args: RunArgs) -> Result<ExitCode> {
    let interrupt = Interrupt::watch();
    if args.target.openapi.is_some() {
        return run_openapi(&args, &interrupt).await;
    }
    let files = report_files(&args.report)?;
    let opts = options(&args)?;
    let done = with_target(&args.target, opts, &interrupt, async |config| {
        let selection = probes::select(&config.suite, &args.probe, &args.skip)?;
        let render = render_options(
            &args.report,
            config.secrets.clone(),
            config.key_carrier.place.clone(),
        );
        let progress = Progress::new(selection.len() as u64, std::io::stderr().is_terminal());
        // The header and each verdict are printed as they are known; the evidence and the
        // summary once the run is over.
        let context = runner::context(&config);
        progress.line(&terminal::header(
            &config.operation.line(),
            &config.suite.name,
            &context,
            &render,
        ));
        progress.line("");
        let observer = ProgressObserver::new(&progress, &render);
        let report = runner::run(config.clone(), selection, &observer, interrupt.pressed())
            .await
            .map_err(AppError::runtime)?;
        progress.finish();
        let render = RenderOptions {
            secrets: with_credentials(render.secrets.clone(), &config),
            ..render.clone()
        };
        // The header printed before the run could not know what the pre-flight settled (the
        // effect basis, the key form): that part alone, above the evidence and the summary.
        let settled = terminal::settled_context(&report, &context, &render)
            .map(|line| format!("\n{line}\n"))
            .unwrap_or_default();
        let text = format!(
            "{}{settled}{}",
            observer.settled(&report),
            terminal::render_tail(&report, &render, config.strict)
        );
        let code = ExitCode::for_run(&report.summary, report.interrupted);
        finish(&text, &report, &files, &render, &args.report, code)
    })
    .await?;
    Ok(done.unwrap_or_else(interrupted_in_setup))
}

/// The run options of `run`, for one target or every operation of an API description alike:
/// the target flags' and `run`'s own (`--strict`, `--key-form`).
fn options(args: &RunArgs) -> Result<RunOptions> {
    Ok(RunOptions {
        strict: args.strict,
        key_form: args.key_form,
        kept_body: idem_check::report::format::kept_body_bytes(args.report.max_body_bytes),
        ..run_options(&args.target)?
    })
}

/// `run --openapi SPEC`: every selected operation, one after the other. Each discovered
/// operation becomes an ordinary target description (URL, method, declared key header, body,
/// id pointer) with the usual target flags laid over it, checked by the ordinary run.
async fn run_openapi(args: &RunArgs, interrupt: &Interrupt) -> Result<ExitCode> {
    let files = report_files(&args.report)?;
    let Some(loaded) = interrupt
        .unless_pressed(openapi_targets(&args.target))
        .await
    else {
        return Ok(interrupted_in_setup());
    };
    let (found, targets, skipped) = loaded?;
    let base_opts = options(args)?;
    let mut configs = Vec::new();
    for (op, target) in targets {
        let opts = RunOptions {
            label: Some(
                args.target
                    .label
                    .clone()
                    .unwrap_or_else(|| op.operation_id.clone()),
            ),
            ..base_opts.clone()
        };
        let config = Config::build(target, &opts, None)
            .with_context(|| format!("operation {}", op.operation_id))?;
        let selection = probes::select(&config.suite, &args.probe, &args.skip)?;
        configs.push((op, Arc::new(config), selection));
    }
    // Every operation shares the flags, so the first one's secrets are every run's.
    let (secrets, key) = configs.first().map_or_else(
        || (Secrets::default(), Place::ietf()),
        |(_, c, _)| (c.secrets.clone(), c.key_carrier.place.clone()),
    );
    let mut render = render_options(&args.report, secrets, key);
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let start = Instant::now();
    let mut runs = Vec::new();
    for (op, config, selection) in configs {
        let progress = Progress::new(selection.len() as u64, std::io::stderr().is_terminal());
        // Each operation's heading, header and verdicts stream as they are known; the evidence
        // and the summaries come once every operation is done, so each verdict is printed once.
        let context = runner::context(&config);
        progress.line(&format!(
            "{}{}\n",
            idem_check::discover::run::heading(&op),
            terminal::header(
                &config.operation.line(),
                &config.suite.name,
                &context,
                &render
            )
        ));
        let report = runner::run(
            config.clone(),
            selection,
            &ProgressObserver::new(&progress, &render),
            interrupt.pressed(),
        )
        .await
        .map_err(AppError::runtime)?;
        progress.finish();
        render.secrets = with_credentials(render.secrets, &config);
        if let Some(line) = terminal::settled_context(&report, &context, &render) {
            progress.line(&line);
        }
        progress.line("");
        let stop = report.interrupted;
        runs.push(OperationReport::new(&op, report));
        if stop {
            break;
        }
    }
    let report = OpenApiReport::new(
        &args.target.openapi.clone().unwrap_or_default(),
        &found.version,
        started_at,
        start.elapsed().as_secs_f64() * 1000.0,
        args.strict,
        runs,
        skipped,
    );
    let text = report.terminal_tail(&render, args.strict);
    let code = ExitCode::for_run(&report.summary, report.interrupted);
    finish(&text, &report, &files, &render, &args.report, code)
}

/// Streams the run to the terminal: the running probe on the bar, each verdict line above it
/// as soon as its probe is done (the probes a failed pre-flight kept from running are one line
/// in the tail instead).
struct ProgressObserver<'a> {
    progress: &'a Progress,
    render: &'a RenderOptions,
    /// The verdict each probe was streamed with, before root causes were settled.
    streamed: std::sync::Mutex<Vec<(&'static str, Outcome)>>,
}

impl<'a> ProgressObserver<'a> {
    fn new(progress: &'a Progress, render: &'a RenderOptions) -> Self {
        ProgressObserver {
            progress,
            render,
            streamed: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The probes whose verdict changed after the run (a FAIL streamed while its prerequisite
    /// had not run yet, or a PASS whose counts missed a late execution), each line again with
    /// its final verdict; empty when none changed.
    fn settled(&self, report: &RunReport) -> String {
        let streamed = self
            .streamed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let changed: Vec<String> = report
            .probes
            .iter()
            .filter(|p| {
                streamed
                    .iter()
                    .any(|(id, o)| *id == p.id && *o != p.outcome)
            })
            .map(|p| terminal::probe_line(p, self.render))
            .collect();
        if changed.is_empty() {
            return String::new();
        }
        format!(
            "\nsettled after the run (a failure these follow from, or executions that landed after they ended):\n{}\n",
            changed.join("\n")
        )
    }
}

impl Observer for ProgressObserver<'_> {
    fn started(&self, id: &str) {
        self.progress.start_probe(id);
    }
    fn finished(&self, report: &ProbeReport) {
        if !terminal::not_run(report) {
            self.progress
                .line(&terminal::probe_line(report, self.render));
            self.streamed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((report.id, report.outcome));
        }
        self.progress.finish_probe();
    }
}
