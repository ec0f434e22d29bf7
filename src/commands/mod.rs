//! The command line (`Opts`), one file per subcommand from its own options to an exit code, and
//! what they share: where output and reports go, how they are rendered, Ctrl-C. Option groups
//! two or more commands flatten are in `cli.rs`.
//!
//! The libraries below (`runner`, `stress`, `client`, `discover`, `matrix`, `report`) never
//! read options; the command files turn options into their inputs, and the target flags become
//! a validated [`idem_check::config::Config`] in `target.rs`.
//!
//! None of the option structs (here, in each command's file and in `cli.rs`) implements
//! `Debug`: they hold the command line as typed, `-H` credentials, `--secret` values and proxy
//! passwords included, and a `{:?}` of them in a log line or a panic message would print those.
//! What a run shows of its target goes through [`idem_check::target::TargetSpec`], whose `Debug`
//! masks them.

use std::io::Write as _;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::cli::ReportArgs;
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

/// Checks that an HTTP API really survives a retried POST: black-box probes of its
/// Idempotency-Key support (missing key, replays, concurrent duplicates, payload mismatch, key
/// syntax, tenant scope, persistence across restarts), with the exact exchanges as evidence.
#[derive(Parser)]
#[command(name = "idem-check", version, max_term_width = 98, after_long_help = idem_check::exit::HELP)]
pub struct Opts {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the probes against a URL, a target file, or the bundled reference server.
    #[command(after_long_help = idem_check::exit::HELP)]
    Run(Box<run::RunArgs>),
    /// List every probe: id, group, section, check severities and what it needs.
    List(list::ListArgs),
    /// Check a webhook consumer: play its sender (signed as the scheme's real senders sign)
    /// and judge that every redelivered, replayed or concurrent event is applied exactly once
    /// and every forgery refused.
    #[command(after_long_help = idem_check::exit::HELP)]
    Webhook(Box<webhook::WebhookArgs>),
    /// Check exactly-once under load: many keys, each sent as a burst of duplicates plus late
    /// retries, with many requests in flight. Not part of `run`.
    #[command(after_long_help = idem_check::exit::HELP)]
    Stress(Box<stress::StressArgs>),
    /// Judge the JSON reports of `stress --segment` runs as one run: every key once across the
    /// segments, and the effect counter over the union of their windows.
    #[command(after_long_help = idem_check::exit::HELP)]
    Merge(merge::MergeArgs),
    /// Check a client or SDK instead of a server: run its command against a fake API that drops
    /// responses, refuses and throttles, and judge how it retries.
    #[command(
        after_long_help = idem_check::exit::HELP,
        mut_arg("json", |a| a.help("Write a JSON report (schema idem-check.client/1)."))
    )]
    Client(Box<client::ClientArgs>),
    /// Build one table across implementations from JSON reports (files or folders).
    Matrix(matrix::MatrixArgs),
    /// Send one probe's scenario from a JSON report again, against the same target: its burst,
    /// its dropped answer and retries, or one exchange; prints the counter before and after.
    #[command(after_long_help = reproduce::REPRODUCE_HELP)]
    Reproduce(reproduce::ReproduceArgs),
    /// List the operations of an OpenAPI or Swagger document that take an idempotency key.
    #[command(after_long_help = idem_check::exit::HELP)]
    Discover(discover::DiscoverArgs),
    /// Write one commented target file per operation of an OpenAPI or Swagger document that
    /// takes an idempotency key, to edit before `run --target FILE`.
    #[command(after_long_help = idem_check::exit::HELP)]
    Init(init::InitArgs),
    /// Print a shell completion script: `idem-check completions bash > /etc/bash_completion.d/idem-check`.
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
    /// Print the man page, or write one page per command into DIR.
    Man {
        /// Write idem-check.1, idem-check-run.1, … here instead of printing idem-check.1.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Explain one probe: what it sends, what it expects, and why.
    Explain {
        /// The probe id (see `idem-check list`).
        id: String,
        /// The suite whose expectations to show.
        #[arg(long, default_value = idem_check::suite::DEFAULT_SUITE, value_name = "NAME|FILE")]
        suite: String,
    },
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli;

    /// Asks whether `T` implements `Debug`: see [`implements_debug`].
    struct DebugProbe<T>(std::marker::PhantomData<T>);

    /// The answer when `T` does not: method lookup falls back to the trait.
    trait NoDebug {
        fn implements_debug(&self) -> bool {
            false
        }
    }

    impl<T> NoDebug for DebugProbe<T> {}

    impl<T: std::fmt::Debug> DebugProbe<T> {
        /// The answer when `T` does: an inherent method wins over the trait's.
        fn implements_debug(&self) -> bool {
            true
        }
    }

    /// Whether the type implements `Debug`, decided where the type is named (in a generic
    /// function the bound would be unknown and the answer always no).
    macro_rules! implements_debug {
        ($t:ty) => {
            DebugProbe::<$t>(std::marker::PhantomData).implements_debug()
        };
    }

    /// The parsed command line holds what was typed: `-H` credentials, `--secret` values, proxy
    /// passwords, commands with secrets in them. None of its structs can be shown with `{:?}`, so
    /// no log line or panic message can print them; what a run shows goes through its
    /// [`TargetSpec`](idem_check::target::TargetSpec), whose `Debug` masks them.
    #[test]
    fn the_parsed_command_line_has_no_debug() {
        let debug = [
            ("Opts", implements_debug!(Opts)),
            ("Command", implements_debug!(Command)),
            ("RunArgs", implements_debug!(run::RunArgs)),
            ("ListArgs", implements_debug!(list::ListArgs)),
            ("WebhookArgs", implements_debug!(webhook::WebhookArgs)),
            ("StressArgs", implements_debug!(stress::StressArgs)),
            ("MergeArgs", implements_debug!(merge::MergeArgs)),
            ("ClientArgs", implements_debug!(client::ClientArgs)),
            ("MatrixArgs", implements_debug!(matrix::MatrixArgs)),
            ("ReproduceArgs", implements_debug!(reproduce::ReproduceArgs)),
            ("DiscoverArgs", implements_debug!(discover::DiscoverArgs)),
            ("InitArgs", implements_debug!(init::InitArgs)),
            ("TargetArgs", implements_debug!(cli::TargetArgs)),
            ("InputFlags", implements_debug!(cli::InputFlags)),
            ("ConnectionArgs", implements_debug!(cli::ConnectionArgs)),
            ("OpenApiArgs", implements_debug!(cli::OpenApiArgs)),
            ("ReportArgs", implements_debug!(cli::ReportArgs)),
        ];
        let shown: Vec<&str> = debug.iter().filter(|(_, d)| *d).map(|(n, _)| *n).collect();
        assert!(shown.is_empty(), "Debug on {shown:?}");
        // The probe tells the two apart.
        assert!(implements_debug!(idem_check::config::TargetSpec));
    }
}
