//! `idem-reference-server`: flags → [`Config`] → [`idem_reference_server::run`].

#![forbid(unsafe_code)]

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use idem_reference_server::{Config, DbLocation, Fault, ProviderProfile, Tenant, WebhookFault};

/// A payments API that implements the Idempotency-Key contract correctly, with fault switches.
///
/// Serves POST /api/payments and POST /api/payouts (idempotent), GET /api/payments/{id},
/// GET /api/payments/count (the effect counter), GET /healthz and GET /openapi.json (its OpenAPI
/// description). Prints `listening on http://ADDR` on stdout once its store is open and it accepts connections.
#[derive(Debug, Parser)]
#[command(version, max_term_width = 98)]
struct Opts {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,

    /// Where records and payments live: a SQLite file (`:memory:` only with --fault
    /// memory-store), or a PostgreSQL database shared by replicas (postgres://USER@HOST:PORT/DB).
    #[arg(long, value_name = "PATH|URL", default_value = "idem-reference.db")]
    db: String,

    /// PostgreSQL only: connections this instance keeps (statements are pipelined on them);
    /// replicas × N must stay below the server's max_connections.
    #[arg(long, value_name = "N", default_value_t = 16)]
    db_pool: usize,

    /// A tenant and its bearer token (repeatable). Without any, the demo tenants
    /// tenant-a/token-a and tenant-b/token-b are used.
    #[arg(long = "token", value_name = "TENANT=SECRET", value_parser = parse_tenant)]
    tokens: Vec<Tenant>,

    /// How long a completed key is remembered, e.g. 24h, 90m.
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = humantime::parse_duration)]
    key_ttl: Duration,

    /// How long a claim survives without a heartbeat, e.g. 30s.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    lease: Duration,

    /// Honour X-Test-Delay-Ms and X-Test-Crash (needed by the checker's concurrency probes).
    #[arg(long)]
    test_hooks: bool,

    /// The header that carries the idempotency key, for an API that names it otherwise (e.g.
    /// X-Idempotency-Key).
    #[arg(long, value_name = "NAME", default_value = idem_reference_server::DEFAULT_KEY_HEADER)]
    key_header: String,

    /// Read the idempotency key from the JSON body at this pointer (e.g. /idempotency_key),
    /// as Square's API takes it, instead of from a header: an opaque token.
    #[arg(long, value_name = "POINTER")]
    key_in_body: Option<String>,

    /// Exhibit one deliberate fault (requires --test-hooks); see the README for the list.
    #[arg(long, value_name = "NAME")]
    fault: Option<Fault>,

    /// For --fault race: microseconds between the unlocked lookup and the insert.
    #[arg(long, value_name = "N", default_value_t = 0)]
    race_window_us: u64,

    /// Commit each store operation in its own transaction (to measure group commit).
    #[arg(long)]
    no_group_commit: bool,

    /// How long a client may take to send a request head, from its first byte; a slower one
    /// (slowloris) is disconnected.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    header_read_timeout: Duration,

    /// How long a client may take to send a request body; a slower one gets 408.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    body_read_timeout: Duration,

    /// Serve the webhook consumer, POST /webhooks/{standard,svix,stripe,github,shopify,slack},
    /// with this secret (whsec_ followed by base64).
    #[arg(long, value_name = "SECRET")]
    webhook_secret: Option<String>,

    /// A second webhook source's secret; its event ids are deduplicated apart.
    #[arg(long, value_name = "SECRET")]
    webhook_secret_b: Option<String>,

    /// Give the webhook consumer one deliberate fault (requires --test-hooks); see the README.
    #[arg(long, value_name = "NAME")]
    webhook_fault: Option<WebhookFault>,

    /// For --webhook-fault dedupe-ttl: how long a processed event id is remembered (ms).
    #[arg(long, value_name = "MS", default_value_t = 300_000)]
    webhook_dedupe_ttl_ms: u64,

    /// For --webhook-fault slow-sync-handler: how long each event's work takes, e.g. 16s.
    #[arg(long, value_name = "DURATION", default_value = "16s", value_parser = humantime::parse_duration)]
    webhook_slow_handler: Duration,

    /// Charge payments and pay out payouts at this payment provider (its base URL, http or
    /// https), with a provider key derived from tenant, operation and client key.
    #[arg(long, value_name = "URL")]
    provider_url: Option<String>,

    /// Which provider's API --provider-url serves: stripe, adyen, square, paypal, checkout,
    /// gocardless or generic.
    #[arg(long, value_name = "NAME", default_value = "generic")]
    provider_profile: ProviderProfile,

    /// One provider attempt's budget in milliseconds, from sending to the whole answer.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    provider_timeout_ms: u64,

    /// Provider attempts per client request before its outcome counts as unknown (503).
    #[arg(long, value_name = "N", default_value_t = 3)]
    provider_attempts: u32,

    /// A PEM file of extra root certificates for an https --provider-url.
    #[arg(long, value_name = "FILE")]
    provider_ca: Option<std::path::PathBuf>,

    /// How long a webhook event's claim holds when its consumer dies mid-event: a redelivery
    /// applies it once this passed.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    webhook_lease: Duration,

    /// How long a kept-alive connection may wait for its next request.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    idle_timeout: Duration,

    /// How many connections are served at once; past it, a new client takes the place of the
    /// connection idle the longest, or waits until one ends.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
}

fn parse_tenant(s: &str) -> Result<Tenant, String> {
    match s.split_once('=') {
        Some((name, token)) if !name.is_empty() && !token.is_empty() => {
            Ok(Tenant::new(name, token))
        }
        _ => Err(format!("expected TENANT=SECRET, got {s:?}")),
    }
}

fn config_from(opts: Opts) -> Config {
    let mut config = Config::new(DbLocation::parse(&opts.db));
    config.db_pool = opts.db_pool;
    if opts.tokens.is_empty() {
        eprintln!("no --token given: using the demo tenants tenant-a/token-a and tenant-b/token-b");
    } else {
        config.tenants = opts.tokens;
    }
    config.key_ttl = opts.key_ttl;
    config.lease = opts.lease;
    config.test_hooks = opts.test_hooks;
    config.fault = opts.fault;
    config.key_header = opts.key_header;
    config.key_in_body = opts.key_in_body;
    config.race_window_us = opts.race_window_us;
    config.group_commit = !opts.no_group_commit;
    config.webhook_secret = opts.webhook_secret;
    config.webhook_secret_b = opts.webhook_secret_b;
    config.webhook_fault = opts.webhook_fault;
    config.webhook_dedupe_ttl = Duration::from_millis(opts.webhook_dedupe_ttl_ms);
    config.webhook_slow_handler = opts.webhook_slow_handler;
    config.provider_url = opts.provider_url;
    config.provider_profile = opts.provider_profile;
    config.provider_timeout = Duration::from_millis(opts.provider_timeout_ms);
    config.provider_attempts = opts.provider_attempts;
    config.provider_ca = opts.provider_ca;
    config.webhook_lease = opts.webhook_lease;
    config.limits = idem_reference_server::Limits {
        header_read: opts.header_read_timeout,
        body_read: opts.body_read_timeout,
        idle: opts.idle_timeout,
        max_connections: opts.max_connections as usize,
    };
    config
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let opts = Opts::parse();
    let listen = opts.listen;
    let config = config_from(opts);
    if let Err(e) = config.validate() {
        Opts::command().error(ErrorKind::ArgumentConflict, e).exit();
    }
    match serve(listen, config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("idem-reference-server: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(listen: SocketAddr, config: Config) -> anyhow::Result<()> {
    let shutdown = shutdown_signal();
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    // Printed once the store is open: whoever waits for this line may send at once.
    let announce = move || {
        let mut stdout = std::io::stdout();
        writeln!(stdout, "listening on http://{addr}").context("writing to stdout")?;
        stdout.flush().context("flushing stdout")
    };
    idem_reference_server::run_announcing(listener, config, shutdown, announce).await
}

/// Ctrl-C or SIGTERM: stop accepting, drain, close the store.
///
/// The handlers are installed when this is called, before the address is printed. Installed on
/// the future's first poll, they left a window: the accept loop could answer a first request
/// before polling it, and a SIGTERM sent then killed the server outright instead of draining.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let (interrupt, terminate) = {
        use tokio::signal::unix::{signal, SignalKind};
        let install = |kind: SignalKind, name: &str| {
            signal(kind)
                .inspect_err(|e| tracing::warn!(cause = %e, "cannot listen for {name}"))
                .ok()
        };
        (
            install(SignalKind::interrupt(), "Ctrl-C"),
            install(SignalKind::terminate(), "SIGTERM"),
        )
    };
    async move {
        #[cfg(unix)]
        {
            let recv = |signal: Option<tokio::signal::unix::Signal>| async move {
                match signal {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = recv(interrupt) => {}
                () = recv(terminate) => {}
            }
        }
        #[cfg(not(unix))]
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(cause = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
        tracing::info!("shutting down: draining in-flight requests");
    }
}
