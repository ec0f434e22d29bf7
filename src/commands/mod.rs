//! One file per subcommand, from parsed options to an exit code, and what they share: where
//! output and reports go, how they are rendered, Ctrl-C.
//!
//! The libraries below (`runner`, `stress`, `client`, `discover`, `matrix`, `report`) never
//! read options; the command files turn options into their inputs, and the target flags become
//! a validated [`idem_check::config::Config`] in `target.rs`.

use std::io::Write as _;

use crate::cli::{Command, Opts, ReportArgs};
use idem_check::carrier::Place;
use idem_check::exit::{AppError, ExitCode};
use idem_check::redact::Secrets;
use idem_check::report::terminal;
use idem_check::report::{self, Format, RenderOptions, ReportFile, Reportable};

mod client;
mod completions;
mod discover;
mod flags;
mod init;
mod list;
mod matrix;
mod merge;
mod reproduce;
mod run;
mod stress;
mod target;
mod webhook;

type Result<T, E = AppError> = std::result::Result<T, E>;

/// Runs the parsed command.
pub async fn run(opts: Opts) -> Result<ExitCode> {
    match opts.command {
        Command::Run(args) => run::run(*args).await,
        Command::List(args) => list::list(&args),
        Command::Webhook(args) => webhook::webhook(*args).await,
        Command::Stress(args) => stress::stress(*args).await,
        Command::Merge(args) => merge::merge(&args),
        Command::Client(args) => client::client(*args).await,
        Command::Matrix(args) => matrix::matrix(&args),
        Command::Reproduce(args) => reproduce::reproduce(args).await,
        Command::Discover(args) => discover::discover(&args).await,
        Command::Init(args) => init::init(&args).await,
        Command::Explain { id, suite } => list::explain(&id, &suite),
        Command::Completions { shell } => completions::completions(shell),
        Command::Man { dir } => completions::man(dir.as_deref()),
    }
}

/// Prints to stdout. A reader that went away (`idem-check list | head -1`) is not an error:
/// the output is simply no longer wanted, so the command ends quietly with its own code.
fn emit(text: &str) -> Result<()> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(AppError::runtime(
            anyhow::Error::new(e).context("cannot write to stdout"),
        )),
        _ => Ok(()),
    }
}

/// The report files asked for, checked writable (folders created) before any work is done.
fn report_files(args: &ReportArgs) -> Result<Vec<ReportFile>> {
    let files = ReportFile::list(&[
        (Format::Junit, &args.junit),
        (Format::Json, &args.json),
        (Format::Markdown, &args.markdown),
        (Format::Html, &args.html),
    ]);
    report::format::prepare(&files).map_err(AppError::runtime)?;
    Ok(files)
}

/// How the terminal shows a run of any command: `--color`, `--max-body-bytes` (each report
/// file derives its own from these), the secrets to mask and where the keys to show travel.
fn render_options(args: &ReportArgs, secrets: Secrets, key: Place) -> RenderOptions {
    RenderOptions {
        color: terminal::use_color(args.color),
        secrets,
        max_body: args
            .max_body_bytes
            .unwrap_or(Format::Terminal.default_max_body()),
        key,
        summary_only: args.summary,
        resigner: None,
    }
}

/// Prints the command's terminal output, then writes every report; each report failure is
/// printed, and folded into the exit code as [`ExitCode::with_report_failure`] documents. A
/// stdout that cannot be written (a full disk behind a redirect) does not keep the reports
/// from being written: the run's record is never lost to it.
fn finish(
    terminal: &str,
    report: &dyn Reportable,
    files: &[ReportFile],
    render: &RenderOptions,
    args: &ReportArgs,
    code: ExitCode,
) -> Result<ExitCode> {
    let printed = emit(terminal);
    let failures = report::format::write_reports(report, files, render, args.max_body_bytes);
    for e in &failures {
        eprintln!("idem-check: error: {e:#}");
    }
    printed.map(|()| code.with_report_failure(!failures.is_empty()))
}

/// Ctrl-C, watched from the start of `run` and `stress`: before any setup (the bundled
/// reference server starting, an API description being fetched), so that Ctrl-C during setup
/// ends the command the documented way (exit 130, what was set up stopped, the reference
/// server's temporary folder removed) rather than killing the process halfway.
struct Interrupt(tokio::sync::watch::Receiver<bool>);

impl Interrupt {
    /// Installs the handler now: from here on Ctrl-C no longer ends the process by itself,
    /// it is seen by [`Interrupt::pressed`] and [`Interrupt::was_pressed`]. Where the signal
    /// cannot be watched, Ctrl-C keeps its default effect.
    fn watch() -> Interrupt {
        #[cfg(unix)]
        let ctrl_c = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
        #[cfg(windows)]
        let ctrl_c = tokio::signal::windows::ctrl_c();
        let (tx, rx) = tokio::sync::watch::channel(false);
        if let Ok(mut ctrl_c) = ctrl_c {
            tokio::spawn(async move {
                if ctrl_c.recv().await.is_some() {
                    let _ = tx.send(true);
                }
            });
        }
        Interrupt(rx)
    }

    /// Resolves once Ctrl-C was pressed, at once if it already was (never, where the signal
    /// cannot be watched).
    async fn pressed(&self) {
        if self.0.clone().wait_for(|pressed| *pressed).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    fn was_pressed(&self) -> bool {
        *self.0.borrow()
    }

    /// `work`, unless Ctrl-C comes first (`None`: `work` is dropped, so only for work that
    /// leaves nothing behind when it stops halfway, like fetching a document).
    async fn unless_pressed<T>(&self, work: impl std::future::Future<Output = T>) -> Option<T> {
        tokio::select! {
            done = work => Some(done),
            () = self.pressed() => None,
        }
    }
}

/// What `run` and `stress` end with when Ctrl-C came during setup: nothing was checked, and
/// no report is written, since there is nothing to report.
fn interrupted_in_setup() -> ExitCode {
    eprintln!("idem-check: interrupted by Ctrl-C before any probe ran: nothing was checked");
    ExitCode::Interrupted
}

/// `secrets` with every credential `--auth-cmd` printed during the run (the first is already
/// one), so a token fetched after a 401 is masked in every report like the first.
pub(super) fn with_credentials(secrets: Secrets, config: &idem_check::config::Config) -> Secrets {
    let values = config.auth.as_ref().map(|a| a.values()).unwrap_or_default();
    values
        .iter()
        .enumerate()
        .skip(1)
        .fold(secrets, |s, (i, v)| {
            s.with_named(
                v,
                &format!("IDEM_AUTH_{i}"),
                "a credential --auth-cmd printed",
            )
        })
}
