//! `idem-check completions SHELL` and `idem-check man`: generated from the same clap definition
//! as `--help`, so they never drift from it.

use std::path::Path;

use anyhow::Context as _;
use clap::CommandFactory as _;

use super::{Opts, Result};
use idem_check::exit::ExitCode;

/// Prints the completion script for `shell`.
pub(super) fn completions(shell: clap_complete::Shell) -> Result<ExitCode> {
    let mut cmd = Opts::command();
    clap_complete::generate(shell, &mut cmd, "idem-check", &mut std::io::stdout());
    Ok(ExitCode::Ok)
}

/// Prints idem-check.1, or writes one page per command into `dir`.
pub(super) fn man(dir: Option<&Path>) -> Result<ExitCode> {
    let cmd = Opts::command();
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("could not create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("could not write the man pages into {}", dir.display()))?;
        }
        None => clap_mangen::Man::new(cmd)
            .render(&mut std::io::stdout())
            .context("could not print the man page")?,
    }
    Ok(ExitCode::Ok)
}
