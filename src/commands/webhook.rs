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
use idem_check::config::{
    hold_release, parse_header, CommandRestart, RestartHook, DEFAULT_QUIET_WINDOW,
};
use idem_check::effects::{Counter, Meter};
use idem_check::exit::{AppError, ExitCode};
use idem_check::http::client::Client;
use idem_check::http::exchange::Header;
use idem_check::inputs;
use idem_check::redact::{Masked, Secrets};
use idem_check::reference::Reference;
use idem_check::report::terminal::{self, Progress};
use idem_check::report::{ProbeReport, RenderOptions};
use idem_check::runner::Observer;
use idem_check::target::TargetSpec;
use idem_check::webhook::checks::{self, Env, Extras, Hold, WebhookCheck};
use idem_check::webhook::event::Template;
use idem_check::webhook::run::{self as webhook_run, RunInfo};
use idem_check::webhook::sender::{Sender, Sent};
use idem_check::webhook::settle::Settler;

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
        Some(file) => {
            Template::load(args.scheme, file).map_err(|e| AppError::InputFile(anyhow!(e)))?
        }
        None => Template::default_for(args.scheme),
    };
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
        template,
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
    template: Template,
    selection: Vec<&'static WebhookCheck>,
    reference: Option<&Reference>,
    files: &[idem_check::report::ReportFile],
    interrupt: &Interrupt,
) -> Result<ExitCode> {
    let scheme = args.scheme;
    let (url, secret, secret_b, counter, crash, replica, hold_header, hold_release) =
        match reference {
            Some(r) => (
                format!("{}/webhooks/{}", r.base, scheme.name()),
                REFERENCE_SECRET.to_string(),
                Some(REFERENCE_SECRET_B.to_string()),
                Some(Counter::Url {
                    url: parse_url("--reference", &format!("{}/webhooks/count", r.base))?,
                    pointer: "/count".into(),
                }),
                Some("X-Test-Crash: 1".to_string()),
                Some(format!("{}/webhooks/{}", r.replica_base, scheme.name())),
                Some(idem_check::reference::HOLD_HEADER.to_string()),
                Some(format!("{}/test-hooks/holds/{{{{hold}}}}/release", r.base)),
            ),
            None => {
                let secret = match &args.secret {
                    Some(s) => s.clone(),
                    None => std::env::var(SECRET_VAR).map_err(|_| {
                        usage(format!(
                        "--secret: the consumer's signing secret is needed (or set ${SECRET_VAR})"
                    ))
                    })?,
                };
                let counter = match (&args.count_url, &args.count_pointer, &args.count_cmd) {
                (Some(u), Some(p), _) => Some(Counter::Url {
                    url: parse_url("--count-url", u)?,
                    pointer: p.clone(),
                }),
                (None, None, Some(cmd)) => Some(Counter::Command(Masked::new(cmd, &Secrets::default()))),
                (None, Some(_), _) => return Err(usage("--count-pointer needs --count-url".into())),
                _ => {
                    return Err(usage(
                        "--count-url and --count-pointer, or --count-cmd: every check counts the consumer's effects".into(),
                    ))
                }
            };
                (
                    args.url.clone().unwrap_or_default(),
                    secret,
                    args.source_b_secret
                        .clone()
                        .or_else(|| std::env::var(SECRET_B_VAR).ok()),
                    counter,
                    args.crash_header.clone(),
                    args.replica.clone(),
                    args.hold_header.clone(),
                    args.hold_release.clone(),
                )
            }
        };
    let url = parse_url("URL", &url)?;
    let key = scheme.key(&secret).map_err(|e| usage(e.to_string()))?;
    let key_b = secret_b
        .as_deref()
        .map(|s| scheme.key(s))
        .transpose()
        .map_err(|e| usage(format!("--source-b-{e}")))?;
    let crash = crash
        .as_deref()
        .map(|line| header_line("--crash-header", line))
        .transpose()?;
    let replica = replica
        .as_deref()
        .map(|u| parse_url("--replica", u))
        .transpose()?;
    if args.ack_budget.is_some_and(|b| b >= args.timeout) {
        return Err(usage(
            "--ack-budget must be shorter than --timeout, or a slow acknowledgement is no answer"
                .into(),
        ));
    }
    let quiet = args.quiet_window.unwrap_or(if reference.is_some() {
        idem_check::reference::QUIET_WINDOW
    } else {
        DEFAULT_QUIET_WINDOW
    });
    if quiet.is_zero() {
        return Err(usage("--quiet-window must be longer than 0".into()));
    }
    let env_var = |name: &str| std::env::var(name).ok();
    let connector = Arc::new(
        super::flags::document_connector(&args.connection, &env_var)
            .map_err(|e| usage(format!("{e:#}")))?,
    );
    let client =
        Arc::new(Client::new(connector.clone(), args.timeout, 1 << 20).map_err(AppError::runtime)?);
    let late_after = args.late_after.unwrap_or(if reference.is_some() {
        REFERENCE_LATE_AFTER
    } else {
        LATE_AFTER
    });
    let hold = hold(hold_header, hold_release)?;
    let meter = Meter::configured(counter, None, Vec::new(), args.timeout);
    let mut secrets =
        Secrets::default().with_named(&secret, SECRET_VAR, "the webhook signing secret");
    if let Some(b) = &secret_b {
        secrets = secrets.with_named(b, SECRET_B_VAR, "the second source's signing secret");
    }
    for name in scheme.signature_headers() {
        secrets = secrets.with_header(name);
    }
    let restart: Option<Arc<dyn RestartHook>> = match (reference, &args.restart_cmd) {
        (Some(r), _) => Some(r.restart_hook()),
        (None, Some(cmd)) => Some(Arc::new(CommandRestart {
            command: Masked::new(cmd, &secrets),
            ready_url: args
                .ready_url
                .as_deref()
                .map(|u| parse_url("--ready-url", u))
                .transpose()?,
            timeout: args.restart_timeout,
            connector: connector.clone(),
        })),
        (None, None) => None,
    };
    let sent = Sent::default();
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
        settler: Settler::new(meter, client, quiet, args.settle_limit, sent),
        extras: Extras {
            hold,
            crash,
            replica,
            ack_budget: args.ack_budget.or(reference.map(|_| REFERENCE_BUDGET)),
            late_after,
            restart,
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

/// `--hold-header` and `--hold-release`, checked as `run` checks them
/// ([`idem_check::config::hold_release`]): a time-based hold (a header alone) or a released one.
fn hold(header: Option<String>, release: Option<String>) -> Result<Option<Hold>> {
    let target = TargetSpec {
        hold_header: header,
        hold_release: release,
        ..TargetSpec::default()
    };
    let flag = target.origins.input(inputs::HOLD_HEADER.flag);
    let bad = |e: anyhow::Error| usage(format!("{e:#}"));
    let header = target
        .hold_header
        .as_deref()
        .map(|h| parse_header(h, flag))
        .transpose()
        .map_err(bad)?;
    let release = hold_release(&target, header.as_ref()).map_err(bad)?;
    Ok(header.map(|header| Hold {
        header,
        release: release.map(|r| r.url),
    }))
}

fn parse_url(flag: &str, text: &str) -> Result<url::Url> {
    match url::Url::parse(text) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(u),
        _ => Err(usage(format!("{flag}: {text:?} is not an http(s) URL"))),
    }
}

fn header_line(flag: &str, line: &str) -> Result<Header> {
    match line.split_once(':') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok(Header::new(name.trim(), value.trim().as_bytes().to_vec()))
        }
        _ => Err(usage(format!(
            "{flag}: expected 'Name: value', got {line:?}"
        ))),
    }
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
