//! `idem-check client`: which operations, credential and error shape, which scenarios, which
//! token, run or listen, then the same renderers as `run`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use clap::Args;

use super::discover::FETCH_TIMEOUT;
use super::{finish, render_options, report_files, Result};
use crate::cli::ReportArgs;
use idem_check::carrier::{KeyCarrier, Place};
use idem_check::catalog::load_suite;
use idem_check::client::credential_rule::Auth;
use idem_check::client::error_body::ErrorBody;
use idem_check::client::fake_api::ApiConfig;
use idem_check::client::operation::{self, Operation};
use idem_check::client::{scenario, ClientOptions, ENV_BASE_URL, ENV_OPERATIONS, ENV_TOKEN};
use idem_check::exit::{AppError, ExitCode};
use idem_check::inputs;
use idem_check::report::terminal;
use idem_check::suite::Suite;

/// `idem-check client`.
#[derive(Args)]
pub struct ClientArgs {
    /// The client command: it must perform $IDEM_CHECK_OPERATIONS (usually 1) logical
    /// operations against $IDEM_CHECK_BASE_URL, retrying as it normally does, and exit 0 if and
    /// only if it believes they were all created. Without --openapi or --path the operation is
    /// POST /api/payments (JSON {amountCents, currency, reference}, Authorization: Bearer
    /// $IDEM_CHECK_TOKEN). It runs once per operation of every scenario.
    #[arg(
        value_name = "CMD",
        last = true,
        required_unless_present = "listen",
        conflicts_with = "listen"
    )]
    pub command: Vec<String>,

    /// Serve the operations of this OpenAPI or Swagger document (file or URL) that take an
    /// idempotency key, at their declared paths, answering with the 2xx response's example or
    /// schema (a fresh id each time), so an SDK's own create method works unchanged.
    #[arg(long, value_name = "SPEC", conflicts_with_all = ["method", "path"])]
    pub openapi: Option<String>,

    /// With --openapi: serve only the operation with this operationId (repeatable).
    #[arg(long = "operation", value_name = "ID", requires = "openapi")]
    pub operations: Vec<String>,

    /// With --openapi: another header name that carries the idempotency key (repeatable).
    #[arg(
        long,
        value_name = "NAME",
        requires = "openapi",
        hide_short_help = true
    )]
    pub key_header: Vec<String>,

    /// With --openapi: where in the 2xx answer the fresh id of a created resource goes, as a
    /// JSON pointer (/payment/id), when the answer's example or schema has no `id` member or
    /// several [default: every `id` member; the shallowest is the resource's id, by which the
    /// document's read operation (GET /payments/{id}) serves it back]
    #[arg(long, value_name = "POINTER", requires = "openapi")]
    pub id_pointer: Option<String>,

    /// The client sends its key in the body, at this JSON pointer (/idempotency_key), or for
    /// a form body in this field, instead of a header.
    #[arg(long = inputs::KEY_IN_BODY.long(), value_name = "POINTER", conflicts_with = "key_header")]
    pub key_in_body: Option<String>,

    /// How the key is written: ietf (an RFC 8941 String, the draft's field) or token (an
    /// opaque value under the provider's own rules) [default: ietf for a header named
    /// Idempotency-Key, token for every other carrier]
    #[arg(long = inputs::KEY_SYNTAX.long(), value_name = "SYNTAX")]
    pub key_syntax: Option<idem_check::carrier::Syntax>,

    /// Serve this one path instead of /api/payments ({name} matches any segment); any body is
    /// accepted and echoed back with a fresh id.
    #[arg(long, value_name = "PATH")]
    pub path: Option<String>,

    /// The method of --path [default: POST]
    #[arg(long, value_name = "METHOD", requires = "path")]
    pub method: Option<String>,

    /// The credential the fake API takes, with $IDEM_CHECK_TOKEN as its secret: bearer, basic
    /// (the token as user name or password), header:NAME, none, or any (whichever comes)
    /// [default: bearer for /api/payments, the document's scheme with --openapi, any with
    /// --path]
    #[arg(long, value_name = "KIND")]
    pub auth: Option<idem_check::client::credential_rule::Auth>,

    /// The body of every error the fake API answers, or with STATUS= of that status's errors
    /// (repeatable), with {{status}}, {{message}}, {{type}}, {{code}} and {{id}} (the resource
    /// a conflict names) filled in [default: problem+json; the {"error": {type, code, message}}
    /// envelope under --suite stripe]
    #[arg(long, value_name = "[STATUS=]FILE")]
    pub error_body: Vec<String>,

    /// Answer a retry whose key already created a resource with 409 naming it ({{id}} in
    /// --error-body, `resource` in problem+json), as GoCardless's API does, instead of replaying
    /// the first answer; an SDK that then fetches it gets it from the read operation.
    #[arg(long)]
    pub conflict_on_replay: bool,

    /// The suite whose key syntax applies (ietf-draft-07: an RFC 8941 String; stripe: either
    /// form, and Stripe's error envelope).
    #[arg(long, value_name = "NAME|FILE", default_value = idem_check::suite::DEFAULT_SUITE)]
    pub suite: String,

    /// The longest one scenario may take (all its runs of the command); the command's whole
    /// process group is then killed. Under --listen, how long the scenario is served at most.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "60s")]
    pub client_timeout: Duration,

    /// Serve one scenario on this address for a client that cannot take its base URL from the
    /// environment, then judge what came (ends when the scenario is complete, at the timeout,
    /// or on Ctrl-C). The token is $IDEM_CHECK_TOKEN when set, else a random one (printed).
    #[arg(long, value_name = "ADDR", requires = "scenario")]
    pub listen: Option<std::net::SocketAddr>,

    /// Under --listen, how long no request may arrive before the client counts as done (one
    /// that gave up after a lost response sends nothing more). After the scenario's last final
    /// answer the wait is the shorter of this and 3 s.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "10s", requires = "listen")]
    pub listen_idle: Duration,

    /// Run only this scenario (repeatable; exactly one with --listen): created,
    /// two-operations, operations-in-one-process, lost-response, retry-after-503,
    /// retry-after-409, retry-after-7s, retry-after-ms, throttled-429, timeout-408,
    /// refused-422, refused-400.
    #[arg(long, value_name = "ID")]
    pub scenario: Vec<String>,

    /// Fail on recommended checks too (WARN becomes FAIL).
    #[arg(long)]
    pub strict: bool,

    /// Reports; the JSON report's schema is idem-check.client/1.
    #[command(flatten)]
    pub report: ReportArgs,
}

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
