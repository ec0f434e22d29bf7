//! `discover`, `init --openapi`, and the `--openapi` path of `run` and `stress`: from parsed
//! options to an exit code. Each discovered operation becomes an ordinary target description
//! (URL, method, declared key header, body, id pointer), the usual target flags are laid over
//! it, and the ordinary single-operation run checks it.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use anyhow::{bail, Context as _, Result};

use super::run::{OpenApiReport, OperationReport};
use super::{Discovery, Operation, Options, Skipped, Spec};
use crate::app::{
    apply_flags, emit, finish_reports, interrupted, report_files, run_options,
    with_proxy_environment, with_secret_flags, ProgressObserver,
};
use crate::cli::{DiscoverArgs, DiscoverFormat, InitArgs, OpenApiArgs, RunArgs, TargetArgs};
use crate::config::{Config, RunOptions, TargetSpec};
use crate::exit::{AppError, ExitCode};
use crate::report::terminal::{self, Progress};
use crate::report::{self, Format, RenderOptions};

/// How long fetching a document may take when no `--timeout` applies.
const FETCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// `idem-check discover SPEC`.
pub async fn discover(args: &DiscoverArgs) -> Result<ExitCode> {
    let (spec, found) = load(&args.spec, &args.openapi, FETCH_TIMEOUT).await?;
    let ops = select(&found, &args.openapi.operations)?;
    match args.format {
        DiscoverFormat::Json => {
            let rows: Vec<serde_json::Value> = ops
                .iter()
                .map(|o| {
                    serde_json::json!({
                        "method": o.method,
                        "path": o.path,
                        "operation_id": o.operation_id,
                        "header": o.header,
                        "required": o.required,
                        "body": o.body.source.as_str(),
                    })
                })
                .collect();
            let doc = serde_json::json!({
                "schema": super::SCHEMA,
                "document": spec.source,
                "version": found.version,
                "operations": rows,
                "skipped": found.skipped,
            });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        DiscoverFormat::Table => print!("{}", table(&found, &ops)),
    }
    for s in &found.skipped {
        eprintln!("{}", skipped_line(s));
    }
    Ok(ExitCode::Ok)
}

/// `idem-check init --openapi SPEC --out DIR`.
pub async fn init(args: &InitArgs) -> Result<ExitCode> {
    let (spec, found) = load(&args.spec, &args.openapi, FETCH_TIMEOUT).await?;
    let ops = select(&found, &args.openapi.operations)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    for op in ops {
        let path = args.out.join(super::init::file_name(op));
        report::file::write_atomically(&path, &super::init::target_file(op, &spec.source))
            .with_context(|| format!("could not write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    for s in &found.skipped {
        eprintln!("{}", skipped_line(s));
    }
    Ok(ExitCode::Ok)
}

/// The one operation `stress --openapi` checks: the document must yield exactly one (choose
/// it with `--operation ID`).
pub async fn single_target(t: &TargetArgs) -> Result<TargetSpec> {
    let (_, mut targets, skipped) = targets(t).await?;
    if targets.len() != 1 {
        let ids: Vec<&str> = targets
            .iter()
            .map(|(o, _)| o.operation_id.as_str())
            .collect();
        bail!(
            "stress checks one operation; choose one of {} with --operation ID",
            ids.join(", ")
        );
    }
    if let Some(s) = skipped.first() {
        bail!("{}", skipped_line(s));
    }
    Ok(targets.remove(0).1)
}

/// `idem-check run --openapi SPEC`: every selected operation, one after the other.
pub async fn run(args: &RunArgs) -> Result<ExitCode, AppError> {
    let files = report_files(&args.report)?;
    let (found, targets, skipped) = targets(&args.target).await?;
    let base_opts = run_options(
        &args.target,
        RunOptions {
            strict: args.strict,
            ..RunOptions::default()
        },
    );
    let mut configs = Vec::new();
    for (op, target) in targets {
        let opts = RunOptions {
            label: Some(
                args.target
                    .label
                    .clone()
                    .unwrap_or_else(|| op.operation_id.clone()),
            ),
            ..base_opts.clone()
        };
        let config = Config::build(target, &opts, None)
            .with_context(|| format!("operation {}", op.operation_id))?;
        let selection = crate::probes::select(&config.suite, &args.probe, &args.skip)?;
        configs.push((op, Arc::new(config), selection));
    }
    // Every operation shares the flags, so the first one's secrets are every run's.
    let (secrets, key_header) = configs
        .first()
        .map(|(_, c, _)| (c.secrets.clone(), c.suite.header.clone()))
        .unwrap_or_default();
    let render = RenderOptions {
        color: terminal::use_color(args.report.color),
        secrets,
        key_header,
        max_body: args
            .report
            .max_body_bytes
            .unwrap_or(Format::Terminal.default_max_body()),
    };
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let start = Instant::now();
    let mut runs = Vec::new();
    for (op, config, selection) in configs {
        let progress = Progress::new(selection.len() as u64, std::io::stderr().is_terminal());
        let report = crate::runner::run(
            config.clone(),
            selection,
            &ProgressObserver::new(&progress, &render),
            interrupted(),
        )
        .await
        .map_err(AppError::runtime)?;
        progress.finish();
        let stop = report.interrupted;
        runs.push(OperationReport::new(&op, report));
        if stop {
            break;
        }
    }
    let report = OpenApiReport::new(
        &args.target.openapi.clone().unwrap_or_default(),
        &found.version,
        started_at,
        start.elapsed().as_secs_f64() * 1000.0,
        args.strict,
        runs,
        skipped,
    );
    emit(&report.terminal(&render, args.strict))?;
    let code = ExitCode::for_run(&report.summary, report.interrupted);
    Ok(finish_reports(&report, &files, &render, &args.report, code))
}

/// The discovered operations as target descriptions with the flags laid over them, and the
/// operations that cannot be called (with the reason).
async fn targets(
    t: &TargetArgs,
) -> Result<(Discovery, Vec<(Operation, TargetSpec)>, Vec<Skipped>)> {
    let source = t.openapi.as_deref().unwrap_or_default();
    let (_, found) = load(source, &t.openapi_args, t.timeout).await?;
    let selected: Vec<Operation> = select(&found, &t.openapi_args.operations)?
        .into_iter()
        .cloned()
        .collect();
    let mut skipped = found.skipped.clone();
    let mut out = Vec::new();
    for op in selected {
        match &op.url {
            Ok(url) => {
                let spec = with_secret_flags(apply_flags(base_target(&op, url, &t.headers), t)?, t);
                let spec = with_proxy_environment(spec, t);
                out.push((op, spec));
            }
            Err(reason) => skipped.push(Skipped {
                method: op.method.clone(),
                path: op.path.clone(),
                operation_id: op.operation_id.clone(),
                pointer: op.pointer.clone(),
                reason: reason.clone(),
            }),
        }
    }
    if out.is_empty() {
        let why: Vec<String> = skipped.iter().map(skipped_line).collect();
        bail!(
            "no operation of {source} can be checked: {}",
            why.join("; ")
        );
    }
    Ok((found, out, skipped))
}

/// What the document says about `op`; the user's `-H` lines replace same-named ones.
fn base_target(op: &Operation, url: &str, user_headers: &[String]) -> TargetSpec {
    let given = |name: &str| {
        user_headers.iter().any(|h| {
            h.split_once(':')
                .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        })
    };
    let mut headers = Vec::new();
    if let Some(ct) = &op.body.content_type {
        if !given("Content-Type") {
            headers.push(format!("Content-Type: {ct}"));
        }
    }
    TargetSpec {
        url: url.to_string(),
        method: Some(op.method.clone()),
        headers,
        body: op.body.text.clone(),
        id_pointer: op.id_pointer.clone(),
        key_header: Some(op.header.clone()),
        ..TargetSpec::default()
    }
}

/// Loads, parses and examines a document.
async fn load(
    source: &str,
    args: &OpenApiArgs,
    timeout: std::time::Duration,
) -> Result<(Spec, Discovery)> {
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
    let spec = super::load::load(source, timeout).await?;
    let found = super::discover(&spec, &opts)?;
    Ok((spec, found))
}

/// The operations named with `--operation` (all when none is); an unknown id is an error
/// listing the known ones.
fn select<'a>(found: &'a Discovery, ids: &[String]) -> Result<Vec<&'a Operation>> {
    for id in ids {
        if !found.operations.iter().any(|o| &o.operation_id == id) {
            let known: Vec<&str> = found
                .operations
                .iter()
                .map(|o| o.operation_id.as_str())
                .collect();
            bail!(
                "no operation {id:?} takes an idempotency key; those that do: {}",
                known.join(", ")
            );
        }
    }
    Ok(found
        .operations
        .iter()
        .filter(|o| ids.is_empty() || ids.contains(&o.operation_id))
        .collect())
}

fn skipped_line(s: &Skipped) -> String {
    crate::redact::sanitize_line(&format!(
        "skipped {} {} ({}) at {}: {}",
        s.method, s.path, s.operation_id, s.pointer, s.reason
    ))
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
                o.header.clone(),
                if o.required { "required" } else { "optional" }.to_string(),
                o.body.source.as_str().to_string(),
            ]
            .map(|c| crate::redact::sanitize_line(&c))
        })
        .collect();
    let head = ["METHOD", "PATH", "OPERATION", "HEADER", "KEY", "BODY"].map(String::from);
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
