//! `idem-check reproduce REPORT.json --probe ID [--exchange N]`: one probe's scenario sent
//! again (see [`idem_check::reproduce`]); the exit code says whether a key executed more than once.
//! A webhook report's probe is its deliveries, each signed afresh from the exported secrets.

use std::path::PathBuf;

use clap::Args;

use super::{emit, Result};
use idem_check::exit::{AppError, ExitCode};
use idem_check::report::ReplayInputs;
use idem_check::reproduce::{plan, PlanError, RecordedRun, Replayer, RestoreError};

/// Exit codes of `reproduce`.
pub(super) const REPRODUCE_HELP: &str = "Exit codes:
  0    sent; the counter rose by at most one (or one exchange was sent again)
  1    usage error (an unknown probe or exchange, a variable not set)
  2    the report is missing, is not a run report, or cannot be sent again
  3    the target did not answer
  4    a burst or a lost response executed more than once: the counter rose by more than one";

/// `idem-check reproduce`.
#[derive(Args)]
pub struct ReproduceArgs {
    /// A JSON report of `idem-check run` or `idem-check webhook` (--report-json FILE).
    #[arg(value_name = "REPORT.json")]
    pub report: PathBuf,

    /// The probe whose scenario to send again.
    #[arg(long, value_name = "ID")]
    pub probe: String,

    /// Send only this exchange of the probe again, exactly as recorded (its key too).
    #[arg(long, value_name = "N")]
    pub exchange: Option<usize>,

    /// How many bursts to send at most, each with a fresh key and its own counter reads,
    /// stopping at the first that executes twice: a race shows by chance (as many as the
    /// probe sends).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub attempts: usize,

    /// The value of a variable the report's masked values name (IDEM_TOKEN_A=…), instead of
    /// the environment's (repeatable).
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
}

/// `--var NAME=VALUE`: the name trimmed, the value as typed (it may hold `=` or spaces).
fn parse_var(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.to_string()))
        }
        _ => Err(format!("{s:?} is not NAME=VALUE")),
    }
}

pub(super) async fn reproduce(args: ReproduceArgs) -> Result<ExitCode> {
    let run = RecordedRun::read(&args.report).map_err(AppError::input_file)?;
    if run.reference {
        let (command, server) = if run.suite == "webhook" {
            ("webhook", "consumer")
        } else {
            ("run", "server")
        };
        return Err(AppError::input_file(anyhow::anyhow!(
            "{} is a report of `{command} --reference`, whose in-process {server} stopped with that run: run idem-reference-server, check it with `{command} URL … --report-json FILE`, and reproduce from that report",
            args.report.display()
        )));
    }
    let Some(probe) = run.probe(&args.probe) else {
        let ids: Vec<&str> = run.probes.iter().map(|p| p.id.as_str()).collect();
        return Err(AppError::Usage(anyhow::anyhow!(
            "--probe {}: {} has no such probe (it has {})",
            args.probe,
            args.report.display(),
            ids.join(", ")
        )));
    };
    // A report written before reproduce existed: the key header is the default, no counter,
    // no hold.
    let inputs = run.replay.clone().unwrap_or_else(|| ReplayInputs {
        key_header: "Idempotency-Key".into(),
        key_in_body: None,
        count_url: None,
        count_pointer: None,
        count_cmd: None,
        hold_header: None,
        hold_release: None,
        quiet_ms: 300,
        timeout_ms: 10_000,
    });
    let scenario = plan(probe, args.exchange, &inputs.key_place()).map_err(|e| match e {
        PlanError::NoExchange { .. } => AppError::Usage(anyhow::anyhow!("--exchange: {e}")),
        _ => AppError::Usage(anyhow::anyhow!("--probe {}: {e}", args.probe)),
    })?;
    let vars = args.vars.clone();
    let lookup = move |name: &str| {
        vars.iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(name).ok())
    };
    let replayer = Replayer::new(inputs, Box::new(lookup)).map_err(AppError::runtime)?;
    let seen = replayer
        .play(&scenario, &probe.exchanges, args.attempts)
        .await
        .map_err(|e| match e.downcast::<RestoreError>() {
            Ok(e @ RestoreError::MissingVar { .. }) => AppError::Usage(e.into()),
            Ok(e) => AppError::input_file(e),
            Err(e) => AppError::runtime(e),
        })?;
    let mut out = format!(
        "reproduce {} ({} in {}) against {}\n",
        probe.id,
        probe.outcome,
        args.report.display(),
        run.target
    );
    out.extend(seen.lines.iter().map(|l| format!("{l}\n")));
    let code = match (seen.rise(), seen.one_key) {
        _ if seen.unanswered => {
            out.push_str("the target did not answer\n");
            ExitCode::Error
        }
        (Some(rise), true) if rise > 1 => {
            out.push_str(&format!(
                "the counter rose by {rise}: one key executed {rise} times (reproduced)\n"
            ));
            ExitCode::Fail
        }
        (Some(rise), true) => {
            out.push_str(&format!(
                "the counter rose by {rise}: one key executed {rise} time{} (not reproduced)\n",
                if rise == 1 { "" } else { "s" }
            ));
            ExitCode::Ok
        }
        (Some(rise), false) => {
            out.push_str(&format!("the counter rose by {rise}\n"));
            ExitCode::Ok
        }
        (None, _) => ExitCode::Ok,
    };
    emit(&out)?;
    Ok(code)
}
