//! `idem-check webhook`'s options.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{ConnectionArgs, ReportArgs};

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
