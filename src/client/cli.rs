//! From the parsed `idem-check client` options to an exit code: which operations, credential
//! and error shape, which scenarios, which token, run or listen, then the same renderers as
//! `run`.

use std::sync::Arc;

use anyhow::{anyhow, bail, Result};

use super::auth::Auth;
use super::error_body::ErrorBody;
use super::fake_api::ApiConfig;
use super::operation::{self, Operation};
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
    let suite = Suite::load(&args.suite)?;
    let api = api_config(&args, &suite, token.clone()).await?;
    let key_header = api.header.clone();
    let opts = super::ClientOptions {
        command: args.command.clone(),
        suite,
        timeout: args.client_timeout,
        strict: args.strict,
        scenarios,
        api: Arc::new(api),
    };
    let interrupt = super::interrupt_watch();
    let report = match args.listen {
        Some(addr) => {
            let ready = |base: &str| {
                eprintln!(
                    "serving scenario {} until it completes, {} pass or Ctrl-C:\n  \
                     export {}={base} {}={token} {}={}",
                    opts.scenarios[0].id,
                    humantime::format_duration(opts.timeout),
                    super::ENV_BASE_URL,
                    super::ENV_TOKEN,
                    super::ENV_OPERATIONS,
                    opts.scenarios[0].operations,
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
        key_header,
        max_body: args
            .report
            .max_body_bytes
            .unwrap_or(Format::Terminal.default_max_body()),
    };
    let run = report.as_run_report();
    print!(
        "{}",
        terminal::render(&report.as_terminal_report(), &render, opts.strict)
    );
    let code = ExitCode::for_run(&run.summary, report.interrupted);
    Ok(crate::app::finish_reports(
        &report,
        &files,
        &render,
        &args.report,
        code,
    ))
}

/// How long fetching an API description may take.
const FETCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What the fake API serves: the operations (built-in, `--path`, or the document's keyed ones),
/// the key header, the credential rule and the error shape.
async fn api_config(args: &ClientArgs, suite: &Suite, token: String) -> Result<ApiConfig> {
    let errors = ErrorBody::choose(&suite.name, args.error_body.as_deref())?;
    let (operations, header, auth) = match (&args.openapi, &args.path) {
        (Some(source), _) => {
            let spec = crate::discover::load::load(source, FETCH_TIMEOUT).await?;
            let found = crate::discover::discover(
                &spec,
                &crate::discover::Options {
                    key_headers: args.key_header.clone(),
                    ..Default::default()
                },
            )?;
            let chosen: Vec<&crate::discover::Operation> = found
                .operations
                .iter()
                .filter(|o| args.operations.is_empty() || args.operations.contains(&o.operation_id))
                .collect();
            for id in &args.operations {
                if !chosen.iter().any(|o| &o.operation_id == id) {
                    let known: Vec<&str> = found
                        .operations
                        .iter()
                        .map(|o| o.operation_id.as_str())
                        .collect();
                    bail!(
                        "{source}: no operation {id:?} takes an idempotency key; those that do: {}",
                        known.join(", ")
                    );
                }
            }
            let Some(first) = chosen.first() else {
                let why: Vec<String> = found
                    .skipped
                    .iter()
                    .map(|s| format!("{} {}: {}", s.method, s.path, s.reason))
                    .collect();
                bail!(
                    "{source}: no keyed operation can be served ({})",
                    why.join("; ")
                );
            };
            let ops = chosen
                .iter()
                .map(|o| Operation::from_document(&spec.root, o))
                .collect::<Result<Vec<_>>>()?;
            (
                ops,
                first.header.clone(),
                operation::document_auth(&first.credentials),
            )
        }
        (None, Some(path)) => (
            vec![Operation::described(
                args.method.as_deref().unwrap_or("POST"),
                path,
            )?],
            suite.header.clone(),
            Auth::Any,
        ),
        (None, None) => (
            vec![Operation::payments()],
            suite.header.clone(),
            Auth::Bearer,
        ),
    };
    Ok(ApiConfig {
        operations,
        header,
        token,
        auth: args.auth.clone().unwrap_or(auth),
        errors,
    })
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
