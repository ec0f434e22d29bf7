//! `idem-check merge REPORT.json…`: the segments of one `stress --segment` run, judged as one
//! run (see [`idem_check::stress::segment`]), with the same terminal output, reports and exit codes
//! as `stress`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use super::{finish, render_options, report_files, Result};
use crate::cli::ReportArgs;
use idem_check::carrier::Place;
use idem_check::exit::{AppError, ExitCode};
use idem_check::redact::Secrets;
use idem_check::report::terminal;
use idem_check::stress::segment::{self, SegmentReport};

/// `idem-check merge`.
#[derive(Args)]
pub struct MergeArgs {
    /// The JSON reports of every segment of one run (`stress --segment I/N --run-id ID
    /// --report-json FILE`).
    #[arg(value_name = "REPORT.json", required = true)]
    pub reports: Vec<PathBuf>,

    /// Reports of the merged run; JUnit holds one testcase, `stress`.
    #[command(flatten)]
    pub report: ReportArgs,
}

pub(super) fn merge(args: &MergeArgs) -> Result<ExitCode> {
    let files = report_files(&args.report)?;
    let reports = args
        .reports
        .iter()
        .map(|path| read(path).map(|r| (path.clone(), r)))
        .collect::<Result<Vec<_>>>()?;
    let report = segment::merge(&reports).map_err(AppError::input_file)?;
    let render = render_options(&args.report, Secrets::default(), Place::ietf());
    let text = terminal::render(&report, &render, false);
    let code = ExitCode::for_run(&report.summary, false);
    finish(&text, &report, &files, &render, &args.report, code)
}

/// One segment's JSON report; a file that is missing or is not a stress report is exit 2,
/// naming it.
fn read(path: &Path) -> Result<SegmentReport> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {}", path.display()))
        .map_err(AppError::input_file)?;
    serde_json::from_str(&text)
        .with_context(|| {
            format!(
                "{} is not a stress report (stress --segment I/N --run-id ID --report-json FILE)",
                path.display()
            )
        })
        .map_err(AppError::input_file)
}
