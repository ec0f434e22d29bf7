//! `idem-check webhook`: from the options to the collaborators the checks play with (the
//! sender, the settled meter), the run, and the same reports and exit codes as `run`.

use std::io::IsTerminal as _;
use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;

use super::{finish, interrupted_in_setup, render_options, report_files, Interrupt, Result};
use crate::cli::WebhookArgs;
use idem_check::carrier::Place;
use idem_check::config::{Config, RunOptions};
use idem_check::effects::Meter;
use idem_check::exit::{AppError, ExitCode};
use idem_check::http::client::Client;
use idem_check::inputs;
use idem_check::quiet::Settling;
use idem_check::redact::Secrets;
use idem_check::reference::Reference;
use idem_check::report::terminal::{self, Progress};
use idem_check::report::{ProbeReport, RenderOptions};
use idem_check::runner::Observer;
use idem_check::target::TargetSpec;
use idem_check::webhook::checks::{self, Env, Extras, Hold, WebhookCheck};
use idem_check::webhook::counts::Counts;
use idem_check::webhook::event::Template;
use idem_check::webhook::run::{self as webhook_run, RunInfo};
use idem_check::webhook::sender::{Deliveries, Sender};

/// The variable a reproduce line reads the signing secret from.
pub const SECRET_VAR: &str = "IDEM_CHECK_WEBHOOK_SECRET";

/// The variable the second source's secret is read from when --source-b-secret is not given,
/// and a reproduce line reads it from.
const SECRET_B_VAR: &str = "IDEM_CHECK_WEBHOOK_SECRET_B";

/// The secrets the bundled reference consumer is started with (fresh per run would hide
/// nothing: they sign only deliveries to a server that lives as long as the run).
const REFERENCE_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const REFERENCE_SECRET_B: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

/// The acknowledgement budget against the reference consumer, and how long its
/// `slow-sync-handler` fault works, over it: seconds, not the schemes' 15 s.
const REFERENCE_BUDGET: Duration = Duration::from_secs(1);
const REFERENCE_SLOW: Duration = Duration::from_millis(1300);

/// How long after its delivery `wh-late-redelivery` redelivers an event: past the 5 minutes a
/// dedupe window is often given, within the hours to days senders retry.
const LATE_AFTER: Duration = Duration::from_secs(6 * 60);

/// The same against the reference consumer, whose `dedupe-ttl` fault forgets an id after
/// [`reference_dedupe_ttl`] of it: seconds, not minutes.
const REFERENCE_LATE_AFTER: Duration = Duration::from_secs(2);

/// The reference consumer's dedupe TTL under its `dedupe-ttl` fault: 5/6 of `late_after`, as
/// a 5-minute window is to a sender that retries after 6 (5 minutes when there is no wait).
fn reference_dedupe_ttl(late_after: Duration) -> Duration {
    if late_after.is_zero() {
        Duration::from_secs(5 * 60)
    } else {
        late_after.mul_f64(5.0 / 6.0)
    }
}

fn usage(msg: String) -> AppError {
    AppError::Usage(anyhow!(msg))
}

pub(super) async fn webhook(args: WebhookArgs) -> Result<ExitCode> {
    let interrupt = Interrupt::watch();
    let files = report_files(&args.report)?;
    let selection = select(&args)?;
    let template = match &args.event {
        Some(file) => Template::load(args.scheme, file, "--event")
            .map_err(|e| AppError::InputFile(anyhow!(e)))?,
        None => Template::default_for(args.scheme),
    };
    let unknown_event = args
        .unknown_event
        .as_deref()
        .map(|file| Template::load_json(args.scheme, file, inputs::UNKNOWN_EVENT.flag))
        .transpose()
        .map_err(|e| AppError::InputFile(anyhow!(e)))?;
    let reference = if args.reference {
        let fault = args
            .reference_fault
            .as_deref()
            .map(idem_reference_server::WebhookFault::from_str)
            .transpose()
            .map_err(|e| usage(format!("--reference-fault: {e}")))?;
        let started = interrupt
            .unless_pressed(Reference::start_webhook(
                REFERENCE_SECRET,
                REFERENCE_SECRET_B,
                fault,
                REFERENCE_SLOW,
                reference_dedupe_ttl(args.late_after.unwrap_or(REFERENCE_LATE_AFTER)),
            ))
            .await;
        match started {
            None => return Ok(interrupted_in_setup()),
            Some(r) => Some(r.map_err(AppError::runtime)?),
        }
    } else {
        None
    };
    let done = check(
        &args,
        (template, unknown_event),
        selection,
        reference.as_ref(),
        &files,
        &interrupt,
    )
    .await;
    if let Some(r) = reference {
        r.stop().await.map_err(AppError::runtime)?;
    }
    done
}

async fn check(
    args: &WebhookArgs,
    (template, unknown_event): (Template, Option<Template>),
    selection: Vec<&'static WebhookCheck>,
    reference: Option<&Reference>,
    files: &[idem_check::report::ReportFile],
    interrupt: &Interrupt,
) -> Result<ExitCode> {
    let scheme = args.scheme;
    let (secret, secret_b) = match reference {
        Some(_) => (
            REFERENCE_SECRET.to_string(),
            Some(REFERENCE_SECRET_B.to_string()),
        ),
        None => (
            match &args.secret {
                Some(s) => s.clone(),
                None => std::env::var(SECRET_VAR).map_err(|_| {
                    usage(format!(
                        "--secret: the consumer's signing secret is needed (or set ${SECRET_VAR})"
                    ))
                })?,
            },
            args.source_b_secret
                .clone()
                .or_else(|| std::env::var(SECRET_B_VAR).ok()),
        ),
    };
    let key = scheme.key(&secret).map_err(|e| usage(e.to_string()))?;
    let key_b = secret_b
        .as_deref()
        .map(|s| scheme.key(s))
        .transpose()
        .map_err(|e| usage(format!("--source-b-{e}")))?;
    if args.ack_budget.is_some_and(|b| b >= args.timeout) {
        return Err(usage(
            "--ack-budget must be shorter than --timeout, or a slow acknowledgement is no answer"
                .into(),
        ));
    }
    // The inputs webhook shares with run are checked by run's code: the same defaults, bounds
    // and messages naming the flag.
    let mut spec = shared_inputs(args, reference)?;
    spec.restart_timeout = Some(args.restart_timeout);
    spec.secrets.push(secret.clone());
    spec.secrets.extend(secret_b.clone());
    let suite = idem_check::catalog::load_suite(idem_check::suite::DEFAULT_SUITE)
        .map_err(AppError::runtime)?;
    let mut opts = RunOptions::new(suite);
    opts.timeout = args.timeout;
    let config = Config::build(spec, &opts, reference.map(Reference::restart_hook))?;
    let Some(counter) = config.counter.clone() else {
        return Err(usage(
            "--count-url (its count at --count-pointer, /count by default), or --count-cmd: every check counts the consumer's effects".into(),
        ));
    };
    let url = config.operation.url.clone();
    let quiet = config.quiet_window;
    let connector = config.connector.clone();
    let client =
        Arc::new(Client::new(connector.clone(), args.timeout, 1 << 20).map_err(AppError::runtime)?);
    let late_after = args.late_after.unwrap_or(if reference.is_some() {
        REFERENCE_LATE_AFTER
    } else {
        LATE_AFTER
    });
    let hold = config.hold_header.clone().map(|header| Hold {
        header,
        release: config.hold_release.as_ref().map(|r| r.url.clone()),
    });
    let meter = Meter::configured(Some(counter), None, Vec::new(), args.timeout);
    let mut secrets =
        Secrets::default().with_named(&secret, SECRET_VAR, "the webhook signing secret");
    if let Some(b) = &secret_b {
        secrets = secrets.with_named(b, SECRET_B_VAR, "the second source's signing secret");
    }
    for name in scheme.signature_headers() {
        secrets = secrets.with_header(name);
    }
    let sent = Deliveries::default();
    let mut context = vec![
        format!("scheme {}", scheme.name()),
        format!("effects: {}", meter.describe()),
        format!("recompute a signature: {}", scheme.recompute_line()),
    ];
    context.extend(connector.context());
    let env = Env {
        sender: Sender::new(
            client.clone(),
            connector,
            args.timeout,
            url.clone(),
            scheme,
            template,
            key,
            key_b,
            sent.clone(),
        ),
        counts: Counts::new(
            meter,
            client,
            Settling {
                quiet,
                timeout: args.timeout,
            },
            sent,
        ),
        extras: Extras {
            hold,
            crash: config.crash.as_ref().map(|c| c.header.clone()),
            replicas: config.replicas.clone(),
            ack_budget: args.ack_budget.or(reference.map(|_| REFERENCE_BUDGET)),
            late_after,
            restart: config.restart.clone(),
            unknown_event,
        },
    };
    let mut render = render_options(&args.report, secrets, Place::Header(String::new()));
    render.resigner = Some(Arc::new(env.sender.resigner(SECRET_VAR, SECRET_B_VAR)));
    let info = RunInfo {
        label: if reference.is_some() {
            "reference".into()
        } else {
            url.host_str().unwrap_or("consumer").to_string()
        },
        reference: reference.is_some(),
        target: format!("POST {url}"),
        strict: args.strict,
        context,
        replay: Some(idem_check::runner::replay_inputs(&config)),
    };
    let progress = Progress::new(selection.len() as u64, std::io::stderr().is_terminal());
    progress.line(&terminal::header(
        &info.target,
        "webhook",
        &info.context,
        &render,
    ));
    progress.line("");
    let observer = Lines {
        progress: &progress,
        render: &render,
    };
    let report = webhook_run::run(&env, &selection, info, &observer, interrupt.pressed()).await;
    progress.finish();
    // The header printed before the run already said everything the run knows: it is not
    // printed again (a log holds it once).
    let text = terminal::render_tail(&report, &render, args.strict);
    let code = ExitCode::for_run(&report.summary, report.interrupted);
    finish(&text, &report, files, &render, &args.report, code)
}

/// The checks `--probe` and `--skip` select, each id checked.
fn select(args: &WebhookArgs) -> Result<Vec<&'static WebhookCheck>> {
    checks::select(&args.probe, &args.skip).map_err(|e| usage(e.to_string()))
}

/// The inputs `webhook` shares with `run` (the counter, the hold, the crash header, the
/// replicas, the restart, the quiet window and the connection flags), as `run` describes its
/// target, for `Config::build` to check: from `--target FILE` and the flags, or against
/// `--reference` the bundled consumer's.
fn shared_inputs(args: &WebhookArgs, reference: Option<&Reference>) -> Result<TargetSpec> {
    let Some(r) = reference else {
        return super::flags::webhook_spec(args.target.as_deref(), &args.connection, args);
    };
    let mut spec = super::flags::webhook_spec(None, &args.connection, args)?;
    let scheme = args.scheme.name();
    spec.url = format!("{}/webhooks/{scheme}", r.base);
    spec.count_url = Some(format!("{}/webhooks/count", r.base));
    spec.crash_header = Some("X-Test-Crash: 1".into());
    spec.replicas = vec![format!("{}/webhooks/{scheme}", r.replica_base)];
    spec.hold_header = Some(idem_check::reference::HOLD_HEADER.into());
    spec.hold_release = Some(format!("{}/test-hooks/holds/{{{{hold}}}}/release", r.base));
    spec.quiet_window = Some(
        args.quiet_window
            .unwrap_or(idem_check::reference::QUIET_WINDOW),
    );
    spec.restart_cmd = None;
    Ok(spec)
}

/// Streams each verdict to the terminal as soon as its check is done.
struct Lines<'a> {
    progress: &'a Progress,
    render: &'a RenderOptions,
}

impl Observer for Lines<'_> {
    fn started(&self, id: &str) {
        self.progress.start_probe(id);
    }
    fn finished(&self, report: &ProbeReport) {
        self.progress
            .line(&terminal::probe_line(report, self.render));
        self.progress.finish_probe();
    }
}
