//! `idem-check discover SPEC`: the operations of an API description that take an idempotency
//! key, as a table or JSON; and loading a description with the options every `--openapi`
//! command shares.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use super::{emit, Result};
use crate::cli::{ConnectionArgs, OpenApiArgs};
use idem_check::discover::{Discovery, Operation, Options, Spec};
use idem_check::exit::ExitCode;
use idem_check::http::Connector;

/// How `discover` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DiscoverFormat {
    /// One aligned line per operation.
    #[default]
    Table,
    /// JSON, schema idem-check.discover/1.
    Json,
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

/// How long fetching a document may take when no `--timeout` applies.
pub(super) const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) async fn discover(args: &DiscoverArgs) -> Result<ExitCode> {
    let (spec, found) = load(&args.spec, &args.openapi, &args.connection, FETCH_TIMEOUT).await?;
    let ops = found.select(&args.openapi.operations)?;
    match args.format {
        DiscoverFormat::Json => {
            let rows: Vec<serde_json::Value> = ops
                .iter()
                .map(|o| {
                    serde_json::json!({
                        "method": o.method,
                        "path": o.path,
                        "operation_id": o.operation_id,
                        "header": o.key.header(),
                        "carrier": o.key.to_string(),
                        "required": o.required,
                        "body": o.body.source.as_str(),
                        "notes": o.notes,
                    })
                })
                .collect();
            let doc = serde_json::json!({
                "schema": idem_check::discover::SCHEMA,
                "document": spec.source,
                "version": found.version,
                "operations": rows,
                "skipped": found.skipped,
            });
            let json = serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?;
            emit(&format!("{json}\n"))?;
        }
        DiscoverFormat::Table => emit(&table(&found, &ops))?,
    }
    for s in &found.skipped {
        eprintln!("{}", s.line());
    }
    // What a $ref that could not be read left out of an operation's body: the operation is
    // still listed and runnable, with less of its body known.
    for o in &ops {
        for note in &o.notes {
            let line = format!(
                "note on {} {} ({}): {note}",
                o.method, o.path, o.operation_id
            );
            eprintln!("{}", idem_check::redact::sanitize_line(&line));
        }
    }
    Ok(ExitCode::Ok)
}

/// Loads, parses and examines a document with the `--base-url`, `--key-header` and
/// `--path-param` given, fetching what is named by URL with the connection flags.
pub(super) async fn load(
    source: &str,
    args: &OpenApiArgs,
    connection: &ConnectionArgs,
    timeout: Duration,
) -> anyhow::Result<(Spec, Discovery)> {
    let mut path_params = BTreeMap::new();
    for p in &args.path_param {
        let (name, value) = p
            .split_once('=')
            .with_context(|| format!("--path-param {p:?} is not of the form NAME=VALUE"))?;
        path_params.insert(name.trim().to_string(), value.to_string());
    }
    let opts = Options {
        key_headers: args.key_header.clone(),
        path_params,
        base_url: args.base_url.clone(),
    };
    let spec = idem_check::discover::load::load(source, timeout, &fetcher(connection)?).await?;
    let found = idem_check::discover::discover(&spec, &opts)?;
    Ok((spec, found))
}

/// The connector documents are fetched with: `connection`'s flags and the process
/// environment's proxy variables ([`super::flags::document_connector`]).
pub(super) fn fetcher(connection: &ConnectionArgs) -> anyhow::Result<Arc<Connector>> {
    let env = |name: &str| std::env::var(name).ok();
    Ok(Arc::new(super::flags::document_connector(
        connection, &env,
    )?))
}

/// The `discover` table: one aligned row per operation, then a count.
fn table(found: &Discovery, ops: &[&Operation]) -> String {
    let rows: Vec<[String; 6]> = ops
        .iter()
        .map(|o| {
            [
                o.method.clone(),
                o.path.clone(),
                o.operation_id.clone(),
                o.key.label(),
                if o.required { "required" } else { "optional" }.to_string(),
                o.body.source.as_str().to_string(),
            ]
            .map(|c| idem_check::redact::sanitize_line(&c))
        })
        .collect();
    let head = ["METHOD", "PATH", "OPERATION", "KEY IN", "KEY", "BODY"].map(String::from);
    let mut widths = [0usize; 6];
    for r in std::iter::once(&head).chain(&rows) {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in std::iter::once(&head).chain(&rows) {
        let line: Vec<String> = r
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out.push_str(&format!(
        "\n{} operation{} take{} an idempotency key ({}); {} without one; {} skipped\n",
        found.operations.len(),
        if found.operations.len() == 1 { "" } else { "s" },
        if found.operations.len() == 1 { "s" } else { "" },
        found.version,
        found.without_key,
        found.skipped.len()
    ));
    out
}
