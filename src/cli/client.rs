//! `idem-check client`'s options.

use std::time::Duration;

use clap::Args;

use super::ReportArgs;

use idem_check::inputs;

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
