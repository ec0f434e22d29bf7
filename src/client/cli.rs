//! From the parsed `idem-check client` options to an exit code: which scenarios, which token,
//! run or listen, then the same renderers as `run`.

use anyhow::{anyhow, Result};

use super::{scenario, ClientReport};
use crate::cli::ClientArgs;
use crate::exit::{AppError, ExitCode};
use crate::report::terminal;
use crate::report::{html, json, Format, RenderOptions, Reportable};
use crate::suite::Suite;

/// `idem-check client`: the options checked, the scenarios run (or one served), the reports
/// written; the exit code follows the verdicts as for `run`.
pub async fn run(args: ClientArgs) -> std::result::Result<ExitCode, AppError> {
    if args.listen.is_some() && args.scenario.len() != 1 {
        return Err(anyhow!("--listen serves exactly one scenario: give one --scenario ID").into());
    }
    let scenarios = if args.scenario.is_empty() {
        scenario::CATALOG.iter().collect()
    } else {
        let mut chosen = args
            .scenario
            .iter()
            .map(|id| scenario::find(id))
            .collect::<Result<Vec<_>>>()?;
        chosen.sort_by_key(|s| scenario::CATALOG.iter().position(|c| c.id == s.id));
        chosen.dedup();
        chosen
    };
    let files = crate::app::report_files(&args.report)?;
    let token = std::env::var(super::ENV_TOKEN)
        .ok()
        .filter(|t| args.listen.is_some() && !t.is_empty())
        .unwrap_or_else(|| format!("idem-check-{}", uuid::Uuid::new_v4().simple()));
    let opts = super::ClientOptions {
        command: args.command.clone(),
        suite: Suite::load(&args.suite)?,
        timeout: args.client_timeout,
        strict: args.strict,
        scenarios,
        token: token.clone(),
    };
    let interrupt = super::interrupt_watch();
    let report = match args.listen {
        Some(addr) => {
            let ready = |base: &str| {
                eprintln!(
                    "serving scenario {} until it completes, {} pass or Ctrl-C:\n  \
                     export {}={base} {}={token}",
                    opts.scenarios[0].id,
                    humantime::format_duration(opts.timeout),
                    super::ENV_BASE_URL,
                    super::ENV_TOKEN,
                );
            };
            super::listen(&opts, addr, ready, interrupt)
                .await
                .map_err(AppError::runtime)?
        }
        None => super::run(&opts, interrupt)
            .await
            .map_err(AppError::runtime)?,
    };
    let render = RenderOptions {
        color: terminal::use_color(args.report.color),
        secrets: crate::redact::Secrets::from_values(&[token]),
        max_body: args
            .report
            .max_body_bytes
            .unwrap_or(Format::Terminal.default_max_body()),
        ..RenderOptions::default()
    };
    let run = report.as_run_report();
    print!("{}", terminal::render(&run, &render, opts.strict));
    let code = ExitCode::for_run(&run.summary, report.interrupted);
    Ok(crate::app::finish_reports(
        &report,
        &files,
        &render,
        &args.report,
        code,
    ))
}

/// A client run's files: its own JSON (`idem-check.client/1`), an HTML page with each
/// scenario's attempts drawn above the checks, and JUnit, Markdown and the terminal text of the
/// [`RunReport`](crate::report::RunReport) view, one testcase per check.
impl Reportable for ClientReport {
    fn render(&self, format: Format, opts: &RenderOptions) -> Result<String> {
        match format {
            Format::Json => json::render_value(self, opts),
            Format::Html => {
                let lanes: Vec<&html::Lane> = self.scenarios.iter().map(|s| &s.lane).collect();
                Ok(html::render_client(&self.as_run_report(), &lanes, opts))
            }
            other => self.as_run_report().render(other, opts),
        }
    }
}
