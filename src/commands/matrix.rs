//! `idem-check matrix REPORT…`: one table across implementations, as Markdown (printed or
//! written) and optionally a self-contained HTML page.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use super::{emit, Result};
use idem_check::exit::{AppError, ExitCode};
use idem_check::report::{self, Format, ReportFile};

/// `idem-check matrix`.
#[derive(Args)]
pub struct MatrixArgs {
    /// JSON reports (`run --report-json`), or folders of them; `NAME=FILE` titles a column.
    #[arg(value_name = "REPORT", required = true)]
    pub reports: Vec<String>,

    /// Write the table as Markdown here (default: print it).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    /// Write the table as a self-contained HTML page here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

pub(super) fn matrix(args: &MatrixArgs) -> Result<ExitCode> {
    let m = idem_check::matrix::build(
        idem_check::matrix::load(&args.reports).map_err(AppError::input_file)?,
    );
    let md = idem_check::matrix::markdown::render(&m);
    let write = |path: &Path, text: &str| {
        report::format::prepare(&[ReportFile {
            format: Format::Markdown,
            path: path.to_path_buf(),
        }])
        .and_then(|()| report::file::write_atomically(path, text))
        .with_context(|| format!("could not write {}", path.display()))
        .map_err(AppError::runtime)
    };
    match &args.markdown {
        Some(path) => write(path, &md)?,
        None => emit(&md)?,
    }
    if let Some(path) = &args.html {
        write(path, &idem_check::matrix::html::render(&m))?;
    }
    Ok(ExitCode::Ok)
}
