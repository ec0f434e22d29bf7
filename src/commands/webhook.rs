//! `idem-check webhook`: from the options to the collaborators the checks play with (the
//! sender, the settled meter), the run, and the same reports and exit codes as `run`.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;

use super::flags;
use super::{finish, interrupted_in_setup, render_options, report_files, Interrupt, Result};
use crate::cli::{ConnectionArgs, ReportArgs};
use idem_check::carrier::Place;
use idem_check::config::{Config, RunOptions};
use idem_check::effects::Meter;
use idem_check::exit::{AppError, ExitCode};
use idem_check::http::client::Client;
use idem_check::http::net::NetOptions;
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

/// `idem-check webhook`.
#[derive(Args)]
pub struct WebhookArgs {
    /// The consumer's URL, where deliveries are POSTed (or the target file's url).
    #[arg(value_name = "URL", required_unless_present_any = ["reference", "target"])]
    pub url: Option<String>,

    /// Check the bundled reference server's webhook consumer, started in-process with fresh
    /// secrets (every check PASSes unless --reference-fault is given).
    #[arg(long, conflicts_with_all = ["url", "secret", "count_url", "count_cmd"])]
    pub reference: bool,

    /// Start the bundled reference consumer with this fault switched on.
    #[arg(long, value_name = "FAULT", requires = "reference")]
    pub reference_fault: Option<String>,

    /// How deliveries are signed, as that sender signs them.
    #[arg(long, value_enum, value_name = "SCHEME")]
    pub scheme: idem_check::webhook::scheme::Scheme,

    /// The signing secret the consumer verifies with (whsec_ base64 for standard and svix;
    /// masked in every report, reproduce lines read $IDEM_CHECK_WEBHOOK_SECRET).
    /// [default: $IDEM_CHECK_WEBHOOK_SECRET]
    #[arg(long, value_name = "SECRET")]
    pub secret: Option<String>,

    /// Read the inputs webhook shares with run (the counter, hold, crash header, replicas,
    /// restart, quiet window, connection) from a target file, as `run --target` does; flags win
    /// over the file.
    #[arg(long, value_name = "FILE", conflicts_with = "reference")]
    pub target: Option<PathBuf>,

    /// A second source's secret: the same event id from it must be a second effect
    /// (wh-source-isolation); masked like --secret, reproduce lines read
    /// $IDEM_CHECK_WEBHOOK_SECRET_B. [default: $IDEM_CHECK_WEBHOOK_SECRET_B]
    #[arg(long, value_name = "SECRET")]
    pub source_b_secret: Option<String>,

    /// The body template: {{event_id}}, {{timestamp}} and {{unique}} are filled per event and
    /// the rest goes out byte for byte [default: a compact JSON event of the scheme].
    #[arg(long, value_name = "FILE")]
    pub event: Option<PathBuf>,

    /// The body wh-unknown-type sends as its unknown event, for a consumer that reads the type
    /// from the body rather than a header: JSON, with the placeholders of --event, sent as it is
    /// (for GitHub and Shopify with an unknown type in the header) [default: the --event body
    /// with an unknown type].
    #[arg(long, value_name = "FILE")]
    pub unknown_event: Option<PathBuf>,

    /// URL of the consumer's effect counter (GET), read at --count-pointer.
    #[arg(long, value_name = "URL")]
    pub count_url: Option<String>,

    /// JSON pointer of the count in --count-url's body [default: /count].
    #[arg(long, value_name = "POINTER")]
    pub count_pointer: Option<String>,

    /// A shell command that prints the consumer's effect count.
    #[arg(long, value_name = "CMD", conflicts_with = "count_url")]
    pub count_cmd: Option<String>,

    /// A header that makes the consumer fail after it took a delivery (wh-retry-after-failure),
    /// e.g. 'X-Test-Crash: 1'.
    #[arg(long, value_name = "'Name: value'")]
    pub crash_header: Option<String>,

    /// A header that holds a delivery in the consumer: released, its value holding {{hold}}
    /// and --hold-release the URL that releases it (wh-lost-ack), e.g. 'X-Test-Hold: {{hold}}';
    /// or time-based, a header alone (slow synchronous work, which wh-ack-latency times),
    /// e.g. 'X-Test-Delay-Ms: 6000'.
    #[arg(long, value_name = "'Name: value'")]
    pub hold_header: Option<String>,

    /// The URL a POST to releases the hold named {{hold}}.
    #[arg(long, value_name = "URL")]
    pub hold_release: Option<String>,

    /// Another instance of the consumer sharing its store (repeatable; wh-cross-replica
    /// redelivers to each).
    #[arg(long, value_name = "URL")]
    pub replica: Vec<String>,

    /// How long after an event's delivery wh-late-redelivery redelivers it: longer than the
    /// consumer's dedupe window must be, as senders retry for hours or days; 0s redelivers
    /// only after --restart-cmd [default: 6m; 2s against --reference, whose dedupe-ttl fault
    /// then forgets after 5/6 of it]
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub late_after: Option<Duration>,

    /// A shell command that restarts the consumer: wh-late-redelivery redelivers after it, so
    /// a dedupe kept in memory is seen.
    #[arg(long, value_name = "CMD", conflicts_with = "reference")]
    pub restart_cmd: Option<String>,

    /// Polled after --restart-cmd until it answers 2xx.
    #[arg(long, value_name = "URL")]
    pub ready_url: Option<String>,

    /// How long the restart may take.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "30s")]
    pub restart_timeout: Duration,

    /// The acknowledgement budget wh-ack-latency judges with [default: the scheme's: Slack 3s,
    /// Shopify 5s, GitHub 10s, standard, svix and stripe 15s]; keep --timeout above it.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub ack_budget: Option<Duration>,

    /// How long the effect counter must stay unchanged before a count is read [default: 300ms].
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub quiet_window: Option<Duration>,

    /// Per-request timeout: a consumer that does not answer within it is reported, never waited on.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "10s")]
    pub timeout: Duration,

    /// Run only this check (repeatable, or a comma-separated list).
    #[arg(long, value_name = "ID", value_delimiter = ',')]
    pub probe: Vec<String>,

    /// Do not run this check (repeatable, or a comma-separated list).
    #[arg(long, value_name = "ID", value_delimiter = ',')]
    pub skip: Vec<String>,

    /// Fail on recommended checks too (WARN becomes FAIL).
    #[arg(long)]
    pub strict: bool,

    #[command(flatten)]
    pub connection: ConnectionArgs,

    #[command(flatten)]
    pub report: ReportArgs,
}

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
        return webhook_spec(args.target.as_deref(), &args.connection, args);
    };
    let mut spec = webhook_spec(None, &args.connection, args)?;
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

/// `webhook`'s shared inputs: its `--target FILE` (read as `run` reads one), the connection
/// flags and the flags of `args` laid over it, each flag given recorded as the value's origin so
/// an error names the flag, and a value from the file its line.
fn webhook_spec(
    file: Option<&std::path::Path>,
    connection: &ConnectionArgs,
    args: &WebhookArgs,
) -> Result<TargetSpec, AppError> {
    let mut t = match file {
        Some(path) => idem_check::target::load(path, &std::env::vars().collect())?,
        None => TargetSpec::default(),
    };
    flags::connection_from_args(connection, &mut t);
    t.net.proxy_env = NetOptions::proxy_environment(&|name| std::env::var(name).ok());
    let o = &mut t.origins;
    if let Some(url) = &args.url {
        t.url.clone_from(url);
        o.flag(inputs::URL.flag);
    }
    flags::over(
        &mut t.count_url,
        &args.count_url.clone().map(Some),
        inputs::COUNT_URL.flag,
        o,
    );
    flags::over(
        &mut t.count_pointer,
        &args.count_pointer.clone().map(Some),
        inputs::COUNT_POINTER.flag,
        o,
    );
    flags::over(
        &mut t.count_cmd,
        &args.count_cmd.clone().map(Some),
        inputs::COUNT_CMD.flag,
        o,
    );
    flags::over(
        &mut t.crash_header,
        &args.crash_header.clone().map(Some),
        inputs::CRASH_HEADER.flag,
        o,
    );
    flags::over(
        &mut t.hold_header,
        &args.hold_header.clone().map(Some),
        inputs::HOLD_HEADER.flag,
        o,
    );
    flags::over(
        &mut t.hold_release,
        &args.hold_release.clone().map(Some),
        inputs::HOLD_RELEASE.flag,
        o,
    );
    flags::over(
        &mut t.restart_cmd,
        &args.restart_cmd.clone().map(Some),
        inputs::RESTART_CMD.flag,
        o,
    );
    flags::over(
        &mut t.ready_url,
        &args.ready_url.clone().map(Some),
        inputs::READY_URL.flag,
        o,
    );
    flags::over(
        &mut t.quiet_window,
        &args.quiet_window.map(Some),
        inputs::QUIET_WINDOW.flag,
        o,
    );
    if !args.replica.is_empty() {
        t.replicas.clone_from(&args.replica);
        o.flag(inputs::REPLICA.flag);
    }
    Ok(t)
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
