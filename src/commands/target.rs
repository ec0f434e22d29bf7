//! The target of `run` and `stress`, from the target flags to a validated [`Config`]: the
//! bundled reference server started, an API description's operations, or a URL and target file
//! ([`super::flags`] lays the flags over the file that [`idem_check::target`] reads), then the run options and the
//! suite, and the connection settings applied.

use std::path::Path;
use std::sync::Arc;

use anyhow::bail;
use idem_reference_server::config::ConfigError;

use super::discover::load;
use super::{Interrupt, Result};
use crate::cli::TargetArgs;
use idem_check::carrier::Place;
use idem_check::config::{Config, RestartHook, RunOptions, TargetSpec};
use idem_check::discover::{Discovery, Operation, Skipped};
use idem_check::exit::AppError;
use idem_check::reference::{Calling, Reference};

/// Runs `work` with the validated config for the target the user described, starting the
/// bundled reference server when asked; `None` when Ctrl-C came during setup, with whatever was
/// set up stopped: a document being fetched is dropped at once, the reference server first
/// finishes starting (it is bounded). The reference server is stopped once `work` is done, and
/// on every other way out too (a config it cannot take, a run that failed, a report that could
/// not be written), so its store is closed before its temporary folder is removed: dropped
/// without [`Reference::stop`], the removal would race the server's shutdown.
pub(super) async fn with_target<T>(
    t: &TargetArgs,
    opts: RunOptions,
    interrupt: &Interrupt,
    work: impl AsyncFnOnce(Arc<Config>) -> Result<T>,
) -> Result<Option<T>> {
    let Some((target, hook, reference)) = start_target(t, interrupt).await? else {
        return Ok(None);
    };
    let done = match Config::build(target, &opts, hook) {
        Ok(config) => work(Arc::new(config)).await,
        Err(e) => Err(e.into()),
    };
    let stopped = match reference {
        Some(r) => r.stop().await.map_err(AppError::runtime),
        None => Ok(()),
    };
    // What went wrong first is the error to report; a failed stop only after a good run.
    let done = done?;
    stopped?;
    Ok(Some(done))
}

/// The target description the flags give, with the restart hook and the reference server it
/// brings when it is the bundled one (started here); `None` when Ctrl-C came during setup, with
/// the server stopped.
async fn start_target(
    t: &TargetArgs,
    interrupt: &Interrupt,
) -> Result<Option<(TargetSpec, Option<Arc<dyn RestartHook>>, Option<Reference>)>> {
    if let (Some(fault), false) = (&t.reference_fault, t.reference) {
        return Err(anyhow::anyhow!(
            "--reference-fault switches a fault on in the bundled reference server, which only \
             --reference starts: idem-check run --reference --reference-fault {fault}"
        )
        .into());
    }
    let mut reference = None;
    let mut hook: Option<Arc<dyn RestartHook>> = None;
    let target = if t.reference {
        super::flags::refused_with_reference(t)?;
        let fault = t
            .reference_fault
            .as_deref()
            .map(|f| f.parse().map_err(|e| anyhow::anyhow!("{e}")))
            .transpose()?;
        let key = match (&t.inputs.key_in_body, super::flags::key_header(t)?) {
            (Some(field), _) => Some(Place::Body(field.clone())),
            (None, Some(name)) => Some(Place::Header(name.to_string())),
            (None, None) => None,
        };
        let provider = t
            .inputs
            .provider
            .as_deref()
            .map(|name| {
                idem_check::provider::profile::named(name)
                    .map_err(|e| anyhow::anyhow!("--provider {e}"))
            })
            .transpose()?;
        if let (None, Some(_)) = (provider, &t.inputs.provider_tls) {
            return Err(anyhow::anyhow!(
                "--provider-tls serves the fake provider over HTTPS, which --reference calls only \
                 with --provider PROFILE: idem-check run --reference --provider generic --provider-tls FILE"
            )
            .into());
        }
        let calling = provider.map(|profile| Calling {
            profile,
            tls_ca: t.inputs.provider_tls.as_deref().map(Path::new),
        });
        let started =
            Reference::start_calling(fault, t.reference_db.as_deref(), key.as_ref(), calling).await;
        if interrupt.was_pressed() {
            if let Ok(r) = started {
                r.stop().await.map_err(AppError::runtime)?;
            }
            return Ok(None);
        }
        let r = started.map_err(|e| {
            // A setting the server refuses is the command line's to fix.
            if e.chain().any(|c| c.is::<ConfigError>()) {
                AppError::Usage(e.context("--reference"))
            } else {
                AppError::runtime(e.context("could not start the bundled reference server"))
            }
        })?;
        let mut spec = super::flags::reference(r.target(), t);
        // The reference server parses RFC 8941 Strings under whatever header name it is given.
        if spec.key_in_body.is_none() {
            spec.key_syntax.get_or_insert_with(|| "ietf".into());
        }
        hook = Some(r.restart_hook());
        reference = Some(r);
        spec
    } else if t.openapi.is_some() {
        match interrupt.unless_pressed(single_target(t)).await {
            Some(target) => target?,
            None => return Ok(None),
        }
    } else {
        super::flags::from_flags(t, &std::env::vars().collect())?
    };
    Ok(Some((with_proxy_environment(target, t), hook, reference)))
}

/// `target` with the environment's proxy variables, which its run's connector reads. The
/// in-process reference server is on loopback: only an explicit --proxy reaches it through a proxy.
fn with_proxy_environment(mut target: TargetSpec, t: &TargetArgs) -> TargetSpec {
    if !t.reference {
        target.net.proxy_env =
            idem_check::http::net::NetOptions::proxy_environment(&|name| std::env::var(name).ok());
    }
    target
}

/// The run options the target flags set (suite, timeout, label, release threads); the others
/// at their defaults.
pub(super) fn run_options(t: &TargetArgs) -> Result<RunOptions> {
    Ok(RunOptions {
        timeout: t.timeout,
        label: t.label.clone().or_else(|| {
            t.reference.then(|| match &t.reference_fault {
                Some(f) => format!("reference+{f}"),
                None => "reference".to_string(),
            })
        }),
        reference: t.reference && t.reference_fault.is_none(),
        release_threads: !t.no_release_threads,
        ..RunOptions::new(idem_check::catalog::load_suite(&t.suite)?)
    })
}

/// The one operation `stress --openapi` checks: the document must yield exactly one (choose
/// it with `--operation ID`).
async fn single_target(t: &TargetArgs) -> Result<TargetSpec> {
    let (_, mut targets, skipped) = openapi_targets(t).await?;
    if targets.len() != 1 {
        let ids: Vec<&str> = targets
            .iter()
            .map(|(o, _)| o.operation_id.as_str())
            .collect();
        return Err(anyhow::anyhow!(
            "stress checks one operation; choose one of {} with --operation ID",
            ids.join(", ")
        )
        .into());
    }
    if let Some(s) = skipped.first() {
        return Err(anyhow::anyhow!("{}", s.line()).into());
    }
    Ok(targets.remove(0).1)
}

/// The operations of `--openapi SPEC` as target descriptions with the flags laid over them, and
/// the operations that cannot be called (with the reason).
pub(super) async fn openapi_targets(
    t: &TargetArgs,
) -> anyhow::Result<(Discovery, Vec<(Operation, TargetSpec)>, Vec<Skipped>)> {
    let source = t.openapi.as_deref().unwrap_or_default();
    let (_, found) = load(source, &t.openapi_args, &t.connection, t.timeout).await?;
    let selected: Vec<Operation> = found
        .select(&t.openapi_args.operations)?
        .into_iter()
        .cloned()
        .collect();
    let mut skipped = found.skipped.clone();
    let mut out = Vec::new();
    for op in selected {
        match &op.url {
            Ok(url) => {
                let spec = super::flags::from_operation(&op, url, t)?;
                out.push((op, with_proxy_environment(spec, t)));
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
        let why: Vec<String> = skipped.iter().map(Skipped::line).collect();
        bail!(
            "no operation of {source} can be checked: {}",
            why.join("; ")
        );
    }
    Ok((found, out, skipped))
}
