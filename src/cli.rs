//! The option groups two or more commands flatten (clap), compiled into the binary only: how
//! connections are made, what is checked and how to reach it (`run` and `stress`, with the
//! flags of the input table), what a user adds to an API description, where reports go. Each
//! command's own options are in its file under `commands/`, beside the code that reads them,
//! and the command line as a whole (`Opts`) in `commands/mod.rs`; `commands/flags.rs` lays the
//! target flags over the target description. The library and its probes see the validated
//! [`idem_check::config::Config`].
//!
//! Like every option struct (see `commands/mod.rs`), none of these implements `Debug`: they
//! hold `-H` credentials, `--secret` values and proxy passwords as typed.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use idem_check::inputs;
use idem_check::report::terminal::ColorChoice;

/// What a user adds to an API description (`discover`, `init`, `run --openapi`).
#[derive(Clone, Default, Args)]
pub struct OpenApiArgs {
    /// The base URL of the operations, instead of the document's servers (needed when they
    /// are relative and the document is a local file).
    #[arg(long, value_name = "URL", hide_short_help = true)]
    pub base_url: Option<String>,

    /// Only the operation with this operationId (repeatable).
    #[arg(long = "operation", value_name = "ID", hide_short_help = true)]
    pub operations: Vec<String>,

    /// The header that carries the idempotency key when it is not Idempotency-Key, like a
    /// target file's key-header (`run` without --openapi). In an API description: another
    /// header name that carries the key (repeatable); names containing "idempot",
    /// PayPal-Request-Id and X-Amz-Client-Token are recognised already.
    #[arg(long, value_name = "NAME")]
    pub key_header: Vec<String>,

    /// A path parameter's value, e.g. customer_id=cus_123 (repeatable); without it, the
    /// parameter's example in the document.
    #[arg(long, value_name = "NAME=VALUE", hide_short_help = true)]
    pub path_param: Vec<String>,
}

/// How connections are made: to the target of `run` and `stress`, and to the API description
/// and the documents it references when they are URLs (`--openapi URL`, `discover URL`).
#[derive(Clone, Default, Args)]
pub struct ConnectionArgs {
    /// Trust the CA certificates in this PEM file, besides the public and system roots (a private
    /// CA).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// Present this PEM client certificate (chain) to a server that asks for one (mutual TLS).
    #[arg(long, value_name = "FILE")]
    pub cert: Option<PathBuf>,

    /// The PEM private key of --cert [default: the --cert file]
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,

    /// Do not verify the server's certificate; the header and every report say so.
    #[arg(short = 'k', long)]
    pub insecure: bool,

    /// Connect to ADDR whenever HOST:PORT is asked for, without DNS (repeatable), e.g.
    /// api.example.com:443:10.0.0.7
    #[arg(long, value_name = "HOST:PORT:ADDR")]
    pub resolve: Vec<String>,

    /// Send every connection through this HTTP proxy (http://[user:pass@]host:port); the raw
    /// and burst requests in a CONNECT tunnel. Without it, HTTPS_PROXY / HTTP_PROXY apply,
    /// except to NO_PROXY hosts and loopback.
    #[arg(long, value_name = "URL")]
    pub proxy: Option<String>,
}

/// What is checked and how to reach it: shared by `run` and `stress`.
#[derive(Args)]
pub struct TargetArgs {
    /// URL of the operation to check, e.g. https://api.example.com/v1/payments
    #[arg(value_name = "URL")]
    pub url: Option<String>,

    /// Check every operation of this OpenAPI or Swagger document (file or URL) that takes an
    /// idempotency key, with the header name, body and URL it declares; the other options
    /// apply to every operation.
    #[arg(long, value_name = "SPEC", conflicts_with_all = ["url", "reference", "target"])]
    pub openapi: Option<String>,

    #[command(flatten)]
    pub openapi_args: OpenApiArgs,

    /// Check the bundled reference server, started in-process on a free port with a temporary
    /// database (restart included). Nothing to set up: this is what green looks like.
    #[arg(long, conflicts_with_all = ["url", "target"])]
    pub reference: bool,

    /// Start the bundled reference server with this fault switched on (see the reference
    /// server's README), to see a probe fail.
    #[arg(long, value_name = "FAULT")]
    pub reference_fault: Option<String>,

    /// Run the bundled reference server on this PostgreSQL database (postgres://USER@HOST/DB)
    /// instead of a temporary SQLite file: the target and its --replica are two in-process
    /// replicas sharing it.
    #[arg(
        long,
        value_name = "URL",
        requires = "reference",
        hide_short_help = true
    )]
    pub reference_db: Option<String>,

    /// Read the target description from a TOML file (see fixtures/targets/).
    #[arg(long, value_name = "FILE")]
    pub target: Option<PathBuf>,

    /// HTTP method of the operation [default: POST]
    #[arg(short = 'X', long = "request", value_name = "METHOD")]
    pub method: Option<String>,

    /// A request header for tenant A, curl-style (repeatable).
    #[arg(short = 'H', long = "header", value_name = "'Name: value'")]
    pub headers: Vec<String>,

    /// The request body template, or @FILE. `{{unique}}` becomes a value unique to each probe
    /// and payload variant, `{{uuid}}` a fresh UUID. Without a placeholder, a JSON object body
    /// gets the unique value appended to its first string field (or an `idem_check_nonce` field),
    /// which is also how a "different payload" is built.
    #[arg(short = 'd', long = "data", value_name = "BODY|@FILE")]
    pub data: Option<String>,

    #[command(flatten)]
    pub inputs: InputFlags,

    /// Release HTTP/1.1 bursts from the calling thread. By default two dedicated release threads
    /// do it, about twice as tight (BENCHMARKS.md): at real-time priority where the process may
    /// (root, CAP_SYS_NICE or `ulimit -r`), else with a short time slice (Linux 6.12 or later).
    /// `stress` always releases from its load thread
    #[arg(long)]
    pub no_release_threads: bool,

    #[command(flatten)]
    pub connection: ConnectionArgs,

    /// The suite: a built-in name (ietf-draft-07, stripe) or a suite file.
    #[arg(long, value_name = "NAME|FILE", default_value = idem_check::suite::DEFAULT_SUITE)]
    pub suite: String,

    /// Per-request timeout.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "10s")]
    pub timeout: Duration,

    /// A short name for this implementation in reports (the column title of `idem-check
    /// matrix`) [default: the target's host]
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,

    /// A value to mask in every output (repeatable), named $IDEM_SECRET_1, … in reproduce lines.
    /// Credentials in headers, cookies, URL userinfo and query parameters such as `sig` or
    /// `access_token` are masked without it.
    #[arg(long, value_name = "VALUE")]
    pub secret: Vec<String>,

    /// Mask the values of this header like a credential (repeatable); headers whose name holds
    /// key, token, secret, password, session, signature, auth or credential already are.
    #[arg(long, value_name = "NAME")]
    pub redact_header: Vec<String>,
}

/// The flags of the table's `plain` inputs ([`idem_check::with_inputs`]), in its order: each
/// takes its name, value name and help from its row.
macro_rules! input_flags {
    ({} by_hand { $($hand:tt)* } plain { $(
        $(#[$doc:meta])*
        $name:ident: $flag:literal $home:tt $key:literal => $field:ident: $ty:ident $(<$inner:ident>)?,
            shown $shown:ident, value $value:literal, reference $reference:literal, help $help:literal;
    )* }) => {
        /// The target flags declared in the input table, flattened into [`TargetArgs`].
        #[derive(Args)]
        pub struct InputFlags {
            $(
                #[arg(
                    long = inputs::$name.long(),
                    help = inputs::$name.help,
                    value_name = $value,
                    value_parser = <$ty $(<$inner>)? as FlagValue>::parser(),
                )]
                pub $field: $ty $(<$inner>)?,
            )*
        }
    };
}

idem_check::with_inputs!(input_flags);

/// How a `plain` input's flag value is parsed, by the type its row gives.
trait FlagValue {
    fn parser() -> clap::builder::ValueParser;
}

impl FlagValue for Option<String> {
    fn parser() -> clap::builder::ValueParser {
        clap::builder::ValueParser::string()
    }
}

impl FlagValue for Vec<String> {
    fn parser() -> clap::builder::ValueParser {
        clap::builder::ValueParser::string()
    }
}

impl FlagValue for Option<Duration> {
    fn parser() -> clap::builder::ValueParser {
        clap::builder::ValueParser::new(humantime::parse_duration)
    }
}

impl FlagValue for bool {
    fn parser() -> clap::builder::ValueParser {
        clap::builder::ValueParser::bool()
    }
}

/// Where reports go and how they look: shared by every command that writes reports (`run`,
/// `stress`, `merge`, `client`, `webhook`).
#[derive(Args)]
pub struct ReportArgs {
    /// Write a JUnit XML report.
    #[arg(long = "report-junit", value_name = "FILE")]
    pub junit: Option<PathBuf>,

    /// Write a JSON report (schema idem-check.report/1, or idem-check.stress/1 for stress).
    #[arg(long = "report-json", value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY when set, within
    /// GitHub's 1 MiB limit).
    #[arg(long = "report-markdown", value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    /// Write one self-contained HTML page: verdicts, evidence, and the bursts and timings drawn
    /// (no script, nothing fetched).
    #[arg(long = "report-html", value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Cut every body in every output at this many bytes (with its size and SHA-256)
    /// [default: 2048 terminal, 1024 Markdown, 8192 JUnit and HTML, 16384 JSON]
    #[arg(long, value_name = "BYTES")]
    pub max_body_bytes: Option<usize>,

    /// When to use colour.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,

    /// Print only the verdict lines and the summary on the terminal; the evidence stays in the
    /// report files.
    #[arg(short = 'q', long)]
    pub summary: bool,
}
