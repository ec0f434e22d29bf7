//! Command-line options (clap), compiled into the binary only: [`crate::commands`] reads them
//! (its `flags` lays the target flags over the target description); the library and its probes
//! see the validated [`idem_check::config::Config`].
//!
//! None of the option structs implements `Debug`: they hold the command line as typed, `-H`
//! credentials, `--secret` values and proxy passwords included, and a `{:?}` of them in a log
//! line or a panic message would print those. What a run shows of its target goes through
//! [`idem_check::target::TargetSpec`], whose `Debug` masks them.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use idem_check::inputs;
use idem_check::report::terminal::ColorChoice;

mod client;
mod webhook;
pub use client::ClientArgs;
pub use webhook::WebhookArgs;

/// Checks that an HTTP API really survives a retried POST: black-box probes of its
/// Idempotency-Key support (missing key, replays, concurrent duplicates, payload mismatch, key
/// syntax, tenant scope, persistence across restarts), with the exact exchanges as evidence.
#[derive(Parser)]
#[command(name = "idem-check", version, max_term_width = 98, after_long_help = idem_check::exit::HELP)]
pub struct Opts {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the probes against a URL, a target file, or the bundled reference server.
    #[command(after_long_help = idem_check::exit::HELP)]
    Run(Box<RunArgs>),
    /// List every probe: id, group, section, check severities and what it needs.
    List(ListArgs),
    /// Check a webhook consumer: play its sender (signed as the scheme's real senders sign)
    /// and judge that every redelivered, replayed or concurrent event is applied exactly once
    /// and every forgery refused.
    #[command(after_long_help = idem_check::exit::HELP)]
    Webhook(Box<WebhookArgs>),
    /// Check exactly-once under load: many keys, each sent as a burst of duplicates plus late
    /// retries, with many requests in flight. Not part of `run`.
    #[command(after_long_help = idem_check::exit::HELP)]
    Stress(Box<StressArgs>),
    /// Judge the JSON reports of `stress --segment` runs as one run: every key once across the
    /// segments, and the effect counter over the union of their windows.
    #[command(after_long_help = idem_check::exit::HELP)]
    Merge(MergeArgs),
    /// Check a client or SDK instead of a server: run its command against a fake API that drops
    /// responses, refuses and throttles, and judge how it retries.
    #[command(
        after_long_help = idem_check::exit::HELP,
        mut_arg("json", |a| a.help("Write a JSON report (schema idem-check.client/1)."))
    )]
    Client(Box<ClientArgs>),
    /// Build one table across implementations from JSON reports (files or folders).
    Matrix(MatrixArgs),
    /// Send one probe's scenario from a JSON report again, against the same target: its burst,
    /// its dropped answer and retries, or one exchange; prints the counter before and after.
    #[command(after_long_help = REPRODUCE_HELP)]
    Reproduce(ReproduceArgs),
    /// List the operations of an OpenAPI or Swagger document that take an idempotency key.
    #[command(after_long_help = idem_check::exit::HELP)]
    Discover(DiscoverArgs),
    /// Write one commented target file per operation of an OpenAPI or Swagger document that
    /// takes an idempotency key, to edit before `run --target FILE`.
    #[command(after_long_help = idem_check::exit::HELP)]
    Init(InitArgs),
    /// Print a shell completion script: `idem-check completions bash > /etc/bash_completion.d/idem-check`.
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
    /// Print the man page, or write one page per command into DIR.
    Man {
        /// Write idem-check.1, idem-check-run.1, … here instead of printing idem-check.1.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Explain one probe: what it sends, what it expects, and why.
    Explain {
        /// The probe id (see `idem-check list`).
        id: String,
        /// The suite whose expectations to show.
        #[arg(long, default_value = idem_check::suite::DEFAULT_SUITE, value_name = "NAME|FILE")]
        suite: String,
    },
}

/// `idem-check matrix`.
#[derive(Args)]
pub struct MatrixArgs {
    /// JSON reports (`run --report-json`), or folders of them; `NAME=FILE` titles a column.
    #[arg(value_name = "REPORT", required = true)]
    pub reports: Vec<String>,

    /// Write the table as Markdown here (default: print it).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    /// Write the table as a self-contained HTML page here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// How `discover` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DiscoverFormat {
    /// One aligned line per operation.
    #[default]
    Table,
    /// JSON, schema idem-check.discover/1.
    Json,
}

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

/// `idem-check discover`.
#[derive(Args)]
pub struct DiscoverArgs {
    /// The API description: an OpenAPI 3.0/3.1 or Swagger 2.0 document, JSON or YAML, a file
    /// path or an http(s) URL.
    #[arg(value_name = "SPEC")]
    pub spec: String,

    #[command(flatten)]
    pub openapi: OpenApiArgs,

    #[command(flatten)]
    pub connection: ConnectionArgs,

    /// Output format.
    #[arg(long, value_enum, default_value_t = DiscoverFormat::Table, value_name = "FORMAT")]
    pub format: DiscoverFormat,
}

/// `idem-check init`.
#[derive(Args)]
pub struct InitArgs {
    /// The API description (file path or http(s) URL).
    #[arg(long = "openapi", value_name = "SPEC")]
    pub spec: String,

    /// The folder to write the target files to (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    #[command(flatten)]
    pub openapi: OpenApiArgs,

    #[command(flatten)]
    pub connection: ConnectionArgs,
}

#[derive(Args)]
pub struct ListArgs {
    /// The suite whose expectations to show.
    #[arg(long, default_value = idem_check::suite::DEFAULT_SUITE, value_name = "NAME|FILE")]
    pub suite: String,
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

/// Where reports go and how they look: shared by `run` and `stress`.
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

/// `idem-check run`.
#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,

    /// Run only this probe, or this group: key-syntax, enforcement, scope, durability
    /// (repeatable, or a comma-separated list).
    #[arg(long, value_name = "ID|GROUP", value_delimiter = ',')]
    pub probe: Vec<String>,

    /// Do not run this probe or group (repeatable, or a comma-separated list).
    #[arg(long, value_name = "ID|GROUP", value_delimiter = ',')]
    pub skip: Vec<String>,

    /// Fail on recommended checks too (WARN becomes FAIL).
    #[arg(long)]
    pub strict: bool,

    /// How keys are written: quoted (RFC 8941 Strings), bare, or auto — the suite's form, falling
    /// back to bare keys when the API refuses the quoted form at the pre-flight (quoted-key then
    /// FAILs and every report says so)
    #[arg(long, value_name = "FORM", default_value = "auto")]
    pub key_form: idem_check::keys::KeyForm,

    #[command(flatten)]
    pub report: ReportArgs,
}

/// `idem-check stress`.
#[derive(Args)]
pub struct StressArgs {
    #[command(flatten)]
    pub target: TargetArgs,

    /// How many fresh keys to send (the run also stops at --duration).
    #[arg(long, default_value_t = 2000, value_name = "K")]
    pub keys: usize,

    /// How many times each key is sent: a synchronised burst, then late retries (a quarter).
    #[arg(long, default_value_t = 8, value_name = "D")]
    pub duplicates: usize,

    /// The most requests in flight at once; HTTP/1.1 requests go on at most as many kept-alive
    /// connections to each origin, reused from key to key.
    #[arg(long, default_value_t = 64, value_name = "C")]
    pub concurrency: usize,

    /// The longest the run may take; no new key starts after it.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "60s")]
    pub duration: Duration,

    /// Send at most N requests per second (1 to 1000000), on average over the run, to hold a
    /// steady load: keys start D/N seconds apart, and each key's burst still lands at once.
    /// Without it, stress sends as fast as the target answers.
    #[arg(long, value_name = "N", value_parser = parse_rate, allow_hyphen_values = true)]
    pub rate: Option<u32>,

    /// Run only the I-th of N disjoint parts of the keys (every N-th key), for one run split
    /// across processes or machines; `idem-check merge` judges the segments' JSON reports as one
    /// run (each segment judges its own keys, the merge the counter). Needs --run-id.
    #[arg(long, value_name = "I/N", requires = "run_id")]
    pub segment: Option<idem_check::stress::segment::SegmentSpec>,

    /// With --segment: the run the segment belongs to, the same for every segment (a CI run
    /// id, a Job name); it names the keys, so two runs never share one.
    #[arg(long, value_name = "ID", requires = "segment", value_parser = parse_run_id)]
    pub run_id: Option<String>,

    /// With --provider-listen (or --reference --provider): the fake provider commits each
    /// key's first call and closes the connection without answering, so the API must retry
    /// with the same provider key; one that draws a new key per attempt charges twice.
    #[arg(long)]
    pub provider_lost_answers: bool,

    /// Reports; JUnit holds one testcase, `stress`.
    #[command(flatten)]
    pub report: ReportArgs,
}

fn parse_run_id(s: &str) -> Result<String, String> {
    idem_check::stress::segment::valid_run_id(s).map(|()| s.to_string())
}

/// Exit codes of `reproduce`.
const REPRODUCE_HELP: &str = "Exit codes:
  0    sent; the counter rose by at most one (or one exchange was sent again)
  1    usage error (an unknown probe or exchange, a variable not set)
  2    the report is missing, is not a run report, or cannot be sent again
  3    the target did not answer
  4    a burst or a lost response executed more than once: the counter rose by more than one";

/// `idem-check reproduce`.
#[derive(Args)]
pub struct ReproduceArgs {
    /// A JSON report of `idem-check run` or `idem-check webhook` (--report-json FILE).
    #[arg(value_name = "REPORT.json")]
    pub report: PathBuf,

    /// The probe whose scenario to send again.
    #[arg(long, value_name = "ID")]
    pub probe: String,

    /// Send only this exchange of the probe again, exactly as recorded (its key too).
    #[arg(long, value_name = "N")]
    pub exchange: Option<usize>,

    /// How many bursts to send at most, each with a fresh key and its own counter reads,
    /// stopping at the first that executes twice: a race shows by chance (as many as the
    /// probe sends).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub attempts: usize,

    /// The value of a variable the report's masked values name (IDEM_TOKEN_A=…), instead of
    /// the environment's (repeatable).
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
}

fn parse_var(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.to_string()))
        }
        _ => Err(format!("{s:?} is not NAME=VALUE")),
    }
}

/// `idem-check merge`.
#[derive(Args)]
pub struct MergeArgs {
    /// The JSON reports of every segment of one run (`stress --segment I/N --run-id ID
    /// --report-json FILE`).
    #[arg(value_name = "REPORT.json", required = true)]
    pub reports: Vec<PathBuf>,

    /// Reports of the merged run; JUnit holds one testcase, `stress`.
    #[command(flatten)]
    pub report: ReportArgs,
}

/// `--rate`: a whole number of requests per second, from 1 to [`idem_check::stress::MAX_RATE`].
fn parse_rate(s: &str) -> Result<u32, String> {
    let max = idem_check::stress::MAX_RATE;
    let wanted = format!("expected requests per second, a whole number from 1 to {max}");
    match s.trim().parse::<u64>() {
        Ok(n) if (1..=u64::from(max)).contains(&n) => Ok(n as u32),
        Ok(0) => Err(format!("0 would send nothing; {wanted}")),
        Ok(_) => Err(format!("more than {max} requests per second; {wanted}")),
        Err(_) => Err(wanted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asks whether `T` implements `Debug`: see [`implements_debug`].
    struct DebugProbe<T>(std::marker::PhantomData<T>);

    /// The answer when `T` does not: method lookup falls back to the trait.
    trait NoDebug {
        fn implements_debug(&self) -> bool {
            false
        }
    }

    impl<T> NoDebug for DebugProbe<T> {}

    impl<T: std::fmt::Debug> DebugProbe<T> {
        /// The answer when `T` does: an inherent method wins over the trait's.
        fn implements_debug(&self) -> bool {
            true
        }
    }

    /// Whether the type implements `Debug`, decided where the type is named (in a generic
    /// function the bound would be unknown and the answer always no).
    macro_rules! implements_debug {
        ($t:ty) => {
            DebugProbe::<$t>(std::marker::PhantomData).implements_debug()
        };
    }

    /// The parsed command line holds what was typed: `-H` credentials, `--secret` values, proxy
    /// passwords, commands with secrets in them. None of its structs can be shown with `{:?}`, so
    /// no log line or panic message can print them; what a run shows goes through its
    /// [`TargetSpec`](idem_check::target::TargetSpec), whose `Debug` masks them.
    #[test]
    fn the_parsed_command_line_has_no_debug() {
        let debug = [
            ("Opts", implements_debug!(Opts)),
            ("Command", implements_debug!(Command)),
            ("RunArgs", implements_debug!(RunArgs)),
            ("StressArgs", implements_debug!(StressArgs)),
            ("ClientArgs", implements_debug!(ClientArgs)),
            ("DiscoverArgs", implements_debug!(DiscoverArgs)),
            ("InitArgs", implements_debug!(InitArgs)),
            ("TargetArgs", implements_debug!(TargetArgs)),
            ("InputFlags", implements_debug!(InputFlags)),
            ("ConnectionArgs", implements_debug!(ConnectionArgs)),
            ("OpenApiArgs", implements_debug!(OpenApiArgs)),
            ("ReportArgs", implements_debug!(ReportArgs)),
        ];
        let shown: Vec<&str> = debug.iter().filter(|(_, d)| *d).map(|(n, _)| *n).collect();
        assert!(shown.is_empty(), "Debug on {shown:?}");
        // The probe tells the two apart.
        assert!(implements_debug!(idem_check::config::TargetSpec));
    }
}
