//! From the parsed `idem-check client` options to an exit code: which scenarios, which token,
//! run or listen, then the same renderers as `run`.

use anyhow::{bail, Context as _, Result};

use super::{scenario, ClientReport};
use crate::cli::ClientArgs;
use crate::exit::ExitCode;
use crate::report::terminal;
use crate::report::{file, json, junit, markdown, RenderOptions};
use crate::suite::Suite;

/// `idem-check client`: the options checked, the scenarios run (or one served), the reports
/// written; the exit code follows the verdicts as for `run`.
pub async fn run(args: ClientArgs) -> Result<ExitCode> {
    if args.listen.is_some() && args.scenario.len() != 1 {
        bail!("--listen serves exactly one scenario: give one --scenario ID");
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
            super::listen(&opts, addr, ready, interrupt).await?
        }
        None => super::run(&opts, interrupt).await?,
    };
    let render = RenderOptions {
        color: terminal::use_color(args.color),
        secrets: crate::redact::Secrets::from_values(&[token]),
        max_body: crate::report::Format::Terminal.default_max_body(),
    };
    let run = report.as_run_report();
    print!("{}", terminal::render(&run, &render, opts.strict));
    write_reports(&report, &render, &args)?;
    Ok(ExitCode::for_run(&run.summary, report.interrupted))
}

/// Writes the reports `args` asks for: JUnit, Markdown (and the step summary) from the
/// run-report view, JSON as the full client report.
fn write_reports(report: &ClientReport, render: &RenderOptions, args: &ClientArgs) -> Result<()> {
    let run = report.as_run_report();
    let outputs = [
        (
            &args.report_junit,
            "JUnit",
            junit::render(&run, render, report.strict)?,
        ),
        (
            &args.report_json,
            "JSON",
            json::render_value(report, render)?,
        ),
        (
            &args.report_markdown,
            "Markdown",
            markdown::render(&run, render),
        ),
    ];
    for (path, what, text) in outputs {
        if let Some(path) = path {
            file::write_atomically(path, &text)
                .with_context(|| format!("could not write the {what} report {}", path.display()))?;
        }
    }
    if let Some(path) = markdown::step_summary_path() {
        markdown::append_to_step_summary(&path, &markdown::render(&run, render))?;
    }
    Ok(())
}
