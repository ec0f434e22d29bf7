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
    /// A JSON report of `idem-check run` (--report-json FILE).
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
    pub auth: Option<idem_check::client::auth::Auth>,

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

    /// The longest a count waits for the counter to be quiet.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "30s")]
    pub settle_limit: Duration,

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
