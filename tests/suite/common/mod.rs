//! Runs the checker, as a library, against the reference server started in-process on
//! 127.0.0.1:0 (optionally with a fault).

#![allow(dead_code)]

pub mod binary;
pub mod json_report;
pub mod junit_schema;
pub mod port;
pub mod python;
pub mod stress;
pub mod target_flags;
pub mod tls;

use std::sync::Arc;

use idem_check::carrier::Place;
use idem_check::config::{Config, RunOptions};
use idem_check::probes::select;
use idem_check::redact::Secrets;
use idem_check::reference::Reference;
use idem_check::report::RunReport;
use idem_check::runner;
use idem_reference_server::Fault;

/// Runs `only` (all when empty) of `config`'s suite, as `idem-check run` would but without
/// progress output.
pub async fn run_quietly(config: Config, only: &[&str]) -> RunReport {
    let only: Vec<String> = only.iter().map(|p| p.to_string()).collect();
    let selection = select(&config.suite, &only, &[]).expect("known probes");
    runner::run(
        Arc::new(config),
        selection,
        &runner::each::Quiet,
        std::future::pending(),
    )
    .await
    .expect("run completes")
}

/// Runs `probes` (all when empty) of the default suite against the reference server.
pub async fn run_reference(fault: Option<Fault>, probes: &[&str], strict: bool) -> RunReport {
    run_reference_with_secrets(fault, probes, strict).await.0
}

/// [`run_reference`], also returning the run's secrets (to render its evidence as the binary
/// would).
pub async fn run_reference_with_secrets(
    fault: Option<Fault>,
    probes: &[&str],
    strict: bool,
) -> (RunReport, Secrets) {
    let opts = RunOptions {
        strict,
        ..run_options()
    };
    run_reference_in(fault, None, probes, opts).await
}

/// [`run_reference`] with the server and the checker reading the key from `key`, and the run's
/// options `opts` (from [`run_options`]).
pub async fn run_reference_keyed(
    fault: Option<Fault>,
    key: Option<&Place>,
    probes: &[&str],
    opts: RunOptions,
) -> RunReport {
    run_reference_in(fault, key, probes, opts).await.0
}

async fn run_reference_in(
    fault: Option<Fault>,
    key: Option<&Place>,
    probes: &[&str],
    opts: RunOptions,
) -> (RunReport, Secrets) {
    // The correct server calls the generic fake, so every probe runs; a provider fault needs
    // the provider it breaks the calls to. Other faults run as they always have, without one
    // (the downstream probes SKIP).
    let provider = fault
        .is_none_or(|f| f.needs_provider())
        .then(|| idem_check::provider::profile::find("generic"))
        .flatten();
    let reference = Reference::start_calling(fault, None, key, provider.map(Into::into))
        .await
        .expect("reference server starts");
    let config = Config::build(reference.target(), &opts, Some(reference.restart_hook()))
        .expect("reference target is valid");
    let secrets = config.secrets.clone();
    let report = run_quietly(config, probes).await;
    reference.stop().await.expect("reference server stops");
    (report, secrets)
}

/// The options of a run with the default suite and every flag at its default.
pub fn run_options() -> RunOptions {
    RunOptions::new(
        idem_check::catalog::load_suite(idem_check::suite::DEFAULT_SUITE)
            .expect("the default suite loads"),
    )
}

/// Whether `id` is a `downstream` probe: those SKIP on a target without `--provider-listen`.
pub fn downstream(id: &str) -> bool {
    idem_check::probes::find(id)
        .is_some_and(|p| p.meta.group == idem_check::probes::Group::Downstream)
}

/// "id OUTCOME reason" lines, for assertion messages.
pub fn outcomes(report: &RunReport) -> String {
    report
        .probes
        .iter()
        .map(|p| format!("{} {} — {}", p.id, p.outcome.as_str(), p.reason))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The path of a document in fixtures/openapi/.
pub fn openapi_fixture(name: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/openapi")
        .join(name)
        .display()
        .to_string()
}

/// The OpenAPI description `reference` serves at `/openapi.json`, parsed, for tests that edit
/// it before handing it to the checker.
pub async fn reference_description(reference: &Reference) -> serde_json::Value {
    let text = reqwest::get(format!("{}/openapi.json", reference.base))
        .await
        .and_then(|r| r.error_for_status())
        .expect("the reference server serves its description")
        .text()
        .await
        .expect("the description arrives whole");
    serde_json::from_str(&text).expect("the description is JSON")
}
