//! `idem-check client`: which operations, credential and error shape, which scenarios, which
//! token, run or listen, then the same renderers as `run`.

use std::sync::Arc;

use anyhow::{anyhow, bail, Context as _};

use super::discover::FETCH_TIMEOUT;
use super::{finish, render_options, report_files, Result};
use crate::cli::ClientArgs;
use idem_check::carrier::{KeyCarrier, Place};
use idem_check::catalog::load_suite;
use idem_check::client::credential_rule::Auth;
use idem_check::client::error_body::ErrorBody;
use idem_check::client::fake_api::ApiConfig;
use idem_check::client::operation::{self, Operation};
use idem_check::client::{scenario, ClientOptions, ENV_BASE_URL, ENV_OPERATIONS, ENV_TOKEN};
use idem_check::exit::{AppError, ExitCode};
use idem_check::report::terminal;
use idem_check::suite::Suite;

/// `idem-check client`: the options checked, the scenarios run (or one served), the reports
/// written; the exit code follows the verdicts as for `run`.
pub(super) async fn client(args: ClientArgs) -> Result<ExitCode> {
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
            .collect::<anyhow::Result<Vec<_>>>()?;
        chosen.sort_by_key(|s| scenario::CATALOG.iter().position(|c| c.id == s.id));
        chosen.dedup();
        chosen
    };
    let files = report_files(&args.report)?;
    let token = std::env::var(ENV_TOKEN)
        .ok()
        .filter(|t| args.listen.is_some() && !t.is_empty())
        .unwrap_or_else(|| format!("idem-check-{}", uuid::Uuid::new_v4().simple()));
    let suite = load_suite(&args.suite)?;
    let api = api_config(&args, &suite, token.clone()).await?;
    let key = api.carrier.place.clone();
    let opts = ClientOptions {
        command: args.command.clone(),
        suite,
        timeout: args.client_timeout,
        listen_idle: args.listen_idle,
        strict: args.strict,
        scenarios,
        api: Arc::new(api),
    };
    let interrupt = super::Interrupt::watch();
    let report = match args.listen {
        Some(addr) => {
            let ready = |base: &str| {
                eprintln!(
                    "serving scenario {} until it completes, {} pass or Ctrl-C:\n  \
                     export {}={base} {}={token} {}={}",
                    opts.scenarios[0].id,
                    humantime::format_duration(opts.timeout),
                    ENV_BASE_URL,
                    ENV_TOKEN,
                    ENV_OPERATIONS,
                    opts.scenarios[0].operations,
                );
            };
            idem_check::client::listen(&opts, addr, &ready, interrupt.pressed())
                .await
                .map_err(AppError::runtime)?
        }
        None => idem_check::client::run(&opts, interrupt.pressed())
            .await
            .map_err(AppError::runtime)?,
    };
    let render = render_options(
        &args.report,
        idem_check::redact::Secrets::from_values(&[token]),
        key,
    );
    let run = report.as_run_report();
    let text = terminal::render(&report.as_terminal_report(), &render, opts.strict);
    let code = ExitCode::for_run(&run.summary, report.interrupted);
    finish(&text, &report, &files, &render, &args.report, code)
}

/// What the fake API serves: the operations (built-in, `--path`, or the document's keyed ones),
/// the key's carrier (the document's, unless `--key-in-body` says otherwise), the credential
/// rule and the error shape.
async fn api_config(args: &ClientArgs, suite: &Suite, token: String) -> anyhow::Result<ApiConfig> {
    let errors = ErrorBody::choose(&suite.name, &args.error_body)?;
    if let Some(pointer) = &args.key_in_body {
        check_body_pointer(pointer)?;
    }
    let (operations, place, auth) = match (&args.openapi, &args.path) {
        (Some(source), _) => {
            // No connection flags here: the proxy variables of the environment apply.
            let fetcher = super::discover::fetcher(&Default::default())?;
            let spec = idem_check::discover::load::load(source, FETCH_TIMEOUT, &fetcher).await?;
            let found = idem_check::discover::discover(
                &spec,
                &idem_check::discover::Options {
                    key_headers: args.key_header.clone(),
                    ..Default::default()
                },
            )?;
            let chosen = found
                .select(&args.operations)
                .with_context(|| source.clone())?;
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
            if let Some(other) = chosen.iter().find(|o| o.key != first.key) {
                bail!(
                    "{source}: operations {} and {} carry the key differently ({}, {}); \
                     serve one at a time with --operation ID",
                    first.operation_id,
                    other.operation_id,
                    first.key,
                    other.key
                );
            }
            if let Some(pointer) = &args.key_in_body {
                for o in &chosen {
                    if let Err(declared) =
                        idem_check::discover::body_declares(&spec.root, o, pointer)
                    {
                        bail!(
                            "--key-in-body {pointer}: the request body of {} ({} {}) declares \
                             no such field (it declares {})",
                            o.operation_id,
                            o.method,
                            o.path,
                            if declared.is_empty() {
                                "none".to_string()
                            } else {
                                declared.join(", ")
                            }
                        );
                    }
                }
            }
            let ops = chosen
                .iter()
                .map(|o| Operation::from_document(&spec.root, o, args.id_pointer.as_deref()))
                .collect::<anyhow::Result<Vec<_>>>()?;
            (
                ops,
                first.key.clone(),
                operation::document_auth(&first.credentials),
            )
        }
        (None, Some(path)) => (
            vec![Operation::described(
                args.method.as_deref().unwrap_or("POST"),
                path,
            )?],
            Place::Header(suite.header.clone()),
            Auth::Any,
        ),
        (None, None) => (
            vec![Operation::payments()],
            Place::Header(suite.header.clone()),
            Auth::Bearer,
        ),
    };
    // The user's word over the document's.
    let place = match &args.key_in_body {
        Some(pointer) => Place::Body(pointer.clone()),
        None => place,
    };
    Ok(ApiConfig {
        operations,
        carrier: KeyCarrier::new(place, args.key_syntax),
        token,
        auth: args.auth.clone().unwrap_or(auth),
        errors,
        conflict_on_replay: args.conflict_on_replay,
    })
}

/// `--key-in-body POINTER` as far as it can be checked before the client runs: a JSON pointer
/// (`/idempotency_key`) or a form field's name.
fn check_body_pointer(pointer: &str) -> anyhow::Result<()> {
    if pointer.is_empty() || pointer == "/" {
        bail!("--key-in-body {pointer:?}: expected a JSON pointer such as /idempotency_key, or a form field's name");
    }
    Ok(())
}
